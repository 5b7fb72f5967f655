//! Code objects: the ELF a compiler emits for `amdgcn-amd-amdhsa`, its kernel descriptors and
//! its metadata note, and the layout of kernel arguments.

use crate::memory::GpuMemory;
use hcq_amd_sys::kd::{self, KernelDescriptor, UserSgprLayout};
use hcq_core::{Arg, Error, ProgramInfo, Result};
use object::elf;
use object::read::elf::{ElfFile64, FileHeader, ProgramHeader, Rela, SectionHeader};
use object::{Endianness, Object, ObjectSymbol};

/// `R_AMDGPU_RELATIVE64`: `base + addend`.
const R_AMDGPU_RELATIVE64: u32 = 13;
/// `R_AMDGPU_NONE`.
const R_AMDGPU_NONE: u32 = 0;
/// `ELFOSABI_AMDGPU_HSA`: the OS/ABI byte of code objects for the HSA runtime.
const ELFOSABI_AMDGPU_HSA: u8 = 64;
/// `NT_AMDGPU_METADATA`.
const NT_AMDGPU_METADATA: u32 = 32;

/// What a kernel argument holds, from the metadata's `.value_kind`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ArgKind {
    /// A pointer the caller passes (`global_buffer`).
    Buffer,
    /// A value the caller passes (`by_value`).
    Value,
    /// Filled by the runtime (`hidden_*`), named by its kind without the prefix.
    Hidden(String),
    /// Anything else the caller would have to pass; rejected at launch.
    Other(String),
}

/// One entry of a kernel's `.args`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ArgInfo {
    /// The parameter's name in the source, when the metadata keeps it.
    pub name: Option<String>,
    /// Byte offset in the kernel-argument segment.
    pub offset: u32,
    /// Bytes it occupies there.
    pub size: u32,
    /// What the caller passes (or the runtime fills in, for hidden arguments).
    pub kind: ArgKind,
}

impl ArgInfo {
    /// Whether the caller passes it (hidden arguments are the runtime's).
    pub fn is_explicit(&self) -> bool {
        !matches!(self.kind, ArgKind::Hidden(_))
    }
}

/// One kernel as the metadata describes it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KernelMeta {
    /// The kernel's name (`.name`: the source name, or the mangled one for C++).
    pub name: String,
    /// Its kernel-descriptor symbol (`.symbol`, the name with `.kd`).
    pub symbol: String,
    /// Its arguments, explicit and hidden, in segment order.
    pub args: Vec<ArgInfo>,
    /// Bytes of the kernel-argument segment (`.kernarg_segment_size`).
    pub kernarg_segment_size: u32,
    /// Its alignment (`.kernarg_segment_align`).
    pub kernarg_segment_align: u32,
    /// Most work-items per workgroup the kernel was compiled for, when the metadata says.
    pub max_flat_workgroup_size: Option<u32>,
    /// VGPRs and SGPRs the kernel uses (`.vgpr_count`, `.sgpr_count`), when the metadata says.
    pub vgpr_count: Option<u32>,
    /// See `vgpr_count`.
    pub sgpr_count: Option<u32>,
}

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
/// Largest `.kernarg_segment_align` honoured: the argument ring starts on a page, so any
/// alignment up to a page holds after the ring wraps.
pub const MAX_KERNARG_ALIGN: u32 = 4096;
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

fn bad(msg: impl Into<String>) -> Error {
    Error::InvalidCodeObject(msg.into())
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

fn parse_metadata(elf: &ElfFile64<'_, Endianness>) -> Result<Vec<KernelMeta>> {
    let e = elf.endian();
    let data = elf.data();
    for sh in elf.elf_section_table().iter() {
        if sh.sh_type(e) != elf::SHT_NOTE {
            continue;
        }
        let mut notes = match sh.notes(e, data) {
            Ok(Some(notes)) => notes,
            Ok(None) => continue,
            Err(err) => return Err(bad(format!("note section: {err}"))),
        };
        loop {
            let note = match notes.next() {
                Ok(Some(note)) => note,
                Ok(None) => break,
                Err(err) => return Err(bad(format!("note section: {err}"))),
            };
            if note.name() == b"AMDGPU" && note.n_type(e) == NT_AMDGPU_METADATA {
                return parse_msgpack(note.desc());
            }
        }
    }
    Ok(Vec::new())
}

/// `.value_kind`s the AMDHSA metadata defines for arguments the caller passes, besides
/// `global_buffer` and `by_value`; hcq knows them but cannot pass them.
const OTHER_VALUE_KINDS: &[&str] = &[
    "dynamic_shared_pointer",
    "sampler",
    "image",
    "pipe",
    "queue",
];

/// The kind of a MessagePack value, for error messages.
fn kind_of(v: &rmpv::Value) -> String {
    use rmpv::Value;
    match v {
        Value::Nil => "nil".into(),
        Value::Boolean(b) => format!("the boolean {b}"),
        Value::Integer(i) => format!("the integer {i}"),
        Value::F32(_) | Value::F64(_) => format!("the float {v}"),
        Value::String(s) if s.as_str().is_none() => "a string that is not UTF-8".into(),
        Value::String(_) => format!("the string {v}"),
        Value::Binary(b) => format!("{} bytes of binary", b.len()),
        Value::Array(a) => format!("a list of {}", a.len()),
        Value::Map(m) => format!("a map of {}", m.len()),
        Value::Ext(t, _) => format!("an extension value of type {t}"),
    }
}

/// The value of `key` in the map `v` (`None` if `v` is no map or lacks the key).
fn lookup<'v>(v: &'v rmpv::Value, key: &str) -> Option<&'v rmpv::Value> {
    v.as_map()?
        .iter()
        .find(|(k, _)| k.as_str() == Some(key))
        .map(|(_, v)| v)
}

/// `key` of `v` as a string, if present; `what` names `v` in errors.
fn meta_str(v: &rmpv::Value, key: &str, what: &str) -> Result<Option<String>> {
    match lookup(v, key) {
        None => Ok(None),
        Some(x) => x.as_str().map(|s| Some(s.to_string())).ok_or_else(|| {
            bad(format!(
                "metadata: {key} of {what} is {}, not a string",
                kind_of(x)
            ))
        }),
    }
}

/// `key` of `v` as a 32-bit unsigned integer, if present; `what` names `v` in errors.
fn meta_u32(v: &rmpv::Value, key: &str, what: &str) -> Result<Option<u32>> {
    let Some(x) = lookup(v, key) else {
        return Ok(None);
    };
    let n = x.as_u64().ok_or_else(|| {
        bad(format!(
            "metadata: {key} of {what} is {}, not a non-negative integer",
            kind_of(x)
        ))
    })?;
    u32::try_from(n).map(Some).map_err(|_| {
        bad(format!(
            "metadata: {key} of {what} is {n}, more than 32 bits"
        ))
    })
}

fn parse_msgpack(mut desc: &[u8]) -> Result<Vec<KernelMeta>> {
    let root = rmpv::decode::read_value(&mut desc)
        .map_err(|e| bad(format!("metadata note is not MessagePack: {e}")))?;
    if root.as_map().is_none() {
        return Err(bad(format!("metadata is {}, not a map", kind_of(&root))));
    }
    let kernels =
        lookup(&root, "amdhsa.kernels").ok_or_else(|| bad("metadata lacks amdhsa.kernels"))?;
    let kernels = kernels.as_array().ok_or_else(|| {
        bad(format!(
            "amdhsa.kernels is {}, not a list",
            kind_of(kernels)
        ))
    })?;
    let mut out: Vec<KernelMeta> = Vec::new();
    for (i, k) in kernels.iter().enumerate() {
        let entry = format!("kernel {i} of amdhsa.kernels");
        if k.as_map().is_none() {
            return Err(bad(format!(
                "metadata: {entry} is {}, not a map",
                kind_of(k)
            )));
        }
        let name = meta_str(k, ".name", &entry)?
            .ok_or_else(|| bad(format!("metadata: {entry} has no .name")))?;
        if out.iter().any(|m| m.name == name) {
            return Err(bad(format!("metadata lists kernel {name} twice")));
        }
        let what = format!("kernel {name}");
        let mut args = Vec::new();
        if let Some(list) = lookup(k, ".args") {
            let list = list.as_array().ok_or_else(|| {
                bad(format!(
                    "metadata: .args of {what} is {}, not a list",
                    kind_of(list)
                ))
            })?;
            for (j, a) in list.iter().enumerate() {
                let arg = format!("argument {j} of kernel {name}");
                if a.as_map().is_none() {
                    return Err(bad(format!("metadata: {arg} is {}, not a map", kind_of(a))));
                }
                let kind = meta_str(a, ".value_kind", &arg)?
                    .ok_or_else(|| bad(format!("metadata: {arg} has no .value_kind")))?;
                let kind = match kind.as_str() {
                    "global_buffer" => ArgKind::Buffer,
                    "by_value" => ArgKind::Value,
                    h if h.starts_with("hidden_") => {
                        ArgKind::Hidden(h["hidden_".len()..].to_string())
                    }
                    known if OTHER_VALUE_KINDS.contains(&known) => {
                        ArgKind::Other(known.to_string())
                    }
                    unknown => {
                        return Err(bad(format!(
                            "metadata: {arg} has .value_kind {unknown:?}, which the AMDHSA \
                             metadata does not define"
                        )))
                    }
                };
                let info = ArgInfo {
                    name: meta_str(a, ".name", &arg)?,
                    offset: meta_u32(a, ".offset", &arg)?
                        .ok_or_else(|| bad(format!("metadata: {arg} has no .offset")))?,
                    size: meta_u32(a, ".size", &arg)?
                        .ok_or_else(|| bad(format!("metadata: {arg} has no .size")))?,
                    kind,
                };
                // The runtime writes a buffer's 64-bit address there.
                if info.kind == ArgKind::Buffer && info.size != 8 {
                    return Err(bad(format!(
                        "metadata: {arg} is a global_buffer of {} bytes; pointers are 8",
                        info.size
                    )));
                }
                args.push(info);
            }
        }
        let kernarg_segment_size = meta_u32(k, ".kernarg_segment_size", &what)?;
        if let Some(size) = kernarg_segment_size {
            check_arg_layout(&name, &args, size, ".kernarg_segment_size")?;
        }
        let kernarg_segment_align = meta_u32(k, ".kernarg_segment_align", &what)?.unwrap_or(8);
        if !kernarg_segment_align.is_power_of_two() || kernarg_segment_align > MAX_KERNARG_ALIGN {
            return Err(bad(format!(
                "metadata: .kernarg_segment_align of {what} is {kernarg_segment_align}; it \
                 must be a power of two up to {MAX_KERNARG_ALIGN}"
            )));
        }
        let max_flat_workgroup_size = meta_u32(k, ".max_flat_workgroup_size", &what)?;
        if max_flat_workgroup_size == Some(0) {
            return Err(bad(format!(
                "metadata: .max_flat_workgroup_size of {what} is 0"
            )));
        }
        out.push(KernelMeta {
            symbol: meta_str(k, ".symbol", &what)?.unwrap_or_else(|| format!("{name}.kd")),
            kernarg_segment_size: kernarg_segment_size.unwrap_or(0),
            kernarg_segment_align,
            max_flat_workgroup_size,
            vgpr_count: meta_u32(k, ".vgpr_count", &what)?,
            sgpr_count: meta_u32(k, ".sgpr_count", &what)?,
            name,
            args,
        });
    }
    Ok(out)
}

/// Checks that every argument lies inside a `segment_size`-byte argument segment and that no
/// two overlap; `limit` names where the size came from.
pub fn check_arg_layout(
    kernel: &str,
    args: &[ArgInfo],
    segment_size: u32,
    limit: &str,
) -> Result<()> {
    let label = |a: &ArgInfo| match &a.name {
        Some(n) => format!("argument {n} ({})", type_of(a)),
        None => format!("an argument ({})", type_of(a)),
    };
    let mut spans: Vec<(u64, u64, &ArgInfo)> = Vec::with_capacity(args.len());
    for a in args {
        let end = a.offset as u64 + a.size as u64;
        if end > segment_size as u64 {
            return Err(bad(format!(
                "kernel {kernel}: {} at bytes {}..{end} lies beyond the {segment_size}-byte \
                 argument segment ({limit})",
                label(a),
                a.offset
            )));
        }
        if a.size > 0 {
            spans.push((a.offset as u64, end, a));
        }
    }
    spans.sort_by_key(|&(start, end, _)| (start, end));
    for pair in spans.windows(2) {
        let ((start_a, end_a, a), (start_b, end_b, b)) = (pair[0], pair[1]);
        if start_b < end_a {
            return Err(bad(format!(
                "kernel {kernel}: {} at bytes {start_a}..{end_a} overlaps {} at bytes \
                 {start_b}..{end_b}",
                label(a),
                label(b)
            )));
        }
    }
    Ok(())
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

/// A kernel uploaded to a GPU, ready to launch.
#[derive(Debug)]
pub struct AmdProgram {
    /// The kernel's name as its metadata gives it.
    pub name: String,
    /// The uploaded image; kept alive as long as the program, and longer when work that may
    /// run it is still queued ([`crate::AmdDevice::free_after_work`]).
    pub image: std::sync::Arc<GpuMemory>,
    /// Its kernel descriptor, as the code object holds it.
    pub descriptor: KernelDescriptor,
    /// `COMPUTE_PGM_RSRC1` as dispatched: the descriptor's, with the bits the device's
    /// architecture needs ([`hcq_amd_sys::regs::dispatch_rsrc1_bits`]).
    pub rsrc1: u32,
    /// GPU address of the first instruction.
    pub code_entry: u64,
    /// Which user SGPRs the dispatch must load, and where (from the descriptor's enables).
    pub user_sgprs: UserSgprLayout,
    /// Arguments from the metadata (empty when the code object has none).
    pub args: Vec<ArgInfo>,
    /// Bytes to reserve for kernel arguments, hidden ones included.
    pub kernarg_size: u32,
    /// Alignment of the kernel-argument buffer (at least 16).
    pub kernarg_align: u32,
    /// Most work-items per workgroup the kernel was compiled for, when its metadata says.
    pub max_workgroup_size: Option<u32>,
    /// Its resources and occupancy on the device it was loaded on.
    pub info: ProgramInfo,
    pub(crate) device_gpu_id: u32,
    /// Bytes of scratch each wave needs (0 for none): every queue that launches the program
    /// needs a scratch ring at least this large.
    pub(crate) wave_scratch: u64,
}

/// What kernel `d` (with metadata `meta`) asks of a device of architecture `arch`, and the
/// occupancy that allows.
pub fn program_info(arch: &str, d: &KernelDescriptor, meta: Option<&KernelMeta>) -> ProgramInfo {
    use hcq_amd_sys::occupancy::{self, Limit};
    let allocated_vgprs = d.wave32_vgprs();
    let vgprs = meta.and_then(|m| m.vgpr_count).unwrap_or(allocated_vgprs);
    let max_workgroup_size = meta.and_then(|m| m.max_flat_workgroup_size).unwrap_or(1024);
    let (waves_per_simd, limit) =
        occupancy::waves_per_simd(arch, vgprs, d.group_segment_fixed_size, max_workgroup_size);
    ProgramInfo {
        vgprs,
        allocated_vgprs,
        sgprs: meta.and_then(|m| m.sgpr_count),
        static_lds: d.group_segment_fixed_size,
        max_dynamic_lds: hcq_amd_sys::regs::LDS_MAX_BYTES
            .saturating_sub(d.group_segment_fixed_size),
        scratch_per_lane: d.private_segment_fixed_size,
        max_workgroup_size,
        wave_size: occupancy::WAVE_LANES,
        waves_per_simd,
        occupancy_limit: match limit {
            Limit::WaveSlots => "wave slots",
            Limit::Registers => "registers",
            Limit::Lds => "LDS",
        },
    }
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

impl AmdProgram {
    /// Writes `bytes` into the kernel's `hidden_dynamic_lds_size` argument in `segment`, when
    /// it has one (code object v5 kernels read their dynamic LDS size there).
    pub fn write_dynamic_lds_size(&self, bytes: u32, segment: &mut [u8]) {
        let slot = self
            .args
            .iter()
            .find(|a| matches!(&a.kind, ArgKind::Hidden(k) if k == "dynamic_lds_size"));
        if let Some(a) = slot {
            let at = a.offset as usize;
            let len = (a.size as usize).min(4);
            if let Some(dst) = segment.get_mut(at..at + len) {
                dst.copy_from_slice(&bytes.to_le_bytes()[..len]);
            }
        }
    }

    /// Checks the caller's arguments against the kernel's and writes the argument segment
    /// (explicit and hidden) into `out`, which is `kernarg_size` bytes.
    pub fn write_kernargs<B>(
        &self,
        args: &[Arg<B>],
        address_of: impl Fn(&B) -> Result<u64>,
        global: [u32; 3],
        local: [u32; 3],
        out: &mut [u8],
    ) -> Result<()> {
        let threads: u64 = local.iter().map(|&x| x as u64).product();
        if let Some(max) = self.max_workgroup_size {
            if threads > max as u64 {
                return Err(Error::InvalidArgument(format!(
                    "kernel {} was compiled for workgroups of at most {max} work-items \
                     (.max_flat_workgroup_size), launched with {threads} ({local:?})",
                    self.name
                )));
            }
        }
        let segment = out.len();
        let name = &self.name;
        // Load checks the metadata's layout against the segment; this keeps any write that
        // would still fall outside from happening.
        let mut put = |offset: u32, bytes: &[u8]| -> Result<()> {
            let at = offset as usize;
            out.get_mut(at..at + bytes.len())
                .ok_or_else(|| {
                    Error::InvalidArgument(format!(
                        "kernel {name}: {} bytes at offset {at} do not fit its {segment}-byte \
                         argument segment",
                        bytes.len()
                    ))
                })?
                .copy_from_slice(bytes);
            Ok(())
        };
        if self.args.is_empty() {
            // No metadata: pack pointers and values in order with natural alignment and check the
            // total against the descriptor.
            let mut offsets = Vec::with_capacity(args.len());
            let mut off = 0u64;
            for a in args {
                let size = a.size() as u64;
                let align = size.clamp(1, 8).next_power_of_two();
                off = off.next_multiple_of(align);
                offsets.push(off as u32);
                off += size;
            }
            if off != self.descriptor.kernarg_size as u64 {
                return Err(Error::InvalidArgument(format!(
                    "kernel {} takes {} bytes of arguments, the {} given take {off}",
                    self.name,
                    self.descriptor.kernarg_size,
                    args.len()
                )));
            }
            for (a, off) in args.iter().zip(offsets) {
                match a {
                    Arg::Buffer(b) => put(off, &address_of(b)?.to_le_bytes())?,
                    s => put(off, &s.scalar_bytes().unwrap_or_default())?,
                }
            }
            return Ok(());
        }
        let explicit: Vec<&ArgInfo> = self.args.iter().filter(|a| a.is_explicit()).collect();
        if explicit.len() != args.len() {
            return Err(Error::InvalidArgument(format!(
                "kernel {} takes {} arguments ({}), got {}",
                self.name,
                explicit.len(),
                explicit
                    .iter()
                    .map(|a| describe(a))
                    .collect::<Vec<_>>()
                    .join(", "),
                args.len()
            )));
        }
        for (i, (info, a)) in explicit.iter().zip(args).enumerate() {
            let label = || match &info.name {
                Some(n) => format!("argument {i} ({n}) of kernel {}", self.name),
                None => format!("argument {i} of kernel {}", self.name),
            };
            match (&info.kind, a) {
                (ArgKind::Buffer, Arg::Buffer(b)) => {
                    put(info.offset, &address_of(b)?.to_le_bytes())?
                }
                (ArgKind::Buffer, other) => {
                    return Err(Error::InvalidArgument(format!(
                        "{} is a buffer, got {}",
                        label(),
                        other.type_name()
                    )))
                }
                (ArgKind::Value, Arg::Buffer(_)) => {
                    return Err(Error::InvalidArgument(format!(
                        "{} is a {}-byte value, got a buffer",
                        label(),
                        info.size
                    )))
                }
                (ArgKind::Value, s) => {
                    if s.size() as u32 != info.size {
                        return Err(Error::InvalidArgument(format!(
                            "{} is {} bytes, got a {}-byte {}",
                            label(),
                            info.size,
                            s.size(),
                            s.type_name()
                        )));
                    }
                    put(info.offset, &s.scalar_bytes().unwrap_or_default())?;
                }
                (ArgKind::Other(kind), _) | (ArgKind::Hidden(kind), _) => {
                    return Err(Error::Unsupported(format!(
                        "{} has kind {kind}, which hcq cannot pass",
                        label()
                    )))
                }
            }
        }
        let dims_used = if global[2] > 1 || local[2] > 1 {
            3u16
        } else if global[1] > 1 || local[1] > 1 {
            2
        } else {
            1
        };
        for info in self.args.iter() {
            let ArgKind::Hidden(kind) = &info.kind else {
                continue;
            };
            let value: u64 = match kind.as_str() {
                "block_count_x" => global[0] as u64,
                "block_count_y" => global[1] as u64,
                "block_count_z" => global[2] as u64,
                "group_size_x" => local[0] as u64,
                "group_size_y" => local[1] as u64,
                "group_size_z" => local[2] as u64,
                "grid_dims" => dims_used as u64,
                // Grids are whole workgroups, so no partial workgroup remains; there are no
                // global offsets; and the buffers and pointers hcq does not provide (printf,
                // hostcall, heap, queue) are null, which newer kinds also get.
                _ => 0,
            };
            let bytes = value.to_le_bytes();
            put(info.offset, &bytes[..(info.size as usize).min(8)])?;
        }
        Ok(())
    }
}

/// What an argument holds, for messages: `buffer`, `4-byte value`, or its kind.
fn type_of(a: &ArgInfo) -> String {
    match &a.kind {
        ArgKind::Buffer => "buffer".to_string(),
        ArgKind::Value => format!("{}-byte value", a.size),
        ArgKind::Hidden(k) => format!("hidden_{k}"),
        ArgKind::Other(k) => k.clone(),
    }
}

fn describe(a: &ArgInfo) -> String {
    let ty = type_of(a);
    match &a.name {
        Some(n) => format!("{n}: {ty}"),
        None => ty,
    }
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
    use rmpv::Value;

    fn arg(name: &str, offset: i64, size: i64, kind: &str) -> Value {
        Value::Map(vec![
            (".name".into(), name.into()),
            (".offset".into(), offset.into()),
            (".size".into(), size.into()),
            (".value_kind".into(), kind.into()),
        ])
    }

    /// Metadata of one kernel `k(int* x, int n)` with its hidden block count, 24 bytes.
    fn kernel() -> Value {
        Value::Map(vec![
            (".name".into(), "k".into()),
            (".symbol".into(), "k.kd".into()),
            (".kernarg_segment_size".into(), 24.into()),
            (".kernarg_segment_align".into(), 8.into()),
            (
                ".args".into(),
                Value::Array(vec![
                    arg("x", 0, 8, "global_buffer"),
                    arg("n", 8, 4, "by_value"),
                    arg("", 16, 4, "hidden_block_count_x"),
                ]),
            ),
        ])
    }

    fn root(kernels: Vec<Value>) -> Value {
        Value::Map(vec![("amdhsa.kernels".into(), Value::Array(kernels))])
    }

    fn encode(v: &Value) -> Vec<u8> {
        let mut out = Vec::new();
        rmpv::encode::write_value(&mut out, v).unwrap();
        out
    }

    fn set(map: &mut Value, key: &str, value: Value) {
        let Value::Map(m) = map else {
            panic!("not a map")
        };
        m.retain(|(k, _)| k.as_str() != Some(key));
        m.push((key.into(), value));
    }

    fn remove(map: &mut Value, key: &str) {
        let Value::Map(m) = map else {
            panic!("not a map")
        };
        m.retain(|(k, _)| k.as_str() != Some(key));
    }

    /// Parses metadata of the kernel after `edit`; the error message when it fails.
    fn parse_edited(edit: impl FnOnce(&mut Value)) -> Result<Vec<KernelMeta>, String> {
        let mut k = kernel();
        edit(&mut k);
        parse_msgpack(&encode(&root(vec![k]))).map_err(|e| {
            assert!(matches!(e, Error::InvalidCodeObject(_)), "{e:?}");
            e.to_string()
        })
    }

    fn edit_arg(k: &mut Value, index: usize, key: &str, value: Value) {
        let Value::Map(m) = k else {
            panic!("not a map")
        };
        let (_, Value::Array(args)) = m
            .iter_mut()
            .find(|(k, _)| k.as_str() == Some(".args"))
            .unwrap()
        else {
            panic!("no args")
        };
        set(&mut args[index], key, value);
    }

    #[test]
    fn well_formed_metadata_parses() {
        let m = parse_edited(|_| {}).unwrap();
        assert_eq!(m.len(), 1);
        assert_eq!(m[0].kernarg_segment_size, 24);
        assert_eq!(m[0].args[2].kind, ArgKind::Hidden("block_count_x".into()));
    }

    #[test]
    fn numbers_of_the_wrong_type_or_range_are_named() {
        let cases: [(&str, Value, &str); 8] = [
            (
                ".offset",
                "8".into(),
                r#".offset of argument 1 of kernel k is the string "8""#,
            ),
            (
                ".offset",
                (-8).into(),
                "is the integer -8, not a non-negative integer",
            ),
            (
                ".offset",
                ((1u64 << 32) + 8).into(),
                "is 4294967304, more than 32 bits",
            ),
            (".size", 2.5.into(), "the float 2.5"),
            (
                ".size",
                Value::Nil,
                ".size of argument 1 of kernel k is nil",
            ),
            (".size", u64::MAX.into(), "more than 32 bits"),
            (
                ".value_kind",
                3.into(),
                ".value_kind of argument 1 of kernel k is the integer 3",
            ),
            (
                ".name",
                Value::Boolean(true),
                ".name of argument 1 of kernel k is the boolean",
            ),
        ];
        for (key, value, needle) in cases {
            let e = parse_edited(|k| edit_arg(k, 1, key, value.clone())).unwrap_err();
            assert!(e.contains(needle), "{key} = {value}: {e}");
        }
        let e = parse_edited(|k| set(k, ".kernarg_segment_size", (-1).into())).unwrap_err();
        assert!(e.contains(".kernarg_segment_size of kernel k"), "{e}");
        // A string whose bytes are not UTF-8: encode a placeholder, then replace its bytes.
        let mut k = kernel();
        edit_arg(&mut k, 0, ".name", "\u{1}\u{2}".into());
        let mut bytes = encode(&root(vec![k]));
        let at = bytes.windows(2).position(|w| w == [1, 2]).unwrap();
        bytes[at..at + 2].copy_from_slice(&[0xff, 0xfe]);
        let e = parse_msgpack(&bytes).unwrap_err().to_string();
        assert!(e.contains("not UTF-8"), "{e}");
    }

    #[test]
    fn missing_keys_and_wrong_shapes_are_named() {
        for key in [".offset", ".size", ".value_kind"] {
            let e = parse_edited(|k| {
                let Value::Map(m) = k else { unreachable!() };
                let (_, Value::Array(args)) = m
                    .iter_mut()
                    .find(|(k, _)| k.as_str() == Some(".args"))
                    .unwrap()
                else {
                    unreachable!()
                };
                remove(&mut args[0], key);
            })
            .unwrap_err();
            assert!(
                e.contains(&format!("argument 0 of kernel k has no {key}")),
                "{e}"
            );
        }
        let e = parse_edited(|k| set(k, ".args", "x".into())).unwrap_err();
        assert!(e.contains(".args of kernel k is the string"), "{e}");
        let e = parse_edited(|k| set(k, ".args", Value::Array(vec![3.into()]))).unwrap_err();
        assert!(
            e.contains("argument 0 of kernel k is the integer 3, not a map"),
            "{e}"
        );
        let e = parse_edited(|k| remove(k, ".name")).unwrap_err();
        assert!(e.contains("kernel 0 of amdhsa.kernels has no .name"), "{e}");
        // A kernel without .args takes none.
        assert!(parse_edited(|k| remove(k, ".args")).unwrap()[0]
            .args
            .is_empty());

        for (root, needle) in [
            (Value::Array(vec![]), "metadata is a list of 0, not a map"),
            (Value::Map(vec![]), "lacks amdhsa.kernels"),
            (
                Value::Map(vec![("amdhsa.kernels".into(), 7.into())]),
                "amdhsa.kernels is the integer 7, not a list",
            ),
            (root(vec![kernel(), kernel()]), "lists kernel k twice"),
        ] {
            let e = parse_msgpack(&encode(&root)).unwrap_err().to_string();
            assert!(e.contains(needle), "{e}");
        }
    }

    #[test]
    fn value_kinds_outside_the_metadata_format_are_refused() {
        let e =
            parse_edited(|k| edit_arg(k, 1, ".value_kind", "vlobal_buffer".into())).unwrap_err();
        assert!(e.contains(r#".value_kind "vlobal_buffer""#), "{e}");
        let e = parse_edited(|k| edit_arg(k, 1, ".value_kind", "".into())).unwrap_err();
        assert!(e.contains(r#".value_kind """#), "{e}");
        // Defined kinds hcq cannot pass load, and fail at launch.
        let m = parse_edited(|k| edit_arg(k, 1, ".value_kind", "image".into())).unwrap();
        assert_eq!(m[0].args[1].kind, ArgKind::Other("image".into()));
    }

    #[test]
    fn arguments_must_fit_the_segment_without_overlapping() {
        let e = parse_edited(|k| edit_arg(k, 1, ".offset", 22.into())).unwrap_err();
        assert!(
            e.contains("argument n (4-byte value) at bytes 22..26 lies beyond the 24-byte"),
            "{e}"
        );
        let e = parse_edited(|k| edit_arg(k, 1, ".offset", 4.into())).unwrap_err();
        assert!(
            e.contains("argument x (buffer) at bytes 0..8 overlaps argument n (4-byte value) at bytes 4..8"),
            "{e}"
        );
        let e = parse_edited(|k| edit_arg(k, 2, ".offset", 8.into())).unwrap_err();
        assert!(e.contains("overlaps"), "{e}");
        let e = parse_edited(|k| set(k, ".kernarg_segment_size", 12.into())).unwrap_err();
        assert!(
            e.contains("lies beyond the 12-byte argument segment"),
            "{e}"
        );
        let e = parse_edited(|k| edit_arg(k, 0, ".size", 4.into())).unwrap_err();
        assert!(e.contains("global_buffer of 4 bytes"), "{e}");
        // Offsets near 2^32 do not wrap around.
        let e = parse_edited(|k| edit_arg(k, 1, ".offset", u32::MAX.into())).unwrap_err();
        assert!(e.contains("4294967295..4294967299"), "{e}");
    }

    #[test]
    fn alignment_and_workgroup_limits_are_checked() {
        for align in [0u64, 3, 8192, 1 << 31] {
            let e = parse_edited(|k| set(k, ".kernarg_segment_align", align.into())).unwrap_err();
            assert!(e.contains("power of two up to 4096"), "{align}: {e}");
        }
        let e = parse_edited(|k| set(k, ".max_flat_workgroup_size", 0.into())).unwrap_err();
        assert!(
            e.contains(".max_flat_workgroup_size of kernel k is 0"),
            "{e}"
        );
        let m = parse_edited(|k| set(k, ".max_flat_workgroup_size", 256.into())).unwrap();
        assert_eq!(m[0].max_flat_workgroup_size, Some(256));
    }

    #[test]
    fn hostile_encodings_fail_cleanly() {
        // Nesting deeper than the decoder allows, and lengths no data backs.
        let deep = vec![0x91u8; 100_000];
        let mut long_list = vec![0x81, 0xae];
        long_list.extend(b"amdhsa.kernels");
        long_list.extend([0xdd, 0xff, 0xff, 0xff, 0xff]);
        for bytes in [
            deep,
            vec![0xdf, 0xff, 0xff, 0xff, 0xff],
            vec![0xdb, 0xff, 0xff, 0xff, 0xff],
            long_list,
            vec![],
        ] {
            let e = parse_msgpack(&bytes).unwrap_err();
            assert!(matches!(e, Error::InvalidCodeObject(_)), "{e:?}");
        }
    }
}
