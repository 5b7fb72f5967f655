//! Decoder tests: instruction words (assembled with `llvm-mc-19 -arch=amdgcn -mcpu=gfx1100 -filetype=obj`,
//! disassembled with `llvm-objdump-19 -d --mcpu=gfx1100`; hard-coded so the tests need no LLVM).
//! Every instruction must decode to its full length with LLVM's mnemonic; most must also
//! print exactly LLVM's operand syntax (the exceptions are listed in `OPERAND_SYNTAX_DIFFERS`).

use rdna3::decode::{decode, DecodeError, Inst};
use rdna3::isa::{identify_encoding, Encoding, Sop2Op, Vop2Op, Vop3Op};
use rdna3::Operand;

/// (words, LLVM text)
const CASES: &[(&[u32], &str)] = &[
    (&[0xbfb00000], "s_endpgm"),
    (&[0xbf800000], "s_nop 0"),
    (&[0xbfbd0000], "s_barrier"),
    (&[0xbfa0ffff], "s_branch 65535"),
    (&[0xbfa2fffd], "s_cbranch_scc1 65533"),
    (&[0xbfa5001c], "s_cbranch_execz 28"),
    (&[0xbf89fc07], "s_waitcnt lgkmcnt(0)"),
    (&[0xbe8000ff, 0x12345678], "s_mov_b32 s0, 0x12345678"),
    (&[0xbee60069], "s_mov_b32 s102, s105"),
    (&[0xbe8001c1], "s_mov_b64 s[0:1], -1"),
    (&[0xbe8000f0], "s_mov_b32 s0, 0.5"),
    (&[0xbe80206a], "s_and_saveexec_b32 s0, vcc_lo"),
    (&[0xbe804700], "s_getpc_b64 s[0:1]"),
    (&[0xbe9e4900], "s_swappc_b64 s[30:31], s[0:1]"),
    (&[0x8000ff01, 0xffffffef], "s_add_u32 s0, s1, 0xffffffef"),
    (&[0x82018001], "s_addc_u32 s1, s1, 0"),
    (&[0x84808402], "s_lshl_b64 s[0:1], s[2:3], 4"),
    (&[0x8b016a7e], "s_and_b32 s1, exec_lo, vcc_lo"),
    (&[0x917e007e], "s_and_not1_b32 exec_lo, exec_lo, s0"),
    (&[0x98000201], "s_cselect_b32 s0, s1, s2"),
    (&[0x9300ff01, 0x00080008], "s_bfe_u32 s0, s1, 0x80008"),
    (&[0xb0001234], "s_movk_i32 s0, 0x1234"),
    (&[0xb4800010], "s_cmpk_eq_u32 s0, 0x10"),
    (&[0xbf06ff00, 0x12345678], "s_cmp_eq_u32 s0, 0x12345678"),
    (&[0xbf118000], "s_cmp_lg_u64 s[0:1], 0"),
    (&[0xbf0c8300], "s_bitcmp0_b32 s0, 3"),
    (&[0xf4000000, 0xf8000000], "s_load_b32 s0, s[0:1], null"),
    (&[0xf4040080, 0xf8000018], "s_load_b64 s[2:3], s[0:1], 0x18"),
    (
        &[0xf4080100, 0xf8000000],
        "s_load_b128 s[4:7], s[0:1], null",
    ),
    (
        &[0xf40c0201, 0xf8000040],
        "s_load_b256 s[8:15], s[2:3], 0x40",
    ),
    (
        &[0xf4000001, 0x08000010],
        "s_load_b32 s0, s[2:3], s4 offset:0x10",
    ),
    (&[0x06020702], "v_add_f32_e32 v1, v2, v3"),
    (&[0x7e0002ff, 0x40490fdb], "v_mov_b32_e32 v0, 0x40490fdb"),
    (&[0x7e020202], "v_mov_b32_e32 v1, s2"),
    (&[0x7e020b01], "v_cvt_f32_i32_e32 v1, v1"),
    (&[0x7e001501], "v_cvt_f16_f32_e32 v0, v1"),
    (&[0x7e0c5504], "v_rcp_f32_e32 v6, v4"),
    (&[0x7e000501], "v_readfirstlane_b32 s0, v1"),
    (&[0x30020082], "v_lshlrev_b32_e32 v1, 2, v0"),
    (&[0x3404029f], "v_ashrrev_i32_e32 v2, 31, v1"),
    (&[0x02000501], "v_cndmask_b32_e32 v0, v1, v2, vcc_lo"),
    (
        &[0x40060207],
        "v_add_co_ci_u32_e32 v3, vcc_lo, s7, v1, vcc_lo",
    ),
    (&[0x56060404], "v_fmac_f32_e32 v3, s4, v2"),
    (
        &[0x5a000501, 0x40000000],
        "v_fmaak_f32 v0, v1, v2, 0x40000000",
    ),
    (
        &[0x58000501, 0x40000000],
        "v_fmamk_f32 v0, v1, 0x40000000, v2",
    ),
    (&[0x7c940080], "v_cmp_eq_u32_e32 vcc_lo, 0, v0"),
    (&[0x7c880202], "v_cmp_gt_i32_e32 vcc_lo, s2, v1"),
    (&[0x7d945280], "v_cmpx_eq_u32_e32 0, v41"),
    (&[0x7c420500], "v_cmp_lt_f64_e32 vcc_lo, v[0:1], v[2:3]"),
    (&[0xd7270000, 0x000204f2], "v_add_f64 v[0:1], 1.0, v[2:3]"),
    (
        &[0xd6140000, 0x03ca0902],
        "v_fma_f64 v[0:1], v[2:3], v[4:5], 1.0",
    ),
    (&[0xd73c0000, 0x00020282], "v_lshlrev_b64 v[0:1], 2, v[1:2]"),
    (
        &[0xd6fe7c01, 0x0400060f],
        "v_mad_u64_u32 v[1:2], null, s15, s3, v[0:1]",
    ),
    (&[0xd7006a00, 0x00020002], "v_add_co_u32 v0, vcc_lo, s2, v0"),
    (
        &[0xd6fc7c04, 0x040a0703],
        "v_div_scale_f32 v4, null, v3, v3, v2",
    ),
    (
        &[0xd5010001, 0x01a90280],
        "v_cndmask_b32_e64 v1, 0, 1, vcc_lo",
    ),
    (
        &[0xd5010105, 0x00020b02],
        "v_cndmask_b32_e64 v5, |v2|, v5, s0",
    ),
    (&[0xd71f0001, 0x000100c1], "v_mbcnt_lo_u32_b32 v1, -1, 0"),
    (&[0xd4110104, 0x40020501], "v_cmp_lt_f32_e64 s4, |v1|, -v2"),
    (&[0xd4c4007e, 0x00020205], "v_cmpx_gt_i32_e64 s5, v1"),
    (
        &[0xd47e006a, 0x0001ff05, 0x00000260],
        "v_cmp_class_f32_e64 vcc_lo, v5, 0x260",
    ),
    (
        &[0xd5080205, 0x000204ff, 0x4f800000],
        "v_mul_f32_e64 v5, 0x4f800000, |v2|",
    ),
    (&[0xd6130008, 0x23ca0d04], "v_fma_f32 v8, -v4, v6, 1.0"),
    (
        &[0xd5038000, 0x08020501],
        "v_add_f32_e64 v0, v1, v2 clamp mul:2",
    ),
    (&[0xd6400002, 0x040a0b03], "v_xor3_b32 v2, v3, v5, v2"),
    (&[0xd72c0002, 0x00020503], "v_mul_lo_u32 v2, v3, v2"),
    (&[0xd6460000, 0x04ad0422], "v_lshl_add_u32 v0, s34, 2, v43"),
    (&[0xd7610028, 0x00010400], "v_writelane_b32 v40, s0, 2"),
    (&[0xd760001f, 0x00010328], "v_readlane_b32 s31, v40, 1"),
    (&[0xd6100000, 0x02211101], "v_bfe_u32 v0, v1, 8, 8"),
    (
        &[0x7e0002fa, 0xff00b101],
        "v_mov_b32_dpp v0, v1 quad_perm:[1,0,3,2] row_mask:0xf bank_mask:0xf",
    ),
    (
        &[0x060004fa, 0xff091101],
        "v_add_f32_dpp v0, v1, v2 row_shr:1 row_mask:0xf bank_mask:0xf bound_ctrl:1",
    ),
    (
        &[0x7e0002e9, 0x05397701],
        "v_mov_b32_dpp v0, v1 dpp8:[7,6,5,4,3,2,1,0]",
    ),
    (&[0xcc0f4000, 0x18020501], "v_pk_add_f16 v0, v1, v2"),
    (&[0xcc0e4000, 0x1c0e0501], "v_pk_fma_f16 v0, v1, v2, v3"),
    (
        &[0xca100000, 0x00000001],
        "v_dual_mov_b32 v0, s0 :: v_dual_mov_b32 v1, s1",
    ),
    (
        &[0xc8100501, 0x000200f2],
        "v_dual_fmac_f32 v0, v1, v2 :: v_dual_mov_b32 v3, 1.0",
    ),
    (
        &[0xc9020501, 0x00020b04, 0x40000000],
        "v_dual_add_f32 v0, v1, v2 :: v_dual_fmaak_f32 v3, v4, v5, 0x40000000",
    ),
    (
        &[0xc8e00d09, 0x0b080ec1],
        "v_dual_mul_f32 v11, v9, v6 :: v_dual_add_nc_u32 v8, -1, v7",
    ),
    (&[0xdc520000, 0x027c0002], "global_load_b32 v2, v[2:3], off"),
    (
        &[0xdc5e0010, 0x00020004],
        "global_load_b128 v[0:3], v4, s[2:3] offset:16",
    ),
    (
        &[0xdc6a0000, 0x007c0200],
        "global_store_b32 v[0:1], v2, off",
    ),
    (&[0xdc6a0000, 0x00000001], "global_store_b32 v1, v0, s[0:1]"),
    (
        &[0xdc6e1ff8, 0x007c0200],
        "global_store_b64 v[0:1], v[2:3], off offset:-8",
    ),
    (
        &[0xdcd60000, 0x00240100],
        "global_atomic_add_u32 v0, v1, s[36:37]",
    ),
    (
        &[0xdcd64000, 0x00020201],
        "global_atomic_add_u32 v0, v1, v2, s[2:3] glc",
    ),
    (
        &[0xdcd24000, 0x00000201],
        "global_atomic_cmpswap_b32 v0, v1, v[2:3], s[0:1] glc",
    ),
    (
        &[0xdd5a0000, 0x007c0200],
        "global_atomic_add_f32 v[0:1], v2, off",
    ),
    (
        &[0xdc506000, 0x027c0000],
        "flat_load_b32 v2, v[0:1] glc dlc",
    ),
    (&[0xdc680000, 0x007c0200], "flat_store_b32 v[0:1], v2"),
    (&[0xdc690000, 0x00212800], "scratch_store_b32 off, v40, s33"),
    (&[0xdc510000, 0x28210000], "scratch_load_b32 v40, off, s33"),
    (
        &[0xdc690008, 0x00fc0201],
        "scratch_store_b32 v1, v2, off offset:8",
    ),
    (&[0xd8340010, 0x00000201], "ds_store_b32 v1, v2 offset:16"),
    (&[0xd8d80000, 0x01000000], "ds_load_b32 v1, v0"),
    (&[0xd8000000, 0x00000001], "ds_add_u32 v1, v0"),
    (&[0xd8800000, 0x00000201], "ds_add_rtn_u32 v0, v1, v2"),
    (
        &[0xd8dc0201, 0x00000002],
        "ds_load_2addr_b32 v[0:1], v2 offset0:1 offset1:2",
    ),
    (
        &[0xd9380800, 0x00040200],
        "ds_store_2addr_b64 v0, v[2:3], v[4:5] offset1:8",
    ),
    (&[0xdacc0000, 0x00000201], "ds_bpermute_b32 v0, v1, v2"),
    (&[0xe0ac0000, 0x00000000], "buffer_gl0_inv"),
    (
        &[0xf0000f00, 0x00000000],
        "image_load v[0:3], v0, s[0:7] dmask:0xf dim:SQ_RSRC_IMG_1D",
    ),
];

/// Texts whose operands this decoder prints differently from LLVM (mnemonic still checked).
const OPERAND_SYNTAX_DIFFERS: &[&str] =
    &["image_load v[0:3], v0, s[0:7] dmask:0xf dim:SQ_RSRC_IMG_1D"];

#[test]
fn decodes_llvm_encodings() {
    let mut mismatches = Vec::new();
    for (words, text) in CASES {
        let decoded = decode(words).unwrap_or_else(|e| panic!("{text}: {e:?}"));
        assert_eq!(decoded.words, words.len(), "{text}: length");
        let printed = decoded.inst.to_string();
        let mnemonic = text.split_whitespace().next().unwrap();
        assert_eq!(
            printed.split_whitespace().next().unwrap(),
            mnemonic,
            "{text}: mnemonic (printed {printed})"
        );
        if printed != *text && !OPERAND_SYNTAX_DIFFERS.contains(text) {
            mismatches.push(format!("expected `{text}`\n     got `{printed}`"));
        }
    }
    assert!(
        mismatches.is_empty(),
        "operand syntax differs:\n{}",
        mismatches.join("\n")
    );
}

#[test]
fn identifies_encodings_by_longest_fixed_match() {
    // SOPP/SOPC/SOP1/SOPK words also fit SOP2's two fixed bits; VOPC words fit VOP2's one.
    assert_eq!(identify_encoding(0xbfb00000), Some(Encoding::Sopp));
    assert_eq!(identify_encoding(0xbf068000), Some(Encoding::Sopc));
    assert_eq!(identify_encoding(0xbe80007e), Some(Encoding::Sop1));
    assert_eq!(identify_encoding(0xb0001234), Some(Encoding::Sopk));
    assert_eq!(identify_encoding(0x80000201), Some(Encoding::Sop2));
    assert_eq!(identify_encoding(0x7c940080), Some(Encoding::Vopc));
    assert_eq!(identify_encoding(0x7e0c5504), Some(Encoding::Vop1));
    assert_eq!(identify_encoding(0x06040702), Some(Encoding::Vop2));
    assert_eq!(identify_encoding(0xd6fe7c01), Some(Encoding::Vop3));
    assert_eq!(identify_encoding(0xdc520000), Some(Encoding::Global));
    assert_eq!(identify_encoding(0xdc500000), Some(Encoding::Flat));
    assert_eq!(identify_encoding(0xdc510000), Some(Encoding::Scratch));
    assert_eq!(identify_encoding(0xffffffff), None);
}

#[test]
fn sop2_fields_and_literal() {
    // s_add_u32 s0, s1, 0xffffffef
    let d = decode(&[0x8000ff01, 0xffffffef]).unwrap();
    assert_eq!(d.words, 2);
    let Inst::Sop2(i) = d.inst else {
        panic!("{:?}", d.inst)
    };
    assert_eq!(i.op, Sop2Op::S_ADD_U32);
    assert_eq!(
        (i.sdst, i.ssrc0, i.ssrc1),
        (
            Operand::Sgpr(0),
            Operand::Sgpr(1),
            Operand::Literal(0xffff_ffef)
        )
    );
}

#[test]
fn vop2_lowering_makes_implicit_vcc_explicit() {
    // v_add_co_ci_u32_e32 v3, vcc_lo, s7, v1, vcc_lo
    let Inst::Vop2(i) = decode(&[0x40060207]).unwrap().inst else {
        panic!()
    };
    assert_eq!(i.op, Vop2Op::V_ADD_CO_CI_U32_E32);
    let v = i.valu.unwrap();
    assert_eq!(v.src, [Operand::Sgpr(7), Operand::Vgpr(1), Operand::VccLo]);
    assert_eq!(v.sdst, Operand::VccLo);
    assert_eq!(v.op.mnemonic(), "v_add_co_ci_u32");
    // v_fmaak_f32 v0, v1, v2, 0x40000000 → v_fma_f32 v0, v1, v2, K
    let Inst::Vop2(i) = decode(&[0x5a000501, 0x40000000]).unwrap().inst else {
        panic!()
    };
    let v = i.valu.unwrap();
    assert_eq!(v.op.mnemonic(), "v_fma_f32");
    assert_eq!(
        v.src,
        [
            Operand::Vgpr(1),
            Operand::Vgpr(2),
            Operand::Literal(0x4000_0000)
        ]
    );
}

#[test]
fn vop3_modifiers_and_scalar_destination() {
    // v_cmp_lt_f32_e64 s4, |v1|, -v2
    let Inst::Vop3(i) = decode(&[0xd4110104, 0x40020501]).unwrap().inst else {
        panic!()
    };
    assert_eq!(i.op, Vop3Op::V_CMP_LT_F32_E64);
    assert_eq!(i.vdst, Operand::Sgpr(4));
    assert_eq!((i.abs, i.neg), (0b01, 0b10));
    assert!(i.valu.compare.is_some());
    // v_lshlrev_b64 v[0:1], 2, v[1:2]: 64-bit second source
    let Inst::Vop3(i) = decode(&[0xd73c0000, 0x00020282]).unwrap().inst else {
        panic!()
    };
    assert_eq!(i.valu.src_bits, [32, 64, 0]);
    assert_eq!(i.valu.dst_bits, 64);
}

#[test]
fn vop3sd_and_vopd() {
    // v_mad_u64_u32 v[1:2], null, s15, s3, v[0:1]
    let Inst::Vop3sd(i) = decode(&[0xd6fe7c01, 0x0400060f]).unwrap().inst else {
        panic!()
    };
    assert_eq!((i.vdst, i.sdst), (Operand::Vgpr(1), Operand::Null));
    assert_eq!(
        i.src,
        [Operand::Sgpr(15), Operand::Sgpr(3), Operand::Vgpr(0)]
    );
    // v_dual_add_f32 v0, v1, v2 :: v_dual_fmaak_f32 v3, v4, v5, 0x40000000 (12 bytes)
    let d = decode(&[0xc9020501, 0x00020b04, 0x40000000]).unwrap();
    assert_eq!(d.words, 3);
    let Inst::Vopd(i) = d.inst else { panic!() };
    assert_eq!(i.vdsty, Operand::Vgpr(3));
    assert_eq!(i.y.unwrap().src[2], Operand::Literal(0x4000_0000));
}

#[test]
fn truncated_and_undecodable_words_are_errors() {
    assert_eq!(decode(&[]), Err(DecodeError::Truncated { needed: 1 }));
    // s_mov_b32 s0, <literal> without the literal dword
    assert_eq!(
        decode(&[0xbe8000ff]),
        Err(DecodeError::Truncated { needed: 2 })
    );
    // VOP3 needs two dwords
    assert_eq!(
        decode(&[0xd6fe7c01]),
        Err(DecodeError::Truncated { needed: 2 })
    );
    assert_eq!(
        decode(&[0xffffffff]),
        Err(DecodeError::Undecodable { word: 0xffffffff })
    );
}

#[test]
fn never_panics_on_arbitrary_words() {
    // A deterministic sweep over many word patterns (xorshift), with and without trailing dwords.
    let mut state = 0x1234_5678_9abc_def0u64;
    for _ in 0..200_000 {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        let words = [
            state as u32,
            (state >> 32) as u32,
            state.rotate_left(17) as u32,
        ];
        for len in 0..=3 {
            if let Ok(d) = decode(&words[..len]) {
                assert!(d.words <= len);
                let _ = d.inst.to_string();
            }
        }
    }
}
