//! Bodies of the fuzz targets for the emulated kernel: the libFuzzer binaries in `fuzz/` and
//! the workspace's replay of every input that ever failed call these, so both exercise the
//! same code. Each returns normally for any input; a panic, a hang, a leak or a crash is the
//! defect looked for.
//!
//! The harnesses keep the caller's side of the kernel contract, as a real process must:
//! pointers inside ioctl structs point to buffers the harness owns, and every address the
//! fuzzer chooses for a mapping lands in an arena the harness reserved (or is left as an
//! obviously invalid value), so that no input can make the emulator replace memory the
//! process itself uses.

use std::ffi::c_void;
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};
use std::time::{Duration, Instant};

use hcq_amd_sys::kfd::*;
use hcq_amd_sys::seam::{Fd, Syscalls, MAP_FIXED};
use hcq_amd_sys::{pm4, sdma as sdma_packets};

use crate::cp::Cp;
use crate::events::Events;
use crate::gpu::Gpu;
use crate::memory::{AddressSpace, Storage};
use crate::queue::{DoorbellSlot, Doorbells, QueueShared};
use crate::ring::RingDesc;
use crate::sdma::Sdma;
use crate::util::{lock, MemWatch};
use crate::{EmuConfig, EmuKernel};

/// Longest time one input may keep an engine busy (a `WAIT_REG_MEM` that never holds, a
/// dispatch of billions of workgroups) before the harness destroys the queue, as a driver
/// would; the engine must then stop promptly.
const ENGINE_DEADLINE: Duration = Duration::from_millis(3);
/// Instructions one wave may execute in the harnesses.
const WAVE_STEPS: u64 = 10_000;

/// Reads the input front to back; past its end every read is zero.
struct Input<'a> {
    data: &'a [u8],
    at: usize,
}

impl<'a> Input<'a> {
    fn new(data: &'a [u8]) -> Self {
        Input { data, at: 0 }
    }
    fn is_empty(&self) -> bool {
        self.at >= self.data.len()
    }
    fn bytes(&mut self, n: usize) -> &'a [u8] {
        let start = self.at.min(self.data.len());
        let end = self.at.saturating_add(n).min(self.data.len());
        self.at = self.at.saturating_add(n);
        &self.data[start..end]
    }
    fn u8(&mut self) -> u8 {
        self.bytes(1).first().copied().unwrap_or(0)
    }
    fn u32(&mut self) -> u32 {
        let mut w = [0u8; 4];
        let b = self.bytes(4);
        w[..b.len()].copy_from_slice(b);
        u32::from_le_bytes(w)
    }
    fn u64(&mut self) -> u64 {
        u64::from(self.u32()) | u64::from(self.u32()) << 32
    }
}

/// A running input's deadline, its queue, and the memory watch that wakes its engine.
type Watched = (Instant, Arc<QueueShared>, Arc<MemWatch>);

/// Stops the queue of a running input when it overstays [`ENGINE_DEADLINE`].
struct Watchdog {
    current: Mutex<Option<Watched>>,
}

impl Watchdog {
    fn get() -> &'static Watchdog {
        static DOG: OnceLock<Watchdog> = OnceLock::new();
        DOG.get_or_init(|| {
            std::thread::Builder::new()
                .name("hcq-emu-fuzz-watchdog".into())
                .spawn(|| loop {
                    std::thread::sleep(Duration::from_millis(1));
                    let dog = Watchdog::get();
                    let cur = lock(&dog.current);
                    if let Some((deadline, queue, watch)) = cur.as_ref() {
                        if Instant::now() > *deadline && !queue.stopped() {
                            queue.stop();
                            watch.notify();
                        }
                    }
                })
                .expect("spawning the fuzz watchdog");
            Watchdog {
                current: Mutex::new(None),
            }
        })
    }

    fn watch(&self, queue: &Arc<QueueShared>, watch: &Arc<MemWatch>) {
        *lock(&self.current) = Some((
            Instant::now() + ENGINE_DEADLINE,
            Arc::clone(queue),
            Arc::clone(watch),
        ));
    }

    fn done(&self) {
        *lock(&self.current) = None;
    }
}

/// A fault report is a message about the input's commands; an interpreter panic (which the
/// emulator turns into a report to keep its queue alive) is a defect of the emulator.
fn assert_reported_fault(report: &hcq_core::FaultReport) {
    assert!(!report.message.is_empty());
    assert!(
        !report.message.contains("interpreter panicked"),
        "the interpreter panicked: {report}"
    );
}

/// GPU address of the memory the stream harness maps: fixed, so that inputs replay alike.
pub const STREAM_GPU_BASE: u64 = 0x10_0000_0000;
/// Bytes of that memory; the ring is its first [`STREAM_RING_BYTES`].
pub const STREAM_BYTES: u64 = 64 << 10;
/// Bytes of the ring.
pub const STREAM_RING_BYTES: u64 = 4 << 10;
/// Where the engine publishes its read pointer: the last 8 bytes of the memory.
const STREAM_RPTR: u64 = STREAM_GPU_BASE + STREAM_BYTES - 8;

/// One GPU with [`STREAM_BYTES`] of host memory mapped at [`STREAM_GPU_BASE`], kept across
/// inputs (setting it up reads `/proc/self/maps`).
struct StreamRig {
    gpu: Arc<Gpu>,
    host: *mut u8,
    _storage: Arc<Storage>,
    /// The doorbell slot of the stream's queue (the engine is driven directly, never rung).
    doorbell: DoorbellSlot,
    /// Serialises inputs (the workspace replay may run tests on several threads).
    busy: Mutex<()>,
}

// SAFETY: `host` points to memory the rig owns for the whole process; it is written only
// under `busy`, while no engine of the rig runs.
unsafe impl Sync for StreamRig {}
// SAFETY: as for `Sync`.
unsafe impl Send for StreamRig {}

impl StreamRig {
    fn get() -> &'static StreamRig {
        static RIG: OnceLock<StreamRig> = OnceLock::new();
        RIG.get_or_init(|| {
            let events = Arc::new(Events::default());
            let watch = Arc::new(MemWatch::default());
            let gpu = Arc::new(Gpu::new(
                0,
                1,
                1 << 30,
                WAVE_STEPS,
                crate::topology::gpu_shape(crate::config::DEFAULT_CUS),
                events,
                watch,
            ));
            // SAFETY: a fresh anonymous mapping at an address of the kernel's choice.
            let host = unsafe {
                libc::mmap(
                    std::ptr::null_mut(),
                    STREAM_BYTES as usize,
                    libc::PROT_READ | libc::PROT_WRITE,
                    libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                    -1,
                    0,
                )
            };
            assert_ne!(host, libc::MAP_FAILED, "mapping the stream harness memory");
            let space = Arc::new(AddressSpace::default());
            let storage = space
                .hold_user(host as usize as u64, STREAM_BYTES)
                .expect("holding the stream harness memory");
            gpu.page_table.map(STREAM_GPU_BASE, &storage);
            let doorbell = Doorbells::default()
                .slot(0, 0)
                .expect("mapping the stream harness doorbell");
            StreamRig {
                gpu,
                doorbell,
                host: host.cast(),
                _storage: storage,
                busy: Mutex::new(()),
            }
        })
    }
}

/// Decodes every dword position of `words` as a PM4 and as an SDMA packet (the parsers of
/// `hcq-amd-sys`), formatting what they return.
fn decode_packets(words: &[u32]) {
    let mut text = String::new();
    for at in 0..words.len() {
        let header = pm4::Header::parse(words[at]);
        let end = (at + header.len()).min(words.len());
        let payload = &words[(at + 1).min(end)..end];
        let pm4_packet = pm4::Packet::decode(header, payload);
        let sdma_header = sdma_packets::Header::parse(words[at]);
        let sdma_packet = sdma_packets::Packet::decode(&words[at..]);
        text.clear();
        use std::fmt::Write;
        write!(
            text,
            "{pm4_packet:?} {sdma_header:?} {:?} {sdma_packet:?}",
            sdma_header.packet_len()
        )
        .expect("formatting into a String");
        if let Err(e) = &pm4_packet {
            write!(text, "{e}").expect("formatting into a String");
        }
        if let Err(e) = &sdma_packet {
            write!(text, "{e}").expect("formatting into a String");
        }
    }
}

/// Runs the input as a command stream: byte 0 picks the engine (PM4 command processor or SDMA
/// engine), the rest fills the harness's GPU memory from its start, where the ring is; the
/// write pointer covers the input's dwords in the ring. Packets may point anywhere: into the
/// mapped memory (indirect buffers, copies, waits, dispatches of code found there) or not.
pub fn run_stream(data: &[u8]) {
    let rig = StreamRig::get();
    let _busy = lock(&rig.busy);
    let engine = data.first().copied().unwrap_or(0);
    let body = data.get(1..).unwrap_or(&[]);
    let len = body.len().min(STREAM_BYTES as usize - 8);
    // SAFETY: `host` points to STREAM_BYTES bytes owned by the rig; no engine runs (`busy`).
    unsafe {
        std::ptr::write_bytes(rig.host, 0, STREAM_BYTES as usize);
        std::ptr::copy_nonoverlapping(body.as_ptr(), rig.host, len);
    }
    let words: Vec<u32> = body
        .chunks(4)
        .map(|c| {
            let mut w = [0u8; 4];
            w[..c.len()].copy_from_slice(c);
            u32::from_le_bytes(w)
        })
        .collect();
    decode_packets(&words);

    let gpu = &rig.gpu;
    gpu.code_cache.invalidate();
    // Each input stands for a process of its own: a VM fault in the last one evicted only
    // that one's queues.
    gpu.hold.readmit();
    let ring_dwords = (len as u64 / 4).min(STREAM_RING_BYTES / 4);
    let shared = QueueShared::new(&gpu.hold, rig.doorbell.clone());
    // The input's engine is alone with its memory: a wait that does not hold at once ends the
    // input (as the deadline would, milliseconds later).
    shared.set_sole_writer();
    let desc = RingDesc {
        queue_id: 1,
        ring_base: STREAM_GPU_BASE,
        ring_bytes: STREAM_RING_BYTES,
        rptr_addr: STREAM_RPTR,
    };
    let dog = Watchdog::get();
    dog.watch(&shared, &gpu.watch);
    if engine & 1 == 0 {
        Cp::new(Arc::clone(gpu), Arc::clone(&shared), desc).consume(0, ring_dwords);
    } else {
        Sdma::new(Arc::clone(gpu), Arc::clone(&shared), desc).consume(0, ring_dwords * 4);
    }
    dog.done();
    while let Some(report) = gpu.take_report() {
        assert_reported_fault(&report);
    }
    drop(shared);
    // The GPU may remember the queue just dropped, not every queue it ever had.
    assert!(
        gpu.hold.registered_queues() <= 1,
        "the GPU keeps {} queue registrations for one queue",
        gpu.hold.registered_queues()
    );
}

/// The harness's own address range for every address an ioctl input names.
const ARENA_HINT: u64 = 0x3f00_0000_0000;
const ARENA_BYTES: u64 = 32 << 20;
/// The first part of the arena is ordinary read-write memory (userptr buffers live there).
const ARENA_USER_BYTES: u64 = 1 << 20;
/// Ioctl argument buffer: larger than any KFD struct, so a request number that encodes a
/// size reads and writes only this buffer.
const ARG_BYTES: usize = 1 << 14;
/// GPU ids a `MAP_MEMORY_TO_GPU` input may list (the kernel accepts at most 1024).
const DEVICE_IDS: usize = 1024;
/// Operations one input may perform.
const MAX_OPS: usize = 64;

/// The arena, reserved once per process; re-laid before each input.
struct Arena {
    base: u64,
    busy: Mutex<()>,
}

impl Arena {
    fn get() -> &'static Arena {
        static ARENA: OnceLock<Arena> = OnceLock::new();
        ARENA.get_or_init(|| {
            // SAFETY: a fresh inaccessible reservation; without MAP_FIXED the hint only asks.
            let p = unsafe {
                libc::mmap(
                    ARENA_HINT as *mut c_void,
                    ARENA_BYTES as usize,
                    libc::PROT_NONE,
                    libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE,
                    -1,
                    0,
                )
            };
            assert_ne!(p, libc::MAP_FAILED, "reserving the ioctl harness arena");
            Arena {
                base: p as usize as u64,
                busy: Mutex::new(()),
            }
        })
    }

    /// Lays the arena out afresh: all of it an inaccessible reservation (as the driver
    /// reserves device address space) but the first part, zeroed read-write memory.
    fn reset(&self, _busy: &MutexGuard<'_, ()>) {
        // SAFETY: the arena belongs to the harness alone, and no emulated kernel holds any
        // of it between inputs (`_busy` is held and the last input's kernel was dropped).
        unsafe {
            let base = self.base as *mut c_void;
            let reserve = libc::MAP_FIXED | libc::MAP_PRIVATE | libc::MAP_ANONYMOUS;
            let r = libc::mmap(
                base,
                ARENA_BYTES as usize,
                libc::PROT_NONE,
                reserve | libc::MAP_NORESERVE,
                -1,
                0,
            );
            assert_ne!(r, libc::MAP_FAILED);
            let rw = libc::PROT_READ | libc::PROT_WRITE;
            let r = libc::mmap(base, ARENA_USER_BYTES as usize, rw, reserve, -1, 0);
            assert_ne!(r, libc::MAP_FAILED);
        }
    }

    /// An address for `raw`: small values and values with the top bit set stay as they are
    /// (null, unaligned, overflowing: all invalid wherever they point), any other lands in
    /// the arena.
    fn place(&self, raw: u64) -> u64 {
        if raw < (1 << 16) || raw >> 63 != 0 {
            raw
        } else {
            self.base + raw % ARENA_BYTES
        }
    }

    fn contains(&self, addr: u64) -> bool {
        addr >= self.base && addr - self.base < ARENA_BYTES
    }
}

/// `HCQ_FUZZ_VERBOSE=1` prints every call of an ioctl input and its result (to triage a
/// failing input).
fn verbose() -> bool {
    static VERBOSE: OnceLock<bool> = OnceLock::new();
    *VERBOSE.get_or_init(|| std::env::var_os("HCQ_FUZZ_VERBOSE").is_some())
}

/// What an ioctl input has learnt from the kernel, to name in later calls.
#[derive(Default)]
struct Learnt {
    fds: Vec<Fd>,
    handles: Vec<u64>,
    queue_ids: Vec<u32>,
    event_ids: Vec<u32>,
    /// mmap offsets handed out (BO offsets and doorbell offsets).
    offsets: Vec<u64>,
    /// Doorbell pages mapped outside the arena: (address, bytes).
    doorbells: Vec<(u64, u64)>,
}

fn pick<T: Copy>(list: &[T], selector: u8) -> Option<T> {
    (!list.is_empty()).then(|| list[selector as usize % list.len()])
}

/// Runs the input as a sequence of system calls on a fresh emulated kernel with two GPUs:
/// `open`, `close`, `ioctl` (a known request or any number, with argument bytes from the
/// input; handles, ids and fds it names may be ones the kernel returned earlier), `mmap` and
/// `munmap` of the device files, and doorbell writes. Every call must return (an error is
/// fine); dropping the kernel must stop everything it started.
pub fn run_syscalls(data: &[u8]) {
    let arena = Arena::get();
    let busy = lock(&arena.busy);
    arena.reset(&busy);
    // The first byte's top bit (which no operation reads) picks the kernel: 6.12 refuses most
    // queues the arena can hold (a compute queue's context save area is 44 MiB), 6.6 runs them.
    let kernel = EmuKernel::new(EmuConfig {
        gpus: 2,
        max_steps: WAVE_STEPS,
        vram_bytes: 256 << 20,
        kernel: match data.first() {
            Some(b) if b & 0x80 != 0 => crate::KfdRules::Linux6_6,
            _ => crate::KfdRules::Linux6_12,
        },
        ..EmuConfig::default()
    });
    let gpu_ids = kernel.gpu_ids();
    let mut input = Input::new(data);
    let mut learnt = Learnt::default();
    let mut args = vec![0u64; ARG_BYTES / 8];
    let mut device_ids = [0u32; DEVICE_IDS];
    // SAFETY: `EventData` is plain integers (a C union of them): zero is a valid value.
    let mut events: Vec<EventData> =
        vec![unsafe { std::mem::zeroed() }; crate::ioctl::MAX_WAIT_EVENTS as usize];
    let mut started_queues = 0usize;
    // Where a render node's VERSION strings and INFO answers go.
    let mut drm_scratch = vec![0u8; 1024];

    for _ in 0..MAX_OPS {
        if input.is_empty() {
            break;
        }
        let op = input.u8();
        let sel = input.u8();
        match op % 8 {
            0 => {
                if let Ok(fd) = kernel.open("/dev/kfd") {
                    learnt.fds.push(fd);
                }
            }
            1 => {
                let path = match sel % 4 {
                    0 => "/dev/dri/renderD128".to_string(),
                    1 => "/dev/dri/renderD129".to_string(),
                    2 => format!("/dev/dri/renderD{}", input.u32()),
                    _ => String::from_utf8_lossy(input.bytes(usize::from(sel % 32))).into(),
                };
                if let Ok(fd) = kernel.open(&path) {
                    learnt.fds.push(fd);
                }
            }
            2 => {
                if let Some(fd) = pick(&learnt.fds, sel) {
                    kernel.close(fd);
                }
            }
            3 => {
                let fd = pick(&learnt.fds, sel).unwrap_or_else(|| input.u32() as Fd);
                let request = ioctl_request(&mut input);
                let n = usize::from(input.u8()) % 96;
                let arg_bytes = args_bytes(&mut args);
                arg_bytes.fill(0);
                let given = input.bytes(n);
                arg_bytes[..given.len()].copy_from_slice(given);
                let fix = input.u8();
                prepare_args(
                    request,
                    arg_bytes,
                    fix,
                    arena,
                    &gpu_ids,
                    &learnt,
                    &mut device_ids,
                    &mut events,
                    &mut drm_scratch,
                    &mut input,
                );
                // SAFETY: `args` is ARG_BYTES long, more than any request's struct, and every
                // pointer inside it points to a buffer of this function large enough for the
                // count next to it (`prepare_args`).
                let result = unsafe { kernel.ioctl(fd, request, args.as_mut_ptr().cast()) };
                if verbose() {
                    eprintln!("ioctl(fd {fd}, {request:#x}): {result:?}");
                }
                if result.is_ok() {
                    learn(request, args_bytes(&mut args), &mut learnt);
                    if request == IOC_CREATE_QUEUE.request() {
                        started_queues += 1;
                    }
                }
            }
            4 => {
                let Some(fd) = pick(&learnt.fds, sel) else {
                    continue;
                };
                let offset = match pick(&learnt.offsets, input.u8()) {
                    Some(o) if sel & 0x80 == 0 => o,
                    _ => input.u64(),
                };
                let len = u64::from(input.u32() % (4 << 20));
                let fixed = sel & 0x40 != 0;
                let addr = if fixed {
                    arena.place(input.u64()) & !0xfff
                } else {
                    0
                };
                if fixed && !arena.contains(addr) {
                    continue;
                }
                let flags = libc::MAP_SHARED | if fixed { MAP_FIXED } else { 0 };
                let prot = libc::PROT_READ | libc::PROT_WRITE;
                // SAFETY: a fixed mapping lies inside the arena, which the harness owns.
                let mapped = unsafe {
                    kernel.mmap(addr as *mut c_void, len as usize, prot, flags, fd, offset)
                };
                if verbose() {
                    eprintln!("mmap(fd {fd}, offset {offset:#x}, {len} bytes): {mapped:?}");
                }
                if let Ok(p) = mapped {
                    let p = p as usize as u64;
                    if !arena.contains(p) {
                        learnt.doorbells.push((p, len.next_multiple_of(4096)));
                    }
                }
            }
            5 => {
                let (addr, len) = match pick(&learnt.doorbells, sel) {
                    Some(d) if sel & 0x80 == 0 => d,
                    _ => {
                        let addr = arena.place(input.u64());
                        if !arena.contains(addr) {
                            continue;
                        }
                        let room = arena.base + ARENA_BYTES - addr;
                        (addr, u64::from(input.u32()) % room.max(1))
                    }
                };
                // SAFETY: the range is inside the arena or a doorbell page this input mapped.
                let result = unsafe { kernel.munmap(addr as usize as *mut c_void, len as usize) };
                if result.is_ok() {
                    learnt.doorbells.retain(|&(a, _)| a != addr);
                }
            }
            6 => {
                let value = input.u64();
                let target = match pick(&learnt.doorbells, sel) {
                    Some((base, len)) => base + (u64::from(input.u32()) % len),
                    None => arena.place(input.u64()),
                };
                // SAFETY: the kernel writes only inside doorbell pages it mapped and ignores
                // any other address.
                unsafe { kernel.write_doorbell(target as usize as *mut u64, value) };
                if verbose() {
                    eprintln!("doorbell {target:#x} = {value}");
                }
            }
            _ => {
                let gpu = pick(&gpu_ids, sel).unwrap_or(0);
                while let Some(report) = kernel.take_fault_report(gpu) {
                    assert_reported_fault(&report);
                    if verbose() {
                        eprintln!("fault report: {report}");
                    }
                }
            }
        }
    }
    // Engines of queues the input left running must stop when the kernel goes: a watchdog
    // stops them should they be busy waiting for something that never comes.
    let stopped = {
        let queues = std::mem::take(&mut lock(&kernel.queues).queues);
        for q in queues.values() {
            q.shared.stop();
        }
        kernel.watch.notify();
        let start = Instant::now();
        for (_, mut q) in queues {
            if let Some(t) = q.thread.take() {
                t.join().expect("an engine thread panicked");
            }
        }
        start.elapsed()
    };
    assert!(
        stopped < Duration::from_secs(2),
        "stopping {started_queues} queues took {stopped:?}"
    );
    drop(kernel);
    for (addr, len) in learnt.doorbells {
        // SAFETY: a doorbell page this input mapped outside the arena, no longer used.
        unsafe { libc::munmap(addr as usize as *mut c_void, len as usize) };
    }
    drop(busy);
}

fn args_bytes(args: &mut [u64]) -> &mut [u8] {
    let len = args.len() * 8;
    // SAFETY: the `u64` buffer is `len` bytes; `u8` has no alignment or validity needs.
    unsafe { std::slice::from_raw_parts_mut(args.as_mut_ptr().cast::<u8>(), len) }
}

/// A known request most of the time; sometimes any number (other sizes, directions, types).
fn ioctl_request(input: &mut Input<'_>) -> u64 {
    const KNOWN: [u64; 15] = [
        IOC_GET_VERSION.request(),
        IOC_CREATE_QUEUE.request(),
        IOC_DESTROY_QUEUE.request(),
        IOC_GET_CLOCK_COUNTERS.request(),
        IOC_CREATE_EVENT.request(),
        IOC_DESTROY_EVENT.request(),
        IOC_SET_EVENT.request(),
        IOC_RESET_EVENT.request(),
        IOC_WAIT_EVENTS.request(),
        IOC_ACQUIRE_VM.request(),
        IOC_ALLOC_MEMORY_OF_GPU.request(),
        IOC_FREE_MEMORY_OF_GPU.request(),
        IOC_MAP_MEMORY_TO_GPU.request(),
        IOC_UNMAP_MEMORY_FROM_GPU.request(),
        IOC_AVAILABLE_MEMORY.request(),
    ];
    let k = input.u8();
    match k {
        0..=239 => KNOWN[usize::from(k) % KNOWN.len()],
        240..=247 => u64::from(input.u32()),
        // A known number with its size field changed.
        _ => KNOWN[usize::from(input.u8()) % KNOWN.len()] ^ (u64::from(input.u8() % 64) << 16),
    }
}

/// Reads a `T` from the start of `bytes`.
fn read_struct<T: Copy>(bytes: &[u8]) -> T {
    assert!(bytes.len() >= std::mem::size_of::<T>());
    // SAFETY: the buffer holds at least `size_of::<T>()` bytes (checked), and the KFD structs
    // used here are plain integers, valid for any bytes.
    unsafe { bytes.as_ptr().cast::<T>().read_unaligned() }
}

fn write_struct<T: Copy>(bytes: &mut [u8], value: T) {
    assert!(bytes.len() >= std::mem::size_of::<T>());
    // SAFETY: as in `read_struct`.
    unsafe { bytes.as_mut_ptr().cast::<T>().write_unaligned(value) }
}

/// Keeps the caller's side of the contract for `request`'s struct: pointers to buffers of the
/// harness, addresses in the arena, bounded waits; and, when `fix` says so, names ids and
/// handles the kernel returned earlier instead of the input's numbers.
#[allow(clippy::too_many_arguments)]
fn prepare_args(
    request: u64,
    bytes: &mut [u8],
    fix: u8,
    arena: &Arena,
    gpu_ids: &[u32],
    learnt: &Learnt,
    device_ids: &mut [u32; DEVICE_IDS],
    events: &mut [EventData],
    drm_scratch: &mut [u8],
    input: &mut Input<'_>,
) {
    let use_learnt = fix & 1 != 0;
    // KFD and DRM find a request by its number: fix the pointers of whatever struct the
    // kernel will read, whatever size the input encoded.
    let known = crate::ioctl::known_request(request).ok();
    let drm = if known.is_none() {
        hcq_amd_sys::drm::DrmIoctl::decode(request)
    } else {
        None
    };
    if drm == Some(hcq_amd_sys::drm::DrmIoctl::Version) {
        // The string buffers of a render node's VERSION: the harness's, lengths within them.
        let mut v: hcq_amd_sys::drm::DrmVersion = read_struct(bytes);
        let base = drm_scratch.as_mut_ptr() as u64;
        v.name_len %= 256;
        v.date_len %= 256;
        v.desc_len %= 256;
        (v.name, v.date, v.desc) = (base, base + 256, base + 512);
        write_struct(bytes, v);
        return;
    }
    if drm == Some(hcq_amd_sys::drm::DrmIoctl::AmdgpuInfo) {
        let mut q: hcq_amd_sys::drm::AmdgpuInfo = read_struct(bytes);
        q.return_pointer = drm_scratch.as_mut_ptr() as u64;
        q.return_size %= drm_scratch.len() as u32 + 1;
        write_struct(bytes, q);
        return;
    }
    let gpu = |raw: u32| {
        if fix & 2 != 0 {
            raw
        } else {
            gpu_ids[raw as usize % gpu_ids.len()]
        }
    };
    match known {
        Some(KfdIoctl::CreateQueue) => {
            let mut a: CreateQueueArgs = read_struct(bytes);
            a.gpu_id = gpu(a.gpu_id);
            a.ring_base_address = arena.place(a.ring_base_address);
            a.read_pointer_address = arena.place(a.read_pointer_address);
            a.write_pointer_address = arena.place(a.write_pointer_address);
            a.eop_buffer_address = arena.place(a.eop_buffer_address);
            a.ctx_save_restore_address = arena.place(a.ctx_save_restore_address);
            if fix & 4 == 0 {
                // The node's own sizes, which random bytes never hit, so that Linux 6.12's
                // checks of the buffers themselves are reached.
                let areas = crate::topology::gpu_queue_areas(&crate::topology::gpu_shape(
                    crate::config::DEFAULT_CUS,
                ));
                a.eop_buffer_size = areas.eop_bytes.into();
                a.ctl_stack_size = areas.ctl_stack_bytes;
                a.ctx_save_restore_size = areas.cwsr_bytes;
            }
            write_struct(bytes, a);
        }
        Some(KfdIoctl::DestroyQueue) if use_learnt => {
            if let Some(id) = pick(&learnt.queue_ids, fix >> 2) {
                write_struct(
                    bytes,
                    DestroyQueueArgs {
                        queue_id: id,
                        pad: 0,
                    },
                );
            }
        }
        Some(KfdIoctl::GetClockCounters)
        | Some(KfdIoctl::AvailableMemory)
        | Some(KfdIoctl::AcquireVm) => {
            // The gpu id is the second u32 of ACQUIRE_VM, at byte 32 or 8 of the others.
            let at = match known {
                Some(KfdIoctl::AcquireVm) => 4,
                Some(KfdIoctl::GetClockCounters) => 32,
                _ => 8,
            };
            let raw: u32 = read_struct(&bytes[at..]);
            write_struct(&mut bytes[at..], gpu(raw));
            if known == Some(KfdIoctl::AcquireVm) && use_learnt {
                if let Some(fd) = pick(&learnt.fds, fix >> 2) {
                    write_struct(bytes, fd as u32);
                }
            }
        }
        Some(KfdIoctl::CreateEvent) if use_learnt => {
            let mut a: CreateEventArgs = read_struct(bytes);
            if let Some(h) = pick(&learnt.handles, fix >> 2) {
                a.event_page_offset = h;
            }
            write_struct(bytes, a);
        }
        Some(KfdIoctl::DestroyEvent) | Some(KfdIoctl::SetEvent) | Some(KfdIoctl::ResetEvent)
            if use_learnt =>
        {
            if let Some(id) = pick(&learnt.event_ids, fix >> 2) {
                write_struct(
                    bytes,
                    EventIdArgs {
                        event_id: id,
                        pad: 0,
                    },
                );
            }
        }
        Some(KfdIoctl::WaitEvents) => {
            let mut a: WaitEventsArgs = read_struct(bytes);
            let n = (a.num_events as usize).min(events.len());
            let other = input.u32();
            for (i, e) in events.iter_mut().enumerate().take(n) {
                // SAFETY: `EventData` is plain integers: zero is a valid value.
                *e = unsafe { std::mem::zeroed() };
                e.event_id = match pick(&learnt.event_ids, i as u8 ^ fix) {
                    Some(id) if fix & 2 == 0 => id,
                    _ => other.wrapping_add(i as u32),
                };
            }
            // `events` holds as many as the kernel ever reads; a larger count must be refused
            // before anything is read.
            a.events_ptr = events.as_mut_ptr() as usize as u64;
            // An input may not make the harness sleep: only polls and very short waits.
            a.timeout %= 3;
            write_struct(bytes, a);
        }
        Some(KfdIoctl::AllocMemoryOfGpu) => {
            let mut a: AllocMemoryOfGpuArgs = read_struct(bytes);
            a.gpu_id = gpu(a.gpu_id);
            a.va_addr = arena.place(a.va_addr);
            a.mmap_offset = arena.place(a.mmap_offset);
            a.size %= 2 * ARENA_BYTES;
            write_struct(bytes, a);
        }
        Some(KfdIoctl::FreeMemoryOfGpu) if use_learnt => {
            if let Some(h) = pick(&learnt.handles, fix >> 2) {
                write_struct(bytes, FreeMemoryOfGpuArgs { handle: h });
            }
        }
        Some(KfdIoctl::MapMemoryToGpu) | Some(KfdIoctl::UnmapMemoryFromGpu) => {
            let mut a: MapMemoryArgs = read_struct(bytes);
            if use_learnt {
                if let Some(h) = pick(&learnt.handles, fix >> 2) {
                    a.handle = h;
                }
            }
            // Real ids, alternating with ids from one number of the input (any number, when
            // `fix` says so).
            let other = input.u32();
            for (i, id) in device_ids.iter_mut().enumerate() {
                *id = if i % 2 == 0 {
                    gpu_ids[(i / 2) % gpu_ids.len()]
                } else {
                    gpu(other.wrapping_add(i as u32))
                };
            }
            // The kernel reads at most 1024 ids, so this buffer is always large enough; a
            // null pointer stays null.
            if a.device_ids_array_ptr != 0 {
                a.device_ids_array_ptr = device_ids.as_mut_ptr() as usize as u64;
            }
            write_struct(bytes, a);
        }
        _ => {}
    }
}

/// Records the ids, handles and offsets a successful `request` returned.
fn learn(request: u64, bytes: &mut [u8], learnt: &mut Learnt) {
    match crate::ioctl::known_request(request).ok() {
        Some(KfdIoctl::AllocMemoryOfGpu) => {
            let a: AllocMemoryOfGpuArgs = read_struct(bytes);
            learnt.handles.push(a.handle);
            learnt.offsets.push(a.mmap_offset);
        }
        Some(KfdIoctl::CreateQueue) => {
            let a: CreateQueueArgs = read_struct(bytes);
            learnt.queue_ids.push(a.queue_id);
            learnt.offsets.push(a.doorbell_offset);
        }
        Some(KfdIoctl::CreateEvent) => {
            let a: CreateEventArgs = read_struct(bytes);
            learnt.event_ids.push(a.event_id);
        }
        _ => {}
    }
}
