//! gfx11 compute registers as the command processor sees them, and their bit fields.
//!
//! Offsets are relative to `SET_SH_REG_START` (0x2c00), the form `SET_SH_REG` carries.

/// First dword address `SET_SH_REG` can reach.
pub const SH_REG_START: u32 = 0x2c00;
/// One past the last.
pub const SH_REG_END: u32 = 0x3000;

pub const COMPUTE_DISPATCH_INITIATOR: u16 = 0x200;
pub const COMPUTE_START_X: u16 = 0x204;
pub const COMPUTE_START_Y: u16 = 0x205;
pub const COMPUTE_START_Z: u16 = 0x206;
pub const COMPUTE_NUM_THREAD_X: u16 = 0x207;
pub const COMPUTE_NUM_THREAD_Y: u16 = 0x208;
pub const COMPUTE_NUM_THREAD_Z: u16 = 0x209;
pub const COMPUTE_PIPELINESTAT_ENABLE: u16 = 0x20a;
pub const COMPUTE_PERFCOUNT_ENABLE: u16 = 0x20b;
pub const COMPUTE_PGM_LO: u16 = 0x20c;
pub const COMPUTE_PGM_HI: u16 = 0x20d;
pub const COMPUTE_DISPATCH_PKT_ADDR_LO: u16 = 0x20e;
pub const COMPUTE_DISPATCH_PKT_ADDR_HI: u16 = 0x20f;
pub const COMPUTE_DISPATCH_SCRATCH_BASE_LO: u16 = 0x210;
pub const COMPUTE_DISPATCH_SCRATCH_BASE_HI: u16 = 0x211;
pub const COMPUTE_PGM_RSRC1: u16 = 0x212;
pub const COMPUTE_PGM_RSRC2: u16 = 0x213;
pub const COMPUTE_RESOURCE_LIMITS: u16 = 0x215;
pub const COMPUTE_STATIC_THREAD_MGMT_SE0: u16 = 0x216;
pub const COMPUTE_STATIC_THREAD_MGMT_SE1: u16 = 0x217;
pub const COMPUTE_TMPRING_SIZE: u16 = 0x218;
pub const COMPUTE_STATIC_THREAD_MGMT_SE2: u16 = 0x219;
pub const COMPUTE_STATIC_THREAD_MGMT_SE3: u16 = 0x21a;
pub const COMPUTE_RESTART_X: u16 = 0x21b;
pub const COMPUTE_RESTART_Y: u16 = 0x21c;
pub const COMPUTE_RESTART_Z: u16 = 0x21d;
/// Follows the three restart registers: a four-value write from `COMPUTE_RESTART_X` (as
/// tinygrad's until its PR #9314) turns thread tracing off.
pub const COMPUTE_THREAD_TRACE_ENABLE: u16 = 0x21e;
pub const COMPUTE_PGM_RSRC3: u16 = 0x228;
pub const COMPUTE_STATIC_THREAD_MGMT_SE4: u16 = 0x22b;
pub const COMPUTE_USER_DATA_0: u16 = 0x240;
/// Number of `COMPUTE_USER_DATA_n` registers.
pub const COMPUTE_USER_DATA_COUNT: u16 = 16;

/// `COMPUTE_TMPRING_SIZE` for a scratch ring of `waves_per_se` slots in each shader engine
/// (gfx11 counts WAVES per shader engine, so the ring's memory must hold `waves_per_se × shader
/// engines` slots) of `wave_bytes` each (WAVESIZE counts 256-byte units, 13 bits).
pub const fn tmpring_size(waves_per_se: u32, wave_bytes: u64) -> u32 {
    (waves_per_se & 0xfff) | ((((wave_bytes / 256) as u32) & 0x1fff) << 12)
}

/// The most scratch `COMPUTE_TMPRING_SIZE.WAVESIZE` can give one wave (8191 units of 256 bytes).
pub const TMPRING_MAX_WAVE_BYTES: u64 = 0x1fff * 256;
/// The most waves `COMPUTE_TMPRING_SIZE.WAVES` can name per shader engine.
pub const TMPRING_MAX_WAVES_PER_SE: u32 = 0xfff;

/// Dword address of NBIO's register segment 2 on Navi3x (gfx1100..gfx1102, NBIO 4.3), as the
/// IP discovery table places it.
pub const NBIO_SEGMENT_2: u32 = 0xd20;
/// `BIF_BX_PF0_GPU_HDP_FLUSH_REQ` / `_DONE` (NBIO 4.3: offsets 0x106 / 0x107 in segment 2).
/// The bare offsets, which tinygrad 0.9.0 wrote (fixed in 0.9.1, PR #4925), name other
/// registers: its flush flushed nothing.
pub const GPU_HDP_FLUSH_REQ: u32 = NBIO_SEGMENT_2 + 0x106;
pub const GPU_HDP_FLUSH_DONE: u32 = NBIO_SEGMENT_2 + 0x107;
/// Requester bits an HDP flush from a user queue asks for and waits on: every client's. The
/// kernel's own rings set only their CP pipe's bit, but a user queue does not know which pipe
/// the scheduler gave it; a request with no bit set flushes nothing.
pub const HDP_FLUSH_ALL_CLIENTS: u32 = 0xffff_ffff;

/// `COMPUTE_DISPATCH_INITIATOR` bits.
pub mod initiator {
    pub const COMPUTE_SHADER_EN: u32 = 1 << 0;
    pub const FORCE_START_AT_000: u32 = 1 << 2;
    /// DISPATCH_DIRECT dimensions count threads, not workgroups.
    pub const USE_THREAD_DIMENSIONS: u32 = 1 << 5;
    pub const CS_W32_EN: u32 = 1 << 15;
}

macro_rules! bitfield {
    ($(#[$m:meta])* $name:ident { $($(#[$fm:meta])* $field:ident : $lo:literal, $width:literal;)* }) => {
        $(#[$m])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
        pub struct $name(pub u32);
        impl $name {
            $(
                $(#[$fm])*
                #[inline]
                pub const fn $field(self) -> u32 {
                    (self.0 >> $lo) & ((1u64 << $width) - 1) as u32
                }
            )*
        }
    };
}

bitfield!(
    /// `COMPUTE_PGM_RSRC1`.
    PgmRsrc1 {
        /// VGPR blocks minus one (granule 8 in wave32 on gfx11... see the ISA guide).
        vgprs: 0, 6;
        sgprs: 6, 4;
        float_mode: 12, 8;
        privileged: 20, 1;
        ieee_mode: 23, 1;
    }
);

bitfield!(
    /// `COMPUTE_PGM_RSRC2`.
    PgmRsrc2 {
        scratch_en: 0, 1;
        user_sgpr: 1, 5;
        trap_present: 6, 1;
        tgid_x_en: 7, 1;
        tgid_y_en: 8, 1;
        tgid_z_en: 9, 1;
        tg_size_en: 10, 1;
        tidig_comp_cnt: 11, 2;
        excp_en_msb: 13, 2;
        /// LDS allocation in 512-byte granules (gfx11 compute).
        lds_size: 15, 9;
        excp_en: 24, 7;
    }
);

/// `COMPUTE_PGM_RSRC1.PRIV`: the waves start in privileged mode. A kernel descriptor may not
/// set it; a driver may add it at dispatch ([`dispatch_rsrc1_bits`]).
pub const RSRC1_PRIV: u32 = 1 << 20;

/// `COMPUTE_PGM_RSRC1` bits a driver adds to a kernel's own when it dispatches from a PM4
/// queue on a GPU of architecture `arch`: `PRIV` on gfx11. tinygrad found context save and
/// restore (CWSR, which KFD uses to preempt queues) misbehaving on gfx11 GPUs for waves
/// launched without it, and has set it there since its PR #6950; AMD documents no reason.
pub fn dispatch_rsrc1_bits(arch: &str) -> u32 {
    if arch.starts_with("gfx11") {
        RSRC1_PRIV
    } else {
        0
    }
}

/// Bytes per `LDS_SIZE` granule on gfx11.
pub const LDS_GRANULE: u32 = 512;
/// Largest LDS a workgroup can have on gfx11 (64 KiB).
pub const LDS_MAX_BYTES: u32 = 64 * 1024;
/// Bit position of `LDS_SIZE` in `COMPUTE_PGM_RSRC2`.
pub const RSRC2_LDS_SIZE_SHIFT: u32 = 15;
