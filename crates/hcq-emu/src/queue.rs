//! Queues and doorbells: the doorbell pages mapped from `/dev/kfd`, which slot belongs to which
//! queue, and the wake-up channel between `write_doorbell` and a queue's command processor.

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;

use crate::gpu::EngineHold;
use crate::util::{lock, wait};

/// Bytes of one GPU's doorbell region (two pages, as the driver maps it).
pub const DOORBELL_REGION_BYTES: u64 = 0x2000;
/// Doorbell slots (8 bytes each) in a region.
pub const DOORBELL_SLOTS: u32 = (DOORBELL_REGION_BYTES / 8) as u32;
/// Where KFD places the gpu id in an mmap offset (`KFD_MMAP_GPU_ID_SHIFT`).
pub const MMAP_GPU_ID_SHIFT: u64 = 46;
/// Mask of the gpu id in an mmap offset, once shifted down.
pub const MMAP_GPU_ID_MASK: u64 = 0xffff;
/// Queues per GPU.
pub const MAX_QUEUES_PER_GPU: usize = 128;

#[derive(Debug, Default)]
struct Bell {
    wptr: u64,
    rung: bool,
    /// The command processor is blocked waiting for a ring: only then does a doorbell need
    /// the wake-up system call.
    sleeping: bool,
}

/// What a command processor shares with the rest of the kernel.
#[derive(Debug)]
pub(crate) struct QueueShared {
    bell: Mutex<Bell>,
    cv: Condvar,
    stop: Arc<AtomicBool>,
    /// Its GPU's engine hold: a doorbell rung while held wakes nobody until the release.
    hold: Arc<EngineHold>,
}

impl QueueShared {
    /// A queue of the GPU whose engines `hold` holds.
    pub fn new(hold: &Arc<EngineHold>) -> Arc<QueueShared> {
        let q = Arc::new(QueueShared {
            bell: Mutex::default(),
            cv: Condvar::new(),
            stop: Arc::default(),
            hold: Arc::clone(hold),
        });
        hold.register(&q);
        q
    }

    /// Wakes the command processor if a doorbell rang while it slept (after a hold).
    pub fn wake_if_rung(&self) {
        let b = lock(&self.bell);
        if b.rung && b.sleeping {
            self.cv.notify_all();
        }
    }

    /// The doorbell was written with `wptr`.
    pub fn ring(&self, wptr: u64) {
        let mut b = lock(&self.bell);
        b.wptr = wptr;
        b.rung = true;
        let sleeping = b.sleeping;
        drop(b);
        // Checked after `rung` is published: a release that missed it sees `rung` set.
        if sleeping && !self.hold.is_held() {
            self.cv.notify_all();
        }
    }

    /// Asks the command processor to stop.
    pub fn stop(&self) {
        self.stop.store(true, Ordering::SeqCst);
        let _g = lock(&self.bell);
        self.cv.notify_all();
    }

    pub fn stopped(&self) -> bool {
        self.stop.load(Ordering::SeqCst)
    }

    /// The flag a running dispatch watches, so that stopping the queue preempts its waves.
    pub fn stop_flag(&self) -> Arc<AtomicBool> {
        self.stop.clone()
    }

    /// Blocks until the doorbell rings (returns the written value) or the queue stops (`None`).
    pub fn next(&self) -> Option<u64> {
        let mut b = lock(&self.bell);
        loop {
            if self.stopped() {
                return None;
            }
            if b.rung {
                b.rung = false;
                return Some(b.wptr);
            }
            b.sleeping = true;
            b = wait(&self.cv, b);
            b.sleeping = false;
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
}

#[derive(Debug)]
struct DoorbellMapping {
    gpu: usize,
    base: u64,
    len: u64,
}

#[derive(Debug, Default)]
struct DoorbellState {
    mappings: Vec<DoorbellMapping>,
    slots: HashMap<(usize, u32), Arc<QueueShared>>,
}

/// Doorbell pages and slot owners.
#[derive(Debug, Default)]
pub(crate) struct Doorbells {
    state: Mutex<DoorbellState>,
}

impl Doorbells {
    /// A doorbell region of `gpu` is mapped at `[base, base + len)`.
    pub fn add_mapping(&self, gpu: usize, base: u64, len: u64) {
        lock(&self.state)
            .mappings
            .push(DoorbellMapping { gpu, base, len });
    }

    /// Forgets doorbell mappings overlapping `[start, end)` (about to be unmapped/replaced).
    pub fn remove_overlapping(&self, start: u64, end: u64) {
        lock(&self.state)
            .mappings
            .retain(|m| m.base + m.len <= start || end <= m.base);
    }

    /// Doorbell regions mapped into the process.
    pub fn mapping_count(&self) -> usize {
        lock(&self.state).mappings.len()
    }

    /// Smallest free slot on `gpu`.
    pub fn free_slot(&self, gpu: usize) -> Option<u32> {
        let st = lock(&self.state);
        (0..DOORBELL_SLOTS).find(|s| !st.slots.contains_key(&(gpu, *s)))
    }

    pub fn bind(&self, gpu: usize, slot: u32, q: Arc<QueueShared>) {
        lock(&self.state).slots.insert((gpu, slot), q);
    }

    pub fn unbind(&self, gpu: usize, slot: u32) {
        lock(&self.state).slots.remove(&(gpu, slot));
    }

    /// A 64-bit store to a doorbell: stored in the page if `ptr` is a slot of a mapped doorbell
    /// page, and handed to the queue owning that slot. Stores anywhere else are dropped.
    pub fn write(&self, ptr: *mut u64, value: u64) {
        let p = ptr as usize as u64;
        let st = lock(&self.state);
        let Some(m) = st
            .mappings
            .iter()
            .find(|m| m.base <= p && p.checked_add(8).is_some_and(|e| e <= m.base + m.len))
        else {
            return;
        };
        if (p - m.base) % 8 != 0 {
            return;
        }
        // SAFETY: `ptr` is an 8-byte aligned slot (base is page aligned, offset checked) inside a
        // doorbell page this kernel mapped and still has registered; unregistering happens under
        // this lock before the page is unmapped, so it is mapped for the store.
        unsafe { ptr.write_volatile(value) };
        let slot = ((p - m.base) / 8) as u32;
        let queue = st.slots.get(&(m.gpu, slot)).cloned();
        drop(st);
        if let Some(q) = queue {
            q.ring(value);
        }
    }
}
