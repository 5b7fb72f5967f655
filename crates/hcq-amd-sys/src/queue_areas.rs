//! Sizes of the engine-owned buffers of a PM4 compute queue: the end-of-pipe buffer, the
//! control stack and the context save/restore (CWSR) area, with the debugger's memory after
//! it.
//!
//! The hardware saves a preempted queue's waves into the CWSR area, so its size follows from
//! the GPU's shape: every wave slot's control-stack entry, and every CU's VGPRs, SGPRs, LDS
//! and hardware registers. Since Linux 6.12 KFD computes these sizes itself from the topology
//! node (`kfd_queue_ctx_save_restore_size`) and `CREATE_QUEUE` refuses, with `EINVAL`, a queue
//! whose `ctl_stack_size`, `ctx_save_restore_size` or `eop_buffer_size` differ from its
//! figures, or whose CWSR buffer is not one GPU mapping of exactly
//! `(cwsr + debug memory) * XCCs` bytes, page aligned. The driver sizes its queues with
//! [`QueueAreas::for_node`] and the emulated KFD checks them with the same figures; the unit
//! tests pin the figures for real GPUs.

/// What a KFD topology node says about the GPU's shape, as far as queue areas go (the
/// names are those of the node's `properties` file).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NodeShape {
    /// e.g. 110000 for gfx1100.
    pub gfx_target_version: u32,
    /// SIMDs on the node, every XCC's together (192 on a 96-CU RX 7900 XTX; 0 on CPU nodes).
    /// Divided by `simd_per_cu` and `num_xcc`, the CUs one XCC saves.
    pub simd_count: u32,
    /// SIMDs per compute unit: 2 on RDNA, 4 on GCN and CDNA.
    pub simd_per_cu: u32,
    /// Accelerator complexes (XCCs) of the node; 1 on every RDNA GPU.
    pub num_xcc: u32,
    /// Shader arrays on the node (12 on gfx1100). Before gfx10.1, `array_count /
    /// simd_arrays_per_engine * 512` bounds the wave slots the control stack must hold.
    pub array_count: u32,
    /// Shader arrays per shader engine (2 on gfx1100).
    pub simd_arrays_per_engine: u32,
    /// LDS per CU in KiB (64 on gfx1100); only gfx950's saved LDS follows it, every other GPU saves
    /// a fixed 64 KiB per CU.
    pub lds_size_in_kb: u32,
}

/// The sizes KFD expects for one compute queue of a node.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct QueueAreas {
    /// `eop_buffer_size` of `CREATE_QUEUE`.
    pub eop_bytes: u32,
    /// `ctl_stack_size`: the control stack, at the start of the CWSR area.
    pub ctl_stack_bytes: u32,
    /// `ctx_save_restore_size`: control stack plus the workgroups' saved state, per XCC.
    pub cwsr_bytes: u32,
    /// The debugger's memory that follows each XCC's CWSR area.
    pub debug_bytes: u32,
    /// XCCs: each has its own CWSR area and debug memory.
    pub xccs: u32,
}

const PAGE: u64 = 4096;
/// Saved SGPRs, LDS and hardware registers of one CU.
const SGPR_BYTES_PER_CU: u64 = 0x4000;
const LDS_BYTES_PER_CU: u64 = 0x1_0000;
const HWREG_BYTES_PER_CU: u64 = 0x1000;
/// The header the control stack starts with (`hsa_user_context_save_area_header`).
const CONTEXT_SAVE_HEADER_BYTES: u64 = 40;
const DEBUG_BYTES_PER_WAVE: u64 = 32;
const DEBUG_ALIGN: u64 = 64;
/// gfx10's control stack cannot exceed this (a hardware limit).
const GFX10_CTL_STACK_LIMIT: u64 = 0x7000;

fn align(n: u64, to: u64) -> u64 {
    n.div_ceil(to) * to
}

/// Saved VGPR bytes per CU: 1024 lanes of 32-bit registers per SIMD on most parts, more on
/// the GPUs with larger register files (gfx90a-class accelerators; gfx1100/1101 and gfx12,
/// whose SIMDs have 1.5x the registers of gfx1102 and gfx10).
fn vgpr_bytes_per_cu(gfxv: u32) -> u64 {
    match gfxv {
        v if v / 100 * 100 == 90400 => 0x8_0000,
        90008 | 90010 | 90500 => 0x8_0000,
        110000 | 110001 | 120000 | 120001 => 0x6_0000,
        _ => 0x4_0000,
    }
}

impl QueueAreas {
    /// The sizes for a node, or `None` for GPUs older than gfx8.1 (no CWSR) or a shape with a
    /// zero count, or sizes beyond the 32-bit fields of `CREATE_QUEUE`.
    pub fn for_node(n: &NodeShape) -> Option<QueueAreas> {
        let gfxv = n.gfx_target_version;
        if gfxv < 80001 || n.simd_per_cu == 0 || n.num_xcc == 0 {
            return None;
        }
        let cus = u64::from(n.simd_count / n.simd_per_cu / n.num_xcc);
        if cus == 0 {
            return None;
        }
        // From gfx10.1 on every CU has 32 wave slots; before, 40, limited by the shader arrays.
        let waves = if gfxv < 100100 {
            if n.simd_arrays_per_engine == 0 {
                return None;
            }
            let per_arrays = u64::from(n.array_count / n.simd_arrays_per_engine) * 512;
            (cus * 40).min(per_arrays)
        } else {
            cus * 32
        };
        let lds = if gfxv == 90500 {
            u64::from(n.lds_size_in_kb) << 10
        } else {
            LDS_BYTES_PER_CU
        };
        let per_cu = vgpr_bytes_per_cu(gfxv) + SGPR_BYTES_PER_CU + lds + HWREG_BYTES_PER_CU;
        let wg_data = align(cus * per_cu, PAGE);
        let entry_bytes = if gfxv >= 100100 { 12 } else { 8 };
        let mut ctl_stack = align(CONTEXT_SAVE_HEADER_BYTES + waves * entry_bytes + 8, PAGE);
        if gfxv / 10000 == 10 {
            ctl_stack = ctl_stack.min(GFX10_CTL_STACK_LIMIT);
        }
        let eop = if gfxv == 80002 { 0x8000 } else { 0x1000 };
        Some(QueueAreas {
            eop_bytes: eop,
            ctl_stack_bytes: u32::try_from(ctl_stack).ok()?,
            cwsr_bytes: u32::try_from(ctl_stack + wg_data).ok()?,
            debug_bytes: u32::try_from(align(waves * DEBUG_BYTES_PER_WAVE, DEBUG_ALIGN)).ok()?,
            xccs: n.num_xcc,
        })
    }

    /// Bytes of the CWSR buffer: every XCC's CWSR area and debug memory, page aligned. KFD
    /// wants the buffer mapped as exactly this many bytes.
    pub fn cwsr_buffer_bytes(&self) -> u64 {
        align(
            (u64::from(self.cwsr_bytes) + u64::from(self.debug_bytes)) * u64::from(self.xccs),
            PAGE,
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rdna(gfx_target_version: u32, cus: u32) -> NodeShape {
        NodeShape {
            gfx_target_version,
            simd_count: cus * 2,
            simd_per_cu: 2,
            num_xcc: 1,
            array_count: 12,
            simd_arrays_per_engine: 2,
            lds_size_in_kb: 64,
        }
    }

    // Expected figures worked out by hand from Linux 6.12's formula; the gfx1100 ones are
    // also tinygrad's hardware-proven constants (control stack 0xa000, buffer 0x2c02000).
    #[test]
    fn radeon_rx_7900_xtx() {
        let a = QueueAreas::for_node(&rdna(110000, 96)).unwrap();
        assert_eq!(a.eop_bytes, 0x1000);
        assert_eq!(a.ctl_stack_bytes, 0xa000);
        assert_eq!(a.cwsr_bytes, 0x2bea000);
        assert_eq!(a.debug_bytes, 98304);
        assert_eq!(a.cwsr_buffer_bytes(), 0x2c02000);
    }

    #[test]
    fn other_rdna_parts() {
        // gfx1101 (60 CUs) has the large register file, gfx1102 (32 CUs) the small one.
        let a = QueueAreas::for_node(&rdna(110001, 60)).unwrap();
        assert_eq!((a.ctl_stack_bytes, a.cwsr_bytes), (0x6000, 0x1b72000));
        assert_eq!((a.debug_bytes, a.cwsr_buffer_bytes()), (61440, 0x1b81000));
        let a = QueueAreas::for_node(&rdna(110002, 32)).unwrap();
        assert_eq!((a.ctl_stack_bytes, a.cwsr_bytes), (0x4000, 0xaa4000));
        assert_eq!(a.cwsr_buffer_bytes(), 0xaac000);
        // gfx10: the control stack is capped at 0x7000.
        let a = QueueAreas::for_node(&rdna(100300, 80)).unwrap();
        assert_eq!((a.ctl_stack_bytes, a.cwsr_bytes), (0x7000, 0x1a97000));
        assert_eq!(a.cwsr_buffer_bytes(), 0x1aab000);
    }

    #[test]
    fn gfx9_accelerators() {
        // gfx90a: 110 CUs of 4 SIMDs, 40 wave slots per CU bounded by 8 arrays x 512.
        let mi250 = NodeShape {
            gfx_target_version: 90010,
            simd_count: 440,
            simd_per_cu: 4,
            num_xcc: 1,
            array_count: 8,
            simd_arrays_per_engine: 1,
            lds_size_in_kb: 64,
        };
        let a = QueueAreas::for_node(&mi250).unwrap();
        assert_eq!((a.ctl_stack_bytes, a.cwsr_bytes), (0x9000, 0x400f000));
        assert_eq!(a.cwsr_buffer_bytes(), 0x402f000);
        // gfx942 with 8 XCCs: each XCC saves its own 38 CUs.
        let mi300 = NodeShape {
            gfx_target_version: 90402,
            simd_count: 1216,
            simd_per_cu: 4,
            num_xcc: 8,
            array_count: 32,
            simd_arrays_per_engine: 1,
            lds_size_in_kb: 64,
        };
        let a = QueueAreas::for_node(&mi300).unwrap();
        assert_eq!((a.ctl_stack_bytes, a.cwsr_bytes), (0x3000, 0x1621000));
        assert_eq!((a.debug_bytes, a.cwsr_buffer_bytes()), (48640, 0xb167000));
    }

    #[test]
    fn shapes_without_an_answer() {
        assert_eq!(QueueAreas::for_node(&rdna(70000, 8)), None);
        assert_eq!(QueueAreas::for_node(&rdna(110000, 0)), None);
        let mut n = rdna(110000, 96);
        n.simd_per_cu = 0;
        assert_eq!(QueueAreas::for_node(&n), None);
        n.simd_per_cu = 2;
        n.num_xcc = 0;
        assert_eq!(QueueAreas::for_node(&n), None);
    }
}
