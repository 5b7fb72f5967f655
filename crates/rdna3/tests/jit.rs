//! Compiled blocks (`jit/`) against the interpreter: every vector and scalar operation the
//! block compiler inlines, in each operand form it inlines (VGPRs, SGPRs, inline constants, literals, input
//! modifiers, VOPD pairs), run on random wave states rich in special values (NaN, ±0,
//! infinities, denormals, carries) under random EXEC masks, must leave the registers exactly as
//! interpreting the same instructions does. Encodings from llvm-mc-19 (hard-coded).

#![cfg(all(target_arch = "x86_64", unix))]

mod common;

use common::{Buffer, HostMemory};
use rdna3::decode::decode;
use rdna3::exec::{ExecContext, Flow, Wave};
use rdna3::jit::{interpreted_in_compiled_block, run_compiled_block, BlockExit};
use rdna3::memory::read_bytes;
use rdna3::operand::{EXEC_LO, VCC_LO};
use rdna3::{CodeCache, JitMode};
use std::sync::atomic::{AtomicUsize, Ordering};

const S_ENDPGM: u32 = 0xbfb0_0000;

/// One instruction (its dwords) per case, with its assembly.
const CASES: &[(&str, &[u32])] = &[
    ("v_add_f32_e32 v3, v1, v2", &[0x06060501]),
    ("v_sub_f32_e32 v3, s4, v2", &[0x08060404]),
    (
        "v_mul_f32_e32 v3, 0x3fc00000, v2",
        &[0x100604ff, 0x3fc00000],
    ),
    ("v_fmac_f32_e32 v3, v1, v2", &[0x56060501]),
    ("v_fma_f32 v3, -v1, |v2|, v4", &[0xd6130203, 0x24120501]),
    ("v_fma_f32 v3, v1, s5, -|v4|", &[0xd6130403, 0x84100b01]),
    (
        "v_fmaak_f32 v3, v1, v2, 0x40490fdb",
        &[0x5a060501, 0x40490fdb],
    ),
    ("v_max_f32_e32 v3, v1, v2", &[0x20060501]),
    ("v_min_f32_e64 v3, -v1, v2", &[0xd50f0003, 0x20020501]),
    ("v_max_f32_e64 v3, |v1|, 0", &[0xd5100103, 0x00010101]),
    ("v_add_nc_u32_e32 v3, v1, v2", &[0x4a060501]),
    ("v_sub_nc_u32_e64 v3, s4, v2", &[0xd5260003, 0x00020404]),
    ("v_add3_u32 v3, v1, v2, 17", &[0xd6550003, 0x02460501]),
    ("v_mul_lo_u32 v3, v1, v2", &[0xd72c0003, 0x00020501]),
    (
        "v_mad_u32_u24 v3, 0xa0, v0, s4",
        &[0xd60b0003, 0x001200ff, 0x000000a0],
    ),
    ("v_mad_u32_u24 v3, v1, v2, v4", &[0xd60b0003, 0x04120501]),
    ("v_mad_i32_i24 v3, v1, s5, v4", &[0xd60a0003, 0x04100b01]),
    ("v_mul_u32_u24_e32 v3, v1, v2", &[0x16060501]),
    ("v_mul_i32_i24_e32 v3, s6, v2", &[0x12060406]),
    ("v_mul_i32_i24_e64 v3, v1, v2", &[0xd5090003, 0x00020501]),
    ("v_and_b32_e32 v3, v1, v2", &[0x36060501]),
    ("v_or_b32_e32 v3, 0x7f, v2", &[0x380604ff, 0x0000007f]),
    ("v_xor_b32_e64 v3, v1, -1", &[0xd51d0003, 0x00018301]),
    ("v_lshlrev_b32_e32 v3, 2, v1", &[0x30060282]),
    ("v_lshrrev_b32_e64 v3, s4, v1", &[0xd5190003, 0x00020204]),
    ("v_ashrrev_i32_e32 v3, 31, v1", &[0x3406029f]),
    ("v_lshl_add_u32 v3, v1, 3, v2", &[0xd6460003, 0x04090701]),
    ("v_lshl_or_b32 v3, v1, s4, v2", &[0xd6560003, 0x04080901]),
    ("v_min_i32_e32 v3, v1, v2", &[0x22060501]),
    ("v_max_u32_e32 v3, v1, v2", &[0x28060501]),
    ("v_bfe_u32 v3, v1, 5, 9", &[0xd6100003, 0x02250b01]),
    ("v_bfe_u32 v3, v1, s4, s5", &[0xd6100003, 0x00140901]),
    ("v_cndmask_b32_e32 v3, v1, v2, vcc_lo", &[0x02060501]),
    (
        "v_cndmask_b32_e64 v3, v1, -v2, s6",
        &[0xd5010003, 0x401a0501],
    ),
    ("v_lshlrev_b64 v[4:5], 2, v[2:3]", &[0xd73c0004, 0x00020482]),
    (
        "v_lshlrev_b64 v[2:3], s4, v[2:3]",
        &[0xd73c0002, 0x00020404],
    ),
    (
        "v_lshlrev_b64 v[6:7], 35, v[4:5]",
        &[0xd73c0006, 0x000208a3],
    ),
    ("v_lshlrev_b64 v[6:7], 0, v[8:9]", &[0xd73c0006, 0x00021080]),
    ("v_sqrt_f32_e32 v3, v1", &[0x7e066701]),
    ("v_sqrt_f32_e64 v3, -|v1|", &[0xd5b30103, 0x20000101]),
    ("v_sqrt_f32_e32 v3, s4", &[0x7e066604]),
    (
        "v_cmp_class_f32_e64 s6, v1, 0x260",
        &[0xd47e0006, 0x0001ff01, 0x00000260],
    ),
    ("v_cmp_class_f32_e32 vcc_lo, v1, v2", &[0x7cfc0501]),
    ("v_cmp_class_f32_e64 s6, -v1, s4", &[0xd47e0006, 0x20000901]),
    ("v_cmpx_class_f32_e32 v1, v2", &[0x7dfc0501]),
    ("v_exp_f32_e32 v3, v1", &[0x7e064b01]),
    ("v_log_f32_e64 v3, -|v1|", &[0xd5a70103, 0x20000101]),
    ("v_rcp_f32_e32 v3, s4", &[0x7e065404]),
    ("v_rsq_f32_e32 v3, v1", &[0x7e065d01]),
    ("v_rcp_iflag_f32_e32 v3, v1", &[0x7e065701]),
    ("v_exp_f32_e32 v1, v1", &[0x7e024b01]),
    ("v_mov_b32_e32 v3, v1", &[0x7e060301]),
    ("v_mov_b32_e32 v3, s4", &[0x7e060204]),
    ("v_cmp_gt_i32_e32 vcc_lo, v1, v2", &[0x7c880501]),
    ("v_cmp_le_u32_e64 s6, v1, s4", &[0xd44b0006, 0x00000901]),
    ("v_cmp_lt_f32_e32 vcc_lo, v1, v2", &[0x7c220501]),
    ("v_cmp_nge_f32_e64 s6, -v1, v2", &[0xd4190006, 0x20020501]),
    ("v_cmp_neq_f32_e64 s6, v1, |v2|", &[0xd41d0206, 0x00020501]),
    ("v_cmp_lg_f32_e32 vcc_lo, v1, v2", &[0x7c2a0501]),
    ("v_cmp_ge_f32_e32 vcc_lo, v1, v2", &[0x7c2c0501]),
    ("v_cmp_gt_f32_e64 s6, v1, s4", &[0xd4140006, 0x00000901]),
    ("v_cmp_le_f32_e32 vcc_lo, v1, v2", &[0x7c260501]),
    ("v_cmp_nlt_f32_e32 vcc_lo, v1, v2", &[0x7c3c0501]),
    ("v_cmp_ngt_f32_e32 vcc_lo, v1, v2", &[0x7c360501]),
    ("v_cmp_nle_f32_e32 vcc_lo, v1, v2", &[0x7c380501]),
    ("v_cmp_eq_f32_e32 vcc_lo, v1, v2", &[0x7c240501]),
    ("v_cmp_ne_i32_e32 vcc_lo, v1, v2", &[0x7c8a0501]),
    ("v_cmp_ge_u32_e32 vcc_lo, v1, v2", &[0x7c9c0501]),
    ("v_cmp_lt_i32_e64 s6, v1, 5", &[0xd4410006, 0x00010b01]),
    ("v_cmpx_gt_u32_e32 v1, v2", &[0x7d980501]),
    ("v_cmpx_eq_f32_e64 v1, v2", &[0xd492007e, 0x00020501]),
    ("v_add_co_u32 v3, vcc_lo, v1, v2", &[0xd7006a03, 0x00020501]),
    (
        "v_add_co_ci_u32_e32 v3, vcc_lo, v1, v2, vcc_lo",
        &[0x40060501],
    ),
    ("v_sub_co_u32 v3, s6, v1, v2", &[0xd7010603, 0x00020501]),
    (
        "v_sub_co_ci_u32_e64 v3, s7, v1, v2, s6",
        &[0xd5210703, 0x001a0501],
    ),
    (
        "v_subrev_co_ci_u32_e32 v3, vcc_lo, v1, v2, vcc_lo",
        &[0x44060501],
    ),
    ("v_subrev_co_u32 v3, s6, s4, v2", &[0xd7020603, 0x00020404]),
    // Lane sets read back as values and as selects (a compiled run that wrote them must not
    // hand a later instruction the value they had before it).
    ("v_add_nc_u32_e64 v3, s6, v1", &[0xd5250003, 0x00020206]),
    (
        "v_cndmask_b32_e64 v3, v1, v2, s6",
        &[0xd5010003, 0x001a0501],
    ),
    ("v_xor_b32_e64 v3, vcc_lo, v2", &[0xd51d0003, 0x0002046a]),
    ("v_lshlrev_b32_e64 v3, s6, v1", &[0xd5180003, 0x00020206]),
    ("v_cmp_gt_u32_e64 s6, vcc_lo, v1", &[0xd44c0006, 0x0002026a]),
    (
        "v_dual_fmac_f32 v3, v1, v2 :: v_dual_mul_f32 v4, v2, v1",
        &[0xc8060501, 0x03040302],
    ),
    (
        "v_dual_mov_b32 v1, v2 :: v_dual_mov_b32 v2, v1",
        &[0xca100102, 0x01020101],
    ),
    (
        "v_dual_max_f32 v3, v1, v2 :: v_dual_add_f32 v4, v6, v3",
        &[0xca880501, 0x03040706],
    ),
    (
        "v_dual_cndmask_b32 v3, v1, v2 :: v_dual_sub_f32 v4, v6, v7",
        &[0xca4a0501, 0x03040f06],
    ),
    ("s_mov_b32 s3, s4", &[0xbe830004]),
    ("s_mov_b32 s3, 0x12345678", &[0xbe8300ff, 0x12345678]),
    ("s_add_u32 s3, s4, s5", &[0x80030504]),
    ("s_lshl_b64 s[2:3], s[2:3], 2", &[0x84828202]),
    ("s_lshr_b64 s[4:5], s[6:7], s8", &[0x85840806]),
    ("s_ashr_i64 s[4:5], s[2:3], 33", &[0x8684a102]),
    ("s_lshl_b64 s[0:1], s[4:5], 0x41", &[0x8480ff04, 0x00000041]),
    ("s_sub_u32 s3, s4, -7", &[0x8083c704]),
    ("s_add_i32 s3, s4, s5", &[0x81030504]),
    ("s_sub_i32 s3, s4, s5", &[0x81830504]),
    ("s_addc_u32 s3, s4, s5", &[0x82030504]),
    ("s_min_i32 s3, s4, s5", &[0x89030504]),
    ("s_min_u32 s3, s4, s5", &[0x89830504]),
    ("s_max_i32 s3, s4, 3", &[0x8a038304]),
    ("s_max_u32 s3, s4, s5", &[0x8a830504]),
    ("s_cselect_b32 s3, s4, s5", &[0x98030504]),
    ("s_and_b32 s3, s4, s5", &[0x8b030504]),
    ("s_or_b32 s3, s4, exec_lo", &[0x8c037e04]),
    ("s_xor_b32 s3, s4, s5", &[0x8d030504]),
    ("s_lshl_b32 s3, s4, s5", &[0x84030504]),
    ("s_lshr_b32 s3, s4, 4", &[0x85038404]),
    ("s_ashr_i32 s3, s4, s5", &[0x86030504]),
    ("s_mul_i32 s3, s4, s5", &[0x96030504]),
    ("s_lshl2_add_u32 s3, s4, s5", &[0x87830504]),
    ("s_lshl4_add_u32 s3, s4, s5", &[0x88830504]),
    ("s_cmp_eq_u32 s4, s5", &[0xbf060504]),
    ("s_cmp_lg_i32 s4, 0", &[0xbf018004]),
    ("s_cmp_gt_i32 s4, s5", &[0xbf020504]),
    ("s_cmp_ge_u32 s4, s5", &[0xbf090504]),
    ("s_cmp_lt_i32 s4, s5", &[0xbf040504]),
    ("s_cmp_le_u32 s4, s5", &[0xbf0b0504]),
    ("s_and_b32 exec_lo, exec_lo, s4", &[0x8b7e047e]),
    ("s_add_u32 null, s4, s5", &[0x807c0504]),
    ("s_sub_i32 s3, 0x80000000, s5", &[0x818305ff, 0x80000000]),
];

/// Values that tell implementations apart: signed zeros, infinities, NaNs (quiet,
/// signalling, negative), denormals, extremes of both integer readings, and ties.
const SPECIAL: &[u32] = &[
    0x0000_0000,
    0x8000_0000,
    0x7f80_0000,
    0xff80_0000,
    0x7fc0_0000,
    0x7fa0_0001,
    0xffc0_1234,
    0x0000_0001,
    0x807f_ffff,
    0x3f80_0000,
    0xbf80_0000,
    0x7f7f_ffff,
    0xffff_ffff,
    0x0000_001f,
    0x0000_0020,
    0x4000_0000,
];

struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u32 {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (self.0 >> 32) as u32
    }

    /// Mostly special values and small numbers, sometimes anything.
    fn value(&mut self) -> u32 {
        match self.next() % 4 {
            0 => SPECIAL[self.next() as usize % SPECIAL.len()],
            1 => (self.next() % 64) as f32 as u32 ^ (self.next() & 0x8000_0000),
            2 => ((self.next() % 2000) as f32 / 8.0 - 125.0).to_bits(),
            _ => self.next(),
        }
    }
}

/// A wave at `pc` whose registers come from `seed` (the same seed gives the same wave).
fn wave(pc: u64, seed: u64) -> Wave {
    let mut rng = Rng(seed);
    let mut wave = Wave::new(pc);
    for row in wave.vgpr.iter_mut().take(12) {
        for lane in row.iter_mut() {
            *lane = rng.value();
        }
    }
    for slot in 0..12 {
        wave.sgpr[slot] = rng.value();
    }
    wave.sgpr[usize::from(VCC_LO)] = rng.next();
    // Whole groups of four lanes off are common (small workgroups, a branch taken by a few
    // lanes): compiled code skips those groups.
    wave.sgpr[usize::from(EXEC_LO)] = match seed % 8 {
        0 => u32::MAX,
        1 => 0,
        2 => 1 << (rng.next() % 32),
        3 => u32::MAX >> (rng.next() % 32),
        4 => rng.next() & rng.next() & rng.next(),
        5 => 0xf << (4 * (rng.next() % 8)),
        _ => rng.next(),
    };
    wave.scc = rng.next() & 1 != 0;
    wave
}

/// Interprets from `wave.pc` until an instruction does not continue in sequence or `count`
/// instructions ran; answers how many ran and where the wave goes.
fn interpret(mem: &dyn rdna3::Memory, wave: &mut Wave, count: usize) -> (u64, BlockExit) {
    interpret_with_lds(mem, &mut [0u8; 64], wave, count)
}

/// [`interpret`] with the workgroup's LDS.
fn interpret_with_lds(
    mem: &dyn rdna3::Memory,
    lds: &mut [u8],
    wave: &mut Wave,
    count: usize,
) -> (u64, BlockExit) {
    let mut ctx = ExecContext { mem, lds };
    for executed in 1..=count as u64 {
        let decoded = decode(&words_at(mem, wave.pc)).expect("decodes");
        let size = decoded.words as u64 * 4;
        match wave.execute(&mut ctx, &decoded.inst, size) {
            Ok(Flow::Next) => wave.pc += size,
            Ok(Flow::Jump(target)) => return (executed, BlockExit::Continue(target)),
            Ok(Flow::End) => return (executed, BlockExit::End),
            Ok(Flow::Barrier) => return (executed, BlockExit::Barrier(wave.pc + size)),
            Err(kind) => return (executed, BlockExit::Fault(kind, wave.pc, None)),
        }
    }
    (count as u64, BlockExit::Continue(wave.pc))
}

/// The dwords at `pc` (up to the longest instruction, as far as the code buffer goes).
fn words_at(mem: &dyn rdna3::Memory, pc: u64) -> Vec<u32> {
    for count in (1..=3usize).rev() {
        let mut bytes = vec![0u8; count * 4];
        if read_bytes(mem, pc, &mut bytes).is_ok() {
            return bytes
                .chunks(4)
                .map(|w| u32::from_le_bytes([w[0], w[1], w[2], w[3]]))
                .collect();
        }
    }
    panic!("no code at {pc:#x}");
}

fn compiled(
    what: &str,
    mem: &dyn rdna3::Memory,
    cache: &CodeCache,
    wave: &mut Wave,
) -> (u64, BlockExit) {
    compiled_with_lds(what, mem, &mut [0u8; 64], cache, wave)
}

/// [`compiled`] with the workgroup's LDS.
fn compiled_with_lds(
    what: &str,
    mem: &dyn rdna3::Memory,
    lds: &mut [u8],
    cache: &CodeCache,
    wave: &mut Wave,
) -> (u64, BlockExit) {
    let mut ctx = ExecContext { mem, lds };
    run_compiled_block(cache, wave, &mut ctx).unwrap_or_else(|| panic!("{what}: does not compile"))
}

/// Registers equal; `what` names the case for the failure message. Where the case computes
/// floats, two NaNs are equal whatever their payloads: which input NaN a host FMA or add
/// passes on depends on the operand order its compiler picked (LLVM for the interpreter,
/// Cranelift here), and the emulator promises a NaN there, not a payload.
fn assert_same(what: &str, interpreted: &Wave, compiled: &Wave) {
    let float = what.contains("f32");
    let nan = |x: u32| f32::from_bits(x).is_nan();
    for (row, (a, b)) in interpreted.vgpr.iter().zip(&compiled.vgpr).enumerate() {
        for lane in 0..32 {
            if float && nan(a[lane]) && nan(b[lane]) {
                continue;
            }
            assert_eq!(
                a[lane], b[lane],
                "{what}: v{row} lane {lane}: interpreted {:#010x}, compiled {:#010x}",
                a[lane], b[lane]
            );
        }
    }
    for slot in 0..interpreted.sgpr.len() {
        assert_eq!(
            interpreted.sgpr[slot], compiled.sgpr[slot],
            "{what}: scalar slot {slot}"
        );
    }
    assert_eq!(interpreted.scc, compiled.scc, "{what}: SCC");
}

fn code_buffer(words: &[u32]) -> Buffer {
    Buffer::from_u32s(words)
}

#[test]
fn every_inlined_form_matches_the_interpreter() {
    for (asm, inst) in CASES {
        let mut words = inst.to_vec();
        words.push(S_ENDPGM);
        let code = code_buffer(&words);
        let mem = HostMemory::new(&[&code]);
        // A cache per code buffer: a later buffer may reuse an earlier one's address.
        let cache = CodeCache::with_jit(JitMode::Eager);
        for seed in 0..64u64 {
            let what = format!("{asm} (seed {seed})");
            let mut expected = wave(code.addr(), seed);
            let mut actual = wave(code.addr(), seed);
            let interpreted = interpret(&mem, &mut expected, 2);
            let ran = compiled(&what, &mem, &cache, &mut actual);
            assert_eq!(interpreted, ran, "{what}: exit");
            assert_same(&what, &expected, &actual);
        }
        assert_eq!(cache.compiled_blocks(), 1, "{asm}");
        assert_eq!(
            interpreted_in_compiled_block(&cache, &mem, code.addr()),
            Some(0),
            "{asm}: not inlined"
        );
    }
}

#[test]
fn timing_instructions_vanish_and_final_branches_exit() {
    let body = [
        0x06060501, // v_add_f32_e32 v3, v1, v2
        0xbf8903f7, // s_waitcnt vmcnt(0)
        0xbf870001, // s_delay_alu instid0(VALU_DEP_1)
        0x80040504, // s_add_u32 s4, s4, s5
        0x08060404, // v_sub_f32_e32 v3, s4, v2 (reads the scalar result)
        0xbe8a0004, // s_mov_b32 s10, s4
        0xbf060504, // s_cmp_eq_u32 s4, s5 (SCC for the branch)
        0xbe840085, // s_mov_b32 s4, 5 (not touching SCC)
    ];
    let branches = [
        ("s_cbranch_scc1 3", 0xbfa20003),
        ("s_cbranch_vccz 2", 0xbfa30002),
        ("s_cbranch_execnz 1", 0xbfa60001),
        ("s_endpgm", S_ENDPGM),
    ];
    for (asm, branch) in branches {
        let mut words = body.to_vec();
        words.push(branch);
        check_block(&format!("block ending in {asm}"), &words, 32);
    }
}

/// Runs the block `words` compiled and interpreted on the waves of `seeds` seeds and holds the
/// one to the other; answers how many of its instructions the compiled block hands to the
/// interpreter.
fn check_block(name: &str, words: &[u32], seeds: u64) -> Option<usize> {
    let code = code_buffer(words);
    let mem = HostMemory::new(&[&code]);
    let cache = CodeCache::with_jit(JitMode::Eager);
    for seed in 0..seeds {
        let what = format!("{name} (seed {seed})");
        let mut expected = wave(code.addr(), seed);
        let mut actual = wave(code.addr(), seed);
        let interpreted = interpret(&mem, &mut expected, words.len());
        let ran = compiled(&what, &mem, &cache, &mut actual);
        assert_eq!(interpreted, ran, "{what}: exit");
        assert_same(&what, &expected, &actual);
    }
    interpreted_in_compiled_block(&cache, &mem, code.addr())
}

#[test]
fn a_fault_inside_a_block_is_the_interpreters_fault() {
    let cache = CodeCache::with_jit(JitMode::Eager);
    // v_add_f32 v3, v1, v2; s_trap 5; s_endpgm: the trap ends the block as a fault.
    let code = code_buffer(&[0x06060501, 0xbf900005, S_ENDPGM]);
    let mem = HostMemory::new(&[&code]);
    let mut expected = wave(code.addr(), 7);
    let mut actual = wave(code.addr(), 7);
    let (executed, exit) = interpret(&mem, &mut expected, 3);
    let (ran, compiled_exit) = compiled("s_trap", &mem, &cache, &mut actual);
    assert_eq!(executed, ran);
    let (BlockExit::Fault(kind, pc, _), BlockExit::Fault(compiled_kind, compiled_pc, text)) =
        (exit, compiled_exit)
    else {
        panic!("both fault");
    };
    assert_eq!((kind, pc), (compiled_kind, compiled_pc));
    assert_eq!(text.as_deref(), Some("s_trap 5"));
    assert_same("s_trap", &expected, &actual);
}

/// Global loads and stores, each with addresses of several kinds: lanes spread over a buffer
/// (overlapping, so a store's lane order shows), lanes one after another at several strides
/// (whole groups of four lanes move as vectors), pairs of lanes one after another, and one
/// active lane pointing past the buffer (the compiled code must leave that to the
/// interpreter's fault).
const MEMORY_CASES: &[(&str, &[u32])] = &[
    (
        "global_load_b32 v3, v[4:5], off offset:8",
        &[0xdc520008, 0x037c0004],
    ),
    (
        "global_load_b128 v[6:9], v[4:5], off offset:-16",
        &[0xdc5e1ff0, 0x067c0004],
    ),
    (
        "global_load_b64 v[4:5], v[4:5], off",
        &[0xdc560000, 0x047c0004],
    ),
    (
        "global_load_b96 v[6:8], v2, s[8:9] offset:4",
        &[0xdc5a0004, 0x06080002],
    ),
    (
        "global_store_b32 v[4:5], v3, off",
        &[0xdc6a0000, 0x007c0304],
    ),
    (
        "global_store_b128 v[4:5], v[6:9], off offset:32",
        &[0xdc760020, 0x007c0604],
    ),
    (
        "global_store_b64 v2, v[6:7], s[8:9]",
        &[0xdc6e0000, 0x00080602],
    ),
    (
        "global_store_b96 v2, v[6:8], s[8:9] offset:-12",
        &[0xdc721ff4, 0x00080602],
    ),
];

#[test]
fn global_memory_matches_the_interpreter() {
    const SIZE: usize = 4096;
    for (asm, inst) in MEMORY_CASES {
        let mut words = inst.to_vec();
        words.push(S_ENDPGM);
        let initial = |seed: u64| {
            let mut rng = Rng(seed ^ 0x5eed);
            (0..SIZE).map(|_| rng.next() as u8).collect()
        };
        let prepare = |seed: u64, data: &Buffer, wave: &mut Wave| {
            let mut rng = Rng(seed);
            for lane in 0..32 {
                // Room for 16 bytes either side of the offsets the cases use. Each kind
                // meets every EXEC pattern of `wave` (seed % 8).
                let lane = lane as u64;
                let offset = match seed / 8 % 7 {
                    0 => 64 + (rng.next() as u64 % 240) * 16,
                    // One after another for 16, 4 and 8 bytes a lane (overlapping for
                    // wider accesses, so a store's lane order shows).
                    1 => 64 + lane * 16,
                    3 => 64 + lane * 4,
                    4 => 64 + lane * 8,
                    // Pairs of lanes one after another, the pairs apart.
                    5 => 64 + lane / 2 * 64 + lane % 2 * 16,
                    // Four lanes at a time at one place.
                    6 => 64 + lane / 4 * 16,
                    _ if lane == 7 => SIZE as u64 + 4096,
                    _ => 64 + (rng.next() as u64 % 240) * 16,
                };
                let address = data.addr() + offset;
                wave.vgpr[4][lane as usize] = address as u32;
                wave.vgpr[5][lane as usize] = (address >> 32) as u32;
                wave.vgpr[2][lane as usize] = offset as u32;
            }
            wave.sgpr[8] = data.addr() as u32;
            wave.sgpr[9] = (data.addr() >> 32) as u32;
        };
        check_memory_block(asm, &words, SIZE, 112, 2, initial, prepare);
    }
}

/// Checks the block `words` compiled against the interpreter (at most `count` instructions)
/// for `seeds` waves, each with a data buffer of `size` bytes holding `initial(seed)`, the
/// wave set up by `prepare(seed, data, wave)` ([`assert_both_ways_agree`]).
fn check_memory_block(
    name: &str,
    words: &[u32],
    size: usize,
    seeds: u64,
    count: usize,
    initial: impl Fn(u64) -> Vec<u8>,
    prepare: impl Fn(u64, &Buffer, &mut Wave),
) {
    let code = code_buffer(words);
    let data = Buffer::zeroed(size);
    let mem = Counting::new(HostMemory::new(&[&code, &data]));
    let cache = CodeCache::with_jit(JitMode::Eager);
    let fixture = (&mem, &cache, &code, &data);
    for seed in 0..seeds {
        let what = format!("{name} (seed {seed})");
        let set_up = |wave: &mut Wave| prepare(seed, &data, wave);
        assert_both_ways_agree(&what, fixture, &initial(seed), seed, count, set_up);
    }
    assert_eq!(cache.compiled_blocks(), 1, "{name}");
}

/// Runs the code in `code` interpreted (at most `count` instructions) and compiled (by
/// `cache`, on `mem`), each from the wave of `seed` set up by `prepare` with `data` holding
/// `initial`, and holds
/// the compiled run to the interpreted: the same memory after, the same fault where one
/// faults, else the same exit and registers; in bounds (`seed > 0`), with every access made
/// by the compiled code itself (handing one to the interpreter, which translates, would hide
/// a wrong address or span).
fn assert_both_ways_agree<M: CountsTranslations>(
    what: &str,
    (mem, cache, code, data): (&M, &CodeCache, &Buffer, &Buffer),
    initial: &[u8],
    seed: u64,
    count: usize,
    prepare: impl Fn(&mut Wave),
) {
    data.write(0, initial);
    let mut expected = wave(code.addr(), seed);
    prepare(&mut expected);
    let interpreted = interpret(mem, &mut expected, count);
    let expected_memory = data.read();
    data.write(0, initial);
    let mut actual = wave(code.addr(), seed);
    prepare(&mut actual);
    mem.translations().store(0, Ordering::Relaxed);
    let ran = compiled(what, mem, cache, &mut actual);
    assert_eq!(
        interpreted_in_compiled_block(cache, mem, code.addr()),
        Some(0),
        "{what}: not inlined"
    );
    assert!(data.read() == expected_memory, "{what}: memory differs");
    if let (BlockExit::Fault(kind, pc, _), BlockExit::Fault(compiled_kind, compiled_pc, _)) =
        (&interpreted.1, &ran.1)
    {
        assert_eq!((kind, pc), (compiled_kind, compiled_pc), "{what}: fault");
        assert_eq!(interpreted.0, ran.0, "{what}: instructions run");
        return;
    }
    assert_eq!(interpreted, ran, "{what}: exit");
    assert_same(what, &expected, &actual);
    if seed > 0 {
        assert_eq!(
            mem.translations().load(Ordering::Relaxed),
            0,
            "{what}: the interpreter made an access"
        );
    }
}

/// A run of accesses through two address sources, as compilers emit them (several offsets
/// from one address register; a store, then a load of what it wrote; a load into its own
/// address register), after a load into the next access's address register (whose address
/// must be read after that load). Every word in memory is an offset into the buffer, so the
/// loaded address is too. With lane 7 three dwords before the end (seed / 8 % 7 == 2), the
/// fifth access faults after four went through.
#[test]
fn runs_of_accesses_match_the_interpreter() {
    const SIZE: usize = 4096;
    let words = [
        0xdc520008, 0x027c0004, // global_load_b32 v2, v[4:5], off offset:8
        0xdc5e0010, 0x06080002, // global_load_b128 v[6:9], v2, s[8:9] offset:16
        0xdc521ff8, 0x03080002, // global_load_b32 v3, v2, s[8:9] offset:-8
        0xdc6e0004, 0x007c0604, // global_store_b64 v[4:5], v[6:7], off offset:4
        0xdc560008, 0x0a7c0004, // global_load_b64 v[10:11], v[4:5], off offset:8
        0xdc6a1ffc, 0x00080302, // global_store_b32 v2, v3, s[8:9] offset:-4
        0xdc560018, 0x047c0004, // global_load_b64 v[4:5], v[4:5], off offset:24
        S_ENDPGM,
    ];
    let initial = |seed: u64| {
        let mut rng = Rng(seed ^ 0x5eed);
        (0..SIZE / 4)
            .flat_map(|_| (64 + rng.next() % 240 * 16).to_le_bytes())
            .collect()
    };
    let prepare = |seed: u64, data: &Buffer, wave: &mut Wave| {
        let mut rng = Rng(seed);
        for lane in 0..32 {
            let lane = lane as u64;
            let offset = match seed / 8 % 7 {
                1 => 64 + lane * 16,
                3 => 64 + lane * 4,
                4 => 64 + lane * 8,
                5 => 64 + lane / 2 * 64 + lane % 2 * 16,
                6 => 64 + lane / 4 * 16,
                2 if lane == 7 => SIZE as u64 - 12,
                _ => 64 + (rng.next() as u64 % 240) * 16,
            };
            let address = data.addr() + offset;
            wave.vgpr[4][lane as usize] = address as u32;
            wave.vgpr[5][lane as usize] = (address >> 32) as u32;
        }
        wave.sgpr[8] = data.addr() as u32;
        wave.sgpr[9] = (data.addr() >> 32) as u32;
    };
    check_memory_block("run of accesses", &words, SIZE, 112, 8, initial, prepare);
}

/// LDS loads and stores of one to four dwords, lanes at any byte address (a store then loads
/// of what it wrote; a load into its own address register), under every EXEC pattern; with
/// lane 5 of v3 near the end (seed / 8 % 4 == 3), the fourth access faults after three went
/// through.
#[test]
fn lds_accesses_match_the_interpreter() {
    const LDS: usize = 1024;
    let words = [
        0xd8340004, 0x00000201, // ds_store_b32 v1, v2 offset:4
        0xd9340040, 0x00000601, // ds_store_b64 v1, v[6:7] offset:64
        0xdbfc0010, 0x08000001, // ds_load_b128 v[8:11], v1 offset:16
        0xdb7c0000, 0x00000803, // ds_store_b128 v3, v[8:11]
        0xd8d80008, 0x0c000003, // ds_load_b32 v12, v3 offset:8
        0xd9d80000, 0x01000001, // ds_load_b64 v[1:2], v1
        0xdb780064, 0x00000803, // ds_store_b96 v3, v[8:10] offset:100
        0xdbf80064, 0x0d000003, // ds_load_b96 v[13:15], v3 offset:100
        S_ENDPGM,
    ];
    let code = code_buffer(&words);
    let mem = HostMemory::new(&[&code]);
    let cache = CodeCache::with_jit(JitMode::Eager);
    for seed in 0..64u64 {
        let what = format!("LDS accesses (seed {seed})");
        let mut rng = Rng(seed ^ 0x1d5);
        let initial: Vec<u8> = (0..LDS).map(|_| rng.next() as u8).collect();
        let prepare = |wave: &mut Wave| {
            let mut rng = Rng(seed);
            for lane in 0..32 {
                for row in [1, 3] {
                    wave.vgpr[row][lane] = match seed / 8 % 4 {
                        0 => rng.next() % 800,
                        1 => (rng.next() % 200) * 4,
                        2 => lane as u32 * 16,
                        _ if row == 3 && lane == 5 => LDS as u32 - 8,
                        _ => rng.next() % 800,
                    };
                }
            }
        };
        let mut expected_lds = initial.clone();
        let mut expected = wave(code.addr(), seed);
        prepare(&mut expected);
        let interpreted = interpret_with_lds(&mem, &mut expected_lds, &mut expected, 9);
        let mut lds = initial.clone();
        let mut actual = wave(code.addr(), seed);
        prepare(&mut actual);
        let ran = compiled_with_lds(&what, &mem, &mut lds, &cache, &mut actual);
        assert!(lds == expected_lds, "{what}: LDS differs");
        if let (BlockExit::Fault(kind, pc, _), BlockExit::Fault(compiled_kind, compiled_pc, _)) =
            (&interpreted.1, &ran.1)
        {
            assert_eq!((kind, pc), (compiled_kind, compiled_pc), "{what}: fault");
            continue;
        }
        assert_eq!(interpreted, ran, "{what}: exit");
        assert_same(&what, &expected, &actual);
    }
    assert_eq!(
        interpreted_in_compiled_block(&cache, &mem, code.addr()),
        Some(0),
        "LDS accesses: not inlined"
    );
}

/// Scalar loads of one to eight dwords: into their own base pair, with an offset register, a
/// negative offset, and an unaligned offset (the address's low two bits are ignored); with
/// s[8:9] past the buffer (seed % 4 == 3) the second load faults after the first went through.
#[test]
fn scalar_loads_match_the_interpreter() {
    const SIZE: usize = 256;
    let words = [
        0xf4040000, 0xf8000010, // s_load_b64 s[0:1], s[0:1], 0x10
        0xf4080104, 0x14000008, // s_load_b128 s[4:7], s[8:9], s10 offset:0x8
        0xf40c0304, 0xf81ffffc, // s_load_b256 s[12:19], s[8:9], -0x4
        0xf4000504, 0xf8000003, // s_load_b32 s20, s[8:9], 0x3
        S_ENDPGM,
    ];
    let initial = |seed: u64| {
        let mut rng = Rng(seed ^ 0x5ca1);
        (0..SIZE).map(|_| rng.next() as u8).collect()
    };
    let prepare = |seed: u64, data: &Buffer, wave: &mut Wave| {
        let mut rng = Rng(seed);
        let first = data.addr() + u64::from(rng.next() % 64) * 4;
        let second = if seed % 4 == 3 {
            data.addr() + SIZE as u64
        } else {
            data.addr() + 8 + u64::from(rng.next() % 32) * 4
        };
        wave.sgpr[0] = first as u32;
        wave.sgpr[1] = (first >> 32) as u32;
        wave.sgpr[8] = second as u32;
        wave.sgpr[9] = (second >> 32) as u32;
        wave.sgpr[10] = rng.next() % 16 * 4 + rng.next() % 4;
    };
    check_memory_block("scalar loads", &words, SIZE, 32, 5, initial, prepare);
}

#[test]
fn forgotten_code_is_dropped_and_compiled_afresh() {
    let code = code_buffer(&[0x06060501, S_ENDPGM]); // v_add_f32_e32 v3, v1, v2
    let mem = HostMemory::new(&[&code]);
    let cache = CodeCache::with_jit(JitMode::Eager);
    let mut first = wave(code.addr(), 1);
    compiled("v_add_f32", &mem, &cache, &mut first);
    assert_eq!((cache.compiled_blocks(), cache.len()), (1, 2));
    // Code elsewhere stays.
    cache.forget(code.addr() + 8, 64);
    assert_eq!((cache.compiled_blocks(), cache.len()), (1, 2));
    cache.forget(code.addr(), 8);
    assert_eq!((cache.compiled_blocks(), cache.len()), (0, 0));
    // New code at the same address (no invalidation needed once forgotten) runs as written.
    code.write(0, &0x10060501u32.to_le_bytes()); // v_mul_f32_e32 v3, v1, v2
    let mut expected = wave(code.addr(), 2);
    let mut actual = wave(code.addr(), 2);
    let interpreted = interpret(&mem, &mut expected, 2);
    assert_eq!(
        interpreted,
        compiled("v_mul_f32", &mem, &cache, &mut actual)
    );
    assert_same("v_mul_f32 after forget", &expected, &actual);
}

/// Tiered compiling counts a block's arrivals across dispatches (a kernel launched often
/// enough gets compiled even if no single launch reaches the threshold), and a compiled block
/// is used from a dispatch's first arrival on.
#[test]
fn arrivals_add_up_across_dispatches() {
    use rdna3::jit::TIER_THRESHOLD;
    use rdna3::{run_dispatch, Dispatch};
    let code = code_buffer(&[0x06060501, S_ENDPGM]); // v_add_f32_e32 v3, v1, v2
    let mem = HostMemory::new(&[&code]);
    let cache = CodeCache::with_jit(JitMode::Tiered);
    let groups = TIER_THRESHOLD / 4;
    let dispatch = Dispatch {
        code_entry: code.addr(),
        // FLOAT_MODE 0xf0: f32 denormals kept, as the inlined f32 add needs.
        rsrc1: 0xf0 << 12,
        grid: [groups, 1, 1],
        block: [32, 1, 1],
        wave32: true,
        max_steps: 1000,
        ..Dispatch::default()
    };
    let mut launches = 0;
    while cache.compiled_blocks() == 0 {
        launches += 1;
        assert!(launches <= 8, "not compiled after {launches} launches");
        let stats = run_dispatch(&mem, &cache, &dispatch).expect("runs");
        assert_eq!(stats.instructions, u64::from(groups) * 2);
    }
    assert!(
        launches > 1,
        "compiled in the first launch, below the threshold"
    );
}

/// Random runs of the cases above as one block: what one instruction leaves, the next reads
/// (the cases share registers), across the compiled code's own boundaries (row operations
/// fused into one loop over the lane groups, compares, carries, scalar operations, calls).
/// A fused run longer than the compiler keeps row values for: later operations read their
/// rows from the register file again (the value a row has at that point in the run).
#[test]
fn a_long_run_reads_its_rows_again() {
    let body: [(&str, u32); 4] = [
        ("v_add_f32_e32 v3, v1, v2", 0x06060501),
        ("v_fmac_f32_e32 v3, v1, v2", 0x56060501),
        ("v_add_nc_u32_e32 v1, v3, v4", 0x4a020903),
        ("v_and_b32_e32 v2, v1, v3", 0x36040701),
    ];
    let words: Vec<u32> = (0..40).map(|k| body[k % 4].1).chain([S_ENDPGM]).collect();
    assert_eq!(check_block("long run, f32", &words, 32), Some(0));
}

#[test]
fn random_blocks_match_the_interpreter() {
    let mut rng = Rng(0x0b10c);
    for program in 0..300u64 {
        let length = 2 + rng.next() as usize % 12;
        let mut words = Vec::new();
        let mut asm = Vec::new();
        for _ in 0..length {
            let (text, inst) = CASES[rng.next() as usize % CASES.len()];
            words.extend_from_slice(inst);
            asm.push(text);
        }
        words.push(S_ENDPGM);
        let code = code_buffer(&words);
        let mem = HostMemory::new(&[&code]);
        let cache = CodeCache::with_jit(JitMode::Eager);
        for seed in 0..4u64 {
            let what = format!("program {program} (seed {seed}): {}", asm.join("; "));
            let mut expected = wave(code.addr(), seed * 7 + program);
            let mut actual = wave(code.addr(), seed * 7 + program);
            let interpreted = interpret(&mem, &mut expected, length + 1);
            let ran = compiled(&what, &mem, &cache, &mut actual);
            assert_eq!(interpreted, ran, "{what}: exit");
            assert_same(&what, &expected, &actual);
        }
    }
}

/// A test memory that counts the interpreter's translations.
trait CountsTranslations: rdna3::Memory {
    fn translations(&self) -> &AtomicUsize;
}

impl CountsTranslations for Counting<'_> {
    fn translations(&self) -> &AtomicUsize {
        &self.translations
    }
}

impl CountsTranslations for AcrossFourGib<'_> {
    fn translations(&self) -> &AtomicUsize {
        &self.translations
    }
}

/// A memory counting its `translate` calls: compiled accesses ask for whole mappings
/// (`region`), the interpreter's translate.
struct Counting<'a> {
    inner: HostMemory<'a>,
    translations: AtomicUsize,
}

impl<'a> Counting<'a> {
    fn new(inner: HostMemory<'a>) -> Self {
        Self {
            inner,
            translations: AtomicUsize::new(0),
        }
    }
}

// SAFETY: `HostMemory`'s answers, passed on.
unsafe impl rdna3::Memory for Counting<'_> {
    fn translate(&self, addr: u64, len: u64) -> Option<*mut u8> {
        self.translations.fetch_add(1, Ordering::Relaxed);
        self.inner.translate(addr, len)
    }

    fn region(&self, addr: u64) -> Option<(u64, u64, *mut u8)> {
        self.inner.region(addr)
    }
}

/// Buffer `n` seen by the GPU at its host address plus `(n + 1) *` [`SHIFT`], as a device's
/// memory is seen at addresses of its own, laid out differently (with [`HostMemory`]'s
/// identity mapping, using the wrong buffer's translation would go unnoticed).
struct ShiftedMemory<'a>(Vec<&'a Buffer>);

const SHIFT: u64 = 1 << 44;

impl ShiftedMemory<'_> {
    fn gpu_address(&self, buffer: &Buffer) -> u64 {
        let n = self
            .0
            .iter()
            .position(|b| std::ptr::eq(*b, buffer))
            .unwrap_or(0);
        buffer.addr() + (n as u64 + 1) * SHIFT
    }
}

// SAFETY: as `HostMemory`'s: the buffers outlive the view and are only reached by pointer
// while a dispatch runs.
unsafe impl rdna3::Memory for ShiftedMemory<'_> {
    fn translate(&self, addr: u64, len: u64) -> Option<*mut u8> {
        let (start, size, base) = self.region(addr)?;
        let end = addr.checked_add(len)?;
        (end <= start + size).then(|| base.wrapping_add((addr - start) as usize))
    }

    fn region(&self, addr: u64) -> Option<(u64, u64, *mut u8)> {
        self.0.iter().enumerate().find_map(|(n, b)| {
            let start = b.addr() + (n as u64 + 1) * SHIFT;
            (addr >= start && addr < start + b.len() as u64)
                .then(|| (start, b.len() as u64, b.addr() as *mut u8))
        })
    }
}

/// A data buffer the GPU sees across a 4 GiB line (half below 2^32, half above), the code at
/// its host address; counts the interpreter's translations.
struct AcrossFourGib<'a> {
    code: &'a Buffer,
    data: &'a Buffer,
    translations: AtomicUsize,
}

impl AcrossFourGib<'_> {
    fn data_at(&self) -> u64 {
        (1 << 32) - self.data.len() as u64 / 2
    }
}

// SAFETY: the buffers outlive the view and are only reached by pointer while a block runs.
unsafe impl rdna3::Memory for AcrossFourGib<'_> {
    fn translate(&self, addr: u64, len: u64) -> Option<*mut u8> {
        self.translations.fetch_add(1, Ordering::Relaxed);
        let (start, size, base) = self.region(addr)?;
        let end = addr.checked_add(len)?;
        (end <= start + size).then(|| base.wrapping_add((addr - start) as usize))
    }

    fn region(&self, addr: u64) -> Option<(u64, u64, *mut u8)> {
        [(self.data_at(), self.data), (self.code.addr(), self.code)]
            .into_iter()
            .find(|(start, b)| addr >= *start && addr < start + b.len() as u64)
            .map(|(start, b)| (start, b.len() as u64, b.addr() as *mut u8))
    }
}

/// Lanes' 64-bit addresses with different high words (a buffer across a 4 GiB line): the
/// compiled code orders them as whole addresses, and does the accesses itself.
#[test]
fn addresses_across_a_four_gib_line() {
    const SIZE: usize = 4096;
    let words = [
        0xdc5e1ff0, 0x067c0004, // global_load_b128 v[6:9], v[4:5], off offset:-16
        0xdc760020, 0x007c0604, // global_store_b128 v[4:5], v[6:9], off offset:32
        S_ENDPGM,
    ];
    let code = code_buffer(&words);
    let data = Buffer::zeroed(SIZE);
    let mem = AcrossFourGib {
        code: &code,
        data: &data,
        translations: AtomicUsize::new(0),
    };
    let cache = CodeCache::with_jit(JitMode::Eager);
    for seed in 0..80u64 {
        let what = format!("across 4 GiB (seed {seed})");
        let mut rng = Rng(seed ^ 0x4919);
        let initial: Vec<u8> = (0..SIZE).map(|_| rng.next() as u8).collect();
        let prepare = |wave: &mut Wave| {
            let mut rng = Rng(seed);
            for lane in 0..32 {
                // Below, above, or both sides of the line; or one lane before the buffer
                // (the lowest address decides that the access faults), or past it.
                let offset = match seed / 8 % 5 {
                    2 => 64 + (rng.next() as u64 % 240) * 16,
                    3 if lane == 13 => -4096i64 as u64,
                    4 if lane == 21 => SIZE as u64 + 4096,
                    1 | 4 => SIZE as u64 / 2 + (rng.next() as u64 % 120) * 16,
                    _ => 64 + (rng.next() as u64 % 120) * 16,
                };
                let address = mem.data_at().wrapping_add(offset);
                wave.vgpr[4][lane] = address as u32;
                wave.vgpr[5][lane] = (address >> 32) as u32;
            }
        };
        assert_both_ways_agree(
            &what,
            (&mem, &cache, &code, &data),
            &initial,
            seed,
            3,
            prepare,
        );
    }
}

/// Accesses to several buffers in one block: each translation remembered for the next access
/// is used only where the access lies inside it.
#[test]
fn accesses_to_several_buffers_in_one_block() {
    const SIZE: usize = 1024;
    let words = [
        0xdc5a0004, 0x06080002, // global_load_b96 v[6:8], v2, s[8:9] offset:4
        0xdc520008, 0x037c0004, // global_load_b32 v3, v[4:5], off offset:8
        0xdc6e0000, 0x00080602, // global_store_b64 v2, v[6:7], s[8:9]
        0xdc6a0000, 0x007c0304, // global_store_b32 v[4:5], v3, off
        S_ENDPGM,
    ];
    let code = code_buffer(&words);
    let (first, second) = (Buffer::zeroed(SIZE), Buffer::zeroed(SIZE));
    let mem = ShiftedMemory(vec![&code, &first, &second]);
    let cache = CodeCache::with_jit(JitMode::Eager);
    for seed in 0..32u64 {
        let what = format!("two buffers (seed {seed})");
        let mut rng = Rng(seed);
        let initial: Vec<Vec<u8>> = (0..2)
            .map(|_| (0..SIZE).map(|_| rng.next() as u8).collect())
            .collect();
        let prepare = |wave: &mut Wave| {
            let mut rng = Rng(seed ^ 0xfeed);
            for lane in 0..32 {
                // v[4:5] into the second buffer; v2 an offset into the first (s[8:9]); with
                // seed 3 mod 4, lane 9's offset runs past the first buffer's end.
                let address = mem.gpu_address(&second) + 16 + (rng.next() as u64 % 60) * 16;
                wave.vgpr[4][lane] = address as u32;
                wave.vgpr[5][lane] = (address >> 32) as u32;
                wave.vgpr[2][lane] = if seed % 4 == 3 && lane == 9 {
                    SIZE as u32 - 4
                } else {
                    16 + (rng.next() % 60) * 16
                };
            }
            wave.sgpr[8] = mem.gpu_address(&first) as u32;
            wave.sgpr[9] = (mem.gpu_address(&first) >> 32) as u32;
        };
        let restore = || {
            first.write(0, &initial[0]);
            second.write(0, &initial[1]);
        };
        restore();
        let mut expected = wave(mem.gpu_address(&code), seed);
        prepare(&mut expected);
        let interpreted = interpret(&mem, &mut expected, words.len());
        let expected_memory = (first.read(), second.read());
        restore();
        let mut actual = wave(mem.gpu_address(&code), seed);
        prepare(&mut actual);
        let ran = compiled(&what, &mem, &cache, &mut actual);
        match (&interpreted.1, &ran.1) {
            (BlockExit::Fault(kind, pc, _), BlockExit::Fault(compiled_kind, compiled_pc, _)) => {
                assert_eq!((kind, pc), (compiled_kind, compiled_pc), "{what}: fault");
            }
            _ => {
                assert_eq!(interpreted, ran, "{what}: exit");
                assert_same(&what, &expected, &actual);
                assert!(
                    (first.read(), second.read()) == expected_memory,
                    "{what}: memory differs"
                );
            }
        }
    }
}
