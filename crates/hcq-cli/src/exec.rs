//! `hcq exec`: runs an unmodified program that drives AMD GPUs through `/dev/kfd` on emulated
//! gfx1100 GPUs.
//!
//! The program runs in a child process with the preload library of `hcq-exec`
//! (`libhcq_exec.so`) in `LD_PRELOAD`, which intercepts its system calls and plays the kernel
//! driver with the same emulator as `amd-emu:N` (see that crate's documentation for how). What
//! the program reads of `/sys` and `/dev` comes from a directory made here for the run
//! (`HCQ_EXEC_ROOT`): the emulator's KFD topology and device nodes, written out as files. The
//! directory is removed when the program ends.

use std::ffi::OsString;
use std::io;
use std::os::unix::fs::DirBuilderExt;
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicI32, Ordering};

use hcq_amd_sys::seam::Syscalls;
use hcq_emu::{EmuConfig, EmuKernel, SysfsKind};

/// The running program's pid, to which SIGINT, SIGTERM and SIGHUP sent to `hcq` are passed on
/// (0 when there is none).
pub static CHILD: AtomicI32 = AtomicI32::new(0);

/// File name of the preload library.
const LIBRARY: &str = "libhcq_exec.so";
/// Where the KFD topology lives in sysfs.
/// The file of the generated tree listing the path prefixes it serves, one per line (read by
/// the preload library at load).
const PREFIXES: &str = "served-paths";

pub struct Options {
    pub gpus: Option<u32>,
    pub vram: Option<String>,
    pub kernel: Option<String>,
    pub command: Vec<OsString>,
}

/// Runs the program and returns the exit code `hcq` should end with: the program's, or 128 +
/// the signal that ended it (as a shell reports it).
pub fn run(o: Options) -> Result<i32, String> {
    let Some((program, args)) = o.command.split_first() else {
        return Err(
            "hcq exec: no command given (hcq exec [--gpus N] [--vram SIZE] [--kernel 6.12|6.6] -- \
             COMMAND [ARGS...])"
                .into(),
        );
    };
    let library = preload_library()?;
    let env_var = |name: &str| std::env::var(name).ok();
    let gpus = o
        .gpus
        .map(|g| g.to_string())
        .or_else(|| env_var("HCQ_EMU_GPUS"));
    let vram = o.vram.clone().or_else(|| env_var("HCQ_EMU_VRAM"));
    let kernel = o.kernel.clone().or_else(|| env_var("HCQ_EMU_KERNEL"));
    let config = EmuConfig::from_vars(
        gpus.as_deref(),
        env_var("HCQ_EMU_MAX_STEPS").as_deref(),
        vram.as_deref(),
        kernel.as_deref(),
        env_var("HCQ_EMU_CUS").as_deref(),
    )
    // The GPU model shapes the tree written here; the KFD version is read again by the
    // program's emulator, from the same variable.
    .and_then(|c| c.with_arch(env_var("HCQ_EMU_ARCH").as_deref()))
    .and_then(|c| c.with_kfd_version(env_var("HCQ_EMU_KFD_VERSION").as_deref()))
    .map_err(|e| {
        // Named as the user gave it: the flag, or the variable it fell back to.
        let flag = match e.variable {
            "HCQ_EMU_GPUS" if o.gpus.is_some() => Some("--gpus"),
            "HCQ_EMU_VRAM" if o.vram.is_some() => Some("--vram"),
            "HCQ_EMU_KERNEL" if o.kernel.is_some() => Some("--kernel"),
            _ => None,
        };
        match flag {
            Some(flag) => format!(
                "hcq exec: {flag} {} is not valid: expected {}",
                e.value, e.accepted
            ),
            None => format!("hcq exec: {e}"),
        }
    })?;
    let root = Root::create().map_err(|e| format!("hcq exec: creating its /sys and /dev: {e}"))?;
    let vram_bytes = write_tree(&root.path, config)
        .map_err(|e| format!("hcq exec: writing {}: {e}", root.path.display()))?;

    let mut preload = library.into_os_string();
    if let Some(existing) = std::env::var_os("LD_PRELOAD").filter(|v| !v.is_empty()) {
        preload.push(":");
        preload.push(existing);
    }
    let mut command = std::process::Command::new(program);
    command
        .args(args)
        .env("LD_PRELOAD", preload)
        .env("HCQ_EXEC_ROOT", &root.path)
        .env("HCQ_EMU_GPUS", config.gpus.to_string())
        // The size the tree shows, which the host's limits may have lowered from the request
        // (with no GPU, the tree shows none: the request stands).
        .env(
            "HCQ_EMU_VRAM",
            if vram_bytes > 0 {
                vram_bytes
            } else {
                config.vram_bytes
            }
            .to_string(),
        )
        .env("HCQ_EMU_MAX_STEPS", config.max_steps.to_string())
        .env("HCQ_EMU_KERNEL", config.kernel.name())
        .env("HCQ_EMU_CUS", config.cus.to_string())
        .env("HCQ_EMU_ARCH", config.arch.name());
    if let Some(version) = config.kfd_version {
        command.env("HCQ_EMU_KFD_VERSION", version.to_string());
    }
    // SAFETY: the closure runs in the child between fork and exec and only makes a system
    // call (async-signal-safe): the program starts with no signal blocked, not with the mask
    // `hcq` keeps for its signal thread.
    unsafe {
        command.pre_exec(|| {
            let mut none: libc::sigset_t = std::mem::zeroed();
            libc::sigemptyset(&mut none);
            libc::pthread_sigmask(libc::SIG_SETMASK, &none, std::ptr::null_mut());
            Ok(())
        });
    }
    let mut child = command
        .spawn()
        .map_err(|e| format!("hcq exec: cannot run {}: {e}", Path::new(program).display()))?;
    CHILD.store(child.id() as i32, Ordering::SeqCst);
    let status = child.wait();
    CHILD.store(0, Ordering::SeqCst);
    drop(root);
    let status = status.map_err(|e| format!("hcq exec: waiting for the program: {e}"))?;
    Ok(match (status.code(), status.signal()) {
        (Some(code), _) => code,
        (None, Some(signal)) => 128 + signal,
        (None, None) => 1,
    })
}

/// `libhcq_exec.so`: `HCQ_EXEC_LIB`, else beside the `hcq` executable (or in its `deps/`,
/// where cargo puts it when it builds it for the tests).
fn preload_library() -> Result<PathBuf, String> {
    if let Some(p) = std::env::var_os("HCQ_EXEC_LIB").filter(|p| !p.is_empty()) {
        let p = PathBuf::from(p);
        return if p.is_file() {
            std::path::absolute(&p).map_err(|e| format!("hcq exec: HCQ_EXEC_LIB: {e}"))
        } else {
            Err(format!(
                "hcq exec: HCQ_EXEC_LIB={} is not a file",
                p.display()
            ))
        };
    }
    let exe = std::env::current_exe().map_err(|e| format!("hcq exec: {e}"))?;
    let dir = exe.parent().unwrap_or(Path::new("."));
    let candidates = [dir.join(LIBRARY), dir.join("deps").join(LIBRARY)];
    candidates
        .iter()
        .find(|p| p.is_file())
        .cloned()
        .ok_or_else(|| {
            format!(
                "hcq exec: the preload library {LIBRARY} is not beside {} (build it with \
             `cargo build --release -p hcq-exec`, or name it with HCQ_EXEC_LIB)",
                exe.display()
            )
        })
}

/// The run's directory, removed when dropped.
struct Root {
    path: PathBuf,
}

impl Root {
    fn create() -> io::Result<Root> {
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.subsec_nanos());
        let path =
            std::env::temp_dir().join(format!("hcq-exec-{}-{nanos:08x}", std::process::id()));
        std::fs::DirBuilder::new().mode(0o700).create(&path)?;
        Ok(Root { path })
    }
}

impl Drop for Root {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.path);
    }
}

/// Writes the emulator's `/sys` and `/dev` entries under `root` and returns the VRAM size each
/// GPU shows.
fn write_tree(root: &Path, config: EmuConfig) -> io::Result<u64> {
    let k = EmuKernel::new(config);
    let under = |path: &str| root.join(path.trim_start_matches('/'));
    for entry in k.sysfs_entries() {
        match &entry.kind {
            SysfsKind::Dir => std::fs::create_dir_all(under(&entry.path))?,
            SysfsKind::File(text) => std::fs::write(under(&entry.path), text)?,
            SysfsKind::Symlink(target) => std::os::unix::fs::symlink(target, under(&entry.path))?,
        }
    }
    std::fs::create_dir_all(under("/dev/dri"))?;
    std::fs::write(under("/dev/kfd"), "")?;
    let mut vram = 0;
    for node in k.read_dir(hcq_amd_sys::seam::TOPOLOGY_NODES)? {
        let properties = k.read_to_string(&format!(
            "{}/{node}/properties",
            hcq_amd_sys::seam::TOPOLOGY_NODES
        ))?;
        let value = |key: &str| {
            properties.lines().find_map(|l| {
                l.strip_prefix(key)
                    .and_then(|v| v.strip_prefix(' '))
                    .and_then(|v| v.trim().parse::<u64>().ok())
            })
        };
        if let (Some(minor), Some(size)) = (value("drm_render_minor"), value("local_mem_size")) {
            if size > 0 {
                std::fs::write(under(&format!("/dev/dri/renderD{minor}")), "")?;
                vram = size;
            }
        }
    }
    // The paths the library serves from this tree: the device nodes and the sysfs roots.
    let mut prefixes = String::from("/dev/kfd\n/dev/dri\n");
    for r in k.sysfs_roots() {
        prefixes.push_str(r);
        prefixes.push('\n');
    }
    std::fs::write(root.join(PREFIXES), prefixes)?;
    Ok(vram)
}
