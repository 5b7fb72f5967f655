//! Fault injection at the kernel seam: a workload that touches every part of the driver (device
//! open, VRAM/GTT/userptr memory, copies both ways, a launch, a graph, the JIT, a transfer
//! between two GPUs, and dropping it all) runs once per seam call with that call failed, for
//! ENOMEM and one other errno per call. Every run must end in `Ok` with correct results or in
//! a typed error, never a panic or a hang; `EINTR` and `EAGAIN` (transient by the seam's
//! contract) must not fail the run at all. After each run nothing may be left: the emulator
//! holds nothing (except the event page, which KFD never lets a process free), the process has
//! as many mappings and descriptors as before, and a new device computes correctly. Then the
//! same for every call of two copies large enough to run in place (the caller's pages
//! registered with the GPU).
//!
//! Its own process: it sets `HCQ_WAIT_TIMEOUT_MS` and counts the process's mappings, which
//! other tests running alongside would disturb.

use hcq::{Arg, Buffer, Device, GraphArg, GraphBuilder, Jit, JitArg};
use hcq_amd::{AmdDevice, AmdDriver, DeviceOptions};
use hcq_amd_sys::seam::{
    CallFilter, Fault, FaultInjector, SeamCall, Syscalls, EAGAIN, EBUSY, EFAULT, EINTR, EINVAL,
    EIO, ENOMEM,
};
use hcq_emu::{EmuConfig, EmuKernel, LiveObjects};
use std::panic::AssertUnwindSafe;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

const SRC: &str = r#"
// out[i] = in[i] * 3 + k, for i < n.
extern "C" __attribute__((global)) void scale_add(int* out, const int* in, int k, int n) {
  int i = __builtin_amdgcn_workgroup_id_x() * __builtin_amdgcn_workgroup_size_x() +
          __builtin_amdgcn_workitem_id_x();
  if (i < n) out[i] = in[i] * 3 + k;
}
"#;

const N: usize = 200;
/// Longest wait for the GPU in a run: a fault that wedges a queue costs this, not a hang.
const WAIT_TIMEOUT_MS: &str = "2000";
/// A run taking longer than this is a hang, even if it ends.
const RUN_LIMIT: Duration = Duration::from_secs(20);

/// The errnos the seam may see; every call index is failed with ENOMEM and one of the others.
const OTHER_ERRNOS: [i32; 6] = [EINTR, EAGAIN, EFAULT, EIO, EBUSY, EINVAL];

/// How a run went wrong in a way no error excuses.
#[derive(Debug)]
enum Failure {
    Hcq(hcq::Error),
    WrongResult(String),
}

impl From<hcq::Error> for Failure {
    fn from(e: hcq::Error) -> Self {
        Failure::Hcq(e)
    }
}

fn scale_add(x: &[i32], k: i32) -> Vec<i32> {
    x.iter()
        .map(|v| v.wrapping_mul(3).wrapping_add(k))
        .collect()
}

fn check(what: &str, buf: &Buffer, want: &[i32]) -> Result<(), Failure> {
    let got: Vec<i32> = buf.read()?;
    if got.len() != want.len() {
        return Err(Failure::WrongResult(format!(
            "{what}: {} values",
            got.len()
        )));
    }
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        if g != w {
            return Err(Failure::WrongResult(format!(
                "{what}: element {i} is {g}, want {w}"
            )));
        }
    }
    Ok(())
}

/// Small rings and argument space: the sweep opens devices a thousand times.
fn cheap_options() -> DeviceOptions {
    DeviceOptions {
        kernargs_bytes: 64 << 10,
        ..DeviceOptions::default()
    }
}

fn launch(prg: &hcq::Program, out: &Buffer, input: &Buffer, k: i32) -> hcq::Result<()> {
    prg.launch(
        &[
            Arg::Buffer(out),
            Arg::Buffer(input),
            Arg::I32(k),
            Arg::I32(N as i32),
        ],
        [(N as u32).div_ceil(64), 1, 1],
        [64, 1, 1],
    )
}

/// A device over `kernel` that runs a kernel correctly.
fn device_works(kernel: Arc<dyn Syscalls>, code: &[u8]) -> Result<(), Failure> {
    let driver = AmdDriver::new(kernel, "fi", true)?;
    let dev = Device::from_amd(AmdDevice::open_with(&driver, 0, cheap_options())?);
    drop(driver);
    let prg = dev.program(code, "scale_add")?;
    let x: Vec<i32> = (0..N as i32).map(|i| i * 5 - 300).collect();
    let (a, b) = (dev.alloc(N * 4)?, dev.alloc(N * 4)?);
    a.write(&x)?;
    launch(&prg, &b, &a, -9)?;
    check("new device", &b, &scale_add(&x, -9))
}

/// Everything the driver does, over `kernel`; dropped before it returns.
fn workload(kernel: Arc<dyn Syscalls>, code: &[u8]) -> Result<(), Failure> {
    let driver = AmdDriver::new(kernel, "fi", true)?;
    let d0 = Device::from_amd(AmdDevice::open_with(&driver, 0, cheap_options())?);
    let d1 = Device::from_amd(AmdDevice::open_with(&driver, 1, cheap_options())?);
    drop(driver);
    let p0 = d0.program(code, "scale_add")?;
    let p1 = d1.program(code, "scale_add")?;
    let x: Vec<i32> = (0..N as i32).map(|i| i * 7 - 500).collect();
    let y: Vec<i32> = (0..N as i32).map(|i| 1000 - i * 3).collect();

    // Copies both ways (through the userptr staging buffers) and a launch.
    let (a, b) = (d0.alloc(N * 4)?, d0.alloc(N * 4)?);
    a.write(&x)?;
    launch(&p0, &b, &a, 5)?;
    check("launch", &b, &scale_add(&x, 5))?;

    // A graph with an input and a variable, replayed on another input.
    let a2 = d0.alloc(N * 4)?;
    a2.write(&y)?;
    let c = d0.alloc(N * 4)?;
    let mut g = GraphBuilder::new();
    let k = g.var("k", -100, 100)?;
    let input = g.input(&a);
    g.launch(
        &p0,
        &[
            GraphArg::Buffer(&c),
            GraphArg::Input(input),
            GraphArg::Var(k),
            GraphArg::Value(hcq::Arg::I32(N as i32)),
        ],
        [((N as u32).div_ceil(64)).into(), 1.into(), 1.into()],
        [64.into(), 1.into(), 1.into()],
    )?;
    let graph = g.build()?;
    graph.replay(&[&a2], &[-7])?;
    check("graph replay", &c, &scale_add(&y, -7))?;
    drop(graph);

    // The JIT: eager, then captured, then replayed.
    let mut jit = Jit::new(&[("k", -100, 100)], |r| {
        r.launch(
            &p0,
            &[
                JitArg::Output(0),
                JitArg::Input(0),
                JitArg::Var(0),
                JitArg::Value(hcq::Arg::I32(N as i32)),
            ],
            [((N as u32).div_ceil(64)).into(), 1.into(), 1.into()],
            [64.into(), 1.into(), 1.into()],
        )
    })?;
    for (call, (input, values)) in [(&a, &x), (&a2, &y), (&a, &x)].into_iter().enumerate() {
        let out = d0.alloc(N * 4)?;
        let k = call as i32 * 11 - 3;
        jit.call(&[input], &[&out], &[k])?;
        check(&format!("JIT call {call}"), &out, &scale_add(values, k))?;
    }
    drop(jit);

    // A transfer to the other GPU, and a kernel there on what arrived.
    let (e1, f1) = (d1.alloc(N * 4)?, d1.alloc(N * 4)?);
    b.copy_to(0, &e1, 0, N * 4)?;
    launch(&p1, &f1, &e1, 1)?;
    check("after the transfer", &f1, &scale_add(&scale_add(&x, 5), 1))?;
    Ok(())
}

/// Copies large enough to go in place: the caller's pages are registered with the GPU
/// (userptr) for the copy engine, and unregistered once it is done with them.
fn in_place_copies(kernel: Arc<dyn Syscalls>, before_copies: &dyn Fn()) -> Result<(), Failure> {
    let bytes = hcq_amd::transfer::DIRECT_COPY_MIN;
    let driver = AmdDriver::new(kernel, "fi", true)?;
    let dev = Device::from_amd(AmdDevice::open_with(&driver, 0, cheap_options())?);
    drop(driver);
    let buf = dev.alloc(bytes)?;
    let want: Vec<u32> = (0..bytes as u32 / 4)
        .map(|i| i.wrapping_mul(2654435761))
        .collect();
    let mut src = want.clone();
    before_copies();
    let copied_in = buf.write(&src);
    // Once the copy returns, even with an error, the engine must be done with the caller's
    // pages: what it copied from now on would be these zeros.
    src.fill(0);
    let mut back = vec![0u32; want.len()];
    let copied_out = buf.copy_out(0, bytemuck::cast_slice_mut(&mut back));
    let got = back.clone();
    // Nor may it write into them any more.
    back.fill(1);
    before_copies();
    std::thread::sleep(Duration::from_millis(20));
    if let Some(i) = back.iter().position(|&w| w != 1) {
        return Err(Failure::WrongResult(format!(
            "the copy engine wrote word {i} after the copy out returned ({copied_out:?})"
        )));
    }
    // A failed copy in was queued before its wait failed: it completed from the bytes as they
    // were when it was called, which a copy out that worked shows.
    let first_wrong = (0..want.len()).find(|&i| got[i] != want[i]);
    if let (Err(e), Ok(()), Some(i)) = (&copied_in, &copied_out, first_wrong) {
        return Err(Failure::WrongResult(format!(
            "after the copy in failed ({e}), word {i} is {:#x}, want {:#x}: the engine read \
             the caller's memory after the copy returned",
            got[i], want[i]
        )));
    }
    copied_in?;
    copied_out?;
    if let Some(i) = first_wrong {
        return Err(Failure::WrongResult(format!(
            "in-place copy: word {i} is {:#x}, want {:#x}",
            got[i], want[i]
        )));
    }
    Ok(())
}

fn proc_count(dir: &str) -> usize {
    std::fs::read_dir(dir).map_or(0, |d| d.count())
}

fn maps_lines() -> usize {
    std::fs::read_to_string("/proc/self/maps").map_or(0, |m| m.lines().count())
}

/// What the process holds outside the emulator.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct ProcessState {
    maps: usize,
    fds: usize,
}

fn process_state() -> ProcessState {
    ProcessState {
        maps: maps_lines(),
        fds: proc_count("/proc/self/fd"),
    }
}

/// Lines of `/proc/self/maps` without the offset and inode fields, for a failure message.
fn maps_entries() -> std::collections::BTreeSet<String> {
    std::fs::read_to_string("/proc/self/maps")
        .unwrap_or_default()
        .lines()
        .map(|l| {
            let fields: Vec<&str> = l.split_whitespace().collect();
            let keep = [0, 1, 3, 5];
            keep.iter()
                .filter_map(|&i| fields.get(i).copied())
                .collect::<Vec<_>>()
                .join(" ")
        })
        .collect()
}

/// What a run may leave to the kernel's teardown: the event page (KFD refuses to free it) and
/// the GPU VMs (KFD has no call to release one).
fn only_the_event_page(r: LiveObjects) -> bool {
    let page = r.event_pages;
    let r = LiveObjects {
        acquired_vms: 0,
        ..r
    };
    r == LiveObjects {
        buffer_objects: page,
        host_ranges: page,
        event_pages: page,
        ..LiveObjects::default()
    }
}

type Injector = FaultInjector<Arc<EmuKernel>>;
/// A workload over a kernel, given the code object of `SRC`.
type Workload<'a> = &'a dyn Fn(Arc<dyn Syscalls>, &[u8]) -> Result<(), Failure>;

struct Sweep {
    injector: Arc<Injector>,
    code: Vec<u8>,
    /// Process state with nothing of the driver's open.
    baseline: ProcessState,
    baseline_maps: std::collections::BTreeSet<String>,
    panicked: Arc<AtomicBool>,
}

impl Sweep {
    fn emu(&self) -> &EmuKernel {
        self.injector.inner()
    }

    fn kernel(&self) -> Arc<dyn Syscalls> {
        self.injector.clone()
    }

    /// Runs the workload with `fault` armed (or none); returns how it ended and which call
    /// was failed. Panics (the test's failure) on anything no error excuses.
    fn run(&self, fault: Option<Fault>, what: &str) -> (Result<(), hcq::Error>, Option<SeamCall>) {
        self.run_workload(&workload, fault, what)
    }

    /// [`Sweep::run`] of another workload.
    fn run_workload(
        &self,
        work: Workload<'_>,
        fault: Option<Fault>,
        what: &str,
    ) -> (Result<(), hcq::Error>, Option<SeamCall>) {
        match fault {
            Some(f) => self.injector.arm(f),
            None => self.injector.disarm(),
        }
        let start = Instant::now();
        let outcome =
            std::panic::catch_unwind(AssertUnwindSafe(|| work(self.kernel(), &self.code)));
        let took = start.elapsed();
        let injected = self.injector.injected();
        self.injector.disarm();
        let result = match outcome {
            Err(_) => panic!("{what}: the workload panicked (failed call {injected:?})"),
            Ok(Err(Failure::WrongResult(w))) => {
                panic!("{what}: wrong result with failed call {injected:?}: {w}")
            }
            Ok(Err(Failure::Hcq(e))) => Err(e),
            Ok(Ok(())) => Ok(()),
        };
        assert!(
            !self.panicked.load(Ordering::SeqCst),
            "{what}: a thread panicked (failed call {injected:?})"
        );
        assert!(
            took < RUN_LIMIT,
            "{what}: took {took:?} (failed call {injected:?}, {result:?})"
        );
        self.check_clean(what, injected, &result);
        (result, injected)
    }

    /// Nothing is left behind, and a new device works.
    fn check_clean(&self, what: &str, injected: Option<SeamCall>, result: &Result<(), hcq::Error>) {
        let ctx = || format!("{what} (failed call {injected:?}, ended {result:?})");
        let live = self.emu().live_objects();
        assert!(
            live.is_empty(),
            "{}: the emulator still holds {live:?}",
            ctx()
        );
        let reclaimed = self.emu().last_reclaimed();
        assert!(
            only_the_event_page(reclaimed),
            "{}: closing /dev/kfd had to reclaim {reclaimed:?}",
            ctx()
        );
        // The worker threads of a dispatch are detached when their scope ends, and glibc
        // unmaps the stack of an exited detached thread only at a later thread start or join:
        // start and join one until the count settles (a leaked mapping never goes).
        let settle = Instant::now();
        let mut now = process_state();
        while now != self.baseline && settle.elapsed() < Duration::from_secs(2) {
            std::thread::sleep(Duration::from_millis(1));
            let _ = std::thread::spawn(|| {}).join();
            now = process_state();
        }
        if now != self.baseline {
            let maps = maps_entries();
            panic!(
                "{}: process mappings and descriptors {now:?}, before {:?}; mappings now, not \
                 before: {:?}; before, not now: {:?}",
                ctx(),
                self.baseline,
                maps.difference(&self.baseline_maps).collect::<Vec<_>>(),
                self.baseline_maps.difference(&maps).collect::<Vec<_>>(),
            );
        }
        match device_works(self.kernel(), &self.code) {
            Ok(()) => {}
            Err(e) => panic!("{}: a new device then fails: {e:?}", ctx()),
        }
        let live = self.emu().live_objects();
        assert!(live.is_empty(), "{}: the new device left {live:?}", ctx());
    }
}

const TEST_NAME: &str = "every_failed_seam_call_ends_in_ok_or_an_error_and_leaks_nothing";
/// Set in the child process that runs the sweep.
const CHILD: &str = "HCQ_FAULT_INJECTION_SWEEP";

#[test]
fn every_failed_seam_call_ends_in_ok_or_an_error_and_leaks_nothing() {
    // The sweep runs in a child process whose mapping count only the driver changes: glibc
    // would otherwise keep the stacks of exited emulator threads for reuse and map a new
    // malloc arena whenever threads contend, both without any leak.
    if std::env::var_os(CHILD).is_none() {
        let status = std::process::Command::new(std::env::current_exe().expect("test binary"))
            .args(["--exact", TEST_NAME, "--nocapture", "--test-threads=1"])
            .env(CHILD, "1")
            .env(
                "GLIBC_TUNABLES",
                "glibc.pthread.stack_cache_size=0:glibc.malloc.arena_max=1",
            )
            .env("HCQ_WAIT_TIMEOUT_MS", WAIT_TIMEOUT_MS)
            .status()
            .expect("runs the sweep");
        assert!(status.success(), "the sweep failed: {status}");
        return;
    }
    let panicked = Arc::new(AtomicBool::new(false));
    let default_hook = std::panic::take_hook();
    let flag = panicked.clone();
    std::panic::set_hook(Box::new(move |info| {
        flag.store(true, Ordering::SeqCst);
        default_hook(info);
    }));
    // A hang fails the test instead of stalling CI.
    let progress = Arc::new(AtomicU64::new(0));
    let watched = progress.clone();
    std::thread::spawn(move || {
        let mut last = (u64::MAX, Instant::now());
        loop {
            std::thread::sleep(Duration::from_secs(1));
            let p = watched.load(Ordering::SeqCst);
            if p != last.0 {
                last = (p, Instant::now());
            } else if last.1.elapsed() > RUN_LIMIT * 3 {
                eprintln!("fault-injection run {p} hangs; aborting");
                std::process::abort();
            }
        }
    });

    let code = hcq::compile_hip(SRC, "gfx1100").expect("compiles with clang-19");
    let emu = Arc::new(EmuKernel::new(EmuConfig {
        gpus: 2,
        max_steps: 1_000_000,
        vram_bytes: 512 << 20,
        ..EmuConfig::default()
    }));
    let injector = Arc::new(FaultInjector::new(emu));
    let mut sweep = Sweep {
        injector,
        code,
        baseline: process_state(),
        baseline_maps: Default::default(),
        panicked,
    };
    // Warm-up runs settle what the process keeps for reuse (thread stacks, allocator arenas),
    // then the baseline is taken with nothing of the driver open.
    for _ in 0..2 {
        workload(sweep.kernel(), &sweep.code).expect("the workload runs without faults");
        device_works(sweep.kernel(), &sweep.code).expect("a device works");
    }
    sweep.baseline = process_state();
    sweep.baseline_maps = maps_entries();

    // The calls of a fault-free run, counted.
    sweep.injector.record(true);
    let (clean, _) = sweep.run(None, "fault-free run");
    clean.expect("the fault-free run succeeds");
    let calls = sweep.injector.take_log();
    sweep.injector.record(false);
    let count = |c: &dyn Fn(&SeamCall) -> bool| calls.iter().filter(|x| c(x)).count();
    assert!(
        count(&|c| *c == SeamCall::Open) >= 3,
        "kfd and two render nodes"
    );
    assert!(count(&|c| *c == SeamCall::Mmap) > 20 && count(&|c| *c == SeamCall::Munmap) > 20);
    eprintln!("the workload makes {} seam calls", calls.len());

    let started = Instant::now();
    let (mut ok, mut errors) = (0, 0);
    // A few past the end: runs vary in how many waits they make.
    for nth in 0..calls.len() as u64 + 8 {
        let other = OTHER_ERRNOS[nth as usize % OTHER_ERRNOS.len()];
        for errno in [ENOMEM, other] {
            progress.fetch_add(1, Ordering::SeqCst);
            let fault = Fault {
                calls: CallFilter::Any,
                nth,
                errno,
            };
            let what = format!("call {nth} failed with errno {errno}");
            let (result, injected) = sweep.run(Some(fault), &what);
            let transient =
                errno == EINTR || (errno == EAGAIN && matches!(injected, Some(SeamCall::Ioctl(_))));
            match result {
                Ok(()) => ok += 1,
                Err(e) if transient => {
                    panic!("{what}: a transient failure of {injected:?} failed the run: {e}")
                }
                Err(_) => errors += 1,
            }
        }
    }
    eprintln!(
        "{} faulted runs in {:?}: {ok} ended Ok, {errors} in an error",
        ok + errors,
        started.elapsed()
    );
    assert!(errors > 0, "no injected failure surfaced as an error");

    // In-place copies: each call from the copies on (registration, waits, release) fails in
    // turn; the device is opened as in the sweep above.
    let marks = std::cell::RefCell::new(Vec::new());
    let mark = || marks.borrow_mut().push(sweep.injector.take_log());
    sweep.injector.record(true);
    let in_place = |k: Arc<dyn Syscalls>, _: &[u8]| in_place_copies(k, &mark);
    let (clean, _) = sweep.run_workload(&in_place, None, "fault-free in-place copies");
    clean.expect("the fault-free in-place copies succeed");
    sweep.injector.record(false);
    let marks = marks.into_inner();
    let (first, copy_calls) = (marks[0].len() as u64, marks[1].len() as u64);
    let no_mark = |k: Arc<dyn Syscalls>, _: &[u8]| in_place_copies(k, &|| {});
    for nth in first..first + copy_calls + 2 {
        for errno in [ENOMEM, OTHER_ERRNOS[nth as usize % OTHER_ERRNOS.len()]] {
            progress.fetch_add(1, Ordering::SeqCst);
            let fault = Fault {
                calls: CallFilter::Any,
                nth,
                errno,
            };
            let what = format!("in-place copies: call {nth} failed with errno {errno}");
            // Ok and typed errors are both fine; run_workload fails the test on the rest.
            let _ = sweep.run_workload(&no_mark, Some(fault), &what);
        }
    }
    eprintln!(
        "in-place copies: calls {first}..{} failed in turn",
        first + copy_calls
    );
}
