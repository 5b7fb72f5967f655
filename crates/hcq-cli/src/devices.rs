//! `hcq devices -v` and `--json`: each device opened, with its compute shape.

use hcq::{ComputeInfo, DeviceInfo, DeviceListing};

pub fn describe(devices: &[DeviceListing], json: bool) -> Result<(), String> {
    for listing in devices {
        let dev = hcq::Device::open(&listing.name)
            .map_err(|e| format!("opening {}: {e}", listing.name))?;
        let info = dev.info();
        if json {
            println!("{}", to_json(&info));
        } else {
            print!("{}", to_text(&info));
        }
    }
    Ok(())
}

fn to_text(i: &DeviceInfo) -> String {
    let kind = if i.emulated { "emulated" } else { "real" };
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
         \"compute\":{}}}",
        quoted(&i.name),
        quoted(&i.arch),
        i.memory,
        i.emulated,
        quoted(&i.description),
        i.compute.as_ref().map_or("null".to_string(), compute_json)
    )
}
