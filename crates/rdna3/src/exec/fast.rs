//! Fast paths for the most common VALU forms: plain 32-bit sources (no DPP, no input or
//! output modifiers, no clamp) computed on `u32` rows straight from the register file and
//! written back under EXEC. Anything else — and any operand the general path would reject —
//! returns `None` and takes the general path in `valu/`, which defines the semantics these
//! paths reproduce bit for bit. The f32 paths run only while MODE keeps f32 denormals.

use super::{Flow, Wave, WAVE_SIZE};
use crate::decode::{CompareCondition, CompareType, ValuInst};
use crate::isa::{ValuOpcode, Vop3Op, Vop3sdOp};
use crate::operand::{Operand, EXEC_LO, NULL};

type Row = [u32; WAVE_SIZE];

#[inline(always)]
fn zip2(a: &Row, b: &Row, op: impl Fn(u32, u32) -> u32) -> Row {
    let mut out = [0u32; WAVE_SIZE];
    for lane in 0..WAVE_SIZE {
        out[lane] = op(a[lane], b[lane]);
    }
    out
}

#[inline(always)]
fn zip3(a: &Row, b: &Row, c: &Row, op: impl Fn(u32, u32, u32) -> u32) -> Row {
    let mut out = [0u32; WAVE_SIZE];
    for lane in 0..WAVE_SIZE {
        out[lane] = op(a[lane], b[lane], c[lane]);
    }
    out
}

/// Lane-wise `a * b + c`, rounded once, on f32 bits.
#[inline(always)]
fn fma_rows(a: &Row, b: &Row, c: &Row) -> Row {
    #[cfg(target_arch = "x86_64")]
    if std::arch::is_x86_feature_detected!("fma") && std::arch::is_x86_feature_detected!("avx2") {
        // SAFETY: the CPU has FMA and AVX2, the features the function is compiled for.
        return unsafe { fma_rows_fma(a, b, c) };
    }
    fma_rows_portable(a, b, c)
}

/// Without hardware FMA in the baseline target, `mul_add` is a call per lane; this copy is
/// compiled for FMA and AVX2, where it is a few vector instructions.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "fma,avx2")]
fn fma_rows_fma(a: &Row, b: &Row, c: &Row) -> Row {
    fma_rows_portable(a, b, c)
}

#[inline(always)]
fn fma_rows_portable(a: &Row, b: &Row, c: &Row) -> Row {
    zip3(a, b, c, |x, y, z| f(x).mul_add(f(y), f(z)).to_bits())
}

#[inline(always)]
fn f(x: u32) -> f32 {
    f32::from_bits(x)
}

/// A lane mask of `test` over the lanes of `exec`.
#[inline(always)]
fn mask_of(exec: u32, a: &Row, b: &Row, test: impl Fn(u32, u32) -> bool) -> u32 {
    let mut mask = 0u32;
    for lane in 0..WAVE_SIZE {
        mask |= u32::from(test(a[lane], b[lane])) << lane;
    }
    mask & exec
}

/// An integer compare of the condition (the general path's `integer` closure).
#[inline(always)]
fn int_compare(condition: CompareCondition, ordering: std::cmp::Ordering) -> Option<bool> {
    use CompareCondition as C;
    Some(match condition {
        C::Lt => ordering.is_lt(),
        C::Eq => ordering.is_eq(),
        C::Le => ordering.is_le(),
        C::Gt => ordering.is_gt(),
        C::Lg => ordering.is_ne(),
        C::Ge => ordering.is_ge(),
        _ => return None,
    })
}

impl Wave {
    /// A 32-bit source as a row (`None` if it is not a plain 32-bit source or cannot be
    /// read; the general path then reports it).
    #[inline(always)]
    fn fast_source(&self, v: &ValuInst, n: usize) -> Option<Row> {
        match v.src_bits[n] {
            0 => Some([0; WAVE_SIZE]),
            32 => match v.src[n] {
                Operand::Vgpr(r) => {
                    let r = usize::from(r);
                    self.note_vgpr_use(r + 1);
                    self.vgpr.get(r).copied()
                }
                other => self.read_scalar(other).ok().map(|x| [x; WAVE_SIZE]),
            },
            _ => None,
        }
    }

    /// Writes `out` to VGPR `dst` in the lanes of `mask`.
    #[inline(always)]
    fn commit_row(&mut self, dst: usize, out: &Row, mask: u32) {
        let row = &mut self.vgpr[dst];
        if mask == u32::MAX {
            *row = *out;
        } else {
            for lane in 0..WAVE_SIZE {
                if mask >> lane & 1 != 0 {
                    row[lane] = out[lane];
                }
            }
        }
    }

    /// Whether MODE keeps f32 denormal inputs and results, the only case the f32 fast paths
    /// compute (the general path flushes as MODE says).
    #[inline(always)]
    pub(crate) fn keeps_f32_denormals(&self) -> bool {
        self.mode & 0x30 == 0x30
    }

    /// Runs `v` on a fast path if it has one; `None` means "use the general path" (nothing
    /// has been changed then).
    #[inline]
    pub(super) fn valu_fast(&mut self, v: &ValuInst) -> Option<Flow> {
        if v.dpp.is_some() || v.abs | v.neg | v.opsel | v.omod != 0 || v.clamp {
            return None;
        }
        let exec = self.exec();
        if let Some(compare) = v.compare {
            return self.compare_fast(v, compare.condition, compare.ty, compare.writes_exec);
        }
        let dst = match v.dst {
            Operand::Vgpr(r) => usize::from(r),
            _ => return None,
        };
        match v.op {
            ValuOpcode::Vop3(Vop3Op::V_LSHLREV_B64) => return self.lshlrev_b64_fast(v, dst),
            ValuOpcode::Vop3(_) | ValuOpcode::Vop3sd(_) => {}
        }
        if v.dst_bits != 32 || dst >= self.vgpr.len() {
            return None;
        }
        self.note_vgpr_use(dst + 1);
        if !self.keeps_f32_denormals()
            && matches!(
                v.op,
                ValuOpcode::Vop3(
                    Vop3Op::V_ADD_F32_E64
                        | Vop3Op::V_SUB_F32_E64
                        | Vop3Op::V_MUL_F32_E64
                        | Vop3Op::V_FMA_F32
                        | Vop3Op::V_FMAC_F32_E64
                )
            )
        {
            return None;
        }
        let a = self.fast_source(v, 0)?;
        let b = self.fast_source(v, 1)?;
        let c = self.fast_source(v, 2)?;
        let out = match v.op {
            ValuOpcode::Vop3(op) => {
                use Vop3Op::*;
                match op {
                    V_MOV_B32_E64 => a,
                    V_ADD_F32_E64 => zip2(&a, &b, |x, y| (f(x) + f(y)).to_bits()),
                    V_SUB_F32_E64 => zip2(&a, &b, |x, y| (f(x) - f(y)).to_bits()),
                    V_MUL_F32_E64 => zip2(&a, &b, |x, y| (f(x) * f(y)).to_bits()),
                    V_FMA_F32 => fma_rows(&a, &b, &c),
                    V_FMAC_F32_E64 => fma_rows(&a, &b, &self.vgpr[dst]),
                    V_ADD_NC_U32_E64 => zip2(&a, &b, u32::wrapping_add),
                    V_SUB_NC_U32_E64 => zip2(&a, &b, u32::wrapping_sub),
                    V_ADD3_U32 => zip3(&a, &b, &c, |x, y, z| x.wrapping_add(y).wrapping_add(z)),
                    V_MUL_LO_U32 => zip2(&a, &b, u32::wrapping_mul),
                    V_AND_B32_E64 => zip2(&a, &b, |x, y| x & y),
                    V_OR_B32_E64 => zip2(&a, &b, |x, y| x | y),
                    V_XOR_B32_E64 => zip2(&a, &b, |x, y| x ^ y),
                    V_LSHLREV_B32_E64 => zip2(&a, &b, |x, y| y << (x & 31)),
                    V_LSHRREV_B32_E64 => zip2(&a, &b, |x, y| y >> (x & 31)),
                    V_ASHRREV_I32_E64 => zip2(&a, &b, |x, y| ((y as i32) >> (x & 31)) as u32),
                    V_LSHL_ADD_U32 => zip3(&a, &b, &c, |x, y, z| (x << (y & 31)).wrapping_add(z)),
                    V_LSHL_OR_B32 => zip3(&a, &b, &c, |x, y, z| (x << (y & 31)) | z),
                    V_MIN_I32_E64 => zip2(&a, &b, |x, y| (x as i32).min(y as i32) as u32),
                    V_MAX_I32_E64 => zip2(&a, &b, |x, y| (x as i32).max(y as i32) as u32),
                    V_MIN_U32_E64 => zip2(&a, &b, u32::min),
                    V_MAX_U32_E64 => zip2(&a, &b, u32::max),
                    V_BFE_U32 => zip3(&a, &b, &c, super::valu::bfe_u32),
                    V_CNDMASK_B32_E64 => {
                        let mask = self.read_scalar(v.src[2]).ok()?;
                        let mut out = [0u32; WAVE_SIZE];
                        for lane in 0..WAVE_SIZE {
                            out[lane] = if mask >> lane & 1 != 0 {
                                b[lane]
                            } else {
                                a[lane]
                            };
                        }
                        out
                    }
                    _ => return None,
                }
            }
            ValuOpcode::Vop3sd(op) => {
                use Vop3sdOp::*;
                let (x, y, subtract, carry_in) = match op {
                    V_ADD_CO_U32 => (&a, &b, false, None),
                    V_SUB_CO_U32 => (&a, &b, true, None),
                    V_SUBREV_CO_U32 => (&b, &a, true, None),
                    V_ADD_CO_CI_U32 => (&a, &b, false, Some(self.read_scalar(v.src[2]).ok()?)),
                    V_SUB_CO_CI_U32 => (&a, &b, true, Some(self.read_scalar(v.src[2]).ok()?)),
                    V_SUBREV_CO_CI_U32 => (&b, &a, true, Some(self.read_scalar(v.src[2]).ok()?)),
                    _ => return None,
                };
                let carry_slot = v.sdst.scalar_slot()?;
                let carry_in = carry_in.unwrap_or(0);
                let mut out = [0u32; WAVE_SIZE];
                let mut carry = 0u32;
                for lane in 0..WAVE_SIZE {
                    let cin = carry_in >> lane & 1;
                    let (value, overflow) = if subtract {
                        let value = x[lane].wrapping_sub(y[lane]).wrapping_sub(cin);
                        (
                            value,
                            u64::from(y[lane]) + u64::from(cin) > u64::from(x[lane]),
                        )
                    } else {
                        let sum = u64::from(x[lane]) + u64::from(y[lane]) + u64::from(cin);
                        (sum as u32, sum >> 32 != 0)
                    };
                    out[lane] = value;
                    carry |= u32::from(overflow) << lane;
                }
                self.commit_row(dst, &out, exec);
                if carry_slot != NULL {
                    self.sgpr[usize::from(carry_slot)] = carry & exec;
                }
                return Some(Flow::Next);
            }
        };
        self.commit_row(dst, &out, exec);
        Some(Flow::Next)
    }

    /// `v_lshlrev_b64` with a 32-bit shift and a 64-bit value in a VGPR pair.
    fn lshlrev_b64_fast(&mut self, v: &ValuInst, dst: usize) -> Option<Flow> {
        if v.src_bits != [32, 64, 0] || v.dst_bits != 64 || dst + 2 > self.vgpr.len() {
            return None;
        }
        let shift = self.fast_source(v, 0)?;
        let Operand::Vgpr(r) = v.src[1] else {
            return None;
        };
        let r = usize::from(r);
        if r + 2 > self.vgpr.len() {
            return None;
        }
        self.note_vgpr_use(dst.max(r) + 2);
        let (low, high) = (self.vgpr[r], self.vgpr[r + 1]);
        let mut out_low = [0u32; WAVE_SIZE];
        let mut out_high = [0u32; WAVE_SIZE];
        for lane in 0..WAVE_SIZE {
            let value =
                (u64::from(low[lane]) | (u64::from(high[lane]) << 32)) << (shift[lane] & 63);
            out_low[lane] = value as u32;
            out_high[lane] = (value >> 32) as u32;
        }
        let exec = self.exec();
        self.commit_row(dst, &out_low, exec);
        self.commit_row(dst + 1, &out_high, exec);
        Some(Flow::Next)
    }

    /// 32-bit integer and float compares.
    fn compare_fast(
        &mut self,
        v: &ValuInst,
        condition: CompareCondition,
        ty: CompareType,
        writes_exec: bool,
    ) -> Option<Flow> {
        use CompareCondition as C;
        if v.src_bits[0] != 32 || v.src_bits[1] != 32 {
            return None;
        }
        let to_exec = writes_exec || v.dst == Operand::ExecLo;
        let dst_slot = if to_exec {
            EXEC_LO
        } else {
            v.dst.scalar_slot()?
        };
        let a = self.fast_source(v, 0)?;
        let b = self.fast_source(v, 1)?;
        let exec = self.exec();
        let mask = match ty {
            CompareType::I32 => {
                int_compare(condition, std::cmp::Ordering::Equal)?;
                mask_of(exec, &a, &b, |x, y| {
                    int_compare(condition, (x as i32).cmp(&(y as i32))).unwrap_or(false)
                })
            }
            CompareType::U32 => {
                int_compare(condition, std::cmp::Ordering::Equal)?;
                mask_of(exec, &a, &b, |x, y| {
                    int_compare(condition, x.cmp(&y)).unwrap_or(false)
                })
            }
            CompareType::F32 if !self.keeps_f32_denormals() => return None,
            // The negated float conditions are the ISA's NaN-aware "not less than" etc.
            #[allow(clippy::neg_cmp_op_on_partial_ord)]
            CompareType::F32 => match condition {
                C::Lt => mask_of(exec, &a, &b, |x, y| f(x) < f(y)),
                C::Eq => mask_of(exec, &a, &b, |x, y| f(x) == f(y)),
                C::Le => mask_of(exec, &a, &b, |x, y| f(x) <= f(y)),
                C::Gt => mask_of(exec, &a, &b, |x, y| f(x) > f(y)),
                C::Lg => mask_of(exec, &a, &b, |x, y| f(x) < f(y) || f(x) > f(y)),
                C::Ge => mask_of(exec, &a, &b, |x, y| f(x) >= f(y)),
                C::Neq => mask_of(exec, &a, &b, |x, y| f(x) != f(y)),
                C::Nlt => mask_of(exec, &a, &b, |x, y| !(f(x) < f(y))),
                C::Nge => mask_of(exec, &a, &b, |x, y| !(f(x) >= f(y))),
                C::Ngt => mask_of(exec, &a, &b, |x, y| !(f(x) > f(y))),
                C::Nle => mask_of(exec, &a, &b, |x, y| !(f(x) <= f(y))),
                _ => return None,
            },
            _ => return None,
        };
        if dst_slot != NULL {
            self.sgpr[usize::from(dst_slot)] = mask;
        }
        Some(Flow::Next)
    }
}
