//! The process's resources the soak compares between its start and its end.

use super::MAX_GROWTH_PERCENT;

/// The process's resident memory, open file descriptors and memory mappings.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Resources {
    pub(super) rss_kib: u64,
    pub(super) fds: u64,
    pub(super) mappings: u64,
}

pub(super) fn resources() -> Result<Resources, String> {
    let status = std::fs::read_to_string("/proc/self/status")
        .map_err(|e| format!("reading /proc/self/status (soak needs Linux's /proc): {e}"))?;
    let rss_kib = status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().strip_suffix("kB"))
        .and_then(|v| v.trim().parse().ok())
        .ok_or("no VmRSS line in /proc/self/status")?;
    let fds = std::fs::read_dir("/proc/self/fd")
        .map_err(|e| format!("listing /proc/self/fd: {e}"))?
        .count() as u64;
    let mappings = std::fs::read_to_string("/proc/self/maps")
        .map_err(|e| format!("reading /proc/self/maps: {e}"))?
        .lines()
        .count() as u64;
    Ok(Resources {
        rss_kib,
        fds,
        mappings,
    })
}

/// Growth from `start` to `end`, in percent.
pub(super) fn growth_percent(start: u64, end: u64) -> f64 {
    if start == 0 {
        if end == 0 {
            0.0
        } else {
            f64::INFINITY
        }
    } else {
        (end as f64 - start as f64) * 100.0 / start as f64
    }
}

/// `(name, unit, start, end)` of each figure.
pub(super) fn resource_rows(
    start: &Resources,
    end: &Resources,
) -> [(&'static str, &'static str, u64, u64); 3] {
    [
        ("rss", "KiB", start.rss_kib, end.rss_kib),
        ("fds", "count", start.fds, end.fds),
        ("mappings", "count", start.mappings, end.mappings),
    ]
}

/// One sentence per figure that grew by more than `MAX_GROWTH_PERCENT`.
pub(super) fn growth_failures(start: &Resources, end: &Resources) -> Vec<String> {
    let what = |name: &str| match name {
        "rss" => "resident memory (KiB)",
        "fds" => "open file descriptors",
        _ => "memory mappings",
    };
    resource_rows(start, end)
        .iter()
        .filter(|(_, _, s, e)| growth_percent(*s, *e) > MAX_GROWTH_PERCENT)
        .map(|(name, _, s, e)| {
            format!(
                "{} grew by {:.1}% from {s} to {e}, more than {MAX_GROWTH_PERCENT}%",
                what(name),
                growth_percent(*s, *e)
            )
        })
        .collect()
}

pub(super) fn read_maps() -> Result<String, String> {
    std::fs::read_to_string("/proc/self/maps").map_err(|e| format!("reading /proc/self/maps: {e}"))
}

/// The lines of `end` (a `/proc/self/maps` text) whose start address no line of `start` has:
/// the mappings made in between (a mapping that only grew or shrank keeps its start).
pub(super) fn new_mappings<'a>(start: &str, end: &'a str) -> Vec<&'a str> {
    let address = |l: &str| l.split('-').next().unwrap_or("").to_string();
    let before: std::collections::HashSet<String> = start.lines().map(address).collect();
    end.lines()
        .filter(|l| !before.contains(&address(l)))
        .collect()
}
