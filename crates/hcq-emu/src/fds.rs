//! File descriptors of the emulated device nodes.

use std::collections::HashMap;
use std::sync::Mutex;

use hcq_amd_sys::seam::Fd;

use crate::util::lock;

/// First descriptor handed out: far above anything the process's real descriptors reach.
pub const FIRST_FD: Fd = 0x4000_0000;

/// What an emulated descriptor refers to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Node {
    Kfd,
    /// The render node of the GPU with this index.
    Render(usize),
}

#[derive(Debug)]
struct FdState {
    open: HashMap<Fd, Node>,
    next: Fd,
}

/// The open emulated descriptors.
#[derive(Debug)]
pub(crate) struct FdTable {
    state: Mutex<FdState>,
}

impl Default for FdTable {
    fn default() -> Self {
        FdTable {
            state: Mutex::new(FdState {
                open: HashMap::new(),
                next: FIRST_FD,
            }),
        }
    }
}

impl FdTable {
    /// A new descriptor for `node`; `None` when the range is exhausted.
    pub fn open(&self, node: Node) -> Option<Fd> {
        let mut st = lock(&self.state);
        let fd = st.next;
        st.next = fd.checked_add(1)?;
        st.open.insert(fd, node);
        Some(fd)
    }

    pub fn close(&self, fd: Fd) -> bool {
        lock(&self.state).open.remove(&fd).is_some()
    }

    /// Open descriptors, and how many of them are `/dev/kfd`.
    pub fn counts(&self) -> (usize, usize) {
        let st = lock(&self.state);
        let kfd = st.open.values().filter(|n| **n == Node::Kfd).count();
        (st.open.len(), kfd)
    }

    pub fn get(&self, fd: Fd) -> Option<Node> {
        lock(&self.state).open.get(&fd).copied()
    }

    /// Whether `fd` is in the emulated range (open or not).
    pub fn is_emulated(fd: Fd) -> bool {
        fd >= FIRST_FD
    }
}
