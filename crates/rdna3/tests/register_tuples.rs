//! Scalar operands wider than one register: SGPR and TTMP tuples, and the special registers that
//! pair up. The words are raw `.long`s assembled with `llvm-mc-19 -arch=amdgcn -mcpu=gfx1100`;
//! the texts are `llvm-objdump-19 -d --mcpu=gfx1100`'s disassembly of them (whitespace
//! normalised), hard-coded so the tests need no LLVM.
//!
//! What LLVM does, and so the decoder: a misaligned tuple (the ISA requires pairs to be
//! even-aligned, wider tuples quad-aligned) is printed as the aligned tuple below it, with a
//! warning comment after the encoding; a tuple that does not exist (`vcc_hi`, `m0` or `exec_hi`
//! as the first register of a pair, `src_lds_direct` as a 64-bit source, an SGPR or TTMP tuple
//! running past its file), a reserved source value, or a DPP form of a 64-bit operation is not
//! an instruction (`.long`). The interpreter runs neither: the first kind is an illegal operand
//! naming the register as encoded, the second an undecodable word.

mod common;

use common::{Buffer, HostMemory};
use rdna3::decode::{decode, DecodeError};
use rdna3::exec::{ExecContext, Flow, Wave};
use rdna3::{run_dispatch, CodeCache, Dispatch, FaultKind};

/// (words, LLVM text): tuples LLVM decodes, misaligned ones among them.
const DECODED: &[(&[u32], &str)] = &[
    // Misaligned: LLVM clears the low bits (and warns).
    (&[0xbe810180], "s_mov_b64 s[0:1], 0"),
    (&[0xbe800103], "s_mov_b64 s[0:1], s[2:3]"),
    (&[0xbee90180], "s_mov_b64 s[104:105], 0"),
    (&[0xbeed0180], "s_mov_b64 ttmp[0:1], 0"),
    (&[0xbe804803], "s_setpc_b64 s[2:3]"),
    (&[0x84828605], "s_lshl_b64 s[2:3], s[4:5], 6"),
    (&[0x98806100], "s_cselect_b64 s[0:1], s[0:1], s[96:97]"),
    (&[0x9883807e], "s_cselect_b64 s[2:3], exec, 0"),
    (&[0xbf108069], "s_cmp_eq_u64 s[104:105], 0"),
    (&[0xba030004], "s_call_b64 s[2:3], 4"),
    (&[0xf4040040, 0xf8000000], "s_load_b64 s[0:1], s[0:1], null"),
    (
        &[0xf4080140, 0xf8000000],
        "s_load_b128 s[4:7], s[0:1], null",
    ),
    (
        &[0xf4081c80, 0xf8000000],
        "s_load_b128 ttmp[4:7], s[0:1], null",
    ),
    (
        &[0xf4200001, 0xf8000000],
        "s_buffer_load_b32 s0, s[0:3], null",
    ),
    (
        &[0xd7280000, 0x00000300],
        "v_mul_f64 v[0:1], v[0:1], s[0:1]",
    ),
    (&[0x7e001e01], "v_cvt_f32_f64_e32 v0, s[0:1]"),
    (&[0xdc520000, 0x00010000], "global_load_b32 v0, v0, s[0:1]"),
    // Aligned, and the special registers that are pairs.
    (&[0xbeea0180], "s_mov_b64 vcc, 0"),
    (&[0xbefe0180], "s_mov_b64 exec, 0"),
    (&[0xbefc0180], "s_mov_b64 null, 0"),
    (&[0xbe8001eb], "s_mov_b64 s[0:1], src_shared_base"),
    (&[0xbe8001ff, 0xffffffff], "s_mov_b64 s[0:1], 0xffffffff"),
    (
        &[0xf4101600, 0xf8000000],
        "s_load_b512 s[88:103], s[0:1], null",
    ),
    (&[0xf4081f00, 0xf8000000], "s_load_b128 null, s[0:1], null"),
    (&[0xd7280000, 0x0000d400], "v_mul_f64 v[0:1], s[0:1], vcc"),
    (
        &[0xd6fe7c00, 0x04060303],
        "v_mad_u64_u32 v[0:1], null, v3, v1, v[1:2]",
    ),
    (&[0xdc520000, 0x007e0000], "global_load_b32 v0, v0, exec"),
    (
        &[0xe0500000, 0x801b0000],
        "buffer_load_b32 v0, off, ttmp[0:3], 0",
    ),
    // 1/(2π) as a 64-bit operand has a double's digits.
    (&[0xbe8001f8], "s_mov_b64 s[0:1], 0.15915494309189532"),
    (
        &[0xd7280000, 0x0001f100],
        "v_mul_f64 v[0:1], v[0:1], 0.15915494309189532",
    ),
    // S_ATC_PROBE's SDATA field is the probe's mode, not a register.
    (&[0xf4880040, 0xf8000000], "s_atc_probe 1, s[0:1], null"),
];

/// (words, what is wrong): encodings llvm-objdump prints as `.long` (the first word), whatever
/// follows them.
const REFUSED: &[(&[u32], &str)] = &[
    (&[0xbeff0180], "s_mov_b64 into exec_hi"),
    (&[0xbefd0180], "s_mov_b64 into m0"),
    (&[0xbeeb0180], "s_mov_b64 into vcc_hi"),
    (&[0xbe80017f], "s_mov_b64 from exec_hi"),
    (&[0xbe8001fe], "s_mov_b64 from src_lds_direct"),
    (&[0xbe8001f9], "s_mov_b64 from reserved source 249"),
    (&[0xbe8000e9], "s_mov_b32 from reserved source 233"),
    (&[0xbf10806b], "s_cmp_eq_u64 of vcc_hi"),
    (&[0xbeff4700], "s_getpc_b64 into exec_hi"),
    (&[0xf4041ac0, 0xf8000000], "s_load_b64 into vcc_hi"),
    (&[0xf4081a00, 0xf8000000], "s_load_b128 into s[104:107]"),
    (&[0xf4101700, 0xf8000000], "s_load_b512 into s[92:107]"),
    (&[0xf40c1e00, 0xf8000000], "s_load_b256 into ttmp[12:19]"),
    (
        &[0xf4200034, 0xf8000000],
        "s_buffer_load_b32 from s[104:107]",
    ),
    (&[0xd7280000, 0x0000d700], "v_mul_f64 of vcc_hi"),
    (
        &[0xd7280000, 0x0001d300],
        "v_mul_f64 of reserved source 233",
    ),
    (&[0x7e001e7f], "v_cvt_f32_f64 of exec_hi"),
    (
        &[0xd73c0000, 0x000204fa, 0xff00e401],
        "v_lshlrev_b64 with DPP16",
    ),
    (&[0x7e0020fa, 0xff00e401], "v_cvt_f64_f32 with DPP16"),
    (
        &[0xdc520000, 0x007f0000],
        "global_load_b32 based at exec_hi",
    ),
    (&[0xdc520000, 0x007d0000], "global_load_b32 based at m0"),
    (&[0xe0500000, 0x801a0000], "buffer_load_b32 with s[104:107]"),
];

#[test]
fn tuples_decode_as_llvm_prints_them() {
    let mut mismatches = Vec::new();
    for (words, text) in DECODED {
        let decoded = decode(words).unwrap_or_else(|e| panic!("{text}: {e:?}"));
        assert_eq!(decoded.words, words.len(), "{text}: length");
        let printed = decoded.inst.to_string();
        if printed != *text {
            mismatches.push(format!("expected `{text}`\n     got `{printed}`"));
        }
    }
    assert!(mismatches.is_empty(), "{}", mismatches.join("\n"));
}

#[test]
fn encodings_llvm_refuses_do_not_decode() {
    for (words, what) in REFUSED {
        assert_eq!(
            decode(words),
            Err(DecodeError::Undecodable { word: words[0] }),
            "{what}"
        );
    }
}

const S_ENDPGM: u32 = 0xbfb00000;
const S_NOP_0: u32 = 0xbf800000;

fn run(words: &[u32]) -> (rdna3::Fault, u64) {
    let code = Buffer::from_u32s(words);
    let mem = HostMemory::new(&[&code]);
    let dispatch = Dispatch {
        code_entry: code.addr(),
        grid: [1, 1, 1],
        block: [32, 1, 1],
        wave32: true,
        max_steps: 1000,
        ..Dispatch::default()
    };
    let fault = run_dispatch(&mem, &CodeCache::new(), &dispatch).unwrap_err();
    (fault, code.addr())
}

#[test]
fn a_misaligned_tuple_is_an_illegal_operand_naming_the_encoded_register() {
    for (words, register) in [
        (&[0xbe810180][..], "s1"),
        (&[0xbe800103], "s3"),
        (&[0xbeed0180], "ttmp1"),
        (&[0xf4080140, 0xf8000000], "s5"),
        (&[0xd7280000, 0x00000300], "s1"),
        (&[0xdc520000, 0x00010000], "s1"),
    ] {
        let program: Vec<u32> = [S_NOP_0]
            .iter()
            .chain(words)
            .chain(&[S_ENDPGM])
            .copied()
            .collect();
        let (fault, base) = run(&program);
        let FaultKind::IllegalOperand { detail } = &fault.kind else {
            panic!("{words:x?}: {fault}");
        };
        assert!(
            detail.starts_with(&format!("{register} cannot start")) && detail.contains("aligned"),
            "{words:x?}: {detail}"
        );
        assert_eq!(fault.pc, base + 4, "{words:x?}");
    }
}

#[test]
fn a_refused_encoding_is_an_undecodable_word_at_its_pc() {
    for (words, what) in REFUSED {
        let program: Vec<u32> = [S_NOP_0]
            .iter()
            .chain(*words)
            .chain(&[S_ENDPGM])
            .copied()
            .collect();
        let (fault, base) = run(&program);
        assert_eq!(
            fault.kind,
            FaultKind::Undecodable { word: words[0] },
            "{what}"
        );
        assert_eq!(fault.pc, base + 4, "{what}");
    }
}

/// Runs one instruction on `wave`.
fn execute(words: &[u32], wave: &mut Wave) -> Result<Flow, FaultKind> {
    let decoded = decode(words).unwrap();
    let mem = HostMemory::new(&[]);
    let mut lds = [0u8; 64];
    let mut ctx = ExecContext {
        mem: &mem,
        lds: &mut lds,
    };
    wave.execute(&mut ctx, &decoded.inst, decoded.words as u64 * 4)
}

#[test]
fn a_one_register_operand_of_a_64_bit_operation_need_not_be_aligned() {
    let mut wave = Wave::new(0x1000);
    (wave.sgpr[10], wave.sgpr[11], wave.sgpr[1]) = (0x30, 0x100, 4);
    // s_lshr_b64 s[16:17], s[10:11], s1
    execute(&[0x8590010a], &mut wave).unwrap();
    assert_eq!((wave.sgpr[16], wave.sgpr[17]), (3, 0x10));
    // s_bfe_u64 s[2:3], s[4:5], s7: bits 8..16 of s[4:5]
    (wave.sgpr[4], wave.sgpr[5], wave.sgpr[7]) = (0xab00, 0, 8 | (8 << 16));
    execute(&[0x94020704], &mut wave).unwrap();
    assert_eq!((wave.sgpr[2], wave.sgpr[3]), (0xab, 0));
    // s_bitcmp1_b64 s[2:3], s5: bit s5 of s[2:3]
    wave.sgpr[5] = 1;
    execute(&[0xbf0f0502], &mut wave).unwrap();
    assert!(wave.scc);
}
