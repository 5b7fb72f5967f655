//! `hcq bench copy`: copy throughput against host memcpy measured in the same run.

use crate::bench::{Figure, Spread};
use std::time::{Duration, Instant};

fn gbps(bytes: usize, t: Duration) -> f64 {
    bytes as f64 / t.as_secs_f64().max(1e-12) / 1e9
}

/// Repetitions of each copy and of the memcpy baseline.
const RUNS: usize = 3;

/// The throughput of `bytes` in each of `runs` timed runs of `f`, in GB/s.
fn repeated<F: FnMut() -> Result<Duration, String>>(
    bytes: usize,
    runs: usize,
    mut f: F,
) -> Result<Vec<f64>, String> {
    (0..runs).map(|_| f().map(|t| gbps(bytes, t))).collect()
}

/// Copy-in, copy-out and device-to-device throughput for `mib` MiB, each with host memcpy of
/// the same size as its baseline. Copy-in and copy-out are measured twice: warm (the device
/// buffer and the host buffer have been written before, as in a loop that reuses them) and at
/// first touch (a new device buffer, or a new host buffer to copy out into, whose pages are
/// faulted in by the copy itself). Results are checked, so a fast wrong copy cannot pass.
pub fn copy(device: Option<&str>, mib: usize) -> Result<Vec<Figure>, String> {
    let e = |e: hcq::Error| e.to_string();
    let n = mib.max(1) << 20;
    let dev = crate::open_device(device).map_err(e)?;
    let src: Vec<u8> = (0..n)
        .map(|i| (i.wrapping_mul(2654435761) >> 13) as u8)
        .collect();
    let mut dst = vec![0u8; n];

    let memcpy = repeated(n, RUNS, || {
        let t = Instant::now();
        dst.copy_from_slice(std::hint::black_box(&src));
        std::hint::black_box(&dst);
        Ok(t.elapsed())
    })?;
    let base = Spread::of(&memcpy).median;

    // First touch: each run copies into a buffer whose memory has never been used (the
    // allocator's cache of dropped buffers is emptied first, or it would hand back warm
    // memory).
    let copy_in_first = repeated(n, RUNS, || {
        dev.free_cached().map_err(e)?;
        let fresh = dev.alloc(n).map_err(e)?;
        dev.synchronize().map_err(e)?;
        let t = Instant::now();
        fresh.copy_in(0, &src).map_err(e)?;
        dev.synchronize().map_err(e)?;
        Ok(t.elapsed())
    })?;
    let buf = dev.alloc(n).map_err(e)?;
    buf.copy_in(0, &src).map_err(e)?;
    let copy_in = repeated(n, RUNS, || {
        dev.synchronize().map_err(e)?;
        let t = Instant::now();
        buf.copy_in(0, &src).map_err(e)?;
        dev.synchronize().map_err(e)?;
        Ok(t.elapsed())
    })?;
    let mut first_out_ok = true;
    let copy_out_first = repeated(n, RUNS, || {
        dev.synchronize().map_err(e)?;
        // A new host allocation: its pages are mapped as the copy writes them.
        let mut fresh = vec![0u8; n];
        let t = Instant::now();
        buf.copy_out(0, &mut fresh).map_err(e)?;
        let elapsed = t.elapsed();
        first_out_ok &= fresh == src;
        Ok(elapsed)
    })?;
    dst.fill(0);
    let copy_out = repeated(n, RUNS, || {
        dev.synchronize().map_err(e)?;
        let t = Instant::now();
        buf.copy_out(0, &mut dst).map_err(e)?;
        Ok(t.elapsed())
    })?;
    if dst != src || !first_out_ok {
        return Err("copy-out returned different bytes than copy-in wrote".into());
    }

    // Device to device: to a second GPU when there is one, else within the device.
    let other = hcq::list_devices()
        .into_iter()
        .filter(|d| d.unusable.is_none())
        .map(|d| d.name)
        .find(|n| n != dev.name() && n.starts_with(dev.name().split(':').next().unwrap_or("")));
    let (target, label) = match other {
        Some(name) => (hcq::Device::open(&name).map_err(e)?, "d2d_other_gpu"),
        None => (dev.clone(), "d2d_same_gpu"),
    };
    let dbuf = target.alloc(n).map_err(e)?;
    let d2d = repeated(n, RUNS, || {
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
    Ok(vec![
        Figure::new(format!("copy_in_{mib}mib"), "GB/s", &copy_in, base),
        Figure::new(format!("copy_out_{mib}mib"), "GB/s", &copy_out, base),
        Figure::new(
            format!("copy_in_first_touch_{mib}mib"),
            "GB/s",
            &copy_in_first,
            base,
        ),
        Figure::new(
            format!("copy_out_first_touch_{mib}mib"),
            "GB/s",
            &copy_out_first,
            base,
        ),
        Figure::new(format!("{label}_{mib}mib"), "GB/s", &d2d, base),
    ])
}
