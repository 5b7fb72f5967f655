//! `hcq exec`: programs written against the Linux kernel driver, run unmodified on the
//! emulated GPU. Their results are checked against the emulator's own view (the topology an
//! `EmuKernel` of the same configuration publishes) and against the program's host-side
//! expectations (the C client checks every byte it copied).
#![cfg(all(target_os = "linux", target_arch = "x86_64"))]

mod kept_objects;

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use hcq_amd_sys::seam::Syscalls;
use hcq_emu::{EmuConfig, EmuKernel};

const NODES: &str = "/sys/devices/virtual/kfd/kfd/topology/nodes";

/// `hcq exec ARGS`, killed if it has not finished in a minute (a hang fails, not stalls).
fn hcq_exec(args: &[&str]) -> Output {
    hcq_exec_with(args, &[])
}

/// `hcq exec ARGS` with variables `env` set (for `hcq exec` and, inherited, the program).
fn hcq_exec_with(args: &[&str], env: &[(&str, &str)]) -> Output {
    let mut child = Command::new(env!("CARGO_BIN_EXE_hcq"))
        .arg("exec")
        .args(args)
        .env_remove("HCQ_DEVICE")
        .envs(env.iter().copied())
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("hcq runs");
    let start = Instant::now();
    while child.try_wait().unwrap().is_none() {
        if start.elapsed() > Duration::from_secs(60) {
            child.kill().unwrap();
            panic!("hcq exec {args:?} did not finish in 60 s");
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    child.wait_with_output().unwrap()
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// Compiles the client with the system's compiler and the kernel's uapi header, as C or (the
/// same source) as C++.
fn compile_client(dir: &Path, cpp: bool) -> PathBuf {
    let here = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/exec");
    let out = dir.join(if cpp { "kfd_client_cpp" } else { "kfd_client" });
    let mut c = Command::new(if cpp { "c++" } else { "cc" });
    if cpp {
        c.args(["-x", "c++", "-std=c++20", "-Wno-missing-field-initializers"]);
    }
    let o = c
        .args(["-O1", "-Wall", "-Wextra", "-Werror", "-pthread", "-I"])
        .arg(here.join("include"))
        .arg(here.join("kfd_client.c"))
        .arg("-o")
        .arg(&out)
        .output()
        .expect("the system's C and C++ compilers (cc, c++) run");
    assert!(
        o.status.success(),
        "the client does not compile (C++: {cpp}):\n{}",
        String::from_utf8_lossy(&o.stderr)
    );
    out
}

/// Compiles the C client, and the kernel it dispatches with clang-19 (installed by
/// `scripts/test.sh`).
fn kfd_client(dir: &Path) -> (PathBuf, PathBuf) {
    let here = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/exec");
    let out = compile_client(dir, false);
    let code = dir.join("kernels.hsaco");
    let o = Command::new("clang-19")
        .args([
            "-x",
            "hip",
            "--offload-arch=gfx1100",
            "-nogpulib",
            "-nogpuinc",
            "-O2",
            "--cuda-device-only",
            "--no-gpu-bundle-output",
            "-c",
        ])
        .arg(here.join("kfd_kernels.hip"))
        .arg("-o")
        .arg(&code)
        .output()
        .expect("clang-19 runs (scripts/test.sh installs it)");
    assert!(
        o.status.success(),
        "the client's kernel does not compile:\n{}",
        String::from_utf8_lossy(&o.stderr)
    );
    kept_objects::keep("exec-kfd_kernels.hsaco", &code);
    (out, code)
}

/// The KFD version an emulator answers `GET_VERSION` with.
fn kfd_version() -> (u32, u32) {
    let k = EmuKernel::new(EmuConfig::default());
    let fd = k.open("/dev/kfd").unwrap();
    let mut v = hcq_amd_sys::kfd::GetVersionArgs::default();
    // SAFETY: a GetVersionArgs for GET_VERSION.
    unsafe {
        k.ioctl(
            fd,
            hcq_amd_sys::kfd::IOC_GET_VERSION.request(),
            &mut v as *mut _ as *mut std::ffi::c_void,
        )
    }
    .unwrap();
    (v.major_version, v.minor_version)
}

/// What an emulator configured like `hcq exec --gpus N` publishes as its first GPU's node:
/// the node, its properties, and how many GPUs there are.
fn first_gpu(gpus: u32) -> (u32, String, usize) {
    let k = EmuKernel::new(EmuConfig {
        gpus,
        ..EmuConfig::default()
    });
    let mut found = Vec::new();
    for n in k.read_dir(NODES).unwrap() {
        let id: u32 = k
            .read_to_string(&format!("{NODES}/{n}/gpu_id"))
            .unwrap()
            .trim()
            .parse()
            .unwrap();
        if id != 0 {
            found.push((n.parse::<u32>().unwrap(), id));
        }
    }
    found.sort();
    let node = found[0].0;
    let props = k
        .read_to_string(&format!("{NODES}/{node}/properties"))
        .unwrap();
    (node, props, found.len())
}

fn property(props: &str, name: &str) -> String {
    props
        .lines()
        .find_map(|l| l.strip_prefix(name).and_then(|r| r.strip_prefix(' ')))
        .unwrap_or_else(|| panic!("no {name} in {props}"))
        .to_string()
}

#[test]
fn a_c_program_drives_the_emulated_gpu_through_the_kernel_driver() {
    let dir = tempfile::tempdir().unwrap();
    let (client, code) = kfd_client(dir.path());
    // No GPU: KFD is there, its topology has only the CPU node.
    let o = hcq_exec(&["--gpus", "0", "--", client.to_str().unwrap()]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{o:?}");
    assert!(err.contains("no GPU in the topology"), "{err}");
    for gpus in [1, 2] {
        let gpus_arg = gpus.to_string();
        let o = hcq_exec(&[
            "--gpus",
            &gpus_arg,
            "--",
            client.to_str().unwrap(),
            code.to_str().unwrap(),
        ]);
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(o.status.success(), "{gpus} GPUs: {o:?}\n{err}");
        let (node, props, count) = first_gpu(gpus);
        assert_eq!(count, gpus as usize);
        let (major, minor) = kfd_version();
        let want = format!(
            "kfd {major}.{minor}\n\
             gpus {gpus} node {node} gfx_target_version {target} render_minor {render}\n\
             thread clock ok\n\
             wait_result 0 signal 7\n\
             sdma copied 12388 bytes\n\
             dispatch scale_add 1000 elements ok\n\
             fault va in the unmapped page reported by the memory event: gpu ok, not_present 1 \
             read_only 0 no_execute 0 imprecise 0\n\
             after the fault: faulted queue stopped, new queue stopped\n\
             done\n",
            target = property(&props, "gfx_target_version"),
            render = property(&props, "drm_render_minor"),
        );
        // The fault is also explained on stderr, with the instruction and where it ran.
        let report = err
            .lines()
            .find(|l| l.starts_with("hcq exec: GPU fault: gpu "))
            .unwrap_or_else(|| panic!("no fault report on stderr:\n{err}"));
        assert!(
            report.contains("VM fault") && report.contains("pc"),
            "{report}"
        );
        assert_eq!(stdout(&o), want, "{gpus} GPUs");
        if gpus == 1 {
            // The same program built as C++ behaves the same.
            let cpp = compile_client(dir.path(), true);
            let o = hcq_exec(&["--", cpp.to_str().unwrap(), code.to_str().unwrap()]);
            assert!(o.status.success(), "C++: {o:?}");
            assert_eq!(stdout(&o), want, "C++");
        }
    }
}

#[test]
fn shell_tools_see_the_emulated_devices_and_exit_statuses_pass_through() {
    let (node, props, _) = first_gpu(1);
    let k = EmuKernel::new(EmuConfig::default());
    let gpu_id = k.read_to_string(&format!("{NODES}/{node}/gpu_id")).unwrap();
    let render = property(&props, "drm_render_minor");
    // `sh` starts `cat` and `ls` with vfork: the children and the shell after them are still
    // intercepted, and the shell's own exit status comes back.
    let script = format!(
        "cat {NODES}/{node}/gpu_id; ls /dev/dri; head -c 15 {NODES}/{node}/properties; echo; \
         test -e /dev/kfd && ls /sys/class/kfd/kfd/topology/nodes; \
         cd /sys/class/kfd/../drm && cat renderD{render}/dev; exit 7"
    );
    let o = hcq_exec(&["--", "sh", "-c", &script]);
    assert_eq!(o.status.code(), Some(7), "{o:?}");
    let first_line = props.lines().next().unwrap();
    assert_eq!(
        stdout(&o),
        format!(
            "{gpu_id}renderD{render}\n{}\n0\n1\n226:{render}\n",
            &first_line[..15.min(first_line.len())]
        )
    );

    // Ended by a signal: reported as a shell would, 128 + the signal.
    let o = hcq_exec(&["--", "sh", "-c", "kill -TERM $$"]);
    assert_eq!(o.status.code(), Some(128 + 15), "{o:?}");
}

/// A shell busy with subshells, pipes, command substitutions and signal traps: forks and
/// clones from many call sites, signals arriving in and around the library's handler.
#[test]
fn a_busy_shell_script_runs_to_the_end() {
    let (node, _, _) = first_gpu(1);
    let k = EmuKernel::new(EmuConfig::default());
    let gpu_id = k.read_to_string(&format!("{NODES}/{node}/gpu_id")).unwrap();
    let script = format!(
        "n=0; same=0; trap 'n=$((n+1))' USR1
         for i in $(seq 1 40); do
           v=$(cat {NODES}/{node}/gpu_id | tr -d '\\n')
           [ \"$v\" = {id} ] && same=$((same+1))
           kill -USR1 $$
           (sleep 0.001; true) &
           wait
         done
         echo \"$same $n\"",
        id = gpu_id.trim()
    );
    let o = hcq_exec(&["--", "bash", "-c", &script]);
    assert!(o.status.success(), "{o:?}");
    assert_eq!(stdout(&o), "40 40\n");
}

#[test]
fn a_missing_program_is_a_clear_error() {
    let o = hcq_exec(&["--", "/nonexistent/program"]);
    assert_eq!(o.status.code(), Some(127), "{o:?}");
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("cannot run /nonexistent/program") && err.contains("No such file"),
        "{err}"
    );
    let o = hcq_exec(&[]);
    assert_eq!(o.status.code(), Some(2), "{o:?}");
    // Bad settings are named as they were given.
    for (flag, value) in [("--gpus", "100"), ("--vram", "1K")] {
        let o = hcq_exec(&[flag, value, "--", "true"]);
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(127), "{o:?}");
        assert!(
            err.contains(&format!("{flag} {value} is not valid")),
            "{err}"
        );
    }
    // --trace cannot see into the program's process: refused, not ignored.
    let trace = std::env::temp_dir().join(format!("hcq-exec-trace-{}.json", std::process::id()));
    let o = Command::new(env!("CARGO_BIN_EXE_hcq"))
        .arg("--trace")
        .arg(&trace)
        .args(["exec", "--", "true"])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2), "{o:?}");
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("does not apply"),
        "{o:?}"
    );
    assert!(!trace.exists());
}

#[test]
fn the_generated_tree_is_removed_afterwards() {
    let o = hcq_exec(&["--", "sh", "-c", "echo $HCQ_EXEC_ROOT"]);
    assert!(o.status.success(), "{o:?}");
    let root = stdout(&o).trim().to_string();
    assert!(!root.is_empty(), "HCQ_EXEC_ROOT is not set in the program");
    assert!(!Path::new(&root).exists(), "{root} is left behind");
}

/// The Python named by `python_var` (a virtualenv `scripts/test.sh` makes), or `None` (said
/// on stderr) when it is not set.
fn tinygrad_python(python_var: &str) -> Option<std::ffi::OsString> {
    let python = std::env::var_os(python_var);
    if python.is_none() {
        eprintln!(
            "\n*** NOT TESTED: tinygrad under hcq exec ({python_var} is not set; scripts/test.sh \
             sets it up) ***\n"
        );
    }
    python
}

/// Runs `tests/exec/tinygrad_suite.py` under `hcq exec --gpus 2` plus `flags` with the Python
/// named by `python_var`, `env` settings and, before the suite, `runner` (if any); checks it
/// passed every check against numpy.
fn run_tinygrad_suite(python_var: &str, flags: &[&str], env: &str, runner: Option<&str>) {
    let Some(python) = tinygrad_python(python_var) else {
        return;
    };
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/exec");
    let suite = dir.join("tinygrad_suite.py");
    let runner = runner.map(|r| dir.join(r));
    let mut args = vec!["--gpus", "2"];
    args.extend_from_slice(flags);
    args.extend(["--", "env", env, python.to_str().unwrap()]);
    if let Some(r) = &runner {
        args.push(r.to_str().unwrap());
    }
    args.push(suite.to_str().unwrap());
    let o = hcq_exec(&args);
    let out = stdout(&o);
    assert!(
        o.status.success() && out.ends_with("all ok\n"),
        "{out}\n{}",
        String::from_utf8_lossy(&o.stderr)
    );
    for line in [
        "device AMD AMDDevice",
        "copy_64MiB: ok",
        "jit graphs ['HCQGraph']",
        "second AMD:1 AMDDevice",
        "gpu1_math: ok",
    ] {
        assert!(
            out.lines().any(|l| l == line),
            "{line:?} missing from\n{out}"
        );
    }
}

/// tinygrad 0.14.0 from PyPI, unmodified, with its own AMD backend compiling through Debian's
/// libLLVM-19 (`DEV=AMD:LLVM`), on two emulated GPUs.
#[test]
fn tinygrad_runs_unmodified_on_two_emulated_gpus() {
    run_tinygrad_suite("HCQ_TEST_TINYGRAD_PYTHON", &[], "DEV=AMD:LLVM", None);
}

/// tinygrad 0.9.0, the seed's own `ops_amd.py` (`AMD=1`), with only its HIP compile step
/// (ROCm's comgr) replaced by clang-19 (`tests/exec/run_tinygrad_0_9.py`), on the kernel it
/// was written for (Linux 6.6 rules).
#[test]
fn tinygrad_0_9_runs_with_only_its_compiler_replaced() {
    run_tinygrad_suite(
        "HCQ_TEST_TINYGRAD09_PYTHON",
        &["--kernel", "6.6"],
        "AMD=1",
        Some("run_tinygrad_0_9.py"),
    );
}

/// tinygrad 0.9.0's real-GPU bug, caught: it gives its whole context-save buffer (0x2c02000
/// bytes, the debugger's memory included) as the context-save size, which Linux 6.12 refuses
/// (tinygrad PR #7765 fixed it); on the emulated 6.12 kernel its device open fails the same way.
#[test]
fn tinygrad_0_9_meets_linux_6_12s_queue_checks() {
    let Some(python) = tinygrad_python("HCQ_TEST_TINYGRAD09_PYTHON") else {
        return;
    };
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/exec");
    let runner = dir.join("run_tinygrad_0_9.py");
    let snippet = dir.join("tinygrad_open_device.py");
    let o = hcq_exec(&[
        "--kernel",
        "6.12",
        "--",
        "env",
        "AMD=1",
        python.to_str().unwrap(),
        runner.to_str().unwrap(),
        snippet.to_str().unwrap(),
    ]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(!o.status.success(), "{o:?}");
    assert!(
        err.contains("Invalid argument") && err.contains("create_queue"),
        "{err}"
    );
}

/// Once a program opens an emulated device, its threads give way to the emulator's, which
/// keep the program's starting priority and policy: under `SCHED_IDLE` unless
/// `HCQ_EXEC_NICE` says otherwise, or that many nice levels below. A thread spinning on a GPU
/// signal gives its core to the GPU's work. `HCQ_EXEC_NICE=0` leaves every thread where it
/// was; a malformed value stops the program with a message naming it.
#[test]
fn the_programs_threads_give_way_to_the_emulated_gpu() {
    let Some(python) = tinygrad_python("HCQ_TEST_TINYGRAD_PYTHON") else {
        return;
    };
    // SAFETY: getpriority reads no memory of ours; 0 names the calling thread.
    let base = unsafe { libc::getpriority(libc::PRIO_PROCESS, 0) };
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/exec/thread_priorities.py");
    let args = [
        "--",
        "env",
        "DEV=AMD:LLVM",
        python.to_str().unwrap(),
        script.to_str().unwrap(),
    ];
    // SAFETY: sched_getscheduler reads no memory; 0 names the calling thread.
    let own_policy = unsafe { libc::sched_getscheduler(0) };
    let settings = [
        (None, 0, libc::SCHED_IDLE),
        (Some("idle"), 0, libc::SCHED_IDLE),
        (Some("4"), 4, own_policy),
        (Some("0"), 0, own_policy),
    ];
    for (setting, lowered, program_policy) in settings {
        let env: Vec<(&str, &str)> = setting.map(|s| ("HCQ_EXEC_NICE", s)).into_iter().collect();
        let o = hcq_exec_with(&args, &env);
        let out = stdout(&o);
        assert!(o.status.success(), "{out}\n{}", stderr(&o));
        let threads: Vec<(&str, &str, i32, i32)> = out
            .lines()
            .filter_map(|l| {
                let mut words = l.split(' ');
                let kind = words.next()?;
                let name = words.next()?;
                let nice = words.next()?.parse().ok()?;
                let policy = words.next()?.parse().ok()?;
                Some((kind, name, nice, policy))
            })
            .collect();
        let program = ((base + lowered).min(19), program_policy);
        for &(kind, name, nice, policy) in &threads {
            let want = if kind == "emulator" {
                (base, own_policy)
            } else {
                program
            };
            assert_eq!(
                (nice, policy),
                want,
                "{kind} thread {name} (nice, policy) with HCQ_EXEC_NICE={setting:?}:\n{out}"
            );
        }
        for engine in ["hcq-emu-cp0-q", "hcq-emu-sdma0-"] {
            assert!(
                threads
                    .iter()
                    .any(|(kind, name, ..)| *kind == "emulator" && name.starts_with(engine)),
                "no {engine}* thread:\n{out}"
            );
        }
        assert!(
            threads.iter().any(|(kind, ..)| *kind == "program"),
            "no thread of the program:\n{out}"
        );
    }
    let o = hcq_exec_with(&args, &[("HCQ_EXEC_NICE", "eleven")]);
    assert_eq!(o.status.code(), Some(127), "{o:?}");
    assert!(
        stderr(&o).contains("HCQ_EXEC_NICE=eleven is not valid: expected idle or 0 to 19"),
        "{}",
        stderr(&o)
    );
}

/// hcq's own driver for real GPUs (`amd:0`, raw `/dev/kfd` calls through libc, doorbells as
/// plain stores) has no GPU to run on here; under `hcq exec` it meets the emulated kernel
/// driver at the system-call boundary, as it would meet Linux. The demo's kernels and a short
/// soak (launches, graph replays and copies, every result checked against the host) pass.
#[test]
fn hcqs_own_real_gpu_driver_runs_under_hcq_exec() {
    let hcq = env!("CARGO_BIN_EXE_hcq");
    let o = hcq_exec(&["--", hcq, "devices"]);
    assert!(o.status.success(), "{o:?}");
    assert!(
        stdout(&o)
            .lines()
            .any(|l| l.starts_with("amd:0 ") && l.ends_with("real")),
        "{}",
        stdout(&o)
    );
    let o = hcq_exec(&["--", hcq, "demo", "--device", "amd:0"]);
    let out = stdout(&o);
    assert!(
        o.status.success() && out.contains("all results verified"),
        "{out}\n{}",
        String::from_utf8_lossy(&o.stderr)
    );
    assert!(out.starts_with("device amd:0 (gfx1100, real)"), "{out}");
    let o = hcq_exec(&[
        "--",
        hcq,
        "soak",
        "--launches",
        "3000",
        "--replays",
        "300",
        "--copies",
        "60",
        "--device",
        "amd:0",
    ]);
    let out = stdout(&o);
    assert!(
        o.status.success() && out.contains("soak passed: every result verified"),
        "{out}\n{}",
        String::from_utf8_lossy(&o.stderr)
    );
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// A machine whose only GPU is one hcq does not drive (a Radeon RX 6900 XT, gfx1030), as its
/// own driver for real GPUs meets it under `hcq exec`: `amd:0` is listed with the reason in
/// every form of `hcq devices`, opening it says why, and the default device is an error
/// naming the architecture, not a quiet fall back to the emulator. (The program's own
/// emulator, `amd-emu:0`, reads the same `HCQ_EMU_ARCH`, and is a gfx1030 too.)
#[test]
fn a_gpu_hcq_does_not_drive_is_listed_with_the_reason_and_never_chosen() {
    let hcq = env!("CARGO_BIN_EXE_hcq");
    let env = [("HCQ_EMU_ARCH", "gfx1030")];
    let why = "unsupported architecture gfx1030: hcq drives only RDNA3's Navi 3x GPUs (gfx1100, \
               gfx1101, gfx1102), whose machine code, dispatch setup and HDP flush registers it \
               is written for";

    let o = hcq_exec_with(&["--", hcq, "devices"], &env);
    assert!(o.status.success(), "{o:?}");
    let out = stdout(&o);
    let line = out
        .lines()
        .find(|l| l.starts_with("amd:0 "))
        .unwrap_or_else(|| panic!("amd:0 missing:\n{out}"));
    let columns: Vec<&str> = line.split_whitespace().collect();
    assert_eq!(columns[0], "amd:0");
    assert_eq!(columns[1], "gfx1030");
    assert_eq!(&columns[4..], ["real,", "unusable"], "{line}");
    let err = stderr(&o);
    assert!(
        err.lines()
            .any(|l| l == format!("hcq: amd:0 cannot be used: {why}")),
        "{err}"
    );
    // The GPU is listed: no "no real AMD GPU" line besides.
    assert!(!err.contains("no real AMD GPU"), "{err}");

    let o = hcq_exec_with(&["--", hcq, "devices", "-v"], &env);
    assert!(o.status.success(), "{o:?}");
    let out = stdout(&o);
    let line = out.lines().find(|l| l.starts_with("amd:0: ")).unwrap();
    assert!(
        line.starts_with("amd:0: gfx1030 (real), ")
            && line.ends_with(&format!(" of memory, cannot be used: {why}")),
        "{line}"
    );

    let o = hcq_exec_with(&["--", hcq, "devices", "--json"], &env);
    assert!(o.status.success(), "{o:?}");
    let records: Vec<serde_json::Value> = stdout(&o)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
        .collect();
    let d = records
        .iter()
        .find(|d| d["name"] == "amd:0")
        .expect("amd:0 listed");
    assert_eq!(d["arch"], "gfx1030");
    assert_eq!(d["emulated"], false);
    assert_eq!(d["unusable"], why);
    assert!(d["compute"].is_null() && d["description"].is_null(), "{d}");
    assert!(
        records.iter().all(|r| r.get("driver").is_none()),
        "{records:?}"
    );

    // Opened by name, it says why.
    let o = hcq_exec_with(&["--", hcq, "demo", "--device", "amd:0"], &env);
    assert!(!o.status.success(), "{o:?}");
    assert!(
        stderr(&o).contains(&format!("amd:0 cannot be used: {why}")),
        "{}",
        stderr(&o)
    );
    // As the default, it is an error naming it, not the emulator.
    let o = hcq_exec_with(&["--", hcq, "demo"], &env);
    assert!(!o.status.success(), "{o:?}");
    assert!(
        stderr(&o).contains(&format!(
            "this machine has an AMD GPU driver (/dev/kfd), but hcq cannot drive the GPUs it \
             lists: amd:0: {why}. Set HCQ_DEVICE=amd-emu:0"
        )),
        "{}",
        stderr(&o)
    );
}

/// A kernel whose KFD is older than 1.4: no `amd:N`, and every form of `hcq devices` says
/// why (with the JSON a record of the driver's state). The program's own emulator reads the
/// same `HCQ_EMU_KFD_VERSION`, so there is no `amd-emu:N` either.
#[test]
fn a_kfd_too_old_is_named_in_every_form_of_hcq_devices() {
    let hcq = env!("CARGO_BIN_EXE_hcq");
    let env = [("HCQ_EMU_KFD_VERSION", "1.3")];
    let why = "KFD 1.3 is older than 1.4, which hcq needs for AMDKFD_IOC_ALLOC_MEMORY_OF_GPU's \
               UNCACHED flag (its signals, event page and rings are memory the GPU must not \
               cache): the kernel driver is too old (Linux 5.13 or later, or a current \
               amdgpu-dkms, has it)";
    let o = hcq_exec_with(&["--", hcq, "devices", "--json"], &env);
    assert!(!o.status.success(), "no device at all: {o:?}");
    let records: Vec<serde_json::Value> = stdout(&o)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
        .collect();
    assert_eq!(records.len(), 1, "{records:?}");
    assert_eq!(records[0]["driver"], "amd");
    assert_eq!(records[0]["unavailable"], why);
    for args in [&["devices"][..], &["devices", "-v"], &["demo"]] {
        let mut argv = vec!["--", hcq];
        argv.extend_from_slice(args);
        let o = hcq_exec_with(&argv, &env);
        assert!(!o.status.success(), "{args:?}: {o:?}");
        let err = stderr(&o);
        assert!(
            err.contains(&format!(
                "this machine has an AMD GPU driver (/dev/kfd), but hcq cannot use it: {why}. \
                 Set HCQ_DEVICE=amd-emu:0"
            )),
            "{args:?}: {err}"
        );
    }
}
