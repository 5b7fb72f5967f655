//! Instruction semantics on a single wave: flags, carries, EXEC masking, conversions,
//! inline constants, DPP. Encodings from llvm-mc-19 (hard-coded).

mod common;

use common::HostMemory;
use rdna3::decode::decode;
use rdna3::exec::{ExecContext, Flow, Wave};
use rdna3::operand::{EXEC_LO, VCC_LO};

fn run(words: &[u32], wave: &mut Wave) -> Flow {
    let decoded = decode(words).unwrap();
    let mem = HostMemory::new(&[]);
    let mut lds = [0u8; 64];
    let mut ctx = ExecContext {
        mem: &mem,
        lds: &mut lds,
    };
    wave.execute(&mut ctx, &decoded.inst, decoded.words as u64 * 4)
        .unwrap()
}

fn wave() -> Wave {
    let mut wave = Wave::new(0x1000);
    wave.sgpr[usize::from(EXEC_LO)] = u32::MAX;
    wave
}

fn set_lanes(wave: &mut Wave, reg: usize, f: impl Fn(usize) -> u32) {
    for lane in 0..32 {
        wave.vgpr[reg][lane] = f(lane);
    }
}

#[test]
fn scalar_carries_and_overflow() {
    let mut w = wave();
    (w.sgpr[1], w.sgpr[2]) = (0xffff_ffff, 2);
    run(&[0x80000201], &mut w); // s_add_u32 s0, s1, s2
    assert_eq!((w.sgpr[0], w.scc), (1, true));
    (w.sgpr[4], w.sgpr[5]) = (7, 8);
    run(&[0x82030504], &mut w); // s_addc_u32 s3, s4, s5 (+SCC)
    assert_eq!((w.sgpr[3], w.scc), (16, false));
    (w.sgpr[1], w.sgpr[2]) = (0x8000_0000, 1);
    run(&[0x81800201], &mut w); // s_sub_i32 s0, s1, s2: signed overflow
    assert_eq!((w.sgpr[0], w.scc), (0x7fff_ffff, true));
    w.sgpr[1] = 0x0000_00f0;
    run(&[0x9380ff01, 0x00040004], &mut w); // s_bfe_i32 s0, s1, offset 4 width 4
    assert_eq!((w.sgpr[0] as i32, w.scc), (-1, true));
}

#[test]
fn saveexec_and_branch_on_execz() {
    let mut w = wave();
    w.sgpr[usize::from(VCC_LO)] = 0;
    run(&[0xbe80206a], &mut w); // s_and_saveexec_b32 s0, vcc_lo
    assert_eq!((w.sgpr[0], w.exec(), w.scc), (u32::MAX, 0, false));
    assert_eq!(run(&[0xbfa50003], &mut w), Flow::Jump(0x1000 + 4 + 12)); // s_cbranch_execz 3
}

#[test]
fn vector_carry_chain_respects_exec() {
    let mut w = wave();
    set_lanes(&mut w, 1, |l| if l % 2 == 0 { u32::MAX } else { l as u32 });
    set_lanes(&mut w, 2, |_| 1);
    w.sgpr[usize::from(EXEC_LO)] = 0x0000_ffff;
    w.vgpr[0][20] = 0xdead;
    run(&[0xd7006a00, 0x00020501], &mut w); // v_add_co_u32 v0, vcc_lo, v1, v2
    assert_eq!(w.vcc(), 0x5555, "carry only from even active lanes");
    assert_eq!(w.vgpr[0][0], 0);
    assert_eq!(w.vgpr[0][1], 2);
    assert_eq!(w.vgpr[0][20], 0xdead, "inactive lane untouched");
    // v_sub_co_ci_u32_e32 v3, vcc_lo, v4, v5, vcc_lo: 0 - 0 - borrow
    set_lanes(&mut w, 4, |_| 0);
    set_lanes(&mut w, 5, |_| 0);
    run(&[0x42060b04], &mut w);
    assert_eq!(w.vgpr[3][0], u32::MAX);
    assert_eq!(w.vgpr[3][1], 0);
    assert_eq!(w.vcc(), 0x5555);
}

#[test]
fn compares_write_zero_for_inactive_lanes_and_cmpx_writes_exec() {
    let mut w = wave();
    set_lanes(&mut w, 1, |l| l as u32);
    set_lanes(&mut w, 2, |_| 10);
    w.sgpr[usize::from(EXEC_LO)] = 0xff;
    run(&[0x7c820501], &mut w); // v_cmp_lt_i32_e32 vcc_lo, v1, v2
    assert_eq!(w.vcc(), 0xff);
    w.sgpr[usize::from(EXEC_LO)] = u32::MAX;
    set_lanes(&mut w, 2, |_| 4);
    run(&[0x7d920501], &mut w); // v_cmpx_lt_u32_e32 v1, v2
    assert_eq!(w.exec(), 0xf);
}

#[test]
fn cndmask_selects_by_vcc() {
    let mut w = wave();
    set_lanes(&mut w, 1, |_| 1);
    set_lanes(&mut w, 2, |_| 2);
    w.sgpr[usize::from(VCC_LO)] = 0xf0f0_f0f0;
    run(&[0x02000501], &mut w); // v_cndmask_b32_e32 v0, v1, v2, vcc_lo
    assert_eq!(w.vgpr[0][0], 1);
    assert_eq!(w.vgpr[0][4], 2);
}

#[test]
fn float_to_int_conversions_saturate_and_map_nan_to_zero() {
    let mut w = wave();
    let inputs = [f32::NAN, 3.0e9, -3.0e9, -1.5, 2.75, f32::INFINITY];
    set_lanes(&mut w, 1, |l| inputs[l % inputs.len()].to_bits());
    run(&[0x7e001101], &mut w); // v_cvt_i32_f32_e32 v0, v1
    let expected = [0, i32::MAX, i32::MIN, -1, 2, i32::MAX];
    for (lane, e) in expected.iter().enumerate() {
        assert_eq!(w.vgpr[0][lane] as i32, *e, "i32 lane {lane}");
    }
    run(&[0x7e000f01], &mut w); // v_cvt_u32_f32_e32 v0, v1
    let expected = [0, 3_000_000_000, 0, 0, 2, u32::MAX];
    for (lane, e) in expected.iter().enumerate() {
        assert_eq!(w.vgpr[0][lane], *e, "u32 lane {lane}");
    }
}

#[test]
fn half_conversions_round_to_nearest_even_and_keep_denormals() {
    let mut w = wave();
    let inputs = [
        1.0f32,
        65504.0,
        65520.0,
        5.960_464_5e-8,
        1.0 + 1.0 / 2048.0,
        -0.0,
        f32::NAN,
    ];
    let expected: [u16; 7] = [0x3c00, 0x7bff, 0x7c00, 0x0001, 0x3c00, 0x8000, 0x7e00];
    set_lanes(&mut w, 1, |l| inputs[l.min(6)].to_bits());
    set_lanes(&mut w, 0, |_| 0xabcd_0000);
    run(&[0x7e001501], &mut w); // v_cvt_f16_f32_e32 v0, v1
    for (lane, e) in expected.iter().enumerate() {
        assert_eq!(w.vgpr[0][lane] & 0xffff, u32::from(*e), "lane {lane}");
        assert_eq!(w.vgpr[0][lane] >> 16, 0xabcd, "high half preserved");
    }
    set_lanes(&mut w, 1, |_| 0x0001); // smallest half denormal
    run(&[0x7e001701], &mut w); // v_cvt_f32_f16_e32 v0, v1
    assert_eq!(f32::from_bits(w.vgpr[0][0]), 5.960_464_5e-8);
}

#[test]
fn f64_inline_constants_and_literals() {
    let mut w = wave();
    set_lanes(&mut w, 2, |_| 0);
    set_lanes(&mut w, 3, |_| 0x4000_0000); // 2.0
    run(&[0xd7270000, 0x000204f2], &mut w); // v_add_f64 v[0:1], 1.0, v[2:3]
    let value =
        |w: &Wave| f64::from_bits(u64::from(w.vgpr[0][0]) | (u64::from(w.vgpr[1][0]) << 32));
    assert_eq!(value(&w), 3.0);
    run(&[0xd7270000, 0x000204ff, 0x40080000], &mut w); // literal = high half of 3.0
    assert_eq!(value(&w), 5.0);
}

#[test]
fn mad_u64_u32_with_carry_out() {
    let mut w = wave();
    set_lanes(&mut w, 2, |_| u32::MAX);
    set_lanes(&mut w, 3, |_| u32::MAX);
    set_lanes(&mut w, 4, |l| if l == 0 { u32::MAX } else { 0 });
    set_lanes(&mut w, 5, |l| if l == 0 { u32::MAX } else { 0 });
    run(&[0xd6fe0000, 0x04120702], &mut w); // v_mad_u64_u32 v[0:1], s0, v2, v3, v[4:5]
    let product = u64::from(u32::MAX) * u64::from(u32::MAX);
    assert_eq!(
        u64::from(w.vgpr[0][1]) | (u64::from(w.vgpr[1][1]) << 32),
        product
    );
    assert_eq!(
        u64::from(w.vgpr[0][0]) | (u64::from(w.vgpr[1][0]) << 32),
        product.wrapping_add(u64::MAX)
    );
    assert_eq!(w.sgpr[0], 1, "carry out only from lane 0");
}

#[test]
fn dpp_row_shift_and_quad_permute() {
    let mut w = wave();
    set_lanes(&mut w, 1, |l| 100 + l as u32);
    run(&[0x7e0002fa, 0xff091101], &mut w); // row_shr:1 bound_ctrl:1
    assert_eq!(
        w.vgpr[0][0], 0,
        "first lane of a row reads 0 with bound_ctrl"
    );
    assert_eq!(w.vgpr[0][1], 100);
    assert_eq!(w.vgpr[0][16], 0);
    assert_eq!(w.vgpr[0][17], 116);
    run(&[0x7e0002fa, 0xff001b01], &mut w); // quad_perm:[3,2,1,0]
    assert_eq!(&w.vgpr[0][..4], &[103, 102, 101, 100]);
}

#[test]
fn readfirstlane_uses_first_active_lane() {
    let mut w = wave();
    set_lanes(&mut w, 1, |l| l as u32 * 3);
    w.sgpr[usize::from(EXEC_LO)] = 0b1000;
    run(&[0x7e000501], &mut w); // v_readfirstlane_b32 s0, v1
    assert_eq!(w.sgpr[0], 9);
}

#[test]
fn float_helpers() {
    let mut w = wave();
    // v_div_fixup_f32: special cases of quotient S2/S1.
    let cases: [(f32, f32, f32, f32); 4] = [
        (2.5, 2.0, 5.0, 2.5),
        (0.0, 0.0, 1.0, f32::INFINITY),
        (0.0, 0.0, 0.0, f32::NAN),
        (1.0, f32::INFINITY, 1.0, 0.0),
    ];
    set_lanes(&mut w, 1, |l| cases[l % 4].0.to_bits());
    set_lanes(&mut w, 2, |l| cases[l % 4].1.to_bits());
    set_lanes(&mut w, 3, |l| cases[l % 4].2.to_bits());
    run(&[0xd6270000, 0x040e0501], &mut w);
    for (lane, case) in cases.iter().enumerate() {
        let got = f32::from_bits(w.vgpr[0][lane]);
        assert!(
            got == case.3 || (got.is_nan() && case.3.is_nan()),
            "div_fixup lane {lane}: {got}"
        );
    }
    // v_ldexp_f32 keeps denormal results.
    set_lanes(&mut w, 1, |_| 1.0f32.to_bits());
    set_lanes(&mut w, 2, |_| (-140i32) as u32);
    run(&[0xd71c0000, 0x00020501], &mut w);
    assert_eq!(f32::from_bits(w.vgpr[0][0]), 2f32.powi(-140));
    // v_frexp_exp_i32_f32
    set_lanes(&mut w, 1, |_| 8.0f32.to_bits());
    run(&[0x7e007f01], &mut w);
    assert_eq!(w.vgpr[0][0], 4);
    // v_max_f32 with a NaN operand returns the other operand (IEEE maxNum).
    set_lanes(&mut w, 1, |_| f32::NAN.to_bits());
    set_lanes(&mut w, 2, |_| 1.5f32.to_bits());
    run(&[0x20000501], &mut w);
    assert_eq!(f32::from_bits(w.vgpr[0][0]), 1.5);
    // v_cmp_class_f32: quiet NaN (bit 1) and +normal (bit 8).
    set_lanes(&mut w, 1, |l| {
        if l == 0 {
            f32::NAN.to_bits()
        } else {
            1.0f32.to_bits()
        }
    });
    set_lanes(&mut w, 2, |_| (1 << 1) | (1 << 8));
    run(&[0xd47e0000, 0x00020501], &mut w);
    assert_eq!(w.sgpr[0], u32::MAX);
}

#[test]
fn packed_half_add() {
    let mut w = wave();
    set_lanes(&mut w, 1, |_| 0x4000_3c00); // (2.0, 1.0)
    set_lanes(&mut w, 2, |_| 0x3c00_3c00); // (1.0, 1.0)
    run(&[0xcc0f4000, 0x18020501], &mut w); // v_pk_add_f16 v0, v1, v2
    assert_eq!(w.vgpr[0][0], 0x4200_4000); // (3.0, 2.0)
}

fn run_with_lds(words: &[u32], wave: &mut Wave, lds: &mut [u8]) {
    let decoded = decode(words).unwrap();
    let mem = HostMemory::new(&[]);
    let mut ctx = ExecContext { mem: &mem, lds };
    wave.execute(&mut ctx, &decoded.inst, decoded.words as u64 * 4)
        .unwrap();
}

#[test]
fn div_scale_f32_cases() {
    let mut w = wave();
    // Lane 0: denormal divisor (both operands scaled by 2^64, VCC clear).
    // Lane 1: denormal quotient 1e-30 / 1e10 (only the numerator scaled, VCC set).
    // Lane 2: ordinary operands (unchanged).
    // Lane 3: quotient near the top of the range, 1 / 1e-40 (exponents 96 or more apart):
    // only the denominator scaled, VCC set.
    let num = [1e-30f32, 1e-30, 3.0, 1.0];
    let den = [1e-40f32, 1e10, 7.0, 1e-40];
    set_lanes(&mut w, 1, |l| num[l % 4].to_bits());
    set_lanes(&mut w, 2, |l| den[l % 4].to_bits());
    w.sgpr[usize::from(EXEC_LO)] = 0b1111;
    let scale = 2f32.powi(64);
    run(&[0xd6fc0000, 0x04060502], &mut w); // v_div_scale_f32 v0, s0, v2, v2, v1
    let got: Vec<f32> = (0..4).map(|l| f32::from_bits(w.vgpr[0][l])).collect();
    assert_eq!(got, [1e-40 * scale, 1e10, 7.0, 1e-40 * scale]);
    assert_eq!(w.sgpr[0], 0b1010);
    run(&[0xd6fc6a00, 0x04060501], &mut w); // v_div_scale_f32 v0, vcc_lo, v1, v2, v1
    let got: Vec<f32> = (0..4).map(|l| f32::from_bits(w.vgpr[0][l])).collect();
    assert_eq!(got, [1e-30 * scale, 1e-30 * scale, 3.0, 1.0]);
    assert_eq!(w.vcc(), 0b1010);
}

#[test]
fn div_scale_f64_huge_divisor_and_tiny_numerator() {
    let mut w = wave();
    w.sgpr[usize::from(EXEC_LO)] = 1;
    let (num, den) = (5e-324f64, 1e300f64);
    w.vgpr[2][0] = num.to_bits() as u32;
    w.vgpr[3][0] = (num.to_bits() >> 32) as u32;
    w.vgpr[4][0] = den.to_bits() as u32;
    w.vgpr[5][0] = (den.to_bits() >> 32) as u32;
    // v_div_scale_f64 v[0:1], vcc_lo, v[2:3], v[4:5], v[2:3]: the quotient underflows, so
    // only the numerator is scaled (by 2^128) and VCC asks V_DIV_FMAS to scale back.
    run(&[0xd6fd6a00, 0x040a0902], &mut w);
    let got = f64::from_bits(u64::from(w.vgpr[0][0]) | u64::from(w.vgpr[1][0]) << 32);
    assert_eq!(got, num * 2f64.powi(128));
    assert_eq!(w.vcc(), 1);
}

#[test]
fn div_fmas_scales_with_one_rounding() {
    let mut w = wave();
    w.sgpr[usize::from(EXEC_LO)] = 0b111;
    w.sgpr[usize::from(VCC_LO)] = 0b011;
    // Lane 0: a small quotient (< 2) is scaled by 2^-64 into the denormal range and rounded
    // once: 1.5 × 2^-86 × 2^-64 = 1.5 × 2^-150 rounds up to 2^-149.
    // Lane 1: a large quotient is scaled by 2^+64. Lane 2: no VCC, plain fma.
    let c = [1.5 * 2f32.powi(-86), 4.0, 2.0];
    set_lanes(&mut w, 1, |_| 0);
    set_lanes(&mut w, 2, |_| 0);
    set_lanes(&mut w, 3, |l| c[l % 3].to_bits());
    w.vgpr[1][2] = 3.0f32.to_bits();
    w.vgpr[2][2] = 5.0f32.to_bits();
    run(&[0xd6370000, 0x040e0501], &mut w); // v_div_fmas_f32 v0, v1, v2, v3
    assert_eq!(w.vgpr[0][0], 1, "2^-149");
    assert_eq!(f32::from_bits(w.vgpr[0][1]), 4.0 * 2f32.powi(64));
    assert_eq!(f32::from_bits(w.vgpr[0][2]), 17.0);
}

#[test]
fn integer_clamp_saturates() {
    let mut w = wave();
    set_lanes(&mut w, 1, |l| [u32::MAX, 5, 0x8000_0000][l % 3]);
    set_lanes(&mut w, 2, |l| [2, 3, 1][l % 3]);
    run(&[0xd5258000, 0x00020501], &mut w); // v_add_nc_u32_e64 v0, v1, v2 clamp
    assert_eq!(&w.vgpr[0][..3], &[u32::MAX, 8, 0x8000_0001]);
    run(&[0xd7258000, 0x00020501], &mut w); // v_sub_nc_i32 v0, v1, v2 clamp
    assert_eq!(&w.vgpr[0][..3], &[u32::MAX - 2, 2, 0x8000_0000]);
    set_lanes(&mut w, 0, |_| 0xabcd_0000);
    set_lanes(&mut w, 1, |l| [0xffff, 7][l % 2]);
    set_lanes(&mut w, 2, |_| 1);
    run(&[0xd7038000, 0x00020501], &mut w); // v_add_nc_u16 v0, v1, v2 clamp
    assert_eq!(&w.vgpr[0][..2], &[0xabcd_ffff, 0xabcd_0008]);
    // v_pk_sub_i16 v0, v1, v2 clamp: per-half signed saturation.
    set_lanes(&mut w, 1, |_| 0x7fff_8000);
    set_lanes(&mut w, 2, |_| 0xffff_0001); // high: 0x7fff - (-1), low: -32768 - 1
    run(&[0xcc03c000, 0x18020501], &mut w);
    assert_eq!(w.vgpr[0][0], 0x7fff_8000);
}

#[test]
fn bfe_masks_and_sign_extension() {
    let mut w = wave();
    set_lanes(&mut w, 1, |l| [0x8000_0000, 0x1234_5678][l % 2]);
    set_lanes(&mut w, 2, |l| [28, 36][l % 2]); // offset 36 masks to 4
    set_lanes(&mut w, 3, |l| [8, 40][l % 2]); // width 40 masks to 8
    run(&[0xd6110000, 0x040e0501], &mut w); // v_bfe_i32 v0, v1, v2, v3
                                            // Arithmetic shift: bits 35..28 of the sign-extended source are all ones.
    assert_eq!(w.vgpr[0][0], 0xffff_fff8);
    assert_eq!(w.vgpr[0][1], 0x67);
    run(&[0xd6100000, 0x040e0501], &mut w); // v_bfe_u32 v0, v1, v2, v3
    assert_eq!(&w.vgpr[0][..2], &[0x08, 0x67]);
}

#[test]
fn fract_of_nan_and_infinity() {
    let mut w = wave();
    let inputs = [
        0x7fc0_0001u32,
        f32::INFINITY.to_bits(),
        (-1e-10f32).to_bits(),
        3.75f32.to_bits(),
    ];
    set_lanes(&mut w, 1, |l| inputs[l % 4]);
    run(&[0x7e004101], &mut w); // v_fract_f32_e32 v0, v1
    assert!(f32::from_bits(w.vgpr[0][0]).is_nan());
    assert!(f32::from_bits(w.vgpr[0][1]).is_nan());
    assert_eq!(w.vgpr[0][2], 0x3f7f_ffff, "clamped below 1.0");
    assert_eq!(f32::from_bits(w.vgpr[0][3]), 0.75);
    set_lanes(&mut w, 2, |_| 0);
    set_lanes(&mut w, 3, |_| 0x7ff8_0000);
    run(&[0x7e007d02], &mut w); // v_fract_f64_e32 v[0:1], v[2:3]
    let got = f64::from_bits(u64::from(w.vgpr[0][0]) | u64::from(w.vgpr[1][0]) << 32);
    assert!(got.is_nan());
}

#[test]
fn fma_mix_operand_selection() {
    let mut w = wave();
    // v_fma_mixlo_f16 v0, v1, v2, v3 op_sel:[1,0,0] op_sel_hi:[1,1,0]:
    // f16 high half of v1 (2.0), f16 low half of v2 (3.0), f32 v3 (1.0) → 7.0 in v0[15:0].
    set_lanes(&mut w, 0, |_| 0x1234_5678);
    set_lanes(&mut w, 1, |_| 0x4000_3c00);
    set_lanes(&mut w, 2, |_| 0x3c00_4200);
    set_lanes(&mut w, 3, |_| 1.0f32.to_bits());
    run(&[0xcc210800, 0x1c0e0501], &mut w);
    assert_eq!(w.vgpr[0][0], 0x1234_4700);
    // v_fma_mix_f32 v0, v1, v2, v3 op_sel:[0,1,0] op_sel_hi:[0,1,1]:
    // f32 v1 (0.5), f16 high half of v2 (1.0), f16 low half of v3 (-2.0) → -1.5.
    set_lanes(&mut w, 1, |_| 0.5f32.to_bits());
    set_lanes(&mut w, 3, |_| 0x0000_c000);
    run(&[0xcc205000, 0x140e0501], &mut w);
    assert_eq!(f32::from_bits(w.vgpr[0][0]), -1.5);
}

#[test]
fn ds_swizzle_patterns() {
    let mut w = wave();
    let mut lds = [0u8; 64];
    set_lanes(&mut w, 0, |l| 100 + l as u32);
    // QUAD_PERM(3,2,1,0): reverse each quad.
    run_with_lds(&[0xd8d4801b, 0x01000000], &mut w, &mut lds);
    for lane in 0..32 {
        assert_eq!(w.vgpr[1][lane], 100 + ((lane & !3) + 3 - (lane & 3)) as u32);
    }
    // BITMASK_PERM "p1011" (and 0x10, or 0x0b): every lane reads lane (l & 16) | 11.
    run_with_lds(&[0xd8d40170, 0x01000000], &mut w, &mut lds);
    for lane in 0..32 {
        assert_eq!(w.vgpr[1][lane], 100 + ((lane & 16) | 11) as u32);
    }
    // SWAP,16 (xor 0x10); lanes reading an inactive lane get 0.
    w.sgpr[usize::from(EXEC_LO)] = 0x0000_ffff | 0x0001_0000;
    run_with_lds(&[0xd8d4401f, 0x01000000], &mut w, &mut lds);
    assert_eq!(w.vgpr[1][0], 116);
    assert_eq!(w.vgpr[1][1], 0, "lane 17 is inactive");
    assert_eq!(w.vgpr[1][16], 100);
}

#[test]
fn ds_load_2addr_reads_addresses_before_writing() {
    let mut w = wave();
    let mut lds = [0u8; 512];
    for (k, chunk) in lds.chunks_mut(4).enumerate() {
        chunk.copy_from_slice(&(1000 + k as u32).to_le_bytes());
    }
    set_lanes(&mut w, 0, |l| 8 * l as u32);
    // ds_load_2addr_b32 v[0:1], v0 offset1:1: v0 is both the address and the first result.
    run_with_lds(&[0xd8dc0100, 0x00000000], &mut w, &mut lds);
    for lane in 0..32 {
        assert_eq!(w.vgpr[0][lane], 1000 + 2 * lane as u32);
        assert_eq!(w.vgpr[1][lane], 1001 + 2 * lane as u32);
    }
}

#[test]
fn maxmin_dot_permlane_cvt() {
    let mut w = wave();
    set_lanes(&mut w, 1, |_| (-5i32) as u32);
    set_lanes(&mut w, 2, |_| 3);
    set_lanes(&mut w, 3, |_| 2);
    run(&[0xd6640000, 0x040e0501], &mut w); // v_maxmin_i32 v0, v1, v2, v3 = min(max(-5,3),2)
    assert_eq!(w.vgpr[0][0], 2);
    // v_dot4_i32_iu8 v0, v1, v2, v3 neg_lo:[1,0,0]: signed bytes of v1, unsigned of v2.
    set_lanes(&mut w, 1, |_| 0x01_02_03_ff); // bytes -1, 3, 2, 1
    set_lanes(&mut w, 2, |_| 0xff_01_01_02); // bytes 2, 1, 1, 255
    set_lanes(&mut w, 3, |_| 10);
    run(&[0xcc164000, 0x3c0e0501], &mut w);
    assert_eq!(w.vgpr[0][0] as i32, 10 - 2 + 3 + 2 + 255);
    // v_permlanex16_b32 v0, v1, s0, s1: lane i of each row reads lane sel[i] of the other row.
    set_lanes(&mut w, 1, |l| l as u32);
    w.sgpr[0] = 0x7654_3210;
    w.sgpr[1] = 0xfedc_ba98;
    run(&[0xd65c0000, 0x00040101], &mut w);
    assert_eq!(w.vgpr[0][0], 16);
    assert_eq!(w.vgpr[0][17], 1);
    // v_cvt_i16_f16_e32 v0, v1: truncation, saturation, NaN → 0.
    let halves = [0xc500u32, 0x7c00, 0x7e00, 0x4a80]; // -5.0, +inf, NaN, 13.0
    set_lanes(&mut w, 1, |l| halves[l % 4]);
    set_lanes(&mut w, 0, |_| 0xffff_0000);
    run(&[0x7e00a701], &mut w);
    assert_eq!(w.vgpr[0][0] & 0xffff, 0xfffb);
    assert_eq!(w.vgpr[0][1] & 0xffff, 0x7fff);
    assert_eq!(w.vgpr[0][2] & 0xffff, 0);
    assert_eq!(w.vgpr[0][3] & 0xffff, 13);
}

#[test]
fn permlane_inactive_source_lanes_follow_fi_and_bound_ctrl() {
    let mut w = wave();
    w.sgpr[0] = 0x7654_3210;
    w.sgpr[1] = 0xfedc_ba98;
    let before = 0xdead_0000u32;
    let source = |lane: usize| 100 + lane as u32;
    // Only row 0 is active, so every active lane's source (in row 1) is inactive.
    type Expected = fn(usize) -> u32;
    let cases: [(u32, &str, Expected); 3] = [
        // v_permlanex16_b32 v0, v1, s0, s1: not written.
        (0xd65c0000, "no FI, no BC", |_| 0xdead_0000),
        // op_sel:[0,1] (BOUND_CTRL): zero.
        (0xd65c1000, "BC", |_| 0),
        // op_sel:[1,0] (FI): the inactive lane's value.
        (0xd65c0800, "FI", |lane| 100 + 16 + lane as u32),
    ];
    for (word, what, want) in cases {
        set_lanes(&mut w, 1, source);
        set_lanes(&mut w, 0, |_| before);
        w.sgpr[usize::from(EXEC_LO)] = 0x0000_ffff;
        run(&[word, 0x00040101], &mut w);
        for lane in 0..32 {
            let expected = if lane < 16 { want(lane) } else { before };
            assert_eq!(w.vgpr[0][lane], expected, "{what}, lane {lane}");
        }
    }
    // v_permlane16_b32 v0, v1, s0, s1 within rows, odd lanes inactive: even lanes reading
    // themselves are written, even lanes reading an odd lane keep their old value.
    w.sgpr[0] = 0x6745_2301; // lane i of a row reads lane i ^ 1 for i < 8
    w.sgpr[1] = 0xfedc_ba98; // and itself for i >= 8
    set_lanes(&mut w, 0, |_| before);
    w.sgpr[usize::from(EXEC_LO)] = 0x5555_5555;
    run(&[0xd65b0000, 0x00040101], &mut w);
    for lane in 0..32 {
        let expected = match (lane % 2, lane % 16 < 8) {
            (0, false) => source(lane),
            _ => before,
        };
        assert_eq!(w.vgpr[0][lane], expected, "permlane16, lane {lane}");
    }
}

/// The f32 division expansion clang-19 emits for `n / d` (denormals on), from
/// `llvm-objdump-19`: v_div_scale ×2, v_rcp, two Newton-Raphson steps, v_div_fmas,
/// v_div_fixup. Numerator in v0, denominator in v1, quotient in v0.
const F32_DIVISION: &[&[u32]] = &[
    &[0xd6fc7c03, 0x04020301], // v_div_scale_f32 v3, null, v1, v1, v0
    &[0xd6fc6a06, 0x04020300], // v_div_scale_f32 v6, vcc_lo, v0, v1, v0
    &[0x7e085503],             // v_rcp_f32_e32 v4, v3
    &[0xd6130005, 0x23ca0903], // v_fma_f32 v5, -v3, v4, 1.0
    &[0x56080905],             // v_fmac_f32_e32 v4, v5, v4
    &[0x100a0906],             // v_mul_f32_e32 v5, v6, v4
    &[0xd6130007, 0x241a0b03], // v_fma_f32 v7, -v3, v5, v6
    &[0x560a0907],             // v_fmac_f32_e32 v5, v7, v4
    &[0xd6130003, 0x241a0b03], // v_fma_f32 v3, -v3, v5, v6
    &[0xd6370003, 0x04160903], // v_div_fmas_f32 v3, v3, v4, v5
    &[0xd6270000, 0x04020303], // v_div_fixup_f32 v0, v3, v1, v0
];

#[test]
fn div_scale_f32_scales_divisors_whose_reciprocal_is_denormal() {
    let mut w = wave();
    w.sgpr[usize::from(EXEC_LO)] = 0b11;
    // Lane 0: |divisor| > 2^126 with a normal quotient: both operands scaled by 2^-64.
    // Lane 1: the quotient is denormal too: only the divisor is scaled (by 2^-64), VCC set.
    let num = [2f32.powi(62), 1.0];
    let den = [f32::MAX, f32::MAX];
    set_lanes(&mut w, 1, |l| num[l % 2].to_bits());
    set_lanes(&mut w, 2, |l| den[l % 2].to_bits());
    run(&[0xd6fc0000, 0x04060502], &mut w); // v_div_scale_f32 v0, s0, v2, v2, v1
    let scale = 2f32.powi(-64);
    assert_eq!(f32::from_bits(w.vgpr[0][0]), f32::MAX * scale);
    assert_eq!(f32::from_bits(w.vgpr[0][1]), f32::MAX * scale);
    assert_eq!(w.sgpr[0], 0b10);
    run(&[0xd6fc6a00, 0x04060501], &mut w); // v_div_scale_f32 v0, vcc_lo, v1, v2, v1
    assert_eq!(f32::from_bits(w.vgpr[0][0]), 2f32.powi(62) * scale);
    assert_eq!(f32::from_bits(w.vgpr[0][1]), 1.0);
    assert_eq!(w.vcc(), 0b10);
}

#[test]
fn f32_division_expansion_is_correctly_rounded_for_huge_divisors() {
    let mut w = wave();
    // Pairs around and above |divisor| = 2^126, where V_RCP_F32 of the divisor is denormal,
    // plus ordinary and denormal-quotient cases. The reference is the host's IEEE division.
    let cases: [(f32, f32); 10] = [
        (2f32.powi(62), f32::MAX),
        (1.0, f32::MAX),
        (-3.0, 2f32.powi(127)),
        (1.0e30, -1.7e38),
        (f32::MAX, f32::MAX),
        (1.0e-38, 3.0e38),
        (5.0, 2f32.powi(126)),
        (7.0, 3.0),
        (1.0e-30, 1.0e10),
        (0.1, 8.5e37),
    ];
    set_lanes(&mut w, 0, |l| cases[l % cases.len()].0.to_bits());
    set_lanes(&mut w, 1, |l| cases[l % cases.len()].1.to_bits());
    for inst in F32_DIVISION {
        run(inst, &mut w);
    }
    for (lane, (n, d)) in cases.iter().enumerate() {
        assert_eq!(
            w.vgpr[0][lane],
            (n / d).to_bits(),
            "lane {lane}: {n:e} / {d:e} gave {:e}",
            f32::from_bits(w.vgpr[0][lane])
        );
    }
}

const M0: usize = 125;

#[test]
fn vgpr_moves_indexed_by_m0() {
    let mut w = wave();
    w.sgpr[usize::from(EXEC_LO)] = 0x0000_ffff;
    for reg in 10..20 {
        set_lanes(&mut w, reg, |l| (reg * 100 + l) as u32);
    }
    w.sgpr[M0] = 3;
    run(&[0x7e00870a], &mut w); // v_movrels_b32_e32 v0, v10: v0 = v13
    assert_eq!(w.vgpr[0][5], 1305);
    assert_eq!(w.vgpr[0][20], 0, "inactive lane untouched");
    run(&[0xd5c30000, 0x0000010a], &mut w); // v_movrels_b32_e64 v0, v10
    assert_eq!(w.vgpr[0][7], 1307);
    set_lanes(&mut w, 1, |l| 7000 + l as u32);
    run(&[0x7e148501], &mut w); // v_movreld_b32_e32 v10, v1: v13 = v1
    assert_eq!((w.vgpr[13][2], w.vgpr[10][2]), (7002, 1002));
    w.sgpr[M0] = 2;
    run(&[0x7e04890a], &mut w); // v_movrelsd_b32_e32 v2, v10: v4 = v12
    assert_eq!(w.vgpr[4][1], 1201);
    // Source offset M0[9:0] = 1, destination offset M0[25:16] = 4.
    w.sgpr[M0] = 4 << 16 | 1;
    run(&[0x7e06910a], &mut w); // v_movrelsd_2_b32_e32 v3, v10: v7 = v11
    assert_eq!(w.vgpr[7][9], 1109);
    // v_swaprel_b32 v20, v10: swaps v11 (M0[9:0]) and v24 (M0[25:16]).
    set_lanes(&mut w, 24, |l| 2400 + l as u32);
    run(&[0x7e28d10a], &mut w);
    assert_eq!((w.vgpr[24][3], w.vgpr[11][3]), (1103, 2403));
}

#[test]
fn vgpr_index_past_the_register_file_is_a_fault() {
    let mut w = wave();
    w.sgpr[M0] = 250;
    let decoded = decode(&[0x7e00870a]).unwrap(); // v_movrels_b32_e32 v0, v10
    let mem = HostMemory::new(&[]);
    let mut lds = [0u8; 64];
    let mut ctx = ExecContext {
        mem: &mem,
        lds: &mut lds,
    };
    let fault = w.execute(&mut ctx, &decoded.inst, 4).unwrap_err();
    assert!(fault.to_string().contains("v260"), "{fault}");
}

#[test]
fn sgpr_moves_indexed_by_m0() {
    let mut w = wave();
    for reg in 10..20 {
        w.sgpr[reg] = (reg * 100) as u32;
    }
    w.sgpr[M0] = 2;
    run(&[0xbe80400a], &mut w); // s_movrels_b32 s0, s10: s0 = s12
    assert_eq!(w.sgpr[0], 1200);
    run(&[0xbe80410a], &mut w); // s_movrels_b64 s[0:1], s[10:11]: s[12:13]
    assert_eq!((w.sgpr[0], w.sgpr[1]), (1200, 1300));
    w.sgpr[1] = 77;
    run(&[0xbe8a4201], &mut w); // s_movreld_b32 s10, s1: s12 = s1
    assert_eq!(w.sgpr[12], 77);
    (w.sgpr[2], w.sgpr[3]) = (5, 6);
    run(&[0xbe8a4302], &mut w); // s_movreld_b64 s[10:11], s[2:3]: s[12:13]
    assert_eq!((w.sgpr[12], w.sgpr[13]), (5, 6));
    w.sgpr[M0] = 3 << 16 | 5;
    run(&[0xbe83440a], &mut w); // s_movrelsd_2_b32 s3, s10: s6 = s15
    assert_eq!(w.sgpr[6], 1500);
    // An index that would reach VCC (s106) faults instead of writing it.
    w.sgpr[M0] = 96;
    let decoded = decode(&[0xbe8a4201]).unwrap();
    let mem = HostMemory::new(&[]);
    let mut lds = [0u8; 64];
    let mut ctx = ExecContext {
        mem: &mem,
        lds: &mut lds,
    };
    let fault = w.execute(&mut ctx, &decoded.inst, 4).unwrap_err();
    assert!(fault.to_string().contains("s106"), "{fault}");
}

#[test]
fn scalar_bit_counts_masks_and_replication() {
    let mut w = wave();
    // s_cls_i32_i64 s0, s[2:3]: bits after the sign bit that repeat it.
    for (value, want) in [
        (0u64, -1i32),
        (u64::MAX, -1),
        (1, 63),
        (0x4000_0000_0000_0000, 1),
        (0xffff_0000_0000_0000, 16),
        (0x0000_0000_8000_0000, 32),
    ] {
        (w.sgpr[2], w.sgpr[3]) = (value as u32, (value >> 32) as u32);
        run(&[0xbe800d02], &mut w);
        assert_eq!(w.sgpr[0] as i32, want, "cls of {value:#x}");
    }
    w.sgpr[2] = 0x8000_0005;
    run(&[0xbe801402], &mut w); // s_bitreplicate_b64_b32 s[0:1], s2
    assert_eq!((w.sgpr[0], w.sgpr[1]), (0x0000_0033, 0xc000_0000));
    w.sgpr[2] = 0x1000_0f20;
    run(&[0xbe801a02], &mut w); // s_quadmask_b32 s0, s2: nibbles 1, 2 and 7 are set
    assert_eq!((w.sgpr[0], w.scc), (0b1000_0110, true));
    (w.sgpr[2], w.sgpr[3]) = (0x0000_0001, 0x8000_0000);
    run(&[0xbe801b02], &mut w); // s_quadmask_b64 s[0:1], s[2:3]
    assert_eq!((w.sgpr[0], w.sgpr[1], w.scc), (0x8001, 0, true));
    (w.sgpr[2], w.sgpr[3]) = (0, 0);
    run(&[0xbe801b02], &mut w);
    assert_eq!((w.sgpr[0], w.scc), (0, false));
    (w.sgpr[2], w.sgpr[3]) = (0x0000_0010, 0x0200_0000);
    run(&[0xbe801d02], &mut w); // s_wqm_b64 s[0:1], s[2:3]
    assert_eq!(
        (w.sgpr[0], w.sgpr[1], w.scc),
        (0x0000_00f0, 0x0f00_0000, true)
    );
}

#[test]
fn cube_map_coordinates() {
    let mut w = wave();
    // (x, y, z) per lane and the expected (face id, sc, tc, 2 * major axis). The major
    // axis is z on ties, then y over x.
    let cases: [([f32; 3], [f32; 4]); 7] = [
        ([1.0, 2.0, 3.0], [4.0, 1.0, -2.0, 6.0]),
        ([1.0, 2.0, -3.0], [5.0, -1.0, -2.0, -6.0]),
        ([1.0, -5.0, 3.0], [3.0, 1.0, -3.0, -10.0]),
        ([1.0, 5.0, 3.0], [2.0, 1.0, 3.0, 10.0]),
        ([7.0, 5.0, 3.0], [0.0, -3.0, -5.0, 14.0]),
        ([-7.0, 5.0, 3.0], [1.0, 3.0, -5.0, -14.0]),
        ([2.0, -2.0, 2.0], [4.0, 2.0, 2.0, 4.0]),
    ];
    for source in 0..3 {
        set_lanes(&mut w, 1 + source, |l| cases[l % 7].0[source].to_bits());
    }
    let ops = [
        (0xd60c0000, "cubeid"),
        (0xd60d0000, "cubesc"),
        (0xd60e0000, "cubetc"),
        (0xd60f0000, "cubema"),
    ];
    for (k, (word, name)) in ops.iter().enumerate() {
        run(&[*word, 0x040e0501], &mut w); // v_cube*_f32 v0, v1, v2, v3
        for (lane, (xyz, want)) in cases.iter().enumerate() {
            assert_eq!(
                f32::from_bits(w.vgpr[0][lane]),
                want[k],
                "{name} of {xyz:?}"
            );
        }
    }
}

#[test]
fn quad_sums_of_absolute_byte_differences() {
    let mut w = wave();
    w.sgpr[usize::from(EXEC_LO)] = 1;
    // S0 bytes (low to high) 10, 20, 30, 40, 50, 60, 70, 80; S1 bytes 12, 0, 33, 40.
    w.vgpr[2][0] = u32::from_le_bytes([10, 20, 30, 40]);
    w.vgpr[3][0] = u32::from_le_bytes([50, 60, 70, 80]);
    w.vgpr[4][0] = u32::from_le_bytes([12, 0, 33, 40]);
    // Accumulators: 16-bit fields 1000, 2000, 3000, 0xffff (the last one wraps).
    w.vgpr[6][0] = 1000 | 2000 << 16;
    w.vgpr[7][0] = 3000 | 0xffff << 16;
    // Window k holds S0 bytes k..k+3; the differences against S1 are
    //   k=0: 2+20+3+0, k=1: 8+30+7+10, k=2: 18+40+17+20, k=3: 28+50+27+30
    // and the masked form (v_mqsad) skips S1's zero byte: the second term.
    let plain = [25u64, 55, 95, 135];
    let masked = [5u64, 25, 55, 85];
    let accumulators = [1000u64, 2000, 3000, 0xffff];
    let pack = |sums: [u64; 4]| {
        (0..4).fold(0u64, |out, k| {
            out | ((sums[k] + accumulators[k]) & 0xffff) << (16 * k)
        })
    };
    let read64 = |w: &Wave| u64::from(w.vgpr[0][0]) | u64::from(w.vgpr[1][0]) << 32;
    run(&[0xd63a0000, 0x041a0902], &mut w); // v_qsad_pk_u16_u8 v[0:1], v[2:3], v4, v[6:7]
    assert_eq!(read64(&w), pack(plain));
    run(&[0xd63b0000, 0x041a0902], &mut w); // v_mqsad_pk_u16_u8 v[0:1], v[2:3], v4, v[6:7]
    assert_eq!(read64(&w), pack(masked));
    // v_mqsad_u32_u8 v[0:3], v[4:5], v6, v[8:11]: 32-bit accumulators, no truncation.
    w.vgpr[4][0] = w.vgpr[2][0];
    w.vgpr[5][0] = w.vgpr[3][0];
    w.vgpr[6][0] = u32::from_le_bytes([12, 0, 33, 40]);
    let wide = [100_000u32, 0xffff_fff0, 7, 0];
    for (k, value) in wide.iter().enumerate() {
        w.vgpr[8 + k][0] = *value;
    }
    run(&[0xd63d0000, 0x04220d04], &mut w);
    for k in 0..4 {
        assert_eq!(
            w.vgpr[k][0],
            wide[k].wrapping_add(masked[k] as u32),
            "dword {k}"
        );
    }
}

#[test]
fn trig_preop_segments_of_two_over_pi() {
    let mut w = wave();
    // Expected values: the ISA pseudocode evaluated with exact integer arithmetic (2/π to
    // 1500 bits from Machin's formula) on the host.
    let cases: [(f64, u32, u64); 11] = [
        (1.0, 0, 0x3fe4_5f30_6dc9_c882),
        (1.0, 1, 0x3c94_a7f0_9d5f_47d4),
        (1.0, 2, 0x394a_6ee0_6db1_4acc),
        (-3.0, 1, 0x3c94_a7f0_9d5f_47d4),
        // Exponents above 1077 skip (exponent - 1077) further bits.
        (2f64.powi(100), 0, 0x3cb5_29fc_2757_d1e0),
        (2f64.powi(100), 3, 0x32f6_3abd_ebbc_5618),
        // From exponent 1968 the result is scaled up by 2^128.
        (2f64.powi(1000), 0, 0x0cc5_16ba_93dd_63f5),
        (2f64.powi(1000), 2, 0x061e_294a_4ba9_afec),
        (1.0, 19, 0x00ff_17b3_d073_9f78),
        // Below the normal range the segment is truncated; past the 1201 bits it is zero.
        (1.0, 20, 0x294a),
        (1.0, 23, 0),
    ];
    set_lanes(&mut w, 2, |l| cases[l % cases.len()].0.to_bits() as u32);
    set_lanes(&mut w, 3, |l| {
        (cases[l % cases.len()].0.to_bits() >> 32) as u32
    });
    set_lanes(&mut w, 4, |l| cases[l % cases.len()].1);
    run(&[0xd72f0000, 0x00020902], &mut w); // v_trig_preop_f64 v[0:1], v[2:3], v4
    for (lane, (x, segment, want)) in cases.iter().enumerate() {
        let got = u64::from(w.vgpr[0][lane]) | u64::from(w.vgpr[1][lane]) << 32;
        assert_eq!(got, *want, "segment {segment} for {x:e}");
    }
}

#[test]
fn mullit_and_offset_nibble_conversion() {
    let mut w = wave();
    // v_mullit_f32 v0, v1, v2, v3: S0 * S1, or -FLT_MAX when S1 is -FLT_MAX, -inf or NaN
    // or S2 is not positive.
    let cases: [(f32, f32, f32, f32); 5] = [
        (3.0, 2.0, 1.0, 6.0),
        (3.0, f32::NEG_INFINITY, 1.0, -f32::MAX),
        (3.0, f32::NAN, 1.0, -f32::MAX),
        (3.0, 2.0, 0.0, -f32::MAX),
        (3.0, 2.0, -0.5, -f32::MAX),
    ];
    set_lanes(&mut w, 1, |l| cases[l % 5].0.to_bits());
    set_lanes(&mut w, 2, |l| cases[l % 5].1.to_bits());
    set_lanes(&mut w, 3, |l| cases[l % 5].2.to_bits());
    run(&[0xd6180000, 0x040e0501], &mut w);
    for (lane, case) in cases.iter().enumerate() {
        assert_eq!(f32::from_bits(w.vgpr[0][lane]), case.3, "{case:?}");
    }
    // v_cvt_off_f32_i4_e32 v0, v1: the low nibble as a signed count of sixteenths.
    set_lanes(&mut w, 1, |l| 0xabc0 | (l as u32 % 16));
    run(&[0x7e001d01], &mut w);
    for lane in 0..16 {
        let nibble = if lane < 8 {
            lane as f32
        } else {
            lane as f32 - 16.0
        };
        assert_eq!(
            f32::from_bits(w.vgpr[0][lane]),
            nibble / 16.0,
            "nibble {lane}"
        );
    }
}

/// LDS of `dwords` dwords, dword `k` holding `f(k)`.
fn lds_words(dwords: usize, f: impl Fn(usize) -> u32) -> Vec<u8> {
    (0..dwords).flat_map(|k| f(k).to_le_bytes()).collect()
}

fn lds_dword(lds: &[u8], k: usize) -> u32 {
    u32::from_le_bytes(lds[k * 4..k * 4 + 4].try_into().unwrap())
}

#[test]
fn ds_masked_or_keeps_unmasked_bits() {
    let initial = |k: usize| 0x1234_5678u32.rotate_left(k as u32) ^ k as u32;
    let mask = |lane: usize| 0x00ff_00ffu32.rotate_left(lane as u32);
    let bits = |lane: usize| 0x0f0f_0f0fu32.wrapping_mul(lane as u32 + 1);
    let mut w = wave();
    let mut lds = lds_words(80, initial);
    set_lanes(&mut w, 1, |lane| lane as u32 * 4);
    set_lanes(&mut w, 2, mask);
    set_lanes(&mut w, 3, bits);
    run_with_lds(&[0xd8b00000, 0x00030201], &mut w, &mut lds); // ds_mskor_rtn_b32 v0, v1, v2, v3
    for lane in 0..32 {
        let old = initial(lane);
        assert_eq!(w.vgpr[0][lane], old, "returned {lane}");
        let new = (old & !mask(lane)) | bits(lane);
        assert_eq!(lds_dword(&lds, lane), new, "memory {lane}");
    }
    // Without return, at offset 8 (dwords 2..34).
    let mut lds = lds_words(80, initial);
    w.vgpr[0] = [0xdead; 32];
    run_with_lds(&[0xd8300008, 0x00030201], &mut w, &mut lds); // ds_mskor_b32 v1, v2, v3 offset:8
    for lane in 0..32 {
        let new = (initial(lane + 2) & !mask(lane)) | bits(lane);
        assert_eq!(lds_dword(&lds, lane + 2), new, "memory {lane}");
        assert_eq!(w.vgpr[0][lane], 0xdead, "no return {lane}");
    }
    // 64-bit, with return, at offset 16.
    let mut lds = lds_words(80, initial);
    set_lanes(&mut w, 1, |lane| lane as u32 * 8);
    set_lanes(&mut w, 4, |lane| mask(lane + 7));
    set_lanes(&mut w, 5, |lane| bits(lane + 9));
    run_with_lds(&[0xd9b00010, 0x06040201], &mut w, &mut lds); // ds_mskor_rtn_b64 v[6:7], v1, v[2:3], v[4:5] offset:16
    for lane in 0..32 {
        let at = 4 + lane * 2;
        let old = u64::from(initial(at)) | (u64::from(initial(at + 1)) << 32);
        let mask64 = u64::from(mask(lane)) | (u64::from(bits(lane)) << 32);
        let bits64 = u64::from(mask(lane + 7)) | (u64::from(bits(lane + 9)) << 32);
        let new = (old & !mask64) | bits64;
        let returned = u64::from(w.vgpr[6][lane]) | (u64::from(w.vgpr[7][lane]) << 32);
        assert_eq!(returned, old, "returned {lane}");
        let stored = u64::from(lds_dword(&lds, at)) | (u64::from(lds_dword(&lds, at + 1)) << 32);
        assert_eq!(stored, new, "memory {lane}");
    }
}

#[test]
fn ds_wrap_subtracts_or_adds() {
    let initial = |k: usize| (k as u32 * 7) % 20;
    let mut w = wave();
    let mut lds = lds_words(40, initial);
    set_lanes(&mut w, 1, |lane| lane as u32 * 4);
    set_lanes(&mut w, 2, |lane| 5 + lane as u32 % 9);
    set_lanes(&mut w, 3, |lane| 100 + lane as u32);
    run_with_lds(&[0xd8d00004, 0x00030201], &mut w, &mut lds); // ds_wrap_rtn_b32 v0, v1, v2, v3 offset:4
    for lane in 0..32 {
        let old = initial(lane + 1);
        let (data, data2) = (5 + lane as u32 % 9, 100 + lane as u32);
        let new = if old >= data { old - data } else { old + data2 };
        assert_eq!(w.vgpr[0][lane], old, "returned {lane}");
        assert_eq!(lds_dword(&lds, lane + 1), new, "memory {lane}");
    }
}

#[test]
fn ds_condxchg32_writes_halves_with_bit_31_set() {
    let initial = |k: usize| 0x1000 + k as u32;
    let mut w = wave();
    let mut lds = lds_words(72, initial);
    // Address + 12, aligned down to 8 bytes: lane i → dwords 2i + 2 and 2i + 3.
    set_lanes(&mut w, 1, |lane| lane as u32 * 8);
    let flag = |lane: usize, half: usize| (lane >> half) & 1 != 0;
    let data = |lane: usize, half: usize| {
        let value = 0x0055_0000 | (lane as u32) << 4 | half as u32;
        if flag(lane, half) {
            value | 0x8000_0000
        } else {
            value
        }
    };
    set_lanes(&mut w, 2, |lane| data(lane, 0));
    set_lanes(&mut w, 3, |lane| data(lane, 1));
    run_with_lds(&[0xd9f8000c, 0x00000201], &mut w, &mut lds); // ds_condxchg32_rtn_b64 v[0:1], v1, v[2:3] offset:12
    for lane in 0..32 {
        for half in 0..2 {
            let k = 2 * lane + 2 + half;
            assert_eq!(w.vgpr[half][lane], initial(k), "returned {lane}.{half}");
            let expected = if flag(lane, half) {
                data(lane, half) & 0x7fff_ffff
            } else {
                initial(k)
            };
            assert_eq!(lds_dword(&lds, k), expected, "memory {lane}.{half}");
        }
    }
}

#[test]
fn ds_addtid_addresses_by_lane_and_m0() {
    let mut w = wave();
    let mut lds = vec![0u8; 256];
    w.sgpr[M0] = 0xabcd_0020; // only M0[15:0] counts
    w.sgpr[usize::from(EXEC_LO)] = 0x7fff_fffe;
    set_lanes(&mut w, 2, |lane| 0x100 + lane as u32);
    run_with_lds(&[0xdac00010, 0x00000200], &mut w, &mut lds); // ds_store_addtid_b32 v2 offset:16
    for lane in 0..32 {
        let expected = if lane == 0 || lane == 31 {
            0
        } else {
            0x100 + lane as u32
        };
        assert_eq!(
            lds_dword(&lds, (0x20 + 16) / 4 + lane),
            expected,
            "stored {lane}"
        );
    }
    w.sgpr[M0] = 0x30;
    w.sgpr[usize::from(EXEC_LO)] = u32::MAX;
    run_with_lds(&[0xdac40010, 0x00000000], &mut w, &mut lds); // ds_load_addtid_b32 v0 offset:16
    for lane in 0..32 {
        assert_eq!(
            w.vgpr[0][lane],
            lds_dword(&lds, (0x30 + 16) / 4 + lane),
            "loaded {lane}"
        );
    }
}

#[test]
fn swap_b16_exchanges_register_halves() {
    let mut w = wave();
    set_lanes(&mut w, 1, |lane| 0x1111_0000 | lane as u32);
    set_lanes(&mut w, 2, |lane| 0x2222_0000 | (lane as u32) << 8);
    w.sgpr[usize::from(EXEC_LO)] = 0xffff_fff0;
    // LLVM 19 cannot encode or decode it for gfx1100: VOP1 opcode 102, true16 VGPR halves.
    let text = decode(&[0x7e02cd82]).unwrap().inst.to_string();
    assert_eq!(text, "v_swap_b16 v1.l, v2.h");
    run(&[0x7e02cd82], &mut w);
    for lane in 0..32 {
        let (one, two) = (0x1111_0000 | lane as u32, 0x2222_0000 | (lane as u32) << 8);
        let (one, two) = if lane < 4 {
            (one, two)
        } else {
            (
                (one & 0xffff_0000) | (two >> 16),
                (two & 0xffff) | (one & 0xffff) << 16,
            )
        };
        assert_eq!(
            (w.vgpr[1][lane], w.vgpr[2][lane]),
            (one, two),
            "lane {lane}"
        );
    }
    // Both halves of one register.
    set_lanes(&mut w, 3, |lane| 0xaaaa_0000 | lane as u32);
    w.sgpr[usize::from(EXEC_LO)] = u32::MAX;
    run(&[0x7f06cd03], &mut w); // v_swap_b16 v3.h, v3.l (hand-encoded)
    for lane in 0..32 {
        assert_eq!(w.vgpr[3][lane], (lane as u32) << 16 | 0xaaaa, "lane {lane}");
    }
}

#[test]
fn permlane64_faults_in_wave32() {
    let mut w = wave();
    let decoded = decode(&[0x7e00cf01]).unwrap(); // v_permlane64_b32 v0, v1
    let mem = HostMemory::new(&[]);
    let mut lds = [0u8; 64];
    let mut ctx = ExecContext {
        mem: &mem,
        lds: &mut lds,
    };
    let fault = w.execute(&mut ctx, &decoded.inst, 4).unwrap_err();
    assert!(fault.to_string().contains("v_permlane64_b32"), "{fault}");
    assert!(fault.to_string().contains("wave64"), "{fault}");
}

/// VOPD: both halves read their sources before either writes, whichever order the
/// interpreter runs them in; FMACs round once, in the lanes of EXEC only.
#[test]
fn dual_issue_reads_before_it_writes() {
    let mut w = wave();
    set_lanes(&mut w, 0, |l| 100 + l as u32);
    set_lanes(&mut w, 1, |l| 200 + l as u32);
    run(&[0xca100101, 0x00000100], &mut w); // v_dual_mov_b32 v0, v1 :: v_dual_mov_b32 v1, v0
    for lane in 0..32 {
        assert_eq!(
            (w.vgpr[0][lane], w.vgpr[1][lane]),
            (200 + lane as u32, 100 + lane as u32)
        );
    }

    // Y adds X's destination as it was before X wrote it.
    let acc = |l: usize| (l as f32) * 0.25 - 3.0;
    let mut w = wave();
    set_lanes(&mut w, 0, |l| acc(l).to_bits());
    set_lanes(&mut w, 1, |l| (1.5 + l as f32).to_bits());
    set_lanes(&mut w, 2, |l| (0.75 - l as f32).to_bits());
    set_lanes(&mut w, 4, |l| (10.0 * l as f32).to_bits());
    run(&[0xc8080501, 0x00020104], &mut w); // v_dual_fmac_f32 v0, v1, v2 :: v_dual_add_f32 v3, v4, v0
    for l in 0..32 {
        let fused = (1.5 + l as f32).mul_add(0.75 - l as f32, acc(l));
        assert_eq!(w.vgpr[0][l], fused.to_bits(), "v0 lane {l}");
        assert_eq!(
            w.vgpr[3][l],
            (10.0 * l as f32 + acc(l)).to_bits(),
            "v3 lane {l}"
        );
    }

    // Two independent FMACs under a partial EXEC, with operands whose product rounded
    // before the add would lose the answer: (1 + 2^-12)^2 - (1 + 2^-11) is 2^-24 fused, 0
    // unfused.
    let mut w = wave();
    w.sgpr[usize::from(EXEC_LO)] = 0x0f0f_f0f0;
    let a = 1.0 + (2.0f32).powi(-12);
    let c = |l: usize| -(1.0 + (2.0f32).powi(-11)) * (1.0 + l as f32);
    set_lanes(&mut w, 0, |l| c(l).to_bits());
    set_lanes(&mut w, 1, |l| (a * (1.0 + l as f32)).to_bits());
    set_lanes(&mut w, 2, |_| a.to_bits());
    set_lanes(&mut w, 3, |l| (l as f32).to_bits());
    set_lanes(&mut w, 6, |l| (l as f32 - 16.0).to_bits());
    set_lanes(&mut w, 7, |_| 3.0f32.to_bits());
    run(&[0xc8000501, 0x00020f06], &mut w); // v_dual_fmac_f32 v0, v1, v2 :: v_dual_fmac_f32 v3, v6, v7
    for l in 0..32 {
        let on = 0x0f0f_f0f0u32 >> l & 1 != 0;
        let x = (a * (1.0 + l as f32)).mul_add(a, c(l));
        let y = (l as f32 - 16.0).mul_add(3.0, l as f32);
        assert_eq!(
            w.vgpr[0][l],
            if on { x } else { c(l) }.to_bits(),
            "v0 lane {l}"
        );
        assert_eq!(
            w.vgpr[3][l],
            if on { y } else { l as f32 }.to_bits(),
            "v3 lane {l}"
        );
    }
    // The operands tell the two apart: rounding the product first gives another answer.
    let (p, q) = (a * 5.0, a);
    assert_ne!(w.vgpr[0][4], (p * q + c(4)).to_bits());
}
