//! The program's threads give way to the emulated GPU's.
//!
//! A program waiting for its GPU usually spins on a signal in memory. On a real machine the
//! spinning thread takes a CPU core and the GPU runs beside it; here the GPU's work runs on
//! the host's cores too, and a spinning thread takes its share of them. So once a process
//! opens an emulated device, its threads give way as `HCQ_EXEC_NICE` says, and the emulator's
//! threads stay as the program started: where the GPU has work, it gets the cores first; where
//! it has none, nothing changes. By default (`idle`) the program's threads take Linux's
//! `SCHED_IDLE` policy: the scheduler runs them where no other thread wants the core, and a
//! waking emulator thread takes the core back at once. A number lowers them that many nice
//! levels instead, which leaves them a larger share: on a 2-core host, beside a thread
//! spinning at nice 10 a matmul dispatch took 1.5x as long (its two threads busy 1.2 of the
//! 2 cores), beside one under `SCHED_IDLE` 1.0-1.1x (tinygrad's MLP step under `hcq exec`:
//! 6.5-7.7 ms at nice 10, 5.8 ms idle).
//!
//! Linux lets an unprivileged thread only raise its nice value or take `SCHED_IDLE`, and a new
//! thread starts with its creator's. The emulator's engine threads (which start the threads
//! that run waves) are created when the program creates a queue, on one of its threads: here
//! they are started by a thread this library starts when the device is first opened, just
//! before the program's threads give way ([`hcq_emu::set_thread_starter`]). Threads the program
//! creates later take its policy and priority from their creator, and so do its child
//! processes. A process that never opens an emulated device (a shell, `env`) is left as it is.

use std::io;
use std::sync::atomic::{AtomicI32, Ordering};
use std::sync::mpsc::{channel, Sender};
use std::sync::{Mutex, OnceLock};
use std::thread::JoinHandle;

use crate::sys::raw;

/// The largest nice value Linux has.
const NICEST: i32 = 19;

type Body = Box<dyn FnOnce() + Send>;
type Request = (String, usize, Body, Sender<io::Result<JoinHandle<()>>>);

/// The starter thread: its requests and its thread id (it is not reniced).
struct Starter {
    requests: Mutex<Sender<Request>>,
    tid: i32,
}

static STARTER: OnceLock<Starter> = OnceLock::new();

/// What `HCQ_EXEC_NICE` asked for, read at load: [`IDLE`], or nice levels (0: nothing).
static NICE: AtomicI32 = AtomicI32::new(0);

/// `HCQ_EXEC_NICE=idle` (the default): the program's threads take `SCHED_IDLE`.
const IDLE: i32 = -1;

/// At load: reads `HCQ_EXEC_NICE`: `idle` (the default), or a whole number of nice levels
/// from 0 (the program keeps its priority) to 19; a malformed value is an error naming it.
pub fn setup() -> Result<(), String> {
    let nice = match std::env::var("HCQ_EXEC_NICE") {
        Err(std::env::VarError::NotPresent) => IDLE,
        Ok(v) if v.trim().is_empty() || v.trim() == "idle" => IDLE,
        Ok(v) => v
            .trim()
            .parse::<i32>()
            .ok()
            .filter(|n| (0..=NICEST).contains(n))
            .ok_or_else(|| {
                format!("HCQ_EXEC_NICE={v} is not valid: expected idle or 0 to {NICEST}")
            })?,
        Err(e) => return Err(format!("HCQ_EXEC_NICE: {e}")),
    };
    NICE.store(nice, Ordering::Relaxed);
    Ok(())
}

/// When the process first opens an emulated device (on the opening thread, before the
/// emulator has threads): starts the starter thread, hands it the emulator's engine threads,
/// and has every other thread of the process give way. Nothing with `HCQ_EXEC_NICE=0`.
pub fn give_way_to_the_gpu() {
    let nice = NICE.load(Ordering::Relaxed);
    if nice == 0 || STARTER.get().is_some() {
        return;
    }
    let starter = match start_starter() {
        Ok(starter) => starter,
        Err(e) => {
            crate::report(&format!(
                "hcq exec: the program keeps its priority (no thread to start the emulator's \
                 from: {e})"
            ));
            return;
        }
    };
    let tid = starter.tid;
    if STARTER.set(starter).is_err() || !hcq_emu::set_thread_starter(start_by_starter) {
        return;
    }
    let Ok(tasks) = std::fs::read_dir("/proc/self/task") else {
        return;
    };
    for task in tasks.flatten() {
        let Some(other) = task
            .file_name()
            .to_str()
            .and_then(|t| t.parse::<i32>().ok())
        else {
            continue;
        };
        if other == tid {
            continue;
        }
        if nice == IDLE {
            idle(other);
        } else {
            lower(other, nice);
        }
    }
}

fn start_starter() -> io::Result<Starter> {
    let (requests, incoming) = channel::<Request>();
    let (tid_sender, tid) = channel();
    std::thread::Builder::new()
        .name("hcq-exec-start".into())
        .spawn(move || {
            let _ = tid_sender.send(this_thread());
            for (name, stack, body, reply) in incoming {
                let started = std::thread::Builder::new()
                    .name(name)
                    .stack_size(stack)
                    .spawn(body);
                let _ = reply.send(started);
            }
        })?;
    let tid = tid
        .recv()
        .map_err(|_| io::Error::other("the starter thread ended"))?;
    Ok(Starter {
        requests: Mutex::new(requests),
        tid,
    })
}

fn start_by_starter(name: String, stack: usize, body: Body) -> io::Result<JoinHandle<()>> {
    let gone = || io::Error::other("hcq exec's thread starter is gone");
    let starter = STARTER.get().ok_or_else(gone)?;
    let (reply, started) = channel();
    starter
        .requests
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .send((name, stack, body, reply))
        .map_err(|_| gone())?;
    started.recv().map_err(|_| gone())?
}

/// Puts thread `tid` under `SCHED_IDLE` (its nice value stays). A thread that ended meanwhile
/// is no matter.
fn idle(tid: i32) {
    let param = libc::sched_param { sched_priority: 0 };
    // SAFETY: sched_setscheduler reads `param`, which lives across the call, and writes no
    // memory.
    unsafe {
        raw(
            libc::SYS_sched_setscheduler,
            [
                tid as usize,
                libc::SCHED_IDLE as usize,
                &param as *const libc::sched_param as usize,
                0,
                0,
                0,
            ],
        );
    }
}

/// Raises thread `tid`'s nice value by `by` (to at most 19). A thread that ended meanwhile is
/// no matter.
fn lower(tid: i32, by: i32) {
    // SAFETY: getpriority and setpriority read and write no memory of ours.
    unsafe {
        // The raw call answers 20 - nice (1 to 40), never an error value for a live thread.
        let got = raw(
            libc::SYS_getpriority,
            [libc::PRIO_PROCESS as usize, tid as usize, 0, 0, 0, 0],
        );
        if got < 0 {
            return;
        }
        let nice = (20 - got as i32 + by).min(NICEST);
        raw(
            libc::SYS_setpriority,
            [
                libc::PRIO_PROCESS as usize,
                tid as usize,
                nice as isize as usize,
                0,
                0,
                0,
            ],
        );
    }
}

fn this_thread() -> i32 {
    // SAFETY: gettid has no preconditions.
    unsafe { raw(libc::SYS_gettid, [0; 6]) as i32 }
}
