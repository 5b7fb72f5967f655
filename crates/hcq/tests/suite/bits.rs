//! bits.hip: bit counting, reversal, bit fields, funnel shifts, byte permutes, 3-operand ops.

use crate::common::*;
use crate::BITS;
use hcq::Arg;

const LOCAL: u32 = 64;

/// Random words with runs of zeros and ones at both ends, and a few all-0/all-1 words.
fn words(rng: &mut Rng, n: usize) -> Vec<u32> {
    (0..n)
        .map(|i| match i % 5 {
            0 => rng.u32() >> rng.range(0, 31),
            1 => rng.u32() << rng.range(0, 31),
            2 => rng.pick(&[0, u32::MAX, 1, 0x8000_0000, 0x7fff_ffff]),
            _ => rng.u32(),
        })
        .collect()
}

fn launch3(name: &str, out: &hcq::Buffer, a: &[u32], b: &[u32], c: &[u32]) {
    let n = a.len();
    let (ba, bb, bc) = (upload(a), upload(b), upload(c));
    run(
        BITS,
        name,
        &[
            Arg::Buffer(out),
            Arg::Buffer(&ba),
            Arg::Buffer(&bb),
            Arg::Buffer(&bc),
            Arg::I32(n as i32),
        ],
        groups(n, LOCAL),
        [LOCAL, 1, 1],
    );
}

#[test]
fn bits_count() {
    let n = 2000;
    let mut rng = Rng::new(301);
    let a = words(&mut rng, n);
    let b: Vec<u64> = (0..n)
        .map(|i| match i % 4 {
            0 => rng.next_u64() >> rng.range(0, 63),
            1 => rng.next_u64() << rng.range(0, 63),
            2 => rng.pick(&[0, u64::MAX, 1 << 32, 1 << 31, 1]),
            _ => rng.next_u64(),
        })
        .collect();
    let out = filled(n * 8, 0x5a5a5a5ai32);
    let (ba, bb) = (upload(&a), upload(&b));
    run(
        BITS,
        "bits_count",
        &[
            Arg::Buffer(&out),
            Arg::Buffer(&ba),
            Arg::Buffer(&bb),
            Arg::I32(n as i32),
        ],
        groups(n, LOCAL),
        [LOCAL, 1, 1],
    );
    let got: Vec<i32> = read(&out);
    let mut ck = Check::new("bits_count");
    for i in 0..n {
        let (x, y) = (a[i], b[i]);
        let sx = x as i32;
        let clrsb = (if sx < 0 { !sx } else { sx }).leading_zeros() as i32 - 1;
        let want = [
            x.count_ones() as i32,
            x.leading_zeros() as i32,
            x.trailing_zeros() as i32,
            clrsb,
            y.count_ones() as i32,
            y.leading_zeros() as i32,
            y.trailing_zeros() as i32,
            (x & x.wrapping_sub(1)).count_ones() as i32 + (y ^ (y >> 1)).count_ones() as i32,
        ];
        let names = [
            "popcount",
            "clz",
            "ctz",
            "clrsb",
            "popcount64",
            "clz64",
            "ctz64",
            "mix",
        ];
        for k in 0..8 {
            ck.eq(got[8 * i + k], want[k], || {
                format!("{} a={x:#x} b={y:#x} (i={i})", names[k])
            });
        }
    }
    ck.finish();
}

#[test]
fn bits_field() {
    let n = 2000;
    let mut rng = Rng::new(302);
    let a = words(&mut rng, n);
    let b: Vec<u32> = (0..n).map(|_| rng.u32()).collect();
    let c = words(&mut rng, n);
    let out = filled(n * 8, 0x5a5a5a5au32);
    launch3("bits_field", &out, &a, &b, &c);
    let got: Vec<u32> = read(&out);
    let mut ck = Check::new("bits_field");
    for i in 0..n {
        let (x, y, z) = (a[i], b[i], c[i]);
        let r = (((x as u64) << 32) | y as u64).reverse_bits();
        // v_bfe_u32 / v_bfe_i32 (ISA pseudocode): offset and width are 5-bit fields; the
        // signed form shifts arithmetically and sign-extends from bit width-1; width 0 gives 0.
        let (off, w) = (y & 31, (y >> 8) & 31);
        let mask = (1u32 << w).wrapping_sub(1);
        let ubfe = (x >> off) & mask;
        let sbfe = if w == 0 {
            0
        } else {
            ((((x as i32) >> off) as u32 & mask) << (32 - w)) as i32 >> (32 - w)
        };
        let off2 = y & 15;
        let width = 1 + ((y >> 4) & 15);
        let fmask = ((1u32 << width) - 1) << off2;
        let want = [
            x.reverse_bits(),
            r as u32,
            (r >> 32) as u32,
            ubfe,
            sbfe as u32,
            (x & z) | (y & !z),
            (x & !fmask) | ((z << off2) & fmask),
            (x >> off2) & ((1u32 << width) - 1),
        ];
        let names = [
            "bitreverse",
            "bitreverse64.lo",
            "bitreverse64.hi",
            "ubfe",
            "sbfe",
            "bfi",
            "insert",
            "extract",
        ];
        for k in 0..8 {
            ck.eq(got[8 * i + k], want[k], || {
                format!("{} a={x:#x} b={y:#x} c={z:#x} (i={i})", names[k])
            });
        }
    }
    ck.finish();
}

#[test]
fn bits_funnel() {
    let n = 2000;
    let mut rng = Rng::new(303);
    let a = words(&mut rng, n);
    let b = words(&mut rng, n);
    let c: Vec<u32> = (0..n).map(|_| rng.u32()).collect();
    let out = filled(n * 12, 0x5a5a5a5au32);
    launch3("bits_funnel", &out, &a, &b, &c);
    let got: Vec<u32> = read(&out);
    let mut ck = Check::new("bits_funnel");
    for i in 0..n {
        let (x, y, s) = (a[i], b[i], c[i]);
        let v = ((x as u64) << 32) | y as u64;
        let sh = s & 63;
        let (l, r, ar) = (v << sh, v >> sh, ((v as i64) >> sh) as u64);
        let rot = v.rotate_left(s % 64);
        let want = [
            (v >> (s & 31)) as u32,
            (v >> (8 * (s & 3))) as u32,
            x.rotate_left(s % 32),
            y.rotate_right(s % 32),
            l as u32,
            (l >> 32) as u32,
            r as u32,
            (r >> 32) as u32,
            ar as u32,
            (ar >> 32) as u32,
            rot as u32,
            (rot >> 32) as u32,
        ];
        for (k, w) in want.iter().enumerate() {
            ck.eq(got[12 * i + k], *w, || {
                format!("op {k} a={x:#x} b={y:#x} s={s:#x} (i={i})")
            });
        }
    }
    ck.finish();
}

/// v_perm_b32 (ISA pseudocode): bytes of {s0, s1} (s1 is bytes 0-3) picked by each selector
/// byte; 8-11 replicate a sign bit, 12 gives 0x00, 13 and above give 0xff.
fn perm(s0: u32, s1: u32, sel: u32) -> u32 {
    let data = ((s0 as u64) << 32) | s1 as u64;
    let byte = |k: u64| (data >> (8 * k)) as u8;
    let pick = |s: u32| -> u8 {
        match s {
            0..=7 => byte(s as u64),
            8..=11 => {
                if byte(2 * (s as u64 - 8) + 1) & 0x80 != 0 {
                    0xff
                } else {
                    0
                }
            }
            12 => 0,
            _ => 0xff,
        }
    };
    (0..4)
        .map(|k| (pick((sel >> (8 * k)) & 0xff) as u32) << (8 * k))
        .fold(0, |acc, v| acc | v)
}

#[test]
fn bits_logic() {
    let n = 2000;
    let mut rng = Rng::new(304);
    let a = words(&mut rng, n);
    let b = words(&mut rng, n);
    // Selectors for v_perm_b32 cover 0..15 in each byte.
    let c: Vec<u32> = (0..n)
        .map(|i| {
            if i % 2 == 0 {
                rng.u32() & 0x0f0f_0f0f
            } else {
                rng.u32()
            }
        })
        .collect();
    let out = filled(n * 16, 0x5a5a5a5au32);
    launch3("bits_logic", &out, &a, &b, &c);
    let got: Vec<u32> = read(&out);
    let mut ck = Check::new("bits_logic");
    for i in 0..n {
        let (x, y, z) = (a[i], b[i], c[i]);
        let (sx, sy, sz) = (x as i32, y as i32, z as i32);
        let (lo, hi) = (sy.min(sz), sy.max(sz));
        let sad = (0..4)
            .map(|k| ((x >> (8 * k)) as u8).abs_diff((y >> (8 * k)) as u8) as u32)
            .sum::<u32>()
            + (z & 0xffff);
        let lerp = (0..4)
            .map(|k| {
                ((((x >> (8 * k)) & 0xff) + ((y >> (8 * k)) & 0xff) + ((z >> (8 * k)) & 1)) >> 1)
                    << (8 * k)
            })
            .fold(0, |acc, v| acc | v);
        let want = [
            x.swap_bytes(),
            perm(x, y, z),
            (x << (z & 7)).wrapping_add(y),
            x.wrapping_add(y) << (z & 7),
            x ^ y ^ z,
            (x & y) | z,
            x | y | z,
            (x ^ y).wrapping_add(z),
            sx.min(sy).min(sz) as u32,
            x.max(y).max(z),
            sx.clamp(lo, hi) as u32,
            sad,
            lerp,
            !(x & y),
            (x & 0xff00_ff00) | ((y >> 8) & 0x00ff_00ff),
            x.wrapping_mul(0x0101_0101) >> 24,
        ];
        let names = [
            "bswap",
            "perm",
            "lshl_add",
            "add_lshl",
            "xor3",
            "and_or",
            "or3",
            "xad",
            "min3_i32",
            "max3_u32",
            "med3_i32",
            "sad_u8",
            "lerp_u8",
            "nand",
            "byte_merge",
            "byte_sum",
        ];
        for k in 0..16 {
            ck.eq(got[16 * i + k], want[k], || {
                format!("{} a={x:#x} b={y:#x} c={z:#x} (i={i})", names[k])
            });
        }
    }
    ck.finish();
}
