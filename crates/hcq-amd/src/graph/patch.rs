//! What a replay rewrites in a built graph: the words holding input addresses, variable
//! values and launch dimensions, found at build, and how they are written.

use super::replay::Applied;
use super::{AmdGraph, ReplayValues};
use crate::dispatch::aql_dispatch_packet;
use hcq_amd_sys::kd::KernelDescriptor;
use hcq_amd_sys::pm4::DispatchPatch;
use hcq_amd_sys::shared;

/// A 64-bit address word the host rewrites when an input changes: its CPU address, and the
/// byte offset added to the input's address (copies split into several packets).
#[derive(Debug, Clone, Copy)]
pub(super) struct AddressPatch {
    pub(super) at: usize,
    pub(super) offset: u64,
}

/// A hidden argument that depends on the launch dimensions.
#[derive(Debug, Clone, Copy)]
pub(super) enum HiddenDim {
    BlockCount(usize),
    GroupSize(usize),
    GridDims,
}

/// Everything a replay rewrites for one launch whose dimensions change.
#[derive(Debug, Clone)]
pub(super) struct DimPatch {
    /// The part whose compute stream holds the dispatch.
    pub(super) part: usize,
    pub(super) dispatch: DispatchPatch,
    /// (CPU address in the part's kernarg memory, size in bytes, what it holds).
    pub(super) hidden: Vec<(usize, usize, HiddenDim)>,
    /// CPU address of the AQL dispatch packet, and GPU address of the argument segment it
    /// points to.
    pub(super) aql: Option<(usize, u64)>,
    pub(super) descriptor: KernelDescriptor,
    /// LDS bytes per workgroup, dynamic ones included.
    pub(super) lds: u32,
}

/// Writes `bytes` at CPU address `at` of GPU memory.
///
/// # Safety
/// `at..at + bytes.len()` must lie in a live CPU mapping of GPU memory the caller may write;
/// the words may be unaligned (kernel-argument offsets come from the metadata).
unsafe fn write_gpu_bytes(at: usize, bytes: &[u8]) {
    // SAFETY: per this function's contract; GPU memory is never a Rust reference and is
    // accessed atomically by everyone.
    unsafe { shared::store(at as *mut u8, bytes) }
}

impl AmdGraph {
    /// Overwrites the compute stream words of `part` from dword `at` with `values`. Callers
    /// hold the graph's lock and have waited for the previous replay.
    pub(super) fn store_stream_words(&self, part: usize, at: usize, values: &[u32]) {
        let Some(c) = &self.parts[part].compute else {
            return;
        };
        match at.checked_add(values.len()) {
            Some(end) if end <= c.dwords => {}
            _ => return,
        }
        let bytes: Vec<u8> = values.iter().flat_map(|v| v.to_le_bytes()).collect();
        // SAFETY: the stream mapping holds `dwords` dwords for the life of the graph and
        // `at + values.len() <= dwords` (checked); callers hold the graph's lock (the only
        // writer) and have waited for the previous replay.
        unsafe { write_gpu_bytes(c.stream.as_ptr() as usize + 4 * at, &bytes) };
    }

    /// Rewrites the words of every input, variable and dimension that changed, and records
    /// the new values. Callers hold the graph's lock and have waited for the previous replay.
    pub(super) fn patch(
        &self,
        applied: &mut Applied,
        values: &ReplayValues<'_>,
        dims_changed: bool,
    ) {
        for (n, (&new, old)) in values.inputs.iter().zip(&mut applied.inputs).enumerate() {
            if new != *old {
                for p in &self.input_patches[n] {
                    // SAFETY: every patch address was taken at build inside a mapping the
                    // graph owns (argument segments, copy streams) for its whole life; the
                    // previous replay has finished and the graph's lock makes this the only
                    // writer.
                    unsafe { write_gpu_bytes(p.at, &new.wrapping_add(p.offset).to_le_bytes()) };
                }
                *old = new;
            }
        }
        for (n, (&new, old)) in values.vars.iter().zip(&mut applied.vars).enumerate() {
            if new != *old {
                for &at in &self.var_patches[n] {
                    // SAFETY: as for the inputs above: a 4-byte argument word in the graph's
                    // argument memory, not read by the GPU meanwhile.
                    unsafe { write_gpu_bytes(at, &new.to_le_bytes()) };
                }
                *old = new;
            }
        }
        if dims_changed {
            let new = values.dims.unwrap_or_default();
            let old = applied.dims.take();
            for (k, (p, &(global, local))) in self.dim_patches.iter().zip(new).enumerate() {
                if old.as_ref().map(|d| d[k]) == Some((global, local)) {
                    continue;
                }
                self.store_stream_words(p.part, p.dispatch.local_at(), &local);
                self.store_stream_words(p.part, p.dispatch.global_at(), &global);
                patch_hidden_dims(p, global, local);
            }
            applied.dims = Some(new.to_vec());
        }
    }
}

/// Rewrites the hidden arguments and AQL packet of a launch whose dimensions changed.
fn patch_hidden_dims(p: &DimPatch, global: [u32; 3], local: [u32; 3]) {
    let grid_dims: u64 = if global[2] > 1 || local[2] > 1 {
        3
    } else if global[1] > 1 || local[1] > 1 {
        2
    } else {
        1
    };
    for &(at, size, what) in &p.hidden {
        let value = match what {
            HiddenDim::BlockCount(a) => global[a] as u64,
            HiddenDim::GroupSize(a) => local[a] as u64,
            HiddenDim::GridDims => grid_dims,
        };
        let bytes = value.to_le_bytes();
        // SAFETY: `at..at + size` (size <= 8) is a hidden-argument slot inside the graph's
        // argument memory, found at build; the caller has waited for the previous replay and
        // holds the graph's lock.
        unsafe { write_gpu_bytes(at, &bytes[..size]) };
    }
    if let Some((aql_at, segment)) = p.aql {
        let packet = aql_dispatch_packet(&p.descriptor, global, local, segment, p.lds);
        // SAFETY: the 64-byte AQL packet slot after the launch's argument segment, inside the
        // graph's argument memory; same conditions as above.
        unsafe { write_gpu_bytes(aql_at, &packet) };
    }
}
