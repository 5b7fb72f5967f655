//! Persistent host threads that help run dispatches.
//!
//! Spawning threads per dispatch costs tens of microseconds each time, and every new thread
//! can leave the allocator a new arena and the C library a cached stack: over a long run the
//! process's mappings keep growing. The pool's threads are created once, on first use, and
//! live as long as the process.
//!
//! A dispatch runs its job on the calling thread and offers it to the pool as `helpers`
//! tickets. An idle pool thread takes a ticket and runs the job too; the job itself hands out
//! the work (workgroups from a shared counter), so it does not matter how many tickets are
//! taken. When the caller's own run returns, the tickets nobody took are withdrawn and the
//! caller waits only for the ones being run. A dispatch therefore never waits for another
//! dispatch's work: a pool thread busy with an endless kernel on one queue delays nobody but
//! that kernel.

use std::any::Any;
use std::collections::VecDeque;
use std::sync::{Condvar, Mutex, MutexGuard, OnceLock};

/// Tickets waiting for a thread, and the threads that take them (created as `run` needs
/// them, up to its `max_threads`; never ended).
struct Pool {
    queue: Mutex<Queue>,
    wake: Condvar,
}

#[derive(Default)]
struct Queue {
    tickets: VecDeque<Ticket>,
    /// Pool threads created so far.
    threads: usize,
    /// Pool threads waiting for a ticket.
    idle: usize,
}

/// One offer of a job to a pool thread.
struct Ticket {
    /// The job, its lifetime erased: valid until `latch` counts no ticket queued or running,
    /// which `run` waits for before it returns (or unwinds).
    job: *const (dyn Fn() + Sync),
    latch: std::sync::Arc<Latch>,
}

// SAFETY: the job is `Sync` (so callable from any thread through a shared pointer) and
// outlives the ticket (see `Ticket::job`).
unsafe impl Send for Ticket {}

#[derive(Default)]
struct Latch {
    state: Mutex<LatchState>,
    finished: Condvar,
}

#[derive(Default)]
struct LatchState {
    /// Tickets taken by pool threads and not finished.
    running: usize,
    /// The first panic of a pool thread running the job, re-raised in the caller.
    panic: Option<Box<dyn Any + Send>>,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // The pool's own code does not panic while holding these locks; jobs run outside them.
    m.lock().unwrap_or_else(|e| e.into_inner())
}

fn pool() -> &'static Pool {
    static POOL: OnceLock<Pool> = OnceLock::new();
    POOL.get_or_init(|| Pool {
        queue: Mutex::new(Queue::default()),
        wake: Condvar::new(),
    })
}

/// Runs `job` on this thread and on up to `helpers` pool threads at once, returning when every
/// run of it has returned. `max_threads` bounds the pool threads ever created (the host's
/// cores less the caller's, say). A panic of any run is re-raised here.
pub(crate) fn run(job: &(dyn Fn() + Sync), helpers: usize, max_threads: usize) {
    let helpers = helpers.min(max_threads);
    if helpers == 0 {
        job();
        return;
    }
    let latch = std::sync::Arc::new(Latch::default());
    let pool = pool();
    {
        let mut q = lock(&pool.queue);
        // Lifetime erased here; `Withdraw` below restores the bound before `run` ends.
        // SAFETY: a fat pointer's layout does not depend on the lifetime it carries.
        let erased: *const (dyn Fn() + Sync) = unsafe {
            std::mem::transmute::<*const (dyn Fn() + Sync + '_), *const (dyn Fn() + Sync)>(job)
        };
        for _ in 0..helpers {
            q.tickets.push_back(Ticket {
                job: erased,
                latch: latch.clone(),
            });
        }
        let missing = helpers.saturating_sub(q.idle);
        let spawn = missing.min(max_threads.saturating_sub(q.threads));
        for _ in 0..spawn {
            let spawned = std::thread::Builder::new()
                .name("rdna3-wave".into())
                .spawn(move || serve(pool));
            if spawned.is_ok() {
                q.threads += 1;
            }
        }
        pool.wake.notify_all();
    }
    // Withdrawn and waited for on every path out of here, unwinding included.
    let withdraw = Withdraw {
        pool,
        latch: &latch,
    };
    job();
    drop(withdraw);
    let panic = lock(&latch.state).panic.take();
    if let Some(panic) = panic {
        std::panic::resume_unwind(panic);
    }
}

/// Takes back a `run`'s tickets no pool thread has taken and waits for the ones taken.
struct Withdraw<'a> {
    pool: &'static Pool,
    latch: &'a std::sync::Arc<Latch>,
}

impl Drop for Withdraw<'_> {
    fn drop(&mut self) {
        lock(&self.pool.queue)
            .tickets
            .retain(|t| !std::sync::Arc::ptr_eq(&t.latch, self.latch));
        // A pool thread marks a ticket running while holding the queue lock, so every ticket
        // not withdrawn above is counted in `running` by now.
        let mut state = lock(&self.latch.state);
        while state.running > 0 {
            state = self
                .latch
                .finished
                .wait(state)
                .unwrap_or_else(|e| e.into_inner());
        }
    }
}

/// A pool thread: takes tickets and runs their jobs, forever.
fn serve(pool: &'static Pool) {
    loop {
        let ticket = {
            let mut q = lock(&pool.queue);
            q.idle += 1;
            let ticket = loop {
                if let Some(t) = q.tickets.pop_front() {
                    break t;
                }
                q = pool.wake.wait(q).unwrap_or_else(|e| e.into_inner());
            };
            q.idle -= 1;
            // Counted while the queue is still locked: see `Withdraw::drop`.
            lock(&ticket.latch.state).running += 1;
            ticket
        };
        // SAFETY: the job stays valid while this ticket is counted running (`Ticket::job`).
        let job = unsafe { &*ticket.job };
        let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(job));
        let mut state = lock(&ticket.latch.state);
        if let Err(panic) = outcome {
            state.panic.get_or_insert(panic);
        }
        state.running -= 1;
        ticket.latch.finished.notify_all();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
    use std::time::{Duration, Instant};

    #[test]
    fn every_item_is_done_once_and_helpers_share_the_work() {
        for _ in 0..200 {
            let next = AtomicU64::new(0);
            let sum = AtomicU64::new(0);
            let runs = AtomicUsize::new(0);
            run(
                &|| {
                    runs.fetch_add(1, Ordering::Relaxed);
                    loop {
                        let i = next.fetch_add(1, Ordering::Relaxed);
                        if i >= 1000 {
                            break;
                        }
                        sum.fetch_add(i, Ordering::Relaxed);
                    }
                },
                3,
                3,
            );
            assert_eq!(sum.load(Ordering::Relaxed), 999 * 1000 / 2);
            assert!((1..=4).contains(&runs.load(Ordering::Relaxed)));
        }
    }

    #[test]
    fn a_run_does_not_wait_for_another_runs_endless_job() {
        let release = AtomicBool::new(false);
        std::thread::scope(|s| {
            let endless = s.spawn(|| {
                run(
                    &|| {
                        while !release.load(Ordering::Relaxed) {
                            std::thread::sleep(Duration::from_millis(1));
                        }
                    },
                    1,
                    1,
                )
            });
            // Whether or not the pool thread took the endless job, this run finishes.
            std::thread::sleep(Duration::from_millis(20));
            let start = Instant::now();
            let done = AtomicUsize::new(0);
            run(
                &|| {
                    done.fetch_add(1, Ordering::Relaxed);
                },
                1,
                1,
            );
            assert!(done.load(Ordering::Relaxed) >= 1);
            assert!(start.elapsed() < Duration::from_secs(5));
            release.store(true, Ordering::Relaxed);
            endless.join().unwrap();
        });
    }

    #[test]
    fn a_panic_in_a_helper_reaches_the_caller() {
        let caller = std::thread::current().id();
        let r = std::panic::catch_unwind(|| {
            run(
                &|| {
                    if std::thread::current().id() != caller {
                        panic!("helper failed");
                    }
                    // Give a helper time to take its ticket.
                    std::thread::sleep(Duration::from_millis(50));
                },
                1,
                1,
            )
        });
        // A helper may not get to the job before the caller withdraws it; when it does, its
        // panic is the caller's.
        if let Err(p) = r {
            assert_eq!(p.downcast_ref::<&str>(), Some(&"helper failed"));
        }
    }
}
