//! The program's descriptors of emulated devices, and the paths it sees through to the
//! generated `/sys` and `/dev` tree.
//!
//! An open of `/dev/kfd` or `/dev/dri/renderD<minor>` opens the emulated device and gives the
//! program a real descriptor in return (an empty memfd standing in for the device node), so
//! that the kernel keeps numbering, `fcntl`, `fstat`, `poll` and inheritance working; this
//! table says which descriptors stand for which emulated one. Duplicates share the emulated
//! descriptor, which closes with the last of them.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};

use hcq_amd_sys::seam::{Fd, Kernel};

/// An emulated device descriptor, closed in the emulator when the last program descriptor
/// standing for it is closed.
#[derive(Debug)]
pub struct EmulatedFd {
    pub fd: Fd,
}

impl Drop for EmulatedFd {
    fn drop(&mut self) {
        if let Some(Ok(k)) = EMULATOR.get() {
            k.close(self.fd);
        }
    }
}

static TABLE: Mutex<BTreeMap<i32, Arc<EmulatedFd>>> = Mutex::new(BTreeMap::new());

/// The emulator, made on the first open of a device (its configuration error, if any, is
/// kept and reported at every open).
pub static EMULATOR: OnceLock<Result<&'static hcq_emu::EmuKernel, String>> = OnceLock::new();

pub fn emulator() -> Result<&'static hcq_emu::EmuKernel, &'static str> {
    EMULATOR
        .get_or_init(|| {
            let k = hcq_emu::kernel().map_err(|e| format!("hcq exec: {e}"))?;
            k.echo_fault_reports(Some("hcq exec: GPU fault: "));
            Ok(k)
        })
        .as_ref()
        .map(|k| *k)
        .map_err(String::as_str)
}

/// The emulator if a device was ever opened (no side effects otherwise).
pub fn emulator_if_started() -> Option<&'static hcq_emu::EmuKernel> {
    EMULATOR.get().and_then(|r| r.as_ref().ok().copied())
}

fn table() -> MutexGuard<'static, BTreeMap<i32, Arc<EmulatedFd>>> {
    TABLE.lock().unwrap_or_else(|e| e.into_inner())
}

/// The emulated descriptor program descriptor `fd` stands for.
pub fn lookup(fd: i32) -> Option<Fd> {
    if fd < 0 {
        return None;
    }
    table().get(&fd).map(|e| e.fd)
}

pub fn insert(fd: i32, emulated: Fd) {
    table().insert(fd, Arc::new(EmulatedFd { fd: emulated }));
}

/// `new` is a duplicate of `old`.
pub fn duplicate(old: i32, new: i32) {
    let mut t = table();
    if let Some(e) = t.get(&old).cloned() {
        t.insert(new, e);
    } else {
        // `new` may have stood for a device before (dup2 over it closes it).
        t.remove(&new);
    }
}

/// Forgets program descriptor `fd` (closing the emulated one if it was the last).
pub fn remove(fd: i32) {
    let removed = table().remove(&fd);
    drop(removed);
}

/// Forgets descriptors `first..=last`.
pub fn remove_range(first: u32, last: u32) {
    let removed: Vec<_> = {
        let mut t = table();
        let keys: Vec<i32> = t
            .range(first.min(i32::MAX as u32) as i32..=last.min(i32::MAX as u32) as i32)
            .map(|(k, _)| *k)
            .collect();
        keys.into_iter().filter_map(|k| t.remove(&k)).collect()
    };
    drop(removed);
}

/// Where the generated tree lives (`HCQ_EXEC_ROOT`), set once at load.
pub static ROOT: OnceLock<Vec<u8>> = OnceLock::new();

/// Path prefixes served from the generated tree instead of the host's (the tree's
/// `served-paths`, one per line, read once at load: the device nodes and the sysfs roots).
pub static SERVED: OnceLock<Vec<Vec<u8>>> = OnceLock::new();

/// Reads the prefixes the tree at `root` serves.
pub fn load_served(root: &[u8]) -> std::io::Result<()> {
    let mut path = root.to_vec();
    path.extend_from_slice(b"/served-paths");
    let text = std::fs::read(<std::ffi::OsStr as std::os::unix::ffi::OsStrExt>::from_bytes(&path))?;
    let prefixes = text
        .split(|&b| b == b'\n')
        .filter(|l| l.starts_with(b"/"))
        .map(|l| l.strip_suffix(b"/").unwrap_or(l).to_vec())
        .collect();
    let _ = SERVED.set(prefixes);
    Ok(())
}

/// Whether `path` (without its NUL) names an emulated device node the program opens.
pub fn device_node(path: &[u8]) -> bool {
    path == b"/dev/kfd"
        || path
            .strip_prefix(b"/dev/dri/renderD")
            .is_some_and(|m| !m.is_empty() && m.iter().all(u8::is_ascii_digit))
}

/// Writes the generated tree's name for `path` (absolute, without its NUL) into `out` with a
/// NUL, if the path is one the tree serves; returns whether it did.
pub fn redirect(path: &[u8], out: &mut [u8]) -> bool {
    let Some(root) = ROOT.get() else {
        return false;
    };
    let Some(prefixes) = SERVED.get() else {
        return false;
    };
    let served = prefixes.iter().any(|p| {
        path.strip_prefix(p.as_slice())
            .is_some_and(|rest| rest.is_empty() || rest[0] == b'/')
    });
    if !served || root.len() + path.len() + 1 > out.len() {
        return false;
    }
    out[..root.len()].copy_from_slice(root);
    out[root.len()..root.len() + path.len()].copy_from_slice(path);
    out[root.len() + path.len()] = 0;
    true
}
