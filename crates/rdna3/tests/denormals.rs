//! Denormals: the f32 transcendental unit flushes them whatever MODE says; every other float
//! VALU operation flushes inputs and results as MODE.FP_DENORM says (f32 in bits 5:4, f16 and
//! f64 in bits 7:6; bit 0 of each pair keeps inputs, bit 1 keeps results); MODE starts from
//! RSRC1's FLOAT_MODE and changes with s_denorm_mode / s_setreg. The sources are listed in
//! `src/exec/denorm.rs`. Expected values are worked out by hand (exact powers of two and
//! neighbours of the denormal boundary), not by the interpreter's own float code.
//! Encodings from `llvm-mc-19 -arch=amdgcn -mcpu=gfx1100 -show-encoding`.

mod common;

use common::{run_with_cache, Args, Buffer, HostMemory, FTZ_KERNELS};
use rdna3::decode::decode;
use rdna3::exec::{ExecContext, Wave};
use rdna3::operand::{EXEC_LO, VCC_LO};
use rdna3::{run_dispatch, CodeCache, Dispatch};

fn run(words: &[u32], wave: &mut Wave) {
    let decoded = decode(words).unwrap();
    let mem = HostMemory::new(&[]);
    let mut lds = [0u8; 64];
    let mut ctx = ExecContext {
        mem: &mem,
        lds: &mut lds,
    };
    wave.execute(&mut ctx, &decoded.inst, decoded.words as u64 * 4)
        .unwrap();
}

/// A wave with all lanes on and MODE.FP_DENORM = `fp_denorm`.
fn wave(fp_denorm: u32) -> Wave {
    let mut wave = Wave::new(0x1000);
    wave.sgpr[usize::from(EXEC_LO)] = u32::MAX;
    wave.mode = fp_denorm << 4;
    wave
}

const LARGEST_DENORMAL: u32 = 0x007f_ffff;
const NEG_LARGEST_DENORMAL: u32 = 0x807f_ffff;
const SMALLEST_NORMAL: u32 = 0x0080_0000;
/// 3.4e38: its reciprocal, 2.94e-39, is denormal.
const HUGE: u32 = 0x7f7f_c99e;
const NEG_HUGE: u32 = 0xff7f_c99e;
/// 1e-38, a denormal.
const TINY: u32 = 0x006c_e3ee;
const NEG_ZERO: u32 = 0x8000_0000;
const INF: u32 = 0x7f80_0000;
const NEG_INF: u32 = 0xff80_0000;
const QNAN: u32 = 0x7fc0_0000;
/// Any NaN is accepted where this is expected (the sign of a generated NaN is not pinned).
const SOME_NAN: u32 = 0xffff_ffff;
const ONE: u32 = 0x3f80_0000;
const TWO_126: u32 = 0x7e80_0000;
const TWO_127: u32 = 0x7f00_0000;

fn same_f32(got: u32, want: u32) -> bool {
    if want == SOME_NAN || f32::from_bits(want).is_nan() {
        f32::from_bits(got).is_nan()
    } else {
        got == want
    }
}

/// Runs a VOP1 `v0 = op(v1)` with one (input, expected) pair per lane under every FP_DENORM
/// value; the f32 transcendentals give the same flushed results in all of them.
fn check_flushing_unary(name: &str, words: &[u32], cases: &[(u32, u32)]) {
    assert!(cases.len() <= 32);
    for fp_denorm in 0..16 {
        let mut w = wave(fp_denorm);
        for (lane, (input, _)) in cases.iter().enumerate() {
            w.vgpr[1][lane] = *input;
        }
        run(words, &mut w);
        for (lane, (input, want)) in cases.iter().enumerate() {
            let got = w.vgpr[0][lane];
            assert!(
                same_f32(got, *want),
                "{name}({input:#010x}) under FP_DENORM {fp_denorm:#x}: {got:#010x}, want {want:#010x}"
            );
        }
    }
}

#[test]
fn rcp_f32_flushes_denormal_inputs_and_results_in_every_mode() {
    let cases = [
        (LARGEST_DENORMAL, INF),
        (NEG_LARGEST_DENORMAL, NEG_INF),
        (TINY, INF),
        (SMALLEST_NORMAL, TWO_126),
        (TWO_126, SMALLEST_NORMAL),
        (TWO_127, 0), // 2^-127 is denormal
        (HUGE, 0),
        (NEG_HUGE, NEG_ZERO),
        (0, INF),
        (NEG_ZERO, NEG_INF),
        (INF, 0),
        (NEG_INF, NEG_ZERO),
        (QNAN, QNAN),
        (0x4080_0000, 0x3e80_0000), // 4 -> 0.25
    ];
    check_flushing_unary("v_rcp_f32", &[0x7e005501], &cases);
    check_flushing_unary("v_rcp_iflag_f32", &[0x7e005701], &cases);
    // The input modifier applies first; flushing keeps the sign it gives.
    // v_rcp_f32_e64 v0, -v1
    check_flushing_unary(
        "v_rcp_f32_e64 -v1",
        &[0xd5aa0000, 0x20000101],
        &[(LARGEST_DENORMAL, NEG_INF), (HUGE, NEG_ZERO)],
    );
}

#[test]
fn rsq_sqrt_log_exp_f32_flush_in_every_mode() {
    let four = 0x4080_0000;
    let minus_one = 0xbf80_0000;
    check_flushing_unary(
        "v_rsq_f32",
        &[0x7e005d01],
        &[
            (LARGEST_DENORMAL, INF),
            (NEG_LARGEST_DENORMAL, NEG_INF),
            (TINY, INF),
            (SMALLEST_NORMAL, 0x5f00_0000), // 2^63
            (0, INF),
            (NEG_ZERO, NEG_INF),
            (INF, 0),
            (NEG_INF, SOME_NAN),
            (four, 0x3f00_0000),
            (QNAN, QNAN),
        ],
    );
    check_flushing_unary(
        "v_sqrt_f32",
        &[0x7e006701],
        &[
            (LARGEST_DENORMAL, 0),
            (NEG_LARGEST_DENORMAL, NEG_ZERO),
            (TINY, 0),
            (SMALLEST_NORMAL, 0x2000_0000), // 2^-63
            (0, 0),
            (NEG_ZERO, NEG_ZERO),
            (INF, INF),
            (NEG_INF, SOME_NAN),
            (minus_one, SOME_NAN),
            (four, 0x4000_0000),
            (QNAN, QNAN),
        ],
    );
    check_flushing_unary(
        "v_log_f32",
        &[0x7e004f01],
        &[
            (LARGEST_DENORMAL, NEG_INF),
            (NEG_LARGEST_DENORMAL, NEG_INF),
            (TINY, NEG_INF),
            (SMALLEST_NORMAL, 0xc2fc_0000), // -126
            (0x0d80_0000, 0xc2c8_0000),     // log2(2^-100) = -100
            (ONE, 0),
            (0, NEG_INF),
            (NEG_ZERO, NEG_INF),
            (INF, INF),
            (NEG_INF, SOME_NAN),
            (minus_one, SOME_NAN),
            (QNAN, QNAN),
        ],
    );
    check_flushing_unary(
        "v_exp_f32",
        &[0x7e004b01],
        &[
            (0xc2fc_0000, SMALLEST_NORMAL), // 2^-126
            (0xc2fe_0000, 0),               // 2^-127 is denormal
            (0xc302_0000, 0),               // 2^-130
            (LARGEST_DENORMAL, ONE),
            (NEG_LARGEST_DENORMAL, ONE),
            (0, ONE),
            (NEG_ZERO, ONE),
            (0x4040_0000, 0x4100_0000), // 2^3
            (0x42fe_0000, TWO_127),
            (0x4300_0000, INF), // 2^128
            (INF, INF),
            (NEG_INF, 0),
            (QNAN, QNAN),
        ],
    );
}

/// Where a case's result is read.
#[derive(Clone, Copy)]
enum Out {
    /// `dwords` VGPRs from this one, compared under `mask`.
    Vgpr {
        first: usize,
        dwords: usize,
        mask: u64,
    },
    /// The VCC mask.
    Vcc,
}

/// One instruction on one set of inputs (the same in every lane).
struct Case<'a> {
    name: &'a str,
    words: &'a [u32],
    /// VGPRs and their values (64-bit values fill a register pair).
    inputs: &'a [(usize, u64)],
    out: Out,
    /// The result for each denormal mode of the instruction's precision: index 0 flushes
    /// inputs and results, 1 keeps inputs, 2 keeps results, 3 keeps both.
    expected: [u64; 4],
}

const F32: Out = Out::Vgpr {
    first: 0,
    dwords: 1,
    mask: 0xffff_ffff,
};
const F16: Out = Out::Vgpr {
    first: 0,
    dwords: 1,
    mask: 0xffff,
};
const F64: Out = Out::Vgpr {
    first: 0,
    dwords: 2,
    mask: u64::MAX,
};

/// Runs every case under all 16 FP_DENORM values; `shift` picks the pair of bits that
/// applies (0: f32, 2: f16/f64). The other pair must not matter.
fn check_cases(cases: &[Case<'_>], shift: u32) {
    for case in cases {
        for fp_denorm in 0..16u32 {
            let mut w = wave(fp_denorm);
            for &(reg, value) in case.inputs {
                for lane in 0..32 {
                    w.vgpr[reg][lane] = value as u32;
                    if value >> 32 != 0 {
                        w.vgpr[reg + 1][lane] = (value >> 32) as u32;
                    }
                }
            }
            w.sgpr[usize::from(VCC_LO)] = 0x1234_5678;
            run(case.words, &mut w);
            let want = case.expected[((fp_denorm >> shift) & 3) as usize];
            for lane in 0..32 {
                let got = match case.out {
                    Out::Vgpr {
                        first,
                        dwords,
                        mask,
                    } => {
                        let mut value = u64::from(w.vgpr[first][lane]);
                        if dwords == 2 {
                            value |= u64::from(w.vgpr[first + 1][lane]) << 32;
                        }
                        value & mask
                    }
                    Out::Vcc => u64::from(w.vcc()),
                };
                assert_eq!(
                    got, want,
                    "{} lane {lane} under FP_DENORM {fp_denorm:#x}: {got:#x}, want {want:#x}",
                    case.name
                );
            }
        }
    }
}

#[test]
fn f32_arithmetic_follows_the_f32_denormal_mode() {
    let f1 = u64::from(ONE);
    let half = 0x3f00_0000u64;
    let two = 0x4000_0000u64;
    let ld = u64::from(LARGEST_DENORMAL);
    let sn = u64::from(SMALLEST_NORMAL);
    check_cases(
        &[
            Case {
                // Denormal inputs, normal sum.
                name: "v_add_f32 0x7fffff + 0x1",
                words: &[0x06000501],
                inputs: &[(1, ld), (2, 1)],
                out: F32,
                expected: [0, sn, 0, sn],
            },
            Case {
                // Normal inputs, denormal sum.
                name: "v_add_f32 0x800001 - 0x800000",
                words: &[0x06000501],
                inputs: &[(1, 0x0080_0001), (2, 0x8080_0000)],
                out: F32,
                expected: [0, 0, 1, 1],
            },
            Case {
                // A flushed negative result is -0.
                name: "v_add_f32 -0x800001 + 0x800000",
                words: &[0x06000501],
                inputs: &[(1, 0x8080_0001), (2, sn)],
                out: F32,
                expected: [0x8000_0000, 0x8000_0000, 0x8000_0001, 0x8000_0001],
            },
            Case {
                name: "v_mul_f32 0x7fffff * 2",
                words: &[0x10000501],
                inputs: &[(1, ld), (2, two)],
                out: F32,
                expected: [0, 0x00ff_fffe, 0, 0x00ff_fffe],
            },
            Case {
                name: "v_mul_f32 0x800000 * 0.5",
                words: &[0x10000501],
                inputs: &[(1, sn), (2, half)],
                out: F32,
                expected: [0, 0, 0x0040_0000, 0x0040_0000],
            },
            Case {
                name: "v_fma_f32 1 * 0x7fffff + 0x1",
                words: &[0xd6130000, 0x040e0501],
                inputs: &[(1, f1), (2, ld), (3, 1)],
                out: F32,
                expected: [0, sn, 0, sn],
            },
            Case {
                name: "v_fma_f32 0x800000 * 0.5 + 0",
                words: &[0xd6130000, 0x040e0501],
                inputs: &[(1, sn), (2, half), (3, 0)],
                out: F32,
                expected: [0, 0, 0x0040_0000, 0x0040_0000],
            },
            Case {
                // The accumulator is an input too.
                name: "v_fmac_f32 0x7fffff += 0x800000 * 1",
                words: &[0x56000501],
                inputs: &[(0, ld), (1, sn), (2, f1)],
                out: F32,
                expected: [sn, 0x00ff_ffff, sn, 0x00ff_ffff],
            },
            Case {
                name: "v_fma_mix_f32 1 * 0x7fffff + 0x1 (f32 sources)",
                words: &[0xcc200000, 0x040e0501],
                inputs: &[(1, f1), (2, ld), (3, 1)],
                out: F32,
                expected: [0, sn, 0, sn],
            },
            Case {
                name: "v_min_f32 0x7fffff, 0x1",
                words: &[0x1e000501],
                inputs: &[(1, ld), (2, 1)],
                out: F32,
                expected: [0, 0, 0, 1],
            },
            Case {
                name: "v_max_f32 -0x7fffff, -0x1",
                words: &[0x20000501],
                inputs: &[(1, u64::from(NEG_LARGEST_DENORMAL)), (2, 0x8000_0001)],
                out: F32,
                expected: [0x8000_0000, 0x8000_0000, 0x8000_0000, 0x8000_0001],
            },
            Case {
                name: "v_ldexp_f32 0x800000, -1",
                words: &[0xd71c0000, 0x00020501],
                inputs: &[(1, sn), (2, 0xffff_ffff)],
                out: F32,
                expected: [0, 0, 0x0040_0000, 0x0040_0000],
            },
            Case {
                name: "v_ldexp_f32 0x400000, 1",
                words: &[0xd71c0000, 0x00020501],
                inputs: &[(1, 0x0040_0000), (2, 1)],
                out: F32,
                expected: [0, sn, 0, sn],
            },
            Case {
                name: "v_floor_f32 -0x7fffff",
                words: &[0x7e004901],
                inputs: &[(1, u64::from(NEG_LARGEST_DENORMAL))],
                out: F32,
                expected: [0x8000_0000, 0xbf80_0000, 0x8000_0000, 0xbf80_0000],
            },
            Case {
                name: "v_cvt_floor_i32_f32 -0x7fffff",
                words: &[0x7e001b01],
                inputs: &[(1, u64::from(NEG_LARGEST_DENORMAL))],
                out: F32,
                expected: [0, 0xffff_ffff, 0, 0xffff_ffff],
            },
            Case {
                // The f64 result is normal: only the f32 input bit matters.
                name: "v_cvt_f64_f32 0x7fffff",
                words: &[0x7e002101],
                inputs: &[(1, ld)],
                out: F64,
                expected: [0, 0x380f_ffff_c000_0000, 0, 0x380f_ffff_c000_0000],
            },
            Case {
                // 2^-130 is a normal f64 and a denormal f32.
                name: "v_cvt_f32_f64 2^-130",
                words: &[0x7e001f02],
                inputs: &[(2, 0x37d0_0000_0000_0000)],
                out: F32,
                expected: [0, 0, 0x0008_0000, 0x0008_0000],
            },
            Case {
                name: "v_sin_f32 2^-149",
                words: &[0x7e006b01],
                inputs: &[(1, 1)],
                out: F32,
                // sin(2π · 2^-149) = 6.28 · 2^-149, which rounds to 6 · 2^-149.
                expected: [0, 0, 0, 6],
            },
            Case {
                name: "v_cos_f32 0x7fffff",
                words: &[0x7e006d01],
                inputs: &[(1, ld)],
                out: F32,
                expected: [u64::from(ONE); 4],
            },
            Case {
                name: "v_cmp_gt_f32 0x7fffff > 0",
                words: &[0x7c280501],
                inputs: &[(1, ld), (2, 0)],
                out: Out::Vcc,
                expected: [0, 0xffff_ffff, 0, 0xffff_ffff],
            },
            Case {
                // V_CMP_CLASS reports the encoding: +denormal (bit 7) in every mode.
                name: "v_cmp_class_f32 0x7fffff, +denormal",
                words: &[0x7cfc0501],
                inputs: &[(1, ld), (2, 0x80)],
                out: Out::Vcc,
                expected: [0xffff_ffff; 4],
            },
            Case {
                name: "v_cmp_class_f32 0x7fffff, +zero",
                words: &[0x7cfc0501],
                inputs: &[(1, ld), (2, 0x40)],
                out: Out::Vcc,
                expected: [0; 4],
            },
            Case {
                // Untyped: no flushing.
                name: "v_mov_b32 0x7fffff",
                words: &[0x7e000301],
                inputs: &[(1, ld)],
                out: F32,
                expected: [ld; 4],
            },
            Case {
                name: "v_cndmask_b32 0x7fffff",
                words: &[0x02000501],
                inputs: &[(1, ld), (2, ld)],
                out: F32,
                expected: [ld; 4],
            },
            Case {
                // Flushed in every mode (RDNA4 ISA §7.2.4).
                name: "v_fma_dx9_zero_f32 1 * 0x7fffff + 0x1",
                words: &[0xd6090000, 0x040e0501],
                inputs: &[(1, f1), (2, ld), (3, 1)],
                out: F32,
                expected: [0; 4],
            },
            Case {
                name: "v_cubema_f32 0x7fffff, 0, 0",
                words: &[0xd60f0000, 0x040e0501],
                inputs: &[(1, ld), (2, 0), (3, 0)],
                out: F32,
                expected: [0; 4],
            },
        ],
        0,
    );
}

#[test]
fn dual_issue_halves_follow_the_f32_denormal_mode() {
    // v_dual_add_f32 v0, v1, v2 :: v_dual_mul_f32 v3, v4, v5
    let words = [0xc9060501, 0x00020b04];
    for fp_denorm in 0..4 {
        let mut w = wave(fp_denorm);
        for lane in 0..32 {
            (w.vgpr[1][lane], w.vgpr[2][lane]) = (0x0080_0001, 0x8080_0000); // sum 2^-149
            (w.vgpr[4][lane], w.vgpr[5][lane]) = (LARGEST_DENORMAL, 0x4000_0000);
            // × 2
        }
        run(&words, &mut w);
        let keep_in = fp_denorm & 1 != 0;
        let keep_out = fp_denorm & 2 != 0;
        assert_eq!(w.vgpr[0][7], u32::from(keep_out), "add, mode {fp_denorm}");
        let product = if keep_in { 0x00ff_fffe } else { 0 };
        assert_eq!(w.vgpr[3][7], product, "mul, mode {fp_denorm}");
    }
}

#[test]
fn f16_and_f64_arithmetic_follow_the_f16_f64_denormal_mode() {
    check_cases(
        &[
            Case {
                name: "v_add_f16 0x3ff + 0x1",
                words: &[0x64000501],
                inputs: &[(1, 0x03ff), (2, 0x0001)],
                out: F16,
                expected: [0, 0x0400, 0, 0x0400],
            },
            Case {
                name: "v_add_f16 0x401 - 0x400",
                words: &[0x64000501],
                inputs: &[(1, 0x0401), (2, 0x8400)],
                out: F16,
                expected: [0, 0, 1, 1],
            },
            Case {
                name: "v_mul_f16 0x400 * 0.5",
                words: &[0x6a000501],
                inputs: &[(1, 0x0400), (2, 0x3800)],
                out: F16,
                expected: [0, 0, 0x0200, 0x0200],
            },
            Case {
                name: "v_fmac_f16 0x3ff += 1 * 0x1",
                words: &[0x6c000501],
                inputs: &[(0, 0x03ff), (1, 0x3c00), (2, 0x0001)],
                out: F16,
                expected: [0, 0x0400, 0, 0x0400],
            },
            Case {
                // f16 -> f32: the input is flushed by the f16/f64 bits.
                name: "v_cvt_f32_f16 0x3ff",
                words: &[0x7e001701],
                inputs: &[(1, 0x03ff)],
                out: F32,
                expected: [0, 0x387f_c000, 0, 0x387f_c000],
            },
            Case {
                // f32 -> f16: 2^-20 is a denormal f16, flushed by the f16/f64 bits.
                name: "v_cvt_f16_f32 2^-20",
                words: &[0x7e001501],
                inputs: &[(1, 0x3580_0000)],
                out: F16,
                expected: [0, 0, 0x0010, 0x0010],
            },
            Case {
                name: "v_cvt_pk_rtz_f16_f32 2^-20, 1",
                words: &[0x5e000501],
                inputs: &[(1, 0x3580_0000), (2, u64::from(ONE))],
                out: F32,
                expected: [0x3c00_0000, 0x3c00_0000, 0x3c00_0010, 0x3c00_0010],
            },
            Case {
                // Low halves: denormal inputs, normal sum; high halves: the reverse.
                name: "v_pk_add_f16",
                words: &[0xcc0f4000, 0x18020501],
                inputs: &[(1, 0x0401_03ff), (2, 0x8400_0001)],
                out: F32,
                expected: [0, 0x0000_0400, 0x0001_0000, 0x0001_0400],
            },
            Case {
                name: "v_pk_fmac_f16",
                words: &[0x78000501],
                inputs: &[(0, 0x8400_03ff), (1, 0x3c00_3c00), (2, 0x0401_0001)],
                out: F32,
                expected: [0, 0x0000_0400, 0x0001_0000, 0x0001_0400],
            },
            Case {
                name: "v_fma_mixlo_f16 1 * 0x3ff + 0x1 (f16 sources)",
                words: &[0xcc214000, 0x1c0e0501],
                inputs: &[(1, 0x3c00), (2, 0x03ff), (3, 0x0001)],
                out: F16,
                expected: [0, 0x0400, 0, 0x0400],
            },
            Case {
                name: "v_cmp_gt_f16 0x1 > 0",
                words: &[0x7c080501],
                inputs: &[(1, 0x0001), (2, 0)],
                out: Out::Vcc,
                expected: [0, 0xffff_ffff, 0, 0xffff_ffff],
            },
            Case {
                name: "v_cmp_class_f16 0x1, +denormal",
                words: &[0x7cfa0501],
                inputs: &[(1, 0x0001), (2, 0x80)],
                out: Out::Vcc,
                expected: [0xffff_ffff; 4],
            },
            Case {
                // "DOT2_F16_F16 supports denorms": kept in every mode.
                name: "v_dot2_f16_f16 1 * 2^-24",
                words: &[0xd6660000, 0x040e0501],
                inputs: &[(1, 0x3c00), (2, 0x0001), (3, 0)],
                out: F16,
                expected: [1; 4],
            },
            Case {
                // "DOT2_BF16_BF16 disables all denorms": flushed in every mode.
                name: "v_dot2_bf16_bf16 1 * bf16 0x7f",
                words: &[0xd6670000, 0x040e0501],
                inputs: &[(1, 0x3f80), (2, 0x007f), (3, 0)],
                out: F16,
                expected: [0; 4],
            },
            Case {
                name: "v_add_f64 0xfffffffffffff + 0x1",
                words: &[0xd7270000, 0x00020902],
                inputs: &[(2, 0x000f_ffff_ffff_ffff), (4, 1)],
                out: F64,
                expected: [0, 1 << 52, 0, 1 << 52],
            },
            Case {
                name: "v_mul_f64 2^-1022 * 0.5",
                words: &[0xd7280000, 0x00020902],
                inputs: &[(2, 1 << 52), (4, 0x3fe0_0000_0000_0000)],
                out: F64,
                expected: [0, 0, 1 << 51, 1 << 51],
            },
            Case {
                name: "v_cmp_gt_f64 2^-1074 > 0",
                words: &[0x7c480902],
                inputs: &[(2, 1), (4, 0)],
                out: Out::Vcc,
                expected: [0, 0xffff_ffff, 0, 0xffff_ffff],
            },
        ],
        2,
    );
}

#[test]
fn f16_and_f64_transcendentals_follow_the_mode() {
    check_cases(
        &[
            Case {
                name: "v_rcp_f16 0x3ff",
                words: &[0x7e00a901],
                inputs: &[(1, 0x03ff)],
                out: F16,
                expected: [0x7c00, 0x7401, 0x7c00, 0x7401],
            },
            Case {
                // 1 / 65504 = 1.53e-5, f16 denormal 0x100.
                name: "v_rcp_f16 0x7bff",
                words: &[0x7e00a901],
                inputs: &[(1, 0x7bff)],
                out: F16,
                expected: [0, 0, 0x0100, 0x0100],
            },
            Case {
                name: "v_rcp_f16 -0",
                words: &[0x7e00a901],
                inputs: &[(1, 0x8000)],
                out: F16,
                expected: [0xfc00; 4],
            },
            Case {
                name: "v_sqrt_f16 2^-16",
                words: &[0x7e00ab01],
                inputs: &[(1, 0x0100)],
                out: F16,
                expected: [0, 0x1c00, 0, 0x1c00],
            },
            Case {
                name: "v_rsq_f16 2^-16",
                words: &[0x7e00ad01],
                inputs: &[(1, 0x0100)],
                out: F16,
                expected: [0x7c00, 0x5c00, 0x7c00, 0x5c00],
            },
            Case {
                name: "v_log_f16 2^-15",
                words: &[0x7e00af01],
                inputs: &[(1, 0x0200)],
                out: F16,
                expected: [0xfc00, 0xcb80, 0xfc00, 0xcb80],
            },
            Case {
                name: "v_exp_f16 -15",
                words: &[0x7e00b101],
                inputs: &[(1, 0xcb80)],
                out: F16,
                expected: [0, 0, 0x0200, 0x0200],
            },
            Case {
                name: "v_exp_f16 -14",
                words: &[0x7e00b101],
                inputs: &[(1, 0xcb00)],
                out: F16,
                expected: [0x0400; 4],
            },
            Case {
                // sin(2π · 2^-24) = 3.7e-7, f16 denormal 6 · 2^-24.
                name: "v_sin_f16 2^-24",
                words: &[0x7e00c101],
                inputs: &[(1, 0x0001)],
                out: F16,
                expected: [0, 0, 0, 0x0006],
            },
            Case {
                name: "v_cos_f16 2^-24",
                words: &[0x7e00c301],
                inputs: &[(1, 0x0001)],
                out: F16,
                expected: [0x3c00; 4],
            },
            Case {
                name: "v_rcp_f64 2^1023",
                words: &[0x7e005f02],
                inputs: &[(2, 0x7fe0_0000_0000_0000)],
                out: F64,
                expected: [0, 0, 1 << 51, 1 << 51],
            },
            Case {
                name: "v_rcp_f64 2^-1023",
                words: &[0x7e005f02],
                inputs: &[(2, 1 << 51)],
                out: F64,
                expected: [
                    0x7ff0_0000_0000_0000,
                    0x7fe0_0000_0000_0000,
                    0x7ff0_0000_0000_0000,
                    0x7fe0_0000_0000_0000,
                ],
            },
            Case {
                name: "v_sqrt_f64 2^-1074",
                words: &[0x7e006902],
                inputs: &[(2, 1)],
                out: F64,
                expected: [0, 0x1e60_0000_0000_0000, 0, 0x1e60_0000_0000_0000],
            },
            Case {
                name: "v_rsq_f64 2^-1074",
                words: &[0x7e006302],
                inputs: &[(2, 1)],
                out: F64,
                expected: [
                    0x7ff0_0000_0000_0000,
                    0x6180_0000_0000_0000,
                    0x7ff0_0000_0000_0000,
                    0x6180_0000_0000_0000,
                ],
            },
        ],
        2,
    );
}

/// `v_add_f32_e32 v0, v1, v2` on 0x800001 + -0x800000 (= 2^-149) in lane 0.
fn denormal_sum(w: &mut Wave) -> u32 {
    w.vgpr[1][0] = 0x0080_0001;
    w.vgpr[2][0] = 0x8080_0000;
    run(&[0x06000501], w);
    w.vgpr[0][0]
}

/// `v_add_f32_e32 v0, v1, v2` on 0x7fffff + 0x1 (= 2^-126) in lane 0.
fn sum_of_denormals(w: &mut Wave) -> u32 {
    w.vgpr[1][0] = LARGEST_DENORMAL;
    w.vgpr[2][0] = 1;
    run(&[0x06000501], w);
    w.vgpr[0][0]
}

#[test]
fn s_denorm_mode_and_s_setreg_change_the_mode_between_instructions() {
    let mut w = wave(0xf);
    assert_eq!(denormal_sum(&mut w), 1);
    run(&[0xbf920000], &mut w); // s_denorm_mode 0
    assert_eq!(w.mode & 0xf0, 0);
    assert_eq!(denormal_sum(&mut w), 0);
    assert_eq!(sum_of_denormals(&mut w), 0);
    run(&[0xb885f801], &mut w); // s_getreg_b32 s5, hwreg(HW_REG_MODE)
    assert_eq!(w.sgpr[5] & 0xf0, 0);
    // s_setreg_imm32_b32 hwreg(HW_REG_MODE, 4, 2), 3: f32 denormals kept, f16/f64 untouched.
    run(&[0xb9800901, 3], &mut w);
    assert_eq!((w.mode >> 4) & 0xf, 0x3);
    assert_eq!(denormal_sum(&mut w), 1);
    // s_setreg_b32 hwreg(HW_REG_MODE, 4, 4), s0 with s0 = 1: f32 inputs kept, results
    // flushed; f16/f64 flushed.
    w.sgpr[0] = 0xffff_fff1; // bits past the 4-bit field are not written
    run(&[0xb9001901], &mut w);
    assert_eq!((w.mode >> 4) & 0xf, 0x1);
    assert_eq!(w.mode & !0xf0, 0, "only FP_DENORM was written");
    assert_eq!(denormal_sum(&mut w), 0);
    assert_eq!(sum_of_denormals(&mut w), SMALLEST_NORMAL);
    run(&[0xb8851901], &mut w); // s_getreg_b32 s5, hwreg(HW_REG_MODE, 4, 4)
    assert_eq!(w.sgpr[5], 0x1);
    // s_setreg_imm32_b32 hwreg(HW_REG_MODE, 6, 2), 0 then s_denorm_mode 3: f32 kept again.
    run(&[0xb9800981, 0], &mut w);
    run(&[0xbf920003], &mut w);
    assert_eq!((w.mode >> 4) & 0xf, 0x3);
    assert_eq!(denormal_sum(&mut w), 1);
    // s_round_mode 3 writes FP_ROUND (read back, though rounding stays to nearest even).
    run(&[0xbf910003], &mut w);
    run(&[0xb8851801], &mut w); // s_getreg_b32 s5, hwreg(HW_REG_MODE, 0, 4)
    assert_eq!(w.sgpr[5], 3);
    // s_setreg_imm32_b32 hwreg(HW_REG_MODE), 0x12345: the whole register.
    run(&[0xb980f801, 0x0001_2345], &mut w);
    assert_eq!(w.mode, 0x0001_2345);
    run(&[0xb885f802], &mut w); // s_getreg_b32 s5, hwreg(HW_REG_STATUS): not modelled
    assert_eq!(w.sgpr[5], 0);
}

#[test]
fn s_denorm_mode_leaves_the_transcendental_unit_flushing() {
    let mut w = wave(0);
    run(&[0xbf92000f], &mut w); // s_denorm_mode 15
    for lane in 0..32 {
        w.vgpr[1][lane] = HUGE;
    }
    run(&[0x7e005501], &mut w); // v_rcp_f32 v0, v1
    assert_eq!(w.vgpr[0][0], 0, "rcp(3.4e38) is denormal, flushed");
    assert_eq!(denormal_sum(&mut w), 1, "while the adder keeps denormals");
}

/// v_mov_b32 v1, 0x800001; v_add_f32 v2, 0x80800000, v1; s_denorm_mode 0;
/// v_add_f32 v3, 0x80800000, v1; s_setreg_imm32_b32 hwreg(HW_REG_MODE, 4, 2), 2;
/// v_add_f32 v4, 0x80800000, v1; s_getreg_b32 s5, hwreg(HW_REG_MODE); v_mov_b32 v5, s5;
/// global_store_b128 v0, v[2:5], s[0:1]; s_endpgm
const MODE_PROGRAM: [u32; 19] = [
    0x7e0202ff,
    0x0080_0001,
    0x060402ff,
    0x8080_0000,
    0xbf920000,
    0x060602ff,
    0x8080_0000,
    0xb9800901,
    0x0000_0002,
    0x060802ff,
    0x8080_0000,
    0xb885f801,
    0x7e0a0205,
    0xdc760000,
    0x00000200,
    0xbfb00000,
    0,
    0,
    0,
];

/// Runs [`MODE_PROGRAM`] in one work-item with `rsrc1`; returns v2..v5.
fn run_mode_program(rsrc1: u32) -> Vec<u32> {
    let code = Buffer::from_u32s(&MODE_PROGRAM);
    let out = Buffer::zeroed(16);
    let mem = HostMemory::new(&[&code, &out]);
    let mut user_data = [0u32; 16];
    user_data[0] = out.addr() as u32;
    user_data[1] = (out.addr() >> 32) as u32;
    let dispatch = Dispatch {
        code_entry: code.addr(),
        rsrc1,
        rsrc2: 2 << 1, // USER_SGPR = 2
        user_data,
        grid: [1, 1, 1],
        block: [1, 1, 1],
        wave32: true,
        max_steps: 100,
        ..Dispatch::default()
    };
    run_dispatch(&mem, &CodeCache::new(), &dispatch).unwrap();
    out.u32s()
}

#[test]
fn the_dispatch_starts_mode_from_rsrc1_and_the_program_changes_it() {
    // FLOAT_MODE (bits 19:12) 0xf0, DX10_CLAMP (21), IEEE_MODE (23): LLVM's gfx11 default.
    // MODE after the program: FP_DENORM 0x2 (f32 from s_setreg, f16/f64 from s_denorm_mode),
    // DX10_CLAMP and IEEE from RSRC1.
    assert_eq!(run_mode_program(0x00af_0000), [1, 0, 1, 0x320]);
    // FLOAT_MODE 0xc0 (f32 denormals flushed, as -fgpu-flush-denormals-to-zero builds).
    assert_eq!(run_mode_program(0x000c_0000), [0, 0, 1, 0x020]);
    // FLOAT_MODE 0xe0: f32 results kept, inputs flushed (the sum's inputs are normal).
    assert_eq!(run_mode_program(0x000e_0000), [1, 0, 1, 0x020]);
    // FLOAT_MODE 0xd0: f32 inputs kept, results flushed.
    assert_eq!(run_mode_program(0x000d_0000), [0, 0, 1, 0x020]);
}

/// `x` with a denormal replaced by the zero of its sign.
fn ftz(x: f32) -> f32 {
    if x.is_subnormal() {
        0.0f32.copysign(x)
    } else {
        x
    }
}

#[test]
fn a_flush_denormals_kernel_computes_as_the_hardware_would() {
    // clang -fgpu-flush-denormals-to-zero: FLOAT_DENORM_MODE_32 = 0 in the descriptor, and the
    // division's Newton-Raphson steps run between s_denorm_mode 15 and s_denorm_mode 12.
    let values: [u32; 18] = [
        LARGEST_DENORMAL,
        NEG_LARGEST_DENORMAL,
        0x0000_0001,
        SMALLEST_NORMAL,
        0x8080_0000,
        0x0080_0001,
        0x00c0_0000, // 1.5 * 2^-126
        ONE,
        0x4040_0000, // 3
        HUGE,
        TINY,
        0,
        NEG_ZERO,
        INF,
        NEG_INF,
        QNAN,
        0x0680_0000, // 2^-114
        0x4b00_0000, // 2^23
    ];
    let pairs: Vec<(f32, f32)> = values
        .iter()
        .flat_map(|&a| {
            values
                .iter()
                .map(move |&b| (f32::from_bits(a), f32::from_bits(b)))
        })
        .collect();
    let n = pairs.len();
    let block = 64u32;
    let a = Buffer::from_f32s(&pairs.iter().map(|p| p.0).collect::<Vec<_>>());
    let b = Buffer::from_f32s(&pairs.iter().map(|p| p.1).collect::<Vec<_>>());
    let out = Buffer::zeroed(n * 16);
    let args = Args::default()
        .ptr(&out)
        .ptr(&a)
        .ptr(&b)
        .i32(n as i32)
        .i32(block as i32);
    let grid = [(n as u32).div_ceil(block), 1, 1];
    run_with_cache(
        &CodeCache::new(),
        FTZ_KERNELS,
        "ftz_f32",
        &args,
        grid,
        [block, 1, 1],
        &[&a, &b, &out],
    )
    .unwrap_or_else(|fault| panic!("{fault}"));
    let got = out.u32s();
    for (i, &(x, y)) in pairs.iter().enumerate() {
        let (x, y) = (ftz(x), ftz(y));
        let want = [
            ftz(x + y),
            ftz(x * y),
            ftz(x / y),
            // v_rcp_f32 flushes whatever the mode; exact here for these inputs' reciprocals
            // (powers of two, specials, and 1/3 and 1/3.4e38 rounded once).
            ftz(1.0 / y),
        ];
        for (k, want) in want.iter().enumerate() {
            let g = got[4 * i + k];
            assert!(
                same_f32(g, want.to_bits()),
                "{} of {:#010x}, {:#010x}: got {g:#010x}, want {:#010x}",
                ["add", "mul", "div", "rcp"][k],
                pairs[i].0.to_bits(),
                pairs[i].1.to_bits(),
                want.to_bits()
            );
        }
    }
}
