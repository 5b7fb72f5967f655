//! Chrome-trace (Perfetto) output: every kernel and copy with its GPU start and end, one track
//! per queue per device, and host-side submit markers.
//!
//! Enabled by `HCQ_TRACE=FILE` (read when the first device opens) or [`start`]; [`finish`]
//! ends it. GPU times come from timestamps the engines write around each command
//! (`RELEASE_MEM` with the GPU clock, SDMA `TIMESTAMP`), converted to host time with the clock
//! pair KFD reports when the device opens.
//!
//! Each span carries what the command did in its `args` (a kernel's grid, block, LDS and code
//! object; a copy's bytes and direction), and a flow arrow leads from the host's submission
//! (an instant on the device's `host` track) to the GPU work it started.
//!
//! The trace file is the only file this touches: it is opened (created or truncated) when the
//! trace starts, so a path that cannot be written is an error then, and written in place, with
//! no temporary file. Events are appended at each flush (a wait, a failed wait, the device
//! going away, [`finish`]); in a regular file the closing `]}` follows them and the next
//! flush writes over it, so between flushes the file is always a complete JSON document. A
//! pipe or device gets the closing `]}` once, from [`finish`]. The first write error stops
//! the trace and is returned by every later [`flush`] and by [`finish`].

use hcq_core::{Error, Result};
use std::fs::File;
use std::io::{Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, MutexGuard};

/// A finished trace event.
#[derive(Debug, Clone)]
enum Event {
    /// A command on an engine: `ph: X`. `finished` is false for a command still running when
    /// the trace was settled (a hung kernel): it ends at that moment.
    Span {
        device: String,
        queue: &'static str,
        name: String,
        start_us: f64,
        end_us: f64,
        finished: bool,
        /// The flow from the submission that started it (0: none).
        flow: u64,
        args: Vec<(&'static str, String)>,
    },
    /// A host-side submission: `ph: i`, and the start of a flow (`ph: s`) when `flow` is not 0.
    Submit {
        device: String,
        name: String,
        at_us: f64,
        flow: u64,
    },
}

/// Numbers the flows from submissions to their spans.
static NEXT_FLOW: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);

/// The category of every event. One for all: a trace viewer binds a flow's start and end to
/// the events of the same timestamp, thread and category (Chrome DevTools matches all four),
/// so the submission, its arrow and the GPU span share it; the thread says which queue.
const CATEGORY: &str = "hcq";

const HEADER: &str = "{\"displayTimeUnit\":\"ns\",\"traceEvents\":[\n";
const FOOTER: &str = "\n]}\n";

/// The open trace file and what has been written to it.
struct Trace {
    path: PathBuf,
    file: File,
    /// A regular file can be rewound over its closing `]}`; a pipe or device cannot.
    rewindable: bool,
    /// Bytes of the header and events written so far (where the closing `]}` starts).
    written: u64,
    /// Whether an event has been written (the next one needs a separator).
    any_event: bool,
    /// Events not yet written.
    events: Vec<Event>,
    /// Devices in order of appearance: one trace process each.
    devices: Vec<String>,
    /// `(process, thread)` pairs whose name has been written.
    named: Vec<(usize, usize)>,
    /// The first write error; once set, nothing more is written.
    failed: Option<std::io::Error>,
}

/// Whether a trace is recording, readable without the lock: every launch asks.
static ENABLED: AtomicBool = AtomicBool::new(false);
static TRACE: Mutex<Option<Trace>> = Mutex::new(None);
/// Whether `HCQ_TRACE` has been acted on (or overridden by [`start`]); guards its one start.
static ENV_SETTLED: Mutex<bool> = Mutex::new(false);

fn lock() -> MutexGuard<'static, Option<Trace>> {
    TRACE.lock().unwrap_or_else(|e| e.into_inner())
}

fn io_error(path: &Path, doing: &str, source: std::io::Error) -> Error {
    Error::Io {
        what: format!("{doing} trace file {}", path.display()),
        source,
    }
}

/// A copy of a stored error, to report it more than once.
fn copy_error(e: &std::io::Error) -> std::io::Error {
    match e.raw_os_error() {
        Some(code) => std::io::Error::from_raw_os_error(code),
        None => std::io::Error::new(e.kind(), e.to_string()),
    }
}

impl Trace {
    /// Creates (or truncates) the file at `path` and writes an empty trace into it.
    fn create(path: PathBuf) -> Result<Trace> {
        let mut file = File::create(&path).map_err(|e| io_error(&path, "creating", e))?;
        let rewindable = file
            .metadata()
            .map_err(|e| io_error(&path, "inspecting", e))?
            .is_file();
        let tail = if rewindable { FOOTER } else { "" };
        file.write_all(format!("{HEADER}{tail}").as_bytes())
            .map_err(|e| io_error(&path, "writing", e))?;
        Ok(Trace {
            path,
            file,
            rewindable,
            written: HEADER.len() as u64,
            any_event: false,
            events: Vec::new(),
            devices: Vec::new(),
            named: Vec::new(),
            failed: None,
        })
    }

    /// The trace process of `device` (a small number, from 1).
    fn pid(&mut self, device: &str) -> usize {
        let at = match self.devices.iter().position(|d| d == device) {
            Some(at) => at,
            None => {
                self.devices.push(device.to_string());
                self.devices.len() - 1
            }
        };
        at + 1
    }

    /// The events not yet written, as JSON lines with their separators, with the names of
    /// processes and threads that appear for the first time.
    fn render(&mut self) -> String {
        let tid = |q: &str| match q {
            "compute" => 1,
            "copy" => 2,
            _ => 3,
        };
        let mut lines: Vec<String> = Vec::new();
        for e in std::mem::take(&mut self.events) {
            let (d, q) = match &e {
                Event::Span { device, queue, .. } => (device.clone(), *queue),
                Event::Submit { device, .. } => (device.clone(), "host"),
            };
            let (p, th) = (self.pid(&d), tid(q));
            if !self.named.contains(&(p, 0)) {
                self.named.push((p, 0));
                lines.push(format!("{{\"ph\":\"M\",\"name\":\"process_name\",\"pid\":{p},\"tid\":0,\"args\":{{\"name\":\"{}\"}}}}", escape(&d)));
            }
            if !self.named.contains(&(p, th)) {
                self.named.push((p, th));
                lines.push(format!("{{\"ph\":\"M\",\"name\":\"thread_name\",\"pid\":{p},\"tid\":{th},\"args\":{{\"name\":\"{q}\"}}}}"));
            }
            match e {
                Event::Span {
                    name,
                    start_us,
                    end_us,
                    finished,
                    flow,
                    args,
                    ..
                } => {
                    let extra: String = args
                        .iter()
                        .map(|(k, v)| match v.parse::<u64>() {
                            Ok(n) => format!(",\"{}\":{n}", escape(k)),
                            Err(_) => format!(",\"{}\":\"{}\"", escape(k), escape(v)),
                        })
                        .collect();
                    lines.push(format!(
                        "{{\"ph\":\"X\",\"cat\":\"{CATEGORY}\",\"name\":\"{}\",\"pid\":{p},\"tid\":{th},\"ts\":{start_us:.3},\"dur\":{:.3},\"args\":{{\"finished\":{finished}{extra}}}}}",
                        escape(&name),
                        (end_us - start_us).max(0.0)
                    ));
                    if flow != 0 {
                        // The arrow's head binds to the span that encloses its time.
                        lines.push(format!(
                            "{{\"ph\":\"f\",\"bp\":\"e\",\"cat\":\"{CATEGORY}\",\"name\":\"submission\",\"id\":{flow},\"pid\":{p},\"tid\":{th},\"ts\":{start_us:.3}}}"
                        ));
                    }
                }
                Event::Submit {
                    name, at_us, flow, ..
                } => {
                    lines.push(format!(
                        "{{\"ph\":\"i\",\"s\":\"t\",\"cat\":\"{CATEGORY}\",\"name\":\"{}\",\"pid\":{p},\"tid\":{th},\"ts\":{at_us:.3}}}",
                        escape(&name)
                    ));
                    if flow != 0 {
                        lines.push(format!(
                            "{{\"ph\":\"s\",\"cat\":\"{CATEGORY}\",\"name\":\"submission\",\"id\":{flow},\"pid\":{p},\"tid\":{th},\"ts\":{at_us:.3}}}"
                        ));
                    }
                }
            }
        }
        let mut out = String::new();
        for line in lines {
            if self.any_event {
                out.push_str(",\n");
            }
            self.any_event = true;
            out.push_str(&line);
        }
        out
    }

    /// Writes the events not yet written (and, in a regular file, the closing `]}` after them).
    fn flush(&mut self) -> Result<()> {
        if let Some(e) = &self.failed {
            // Nothing more will be written: keep no events.
            self.events.clear();
            return Err(io_error(&self.path, "writing", copy_error(e)));
        }
        if self.events.is_empty() {
            return Ok(());
        }
        let text = self.render();
        let r = if self.rewindable {
            let mut bytes = text.clone().into_bytes();
            bytes.extend_from_slice(FOOTER.as_bytes());
            self.file
                .seek(SeekFrom::Start(self.written))
                .and_then(|_| self.file.write_all(&bytes))
        } else {
            self.file.write_all(text.as_bytes())
        };
        match r {
            Ok(()) => {
                self.written += text.len() as u64;
                Ok(())
            }
            Err(e) => {
                let reported = io_error(&self.path, "writing", copy_error(&e));
                self.failed = Some(e);
                Err(reported)
            }
        }
    }

    /// Writes what remains and closes the document.
    fn finish(mut self) -> Result<()> {
        self.flush()?;
        if !self.rewindable {
            self.file
                .write_all(FOOTER.as_bytes())
                .map_err(|e| io_error(&self.path, "writing", e))?;
        }
        self.file
            .flush()
            .map_err(|e| io_error(&self.path, "writing", e))
    }
}

/// Starts tracing into `path`, which is created or truncated now: a path that cannot be
/// written (a missing directory, a directory, no permission) is an error here. A trace in
/// progress is finished first; if that fails, its error is returned and no new trace starts.
/// An explicit start overrides `HCQ_TRACE`.
pub fn start(path: impl Into<PathBuf>) -> Result<()> {
    let path = path.into();
    let mut env_settled = ENV_SETTLED.lock().unwrap_or_else(|e| e.into_inner());
    *env_settled = true;
    let mut guard = lock();
    ENABLED.store(false, Ordering::Release);
    if let Some(previous) = guard.take() {
        previous.finish()?;
    }
    *guard = Some(Trace::create(path)?);
    ENABLED.store(true, Ordering::Release);
    Ok(())
}

/// Starts the trace `HCQ_TRACE` names, the first time it is called with the variable set and
/// no trace started by [`start`]; devices call it when they open. An error (the file cannot be
/// created) is returned every time until it succeeds.
pub fn start_from_env() -> Result<()> {
    let mut env_settled = ENV_SETTLED.lock().unwrap_or_else(|e| e.into_inner());
    if *env_settled {
        return Ok(());
    }
    if let Some(path) = std::env::var_os("HCQ_TRACE").filter(|p| !p.is_empty()) {
        let trace = Trace::create(PathBuf::from(path))?;
        let mut guard = lock();
        *guard = Some(trace);
        ENABLED.store(true, Ordering::Release);
    }
    *env_settled = true;
    Ok(())
}

/// Ends the trace: writes the events not yet written and closes the document. Returns the
/// first error writing the file, if there was one. Without a trace, does nothing.
pub fn finish() -> Result<()> {
    let mut guard = lock();
    ENABLED.store(false, Ordering::Release);
    match guard.take() {
        Some(t) => t.finish(),
        None => Ok(()),
    }
}

/// Whether a trace is being recorded.
pub fn enabled() -> bool {
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

/// Records a host-side submission; returns the flow that leads to its span (0 when no trace
/// is recording).
pub(crate) fn submit(device: &str, name: &str) -> u64 {
    match lock().as_mut() {
        Some(t) => {
            let flow = NEXT_FLOW.fetch_add(1, Ordering::Relaxed);
            t.events.push(Event::Submit {
                device: device.to_string(),
                name: name.to_string(),
                at_us: host_now_us(),
                flow,
            });
            flow
        }
        None => 0,
    }
}

/// A command the GPU ran (or was running when the trace was settled).
pub(crate) struct SpanRecord<'a> {
    pub device: &'a str,
    pub queue: &'static str,
    pub name: &'a str,
    pub start_us: f64,
    pub end_us: f64,
    pub finished: bool,
    pub flow: u64,
    pub args: &'a [(&'static str, String)],
}

pub(crate) fn span(s: SpanRecord<'_>) {
    if let Some(t) = lock().as_mut() {
        t.events.push(Event::Span {
            device: s.device.to_string(),
            queue: s.queue,
            name: s.name.to_string(),
            start_us: s.start_us,
            end_us: s.end_us,
            finished: s.finished,
            flow: s.flow,
            args: s.args.to_vec(),
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

/// Writes the events recorded so far. Returns the trace's first write error, if there was one.
pub fn flush() -> Result<()> {
    match lock().as_mut() {
        Some(t) => t.flush(),
        None => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Read;

    fn submit_event(name: &str, at_us: f64) -> Event {
        Event::Submit {
            device: "amd-emu:0".into(),
            name: name.into(),
            at_us,
            flow: 0,
        }
    }

    fn span_event(name: &str, start_us: f64, end_us: f64, finished: bool) -> Event {
        Event::Span {
            device: "amd-emu:0".into(),
            queue: "compute",
            name: name.into(),
            start_us,
            end_us,
            finished,
            flow: 0,
            args: Vec::new(),
        }
    }

    /// The trace events that are not metadata, as (phase, name, ts, finished).
    fn events_of(text: &str) -> Vec<(String, String, f64, Option<bool>)> {
        let doc: serde_json::Value = serde_json::from_str(text).expect("a complete JSON document");
        doc["traceEvents"]
            .as_array()
            .expect("traceEvents")
            .iter()
            .filter(|e| e["ph"] != "M")
            .map(|e| {
                (
                    e["ph"].as_str().unwrap().to_string(),
                    e["name"].as_str().unwrap().to_string(),
                    e["ts"].as_f64().unwrap(),
                    e["args"]["finished"].as_bool(),
                )
            })
            .collect()
    }

    fn names_in(dir: &Path) -> Vec<String> {
        let mut names: Vec<String> = std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        names
    }

    #[test]
    fn the_file_is_complete_json_after_every_flush_and_no_other_file_is_touched() {
        let dir = tempfile::tempdir().unwrap();
        // Files a temporary file next to the trace could have clobbered.
        for neighbour in ["run.tmp", "run.json.tmp", ".run.json.tmp"] {
            std::fs::write(dir.path().join(neighbour), neighbour).unwrap();
        }
        let path = dir.path().join("run.json");
        std::fs::write(
            &path,
            "an older trace, longer than the new one will be at first",
        )
        .unwrap();
        let mut t = Trace::create(path.clone()).unwrap();
        assert_eq!(events_of(&std::fs::read_to_string(&path).unwrap()), []);
        t.events.push(submit_event("first", 10.0));
        t.events.push(span_event("first", 11.0, 12.5, true));
        t.flush().unwrap();
        let after_one = events_of(&std::fs::read_to_string(&path).unwrap());
        assert_eq!(
            after_one,
            [
                ("i".into(), "first".into(), 10.0, None),
                ("X".into(), "first".into(), 11.0, Some(true)),
            ]
        );
        t.flush().unwrap();
        t.events
            .push(span_event("second \"quoted\"", 20.0, 30.0, false));
        t.flush().unwrap();
        let mut expected = after_one.clone();
        expected.push(("X".into(), "second \"quoted\"".into(), 20.0, Some(false)));
        assert_eq!(
            events_of(&std::fs::read_to_string(&path).unwrap()),
            expected
        );
        t.finish().unwrap();
        assert_eq!(
            events_of(&std::fs::read_to_string(&path).unwrap()),
            expected
        );
        assert_eq!(
            names_in(dir.path()),
            [".run.json.tmp", "run.json", "run.json.tmp", "run.tmp"]
        );
        for neighbour in ["run.tmp", "run.json.tmp", ".run.json.tmp"] {
            let kept = std::fs::read_to_string(dir.path().join(neighbour)).unwrap();
            assert_eq!(kept, neighbour);
        }
    }

    #[test]
    fn a_path_that_cannot_be_written_is_an_error_and_leaves_nothing_behind() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("sub")).unwrap();
        for bad in [dir.path().join("missing/t.json"), dir.path().join("sub")] {
            let e = Trace::create(bad.clone()).err().expect("an error");
            let message = e.to_string();
            assert!(message.contains(&bad.display().to_string()), "{message}");
            assert!(matches!(e, Error::Io { .. }), "{e:?}");
        }
        assert_eq!(names_in(dir.path()), ["sub"]);
        assert_eq!(names_in(&dir.path().join("sub")), Vec::<String>::new());
        // Through the public entry point too: nothing starts.
        let e = start(dir.path().join("missing/t.json")).unwrap_err();
        assert!(e.to_string().contains("missing/t.json"), "{e}");
        assert!(!enabled());
        assert_eq!(names_in(dir.path()), ["sub"]);
    }

    #[test]
    fn a_write_error_is_returned_by_every_later_flush_and_by_finish() {
        let (reader, writer) = std::io::pipe().unwrap();
        let path = PathBuf::from(format!(
            "/proc/self/fd/{}",
            std::os::fd::AsRawFd::as_raw_fd(&writer)
        ));
        let mut t = Trace::create(path.clone()).unwrap();
        assert!(!t.rewindable);
        drop(reader);
        drop(writer);
        t.events.push(submit_event("lost", 1.0));
        let first = t.flush().unwrap_err();
        assert!(
            first.to_string().contains(&path.display().to_string()),
            "{first}"
        );
        assert_eq!(first.os_error(), Some(libc::EPIPE), "{first}");
        t.events.push(submit_event("also lost", 2.0));
        assert_eq!(t.flush().unwrap_err().os_error(), Some(libc::EPIPE));
        assert_eq!(t.finish().unwrap_err().os_error(), Some(libc::EPIPE));
    }

    #[test]
    fn a_pipe_gets_the_events_as_they_come_and_the_closing_bracket_at_the_end() {
        let (mut reader, writer) = std::io::pipe().unwrap();
        let path = PathBuf::from(format!(
            "/proc/self/fd/{}",
            std::os::fd::AsRawFd::as_raw_fd(&writer)
        ));
        let mut t = Trace::create(path).unwrap();
        drop(writer);
        t.events.push(span_event("k", 5.0, 6.0, true));
        t.flush().unwrap();
        t.events.push(submit_event("k", 4.0));
        t.finish().unwrap();
        let mut text = String::new();
        reader.read_to_string(&mut text).unwrap();
        assert_eq!(
            events_of(&text),
            [
                ("X".into(), "k".into(), 5.0, Some(true)),
                ("i".into(), "k".into(), 4.0, None),
            ]
        );
    }
}
