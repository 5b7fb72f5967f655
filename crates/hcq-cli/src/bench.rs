//! `hcq bench`: each benchmark prints its figure and a baseline measured in the same run.

use clap::Subcommand;
use std::time::{Duration, Instant};

#[derive(Subcommand, Clone, Copy)]
pub enum Which {
    /// Host nanoseconds to enqueue one launch of an empty kernel, against copying the same
    /// command words into a ring with memcpy.
    Launch {
        /// Total launches.
        #[arg(long, default_value_t = 100_000)]
        launches: usize,
    },
    /// Copy-in, copy-out and device-to-device throughput, against host memcpy of the same size.
    /// Device to device goes to a second GPU of the same kind when there is one.
    Copy {
        /// MiB per copy.
        #[arg(long, default_value_t = 256)]
        mib: usize,
    },
    /// Kernels run by the RDNA3 interpreter (saxpy, naive matmul, LDS tree reduction), each
    /// verified bit for bit against the same computation in native Rust on the host and timed
    /// against it. Runs on `amd-emu:0` unless `--device` says otherwise.
    Emu {
        /// Elements of the saxpy and the reduction.
        #[arg(long, default_value_t = 1 << 20)]
        n: usize,
        /// Rows (and columns) of the square matmul.
        #[arg(long, default_value_t = 256)]
        matmul: usize,
        /// Times each kernel is run and timed (each figure is the median).
        #[arg(long, default_value_t = 3)]
        repetitions: usize,
    },
    /// Host cost of one graph replay for graphs of 10, 100 and 1000 kernels (each kernel reads
    /// the graph's input): back to back with nothing patched; alone on an idle device, with
    /// nothing patched and with the input swapped (whose difference gives the cost per patched
    /// argument); against enqueuing the same kernels eagerly in the same run. An emulated
    /// device's engines are held while the host is timed.
    Graph {
        /// Timed replays per graph size and case (back-to-back bursts need enough of them to
        /// amortise the first replay's cold caches).
        #[arg(long, default_value_t = 100)]
        replays: usize,
    },
}

/// How a figure varied over its repetitions.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Spread {
    pub min: f64,
    pub median: f64,
    pub max: f64,
    pub repetitions: usize,
}

impl Spread {
    /// The spread of `samples` (the median of an even count is the upper middle one).
    pub fn of(samples: &[f64]) -> Spread {
        let mut s = samples.to_vec();
        s.sort_by(f64::total_cmp);
        match (s.first(), s.last()) {
            (Some(&min), Some(&max)) => Spread {
                min,
                median: s[s.len() / 2],
                max,
                repetitions: s.len(),
            },
            _ => Spread {
                min: f64::NAN,
                median: f64::NAN,
                max: f64::NAN,
                repetitions: 0,
            },
        }
    }

    /// Whether the repetitions differ by more than the median itself: the figure is noise
    /// more than measurement (a shared machine, a cold cache).
    pub fn too_wide(&self) -> bool {
        self.max - self.min > self.median.abs()
    }
}

/// One reported figure: the median of its repetitions, their spread, and a baseline measured
/// in the same run.
pub struct Figure {
    pub name: String,
    pub unit: &'static str,
    pub spread: Spread,
    pub baseline: f64,
}

impl Figure {
    /// The figure of `samples` (one per repetition) against `baseline`.
    pub fn new(
        name: impl Into<String>,
        unit: &'static str,
        samples: &[f64],
        baseline: f64,
    ) -> Figure {
        Figure {
            name: name.into(),
            unit,
            spread: Spread::of(samples),
            baseline,
        }
    }

    pub fn value(&self) -> f64 {
        self.spread.median
    }

    /// The value over the baseline (not finite when the baseline is 0).
    pub fn ratio(&self) -> f64 {
        self.value() / self.baseline
    }

    /// The figure as one line of output: JSON, or text for a person.
    fn render(&self, json: bool) -> String {
        // Shortest round-trip decimals, so a ratio of small numbers keeps its precision; JSON
        // has no NaN or infinity, so those become null.
        let num = |x: f64| {
            if x.is_finite() {
                format!("{x}")
            } else {
                "null".to_string()
            }
        };
        let s = &self.spread;
        if json {
            format!(
                "{{\"name\":\"{}\",\"value\":{},\"unit\":\"{}\",\"baseline\":{},\"ratio\":{},\
                 \"min\":{},\"median\":{},\"max\":{},\"repetitions\":{},\"noisy\":{}}}",
                self.name,
                num(self.value()),
                self.unit,
                num(self.baseline),
                num(self.ratio()),
                num(s.min),
                num(s.median),
                num(s.max),
                s.repetitions,
                s.too_wide()
            )
        } else {
            let noisy = if s.too_wide() {
                "   (spread wider than the median: noisy)"
            } else {
                ""
            };
            format!(
                "{:<26} {:>10.1} {} (min {:.1}, max {:.1}, {}x)   baseline {:>8.1} {}   ratio {:.3}x{noisy}",
                self.name,
                self.value(),
                self.unit,
                s.min,
                s.max,
                s.repetitions,
                self.baseline,
                self.unit,
                self.ratio()
            )
        }
    }
}

pub fn run(which: Which, json: bool, device: Option<&str>) -> Result<(), String> {
    let figures = match which {
        Which::Launch { launches } => launch(device, launches)?,
        Which::Emu {
            n,
            matmul,
            repetitions,
        } => emu(device, n, matmul, repetitions)?,
        Which::Copy { mib } => crate::bench_copy::copy(device, mib)?,
        Which::Graph { replays } => graph(device, replays)?,
    };
    for f in figures {
        println!("{}", f.render(json));
    }
    Ok(())
}

fn launch(device: Option<&str>, launches: usize) -> Result<Vec<Figure>, String> {
    let e = |e: hcq::Error| e.to_string();
    let dev = crate::open_device(device).map_err(e)?;
    let lib =
        crate::prebuilt::object_for("demo.hip", crate::prebuilt::DEMO_SOURCE, &dev.info().arch)
            .map(<[u8]>::to_vec)
            .map_or_else(|| dev.compile(crate::prebuilt::DEMO_SOURCE).map_err(e), Ok)?;
    let empty = dev.program(&lib, "empty").map_err(e)?;
    // Warm up, and learn how many dwords one launch writes.
    empty.launch(&[], [1, 1, 1], [1, 1, 1]).map_err(e)?;
    dev.synchronize().map_err(e)?;
    let words_per_launch = dev.last_submission_dwords();
    let ring_dwords = dev.ring_capacity_dwords();
    // Bursts that fit the ring with room to spare, so enqueue never waits for the GPU; each
    // burst is one repetition (nanoseconds per launch).
    let burst = ((ring_dwords / 2) / words_per_launch.max(1)).max(1) as usize;
    let bursts = |held: bool| -> Result<Vec<f64>, String> {
        let mut samples = Vec::new();
        let mut done = 0;
        while done < launches {
            let n = burst.min(launches - done);
            // The driver's own cost: an emulated GPU's engines held, so its command processor
            // does not take a core the moment the doorbell rings (a real GPU takes none); the
            // doorbell write is then a store like any other.
            let hold = held.then(|| Held::new(&dev));
            let start = Instant::now();
            for _ in 0..n {
                empty.launch(&[], [1, 1, 1], [1, 1, 1]).map_err(e)?;
            }
            samples.push(start.elapsed().as_nanos() as f64 / n as f64);
            drop(hold);
            dev.synchronize().map_err(e)?;
            done += n;
        }
        Ok(samples)
    };
    let running = bursts(false)?;
    let held = bursts(true)?;

    // Baseline: the same number of words copied into a ring of the same size.
    let packet: Vec<u32> = (0..words_per_launch as u32).collect();
    let mut ring = vec![0u32; ring_dwords as usize];
    let mut at = 0usize;
    let start = Instant::now();
    for _ in 0..launches {
        if at + packet.len() > ring.len() {
            at = 0;
        }
        ring[at..at + packet.len()].copy_from_slice(std::hint::black_box(&packet));
        at += packet.len();
    }
    std::hint::black_box(&ring);
    let memcpy = start.elapsed().as_nanos() as f64 / launches as f64;
    Ok(vec![
        Figure::new("launch_enqueue", "ns", &running, memcpy),
        Figure::new("launch_enqueue_driver", "ns", &held, memcpy),
    ])
}

/// Kernel counts of the benchmarked graphs.
const GRAPH_SIZES: [usize; 3] = [10, 100, 1000];

/// The samples in nanoseconds.
fn nanos(samples: &[Duration]) -> Vec<f64> {
    samples.iter().map(|d| d.as_nanos() as f64).collect()
}

/// Holds an emulated device's engines while it lives, so that what is timed is the host's
/// side of a submission alone: a CPU-emulated GPU would take the host's cores as soon as the
/// doorbell rings, which a real GPU does not. A no-op on real devices.
struct Held<'a> {
    dev: &'a hcq::Device,
    held: bool,
}

impl<'a> Held<'a> {
    fn new(dev: &'a hcq::Device) -> Self {
        let held = hcq::hold_emulated_engines(dev, true).is_ok();
        Held { dev, held }
    }
}

impl Drop for Held<'_> {
    fn drop(&mut self) {
        if self.held {
            let _ = hcq::hold_emulated_engines(self.dev, false);
        }
    }
}

fn graph(device: Option<&str>, replays: usize) -> Result<Vec<Figure>, String> {
    let e = |e: hcq::Error| e.to_string();
    if replays == 0 {
        return Err("--replays must be at least 1".into());
    }
    let dev = crate::open_device(device).map_err(e)?;
    let lib =
        crate::prebuilt::object_for("demo.hip", crate::prebuilt::DEMO_SOURCE, &dev.info().arch)
            .map(<[u8]>::to_vec)
            .map_or_else(|| dev.compile(crate::prebuilt::DEMO_SOURCE).map_err(e), Ok)?;
    // add_f32(c, a, b, n) over one element: every kernel takes the input `a`.
    let add = dev.program(&lib, "add_f32").map_err(e)?;
    let alloc = |values: &[f32]| -> Result<hcq::Buffer, String> {
        let b = dev.alloc(values.len() * 4).map_err(e)?;
        b.write(values).map_err(e)?;
        Ok(b)
    };
    let (input_a, input_b) = (alloc(&[1.0; 4])?, alloc(&[2.0; 4])?);
    let (other, out) = (alloc(&[10.0; 4])?, alloc(&[0.0; 4])?);
    let one = [1u32.into(), 1u32.into(), 1u32.into()];
    let mut figures = Vec::new();
    let mut per_replay = Vec::new();
    for kernels in GRAPH_SIZES {
        let mut g = hcq::GraphBuilder::new();
        let input = g.input(&input_a);
        for _ in 0..kernels {
            g.launch(
                &add,
                &[
                    hcq::GraphArg::Buffer(&out),
                    hcq::GraphArg::Input(input),
                    hcq::GraphArg::Buffer(&other),
                    hcq::GraphArg::Value(hcq::Arg::I32(1)),
                ],
                one.clone(),
                one.clone(),
            )
            .map_err(e)?;
        }
        let graph = g.build().map_err(e)?;
        graph.replay(&[&input_a], &[]).map_err(e)?;
        dev.synchronize().map_err(e)?;
        // Each replay is timed alone with the device idle (and, emulated, held: see `Held`), so
        // the figure is the host's work.
        let timed = |swap: bool| -> Result<Vec<f64>, String> {
            let mut samples = Vec::with_capacity(replays);
            for i in 0..replays {
                let input = if swap && i % 2 == 0 {
                    &input_b
                } else {
                    &input_a
                };
                dev.synchronize().map_err(e)?;
                let held = Held::new(&dev);
                let start = Instant::now();
                graph.replay(&[input], &[]).map_err(e)?;
                samples.push(start.elapsed());
                drop(held);
            }
            if swap && replays % 2 == 1 {
                graph.replay(&[&input_a], &[]).map_err(e)?;
            }
            dev.synchronize().map_err(e)?;
            Ok(nanos(&samples))
        };
        let unpatched_idle = timed(false)?;
        let swapped = timed(true)?;
        // Replays back to back, queued behind each other (the steady state of a loop replaying
        // a graph): nothing is patched, so nothing waits.
        let mut bursts = Vec::new();
        for _ in 0..3 {
            dev.synchronize().map_err(e)?;
            let held = Held::new(&dev);
            let start = Instant::now();
            for _ in 0..replays {
                graph.replay(&[&input_a], &[]).map_err(e)?;
            }
            bursts.push(start.elapsed() / replays as u32);
            drop(held);
        }
        let unpatched = nanos(&bursts);
        let mut eager = Vec::with_capacity(replays);
        for _ in 0..replays.min(10) {
            dev.synchronize().map_err(e)?;
            let held = Held::new(&dev);
            let start = Instant::now();
            for _ in 0..kernels {
                add.launch(
                    &[
                        hcq::Arg::Buffer(&out),
                        hcq::Arg::Buffer(&input_a),
                        hcq::Arg::Buffer(&other),
                        hcq::Arg::I32(1),
                    ],
                    [1, 1, 1],
                    [1, 1, 1],
                )
                .map_err(e)?;
            }
            eager.push(start.elapsed());
            drop(held);
        }
        dev.synchronize().map_err(e)?;
        let eager = Spread::of(&nanos(&eager)).median;
        let got: Vec<f32> = out.read().map_err(e)?;
        if got[0] != 11.0 {
            return Err(format!(
                "graph of {kernels} kernels computed {}, expected 11",
                got[0]
            ));
        }
        let patches = graph.input_patch_count(input) as f64;
        figures.push(Figure::new(
            format!("graph_replay_{kernels}"),
            "ns",
            &unpatched,
            eager,
        ));
        // One replay on an idle device: it also wakes the command processor (on the emulator a
        // futex wake, on hardware a doorbell store).
        figures.push(Figure::new(
            format!("graph_replay_idle_{kernels}"),
            "ns",
            &unpatched_idle,
            eager,
        ));
        figures.push(Figure::new(
            format!("graph_replay_swapped_{kernels}"),
            "ns",
            &swapped,
            eager,
        ));
        // Per repetition: a swapped replay less the idle one timed in the same position.
        let per_arg: Vec<f64> = swapped
            .iter()
            .zip(&unpatched_idle)
            .map(|(s, i)| ((s - i) / patches.max(1.0)).max(0.0))
            .collect();
        figures.push(Figure::new(
            format!("graph_patch_per_arg_{kernels}"),
            "ns",
            &per_arg,
            eager / kernels as f64,
        ));
        per_replay.push(unpatched);
    }
    if let [small, .., large] = &per_replay[..] {
        figures.push(Figure::new(
            "graph_replay_1000_vs_10",
            "ns",
            large,
            Spread::of(small).median,
        ));
    }
    Ok(figures)
}

/// The benchmark kernels, compiled at run time.
const EMU_SOURCE: &str = include_str!("../kernels/bench.hip");
/// Native timings are the best of this many runs.
const NATIVE_RUNS: usize = 3;

/// `1m`, `64k`, `256`: a size for a figure name.
fn size_label(n: usize) -> String {
    if n >= 1 << 20 && n.is_multiple_of(1 << 20) {
        format!("{}m", n >> 20)
    } else if n >= 1 << 10 && n.is_multiple_of(1 << 10) {
        format!("{}k", n >> 10)
    } else {
        n.to_string()
    }
}

/// Deterministic inputs in [-1, 1) (xorshift32).
fn inputs(n: usize, seed: u32) -> Vec<f32> {
    let mut state = seed.max(1);
    (0..n)
        .map(|_| {
            state ^= state << 13;
            state ^= state >> 17;
            state ^= state << 5;
            (state >> 8) as f32 / (1u32 << 23) as f32 - 1.0
        })
        .collect()
}

/// Best wall time of `NATIVE_RUNS` runs of `f`, in milliseconds, and its last result.
fn native<T>(mut f: impl FnMut() -> T) -> (f64, T) {
    let mut run = || {
        let start = Instant::now();
        let out = std::hint::black_box(f());
        (start.elapsed().as_secs_f64() * 1e3, out)
    };
    let (mut best, mut result) = run();
    for _ in 1..NATIVE_RUNS {
        let (ms, out) = run();
        best = best.min(ms);
        result = out;
    }
    (best, result)
}

/// Element-wise bit-exact comparison of the emulated and native results.
fn verify(what: &str, emulated: &[f32], native: &[f32]) -> Result<(), String> {
    if emulated.len() != native.len() {
        return Err(format!(
            "{what}: {} results from the emulator, {} from the host",
            emulated.len(),
            native.len()
        ));
    }
    match emulated
        .iter()
        .zip(native)
        .position(|(e, h)| e.to_bits() != h.to_bits())
    {
        Some(i) => Err(format!(
            "{what}: element {i} is {} on the emulator but {} on the host",
            emulated[i], native[i]
        )),
        None => Ok(()),
    }
}

/// Timings of one emulated computation, in milliseconds, and the wave-instructions it took.
struct EmuTime {
    /// Host wall time around launch and wait.
    wall: f64,
    /// GPU time reported by the device.
    gpu: f64,
    /// Wave-instructions the emulator executed (0 on a real device, which does not count).
    instructions: u64,
}

/// Wall time, GPU time and, when counted, wave-instructions per second, one sample per
/// repetition of an emulated computation. The last one's baseline is the same instruction count
/// over the native time: its ratio is the share of native speed the emulator reaches.
fn emu_figures(times: &[EmuTime], name: String, native_ms: f64) -> Vec<Figure> {
    let wall: Vec<f64> = times.iter().map(|t| t.wall).collect();
    let gpu: Vec<f64> = times.iter().map(|t| t.gpu).collect();
    let mut out = vec![
        Figure::new(name.clone(), "ms", &wall, native_ms),
        Figure::new(format!("{name}_gpu"), "ms", &gpu, native_ms),
    ];
    if !times.is_empty() && times.iter().all(|t| t.instructions > 0) {
        let per_second =
            |instructions: u64, ms: f64| instructions as f64 / (ms.max(1e-6) / 1e3) / 1e6;
        let rates: Vec<f64> = times
            .iter()
            .map(|t| per_second(t.instructions, t.wall))
            .collect();
        let native = per_second(times[0].instructions, native_ms);
        out.push(Figure::new(
            format!("{name}_winst"),
            "Mwinst/s",
            &rates,
            native,
        ));
    }
    out
}

/// Runs `prg` once over `global` workgroups, waiting for it; returns its wall and GPU time.
fn timed(
    dev: &hcq::Device,
    prg: &hcq::Program,
    args: &[hcq::Arg<'_>],
    global: [u32; 3],
    local: [u32; 3],
) -> Result<EmuTime, String> {
    let e = |e: hcq::Error| e.to_string();
    let counted = |d: &hcq::Device| hcq::emulator_counters(d).map_or(0, |c| c.instructions);
    let before = counted(dev);
    let start = Instant::now();
    let gpu = prg.launch_timed(args, global, local).map_err(e)?;
    dev.synchronize().map_err(e)?;
    Ok(EmuTime {
        wall: start.elapsed().as_secs_f64() * 1e3,
        gpu: gpu.as_secs_f64() * 1e3,
        instructions: counted(dev) - before,
    })
}

fn to_u32(n: usize, what: &str) -> Result<u32, String> {
    u32::try_from(n).map_err(|_| format!("{what} {n} is too large"))
}

fn to_i32(n: usize, what: &str) -> Result<i32, String> {
    i32::try_from(n).map_err(|_| format!("{what} {n} is too large"))
}

fn emu(
    device: Option<&str>,
    n: usize,
    matmul: usize,
    repetitions: usize,
) -> Result<Vec<Figure>, String> {
    if n == 0 || matmul == 0 || repetitions == 0 {
        return Err("--n, --matmul and --repetitions must be at least 1".into());
    }
    if matmul
        .checked_mul(matmul)
        .is_none_or(|m| m > i32::MAX as usize)
    {
        return Err(format!("--matmul {matmul} is too large"));
    }
    let e = |e: hcq::Error| e.to_string();
    let dev = crate::open_device(Some(device.unwrap_or("amd-emu:0"))).map_err(e)?;
    let lib = dev.compile(EMU_SOURCE).map_err(|err| {
        let clang = std::env::var("HCQ_CLANG").unwrap_or_else(|_| "clang-19".into());
        format!("compiling kernels/bench.hip needs {clang} (set HCQ_CLANG to another clang): {err}")
    })?;
    let mut figures = Vec::new();

    // saxpy: y = fma(alpha, x, y).
    {
        let alpha = 1.5f32;
        let (x, y) = (inputs(n, 1), inputs(n, 2));
        let (bx, by) = (dev.alloc(n * 4).map_err(e)?, dev.alloc(n * 4).map_err(e)?);
        bx.write(&x).map_err(e)?;
        by.write(&y).map_err(e)?;
        let prg = dev.program(&lib, "bench_saxpy").map_err(e)?;
        let args = [
            hcq::Arg::Buffer(&by),
            hcq::Arg::Buffer(&bx),
            hcq::Arg::F32(alpha),
            hcq::Arg::I32(to_i32(n, "--n")?),
        ];
        let groups = to_u32(n.div_ceil(256), "--n")?;
        let mut times = Vec::with_capacity(repetitions);
        for _ in 0..repetitions {
            // y is updated in place: every repetition starts from the same y.
            by.write(&y).map_err(e)?;
            times.push(timed(&dev, &prg, &args, [groups, 1, 1], [256, 1, 1])?);
        }
        let emulated: Vec<f32> = by.read().map_err(e)?;
        let (native_ms, host) = native(|| {
            let mut out = std::hint::black_box(&y).clone();
            for (o, &xi) in out.iter_mut().zip(std::hint::black_box(&x)) {
                *o = alpha.mul_add(xi, *o);
            }
            out
        });
        verify("saxpy", &emulated, &host)?;
        figures.extend(emu_figures(
            &times,
            format!("emu_saxpy_{}", size_label(n)),
            native_ms,
        ));
    }

    // Naive matmul: c[r][c] = fma chain over k in order.
    {
        let m = matmul;
        let (a, b) = (inputs(m * m, 3), inputs(m * m, 4));
        let (ba, bb, bc) = (
            dev.alloc(m * m * 4).map_err(e)?,
            dev.alloc(m * m * 4).map_err(e)?,
            dev.alloc(m * m * 4).map_err(e)?,
        );
        ba.write(&a).map_err(e)?;
        bb.write(&b).map_err(e)?;
        let prg = dev.program(&lib, "bench_matmul").map_err(e)?;
        let args = [
            hcq::Arg::Buffer(&bc),
            hcq::Arg::Buffer(&ba),
            hcq::Arg::Buffer(&bb),
            hcq::Arg::I32(to_i32(m, "--matmul")?),
        ];
        let groups = to_u32(m.div_ceil(16), "--matmul")?;
        let times = (0..repetitions)
            .map(|_| timed(&dev, &prg, &args, [groups, groups, 1], [16, 16, 1]))
            .collect::<Result<Vec<_>, _>>()?;
        let emulated: Vec<f32> = bc.read().map_err(e)?;
        let (native_ms, host) = native(|| {
            let (a, b) = (std::hint::black_box(&a), std::hint::black_box(&b));
            let mut c = vec![0f32; m * m];
            for row in 0..m {
                for col in 0..m {
                    let mut acc = 0f32;
                    for k in 0..m {
                        acc = a[row * m + k].mul_add(b[k * m + col], acc);
                    }
                    c[row * m + col] = acc;
                }
            }
            c
        });
        verify("matmul", &emulated, &host)?;
        figures.extend(emu_figures(
            &times,
            format!("emu_matmul_{}", size_label(m)),
            native_ms,
        ));
    }

    // Tree reduction: passes of 256-element LDS trees until one value is left.
    {
        let x = inputs(n, 5);
        let bx = dev.alloc(n * 4).map_err(e)?;
        bx.write(&x).map_err(e)?;
        let prg = dev.program(&lib, "bench_reduce").map_err(e)?;
        let mut times = Vec::with_capacity(repetitions);
        let mut input = bx.clone();
        for _ in 0..repetitions {
            let mut total = EmuTime {
                wall: 0.0,
                gpu: 0.0,
                instructions: 0,
            };
            // Each pass reads the previous pass's output (the input first).
            input = bx.clone();
            let mut len = n;
            loop {
                let groups = len.div_ceil(256);
                let output = dev.alloc(groups * 4).map_err(e)?;
                let args = [
                    hcq::Arg::Buffer(&output),
                    hcq::Arg::Buffer(&input),
                    hcq::Arg::I32(to_i32(len, "--n")?),
                ];
                let global = [to_u32(groups, "--n")?, 1, 1];
                let time = timed(&dev, &prg, &args, global, [256, 1, 1])?;
                total.wall += time.wall;
                total.gpu += time.gpu;
                total.instructions += time.instructions;
                input = output;
                len = groups;
                if len == 1 {
                    break;
                }
            }
            times.push(total);
        }
        let sum: Vec<f32> = input.read().map_err(e)?;
        let (native_ms, host) = native(|| {
            let mut values = std::hint::black_box(&x).clone();
            loop {
                let mut next = Vec::with_capacity(values.len().div_ceil(256));
                for block in values.chunks(256) {
                    let mut s = [0f32; 256];
                    s[..block.len()].copy_from_slice(block);
                    let mut stride = 128;
                    while stride > 0 {
                        for t in 0..stride {
                            s[t] += s[t + stride];
                        }
                        stride >>= 1;
                    }
                    next.push(s[0]);
                }
                values = next;
                if values.len() == 1 {
                    break values[0];
                }
            }
        });
        verify("reduce", &sum[..1], &[host])?;
        figures.extend(emu_figures(
            &times,
            format!("emu_reduce_{}", size_label(n)),
            native_ms,
        ));
    }
    Ok(figures)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_spread_is_the_extremes_and_the_middle_of_its_samples() {
        let s = Spread::of(&[5.0, 1.0, 4.0, 2.0, 3.0]);
        assert_eq!((s.min, s.median, s.max, s.repetitions), (1.0, 3.0, 5.0, 5));
        assert!(s.too_wide(), "4 apart around a median of 3");
        let s = Spread::of(&[10.0, 12.0, 11.0, 13.0]);
        assert_eq!(
            (s.min, s.median, s.max, s.repetitions),
            (10.0, 12.0, 13.0, 4)
        );
        assert!(!s.too_wide());
        assert_eq!(Spread::of(&[]).repetitions, 0);
    }

    #[test]
    fn figures_print_their_spread_and_say_when_it_is_too_wide() {
        let quiet = Figure::new("quiet", "ns", &[100.0, 110.0, 105.0], 50.0);
        let text = quiet.render(false);
        assert!(text.contains("min 100.0, max 110.0, 3x"), "{text}");
        assert!(
            text.contains("ratio 2.100x") && !text.contains("noisy"),
            "{text}"
        );
        let json = quiet.render(true);
        assert!(
            json.ends_with(
                r#""ratio":2.1,"min":100,"median":105,"max":110,"repetitions":3,"noisy":false}"#
            ),
            "{json}"
        );
        let noisy = Figure::new("noisy", "ns", &[10.0, 100.0, 30.0], 1.0);
        assert!(
            noisy.render(false).contains("noisy"),
            "{}",
            noisy.render(false)
        );
        assert!(noisy.render(true).ends_with(r#""noisy":true}"#));
        // No baseline: a ratio that is not a number is null in JSON.
        assert!(Figure::new("x", "ns", &[1.0], 0.0)
            .render(true)
            .contains(r#""ratio":null"#));
    }
}
