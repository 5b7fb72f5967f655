//! The Metal graph: captured kernel launches encoded once into an `MTLIndirectCommandBuffer`
//! and replayed with one command buffer (tinygrad 0.9.0's `runtime/graph/metal.py`).
//!
//! # The input: a backend-neutral description
//!
//! hcq's core graph API does not exist yet, so the graph takes a small neutral description,
//! [`GraphSpec`], meant to be produced later by a capture in `hcq`:
//!
//! - [`GraphSpec::items`]: the captured launches, in order. Each [`ExecItem`] names its program
//!   (an index into the programs passed to [`MetalGraph::new`]), its buffer arguments
//!   ([`BufferRef::Fixed`]: a buffer captured with the graph; [`BufferRef::Input`]: the graph
//!   input of that number, swappable at each replay), the symbolic variables it takes as `int`
//!   arguments, and its launch dimensions as [`DimExpr`]s.
//! - [`GraphSpec::vars`]: the symbolic integer variables with their bounds.
//! - [`GraphSpec::num_inputs`]: how many input buffers each replay passes.
//!
//! Kernel argument slots follow tinygrad's Metal convention: buffers at `[[buffer(0..b)]]`,
//! then the item's variables at `[[buffer(b..b+v)]]`, each bound to the graph's int buffer at
//! byte offset `variable index × 4`.
//!
//! # Structure
//!
//! [`GraphPlan`] makes every decision in pure Rust (what is bound where, which dimensions depend
//! on variables, which resources are used, which inputs changed); [`MetalGraph`] carries the
//! plan out through [`MetalApi`].

use crate::api::{MetalApi, Size3};
use crate::device::{
    check_launch, lock, MetalBuffer, MetalDevice, MetalProgram, MAX_BUFFER_BINDINGS,
};
use crate::inflight::Seq;
use hcq_core::dims::eval_dims;
pub use hcq_core::{DimExpr, Var, VarSpec};
use hcq_core::{Error, Result};
use std::collections::HashSet;
use std::time::Duration;

/// Index of a symbolic variable in [`GraphSpec::vars`].
pub type VarId = usize;

/// Three launch dimensions.
pub type Dims = [DimExpr; 3];

/// Constant dimensions.
pub fn dims(d: Size3) -> Dims {
    d.map(DimExpr::from)
}

/// A buffer argument of a captured launch.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum BufferRef {
    /// A buffer captured with the graph: index into the `buffers` of [`MetalGraph::new`].
    Fixed(usize),
    /// Graph input number `n`, passed at each replay.
    Input(usize),
}

/// One captured kernel launch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExecItem {
    /// Index into the `programs` of [`MetalGraph::new`].
    pub program: usize,
    /// Buffer arguments, bound at `[[buffer(0..)]]`.
    pub buffers: Vec<BufferRef>,
    /// Variables passed as `int` arguments after the buffers.
    pub vars: Vec<VarId>,
    /// Threadgroups per grid.
    pub global: Dims,
    /// Threads per threadgroup.
    pub local: Dims,
}

/// A captured sequence of launches, backend-neutral.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct GraphSpec {
    /// The captured launches, in execution order; a graph needs at least one.
    pub items: Vec<ExecItem>,
    /// The symbolic variables, indexed by [`VarId`]; each replay passes one value per
    /// variable, within its bounds.
    pub vars: Vec<VarSpec>,
    /// How many input buffers each replay passes ([`BufferRef::Input`] numbers lie below it).
    pub num_inputs: usize,
}

/// What one binding slot of a command is bound to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Bind {
    /// Captured buffer number `n` (an index into the `buffers` of [`MetalGraph::new`]),
    /// bound once when the graph is encoded.
    Fixed(usize),
    /// Graph input number `n`, rebound at a replay that passes a different buffer for it.
    Input(usize),
    /// The graph's int buffer at this byte offset.
    IntBuffer {
        /// Byte offset into the int buffer: 4 × the variable's [`VarId`].
        offset: usize,
    },
}

/// One command of the indirect command buffer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CommandPlan {
    /// Index into the graph's programs of the kernel the command runs.
    pub program: usize,
    /// `(binding index, what)`, in binding order.
    pub bindings: Vec<(usize, Bind)>,
    /// Whether the launch dimensions depend on variables (re-patched at replay).
    pub dynamic_dims: bool,
}

/// Every decision of the graph, made once from the spec, in pure Rust.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GraphPlan {
    /// One command per [`ExecItem`] of the spec, in the same order.
    pub commands: Vec<CommandPlan>,
    /// `(command, binding index, input)` for every slot bound to an input.
    pub input_slots: Vec<(usize, usize, usize)>,
    /// Commands whose dimensions depend on variables.
    pub dynamic: Vec<usize>,
    /// Fixed buffers used by any command, deduplicated, in first-use order.
    pub fixed_resources: Vec<usize>,
    /// Bytes of the int buffer (4 per variable).
    pub int_buffer_bytes: usize,
}

impl GraphPlan {
    /// Validates `spec` against `num_programs` programs and `num_fixed` captured buffers and
    /// lays out the bindings.
    pub fn new(spec: &GraphSpec, num_programs: usize, num_fixed: usize) -> Result<GraphPlan> {
        let bad = |m: String| Err(Error::InvalidArgument(m));
        if spec.items.is_empty() {
            return bad("a graph needs at least one launch".into());
        }
        let nvars = spec.vars.len();
        for (i, v) in spec.vars.iter().enumerate() {
            if v.min > v.max {
                return bad(format!(
                    "variable {i} ({}) has min {} > max {}",
                    v.name, v.min, v.max
                ));
            }
        }
        let int_buffer_bytes = nvars
            .checked_mul(4)
            .ok_or_else(|| Error::InvalidArgument(format!("{nvars} variables")))?;
        let mut commands = Vec::with_capacity(spec.items.len());
        let mut input_slots = Vec::new();
        let mut dynamic = Vec::new();
        let mut fixed_resources = Vec::new();
        let mut seen_fixed = HashSet::new();
        for (j, it) in spec.items.iter().enumerate() {
            if it.program >= num_programs {
                return bad(format!(
                    "launch {j} uses program {}, the graph has {num_programs}",
                    it.program
                ));
            }
            let nbind = it.buffers.len().saturating_add(it.vars.len());
            if nbind > MAX_BUFFER_BINDINGS {
                return bad(format!(
                    "launch {j} binds {} buffers and {} variables: {nbind} bindings, Metal's \
                     indirect commands hold at most {MAX_BUFFER_BINDINGS}",
                    it.buffers.len(),
                    it.vars.len()
                ));
            }
            let mut bindings = Vec::with_capacity(nbind);
            for (i, b) in it.buffers.iter().enumerate() {
                match *b {
                    BufferRef::Fixed(f) if f >= num_fixed => {
                        return bad(format!(
                        "launch {j} argument {i} is captured buffer {f}, the graph has {num_fixed}"
                    ))
                    }
                    BufferRef::Input(n) if n >= spec.num_inputs => {
                        return bad(format!(
                            "launch {j} argument {i} is input {n}, the graph has {}",
                            spec.num_inputs
                        ))
                    }
                    BufferRef::Fixed(f) => {
                        if seen_fixed.insert(f) {
                            fixed_resources.push(f);
                        }
                        bindings.push((i, Bind::Fixed(f)));
                    }
                    BufferRef::Input(n) => {
                        input_slots.push((j, i, n));
                        bindings.push((i, Bind::Input(n)));
                    }
                }
            }
            for (k, &v) in it.vars.iter().enumerate() {
                if v >= nvars {
                    return bad(format!(
                        "launch {j} uses variable {v}, the graph has {nvars}"
                    ));
                }
                // v < nvars and nvars * 4 did not overflow, so this cannot either; checked
                // anyway so that a future change cannot turn it into a wrap.
                let offset = v
                    .checked_mul(4)
                    .filter(|o| o + 4 <= int_buffer_bytes)
                    .ok_or_else(|| {
                        Error::InvalidArgument(format!("int buffer offset of variable {v}"))
                    })?;
                bindings.push((it.buffers.len() + k, Bind::IntBuffer { offset }));
            }
            for d in it.global.iter().chain(&it.local) {
                d.check_vars(nvars)?;
            }
            let dynamic_dims = it.global.iter().chain(&it.local).any(DimExpr::is_symbolic);
            if dynamic_dims {
                dynamic.push(j);
            }
            commands.push(CommandPlan {
                program: it.program,
                bindings,
                dynamic_dims,
            });
        }
        Ok(GraphPlan {
            commands,
            input_slots,
            dynamic,
            fixed_resources,
            int_buffer_bytes,
        })
    }

    /// The `(command, binding index, input)` slots to rebind when the inputs bound last time
    /// were `bound` and are now `now` (buffer identities, one per input).
    pub fn rebinds(&self, bound: &[u64], now: &[u64]) -> Vec<(usize, usize, usize)> {
        self.input_slots
            .iter()
            .copied()
            .filter(|&(_, _, n)| bound.get(n) != now.get(n))
            .collect()
    }
}

/// Checks variable values against the spec's count and bounds.
fn check_vars(spec: &GraphSpec, vals: &[i32]) -> Result<()> {
    if vals.len() != spec.vars.len() {
        return Err(Error::InvalidArgument(format!(
            "{} variable values for a graph with {} variables",
            vals.len(),
            spec.vars.len()
        )));
    }
    for (v, (s, &x)) in spec.vars.iter().zip(vals).enumerate() {
        if x < s.min || x > s.max {
            return Err(Error::InvalidArgument(format!(
                "variable {v} ({}) = {x} is outside {}..={}",
                s.name, s.min, s.max
            )));
        }
    }
    Ok(())
}

/// A captured sequence of launches encoded in an indirect command buffer.
pub struct MetalGraph<A: MetalApi> {
    spec: GraphSpec,
    plan: GraphPlan,
    device_id: u64,
    icb: A::Icb,
    int_buf: Option<MetalBuffer<A>>,
    /// ICB-capable pipelines, one per program.
    pipelines: Vec<A::Pipeline>,
    max_threads: Vec<u64>,
    fixed: Vec<A::Buffer>,
    fixed_ids: Vec<u64>,
    /// Identity of the buffer bound to each input.
    bound_inputs: Vec<u64>,
    /// Dimensions currently encoded, per command.
    encoded_dims: Vec<(Size3, Size3)>,
    /// The previous replay: the queue it went to, its place there, and its command buffer.
    last: Option<LastReplay<A>>,
}

struct LastReplay<A: MetalApi> {
    queue_id: u64,
    seq: Seq,
    cb: A::CommandBuffer,
}

impl<A: MetalApi> MetalGraph<A> {
    /// Encodes `spec` into an indirect command buffer on `dev`. `programs` and `buffers` are
    /// what [`ExecItem::program`] and [`BufferRef::Fixed`] index; `inputs` and `var_vals` are
    /// the first replay's.
    pub fn new(
        dev: &MetalDevice<A>,
        spec: GraphSpec,
        programs: &[&MetalProgram<A>],
        buffers: &[&MetalBuffer<A>],
        inputs: &[&MetalBuffer<A>],
        var_vals: &[i32],
    ) -> Result<Self> {
        let plan = GraphPlan::new(&spec, programs.len(), buffers.len())?;
        for p in programs {
            dev.check_program(p)?;
        }
        for b in buffers.iter().chain(inputs) {
            if b.device_id != dev.id {
                return Err(Error::InvalidArgument(format!(
                    "buffer #{} belongs to another device than {}",
                    b.id, dev.name
                )));
            }
        }
        check_inputs(&spec, inputs)?;
        check_vars(&spec, var_vals)?;
        let api = &dev.api;
        let n = plan.commands.len();
        let icb = api
            .new_indirect_command_buffer(&dev.device, n, MAX_BUFFER_BINDINGS)
            .ok_or_else(|| {
                Error::Unsupported(format!(
                    "{}: creating an indirect command buffer of {n} commands failed",
                    dev.name
                ))
            })?;
        let int_buf = match plan.int_buffer_bytes {
            0 => None,
            bytes => Some(dev.alloc(bytes)?),
        };
        let mut pipelines = Vec::with_capacity(programs.len());
        let mut max_threads = Vec::with_capacity(programs.len());
        for p in programs {
            let pl = api
                .new_compute_pipeline_state(&dev.device, &p.function, true)
                .map_err(|log| Error::Compile {
                    message: format!("creating the indirect-capable pipeline of {}", p.name),
                    log,
                })?;
            max_threads.push(api.max_total_threads_per_threadgroup(&pl));
            pipelines.push(pl);
        }
        let mut g = MetalGraph {
            plan,
            device_id: dev.id,
            icb,
            int_buf,
            pipelines,
            max_threads,
            fixed: buffers.iter().map(|b| b.buf.clone()).collect(),
            fixed_ids: buffers.iter().map(|b| b.id).collect(),
            bound_inputs: inputs.iter().map(|b| b.id).collect(),
            encoded_dims: Vec::with_capacity(n),
            last: None,
            spec,
        };
        let all_dims = g.all_dims(var_vals)?;
        for (j, c) in g.plan.commands.iter().enumerate() {
            let cmd = api.indirect_compute_command_at_index(&g.icb, j);
            api.icb_set_compute_pipeline_state(&cmd, &g.pipelines[c.program]);
            for &(index, bind) in &c.bindings {
                let (buf, offset) = match bind {
                    Bind::Fixed(f) => (&g.fixed[f], 0),
                    Bind::Input(i) => (&inputs[i].buf, 0),
                    Bind::IntBuffer { offset } => match &g.int_buf {
                        Some(b) => (&b.buf, offset),
                        None => unreachable_int_buffer()?,
                    },
                };
                api.set_kernel_buffer(&cmd, buf, offset, index);
            }
            let (global, local) = all_dims[j];
            api.concurrent_dispatch_threadgroups(&cmd, global, local);
            api.set_barrier(&cmd);
            g.encoded_dims.push((global, local));
        }
        Ok(g)
    }

    fn all_dims(&self, vals: &[i32]) -> Result<Vec<(Size3, Size3)>> {
        let mut out = Vec::with_capacity(self.spec.items.len());
        for (j, it) in self.spec.items.iter().enumerate() {
            let global = eval_dims(&it.global, vals)?;
            let local = eval_dims(&it.local, vals)?;
            let name = format!("graph launch {j}");
            check_launch(&name, self.max_threads[it.program], global, local)?;
            out.push((global, local));
        }
        Ok(out)
    }

    /// The plan the graph was encoded from.
    pub fn plan(&self) -> &GraphPlan {
        &self.plan
    }

    /// The int buffer holding the variables, if the graph has any.
    pub fn int_buffer(&self) -> Option<&MetalBuffer<A>> {
        self.int_buf.as_ref()
    }

    /// Replays the graph with `inputs` and `var_vals`: waits for the previous replay if it is
    /// still in flight, rebinds the inputs that changed, re-patches the dimensions that changed,
    /// writes the variables, and runs the whole ICB in one command buffer. With `wait`, blocks
    /// and returns the GPU time.
    pub fn replay(
        &mut self,
        dev: &MetalDevice<A>,
        inputs: &[&MetalBuffer<A>],
        var_vals: &[i32],
        wait: bool,
    ) -> Result<Option<Duration>> {
        if dev.id != self.device_id {
            return Err(Error::InvalidArgument(format!(
                "graph replayed on {}, it was built on another device",
                dev.name
            )));
        }
        check_inputs(&self.spec, inputs)?;
        for b in inputs {
            if b.device_id != dev.id {
                return Err(Error::InvalidArgument(format!(
                    "input buffer #{} belongs to another device than {}",
                    b.id, dev.name
                )));
            }
        }
        check_vars(&self.spec, var_vals)?;
        // Validate everything before touching the ICB, so a bad replay changes nothing.
        let mut new_dims = Vec::with_capacity(self.plan.dynamic.len());
        for &j in &self.plan.dynamic {
            let it = &self.spec.items[j];
            let global = eval_dims(&it.global, var_vals)?;
            let local = eval_dims(&it.local, var_vals)?;
            check_launch(
                &format!("graph launch {j}"),
                self.max_threads[it.program],
                global,
                local,
            )?;
            new_dims.push((j, global, local));
        }
        let api = &dev.api;
        let mut st = lock(&dev.state);
        // The ICB and the int buffer are about to change: the previous replay must be done.
        if let Some(last) = self.last.take() {
            if last.queue_id == dev.queue_id {
                if st.in_flight.contains(last.seq) {
                    dev.wait_locked(&mut st, Some(last.seq))?;
                }
            } else if !api.status(&last.cb).is_finished() {
                // It went to another queue of the device (a stream): wait for its command
                // buffer itself. Its own queue still retires it and reports a failure.
                api.wait_until_completed(&last.cb);
            }
        }
        let ids: Vec<u64> = inputs.iter().map(|b| b.id).collect();
        for (j, index, n) in self.plan.rebinds(&self.bound_inputs, &ids) {
            let cmd = api.indirect_compute_command_at_index(&self.icb, j);
            api.set_kernel_buffer(&cmd, &inputs[n].buf, 0, index);
        }
        self.bound_inputs = ids;
        for (j, global, local) in new_dims {
            if self.encoded_dims[j] != (global, local) {
                let cmd = api.indirect_compute_command_at_index(&self.icb, j);
                api.concurrent_dispatch_threadgroups(&cmd, global, local);
                self.encoded_dims[j] = (global, local);
            }
        }
        if let Some(ib) = &self.int_buf {
            let base = api.contents(&ib.buf);
            if base.is_null() {
                return Err(Error::Unsupported("int buffer has no CPU contents".into()));
            }
            for (k, v) in var_vals.iter().enumerate() {
                // SAFETY: the int buffer holds `4 * vars` bytes of shared storage (allocated
                // with that size), `k < vars` (checked by `check_vars`), the GPU is not reading
                // it (the previous replay finished above; no other work uses it), and the
                // device lock is held.
                unsafe { base.add(4 * k).cast::<[u8; 4]>().write(v.to_le_bytes()) };
            }
        }
        let resources = self.resources(inputs);
        let cb = dev.new_command_buffer()?;
        let enc = api
            .compute_command_encoder(&cb)
            .ok_or_else(|| dev.nil("computeCommandEncoder"))?;
        api.use_resources(&enc, &resources);
        api.execute_commands_in_buffer(&enc, &self.icb, 0..self.plan.commands.len());
        api.end_encoding(&enc);
        let seq = dev.submit_locked(&mut st, cb.clone());
        self.last = Some(LastReplay {
            queue_id: dev.queue_id,
            seq,
            cb,
        });
        if !wait {
            return Ok(None);
        }
        dev.wait_seq_locked(&mut st, seq)
            .map(|t| t.or(Some(Duration::ZERO)))
    }

    /// The buffers the ICB uses: int buffer, captured buffers, inputs; each once.
    fn resources(&self, inputs: &[&MetalBuffer<A>]) -> Vec<A::Buffer> {
        let mut seen = HashSet::new();
        let mut out = Vec::new();
        if let Some(ib) = &self.int_buf {
            seen.insert(ib.id);
            out.push(ib.buf.clone());
        }
        for &f in &self.plan.fixed_resources {
            if seen.insert(self.fixed_ids[f]) {
                out.push(self.fixed[f].clone());
            }
        }
        for b in inputs {
            if seen.insert(b.id) {
                out.push(b.buf.clone());
            }
        }
        out
    }

    /// Whether the last replay's command buffer is still tracked as in flight on `dev` (the
    /// device's queue or a stream's).
    pub fn in_flight(&self, dev: &MetalDevice<A>) -> bool {
        self.last.as_ref().is_some_and(|l| {
            l.queue_id == dev.queue_id && lock(&dev.state).in_flight.contains(l.seq)
        })
    }
}

impl<A: MetalApi> std::fmt::Debug for MetalGraph<A> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "MetalGraph({} commands)", self.plan.commands.len())
    }
}

fn check_inputs<A: MetalApi>(spec: &GraphSpec, inputs: &[&MetalBuffer<A>]) -> Result<()> {
    if inputs.len() != spec.num_inputs {
        return Err(Error::InvalidArgument(format!(
            "{} input buffers for a graph with {} inputs",
            inputs.len(),
            spec.num_inputs
        )));
    }
    Ok(())
}

fn unreachable_int_buffer<T>() -> Result<T> {
    Err(Error::InvalidArgument(
        "a launch binds a variable but the graph has no int buffer".into(),
    ))
}
