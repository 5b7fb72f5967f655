//! What every hcq backend shares: [`Error`], kernel arguments ([`Arg`]), and the on-disk
//! [`CompileCache`]. Backends (`hcq-amd`, later Metal) build on this; users see it re-exported
//! by the `hcq` crate.

mod cache;
mod error;

pub use cache::{CompileCache, CompileKey};
pub use error::{Error, Result};

/// One kernel argument, in kernel-signature order.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Arg<B> {
    /// A device buffer, passed as its device address.
    Buffer(B),
    I32(i32),
    U32(u32),
    I64(i64),
    U64(u64),
    F32(f32),
    F64(f64),
}

impl<B> Arg<B> {
    /// Bytes the argument occupies in the kernel-argument segment.
    pub fn size(&self) -> usize {
        match self {
            Arg::I32(_) | Arg::U32(_) | Arg::F32(_) => 4,
            Arg::Buffer(_) | Arg::I64(_) | Arg::U64(_) | Arg::F64(_) => 8,
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
        }
    }
    /// The scalar's little-endian bytes (`None` for buffers).
    pub fn scalar_bytes(&self) -> Option<[u8; 8]> {
        let mut b = [0u8; 8];
        match *self {
            Arg::Buffer(_) => return None,
            Arg::I32(v) => b[..4].copy_from_slice(&v.to_le_bytes()),
            Arg::U32(v) => b[..4].copy_from_slice(&v.to_le_bytes()),
            Arg::F32(v) => b[..4].copy_from_slice(&v.to_le_bytes()),
            Arg::I64(v) => b = v.to_le_bytes(),
            Arg::U64(v) => b = v.to_le_bytes(),
            Arg::F64(v) => b = v.to_le_bytes(),
        }
        Some(b)
    }
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
}
