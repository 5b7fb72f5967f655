//! A recorded graph ([`Recording`], from the `hcq` facade) lowered to an [`AmdGraph`], and what
//! its replays check and prepare around the AMD graph: symbolic launch dimensions evaluated
//! and validated, inputs that other GPUs' copy engines write mapped there, inputs that would
//! break the buffer-ordered streams of a graph with copies refused.

use super::{
    AmdGraph, CopyEnd, GraphArg, GraphCopy, GraphItem, GraphLaunch, GraphOptions, LaunchDims,
    Region, Work,
};
use crate::backend::address;
use crate::device::{lock, validate_dims};
use crate::{AmdBuffer, AmdDevice};
use hcq_core::backend::{
    RecordedArg, RecordedCopy, RecordedEnd, RecordedItem, Recording, ReplayValues,
};
use hcq_core::dims::eval_dims;
use hcq_core::{Arg, BufferAt, DimExprs, Error, Result};
use std::sync::{Arc, Mutex};

/// An [`AmdGraph`] with what its replays need beyond it.
pub struct LoweredGraph {
    graph: AmdGraph,
    /// Per input, the GPUs whose copy engines write into it from another GPU: a buffer bound
    /// there is mapped on them first.
    input_peers: Vec<Vec<u32>>,
    /// With copies, the fixed buffers' address ranges: inputs must not overlap them or each
    /// other, for the streams are ordered by buffer.
    copy_regions: Option<Vec<(u64, u64)>>,
    /// The dimensions of the launches that have variables in them, in launch order.
    symbolic: Vec<(DimExprs, DimExprs)>,
    /// The variable values the symbolic dimensions were last evaluated for.
    evaluated: Mutex<Option<Vec<i32>>>,
}

impl std::fmt::Debug for LoweredGraph {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.graph.fmt(f)
    }
}

impl LoweredGraph {
    /// The AMD graph.
    pub fn graph(&self) -> &AmdGraph {
        &self.graph
    }

    /// Lowers `rec`: one driver for every device, each copy's destination mapped on its
    /// engine's GPU, every item with the regions it reads and writes.
    pub fn build<'a>(rec: &Recording<'a, AmdDevice>) -> Result<LoweredGraph> {
        let devices = &rec.devices;
        let lead = devices[0];
        if let Some(other) = devices
            .iter()
            .find(|d| !Arc::ptr_eq(&d.driver, &lead.driver))
        {
            return Err(Error::Unsupported(format!(
                "graphs spanning devices of different drivers ({} and {}; run them eagerly)",
                lead.name, other.name
            )));
        }
        let mut input_peers: Vec<Vec<u32>> = vec![Vec::new(); rec.inputs.len()];
        let input_region = Region::Input;
        let fixed_region = |b: BufferAt<'_, AmdBuffer>| Region::Fixed {
            start: address(b),
            end: address(b) + b.size as u64,
        };
        let mut items = Vec::with_capacity(rec.items.len());
        let mut symbolic = Vec::new();
        let mut fixed_buffers = Vec::new();
        for item in &rec.items {
            match item {
                RecordedItem::Copy(copy) => {
                    let RecordedCopy {
                        src,
                        src_device,
                        dst,
                        dst_device,
                        size,
                    } = copy;
                    // A copy runs on its source's engine, which must reach its destination.
                    let engine = devices[*src_device].node.gpu_id;
                    if dst_device != src_device {
                        let memory = match dst {
                            RecordedEnd::Buffer(b) => b.buffer.memory(),
                            RecordedEnd::Input(n) => {
                                if !input_peers[*n].contains(&engine) {
                                    input_peers[*n].push(engine);
                                }
                                rec.inputs[*n].0.buffer.memory()
                            }
                        };
                        memory.map_to(engine)?;
                    }
                    let mut end = |e: &RecordedEnd<'a, AmdBuffer>| match e {
                        RecordedEnd::Buffer(b) => {
                            fixed_buffers.push(*b);
                            (CopyEnd::Fixed(address(*b)), fixed_region(*b))
                        }
                        RecordedEnd::Input(n) => (CopyEnd::Input(*n), input_region(*n)),
                    };
                    let ((s, sr), (d, dr)) = (end(src), end(dst));
                    items.push(GraphItem {
                        work: Work::Copy(GraphCopy {
                            dst: d,
                            src: s,
                            size: *size as u64,
                            engine,
                        }),
                        reads: vec![sr],
                        writes: vec![dr],
                    });
                }
                RecordedItem::Launch(l) => {
                    // Kernels may read and write every buffer they are given.
                    let writes = l
                        .args
                        .iter()
                        .filter_map(|a| match a {
                            RecordedArg::Buffer(b) => {
                                fixed_buffers.push(*b);
                                Some(fixed_region(*b))
                            }
                            RecordedArg::Input(n) => Some(input_region(*n)),
                            RecordedArg::Var(_) | RecordedArg::Value(_) => None,
                        })
                        .collect();
                    let is_symbolic = l.is_symbolic();
                    let (global, local) = if is_symbolic {
                        symbolic.push((l.global.clone(), l.local.clone()));
                        ([1; 3], [1; 3])
                    } else {
                        (eval_dims(&l.global, &[])?, eval_dims(&l.local, &[])?)
                    };
                    let args = l
                        .args
                        .iter()
                        .map(|a| match a {
                            RecordedArg::Buffer(b) => GraphArg::Fixed(Arg::Buffer(address(*b))),
                            RecordedArg::Input(n) => GraphArg::Input(*n),
                            RecordedArg::Var(n) => GraphArg::Var(*n),
                            RecordedArg::Value(v) => {
                                GraphArg::Fixed(v.map_scalar().unwrap_or(Arg::U64(0)))
                            }
                        })
                        .collect();
                    items.push(GraphItem {
                        work: Work::Launch(GraphLaunch {
                            program: l.program,
                            args,
                            global,
                            local,
                            symbolic_dims: is_symbolic,
                            dynamic_lds: l.dynamic_lds,
                        }),
                        reads: Vec::new(),
                        writes,
                    });
                }
            }
        }
        let has_copies = rec
            .items
            .iter()
            .any(|item| matches!(item, RecordedItem::Copy(_)));
        let inputs: Vec<u64> = rec.inputs.iter().map(|(b, _)| address(*b)).collect();
        let initial_vars: Vec<i32> = rec.vars.iter().map(|v| v.min).collect();
        let mut options = GraphOptions::default();
        if let Some(s) = rec.segment_dwords {
            options.segment_dwords = s;
        }
        let graph = AmdGraph::build(devices, &items, &inputs, &initial_vars, &options)?;
        Ok(LoweredGraph {
            graph,
            input_peers,
            copy_regions: has_copies.then(|| {
                fixed_buffers
                    .iter()
                    .map(|&b| (address(b), address(b) + b.size as u64))
                    .collect()
            }),
            symbolic,
            evaluated: Mutex::new(None),
        })
    }

    /// Replays on `queues` (see [`hcq_core::Backend::replay`]) with `values`.
    pub fn replay(
        &self,
        queues: &[&AmdDevice],
        values: &ReplayValues<'_, AmdBuffer>,
    ) -> Result<()> {
        // Most graphs swap a handful of inputs: their addresses stay on the stack.
        let mut few = [0u64; 8];
        let many: Vec<u64>;
        let inputs: &[u64] = if values.inputs.len() <= few.len() {
            for (slot, &b) in few.iter_mut().zip(values.inputs) {
                *slot = address(b);
            }
            &few[..values.inputs.len()]
        } else {
            many = values.inputs.iter().map(|&b| address(b)).collect();
            &many
        };
        if let Some(fixed) = &self.copy_regions {
            for (i, b) in values.inputs.iter().enumerate() {
                let (start, end) = (inputs[i], inputs[i] + b.size as u64);
                let overlaps = |&(s, e): &(u64, u64)| start < e && s < end;
                let other_input = values.inputs[..i]
                    .iter()
                    .zip(inputs)
                    .any(|(o, &a)| overlaps(&(a, a + o.size as u64)));
                if other_input || fixed.iter().any(overlaps) {
                    return Err(Error::InvalidArgument(format!(
                        "input {i} overlaps another input or a buffer of the graph (a graph \
                         with copies orders its work by buffer)"
                    )));
                }
            }
        }
        let mut evaluated = lock(&self.evaluated);
        let stale = !self.symbolic.is_empty() && evaluated.as_deref() != Some(values.vars);
        let dims = if stale {
            let mut dims: Vec<LaunchDims> = Vec::with_capacity(self.symbolic.len());
            for (global, local) in &self.symbolic {
                let (g, l) = (
                    eval_dims(global, values.vars)?,
                    eval_dims(local, values.vars)?,
                );
                validate_dims(g, l)?;
                dims.push((g, l));
            }
            Some(dims)
        } else {
            None
        };
        // Inputs other GPUs' copy engines write into are mapped there before anything changes.
        for (peers, b) in self.input_peers.iter().zip(values.inputs) {
            for &gpu in peers {
                b.buffer.memory().map_to(gpu)?;
            }
        }
        let replay_values = super::ReplayValues {
            inputs,
            vars: values.vars,
            dims: dims.as_deref(),
        };
        match self.graph.replay(queues, &replay_values) {
            Ok(()) => {
                if stale {
                    *evaluated = Some(values.vars.to_vec());
                }
                Ok(())
            }
            Err(e) => {
                // The AMD graph kept what it had: evaluate from scratch next time.
                *evaluated = None;
                Err(e)
            }
        }
    }
}
