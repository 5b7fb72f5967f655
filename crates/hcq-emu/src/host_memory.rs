//! How much host memory the emulator may back GPU memory with.
//!
//! Emulated VRAM and GTT are host memory (shared anonymous mappings made without a swap
//! reservation), so the kernel does not refuse them when they are mapped: it kills the process
//! when they are touched and the host has run out. The emulator therefore refuses, with
//! `ENOMEM`, an allocation the host cannot back, judged from every limit that applies to the
//! process, re-read at each allocation:
//!
//! - cgroup v2: `memory.max` against `memory.current` of the process's cgroup and of each of
//!   its ancestors that sets a limit;
//! - cgroup v1: the memory controller's effective limit (`hierarchical_memory_limit`, else
//!   `memory.limit_in_bytes`) against `memory.usage_in_bytes`;
//! - the machine: `MemTotal` against what `MemAvailable` leaves;
//! - `RLIMIT_AS` against the process's address space (`VmSize`) and `RLIMIT_DATA` against its
//!   data (`VmData`), when set.
//!
//! The policy ([`admit`]), a pure function of these readings: the emulator holds at most half of
//! any limit, and one allocation takes at most half of what is free under it, so the program
//! keeps as much again for its own copies of the data (a buffer is usually read into or
//! written from host memory of the same size). Memory the emulator has promised but the
//! program has not touched yet is not in the usage figures; it is counted as used (what the
//! emulator backs, less the shared memory the readings already count, is untouched at most).
//! Address-space limits count reservations already, so nothing is added to them.

use std::fmt;
use std::sync::Mutex;

/// One limit on the process's memory and how much of it is in use.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Limit {
    /// Where the figures come from, for messages.
    pub source: String,
    /// The limit, in bytes.
    pub limit: u64,
    /// Bytes of the limit in use when it was read (how they are counted depends on `kind`).
    pub used: u64,
    /// Whether the limit counts resident memory or address space.
    pub kind: LimitKind,
}

/// What a limit counts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LimitKind {
    /// Memory actually in use: pages the emulator has handed out but nobody has touched are
    /// not in `used` yet. `shmem`, when known, is the shared memory `used` includes (where
    /// touched emulator pages are counted).
    Resident {
        /// Bytes of shared memory counted in `used` (`Shmem`/`shmem` of the source's
        /// statistics); `None` when the source does not report it, in which case all the
        /// emulator backs is taken as untouched.
        shmem: Option<u64>,
    },
    /// Address space (or data segment): counts mappings when they are made.
    Virtual,
}

/// An allocation the host cannot back.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Shortage {
    /// Bytes the refused allocation asked for.
    pub requested: u64,
    /// The most [`admit`] would have granted.
    pub available: u64,
    /// The limit that binds.
    pub limit: Limit,
}

impl fmt::Display for Shortage {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "the host's memory cannot back {} of emulated GPU memory: {} available under {} \
             (limit {}, {} in use; the emulator holds at most half of a limit and takes at \
             most half of what is free)",
            bytes(self.requested),
            bytes(self.available),
            self.limit.source,
            bytes(self.limit.limit),
            bytes(self.limit.used),
        )
    }
}

/// `n` bytes, with a binary unit when that is shorter.
pub fn bytes(n: u64) -> String {
    const UNITS: [(&str, u32); 4] = [("TiB", 40), ("GiB", 30), ("MiB", 20), ("KiB", 10)];
    for (unit, shift) in UNITS {
        if n >= 1 << shift {
            return format!(
                "{n} bytes ({:.1} {unit})",
                n as f64 / (1u64 << shift) as f64
            );
        }
    }
    format!("{n} bytes")
}

/// How much more the emulator, which backs `backed` bytes now, may back under `limit`.
fn room(limit: &Limit, backed: u64) -> u64 {
    let untouched = match limit.kind {
        LimitKind::Resident { shmem } => backed.saturating_sub(shmem.unwrap_or(0)),
        LimitKind::Virtual => 0,
    };
    let free = limit
        .limit
        .saturating_sub(limit.used)
        .saturating_sub(untouched);
    (limit.limit / 2).saturating_sub(backed).min(free / 2)
}

/// The limit that leaves the least room, and that room; `None` when nothing limits.
fn tightest(limits: &[Limit], backed: u64) -> Option<(u64, &Limit)> {
    limits
        .iter()
        .map(|l| (room(l, backed), l))
        .min_by_key(|&(r, _)| r)
}

/// The most the emulator, backing `backed` bytes now, may back more (`u64::MAX` when no
/// limit applies).
pub fn available(limits: &[Limit], backed: u64) -> u64 {
    tightest(limits, backed).map_or(u64::MAX, |(room, _)| room)
}

/// Whether the emulator, backing `backed` bytes now, may back `requested` more.
pub fn admit(limits: &[Limit], backed: u64, requested: u64) -> Result<(), Shortage> {
    match tightest(limits, backed) {
        Some((available, limit)) if requested > available => Err(Shortage {
            requested,
            available,
            limit: limit.clone(),
        }),
        _ => Ok(()),
    }
}

/// The VRAM an emulated GPU reports: what was configured, but no more than the emulator may
/// hold under the tightest limit (half of it), in whole MiB, and at least one page.
pub fn vram_for(configured: u64, limits: &[Limit]) -> u64 {
    let cap = limits.iter().map(|l| l.limit / 2).min().unwrap_or(u64::MAX);
    if configured <= cap {
        return configured;
    }
    (cap & !((1 << 20) - 1)).max(4096)
}

/// Values of `key` lines (`MemTotal:  24683568 kB`, `shmem 4096`), in bytes when a `kB`
/// follows.
fn field(text: &str, key: &str) -> Option<u64> {
    text.lines().find_map(|line| {
        let mut words = line.split_whitespace();
        let name = words.next()?.trim_end_matches(':');
        if name != key {
            return None;
        }
        let value: u64 = words.next()?.parse().ok()?;
        match words.next() {
            Some("kB") => value.checked_mul(1024),
            _ => Some(value),
        }
    })
}

/// The machine's memory from `/proc/meminfo`.
pub fn meminfo_limit(meminfo: &str) -> Option<Limit> {
    let total = field(meminfo, "MemTotal")?;
    let available = field(meminfo, "MemAvailable")?;
    Some(Limit {
        source: "the machine's memory (/proc/meminfo MemAvailable)".into(),
        limit: total,
        used: total.saturating_sub(available),
        kind: LimitKind::Resident {
            shmem: field(meminfo, "Shmem"),
        },
    })
}

/// cgroup v1 reports "no limit" as a number near `i64::MAX`.
const V1_UNLIMITED: u64 = 1 << 62;

/// The cgroup mounts of `/proc/self/mountinfo`: (mount point, root inside the hierarchy,
/// whether it is cgroup v2). v1 mounts are listed only with the memory controller.
fn cgroup_mounts(mountinfo: &str) -> Vec<(String, String, bool)> {
    mountinfo
        .lines()
        .filter_map(|line| {
            let (left, right) = line.split_once(" - ")?;
            let left: Vec<&str> = left.split_whitespace().collect();
            let right: Vec<&str> = right.split_whitespace().collect();
            let (root, point) = (*left.get(3)?, *left.get(4)?);
            match *right.first()? {
                "cgroup2" => Some((point.to_string(), root.to_string(), true)),
                "cgroup" if right.get(2)?.split(',').any(|o| o == "memory") => {
                    Some((point.to_string(), root.to_string(), false))
                }
                _ => None,
            }
        })
        .collect()
}

/// The directory of `cgroup` (a path in the hierarchy) under a mount of its `root`.
fn cgroup_dir(point: &str, root: &str, cgroup: &str) -> Option<String> {
    let rel = if root == "/" {
        cgroup
    } else {
        cgroup.strip_prefix(root)?
    };
    let rel = rel.trim_start_matches('/');
    Some(if rel.is_empty() {
        point.to_string()
    } else {
        format!("{}/{rel}", point.trim_end_matches('/'))
    })
}

/// The cgroup limits on this process, from `/proc/self/cgroup`, `/proc/self/mountinfo` and
/// the cgroup files, all read through `read` (a path to its contents, `None` if unreadable).
pub fn cgroup_limits(read: &dyn Fn(&str) -> Option<String>) -> Vec<Limit> {
    let Some(membership) = read("/proc/self/cgroup") else {
        return Vec::new();
    };
    cgroup_limits_in(&cgroup_dirs(&membership, read), read)
}

/// A directory whose memory files bound this process: cgroup v2 (`memory.max`,
/// `memory.current`) or v1 (`memory.limit_in_bytes`, `memory.usage_in_bytes`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CgroupDir {
    /// Absolute path of the cgroup's directory under its cgroupfs mount point.
    pub path: String,
    /// Whether it is a cgroup v2 directory (else a cgroup v1 memory-controller one), which
    /// decides the names of the files read for its limit and usage.
    pub v2: bool,
}

/// The cgroup directories bounding a process with cgroup `membership` (the text of
/// `/proc/self/cgroup`): its own v2 cgroup and every ancestor up to the mount point, and its
/// v1 memory cgroup. Finding them reads `/proc/self/mountinfo`, the costly part of a check,
/// which is why [`current_limits`] keeps them for as long as the membership is unchanged.
pub fn cgroup_dirs(membership: &str, read: &dyn Fn(&str) -> Option<String>) -> Vec<CgroupDir> {
    let Some(mountinfo) = read("/proc/self/mountinfo") else {
        return Vec::new();
    };
    let mut v2_path = None;
    let mut v1_path = None;
    for line in membership.lines() {
        let mut parts = line.splitn(3, ':');
        let (Some(_), Some(controllers), Some(path)) = (parts.next(), parts.next(), parts.next())
        else {
            continue;
        };
        if controllers.is_empty() {
            v2_path = Some(path);
        } else if controllers.split(',').any(|c| c == "memory") {
            v1_path = Some(path);
        }
    }
    let mut dirs = Vec::new();
    for (point, root, v2) in cgroup_mounts(&mountinfo) {
        let cgroup = if v2 { v2_path } else { v1_path };
        let Some(dir) = cgroup.and_then(|p| cgroup_dir(&point, &root, p)) else {
            continue;
        };
        if !v2 {
            dirs.push(CgroupDir { path: dir, v2 });
            continue;
        }
        // The process's own cgroup, then each ancestor up to the mount point.
        let mut at = dir.as_str();
        loop {
            dirs.push(CgroupDir {
                path: at.to_string(),
                v2,
            });
            match at.rsplit_once('/') {
                Some((parent, _)) if at.len() > point.len() && parent.len() >= point.len() => {
                    at = parent
                }
                _ => break,
            }
        }
    }
    dirs
}

/// The limits set in `dirs` now, read through `read`.
pub fn cgroup_limits_in(dirs: &[CgroupDir], read: &dyn Fn(&str) -> Option<String>) -> Vec<Limit> {
    let mut limits = Vec::new();
    for CgroupDir { path, v2 } in dirs {
        if *v2 {
            let max = read(&format!("{path}/memory.max"));
            let limit = max.as_deref().and_then(|m| m.trim().parse::<u64>().ok());
            let used =
                read(&format!("{path}/memory.current")).and_then(|c| c.trim().parse::<u64>().ok());
            if let (Some(limit), Some(used)) = (limit, used) {
                let stat = read(&format!("{path}/memory.stat")).unwrap_or_default();
                limits.push(Limit {
                    source: format!("cgroup v2 {path}/memory.max"),
                    limit,
                    used,
                    kind: LimitKind::Resident {
                        shmem: field(&stat, "shmem"),
                    },
                });
            }
        } else {
            let dir = path;
            let stat = read(&format!("{dir}/memory.stat")).unwrap_or_default();
            let own = read(&format!("{dir}/memory.limit_in_bytes"))
                .and_then(|l| l.trim().parse::<u64>().ok());
            let limit = field(&stat, "hierarchical_memory_limit")
                .into_iter()
                .chain(own)
                .min();
            let used = read(&format!("{dir}/memory.usage_in_bytes"))
                .and_then(|u| u.trim().parse::<u64>().ok());
            if let (Some(limit), Some(used)) = (limit, used) {
                if limit < V1_UNLIMITED {
                    limits.push(Limit {
                        source: format!("cgroup v1 {dir}/memory.limit_in_bytes"),
                        limit,
                        used,
                        kind: LimitKind::Resident {
                            shmem: field(&stat, "total_shmem").or(field(&stat, "shmem")),
                        },
                    });
                }
            }
        }
    }
    limits
}

/// `RLIMIT_AS` and `RLIMIT_DATA` (soft limits; `None` when unlimited) against `VmSize` and
/// `VmData` of `/proc/self/status`.
pub fn rlimit_limits(address_space: Option<u64>, data: Option<u64>, status: &str) -> Vec<Limit> {
    let mut limits = Vec::new();
    for (limit, key, name) in [
        (address_space, "VmSize", "RLIMIT_AS"),
        (data, "VmData", "RLIMIT_DATA"),
    ] {
        if let (Some(limit), Some(used)) = (limit, field(status, key)) {
            limits.push(Limit {
                source: format!("{name} (against {key})"),
                limit,
                used,
                kind: LimitKind::Virtual,
            });
        }
    }
    limits
}

fn soft_rlimit(resource: libc::__rlimit_resource_t) -> Option<u64> {
    let mut r = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: `r` is a valid, writable `rlimit` for the duration of the call.
    let ok = unsafe { libc::getrlimit(resource, &mut r) } == 0;
    (ok && r.rlim_cur != libc::RLIM_INFINITY).then_some(r.rlim_cur)
}

/// Every limit on this process now.
pub fn current_limits() -> Vec<Limit> {
    // (membership, its directories), reused while `/proc/self/cgroup` reads the same.
    static DIRS: Mutex<Option<(String, Vec<CgroupDir>)>> = Mutex::new(None);
    let read = |path: &str| std::fs::read_to_string(path).ok();
    let mut limits = match read("/proc/self/cgroup") {
        Some(membership) => {
            let mut cached = DIRS.lock().unwrap_or_else(|e| e.into_inner());
            if cached.as_ref().is_none_or(|(m, _)| *m != membership) {
                let dirs = cgroup_dirs(&membership, &read);
                *cached = Some((membership, dirs));
            }
            let dirs = cached.as_ref().map(|(_, d)| d.clone()).unwrap_or_default();
            drop(cached);
            cgroup_limits_in(&dirs, &read)
        }
        None => Vec::new(),
    };
    limits.extend(read("/proc/meminfo").as_deref().and_then(meminfo_limit));
    limits.extend(rlimit_limits(
        soft_rlimit(libc::RLIMIT_AS),
        soft_rlimit(libc::RLIMIT_DATA),
        &read("/proc/self/status").unwrap_or_default(),
    ));
    limits
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    const GIB: u64 = 1 << 30;
    const MIB: u64 = 1 << 20;

    fn resident(limit: u64, used: u64, shmem: Option<u64>) -> Limit {
        Limit {
            source: "test".into(),
            limit,
            used,
            kind: LimitKind::Resident { shmem },
        }
    }

    #[test]
    fn an_allocation_takes_at_most_half_of_what_is_free() {
        // 2 GiB limit, 100 MiB used, nothing backed: 974 MiB may be taken, not 1.5 GiB.
        let l = [resident(2 * GIB, 100 * MIB, Some(0))];
        let e = admit(&l, 0, 1536 * MIB).unwrap_err();
        assert_eq!(e.available, (2 * GIB - 100 * MIB) / 2);
        assert_eq!(e.requested, 1536 * MIB);
        assert!(admit(&l, 0, (2 * GIB - 100 * MIB) / 2).is_ok());
        let text = e.to_string();
        assert!(
            text.contains("host") && text.contains("1610612736 bytes"),
            "{text}"
        );
        assert!(text.contains(&format!("{} bytes", e.available)), "{text}");
    }

    #[test]
    fn the_emulator_holds_at_most_half_of_a_limit() {
        // Touched pages (shmem) are already in `used`: only the cap applies.
        let l = [resident(4 * GIB, GIB + 10 * MIB, Some(GIB))];
        assert_eq!(room(&l[0], GIB), GIB);
        assert!(admit(&l, GIB, GIB).is_ok());
        assert!(admit(&l, GIB, GIB + 4096).is_err());
    }

    #[test]
    fn untouched_promises_count_as_used() {
        // 1 GiB backed but not touched (no shmem yet): free is 4 - 0.5 - 1 = 2.5 GiB.
        let l = [resident(4 * GIB, GIB / 2, Some(0))];
        assert_eq!(room(&l[0], GIB), GIB);
        // Without a shmem figure everything backed counts as untouched.
        let l = resident(8 * GIB, 4 * GIB, None);
        assert_eq!(room(&l, GIB), (8 * GIB - 4 * GIB - GIB) / 2);
        let l = resident(8 * GIB, 4 * GIB, Some(GIB));
        assert_eq!(room(&l, GIB), 2 * GIB);
    }

    #[test]
    fn address_space_limits_count_nothing_twice() {
        let l = [Limit {
            source: "RLIMIT_AS".into(),
            limit: 8 * GIB,
            used: 6 * GIB,
            kind: LimitKind::Virtual,
        }];
        assert_eq!(room(&l[0], GIB), GIB);
        assert!(admit(&l, 3 * GIB, 4096).is_ok());
        assert!(admit(&l, 4 * GIB, 4096).is_err());
    }

    #[test]
    fn the_tightest_limit_binds_and_no_limit_admits_all() {
        let l = [
            resident(64 * GIB, GIB, Some(0)),
            resident(GIB, 0, Some(0)),
            resident(32 * GIB, 0, Some(0)),
        ];
        let e = admit(&l, 0, GIB).unwrap_err();
        assert_eq!(e.limit.limit, GIB);
        assert_eq!(e.available, GIB / 2);
        assert_eq!(available(&l, 0), GIB / 2);
        assert_eq!(available(&[], 0), u64::MAX);
        assert!(admit(&[], u64::MAX / 2, u64::MAX).is_ok());
    }

    #[test]
    fn reported_vram_is_capped_by_the_host() {
        let l = [resident(3 * GIB + 12345, 0, None)];
        assert_eq!(vram_for(GIB, &l), GIB);
        assert_eq!(vram_for(16 * GIB, &l), (3 * GIB + 12345) / 2 / MIB * MIB);
        assert_eq!(vram_for(16 * GIB, &[]), 16 * GIB);
        assert_eq!(vram_for(16 * GIB, &[resident(1000, 0, None)]), 4096);
    }

    #[test]
    fn meminfo_and_status_parse() {
        let meminfo = "MemTotal:       24683568 kB\nMemFree:  5 kB\nMemAvailable:   24042120 kB\n\
                       Shmem:              9508 kB\n";
        let l = meminfo_limit(meminfo).unwrap();
        assert_eq!(l.limit, 24683568 * 1024);
        assert_eq!(l.used, (24683568 - 24042120) * 1024);
        assert_eq!(
            l.kind,
            LimitKind::Resident {
                shmem: Some(9508 * 1024)
            }
        );
        assert_eq!(meminfo_limit("MemTotal: 1 kB\n"), None);
        let status = "Name:\thcq\nVmSize:\t  204800 kB\nVmData:\t   1024 kB\n";
        let l = rlimit_limits(Some(GIB), None, status);
        assert_eq!(l.len(), 1);
        assert_eq!((l[0].limit, l[0].used), (GIB, 204800 * 1024));
        assert_eq!(l[0].kind, LimitKind::Virtual);
        let l = rlimit_limits(None, Some(GIB), status);
        assert_eq!(l[0].used, 1024 * 1024);
        assert!(rlimit_limits(None, None, status).is_empty());
    }

    fn fake(files: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> {
        let map: HashMap<String, String> = files
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        move |p: &str| map.get(p).cloned()
    }

    #[test]
    fn cgroup_v2_limits_of_the_cgroup_and_its_ancestors() {
        let read = fake(&[
            ("/proc/self/cgroup", "0::/jobs/run1\n"),
            (
                "/proc/self/mountinfo",
                "22 1 0:20 / /proc rw - proc proc rw\n\
                 30 25 0:26 / /sys/fs/cgroup rw,nosuid - cgroup2 cgroup2 rw,nsdelegate\n",
            ),
            ("/sys/fs/cgroup/jobs/run1/memory.max", "2147483648\n"),
            ("/sys/fs/cgroup/jobs/run1/memory.current", "104857600\n"),
            (
                "/sys/fs/cgroup/jobs/run1/memory.stat",
                "anon 1\nshmem 4096\n",
            ),
            ("/sys/fs/cgroup/jobs/memory.max", "max\n"),
            ("/sys/fs/cgroup/jobs/memory.current", "5\n"),
            ("/sys/fs/cgroup/memory.max", "1073741824\n"),
            ("/sys/fs/cgroup/memory.current", "7\n"),
        ]);
        let l = cgroup_limits(&read);
        assert_eq!(l.len(), 2, "{l:?}");
        assert_eq!((l[0].limit, l[0].used), (2 * GIB, 100 * MIB));
        assert_eq!(l[0].kind, LimitKind::Resident { shmem: Some(4096) });
        assert!(l[0].source.contains("/sys/fs/cgroup/jobs/run1/memory.max"));
        assert_eq!((l[1].limit, l[1].used), (GIB, 7));
        assert_eq!(l[1].kind, LimitKind::Resident { shmem: None });
    }

    #[test]
    fn cgroup_v1_memory_controller_with_a_hierarchical_limit() {
        let read = fake(&[
            (
                "/proc/self/cgroup",
                "5:cpu,cpuacct:/\n4:memory:/sandbox/job\n0::/\n",
            ),
            (
                "/proc/self/mountinfo",
                "40 30 0:35 / /sys/fs/cgroup/memory rw - cgroup cgroup rw,memory\n\
                 41 30 0:36 / /sys/fs/cgroup/cpu rw - cgroup cgroup rw,cpu\n",
            ),
            (
                "/sys/fs/cgroup/memory/sandbox/job/memory.limit_in_bytes",
                "9223372036854771712\n",
            ),
            (
                "/sys/fs/cgroup/memory/sandbox/job/memory.usage_in_bytes",
                "8249344\n",
            ),
            (
                "/sys/fs/cgroup/memory/sandbox/job/memory.stat",
                "shmem 10\nhierarchical_memory_limit 536870912\ntotal_shmem 20\n",
            ),
        ]);
        let l = cgroup_limits(&read);
        assert_eq!(l.len(), 1, "{l:?}");
        assert_eq!((l[0].limit, l[0].used), (512 * MIB, 8249344));
        assert_eq!(l[0].kind, LimitKind::Resident { shmem: Some(20) });
        // No limit anywhere: nothing to report.
        let read = fake(&[
            ("/proc/self/cgroup", "4:memory:/x\n"),
            (
                "/proc/self/mountinfo",
                "40 30 0:35 / /sys/fs/cgroup/memory rw - cgroup cgroup rw,memory\n",
            ),
            (
                "/sys/fs/cgroup/memory/x/memory.limit_in_bytes",
                "9223372036854771712\n",
            ),
            ("/sys/fs/cgroup/memory/x/memory.usage_in_bytes", "1\n"),
        ]);
        assert!(cgroup_limits(&read).is_empty());
    }

    #[test]
    fn cgroup_paths_inside_a_namespace_and_missing_files() {
        assert_eq!(
            cgroup_dir("/sys/fs/cgroup", "/", "/a/b").as_deref(),
            Some("/sys/fs/cgroup/a/b")
        );
        assert_eq!(
            cgroup_dir("/sys/fs/cgroup", "/a", "/a/b").as_deref(),
            Some("/sys/fs/cgroup/b")
        );
        assert_eq!(
            cgroup_dir("/sys/fs/cgroup/", "/", "/").as_deref(),
            Some("/sys/fs/cgroup/")
        );
        assert_eq!(cgroup_dir("/sys/fs/cgroup", "/a", "/z"), None);
        assert!(cgroup_limits(&fake(&[])).is_empty());
        assert!(cgroup_limits(&fake(&[
            ("/proc/self/cgroup", "garbage"),
            ("/proc/self/mountinfo", "junk - x")
        ]))
        .is_empty());
    }
}
