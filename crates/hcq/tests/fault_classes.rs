//! Every class of kernel failure ends its dispatch with a device error that names what happened
//! (the instruction, its PC, the workgroup). After the emulator-only classes the device runs
//! the next dispatch correctly; a GPU memory fault ends the device for the process, as KFD's
//! queue eviction does, and every later submission says so at once.
//! Its own process: it sets the emulator's instruction budget before the emulator starts.

use hcq::{Arg, Device, Error, FaultKind};

const SRC: &str = r#"
#define KERNEL extern "C" __attribute__((global))
KERNEL void fill(int* x, int v) { x[__builtin_amdgcn_workitem_id_x()] = v; }
// A word no RDNA3 encoding defines (a SOPP opcode with no instruction).
KERNEL void undecodable(int* x) { asm volatile(".long 0xbfff0000"); x[0] = 1; }
// A real instruction the emulator does not model.
KERNEL void unimplemented(int* x) {
  int v;
  asm volatile("ds_bvh_stack_rtn_b32 %0, %1, %1, v[4:7]" : "=v"(v) : "v"(x[0]));
  x[1] = v;
}
// s_mov_b64 into exec_hi: no register pair starts there, so no instruction encodes it (LLVM
// prints it as a .long too).
KERNEL void no_register_pair(int* x) { asm volatile(".long 0xbeff0180"); x[0] = 1; }
// s_mov_b64 into s1: a pair must start at an even SGPR (LLVM prints s[0:1] and warns).
KERNEL void illegal_operand(int* x) { asm volatile(".long 0xbe810180"); x[0] = 1; }
// A store past the end of the workgroup's 64 bytes of LDS.
KERNEL void lds_overrun(int* x, int i) {
  __attribute__((shared)) int s[16];
  s[__builtin_amdgcn_workitem_id_x()] = 1;
  __builtin_amdgcn_s_barrier();
  ((volatile int*)s)[i] = 2;
  x[0] = s[0];
}
KERNEL void vm_fault(unsigned long address) { *(volatile int*)address = 1; }
KERNEL void endless(volatile int* flag) { while (*flag == 0) {} }
"#;

fn next_dispatch_works(dev: &Device, lib: &[u8], round: i32) {
    let prg = dev.program(lib, "fill").unwrap();
    let buf = dev.alloc(64 * 4).unwrap();
    prg.launch(&[Arg::Buffer(&buf), Arg::I32(round)], [1, 1, 1], [64, 1, 1])
        .unwrap();
    assert_eq!(
        buf.read::<i32>().unwrap(),
        vec![round; 64],
        "the dispatch after fault {round}"
    );
}

fn fault_message(e: Error) -> String {
    match e {
        Error::DeviceFault { message, .. } => message,
        other => panic!("expected a device fault, got {other}"),
    }
}

#[test]
fn every_failure_class_is_reported_and_only_a_memory_fault_ends_the_device() {
    // Set before the emulator starts (this process has only this test).
    std::env::set_var("HCQ_EMU_MAX_STEPS", "200000");
    let dev = Device::open("amd-emu:0").unwrap();
    let lib = dev.compile(SRC).unwrap();
    let buf = dev.alloc(64).unwrap();
    buf.write(&[0i32; 16]).unwrap();
    let cases: [(&str, Vec<Arg<'_>>, &[&str]); 7] = [
        (
            "undecodable",
            vec![Arg::Buffer(&buf)],
            &["0xbfff0000", "pc"],
        ),
        (
            "no_register_pair",
            vec![Arg::Buffer(&buf)],
            &["undecodable instruction word 0xbeff0180", "pc"],
        ),
        (
            "unimplemented",
            vec![Arg::Buffer(&buf)],
            &["ds_bvh_stack_rtn_b32", "pc"],
        ),
        (
            "illegal_operand",
            vec![Arg::Buffer(&buf)],
            &["illegal operand", "s1 cannot start", "s_mov_b64", "pc"],
        ),
        (
            "lds_overrun",
            vec![Arg::Buffer(&buf), Arg::I32(4000)],
            &["LDS access out of range", "pc", "store"],
        ),
        ("endless", vec![Arg::Buffer(&buf)], &["200000", "pc"]),
        // Last: the device does not outlive it.
        (
            "vm_fault",
            vec![Arg::U64(0x7_0000)],
            &["0x70000", "pc", "stopped this process's queues"],
        ),
    ];
    for (round, (kernel, args, needles)) in cases.into_iter().enumerate() {
        let prg = dev.program(&lib, kernel).unwrap();
        let e = prg.launch_timed(&args, [2, 1, 1], [32, 1, 1]).unwrap_err();
        // The kind, PC and address as data, beside the words.
        let want = match kernel {
            "undecodable" | "no_register_pair" | "illegal_operand" => FaultKind::IllegalInstruction,
            "unimplemented" => FaultKind::UnimplementedInstruction,
            "lds_overrun" => FaultKind::LdsOutOfRange,
            "endless" => FaultKind::StepBudgetExhausted,
            _ => FaultKind::MemoryFault,
        };
        match &e {
            Error::DeviceFault {
                kind, pc, address, ..
            } => {
                assert_eq!(*kind, want, "{kernel}: {e}");
                assert!(pc.is_some(), "{kernel}: {e:?}");
                if kernel == "vm_fault" {
                    assert_eq!(*address, Some(0x7_0000), "{e:?}");
                }
            }
            other => panic!("expected a device fault, got {other}"),
        }
        let message = fault_message(e);
        for n in needles {
            assert!(
                message.contains(n),
                "{kernel}: {n:?} missing from {message:?}"
            );
        }
        assert!(message.contains("workgroup"), "{kernel}: {message}");
        if kernel != "vm_fault" {
            next_dispatch_works(&dev, &lib, round as i32 + 1);
        }
    }
    // After the memory fault: memory still works, work is refused at once, naming the fault.
    let lost = |e: Error| match e {
        Error::DeviceLost { message, .. } => {
            assert!(message.contains("0x70000"), "{message}");
        }
        other => panic!("expected DeviceLost, got {other}"),
    };
    let fill = dev.program(&lib, "fill").unwrap();
    let out = dev.alloc(64 * 4).unwrap();
    lost(
        fill.launch(&[Arg::Buffer(&out), Arg::I32(9)], [1, 1, 1], [64, 1, 1])
            .unwrap_err(),
    );
    lost(out.write(&[1i32; 64]).unwrap_err());
    lost(dev.synchronize().unwrap_err());
    drop(out);
}
