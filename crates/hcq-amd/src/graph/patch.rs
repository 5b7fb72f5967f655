//! What a replay rewrites in a built graph: the words holding input addresses, variable
//! values and launch dimensions, found at build as [`PatchSite`]s (a mapping of the graph and
//! an offset in it, checked then), and how they are written.

use super::replay::Applied;
use super::{AmdGraph, ReplayValues};
use crate::dispatch::aql_dispatch_packet;
use crate::memory::GpuMemory;
use hcq_amd_sys::kd::KernelDescriptor;
use hcq_amd_sys::shared;
use hcq_core::{Error, Result};

/// One of the graph's mappings a replay writes into, by the part that owns it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Mapping {
    /// The argument segments (and AQL packets) of part `n`'s launches.
    Kernargs(usize),
    /// Part `n`'s compute stream.
    ComputeStream(usize),
    /// Part `n`'s copy stream.
    CopyStream(usize),
}

/// Bytes a replay rewrites: where they lie in one of the graph's mappings. Made only by
/// [`PatchSite::new`], which checks the bytes lie inside the mapping, so a write through a site
/// needs no check of its own.
#[derive(Debug, Clone, Copy)]
pub(super) struct PatchSite {
    mapping: Mapping,
    /// Byte offset in the mapping (unaligned for argument words: the metadata places them).
    offset: usize,
    /// Bytes the site spans.
    len: usize,
}

impl PatchSite {
    /// The `len` bytes at `offset` of `mapping`, which holds `mapping_bytes` bytes that stay
    /// allocated for the graph's life; `InvalidArgument` when they do not lie inside it.
    pub(super) fn new(
        mapping: Mapping,
        mapping_bytes: usize,
        offset: usize,
        len: usize,
    ) -> Result<PatchSite> {
        match offset.checked_add(len) {
            Some(end) if end <= mapping_bytes => Ok(PatchSite {
                mapping,
                offset,
                len,
            }),
            _ => Err(Error::InvalidArgument(format!(
                "graph patch of {len} bytes at offset {offset} lies outside the \
                 {mapping_bytes}-byte {mapping:?}"
            ))),
        }
    }
}

/// A 64-bit address word the host rewrites when an input changes, and the byte offset added
/// to the input's address (copies split into several packets).
#[derive(Debug, Clone, Copy)]
pub(super) struct AddressPatch {
    pub(super) site: PatchSite,
    pub(super) addend: u64,
}

/// The scratch registers of a dispatch whose kernel uses scratch memory: rewritten when the
/// graph replays on a queue other than the one whose scratch ring they name.
#[derive(Debug, Clone, Copy)]
pub(super) struct ScratchPatch {
    /// `COMPUTE_DISPATCH_SCRATCH_BASE_LO/HI` (two dwords).
    pub(super) base: PatchSite,
    /// `COMPUTE_TMPRING_SIZE` (one dword).
    pub(super) tmpring_size: PatchSite,
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
    /// The workgroup size (three dwords) of the dispatch in its compute stream.
    pub(super) local: PatchSite,
    /// The grid size (three dwords, `DISPATCH_DIRECT`'s) of the dispatch.
    pub(super) global: PatchSite,
    /// Hidden-argument slots (at most 8 bytes each), and what each holds.
    pub(super) hidden: Vec<(PatchSite, HiddenDim)>,
    /// The AQL dispatch packet, and GPU address of the argument segment it points to.
    pub(super) aql: Option<(PatchSite, u64)>,
    pub(super) descriptor: KernelDescriptor,
    /// LDS bytes per workgroup, dynamic ones included.
    pub(super) lds: u32,
}

impl AmdGraph {
    /// The memory `mapping` names (the graph owns it for its whole life).
    fn mapping(&self, mapping: Mapping) -> Option<&GpuMemory> {
        match mapping {
            Mapping::Kernargs(p) => self.parts.get(p)?.compute.as_ref().map(|c| &c.kernargs),
            Mapping::ComputeStream(p) => self.parts.get(p)?.compute.as_ref().map(|c| &c.stream),
            Mapping::CopyStream(p) => self.parts.get(p)?.copy.as_ref().map(|c| &c.stream),
        }
    }

    /// Writes `bytes` (at most the site's length) at `site`. Callers hold the graph's lock
    /// and have waited for the previous replay.
    fn store(&self, site: &PatchSite, bytes: &[u8]) {
        debug_assert!(bytes.len() <= site.len, "{bytes:?} overflows {site:?}");
        let Some(memory) = self.mapping(site.mapping) else {
            return;
        };
        let bytes = &bytes[..bytes.len().min(site.len)];
        // SAFETY: `PatchSite::new` checked that `site.offset + site.len` lies inside this
        // mapping, which the graph owns for its whole life, and at most `site.len` bytes are
        // written; GPU memory is only ever accessed atomically (the words may be unaligned);
        // callers hold the graph's lock (the only writer) and have waited for the previous
        // replay, so the GPU is not reading them.
        unsafe { shared::store(memory.as_ptr().add(site.offset), bytes) }
    }

    /// Writes `address` plus each patch's addend into every patch's 8-byte word: the cost of
    /// swapping an input, one aligned store per word in the usual case (argument words of
    /// pointers are 8-byte aligned), with the mapping looked up once per run of sites in it.
    fn store_addresses(&self, patches: &[AddressPatch], address: u64) {
        let mut current: Option<(Mapping, Option<&GpuMemory>)> = None;
        for p in patches {
            let memory = match current {
                Some((mapping, memory)) if mapping == p.site.mapping => memory,
                _ => {
                    let memory = self.mapping(p.site.mapping);
                    current = Some((p.site.mapping, memory));
                    memory
                }
            };
            let Some(memory) = memory else { continue };
            let word = address.wrapping_add(p.addend).to_le_bytes();
            if p.site.len < 8 {
                self.store(&p.site, &word[..p.site.len]);
                continue;
            }
            // SAFETY: as in `store`: `PatchSite::new` checked that the site's 8 bytes lie
            // inside this mapping, which the graph owns for its whole life; callers hold the
            // graph's lock and have waited for the previous replay, so the GPU is not reading
            // them; GPU memory is only accessed atomically.
            unsafe { shared::store_8(memory.as_ptr().add(p.site.offset), word) }
        }
    }

    /// Points every dispatch that uses scratch at the ring at `base` (256-byte aligned) with
    /// `tmpring_size`. Callers hold the graph's lock and have made sure no replay of it runs.
    pub(super) fn store_scratch(&self, base: u64, tmpring_size: u32) {
        let mut registers = [0u8; 8];
        registers[..4].copy_from_slice(&((base >> 8) as u32).to_le_bytes());
        registers[4..].copy_from_slice(&((base >> 40) as u32).to_le_bytes());
        for p in &self.scratch_patches {
            self.store(&p.base, &registers);
            self.store(&p.tmpring_size, &tmpring_size.to_le_bytes());
        }
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
                self.store_addresses(&self.input_patches[n], new);
                *old = new;
            }
        }
        for (n, (&new, old)) in values.vars.iter().zip(&mut applied.vars).enumerate() {
            if new != *old {
                for site in &self.var_patches[n] {
                    self.store(site, &new.to_le_bytes());
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
                self.store(&p.local, &dwords_le(local));
                self.store(&p.global, &dwords_le(global));
                self.patch_hidden_dims(p, global, local);
            }
            applied.dims = Some(new.to_vec());
        }
    }
}

/// Three dwords as the GPU reads them.
fn dwords_le(values: [u32; 3]) -> [u8; 12] {
    let mut bytes = [0u8; 12];
    for (b, v) in bytes.chunks_exact_mut(4).zip(values) {
        b.copy_from_slice(&v.to_le_bytes());
    }
    bytes
}

impl AmdGraph {
    /// Rewrites the hidden arguments and AQL packet of a launch whose dimensions changed.
    fn patch_hidden_dims(&self, p: &DimPatch, global: [u32; 3], local: [u32; 3]) {
        let grid_dims: u64 = if global[2] > 1 || local[2] > 1 {
            3
        } else if global[1] > 1 || local[1] > 1 {
            2
        } else {
            1
        };
        for (site, what) in &p.hidden {
            let value = match *what {
                HiddenDim::BlockCount(a) => global[a] as u64,
                HiddenDim::GroupSize(a) => local[a] as u64,
                HiddenDim::GridDims => grid_dims,
            };
            self.store(site, &value.to_le_bytes()[..site.len]);
        }
        if let Some((site, segment)) = &p.aql {
            let packet = aql_dispatch_packet(&p.descriptor, global, local, *segment, p.lds);
            self.store(site, &packet);
        }
    }
}
