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

use hcq_amd_sys::seam::{Fd, Syscalls};

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
            crate::priority::give_way_to_the_gpu();
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

/// `path` with `.`, `..` and repeated slashes resolved lexically into `out`, as an absolute
/// path without a trailing slash; its length, or `None` if it is relative or does not fit.
/// (Lexical `..` is what the kernel does in these trees: sysfs and `/dev` directories on the
/// way are real directories, and links are resolved inside the generated tree afterwards.)
pub fn normalize(path: &[u8], out: &mut [u8]) -> Option<usize> {
    if path.first() != Some(&b'/') {
        return None;
    }
    let mut len = 0;
    for component in path.split(|&b| b == b'/') {
        match component {
            b"" | b"." => {}
            b".." => {
                // Back to the previous slash (the root stays the root).
                while len > 0 && out[len - 1] != b'/' {
                    len -= 1;
                }
                len = len.saturating_sub(1);
            }
            name => {
                if len + 1 + name.len() > out.len() {
                    return None;
                }
                out[len] = b'/';
                out[len + 1..len + 1 + name.len()].copy_from_slice(name);
                len += 1 + name.len();
            }
        }
    }
    if len == 0 {
        out[0] = b'/';
        len = 1;
    }
    Some(len)
}

/// Whether the normalized absolute `path` lies under one of `prefixes`.
fn served(path: &[u8], prefixes: &[Vec<u8>]) -> bool {
    prefixes.iter().any(|p| {
        path.strip_prefix(p.as_slice())
            .is_some_and(|rest| rest.is_empty() || rest[0] == b'/')
    })
}

/// Writes the generated tree's name for `path` (without its NUL) into `out` with a NUL, if the
/// path, resolved lexically, is one the tree serves; returns whether it did. A relative path is
/// left to the kernel, which resolves it against the working directory (inside the tree after
/// a `chdir` there, which is redirected).
pub fn redirect(path: &[u8], out: &mut [u8]) -> bool {
    let (Some(root), Some(prefixes)) = (ROOT.get(), SERVED.get()) else {
        return false;
    };
    let mut normal = [0u8; 4096];
    let Some(len) = normalize(path, &mut normal) else {
        return false;
    };
    let normal = &normal[..len];
    if !served(normal, prefixes) || root.len() + normal.len() + 1 > out.len() {
        return false;
    }
    out[..root.len()].copy_from_slice(root);
    out[root.len()..root.len() + normal.len()].copy_from_slice(normal);
    out[root.len() + normal.len()] = 0;
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    fn norm(path: &str) -> Option<String> {
        let mut out = [0u8; 64];
        normalize(path.as_bytes(), &mut out).map(|n| String::from_utf8_lossy(&out[..n]).into())
    }

    #[test]
    fn paths_are_resolved_lexically() {
        assert_eq!(
            norm("/sys//class/./drm/").as_deref(),
            Some("/sys/class/drm")
        );
        assert_eq!(
            norm("/sys/class/kfd/../drm").as_deref(),
            Some("/sys/class/drm")
        );
        assert_eq!(
            norm("/sys/class/kfd/../../../../etc").as_deref(),
            Some("/etc")
        );
        assert_eq!(norm("/..").as_deref(), Some("/"));
        assert_eq!(norm("/").as_deref(), Some("/"));
        assert_eq!(norm("sys/class"), None);
        assert_eq!(norm(""), None);
        assert_eq!(norm(&format!("/{}", "x".repeat(70))), None);
    }

    #[test]
    fn only_whole_components_under_a_served_root_are_served() {
        let prefixes = vec![b"/dev/kfd".to_vec(), b"/sys/class/drm".to_vec()];
        let check = |path: &str| {
            let mut out = [0u8; 64];
            let n = normalize(path.as_bytes(), &mut out).unwrap();
            served(&out[..n], &prefixes)
        };
        assert!(check("/dev/kfd"));
        assert!(check("/sys/class/drm/renderD128/device"));
        assert!(check("/sys/class/kfd/../drm/renderD128"));
        assert!(!check("/dev/kfd2"));
        assert!(!check("/sys/class/drmx"));
        assert!(!check("/sys/class/drm/../../../etc/passwd"));
        assert!(!check("/dev"));
    }

    #[test]
    fn device_nodes_are_kfd_and_numbered_render_nodes() {
        assert!(device_node(b"/dev/kfd"));
        assert!(device_node(b"/dev/dri/renderD128"));
        assert!(!device_node(b"/dev/dri/renderD"));
        assert!(!device_node(b"/dev/dri/renderD12a"));
        assert!(!device_node(b"/dev/dri/card0"));
        assert!(!device_node(b"/dev/kfd/"));
    }
}
