//! Faults are returned errors that name what went wrong and where: hand-assembled programs
//! (words from llvm-mc-19) run through `run_dispatch`.

mod common;

use common::{Buffer, HostMemory};
use rdna3::{run_dispatch, CodeCache, Dispatch, FaultKind};

const S_ENDPGM: u32 = 0xbfb00000;
const S_NOP_0: u32 = 0xbf800000;
/// image_load v[0:3], v0, s[0:7] dmask:0xf dim:SQ_RSRC_IMG_1D
const IMAGE_LOAD: [u32; 2] = [0xf0000f00, 0x00000000];
/// ds_store_b32 v1, v2 offset:65532
const DS_STORE_FAR: [u32; 2] = [0xd834fffc, 0x00000201];
/// An SOPP word with an opcode number the ISA does not define.
const UNDEFINED_SOPP: u32 = 0xbfff0000;

fn program(words: &[u32]) -> Buffer {
    Buffer::from_u32s(words)
}

fn dispatch_for(code: &Buffer) -> Dispatch {
    Dispatch {
        code_entry: code.addr(),
        grid: [2, 1, 1],
        block: [64, 1, 1],
        wave32: true,
        max_steps: 1000,
        ..Dispatch::default()
    }
}

#[test]
fn undecodable_word_names_word_and_pc() {
    let code = program(&[S_NOP_0, UNDEFINED_SOPP, S_ENDPGM]);
    let mem = HostMemory::new(&[&code]);
    let fault = run_dispatch(&mem, &CodeCache::new(), &dispatch_for(&code)).unwrap_err();
    assert_eq!(
        fault.kind,
        FaultKind::Undecodable {
            word: UNDEFINED_SOPP
        }
    );
    assert_eq!(fault.pc, code.addr() + 4);
    let text = fault.to_string();
    assert!(
        text.contains("0xbfff0000") && text.contains(&format!("{:#x}", code.addr() + 4)),
        "{text}"
    );
}

#[test]
fn unimplemented_instruction_names_mnemonic_pc_and_workgroup() {
    let code = program(&[S_NOP_0, IMAGE_LOAD[0], IMAGE_LOAD[1], S_ENDPGM]);
    let mem = HostMemory::new(&[&code]);
    let fault = run_dispatch(&mem, &CodeCache::new(), &dispatch_for(&code)).unwrap_err();
    assert_eq!(
        fault.kind,
        FaultKind::Unimplemented {
            mnemonic: "image_load".into()
        }
    );
    assert_eq!(fault.workgroup, [0, 0, 0]);
    assert_eq!(
        fault.to_string(),
        format!(
            "unimplemented instruction image_load at pc {:#x} (workgroup 0,0,0)",
            code.addr() + 4
        )
    );
}

#[test]
fn wave64_is_unsupported() {
    let code = program(&[S_ENDPGM]);
    let mem = HostMemory::new(&[&code]);
    let dispatch = Dispatch {
        wave32: false,
        ..dispatch_for(&code)
    };
    let fault = run_dispatch(&mem, &CodeCache::new(), &dispatch).unwrap_err();
    assert!(
        matches!(fault.kind, FaultKind::Unsupported(ref what) if what.contains("wave64")),
        "{fault}"
    );
}

#[test]
fn lds_access_past_the_allocation_faults() {
    let code = program(&[DS_STORE_FAR[0], DS_STORE_FAR[1], S_ENDPGM]);
    let mem = HostMemory::new(&[&code]);
    // 1 KiB of LDS (two 512-byte granules in RSRC2.LDS_SIZE).
    let dispatch = Dispatch {
        rsrc2: 2 << 15,
        ..dispatch_for(&code)
    };
    let fault = run_dispatch(&mem, &CodeCache::new(), &dispatch).unwrap_err();
    assert_eq!(fault.kind, FaultKind::LdsOutOfRange { addr: 65532 });
    assert_eq!(
        fault.instruction.as_deref(),
        Some("ds_store_b32 v1, v2 offset:65532")
    );
}

#[test]
fn unmapped_code_is_a_vm_fault() {
    let code = program(&[S_ENDPGM]);
    let mem = HostMemory::new(&[]);
    let fault = run_dispatch(&mem, &CodeCache::new(), &dispatch_for(&code)).unwrap_err();
    assert_eq!(
        fault.kind,
        FaultKind::VmFault {
            addr: code.addr(),
            write: false
        }
    );
}

#[test]
fn step_budget_counts_per_wave() {
    // s_branch -1: jumps to itself forever.
    let code = program(&[0xbfa0ffff]);
    let mem = HostMemory::new(&[&code]);
    let fault = run_dispatch(&mem, &CodeCache::new(), &dispatch_for(&code)).unwrap_err();
    assert_eq!(fault.kind, FaultKind::StepBudgetExceeded { steps: 1000 });
    assert!(fault.to_string().contains("step budget"), "{fault}");
}

#[test]
fn code_cache_revalidates_after_invalidate() {
    let code = program(&[S_NOP_0, S_NOP_0, S_NOP_0, S_ENDPGM]);
    let mem = HostMemory::new(&[&code]);
    let cache = CodeCache::new();
    let dispatch = dispatch_for(&code);
    let stats = run_dispatch(&mem, &cache, &dispatch).unwrap();
    assert_eq!(stats.instructions, 4 * stats.waves);
    assert_eq!(cache.len(), 4);
    // Unchanged code after an invalidate: entries are revalidated, not re-decoded or lost.
    cache.invalidate();
    run_dispatch(&mem, &cache, &dispatch).unwrap();
    assert_eq!(cache.len(), 4);
    // Rewrite the second instruction. Without an invalidate the decoded copy is still used
    // (as a real instruction cache would); after one, the change is seen.
    code.write(4, &IMAGE_LOAD[0].to_le_bytes());
    code.write(8, &IMAGE_LOAD[1].to_le_bytes());
    run_dispatch(&mem, &cache, &dispatch).unwrap();
    cache.invalidate();
    let fault = run_dispatch(&mem, &cache, &dispatch).unwrap_err();
    assert_eq!(
        fault.kind,
        FaultKind::Unimplemented {
            mnemonic: "image_load".into()
        }
    );
}

#[test]
fn random_programs_never_panic() {
    // Random instruction streams (biased towards valid encodings by mixing in real words)
    // must end in Ok or a Fault, never a panic or an out-of-bounds access.
    let data = Buffer::zeroed(4096);
    let real_words: [u32; 12] = [
        0xd6fe7c01, 0x0400060f, 0x7c880202, 0xbe82206a, 0xdc520000, 0x027c0002, 0xd8340000,
        0x00002a2b, 0xca100000, 0x00000001, 0xd73c0000, 0x00020282,
    ];
    let mut state = 0x9e37_79b9_7f4a_7c15u64;
    let mut next = || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state
    };
    let mut outcomes = [0u32; 4];
    for _ in 0..3000 {
        let mut words: Vec<u32> = (0..64)
            .map(|_| {
                let r = next();
                if r % 3 == 0 {
                    real_words[(r >> 8) as usize % real_words.len()]
                } else {
                    (r >> 16) as u32
                }
            })
            .collect();
        words.push(S_ENDPGM);
        let code = program(&words);
        let mem = HostMemory::new(&[&code, &data]);
        let mut user_data = [0u32; 16];
        for (i, slot) in user_data.iter_mut().enumerate() {
            *slot = if i % 2 == 0 {
                data.addr() as u32
            } else {
                (data.addr() >> 32) as u32
            };
        }
        let dispatch = Dispatch {
            rsrc2: (16 << 1) | (7 << 7) | (2 << 15),
            user_data,
            max_steps: 500,
            ..dispatch_for(&code)
        };
        match run_dispatch(&mem, &CodeCache::new(), &dispatch) {
            Ok(_) => outcomes[0] += 1,
            Err(fault) => match fault.kind {
                FaultKind::Undecodable { .. } => outcomes[1] += 1,
                FaultKind::Unimplemented { .. } => outcomes[2] += 1,
                _ => outcomes[3] += 1,
            },
        }
    }
    // The sweep must get past decoding often enough to exercise execution.
    assert!(outcomes[2] + outcomes[3] + outcomes[0] > 50, "{outcomes:?}");
}

/// One wave of 32 lanes with a scratch ring of one 512-byte slot: 16 bytes per lane.
fn scratch_dispatch(code: &Buffer, ring: &Buffer) -> Dispatch {
    Dispatch {
        code_entry: code.addr(),
        grid: [1, 1, 1],
        block: [32, 1, 1],
        rsrc2: 1, // SCRATCH_EN
        scratch_base: ring.addr(),
        tmpring_size: 1 | (2 << 12), // WAVES 1, WAVESIZE 2 x 256 bytes
        shader_engines: 1,
        wave32: true,
        max_steps: 1000,
        ..Dispatch::default()
    }
}

#[test]
fn scratch_accesses_stay_within_the_lanes_slice_of_the_ring() {
    // scratch_store_b32 off, v0, off offset:12: the last dword of each lane's 16 bytes.
    let code = program(&[0xdc69000c, 0x007c0000, S_ENDPGM]);
    let ring = Buffer::zeroed(512);
    let mem = HostMemory::new(&[&code, &ring]);
    run_dispatch(&mem, &CodeCache::new(), &scratch_dispatch(&code, &ring)).unwrap();
    let words = ring.u32s();
    for lane in 0..32u32 {
        for k in 0..4 {
            let want = if k == 3 { lane } else { 0 };
            assert_eq!(words[lane as usize * 4 + k], want, "lane {lane} dword {k}");
        }
    }
    // Past the slice: at offset 16, and an 8-byte store at offset 12 that would reach into
    // the next lane's bytes.
    for (words, what) in [
        ([0xdc690010, 0x007c0000], "scratch_store_b32 offset:16"),
        ([0xdc6d000c, 0x007c0000], "scratch_store_b64 offset:12"),
    ] {
        let code = program(&[words[0], words[1], S_ENDPGM]);
        let ring = Buffer::zeroed(512);
        let mem = HostMemory::new(&[&code, &ring]);
        let fault =
            run_dispatch(&mem, &CodeCache::new(), &scratch_dispatch(&code, &ring)).unwrap_err();
        assert!(
            matches!(fault.kind, FaultKind::VmFault { write: true, .. }),
            "{what}: {fault}"
        );
        assert!(ring.u32s().iter().all(|&w| w == 0), "{what} wrote the ring");
    }
    // A 16-byte load from offset 4 reads past the slice too.
    let code = program(&[0xdc5d0004, 0x047c0000, S_ENDPGM]);
    let ring = Buffer::zeroed(512);
    let mem = HostMemory::new(&[&code, &ring]);
    let fault = run_dispatch(&mem, &CodeCache::new(), &scratch_dispatch(&code, &ring)).unwrap_err();
    assert!(
        matches!(fault.kind, FaultKind::VmFault { write: false, .. }),
        "scratch_load_b128 offset:4: {fault}"
    );
}
