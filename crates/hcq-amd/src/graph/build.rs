//! Building a graph: the argument segments of its launches, validated once, and the
//! command streams (PM4 for compute, SDMA for copies) with their waits and signals, split
//! into chained indirect-buffer segments when long; the patch lists replays rewrite.

use super::hazards::Ordering;
use super::patch::{AddressPatch, DimPatch, HiddenDim, Mapping, PatchSite, ScratchPatch};
use super::replay::Applied;
use super::*;
use crate::device::{lock, AmdDevice};
use crate::dispatch::{aql_dispatch_packet, dispatch_setup, lds_bytes, validate_dims};
use crate::memory::MemoryKind;
use crate::program::ArgKind;
use hcq_amd_sys::pm4::{DmaData, Header, IndirectBuffer, Packet as Packet4, Pm4Builder};
use hcq_amd_sys::sdma::{split, Packet, SdmaBuilder};
use hcq_core::{Error, Result};

impl AmdGraph {
    /// Builds the graph on `devs` (distinct GPUs of one driver; the first leads each replay;
    /// list every device whose memory the graph touches, even without work there, so its
    /// timeline orders the graph). Validates every launch (dimensions, arguments against the
    /// kernel metadata), writes the argument segments and the command streams with their
    /// waits and signals, and allocates the sync memory when there is more than one stream.
    /// `inputs` and `vars` are the values written at build (the first replay compares with
    /// them).
    pub fn build(
        devs: &[&AmdDevice],
        items: &[GraphItem<'_>],
        inputs: &[u64],
        vars: &[i32],
        options: &GraphOptions,
    ) -> Result<AmdGraph> {
        if options.segment_dwords < 256 || options.segment_dwords > IB_MAX_DWORDS {
            return Err(Error::InvalidArgument(format!(
                "indirect-buffer segments of {} dwords (256 to {IB_MAX_DWORDS})",
                options.segment_dwords
            )));
        }
        if items.is_empty() {
            return Err(Error::InvalidArgument(
                "a graph needs a launch or a copy".into(),
            ));
        }
        let Some(lead) = devs.first() else {
            return Err(Error::InvalidArgument("a graph needs a device".into()));
        };
        for (i, d) in devs.iter().enumerate() {
            if devs[..i].iter().any(|o| o.node.gpu_id == d.node.gpu_id) {
                return Err(Error::InvalidArgument(format!(
                    "{} is given twice to one graph",
                    d.name
                )));
            }
            if !std::sync::Arc::ptr_eq(&d.driver, &lead.driver) {
                return Err(Error::InvalidArgument(format!(
                    "{} and {} belong to different drivers",
                    lead.name, d.name
                )));
            }
        }
        let (order, synced) = Ordering::new(devs, items)?;
        let streams = order.stream_items.len();
        let sync = if synced {
            let bytes = progress(streams);
            let m = lead.alloc_mem(bytes, MemoryKind::Gtt, UNCACHED_GTT)?;
            for d in &devs[1..] {
                m.map_to(d.node.gpu_id)?;
            }
            m.write(0, &vec![0; bytes as usize])?;
            Some(m)
        } else {
            None
        };
        let sync_va = sync.as_ref().map_or(0, |m| m.va);
        let mut patches = Patches {
            inputs: vec![Vec::new(); inputs.len()],
            vars: vec![Vec::new(); vars.len()],
            dims: Vec::new(),
            scratch: Vec::new(),
        };
        let recipe = Recipe {
            items,
            order: &order,
            sync_va,
            inputs,
            vars,
            options,
        };
        let mut parts = Vec::with_capacity(devs.len());
        for (p, dev) in devs.iter().enumerate() {
            let compute = build_compute(dev, p, &recipe, &mut patches)?;
            let copy = build_copies(dev, p, &recipe, &mut patches)?;
            parts.push(Part {
                gpu_id: dev.node.gpu_id,
                compute,
                copy,
            });
        }
        let mut lock_order: Vec<usize> = (0..parts.len()).collect();
        lock_order.sort_by_key(|&p| parts[p].gpu_id);
        Ok(AmdGraph {
            lock_order,
            sync,
            stream_ends: order.stream_items.iter().map(|s| s.len() as u32).collect(),
            input_patches: patches.inputs,
            var_patches: patches.vars,
            dim_patches: patches.dims,
            scratch_patches: patches.scratch,
            max_wave_scratch: items
                .iter()
                .map(|item| match &item.work {
                    Work::Launch(l) => l.program.wave_scratch,
                    Work::Copy(_) => 0,
                })
                .max()
                .unwrap_or(0),
            applied: Mutex::new(Applied {
                inputs: inputs.to_vec(),
                vars: vars.to_vec(),
                dims: None,
                last_submission: vec![None; parts.len()],
                kickoff: 0,
                last_queue: None,
                scratch: None,
            }),
            parts,
            built_on: lead.progress.clone(),
            uses_scratch: items.iter().any(|item| match &item.work {
                Work::Launch(l) => l.program.wave_scratch > 0,
                Work::Copy(_) => false,
            }),
            launches: items
                .iter()
                .filter(|item| matches!(item.work, Work::Launch(_)))
                .count(),
            copies: items
                .iter()
                .filter(|item| matches!(item.work, Work::Copy(_)))
                .count(),
        })
    }
}

/// Byte offsets of the explicit arguments of `prg` in its argument segment, the packing
/// `write_kernargs` uses (metadata offsets, else natural alignment in order).
fn explicit_arg_offsets(prg: &AmdProgram, args: &[GraphArg]) -> Vec<u64> {
    if prg.args.is_empty() {
        let mut off = 0u64;
        return args
            .iter()
            .map(|a| {
                let size = match a {
                    GraphArg::Fixed(f) => f.size() as u64,
                    GraphArg::Input(_) => 8,
                    GraphArg::Var(_) => 4,
                };
                off = off.next_multiple_of(size);
                let at = off;
                off += size;
                at
            })
            .collect();
    }
    prg.args
        .iter()
        .filter(|a| a.is_explicit())
        .map(|a| a.offset as u64)
        .collect()
}

/// The hidden arguments of `prg` that depend on the launch dimensions: (byte offset in the
/// argument segment, bytes, what it holds).
fn hidden_dims(prg: &AmdProgram) -> Vec<(usize, usize, HiddenDim)> {
    let axis = |k: &str| match k.as_bytes().last() {
        Some(b'x') => 0,
        Some(b'y') => 1,
        _ => 2,
    };
    prg.args
        .iter()
        .filter_map(|a| {
            let ArgKind::Hidden(kind) = &a.kind else {
                return None;
            };
            let what = match kind.as_str() {
                k if k.starts_with("block_count_") => HiddenDim::BlockCount(axis(k)),
                k if k.starts_with("group_size_") => HiddenDim::GroupSize(axis(k)),
                "grid_dims" => HiddenDim::GridDims,
                _ => return None,
            };
            Some((a.offset as usize, (a.size as usize).min(8), what))
        })
        .collect()
}

/// Patch lists being gathered while the streams are built.
struct Patches {
    inputs: Vec<Vec<AddressPatch>>,
    vars: Vec<Vec<PatchSite>>,
    dims: Vec<DimPatch>,
    scratch: Vec<ScratchPatch>,
}

/// What every stream of a graph is built from.
struct Recipe<'r, 'a> {
    items: &'r [GraphItem<'a>],
    order: &'r Ordering,
    /// GPU address of the sync memory (0 without one).
    sync_va: u64,
    /// Addresses and values written at build.
    inputs: &'r [u64],
    vars: &'r [i32],
    options: &'r GraphOptions,
}

/// Builds the compute stream of part `p` (`None` when it has no launches): the argument
/// segments, validated, then the PM4 of each launch with its waits and signal, split into
/// chained segments when long.
fn build_compute(
    dev: &AmdDevice,
    p: usize,
    recipe: &Recipe<'_, '_>,
    patches: &mut Patches,
) -> Result<Option<ComputeStream>> {
    let Recipe {
        items,
        order,
        sync_va,
        inputs,
        vars,
        options,
    } = *recipe;
    // Launches, and the copies of a GPU without a copy engine.
    let stream_items: Vec<(usize, &Work<'_>)> = order.stream_items[stream_of(p, false)]
        .iter()
        .map(|&i| (i, &items[i].work))
        .collect();
    if stream_items.is_empty() {
        return Ok(None);
    }
    // Pass 1: argument segments, validated, in a host image; patch offsets in it.
    let mut image: Vec<u8> = Vec::new();
    let mut placed = Vec::with_capacity(stream_items.len());
    let mut input_offsets: Vec<(usize, u64)> = Vec::new();
    let mut var_offsets: Vec<(usize, u64)> = Vec::new();
    for &(i, work) in &stream_items {
        let Work::Launch(l) = work else {
            placed.push((0, false, 0));
            continue;
        };
        let prg = l.program;
        validate_dims(l.global, l.local)
            .map_err(|e| Error::InvalidArgument(format!("item {i} ({}): {e}", prg.name)))?;
        let lds = lds_bytes(prg, l.dynamic_lds)?;
        let mut args = Vec::with_capacity(l.args.len());
        for a in &l.args {
            args.push(match *a {
                GraphArg::Fixed(f) => f,
                GraphArg::Input(n) => Arg::Buffer(*inputs.get(n).ok_or_else(|| {
                    Error::InvalidArgument(format!("item {i}: no graph input {n}"))
                })?),
                GraphArg::Var(n) => {
                    Arg::I32(*vars.get(n).ok_or_else(|| {
                        Error::InvalidArgument(format!("item {i}: no variable {n}"))
                    })?)
                }
            });
        }
        let with_aql = prg.user_sgprs.dispatch_ptr.is_some();
        let need = (prg.kernarg_size as u64).next_multiple_of(64) + if with_aql { 64 } else { 0 };
        let at = (image.len() as u64).next_multiple_of(prg.kernarg_align as u64);
        image.resize((at + need) as usize, 0);
        let seg = &mut image[at as usize..(at + prg.kernarg_size as u64) as usize];
        prg.write_kernargs(&args, |&a| Ok(a), l.global, l.local, seg)?;
        prg.write_dynamic_lds_size(l.dynamic_lds, seg);
        for (a, off) in l.args.iter().zip(explicit_arg_offsets(prg, &l.args)) {
            match *a {
                GraphArg::Input(n) => input_offsets.push((n, at + off)),
                GraphArg::Var(n) => var_offsets.push((n, at + off)),
                GraphArg::Fixed(_) => {}
            }
        }
        placed.push((at, with_aql, lds));
    }
    let kernargs = dev.alloc_mem(
        (image.len() as u64).max(64),
        MemoryKind::Vram,
        AllocFlags::default(),
    )?;
    let kernargs_site = |offset: u64, len: usize| {
        PatchSite::new(Mapping::Kernargs(p), image.len(), offset as usize, len)
    };
    for (n, off) in input_offsets {
        patches.inputs[n].push(AddressPatch {
            site: kernargs_site(off, 8)?,
            addend: 0,
        });
    }
    for (n, off) in var_offsets {
        patches.vars[n].push(kernargs_site(off, 4)?);
    }
    // Pass 2: the command stream, with the AQL packets written into the image.
    let mut st = lock(&dev.state);
    let scratch = st.scratch.clone();
    let mut b = Pm4Builder::new();
    let mut chains: Vec<usize> = Vec::new();
    let mut segment_start = 0usize;
    let limit = options.segment_dwords as usize;
    // (input, dword index in the stream, offset added to the input's address) of copies.
    let mut address_words: Vec<(usize, usize, u64)> = Vec::new();
    for (&(item, work), &(at, with_aql, lds)) in stream_items.iter().zip(&placed) {
        let l = match work {
            Work::Launch(l) => l,
            Work::Copy(c) => {
                let (dst, src) = copy_ends(item, c, inputs)?;
                let emit = |b: &mut Pm4Builder| -> usize {
                    order.item_commands(b, item, sync_va, |b| {
                        let start = b.words.len();
                        b.copy(dst, src, c.size);
                        start
                    })
                };
                let before = b.words.len();
                let mut start = emit(&mut b);
                if b.words.len() - segment_start + IndirectBuffer::DWORDS > limit {
                    if before == segment_start {
                        return Err(Error::InvalidArgument(format!(
                            "item {item} (a copy of {} bytes) takes {} dwords, more than a {limit}-dword segment",
                            c.size,
                            b.words.len() - before
                        )));
                    }
                    b.words.truncate(before);
                    chains.push(b.words.len());
                    b.chain_indirect_buffer(0, 0);
                    segment_start = b.words.len();
                    start = emit(&mut b);
                }
                let mut k = start;
                while let Ok(Packet4::DmaData(pk)) = Packet4::decode(
                    Header::parse(b.words[k]),
                    &b.words[k + 1..(k + 1 + DmaData::PAYLOAD).min(b.words.len())],
                ) {
                    // SRC_ADDR at dwords 2..4, DST_ADDR at 4..6.
                    if let CopyEnd::Input(n) = c.src {
                        address_words.push((n, k + 2, pk.src - src));
                    }
                    if let CopyEnd::Input(n) = c.dst {
                        address_words.push((n, k + 4, pk.dst - dst));
                    }
                    k += 1 + DmaData::PAYLOAD;
                    if pk.cp_sync || k >= b.words.len() {
                        break;
                    }
                }
                continue;
            }
        };
        let prg = l.program;
        let kernargs_addr = kernargs.va + at;
        let aql_at = at + (prg.kernarg_size as u64).next_multiple_of(64);
        let dispatch_ptr = if with_aql {
            let packet =
                aql_dispatch_packet(&prg.descriptor, l.global, l.local, kernargs_addr, lds);
            image[aql_at as usize..aql_at as usize + 64].copy_from_slice(&packet);
            kernargs.va + aql_at
        } else {
            0
        };
        let setup = dispatch_setup(prg, &mut st, kernargs_addr, dispatch_ptr, lds);
        let emit = |b: &mut Pm4Builder| {
            order.item_commands(b, item, sync_va, |b| b.exec(&setup, l.global, l.local))
        };
        let before = b.words.len();
        let mut patch = emit(&mut b);
        if b.words.len() - segment_start + IndirectBuffer::DWORDS > limit {
            if before == segment_start {
                return Err(Error::InvalidArgument(format!(
                    "one launch takes {} dwords, more than a {limit}-dword segment",
                    b.words.len() - before
                )));
            }
            // Move this launch to a new segment behind a chaining packet.
            b.words.truncate(before);
            chains.push(b.words.len());
            b.chain_indirect_buffer(0, 0);
            segment_start = b.words.len();
            patch = emit(&mut b);
        }
        if prg.wave_scratch > 0 {
            let mapping_bytes = 4 * b.words.len();
            let site = |dword: usize, len: usize| {
                PatchSite::new(Mapping::ComputeStream(p), mapping_bytes, 4 * dword, len)
            };
            patches.scratch.push(ScratchPatch {
                base: site(patch.scratch_base_at(), 8)?,
                tmpring_size: site(patch.tmpring_size_at(), 4)?,
            });
        }
        if l.symbolic_dims {
            // Words already emitted stay: the stream only grows from here.
            let stream_site = |dword: usize| {
                PatchSite::new(Mapping::ComputeStream(p), 4 * b.words.len(), 4 * dword, 12)
            };
            let kernargs_site = |offset: u64, len: usize| {
                PatchSite::new(Mapping::Kernargs(p), image.len(), offset as usize, len)
            };
            let mut hidden = Vec::new();
            for (offset, len, what) in hidden_dims(prg) {
                hidden.push((kernargs_site(at + offset as u64, len)?, what));
            }
            let aql = if with_aql {
                Some((kernargs_site(aql_at, 64)?, kernargs_addr))
            } else {
                None
            };
            patches.dims.push(DimPatch {
                local: stream_site(patch.local_at())?,
                global: stream_site(patch.global_at())?,
                hidden,
                aql,
                descriptor: prg.descriptor,
                lds,
            });
        }
    }
    drop(st);
    let dwords = b.words.len();
    let stream = dev.alloc_mem((dwords as u64 * 4).max(64), MemoryKind::Gtt, UNCACHED_GTT)?;
    // Point each chaining packet at the segment after it.
    let mut words = b.words;
    for (k, &c) in chains.iter().enumerate() {
        let next_start = c + IndirectBuffer::DWORDS;
        let next_end = chains
            .get(k + 1)
            .map_or(dwords, |&n| n + IndirectBuffer::DWORDS);
        let mut packet = Vec::with_capacity(IndirectBuffer::DWORDS);
        IndirectBuffer {
            address: stream.va + next_start as u64 * 4,
            size_dwords: (next_end - next_start) as u32,
            chain: true,
            valid: true,
        }
        .encode(&mut packet);
        words[c..next_start].copy_from_slice(&packet);
    }
    let first_segment_dwords = chains
        .first()
        .map_or(dwords, |&c| c + IndirectBuffer::DWORDS) as u32;
    kernargs.write(0, &image)?;
    stream.write(0, bytemuck_words(&words))?;
    for (n, k, addend) in address_words {
        patches.inputs[n].push(AddressPatch {
            site: PatchSite::new(Mapping::ComputeStream(p), 4 * dwords, 4 * k, 8)?,
            addend,
        });
    }
    Ok(Some(ComputeStream {
        kernargs,
        _scratch: scratch,
        stream,
        dwords,
        first_segment_dwords,
        segments: chains.len() + 1,
    }))
}

/// The destination and source addresses of copy `item` with the graph's build-time inputs.
fn copy_ends(item: usize, c: &GraphCopy, inputs: &[u64]) -> Result<(u64, u64)> {
    let resolve = |end: CopyEnd| match end {
        CopyEnd::Fixed(a) => Ok(a),
        CopyEnd::Input(n) => inputs.get(n).copied().ok_or_else(|| {
            Error::InvalidArgument(format!("item {item} (a copy): no graph input {n}"))
        }),
    };
    Ok((resolve(c.dst)?, resolve(c.src)?))
}

/// Builds the copy stream of part `p` (`None` when its engine runs no copies): each copy
/// behind its waits, followed by a fence of its position when something waits for it.
fn build_copies(
    dev: &AmdDevice,
    p: usize,
    recipe: &Recipe<'_, '_>,
    patches: &mut Patches,
) -> Result<Option<CopyStream>> {
    let Recipe {
        items,
        order,
        sync_va,
        inputs,
        ..
    } = *recipe;
    let own = stream_of(p, true);
    if order.stream_items[own].is_empty() {
        return Ok(None);
    }
    let mut b = SdmaBuilder::new();
    // (input, dword index in the stream, offset added to the input's address).
    let mut address_words: Vec<(usize, usize, u64)> = Vec::new();
    for &i in &order.stream_items[own] {
        let Work::Copy(c) = &items[i].work else {
            unreachable!("launches are on compute streams")
        };
        let (dst, src) = copy_ends(i, c, inputs)?;
        order.item_commands(&mut b, i, sync_va, |b| {
            let start = b.words.len();
            b.copy(dst, src, c.size);
            let mut k = start;
            for packet in split(&b.words[start..]) {
                if let Ok(Packet::CopyLinear(pk)) = Packet::decode(packet) {
                    // SRC_ADDR at dwords 3..5, DST_ADDR at 5..7.
                    if let CopyEnd::Input(n) = c.src {
                        address_words.push((n, k + 3, pk.src - src));
                    }
                    if let CopyEnd::Input(n) = c.dst {
                        address_words.push((n, k + 5, pk.dst - dst));
                    }
                }
                k += packet.len();
            }
        });
    }
    let dwords = b.words.len();
    let stream = dev.alloc_mem((dwords as u64 * 4).max(64), MemoryKind::Gtt, UNCACHED_GTT)?;
    stream.write(0, bytemuck_words(&b.words))?;
    for (n, k, addend) in address_words {
        patches.inputs[n].push(AddressPatch {
            site: PatchSite::new(Mapping::CopyStream(p), 4 * dwords, 4 * k, 8)?,
            addend,
        });
    }
    Ok(Some(CopyStream { stream, dwords }))
}

fn bytemuck_words(words: &[u32]) -> &[u8] {
    // SAFETY: any u32 slice is a valid byte slice of four times its length.
    unsafe { std::slice::from_raw_parts(words.as_ptr() as *const u8, words.len() * 4) }
}
