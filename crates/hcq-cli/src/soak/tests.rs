use super::work::{CopyRound, LaunchPlan, ReplayPlan};
use super::*;

/// Output slots as a correct device writes them, computed here element by element from
/// the kernels' definitions in `kernels/demo.hip`.
fn launch_slots(first: u64, count: usize, a: &[i32], b: &[i32], fill: i32) -> Vec<i32> {
    let mut out = vec![fill; count * SLOT];
    for slot in 0..count {
        let p = launch_plan(first + slot as u64);
        for i in 0..p.n {
            let (x, y) = (a[p.a_at + i], b[p.b_at + i]);
            out[slot * SLOT + i] = match p.kernel {
                IntKernel::Add => x.wrapping_add(y),
                IntKernel::Mul => x.wrapping_mul(y),
                IntKernel::Mix => (x ^ y.wrapping_shl(3)).wrapping_sub(x >> 2),
            };
        }
    }
    out
}

fn inputs() -> (Vec<i32>, Vec<i32>) {
    let mut rng = Rng(7);
    (
        host_inputs(&mut rng, INPUT_ELEMS),
        host_inputs(&mut rng, INPUT_ELEMS),
    )
}

#[test]
fn correct_launch_slots_pass() {
    let (a, b) = inputs();
    let good = launch_slots(5000, 300, &a, &b, sentinel(5000));
    check_launches(5000, &good, &a, &b, sentinel(5000)).unwrap();
}

#[test]
fn a_wrong_launch_result_is_named() {
    let (a, b) = inputs();
    let fill = sentinel(3);
    let good = launch_slots(1000, 200, &a, &b, fill);
    // One wrong element in launch 1042's results.
    let mut bad = good.clone();
    bad[42 * SLOT] ^= 1;
    let err = check_launches(1000, &bad, &a, &b, fill).unwrap_err();
    assert!(
        err.starts_with("launch 1042 (") && err.contains("element 0 is"),
        "{err}"
    );
    // A launch wrote one element past its own.
    let slot = (0..200)
        .find(|&s| launch_plan(1000 + s as u64).n < SLOT)
        .expect("a launch over fewer elements than a slot");
    let mut bad = good.clone();
    bad[slot * SLOT + launch_plan(1000 + slot as u64).n] = 12345;
    let err = check_launches(1000, &bad, &a, &b, fill).unwrap_err();
    let name = format!("launch {} (", 1000 + slot);
    assert!(err.starts_with(&name) && err.contains("past its"), "{err}");
    // Launch 1100 never ran: its slot still holds the sentinel.
    let mut bad = good.clone();
    bad[100 * SLOT..101 * SLOT].fill(fill);
    let err = check_launches(1000, &bad, &a, &b, fill).unwrap_err();
    assert!(err.contains("launch 1100"), "{err}");
    // Two launches' results swapped (out of order or to the wrong slot).
    let mut bad = good;
    let (x, y) = bad.split_at_mut(11 * SLOT);
    x[10 * SLOT..].swap_with_slice(&mut y[..SLOT]);
    let err = check_launches(1000, &bad, &a, &b, fill).unwrap_err();
    assert!(err.contains("launch 1010"), "{err}");
}

#[test]
fn replay_slots_are_checked_in_both_outputs() {
    let (src, b) = inputs();
    let (gb, gc) = (&b[..SLOT], &b[SLOT..2 * SLOT]);
    let fill = sentinel(9);
    let count = 40;
    let (mut out, mut out2) = (vec![fill; count * SLOT], vec![fill; count * SLOT]);
    for slot in 0..count {
        let p = replay_plan(64 + slot as u64);
        for i in 0..p.n {
            let x = src[p.src_at + i];
            let m = (x ^ gb[i].wrapping_shl(3)).wrapping_sub(x >> 2);
            out[slot * SLOT + i] = m;
            out2[slot * SLOT + i] = m.wrapping_add(gc[i]);
        }
    }
    check_replays(64, &out, &out2, &src, gb, gc, fill).unwrap();
    // Replay 64 goes through the JIT: a wrong second output is named as such.
    let mut bad = out2.clone();
    bad[3] = bad[3].wrapping_add(1);
    let err = check_replays(64, &out, &bad, &src, gb, gc, fill).unwrap_err();
    assert!(
        err.contains("JIT call 64") && err.contains("second kernel"),
        "{err}"
    );
    let mut bad = out.clone();
    bad[5 * SLOT] = !bad[5 * SLOT];
    let err = check_replays(64, &bad, &out2, &src, gb, gc, fill).unwrap_err();
    assert!(
        err.contains("replay 69") && err.contains("first kernel"),
        "{err}"
    );
    // A replay that did not run.
    let mut bad = out2;
    bad[7 * SLOT..8 * SLOT].fill(fill);
    let err = check_replays(64, &out, &bad, &src, gb, gc, fill).unwrap_err();
    assert!(err.contains("replay 71"), "{err}");
}

#[test]
fn a_corrupted_copy_is_found_inside_and_around_the_region() {
    let round = CopyRound {
        size: 100,
        x_at: 7,
        y_at: 1000,
    };
    let want: Vec<u8> = (0..100 + 2 * GUARD).map(|i| (i * 7) as u8).collect();
    let at = round.y_at - GUARD;
    check_copy(4, &round, at, &want, &want).unwrap();
    let mut got = want.clone();
    got[GUARD + 99] ^= 0x80;
    let err = check_copy(4, &round, at, &got, &want).unwrap_err();
    assert!(err.contains("byte 99 of the 100-byte copy"), "{err}");
    let mut got = want.clone();
    got[GUARD + 100] ^= 1;
    let err = check_copy(4, &round, at, &got, &want).unwrap_err();
    assert!(err.contains("outside the 100-byte copy"), "{err}");
    assert!(check_copy(4, &round, at, &got[1..], &want).is_err());
}

#[test]
fn copy_rounds_stay_inside_the_buffers_and_vary() {
    let mut rng = Rng(3);
    let rounds: Vec<CopyRound> = (0..3000).map(|i| copy_round(i, &mut rng)).collect();
    for r in &rounds {
        assert!(r.size >= 1 && r.x_at + r.size <= COPY_SPACE && r.y_at + r.size <= COPY_SPACE);
    }
    assert!(rounds.iter().any(|r| r.size == 1 || r.size < 8));
    assert!(rounds.iter().filter(|r| r.size >= 16 << 20).count() == 3);
    assert!(rounds.iter().any(|r| r.x_at % 4 != 0));
}

#[test]
fn plans_cover_every_kernel_size_and_workgroup() {
    let plans: Vec<LaunchPlan> = (0..20_000).map(launch_plan).collect();
    for k in IntKernel::ALL {
        assert!(plans.iter().any(|p| p.kernel == k));
    }
    for block in [32, 64, 128] {
        assert!(plans.iter().any(|p| p.block == block));
    }
    assert!(plans.iter().any(|p| p.n == 1) && plans.iter().any(|p| p.n == SLOT));
    assert!(plans
        .iter()
        .all(|p| p.a_at + p.n <= INPUT_ELEMS && p.b_at + p.n <= INPUT_ELEMS));
    let replays: Vec<ReplayPlan> = (0..20_000).map(replay_plan).collect();
    assert!(replays.iter().any(|p| p.n == 1) && replays.iter().any(|p| p.n == SLOT));
    assert!(replays.iter().all(|p| p.src_at + SLOT <= INPUT_ELEMS));
    assert_eq!(replays.iter().filter(|p| p.jit).count(), 20_000 / 16);
}

#[test]
fn growth_beyond_five_percent_fails() {
    let start = Resources {
        rss_kib: 100_000,
        fds: 20,
        mappings: 200,
    };
    let flat = Resources {
        rss_kib: 104_999,
        fds: 20,
        mappings: 210,
    };
    assert!(growth_failures(&start, &flat).is_empty());
    // Exactly 5% more descriptors still passes; one more fails.
    let leaky = Resources {
        rss_kib: 105_100,
        fds: 21,
        mappings: 190,
    };
    let failures = growth_failures(&start, &leaky);
    assert_eq!(failures.len(), 1, "{failures:?}");
    assert!(
        failures[0].contains("resident memory") && failures[0].contains("5.1%"),
        "{failures:?}"
    );
    let leaky = Resources { fds: 22, ..leaky };
    let failures = growth_failures(&start, &leaky);
    assert_eq!(failures.len(), 2, "{failures:?}");
    assert!(
        failures[1].contains("file descriptors") && failures[1].contains("from 20 to 22"),
        "{failures:?}"
    );
    assert_eq!(growth_percent(0, 0), 0.0);
    assert!(growth_percent(0, 1).is_infinite());
}

#[test]
fn new_mappings_are_those_with_a_new_start_address() {
    let start = "55d0-55e0 r--p 00000000 08:01 12 /usr/bin/hcq\n\
                 7f00-7f10 rw-p 00000000 00:00 0\n\
                 7f10-7f40 ---p 00000000 00:00 0\n";
    let end = "55d0-55e0 r--p 00000000 08:01 12 /usr/bin/hcq\n\
               7f00-7f20 rw-p 00000000 00:00 0\n\
               7f20-7f40 ---p 00000000 00:00 0\n\
               7f80-7f81 ---p 00000000 00:00 0\n";
    assert_eq!(
        new_mappings(start, end),
        [
            "7f20-7f40 ---p 00000000 00:00 0",
            "7f80-7f81 ---p 00000000 00:00 0"
        ]
    );
    assert!(new_mappings(end, end).is_empty());
}

#[test]
fn resources_are_read_from_proc() {
    let r = resources().unwrap();
    // Other tests run in this process at the same time, so only the orders of magnitude
    // are certain: a few descriptors, some mappings, some resident memory.
    assert!(r.rss_kib > 100 && r.fds >= 3 && r.mappings > 10, "{r:?}");
}
