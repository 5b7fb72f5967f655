//! Checks the decoder against LLVM on every instruction of every code object we have: the
//! kernel suite (`kernels/suite/*.hip`) and `crates/hcq-cli/kernels/demo.hip`, compiled here with clang-19,
//! plus the checked-in objects (the rdna3 test fixture, the prebuilt demo).
//!
//! `.text` is walked with our decoder from its first byte to its last; every instruction must
//! start where `llvm-objdump-19 -d --mcpu=gfx1100` starts one, have the same length, and print
//! the same text (mnemonic and operands) once whitespace is normalised and LLVM's trailing
//! `// address: words` comment and `<symbol+offset>` branch annotation are removed.
//!
//! The LLVM tools are required: a missing clang-19 or llvm-objdump-19 fails the test (the test
//! script installs them).

// The compile flags come from hcq-amd, which only Linux builds.
#![cfg(target_os = "linux")]

use std::path::{Path, PathBuf};
use std::process::Command;

use rdna3::decode::decode;

const CLANG: &str = "clang-19";
const OBJDUMP: &str = "llvm-objdump-19";
const LLVM_MC: &str = "llvm-mc-19";

fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// Fails with a clear message when an LLVM tool is not installed.
fn require_tool(name: &str) {
    match Command::new(name).arg("--version").output() {
        Ok(out) if out.status.success() => {}
        Ok(out) => panic!(
            "`{name} --version` failed ({}); install LLVM 19 (scripts/test.sh does: \
             apt-get install clang-19 lld-19 llvm-19)",
            out.status
        ),
        Err(e) => panic!(
            "{name} is required by this test but could not be run ({e}); install LLVM 19 \
             (scripts/test.sh does: apt-get install clang-19 lld-19 llvm-19)"
        ),
    }
}

/// A directory under the system temp dir, removed on drop.
struct TempDir(PathBuf);

impl TempDir {
    fn new() -> Self {
        let path = std::env::temp_dir().join(format!(
            "rdna3-llvm-objdump-{}-{}",
            std::process::id(),
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_nanos())
        ));
        std::fs::create_dir_all(&path).expect("create temp dir");
        TempDir(path)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn compile(src: &Path, out: &Path) -> Result<(), String> {
    // The runtime's flags, so the objects checked here are the ones it would load.
    let output = Command::new(CLANG)
        .args(hcq_amd::compiler::base_flags("gfx1100"))
        .arg("-o")
        .arg(out)
        .arg(src)
        .output()
        .map_err(|e| format!("running {CLANG}: {e}"))?;
    if output.status.success() {
        Ok(())
    } else {
        Err(format!(
            "{CLANG} failed on {}:\n{}",
            src.display(),
            String::from_utf8_lossy(&output.stderr)
        ))
    }
}

/// Compiles every source into `dir`, two at a time (the machines have few cores).
fn compile_all(sources: &[PathBuf], dir: &Path) -> Vec<PathBuf> {
    let outputs: Vec<PathBuf> = sources
        .iter()
        .map(|src| {
            let stem = src.file_stem().and_then(|s| s.to_str()).unwrap_or("object");
            dir.join(format!("{stem}.o"))
        })
        .collect();
    let jobs: Vec<(&PathBuf, &PathBuf)> = sources.iter().zip(&outputs).collect();
    let next = std::sync::atomic::AtomicUsize::new(0);
    let errors = std::sync::Mutex::new(Vec::new());
    std::thread::scope(|scope| {
        for _ in 0..2 {
            scope.spawn(|| loop {
                let i = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                let Some((src, out)) = jobs.get(i) else {
                    break;
                };
                if let Err(e) = compile(src, out) {
                    errors.lock().unwrap().push(e);
                }
            });
        }
    });
    let errors = errors.into_inner().unwrap();
    assert!(errors.is_empty(), "{}", errors.join("\n"));
    outputs
}

/// Assembles `src` (one instruction per line) with llvm-mc into an object at `out`.
fn assemble(src: &Path, out: &Path) {
    let output = Command::new(LLVM_MC)
        .args(["-arch=amdgcn", "-mcpu=gfx1100", "-filetype=obj", "-o"])
        .arg(out)
        .arg(src)
        .output()
        .unwrap_or_else(|e| panic!("running {LLVM_MC}: {e}"));
    assert!(
        output.status.success(),
        "{LLVM_MC} failed on {}:\n{}",
        src.display(),
        String::from_utf8_lossy(&output.stderr)
    );
}

fn read_u16(bytes: &[u8], at: usize) -> Option<u16> {
    Some(u16::from_le_bytes(bytes.get(at..at + 2)?.try_into().ok()?))
}
fn read_u32(bytes: &[u8], at: usize) -> Option<u32> {
    Some(u32::from_le_bytes(bytes.get(at..at + 4)?.try_into().ok()?))
}
fn read_u64(bytes: &[u8], at: usize) -> Option<u64> {
    Some(u64::from_le_bytes(bytes.get(at..at + 8)?.try_into().ok()?))
}

/// The `.text` section of an ELF64 object: its address and its bytes.
fn text_section(elf: &[u8]) -> Option<(u64, &[u8])> {
    if elf.get(..4)? != b"\x7fELF" || *elf.get(4)? != 2 {
        return None;
    }
    let shoff = read_u64(elf, 0x28)? as usize;
    let shentsize = usize::from(read_u16(elf, 0x3a)?);
    let shnum = usize::from(read_u16(elf, 0x3c)?);
    let shstrndx = usize::from(read_u16(elf, 0x3e)?);
    let header = |i: usize| shoff + i * shentsize;
    let strtab = read_u64(elf, header(shstrndx) + 0x18)? as usize;
    for i in 0..shnum {
        let h = header(i);
        let name_at = strtab + read_u32(elf, h)? as usize;
        let name = elf.get(name_at..)?.split(|&b| b == 0).next()?;
        if name == b".text" {
            let addr = read_u64(elf, h + 0x10)?;
            let offset = read_u64(elf, h + 0x18)? as usize;
            let size = read_u64(elf, h + 0x20)? as usize;
            return Some((addr, elf.get(offset..offset + size)?));
        }
    }
    None
}

/// One instruction line of llvm-objdump's output.
struct LlvmInst {
    address: u64,
    words: usize,
    text: String,
}

fn normalise(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// Runs llvm-objdump on `object` and parses its instruction lines.
fn llvm_disassembly(object: &Path) -> Vec<LlvmInst> {
    let output = Command::new(OBJDUMP)
        .args(["-d", "--disassemble-zeroes", "--mcpu=gfx1100"])
        .arg(object)
        .output()
        .unwrap_or_else(|e| panic!("running {OBJDUMP}: {e}"));
    assert!(
        output.status.success(),
        "{OBJDUMP} failed on {}:\n{}",
        object.display(),
        String::from_utf8_lossy(&output.stderr)
    );
    let stdout = String::from_utf8_lossy(&output.stdout);
    let mut insts = Vec::new();
    for line in stdout.lines() {
        // Instruction lines: `\tTEXT  // ADDRESS: WORD WORD [<symbol+off>]`.
        let Some((text, comment)) = line.split_once("//") else {
            continue;
        };
        let comment = comment.split('<').next().unwrap_or("");
        let Some((address, words)) = comment.split_once(':') else {
            continue;
        };
        let Ok(address) = u64::from_str_radix(address.trim(), 16) else {
            continue;
        };
        let words = words.split_whitespace().count();
        insts.push(LlvmInst {
            address,
            words,
            text: normalise(text),
        });
    }
    insts
}

/// Compares our decoding of `object`'s `.text` with LLVM's; returns (instructions, mismatches).
fn compare_object(object: &Path) -> (usize, Vec<String>) {
    let name = object.display().to_string();
    let elf = std::fs::read(object).unwrap_or_else(|e| panic!("reading {name}: {e}"));
    let (base, text) = text_section(&elf).unwrap_or_else(|| panic!("{name}: no .text section"));
    let words: Vec<u32> = text
        .chunks_exact(4)
        .map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]]))
        .collect();
    let llvm = llvm_disassembly(object);
    assert!(!llvm.is_empty(), "{name}: llvm-objdump printed nothing");
    let mut mismatches = Vec::new();
    let mut pc = 0usize; // in dwords
    let mut count = 0;
    for inst in &llvm {
        let expected_pc = base + 4 * pc as u64;
        if inst.address != expected_pc {
            mismatches.push(format!(
                "{name}: boundary: LLVM has `{}` at {:#x}, our walk is at {expected_pc:#x}",
                inst.text, inst.address
            ));
            // Resynchronise on LLVM's boundary to keep comparing.
            pc = ((inst.address.saturating_sub(base)) / 4) as usize;
        }
        count += 1;
        let window = &words[pc.min(words.len())..];
        match decode(window) {
            Ok(decoded) => {
                let ours = normalise(&decoded.inst.to_string());
                if decoded.words != inst.words {
                    mismatches.push(format!(
                        "{name}+{:#x}: length {} (LLVM {}) for `{}` (ours `{ours}`)",
                        inst.address - base,
                        decoded.words,
                        inst.words,
                        inst.text
                    ));
                }
                if ours != inst.text {
                    mismatches.push(format!(
                        "{name}+{:#x}:\n    llvm: {}\n    ours: {ours}",
                        inst.address - base,
                        inst.text
                    ));
                }
                pc += decoded.words;
            }
            Err(e) => {
                mismatches.push(format!(
                    "{name}+{:#x}: `{}` does not decode: {e:?}",
                    inst.address - base,
                    inst.text
                ));
                pc += inst.words.max(1);
            }
        }
    }
    if pc != words.len() {
        mismatches.push(format!(
            "{name}: walk ended at dword {pc} of {} in .text",
            words.len()
        ));
    }
    (count, mismatches)
}

#[test]
fn every_instruction_matches_llvm_objdump() {
    require_tool(CLANG);
    require_tool(OBJDUMP);
    require_tool(LLVM_MC);
    let root = repo_root();
    let mut sources: Vec<PathBuf> = std::fs::read_dir(root.join("kernels/suite"))
        .expect("kernels/suite")
        .filter_map(|entry| entry.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|e| e == "hip"))
        .collect();
    sources.sort();
    assert!(
        sources.len() >= 10,
        "expected the 10 suite sources, found {}",
        sources.len()
    );
    sources.push(root.join("crates/hcq-cli/kernels/demo.hip"));
    let dir = TempDir::new();
    let mut objects = compile_all(&sources, &dir.0);
    objects.push(root.join("crates/rdna3/tests/kernels/kernels.hsaco"));
    objects.push(root.join("crates/hcq-cli/kernels/prebuilt/demo.gfx1100.hsaco"));
    // Hand-written instructions of every format, with the operand forms compilers rarely emit.
    let formats = dir.0.join("formats.o");
    assemble(&root.join("crates/rdna3/tests/kernels/formats.s"), &formats);
    objects.push(formats);

    let mut total = 0;
    let mut mismatches = Vec::new();
    for object in &objects {
        let (count, found) = compare_object(object);
        assert!(count > 0, "{}: no instructions", object.display());
        total += count;
        mismatches.extend(found);
    }
    assert!(total > 1000, "only {total} instructions compared");
    assert!(
        mismatches.is_empty(),
        "{} mismatches in {total} instructions:\n{}",
        mismatches.len(),
        mismatches.join("\n")
    );
}
