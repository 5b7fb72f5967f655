//! Decode-once instruction cache keyed by PC.
//!
//! Instructions are decoded lazily on first execution and stored with their raw dwords.
//! [`CodeCache::invalidate`] (an instruction-cache invalidate seen by the command processor)
//! bumps a generation counter; an entry checked in an older generation is revalidated by
//! comparing its raw dwords with memory and re-decoded only if they differ.
//!
//! The shared map sits behind an `RwLock`; each worker thread keeps a [`LocalCodeCache`] of
//! `Arc`s in front of it, so the hot path is one local hash lookup and one atomic load.

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, RwLock};

use crate::decode::{decode, DecodeError, Inst, MAX_INST_WORDS};
use crate::fault::FaultKind;
use crate::jit::{Jit, JitMode, LocalBlocks};
use crate::memory::{read_bytes, Memory};

/// A decoded instruction with the raw dwords it was decoded from.
#[derive(Debug)]
pub struct CachedInst {
    /// Byte address.
    pub pc: u64,
    /// The instruction's dwords (only the first `words` are meaningful).
    pub raw: [u32; MAX_INST_WORDS],
    /// Length in dwords.
    pub words: u8,
    /// The decoded instruction.
    pub inst: Inst,
    /// Generation of the cache in which `raw` was last known to match memory.
    checked_generation: AtomicU64,
}

impl CachedInst {
    /// Length in bytes.
    pub fn size_bytes(&self) -> u64 {
        u64::from(self.words) * 4
    }
}

/// A multiplicative hasher for PC keys (PCs are dword aligned and unique; no DoS concern).
#[derive(Default)]
pub struct PcHasher(u64);

impl Hasher for PcHasher {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0.rotate_left(8) ^ u64::from(b)).wrapping_mul(0x9e37_79b9_7f4a_7c15);
        }
    }
    fn write_u64(&mut self, value: u64) {
        self.0 = (value >> 2).wrapping_mul(0x9e37_79b9_7f4a_7c15);
    }
}

pub(crate) type PcMap<V> = HashMap<u64, V, BuildHasherDefault<PcHasher>>;

/// The shared decode cache (one per device/queue; usable from several threads), with the
/// blocks compiled from it (`jit/`).
#[derive(Debug)]
pub struct CodeCache {
    entries: RwLock<PcMap<Arc<CachedInst>>>,
    generation: AtomicU64,
    pub(crate) jit: Jit,
    /// Host nanoseconds a workgroup of the kernel at each entry took, last dispatch.
    workgroup_cost: Mutex<PcMap<u64>>,
}

impl Default for CodeCache {
    fn default() -> Self {
        Self::new()
    }
}

impl CodeCache {
    /// An empty cache compiling blocks as `HCQ_EMU_JIT` says ([`JitMode::from_env`]).
    pub fn new() -> Self {
        Self::with_jit(JitMode::from_env())
    }

    /// An empty cache compiling blocks in `mode`.
    pub fn with_jit(mode: JitMode) -> Self {
        Self {
            entries: RwLock::default(),
            generation: AtomicU64::new(0),
            jit: Jit::new(mode),
            workgroup_cost: Mutex::default(),
        }
    }

    /// Host nanoseconds a workgroup of the kernel at `entry` took in its last dispatch.
    pub(crate) fn workgroup_cost(&self, entry: u64) -> Option<u64> {
        self.workgroup_cost.lock().ok()?.get(&entry).copied()
    }

    pub(crate) fn note_workgroup_cost(&self, entry: u64, nanoseconds: u64) {
        if let Ok(mut costs) = self.workgroup_cost.lock() {
            costs.insert(entry, nanoseconds);
        }
    }

    /// When this cache compiles blocks.
    pub fn jit_mode(&self) -> JitMode {
        self.jit.mode
    }

    /// Blocks compiled to host code so far (0 where there is no block compiler).
    pub fn compiled_blocks(&self) -> usize {
        self.jit.compiled_blocks()
    }

    /// Marks every entry stale; each is revalidated against memory on its next use.
    pub fn invalidate(&self) {
        self.generation.fetch_add(1, Ordering::AcqRel);
    }

    /// Drops what is cached of the code at `[start, start + len)`: the GPU no longer maps it
    /// (code later placed there is decoded and compiled afresh). Keeps a process that loads
    /// and frees code objects from growing the cache without bound.
    pub fn forget(&self, start: u64, len: u64) {
        let end = start.saturating_add(len);
        if let Ok(mut map) = self.entries.write() {
            map.retain(|&pc, _| !(start..end).contains(&pc));
        }
        self.jit.forget(start, end);
    }

    /// Number of decoded instructions held.
    pub fn len(&self) -> usize {
        self.entries.read().map_or(0, |map| map.len())
    }

    /// Whether the cache holds no instruction.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    pub(crate) fn generation(&self) -> u64 {
        self.generation.load(Ordering::Acquire)
    }

    /// Returns the instruction at `pc`, decoding it on first use (or after a change).
    pub fn fetch(&self, mem: &dyn Memory, pc: u64) -> Result<Arc<CachedInst>, FaultKind> {
        let generation = self.generation();
        let existing = self
            .entries
            .read()
            .ok()
            .and_then(|map| map.get(&pc).cloned());
        if let Some(entry) = existing {
            if self.revalidate(mem, &entry, generation)? {
                return Ok(entry);
            }
        }
        let entry = Arc::new(decode_at(mem, pc, generation)?);
        if let Ok(mut map) = self.entries.write() {
            map.insert(pc, Arc::clone(&entry));
        }
        Ok(entry)
    }

    /// Whether `entry` still matches memory (cheap when checked in this generation).
    pub(crate) fn revalidate(
        &self,
        mem: &dyn Memory,
        entry: &CachedInst,
        generation: u64,
    ) -> Result<bool, FaultKind> {
        if entry.checked_generation.load(Ordering::Acquire) == generation {
            return Ok(true);
        }
        let len = usize::from(entry.words);
        let mut bytes = [0u8; MAX_INST_WORDS * 4];
        read_bytes(mem, entry.pc, &mut bytes[..len * 4])?;
        let matches = (0..len).all(|i| dword(&bytes, i) == entry.raw[i]);
        if matches {
            entry
                .checked_generation
                .store(generation, Ordering::Release);
        }
        Ok(matches)
    }
}

fn dword(bytes: &[u8; MAX_INST_WORDS * 4], index: usize) -> u32 {
    let mut word = [0u8; 4];
    word.copy_from_slice(&bytes[index * 4..index * 4 + 4]);
    u32::from_le_bytes(word)
}

/// Reads and decodes the instruction at `pc`.
fn decode_at(mem: &dyn Memory, pc: u64, generation: u64) -> Result<CachedInst, FaultKind> {
    if !pc.is_multiple_of(4) {
        return Err(FaultKind::VmFault {
            addr: pc,
            write: false,
        });
    }
    let mut bytes = [0u8; MAX_INST_WORDS * 4];
    // Read as many dwords as are mapped (up to the longest instruction).
    let mut available = 0;
    for count in (1..=MAX_INST_WORDS).rev() {
        if read_bytes(mem, pc, &mut bytes[..count * 4]).is_ok() {
            available = count;
            break;
        }
    }
    if available == 0 {
        return Err(FaultKind::VmFault {
            addr: pc,
            write: false,
        });
    }
    let mut raw = [0u32; MAX_INST_WORDS];
    for (i, word) in raw.iter_mut().enumerate().take(available) {
        *word = dword(&bytes, i);
    }
    match decode(&raw[..available]) {
        Ok(decoded) => {
            let words = decoded.words.min(MAX_INST_WORDS);
            let mut kept = [0u32; MAX_INST_WORDS];
            kept[..words].copy_from_slice(&raw[..words]);
            Ok(CachedInst {
                pc,
                raw: kept,
                words: words as u8,
                inst: decoded.inst,
                checked_generation: AtomicU64::new(generation),
            })
        }
        Err(DecodeError::Undecodable { word }) => Err(FaultKind::Undecodable { word }),
        Err(DecodeError::Truncated { needed }) => Err(FaultKind::VmFault {
            addr: pc.wrapping_add(needed as u64 * 4 - 4),
            write: false,
        }),
    }
}

impl Drop for LocalCodeCache<'_> {
    fn drop(&mut self) {
        self.shared.jit.add_arrivals(&mut self.blocks);
    }
}

/// Most instruction slots a [`LocalCodeCache`] keeps in its dense window (4 MiB of code);
/// PCs outside the window go through a hash map.
const MAX_WINDOW_SLOTS: usize = 1 << 20;

/// A per-thread front for a [`CodeCache`]: PC → entry without taking the shared lock.
///
/// Entries live in a dense array indexed by `(pc - base) / 4` over the code seen so far (a
/// code object is contiguous), so the hot path is one bounds check, one index and one
/// generation compare; PCs far from the window fall back to a hash map.
pub struct LocalCodeCache<'a> {
    pub(crate) shared: &'a CodeCache,
    /// This thread's arrival counts and compiled blocks.
    pub(crate) blocks: LocalBlocks,
    /// PC of `window[0]`.
    base: u64,
    window: Vec<Option<Arc<CachedInst>>>,
    overflow: PcMap<Arc<CachedInst>>,
}

impl<'a> LocalCodeCache<'a> {
    /// A new empty front for `shared`.
    pub fn new(shared: &'a CodeCache) -> Self {
        Self {
            shared,
            blocks: LocalBlocks::default(),
            base: 0,
            window: Vec::new(),
            overflow: PcMap::default(),
        }
    }

    /// Window slot of `pc`, if `pc` is dword aligned and inside the window.
    #[inline]
    fn slot(&self, pc: u64) -> Option<usize> {
        let offset = pc.wrapping_sub(self.base);
        if !offset.is_multiple_of(4) {
            return None;
        }
        let index = usize::try_from(offset / 4).ok()?;
        (index < self.window.len()).then_some(index)
    }

    /// The instruction at `pc`.
    #[inline]
    pub fn fetch(&mut self, mem: &dyn Memory, pc: u64) -> Result<&CachedInst, FaultKind> {
        let generation = self.shared.generation();
        let slot = self.slot(pc);
        let hit = self
            .lookup(slot, pc)
            .is_some_and(|entry| entry.checked_generation.load(Ordering::Acquire) == generation);
        if !hit {
            return self.fetch_slow(mem, pc);
        }
        // `hit` means the lookup succeeds; the error is unreachable.
        self.lookup(slot, pc).ok_or(FaultKind::VmFault {
            addr: pc,
            write: false,
        })
    }

    #[inline]
    fn lookup(&self, slot: Option<usize>, pc: u64) -> Option<&CachedInst> {
        match slot {
            Some(index) => self.window.get(index).and_then(|entry| entry.as_deref()),
            None => self.overflow.get(&pc).map(|entry| &**entry),
        }
    }

    #[cold]
    fn fetch_slow(&mut self, mem: &dyn Memory, pc: u64) -> Result<&CachedInst, FaultKind> {
        let entry = self.shared.fetch(mem, pc)?;
        if let Some(index) = self.place(pc) {
            return Ok(&**self.window[index].insert(entry));
        }
        match self.overflow.entry(pc) {
            std::collections::hash_map::Entry::Occupied(mut occupied) => {
                occupied.insert(entry);
                Ok(&**occupied.into_mut())
            }
            std::collections::hash_map::Entry::Vacant(vacant) => Ok(&**vacant.insert(entry)),
        }
    }

    /// Grows the window to cover `pc` if that keeps it within [`MAX_WINDOW_SLOTS`]; returns
    /// the slot of `pc`.
    fn place(&mut self, pc: u64) -> Option<usize> {
        if !pc.is_multiple_of(4) {
            return None;
        }
        if self.window.is_empty() {
            self.base = pc;
        }
        if let Some(index) = self.slot(pc) {
            return Some(index);
        }
        let end = self.base.checked_add(self.window.len() as u64 * 4)?;
        let new_base = self.base.min(pc);
        let new_end = end.max(pc.checked_add(4)?);
        let slots = usize::try_from((new_end - new_base) / 4).ok()?;
        if slots > MAX_WINDOW_SLOTS {
            return None;
        }
        // Grow by at least doubling so a wave walking forward does not re-layout every time.
        let front = usize::try_from((self.base - new_base) / 4).ok()?;
        let mut window = Vec::with_capacity(slots.max(self.window.len() * 2).min(MAX_WINDOW_SLOTS));
        window.resize_with(front, || None);
        window.append(&mut self.window);
        window.resize_with(slots, || None);
        self.window = window;
        self.base = new_base;
        self.slot(pc)
    }
}
