//! Chrome-trace (Perfetto) output: every kernel and copy with its GPU start and end, one track
//! per queue per device, and host-side submit markers.
//!
//! Enabled by `HCQ_TRACE=FILE` or [`start`]. GPU times come from timestamps the engines write
//! around each command (`RELEASE_MEM` with the GPU clock, SDMA `TIMESTAMP`), converted to host
//! time with the clock pair KFD reports when the device opens. The file is rewritten whole at
//! every synchronisation, so it is always a complete JSON document.

use std::io::Write;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, OnceLock};

/// A finished trace event.
#[derive(Debug, Clone)]
enum Event {
    /// A command on an engine: `ph: X`.
    Span {
        device: String,
        queue: &'static str,
        name: String,
        start_us: f64,
        end_us: f64,
    },
    /// A host-side submission: `ph: i`.
    Submit {
        device: String,
        name: String,
        at_us: f64,
    },
}

struct Trace {
    path: PathBuf,
    events: Vec<Event>,
}

/// Whether a trace is recording, readable without the lock: every launch asks.
static ENABLED: AtomicBool = AtomicBool::new(false);

fn global() -> &'static Mutex<Option<Trace>> {
    static TRACE: OnceLock<Mutex<Option<Trace>>> = OnceLock::new();
    TRACE.get_or_init(|| {
        let from_env = std::env::var_os("HCQ_TRACE").filter(|p| !p.is_empty());
        ENABLED.store(from_env.is_some(), Ordering::Release);
        Mutex::new(from_env.map(|p| Trace {
            path: PathBuf::from(p),
            events: Vec::new(),
        }))
    })
}

fn lock() -> std::sync::MutexGuard<'static, Option<Trace>> {
    global().lock().unwrap_or_else(|e| e.into_inner())
}

/// Starts tracing into `path` (replacing any trace in progress).
pub fn start(path: impl Into<PathBuf>) {
    *lock() = Some(Trace {
        path: path.into(),
        events: Vec::new(),
    });
    ENABLED.store(true, Ordering::Release);
}

/// Whether a trace is being recorded.
pub fn enabled() -> bool {
    // The first call reads HCQ_TRACE; after that this is one atomic load.
    global();
    ENABLED.load(Ordering::Acquire)
}

/// Host time in microseconds on the clock KFD pairs with the GPU clock (`CLOCK_MONOTONIC_RAW`).
pub fn host_now_us() -> f64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid, writable timespec.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC_RAW, &mut ts) };
    ts.tv_sec as f64 * 1e6 + ts.tv_nsec as f64 / 1e3
}

pub(crate) fn submit(device: &str, name: &str) {
    if let Some(t) = lock().as_mut() {
        t.events.push(Event::Submit {
            device: device.to_string(),
            name: name.to_string(),
            at_us: host_now_us(),
        });
    }
}

pub(crate) fn span(device: &str, queue: &'static str, name: &str, start_us: f64, end_us: f64) {
    if let Some(t) = lock().as_mut() {
        t.events.push(Event::Span {
            device: device.to_string(),
            queue,
            name: name.to_string(),
            start_us,
            end_us,
        });
    }
}

fn escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            c if (c as u32) < 0x20 => out.push_str(&format!("\\u{:04x}", c as u32)),
            c => out.push(c),
        }
    }
    out
}

/// Writes the trace so far. Errors writing the file are returned to the caller that asked.
pub fn flush() -> std::io::Result<()> {
    let guard = lock();
    let Some(t) = guard.as_ref() else {
        return Ok(());
    };
    // Stable small ids: one process per device, one thread per queue.
    let mut devices: Vec<String> = Vec::new();
    let pid = |d: &str, devices: &mut Vec<String>| -> usize {
        devices.iter().position(|x| x == d).unwrap_or_else(|| {
            devices.push(d.to_string());
            devices.len() - 1
        }) + 1
    };
    let tid = |q: &str| match q {
        "compute" => 1,
        "copy" => 2,
        _ => 3,
    };
    let mut out = String::from("{\"displayTimeUnit\":\"ns\",\"traceEvents\":[\n");
    let mut first = true;
    let mut push = |line: String, out: &mut String| {
        if !first {
            out.push_str(",\n");
        }
        first = false;
        out.push_str(&line);
    };
    let mut named: Vec<(usize, usize)> = Vec::new();
    for e in &t.events {
        let (d, q) = match e {
            Event::Span { device, queue, .. } => (device.as_str(), *queue),
            Event::Submit { device, .. } => (device.as_str(), "host"),
        };
        let (p, th) = (pid(d, &mut devices), tid(q));
        if !named.contains(&(p, 0)) {
            named.push((p, 0));
            push(format!("{{\"ph\":\"M\",\"name\":\"process_name\",\"pid\":{p},\"tid\":0,\"args\":{{\"name\":\"{}\"}}}}", escape(d)), &mut out);
        }
        if !named.contains(&(p, th)) {
            named.push((p, th));
            push(format!("{{\"ph\":\"M\",\"name\":\"thread_name\",\"pid\":{p},\"tid\":{th},\"args\":{{\"name\":\"{q}\"}}}}"), &mut out);
        }
        let line = match e {
            Event::Span { name, start_us, end_us, .. } => format!(
                "{{\"ph\":\"X\",\"cat\":\"{q}\",\"name\":\"{}\",\"pid\":{p},\"tid\":{th},\"ts\":{start_us:.3},\"dur\":{:.3}}}",
                escape(name),
                (end_us - start_us).max(0.0)
            ),
            Event::Submit { name, at_us, .. } => format!(
                "{{\"ph\":\"i\",\"s\":\"t\",\"cat\":\"submit\",\"name\":\"{}\",\"pid\":{p},\"tid\":{th},\"ts\":{at_us:.3}}}",
                escape(name)
            ),
        };
        push(line, &mut out);
    }
    out.push_str("\n]}\n");
    let tmp = t.path.with_extension("tmp");
    std::fs::File::create(&tmp)?.write_all(out.as_bytes())?;
    std::fs::rename(&tmp, &t.path)
}
