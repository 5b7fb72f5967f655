//! [`MetalDevice`] as an hcq backend ([`hcq_core::Backend`]), over any [`MetalApi`]: the
//! real Metal on macOS, the recording fake in the Linux tests. A stream is another
//! `MTLCommandQueue` of the device ([`MetalDevice::new_stream`]); a recorded graph is lowered
//! here into a [`GraphSpec`] for [`MetalGraph`], so the lowering runs against the fake too.

use crate::api::MetalApi;
use crate::device::{lock, StreamQueue};
use crate::graph::{BufferRef, ExecItem, GraphSpec, MetalGraph};
use crate::{MetalBuffer, MetalDevice, MetalEvent, MetalProgram};
use hcq_core::backend::{RecordedArg, RecordedItem, Recording, ReplayValues};
use hcq_core::dims::eval_dims;
use hcq_core::{
    Arg, ArgInfo, Backend, BufferAt, CompileOptions, DeviceInfo, Error, LaunchOptions, ProgramInfo,
    Result,
};
use std::path::Path;
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

/// Metal compiles MSL with its own defaults: compile options are refused rather than ignored.
fn takes_no_options(options: &CompileOptions) -> Result<()> {
    if options.is_default() {
        return Ok(());
    }
    Err(Error::Unsupported(
        "compile options for Metal Shading Language".into(),
    ))
}

impl<A> Backend for MetalDevice<A>
where
    A: MetalApi + Clone + 'static,
    A::Device: Clone,
    MetalDevice<A>: Send + Sync,
{
    type Buffer = MetalBuffer<A>;
    type Program = MetalProgram<A>;
    type Event = MetalEvent<A>;
    /// `MetalGraph::replay` takes `&mut self`; the lock also keeps a shared graph `Sync`.
    type Graph = Mutex<MetalGraph<A>>;

    fn name(&self) -> &str {
        &self.name
    }

    fn info(&self) -> DeviceInfo {
        MetalDevice::info(self)
    }

    fn alloc(&self, size: usize) -> Result<MetalBuffer<A>> {
        MetalDevice::alloc(self, size)
    }

    /// Metal buffers are all in memory the host shares.
    fn alloc_host(&self, size: usize) -> Result<MetalBuffer<A>> {
        MetalDevice::alloc(self, size)
    }

    fn compile(&self, source: &str, options: &CompileOptions) -> Result<Vec<u8>> {
        takes_no_options(options)?;
        MetalDevice::compile(self, source)
    }

    fn compile_file(&self, path: &Path, options: &CompileOptions) -> Result<Vec<u8>> {
        takes_no_options(options)?;
        let source = std::fs::read_to_string(path).map_err(|source| Error::Io {
            what: format!("reading {}", path.display()),
            source,
        })?;
        if source.trim().is_empty() {
            return Err(Error::InvalidArgument(format!(
                "{} is empty: there is no kernel to compile",
                path.display()
            )));
        }
        MetalDevice::compile(self, &source)
    }

    fn load_program(&self, code_object: &[u8], name: &str) -> Result<MetalProgram<A>> {
        MetalDevice::load_program(self, code_object, name)
    }

    /// Metal buffers go back to the system when dropped: nothing is cached.
    fn free_cached(&self) -> Result<u64> {
        Ok(0)
    }

    fn open_stream(&self) -> Result<Arc<MetalDevice<A>>> {
        let stream = Arc::new(self.new_stream()?);
        let weak: Weak<dyn StreamQueue> = Arc::downgrade(&stream) as _;
        self.track_stream(weak);
        Ok(stream)
    }

    fn synchronize_all(&self) -> Result<()> {
        self.synchronize_streams()
    }

    /// Metal has no command ring of ours.
    fn last_submission_dwords(&self) -> u64 {
        0
    }

    fn ring_capacity_dwords(&self) -> u64 {
        0
    }

    fn device_address(_: BufferAt<'_, MetalBuffer<A>>) -> Result<u64> {
        Err(Error::Unsupported(
            "device addresses of Metal buffers (bind the buffer instead)".into(),
        ))
    }

    fn is_host(_: &MetalBuffer<A>) -> bool {
        true
    }

    fn host_write(&self, buffer: BufferAt<'_, MetalBuffer<A>>, bytes: &[u8]) -> Result<()> {
        self.copy_in(buffer.buffer, buffer.offset, bytes)
    }

    fn host_read(&self, buffer: BufferAt<'_, MetalBuffer<A>>, out: &mut [u8]) -> Result<()> {
        self.copy_out(out, buffer.buffer, buffer.offset)
    }

    fn program_info(_: &MetalProgram<A>) -> Result<ProgramInfo> {
        Err(Error::Unsupported(
            "program resources and occupancy are reported for AMD kernels only".into(),
        ))
    }

    /// A metallib carries no argument metadata hcq reads.
    fn program_arguments(_: &MetalProgram<A>) -> Option<Vec<ArgInfo>> {
        None
    }

    /// Metal keeps a pipeline alive for the command buffers using it; waiting keeps the
    /// order of frees the same as on AMD.
    fn retire_program(&self, _: &MetalProgram<A>) {
        let _ = self.synchronize_streams();
    }

    fn synchronize(&self) -> Result<()> {
        MetalDevice::synchronize(self)
    }

    fn copy_in(&self, dst: BufferAt<'_, MetalBuffer<A>>, src: &[u8]) -> Result<()> {
        MetalDevice::copy_in(self, dst.buffer, dst.offset, src)
    }

    fn copy_out(&self, dst: &mut [u8], src: BufferAt<'_, MetalBuffer<A>>) -> Result<()> {
        MetalDevice::copy_out(self, dst, src.buffer, src.offset)
    }

    /// A blit on the device that holds both buffers.
    fn copy(
        &self,
        src: BufferAt<'_, MetalBuffer<A>>,
        dst_queue: &MetalDevice<A>,
        dst: BufferAt<'_, MetalBuffer<A>>,
    ) -> Result<()> {
        if dst_queue.id != self.id {
            return Err(Error::Unsupported(format!(
                "copies between Metal devices ({} to {})",
                self.name, dst_queue.name
            )));
        }
        let size = src.size.min(dst.size);
        MetalDevice::copy(self, dst.buffer, dst.offset, src.buffer, src.offset, size)
    }

    /// The pattern is written from the host.
    fn fill(&self, buffer: BufferAt<'_, MetalBuffer<A>>, pattern: &[u8]) -> Result<()> {
        let bytes: Vec<u8> = (0..buffer.size)
            .map(|k| pattern[k % pattern.len()])
            .collect();
        MetalDevice::copy_in(self, buffer.buffer, buffer.offset, &bytes)
    }

    fn launch<B>(
        &self,
        program: &MetalProgram<A>,
        args: &[Arg<B>],
        buffer_of: impl Fn(&B) -> Result<BufferAt<'_, MetalBuffer<A>>>,
        global: [u32; 3],
        local: [u32; 3],
        options: &LaunchOptions,
    ) -> Result<Option<Duration>> {
        self.launch_at(
            program,
            args,
            |b| buffer_of(b).map(|at| (at.buffer, at.offset)),
            global,
            local,
            options.dynamic_lds_bytes as usize,
            options.timed,
        )
    }

    fn record_event(&self) -> Result<MetalEvent<A>> {
        MetalDevice::record_event(self)
    }

    fn wait_event(&self, event: &MetalEvent<A>) -> Result<()> {
        MetalDevice::wait_event(self, event)
    }

    fn event_is_complete(&self, event: &MetalEvent<A>) -> bool {
        MetalDevice::event_is_complete(self, event)
    }

    fn synchronize_event(&self, event: &MetalEvent<A>) -> Result<()> {
        MetalDevice::synchronize_event(self, event)
    }

    fn elapsed_between(&self, start: &MetalEvent<A>, end: &MetalEvent<A>) -> Result<Duration> {
        MetalDevice::elapsed_between(self, start, end)
    }

    fn build_graph(recording: &Recording<'_, MetalDevice<A>>) -> Result<Mutex<MetalGraph<A>>> {
        lower(recording).map(Mutex::new)
    }

    /// Checks the launch limits of the new dimensions before it patches anything.
    fn replay(
        graph: &Mutex<MetalGraph<A>>,
        queues: &[&MetalDevice<A>],
        values: &ReplayValues<'_, MetalBuffer<A>>,
    ) -> Result<()> {
        let [queue] = queues else {
            return Err(Error::Unsupported(
                "Metal graphs spanning several devices".into(),
            ));
        };
        if values.inputs.iter().any(|b| b.offset != 0) {
            return Err(Error::Unsupported(
                "buffer views as inputs of a Metal graph (it binds whole buffers)".into(),
            ));
        }
        let buffers: Vec<&MetalBuffer<A>> = values.inputs.iter().map(|b| b.buffer).collect();
        lock(graph)
            .replay(queue, &buffers, values.vars, false)
            .map(drop)
    }

    /// The one indirect command buffer.
    fn graph_segments(_: &Mutex<MetalGraph<A>>) -> usize {
        1
    }

    /// The binding slots bound to `input`.
    fn graph_input_patches(graph: &Mutex<MetalGraph<A>>, input: usize) -> usize {
        lock(graph)
            .plan()
            .input_slots
            .iter()
            .filter(|&&(_, _, n)| n == input)
            .count()
    }
}

/// The Metal graph of a recording: launches only, on one device, whole buffers, variables
/// after the buffers of each launch (they bind the slots after them).
pub fn lower<A>(rec: &Recording<'_, MetalDevice<A>>) -> Result<MetalGraph<A>>
where
    A: MetalApi + Clone + 'static,
    A::Device: Clone,
    MetalDevice<A>: Send + Sync,
{
    let unsupported = |why: String| Err(Error::Unsupported(format!("Metal graphs: {why}")));
    if rec.devices.len() > 1 {
        return Err(Error::Unsupported(
            "Metal graphs spanning several devices (run them eagerly)".into(),
        ));
    }
    let mut launches = Vec::with_capacity(rec.items.len());
    for item in &rec.items {
        match item {
            RecordedItem::Launch(l) => launches.push(l),
            RecordedItem::Copy(_) => {
                return unsupported("copies are not supported (run them eagerly)".into())
            }
        }
    }
    let fixed = launches.iter().flat_map(|l| {
        l.args.iter().filter_map(|a| match a {
            RecordedArg::Buffer(b) => Some(b),
            _ => None,
        })
    });
    if rec
        .inputs
        .iter()
        .map(|(b, _)| b)
        .chain(fixed)
        .any(|b| b.offset != 0)
    {
        return unsupported(
            "buffer views (the indirect command buffer binds whole buffers)".into(),
        );
    }
    let mut programs: Vec<&MetalProgram<A>> = Vec::new();
    let mut buffers: Vec<&MetalBuffer<A>> = Vec::new();
    let mut items = Vec::with_capacity(launches.len());
    for l in &launches {
        let name = l.program.name();
        if l.dynamic_lds > 0 {
            return unsupported(format!("dynamic threadgroup memory ({name})"));
        }
        let program = match programs.iter().position(|&q| std::ptr::eq(q, l.program)) {
            Some(i) => i,
            None => {
                programs.push(l.program);
                programs.len() - 1
            }
        };
        let mut refs = Vec::new();
        let mut vars = Vec::new();
        for (i, a) in l.args.iter().enumerate() {
            match a {
                RecordedArg::Buffer(_) | RecordedArg::Input(_) if !vars.is_empty() => {
                    return unsupported(format!(
                        "argument {i} of {name} is a buffer after a variable (Metal binds \
                         buffers, then variables)"
                    ));
                }
                RecordedArg::Buffer(b) => {
                    let f = match buffers.iter().position(|q| q.id() == b.buffer.id()) {
                        Some(f) => f,
                        None => {
                            buffers.push(b.buffer);
                            buffers.len() - 1
                        }
                    };
                    refs.push(BufferRef::Fixed(f));
                }
                RecordedArg::Input(n) => refs.push(BufferRef::Input(*n)),
                RecordedArg::Var(v) => vars.push(*v),
                RecordedArg::Value(_) => {
                    return unsupported(format!(
                        "argument {i} of {name} is a scalar other than a variable"
                    ));
                }
            }
        }
        if !l.is_symbolic() {
            // As on AMD: a constant dimension out of range is the caller's error.
            eval_dims(&l.global, &[])?;
            eval_dims(&l.local, &[])?;
        }
        items.push(ExecItem {
            program,
            buffers: refs,
            vars,
            global: l.global.clone(),
            local: l.local.clone(),
        });
    }
    // The first encoding needs dimensions valid for some values within the bounds; every
    // replay re-evaluates the symbolic ones.
    let mins: Vec<i32> = rec.vars.iter().map(|v| v.min).collect();
    let maxs: Vec<i32> = rec.vars.iter().map(|v| v.max).collect();
    let valid = |vals: &[i32]| {
        launches
            .iter()
            .all(|l| eval_dims(&l.global, vals).is_ok() && eval_dims(&l.local, vals).is_ok())
    };
    let Some(initial) = [mins, maxs].into_iter().find(|v| valid(v)) else {
        return unsupported(
            "no launch dimensions valid at the variables' bounds to encode first".into(),
        );
    };
    let spec = GraphSpec {
        items,
        vars: rec.vars.to_vec(),
        num_inputs: rec.inputs.len(),
    };
    let inputs: Vec<&MetalBuffer<A>> = rec.inputs.iter().map(|(b, _)| b.buffer).collect();
    MetalGraph::new(rec.devices[0], spec, &programs, &buffers, &inputs, &initial)
}
