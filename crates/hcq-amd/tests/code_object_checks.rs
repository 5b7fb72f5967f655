//! Regression tests for malformed code objects: each names the field at fault, its value and
//! the limit, and none allocates what a corrupt size field asks for. The objects are the
//! prebuilt demo library and a compiled one with relocations, edited at offsets read here.

use hcq_amd::{AmdDevice, AmdDriver};
use hcq_amd_sys::seam::Syscalls;
use hcq_core::{Arg, Error};
use hcq_emu::{EmuConfig, EmuKernel};
use std::sync::{Arc, OnceLock};

const DEMO: &[u8] = include_bytes!("../../hcq-cli/kernels/prebuilt/demo.gfx1100.hsaco");

const RELOCATED_SRC: &str = r#"
#define KERNEL extern "C" __attribute__((global))
__attribute__((device)) int table[4] = {10, 20, 30, 40};
__attribute__((device)) int* slots[2] = {&table[1], &table[3]};
KERNEL void pick(int* out, int i) { out[0] = *slots[i & 1]; }
KERNEL __attribute__((amdgpu_flat_work_group_size(1, 64))) void small_groups(int* out) {
  out[__builtin_amdgcn_workitem_id_x()] = 1;
}
"#;

fn device() -> &'static AmdDevice {
    static DEVICE: OnceLock<AmdDevice> = OnceLock::new();
    DEVICE.get_or_init(|| {
        let kernel: Arc<dyn Syscalls> = Arc::new(EmuKernel::new(EmuConfig {
            gpus: 1,
            max_steps: 1_000_000,
            vram_bytes: 1 << 30,
            ..EmuConfig::default()
        }));
        let driver = AmdDriver::new(kernel, "amd-emu", true).unwrap();
        AmdDevice::open(&driver, 0).unwrap()
    })
}

fn relocated() -> &'static [u8] {
    static OBJECT: OnceLock<Vec<u8>> = OnceLock::new();
    OBJECT.get_or_init(|| device().compile(RELOCATED_SRC).unwrap())
}

fn le(b: &[u8], at: usize, width: usize) -> u64 {
    let mut v = [0u8; 8];
    v[..width].copy_from_slice(&b[at..at + width]);
    u64::from_le_bytes(v)
}

fn put(b: &mut [u8], at: usize, width: usize, value: u64) {
    b[at..at + width].copy_from_slice(&value.to_le_bytes()[..width]);
}

/// File offset of program header `i`.
fn phdr(b: &[u8], i: usize) -> usize {
    le(b, 32, 8) as usize + i * 56
}

/// File offsets of the section headers of type `ty`.
fn sections(b: &[u8], ty: u64) -> Vec<usize> {
    let (shoff, shnum) = (le(b, 40, 8) as usize, le(b, 60, 2) as usize);
    (0..shnum)
        .map(|i| shoff + i * 64)
        .filter(|&s| le(b, s + 4, 4) == ty)
        .collect()
}

/// File offset of the `.dynsym` entry named `name`.
fn dynamic_symbol(b: &[u8], name: &str) -> usize {
    let s = sections(b, 11)[0];
    let strtab = le(b, 40, 8) as usize + le(b, s + 40, 4) as usize * 64;
    let strings = le(b, strtab + 24, 8) as usize;
    let (at, size) = (le(b, s + 24, 8) as usize, le(b, s + 32, 8) as usize);
    (at..at + size)
        .step_by(24)
        .find(|&e| {
            let n = strings + le(b, e, 4) as usize;
            b[n..].starts_with(name.as_bytes()) && b[n + name.len()] == 0
        })
        .unwrap()
}

/// File offset of `kernel`'s descriptor (in both objects the first segment maps the file at
/// its own addresses).
fn descriptor(b: &[u8], kernel: &str) -> usize {
    assert_eq!(le(b, phdr(b, 1) + 16, 8), le(b, phdr(b, 1) + 8, 8));
    le(b, dynamic_symbol(b, &format!("{kernel}.kd")) + 8, 8) as usize
}

fn load_error(object: &[u8], kernel: &str) -> Error {
    device().load_program(object, kernel).unwrap_err()
}

fn invalid(object: &[u8], kernel: &str, needles: &[&str]) {
    let e = load_error(object, kernel);
    assert!(matches!(e, Error::InvalidCodeObject(_)), "{e:?}");
    for n in needles {
        assert!(e.to_string().contains(n), "{n:?} missing from: {e}");
    }
}

fn demo_with(edit: impl FnOnce(&mut Vec<u8>)) -> Vec<u8> {
    let mut b = DEMO.to_vec();
    edit(&mut b);
    b
}

#[test]
fn the_unedited_objects_load() {
    device().load_program(DEMO, "add_i32").unwrap();
    device().load_program(relocated(), "pick").unwrap();
}

#[test]
fn an_image_span_past_the_limit_is_refused_before_anything_is_allocated() {
    // Segment 1 is the first PT_LOAD; a 4 GiB memory size, or an address near 2 GiB.
    let huge = demo_with(|b| put(b, phdr(DEMO, 1) + 40, 8, 1 << 32));
    invalid(
        &huge,
        "add_i32",
        &["segment 1", "p_memsz 0x100000000", "268435456"],
    );
    let far = demo_with(|b| put(b, phdr(DEMO, 4) + 16, 8, 0x8000_0000));
    invalid(&far, "add_i32", &["segment 4", "p_vaddr 0x80000000"]);
    let wraps = demo_with(|b| put(b, phdr(DEMO, 2) + 40, 8, u64::MAX - 8));
    invalid(&wraps, "add_i32", &["segment 2", "overflows"]);
}

#[test]
fn segments_must_lie_in_the_file_and_apart() {
    let outside = demo_with(|b| {
        let len = b.len() as u64;
        put(b, phdr(DEMO, 2) + 8, 8, len - 16)
    });
    invalid(
        &outside,
        "add_i32",
        &["segment 2", "outside the 13616-byte file"],
    );
    let bigger_in_file = demo_with(|b| put(b, phdr(DEMO, 3) + 32, 8, 0x1000));
    invalid(
        &bigger_in_file,
        "add_i32",
        &["segment 3", "exceeds its memory size"],
    );
    // Segment 2 (code) moved onto segment 1.
    let overlapping = demo_with(|b| put(b, phdr(DEMO, 2) + 16, 8, 0x2000));
    invalid(
        &overlapping,
        "add_i32",
        &["segments 1 and 2 overlap at 0x2000"],
    );
}

#[test]
fn the_header_must_be_an_amdhsa_shared_object() {
    invalid(&demo_with(|b| b[5] = 2), "add_i32", &["not little-endian"]);
    invalid(
        &demo_with(|b| b[7] = 0),
        "add_i32",
        &["OS/ABI 0 is not AMDHSA"],
    );
    // Type 1 (relocatable) goes to the linker, which refuses a linked object's sections.
    invalid(
        &demo_with(|b| put(b, 16, 2, 1)),
        "add_i32",
        &["relocatable object that ld.lld cannot link"],
    );
    invalid(&demo_with(|b| put(b, 16, 2, 2)), "add_i32", &["ELF type 2"]);
    invalid(
        &demo_with(|b| put(b, 18, 2, 62)),
        "add_i32",
        &["machine 62"],
    );
}

#[test]
fn the_descriptor_symbol_must_point_at_64_loaded_bytes() {
    let sym = dynamic_symbol(DEMO, "add_i32.kd");
    let misaligned = demo_with(|b| put(b, sym + 8, 8, 0x2444));
    invalid(&misaligned, "add_i32", &["0x2444", "64-byte aligned"]);
    let wrong_size = demo_with(|b| put(b, sym + 16, 8, 16));
    invalid(&wrong_size, "add_i32", &["add_i32.kd is 16 bytes"]);
    // Into bss (segment 3 has 0x70 file bytes at 0x4e00 and 0x200 in memory).
    let in_bss = demo_with(|b| put(b, sym + 8, 8, 0x4e80));
    invalid(
        &in_bss,
        "add_i32",
        &["0x4e80", "file bytes of a loaded segment"],
    );
    let undefined = demo_with(|b| put(b, sym + 6, 2, 0));
    invalid(&undefined, "add_i32", &["add_i32.kd is undefined"]);
}

/// The demo with `add_i32`'s descriptor edited.
fn demo_descriptor(edit: impl FnOnce(&mut [u8])) -> Vec<u8> {
    demo_with(|b| {
        let at = descriptor(b, "add_i32");
        edit(&mut b[at..at + 64])
    })
}

#[test]
fn the_entry_must_lie_in_loaded_code() {
    // 0x2440 + 0x14c0 = 0x3900, add_i32's code. Point it at the descriptors (not executable),
    // past the code, and before the image.
    for (offset, needle) in [
        (0x40i64, "offset 64"),
        (0x1c00, "offset 7168"),
        (-0x3000, "offset -12288"),
        (i64::MAX, "offset 9223372036854775807"),
    ] {
        let b = demo_descriptor(|d| d[16..24].copy_from_slice(&offset.to_le_bytes()));
        invalid(
            &b,
            "add_i32",
            &["kernel add_i32", needle, "outside the loaded code"],
        );
    }
    let b = demo_descriptor(|d| d[16..24].copy_from_slice(&0x14c4i64.to_le_bytes()));
    invalid(&b, "add_i32", &["0x3904 is not 256-byte aligned"]);
}

#[test]
fn segment_sizes_beyond_the_hardware_are_refused() {
    let b = demo_descriptor(|d| d[0..4].copy_from_slice(&65537u32.to_le_bytes()));
    invalid(&b, "add_i32", &["add_i32", "65537 bytes of LDS", "65536"]);
    let b = demo_descriptor(|d| d[0..4].copy_from_slice(&65536u32.to_le_bytes()));
    device().load_program(&b, "add_i32").unwrap();
    // Scratch: COMPUTE_TMPRING_SIZE.WAVESIZE gives a wave at most 8191 x 256 bytes, 65528
    // per work-item of a wave32; up to that the device grows its scratch ring.
    let b = demo_descriptor(|d| d[4..8].copy_from_slice(&65529u32.to_le_bytes()));
    invalid(
        &b,
        "add_i32",
        &[
            "add_i32",
            "65529 bytes of scratch",
            "at most 2096896 bytes, 65528 per work-item",
        ],
    );
    let b = demo_descriptor(|d| d[4..8].copy_from_slice(&65528u32.to_le_bytes()));
    device().load_program(&b, "add_i32").unwrap();
    let b = demo_descriptor(|d| d[4..8].copy_from_slice(&u32::MAX.to_le_bytes()));
    invalid(&b, "add_i32", &["4294967295 bytes of scratch"]);
    let b = demo_descriptor(|d| d[8..12].copy_from_slice(&u32::MAX.to_le_bytes()));
    invalid(
        &b,
        "add_i32",
        &[
            "4294967295-byte argument segment",
            "kernarg_size 4294967295",
            "at most",
        ],
    );
}

#[test]
fn descriptor_fields_are_checked_at_load() {
    let b = demo_descriptor(|d| d[40] = 1);
    invalid(&b, "add_i32", &["add_i32", "reserved bytes at offset 24"]);
    let b = demo_descriptor(|d| d[48] |= 0x3f);
    invalid(&b, "add_i32", &["add_i32", "512 VGPRs"]);
    let b = demo_descriptor(|d| d[54] |= 0x01);
    invalid(&b, "add_i32", &["compute_pgm_rsrc2.GRANULATED_LDS_SIZE"]);
    // Features this runtime does not provide are Unsupported rather than malformed.
    let b = demo_descriptor(|d| d[57] &= !0x04);
    let e = load_error(&b, "add_i32");
    assert!(
        matches!(e, Error::Unsupported(_)) && e.to_string().contains("wave64"),
        "{e}"
    );
    let b = demo_descriptor(|d| d[58] = 2);
    let e = load_error(&b, "add_i32");
    assert!(
        matches!(e, Error::Unsupported(_)) && e.to_string().contains("kernarg_preload"),
        "{e}"
    );
}

#[test]
fn a_broken_metadata_note_is_an_error_not_missing_metadata() {
    let note = sections(DEMO, 7)[0];
    let at = le(DEMO, note + 24, 8) as usize;
    // The note's descriptor size made larger than its section.
    let b = demo_with(|b| put(b, at + 4, 4, 0x10_0000));
    invalid(&b, "add_i32", &["note section"]);
    // The MessagePack cut off after its first byte.
    let b = demo_with(|b| b[at + 20..at + 0x1dd0 + 20].fill(0xc1));
    invalid(&b, "add_i32", &["metadata"]);
}

#[test]
fn relocations_must_stay_in_the_image_and_be_relative() {
    let rela = sections(relocated(), 4)[0];
    let first = le(relocated(), rela + 24, 8) as usize;
    let edit = |edit: &dyn Fn(&mut Vec<u8>)| {
        let mut b = relocated().to_vec();
        edit(&mut b);
        b
    };
    for offset in [0x10_0000, u64::MAX - 3, u64::MAX] {
        let b = edit(&|b| put(b, first, 8, offset));
        invalid(
            &b,
            "pick",
            &[
                "relocation 0 of .rela.dyn",
                &format!("0x{offset:x}"),
                "outside",
            ],
        );
    }
    let b = edit(&|b| put(b, first + 8, 8, 1));
    let e = load_error(&b, "pick");
    assert!(
        matches!(e, Error::Unsupported(_)) && e.to_string().contains("type 1"),
        "{e}"
    );
    let b = edit(&|b| put(b, rela + 4, 4, 9));
    let e = load_error(&b, "pick");
    assert!(
        matches!(e, Error::Unsupported(_)) && e.to_string().contains("SHT_REL"),
        "{e}"
    );
}

#[test]
fn relocations_are_applied() {
    let prg = device().load_program(relocated(), "pick").unwrap();
    let out = device().alloc(4).unwrap();
    for (i, want) in [(0, 20), (1, 40)] {
        device()
            .launch(
                &prg,
                &[Arg::Buffer(&out), Arg::I32(i)],
                |b| Ok(b.gpu_address()),
                [1, 1, 1],
                [1, 1, 1],
                true,
            )
            .unwrap();
        let mut got = [0u8; 4];
        device().copy_out(&mut got, &out, 0).unwrap();
        assert_eq!(i32::from_le_bytes(got), want);
    }
}

#[test]
fn a_workgroup_larger_than_the_kernel_was_compiled_for_is_refused() {
    let prg = device().load_program(relocated(), "small_groups").unwrap();
    assert_eq!(prg.max_workgroup_size, Some(64));
    let out = device().alloc(4 * 128).unwrap();
    let launch = |local| {
        device().launch(
            &prg,
            &[Arg::Buffer(&out)],
            |b| Ok(b.gpu_address()),
            [1, 1, 1],
            local,
            true,
        )
    };
    let e = launch([128, 1, 1]).unwrap_err();
    assert!(
        matches!(e, Error::InvalidArgument(_))
            && e.to_string().contains("at most 64 work-items")
            && e.to_string().contains("small_groups"),
        "{e}"
    );
    launch([64, 1, 1]).unwrap();
}

#[test]
fn kernel_arguments_never_land_outside_the_segment() {
    let prg = device().load_program(DEMO, "add_i32").unwrap();
    let buf = device().alloc(64).unwrap();
    let args = [
        Arg::Buffer(&buf),
        Arg::Buffer(&buf),
        Arg::Buffer(&buf),
        Arg::I32(7),
    ];
    // A segment shorter than the metadata's layout: an error, and nothing past its end.
    let mut backing = [0xaau8; 64];
    let (seg, guard) = backing.split_at_mut(16);
    let e = prg
        .write_kernargs(&args, |b| Ok(b.gpu_address()), [1, 1, 1], [1, 1, 1], seg)
        .unwrap_err();
    assert!(
        matches!(e, Error::InvalidArgument(_))
            && e.to_string().contains("16-byte argument segment"),
        "{e}"
    );
    assert!(guard.iter().all(|&x| x == 0xaa));
}
