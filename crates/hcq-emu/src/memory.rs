//! Buffer objects (BOs), the host address ranges that back them, and each GPU's page table.
//!
//! GPU memory is host memory at the virtual address the driver chose. A VRAM or GTT BO is
//! backed at allocation time by a shared anonymous mapping placed over the driver's
//! `PROT_NONE` reservation; a USERPTR BO is the user's own memory. Every access the emulated
//! GPU makes goes through [`Snapshot::translate`], which only succeeds inside one BO mapped on
//! that GPU.
//!
//! Lifetime: the host memory of a BO ([`Storage`]) is reference counted. The BO holds one
//! reference until `FREE_MEMORY_OF_GPU`; every page-table [`Snapshot`] holds one for each BO it
//! maps, and the command processor keeps a snapshot for the duration of each packet (a whole
//! dispatch). So memory the GPU may be using stays mapped even if the driver frees or unmaps it
//! meanwhile; it is released (and its address range handed back) once the last user is done.
//! The driver's `munmap` of a range still held this way is deferred until then.

use std::collections::{BTreeMap, HashMap};
use std::io;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use hcq_amd_sys::shared;

use crate::util::{errno, lock};
use crate::{host_memory, hostmaps};

/// Host and GPU page size.
pub(crate) const PAGE: u64 = 4096;

/// Rounds `n` up to a whole number of pages (`None` on overflow).
pub(crate) fn page_round(n: u64) -> Option<u64> {
    n.checked_add(PAGE - 1).map(|v| v & !(PAGE - 1))
}

/// Maps the `len` bytes of the shared mapping at `src` a second time, at `at` (replacing what
/// was there, as `MAP_FIXED` does) or where the kernel chooses, and returns where: both
/// mappings are the same pages.
///
/// `mremap` with an old size of 0 duplicates a `MAP_SHARED` mapping. The alternative, a memfd
/// per buffer that every mapping maps, would hold a descriptor for every BO of the process
/// (programs allocate thousands; the usual limit is 1024) and could not alias a BO already
/// backed by an anonymous mapping; duplication needs neither.
///
/// # Safety
/// `[src, src + len)` must be (part of) a live `MAP_SHARED` mapping of at least `len` bytes
/// from `src`, and with `at` the caller must own the replaced range.
pub(crate) unsafe fn alias_shared(src: u64, len: u64, at: Option<u64>) -> io::Result<u64> {
    let flags = match at {
        Some(_) => libc::MREMAP_MAYMOVE | libc::MREMAP_FIXED,
        None => libc::MREMAP_MAYMOVE,
    };
    // SAFETY: the caller's guarantees: the source is shared (so the old mapping stays and a
    // new one is made) and the target range is the caller's to replace.
    let p = unsafe {
        libc::mremap(
            src as *mut libc::c_void,
            0,
            len as usize,
            flags,
            at.unwrap_or(0) as usize as *mut libc::c_void,
        )
    };
    if p == libc::MAP_FAILED {
        return Err(io::Error::last_os_error());
    }
    Ok(p as usize as u64)
}

/// Host address ranges held for BOs, and which parts of them the driver has `munmap`ed.
#[derive(Debug, Default)]
pub(crate) struct AddressSpace {
    held: Mutex<BTreeMap<u64, Held>>,
    /// Bytes of host memory backing VRAM and GTT BOs (changed under `held`'s lock).
    backed: AtomicU64,
}

#[derive(Debug)]
struct Held {
    end: u64,
    /// Whether the emulator mapped this range itself (VRAM/GTT) rather than the user (USERPTR).
    owned: bool,
    /// Sub-ranges the driver has unmapped while the storage was still in use.
    released: Vec<(u64, u64)>,
}

/// Removes `[a, b)` from a list of disjoint ranges.
fn subtract(list: &mut Vec<(u64, u64)>, a: u64, b: u64) {
    let mut out = Vec::with_capacity(list.len() + 1);
    for &(s, e) in list.iter() {
        if e <= a || b <= s {
            out.push((s, e));
            continue;
        }
        if s < a {
            out.push((s, a));
        }
        if b < e {
            out.push((b, e));
        }
    }
    *list = out;
}

fn overlaps_held(held: &BTreeMap<u64, Held>, start: u64, end: u64) -> bool {
    held.range(..end)
        .next_back()
        .is_some_and(|(_, h)| h.end > start)
}

impl AddressSpace {
    /// Backs `[va, va + len)` with fresh zeroed shared memory in place of the driver's
    /// reservation (the range must hold nothing but `PROT_NONE` mappings or nothing at all).
    /// With `populate`, every page is allocated now rather than at its first touch: GTT, which
    /// the kernel driver pins in system memory when it allocates it, so that the host's first
    /// write into a ring or a signal page does not take a page fault a real GPU's does not.
    pub fn back(self: &Arc<Self>, va: u64, len: u64, populate: bool) -> io::Result<Arc<Storage>> {
        let end = va.checked_add(len).ok_or_else(|| errno(libc::EINVAL))?;
        let mut held = lock(&self.held);
        if overlaps_held(&held, va, end) || !hostmaps::is_reservation(va, end)? {
            return Err(errno(libc::EINVAL));
        }
        // Mapping never fails for lack of memory (no swap is reserved); touching the pages
        // would summon the OOM killer instead. So refuse here what the host cannot give.
        let backed = self.backed.load(Ordering::Relaxed);
        host_memory::admit(&host_memory::current_limits(), backed, len)
            .map_err(|shortage| io::Error::new(io::ErrorKind::OutOfMemory, shortage.to_string()))?;
        // SAFETY: `[va, end)` holds only inaccessible reservations or nothing (checked just
        // above, under the lock that serialises this crate's changes to these ranges), so
        // replacing it cannot invalidate memory anything else uses.
        let p = unsafe {
            libc::mmap(
                va as *mut libc::c_void,
                len as usize,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_FIXED
                    | libc::MAP_SHARED
                    | libc::MAP_ANONYMOUS
                    | libc::MAP_NORESERVE
                    | if populate { libc::MAP_POPULATE } else { 0 },
                -1,
                0,
            )
        };
        if p == libc::MAP_FAILED {
            return Err(errno(libc::ENOMEM));
        }
        self.backed.fetch_add(len, Ordering::Relaxed);
        held.insert(
            va,
            Held {
                end,
                owned: true,
                released: Vec::new(),
            },
        );
        Ok(Arc::new(Storage {
            base: va,
            len,
            space: Arc::clone(self),
        }))
    }

    /// How many more bytes the host can back now ([`host_memory::available`]).
    pub fn host_available(&self) -> u64 {
        let backed = self.backed.load(Ordering::Relaxed);
        host_memory::available(&host_memory::current_limits(), backed)
    }

    /// Takes the user's memory `[va, va + len)` (which must be readable and writable) as a BO.
    pub fn hold_user(self: &Arc<Self>, va: u64, len: u64) -> io::Result<Arc<Storage>> {
        let end = va.checked_add(len).ok_or_else(|| errno(libc::EINVAL))?;
        let mut held = lock(&self.held);
        if overlaps_held(&held, va, end) {
            return Err(errno(libc::EINVAL));
        }
        if !hostmaps::is_read_write(va, end)? {
            return Err(errno(libc::EFAULT));
        }
        held.insert(
            va,
            Held {
                end,
                owned: false,
                released: Vec::new(),
            },
        );
        Ok(Arc::new(Storage {
            base: va,
            len,
            space: Arc::clone(self),
        }))
    }

    /// Whether any byte of `[start, end)` is held for a BO.
    pub fn overlaps(&self, start: u64, end: u64) -> bool {
        overlaps_held(&lock(&self.held), start, end)
    }

    /// The driver's `munmap`: parts held for BOs are recorded and unmapped when their storage
    /// is released; the rest is unmapped now.
    pub fn munmap(&self, start: u64, end: u64) -> io::Result<()> {
        let mut held = lock(&self.held);
        let mut gaps = Vec::new();
        let mut cursor = start;
        // Held ranges are disjoint; visit those overlapping [start, end) in address order.
        let first = held
            .range(..=start)
            .next_back()
            .map(|(&k, _)| k)
            .unwrap_or(start);
        for (&s, h) in held.range_mut(first..end) {
            if h.end <= cursor {
                continue;
            }
            if s > cursor {
                gaps.push((cursor, s));
            }
            let (a, b) = (s.max(start), h.end.min(end));
            subtract(&mut h.released, a, b);
            h.released.push((a, b));
            cursor = h.end;
            if cursor >= end {
                break;
            }
        }
        if cursor < end {
            gaps.push((cursor, end));
        }
        for (a, b) in gaps {
            // SAFETY: the range is not held for any BO (checked under the lock), so this is
            // the caller's own mapping, which the seam's `munmap` contract lets it remove.
            let ret = unsafe { libc::munmap(a as *mut libc::c_void, (b - a) as usize) };
            if ret != 0 {
                return Err(io::Error::last_os_error());
            }
        }
        Ok(())
    }

    /// Host ranges held for BO memory (live BOs, and freed ones a queue still uses).
    pub fn held_count(&self) -> usize {
        lock(&self.held).len()
    }

    /// The CPU view of `[start, end)` was mapped again: it is no longer released.
    pub fn remapped(&self, start: u64, end: u64) {
        let mut held = lock(&self.held);
        let first = held
            .range(..=start)
            .next_back()
            .map(|(&k, _)| k)
            .unwrap_or(start);
        for (_, h) in held.range_mut(first..end) {
            subtract(&mut h.released, start, end);
        }
    }

    fn release(&self, base: u64) {
        let mut held = lock(&self.held);
        let Some(h) = held.remove(&base) else { return };
        if h.owned {
            self.backed.fetch_sub(h.end - base, Ordering::Relaxed);
            // Hand the range back as the inaccessible reservation the driver made.
            // SAFETY: the range was mapped by `back` and is held by this storage alone, whose
            // last reference is being dropped: no GPU access can use it any more.
            unsafe {
                libc::mmap(
                    base as *mut libc::c_void,
                    (h.end - base) as usize,
                    libc::PROT_NONE,
                    libc::MAP_FIXED | libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE,
                    -1,
                    0,
                )
            };
        }
        for (a, b) in h.released {
            // SAFETY: the driver asked for this range to be unmapped while the GPU still held
            // it; the last GPU user is gone now.
            unsafe { libc::munmap(a as *mut libc::c_void, (b - a) as usize) };
        }
    }
}

/// The host memory of one BO; kept mapped while any reference exists.
#[derive(Debug)]
pub(crate) struct Storage {
    base: u64,
    len: u64,
    space: Arc<AddressSpace>,
}

impl Storage {
    pub fn base(&self) -> u64 {
        self.base
    }
    pub fn len(&self) -> u64 {
        self.len
    }
}

impl Drop for Storage {
    fn drop(&mut self) {
        self.space.release(self.base);
    }
}

/// Where a BO lives.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum BoKind {
    Vram,
    Gtt,
    Userptr,
}

/// A buffer object.
#[derive(Debug)]
pub(crate) struct Bo {
    pub handle: u64,
    /// Index of the GPU it was allocated on.
    pub gpu: usize,
    pub va: u64,
    /// Size in bytes, rounded up to pages.
    pub size: u64,
    pub kind: BoKind,
    pub mmap_offset: u64,
    pub storage: Arc<Storage>,
    /// Indices of the GPUs whose page tables map it.
    pub mapped_on: Vec<usize>,
}

/// Every live BO of the process.
#[derive(Debug)]
pub(crate) struct BoTable {
    bos: HashMap<u64, Bo>,
    by_offset: BTreeMap<u64, u64>,
    /// GPU virtual ranges: start -> end.
    by_va: BTreeMap<u64, u64>,
    next_id: u32,
    next_offset: u64,
}

impl Default for BoTable {
    fn default() -> Self {
        BoTable {
            bos: HashMap::new(),
            by_offset: BTreeMap::new(),
            by_va: BTreeMap::new(),
            next_id: 1,
            next_offset: 1 << 32,
        }
    }
}

impl BoTable {
    /// Whether no BO's GPU range overlaps `[start, end)`.
    pub fn va_free(&self, start: u64, end: u64) -> bool {
        self.by_va
            .range(..end)
            .next_back()
            .is_none_or(|(_, &e)| e <= start)
    }

    /// Registers a BO at GPU address `va` (checked free with [`BoTable::va_free`]); returns
    /// its handle and mmap offset.
    pub fn insert(
        &mut self,
        gpu: usize,
        gpu_id: u32,
        va: u64,
        size: u64,
        kind: BoKind,
        storage: Arc<Storage>,
    ) -> io::Result<(u64, u64)> {
        let id = self.next_id;
        self.next_id = self
            .next_id
            .checked_add(1)
            .ok_or_else(|| errno(libc::ENOMEM))?;
        let handle = (u64::from(gpu_id) << 32) | u64::from(id);
        let mmap_offset = if kind == BoKind::Userptr {
            0
        } else {
            self.next_offset
        };
        if kind != BoKind::Userptr {
            // Leave a page between BOs so offsets of neighbours never touch.
            self.next_offset = size
                .checked_add(PAGE)
                .and_then(|s| self.next_offset.checked_add(s))
                .filter(|&o| o < (1 << 60))
                .ok_or_else(|| errno(libc::ENOMEM))?;
            self.by_offset.insert(mmap_offset, handle);
        }
        self.by_va.insert(va, va + size);
        self.bos.insert(
            handle,
            Bo {
                handle,
                gpu,
                va,
                size,
                kind,
                mmap_offset,
                storage,
                mapped_on: Vec::new(),
            },
        );
        Ok((handle, mmap_offset))
    }

    pub fn get(&self, handle: u64) -> Option<&Bo> {
        self.bos.get(&handle)
    }

    pub fn get_mut(&mut self, handle: u64) -> Option<&mut Bo> {
        self.bos.get_mut(&handle)
    }

    /// The BO whose mmap offset range contains `offset`.
    pub fn by_offset(&self, offset: u64) -> Option<&Bo> {
        let (_, handle) = self.by_offset.range(..=offset).next_back()?;
        let bo = self.bos.get(handle)?;
        (offset - bo.mmap_offset < bo.size).then_some(bo)
    }

    pub fn len(&self) -> usize {
        self.bos.len()
    }

    /// Removes every BO (the process's KFD context ends).
    pub fn drain(&mut self) -> Vec<Bo> {
        self.by_offset.clear();
        self.by_va.clear();
        self.bos.drain().map(|(_, bo)| bo).collect()
    }

    pub fn remove(&mut self, handle: u64) -> Option<Bo> {
        let bo = self.bos.remove(&handle)?;
        self.by_va.remove(&bo.va);
        if bo.kind != BoKind::Userptr {
            self.by_offset.remove(&bo.mmap_offset);
        }
        Some(bo)
    }
}

/// One GPU's page table: the BOs it can reach. Readers take an immutable [`Snapshot`].
#[derive(Debug, Default)]
pub(crate) struct PageTable {
    current: Mutex<Arc<Snapshot>>,
}

impl PageTable {
    /// The current mappings; what it maps stays mapped while it is held.
    pub fn snapshot(&self) -> Arc<Snapshot> {
        Arc::clone(&lock(&self.current))
    }

    /// Maps `storage` at GPU address `start` (idempotent).
    pub fn map(&self, start: u64, storage: &Arc<Storage>) {
        let mut cur = lock(&self.current);
        if cur.entries.iter().any(|e| e.start == start) {
            return;
        }
        let mut entries = cur.entries.clone();
        let at = entries.partition_point(|e| e.start < start);
        entries.insert(
            at,
            Entry {
                start,
                end: start + storage.len,
                storage: Arc::clone(storage),
            },
        );
        *cur = Arc::new(Snapshot { entries });
    }

    /// How many BOs it maps.
    pub fn len(&self) -> usize {
        lock(&self.current).entries.len()
    }

    /// Unmaps the BO at `start`.
    pub fn unmap(&self, start: u64) {
        let mut cur = lock(&self.current);
        if !cur.entries.iter().any(|e| e.start == start) {
            return;
        }
        let entries = cur
            .entries
            .iter()
            .filter(|e| e.start != start)
            .cloned()
            .collect();
        *cur = Arc::new(Snapshot { entries });
    }
}

#[derive(Debug, Clone)]
struct Entry {
    start: u64,
    end: u64,
    storage: Arc<Storage>,
}

/// An immutable view of a GPU's page table.
#[derive(Debug, Default)]
pub struct Snapshot {
    entries: Vec<Entry>,
}

impl Snapshot {
    /// The mapping containing `addr`.
    fn entry(&self, addr: u64) -> Option<&Entry> {
        let i = self
            .entries
            .partition_point(|e| e.start <= addr)
            .checked_sub(1)?;
        let e = &self.entries[i];
        (addr < e.end).then_some(e)
    }

    /// Host pointer to `[addr, addr + len)` if the range lies inside one mapped BO.
    pub fn translate(&self, addr: u64, len: u64) -> Option<*mut u8> {
        let end = addr.checked_add(len)?;
        let e = self.entry(addr).filter(|e| end <= e.end)?;
        Some((e.storage.base + (addr - e.start)) as usize as *mut u8)
    }

    /// The mapping containing `addr`: its GPU start, length and host pointer.
    pub fn region(&self, addr: u64) -> Option<(u64, u64, *mut u8)> {
        let e = self.entry(addr)?;
        Some((e.start, e.end - e.start, e.storage.base as usize as *mut u8))
    }

    /// The GPU range `[start, end)` of the mapping containing `addr`.
    pub fn mapping(&self, addr: u64) -> Option<(u64, u64)> {
        self.entry(addr).map(|e| (e.start, e.end))
    }

    /// The host spans of the GPU range `[addr, addr + len)`, one per mapping it crosses (BOs
    /// adjacent in the GPU's address space are not adjacent on the host); `Err` with the first
    /// address of the range that is not mapped.
    pub fn spans(&self, addr: u64, len: u64) -> Result<Vec<(*mut u8, u64)>, u64> {
        let end = addr.saturating_add(len);
        let mut spans = Vec::new();
        let mut at = addr;
        while at < end {
            let e = self.entry(at).ok_or(at)?;
            let n = e.end.min(end) - at;
            spans.push(((e.storage.base + (at - e.start)) as usize as *mut u8, n));
            at += n;
        }
        if end - addr < len {
            // The range runs past the top of the address space.
            return Err(end);
        }
        Ok(spans)
    }

    /// Copies `len` bytes from GPU address `src` to `dst`, across mappings, with `memmove`
    /// semantics when the GPU ranges overlap; all or nothing: `Err` names the side (true: the
    /// read) and the first unmapped address, and then nothing was written.
    pub fn copy(&self, src: u64, dst: u64, len: u64) -> Result<(), (bool, u64)> {
        let from = self.spans(src, len).map_err(|va| (true, va))?;
        let to = self.spans(dst, len).map_err(|va| (false, va))?;
        let mut pieces = Vec::with_capacity(from.len() + to.len());
        let (mut i, mut j, mut at_i, mut at_j) = (0, 0, 0u64, 0u64);
        while i < from.len() && j < to.len() {
            let n = (from[i].1 - at_i).min(to[j].1 - at_j);
            pieces.push((
                from[i].0.wrapping_add(at_i as usize),
                to[j].0.wrapping_add(at_j as usize),
                n,
            ));
            at_i += n;
            at_j += n;
            if at_i == from[i].1 {
                (i, at_i) = (i + 1, 0);
            }
            if at_j == to[j].1 {
                (j, at_j) = (j + 1, 0);
            }
        }
        let run = |(s, d, n): (*mut u8, *mut u8, u64)| {
            // SAFETY: each piece lies inside a mapped BO (from `spans`), kept mapped while
            // `self` holds its storage. Other engines, waves and the host reach GPU memory
            // atomically, as `shared::copy` does; it is a memmove within the piece.
            unsafe { shared::copy(s, d, n as usize) }
        };
        // Pieces sit at the same offsets of both ranges: with the destination above the
        // source, copying the last piece first keeps overlapping bytes intact.
        if dst > src {
            pieces.into_iter().rev().for_each(run);
        } else {
            pieces.into_iter().for_each(run);
        }
        Ok(())
    }

    /// Fills `len` bytes at GPU address `dst`, across mappings, with `pattern` repeated from
    /// its first byte; all or nothing, `Err` with the first unmapped address.
    pub fn fill(&self, dst: u64, len: u64, pattern: &[u8]) -> Result<(), u64> {
        let spans = self.spans(dst, len)?;
        let mut done = 0u64;
        for (p, n) in spans {
            let phase = (done % pattern.len().max(1) as u64) as usize;
            let rotated: Vec<u8> = pattern[phase..]
                .iter()
                .chain(&pattern[..phase])
                .copied()
                .collect();
            // SAFETY: the span lies inside a mapped BO kept mapped while `self` holds it;
            // everyone else reaches GPU memory atomically.
            unsafe { shared::fill(p, n as usize, &rotated) };
            done += n;
        }
        Ok(())
    }

    /// The address a VM fault reports for an access at `addr` that [`Snapshot::translate`]
    /// refused: `addr` itself when it is unmapped, else the end of the BO containing it (the
    /// access ran past that BO).
    pub fn fault_address(&self, addr: u64) -> u64 {
        self.entry(addr).map_or(addr, |e| e.end)
    }

    /// Atomic 32-bit load (`addr` must be 4-byte aligned).
    pub fn load_u32(&self, addr: u64) -> Option<u32> {
        if !addr.is_multiple_of(4) {
            return None;
        }
        let p = self.translate(addr, 4)?;
        // SAFETY: `p` is 4-byte aligned (BOs are page aligned and `addr` is) and points to 4
        // bytes of host memory that stay mapped while `self` holds the BO's storage. All of
        // this crate's accesses to GPU memory the host shares are atomic.
        Some(unsafe { AtomicU32::from_ptr(p.cast::<u32>()) }.load(Ordering::Acquire))
    }

    /// Atomic 32-bit store (`addr` must be 4-byte aligned).
    pub fn store_u32(&self, addr: u64, value: u32) -> Option<()> {
        if !addr.is_multiple_of(4) {
            return None;
        }
        let p = self.translate(addr, 4)?;
        // SAFETY: as in `load_u32`.
        unsafe { AtomicU32::from_ptr(p.cast::<u32>()) }.store(value, Ordering::Release);
        Some(())
    }

    /// 64-bit store: one atomic store when 8-byte aligned, else two 32-bit ones (low first).
    pub fn store_u64(&self, addr: u64, value: u64) -> Option<()> {
        if addr.is_multiple_of(8) {
            let p = self.translate(addr, 8)?;
            // SAFETY: `p` is 8-byte aligned and points to 8 mapped bytes kept alive by
            // `self`, as in `load_u32`.
            unsafe { AtomicU64::from_ptr(p.cast::<u64>()) }.store(value, Ordering::Release);
            Some(())
        } else {
            self.translate(addr, 8)?;
            self.store_u32(addr, value as u32)?;
            self.store_u32(addr + 4, (value >> 32) as u32)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn subtract_splits_ranges() {
        let mut l = vec![(0, 10), (20, 30)];
        subtract(&mut l, 5, 25);
        assert_eq!(l, vec![(0, 5), (25, 30)]);
        subtract(&mut l, 0, 100);
        assert!(l.is_empty());
    }
}
