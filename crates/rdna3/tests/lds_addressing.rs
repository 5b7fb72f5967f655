//! LDS addresses are the address VGPR plus the instruction offset in 32 bits, wrapping: clang
//! folds `tile[63 - t]` into a base of `-4 * t` and an offset of 252. Encodings from
//! llvm-mc-19.

mod common;

use common::HostMemory;
use rdna3::decode::decode;
use rdna3::exec::{ExecContext, Wave};
use rdna3::operand::EXEC_LO;

fn run(words: &[u32], wave: &mut Wave, lds: &mut [u8]) {
    let decoded = decode(words).unwrap();
    let mem = HostMemory::new(&[]);
    let mut ctx = ExecContext { mem: &mem, lds };
    wave.execute(&mut ctx, &decoded.inst, decoded.words as u64 * 4)
        .unwrap();
}

#[test]
fn a_negative_base_plus_the_offset_wraps_to_the_lds_address() {
    let mut lds = vec![0u8; 256];
    let mut w = Wave::new(0x1000);
    w.sgpr[usize::from(EXEC_LO)] = u32::MAX;
    for lane in 0..32 {
        w.vgpr[3][lane] = (lane as u32).wrapping_mul(4).wrapping_neg(); // -4 * lane
        w.vgpr[1][lane] = 1000 + lane as u32;
    }
    // ds_store_b32 v3, v1 offset:252: lane t writes dword 63 - t.
    run(&[0xd83400fc, 0x00000103], &mut w, &mut lds);
    for t in 0..32usize {
        let at = (63 - t) * 4;
        let got = u32::from_le_bytes(lds[at..at + 4].try_into().unwrap());
        assert_eq!(got, 1000 + t as u32, "dword {}", 63 - t);
    }
    // ds_load_b32 v0, v3 offset:252 reads them back.
    run(&[0xd8d800fc, 0x00000003], &mut w, &mut lds);
    for t in 0..32 {
        assert_eq!(w.vgpr[0][t], 1000 + t as u32, "lane {t}");
    }
    // ds_load_2addr_b32 v[4:5], v3 offset0:63 offset1:62 (dwords): the same wrap.
    run(&[0xd8dc3e3f, 0x04000003], &mut w, &mut lds);
    for t in 0..32usize {
        assert_eq!(w.vgpr[4][t], 1000 + t as u32, "lane {t}");
        // Dword 62 - t, which lane t + 1 wrote (dword 31 nobody did).
        let want = if t < 31 { 1001 + t as u32 } else { 0 };
        assert_eq!(w.vgpr[5][t], want, "lane {t}");
    }
}
