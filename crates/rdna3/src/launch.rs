//! Dispatch: wave launch state from the COMPUTE_* registers, workgroup scheduling across host
//! threads, and round-robin execution of a workgroup's waves (so `s_barrier` works).

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use crate::code_cache::{CodeCache, LocalCodeCache};
use crate::exec::{
    mode_from_rsrc1, wave32_vgprs_of_rsrc1, ExecContext, Flow, PrivateSegment, Wave, WAVE_SIZE,
};
use crate::fault::{Fault, FaultKind};
use crate::jit::{self, BlockExit};
use crate::memory::Memory;
use crate::operand::EXEC_LO;
use hcq_amd_sys::regs;

/// Everything the command processor collected for one DISPATCH_DIRECT.
#[derive(Clone, Debug, Default)]
pub struct Dispatch {
    /// Byte address of the first instruction (`(PGM_HI << 32 | PGM_LO) << 8`).
    pub code_entry: u64,
    /// COMPUTE_PGM_RSRC1 (VGPRS, bits 5:0, sets each wave's VGPR allocation; FLOAT_MODE,
    /// bits 19:12, DX10_CLAMP, bit 21, and IEEE_MODE, bit 23, its initial MODE register).
    pub rsrc1: u32,
    /// COMPUTE_PGM_RSRC2.
    pub rsrc2: u32,
    /// COMPUTE_PGM_RSRC3.
    pub rsrc3: u32,
    /// COMPUTE_USER_DATA_0..15.
    pub user_data: [u32; 16],
    /// Workgroups per dimension.
    pub grid: [u32; 3],
    /// Work-items per workgroup per dimension (COMPUTE_NUM_THREAD_X/Y/Z).
    pub block: [u32; 3],
    /// COMPUTE_DISPATCH_SCRATCH_BASE as a byte address.
    pub scratch_base: u64,
    /// COMPUTE_TMPRING_SIZE.
    pub tmpring_size: u32,
    /// Shader engines the scratch ring spans: on gfx11 `TMPRING_SIZE.WAVES` counts the slots
    /// of each, so the ring holds `WAVES × shader_engines` slots (1 makes WAVES the total).
    pub shader_engines: u32,
    /// DISPATCH_INITIATOR.CS_W32_EN: wave32 (wave64 is unsupported).
    pub wave32: bool,
    /// Instruction budget per wave; exceeding it is a fault.
    pub max_steps: u64,
    /// Set by another thread to abort the dispatch (a queue being destroyed preempts its
    /// waves); checked every [`CANCEL_CHECK_INTERVAL`] instructions of a wave.
    pub cancel: Option<Arc<AtomicBool>>,
}

/// Instructions a wave runs between looks at [`Dispatch::cancel`].
pub const CANCEL_CHECK_INTERVAL: u64 = 4096;

/// Host cores to spread workgroups over. Asked once: on Linux the answer comes from reading
/// cgroup files, which would cost more than a small dispatch.
fn host_cores() -> usize {
    static CORES: std::sync::OnceLock<usize> = std::sync::OnceLock::new();
    *CORES.get_or_init(|| std::thread::available_parallelism().map_or(1, |n| n.get()))
}

/// Counters of a completed dispatch.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct DispatchStats {
    /// Workgroups run.
    pub workgroups: u64,
    /// Waves run.
    pub waves: u64,
    /// Instructions executed (summed over waves).
    pub instructions: u64,
    /// Host threads the dispatch was given: the calling thread and the helpers offered its
    /// workgroups (at most the host's cores and the workgroups; one for a dispatch expected to
    /// be short).
    pub threads: u64,
}

/// A dispatch expected to take less host time than this (from its kernel's last dispatch)
/// runs on the calling thread alone: waking a helper and waiting for it costs ~15-20 µs, so
/// sharing a short dispatch makes it slower (tinygrad's four-workgroup kernels: 36 -> 19 µs).
const SHARED_DISPATCH_MIN_NS: u64 = 40_000;

/// Fields of COMPUTE_PGM_RSRC2 used at wave launch.
#[derive(Clone, Copy, Debug)]
pub struct Rsrc2 {
    /// SCRATCH_EN (bit 0).
    pub scratch_enable: bool,
    /// USER_SGPR (bits 5:1): user SGPRs loaded from USER_DATA.
    pub user_sgprs: u32,
    /// TGID_X_EN, TGID_Y_EN, TGID_Z_EN (bits 7, 8, 9).
    pub workgroup_id_enable: [bool; 3],
    /// TG_SIZE_EN (bit 10): workgroup-info SGPR.
    pub workgroup_info_enable: bool,
    /// TIDIG_COMP_CNT (bits 12:11): work-item id components beyond X.
    pub workitem_id_components: u32,
    /// LDS_SIZE (bits 23:15) in 512-byte granules... converted to bytes.
    pub lds_bytes: usize,
}

/// LDS allocation granularity of COMPUTE_PGM_RSRC2.LDS_SIZE on gfx11 (128 dwords).
pub const LDS_GRANULE_BYTES: usize = regs::LDS_GRANULE as usize;
/// Granularity of COMPUTE_TMPRING_SIZE.WAVESIZE (bytes of scratch per wave).
pub const TMPRING_WAVESIZE_GRANULE: u64 = 256;
/// LDS available to one workgroup on gfx11.
pub const MAX_LDS_BYTES: usize = regs::LDS_MAX_BYTES as usize;

impl Rsrc2 {
    /// Decodes the launch-relevant fields.
    pub fn decode(rsrc2: u32) -> Self {
        let r = regs::PgmRsrc2(rsrc2);
        Rsrc2 {
            scratch_enable: r.scratch_en() != 0,
            user_sgprs: r.user_sgpr(),
            workgroup_id_enable: [r.tgid_x_en() != 0, r.tgid_y_en() != 0, r.tgid_z_en() != 0],
            workgroup_info_enable: r.tg_size_en() != 0,
            workitem_id_components: r.tidig_comp_cnt(),
            lds_bytes: r.lds_size() as usize * LDS_GRANULE_BYTES,
        }
    }
}

fn dispatch_fault(kind: FaultKind) -> Fault {
    Fault {
        kind,
        pc: 0,
        instruction: None,
        workgroup: [0; 3],
    }
}

/// Runs a dispatch to completion. Workgroups run in parallel on the calling thread and the
/// pool's persistent host threads (`pool.rs`); the waves of a workgroup run round-robin on one
/// thread. The first fault stops the dispatch.
pub fn run_dispatch<M: Memory>(
    mem: &M,
    code: &CodeCache,
    d: &Dispatch,
) -> Result<DispatchStats, Fault> {
    if !d.wave32 {
        return Err(dispatch_fault(FaultKind::Unsupported(
            "wave64 dispatch (CS_W32_EN clear)".to_string(),
        )));
    }
    let rsrc2 = Rsrc2::decode(d.rsrc2);
    if rsrc2.lds_bytes > MAX_LDS_BYTES {
        return Err(dispatch_fault(FaultKind::Unsupported(format!(
            "LDS size {} bytes",
            rsrc2.lds_bytes
        ))));
    }
    if d.block.contains(&0) || d.grid.contains(&0) {
        return Ok(DispatchStats::default());
    }
    // Three u32 factors can exceed u64: checked, so a huge launch is refused, not wrapped.
    let product = |v: [u32; 3]| {
        v.iter()
            .try_fold(1u64, |acc, &x| acc.checked_mul(u64::from(x)))
    };
    let items_per_group = match product(d.block) {
        Some(n) if n <= 1024 => n,
        _ => {
            return Err(dispatch_fault(FaultKind::Unsupported(format!(
                "workgroup of {}x{}x{} work-items",
                d.block[0], d.block[1], d.block[2]
            ))))
        }
    };
    let Some(groups) = product(d.grid) else {
        return Err(dispatch_fault(FaultKind::Unsupported(format!(
            "grid of {}x{}x{} workgroups (more than 2^64)",
            d.grid[0], d.grid[1], d.grid[2]
        ))));
    };
    let waves_per_group = items_per_group.div_ceil(WAVE_SIZE as u64);
    let mut threads = host_cores()
        .min(usize::try_from(groups).unwrap_or(usize::MAX))
        .max(1);
    // Each running wave owns one slot of the scratch ring (TMPRING_SIZE.WAVES slots per
    // shader engine).
    let ring_slots = u64::from(d.tmpring_size & 0xfff) * u64::from(d.shader_engines.max(1));
    if rsrc2.scratch_enable {
        if ring_slots < waves_per_group {
            return Err(dispatch_fault(FaultKind::Unsupported(format!(
                "scratch ring of {ring_slots} waves for workgroups of {waves_per_group} waves"
            ))));
        }
        threads = threads
            .min(usize::try_from(ring_slots / waves_per_group).unwrap_or(usize::MAX))
            .max(1);
    }
    let short = code
        .workgroup_cost(d.code_entry)
        .is_some_and(|ns| ns.saturating_mul(groups) < SHARED_DISPATCH_MIN_NS);
    if short {
        threads = 1;
    }
    // Threads take chunks of consecutive workgroups, which amortises the shared counter; small
    // grids are handed out one workgroup at a time, since a thread holding the last chunk
    // while the others idle costs more than the counter (16 workgroups in chunks of four
    // kept two threads busy ~1.5x the wall time of a matmul dispatch, one at a time ~1.65x).
    let chunk = (groups / (threads as u64 * 8)).clamp(1, 4);
    let next_thread = AtomicU64::new(0);

    let next_group = AtomicU64::new(0);
    let abort = AtomicBool::new(false);
    let first_fault: Mutex<Option<(u64, Fault)>> = Mutex::new(None);
    let totals = Mutex::new(DispatchStats::default());
    let mem_dyn: &dyn Memory = mem;

    let busy = AtomicU64::new(0);
    let worker = || {
        let started = std::time::Instant::now();
        let thread_index = next_thread.fetch_add(1, Ordering::Relaxed);
        let mut local_code = LocalCodeCache::new(code);
        let mut stats = DispatchStats::default();
        let mut lds = vec![0u8; rsrc2.lds_bytes];
        let mut pool: Vec<Wave> = Vec::new();
        'outer: while !abort.load(Ordering::Relaxed) {
            let start = next_group.fetch_add(chunk, Ordering::Relaxed);
            if start >= groups {
                break;
            }
            for index in start..(start + chunk).min(groups) {
                if abort.load(Ordering::Relaxed) {
                    break 'outer;
                }
                let workgroup = [
                    (index % u64::from(d.grid[0])) as u32,
                    (index / u64::from(d.grid[0]) % u64::from(d.grid[1])) as u32,
                    (index / (u64::from(d.grid[0]) * u64::from(d.grid[1]))) as u32,
                ];
                lds.fill(0);
                // The hardware may give a wave any slot of the ring; here the highest go first,
                // so a ring larger than the memory behind it faults on the first dispatch that
                // uses scratch instead of overwriting what follows only under load.
                let first_slot = ring_slots.saturating_sub((thread_index + 1) * waves_per_group);
                match run_workgroup(
                    mem_dyn,
                    &mut local_code,
                    d,
                    &rsrc2,
                    workgroup,
                    first_slot,
                    &mut lds,
                    &mut pool,
                ) {
                    Ok(group_stats) => {
                        stats.workgroups += 1;
                        stats.waves += group_stats.waves;
                        stats.instructions += group_stats.instructions;
                    }
                    Err(fault) => {
                        abort.store(true, Ordering::Relaxed);
                        if let Ok(mut slot) = first_fault.lock() {
                            // Report the lowest-numbered faulting workgroup for determinism.
                            if slot.as_ref().is_none_or(|(i, _)| index < *i) {
                                *slot = Some((index, fault));
                            }
                        }
                        break 'outer;
                    }
                }
            }
        }
        let spent = u64::try_from(started.elapsed().as_nanos()).unwrap_or(u64::MAX);
        busy.fetch_add(spent, Ordering::Relaxed);
        if let Ok(mut t) = totals.lock() {
            t.workgroups += stats.workgroups;
            t.waves += stats.waves;
            t.instructions += stats.instructions;
        }
    };

    // Every run of `worker` takes a distinct `thread_index` below `threads`: the caller's run
    // and at most `threads - 1` helpers.
    crate::pool::run(&worker, threads - 1, host_cores().saturating_sub(1));
    if let Some((_, fault)) = first_fault.into_inner().ok().flatten() {
        return Err(fault);
    }
    let mut totals = totals.into_inner().unwrap_or_default();
    totals.threads = threads as u64;
    if let Some(per_group) = busy.load(Ordering::Relaxed).checked_div(totals.workgroups) {
        code.note_workgroup_cost(d.code_entry, per_group);
    }
    Ok(totals)
}

/// Builds the launch state of wave `wave_index` of a workgroup.
fn launch_wave(
    wave: &mut Wave,
    d: &Dispatch,
    rsrc2: &Rsrc2,
    workgroup: [u32; 3],
    wave_index: u32,
    waves: u32,
    first_slot: u64,
) {
    wave.reset(d.code_entry);
    // The register file the hardware gives the wave is what the driver programmed, not what
    // the code object's metadata claims.
    wave.set_vgpr_allocation(wave32_vgprs_of_rsrc1(d.rsrc1));
    // The SPI loads MODE from the float mode, DX10_CLAMP and IEEE fields of RSRC1, which the
    // driver copies from the kernel descriptor.
    wave.mode = mode_from_rsrc1(d.rsrc1);
    let user = (rsrc2.user_sgprs as usize).min(d.user_data.len());
    wave.sgpr[..user].copy_from_slice(&d.user_data[..user]);
    let mut next = rsrc2.user_sgprs as usize;
    for (dim, enabled) in rsrc2.workgroup_id_enable.iter().enumerate() {
        if *enabled && next < 106 {
            wave.sgpr[next] = workgroup[dim];
            next += 1;
        }
    }
    if rsrc2.workgroup_info_enable && next < 106 {
        // Workgroup info: wave index in the group (bits 5:0) and wave count (bits 11:6).
        wave.sgpr[next] = (wave_index & 0x3f) | ((waves & 0x3f) << 6);
    }
    // gfx11 uses architected flat scratch: no scratch-offset SGPR; the wave's private segment
    // is slot `first_slot + wave_index` of the scratch ring at COMPUTE_DISPATCH_SCRATCH_BASE,
    // each slot TMPRING_SIZE.WAVESIZE (bits 24:12) × 256 bytes.
    if rsrc2.scratch_enable {
        let wave_bytes = u64::from((d.tmpring_size >> 12) & 0x1fff) * TMPRING_WAVESIZE_GRANULE;
        let slot = first_slot.wrapping_add(u64::from(wave_index));
        wave.private = PrivateSegment {
            base: d.scratch_base.wrapping_add(slot.wrapping_mul(wave_bytes)),
            bytes_per_lane: wave_bytes / WAVE_SIZE as u64,
        };
    }
    // Work-item ids: v0 = x | y << 10 | z << 20; EXEC = lanes that exist.
    let [bx, by, bz] = d.block;
    let total = bx * by * bz;
    let mut exec = 0u32;
    wave.note_vgpr_use(1);
    for lane in 0..WAVE_SIZE as u32 {
        let flat = wave_index * WAVE_SIZE as u32 + lane;
        if flat >= total {
            break;
        }
        exec |= 1 << lane;
        let x = flat % bx;
        let y = if rsrc2.workitem_id_components >= 1 {
            flat / bx % by
        } else {
            0
        };
        let z = if rsrc2.workitem_id_components >= 2 {
            flat / (bx * by)
        } else {
            0
        };
        wave.vgpr[0][lane as usize] = (x & 0x3ff) | ((y & 0x3ff) << 10) | ((z & 0x3ff) << 20);
    }
    wave.sgpr[usize::from(EXEC_LO)] = exec;
}

/// Waves of the largest workgroup `run_dispatch` takes (1024 work-items).
const MAX_WAVES_PER_GROUP: usize = 1024 / WAVE_SIZE;

struct GroupStats {
    waves: u64,
    instructions: u64,
}

/// Runs all waves of one workgroup: each wave runs until it ends or reaches a barrier; when
/// every live wave waits at the barrier, all are released.
#[allow(clippy::too_many_arguments)]
fn run_workgroup(
    mem: &dyn Memory,
    code: &mut LocalCodeCache<'_>,
    d: &Dispatch,
    rsrc2: &Rsrc2,
    workgroup: [u32; 3],
    first_slot: u64,
    lds: &mut [u8],
    pool: &mut Vec<Wave>,
) -> Result<GroupStats, Fault> {
    let items = d.block[0] * d.block[1] * d.block[2];
    let wave_count = items.div_ceil(WAVE_SIZE as u32);
    // Wave state is reused across the worker's workgroups (a reset clears only the registers
    // the previous wave touched).
    while pool.len() < wave_count as usize {
        pool.push(Wave::new(d.code_entry));
    }
    let waves = &mut pool[..wave_count as usize];
    for (w, wave) in waves.iter_mut().enumerate() {
        launch_wave(wave, d, rsrc2, workgroup, w as u32, wave_count, first_slot);
    }
    // At most 32 waves (`run_dispatch` refuses workgroups over 1024 items): on the stack, as
    // a workgroup of one short wave would otherwise spend a tenth of its time allocating.
    let mut done = [false; MAX_WAVES_PER_GROUP];
    let mut steps = [0u64; MAX_WAVES_PER_GROUP];
    let (done, steps) = (&mut done[..waves.len()], &mut steps[..waves.len()]);
    let mut instructions = 0u64;
    loop {
        let mut progressed = false;
        for (index, wave) in waves.iter_mut().enumerate() {
            if done[index] {
                continue;
            }
            progressed = true;
            let mut ctx = ExecContext {
                mem,
                lds: &mut *lds,
            };
            let outcome = run_until_blocked(wave, &mut ctx, code, d, &mut steps[index]);
            match outcome {
                Ok(WaveStop::Ended) => done[index] = true,
                Ok(WaveStop::Barrier) => {}
                Err((kind, pc, instruction)) => {
                    return Err(Fault {
                        kind,
                        pc,
                        instruction,
                        workgroup,
                    })
                }
            }
        }
        if !progressed {
            break;
        }
        // All live waves are at the barrier (or ended): release them.
    }
    instructions += steps.iter().sum::<u64>();
    Ok(GroupStats {
        waves: u64::from(wave_count),
        instructions,
    })
}

enum WaveStop {
    Ended,
    Barrier,
}

type WaveError = (FaultKind, u64, Option<String>);

fn run_until_blocked(
    wave: &mut Wave,
    ctx: &mut ExecContext<'_>,
    code: &mut LocalCodeCache<'_>,
    d: &Dispatch,
    steps: &mut u64,
) -> Result<WaveStop, WaveError> {
    let max_steps = d.max_steps;
    let mut next_cancel_check = *steps;
    // A wave starts (and resumes after a barrier) at a block start; compiled blocks are
    // looked up only there (`jit/`), and the interpreter keeps track of where the next one is.
    let mut at_block_start = true;
    let mut since_block_start = 0usize;
    loop {
        let pc = wave.pc;
        if *steps >= max_steps {
            return Err((FaultKind::StepBudgetExceeded { steps: max_steps }, pc, None));
        }
        if *steps >= next_cancel_check {
            if d.cancel.as_ref().is_some_and(|c| c.load(Ordering::Relaxed)) {
                return Err((FaultKind::Aborted, pc, None));
            }
            next_cancel_check = steps.saturating_add(CANCEL_CHECK_INTERVAL);
        }
        if at_block_start {
            let mem = ctx.mem;
            if let Some(run) = jit::run_block(code, mem, wave, ctx, max_steps - *steps) {
                *steps += run.executed;
                match run.exit {
                    BlockExit::Continue(next) => wave.pc = next,
                    BlockExit::Barrier(next) => {
                        wave.pc = next;
                        return Ok(WaveStop::Barrier);
                    }
                    BlockExit::End => return Ok(WaveStop::Ended),
                    BlockExit::Fault(kind, pc, instruction) => return Err((kind, pc, instruction)),
                }
                continue;
            }
            since_block_start = 0;
        }
        let entry = code.fetch(ctx.mem, pc).map_err(|kind| (kind, pc, None))?;
        *steps += 1;
        let size = entry.size_bytes();
        let ends_block = jit::ends_block(&entry.inst);
        let flow = wave
            .execute(ctx, &entry.inst, size)
            .map_err(|kind| (kind, pc, Some(entry.inst.to_string())))?;
        since_block_start += 1;
        at_block_start =
            ends_block || flow != Flow::Next || since_block_start >= jit::MAX_BLOCK_INSTRUCTIONS;
        match flow {
            Flow::Next => wave.pc = pc.wrapping_add(size),
            Flow::Jump(target) => wave.pc = target,
            Flow::Barrier => {
                wave.pc = pc.wrapping_add(size);
                return Ok(WaveStop::Barrier);
            }
            Flow::End => return Ok(WaveStop::Ended),
        }
    }
}
