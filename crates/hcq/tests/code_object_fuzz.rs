//! Deterministic mutation fuzzing of code objects: truncations, random flips, and values aimed
//! at every field the loader reads (ELF and program headers, section headers, dynamic and
//! relocation entries, symbols, the metadata note and its MessagePack, the kernel descriptor).
//! Every case must load to `Ok` or a typed error, and every object that loads must launch to
//! `Ok` or a typed error: no panic, no hang, no huge allocation because a size field says so.
//!
//! A case whose kernel makes a GPU memory fault ends the device for its process, as on Linux;
//! the next case gets a new emulated GPU (a new emulated kernel: a new process).
//!
//! Its own process: it sets the wait timeout before the devices open, and it watches every host
//! allocation through its own global allocator.

use hcq::{Arg, Buffer, Device, Error};
use hcq_amd::{AmdDevice, AmdDriver};
use hcq_amd_sys::seam::Syscalls;
use hcq_emu::{EmuConfig, EmuKernel};
use rmpv::Value;
use std::alloc::{GlobalAlloc, Layout, System};
use std::panic::AssertUnwindSafe;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

const DEMO: &[u8] = include_bytes!("../../hcq-cli/kernels/prebuilt/demo.gfx1100.hsaco");

/// A kernel whose global pointer table needs `R_AMDGPU_RELATIVE64` relocations.
const RELOCATED_SRC: &str = r#"
#define KERNEL extern "C" __attribute__((global))
__attribute__((device)) int table[4] = {10, 20, 30, 40};
__attribute__((device)) int* slots[2] = {&table[1], &table[3]};
KERNEL void pick(int* out, int i) { out[0] = *slots[i & 1]; }
"#;

/// No single host allocation of a case may reach this: the objects are a few KiB, so anything
/// near it was sized by a field of the object.
const ALLOCATION_LIMIT: usize = 256 << 20;
/// A case slower than this counts as a hang.
const CASE_TIME_LIMIT: Duration = Duration::from_secs(5);

/// The system allocator, remembering the largest request since the last reset.
struct WatchedAllocator;

static LARGEST_ALLOCATION: AtomicUsize = AtomicUsize::new(0);

// SAFETY: every method forwards to `System` with the caller's own arguments; the bookkeeping is
// one atomic and does not allocate.
unsafe impl GlobalAlloc for WatchedAllocator {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        LARGEST_ALLOCATION.fetch_max(layout.size(), Ordering::Relaxed);
        // SAFETY: the caller's contract for `alloc` is passed on unchanged.
        unsafe { System.alloc(layout) }
    }
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        LARGEST_ALLOCATION.fetch_max(layout.size(), Ordering::Relaxed);
        // SAFETY: as for `alloc`.
        unsafe { System.alloc_zeroed(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: `ptr` came from `System` with this layout (every allocation goes there).
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        LARGEST_ALLOCATION.fetch_max(new_size, Ordering::Relaxed);
        // SAFETY: as for `dealloc`; the new size is the caller's.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static ALLOCATOR: WatchedAllocator = WatchedAllocator;

/// SplitMix64: small, fast and the same sequence everywhere.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }
}

fn le(bytes: &[u8], at: usize, width: usize) -> u64 {
    let mut v = [0u8; 8];
    v[..width].copy_from_slice(&bytes[at..at + width]);
    u64::from_le_bytes(v)
}

/// A field of the object: where it is and how wide.
#[derive(Clone)]
struct Field {
    name: String,
    at: usize,
    width: usize,
}

/// The layout of a well-formed little-endian ELF64, read here by offsets (independently of
/// the loader's ELF library) to aim mutations.
struct Layout64 {
    fields: Vec<Field>,
    /// Offsets where a truncation is interesting: starts and ends of every structure.
    boundaries: Vec<usize>,
    /// File offset and length of the metadata note's descriptor (its MessagePack).
    metadata: (usize, usize),
    /// File offset of the target kernel's descriptor.
    descriptor: usize,
}

fn field(fields: &mut Vec<Field>, name: String, at: usize, width: usize) {
    fields.push(Field { name, at, width });
}

fn c_string(bytes: &[u8], at: usize) -> String {
    let end = bytes[at..].iter().position(|&b| b == 0).unwrap() + at;
    String::from_utf8_lossy(&bytes[at..end]).into_owned()
}

fn layout(elf: &[u8], kernel: &str) -> Layout64 {
    let mut f = Vec::new();
    let mut b = vec![0, 1, 4, 16, 63, 64, elf.len() - 1];
    for (name, at, width) in [
        ("e_ident.class", 4, 1),
        ("e_ident.data", 5, 1),
        ("e_ident.osabi", 7, 1),
        ("e_type", 16, 2),
        ("e_machine", 18, 2),
        ("e_version", 20, 4),
        ("e_entry", 24, 8),
        ("e_phoff", 32, 8),
        ("e_shoff", 40, 8),
        ("e_flags", 48, 4),
        ("e_ehsize", 52, 2),
        ("e_phentsize", 54, 2),
        ("e_phnum", 56, 2),
        ("e_shentsize", 58, 2),
        ("e_shnum", 60, 2),
        ("e_shstrndx", 62, 2),
    ] {
        field(&mut f, name.to_string(), at, width);
    }
    let phoff = le(elf, 32, 8) as usize;
    let phnum = le(elf, 56, 2) as usize;
    let mut loads = Vec::new();
    for i in 0..phnum {
        let p = phoff + i * 56;
        b.extend([p, p + 56]);
        for (name, at, width) in [
            ("p_type", 0, 4),
            ("p_flags", 4, 4),
            ("p_offset", 8, 8),
            ("p_vaddr", 16, 8),
            ("p_filesz", 32, 8),
            ("p_memsz", 40, 8),
            ("p_align", 48, 8),
        ] {
            field(&mut f, format!("phdr[{i}].{name}"), p + at, width);
        }
        let (offset, vaddr, filesz) = (le(elf, p + 8, 8), le(elf, p + 16, 8), le(elf, p + 32, 8));
        b.extend([offset as usize, (offset + filesz) as usize]);
        if le(elf, p, 4) == 1 {
            loads.push((offset, vaddr, filesz));
        }
    }
    let file_offset_of = |vaddr: u64| {
        loads
            .iter()
            .find(|&&(_, v, n)| vaddr >= v && vaddr < v + n)
            .map(|&(o, v, _)| (o + vaddr - v) as usize)
            .unwrap()
    };
    let shoff = le(elf, 40, 8) as usize;
    let shnum = le(elf, 60, 2) as usize;
    let shstr = shoff + le(elf, 62, 2) as usize * 64;
    let shstr_at = le(elf, shstr + 24, 8) as usize;
    let mut metadata = (0, 0);
    let mut descriptor = None;
    for i in 0..shnum {
        let s = shoff + i * 64;
        let name = c_string(elf, shstr_at + le(elf, s, 4) as usize);
        b.extend([s, s + 64]);
        for (fname, at, width) in [
            ("sh_name", 0, 4),
            ("sh_type", 4, 4),
            ("sh_addr", 16, 8),
            ("sh_offset", 24, 8),
            ("sh_size", 32, 8),
            ("sh_link", 40, 4),
            ("sh_info", 44, 4),
            ("sh_addralign", 48, 8),
            ("sh_entsize", 56, 8),
        ] {
            field(&mut f, format!("{name}.{fname}"), s + at, width);
        }
        let (ty, offset, size) = (le(elf, s + 4, 4), le(elf, s + 24, 8), le(elf, s + 32, 8));
        let (offset, size) = (offset as usize, size as usize);
        if ty != 8 {
            b.extend([offset, offset + size / 2, offset + size]);
        }
        let entries = |n: usize| (0..size / n).map(move |k| offset + k * n);
        match ty {
            // SHT_SYMTAB, SHT_DYNSYM: every field of the kernel's own symbols, the value of
            // the others.
            2 | 11 => {
                let strtab = shoff + le(elf, s + 40, 4) as usize * 64;
                let strtab_at = le(elf, strtab + 24, 8) as usize;
                for e in entries(24) {
                    let sym = c_string(elf, strtab_at + le(elf, e, 4) as usize);
                    let own = sym == kernel || sym == format!("{kernel}.kd");
                    if sym == format!("{kernel}.kd") {
                        descriptor = Some(file_offset_of(le(elf, e + 8, 8)));
                    }
                    let all: &[(&str, usize, usize)] = &[
                        ("st_name", 0, 4),
                        ("st_info", 4, 1),
                        ("st_shndx", 6, 2),
                        ("st_value", 8, 8),
                        ("st_size", 16, 8),
                    ];
                    for &(fname, at, width) in if own { all } else { &all[3..4] } {
                        field(&mut f, format!("{name}[{sym}].{fname}"), e + at, width);
                    }
                }
            }
            // SHT_RELA
            4 => {
                for (k, e) in entries(24).enumerate() {
                    for (fname, at) in [("r_offset", 0), ("r_info", 8), ("r_addend", 16)] {
                        field(&mut f, format!("{name}[{k}].{fname}"), e + at, 8);
                    }
                }
            }
            // SHT_DYNAMIC
            6 => {
                for (k, e) in entries(16).enumerate() {
                    field(&mut f, format!("{name}[{k}].d_tag"), e, 8);
                    field(&mut f, format!("{name}[{k}].d_val"), e + 8, 8);
                }
            }
            // SHT_NOTE: the first note is the metadata.
            7 => {
                for (fname, at) in [("namesz", 0), ("descsz", 4), ("type", 8)] {
                    field(&mut f, format!("note.{fname}"), offset + at, 4);
                }
                let namesz = le(elf, offset, 4) as usize;
                let desc = offset + 12 + namesz.next_multiple_of(4);
                metadata = (desc, le(elf, offset + 4, 4) as usize);
                b.extend([desc, desc + 1, desc + metadata.1 / 3]);
            }
            _ => {}
        }
    }
    let descriptor = descriptor.expect("the kernel has a descriptor symbol");
    b.extend([descriptor, descriptor + 32, descriptor + 63]);
    for (name, at, width) in [
        ("group_segment_fixed_size", 0, 4),
        ("private_segment_fixed_size", 4, 4),
        ("kernarg_size", 8, 4),
        ("reserved0", 12, 4),
        ("kernel_code_entry_byte_offset", 16, 8),
        ("reserved1", 24, 8),
        ("reserved1b", 36, 8),
        ("compute_pgm_rsrc3", 44, 4),
        ("compute_pgm_rsrc1", 48, 4),
        ("compute_pgm_rsrc2", 52, 4),
        ("kernel_code_properties", 56, 2),
        ("kernarg_preload", 58, 2),
        ("reserved3", 60, 4),
    ] {
        field(&mut f, format!("kd.{name}"), descriptor + at, width);
    }
    b.retain(|&x| x <= elf.len());
    b.sort_unstable();
    b.dedup();
    Layout64 {
        fields: f,
        boundaries: b,
        metadata,
        descriptor,
    }
}

/// Values worth writing into a field of `width` bytes that holds `orig`.
fn interesting_values(orig: u64, width: usize, file_len: usize, rng: &mut Rng) -> Vec<u64> {
    let mask = if width == 8 {
        u64::MAX
    } else {
        (1u64 << (8 * width)) - 1
    };
    let mut v = vec![
        0,
        1,
        mask,
        mask >> 1,
        (mask >> 1) + 1,
        orig.wrapping_add(1),
        orig.wrapping_sub(1),
        orig.wrapping_add(64),
        orig ^ (1 << rng.below(8 * width)),
        file_len as u64,
        file_len as u64 + 1,
        0xffff_fff0,
        1 << 31,
        1 << 32,
        1 << 40,
        (1 << 63) | orig,
        rng.next(),
    ];
    for x in v.iter_mut() {
        *x &= mask;
    }
    v.retain(|&x| x != orig);
    v.sort_unstable();
    v.dedup();
    v
}

/// One mutated object.
struct Case {
    label: String,
    bytes: Vec<u8>,
}

fn with_field(base: &[u8], f: &Field, value: u64) -> Vec<u8> {
    let mut b = base.to_vec();
    b[f.at..f.at + f.width].copy_from_slice(&value.to_le_bytes()[..f.width]);
    b
}

/// The metadata MessagePack of `elf`, decoded.
fn metadata(elf: &[u8], l: &Layout64) -> Value {
    let mut desc = &elf[l.metadata.0..l.metadata.0 + l.metadata.1];
    rmpv::decode::read_value(&mut desc).unwrap()
}

/// `elf` with its metadata replaced by `encoded` (which must fit where the old one was; the
/// note keeps its size, and the decoder stops after the first value).
fn with_metadata_bytes(elf: &[u8], l: &Layout64, encoded: &[u8]) -> Option<Vec<u8>> {
    if encoded.len() > l.metadata.1 {
        return None;
    }
    let mut b = elf.to_vec();
    let desc = &mut b[l.metadata.0..l.metadata.0 + l.metadata.1];
    desc[..encoded.len()].copy_from_slice(encoded);
    // Trailing bytes are nils: harmless if a decoder looked at them.
    desc[encoded.len()..].fill(0xc0);
    Some(b)
}

fn with_metadata(elf: &[u8], l: &Layout64, v: &Value) -> Option<Vec<u8>> {
    let mut encoded = Vec::new();
    rmpv::encode::write_value(&mut encoded, v).unwrap();
    with_metadata_bytes(elf, l, &encoded)
}

fn map_get_mut<'v>(v: &'v mut Value, key: &str) -> Option<&'v mut Value> {
    match v {
        Value::Map(m) => m
            .iter_mut()
            .find(|(k, _)| k.as_str() == Some(key))
            .map(|(_, v)| v),
        _ => None,
    }
}

fn map_remove(v: &mut Value, key: &str) {
    if let Value::Map(m) = v {
        m.retain(|(k, _)| k.as_str() != Some(key));
    }
}

/// Metadata holding only `kernel` (so that re-encoded variants fit in the note).
fn only_kernel(root: &Value, kernel: &str) -> Value {
    let mut root = root.clone();
    let kernels = map_get_mut(&mut root, "amdhsa.kernels").unwrap();
    if let Value::Array(list) = kernels {
        list.retain(|k| {
            k.as_map()
                .and_then(|m| m.iter().find(|(k, _)| k.as_str() == Some(".name")))
                .and_then(|(_, v)| v.as_str())
                == Some(kernel)
        });
    }
    root
}

/// Structured mutations of the metadata: wrong types, missing keys, out-of-range numbers.
fn metadata_cases(elf: &[u8], l: &Layout64, kernel: &str) -> Vec<Case> {
    let root = only_kernel(&metadata(elf, l), kernel);
    let mut out = Vec::new();
    let mut push = |label: String, v: Value| {
        if let Some(bytes) = with_metadata(elf, l, &v) {
            out.push(Case {
                label: format!("metadata: {label}"),
                bytes,
            });
        }
    };
    push("only the kernel".into(), root.clone());
    let numbers = [
        Value::from(-1),
        Value::from(i64::MIN),
        Value::from(u64::MAX),
        Value::from(1u64 << 32),
        Value::from((1u64 << 32) + 8),
        Value::from(1u64 << 40),
        Value::from(0xffff_fff0u64),
        Value::from(0),
        Value::from(3),
        Value::from("8"),
        Value::from(2.5),
        Value::Nil,
        Value::Boolean(true),
        Value::Array(vec![]),
        Value::Map(vec![]),
        Value::Binary(vec![1, 2]),
        Value::Ext(1, vec![0; 4]),
    ];
    // Kernel-level keys (of a GPU kernel's metadata).
    for key in [
        ".name",
        ".symbol",
        ".kernarg_segment_size",
        ".kernarg_segment_align",
        ".args",
        ".max_flat_workgroup_size",
        ".group_segment_fixed_size",
        ".private_segment_fixed_size",
        ".wavefront_size",
    ] {
        let mut r = root.clone();
        map_remove(kernel_entry(&mut r), key);
        push(format!("no {key}"), r);
        for n in &numbers {
            let mut r = root.clone();
            let k = kernel_entry(&mut r);
            if let Some(slot) = map_get_mut(k, key) {
                *slot = n.clone();
            } else if let Value::Map(m) = k {
                m.push((Value::from(key), n.clone()));
            }
            push(format!("{key} = {n}"), r);
        }
    }
    // Argument-level keys of every argument.
    let arg_count = {
        let mut r = root.clone();
        let k = kernel_entry(&mut r);
        map_get_mut(k, ".args")
            .and_then(|a| a.as_array().map(Vec::len))
            .unwrap_or(0)
    };
    for i in 0..arg_count {
        for key in [".offset", ".size", ".value_kind", ".name", ".address_space"] {
            let edit = |f: &dyn Fn(&mut Value)| {
                let mut r = root.clone();
                let k = kernel_entry(&mut r);
                if let Some(Value::Array(args)) = map_get_mut(k, ".args") {
                    f(&mut args[i]);
                }
                r
            };
            push(
                format!("args[{i}] without {key}"),
                edit(&|a| map_remove(a, key)),
            );
            for n in &numbers {
                push(
                    format!("args[{i}].{key} = {n}"),
                    edit(&|a| {
                        if let Some(slot) = map_get_mut(a, key) {
                            *slot = n.clone();
                        }
                    }),
                );
            }
            if key == ".value_kind" {
                for kind in [
                    "global_buffer",
                    "by_value",
                    "hidden_block_count_x",
                    "hidden_group_size_z",
                    "hidden_grid_dims",
                    "hidden_",
                    "hidden_hostcall_buffer",
                    "dynamic_shared_pointer",
                    "image",
                    "",
                ] {
                    push(
                        format!("args[{i}].value_kind = {kind}"),
                        edit(&|a| {
                            if let Some(slot) = map_get_mut(a, key) {
                                *slot = Value::from(kind);
                            }
                        }),
                    );
                }
            }
        }
        // Overlap with the previous argument.
        if i > 0 {
            let mut r = root.clone();
            let k = kernel_entry(&mut r);
            if let Some(Value::Array(args)) = map_get_mut(k, ".args") {
                let prev = map_get_mut(&mut args[i - 1], ".offset").unwrap().clone();
                *map_get_mut(&mut args[i], ".offset").unwrap() = prev;
            }
            push(format!("args[{i}] overlaps args[{}]", i - 1), r);
        }
    }
    // The whole list and the root.
    for (label, v) in [
        ("root is an array", Value::Array(vec![root.clone()])),
        ("root is nil", Value::Nil),
        ("root is a string", Value::from("amdhsa.kernels")),
    ] {
        push(label.into(), v);
    }
    for n in &numbers {
        let mut r = root.clone();
        *map_get_mut(&mut r, "amdhsa.kernels").unwrap() = n.clone();
        push(format!("amdhsa.kernels = {n}"), r);
    }
    {
        let mut r = root.clone();
        if let Some(Value::Array(list)) = map_get_mut(&mut r, "amdhsa.kernels") {
            let k = list[0].clone();
            list.push(k);
        }
        push("kernel listed twice".into(), r);
    }
    // Hostile encodings: nesting past any sane depth, and lengths the data cannot back.
    let mut raw: Vec<(&str, Vec<u8>)> = vec![
        ("nested arrays", vec![0x91; l.metadata.1]),
        ("nested maps", [0x81, 0xa1, b'k'].repeat(l.metadata.1 / 3)),
        ("array of 2^32-1", vec![0xdd, 0xff, 0xff, 0xff, 0xff]),
        ("map of 2^32-1", vec![0xdf, 0xff, 0xff, 0xff, 0xff]),
        ("string of 2^32-1", vec![0xdb, 0xff, 0xff, 0xff, 0xff]),
        ("binary of 2^32-1", vec![0xc6, 0xff, 0xff, 0xff, 0xff]),
        ("empty", vec![]),
    ];
    let mut header = vec![0x81, 0xae];
    header.extend(b"amdhsa.kernels");
    header.extend([0xdd, 0xff, 0xff, 0xff, 0xff]);
    raw.push(("kernel list of 2^32-1", header));
    for (label, bytes) in raw {
        let mut b = elf.to_vec();
        let desc = &mut b[l.metadata.0..l.metadata.0 + l.metadata.1];
        let n = bytes.len().min(desc.len());
        desc[..n].copy_from_slice(&bytes[..n]);
        out.push(Case {
            label: format!("metadata: {label}"),
            bytes: b,
        });
    }
    out
}

/// The one kernel of metadata made by [`only_kernel`].
fn kernel_entry(root: &mut Value) -> &mut Value {
    match map_get_mut(root, "amdhsa.kernels") {
        Some(Value::Array(list)) => &mut list[0],
        _ => unreachable!("only_kernel keeps a list of one"),
    }
}

fn cases(elf: &[u8], kernel: &str, seed: u64) -> Vec<Case> {
    let l = layout(elf, kernel);
    let mut rng = Rng(seed);
    let mut out = vec![Case {
        label: "unchanged".into(),
        bytes: elf.to_vec(),
    }];
    // Truncations at every boundary and its neighbours.
    for &at in &l.boundaries {
        for cut in [at.saturating_sub(1), at, at + 1] {
            if cut < elf.len() {
                out.push(Case {
                    label: format!("truncated to {cut} bytes"),
                    bytes: elf[..cut].to_vec(),
                });
            }
        }
    }
    // Values aimed at each field.
    for f in &l.fields {
        let orig = le(elf, f.at, f.width);
        for v in interesting_values(orig, f.width, elf.len(), &mut rng) {
            out.push(Case {
                label: format!("{} = 0x{v:x} (was 0x{orig:x})", f.name),
                bytes: with_field(elf, f, v),
            });
        }
    }
    // Every single bit of the kernel descriptor.
    for bit in 0..512 {
        let mut b = elf.to_vec();
        b[l.descriptor + bit / 8] ^= 1 << (bit % 8);
        out.push(Case {
            label: format!("descriptor bit {bit} flipped"),
            bytes: b,
        });
    }
    // Random bytes and words anywhere.
    for round in 0..300 {
        let mut b = elf.to_vec();
        let flips = 1 + rng.below(8);
        for _ in 0..flips {
            let at = rng.below(b.len());
            b[at] ^= 1 + rng.below(255) as u8;
        }
        out.push(Case {
            label: format!("random bytes, round {round} ({flips} flips)"),
            bytes: b,
        });
    }
    for round in 0..200 {
        let mut b = elf.to_vec();
        let width = [2usize, 4, 8][rng.below(3)];
        let at = rng.below(b.len() / width) * width;
        let v = rng.next();
        b[at..at + width].copy_from_slice(&v.to_le_bytes()[..width]);
        out.push(Case {
            label: format!("random word at {at}, round {round}"),
            bytes: b,
        });
    }
    // Random bytes inside the metadata.
    for round in 0..200 {
        let mut b = elf.to_vec();
        for _ in 0..1 + rng.below(4) {
            let at = l.metadata.0 + rng.below(l.metadata.1);
            b[at] = rng.next() as u8;
        }
        out.push(Case {
            label: format!("random metadata bytes, round {round}"),
            bytes: b,
        });
    }
    out.extend(metadata_cases(elf, &l, kernel));
    out
}

/// A kernel to fuzz: its object, its name, how to launch it, and what a correct run gives.
struct Target<'a> {
    name: &'a str,
    object: Vec<u8>,
    kernel: &'a str,
    seed: u64,
    run: &'a dyn Fn(&Rig, &hcq::Program) -> hcq::Result<Vec<i32>>,
    expected: Vec<i32>,
}

/// A device of its own emulated kernel and the buffers the launches use.
struct Rig {
    dev: Device,
    bufs: Vec<Buffer>,
}

impl Rig {
    fn new() -> Rig {
        let kernel: Arc<dyn Syscalls> = Arc::new(EmuKernel::new(EmuConfig {
            gpus: 1,
            max_steps: 20_000,
            vram_bytes: 1 << 30,
            ..EmuConfig::default()
        }));
        let driver = AmdDriver::new(kernel, "amd-emu", true).unwrap();
        let dev = Device::from_amd(AmdDevice::open(&driver, 0).unwrap());
        let bufs = (0..3).map(|_| dev.alloc(64 * 4).unwrap()).collect();
        Rig { dev, bufs }
    }
}

/// Whether `e` ended the device (a GPU memory fault: KFD stops the process's queues).
fn ends_the_device(e: &Error) -> bool {
    match e {
        Error::DeviceLost { .. } => true,
        Error::DeviceFault { message, .. } => message.contains("stopped this process's queues"),
        _ => false,
    }
}

/// How a case ended.
#[derive(Default, Debug)]
struct Tally {
    /// Cases after which the device was replaced.
    devices_lost: usize,
    loaded: usize,
    load_errors: std::collections::BTreeMap<String, usize>,
    launch_ok: usize,
    launch_errors: std::collections::BTreeMap<String, usize>,
}

fn kind(e: &Error) -> String {
    let s = format!("{e:?}");
    s.split(['(', ' ', '{']).next().unwrap_or("").to_string()
}

#[test]
fn malformed_code_objects_give_typed_errors() {
    // Set before the device opens (this process has only this test).
    std::env::set_var("HCQ_WAIT_TIMEOUT_MS", "3000");
    let started = Instant::now();
    let mut rig = Rig::new();
    let relocated = rig.dev.compile(RELOCATED_SRC).unwrap();

    let a: Vec<i32> = (0..64).collect();
    let b: Vec<i32> = (0..64).map(|x| 1000 * x).collect();
    let add_i32 = |rig: &Rig, p: &hcq::Program| -> hcq::Result<Vec<i32>> {
        let bufs = &rig.bufs;
        bufs[0].write(&[0i32; 64])?;
        bufs[1].write(&a)?;
        bufs[2].write(&b)?;
        p.launch_timed(
            &[
                Arg::Buffer(&bufs[0]),
                Arg::Buffer(&bufs[1]),
                Arg::Buffer(&bufs[2]),
                Arg::I32(64),
            ],
            [2, 1, 1],
            [32, 1, 1],
        )?;
        bufs[0].read()
    };
    let pick = |rig: &Rig, p: &hcq::Program| -> hcq::Result<Vec<i32>> {
        let bufs = &rig.bufs;
        bufs[0].write(&[0i32; 64])?;
        p.launch_timed(&[Arg::Buffer(&bufs[0]), Arg::I32(1)], [1, 1, 1], [1, 1, 1])?;
        Ok(bufs[0].read::<i32>()?[..1].to_vec())
    };
    let targets = [
        Target {
            name: "demo",
            object: DEMO.to_vec(),
            kernel: "add_i32",
            seed: 0x00c0_ffee,
            run: &add_i32,
            expected: (0..64).map(|x| 1001 * x).collect(),
        },
        Target {
            name: "relocated",
            object: relocated,
            kernel: "pick",
            seed: 0x0bad_c0de,
            run: &pick,
            expected: vec![40],
        },
    ];

    // HCQ_FUZZ_VERBOSE=1 prints every error, to review the messages.
    let verbose = std::env::var_os("HCQ_FUZZ_VERBOSE").is_some();
    let mut failures = Vec::new();
    let mut total = 0;
    for t in &targets {
        let cases = cases(&t.object, t.kernel, t.seed);
        let mut tally = Tally::default();
        let mut pristine = rig.dev.program(&t.object, t.kernel).unwrap();
        assert_eq!((t.run)(&rig, &pristine).unwrap(), t.expected, "{}", t.name);
        for (i, case) in cases.iter().enumerate() {
            total += 1;
            LARGEST_ALLOCATION.store(0, Ordering::Relaxed);
            let case_start = Instant::now();
            let outcome = std::panic::catch_unwind(AssertUnwindSafe(|| {
                match rig.dev.program(&case.bytes, t.kernel) {
                    Ok(p) => Ok(Some((t.run)(&rig, &p))),
                    Err(e) => Err(e),
                }
            }));
            let took = case_start.elapsed();
            let where_ = format!("{} case {i} ({})", t.name, case.label);
            match outcome {
                Err(_) => failures.push(format!("{where_}: panicked")),
                Ok(Err(e)) => {
                    if verbose {
                        eprintln!("{where_}: load: {e}");
                    }
                    if !matches!(e, Error::InvalidCodeObject(_) | Error::Unsupported(_)) {
                        failures.push(format!("{where_}: load gave {e:?}"));
                    }
                    *tally.load_errors.entry(kind(&e)).or_default() += 1;
                }
                Ok(Ok(launch)) => {
                    tally.loaded += 1;
                    match launch {
                        Some(Ok(_)) => tally.launch_ok += 1,
                        Some(Err(e)) => {
                            if verbose {
                                eprintln!("{where_}: launch: {e}");
                            }
                            if matches!(e, Error::Timeout { .. } | Error::Driver { .. }) {
                                failures.push(format!("{where_}: launch gave {e:?}"));
                            }
                            *tally.launch_errors.entry(kind(&e)).or_default() += 1;
                            if ends_the_device(&e) {
                                tally.devices_lost += 1;
                                rig = Rig::new();
                                pristine = rig.dev.program(&t.object, t.kernel).unwrap();
                            }
                        }
                        None => {}
                    }
                }
            }
            if took > CASE_TIME_LIMIT {
                failures.push(format!("{where_}: took {took:?}"));
            }
            let largest = LARGEST_ALLOCATION.load(Ordering::Relaxed);
            if largest >= ALLOCATION_LIMIT {
                failures.push(format!("{where_}: allocated {largest} bytes at once"));
            }
            // The device still runs the pristine kernel correctly.
            if i % 256 == 255 {
                assert_eq!(
                    (t.run)(&rig, &pristine).unwrap(),
                    t.expected,
                    "{} after case {i}",
                    t.name
                );
            }
        }
        eprintln!("{}: {} cases, {tally:?}", t.name, cases.len());
        assert_eq!((t.run)(&rig, &pristine).unwrap(), t.expected, "{}", t.name);
    }
    eprintln!("{total} cases in {:?}", started.elapsed());
    assert!(
        failures.is_empty(),
        "{} of {total} cases failed:\n{}",
        failures.len(),
        failures.join("\n")
    );
}
