//! The GPU's view of memory: host memory at the same virtual addresses, checked against the
//! mapped ranges through [`Memory::translate`].

use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};

use crate::fault::FaultKind;

/// Address translation of the GPU virtual address space.
pub trait Memory: Sync {
    /// Host pointer to `len` bytes at GPU virtual address `addr` if the whole range is mapped
    /// for the GPU (read and write), else `None` (→ VM fault).
    fn translate(&self, addr: u64, len: u64) -> Option<*mut u8>;
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
    // SAFETY: `translate` guarantees `out.len()` bytes at `ptr` are mapped host memory; the
    // ranges cannot overlap because `out` is a Rust-owned buffer distinct from GPU memory.
    // Other workgroups may write the same GPU memory concurrently (as on hardware); byte
    // copies of plain data have no invalid values.
    unsafe { std::ptr::copy_nonoverlapping(ptr, out.as_mut_ptr(), out.len()) };
    Ok(())
}

/// Writes `data` at `addr`.
pub fn write_bytes(mem: &dyn Memory, addr: u64, data: &[u8]) -> Result<(), FaultKind> {
    let ptr = translate(mem, addr, data.len() as u64, true)?;
    // SAFETY: `translate` guarantees `data.len()` writable mapped bytes at `ptr`, distinct
    // from the Rust-owned `data` buffer.
    unsafe { std::ptr::copy_nonoverlapping(data.as_ptr(), ptr, data.len()) };
    Ok(())
}

/// Atomically replaces the 32-bit value at `addr` by `update(old)`; returns the old value.
/// Misaligned atomics are a VM fault (the hardware requires natural alignment).
pub fn atomic_rmw_u32(
    mem: &dyn Memory,
    addr: u64,
    update: impl Fn(u32) -> u32,
) -> Result<u32, FaultKind> {
    if addr % 4 != 0 {
        return Err(FaultKind::VmFault { addr, write: true });
    }
    let ptr = translate(mem, addr, 4, true)?;
    if (ptr as usize) % 4 != 0 {
        return Err(FaultKind::VmFault { addr, write: true });
    }
    // SAFETY: `ptr` is 4-byte aligned and points to 4 mapped bytes (checked above) that stay
    // mapped for the dispatch; all concurrent accesses through this crate to atomics use
    // atomic operations.
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
    if addr % 8 != 0 {
        return Err(FaultKind::VmFault { addr, write: true });
    }
    let ptr = translate(mem, addr, 8, true)?;
    if (ptr as usize) % 8 != 0 {
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
