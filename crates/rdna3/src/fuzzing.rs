//! Bodies of the fuzz targets for this crate: the libFuzzer binaries in `fuzz/` and the
//! workspace's replay of every input that ever failed call these, so both exercise exactly the
//! same code. Each returns normally for any input; a panic, a hang or unbounded memory is the
//! defect being looked for.

use std::fmt::Write;

use crate::decode::MAX_INST_WORDS;
use crate::launch::{run_dispatch, Dispatch};
use crate::memory::Memory;
use crate::{decode, CodeCache, DecodeError};

/// Dwords of an input, little-endian; a last partial dword is zero-padded.
fn words_of(data: &[u8]) -> Vec<u32> {
    data.chunks(4)
        .map(|c| {
            let mut w = [0u8; 4];
            w[..c.len()].copy_from_slice(c);
            u32::from_le_bytes(w)
        })
        .collect()
}

/// Decodes the input as an instruction stream, printing every instruction decoded; checks
/// what the decoder promises about lengths.
pub fn decode_stream(data: &[u8]) {
    let words = words_of(data);
    let mut text = String::new();
    let mut at = 0;
    while at < words.len() {
        let rest = &words[at..];
        match decode(rest) {
            Ok(d) => {
                assert!(
                    (1..=MAX_INST_WORDS).contains(&d.words) && d.words <= rest.len(),
                    "decoded length {} with {} dwords left at dword {at}",
                    d.words,
                    rest.len()
                );
                text.clear();
                write!(text, "{}", d.inst).expect("formatting into a String");
                assert!(!text.is_empty(), "empty disassembly at dword {at}");
                at += d.words;
            }
            Err(DecodeError::Truncated { needed }) => {
                assert!(
                    needed > rest.len() && needed <= MAX_INST_WORDS,
                    "truncated with {needed} needed and {} left at dword {at}",
                    rest.len()
                );
                break;
            }
            Err(DecodeError::Undecodable { word }) => {
                assert_eq!(word, rest[0], "undecodable word at dword {at}");
                at += 1;
            }
        }
    }
}

/// GPU address of the fuzzed program.
pub const CODE_BASE: u64 = 0x1000_0000;
/// GPU address of the data the program can reach (its address is in `s[0:1]`).
pub const DATA_BASE: u64 = 0x2000_0000;
/// GPU address of the scratch ring.
pub const SCRATCH_BASE: u64 = 0x3000_0000;
const CODE_BYTES: usize = 16 << 10;
const DATA_BYTES: usize = 16 << 10;
const SCRATCH_BYTES: usize = 64 << 10;
/// Instructions one wave may execute: enough for short loops, small enough for speed.
pub const WAVE_STEPS: u64 = 2_000;
/// Bytes of an input that configure the dispatch, before the instruction words.
const HEADER_BYTES: usize = 24;
/// `s_endpgm`, placed after the fuzzed instructions so straight-line programs end.
const S_ENDPGM: u32 = 0xbfb0_0000;

/// Three small regions of host memory at fixed GPU addresses.
struct Regions {
    /// (GPU base, host bytes); `u64` words keep every region 8-byte aligned for atomics.
    regions: Vec<(u64, Box<[u64]>)>,
    /// Host address of each region, taken once so that no reference to the storage exists
    /// while the interpreter writes through the pointers.
    hosts: Vec<*mut u8>,
}

impl Regions {
    fn new(layout: &[(u64, usize)]) -> Self {
        let mut regions: Vec<(u64, Box<[u64]>)> = layout
            .iter()
            .map(|&(base, bytes)| (base, vec![0u64; bytes / 8].into_boxed_slice()))
            .collect();
        let hosts = regions
            .iter_mut()
            .map(|(_, r)| r.as_mut_ptr().cast::<u8>())
            .collect();
        Regions { regions, hosts }
    }

    /// The host bytes of region `i`, for filling before the dispatch.
    fn bytes_mut(&mut self, i: usize) -> &mut [u8] {
        let len = self.regions[i].1.len() * 8;
        // SAFETY: `hosts[i]` points to the `len` bytes of region `i`, which `&mut self`
        // borrows exclusively for the lifetime of the returned slice.
        unsafe { std::slice::from_raw_parts_mut(self.hosts[i], len) }
    }
}

// SAFETY: the raw pointers point into boxes this struct owns; the interpreter accesses the
// memory only through them, from the dispatch's threads, as it does GPU memory.
unsafe impl Sync for Regions {}

// SAFETY: `translate` returns pointers only into the regions' boxes, whole ranges inside
// one region; the boxes live as long as `self`, which outlives the dispatch borrowing it, and
// no reference to their contents exists while it runs (`bytes_mut` borrows end before).
unsafe impl Memory for Regions {
    fn translate(&self, addr: u64, len: u64) -> Option<*mut u8> {
        let end = addr.checked_add(len)?;
        self.regions
            .iter()
            .zip(&self.hosts)
            .find(|((base, r), _)| addr >= *base && end <= base + r.len() as u64 * 8)
            // SAFETY: the offset is inside region `base` (checked just above).
            .map(|((base, _), &host)| unsafe { host.add((addr - base) as usize) })
    }
}

fn le32(data: &[u8], at: usize) -> u32 {
    let mut w = [0u8; 4];
    for (i, b) in w.iter_mut().enumerate() {
        *b = data.get(at + i).copied().unwrap_or(0);
    }
    u32::from_le_bytes(w)
}

/// Runs the input as a wave program: its first bytes choose the launch registers (RSRC1/2/3,
/// work-items in the workgroup, user data), the rest are instruction words, followed by
/// `s_endpgm`. One workgroup of up to two waves, a small budget of steps, 16 KiB of data
/// (seeded from the input) and a scratch ring. Faults are expected; the outcome is only
/// formatted.
pub fn run_program(data: &[u8]) {
    let header = &data[..data.len().min(HEADER_BYTES)];
    let code = data.get(HEADER_BYTES..).unwrap_or(&[]);
    let mut mem = Regions::new(&[
        (CODE_BASE, CODE_BYTES),
        (DATA_BASE, DATA_BYTES),
        (SCRATCH_BASE, SCRATCH_BYTES),
    ]);
    let mut words = words_of(&code[..code.len().min(CODE_BYTES - 4)]);
    words.push(S_ENDPGM);
    for (dst, w) in mem.bytes_mut(0).chunks_exact_mut(4).zip(&words) {
        dst.copy_from_slice(&w.to_le_bytes());
    }
    // The data region repeats the input, so loads see varied values.
    for (dst, src) in mem.bytes_mut(1).iter_mut().zip(data.iter().cycle()) {
        *dst = *src;
    }
    let control = le32(header, 20);
    let mut user_data = [0u32; 16];
    user_data[0] = DATA_BASE as u32;
    user_data[1] = (DATA_BASE >> 32) as u32;
    for (i, u) in user_data.iter_mut().enumerate().skip(2) {
        *u = le32(header, 12 + 4 * (i % 2)) ^ (i as u32);
    }
    let d = Dispatch {
        code_entry: CODE_BASE,
        rsrc1: le32(header, 0),
        rsrc2: le32(header, 4),
        rsrc3: le32(header, 8),
        user_data,
        grid: [1, 1, 1],
        // 1..=64 work-items: one or two waves.
        block: [1 + (control & 63), 1, 1],
        scratch_base: SCRATCH_BASE,
        // WAVES = 2 slots of WAVESIZE = 128 x 256 bytes: SCRATCH_BYTES.
        tmpring_size: 2 | (128 << 12),
        shader_engines: 1,
        wave32: control & (1 << 6) == 0,
        max_steps: WAVE_STEPS,
        cancel: None,
    };
    let cache = CodeCache::new();
    let outcome = run_dispatch(&mem, &cache, &d);
    let mut text = String::new();
    match outcome {
        Ok(stats) => write!(text, "{stats:?}"),
        Err(fault) => write!(text, "{fault}"),
    }
    .expect("formatting into a String");
}
