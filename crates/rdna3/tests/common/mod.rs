//! Test support: a minimal ELF64 reader for AMDGPU code objects, host memory that the
//! interpreter may access, and a dispatch helper that sets up launch state the way the
//! command processor does from a kernel descriptor.

#![allow(dead_code)]

use std::cell::UnsafeCell;
use std::collections::HashMap;

use rdna3::{run_dispatch, CodeCache, Dispatch, DispatchStats, Fault, Memory};

fn u16_at(bytes: &[u8], offset: usize) -> u16 {
    u16::from_le_bytes(bytes[offset..offset + 2].try_into().unwrap())
}
fn u32_at(bytes: &[u8], offset: usize) -> u32 {
    u32::from_le_bytes(bytes[offset..offset + 4].try_into().unwrap())
}
fn u64_at(bytes: &[u8], offset: usize) -> u64 {
    u64::from_le_bytes(bytes[offset..offset + 8].try_into().unwrap())
}

/// A host allocation the GPU may access (interior mutability: the interpreter writes it
/// through raw pointers while the test holds a shared reference).
pub struct Buffer {
    storage: Box<[UnsafeCell<u64>]>,
    len: usize,
}

// SAFETY: the buffer is plain memory; concurrent access happens only through the
// interpreter's raw-pointer reads/writes (as GPU memory would be accessed) and the test reads
// it only after the dispatch has finished.
unsafe impl Sync for Buffer {}

impl Buffer {
    pub fn zeroed(len: usize) -> Self {
        let words = len.div_ceil(8).max(1);
        Buffer {
            storage: (0..words).map(|_| UnsafeCell::new(0)).collect(),
            len,
        }
    }
    pub fn from_bytes(bytes: &[u8]) -> Self {
        let buffer = Self::zeroed(bytes.len());
        buffer.write(0, bytes);
        buffer
    }
    pub fn from_u32s(values: &[u32]) -> Self {
        let bytes: Vec<u8> = values.iter().flat_map(|v| v.to_le_bytes()).collect();
        Self::from_bytes(&bytes)
    }
    pub fn from_f32s(values: &[f32]) -> Self {
        let bytes: Vec<u8> = values.iter().flat_map(|v| v.to_le_bytes()).collect();
        Self::from_bytes(&bytes)
    }
    pub fn addr(&self) -> u64 {
        self.storage.as_ptr() as u64
    }
    pub fn len(&self) -> usize {
        self.len
    }
    pub fn write(&self, offset: usize, bytes: &[u8]) {
        assert!(offset + bytes.len() <= self.len);
        // SAFETY: in bounds (asserted); no dispatch runs while the test writes.
        unsafe {
            std::ptr::copy_nonoverlapping(
                bytes.as_ptr(),
                (self.addr() as *mut u8).add(offset),
                bytes.len(),
            )
        };
    }
    pub fn read(&self) -> Vec<u8> {
        let mut out = vec![0u8; self.len];
        // SAFETY: `len` bytes are owned by this buffer; no dispatch runs while the test reads.
        unsafe {
            std::ptr::copy_nonoverlapping(self.addr() as *const u8, out.as_mut_ptr(), self.len)
        };
        out
    }
    pub fn u32s(&self) -> Vec<u32> {
        self.read()
            .chunks_exact(4)
            .map(|c| u32::from_le_bytes(c.try_into().unwrap()))
            .collect()
    }
    pub fn f32s(&self) -> Vec<f32> {
        self.u32s().into_iter().map(f32::from_bits).collect()
    }
}

/// GPU memory = the listed host buffers.
#[derive(Default)]
pub struct HostMemory<'a> {
    buffers: Vec<&'a Buffer>,
}

impl<'a> HostMemory<'a> {
    pub fn new(buffers: &[&'a Buffer]) -> Self {
        HostMemory {
            buffers: buffers.to_vec(),
        }
    }
}

// SAFETY: the listed buffers outlive the memory view (borrowed for `'a`), are interior-mutable
// memory the tests reach only by pointer, and are read or written by the test only while no
// dispatch runs.
unsafe impl Memory for HostMemory<'_> {
    fn translate(&self, addr: u64, len: u64) -> Option<*mut u8> {
        let end = addr.checked_add(len)?;
        self.buffers
            .iter()
            .find(|b| addr >= b.addr() && end <= b.addr() + b.len() as u64)
            .map(|_| addr as *mut u8)
    }

    fn region(&self, addr: u64) -> Option<(u64, u64, *mut u8)> {
        self.buffers
            .iter()
            .find(|b| addr >= b.addr() && addr < b.addr() + b.len() as u64)
            .map(|b| (b.addr(), b.len() as u64, b.addr() as *mut u8))
    }
}

/// The 64-byte AMDHSA kernel descriptor fields used at dispatch.
#[derive(Clone, Copy, Debug)]
pub struct KernelDescriptor {
    pub group_segment_fixed_size: u32,
    pub private_segment_fixed_size: u32,
    pub kernarg_size: u32,
    pub kernel_code_entry_byte_offset: i64,
    pub rsrc3: u32,
    pub rsrc1: u32,
    pub rsrc2: u32,
    pub kernel_code_properties: u16,
}

/// A code object loaded into host memory at its link-time layout.
pub struct CodeObject {
    pub image: Buffer,
    pub symbols: HashMap<String, u64>,
}

impl CodeObject {
    /// Parses an ELF64 little-endian shared object: PT_LOAD segments and the symbol tables.
    pub fn load(file: &[u8]) -> CodeObject {
        assert_eq!(&file[..4], b"\x7fELF", "not an ELF file");
        let phoff = u64_at(file, 0x20) as usize;
        let shoff = u64_at(file, 0x28) as usize;
        let phentsize = usize::from(u16_at(file, 0x36));
        let phnum = usize::from(u16_at(file, 0x38));
        let shentsize = usize::from(u16_at(file, 0x3a));
        let shnum = usize::from(u16_at(file, 0x3c));
        let mut image_size = 0usize;
        let mut loads = Vec::new();
        for i in 0..phnum {
            let ph = phoff + i * phentsize;
            if u32_at(file, ph) != 1 {
                continue; // PT_LOAD only
            }
            let (offset, vaddr, filesz, memsz) = (
                u64_at(file, ph + 8) as usize,
                u64_at(file, ph + 16) as usize,
                u64_at(file, ph + 32) as usize,
                u64_at(file, ph + 40) as usize,
            );
            image_size = image_size.max(vaddr + memsz);
            loads.push((offset, vaddr, filesz));
        }
        let image = Buffer::zeroed(image_size);
        for (offset, vaddr, filesz) in loads {
            image.write(vaddr, &file[offset..offset + filesz]);
        }
        let mut symbols = HashMap::new();
        for i in 0..shnum {
            let sh = shoff + i * shentsize;
            let kind = u32_at(file, sh + 4);
            if kind != 2 && kind != 11 {
                continue; // SHT_SYMTAB / SHT_DYNSYM
            }
            let (offset, size, link, entsize) = (
                u64_at(file, sh + 0x18) as usize,
                u64_at(file, sh + 0x20) as usize,
                u32_at(file, sh + 0x28) as usize,
                u64_at(file, sh + 0x38) as usize,
            );
            let strtab = shoff + link * shentsize;
            let str_offset = u64_at(file, strtab + 0x18) as usize;
            for k in 0..size / entsize {
                let sym = offset + k * entsize;
                let name_offset = str_offset + u32_at(file, sym) as usize;
                let end = file[name_offset..].iter().position(|&b| b == 0).unwrap();
                let name =
                    String::from_utf8_lossy(&file[name_offset..name_offset + end]).into_owned();
                symbols.insert(name, u64_at(file, sym + 8));
            }
        }
        CodeObject { image, symbols }
    }

    pub fn descriptor(&self, kernel: &str) -> (KernelDescriptor, u64) {
        let offset = *self
            .symbols
            .get(&format!("{kernel}.kd"))
            .unwrap_or_else(|| panic!("no {kernel}.kd")) as usize;
        let bytes = &self.image.read()[offset..offset + 64];
        let kd = KernelDescriptor {
            group_segment_fixed_size: u32_at(bytes, 0),
            private_segment_fixed_size: u32_at(bytes, 4),
            kernarg_size: u32_at(bytes, 8),
            kernel_code_entry_byte_offset: u64_at(bytes, 16) as i64,
            rsrc3: u32_at(bytes, 44),
            rsrc1: u32_at(bytes, 48),
            rsrc2: u32_at(bytes, 52),
            kernel_code_properties: u16_at(bytes, 56),
        };
        let kd_addr = self.image.addr() + offset as u64;
        (
            kd,
            kd_addr.wrapping_add(kd.kernel_code_entry_byte_offset as u64),
        )
    }
}

/// Kernel arguments laid out at their natural alignment.
#[derive(Default)]
pub struct Args {
    bytes: Vec<u8>,
}

impl Args {
    pub fn ptr(mut self, buffer: &Buffer) -> Self {
        self.align(8);
        self.bytes.extend_from_slice(&buffer.addr().to_le_bytes());
        self
    }
    pub fn raw_ptr(mut self, addr: u64) -> Self {
        self.align(8);
        self.bytes.extend_from_slice(&addr.to_le_bytes());
        self
    }
    pub fn i32(mut self, value: i32) -> Self {
        self.align(4);
        self.bytes.extend_from_slice(&value.to_le_bytes());
        self
    }
    pub fn f32(mut self, value: f32) -> Self {
        self.align(4);
        self.bytes.extend_from_slice(&value.to_le_bytes());
        self
    }
    fn align(&mut self, to: usize) {
        while !self.bytes.len().is_multiple_of(to) {
            self.bytes.push(0);
        }
    }
    /// The kernarg segment, padded like a runtime's allocation (kernels may load whole
    /// dwordx4/x8 groups past the last argument).
    pub fn buffer(&self) -> Buffer {
        let mut bytes = self.bytes.clone();
        bytes.resize(bytes.len().next_multiple_of(64) + 64, 0);
        Buffer::from_bytes(&bytes)
    }
}

pub const KERNELS: &[u8] = include_bytes!("../kernels/kernels.hsaco");
/// The code object of kernels/ftz.hip, built to flush f32 denormals.
pub const FTZ_KERNELS: &[u8] = include_bytes!("../kernels/ftz.hsaco");

/// Builds the Dispatch the command processor would for `kernel` with the kernarg buffer.
pub fn make_dispatch(
    code: &CodeObject,
    kernel: &str,
    kernarg: &Buffer,
    grid: [u32; 3],
    block: [u32; 3],
) -> Dispatch {
    let (kd, entry) = code.descriptor(kernel);
    let mut user_data = [0u32; 16];
    // User SGPRs in order, per kernel_code_properties bits 0..6.
    let sizes = [4usize, 2, 2, 2, 2, 2, 1];
    let mut slot = 0;
    for (bit, size) in sizes.iter().enumerate() {
        if kd.kernel_code_properties >> bit & 1 == 0 {
            continue;
        }
        if bit == 3 && slot + 2 <= 16 {
            user_data[slot] = kernarg.addr() as u32;
            user_data[slot + 1] = (kernarg.addr() >> 32) as u32;
        }
        slot += size;
    }
    // The runtime/CP programs LDS_SIZE (512-byte granules) from the group segment size.
    let lds_granules = kd.group_segment_fixed_size.div_ceil(512);
    let rsrc2 = (kd.rsrc2 & !(0x1ff << 15)) | (lds_granules << 15);
    Dispatch {
        code_entry: entry,
        rsrc1: kd.rsrc1,
        rsrc2,
        rsrc3: kd.rsrc3,
        user_data,
        grid,
        block,
        scratch_base: 0,
        tmpring_size: 0, // set by `run` when the kernel uses scratch
        shader_engines: 1,
        wave32: kd.kernel_code_properties >> 10 & 1 != 0,
        max_steps: 100_000,
        cancel: None,
    }
}

/// Runs `kernel` over `grid` × `block` with the given arguments and extra buffers mapped.
pub fn run(
    kernel: &str,
    args: &Args,
    grid: [u32; 3],
    block: [u32; 3],
    buffers: &[&Buffer],
) -> Result<DispatchStats, Fault> {
    run_with_cache(
        &CodeCache::new(),
        KERNELS,
        kernel,
        args,
        grid,
        block,
        buffers,
    )
}

/// [`run`] for a kernel of the code object `file`, with the code cache `cache` (which
/// remembers what earlier dispatches compiled and how long their workgroups took).
pub fn run_with_cache(
    cache: &CodeCache,
    file: &[u8],
    kernel: &str,
    args: &Args,
    grid: [u32; 3],
    block: [u32; 3],
    buffers: &[&Buffer],
) -> Result<DispatchStats, Fault> {
    let code = CodeObject::load(file);
    let kernarg = args.buffer();
    let mut all: Vec<&Buffer> = buffers.to_vec();
    all.push(&code.image);
    all.push(&kernarg);
    let mut dispatch = make_dispatch(&code, kernel, &kernarg, grid, block);
    // Scratch ring: WAVES slots of WAVESIZE × 256 bytes.
    let (kd, _) = code.descriptor(kernel);
    let per_wave_units = (u64::from(kd.private_segment_fixed_size) * 32)
        .div_ceil(256)
        .max(1)
        + 4;
    let ring_waves = 64u64;
    let scratch = Buffer::zeroed((per_wave_units * 256 * ring_waves) as usize);
    dispatch.scratch_base = scratch.addr();
    dispatch.tmpring_size = ring_waves as u32 | ((per_wave_units as u32) << 12);
    all.push(&scratch);
    let mem = HostMemory::new(&all);
    run_dispatch(&mem, cache, &dispatch)
}
