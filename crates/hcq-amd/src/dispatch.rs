//! Kernel launches: the argument segment in the device's ring, the registers and user SGPRs
//! of a dispatch, the AQL packet for kernels that read one, and the scratch ring the
//! dispatches name.

use crate::device::{lock, AmdDevice, DeviceState};
use crate::memory::{AllocFlags, MemoryKind};
use crate::program::AmdProgram;
use crate::trace_stamps::TraceSlot;
use crate::GPU_TIMESTAMP_HZ;
use hcq_amd_sys::commands::CommandBuilder;
use hcq_amd_sys::kd::KernelDescriptor;
use hcq_amd_sys::pm4::DispatchSetup;
use hcq_amd_sys::regs;
use hcq_core::{Arg, Error, Result};
use std::sync::Arc;
use std::time::Duration;

/// Lanes of a wave: the driver loads wave32 kernels only.
pub(crate) const WAVE_LANES: u64 = 32;
/// The scratch ring never takes more than this fraction of VRAM; past it, fewer waves get a
/// slot at once (the hardware holds the others back until a slot frees).
const SCRATCH_VRAM_FRACTION: u64 = 8;
/// Waves per shader engine the scratch ring keeps at least: a 1024-work-item workgroup, which
/// runs within one shader engine.
const SCRATCH_MIN_WAVES_PER_SE: u32 = 32;

impl AmdDevice {
    /// Makes the scratch ring give each wave at least `wave_bytes`, replacing it with a larger
    /// one when it is smaller. A ring that would take more than 1/8 of VRAM at full occupancy
    /// gets fewer slots per shader engine (`WAVES`), halved again while VRAM refuses it, down
    /// to one largest workgroup per engine. The replaced ring stays allocated until the work
    /// already queued has finished, and for as long as a graph built with it lives.
    pub(crate) fn ensure_scratch(&self, wave_bytes: u64) -> Result<()> {
        let mut st = lock(&self.state);
        if st.scratch_wave_bytes >= wave_bytes {
            return Ok(());
        }
        let p = |n| self.node.prop(n);
        let cus = p("simd_count")? / p("simd_per_cu")?.max(1);
        let slots = cus * p("max_slots_scratch_cu")?;
        // gfx11 counts the ring's waves per shader engine: all of them together must fit.
        let engines = (p("array_count")? / p("simd_arrays_per_engine")?.max(1)).max(1);
        let full = u32::try_from(slots / engines)
            .unwrap_or(u32::MAX)
            .min(regs::TMPRING_MAX_WAVES_PER_SE);
        let budget = p("local_mem_size")? / SCRATCH_VRAM_FRACTION;
        let within_budget = u32::try_from(budget / (wave_bytes * engines)).unwrap_or(u32::MAX);
        let mut waves_per_se = full
            .min(within_budget)
            .max(SCRATCH_MIN_WAVES_PER_SE.min(full));
        let ring = loop {
            let bytes = u64::from(waves_per_se) * engines * wave_bytes;
            match self.alloc_mem(bytes, MemoryKind::Vram, AllocFlags::default()) {
                Ok(ring) => break ring,
                Err(Error::OutOfMemory { .. }) if waves_per_se > SCRATCH_MIN_WAVES_PER_SE => {
                    waves_per_se = (waves_per_se / 2).max(SCRATCH_MIN_WAVES_PER_SE);
                }
                Err(e) => return Err(e),
            }
        };
        if let Some(old) = st.scratch.replace(Arc::new(ring)) {
            st.retired.push(old);
        }
        st.scratch_wave_bytes = wave_bytes;
        st.tmpring_size = regs::tmpring_size(waves_per_se, wave_bytes);
        Ok(())
    }

    /// Launches `prg` over `global` workgroups of `local` work-items. With `wait`, blocks until it
    /// finishes and returns its GPU time.
    pub fn launch<B>(
        &self,
        prg: &AmdProgram,
        args: &[Arg<B>],
        address_of: impl Fn(&B) -> Result<u64>,
        global: [u32; 3],
        local: [u32; 3],
        wait: bool,
    ) -> Result<Option<Duration>> {
        self.launch_with_lds(prg, args, address_of, global, local, 0, wait)
    }

    /// [`AmdDevice::launch`] with `dynamic_lds` bytes of LDS per workgroup beyond what the
    /// kernel declares (HIP's `extern __shared__` arrays, sized at launch); the kernel's
    /// `hidden_dynamic_lds_size` argument, when it has one, says how many.
    #[allow(clippy::too_many_arguments)]
    pub fn launch_with_lds<B>(
        &self,
        prg: &AmdProgram,
        args: &[Arg<B>],
        address_of: impl Fn(&B) -> Result<u64>,
        global: [u32; 3],
        local: [u32; 3],
        dynamic_lds: u32,
        wait: bool,
    ) -> Result<Option<Duration>> {
        let lds = lds_bytes(prg, dynamic_lds)?;
        if prg.device_gpu_id != self.node.gpu_id {
            return Err(Error::InvalidArgument(format!(
                "program {} was loaded on another device",
                prg.name
            )));
        }
        validate_dims(global, local)?;
        if prg.wave_scratch > 0 {
            // Loaded through another stream of the GPU, the program may need more scratch
            // than this queue's ring has.
            self.ensure_scratch(prg.wave_scratch)?;
        }
        let mut st = lock(&self.state);
        self.check_usable()?;
        // Before the kernel arguments are placed: both of these may synchronise.
        self.wrap_timeline_if_due(&mut st)?;
        let stamps = self.trace_begin(&mut st, &prg.name)?;
        // Kernel arguments: an optional dispatch packet first, then the argument segment.
        let dispatch_packet = prg.user_sgprs.dispatch_ptr.is_some();
        let need =
            (prg.kernarg_size as u64).next_multiple_of(64) + if dispatch_packet { 64 } else { 0 };
        let mut at = st.kernargs_next.next_multiple_of(prg.kernarg_align as u64);
        if at + need > self.kernargs.va + self.kernargs.size {
            // The ring is full: everything queued must finish before its arguments are reused.
            self.wait_locked(&mut st)?;
            at = self.kernargs.va;
        }
        let kernargs_addr = at;
        let off = kernargs_addr - self.kernargs.va;
        // The arguments are built in host memory and then stored into the ring: GPU memory is
        // never a Rust slice (a kernel may read past its own arguments while they are written).
        let mut segment = std::mem::take(&mut st.kernarg_image);
        segment.clear();
        segment.resize(prg.kernarg_size as usize, 0);
        let placed = prg
            .write_kernargs(args, address_of, global, local, &mut segment)
            .and_then(|()| {
                prg.write_dynamic_lds_size(dynamic_lds, &mut segment);
                self.kernargs.write(off, &segment)
            });
        st.kernarg_image = segment;
        placed?;
        let mut dispatch_ptr = 0;
        if dispatch_packet {
            dispatch_ptr = kernargs_addr + (prg.kernarg_size as u64).next_multiple_of(64);
            let packet = aql_dispatch_packet(&prg.descriptor, global, local, kernargs_addr, lds);
            self.kernargs
                .write(dispatch_ptr - self.kernargs.va, &packet)?;
        }
        st.kernargs_next = kernargs_addr + need;

        let setup = dispatch_setup(prg, &mut st, kernargs_addr, dispatch_ptr, lds);
        let room_wait = self.ring_wait(&st);
        let value = st.timeline_value;
        let st = &mut *st;
        let timeline = &st.timeline;
        // The timeline's own stamps, which the caller's wait reads, enclose the trace's.
        let timed = wait.then(|| (timeline.start_ts_addr(), timeline.end_ts_addr()));
        let previous = [(timeline.value_addr(), value - 1)];
        timeline.release_after(&mut st.builder, &previous, timed, value, |b| {
            b.stamped(stamps.map(TraceSlot::addresses), |b| {
                b.exec(&setup, global, local);
            })
        });
        st.queue.submit(&st.builder.words, room_wait)?;
        Self::trace_commit_with(
            st,
            stamps,
            &prg.name,
            || {
                let [g, l] = [global, local].map(|d| format!("{}x{}x{}", d[0], d[1], d[2]));
                vec![
                    ("grid", g),
                    ("block", l),
                    ("lds", lds.to_string()),
                    (
                        "code object",
                        format!("0x{:x} ({} bytes)", prg.image.va, prg.image.size),
                    ),
                ]
            },
            "compute",
        );
        st.advance();
        if !wait {
            return Ok(None);
        }
        self.wait_locked(st)?;
        let ticks = st.timeline.end_ts().saturating_sub(st.timeline.start_ts());
        Ok(Some(Duration::from_nanos(
            ticks.saturating_mul(1_000_000_000 / GPU_TIMESTAMP_HZ),
        )))
    }
}

/// Checks launch dimensions: no empty axis, at most 1024 work-items per workgroup, and grids of
/// at most 2^32 - 1 work-items per axis.
pub fn validate_dims(global: [u32; 3], local: [u32; 3]) -> Result<()> {
    if global.contains(&0) || local.contains(&0) {
        return Err(Error::InvalidArgument(format!(
            "empty launch: global {global:?}, local {local:?}"
        )));
    }
    let threads: u64 = local.iter().map(|&x| x as u64).product();
    if threads > 1024 {
        return Err(Error::InvalidArgument(format!(
            "workgroup of {threads} work-items (at most 1024)"
        )));
    }
    for (g, l) in global.iter().zip(&local) {
        if (*g as u64) * (*l as u64) > u32::MAX as u64 {
            return Err(Error::InvalidArgument(format!(
                "grid of {g} x {l} work-items overflows 32 bits"
            )));
        }
    }
    Ok(())
}

/// LDS bytes per workgroup of `prg` with `dynamic` bytes beyond its own, checked against
/// what a workgroup can have.
pub(crate) fn lds_bytes(prg: &AmdProgram, dynamic: u32) -> Result<u32> {
    let fixed = prg.descriptor.group_segment_fixed_size;
    match fixed.checked_add(dynamic) {
        Some(total) if total <= regs::LDS_MAX_BYTES => Ok(total),
        _ => Err(Error::InvalidArgument(format!(
            "kernel {} declares {fixed} bytes of LDS; {dynamic} more make more than the {} \
             bytes a workgroup can have",
            prg.name,
            regs::LDS_MAX_BYTES
        ))),
    }
}

/// Scratch one wave of a kernel with `per_lane` bytes of private memory per work-item needs,
/// in `COMPUTE_TMPRING_SIZE.WAVESIZE`'s 256-byte units.
pub(crate) fn scratch_wave_bytes(per_lane: u32) -> u64 {
    (u64::from(per_lane) * WAVE_LANES).next_multiple_of(256)
}

/// The registers and user SGPRs of one dispatch of `prg` with its arguments at
/// `kernargs_addr` (and its AQL packet at `dispatch_ptr`, 0 when it has none) and
/// `group_segment_size` bytes of LDS per workgroup ([`lds_bytes`]); takes the next dispatch
/// id.
pub(crate) fn dispatch_setup(
    prg: &AmdProgram,
    st: &mut DeviceState,
    kernargs_addr: u64,
    dispatch_ptr: u64,
    group_segment_size: u32,
) -> DispatchSetup {
    let mut user_data = [0u32; 16];
    let mut put64 = |at: Option<u32>, v: u64| {
        if let Some(i) = at {
            user_data[i as usize] = v as u32;
            user_data[i as usize + 1] = (v >> 32) as u32;
        }
    };
    let l = prg.user_sgprs;
    put64(l.kernarg_segment_ptr, kernargs_addr);
    put64(l.dispatch_ptr, dispatch_ptr);
    st.dispatch_id += 1;
    put64(l.dispatch_id, st.dispatch_id);
    if let Some(i) = l.private_segment_size {
        user_data[i as usize] = prg.descriptor.private_segment_fixed_size;
    }
    DispatchSetup {
        code_entry: prg.code_entry,
        rsrc1: prg.rsrc1,
        rsrc2: prg.descriptor.compute_pgm_rsrc2,
        group_segment_size,
        scratch_base: st.scratch.as_ref().map_or(0, |s| s.va),
        tmpring_size: st.tmpring_size,
        user_data,
        user_data_count: regs::PgmRsrc2(prg.descriptor.compute_pgm_rsrc2).user_sgpr() as usize,
    }
}

/// An `hsa_kernel_dispatch_packet_t` for kernels that read their launch through the dispatch
/// pointer: sizes in work-items, the kernarg address, segment sizes.
pub(crate) fn aql_dispatch_packet(
    descriptor: &KernelDescriptor,
    global: [u32; 3],
    local: [u32; 3],
    kernargs: u64,
    group_segment_size: u32,
) -> [u8; hcq_amd_sys::aql::KERNEL_DISPATCH_PACKET_BYTES] {
    hcq_amd_sys::aql::KernelDispatchPacket::for_launch(
        global,
        local,
        descriptor.private_segment_fixed_size,
        group_segment_size,
        kernargs,
    )
    .to_bytes()
}
