//! `hcq bench copy`: copy throughput against host memcpy measured in the same run.

use crate::bench::Figure;
use std::time::{Duration, Instant};

fn gbps(bytes: usize, t: Duration) -> f64 {
    bytes as f64 / t.as_secs_f64().max(1e-12) / 1e9
}

fn best_of<F: FnMut() -> Result<Duration, String>>(
    runs: usize,
    mut f: F,
) -> Result<Duration, String> {
    let mut best = Duration::MAX;
    for _ in 0..runs {
        best = best.min(f()?);
    }
    Ok(best)
}

/// Copy-in, copy-out and device-to-device throughput for `mib` MiB, each with host memcpy of
/// the same size as its baseline. Results are checked, so a fast wrong copy cannot pass.
pub fn copy(device: Option<&str>, mib: usize) -> Result<Vec<Figure>, String> {
    let e = |e: hcq::Error| e.to_string();
    let n = mib.max(1) << 20;
    let dev = crate::open_device(device).map_err(e)?;
    let src: Vec<u8> = (0..n)
        .map(|i| (i.wrapping_mul(2654435761) >> 13) as u8)
        .collect();
    let mut dst = vec![0u8; n];

    let memcpy = best_of(3, || {
        let t = Instant::now();
        dst.copy_from_slice(std::hint::black_box(&src));
        std::hint::black_box(&dst);
        Ok(t.elapsed())
    })?;
    let base = gbps(n, memcpy);

    let buf = dev.alloc(n).map_err(e)?;
    let copy_in = best_of(3, || {
        dev.synchronize().map_err(e)?;
        let t = Instant::now();
        buf.copy_in(0, &src).map_err(e)?;
        dev.synchronize().map_err(e)?;
        Ok(t.elapsed())
    })?;
    dst.fill(0);
    let copy_out = best_of(3, || {
        dev.synchronize().map_err(e)?;
        let t = Instant::now();
        buf.copy_out(0, &mut dst).map_err(e)?;
        Ok(t.elapsed())
    })?;
    if dst != src {
        return Err("copy-out returned different bytes than copy-in wrote".into());
    }

    // Device to device: to a second GPU when there is one, else within the device.
    let other = hcq::list_devices()
        .into_iter()
        .map(|d| d.name)
        .find(|n| n != dev.name() && n.starts_with(dev.name().split(':').next().unwrap_or("")));
    let (target, label) = match other {
        Some(name) => (hcq::Device::open(&name).map_err(e)?, "d2d_other_gpu"),
        None => (dev.clone(), "d2d_same_gpu"),
    };
    let dbuf = target.alloc(n).map_err(e)?;
    let d2d = best_of(3, || {
        dev.synchronize().map_err(e)?;
        target.synchronize().map_err(e)?;
        let t = Instant::now();
        buf.copy_to(0, &dbuf, 0, n).map_err(e)?;
        target.synchronize().map_err(e)?;
        Ok(t.elapsed())
    })?;
    dst.fill(0);
    dbuf.copy_out(0, &mut dst).map_err(e)?;
    if dst != src {
        return Err("device-to-device copy produced different bytes".into());
    }
    let fig = |name: String, t: Duration| {
        let v = gbps(n, t);
        Figure {
            name,
            value: v,
            unit: "GB/s",
            baseline: base,
            ratio: v / base.max(1e-12),
        }
    };
    Ok(vec![
        fig(format!("copy_in_{mib}mib"), copy_in),
        fig(format!("copy_out_{mib}mib"), copy_out),
        fig(format!("{label}_{mib}mib"), d2d),
    ])
}
