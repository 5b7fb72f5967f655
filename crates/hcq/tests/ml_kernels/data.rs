//! Data movement and integer patterns: transpose, embedding gather, index_add scatter, top-k,
//! prefix sums, histogram. All exact.

use crate::common::*;
use crate::DATA;
use hcq::Arg;

#[test]
fn transpose_through_lds_tile() {
    let (rows, cols) = (70usize, 45usize);
    let mut rng = Rng::new(40);
    let input = rng.f32s(rows * cols, -100.0, 100.0);
    let out = filled(rows * cols, f32::NAN);
    run(
        DATA,
        "transpose_tile32",
        &[
            Arg::Buffer(&out),
            Arg::Buffer(&upload(&input)),
            Arg::I32(rows as i32),
            Arg::I32(cols as i32),
        ],
        [blocks(cols, 32), blocks(rows, 32), 1],
        [32, 8, 1],
    );
    let got: Vec<f32> = read(&out);
    let mut check = Check::new("transpose_tile32");
    for r in 0..rows {
        for c in 0..cols {
            check.f32(got[c * rows + r], input[r * cols + c], || {
                format!("({r}, {c})")
            });
        }
    }
    check.finish();
}

#[test]
fn embedding_gather_and_index_add_scatter() {
    let (vocab, dim, tokens) = (50i64, 67usize, 41usize);
    let mut rng = Rng::new(41);
    let table = rng.f32s(vocab as usize * dim, -1.0, 1.0);
    // Mostly valid ids, some negative or past the table (they read as zero rows).
    let ids: Vec<i64> = (0..tokens).map(|_| rng.range(-3, vocab + 2)).collect();
    let out = filled(tokens * dim, f32::NAN);
    run(
        DATA,
        "embedding_lookup",
        &[
            Arg::Buffer(&out),
            Arg::Buffer(&upload(&table)),
            Arg::Buffer(&upload(&ids)),
            Arg::I32(tokens as i32),
            Arg::I32(dim as i32),
            Arg::I64(vocab),
        ],
        [blocks(tokens * dim, 256), 1, 1],
        [256, 1, 1],
    );
    let got: Vec<f32> = read(&out);
    let mut check = Check::new("embedding_lookup");
    for t in 0..tokens {
        for d in 0..dim {
            let want = if (0..vocab).contains(&ids[t]) {
                table[ids[t] as usize * dim + d]
            } else {
                0.0
            };
            check.f32(got[t * dim + d], want, || {
                format!("token {t} (id {}), {d}", ids[t])
            });
        }
    }
    check.finish();

    // index_add: 300 source rows into 7 destination rows. Sources are multiples of 1/64
    // below 4, so every partial sum is exact and the atomics' order cannot show.
    let (src_rows, dst_rows, width) = (300usize, 7usize, 19usize);
    let src: Vec<f32> = (0..src_rows * width)
        .map(|_| rng.range(-256, 255) as f32 / 64.0)
        .collect();
    let index: Vec<i32> = (0..src_rows)
        .map(|_| rng.range(0, dst_rows as i64 - 1) as i32)
        .collect();
    let initial: Vec<f32> = (0..dst_rows * width).map(|i| i as f32).collect();
    let dst = upload(&initial);
    run(
        DATA,
        "index_add_rows",
        &[
            Arg::Buffer(&dst),
            Arg::Buffer(&upload(&src)),
            Arg::Buffer(&upload(&index)),
            Arg::I32(src_rows as i32),
            Arg::I32(width as i32),
        ],
        [blocks(src_rows * width, 128), 1, 1],
        [128, 1, 1],
    );
    let got: Vec<f32> = read(&dst);
    let mut want = initial.clone();
    for r in 0..src_rows {
        for d in 0..width {
            want[index[r] as usize * width + d] += src[r * width + d];
        }
    }
    let mut check = Check::new("index_add_rows");
    for (i, (g, w)) in got.iter().zip(&want).enumerate() {
        check.f32(*g, *w, || {
            format!("row {}, column {}", i / width, i % width)
        });
    }
    check.finish();
}

#[test]
fn topk_by_bitonic_sort() {
    let (rows, cols, k) = (3usize, 1000usize, 16usize);
    let mut rng = Rng::new(42);
    // A coarse grid of values makes ties, which rank by lower index.
    let x: Vec<f32> = (0..rows * cols)
        .map(|_| rng.range(-300, 300) as f32 / 4.0)
        .collect();
    let (values, indices) = (filled(rows * k, f32::NAN), filled(rows * k, -1i32));
    run(
        DATA,
        "topk_bitonic",
        &[
            Arg::Buffer(&values),
            Arg::Buffer(&indices),
            Arg::Buffer(&upload(&x)),
            Arg::I32(cols as i32),
            Arg::I32(k as i32),
        ],
        [rows as u32, 1, 1],
        [512, 1, 1],
    );
    let (values, indices): (Vec<f32>, Vec<i32>) = (read(&values), read(&indices));
    let mut check = Check::new("topk_bitonic");
    for r in 0..rows {
        let row = &x[r * cols..(r + 1) * cols];
        let mut order: Vec<usize> = (0..cols).collect();
        order.sort_by(|&i, &j| row[j].total_cmp(&row[i]).then(i.cmp(&j)));
        for (rank, &i) in order[..k].iter().enumerate() {
            check.f32(values[r * k + rank], row[i], || {
                format!("row {r}, rank {rank}")
            });
            check.eq(indices[r * k + rank], i as i32, || {
                format!("row {r}, rank {rank} index")
            });
        }
    }
    check.finish();
}

fn inclusive_scan(values: &[u32]) -> Vec<u32> {
    values
        .iter()
        .scan(0u32, |sum, &v| {
            *sum = sum.wrapping_add(v);
            Some(*sum)
        })
        .collect()
}

#[test]
fn multi_pass_prefix_sum() {
    let n = 50_000usize;
    let mut rng = Rng::new(43);
    let input: Vec<u32> = (0..n)
        .map(|_| rng.next_u64() as u32 >> rng.range(0, 31))
        .collect();
    let blocks_needed = n.div_ceil(256);
    assert!(blocks_needed <= 256, "the block totals fit one workgroup");
    let (out, totals, scanned_totals, unused) = (
        filled(n, 0xdeadu32),
        filled(blocks_needed, 0u32),
        filled(blocks_needed, 0u32),
        filled(1, 0u32),
    );
    run(
        DATA,
        "scan_blocks",
        &[
            Arg::Buffer(&out),
            Arg::Buffer(&totals),
            Arg::Buffer(&upload(&input)),
            Arg::I32(n as i32),
        ],
        [blocks_needed as u32, 1, 1],
        [256, 1, 1],
    );
    run(
        DATA,
        "scan_blocks",
        &[
            Arg::Buffer(&scanned_totals),
            Arg::Buffer(&unused),
            Arg::Buffer(&totals),
            Arg::I32(blocks_needed as i32),
        ],
        [1, 1, 1],
        [256, 1, 1],
    );
    run(
        DATA,
        "scan_add_offsets",
        &[
            Arg::Buffer(&out),
            Arg::Buffer(&scanned_totals),
            Arg::I32(n as i32),
        ],
        [blocks_needed as u32, 1, 1],
        [256, 1, 1],
    );
    let got: Vec<u32> = read(&out);
    let want = inclusive_scan(&input);
    let mut check = Check::new("multi-pass scan");
    for i in 0..n {
        check.eq(got[i], want[i], || format!("element {i}"));
    }
    check.finish();
}

#[test]
fn single_pass_prefix_sum_with_decoupled_look_back() {
    let n = 40_000usize;
    let mut rng = Rng::new(44);
    let input: Vec<u32> = (0..n).map(|_| rng.next_u64() as u32).collect();
    let tiles = n.div_ceil(256);
    let (out, states, counter) = (filled(n, 0xdeadu32), filled(tiles, 0u64), filled(1, 0u32));
    run(
        DATA,
        "scan_decoupled",
        &[
            Arg::Buffer(&out),
            Arg::Buffer(&states),
            Arg::Buffer(&counter),
            Arg::Buffer(&upload(&input)),
            Arg::I32(n as i32),
        ],
        [tiles as u32, 1, 1],
        [256, 1, 1],
    );
    let got: Vec<u32> = read(&out);
    let want = inclusive_scan(&input);
    let mut check = Check::new("decoupled look-back scan");
    for i in 0..n {
        check.eq(got[i], want[i], || format!("element {i}"));
    }
    check.eq(read::<u32>(&counter)[0], tiles as u32, || {
        "tiles taken".into()
    });
    check.finish();
}

/// The look-back scan's premise: one workgroup stores 64-bit words while another loads them,
/// and no load sees half of one word and half of another (the emulator once moved the dwords
/// of a `global_load_b64` one at a time, and a scan tile then added a stale prefix).
#[test]
fn a_64_bit_store_is_seen_whole() {
    let rounds = 200_000;
    let (word, torn) = (filled(1, 0x55555555aaaaaaaau64), filled(1, 0u32));
    // Eight workgroups, so that on a host with more than one core some readers run while the
    // writer does (the emulator hands out workgroups in runs of four).
    run(
        DATA,
        "u64_store_load_halves",
        &[Arg::Buffer(&word), Arg::Buffer(&torn), Arg::I32(rounds)],
        [8, 1, 1],
        [32, 1, 1],
    );
    assert_eq!(
        read::<u32>(&torn)[0],
        0,
        "loads that saw two halves of different words"
    );
    let last = read::<u64>(&word)[0];
    assert!(
        last == 0x55555555aaaaaaaa || last == 0xaaaaaaaa55555555,
        "final word {last:#x}"
    );
}

#[test]
fn two_level_histogram() {
    let n = 30_001usize;
    let mut rng = Rng::new(45);
    // Skewed bytes: a few hot bins collide often in LDS.
    let data: Vec<u8> = (0..n)
        .map(|_| {
            if rng.range(0, 3) == 0 {
                rng.range(0, 3) as u8
            } else {
                rng.next_u64() as u8
            }
        })
        .collect();
    let bins = filled(256, 0u32);
    run(
        DATA,
        "histogram256",
        &[
            Arg::Buffer(&bins),
            Arg::Buffer(&upload(&data)),
            Arg::I32(n as i32),
        ],
        [6, 1, 1],
        [192, 1, 1],
    );
    let got: Vec<u32> = read(&bins);
    let mut want = [0u32; 256];
    for &b in &data {
        want[b as usize] += 1;
    }
    let mut check = Check::new("histogram256");
    for b in 0..256 {
        check.eq(got[b], want[b], || format!("bin {b}"));
    }
    check.finish();
}
