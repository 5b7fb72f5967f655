//! Vector ALU execution over whole waves. Every VALU encoding arrives here as a canonical
//! [`ValuInst`]; sources are fetched once per instruction as 32-lane arrays, the operation
//! loops over lanes, and results are written under EXEC.

use super::float::*;
use super::{unimplemented, Flow, Wave, WAVE_SIZE};
use crate::decode::{CompareCondition, CompareType, Dpp, ValuInst, Vop3p, Vopd};
use crate::fault::FaultKind;
use crate::isa::{ValuOpcode, Vop3Op, Vop3pOp, Vop3sdOp};
use crate::operand::{Operand, EXEC_LO};

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

/// Lanes with `test` true (among `exec`).
fn mask_of(exec: u32, test: impl Fn(usize) -> bool) -> u32 {
    let mut mask = 0;
    for lane in 0..WAVE_SIZE {
        if exec >> lane & 1 != 0 && test(lane) {
            mask |= 1 << lane;
        }
    }
    mask
}

/// Per-lane add/sub with carry: returns (values, carry mask).
fn carry_op(
    exec: u32,
    a: &Lanes,
    b: &Lanes,
    carry_in: u32,
    subtract: bool,
    use_carry: bool,
) -> (Lanes, u32) {
    let mut out = [0u64; WAVE_SIZE];
    let mut carry = 0u32;
    for lane in 0..WAVE_SIZE {
        if exec >> lane & 1 == 0 {
            continue;
        }
        let cin = u64::from(use_carry && carry_in >> lane & 1 != 0);
        let (x, y) = (a[lane] & 0xffff_ffff, b[lane] & 0xffff_ffff);
        let (value, overflow) = if subtract {
            (x.wrapping_sub(y).wrapping_sub(cin), y + cin > x)
        } else {
            let sum = x + y + cin;
            (sum, sum >> 32 != 0)
        };
        out[lane] = value & 0xffff_ffff;
        if overflow {
            carry |= 1 << lane;
        }
    }
    (out, carry)
}

fn bfe_u32(x: u32, offset: u32, width: u32) -> u32 {
    let (offset, width) = (offset & 31, width & 31);
    if width == 0 {
        return 0;
    }
    ((u64::from(x) >> offset) & ((1u64 << width) - 1)) as u32
}

fn bfe_i32(x: u32, offset: u32, width: u32) -> u32 {
    let (offset, width) = (offset & 31, width & 31);
    if width == 0 {
        return 0;
    }
    let field = (u64::from(x) >> offset) & ((1u64 << width) - 1);
    let shift = 64 - width;
    (((field << shift) as i64) >> shift) as u32
}

fn sext24(x: u64) -> i64 {
    ((x << 40) as i64) >> 40
}

/// V_DIV_FIXUP_F32/F64 special-case handling; `quotient` is S0, `den` S1, `num` S2.
fn div_fixup_f64(quotient: f64, den: f64, num: f64) -> f64 {
    let sign_negative = den.is_sign_negative() != num.is_sign_negative();
    let signed_inf = if sign_negative {
        f64::NEG_INFINITY
    } else {
        f64::INFINITY
    };
    let signed_zero = if sign_negative { -0.0 } else { 0.0 };
    if den.is_nan() {
        den
    } else if num.is_nan() {
        num
    } else if (den == 0.0 && num == 0.0) || (den.is_infinite() && num.is_infinite()) {
        f64::NAN
    } else if den == 0.0 || num.is_infinite() {
        signed_inf
    } else if den.is_infinite() || num == 0.0 {
        signed_zero
    } else if quotient.is_nan() {
        signed_inf
    } else if sign_negative {
        -quotient.abs()
    } else {
        quotient.abs()
    }
}

/// V_PERM_B32 byte selection.
fn perm_byte(pool: u64, selector: u32) -> u32 {
    match selector {
        0..=7 => ((pool >> (selector * 8)) & 0xff) as u32,
        8..=11 => {
            let byte = match selector {
                8 => (pool >> 15) & 1,
                9 => (pool >> 31) & 1,
                10 => (pool >> 47) & 1,
                _ => (pool >> 63) & 1,
            };
            if byte != 0 {
                0xff
            } else {
                0
            }
        }
        12 => 0,
        _ => 0xff,
    }
}

impl Wave {
    pub(super) fn valu_optional(
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

    pub(super) fn valu(&mut self, v: &ValuInst) -> Result<Flow, FaultKind> {
        let (output, lane_mask) = self.valu_compute(v)?;
        self.valu_commit(v, output, lane_mask)?;
        Ok(Flow::Next)
    }

    pub(super) fn vopd(&mut self, i: &Vopd) -> Result<Flow, FaultKind> {
        let (Some(x), Some(y)) = (&i.x, &i.y) else {
            let missing = if i.x.is_none() {
                i.opx.mnemonic()
            } else {
                i.opy.mnemonic()
            };
            return Err(unimplemented(missing));
        };
        // Both halves read their sources before either writes.
        let (out_x, mask_x) = self.valu_compute(x)?;
        let (out_y, mask_y) = self.valu_compute(y)?;
        self.valu_commit(x, out_x, mask_x)?;
        self.valu_commit(y, out_y, mask_y)?;
        Ok(Flow::Next)
    }

    /// Reads source `n` of `v` for all lanes, with opsel, DPP and float modifiers applied.
    /// Also returns the lanes DPP leaves enabled.
    fn fetch(&self, v: &ValuInst, n: usize) -> Result<(Lanes, u32), FaultKind> {
        let bits = v.src_bits[n];
        let operand = v.src[n];
        let mut lanes = [0u64; WAVE_SIZE];
        let mut enabled = u32::MAX;
        if bits == 0 {
            return Ok((lanes, enabled));
        }
        let high_half = bits == 16 && (v.opsel >> n) & 1 != 0;
        match operand {
            Operand::Vgpr(_) => {
                let dwords = if bits > 32 { 2 } else { 1 };
                let range = self.vgpr_range(operand, dwords)?;
                let low = &self.vgpr[range.start];
                if dwords == 2 {
                    let high = &self.vgpr[range.start + 1];
                    for lane in 0..WAVE_SIZE {
                        lanes[lane] = u64::from(low[lane]) | (u64::from(high[lane]) << 32);
                    }
                } else {
                    for lane in 0..WAVE_SIZE {
                        lanes[lane] = u64::from(low[lane]);
                    }
                }
            }
            Operand::InlineFloat(value) if bits == 16 => {
                lanes = [u64::from(value.f16_bits()); WAVE_SIZE]
            }
            _ => {
                let value = if bits > 32 {
                    self.read_scalar64(operand, v.src_float[n])?
                } else {
                    u64::from(self.read_scalar(operand)?)
                };
                lanes = [value; WAVE_SIZE];
            }
        }
        if n == 0 {
            if let Some(dpp) = &v.dpp {
                (lanes, enabled) = self.apply_dpp(dpp, &lanes);
            }
        }
        if bits == 16 {
            for value in lanes.iter_mut() {
                *value = if high_half {
                    (*value >> 16) & 0xffff
                } else {
                    *value & 0xffff
                };
            }
        }
        // Input modifiers act on the sign bit of the operand's width; LLVM also uses them on
        // untyped selects such as v_cndmask_b32.
        if v.abs | v.neg != 0 {
            let sign = 1u64 << (u32::from(bits.min(64)) - 1);
            let (abs, neg) = ((v.abs >> n) & 1 != 0, (v.neg >> n) & 1 != 0);
            if abs || neg {
                for value in lanes.iter_mut() {
                    if abs {
                        *value &= !sign;
                    }
                    if neg {
                        *value ^= sign;
                    }
                }
            }
        }
        Ok((lanes, enabled))
    }

    /// Applies a DPP lane permutation; returns the permuted values and the lanes allowed to
    /// write (row/bank masks, invalid source lanes without bound_ctrl).
    fn apply_dpp(&self, dpp: &Dpp, values: &Lanes) -> (Lanes, u32) {
        let exec = self.exec();
        let mut out = [0u64; WAVE_SIZE];
        let mut enabled = 0u32;
        match *dpp {
            Dpp::Dpp8 { selects, .. } => {
                for lane in 0..WAVE_SIZE {
                    let source = (lane & !7) + usize::from(selects[lane & 7] & 7);
                    out[lane] = values[source];
                }
                enabled = u32::MAX;
            }
            Dpp::Dpp16 {
                ctrl,
                row_mask,
                bank_mask,
                bound_ctrl,
                fetch_inactive,
            } => {
                for (lane, out_value) in out.iter_mut().enumerate() {
                    let row_base = lane & !15;
                    let in_row = lane & 15;
                    let source: Option<usize> = match ctrl {
                        0x000..=0x0ff => {
                            Some((lane & !3) + usize::from((ctrl >> (2 * (lane & 3))) & 3))
                        }
                        0x101..=0x10f => {
                            let s = in_row + usize::from(ctrl & 0xf);
                            (s < 16).then_some(row_base + s)
                        }
                        0x111..=0x11f => in_row
                            .checked_sub(usize::from(ctrl & 0xf))
                            .map(|s| row_base + s),
                        0x121..=0x12f => {
                            Some(row_base + (in_row + 16 - usize::from(ctrl & 0xf)) % 16)
                        }
                        0x140 => Some(row_base + 15 - in_row),
                        0x141 => Some((lane & !7) + 7 - (lane & 7)),
                        0x150..=0x15f => Some(row_base + usize::from(ctrl & 0xf)),
                        0x160..=0x16f => Some(row_base + (in_row ^ usize::from(ctrl & 0xf))),
                        _ => None,
                    };
                    let row_on = (row_mask >> (lane / 16)) & 1 != 0;
                    let bank_on = (bank_mask >> ((lane & 15) / 4)) & 1 != 0;
                    if !row_on || !bank_on {
                        continue;
                    }
                    match source {
                        Some(s) if fetch_inactive || exec >> s & 1 != 0 => {
                            *out_value = values[s];
                            enabled |= 1 << lane;
                        }
                        _ if bound_ctrl => {
                            *out_value = 0;
                            enabled |= 1 << lane;
                        }
                        _ => {}
                    }
                }
            }
        }
        (out, enabled)
    }

    fn lane_mask_source(&self, v: &ValuInst, n: usize) -> Result<u32, FaultKind> {
        self.read_scalar(v.src[n])
    }

    /// Computes a VALU operation; returns the output and the lanes that may be written.
    fn valu_compute(&self, v: &ValuInst) -> Result<(Output, u32), FaultKind> {
        let (a, enabled) = self.fetch(v, 0)?;
        let exec = self.exec() & enabled;
        if let Some(compare) = v.compare {
            let (b, _) = self.fetch(v, 1)?;
            return Ok((
                Output::Mask(compare_lanes(exec, compare.condition, compare.ty, &a, &b)),
                exec,
            ));
        }
        let (b, _) = self.fetch(v, 1)?;
        let (c, _) = self.fetch(v, 2)?;
        let vector = |values: Lanes| {
            Ok((
                Output::Vector {
                    values,
                    carry: None,
                },
                exec,
            ))
        };
        match v.op {
            ValuOpcode::Vop3sd(op) => {
                use Vop3sdOp::*;
                let (values, carry) = match op {
                    V_ADD_CO_U32 => carry_op(exec, &a, &b, 0, false, false),
                    V_SUB_CO_U32 => carry_op(exec, &a, &b, 0, true, false),
                    V_SUBREV_CO_U32 => carry_op(exec, &b, &a, 0, true, false),
                    V_ADD_CO_CI_U32 => {
                        carry_op(exec, &a, &b, self.lane_mask_source(v, 2)?, false, true)
                    }
                    V_SUB_CO_CI_U32 => {
                        carry_op(exec, &a, &b, self.lane_mask_source(v, 2)?, true, true)
                    }
                    V_SUBREV_CO_CI_U32 => {
                        carry_op(exec, &b, &a, self.lane_mask_source(v, 2)?, true, true)
                    }
                    V_MAD_U64_U32 => {
                        let mut carry = 0;
                        let values = {
                            let mut out = [0u64; WAVE_SIZE];
                            for lane in 0..WAVE_SIZE {
                                if exec >> lane & 1 != 0 {
                                    let product = u128::from(a[lane] & 0xffff_ffff)
                                        * u128::from(b[lane] & 0xffff_ffff);
                                    let sum = product + u128::from(c[lane]);
                                    out[lane] = sum as u64;
                                    if sum >> 64 != 0 {
                                        carry |= 1 << lane;
                                    }
                                }
                            }
                            out
                        };
                        (values, carry)
                    }
                    V_MAD_I64_I32 => {
                        let mut carry = 0;
                        let mut out = [0u64; WAVE_SIZE];
                        for lane in 0..WAVE_SIZE {
                            if exec >> lane & 1 != 0 {
                                let product = i128::from(a[lane] as u32 as i32)
                                    * i128::from(b[lane] as u32 as i32);
                                let sum = product + i128::from(c[lane] as i64);
                                out[lane] = sum as u64;
                                if sum > i128::from(i64::MAX) || sum < i128::from(i64::MIN) {
                                    carry |= 1 << lane;
                                }
                            }
                        }
                        (out, carry)
                    }
                    V_DIV_SCALE_F32 => {
                        // Scaling is only needed near the extremes of the range; the quotient
                        // is computed without it (the fixup step returns the exact result).
                        (map1(exec, &a, |x| x), 0)
                    }
                    V_DIV_SCALE_F64 => (map1(exec, &a, |x| x), 0),
                };
                Ok((
                    Output::Vector {
                        values,
                        carry: Some(carry),
                    },
                    exec,
                ))
            }
            ValuOpcode::Vop3(op) => {
                use Vop3Op::*;
                let lane_select = |w: &Wave| -> Result<usize, FaultKind> {
                    Ok((w.read_scalar(v.src[1])? & 31) as usize)
                };
                let old_dst = |w: &Wave| -> Result<Lanes, FaultKind> {
                    let mut lanes = [0u64; WAVE_SIZE];
                    let range = w.vgpr_range(v.dst, 1)?;
                    for (lane, value) in lanes.iter_mut().enumerate() {
                        *value = u64::from(w.vgpr[range.start][lane]);
                    }
                    Ok(lanes)
                };
                match op {
                    V_NOP_E64 => Ok((
                        Output::Vector {
                            values: [0; WAVE_SIZE],
                            carry: None,
                        },
                        0,
                    )),
                    V_MOV_B32_E64 => vector(map1(exec, &a, |x| x)),
                    V_READFIRSTLANE_B32_E64 => {
                        let lane = if exec == 0 {
                            0
                        } else {
                            self.exec().trailing_zeros() as usize
                        };
                        let lane = lane.min(WAVE_SIZE - 1);
                        Ok((Output::Scalar(lo(a[lane])), exec))
                    }
                    V_READLANE_B32 => {
                        let (a, _) = self.fetch(v, 0)?;
                        Ok((Output::Scalar(lo(a[lane_select(self)?])), exec))
                    }
                    V_WRITELANE_B32 => {
                        let value = self.read_scalar(v.src[0])?;
                        Ok((
                            Output::Lane {
                                lane: lane_select(self)?,
                                value,
                            },
                            exec,
                        ))
                    }
                    V_CNDMASK_B32_E64 => {
                        let mask = self.lane_mask_source(v, 2)?;
                        let mut out = [0u64; WAVE_SIZE];
                        for lane in 0..WAVE_SIZE {
                            out[lane] = if mask >> lane & 1 != 0 {
                                b[lane]
                            } else {
                                a[lane]
                            };
                        }
                        vector(out)
                    }
                    // 32-bit float arithmetic.
                    V_ADD_F32_E64 => vector(map2(exec, &a, &b, |x, y| bf(f(x) + f(y)))),
                    V_SUB_F32_E64 => vector(map2(exec, &a, &b, |x, y| bf(f(x) - f(y)))),
                    V_SUBREV_F32_E64 => vector(map2(exec, &a, &b, |x, y| bf(f(y) - f(x)))),
                    V_MUL_F32_E64 => vector(map2(exec, &a, &b, |x, y| bf(f(x) * f(y)))),
                    V_MUL_DX9_ZERO_F32_E64 => vector(map2(exec, &a, &b, |x, y| {
                        if f(x) == 0.0 || f(y) == 0.0 {
                            bf(0.0)
                        } else {
                            bf(f(x) * f(y))
                        }
                    })),
                    V_FMA_F32 => vector(map3(exec, &a, &b, &c, |x, y, z| {
                        bf(f(x).mul_add(f(y), f(z)))
                    })),
                    V_FMAC_F32_E64 => {
                        let acc = old_dst(self)?;
                        vector(map3(exec, &a, &b, &acc, |x, y, z| {
                            bf(f(x).mul_add(f(y), f(z)))
                        }))
                    }
                    V_MIN_F32_E64 => vector(map2(exec, &a, &b, |x, y| bf(min_f32(f(x), f(y))))),
                    V_MAX_F32_E64 => vector(map2(exec, &a, &b, |x, y| bf(max_f32(f(x), f(y))))),
                    V_MIN3_F32 => vector(map3(exec, &a, &b, &c, |x, y, z| {
                        bf(min_f32(min_f32(f(x), f(y)), f(z)))
                    })),
                    V_MAX3_F32 => vector(map3(exec, &a, &b, &c, |x, y, z| {
                        bf(max_f32(max_f32(f(x), f(y)), f(z)))
                    })),
                    V_MED3_F32 => vector(map3(exec, &a, &b, &c, |x, y, z| {
                        bf(med3_f32(f(x), f(y), f(z)))
                    })),
                    V_LDEXP_F32 => vector(map2(exec, &a, &b, |x, y| {
                        bf(ldexp_f32(f(x), y as u32 as i32))
                    })),
                    V_DIV_FMAS_F32 => {
                        let vcc = self.vcc();
                        let mut out =
                            map3(exec, &a, &b, &c, |x, y, z| bf(f(x).mul_add(f(y), f(z))));
                        for (lane, value) in out.iter_mut().enumerate() {
                            if vcc >> lane & 1 != 0 {
                                *value = bf(ldexp_f32(f(*value), 32));
                            }
                        }
                        vector(out)
                    }
                    V_DIV_FIXUP_F32 => vector(map3(exec, &a, &b, &c, |q, den, num| {
                        bf(
                            div_fixup_f64(f64::from(f(q)), f64::from(f(den)), f64::from(f(num)))
                                as f32,
                        )
                    })),
                    V_RCP_F32_E64 => vector(map1(exec, &a, |x| bf(1.0 / f(x)))),
                    V_RCP_IFLAG_F32_E64 => vector(map1(exec, &a, |x| bf(1.0 / f(x)))),
                    V_RSQ_F32_E64 => vector(map1(exec, &a, |x| bf(1.0 / f(x).sqrt()))),
                    V_SQRT_F32_E64 => vector(map1(exec, &a, |x| bf(f(x).sqrt()))),
                    V_EXP_F32_E64 => vector(map1(exec, &a, |x| bf(f(x).exp2()))),
                    V_LOG_F32_E64 => vector(map1(exec, &a, |x| bf(f(x).log2()))),
                    V_SIN_F32_E64 => {
                        vector(map1(exec, &a, |x| bf((f(x) * std::f32::consts::TAU).sin())))
                    }
                    V_COS_F32_E64 => {
                        vector(map1(exec, &a, |x| bf((f(x) * std::f32::consts::TAU).cos())))
                    }
                    V_FLOOR_F32_E64 => vector(map1(exec, &a, |x| bf(f(x).floor()))),
                    V_CEIL_F32_E64 => vector(map1(exec, &a, |x| bf(f(x).ceil()))),
                    V_TRUNC_F32_E64 => vector(map1(exec, &a, |x| bf(f(x).trunc()))),
                    V_RNDNE_F32_E64 => vector(map1(exec, &a, |x| bf(f(x).round_ties_even()))),
                    V_FRACT_F32_E64 => vector(map1(exec, &a, |x| bf(fract_f32(f(x))))),
                    V_FREXP_MANT_F32_E64 => vector(map1(exec, &a, |x| bf(frexp_mant_f32(f(x))))),
                    V_FREXP_EXP_I32_F32_E64 => {
                        vector(map1(exec, &a, |x| frexp_exp_f32(f(x)) as u32 as u64))
                    }
                    // Conversions.
                    V_CVT_F32_I32_E64 => vector(map1(exec, &a, |x| bf(x as u32 as i32 as f32))),
                    V_CVT_F32_U32_E64 => vector(map1(exec, &a, |x| bf(x as u32 as f32))),
                    V_CVT_I32_F32_E64 => vector(map1(exec, &a, |x| f(x) as i32 as u32 as u64)),
                    V_CVT_U32_F32_E64 => vector(map1(exec, &a, |x| u64::from(f(x) as u32))),
                    V_CVT_F32_F64_E64 => vector(map1(exec, &a, |x| bf(d(x) as f32))),
                    V_CVT_F64_F32_E64 => vector(map1(exec, &a, |x| bd(f64::from(f(x))))),
                    V_CVT_I32_F64_E64 => vector(map1(exec, &a, |x| d(x) as i32 as u32 as u64)),
                    V_CVT_U32_F64_E64 => vector(map1(exec, &a, |x| u64::from(d(x) as u32))),
                    V_CVT_F64_I32_E64 => vector(map1(exec, &a, |x| bd(f64::from(x as u32 as i32)))),
                    V_CVT_F64_U32_E64 => vector(map1(exec, &a, |x| bd(f64::from(x as u32)))),
                    V_CVT_F16_F32_E64 => vector(map1(exec, &a, |x| bh(f(x)))),
                    V_CVT_F32_F16_E64 => vector(map1(exec, &a, |x| bf(h(x)))),
                    V_CVT_F32_UBYTE0_E64 => vector(map1(exec, &a, |x| bf((x & 0xff) as f32))),
                    V_CVT_F32_UBYTE1_E64 => {
                        vector(map1(exec, &a, |x| bf(((x >> 8) & 0xff) as f32)))
                    }
                    V_CVT_F32_UBYTE2_E64 => {
                        vector(map1(exec, &a, |x| bf(((x >> 16) & 0xff) as f32)))
                    }
                    V_CVT_F32_UBYTE3_E64 => {
                        vector(map1(exec, &a, |x| bf(((x >> 24) & 0xff) as f32)))
                    }
                    V_CVT_FLOOR_I32_F32_E64 => {
                        vector(map1(exec, &a, |x| f(x).floor() as i32 as u32 as u64))
                    }
                    V_CVT_NEAREST_I32_F32_E64 => vector(map1(exec, &a, |x| {
                        (f(x) + 0.5).floor() as i32 as u32 as u64
                    })),
                    V_CVT_PK_RTZ_F16_F32_E64 => vector(map2(exec, &a, &b, |x, y| {
                        let rtz = |v: f32| {
                            let rounded = f32_to_f16(v);
                            // Round toward zero: step back if rounding went away from zero.
                            if f16_to_f32(rounded).abs() > v.abs() && v.is_finite() {
                                u64::from(rounded - 1)
                            } else {
                                u64::from(rounded)
                            }
                        };
                        rtz(f(x)) | (rtz(f(y)) << 16)
                    })),
                    V_CVT_PK_U16_U32 => vector(map2(exec, &a, &b, |x, y| {
                        (x & 0xffff).min(0xffff) | ((y & 0xffff) << 16)
                    })),
                    // 16-bit float arithmetic (low halves).
                    V_ADD_F16_E64 => vector(map2(exec, &a, &b, |x, y| bh(h(x) + h(y)))),
                    V_SUB_F16_E64 => vector(map2(exec, &a, &b, |x, y| bh(h(x) - h(y)))),
                    V_SUBREV_F16_E64 => vector(map2(exec, &a, &b, |x, y| bh(h(y) - h(x)))),
                    V_MUL_F16_E64 => vector(map2(exec, &a, &b, |x, y| bh(h(x) * h(y)))),
                    V_FMA_F16 => vector(map3(exec, &a, &b, &c, |x, y, z| {
                        bh((f64::from(h(x)) * f64::from(h(y)) + f64::from(h(z))) as f32)
                    })),
                    V_FMAC_F16_E64 => {
                        let acc = old_dst(self)?;
                        vector(map3(exec, &a, &b, &acc, |x, y, z| {
                            bh((f64::from(h(x)) * f64::from(h(y)) + f64::from(h(z))) as f32)
                        }))
                    }
                    V_MAX_F16_E64 => vector(map2(exec, &a, &b, |x, y| bh(max_f32(h(x), h(y))))),
                    V_MIN_F16_E64 => vector(map2(exec, &a, &b, |x, y| bh(min_f32(h(x), h(y))))),
                    // 64-bit float arithmetic.
                    V_ADD_F64 => vector(map2(exec, &a, &b, |x, y| bd(d(x) + d(y)))),
                    V_MUL_F64 => vector(map2(exec, &a, &b, |x, y| bd(d(x) * d(y)))),
                    V_FMA_F64 => vector(map3(exec, &a, &b, &c, |x, y, z| {
                        bd(d(x).mul_add(d(y), d(z)))
                    })),
                    V_MIN_F64 => vector(map2(exec, &a, &b, |x, y| bd(min_f64(d(x), d(y))))),
                    V_MAX_F64 => vector(map2(exec, &a, &b, |x, y| bd(max_f64(d(x), d(y))))),
                    V_LDEXP_F64 => vector(map2(exec, &a, &b, |x, y| {
                        bd(ldexp_f64(d(x), y as u32 as i32))
                    })),
                    V_RCP_F64_E64 => vector(map1(exec, &a, |x| bd(1.0 / d(x)))),
                    V_RSQ_F64_E64 => vector(map1(exec, &a, |x| bd(1.0 / d(x).sqrt()))),
                    V_SQRT_F64_E64 => vector(map1(exec, &a, |x| bd(d(x).sqrt()))),
                    V_FLOOR_F64_E64 => vector(map1(exec, &a, |x| bd(d(x).floor()))),
                    V_CEIL_F64_E64 => vector(map1(exec, &a, |x| bd(d(x).ceil()))),
                    V_TRUNC_F64_E64 => vector(map1(exec, &a, |x| bd(d(x).trunc()))),
                    V_RNDNE_F64_E64 => vector(map1(exec, &a, |x| bd(d(x).round_ties_even()))),
                    V_FRACT_F64_E64 => vector(map1(exec, &a, |x| bd(fract_f64(d(x))))),
                    V_FREXP_MANT_F64_E64 => vector(map1(exec, &a, |x| bd(frexp_mant_f64(d(x))))),
                    V_FREXP_EXP_I32_F64_E64 => {
                        vector(map1(exec, &a, |x| frexp_exp_f64(d(x)) as u32 as u64))
                    }
                    V_DIV_FMAS_F64 => {
                        let vcc = self.vcc();
                        let mut out =
                            map3(exec, &a, &b, &c, |x, y, z| bd(d(x).mul_add(d(y), d(z))));
                        for (lane, value) in out.iter_mut().enumerate() {
                            if vcc >> lane & 1 != 0 {
                                *value = bd(ldexp_f64(d(*value), 64));
                            }
                        }
                        vector(out)
                    }
                    V_DIV_FIXUP_F64 => vector(map3(exec, &a, &b, &c, |q, den, num| {
                        bd(div_fixup_f64(d(q), d(den), d(num)))
                    })),
                    // 32-bit integer arithmetic and logic.
                    V_ADD_NC_U32_E64 => vector(map2(exec, &a, &b, |x, y| {
                        u64::from(lo(x).wrapping_add(lo(y)))
                    })),
                    V_SUB_NC_U32_E64 => vector(map2(exec, &a, &b, |x, y| {
                        u64::from(lo(x).wrapping_sub(lo(y)))
                    })),
                    V_SUBREV_NC_U32_E64 => vector(map2(exec, &a, &b, |x, y| {
                        u64::from(lo(y).wrapping_sub(lo(x)))
                    })),
                    V_ADD_NC_I32 => vector(map2(exec, &a, &b, |x, y| {
                        u64::from(lo(x).wrapping_add(lo(y)))
                    })),
                    V_SUB_NC_I32 => vector(map2(exec, &a, &b, |x, y| {
                        u64::from(lo(x).wrapping_sub(lo(y)))
                    })),
                    V_ADD3_U32 => vector(map3(exec, &a, &b, &c, |x, y, z| {
                        u64::from(lo(x).wrapping_add(lo(y)).wrapping_add(lo(z)))
                    })),
                    V_MUL_LO_U32 => vector(map2(exec, &a, &b, |x, y| {
                        u64::from(lo(x).wrapping_mul(lo(y)))
                    })),
                    V_MUL_HI_U32 => vector(map2(exec, &a, &b, |x, y| {
                        ((x & 0xffff_ffff) * (y & 0xffff_ffff)) >> 32
                    })),
                    V_MUL_HI_I32 => vector(map2(exec, &a, &b, |x, y| {
                        u64::from(
                            ((i64::from(lo(x) as i32) * i64::from(lo(y) as i32)) >> 32) as u32,
                        )
                    })),
                    V_MUL_U32_U24_E64 => vector(map2(exec, &a, &b, |x, y| {
                        ((x & 0xff_ffff) * (y & 0xff_ffff)) & 0xffff_ffff
                    })),
                    V_MUL_HI_U32_U24_E64 => vector(map2(exec, &a, &b, |x, y| {
                        ((x & 0xff_ffff) * (y & 0xff_ffff)) >> 32
                    })),
                    V_MUL_I32_I24_E64 => vector(map2(exec, &a, &b, |x, y| {
                        u64::from((sext24(x) * sext24(y)) as u32)
                    })),
                    V_MUL_HI_I32_I24_E64 => vector(map2(exec, &a, &b, |x, y| {
                        u64::from(((sext24(x) * sext24(y)) >> 32) as u32)
                    })),
                    V_MAD_U32_U24 => vector(map3(exec, &a, &b, &c, |x, y, z| {
                        u64::from(((x & 0xff_ffff) * (y & 0xff_ffff)) as u32).wrapping_add(z)
                            & 0xffff_ffff
                    })),
                    V_MAD_I32_I24 => vector(map3(exec, &a, &b, &c, |x, y, z| {
                        u64::from(((sext24(x) * sext24(y)) as u32).wrapping_add(lo(z)))
                    })),
                    V_MIN_I32_E64 => vector(map2(exec, &a, &b, |x, y| {
                        u64::from((lo(x) as i32).min(lo(y) as i32) as u32)
                    })),
                    V_MAX_I32_E64 => vector(map2(exec, &a, &b, |x, y| {
                        u64::from((lo(x) as i32).max(lo(y) as i32) as u32)
                    })),
                    V_MIN_U32_E64 => vector(map2(exec, &a, &b, |x, y| x.min(y))),
                    V_MAX_U32_E64 => vector(map2(exec, &a, &b, |x, y| x.max(y))),
                    V_MIN3_I32 => vector(map3(exec, &a, &b, &c, |x, y, z| {
                        u64::from((lo(x) as i32).min(lo(y) as i32).min(lo(z) as i32) as u32)
                    })),
                    V_MAX3_I32 => vector(map3(exec, &a, &b, &c, |x, y, z| {
                        u64::from((lo(x) as i32).max(lo(y) as i32).max(lo(z) as i32) as u32)
                    })),
                    V_MIN3_U32 => vector(map3(exec, &a, &b, &c, |x, y, z| x.min(y).min(z))),
                    V_MAX3_U32 => vector(map3(exec, &a, &b, &c, |x, y, z| x.max(y).max(z))),
                    V_MED3_I32 => vector(map3(exec, &a, &b, &c, |x, y, z| {
                        let (x, y, z) = (lo(x) as i32, lo(y) as i32, lo(z) as i32);
                        u64::from(x.min(y).max(x.max(y).min(z)) as u32)
                    })),
                    V_MED3_U32 => vector(map3(exec, &a, &b, &c, |x, y, z| {
                        x.min(y).max(x.max(y).min(z))
                    })),
                    V_AND_B32_E64 => vector(map2(exec, &a, &b, |x, y| x & y)),
                    V_OR_B32_E64 => vector(map2(exec, &a, &b, |x, y| x | y)),
                    V_XOR_B32_E64 => vector(map2(exec, &a, &b, |x, y| x ^ y)),
                    V_XNOR_B32_E64 => vector(map2(exec, &a, &b, |x, y| !(x ^ y) & 0xffff_ffff)),
                    V_NOT_B32_E64 => vector(map1(exec, &a, |x| !x & 0xffff_ffff)),
                    V_AND_OR_B32 => vector(map3(exec, &a, &b, &c, |x, y, z| (x & y) | z)),
                    V_OR3_B32 => vector(map3(exec, &a, &b, &c, |x, y, z| x | y | z)),
                    V_XOR3_B32 => vector(map3(exec, &a, &b, &c, |x, y, z| x ^ y ^ z)),
                    V_LSHLREV_B32_E64 => {
                        vector(map2(exec, &a, &b, |x, y| u64::from(lo(y) << (x & 31))))
                    }
                    V_LSHRREV_B32_E64 => {
                        vector(map2(exec, &a, &b, |x, y| u64::from(lo(y) >> (x & 31))))
                    }
                    V_ASHRREV_I32_E64 => vector(map2(exec, &a, &b, |x, y| {
                        u64::from(((lo(y) as i32) >> (x & 31)) as u32)
                    })),
                    V_LSHL_ADD_U32 => vector(map3(exec, &a, &b, &c, |x, y, z| {
                        u64::from((lo(x) << (y & 31)).wrapping_add(lo(z)))
                    })),
                    V_ADD_LSHL_U32 => vector(map3(exec, &a, &b, &c, |x, y, z| {
                        u64::from(lo(x).wrapping_add(lo(y)) << (z & 31))
                    })),
                    V_LSHL_OR_B32 => vector(map3(exec, &a, &b, &c, |x, y, z| {
                        u64::from((lo(x) << (y & 31)) | lo(z))
                    })),
                    V_BFE_U32 => vector(map3(exec, &a, &b, &c, |x, y, z| {
                        u64::from(bfe_u32(lo(x), lo(y), lo(z)))
                    })),
                    V_BFE_I32 => vector(map3(exec, &a, &b, &c, |x, y, z| {
                        u64::from(bfe_i32(lo(x), lo(y), lo(z)))
                    })),
                    V_BFI_B32 => vector(map3(exec, &a, &b, &c, |x, y, z| {
                        (x & y) | (!x & z & 0xffff_ffff)
                    })),
                    V_BFM_B32 => vector(map2(exec, &a, &b, |x, y| {
                        u64::from((((1u64 << (x & 31)) - 1) as u32) << (y & 31))
                    })),
                    V_ALIGNBIT_B32 => vector(map3(exec, &a, &b, &c, |x, y, z| {
                        ((((x & 0xffff_ffff) << 32) | (y & 0xffff_ffff)) >> (z & 31)) & 0xffff_ffff
                    })),
                    V_ALIGNBYTE_B32 => vector(map3(exec, &a, &b, &c, |x, y, z| {
                        ((((x & 0xffff_ffff) << 32) | (y & 0xffff_ffff)) >> (8 * (z & 3)))
                            & 0xffff_ffff
                    })),
                    V_PERM_B32 => vector(map3(exec, &a, &b, &c, |x, y, z| {
                        let pool = ((x & 0xffff_ffff) << 32) | (y & 0xffff_ffff);
                        let sel = lo(z);
                        let mut r = 0u32;
                        for byte in 0..4 {
                            r |= perm_byte(pool, (sel >> (8 * byte)) & 0xff) << (8 * byte);
                        }
                        u64::from(r)
                    })),
                    V_BFREV_B32_E64 => vector(map1(exec, &a, |x| u64::from(lo(x).reverse_bits()))),
                    V_BCNT_U32_B32 => vector(map2(exec, &a, &b, |x, y| {
                        u64::from(lo(x).count_ones().wrapping_add(lo(y)))
                    })),
                    V_CLZ_I32_U32_E64 => vector(map1(exec, &a, |x| {
                        if lo(x) == 0 {
                            0xffff_ffff
                        } else {
                            u64::from(lo(x).leading_zeros())
                        }
                    })),
                    V_CTZ_I32_B32_E64 => vector(map1(exec, &a, |x| {
                        if lo(x) == 0 {
                            0xffff_ffff
                        } else {
                            u64::from(lo(x).trailing_zeros())
                        }
                    })),
                    V_CLS_I32_E64 => vector(map1(exec, &a, |x| {
                        let v = lo(x);
                        if v == 0 || v == u32::MAX {
                            0xffff_ffff
                        } else if v >> 31 == 1 {
                            u64::from((!v).leading_zeros())
                        } else {
                            u64::from(v.leading_zeros())
                        }
                    })),
                    V_MBCNT_LO_U32_B32 => {
                        let mut out = [0u64; WAVE_SIZE];
                        for lane in 0..WAVE_SIZE {
                            if exec >> lane & 1 != 0 {
                                let below =
                                    (lo(a[lane]) & ((1u64 << lane) - 1) as u32).count_ones();
                                out[lane] = u64::from(below.wrapping_add(lo(b[lane])));
                            }
                        }
                        vector(out)
                    }
                    // Wave32: lanes 32..63 do not exist, so the high half counts nothing.
                    V_MBCNT_HI_U32_B32 => vector(map2(exec, &a, &b, |_, y| y & 0xffff_ffff)),
                    V_SAD_U32 => vector(map3(exec, &a, &b, &c, |x, y, z| {
                        u64::from(lo(x).abs_diff(lo(y)).wrapping_add(lo(z)))
                    })),
                    // 64-bit integer.
                    V_LSHLREV_B64 => vector(map2(exec, &a, &b, |x, y| y << (x & 63))),
                    V_LSHRREV_B64 => vector(map2(exec, &a, &b, |x, y| y >> (x & 63))),
                    V_ASHRREV_I64 => {
                        vector(map2(exec, &a, &b, |x, y| ((y as i64) >> (x & 63)) as u64))
                    }
                    // 16-bit integer (low halves).
                    V_ADD_NC_U16 => vector(map2(exec, &a, &b, |x, y| x.wrapping_add(y) & 0xffff)),
                    V_SUB_NC_U16 => vector(map2(exec, &a, &b, |x, y| x.wrapping_sub(y) & 0xffff)),
                    V_MUL_LO_U16 => vector(map2(exec, &a, &b, |x, y| x.wrapping_mul(y) & 0xffff)),
                    V_LSHLREV_B16 => vector(map2(exec, &a, &b, |x, y| (y << (x & 15)) & 0xffff)),
                    V_LSHRREV_B16 => vector(map2(exec, &a, &b, |x, y| (y & 0xffff) >> (x & 15))),
                    V_ASHRREV_I16 => vector(map2(exec, &a, &b, |x, y| {
                        u64::from(((y as u16 as i16) >> (x & 15)) as u16)
                    })),
                    V_MAX_U16 => vector(map2(exec, &a, &b, |x, y| x.max(y))),
                    V_MIN_U16 => vector(map2(exec, &a, &b, |x, y| x.min(y))),
                    V_MAX_I16 => vector(map2(exec, &a, &b, |x, y| {
                        u64::from((x as u16 as i16).max(y as u16 as i16) as u16)
                    })),
                    V_MIN_I16 => vector(map2(exec, &a, &b, |x, y| {
                        u64::from((x as u16 as i16).min(y as u16 as i16) as u16)
                    })),
                    _ => Err(unimplemented(op.mnemonic())),
                }
            }
        }
    }

    /// Writes a computed VALU result.
    fn valu_commit(
        &mut self,
        v: &ValuInst,
        output: Output,
        lane_mask: u32,
    ) -> Result<(), FaultKind> {
        match output {
            Output::Vector { mut values, carry } => {
                if v.dst_float && (v.clamp || v.omod != 0) {
                    apply_output_modifiers(&mut values, v);
                }
                self.write_vector(v.dst, v.dst_bits, v.opsel, &values, lane_mask)?;
                if let Some(carry) = carry {
                    self.write_scalar(v.sdst, carry & lane_mask)?;
                }
            }
            Output::Mask(mask) => {
                if v.compare.is_some_and(|c| c.writes_exec) || v.dst == Operand::ExecLo {
                    self.sgpr[usize::from(EXEC_LO)] = mask;
                } else {
                    self.write_scalar(v.dst, mask)?;
                }
            }
            Output::Scalar(value) => self.write_scalar(v.dst, value)?,
            Output::Lane { lane, value } => {
                let range = self.vgpr_range(v.dst, 1)?;
                self.vgpr[range.start][lane] = value;
            }
        }
        Ok(())
    }

    fn write_vector(
        &mut self,
        dst: Operand,
        bits: u8,
        opsel: u8,
        values: &Lanes,
        mask: u32,
    ) -> Result<(), FaultKind> {
        let dwords = if bits > 32 { 2 } else { 1 };
        let range = self.vgpr_range(dst, dwords)?;
        let first = range.start;
        for (lane, &value) in values.iter().enumerate() {
            if mask >> lane & 1 == 0 {
                continue;
            }
            match bits {
                16 => {
                    let old = self.vgpr[first][lane];
                    self.vgpr[first][lane] = if opsel & 8 != 0 {
                        (old & 0xffff) | ((value as u32) << 16)
                    } else {
                        (old & 0xffff_0000) | (value as u32 & 0xffff)
                    };
                }
                64 => {
                    self.vgpr[first][lane] = value as u32;
                    self.vgpr[first + 1][lane] = (value >> 32) as u32;
                }
                _ => self.vgpr[first][lane] = value as u32,
            }
        }
        Ok(())
    }

    pub(super) fn vop3p(&mut self, i: &Vop3p) -> Result<Flow, FaultKind> {
        if i.dpp.is_some() {
            return Err(unimplemented(i.op.mnemonic()));
        }
        let exec = self.exec();
        // Fetch raw 32-bit sources; select halves per opsel/opsel_hi and apply neg/neg_hi.
        let mut raw = [[0u32; WAVE_SIZE]; 3];
        for (n, lanes) in raw.iter_mut().enumerate() {
            match i.src[n] {
                Operand::Vgpr(_) => {
                    let range = self.vgpr_range(i.src[n], 1)?;
                    *lanes = self.vgpr[range.start];
                }
                Operand::InlineFloat(value) => *lanes = [u32::from(value.f16_bits()); WAVE_SIZE],
                other => *lanes = [self.read_scalar(other)?; WAVE_SIZE],
            }
        }
        let half = |n: usize, lane: usize, high: bool| -> u16 {
            let select = if high {
                (i.opsel_hi >> n) & 1
            } else {
                (i.opsel >> n) & 1
            };
            let value = if select != 0 {
                (raw[n][lane] >> 16) as u16
            } else {
                raw[n][lane] as u16
            };
            let negate = if high {
                (i.neg_hi >> n) & 1
            } else {
                (i.neg >> n) & 1
            };
            if negate != 0 {
                value ^ 0x8000
            } else {
                value
            }
        };
        use Vop3pOp::*;
        let per_half: fn(u16, u16, u16) -> u16 = match i.op {
            V_PK_ADD_F16 => |x, y, _| f32_to_f16(f16_to_f32(x) + f16_to_f32(y)),
            V_PK_MUL_F16 => |x, y, _| f32_to_f16(f16_to_f32(x) * f16_to_f32(y)),
            V_PK_FMA_F16 => |x, y, z| {
                f32_to_f16(
                    (f64::from(f16_to_f32(x)) * f64::from(f16_to_f32(y)) + f64::from(f16_to_f32(z)))
                        as f32,
                )
            },
            V_PK_MAX_F16 => |x, y, _| f32_to_f16(max_f32(f16_to_f32(x), f16_to_f32(y))),
            V_PK_MIN_F16 => |x, y, _| f32_to_f16(min_f32(f16_to_f32(x), f16_to_f32(y))),
            V_PK_ADD_U16 => |x, y, _| x.wrapping_add(y),
            V_PK_SUB_U16 => |x, y, _| x.wrapping_sub(y),
            V_PK_MUL_LO_U16 => |x, y, _| x.wrapping_mul(y),
            V_PK_LSHLREV_B16 => |x, y, _| y.wrapping_shl(u32::from(x & 15)),
            V_PK_LSHRREV_B16 => |x, y, _| y >> (x & 15),
            V_PK_ASHRREV_I16 => |x, y, _| ((y as i16) >> (x & 15)) as u16,
            V_PK_MAX_U16 => |x, y, _| x.max(y),
            V_PK_MIN_U16 => |x, y, _| x.min(y),
            V_PK_MAX_I16 => |x, y, _| (x as i16).max(y as i16) as u16,
            V_PK_MIN_I16 => |x, y, _| (x as i16).min(y as i16) as u16,
            V_PK_MAD_U16 => |x, y, z| x.wrapping_mul(y).wrapping_add(z),
            _ => return Err(unimplemented(i.op.mnemonic())),
        };
        let range = self.vgpr_range(i.vdst, 1)?;
        for lane in 0..WAVE_SIZE {
            if exec >> lane & 1 == 0 {
                continue;
            }
            let low = per_half(
                half(0, lane, false),
                half(1, lane, false),
                half(2, lane, false),
            );
            let high = per_half(
                half(0, lane, true),
                half(1, lane, true),
                half(2, lane, true),
            );
            self.vgpr[range.start][lane] = u32::from(low) | (u32::from(high) << 16);
        }
        Ok(Flow::Next)
    }
}

/// Clamp to [0, 1] and output scaling (×2, ×4, ÷2) of float results.
fn apply_output_modifiers(values: &mut Lanes, v: &ValuInst) {
    let scale = match v.omod {
        1 => 2.0,
        2 => 4.0,
        3 => 0.5,
        _ => 1.0,
    };
    for value in values.iter_mut() {
        match v.dst_bits {
            64 => {
                let mut x = d(*value) * scale;
                if v.clamp {
                    x = if x.is_nan() { 0.0 } else { x.clamp(0.0, 1.0) };
                }
                *value = bd(x);
            }
            16 => {
                let mut x = h(*value) * scale as f32;
                if v.clamp {
                    x = if x.is_nan() { 0.0 } else { x.clamp(0.0, 1.0) };
                }
                *value = bh(x);
            }
            _ => {
                let mut x = f(*value) * scale as f32;
                if v.clamp {
                    x = if x.is_nan() { 0.0 } else { x.clamp(0.0, 1.0) };
                }
                *value = bf(x);
            }
        }
    }
}

/// Evaluates a compare over the lanes in `exec`; inactive lanes produce 0.
// The negated float comparisons are the ISA's NaN-aware "not less than" etc.
#[allow(
    clippy::neg_cmp_op_on_partial_ord,
    clippy::nonminimal_bool,
    clippy::double_comparisons
)]
fn compare_lanes(
    exec: u32,
    condition: CompareCondition,
    ty: CompareType,
    a: &Lanes,
    b: &Lanes,
) -> u32 {
    use CompareCondition as C;
    match condition {
        C::False => return 0,
        C::True => return exec,
        C::Class => {
            return mask_of(exec, |lane| {
                let (value, quiet, denormal) = match ty {
                    CompareType::F64 => {
                        let x = d(a[lane]);
                        (
                            x,
                            a[lane] >> 51 & 1 != 0,
                            x != 0.0 && x.abs() < f64::MIN_POSITIVE,
                        )
                    }
                    CompareType::F16 => {
                        let bits = a[lane] as u16;
                        let x = f64::from(f16_to_f32(bits));
                        (
                            x,
                            bits >> 9 & 1 != 0,
                            bits & 0x7c00 == 0 && bits & 0x3ff != 0,
                        )
                    }
                    _ => {
                        let x = f(a[lane]);
                        (
                            f64::from(x),
                            a[lane] >> 22 & 1 != 0,
                            x != 0.0 && x.abs() < f32::MIN_POSITIVE,
                        )
                    }
                };
                class_bit_f64(value, quiet, denormal) & lo(b[lane]) != 0
            })
        }
        _ => {}
    }
    let float = |x: f64, y: f64| match condition {
        C::Lt => x < y,
        C::Eq => x == y,
        C::Le => x <= y,
        C::Gt => x > y,
        C::Lg => x < y || x > y,
        C::Ge => x >= y,
        C::O => !x.is_nan() && !y.is_nan(),
        C::U => x.is_nan() || y.is_nan(),
        C::Nge => !(x >= y),
        C::Nlg => !(x < y || x > y),
        C::Ngt => !(x > y),
        C::Nle => !(x <= y),
        C::Neq => x != y,
        C::Nlt => !(x < y),
        _ => false,
    };
    let integer = |ordering: std::cmp::Ordering| match condition {
        C::Lt => ordering.is_lt(),
        C::Eq => ordering.is_eq(),
        C::Le => ordering.is_le(),
        C::Gt => ordering.is_gt(),
        C::Lg => ordering.is_ne(),
        C::Ge => ordering.is_ge(),
        _ => false,
    };
    match ty {
        CompareType::F32 => mask_of(exec, |l| float(f64::from(f(a[l])), f64::from(f(b[l])))),
        CompareType::F64 => mask_of(exec, |l| float(d(a[l]), d(b[l]))),
        CompareType::F16 => mask_of(exec, |l| float(f64::from(h(a[l])), f64::from(h(b[l])))),
        CompareType::I16 => mask_of(exec, |l| {
            integer((a[l] as u16 as i16).cmp(&(b[l] as u16 as i16)))
        }),
        CompareType::U16 => mask_of(exec, |l| integer((a[l] as u16).cmp(&(b[l] as u16)))),
        CompareType::I32 => mask_of(exec, |l| {
            integer((a[l] as u32 as i32).cmp(&(b[l] as u32 as i32)))
        }),
        CompareType::U32 => mask_of(exec, |l| integer((a[l] as u32).cmp(&(b[l] as u32)))),
        CompareType::I64 => mask_of(exec, |l| integer((a[l] as i64).cmp(&(b[l] as i64)))),
        CompareType::U64 => mask_of(exec, |l| integer(a[l].cmp(&b[l]))),
    }
}
