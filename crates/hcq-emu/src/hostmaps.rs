//! What the host address space holds, from `/proc/self/maps`: used to check that a buffer's
//! virtual address is a reservation the driver made (so backing it replaces nothing else) and
//! that a user pointer is readable and writable memory.

use std::io;

/// One mapping: `[start, end)` with its `rwxp` permission string.
#[derive(Debug, Clone)]
struct HostMapping {
    start: u64,
    end: u64,
    readable: bool,
    writable: bool,
    executable: bool,
}

fn parse_maps(text: &str) -> Vec<HostMapping> {
    let mut out = Vec::new();
    for line in text.lines() {
        let mut fields = line.split_ascii_whitespace();
        let (Some(range), Some(perms)) = (fields.next(), fields.next()) else {
            continue;
        };
        let Some((s, e)) = range.split_once('-') else {
            continue;
        };
        let (Ok(start), Ok(end)) = (u64::from_str_radix(s, 16), u64::from_str_radix(e, 16)) else {
            continue;
        };
        let p = perms.as_bytes();
        if p.len() < 3 {
            continue;
        }
        out.push(HostMapping {
            start,
            end,
            readable: p[0] == b'r',
            writable: p[1] == b'w',
            executable: p[2] == b'x',
        });
    }
    out
}

fn host_maps() -> io::Result<Vec<HostMapping>> {
    Ok(parse_maps(&std::fs::read_to_string("/proc/self/maps")?))
}

/// Whether every byte of `[start, end)` is either unmapped or inside an inaccessible
/// (`PROT_NONE`) mapping, i.e. a reservation that backing memory may replace.
pub(crate) fn is_reservation(start: u64, end: u64) -> io::Result<bool> {
    Ok(host_maps()?
        .iter()
        .filter(|m| m.start < end && start < m.end)
        .all(|m| !m.readable && !m.writable && !m.executable))
}

/// Whether `[start, end)` is entirely covered by readable and writable mappings.
pub(crate) fn is_read_write(start: u64, end: u64) -> io::Result<bool> {
    let mut cursor = start;
    for m in host_maps()? {
        if m.end <= cursor {
            continue;
        }
        if m.start > cursor || !(m.readable && m.writable) {
            return Ok(false);
        }
        cursor = m.end;
        if cursor >= end {
            return Ok(true);
        }
    }
    Ok(cursor >= end)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn maps_lines_parse() {
        let m = parse_maps("7f00-7f10 ---p 00000000 00:00 0\n7f10-7f20 rw-s 00000000 00:01 5 /dev/zero (deleted)\n");
        assert_eq!(m.len(), 2);
        assert!(!m[0].readable && m[1].readable && m[1].writable && !m[1].executable);
        assert_eq!((m[1].start, m[1].end), (0x7f10, 0x7f20));
    }
}
