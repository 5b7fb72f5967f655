//! The Metal device against the recording fake.

use hcq_core::{Arg, CompileCache, Error};
use hcq_metal::fake::{Call, FakeBuffer, FakeCommandBuffer, FakeEncoder, FakeMetal, FakeQueue};
use hcq_metal::inflight::InFlight;
use hcq_metal::{CommandStatus, MetalBuffer, MetalDevice};
use std::time::Duration;

const SRC: &str = "#include <metal_stdlib>\nkernel void add(device float* a, constant int& n, uint i [[thread_position_in_grid]]) { a[i] += n; }\nkernel void twice(device float* a) {}\n";

fn open(api: FakeMetal) -> MetalDevice<FakeMetal> {
    MetalDevice::open_with_cache(api, 0, CompileCache::disabled()).unwrap()
}

fn buf(dev: &MetalDevice<FakeMetal>, size: usize) -> MetalBuffer<FakeMetal> {
    dev.alloc(size).unwrap()
}

fn arg_of<'b>(b: &'b &MetalBuffer<FakeMetal>) -> hcq_core::Result<&'b MetalBuffer<FakeMetal>> {
    Ok(*b)
}

#[test]
fn discovery_and_info() {
    let dev = open(FakeMetal::new().with_devices(2));
    let info = dev.info();
    assert_eq!(info.name, "metal:0");
    assert_eq!(info.arch, "metal");
    assert_eq!(info.description, "Fake Metal GPU 0");
    assert!(info.emulated);
    assert_eq!(hcq_metal::device_names(dev.api()), ["metal:0", "metal:1"]);
    let e = MetalDevice::open_with_cache(FakeMetal::new(), 3, CompileCache::disabled());
    assert!(matches!(e, Err(Error::NoDevice(_))));
}

#[test]
fn copies_round_trip_and_check_ranges() {
    let dev = open(FakeMetal::new());
    let b = buf(&dev, 16);
    dev.copy_in(&b, 4, &[1, 2, 3, 4]).unwrap();
    let mut out = [0u8; 8];
    dev.copy_out(&mut out, &b, 2).unwrap();
    assert_eq!(out, [0, 0, 1, 2, 3, 4, 0, 0]);
    assert!(matches!(
        dev.copy_in(&b, 14, &[0; 4]),
        Err(Error::InvalidArgument(_))
    ));
    assert!(matches!(
        dev.copy_out(&mut out, &b, usize::MAX),
        Err(Error::InvalidArgument(_))
    ));
    // A buffer of another device is refused.
    let other = open(FakeMetal::new());
    let ob = buf(&other, 16);
    assert!(matches!(
        dev.copy_in(&ob, 0, &[1]),
        Err(Error::InvalidArgument(_))
    ));
}

#[test]
fn too_large_allocation_is_out_of_memory() {
    let dev = open(FakeMetal::new());
    assert!(matches!(dev.alloc(1 << 40), Err(Error::OutOfMemory { .. })));
}

#[test]
fn blit_copy_runs_after_queued_work() {
    let dev = open(FakeMetal::new());
    let (a, b) = (buf(&dev, 8), buf(&dev, 8));
    dev.copy_in(&a, 0, &[9; 8]).unwrap();
    dev.copy(&b, 2, &a, 0, 4).unwrap();
    assert_eq!(dev.in_flight(), 1);
    let mut out = [0u8; 8];
    dev.copy_out(&mut out, &b, 0).unwrap();
    assert_eq!(out, [0, 0, 9, 9, 9, 9, 0, 0]);
    assert_eq!(dev.in_flight(), 0);
    assert!(dev.copy(&b, 6, &a, 0, 4).is_err());
}

#[test]
fn compile_goes_through_the_cache() {
    let dir = tempfile::tempdir().unwrap();
    let dev =
        MetalDevice::open_with_cache(FakeMetal::new(), 0, CompileCache::at(dir.path())).unwrap();
    let lib = dev.compile(SRC).unwrap();
    assert!(lib.starts_with(b"MTLB"));
    let compiles = |d: &MetalDevice<FakeMetal>| {
        d.api()
            .calls()
            .iter()
            .filter(|c| matches!(c, Call::NewLibraryWithSource))
            .count()
    };
    assert_eq!(compiles(&dev), 1);
    assert_eq!(dev.compile(SRC).unwrap(), lib);
    assert_eq!(compiles(&dev), 1, "second compile must hit the cache");
}

#[test]
fn compile_errors_are_typed() {
    let dev = open(FakeMetal::new());
    dev.api()
        .fail_next_compile("program_source:1:1: error: unknown type name 'flot'");
    match dev.compile("kernel void k(device flot* a) {}") {
        Err(Error::Compile { log, .. }) => assert!(log.contains("unknown type name")),
        other => panic!("expected a compile error, got {other:?}"),
    }
}

#[test]
fn load_program_checks_the_library() {
    let dev = open(FakeMetal::new());
    assert!(matches!(
        dev.load_program(b"\x7fELF", "add"),
        Err(Error::InvalidCodeObject(_))
    ));
    let lib = dev.compile(SRC).unwrap();
    assert!(matches!(
        dev.load_program(&lib, "nope"),
        Err(Error::InvalidCodeObject(_))
    ));
    let p = dev.load_program(&lib, "add").unwrap();
    assert_eq!(p.name(), "add");
    assert_eq!(p.max_threads_per_threadgroup(), 1024);
}

#[test]
fn launch_encodes_buffers_and_scalars_in_order() {
    let dev = open(FakeMetal::new());
    let prg = dev.load_program(&dev.compile(SRC).unwrap(), "add").unwrap();
    let a = buf(&dev, 64);
    dev.api().clear_calls();
    let t = dev
        .launch(
            &prg,
            &[Arg::Buffer(&a), Arg::I32(-2), Arg::U64(7)],
            arg_of,
            [4, 1, 1],
            [16, 1, 1],
            true,
        )
        .unwrap();
    assert_eq!(
        t,
        Some(Duration::from_secs_f64(hcq_metal::fake::FAKE_GPU_SECONDS))
    );
    let cb = FakeCommandBuffer(0);
    let enc = FakeEncoder(1);
    let calls = dev.api().take_calls();
    let pipeline = match calls[2] {
        Call::SetComputePipelineState { pipeline, .. } => pipeline,
        ref c => panic!("unexpected {c:?}"),
    };
    assert_eq!(
        calls,
        vec![
            Call::CommandBuffer {
                queue: FakeQueue(1),
                cb
            },
            Call::ComputeCommandEncoder { cb, encoder: enc },
            Call::SetComputePipelineState {
                encoder: enc,
                pipeline
            },
            Call::SetBuffer {
                encoder: enc,
                buffer: FakeBuffer(0),
                offset: 0,
                index: 0
            },
            Call::SetBytes {
                encoder: enc,
                bytes: (-2i32).to_le_bytes().to_vec(),
                index: 1
            },
            Call::SetBytes {
                encoder: enc,
                bytes: 7u64.to_le_bytes().to_vec(),
                index: 2
            },
            Call::DispatchThreadgroups {
                encoder: enc,
                groups: [4, 1, 1],
                threads: [16, 1, 1]
            },
            Call::EndEncoding(enc),
            Call::Commit(cb),
            Call::WaitUntilCompleted(cb),
        ]
    );
    assert_eq!(dev.in_flight(), 0);
}

#[test]
fn bad_launches_are_errors() {
    let dev = open(FakeMetal::new());
    let prg = dev.load_program(&dev.compile(SRC).unwrap(), "add").unwrap();
    let a = buf(&dev, 64);
    let args = [Arg::Buffer(&a)];
    for (g, l) in [([0, 1, 1], [1, 1, 1]), ([1, 1, 1], [64, 32, 1])] {
        assert!(matches!(
            dev.launch(&prg, &args, arg_of, g, l, false),
            Err(Error::InvalidArgument(_))
        ));
    }
    let many: Vec<Arg<&MetalBuffer<FakeMetal>>> = (0..32).map(Arg::I32).collect();
    assert!(matches!(
        dev.launch(&prg, &many, arg_of, [1, 1, 1], [1, 1, 1], false),
        Err(Error::InvalidArgument(_))
    ));
    let other = open(FakeMetal::new());
    let ob = buf(&other, 4);
    assert!(matches!(
        dev.launch(
            &prg,
            &[Arg::Buffer(&ob)],
            arg_of,
            [1, 1, 1],
            [1, 1, 1],
            false
        ),
        Err(Error::InvalidArgument(_))
    ));
    assert_eq!(dev.in_flight(), 0, "nothing was submitted");
}

#[test]
fn a_failed_command_buffer_is_a_device_fault() {
    let dev = open(FakeMetal::new());
    let prg = dev
        .load_program(&dev.compile(SRC).unwrap(), "twice")
        .unwrap();
    let a = buf(&dev, 64);
    let args = [Arg::Buffer(&a)];
    // Waited launch: the error comes back from the launch.
    dev.api()
        .fail_next_commit("Caused GPU Address Fault Error (0000000b)");
    match dev.launch(&prg, &args, arg_of, [1, 1, 1], [1, 1, 1], true) {
        Err(Error::DeviceFault {
            device,
            message,
            kind,
            ..
        }) => {
            assert_eq!(device, "metal:0");
            assert!(message.contains("Address Fault"));
            assert_eq!(kind, hcq_core::FaultKind::MemoryFault);
        }
        other => panic!("expected a device fault, got {other:?}"),
    }
    // Queued launch: the error comes back from the next wait, once; the device stays usable.
    dev.api().fail_next_commit("Caused GPU Timeout Error");
    dev.launch(&prg, &args, arg_of, [1, 1, 1], [1, 1, 1], false)
        .unwrap();
    assert!(matches!(
        dev.synchronize(),
        Err(Error::DeviceFault {
            kind: hcq_core::FaultKind::HardwareException,
            ..
        })
    ));
    dev.synchronize().unwrap();
    dev.launch(&prg, &args, arg_of, [1, 1, 1], [1, 1, 1], true)
        .unwrap();
}

#[test]
fn finished_command_buffers_are_retired_from_the_front() {
    let dev = open(FakeMetal::new());
    let prg = dev
        .load_program(&dev.compile(SRC).unwrap(), "twice")
        .unwrap();
    let a = buf(&dev, 64);
    let args = [Arg::Buffer(&a)];
    for _ in 0..5 {
        dev.launch(&prg, &args, arg_of, [1, 1, 1], [1, 1, 1], false)
            .unwrap();
    }
    assert_eq!(dev.in_flight(), 5);
    dev.api().complete_all();
    // The next submission retires the five finished ones without waiting on them.
    dev.api().clear_calls();
    dev.launch(&prg, &args, arg_of, [1, 1, 1], [1, 1, 1], false)
        .unwrap();
    assert_eq!(dev.in_flight(), 1);
    assert!(!dev
        .api()
        .calls()
        .iter()
        .any(|c| matches!(c, Call::WaitUntilCompleted(_))));
    dev.synchronize().unwrap();
    assert_eq!(dev.in_flight(), 0);
    assert_eq!(
        dev.api().status_of(FakeCommandBuffer(5)),
        CommandStatus::Completed
    );
}

#[test]
fn in_flight_membership_is_a_range_check() {
    let api = FakeMetal::new();
    let dev = open(api);
    let mut q = InFlight::new();
    let cbs: Vec<_> = (0..3)
        .map(|_| {
            use hcq_metal::MetalApi;
            let cb = dev
                .api()
                .command_buffer(&hcq_metal::fake::FakeQueue(1))
                .unwrap();
            dev.api().commit(&cb);
            cb
        })
        .collect();
    let seqs: Vec<_> = cbs.into_iter().map(|cb| q.push(cb)).collect();
    assert!(seqs.iter().all(|&s| q.contains(s)));
    assert!(!q.contains(seqs[2] + 1));
    assert!(q.wait_through(dev.api(), Some(seqs[1])).is_empty());
    assert!(!q.contains(seqs[0]) && !q.contains(seqs[1]) && q.contains(seqs[2]));
    assert_eq!(q.len(), 1);
}

#[test]
fn launch_at_binds_buffers_at_their_offsets() {
    fn at_48<'b>(
        b: &'b &MetalBuffer<FakeMetal>,
    ) -> hcq_core::Result<(&'b MetalBuffer<FakeMetal>, usize)> {
        Ok((*b, 48))
    }
    fn at_64<'b>(
        b: &'b &MetalBuffer<FakeMetal>,
    ) -> hcq_core::Result<(&'b MetalBuffer<FakeMetal>, usize)> {
        Ok((*b, 64))
    }
    let dev = open(FakeMetal::new());
    let prg = dev.load_program(&dev.compile(SRC).unwrap(), "add").unwrap();
    let a = buf(&dev, 64);
    let args = [Arg::Buffer(&a), Arg::I32(1)];
    dev.api().clear_calls();
    dev.launch_at(&prg, &args, at_48, [1, 1, 1], [4, 1, 1], 0, false)
        .unwrap();
    let bound: Vec<(usize, usize)> = dev
        .api()
        .take_calls()
        .into_iter()
        .filter_map(|c| match c {
            Call::SetBuffer { offset, index, .. } => Some((offset, index)),
            _ => None,
        })
        .collect();
    assert_eq!(bound, [(48, 0)]);
    // An offset at or past the end binds nothing and is an error.
    let e = dev
        .launch_at(&prg, &args, at_64, [1, 1, 1], [4, 1, 1], 0, false)
        .unwrap_err();
    assert!(matches!(e, Error::InvalidArgument(_)), "{e}");
}

#[test]
fn launch_at_sizes_threadgroup_memory() {
    fn whole<'b>(
        b: &'b &MetalBuffer<FakeMetal>,
    ) -> hcq_core::Result<(&'b MetalBuffer<FakeMetal>, usize)> {
        Ok((*b, 0))
    }
    let dev = open(FakeMetal::new());
    let prg = dev.load_program(&dev.compile(SRC).unwrap(), "add").unwrap();
    let a = buf(&dev, 64);
    let args = [Arg::Buffer(&a), Arg::I32(1)];
    let lengths = |dev: &MetalDevice<FakeMetal>| -> Vec<(usize, usize)> {
        dev.api()
            .take_calls()
            .into_iter()
            .filter_map(|c| match c {
                Call::SetThreadgroupMemoryLength { length, index, .. } => Some((length, index)),
                _ => None,
            })
            .collect()
    };
    dev.api().clear_calls();
    // Rounded up to Metal's 16-byte granule; none set when none is asked for.
    dev.launch_at(&prg, &args, whole, [1, 1, 1], [4, 1, 1], 100, false)
        .unwrap();
    assert_eq!(lengths(&dev), [(112, 0)]);
    dev.launch_at(&prg, &args, whole, [1, 1, 1], [4, 1, 1], 0, false)
        .unwrap();
    assert_eq!(lengths(&dev), []);
    let e = dev
        .launch_at(
            &prg,
            &args,
            whole,
            [1, 1, 1],
            [4, 1, 1],
            32 * 1024 + 1,
            false,
        )
        .unwrap_err();
    assert!(matches!(e, Error::InvalidArgument(_)), "{e}");
}
