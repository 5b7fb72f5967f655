//! What every hcq backend shares: [`Error`], kernel arguments ([`Arg`]), a graph's launch
//! dimensions ([`DimExpr`]), and the on-disk [`CompileCache`]. Backends (`hcq-amd`, `hcq-metal`) build on this; users see it re-exported
//! by the `hcq` crate.

#![deny(missing_docs)]

pub mod backend;
mod cache;
pub mod compile_options;
pub mod dims;
mod error;

pub use backend::{ArgInfo, ArgKind, Backend, BufferAt, LaunchDims, LaunchOptions};
pub use cache::{CompileCache, CompileKey, CompileOutput, FRESH_FILE_WINDOW};
pub use compile_options::CompileOptions;
pub use dims::{DimExpr, DimExprs, Var, VarSpec};
pub use error::{Error, FaultKind, FaultReport, Result};

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

/// The by-value argument kinds by name, as [`Arg::type_name`] gives them and
/// [`Arg::parse_value`] takes them: the one list that command lines and bindings offer.
pub const VALUE_KINDS: [&str; 13] = [
    "i8", "u8", "i16", "u16", "i32", "u32", "i64", "u64", "f16", "f32", "f64", "bool", "bytes",
];

/// `text` as a `T`: decimal, or hexadecimal after `0x` (for integers, and for `f16` its bits).
fn parse_number<T: std::str::FromStr>(text: &str) -> Option<T> {
    match text.strip_prefix("0x") {
        Some(hex) => u64::from_str_radix(hex, 16).ok()?.to_string().parse().ok(),
        None => text.parse().ok(),
    }
}

/// The IEEE half nearest `x` (ties to even; too large is infinity), as its bits.
pub fn f16_bits(x: f64) -> u16 {
    let bits = x.to_bits();
    let sign = ((bits >> 48) & 0x8000) as u16;
    let exponent = ((bits >> 52) & 0x7ff) as i64;
    let mantissa = bits & ((1 << 52) - 1);
    if exponent == 0x7ff {
        let nan = if mantissa != 0 { 0x200 } else { 0 };
        return sign | 0x7c00 | nan;
    }
    // Rounds `units` plus a remainder out of `1 << shift`, ties to even.
    let round = |units: u64, remainder: u64, shift: u32| {
        let halfway = 1u64 << (shift - 1);
        let up = remainder > halfway || (remainder == halfway && units & 1 == 1);
        units + up as u64
    };
    let half_exponent = exponent - 1023 + 15;
    if half_exponent >= 0x1f {
        return sign | 0x7c00;
    }
    if half_exponent <= 0 {
        // A subnormal half counts units of 2^-24; below half of one it rounds to zero.
        if half_exponent < -11 {
            return sign;
        }
        let significand = mantissa | (1 << 52);
        let shift = (43 - half_exponent) as u32;
        let units = round(
            significand >> shift,
            significand & ((1 << shift) - 1),
            shift,
        );
        return sign | units as u16;
    }
    // Rounding up may carry into the exponent, up to infinity: the encoding's order does it.
    let units = ((half_exponent as u64) << 10) | (mantissa >> 42);
    sign | round(units, mantissa & ((1 << 42) - 1), 42) as u16
}

/// `00ff10..`: bytes in memory order, two hex digits each.
fn parse_hex_bytes(text: &str) -> std::result::Result<ArgBytes, String> {
    if text.is_empty() || !text.len().is_multiple_of(2) {
        return Err("expected an even number of hex digits".into());
    }
    let bytes = (0..text.len())
        .step_by(2)
        .map(|i| {
            text.get(i..i + 2)
                .and_then(|d| u8::from_str_radix(d, 16).ok())
        })
        .collect::<Option<Vec<u8>>>()
        .ok_or_else(|| format!("{text:?} is not hex"))?;
    ArgBytes::new(&bytes).map_err(|e| e.to_string())
}

impl<B> Arg<B> {
    /// A by-value argument of `kind` (one of [`VALUE_KINDS`]) written as `text`: integers in
    /// decimal or `0x` hex, floats in decimal (an `f16` also by its bits: `0x3c00` is 1.0), a bool as
    /// `true`, `false`, `1` or `0`, bytes as hex digits in memory order. The error says what
    /// is wrong, without the kind and text (the caller knows how the user wrote them).
    pub fn parse_value(kind: &str, text: &str) -> std::result::Result<Arg<B>, String> {
        let number = || format!("{text:?} is not a valid {kind}");
        Ok(match kind {
            "i8" => Arg::I8(parse_number(text).ok_or_else(number)?),
            "u8" => Arg::U8(parse_number(text).ok_or_else(number)?),
            "i16" => Arg::I16(parse_number(text).ok_or_else(number)?),
            "u16" => Arg::U16(parse_number(text).ok_or_else(number)?),
            "i32" => Arg::I32(parse_number(text).ok_or_else(number)?),
            "u32" => Arg::U32(parse_number(text).ok_or_else(number)?),
            "i64" => Arg::I64(parse_number(text).ok_or_else(number)?),
            "u64" => Arg::U64(parse_number(text).ok_or_else(number)?),
            "f16" => Arg::F16(match text.strip_prefix("0x") {
                Some(hex) => u16::from_str_radix(hex, 16).map_err(|_| number())?,
                None => f16_bits(text.parse().map_err(|_| number())?),
            }),
            "f32" => Arg::F32(text.parse().map_err(|_| number())?),
            "f64" => Arg::F64(text.parse().map_err(|_| number())?),
            "bool" => Arg::Bool(match text {
                "true" | "1" => true,
                "false" | "0" => false,
                _ => return Err("a bool is true, false, 1 or 0".into()),
            }),
            "bytes" => Arg::Bytes(parse_hex_bytes(text)?),
            _ => {
                return Err(format!(
                    "unknown kind {kind:?}: one of {}",
                    VALUE_KINDS.join(" ")
                ))
            }
        })
    }

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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_value_kind_parses_to_an_argument_of_that_name() {
        let text = |kind: &str| match kind {
            "f16" => "0x3c00",
            "bool" => "true",
            "bytes" => "00ff10",
            "f32" | "f64" => "1.5",
            _ => "0x7f",
        };
        for kind in VALUE_KINDS {
            let arg = Arg::<()>::parse_value(kind, text(kind)).unwrap();
            assert_eq!(arg.type_name(), kind);
        }
        assert_eq!(Arg::<()>::parse_value("i8", "-128"), Ok(Arg::I8(-128)));
        assert_eq!(
            Arg::<()>::parse_value("u16", "0xffff"),
            Ok(Arg::U16(0xffff))
        );
        assert_eq!(
            Arg::<()>::parse_value("u64", "0xffffffffffffffff"),
            Ok(Arg::U64(u64::MAX))
        );
        assert_eq!(
            Arg::<()>::parse_value("f16", "0x3c00"),
            Ok(Arg::F16(0x3c00))
        );
        assert_eq!(Arg::<()>::parse_value("f16", "-2.5"), Ok(Arg::F16(0xc100)));
        assert_eq!(
            Arg::<()>::parse_value("bytes", "00ff"),
            Ok(Arg::Bytes(ArgBytes::new(&[0, 255]).unwrap()))
        );
        for (kind, bad) in [
            ("i8", "128"),
            ("u8", "256"),
            ("u32", "-1"),
            ("i32", "99999999999"),
            ("f32", "x"),
            ("f16", "0xfffff"),
            ("f16", "one"),
            ("bool", "yes"),
            ("bytes", ""),
            ("bytes", "abc"),
            ("bytes", "zz"),
            ("i12", "1"),
        ] {
            assert!(Arg::<()>::parse_value(kind, bad).is_err(), "{kind}:{bad}");
        }
    }

    #[test]
    fn halves_round_to_nearest_even() {
        let cases: [(f64, u16); 14] = [
            (1.0, 0x3c00),
            (1.5, 0x3e00),
            (-0.0, 0x8000),
            (65504.0, 0x7bff),
            (65519.99, 0x7bff),
            (65520.0, 0x7c00), // halfway to the next step: even is infinity
            (1e10, 0x7c00),
            (2f64.powi(-24), 0x0001),
            (2f64.powi(-25), 0x0000), // halfway between 0 and the smallest: even is 0
            (2f64.powi(-25) * 1.5, 0x0001),
            (2f64.powi(-14), 0x0400),
            (1.0 + 2f64.powi(-11), 0x3c00), // halfway, to even
            (1.0 + 3.0 * 2f64.powi(-11), 0x3c02),
            (f64::INFINITY, 0x7c00),
        ];
        for (x, bits) in cases {
            assert_eq!(f16_bits(x), bits, "{x}");
        }
        assert_eq!(f16_bits(f64::NAN) & 0x7e00, 0x7e00);
        assert_eq!(f16_bits(1e-30), 0);
        // Every finite half converts back to itself.
        for bits in (0..0x7c00u16).chain(0x8000..0xfc00) {
            let magnitude = bits & 0x7fff;
            let (e, m) = ((magnitude >> 10) as i32, (magnitude & 0x3ff) as f64);
            let value = if e == 0 {
                m * 2f64.powi(-24)
            } else {
                (1.0 + m / 1024.0) * 2f64.powi(e - 15)
            };
            let value = if bits & 0x8000 != 0 { -value } else { value };
            assert_eq!(f16_bits(value), bits, "{bits:#x}");
        }
    }
}
