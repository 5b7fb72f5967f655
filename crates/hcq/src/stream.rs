//! Streams and events: several in-order queues on one device, and the points that order them.

use crate::{Arg, Buffer, Device, Error, LaunchOptions, Program, Queue, Result};
#[cfg(target_os = "linux")]
use hcq_amd::{AmdDevice, AmdEvent};
#[cfg(target_os = "macos")]
use hcq_metal::{ThreadSafeMetalDevice, ThreadSafeMetalEvent};
use std::fmt::Display;
use std::sync::Arc;
use std::time::Duration;

/// An in-order queue of work on a device, independent of the device's other streams (as a
/// CUDA or HIP stream): work queued on one runs in the order it was queued, and may overlap
/// work of another. [`Device::stream`] opens one; [`Device::default_stream`] is the device's
/// own queue, which [`Program::launch`], [`Buffer::copy_in`] and the other calls without a
/// stream use. An [`Event`] recorded on one stream and waited for by another orders them.
///
/// Buffers and programs belong to the device and are used on any of its streams. Memory of a
/// buffer dropped while several streams are open is reused only once every stream has
/// finished the work queued before the drop. [`Device::synchronize`] waits for every stream,
/// [`Stream::synchronize`] for one. [`crate::Graph::replay_on`] replays a graph on a
/// stream.
///
/// On AMD a stream is a compute queue of its own, with its own kernel-argument ring and
/// scratch memory; it copies on that queue (CP DMA), leaving the GPU's few copy-engine
/// queues to the device. On Metal it is an `MTLCommandQueue` of its own on the same
/// `MTLDevice`, and events are values of an `MTLSharedEvent`. Cloning is cheap; clones are the
/// same stream.
#[derive(Clone)]
pub struct Stream {
    device: Device,
    queue: StreamQueue,
}

#[derive(Clone)]
enum StreamQueue {
    /// The device's own queue.
    Default,
    #[cfg(target_os = "linux")]
    Amd(Arc<AmdDevice>),
    #[cfg(target_os = "macos")]
    Metal(Arc<ThreadSafeMetalDevice>),
}

impl std::fmt::Debug for Stream {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.queue {
            StreamQueue::Default => write!(f, "Stream(default of {})", self.device.name()),
            #[cfg(target_os = "linux")]
            StreamQueue::Amd(s) => write!(f, "Stream({})", s.name),
            #[cfg(target_os = "macos")]
            StreamQueue::Metal(s) => write!(f, "Stream({})", s.name),
        }
    }
}

impl Device {
    /// Opens a new stream on this device. On AMD, opening the first one waits for the work
    /// already queued on the device (memory that work used may have been handed out again
    /// already, which is safe only within one queue); KFD's limit on queues per process and
    /// GPU bounds how many can be open.
    pub fn stream(&self) -> Result<Stream> {
        match &*self.backend {
            #[cfg(target_os = "linux")]
            crate::Backend::Amd(d) => Ok(Stream {
                device: self.clone(),
                queue: StreamQueue::Amd(d.open_stream()?),
            }),
            #[cfg(target_os = "macos")]
            crate::Backend::Metal(d) => Ok(Stream {
                device: self.clone(),
                queue: StreamQueue::Metal(d.open_stream()?),
            }),
        }
    }

    /// The device's own queue as a stream: what calls without a stream use.
    pub fn default_stream(&self) -> Stream {
        Stream {
            device: self.clone(),
            queue: StreamQueue::Default,
        }
    }

    /// Records an event on the device's own queue ([`Stream::record_event`]).
    pub fn record_event(&self) -> Result<Event> {
        self.default_stream().record_event()
    }

    /// Makes the work queued on the device's own queue from now on wait for `event`
    /// ([`Stream::wait_event`]).
    pub fn wait_event(&self, event: &Event) -> Result<()> {
        self.default_stream().wait_event(event)
    }
}

impl Stream {
    /// The device the stream belongs to.
    pub fn device(&self) -> &Device {
        &self.device
    }

    fn queue(&self) -> Queue<'_> {
        match &self.queue {
            StreamQueue::Default => self.device.queue(),
            #[cfg(target_os = "linux")]
            StreamQueue::Amd(s) => Queue::Amd(s),
            #[cfg(target_os = "macos")]
            StreamQueue::Metal(s) => Queue::Metal(s),
        }
    }

    /// Whether the two are the same queue.
    pub(crate) fn same_queue(&self, other: &Stream) -> bool {
        match (&self.queue, &other.queue) {
            (StreamQueue::Default, StreamQueue::Default) => self.device.same(&other.device),
            #[cfg(target_os = "linux")]
            (StreamQueue::Amd(a), StreamQueue::Amd(b)) => Arc::ptr_eq(a, b),
            #[cfg(target_os = "macos")]
            (StreamQueue::Metal(a), StreamQueue::Metal(b)) => Arc::ptr_eq(a, b),
            _ => false,
        }
    }

    /// The AMD queue behind the stream.
    #[cfg(target_os = "linux")]
    pub(crate) fn amd_queue(&self) -> &AmdDevice {
        match self.queue() {
            Queue::Amd(d) => d,
        }
    }

    /// The Metal queue behind the stream.
    #[cfg(target_os = "macos")]
    pub(crate) fn metal_queue(&self) -> &ThreadSafeMetalDevice {
        match self.queue() {
            Queue::Metal(d) => d,
        }
    }

    /// Whether this is the device's own queue.
    pub fn is_default(&self) -> bool {
        matches!(self.queue, StreamQueue::Default)
    }

    fn check_device(&self, what: impl Display, device: &Device) -> Result<()> {
        if device.same(&self.device) {
            return Ok(());
        }
        Err(Error::InvalidArgument(format!(
            "{what} belongs to {}, the stream to {}",
            device.name(),
            self.device.name()
        )))
    }

    /// Queues `program` over `global` workgroups of `local` work-items on this stream and
    /// returns at once ([`Program::launch`]).
    pub fn launch(
        &self,
        program: &Program,
        args: &[Arg<'_>],
        global: [u32; 3],
        local: [u32; 3],
    ) -> Result<()> {
        self.launch_with(program, args, global, local, &LaunchOptions::default())
            .map(|_| ())
    }

    /// [`Program::launch_with`] on this stream: with `options.timed`, waits for the kernel
    /// (and what this stream queued before it) and returns its GPU time.
    pub fn launch_with(
        &self,
        program: &Program,
        args: &[Arg<'_>],
        global: [u32; 3],
        local: [u32; 3],
        options: &LaunchOptions,
    ) -> Result<Option<Duration>> {
        // Formatted only on a mismatch: this is on every launch's path.
        self.check_device(format_args!("program {}", program.name()), program.device())?;
        program.launch_on(self.queue(), args, global, local, options)
    }

    /// Copies host bytes into `dst` at `offset` after the work queued on this stream;
    /// returns once the bytes are taken (`src` may be reused).
    pub fn copy_in(&self, dst: &Buffer, offset: usize, src: &[u8]) -> Result<()> {
        self.check_device("the buffer", dst.device())?;
        dst.copy_in_on(self.queue(), offset, src)
    }

    /// Copies bytes of `src` at `offset` into `dst` after the work queued on this stream,
    /// and returns once they are there (having waited for this stream only).
    pub fn copy_out(&self, src: &Buffer, offset: usize, dst: &mut [u8]) -> Result<()> {
        self.check_device("the buffer", src.device())?;
        src.copy_out_on(self.queue(), offset, dst)
    }

    /// Copies `size` bytes from `src` at `src_offset` to `dst` at `dst_offset` on the GPU,
    /// after the work queued on this stream. `src` belongs to this stream's device; `dst` to
    /// it too (the copy is then ordered on this stream only) or to another GPU (then, as
    /// [`Buffer::copy_to`], also after the work queued on that device's own queue, and before
    /// what it queues later).
    pub fn copy(
        &self,
        src: &Buffer,
        src_offset: usize,
        dst: &Buffer,
        dst_offset: usize,
        size: usize,
    ) -> Result<()> {
        self.check_device("the source buffer", src.device())?;
        let dst_queue = if dst.device().same(&self.device) {
            self.queue()
        } else {
            dst.device().queue()
        };
        src.copy_to_on(self.queue(), src_offset, dst, dst_queue, dst_offset, size)
    }

    /// [`Buffer::fill`] on this stream.
    pub fn fill<T: bytemuck::Pod>(&self, buf: &Buffer, value: T) -> Result<()> {
        self.check_device("the buffer", buf.device())?;
        buf.fill_on(self.queue(), value)
    }

    /// Queues an event: the point after everything queued on this stream so far, with the
    /// GPU's clock there.
    pub fn record_event(&self) -> Result<Event> {
        match self.queue() {
            #[cfg(target_os = "linux")]
            Queue::Amd(d) => Ok(Event {
                stream: self.clone(),
                inner: EventInner::Amd(d.record_event()?),
            }),
            #[cfg(target_os = "macos")]
            Queue::Metal(d) => Ok(Event {
                stream: self.clone(),
                inner: EventInner::Metal(ThreadSafeMetalEvent(d.record_event()?)),
            }),
        }
    }

    /// Makes the work queued on this stream from now on wait, on the GPU, until `event` (of
    /// any stream, of any device of the same driver on AMD, of this device on Metal) is
    /// reached; returns at once.
    pub fn wait_event(&self, event: &Event) -> Result<()> {
        match (self.queue(), &event.inner) {
            #[cfg(target_os = "linux")]
            (Queue::Amd(d), EventInner::Amd(e)) => d.wait_event(e),
            #[cfg(target_os = "macos")]
            (Queue::Metal(d), EventInner::Metal(e)) => d.wait_event(&e.0),
        }
    }

    /// Waits for the work queued on this stream (only).
    pub fn synchronize(&self) -> Result<()> {
        match &self.queue {
            StreamQueue::Default => match self.queue() {
                #[cfg(target_os = "linux")]
                Queue::Amd(d) => d.synchronize(),
                #[cfg(target_os = "macos")]
                Queue::Metal(d) => d.synchronize(),
            },
            #[cfg(target_os = "linux")]
            StreamQueue::Amd(s) => s.synchronize(),
            #[cfg(target_os = "macos")]
            StreamQueue::Metal(s) => s.synchronize(),
        }
    }
}

/// A point in a stream's work, with the GPU's clock there ([`Stream::record_event`]): the
/// host waits for it, another stream waits for it on the GPU ([`Stream::wait_event`]), and
/// two events of one GPU give the GPU time between them.
pub struct Event {
    stream: Stream,
    inner: EventInner,
}

enum EventInner {
    #[cfg(target_os = "linux")]
    Amd(AmdEvent),
    #[cfg(target_os = "macos")]
    Metal(ThreadSafeMetalEvent),
}

impl std::fmt::Debug for Event {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Event on {:?}", self.stream)
    }
}

impl Event {
    /// The stream it was recorded on.
    pub fn stream(&self) -> &Stream {
        &self.stream
    }

    /// Whether the work its stream queued before it has finished.
    pub fn is_complete(&self) -> bool {
        match &self.inner {
            #[cfg(target_os = "linux")]
            EventInner::Amd(e) => e.is_complete(),
            #[cfg(target_os = "macos")]
            EventInner::Metal(e) => match self.stream.queue() {
                Queue::Metal(d) => d.event_is_complete(&e.0),
            },
        }
    }

    /// Blocks until the work its stream queued before it has finished (a fault of the GPU
    /// meanwhile is the error; bounded by `HCQ_WAIT_TIMEOUT_MS`).
    pub fn synchronize(&self) -> Result<()> {
        match (self.stream.queue(), &self.inner) {
            #[cfg(target_os = "linux")]
            (Queue::Amd(d), EventInner::Amd(e)) => d.synchronize_event(e),
            #[cfg(target_os = "macos")]
            (Queue::Metal(d), EventInner::Metal(e)) => d.synchronize_event(&e.0),
        }
    }

    /// The GPU time from `earlier` to this event, once both are complete: both recorded on
    /// one GPU (on any of its streams), `earlier` reached first.
    pub fn elapsed_since(&self, earlier: &Event) -> Result<Duration> {
        match (&self.inner, &earlier.inner) {
            #[cfg(target_os = "linux")]
            (EventInner::Amd(e), EventInner::Amd(start)) => e.elapsed_since(start),
            #[cfg(target_os = "macos")]
            (EventInner::Metal(e), EventInner::Metal(start)) => match self.stream.queue() {
                Queue::Metal(d) => d.elapsed_between(&start.0, &e.0),
            },
        }
    }
}
