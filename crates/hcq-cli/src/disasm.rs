//! `hcq disasm`: the kernels of a code object (or of HIP source, compiled through the cache) as
//! instructions decoded by our own RDNA3 decoder, printed as `llvm-objdump -d` prints them, each
//! function headed by the resources its descriptor and metadata declare.

use std::fmt::Write as _;
use std::path::Path;

use hcq_amd::program::{AlignedCodeObject, CodeObject, KernelMeta};
use hcq_amd_sys::kd::{self, KernelDescriptor};
use rdna3::decode::{decode, Inst};

/// VGPRs of a SIMD's register file per wave32 lane on gfx1100 and gfx1101 (1536; gfx1102 and
/// gfx1103 have 1024), and the granule a wave32 allocates them in (24 on the 1536 parts).
const GFX1100_WAVE32_VGPRS: u32 = 1536;
const GFX1100_WAVE32_VGPR_GRANULE: u32 = 24;
/// Waves one SIMD holds at most on gfx11.
const MAX_WAVES_PER_SIMD: u32 = 16;
/// LDS of a workgroup processor (two CUs, four SIMDs) in WGP mode.
const LDS_PER_WGP: u32 = 128 << 10;
const SIMDS_PER_WGP: u32 = 4;

pub fn run(file: &Path, kernel: Option<&str>, arch: &str) -> Result<(), String> {
    let bytes = std::fs::read(file).map_err(|e| format!("reading {}: {e}", file.display()))?;
    let object = if bytes.starts_with(b"\x7fELF") {
        bytes
    } else {
        hcq::compile_hip_file(file, arch).map_err(|e| e.to_string())?
    };
    print!("{}", disassemble(&object, kernel)?);
    Ok(())
}

/// The listing of `object`: every function, or only `kernel`.
pub fn disassemble(object: &[u8], kernel: Option<&str>) -> Result<String, String> {
    let aligned = AlignedCodeObject::new(object);
    let co = CodeObject::parse(aligned.bytes()).map_err(|e| e.to_string())?;
    let (text_at, text) = co
        .text()
        .ok_or_else(|| "the code object has no .text section".to_string())?;
    let text_end = text_at + text.len() as u64;
    let functions = co.functions();
    if let Some(name) = kernel {
        if !functions.iter().any(|(n, ..)| n == name) {
            let names: Vec<&str> = functions.iter().map(|(n, ..)| n.as_str()).collect();
            return Err(format!(
                "no function named {name:?} (the code object has: {})",
                names.join(", ")
            ));
        }
    }
    let image = co.image(0).map_err(|e| e.to_string())?;
    let mut out = String::new();
    for (i, (name, at, _)) in functions.iter().enumerate() {
        if kernel.is_some_and(|k| k != name) || *at < text_at || *at >= text_end {
            continue;
        }
        // As llvm-objdump: a function's listing runs to the next symbol, so the padding after
        // its code (s_nop, s_code_end) is listed with it.
        let end = functions[i + 1..]
            .iter()
            .map(|(_, next, _)| *next)
            .find(|next| next > at)
            .unwrap_or(text_end)
            .min(text_end);
        if !out.is_empty() {
            out.push('\n');
        }
        out += &header(&co, &image, name);
        let _ = writeln!(out, "{at:016x} <{name}>:");
        let words: Vec<u32> = text[(at - text_at) as usize..(end - text_at) as usize]
            .chunks(4)
            .map(|c| {
                let mut w = [0u8; 4];
                w[..c.len()].copy_from_slice(c);
                u32::from_le_bytes(w)
            })
            .collect();
        listing(&mut out, name, *at, &words);
    }
    Ok(out)
}

/// One line per instruction: its text, then `// address: words` and, for a branch, the
/// target as `<function+offset>`.
fn listing(out: &mut String, name: &str, start: u64, words: &[u32]) {
    let mut k = 0;
    while k < words.len() {
        let pc = start + 4 * k as u64;
        let (text, len, target) = match decode(&words[k..]) {
            Ok(d) => {
                let target = branch_target(&d.inst, pc);
                (d.inst.to_string(), d.words.min(words.len() - k), target)
            }
            Err(_) => (format!(".long 0x{:08x}", words[k]), 1, None),
        };
        let encoded: Vec<String> = words[k..k + len]
            .iter()
            .map(|w| format!("{w:08X}"))
            .collect();
        let _ = write!(out, "\t{text:<59}// {pc:012X}: {}", encoded.join(" "));
        if let Some(t) = target {
            let _ = write!(out, " <{name}+0x{:x}>", t - start);
        }
        out.push('\n');
        k += len;
    }
}

/// Where a SOPP branch goes: the next instruction plus its signed dword offset.
fn branch_target(inst: &Inst, pc: u64) -> Option<u64> {
    let Inst::Sopp(s) = inst else { return None };
    let m = s.op.mnemonic();
    if !(m == "s_branch" || m.starts_with("s_cbranch_")) {
        return None;
    }
    Some(
        pc.wrapping_add(4)
            .wrapping_add_signed(i64::from(s.simm16 as i16) * 4),
    )
}

/// `; ` lines with what the kernel's descriptor and metadata declare, for a kernel (a function
/// with a `.kd` descriptor); nothing for other functions.
fn header(co: &CodeObject<'_>, image: &[u8], name: &str) -> String {
    let Ok(kd_at) = co.descriptor_offset(name) else {
        return String::new();
    };
    let Some(d) = image
        .get(kd_at as usize..kd_at as usize + kd::KERNEL_DESCRIPTOR_SIZE)
        .and_then(KernelDescriptor::parse)
    else {
        return String::new();
    };
    let meta: Option<&KernelMeta> = co.kernels.iter().find(|k| k.name == name);
    let vgprs = d.wave32_vgprs();
    let count = |v: Option<u32>| v.map_or("?".to_string(), |n| n.to_string());
    let max_group = meta.and_then(|m| m.max_flat_workgroup_size).unwrap_or(1024);
    let (waves, limit) = occupancy(vgprs, d.group_segment_fixed_size, max_group);
    let mut h = String::new();
    let _ = writeln!(h, "; kernel {name}: wave32");
    let _ = writeln!(
        h,
        ";   VGPRs {} ({vgprs} allocated), SGPRs {}",
        count(meta.and_then(|m| m.vgpr_count)),
        count(meta.and_then(|m| m.sgpr_count)),
    );
    let _ = writeln!(
        h,
        ";   LDS {} bytes per workgroup (static), scratch {} bytes per work-item, \
         kernel arguments {} bytes",
        d.group_segment_fixed_size, d.private_segment_fixed_size, d.kernarg_size
    );
    let _ = writeln!(h, ";   workgroup at most {max_group} work-items");
    let _ = writeln!(
        h,
        ";   occupancy {waves} waves per SIMD (gfx1100, limited by {limit})"
    );
    h
}

/// Waves per SIMD a gfx1100 can keep of this kernel, and what limits it: the register file,
/// the LDS (each workgroup processor shares 128 KiB among the workgroups on it), or the
/// SIMD's 16 wave slots.
fn occupancy(vgprs: u32, lds: u32, max_group: u32) -> (u32, &'static str) {
    let alloc = vgprs.max(1).next_multiple_of(GFX1100_WAVE32_VGPR_GRANULE);
    let by_vgprs = GFX1100_WAVE32_VGPRS / alloc;
    let by_lds = LDS_PER_WGP.checked_div(lds).map_or(u32::MAX, |groups| {
        groups * max_group.div_ceil(32) / SIMDS_PER_WGP
    });
    let mut best = (MAX_WAVES_PER_SIMD, "wave slots");
    if by_vgprs < best.0 {
        best = (by_vgprs, "VGPRs");
    }
    if by_lds < best.0 {
        best = (by_lds, "LDS");
    }
    best
}
