//! The narrow seam between hcq's Metal logic and Metal itself: [`MetalApi`], one method per
//! Metal call the backend makes.
//!
//! Everything above this trait (the device in [`crate::device`], the graph in [`crate::graph`])
//! is plain Rust that decides what to call; implementations only forward. There are two: the
//! objc2 one for macOS (`crate::objc`) and the recording fake (`crate::fake`) that the Linux
//! tests assert against.

use std::ops::Range;

/// A grid or threadgroup size (`MTLSize`).
pub type Size3 = [u32; 3];

/// Where a command buffer is in its life (`MTLCommandBufferStatus`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CommandStatus {
    /// Created, and possibly being encoded, but neither enqueued nor committed.
    NotEnqueued,
    /// Holds its place in the queue's order; not committed yet.
    Enqueued,
    /// Committed: Metal will run it once its turn in the queue comes.
    Committed,
    /// Its resources are ready and it waits for, or runs on, the GPU.
    Scheduled,
    /// Finished without error (terminal).
    Completed,
    /// Finished with an error, which [`MetalApi::error`] describes (terminal). Statuses this
    /// enum does not name are reported as `Error` too.
    Error,
}

impl CommandStatus {
    /// The GPU is done with the command buffer, successfully or not.
    pub fn is_finished(self) -> bool {
        matches!(self, CommandStatus::Completed | CommandStatus::Error)
    }
}

/// The Metal calls hcq makes, one method per Objective-C message (or C function). Handles are
/// associated types; the implementation owns their lifetimes (objc2: retained references).
///
/// Methods that Metal documents as possibly returning `nil` return `Option`; methods with an
/// `NSError` out-parameter return `Result<_, String>` with the error's description.
pub trait MetalApi {
    /// An `MTLDevice`: one GPU.
    type Device;
    /// An `MTLBuffer` in shared storage. Cloning gives another handle to the same buffer (a
    /// retain): a graph keeps such handles to its captured buffers for as long as its indirect
    /// command buffer refers to them, and passes them to [`MetalApi::use_resources`].
    type Buffer: Clone;
    /// An `MTLLibrary`: compiled MSL, from source or from a serialized metallib.
    type Library;
    /// An `MTLFunction`: one kernel entry point of a library.
    type Function;
    /// An `MTLComputePipelineState`. Cloning gives another handle to the same pipeline (a
    /// retain), not a new pipeline.
    type Pipeline: Clone;
    /// An `MTLCommandQueue`.
    type Queue;
    /// An `MTLCommandBuffer`: encoded work submitted with [`MetalApi::commit`]. Cloning gives
    /// another handle to the same command buffer (a retain): an event keeps the one that
    /// signals it, to read its GPU time.
    type CommandBuffer: Clone;
    /// An `MTLComputeCommandEncoder` recording into a command buffer until
    /// [`MetalApi::end_encoding`].
    type ComputeEncoder;
    /// An `MTLBlitCommandEncoder` recording copies into a command buffer until
    /// [`MetalApi::end_blit_encoding`].
    type BlitEncoder;
    /// An `MTLIndirectCommandBuffer` of compute commands, encoded once and executed by
    /// [`MetalApi::execute_commands_in_buffer`].
    type Icb;
    /// An `MTLIndirectComputeCommand`: one slot of an indirect command buffer, valid while the
    /// buffer lives.
    type IcbCommand;
    /// An `MTLSharedEvent`: a 64-bit value that command buffers of any queue set and wait for
    /// on the GPU, and the host reads. Cloning gives another handle to the same event (a
    /// retain).
    type Event: Clone;

    /// Whether this implementation is a stand-in rather than a real Metal.
    const EMULATED: bool;

    /// `MTLCopyAllDevices()`.
    fn copy_all_devices(&self) -> Vec<Self::Device>;
    /// `[device name]`.
    fn device_name(&self, device: &Self::Device) -> String;
    /// `[device recommendedMaxWorkingSetSize]`.
    fn recommended_max_working_set_size(&self, device: &Self::Device) -> u64;
    /// `[device maxBufferLength]`.
    fn max_buffer_length(&self, device: &Self::Device) -> u64;
    /// `[[NSProcessInfo processInfo] operatingSystemVersionString]`: the Metal compiler ships
    /// with the OS, so this identifies it for the compile cache.
    fn operating_system_version(&self) -> String;

    /// `[device newBufferWithLength:length options:MTLResourceStorageModeShared]`.
    fn new_buffer_with_length(&self, device: &Self::Device, length: usize) -> Option<Self::Buffer>;
    /// `[buffer contents]`: the CPU address of a shared buffer's `length` bytes.
    fn contents(&self, buffer: &Self::Buffer) -> *mut u8;
    /// `[buffer length]`.
    fn length(&self, buffer: &Self::Buffer) -> usize;

    /// `[device newLibraryWithSource:options:error:]` with default `MTLCompileOptions`.
    fn new_library_with_source(
        &self,
        device: &Self::Device,
        source: &str,
    ) -> Result<Self::Library, String>;
    /// `[library libraryDataContents]`: the library serialized as a metallib (`MTLB...`). This
    /// is a private Metal method (tinygrad uses it too); `None` when it is not available.
    fn library_data_contents(&self, library: &Self::Library) -> Option<Vec<u8>>;
    /// `[device newLibraryWithData:error:]` over a `dispatch_data_t` of `data`.
    fn new_library_with_data(
        &self,
        device: &Self::Device,
        data: &[u8],
    ) -> Result<Self::Library, String>;
    /// `[library newFunctionWithName:]`.
    fn new_function_with_name(&self, library: &Self::Library, name: &str)
        -> Option<Self::Function>;
    /// `[device newComputePipelineStateWithDescriptor:options:reflection:error:]` with a
    /// descriptor holding `function` and `supportIndirectCommandBuffers`.
    fn new_compute_pipeline_state(
        &self,
        device: &Self::Device,
        function: &Self::Function,
        support_indirect_command_buffers: bool,
    ) -> Result<Self::Pipeline, String>;
    /// `[pipeline maxTotalThreadsPerThreadgroup]`.
    fn max_total_threads_per_threadgroup(&self, pipeline: &Self::Pipeline) -> u64;

    /// `[device newCommandQueueWithMaxCommandBufferCount:]`.
    fn new_command_queue(
        &self,
        device: &Self::Device,
        max_command_buffers: usize,
    ) -> Option<Self::Queue>;
    /// `[queue commandBuffer]`.
    fn command_buffer(&self, queue: &Self::Queue) -> Option<Self::CommandBuffer>;
    /// `[commandBuffer computeCommandEncoder]`.
    fn compute_command_encoder(&self, cb: &Self::CommandBuffer) -> Option<Self::ComputeEncoder>;
    /// `[encoder setComputePipelineState:]`.
    fn set_compute_pipeline_state(&self, encoder: &Self::ComputeEncoder, pipeline: &Self::Pipeline);
    /// `[encoder setBuffer:offset:atIndex:]`.
    fn set_buffer(
        &self,
        encoder: &Self::ComputeEncoder,
        buffer: &Self::Buffer,
        offset: usize,
        index: usize,
    );
    /// `[encoder setBytes:length:atIndex:]`.
    fn set_bytes(&self, encoder: &Self::ComputeEncoder, bytes: &[u8], index: usize);
    /// `[encoder setThreadgroupMemoryLength:atIndex:]`: `length` bytes (a multiple of 16) of
    /// threadgroup memory for the kernel's `[[threadgroup(index)]]` argument.
    fn set_threadgroup_memory_length(
        &self,
        encoder: &Self::ComputeEncoder,
        length: usize,
        index: usize,
    );
    /// `[encoder dispatchThreadgroups:threadsPerThreadgroup:]`.
    fn dispatch_threadgroups(
        &self,
        encoder: &Self::ComputeEncoder,
        threadgroups: Size3,
        threads_per_threadgroup: Size3,
    );
    /// `[encoder useResources:count:usage:]` with `MTLResourceUsageRead | MTLResourceUsageWrite`.
    fn use_resources(&self, encoder: &Self::ComputeEncoder, resources: &[Self::Buffer]);
    /// `[encoder executeCommandsInBuffer:withRange:]`.
    fn execute_commands_in_buffer(
        &self,
        encoder: &Self::ComputeEncoder,
        icb: &Self::Icb,
        range: Range<usize>,
    );
    /// `[encoder endEncoding]` (compute).
    fn end_encoding(&self, encoder: &Self::ComputeEncoder);

    /// `[commandBuffer blitCommandEncoder]`.
    fn blit_command_encoder(&self, cb: &Self::CommandBuffer) -> Option<Self::BlitEncoder>;
    /// `[blit copyFromBuffer:sourceOffset:toBuffer:destinationOffset:size:]`.
    fn copy_from_buffer(
        &self,
        blit: &Self::BlitEncoder,
        src: &Self::Buffer,
        src_offset: usize,
        dst: &Self::Buffer,
        dst_offset: usize,
        size: usize,
    );
    /// `[blit endEncoding]`.
    fn end_blit_encoding(&self, blit: &Self::BlitEncoder);

    /// `[commandBuffer commit]`.
    fn commit(&self, cb: &Self::CommandBuffer);
    /// `[commandBuffer waitUntilCompleted]`.
    fn wait_until_completed(&self, cb: &Self::CommandBuffer);
    /// `[commandBuffer status]`.
    fn status(&self, cb: &Self::CommandBuffer) -> CommandStatus;
    /// `[commandBuffer error]`, as its localized description.
    fn error(&self, cb: &Self::CommandBuffer) -> Option<String>;
    /// `[commandBuffer GPUStartTime]`, in seconds.
    fn gpu_start_time(&self, cb: &Self::CommandBuffer) -> f64;
    /// `[commandBuffer GPUEndTime]`, in seconds.
    fn gpu_end_time(&self, cb: &Self::CommandBuffer) -> f64;

    /// `[device newIndirectCommandBufferWithDescriptor:maxCommandCount:options:]` with a
    /// descriptor for concurrent compute dispatches that inherit neither buffers nor pipeline
    /// state, allowing `max_kernel_buffer_bind_count` bindings per command.
    fn new_indirect_command_buffer(
        &self,
        device: &Self::Device,
        max_command_count: usize,
        max_kernel_buffer_bind_count: usize,
    ) -> Option<Self::Icb>;
    /// `[icb indirectComputeCommandAtIndex:]`.
    fn indirect_compute_command_at_index(&self, icb: &Self::Icb, index: usize) -> Self::IcbCommand;
    /// `[command setComputePipelineState:]`.
    fn icb_set_compute_pipeline_state(&self, command: &Self::IcbCommand, pipeline: &Self::Pipeline);
    /// `[command setKernelBuffer:offset:atIndex:]`.
    fn set_kernel_buffer(
        &self,
        command: &Self::IcbCommand,
        buffer: &Self::Buffer,
        offset: usize,
        index: usize,
    );
    /// `[command concurrentDispatchThreadgroups:threadsPerThreadgroup:]`.
    fn concurrent_dispatch_threadgroups(
        &self,
        command: &Self::IcbCommand,
        threadgroups: Size3,
        threads_per_threadgroup: Size3,
    );
    /// `[command setBarrier]`.
    fn set_barrier(&self, command: &Self::IcbCommand);

    /// `[device newSharedEvent]`: a new event at value 0.
    fn new_shared_event(&self, device: &Self::Device) -> Option<Self::Event>;
    /// `[commandBuffer encodeSignalEvent:value:]` (no encoder open): when the GPU gets there,
    /// after the commands encoded before, it sets the event to `value`.
    fn encode_signal_event(&self, cb: &Self::CommandBuffer, event: &Self::Event, value: u64);
    /// `[commandBuffer encodeWaitForEvent:value:]` (no encoder open): the GPU runs nothing
    /// encoded after this point until the event has reached `value`.
    fn encode_wait_for_event(&self, cb: &Self::CommandBuffer, event: &Self::Event, value: u64);
    /// `[event signaledValue]`: the value the event has now.
    fn signaled_value(&self, event: &Self::Event) -> u64;
}
