//! Kernel dispatches: a real code object (tests/kernels/kernels.hsaco, built from kernels.hip)
//! loaded into GPU memory and launched with DISPATCH_DIRECT, run by the RDNA3 interpreter.

mod common;

use std::time::{Duration, Instant};

use common::*;
use hcq_amd_sys::kd::KernelDescriptor;
use hcq_amd_sys::kfd::*;
use hcq_amd_sys::pm4::{DispatchSetup, Pm4Builder};
use hcq_amd_sys::seam::{FaultKind, Syscalls};
use hcq_emu::{EmuConfig, EmuKernel};
use object::{Object, ObjectSegment, ObjectSymbol};

/// The code object, 8-byte aligned as the ELF parser wants it.
#[repr(C, align(8))]
struct Aligned<T: ?Sized>(T);
static CODE: &Aligned<[u8]> = &Aligned(*include_bytes!("kernels/kernels.hsaco"));
const CODE_OBJECT: &[u8] = &CODE.0;

/// The code object placed in a GPU buffer, as a driver's program loader does it.
struct Program {
    image: Buf,
}

impl Program {
    fn load(dev: &Dev) -> Program {
        let elf = object::File::parse(CODE_OBJECT).unwrap();
        let end = elf
            .segments()
            .map(|s| s.address() + s.size())
            .max()
            .unwrap();
        let image = dev.alloc(end.div_ceil(0x1000) * 0x1000, ALLOC_MEM_FLAGS_VRAM);
        for seg in elf.segments() {
            let data = seg.data().unwrap();
            // SAFETY: the segment lies inside the image buffer, which is mapped read-write.
            unsafe {
                std::ptr::copy_nonoverlapping(
                    data.as_ptr(),
                    image.ptr::<u8>(seg.address()),
                    data.len(),
                )
            };
        }
        Program { image }
    }

    /// The dispatch setup of kernel `name` with its arguments at `kernargs`.
    fn setup(&self, name: &str, kernargs: u64) -> DispatchSetup {
        let elf = object::File::parse(CODE_OBJECT).unwrap();
        let kd_name = format!("{name}.kd");
        let sym = elf
            .symbols()
            .find(|s| s.name() == Ok(kd_name.as_str()))
            .unwrap();
        let kd_at = sym.address();
        let kd = KernelDescriptor::parse(&CODE_OBJECT[kd_at as usize..]).unwrap();
        let layout = kd.user_sgpr_layout();
        let mut user_data = [0u32; 16];
        if let Some(at) = layout.kernarg_segment_ptr {
            user_data[at as usize] = kernargs as u32;
            user_data[at as usize + 1] = (kernargs >> 32) as u32;
        }
        DispatchSetup {
            code_entry: (self.image.va + kd_at)
                .wrapping_add(kd.kernel_code_entry_byte_offset as u64),
            rsrc1: kd.compute_pgm_rsrc1,
            rsrc2: kd.compute_pgm_rsrc2,
            group_segment_size: kd.group_segment_fixed_size,
            scratch_base: 0,
            tmpring_size: 0,
            user_data,
            user_data_count: layout.count as usize,
        }
    }
}

fn args(words: &[u64]) -> Vec<u8> {
    words.iter().flat_map(|w| w.to_le_bytes()).collect()
}

fn write_bytes(buf: &Buf, offset: u64, bytes: &[u8]) {
    // SAFETY: the range is inside the mapped buffer.
    unsafe { std::ptr::copy_nonoverlapping(bytes.as_ptr(), buf.ptr::<u8>(offset), bytes.len()) };
}

fn wait_signal(dev: &Dev, sig: &Signals, value: u64, ev: &CreateEventArgs) {
    let start = Instant::now();
    while sig.value(0) < value {
        assert!(
            start.elapsed() < Duration::from_secs(30),
            "signal stuck at {}",
            sig.value(0)
        );
        dev.wait_event(ev.event_id, 100);
    }
}

#[test]
fn kernels_run_and_a_vm_fault_evicts_the_process_queues_for_good() {
    let k = EmuKernel::new(EmuConfig {
        max_steps: 100_000,
        ..small_config()
    });
    let dev = Dev::open(&k, 0);
    let sig = Signals::new(&dev);
    let ev = dev.create_event(EVENT_SIGNAL, Some(&sig.events));
    let mem_ev = dev.create_event(EVENT_MEMORY, None);
    let mut q = dev.create_queue(0x10000);
    let prog = Program::load(&dev);
    let kernargs = dev.alloc(0x10000, ALLOC_MEM_FLAGS_VRAM);

    // 1-D: out[i] = in[i] * 3 + i over 1000 elements, 64-wide workgroups (one partial).
    let n = 1000u64;
    let input = dev.alloc(4 * n, ALLOC_MEM_FLAGS_VRAM);
    let output = dev.alloc(4 * n, ALLOC_MEM_FLAGS_VRAM);
    for i in 0..n {
        input.write_u32(4 * i, (i as u32).wrapping_mul(7919) ^ 0x5a5a);
        output.write_u32(4 * i, 0xffff_ffff);
    }
    write_bytes(&kernargs, 0, &args(&[output.va, input.va, n | (64 << 32)]));
    let mut b = Pm4Builder::new();
    b.exec(
        &prog.setup("scale_add", kernargs.va),
        [n.div_ceil(64) as u32, 1, 1],
        [64, 1, 1],
    );
    b.signal(sig.value_addr(0), 1, sig.mailbox(&ev), ev.event_id);
    q.submit(&b.words);
    wait_signal(&dev, &sig, 1, &ev);
    assert_eq!(k.take_fault_report(dev.gpu_id), None);
    // 16 workgroups of 64 work-items: 32 waves.
    let stats = k.shader_stats(0).expect("GPU 0");
    assert_eq!((stats.dispatches, stats.waves), (1, 32));
    assert!(stats.instructions >= 32 * 10, "{stats:?}");
    // The descriptor's RSRC1 as it is, without PRIV (tinygrad before its PR #6950).
    assert_eq!(k.unprivileged_dispatches(dev.gpu_id), 1);
    for i in 0..n {
        let x = (i as u32).wrapping_mul(7919) ^ 0x5a5a;
        assert_eq!(
            output.read_u32(4 * i),
            x.wrapping_mul(3).wrapping_add(i as u32),
            "element {i}"
        );
    }

    // 2-D grid of 2-D workgroups.
    let (w, h, bx, by) = (48u64, 20u64, 16u32, 4u32);
    let grid = dev.alloc(4 * w * h, ALLOC_MEM_FLAGS_VRAM);
    write_bytes(
        &kernargs,
        0x100,
        &args(&[grid.va, w | (u64::from(bx) << 32), u64::from(by)]),
    );
    let mut b = Pm4Builder::new();
    let mut setup = prog.setup("index2d", kernargs.va + 0x100);
    setup.rsrc1 |= hcq_amd_sys::regs::dispatch_rsrc1_bits("gfx1100");
    b.exec(&setup, [(w as u32) / bx, (h as u32) / by, 1], [bx, by, 1]);
    b.signal(sig.value_addr(0), 2, sig.mailbox(&ev), ev.event_id);
    q.submit(&b.words);
    wait_signal(&dev, &sig, 2, &ev);
    assert_eq!(k.take_fault_report(dev.gpu_id), None);
    assert_eq!(k.unprivileged_dispatches(dev.gpu_id), 1, "PRIV was set");
    for y in 0..h {
        for x in 0..w {
            assert_eq!(
                grid.read_u32(4 * (y * w + x)),
                ((y as u32) << 16) | x as u32,
                "({x}, {y})"
            );
        }
    }

    // A store to an unmapped address: memory exception with the address and a report; KFD
    // evicts the process's queues on the GPU, so nothing after it runs, on this queue or on
    // one created later.
    let bad = 0x7_0000_0000u64;
    write_bytes(&kernargs, 0x200, &args(&[bad, 5]));
    let mut b = Pm4Builder::new();
    b.exec(
        &prog.setup("poke", kernargs.va + 0x200),
        [1, 1, 1],
        [1, 1, 1],
    );
    b.signal(sig.value_addr(0), 3, sig.mailbox(&ev), ev.event_id);
    write_bytes(&kernargs, 0x300, &args(&[output.va + 4, 77]));
    b.exec(
        &prog.setup("poke", kernargs.va + 0x300),
        [1, 1, 1],
        [1, 1, 1],
    );
    b.signal(sig.value_addr(0), 4, sig.mailbox(&ev), ev.event_id);
    let before = output.read_u32(4);
    q.submit(&b.words);
    let (result, data) = dev.wait_event(mem_ev.event_id, 10_000);
    assert_eq!(result, WAIT_RESULT_COMPLETE);
    // SAFETY: a memory-exception event fills in this member of the union.
    let m = unsafe { data.data.memory_exception_data };
    assert_eq!((m.va, m.gpu_id), (bad, dev.gpu_id));
    let report = k.take_fault_report(dev.gpu_id).expect("a report");
    assert_eq!(report.kind, FaultKind::MemoryFault, "{report}");
    assert_eq!(report.address.map(|a| a & !0xfff), Some(bad), "{report}");
    assert!(
        report.pc.is_some()
            && report
                .instruction
                .as_deref()
                .is_some_and(|i| i.contains("store")),
        "{report:?}"
    );
    let report = report.message;
    assert!(
        report.contains("dispatch fault") && report.contains(&format!("{bad:#x}")),
        "{report}"
    );
    let mut q2 = dev.create_queue(0x1000);
    let mut b = Pm4Builder::new();
    b.signal(sig.value_addr(1), 9, 0, 0);
    q2.submit(&b.words);
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(sig.value(0), 2, "the faulted queue went on");
    assert_eq!(sig.value(1), 0, "a queue created after the fault ran");
    assert_eq!(output.read_u32(4), before);
    assert_eq!(k.shader_stats(0).expect("GPU 0").dispatches, 2);
    q2.destroy();
    q.destroy();
    // Another process (another emulated kernel) has its own queues.
    let other = EmuKernel::new(small_config());
    let dev = Dev::open(&other, 0);
    let sig = Signals::new(&dev);
    let ev = dev.create_event(EVENT_SIGNAL, Some(&sig.events));
    let mut q = dev.create_queue(0x1000);
    let mut b = Pm4Builder::new();
    b.signal(sig.value_addr(0), 1, sig.mailbox(&ev), ev.event_id);
    q.submit(&b.words);
    wait_signal(&dev, &sig, 1, &ev);
    q.destroy();
}

#[test]
fn a_kernel_that_never_ends_exhausts_its_step_budget() {
    let k = EmuKernel::new(EmuConfig {
        max_steps: 10_000,
        ..small_config()
    });
    let dev = Dev::open(&k, 0);
    let sig = Signals::new(&dev);
    let ev = dev.create_event(EVENT_SIGNAL, Some(&sig.events));
    let hw = dev.create_event(EVENT_HW_EXCEPTION, None);
    let mut q = dev.create_queue(0x4000);
    let prog = Program::load(&dev);
    let kernargs = dev.alloc(0x1000, ALLOC_MEM_FLAGS_VRAM);
    let flag = dev.alloc(0x1000, ALLOC_MEM_FLAGS_VRAM);

    write_bytes(&kernargs, 0, &args(&[flag.va]));
    write_bytes(&kernargs, 0x100, &args(&[flag.va + 8, 9]));
    let mut b = Pm4Builder::new();
    b.exec(&prog.setup("spin", kernargs.va), [2, 1, 1], [32, 1, 1]);
    b.exec(
        &prog.setup("poke", kernargs.va + 0x100),
        [1, 1, 1],
        [1, 1, 1],
    );
    b.signal(sig.value_addr(0), 1, sig.mailbox(&ev), ev.event_id);
    q.submit(&b.words);
    let (result, data) = dev.wait_event(hw.event_id, 10_000);
    assert_eq!(result, WAIT_RESULT_COMPLETE);
    // SAFETY: a hardware-exception event fills in this member of the union.
    assert_eq!(unsafe { data.data.hw_exception_data }.gpu_id, dev.gpu_id);
    wait_signal(&dev, &sig, 1, &ev);
    let report = k.take_fault_report(dev.gpu_id).unwrap();
    assert_eq!(report.kind, FaultKind::StepBudgetExhausted, "{report}");
    assert!(report.pc.is_some(), "{report:?}");
    let report = report.message;
    assert!(report.contains("step budget"), "{report}");
    assert_eq!(flag.read_u32(8), 9);
    q.destroy();
}
