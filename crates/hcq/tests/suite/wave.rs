//! wave.hip: cross-lane operations in wave32, modeled lane by lane on the host.

use crate::common::*;
use crate::WAVE;
use hcq::Arg;

const LOCAL: u32 = 64;
const WAVES: usize = 40; // 20 workgroups of two waves
const N: usize = WAVES * 32;

fn inputs(seed: u64) -> Vec<i32> {
    let mut rng = Rng::new(seed);
    (0..N).map(|_| rng.i32()).collect()
}

fn launch(name: &str, out: &hcq::Buffer, a: &hcq::Buffer) {
    run(
        WAVE,
        name,
        &[Arg::Buffer(out), Arg::Buffer(a), Arg::I32(N as i32)],
        groups(N, LOCAL),
        [LOCAL, 1, 1],
    );
}

/// Lanes `0..32` of `mask` set where `pred` holds.
fn ballot(xs: &[i32], pred: impl Fn(usize, i32) -> bool) -> u32 {
    xs.iter()
        .enumerate()
        .fold(0, |m, (l, &x)| if pred(l, x) { m | (1 << l) } else { m })
}

#[test]
fn wave_lanes() {
    let a = inputs(801);
    let (out, ba) = (filled(8 * N, 0x5a5a5a5ai32), upload(&a));
    launch("wave_lanes", &out, &ba);
    let got: Vec<i32> = read(&out);
    let mut ck = Check::new("wave_lanes");
    for (w, xs) in a.chunks(32).enumerate() {
        let b = ballot(xs, |_, x| x & 1 != 0);
        let first2 = xs.iter().copied().find(|x| x & 2 != 0);
        let b8 = ballot(xs, |_, x| x & 4 != 0 && x & 8 != 0);
        for (l, &x) in xs.iter().enumerate() {
            let i = w * 32 + l;
            let want = [
                l as i32,
                xs[0],
                xs[5],
                xs[(xs[0] & 31) as usize],
                b as i32,
                (b & ((1u32 << l) - 1)).count_ones() as i32,
                if x & 2 != 0 { first2.unwrap() } else { -1 },
                if x & 4 != 0 { b8 as i32 } else { 0 },
            ];
            let names = [
                "mbcnt lane id",
                "readfirstlane",
                "readlane 5",
                "readlane s",
                "ballot",
                "mbcnt(ballot)",
                "readfirstlane (divergent)",
                "ballot (divergent)",
            ];
            for k in 0..8 {
                ck.eq(got[8 * i + k], want[k], || {
                    format!("{} wave {w} lane {l}", names[k])
                });
            }
        }
    }
    ck.finish();
}

#[test]
fn wave_shuffle() {
    let a = inputs(802);
    let (out, ba) = (filled(8 * N, 0x5a5a5a5ai32), upload(&a));
    launch("wave_shuffle", &out, &ba);
    let got: Vec<i32> = read(&out);
    let mut ck = Check::new("wave_shuffle");
    let (sel_lo, sel_hi) = (0x1234_abcdu64, 0x0f5e_6789u64);
    let sel = (sel_hi << 32) | sel_lo;
    for (w, xs) in a.chunks(32).enumerate() {
        // ds_permute: lane l pushes its value to lane (7 l + 3) mod 32 (a permutation).
        let mut pushed = [0i32; 32];
        for (l, &x) in xs.iter().enumerate() {
            pushed[(l * 7 + 3) & 31] = x;
        }
        for (l, &x) in xs.iter().enumerate() {
            let i = w * 32 + l;
            let row = l & 16;
            let nib = ((sel >> (4 * (l & 15))) & 15) as usize;
            let want = [
                // Quad-permute mode [3,2,1,0].
                xs[(l & !3) | (3 - (l & 3))],
                // Bit-mask mode: lane ((l & and) | or) ^ xor.
                xs[l ^ 1],
                xs[((l & 0x10) | 3) ^ 8],
                xs[l ^ 16],
                xs[((x as u32 >> 8) & 31) as usize],
                pushed[l],
                // permlane16: within the row; permlanex16: from the other row.
                xs[row + nib],
                xs[(row ^ 16) + (l & 15)],
            ];
            let names = [
                "swizzle quad_perm",
                "swizzle xor 1",
                "swizzle and/or/xor",
                "swizzle xor 16",
                "bpermute",
                "permute",
                "permlane16",
                "permlanex16",
            ];
            for k in 0..8 {
                ck.eq(got[8 * i + k], want[k], || {
                    format!("{} wave {w} lane {l}", names[k])
                });
            }
        }
    }
    ck.finish();
}

/// DPP16 source lane for lane `l` (None: out of the row, or invalid).
fn dpp_src(ctrl: u32, l: usize) -> Option<usize> {
    let (row, r) = (l & !15, l & 15);
    let n = (ctrl & 15) as usize;
    match ctrl {
        0x00..=0xff => Some((l & !3) | ((ctrl as usize >> (2 * (l & 3))) & 3)),
        0x101..=0x10f => (r + n < 16).then(|| l + n),
        0x111..=0x11f => (r >= n).then(|| l - n),
        0x121..=0x12f => Some(row + (r + 16 - n) % 16),
        0x140 => Some(row + 15 - r),
        0x141 => Some(row + (r & 8) + 7 - (r & 7)),
        0x150..=0x15f => Some(row + n),
        0x160..=0x16f => Some(row + (r ^ n)),
        _ => panic!("unmodeled dpp control {ctrl:#x}"),
    }
}

#[test]
fn wave_dpp() {
    let a = inputs(803);
    let (out, ba) = (filled(10 * N, 0x5a5a5a5ai32), upload(&a));
    launch("wave_dpp", &out, &ba);
    let got: Vec<i32> = read(&out);
    let mut ck = Check::new("wave_dpp");
    // (control, value for an invalid source: 0 with bound_ctrl, else the old value -7).
    let cases = [
        (0x1b, 0),
        (0x111, -7),
        (0x103, 0),
        (0x125, -7),
        (0x140, 0),
        (0x141, 0),
        (0x153, 0),
        (0x165, 0),
    ];
    let names = [
        "quad_perm",
        "row_shr:1",
        "row_shl:3",
        "row_ror:5",
        "row_mirror",
        "row_half_mirror",
        "row_share:3",
        "row_xmask:5",
    ];
    let dpp8 = [1usize, 0, 3, 2, 7, 7, 4, 5];
    for (w, xs) in a.chunks(32).enumerate() {
        for (l, &x) in xs.iter().enumerate() {
            let i = w * 32 + l;
            for (k, &(ctrl, invalid)) in cases.iter().enumerate() {
                let want = dpp_src(ctrl, l).map_or(invalid, |s| xs[s]);
                ck.eq(got[10 * i + k], want, || {
                    format!("{} wave {w} lane {l}", names[k])
                });
            }
            ck.eq(got[10 * i + 8], xs[(l & !7) | dpp8[l & 7]], || {
                format!("dpp8 wave {w} lane {l}")
            });
            let shr8 = dpp_src(0x118, l).map_or(100, |s| xs[s]);
            ck.eq(got[10 * i + 9], shr8.wrapping_add(x), || {
                format!("row_shr:8 + x wave {w} lane {l}")
            });
        }
    }
    ck.finish();
}

#[test]
fn wave_reduce() {
    let a = inputs(804);
    let mut rng = Rng::new(805);
    let f: Vec<f32> = (0..N).map(|_| rng.f32_exp(-10, 10)).collect();
    let (oi, of, ba, bf) = (
        filled(2 * N, 0x5a5a5a5ai32),
        filled(N, f32::NAN),
        upload(&a),
        upload(&f),
    );
    run(
        WAVE,
        "wave_reduce",
        &[
            Arg::Buffer(&oi),
            Arg::Buffer(&of),
            Arg::Buffer(&ba),
            Arg::Buffer(&bf),
            Arg::I32(N as i32),
        ],
        groups(N, LOCAL),
        [LOCAL, 1, 1],
    );
    let (gi, gf): (Vec<i32>, Vec<f32>) = (read(&oi), read(&of));
    let mut ck = Check::new("wave_reduce");
    for w in 0..WAVES {
        let xs = &a[w * 32..w * 32 + 32];
        let sum = xs.iter().fold(0i32, |s, &v| s.wrapping_add(v));
        let max = *xs.iter().max().unwrap();
        // The f32 butterfly in the kernel's order: lane l adds lane l ^ m for m = 1, 2, 4, 8, 16.
        let mut v: Vec<f32> = f[w * 32..w * 32 + 32].to_vec();
        for m in [1, 2, 4, 8, 16] {
            v = (0..32).map(|l| v[l] + v[l ^ m]).collect();
        }
        for (l, &vl) in v.iter().enumerate() {
            let i = w * 32 + l;
            ck.eq(gi[2 * i], sum, || {
                format!("dpp/permlanex16 sum wave {w} lane {l}")
            });
            ck.eq(gi[2 * i + 1], max, || {
                format!("swizzle max wave {w} lane {l}")
            });
            ck.f32(gf[i], vl, || format!("dpp f32 sum wave {w} lane {l}"));
        }
    }
    ck.finish();
}
