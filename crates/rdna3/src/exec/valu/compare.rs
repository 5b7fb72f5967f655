//! VOPC compares and class tests over the active lanes. They produce a lane mask (for VCC,
//! an SGPR pair or EXEC) instead of lane values, and have their own NaN-aware conditions,
//! so they are computed apart from the operation groups.

use super::{d, f, h, lo, Lanes};
use crate::decode::{CompareCondition, CompareType};
use crate::exec::float::{class_bit_f64, f16_to_f32};
use crate::exec::WAVE_SIZE;

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

/// Evaluates a compare over the lanes in `exec`; inactive lanes produce 0.
// The negated float comparisons are the ISA's NaN-aware "not less than" etc.
#[allow(
    clippy::neg_cmp_op_on_partial_ord,
    clippy::nonminimal_bool,
    clippy::double_comparisons
)]
pub(super) fn compare_lanes(
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
