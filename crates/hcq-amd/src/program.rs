//! Code objects: the ELF a compiler emits for `amdgcn-amd-amdhsa`, its kernel descriptors and
//! its metadata note, and the layout of kernel arguments.

use crate::memory::GpuMemory;
use hcq_amd_sys::kd::{self, KernelDescriptor, UserSgprLayout};
use hcq_core::{Arg, Error, Result};
use object::elf;
use object::read::elf::{ElfFile64, FileHeader, ProgramHeader, Rela, SectionHeader};
use object::{Endianness, Object, ObjectSymbol};

/// `R_AMDGPU_RELATIVE64`: `base + addend`.
const R_AMDGPU_RELATIVE64: u32 = 13;
/// `R_AMDGPU_NONE`.
const R_AMDGPU_NONE: u32 = 0;
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
    pub name: Option<String>,
    pub offset: u32,
    pub size: u32,
    pub kind: ArgKind,
}

impl ArgInfo {
    pub fn is_explicit(&self) -> bool {
        !matches!(self.kind, ArgKind::Hidden(_))
    }
}

/// One kernel as the metadata describes it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KernelMeta {
    pub name: String,
    pub symbol: String,
    pub args: Vec<ArgInfo>,
    pub kernarg_segment_size: u32,
    pub kernarg_segment_align: u32,
}

/// A copy of a code object aligned for the ELF reader, which reads headers in place and needs
/// 8-byte alignment that an arbitrary `&[u8]` (a sub-slice, `include_bytes!`) does not have.
pub struct AlignedCodeObject {
    words: Vec<u64>,
    len: usize,
}

impl AlignedCodeObject {
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

    pub fn bytes(&self) -> &[u8] {
        // SAFETY: the first `len` bytes of `words` were initialised from the source slice.
        unsafe { std::slice::from_raw_parts(self.words.as_ptr() as *const u8, self.len) }
    }
}

/// A parsed code object, before upload.
#[derive(Debug)]
pub struct CodeObject<'a> {
    bytes: &'a [u8],
    /// Bytes the loaded image spans (highest segment end).
    pub image_size: u64,
    pub kernels: Vec<KernelMeta>,
    elf: ElfFile64<'a, Endianness>,
}

fn bad(msg: impl Into<String>) -> Error {
    Error::InvalidCodeObject(msg.into())
}

impl<'a> CodeObject<'a> {
    pub fn parse(bytes: &'a [u8]) -> Result<Self> {
        let elf = ElfFile64::<Endianness>::parse(bytes)
            .map_err(|e| bad(format!("not a 64-bit ELF: {e}")))?;
        let hdr = elf.elf_header();
        let e = elf.endian();
        if hdr.e_machine(e) != elf::EM_AMDGPU {
            return Err(bad(format!(
                "ELF machine {} is not AMDGPU",
                hdr.e_machine(e)
            )));
        }
        let mut image_size = 0u64;
        for ph in elf.elf_program_headers() {
            if ph.p_type(e) == elf::PT_LOAD {
                let end = ph
                    .p_vaddr(e)
                    .checked_add(ph.p_memsz(e))
                    .ok_or_else(|| bad("segment address overflows"))?;
                if ph.p_filesz(e) > ph.p_memsz(e) {
                    return Err(bad("segment file size exceeds its memory size"));
                }
                image_size = image_size.max(end);
            }
        }
        if image_size == 0 {
            return Err(bad("no loadable segments"));
        }
        if image_size > 1 << 32 {
            return Err(bad(format!(
                "image of {image_size} bytes is implausibly large"
            )));
        }
        let kernels = parse_metadata(&elf)?;
        Ok(CodeObject {
            bytes,
            image_size,
            kernels,
            elf,
        })
    }

    /// Names of the kernels (from `.kd` symbols).
    pub fn kernel_names(&self) -> Vec<String> {
        self.elf
            .dynamic_symbols()
            .chain(self.elf.symbols())
            .filter_map(|s| s.name().ok()?.strip_suffix(".kd").map(str::to_string))
            .fold(Vec::new(), |mut v, n| {
                if !v.contains(&n) {
                    v.push(n);
                }
                v
            })
    }

    /// Address (relative to the image) of `<name>.kd`.
    pub fn descriptor_offset(&self, name: &str) -> Result<u64> {
        let want = format!("{name}.kd");
        self.elf
            .dynamic_symbols()
            .chain(self.elf.symbols())
            .find(|s| s.name().is_ok_and(|n| n == want))
            .map(|s| s.address())
            .ok_or_else(|| {
                let names = self.kernel_names();
                bad(format!(
                    "no kernel named {name:?} (the code object has: {})",
                    names.join(", ")
                ))
            })
    }

    /// The loaded image: every PT_LOAD segment at its address, zero-filled gaps and bss, with
    /// `R_AMDGPU_RELATIVE64` relocations applied for a load at `base`.
    pub fn image(&self, base: u64) -> Result<Vec<u8>> {
        let e = self.elf.endian();
        let mut img = vec![0u8; self.image_size as usize];
        for ph in self.elf.elf_program_headers() {
            if ph.p_type(e) != elf::PT_LOAD {
                continue;
            }
            let data = ph
                .data(e, self.bytes)
                .map_err(|_| bad("segment data lies outside the file"))?;
            let at = ph.p_vaddr(e) as usize;
            img[at..at + data.len()].copy_from_slice(data);
        }
        for sh in self.elf.elf_section_table().iter() {
            if sh.sh_type(e) != elf::SHT_RELA {
                continue;
            }
            let relas: &[elf::Rela64<Endianness>] = sh
                .data_as_array(e, self.bytes)
                .map_err(|_| bad("relocation section lies outside the file"))?;
            for r in relas {
                let ty = r.r_type(e, false);
                if ty == R_AMDGPU_NONE {
                    continue;
                }
                if ty != R_AMDGPU_RELATIVE64 {
                    return Err(Error::Unsupported(format!(
                        "relocation type {ty} in code object"
                    )));
                }
                let at = r.r_offset(e) as usize;
                let value = base.wrapping_add(r.r_addend(e) as u64);
                img.get_mut(at..at.wrapping_add(8))
                    .ok_or_else(|| bad("relocation outside the image"))?
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
        let Ok(Some(mut notes)) = sh.notes(e, data) else {
            continue;
        };
        while let Ok(Some(note)) = notes.next() {
            if note.name() == b"AMDGPU" && note.n_type(e) == NT_AMDGPU_METADATA {
                return parse_msgpack(note.desc());
            }
        }
    }
    Ok(Vec::new())
}

fn parse_msgpack(mut desc: &[u8]) -> Result<Vec<KernelMeta>> {
    use rmpv::Value;
    let root = rmpv::decode::read_value(&mut desc)
        .map_err(|e| bad(format!("metadata note is not MessagePack: {e}")))?;
    let get = |v: &'_ Value, key: &str| -> Option<Value> {
        v.as_map()?
            .iter()
            .find(|(k, _)| k.as_str() == Some(key))
            .map(|(_, v)| v.clone())
    };
    let kernels =
        get(&root, "amdhsa.kernels").ok_or_else(|| bad("metadata lacks amdhsa.kernels"))?;
    let mut out = Vec::new();
    for k in kernels
        .as_array()
        .ok_or_else(|| bad("amdhsa.kernels is not a list"))?
    {
        let s = |key: &str| get(k, key).and_then(|v| v.as_str().map(str::to_string));
        let n = |v: &Value, key: &str| get(v, key).and_then(|v| v.as_u64()).map(|x| x as u32);
        let name = s(".name").ok_or_else(|| bad("kernel metadata without .name"))?;
        let mut args = Vec::new();
        if let Some(list) = get(k, ".args") {
            for a in list.as_array().ok_or_else(|| bad(".args is not a list"))? {
                let kind = get(a, ".value_kind")
                    .and_then(|v| v.as_str().map(str::to_string))
                    .unwrap_or_default();
                let kind = match kind.as_str() {
                    "global_buffer" => ArgKind::Buffer,
                    "by_value" => ArgKind::Value,
                    h if h.starts_with("hidden_") => {
                        ArgKind::Hidden(h["hidden_".len()..].to_string())
                    }
                    other => ArgKind::Other(other.to_string()),
                };
                args.push(ArgInfo {
                    name: get(a, ".name").and_then(|v| v.as_str().map(str::to_string)),
                    offset: n(a, ".offset")
                        .ok_or_else(|| bad(format!("{name}: argument without .offset")))?,
                    size: n(a, ".size")
                        .ok_or_else(|| bad(format!("{name}: argument without .size")))?,
                    kind,
                });
            }
        }
        out.push(KernelMeta {
            symbol: s(".symbol").unwrap_or_else(|| format!("{name}.kd")),
            kernarg_segment_size: n(k, ".kernarg_segment_size").unwrap_or(0),
            kernarg_segment_align: n(k, ".kernarg_segment_align").unwrap_or(8).max(1),
            name,
            args,
        });
    }
    Ok(out)
}

/// A kernel uploaded to a GPU, ready to launch.
#[derive(Debug)]
pub struct AmdProgram {
    pub name: String,
    /// The uploaded image; kept alive as long as the program.
    pub image: GpuMemory,
    pub descriptor: KernelDescriptor,
    /// GPU address of the first instruction.
    pub code_entry: u64,
    pub user_sgprs: UserSgprLayout,
    /// Arguments from the metadata (empty when the code object has none).
    pub args: Vec<ArgInfo>,
    /// Bytes to reserve for kernel arguments, hidden ones included.
    pub kernarg_size: u32,
    pub kernarg_align: u32,
    pub(crate) device_gpu_id: u32,
}

/// Checks a descriptor against what this runtime and the image allow.
pub fn validate_descriptor(
    name: &str,
    d: &KernelDescriptor,
    kd_offset: u64,
    image_size: u64,
) -> Result<u64> {
    if d.kernel_code_properties & kd::props::ENABLE_WAVEFRONT_SIZE32 == 0 {
        return Err(Error::Unsupported(format!(
            "kernel {name} is compiled for wave64; only wave32 is supported"
        )));
    }
    let entry = (kd_offset as i64)
        .checked_add(d.kernel_code_entry_byte_offset)
        .filter(|&e| e >= 0 && (e as u64) < image_size);
    let Some(entry) = entry else {
        return Err(bad(format!(
            "kernel {name}: code entry lies outside the image"
        )));
    };
    if entry % 256 != 0 {
        return Err(bad(format!(
            "kernel {name}: code entry 0x{entry:x} is not 256-byte aligned"
        )));
    }
    if d.group_segment_fixed_size > hcq_amd_sys::regs::LDS_MAX_BYTES {
        return Err(bad(format!(
            "kernel {name} wants {} bytes of LDS (at most 65536)",
            d.group_segment_fixed_size
        )));
    }
    let layout = d.user_sgpr_layout();
    let rsrc2 = hcq_amd_sys::regs::PgmRsrc2(d.compute_pgm_rsrc2);
    if layout.count > 16 || rsrc2.user_sgpr() < layout.count {
        return Err(bad(format!(
            "kernel {name}: descriptor enables {} user SGPRs but rsrc2 has {}",
            layout.count,
            rsrc2.user_sgpr()
        )));
    }
    Ok(entry as u64)
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
        let mut put = |offset: u32, bytes: &[u8]| {
            let at = offset as usize;
            if let Some(dst) = out.get_mut(at..at + bytes.len()) {
                dst.copy_from_slice(bytes);
            }
        };
        if self.args.is_empty() {
            // No metadata: pack pointers and values in order with natural alignment and check the
            // total against the descriptor.
            let mut off = 0u32;
            for a in args {
                let size = a.size() as u32;
                off = off.next_multiple_of(size);
                match a {
                    Arg::Buffer(b) => put(off, &address_of(b)?.to_le_bytes()),
                    s => put(off, &s.scalar_bytes().unwrap_or_default()[..size as usize]),
                }
                off += size;
            }
            if off != self.descriptor.kernarg_size {
                return Err(Error::InvalidArgument(format!(
                    "kernel {} takes {} bytes of arguments, the {} given take {off}",
                    self.name,
                    self.descriptor.kernarg_size,
                    args.len()
                )));
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
                    put(info.offset, &address_of(b)?.to_le_bytes())
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
                    put(
                        info.offset,
                        &s.scalar_bytes().unwrap_or_default()[..s.size()],
                    );
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
            let axis = |s: &str| match s.as_bytes().last() {
                Some(b'x') => 0,
                Some(b'y') => 1,
                _ => 2,
            };
            let value: u64 = match kind.as_str() {
                k if k.starts_with("block_count_") => global[axis(k)] as u64,
                k if k.starts_with("group_size_") => local[axis(k)] as u64,
                // Grids are whole workgroups, so no partial workgroup remains.
                k if k.starts_with("remainder_") => 0,
                k if k.starts_with("global_offset_") => 0,
                "grid_dims" => dims_used as u64,
                _ => 0,
            };
            let bytes = value.to_le_bytes();
            put(info.offset, &bytes[..(info.size as usize).min(8)]);
        }
        Ok(())
    }
}

fn describe(a: &ArgInfo) -> String {
    let ty = match &a.kind {
        ArgKind::Buffer => "buffer".to_string(),
        ArgKind::Value => format!("{}-byte value", a.size),
        ArgKind::Hidden(k) | ArgKind::Other(k) => k.clone(),
    };
    match &a.name {
        Some(n) => format!("{n}: {ty}"),
        None => ty,
    }
}
