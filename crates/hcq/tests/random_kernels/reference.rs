//! The host's evaluation of a random kernel for one lane, with the C/HIP semantics of the
//! generated source: wrapping integer arithmetic, IEEE-754 binary32/binary64 with round to
//! nearest even and no contraction, and the GPU's IEEE-mode min/max.

use crate::program::{
    int_range_of_float, type_mask, BoolBinary, Compare, FloatBinary, FloatClass, FloatUnary,
    IntBinary, IntUnary, Kernel, LoopStep, Op, Source, Stmt, Ty, ValueId,
};
use std::ops::{Add, Div, Mul, Neg, Sub};

#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Val {
    Bool(bool),
    /// Raw bits of an integer, zero-extended from its width.
    Int(u64),
    F32(f32),
    F64(f64),
}

impl Val {
    /// The bits the kernel stores in an output slot for this value.
    pub fn output_bits(self) -> u64 {
        match self {
            Val::Bool(b) => u64::from(b),
            Val::Int(bits) => bits,
            Val::F32(f) => u64::from(f.to_bits()),
            Val::F64(f) => f.to_bits(),
        }
    }

    fn int(self) -> u64 {
        match self {
            Val::Int(bits) => bits,
            other => panic!("generator bug: {other:?} where an integer was expected"),
        }
    }

    fn bool(self) -> bool {
        match self {
            Val::Bool(b) => b,
            other => panic!("generator bug: {other:?} where a bool was expected"),
        }
    }
}

/// What one lane reads.
pub struct Lane<'a> {
    pub words: &'a [u64],
    pub uniforms: &'a [u64],
    pub global_id: u32,
    pub local_id: u32,
    pub group_id: u32,
}

/// Every value of `kernel` in `lane` (None for values of blocks that did not run).
pub fn evaluate(kernel: &Kernel, lane: &Lane<'_>) -> Vec<Option<Val>> {
    let mut values = vec![None; kernel.types.len()];
    run_block(kernel, &kernel.body, lane, &mut values);
    values
}

fn run_block(kernel: &Kernel, body: &[Stmt], lane: &Lane<'_>, values: &mut [Option<Val>]) {
    for stmt in body {
        let ty = kernel.types[stmt.id];
        let get = |values: &[Option<Val>], id: ValueId| {
            values[id].unwrap_or_else(|| panic!("generator bug: v{id} read before it is set"))
        };
        let value = match &stmt.op {
            Op::If {
                cond,
                then_body,
                then_value,
                else_body,
                else_value,
            } => {
                if get(values, *cond).bool() {
                    run_block(kernel, then_body, lane, values);
                    get(values, *then_value)
                } else {
                    run_block(kernel, else_body, lane, values);
                    get(values, *else_value)
                }
            }
            Op::Loop {
                count,
                init,
                step,
                operand,
            } => {
                let trips = get(values, *count).int() & 7;
                let x = get(values, *operand);
                let mut acc = get(values, *init);
                for _ in 0..trips {
                    acc = match *step {
                        LoopStep::Int(op) => Val::Int(int_binary(op, ty, acc.int(), x.int())),
                        LoopStep::Float(op) => float_binary(op, acc, x),
                    };
                }
                acc
            }
            op => {
                let operand_values: Vec<Val> = crate::program::operands(op)
                    .into_iter()
                    .map(|id| get(values, id))
                    .collect();
                let operand_types: Vec<Ty> = crate::program::operands(op)
                    .into_iter()
                    .map(|id| kernel.types[id])
                    .collect();
                expression(op, ty, &operand_values, &operand_types, lane)
            }
        };
        values[stmt.id] = Some(value);
    }
}

fn expression(op: &Op, ty: Ty, args: &[Val], arg_types: &[Ty], lane: &Lane<'_>) -> Val {
    match op {
        Op::Read(source) => {
            let raw = match *source {
                Source::InputWord(w) => lane.words[w],
                Source::Uniform(p) => lane.uniforms[p],
                Source::GlobalId => u64::from(lane.global_id),
                Source::LocalId => u64::from(lane.local_id),
                Source::GroupId => u64::from(lane.group_id),
            };
            match (ty, source) {
                (Ty::F32, Source::InputWord(_) | Source::Uniform(_)) => {
                    Val::F32(f32::from_bits(raw as u32))
                }
                (Ty::F64, Source::InputWord(_) | Source::Uniform(_)) => {
                    Val::F64(f64::from_bits(raw))
                }
                // The thread ids are u32 values converted like any u32.
                _ => cast(Val::Int(raw), Ty::U32, ty),
            }
        }
        Op::Const(bits) => match ty {
            Ty::F32 => Val::F32(f32::from_bits(*bits as u32)),
            Ty::F64 => Val::F64(f64::from_bits(*bits)),
            _ => Val::Int(*bits),
        },
        Op::IntUnary(op, _) => Val::Int(int_unary(*op, ty, args[0].int())),
        Op::IntBinary(op, _, _) => Val::Int(int_binary(*op, ty, args[0].int(), args[1].int())),
        Op::FloatUnary(op, _) => match args[0] {
            Val::F32(a) => Val::F32(float_unary(*op, a)),
            Val::F64(a) => Val::F64(float_unary(*op, a)),
            other => panic!("generator bug: float op on {other:?}"),
        },
        Op::FloatBinary(op, _, _) => float_binary(*op, args[0], args[1]),
        Op::Fma(..) => match (args[0], args[1], args[2]) {
            (Val::F32(a), Val::F32(b), Val::F32(c)) => Val::F32(a.mul_add(b, c)),
            (Val::F64(a), Val::F64(b), Val::F64(c)) => Val::F64(a.mul_add(b, c)),
            other => panic!("generator bug: fma on {other:?}"),
        },
        Op::Ldexp(..) => {
            let exponent = (args[1].int() & 511) as i32 - 256;
            // 2^exponent is a normal number of both formats here, so one multiplication
            // rounds once: f32 through f64, where the product is exact.
            let scale = 2f64.powi(exponent);
            match args[0] {
                Val::F32(a) => Val::F32((f64::from(a) * scale) as f32),
                Val::F64(a) => Val::F64(a * scale),
                other => panic!("generator bug: ldexp of {other:?}"),
            }
        }
        Op::Classify(class, _) => {
            let (nan, infinite) = match args[0] {
                Val::F32(a) => (a.is_nan(), a.is_infinite()),
                Val::F64(a) => (a.is_nan(), a.is_infinite()),
                other => panic!("generator bug: classifying {other:?}"),
            };
            Val::Bool(match class {
                FloatClass::Nan => nan,
                FloatClass::Infinite => infinite,
                FloatClass::Finite => !nan && !infinite,
            })
        }
        Op::Not(_) => Val::Bool(!args[0].bool()),
        Op::BoolBinary(op, _, _) => {
            let (a, b) = (args[0].bool(), args[1].bool());
            Val::Bool(match op {
                BoolBinary::And => a & b,
                BoolBinary::Or => a | b,
                BoolBinary::Xor => a ^ b,
            })
        }
        Op::Compare(op, _, _) => Val::Bool(compare(*op, arg_types[0], args[0], args[1])),
        Op::Select(..) => {
            if args[0].bool() {
                args[1]
            } else {
                args[2]
            }
        }
        Op::Cast(_) => cast(args[0], arg_types[0], ty),
        Op::If { .. } | Op::Loop { .. } => unreachable!("handled by run_block"),
    }
}

/// A 32- or 64-bit integer's bits as a signed value.
fn signed(ty: Ty, bits: u64) -> i64 {
    if ty.bits() == 32 {
        i64::from(bits as u32 as i32)
    } else {
        bits as i64
    }
}

fn int_unary(op: IntUnary, ty: Ty, a: u64) -> u64 {
    let width = ty.bits();
    let mask = type_mask(ty);
    let result = match op {
        IntUnary::Neg => a.wrapping_neg(),
        IntUnary::Not => !a,
        IntUnary::Abs if ty.is_signed() && signed(ty, a) < 0 => a.wrapping_neg(),
        IntUnary::Abs => a,
        IntUnary::Popcount => u64::from(a.count_ones()),
        IntUnary::LeadingZeros if a == 0 => u64::from(width),
        IntUnary::LeadingZeros => u64::from(a.leading_zeros() - (64 - width)),
        IntUnary::TrailingZeros if a == 0 => u64::from(width),
        IntUnary::TrailingZeros => u64::from(a.trailing_zeros()),
        IntUnary::BitReverse => a.reverse_bits() >> (64 - width),
        IntUnary::ByteSwap if width == 32 => u64::from((a as u32).swap_bytes()),
        IntUnary::ByteSwap => a.swap_bytes(),
        IntUnary::ExtractBits { offset, width } => (a >> offset) & ((1u64 << width) - 1),
        IntUnary::SignExtendFrom { width: field } => {
            let shift = width - field;
            let shifted = (a << shift) & mask;
            (signed(ty, shifted) >> shift) as u64
        }
        IntUnary::Narrow { bits, signed } => {
            let low = a & ((1u64 << bits) - 1);
            if signed && low >> (bits - 1) != 0 {
                low | !((1u64 << bits) - 1)
            } else {
                low
            }
        }
    };
    result & mask
}

fn int_binary(op: IntBinary, ty: Ty, a: u64, b: u64) -> u64 {
    let width = ty.bits();
    let mask = type_mask(ty);
    let (sa, sb) = (signed(ty, a), signed(ty, b));
    let less = if ty.is_signed() { sa < sb } else { a < b };
    let result = match op {
        IntBinary::Add => a.wrapping_add(b),
        IntBinary::Sub => a.wrapping_sub(b),
        IntBinary::Mul => a.wrapping_mul(b),
        IntBinary::MulHigh => match ty {
            Ty::U32 => (a * b) >> 32,
            Ty::I32 => ((sa * sb) >> 32) as u64,
            Ty::U64 => ((u128::from(a) * u128::from(b)) >> 64) as u64,
            _ => ((i128::from(sa) * i128::from(sb)) >> 64) as u64,
        },
        IntBinary::And => a & b,
        IntBinary::Or => a | b,
        IntBinary::Xor => a ^ b,
        IntBinary::ShiftLeft => a << (b & u64::from(width - 1)),
        IntBinary::ShiftRight if ty.is_signed() => (sa >> (b & u64::from(width - 1))) as u64,
        IntBinary::ShiftRight => a >> (b & u64::from(width - 1)),
        IntBinary::RotateLeft if width == 32 => u64::from((a as u32).rotate_left((b % 32) as u32)),
        IntBinary::RotateLeft => a.rotate_left((b % 64) as u32),
        IntBinary::Div | IntBinary::Rem => {
            let min = if width == 32 {
                i64::from(i32::MIN)
            } else {
                i64::MIN
            };
            let div = matches!(op, IntBinary::Div);
            if b == 0 || (ty.is_signed() && sa == min && sb == -1) {
                a
            } else if ty.is_signed() {
                (if div { sa / sb } else { sa % sb }) as u64
            } else if div {
                a / b
            } else {
                a % b
            }
        }
        IntBinary::DivByOdd => a / (b | 1),
        IntBinary::Min if less => a,
        IntBinary::Min => b,
        IntBinary::Max if less => b,
        IntBinary::Max => a,
    };
    result & mask
}

fn compare(op: Compare, ty: Ty, a: Val, b: Val) -> bool {
    use std::cmp::Ordering;
    let ordering = match (a, b) {
        (Val::Int(x), Val::Int(y)) if ty.is_signed() => Some(signed(ty, x).cmp(&signed(ty, y))),
        (Val::Int(x), Val::Int(y)) => Some(x.cmp(&y)),
        (Val::F32(x), Val::F32(y)) => x.partial_cmp(&y),
        (Val::F64(x), Val::F64(y)) => x.partial_cmp(&y),
        (Val::Bool(x), Val::Bool(y)) => Some(x.cmp(&y)),
        other => panic!("generator bug: comparing {other:?}"),
    };
    // An unordered comparison (a NaN operand) is false, except `!=`.
    let Some(ordering) = ordering else {
        return matches!(op, Compare::Ne);
    };
    match op {
        Compare::Lt => ordering == Ordering::Less,
        Compare::Le => ordering != Ordering::Greater,
        Compare::Gt => ordering == Ordering::Greater,
        Compare::Ge => ordering != Ordering::Less,
        Compare::Eq => ordering == Ordering::Equal,
        Compare::Ne => ordering != Ordering::Equal,
    }
}

/// C conversion of `value` (of type `from`) to type `to`, including the generated source's
/// range guard on float-to-integer conversions (out of range or NaN gives 0).
fn cast(value: Val, from: Ty, to: Ty) -> Val {
    match value {
        Val::Bool(b) => match to {
            Ty::F32 => Val::F32(f32::from(u8::from(b))),
            Ty::F64 => Val::F64(f64::from(u8::from(b))),
            Ty::Bool => Val::Bool(b),
            _ => Val::Int(u64::from(b)),
        },
        Val::Int(bits) => {
            let wide = if from.is_signed() {
                signed(from, bits)
            } else {
                bits as i64
            };
            match to {
                Ty::F32 if from.is_signed() => Val::F32(wide as f32),
                Ty::F32 => Val::F32(bits as f32),
                Ty::F64 if from.is_signed() => Val::F64(wide as f64),
                Ty::F64 => Val::F64(bits as f64),
                Ty::Bool => Val::Bool(bits != 0),
                _ => Val::Int(wide as u64 & type_mask(to)),
            }
        }
        Val::F32(f) => float_cast(f64::from(f), to),
        Val::F64(f) => float_cast(f, to),
    }
}

/// Conversion of a float (widened exactly to f64) to type `to`.
fn float_cast(x: f64, to: Ty) -> Val {
    match to {
        Ty::F32 => Val::F32(x as f32),
        Ty::F64 => Val::F64(x),
        Ty::Bool => Val::Bool(x != 0.0),
        _ => {
            let (lo, hi) = int_range_of_float(to);
            let in_range = if to.is_signed() { x >= lo } else { x > lo } && x < hi;
            if !in_range {
                Val::Int(0)
            } else if to.is_signed() {
                Val::Int(x as i64 as u64 & type_mask(to))
            } else {
                Val::Int(x as u64 & type_mask(to))
            }
        }
    }
}

/// The float operations of one IEEE format.
trait Float:
    Copy
    + PartialOrd
    + Add<Output = Self>
    + Sub<Output = Self>
    + Mul<Output = Self>
    + Div<Output = Self>
    + Neg<Output = Self>
{
    const ZERO: Self;
    fn nan(self) -> bool;
    fn negative(self) -> bool;
    fn magnitude(self) -> Self;
    fn square_root(self) -> Self;
    fn round_down(self) -> Self;
    fn round_up(self) -> Self;
    fn round_to_zero(self) -> Self;
    fn round_to_even(self) -> Self;
    fn with_sign_of(self, sign: Self) -> Self;
}

macro_rules! impl_float {
    ($t:ty) => {
        impl Float for $t {
            const ZERO: Self = 0.0;
            fn nan(self) -> bool {
                self.is_nan()
            }
            fn negative(self) -> bool {
                self.is_sign_negative()
            }
            fn magnitude(self) -> Self {
                self.abs()
            }
            fn square_root(self) -> Self {
                self.sqrt()
            }
            fn round_down(self) -> Self {
                self.floor()
            }
            fn round_up(self) -> Self {
                self.ceil()
            }
            fn round_to_zero(self) -> Self {
                self.trunc()
            }
            fn round_to_even(self) -> Self {
                self.round_ties_even()
            }
            fn with_sign_of(self, sign: Self) -> Self {
                self.copysign(sign)
            }
        }
    };
}

impl_float!(f32);
impl_float!(f64);

fn float_unary<F: Float>(op: FloatUnary, a: F) -> F {
    match op {
        FloatUnary::Neg => -a,
        FloatUnary::Abs => a.magnitude(),
        FloatUnary::Sqrt => a.square_root(),
        FloatUnary::Floor => a.round_down(),
        FloatUnary::Ceil => a.round_up(),
        FloatUnary::Trunc => a.round_to_zero(),
        FloatUnary::Rint => a.round_to_even(),
    }
}

fn float_binary(op: FloatBinary, a: Val, b: Val) -> Val {
    match (a, b) {
        (Val::F32(a), Val::F32(b)) => Val::F32(float_binary_of(op, a, b)),
        (Val::F64(a), Val::F64(b)) => Val::F64(float_binary_of(op, a, b)),
        other => panic!("generator bug: float op on {other:?}"),
    }
}

fn float_binary_of<F: Float>(op: FloatBinary, a: F, b: F) -> F {
    match op {
        FloatBinary::Add => a + b,
        FloatBinary::Sub => a - b,
        FloatBinary::Mul => a * b,
        FloatBinary::Div if b == F::ZERO => a / F::ZERO,
        FloatBinary::Div => a / b,
        FloatBinary::Min => ieee_min(a, b),
        FloatBinary::Max => ieee_max(a, b),
        FloatBinary::CopySign if b.nan() || b == F::ZERO => a.magnitude(),
        FloatBinary::CopySign => a.with_sign_of(b),
    }
}

/// fmin as the GPU computes it (v_min in IEEE mode): a NaN operand yields the other operand,
/// and -0 is less than +0.
fn ieee_min<F: Float>(a: F, b: F) -> F {
    if b.nan() {
        a
    } else if a.nan() {
        b
    } else if a < b || (a == F::ZERO && b == F::ZERO && a.negative()) {
        a
    } else {
        b
    }
}

/// fmax as the GPU computes it: as [`ieee_min`], with +0 greater than -0.
fn ieee_max<F: Float>(a: F, b: F) -> F {
    if b.nan() {
        a
    } else if a.nan() {
        b
    } else if a > b || (a == F::ZERO && b == F::ZERO && !a.negative()) {
        a
    } else {
        b
    }
}
