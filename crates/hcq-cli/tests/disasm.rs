//! `hcq disasm` against LLVM. On the kernel suite, the demo, benchmark and ML kernels, a
//! relocatable object and the checked-in objects: its listing equals `llvm-objdump-19 -d`'s
//! line for line (symbols, instructions, addresses, encodings, branch targets); each kernel's
//! header states what `llvm-readelf-19 --notes` reads from the metadata; its occupancy is what
//! LLVM's own compiler reports (`; Occupancy:` in `clang -S`). HIP source given directly is
//! compiled and listed the same as its object.
//!
//! And on every code object the whole test suite builds: `scripts/test.sh` runs the suite with
//! its compile cache (`HCQ_CACHE_DIR`) in a fresh directory and `HCQ_TEST_OBJECTS` naming
//! another, where the tests that build objects outside the cache put them, then runs the
//! ignored test here, which compares the instruction lines of every function of each of those
//! objects (and of every checked-in one) with llvm-objdump's.

#![cfg(target_os = "linux")]

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// Kernels whose occupancy is below the 16 wave slots: one limited by its registers, two by
/// their LDS (with different workgroup sizes).
const OCCUPANCY_SRC: &str = r#"
#define KERNEL extern "C" __attribute__((global))
// Many live values: a fully unrolled 96-element accumulator per work-item.
KERNEL void many_vgprs(const float* in, float* out, int n) {
  int g = __builtin_amdgcn_workgroup_id_x() * 64 + __builtin_amdgcn_workitem_id_x();
  float acc[96];
#pragma unroll
  for (int i = 0; i < 96; i++) acc[i] = in[(g + i * 7) % n];
#pragma unroll
  for (int r = 0; r < 4; r++)
#pragma unroll
    for (int i = 0; i < 96; i++) acc[i] = acc[i] * acc[(i + r + 1) % 96] + 1.0f;
  float s = 0;
#pragma unroll
  for (int i = 0; i < 96; i++) s += acc[i];
  out[g] = s;
}
// 40 KiB of LDS per workgroup of at most 256 work-items.
KERNEL __attribute__((amdgpu_flat_work_group_size(1, 256))) void big_lds(float* out) {
  __attribute__((shared)) float tile[10240];
  int t = __builtin_amdgcn_workitem_id_x();
  for (int i = t; i < 10240; i += 256) tile[i] = i;
  __builtin_amdgcn_s_barrier();
  out[t] = tile[(t * 37) % 10240];
}
// 20 KiB of LDS, workgroups of at most 64.
KERNEL __attribute__((amdgpu_flat_work_group_size(1, 64))) void mid_lds(float* out) {
  __attribute__((shared)) float tile[5120];
  int t = __builtin_amdgcn_workitem_id_x();
  for (int i = t; i < 5120; i += 64) tile[i] = i;
  __builtin_amdgcn_s_barrier();
  out[t] = tile[(t * 37) % 5120];
}
"#;

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn run(program: &str, args: &[&str]) -> Output {
    let o = Command::new(program)
        .args(args)
        .env_remove("HCQ_DEVICE")
        .output()
        .unwrap_or_else(|e| {
            panic!("{program} could not run ({e}); scripts/test.sh installs LLVM 19")
        });
    assert!(
        o.status.success(),
        "{program} {args:?}: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    o
}

fn text(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn hcq(args: &[&str]) -> String {
    text(&run(env!("CARGO_BIN_EXE_hcq"), args))
}

/// The kernels' metadata as llvm-readelf prints it: per kernel, its `.key: value` pairs.
fn metadata(object: &str) -> Vec<HashMap<String, String>> {
    let notes = text(&run("llvm-readelf-19", &["--notes", object]));
    let mut kernels: Vec<HashMap<String, String>> = Vec::new();
    let mut inside = false;
    for line in notes.lines() {
        if line.starts_with("amdhsa.kernels:") {
            inside = true;
            continue;
        }
        if !inside {
            continue;
        }
        if !line.starts_with(' ') {
            inside = false;
            continue;
        }
        let item = line.strip_prefix("  - ");
        if item.is_some() {
            kernels.push(HashMap::new());
        }
        // Keys of the kernel's own map: at four spaces, or right after the item's dash.
        let entry = item.or_else(|| line.strip_prefix("    ").filter(|l| !l.starts_with(' ')));
        if let (Some(entry), Some(k)) = (entry, kernels.last_mut()) {
            if let Some((key, value)) = entry.split_once(':') {
                k.insert(key.trim().to_string(), value.trim().to_string());
            }
        }
    }
    kernels
}

/// LLVM's `; Occupancy: N` for each kernel of `source`.
fn llvm_occupancy(source: &Path) -> HashMap<String, u32> {
    let mut args: Vec<String> = hcq_amd::compiler::base_flags("gfx1100");
    args.extend(["-S", "-o", "-"].map(String::from));
    args.push(source.to_str().unwrap().to_string());
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let asm = text(&run("clang-19", &args));
    let mut out = HashMap::new();
    let mut function = None;
    for line in asm.lines() {
        // A function's label: `name:` at the start of a line, perhaps with a `; @name` comment.
        if let Some((label, rest)) = line.split_once(':') {
            let rest = rest.trim_start();
            if !label.is_empty()
                && !label.starts_with(['.', ' ', '\t', ';'])
                && !label.contains(char::is_whitespace)
                && (rest.is_empty() || rest.starts_with(';'))
            {
                function = Some(label.to_string());
            }
        }
        if let (Some(n), Some(f)) = (line.trim().strip_prefix("; Occupancy: "), &function) {
            out.insert(f.clone(), n.trim().parse().unwrap());
        }
    }
    out
}

/// `llvm-objdump -d` without its preamble (file name, format, section title).
fn objdump(object: &str) -> String {
    let all = text(&run("llvm-objdump-19", &["-d", "--mcpu=gfx1100", object]));
    let at = all
        .find("Disassembly of section .text:\n\n")
        .expect("a .text listing");
    all[at + "Disassembly of section .text:\n\n".len()..].to_string()
}

/// What llvm-objdump reads for `object`: the object itself, or for a relocatable one
/// (`clang -c`), the code object the runtime's loader links from it (`hcq disasm` lists the
/// same), written next to it.
fn linked_for_llvm(object: &Path) -> PathBuf {
    let bytes = std::fs::read(object).unwrap();
    if !hcq_amd::program::is_relocatable_amdgpu(&bytes) {
        return object.to_path_buf();
    }
    let linked = hcq_amd::compiler::HipCompiler::new("gfx1100", hcq_core::CompileCache::disabled())
        .link_relocatable(&bytes)
        .unwrap_or_else(|e| panic!("{}: {e}", object.display()));
    let path = object.with_extension("linked.hsaco");
    std::fs::write(&path, linked).unwrap();
    path
}

/// Compiles OpenCL to a relocatable object (`clang -c`, not linked).
fn relocatable_object(dir: &Path) -> PathBuf {
    let (source, object) = (dir.join("relocatable.cl"), dir.join("relocatable.o"));
    std::fs::write(&source, OPENCL_SRC).unwrap();
    run(
        "clang-19",
        &[
            "-x",
            "cl",
            "-cl-std=CL2.0",
            "--target=amdgcn-amd-amdhsa",
            "-mcpu=gfx1100",
            "-nogpulib",
            "-O2",
            "-c",
            source.to_str().unwrap(),
            "-o",
            object.to_str().unwrap(),
        ],
    );
    object
}

/// A kernel with a loop, for the relocatable object (builtins only: no device library is
/// linked).
const OPENCL_SRC: &str = r#"
kernel void sum_rows(global float* out, global const float* in, int n) {
  int row = __builtin_amdgcn_workgroup_id_x() * 64 + __builtin_amdgcn_workitem_id_x();
  float s = 0;
  for (int i = 0; i < n; i++) s += in[row * n + i];
  out[row] = s;
}
"#;

#[test]
fn listings_match_llvm_objdump_and_headers_match_the_metadata() {
    let dir = tempfile::tempdir().unwrap();
    let root = repo();
    let mut objects: Vec<(PathBuf, Option<PathBuf>)> = vec![
        (
            root.join("crates/hcq-cli/kernels/prebuilt/demo.gfx1100.hsaco"),
            None,
        ),
        (root.join("crates/rdna3/tests/kernels/kernels.hsaco"), None),
        (root.join("crates/rdna3/tests/kernels/ftz.hsaco"), None),
        (
            root.join("crates/hcq-emu/tests/kernels/kernels.hsaco"),
            None,
        ),
        (relocatable_object(dir.path()), None),
    ];
    for sub in ["crates/hcq-cli/kernels", "kernels/suite", "kernels/ml"] {
        let mut sources: Vec<PathBuf> = std::fs::read_dir(root.join(sub))
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|p| p.extension().is_some_and(|x| x == "hip"))
            .collect();
        sources.sort();
        for src in sources {
            let name = format!(
                "{}-{}.hsaco",
                sub.replace('/', "-"),
                src.file_stem().unwrap().to_str().unwrap()
            );
            let out = dir.path().join(name);
            hcq(&[
                "compile",
                src.to_str().unwrap(),
                "-o",
                out.to_str().unwrap(),
            ]);
            objects.push((out, Some(src)));
        }
    }
    let occupancy_src = dir.path().join("occupancy.hip");
    std::fs::write(&occupancy_src, OCCUPANCY_SRC).unwrap();
    let occupancy_obj = dir.path().join("occupancy.hsaco");
    hcq(&[
        "compile",
        occupancy_src.to_str().unwrap(),
        "-o",
        occupancy_obj.to_str().unwrap(),
    ]);
    objects.push((occupancy_obj, Some(occupancy_src)));
    assert!(objects.len() >= 15, "only {} objects", objects.len());
    let mut kernels_checked = 0;
    let mut occupancies_checked = std::collections::BTreeSet::new();
    for (object, source) in &objects {
        let path = object.to_str().unwrap();
        let ours = hcq(&["disasm", path]);
        let listing: String = ours
            .lines()
            .filter(|l| !l.starts_with(';'))
            .map(|l| format!("{l}\n"))
            .collect();
        let linked = linked_for_llvm(object);
        let theirs = objdump(linked.to_str().unwrap());
        for (k, (a, b)) in listing.lines().zip(theirs.lines()).enumerate() {
            assert_eq!(a, b, "{path}: line {k} differs from llvm-objdump");
        }
        assert_eq!(
            listing.lines().count(),
            theirs.lines().count(),
            "{path}: listing length"
        );
        let occupancy = source.as_deref().map(llvm_occupancy);
        for meta in metadata(linked.to_str().unwrap()) {
            let name = &meta[".name"];
            // The header names the kernel as its source does (`ns::scale`, not its symbol).
            let source_name = hcq_amd::program::source_name(name)
                .map_or_else(|| name.to_string(), |(qualified, _)| qualified);
            let header: Vec<&str> = ours
                .split(&format!("; kernel {source_name}: wave32\n"))
                .nth(1)
                .unwrap_or_else(|| panic!("{path}: no header for {name}"))
                .lines()
                .take_while(|l| l.starts_with(';'))
                .collect();
            let header = header.join("\n");
            for (key, wording) in [
                (".vgpr_count", "VGPRs {}"),
                (".sgpr_count", "SGPRs {}"),
                (".group_segment_fixed_size", "LDS {} bytes"),
                (".private_segment_fixed_size", "scratch {} bytes"),
                (".kernarg_segment_size", "kernel arguments {} bytes"),
                (".max_flat_workgroup_size", "at most {} work-items"),
            ] {
                let want = wording.replace("{}", &meta[key]);
                assert!(
                    header.contains(&want),
                    "{path}: {name}: {want:?} missing from\n{header}"
                );
            }
            if let Some(llvm) = occupancy.as_ref().and_then(|o| o.get(name.as_str())) {
                let want = format!("occupancy {llvm} waves per SIMD");
                assert!(
                    header.contains(&want),
                    "{path}: {name}: LLVM says {llvm}:\n{header}"
                );
                occupancies_checked.insert(*llvm);
            }
            kernels_checked += 1;
        }
        if let Some(src) = source {
            assert_eq!(
                hcq(&["disasm", src.to_str().unwrap()]),
                ours,
                "{}: the source's listing",
                src.display()
            );
        }
    }
    assert!(kernels_checked >= 50, "only {kernels_checked} kernels");
    // Limited by VGPRs (9), by LDS (6 and 3), and by the wave slots (16).
    assert_eq!(
        occupancies_checked.into_iter().collect::<Vec<_>>(),
        vec![3, 6, 9, 16]
    );
}

#[test]
fn one_kernel_and_clear_errors() {
    let demo = repo().join("crates/hcq-cli/kernels/prebuilt/demo.gfx1100.hsaco");
    let demo = demo.to_str().unwrap();
    let one = hcq(&["disasm", demo, "--kernel", "mul_f32"]);
    assert!(one.starts_with("; kernel mul_f32: wave32\n"), "{one}");
    assert_eq!(one.matches(">:\n").count(), 1, "{one}");
    let o = Command::new(env!("CARGO_BIN_EXE_hcq"))
        .args(["disasm", demo, "--kernel", "nope"])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        !o.status.success()
            && err.contains("no function named \"nope\"")
            && err.contains("add_f32"),
        "{err}"
    );
    let dir = tempfile::tempdir().unwrap();
    let junk = dir.path().join("junk.hsaco");
    std::fs::write(&junk, b"\x7fELF\x02\x01\x01 not really").unwrap();
    let o = Command::new(env!("CARGO_BIN_EXE_hcq"))
        .args(["disasm", junk.to_str().unwrap()])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(!o.status.success() && err.contains("ELF"), "{err}");
}

/// C++ kernels: overloads of one name, and one in a namespace.
const MANGLED_SRC: &str = r#"
__global__ void scale(float* x, float a, int n) { int i = threadIdx.x; if (i < n) x[i] *= a; }
__global__ void scale(double* x, double a, int n) { int i = threadIdx.x; if (i < n) x[i] *= a; }
namespace ns { __global__ void shift(int* x, int by) { x[threadIdx.x] += by; } }
"#;

/// `hcq disasm`'s output and error text, succeeding or not.
fn hcq_disasm(args: &[&str]) -> (bool, String, String) {
    let o = Command::new(env!("CARGO_BIN_EXE_hcq"))
        .arg("disasm")
        .args(args)
        .env_remove("HCQ_DEVICE")
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr).into_owned();
    (o.status.success(), text(&o), err)
}

#[test]
fn kernels_are_found_and_headed_by_their_source_names() {
    let dir = tempfile::tempdir().unwrap();
    let source = dir.path().join("mangled.hip");
    std::fs::write(&source, MANGLED_SRC).unwrap();
    let source = source.to_str().unwrap();
    // As the runtime finds a kernel: by its mangled symbol, or by the name the source gives it
    // when that names one kernel.
    for name in ["shift", "ns::shift", "_ZN2ns5shiftEPii"] {
        let (ok, out, err) = hcq_disasm(&[source, "--kernel", name]);
        assert!(ok, "{name}: {err}");
        assert!(
            out.starts_with("; kernel ns::shift: wave32\n"),
            "{name}: {out}"
        );
        assert_eq!(out.matches(">:\n").count(), 1, "{out}");
        assert!(out.contains(" <_ZN2ns5shiftEPii>:\n"), "{out}");
    }
    let (ok, out, err) = hcq_disasm(&[source, "--kernel", "_Z5scalePffi"]);
    assert!(
        ok && out.starts_with("; kernel scale: wave32\n"),
        "{out}{err}"
    );
    // Two kernels named `scale`: an error naming both.
    let (ok, _, err) = hcq_disasm(&[source, "--kernel", "scale"]);
    assert!(
        !ok && err.contains("ambiguous")
            && err.contains("_Z5scalePffi")
            && err.contains("_Z5scalePddi"),
        "{err}"
    );
    // Another target's machine code is not RDNA3's.
    let (ok, _, err) = hcq_disasm(&[source, "--arch", "gfx1030"]);
    assert!(!ok && err.contains("gfx1030"), "{err}");
}

/// The code objects `scripts/test.sh` kept from a whole run of the suite.
mod suite_objects {
    use super::*;
    use hcq_amd::program::is_relocatable_amdgpu;
    use sha2::{Digest, Sha256};
    use std::collections::HashSet;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Mutex;
    use std::time::Instant;

    /// `EF_AMDGPU_MACH` of gfx1100, the target the suite compiles for: its objects must all
    /// be listed (objects for other targets, which `hcq disasm` refuses, are counted apart).
    const MACH_GFX1100: u8 = 0x41;
    const EM_AMDGPU: u16 = 224;

    /// Where an object came from, for the report.
    struct Found {
        origin: String,
        bytes: Vec<u8>,
    }

    /// The object in a compile-cache entry, as hcq-core's cache writes one: `HCQCACHE`, format
    /// version (u32), payload length (u64), payload SHA-256; the payload is the number of input
    /// files (u32), each as path length (u32), path and SHA-256, then the object. `None` for a
    /// file that is not an entry.
    fn cached_object(entry: &[u8]) -> Option<Result<Vec<u8>, String>> {
        const FORMAT_READ_HERE: u32 = 2;
        let rest = entry.strip_prefix(b"HCQCACHE")?;
        let u32_at = |b: &[u8], at: usize| {
            b.get(at..at + 4)
                .map(|w| u32::from_le_bytes(w.try_into().unwrap()))
        };
        let read = || -> Result<Vec<u8>, String> {
            let version = u32_at(rest, 0).ok_or("truncated")?;
            if version != FORMAT_READ_HERE {
                return Err(format!(
                    "entry format {version}; this test reads format {FORMAT_READ_HERE} (update \
                     it with hcq-core's cache layout)"
                ));
            }
            let payload = rest.get(4 + 8 + 32..).ok_or("truncated")?;
            let mut at = 4;
            for _ in 0..u32_at(payload, 0).ok_or("truncated")? {
                at += 4 + u32_at(payload, at).ok_or("truncated")? as usize + 32;
            }
            Ok(payload.get(at..).ok_or("truncated")?.to_vec())
        };
        Some(read())
    }

    /// Every file under `dir`, recursively (none when it does not exist).
    fn files_under(dir: &Path) -> Vec<PathBuf> {
        let mut files = Vec::new();
        let Ok(entries) = std::fs::read_dir(dir) else {
            return files;
        };
        for entry in entries.flatten() {
            let path = entry.path();
            if path.is_dir() {
                files.extend(files_under(&path));
            } else {
                files.push(path);
            }
        }
        files.sort();
        files
    }

    /// The objects under `dir`: compile-cache entries and ELF files.
    fn objects_under(dir: &Path, origin: &str) -> Vec<Found> {
        let mut found = Vec::new();
        for path in files_under(dir) {
            let bytes = std::fs::read(&path).unwrap();
            let name = format!("{origin} {}", path.display());
            let bytes = match cached_object(&bytes) {
                Some(object) => object.unwrap_or_else(|e| panic!("{name}: {e}")),
                None if bytes.starts_with(b"\x7fELF") => bytes,
                None => continue,
            };
            found.push(Found {
                origin: name,
                bytes,
            });
        }
        found
    }

    /// The checked-in code objects (`*.hsaco` under `crates/` and `kernels/`).
    fn checked_in() -> Vec<Found> {
        let root = repo();
        ["crates", "kernels"]
            .iter()
            .flat_map(|sub| files_under(&root.join(sub)))
            .filter(|p| p.extension().is_some_and(|e| e == "hsaco"))
            .map(|p| Found {
                origin: format!("checked in {}", p.display()),
                bytes: std::fs::read(&p).unwrap(),
            })
            .collect()
    }

    /// A directory the suite was told to fill, from its environment variable.
    fn suite_dir(variable: &str) -> PathBuf {
        match std::env::var_os(variable) {
            Some(dir) if dir != "off" && !dir.is_empty() => PathBuf::from(dir),
            _ => panic!(
                "{variable} is not set: this test checks the objects a run of the whole suite \
                 left there; scripts/test.sh runs it so"
            ),
        }
    }

    /// `(function, instruction lines)` of a listing, in order. LLVM's notes after an
    /// instruction's encoding (` ; Warning: ...`, which our listing does not print) are cut.
    fn functions_of(listing: &str) -> Vec<(String, Vec<String>)> {
        let mut functions: Vec<(String, Vec<String>)> = Vec::new();
        for line in listing.lines() {
            let label = line
                .strip_suffix(">:")
                .and_then(|l| l.split_once(" <"))
                .filter(|(address, _)| address.len() == 16);
            if let Some((_, name)) = label {
                functions.push((name.to_string(), Vec::new()));
            } else if let (Some(text), Some(f)) = (line.strip_prefix('\t'), functions.last_mut()) {
                let encoding = text.find("// ").unwrap_or(0);
                let end = text[encoding..]
                    .find(" ; ")
                    .map_or(text.len(), |note| encoding + note);
                f.1.push(text[..end].to_string());
            }
        }
        functions
    }

    /// What comparing one object found.
    enum Outcome {
        /// Every instruction line of every function agreed: (functions, instructions).
        Same(usize, usize),
        /// Built for another target, which `hcq disasm` refuses: the target it names.
        OtherTarget(String),
        /// The first difference.
        Differs(String),
    }

    /// Whether `bytes` is an AMDGPU ELF object (a Metal library, say, is not).
    fn is_amdgpu(bytes: &[u8]) -> bool {
        bytes.len() > 52
            && bytes.starts_with(b"\x7fELF")
            && bytes[18..20] == EM_AMDGPU.to_le_bytes()
    }

    fn compare(found: &Found, dir: &Path, n: usize) -> Outcome {
        let bytes = &found.bytes;
        let extension = if is_relocatable_amdgpu(bytes) {
            "o"
        } else {
            "hsaco"
        };
        let path = dir.join(format!("{n}.{extension}"));
        std::fs::write(&path, bytes).unwrap();
        let path_text = path.to_str().unwrap();
        let (ok, ours, err) = hcq_disasm(&[path_text]);
        let mach = bytes[48];
        if !ok {
            let target = err
                .split_once("is built for ")
                .and_then(|(_, rest)| rest.split(';').next());
            if let Some(target) = target.filter(|_| mach != MACH_GFX1100) {
                return Outcome::OtherTarget(target.to_string());
            }
            return Outcome::Differs(format!("hcq disasm refuses it: {err}"));
        }
        let theirs = objdump(linked_for_llvm(&path).to_str().unwrap());
        let (ours, theirs) = (functions_of(&ours), functions_of(&theirs));
        let names = |f: &[(String, Vec<String>)]| f.iter().map(|(n, _)| n.clone()).collect();
        let (our_names, their_names): (Vec<String>, Vec<String>) = (names(&ours), names(&theirs));
        if our_names != their_names {
            return Outcome::Differs(format!(
                "functions: ours {our_names:?}, llvm-objdump's {their_names:?}"
            ));
        }
        let mut instructions = 0;
        for ((function, our_lines), (_, their_lines)) in ours.iter().zip(&theirs) {
            for k in 0..our_lines.len().max(their_lines.len()) {
                let (a, b) = (our_lines.get(k), their_lines.get(k));
                if a != b {
                    return Outcome::Differs(format!(
                        "function {function}, instruction line {k}:\n  hcq disasm:   {}\n  \
                         llvm-objdump: {}",
                        a.map_or("(none)", String::as_str),
                        b.map_or("(none)", String::as_str)
                    ));
                }
            }
            instructions += our_lines.len();
        }
        Outcome::Same(ours.len(), instructions)
    }

    #[test]
    #[ignore = "scripts/test.sh runs it after the whole suite has filled HCQ_CACHE_DIR and \
                HCQ_TEST_OBJECTS"]
    fn every_object_the_suite_built_disassembles_as_llvm_objdump_does() {
        let started = Instant::now();
        let cache = objects_under(&suite_dir("HCQ_CACHE_DIR"), "cache entry");
        let built = objects_under(&suite_dir("HCQ_TEST_OBJECTS"), "built by a test:");
        assert!(
            !cache.is_empty(),
            "HCQ_CACHE_DIR holds no code object: the suite ran with another cache"
        );
        let sources = [cache.len(), built.len()];
        let mut seen = HashSet::new();
        let (objects, not_amdgpu): (Vec<Found>, Vec<Found>) = cache
            .into_iter()
            .chain(built)
            .chain(checked_in())
            .filter(|f| seen.insert(Sha256::digest(&f.bytes)))
            .partition(|f| is_amdgpu(&f.bytes));
        let dir = tempfile::tempdir().unwrap();
        let next = AtomicUsize::new(0);
        let outcomes = Mutex::new(Vec::new());
        // Two at a time: the machines that run the suite have two cores.
        std::thread::scope(|scope| {
            for _ in 0..2 {
                scope.spawn(|| loop {
                    let n = next.fetch_add(1, Ordering::Relaxed);
                    let Some(found) = objects.get(n) else { break };
                    let outcome = compare(found, dir.path(), n);
                    outcomes.lock().unwrap().push((n, outcome));
                });
            }
        });
        let mut outcomes = outcomes.into_inner().unwrap();
        outcomes.sort_by_key(|(n, _)| *n);
        let (mut checked, mut functions, mut instructions) = (0, 0, 0);
        let mut other_targets = Vec::new();
        let mut differences = Vec::new();
        for (n, outcome) in outcomes {
            match outcome {
                Outcome::Same(f, i) => {
                    checked += 1;
                    functions += f;
                    instructions += i;
                }
                Outcome::OtherTarget(why) => other_targets.push(why),
                Outcome::Differs(what) => {
                    // Kept, for `hcq disasm` and llvm-objdump to be run on it again.
                    let kept = std::env::temp_dir().join(format!(
                        "hcq-disasm-mismatch-{}-{n}.{}",
                        std::process::id(),
                        if is_relocatable_amdgpu(&objects[n].bytes) {
                            "o"
                        } else {
                            "hsaco"
                        }
                    ));
                    let _ = std::fs::write(&kept, &objects[n].bytes);
                    differences.push(format!(
                        "{} (saved as {}): {what}",
                        objects[n].origin,
                        kept.display()
                    ));
                }
            }
        }
        eprintln!(
            "checked {checked} code objects ({} cache entries, {} built by tests, the rest \
             checked in; {} duplicates): {functions} functions, {instructions} instructions, \
             in {:.1} s; objects for other targets, refused as expected: {other_targets:?}; \
             files not AMDGPU code objects: {}",
            sources[0],
            sources[1],
            sources[0] + sources[1] + checked_in().len() - seen.len(),
            started.elapsed().as_secs_f64(),
            not_amdgpu.len()
        );
        assert!(
            differences.is_empty(),
            "{} of {} objects differ; the first: {}",
            differences.len(),
            objects.len(),
            differences[0]
        );
    }
}
