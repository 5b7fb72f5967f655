//! MetalGraph against the recording fake: what is encoded into the ICB, what a replay changes,
//! what it waits on, and what it refuses.

use hcq_core::{CompileCache, Error};
use hcq_metal::fake::{
    Call, FakeBuffer, FakeCommandBuffer, FakeIcb, FakeIcbCommand, FakeMetal, FakeQueue,
};
use hcq_metal::{
    dims, BufferRef, DimExpr, ExecItem, GraphPlan, GraphSpec, MetalBuffer, MetalDevice, MetalGraph,
    MetalProgram, Var, VarSpec,
};

const SRC: &str = "kernel void k0(device int* a) {}\nkernel void k1(device int* a, device int* b, constant int& n) {}\n";

struct Setup {
    dev: MetalDevice<FakeMetal>,
    progs: Vec<MetalProgram<FakeMetal>>,
}

fn setup() -> Setup {
    let dev = MetalDevice::open_with_cache(FakeMetal::new(), 0, CompileCache::disabled()).unwrap();
    let lib = dev.compile(SRC).unwrap();
    let progs = vec![
        dev.load_program(&lib, "k0").unwrap(),
        dev.load_program(&lib, "k1").unwrap(),
    ];
    Setup { dev, progs }
}

fn bufs(dev: &MetalDevice<FakeMetal>, n: usize) -> Vec<MetalBuffer<FakeMetal>> {
    (0..n).map(|_| dev.alloc(64).unwrap()).collect()
}

fn raw(b: &MetalBuffer<FakeMetal>) -> FakeBuffer {
    *b.raw()
}

/// Two variables n (0) and m (1). Item 0: k0(fixed 0), constant dims. Item 1: k1(input 0,
/// fixed 1, n), global = ceil(n / 4). Item 2: k1(input 1, fixed 0, m), constant dims.
fn spec() -> GraphSpec {
    GraphSpec {
        items: vec![
            ExecItem {
                program: 0,
                buffers: vec![BufferRef::Fixed(0)],
                vars: vec![],
                global: dims([2, 1, 1]),
                local: dims([32, 1, 1]),
            },
            ExecItem {
                program: 1,
                buffers: vec![BufferRef::Input(0), BufferRef::Fixed(1)],
                vars: vec![0],
                global: [
                    DimExpr::from(Var::new(0)).ceil_div(4u32),
                    1.into(),
                    1.into(),
                ],
                local: dims([4, 1, 1]),
            },
            ExecItem {
                program: 1,
                buffers: vec![BufferRef::Input(1), BufferRef::Fixed(0)],
                vars: vec![1],
                global: dims([1, 1, 1]),
                local: dims([1, 1, 1]),
            },
        ],
        vars: vec![
            VarSpec {
                name: "n".into(),
                min: 1,
                max: 1000,
            },
            VarSpec {
                name: "m".into(),
                min: -5,
                max: 5,
            },
        ],
        num_inputs: 2,
    }
}

fn cmd(index: usize) -> FakeIcbCommand {
    FakeIcbCommand {
        icb: FakeIcb(0),
        index,
    }
}

struct Built {
    s: Setup,
    fixed: Vec<MetalBuffer<FakeMetal>>,
    inputs: Vec<MetalBuffer<FakeMetal>>,
    g: MetalGraph<FakeMetal>,
}

fn build() -> Built {
    let s = setup();
    let fixed = bufs(&s.dev, 2);
    let inputs = bufs(&s.dev, 4);
    s.dev.api().clear_calls();
    let g = MetalGraph::new(
        &s.dev,
        spec(),
        &[&s.progs[0], &s.progs[1]],
        &[&fixed[0], &fixed[1]],
        &[&inputs[0], &inputs[1]],
        &[10, 3],
    )
    .unwrap();
    Built {
        s,
        fixed,
        inputs,
        g,
    }
}

#[test]
fn the_plan_lays_out_bindings_and_int_offsets() {
    let p = GraphPlan::new(&spec(), 2, 2).unwrap();
    use hcq_metal::Bind::*;
    assert_eq!(p.commands[0].bindings, vec![(0, Fixed(0))]);
    assert_eq!(
        p.commands[1].bindings,
        vec![(0, Input(0)), (1, Fixed(1)), (2, IntBuffer { offset: 0 })]
    );
    assert_eq!(
        p.commands[2].bindings,
        vec![(0, Input(1)), (1, Fixed(0)), (2, IntBuffer { offset: 4 })]
    );
    assert_eq!(p.input_slots, vec![(1, 0, 0), (2, 0, 1)]);
    assert_eq!(p.dynamic, vec![1]);
    assert_eq!(p.fixed_resources, vec![0, 1]);
    assert_eq!(p.int_buffer_bytes, 8);
    assert_eq!(p.rebinds(&[7, 8], &[7, 8]), vec![]);
    assert_eq!(p.rebinds(&[7, 8], &[7, 9]), vec![(2, 0, 1)]);
}

#[test]
fn build_encodes_every_command_once() {
    let b = build();
    let calls = b.s.dev.api().take_calls();
    let int_buf = raw(b.g.int_buffer().unwrap());
    let (f0, f1, i0, i1) = (
        raw(&b.fixed[0]),
        raw(&b.fixed[1]),
        raw(&b.inputs[0]),
        raw(&b.inputs[1]),
    );
    // ICB: 3 commands, 31 bindings each.
    assert!(matches!(
        calls[0],
        Call::NewIndirectCommandBuffer {
            max_commands: 3,
            max_bindings: 31,
            ..
        }
    ));
    assert!(matches!(calls[1], Call::NewBuffer { length: 8, buffer } if buffer == int_buf));
    // One indirect-capable pipeline per program.
    let pipelines: Vec<_> = calls
        .iter()
        .filter_map(|c| match c {
            Call::NewComputePipelineState {
                support_icb: true,
                pipeline,
                ..
            } => Some(*pipeline),
            _ => None,
        })
        .collect();
    assert_eq!(pipelines.len(), 2);
    let encode: Vec<Call> = calls
        .into_iter()
        .skip_while(|c| !matches!(c, Call::IcbSetComputePipelineState { .. }))
        .collect();
    let kb = |c, buffer, offset, index| Call::SetKernelBuffer {
        command: cmd(c),
        buffer,
        offset,
        index,
    };
    let disp = |c, groups, threads| Call::ConcurrentDispatchThreadgroups {
        command: cmd(c),
        groups,
        threads,
    };
    let pl = |c, p| Call::IcbSetComputePipelineState {
        command: cmd(c),
        pipeline: pipelines[p],
    };
    assert_eq!(
        encode,
        vec![
            pl(0, 0),
            kb(0, f0, 0, 0),
            disp(0, [2, 1, 1], [32, 1, 1]),
            Call::SetBarrier(cmd(0)),
            pl(1, 1),
            kb(1, i0, 0, 0),
            kb(1, f1, 0, 1),
            kb(1, int_buf, 0, 2),
            disp(1, [3, 1, 1], [4, 1, 1]), // ceil(10 / 4)
            Call::SetBarrier(cmd(1)),
            pl(2, 1),
            kb(2, i1, 0, 0),
            kb(2, f0, 0, 1),
            kb(2, int_buf, 4, 2),
            disp(2, [1, 1, 1], [1, 1, 1]),
            Call::SetBarrier(cmd(2)),
        ]
    );
}

#[test]
fn replay_writes_variables_and_runs_the_icb_in_one_command_buffer() {
    let mut b = build();
    let api = b.s.dev.api();
    api.clear_calls();
    let t =
        b.g.replay(&b.s.dev, &[&b.inputs[0], &b.inputs[1]], &[10, -3], true)
            .unwrap();
    assert!(t.is_some());
    let int_buf = raw(b.g.int_buffer().unwrap());
    let mut want = 10i32.to_le_bytes().to_vec();
    want.extend((-3i32).to_le_bytes());
    assert_eq!(api.buffer_bytes(int_buf), want);
    let calls = api.take_calls();
    let cb = FakeCommandBuffer(0);
    let enc = match calls[1] {
        Call::ComputeCommandEncoder { encoder, .. } => encoder,
        ref c => panic!("unexpected {c:?}"),
    };
    // Same inputs and the same n: nothing is rebound or re-patched. Resources: int buffer,
    // fixed 0, fixed 1, inputs; each once.
    assert_eq!(
        calls,
        vec![
            Call::CommandBuffer {
                queue: FakeQueue(1),
                cb
            },
            Call::ComputeCommandEncoder { cb, encoder: enc },
            Call::UseResources {
                encoder: enc,
                resources: vec![
                    int_buf,
                    raw(&b.fixed[0]),
                    raw(&b.fixed[1]),
                    raw(&b.inputs[0]),
                    raw(&b.inputs[1])
                ],
            },
            Call::ExecuteCommandsInBuffer {
                encoder: enc,
                icb: FakeIcb(0),
                range: 0..3
            },
            Call::EndEncoding(enc),
            Call::Commit(cb),
            Call::WaitUntilCompleted(cb),
        ]
    );
}

#[test]
fn replay_rebinds_only_swapped_inputs_and_dedups_resources() {
    let mut b = build();
    let api = b.s.dev.api();
    api.clear_calls();
    // Input 1 becomes fixed buffer 0, which the graph already uses: declared once.
    b.g.replay(&b.s.dev, &[&b.inputs[0], &b.fixed[0]], &[10, 0], true)
        .unwrap();
    let calls = api.take_calls();
    let rebinds: Vec<_> = calls
        .iter()
        .filter(|c| matches!(c, Call::SetKernelBuffer { .. }))
        .cloned()
        .collect();
    assert_eq!(
        rebinds,
        vec![Call::SetKernelBuffer {
            command: cmd(2),
            buffer: raw(&b.fixed[0]),
            offset: 0,
            index: 0
        }]
    );
    let resources = calls.iter().find_map(|c| match c {
        Call::UseResources { resources, .. } => Some(resources.clone()),
        _ => None,
    });
    assert_eq!(
        resources.unwrap(),
        vec![
            raw(b.g.int_buffer().unwrap()),
            raw(&b.fixed[0]),
            raw(&b.fixed[1]),
            raw(&b.inputs[0])
        ]
    );
    // Both inputs swapped.
    b.g.replay(&b.s.dev, &[&b.inputs[2], &b.inputs[3]], &[10, 0], true)
        .unwrap();
    let rebinds: Vec<_> = api
        .take_calls()
        .into_iter()
        .filter(|c| matches!(c, Call::SetKernelBuffer { .. }))
        .collect();
    assert_eq!(
        rebinds,
        vec![
            Call::SetKernelBuffer {
                command: cmd(1),
                buffer: raw(&b.inputs[2]),
                offset: 0,
                index: 0
            },
            Call::SetKernelBuffer {
                command: cmd(2),
                buffer: raw(&b.inputs[3]),
                offset: 0,
                index: 0
            },
        ]
    );
}

#[test]
fn replay_repatches_dimensions_that_depend_on_changed_variables() {
    let mut b = build();
    let api = b.s.dev.api();
    let ins = [&b.inputs[0], &b.inputs[1]];
    api.clear_calls();
    // m changes, n does not: no dimension depends on m.
    b.g.replay(&b.s.dev, &ins, &[10, 4], true).unwrap();
    assert!(!api
        .take_calls()
        .iter()
        .any(|c| matches!(c, Call::ConcurrentDispatchThreadgroups { .. })));
    // n = 12: ceil(12/4) = 3, unchanged.
    b.g.replay(&b.s.dev, &ins, &[12, 4], true).unwrap();
    assert!(!api
        .take_calls()
        .iter()
        .any(|c| matches!(c, Call::ConcurrentDispatchThreadgroups { .. })));
    // n = 13: 4 threadgroups, only command 1 is re-patched, before the execute.
    b.g.replay(&b.s.dev, &ins, &[13, 4], true).unwrap();
    let calls = api.take_calls();
    let patches: Vec<_> = calls
        .iter()
        .filter(|c| matches!(c, Call::ConcurrentDispatchThreadgroups { .. }))
        .cloned()
        .collect();
    assert_eq!(
        patches,
        vec![Call::ConcurrentDispatchThreadgroups {
            command: cmd(1),
            groups: [4, 1, 1],
            threads: [4, 1, 1]
        }]
    );
    let at = |f: fn(&Call) -> bool| calls.iter().position(f).unwrap();
    assert!(
        at(|c| matches!(c, Call::ConcurrentDispatchThreadgroups { .. }))
            < at(|c| matches!(c, Call::Commit(_)))
    );
}

#[test]
fn replay_waits_for_the_previous_replay_only_while_it_is_in_flight() {
    let mut b = build();
    let api = b.s.dev.api();
    let ins = [&b.inputs[0], &b.inputs[1]];
    api.clear_calls();
    assert_eq!(b.g.replay(&b.s.dev, &ins, &[10, 0], false).unwrap(), None);
    assert!(b.g.in_flight(&b.s.dev));
    let first = FakeCommandBuffer(0);
    // The second replay changes the ICB (new input, new n): it must wait for the first one
    // before touching anything.
    b.g.replay(&b.s.dev, &[&b.inputs[2], &b.inputs[1]], &[20, 0], false)
        .unwrap();
    let calls = api.take_calls();
    let wait = calls
        .iter()
        .position(|c| *c == Call::WaitUntilCompleted(first))
        .expect("waits for the previous replay");
    let first_change = calls
        .iter()
        .position(|c| {
            matches!(
                c,
                Call::SetKernelBuffer { .. } | Call::ConcurrentDispatchThreadgroups { .. }
            )
        })
        .unwrap();
    assert!(wait < first_change);
    assert_eq!(api.status_of(first), hcq_metal::CommandStatus::Completed);
    // The previous replay already finished: no wait.
    api.complete_all();
    b.g.replay(&b.s.dev, &ins, &[20, 0], false).unwrap();
    assert!(!api
        .take_calls()
        .iter()
        .any(|c| matches!(c, Call::WaitUntilCompleted(_))));
    b.s.dev.synchronize().unwrap();
    assert!(!b.g.in_flight(&b.s.dev));
}

#[test]
fn a_failed_replay_is_a_device_fault() {
    let mut b = build();
    let ins = [&b.inputs[0], &b.inputs[1]];
    b.s.dev
        .api()
        .fail_next_commit("Internal Error (0000000e:Internal Error)");
    match b.g.replay(&b.s.dev, &ins, &[10, 0], true) {
        Err(Error::DeviceFault { message, .. }) => assert!(message.contains("Internal Error")),
        other => panic!("expected a device fault, got {other:?}"),
    }
    // Not waited on: the failure surfaces at the next replay that waits on it.
    b.s.dev.api().fail_next_commit("Caused GPU Hang Error");
    b.g.replay(&b.s.dev, &ins, &[10, 0], false).unwrap();
    assert!(matches!(
        b.g.replay(&b.s.dev, &ins, &[10, 0], false),
        Err(Error::DeviceFault { .. })
    ));
    // The graph stays usable.
    b.g.replay(&b.s.dev, &ins, &[10, 0], true).unwrap();
}

#[test]
fn too_many_bindings_is_an_error() {
    let s = setup();
    let fixed = bufs(&s.dev, 1);
    let mut sp = GraphSpec {
        items: vec![ExecItem {
            program: 0,
            buffers: vec![BufferRef::Fixed(0); 30],
            vars: vec![0, 0],
            global: dims([1, 1, 1]),
            local: dims([1, 1, 1]),
        }],
        vars: vec![VarSpec {
            name: "n".into(),
            min: 0,
            max: 9,
        }],
        num_inputs: 0,
    };
    let r = MetalGraph::new(&s.dev, sp.clone(), &[&s.progs[0]], &[&fixed[0]], &[], &[1]);
    match r {
        Err(Error::InvalidArgument(m)) => assert!(m.contains("32 bindings"), "{m}"),
        other => panic!("expected an error, got {other:?}"),
    }
    // 31 is fine.
    sp.items[0].vars.pop();
    MetalGraph::new(&s.dev, sp, &[&s.progs[0]], &[&fixed[0]], &[], &[1]).unwrap();
}

#[test]
fn bad_specs_and_values_are_errors_not_crashes() {
    let s = setup();
    let fixed = bufs(&s.dev, 2);
    let inputs = bufs(&s.dev, 2);
    let progs = [&s.progs[0], &s.progs[1]];
    let fx = [&fixed[0], &fixed[1]];
    let ins = [&inputs[0], &inputs[1]];
    let new = |sp: GraphSpec, vals: &[i32]| MetalGraph::new(&s.dev, sp, &progs, &fx, &ins, vals);
    let invalid = |r: hcq_core::Result<MetalGraph<FakeMetal>>| {
        assert!(
            matches!(r, Err(Error::InvalidArgument(_))),
            "expected InvalidArgument, got {r:?}"
        )
    };
    // Variable id far out of range (its int-buffer offset would overflow).
    let mut sp = spec();
    sp.items[1].vars = vec![usize::MAX / 2];
    invalid(new(sp, &[10, 0]));
    // Out of bounds value, wrong number of values.
    invalid(new(spec(), &[1001, 0]));
    invalid(new(spec(), &[10]));
    // Dimension overflow and zero dimensions.
    let mut sp = spec();
    sp.items[1].global[0] = DimExpr::from(Var::new(0)) * u32::MAX * u32::MAX;
    invalid(new(sp, &[10, 0]));
    let mut sp = spec();
    sp.items[1].global[0] = DimExpr::from(Var::new(0)) / 0u32;
    invalid(new(sp, &[10, 0]));
    let mut sp = spec();
    sp.items[1].global[0] = DimExpr::from(Var::new(1)) + 0u32;
    invalid(new(sp, &[10, 0]));
    // Unknown program, buffer, input; empty graph; wrong input count.
    let mut sp = spec();
    sp.items[0].program = 2;
    invalid(new(sp, &[10, 0]));
    let mut sp = spec();
    sp.items[0].buffers[0] = BufferRef::Fixed(5);
    invalid(new(sp, &[10, 0]));
    let mut sp = spec();
    sp.items[0].buffers[0] = BufferRef::Input(2);
    invalid(new(sp, &[10, 0]));
    invalid(new(GraphSpec::default(), &[]));
    invalid(MetalGraph::new(
        &s.dev,
        spec(),
        &progs,
        &fx,
        &ins[..1],
        &[10, 0],
    ));
    // A replay with bad values changes nothing and submits nothing.
    let mut g = new(spec(), &[10, 0]).unwrap();
    s.dev.api().clear_calls();
    assert!(g.replay(&s.dev, &ins, &[0, 0], false).is_err());
    assert!(g.replay(&s.dev, &ins, &[4000, 0], false).is_err());
    assert!(s.dev.api().take_calls().is_empty());
    // A graph replayed on another device.
    let other =
        MetalDevice::open_with_cache(FakeMetal::new(), 0, CompileCache::disabled()).unwrap();
    assert!(g.replay(&other, &[], &[10, 0], false).is_err());
}

/// A replay on a stream, then one on the device's queue: before the second patches the ICB it
/// waits for the first's command buffer on the stream's queue, which still reports it.
#[test]
fn a_replay_on_another_queue_waits_for_the_previous_one() {
    let mut b = build();
    let stream = b.s.dev.new_stream().unwrap();
    let inputs = [&b.inputs[0], &b.inputs[1]];
    b.g.replay(&stream, &inputs, &[10, 3], false).unwrap();
    assert!(b.g.in_flight(&stream) && !b.g.in_flight(&b.s.dev));
    let api = b.s.dev.api();
    let on_stream = match api.take_calls()[..] {
        [.., Call::CommandBuffer {
            queue: FakeQueue(2),
            cb,
        }, _, _, _, _, Call::Commit(c)]
            if c == cb =>
        {
            cb
        }
        ref other => panic!("unexpected calls {other:?}"),
    };
    assert_eq!(
        api.status_of(on_stream),
        hcq_metal::CommandStatus::Committed
    );
    // New n: the second replay re-patches item 1's dimensions, after waiting.
    b.g.replay(&b.s.dev, &inputs, &[20, 3], false).unwrap();
    let calls = api.take_calls();
    let wait = calls
        .iter()
        .position(|c| *c == Call::WaitUntilCompleted(on_stream))
        .expect("waited for the stream's replay");
    let patch = calls
        .iter()
        .position(|c| matches!(c, Call::ConcurrentDispatchThreadgroups { .. }))
        .expect("re-patched the dimensions");
    assert!(wait < patch, "{calls:?}");
    assert!(b.g.in_flight(&b.s.dev) && !b.g.in_flight(&stream));
    assert_eq!(stream.in_flight(), 1);
    stream.synchronize().unwrap();
    b.s.dev.synchronize().unwrap();
}
