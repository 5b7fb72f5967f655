//! Streams and events: several in-order queues on one device, and the points that order them.

use crate::backends::{foreign, AnyDevice, AnyEvent, Member};
use crate::{Arg, Buffer, Device, Error, LaunchOptions, Program, Result};
use hcq_core::Backend;
use std::fmt::Display;
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
///
/// ```
/// # fn main() -> hcq::Result<()> {
/// let dev = hcq::Device::default_device()?;
/// let lib = dev.compile("__global__ void add(int* x, int v) { x[threadIdx.x] += v; }")?;
/// let add = dev.program(&lib, "add")?;
/// let buf = dev.alloc_zeros::<i32>(32)?;
/// let stream = dev.stream()?;
/// let start = stream.record_event()?;
/// stream.launch(&add, &[hcq::Arg::Buffer(&buf), hcq::Arg::I32(5)], [1, 1, 1], [32, 1, 1])?;
/// let done = stream.record_event()?;
/// dev.wait_event(&done)?; // the device's own queue runs what follows after the stream's kernel
/// add.launch(&[hcq::Arg::Buffer(&buf), hcq::Arg::I32(1)], [1, 1, 1], [32, 1, 1])?;
/// assert_eq!(buf.read::<i32>()?, vec![6; 32]);
/// done.synchronize()?;
/// println!("the stream's kernel took {:?} of GPU time", done.elapsed_since(&start)?);
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct Stream {
    device: Device,
    /// `None`: the device's own queue.
    queue: Option<AnyDevice>,
}

impl std::fmt::Debug for Stream {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.queue {
            None => write!(f, "Stream(default of {})", self.device.name()),
            Some(queue) => on_backend!(queue, q => write!(f, "Stream({})", Backend::name(q))),
        }
    }
}

impl Device {
    /// Opens a new stream on this device. On AMD, opening the first one waits for the work
    /// already queued on the device (memory that work used may have been handed out again
    /// already, which is safe only within one queue); KFD's limit on queues per process and
    /// GPU bounds how many can be open.
    pub fn stream(&self) -> Result<Stream> {
        let queue = on_backend!(self.queue(), d => open_stream(d)?);
        Ok(Stream {
            device: self.clone(),
            queue: Some(queue),
        })
    }

    /// The device's own queue as a stream: what calls without a stream use.
    pub fn default_stream(&self) -> Stream {
        Stream {
            device: self.clone(),
            queue: None,
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

fn open_stream<D: Member>(device: &D) -> Result<AnyDevice> {
    Ok(D::wrap_device(device.open_stream()?))
}

fn wrap_event<D: Member>(_queue: &D, event: D::Event) -> AnyEvent {
    D::wrap_event(event)
}

/// `event` in the terms of the backend of `queue`.
fn event_of<'e, D: Member>(queue: &D, event: &'e Event) -> Result<&'e D::Event> {
    D::event(&event.inner).ok_or_else(|| foreign("the event", queue.name()))
}

impl Stream {
    /// The device the stream belongs to.
    pub fn device(&self) -> &Device {
        &self.device
    }

    pub(crate) fn queue(&self) -> &AnyDevice {
        match &self.queue {
            None => self.device.queue(),
            Some(queue) => queue,
        }
    }

    /// Whether the two are the same queue.
    pub(crate) fn same_queue(&self, other: &Stream) -> bool {
        self.queue().same(other.queue())
    }

    /// Whether this is the device's own queue.
    pub fn is_default(&self) -> bool {
        self.queue.is_none()
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
        let inner = on_backend!(self.queue(), q => wrap_event(q, Backend::record_event(q)?));
        Ok(Event {
            stream: self.clone(),
            inner,
        })
    }

    /// Makes the work queued on this stream from now on wait, on the GPU, until `event` (of
    /// any stream of any device: on AMD, of the same driver; on Metal, any Metal device) is
    /// reached; returns at once.
    pub fn wait_event(&self, event: &Event) -> Result<()> {
        on_backend!(self.queue(), q => Backend::wait_event(q, event_of(q, event)?))
    }

    /// Waits for the work queued on this stream (only).
    pub fn synchronize(&self) -> Result<()> {
        on_backend!(self.queue(), q => Backend::synchronize(q))
    }
}

/// A point in a stream's work, with the GPU's clock there ([`Stream::record_event`]): the
/// host waits for it, another stream waits for it on the GPU ([`Stream::wait_event`]), and
/// two events of one GPU give the GPU time between them.
pub struct Event {
    stream: Stream,
    inner: AnyEvent,
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
        on_backend!(self.stream.queue(), q => {
            event_of(q, self).is_ok_and(|e| Backend::event_is_complete(q, e))
        })
    }

    /// Blocks until the work its stream queued before it has finished (a fault of the GPU
    /// meanwhile is the error; bounded by `HCQ_WAIT_TIMEOUT_MS`).
    pub fn synchronize(&self) -> Result<()> {
        on_backend!(self.stream.queue(), q => Backend::synchronize_event(q, event_of(q, self)?))
    }

    /// The GPU time from `earlier` to this event, once both are complete: both recorded on
    /// one GPU (on any of its streams), `earlier` reached first.
    pub fn elapsed_since(&self, earlier: &Event) -> Result<Duration> {
        on_backend!(self.stream.queue(), q => {
            Backend::elapsed_between(q, event_of(q, earlier)?, event_of(q, self)?)
        })
    }
}
