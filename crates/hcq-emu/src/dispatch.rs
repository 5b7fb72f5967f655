//! Kernel dispatch: from the compute registers a `DISPATCH_DIRECT` finds to a run of the RDNA3
//! interpreter over the GPU's page table.

use std::panic::AssertUnwindSafe;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;

use hcq_amd_sys::pm4::DispatchDirect;
use hcq_amd_sys::regs;

use crate::gpu::FaultClass;
use crate::memory::Snapshot;

/// The per-GPU decoded-instruction cache.
pub(crate) use rdna3::CodeCache;

// SAFETY: `Snapshot::translate` returns a pointer only inside one BO it maps; the snapshot
// holds that BO's storage, so the host memory stays mapped while the dispatch (which holds the
// snapshot) runs. BO memory is never handed out as a Rust reference: the driver and the
// engines reach it through atomics (`hcq_amd_sys::shared` and `Snapshot`'s accessors).
unsafe impl rdna3::Memory for Snapshot {
    fn translate(&self, addr: u64, len: u64) -> Option<*mut u8> {
        Snapshot::translate(self, addr, len)
    }

    fn region(&self, addr: u64) -> Option<(u64, u64, *mut u8)> {
        Snapshot::region(self, addr)
    }
}

/// Index of an SH register in the register file (offset from 0x2c00).
fn r(regs: &[u32], reg: u16) -> u32 {
    regs.get(usize::from(reg)).copied().unwrap_or(0)
}

/// Builds the dispatch from the register file and the packet; `Ok(None)` when there is nothing
/// to run. What the registers do not hold is the GPU's (the shader engines, the step budget,
/// the queue's stop flag): [`run`] sets it.
pub(crate) fn params(sh: &[u32], d: &DispatchDirect) -> Result<Option<rdna3::Dispatch>, String> {
    use regs::initiator::*;
    if d.initiator & COMPUTE_SHADER_EN == 0 {
        return Ok(None);
    }
    let pgm = (u64::from(r(sh, regs::COMPUTE_PGM_HI) & 0xff) << 32)
        | u64::from(r(sh, regs::COMPUTE_PGM_LO));
    let scratch = (u64::from(r(sh, regs::COMPUTE_DISPATCH_SCRATCH_BASE_HI) & 0xff) << 32)
        | u64::from(r(sh, regs::COMPUTE_DISPATCH_SCRATCH_BASE_LO));
    let block = [
        r(sh, regs::COMPUTE_NUM_THREAD_X) & 0xffff,
        r(sh, regs::COMPUTE_NUM_THREAD_Y) & 0xffff,
        r(sh, regs::COMPUTE_NUM_THREAD_Z) & 0xffff,
    ];
    let threads = block.iter().map(|&b| u64::from(b)).product::<u64>();
    if threads == 0 || threads > 1024 {
        return Err(format!(
            "dispatch with invalid workgroup size {}x{}x{} (COMPUTE_NUM_THREAD_X/Y/Z)",
            block[0], block[1], block[2]
        ));
    }
    // Without FORCE_START_AT_000 the grid starts at COMPUTE_START_X/Y/Z; only a start at the
    // origin is modelled.
    let start = [
        r(sh, regs::COMPUTE_START_X),
        r(sh, regs::COMPUTE_START_Y),
        r(sh, regs::COMPUTE_START_Z),
    ];
    if d.initiator & FORCE_START_AT_000 == 0 && start != [0; 3] {
        return Err(format!(
            "dispatch starting at workgroup {}x{}x{} (COMPUTE_START_X/Y/Z without FORCE_START_AT_000) is not modelled",
            start[0], start[1], start[2]
        ));
    }
    // Thread dimensions that are not whole workgroups need partial workgroups, which the
    // interpreter does not run: every workgroup it runs is full.
    if d.initiator & USE_THREAD_DIMENSIONS != 0
        && d.dims.iter().zip(&block).any(|(&n, &b)| n % b != 0)
    {
        return Err(format!(
            "dispatch of {}x{}x{} threads in workgroups of {}x{}x{} needs partial workgroups, which are not modelled",
            d.dims[0], d.dims[1], d.dims[2], block[0], block[1], block[2]
        ));
    }
    let grid = if d.initiator & USE_THREAD_DIMENSIONS != 0 {
        [
            d.dims[0].div_ceil(block[0]),
            d.dims[1].div_ceil(block[1]),
            d.dims[2].div_ceil(block[2]),
        ]
    } else {
        d.dims
    };
    if grid.contains(&0) {
        return Ok(None);
    }
    let mut user_data = [0u32; 16];
    for (i, v) in user_data.iter_mut().enumerate() {
        *v = r(sh, regs::COMPUTE_USER_DATA_0 + i as u16);
    }
    Ok(Some(rdna3::Dispatch {
        code_entry: pgm << 8,
        rsrc1: r(sh, regs::COMPUTE_PGM_RSRC1),
        rsrc2: r(sh, regs::COMPUTE_PGM_RSRC2),
        rsrc3: r(sh, regs::COMPUTE_PGM_RSRC3),
        user_data,
        grid,
        block,
        scratch_base: scratch << 8,
        tmpring_size: r(sh, regs::COMPUTE_TMPRING_SIZE),
        wave32: d.initiator & CS_W32_EN != 0,
        shader_engines: 1,
        max_steps: 0,
        cancel: None,
    }))
}

/// Runs a dispatch to completion; a fault comes back as its class and description.
pub(crate) fn run(
    mem: &Snapshot,
    cache: &CodeCache,
    launch: rdna3::Dispatch,
    max_steps: u64,
    shader_engines: u32,
    cancel: Arc<AtomicBool>,
) -> Result<rdna3::DispatchStats, (FaultClass, String)> {
    let d = rdna3::Dispatch {
        shader_engines,
        max_steps,
        cancel: Some(cancel),
        ..launch
    };
    // An interpreter bug must not take the command processor (and its queue) down with it.
    let outcome =
        std::panic::catch_unwind(AssertUnwindSafe(|| rdna3::run_dispatch(mem, cache, &d)));
    match outcome {
        Ok(Ok(stats)) => Ok(stats),
        Err(panic) => {
            let msg = panic
                .downcast_ref::<&str>()
                .map(|s| s.to_string())
                .or_else(|| panic.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "unknown panic".into());
            Err((
                FaultClass::Hw,
                format!("dispatch fault: interpreter panicked: {msg}"),
            ))
        }
        Ok(Err(fault)) => Err((
            FaultClass::of_shader(&fault),
            format!("dispatch fault: {fault}"),
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use hcq_amd_sys::regs::initiator::*;

    fn registers(block: [u32; 3], start: [u32; 3]) -> Vec<u32> {
        let mut sh = vec![0u32; 0x400];
        sh[usize::from(regs::COMPUTE_NUM_THREAD_X)] = block[0];
        sh[usize::from(regs::COMPUTE_NUM_THREAD_Y)] = block[1];
        sh[usize::from(regs::COMPUTE_NUM_THREAD_Z)] = block[2];
        sh[usize::from(regs::COMPUTE_START_X)] = start[0];
        sh[usize::from(regs::COMPUTE_START_Y)] = start[1];
        sh[usize::from(regs::COMPUTE_START_Z)] = start[2];
        sh
    }

    fn direct(dims: [u32; 3], initiator: u32) -> DispatchDirect {
        DispatchDirect { dims, initiator }
    }

    #[test]
    fn thread_dimensions_become_whole_workgroups() {
        let sh = registers([64, 2, 1], [0; 3]);
        let p = params(
            &sh,
            &direct([256, 4, 3], COMPUTE_SHADER_EN | USE_THREAD_DIMENSIONS),
        )
        .expect("valid")
        .expect("something to run");
        assert_eq!(p.grid, [4, 2, 3]);
        // 100 threads in workgroups of 64: the second workgroup would be partial.
        let e = params(
            &sh,
            &direct([100, 4, 3], COMPUTE_SHADER_EN | USE_THREAD_DIMENSIONS),
        )
        .expect_err("partial workgroups");
        assert!(e.contains("partial workgroups"), "{e}");
    }

    #[test]
    fn a_start_away_from_the_origin_is_reported_unless_forced_to_it() {
        let sh = registers([32, 1, 1], [2, 0, 0]);
        let e = params(&sh, &direct([4, 1, 1], COMPUTE_SHADER_EN)).expect_err("start 2");
        assert!(e.contains("starting at workgroup 2x0x0"), "{e}");
        let p = params(
            &sh,
            &direct([4, 1, 1], COMPUTE_SHADER_EN | FORCE_START_AT_000),
        )
        .expect("valid")
        .expect("something to run");
        assert_eq!(p.grid, [4, 1, 1]);
    }
}
