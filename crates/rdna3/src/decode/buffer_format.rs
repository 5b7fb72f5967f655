//! The unified data formats of gfx11 buffer instructions (MTBUF's FORMAT field and the V#'s
//! FORMAT field): numbering and names as LLVM prints them (`BUF_FMT_32_FLOAT`).

/// How the bits of one component are interpreted.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NumberFormat {
    /// Unsigned, normalised to [0, 1].
    Unorm,
    /// Signed, normalised to [-1, 1].
    Snorm,
    /// Unsigned integer converted to float.
    Uscaled,
    /// Signed integer converted to float.
    Sscaled,
    /// Unsigned integer.
    Uint,
    /// Signed integer.
    Sint,
    /// IEEE float of the component's width.
    Float,
}

impl NumberFormat {
    fn name(self) -> &'static str {
        match self {
            Self::Unorm => "UNORM",
            Self::Snorm => "SNORM",
            Self::Uscaled => "USCALED",
            Self::Sscaled => "SSCALED",
            Self::Uint => "UINT",
            Self::Sint => "SINT",
            Self::Float => "FLOAT",
        }
    }
}

/// A data format: component widths (as named, first component first) and their number format.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BufferFormat {
    /// Format number.
    pub code: u8,
    /// Bits of each component, in the order of the format's name.
    pub widths: &'static [u8],
    /// Interpretation of every component.
    pub number: NumberFormat,
}

use NumberFormat::*;

/// Formats 1..=63 in numeric order (0 is invalid, 64..=127 are unnamed).
const FORMATS: [(&[u8], NumberFormat); 63] = [
    (&[8], Unorm),
    (&[8], Snorm),
    (&[8], Uscaled),
    (&[8], Sscaled),
    (&[8], Uint),
    (&[8], Sint),
    (&[16], Unorm),
    (&[16], Snorm),
    (&[16], Uscaled),
    (&[16], Sscaled),
    (&[16], Uint),
    (&[16], Sint),
    (&[16], Float),
    (&[8, 8], Unorm),
    (&[8, 8], Snorm),
    (&[8, 8], Uscaled),
    (&[8, 8], Sscaled),
    (&[8, 8], Uint),
    (&[8, 8], Sint),
    (&[32], Uint),
    (&[32], Sint),
    (&[32], Float),
    (&[16, 16], Unorm),
    (&[16, 16], Snorm),
    (&[16, 16], Uscaled),
    (&[16, 16], Sscaled),
    (&[16, 16], Uint),
    (&[16, 16], Sint),
    (&[16, 16], Float),
    (&[10, 11, 11], Float),
    (&[11, 11, 10], Float),
    (&[10, 10, 10, 2], Unorm),
    (&[10, 10, 10, 2], Snorm),
    (&[10, 10, 10, 2], Uint),
    (&[10, 10, 10, 2], Sint),
    (&[2, 10, 10, 10], Unorm),
    (&[2, 10, 10, 10], Snorm),
    (&[2, 10, 10, 10], Uscaled),
    (&[2, 10, 10, 10], Sscaled),
    (&[2, 10, 10, 10], Uint),
    (&[2, 10, 10, 10], Sint),
    (&[8, 8, 8, 8], Unorm),
    (&[8, 8, 8, 8], Snorm),
    (&[8, 8, 8, 8], Uscaled),
    (&[8, 8, 8, 8], Sscaled),
    (&[8, 8, 8, 8], Uint),
    (&[8, 8, 8, 8], Sint),
    (&[32, 32], Uint),
    (&[32, 32], Sint),
    (&[32, 32], Float),
    (&[16, 16, 16, 16], Unorm),
    (&[16, 16, 16, 16], Snorm),
    (&[16, 16, 16, 16], Uscaled),
    (&[16, 16, 16, 16], Sscaled),
    (&[16, 16, 16, 16], Uint),
    (&[16, 16, 16, 16], Sint),
    (&[16, 16, 16, 16], Float),
    (&[32, 32, 32], Uint),
    (&[32, 32, 32], Sint),
    (&[32, 32, 32], Float),
    (&[32, 32, 32, 32], Uint),
    (&[32, 32, 32, 32], Sint),
    (&[32, 32, 32, 32], Float),
];

/// The format MTBUF assembly leaves unprinted (`BUF_FMT_8_UNORM`).
pub const DEFAULT_FORMAT: u8 = 1;

impl BufferFormat {
    /// The format with this number, if it is a defined one.
    pub fn from_code(code: u8) -> Option<BufferFormat> {
        let (widths, number) = *FORMATS.get(usize::from(code).checked_sub(1)?)?;
        Some(BufferFormat {
            code,
            widths,
            number,
        })
    }

    /// LLVM's name, e.g. `BUF_FMT_16_16_FLOAT`.
    pub fn name(&self) -> String {
        let widths: Vec<String> = self.widths.iter().map(u8::to_string).collect();
        format!("BUF_FMT_{}_{}", widths.join("_"), self.number.name())
    }

    /// The width shared by every component, when they are all 8, 16 or 32 bits (the formats
    /// whose components are whole bytes in memory order).
    pub fn uniform_width(&self) -> Option<u8> {
        let first = *self.widths.first()?;
        (matches!(first, 8 | 16 | 32) && self.widths.iter().all(|&w| w == first)).then_some(first)
    }

    /// Bytes of one element (all components).
    pub fn bytes(&self) -> u32 {
        self.widths.iter().map(|&w| u32::from(w)).sum::<u32>() / 8
    }
}
