//! KFD events: signal events (each with a mailbox slot in the event page), memory-exception
//! events and hardware-exception events. `WAIT_EVENTS` blocks on a condition variable.
//!
//! Mailbox slots follow the kernel's convention: a slot holds `u64::MAX` while its event is
//! unsignaled; anything else (the GPU writes the event id) means signaled.

use std::collections::BTreeMap;
use std::io;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use hcq_amd_sys::kfd::{
    CreateEventArgs, EventData, EventDataUnion, HwExceptionData, MemoryExceptionData,
    MemoryExceptionFailure, SignalEventData, EVENT_HW_EXCEPTION, EVENT_MEMORY, EVENT_SIGNAL,
    SIGNAL_EVENT_LIMIT, WAIT_RESULT_COMPLETE, WAIT_RESULT_FAIL, WAIT_RESULT_TIMEOUT,
};

use crate::memory::Storage;
use crate::util::{errno, lock, wait, wait_timeout};

/// Value of an unsignaled mailbox slot.
pub const UNSIGNALED_SLOT: u64 = u64::MAX;
/// Non-signal events get ids from here on.
pub const FIRST_NONSIGNAL_EVENT_ID: u32 = SIGNAL_EVENT_LIMIT;
/// `event_page_offset` returned for signal events (`KFD_MMAP_TYPE_EVENTS`).
pub const MMAP_TYPE_EVENTS: u64 = 2 << 62;
/// `WAIT_EVENTS` timeout meaning "forever".
pub const TIMEOUT_INFINITE: u32 = u32::MAX;
/// `hw_exception_data.reset_type` reported: the faulting work was dropped, the engine goes on.
pub const HW_EXCEPTION_PER_ENGINE_RESET: u32 = 1;
/// `hw_exception_data.reset_cause`: a GPU hang (the only cause the emulator has).
pub const HW_EXCEPTION_GPU_HANG: u32 = 0;

struct Event {
    kind: u32,
    auto_reset: bool,
    signaled: bool,
    /// How many times it was signaled, from 1 (KFD 1.14's event age: 0 means "untracked" to
    /// `WAIT_EVENTS`, and a wrapping count skips 0 and 1).
    age: u64,
    data: EventDataUnion,
}

impl Event {
    fn signal(&mut self) {
        self.signaled = true;
        self.age = match self.age.wrapping_add(1) {
            0 => 2,
            a => a,
        };
    }
}

struct EventPage {
    handle: u64,
    storage: Arc<Storage>,
    slots: u32,
}

impl EventPage {
    fn slot(&self, id: u32) -> Option<&AtomicU64> {
        if id >= self.slots {
            return None;
        }
        let addr = self.storage.base() + 8 * u64::from(id);
        // SAFETY: the slot lies inside the page's storage (`id < slots` and `slots * 8 <=
        // len`), which is 8-byte aligned (page aligned) host memory kept mapped while `self`
        // holds the storage. The GPU side writes mailboxes with atomic stores.
        Some(unsafe { AtomicU64::from_ptr(addr as usize as *mut u64) })
    }
}

#[derive(Default)]
struct State {
    events: BTreeMap<u32, Event>,
    page: Option<EventPage>,
    next_nonsignal: u32,
}

/// The process's events.
#[derive(Default)]
pub(crate) struct Events {
    state: Mutex<State>,
    cv: Condvar,
    /// End-of-pipe interrupts whose context named no signal event: each made the kernel scan
    /// every signal event's mailbox slot.
    event_scans: std::sync::atomic::AtomicU64,
}

impl std::fmt::Debug for Events {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Events")
            .field("count", &lock(&self.state).events.len())
            .finish()
    }
}

impl Events {
    /// End-of-pipe interrupts so far whose context named no signal event.
    pub fn event_scans(&self) -> u64 {
        self.event_scans.load(Ordering::Relaxed)
    }

    /// `CREATE_EVENT`. `page` is the BO named by a non-zero `event_page_offset`.
    pub fn create(
        &self,
        args: &mut CreateEventArgs,
        page: Option<(u64, Arc<Storage>)>,
    ) -> io::Result<()> {
        let mut st = lock(&self.state);
        if let Some((handle, storage)) = page {
            match &st.page {
                Some(p) if p.handle != handle => return Err(errno(libc::EINVAL)),
                Some(_) => {}
                None => {
                    let slots = (storage.len() / 8).min(u64::from(SIGNAL_EVENT_LIMIT)) as u32;
                    let page = EventPage {
                        handle,
                        storage,
                        slots,
                    };
                    // Slots of events created before the page existed start unsignaled.
                    for (&id, ev) in st.events.iter() {
                        if ev.kind == EVENT_SIGNAL {
                            if let Some(s) = page.slot(id) {
                                s.store(UNSIGNALED_SLOT, Ordering::Release);
                            }
                        }
                    }
                    st.page = Some(page);
                }
            }
        }
        let kind = args.event_type;
        let id = match kind {
            EVENT_SIGNAL => {
                let limit = st.page.as_ref().map_or(SIGNAL_EVENT_LIMIT, |p| p.slots);
                let id = (1..limit)
                    .find(|id| !st.events.contains_key(id))
                    .ok_or_else(|| errno(libc::ENOSPC))?;
                if let Some(s) = st.page.as_ref().and_then(|p| p.slot(id)) {
                    s.store(UNSIGNALED_SLOT, Ordering::Release);
                }
                args.event_page_offset = MMAP_TYPE_EVENTS;
                args.event_slot_index = id;
                id
            }
            EVENT_HW_EXCEPTION | EVENT_MEMORY => {
                let next = st.next_nonsignal.max(FIRST_NONSIGNAL_EVENT_ID);
                st.next_nonsignal = next.checked_add(1).ok_or_else(|| errno(libc::ENOSPC))?;
                next
            }
            _ => return Err(errno(libc::EINVAL)),
        };
        st.events.insert(
            id,
            Event {
                kind,
                auto_reset: args.auto_reset != 0,
                signaled: false,
                age: 1,
                data: EventDataUnion::default(),
            },
        );
        args.event_id = id;
        Ok(())
    }

    /// `DESTROY_EVENT`; waiters on it return `WAIT_RESULT_FAIL`.
    pub fn destroy(&self, id: u32) -> io::Result<()> {
        let removed = lock(&self.state).events.remove(&id);
        self.cv.notify_all();
        removed.map(|_| ()).ok_or_else(|| errno(libc::EINVAL))
    }

    /// `SET_EVENT` (signal events only).
    pub fn set(&self, id: u32) -> io::Result<()> {
        let mut st = lock(&self.state);
        match st.events.get_mut(&id) {
            Some(ev) if ev.kind == EVENT_SIGNAL => ev.signal(),
            _ => return Err(errno(libc::EINVAL)),
        }
        drop(st);
        self.cv.notify_all();
        Ok(())
    }

    /// `RESET_EVENT`.
    pub fn reset(&self, id: u32) -> io::Result<()> {
        let mut st = lock(&self.state);
        let ev = st.events.get_mut(&id).ok_or_else(|| errno(libc::EINVAL))?;
        ev.signaled = false;
        Ok(())
    }

    /// An end-of-pipe interrupt carrying `int_ctx`: signals that event if it is a signal
    /// event; otherwise signals every signal event whose mailbox slot was written.
    pub fn interrupt(&self, int_ctx: u32) {
        let mut st = lock(&self.state);
        let st = &mut *st;
        let mut woke = false;
        match st.events.get_mut(&int_ctx) {
            Some(ev) if ev.kind == EVENT_SIGNAL => {
                ev.signal();
                if let Some(s) = st.page.as_ref().and_then(|p| p.slot(int_ctx)) {
                    s.store(UNSIGNALED_SLOT, Ordering::Release);
                }
                woke = true;
            }
            _ => {
                self.event_scans.fetch_add(1, Ordering::Relaxed);
                if let Some(page) = &st.page {
                    for (&id, ev) in st.events.iter_mut() {
                        if ev.kind != EVENT_SIGNAL {
                            continue;
                        }
                        if let Some(s) = page.slot(id) {
                            if s.load(Ordering::Acquire) != UNSIGNALED_SLOT {
                                s.store(UNSIGNALED_SLOT, Ordering::Release);
                                ev.signal();
                                woke = true;
                            }
                        }
                    }
                }
            }
        }
        if woke {
            self.cv.notify_all();
        }
    }

    fn signal_kind(&self, kind: u32, data: EventDataUnion) {
        let mut st = lock(&self.state);
        for ev in st.events.values_mut().filter(|e| e.kind == kind) {
            ev.signal();
            ev.data = data;
        }
        drop(st);
        self.cv.notify_all();
    }

    /// A GPU VM fault at `va`: signals the memory-exception events with the faulting page's
    /// address, as KFD does (it learns the page, not the byte, from the fault interrupt; the
    /// emulator's fault report keeps the exact address).
    pub fn memory_exception(&self, gpu_id: u32, va: u64) {
        let va = va & !0xfff;
        let data = EventDataUnion {
            memory_exception_data: MemoryExceptionData {
                failure: MemoryExceptionFailure {
                    not_present: 1,
                    read_only: 0,
                    no_execute: 0,
                    imprecise: 0,
                },
                va,
                gpu_id,
                error_type: 0,
            },
        };
        self.signal_kind(EVENT_MEMORY, data);
    }

    /// A fault that is not a VM fault: signals the hardware-exception events.
    pub fn hw_exception(&self, gpu_id: u32) {
        let data = EventDataUnion {
            hw_exception_data: HwExceptionData {
                reset_type: HW_EXCEPTION_PER_ENGINE_RESET,
                reset_cause: HW_EXCEPTION_GPU_HANG,
                memory_lost: 0,
                gpu_id,
            },
        };
        self.signal_kind(EVENT_HW_EXCEPTION, data);
    }

    /// `WAIT_EVENTS`: returns the wait result; fills in exception data of the events that
    /// fired. An auto-reset event is reset when this wait consumes it. A signal event given
    /// a non-zero `last_event_age` fires at once if it was signaled since that age (even if a
    /// wait consumed the signal), and gets its current age back when it fires.
    pub fn wait(&self, data: &mut [EventData], all: bool, timeout_ms: u32) -> io::Result<u32> {
        let deadline = (timeout_ms != TIMEOUT_INFINITE)
            .then(|| Instant::now() + Duration::from_millis(u64::from(timeout_ms)));
        let mut st = lock(&self.state);
        if data.iter().any(|d| !st.events.contains_key(&d.event_id)) {
            return Err(errno(libc::EINVAL));
        }
        let mut activated = vec![false; data.len()];
        // SAFETY: every member of the union is plain integers, so any bytes read as the
        // signal member are a value.
        let seen_ages: Vec<u64> = data
            .iter()
            .map(|d| unsafe { d.data.signal_event_data.last_event_age })
            .collect();
        let mut first_pass = true;
        loop {
            for (i, d) in data.iter_mut().enumerate() {
                let Some(ev) = st.events.get_mut(&d.event_id) else {
                    return Ok(WAIT_RESULT_FAIL);
                };
                if activated[i] {
                    continue;
                }
                let aged = ev.kind == EVENT_SIGNAL && seen_ages[i] != 0;
                if ev.signaled {
                    activated[i] = true;
                    if ev.auto_reset {
                        ev.signaled = false;
                    }
                }
                // Ages are compared once, when the wait starts, as KFD does.
                if first_pass && aged && ev.age != seen_ages[i] {
                    activated[i] = true;
                }
                if activated[i] {
                    if ev.kind == EVENT_MEMORY || ev.kind == EVENT_HW_EXCEPTION {
                        d.data = ev.data;
                    } else if aged {
                        d.data.signal_event_data = SignalEventData {
                            last_event_age: ev.age,
                        };
                    }
                }
            }
            first_pass = false;
            let done = if all {
                activated.iter().all(|&a| a)
            } else {
                activated.iter().any(|&a| a)
            };
            if done {
                return Ok(WAIT_RESULT_COMPLETE);
            }
            match deadline {
                None => st = wait(&self.cv, st),
                Some(deadline) => {
                    let now = Instant::now();
                    if now >= deadline {
                        return Ok(WAIT_RESULT_TIMEOUT);
                    }
                    st = wait_timeout(&self.cv, st, deadline - now);
                }
            }
        }
    }
}

impl Events {
    /// Live events, and whether the event page is set.
    pub fn counts(&self) -> (usize, bool) {
        let st = lock(&self.state);
        (st.events.len(), st.page.is_some())
    }

    /// Destroys every event and forgets the event page (the process's KFD context ends);
    /// waiters return `WAIT_RESULT_FAIL`.
    pub fn clear(&self) {
        let mut st = lock(&self.state);
        st.events.clear();
        st.page = None;
        st.next_nonsignal = 0;
        drop(st);
        self.cv.notify_all();
    }

    /// Whether the BO `handle` is the event page.
    pub fn is_page(&self, handle: u64) -> bool {
        lock(&self.state)
            .page
            .as_ref()
            .is_some_and(|p| p.handle == handle)
    }
}
