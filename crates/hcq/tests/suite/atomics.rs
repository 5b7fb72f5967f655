//! atomics.hip: global and LDS atomics; every check is independent of lane order.

use crate::common::*;
use crate::ATOMICS;
use hcq::Arg;

const LOCAL: u32 = 64;

#[test]
fn atomic_global_i32() {
    let n = 2000;
    let mut rng = Rng::new(601);
    // |x| < 2^18 keeps the kernel's compare-and-swap sum (x * 3 over all lanes) in range.
    let a: Vec<i32> = (0..n)
        .map(|_| rng.range(-(1 << 18), 1 << 18) as i32)
        .collect();
    let init = [0, 0, 0, i32::MIN, i32::MAX, 0, -1, 0, -1, 0, 0, -5];
    let (c, old, ba) = (upload(&init), filled(2 * n, 0x5a5a5a5ai32), upload(&a));
    run(
        ATOMICS,
        "atomic_global_i32",
        &[
            Arg::Buffer(&c),
            Arg::Buffer(&old),
            Arg::Buffer(&ba),
            Arg::I32(n as i32),
        ],
        groups(n, LOCAL),
        [LOCAL, 1, 1],
    );
    let (gc, gold): (Vec<i32>, Vec<i32>) = (read(&c), read(&old));
    let sum = a.iter().fold(0i32, |s, &v| s.wrapping_add(v));
    let want = [
        n as i32,
        sum,
        sum.wrapping_neg(),
        *a.iter().max().unwrap(),
        *a.iter().min().unwrap(),
        a.iter().map(|&v| v as u32).max().unwrap() as i32,
        a.iter().map(|&v| v as u32).min().unwrap() as i32,
        (0..n).fold(0u32, |s, i| s | (1 << (i & 31))) as i32,
        a.iter().fold(-1i32, |s, &v| s & !(1 << (v & 31))),
        a.iter().fold(0i32, |s, &v| s ^ v),
        a.iter().fold(0i32, |s, &v| s.wrapping_add(v * 3)),
    ];
    let names = [
        "add(rtn)",
        "add",
        "sub",
        "max",
        "min",
        "umax",
        "umin",
        "or",
        "and",
        "xor",
        "cmpswap loop",
    ];
    let mut ck = Check::new("atomic_global_i32");
    for k in 0..want.len() {
        ck.eq(gc[k], want[k], || format!("counter {k} ({})", names[k]));
    }
    let mut returned: Vec<i32> = gold[..n].to_vec();
    returned.sort_unstable();
    ck.eq(returned, (0..n as i32).collect(), || {
        "values returned by fetch_add(1) are 0..n".into()
    });
    let mut swapped: Vec<i32> = gold[n..].to_vec();
    swapped.push(gc[11]);
    swapped.sort_unstable();
    let mut want_swapped: Vec<i32> = (0..n as i32).collect();
    want_swapped.push(-5);
    want_swapped.sort_unstable();
    ck.eq(swapped, want_swapped, || {
        "exchange: returned values plus final = initial plus all indices".into()
    });
    ck.finish();
}

#[test]
fn atomic_global_i64() {
    let n = 1500;
    let mut rng = Rng::new(602);
    let a: Vec<i64> = (0..n).map(|_| rng.i64_varied() >> 4).collect();
    let init = [0, i64::MIN, i64::MAX, 0, -1, 0x1234, 0];
    let (c, old, ba) = (upload(&init), filled(n, 0x5a5a5a5a5a5a5a5ai64), upload(&a));
    run(
        ATOMICS,
        "atomic_global_i64",
        &[
            Arg::Buffer(&c),
            Arg::Buffer(&old),
            Arg::Buffer(&ba),
            Arg::I32(n as i32),
        ],
        groups(n, LOCAL),
        [LOCAL, 1, 1],
    );
    let (gc, gold): (Vec<i64>, Vec<i64>) = (read(&c), read(&old));
    let want = [
        a.iter().fold(0i64, |s, &v| s.wrapping_add(v)),
        *a.iter().max().unwrap(),
        *a.iter().min().unwrap(),
        a.iter().map(|&v| v as u64).max().unwrap() as i64,
        a.iter().map(|&v| v as u64).min().unwrap() as i64,
        a.iter().fold(0x1234i64, |s, &v| s ^ v.wrapping_mul(7)),
        (n as i64) << 33,
    ];
    let names = [
        "add",
        "max",
        "min",
        "umax",
        "umin",
        "cmpswap loop",
        "add(rtn)",
    ];
    let mut ck = Check::new("atomic_global_i64");
    for k in 0..want.len() {
        ck.eq(gc[k], want[k], || format!("counter {k} ({})", names[k]));
    }
    let mut returned = gold.clone();
    returned.sort_unstable();
    ck.eq(returned, (0..n as i64).map(|k| k << 33).collect(), || {
        "values returned by fetch_add(2^33)".into()
    });
    ck.finish();
}

#[test]
fn atomic_global_float() {
    let n = 1800;
    let mut rng = Rng::new(603);
    let a: Vec<f32> = (0..n).map(|_| rng.range(-400, 400) as f32 * 0.25).collect();
    let init = [0.0f32, 0.0, 0.0, f32::NEG_INFINITY, f32::INFINITY];
    let (cf, cd, old, ba) = (
        upload(&init),
        filled(1, 0.0f64),
        filled(n, f32::NAN),
        upload(&a),
    );
    run(
        ATOMICS,
        "atomic_global_float",
        &[
            Arg::Buffer(&cf),
            Arg::Buffer(&cd),
            Arg::Buffer(&old),
            Arg::Buffer(&ba),
            Arg::I32(n as i32),
        ],
        groups(n, LOCAL),
        [LOCAL, 1, 1],
    );
    let (gf, gd, gold): (Vec<f32>, Vec<f64>, Vec<f32>) = (read(&cf), read(&cd), read(&old));
    let sum: f64 = a.iter().map(|&v| v as f64).sum();
    let mut ck = Check::new("atomic_global_float");
    ck.f32(gf[0], sum as f32, || {
        "global_atomic_add_f32 (no return) sum".into()
    });
    ck.f32(gf[1], n as f32, || {
        "global_atomic_add_f32 (return) count".into()
    });
    ck.f32(gf[2], sum as f32, || "f32 add (cmpswap loop) sum".into());
    ck.f32(
        gf[3],
        a.iter().copied().fold(f32::NEG_INFINITY, f32::max),
        || "f32 max".into(),
    );
    ck.f32(
        gf[4],
        a.iter().copied().fold(f32::INFINITY, f32::min),
        || "f32 min".into(),
    );
    ck.f64(gd[0], sum * 0.5, || "f64 add (cmpswap_b64 loop)".into());
    let mut returned: Vec<i64> = gold.iter().map(|&v| v as i64).collect();
    returned.sort_unstable();
    ck.eq(returned, (0..n as i64).collect(), || {
        "values returned by fadd(1.0) are 0..n".into()
    });
    ck.finish();
}

#[test]
fn atomic_lds() {
    let n: usize = 1000;
    let local = 96usize; // three waves per workgroup; 11 workgroups, the last one partial
    let mut rng = Rng::new(604);
    let a: Vec<i32> = (0..n).map(|_| rng.i32()).collect();
    let g = n.div_ceil(local);
    let (out, old, ba) = (
        filled(g * 13, 0x5a5a5a5ai32),
        filled(2 * n, 0x5a5a5a5ai32),
        upload(&a),
    );
    run(
        ATOMICS,
        "atomic_lds",
        &[
            Arg::Buffer(&out),
            Arg::Buffer(&old),
            Arg::Buffer(&ba),
            Arg::I32(n as i32),
        ],
        groups(n, local as u32),
        [local as u32, 1, 1],
    );
    let (got, gold): (Vec<i32>, Vec<i32>) = (read(&out), read(&old));
    let mut ck = Check::new("atomic_lds");
    for (k, xs) in a.chunks(local).enumerate() {
        let base = k * local;
        let sum = xs.iter().fold(0i32, |s, &v| s.wrapping_add(v));
        let want = [
            xs.len() as i32,
            sum,
            sum.wrapping_neg(),
            xs.iter().copied().fold(0, i32::max),
            xs.iter().copied().fold(i32::MAX, i32::min),
            xs.iter().map(|&v| v as u32).fold(0, u32::max) as i32,
            xs.iter().map(|&v| v as u32).fold(u32::MAX, u32::min) as i32,
            xs.iter().fold(0i32, |s, &v| s | (1 << (v & 31))),
            xs.iter().fold(-1i32, |s, &v| s & !(1 << ((v >> 5) & 31))),
            xs.iter().fold(0i32, |s, &v| s ^ v),
            xs.iter().map(|&v| v & 0xff).sum::<i32>(),
        ];
        let names = [
            "add(rtn)",
            "add",
            "sub",
            "max",
            "min",
            "umax",
            "umin",
            "or",
            "and",
            "xor",
            "cmpstore loop",
        ];
        for j in 0..want.len() {
            ck.eq(got[k * 13 + j], want[j], || {
                format!("workgroup {k} word {j} ({})", names[j])
            });
        }
        let fsum: f64 = xs.iter().map(|&v| (v & 0xff) as f64 * 0.25).sum();
        ck.f32(f32::from_bits(got[k * 13 + 12] as u32), fsum as f32, || {
            format!("workgroup {k} ds_add_f32")
        });
        let mut returned: Vec<i32> = gold[base..base + xs.len()].to_vec();
        returned.sort_unstable();
        ck.eq(returned, (0..xs.len() as i32).collect(), || {
            format!("workgroup {k}: values returned by ds_add_rtn_u32")
        });
        let mut swapped: Vec<i32> = gold[n + base..n + base + xs.len()].to_vec();
        swapped.push(got[k * 13 + 11]);
        swapped.sort_unstable();
        let mut want_swapped: Vec<i32> = (base as i32..(base + xs.len()) as i32).collect();
        want_swapped.push(0);
        want_swapped.sort_unstable();
        ck.eq(swapped, want_swapped, || {
            format!("workgroup {k}: ds_storexchg returned values plus final")
        });
    }
    ck.finish();
}

#[test]
fn atomic_compact() {
    let n = 2500;
    let mut rng = Rng::new(605);
    let a: Vec<u32> = (0..n).map(|_| rng.u32()).collect();
    let (out, count, ba) = (filled(n, 0x5a5a5a5au32), filled(1, 0u32), upload(&a));
    run(
        ATOMICS,
        "atomic_compact",
        &[
            Arg::Buffer(&out),
            Arg::Buffer(&count),
            Arg::Buffer(&ba),
            Arg::I32(n as i32),
        ],
        groups(n, LOCAL),
        [LOCAL, 1, 1],
    );
    let (got, gcount): (Vec<u32>, Vec<u32>) = (read(&out), read(&count));
    let mut want: Vec<u32> = a.iter().copied().filter(|v| v % 3 == 0).collect();
    want.sort_unstable();
    let mut ck = Check::new("atomic_compact");
    ck.eq(gcount[0] as usize, want.len(), || {
        "number of kept elements".into()
    });
    let mut kept: Vec<u32> = got[..(gcount[0] as usize).min(n)].to_vec();
    kept.sort_unstable();
    ck.eq(kept, want, || "kept elements (as a multiset)".into());
    ck.finish();
}
