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
