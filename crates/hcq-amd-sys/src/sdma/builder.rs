//! [`SdmaBuilder`]: the reference runtime's copy-queue sequences, built from the packets of
//! the parent module.

use super::{
    gcr_control, split, ConstFill, CopyLinear, Fence, Gcr, HdpFlush, Indirect, Packet, PollRegmem,
    Timestamp, Trap, MAX_COPY_SIZE, MAX_FILL_SIZE,
};
use crate::pm4::CompareFunction;

/// The reference runtime's cache invalidate before a copy.
const CACHE_INVALIDATE: u32 = gcr_control::GL2_WB
    | gcr_control::GLK_WB
    | gcr_control::GL2_INV
    | gcr_control::GL1_INV
    | gcr_control::GLV_INV
    | gcr_control::GLK_INV;
/// The reference runtime's cache writeback after a copy.
const CACHE_WRITEBACK: u32 = gcr_control::GL2_WB | gcr_control::GLK_WB;

/// Builds a copy-queue command stream, one method per operation of the reference runtime.
///
/// `words` is public for submission; add packets through the methods so that
/// [`SdmaBuilder::packets`] knows where each one ends.
#[derive(Debug, Default, Clone)]
pub struct SdmaBuilder {
    /// The stream so far, the dwords to place in the ring.
    pub words: Vec<u32>,
    /// End (exclusive dword index) of each packet in `words`.
    ends: Vec<usize>,
}

impl SdmaBuilder {
    /// An empty builder.
    pub fn new() -> Self {
        Self::default()
    }

    /// Drops every word and packet boundary, keeping the allocations.
    pub fn clear(&mut self) {
        self.words.clear();
        self.ends.clear();
    }

    /// Appends one packet.
    pub fn push(&mut self, p: &Packet) -> &mut Self {
        p.encode(&mut self.words);
        self.mark_end();
        self
    }

    fn mark_end(&mut self) {
        if self.ends.last().copied().unwrap_or(0) < self.words.len() {
            self.ends.push(self.words.len());
        }
    }

    /// Appends the words of one packet verbatim (for packets this module cannot express).
    pub fn raw(&mut self, packet: &[u32]) -> &mut Self {
        self.words.extend_from_slice(packet);
        self.mark_end();
        self
    }

    /// HDP flush + GCR invalidate, `COPY_LINEAR` packets of at most 4 MiB (count = bytes −
    /// 1), GCR writeback. A size of 0 emits nothing.
    pub fn copy(&mut self, dst: u64, src: u64, size: u64) -> &mut Self {
        if size == 0 {
            return self;
        }
        self.push(&Packet::HdpFlush(HdpFlush::default()));
        self.push(&Packet::Gcr(Gcr {
            base: 0,
            limit: 0,
            control: CACHE_INVALIDATE,
            vmid: 0,
        }));
        let mut copied = 0;
        while copied < size {
            let step = (size - copied).min(MAX_COPY_SIZE);
            self.push(&Packet::CopyLinear(CopyLinear {
                extra_info: 0,
                count: (step - 1) as u32,
                dst_swap: 0,
                src_swap: 0,
                src: src.wrapping_add(copied),
                dst: dst.wrapping_add(copied),
            }));
            copied += step;
        }
        self.push(&Packet::Gcr(Gcr {
            base: 0,
            limit: 0,
            control: CACHE_WRITEBACK,
            vmid: 0,
        }))
    }

    /// Fills `size` bytes at `dst` with the 32-bit `value` (`CONST_FILL` packets of at most
    /// 4 MiB, dword units). A size of 0 emits nothing.
    pub fn fill(&mut self, dst: u64, value: u32, size: u64) -> &mut Self {
        let mut done = 0;
        while done < size {
            let step = (size - done).min(MAX_FILL_SIZE);
            self.push(&Packet::ConstFill(ConstFill {
                sw: 0,
                fill_size: 2,
                address: dst.wrapping_add(done),
                data: value,
                count: (step - 1) as u32,
            }));
            done += step;
        }
        self
    }

    /// `FENCE` writing the 32-bit `value` to `signal_value_addr`; with a mailbox (≠ 0) also a
    /// `FENCE` of `event_id` to it and a `TRAP` with `int_ctx = event_id`.
    pub fn signal(
        &mut self,
        signal_value_addr: u64,
        value: u64,
        event_mailbox_ptr: u64,
        event_id: u32,
    ) -> &mut Self {
        self.push(&Packet::Fence(Fence::new(signal_value_addr, value as u32)));
        if event_mailbox_ptr != 0 {
            self.push(&Packet::Fence(Fence::new(event_mailbox_ptr, event_id)));
            self.push(&Packet::Trap(Trap { int_ctx: event_id }));
        }
        self
    }

    /// `POLL_REGMEM` until the 32-bit word at `signal_value_addr` is `>= value` (function
    /// GEQ, mask `0xffffffff`, interval 4, retry `0xfff`).
    pub fn wait(&mut self, signal_value_addr: u64, value: u64) -> &mut Self {
        self.push(&Packet::PollRegmem(PollRegmem {
            hdp_flush: false,
            func: CompareFunction::GreaterEqual as u8,
            mem_poll: true,
            address: signal_value_addr,
            reference: value as u32,
            mask: 0xffff_ffff,
            interval: 4,
            retry_count: 0xfff,
        }))
    }

    /// `INDIRECT`: runs the `size_dwords` dwords of packets at `address` (32-byte aligned), no
    /// context save area.
    pub fn indirect(&mut self, address: u64, size_dwords: u32) -> &mut Self {
        self.push(&Packet::Indirect(Indirect {
            vmid: 0,
            address,
            size_dwords,
            csa: 0,
        }))
    }

    /// `TIMESTAMP` (get global): the 64-bit GPU clock to `addr`.
    pub fn timestamp(&mut self, addr: u64) -> &mut Self {
        self.push(&Packet::Timestamp(Timestamp { address: addr }))
    }

    /// Each packet's words, in order. Words appended to `words` directly (not through a
    /// method) are split by their headers ([`split`]).
    pub fn packets(&self) -> impl Iterator<Item = &[u32]> {
        let words = &self.words[..];
        let mut start = 0;
        let known = self.ends.iter().filter_map(move |&end| {
            let end = end.min(words.len());
            if end <= start {
                return None;
            }
            let p = &words[start..end];
            start = end;
            Some(p)
        });
        let tail_from = self.ends.last().copied().unwrap_or(0).min(words.len());
        known.chain(split(&words[tail_from..]))
    }
}
