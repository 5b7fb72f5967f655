//! How many waves of a kernel a gfx11 SIMD keeps at once, and what limits it: the wave slots,
//! the vector register file, or the LDS a workgroup processor shares among its workgroups.
//! The figures are gfx11's (RDNA3, wave32); `hcq disasm`'s tests check the result against
//! LLVM's own occupancy for every kernel the test suite builds.

/// Waves one SIMD holds at most.
pub const MAX_WAVES_PER_SIMD: u32 = 16;
/// LDS of a workgroup processor (two CUs), shared by the workgroups placed on it.
pub const LDS_PER_WGP: u32 = 128 << 10;
/// SIMDs of a workgroup processor.
pub const SIMDS_PER_WGP: u32 = 4;
/// Lanes of a wave (the runtime loads wave32 kernels only).
pub const WAVE_LANES: u32 = 32;

/// What bounds the occupancy.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Limit {
    /// The SIMD's wave slots: nothing else binds.
    WaveSlots,
    /// The vector registers each wave allocates.
    Registers,
    /// The LDS each workgroup takes.
    Lds,
}

/// A wave32 SIMD's vector register file per lane, and the granule waves allocate it in, on
/// `arch`: gfx1100 and gfx1101 have the larger file (1536 registers, 24 at a time), the other
/// gfx11 parts 1024 in 16s.
pub fn vgpr_file(arch: &str) -> (u32, u32) {
    match arch {
        "gfx1100" | "gfx1101" => (1536, 24),
        _ => (1024, 16),
    }
}

/// Waves per SIMD of a kernel using `vgprs` VGPRs and `lds` bytes of LDS per workgroup of at
/// most `max_workgroup` work-items, on `arch`.
pub fn waves_per_simd(arch: &str, vgprs: u32, lds: u32, max_workgroup: u32) -> (u32, Limit) {
    let (file, granule) = vgpr_file(arch);
    let by_registers = file / vgprs.max(1).next_multiple_of(granule);
    let by_lds = LDS_PER_WGP.checked_div(lds).map_or(u32::MAX, |groups| {
        groups * max_workgroup.max(1).div_ceil(WAVE_LANES) / SIMDS_PER_WGP
    });
    let mut best = (MAX_WAVES_PER_SIMD, Limit::WaveSlots);
    if by_registers < best.0 {
        best = (by_registers, Limit::Registers);
    }
    if by_lds < best.0 {
        best = (by_lds, Limit::Lds);
    }
    best
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_limit_binds_where_llvm_says() {
        // LLVM's `; Occupancy:` for these shapes (clang-19, gfx1100).
        assert_eq!(
            waves_per_simd("gfx1100", 6, 0, 1024),
            (16, Limit::WaveSlots)
        );
        assert_eq!(
            waves_per_simd("gfx1100", 146, 0, 1024),
            (9, Limit::Registers)
        );
        assert_eq!(waves_per_simd("gfx1100", 5, 40960, 256), (6, Limit::Lds));
        assert_eq!(waves_per_simd("gfx1100", 5, 20480, 64), (3, Limit::Lds));
        // The smaller register file of gfx1102 (the same kernel compiles to 128 VGPRs there).
        assert_eq!(
            waves_per_simd("gfx1102", 128, 0, 1024),
            (8, Limit::Registers)
        );
    }
}
