//! Shared pieces of the kernel suite (and of the ML kernel tests, which include this file):
//! the device, compiled sources, deterministic inputs, launches, element-by-element checks,
//! and host models of the GPU's number formats.

use hcq::{Arg, Buffer, Device, Program};
use std::collections::HashMap;
use std::fmt::Debug;
use std::sync::{Mutex, OnceLock};

/// The emulated GPU, opened once for the whole process (hcq keeps an opened device for the
/// life of the process anyway; this only saves the registry lookup).
pub fn device() -> Device {
    static DEVICE: OnceLock<Device> = OnceLock::new();
    DEVICE
        .get_or_init(|| Device::open("amd-emu:0").expect("the emulated GPU opens"))
        .clone()
}

/// Code objects by source (compiled once per process; the runtime also caches on disk).
static LIBS: Mutex<Option<HashMap<usize, Vec<u8>>>> = Mutex::new(None);

/// Loads kernel `name` from one of the suite's source files.
pub fn program(source: &'static str, name: &str) -> Program {
    let dev = device();
    let lib = {
        let mut libs = LIBS.lock().unwrap_or_else(|e| e.into_inner());
        let map = libs.get_or_insert_with(HashMap::new);
        map.entry(source.as_ptr() as usize)
            .or_insert_with(|| {
                dev.compile(source)
                    .unwrap_or_else(|e| panic!("compiling the source of {name}: {e}"))
            })
            .clone()
    };
    dev.program(&lib, name)
        .unwrap_or_else(|e| panic!("loading {name}: {e}"))
}

/// A buffer holding `values`.
pub fn upload<T: bytemuck::Pod>(values: &[T]) -> Buffer {
    let bytes: &[u8] = bytemuck::cast_slice(values);
    let buf = device().alloc(bytes.len().max(4)).expect("alloc");
    buf.copy_in(0, bytes).expect("copy in");
    buf
}

/// A buffer of `n` copies of `value` (outputs start from a sentinel so unwritten elements show).
pub fn filled<T: bytemuck::Pod>(n: usize, value: T) -> Buffer {
    upload(&vec![value; n])
}

pub fn read<T: bytemuck::Pod>(buf: &Buffer) -> Vec<T> {
    buf.read().expect("read back")
}

/// Workgroups covering `n` work-items in workgroups of `local`.
pub fn groups(n: usize, local: u32) -> [u32; 3] {
    [(n as u32).div_ceil(local), 1, 1]
}

/// Runs `name` from `source` and waits for it.
pub fn run(source: &'static str, name: &str, args: &[Arg<'_>], grid: [u32; 3], local: [u32; 3]) {
    let prg = program(source, name);
    prg.launch_timed(args, grid, local)
        .unwrap_or_else(|e| panic!("{name} failed on the device: {e}"));
}

/// xorshift64* generator: the same inputs on every run.
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1)
    }

    pub fn next_u64(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        x.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    pub fn u32(&mut self) -> u32 {
        (self.next_u64() >> 32) as u32
    }

    pub fn i32(&mut self) -> i32 {
        self.u32() as i32
    }

    /// Uniform in `lo..=hi`.
    pub fn range(&mut self, lo: i64, hi: i64) -> i64 {
        lo + (self.next_u64() % ((hi - lo) as u64 + 1)) as i64
    }

    pub fn chance(&mut self, num: u64, den: u64) -> bool {
        self.next_u64() % den < num
    }

    #[allow(dead_code)] // used by the ML kernel tests, which include this file
    pub fn f32s(&mut self, n: usize, lo: f32, hi: f32) -> Vec<f32> {
        (0..n).map(|_| self.f32_in(lo, hi)).collect()
    }

    pub fn pick<T: Copy>(&mut self, xs: &[T]) -> T {
        xs[(self.next_u64() % xs.len() as u64) as usize]
    }

    /// A 32-bit integer of random magnitude (random bits shifted right by 0..31) and sign.
    pub fn i32_varied(&mut self) -> i32 {
        let sh = self.range(0, 31) as u32;
        let v = (self.u32() >> sh) as i32;
        if self.chance(1, 2) {
            v.wrapping_neg()
        } else {
            v
        }
    }

    /// A 64-bit integer of random magnitude and sign.
    pub fn i64_varied(&mut self) -> i64 {
        let sh = self.range(0, 63) as u32;
        let v = (self.next_u64() >> sh) as i64;
        if self.chance(1, 2) {
            v.wrapping_neg()
        } else {
            v
        }
    }

    /// Uniform in `[lo, hi)`.
    pub fn f64_in(&mut self, lo: f64, hi: f64) -> f64 {
        lo + (hi - lo) * ((self.next_u64() >> 11) as f64 / (1u64 << 53) as f64)
    }

    pub fn f32_in(&mut self, lo: f32, hi: f32) -> f32 {
        self.f64_in(lo as f64, hi as f64) as f32
    }

    /// A value with a random sign, mantissa and binary exponent in `lo..=hi`.
    pub fn f32_exp(&mut self, lo: i32, hi: i32) -> f32 {
        let e = self.range(lo as i64, hi as i64) as i32;
        let m = 1.0 + (self.u32() >> 9) as f64 / (1u64 << 23) as f64;
        let v = (m * 2f64.powi(e)) as f32;
        if self.chance(1, 2) {
            -v
        } else {
            v
        }
    }

    pub fn f64_exp(&mut self, lo: i32, hi: i32) -> f64 {
        let e = self.range(lo as i64, hi as i64) as i32;
        let m = 1.0 + (self.next_u64() >> 12) as f64 / (1u64 << 52) as f64;
        let v = m * 2f64.powi(e);
        if self.chance(1, 2) {
            -v
        } else {
            v
        }
    }

    /// Any f32: 1/8 special values, 3/8 uniformly random bit patterns (NaNs made quiet),
    /// 1/2 moderate magnitudes.
    pub fn f32_mixed(&mut self) -> f32 {
        match self.range(0, 7) {
            0 => self.pick(F32_SPECIAL),
            1..=3 => {
                let mut b = self.u32();
                if (b >> 23) & 0xff == 0xff && b & 0x7f_ffff != 0 {
                    b |= 0x40_0000;
                }
                f32::from_bits(b)
            }
            _ => self.f32_exp(-20, 20),
        }
    }

    pub fn f64_mixed(&mut self) -> f64 {
        match self.range(0, 7) {
            0 => self.pick(F64_SPECIAL),
            1..=3 => {
                let mut b = self.next_u64();
                if (b >> 52) & 0x7ff == 0x7ff && b & 0xf_ffff_ffff_ffff != 0 {
                    b |= 1 << 51;
                }
                f64::from_bits(b)
            }
            _ => self.f64_exp(-40, 40),
        }
    }

    /// Any f16 (as bits): 1/8 special values, 3/8 random bit patterns (quiet NaNs),
    /// 1/2 moderate magnitudes (binary exponent -4..4).
    pub fn f16_mixed(&mut self) -> u16 {
        match self.range(0, 7) {
            0 => self.pick(F16_SPECIAL),
            1..=3 => {
                let mut b = self.u32() as u16;
                if (b >> 10) & 0x1f == 0x1f && b & 0x3ff != 0 {
                    b |= 0x200;
                }
                b
            }
            _ => {
                let e = self.range(-4, 4) + 15;
                ((self.u32() as u16) & 0x83ff) | ((e as u16) << 10)
            }
        }
    }
}

pub const F32_SPECIAL: &[f32] = &[
    0.0,
    -0.0,
    1.0,
    -1.0,
    0.5,
    3.0,
    -7.5,
    f32::INFINITY,
    f32::NEG_INFINITY,
    f32::NAN,
    f32::MIN_POSITIVE,
    -f32::MIN_POSITIVE,
    1.0e-45,
    -1.0e-40,
    f32::MAX,
    f32::MIN,
    16777216.0,
    2147483648.0,
    -2147483648.0,
    1.0e30,
];

pub const F64_SPECIAL: &[f64] = &[
    0.0,
    -0.0,
    1.0,
    -1.0,
    0.5,
    3.0,
    -7.5,
    f64::INFINITY,
    f64::NEG_INFINITY,
    f64::NAN,
    f64::MIN_POSITIVE,
    -f64::MIN_POSITIVE,
    5e-324,
    -1e-310,
    f64::MAX,
    f64::MIN,
    9007199254740992.0,
    2147483648.0,
    1.0e300,
    1.0e-300,
];

/// 0, -0, 1, -1, 0.5, 2, inf, -inf, NaN, min normal, min and max denormal, max, -max, 1/3.
pub const F16_SPECIAL: &[u16] = &[
    0x0000, 0x8000, 0x3c00, 0xbc00, 0x3800, 0x4000, 0x7c00, 0xfc00, 0x7e00, 0x0400, 0x0001, 0x83ff,
    0x7bff, 0xfbff, 0x3555,
];

// ---- f16 as bits -------------------------------------------------------------------------

pub fn f16_is_nan(h: u16) -> bool {
    h & 0x7c00 == 0x7c00 && h & 0x3ff != 0
}

/// The exact value of an f16.
pub fn f16_to_f64(h: u16) -> f64 {
    let sign = if h & 0x8000 != 0 { -1.0 } else { 1.0 };
    let e = ((h >> 10) & 0x1f) as i32;
    let m = (h & 0x3ff) as f64;
    sign * match e {
        0 => m * 2f64.powi(-24),
        31 if m == 0.0 => f64::INFINITY,
        31 => f64::NAN,
        _ => (1024.0 + m) * 2f64.powi(e - 25),
    }
}

/// Rounds `x + residual` to the nearest f16, ties to even, where `residual` is far below
/// half an f64 ulp of `x` (the rounding error of an f64 computation): it only breaks ties.
pub fn f16_round(x: f64, residual: f64) -> u16 {
    if x.is_nan() {
        return 0x7e00;
    }
    let sign: u16 = if x.is_sign_negative() { 0x8000 } else { 0 };
    let a = x.abs();
    let r = if x.is_sign_negative() {
        -residual
    } else {
        residual
    };
    if a.is_infinite() {
        return sign | 0x7c00;
    }
    let mut e = if a == 0.0 {
        -14
    } else {
        (((a.to_bits() >> 52) & 0x7ff) as i32 - 1023).max(-14)
    };
    if e > 15 {
        return sign | 0x7c00;
    }
    let scaled = a * 2f64.powi(10 - e);
    let mut m = scaled.floor();
    let frac = scaled - m;
    if frac > 0.5 || (frac == 0.5 && (r > 0.0 || (r == 0.0 && m % 2.0 == 1.0))) {
        m += 1.0;
    }
    let mut m = m as u32;
    if m >= 2048 {
        m = 1024;
        e += 1;
    }
    if e > 15 {
        return sign | 0x7c00;
    }
    if m < 1024 {
        sign | m as u16
    } else {
        sign | (((e + 15) as u16) << 10) | (m - 1024) as u16
    }
}

/// The f16 nearest to `x` (ties to even).
pub fn f16(x: f64) -> u16 {
    f16_round(x, 0.0)
}

/// f16 `a * b + c` rounded once: the product is exact in f64, the sum's f64 rounding error is
/// recovered (TwoSum) and used to break f16 ties.
pub fn f16_fma(a: u16, b: u16, c: u16) -> u16 {
    let p = f16_to_f64(a) * f16_to_f64(b);
    let c = f16_to_f64(c);
    let s = p + c;
    let bb = s - p;
    let err = (p - (s - bb)) + (c - bb);
    f16_round(s, if err.is_finite() { err } else { 0.0 })
}

// ---- ulp distances ------------------------------------------------------------------------

fn ord32(x: f32) -> i64 {
    let b = x.to_bits();
    if b & 0x8000_0000 != 0 {
        -((b & 0x7fff_ffff) as i64)
    } else {
        b as i64
    }
}

fn ord16(h: u16) -> i64 {
    if h & 0x8000 != 0 {
        -((h & 0x7fff) as i64)
    } else {
        h as i64
    }
}

/// Distance in representable f32 values (+0 and -0 are the same value; NaN matches NaN only).
pub fn ulp_diff_f32(a: f32, b: f32) -> u64 {
    match (a.is_nan(), b.is_nan()) {
        (true, true) => 0,
        (false, false) => (ord32(a) - ord32(b)).unsigned_abs(),
        _ => u64::MAX,
    }
}

pub fn ulp_diff_f16(a: u16, b: u16) -> u64 {
    match (f16_is_nan(a), f16_is_nan(b)) {
        (true, true) => 0,
        (false, false) => (ord16(a) - ord16(b)).unsigned_abs(),
        _ => u64::MAX,
    }
}

// ---- ISA semantics ------------------------------------------------------------------------

/// v_min_f32/f64/f16 (IEEE mode, quiet NaNs): a NaN operand yields the other operand, and
/// -0 counts as less than +0.
pub fn isa_min(a: f64, b: f64) -> f64 {
    if b.is_nan() {
        a
    } else if a.is_nan() {
        b
    } else if a < b || (a == 0.0 && b == 0.0 && a.is_sign_negative()) {
        a
    } else {
        b
    }
}

/// v_max_f32/f64/f16: as `isa_min`, with +0 greater than -0.
pub fn isa_max(a: f64, b: f64) -> f64 {
    if b.is_nan() {
        a
    } else if a.is_nan() {
        b
    } else if a > b || (a == 0.0 && b == 0.0 && !a.is_sign_negative()) {
        a
    } else {
        b
    }
}

pub fn isa_min32(a: f32, b: f32) -> f32 {
    isa_min(a as f64, b as f64) as f32
}

pub fn isa_max32(a: f32, b: f32) -> f32 {
    isa_max(a as f64, b as f64) as f32
}

// ---- checking -----------------------------------------------------------------------------

/// Collects mismatches and reports the first ones with their inputs.
pub struct Check {
    what: String,
    shown: Vec<String>,
    failed: usize,
    checked: usize,
}

impl Check {
    pub fn new(what: &str) -> Check {
        Check {
            what: what.to_string(),
            shown: Vec::new(),
            failed: 0,
            checked: 0,
        }
    }

    pub fn ok(&mut self, pass: bool, detail: impl FnOnce() -> String) {
        self.checked += 1;
        if !pass {
            self.failed += 1;
            if self.shown.len() < 24 {
                self.shown.push(detail());
            }
        }
    }

    pub fn eq<T: PartialEq + Debug>(&mut self, got: T, want: T, ctx: impl FnOnce() -> String) {
        let pass = got == want;
        self.ok(pass, || format!("{}: got {got:?}, want {want:?}", ctx()));
    }

    /// Bit-exact, except that any NaN matches any NaN.
    pub fn f32(&mut self, got: f32, want: f32, ctx: impl FnOnce() -> String) {
        let pass = got.to_bits() == want.to_bits() || (got.is_nan() && want.is_nan());
        self.ok(pass, || {
            format!(
                "{}: got {got:e} ({:#010x}), want {want:e} ({:#010x})",
                ctx(),
                got.to_bits(),
                want.to_bits()
            )
        });
    }

    pub fn f64(&mut self, got: f64, want: f64, ctx: impl FnOnce() -> String) {
        let pass = got.to_bits() == want.to_bits() || (got.is_nan() && want.is_nan());
        self.ok(pass, || {
            format!(
                "{}: got {got:e} ({:#018x}), want {want:e} ({:#018x})",
                ctx(),
                got.to_bits(),
                want.to_bits()
            )
        });
    }

    pub fn f16(&mut self, got: u16, want: u16, ctx: impl FnOnce() -> String) {
        let pass = got == want || (f16_is_nan(got) && f16_is_nan(want));
        self.ok(pass, || {
            format!(
                "{}: got {:e} ({got:#06x}), want {:e} ({want:#06x})",
                ctx(),
                f16_to_f64(got),
                f16_to_f64(want)
            )
        });
    }

    pub fn f16_ulp(&mut self, got: u16, want: u16, max_ulp: u64, ctx: impl FnOnce() -> String) {
        let d = ulp_diff_f16(got, want);
        self.ok(d <= max_ulp, || {
            format!(
                "{}: got {:e} ({got:#06x}), want {:e} ({want:#06x}), {d} ulp",
                ctx(),
                f16_to_f64(got),
                f16_to_f64(want)
            )
        });
    }

    /// `|got - want| <= tolerance`, `want` computed in f64.
    #[allow(dead_code)] // used by the ML kernel tests, which include this file
    pub fn close(&mut self, got: f32, want: f64, tolerance: f64, ctx: impl FnOnce() -> String) {
        let err = (got as f64 - want).abs();
        self.ok(err <= tolerance, || {
            format!(
                "{}: got {got:e}, want {want:e}, error {err:e} > {tolerance:e}",
                ctx()
            )
        });
    }

    pub fn finish(self) {
        assert!(self.checked > 0, "{}: nothing was checked", self.what);
        assert!(
            self.failed == 0,
            "{}: {} of {} checks failed; the first ones:\n  {}",
            self.what,
            self.failed,
            self.checked,
            self.shown.join("\n  ")
        );
    }
}
