//! `MetalDevice` through the backend contract (`hcq_core::Backend`), against the recording
//! fake: the lowering of a recorded graph into the indirect command buffer, what it refuses,
//! and the eager operations the facade reaches through the trait.

use hcq_core::backend::{
    RecordedArg, RecordedCopy, RecordedEnd, RecordedItem, RecordedLaunch, Recording, ReplayValues,
};
use hcq_core::{
    Arg, Backend, BufferAt, CompileCache, CompileOptions, DimExpr, Error, LaunchOptions, Var,
    VarSpec,
};
use hcq_metal::fake::{Call, FakeMetal};
use hcq_metal::{Bind, MetalBuffer, MetalDevice, MetalProgram};

type Dev = MetalDevice<FakeMetal>;

const SRC: &str = "kernel void k0(device int* a) {}\nkernel void k1(device int* a, device int* b, constant int& n) {}\n";

fn open() -> (Dev, MetalProgram<FakeMetal>, MetalProgram<FakeMetal>) {
    let dev = MetalDevice::open_with_cache(FakeMetal::new(), 0, CompileCache::disabled()).unwrap();
    let lib = Backend::compile(&dev, SRC, &CompileOptions::default()).unwrap();
    let k0 = Backend::load_program(&dev, &lib, "k0").unwrap();
    let k1 = Backend::load_program(&dev, &lib, "k1").unwrap();
    (dev, k0, k1)
}

fn whole(b: &MetalBuffer<FakeMetal>) -> BufferAt<'_, MetalBuffer<FakeMetal>> {
    BufferAt {
        buffer: b,
        offset: 0,
        size: b.size(),
    }
}

fn vars() -> Vec<VarSpec> {
    vec![VarSpec {
        name: "n".into(),
        min: 1,
        max: 100,
    }]
}

fn launch<'a>(
    program: &'a MetalProgram<FakeMetal>,
    args: Vec<RecordedArg<'a, MetalBuffer<FakeMetal>>>,
) -> RecordedItem<'a, Dev> {
    RecordedItem::Launch(RecordedLaunch {
        device: 0,
        program,
        args,
        global: [
            DimExpr::from(Var::new(0)).ceil_div(4u32),
            1.into(),
            1.into(),
        ],
        local: [4.into(), 1.into(), 1.into()],
        dynamic_lds: 0,
    })
}

#[test]
fn a_recording_lowers_to_one_command_per_launch_with_fixed_buffers_bound_once() {
    let (dev, k0, k1) = open();
    let (a, b, input) = (
        Backend::alloc(&dev, 64).unwrap(),
        Backend::alloc(&dev, 64).unwrap(),
        Backend::alloc(&dev, 64).unwrap(),
    );
    let vars = vars();
    let rec = Recording {
        devices: vec![&dev],
        vars: &vars,
        inputs: vec![(whole(&input), 0)],
        items: vec![
            launch(&k0, vec![RecordedArg::Buffer(whole(&a))]),
            launch(
                &k1,
                vec![
                    RecordedArg::Input(0),
                    RecordedArg::Buffer(whole(&a)),
                    RecordedArg::Var(0),
                ],
            ),
            launch(
                &k1,
                vec![
                    RecordedArg::Buffer(whole(&b)),
                    RecordedArg::Buffer(whole(&a)),
                    RecordedArg::Var(0),
                ],
            ),
        ],
        segment_dwords: None,
    };
    let graph = Dev::build_graph(&rec).unwrap();
    {
        let g = graph.lock().unwrap();
        let plan = g.plan();
        assert_eq!(plan.commands.len(), 3);
        // `a` is one fixed buffer however often it is used; the programs are not repeated.
        assert_eq!(plan.commands[0].bindings, vec![(0, Bind::Fixed(0))]);
        assert_eq!(
            plan.commands[1].bindings,
            vec![
                (0, Bind::Input(0)),
                (1, Bind::Fixed(0)),
                (2, Bind::IntBuffer { offset: 0 })
            ]
        );
        assert_eq!(
            plan.commands[2].bindings,
            vec![
                (0, Bind::Fixed(1)),
                (1, Bind::Fixed(0)),
                (2, Bind::IntBuffer { offset: 0 })
            ]
        );
        assert_eq!(plan.dynamic, vec![0, 1, 2]);
    }
    assert_eq!(Dev::graph_segments(&graph), 1);
    assert_eq!(Dev::graph_input_patches(&graph, 0), 1);

    // A replay with another input rebinds its one slot.
    let other = Backend::alloc(&dev, 64).unwrap();
    dev.api().clear_calls();
    let inputs = [whole(&other)];
    Dev::replay(
        &graph,
        &[&dev],
        &ReplayValues {
            inputs: &inputs,
            vars: &[40],
        },
    )
    .unwrap();
    let calls = dev.api().take_calls();
    let rebinds = calls
        .iter()
        .filter(|c| matches!(c, Call::SetKernelBuffer { buffer, .. } if buffer == other.raw()))
        .count();
    assert_eq!(rebinds, 1, "{calls:?}");
    let dispatches: Vec<[u32; 3]> = calls
        .iter()
        .filter_map(|c| match c {
            Call::ConcurrentDispatchThreadgroups { groups, .. } => Some(*groups),
            _ => None,
        })
        .collect();
    // n = 40: ceil(40 / 4) = 10 workgroups for every launch.
    assert_eq!(dispatches, vec![[10, 1, 1]; 3], "{calls:?}");

    // A view as an input is refused before anything changes.
    let view = [BufferAt {
        buffer: &other,
        offset: 16,
        size: 48,
    }];
    match Dev::replay(
        &graph,
        &[&dev],
        &ReplayValues {
            inputs: &view,
            vars: &[40],
        },
    ) {
        Err(Error::Unsupported(m)) => assert!(m.contains("views"), "{m}"),
        other => panic!("{other:?}"),
    }
}

#[test]
fn what_an_indirect_command_buffer_cannot_hold_is_unsupported() {
    let (dev, k0, k1) = open();
    let (a, b) = (
        Backend::alloc(&dev, 64).unwrap(),
        Backend::alloc(&dev, 64).unwrap(),
    );
    let vars = vars();
    let recording = |items| Recording {
        devices: vec![&dev],
        vars: &vars,
        inputs: Vec::new(),
        items,
        segment_dwords: None,
    };
    let refused = |rec: Recording<'_, Dev>, why: &str| match Dev::build_graph(&rec) {
        Err(Error::Unsupported(m)) => assert!(m.contains(why), "{why}: {m}"),
        Err(e) => panic!("{why}: {e}"),
        Ok(_) => panic!("{why}: built"),
    };
    refused(
        recording(vec![RecordedItem::Copy(RecordedCopy {
            src: RecordedEnd::Buffer(whole(&a)),
            src_device: 0,
            dst: RecordedEnd::Buffer(whole(&b)),
            dst_device: 0,
            size: 64,
        })]),
        "copies",
    );
    let view = BufferAt {
        buffer: &a,
        offset: 4,
        size: 60,
    };
    refused(
        recording(vec![launch(&k0, vec![RecordedArg::Buffer(view)])]),
        "views",
    );
    refused(
        recording(vec![launch(
            &k1,
            vec![
                RecordedArg::Buffer(whole(&a)),
                RecordedArg::Buffer(whole(&b)),
                RecordedArg::Value(Arg::I32(3)),
            ],
        )]),
        "scalar",
    );
    refused(
        recording(vec![launch(
            &k1,
            vec![
                RecordedArg::Buffer(whole(&a)),
                RecordedArg::Var(0),
                RecordedArg::Buffer(whole(&b)),
            ],
        )]),
        "after a variable",
    );
    let mut with_lds = launch(&k0, vec![RecordedArg::Buffer(whole(&a))]);
    if let RecordedItem::Launch(l) = &mut with_lds {
        l.dynamic_lds = 256;
    }
    refused(recording(vec![with_lds]), "threadgroup memory");
    let second =
        MetalDevice::open_with_cache(FakeMetal::new(), 0, CompileCache::disabled()).unwrap();
    let mut two = recording(vec![launch(&k0, vec![RecordedArg::Buffer(whole(&a))])]);
    two.devices.push(&second);
    refused(two, "several devices");
}

#[test]
fn eager_operations_through_the_contract() {
    let (dev, _, k1) = open();
    let buf = Backend::alloc(&dev, 64).unwrap();
    // A view's range: bytes 16..32.
    let view = BufferAt {
        buffer: &buf,
        offset: 16,
        size: 16,
    };
    Backend::copy_in(&dev, whole(&buf), &[0u8; 64]).unwrap();
    Backend::fill(&dev, view, &[0xab, 0xcd]).unwrap();
    let mut out = [0u8; 64];
    Backend::copy_out(&dev, &mut out, whole(&buf)).unwrap();
    let expected: Vec<u8> = (0..64)
        .map(|i| match i {
            16..32 if i % 2 == 0 => 0xab,
            16..32 => 0xcd,
            _ => 0,
        })
        .collect();
    assert_eq!(out.to_vec(), expected);
    assert!(Dev::is_host(&buf));
    assert!(matches!(
        Dev::device_address(whole(&buf)),
        Err(Error::Unsupported(_))
    ));
    assert!(matches!(Dev::program_info(&k1), Err(Error::Unsupported(_))));
    assert_eq!(Dev::program_arguments(&k1), None);
    let options = CompileOptions {
        defines: vec![("N".into(), Some("4".into()))],
        ..Default::default()
    };
    assert!(matches!(
        Backend::compile(&dev, SRC, &options),
        Err(Error::Unsupported(_))
    ));

    // A stream shares the device's buffers; another device's blit is refused.
    let stream = Backend::open_stream(&dev).unwrap();
    let other = Backend::alloc(&dev, 64).unwrap();
    Backend::copy(&*stream, whole(&buf), &stream, whole(&other)).unwrap();
    Backend::synchronize_all(&dev).unwrap();
    let mut copied = [0u8; 64];
    Backend::copy_out(&*stream, &mut copied, whole(&other)).unwrap();
    assert_eq!(copied.to_vec(), expected);
    let second = MetalDevice::open_with_cache(
        FakeMetal::new().with_devices(2),
        1,
        CompileCache::disabled(),
    )
    .unwrap();
    let far = Backend::alloc(&second, 64).unwrap();
    match Backend::copy(&dev, whole(&buf), &second, whole(&far)) {
        Err(Error::Unsupported(m)) => assert!(m.contains("between Metal devices"), "{m}"),
        other => panic!("{other:?}"),
    }

    // A launch binds each buffer at its offset.
    dev.api().clear_calls();
    let args = [Arg::Buffer(view), Arg::Buffer(whole(&other)), Arg::I32(7)];
    Backend::launch(
        &dev,
        &k1,
        &args,
        |b| Ok(*b),
        [1, 1, 1],
        [4, 1, 1],
        &LaunchOptions::default(),
    )
    .unwrap();
    let offsets: Vec<(usize, usize)> = dev
        .api()
        .take_calls()
        .iter()
        .filter_map(|c| match c {
            Call::SetBuffer { offset, index, .. } => Some((*index, *offset)),
            _ => None,
        })
        .collect();
    assert_eq!(offsets[..2], [(0, 16), (1, 0)]);
}
