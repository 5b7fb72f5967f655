//! Vector ALU execution over whole waves. Every VALU encoding arrives here as a canonical
//! [`ValuInst`]; sources are fetched once per instruction as 32-lane arrays, the operation
//! loops over lanes, and results are written under EXEC.
//!
//! This file holds the entry points, the lane plumbing every operation shares, and the one
//! dispatch path, [`Wave::valu_compute`]: compares go to `compare.rs`; any other opcode is
//! offered to the operation groups in a fixed order, each a plain `match` over its own
//! opcodes that answers `None` for the rest. A group is one kind of arithmetic with its own
//! helpers, so each has a file: `moves.rs`, `int.rs`, `float_math.rs`, `division.rs`,
//! `convert.rs`, `packed.rs` (also VOP3P and the dot products) and `wmma.rs`. Operands are
//! read in `sources.rs` and results written in `results.rs`.

mod compare;
mod convert;
mod division;
mod float_math;
mod int;
mod moves;
mod packed;
mod results;
mod sources;
mod wmma;

pub(crate) use float_math::f32_unit;
pub(super) use int::bfe_u32;

use super::denorm::Denormals;
use super::float::{f16_to_f32, f32_to_f16, f64_to_f16};
use super::{unimplemented, Flow, Wave, WAVE_SIZE};
use crate::decode::{ValuInst, Vopd};
use crate::fault::FaultKind;
use crate::isa::{ValuOpcode, Vop3Op};
use crate::operand::Operand;
use compare::compare_lanes;

type Lanes = [u64; WAVE_SIZE];

/// Result of a VALU operation before it is written back (short-lived, on the stack).
#[allow(clippy::large_enum_variant)]
enum Output {
    /// Per-lane values for the vector destination, optional per-lane carry for `sdst`.
    Vector { values: Lanes, carry: Option<u32> },
    /// A lane mask (compares) for the scalar destination or EXEC.
    Mask(u32),
    /// A scalar value (`v_readfirstlane_b32`, `v_readlane_b32`).
    Scalar(u32),
    /// One lane of the vector destination (`v_writelane_b32`).
    Lane { lane: usize, value: u32 },
}

/// The sources of one VALU operation, fetched (and flushed) once and read by whichever
/// group computes it.
struct Sources {
    /// Source 0.
    a: Lanes,
    /// Source 1.
    b: Lanes,
    /// Source 2.
    c: Lanes,
    /// The lanes that may be written: EXEC less the lanes DPP disables.
    exec: u32,
    /// What the operation does with denormals under the current MODE.
    denormals: Denormals,
}

/// What an operation group answers: its result, or `None` when the opcode is not its own.
type Group<T> = Result<Option<T>, FaultKind>;

/// A group's per-lane results for the vector destination.
#[inline]
fn vector(values: Lanes) -> Group<Lanes> {
    Ok(Some(values))
}

#[inline]
fn f(x: u64) -> f32 {
    f32::from_bits(x as u32)
}
#[inline]
fn bf(x: f32) -> u64 {
    u64::from(x.to_bits())
}
#[inline]
fn d(x: u64) -> f64 {
    f64::from_bits(x)
}
#[inline]
fn bd(x: f64) -> u64 {
    x.to_bits()
}
#[inline]
fn h(x: u64) -> f32 {
    f16_to_f32(x as u16)
}
#[inline]
fn bh(x: f32) -> u64 {
    u64::from(f32_to_f16(x))
}
#[inline]
fn lo(x: u64) -> u32 {
    x as u32
}

/// An f32 result rounded to f16 bits (the f32 is exact or correctly rounded from f64).
fn hq(x: f32) -> u64 {
    u64::from(f64_to_f16(f64::from(x)))
}

/// An f64 result rounded once to f16 bits.
fn hd(x: f64) -> u64 {
    u64::from(f64_to_f16(x))
}

fn map1(exec: u32, a: &Lanes, op: impl Fn(u64) -> u64) -> Lanes {
    let mut out = [0u64; WAVE_SIZE];
    for lane in 0..WAVE_SIZE {
        if exec >> lane & 1 != 0 {
            out[lane] = op(a[lane]);
        }
    }
    out
}

fn map2(exec: u32, a: &Lanes, b: &Lanes, op: impl Fn(u64, u64) -> u64) -> Lanes {
    let mut out = [0u64; WAVE_SIZE];
    for lane in 0..WAVE_SIZE {
        if exec >> lane & 1 != 0 {
            out[lane] = op(a[lane], b[lane]);
        }
    }
    out
}

fn map3(exec: u32, a: &Lanes, b: &Lanes, c: &Lanes, op: impl Fn(u64, u64, u64) -> u64) -> Lanes {
    let mut out = [0u64; WAVE_SIZE];
    for lane in 0..WAVE_SIZE {
        if exec >> lane & 1 != 0 {
            out[lane] = op(a[lane], b[lane], c[lane]);
        }
    }
    out
}

/// Whether `v` may read VGPR `r`: one of its sources, or its destination (an accumulating
/// operation such as `v_fmac_f32` reads it).
fn reads_vgpr(v: &ValuInst, r: u8) -> bool {
    v.dst == Operand::Vgpr(r)
        || v.src
            .iter()
            .zip(v.src_bits)
            .any(|(&src, bits)| bits != 0 && touches_vgpr(src, bits, r))
}

/// Whether a source of `bits` (not 0) starting at `src` covers VGPR `r`.
fn touches_vgpr(src: Operand, bits: u8, r: u8) -> bool {
    match src {
        Operand::Vgpr(first) => {
            let count = u16::from(bits).div_ceil(32);
            (u16::from(first)..u16::from(first) + count).contains(&u16::from(r))
        }
        _ => false,
    }
}

impl Wave {
    /// Entry point of VOP1, VOP2 and VOPC instructions with a VOP3 form (`v` is `None` when
    /// the decoder did not lower one); faults name the instruction's own mnemonic.
    pub(in crate::exec) fn valu_optional(
        &mut self,
        v: Option<&ValuInst>,
        mnemonic: &str,
    ) -> Result<Flow, FaultKind> {
        let Some(v) = v else {
            return Err(unimplemented(mnemonic));
        };
        self.valu(v).map_err(|fault| match fault {
            FaultKind::Unimplemented { .. } => unimplemented(mnemonic),
            other => other,
        })
    }

    /// Entry point of every lowered VALU operation: a fast path (`fast.rs`), an operation
    /// outside the per-lane model (`moves.rs`), or compute and write back.
    pub(in crate::exec) fn valu(&mut self, v: &ValuInst) -> Result<Flow, FaultKind> {
        if let Some(flow) = self.valu_fast(v) {
            return Ok(flow);
        }
        if let ValuOpcode::Vop3(op) = v.op {
            if matches!(
                op,
                Vop3Op::V_MOVRELS_B32_E64
                    | Vop3Op::V_MOVRELD_B32_E64
                    | Vop3Op::V_MOVRELSD_B32_E64
                    | Vop3Op::V_MOVRELSD_2_B32_E64
                    | Vop3Op::V_MQSAD_U32_U8
                    | Vop3Op::V_PIPEFLUSH_E64
            ) {
                return self.valu_outside_lane_model(v, op);
            }
        }
        let (output, lane_mask) = self.valu_compute(v)?;
        self.valu_commit(v, output, lane_mask)?;
        Ok(Flow::Next)
    }

    /// Entry point of VOPD: two operations issued together.
    pub(in crate::exec) fn vopd(&mut self, i: &Vopd) -> Result<Flow, FaultKind> {
        if i.x.is_none() || i.y.is_none() {
            return self.vopd_with_dot(i);
        }
        let (Some(x), Some(y)) = (&i.x, &i.y) else {
            let missing = if i.x.is_none() {
                i.opx.mnemonic()
            } else {
                i.opy.mnemonic()
            };
            return Err(unimplemented(missing));
        };
        // Both halves read their sources before either writes. When Y reads nothing X
        // writes, running X to the end first is the same, and each half can take its fast
        // path (a dual FMA is most of a matrix product's instructions).
        if let Operand::Vgpr(x_dst) = x.dst {
            if !reads_vgpr(y, x_dst) {
                self.valu(x)?;
                return self.valu(y);
            }
        }
        let (out_x, mask_x) = self.valu_compute(x)?;
        let (out_y, mask_y) = self.valu_compute(y)?;
        self.valu_commit(x, out_x, mask_x)?;
        self.valu_commit(y, out_y, mask_y)?;
        Ok(Flow::Next)
    }

    /// Computes a VALU operation; returns the output and the lanes that may be written.
    fn valu_compute(&self, v: &ValuInst) -> Result<(Output, u32), FaultKind> {
        let denormals = self.denormals_of(v);
        let (a, enabled) = self.fetch_flushed(v, 0, denormals)?;
        let exec = self.exec() & enabled;
        if let Some(compare) = v.compare {
            let (b, _) = self.fetch_flushed(v, 1, denormals)?;
            return Ok((
                Output::Mask(compare_lanes(exec, compare.condition, compare.ty, &a, &b)),
                exec,
            ));
        }
        let (b, _) = self.fetch_flushed(v, 1, denormals)?;
        let (c, _) = self.fetch_flushed(v, 2, denormals)?;
        let sources = Sources {
            a,
            b,
            c,
            exec,
            denormals,
        };
        match v.op {
            ValuOpcode::Vop3sd(op) => {
                let (values, carry) = if let Some(result) = self.int_carry_op(v, op, &sources)? {
                    result
                } else if let Some(result) = self.div_scale_op(op, &sources)? {
                    result
                } else {
                    return Err(unimplemented(op.mnemonic()));
                };
                Ok((
                    Output::Vector {
                        values,
                        carry: Some(carry),
                    },
                    exec,
                ))
            }
            ValuOpcode::Vop3(op) => self.vop3_compute(v, op, &sources),
        }
    }

    /// The VOP3 opcode space (also the canonical form of VOP1 and VOP2): the first group
    /// that knows `op` computes it.
    fn vop3_compute(
        &self,
        v: &ValuInst,
        op: Vop3Op,
        sources: &Sources,
    ) -> Result<(Output, u32), FaultKind> {
        if let Some(output) = self.move_op(v, op, sources)? {
            return Ok(output);
        }
        let values = if let Some(values) = self.int_op(v, op, sources)? {
            values
        } else if let Some(values) = self.float_op(v, op, sources)? {
            values
        } else if let Some(values) = self.convert_op(op, sources)? {
            values
        } else if let Some(values) = self.division_op(op, sources)? {
            values
        } else if let Some(values) = self.dot_op(op, sources)? {
            values
        } else {
            return Err(unimplemented(op.mnemonic()));
        };
        Ok((
            Output::Vector {
                values,
                carry: None,
            },
            sources.exec,
        ))
    }
}
