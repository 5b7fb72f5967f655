//! Random kernels: the expression program, its generator and its HIP source.
//!
//! A kernel is a list of single-assignment statements `T vN = op(earlier values);`, some of
//! which hold an `if`/`else` or a counted loop. Every construct is written so that C/HIP gives
//! it one defined result: signed arithmetic goes through the unsigned type, shift amounts are
//! masked, divisions are guarded, float-to-integer casts are range-checked, and floating-point
//! contraction is switched off so `a * b + c` stays two roundings.

/// Lanes a kernel runs on: two workgroups of two waves each.
pub const LANES: usize = 128;
/// Work-items per workgroup (the kernels compute their global id from it).
pub const LOCAL_SIZE: u32 = 64;
/// Input words per lane: 0..4 integers, 4..6 f32 bit patterns, 6..8 f64 bit patterns.
pub const WORDS_PER_LANE: usize = 8;
/// Uniform kernel arguments: p0, p1 integers, p2 an f32 bit pattern, p3 an f64 bit pattern.
pub const UNIFORMS: usize = 4;
/// Output slots per lane.
pub const MAX_OUTPUTS: usize = 16;

const INT_WORDS: [usize; 4] = [0, 1, 2, 3];
const F32_WORDS: [usize; 2] = [4, 5];
const F64_WORDS: [usize; 2] = [6, 7];

/// splitmix64: small, fast, and the same sequence everywhere.
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(seed)
    }

    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// Uniform in `0..n` (n > 0).
    pub fn below(&mut self, n: usize) -> usize {
        (self.next_u64() % n as u64) as usize
    }

    /// Uniform in `lo..=hi`.
    pub fn range(&mut self, lo: i64, hi: i64) -> i64 {
        lo + (self.next_u64() % ((hi - lo) as u64 + 1)) as i64
    }

    /// True with probability `percent`/100.
    pub fn percent(&mut self, percent: u64) -> bool {
        self.next_u64() % 100 < percent
    }

    pub fn pick<T: Copy>(&mut self, items: &[T]) -> T {
        items[self.below(items.len())]
    }

    /// An index into `weights`, chosen with probability proportional to its weight.
    pub fn weighted(&mut self, weights: &[u32]) -> usize {
        let total: u32 = weights.iter().sum();
        let mut r = (self.next_u64() % u64::from(total)) as u32;
        for (i, &w) in weights.iter().enumerate() {
            if r < w {
                return i;
            }
            r -= w;
        }
        weights.len() - 1
    }

    /// A 64-bit integer that is often small, negative, extreme or repeated in shape.
    pub fn int_word(&mut self) -> u64 {
        match self.below(6) {
            0 => self.range(0, 20) as u64,
            1 => self.range(-20, -1) as u64,
            2 => self.pick(&[
                0,
                1,
                0x7fff_ffff,
                0x8000_0000,
                0xffff_ffff,
                0x1_0000_0000,
                i64::MAX as u64,
                i64::MIN as u64,
                u64::MAX,
                0xffff_ffff_0000_0000,
                0x8000_0000_8000_0000,
            ]),
            3 => {
                let magnitude = self.next_u64() >> self.range(0, 63);
                if self.percent(50) {
                    magnitude.wrapping_neg()
                } else {
                    magnitude
                }
            }
            _ => self.next_u64(),
        }
    }

    /// An f32 (never NaN): special values, small integers, moderate and wide magnitudes.
    pub fn f32_value(&mut self) -> f32 {
        let sign = if self.percent(50) { -1.0 } else { 1.0 };
        match self.below(5) {
            0 => self.pick(&[
                0.0,
                -0.0,
                1.0,
                -1.0,
                0.5,
                3.0,
                -7.5,
                f32::INFINITY,
                f32::NEG_INFINITY,
                f32::MIN_POSITIVE,
                1.0e-45,
                -1.0e-40,
                f32::MAX,
                16_777_216.0,
                2_147_483_648.0,
                -2_147_483_648.0,
                4_294_967_296.0,
                1.0e20,
                2.5,
                -0.5,
            ]),
            1 => self.range(-50, 50) as f32,
            2 | 3 => sign * self.scaled(-8, 8) as f32,
            _ => sign * self.scaled(-149, 127) as f32,
        }
    }

    /// An f64 (never NaN), like [`Rng::f32_value`].
    pub fn f64_value(&mut self) -> f64 {
        let sign = if self.percent(50) { -1.0 } else { 1.0 };
        match self.below(5) {
            0 => self.pick(&[
                0.0,
                -0.0,
                1.0,
                -1.0,
                0.5,
                3.0,
                -7.5,
                f64::INFINITY,
                f64::NEG_INFINITY,
                f64::MIN_POSITIVE,
                5e-324,
                -1e-310,
                f64::MAX,
                9_007_199_254_740_992.0,
                2_147_483_648.0,
                -9_223_372_036_854_775_808.0,
                18_446_744_073_709_551_616.0,
                1.0e300,
                2.5,
                1.0e-300,
            ]),
            1 => self.range(-50, 50) as f64,
            2 | 3 => sign * self.scaled(-12, 12),
            _ => sign * self.scaled(-1074, 1023),
        }
    }

    /// A random mantissa in [1, 2) times 2^e with e in `lo..=hi` (underflowing to
    /// denormals or zero at the bottom of the range).
    fn scaled(&mut self, lo: i64, hi: i64) -> f64 {
        let mantissa = 1.0 + (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64;
        let e = self.range(lo, hi) as i32;
        // Two steps so that 2^e itself never leaves the f64 range.
        mantissa * 2f64.powi(e / 2) * 2f64.powi(e - e / 2)
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Ty {
    Bool,
    U32,
    I32,
    U64,
    I64,
    F32,
    F64,
}

pub const NUMERIC_TYPES: [Ty; 6] = [Ty::U32, Ty::I32, Ty::U64, Ty::I64, Ty::F32, Ty::F64];

impl Ty {
    pub fn c_name(self) -> &'static str {
        match self {
            Ty::Bool => "bool",
            Ty::U32 => "u32",
            Ty::I32 => "i32",
            Ty::U64 => "u64",
            Ty::I64 => "i64",
            Ty::F32 => "float",
            Ty::F64 => "double",
        }
    }

    pub fn is_int(self) -> bool {
        matches!(self, Ty::U32 | Ty::I32 | Ty::U64 | Ty::I64)
    }

    pub fn is_float(self) -> bool {
        matches!(self, Ty::F32 | Ty::F64)
    }

    pub fn is_signed(self) -> bool {
        matches!(self, Ty::I32 | Ty::I64)
    }

    /// Width in bits of an integer or float type.
    pub fn bits(self) -> u32 {
        match self {
            Ty::Bool => 1,
            Ty::U32 | Ty::I32 | Ty::F32 => 32,
            Ty::U64 | Ty::I64 | Ty::F64 => 64,
        }
    }

    /// The unsigned integer type of the same width (for wrapping arithmetic in C).
    pub fn unsigned(self) -> Ty {
        if self.bits() == 32 {
            Ty::U32
        } else {
            Ty::U64
        }
    }

    /// The signed integer type of the same width.
    pub fn signed(self) -> Ty {
        if self.bits() == 32 {
            Ty::I32
        } else {
            Ty::I64
        }
    }

    /// The float suffix of the C builtins (`__builtin_fminf` against `__builtin_fmin`).
    fn builtin_suffix(self) -> &'static str {
        if self == Ty::F32 {
            "f"
        } else {
            ""
        }
    }

    /// The 32/64 suffix of the integer builtins.
    fn width_suffix(self) -> &'static str {
        if self.bits() == 32 {
            "32"
        } else {
            "64"
        }
    }

    /// A C floating literal of this float type for a value it represents exactly.
    fn float_literal(self, value: f64) -> String {
        format!("{value:.1}{}", self.builtin_suffix())
    }
}

pub type ValueId = usize;

/// Where a leaf value comes from.
#[derive(Clone, Copy, Debug)]
pub enum Source {
    /// A word of the lane's slice of the input buffer.
    InputWord(usize),
    /// A uniform kernel argument (lives in SGPRs, so it exercises the scalar unit).
    Uniform(usize),
    GlobalId,
    LocalId,
    GroupId,
}

#[derive(Clone, Copy, Debug)]
pub enum IntUnary {
    Neg,
    Not,
    Abs,
    Popcount,
    LeadingZeros,
    TrailingZeros,
    BitReverse,
    ByteSwap,
    ExtractBits {
        offset: u32,
        width: u32,
    },
    SignExtendFrom {
        width: u32,
    },
    /// Through an 8- or 16-bit C type: `(T)(u8)a`, `(T)(i16)a`, ...
    Narrow {
        bits: u32,
        signed: bool,
    },
}

#[derive(Clone, Copy, Debug)]
pub enum IntBinary {
    Add,
    Sub,
    Mul,
    MulHigh,
    And,
    Or,
    Xor,
    ShiftLeft,
    ShiftRight,
    RotateLeft,
    Div,
    Rem,
    /// Unsigned division by `b | 1` (never zero, so no guard and no branch).
    DivByOdd,
    Min,
    Max,
}

#[derive(Clone, Copy, Debug)]
pub enum FloatUnary {
    Neg,
    Abs,
    Sqrt,
    Floor,
    Ceil,
    Trunc,
    Rint,
}

#[derive(Clone, Copy, Debug)]
pub enum FloatBinary {
    Add,
    Sub,
    Mul,
    Div,
    Min,
    Max,
    CopySign,
}

#[derive(Clone, Copy, Debug)]
pub enum FloatClass {
    Nan,
    Infinite,
    Finite,
}

#[derive(Clone, Copy, Debug)]
pub enum BoolBinary {
    And,
    Or,
    Xor,
}

#[derive(Clone, Copy, Debug)]
pub enum Compare {
    Lt,
    Le,
    Gt,
    Ge,
    Eq,
    Ne,
}

/// The update of a counted loop: `v = v OP x`.
#[derive(Clone, Copy, Debug)]
pub enum LoopStep {
    Int(IntBinary),
    Float(FloatBinary),
}

#[derive(Clone, Debug)]
pub enum Op {
    Read(Source),
    /// Raw bits (an f32 in the low half for `Ty::F32`).
    Const(u64),
    IntUnary(IntUnary, ValueId),
    IntBinary(IntBinary, ValueId, ValueId),
    FloatUnary(FloatUnary, ValueId),
    FloatBinary(FloatBinary, ValueId, ValueId),
    Fma(ValueId, ValueId, ValueId),
    /// `ldexp(a, e)` with the exponent `(b & 511) - 256` taken from an i32 value.
    Ldexp(ValueId, ValueId),
    Classify(FloatClass, ValueId),
    Not(ValueId),
    BoolBinary(BoolBinary, ValueId, ValueId),
    Compare(Compare, ValueId, ValueId),
    Select(ValueId, ValueId, ValueId),
    Cast(ValueId),
    If {
        cond: ValueId,
        then_body: Vec<Stmt>,
        then_value: ValueId,
        else_body: Vec<Stmt>,
        else_value: ValueId,
    },
    /// `v = init; for (it = 0; it < (count & 7); ++it) v = v STEP operand;`
    Loop {
        count: ValueId,
        init: ValueId,
        step: LoopStep,
        operand: ValueId,
    },
}

#[derive(Clone, Debug)]
pub struct Stmt {
    pub id: ValueId,
    pub op: Op,
}

pub struct Kernel {
    pub name: String,
    /// Type of every value, by id.
    pub types: Vec<Ty>,
    /// Whether a value is a constant, by id.
    pub constant: Vec<bool>,
    pub body: Vec<Stmt>,
    /// Values written to the lane's output slots, in slot order.
    pub outputs: Vec<ValueId>,
}

/// Builds one kernel.
struct Builder<'r> {
    rng: &'r mut Rng,
    types: Vec<Ty>,
    /// Whether a value can differ between lanes.
    varying: Vec<bool>,
    uses: Vec<u32>,
    /// Statement lists being built: the kernel body, then the bodies of open `if`s.
    blocks: Vec<Vec<Stmt>>,
    /// Values visible in each open block.
    scopes: Vec<Vec<ValueId>>,
}

impl Builder<'_> {
    fn push(&mut self, ty: Ty, op: Op, varying: bool) -> ValueId {
        let id = self.types.len();
        self.types.push(ty);
        self.varying.push(varying);
        self.uses.push(0);
        for operand in operands(&op) {
            self.uses[operand] += 1;
        }
        self.blocks
            .last_mut()
            .expect("a block is open")
            .push(Stmt { id, op });
        self.scopes.last_mut().expect("a scope is open").push(id);
        id
    }

    fn visible(&self, ty: Ty) -> Vec<ValueId> {
        self.scopes
            .iter()
            .flatten()
            .copied()
            .filter(|&v| self.types[v] == ty)
            .collect()
    }

    /// An operand of type `ty`: mostly a recent or still unused value, sometimes a new leaf.
    fn operand(&mut self, ty: Ty) -> ValueId {
        let candidates = self.visible(ty);
        if candidates.is_empty() || self.rng.percent(12) {
            return self.leaf(ty);
        }
        let unused: Vec<ValueId> = candidates
            .iter()
            .copied()
            .filter(|&v| self.uses[v] == 0)
            .collect();
        if !unused.is_empty() && self.rng.percent(60) {
            return self.rng.pick(&unused);
        }
        let recent = &candidates[candidates.len().saturating_sub(6)..];
        if self.rng.percent(70) {
            self.rng.pick(recent)
        } else {
            self.rng.pick(&candidates)
        }
    }

    /// A second operand, different from `first` when another value of the type is visible
    /// (`x < x` folds away and draws a compiler warning).
    fn other_operand(&mut self, ty: Ty, first: ValueId) -> ValueId {
        let second = self.operand(ty);
        if second != first {
            return second;
        }
        self.operand(ty)
    }

    /// An operand that is often a constant (divisors, shift amounts).
    fn operand_or_const(&mut self, ty: Ty) -> ValueId {
        if self.rng.percent(40) {
            self.constant(ty)
        } else {
            self.operand(ty)
        }
    }

    fn leaf(&mut self, ty: Ty) -> ValueId {
        match ty {
            Ty::Bool => {
                let compared = self.rng.pick(&NUMERIC_TYPES);
                self.new_comparison(compared)
            }
            _ if self.rng.percent(30) => self.constant(ty),
            _ => self.read(ty),
        }
    }

    /// A comparison of two different values of type `ty` (often against a constant).
    fn new_comparison(&mut self, ty: Ty) -> ValueId {
        let a = self.operand(ty);
        let b = if self.rng.percent(40) {
            self.constant(ty)
        } else {
            self.other_operand(ty, a)
        };
        self.compare(a, b)
    }

    fn compare(&mut self, a: ValueId, b: ValueId) -> ValueId {
        let op = self.rng.pick(&[
            Compare::Lt,
            Compare::Le,
            Compare::Gt,
            Compare::Ge,
            Compare::Eq,
            Compare::Ne,
        ]);
        let varying = self.varying[a] || self.varying[b];
        self.push(Ty::Bool, Op::Compare(op, a, b), varying)
    }

    fn read(&mut self, ty: Ty) -> ValueId {
        let (words, uniform): (&[usize], usize) = match ty {
            Ty::F32 => (&F32_WORDS, 2),
            Ty::F64 => (&F64_WORDS, 3),
            _ => (&INT_WORDS, self.rng.below(2)),
        };
        let (source, varying) = match self.rng.below(10) {
            0..=4 => (Source::InputWord(self.rng.pick(words)), true),
            5..=6 => (Source::Uniform(uniform), false),
            7 => (Source::GlobalId, true),
            8 => (Source::LocalId, true),
            _ => (Source::GroupId, false),
        };
        self.push(ty, Op::Read(source), varying)
    }

    fn constant(&mut self, ty: Ty) -> ValueId {
        let bits = match ty {
            Ty::F32 => u64::from(self.rng.f32_value().to_bits()),
            Ty::F64 => self.rng.f64_value().to_bits(),
            _ => match self.rng.below(4) {
                // Small divisors and shift amounts make the compiler pick its special forms
                // (magic-number division, single shifts).
                0 => self
                    .rng
                    .pick(&[1, 2, 3, 5, 7, 10, 16, 31, 32, 63, 1000, 0x1_0001]),
                1 => self.rng.range(-9, -1) as u64,
                _ => self.rng.int_word(),
            },
        };
        self.push(ty, Op::Const(bits & type_mask(ty)), false)
    }

    /// A new statement of type `ty` with a random operation.
    fn statement(&mut self, ty: Ty, depth: usize) -> ValueId {
        let nest = if depth < 2 { 1 } else { 0 };
        match ty {
            Ty::Bool => match self.rng.weighted(&[10, 2, 1, 1]) {
                0 => {
                    let compared = self.rng.pick(&NUMERIC_TYPES);
                    self.new_comparison(compared)
                }
                1 => {
                    let op = self
                        .rng
                        .pick(&[BoolBinary::And, BoolBinary::Or, BoolBinary::Xor]);
                    let a = self.operand(Ty::Bool);
                    let b = self.other_operand(Ty::Bool, a);
                    let varying = self.varying[a] || self.varying[b];
                    self.push(Ty::Bool, Op::BoolBinary(op, a, b), varying)
                }
                2 => {
                    let a = self.operand(Ty::Bool);
                    let varying = self.varying[a];
                    self.push(Ty::Bool, Op::Not(a), varying)
                }
                _ => {
                    let class =
                        self.rng
                            .pick(&[FloatClass::Nan, FloatClass::Infinite, FloatClass::Finite]);
                    let classified = self.rng.pick(&[Ty::F32, Ty::F64]);
                    let a = self.operand(classified);
                    let varying = self.varying[a];
                    self.push(Ty::Bool, Op::Classify(class, a), varying)
                }
            },
            _ if ty.is_int() => match self.rng.weighted(&[30, 10, 6, 10, 3, 4 * nest, 2 * nest]) {
                0 => self.int_binary(ty),
                1 => self.int_unary(ty),
                2 => self.select(ty),
                3 => self.cast(ty),
                4 => self.leaf(ty),
                5 => self.branch(ty, depth),
                _ => self.counted_loop(ty),
            },
            _ => match self
                .rng
                .weighted(&[30, 6, 8, 6, 10, 3, 4 * nest, 2 * nest, 2])
            {
                0 => self.float_binary(ty),
                1 => self.fma(ty),
                8 => {
                    let a = self.operand(ty);
                    let exponent = self.operand(Ty::I32);
                    let varying = self.varying[a] || self.varying[exponent];
                    self.push(ty, Op::Ldexp(a, exponent), varying)
                }
                2 => self.float_unary(ty),
                3 => self.select(ty),
                4 => self.cast(ty),
                5 => self.leaf(ty),
                6 => self.branch(ty, depth),
                7 => self.counted_loop(ty),
                _ => unreachable!("weights cover 0..=8"),
            },
        }
    }

    fn int_binary(&mut self, ty: Ty) -> ValueId {
        use IntBinary::*;
        let op = self.rng.pick(&[
            Add, Add, Sub, Mul, Mul, MulHigh, And, Or, Xor, ShiftLeft, ShiftRight, ShiftRight,
            RotateLeft, Div, Rem, DivByOdd, Min, Max,
        ]);
        let a = self.operand(ty);
        let b = match op {
            ShiftLeft | ShiftRight | RotateLeft | Div | Rem | DivByOdd => self.operand_or_const(ty),
            _ => self.other_operand(ty, a),
        };
        let varying = self.varying[a] || self.varying[b];
        self.push(ty, Op::IntBinary(op, a, b), varying)
    }

    fn int_unary(&mut self, ty: Ty) -> ValueId {
        let width = ty.bits();
        let op = match self.rng.below(11) {
            0 => IntUnary::Neg,
            1 => IntUnary::Not,
            2 => IntUnary::Abs,
            3 => IntUnary::Popcount,
            4 => IntUnary::LeadingZeros,
            5 => IntUnary::TrailingZeros,
            6 => IntUnary::BitReverse,
            7 => IntUnary::ByteSwap,
            8 => {
                let field = self.rng.range(1, i64::from(width) - 1) as u32;
                let offset = self.rng.range(0, i64::from(width - field)) as u32;
                IntUnary::ExtractBits {
                    offset,
                    width: field,
                }
            }
            9 => IntUnary::SignExtendFrom {
                width: self.rng.range(1, i64::from(width) - 1) as u32,
            },
            _ => IntUnary::Narrow {
                bits: self.rng.pick(&[8, 16]),
                signed: self.rng.percent(50),
            },
        };
        let a = self.operand(ty);
        let varying = self.varying[a];
        self.push(ty, Op::IntUnary(op, a), varying)
    }

    fn float_binary(&mut self, ty: Ty) -> ValueId {
        use FloatBinary::*;
        let op = self
            .rng
            .pick(&[Add, Add, Sub, Mul, Mul, Div, Min, Max, CopySign]);
        let a = self.operand(ty);
        let b = self.other_operand(ty, a);
        let varying = self.varying[a] || self.varying[b];
        self.push(ty, Op::FloatBinary(op, a, b), varying)
    }

    fn float_unary(&mut self, ty: Ty) -> ValueId {
        use FloatUnary::*;
        let op = self.rng.pick(&[Neg, Abs, Sqrt, Floor, Ceil, Trunc, Rint]);
        let a = self.operand(ty);
        let varying = self.varying[a];
        self.push(ty, Op::FloatUnary(op, a), varying)
    }

    fn fma(&mut self, ty: Ty) -> ValueId {
        let (a, b, c) = (self.operand(ty), self.operand(ty), self.operand(ty));
        let varying = self.varying[a] || self.varying[b] || self.varying[c];
        self.push(ty, Op::Fma(a, b, c), varying)
    }

    fn select(&mut self, ty: Ty) -> ValueId {
        let cond = self.operand(Ty::Bool);
        let a = self.operand(ty);
        let b = self.other_operand(ty, a);
        let varying = self.varying[cond] || self.varying[a] || self.varying[b];
        self.push(ty, Op::Select(cond, a, b), varying)
    }

    fn cast(&mut self, ty: Ty) -> ValueId {
        let from = if self.rng.percent(10) {
            Ty::Bool
        } else {
            self.rng.pick(&NUMERIC_TYPES)
        };
        let a = self.operand(from);
        let varying = self.varying[a];
        self.push(ty, Op::Cast(a), varying)
    }

    /// An `if`/`else` on a condition that preferably differs between lanes.
    fn branch(&mut self, ty: Ty, depth: usize) -> ValueId {
        let conds: Vec<ValueId> = self
            .visible(Ty::Bool)
            .into_iter()
            .filter(|&c| self.varying[c])
            .collect();
        let cond = if conds.is_empty() || self.rng.percent(30) {
            self.operand(Ty::Bool)
        } else {
            self.rng.pick(&conds)
        };
        let (then_body, then_value) = self.block(ty, depth + 1);
        let (else_body, else_value) = self.block(ty, depth + 1);
        let varying = self.varying[cond] || self.varying[then_value] || self.varying[else_value];
        let op = Op::If {
            cond,
            then_body,
            then_value,
            else_body,
            else_value,
        };
        self.push(ty, op, varying)
    }

    /// A nested block of a few statements ending in a value of type `ty`.
    fn block(&mut self, ty: Ty, depth: usize) -> (Vec<Stmt>, ValueId) {
        self.blocks.push(Vec::new());
        self.scopes.push(Vec::new());
        for _ in 0..self.rng.below(4) {
            let inner = if self.rng.percent(60) {
                ty
            } else {
                self.rng.pick(&NUMERIC_TYPES)
            };
            self.statement(inner, depth);
        }
        let value = self.operand(ty);
        self.scopes.pop();
        self.uses[value] += 1;
        (self.blocks.pop().expect("the block just pushed"), value)
    }

    fn counted_loop(&mut self, ty: Ty) -> ValueId {
        let count = self.operand(Ty::U32);
        let init = self.operand(ty);
        let operand = self.operand(ty);
        let step = if ty.is_int() {
            use IntBinary::*;
            LoopStep::Int(
                self.rng
                    .pick(&[Add, Sub, Mul, Xor, RotateLeft, MulHigh, Min, Max]),
            )
        } else {
            use FloatBinary::*;
            LoopStep::Float(self.rng.pick(&[Add, Sub, Mul, Min, Max]))
        };
        let varying = self.varying[count] || self.varying[init] || self.varying[operand];
        let op = Op::Loop {
            count,
            init,
            step,
            operand,
        };
        self.push(ty, op, varying)
    }
}

/// Bits of an integer type's values (the raw value form of every type).
pub fn type_mask(ty: Ty) -> u64 {
    match ty {
        Ty::Bool => 1,
        _ if ty.bits() == 32 => 0xffff_ffff,
        _ => u64::MAX,
    }
}

/// Values a statement reads directly (not those inside its nested blocks).
pub fn operands(op: &Op) -> Vec<ValueId> {
    match *op {
        Op::Read(_) | Op::Const(_) => vec![],
        Op::IntUnary(_, a)
        | Op::FloatUnary(_, a)
        | Op::Not(a)
        | Op::Cast(a)
        | Op::Classify(_, a) => vec![a],
        Op::IntBinary(_, a, b)
        | Op::Ldexp(a, b)
        | Op::FloatBinary(_, a, b)
        | Op::BoolBinary(_, a, b)
        | Op::Compare(_, a, b) => vec![a, b],
        Op::Fma(a, b, c) | Op::Select(a, b, c) => vec![a, b, c],
        Op::If { cond, .. } => vec![cond],
        Op::Loop {
            count,
            init,
            operand,
            ..
        } => vec![count, init, operand],
    }
}

/// A kernel of about `statements` top-level statements, most of them of type `focus`.
pub fn generate(rng: &mut Rng, name: String, focus: Option<Ty>, statements: usize) -> Kernel {
    let mut b = Builder {
        rng,
        types: Vec::new(),
        varying: Vec::new(),
        uses: Vec::new(),
        blocks: vec![Vec::new()],
        scopes: vec![Vec::new()],
    };
    for _ in 0..statements {
        let ty = match focus {
            Some(ty) if b.rng.percent(65) => ty,
            _ if b.rng.percent(8) => Ty::Bool,
            _ => b.rng.pick(&NUMERIC_TYPES),
        };
        b.statement(ty, 0);
    }
    let mut constant = vec![false; b.types.len()];
    mark_constants(&b.blocks[0], &mut constant);
    // Every top-level value nothing else reads is an output (constants would test nothing).
    let top: Vec<ValueId> = b.scopes[0].clone();
    let mut outputs: Vec<ValueId> = top
        .iter()
        .copied()
        .filter(|&v| b.uses[v] == 0 && !constant[v])
        .collect();
    let last = *top.last().expect("at least one statement");
    if !outputs.contains(&last) {
        outputs.push(last);
    }
    let outputs = outputs[outputs.len().saturating_sub(MAX_OUTPUTS)..].to_vec();
    Kernel {
        name,
        types: b.types,
        constant,
        body: b.blocks.pop().expect("the kernel body"),
        outputs,
    }
}

fn mark_constants(body: &[Stmt], constant: &mut [bool]) {
    for stmt in body {
        match &stmt.op {
            Op::Const(_) => constant[stmt.id] = true,
            Op::If {
                then_body,
                else_body,
                ..
            } => {
                mark_constants(then_body, constant);
                mark_constants(else_body, constant);
            }
            _ => {}
        }
    }
}

// ---- HIP source -------------------------------------------------------------------------

/// Declarations every generated source starts with (no headers: the compile uses -nogpuinc).
pub const PRELUDE: &str = "\
typedef unsigned int u32;
typedef int i32;
typedef unsigned long long u64;
typedef long long i64;
";

impl Kernel {
    /// The kernel's HIP source.
    pub fn source(&self) -> String {
        let mut s = format!(
            "extern \"C\" __attribute__((global)) void {}(const u64* in, u64* out, u64 p0, u64 p1, \
             u64 p2, u64 p3, u64 zero) {{\n",
            self.name
        );
        // Contraction would fuse a separate multiply and add into one rounding; the host
        // reference rounds each operation as written.
        s += "#pragma clang fp contract(off)\n";
        s += "  const u32 lid = __builtin_amdgcn_workitem_id_x();\n";
        s += "  const u32 grp = __builtin_amdgcn_workgroup_id_x();\n";
        s += &format!("  const u32 gid = grp * {LOCAL_SIZE}u + lid;\n");
        s += &format!("  const u64* lane_in = in + gid * {WORDS_PER_LANE}u;\n");
        self.emit_block(&mut s, &self.body, 1);
        s += &format!("  u64* lane_out = out + gid * {MAX_OUTPUTS}u;\n");
        for (slot, &v) in self.outputs.iter().enumerate() {
            let bits = match self.types[v] {
                Ty::Bool => format!("(u64)v{v}"),
                Ty::F32 => format!("(u64)__builtin_bit_cast(u32, v{v})"),
                Ty::F64 => format!("__builtin_bit_cast(u64, v{v})"),
                ty => format!("(u64)({})v{v}", ty.unsigned().c_name()),
            };
            s += &format!("  lane_out[{slot}] = {bits};\n");
        }
        s += "}\n";
        s
    }

    fn emit_block(&self, s: &mut String, body: &[Stmt], indent: usize) {
        let pad = "  ".repeat(indent);
        for stmt in body {
            let ty = self.types[stmt.id];
            let name = ty.c_name();
            let v = stmt.id;
            match &stmt.op {
                Op::If {
                    cond,
                    then_body,
                    then_value,
                    else_body,
                    else_value,
                } => {
                    *s += &format!("{pad}{name} v{v};\n{pad}if (v{cond}) {{\n");
                    self.emit_block(s, then_body, indent + 1);
                    *s += &format!("{pad}  v{v} = v{then_value};\n{pad}}} else {{\n");
                    self.emit_block(s, else_body, indent + 1);
                    *s += &format!("{pad}  v{v} = v{else_value};\n{pad}}}\n");
                }
                Op::Loop {
                    count,
                    init,
                    step,
                    operand,
                } => {
                    let update = match *step {
                        LoopStep::Int(op) => {
                            int_binary_c(op, ty, &format!("v{v}"), &format!("v{operand}"), false)
                        }
                        LoopStep::Float(op) => {
                            float_binary_c(op, ty, &format!("v{v}"), &format!("v{operand}"))
                        }
                    };
                    *s += &format!(
                        "{pad}{name} v{v} = v{init};\n\
                         {pad}for (u32 it = 0; it < (v{count} & 7u); ++it) {{\n\
                         {pad}  v{v} = {update};\n{pad}}}\n"
                    );
                }
                op => *s += &format!("{pad}{name} v{v} = {};\n", self.expression(ty, op)),
            }
        }
    }

    fn expression(&self, ty: Ty, op: &Op) -> String {
        let v = |id: &ValueId| format!("v{id}");
        match op {
            Op::Read(source) => {
                let raw = match source {
                    Source::InputWord(w) => format!("lane_in[{w}]"),
                    Source::Uniform(p) => format!("p{p}"),
                    Source::GlobalId => "gid".into(),
                    Source::LocalId => "lid".into(),
                    Source::GroupId => "grp".into(),
                };
                match (ty, source) {
                    (Ty::F32, Source::InputWord(_) | Source::Uniform(_)) => {
                        format!("__builtin_bit_cast(float, (u32){raw})")
                    }
                    (Ty::F64, Source::InputWord(_) | Source::Uniform(_)) => {
                        format!("__builtin_bit_cast(double, {raw})")
                    }
                    _ => format!("({}){raw}", ty.c_name()),
                }
            }
            Op::Const(bits) => match ty {
                Ty::F32 => format!("__builtin_bit_cast(float, 0x{bits:08x}u)"),
                Ty::F64 => format!("__builtin_bit_cast(double, 0x{bits:016x}ull)"),
                _ => format!("({})0x{bits:x}ull", ty.c_name()),
            },
            Op::IntUnary(op, a) => int_unary_c(*op, ty, &v(a)),
            Op::IntBinary(op, a, b) => int_binary_c(*op, ty, &v(a), &v(b), !self.constant[*b]),
            Op::FloatUnary(op, a) => {
                let f = ty.builtin_suffix();
                let a = v(a);
                match op {
                    FloatUnary::Neg => format!("(-{a})"),
                    FloatUnary::Abs => format!("__builtin_fabs{f}({a})"),
                    FloatUnary::Sqrt => format!("__builtin_sqrt{f}({a})"),
                    FloatUnary::Floor => format!("__builtin_floor{f}({a})"),
                    FloatUnary::Ceil => format!("__builtin_ceil{f}({a})"),
                    FloatUnary::Trunc => format!("__builtin_trunc{f}({a})"),
                    FloatUnary::Rint => format!("__builtin_rint{f}({a})"),
                }
            }
            Op::FloatBinary(op, a, b) => float_binary_c(*op, ty, &v(a), &v(b)),
            Op::Fma(a, b, c) => format!(
                "__builtin_fma{}({}, {}, {})",
                ty.builtin_suffix(),
                v(a),
                v(b),
                v(c)
            ),
            Op::Ldexp(a, e) => format!(
                "__builtin_ldexp{}({}, (i32)((u32){} & 511u) - 256)",
                ty.builtin_suffix(),
                v(a),
                v(e)
            ),
            Op::Classify(class, a) => {
                let name = match class {
                    FloatClass::Nan => "isnan",
                    FloatClass::Infinite => "isinf",
                    FloatClass::Finite => "isfinite",
                };
                format!("__builtin_{name}({})", v(a))
            }
            Op::Not(a) => format!("!{}", v(a)),
            Op::BoolBinary(op, a, b) => {
                let sym = match op {
                    BoolBinary::And => "&",
                    BoolBinary::Or => "|",
                    BoolBinary::Xor => "^",
                };
                format!("({} {sym} {})", v(a), v(b))
            }
            Op::Compare(op, a, b) => {
                let sym = match op {
                    Compare::Lt => "<",
                    Compare::Le => "<=",
                    Compare::Gt => ">",
                    Compare::Ge => ">=",
                    Compare::Eq => "==",
                    Compare::Ne => "!=",
                };
                format!("({} {sym} {})", v(a), v(b))
            }
            Op::Select(c, a, b) => format!("({} ? {} : {})", v(c), v(a), v(b)),
            Op::Cast(a) => {
                let from = self.types[*a];
                let a = v(a);
                if from.is_float() && ty.is_int() {
                    let (lo, hi) = int_range_of_float(ty);
                    let lo_test = if ty.is_signed() { ">=" } else { ">" };
                    format!(
                        "(({a} {lo_test} {}) && ({a} < {}) ? ({}){a} : ({})0)",
                        from.float_literal(lo),
                        from.float_literal(hi),
                        ty.c_name(),
                        ty.c_name()
                    )
                } else {
                    format!("({}){a}", ty.c_name())
                }
            }
            Op::If { .. } | Op::Loop { .. } => unreachable!("statements, not expressions"),
        }
    }
}

/// The float interval `[lo, hi)` (signed) or `(lo, hi)` (unsigned) whose truncation fits
/// integer type `ty`; both bounds are powers of two (or -1), exact in f32 and f64.
pub fn int_range_of_float(ty: Ty) -> (f64, f64) {
    let bits = ty.bits() as i32;
    if ty.is_signed() {
        (-(2f64.powi(bits - 1)), 2f64.powi(bits - 1))
    } else {
        (-1.0, 2f64.powi(bits))
    }
}

fn int_unary_c(op: IntUnary, ty: Ty, a: &str) -> String {
    let t = ty.c_name();
    let ut = ty.unsigned().c_name();
    let w = ty.bits();
    let sfx = ty.width_suffix();
    let ll = if w == 64 { "ll" } else { "" };
    match op {
        IntUnary::Neg => format!("({t})(-({ut}){a})"),
        IntUnary::Not => format!("({t})~{a}"),
        IntUnary::Abs if ty.is_signed() => format!("({t})({a} < 0 ? -({ut}){a} : ({ut}){a})"),
        IntUnary::Abs => a.to_string(),
        IntUnary::Popcount => format!("({t})__builtin_popcount{ll}(({ut}){a})"),
        IntUnary::LeadingZeros => format!("({t})({a} == 0 ? {w} : __builtin_clz{ll}(({ut}){a}))"),
        IntUnary::TrailingZeros => format!("({t})({a} == 0 ? {w} : __builtin_ctz{ll}(({ut}){a}))"),
        IntUnary::BitReverse => format!("({t})__builtin_bitreverse{sfx}(({ut}){a})"),
        IntUnary::ByteSwap => format!("({t})__builtin_bswap{sfx}(({ut}){a})"),
        IntUnary::ExtractBits { offset, width } => {
            let mask = (1u64 << width) - 1;
            format!("({t})((({ut}){a} >> {offset}) & 0x{mask:x}ull)")
        }
        IntUnary::SignExtendFrom { width } => {
            let st = ty.signed().c_name();
            let shift = w - width;
            format!("({t})(({st})(({ut}){a} << {shift}) >> {shift})")
        }
        IntUnary::Narrow { bits, signed } => {
            let narrow = match (bits, signed) {
                (8, false) => "unsigned char",
                (8, true) => "signed char",
                (_, false) => "unsigned short",
                (_, true) => "short",
            };
            format!("({t})({narrow}){a}")
        }
    }
}

/// clang-19 narrows a 64-bit division to 32 bits (and a 32-bit one to 24) when both operands
/// have enough sign bits, which is wrong for unsigned operands that may be negative as signed
/// values and for a signed -2^31 / -1 (LLVM fixed both later: llvm-project #116733, #204469).
/// So the dividend, and a divisor that is not a constant (`launder_divisor`), go through an
/// XOR with the kernel's `zero` argument, which the compiler cannot see through: it keeps the
/// full-width expansion, and constant divisors keep their magic-number lowering.
fn int_binary_c(op: IntBinary, ty: Ty, a: &str, b: &str, launder_divisor: bool) -> String {
    let t = ty.c_name();
    let dividend = format!("({a} ^ ({t})zero)");
    let divisor = if launder_divisor {
        format!("({b} ^ ({t})zero)")
    } else {
        b.to_string()
    };
    let ut = ty.unsigned().c_name();
    let w = ty.bits();
    let min = if w == 32 {
        "(i32)0x80000000u"
    } else {
        "(i64)0x8000000000000000ull"
    };
    match op {
        IntBinary::Add => format!("({t})(({ut}){a} + ({ut}){b})"),
        IntBinary::Sub => format!("({t})(({ut}){a} - ({ut}){b})"),
        IntBinary::Mul => format!("({t})(({ut}){a} * ({ut}){b})"),
        IntBinary::MulHigh => match ty {
            Ty::U32 => format!("(u32)(((u64){a} * (u64){b}) >> 32)"),
            Ty::I32 => format!("(i32)(((i64){a} * (i64){b}) >> 32)"),
            Ty::U64 => format!("(u64)(((unsigned __int128){a} * {b}) >> 64)"),
            _ => format!("(i64)(((__int128){a} * {b}) >> 64)"),
        },
        IntBinary::And => format!("({a} & {b})"),
        IntBinary::Or => format!("({a} | {b})"),
        IntBinary::Xor => format!("({a} ^ {b})"),
        IntBinary::ShiftLeft => format!("({t})(({ut}){a} << ((u32){b} & {}u))", w - 1),
        IntBinary::ShiftRight => format!("({t})({a} >> ((u32){b} & {}u))", w - 1),
        IntBinary::RotateLeft => {
            let sfx = ty.width_suffix();
            format!("({t})__builtin_rotateleft{sfx}(({ut}){a}, ({ut}){b})")
        }
        IntBinary::Div | IntBinary::Rem => {
            let sym = if matches!(op, IntBinary::Div) {
                "/"
            } else {
                "%"
            };
            if ty.is_signed() {
                format!(
                    "(({b} == 0 || ({a} == {min} && {b} == ({t})-1)) ? {a} : {dividend} {sym} \
                     {divisor})"
                )
            } else {
                format!("({b} == 0 ? {a} : {dividend} {sym} {divisor})")
            }
        }
        IntBinary::DivByOdd => format!("({t})(({ut}){dividend} / (({ut}){divisor} | 1u))"),
        IntBinary::Min => format!("({a} < {b} ? {a} : {b})"),
        IntBinary::Max => format!("({a} > {b} ? {a} : {b})"),
    }
}

fn float_binary_c(op: FloatBinary, ty: Ty, a: &str, b: &str) -> String {
    let f = ty.builtin_suffix();
    match op {
        FloatBinary::Add => format!("({a} + {b})"),
        FloatBinary::Sub => format!("({a} - {b})"),
        FloatBinary::Mul => format!("({a} * {b})"),
        // A zero divisor is made +0: its sign decides the sign of the infinite quotient, and
        // clang-19 does not keep the sign of zeros (see `same_value` in the test).
        FloatBinary::Div => format!("({a} / ({b} == 0 ? {} : {b}))", ty.float_literal(0.0)),
        FloatBinary::Min => format!("__builtin_fmin{f}({a}, {b})"),
        FloatBinary::Max => format!("__builtin_fmax{f}({a}, {b})"),
        // The sign of a NaN that arithmetic produced is not specified (x86 makes it negative,
        // the GPU positive), and clang-19 does not keep the sign of zeros: such sign sources
        // are replaced by +1.
        FloatBinary::CopySign => format!(
            "__builtin_copysign{f}({a}, {b} == {b} && {b} != 0 ? {b} : {})",
            ty.float_literal(1.0)
        ),
    }
}
