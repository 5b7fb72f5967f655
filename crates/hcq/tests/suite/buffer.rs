//! buffer.hip: raw buffer loads and stores through buffer resource descriptors, with offsets
//! past num_records (loads read 0, stores are dropped, per dword for wide accesses).

use crate::common::*;
use crate::BUFFER;
use hcq::Arg;

const LOCAL: u32 = 64;

/// Whether `size` bytes at byte `offset` fit in a raw buffer of `num_records` bytes.
fn in_range(offset: u64, size: u64, num_records: u32) -> bool {
    offset + size <= u64::from(num_records)
}

/// An access's byte offset: the kernel's 32-bit offset read as unsigned. The dwords of a wide
/// access follow it without wrapping (the hardware's range check saturates).
fn unsigned(offset: i32) -> u64 {
    u64::from(offset as u32)
}

#[test]
fn buffer_raw() {
    let n = 200;
    let mut rng = Rng::new(1101);
    let input: Vec<i32> = (0..256).map(|_| rng.i32()).collect();
    let input_bytes: Vec<u8> = input.iter().flat_map(|v| v.to_le_bytes()).collect();
    // Not a multiple of 16, so some b128 loads straddle the end.
    let in_bytes: u32 = 600;
    let special = [0, 4, 588, 592, 596, 600, 604, 1020, -8, 1 << 20];
    let offsets: Vec<i32> = (0..n)
        .map(|i| {
            if i < special.len() {
                special[i]
            } else {
                rng.range(0, 170) as i32 * 4
            }
        })
        .collect();
    // Not a multiple of 4 or 8: the element straddling the end is dropped.
    let out_bytes: u32 = 4 * (n as u32 / 2) + 2;
    let sentinel = 0x5a5a_5a5ai32;
    let (bin, boff) = (upload(&input), upload(&offsets));
    let (load32, load128, load8, load64) = (
        filled(n, sentinel),
        filled(4 * n, sentinel),
        filled(n, sentinel),
        filled(2 * n, sentinel),
    );
    let (out, out64, out16) = (
        filled(n + 8, sentinel),
        filled(2 * n + 8, sentinel),
        filled(n + 8, 0x7777i16),
    );
    run(
        BUFFER,
        "buffer_raw",
        &[
            Arg::Buffer(&bin),
            Arg::Buffer(&boff),
            Arg::Buffer(&load32),
            Arg::Buffer(&load128),
            Arg::Buffer(&load8),
            Arg::Buffer(&load64),
            Arg::Buffer(&out),
            Arg::Buffer(&out64),
            Arg::Buffer(&out16),
            Arg::I32(in_bytes as i32),
            Arg::I32(out_bytes as i32),
            Arg::I32(n as i32),
        ],
        groups(n, LOCAL),
        [LOCAL, 1, 1],
    );
    let dword = |offset: u64| -> i32 {
        if in_range(offset, 4, in_bytes) {
            input[offset as usize / 4]
        } else {
            0
        }
    };
    let mut ck = Check::new("buffer_raw");
    let (g32, g128, g8, g64): (Vec<i32>, Vec<i32>, Vec<i32>, Vec<i32>) =
        (read(&load32), read(&load128), read(&load8), read(&load64));
    for (i, &off) in offsets.iter().enumerate() {
        let start = unsigned(off);
        ck.eq(g32[i], dword(start), || {
            format!("b32 load, lane {i} offset {off}")
        });
        for k in 0..4 {
            ck.eq(g128[4 * i + k], dword(start + 4 * k as u64), || {
                format!("b128 load dword {k}, lane {i} offset {off}")
            });
        }
        let byte_offset = unsigned(off + (i & 3) as i32);
        let byte = if in_range(byte_offset, 1, in_bytes) {
            i32::from(input_bytes[byte_offset as usize])
        } else {
            0
        };
        ck.eq(g8[i], byte, || {
            format!("b8 load, lane {i} offset {byte_offset}")
        });
        let pair_start = unsigned(off + 4);
        for k in 0..2 {
            ck.eq(g64[2 * i + k], dword(pair_start + 4 * k as u64), || {
                format!("b64 load dword {k}, lane {i} offset {}", off + 4)
            });
        }
    }
    let (gout, gout64, gout16): (Vec<i32>, Vec<i32>, Vec<i16>) =
        (read(&out), read(&out64), read(&out16));
    for (i, &got) in gout.iter().enumerate() {
        let stored = i < n && in_range(4 * i as u64, 4, out_bytes);
        let want = if stored { i as i32 * 3 + 1 } else { sentinel };
        ck.eq(got, want, || format!("b32 store element {i}"));
    }
    for (j, &got) in gout64.iter().enumerate() {
        let i = j / 2;
        let stored = i < n && in_range(4 * j as u64, 4, out_bytes);
        let value = if j % 2 == 0 { i as i32 } else { !(i as i32) };
        let want = if stored { value } else { sentinel };
        ck.eq(got, want, || format!("b64 store dword {j}"));
    }
    for (i, &got) in gout16.iter().enumerate() {
        let stored = i < n && in_range(2 * i as u64, 2, out_bytes);
        let want = if stored { (i as i16) ^ 0x5a5a } else { 0x7777 };
        ck.eq(got, want, || format!("b16 store element {i}"));
    }
    ck.finish();
}
