//! Streams and events on the emulated GPU: two streams overlap (and one stream does not), an
//! event orders a stream after another (on one GPU and across two), the host waits for
//! events and times the GPU between them, copies and fills run on a stream, memory freed while
//! a stream still uses it is not handed out again, and misuse is a clear error. Results are
//! checked element by element against the host.

use hcq::{Arg, Buffer, Device, Error, Event, Program, Stream};
use std::sync::Once;
use std::time::{Duration, Instant};

const SRC: &str = r#"
#define KERNEL extern "C" __attribute__((global))
// Runs `rounds` steps of a linear congruential generator per work-item (keeping the GPU busy
// for a while), stores its state in sink[i], then out[i] = in[i] * 3 + 1.
KERNEL void slow_scale(int* out, const int* in, unsigned* sink, int n, int rounds) {
  int i = __builtin_amdgcn_workgroup_id_x() * 64 + __builtin_amdgcn_workitem_id_x();
  unsigned acc = i;
  for (int r = 0; r < rounds; r++) acc = acc * 1664525u + 1013904223u;
  if (i < n) { sink[i] = acc; out[i] = in[i] * 3 + 1; }
}

// Keeps a private array in scratch memory for a long time: `rounds` passes that rotate it
// and add to it, then out[i] = the array's sum.
KERNEL void slow_scratch(int* out, const int* in, int n, int rounds) {
  int i = __builtin_amdgcn_workgroup_id_x() * 64 + __builtin_amdgcn_workitem_id_x();
  volatile int tmp[40];
  for (int k = 0; k < 40; k++) tmp[k] = in[(i + k) % n];
  for (int r = 0; r < rounds; r++) {
    int first = tmp[0];
    for (int k = 0; k < 39; k++) tmp[k] = tmp[k + 1] + 1;
    tmp[39] = first + 1;
  }
  int s = 0;
  for (int k = 0; k < 40; k++) s += tmp[k];
  if (i < n) out[i] = s;
}

// A private array indexed at run time lives in scratch memory.
KERNEL void scratch_sum(int* out, const int* in, int n) {
  int i = __builtin_amdgcn_workgroup_id_x() * 64 + __builtin_amdgcn_workitem_id_x();
  volatile int tmp[40];
  for (int k = 0; k < 40; k++) tmp[k] = in[(i + k) % n] * (k + 1);
  int s = 0;
  for (int k = 0; k < 40; k++) s += tmp[(k * 7 + i) % 40];
  if (i < n) out[i] = s;
}
"#;

/// Steps of the generator: enough to keep a wave busy for tens of milliseconds.
const ROUNDS: i32 = 200_000;
const N: usize = 64;

fn device(index: usize) -> Device {
    static GPUS: Once = Once::new();
    // Before the emulator first starts (every test of this process goes through here).
    GPUS.call_once(|| std::env::set_var("HCQ_EMU_GPUS", "2"));
    Device::open(&format!("amd-emu:{index}")).expect("the emulated GPU opens")
}

fn programs(dev: &Device) -> (Program, Program) {
    let lib = dev.compile(SRC).expect("compiles with clang-19");
    (
        dev.program(&lib, "slow_scale").unwrap(),
        dev.program(&lib, "scratch_sum").unwrap(),
    )
}

fn lcg(i: u32, rounds: i32) -> u32 {
    (0..rounds).fold(i, |acc, _| {
        acc.wrapping_mul(1_664_525).wrapping_add(1_013_904_223)
    })
}

/// Queues `slow_scale` on `stream`: out = in * 3 + 1 after `rounds` generator steps.
fn slow(stream: &Stream, prg: &Program, out: &Buffer, input: &Buffer, sink: &Buffer, rounds: i32) {
    let args = [
        Arg::Buffer(out),
        Arg::Buffer(input),
        Arg::Buffer(sink),
        Arg::I32(N as i32),
        Arg::I32(rounds),
    ];
    stream.launch(prg, &args, [1, 1, 1], [64, 1, 1]).unwrap();
}

fn check_slow(out: &Buffer, input: &[i32], sink: &Buffer, rounds: i32) {
    let got: Vec<i32> = out.read().unwrap();
    for (i, (&g, &x)) in got.iter().zip(input).enumerate() {
        assert_eq!(g, x.wrapping_mul(3).wrapping_add(1), "out[{i}]");
    }
    let states: Vec<u32> = sink.read().unwrap();
    for (i, &s) in states.iter().enumerate() {
        assert_eq!(s, lcg(i as u32, rounds), "sink[{i}]");
    }
}

struct Run {
    input: Vec<i32>,
    inp: Buffer,
    out: Buffer,
    sink: Buffer,
}

fn run_buffers(dev: &Device, seed: i32) -> Run {
    let input: Vec<i32> = (0..N as i32).map(|i| i * 37 - seed).collect();
    let inp = dev.alloc(N * 4).unwrap();
    inp.write(&input).unwrap();
    let (out, sink) = (
        dev.alloc_zeros::<i32>(N).unwrap(),
        dev.alloc(N * 4).unwrap(),
    );
    dev.synchronize().unwrap();
    Run {
        input,
        inp,
        out,
        sink,
    }
}

/// Records events around a slow kernel on `stream`; returns (start, end).
fn timed_slow(stream: &Stream, prg: &Program, r: &Run) -> (Event, Event) {
    let start = stream.record_event().unwrap();
    slow(stream, prg, &r.out, &r.inp, &r.sink, ROUNDS);
    (start, stream.record_event().unwrap())
}

#[test]
fn two_streams_overlap_and_one_stream_runs_in_order() {
    let dev = device(0);
    let (prg, _) = programs(&dev);
    let (s1, s2) = (dev.stream().unwrap(), dev.stream().unwrap());
    let (a, b) = (run_buffers(&dev, 1), run_buffers(&dev, 2));

    let (a0, a1) = timed_slow(&s1, &prg, &a);
    let (b0, b1) = timed_slow(&s2, &prg, &b);
    a1.synchronize().unwrap();
    b1.synchronize().unwrap();
    check_slow(&a.out, &a.input, &a.sink, ROUNDS);
    check_slow(&b.out, &b.input, &b.sink, ROUNDS);
    // Both kernels ran at once: each started before the other ended. The events' clocks are
    // one GPU's, so the times since the first event order them.
    let (a_start, a_end) = (Duration::ZERO, a1.elapsed_since(&a0).unwrap());
    let b_start = b0.elapsed_since(&a0).unwrap_or(Duration::ZERO);
    let b_end = b1.elapsed_since(&a0).unwrap();
    assert!(
        a_end > Duration::from_millis(1),
        "a kernel that long: {a_end:?}"
    );
    assert!(
        b_start < a_end && a_start <= b_end,
        "streams did not overlap: a {a_start:?}..{a_end:?}, b from {b_start:?} to {b_end:?}"
    );

    // The same two kernels on one stream: the second starts after the first ends.
    let (c, d) = (run_buffers(&dev, 3), run_buffers(&dev, 4));
    let (c0, c1) = timed_slow(&s1, &prg, &c);
    let (d0, d1) = timed_slow(&s1, &prg, &d);
    d1.synchronize().unwrap();
    assert!(c0.is_complete() && c1.is_complete() && d0.is_complete());
    check_slow(&c.out, &c.input, &c.sink, ROUNDS);
    check_slow(&d.out, &d.input, &d.sink, ROUNDS);
    assert!(d0.elapsed_since(&c1).is_ok(), "one stream ran out of order");
}

#[test]
fn an_event_orders_one_stream_after_another() {
    let dev = device(0);
    let (prg, _) = programs(&dev);
    let (s1, s2) = (dev.stream().unwrap(), dev.stream().unwrap());
    let r = run_buffers(&dev, 5);
    let second = dev.alloc_zeros::<i32>(N).unwrap();
    let sink2 = dev.alloc(N * 4).unwrap();
    dev.synchronize().unwrap();

    // s1 computes `out` slowly; s2 then reads it (out * 3 + 1 into `second`) once the event
    // says s1 is done. Without the wait, s2 would read the zeros `out` holds meanwhile.
    slow(&s1, &prg, &r.out, &r.inp, &r.sink, ROUNDS);
    let done = s1.record_event().unwrap();
    assert!(
        !done.is_complete(),
        "the slow kernel cannot be done already"
    );
    s2.wait_event(&done).unwrap();
    slow(&s2, &prg, &second, &r.out, &sink2, 1);
    s2.synchronize().unwrap();
    assert!(
        done.is_complete(),
        "s2 finished before the event it waited for"
    );
    let got: Vec<i32> = second.read().unwrap();
    for (i, (&g, &x)) in got.iter().zip(&r.input).enumerate() {
        let once = x.wrapping_mul(3).wrapping_add(1);
        assert_eq!(g, once.wrapping_mul(3).wrapping_add(1), "second[{i}]");
    }

    // The device's own queue waits for a stream's event as well.
    slow(&s1, &prg, &r.out, &r.inp, &r.sink, ROUNDS);
    let done = s1.record_event().unwrap();
    dev.wait_event(&done).unwrap();
    let after = dev.record_event().unwrap();
    after.synchronize().unwrap();
    assert!(
        done.is_complete(),
        "the device's queue did not wait for the event"
    );
    // A stream's own event orders nothing new, and waiting for it is accepted.
    s1.wait_event(&done).unwrap();
}

#[test]
fn the_host_waits_for_events_and_times_the_gpu_between_them() {
    let dev = device(0);
    let (prg, _) = programs(&dev);
    let s = dev.stream().unwrap();
    let r = run_buffers(&dev, 6);
    let host_start = Instant::now();
    let (start, end) = timed_slow(&s, &prg, &r);
    assert!(!end.is_complete());
    // An event not reached yet has no time.
    assert!(matches!(
        end.elapsed_since(&start),
        Err(Error::InvalidArgument(_))
    ));
    end.synchronize().unwrap();
    let host = host_start.elapsed();
    assert!(start.is_complete() && end.is_complete());
    check_slow(&r.out, &r.input, &r.sink, ROUNDS);
    let gpu = end.elapsed_since(&start).unwrap();
    assert!(
        gpu > Duration::ZERO && gpu <= host,
        "GPU time {gpu:?} against {host:?} on the host"
    );
    // Backwards is an error, not a wrapped duration.
    assert!(matches!(
        start.elapsed_since(&end),
        Err(Error::InvalidArgument(_))
    ));
    // An event of the device's own queue is waited for the same way.
    let e = dev.record_event().unwrap();
    e.synchronize().unwrap();
    assert!(e.is_complete() && e.stream().is_default());
}

#[test]
fn device_synchronize_waits_for_every_stream() {
    let dev = device(0);
    let (prg, _) = programs(&dev);
    let s = dev.stream().unwrap();
    let r = run_buffers(&dev, 7);
    slow(&s, &prg, &r.out, &r.inp, &r.sink, ROUNDS);
    let done = s.record_event().unwrap();
    dev.synchronize().unwrap();
    assert!(done.is_complete());
    check_slow(&r.out, &r.input, &r.sink, ROUNDS);
}

#[test]
fn copies_and_fills_run_on_a_stream() {
    let dev = device(0);
    let s = dev.stream().unwrap();
    let n = 300_001; // odd: unaligned tails, and more than one staging chunk below
    let xs: Vec<u8> = (0..n).map(|i| (i * 131 % 251) as u8).collect();
    let a = dev.alloc(n).unwrap();
    let b = dev.alloc(n).unwrap();
    s.copy_in(&a, 0, &xs).unwrap();
    s.copy(&a, 1, &b, 0, n - 1).unwrap();
    let mut got = vec![0u8; n - 1];
    s.copy_out(&b, 0, &mut got).unwrap();
    assert_eq!(got, xs[1..]);
    s.fill(&b.view(4, 4000).unwrap(), 0xa5c3u16).unwrap();
    let mut filled = vec![0u8; 4008];
    s.copy_out(&b, 0, &mut filled).unwrap();
    assert_eq!(filled[..4], xs[1..5]);
    for (k, &v) in filled[4..4004].iter().enumerate() {
        assert_eq!(v, if k % 2 == 0 { 0xc3 } else { 0xa5 }, "byte {k}");
    }
    assert_eq!(filled[4004..], xs[4005..4009]);
    // A copy the host makes through its own pages (16 MiB and more) on a stream.
    let big: Vec<u32> = (0..(5u32 << 20)).map(|i| i ^ 0x9e37_79b9).collect();
    let c = dev.alloc(big.len() * 4).unwrap();
    s.copy_in(&c, 0, bytemuck::cast_slice(&big)).unwrap();
    let mut back = vec![0u32; big.len()];
    s.copy_out(&c, 0, bytemuck::cast_slice_mut(&mut back))
        .unwrap();
    assert!(back == big, "16+ MiB round trip on a stream");
}

#[test]
fn memory_freed_while_a_stream_uses_it_is_not_handed_out_again() {
    let dev = device(0);
    let (prg, _) = programs(&dev);
    let s = dev.stream().unwrap();
    // A size no other test allocates, so the cache's only buffer of it is the dropped one.
    let odd = N * 4 + 4 * 4099;
    let input: Vec<i32> = (0..N as i32).map(|i| 1000 - i * 3).collect();
    let inp = dev.alloc(odd).unwrap();
    inp.write(&input).unwrap();
    let out = dev.alloc_zeros::<i32>(N).unwrap();
    let sink = dev.alloc(N * 4).unwrap();
    dev.synchronize().unwrap();
    slow(&s, &prg, &out, &inp.view(0, N * 4).unwrap(), &sink, ROUNDS);
    drop(inp);
    // Had the dropped memory come back here, this copy (on the device's idle queue) would
    // overwrite it while the stream's kernel has yet to read it.
    let again = dev.alloc(odd).unwrap();
    again.write(&vec![-7i32; odd / 4]).unwrap();
    s.synchronize().unwrap();
    check_slow(&out, &input, &sink, ROUNDS);
    assert_eq!(again.read::<i32>().unwrap(), vec![-7; odd / 4]);
}

#[test]
fn programs_that_need_scratch_run_on_a_stream() {
    let dev = device(0);
    let (_, prg) = programs(&dev);
    assert!(prg.info().unwrap().scratch_per_lane > 0, "uses scratch");
    let s = dev.stream().unwrap();
    let n = 256;
    let xs: Vec<i32> = (0..n as i32).map(|i| i * 5 - 600).collect();
    let (inp, out) = (dev.alloc(n * 4).unwrap(), dev.alloc(n * 4).unwrap());
    s.copy_in(&inp, 0, bytemuck::cast_slice(&xs)).unwrap();
    let args = [Arg::Buffer(&out), Arg::Buffer(&inp), Arg::I32(n as i32)];
    s.launch(&prg, &args, [(n / 64) as u32, 1, 1], [64, 1, 1])
        .unwrap();
    let mut got = vec![0i32; n];
    s.copy_out(&out, 0, bytemuck::cast_slice_mut(&mut got))
        .unwrap();
    for (i, &g) in got.iter().enumerate() {
        let want: i32 = (0..40)
            .map(|k| {
                let j = (k * 7 + i) % 40;
                xs[(i + j) % n].wrapping_mul(j as i32 + 1)
            })
            .fold(0i32, i32::wrapping_add);
        assert_eq!(g, want, "out[{i}]");
    }
}

#[test]
fn an_event_orders_work_across_gpus() {
    let (d0, d1) = (device(0), device(1));
    let (prg, _) = programs(&d0);
    let (s, other) = (d0.stream().unwrap(), d1.stream().unwrap());
    let r = run_buffers(&d0, 8);
    slow(&s, &prg, &r.out, &r.inp, &r.sink, ROUNDS);
    let done = s.record_event().unwrap();
    assert!(
        !done.is_complete(),
        "the slow kernel cannot be done already"
    );
    other.wait_event(&done).unwrap();
    let after = other.record_event().unwrap();
    after.synchronize().unwrap();
    assert!(
        done.is_complete(),
        "the other GPU did not wait for the event"
    );
    check_slow(&r.out, &r.input, &r.sink, ROUNDS);
    // The two GPUs' clocks are not one clock.
    assert!(matches!(
        after.elapsed_since(&done),
        Err(Error::InvalidArgument(_))
    ));
}

#[test]
fn work_of_another_device_on_a_stream_is_refused() {
    let (d0, d1) = (device(0), device(1));
    let (prg, _) = programs(&d0);
    let s1 = d1.stream().unwrap();
    let b0 = d0.alloc(64).unwrap();
    let b1 = d1.alloc(64).unwrap();
    let refused = |r: hcq::Result<()>| match r {
        Err(Error::InvalidArgument(m)) => assert!(m.contains("amd-emu:0"), "{m}"),
        other => panic!("expected InvalidArgument, got {other:?}"),
    };
    refused(s1.copy_in(&b0, 0, &[1, 2, 3]));
    refused(s1.copy_out(&b0, 0, &mut [0; 3]));
    refused(s1.fill(&b0, 0u8));
    refused(s1.copy(&b0, 0, &b1, 0, 4));
    refused(s1.launch(&prg, &[Arg::Buffer(&b1)], [1, 1, 1], [64, 1, 1]));
    // A buffer of another device as a kernel argument.
    let s0 = d0.stream().unwrap();
    let args = [
        Arg::Buffer(&b1),
        Arg::Buffer(&b0),
        Arg::Buffer(&b0),
        Arg::I32(1),
        Arg::I32(1),
    ];
    assert!(matches!(
        s0.launch(&prg, &args, [1, 1, 1], [64, 1, 1]),
        Err(Error::InvalidArgument(_))
    ));
    // A copy from a stream to another GPU is fine.
    s0.copy_in(&b0, 0, &[9; 64]).unwrap();
    s0.copy(&b0, 0, &b1, 0, 64).unwrap();
    assert_eq!(b1.read::<u8>().unwrap(), vec![9; 64]);
}

#[test]
fn graphs_replay_on_streams() {
    let dev = device(0);
    let (prg, scratch_prg) = programs(&dev);
    let (s1, s2) = (dev.stream().unwrap(), dev.stream().unwrap());
    let a = run_buffers(&dev, 9);
    let b = run_buffers(&dev, 10);
    // A graph of one launch: out = in * 3 + 1, its input swappable.
    let mut g = hcq::GraphBuilder::new();
    let input = g.input(&a.inp);
    let args = [
        hcq::GraphArg::Buffer(&a.out),
        hcq::GraphArg::Input(input),
        hcq::GraphArg::Buffer(&a.sink),
        hcq::GraphArg::Value(hcq::Arg::I32(N as i32)),
        hcq::GraphArg::Value(hcq::Arg::I32(1)),
    ];
    let to_dims = |d: [u32; 3]| d.map(hcq::DimExpr::from);
    g.launch(&prg, &args, to_dims([1, 1, 1]), to_dims([64, 1, 1]))
        .unwrap();
    let graph = g.build().unwrap();
    // On s1, after a slow kernel there that writes the graph's input: ordered on s1 alone.
    let fresh: Vec<i32> = (0..N as i32).map(|i| 7 - i).collect();
    s1.copy_in(&b.inp, 0, bytemuck::cast_slice(&fresh)).unwrap();
    slow(&s1, &prg, &b.out, &b.inp, &b.sink, ROUNDS);
    graph.replay_on(&s1, &[&b.out], &[]).unwrap();
    s1.synchronize().unwrap();
    let once: Vec<i32> = fresh.iter().map(|x| x * 3 + 1).collect();
    let twice: Vec<i32> = once.iter().map(|x| x * 3 + 1).collect();
    assert_eq!(a.out.read::<i32>().unwrap(), twice);
    // Then on s2 (it waits for the replay on s1), and on the device's own queue.
    graph.replay_on(&s2, &[&a.inp], &[]).unwrap();
    s2.synchronize().unwrap();
    let from_a: Vec<i32> = a.input.iter().map(|x| x * 3 + 1).collect();
    assert_eq!(a.out.read::<i32>().unwrap(), from_a);
    graph
        .replay_on(&dev.default_stream(), &[&b.out], &[])
        .unwrap();
    assert_eq!(a.out.read::<i32>().unwrap(), twice);
    // Back and forth without waiting in between: each switch waits for the last replay.
    for round in 0..4 {
        let s = if round % 2 == 0 { &s1 } else { &s2 };
        graph.replay_on(s, &[&a.inp], &[]).unwrap();
        graph.replay(&[&b.out], &[]).unwrap();
    }
    dev.synchronize().unwrap();
    assert_eq!(a.out.read::<i32>().unwrap(), twice);

    // A graph whose kernel uses scratch memory replays on a stream too: its dispatches are
    // pointed at that stream's scratch ring, and back at the device's when it returns there.
    let mut g = hcq::GraphBuilder::new();
    let n = 64;
    let out = dev.alloc(n * 4).unwrap();
    let scratch_input = g.input(&a.inp);
    let args = [
        hcq::GraphArg::Buffer(&out),
        hcq::GraphArg::Input(scratch_input),
        hcq::GraphArg::Value(hcq::Arg::I32(n as i32)),
    ];
    g.launch(&scratch_prg, &args, to_dims([1, 1, 1]), to_dims([64, 1, 1]))
        .unwrap();
    let scratchy = g.build().unwrap();
    let scratch_sums = |input: &[i32]| -> Vec<i32> {
        (0..n)
            .map(|i| {
                let tmp: Vec<i32> = (0..40)
                    .map(|k| input[(i + k) % n] * (k as i32 + 1))
                    .collect();
                (0..40).map(|k| tmp[(k * 7 + i) % 40]).sum()
            })
            .collect()
    };
    // b's input holds `fresh` since the copy at the start.
    let (from_a, from_b) = (scratch_sums(&a.input), scratch_sums(&fresh));
    for (round, (stream, input, expected)) in [
        (Some(&s1), &a.inp, &from_a),
        (Some(&s2), &b.inp, &from_b),
        (None, &a.inp, &from_a),
        (Some(&s1), &b.inp, &from_b),
    ]
    .into_iter()
    .enumerate()
    {
        out.fill(0i32).unwrap();
        dev.synchronize().unwrap();
        match stream {
            Some(s) => {
                scratchy.replay_on(s, &[input], &[]).unwrap();
                s.synchronize().unwrap();
            }
            None => {
                scratchy.replay(&[input], &[]).unwrap();
                dev.synchronize().unwrap();
            }
        }
        assert_eq!(&out.read::<i32>().unwrap(), expected, "round {round}");
    }
    // A graph of another device.
    let other = device(1).stream().unwrap();
    assert!(matches!(
        graph.replay_on(&other, &[&a.inp], &[]),
        Err(Error::InvalidArgument(_))
    ));
}

/// A JIT called on a stream launches there while eager and capturing, then replays its graph
/// there: each call is ordered after a slow kernel queued on the same stream that writes the
/// call's input, so it reads what that kernel wrote, not what the input held before. A JIT
/// whose kernel uses scratch memory replays on the stream too.
#[test]
fn a_jit_runs_on_a_stream() {
    let dev = device(0);
    let (prg, scratch_prg) = programs(&dev);
    let stream = dev.stream().unwrap();
    let sink = dev.alloc(N * 4).unwrap();
    let mut jit = hcq::Jit::new(&[], |r: &mut hcq::JitRecorder<'_>| {
        r.launch(
            &prg,
            &[
                hcq::JitArg::Output(0),
                hcq::JitArg::Input(0),
                hcq::JitArg::Buffer(&sink),
                hcq::JitArg::Value(Arg::I32(N as i32)),
                hcq::JitArg::Value(Arg::I32(1)),
            ],
            [1u32.into(), 1u32.into(), 1u32.into()],
            [64u32.into(), 1u32.into(), 1u32.into()],
        )
    })
    .unwrap();
    let slow_sink = dev.alloc(N * 4).unwrap();
    for call in 0..5 {
        let staged = dev.alloc(N * 4).unwrap();
        let input = dev.alloc(N * 4).unwrap();
        let output = dev.alloc(N * 4).unwrap();
        let values: Vec<i32> = (0..N as i32).map(|i| i * 5 - call).collect();
        staged.write(&values).unwrap();
        input.fill(0i32).unwrap();
        dev.synchronize().unwrap();
        // input = staged * 3 + 1, slowly, on the stream; the call must come after it.
        slow(&stream, &prg, &input, &staged, &slow_sink, ROUNDS / 4);
        jit.call_on(&stream, &[&input], &[&output], &[]).unwrap();
        stream.synchronize().unwrap();
        let expected: Vec<i32> = values.iter().map(|x| (x * 3 + 1) * 3 + 1).collect();
        assert_eq!(output.read::<i32>().unwrap(), expected, "call {call}");
        assert_eq!(jit.is_captured(), call >= 1, "call {call}");
    }

    let out = dev.alloc(N * 4).unwrap();
    let input = dev.alloc(N * 4).unwrap();
    let values: Vec<i32> = (0..N as i32).map(|i| 3 * i + 1).collect();
    input.write(&values).unwrap();
    let mut scratchy = hcq::Jit::new(&[], |r: &mut hcq::JitRecorder<'_>| {
        r.launch(
            &scratch_prg,
            &[
                hcq::JitArg::Output(0),
                hcq::JitArg::Input(0),
                hcq::JitArg::Value(Arg::I32(N as i32)),
            ],
            [1u32.into(), 1u32.into(), 1u32.into()],
            [64u32.into(), 1u32.into(), 1u32.into()],
        )
    })
    .unwrap();
    let expected: Vec<i32> = (0..N)
        .map(|i| {
            let tmp: Vec<i32> = (0..40)
                .map(|k| values[(i + k) % N] * (k as i32 + 1))
                .collect();
            (0..40).map(|k| tmp[(k * 7 + i) % 40]).sum()
        })
        .collect();
    for call in 0..4 {
        out.fill(0i32).unwrap();
        dev.synchronize().unwrap();
        scratchy.call_on(&stream, &[&input], &[&out], &[]).unwrap();
        stream.synchronize().unwrap();
        assert_eq!(out.read::<i32>().unwrap(), expected, "call {call}");
        assert_eq!(scratchy.is_captured(), call >= 1, "call {call}");
    }
}

/// A graph whose kernel uses scratch, replayed on a stream while a long kernel that keeps its
/// own array in scratch runs on the device's queue: each names its own queue's scratch ring,
/// so neither overwrites the other's private memory (named the device's ring, the replay's
/// waves would take the slots the long kernel's waves hold).
#[test]
fn a_graph_on_a_stream_uses_that_streams_scratch() {
    let dev = device(0);
    let lib = dev.compile(SRC).unwrap();
    let (long, short) = (
        dev.program(&lib, "slow_scratch").unwrap(),
        dev.program(&lib, "scratch_sum").unwrap(),
    );
    let n = 64usize;
    let input: Vec<i32> = (0..n as i32).map(|i| 5 * i - 90).collect();
    let inp = dev.alloc(n * 4).unwrap();
    inp.write(&input).unwrap();
    let (long_out, short_out) = (dev.alloc(n * 4).unwrap(), dev.alloc(n * 4).unwrap());
    let mut g = hcq::GraphBuilder::new();
    let to_dims = |d: [u32; 3]| d.map(hcq::DimExpr::from);
    g.launch(
        &short,
        &[
            hcq::GraphArg::Buffer(&short_out),
            hcq::GraphArg::Buffer(&inp),
            hcq::GraphArg::Value(Arg::I32(n as i32)),
        ],
        to_dims([1, 1, 1]),
        to_dims([64, 1, 1]),
    )
    .unwrap();
    let graph = g.build().unwrap();
    let stream = dev.stream().unwrap();
    let rounds = 3000;
    for attempt in 0..3 {
        long_out.fill(0i32).unwrap();
        short_out.fill(0i32).unwrap();
        dev.synchronize().unwrap();
        long.launch(
            &[
                Arg::Buffer(&long_out),
                Arg::Buffer(&inp),
                Arg::I32(n as i32),
                Arg::I32(rounds),
            ],
            [1, 1, 1],
            [64, 1, 1],
        )
        .unwrap();
        graph.replay_on(&stream, &[], &[]).unwrap();
        dev.synchronize().unwrap();
        let long_expected: Vec<i32> = (0..n)
            .map(|i| (0..40).map(|k| input[(i + k) % n]).sum::<i32>() + 40 * rounds)
            .collect();
        let short_expected: Vec<i32> = (0..n)
            .map(|i| {
                let tmp: Vec<i32> = (0..40)
                    .map(|k| input[(i + k) % n] * (k as i32 + 1))
                    .collect();
                (0..40).map(|k| tmp[(k * 7 + i) % 40]).sum()
            })
            .collect();
        assert_eq!(
            long_out.read::<i32>().unwrap(),
            long_expected,
            "attempt {attempt}"
        );
        assert_eq!(
            short_out.read::<i32>().unwrap(),
            short_expected,
            "attempt {attempt}"
        );
    }
}

#[test]
fn an_event_of_another_driver_is_refused() {
    use hcq_amd::{AmdDevice, AmdDriver};
    use hcq_emu::{EmuConfig, EmuKernel};
    let dev = device(0);
    // A second emulated kernel driver: its signal page is not mapped on the first's GPUs.
    let kernel: std::sync::Arc<dyn hcq_amd_sys::seam::Syscalls> =
        std::sync::Arc::new(EmuKernel::new(EmuConfig {
            gpus: 1,
            vram_bytes: 1 << 30,
            ..EmuConfig::default()
        }));
    let driver = AmdDriver::new(kernel, "private", true).unwrap();
    let other = Device::from_amd(AmdDevice::open(&driver, 0).unwrap());
    let theirs = other.record_event().unwrap();
    match dev.stream().unwrap().wait_event(&theirs) {
        Err(Error::InvalidArgument(m)) => assert!(m.contains("different kernel drivers"), "{m}"),
        other => panic!("expected InvalidArgument, got {other:?}"),
    }
    theirs.synchronize().unwrap();
}
