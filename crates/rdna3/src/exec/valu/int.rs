//! Integer and bit operations: add and subtract with carry or clamp, multiplies and
//! multiply-adds of every width, min/max/med3, logic, shifts, bitfields, bit counts, the
//! byte permute, and the sums of absolute differences. Their helpers (carry chains,
//! bitfield extraction, saturation by the clamp bit) are integer semantics no float
//! operation uses; `int_result` is shared with the packed and WMMA integer forms.

use super::{lo, map1, map2, map3, vector, Group, Lanes, Sources};
use crate::decode::ValuInst;
use crate::exec::{Flow, Wave, WAVE_SIZE};
use crate::fault::FaultKind;
use crate::isa::{Vop3Op, Vop3sdOp};

/// Per-lane add/sub with carry: returns (values, carry mask).
fn carry_op(
    exec: u32,
    a: &Lanes,
    b: &Lanes,
    carry_in: u32,
    subtract: bool,
    use_carry: bool,
    clamp: bool,
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
            if clamp {
                // Saturate: the carry/borrow out is still reported.
                out[lane] = if subtract { 0 } else { 0xffff_ffff };
            }
        }
    }
    (out, carry)
}

/// V_BFE_U32: `(S0 >> offset) & ((1 << width) - 1)` (offset and width are 5 bits; width 0
/// gives 0).
pub(in crate::exec) fn bfe_u32(x: u32, offset: u32, width: u32) -> u32 {
    let (offset, width) = (offset & 31, width & 31);
    if width == 0 {
        return 0;
    }
    ((u64::from(x) >> offset) & ((1u64 << width) - 1)) as u32
}

/// V_BFE_I32: `(S0.i32 >> offset) & ((1 << width) - 1)` with an arithmetic shift, then
/// sign-extended from bit `width - 1` (offset and width are 5 bits; width 0 gives 0).
fn bfe_i32(x: u32, offset: u32, width: u32) -> u32 {
    let (offset, width) = (offset & 31, width & 31);
    if width == 0 {
        return 0;
    }
    let field = ((x as i32) >> offset) as u32 & ((1u32 << width) - 1);
    let shift = 32 - width;
    (((field << shift) as i32) >> shift) as u32
}

/// An integer result of `bits` bits: wrapped, or saturated to the (un)signed range when the
/// instruction's clamp bit is set.
pub(super) fn int_result(x: i128, bits: u32, signed: bool, clamp: bool) -> u64 {
    let mask = (1u64 << bits) - 1;
    if !clamp {
        return (x as u64) & mask;
    }
    let (min, max) = if signed {
        (-(1i128 << (bits - 1)), (1i128 << (bits - 1)) - 1)
    } else {
        (0, i128::from(mask))
    };
    (x.clamp(min, max) as u64) & mask
}

/// Low 32 bits, unsigned, widened.
pub(super) fn u32w(x: u64) -> i128 {
    i128::from(x as u32)
}
/// Low 32 bits, signed, widened.
pub(super) fn i32w(x: u64) -> i128 {
    i128::from(x as u32 as i32)
}
/// Low 16 bits, unsigned, widened.
pub(super) fn u16w(x: u64) -> i128 {
    i128::from(x as u16)
}
/// Low 16 bits, signed, widened.
pub(super) fn i16w(x: u64) -> i128 {
    i128::from(x as u16 as i16)
}

fn sext24(x: u64) -> i64 {
    ((x << 40) as i64) >> 40
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

/// Sum of absolute byte differences; `masked` skips bytes where `y` is 0 (V_MSAD_U8).
fn sad_u8(x: u32, y: u32, masked: bool) -> u32 {
    (0..4)
        .map(|byte| {
            let (p, q) = ((x >> (8 * byte)) as u8, (y >> (8 * byte)) as u8);
            if masked && q == 0 {
                0
            } else {
                u32::from(p.abs_diff(q))
            }
        })
        .sum()
}

/// Four byte SADs of the sliding 32-bit windows of `windows` (bytes k..k+3) against
/// `reference`, each added to a 16-bit field of `accumulators` and kept to 16 bits
/// (V_QSAD_PK_U16_U8; V_MQSAD_PK_U16_U8 skips reference bytes that are 0).
fn quad_sad_u16(windows: u64, reference: u32, accumulators: u64, masked: bool) -> u64 {
    (0..4).fold(0u64, |out, k| {
        let window = (windows >> (8 * k)) as u32;
        let accumulator = ((accumulators >> (16 * k)) & 0xffff) as u32;
        let sum = sad_u8(window, reference, masked).wrapping_add(accumulator) & 0xffff;
        out | u64::from(sum) << (16 * k)
    })
}

impl Wave {
    /// The VOP3SD integer operations, which write a carry-out (or overflow) mask besides
    /// their lanes; `None` for other opcodes.
    pub(super) fn int_carry_op(
        &self,
        v: &ValuInst,
        op: Vop3sdOp,
        s: &Sources,
    ) -> Group<(Lanes, u32)> {
        use Vop3sdOp::*;
        let (a, b, c, exec) = (&s.a, &s.b, &s.c, s.exec);
        let result = match op {
            V_ADD_CO_U32 => carry_op(exec, a, b, 0, false, false, v.clamp),
            V_SUB_CO_U32 => carry_op(exec, a, b, 0, true, false, v.clamp),
            V_SUBREV_CO_U32 => carry_op(exec, b, a, 0, true, false, v.clamp),
            V_ADD_CO_CI_U32 => carry_op(
                exec,
                a,
                b,
                self.lane_mask_source(v, 2)?,
                false,
                true,
                v.clamp,
            ),
            V_SUB_CO_CI_U32 => carry_op(
                exec,
                a,
                b,
                self.lane_mask_source(v, 2)?,
                true,
                true,
                v.clamp,
            ),
            V_SUBREV_CO_CI_U32 => carry_op(
                exec,
                b,
                a,
                self.lane_mask_source(v, 2)?,
                true,
                true,
                v.clamp,
            ),
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
                                if v.clamp {
                                    out[lane] = u64::MAX;
                                }
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
                        let product =
                            i128::from(a[lane] as u32 as i32) * i128::from(b[lane] as u32 as i32);
                        let sum = product + i128::from(c[lane] as i64);
                        out[lane] = sum as u64;
                        if sum > i128::from(i64::MAX) || sum < i128::from(i64::MIN) {
                            carry |= 1 << lane;
                            if v.clamp {
                                out[lane] = sum.clamp(i64::MIN.into(), i64::MAX.into()) as u64;
                            }
                        }
                    }
                }
                (out, carry)
            }
            _ => return Ok(None),
        };
        Ok(Some(result))
    }

    /// The integer and bit operations of [`Wave::valu_compute`]; `None` for other opcodes.
    pub(super) fn int_op(&self, v: &ValuInst, op: Vop3Op, s: &Sources) -> Group<Lanes> {
        use Vop3Op::*;
        let (a, b, c, exec) = (&s.a, &s.b, &s.c, s.exec);
        let clamp = v.clamp;
        match op {
            // 32-bit integer arithmetic and logic.
            // Integer clamp saturates to the destination type's range.
            V_ADD_NC_U32_E64 => vector(map2(exec, a, b, |x, y| {
                int_result(u32w(x) + u32w(y), 32, false, clamp)
            })),
            V_SUB_NC_U32_E64 => vector(map2(exec, a, b, |x, y| {
                int_result(u32w(x) - u32w(y), 32, false, clamp)
            })),
            V_SUBREV_NC_U32_E64 => vector(map2(exec, a, b, |x, y| {
                int_result(u32w(y) - u32w(x), 32, false, clamp)
            })),
            V_ADD_NC_I32 => vector(map2(exec, a, b, |x, y| {
                int_result(i32w(x) + i32w(y), 32, true, clamp)
            })),
            V_SUB_NC_I32 => vector(map2(exec, a, b, |x, y| {
                int_result(i32w(x) - i32w(y), 32, true, clamp)
            })),
            V_ADD3_U32 => vector(map3(exec, a, b, c, |x, y, z| {
                int_result(u32w(x) + u32w(y) + u32w(z), 32, false, clamp)
            })),
            V_XAD_U32 => vector(map3(exec, a, b, c, |x, y, z| {
                int_result(u32w(x ^ y) + u32w(z), 32, false, clamp)
            })),
            V_MAD_U16 => vector(map3(exec, a, b, c, |x, y, z| {
                int_result(u16w(x) * u16w(y) + u16w(z), 16, false, clamp)
            })),
            V_MAD_I16 => vector(map3(exec, a, b, c, |x, y, z| {
                int_result(i16w(x) * i16w(y) + i16w(z), 16, true, clamp)
            })),
            V_MAD_U32_U16 => vector(map3(exec, a, b, c, |x, y, z| {
                int_result(u16w(x) * u16w(y) + u32w(z), 32, false, clamp)
            })),
            V_MAD_I32_I16 => vector(map3(exec, a, b, c, |x, y, z| {
                int_result(i16w(x) * i16w(y) + i32w(z), 32, true, clamp)
            })),
            V_ADD_NC_I16 => vector(map2(exec, a, b, |x, y| {
                int_result(i16w(x) + i16w(y), 16, true, clamp)
            })),
            V_SUB_NC_I16 => vector(map2(exec, a, b, |x, y| {
                int_result(i16w(x) - i16w(y), 16, true, clamp)
            })),
            V_MUL_LO_U32 => vector(map2(exec, a, b, |x, y| {
                u64::from(lo(x).wrapping_mul(lo(y)))
            })),
            V_MUL_HI_U32 => vector(map2(exec, a, b, |x, y| {
                ((x & 0xffff_ffff) * (y & 0xffff_ffff)) >> 32
            })),
            V_MUL_HI_I32 => vector(map2(exec, a, b, |x, y| {
                u64::from(((i64::from(lo(x) as i32) * i64::from(lo(y) as i32)) >> 32) as u32)
            })),
            V_MUL_U32_U24_E64 => vector(map2(exec, a, b, |x, y| {
                ((x & 0xff_ffff) * (y & 0xff_ffff)) & 0xffff_ffff
            })),
            V_MUL_HI_U32_U24_E64 => vector(map2(exec, a, b, |x, y| {
                ((x & 0xff_ffff) * (y & 0xff_ffff)) >> 32
            })),
            V_MUL_I32_I24_E64 => vector(map2(exec, a, b, |x, y| {
                u64::from((sext24(x) * sext24(y)) as u32)
            })),
            V_MUL_HI_I32_I24_E64 => vector(map2(exec, a, b, |x, y| {
                u64::from(((sext24(x) * sext24(y)) >> 32) as u32)
            })),
            V_MAD_U32_U24 => vector(map3(exec, a, b, c, |x, y, z| {
                let product = i128::from((x & 0xff_ffff) * (y & 0xff_ffff));
                int_result(product + u32w(z), 32, false, clamp)
            })),
            V_MAD_I32_I24 => vector(map3(exec, a, b, c, |x, y, z| {
                let product = i128::from(sext24(x) * sext24(y));
                int_result(product + i32w(z), 32, true, clamp)
            })),
            V_MIN_I32_E64 => vector(map2(exec, a, b, |x, y| {
                u64::from((lo(x) as i32).min(lo(y) as i32) as u32)
            })),
            V_MAX_I32_E64 => vector(map2(exec, a, b, |x, y| {
                u64::from((lo(x) as i32).max(lo(y) as i32) as u32)
            })),
            V_MIN_U32_E64 => vector(map2(exec, a, b, |x, y| x.min(y))),
            V_MAX_U32_E64 => vector(map2(exec, a, b, |x, y| x.max(y))),
            V_MIN3_I32 => vector(map3(exec, a, b, c, |x, y, z| {
                u64::from((lo(x) as i32).min(lo(y) as i32).min(lo(z) as i32) as u32)
            })),
            V_MAX3_I32 => vector(map3(exec, a, b, c, |x, y, z| {
                u64::from((lo(x) as i32).max(lo(y) as i32).max(lo(z) as i32) as u32)
            })),
            V_MIN3_U32 => vector(map3(exec, a, b, c, |x, y, z| x.min(y).min(z))),
            V_MAX3_U32 => vector(map3(exec, a, b, c, |x, y, z| x.max(y).max(z))),
            V_MED3_I32 => vector(map3(exec, a, b, c, |x, y, z| {
                let (x, y, z) = (lo(x) as i32, lo(y) as i32, lo(z) as i32);
                u64::from(x.min(y).max(x.max(y).min(z)) as u32)
            })),
            V_MED3_U32 => vector(map3(exec, a, b, c, |x, y, z| x.min(y).max(x.max(y).min(z)))),
            V_AND_B32_E64 => vector(map2(exec, a, b, |x, y| x & y)),
            V_OR_B32_E64 => vector(map2(exec, a, b, |x, y| x | y)),
            V_XOR_B32_E64 => vector(map2(exec, a, b, |x, y| x ^ y)),
            V_XNOR_B32_E64 => vector(map2(exec, a, b, |x, y| !(x ^ y) & 0xffff_ffff)),
            V_NOT_B32_E64 => vector(map1(exec, a, |x| !x & 0xffff_ffff)),
            V_AND_OR_B32 => vector(map3(exec, a, b, c, |x, y, z| (x & y) | z)),
            V_OR3_B32 => vector(map3(exec, a, b, c, |x, y, z| x | y | z)),
            V_XOR3_B32 => vector(map3(exec, a, b, c, |x, y, z| x ^ y ^ z)),
            V_LSHLREV_B32_E64 => vector(map2(exec, a, b, |x, y| u64::from(lo(y) << (x & 31)))),
            V_LSHRREV_B32_E64 => vector(map2(exec, a, b, |x, y| u64::from(lo(y) >> (x & 31)))),
            V_ASHRREV_I32_E64 => vector(map2(exec, a, b, |x, y| {
                u64::from(((lo(y) as i32) >> (x & 31)) as u32)
            })),
            V_LSHL_ADD_U32 => vector(map3(exec, a, b, c, |x, y, z| {
                u64::from((lo(x) << (y & 31)).wrapping_add(lo(z)))
            })),
            V_ADD_LSHL_U32 => vector(map3(exec, a, b, c, |x, y, z| {
                u64::from(lo(x).wrapping_add(lo(y)) << (z & 31))
            })),
            V_LSHL_OR_B32 => vector(map3(exec, a, b, c, |x, y, z| {
                u64::from((lo(x) << (y & 31)) | lo(z))
            })),
            V_BFE_U32 => vector(map3(exec, a, b, c, |x, y, z| {
                u64::from(bfe_u32(lo(x), lo(y), lo(z)))
            })),
            V_BFE_I32 => vector(map3(exec, a, b, c, |x, y, z| {
                u64::from(bfe_i32(lo(x), lo(y), lo(z)))
            })),
            V_BFI_B32 => vector(map3(exec, a, b, c, |x, y, z| {
                (x & y) | (!x & z & 0xffff_ffff)
            })),
            V_BFM_B32 => vector(map2(exec, a, b, |x, y| {
                u64::from((((1u64 << (x & 31)) - 1) as u32) << (y & 31))
            })),
            V_ALIGNBIT_B32 => vector(map3(exec, a, b, c, |x, y, z| {
                ((((x & 0xffff_ffff) << 32) | (y & 0xffff_ffff)) >> (z & 31)) & 0xffff_ffff
            })),
            V_ALIGNBYTE_B32 => vector(map3(exec, a, b, c, |x, y, z| {
                ((((x & 0xffff_ffff) << 32) | (y & 0xffff_ffff)) >> (8 * (z & 3))) & 0xffff_ffff
            })),
            V_PERM_B32 => vector(map3(exec, a, b, c, |x, y, z| {
                let pool = ((x & 0xffff_ffff) << 32) | (y & 0xffff_ffff);
                let sel = lo(z);
                let mut r = 0u32;
                for byte in 0..4 {
                    r |= perm_byte(pool, (sel >> (8 * byte)) & 0xff) << (8 * byte);
                }
                u64::from(r)
            })),
            V_BFREV_B32_E64 => vector(map1(exec, a, |x| u64::from(lo(x).reverse_bits()))),
            V_BCNT_U32_B32 => vector(map2(exec, a, b, |x, y| {
                u64::from(lo(x).count_ones().wrapping_add(lo(y)))
            })),
            V_CLZ_I32_U32_E64 => vector(map1(exec, a, |x| {
                if lo(x) == 0 {
                    0xffff_ffff
                } else {
                    u64::from(lo(x).leading_zeros())
                }
            })),
            V_CTZ_I32_B32_E64 => vector(map1(exec, a, |x| {
                if lo(x) == 0 {
                    0xffff_ffff
                } else {
                    u64::from(lo(x).trailing_zeros())
                }
            })),
            V_CLS_I32_E64 => vector(map1(exec, a, |x| {
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
                        let below = (lo(a[lane]) & ((1u64 << lane) - 1) as u32).count_ones();
                        out[lane] = u64::from(below.wrapping_add(lo(b[lane])));
                    }
                }
                vector(out)
            }
            // Wave32: lanes 32..63 do not exist, so the high half counts nothing.
            V_MBCNT_HI_U32_B32 => vector(map2(exec, a, b, |_, y| y & 0xffff_ffff)),
            V_SAD_U32 => vector(map3(exec, a, b, c, |x, y, z| {
                u64::from(lo(x).abs_diff(lo(y)).wrapping_add(lo(z)))
            })),
            // 64-bit integer.
            V_LSHLREV_B64 => vector(map2(exec, a, b, |x, y| y << (x & 63))),
            V_LSHRREV_B64 => vector(map2(exec, a, b, |x, y| y >> (x & 63))),
            V_ASHRREV_I64 => vector(map2(exec, a, b, |x, y| ((y as i64) >> (x & 63)) as u64)),
            // 16-bit integer (low halves).
            V_ADD_NC_U16 => vector(map2(exec, a, b, |x, y| {
                int_result(u16w(x) + u16w(y), 16, false, clamp)
            })),
            V_SUB_NC_U16 => vector(map2(exec, a, b, |x, y| {
                int_result(u16w(x) - u16w(y), 16, false, clamp)
            })),
            V_MUL_LO_U16 => vector(map2(exec, a, b, |x, y| x.wrapping_mul(y) & 0xffff)),
            V_LSHLREV_B16 => vector(map2(exec, a, b, |x, y| (y << (x & 15)) & 0xffff)),
            V_LSHRREV_B16 => vector(map2(exec, a, b, |x, y| (y & 0xffff) >> (x & 15))),
            V_ASHRREV_I16 => vector(map2(exec, a, b, |x, y| {
                u64::from(((y as u16 as i16) >> (x & 15)) as u16)
            })),
            V_MAX_U16 => vector(map2(exec, a, b, |x, y| x.max(y))),
            V_MIN_U16 => vector(map2(exec, a, b, |x, y| x.min(y))),
            V_MAX_I16 => vector(map2(exec, a, b, |x, y| {
                u64::from((x as u16 as i16).max(y as u16 as i16) as u16)
            })),
            V_MIN_I16 => vector(map2(exec, a, b, |x, y| {
                u64::from((x as u16 as i16).min(y as u16 as i16) as u16)
            })),
            // Three-operand min/max combinations.
            V_MAXMIN_I32 => vector(map3(exec, a, b, c, |x, y, z| {
                u64::from((lo(x) as i32).max(lo(y) as i32).min(lo(z) as i32) as u32)
            })),
            V_MINMAX_I32 => vector(map3(exec, a, b, c, |x, y, z| {
                u64::from((lo(x) as i32).min(lo(y) as i32).max(lo(z) as i32) as u32)
            })),
            V_MAXMIN_U32 => vector(map3(exec, a, b, c, |x, y, z| {
                u64::from(lo(x).max(lo(y)).min(lo(z)))
            })),
            V_MINMAX_U32 => vector(map3(exec, a, b, c, |x, y, z| {
                u64::from(lo(x).min(lo(y)).max(lo(z)))
            })),
            V_MAX3_I16 => vector(map3(exec, a, b, c, |x, y, z| {
                i16w(x).max(i16w(y)).max(i16w(z)) as u64 & 0xffff
            })),
            V_MIN3_I16 => vector(map3(exec, a, b, c, |x, y, z| {
                i16w(x).min(i16w(y)).min(i16w(z)) as u64 & 0xffff
            })),
            V_MED3_I16 => vector(map3(exec, a, b, c, |x, y, z| {
                let (x, y, z) = (i16w(x), i16w(y), i16w(z));
                x.min(y).max(x.max(y).min(z)) as u64 & 0xffff
            })),
            V_MAX3_U16 => vector(map3(exec, a, b, c, |x, y, z| x.max(y).max(z))),
            V_MIN3_U16 => vector(map3(exec, a, b, c, |x, y, z| x.min(y).min(z))),
            V_MED3_U16 => vector(map3(exec, a, b, c, |x, y, z| x.min(y).max(x.max(y).min(z)))),
            V_AND_B16 => vector(map2(exec, a, b, |x, y| x & y & 0xffff)),
            V_OR_B16 => vector(map2(exec, a, b, |x, y| (x | y) & 0xffff)),
            V_XOR_B16 => vector(map2(exec, a, b, |x, y| (x ^ y) & 0xffff)),
            V_NOT_B16_E64 => vector(map1(exec, a, |x| !x & 0xffff)),
            V_QSAD_PK_U16_U8 | V_MQSAD_PK_U16_U8 => {
                let masked = op == V_MQSAD_PK_U16_U8;
                vector(map3(exec, a, b, c, |x, y, z| {
                    quad_sad_u16(x, lo(y), z, masked)
                }))
            }
            // Byte and 16-bit sums of absolute differences, byte lerp.
            V_SAD_U8 => vector(map3(exec, a, b, c, |x, y, z| {
                u64::from(sad_u8(lo(x), lo(y), false).wrapping_add(lo(z)))
            })),
            V_MSAD_U8 => vector(map3(exec, a, b, c, |x, y, z| {
                u64::from(sad_u8(lo(x), lo(y), true).wrapping_add(lo(z)))
            })),
            V_SAD_HI_U8 => vector(map3(exec, a, b, c, |x, y, z| {
                u64::from((sad_u8(lo(x), lo(y), false) << 16).wrapping_add(lo(z)))
            })),
            V_SAD_U16 => vector(map3(exec, a, b, c, |x, y, z| {
                let (x, y) = (lo(x), lo(y));
                let low = (x as u16).abs_diff(y as u16);
                let high = ((x >> 16) as u16).abs_diff((y >> 16) as u16);
                u64::from(
                    lo(z)
                        .wrapping_add(u32::from(low))
                        .wrapping_add(u32::from(high)),
                )
            })),
            V_LERP_U8 => vector(map3(exec, a, b, c, |x, y, z| {
                let mut result = 0u64;
                for byte in 0..4 {
                    let shift = byte * 8;
                    let sum = ((x >> shift) & 0xff) + ((y >> shift) & 0xff) + ((z >> shift) & 1);
                    result |= (sum >> 1) << shift;
                }
                result
            })),
            _ => Ok(None),
        }
    }

    /// V_MQSAD_U32_U8: four masked byte SADs of sliding 32-bit windows of S0 against S1,
    /// each accumulated onto one dword of the 128-bit S2 (always VGPRs).
    pub(super) fn mqsad_u32_u8(&mut self, v: &ValuInst) -> Result<Flow, FaultKind> {
        let exec = self.exec();
        let (windows, _) = self.fetch(v, 0)?;
        let (reference, _) = self.fetch(v, 1)?;
        let accumulators = self.vgpr_range(v.src[2], 4)?.start;
        let dst = self.vgpr_range(v.dst, 4)?.start;
        let mut out = [[0u32; WAVE_SIZE]; 4];
        for lane in 0..WAVE_SIZE {
            for (k, dword) in out.iter_mut().enumerate() {
                let window = (windows[lane] >> (8 * k)) as u32;
                let sum = sad_u8(window, reference[lane] as u32, true);
                dword[lane] = sum.wrapping_add(self.vgpr[accumulators + k][lane]);
            }
        }
        // All four dwords are computed before any is written: the destination may overlap
        // the accumulators.
        for (k, dword) in out.iter().enumerate() {
            for (lane, value) in dword.iter().enumerate() {
                if exec >> lane & 1 != 0 {
                    self.vgpr[dst + k][lane] = *value;
                }
            }
        }
        Ok(Flow::Next)
    }
}
