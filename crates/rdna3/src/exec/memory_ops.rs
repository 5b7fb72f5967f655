//! Memory instructions: SMEM (scalar loads), FLAT/GLOBAL/SCRATCH (per-lane vector memory,
//! checked through [`Memory::translate`]) and DS (LDS, bounds-checked).

use super::{
    unimplemented, ExecContext, Flow, Wave, APERTURE_SIZE, PRIVATE_APERTURE_BASE,
    SHARED_APERTURE_BASE, WAVE_SIZE,
};
use crate::decode::{
    integer_min_max_atomic, spec_dwords, AtomicOp, Ds, Flat, FlatSegment, MemAccess, Smem, D16,
};
use hcq_amd_sys::shared;

use crate::fault::FaultKind;
use crate::isa::{DsOp, SmemOp};
use crate::memory::{atomic_rmw_u32, atomic_rmw_u64, read_bytes, write_bytes};
use crate::operand::Operand;

/// Where one lane's access goes.
#[derive(Clone, Copy)]
enum Target {
    /// GPU virtual address.
    Global(u64),
    /// LDS byte address.
    Lds(u64),
}

/// The bytes `len` bytes at LDS address `addr` occupy. The hardware adds the address VGPR and
/// the instruction offset in 32 bits, wrapping (compilers fold a negative base and a positive
/// offset into one instruction), so only the low 32 bits of the sum count.
fn lds_range(lds: &[u8], addr: u64, len: usize) -> Result<std::ops::Range<usize>, FaultKind> {
    let addr = addr & u64::from(u32::MAX);
    let start = usize::try_from(addr).map_err(|_| FaultKind::LdsOutOfRange { addr })?;
    match start.checked_add(len) {
        Some(end) if end <= lds.len() => Ok(start..end),
        _ => Err(FaultKind::LdsOutOfRange { addr }),
    }
}

/// Reads the dword at LDS byte address `addr` (bounds-checked like [`lds_range`]).
#[inline(always)]
fn lds_read_u32(lds: &[u8], addr: u64) -> Result<u32, FaultKind> {
    let range = lds_range(lds, addr, 4)?;
    lds.get(range)
        .and_then(|bytes| <[u8; 4]>::try_from(bytes).ok())
        .map(u32::from_le_bytes)
        .ok_or(FaultKind::LdsOutOfRange { addr })
}

/// Writes the dword at LDS byte address `addr` (bounds-checked like [`lds_range`]).
#[inline(always)]
fn lds_write_u32(lds: &mut [u8], addr: u64, value: u32) -> Result<(), FaultKind> {
    let range = lds_range(lds, addr, 4)?;
    let bytes = lds
        .get_mut(range)
        .ok_or(FaultKind::LdsOutOfRange { addr })?;
    bytes.copy_from_slice(&value.to_le_bytes());
    Ok(())
}

fn read_target(ctx: &ExecContext<'_>, target: Target, out: &mut [u8]) -> Result<(), FaultKind> {
    match target {
        Target::Global(addr) => read_bytes(ctx.mem, addr, out),
        Target::Lds(addr) => {
            let range = lds_range(ctx.lds, addr, out.len())?;
            out.copy_from_slice(&ctx.lds[range]);
            Ok(())
        }
    }
}

fn write_target(ctx: &mut ExecContext<'_>, target: Target, data: &[u8]) -> Result<(), FaultKind> {
    match target {
        Target::Global(addr) => write_bytes(ctx.mem, addr, data),
        Target::Lds(addr) => {
            let range = lds_range(ctx.lds, addr, data.len())?;
            ctx.lds[range].copy_from_slice(data);
            Ok(())
        }
    }
}

fn rmw_target(
    ctx: &mut ExecContext<'_>,
    target: Target,
    wide: bool,
    update: impl Fn(u64) -> u64,
) -> Result<u64, FaultKind> {
    match target {
        Target::Global(addr) if wide => atomic_rmw_u64(ctx.mem, addr, update),
        Target::Global(addr) => {
            atomic_rmw_u32(ctx.mem, addr, |old| update(u64::from(old)) as u32).map(u64::from)
        }
        Target::Lds(addr) => {
            let len = if wide { 8 } else { 4 };
            if addr % len as u64 != 0 {
                return Err(FaultKind::LdsOutOfRange { addr });
            }
            let range = lds_range(ctx.lds, addr, len)?;
            let mut bytes = [0u8; 8];
            bytes[..len].copy_from_slice(&ctx.lds[range.clone()]);
            let old = u64::from_le_bytes(bytes);
            let new = update(old).to_le_bytes();
            ctx.lds[range].copy_from_slice(&new[..len]);
            Ok(old)
        }
    }
}

/// The new memory value of an atomic: `old` combined with `data` (and `compare`).
pub(super) fn atomic_update(op: AtomicOp, wide: bool, old: u64, data: u64, compare: u64) -> u64 {
    let mask = if wide { u64::MAX } else { 0xffff_ffff };
    let (old, data, compare) = (old & mask, data & mask, compare & mask);
    let signed = |x: u64| {
        if wide {
            x as i64
        } else {
            i64::from(x as u32 as i32)
        }
    };
    let float = |x: u64| {
        if wide {
            f64::from_bits(x)
        } else {
            f64::from(f32::from_bits(x as u32))
        }
    };
    let to_float = |x: f64| {
        if wide {
            x.to_bits()
        } else {
            u64::from((x as f32).to_bits())
        }
    };
    let result = match op {
        AtomicOp::Swap => data,
        AtomicOp::CmpSwap | AtomicOp::CmpSwapF => {
            if old == compare {
                data
            } else {
                old
            }
        }
        AtomicOp::MaskOr => (old & !data) | compare,
        AtomicOp::Wrap => {
            if old >= data {
                old - data
            } else {
                old.wrapping_add(compare)
            }
        }
        AtomicOp::Add => old.wrapping_add(data),
        AtomicOp::Sub => old.wrapping_sub(data),
        AtomicOp::Csub => old.saturating_sub(data),
        AtomicOp::Smin => {
            if signed(data) < signed(old) {
                data
            } else {
                old
            }
        }
        AtomicOp::Smax => {
            if signed(data) > signed(old) {
                data
            } else {
                old
            }
        }
        AtomicOp::Umin => old.min(data),
        AtomicOp::Umax => old.max(data),
        AtomicOp::And => old & data,
        AtomicOp::Or => old | data,
        AtomicOp::Xor => old ^ data,
        AtomicOp::Inc => {
            if old >= data {
                0
            } else {
                old + 1
            }
        }
        AtomicOp::Dec => {
            if old == 0 || old > data {
                data
            } else {
                old - 1
            }
        }
        AtomicOp::AddF => {
            if wide {
                (f64::from_bits(old) + f64::from_bits(data)).to_bits()
            } else {
                u64::from((f32::from_bits(old as u32) + f32::from_bits(data as u32)).to_bits())
            }
        }
        AtomicOp::MinF => to_float(super::float::min_f64(float(old), float(data))),
        AtomicOp::MaxF => to_float(super::float::max_f64(float(old), float(data))),
    };
    result & mask
}

impl Wave {
    pub(super) fn smem(&mut self, ctx: &mut ExecContext<'_>, i: &Smem) -> Result<Flow, FaultKind> {
        use SmemOp::*;
        let dwords = match i.op {
            S_LOAD_B32 | S_BUFFER_LOAD_B32 => 1,
            S_LOAD_B64 | S_BUFFER_LOAD_B64 => 2,
            S_LOAD_B128 | S_BUFFER_LOAD_B128 => 4,
            S_LOAD_B256 | S_BUFFER_LOAD_B256 => 8,
            S_LOAD_B512 | S_BUFFER_LOAD_B512 => 16,
            S_DCACHE_INV | S_GL1_INV | S_ATC_PROBE | S_ATC_PROBE_BUFFER => return Ok(Flow::Next),
        };
        // A buffer load's base is a 4-register descriptor (its first 48 bits are the address):
        // the whole tuple must be one.
        self.scalar_range(i.sbase, spec_dwords(i.op.operands(), "sbase") as usize)?;
        let mut base = self.read_scalar64(i.sbase, false)?;
        if matches!(
            i.op,
            S_BUFFER_LOAD_B32
                | S_BUFFER_LOAD_B64
                | S_BUFFER_LOAD_B128
                | S_BUFFER_LOAD_B256
                | S_BUFFER_LOAD_B512
        ) {
            base &= 0xffff_ffff_ffff; // descriptor base address is 48 bits
        }
        let soffset = if i.soffset == Operand::Null {
            0
        } else {
            u64::from(self.read_scalar(i.soffset)?)
        };
        let addr = base
            .wrapping_add(i.offset as i64 as u64)
            .wrapping_add(soffset)
            & !3;
        // A load into NULL reads memory (and can fault) but writes no register.
        let destination = if i.sdata == Operand::Null {
            0..0
        } else {
            self.scalar_range(i.sdata, dwords)?
        };
        let mut bytes = [0u8; 64];
        read_bytes(ctx.mem, addr, &mut bytes[..dwords * 4])?;
        for (k, slot) in destination.enumerate() {
            let mut word = [0u8; 4];
            word.copy_from_slice(&bytes[k * 4..k * 4 + 4]);
            self.sgpr[slot] = u32::from_le_bytes(word);
        }
        Ok(Flow::Next)
    }

    fn lane_target(&self, i: &Flat, lane: usize, saddr: u64) -> Result<Target, FaultKind> {
        let offset = i.offset as i64 as u64;
        match i.segment {
            FlatSegment::Global if i.saddr != Operand::Null => {
                let range = self.vgpr_range(i.addr, 1)?;
                let vaddr = u64::from(self.vgpr[range.start][lane]);
                Ok(Target::Global(
                    saddr.wrapping_add(vaddr).wrapping_add(offset),
                ))
            }
            FlatSegment::Global | FlatSegment::Flat => {
                let range = self.vgpr_range(i.addr, 2)?;
                let vaddr = u64::from(self.vgpr[range.start][lane])
                    | (u64::from(self.vgpr[range.start + 1][lane]) << 32);
                let addr = vaddr.wrapping_add(offset);
                if i.segment == FlatSegment::Flat {
                    if (SHARED_APERTURE_BASE..SHARED_APERTURE_BASE + APERTURE_SIZE).contains(&addr)
                    {
                        return Ok(Target::Lds(addr - SHARED_APERTURE_BASE));
                    }
                    if (PRIVATE_APERTURE_BASE..PRIVATE_APERTURE_BASE + APERTURE_SIZE)
                        .contains(&addr)
                    {
                        return self.private_target(i, addr - PRIVATE_APERTURE_BASE, lane);
                    }
                }
                Ok(Target::Global(addr))
            }
            FlatSegment::Scratch => {
                let mut private = saddr & 0xffff_ffff;
                if i.sve {
                    let range = self.vgpr_range(i.addr, 1)?;
                    private = private.wrapping_add(u64::from(self.vgpr[range.start][lane]));
                }
                self.private_target(i, private.wrapping_add(offset) & 0xffff_ffff, lane)
            }
        }
    }

    /// Maps a lane's private (scratch) offset to memory: each lane owns a contiguous slice
    /// of the wave's scratch area, and an access reaching past it (into the next lane's slice
    /// or past the slot `COMPUTE_TMPRING_SIZE` gives the wave) faults.
    fn private_target(&self, i: &Flat, offset: u64, lane: usize) -> Result<Target, FaultKind> {
        let per_lane = self.private.bytes_per_lane;
        let access = i.access.or_else(|| integer_min_max_atomic(i.op.mnemonic()));
        let width = match access {
            Some(MemAccess::Load { bytes, .. } | MemAccess::Store { bytes, .. }) => {
                u64::from(bytes)
            }
            Some(MemAccess::Atomic { wide: true, .. }) => 8,
            _ => 4,
        };
        if offset.saturating_add(width) > per_lane {
            return Err(FaultKind::VmFault {
                addr: PRIVATE_APERTURE_BASE + offset,
                write: !matches!(access, Some(MemAccess::Load { .. })),
            });
        }
        Ok(Target::Global(
            self.private
                .base
                .wrapping_add(lane as u64 * per_lane)
                .wrapping_add(offset),
        ))
    }

    pub(super) fn flat(&mut self, ctx: &mut ExecContext<'_>, i: &Flat) -> Result<Flow, FaultKind> {
        let Some(access) = i.access.or_else(|| integer_min_max_atomic(i.op.mnemonic())) else {
            return Err(unimplemented(i.op.mnemonic()));
        };
        let saddr = match (i.segment, i.saddr) {
            (FlatSegment::Flat, _) | (_, Operand::Null) => 0,
            (FlatSegment::Global, operand) => self.read_scalar64(operand, false)?,
            (FlatSegment::Scratch, operand) => u64::from(self.read_scalar(operand)?),
        };
        let exec = self.exec();
        match access {
            MemAccess::Load { bytes, signed, d16 } => {
                let dwords = (bytes as usize).div_ceil(4);
                let range = self.vgpr_range(i.vdst, dwords)?;
                if let Some((addrs, lo, base)) = self.wave_span(ctx, i, saddr, exec, bytes)? {
                    self.load_span(&addrs, lo, base, exec, range.start, bytes, signed, d16);
                    return Ok(Flow::Next);
                }
                for lane in 0..WAVE_SIZE {
                    if exec >> lane & 1 == 0 {
                        continue;
                    }
                    let target = self.lane_target(i, lane, saddr)?;
                    let mut buffer = [0u8; 16];
                    read_target(ctx, target, &mut buffer[..usize::from(bytes)])?;
                    self.write_loaded(range.start, lane, &buffer, bytes, signed, d16);
                }
            }
            MemAccess::Store { bytes, high_half } => {
                let dwords = (bytes as usize).div_ceil(4);
                let range = self.vgpr_range(i.data, dwords)?;
                if let Some((addrs, lo, base)) = self.wave_span(ctx, i, saddr, exec, bytes)? {
                    self.store_span(&addrs, lo, base, exec, range.start, bytes, high_half);
                    return Ok(Flow::Next);
                }
                for lane in 0..WAVE_SIZE {
                    if exec >> lane & 1 == 0 {
                        continue;
                    }
                    let target = self.lane_target(i, lane, saddr)?;
                    let mut buffer = [0u8; 16];
                    for k in 0..dwords {
                        buffer[k * 4..k * 4 + 4]
                            .copy_from_slice(&self.vgpr[range.start + k][lane].to_le_bytes());
                    }
                    if high_half {
                        buffer.copy_within(2..4, 0);
                    }
                    write_target(ctx, target, &buffer[..bytes as usize])?;
                }
            }
            MemAccess::Atomic { op, wide } => {
                let value_dwords = if wide { 2 } else { 1 };
                let data_dwords = if matches!(op, AtomicOp::CmpSwap | AtomicOp::CmpSwapF) {
                    value_dwords * 2
                } else {
                    value_dwords
                };
                let data = self.vgpr_range(i.data, data_dwords)?;
                let returns = i.glc;
                let dst = if returns {
                    Some(self.vgpr_range(i.vdst, value_dwords)?)
                } else {
                    None
                };
                for lane in 0..WAVE_SIZE {
                    if exec >> lane & 1 == 0 {
                        continue;
                    }
                    let target = self.lane_target(i, lane, saddr)?;
                    let read = |k: usize| -> u64 {
                        if wide {
                            u64::from(self.vgpr[data.start + k][lane])
                                | (u64::from(self.vgpr[data.start + k + 1][lane]) << 32)
                        } else {
                            u64::from(self.vgpr[data.start + k][lane])
                        }
                    };
                    let value = read(0);
                    let compare = if data_dwords > value_dwords {
                        read(value_dwords)
                    } else {
                        0
                    };
                    let old = rmw_target(ctx, target, wide, |old| {
                        atomic_update(op, wide, old, value, compare)
                    })
                    .map_err(|fault| match fault {
                        FaultKind::VmFault { addr, .. } => FaultKind::VmFault { addr, write: true },
                        other => other,
                    })?;
                    if let Some(dst) = &dst {
                        self.vgpr[dst.start][lane] = old as u32;
                        if wide {
                            self.vgpr[dst.start + 1][lane] = (old >> 32) as u32;
                        }
                    }
                }
            }
        }
        Ok(Flow::Next)
    }

    /// The global addresses of a FLAT/GLOBAL access and one host pointer covering all of
    /// them, when every active lane goes to global memory and the whole span
    /// `[min address, max address + bytes)` lies in one mapped range (the common case:
    /// one translation instead of one per lane). `None` sends the access down the per-lane
    /// path, which reports faults exactly as before. An error is the one the first active
    /// lane would have reported (a bad address register).
    #[allow(clippy::type_complexity)]
    fn wave_span(
        &self,
        ctx: &ExecContext<'_>,
        i: &Flat,
        saddr: u64,
        exec: u32,
        bytes: u8,
    ) -> Result<Option<([u64; WAVE_SIZE], u64, *mut u8)>, FaultKind> {
        if exec == 0 || i.segment == FlatSegment::Scratch {
            return Ok(None);
        }
        let offset = i.offset as i64 as u64;
        let mut addrs = [0u64; WAVE_SIZE];
        if i.segment == FlatSegment::Global && i.saddr != Operand::Null {
            let low = &self.vgpr[self.vgpr_range(i.addr, 1)?.start];
            for (addr, &v) in addrs.iter_mut().zip(low) {
                *addr = saddr.wrapping_add(u64::from(v)).wrapping_add(offset);
            }
        } else {
            let first = self.vgpr_range(i.addr, 2)?.start;
            let (low, high) = (&self.vgpr[first], &self.vgpr[first + 1]);
            for ((addr, &l), &h) in addrs.iter_mut().zip(low).zip(high) {
                *addr = (u64::from(l) | (u64::from(h) << 32)).wrapping_add(offset);
            }
        }
        let mut lo = u64::MAX;
        let mut hi = 0u64;
        for (lane, &addr) in addrs.iter().enumerate() {
            if exec >> lane & 1 != 0 {
                lo = lo.min(addr);
                hi = hi.max(addr);
            }
        }
        if i.segment == FlatSegment::Flat {
            // Any lane in an aperture (LDS / private) takes the per-lane path.
            let in_aperture = |base: u64| {
                addrs.iter().enumerate().any(|(lane, &addr)| {
                    exec >> lane & 1 != 0 && (base..base + APERTURE_SIZE).contains(&addr)
                })
            };
            if in_aperture(SHARED_APERTURE_BASE) || in_aperture(PRIVATE_APERTURE_BASE) {
                return Ok(None);
            }
        }
        let Some(end) = hi.checked_add(u64::from(bytes)) else {
            return Ok(None);
        };
        Ok(ctx
            .mem
            .translate(lo, end - lo)
            .map(|base| (addrs, lo, base)))
    }

    /// Loads every active lane's `bytes` from a span found by [`Wave::wave_span`].
    #[allow(clippy::too_many_arguments)]
    fn load_span(
        &mut self,
        addrs: &[u64; WAVE_SIZE],
        lo: u64,
        base: *mut u8,
        exec: u32,
        first: usize,
        bytes: u8,
        signed: bool,
        d16: D16,
    ) {
        if bytes.is_multiple_of(4) && bytes <= 16 && lane_contiguous(addrs, lo, exec, bytes) {
            // A coalesced access: one copy of the whole run, then each lane's dwords to their
            // registers.
            let mut run = [0u8; WAVE_SIZE * 16];
            let run = &mut run[..WAVE_SIZE * usize::from(bytes)];
            // SAFETY: `wave_span` translated `[lo, lo + 31 * bytes + bytes)`, which is `run`'s
            // length, to host memory that stays mapped for the dispatch and that everyone else
            // accesses atomically (`Memory`'s contract); `run` is a private buffer.
            unsafe { shared::load(base, run) };
            let stride = usize::from(bytes);
            for k in 0..stride / 4 {
                let row = &mut self.vgpr[first + k];
                for (lane, value) in row.iter_mut().enumerate() {
                    let at = lane * stride + 4 * k;
                    *value = u32::from_le_bytes([run[at], run[at + 1], run[at + 2], run[at + 3]]);
                }
            }
            return;
        }
        for (lane, &addr) in addrs.iter().enumerate() {
            if exec >> lane & 1 == 0 {
                continue;
            }
            // SAFETY: `wave_span` translated `[lo, max addr + bytes)` to host memory that
            // stays mapped for the dispatch and that everyone else accesses atomically
            // (`Memory`'s contract); `lo <= addr` and `addr + bytes <= max addr + bytes`, so
            // the `bytes` bytes at `base + (addr - lo)` are inside it.
            let source = unsafe { base.add((addr - lo) as usize) };
            if bytes == 4 {
                // SAFETY: as above, the lane's 4 readable bytes.
                let word = unsafe { shared::load_4(source) };
                self.vgpr[first][lane] = u32::from_le_bytes(word);
                continue;
            }
            // Wider loads go through `shared::load`, which reads each naturally aligned 8 bytes
            // at once: a 64-bit value another wave stores (`global_store_b64`, a 64-bit atomic)
            // is never seen half old, half new, as on the GPU.
            let mut buffer = [0u8; 16];
            let len = usize::from(bytes).min(buffer.len());
            // SAFETY: as above, `len <= bytes` readable bytes at `source`, copied into a
            // private buffer.
            unsafe { shared::load(source, &mut buffer[..len]) };
            self.write_loaded(first, lane, &buffer, bytes, signed, d16);
        }
    }

    /// Stores every active lane's `bytes` to a span found by [`Wave::wave_span`], in lane
    /// order (a later lane wins on overlap, as in the per-lane path).
    #[allow(clippy::too_many_arguments)]
    fn store_span(
        &self,
        addrs: &[u64; WAVE_SIZE],
        lo: u64,
        base: *mut u8,
        exec: u32,
        first: usize,
        bytes: u8,
        high_half: bool,
    ) {
        let dwords = usize::from(bytes).div_ceil(4);
        if bytes.is_multiple_of(4)
            && bytes <= 16
            && !high_half
            && lane_contiguous(addrs, lo, exec, bytes)
        {
            // A coalesced access: the lanes' dwords gathered in lane order, one copy out.
            let mut run = [0u8; WAVE_SIZE * 16];
            let stride = usize::from(bytes);
            for k in 0..dwords {
                for (lane, value) in self.vgpr[first + k].iter().enumerate() {
                    let at = lane * stride + 4 * k;
                    run[at..at + 4].copy_from_slice(&value.to_le_bytes());
                }
            }
            // SAFETY: as in `load_span`'s coalesced case, for writable bytes.
            unsafe { shared::store(base, &run[..WAVE_SIZE * stride]) };
            return;
        }
        for (lane, &addr) in addrs.iter().enumerate() {
            if exec >> lane & 1 == 0 {
                continue;
            }
            // SAFETY: as in `load_span`: `bytes` writable mapped bytes at
            // `base + (addr - lo)`, inside the span `wave_span` translated.
            let target = unsafe { base.add((addr - lo) as usize) };
            if bytes == 4 && !high_half {
                let word = self.vgpr[first][lane].to_le_bytes();
                // SAFETY: as above, the lane's 4 writable bytes.
                unsafe { shared::store_4(target, word) };
                continue;
            }
            // Wider stores write each naturally aligned 8 bytes at once (`shared::store`), as
            // the loads above read them.
            let mut buffer = [0u8; 16];
            for k in 0..dwords.min(4) {
                buffer[k * 4..k * 4 + 4].copy_from_slice(&self.vgpr[first + k][lane].to_le_bytes());
            }
            if high_half {
                buffer.copy_within(2..4, 0);
            }
            let len = usize::from(bytes).min(buffer.len());
            // SAFETY: as above, `len <= bytes` writable bytes at `target`.
            unsafe { shared::store(target, &buffer[..len]) };
        }
    }

    /// Places loaded bytes into the destination VGPR(s) of one lane.
    pub(super) fn write_loaded(
        &mut self,
        first: usize,
        lane: usize,
        buffer: &[u8; 16],
        bytes: u8,
        signed: bool,
        d16: D16,
    ) {
        let small = match (bytes, signed) {
            (1, false) => Some(u32::from(buffer[0])),
            (1, true) => Some(buffer[0] as i8 as i32 as u32),
            (2, false) => Some(u32::from(u16::from_le_bytes([buffer[0], buffer[1]]))),
            (2, true) => Some(i16::from_le_bytes([buffer[0], buffer[1]]) as i32 as u32),
            _ => None,
        };
        if let Some(value) = small {
            let old = self.vgpr[first][lane];
            self.vgpr[first][lane] = match d16 {
                D16::Full => value,
                D16::Low => (old & 0xffff_0000) | (value & 0xffff),
                D16::High => (old & 0xffff) | (value << 16),
            };
            return;
        }
        for k in 0..usize::from(bytes) / 4 {
            let mut word = [0u8; 4];
            word.copy_from_slice(&buffer[k * 4..k * 4 + 4]);
            self.vgpr[first + k][lane] = u32::from_le_bytes(word);
        }
    }

    pub(super) fn ds(&mut self, ctx: &mut ExecContext<'_>, i: &Ds) -> Result<Flow, FaultKind> {
        use DsOp::*;
        if i.gds {
            return Err(FaultKind::Unsupported("GDS access".to_string()));
        }
        let exec = self.exec();
        let offset = u64::from(i.offset16());
        // Permutes move data between lanes without touching LDS.
        if matches!(i.op, DS_PERMUTE_B32 | DS_BPERMUTE_B32) {
            let addr = self.vgpr_range(i.addr, 1)?.start;
            let data = self.vgpr_range(i.data0, 1)?.start;
            let dst = self.vgpr_range(i.vdst, 1)?.start;
            let mut result = [0u32; WAVE_SIZE];
            let forward = i.op == DS_PERMUTE_B32;
            for lane in 0..WAVE_SIZE {
                let other = (self.vgpr[addr][lane].wrapping_add(offset as u32) / 4 % 32) as usize;
                if forward {
                    if exec >> lane & 1 != 0 {
                        result[other] = self.vgpr[data][lane];
                    }
                } else if exec >> other & 1 != 0 {
                    result[lane] = self.vgpr[data][other];
                }
            }
            for (lane, value) in result.iter().enumerate() {
                if exec >> lane & 1 != 0 {
                    self.vgpr[dst][lane] = *value;
                }
            }
            return Ok(Flow::Next);
        }
        if i.op == DS_NOP {
            return Ok(Flow::Next);
        }
        if matches!(i.op, DS_LOAD_ADDTID_B32 | DS_STORE_ADDTID_B32) {
            return self.ds_addtid(ctx, i);
        }
        if i.op == DS_CONDXCHG32_RTN_B64 {
            return self.ds_condxchg32(ctx, i);
        }
        if i.op == DS_SWIZZLE_B32 {
            return self.ds_swizzle(i);
        }
        if matches!(i.op, DS_APPEND | DS_CONSUME) {
            // One counter in LDS at M0[15:0] + offset, changed by the number of active lanes;
            // every active lane receives the old value.
            let m0 = self.read_scalar(Operand::M0)?;
            let addr = u64::from(m0 & 0xffff).wrapping_add(offset);
            let count = exec.count_ones();
            let append = i.op == DS_APPEND;
            let old = rmw_target(ctx, Target::Lds(addr), false, |old| {
                let old = old as u32;
                u64::from(if append {
                    old.wrapping_add(count)
                } else {
                    old.wrapping_sub(count)
                })
            })?;
            let dst = self.vgpr_range(i.vdst, 1)?.start;
            for lane in 0..WAVE_SIZE {
                if exec >> lane & 1 != 0 {
                    self.vgpr[dst][lane] = old as u32;
                }
            }
            return Ok(Flow::Next);
        }
        let addr_reg = self.vgpr_range(i.addr, 1)?.start;
        let lane_addr = |w: &Wave, lane: usize| u64::from(w.vgpr[addr_reg][lane]);
        // Loads and stores.
        let load = match i.op {
            DS_LOAD_B32 => Some((4, false, D16::Full)),
            DS_LOAD_B64 => Some((8, false, D16::Full)),
            DS_LOAD_B96 => Some((12, false, D16::Full)),
            DS_LOAD_B128 => Some((16, false, D16::Full)),
            DS_LOAD_U8 => Some((1, false, D16::Full)),
            DS_LOAD_I8 => Some((1, true, D16::Full)),
            DS_LOAD_U16 => Some((2, false, D16::Full)),
            DS_LOAD_I16 => Some((2, true, D16::Full)),
            DS_LOAD_U8_D16 => Some((1, false, D16::Low)),
            DS_LOAD_I8_D16 => Some((1, true, D16::Low)),
            DS_LOAD_U16_D16 => Some((2, false, D16::Low)),
            DS_LOAD_U8_D16_HI => Some((1, false, D16::High)),
            DS_LOAD_I8_D16_HI => Some((1, true, D16::High)),
            DS_LOAD_U16_D16_HI => Some((2, false, D16::High)),
            _ => None,
        };
        if let Some((bytes, signed, d16)) = load {
            let dst = self
                .vgpr_range(i.vdst, usize::from(bytes).div_ceil(4))?
                .start;
            if bytes == 4 {
                for lane in 0..WAVE_SIZE {
                    if exec >> lane & 1 != 0 {
                        let addr = lane_addr(self, lane).wrapping_add(offset);
                        self.vgpr[dst][lane] = lds_read_u32(ctx.lds, addr)?;
                    }
                }
                return Ok(Flow::Next);
            }
            for lane in 0..WAVE_SIZE {
                if exec >> lane & 1 != 0 {
                    let target = Target::Lds(lane_addr(self, lane).wrapping_add(offset));
                    let mut buffer = [0u8; 16];
                    read_target(ctx, target, &mut buffer[..usize::from(bytes)])?;
                    self.write_loaded(dst, lane, &buffer, bytes, signed, d16);
                }
            }
            return Ok(Flow::Next);
        }
        let store = match i.op {
            DS_STORE_B8 => Some((1, false)),
            DS_STORE_B16 => Some((2, false)),
            DS_STORE_B32 => Some((4, false)),
            DS_STORE_B64 => Some((8, false)),
            DS_STORE_B96 => Some((12, false)),
            DS_STORE_B128 => Some((16, false)),
            DS_STORE_B8_D16_HI => Some((1, true)),
            DS_STORE_B16_D16_HI => Some((2, true)),
            _ => None,
        };
        if let Some((bytes, high_half)) = store {
            let dwords = (bytes as usize).div_ceil(4);
            let data = self.vgpr_range(i.data0, dwords)?.start;
            if bytes == 4 && !high_half {
                for lane in 0..WAVE_SIZE {
                    if exec >> lane & 1 != 0 {
                        let addr = lane_addr(self, lane).wrapping_add(offset);
                        lds_write_u32(ctx.lds, addr, self.vgpr[data][lane])?;
                    }
                }
                return Ok(Flow::Next);
            }
            for lane in 0..WAVE_SIZE {
                if exec >> lane & 1 != 0 {
                    let mut buffer = [0u8; 16];
                    for k in 0..dwords {
                        buffer[k * 4..k * 4 + 4]
                            .copy_from_slice(&self.vgpr[data + k][lane].to_le_bytes());
                    }
                    if high_half {
                        buffer.copy_within(2..4, 0);
                    }
                    let target = Target::Lds(lane_addr(self, lane).wrapping_add(offset));
                    write_target(ctx, target, &buffer[..bytes as usize])?;
                }
            }
            return Ok(Flow::Next);
        }
        // Two-address forms.
        let two_addr = match i.op {
            DS_LOAD_2ADDR_B32 => Some((4u64, 1u64, true)),
            DS_LOAD_2ADDR_STRIDE64_B32 => Some((4, 64, true)),
            DS_LOAD_2ADDR_B64 => Some((8, 1, true)),
            DS_LOAD_2ADDR_STRIDE64_B64 => Some((8, 64, true)),
            DS_STORE_2ADDR_B32 => Some((4, 1, false)),
            DS_STORE_2ADDR_STRIDE64_B32 => Some((4, 64, false)),
            DS_STORE_2ADDR_B64 => Some((8, 1, false)),
            DS_STORE_2ADDR_STRIDE64_B64 => Some((8, 64, false)),
            _ => None,
        };
        if let Some((size, stride, is_load)) = two_addr {
            let dwords = (size / 4) as usize;
            let offsets = [
                u64::from(i.offset0) * size * stride,
                u64::from(i.offset1) * size * stride,
            ];
            let dst = if is_load {
                self.vgpr_range(i.vdst, dwords * 2)?.start
            } else {
                0
            };
            let sources = if is_load {
                [0, 0]
            } else {
                [
                    self.vgpr_range(i.data0, dwords)?.start,
                    self.vgpr_range(i.data1, dwords)?.start,
                ]
            };
            // Every lane's address is read before any result is written (the destination
            // may overlap the address VGPR).
            let base: [u64; WAVE_SIZE] = std::array::from_fn(|lane| lane_addr(self, lane));
            for (lane, &lane_base) in base.iter().enumerate() {
                if exec >> lane & 1 == 0 {
                    continue;
                }
                for (half, element_offset) in offsets.iter().enumerate() {
                    let addr = lane_base.wrapping_add(*element_offset);
                    if size == 4 {
                        if is_load {
                            self.vgpr[dst + half][lane] = lds_read_u32(ctx.lds, addr)?;
                        } else {
                            lds_write_u32(ctx.lds, addr, self.vgpr[sources[half]][lane])?;
                        }
                        continue;
                    }
                    let target = Target::Lds(addr);
                    let mut buffer = [0u8; 8];
                    if is_load {
                        read_target(ctx, target, &mut buffer[..size as usize])?;
                        for k in 0..dwords {
                            let mut word = [0u8; 4];
                            word.copy_from_slice(&buffer[k * 4..k * 4 + 4]);
                            self.vgpr[dst + half * dwords + k][lane] = u32::from_le_bytes(word);
                        }
                    } else {
                        for k in 0..dwords {
                            buffer[k * 4..k * 4 + 4]
                                .copy_from_slice(&self.vgpr[sources[half] + k][lane].to_le_bytes());
                        }
                        write_target(ctx, target, &buffer[..size as usize])?;
                    }
                }
            }
            return Ok(Flow::Next);
        }
        // Atomics: classify by mnemonic (ds_<op>[_rtn]_<type>).
        let mnemonic = i.op.mnemonic();
        let returns = mnemonic.contains("_rtn_");
        let (op, wide) = ds_atomic(i.op).ok_or_else(|| unimplemented(mnemonic))?;
        let dwords = if wide { 2 } else { 1 };
        let data0 = self.vgpr_range(i.data0, dwords)?.start;
        let needs_data1 = matches!(
            op,
            AtomicOp::CmpSwap | AtomicOp::CmpSwapF | AtomicOp::MaskOr | AtomicOp::Wrap
        );
        let data1 = if needs_data1 {
            self.vgpr_range(i.data1, dwords)?.start
        } else {
            data0
        };
        let dst = if returns {
            Some(self.vgpr_range(i.vdst, dwords)?.start)
        } else {
            None
        };
        for lane in 0..WAVE_SIZE {
            if exec >> lane & 1 == 0 {
                continue;
            }
            let read = |w: &Wave, r: usize| {
                if wide {
                    u64::from(w.vgpr[r][lane]) | (u64::from(w.vgpr[r + 1][lane]) << 32)
                } else {
                    u64::from(w.vgpr[r][lane])
                }
            };
            let (value, compare) = (read(self, data0), read(self, data1));
            // DS compare-store: DATA is the new value, DATA2 the comparand.
            let target = Target::Lds(lane_addr(self, lane).wrapping_add(offset));
            let rsub = matches!(
                i.op,
                DS_RSUB_U32 | DS_RSUB_RTN_U32 | DS_RSUB_U64 | DS_RSUB_RTN_U64
            );
            let old = rmw_target(ctx, target, wide, |old| {
                if rsub {
                    let mask = if wide { u64::MAX } else { 0xffff_ffff };
                    value.wrapping_sub(old) & mask
                } else {
                    atomic_update(op, wide, old, value, compare)
                }
            })?;
            if let Some(dst) = dst {
                self.vgpr[dst][lane] = old as u32;
                if wide {
                    self.vgpr[dst + 1][lane] = (old >> 32) as u32;
                }
            }
        }
        Ok(Flow::Next)
    }
}

impl Wave {
    /// DS_LOAD_ADDTID_B32 / DS_STORE_ADDTID_B32: lane `i` accesses the dword at
    /// `offset + M0[15:0] + 4 i` (no address VGPR).
    fn ds_addtid(&mut self, ctx: &mut ExecContext<'_>, i: &Ds) -> Result<Flow, FaultKind> {
        let exec = self.exec();
        let base = u64::from(self.read_scalar(Operand::M0)? & 0xffff) + u64::from(i.offset16());
        let load = i.op == DsOp::DS_LOAD_ADDTID_B32;
        let register = if load {
            self.vgpr_range(i.vdst, 1)?.start
        } else {
            self.vgpr_range(i.data0, 1)?.start
        };
        for lane in 0..WAVE_SIZE {
            if exec >> lane & 1 == 0 {
                continue;
            }
            let addr = base + 4 * lane as u64;
            if load {
                self.vgpr[register][lane] = lds_read_u32(ctx.lds, addr)?;
            } else {
                lds_write_u32(ctx.lds, addr, self.vgpr[register][lane])?;
            }
        }
        Ok(Flow::Next)
    }

    /// DS_CONDXCHG32_RTN_B64: two dwords at the 8-byte aligned address; each is replaced by
    /// its half of DATA (bit 31 cleared) when that half's bit 31 is set. Returns both old
    /// dwords.
    fn ds_condxchg32(&mut self, ctx: &mut ExecContext<'_>, i: &Ds) -> Result<Flow, FaultKind> {
        let exec = self.exec();
        let addr_reg = self.vgpr_range(i.addr, 1)?.start;
        let data = self.vgpr_range(i.data0, 2)?.start;
        let dst = self.vgpr_range(i.vdst, 2)?.start;
        for lane in 0..WAVE_SIZE {
            if exec >> lane & 1 == 0 {
                continue;
            }
            let first = u64::from(self.vgpr[addr_reg][lane].wrapping_add(i.offset16()) & 0xfff8);
            let mut old = [0u32; 2];
            for (half, value) in old.iter_mut().enumerate() {
                let addr = first + 4 * half as u64;
                *value = lds_read_u32(ctx.lds, addr)?;
                let new = self.vgpr[data + half][lane];
                if new >> 31 != 0 {
                    lds_write_u32(ctx.lds, addr, new & 0x7fff_ffff)?;
                }
            }
            self.vgpr[dst][lane] = old[0];
            self.vgpr[dst + 1][lane] = old[1];
        }
        Ok(Flow::Next)
    }

    /// DS_SWIZZLE_B32: a lane permutation selected by the 16-bit offset (no LDS access).
    /// Inactive source lanes read 0.
    fn ds_swizzle(&mut self, i: &Ds) -> Result<Flow, FaultKind> {
        let exec = self.exec();
        let offset = u32::from(i.offset0) | (u32::from(i.offset1) << 8);
        // The swizzled value comes from the ADDR field's VGPR.
        let data = self.vgpr_range(i.addr, 1)?.start;
        let dst = self.vgpr_range(i.vdst, 1)?.start;
        let input = self.vgpr[data];
        let mut out = [0u32; WAVE_SIZE];
        for (lane, value) in out.iter_mut().enumerate() {
            let source = if offset >= 0xe000 {
                // FFT mode.
                let mask = offset & 0x1f;
                let mut j = ((lane as u32 & 0x1f).reverse_bits() >> 27) >> mask.count_ones();
                j |= lane as u32 & mask;
                j as usize
            } else if offset >= 0xc000 {
                // Rotate mode: rotate within groups of 32 lanes (ignoring the unused mask).
                let amount = ((offset >> 5) & 0x1f) as usize;
                if offset & 0x400 != 0 {
                    (lane + WAVE_SIZE - amount) % WAVE_SIZE
                } else {
                    (lane + amount) % WAVE_SIZE
                }
            } else if offset & 0x8000 != 0 {
                // Quad permute: lane (i & ~3) + offset[2 (i & 3) + 1 : 2 (i & 3)].
                (lane & !3) | ((offset >> (2 * (lane & 3))) & 3) as usize
            } else {
                // Bitmask mode within groups of 32 lanes: and, or, xor masks.
                let and_mask = offset & 0x1f;
                let or_mask = (offset >> 5) & 0x1f;
                let xor_mask = (offset >> 10) & 0x1f;
                (((lane as u32 & and_mask) | or_mask) ^ xor_mask) as usize
            };
            let source = source % WAVE_SIZE;
            if exec >> source & 1 != 0 {
                *value = input[source];
            }
        }
        for (lane, value) in out.iter().enumerate() {
            if exec >> lane & 1 != 0 {
                self.vgpr[dst][lane] = *value;
            }
        }
        Ok(Flow::Next)
    }
}

/// The atomic operation of a DS opcode.
fn ds_atomic(op: DsOp) -> Option<(AtomicOp, bool)> {
    use DsOp::*;
    let entry = match op {
        DS_ADD_U32 | DS_ADD_RTN_U32 => (AtomicOp::Add, false),
        DS_SUB_U32 | DS_SUB_RTN_U32 => (AtomicOp::Sub, false),
        DS_RSUB_U32 | DS_RSUB_RTN_U32 => (AtomicOp::Sub, false),
        DS_INC_U32 | DS_INC_RTN_U32 => (AtomicOp::Inc, false),
        DS_DEC_U32 | DS_DEC_RTN_U32 => (AtomicOp::Dec, false),
        DS_MIN_I32 | DS_MIN_RTN_I32 => (AtomicOp::Smin, false),
        DS_MAX_I32 | DS_MAX_RTN_I32 => (AtomicOp::Smax, false),
        DS_MIN_U32 | DS_MIN_RTN_U32 => (AtomicOp::Umin, false),
        DS_MAX_U32 | DS_MAX_RTN_U32 => (AtomicOp::Umax, false),
        DS_AND_B32 | DS_AND_RTN_B32 => (AtomicOp::And, false),
        DS_OR_B32 | DS_OR_RTN_B32 => (AtomicOp::Or, false),
        DS_XOR_B32 | DS_XOR_RTN_B32 => (AtomicOp::Xor, false),
        DS_STOREXCHG_RTN_B32 => (AtomicOp::Swap, false),
        DS_CMPSTORE_B32 | DS_CMPSTORE_RTN_B32 => (AtomicOp::CmpSwap, false),
        DS_CMPSTORE_F32 | DS_CMPSTORE_RTN_F32 => (AtomicOp::CmpSwapF, false),
        DS_ADD_F32 | DS_ADD_RTN_F32 => (AtomicOp::AddF, false),
        DS_MIN_F32 | DS_MIN_RTN_F32 => (AtomicOp::MinF, false),
        DS_MAX_F32 | DS_MAX_RTN_F32 => (AtomicOp::MaxF, false),
        DS_ADD_U64 | DS_ADD_RTN_U64 => (AtomicOp::Add, true),
        DS_SUB_U64 | DS_SUB_RTN_U64 => (AtomicOp::Sub, true),
        DS_RSUB_U64 | DS_RSUB_RTN_U64 => (AtomicOp::Sub, true),
        DS_INC_U64 | DS_INC_RTN_U64 => (AtomicOp::Inc, true),
        DS_DEC_U64 | DS_DEC_RTN_U64 => (AtomicOp::Dec, true),
        DS_MIN_I64 | DS_MIN_RTN_I64 => (AtomicOp::Smin, true),
        DS_MAX_I64 | DS_MAX_RTN_I64 => (AtomicOp::Smax, true),
        DS_MIN_U64 | DS_MIN_RTN_U64 => (AtomicOp::Umin, true),
        DS_MAX_U64 | DS_MAX_RTN_U64 => (AtomicOp::Umax, true),
        DS_AND_B64 | DS_AND_RTN_B64 => (AtomicOp::And, true),
        DS_OR_B64 | DS_OR_RTN_B64 => (AtomicOp::Or, true),
        DS_XOR_B64 | DS_XOR_RTN_B64 => (AtomicOp::Xor, true),
        DS_STOREXCHG_RTN_B64 => (AtomicOp::Swap, true),
        DS_CMPSTORE_B64 | DS_CMPSTORE_RTN_B64 => (AtomicOp::CmpSwap, true),
        DS_CMPSTORE_F64 | DS_CMPSTORE_RTN_F64 => (AtomicOp::CmpSwapF, true),
        DS_MSKOR_B32 | DS_MSKOR_RTN_B32 => (AtomicOp::MaskOr, false),
        DS_MSKOR_B64 | DS_MSKOR_RTN_B64 => (AtomicOp::MaskOr, true),
        DS_WRAP_RTN_B32 => (AtomicOp::Wrap, false),
        DS_MIN_F64 | DS_MIN_RTN_F64 => (AtomicOp::MinF, true),
        DS_MAX_F64 | DS_MAX_RTN_F64 => (AtomicOp::MaxF, true),
        _ => return None,
    };
    Some(entry)
}

/// Whether every lane is active and lane `n` accesses `lo + n * bytes`: the wave reads or
/// writes one run of `32 * bytes` bytes in lane order (a coalesced access).
fn lane_contiguous(addrs: &[u64; WAVE_SIZE], lo: u64, exec: u32, bytes: u8) -> bool {
    exec == u32::MAX
        && addrs
            .iter()
            .zip((0u64..).step_by(usize::from(bytes)))
            .all(|(&addr, offset)| addr == lo.wrapping_add(offset))
}
