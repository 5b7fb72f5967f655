//! [`AmdDevice`] as an hcq backend ([`hcq_core::Backend`]): the device and each of its streams
//! are queues; graphs lower through [`crate::graph::lower`].

use crate::graph::lower::LoweredGraph;
use crate::program::ArgKind as MetadataKind;
use crate::{AmdBuffer, AmdDevice, AmdEvent, AmdProgram};
use hcq_core::backend::{Recording, ReplayValues};
use hcq_core::{
    Arg, ArgInfo, ArgKind, Backend, BufferAt, CompileOptions, DeviceInfo, LaunchOptions,
    ProgramInfo, Result,
};
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

/// The device address of `b`'s first byte.
pub(crate) fn address(b: BufferAt<'_, AmdBuffer>) -> u64 {
    b.buffer.gpu_address() + b.offset as u64
}

impl Backend for AmdDevice {
    type Buffer = AmdBuffer;
    type Program = AmdProgram;
    type Event = AmdEvent;
    type Graph = LoweredGraph;

    fn name(&self) -> &str {
        &self.name
    }

    fn info(&self) -> DeviceInfo {
        AmdDevice::info(self)
    }

    fn alloc(&self, size: usize) -> Result<AmdBuffer> {
        AmdDevice::alloc(self, size as u64)
    }

    fn alloc_host(&self, size: usize) -> Result<AmdBuffer> {
        AmdDevice::alloc_host(self, size as u64)
    }

    fn compile(&self, source: &str, options: &CompileOptions) -> Result<Vec<u8>> {
        self.compile_with(source, options)
    }

    fn compile_file(&self, path: &Path, options: &CompileOptions) -> Result<Vec<u8>> {
        self.compile_file_with(path, options)
    }

    fn load_program(&self, code_object: &[u8], name: &str) -> Result<AmdProgram> {
        AmdDevice::load_program(self, code_object, name)
    }

    fn free_cached(&self) -> Result<u64> {
        AmdDevice::free_cached(self)
    }

    fn open_stream(&self) -> Result<Arc<AmdDevice>> {
        AmdDevice::open_stream(self)
    }

    fn synchronize_all(&self) -> Result<()> {
        self.synchronize_streams()
    }

    fn last_submission_dwords(&self) -> u64 {
        AmdDevice::last_submission_dwords(self)
    }

    fn ring_capacity_dwords(&self) -> u64 {
        AmdDevice::ring_capacity_dwords(self)
    }

    fn device_address(buffer: BufferAt<'_, AmdBuffer>) -> Result<u64> {
        Ok(address(buffer))
    }

    fn is_host(buffer: &AmdBuffer) -> bool {
        buffer.is_host()
    }

    fn host_write(&self, buffer: BufferAt<'_, AmdBuffer>, bytes: &[u8]) -> Result<()> {
        buffer.buffer.memory().write(buffer.offset as u64, bytes)
    }

    fn host_read(&self, buffer: BufferAt<'_, AmdBuffer>, out: &mut [u8]) -> Result<()> {
        buffer.buffer.memory().read(buffer.offset as u64, out)
    }

    fn program_info(program: &AmdProgram) -> Result<ProgramInfo> {
        Ok(program.info.clone())
    }

    fn program_arguments(program: &AmdProgram) -> Option<Vec<ArgInfo>> {
        if program.args.is_empty() {
            return None;
        }
        let explicit = program.args.iter().filter(|a| a.is_explicit());
        Some(
            explicit
                .map(|a| ArgInfo {
                    name: a.name.clone(),
                    kind: match &a.kind {
                        MetadataKind::Buffer => ArgKind::Buffer,
                        MetadataKind::Value => ArgKind::Value { bytes: a.size },
                        MetadataKind::Hidden(k) | MetadataKind::Other(k) => {
                            ArgKind::Other(k.clone())
                        }
                    },
                })
                .collect(),
        )
    }

    fn retire_program(&self, program: &AmdProgram) {
        // Queued launches may still execute its code: the memory goes only after them.
        if self.synchronize_streams().is_err() {
            // They may still be running (a wait timed out): the device keeps the code until
            // they have finished.
            self.free_after_work(program.image.clone());
        }
    }

    fn synchronize(&self) -> Result<()> {
        AmdDevice::synchronize(self)
    }

    fn copy_in(&self, dst: BufferAt<'_, AmdBuffer>, src: &[u8]) -> Result<()> {
        AmdDevice::copy_in(self, dst.buffer, dst.offset as u64, src)
    }

    fn copy_out(&self, dst: &mut [u8], src: BufferAt<'_, AmdBuffer>) -> Result<()> {
        AmdDevice::copy_out(self, dst, src.buffer, src.offset as u64)
    }

    fn copy(
        &self,
        src: BufferAt<'_, AmdBuffer>,
        dst_queue: &AmdDevice,
        dst: BufferAt<'_, AmdBuffer>,
    ) -> Result<()> {
        self.transfer(
            dst_queue,
            dst.buffer,
            dst.offset as u64,
            src.buffer,
            src.offset as u64,
            src.size.min(dst.size) as u64,
        )
    }

    fn fill(&self, buffer: BufferAt<'_, AmdBuffer>, pattern: &[u8]) -> Result<()> {
        AmdDevice::fill(
            self,
            buffer.buffer,
            buffer.offset as u64,
            buffer.size as u64,
            pattern,
        )
    }

    fn launch<B>(
        &self,
        program: &AmdProgram,
        args: &[Arg<B>],
        buffer_of: impl Fn(&B) -> Result<BufferAt<'_, AmdBuffer>>,
        global: [u32; 3],
        local: [u32; 3],
        options: &LaunchOptions,
    ) -> Result<Option<Duration>> {
        self.launch_with_lds(
            program,
            args,
            |b| buffer_of(b).map(address),
            global,
            local,
            options.dynamic_lds_bytes,
            options.timed,
        )
    }

    fn record_event(&self) -> Result<AmdEvent> {
        AmdDevice::record_event(self)
    }

    fn wait_event(&self, event: &AmdEvent) -> Result<()> {
        AmdDevice::wait_event(self, event)
    }

    fn event_is_complete(&self, event: &AmdEvent) -> bool {
        event.is_complete()
    }

    fn synchronize_event(&self, event: &AmdEvent) -> Result<()> {
        AmdDevice::synchronize_event(self, event)
    }

    fn elapsed_between(&self, start: &AmdEvent, end: &AmdEvent) -> Result<Duration> {
        end.elapsed_since(start)
    }

    fn build_graph(recording: &Recording<'_, AmdDevice>) -> Result<LoweredGraph> {
        LoweredGraph::build(recording)
    }

    fn replay(
        graph: &LoweredGraph,
        queues: &[&AmdDevice],
        values: &ReplayValues<'_, AmdBuffer>,
    ) -> Result<()> {
        graph.replay(queues, values)
    }

    fn graph_segments(graph: &LoweredGraph) -> usize {
        graph.graph().segment_count()
    }

    fn graph_input_patches(graph: &LoweredGraph, input: usize) -> usize {
        graph.graph().input_patch_count(input)
    }
}
