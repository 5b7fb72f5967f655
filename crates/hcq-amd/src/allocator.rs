//! A cache of freed buffer objects, reused by size and kind: allocation through KFD costs
//! several system calls, a cache hit costs a hash lookup. When the GPU runs out of memory the
//! cache is emptied and the allocation retried once before the caller sees `OutOfMemory`.

use crate::memory::{AllocFlags, GpuMemory, MemoryKind};
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
#[derive(Debug, Default)]
pub struct BufferCache {
    free: Mutex<HashMap<Key, Vec<GpuMemory>>>,
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
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<Key, Vec<GpuMemory>>> {
        self.free.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// A cached buffer object of this size and kind, if any.
    pub fn take(&self, size: u64, kind: MemoryKind, flags: AllocFlags) -> Option<GpuMemory> {
        self.lock().get_mut(&key(size, kind, flags))?.pop()
    }

    /// Keeps `mem` for reuse.
    pub fn put(&self, mem: GpuMemory, flags: AllocFlags) {
        let k = key(mem.size, mem.kind, flags);
        self.lock().entry(k).or_default().push(mem);
    }

    /// Frees every cached buffer object; returns how many bytes that released.
    pub fn clear(&self) -> u64 {
        let drained: Vec<GpuMemory> = self.lock().drain().flat_map(|(_, v)| v).collect();
        drained.iter().map(|m| m.size).sum()
    }

    /// Bytes held by the cache.
    pub fn cached_bytes(&self) -> u64 {
        self.lock().values().flatten().map(|m| m.size).sum()
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
