//! A recording stand-in for Metal, for tests on machines without one.
//!
//! [`FakeMetal`] implements [`MetalApi`] by recording every call as a [`Call`] and keeping just
//! enough state to answer: buffers are host memory (so `contents` works), a "library" is the
//! MSL source behind an `MTLB` header (its kernels are the `kernel void NAME(` it contains), and
//! command buffers finish when waited on or when a test says so. A test can make the next
//! committed command buffer fail, or a compile fail. Blit copies happen when the command buffer
//! finishes; compute dispatches do not execute.
//!
//! Command buffers run as a GPU would order them: those of one queue in commit order, and one
//! that waits for a shared event only once the event has reached the value (set by the command
//! buffers that signal it, when they finish). Waiting for a command buffer runs what it depends
//! on first; a wait that nothing committed can end fails the command buffer, where a real GPU
//! would hang.

use crate::api::{CommandStatus, MetalApi, Size3};
use std::ops::Range;
use std::sync::{Arc, Mutex, MutexGuard};

macro_rules! handle {
    ($($name:ident),*) => {$(
        /// A fake Metal handle: a number the fake hands out in creation order.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        pub struct $name(
            /// The number: devices, buffers, libraries, command buffers, blit encoders, ICBs
            /// and events count from 0 (all but devices index a table of the fake's state);
            /// functions, pipelines, queues and compute encoders count from 1.
            pub u32,
        );
    )*};
}
handle!(
    FakeEvent,
    FakeDevice,
    FakeBuffer,
    FakeLibrary,
    FakeFunction,
    FakePipeline,
    FakeQueue,
    FakeCommandBuffer,
    FakeEncoder,
    FakeBlit,
    FakeIcb
);

/// A command of a fake ICB: the ICB and the command index.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct FakeIcbCommand {
    /// The indirect command buffer the command belongs to.
    pub icb: FakeIcb,
    /// The command's slot in it (not checked against the ICB's command count).
    pub index: usize,
}

/// One recorded Metal call, named after the [`MetalApi`] method that made it, with the
/// arguments that tests assert on and the handles the fake returned.
#[derive(Debug, Clone, PartialEq)]
pub enum Call {
    /// `MTLCopyAllDevices()` (a query).
    CopyAllDevices,
    /// `newBufferWithLength:options:`; the fake always succeeds with zeroed host memory.
    NewBuffer {
        /// Bytes asked for (and allocated).
        length: usize,
        /// The buffer returned.
        buffer: FakeBuffer,
    },
    /// `newLibraryWithSource:options:error:`, recorded whether or not the compile was made to
    /// fail; the source itself is not recorded.
    NewLibraryWithSource,
    /// `libraryDataContents` of this library; the fake returns `MTLB` followed by its source.
    LibraryDataContents(FakeLibrary),
    /// `newLibraryWithData:error:` that succeeded (data without the `MTLB` header fails and
    /// records nothing).
    NewLibraryWithData {
        /// The library returned.
        library: FakeLibrary,
    },
    /// `newFunctionWithName:`.
    NewFunctionWithName {
        /// The kernel name asked for.
        name: String,
        /// The function returned: `None` when the library's source has no `kernel void NAME`.
        function: Option<FakeFunction>,
    },
    /// `newComputePipelineStateWithDescriptor:...`; the fake always succeeds.
    NewComputePipelineState {
        /// The function the pipeline was made from.
        function: FakeFunction,
        /// Whether the descriptor asked for `supportIndirectCommandBuffers`.
        support_icb: bool,
        /// The pipeline returned.
        pipeline: FakePipeline,
    },
    /// `newCommandQueueWithMaxCommandBufferCount:`.
    NewCommandQueue {
        /// The queue's limit on outstanding command buffers.
        max_command_buffers: usize,
    },
    /// `[queue commandBuffer]`, with the command buffer returned (status `NotEnqueued`).
    CommandBuffer {
        /// The queue it was made on (its command buffers run in commit order).
        queue: FakeQueue,
        /// The command buffer returned.
        cb: FakeCommandBuffer,
    },
    /// `newSharedEvent`, with the event returned (value 0).
    NewSharedEvent(FakeEvent),
    /// `encodeSignalEvent:value:`: when the command buffer runs, the event takes `value`.
    EncodeSignalEvent {
        /// The command buffer encoded into.
        cb: FakeCommandBuffer,
        /// The event it signals.
        event: FakeEvent,
        /// The value it sets.
        value: u64,
    },
    /// `encodeWaitForEvent:value:`: the command buffer runs only once the event has reached
    /// `value`.
    EncodeWaitForEvent {
        /// The command buffer encoded into.
        cb: FakeCommandBuffer,
        /// The event it waits for.
        event: FakeEvent,
        /// The value it waits for.
        value: u64,
    },
    /// `signaledValue` of an event (a query).
    SignaledValue(FakeEvent),
    /// `computeCommandEncoder`.
    ComputeCommandEncoder {
        /// The command buffer encoded into.
        cb: FakeCommandBuffer,
        /// The encoder returned.
        encoder: FakeEncoder,
    },
    /// `setComputePipelineState:` on a compute encoder.
    SetComputePipelineState {
        /// The encoder.
        encoder: FakeEncoder,
        /// The pipeline set.
        pipeline: FakePipeline,
    },
    /// `setBuffer:offset:atIndex:` on a compute encoder.
    SetBuffer {
        /// The encoder.
        encoder: FakeEncoder,
        /// The buffer bound.
        buffer: FakeBuffer,
        /// Byte offset into the buffer.
        offset: usize,
        /// The `[[buffer(index)]]` slot.
        index: usize,
    },
    /// `setBytes:length:atIndex:` on a compute encoder.
    SetBytes {
        /// The encoder.
        encoder: FakeEncoder,
        /// A copy of the bytes passed.
        bytes: Vec<u8>,
        /// The `[[buffer(index)]]` slot.
        index: usize,
    },
    /// `setThreadgroupMemoryLength:atIndex:` on a compute encoder.
    SetThreadgroupMemoryLength {
        /// The encoder.
        encoder: FakeEncoder,
        /// Bytes of threadgroup memory.
        length: usize,
        /// The `[[threadgroup(index)]]` slot.
        index: usize,
    },
    /// `dispatchThreadgroups:threadsPerThreadgroup:`; nothing executes.
    DispatchThreadgroups {
        /// The encoder.
        encoder: FakeEncoder,
        /// Threadgroups per grid.
        groups: Size3,
        /// Threads per threadgroup.
        threads: Size3,
    },
    /// `useResources:count:usage:` (read and write) on a compute encoder.
    UseResources {
        /// The encoder.
        encoder: FakeEncoder,
        /// The buffers declared, in the order passed.
        resources: Vec<FakeBuffer>,
    },
    /// `executeCommandsInBuffer:withRange:`; nothing executes.
    ExecuteCommandsInBuffer {
        /// The encoder.
        encoder: FakeEncoder,
        /// The indirect command buffer executed.
        icb: FakeIcb,
        /// The command indices executed.
        range: Range<usize>,
    },
    /// `endEncoding` of a compute encoder.
    EndEncoding(FakeEncoder),
    /// `blitCommandEncoder`.
    BlitCommandEncoder {
        /// The command buffer encoded into.
        cb: FakeCommandBuffer,
        /// The blit encoder returned.
        blit: FakeBlit,
    },
    /// `copyFromBuffer:sourceOffset:toBuffer:destinationOffset:size:`; the fake performs the
    /// copy on the host when the command buffer finishes.
    CopyFromBuffer {
        /// The blit encoder.
        blit: FakeBlit,
        /// The buffer copied from.
        src: FakeBuffer,
        /// Byte offset into `src`.
        src_offset: usize,
        /// The buffer copied to.
        dst: FakeBuffer,
        /// Byte offset into `dst`.
        dst_offset: usize,
        /// Bytes copied.
        size: usize,
    },
    /// `endEncoding` of a blit encoder.
    EndBlitEncoding(FakeBlit),
    /// `commit`: the command buffer becomes `Committed` (and finishes at once under
    /// [`FakeMetal::auto_complete`]).
    Commit(FakeCommandBuffer),
    /// `waitUntilCompleted`: a committed command buffer finishes here, after what it depends
    /// on (see [`FakeMetal`]).
    WaitUntilCompleted(FakeCommandBuffer),
    /// `status` (a query).
    Status(FakeCommandBuffer),
    /// `error` (a query).
    Error(FakeCommandBuffer),
    /// `GPUStartTime` (a query); the fake answers the command buffer's number, in seconds.
    GpuStartTime(FakeCommandBuffer),
    /// `GPUEndTime` (a query); the fake answers the start time plus [`FAKE_GPU_SECONDS`].
    GpuEndTime(FakeCommandBuffer),
    /// `newIndirectCommandBufferWithDescriptor:maxCommandCount:options:`.
    NewIndirectCommandBuffer {
        /// The command count asked for.
        max_commands: usize,
        /// The descriptor's `maxKernelBufferBindCount`.
        max_bindings: usize,
        /// The ICB returned.
        icb: FakeIcb,
    },
    /// `indirectComputeCommandAtIndex:` (a query), with the command returned.
    IndirectComputeCommandAtIndex(FakeIcbCommand),
    /// `setComputePipelineState:` on an indirect compute command.
    IcbSetComputePipelineState {
        /// The command.
        command: FakeIcbCommand,
        /// The pipeline set.
        pipeline: FakePipeline,
    },
    /// `setKernelBuffer:offset:atIndex:` on an indirect compute command.
    SetKernelBuffer {
        /// The command.
        command: FakeIcbCommand,
        /// The buffer bound.
        buffer: FakeBuffer,
        /// Byte offset into the buffer.
        offset: usize,
        /// The `[[buffer(index)]]` slot.
        index: usize,
    },
    /// `concurrentDispatchThreadgroups:threadsPerThreadgroup:` on an indirect compute command.
    ConcurrentDispatchThreadgroups {
        /// The command.
        command: FakeIcbCommand,
        /// Threadgroups per grid.
        groups: Size3,
        /// Threads per threadgroup.
        threads: Size3,
    },
    /// `setBarrier` on an indirect compute command.
    SetBarrier(FakeIcbCommand),
}

impl Call {
    /// Whether this is a query (status, error, times, icb command lookup) rather than a call
    /// that creates or changes something. Tests usually assert on the others.
    pub fn is_query(&self) -> bool {
        matches!(
            self,
            Call::Status(_)
                | Call::Error(_)
                | Call::GpuStartTime(_)
                | Call::GpuEndTime(_)
                | Call::IndirectComputeCommandAtIndex(_)
                | Call::SignaledValue(_)
                | Call::CopyAllDevices
        )
    }
}

/// GPU time every fake command buffer reports (seconds).
pub const FAKE_GPU_SECONDS: f64 = 0.000_25;

struct CbState {
    queue: FakeQueue,
    /// Position in the order of commits (`None` until committed).
    committed: Option<u64>,
    status: CommandStatus,
    error: Option<String>,
    fails: Option<String>,
    copies: Vec<(FakeBuffer, usize, FakeBuffer, usize, usize)>,
    /// Events it sets when it runs, and those it waits for first.
    signals: Vec<(FakeEvent, u64)>,
    waits: Vec<(FakeEvent, u64)>,
}

#[derive(Default)]
struct State {
    calls: Vec<Call>,
    /// Host memory of each buffer; boxes never move or shrink while the fake lives.
    buffers: Vec<Box<[u8]>>,
    /// Source of each library.
    libraries: Vec<String>,
    functions: u32,
    pipelines: u32,
    queues: u32,
    cbs: Vec<CbState>,
    commits: u64,
    /// Each shared event's value.
    events: Vec<u64>,
    encoders: u32,
    blits: Vec<FakeCommandBuffer>,
    icbs: Vec<usize>,
    fail_next_commit: Option<String>,
    fail_next_compile: Option<String>,
    auto_complete: bool,
}

/// The recording fake Metal. Clones share one state (one fake GPU): a device and the
/// streams opened from it record into the same call list.
#[derive(Clone)]
pub struct FakeMetal {
    devices: usize,
    max_threads: u64,
    state: Arc<Mutex<State>>,
}

impl Default for FakeMetal {
    fn default() -> Self {
        Self::new()
    }
}

impl FakeMetal {
    /// One device; command buffers stay in flight until waited on or completed by the test.
    pub fn new() -> Self {
        FakeMetal {
            devices: 1,
            max_threads: 1024,
            state: Arc::new(Mutex::new(State::default())),
        }
    }

    /// Sets how many devices `MTLCopyAllDevices` returns.
    pub fn with_devices(mut self, n: usize) -> Self {
        self.devices = n;
        self
    }

    /// Command buffers complete as soon as they are committed.
    pub fn auto_complete(self) -> Self {
        self.st().auto_complete = true;
        self
    }

    fn st(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Every call so far, in order.
    pub fn calls(&self) -> Vec<Call> {
        self.st().calls.clone()
    }

    /// Every call so far that is not a query, then forgets all calls.
    pub fn take_calls(&self) -> Vec<Call> {
        let mut st = self.st();
        std::mem::take(&mut st.calls)
            .into_iter()
            .filter(|c| !c.is_query())
            .collect()
    }

    /// Forgets the calls recorded so far.
    pub fn clear_calls(&self) {
        self.st().calls.clear();
    }

    /// The next committed command buffer will finish with this error.
    pub fn fail_next_commit(&self, message: &str) {
        self.st().fail_next_commit = Some(message.to_string());
    }

    /// The next `newLibraryWithSource` fails with this log.
    pub fn fail_next_compile(&self, log: &str) {
        self.st().fail_next_compile = Some(log.to_string());
    }

    /// Finishes every committed command buffer that can run, as the GPU would: those waiting
    /// for an event value nothing committed sets stay committed.
    pub fn complete_all(&self) {
        progress(&mut self.st());
    }

    /// The value of a shared event, without recording a call.
    pub fn event_value(&self, event: FakeEvent) -> u64 {
        self.st().events[event.0 as usize]
    }

    /// The status of a command buffer, without recording a call.
    pub fn status_of(&self, cb: FakeCommandBuffer) -> CommandStatus {
        self.st().cbs[cb.0 as usize].status
    }

    /// The host bytes of a buffer.
    pub fn buffer_bytes(&self, b: FakeBuffer) -> Vec<u8> {
        self.st().buffers[b.0 as usize].to_vec()
    }

    fn record(&self, c: Call) {
        self.st().calls.push(c);
    }
}

/// Whether committed command buffer `i` can run now: every command buffer committed before
/// it on its queue has finished, and every event it waits for has reached its value.
fn runnable(st: &State, i: usize) -> bool {
    let cb = &st.cbs[i];
    let Some(at) = cb.committed else {
        return false;
    };
    cb.status == CommandStatus::Committed
        && !st.cbs.iter().any(|o| {
            o.queue == cb.queue
                && o.status == CommandStatus::Committed
                && o.committed.is_some_and(|c| c < at)
        })
        && cb.waits.iter().all(|&(e, v)| st.events[e.0 as usize] >= v)
}

/// Runs every command buffer that can run, in commit order, until none can.
fn progress(st: &mut State) {
    loop {
        let mut order: Vec<usize> = (0..st.cbs.len()).filter(|&i| runnable(st, i)).collect();
        if order.is_empty() {
            return;
        }
        order.sort_by_key(|&i| st.cbs[i].committed);
        for i in order {
            if runnable(st, i) {
                finish(st, i);
            }
        }
    }
}

/// Runs command buffer `i` as `waitUntilCompleted` would see it: first what it depends on (the
/// command buffers committed before it on its queue, and for each event value it waits for,
/// the first committed command buffer that sets it). A wait that nothing committed can end
/// would hang a real GPU and its waiting thread; the fake fails the command buffer instead,
/// saying so.
fn run(st: &mut State, i: usize, depth: usize) {
    if st.cbs[i].status != CommandStatus::Committed {
        return;
    }
    let at = st.cbs[i].committed;
    let queue = st.cbs[i].queue;
    let before: Vec<usize> = (0..st.cbs.len())
        .filter(|&j| {
            st.cbs[j].queue == queue
                && st.cbs[j].status == CommandStatus::Committed
                && st.cbs[j].committed < at
        })
        .collect();
    for j in before {
        run(st, j, depth + 1);
    }
    for (e, v) in st.cbs[i].waits.clone() {
        if st.events[e.0 as usize] >= v {
            continue;
        }
        let setter = (0..st.cbs.len()).find(|&j| {
            j != i
                && st.cbs[j].status == CommandStatus::Committed
                && st.cbs[j].signals.iter().any(|&(e2, v2)| e2 == e && v2 >= v)
        });
        if let (Some(j), true) = (setter, depth < st.cbs.len()) {
            run(st, j, depth + 1);
        }
        if st.events[e.0 as usize] < v {
            let cb = &mut st.cbs[i];
            cb.status = CommandStatus::Error;
            cb.error = Some(format!(
                "fake Metal: command buffer {i} waits for event {} to reach {v}, which no \
                 committed command buffer sets (a real GPU would hang)",
                e.0
            ));
            return;
        }
    }
    finish(st, i);
}

fn finish(st: &mut State, i: usize) {
    let copies = std::mem::take(&mut st.cbs[i].copies);
    for (src, so, dst, d_o, n) in copies {
        let bytes = st.buffers[src.0 as usize][so..so + n].to_vec();
        st.buffers[dst.0 as usize][d_o..d_o + n].copy_from_slice(&bytes);
    }
    for (e, v) in std::mem::take(&mut st.cbs[i].signals) {
        st.events[e.0 as usize] = v;
    }
    let cb = &mut st.cbs[i];
    match cb.fails.take() {
        Some(e) => {
            cb.status = CommandStatus::Error;
            cb.error = Some(e);
        }
        None => cb.status = CommandStatus::Completed,
    }
}

/// Kernel names in MSL source: the identifiers after `kernel void`.
fn kernels(source: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut rest = source;
    while let Some(at) = rest.find("kernel void") {
        rest = &rest[at + "kernel void".len()..];
        let name: String = rest
            .trim_start()
            .chars()
            .take_while(|c| c.is_alphanumeric() || *c == '_')
            .collect();
        out.push(name);
    }
    out
}

impl MetalApi for FakeMetal {
    type Device = FakeDevice;
    type Buffer = FakeBuffer;
    type Library = FakeLibrary;
    type Function = FakeFunction;
    type Pipeline = FakePipeline;
    type Queue = FakeQueue;
    type CommandBuffer = FakeCommandBuffer;
    type ComputeEncoder = FakeEncoder;
    type BlitEncoder = FakeBlit;
    type Icb = FakeIcb;
    type IcbCommand = FakeIcbCommand;
    type Event = FakeEvent;

    const EMULATED: bool = true;

    fn copy_all_devices(&self) -> Vec<FakeDevice> {
        self.record(Call::CopyAllDevices);
        (0..self.devices as u32).map(FakeDevice).collect()
    }
    fn device_name(&self, device: &FakeDevice) -> String {
        format!("Fake Metal GPU {}", device.0)
    }
    fn recommended_max_working_set_size(&self, _: &FakeDevice) -> u64 {
        1 << 30
    }
    fn max_buffer_length(&self, _: &FakeDevice) -> u64 {
        1 << 28
    }
    fn operating_system_version(&self) -> String {
        "Fake OS 1.0".into()
    }

    fn new_buffer_with_length(&self, _: &FakeDevice, length: usize) -> Option<FakeBuffer> {
        let mut st = self.st();
        let buffer = FakeBuffer(st.buffers.len() as u32);
        st.buffers.push(vec![0u8; length].into_boxed_slice());
        st.calls.push(Call::NewBuffer { length, buffer });
        Some(buffer)
    }
    fn contents(&self, buffer: &FakeBuffer) -> *mut u8 {
        self.st().buffers[buffer.0 as usize].as_mut_ptr()
    }
    fn length(&self, buffer: &FakeBuffer) -> usize {
        self.st().buffers[buffer.0 as usize].len()
    }

    fn new_library_with_source(&self, _: &FakeDevice, source: &str) -> Result<FakeLibrary, String> {
        let mut st = self.st();
        st.calls.push(Call::NewLibraryWithSource);
        if let Some(log) = st.fail_next_compile.take() {
            return Err(log);
        }
        st.libraries.push(source.to_string());
        Ok(FakeLibrary(st.libraries.len() as u32 - 1))
    }
    fn library_data_contents(&self, library: &FakeLibrary) -> Option<Vec<u8>> {
        let mut st = self.st();
        st.calls.push(Call::LibraryDataContents(*library));
        let mut out = b"MTLB".to_vec();
        out.extend_from_slice(st.libraries[library.0 as usize].as_bytes());
        Some(out)
    }
    fn new_library_with_data(&self, _: &FakeDevice, data: &[u8]) -> Result<FakeLibrary, String> {
        let source = data
            .strip_prefix(b"MTLB")
            .and_then(|s| std::str::from_utf8(s).ok())
            .ok_or("invalid metallib")?;
        let mut st = self.st();
        st.libraries.push(source.to_string());
        let library = FakeLibrary(st.libraries.len() as u32 - 1);
        st.calls.push(Call::NewLibraryWithData { library });
        Ok(library)
    }
    fn new_function_with_name(&self, library: &FakeLibrary, name: &str) -> Option<FakeFunction> {
        let mut st = self.st();
        let found = kernels(&st.libraries[library.0 as usize])
            .iter()
            .any(|k| k == name);
        let function = found.then(|| {
            st.functions += 1;
            FakeFunction(st.functions)
        });
        st.calls.push(Call::NewFunctionWithName {
            name: name.to_string(),
            function,
        });
        function
    }
    fn new_compute_pipeline_state(
        &self,
        _: &FakeDevice,
        function: &FakeFunction,
        support_icb: bool,
    ) -> Result<FakePipeline, String> {
        let mut st = self.st();
        st.pipelines += 1;
        let pipeline = FakePipeline(st.pipelines);
        st.calls.push(Call::NewComputePipelineState {
            function: *function,
            support_icb,
            pipeline,
        });
        Ok(pipeline)
    }
    fn max_total_threads_per_threadgroup(&self, _: &FakePipeline) -> u64 {
        self.max_threads
    }

    fn new_command_queue(&self, _: &FakeDevice, max_command_buffers: usize) -> Option<FakeQueue> {
        let mut st = self.st();
        st.queues += 1;
        st.calls.push(Call::NewCommandQueue {
            max_command_buffers,
        });
        Some(FakeQueue(st.queues))
    }
    fn command_buffer(&self, queue: &FakeQueue) -> Option<FakeCommandBuffer> {
        let mut st = self.st();
        let cb = FakeCommandBuffer(st.cbs.len() as u32);
        st.cbs.push(CbState {
            queue: *queue,
            committed: None,
            status: CommandStatus::NotEnqueued,
            error: None,
            fails: None,
            copies: Vec::new(),
            signals: Vec::new(),
            waits: Vec::new(),
        });
        st.calls.push(Call::CommandBuffer { queue: *queue, cb });
        Some(cb)
    }
    fn compute_command_encoder(&self, cb: &FakeCommandBuffer) -> Option<FakeEncoder> {
        let mut st = self.st();
        st.encoders += 1;
        let encoder = FakeEncoder(st.encoders);
        st.calls
            .push(Call::ComputeCommandEncoder { cb: *cb, encoder });
        Some(encoder)
    }
    fn set_compute_pipeline_state(&self, encoder: &FakeEncoder, pipeline: &FakePipeline) {
        self.record(Call::SetComputePipelineState {
            encoder: *encoder,
            pipeline: *pipeline,
        });
    }
    fn set_buffer(&self, encoder: &FakeEncoder, buffer: &FakeBuffer, offset: usize, index: usize) {
        self.record(Call::SetBuffer {
            encoder: *encoder,
            buffer: *buffer,
            offset,
            index,
        });
    }
    fn set_bytes(&self, encoder: &FakeEncoder, bytes: &[u8], index: usize) {
        self.record(Call::SetBytes {
            encoder: *encoder,
            bytes: bytes.to_vec(),
            index,
        });
    }
    fn set_threadgroup_memory_length(&self, encoder: &FakeEncoder, length: usize, index: usize) {
        self.record(Call::SetThreadgroupMemoryLength {
            encoder: *encoder,
            length,
            index,
        });
    }
    fn dispatch_threadgroups(&self, encoder: &FakeEncoder, groups: Size3, threads: Size3) {
        self.record(Call::DispatchThreadgroups {
            encoder: *encoder,
            groups,
            threads,
        });
    }
    fn use_resources(&self, encoder: &FakeEncoder, resources: &[FakeBuffer]) {
        self.record(Call::UseResources {
            encoder: *encoder,
            resources: resources.to_vec(),
        });
    }
    fn execute_commands_in_buffer(
        &self,
        encoder: &FakeEncoder,
        icb: &FakeIcb,
        range: Range<usize>,
    ) {
        self.record(Call::ExecuteCommandsInBuffer {
            encoder: *encoder,
            icb: *icb,
            range,
        });
    }
    fn end_encoding(&self, encoder: &FakeEncoder) {
        self.record(Call::EndEncoding(*encoder));
    }

    fn blit_command_encoder(&self, cb: &FakeCommandBuffer) -> Option<FakeBlit> {
        let mut st = self.st();
        let blit = FakeBlit(st.blits.len() as u32);
        st.blits.push(*cb);
        st.calls.push(Call::BlitCommandEncoder { cb: *cb, blit });
        Some(blit)
    }
    fn copy_from_buffer(
        &self,
        blit: &FakeBlit,
        src: &FakeBuffer,
        src_offset: usize,
        dst: &FakeBuffer,
        dst_offset: usize,
        size: usize,
    ) {
        let mut st = self.st();
        let cb = st.blits[blit.0 as usize];
        st.cbs[cb.0 as usize]
            .copies
            .push((*src, src_offset, *dst, dst_offset, size));
        st.calls.push(Call::CopyFromBuffer {
            blit: *blit,
            src: *src,
            src_offset,
            dst: *dst,
            dst_offset,
            size,
        });
    }
    fn end_blit_encoding(&self, blit: &FakeBlit) {
        self.record(Call::EndBlitEncoding(*blit));
    }

    fn commit(&self, cb: &FakeCommandBuffer) {
        let mut st = self.st();
        st.calls.push(Call::Commit(*cb));
        let fails = st.fail_next_commit.take();
        let i = cb.0 as usize;
        st.commits += 1;
        st.cbs[i].committed = Some(st.commits);
        st.cbs[i].status = CommandStatus::Committed;
        st.cbs[i].fails = fails;
        if st.auto_complete {
            progress(&mut st);
        }
    }
    fn wait_until_completed(&self, cb: &FakeCommandBuffer) {
        let mut st = self.st();
        st.calls.push(Call::WaitUntilCompleted(*cb));
        run(&mut st, cb.0 as usize, 0);
    }
    fn status(&self, cb: &FakeCommandBuffer) -> CommandStatus {
        let mut st = self.st();
        st.calls.push(Call::Status(*cb));
        st.cbs[cb.0 as usize].status
    }
    fn error(&self, cb: &FakeCommandBuffer) -> Option<String> {
        let mut st = self.st();
        st.calls.push(Call::Error(*cb));
        st.cbs[cb.0 as usize].error.clone()
    }
    fn gpu_start_time(&self, cb: &FakeCommandBuffer) -> f64 {
        self.record(Call::GpuStartTime(*cb));
        cb.0 as f64
    }
    fn gpu_end_time(&self, cb: &FakeCommandBuffer) -> f64 {
        self.record(Call::GpuEndTime(*cb));
        cb.0 as f64 + FAKE_GPU_SECONDS
    }

    fn new_indirect_command_buffer(
        &self,
        _: &FakeDevice,
        max_command_count: usize,
        max_kernel_buffer_bind_count: usize,
    ) -> Option<FakeIcb> {
        let mut st = self.st();
        let icb = FakeIcb(st.icbs.len() as u32);
        st.icbs.push(max_command_count);
        st.calls.push(Call::NewIndirectCommandBuffer {
            max_commands: max_command_count,
            max_bindings: max_kernel_buffer_bind_count,
            icb,
        });
        Some(icb)
    }
    fn indirect_compute_command_at_index(&self, icb: &FakeIcb, index: usize) -> FakeIcbCommand {
        let command = FakeIcbCommand { icb: *icb, index };
        self.record(Call::IndirectComputeCommandAtIndex(command));
        command
    }
    fn icb_set_compute_pipeline_state(&self, command: &FakeIcbCommand, pipeline: &FakePipeline) {
        self.record(Call::IcbSetComputePipelineState {
            command: *command,
            pipeline: *pipeline,
        });
    }
    fn set_kernel_buffer(
        &self,
        command: &FakeIcbCommand,
        buffer: &FakeBuffer,
        offset: usize,
        index: usize,
    ) {
        self.record(Call::SetKernelBuffer {
            command: *command,
            buffer: *buffer,
            offset,
            index,
        });
    }
    fn concurrent_dispatch_threadgroups(
        &self,
        command: &FakeIcbCommand,
        groups: Size3,
        threads: Size3,
    ) {
        self.record(Call::ConcurrentDispatchThreadgroups {
            command: *command,
            groups,
            threads,
        });
    }
    fn set_barrier(&self, command: &FakeIcbCommand) {
        self.record(Call::SetBarrier(*command));
    }

    fn new_shared_event(&self, _: &FakeDevice) -> Option<FakeEvent> {
        let mut st = self.st();
        let event = FakeEvent(st.events.len() as u32);
        st.events.push(0);
        st.calls.push(Call::NewSharedEvent(event));
        Some(event)
    }
    fn encode_signal_event(&self, cb: &FakeCommandBuffer, event: &FakeEvent, value: u64) {
        let mut st = self.st();
        st.cbs[cb.0 as usize].signals.push((*event, value));
        st.calls.push(Call::EncodeSignalEvent {
            cb: *cb,
            event: *event,
            value,
        });
    }
    fn encode_wait_for_event(&self, cb: &FakeCommandBuffer, event: &FakeEvent, value: u64) {
        let mut st = self.st();
        st.cbs[cb.0 as usize].waits.push((*event, value));
        st.calls.push(Call::EncodeWaitForEvent {
            cb: *cb,
            event: *event,
            value,
        });
    }
    fn signaled_value(&self, event: &FakeEvent) -> u64 {
        let mut st = self.st();
        st.calls.push(Call::SignaledValue(*event));
        st.events[event.0 as usize]
    }
}
