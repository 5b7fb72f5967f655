//! A wave has the VGPRs COMPUTE_PGM_RSRC1 gives it, (VGPRS + 1) × 8 in wave32: an instruction
//! naming a register past them faults, naming the register, the instruction and its PC.
//! Programs are hand-assembled (words from `llvm-mc-19 -arch=amdgcn -mcpu=gfx1100
//! -show-encoding`).

mod common;

use common::{Buffer, HostMemory};
use rdna3::{run_dispatch, CodeCache, Dispatch, FaultKind};

const S_ENDPGM: u32 = 0xbfb00000;
/// s_mov_b32 m0, 10
const S_MOV_M0_10: u32 = 0xbefd008a;

/// Stores `42 + v0` to `s[0:1] + 4 × v0` through v128:
/// v_mov_b32_e32 v128, 42; v_lshlrev_b32_e32 v1, 2, v0; v_add_nc_u32_e32 v128, v128, v0;
/// global_store_b32 v1, v128, s[0:1]; s_endpgm
const STORE_THROUGH_V128: [u32; 6] = [
    0x7f0002aa, 0x30020082, 0x4b000180, 0xdc6a0000, 0x00008001, S_ENDPGM,
];

/// A dispatch of one workgroup of 64 work-items with `vgpr_blocks` in RSRC1.VGPRS and the
/// output address in s[0:1].
fn dispatch(code: &Buffer, out: &Buffer, vgpr_blocks: u32) -> Dispatch {
    let mut user_data = [0u32; 16];
    user_data[0] = out.addr() as u32;
    user_data[1] = (out.addr() >> 32) as u32;
    user_data[4] = out.addr() as u32;
    user_data[5] = (out.addr() >> 32) as u32;
    Dispatch {
        code_entry: code.addr(),
        rsrc1: vgpr_blocks,
        // USER_SGPR = 8 (bits 5:1), LDS_SIZE = 2 granules (bits 23:15).
        rsrc2: (8 << 1) | (2 << 15),
        user_data,
        grid: [1, 1, 1],
        block: [64, 1, 1],
        wave32: true,
        max_steps: 1000,
        ..Dispatch::default()
    }
}

#[test]
fn v128_in_a_small_allocation_faults_naming_register_instruction_and_pc() {
    let code = Buffer::from_u32s(&STORE_THROUGH_V128);
    let out = Buffer::zeroed(64 * 4);
    let mem = HostMemory::new(&[&code, &out]);
    // RSRC1.VGPRS = 0: 8 VGPRs (as a 4-VGPR kernel gets); 15: 128 VGPRs, v0..v127.
    for (blocks, allocated) in [(0, 8), (15, 128)] {
        let fault = run_dispatch(&mem, &CodeCache::new(), &dispatch(&code, &out, blocks))
            .expect_err("v128 is not allocated");
        assert_eq!(
            fault.kind,
            FaultKind::VgprOutOfRange {
                first: 128,
                count: 1,
                allocated
            }
        );
        assert_eq!(fault.pc, code.addr());
        assert_eq!(fault.instruction.as_deref(), Some("v_mov_b32_e32 v128, 42"));
        let text = fault.to_string();
        assert!(
            text.contains("v128 beyond the wave's")
                && text.contains(&format!("{allocated} allocated VGPRs"))
                && text.contains(&format!("{:#x}", code.addr()))
                && text.contains("v_mov_b32_e32 v128, 42"),
            "{text}"
        );
        assert!(
            out.u32s().iter().all(|&v| v == 0),
            "the faulting wave stored"
        );
    }
}

#[test]
fn the_same_program_with_enough_vgprs_runs() {
    let code = Buffer::from_u32s(&STORE_THROUGH_V128);
    let out = Buffer::zeroed(64 * 4);
    let mem = HostMemory::new(&[&code, &out]);
    // RSRC1.VGPRS = 16: 136 VGPRs, v0..v135.
    run_dispatch(&mem, &CodeCache::new(), &dispatch(&code, &out, 16)).unwrap();
    let expected: Vec<u32> = (0..64).map(|lane| 42 + lane).collect();
    assert_eq!(out.u32s(), expected);
}

#[test]
fn every_operand_form_past_the_allocation_faults() {
    // (assembly, words, first VGPR of the operand past v7, VGPRs it spans)
    let cases: &[(&str, &[u32], u32, u32)] = &[
        ("v_mov_b32_e32 v128, v0", &[0x7f000300], 128, 1),
        ("v_add_nc_u32_e32 v1, v128, v0", &[0x4a020180], 128, 1),
        (
            "v_fma_f32 v1, v2, v3, v128",
            &[0xd6130001, 0x06020702],
            128,
            1,
        ),
        (
            "v_pk_add_f16 v1, v128, v2",
            &[0xcc0f4001, 0x18020580],
            128,
            1,
        ),
        ("v_cmp_eq_u32_e32 vcc_lo, v1, v128", &[0x7c950101], 128, 1),
        (
            "v_dual_mov_b32 v1, v2 :: v_dual_mov_b32 v128, v3",
            &[0xca100102, 0x01800103],
            128,
            1,
        ),
        ("ds_load_b32 v128, v1", &[0xd8d80000, 0x80000001], 128, 1),
        (
            "global_load_b32 v128, v1, s[0:1]",
            &[0xdc520000, 0x80000001],
            128,
            1,
        ),
        (
            "global_load_b64 v[7:8], v1, s[0:1]",
            &[0xdc560000, 0x07000001],
            7,
            2,
        ),
        (
            "buffer_load_b32 v128, v1, s[4:7], 0 offen",
            &[0xe0500000, 0x80418001],
            128,
            1,
        ),
        (
            "v_wmma_f32_16x16x16_f16 v[0:7], v[8:15], v[16:23], v[0:7]",
            &[0xcc404000, 0x1c022108],
            8,
            8,
        ),
        // M0 = 10: v2 + 10 = v12.
        (
            "v_movrels_b32_e32 v1, v2",
            &[S_MOV_M0_10, 0x7e028702],
            12,
            1,
        ),
        (
            "v_movreld_b32_e32 v2, v1",
            &[S_MOV_M0_10, 0x7e048501],
            12,
            1,
        ),
    ];
    for &(text, words, first, count) in cases {
        let mut program = words.to_vec();
        program.push(S_ENDPGM);
        let code = Buffer::from_u32s(&program);
        let out = Buffer::zeroed(4096);
        let mem = HostMemory::new(&[&code, &out]);
        let fault =
            run_dispatch(&mem, &CodeCache::new(), &dispatch(&code, &out, 0)).expect_err(text);
        assert_eq!(
            fault.kind,
            FaultKind::VgprOutOfRange {
                first,
                count,
                allocated: 8
            },
            "{text}: {fault}"
        );
        assert_eq!(fault.instruction.as_deref(), Some(text), "{fault}");
        // The M0 set-up instruction comes first; the faulting one follows it.
        let pc = code.addr() + if words[0] == S_MOV_M0_10 { 4 } else { 0 };
        assert_eq!(fault.pc, pc, "{text}");
        assert!(out.u32s().iter().all(|&v| v == 0), "{text} stored");
    }
}
