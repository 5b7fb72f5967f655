//! gfx11 compute registers as the command processor sees them, and their bit fields.
//!
//! Offsets are relative to `SET_SH_REG_START` (0x2c00), the form `SET_SH_REG` carries.

/// First dword address `SET_SH_REG` can reach.
pub const SH_REG_START: u32 = 0x2c00;
/// One past the last.
pub const SH_REG_END: u32 = 0x3000;

/// Starts a dispatch and sets its mode (the [`initiator`] bits); `DISPATCH_DIRECT` writes it from
/// its last payload dword.
pub const COMPUTE_DISPATCH_INITIATOR: u16 = 0x200;
/// Workgroup ID along X the grid starts at, unless `FORCE_START_AT_000`; the driver writes 0.
pub const COMPUTE_START_X: u16 = 0x204;
/// Workgroup ID along Y the grid starts at (as `COMPUTE_START_X`).
pub const COMPUTE_START_Y: u16 = 0x205;
/// Workgroup ID along Z the grid starts at (as `COMPUTE_START_X`).
pub const COMPUTE_START_Z: u16 = 0x206;
/// Work-items per workgroup along X (the launch's local size; the emulator reads the low 16 bits).
pub const COMPUTE_NUM_THREAD_X: u16 = 0x207;
/// Work-items per workgroup along Y.
pub const COMPUTE_NUM_THREAD_Y: u16 = 0x208;
/// Work-items per workgroup along Z; the three sizes' product must be 1..=1024.
pub const COMPUTE_NUM_THREAD_Z: u16 = 0x209;
/// Whether the dispatch counts in the pipeline statistics; the driver writes 0.
pub const COMPUTE_PIPELINESTAT_ENABLE: u16 = 0x20a;
/// Whether the dispatch's waves count in the performance counters; the driver writes 0.
pub const COMPUTE_PERFCOUNT_ENABLE: u16 = 0x20b;
/// Bits 8..40 of the kernel's first-instruction address, which is 256-byte aligned.
pub const COMPUTE_PGM_LO: u16 = 0x20c;
/// Bits 40..48 of the first-instruction address (the low 8 bits of the register).
pub const COMPUTE_PGM_HI: u16 = 0x20d;
/// Low half of the AQL dispatch packet's address, set for AQL queues; a PM4 dispatch writes 0.
pub const COMPUTE_DISPATCH_PKT_ADDR_LO: u16 = 0x20e;
/// High half of the AQL dispatch packet's address; 0 from a PM4 dispatch.
pub const COMPUTE_DISPATCH_PKT_ADDR_HI: u16 = 0x20f;
/// Bits 8..40 of the scratch ring's base address (256-byte aligned), where each wave's private
/// segment slot lies.
pub const COMPUTE_DISPATCH_SCRATCH_BASE_LO: u16 = 0x210;
/// Bits 40..48 of the scratch ring's base address.
pub const COMPUTE_DISPATCH_SCRATCH_BASE_HI: u16 = 0x211;
/// The waves' register allocation and modes ([`PgmRsrc1`]): the kernel descriptor's value plus
/// [`dispatch_rsrc1_bits`].
pub const COMPUTE_PGM_RSRC1: u16 = 0x212;
/// The waves' launch inputs ([`PgmRsrc2`]): the kernel descriptor's value with the LDS size the
/// driver adds.
pub const COMPUTE_PGM_RSRC2: u16 = 0x213;
/// Caps on the waves and workgroups the dispatch may place per CU or shader array; 0, no cap, from
/// the driver.
pub const COMPUTE_RESOURCE_LIMITS: u16 = 0x215;
/// Mask of the CUs of shader engine 0 the dispatch may use (bit per CU); the driver enables all.
pub const COMPUTE_STATIC_THREAD_MGMT_SE0: u16 = 0x216;
/// CU mask of shader engine 1.
pub const COMPUTE_STATIC_THREAD_MGMT_SE1: u16 = 0x217;
/// Shape of the scratch ring: `WAVES` slots per shader engine (bits 0..12) of `WAVESIZE` 256-byte
/// units each (bits 12..25); see [`tmpring_size`].
pub const COMPUTE_TMPRING_SIZE: u16 = 0x218;
/// CU mask of shader engine 2.
pub const COMPUTE_STATIC_THREAD_MGMT_SE2: u16 = 0x219;
/// CU mask of shader engine 3.
pub const COMPUTE_STATIC_THREAD_MGMT_SE3: u16 = 0x21a;
/// Workgroup ID along X to resume an interrupted dispatch from; the driver clears the three restart
/// registers before each dispatch.
pub const COMPUTE_RESTART_X: u16 = 0x21b;
/// Workgroup ID along Y to resume an interrupted dispatch from.
pub const COMPUTE_RESTART_Y: u16 = 0x21c;
/// Workgroup ID along Z to resume an interrupted dispatch from.
pub const COMPUTE_RESTART_Z: u16 = 0x21d;
/// Follows the three restart registers: a four-value write from `COMPUTE_RESTART_X` (as
/// tinygrad's until its PR #9314) turns thread tracing off.
pub const COMPUTE_THREAD_TRACE_ENABLE: u16 = 0x21e;
/// More launch state on gfx11 ([`PgmRsrc3`], the descriptor's `compute_pgm_rsrc3`: shared
/// VGPRs, instruction prefetch, trap on start or end); the emulator reads it,
/// [`Pm4Builder::exec`](crate::pm4::Pm4Builder::exec) does not write it.
pub const COMPUTE_PGM_RSRC3: u16 = 0x228;
/// CU mask of shader engine 4; the masks of engines 5..=7 follow, and the driver writes the four at
/// once.
pub const COMPUTE_STATIC_THREAD_MGMT_SE4: u16 = 0x22b;
/// First of the [`COMPUTE_USER_DATA_COUNT`] registers whose values the waves find in user SGPRs s0,
/// s1, ... ([`PgmRsrc2::user_sgpr`] of them).
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
/// The flush's completion register: a requester's bit reads 1 once its flush is done; the HDP
/// flush's `WAIT_REG_MEM` polls it after writing [`GPU_HDP_FLUSH_REQ`].
pub const GPU_HDP_FLUSH_DONE: u32 = NBIO_SEGMENT_2 + 0x107;
/// Requester bits an HDP flush from a user queue asks for and waits on: every client's. The
/// kernel's own rings set only their CP pipe's bit, but a user queue does not know which pipe
/// the scheduler gave it; a request with no bit set flushes nothing.
pub const HDP_FLUSH_ALL_CLIENTS: u32 = 0xffff_ffff;

/// `COMPUTE_DISPATCH_INITIATOR` bits.
pub mod initiator {
    /// Bit 0: run the compute shader; without it the dispatch launches nothing.
    pub const COMPUTE_SHADER_EN: u32 = 1 << 0;
    /// Bit 2: start the grid at workgroup (0, 0, 0) whatever `COMPUTE_START_X/Y/Z` hold.
    pub const FORCE_START_AT_000: u32 = 1 << 2;
    /// DISPATCH_DIRECT dimensions count threads, not workgroups.
    pub const USE_THREAD_DIMENSIONS: u32 = 1 << 5;
    /// Bit 15: launch wave32 waves (without it, wave64).
    pub const CS_W32_EN: u32 = 1 << 15;
}

macro_rules! bitfield {
    ($(#[$m:meta])* $name:ident { $($(#[$fm:meta])* $field:ident / $setter:ident : $lo:literal, $width:literal;)* }) => {
        $(#[$m])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
        pub struct $name(pub u32);
        impl $name {
            /// Each field's name, first bit and width, in declaration order.
            pub const FIELDS: &'static [(&'static str, u32, u32)] =
                &[$((stringify!($field), $lo, $width)),*];
            $(
                $(#[$fm])*
                #[inline]
                pub const fn $field(self) -> u32 {
                    (self.0 >> $lo) & ((1u64 << $width) - 1) as u32
                }
                #[doc = concat!("The register with `", stringify!($field), "` set to `value` (its bits above the field's width dropped) and every other field kept.")]
                #[inline]
                #[must_use]
                pub const fn $setter(self, value: u32) -> Self {
                    let mask = (((1u64 << $width) - 1) as u32) << $lo;
                    Self((self.0 & !mask) | ((value << $lo) & mask))
                }
            )*
        }
    };
}

bitfield!(
    /// `COMPUTE_PGM_RSRC1`.
    PgmRsrc1 {
        /// VGPR blocks minus one (granule 8 in wave32 on gfx11... see the ISA guide).
        vgprs / with_vgprs: 0, 6;
        /// Bits 6..10: SGPR blocks minus one; gfx10 and later ignore it and give every wave its
        /// full SGPR set.
        sgprs / with_sgprs: 6, 4;
        /// Bits 10..12 (`PRIORITY`): the waves' priority; the command processor sets it, a kernel
        /// descriptor leaves it 0.
        priority / with_priority: 10, 2;
        /// Bits 12..20: the waves' initial float rounding (bits 0..4 of the field) and denormal
        /// (bits 4..8) modes, loaded into `MODE`.
        float_mode / with_float_mode: 12, 8;
        /// Bit 20 (`PRIV`): the waves start privileged ([`RSRC1_PRIV`]).
        privileged / with_privileged: 20, 1;
        /// Bit 21 (`DX10_CLAMP`): the waves start with DX10 clamping of NaN results in
        /// clamping operations (loaded into `MODE`).
        dx10_clamp / with_dx10_clamp: 21, 1;
        /// Bit 22 (`DEBUG_MODE`): a debugger control.
        debug_mode / with_debug_mode: 22, 1;
        /// Bit 23 (`IEEE_MODE`): the waves start with IEEE-754 NaN handling in min/max and quieted
        /// signaling NaNs.
        ieee_mode / with_ieee_mode: 23, 1;
        /// Bit 24 (`BULKY`): only one such workgroup per CU at a time; privileged.
        bulky / with_bulky: 24, 1;
        /// Bit 25 (`CDBG_USER`): a debugger control.
        cdbg_user / with_cdbg_user: 25, 1;
        /// Bit 26 (`FP16_OVFL`): f16 results that overflow clamp to the largest finite value
        /// instead of becoming infinities.
        fp16_overflow_clamp / with_fp16_overflow_clamp: 26, 1;
        /// Bits 27..29, reserved.
        reserved_27 / with_reserved_27: 27, 2;
        /// Bit 29 (`WGP_MODE`): the workgroup's waves spread over a whole WGP (both CUs)
        /// rather than one CU.
        wgp_mode / with_wgp_mode: 29, 1;
        /// Bit 30 (`MEM_ORDERED`): memory operations of the waves complete in issue order.
        mem_ordered / with_mem_ordered: 30, 1;
        /// Bit 31 (`FWD_PROGRESS`): forward progress is guaranteed between the waves.
        fwd_progress / with_fwd_progress: 31, 1;
    }
);

bitfield!(
    /// `COMPUTE_PGM_RSRC2`.
    PgmRsrc2 {
        /// Bit 0: the waves get a private (scratch) segment in the ring at
        /// `COMPUTE_DISPATCH_SCRATCH_BASE`.
        scratch_en / with_scratch_en: 0, 1;
        /// Bits 1..6: how many `COMPUTE_USER_DATA_n` values load into s0, s1, ... (at most 16).
        user_sgpr / with_user_sgpr: 1, 5;
        /// Bit 6: a trap handler is installed; the command processor sets it, a kernel descriptor
        /// may not.
        trap_present / with_trap_present: 6, 1;
        /// Bit 7: the workgroup ID along X goes to the first SGPR after the user SGPRs.
        tgid_x_en / with_tgid_x_en: 7, 1;
        /// Bit 8: the workgroup ID along Y goes to the next SGPR.
        tgid_y_en / with_tgid_y_en: 8, 1;
        /// Bit 9: the workgroup ID along Z goes to the next SGPR.
        tgid_z_en / with_tgid_z_en: 9, 1;
        /// Bit 10: an SGPR after the workgroup IDs holds the wave's index in its workgroup (bits
        /// 0..6) and the workgroup's wave count (bits 6..12).
        tg_size_en / with_tg_size_en: 10, 1;
        /// Bits 11..13: which work-item IDs v0 carries: 0 X, 1 X and Y, 2 X, Y and Z (10 bits each
        /// on gfx11).
        tidig_comp_cnt / with_tidig_comp_cnt: 11, 2;
        /// Bit 13 (`ENABLE_EXCEPTION_ADDRESS_WATCH`): a debugger control a kernel leaves 0.
        exception_address_watch / with_exception_address_watch: 13, 1;
        /// Bit 14 (`ENABLE_EXCEPTION_MEMORY`): memory-violation exceptions, a debugger control a
        /// kernel leaves 0.
        exception_memory / with_exception_memory: 14, 1;
        /// LDS allocation in 512-byte granules (gfx11 compute).
        lds_size / with_lds_size: 15, 9;
        /// Bits 24..31: the float exceptions that trap (invalid, input denormal, divide by zero,
        /// overflow, underflow, inexact, in bits 24..30) and integer divide by zero (bit 30).
        excp_en / with_excp_en: 24, 7;
        /// Bit 31, reserved.
        reserved_31 / with_reserved_31: 31, 1;
    }
);

bitfield!(
    /// `COMPUTE_PGM_RSRC3` on gfx11.
    PgmRsrc3 {
        /// Bits 0..4 (`SHARED_VGPR_COUNT`): VGPRs shared between the two halves of a wave64, in
        /// blocks of 8; 0 in wave32.
        shared_vgpr_count / with_shared_vgpr_count: 0, 4;
        /// Bits 4..10 (`INST_PREF_SIZE`): how much of the kernel's code the waves prefetch, in
        /// 128-byte lines; a hint.
        inst_pref_size / with_inst_pref_size: 4, 6;
        /// Bit 10 (`TRAP_ON_START`): the waves enter the trap handler before their first
        /// instruction (a debugger control).
        trap_on_start / with_trap_on_start: 10, 1;
        /// Bit 11 (`TRAP_ON_END`): the waves enter the trap handler at `s_endpgm`.
        trap_on_end / with_trap_on_end: 11, 1;
        /// Bits 12..31, reserved.
        reserved_12 / with_reserved_12: 12, 19;
        /// Bit 31 (`IMAGE_OP`): the kernel uses image instructions.
        image_op / with_image_op: 31, 1;
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

/// Ticks per second of the clock the GPU's timestamps count (`RELEASE_MEM` and SDMA
/// `TIMESTAMP`, `AMDKFD_IOC_GET_CLOCK_COUNTERS`'s GPU counter): 100 MHz on gfx11.
pub const TIMESTAMP_CLOCK_HZ: u64 = 100_000_000;

/// Bytes of the doorbell region KFD maps for one GPU of a process (two pages on gfx9 and
/// later: 1,024 doorbells of 8 bytes, indexed by the `doorbell_offset` a queue gets).
pub const DOORBELL_REGION_BYTES: u64 = 0x2000;

/// Bytes per `LDS_SIZE` granule on gfx11.
pub const LDS_GRANULE: u32 = 512;
/// Largest LDS a workgroup can have on gfx11 (64 KiB).
pub const LDS_MAX_BYTES: u32 = 64 * 1024;

#[cfg(test)]
mod tests {
    use super::*;

    /// Each setter writes its own bits and no others, drops bits above the field's width,
    /// and its getter reads back what it wrote; the positions are the register manual's.
    #[test]
    fn bit_fields_set_and_read_only_their_bits() {
        let all = PgmRsrc2(u32::MAX);
        let cleared = all.with_lds_size(0);
        assert_eq!(cleared.0, !(0x1ff << 15));
        assert_eq!(PgmRsrc2(0).with_lds_size(0x1ff).0, 0x1ff << 15);
        // 0x3ff has a bit above LDS_SIZE's 9: it is dropped, and EXCP_EN (bit 24) stays 0.
        assert_eq!(PgmRsrc2(0).with_lds_size(0x3ff).0, 0x1ff << 15);
        let r = PgmRsrc2(0)
            .with_user_sgpr(16)
            .with_tgid_y_en(1)
            .with_tidig_comp_cnt(2)
            .with_lds_size(3);
        assert_eq!(r.0, (16 << 1) | (1 << 8) | (2 << 11) | (3 << 15));
        assert_eq!(
            (
                r.user_sgpr(),
                r.tgid_y_en(),
                r.tidig_comp_cnt(),
                r.lds_size()
            ),
            (16, 1, 2, 3)
        );
        assert_eq!((r.tgid_x_en(), r.tgid_z_en(), r.scratch_en()), (0, 0, 0));

        let r1 = PgmRsrc1(0)
            .with_vgprs(63)
            .with_float_mode(0xf0)
            .with_privileged(1)
            .with_dx10_clamp(1)
            .with_ieee_mode(1);
        assert_eq!(r1.0, 63 | (0xf0 << 12) | RSRC1_PRIV | (1 << 21) | (1 << 23));
        assert_eq!(r1.with_privileged(0).0, r1.0 & !RSRC1_PRIV);
        assert_eq!((r1.vgprs(), r1.float_mode(), r1.sgprs()), (63, 0xf0, 0));
        let full = PgmRsrc1(u32::MAX);
        assert_eq!(
            (full.priority(), full.reserved_27(), full.fwd_progress()),
            (3, 3, 1)
        );
        assert_eq!(full.with_reserved_27(0).0, !(3 << 27));

        assert_eq!(PgmRsrc2(u32::MAX).with_exception_memory(0).0, !(1 << 14));
        assert_eq!(PgmRsrc2(1 << 31).reserved_31(), 1);

        let r3 = PgmRsrc3(0)
            .with_shared_vgpr_count(5)
            .with_inst_pref_size(0x3f)
            .with_trap_on_end(1)
            .with_image_op(1);
        assert_eq!(r3.0, 5 | (0x3f << 4) | (1 << 11) | (1 << 31));
        assert_eq!((r3.trap_on_start(), r3.reserved_12()), (0, 0));
        assert_eq!(PgmRsrc3(u32::MAX).reserved_12(), (1 << 19) - 1);
    }

    /// Every bit of each register belongs to exactly one declared field.
    #[test]
    fn fields_cover_each_register_once() {
        for (name, fields) in [
            ("RSRC1", PgmRsrc1::FIELDS),
            ("RSRC2", PgmRsrc2::FIELDS),
            ("RSRC3", PgmRsrc3::FIELDS),
        ] {
            let mut seen = 0u64;
            for &(field, lo, width) in fields {
                let mask = ((1u64 << width) - 1) << lo;
                assert_eq!(seen & mask, 0, "{name}.{field} overlaps another field");
                seen |= mask;
            }
            assert_eq!(seen, 0xffff_ffff, "{name} leaves bits undeclared");
        }
    }
}
