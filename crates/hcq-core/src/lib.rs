//! What every hcq backend shares: [`Error`], kernel arguments ([`Arg`]), and the on-disk
//! [`CompileCache`]. Backends (`hcq-amd`, `hcq-metal`) build on this; users see it re-exported
//! by the `hcq` crate.

#![deny(missing_docs)]

mod cache;
pub mod compile_options;
mod error;

pub use cache::{CompileCache, CompileKey, CompileOutput, FRESH_FILE_WINDOW};
pub use compile_options::CompileOptions;
pub use error::{Error, Result};

/// Most bytes an [`Arg::Bytes`] holds.
pub const ARG_BYTES_MAX: usize = 128;

/// The bytes of an argument passed by value that is not a plain number: a struct, a vector
/// type, a small array (at most [`ARG_BYTES_MAX`] bytes, stored inline so [`Arg`] stays
/// `Copy`). Derefs to its bytes.
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct ArgBytes {
    len: u8,
    data: [u8; ARG_BYTES_MAX],
}

impl ArgBytes {
    /// `bytes`, little-endian as the kernel reads them; more than [`ARG_BYTES_MAX`] bytes is
    /// an [`Error::InvalidArgument`].
    pub fn new(bytes: &[u8]) -> Result<ArgBytes> {
        if bytes.len() > ARG_BYTES_MAX {
            return Err(Error::InvalidArgument(format!(
                "a by-value argument of {} bytes (at most {ARG_BYTES_MAX})",
                bytes.len()
            )));
        }
        let mut data = [0; ARG_BYTES_MAX];
        data[..bytes.len()].copy_from_slice(bytes);
        Ok(ArgBytes {
            len: bytes.len() as u8,
            data,
        })
    }

    fn of(bytes: &[u8]) -> ArgBytes {
        Self::new(bytes).expect("scalars are at most 8 bytes")
    }
}

impl Default for ArgBytes {
    fn default() -> Self {
        ArgBytes {
            len: 0,
            data: [0; ARG_BYTES_MAX],
        }
    }
}

impl std::ops::Deref for ArgBytes {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        &self.data[..self.len as usize]
    }
}

impl std::fmt::Debug for ArgBytes {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "ArgBytes({:02x?})", &**self)
    }
}

/// One kernel argument, in kernel-signature order.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Arg<B> {
    /// A device buffer, passed as its device address.
    Buffer(B),
    /// A 32-bit signed integer (`int`).
    I32(i32),
    /// A 32-bit unsigned integer (`unsigned int`).
    U32(u32),
    /// A 64-bit signed integer (`long`, `int64_t`).
    I64(i64),
    /// A 64-bit unsigned integer (`size_t`, `uint64_t`).
    U64(u64),
    /// An IEEE single (`float`).
    F32(f32),
    /// An IEEE double (`double`).
    F64(f64),
    /// An 8-bit signed integer (`signed char`, `int8_t`).
    I8(i8),
    /// An 8-bit unsigned integer (`unsigned char`, `uint8_t`).
    U8(u8),
    /// A 16-bit signed integer (`short`).
    I16(i16),
    /// A 16-bit unsigned integer (`unsigned short`).
    U16(u16),
    /// An IEEE half (`_Float16`, `__half`) given by its bits.
    F16(u16),
    /// A C++ `bool` (one byte).
    Bool(bool),
    /// Any other by-value argument (a struct, a vector type), as its bytes.
    Bytes(ArgBytes),
}

impl<B> Arg<B> {
    /// Bytes the argument occupies in the kernel-argument segment.
    pub fn size(&self) -> usize {
        match self {
            Arg::I8(_) | Arg::U8(_) | Arg::Bool(_) => 1,
            Arg::I16(_) | Arg::U16(_) | Arg::F16(_) => 2,
            Arg::I32(_) | Arg::U32(_) | Arg::F32(_) => 4,
            Arg::Buffer(_) | Arg::I64(_) | Arg::U64(_) | Arg::F64(_) => 8,
            Arg::Bytes(b) => b.len(),
        }
    }
    /// Short type name for error messages.
    pub fn type_name(&self) -> &'static str {
        match self {
            Arg::Buffer(_) => "buffer",
            Arg::I32(_) => "i32",
            Arg::U32(_) => "u32",
            Arg::I64(_) => "i64",
            Arg::U64(_) => "u64",
            Arg::F32(_) => "f32",
            Arg::F64(_) => "f64",
            Arg::I8(_) => "i8",
            Arg::U8(_) => "u8",
            Arg::I16(_) => "i16",
            Arg::U16(_) => "u16",
            Arg::F16(_) => "f16",
            Arg::Bool(_) => "bool",
            Arg::Bytes(_) => "bytes",
        }
    }
    /// The value's little-endian bytes, [`Arg::size`] of them (`None` for buffers).
    pub fn scalar_bytes(&self) -> Option<ArgBytes> {
        Some(match *self {
            Arg::Buffer(_) => return None,
            Arg::I32(v) => ArgBytes::of(&v.to_le_bytes()),
            Arg::U32(v) => ArgBytes::of(&v.to_le_bytes()),
            Arg::F32(v) => ArgBytes::of(&v.to_le_bytes()),
            Arg::I64(v) => ArgBytes::of(&v.to_le_bytes()),
            Arg::U64(v) => ArgBytes::of(&v.to_le_bytes()),
            Arg::F64(v) => ArgBytes::of(&v.to_le_bytes()),
            Arg::I8(v) => ArgBytes::of(&v.to_le_bytes()),
            Arg::U8(v) => ArgBytes::of(&[v]),
            Arg::I16(v) => ArgBytes::of(&v.to_le_bytes()),
            Arg::U16(v) | Arg::F16(v) => ArgBytes::of(&v.to_le_bytes()),
            Arg::Bool(v) => ArgBytes::of(&[v as u8]),
            Arg::Bytes(b) => b,
        })
    }
    /// The same value with another buffer type (`None` for buffers).
    pub fn map_scalar<C>(&self) -> Option<Arg<C>> {
        Some(match *self {
            Arg::Buffer(_) => return None,
            Arg::I32(v) => Arg::I32(v),
            Arg::U32(v) => Arg::U32(v),
            Arg::I64(v) => Arg::I64(v),
            Arg::U64(v) => Arg::U64(v),
            Arg::F32(v) => Arg::F32(v),
            Arg::F64(v) => Arg::F64(v),
            Arg::I8(v) => Arg::I8(v),
            Arg::U8(v) => Arg::U8(v),
            Arg::I16(v) => Arg::I16(v),
            Arg::U16(v) => Arg::U16(v),
            Arg::F16(v) => Arg::F16(v),
            Arg::Bool(v) => Arg::Bool(v),
            Arg::Bytes(b) => Arg::Bytes(b),
        })
    }
}

/// What a loaded kernel asks of the device, from its code object, and the occupancy that
/// allows.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProgramInfo {
    /// VGPRs the kernel uses (its metadata's count, else what its descriptor allocates).
    pub vgprs: u32,
    /// VGPRs its descriptor allocates per wave (a multiple of the allocation granule).
    pub allocated_vgprs: u32,
    /// SGPRs it uses, when its metadata says.
    pub sgprs: Option<u32>,
    /// Bytes of LDS per workgroup it declares.
    pub static_lds: u32,
    /// Most bytes of dynamic LDS (HIP's `extern __shared__`) a launch may add.
    pub max_dynamic_lds: u32,
    /// Bytes of private (scratch) memory per work-item.
    pub scratch_per_lane: u32,
    /// Most work-items per workgroup.
    pub max_workgroup_size: u32,
    /// Lanes per wave.
    pub wave_size: u32,
    /// Waves of this kernel one SIMD keeps at once, with no dynamic LDS.
    pub waves_per_simd: u32,
    /// What bounds `waves_per_simd`: `"wave slots"`, `"registers"` or `"LDS"`.
    pub occupancy_limit: &'static str,
}

/// Properties of an opened device, for listings and for choosing a compiler target.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeviceInfo {
    /// Name the device is opened by, e.g. `amd-emu:0`.
    pub name: String,
    /// Compiler target, e.g. `gfx1100`.
    pub arch: String,
    /// Device memory in bytes.
    pub memory: u64,
    /// Whether this is the emulated GPU.
    pub emulated: bool,
    /// Human-readable product name.
    pub description: String,
    /// The compute shape a kernel author tunes for; `None` where the backend does not report
    /// it.
    pub compute: Option<ComputeInfo>,
}

/// One kind of cache of a GPU: every instance of it alike.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CacheInfo {
    /// 1 for the caches closest to the SIMDs (KFD counts a gfx11 GPU's vector L0 and GL1
    /// both as level 1), 2 for L2, 3 for the Infinity Cache.
    pub level: u32,
    /// Whether it caches data (with `instruction`: both).
    pub data: bool,
    /// Whether it caches instructions (with `data`: both).
    pub instruction: bool,
    /// Bytes of one instance.
    pub bytes: u64,
    /// Compute units sharing one instance.
    pub shared_by_cus: u32,
    /// Instances on the GPU.
    pub instances: u32,
}

/// A GPU's compute shape and identity, as rocminfo shows them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ComputeInfo {
    /// Compute units (on RDNA3, two per workgroup processor).
    pub compute_units: u32,
    /// SIMDs in one compute unit; each runs its own waves.
    pub simds_per_cu: u32,
    /// Lanes per wave the runtime runs kernels with.
    pub wave_size: u32,
    /// Most waves resident on one compute unit at once (all its SIMDs together).
    pub max_waves_per_cu: u32,
    /// Most LDS one workgroup may use, in bytes.
    pub lds_per_workgroup: u32,
    /// Shader engines, each with its own workgroup dispatcher.
    pub shader_engines: u32,
    /// Highest shader clock, in MHz.
    pub max_clock_mhz: u32,
    /// Device memory not allocated yet, in bytes, when the driver says.
    pub free_memory: Option<u64>,
    /// Host memory the GPU can map (GTT), in bytes, and how much of it is not in use, when
    /// the driver says.
    pub gtt_memory: Option<u64>,
    /// The part of `gtt_memory` not in use, in bytes, when the driver says.
    pub gtt_free: Option<u64>,
    /// PCI location, `domain:bus:device.function`.
    pub pci_location: String,
    /// Minor number of the render node (`/dev/dri/renderD<minor>`).
    pub render_minor: u32,
    /// The kernel driver's interface version, e.g. `KFD 1.16`.
    pub driver_version: String,
    /// The device's caches, one entry per kind (level, data or instructions, size, CUs sharing
    /// it), smallest level first, as the kernel driver lists them; empty where it lists none.
    pub caches: Vec<CacheInfo>,
    /// Why the device has no copy engine of its own, when it has none (the kernel driver had
    /// no SDMA queue left to give): copies then run on the compute queue, with the same
    /// results and order but no overlap with kernels.
    pub copy_engine_missing: Option<String>,
}
