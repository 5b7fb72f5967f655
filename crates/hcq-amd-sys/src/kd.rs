//! The AMDHSA kernel descriptor: the 64 bytes at a code object's `<kernel>.kd` symbol.

/// Size of a kernel descriptor in bytes.
pub const KERNEL_DESCRIPTOR_SIZE: usize = 64;

/// The fields the runtime reads. Offsets per the AMDGPU ABI (code object v4/v5).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct KernelDescriptor {
    pub group_segment_fixed_size: u32,
    pub private_segment_fixed_size: u32,
    pub kernarg_size: u32,
    /// Byte offset of the first instruction from the descriptor itself; may be negative.
    pub kernel_code_entry_byte_offset: i64,
    pub compute_pgm_rsrc3: u32,
    pub compute_pgm_rsrc1: u32,
    pub compute_pgm_rsrc2: u32,
    pub kernel_code_properties: u16,
    pub kernarg_preload: u16,
}

/// `kernel_code_properties` bits: which user SGPRs the kernel expects, in this order.
pub mod props {
    pub const ENABLE_SGPR_PRIVATE_SEGMENT_BUFFER: u16 = 1 << 0;
    pub const ENABLE_SGPR_DISPATCH_PTR: u16 = 1 << 1;
    pub const ENABLE_SGPR_QUEUE_PTR: u16 = 1 << 2;
    pub const ENABLE_SGPR_KERNARG_SEGMENT_PTR: u16 = 1 << 3;
    pub const ENABLE_SGPR_DISPATCH_ID: u16 = 1 << 4;
    pub const ENABLE_SGPR_FLAT_SCRATCH_INIT: u16 = 1 << 5;
    pub const ENABLE_SGPR_PRIVATE_SEGMENT_SIZE: u16 = 1 << 6;
    pub const ENABLE_WAVEFRONT_SIZE32: u16 = 1 << 10;
    pub const USES_DYNAMIC_STACK: u16 = 1 << 11;
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
        })
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
    pub private_segment_buffer: Option<u32>,
    pub dispatch_ptr: Option<u32>,
    pub queue_ptr: Option<u32>,
    pub kernarg_segment_ptr: Option<u32>,
    pub dispatch_id: Option<u32>,
    pub flat_scratch_init: Option<u32>,
    pub private_segment_size: Option<u32>,
    pub count: u32,
}
