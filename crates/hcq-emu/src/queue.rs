//! Queues and doorbells: each GPU's doorbell memory, its mappings into the process, which slot
//! belongs to which queue, and how a queue's engine learns that its doorbell was written.
//!
//! The doorbell memory of a GPU is one shared anonymous mapping per KFD context, which the
//! emulator keeps mapped for itself ([`DoorbellRegion`]); every `mmap` of the GPU's doorbell
//! offset duplicates it (`mremap` with an old size of 0), so every mapping aliases the same
//! pages, as every mapping of a doorbell BAR does on hardware. An engine watches its own slot
//! there ([`QueueShared::next`]): a plain store from any thread, through any mapping, is a
//! doorbell. [`Doorbells::write`] (the seam's `write_doorbell`) stores the same way and also
//! wakes the engine at once.

use std::collections::BTreeMap;
use std::io;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crate::gpu::EngineHold;
use crate::util::{errno, lock, wait_timeout};

/// Bytes of one GPU's doorbell region (two pages, as the driver maps it).
pub const DOORBELL_REGION_BYTES: u64 = hcq_amd_sys::regs::DOORBELL_REGION_BYTES;
/// Doorbell slots (8 bytes each) in a region.
pub const DOORBELL_SLOTS: u32 = (DOORBELL_REGION_BYTES / 8) as u32;
/// Where KFD places the gpu id in an mmap offset (`KFD_MMAP_GPU_ID_SHIFT`).
pub const MMAP_GPU_ID_SHIFT: u64 = 46;
/// Mask of the gpu id in an mmap offset, once shifted down.
pub const MMAP_GPU_ID_MASK: u64 = 0xffff;
/// Queues per GPU.
pub const MAX_QUEUES_PER_GPU: usize = 128;

/// How an idle engine polls its doorbell slot. Right after work it spins (a client that
/// submits again within microseconds, as a launch loop does, is served without a context
/// switch), then yields the core between polls (cheap when other threads want the core, and
/// still a poll every few microseconds when they do not), then sleeps between polls, each
/// sleep twice the last, up to [`POLL_SLEEP_MAX`].
///
/// The bound decides both costs of an idle queue: a store into the slot after a long idle is
/// seen within about 1 ms (plus the scheduler's timer slack), and an idle engine wakes 1000
/// times a second, a few microseconds of CPU each, well under 1% of a core per queue. 1 ms is
/// below what a program waiting for a GPU result notices (a launch on the emulated GPU takes
/// longer), while a 100 µs bound would cost ten times the CPU for every idle queue of every
/// program. The wait after activity stays proportional to how long the queue was idle: the
/// sleep doubles from [`POLL_SLEEP_MIN`], so a doorbell after an idle time `t` is seen within
/// about `t` (never worse than the bound). `write_doorbell` wakes a sleeping engine at once,
/// so our own driver never waits for a poll.
const POLL_SPIN: Duration = Duration::from_micros(20);
/// End of the yielding phase, measured from the start of the wait.
const POLL_YIELD: Duration = Duration::from_micros(200);
/// First and longest sleep between polls of an idle doorbell slot.
const POLL_SLEEP_MIN: Duration = Duration::from_micros(50);
const POLL_SLEEP_MAX: Duration = Duration::from_millis(1);

/// One GPU's doorbell memory in one KFD context: a shared anonymous mapping the emulator
/// keeps for itself and duplicates into the process for every doorbell `mmap`.
#[derive(Debug)]
pub(crate) struct DoorbellRegion {
    /// The emulator's own view, `DOORBELL_REGION_BYTES` long and page aligned.
    view: usize,
    /// Tells this context's region from an earlier one's (whose process mappings may stay).
    generation: u64,
}

impl DoorbellRegion {
    fn new(generation: u64) -> io::Result<DoorbellRegion> {
        // SAFETY: a fresh anonymous mapping at an address the kernel picks; nothing else can
        // refer to it yet.
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                DOORBELL_REGION_BYTES as usize,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        if p == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        Ok(DoorbellRegion {
            view: p as usize,
            generation,
        })
    }

    /// The slot `index` (below [`DOORBELL_SLOTS`]) in the emulator's own view.
    fn slot(&self, index: u32) -> &AtomicU64 {
        assert!(index < DOORBELL_SLOTS, "doorbell slot {index} out of range");
        // SAFETY: `view` is a page-aligned mapping of DOORBELL_REGION_BYTES that lives as long
        // as `self`, so slot `index` is an aligned, mapped u64. The process stores into the
        // same pages through its own mappings, so every access here is atomic.
        unsafe { AtomicU64::from_ptr((self.view as *mut u64).add(index as usize)) }
    }

    /// Maps the first `len` bytes (a whole number of pages, at most the region) of this
    /// region into the process: at `at` when given (replacing what was there, as `MAP_FIXED`
    /// does), else where the kernel chooses.
    ///
    /// # Safety
    /// With `at`, the caller must own the replaced range.
    pub unsafe fn map_into_process(&self, at: Option<u64>, len: u64) -> io::Result<u64> {
        if len == 0 || len > DOORBELL_REGION_BYTES {
            return Err(errno(libc::EINVAL));
        }
        // SAFETY: the view is a live shared mapping of at least `len` bytes; the caller owns
        // the replaced range.
        unsafe { crate::memory::alias_shared(self.view as u64, len, at) }
    }
}

impl Drop for DoorbellRegion {
    fn drop(&mut self) {
        // SAFETY: the view was mapped by `new` and is used only through `self`, which is going;
        // the process's own mappings of the pages are separate mappings and stay.
        unsafe {
            libc::munmap(
                self.view as *mut libc::c_void,
                DOORBELL_REGION_BYTES as usize,
            )
        };
    }
}

/// A queue's doorbell: one slot of its GPU's doorbell region.
#[derive(Debug, Clone)]
pub(crate) struct DoorbellSlot {
    region: Arc<DoorbellRegion>,
    index: u32,
}

impl DoorbellSlot {
    /// The value last stored in the slot, by anyone. Acquire: the ring contents the client
    /// wrote before its doorbell store are visible once the store is seen.
    fn load(&self) -> u64 {
        self.region.slot(self.index).load(Ordering::Acquire)
    }
}

/// What a command processor shares with the rest of the kernel.
#[derive(Debug)]
pub(crate) struct QueueShared {
    doorbell: DoorbellSlot,
    /// `write_doorbell` stored into the slot: look now, even if the value did not change.
    rung: AtomicBool,
    /// The engine is blocked in a timed wait for its doorbell: only then does a doorbell need
    /// the wake-up system call.
    sleeping: Mutex<bool>,
    /// `sleeping`'s value, readable without the lock: a doorbell that finds the engine awake
    /// (busy, or polling its slot) needs neither the lock nor a wake-up.
    asleep: AtomicBool,
    cv: Condvar,
    stop: Arc<AtomicBool>,
    /// Its GPU's engine hold: a doorbell rung while held wakes nobody until the release.
    hold: Arc<EngineHold>,
    /// Set by the stream fuzzer, whose engine is the only writer of its memory: a wait that
    /// does not hold at once never will, so the queue stops there instead of waiting for the
    /// harness's deadline.
    sole_writer: AtomicBool,
}

impl QueueShared {
    /// A queue of the GPU whose engines `hold` holds, watching `doorbell`.
    pub fn new(hold: &Arc<EngineHold>, doorbell: DoorbellSlot) -> Arc<QueueShared> {
        let q = Arc::new(QueueShared {
            doorbell,
            rung: AtomicBool::new(false),
            sleeping: Mutex::new(false),
            asleep: AtomicBool::new(false),
            cv: Condvar::new(),
            stop: Arc::default(),
            hold: Arc::clone(hold),
            sole_writer: AtomicBool::new(false),
        });
        hold.register(&q);
        q
    }

    /// Wakes the command processor if a doorbell rang while it slept (after a hold).
    pub fn wake_if_rung(&self) {
        let sleeping = lock(&self.sleeping);
        if *sleeping && self.rung.load(Ordering::SeqCst) {
            self.cv.notify_all();
        }
    }

    /// `write_doorbell` stored into this queue's slot: the engine looks at it now.
    fn ring(&self) {
        self.rung.store(true, Ordering::SeqCst);
        // The engine sets `asleep` (under its lock) before it checks `rung`, and both sides'
        // accesses are sequentially consistent: either it sees `rung` and does not wait, or
        // this sees `asleep`, and then takes the lock, which the engine holds until it waits.
        if self.asleep.load(Ordering::SeqCst) && !self.hold.is_held() {
            let _g = lock(&self.sleeping);
            self.cv.notify_all();
        }
    }

    /// Asks the command processor to stop.
    pub fn stop(&self) {
        self.stop.store(true, Ordering::SeqCst);
        let _g = lock(&self.sleeping);
        self.cv.notify_all();
    }

    /// Marks the engine as the only writer of the memory it waits on ([`QueueShared`]'s
    /// `sole_writer`).
    pub fn set_sole_writer(&self) {
        self.sole_writer.store(true, Ordering::Relaxed);
    }

    /// Whether the engine is the only writer of the memory it waits on.
    pub fn sole_writer(&self) -> bool {
        self.sole_writer.load(Ordering::Relaxed)
    }

    pub fn stopped(&self) -> bool {
        self.stop.load(Ordering::SeqCst)
    }

    /// The flag a running dispatch watches, so that stopping the queue preempts its waves.
    pub fn stop_flag(&self) -> Arc<AtomicBool> {
        self.stop.clone()
    }

    /// Whether the doorbell holds news for an engine that last took `seen` from it.
    fn rang(&self, seen: u64) -> bool {
        self.rung.swap(false, Ordering::SeqCst) || self.doorbell.load() != seen
    }

    /// Waits until the doorbell is written (returns the value in the slot) or the queue stops
    /// (`None`). `seen` is the value the engine took last: a store of any other value, or any
    /// `write_doorbell`, is a doorbell. Polls as the module's `POLL_*` constants describe.
    pub fn next(&self, seen: u64) -> Option<u64> {
        let idle_since = Instant::now();
        let mut sleep = POLL_SLEEP_MIN;
        loop {
            if self.stopped() {
                return None;
            }
            if self.rang(seen) {
                return Some(self.doorbell.load());
            }
            let idle = idle_since.elapsed();
            if idle < POLL_SPIN {
                std::hint::spin_loop();
                continue;
            }
            if idle < POLL_YIELD {
                std::thread::yield_now();
                continue;
            }
            let mut sleeping = lock(&self.sleeping);
            *sleeping = true;
            self.asleep.store(true, Ordering::SeqCst);
            let news =
                self.stopped() || self.rung.load(Ordering::SeqCst) || self.doorbell.load() != seen;
            if !news {
                sleeping = wait_timeout(&self.cv, sleeping, sleep);
            }
            *sleeping = false;
            self.asleep.store(false, Ordering::SeqCst);
            drop(sleeping);
            sleep = (sleep * 2).min(POLL_SLEEP_MAX);
        }
    }
}

/// A live queue.
#[derive(Debug)]
pub(crate) struct Queue {
    pub gpu: usize,
    pub slot: u32,
    pub shared: Arc<QueueShared>,
    pub thread: Option<JoinHandle<()>>,
    /// GPU addresses of the BOs the queue holds (Linux 6.12 rules): its ring, pointers, EOP
    /// buffer and context save area, which may not be unmapped while it lives.
    pub buffers: Vec<u64>,
    /// `queue_priority` as created (0..=15), and whether it is an SDMA queue.
    pub priority: u32,
    pub sdma: bool,
}

/// Every live queue, by queue id.
#[derive(Debug, Default)]
pub(crate) struct QueueTable {
    pub queues: BTreeMap<u32, Queue>,
}

impl QueueTable {
    /// Smallest unused queue id.
    pub fn free_id(&self) -> u32 {
        (0..)
            .find(|id| !self.queues.contains_key(id))
            .unwrap_or(u32::MAX)
    }

    pub fn count_on(&self, gpu: usize) -> usize {
        self.queues.values().filter(|q| q.gpu == gpu).count()
    }

    pub fn sdma_count_on(&self, gpu: usize) -> usize {
        self.queues
            .values()
            .filter(|q| q.gpu == gpu && q.sdma)
            .count()
    }
}

/// What is left of one doorbell `mmap` in the process (a partial `munmap` leaves a part).
#[derive(Debug, Clone, Copy)]
struct DoorbellMapping {
    gpu: usize,
    /// The region it maps ([`DoorbellRegion::generation`]).
    generation: u64,
    /// Where offset 0 of the region is (or was, if that page was unmapped since).
    origin: u64,
    start: u64,
    end: u64,
}

#[derive(Debug, Default)]
struct DoorbellState {
    mappings: Vec<DoorbellMapping>,
    /// This KFD context's region of each GPU (by index), created on first use.
    // Ordered maps: a doorbell looks up a handful of entries, faster than hashing the keys.
    regions: BTreeMap<usize, Arc<DoorbellRegion>>,
    slots: BTreeMap<(usize, u32), Arc<QueueShared>>,
    generations: u64,
}

impl DoorbellState {
    fn region(&mut self, gpu: usize) -> io::Result<Arc<DoorbellRegion>> {
        if let Some(r) = self.regions.get(&gpu) {
            return Ok(Arc::clone(r));
        }
        self.generations += 1;
        let r = Arc::new(DoorbellRegion::new(self.generations)?);
        self.regions.insert(gpu, Arc::clone(&r));
        Ok(r)
    }
}

/// Doorbell regions, their mappings in the process, and slot owners.
#[derive(Debug, Default)]
pub(crate) struct Doorbells {
    state: Mutex<DoorbellState>,
}

impl Doorbells {
    /// Maps `gpu`'s doorbell region (`len` bytes from its start) into the process, at `at`
    /// when given, and returns where.
    ///
    /// # Safety
    /// With `at`, the caller must own the replaced range.
    pub unsafe fn map(&self, gpu: usize, at: Option<u64>, len: u64) -> io::Result<u64> {
        let mut st = lock(&self.state);
        let region = st.region(gpu)?;
        if let Some(a) = at {
            remove_overlapping(&mut st.mappings, a, a.saturating_add(len));
        }
        // SAFETY: the caller's guarantee about `at`. Done under the lock, so `write` never
        // sees a mapping that is not in place yet.
        let p = unsafe { region.map_into_process(at, len) }?;
        st.mappings.push(DoorbellMapping {
            gpu,
            generation: region.generation,
            origin: p,
            start: p,
            end: p + len,
        });
        Ok(p)
    }

    /// Forgets the parts of doorbell mappings inside `[start, end)` (about to be unmapped or
    /// replaced).
    pub fn remove_overlapping(&self, start: u64, end: u64) {
        remove_overlapping(&mut lock(&self.state).mappings, start, end);
    }

    /// Whether a doorbell mapping overlaps `[start, end)`.
    pub fn overlaps(&self, start: u64, end: u64) -> bool {
        lock(&self.state)
            .mappings
            .iter()
            .any(|m| m.start < end && start < m.end)
    }

    /// Doorbell mappings (or parts of one) in the process.
    pub fn mapping_count(&self) -> usize {
        lock(&self.state).mappings.len()
    }

    /// Doorbell regions of the current KFD context.
    pub fn region_count(&self) -> usize {
        lock(&self.state).regions.len()
    }

    /// The KFD context ended (its queues are gone): its regions are released once the last
    /// engine lets go of them. The process's mappings stay, as mappings of nothing the
    /// emulator watches.
    pub fn end_context(&self) {
        let mut st = lock(&self.state);
        st.regions.clear();
        st.slots.clear();
    }

    /// Smallest free slot on `gpu`.
    pub fn free_slot(&self, gpu: usize) -> Option<u32> {
        let st = lock(&self.state);
        (0..DOORBELL_SLOTS).find(|s| !st.slots.contains_key(&(gpu, *s)))
    }

    /// Slot `index` of `gpu`'s region, set to 0 for a new queue (whose pointers start at 0).
    pub fn slot(&self, gpu: usize, index: u32) -> io::Result<DoorbellSlot> {
        if index >= DOORBELL_SLOTS {
            return Err(errno(libc::EINVAL));
        }
        let region = lock(&self.state).region(gpu)?;
        region.slot(index).store(0, Ordering::Release);
        Ok(DoorbellSlot { region, index })
    }

    pub fn bind(&self, gpu: usize, slot: u32, q: Arc<QueueShared>) {
        lock(&self.state).slots.insert((gpu, slot), q);
    }

    pub fn unbind(&self, gpu: usize, slot: u32) {
        lock(&self.state).slots.remove(&(gpu, slot));
    }

    /// `write_doorbell`: a 64-bit store to `ptr` if it is a slot of a mapped doorbell region,
    /// and a wake-up for the queue owning that slot. Stores anywhere else are dropped.
    pub fn write(&self, ptr: *mut u64, value: u64) {
        let p = ptr as usize as u64;
        let st = lock(&self.state);
        let Some(m) = st
            .mappings
            .iter()
            .find(|m| m.start <= p && p.checked_add(8).is_some_and(|e| e <= m.end))
        else {
            return;
        };
        if !(p - m.origin).is_multiple_of(8) {
            return;
        }
        // SAFETY: `ptr` is an 8-byte aligned slot (the origin is page aligned, the offset
        // checked) inside a doorbell mapping this kernel made and still has registered;
        // unregistering happens under this lock before the range is unmapped, so it is mapped
        // for the store. Engines and the process access these pages concurrently, atomically.
        unsafe { AtomicU64::from_ptr(ptr) }.store(value, Ordering::Release);
        let current = st
            .regions
            .get(&m.gpu)
            .is_some_and(|r| r.generation == m.generation);
        let slot = ((p - m.origin) / 8) as u32;
        // Rung under the lock, which spares cloning the queue's `Arc`: `ring` takes only the
        // queue's own lock, which nothing holds while it takes this one.
        if let Some(q) = st.slots.get(&(m.gpu, slot)).filter(|_| current) {
            q.ring();
        }
    }
}

/// Removes `[start, end)` from the mapped ranges in `mappings`, keeping what is left of each.
fn remove_overlapping(mappings: &mut Vec<DoorbellMapping>, start: u64, end: u64) {
    let mut kept = Vec::with_capacity(mappings.len() + 1);
    for &m in mappings.iter() {
        if m.end <= start || end <= m.start {
            kept.push(m);
            continue;
        }
        if m.start < start {
            kept.push(DoorbellMapping { end: start, ..m });
        }
        if end < m.end {
            kept.push(DoorbellMapping { start: end, ..m });
        }
    }
    *mappings = kept;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unmapping_part_of_a_doorbell_mapping_keeps_the_rest() {
        let m = DoorbellMapping {
            gpu: 0,
            generation: 1,
            origin: 0x10000,
            start: 0x10000,
            end: 0x12000,
        };
        let mut list = vec![m];
        remove_overlapping(&mut list, 0x10000, 0x11000);
        assert_eq!(list.len(), 1);
        assert_eq!(
            (list[0].origin, list[0].start, list[0].end),
            (0x10000, 0x11000, 0x12000)
        );
        remove_overlapping(&mut list, 0x11000, 0x12000);
        assert!(list.is_empty());
    }
}
