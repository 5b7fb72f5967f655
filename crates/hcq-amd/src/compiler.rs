//! HIP source to an AMD code object with a stock clang (no ROCm), through the compile cache.
//!
//! A source file compiles as clang or hipcc would compile it: clang is given the file's
//! path, so `#include "local.h"` finds the header next to it whatever the working directory.
//! Source given as text compiles as `clang -x hip -` would, from the working directory.
//! clang reports every file it read (`-MD`), and the cache entry lists them with their
//! hashes, so an entry is used only while those files are unchanged.
//!
//! Every compile includes hcq's own HIP header first ([`HIP_HEADERS`], as hipcc includes
//! ROCm's): `__global__`, `threadIdx`, `__syncthreads`, atomics, shuffles, `__half` and the
//! float math library work with no ROCm installed.
//!
//! Nothing of a compile outlives it: the source goes in through a pipe, the object and the
//! dependency list come back through pipes, and clang's own temporary files go to a private
//! directory that is removed afterwards. clang runs in its own process group and is killed
//! if the thread that started it (hence the process) dies; [`stop_compiles_for_exit`] lets a
//! signal handler end running compiles and clean up before the process exits. A private
//! directory left by a process killed outright is removed by the next compile.

use hcq_core::{CompileCache, CompileKey, CompileOptions, CompileOutput, Error, Result};
use std::fs::File;
use std::io::{Read, Write};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, Instant};

/// The clang this runtime uses: `HCQ_CLANG`, else `clang-19`, else `clang`.
pub fn clang_path() -> PathBuf {
    if let Some(p) = std::env::var_os("HCQ_CLANG") {
        return PathBuf::from(p);
    }
    for c in ["clang-19", "clang"] {
        if ends_with_caller(&mut Command::new(c))
            .arg("--version")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success())
        {
            return PathBuf::from(c);
        }
    }
    PathBuf::from("clang-19")
}

/// Makes a child start with no signal blocked (a caller may block signals to wait for them
/// on a thread, as the `hcq` binary does, and the mask survives exec) and die with the
/// thread that starts it, which waits for it, and so with this process however that ends.
fn ends_with_caller(cmd: &mut Command) -> &mut Command {
    let parent = std::process::id() as i32;
    // SAFETY: the closure runs in the forked child before exec and calls only
    // async-signal-safe functions (sigemptyset, pthread_sigmask, prctl, getppid), touching
    // no memory shared with the parent.
    unsafe {
        cmd.pre_exec(move || {
            let mut none: libc::sigset_t = std::mem::zeroed();
            libc::sigemptyset(&mut none);
            if libc::pthread_sigmask(libc::SIG_SETMASK, &none, std::ptr::null_mut()) != 0 {
                return Err(std::io::Error::other("cannot clear the signal mask"));
            }
            if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL as libc::c_ulong) < 0 {
                return Err(std::io::Error::last_os_error());
            }
            if libc::getppid() != parent {
                return Err(std::io::Error::other("hcq ended before clang started"));
            }
            Ok(())
        })
    }
}

/// Compiles HIP device code for one AMD target.
#[derive(Debug, Clone)]
pub struct HipCompiler {
    /// The target, e.g. `gfx1100` (clang's `-mcpu`).
    pub arch: String,
    /// Found at the first compile: opening a device must not start a process.
    clang: OnceLock<PathBuf>,
    identity: OnceLock<std::result::Result<String, String>>,
    cache: CompileCache,
}

/// Flags every compile uses; part of the cache key.
pub fn base_flags(arch: &str) -> Vec<String> {
    [
        "-x",
        "hip",
        "--cuda-device-only",
        "--no-gpu-bundle-output",
        "-nogpulib",
        "-nogpuinc",
        "-O3",
        "-fno-exceptions",
        // clang names a symbol after a hash of the command line, which holds the compile's
        // private directory: without this the same source would give a new object each time.
        "-fuse-cuid=none",
    ]
    .iter()
    .map(|s| s.to_string())
    .chain([format!("--offload-arch={arch}")])
    .collect()
}

/// hcq's HIP headers (`include/hip/` in this crate): device code as hipcc compiles it,
/// without ROCm. Every compile gets them in its private directory, first on the system
/// include path, with `hip/hip_runtime.h` included before the source (as hipcc does), so an
/// `#include <hip/hip_runtime.h>` is optional.
pub const HIP_HEADERS: [(&str, &str); 3] = [
    (
        "hip/hip_runtime.h",
        include_str!("../include/hip/hip_runtime.h"),
    ),
    ("hip/hip_fp16.h", include_str!("../include/hip/hip_fp16.h")),
    (
        "hip/hip_runtime_api.h",
        include_str!("../include/hip/hip_runtime_api.h"),
    ),
];

/// A digest of [`HIP_HEADERS`] for the cache key: the headers are not files a compile's
/// dependency list can name for long (they live in its private directory).
fn hip_headers_digest() -> String {
    // FNV-1a, 64-bit: enough to tell one version of the headers from another.
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for (name, text) in HIP_HEADERS {
        for &b in name.as_bytes().iter().chain(text.as_bytes()) {
            h = (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3);
        }
    }
    format!("hcq-hip-headers-{h:016x}")
}

/// Writes [`HIP_HEADERS`] under `dir/include` and returns the flags that use them.
fn install_hip_headers(dir: &Path) -> Result<Vec<String>> {
    let include = dir.join("include");
    for (name, text) in HIP_HEADERS {
        let path = include.join(name);
        let written = path
            .parent()
            .map_or(Ok(()), std::fs::create_dir_all)
            .and_then(|()| std::fs::write(&path, text));
        written.map_err(|source| Error::Io {
            what: format!("writing {}", path.display()),
            source,
        })?;
    }
    Ok(vec![
        "-isystem".to_string(),
        include.to_string_lossy().into_owned(),
        "-include".to_string(),
        "hip/hip_runtime.h".to_string(),
    ])
}

/// The descriptor clang writes its dependency list to (`-MF /dev/fd/3`).
const DEPFILE_FD: i32 = 3;

/// How clang is told about its input and output. `-fintegrated-cc1` keeps the compiler
/// proper inside the clang process we start (and watch), rather than in a grandchild.
const PLUMBING_FLAGS: [&str; 6] = ["-fintegrated-cc1", "-MD", "-MF", "/dev/fd/3", "-o", "-"];

/// Where clang reads the source from.
enum Input<'a> {
    /// Text through stdin.
    Text(&'a str),
    /// The file at this path.
    File(PathBuf),
}

impl HipCompiler {
    fn clang(&self) -> &PathBuf {
        self.clang.get_or_init(clang_path)
    }

    /// A compiler for `arch` storing its objects in `cache`. Finding clang waits for the
    /// first compile, so that opening a device starts no process.
    pub fn new(arch: &str, cache: CompileCache) -> Self {
        HipCompiler {
            arch: arch.to_string(),
            clang: OnceLock::new(),
            identity: OnceLock::new(),
            cache,
        }
    }

    /// The compiler's `--version` text, which keys the cache.
    pub fn identity(&self) -> Result<String> {
        self.identity
            .get_or_init(|| {
                let out = ends_with_caller(&mut Command::new(self.clang()))
                    .arg("--version")
                    .output()
                    .map_err(|e| {
                        format!(
                            "cannot run {}: {e} (install clang-19 and lld-19, or set HCQ_CLANG)",
                            self.clang().display()
                        )
                    })?;
                if !out.status.success() {
                    return Err(format!("{} --version failed", self.clang().display()));
                }
                Ok(String::from_utf8_lossy(&out.stdout).into_owned())
            })
            .clone()
            .map_err(|message| Error::Compile {
                message,
                log: String::new(),
            })
    }

    /// Compiles HIP source text (or returns the cached object). Its quoted `#include`s
    /// resolve from the working directory, as with `clang -x hip -`.
    pub fn compile(&self, source: &str) -> Result<Vec<u8>> {
        self.compile_with(source, &CompileOptions::default())
    }

    /// [`HipCompiler::compile`] with `options` (`-I`, `-D`, `-O`, other flags).
    pub fn compile_with(&self, source: &str, options: &CompileOptions) -> Result<Vec<u8>> {
        if source.trim().is_empty() {
            return Err(Error::InvalidArgument(
                "the HIP source is empty: there is no kernel to compile".into(),
            ));
        }
        let dir = std::env::current_dir().unwrap_or_else(|_| PathBuf::from("."));
        self.compile_input(source, Input::Text(source), &dir, options)
    }

    /// Compiles a HIP source file (or returns the cached object). Its `#include "..."`s
    /// resolve relative to the file, as with clang or hipcc, from any working directory.
    pub fn compile_file(&self, path: &Path) -> Result<Vec<u8>> {
        self.compile_file_with(path, &CompileOptions::default())
    }

    /// [`HipCompiler::compile_file`] with `options` (`-I`, `-D`, `-O`, other flags).
    pub fn compile_file_with(&self, path: &Path, options: &CompileOptions) -> Result<Vec<u8>> {
        let bytes = std::fs::read(path).map_err(|source| Error::Io {
            what: format!("reading {}", path.display()),
            source,
        })?;
        let source = String::from_utf8(bytes)
            .map_err(|_| Error::InvalidArgument(format!("{} is not UTF-8 text", path.display())))?;
        if source.trim().is_empty() {
            return Err(Error::InvalidArgument(format!(
                "{} is empty: there is no kernel to compile",
                path.display()
            )));
        }
        // clang gets the path as the caller named it, so that its messages and `__FILE__` say
        // the same; a relative one starting with `-` would be taken for an option.
        let as_named = if path.is_relative() && path.to_string_lossy().starts_with('-') {
            Path::new(".").join(path)
        } else {
            path.to_path_buf()
        };
        let dir = std::env::current_dir().unwrap_or_else(|_| PathBuf::from("."));
        self.compile_input(&source, Input::File(as_named), &dir, options)
    }

    fn compile_input(
        &self,
        source: &str,
        input: Input<'_>,
        dir: &Path,
        options: &CompileOptions,
    ) -> Result<Vec<u8>> {
        options.check()?;
        let extra = options.to_args();
        let identity = self.identity()?;
        let mut flags = base_flags(&self.arch);
        flags.push(hip_headers_digest());
        flags.extend(extra.iter().cloned());
        // The input's path is what `__FILE__` expands to.
        flags.push(match &input {
            Input::Text(_) => "-".to_string(),
            Input::File(path) => path.to_string_lossy().into_owned(),
        });
        let key = CompileKey {
            source,
            arch: &self.arch,
            compiler: &identity,
            flags: &flags,
        };
        let started = Instant::now();
        let compiled = std::cell::Cell::new(false);
        let object = self.cache.get_or_compile_reading(&key, dir, || {
            compiled.set(true);
            self.run_clang(&input, dir, &extra)
        })?;
        let what = match &input {
            Input::Text(_) => "source text".to_string(),
            Input::File(path) => path.display().to_string(),
        };
        tracing::debug!(
            target: "hcq::compile",
            "{}: {what}{} ({}) in {:.1} ms, {} bytes",
            self.arch,
            if extra.is_empty() { String::new() } else { format!(" with {}", extra.join(" ")) },
            if compiled.get() { "compiled" } else { "from the cache" },
            started.elapsed().as_secs_f64() * 1e3,
            object.len()
        );
        Ok(object)
    }

    fn run_clang(&self, input: &Input<'_>, dir: &Path, extra: &[String]) -> Result<CompileOutput> {
        let mut running = Running::start()?;
        let headers = install_hip_headers(&running.scratch)?;
        let (depfile_read, depfile_write) = pipe()?;
        let mut cmd = Command::new(self.clang());
        cmd.args(base_flags(&self.arch))
            .args(&headers)
            .args(extra)
            .args(PLUMBING_FLAGS)
            .current_dir(dir)
            // clang's temporary objects go where they are removed with the compile.
            .env("TMPDIR", &running.scratch)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .process_group(0);
        match input {
            Input::Text(_) => cmd.arg("-").stdin(Stdio::piped()),
            Input::File(path) => cmd.arg(path).stdin(Stdio::null()),
        };
        let depfile_fd = depfile_write.as_raw_fd();
        // SAFETY: the closure runs in the forked child before exec and calls only
        // async-signal-safe functions (fcntl, dup2), touching no memory shared with the parent.
        unsafe {
            cmd.pre_exec(move || {
                if depfile_fd == DEPFILE_FD {
                    if libc::fcntl(DEPFILE_FD, libc::F_SETFD, 0) < 0 {
                        return Err(std::io::Error::last_os_error());
                    }
                } else if libc::dup2(depfile_fd, DEPFILE_FD) < 0 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            })
        };
        ends_with_caller(&mut cmd);
        let mut child = cmd.spawn().map_err(|e| Error::Compile {
            message: format!(
                "cannot run {}: {e} (install clang-19 and lld-19, or set HCQ_CLANG)",
                self.clang().display()
            ),
            log: String::new(),
        })?;
        drop(depfile_write);
        running.spawned(child.id() as i32);
        let (stdin, stdout, stderr) =
            (child.stdin.take(), child.stdout.take(), child.stderr.take());
        let (object, log, depfile) = std::thread::scope(|s| {
            if let (Some(mut stdin), Input::Text(text)) = (stdin, input) {
                // clang may stop reading early (a syntax error); its log says why.
                s.spawn(move || {
                    let _ = stdin.write_all(text.as_bytes());
                });
            }
            let log = s.spawn(move || read_all(stderr));
            let depfile = s.spawn(move || read_all(Some(File::from(depfile_read))));
            let object = read_all(stdout);
            (
                object,
                log.join().unwrap_or_default(),
                depfile.join().unwrap_or_default(),
            )
        });
        let status = child.wait().map_err(|source| Error::Io {
            what: "waiting for clang".into(),
            source,
        })?;
        let log = String::from_utf8_lossy(&log).into_owned();
        if !status.success() {
            let message = match status.signal() {
                Some(signal) => format!("clang was killed by signal {signal}"),
                None => format!("clang failed for {}", self.arch),
            };
            return Err(Error::Compile { message, log });
        }
        if object.is_empty() {
            return Err(Error::Compile {
                message: "clang succeeded but wrote no code object".into(),
                log,
            });
        }
        // The bundled headers are in the cache key, not in the list of files to recheck.
        let inputs = parse_depfile(&String::from_utf8_lossy(&depfile))
            .into_iter()
            .filter(|p| p.as_os_str() != "<stdin>" && !p.starts_with(&running.scratch))
            .collect();
        Ok(CompileOutput { object, inputs })
    }
}

impl HipCompiler {
    /// Links a relocatable AMDGPU object (`clang -c` for OpenCL or plain C, LLVM's code
    /// generator) into a loadable code object with ld.lld, through clang's driver as hipcc
    /// links. Runs like a compile: in a private directory, in its own process group, ending
    /// with the caller.
    pub fn link_relocatable(&self, object: &[u8]) -> Result<Vec<u8>> {
        let mut running = Running::start()?;
        let input = running.scratch.join("relocatable.o");
        let output = running.scratch.join("linked.hsaco");
        std::fs::write(&input, object).map_err(|source| Error::Io {
            what: format!("writing {}", input.display()),
            source,
        })?;
        let mut cmd = Command::new(self.clang());
        cmd.arg("--target=amdgcn-amd-amdhsa")
            .arg(format!("-mcpu={}", self.arch))
            .arg("-nostdlib")
            .arg("-o")
            .arg(&output)
            .arg(&input)
            .env("TMPDIR", &running.scratch)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .process_group(0);
        ends_with_caller(&mut cmd);
        let child = cmd.spawn().map_err(|e| Error::Compile {
            message: format!(
                "cannot run {} to link a relocatable object: {e} (install clang-19 and lld-19, \
                 or set HCQ_CLANG)",
                self.clang().display()
            ),
            log: String::new(),
        })?;
        running.spawned(child.id() as i32);
        let out = child.wait_with_output().map_err(|source| Error::Io {
            what: "waiting for the linker".into(),
            source,
        })?;
        let log = String::from_utf8_lossy(&out.stderr).into_owned()
            + &String::from_utf8_lossy(&out.stdout);
        if !out.status.success() {
            // The object is what is wrong (the linker ran): a bad code object, with its words.
            return Err(Error::InvalidCodeObject(format!(
                "a relocatable object that ld.lld cannot link for {}: {}",
                self.arch,
                log.trim_end()
            )));
        }
        std::fs::read(&output).map_err(|source| Error::Io {
            what: format!("reading {}", output.display()),
            source,
        })
    }
}

fn read_all(from: Option<impl Read>) -> Vec<u8> {
    let mut bytes = Vec::new();
    if let Some(mut r) = from {
        let _ = r.read_to_end(&mut bytes);
    }
    bytes
}

/// A pipe, both ends closed on exec (the child gets its end through `dup2`).
fn pipe() -> Result<(OwnedFd, OwnedFd)> {
    let mut fds = [0i32; 2];
    // SAFETY: `fds` is a valid array of two descriptors for pipe2 to fill.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } < 0 {
        return Err(Error::Io {
            what: "creating a pipe for clang".into(),
            source: std::io::Error::last_os_error(),
        });
    }
    // SAFETY: pipe2 succeeded, so both descriptors are open and owned by nobody else.
    Ok(unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) })
}

/// The files of a Makefile dependency rule as clang writes it (`-MD`): `target: dep dep \`
/// with a space in a name written `\ `, `#` as `\#` and `$` as `$$`.
pub fn parse_depfile(text: &str) -> Vec<PathBuf> {
    let mut words = Vec::new();
    let mut word = String::new();
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\\' => {
                let mut backslashes = 1;
                while chars.peek() == Some(&'\\') {
                    chars.next();
                    backslashes += 1;
                }
                match chars.peek() {
                    // 2n+1 backslashes then a space: n backslashes and a space in the name.
                    Some(' ') if backslashes % 2 == 1 => {
                        chars.next();
                        word.extend(std::iter::repeat_n('\\', backslashes / 2));
                        word.push(' ');
                    }
                    Some('#') if backslashes == 1 => {
                        chars.next();
                        word.push('#');
                    }
                    // A line continuation.
                    Some('\n') | Some('\r') if backslashes == 1 => {
                        if !word.is_empty() {
                            words.push(std::mem::take(&mut word));
                        }
                    }
                    _ => word.extend(std::iter::repeat_n('\\', backslashes)),
                }
            }
            '$' if chars.peek() == Some(&'$') => {
                chars.next();
                word.push('$');
            }
            c if c.is_whitespace() => {
                if !word.is_empty() {
                    words.push(std::mem::take(&mut word));
                }
            }
            c => word.push(c),
        }
    }
    if !word.is_empty() {
        words.push(word);
    }
    // Everything up to and including the word ending the target (`-:`) is the target.
    let deps = match words.iter().position(|w| w.ends_with(':')) {
        Some(i) => &words[i + 1..],
        None => &words[..],
    };
    deps.iter().map(PathBuf::from).collect()
}

/// Set once the process is ending on a signal: no compile starts or returns after it.
static STOPPING: AtomicBool = AtomicBool::new(false);
/// The compiles running now: an id each, and clang's process group once it is started.
static RUNNING: Mutex<Vec<(u64, i32)>> = Mutex::new(Vec::new());
/// Numbers the compiles of this process (and names their private directories).
static COMPILE_SEQUENCE: AtomicU64 = AtomicU64::new(0);
const SCRATCH_PREFIX: &str = "hcq-compile-";
/// Longest wait for a killed clang's process group to disappear.
const GROUP_EXIT_WAIT: Duration = Duration::from_secs(2);

fn running() -> std::sync::MutexGuard<'static, Vec<(u64, i32)>> {
    RUNNING.lock().unwrap_or_else(|e| e.into_inner())
}

fn kill_group(group: i32) {
    // SAFETY: kill has no memory effects; `group` is the process group of a clang this
    // process started.
    unsafe { libc::kill(-group, libc::SIGKILL) };
}

fn wait_for_group_exit(group: i32) {
    let start = Instant::now();
    // SAFETY: signal 0 only asks whether the process group still exists.
    while unsafe { libc::kill(-group, 0) } == 0 && start.elapsed() < GROUP_EXIT_WAIT {
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// Blocks the calling thread for good: the process is about to exit.
fn park_until_exit() -> ! {
    loop {
        std::thread::park();
    }
}

/// One compile in [`RUNNING`], with its private directory for clang's temporary files.
/// Dropping it removes the directory, then the registration.
struct Running {
    id: u64,
    group: i32,
    scratch: PathBuf,
}

impl Running {
    fn start() -> Result<Running> {
        let id = COMPILE_SEQUENCE.fetch_add(1, Ordering::Relaxed);
        {
            // Checked and registered under one lock, so that a stop either sees this
            // compile and waits for it, or is seen by it.
            let mut list = running();
            if STOPPING.load(Ordering::SeqCst) {
                drop(list);
                park_until_exit();
            }
            list.push((id, 0));
        }
        let temp = std::env::temp_dir();
        remove_abandoned_scratch_dirs(&temp);
        let scratch = temp.join(format!("{SCRATCH_PREFIX}{}-{id}", std::process::id()));
        let running = Running {
            id,
            group: 0,
            scratch,
        };
        std::fs::create_dir(&running.scratch).map_err(|source| Error::Io {
            what: format!("creating {}", running.scratch.display()),
            source,
        })?;
        Ok(running)
    }

    fn spawned(&mut self, group: i32) {
        let mut list = running();
        self.group = group;
        if let Some(entry) = list.iter_mut().find(|(id, _)| *id == self.id) {
            entry.1 = group;
        }
        if STOPPING.load(Ordering::SeqCst) {
            kill_group(group);
        }
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        let stopping = STOPPING.load(Ordering::SeqCst);
        if stopping && self.group != 0 {
            // clang was reaped; what it started may still be dying.
            wait_for_group_exit(self.group);
        }
        let _ = std::fs::remove_dir_all(&self.scratch);
        running().retain(|(id, _)| *id != self.id);
        if stopping {
            // The thread that stopped the compiles ends the process once every one has
            // cleaned up; this one must not report a failed compile meanwhile.
            park_until_exit();
        }
    }
}

/// Ends every running compile and waits (briefly) until their clangs are gone and their
/// files removed. For a process about to exit on a signal (the `hcq` binary calls it on
/// SIGINT, SIGTERM and SIGHUP): the compiles it stops never return, and none starts after.
pub fn stop_compiles_for_exit() {
    {
        let list = running();
        STOPPING.store(true, Ordering::SeqCst);
        for &(_, group) in list.iter() {
            if group != 0 {
                kill_group(group);
            }
        }
    }
    let start = Instant::now();
    while !running().is_empty() && start.elapsed() < GROUP_EXIT_WAIT * 2 {
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// Removes the private directories of compiles whose process no longer exists (killed
/// outright, so that nothing of it could clean up).
fn remove_abandoned_scratch_dirs(temp: &Path) {
    let Ok(entries) = std::fs::read_dir(temp) else {
        return;
    };
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(pid) = name
            .to_str()
            .and_then(|n| n.strip_prefix(SCRATCH_PREFIX))
            .and_then(|rest| rest.split_once('-'))
            .and_then(|(pid, seq)| {
                seq.parse::<u64>().ok()?;
                pid.parse::<i32>().ok()
            })
        else {
            continue;
        };
        // SAFETY: signal 0 only asks whether the process exists.
        let gone = unsafe { libc::kill(pid, 0) } < 0
            && std::io::Error::last_os_error().raw_os_error() == Some(libc::ESRCH);
        if gone && entry.file_type().is_ok_and(|t| t.is_dir()) {
            let _ = std::fs::remove_dir_all(entry.path());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn depfiles_parse_with_escapes_and_continuations() {
        let text = "-: k.hip ./local.h \\\n  /usr/include/a\\ b.h /x/c\\#d.h /x/e$$f.h \\\r\n /x/g\\\\\\ h.h /x/i\\j.h\n";
        let want: Vec<PathBuf> = [
            "k.hip",
            "./local.h",
            "/usr/include/a b.h",
            "/x/c#d.h",
            "/x/e$f.h",
            "/x/g\\ h.h",
            "/x/i\\j.h",
        ]
        .iter()
        .map(PathBuf::from)
        .collect();
        assert_eq!(parse_depfile(text), want);
        assert!(parse_depfile("").is_empty());
        assert_eq!(parse_depfile("-:\n"), Vec::<PathBuf>::new());
    }

    fn write_settled(path: &Path, text: &str) {
        std::fs::write(path, text).unwrap();
        std::fs::File::options()
            .write(true)
            .open(path)
            .unwrap()
            .set_modified(std::time::SystemTime::now() - Duration::from_secs(60))
            .unwrap();
    }

    #[test]
    fn source_text_that_includes_a_file_is_recompiled_when_the_file_changes() {
        let dir = tempfile::tempdir().unwrap();
        let header = dir.path().join("value.h");
        let source = format!(
            "#include \"{}\"\nextern \"C\" __attribute__((global)) void k(int* o) {{ o[0] = VALUE; }}\n",
            header.display()
        );
        let cached = HipCompiler::new("gfx1100", CompileCache::at(dir.path().join("cache")));
        let uncached = HipCompiler::new("gfx1100", CompileCache::disabled());
        write_settled(&header, "#define VALUE 42\n");
        let first = cached.compile(&source).unwrap();
        assert_eq!(first, uncached.compile(&source).unwrap());
        assert_eq!(cached.compile(&source).unwrap(), first);
        write_settled(&header, "#define VALUE 43\n");
        let second = cached.compile(&source).unwrap();
        assert_ne!(second, first, "the header's change reached the object");
        assert_eq!(second, uncached.compile(&source).unwrap());
    }

    #[test]
    fn empty_source_is_refused_before_clang_runs() {
        let dir = tempfile::tempdir().unwrap();
        let compiler = HipCompiler::new("gfx1100", CompileCache::disabled());
        let e = compiler.compile(" \n\t").unwrap_err().to_string();
        assert!(e.contains("empty"), "{e}");
        let empty = dir.path().join("empty.hip");
        std::fs::write(&empty, "").unwrap();
        let e = compiler.compile_file(&empty).unwrap_err().to_string();
        assert!(e.contains("empty") && e.contains("empty.hip"), "{e}");
        let e = compiler
            .compile_file(&dir.path().join("missing.hip"))
            .unwrap_err()
            .to_string();
        assert!(e.contains("missing.hip"), "{e}");
    }
}
