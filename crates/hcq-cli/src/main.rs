//! `hcq`: list devices, run the demo, benchmark.

mod bench;
mod bench_copy;
mod demo;
mod devices;
#[cfg(target_os = "linux")]
mod disasm;
#[cfg(target_os = "linux")]
mod exec;
mod prebuilt;
mod run;
mod soak;

use clap::{Parser, Subcommand};
use std::process::ExitCode;

/// What `hcq --help` lists after the options: every variable hcq and its emulator read.
const ENVIRONMENT: &str = "\
Environment:
  HCQ_DEVICE           device to use (default: the first real AMD GPU, else amd-emu:0)
  HCQ_WAIT_TIMEOUT_MS  longest time a wait lets the GPU go without progress [30000]
  HCQ_TRACE            write a Chrome trace to this file (as --trace)
  HCQ_CACHE_DIR        compile cache (`off` disables it) [~/.cache/hcq]
  HCQ_CLANG            the clang to compile HIP with [clang-19]
  HCQ_EMU_GPUS         number of emulated GPUs [1]
  HCQ_EMU_VRAM         VRAM per emulated GPU, e.g. 64M or 16G [16G]
  HCQ_EMU_MAX_STEPS    instructions a wave may run before it faults [100000000]
  HCQ_EMU_JIT          compile hot kernel code to host code: on, eager or off [on]
  HCQ_EMU_KERNEL       the Linux release whose KFD rules apply: 6.12 or 6.6 [6.12]
  HCQ_EMU_KFD_VERSION  the KFD version the emulated kernel reports, e.g. 1.3 [its release's]
  HCQ_EMU_ARCH         the emulated GPUs: gfx1100, or gfx1030 (shown, not run) [gfx1100]
  HCQ_EMU_CUS          compute units per emulated gfx1100, a multiple of 12 up to 96 [96]
  HCQ_EMU_SMALL_BAR    1: a board without Resizable BAR [0]
  HCQ_EMU_WRAPPED_RPTR 1: engines report read pointers as offsets within the ring [0]
  HCQ_EMU_SDMA_QUEUES  SDMA queues each emulated GPU gives out, 0 to 12 on a gfx1100 [all]
  HCQ_EXEC_LIB         `hcq exec`'s libhcq_exec.so [beside the hcq executable]
  HCQ_EXEC_NICE        how `hcq exec` puts the program below the GPU's threads: idle, or nice 0 to 19 [idle]
  RUST_BACKTRACE       1: a backtrace with an internal error
  RUST_LOG             what to log to stderr, e.g. hcq=debug or hcq::kernel=debug [-v: hcq=debug]";

#[derive(Parser)]
#[command(
    name = "hcq",
    version = concat!(env!("CARGO_PKG_VERSION"), " (", env!("HCQ_BUILD_COMMIT"), ")"),
    about = "GPU compute on hardware command queues",
    after_help = ENVIRONMENT
)]
struct Cli {
    /// Log to stderr what hcq does: devices opened, compiles (cache hit or miss, time),
    /// allocations, and each kernel and copy with its GPU time (RUST_LOG=hcq=debug; RUST_LOG,
    /// when set, chooses instead).
    #[arg(short = 'v', long = "log")]
    log: bool,
    /// Write a Chrome trace (Perfetto) of every kernel and copy to this file.
    #[arg(long, global = true, value_name = "FILE")]
    trace: Option<std::path::PathBuf>,
    #[command(subcommand)]
    command: Command,
}

/// How HIP source is compiled (`run`, `compile`, `disasm`); part of the compile cache's key.
#[derive(clap::Args, Debug, Clone, Default)]
struct CompileArgs {
    /// Search DIR for #include files (after the source file's own directory); repeatable.
    #[arg(short = 'I', value_name = "DIR")]
    include: Vec<std::path::PathBuf>,
    /// Define a macro, NAME or NAME=VALUE; repeatable.
    #[arg(short = 'D', value_name = "NAME[=VALUE]", value_parser = parse_define)]
    define: Vec<(String, Option<String>)>,
    /// Optimisation level, 0 to 3 [default: 3].
    #[arg(short = 'O', value_name = "N", value_parser = clap::value_parser!(u8).range(0..=3))]
    opt_level: Option<u8>,
    /// Pass ARG to clang as it is (e.g. --flag=-ffast-math); repeatable.
    #[arg(long = "flag", value_name = "ARG", allow_hyphen_values = true)]
    flags: Vec<String>,
}

impl CompileArgs {
    fn options(&self) -> hcq::CompileOptions {
        hcq::CompileOptions {
            include_dirs: self.include.clone(),
            defines: self.define.clone(),
            opt_level: self.opt_level,
            flags: self.flags.clone(),
        }
    }
}

fn parse_define(text: &str) -> Result<(String, Option<String>), String> {
    hcq::CompileOptions::parse_define(text).map_err(|e| e.to_string())
}

#[derive(Subcommand)]
enum Command {
    /// List the devices hcq can open, and those the system has that it cannot (saying why).
    Devices {
        /// Also open each device and print its compute shape (compute units, SIMDs, wave
        /// size, LDS, clock, free memory, PCI location, driver version).
        #[arg(short, long)]
        verbose: bool,
        /// One JSON object per device, with everything `-v` prints; where there is no real
        /// AMD GPU, a last object saying why (`{"driver":"amd","unavailable":"..."}`).
        #[arg(long)]
        json: bool,
    },
    /// Compile and run the bundled kernels, check every element against the host, and report
    /// GPU time and host cost per launch.
    Demo {
        /// Device to run on (default: HCQ_DEVICE, else the first real AMD GPU, else amd-emu:0).
        #[arg(long)]
        device: Option<String>,
        /// Elements per kernel.
        #[arg(long, default_value_t = 1 << 16)]
        n: usize,
    },
    /// Run one kernel: FILE is HIP source or a code object; arguments in kernel order.
    Run {
        /// HIP source (compiled through the cache) or a code object.
        file: std::path::PathBuf,
        /// The kernel to run.
        #[arg(long)]
        kernel: String,
        /// Workgroups per dimension, as X or X,Y or X,Y,Z.
        #[arg(long, value_parser = run::parse_dims)]
        grid: [u32; 3],
        /// Work-items per workgroup, as X or X,Y or X,Y,Z.
        #[arg(long, value_parser = run::parse_dims)]
        block: [u32; 3],
        /// One per kernel argument, in order: KIND:VALUE for the kinds i8 u8 i16 u16 i32 u32 i64
        /// u64 f16 f32 f64 (decimal or 0x hex; an f16 in hex is its bits), bool:true|false, bytes:HEX (a struct by
        /// value);
        /// in:PATH (a buffer of the file's bytes; in:PATH:BYTES reads that many), out:PATH:BYTES
        /// (a zeroed buffer written to PATH afterwards), inout:PATH.
        #[arg(long = "arg", allow_hyphen_values = true)]
        args: Vec<run::ArgSpec>,
        /// Bytes of dynamic LDS per workgroup (HIP `extern __shared__` arrays).
        #[arg(long, default_value_t = 0)]
        lds: u32,
        /// Device to run on (default: HCQ_DEVICE, else the first real AMD GPU, else amd-emu:0).
        #[arg(long)]
        device: Option<String>,
        #[command(flatten)]
        compile: CompileArgs,
    },
    /// Disassemble a code object, or HIP source (compiled through the cache): each kernel's
    /// instructions in llvm-objdump's syntax, after its resources and occupancy.
    #[cfg(target_os = "linux")]
    Disasm {
        /// A code object (a relocatable one is linked first, as the runtime does), or HIP
        /// source.
        file: std::path::PathBuf,
        /// Only this kernel (or other function): its symbol, or the name its source gives it.
        #[arg(long)]
        kernel: Option<String>,
        /// Target architecture, for HIP source.
        #[arg(long, default_value = "gfx1100")]
        arch: String,
        #[command(flatten)]
        compile: CompileArgs,
    },
    /// Compile HIP source to a code object (through the compile cache).
    Compile {
        /// HIP source.
        file: std::path::PathBuf,
        /// Where to write the code object.
        #[arg(short, long)]
        output: std::path::PathBuf,
        /// Target architecture.
        #[arg(long, default_value = "gfx1100")]
        arch: String,
        #[command(flatten)]
        compile: CompileArgs,
    },
    /// Benchmarks; each prints its figure and a baseline measured in the same run.
    Bench {
        #[command(subcommand)]
        which: bench::Which,
        /// One JSON object per line: name, value, unit, baseline, ratio, min, median, max,
        /// repetitions.
        #[arg(long, global = true)]
        json: bool,
        /// Device to run on (default: HCQ_DEVICE, else the first real AMD GPU, else amd-emu:0).
        #[arg(long, global = true)]
        device: Option<String>,
    },
    /// Run an unmodified program that uses AMD GPUs through /dev/kfd (tinygrad, a HIP-free C
    /// client, ...) on emulated gfx1100 GPUs; exits with the program's status.
    #[cfg(target_os = "linux")]
    Exec {
        /// Emulated GPUs (default: HCQ_EMU_GPUS, else 1).
        #[arg(long)]
        gpus: Option<u32>,
        /// VRAM per GPU, as 64M, 16G or bytes (default: HCQ_EMU_VRAM, else 16G).
        #[arg(long)]
        vram: Option<String>,
        /// The Linux release whose KFD rules the emulated kernel follows: 6.12 (also later
        /// releases; strict queue-buffer checks, KFD 1.16) or 6.6 (KFD 1.14) (default:
        /// HCQ_EMU_KERNEL, else 6.12).
        #[arg(long)]
        kernel: Option<String>,
        /// The program and its arguments (after `--`).
        #[arg(required = true, trailing_var_arg = true, allow_hyphen_values = true)]
        command: Vec<std::ffi::OsString>,
    },
    /// Long run of kernel launches, graph replays and copies, every result checked against the
    /// host; fails if resident memory, open file descriptors or memory mappings grow by more
    /// than 5% between the start (after a warm-up) and the end.
    Soak {
        /// Kernel launches.
        #[arg(long, default_value_t = 1_000_000)]
        launches: u64,
        /// Graph replays (one in 16 through `hcq::Jit`).
        #[arg(long, default_value_t = 100_000)]
        replays: u64,
        /// Copies, in rounds of three (host to device, device to device, device to host).
        #[arg(long, default_value_t = 10_000)]
        copies: u64,
        /// One JSON object per line for each phase and each resource figure.
        #[arg(long)]
        json: bool,
        /// Device to run on (default: HCQ_DEVICE, else the first real AMD GPU, else amd-emu:0).
        #[arg(long)]
        device: Option<String>,
    },
}

pub fn open_device(name: Option<&str>) -> hcq::Result<hcq::Device> {
    match name {
        Some(n) => hcq::Device::open(n),
        None => hcq::Device::default_device(),
    }
}

fn format_bytes(n: u64) -> String {
    const UNITS: [&str; 5] = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut v = n as f64;
    let mut u = 0;
    while v >= 1024.0 && u + 1 < UNITS.len() {
        v /= 1024.0;
        u += 1;
    }
    if u == 0 {
        format!("{n} B")
    } else {
        format!("{v:.1} {}", UNITS[u])
    }
}

fn run(cli: Cli) -> Result<(), String> {
    match cli.command {
        Command::Devices { verbose, json } => {
            let devices = hcq::list_devices();
            // Said, not left to guess, in every form: why there is no `amd:N` at all
            // (permissions, no driver, a driver too old, ...) and why a GPU that is listed
            // cannot be used (its architecture).
            let missing = devices::real_amd_missing(&devices);
            if devices.is_empty() {
                if let (true, Some(why)) = (json, &missing) {
                    println!("{}", devices::missing_json(why));
                }
                // Opening the default device says why (e.g. a malformed HCQ_EMU_* variable).
                return Err(match open_device(None) {
                    Err(e) => format!("no devices: {e}"),
                    Ok(_) => "no devices".into(),
                });
            }
            if verbose || json {
                return devices::describe(&devices, json, missing.as_deref());
            }
            println!("{:<12} {:<10} {:>10}  kind", "name", "arch", "memory");
            for d in &devices {
                let kind = match (d.emulated, &d.unusable) {
                    (true, None) => "emulated",
                    (false, None) => "real",
                    (true, Some(_)) => "emulated, unusable",
                    (false, Some(_)) => "real, unusable",
                };
                println!(
                    "{:<12} {:<10} {:>10}  {kind}",
                    d.name,
                    d.arch,
                    format_bytes(d.memory)
                );
            }
            for d in &devices {
                if let Some(why) = &d.unusable {
                    eprintln!("hcq: {} cannot be used: {why}", d.name);
                }
            }
            if let Some(why) = missing {
                eprintln!("hcq: {}", devices::no_real_amd(&why));
            }
            Ok(())
        }
        Command::Demo { device, n } => demo::run(device.as_deref(), n),
        #[cfg(target_os = "linux")]
        Command::Disasm {
            file,
            kernel,
            arch,
            compile,
        } => disasm::run(&file, kernel.as_deref(), &arch, &compile.options()),
        Command::Compile {
            file,
            output,
            arch,
            compile,
        } => {
            let lib = hcq::compile_hip_file_with(&file, &arch, &compile.options())
                .map_err(|e| e.to_string())?;
            std::fs::write(&output, lib).map_err(|e| format!("writing {}: {e}", output.display()))
        }
        Command::Run {
            file,
            kernel,
            grid,
            block,
            args,
            lds,
            device,
            compile,
        } => run::run(run::RunOptions {
            file,
            kernel,
            grid,
            block,
            args,
            dynamic_lds: lds,
            device,
            compile: compile.options(),
        }),
        Command::Bench {
            which,
            json,
            device,
        } => bench::run(which, json, device.as_deref()),
        #[cfg(target_os = "linux")]
        Command::Exec { .. } => unreachable!("handled in main"),
        Command::Soak {
            launches,
            replays,
            copies,
            json,
            device,
        } => soak::run(soak::Options {
            launches,
            replays,
            copies,
            json,
            device,
        }),
    }
}

/// On SIGINT, SIGTERM or SIGHUP, ends the running compiles (their clang and its temporary
/// files) and exits with 128 + the signal, as a shell reports a process ended by one. The
/// signals are blocked in every thread but one that waits for them, so no thread is
/// interrupted at an arbitrary point. Must run before any other thread exists.
fn exit_cleanly_on_signals() {
    // SAFETY: sigset_t is plain data that sigemptyset initialises.
    let mut signals: libc::sigset_t = unsafe { std::mem::zeroed() };
    // SAFETY: `signals` is a valid set; blocking affects this thread, whose mask every thread
    // created later inherits. (Programs started keep it too: the compile's clang clears it.)
    let blocked = unsafe {
        libc::sigemptyset(&mut signals);
        for signal in [libc::SIGINT, libc::SIGTERM, libc::SIGHUP] {
            libc::sigaddset(&mut signals, signal);
        }
        libc::pthread_sigmask(libc::SIG_BLOCK, &signals, std::ptr::null_mut())
    };
    if blocked != 0 {
        return;
    }
    std::thread::spawn(move || loop {
        let mut signal = 0;
        // SAFETY: `signals` is a valid set, blocked in every thread, and `signal` a valid
        // place for the one received.
        if unsafe { libc::sigwait(&signals, &mut signal) } == 0 {
            // Under `hcq exec`, the program decides how it ends; hcq exits with its status.
            #[cfg(target_os = "linux")]
            {
                let child = exec::CHILD.load(std::sync::atomic::Ordering::SeqCst);
                if child > 0 {
                    // SAFETY: sends a signal to our own child process.
                    unsafe { libc::kill(child, signal) };
                    continue;
                }
            }
            #[cfg(target_os = "linux")]
            hcq::stop_compiles_for_exit();
            std::process::exit(128 + signal);
        }
    });
}

/// Logs to stderr through `tracing`: what `RUST_LOG` selects, else with `-v` hcq's debug
/// lines, else nothing.
fn start_logging(verbose: bool) {
    use tracing_subscriber::EnvFilter;
    let filter = match std::env::var("RUST_LOG") {
        Ok(spec) if !spec.trim().is_empty() => EnvFilter::new(spec),
        _ if verbose => EnvFilter::new("hcq=debug"),
        _ => return,
    };
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .without_time()
        .with_ansi(false)
        .try_init();
}

fn main() -> ExitCode {
    // Like other Unix tools, end quietly when the reader of our output goes away
    // (`hcq bench launch | head`) instead of panicking on a failed print.
    // SAFETY: restoring the default disposition of SIGPIPE before any other thread exists.
    unsafe { libc::signal(libc::SIGPIPE, libc::SIG_DFL) };
    exit_cleanly_on_signals();
    let cli = Cli::parse();
    start_logging(cli.log);
    #[cfg(target_os = "linux")]
    if let Command::Exec {
        gpus,
        vram,
        kernel,
        command,
    } = cli.command
    {
        if let Some(trace) = &cli.trace {
            // Said, not ignored: the program's GPU work runs in its own process.
            eprintln!(
                "hcq exec: --trace {} does not apply: the program's GPU work runs in the \
                 program's process, which hcq does not trace",
                trace.display()
            );
            return ExitCode::from(2);
        }
        return match exec::run(exec::Options {
            gpus,
            vram,
            kernel,
            command,
        }) {
            Ok(code) => ExitCode::from(code.clamp(0, 255) as u8),
            Err(e) => {
                eprintln!("{e}");
                ExitCode::from(127)
            }
        };
    }
    // Before any work: a trace file that cannot be written ends the command here.
    let started = match &cli.trace {
        Some(path) => hcq::trace_to(path),
        None => hcq::trace_from_env(),
    };
    if let Err(e) = started {
        eprintln!("hcq: {e}");
        return ExitCode::FAILURE;
    }
    let result = run(cli);
    // On every path, a failed command included: the trace shows what ran before the failure.
    let traced = hcq::trace_finish().map_err(|e| e.to_string());
    let mut code = ExitCode::SUCCESS;
    for e in [result.err(), traced.err()].into_iter().flatten() {
        eprintln!("hcq: {e}");
        code = ExitCode::FAILURE;
    }
    code
}
