//! The emulated sysfs: one immutable tree of directories, text files and symbolic links,
//! built when the kernel starts. [`EmuKernel::sysfs_entries`](crate::EmuKernel::sysfs_entries)
//! lists it and `read_dir`/`read_to_string` answer from it, so the listing and the lookups
//! cannot disagree.

use std::collections::{BTreeMap, BTreeSet};
use std::io;

use crate::util::errno;

/// What a path of the emulated sysfs is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SysfsKind {
    /// A directory; its entries are the paths one component below it.
    Dir,
    /// A file and its whole text.
    File(String),
    /// A symbolic link and its target, relative to the link's directory as sysfs writes them
    /// (`../../devices/...`). A target may lead outside the emulated tree (sysfs links to
    /// drivers and subsystems that are not emulated); following such a link finds nothing.
    Symlink(String),
}

/// One path of the emulated sysfs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SysfsEntry {
    /// Absolute, without a trailing `/`.
    pub path: String,
    /// Whether the path is a directory, a file (with its text) or a symbolic link (with its
    /// target).
    pub kind: SysfsKind,
}

/// Most symbolic links followed while resolving one path, as Linux's `MAXSYMLINKS`.
const MAX_LINKS: usize = 40;

/// Collects the tree; [`SysfsBuilder::build`] freezes it.
#[derive(Debug, Default)]
pub(crate) struct SysfsBuilder {
    roots: BTreeSet<String>,
    nodes: BTreeMap<String, SysfsKind>,
}

impl SysfsBuilder {
    /// Declares `path` a root: a directory whose whole subtree is emulated. Everything added
    /// must lie under a root.
    pub fn root(&mut self, path: &str) {
        self.roots.insert(path.to_string());
        self.nodes.insert(path.to_string(), SysfsKind::Dir);
    }

    /// A directory, and any missing directory between it and its root.
    pub fn dir(&mut self, path: &str) {
        self.add(path, SysfsKind::Dir);
    }

    pub fn file(&mut self, path: &str, text: impl Into<String>) {
        self.add(path, SysfsKind::File(text.into()));
    }

    pub fn symlink(&mut self, path: &str, target: &str) {
        self.add(path, SysfsKind::Symlink(target.to_string()));
    }

    fn add(&mut self, path: &str, kind: SysfsKind) {
        let root = self
            .roots
            .iter()
            .find(|r| {
                path.strip_prefix(r.as_str())
                    .is_some_and(|t| t.is_empty() || t.starts_with('/'))
            })
            .unwrap_or_else(|| panic!("sysfs path {path} lies under no root"))
            .clone();
        let mut at = root.len();
        while let Some(slash) = path[at + 1..].find('/') {
            at += 1 + slash;
            let parent = &path[..at];
            let previous = self
                .nodes
                .entry(parent.to_string())
                .or_insert(SysfsKind::Dir);
            assert_eq!(
                *previous,
                SysfsKind::Dir,
                "sysfs path {parent} is not a directory"
            );
        }
        let previous = self.nodes.insert(path.to_string(), kind);
        assert!(
            previous.is_none()
                || previous == Some(SysfsKind::Dir) && self.nodes[path] == SysfsKind::Dir,
            "sysfs path {path} added twice"
        );
    }

    pub fn build(self) -> Sysfs {
        let mut children: BTreeMap<String, Vec<String>> = BTreeMap::new();
        for path in self.nodes.keys() {
            if self.roots.contains(path) {
                continue;
            }
            if let Some((parent, name)) = path.rsplit_once('/') {
                children
                    .entry(parent.to_string())
                    .or_default()
                    .push(name.to_string());
            }
        }
        let mut entries: Vec<SysfsEntry> = self
            .nodes
            .into_iter()
            .map(|(path, kind)| SysfsEntry { path, kind })
            .collect();
        // Component by component, so that a directory comes right before its contents.
        entries.sort_by(|a, b| a.path.split('/').cmp(b.path.split('/')));
        let index = entries
            .iter()
            .enumerate()
            .map(|(i, e)| (e.path.clone(), i))
            .collect();
        Sysfs {
            roots: self.roots.into_iter().collect(),
            entries,
            index,
            children,
        }
    }
}

/// The frozen tree.
#[derive(Debug)]
pub(crate) struct Sysfs {
    roots: Vec<String>,
    entries: Vec<SysfsEntry>,
    index: BTreeMap<String, usize>,
    children: BTreeMap<String, Vec<String>>,
}

impl Sysfs {
    pub fn roots(&self) -> &[String] {
        &self.roots
    }

    pub fn entries(&self) -> &[SysfsEntry] {
        &self.entries
    }

    pub fn read_to_string(&self, path: &str) -> io::Result<String> {
        match &self.entries[self.resolve(path)?].kind {
            SysfsKind::File(text) => Ok(text.clone()),
            SysfsKind::Dir => Err(errno(libc::EISDIR)),
            SysfsKind::Symlink(_) => Err(errno(libc::ENOENT)),
        }
    }

    pub fn read_dir(&self, path: &str) -> io::Result<Vec<String>> {
        let i = self.resolve(path)?;
        match self.entries[i].kind {
            SysfsKind::Dir => Ok(self
                .children
                .get(&self.entries[i].path)
                .cloned()
                .unwrap_or_default()),
            _ => Err(errno(libc::ENOTDIR)),
        }
    }

    /// The entry `path` names once every symbolic link on the way, the last component's
    /// included, is followed (as `open` and `opendir` do). `ENOENT` for paths outside the
    /// tree, `ENOTDIR` when a file is used as a directory, `ELOOP` for too many links.
    fn resolve(&self, path: &str) -> io::Result<usize> {
        if !path.starts_with('/') {
            return Err(errno(libc::ENOENT));
        }
        let mut pending: Vec<String> = path
            .split('/')
            .filter(|c| !c.is_empty())
            .rev()
            .map(str::to_string)
            .collect();
        let mut at: Vec<String> = Vec::new();
        let mut links = 0;
        while let Some(component) = pending.pop() {
            match component.as_str() {
                "." => continue,
                ".." => {
                    at.pop();
                    continue;
                }
                _ => at.push(component),
            }
            let here = format!("/{}", at.join("/"));
            let Some(&i) = self.index.get(&here) else {
                // Directories above the roots are the host's; only passing through is allowed.
                if self
                    .roots
                    .iter()
                    .any(|r| r.starts_with(&format!("{here}/")))
                {
                    continue;
                }
                return Err(errno(libc::ENOENT));
            };
            match &self.entries[i].kind {
                SysfsKind::Dir => {}
                SysfsKind::File(_) if pending.is_empty() => {}
                SysfsKind::File(_) => return Err(errno(libc::ENOTDIR)),
                SysfsKind::Symlink(target) => {
                    links += 1;
                    if links > MAX_LINKS {
                        return Err(errno(libc::ELOOP));
                    }
                    at.pop();
                    if target.starts_with('/') {
                        at.clear();
                    }
                    pending.extend(
                        target
                            .split('/')
                            .filter(|c| !c.is_empty())
                            .rev()
                            .map(str::to_string),
                    );
                }
            }
        }
        let here = format!("/{}", at.join("/"));
        self.index
            .get(&here)
            .copied()
            .ok_or_else(|| errno(libc::ENOENT))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tree() -> Sysfs {
        let mut t = SysfsBuilder::default();
        t.root("/sys/a");
        t.file("/sys/a/d/f", "text\n");
        t.symlink("/sys/a/loop1", "loop2");
        t.symlink("/sys/a/loop2", "loop1");
        t.symlink("/sys/a/up", "../a/d");
        t.symlink("/sys/a/abs", "/sys/a/d/f");
        t.symlink("/sys/a/out", "../../etc");
        t.build()
    }

    #[test]
    fn links_are_followed_and_cycles_end_in_eloop() {
        let t = tree();
        assert_eq!(t.read_to_string("/sys/a/up/f").unwrap(), "text\n");
        assert_eq!(t.read_to_string("/sys/a/abs").unwrap(), "text\n");
        assert_eq!(t.read_dir("/sys/a/up").unwrap(), ["f"]);
        let err = |r: io::Result<String>| r.unwrap_err().raw_os_error();
        assert_eq!(err(t.read_to_string("/sys/a/loop1")), Some(libc::ELOOP));
        // A link leading out of the emulated tree finds nothing.
        assert_eq!(
            err(t.read_to_string("/sys/a/out/passwd")),
            Some(libc::ENOENT)
        );
        // Directories above a root can be passed through, not read.
        assert_eq!(err(t.read_to_string("/sys")), Some(libc::ENOENT));
        assert_eq!(t.read_to_string("/sys/../sys/a/d/f").unwrap(), "text\n");
    }

    #[test]
    #[should_panic(expected = "under no root")]
    fn a_path_outside_every_root_is_a_builder_bug() {
        let mut t = SysfsBuilder::default();
        t.root("/sys/a");
        t.file("/sys/b/f", "");
    }
}
