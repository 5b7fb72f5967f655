//! Small helpers shared by the modules.

use std::io;
use std::sync::{Condvar, Mutex, MutexGuard};
use std::time::Duration;

/// Locks `m`, taking the data even if another thread panicked while holding it: the emulator
/// must not turn one failure into a cascade of panics.
pub(crate) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// `Condvar::wait_timeout` with the same poisoning policy as [`lock`].
pub(crate) fn wait_timeout<'a, T>(
    cv: &Condvar,
    g: MutexGuard<'a, T>,
    d: Duration,
) -> MutexGuard<'a, T> {
    match cv.wait_timeout(g, d) {
        Ok((g, _)) => g,
        Err(e) => e.into_inner().0,
    }
}

/// `Condvar::wait` with the same poisoning policy as [`lock`].
pub(crate) fn wait<'a, T>(cv: &Condvar, g: MutexGuard<'a, T>) -> MutexGuard<'a, T> {
    cv.wait(g).unwrap_or_else(|e| e.into_inner())
}

/// An `io::Error` carrying `code`.
pub(crate) fn errno(code: i32) -> io::Error {
    io::Error::from_raw_os_error(code)
}

/// Wakes command processors waiting on memory (`WAIT_REG_MEM`) when another engine writes
/// memory, so queue-to-queue waits do not depend on the polling interval. Waits are bounded
/// by a timeout: host writes are only seen by polling.
#[derive(Debug, Default)]
pub(crate) struct MemWatch {
    seq: Mutex<u64>,
    cv: Condvar,
}

impl MemWatch {
    /// The current write sequence number.
    pub fn seq(&self) -> u64 {
        *lock(&self.seq)
    }

    /// Announces a write (or a request to stop waiting).
    pub fn notify(&self) {
        *lock(&self.seq) += 1;
        self.cv.notify_all();
    }

    /// Waits until a write after `seen` is announced, or `d` passes.
    pub fn wait(&self, seen: u64, d: Duration) {
        let g = lock(&self.seq);
        if *g == seen {
            drop(wait_timeout(&self.cv, g, d));
        }
    }
}
