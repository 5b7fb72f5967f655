//! [`MetalApi`] over the real Metal framework, through `objc2-metal`. macOS only.
//!
//! Each method forwards to the one Metal call it is named after; no decision is made here.
//! This code has never run: no machine of this project is a Mac. It is type-checked for
//! `aarch64-apple-darwin` by `scripts/check-apple.sh`.

use crate::api::{CommandStatus, MetalApi, Size3};
use dispatch2::DispatchData;
use objc2::rc::Retained;
use objc2::runtime::{NSObjectProtocol, ProtocolObject};
use objc2::{msg_send, sel};
use objc2_foundation::{NSData, NSProcessInfo, NSRange, NSString};
use objc2_metal::{
    MTLBlitCommandEncoder, MTLBuffer, MTLCommandBuffer, MTLCommandBufferStatus, MTLCommandEncoder,
    MTLCommandQueue, MTLCompileOptions, MTLComputeCommandEncoder, MTLComputePipelineDescriptor,
    MTLComputePipelineState, MTLCopyAllDevices, MTLDevice, MTLEvent, MTLFunction,
    MTLIndirectCommandBuffer, MTLIndirectCommandBufferDescriptor, MTLIndirectCommandType,
    MTLIndirectComputeCommand, MTLLibrary, MTLPipelineOption, MTLResource, MTLResourceOptions,
    MTLResourceUsage, MTLSharedEvent, MTLSize,
};
use std::ops::Range;
use std::ptr::NonNull;

type Obj<P> = Retained<ProtocolObject<P>>;

/// The real Metal framework.
#[derive(Debug, Default, Clone, Copy)]
pub struct ObjcMetal;

fn size(s: Size3) -> MTLSize {
    MTLSize {
        width: s[0] as usize,
        height: s[1] as usize,
        depth: s[2] as usize,
    }
}

impl MetalApi for ObjcMetal {
    type Device = Obj<dyn MTLDevice>;
    type Buffer = Obj<dyn MTLBuffer>;
    type Library = Obj<dyn MTLLibrary>;
    type Function = Obj<dyn MTLFunction>;
    type Pipeline = Obj<dyn MTLComputePipelineState>;
    type Queue = Obj<dyn MTLCommandQueue>;
    type CommandBuffer = Obj<dyn MTLCommandBuffer>;
    type ComputeEncoder = Obj<dyn MTLComputeCommandEncoder>;
    type BlitEncoder = Obj<dyn MTLBlitCommandEncoder>;
    type Icb = Obj<dyn MTLIndirectCommandBuffer>;
    type IcbCommand = Obj<dyn MTLIndirectComputeCommand>;
    type Event = Obj<dyn MTLSharedEvent>;

    const EMULATED: bool = false;

    fn copy_all_devices(&self) -> Vec<Self::Device> {
        MTLCopyAllDevices().to_vec()
    }

    fn device_name(&self, device: &Self::Device) -> String {
        device.name().to_string()
    }

    fn recommended_max_working_set_size(&self, device: &Self::Device) -> u64 {
        device.recommendedMaxWorkingSetSize()
    }

    fn max_buffer_length(&self, device: &Self::Device) -> u64 {
        device.maxBufferLength() as u64
    }

    fn operating_system_version(&self) -> String {
        NSProcessInfo::processInfo()
            .operatingSystemVersionString()
            .to_string()
    }

    fn new_buffer_with_length(&self, device: &Self::Device, length: usize) -> Option<Self::Buffer> {
        device.newBufferWithLength_options(length, MTLResourceOptions::StorageModeShared)
    }

    fn contents(&self, buffer: &Self::Buffer) -> *mut u8 {
        buffer.contents().as_ptr().cast::<u8>()
    }

    fn length(&self, buffer: &Self::Buffer) -> usize {
        buffer.length()
    }

    fn new_library_with_source(
        &self,
        device: &Self::Device,
        source: &str,
    ) -> Result<Self::Library, String> {
        let options = MTLCompileOptions::new();
        device
            .newLibraryWithSource_options_error(&NSString::from_str(source), Some(&options))
            .map_err(|e| e.localizedDescription().to_string())
    }

    fn library_data_contents(&self, library: &Self::Library) -> Option<Vec<u8>> {
        let sel = sel!(libraryDataContents);
        if !library.respondsToSelector(sel) {
            return None;
        }
        // SAFETY: the library answers `libraryDataContents` (checked above), a private method
        // taking no arguments that returns an autoreleased `NSData *` (possibly nil); objc2
        // retains the result.
        let data: Option<Retained<NSData>> = unsafe { msg_send![&**library, libraryDataContents] };
        data.map(|d| d.to_vec())
    }

    fn new_library_with_data(
        &self,
        device: &Self::Device,
        data: &[u8],
    ) -> Result<Self::Library, String> {
        let data = DispatchData::from_bytes(data);
        device
            .newLibraryWithData_error(&data)
            .map_err(|e| e.localizedDescription().to_string())
    }

    fn new_function_with_name(
        &self,
        library: &Self::Library,
        name: &str,
    ) -> Option<Self::Function> {
        library.newFunctionWithName(&NSString::from_str(name))
    }

    fn new_compute_pipeline_state(
        &self,
        device: &Self::Device,
        function: &Self::Function,
        support_indirect_command_buffers: bool,
    ) -> Result<Self::Pipeline, String> {
        let descriptor = MTLComputePipelineDescriptor::new();
        descriptor.setComputeFunction(Some(function));
        descriptor.setSupportIndirectCommandBuffers(support_indirect_command_buffers);
        device
            .newComputePipelineStateWithDescriptor_options_reflection_error(
                &descriptor,
                MTLPipelineOption::None,
                None,
            )
            .map_err(|e| e.localizedDescription().to_string())
    }

    fn max_total_threads_per_threadgroup(&self, pipeline: &Self::Pipeline) -> u64 {
        pipeline.maxTotalThreadsPerThreadgroup() as u64
    }

    fn new_command_queue(
        &self,
        device: &Self::Device,
        max_command_buffers: usize,
    ) -> Option<Self::Queue> {
        device.newCommandQueueWithMaxCommandBufferCount(max_command_buffers)
    }

    fn command_buffer(&self, queue: &Self::Queue) -> Option<Self::CommandBuffer> {
        queue.commandBuffer()
    }

    fn compute_command_encoder(&self, cb: &Self::CommandBuffer) -> Option<Self::ComputeEncoder> {
        cb.computeCommandEncoder()
    }

    fn set_compute_pipeline_state(
        &self,
        encoder: &Self::ComputeEncoder,
        pipeline: &Self::Pipeline,
    ) {
        encoder.setComputePipelineState(pipeline);
    }

    fn set_buffer(
        &self,
        encoder: &Self::ComputeEncoder,
        buffer: &Self::Buffer,
        offset: usize,
        index: usize,
    ) {
        // SAFETY: `buffer` is a live MTLBuffer (retained by the caller), and the callers keep
        // `offset` inside it and `index` below Metal's 31 buffer bindings.
        unsafe { encoder.setBuffer_offset_atIndex(Some(buffer), offset, index) };
    }

    fn set_threadgroup_memory_length(
        &self,
        encoder: &Self::ComputeEncoder,
        length: usize,
        index: usize,
    ) {
        // SAFETY: the callers round `length` to a multiple of 16 and keep it within the
        // device's threadgroup memory; `index` is 0, a valid threadgroup binding.
        unsafe { encoder.setThreadgroupMemoryLength_atIndex(length, index) };
    }

    fn set_bytes(&self, encoder: &Self::ComputeEncoder, bytes: &[u8], index: usize) {
        let Some(ptr) = NonNull::new(bytes.as_ptr().cast_mut()) else {
            return;
        };
        // SAFETY: `ptr` points at `bytes.len()` readable bytes; Metal copies them before
        // returning and never writes through the pointer. `index` is below 31 (checked by the
        // caller).
        unsafe { encoder.setBytes_length_atIndex(ptr.cast(), bytes.len(), index) };
    }

    fn dispatch_threadgroups(
        &self,
        encoder: &Self::ComputeEncoder,
        threadgroups: Size3,
        threads: Size3,
    ) {
        encoder.dispatchThreadgroups_threadsPerThreadgroup(size(threadgroups), size(threads));
    }

    fn use_resources(&self, encoder: &Self::ComputeEncoder, resources: &[Self::Buffer]) {
        let mut refs: Vec<NonNull<ProtocolObject<dyn MTLResource>>> = resources
            .iter()
            .map(|b| {
                let r: &ProtocolObject<dyn MTLResource> = ProtocolObject::from_ref(&**b);
                NonNull::from(r)
            })
            .collect();
        let Some(ptr) = NonNull::new(refs.as_mut_ptr()) else {
            return;
        };
        // SAFETY: `ptr` points at `refs.len()` pointers to live MTLResources (the buffers are
        // retained by `resources`, which outlives the call); Metal only reads the array.
        unsafe {
            encoder.useResources_count_usage(
                ptr,
                refs.len(),
                MTLResourceUsage::Read | MTLResourceUsage::Write,
            )
        };
    }

    fn execute_commands_in_buffer(
        &self,
        encoder: &Self::ComputeEncoder,
        icb: &Self::Icb,
        range: Range<usize>,
    ) {
        let range = NSRange::new(range.start, range.end.saturating_sub(range.start));
        // SAFETY: the graph passes the range `0..commands`, inside the ICB it created with
        // exactly that many commands, all of them encoded.
        unsafe { encoder.executeCommandsInBuffer_withRange(icb, range) };
    }

    fn end_encoding(&self, encoder: &Self::ComputeEncoder) {
        encoder.endEncoding();
    }

    fn blit_command_encoder(&self, cb: &Self::CommandBuffer) -> Option<Self::BlitEncoder> {
        cb.blitCommandEncoder()
    }

    fn copy_from_buffer(
        &self,
        blit: &Self::BlitEncoder,
        src: &Self::Buffer,
        src_offset: usize,
        dst: &Self::Buffer,
        dst_offset: usize,
        size: usize,
    ) {
        // SAFETY: the device checked both ranges against the buffers' sizes, and both buffers
        // are live (retained by the caller).
        unsafe {
            blit.copyFromBuffer_sourceOffset_toBuffer_destinationOffset_size(
                src, src_offset, dst, dst_offset, size,
            )
        };
    }

    fn end_blit_encoding(&self, blit: &Self::BlitEncoder) {
        blit.endEncoding();
    }

    fn commit(&self, cb: &Self::CommandBuffer) {
        cb.commit();
    }

    fn wait_until_completed(&self, cb: &Self::CommandBuffer) {
        cb.waitUntilCompleted();
    }

    fn status(&self, cb: &Self::CommandBuffer) -> CommandStatus {
        match cb.status() {
            MTLCommandBufferStatus::NotEnqueued => CommandStatus::NotEnqueued,
            MTLCommandBufferStatus::Enqueued => CommandStatus::Enqueued,
            MTLCommandBufferStatus::Committed => CommandStatus::Committed,
            MTLCommandBufferStatus::Scheduled => CommandStatus::Scheduled,
            MTLCommandBufferStatus::Completed => CommandStatus::Completed,
            _ => CommandStatus::Error,
        }
    }

    fn error(&self, cb: &Self::CommandBuffer) -> Option<String> {
        cb.error().map(|e| e.localizedDescription().to_string())
    }

    fn gpu_start_time(&self, cb: &Self::CommandBuffer) -> f64 {
        cb.GPUStartTime()
    }

    fn gpu_end_time(&self, cb: &Self::CommandBuffer) -> f64 {
        cb.GPUEndTime()
    }

    fn new_indirect_command_buffer(
        &self,
        device: &Self::Device,
        max_command_count: usize,
        max_kernel_buffer_bind_count: usize,
    ) -> Option<Self::Icb> {
        let descriptor = MTLIndirectCommandBufferDescriptor::new();
        descriptor.setCommandTypes(MTLIndirectCommandType::ConcurrentDispatch);
        descriptor.setInheritBuffers(false);
        descriptor.setInheritPipelineState(false);
        descriptor.setMaxKernelBufferBindCount(max_kernel_buffer_bind_count);
        // SAFETY: `max_command_count` is the number of commands the graph encodes (at least
        // one, checked by the plan); the descriptor is fully initialized above.
        unsafe {
            device.newIndirectCommandBufferWithDescriptor_maxCommandCount_options(
                &descriptor,
                max_command_count,
                MTLResourceOptions::empty(),
            )
        }
    }

    fn indirect_compute_command_at_index(&self, icb: &Self::Icb, index: usize) -> Self::IcbCommand {
        // SAFETY: the graph only asks for indices below the command count it created the ICB
        // with.
        unsafe { icb.indirectComputeCommandAtIndex(index) }
    }

    fn icb_set_compute_pipeline_state(
        &self,
        command: &Self::IcbCommand,
        pipeline: &Self::Pipeline,
    ) {
        command.setComputePipelineState(pipeline);
    }

    fn set_kernel_buffer(
        &self,
        command: &Self::IcbCommand,
        buffer: &Self::Buffer,
        offset: usize,
        index: usize,
    ) {
        // SAFETY: `buffer` is live (retained by the graph for the ICB's lifetime), `offset`
        // lies inside it (the int buffer holds 4 bytes per variable; other buffers bind at 0)
        // and `index` is below the ICB's 31 bindings (checked by the plan).
        unsafe { command.setKernelBuffer_offset_atIndex(buffer, offset, index) };
    }

    fn concurrent_dispatch_threadgroups(
        &self,
        command: &Self::IcbCommand,
        threadgroups: Size3,
        threads: Size3,
    ) {
        command.concurrentDispatchThreadgroups_threadsPerThreadgroup(
            size(threadgroups),
            size(threads),
        );
    }

    fn set_barrier(&self, command: &Self::IcbCommand) {
        command.setBarrier();
    }

    fn new_shared_event(&self, device: &Self::Device) -> Option<Self::Event> {
        device.newSharedEvent()
    }

    fn encode_signal_event(&self, cb: &Self::CommandBuffer, event: &Self::Event, value: u64) {
        cb.encodeSignalEvent_value(ProtocolObject::<dyn MTLEvent>::from_ref(&**event), value);
    }

    fn encode_wait_for_event(&self, cb: &Self::CommandBuffer, event: &Self::Event, value: u64) {
        cb.encodeWaitForEvent_value(ProtocolObject::<dyn MTLEvent>::from_ref(&**event), value);
    }

    fn signaled_value(&self, event: &Self::Event) -> u64 {
        event.signaledValue()
    }
}

/// The objc2 Metal device.
pub type SystemMetalDevice = crate::MetalDevice<ObjcMetal>;

/// Opens the `index`-th Metal device of this Mac.
pub fn open_system_device(index: usize) -> hcq_core::Result<SystemMetalDevice> {
    crate::MetalDevice::open(ObjcMetal, index)
}

// To Rust, objc2's Metal objects are neither `Send` nor `Sync` (it cannot know which protocol
// objects are thread-safe); these state it for the device and its events, on the strength of
// how device.rs uses what they hold.
//
// SAFETY: a `MetalDevice<ObjcMetal>` holds plain Rust data (its name, ids, the compile cache,
// its streams as `Weak<dyn StreamQueue>`, which are `Send + Sync`), the unit `ObjcMetal`, an
// `MTLDevice` and an `MTLCommandQueue`, which Apple documents as thread-safe, and in its
// `Mutex<DeviceState>` the committed `MTLCommandBuffer`s and its events' `MTLSharedEvent`
// (thread-safe too): device.rs touches the command buffers only with that lock held
// (`submit_locked`, `wait_*_locked`, `record_event`), so one thread at a time, and
// retaining/releasing an Objective-C object is atomic. A change to that locking must revisit
// this.
unsafe impl Send for crate::MetalDevice<ObjcMetal> {}
// SAFETY: as for `Send` above: through `&MetalDevice<ObjcMetal>`, the thread-safe `MTLDevice`
// and `MTLCommandQueue` are used directly and the command buffers only under the device's lock.
unsafe impl Sync for crate::MetalDevice<ObjcMetal> {}

// SAFETY: the event holds an `MTLSharedEvent`, which Apple documents as usable from any thread
// (and any device, and other processes), plain Rust data, and the retained `MTLCommandBuffer`
// that sets it: that one is only retained and released (atomic) and, in
// `MetalDevice::elapsed_between`, read for its `GPUEndTime` once it has finished, under a
// device's lock.
unsafe impl Send for crate::MetalEvent<ObjcMetal> {}
// SAFETY: as for `Send`: through `&MetalEvent<ObjcMetal>` only `signaledValue` of the shared
// event is called directly; the command buffer is read as above.
unsafe impl Sync for crate::MetalEvent<ObjcMetal> {}

/// Names of this Mac's Metal devices.
pub fn system_device_names() -> Vec<String> {
    crate::device::device_names(&ObjcMetal)
}
