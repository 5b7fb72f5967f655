//! A cache of freed buffer objects, reused by size and kind: allocation through KFD costs
//! several system calls, a cache hit costs a hash lookup. When the GPU runs out of memory the
//! cache is emptied and the allocation retried once before the caller sees `OutOfMemory`.
//!
//! The cache belongs to a GPU's device and the streams opened from it. While one queue is
//! open, a freed buffer is reusable at once: whatever uses it next is queued after whatever
//! used it before. While several are, it carries a fence per stream and is reused (or freed)
//! only once every stream has passed it.

use crate::memory::{AllocFlags, GpuMemory, MemoryKind};
use crate::stream::{Fence, StreamSet};
use hcq_core::{Error, Result};
use std::collections::HashMap;
use std::sync::Mutex;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
struct Key {
    /// Page-rounded size.
    size: u64,
    kind: MemoryKind,
    uncached: bool,
    public: bool,
}

/// Freed buffer objects awaiting reuse.
#[derive(Default)]
pub struct BufferCache {
    free: Mutex<HashMap<Key, Vec<Freed>>>,
    /// The queues of the GPU, whose progress the fences record.
    pub(crate) streams: StreamSet,
}

impl std::fmt::Debug for BufferCache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "BufferCache({} bytes)", self.cached_bytes())
    }
}

/// A freed buffer object, and where the GPU's streams were when it was freed.
struct Freed {
    mem: GpuMemory,
    fences: Vec<Fence>,
}

impl Freed {
    fn reusable(&self) -> bool {
        self.fences.iter().all(Fence::passed)
    }
}

fn key(size: u64, kind: MemoryKind, flags: AllocFlags) -> Key {
    let size = size.max(1).next_multiple_of(crate::memory::PAGE_SIZE);
    Key {
        size,
        kind,
        uncached: flags.uncached,
        public: flags.public,
    }
}

impl BufferCache {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<Key, Vec<Freed>>> {
        self.free.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// A cached buffer object of this size and kind that no stream can still be using, if
    /// any.
    pub fn take(&self, size: u64, kind: MemoryKind, flags: AllocFlags) -> Option<GpuMemory> {
        let mut free = self.lock();
        let list = free.get_mut(&key(size, kind, flags))?;
        let at = list.iter().rposition(Freed::reusable)?;
        Some(list.swap_remove(at).mem)
    }

    /// Keeps `mem` for reuse.
    pub fn put(&self, mem: GpuMemory, flags: AllocFlags) {
        let k = key(mem.size, mem.kind, flags);
        let fences = self.streams.fences();
        self.lock()
            .entry(k)
            .or_default()
            .push(Freed { mem, fences });
    }

    /// Frees every cached buffer object no stream can still be using; returns how many bytes
    /// that released.
    pub fn clear(&self) -> u64 {
        let mut released = Vec::new();
        for list in self.lock().values_mut() {
            let (gone, kept): (Vec<Freed>, Vec<Freed>) =
                std::mem::take(list).into_iter().partition(Freed::reusable);
            *list = kept;
            released.extend(gone);
        }
        released.iter().map(|f| f.mem.size).sum()
    }

    /// Bytes held by the cache.
    pub fn cached_bytes(&self) -> u64 {
        self.lock().values().flatten().map(|f| f.mem.size).sum()
    }

    /// Takes from the cache, else allocates with `alloc`; on `OutOfMemory` runs `evict_prepare`
    /// (which waits until no queued work can still use a cached buffer), empties the cache and
    /// tries once more.
    pub fn alloc(
        &self,
        size: u64,
        kind: MemoryKind,
        flags: AllocFlags,
        alloc: impl Fn() -> Result<GpuMemory>,
        evict_prepare: impl FnOnce() -> Result<()>,
    ) -> Result<GpuMemory> {
        if let Some(m) = self.take(size, kind, flags) {
            return Ok(m);
        }
        match alloc() {
            Err(Error::OutOfMemory { .. }) if self.cached_bytes() > 0 => {
                evict_prepare()?;
                self.clear();
                alloc()
            }
            other => other,
        }
    }
}
