//! A recording stand-in for Metal, for tests on machines without one.
//!
//! [`FakeMetal`] implements [`MetalApi`] by recording every call as a [`Call`] and keeping just
//! enough state to answer: buffers are host memory (so `contents` works), a "library" is the
//! MSL source behind an `MTLB` header (its kernels are the `kernel void NAME(` it contains), and
//! command buffers finish when waited on or when a test says so. A test can make the next
//! committed command buffer fail, or a compile fail. Blit copies happen at commit; compute
//! dispatches do not execute.

use crate::api::{CommandStatus, MetalApi, Size3};
use std::ops::Range;
use std::sync::{Mutex, MutexGuard};

macro_rules! handle {
    ($($name:ident),*) => {$(
        /// A fake Metal handle.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        pub struct $name(pub u32);
    )*};
}
handle!(
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
    pub icb: FakeIcb,
    pub index: usize,
}

/// One recorded Metal call.
#[derive(Debug, Clone, PartialEq)]
pub enum Call {
    CopyAllDevices,
    NewBuffer {
        length: usize,
        buffer: FakeBuffer,
    },
    NewLibraryWithSource,
    LibraryDataContents(FakeLibrary),
    NewLibraryWithData {
        library: FakeLibrary,
    },
    NewFunctionWithName {
        name: String,
        function: Option<FakeFunction>,
    },
    NewComputePipelineState {
        function: FakeFunction,
        support_icb: bool,
        pipeline: FakePipeline,
    },
    NewCommandQueue {
        max_command_buffers: usize,
    },
    CommandBuffer(FakeCommandBuffer),
    ComputeCommandEncoder {
        cb: FakeCommandBuffer,
        encoder: FakeEncoder,
    },
    SetComputePipelineState {
        encoder: FakeEncoder,
        pipeline: FakePipeline,
    },
    SetBuffer {
        encoder: FakeEncoder,
        buffer: FakeBuffer,
        offset: usize,
        index: usize,
    },
    SetBytes {
        encoder: FakeEncoder,
        bytes: Vec<u8>,
        index: usize,
    },
    SetThreadgroupMemoryLength {
        encoder: FakeEncoder,
        length: usize,
        index: usize,
    },
    DispatchThreadgroups {
        encoder: FakeEncoder,
        groups: Size3,
        threads: Size3,
    },
    UseResources {
        encoder: FakeEncoder,
        resources: Vec<FakeBuffer>,
    },
    ExecuteCommandsInBuffer {
        encoder: FakeEncoder,
        icb: FakeIcb,
        range: Range<usize>,
    },
    EndEncoding(FakeEncoder),
    BlitCommandEncoder {
        cb: FakeCommandBuffer,
        blit: FakeBlit,
    },
    CopyFromBuffer {
        blit: FakeBlit,
        src: FakeBuffer,
        src_offset: usize,
        dst: FakeBuffer,
        dst_offset: usize,
        size: usize,
    },
    EndBlitEncoding(FakeBlit),
    Commit(FakeCommandBuffer),
    WaitUntilCompleted(FakeCommandBuffer),
    Status(FakeCommandBuffer),
    Error(FakeCommandBuffer),
    GpuStartTime(FakeCommandBuffer),
    GpuEndTime(FakeCommandBuffer),
    NewIndirectCommandBuffer {
        max_commands: usize,
        max_bindings: usize,
        icb: FakeIcb,
    },
    IndirectComputeCommandAtIndex(FakeIcbCommand),
    IcbSetComputePipelineState {
        command: FakeIcbCommand,
        pipeline: FakePipeline,
    },
    SetKernelBuffer {
        command: FakeIcbCommand,
        buffer: FakeBuffer,
        offset: usize,
        index: usize,
    },
    ConcurrentDispatchThreadgroups {
        command: FakeIcbCommand,
        groups: Size3,
        threads: Size3,
    },
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
                | Call::CopyAllDevices
        )
    }
}

/// GPU time every fake command buffer reports (seconds).
pub const FAKE_GPU_SECONDS: f64 = 0.000_25;

struct CbState {
    status: CommandStatus,
    error: Option<String>,
    fails: Option<String>,
    copies: Vec<(FakeBuffer, usize, FakeBuffer, usize, usize)>,
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
    encoders: u32,
    blits: Vec<FakeCommandBuffer>,
    icbs: Vec<usize>,
    fail_next_commit: Option<String>,
    fail_next_compile: Option<String>,
    auto_complete: bool,
}

/// The recording fake Metal.
pub struct FakeMetal {
    devices: usize,
    max_threads: u64,
    state: Mutex<State>,
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
            state: Mutex::new(State::default()),
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

    /// Finishes every committed command buffer, as the GPU would.
    pub fn complete_all(&self) {
        let mut st = self.st();
        for i in 0..st.cbs.len() {
            if st.cbs[i].status == CommandStatus::Committed {
                finish(&mut st, i);
            }
        }
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

fn finish(st: &mut State, i: usize) {
    let copies = std::mem::take(&mut st.cbs[i].copies);
    for (src, so, dst, d_o, n) in copies {
        let bytes = st.buffers[src.0 as usize][so..so + n].to_vec();
        st.buffers[dst.0 as usize][d_o..d_o + n].copy_from_slice(&bytes);
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
    fn command_buffer(&self, _: &FakeQueue) -> Option<FakeCommandBuffer> {
        let mut st = self.st();
        let cb = FakeCommandBuffer(st.cbs.len() as u32);
        st.cbs.push(CbState {
            status: CommandStatus::NotEnqueued,
            error: None,
            fails: None,
            copies: Vec::new(),
        });
        st.calls.push(Call::CommandBuffer(cb));
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
        st.cbs[i].status = CommandStatus::Committed;
        st.cbs[i].fails = fails;
        if st.auto_complete {
            finish(&mut st, i);
        }
    }
    fn wait_until_completed(&self, cb: &FakeCommandBuffer) {
        let mut st = self.st();
        st.calls.push(Call::WaitUntilCompleted(*cb));
        let i = cb.0 as usize;
        if st.cbs[i].status == CommandStatus::Committed {
            finish(&mut st, i);
        }
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
}
