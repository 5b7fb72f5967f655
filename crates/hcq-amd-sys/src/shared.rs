//! Access to memory the GPU shares with the host: the one audited way to read, write, copy and
//! fill bytes that another thread (an emulated engine, a dispatch's waves, the driver) or the
//! device may touch at the same time.
//!
//! A plain load or store (`ptr::copy_nonoverlapping`, a `&mut [u8]` over the mapping) racing
//! with another thread's access is undefined behaviour in Rust whatever the values, so every
//! byte here moves through a relaxed atomic load or store, naturally aligned and as wide as
//! the alignment allows (8, 4, 2 or 1 bytes). Relaxed is what the hardware promises for plain
//! data: each aligned piece is read or written whole, and ordering comes from the signals,
//! fences and doorbells that publish the data, never from the data accesses themselves.
//!
//! What is still relied on (see the memory model in `hcq-emu`'s crate docs): accesses of
//! different widths to the same bytes (a wave's dword store against a host copy's 8-byte
//! load) are "mixed-size" atomics, which the C++ model Rust inherits leaves undefined when
//! they race, while every architecture Rust runs hcq on performs them as single-copy atomic
//! per aligned piece. Racing on the same bytes without synchronisation gives unspecified
//! values on a GPU too; programs that synchronise through signals see exact results.
//!
//! The unit tests below also run under Miri, which checks the accesses for data races and
//! undefined behaviour: `cargo +nightly miri test -p hcq-amd-sys --lib shared` (a few
//! minutes; the cases shrink under `cfg(miri)`).

use std::sync::atomic::{AtomicU16, AtomicU32, AtomicU64, AtomicU8, Ordering};

/// Bytes moved per step of [`copy`] and [`fill`]: the bounce buffer lives on the stack.
const CHUNK: usize = 4096;

/// Plain data needs no ordering of its own: signals and fences publish it.
const RELAXED: Ordering = Ordering::Relaxed;

/// The widest naturally aligned piece (8, 4, 2 or 1 bytes) at `addr` that fits in `left`.
#[inline(always)]
fn piece(addr: usize, left: usize) -> usize {
    let alignment = 1usize << addr.trailing_zeros().min(3);
    let mut width = alignment;
    while width > left {
        width /= 2;
    }
    width
}

/// Copies `dst.len()` bytes of shared memory at `src` into the private buffer `dst`.
///
/// # Safety
/// `[src, src + dst.len())` must be valid for reads for the whole call, and no Rust reference
/// may cover it: every concurrent access by another thread must be atomic (made through this
/// module or through Rust atomics).
#[inline]
pub unsafe fn load(src: *const u8, dst: &mut [u8]) {
    let len = dst.len();
    let mut at = 0usize;
    // Pieces up to the first 8-byte boundary, then whole aligned words in a loop the compiler
    // keeps tight, then the pieces of the tail.
    let head = head_bytes(src as usize, len);
    while at < head {
        let here = src.wrapping_add(at);
        let width = piece(here as usize, head - at);
        // SAFETY: `here` is aligned to `width` (chosen by `piece`), the `width` bytes at it lie
        // inside the caller's readable range, and concurrent accesses are atomic (the
        // caller's contract).
        unsafe { load_piece(here, &mut dst[at..at + width]) };
        at += width;
    }
    let words = (len - at) / 8;
    for (k, out) in dst[at..at + 8 * words].chunks_exact_mut(8).enumerate() {
        // SAFETY: `src + at` is 8-byte aligned (past the head) and these 8 bytes lie inside the
        // caller's range; concurrent accesses are atomic.
        let word = unsafe { AtomicU64::from_ptr(src.wrapping_add(at + 8 * k).cast_mut().cast()) }
            .load(RELAXED);
        out.copy_from_slice(&word.to_ne_bytes());
    }
    at += 8 * words;
    while at < len {
        let here = src.wrapping_add(at);
        let width = piece(here as usize, len - at);
        // SAFETY: as for the head.
        unsafe { load_piece(here, &mut dst[at..at + width]) };
        at += width;
    }
}

/// Bytes from `addr` to the next 8-byte boundary, at most `len`.
#[inline(always)]
fn head_bytes(addr: usize, len: usize) -> usize {
    (addr.wrapping_neg() & 7).min(len)
}

/// One atomic load of `out.len()` (8, 4, 2 or 1) bytes at `src`.
///
/// # Safety
/// `src` is aligned to `out.len()` and the bytes are readable; concurrent accesses are atomic.
#[inline(always)]
unsafe fn load_piece(src: *const u8, out: &mut [u8]) {
    let src = src.cast_mut();
    match out.len() {
        // SAFETY: this function's contract, for 8 aligned bytes.
        8 => out.copy_from_slice(
            &unsafe { AtomicU64::from_ptr(src.cast()) }
                .load(RELAXED)
                .to_ne_bytes(),
        ),
        // SAFETY: this function's contract, for 4 aligned bytes.
        4 => out.copy_from_slice(
            &unsafe { AtomicU32::from_ptr(src.cast()) }
                .load(RELAXED)
                .to_ne_bytes(),
        ),
        // SAFETY: this function's contract, for 2 aligned bytes.
        2 => out.copy_from_slice(
            &unsafe { AtomicU16::from_ptr(src.cast()) }
                .load(RELAXED)
                .to_ne_bytes(),
        ),
        // SAFETY: this function's contract, for 1 byte.
        _ => out[0] = unsafe { AtomicU8::from_ptr(src) }.load(RELAXED),
    }
}

/// One atomic store of `bytes` (8, 4, 2 or 1 of them) at `dst`.
///
/// # Safety
/// `dst` is aligned to `bytes.len()` and the bytes are writable; concurrent accesses are
/// atomic.
#[inline(always)]
unsafe fn store_piece(dst: *mut u8, bytes: &[u8]) {
    let mut word = [0u8; 8];
    word[..bytes.len()].copy_from_slice(bytes);
    match bytes.len() {
        // SAFETY: this function's contract, for 8 aligned bytes.
        8 => unsafe { AtomicU64::from_ptr(dst.cast()) }.store(u64::from_ne_bytes(word), RELAXED),
        4 => {
            let value = u32::from_ne_bytes([word[0], word[1], word[2], word[3]]);
            // SAFETY: this function's contract, for 4 aligned bytes.
            unsafe { AtomicU32::from_ptr(dst.cast()) }.store(value, RELAXED)
        }
        2 => {
            let value = u16::from_ne_bytes([word[0], word[1]]);
            // SAFETY: this function's contract, for 2 aligned bytes.
            unsafe { AtomicU16::from_ptr(dst.cast()) }.store(value, RELAXED)
        }
        // SAFETY: this function's contract, for 1 byte.
        _ => unsafe { AtomicU8::from_ptr(dst) }.store(word[0], RELAXED),
    }
}

/// Copies the private bytes `src` into shared memory at `dst`.
///
/// # Safety
/// `[dst, dst + src.len())` must be valid for writes for the whole call, and no Rust reference
/// may cover it: every concurrent access by another thread must be atomic.
#[inline]
pub unsafe fn store(dst: *mut u8, src: &[u8]) {
    let len = src.len();
    let mut at = 0usize;
    let head = head_bytes(dst as usize, len);
    while at < head {
        let here = dst.wrapping_add(at);
        let width = piece(here as usize, head - at);
        // SAFETY: as in `load`, for writes.
        unsafe { store_piece(here, &src[at..at + width]) };
        at += width;
    }
    let words = (len - at) / 8;
    for (k, bytes) in src[at..at + 8 * words].chunks_exact(8).enumerate() {
        let word = u64::from_ne_bytes(bytes.try_into().expect("8 bytes"));
        // SAFETY: `dst + at` is 8-byte aligned (past the head) and these 8 bytes lie inside
        // the caller's writable range; concurrent accesses are atomic.
        unsafe { AtomicU64::from_ptr(dst.wrapping_add(at + 8 * k).cast()) }.store(word, RELAXED);
    }
    at += 8 * words;
    while at < len {
        let here = dst.wrapping_add(at);
        let width = piece(here as usize, len - at);
        // SAFETY: as in `load`, for writes.
        unsafe { store_piece(here, &src[at..at + width]) };
        at += width;
    }
}

/// The 4 bytes of shared memory at `src`: one atomic load when `src` is 4-byte aligned (the
/// common case of a dword access, kept cheap for the interpreter's per-lane loads).
///
/// # Safety
/// As [`load`] for 4 bytes.
#[inline(always)]
pub unsafe fn load_4(src: *const u8) -> [u8; 4] {
    if (src as usize) & 3 == 0 {
        // SAFETY: aligned, inside the caller's readable range; concurrent accesses are atomic.
        return unsafe { AtomicU32::from_ptr(src as *mut u32) }
            .load(Ordering::Relaxed)
            .to_ne_bytes();
    }
    let mut bytes = [0u8; 4];
    // SAFETY: the caller's contract.
    unsafe { load(src, &mut bytes) };
    bytes
}

/// Writes 4 bytes of shared memory at `dst`: one atomic store when `dst` is 4-byte aligned.
///
/// # Safety
/// As [`store`] for 4 bytes.
#[inline(always)]
pub unsafe fn store_4(dst: *mut u8, bytes: [u8; 4]) {
    if (dst as usize) & 3 == 0 {
        // SAFETY: aligned, inside the caller's writable range; concurrent accesses are atomic.
        unsafe { AtomicU32::from_ptr(dst as *mut u32) }
            .store(u32::from_ne_bytes(bytes), Ordering::Relaxed);
        return;
    }
    // SAFETY: the caller's contract.
    unsafe { store(dst, &bytes) };
}

/// Writes 8 bytes of shared memory at `dst`: one atomic store when `dst` is 8-byte aligned
/// (an address word a graph replay patches, the common case of an 8-byte write).
///
/// # Safety
/// As [`store`] for 8 bytes.
#[inline(always)]
pub unsafe fn store_8(dst: *mut u8, bytes: [u8; 8]) {
    if (dst as usize) & 7 == 0 {
        // SAFETY: aligned, inside the caller's writable range; concurrent accesses are atomic.
        unsafe { AtomicU64::from_ptr(dst.cast()) }.store(u64::from_ne_bytes(bytes), RELAXED);
        return;
    }
    // SAFETY: the caller's contract.
    unsafe { store(dst, &bytes) };
}

/// Copies `len` bytes of shared memory from `src` to `dst`, with `memmove` semantics when
/// the ranges overlap.
///
/// # Safety
/// `[src, src + len)` must be valid for reads and `[dst, dst + len)` for writes for the whole
/// call, with no Rust reference covering either; concurrent accesses must be atomic.
pub unsafe fn copy(src: *const u8, dst: *mut u8, len: usize) {
    let (s, d) = (src as usize, dst as usize);
    // Same alignment and the destination not above an overlapping source: word by word,
    // forwards, with no bounce (a word is read before it is written, and a forward copy never
    // reads bytes it has already overwritten when the destination is lower).
    if (s ^ d) & 7 == 0 && (d <= s || d >= s.wrapping_add(len)) {
        let head = head_bytes(s, len);
        let mut small = [0u8; 8];
        // SAFETY: the head and tail lie inside both ranges; `load` and `store` are atomic.
        unsafe {
            load(src, &mut small[..head]);
            store(dst, &small[..head]);
        }
        let words = (len - head) / 8;
        for k in 0..words {
            let at = head + 8 * k;
            // SAFETY: `src + at` and `dst + at` are 8-byte aligned (same alignment, past the
            // head) and the 8 bytes lie inside the caller's ranges; accesses are atomic.
            unsafe {
                let word =
                    AtomicU64::from_ptr(src.wrapping_add(at).cast_mut().cast()).load(RELAXED);
                AtomicU64::from_ptr(dst.wrapping_add(at).cast()).store(word, RELAXED);
            }
        }
        let at = head + 8 * words;
        let tail = len - at;
        // SAFETY: as for the head.
        unsafe {
            load(src.wrapping_add(at), &mut small[..tail]);
            store(dst.wrapping_add(at), &small[..tail]);
        }
        return;
    }
    let mut bounce = [0u8; CHUNK];
    let mut step = |offset: usize, n: usize| {
        let buffer = &mut bounce[..n];
        // SAFETY: `offset + n <= len`, so both pieces lie inside the caller's ranges. Each
        // piece is read whole before it is written, and the pieces go in the direction that
        // never reads bytes an earlier piece overwrote.
        unsafe {
            load(src.wrapping_add(offset), buffer);
            store(dst.wrapping_add(offset), buffer);
        }
    };
    if (dst as usize) <= (src as usize) {
        let mut offset = 0;
        while offset < len {
            let n = CHUNK.min(len - offset);
            step(offset, n);
            offset += n;
        }
    } else {
        let mut end = len;
        while end > 0 {
            let n = CHUNK.min(end);
            step(end - n, n);
            end -= n;
        }
    }
}

/// Fills `len` bytes of shared memory at `dst` with `pattern` repeated (the first byte of
/// the range gets `pattern[0]`).
///
/// # Safety
/// `[dst, dst + len)` must be valid for writes for the whole call, with no Rust reference
/// covering it; concurrent accesses must be atomic.
pub unsafe fn fill(dst: *mut u8, len: usize, pattern: &[u8]) {
    if pattern.is_empty() {
        return;
    }
    // Whole repetitions per chunk, so every chunk starts at the pattern's first byte.
    let per_chunk = (CHUNK / pattern.len()).max(1) * pattern.len();
    let mut image = vec![0u8; per_chunk];
    for (k, byte) in image.iter_mut().enumerate() {
        *byte = pattern[k % pattern.len()];
    }
    let mut offset = 0;
    while offset < len {
        let n = per_chunk.min(len - offset);
        // SAFETY: `offset + n <= len`: inside the caller's writable range.
        unsafe { store(dst.wrapping_add(offset), &image[..n]) };
        offset += n;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Shared memory for the tests: 8-byte aligned, addressed through raw pointers only.
    struct Arena {
        words: Box<[AtomicU64]>,
    }

    impl Arena {
        fn new(len: usize, seed: u8) -> Self {
            let words: Box<[AtomicU64]> = (0..len.div_ceil(8)).map(|_| AtomicU64::new(0)).collect();
            let arena = Arena { words };
            for k in 0..len {
                arena.set(k, seed.wrapping_mul(31).wrapping_add(k as u8));
            }
            arena
        }
        fn ptr(&self, offset: usize) -> *mut u8 {
            self.words
                .as_ptr()
                .cast::<u8>()
                .cast_mut()
                .wrapping_add(offset)
        }
        fn get(&self, k: usize) -> u8 {
            (self.words[k / 8].load(Ordering::Relaxed).to_ne_bytes())[k % 8]
        }
        fn set(&self, k: usize, value: u8) {
            let mut bytes = self.words[k / 8].load(Ordering::Relaxed).to_ne_bytes();
            bytes[k % 8] = value;
            self.words[k / 8].store(u64::from_ne_bytes(bytes), Ordering::Relaxed);
        }
        fn snapshot(&self, len: usize) -> Vec<u8> {
            (0..len).map(|k| self.get(k)).collect()
        }
    }

    const SPAN: usize = 64;

    #[test]
    fn load_and_store_match_a_bytewise_reference_at_every_alignment_and_length() {
        for offset in 0..16 {
            for len in 0..=SPAN - 16 {
                let arena = Arena::new(SPAN, 3);
                let before = arena.snapshot(SPAN);
                let mut out = vec![0xeeu8; len];
                // SAFETY: `offset + len <= SPAN` bytes of the arena, reached only by pointer.
                unsafe { load(arena.ptr(offset), &mut out) };
                assert_eq!(out, before[offset..offset + len], "load {offset}+{len}");

                let data: Vec<u8> = (0..len).map(|k| 0x80 ^ k as u8).collect();
                // SAFETY: as above.
                unsafe { store(arena.ptr(offset), &data) };
                let mut expected = before.clone();
                expected[offset..offset + len].copy_from_slice(&data);
                assert_eq!(arena.snapshot(SPAN), expected, "store {offset}+{len}");
            }
            let arena = Arena::new(SPAN, 5);
            let mut expected = arena.snapshot(SPAN);
            // SAFETY: 4 bytes at `offset < 16` lie inside the arena.
            let word = unsafe { load_4(arena.ptr(offset)) };
            assert_eq!(word[..], expected[offset..offset + 4], "load_4 at {offset}");
            // SAFETY: as above.
            unsafe { store_4(arena.ptr(offset), [0xa1, 0xb2, 0xc3, 0xd4]) };
            expected[offset..offset + 4].copy_from_slice(&[0xa1, 0xb2, 0xc3, 0xd4]);
            assert_eq!(arena.snapshot(SPAN), expected, "store_4 at {offset}");
            let eight = [0x11, 0x22, 0x33, 0x44, 0x55, 0x66, 0x77, 0x88];
            // SAFETY: 8 bytes at `offset < 16` lie inside the arena.
            unsafe { store_8(arena.ptr(offset), eight) };
            expected[offset..offset + 8].copy_from_slice(&eight);
            assert_eq!(arena.snapshot(SPAN), expected, "store_8 at {offset}");
        }
    }

    #[test]
    fn copy_is_memmove_at_every_alignment_length_and_overlap() {
        // Lengths cross the bounce chunk so that chunk order matters for overlaps.
        // Fewer cases under Miri (`cargo +nightly miri test -p hcq-amd-sys shared`), which
        // interprets every access.
        let lengths: Vec<usize> = if cfg!(miri) {
            (0..12).chain([CHUNK + 3]).collect()
        } else {
            (0..40)
                .chain([CHUNK - 1, CHUNK, CHUNK + 1, 2 * CHUNK + 700])
                .collect()
        };
        for &len in &lengths {
            for src in 0..9 {
                for dst in 0..9 {
                    let total = len + 16;
                    let arena = Arena::new(total, len as u8);
                    let mut expected = arena.snapshot(total);
                    expected.copy_within(src..src + len, dst);
                    // SAFETY: both ranges lie inside the arena (`+ 8 < 16` of slack).
                    unsafe { copy(arena.ptr(src), arena.ptr(dst), len) };
                    assert_eq!(arena.snapshot(total), expected, "{src}->{dst} len {len}");
                }
            }
        }
    }

    #[test]
    fn fill_repeats_the_pattern_from_the_first_byte() {
        for pattern in [&[0x5au8][..], &[1, 2], &[9, 8, 7, 6], &[1, 2, 3]] {
            for offset in 0..9 {
                let lengths: Vec<usize> = if cfg!(miri) {
                    (0..12).chain([CHUNK + 6]).collect()
                } else {
                    (0..40).chain([CHUNK - 1, CHUNK, 2 * CHUNK + 500]).collect()
                };
                for len in lengths {
                    let total = len + 16;
                    let arena = Arena::new(total, 7);
                    let mut expected = arena.snapshot(total);
                    for k in 0..len {
                        expected[offset + k] = pattern[k % pattern.len()];
                    }
                    // SAFETY: inside the arena.
                    unsafe { fill(arena.ptr(offset), len, pattern) };
                    assert_eq!(
                        arena.snapshot(total),
                        expected,
                        "{pattern:?} {offset}+{len}"
                    );
                }
            }
        }
    }

    #[test]
    fn concurrent_readers_see_whole_aligned_words() {
        // A writer stores words whose bytes are all equal; readers copying the same memory
        // must only ever see such words (each aligned 8-byte piece moves whole).
        let arena = std::sync::Arc::new(Arena::new(4096, 0));
        // SAFETY: inside the arena; no other thread runs yet.
        unsafe { fill(arena.ptr(0), 4096, &[0]) };
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let writer = {
            let (arena, stop) = (arena.clone(), stop.clone());
            std::thread::spawn(move || {
                let mut round = 0u8;
                while !stop.load(Ordering::Relaxed) {
                    round = round.wrapping_add(1);
                    // SAFETY: inside the arena.
                    unsafe { fill(arena.ptr(0), 4096, &[round]) };
                }
            })
        };
        let mut out = vec![0u8; 4096];
        for _ in 0..if cfg!(miri) { 4 } else { 2000 } {
            // SAFETY: inside the arena; the writer's accesses are atomic.
            unsafe { load(arena.ptr(0), &mut out) };
            for word in out.chunks_exact(8) {
                assert!(word.iter().all(|&b| b == word[0]), "torn word {word:?}");
            }
        }
        stop.store(true, Ordering::Relaxed);
        writer.join().unwrap();
    }
}
