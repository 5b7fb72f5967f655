//! The AMDHSA kernel descriptor: the 64 bytes at a code object's `<kernel>.kd` symbol.

use crate::regs::{PgmRsrc1, PgmRsrc2, PgmRsrc3};

/// Size of a kernel descriptor in bytes.
pub const KERNEL_DESCRIPTOR_SIZE: usize = 64;

/// The fields the runtime reads. Offsets per the AMDGPU ABI (code object v4/v5).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct KernelDescriptor {
    /// Bytes 0..4: LDS bytes per workgroup the kernel uses statically; dynamic LDS requested at
    /// launch comes on top.
    pub group_segment_fixed_size: u32,
    /// Bytes 4..8: scratch bytes per work-item the kernel needs (without a dynamic stack); the
    /// driver sizes the scratch ring from it.
    pub private_segment_fixed_size: u32,
    /// Bytes 8..12: size in bytes of the kernel-argument segment the kernel reads, hidden arguments
    /// included.
    pub kernarg_size: u32,
    /// Byte offset of the first instruction from the descriptor itself; may be negative.
    pub kernel_code_entry_byte_offset: i64,
    /// Bytes 44..48: the `COMPUTE_PGM_RSRC3` value (gfx11: shared VGPR count, instruction prefetch
    /// size, trap on start or end, image op).
    pub compute_pgm_rsrc3: u32,
    /// Bytes 48..52: the `COMPUTE_PGM_RSRC1` value: VGPR and SGPR blocks, float and IEEE modes
    /// ([`crate::regs::PgmRsrc1`]).
    pub compute_pgm_rsrc1: u32,
    /// Bytes 52..56: the `COMPUTE_PGM_RSRC2` value: scratch, user SGPR count, workgroup and
    /// work-item ID inputs, exceptions ([`crate::regs::PgmRsrc2`]).
    pub compute_pgm_rsrc2: u32,
    /// Bytes 56..58: which user SGPRs the kernel expects and other properties (the [`props`] bits).
    pub kernel_code_properties: u16,
    /// Bytes 58..60: kernel arguments the hardware preloads into SGPRs (length in dwords in bits
    /// 0..7, starting dword in bits 7..16), a CDNA feature that gfx11 kernels leave 0.
    pub kernarg_preload: u16,
    /// Bytes 12..16, which the ABI reserves (they must be 0), as it does `reserved1` and
    /// `reserved3`.
    pub reserved0: u32,
    /// Bytes 24..44, reserved (must be 0).
    pub reserved1: [u8; 20],
    /// Bytes 60..64, reserved (must be 0).
    pub reserved3: u32,
}

/// `kernel_code_properties` bits: which user SGPRs the kernel expects, in this order.
pub mod props {
    /// Bit 0: the private segment buffer descriptor, in 4 user SGPRs (hcq's driver passes 0).
    pub const ENABLE_SGPR_PRIVATE_SEGMENT_BUFFER: u16 = 1 << 0;
    /// Bit 1: the address of the dispatch's AQL packet, in 2 user SGPRs (the driver writes such a
    /// packet for kernels that ask).
    pub const ENABLE_SGPR_DISPATCH_PTR: u16 = 1 << 1;
    /// Bit 2: the address of the queue's `amd_queue_t`, in 2 user SGPRs (hcq's driver passes 0).
    pub const ENABLE_SGPR_QUEUE_PTR: u16 = 1 << 2;
    /// Bit 3: the address of the kernel arguments, in 2 user SGPRs.
    pub const ENABLE_SGPR_KERNARG_SEGMENT_PTR: u16 = 1 << 3;
    /// Bit 4: a 64-bit dispatch id, unique per dispatch, in 2 user SGPRs.
    pub const ENABLE_SGPR_DISPATCH_ID: u16 = 1 << 4;
    /// Bit 5: the flat scratch base and size, in 2 user SGPRs (hcq's driver passes 0).
    pub const ENABLE_SGPR_FLAT_SCRATCH_INIT: u16 = 1 << 5;
    /// Bit 6: the scratch bytes per work-item, in 1 user SGPR.
    pub const ENABLE_SGPR_PRIVATE_SEGMENT_SIZE: u16 = 1 << 6;
    /// Bit 10: the kernel was compiled for wave32 (else wave64).
    pub const ENABLE_WAVEFRONT_SIZE32: u16 = 1 << 10;
    /// Bit 11: the kernel's stack grows at run time beyond `private_segment_fixed_size` (recursion
    /// or indirect calls).
    pub const USES_DYNAMIC_STACK: u16 = 1 << 11;
    /// Bits 7..10 and 12..16, reserved by the ABI.
    pub const RESERVED: u16 = 0b1111_0011_1000_0000;
}

/// VGPRs a wave32 wave can address on gfx10 and gfx11 (v0..v255).
pub const GFX11_WAVE32_MAX_VGPRS: u32 = 256;
/// `GRANULATED_WORKITEM_VGPR_COUNT` counts blocks of this many VGPRs, minus one, for wave32 on
/// gfx10 and later.
pub const WAVE32_VGPR_ENCODING_GRANULE: u32 = 8;

/// Bit fields a gfx11 descriptor must leave 0, per register, as (name, getter). The ABI
/// reserves some; the command processor fills in others (priority, trap presence, LDS size)
/// and the rest are debugger or privileged-mode controls a kernel may not set.
type ZeroField = (&'static str, fn(u32) -> u32);
const RSRC1_ZERO_FIELDS: &[ZeroField] = &[
    ("PRIORITY", |v| PgmRsrc1(v).priority()),
    ("PRIV", |v| PgmRsrc1(v).privileged()),
    ("DEBUG_MODE", |v| PgmRsrc1(v).debug_mode()),
    ("BULKY", |v| PgmRsrc1(v).bulky()),
    ("CDBG_USER", |v| PgmRsrc1(v).cdbg_user()),
    ("reserved bits 27..29", |v| PgmRsrc1(v).reserved_27()),
];
const RSRC2_ZERO_FIELDS: &[ZeroField] = &[
    ("ENABLE_TRAP_HANDLER", |v| PgmRsrc2(v).trap_present()),
    ("ENABLE_EXCEPTION_ADDRESS_WATCH", |v| {
        PgmRsrc2(v).exception_address_watch()
    }),
    ("ENABLE_EXCEPTION_MEMORY", |v| {
        PgmRsrc2(v).exception_memory()
    }),
    ("GRANULATED_LDS_SIZE", |v| PgmRsrc2(v).lds_size()),
    ("reserved bit 31", |v| PgmRsrc2(v).reserved_31()),
];
/// `SHARED_VGPR_COUNT` must be 0 in wave32; `INST_PREF_SIZE`, `TRAP_ON_START`/`END` and
/// `IMAGE_OP` may be set.
const RSRC3_ZERO_FIELDS: &[ZeroField] = &[
    ("SHARED_VGPR_COUNT", |v| PgmRsrc3(v).shared_vgpr_count()),
    ("reserved bits 12..31", |v| PgmRsrc3(v).reserved_12()),
];

/// The first field of `value` in `fields` that is not 0, described.
fn nonzero_field(register: &str, value: u32, fields: &[ZeroField]) -> Option<String> {
    fields.iter().find_map(|&(name, field)| {
        let v = field(value);
        (v != 0)
            .then(|| format!("{register}.{name} is {v} (must be 0; the register is 0x{value:08x})"))
    })
}

impl KernelDescriptor {
    /// Parses the 64 descriptor bytes; `None` if fewer are given.
    pub fn parse(bytes: &[u8]) -> Option<Self> {
        let b = bytes.get(..KERNEL_DESCRIPTOR_SIZE)?;
        let u32_at = |o: usize| u32::from_le_bytes([b[o], b[o + 1], b[o + 2], b[o + 3]]);
        let u16_at = |o: usize| u16::from_le_bytes([b[o], b[o + 1]]);
        let mut off = [0u8; 8];
        off.copy_from_slice(&b[16..24]);
        Some(KernelDescriptor {
            group_segment_fixed_size: u32_at(0),
            private_segment_fixed_size: u32_at(4),
            kernarg_size: u32_at(8),
            kernel_code_entry_byte_offset: i64::from_le_bytes(off),
            compute_pgm_rsrc3: u32_at(44),
            compute_pgm_rsrc1: u32_at(48),
            compute_pgm_rsrc2: u32_at(52),
            kernel_code_properties: u16_at(56),
            kernarg_preload: u16_at(58),
            reserved0: u32_at(12),
            reserved1: b[24..44].try_into().expect("20 bytes"),
            reserved3: u32_at(60),
        })
    }

    /// VGPRs per work-item that `compute_pgm_rsrc1` allocates for a wave32 wave.
    pub fn wave32_vgprs(&self) -> u32 {
        (PgmRsrc1(self.compute_pgm_rsrc1).vgprs() + 1) * WAVE32_VGPR_ENCODING_GRANULE
    }

    /// Checks what gfx11 hardware defines for a wave32 kernel: reserved bytes and bits clear,
    /// fields the command processor owns left 0, a VGPR count a wave can have, at most 16 user
    /// SGPRs. Returns what is wrong, without the kernel's name. (Facts: the AMDGPU backend's
    /// "kernel descriptor for GFX6-GFX12" tables and COMPUTE_PGM_RSRC1/2/3 field lists.)
    pub fn check_gfx11(&self) -> Result<(), String> {
        for (at, clear) in [
            (12, self.reserved0 == 0),
            (24, self.reserved1 == [0; 20]),
            (60, self.reserved3 == 0),
        ] {
            if !clear {
                return Err(format!(
                    "reserved bytes at offset {at} are not 0 (the ABI requires 0)"
                ));
            }
        }
        let reserved = self.kernel_code_properties & props::RESERVED;
        if reserved != 0 {
            return Err(format!(
                "kernel_code_properties 0x{:04x} sets reserved bits 0x{reserved:04x}",
                self.kernel_code_properties
            ));
        }
        if self.wave32_vgprs() > GFX11_WAVE32_MAX_VGPRS {
            return Err(format!(
                "compute_pgm_rsrc1 asks for {} VGPRs per work-item (granulated count {}); a \
                 gfx11 wave32 wave has at most {GFX11_WAVE32_MAX_VGPRS}",
                self.wave32_vgprs(),
                PgmRsrc1(self.compute_pgm_rsrc1).vgprs()
            ));
        }
        // GRANULATED_WAVEFRONT_SGPR_COUNT needs no check: gfx10 and later always give a wave
        // 128 SGPRs, which its 4 bits (at most 16 blocks of 8) cannot exceed.
        for (register, value, fields) in [
            (
                "compute_pgm_rsrc1",
                self.compute_pgm_rsrc1,
                RSRC1_ZERO_FIELDS,
            ),
            (
                "compute_pgm_rsrc2",
                self.compute_pgm_rsrc2,
                RSRC2_ZERO_FIELDS,
            ),
            (
                "compute_pgm_rsrc3",
                self.compute_pgm_rsrc3,
                RSRC3_ZERO_FIELDS,
            ),
        ] {
            if let Some(problem) = nonzero_field(register, value, fields) {
                return Err(problem);
            }
        }
        // The command processor has 16 COMPUTE_USER_DATA registers to load user SGPRs from.
        let user_sgprs = PgmRsrc2(self.compute_pgm_rsrc2).user_sgpr();
        if user_sgprs > 16 {
            return Err(format!(
                "compute_pgm_rsrc2.USER_SGPR_COUNT is {user_sgprs} (at most 16)"
            ));
        }
        Ok(())
    }

    /// Number of user SGPRs the enabled `kernel_code_properties` bits ask for, and where the
    /// kernarg pointer lands among them (`None` if not enabled).
    pub fn user_sgpr_layout(&self) -> UserSgprLayout {
        let p = self.kernel_code_properties;
        let mut n = 0u32;
        let mut layout = UserSgprLayout::default();
        let mut take = |bit: u16, count: u32| -> Option<u32> {
            if p & bit != 0 {
                let at = n;
                n += count;
                Some(at)
            } else {
                None
            }
        };
        layout.private_segment_buffer = take(props::ENABLE_SGPR_PRIVATE_SEGMENT_BUFFER, 4);
        layout.dispatch_ptr = take(props::ENABLE_SGPR_DISPATCH_PTR, 2);
        layout.queue_ptr = take(props::ENABLE_SGPR_QUEUE_PTR, 2);
        layout.kernarg_segment_ptr = take(props::ENABLE_SGPR_KERNARG_SEGMENT_PTR, 2);
        layout.dispatch_id = take(props::ENABLE_SGPR_DISPATCH_ID, 2);
        layout.flat_scratch_init = take(props::ENABLE_SGPR_FLAT_SCRATCH_INIT, 2);
        layout.private_segment_size = take(props::ENABLE_SGPR_PRIVATE_SEGMENT_SIZE, 1);
        layout.count = n;
        layout
    }
}

/// Positions (first SGPR index) of each enabled user SGPR value.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct UserSgprLayout {
    /// First of the 4 SGPRs of [`props::ENABLE_SGPR_PRIVATE_SEGMENT_BUFFER`].
    pub private_segment_buffer: Option<u32>,
    /// First of the 2 SGPRs of [`props::ENABLE_SGPR_DISPATCH_PTR`].
    pub dispatch_ptr: Option<u32>,
    /// First of the 2 SGPRs of [`props::ENABLE_SGPR_QUEUE_PTR`].
    pub queue_ptr: Option<u32>,
    /// First of the 2 SGPRs of [`props::ENABLE_SGPR_KERNARG_SEGMENT_PTR`].
    pub kernarg_segment_ptr: Option<u32>,
    /// First of the 2 SGPRs of [`props::ENABLE_SGPR_DISPATCH_ID`].
    pub dispatch_id: Option<u32>,
    /// First of the 2 SGPRs of [`props::ENABLE_SGPR_FLAT_SCRATCH_INIT`].
    pub flat_scratch_init: Option<u32>,
    /// The SGPR of [`props::ENABLE_SGPR_PRIVATE_SEGMENT_SIZE`].
    pub private_segment_size: Option<u32>,
    /// User SGPRs all the enabled values take together; `COMPUTE_PGM_RSRC2.USER_SGPR` must be at
    /// least this.
    pub count: u32,
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The descriptor clang 19 emits for a gfx1100 kernel taking 288 bytes of arguments
    /// (`add_i32` of the prebuilt demo object).
    fn clang_descriptor() -> [u8; 64] {
        let mut b = [0u8; 64];
        b[8..12].copy_from_slice(&288u32.to_le_bytes());
        b[16..24].copy_from_slice(&0x14c0i64.to_le_bytes());
        b[48..52].copy_from_slice(&0x60af_0080u32.to_le_bytes());
        b[52..56].copy_from_slice(&0x9eu32.to_le_bytes());
        b[56..58].copy_from_slice(&0x0408u16.to_le_bytes());
        b
    }

    fn check(bytes: &[u8; 64]) -> Result<(), String> {
        KernelDescriptor::parse(bytes).unwrap().check_gfx11()
    }

    fn with_u32(at: usize, value: u32) -> [u8; 64] {
        let mut b = clang_descriptor();
        b[at..at + 4].copy_from_slice(&value.to_le_bytes());
        b
    }

    #[test]
    fn a_compiled_descriptor_passes() {
        assert_eq!(check(&clang_descriptor()), Ok(()));
    }

    #[test]
    fn every_reserved_byte_is_refused_with_its_offset() {
        for at in (12..16).chain(24..44).chain(60..64) {
            let mut b = clang_descriptor();
            b[at] = 0x10;
            let e = check(&b).unwrap_err();
            let first = match at {
                12..16 => 12,
                24..44 => 24,
                _ => 60,
            };
            assert!(e.contains(&format!("offset {first}")), "byte {at}: {e}");
        }
    }

    #[test]
    fn reserved_code_property_bits_are_refused() {
        for bit in [7, 8, 9, 12, 13, 14, 15] {
            let mut b = clang_descriptor();
            b[56..58].copy_from_slice(&(0x0408u16 | 1 << bit).to_le_bytes());
            let e = check(&b).unwrap_err();
            assert!(e.contains("kernel_code_properties"), "bit {bit}: {e}");
        }
        // Dynamic stack is a defined bit.
        let mut b = clang_descriptor();
        b[56..58].copy_from_slice(&(0x0408u16 | props::USES_DYNAMIC_STACK).to_le_bytes());
        assert_eq!(check(&b), Ok(()));
    }

    #[test]
    fn vgpr_counts_stop_at_256() {
        let rsrc1 = 0x60af_0080u32 & !0x3f;
        // 32 blocks of 8 is the whole register file; 33 is one too many.
        assert_eq!(check(&with_u32(48, rsrc1 | 31)), Ok(()));
        let e = check(&with_u32(48, rsrc1 | 32)).unwrap_err();
        assert!(e.contains("264 VGPRs") && e.contains("256"), "{e}");
        let e = check(&with_u32(48, rsrc1 | 63)).unwrap_err();
        assert!(e.contains("512 VGPRs"), "{e}");
        // Every SGPR count the field can hold fits the 128 gfx11 allocates.
        assert_eq!(check(&with_u32(48, 0x60af_0000 | 15 << 6)), Ok(()));
    }

    #[test]
    fn fields_the_command_processor_owns_are_refused_by_name() {
        let cases: [(usize, u32, &str); 11] = [
            (48, 0x60af_0080 | 1 << 10, "PRIORITY"),
            (48, 0x60af_0080 | 1 << 20, "PRIV"),
            (48, 0x60af_0080 | 1 << 22, "DEBUG_MODE"),
            (48, 0x60af_0080 | 1 << 24, "BULKY"),
            (48, 0x60af_0080 | 1 << 25, "CDBG_USER"),
            (48, 0x60af_0080 | 1 << 28, "reserved bits 27..29"),
            (52, 0x9e | 1 << 6, "ENABLE_TRAP_HANDLER"),
            (52, 0x9e | 1 << 14, "ENABLE_EXCEPTION_MEMORY"),
            (52, 0x9e | 3 << 15, "GRANULATED_LDS_SIZE is 3"),
            (44, 2, "SHARED_VGPR_COUNT"),
            (44, 1 << 20, "compute_pgm_rsrc3.reserved"),
        ];
        for (at, value, needle) in cases {
            let e = check(&with_u32(at, value)).unwrap_err();
            assert!(e.contains(needle), "0x{value:x} at {at}: {e}");
        }
        // Defined fields stay allowed: IEEE mode, FP exceptions, instruction prefetch, IMAGE_OP.
        for (at, value) in [
            (48, 0x60af_0080 & !(1 << 23)),
            (52, 0x9e | 1 << 30),
            (44, 0x3f0 | 1 << 31),
        ] {
            assert_eq!(check(&with_u32(at, value)), Ok(()), "0x{value:x} at {at}");
        }
    }

    #[test]
    fn more_than_16_user_sgprs_is_refused() {
        let e = check(&with_u32(52, 0x80 | 17 << 1)).unwrap_err();
        assert!(e.contains("USER_SGPR_COUNT is 17"), "{e}");
        assert_eq!(check(&with_u32(52, 0x80 | 16 << 1)), Ok(()));
    }
}
