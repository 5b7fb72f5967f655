//! [`AmdDriver`]: the process's state for one kernel (real or emulated), shared by every
//! device opened from it: `/dev/kfd`, the GPU list, the render nodes, the signal and event
//! pages and the exception events.

use crate::device::lock;
use crate::kfd::{Kfd, Release};
use crate::memory::{AllocFlags, GpuMemory, MemoryKind};
use crate::signal::{ExceptionEvents, GpuException, Signal};
use crate::topology::{self, GpuNode};
use hcq_amd_sys::seam::{Fd, Syscalls};
use hcq_amd_sys::signal::{AmdSignal, SIGNAL_SIZE};
use hcq_core::{Error, Result};
use std::sync::{Arc, Mutex};
use std::time::Duration;

const SIGNAL_COUNT: usize = 16384;
const EVENT_PAGE_BYTES: u64 = 0x8000;

/// How long a wait may take: `HCQ_WAIT_TIMEOUT_MS`, default 30 s. Unset or empty gives the
/// default; anything but a whole number of milliseconds from 1 up is an error naming it.
pub fn wait_timeout() -> Result<Duration> {
    wait_timeout_from(std::env::var("HCQ_WAIT_TIMEOUT_MS").ok().as_deref())
}

fn wait_timeout_from(value: Option<&str>) -> Result<Duration> {
    let Some(text) = value.map(str::trim).filter(|v| !v.is_empty()) else {
        return Ok(Duration::from_millis(30_000));
    };
    text.parse::<u64>()
        .ok()
        .filter(|&ms| ms > 0 && text.bytes().all(|b| b.is_ascii_digit()))
        .map(Duration::from_millis)
        .ok_or_else(|| {
            Error::InvalidArgument(format!(
                "HCQ_WAIT_TIMEOUT_MS={text:?} is not valid: expected a whole number of \
                 milliseconds, at least 1"
            ))
        })
}

/// Pages every device of the process shares: signals and the event page.
struct SharedPages {
    signals: GpuMemory,
    events: GpuMemory,
    /// Whether KFD has taken `events` as the process's event page (done once, by the first
    /// signal event created).
    event_page_set: bool,
    free_slots: Vec<usize>,
}

/// A signal of a device, with its slot and event given back to the driver when dropped.
pub(crate) struct OwnedSignal {
    signal: Signal,
    slot: usize,
    driver: Arc<AmdDriver>,
}

impl std::ops::Deref for OwnedSignal {
    type Target = Signal;
    fn deref(&self) -> &Signal {
        &self.signal
    }
}

impl Drop for OwnedSignal {
    fn drop(&mut self) {
        // SAFETY: destroying an event releases no memory.
        unsafe {
            self.driver.kfd.release(vec![Release::DestroyEvent {
                event_id: self.signal.event_id,
            }])
        };
        if let Some(pages) = lock(&self.driver.shared).as_mut() {
            pages.free_slots.push(self.slot);
        }
    }
}

/// The process's connection to one kernel (real or emulated): `/dev/kfd`, the GPU list, the
/// shared signal and event pages, and the exception events.
pub struct AmdDriver {
    /// The open `/dev/kfd`, shared by every device and stream of this driver.
    pub kfd: Arc<Kfd>,
    /// The GPU nodes of the KFD topology, in node order (the CPU node left out): `amd:N` is
    /// the N-th, whether hcq can drive it or not ([`GpuNode::unsupported`]).
    pub gpus: Vec<GpuNode>,
    /// Prefix of device names: `amd` or `amd-emu`.
    pub prefix: String,
    /// Whether the kernel behind the seam is the emulated one (for names and reports only:
    /// the driver's code is the same).
    pub emulated: bool,
    /// The KFD ioctl interface version (major, minor), asked once at open.
    pub kfd_version: (u32, u32),
    shared: Mutex<Option<SharedPages>>,
    exceptions: Mutex<Option<Arc<ExceptionEvents>>>,
    /// Exceptions seen by any wait, not yet reported to their device.
    pending: Mutex<Vec<GpuException>>,
    /// Render-node descriptors by GPU, opened and bound with `acquire_vm` once per process:
    /// KFD ties a process's GPU VM to one DRM file and refuses another.
    render_nodes: Mutex<Vec<(u32, Fd)>>,
}

/// The KFD version from which the driver makes the `RUNTIME_ENABLE` handshake (tinygrad's
/// bound; the call exists since 1.13).
const RUNTIME_ENABLE_SINCE: (u32, u32) = (1, 14);

/// The oldest KFD the driver runs on, and what it needs of that version. Every ioctl it calls
/// unconditionally is already in upstream KFD 1.1 (Linux 4.19's `kfd_ioctl.h` has `ACQUIRE_VM`
/// and the GPU memory calls under 1.1: they came without a version bump; `AVAILABLE_MEMORY`,
/// 1.9, is optional, and `RUNTIME_ENABLE` only made from 1.14), so the version number alone
/// cannot tell a 1.1 that has them from an earlier 1.1 that does not, and 1.2 was the
/// out-of-tree driver's, whose ioctl numbers differ (upstream went from 1.1 to 1.3). What settles it is a behaviour: the signals, the event page and the rings are GTT
/// memory allocated with `KFD_IOC_ALLOC_MEM_FLAGS_UNCACHED`, which the GPU must not cache
/// while the host polls them. That flag was added to `kfd_ioctl.h` in the last change before
/// the bump to 1.4 (February and March 2021; Linux 5.13); an older KFD does not know it.
pub const OLDEST_KFD: (u32, u32) = (1, 4);

/// Refuses a KFD interface hcq cannot drive, saying why.
fn check_kfd_version(major: u32, minor: u32) -> Result<()> {
    let (want_major, want_minor) = OLDEST_KFD;
    if major != want_major {
        return Err(Error::Unsupported(format!(
            "KFD {major}.{minor} is not the KFD interface hcq is written for \
             ({want_major}.{want_minor} or a later {want_major}.x)"
        )));
    }
    if minor < want_minor {
        return Err(Error::Unsupported(format!(
            "KFD {major}.{minor} is older than {want_major}.{want_minor}, which hcq needs for \
             AMDKFD_IOC_ALLOC_MEMORY_OF_GPU's UNCACHED flag (its signals, event page and rings \
             are memory the GPU must not cache): the kernel driver is too old (Linux 5.13 or \
             later, or a current amdgpu-dkms, has it)"
        )));
    }
    Ok(())
}

impl AmdDriver {
    /// Opens `/dev/kfd` through `kernel` and reads its GPUs from the topology. Devices are
    /// opened from it one by one ([`AmdDevice::open`](crate::AmdDevice::open)).
    pub fn new(kernel: Arc<dyn Syscalls>, prefix: &str, emulated: bool) -> Result<Arc<AmdDriver>> {
        let gpus = topology::gpu_nodes(kernel.as_ref())?;
        let kfd = Kfd::open(kernel)?;
        let v = kfd.get_version()?;
        check_kfd_version(v.major_version, v.minor_version)?;
        // The runtime handshake of KFD 1.14 and later, before any queue exists. Upstream Linux
        // works without it; ROCm 7's kernel driver did not let tinygrad run until it made this
        // call (mode 0, no debugging: its PR #12502). Upstream accepts mode 0 whatever state
        // the process is in.
        if (v.major_version, v.minor_version) >= RUNTIME_ENABLE_SINCE {
            kfd.runtime_enable(0)?;
        }
        tracing::info!(
            target: "hcq::device",
            "{prefix}: KFD {}.{}, {} GPU(s){}",
            v.major_version,
            v.minor_version,
            gpus.len(),
            gpus.iter()
                .map(|g| match g.unsupported {
                    None => format!(" {} (gpu_id {})", g.arch, g.gpu_id),
                    Some(_) => format!(" {} (gpu_id {}, not usable)", g.arch, g.gpu_id),
                })
                .collect::<String>()
        );
        Ok(Arc::new(AmdDriver {
            kfd: Arc::new(kfd),
            gpus,
            prefix: prefix.to_string(),
            emulated,
            kfd_version: (v.major_version, v.minor_version),
            shared: Mutex::new(None),
            exceptions: Mutex::new(None),
            pending: Mutex::new(Vec::new()),
            render_nodes: Mutex::new(Vec::new()),
        }))
    }

    /// The render node of `node`, opened and bound to this process's VM on first use.
    pub(crate) fn render_node(&self, node: &GpuNode) -> Result<Fd> {
        let mut nodes = lock(&self.render_nodes);
        if let Some(&(_, fd)) = nodes.iter().find(|(id, _)| *id == node.gpu_id) {
            return Ok(fd);
        }
        let path = format!("/dev/dri/renderD{}", node.prop("drm_render_minor")?);
        let fd = self.kfd.open_node(&path)?;
        if let Err(e) = self.kfd.acquire_vm(fd, node.gpu_id) {
            self.kfd.kernel.close(fd);
            return Err(e);
        }
        nodes.push((node.gpu_id, fd));
        Ok(fd)
    }

    /// Takes a signal slot, creating the shared pages on the first device that asks.
    pub(crate) fn new_signal(
        self: &Arc<Self>,
        drm_fd: Fd,
        node: &GpuNode,
        name: &str,
    ) -> Result<OwnedSignal> {
        let mut shared = lock(&self.shared);
        if shared.is_none() {
            let uncached = AllocFlags {
                uncached: true,
                public: false,
            };
            let signals = GpuMemory::alloc(
                &self.kfd,
                drm_fd,
                node.gpu_id,
                name,
                (SIGNAL_SIZE * SIGNAL_COUNT) as u64,
                MemoryKind::Gtt,
                uncached,
            )?;
            let events = GpuMemory::alloc(
                &self.kfd,
                drm_fd,
                node.gpu_id,
                name,
                EVENT_PAGE_BYTES,
                MemoryKind::Gtt,
                uncached,
            )?;
            *shared = Some(SharedPages {
                signals,
                events,
                event_page_set: false,
                free_slots: (0..SIGNAL_COUNT).rev().collect(),
            });
        }
        let pages = shared.as_mut().expect("initialised above");
        pages.signals.map_to(node.gpu_id)?;
        pages.events.map_to(node.gpu_id)?;
        let slot = pages
            .free_slots
            .pop()
            .ok_or_else(|| Error::Unsupported("out of signal slots".into()))?;
        let event = match self.kfd.create_event(
            hcq_amd_sys::kfd::EVENT_SIGNAL,
            if pages.event_page_set {
                0
            } else {
                pages.events.handle
            },
            true,
        ) {
            Ok(event) => event,
            Err(e) => {
                pages.free_slots.push(slot);
                return Err(e);
            }
        };
        if !pages.event_page_set {
            pages.event_page_set = true;
            pages.events.leave_to_kernel();
        }
        let mailbox = pages.events.va + event.event_slot_index as u64 * 8;
        // SAFETY: `slot` indexes a 64-byte slot inside the live signal page, handed out once.
        let signal = unsafe {
            Signal::new(
                (pages.signals.va as *mut AmdSignal).add(slot),
                event.event_id,
                mailbox,
            )
        };
        Ok(OwnedSignal {
            signal,
            slot,
            driver: self.clone(),
        })
    }

    pub(crate) fn exception_events(&self) -> Result<Arc<ExceptionEvents>> {
        let mut ex = lock(&self.exceptions);
        if let Some(e) = ex.as_ref() {
            return Ok(e.clone());
        }
        let e = Arc::new(ExceptionEvents::create(&self.kfd)?);
        *ex = Some(e.clone());
        Ok(e)
    }

    /// Moves exceptions for `gpu_id` out of the pending list.
    pub(crate) fn take_exceptions(&self, new: Vec<GpuException>, gpu_id: u32) -> Vec<GpuException> {
        let mut pending = lock(&self.pending);
        pending.extend(new);
        let (mine, rest): (Vec<_>, Vec<_>) = pending.drain(..).partition(|e| e.gpu_id == gpu_id);
        *pending = rest;
        mine
    }
}

impl Drop for AmdDriver {
    fn drop(&mut self) {
        // Every device is gone (each holds the driver): nothing waits on the exception events
        // or uses the shared pages. The render nodes go last, after the memory mapped
        // through them.
        if let Some(ex) = self
            .exceptions
            .get_mut()
            .unwrap_or_else(|e| e.into_inner())
            .take()
        {
            ex.destroy(&self.kfd);
        }
        drop(
            self.shared
                .get_mut()
                .unwrap_or_else(|e| e.into_inner())
                .take(),
        );
        let nodes = std::mem::take(
            self.render_nodes
                .get_mut()
                .unwrap_or_else(|e| e.into_inner()),
        );
        for (_, fd) in nodes {
            self.kfd.kernel.close(fd);
        }
    }
}

#[cfg(test)]
mod kfd_version_tests {
    use super::*;

    #[test]
    fn kfd_1_4_and_later_1_x_pass_and_others_say_what_is_missing() {
        for (major, minor) in [(1, 4), (1, 14), (1, 16), (1, 99)] {
            assert!(check_kfd_version(major, minor).is_ok(), "{major}.{minor}");
        }
        for minor in [0, 1, 2, 3] {
            let e = check_kfd_version(1, minor).unwrap_err();
            assert!(matches!(e, Error::Unsupported(_)), "{e:?}");
            let text = e.to_string();
            assert!(
                text.contains(&format!(
                    "KFD 1.{minor} is older than 1.4, which hcq needs for \
                     AMDKFD_IOC_ALLOC_MEMORY_OF_GPU's UNCACHED flag"
                )),
                "{text}"
            );
        }
        for (major, minor) in [(0, 20), (2, 0)] {
            let text = check_kfd_version(major, minor).unwrap_err().to_string();
            assert!(
                text.contains(&format!("KFD {major}.{minor} is not the KFD interface")),
                "{text}"
            );
        }
    }
}

#[cfg(test)]
mod wait_timeout_tests {
    use super::*;

    #[test]
    fn wait_timeout_takes_whole_milliseconds_and_names_bad_values() {
        assert_eq!(wait_timeout_from(None).unwrap(), Duration::from_secs(30));
        assert_eq!(
            wait_timeout_from(Some(" ")).unwrap(),
            Duration::from_secs(30)
        );
        assert_eq!(
            wait_timeout_from(Some("250")).unwrap(),
            Duration::from_millis(250)
        );
        for bad in [
            "abc",
            "0",
            "-5",
            "+5",
            "1.5",
            "1e3",
            "99999999999999999999999",
        ] {
            let e = wait_timeout_from(Some(bad)).unwrap_err();
            assert!(matches!(e, Error::InvalidArgument(_)), "{bad}: {e}");
            let text = e.to_string();
            assert!(
                text.contains("HCQ_WAIT_TIMEOUT_MS") && text.contains(bad),
                "{text}"
            );
        }
    }
}
