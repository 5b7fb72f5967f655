//! [`Pm4Builder`]: the reference runtime's sequences, built from the packets of the sibling
//! modules.

use super::{
    data_sel, dma_src_sel, gcr, int_sel, release_gcr, AcquireMem, CompareFunction, DispatchDirect,
    DmaData, EventWrite, IndirectBuffer, ReleaseMem, SetShReg, WaitRegMem, DMA_DATA_CHUNK_BYTES,
    EVENT_CACHE_FLUSH_AND_INV_TS, EVENT_CS_PARTIAL_FLUSH, EVENT_INDEX_END_OF_PIPE,
};
use crate::regs;

/// What a kernel dispatch needs from the driver: the program and its resources.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DispatchSetup {
    /// Address of the first instruction (256-byte aligned).
    pub code_entry: u64,
    /// `COMPUTE_PGM_RSRC1`: the descriptor's value plus [`regs::dispatch_rsrc1_bits`].
    pub rsrc1: u32,
    /// `COMPUTE_PGM_RSRC2` as the descriptor has it; [`Pm4Builder::exec`] adds the LDS size from
    /// `group_segment_size`.
    pub rsrc2: u32,
    /// Bytes of LDS the kernel declares (the descriptor's group segment size).
    pub group_segment_size: u32,
    /// Base of the scratch ring (256-byte aligned; 0 without one), for
    /// `COMPUTE_DISPATCH_SCRATCH_BASE_LO/HI`.
    pub scratch_base: u64,
    /// `COMPUTE_TMPRING_SIZE` for that scratch ([`regs::tmpring_size`]).
    pub tmpring_size: u32,
    /// `COMPUTE_USER_DATA_0..`: the user SGPR values in descriptor order.
    pub user_data: [u32; 16],
    /// How many of `user_data` the waves load (the descriptor's `USER_SGPR` count); at most 16 are
    /// written.
    pub user_data_count: usize,
}

/// Handle to the launch dimensions and the scratch registers of a dispatch inside a builder's
/// words.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DispatchPatch {
    local_at: usize,
    global_at: usize,
    scratch_base_at: usize,
    tmpring_size_at: usize,
}

impl DispatchPatch {
    /// Rewrites the workgroup size and grid size of the dispatch in place.
    pub fn set_dims(&self, words: &mut [u32], global: [u32; 3], local: [u32; 3]) {
        words[self.local_at..self.local_at + 3].copy_from_slice(&local);
        words[self.global_at..self.global_at + 3].copy_from_slice(&global);
    }
    /// Dword index of the first grid dimension.
    pub fn global_at(&self) -> usize {
        self.global_at
    }
    /// Dword index of the first workgroup-size dimension.
    pub fn local_at(&self) -> usize {
        self.local_at
    }
    /// Dword index of `COMPUTE_DISPATCH_SCRATCH_BASE_LO` (`_HI` follows it).
    pub fn scratch_base_at(&self) -> usize {
        self.scratch_base_at
    }
    /// Dword index of `COMPUTE_TMPRING_SIZE`.
    pub fn tmpring_size_at(&self) -> usize {
        self.tmpring_size_at
    }
}

/// Handle to the value a `wait` compares against.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WaitPatch {
    reference_at: usize,
}

impl WaitPatch {
    /// Rewrites, in `words` (the builder's or a copy of them), the value the wait compares with;
    /// the packet holds only the low 32 bits of `value`.
    pub fn set_value(&self, words: &mut [u32], value: u64) {
        words[self.reference_at] = value as u32;
    }
}

/// Handle to the value a `signal` writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SignalPatch {
    data_at: usize,
}

impl SignalPatch {
    /// Rewrites, in `words` (the builder's or a copy of them), the value the signal's release
    /// writes: both data dwords, of which the 32-bit release stores the low one.
    pub fn set_value(&self, words: &mut [u32], value: u64) {
        words[self.data_at] = value as u32;
        words[self.data_at + 1] = (value >> 32) as u32;
    }
}

const SIGNAL_GCR: u32 = release_gcr::GLV_INV
    | release_gcr::GL1_INV
    | release_gcr::GL2_INV
    | release_gcr::GLM_WB
    | release_gcr::GLM_INV
    | release_gcr::GL2_WB
    | release_gcr::SEQ;

/// Builds a compute-queue command stream, one method per operation of the reference runtime.
#[derive(Debug, Default, Clone)]
pub struct Pm4Builder {
    /// The stream so far: the dwords to place in a ring or an indirect buffer.
    pub words: Vec<u32>,
}

impl Pm4Builder {
    /// An empty builder.
    pub fn new() -> Self {
        Self::default()
    }

    /// Drops every word, keeping the allocation for the next stream.
    pub fn clear(&mut self) {
        self.words.clear();
    }

    /// Requests an HDP flush (the host data path's write queue: CPU writes through the BAR
    /// to VRAM) and waits until it is done: writes every client's bit to `GPU_HDP_FLUSH_REQ`
    /// and polls `GPU_HDP_FLUSH_DONE` for them.
    pub fn hdp_flush(&mut self) -> &mut Self {
        WaitRegMem {
            mem_space: 0,
            operation: 1,
            function: CompareFunction::Equal as u8,
            engine: 0,
            addr_lo: regs::GPU_HDP_FLUSH_REQ,
            addr_hi: regs::GPU_HDP_FLUSH_DONE,
            reference: regs::HDP_FLUSH_ALL_CLIENTS,
            mask: regs::HDP_FLUSH_ALL_CLIENTS,
            poll_interval: 0x20,
        }
        .encode(&mut self.words);
        self
    }

    /// Invalidates the instruction, scalar, vector, L1 and L2 caches over all memory.
    pub fn invalidate_cache(&mut self) -> &mut Self {
        AcquireMem {
            coher_cntl: 0,
            size: (1u64 << 40) - 1,
            base: 0,
            poll_interval: 0,
            gcr_cntl: gcr::GLI_INV | gcr::GLK_INV | gcr::GLV_INV | gcr::GL1_INV | gcr::GL2_INV,
        }
        .encode(&mut self.words);
        self
    }

    /// Waits until the 32-bit word at `signal_value_addr` is `>= value` (low 32 bits compared).
    pub fn wait(&mut self, signal_value_addr: u64, value: u64) -> WaitPatch {
        let start = self.words.len();
        WaitRegMem {
            mem_space: 1,
            operation: 0,
            function: CompareFunction::GreaterEqual as u8,
            engine: 0,
            addr_lo: signal_value_addr as u32,
            addr_hi: (signal_value_addr >> 32) as u32,
            reference: value as u32,
            mask: 0xffff_ffff,
            poll_interval: 4,
        }
        .encode(&mut self.words);
        WaitPatch {
            reference_at: start + 4,
        }
    }

    /// Copies `size` bytes from `src` to `dst` with CP DMA, in [`DMA_DATA_CHUNK_BYTES`]
    /// packets, the last with `CP_SYNC`: the CP goes on only once every byte has landed, so a
    /// signal after it means the data is there. CP DMA does not wait for earlier dispatches:
    /// callers order it after them (a wait for the timeline, or `CS_PARTIAL_FLUSH`).
    pub fn copy(&mut self, dst: u64, src: u64, size: u64) -> &mut Self {
        let mut done = 0;
        loop {
            let n = (size - done).min(DMA_DATA_CHUNK_BYTES);
            let last = done + n == size;
            DmaData::copy(dst + done, src + done, n as u32, last).encode(&mut self.words);
            done += n;
            if last {
                return self;
            }
        }
    }

    /// Fills `size` bytes at `dst` with the 32-bit `value` repeated (`dst` and `size` whole
    /// dwords) with CP DMA from the packet's data, in [`DMA_DATA_CHUNK_BYTES`] packets, the
    /// last with `CP_SYNC`. A size of 0 emits one empty packet that still waits for earlier
    /// DMAs.
    pub fn fill(&mut self, dst: u64, value: u32, size: u64) -> &mut Self {
        let mut done = 0;
        loop {
            let n = (size - done).min(DMA_DATA_CHUNK_BYTES);
            let last = done + n == size;
            let mut d = DmaData::copy(dst + done, u64::from(value), n as u32, last);
            d.src_sel = dma_src_sel::DATA;
            d.encode(&mut self.words);
            done += n;
            if last {
                return self;
            }
        }
    }

    /// Calls the indirect buffer of `size_dwords` dwords at `address`; execution returns here.
    pub fn indirect_buffer(&mut self, address: u64, size_dwords: u32) -> &mut Self {
        IndirectBuffer {
            address,
            size_dwords,
            chain: false,
            valid: true,
        }
        .encode(&mut self.words);
        self
    }

    /// Continues in the indirect buffer at `address` without coming back (the last packet of
    /// an indirect buffer that goes on elsewhere).
    pub fn chain_indirect_buffer(&mut self, address: u64, size_dwords: u32) -> &mut Self {
        IndirectBuffer {
            address,
            size_dwords,
            chain: true,
            valid: true,
        }
        .encode(&mut self.words);
        self
    }

    /// Writes the 64-bit GPU clock (100 MHz) to `addr`, ordered with the work around it: an
    /// end-of-pipe release first (everything before has finished and written its memory),
    /// then the clock's release, then an acquire that writes L2 back, so that once a later
    /// signal is seen the stamp is in memory. The bare clock release alone, tinygrad 0.9.0's
    /// form, let real GPUs stamp early or leave the stamp unwritten when the host read it
    /// (tinygrad's PRs #12794 and #13267).
    pub fn timestamp(&mut self, addr: u64) -> &mut Self {
        let release = |data_sel: u8, address: u64| ReleaseMem {
            event_type: EVENT_CACHE_FLUSH_AND_INV_TS,
            event_index: EVENT_INDEX_END_OF_PIPE,
            gcr: 0,
            data_sel,
            int_sel: int_sel::NONE,
            dst_sel: 0,
            address,
            data: 0,
            int_ctx: 0,
        };
        release(data_sel::NONE, 0).encode(&mut self.words);
        release(data_sel::GPU_CLOCK_64, addr).encode(&mut self.words);
        AcquireMem {
            coher_cntl: 0,
            size: (1u64 << 40) - 1,
            base: 0,
            poll_interval: 0,
            gcr_cntl: gcr::GLM_INV
                | gcr::GLM_WB
                | gcr::GLK_INV
                | gcr::GLK_WB
                | gcr::GLV_INV
                | gcr::GL1_INV
                | gcr::GL2_INV
                | gcr::GL2_WB,
        }
        .encode(&mut self.words);
        self
    }

    /// Writes `value` to the signal at end of pipe; when the signal has an event mailbox, also
    /// writes `event_id` there and raises the interrupt that wakes `WAIT_EVENTS`.
    pub fn signal(
        &mut self,
        signal_value_addr: u64,
        value: u64,
        event_mailbox_ptr: u64,
        event_id: u32,
    ) -> SignalPatch {
        let start = self.words.len();
        let release = |address: u64, data: u64, int_sel: u8, int_ctx: u32| ReleaseMem {
            event_type: EVENT_CACHE_FLUSH_AND_INV_TS,
            event_index: EVENT_INDEX_END_OF_PIPE,
            gcr: SIGNAL_GCR,
            data_sel: data_sel::DATA_32,
            int_sel,
            dst_sel: 0,
            address,
            data,
            int_ctx,
        };
        // Only the mailbox write interrupts, naming its event. An interrupt with context 0
        // after the value write (as tinygrad sent until its PR #17004) names no event, so KFD
        // scans every signal event of the process for each signal.
        release(signal_value_addr, value, int_sel::NONE, 0).encode(&mut self.words);
        if event_mailbox_ptr != 0 {
            release(
                event_mailbox_ptr,
                event_id as u64,
                int_sel::SEND_INT_ON_CONFIRM,
                event_id,
            )
            .encode(&mut self.words);
        }
        SignalPatch { data_at: start + 5 }
    }

    /// A whole kernel dispatch: flush and invalidate, program registers, user data, launch
    /// dimensions, `DISPATCH_DIRECT`, then a `CS_PARTIAL_FLUSH`.
    pub fn exec(
        &mut self,
        setup: &DispatchSetup,
        global: [u32; 3],
        local: [u32; 3],
    ) -> DispatchPatch {
        self.hdp_flush();
        self.invalidate_cache();
        let lds_granules = setup.group_segment_size.div_ceil(regs::LDS_GRANULE);
        let prog = setup.code_entry >> 8;
        let w = &mut self.words;
        let sh = |w: &mut Vec<u32>, reg: u16, values: &[u32]| SetShReg { reg, values }.encode(w);
        // The header, the register offset, then PGM_LO, PGM_HI and two unused registers.
        let scratch_base_at = w.len() + 2 + 4;
        sh(
            w,
            regs::COMPUTE_PGM_LO,
            &[
                prog as u32,
                (prog >> 32) as u32,
                0,
                0,
                (setup.scratch_base >> 8) as u32,
                (setup.scratch_base >> 40) as u32,
            ],
        );
        sh(
            w,
            regs::COMPUTE_PGM_RSRC1,
            &[
                setup.rsrc1,
                regs::PgmRsrc2(setup.rsrc2).with_lds_size(lds_granules).0,
            ],
        );
        let tmpring_size_at = w.len() + 2;
        sh(w, regs::COMPUTE_TMPRING_SIZE, &[setup.tmpring_size]);
        sh(w, regs::COMPUTE_RESTART_X, &[0, 0, 0]);
        sh(w, regs::COMPUTE_STATIC_THREAD_MGMT_SE0, &[u32::MAX; 2]);
        sh(w, regs::COMPUTE_STATIC_THREAD_MGMT_SE2, &[u32::MAX; 2]);
        sh(w, regs::COMPUTE_STATIC_THREAD_MGMT_SE4, &[u32::MAX; 4]);
        sh(
            w,
            regs::COMPUTE_USER_DATA_0,
            &setup.user_data[..setup.user_data_count.min(16)],
        );
        let local_at = w.len() + 2 + 3;
        sh(
            w,
            regs::COMPUTE_START_X,
            &[0, 0, 0, local[0], local[1], local[2], 0, 0],
        );
        sh(w, regs::COMPUTE_RESOURCE_LIMITS, &[0]);
        let global_at = w.len() + 1;
        DispatchDirect {
            dims: global,
            initiator: regs::initiator::CS_W32_EN
                | regs::initiator::FORCE_START_AT_000
                | regs::initiator::COMPUTE_SHADER_EN,
        }
        .encode(w);
        EventWrite {
            event_type: EVENT_CS_PARTIAL_FLUSH,
            event_index: 4,
        }
        .encode(w);
        DispatchPatch {
            local_at,
            global_at,
            scratch_base_at,
            tmpring_size_at,
        }
    }
}
