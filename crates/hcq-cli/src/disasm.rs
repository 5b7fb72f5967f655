//! `hcq disasm`: the kernels of a code object (or of HIP source, compiled through the cache) as
//! instructions decoded by our own RDNA3 decoder, printed as `llvm-objdump -d` prints them, each
//! function headed by the resources its descriptor and metadata declare. A relocatable object
//! (`clang -c`) is linked first, as the runtime links one before loading it, so the listing is
//! of the code that would run.

use std::fmt::Write as _;
use std::path::Path;

use hcq_amd::compiler::HipCompiler;
use hcq_amd::program::{
    is_relocatable_amdgpu, program_info, source_name, AlignedCodeObject, CodeObject, KernelMeta,
};
use hcq_amd_sys::kd::{self, KernelDescriptor};
use rdna3::decode::{decode, Inst};

/// The architecture occupancy is given for.
const ARCH: &str = "gfx1100";
/// The targets whose machine code the decoder reads: RDNA3's (gfx11 has one instruction set).
const DECODED_TARGETS: [&str; 4] = ["gfx1100", "gfx1101", "gfx1102", "gfx1103"];

pub fn run(
    file: &Path,
    kernel: Option<&str>,
    arch: &str,
    options: &hcq::CompileOptions,
) -> Result<(), String> {
    let bytes = std::fs::read(file).map_err(|e| format!("reading {}: {e}", file.display()))?;
    let object = if bytes.starts_with(b"\x7fELF") {
        bytes
    } else {
        hcq::compile_hip_file_with(file, arch, options).map_err(|e| e.to_string())?
    };
    let linked;
    let object = if is_relocatable_amdgpu(&object) {
        linked = HipCompiler::new(arch, hcq_core::CompileCache::disabled())
            .link_relocatable(&object)
            .map_err(|e| e.to_string())?;
        &linked
    } else {
        &object
    };
    print!("{}", disassemble(object, kernel)?);
    Ok(())
}

/// The listing of `object` (a linked code object): every function, or only `kernel`, named by
/// its symbol or, as the runtime finds kernels, by its source name.
pub fn disassemble(object: &[u8], kernel: Option<&str>) -> Result<String, String> {
    let aligned = AlignedCodeObject::new(object);
    let co = CodeObject::parse(aligned.bytes()).map_err(|e| e.to_string())?;
    // Another target's machine code would decode into other instructions.
    if !DECODED_TARGETS
        .iter()
        .any(|arch| co.check_target(arch, "").is_ok())
    {
        co.check_target(ARCH, "hcq disasm's decoder")
            .map_err(|e| e.to_string())?;
    }
    let (text_at, text) = co
        .text()
        .ok_or_else(|| "the code object has no .text section".to_string())?;
    let text_end = text_at + text.len() as u64;
    let functions = co.functions();
    let symbol = match kernel {
        Some(name) if functions.iter().any(|(n, ..)| n == name) => Some(name.to_string()),
        Some(name) => {
            let symbol = co.resolve_kernel(name).map_err(|e| e.to_string())?;
            if !functions.iter().any(|(n, ..)| *n == symbol) {
                let names: Vec<&str> = functions.iter().map(|(n, ..)| n.as_str()).collect();
                return Err(format!(
                    "no function named {name:?} (the code object has: {})",
                    names.join(", ")
                ));
            }
            Some(symbol)
        }
        None => None,
    };
    let image = co.image(0).map_err(|e| e.to_string())?;
    let mut out = String::new();
    for (i, (name, at, _)) in functions.iter().enumerate() {
        if symbol.as_ref().is_some_and(|k| k != name) || *at < text_at || *at >= text_end {
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
    let info = program_info(ARCH, &d, meta);
    let sgprs = info.sgprs.map_or("?".to_string(), |n| n.to_string());
    // The name the kernel's source gives it (`ns::scale` for `_ZN2ns5scaleEPf`); the symbol
    // follows on the next line.
    let source = source_name(name).map_or_else(|| name.to_string(), |(qualified, _)| qualified);
    let mut h = String::new();
    let _ = writeln!(h, "; kernel {source}: wave{}", info.wave_size);
    let _ = writeln!(
        h,
        ";   VGPRs {} ({} allocated), SGPRs {sgprs}",
        info.vgprs, info.allocated_vgprs
    );
    let _ = writeln!(
        h,
        ";   LDS {} bytes per workgroup (static), scratch {} bytes per work-item, \
         kernel arguments {} bytes",
        info.static_lds, info.scratch_per_lane, d.kernarg_size
    );
    let _ = writeln!(
        h,
        ";   workgroup at most {} work-items",
        info.max_workgroup_size
    );
    let _ = writeln!(
        h,
        ";   occupancy {} waves per SIMD ({ARCH}, limited by {})",
        info.waves_per_simd, info.occupancy_limit
    );
    h
}
