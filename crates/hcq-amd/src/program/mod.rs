//! Programs: kernels loaded from code objects onto a device ([`AmdDevice::load_program`]),
//! ready to launch.
//!
//! - `code_object`: the ELF a compiler emits for `amdgcn-amd-amdhsa`: its checks, kernel
//!   symbols, loaded image and kernel descriptors.
//! - `metadata`: the code object's metadata note: kernels and their arguments.
//! - `kernargs`: the layout a launch's arguments are written in.

mod code_object;
mod kernargs;
mod metadata;

pub use code_object::{
    is_relocatable_amdgpu, source_name, validate_descriptor, AlignedCodeObject, CodeObject,
    MAX_IMAGE_BYTES,
};
pub use metadata::{check_arg_layout, ArgInfo, ArgKind, KernelMeta, MAX_KERNARG_ALIGN};

use crate::device::AmdDevice;
use crate::dispatch::{scratch_wave_bytes, WAVE_LANES};
use crate::memory::{AllocFlags, GpuMemory, MemoryKind};
use hcq_amd_sys::kd::{self, KernelDescriptor, UserSgprLayout};
use hcq_amd_sys::regs;
use hcq_core::{Error, ProgramInfo, Result};
use std::sync::Arc;

fn bad(msg: impl Into<String>) -> Error {
    Error::InvalidCodeObject(msg.into())
}

/// A kernel uploaded to a GPU, ready to launch.
#[derive(Debug)]
pub struct AmdProgram {
    /// The kernel's name as its metadata gives it.
    pub name: String,
    /// The uploaded image; kept alive as long as the program, and longer when work that may
    /// run it is still queued ([`crate::AmdDevice::free_after_work`]).
    pub image: std::sync::Arc<GpuMemory>,
    /// Its kernel descriptor, as the code object holds it.
    pub descriptor: KernelDescriptor,
    /// `COMPUTE_PGM_RSRC1` as dispatched: the descriptor's, with the bits the device's
    /// architecture needs ([`hcq_amd_sys::regs::dispatch_rsrc1_bits`]).
    pub rsrc1: u32,
    /// GPU address of the first instruction.
    pub code_entry: u64,
    /// Which user SGPRs the dispatch must load, and where (from the descriptor's enables).
    pub user_sgprs: UserSgprLayout,
    /// Arguments from the metadata (empty when the code object has none).
    pub args: Vec<ArgInfo>,
    /// Bytes to reserve for kernel arguments, hidden ones included.
    pub kernarg_size: u32,
    /// Alignment of the kernel-argument buffer (at least 16).
    pub kernarg_align: u32,
    /// Most work-items per workgroup the kernel was compiled for, when its metadata says.
    pub max_workgroup_size: Option<u32>,
    /// Its resources and occupancy on the device it was loaded on.
    pub info: ProgramInfo,
    pub(crate) device_gpu_id: u32,
    /// Bytes of scratch each wave needs (0 for none): every queue that launches the program
    /// needs a scratch ring at least this large.
    pub(crate) wave_scratch: u64,
}

/// What kernel `d` (with metadata `meta`) asks of a device of architecture `arch`, and the
/// occupancy that allows.
pub fn program_info(arch: &str, d: &KernelDescriptor, meta: Option<&KernelMeta>) -> ProgramInfo {
    use hcq_amd_sys::occupancy::{self, Limit};
    let allocated_vgprs = d.wave32_vgprs();
    let vgprs = meta.and_then(|m| m.vgpr_count).unwrap_or(allocated_vgprs);
    let max_workgroup_size = meta.and_then(|m| m.max_flat_workgroup_size).unwrap_or(1024);
    let (waves_per_simd, limit) =
        occupancy::waves_per_simd(arch, vgprs, d.group_segment_fixed_size, max_workgroup_size);
    ProgramInfo {
        vgprs,
        allocated_vgprs,
        sgprs: meta.and_then(|m| m.sgpr_count),
        static_lds: d.group_segment_fixed_size,
        max_dynamic_lds: hcq_amd_sys::regs::LDS_MAX_BYTES
            .saturating_sub(d.group_segment_fixed_size),
        scratch_per_lane: d.private_segment_fixed_size,
        max_workgroup_size,
        wave_size: occupancy::WAVE_LANES,
        waves_per_simd,
        occupancy_limit: match limit {
            Limit::WaveSlots => "wave slots",
            Limit::Registers => "registers",
            Limit::Lds => "LDS",
        },
    }
}

impl AmdDevice {
    /// Uploads kernel `name` from a code object.
    ///
    /// A relocatable object (ELF type `ET_REL`: `clang -c` for OpenCL or C, LLVM's code
    /// generator) is linked with ld.lld first.
    pub fn load_program(&self, code_object: &[u8], name: &str) -> Result<AmdProgram> {
        let linked;
        let code_object = if crate::program::is_relocatable_amdgpu(code_object) {
            linked = self.compiler.link_relocatable(code_object)?;
            &linked[..]
        } else {
            code_object
        };
        let aligned = AlignedCodeObject::new(code_object);
        let co = CodeObject::parse(aligned.bytes())?;
        co.check_target(&self.node.arch, &self.name)?;
        // The caller's name (`scale`) for the program; its symbol (`_Z5scalePfPKffi` when C++
        // mangled it) for the lookups.
        let requested = name;
        let symbol = co.resolve_kernel(name)?;
        let name = symbol.as_str();
        let kd_offset = co.descriptor_offset(name)?;
        let image = self.alloc_mem(
            co.image_size,
            MemoryKind::Vram,
            AllocFlags {
                uncached: false,
                public: true,
            },
        )?;
        let bytes = co.image(image.va)?;
        let kd_bytes = bytes
            .get(kd_offset as usize..)
            .and_then(|b| b.get(..kd::KERNEL_DESCRIPTOR_SIZE))
            .ok_or_else(|| {
                Error::InvalidCodeObject(format!("descriptor of {name} lies outside the image"))
            })?;
        let descriptor = KernelDescriptor::parse(kd_bytes).expect("64 bytes were sliced");
        let entry = validate_descriptor(name, &descriptor, kd_offset, &co)?;
        let wave_scratch = scratch_wave_bytes(descriptor.private_segment_fixed_size);
        if wave_scratch > regs::TMPRING_MAX_WAVE_BYTES {
            return Err(Error::InvalidCodeObject(format!(
                "kernel {name}: private_segment_fixed_size asks for {} bytes of scratch per \
                 work-item; gfx11 gives a wave32 at most {} bytes, {} per work-item",
                descriptor.private_segment_fixed_size,
                regs::TMPRING_MAX_WAVE_BYTES,
                regs::TMPRING_MAX_WAVE_BYTES / WAVE_LANES
            )));
        }
        let meta = co.kernels.iter().find(|k| k.name == name);
        let (args, kernarg_size, kernarg_align, max_workgroup_size) = match meta {
            Some(m) => (
                m.args.clone(),
                m.kernarg_segment_size.max(descriptor.kernarg_size),
                m.kernarg_segment_align,
                m.max_flat_workgroup_size,
            ),
            None => (Vec::new(), descriptor.kernarg_size, 8, None),
        };
        // A quarter of the ring, so that several launches are in flight between waits.
        let kernarg_limit = self.kernargs.size / 4;
        if kernarg_size as u64 > kernarg_limit {
            return Err(Error::InvalidCodeObject(format!(
                "kernel {name} has a {kernarg_size}-byte argument segment (kernarg_size {} in \
                 the descriptor, {} in the metadata); {} takes at most {kernarg_limit}",
                descriptor.kernarg_size,
                meta.map_or(0, |m| m.kernarg_segment_size),
                self.name
            )));
        }
        check_arg_layout(
            name,
            &args,
            kernarg_size,
            "the larger of kernarg_size and .kernarg_segment_size",
        )?;
        image.write(0, &bytes)?;
        if wave_scratch > 0 {
            self.ensure_scratch(wave_scratch)?;
        }
        Ok(AmdProgram {
            name: requested.to_string(),
            code_entry: image.va + entry,
            image: Arc::new(image),
            user_sgprs: descriptor.user_sgpr_layout(),
            rsrc1: descriptor.compute_pgm_rsrc1 | regs::dispatch_rsrc1_bits(&self.node.arch),
            descriptor,
            args,
            kernarg_size,
            kernarg_align: kernarg_align.max(16),
            max_workgroup_size,
            info: crate::program::program_info(&self.node.arch, &descriptor, meta),
            device_gpu_id: self.node.gpu_id,
            wave_scratch,
        })
    }
}
