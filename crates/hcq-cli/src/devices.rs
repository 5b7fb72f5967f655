//! `hcq devices -v` and `--json`: each device opened, with its compute shape; a device hcq
//! cannot use, and a missing real GPU, with the reason.

use hcq::{ComputeInfo, DeviceInfo, DeviceListing};

/// Why there is no real AMD GPU (`amd:N`) at all in `devices`, when there is none: the
/// driver's account ([`hcq::real_amd_unavailable`]). A real GPU that is listed but cannot be
/// used says why itself ([`DeviceListing::unusable`]).
#[cfg(target_os = "linux")]
pub fn real_amd_missing(devices: &[DeviceListing]) -> Option<String> {
    if devices.iter().any(|d| !d.emulated) {
        return None;
    }
    hcq::real_amd_unavailable()
}

/// Other platforms have no `amd:N` to miss.
#[cfg(not(target_os = "linux"))]
pub fn real_amd_missing(_devices: &[DeviceListing]) -> Option<String> {
    None
}

/// The line that says why there is no `amd:N`.
pub fn no_real_amd(why: &str) -> String {
    format!("no real AMD GPU (amd:N): {why}")
}

/// Prints each device, opened (or, for one hcq cannot use, why not), then why there is no
/// real AMD GPU when `missing` says so: on standard error with `-v`, as a last JSON object
/// with `--json`.
pub fn describe(
    devices: &[DeviceListing],
    json: bool,
    missing: Option<&str>,
) -> Result<(), String> {
    for listing in devices {
        if let Some(why) = &listing.unusable {
            if json {
                println!("{}", unusable_json(listing, why));
            } else {
                print!("{}", unusable_text(listing, why));
            }
            continue;
        }
        let dev = hcq::Device::open(&listing.name)
            .map_err(|e| format!("opening {}: {e}", listing.name))?;
        let info = dev.info();
        if json {
            println!("{}", to_json(&info));
        } else {
            print!("{}", to_text(&info));
        }
    }
    if let Some(why) = missing {
        if json {
            println!("{}", missing_json(why));
        } else {
            eprintln!("hcq: {}", no_real_amd(why));
        }
    }
    Ok(())
}

/// The JSON object that says why there is no real AMD GPU: `{"driver":"amd","unavailable":
/// why}` (it has no `name`: it is no device).
pub fn missing_json(why: &str) -> String {
    format!("{{\"driver\":\"amd\",\"unavailable\":{}}}", quoted(why))
}

fn kind(emulated: bool) -> &'static str {
    if emulated {
        "emulated"
    } else {
        "real"
    }
}

/// `amd:0: gfx1030 (real), 16.0 GiB of memory, cannot be used: why`.
fn unusable_text(d: &DeviceListing, why: &str) -> String {
    format!(
        "{}: {} ({}), {} of memory, cannot be used: {why}\n",
        d.name,
        d.arch,
        kind(d.emulated),
        crate::format_bytes(d.memory)
    )
}

/// A device hcq cannot use: what the listing knows, and why; it has no description or
/// compute shape, as it is not opened.
fn unusable_json(d: &DeviceListing, why: &str) -> String {
    format!(
        "{{\"name\":{},\"arch\":{},\"memory\":{},\"emulated\":{},\"description\":null,\
         \"unusable\":{},\"compute\":null}}",
        quoted(&d.name),
        quoted(&d.arch),
        d.memory,
        d.emulated,
        quoted(why)
    )
}

fn to_text(i: &DeviceInfo) -> String {
    let kind = kind(i.emulated);
    let mut s = format!(
        "{}: {} ({}, {kind}), {} of memory\n",
        i.name,
        i.description,
        i.arch,
        crate::format_bytes(i.memory)
    );
    if let Some(c) = &i.compute {
        let bytes = |n: Option<u64>| n.map_or("unknown".to_string(), crate::format_bytes);
        let (free, gtt, gtt_free) = (bytes(c.free_memory), bytes(c.gtt_memory), bytes(c.gtt_free));
        s += &format!(
            "  {} compute units in {} shader engines, {} SIMDs each, wave{}, at most {} waves \
             per CU\n  {} bytes of LDS per workgroup, clock up to {} MHz, {free} free\n  GTT \
             (host memory it maps) {gtt}, {gtt_free} free\n  PCI {}, /dev/dri/renderD{}, {}\n",
            c.compute_units,
            c.shader_engines,
            c.simds_per_cu,
            c.wave_size,
            c.max_waves_per_cu,
            c.lds_per_workgroup,
            c.max_clock_mhz,
            c.pci_location,
            c.render_minor,
            c.driver_version
        );
        for k in &c.caches {
            s += &format!("  {}\n", cache_line(k));
        }
        if let Some(why) = &c.copy_engine_missing {
            s += &format!("  no copy engine (copies run on the compute queue): {why}\n");
        }
    }
    s
}

/// `L2 data cache: 6 MiB, shared by 96 CUs, 1 of them`.
fn cache_line(k: &hcq::CacheInfo) -> String {
    let what = match (k.data, k.instruction) {
        (true, true) => "cache",
        (false, true) => "instruction cache",
        _ => "data cache",
    };
    let shared = match k.shared_by_cus {
        1 => "per CU".to_string(),
        n => format!("shared by {n} CUs"),
    };
    format!(
        "L{} {what}: {} {shared}, {} of them",
        k.level,
        crate::format_bytes(k.bytes),
        k.instances
    )
}

/// A JSON string literal: quotes, backslashes and control characters escaped.
fn quoted(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + 2);
    out.push('"');
    for ch in text.chars() {
        match ch {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            c if (c as u32) < 0x20 => out.push_str(&format!("\\u{:04x}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

fn caches_json(caches: &[hcq::CacheInfo]) -> String {
    let entries: Vec<String> = caches
        .iter()
        .map(|k| {
            format!(
                "{{\"level\":{},\"data\":{},\"instruction\":{},\"bytes\":{},\"shared_by_cus\":{},\
                 \"instances\":{}}}",
                k.level, k.data, k.instruction, k.bytes, k.shared_by_cus, k.instances
            )
        })
        .collect();
    format!("[{}]", entries.join(","))
}

fn compute_json(c: &ComputeInfo) -> String {
    let number = |n: Option<u64>| n.map_or("null".to_string(), |n| n.to_string());
    let (free, gtt, gtt_free) = (
        number(c.free_memory),
        number(c.gtt_memory),
        number(c.gtt_free),
    );
    format!(
        "{{\"compute_units\":{},\"shader_engines\":{},\"simds_per_cu\":{},\"wave_size\":{},\
         \"max_waves_per_cu\":{},\"lds_per_workgroup\":{},\"max_clock_mhz\":{},\
         \"free_memory\":{free},\"gtt_memory\":{gtt},\"gtt_free\":{gtt_free},\"pci_location\":{},\"render_minor\":{},\"driver_version\":{},\
         \"copy_engine_missing\":{},\"caches\":{}}}",
        c.compute_units,
        c.shader_engines,
        c.simds_per_cu,
        c.wave_size,
        c.max_waves_per_cu,
        c.lds_per_workgroup,
        c.max_clock_mhz,
        quoted(&c.pci_location),
        c.render_minor,
        quoted(&c.driver_version),
        c.copy_engine_missing
            .as_deref()
            .map_or("null".to_string(), quoted),
        caches_json(&c.caches)
    )
}

fn to_json(i: &DeviceInfo) -> String {
    format!(
        "{{\"name\":{},\"arch\":{},\"memory\":{},\"emulated\":{},\"description\":{},\
         \"unusable\":null,\"compute\":{}}}",
        quoted(&i.name),
        quoted(&i.arch),
        i.memory,
        i.emulated,
        quoted(&i.description),
        i.compute.as_ref().map_or("null".to_string(), compute_json)
    )
}
