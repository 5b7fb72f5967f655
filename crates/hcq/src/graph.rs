//! Graphs: a captured sequence of kernel launches and device-to-device copies replayed with one
//! submission per queue, and [`Jit`],
//! which captures a closure's launches and replays them.
//!
//! ```
//! # fn main() -> hcq::Result<()> {
//! # let dev = hcq::Device::default_device()?;
//! # let lib = dev.compile("__global__ void add_f32(float* c, const float* a, const float* b, \
//! #     int n) { int i = blockIdx.x * 64 + threadIdx.x; if (i < n) c[i] = a[i] + b[i]; }")?;
//! # let prg = dev.program(&lib, "add_f32")?;
//! # let (a, b, c) = (dev.alloc(4096)?, dev.alloc(4096)?, dev.alloc_zeros::<f32>(1024)?);
//! # a.write(&[1.5f32; 1024])?;
//! # b.write(&[2.0f32; 1024])?;
//! use hcq::{DimExpr, GraphArg, GraphBuilder};
//! let mut g = GraphBuilder::new();
//! let n = g.var("n", 1, 1024)?;                 // a symbolic int32 with inclusive bounds
//! let x = g.input(&a);                          // a swappable input: 4096 bytes on dev
//! g.launch(
//!     &prg,
//!     &[GraphArg::Buffer(&c), GraphArg::Input(x), GraphArg::Buffer(&b), GraphArg::Var(n)],
//!     [DimExpr::from(n).ceil_div(64), 1.into(), 1.into()],
//!     [64.into(), 1.into(), 1.into()],
//! )?;
//! let graph = g.build()?;
//! graph.replay(&[&a], &[1000])?;                // inputs and variable values, in order
//! # let out: Vec<f32> = c.read()?;
//! # assert!(out[..1000].iter().all(|&v| v == 3.5) && out[1000..].iter().all(|&v| v == 0.0));
//! # Ok(()) }
//! ```
//!
//! ## Contracts
//! - **Inputs** are declared with an example buffer ([`GraphBuilder::input`]); every replay
//!   passes one buffer per input, of exactly that size and on that device, else
//!   [`Error::InvalidArgument`]. Every argument slot bound to the input takes the new address.
//! - **Variables** have a name and inclusive bounds; every replay passes one value per variable
//!   (declaration order). A value out of bounds is an [`Error::InvalidArgument`]. Variables are
//!   passed to kernels as `int32` ([`GraphArg::Var`]) and may appear in launch dimensions
//!   ([`DimExpr`]), which are re-evaluated (only when a variable changed) and validated
//!   before anything is rewritten.
//! - **Errors leave the graph usable**: a replay validates everything before it patches.
//! - **Ordering**: a replay runs after all work queued before it on the graph's devices (eager
//!   launches, copies, other replays) and before work queued after it on any of them, through
//!   the device timelines. It returns once queued; [`Device::synchronize`] on any of the
//!   graph's devices ([`Graph::devices`]) waits for the whole replay. A replay that changes an
//!   input, a variable or a dimension first waits for the graph's previous replay (the GPU
//!   reads the words it rewrites); a replay that changes nothing does not wait, so replays
//!   pipeline.
//! - **Lifetime**: the graph holds clones of the buffers and programs it was built with and of
//!   the inputs of its last replay; dropping it waits for its devices.
//! - **Copies** ([`GraphBuilder::copy`]) between fixed buffers or inputs run on the copy
//!   engine of the source's device from a command stream built once, submitted with one SDMA
//!   `INDIRECT` per replay, concurrently with the compute streams. The source and destination
//!   may be on different GPUs of one driver (the destination is mapped on the source's GPU;
//!   an input there is mapped when a replay binds a new buffer).
//! - **Several devices**: a graph may launch kernels on several GPUs of one driver and copy
//!   between them. Each kernel's buffers and inputs must be on its own device. Each device
//!   gets its own streams; the first device the graph touches leads replays.
//! - **Hazards**: items are ordered by the buffers they touch (a kernel is assumed to read and
//!   write every buffer it is given, a copy reads its source and writes its destination): a
//!   read-after-write, write-after-read or write-after-write across two streams becomes a
//!   wait on a graph-private signal; independent items do not wait on each other. Hence, in a
//!   graph with copies, a replay's inputs must not overlap each other or a
//!   fixed buffer of the graph ([`Error::InvalidArgument`]).
//! - **Host cost** of a replay does not grow with the number of launches: it is the compare of
//!   inputs and variables, the rewrite of the words bound to what changed, and a few packets
//!   on each ring of the graph.
//! - **Fallback**: a graph the backend cannot build (devices of different drivers; on Metal,
//!   several devices, copies, scalar arguments other than [`GraphArg::Var`], and a buffer or
//!   input after a variable in a launch's arguments) fails with [`Error::Unsupported`]; run the
//!   work eagerly instead ([`Jit`] does).
//! - **Metal** (macOS): the launches are encoded once into an indirect command buffer
//!   (`hcq_metal::MetalGraph`); a launch's buffers and inputs bind `[[buffer(0..b)]]` and its
//!   variables the next slots, in argument order.

use crate::backends::{foreign, whole, AnyGraph, Member};
use crate::{Buffer, Device, LaunchOptions, Program};
use hcq_core::backend;
use hcq_core::dims::eval_dims;
use hcq_core::{Arg, Error, Result};
pub use hcq_core::{DimExpr, DimExprs, Var, VarSpec};
use std::sync::Mutex;

/// A swappable input buffer of a graph (an index in declaration order).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Input(usize);

impl Input {
    /// Its position among the graph's inputs (the slot of `inputs` in a replay).
    pub fn index(self) -> usize {
        self.0
    }
}

/// A kernel argument of a captured launch.
#[derive(Debug, Clone, Copy)]
pub enum GraphArg<'a> {
    /// A buffer fixed for the life of the graph.
    Buffer(&'a Buffer),
    /// A graph input: the buffer the replay binds.
    Input(Input),
    /// A variable, passed as an `int32`.
    Var(Var),
    /// A value fixed for the life of the graph: any by-value [`Arg`](crate::Arg)
    /// (`Arg::I32(n)`, `Arg::F32(x)`, `Arg::Bytes(..)`, ...), not a buffer.
    Value(crate::Arg<'a>),
}

/// A kernel argument as a graph argument: a buffer stays one, a value is fixed.
impl<'a> From<crate::Arg<'a>> for GraphArg<'a> {
    fn from(arg: crate::Arg<'a>) -> Self {
        match arg {
            Arg::Buffer(b) => GraphArg::Buffer(b),
            value => GraphArg::Value(value),
        }
    }
}

#[derive(Debug, Clone)]
enum RecordedArg {
    Buffer(Buffer),
    Input(usize),
    Var(usize),
    Scalar(Arg<()>),
}

#[derive(Debug, Clone)]
struct RecordedLaunch {
    program: Program,
    args: Vec<RecordedArg>,
    global: DimExprs,
    local: DimExprs,
    dynamic_lds: u32,
}

/// One end of a graph copy: a fixed buffer or a graph input.
#[derive(Debug, Clone, Copy)]
pub enum GraphBuf<'a> {
    /// A buffer fixed for the life of the graph.
    Buffer(&'a Buffer),
    /// A graph input: the buffer the replay binds.
    Input(Input),
}

impl<'a> From<&'a Buffer> for GraphBuf<'a> {
    fn from(b: &'a Buffer) -> Self {
        GraphBuf::Buffer(b)
    }
}

impl From<Input> for GraphBuf<'_> {
    fn from(x: Input) -> Self {
        GraphBuf::Input(x)
    }
}

#[derive(Debug, Clone)]
enum RecordedEnd {
    Buffer(Buffer),
    Input(usize),
}

#[derive(Debug, Clone)]
enum Recorded {
    Launch(RecordedLaunch),
    Copy {
        src: RecordedEnd,
        dst: RecordedEnd,
        size: usize,
    },
}

/// Records launches (and, for the backends that support them, copies) into a [`Graph`].
#[derive(Debug, Default, Clone)]
pub struct GraphBuilder {
    vars: Vec<VarSpec>,
    /// Example buffer of each input (its size and device are the input's).
    inputs: Vec<Buffer>,
    items: Vec<Recorded>,
    segment_dwords: Option<u32>,
}

impl GraphBuilder {
    /// An empty graph (the same as `GraphBuilder::default()`).
    pub fn new() -> Self {
        Self::default()
    }

    /// Declares a variable with inclusive bounds.
    pub fn var(&mut self, name: &str, min: i32, max: i32) -> Result<Var> {
        if min > max {
            return Err(Error::InvalidArgument(format!(
                "variable {name}: bounds {min}..={max} are empty"
            )));
        }
        self.vars.push(VarSpec {
            name: name.to_string(),
            min,
            max,
        });
        Ok(Var::new(self.vars.len() - 1))
    }

    /// Declares an input shaped like `example` (its size and device); the graph is built with
    /// `example` bound.
    pub fn input(&mut self, example: &Buffer) -> Input {
        self.inputs.push(example.clone());
        Input(self.inputs.len() - 1)
    }

    /// Splits the command stream into indirect buffers of at most `dwords` (tests).
    pub fn segment_dwords(&mut self, dwords: u32) -> &mut Self {
        self.segment_dwords = Some(dwords);
        self
    }

    /// Records a launch of `program` with `args` over `global` workgroups of `local`
    /// work-items. Handles must come from this builder; arguments are checked against the
    /// kernel when the graph is built.
    pub fn launch(
        &mut self,
        program: &Program,
        args: &[GraphArg<'_>],
        global: DimExprs,
        local: DimExprs,
    ) -> Result<()> {
        self.launch_with(program, args, global, local, &LaunchOptions::default())
    }

    /// [`GraphBuilder::launch`] with `options` (dynamic LDS; a graph's launches are not timed
    /// one by one, so `timed` is an [`Error::InvalidArgument`]).
    pub fn launch_with(
        &mut self,
        program: &Program,
        args: &[GraphArg<'_>],
        global: DimExprs,
        local: DimExprs,
        options: &LaunchOptions,
    ) -> Result<()> {
        if options.timed {
            return Err(Error::InvalidArgument(format!(
                "launch of {}: graph launches are not timed one by one",
                program.name()
            )));
        }
        let mut recorded = Vec::with_capacity(args.len());
        for (i, a) in args.iter().enumerate() {
            recorded.push(match *a {
                GraphArg::Buffer(b) => RecordedArg::Buffer(b.clone()),
                GraphArg::Input(x) if x.0 < self.inputs.len() => RecordedArg::Input(x.0),
                GraphArg::Var(v) if v.index() < self.vars.len() => RecordedArg::Var(v.index()),
                GraphArg::Input(_) | GraphArg::Var(_) => {
                    return Err(Error::InvalidArgument(format!(
                        "argument {i} of {}: an input or variable of another graph",
                        program.name()
                    )))
                }
                GraphArg::Value(v) => match v.map_scalar() {
                    Some(v) => RecordedArg::Scalar(v),
                    None => {
                        return Err(Error::InvalidArgument(format!(
                            "argument {i} of {}: a buffer goes in GraphArg::Buffer",
                            program.name()
                        )))
                    }
                },
            });
        }
        for e in global.iter().chain(&local) {
            if e.max_var().is_some_and(|v| v.index() >= self.vars.len()) {
                return Err(Error::InvalidArgument(format!(
                    "launch of {}: dimension {e:?} uses a variable of another graph",
                    program.name()
                )));
            }
        }
        self.items.push(Recorded::Launch(RecordedLaunch {
            program: program.clone(),
            args: recorded,
            global,
            local,
            dynamic_lds: options.dynamic_lds_bytes,
        }));
        Ok(())
    }

    /// Records a device-to-device copy of the first `size` bytes of `src` into `dst` (fixed
    /// buffers or inputs of this builder, on the same GPU or on two GPUs of one driver; the
    /// source's copy engine runs it).
    pub fn copy<'a>(
        &mut self,
        src: impl Into<GraphBuf<'a>>,
        dst: impl Into<GraphBuf<'a>>,
        size: usize,
    ) -> Result<()> {
        let end = |b: GraphBuf<'_>| match b {
            GraphBuf::Buffer(b) => Ok((RecordedEnd::Buffer(b.clone()), b.size())),
            GraphBuf::Input(x) => match self.inputs.get(x.0) {
                Some(e) => Ok((RecordedEnd::Input(x.0), e.size())),
                None => Err(Error::InvalidArgument(
                    "copy: an input of another graph".into(),
                )),
            },
        };
        let (src, src_size) = end(src.into())?;
        let (dst, dst_size) = end(dst.into())?;
        if size == 0 || size > src_size || size > dst_size {
            return Err(Error::InvalidArgument(format!(
                "copy of {size} bytes from a {src_size}-byte buffer to a {dst_size}-byte one"
            )));
        }
        self.items.push(Recorded::Copy { src, dst, size });
        Ok(())
    }

    /// Number of recorded launches and copies.
    pub fn len(&self) -> usize {
        self.items.len()
    }

    /// Whether nothing has been recorded.
    pub fn is_empty(&self) -> bool {
        self.items.is_empty()
    }

    /// Builds the command stream once; the result replays it.
    pub fn build(&self) -> Result<Graph> {
        if self.items.is_empty() {
            return Err(Error::InvalidArgument("the graph records nothing".into()));
        }
        // Every device the graph touches, in order of first use: the first leads replays.
        let mut devices: Vec<Device> = Vec::new();
        {
            let mut add = |d: &Device| {
                if !devices.iter().any(|o| o.same(d)) {
                    devices.push(d.clone());
                }
            };
            for item in &self.items {
                match item {
                    Recorded::Launch(l) => add(l.program.device()),
                    Recorded::Copy { src, dst, .. } => {
                        for end in [src, dst] {
                            if let RecordedEnd::Buffer(b) = end {
                                add(b.device());
                            }
                        }
                    }
                }
            }
            self.inputs.iter().for_each(|b| add(b.device()));
        }
        for l in self.launches() {
            let device = l.program.device();
            for a in &l.args {
                let (what, on) = match a {
                    RecordedArg::Buffer(b) => ("a buffer argument".to_string(), b.device()),
                    RecordedArg::Input(n) => (format!("input {n}"), self.inputs[*n].device()),
                    _ => continue,
                };
                if !on.same(device) {
                    return Err(Error::InvalidArgument(format!(
                        "{}: {what} on {}, the kernel runs on {}",
                        l.program.name(),
                        on.name(),
                        device.name()
                    )));
                }
            }
        }
        let inner = on_backend!(devices[0].queue(), d => self.lower(d, &devices)?);
        Ok(Graph {
            inner,
            vars: self.vars.clone(),
            inputs: self
                .inputs
                .iter()
                .map(|b| (b.size(), b.device().clone()))
                .collect(),
            launches: self.launches().count(),
            retained: self.items.clone(),
            state: Mutex::new(ReplayState {
                bound: self.inputs.clone(),
                last_stream: None,
                replayed: false,
            }),
            devices,
        })
    }

    fn launches(&self) -> impl Iterator<Item = &RecordedLaunch> {
        self.items.iter().filter_map(|item| match item {
            Recorded::Launch(l) => Some(l),
            Recorded::Copy { .. } => None,
        })
    }

    /// The recording in the terms of `lead`'s backend, lowered by it.
    fn lower<'s, D: Member>(&'s self, lead: &D, devices: &[Device]) -> Result<AnyGraph> {
        let other = |what: &str| foreign(what, lead.name());
        let device_index = |d: &Device| {
            devices
                .iter()
                .position(|o| o.same(d))
                .expect("every device of the graph is listed")
        };
        let end_device = |e: &RecordedEnd| match e {
            RecordedEnd::Buffer(b) => device_index(b.device()),
            RecordedEnd::Input(n) => device_index(self.inputs[*n].device()),
        };
        let mut items = Vec::with_capacity(self.items.len());
        for item in &self.items {
            items.push(match item {
                Recorded::Launch(l) => {
                    let mut args = Vec::with_capacity(l.args.len());
                    for a in &l.args {
                        args.push(match a {
                            RecordedArg::Buffer(b) => backend::RecordedArg::Buffer(whole(lead, b)?),
                            RecordedArg::Input(n) => backend::RecordedArg::Input(*n),
                            RecordedArg::Var(n) => backend::RecordedArg::Var(*n),
                            RecordedArg::Scalar(v) => backend::RecordedArg::Value(*v),
                        });
                    }
                    backend::RecordedItem::Launch(backend::RecordedLaunch {
                        device: device_index(l.program.device()),
                        program: l.program.of(lead)?,
                        args,
                        global: l.global.clone(),
                        local: l.local.clone(),
                        dynamic_lds: l.dynamic_lds,
                    })
                }
                Recorded::Copy { src, dst, size } => {
                    let end = |e: &'s RecordedEnd| {
                        Ok(match e {
                            RecordedEnd::Buffer(b) => backend::RecordedEnd::Buffer(whole(lead, b)?),
                            RecordedEnd::Input(n) => backend::RecordedEnd::Input(*n),
                        })
                    };
                    backend::RecordedItem::Copy(backend::RecordedCopy {
                        src: end(src)?,
                        src_device: end_device(src),
                        dst: end(dst)?,
                        dst_device: end_device(dst),
                        size: *size,
                    })
                }
            });
        }
        let mut backend_devices = Vec::with_capacity(devices.len());
        for d in devices {
            backend_devices.push(&**D::device(d.queue()).ok_or_else(|| other("a device"))?);
        }
        let mut inputs = Vec::with_capacity(self.inputs.len());
        for b in &self.inputs {
            inputs.push((whole(lead, b)?, device_index(b.device())));
        }
        let recording = backend::Recording {
            devices: backend_devices,
            vars: &self.vars,
            inputs,
            items,
            segment_dwords: self.segment_dwords,
        };
        Ok(D::wrap_graph(D::build_graph(&recording)?))
    }
}

struct ReplayState {
    /// Buffers bound by the last replay (kept alive while it may run).
    bound: Vec<Buffer>,
    /// The stream of the last replay (`None`: the device's own queue).
    last_stream: Option<crate::Stream>,
    replayed: bool,
}

/// A built graph: replay it with [`Graph::replay`].
pub struct Graph {
    /// Every device the graph touches; the first leads its replays.
    devices: Vec<Device>,
    inner: AnyGraph,
    vars: Vec<VarSpec>,
    /// (size, device) of each input.
    inputs: Vec<(usize, Device)>,
    launches: usize,
    /// The recorded items: keeps the buffers and programs alive.
    retained: Vec<Recorded>,
    state: Mutex<ReplayState>,
}

impl std::fmt::Debug for Graph {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "Graph({} launches, {} inputs, {} vars on {})",
            self.launches,
            self.inputs.len(),
            self.vars.len(),
            self.devices
                .iter()
                .map(Device::name)
                .collect::<Vec<_>>()
                .join(", ")
        )
    }
}

impl Drop for Graph {
    fn drop(&mut self) {
        // Its command streams and arguments may still be read by a queued replay.
        for d in &self.devices {
            let _ = d.synchronize();
        }
    }
}

/// `graph` in the terms of the backend of `device`.
fn graph_of<'g, D: Member>(device: &D, graph: &'g AnyGraph) -> Result<&'g D::Graph> {
    D::graph(graph).ok_or_else(|| foreign("the graph", device.name()))
}

fn segments<D: Member>(device: &D, graph: &AnyGraph) -> usize {
    graph_of(device, graph).map_or(0, D::graph_segments)
}

fn input_patches<D: Member>(device: &D, graph: &AnyGraph, input: usize) -> usize {
    graph_of(device, graph).map_or(0, |g| D::graph_input_patches(g, input))
}

impl Graph {
    /// The device that leads replays (the first one the graph touches).
    pub fn device(&self) -> &Device {
        &self.devices[0]
    }

    /// Every device the graph touches; after a replay, synchronizing any of them waits for
    /// the whole graph.
    pub fn devices(&self) -> &[Device] {
        &self.devices
    }

    /// The declared variables, in declaration order.
    pub fn vars(&self) -> &[VarSpec] {
        &self.vars
    }

    /// Number of kernel launches one replay makes.
    pub fn launch_count(&self) -> usize {
        self.launches
    }

    /// Number of recorded items the graph keeps alive.
    pub fn item_count(&self) -> usize {
        self.retained.len()
    }

    /// Indirect-buffer segments of the command stream (a diagnostic; on Metal, the one
    /// indirect command buffer).
    pub fn segment_count(&self) -> usize {
        on_backend!(self.devices[0].queue(), d => segments(d, &self.inner))
    }

    /// Argument words a change of `input` rewrites (a diagnostic; on Metal, the binding slots).
    pub fn input_patch_count(&self, input: Input) -> usize {
        on_backend!(self.devices[0].queue(), d => input_patches(d, &self.inner, input.0))
    }

    fn check(&self, inputs: &[&Buffer], vars: &[i32]) -> Result<()> {
        if inputs.len() != self.inputs.len() {
            return Err(Error::InvalidArgument(format!(
                "graph takes {} inputs, got {}",
                self.inputs.len(),
                inputs.len()
            )));
        }
        for (i, (b, (size, device))) in inputs.iter().zip(&self.inputs).enumerate() {
            if !b.device().same(device) {
                return Err(Error::InvalidArgument(format!(
                    "input {i} is on {}, the graph was built for {}",
                    b.device().name(),
                    device.name()
                )));
            }
            if b.size() != *size {
                return Err(Error::InvalidArgument(format!(
                    "input {i} is {} bytes, the graph was built for {size}",
                    b.size()
                )));
            }
        }
        if vars.len() != self.vars.len() {
            return Err(Error::InvalidArgument(format!(
                "graph takes {} variables ({}), got {}",
                self.vars.len(),
                self.vars
                    .iter()
                    .map(|v| v.name.as_str())
                    .collect::<Vec<_>>()
                    .join(", "),
                vars.len()
            )));
        }
        for (v, spec) in vars.iter().zip(&self.vars) {
            if !(spec.min..=spec.max).contains(v) {
                return Err(Error::InvalidArgument(format!(
                    "variable {} = {v} is outside its bounds {}..={}",
                    spec.name, spec.min, spec.max
                )));
            }
        }
        Ok(())
    }

    /// Replays the graph with `inputs` (one buffer per input, in order) and `vars` (one value
    /// per variable, in order). Returns once the work is queued. On an error nothing changed
    /// and the graph stays usable.
    pub fn replay(&self, inputs: &[&Buffer], vars: &[i32]) -> Result<()> {
        self.replay_queued(None, inputs, vars)
    }

    /// [`Graph::replay`] on `stream`, a stream of the graph's device: after the work queued
    /// there, ordered with it and not with the device's own queue. A graph replayed on a
    /// stream other than its last one first waits (on the host) for its last replay, whose
    /// memory it shares. Any Metal graph; on AMD, single-GPU graphs whose copies run on the
    /// compute queue (the dispatches of kernels that use scratch memory are pointed at the
    /// stream's scratch ring), others being `Unsupported` on a stream that is not the device's
    /// own (`dev.default_stream()` is always fine).
    pub fn replay_on(
        &self,
        stream: &crate::Stream,
        inputs: &[&Buffer],
        vars: &[i32],
    ) -> Result<()> {
        if !stream.device().same(&self.devices[0]) {
            return Err(Error::InvalidArgument(format!(
                "a graph of {} replayed on a stream of {}",
                self.devices[0].name(),
                stream.device().name()
            )));
        }
        if stream.is_default() {
            return self.replay(inputs, vars);
        }
        if self.devices.len() > 1 {
            return Err(Error::Unsupported(
                "replaying a graph of several GPUs on a stream".into(),
            ));
        }
        self.replay_queued(Some(stream), inputs, vars)
    }

    fn replay_queued(
        &self,
        stream: Option<&crate::Stream>,
        inputs: &[&Buffer],
        vars: &[i32],
    ) -> Result<()> {
        self.check(inputs, vars)?;
        let mut state = crate::lock(&self.state);
        let same_queue = match (&state.last_stream, stream) {
            (None, None) => true,
            (Some(a), Some(b)) => a.same_queue(b),
            _ => false,
        };
        if state.replayed && !same_queue {
            // Its memory (arguments, patched words) is the last replay's: let that finish.
            match &state.last_stream {
                Some(last) => last.synchronize()?,
                None => self.devices[0].default_stream().synchronize()?,
            }
        }
        let queue = match stream {
            Some(s) => s.queue(),
            None => self.devices[0].queue(),
        };
        on_backend!(queue, q => self.replay_with(q, inputs, vars))?;
        state.last_stream = stream.cloned();
        state.replayed = true;
        let rebound = inputs
            .iter()
            .zip(&state.bound)
            .any(|(new, old)| !new.same_range(old));
        if rebound {
            state.bound = inputs.iter().map(|&b| b.clone()).collect();
        }
        Ok(())
    }

    /// The replay by the backend of `queue`: on it alone for a single-device graph, else on
    /// every device of the graph.
    fn replay_with<D: Member>(&self, queue: &D, inputs: &[&Buffer], vars: &[i32]) -> Result<()> {
        let graph = graph_of(queue, &self.inner)?;
        let mut bound = Vec::with_capacity(inputs.len());
        for b in inputs {
            bound.push(whole(queue, b)?);
        }
        let values = backend::ReplayValues {
            inputs: &bound,
            vars,
        };
        if let [_] = &self.devices[..] {
            return D::replay(graph, &[queue], &values);
        }
        let mut queues = Vec::with_capacity(self.devices.len());
        for d in &self.devices {
            queues.push(&**D::device(d.queue()).ok_or_else(|| foreign("a device", queue.name()))?);
        }
        D::replay(graph, &queues, &values)
    }
}

/// Where a [`Jit`] is in its life.
#[derive(Debug)]
enum JitPhase {
    /// Calls run eagerly; the second call captures.
    Eager {
        calls: usize,
    },
    Replaying(Box<Graph>),
    /// The backend cannot graph the work: every call runs eagerly.
    EagerForever(String),
}

/// A buffer argument of a JIT launch: one of the call's inputs or outputs, or a buffer the
/// closure owns (kept by the graph once captured).
#[derive(Debug, Clone, Copy)]
pub enum JitArg<'a> {
    /// `inputs[n]` of the current call.
    Input(usize),
    /// `outputs[n]` of the current call.
    Output(usize),
    /// A buffer of the closure's own (scratch); fixed once captured.
    Buffer(&'a Buffer),
    /// Variable `n` of the call, as an `int32`.
    Var(usize),
    /// A fixed value: any by-value [`Arg`](crate::Arg) (`Arg::I32(n)`, `Arg::F32(x)`, ...;
    /// a buffer of the closure's goes in `Buffer`).
    Value(crate::Arg<'a>),
}

/// A kernel argument as a JIT argument: a buffer is the closure's own, a value is fixed.
impl<'a> From<crate::Arg<'a>> for JitArg<'a> {
    fn from(arg: crate::Arg<'a>) -> Self {
        match arg {
            Arg::Buffer(b) => JitArg::Buffer(b),
            value => JitArg::Value(value),
        }
    }
}

/// What a [`Jit`] closure launches through. The closure sees variables only as symbols
/// ([`JitRecorder::var`]), never their values, so nothing computed from a value can be baked
/// into a capture.
pub struct JitRecorder<'c> {
    inputs: &'c [&'c Buffer],
    outputs: &'c [&'c Buffer],
    vars: &'c [i32],
    var_handles: &'c [Var],
    capture: Option<(&'c mut GraphBuilder, &'c [Input])>,
    /// The stream the call runs on (`None`: the devices' own queues).
    stream: Option<&'c crate::Stream>,
}

impl JitRecorder<'_> {
    /// Variable `n` as a dimension expression.
    pub fn var(&self, n: usize) -> DimExpr {
        DimExpr::Var(Var::new(n))
    }

    /// Launches `program` now and, while capturing, records it.
    pub fn launch(
        &mut self,
        program: &Program,
        args: &[JitArg<'_>],
        global: DimExprs,
        local: DimExprs,
    ) -> Result<()> {
        self.launch_with(program, args, global, local, &LaunchOptions::default())
    }

    /// [`JitRecorder::launch`] with `options` (dynamic LDS; `timed` is refused, as in graphs).
    pub fn launch_with(
        &mut self,
        program: &Program,
        args: &[JitArg<'_>],
        global: DimExprs,
        local: DimExprs,
        options: &LaunchOptions,
    ) -> Result<()> {
        if options.timed {
            return Err(Error::InvalidArgument(format!(
                "JIT launch of {}: launches are not timed one by one",
                program.name()
            )));
        }
        let missing = |what: &str, n: usize| {
            Error::InvalidArgument(format!("JIT launch of {}: no {what} {n}", program.name()))
        };
        let mut eager = Vec::with_capacity(args.len());
        for a in args {
            eager.push(match *a {
                JitArg::Input(n) => {
                    Arg::Buffer(*self.inputs.get(n).ok_or_else(|| missing("input", n))?)
                }
                JitArg::Output(n) => {
                    Arg::Buffer(*self.outputs.get(n).ok_or_else(|| missing("output", n))?)
                }
                JitArg::Buffer(b) => Arg::Buffer(b),
                JitArg::Var(n) => {
                    Arg::I32(*self.vars.get(n).ok_or_else(|| missing("variable", n))?)
                }
                JitArg::Value(v) => v,
            });
        }
        let (g, l) = (
            eval_dims(&global, self.vars)?,
            eval_dims(&local, self.vars)?,
        );
        match self.stream {
            Some(stream) => stream.launch_with(program, &eager, g, l, options)?,
            None => program.launch_with(&eager, g, l, options)?,
        };
        if let Some((builder, slots)) = self.capture.as_mut() {
            let n_inputs = self.inputs.len();
            let graph_args: Vec<GraphArg<'_>> = args
                .iter()
                .map(|a| match *a {
                    JitArg::Input(n) => GraphArg::Input(slots[n]),
                    JitArg::Output(n) => GraphArg::Input(slots[n_inputs + n]),
                    JitArg::Buffer(b) => GraphArg::Buffer(b),
                    JitArg::Var(n) => GraphArg::Var(self.var_handles[n]),
                    JitArg::Value(v) => GraphArg::Value(v),
                })
                .collect();
            builder.launch_with(program, &graph_args, global, local, options)?;
        }
        Ok(())
    }

    /// Copies the first `size` bytes of `src` into `dst` now (buffers of the call or of the
    /// closure, on one device or on two GPUs of one driver) and, while capturing, records it.
    /// Variables and scalars are not buffers: [`Error::InvalidArgument`].
    pub fn copy(&mut self, src: JitArg<'_>, dst: JitArg<'_>, size: usize) -> Result<()> {
        let buffer = |a: &JitArg<'_>, what: &str| -> Result<Buffer> {
            let found = match *a {
                JitArg::Input(n) => self.inputs.get(n).copied(),
                JitArg::Output(n) => self.outputs.get(n).copied(),
                JitArg::Buffer(b) => Some(b),
                _ => {
                    return Err(Error::InvalidArgument(format!(
                        "JIT copy: the {what} must be a buffer, not {a:?}"
                    )))
                }
            };
            found
                .cloned()
                .ok_or_else(|| Error::InvalidArgument(format!("JIT copy: no {what} {a:?}")))
        };
        let (s, d) = (buffer(&src, "source")?, buffer(&dst, "destination")?);
        match self.stream {
            Some(stream) => stream.copy(&s, 0, &d, 0, size)?,
            None => s.copy_to(0, &d, 0, size)?,
        }
        if let Some((builder, slots)) = self.capture.as_mut() {
            let n_inputs = self.inputs.len();
            fn end<'b>(
                a: JitArg<'_>,
                b: &'b Buffer,
                slots: &[Input],
                n_inputs: usize,
            ) -> GraphBuf<'b> {
                match a {
                    JitArg::Input(n) => GraphBuf::Input(slots[n]),
                    JitArg::Output(n) => GraphBuf::Input(slots[n_inputs + n]),
                    _ => GraphBuf::Buffer(b),
                }
            }
            let src_end = end(src, &s, slots, n_inputs);
            let dst_end = end(dst, &d, slots, n_inputs);
            builder.copy(src_end, dst_end, size)?;
        }
        Ok(())
    }
}

/// Captures the launches of a closure and replays them.
///
/// The first call runs the closure eagerly; the second runs it eagerly while capturing a
/// [`Graph`]; later calls replay the graph. Every call passes its inputs, its **outputs** and
/// its variable values explicitly, so results never alias across calls (unlike a JIT that
/// returns buffers it owns, tinygrad #7020, #2417), and each replay binds the values of that
/// call (tinygrad #5360). When the backend cannot graph the work, the JIT stays eager.
pub struct Jit<F> {
    body: F,
    vars: Vec<VarSpec>,
    phase: JitPhase,
}

impl<F> std::fmt::Debug for Jit<F> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Jit({:?})", self.phase)
    }
}

impl<F> Jit<F>
where
    F: FnMut(&mut JitRecorder<'_>) -> Result<()>,
{
    /// A JIT over `body` with variables `(name, min, max)`.
    pub fn new(vars: &[(&str, i32, i32)], body: F) -> Result<Self> {
        let mut specs = Vec::new();
        for &(name, min, max) in vars {
            if min > max {
                return Err(Error::InvalidArgument(format!(
                    "variable {name}: bounds {min}..={max} are empty"
                )));
            }
            specs.push(VarSpec {
                name: name.to_string(),
                min,
                max,
            });
        }
        Ok(Jit {
            body,
            vars: specs,
            phase: JitPhase::Eager { calls: 0 },
        })
    }

    /// Whether calls replay a captured graph.
    pub fn is_captured(&self) -> bool {
        matches!(self.phase, JitPhase::Replaying(_))
    }

    /// Why the JIT runs eagerly for good, if it does.
    pub fn fallback_reason(&self) -> Option<&str> {
        match &self.phase {
            JitPhase::EagerForever(r) => Some(r),
            _ => None,
        }
    }

    /// Runs the work on `inputs` into `outputs` with variable values `vars`.
    pub fn call(&mut self, inputs: &[&Buffer], outputs: &[&Buffer], vars: &[i32]) -> Result<()> {
        self.call_queued(None, inputs, outputs, vars)
    }

    /// [`Jit::call`] on `stream`: the eager calls launch and copy there, and the captured graph
    /// replays there ([`Graph::replay_on`]), ordered with the stream's other work. A graph
    /// that cannot replay on a stream (see [`Graph::replay_on`]) runs the closure eagerly on
    /// the stream instead, that call only.
    pub fn call_on(
        &mut self,
        stream: &crate::Stream,
        inputs: &[&Buffer],
        outputs: &[&Buffer],
        vars: &[i32],
    ) -> Result<()> {
        self.call_queued(Some(stream), inputs, outputs, vars)
    }

    fn call_queued(
        &mut self,
        stream: Option<&crate::Stream>,
        inputs: &[&Buffer],
        outputs: &[&Buffer],
        vars: &[i32],
    ) -> Result<()> {
        if vars.len() != self.vars.len() {
            return Err(Error::InvalidArgument(format!(
                "JIT takes {} variables, got {}",
                self.vars.len(),
                vars.len()
            )));
        }
        for (v, spec) in vars.iter().zip(&self.vars) {
            if !(spec.min..=spec.max).contains(v) {
                return Err(Error::InvalidArgument(format!(
                    "variable {} = {v} is outside its bounds {}..={}",
                    spec.name, spec.min, spec.max
                )));
            }
        }
        let calls = match &self.phase {
            JitPhase::Replaying(graph) => {
                let all: Vec<&Buffer> = inputs.iter().chain(outputs).copied().collect();
                let replayed = match stream {
                    Some(stream) => graph.replay_on(stream, &all, vars),
                    None => return graph.replay(&all, vars),
                };
                match replayed {
                    Err(Error::Unsupported(_)) => usize::MAX,
                    done => return done,
                }
            }
            JitPhase::EagerForever(_) => usize::MAX,
            JitPhase::Eager { calls } => *calls,
        };
        if calls != 1 {
            (self.body)(&mut JitRecorder {
                inputs,
                outputs,
                vars,
                var_handles: &[],
                capture: None,
                stream,
            })?;
            if calls == 0 {
                self.phase = JitPhase::Eager { calls: 1 };
            }
            return Ok(());
        }
        // Second call: run eagerly and capture.
        let mut builder = GraphBuilder::new();
        let mut handles = Vec::new();
        for v in &self.vars {
            handles.push(builder.var(&v.name, v.min, v.max)?);
        }
        let slots: Vec<Input> = inputs
            .iter()
            .chain(outputs)
            .map(|b| builder.input(b))
            .collect();
        (self.body)(&mut JitRecorder {
            inputs,
            outputs,
            vars,
            var_handles: &handles,
            capture: Some((&mut builder, &slots)),
            stream,
        })?;
        if builder.is_empty() {
            self.phase = JitPhase::EagerForever("the closure launches nothing".into());
            return Ok(());
        }
        self.phase = match builder.build() {
            Ok(graph) => JitPhase::Replaying(Box::new(graph)),
            Err(Error::Unsupported(why)) => JitPhase::EagerForever(why),
            Err(e) => return Err(e),
        };
        Ok(())
    }
}
