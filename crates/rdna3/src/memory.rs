//! The GPU's view of memory: host memory at the same virtual addresses, checked against the
//! mapped ranges through [`Memory::translate`].
//!
//! GPU memory is shared: other workgroups of the dispatch (on other host threads), other
//! engines and the host access it concurrently, so every access here is atomic: plain data
//! through [`hcq_amd_sys::shared`] (relaxed, whole aligned pieces), atomics through
//! compare-exchange loops (sequentially consistent).

use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};

use hcq_amd_sys::shared;

use crate::fault::FaultKind;

/// Address translation of the GPU virtual address space.
///
/// # Safety
/// The interpreter reads and writes through the pointers `translate` returns, from several
/// threads, without further checks. An implementor guarantees, for every `Some(ptr)` returned
/// for `(addr, len)`:
/// - the `len` bytes at `ptr` are host memory valid for reads and writes;
/// - they stay so until the dispatch that asked ([`crate::run_dispatch`]) returns, even if the
///   range is unmapped or freed meanwhile;
/// - no Rust reference covers them while the dispatch runs: everything else that touches them
///   (the host, other engines) does so with atomic accesses, as this crate does.
pub unsafe trait Memory: Sync {
    /// Host pointer to `len` bytes at GPU virtual address `addr` if the whole range is mapped
    /// for the GPU (read and write), else `None` (→ VM fault).
    fn translate(&self, addr: u64, len: u64) -> Option<*mut u8>;

    /// The whole mapping containing `addr`, as `(GPU start, length, host pointer of its
    /// start)`, with `translate`'s guarantees for every byte of it; `None` if `addr` is
    /// unmapped or the implementor does not say (the default). Lets a caller translate once
    /// for many accesses to one buffer.
    fn region(&self, addr: u64) -> Option<(u64, u64, *mut u8)> {
        let _ = addr;
        None
    }
}

fn translate(mem: &dyn Memory, addr: u64, len: u64, write: bool) -> Result<*mut u8, FaultKind> {
    if addr.checked_add(len).is_none() {
        return Err(FaultKind::VmFault { addr, write });
    }
    mem.translate(addr, len)
        .ok_or(FaultKind::VmFault { addr, write })
}

/// Reads `out.len()` bytes at `addr`.
pub fn read_bytes(mem: &dyn Memory, addr: u64, out: &mut [u8]) -> Result<(), FaultKind> {
    let ptr = translate(mem, addr, out.len() as u64, false)?;
    // SAFETY: `Memory`'s contract: `out.len()` readable bytes at `ptr`, mapped for the
    // dispatch and accessed by everyone else atomically; `out` is a distinct private buffer.
    unsafe { shared::load(ptr, out) };
    Ok(())
}

/// Writes `data` at `addr`.
pub fn write_bytes(mem: &dyn Memory, addr: u64, data: &[u8]) -> Result<(), FaultKind> {
    let ptr = translate(mem, addr, data.len() as u64, true)?;
    // SAFETY: as in `read_bytes`, for `data.len()` writable bytes.
    unsafe { shared::store(ptr, data) };
    Ok(())
}

/// Atomically replaces the 32-bit value at `addr` by `update(old)`; returns the old value.
/// Misaligned atomics are a VM fault (the hardware requires natural alignment).
pub fn atomic_rmw_u32(
    mem: &dyn Memory,
    addr: u64,
    update: impl Fn(u32) -> u32,
) -> Result<u32, FaultKind> {
    if !addr.is_multiple_of(4) {
        return Err(FaultKind::VmFault { addr, write: true });
    }
    let ptr = translate(mem, addr, 4, true)?;
    if !(ptr as usize).is_multiple_of(4) {
        return Err(FaultKind::VmFault { addr, write: true });
    }
    // SAFETY: `ptr` is 4-byte aligned and points to 4 mapped bytes (checked above) that stay
    // mapped for the dispatch, which everyone else accesses atomically (`Memory`'s contract).
    let atomic = unsafe { AtomicU32::from_ptr(ptr.cast::<u32>()) };
    let mut old = atomic.load(Ordering::Relaxed);
    loop {
        match atomic.compare_exchange_weak(old, update(old), Ordering::SeqCst, Ordering::Relaxed) {
            Ok(previous) => return Ok(previous),
            Err(current) => old = current,
        }
    }
}

/// Atomically replaces the 64-bit value at `addr` by `update(old)`; returns the old value.
pub fn atomic_rmw_u64(
    mem: &dyn Memory,
    addr: u64,
    update: impl Fn(u64) -> u64,
) -> Result<u64, FaultKind> {
    if !addr.is_multiple_of(8) {
        return Err(FaultKind::VmFault { addr, write: true });
    }
    let ptr = translate(mem, addr, 8, true)?;
    if !(ptr as usize).is_multiple_of(8) {
        return Err(FaultKind::VmFault { addr, write: true });
    }
    // SAFETY: as in `atomic_rmw_u32`, with 8-byte alignment checked.
    let atomic = unsafe { AtomicU64::from_ptr(ptr.cast::<u64>()) };
    let mut old = atomic.load(Ordering::Relaxed);
    loop {
        match atomic.compare_exchange_weak(old, update(old), Ordering::SeqCst, Ordering::Relaxed) {
            Ok(previous) => return Ok(previous),
            Err(current) => old = current,
        }
    }
}
