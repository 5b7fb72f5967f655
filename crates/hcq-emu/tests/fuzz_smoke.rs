//! The fuzz smoke of the emulated kernel: every kept failing input, then seeded random and
//! mutated ones, through the same functions the libFuzzer targets call
//! (`scripts/fuzz.sh ioctl|streams SECONDS` runs libFuzzer on them).

#[path = "../../../fuzz/smoke.rs"]
mod smoke;

use std::time::Duration;

use hcq_amd_sys::kfd::{ALLOC_MEM_FLAGS_VRAM, QUEUE_TYPE_COMPUTE, QUEUE_TYPE_SDMA};
use hcq_amd_sys::pm4::{DispatchSetup, Pm4Builder};
use hcq_amd_sys::sdma;

/// A PM4 stream as the driver writes one: waits, an indirect buffer, a timestamp, a signal
/// and a dispatch of two workgroups whose code (`s_endpgm`) follows in the same memory;
/// addresses in the harness's mapped memory.
fn pm4_seed() -> Vec<u8> {
    let base = hcq_emu::fuzzing::STREAM_GPU_BASE;
    const CODE_OFFSET: usize = 0x300;
    let mut b = Pm4Builder::new();
    b.hdp_flush();
    b.invalidate_cache();
    b.wait(base + 0x2000, 0);
    b.indirect_buffer(base + 0x1000, 16);
    b.timestamp(base + 0x3000);
    let setup = DispatchSetup {
        code_entry: base + CODE_OFFSET as u64,
        rsrc1: 0,
        rsrc2: 0,
        group_segment_size: 0,
        scratch_base: 0,
        tmpring_size: 0,
        user_data: [0; 16],
        user_data_count: 0,
    };
    b.exec(&setup, [2, 1, 1], [64, 1, 1]);
    b.signal(base + 0x3100, 7, 0, 0);
    // Type-2 fillers up to the code, which is one more filler to the command processor.
    let mut words = b.words.clone();
    words.resize(CODE_OFFSET / 4, 0x8000_0000);
    words.push(0xbfb0_0000);
    let mut seed = vec![0u8];
    for w in words {
        seed.extend_from_slice(&w.to_le_bytes());
    }
    seed
}

/// An SDMA stream as the driver writes one: a copy, a fence, a timestamp, a fill, an atomic
/// and an indirect buffer, in the harness's mapped memory.
fn sdma_seed() -> Vec<u8> {
    let base = hcq_emu::fuzzing::STREAM_GPU_BASE;
    let mut words = Vec::new();
    sdma::CopyLinear {
        extra_info: 0,
        count: 63,
        dst_swap: 0,
        src_swap: 0,
        src: base + 0x1000,
        dst: base + 0x2000,
    }
    .encode(&mut words);
    sdma::Fence::new(base + 0x3000, 5).encode(&mut words);
    sdma::Timestamp {
        address: base + 0x3008,
    }
    .encode(&mut words);
    sdma::Indirect {
        vmid: 0,
        address: base + 0x200,
        size_dwords: 7,
        csa: 0,
    }
    .encode(&mut words);
    let mut seed = vec![1u8];
    for w in words {
        seed.extend_from_slice(&w.to_le_bytes());
    }
    seed
}

#[test]
fn streams_smoke() {
    let n = smoke::smoke(
        "streams",
        hcq_emu::fuzzing::run_stream,
        &[pm4_seed(), sdma_seed()],
        2_000,
        4_000,
        1024,
        Duration::from_secs(5),
    );
    assert!(n > 500, "only {n} inputs ran");
}

/// Encodes calls in the input format of `hcq_emu::fuzzing::run_syscalls`.
#[derive(Default)]
struct Calls(Vec<u8>);

impl Calls {
    fn op(&mut self, op: u8, sel: u8) -> &mut Self {
        self.0.extend([op, sel]);
        self
    }
    /// An ioctl on the `fd`-th file opened, request number `known` of the harness's list,
    /// with argument bytes `args` and the harness's `fix` byte.
    fn ioctl(&mut self, fd: u8, known: u8, args: &[u8], fix: u8) -> &mut Self {
        self.op(3, fd);
        self.0.extend([known, args.len() as u8]);
        self.0.extend_from_slice(args);
        self.0.push(fix);
        self
    }
    fn bytes(&mut self, b: &[u8]) -> &mut Self {
        self.0.extend_from_slice(b);
        self
    }
}

fn le(fields: &[(u64, usize)]) -> Vec<u8> {
    fields
        .iter()
        .flat_map(|&(v, width)| v.to_le_bytes()[..width].to_vec())
        .collect()
}

/// A driver's first steps: open the devices, acquire the VM, allocate and map a buffer, create
/// a queue of `queue_type` on it, map its doorbell and ring it.
fn ioctl_seed(queue_type: u32) -> Vec<u8> {
    // Indices into the harness's list of known requests.
    const CREATE_QUEUE: u8 = 1;
    const ACQUIRE_VM: u8 = 9;
    const ALLOC: u8 = 10;
    const MAP: u8 = 12;
    // An address the harness places 1 MiB into its arena (page aligned).
    const BUFFER: u64 = 1 << 20;
    let mut c = Calls::default();
    c.op(0, 0).op(1, 0);
    // drm_fd is replaced by the second file opened (fix: learnt values, fd index 1).
    c.ioctl(0, ACQUIRE_VM, &le(&[(0, 4), (0, 4)]), 1 | 1 << 2);
    let alloc = le(&[
        (BUFFER, 8),
        (64 << 10, 8),
        (0, 8),
        (0, 8),
        (0, 4),
        (u64::from(ALLOC_MEM_FLAGS_VRAM), 4),
    ]);
    c.ioctl(0, ALLOC, &alloc, 0);
    // Map the first handle learnt on the first GPU; then one more input number (ids).
    c.ioctl(0, MAP, &le(&[(0, 8), (1, 8), (1, 4), (0, 4)]), 1)
        .bytes(&[0; 4]);
    let queue = le(&[
        (BUFFER, 8),
        (BUFFER + 0x8000, 8),
        (BUFFER + 0x8008, 8),
        (0, 8),
        (0x1000, 4),
        (0, 4),
        (u64::from(queue_type), 4),
        (100, 4),
        (7, 4),
        (0, 4),
        (0, 8),
        (0, 8),
        (0, 8),
        (0, 4),
        (0, 4),
    ]);
    c.ioctl(0, CREATE_QUEUE, &queue, 0);
    // mmap the kfd (first file) at the second offset learnt (the doorbell), two pages.
    c.op(4, 0).bytes(&[1]).bytes(&0x2000u32.to_le_bytes());
    // Doorbell 0 of the first doorbell mapping: a write pointer of 16.
    c.op(6, 0)
        .bytes(&16u64.to_le_bytes())
        .bytes(&0u32.to_le_bytes());
    c.op(7, 0);
    c.0
}

#[test]
fn ioctl_smoke() {
    let n = smoke::smoke(
        "ioctl",
        hcq_emu::fuzzing::run_syscalls,
        &[ioctl_seed(QUEUE_TYPE_COMPUTE), ioctl_seed(QUEUE_TYPE_SDMA)],
        1_000,
        1_000,
        512,
        Duration::from_secs(5),
    );
    assert!(n > 200, "only {n} inputs ran");
}
