//! `hcq soak`: a long run of kernel launches, graph replays and copies, every result checked
//! against the host, with the process's resident memory, file descriptors and memory mappings
//! compared between the start (after a warm-up) and the end.
//!
//! Every piece of work is derived from its index, so results are checked in batches without a
//! read-back per launch: launch `i` of a batch writes its own slot of an output buffer, which
//! starts the batch filled with a sentinel; the check recomputes each slot on the host and also
//! sees a launch that was lost (its slot still holds the sentinel) or wrote past its elements.

mod resources;
#[cfg(test)]
mod tests;
mod work;

use crate::prebuilt;
use hcq::{Arg, Buffer, DimExpr, DimExprs, GraphArg, JitArg, Program};
use resources::{
    growth_failures, growth_percent, new_mappings, read_maps, resource_rows, resources, Resources,
};
use std::time::{Duration, Instant};
use work::{
    check_copy, check_launches, check_replays, copy_round, launch_plan, replay_plan, sentinel,
    IntKernel, Rng,
};

/// `i32` elements of one launch's or one replay's output slot; also the most elements one
/// launch or replay computes.
const SLOT: usize = 160;
/// `i32` elements of each input buffer that launches read from at varying offsets.
const INPUT_ELEMS: usize = 8192;
/// Launches, and replays, between two checks.
const BATCH: usize = 1000;
/// Every this many replays goes through `hcq::Jit` instead of the graph.
const JIT_EVERY: u64 = 16;
/// Bytes of each of the two device buffers the copies move data between.
const COPY_SPACE: usize = 24 << 20;
/// Every this many copy rounds moves at least 16 MiB, the size from which copies read or write
/// the caller's memory in place instead of staging it.
const LARGE_COPY_EVERY: u64 = 1000;
/// Bounds of those large copies.
const LARGE_COPY_MIN: usize = 16 << 20;
const LARGE_COPY_MAX: usize = 20 << 20;
/// The largest copy the soak stages through the copy engine's ring of staging buffers (small
/// copy rounds and the batches' sentinel fills and read-backs; larger ones go in place).
const STAGED_MAX: usize = 1 << 20;
/// Round trips of `STAGED_MAX` bytes in the warm-up: enough to pass several times through a
/// staging ring (16 buffers today), whose pages become resident as it first turns.
const WARM_STAGED_ROUND_TRIPS: usize = 64;
/// Tiny copies between two looks at resident memory while the copy engine's ring turns.
const COPY_RING_ROUND: u64 = 1000;
/// Most rounds of tiny copies in the warm-up.
const COPY_RING_MAX_ROUNDS: u64 = 100;
/// Copies in one round: host to device, device to device, device to host.
const COPIES_PER_ROUND: u64 = 3;
/// Bytes around each read-back region that are checked to be untouched.
const GUARD: usize = 64;
/// Largest growth of a resource figure between the start and the end that passes, in percent.
const MAX_GROWTH_PERCENT: f64 = 5.0;
/// Seconds between progress lines.
const PROGRESS_EVERY: Duration = Duration::from_secs(2);

/// What to run.
pub struct Options {
    pub launches: u64,
    pub replays: u64,
    pub copies: u64,
    pub json: bool,
    pub device: Option<String>,
}

/// Prints a progress line on stderr at most every `PROGRESS_EVERY`.
struct Progress {
    what: &'static str,
    total: u64,
    start: Instant,
    last: Instant,
}

impl Progress {
    fn new(what: &'static str, total: u64) -> Self {
        let now = Instant::now();
        Progress {
            what,
            total,
            start: now,
            last: now,
        }
    }

    fn update(&mut self, done: u64) {
        if self.last.elapsed() >= PROGRESS_EVERY {
            self.last = Instant::now();
            let rate = done as f64 / self.start.elapsed().as_secs_f64();
            eprintln!("  {} {done}/{} ({rate:.0}/s)", self.what, self.total);
        }
    }
}

/// A phase's result: how much was done, in how long.
struct PhaseResult {
    name: &'static str,
    count: u64,
    elapsed: Duration,
    detail: String,
}

fn e(err: hcq::Error) -> String {
    err.to_string()
}

/// Host buffers for the batches' read-backs, allocated once: a batch that allocated its own
/// would move the C allocator's thresholds and look like growth.
struct Scratch {
    bytes: Vec<u8>,
    got: Vec<i32>,
    got2: Vec<i32>,
}

impl Scratch {
    fn new() -> Self {
        Scratch {
            bytes: Vec::with_capacity(BATCH * SLOT * 4),
            got: Vec::with_capacity(BATCH * SLOT),
            got2: Vec::with_capacity(BATCH * SLOT),
        }
    }
}

/// Reads `buffer` as `i32`s into `into` through the reusable `bytes`.
fn read_ints(buffer: &Buffer, bytes: &mut Vec<u8>, into: &mut Vec<i32>) -> Result<(), String> {
    bytes.resize(buffer.size(), 0);
    buffer.copy_out(0, bytes).map_err(e)?;
    into.clear();
    into.extend(
        bytes
            .chunks_exact(4)
            .map(|c| i32::from_le_bytes([c[0], c[1], c[2], c[3]])),
    );
    Ok(())
}

fn fill_ints(buffer: &Buffer, value: i32, bytes: &mut Vec<u8>) -> Result<(), String> {
    bytes.clear();
    bytes.extend(std::iter::repeat_n(value.to_le_bytes(), buffer.size() / 4).flatten());
    buffer.copy_in(0, bytes).map_err(e)
}

fn ints_to_bytes(values: &[i32]) -> Vec<u8> {
    values.iter().flat_map(|v| v.to_le_bytes()).collect()
}

/// The device's buffers and programs for the launch and replay phases.
struct Kernels {
    programs: [Program; 3],
    /// The inputs that launches (both) and replays (`a`) read at varying offsets.
    a: Buffer,
    b: Buffer,
    host_a: Vec<i32>,
    host_b: Vec<i32>,
}

/// Launches `count` kernels numbered from `first`, in batches, checking each batch.
fn launches(
    k: &Kernels,
    out: &Buffer,
    first: u64,
    count: u64,
    scratch: &mut Scratch,
    mut progress: Option<&mut Progress>,
) -> Result<(), String> {
    let Scratch { bytes, got, .. } = scratch;
    let mut done = 0;
    while done < count {
        let batch = (count - done).min(BATCH as u64);
        let batch_first = first + done;
        let fill = sentinel(batch_first);
        fill_ints(out, fill, bytes)?;
        for slot in 0..batch {
            let plan = launch_plan(batch_first + slot);
            let o = out.view(slot as usize * SLOT * 4, SLOT * 4).map_err(e)?;
            let a = k.a.view(plan.a_at * 4, plan.n * 4).map_err(e)?;
            let b = k.b.view(plan.b_at * 4, plan.n * 4).map_err(e)?;
            k.programs[plan.kernel as usize]
                .launch(
                    &[
                        Arg::Buffer(&o),
                        Arg::Buffer(&a),
                        Arg::Buffer(&b),
                        Arg::I32(plan.n as i32),
                    ],
                    [(plan.n as u32).div_ceil(plan.block), 1, 1],
                    [plan.block, 1, 1],
                )
                .map_err(e)?;
        }
        // Waiting restarts the kernel-argument ring, so that its pages, once touched, are the
        // same ones every batch (without it the ring's first pass through its 16 MiB would
        // look like growth for the first hundred thousand launches).
        k.a.device().synchronize().map_err(e)?;
        read_ints(out, bytes, got)?;
        let used = batch as usize * SLOT;
        check_launches(batch_first, &got[..used], &k.host_a, &k.host_b, fill)?;
        done += batch;
        if let Some(p) = progress.as_deref_mut() {
            p.update(done);
        }
    }
    Ok(())
}

/// Records the replayed work: `out = mix_i32(src, gb)` over `n`, the whole `out` slot copied
/// to `out2`, `out2 = add_i32(out2, gc)` over `n`. Launch dimensions follow `n`.
fn record_graph(
    k: &Kernels,
    gb: &Buffer,
    gc: &Buffer,
    src_example: &Buffer,
    out_example: &Buffer,
    out2_example: &Buffer,
) -> Result<hcq::Graph, String> {
    let mut g = hcq::GraphBuilder::new();
    let n = g.var("n", 1, SLOT as i32).map_err(e)?;
    let src = g.input(src_example);
    let out = g.input(out_example);
    let out2 = g.input(out2_example);
    let dims = |block: u32| -> (DimExprs, DimExprs) {
        (
            [DimExpr::from(n).ceil_div(block), 1.into(), 1.into()],
            [block.into(), 1.into(), 1.into()],
        )
    };
    let (global, local) = dims(64);
    g.launch(
        &k.programs[IntKernel::Mix as usize],
        &[
            GraphArg::Input(out),
            GraphArg::Input(src),
            GraphArg::Buffer(gb),
            GraphArg::Var(n),
        ],
        global,
        local,
    )
    .map_err(e)?;
    g.copy(out, out2, SLOT * 4).map_err(e)?;
    let (global, local) = dims(32);
    g.launch(
        &k.programs[IntKernel::Add as usize],
        &[
            GraphArg::Input(out2),
            GraphArg::Input(out2),
            GraphArg::Buffer(gc),
            GraphArg::Var(n),
        ],
        global,
        local,
    )
    .map_err(e)?;
    g.build().map_err(e)
}

/// The replay phase's device state: the graph, the JIT doing the same work, and their fixed
/// operands.
struct Replayer<'k, F> {
    k: &'k Kernels,
    graph: hcq::Graph,
    jit: hcq::Jit<F>,
    out: Buffer,
    out2: Buffer,
    host_gb: Vec<i32>,
    host_gc: Vec<i32>,
    jit_calls: u64,
}

impl<F> Replayer<'_, F>
where
    F: FnMut(&mut hcq::JitRecorder<'_>) -> hcq::Result<()>,
{
    /// Replays `count` times numbered from `first`, in batches, checking each batch.
    fn run(
        &mut self,
        first: u64,
        count: u64,
        scratch: &mut Scratch,
        mut progress: Option<&mut Progress>,
    ) -> Result<(), String> {
        let Scratch { bytes, got, got2 } = scratch;
        let mut done = 0;
        while done < count {
            let batch = (count - done).min(BATCH as u64);
            let batch_first = first + done;
            let fill = sentinel(batch_first);
            fill_ints(&self.out, fill, bytes)?;
            fill_ints(&self.out2, fill, bytes)?;
            for slot in 0..batch {
                let plan = replay_plan(batch_first + slot);
                let at = slot as usize * SLOT * 4;
                let src = self.k.a.view(plan.src_at * 4, SLOT * 4).map_err(e)?;
                let out = self.out.view(at, SLOT * 4).map_err(e)?;
                let out2 = self.out2.view(at, SLOT * 4).map_err(e)?;
                if plan.jit {
                    self.jit
                        .call(&[&src], &[&out, &out2], &[plan.n as i32])
                        .map_err(e)?;
                    self.jit_calls += 1;
                } else {
                    self.graph
                        .replay(&[&src, &out, &out2], &[plan.n as i32])
                        .map_err(e)?;
                }
            }
            self.out.device().synchronize().map_err(e)?;
            read_ints(&self.out, bytes, got)?;
            read_ints(&self.out2, bytes, got2)?;
            let used = batch as usize * SLOT;
            check_replays(
                batch_first,
                &got[..used],
                &got2[..used],
                &self.k.host_a,
                &self.host_gb,
                &self.host_gc,
                fill,
            )?;
            done += batch;
            if let Some(p) = progress.as_deref_mut() {
                p.update(done);
            }
        }
        Ok(())
    }
}

/// The copy phase's buffers and the host's copy of what buffer Y holds.
struct Copier {
    x: Buffer,
    y: Buffer,
    y_host: Vec<u8>,
    data: Vec<u8>,
    back: Vec<u8>,
    rng: Rng,
    bytes: u64,
}

impl Copier {
    fn new(dev: &hcq::Device) -> Result<Self, String> {
        let mut rng = Rng(0xC091_5EED);
        let (x, y) = (
            dev.alloc(COPY_SPACE).map_err(e)?,
            dev.alloc(COPY_SPACE).map_err(e)?,
        );
        // Both buffers are written whole first, so that no later copy is the first to touch
        // their pages.
        let mut y_host = vec![0u8; COPY_SPACE];
        rng.fill(&mut y_host);
        x.copy_in(0, &y_host).map_err(e)?;
        rng.fill(&mut y_host);
        y.copy_in(0, &y_host).map_err(e)?;
        Ok(Copier {
            x,
            y,
            y_host,
            // Written whole now, for the same reason.
            data: vec![0x5A; LARGE_COPY_MAX],
            back: vec![0xA5; LARGE_COPY_MAX + 2 * GUARD],
            rng,
            bytes: 0,
        })
    }

    /// Runs the copy rounds numbered `first..first + rounds`, checking each.
    fn run(
        &mut self,
        first: u64,
        rounds: u64,
        mut progress: Option<&mut Progress>,
    ) -> Result<(), String> {
        for index in first..first + rounds {
            let round = copy_round(index, &mut self.rng);
            let data = &mut self.data[..round.size];
            self.rng.fill(data);
            self.x.copy_in(round.x_at, data).map_err(e)?;
            self.x
                .copy_to(round.x_at, &self.y, round.y_at, round.size)
                .map_err(e)?;
            self.y_host[round.y_at..round.y_at + round.size].copy_from_slice(data);
            let from = round.y_at.saturating_sub(GUARD);
            let to = (round.y_at + round.size + GUARD).min(COPY_SPACE);
            let back = &mut self.back[..to - from];
            self.y.copy_out(from, back).map_err(e)?;
            check_copy(index, &round, from, back, &self.y_host[from..to])?;
            self.bytes += (round.size * 2 + (to - from)) as u64;
            if let Some(p) = progress.as_deref_mut() {
                p.update((index - first + 1) * COPIES_PER_ROUND);
            }
        }
        Ok(())
    }
}

/// Launches the empty kernel until the compute queue's command ring has turned twice, so that
/// every page of it is resident before the baseline; returns the launches.
fn turn_compute_ring(dev: &hcq::Device, empty: &Program) -> Result<u64, String> {
    empty.launch(&[], [1, 1, 1], [1, 1, 1]).map_err(e)?;
    let per_launch = dev.last_submission_dwords().max(1);
    let more = 2 * dev.ring_capacity_dwords().div_ceil(per_launch);
    for _ in 0..more {
        empty.launch(&[], [1, 1, 1], [1, 1, 1]).map_err(e)?;
    }
    dev.synchronize().map_err(e)?;
    Ok(1 + more)
}

/// Tiny device-to-device copies in rounds of `COPY_RING_ROUND` until a round leaves resident
/// memory unchanged (at most `COPY_RING_MAX_ROUNDS`): the copy engine's command ring, whose size
/// the API does not tell, is then resident. Returns the copies.
fn turn_copy_ring(dev: &hcq::Device) -> Result<u64, String> {
    let buffer = dev.alloc(64).map_err(e)?;
    let mut copies = 0;
    let mut before = resources()?.rss_kib;
    for _ in 0..COPY_RING_MAX_ROUNDS {
        for _ in 0..COPY_RING_ROUND {
            buffer.copy_to(0, &buffer, 32, 4).map_err(e)?;
        }
        dev.synchronize().map_err(e)?;
        copies += COPY_RING_ROUND;
        let now = resources()?.rss_kib;
        if now <= before {
            break;
        }
        before = now;
    }
    Ok(copies)
}

/// The demo's code object: the prebuilt one when it matches the device, else compiled.
fn code_object(dev: &hcq::Device) -> Result<(Vec<u8>, &'static str), String> {
    match prebuilt::object_for("demo.hip", prebuilt::DEMO_SOURCE, &dev.info().arch) {
        Some(obj) => Ok((obj.to_vec(), "prebuilt kernels/demo.hip")),
        None => Ok((
            dev.compile(prebuilt::DEMO_SOURCE).map_err(e)?,
            "compiled from kernels/demo.hip",
        )),
    }
}

fn host_inputs(rng: &mut Rng, n: usize) -> Vec<i32> {
    (0..n).map(|_| rng.next() as i32).collect()
}

pub fn run(opts: Options) -> Result<(), String> {
    let dev = crate::open_device(opts.device.as_deref()).map_err(e)?;
    let info = dev.info();
    let (lib, origin) = code_object(&dev)?;
    if !opts.json {
        println!(
            "soak on {} ({}, {}), kernels: {origin}",
            info.name,
            info.arch,
            if info.emulated { "emulated" } else { "real" }
        );
    }
    let program = |k: IntKernel| dev.program(&lib, k.name()).map_err(e);
    let mut rng = Rng(0x50AC_0FFE);
    let (host_a, host_b) = (
        host_inputs(&mut rng, INPUT_ELEMS),
        host_inputs(&mut rng, INPUT_ELEMS),
    );
    let upload = |values: &[i32]| -> Result<Buffer, String> {
        let buf = dev.alloc(values.len() * 4).map_err(e)?;
        buf.copy_in(0, &ints_to_bytes(values)).map_err(e)?;
        Ok(buf)
    };
    let k = Kernels {
        programs: [
            program(IntKernel::Add)?,
            program(IntKernel::Mul)?,
            program(IntKernel::Mix)?,
        ],
        a: upload(&host_a)?,
        b: upload(&host_b)?,
        host_a,
        host_b,
    };
    let launch_out = dev.alloc(BATCH * SLOT * 4).map_err(e)?;

    let (host_gb, host_gc) = (host_inputs(&mut rng, SLOT), host_inputs(&mut rng, SLOT));
    let (gb, gc) = (upload(&host_gb)?, upload(&host_gc)?);
    let (out, out2) = (
        dev.alloc(BATCH * SLOT * 4).map_err(e)?,
        dev.alloc(BATCH * SLOT * 4).map_err(e)?,
    );
    let example = |b: &Buffer| b.view(0, SLOT * 4).map_err(e);
    let graph = record_graph(
        &k,
        &gb,
        &gc,
        &example(&k.a)?,
        &example(&out)?,
        &example(&out2)?,
    )?;
    let (mix, add) = (
        &k.programs[IntKernel::Mix as usize],
        &k.programs[IntKernel::Add as usize],
    );
    let jit = hcq::Jit::new(
        &[("n", 1, SLOT as i32)],
        |rec: &mut hcq::JitRecorder<'_>| {
            let n = rec.var(0);
            rec.launch(
                mix,
                &[
                    JitArg::Output(0),
                    JitArg::Input(0),
                    JitArg::Buffer(&gb),
                    JitArg::Var(0),
                ],
                [n.clone().ceil_div(64), 1.into(), 1.into()],
                [64.into(), 1.into(), 1.into()],
            )?;
            rec.copy(JitArg::Output(0), JitArg::Output(1), SLOT * 4)?;
            rec.launch(
                add,
                &[
                    JitArg::Output(1),
                    JitArg::Output(1),
                    JitArg::Buffer(&gc),
                    JitArg::Var(0),
                ],
                [n.ceil_div(32), 1.into(), 1.into()],
                [32.into(), 1.into(), 1.into()],
            )
        },
    )
    .map_err(e)?;
    let mut replayer = Replayer {
        k: &k,
        graph,
        jit,
        out,
        out2,
        host_gb,
        host_gc,
        jit_calls: 0,
    };
    let mut copier = if opts.copies > 0 {
        Some(Copier::new(&dev)?)
    } else {
        None
    };

    // Warm-up: the first batches fill the allocation and staging caches, the kernel-argument
    // ring and the JIT's capture, so the baseline is measured after one batch of each kind of
    // work (a large copy first). Its work is checked too but not counted.
    let warm = Instant::now();
    let warm_launches = opts.launches.min(BATCH as u64);
    let mut scratch = Scratch::new();
    let ring_launches = if opts.launches > 0 || opts.replays > 0 {
        turn_compute_ring(&dev, &dev.program(&lib, "empty").map_err(e)?)?
    } else {
        0
    };
    launches(
        &k,
        &launch_out,
        u64::MAX / 2,
        warm_launches,
        &mut scratch,
        None,
    )?;
    let warm_replays = opts.replays.min(BATCH as u64);
    replayer.run(u64::MAX / 2, warm_replays, &mut scratch, None)?;
    let staging = dev.alloc(STAGED_MAX).map_err(e)?;
    let mut round_trip = vec![0u8; STAGED_MAX];
    for _ in 0..WARM_STAGED_ROUND_TRIPS {
        staging.copy_in(0, &round_trip).map_err(e)?;
        staging.copy_out(0, &mut round_trip).map_err(e)?;
    }
    drop((staging, round_trip));
    let warm_rounds = if let Some(c) = copier.as_mut() {
        c.run(0, 1, None)?;
        c.run(u64::MAX / 2, 2, None)?;
        3
    } else {
        0
    };
    replayer.jit_calls = 0;
    let ring_copies = turn_copy_ring(&dev)?;
    let start = resources()?;
    let start_maps = read_maps()?;
    if !opts.json {
        println!(
            "warm-up: {ring_launches} launches of the empty kernel (two turns of the command \
             ring), {warm_launches} launches, {warm_replays} replays, {} copies and \
             {WARM_STAGED_ROUND_TRIPS} staged round trips of {} (one turn of the staging ring), \
             {ring_copies} copies of 4 bytes (until the copy engine's ring had turned) in \
             {:.1} s; the baseline is measured after it",
            warm_rounds * COPIES_PER_ROUND,
            crate::format_bytes(STAGED_MAX as u64),
            warm.elapsed().as_secs_f64()
        );
    }

    let mut phases = Vec::new();
    if opts.launches > 0 {
        let mut p = Progress::new("launches", opts.launches);
        launches(
            &k,
            &launch_out,
            0,
            opts.launches,
            &mut scratch,
            Some(&mut p),
        )?;
        phases.push(PhaseResult {
            name: "launches",
            count: opts.launches,
            elapsed: p.start.elapsed(),
            detail: "of add_i32, mul_i32, mix_i32 over 1 to 160 elements".into(),
        });
    }
    if opts.replays > 0 {
        let mut p = Progress::new("replays", opts.replays);
        replayer.run(0, opts.replays, &mut scratch, Some(&mut p))?;
        phases.push(PhaseResult {
            name: "replays",
            count: opts.replays,
            elapsed: p.start.elapsed(),
            detail: format!(
                "of a graph of 2 kernels and a copy, inputs swapped and n varied each time ({} \
                 through hcq::Jit)",
                replayer.jit_calls
            ),
        });
    }
    if let Some(c) = copier.as_mut() {
        let rounds = opts.copies.div_ceil(COPIES_PER_ROUND);
        let mut p = Progress::new("copies", rounds * COPIES_PER_ROUND);
        // Round 0 was the warm-up's large copy; the counted rounds start at 1.
        let before = c.bytes;
        c.run(1, rounds, Some(&mut p))?;
        phases.push(PhaseResult {
            name: "copies",
            count: rounds * COPIES_PER_ROUND,
            elapsed: p.start.elapsed(),
            detail: format!(
                "host to device, device to device, device to host; 1 B to 20 MiB at any \
                 offset, {:.0} MiB in all",
                (c.bytes - before) as f64 / (1 << 20) as f64
            ),
        });
    }
    dev.synchronize().map_err(e)?;
    let end = resources()?;
    report(&opts, &phases, &start, &end);
    let failures = growth_failures(&start, &end);
    if failures.is_empty() {
        if !opts.json {
            println!(
                "soak passed: every result verified, resources flat within {MAX_GROWTH_PERCENT}%"
            );
        }
        return Ok(());
    }
    if growth_percent(start.mappings, end.mappings) > MAX_GROWTH_PERCENT {
        // What the new mappings are (thread stacks, allocator arenas, device memory) is the
        // first thing to know about a growth, and it is gone once the process exits.
        let end_maps = read_maps()?;
        eprintln!("mappings made since the start:");
        for line in new_mappings(&start_maps, &end_maps) {
            eprintln!("  {line}");
        }
    }
    Err(format!("soak failed: {}", failures.join("; ")))
}

fn report(opts: &Options, phases: &[PhaseResult], start: &Resources, end: &Resources) {
    for p in phases {
        let seconds = p.elapsed.as_secs_f64();
        let rate = p.count as f64 / seconds.max(1e-9);
        if opts.json {
            println!(
                "{{\"name\":\"{}\",\"value\":{},\"unit\":\"count\",\"seconds\":{seconds},\
                 \"rate\":{rate}}}",
                p.name, p.count
            );
        } else {
            println!(
                "{:<9} {:>9} verified in {seconds:>8.1} s ({rate:>8.0}/s) {}",
                p.name, p.count, p.detail
            );
        }
    }
    if !opts.json {
        println!("{:<9} {:>12} {:>12} {:>8}", "", "start", "end", "growth");
    }
    for (name, unit, s, e) in resource_rows(start, end) {
        let growth = growth_percent(s, e);
        if opts.json {
            let growth = if growth.is_finite() {
                growth.to_string()
            } else {
                "null".into()
            };
            println!(
                "{{\"name\":\"{name}\",\"unit\":\"{unit}\",\"start\":{s},\"end\":{e},\
                 \"growth_percent\":{growth}}}"
            );
        } else {
            let label = if unit == "KiB" {
                format!("{name} KiB")
            } else {
                name.to_string()
            };
            println!("{label:<9} {s:>12} {e:>12} {growth:>+7.1}%");
        }
    }
}
