//! Code objects: the ELF a compiler emits for `amdgcn-amd-amdhsa`, checked before anything is
//! allocated; its kernel symbols, its loaded image with relocations applied, its target and
//! its kernel descriptors.

use super::bad;
use super::metadata::{parse_metadata, KernelMeta};
use hcq_amd_sys::kd::{self, KernelDescriptor};
use hcq_core::{Error, Result};
use object::elf;
use object::read::elf::{ElfFile64, FileHeader, ProgramHeader, Rela, SectionHeader};
use object::{Endianness, Object, ObjectSymbol};

/// `R_AMDGPU_RELATIVE64`: `base + addend`.
const R_AMDGPU_RELATIVE64: u32 = 13;
/// `R_AMDGPU_NONE`.
const R_AMDGPU_NONE: u32 = 0;
/// `ELFOSABI_AMDGPU_HSA`: the OS/ABI byte of code objects for the HSA runtime.
const ELFOSABI_AMDGPU_HSA: u8 = 64;

/// A copy of a code object aligned for the ELF reader, which reads headers in place and needs
/// 8-byte alignment that an arbitrary `&[u8]` (a sub-slice, `include_bytes!`) does not have.
pub struct AlignedCodeObject {
    words: Vec<u64>,
    len: usize,
}

impl AlignedCodeObject {
    /// Copies `bytes` into 8-byte-aligned storage.
    pub fn new(bytes: &[u8]) -> Self {
        let mut words = vec![0u64; bytes.len().div_ceil(8)];
        // SAFETY: `words` owns at least `bytes.len()` bytes and cannot overlap `bytes`.
        unsafe {
            std::ptr::copy_nonoverlapping(
                bytes.as_ptr(),
                words.as_mut_ptr() as *mut u8,
                bytes.len(),
            )
        };
        AlignedCodeObject {
            words,
            len: bytes.len(),
        }
    }

    /// The copied bytes, 8-byte aligned.
    pub fn bytes(&self) -> &[u8] {
        // SAFETY: the first `len` bytes of `words` were initialised from the source slice.
        unsafe { std::slice::from_raw_parts(self.words.as_ptr() as *const u8, self.len) }
    }
}

/// The most bytes a loaded image (code, data and bss) may span. Kernel libraries take
/// kilobytes to a few megabytes; a larger span comes from a corrupt segment address or size,
/// and would be allocated on the host and on the device before anything else could fail.
pub const MAX_IMAGE_BYTES: u64 = 256 << 20;
/// The function a C++ (Itanium ABI) mangled symbol names: its qualified name (`ns::scale`) and
/// its last component (`scale`); `None` for a symbol that is not a mangled function name.
pub fn source_name(symbol: &str) -> Option<(String, String)> {
    let rest = symbol.strip_prefix("_Z")?;
    // One `<length><identifier>`; returns it and what follows.
    fn ident(s: &str) -> Option<(&str, &str)> {
        let digits = s.bytes().take_while(u8::is_ascii_digit).count();
        let len: usize = s.get(..digits)?.parse().ok()?;
        let body = s.get(digits..digits.checked_add(len)?)?;
        Some((body, &s[digits + len..]))
    }
    let parts: Vec<&str> = if let Some(mut nested) = rest.strip_prefix('N') {
        // CV and ref qualifiers of a member function come first.
        nested = nested.trim_start_matches(['K', 'V', 'r', 'R', 'O']);
        let mut parts = Vec::new();
        while !nested.starts_with('E') {
            let (part, after) = ident(nested)?;
            parts.push(part);
            if after.starts_with('I') {
                // A template's arguments: not a plain function name.
                return None;
            }
            nested = after;
        }
        parts
    } else {
        vec![ident(rest)?.0]
    };
    let last = parts.last()?.to_string();
    Some((parts.join("::"), last))
}

/// Kernel names listed at most in a "no kernel named" error.
const NAMES_LISTED: usize = 32;

/// A parsed code object, before upload.
/// A parsed AMDGPU code object: its ELF checked, its kernels' metadata read, not yet uploaded.
#[derive(Debug)]
pub struct CodeObject<'a> {
    bytes: &'a [u8],
    /// Bytes the loaded image spans (highest segment end).
    pub image_size: u64,
    /// The kernels its metadata lists.
    pub kernels: Vec<KernelMeta>,
    /// Image ranges that hold file bytes (the rest is zero fill), and whether they are
    /// executable.
    loaded: Vec<(std::ops::Range<u64>, bool)>,
    elf: ElfFile64<'a, Endianness>,
}

impl<'a> CodeObject<'a> {
    /// Checks and parses `bytes` (8-byte aligned: see [`AlignedCodeObject`]); anything malformed
    /// or unsupported is [`Error::InvalidCodeObject`] naming what.
    pub fn parse(bytes: &'a [u8]) -> Result<Self> {
        // Before the ELF reader, which would read a big-endian header and report its fields.
        if bytes.starts_with(&elf::ELFMAG) && bytes.get(5) != Some(&elf::ELFDATA2LSB) {
            return Err(bad(
                "the ELF is not little-endian (EI_DATA); AMDGPU code objects are",
            ));
        }
        let elf = ElfFile64::<Endianness>::parse(bytes)
            .map_err(|e| bad(format!("malformed 64-bit ELF: {e}")))?;
        let hdr = elf.elf_header();
        let e = elf.endian();
        if hdr.e_machine(e) != elf::EM_AMDGPU {
            return Err(bad(format!(
                "ELF machine {} is not AMDGPU ({})",
                hdr.e_machine(e),
                elf::EM_AMDGPU
            )));
        }
        let os_abi = hdr.e_ident().os_abi;
        if os_abi != ELFOSABI_AMDGPU_HSA {
            return Err(bad(format!(
                "ELF OS/ABI {os_abi} is not AMDHSA ({}): not a code object for the HSA runtime",
                ELFOSABI_AMDGPU_HSA
            )));
        }
        let e_type = hdr.e_type(e);
        if e_type != elf::ET_DYN {
            // (`AmdDevice::load_program` links a relocatable object before it gets here.)
            return Err(bad(format!(
                "ELF type {e_type} is not a shared object ({}); an AMDHSA code object is \
                 linked (clang without -c, or ld.lld -shared)",
                elf::ET_DYN
            )));
        }
        let mut image_size = 0u64;
        let mut loaded = Vec::new();
        let mut spans: Vec<(u64, u64, usize)> = Vec::new();
        for (i, ph) in elf.elf_program_headers().iter().enumerate() {
            if ph.p_type(e) != elf::PT_LOAD {
                continue;
            }
            let (vaddr, memsz) = (ph.p_vaddr(e), ph.p_memsz(e));
            let (offset, filesz) = (ph.p_offset(e), ph.p_filesz(e));
            let end = vaddr.checked_add(memsz).ok_or_else(|| {
                bad(format!(
                    "segment {i}: address 0x{vaddr:x} + size 0x{memsz:x} overflows 64 bits"
                ))
            })?;
            if end > MAX_IMAGE_BYTES {
                return Err(bad(format!(
                    "segment {i} ends at 0x{end:x} (p_vaddr 0x{vaddr:x}, p_memsz 0x{memsz:x}); \
                     the image may span at most {MAX_IMAGE_BYTES} bytes"
                )));
            }
            if filesz > memsz {
                return Err(bad(format!(
                    "segment {i}: file size 0x{filesz:x} exceeds its memory size 0x{memsz:x}"
                )));
            }
            if offset
                .checked_add(filesz)
                .is_none_or(|end| end > bytes.len() as u64)
            {
                return Err(bad(format!(
                    "segment {i}: file bytes 0x{offset:x} + 0x{filesz:x} lie outside the \
                     {}-byte file",
                    bytes.len()
                )));
            }
            if memsz > 0 {
                spans.push((vaddr, end, i));
            }
            let executable = ph.p_flags(e) & elf::PF_X != 0;
            loaded.push((vaddr..vaddr + filesz, executable));
            image_size = image_size.max(end);
        }
        if image_size == 0 {
            return Err(bad("no loadable segments"));
        }
        // Overlapping segments would overwrite each other's bytes in the image.
        spans.sort_unstable();
        for pair in spans.windows(2) {
            let ((_, end_a, a), (start_b, _, b)) = (pair[0], pair[1]);
            if start_b < end_a {
                return Err(bad(format!(
                    "segments {a} and {b} overlap at 0x{start_b:x}"
                )));
            }
        }
        let kernels = parse_metadata(&elf)?;
        Ok(CodeObject {
            bytes,
            image_size,
            kernels,
            loaded,
            elf,
        })
    }

    /// Names of the kernels (from `.kd` symbols), each once, in symbol-table order.
    pub fn kernel_names(&self) -> Vec<String> {
        let mut seen = std::collections::HashSet::new();
        self.elf
            .dynamic_symbols()
            .chain(self.elf.symbols())
            .filter_map(|s| s.name().ok()?.strip_suffix(".kd").map(str::to_string))
            .filter(|n| seen.insert(n.clone()))
            .collect()
    }

    /// The symbol of the kernel a caller names `name`: `name` itself when a kernel has that
    /// symbol, else the one kernel whose C++-mangled symbol names a function `name` (`scale`
    /// or `ns::scale` for `_Z5scalePfPKffi` or `_ZN2ns5scaleEPf`), as a HIP programmer calls
    /// it. Several such kernels (overloads, or one name in two namespaces) are an error that
    /// lists them; none leaves `name`, for [`CodeObject::descriptor_offset`] to report.
    pub fn resolve_kernel(&self, name: &str) -> Result<String> {
        let names = self.kernel_names();
        if names.iter().any(|n| n == name) {
            return Ok(name.to_string());
        }
        let matches: Vec<&String> = names
            .iter()
            .filter(|symbol| {
                source_name(symbol)
                    .is_some_and(|(qualified, last)| qualified == name || last == name)
            })
            .collect();
        match matches[..] {
            [] => Ok(name.to_string()),
            [one] => Ok(one.clone()),
            _ => Err(bad(format!(
                "kernel name {name:?} is ambiguous: it names {} kernels ({}); pass the \
                 mangled name of the one to load",
                matches.len(),
                matches
                    .iter()
                    .map(|s| s.as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            ))),
        }
    }

    /// Address (relative to the image) of `<name>.kd`.
    pub fn descriptor_offset(&self, name: &str) -> Result<u64> {
        let want = format!("{name}.kd");
        let Some(sym) = self
            .elf
            .dynamic_symbols()
            .chain(self.elf.symbols())
            .find(|s| s.name().is_ok_and(|n| n == want))
        else {
            let names = self.kernel_names();
            if names.is_empty() {
                return Err(bad(format!(
                    "no kernel named {name:?}: the code object defines no kernels at all \
                     (a HIP kernel is declared `__global__` or `__attribute__((global))`)"
                )));
            }
            let mut listed = names
                .iter()
                .take(NAMES_LISTED)
                .cloned()
                .collect::<Vec<_>>()
                .join(", ");
            if names.len() > NAMES_LISTED {
                listed += &format!(" and {} more", names.len() - NAMES_LISTED);
            }
            return Err(bad(format!(
                "no kernel named {name:?} (the code object has: {listed})"
            )));
        };
        if sym.is_undefined() {
            return Err(bad(format!("symbol {want} is undefined")));
        }
        let (at, size) = (sym.address(), sym.size());
        // A hand-written object may leave the size 0; anything else must be the descriptor's.
        if size != 0 && size != kd::KERNEL_DESCRIPTOR_SIZE as u64 {
            return Err(bad(format!(
                "symbol {want} is {size} bytes; a kernel descriptor is {}",
                kd::KERNEL_DESCRIPTOR_SIZE
            )));
        }
        // The command processor reads descriptors at 64-byte alignment (AMDGPU ABI), and the
        // image is loaded on a page.
        if at % 64 != 0 {
            return Err(bad(format!(
                "descriptor {want} at 0x{at:x} is not 64-byte aligned"
            )));
        }
        let end = at.saturating_add(kd::KERNEL_DESCRIPTOR_SIZE as u64);
        if !self
            .loaded
            .iter()
            .any(|(r, _)| r.start <= at && end <= r.end)
        {
            return Err(bad(format!(
                "descriptor {want} at 0x{at:x} does not lie in the file bytes of a loaded segment"
            )));
        }
        Ok(at)
    }

    /// The function symbols (kernels and the functions they call) as (name, address, size),
    /// by address.
    pub fn functions(&self) -> Vec<(String, u64, u64)> {
        let mut seen = std::collections::HashSet::new();
        let mut out: Vec<(String, u64, u64)> = self
            .elf
            .symbols()
            .chain(self.elf.dynamic_symbols())
            .filter(|s| s.kind() == object::SymbolKind::Text && !s.is_undefined())
            .filter_map(|s| Some((s.name().ok()?.to_string(), s.address(), s.size())))
            .filter(|(n, at, _)| seen.insert((n.clone(), *at)))
            .collect();
        out.sort_by_key(|&(_, at, _)| at);
        out
    }

    /// The `.text` section: its address and bytes.
    pub fn text(&self) -> Option<(u64, &'a [u8])> {
        use object::ObjectSection;
        let s = self.elf.section_by_name(".text")?;
        Some((s.address(), s.data().ok()?))
    }

    /// Whether `at..at + len` of the image holds file bytes of an executable segment.
    pub fn is_code(&self, at: u64, len: u64) -> bool {
        let end = at.saturating_add(len);
        self.loaded
            .iter()
            .any(|(r, exec)| *exec && r.start <= at && end <= r.end)
    }

    /// The loaded image: every PT_LOAD segment at its address, zero-filled gaps and bss, with
    /// `R_AMDGPU_RELATIVE64` relocations applied for a load at `base`.
    pub fn image(&self, base: u64) -> Result<Vec<u8>> {
        let e = self.elf.endian();
        // `parse` bounded the size by MAX_IMAGE_BYTES.
        let mut img = vec![0u8; self.image_size as usize];
        for (i, ph) in self.elf.elf_program_headers().iter().enumerate() {
            if ph.p_type(e) != elf::PT_LOAD {
                continue;
            }
            let data = ph
                .data(e, self.bytes)
                .map_err(|_| bad(format!("segment {i}: data lies outside the file")))?;
            // `parse` checked that the segment lies inside the image.
            let at = ph.p_vaddr(e) as usize;
            img[at..at + data.len()].copy_from_slice(data);
        }
        let names = self.elf.elf_section_table();
        for sh in names.iter() {
            let section = || {
                names
                    .section_name(e, sh)
                    .map(|n| String::from_utf8_lossy(n).into_owned())
                    .unwrap_or_else(|_| "?".into())
            };
            if sh.sh_type(e) == elf::SHT_REL && sh.sh_size(e) > 0 {
                return Err(Error::Unsupported(format!(
                    "relocation section {} without addends (SHT_REL)",
                    section()
                )));
            }
            if sh.sh_type(e) != elf::SHT_RELA {
                continue;
            }
            let relas: &[elf::Rela64<Endianness>] =
                sh.data_as_array(e, self.bytes).map_err(|_| {
                    bad(format!(
                        "relocation section {} lies outside the file",
                        section()
                    ))
                })?;
            for (k, r) in relas.iter().enumerate() {
                let ty = r.r_type(e, false);
                if ty == R_AMDGPU_NONE {
                    continue;
                }
                if ty != R_AMDGPU_RELATIVE64 {
                    return Err(Error::Unsupported(format!(
                        "relocation {k} of {} has type {ty}; hcq applies only \
                         R_AMDGPU_RELATIVE64 ({R_AMDGPU_RELATIVE64})",
                        section()
                    )));
                }
                let at = r.r_offset(e);
                let value = base.wrapping_add(r.r_addend(e) as u64);
                usize::try_from(at)
                    .ok()
                    .and_then(|at| img.get_mut(at..at.checked_add(8)?))
                    .ok_or_else(|| {
                        bad(format!(
                            "relocation {k} of {} patches 0x{at:x}, outside the \
                             {}-byte image",
                            section(),
                            self.image_size
                        ))
                    })?
                    .copy_from_slice(&value.to_le_bytes());
            }
        }
        Ok(img)
    }
}

/// Whether `bytes` is a relocatable AMDGPU ELF object (`ET_REL`, `EM_AMDGPU`), which must be
/// linked before it loads.
pub fn is_relocatable_amdgpu(bytes: &[u8]) -> bool {
    let half = |at: usize| {
        bytes
            .get(at..at + 2)
            .map(|b| u16::from_le_bytes([b[0], b[1]]))
    };
    bytes.starts_with(b"\x7fELF") && half(16) == Some(1) && half(18) == Some(224)
}

/// `EF_AMDGPU_MACH` (the low byte of `e_flags`) per target, as clang-19 writes it for each
/// `--offload-arch`.
const MACHS: &[(&str, u8)] = &[
    ("gfx900", 0x2c),
    ("gfx906", 0x2f),
    ("gfx908", 0x30),
    ("gfx90a", 0x3f),
    ("gfx940", 0x40),
    ("gfx941", 0x4b),
    ("gfx942", 0x4c),
    ("gfx1010", 0x33),
    ("gfx1011", 0x34),
    ("gfx1012", 0x35),
    ("gfx1030", 0x36),
    ("gfx1031", 0x37),
    ("gfx1032", 0x38),
    ("gfx1033", 0x39),
    ("gfx1034", 0x3e),
    ("gfx1035", 0x3d),
    ("gfx1036", 0x45),
    ("gfx1100", 0x41),
    ("gfx1101", 0x46),
    ("gfx1102", 0x47),
    ("gfx1103", 0x44),
    ("gfx1150", 0x43),
    ("gfx1151", 0x4a),
    ("gfx1152", 0x55),
    ("gfx1200", 0x48),
    ("gfx1201", 0x4e),
];

/// `gfx11-generic` (code object v6), which runs on every gfx11 target.
const MACH_GFX11_GENERIC: u8 = 0x54;

impl CodeObject<'_> {
    /// Checks that the object was built for `arch`, the target of device `device`: machine
    /// code for another target decodes into other instructions. A device whose target is not
    /// among the targets whose ELF machine number this loader knows (gfx9 to gfx12) is
    /// trusted with any object.
    pub fn check_target(&self, arch: &str, device: &str) -> Result<()> {
        let Some(&(_, want)) = MACHS.iter().find(|(a, _)| *a == arch) else {
            return Ok(());
        };
        let mach = self.elf.elf_header().e_flags(self.elf.endian()) as u8;
        if mach == want || (mach == MACH_GFX11_GENERIC && arch.starts_with("gfx11")) {
            return Ok(());
        }
        let built_for = match MACHS.iter().find(|(_, m)| *m == mach) {
            Some((a, _)) => a.to_string(),
            None if mach == MACH_GFX11_GENERIC => "gfx11-generic".to_string(),
            None => format!("an unknown target (EF_AMDGPU_MACH {mach:#x})"),
        };
        Err(bad(format!(
            "the code object is built for {built_for}; {device} is {arch}"
        )))
    }
}

/// Checks a descriptor against gfx11, this runtime and the code object: returns the entry
/// point's offset in the image.
pub fn validate_descriptor(
    name: &str,
    d: &KernelDescriptor,
    kd_offset: u64,
    co: &CodeObject<'_>,
) -> Result<u64> {
    d.check_gfx11()
        .map_err(|problem| bad(format!("kernel {name}: descriptor: {problem}")))?;
    if d.kernel_code_properties & kd::props::ENABLE_WAVEFRONT_SIZE32 == 0 {
        return Err(Error::Unsupported(format!(
            "kernel {name} is compiled for wave64; only wave32 is supported"
        )));
    }
    if d.kernarg_preload != 0 {
        return Err(Error::Unsupported(format!(
            "kernel {name} expects arguments preloaded into SGPRs (kernarg_preload \
             0x{:04x}); hcq passes them in memory only",
            d.kernarg_preload
        )));
    }
    let offset = d.kernel_code_entry_byte_offset;
    let entry = i64::try_from(kd_offset)
        .ok()
        .and_then(|kd| kd.checked_add(offset))
        .and_then(|e| u64::try_from(e).ok())
        .filter(|&e| co.is_code(e, 4));
    let Some(entry) = entry else {
        return Err(bad(format!(
            "kernel {name}: code entry (descriptor at 0x{kd_offset:x} + offset {offset}) lies \
             outside the loaded code"
        )));
    };
    if entry % 256 != 0 {
        return Err(bad(format!(
            "kernel {name}: code entry 0x{entry:x} is not 256-byte aligned"
        )));
    }
    if d.group_segment_fixed_size > hcq_amd_sys::regs::LDS_MAX_BYTES {
        return Err(bad(format!(
            "kernel {name}: group_segment_fixed_size asks for {} bytes of LDS; a gfx11 \
             workgroup has at most {}",
            d.group_segment_fixed_size,
            hcq_amd_sys::regs::LDS_MAX_BYTES
        )));
    }
    let layout = d.user_sgpr_layout();
    let rsrc2 = hcq_amd_sys::regs::PgmRsrc2(d.compute_pgm_rsrc2);
    if rsrc2.user_sgpr() < layout.count {
        return Err(bad(format!(
            "kernel {name}: descriptor enables {} user SGPRs but rsrc2 has {}",
            layout.count,
            rsrc2.user_sgpr()
        )));
    }
    Ok(entry)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mangled_symbols_give_the_function_they_name() {
        let name = |s: &str| source_name(s);
        let pair = |q: &str, l: &str| Some((q.to_string(), l.to_string()));
        assert_eq!(name("_Z5scalePfPKffi"), pair("scale", "scale"));
        assert_eq!(name("_ZN2ns5scaleEPf"), pair("ns::scale", "scale"));
        assert_eq!(name("_ZN1a1b3fooEv"), pair("a::b::foo", "foo"));
        assert_eq!(name("_ZNK3Foo3barEv"), pair("Foo::bar", "bar"));
        assert_eq!(name("_Z5scaleIfEvPT_"), pair("scale", "scale"));
        for not_a_name in [
            "scale",
            "_Z",
            "_Z9short",
            "_ZN2ns5scale",
            "_ZSt4swap",
            "_ZN2ns5scaleIiEEvv",
            "",
        ] {
            assert_eq!(name(not_a_name), None, "{not_a_name}");
        }
    }
}
