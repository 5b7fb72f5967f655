//! MUBUF and MTBUF: per-lane accesses through a buffer resource descriptor (V#), with the
//! descriptor's range checking (out-of-range loads read 0, out-of-range stores are dropped).

use super::float::{f16_to_f32, f32_to_f16};
use super::memory_ops::atomic_update;
use super::{illegal, unimplemented, ExecContext, Flow, Wave, WAVE_SIZE};
use crate::decode::{AtomicOp, Buffer, BufferAccess, BufferFormat, MemAccess, NumberFormat, D16};
use crate::fault::FaultKind;
use crate::memory::{atomic_rmw_u32, atomic_rmw_u64, read_bytes, write_bytes};
use crate::operand::Operand;

/// How a V# decides that an access is out of range (its OOB_SELECT field).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OutOfRange {
    /// 0: `index >= num_records` or the access leaves its record (`offset + size > stride`).
    StructuredWithOffset,
    /// 1: `index >= num_records`.
    Structured,
    /// 2: only a buffer of zero records is out of range.
    Disabled,
    /// 3: raw bytes: `offset + size > num_records`.
    Raw,
}

/// The fields of a gfx11 buffer resource descriptor that addressing and range checking use.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BufferResource {
    /// 48-bit base byte address.
    pub base: u64,
    /// Bytes per record (14 bits).
    pub stride: u32,
    /// SWIZZLE_ENABLE (2 bits); swizzled addressing is not modelled.
    pub swizzle: u8,
    /// Records (structured) or bytes (raw).
    pub num_records: u32,
    /// Data format of MUBUF format instructions.
    pub format: u8,
    /// The lane id is added to the index.
    pub add_tid: bool,
    /// Range-checking rule.
    pub out_of_range: OutOfRange,
}

impl BufferResource {
    /// Unpacks the four descriptor dwords.
    pub fn from_words(words: [u32; 4]) -> Self {
        let bits = |word: u32, hi: u32, lo: u32| (word >> lo) & ((1u32 << (hi - lo + 1)) - 1);
        Self {
            base: u64::from(words[0]) | (u64::from(bits(words[1], 15, 0)) << 32),
            stride: bits(words[1], 29, 16),
            swizzle: bits(words[1], 31, 30) as u8,
            num_records: words[2],
            format: bits(words[3], 18, 12) as u8,
            add_tid: bits(words[3], 23, 23) != 0,
            out_of_range: match bits(words[3], 29, 28) {
                0 => OutOfRange::StructuredWithOffset,
                1 => OutOfRange::Structured,
                2 => OutOfRange::Disabled,
                _ => OutOfRange::Raw,
            },
        }
    }

    /// Whether `size` bytes at byte `offset` of record `index` (plus the scalar offset) lie
    /// inside the buffer.
    fn in_range(&self, lane: &LaneAddress, offset: u64, size: u64) -> bool {
        let records = u64::from(self.num_records);
        match self.out_of_range {
            OutOfRange::StructuredWithOffset => {
                lane.index < records && offset + size <= u64::from(self.stride)
            }
            OutOfRange::Structured => lane.index < records,
            OutOfRange::Disabled => records != 0,
            OutOfRange::Raw => lane.record_start + lane.soffset + offset + size <= records,
        }
    }
}

/// One lane's address components.
struct LaneAddress {
    /// Record index (VGPR index plus lane id when enabled).
    index: u64,
    /// `stride * index`.
    record_start: u64,
    /// The scalar offset.
    soffset: u64,
    /// VGPR offset plus the instruction offset: the byte offset inside the record.
    offset: u64,
}

impl LaneAddress {
    /// Byte address of `extra` bytes past this lane's offset.
    fn address(&self, resource: &BufferResource, extra: u64) -> u64 {
        resource
            .base
            .wrapping_add(self.soffset)
            .wrapping_add(self.record_start)
            .wrapping_add(self.offset)
            .wrapping_add(extra)
    }
}

/// The 32-bit register value of one format component read from memory.
fn component_from_memory(raw: u32, width: u8, number: NumberFormat) -> u32 {
    let max = |bits: u8| ((1u64 << bits) - 1) as f32;
    let signed = || {
        let shift = 32 - u32::from(width);
        ((raw << shift) as i32) >> shift
    };
    match number {
        NumberFormat::Uint => raw,
        NumberFormat::Sint => signed() as u32,
        NumberFormat::Uscaled => (raw as f32).to_bits(),
        NumberFormat::Sscaled => (signed() as f32).to_bits(),
        NumberFormat::Unorm => (raw as f32 / max(width)).to_bits(),
        NumberFormat::Snorm => (signed() as f32 / max(width - 1)).max(-1.0).to_bits(),
        NumberFormat::Float if width == 16 => f16_to_f32(raw as u16).to_bits(),
        NumberFormat::Float => raw,
    }
}

/// The memory bits of one format component from its 32-bit register value.
fn component_to_memory(value: u32, width: u8, number: NumberFormat) -> u32 {
    let float = f32::from_bits(value);
    let max = |bits: u8| ((1u64 << bits) - 1) as f32;
    let mask = if width == 32 {
        u32::MAX
    } else {
        (1u32 << width) - 1
    };
    let bits = match number {
        NumberFormat::Uint | NumberFormat::Sint => value,
        NumberFormat::Uscaled => float.clamp(0.0, max(width)).round_ties_even() as u32,
        NumberFormat::Sscaled => {
            let limit = max(width - 1);
            (float.clamp(-limit - 1.0, limit).round_ties_even() as i32) as u32
        }
        NumberFormat::Unorm => (float.clamp(0.0, 1.0) * max(width)).round_ties_even() as u32,
        NumberFormat::Snorm => {
            let limit = max(width - 1);
            ((float.clamp(-1.0, 1.0) * limit).round_ties_even() as i32) as u32
        }
        NumberFormat::Float if width == 16 => u32::from(f32_to_f16(float)),
        NumberFormat::Float => value,
    };
    bits & mask
}

/// Whether a component holds a float in registers (for the 16-bit packing of D16 forms and
/// the default of a missing W).
fn is_float_number(number: NumberFormat) -> bool {
    !matches!(number, NumberFormat::Uint | NumberFormat::Sint)
}

impl Wave {
    pub(super) fn buffer(
        &mut self,
        ctx: &mut ExecContext<'_>,
        i: &Buffer,
    ) -> Result<Flow, FaultKind> {
        let mnemonic = i.op.mnemonic();
        let access = i.access.ok_or_else(|| unimplemented(mnemonic))?;
        if access == BufferAccess::Invalidate {
            // Caches are not modelled.
            return Ok(Flow::Next);
        }
        let resource = self.buffer_resource(i)?;
        if resource.swizzle != 0 {
            return Err(FaultKind::Unsupported(format!(
                "swizzled buffer addressing (V# SWIZZLE_ENABLE = {})",
                resource.swizzle
            )));
        }
        let lanes = self.buffer_lanes(i, &resource)?;
        let exec = self.exec();
        match access {
            BufferAccess::Invalidate => {}
            BufferAccess::Raw(MemAccess::Load { bytes, signed, d16 }) => {
                let dwords = usize::from(bytes).div_ceil(4);
                let first = self.vgpr_range(i.vdata, dwords + usize::from(i.tfe))?.start;
                for (lane, address) in active(&lanes, exec) {
                    let mut buffer = [0u8; 16];
                    // Wide loads are range-checked per dword.
                    for (k, piece) in buffer[..usize::from(bytes)].chunks_mut(4).enumerate() {
                        let offset = address.offset + 4 * k as u64;
                        if resource.in_range(address, offset, piece.len() as u64) {
                            let at = address.address(&resource, 4 * k as u64);
                            read_bytes(ctx.mem, at, piece)?;
                        }
                    }
                    self.write_loaded(first, lane, &buffer, bytes, signed, d16);
                    self.write_fetch_status(i, first + dwords, lane);
                }
            }
            BufferAccess::Raw(MemAccess::Store { bytes, high_half }) => {
                let dwords = usize::from(bytes).div_ceil(4);
                let first = self.vgpr_range(i.vdata, dwords)?.start;
                for (lane, address) in active(&lanes, exec) {
                    let mut buffer = [0u8; 16];
                    for k in 0..dwords {
                        buffer[k * 4..k * 4 + 4]
                            .copy_from_slice(&self.vgpr[first + k][lane].to_le_bytes());
                    }
                    if high_half {
                        buffer.copy_within(2..4, 0);
                    }
                    for (k, piece) in buffer[..usize::from(bytes)].chunks(4).enumerate() {
                        let offset = address.offset + 4 * k as u64;
                        if resource.in_range(address, offset, piece.len() as u64) {
                            let at = address.address(&resource, 4 * k as u64);
                            write_bytes(ctx.mem, at, piece)?;
                        }
                    }
                }
            }
            BufferAccess::Raw(MemAccess::Atomic { op, wide }) => {
                if i.tfe {
                    return Err(illegal(format!("{mnemonic} with tfe")));
                }
                let value_dwords = if wide { 2 } else { 1 };
                let compares = matches!(op, AtomicOp::CmpSwap | AtomicOp::CmpSwapF);
                let data_dwords = value_dwords * if compares { 2 } else { 1 };
                let first = self.vgpr_range(i.vdata, data_dwords)?.start;
                let size = 4 * value_dwords as u64;
                for (lane, address) in active(&lanes, exec) {
                    let read = |w: &Wave, k: usize| {
                        let low = u64::from(w.vgpr[first + k][lane]);
                        if wide {
                            low | (u64::from(w.vgpr[first + k + 1][lane]) << 32)
                        } else {
                            low
                        }
                    };
                    let value = read(self, 0);
                    let compare = if compares {
                        read(self, value_dwords)
                    } else {
                        0
                    };
                    // An out-of-range atomic changes nothing and returns 0.
                    let old = if resource.in_range(address, address.offset, size) {
                        let at = address.address(&resource, 0);
                        let update = |old| atomic_update(op, wide, old, value, compare);
                        if wide {
                            atomic_rmw_u64(ctx.mem, at, update)?
                        } else {
                            u64::from(atomic_rmw_u32(ctx.mem, at, |old| {
                                update(u64::from(old)) as u32
                            })?)
                        }
                    } else {
                        0
                    };
                    if i.glc {
                        self.vgpr[first][lane] = old as u32;
                        if wide {
                            self.vgpr[first + 1][lane] = (old >> 32) as u32;
                        }
                    }
                }
            }
            BufferAccess::LoadFormat { components, d16 } => {
                let format = self.data_format(i, &resource)?;
                let (width, number) = (format.1, format.0.number);
                let available = format.0.widths.len();
                let component_bytes = u64::from(width / 8);
                let dwords = if d16.is_some() {
                    usize::from(components).div_ceil(2)
                } else {
                    usize::from(components)
                };
                let first = self.vgpr_range(i.vdata, dwords + usize::from(i.tfe))?.start;
                let fetched = usize::from(components).min(available);
                for (lane, address) in active(&lanes, exec) {
                    // Format accesses are range-checked as a whole.
                    let size = fetched as u64 * component_bytes;
                    let in_range = resource.in_range(address, address.offset, size);
                    let mut values = [0u32; 4];
                    for (k, value) in values.iter_mut().enumerate() {
                        if k < fetched {
                            if in_range {
                                let mut bytes = [0u8; 4];
                                let at = address.address(&resource, k as u64 * component_bytes);
                                read_bytes(ctx.mem, at, &mut bytes[..component_bytes as usize])?;
                                let raw = u32::from_le_bytes(bytes);
                                *value = component_from_memory(raw, width, number);
                            }
                        } else if k == 3 {
                            // A format without W reads it as 1.
                            *value = if is_float_number(number) {
                                1.0f32.to_bits()
                            } else {
                                1
                            };
                        }
                    }
                    self.write_format_components(first, lane, &values, components, d16, number);
                    self.write_fetch_status(i, first + dwords, lane);
                }
            }
            BufferAccess::StoreFormat { components, d16 } => {
                let format = self.data_format(i, &resource)?;
                let (width, number) = (format.1, format.0.number);
                let component_bytes = u64::from(width / 8);
                let dwords = if d16.is_some() {
                    usize::from(components).div_ceil(2)
                } else {
                    usize::from(components)
                };
                let first = self.vgpr_range(i.vdata, dwords)?.start;
                let stored = usize::from(components).min(format.0.widths.len());
                for (lane, address) in active(&lanes, exec) {
                    let size = stored as u64 * component_bytes;
                    if !resource.in_range(address, address.offset, size) {
                        continue;
                    }
                    for k in 0..stored {
                        let value = self.format_component(first, lane, k, d16, number);
                        let bits = component_to_memory(value, width, number);
                        let at = address.address(&resource, k as u64 * component_bytes);
                        write_bytes(ctx.mem, at, &bits.to_le_bytes()[..component_bytes as usize])?;
                    }
                }
            }
        }
        Ok(Flow::Next)
    }

    /// Reads the descriptor from the four SGPRs at SRSRC (`null` reads as all zeros).
    fn buffer_resource(&self, i: &Buffer) -> Result<BufferResource, FaultKind> {
        if i.srsrc == Operand::Null {
            return Ok(BufferResource::from_words([0; 4]));
        }
        let range = self.scalar_range(i.srsrc, 4)?;
        let mut words = [0u32; 4];
        words.copy_from_slice(&self.sgpr[range]);
        Ok(BufferResource::from_words(words))
    }

    /// Every lane's address components (inactive lanes' are computed too, and ignored).
    fn buffer_lanes(
        &self,
        i: &Buffer,
        resource: &BufferResource,
    ) -> Result<[LaneAddress; WAVE_SIZE], FaultKind> {
        let vaddr = match i.vaddr_dwords() {
            0 => None,
            n => Some(self.vgpr_range(i.vaddr, n)?.start),
        };
        let soffset = u64::from(self.read_scalar(i.soffset)?);
        Ok(std::array::from_fn(|lane| {
            let register =
                |k: usize| vaddr.map_or(0, |first| u64::from(self.vgpr[first + k][lane]));
            let mut index = if i.idxen { register(0) } else { 0 };
            if resource.add_tid {
                index += lane as u64;
            }
            let voffset = if i.offen {
                register(usize::from(i.idxen))
            } else {
                0
            };
            LaneAddress {
                index,
                record_start: index * u64::from(resource.stride),
                soffset,
                offset: voffset + u64::from(i.offset),
            }
        }))
    }

    /// The data format of a format instruction (MTBUF: the instruction's, MUBUF: the V#'s)
    /// with its component width, when the interpreter converts it.
    fn data_format(
        &self,
        i: &Buffer,
        resource: &BufferResource,
    ) -> Result<(BufferFormat, u8), FaultKind> {
        let code = i.format.unwrap_or(resource.format);
        let format = BufferFormat::from_code(code)
            .ok_or_else(|| illegal(format!("buffer data format {code} is not defined")))?;
        match format.uniform_width() {
            Some(width) if !(format.number == NumberFormat::Float && width == 8) => {
                Ok((format, width))
            }
            _ => Err(FaultKind::Unsupported(format!(
                "buffer data format {}",
                format.name()
            ))),
        }
    }

    /// Writes the components of a format load into one lane's VGPRs: one per register, or
    /// two 16-bit values per register for D16 forms.
    fn write_format_components(
        &mut self,
        first: usize,
        lane: usize,
        values: &[u32; 4],
        components: u8,
        d16: Option<D16>,
        number: NumberFormat,
    ) {
        let Some(placement) = d16 else {
            for (k, value) in values[..usize::from(components)].iter().enumerate() {
                self.vgpr[first + k][lane] = *value;
            }
            return;
        };
        let half = |value: u32| {
            if is_float_number(number) {
                u32::from(f32_to_f16(f32::from_bits(value)))
            } else {
                value & 0xffff
            }
        };
        match placement {
            D16::High => {
                let old = self.vgpr[first][lane];
                self.vgpr[first][lane] = (old & 0xffff) | (half(values[0]) << 16);
            }
            D16::Low | D16::Full => {
                for (k, value) in values[..usize::from(components)].iter().enumerate() {
                    let register = &mut self.vgpr[first + k / 2][lane];
                    let shift = 16 * (k % 2);
                    *register = (*register & !(0xffff << shift)) | (half(*value) << shift);
                }
            }
        }
    }

    /// Component `k` of a format store as a 32-bit register value (D16 forms widen their
    /// 16-bit halves).
    fn format_component(
        &self,
        first: usize,
        lane: usize,
        k: usize,
        d16: Option<D16>,
        number: NumberFormat,
    ) -> u32 {
        let half = match d16 {
            None => return self.vgpr[first + k][lane],
            Some(D16::High) => self.vgpr[first][lane] >> 16,
            Some(_) => (self.vgpr[first + k / 2][lane] >> (16 * (k % 2))) & 0xffff,
        };
        match number {
            NumberFormat::Uint => half,
            NumberFormat::Sint => half as u16 as i16 as i32 as u32,
            _ => f16_to_f32(half as u16).to_bits(),
        }
    }

    /// TFE: the VGPR after the data receives the fetch status, 0 as no fetch can fail here.
    fn write_fetch_status(&mut self, i: &Buffer, register: usize, lane: usize) {
        if i.tfe {
            self.vgpr[register][lane] = 0;
        }
    }
}

/// The active lanes with their addresses.
fn active(
    lanes: &[LaneAddress; WAVE_SIZE],
    exec: u32,
) -> impl Iterator<Item = (usize, &LaneAddress)> {
    lanes
        .iter()
        .enumerate()
        .filter(move |(lane, _)| exec >> lane & 1 != 0)
}
