//! Compile options (`Device::compile_with`): include directories, macros, the optimisation
//! level and other clang flags change what is built (and so the cache key), and bad options
//! are clear errors before clang runs. Results checked against the host.

use hcq::{Arg, CompileOptions, Device, Error};

const SRC: &str = r#"
#include "scale.h"
__global__ void scale(int* out, const int* in, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = in[i] * FACTOR + OFFSET;
}
"#;

fn device() -> Device {
    Device::open("amd-emu:0").expect("the emulated GPU opens")
}

/// Runs `scale` from `code` over 100 ints and returns out.
fn run(dev: &Device, code: &[u8]) -> Vec<i32> {
    let prg = dev.program(code, "scale").unwrap();
    let xs: Vec<i32> = (0..100).map(|i| i * 3 - 50).collect();
    let (input, out) = (dev.alloc(400).unwrap(), dev.alloc(400).unwrap());
    input.write(&xs).unwrap();
    let args = [Arg::Buffer(&out), Arg::Buffer(&input), Arg::I32(100)];
    prg.launch(&args, [2, 1, 1], [64, 1, 1]).unwrap();
    out.read().unwrap()
}

fn expect(factor: i32, offset: i32) -> Vec<i32> {
    (0..100).map(|i| (i * 3 - 50) * factor + offset).collect()
}

#[test]
fn include_directories_macros_and_levels_shape_the_build() {
    let dev = device();
    let dir = tempfile::tempdir().unwrap();
    let inc = dir.path().join("inc");
    std::fs::create_dir(&inc).unwrap();
    std::fs::write(
        inc.join("scale.h"),
        "#ifndef OFFSET\n#define OFFSET 0\n#endif\n",
    )
    .unwrap();
    let options = |factor: i32, extra: &[&str]| {
        let mut args = vec![format!("-I{}", inc.display()), format!("-DFACTOR={factor}")];
        args.extend(extra.iter().map(|s| s.to_string()));
        CompileOptions::from_args(&args).unwrap()
    };
    // The header comes from the include directory; the macro from the options.
    assert_eq!(
        run(&dev, &dev.compile_with(SRC, &options(3, &[])).unwrap()),
        expect(3, 0)
    );
    // Another value is another build (not the cached one).
    assert_eq!(
        run(&dev, &dev.compile_with(SRC, &options(-7, &[])).unwrap()),
        expect(-7, 0)
    );
    let with_offset = options(2, &["-DOFFSET=11"]);
    assert_eq!(
        run(&dev, &dev.compile_with(SRC, &with_offset).unwrap()),
        expect(2, 11)
    );
    // -O0 builds different code with the same results.
    let o0 = dev.compile_with(SRC, &options(5, &["-O0"])).unwrap();
    let o3 = dev.compile_with(SRC, &options(5, &[])).unwrap();
    assert_ne!(o0, o3, "-O0 reached clang");
    assert_eq!(run(&dev, &o0), expect(5, 0));
    assert_eq!(run(&dev, &o3), expect(5, 0));
    // Without the include directory the header is not found.
    match dev.compile_with(SRC, &CompileOptions::from_args(&["-DFACTOR=1"]).unwrap()) {
        Err(Error::Compile { log, .. }) => assert!(log.contains("scale.h"), "{log}"),
        other => panic!("expected a compile error, got {other:?}"),
    }
    // Other flags reach clang as they are: -Werror turns a warning into an error.
    let warns = "__global__ void w(int* o) { int unused; o[0] = 1; }";
    dev.compile(warns).unwrap();
    let strict = CompileOptions::from_args(&["-Werror", "-Wunused-variable"]).unwrap();
    match dev.compile_with(warns, &strict) {
        Err(Error::Compile { log, .. }) => assert!(log.contains("unused"), "{log}"),
        other => panic!("expected a compile error, got {other:?}"),
    }
    // The same options for a source file, whose own directory is searched first.
    let file = dir.path().join("k.hip");
    std::fs::write(&file, SRC).unwrap();
    std::fs::write(dir.path().join("scale.h"), "#define OFFSET 100\n").unwrap();
    let code = dev.compile_file_with(&file, &options(4, &[])).unwrap();
    assert_eq!(run(&dev, &code), expect(4, 100));
}

#[test]
fn bad_options_are_refused_before_clang_runs() {
    let dev = device();
    let refused = |options: CompileOptions, needle: &str| match dev.compile_with(SRC, &options) {
        Err(Error::InvalidArgument(m)) => assert!(m.contains(needle), "{m}"),
        other => panic!("expected InvalidArgument, got {other:?}"),
    };
    refused(
        CompileOptions {
            include_dirs: vec!["/no/such/include/dir".into()],
            ..Default::default()
        },
        "/no/such/include/dir",
    );
    refused(
        CompileOptions {
            defines: vec![("2X".into(), None)],
            ..Default::default()
        },
        "2X",
    );
    refused(
        CompileOptions {
            opt_level: Some(9),
            ..Default::default()
        },
        "0 to 3",
    );
    for flag in ["-o", "-E", "--offload-arch=gfx90a", "-MF"] {
        refused(
            CompileOptions {
                flags: vec![flag.into()],
                ..Default::default()
            },
            flag.split('=').next().unwrap(),
        );
    }
}

const OPENCL: &str = r#"
kernel void twice_plus(global int* out, global const int* in, int add) {
  int i = __builtin_amdgcn_workgroup_id_x() * 64 + __builtin_amdgcn_workitem_id_x();
  out[i] = in[i] * 2 + add;
}
"#;

/// Runs `command`, which writes the relocatable object `obj`, and returns its bytes. Built
/// outside the compile cache, the object is kept as `kept_name` for the disassembly check
/// scripts/test.sh runs after the suite (every object the suite builds disassembles as
/// llvm-objdump does).
fn relocatable_object(
    mut command: std::process::Command,
    obj: &std::path::Path,
    kept_name: &str,
) -> Vec<u8> {
    let program = command.get_program().to_string_lossy().into_owned();
    let status = command
        .status()
        .unwrap_or_else(|e| panic!("{program} runs (scripts/test.sh installs LLVM 19): {e}"));
    assert!(status.success(), "{program} failed");
    let bytes = std::fs::read(obj).unwrap();
    assert_eq!(u16::from_le_bytes([bytes[16], bytes[17]]), 1, "ET_REL");
    if let Some(kept) = std::env::var_os("HCQ_TEST_OBJECTS") {
        std::fs::create_dir_all(&kept).unwrap();
        std::fs::copy(obj, std::path::Path::new(&kept).join(kept_name)).unwrap();
    }
    bytes
}

#[test]
fn relocatable_objects_are_linked_on_load() {
    let dev = device();
    let dir = tempfile::tempdir().unwrap();
    let (cl, obj) = (dir.path().join("k.cl"), dir.path().join("k.o"));
    std::fs::write(&cl, OPENCL).unwrap();
    // An OpenCL kernel compiled to an object file (`-c`): relocatable, not linked.
    let clang = std::env::var("HCQ_CLANG").unwrap_or_else(|_| "clang-19".into());
    let mut command = std::process::Command::new(&clang);
    command
        .args(["-x", "cl", "-cl-std=CL2.0", "--target=amdgcn-amd-amdhsa"])
        .args(["-mcpu=gfx1100", "-nogpulib", "-O2", "-c"])
        .arg(&cl)
        .arg("-o")
        .arg(&obj);
    let bytes = relocatable_object(command, &obj, "relocatable-twice_plus.o");
    let prg = dev.program(&bytes, "twice_plus").unwrap();
    let xs: Vec<i32> = (0..128).map(|i| i * 5 - 300).collect();
    let (input, out) = (dev.alloc(512).unwrap(), dev.alloc(512).unwrap());
    input.write(&xs).unwrap();
    let args = [Arg::Buffer(&out), Arg::Buffer(&input), Arg::I32(17)];
    prg.launch(&args, [2, 1, 1], [64, 1, 1]).unwrap();
    let got: Vec<i32> = out.read().unwrap();
    for (i, (&g, &x)) in got.iter().zip(&xs).enumerate() {
        assert_eq!(g, x * 2 + 17, "out[{i}]");
    }
    // A damaged one: the linker's complaint, not a crash.
    match dev.program(&bytes[..200], "twice_plus") {
        Err(Error::InvalidCodeObject(message)) => {
            assert!(message.contains("ld.lld"), "{message}")
        }
        other => panic!("expected the linker's refusal, got {other:?}"),
    }
}

/// A kernel in LLVM IR, as a compiler that emits IR hands it to LLVM's code generator.
const LLVM_IR: &str = r#"
target triple = "amdgcn-amd-amdhsa"

define amdgpu_kernel void @axpb(ptr addrspace(1) %out, ptr addrspace(1) %in, i32 %a, i32 %b) {
  %group = call i32 @llvm.amdgcn.workgroup.id.x()
  %item = call i32 @llvm.amdgcn.workitem.id.x()
  %base = mul i32 %group, 64
  %i = add i32 %base, %item
  %at = sext i32 %i to i64
  %src = getelementptr i32, ptr addrspace(1) %in, i64 %at
  %x = load i32, ptr addrspace(1) %src
  %ax = mul i32 %x, %a
  %y = add i32 %ax, %b
  %dst = getelementptr i32, ptr addrspace(1) %out, i64 %at
  store i32 %y, ptr addrspace(1) %dst
  ret void
}

declare i32 @llvm.amdgcn.workgroup.id.x()
declare i32 @llvm.amdgcn.workitem.id.x()
"#;

/// LLVM's code generator (`llc`) writes a relocatable object too; it loads the same way.
#[test]
fn objects_from_llvm_code_generator_are_linked_on_load() {
    let dev = device();
    let dir = tempfile::tempdir().unwrap();
    let (ir, obj) = (dir.path().join("k.ll"), dir.path().join("k.o"));
    std::fs::write(&ir, LLVM_IR).unwrap();
    let mut command = std::process::Command::new("llc-19");
    command
        .args([
            "-mtriple=amdgcn-amd-amdhsa",
            "-mcpu=gfx1100",
            "-O2",
            "-filetype=obj",
        ])
        .arg(&ir)
        .arg("-o")
        .arg(&obj);
    let bytes = relocatable_object(command, &obj, "relocatable-llc-axpb.o");
    let prg = dev.program(&bytes, "axpb").unwrap();
    let xs: Vec<i32> = (0..192).map(|i| 1000 - 7 * i).collect();
    let (input, out) = (dev.alloc(192 * 4).unwrap(), dev.alloc(192 * 4).unwrap());
    input.write(&xs).unwrap();
    let args = [
        Arg::Buffer(&out),
        Arg::Buffer(&input),
        Arg::I32(-3),
        Arg::I32(11),
    ];
    prg.launch(&args, [3, 1, 1], [64, 1, 1]).unwrap();
    let got: Vec<i32> = out.read().unwrap();
    for (i, (&g, &x)) in got.iter().zip(&xs).enumerate() {
        assert_eq!(g, x * -3 + 11, "out[{i}]");
    }
}
