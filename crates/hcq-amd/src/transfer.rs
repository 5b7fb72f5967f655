//! Copies through the SDMA engine: host to device and back through a ring of staging buffers,
//! or in place in the caller's memory when the copy is large; device to device (also between
//! GPUs) directly. Every copy takes its place on the device's timeline, so copies and kernels
//! execute in submission order.

use crate::device::{lock, AmdBuffer, AmdDevice, DeviceState, Staging};
use crate::memory::{AllocFlags, GpuMemory, MemoryKind};
use crate::signal::Signal;
use crate::trace_stamps::TraceSlot;
use hcq_amd_sys::commands::CommandBuilder;
use hcq_amd_sys::sdma::MAX_COPY_SIZE;
use hcq_core::{Error, Result};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Staging buffers per device, each one `MAX_COPY_SIZE` bytes of host memory the GPU reaches.
pub const STAGING_SLOTS: usize = 16;

/// Copies in or out at least this large skip staging: the caller's pages are registered with
/// the GPU and the copy engine reads or writes them in place, one pass over memory instead of
/// two.
pub const DIRECT_COPY_MIN: usize = 16 << 20;

impl AmdDevice {
    fn staging<'a>(&self, st: &'a mut DeviceState) -> Result<&'a mut Staging> {
        if st.staging.is_none() {
            let slots = (0..STAGING_SLOTS)
                .map(|_| {
                    self.alloc_mem(
                        MAX_COPY_SIZE,
                        MemoryKind::UserPtr,
                        AllocFlags {
                            uncached: false,
                            public: true,
                        },
                    )
                })
                .collect::<Result<Vec<_>>>()?;
            st.staging = Some(Staging {
                slots,
                done: vec![0; STAGING_SLOTS],
                next: 0,
            });
        }
        Ok(st.staging.as_mut().expect("created above"))
    }

    /// Queues a copy of `size` bytes that runs after everything queued before it and signals
    /// the next timeline value, which it returns.
    fn queue_copy(
        &self,
        st: &mut DeviceState,
        dst: u64,
        src: u64,
        size: u64,
        what: &str,
    ) -> Result<u64> {
        self.queue_transfer(st, Transfer::Copy { dst, src, size }, what)
    }

    /// Queues `transfer` on the copy engine (or, without one, the compute queue) after
    /// everything queued before it, signalling the next timeline value, which it returns.
    fn queue_transfer(&self, st: &mut DeviceState, transfer: Transfer, what: &str) -> Result<u64> {
        self.check_usable()?;
        self.wrap_timeline_if_due(st)?;
        let stamps = self.trace_begin(st, what)?;
        let value = st.timeline_value;
        let room_wait = self.ring_wait(st);
        let waits = [(st.timeline.value_addr(), value - 1)];
        let bytes = match transfer {
            Transfer::Copy { size, .. } | Transfer::Fill { size, .. } => size,
        };
        submit_transfer(st, &waits, stamps, transfer, room_wait)?;
        Self::trace_commit_with(
            st,
            stamps,
            what,
            || {
                vec![
                    ("bytes", bytes.to_string()),
                    ("direction", direction(what).into()),
                ]
            },
            "copy",
        );
        st.advance();
        Ok(value)
    }

    /// The whole pages holding `len` bytes at `addr`, registered with this GPU so its copy
    /// engine reaches them in place; `None` when the driver refuses them (another registration
    /// already covers one of the pages, say a concurrent copy from a neighbouring slice), in
    /// which case the caller stages instead.
    ///
    /// # Safety
    /// The bytes must stay borrowed by the caller until the result is dropped, and the engine
    /// may only touch those bytes, not the rest of their first and last page.
    unsafe fn register_pages(&self, addr: u64, len: usize) -> Option<GpuMemory> {
        let page = crate::memory::PAGE_SIZE;
        let start = addr & !(page - 1);
        let end = (addr + len as u64).next_multiple_of(page);
        // SAFETY: the caller keeps the pages mapped (they hold its borrowed bytes) for as long
        // as the registration lives.
        unsafe { GpuMemory::register_host(&self.driver.kfd, self.node.gpu_id, start, end - start) }
            .ok()
    }

    /// After the wait for an in-place copy (signalling `value`) failed with `failed`: when a
    /// kernel call failed rather than the engine, waits for the engine to pass `value` by
    /// watching the timeline in memory (no kernel call), up to the device's timeout, so the
    /// copy does not return while the engine still reads or writes the caller's pages. True
    /// when the engine got there.
    fn engine_passed(&self, st: &DeviceState, value: u64, failed: &Error) -> bool {
        if !matches!(failed, Error::Driver { .. }) {
            // A fault or a timeout: the engine may never get there; do not wait again.
            return st.timeline.value() >= value;
        }
        let start = Instant::now();
        while st.timeline.value() < value {
            if start.elapsed() > self.timeout {
                return false;
            }
            std::thread::sleep(Duration::from_micros(50));
        }
        true
    }

    /// Copies host bytes into `buf` at `offset`, after the work already queued. Returns when the
    /// bytes are staged (the host slice may be reused); the copy itself completes in order.
    pub fn copy_in(&self, buf: &AmdBuffer, offset: u64, src: &[u8]) -> Result<()> {
        Self::check_range(buf, offset, src.len())?;
        let mut guard = lock(&self.state);
        let st = &mut *guard;
        if src.len() >= DIRECT_COPY_MIN {
            // SAFETY: `src` is borrowed until this function returns, and `copy_in_direct` keeps
            // the registration until the engine is done with it; the engine reads only `src`.
            if let Some(pages) = unsafe { self.register_pages(src.as_ptr() as u64, src.len()) } {
                return self.copy_in_direct(st, pages, buf, offset, src);
            }
        }
        self.staging(st)?;
        for (i, chunk) in src.chunks(MAX_COPY_SIZE as usize).enumerate() {
            let staging = st.staging.as_mut().expect("created above");
            let slot = staging.next;
            staging.next = (slot + 1) % STAGING_SLOTS;
            let free_at = staging.done[slot];
            self.wait_value_locked(st, free_at)?;
            let staging = st.staging.as_mut().expect("created above");
            staging.slots[slot].write(0, chunk)?;
            let from = staging.slots[slot].va;
            let dst = buf.gpu_address() + offset + (i as u64) * MAX_COPY_SIZE;
            let value = self.queue_copy(st, dst, from, chunk.len() as u64, "copy in")?;
            st.staging.as_mut().expect("created above").done[slot] = value;
        }
        Ok(())
    }

    /// A large copy-in straight from the caller's `pages`, which hold `src`; waited for before
    /// returning, as the slice is only borrowed.
    fn copy_in_direct(
        &self,
        st: &mut DeviceState,
        pages: GpuMemory,
        buf: &AmdBuffer,
        offset: u64,
        src: &[u8],
    ) -> Result<()> {
        let value = self.queue_copy(
            st,
            buf.gpu_address() + offset,
            src.as_ptr() as u64,
            src.len() as u64,
            "copy in",
        )?;
        let done = self.wait_value_locked(st, value);
        if let Err(e) = &done {
            if !self.engine_passed(st, value, e) {
                // The engine may still be reading: keep the registration until it is done
                // rather than unregister pages in use. It only ever reads them.
                st.retired.push(Arc::new(pages));
            }
        }
        done
    }

    /// Copies `dst.len()` bytes out of `buf` at `offset`, after the work already queued, and
    /// returns once they are in `dst`. Large copies land in `dst` directly; smaller ones pass
    /// through staging buffers.
    pub fn copy_out(&self, dst: &mut [u8], buf: &AmdBuffer, offset: u64) -> Result<()> {
        Self::check_range(buf, offset, dst.len())?;
        let mut guard = lock(&self.state);
        let st = &mut *guard;
        if dst.len() >= DIRECT_COPY_MIN {
            // SAFETY: `dst` is borrowed until this function returns, and `copy_out_direct`
            // drops the registration before then; the engine writes exactly the bytes of `dst`,
            // so the rest of its first and last page keeps whatever else is stored there.
            if let Some(pages) = unsafe { self.register_pages(dst.as_ptr() as u64, dst.len()) } {
                return self.copy_out_direct(st, pages, dst, buf, offset);
            }
        }
        self.copy_out_staged(st, dst, buf, offset)
    }

    /// A large copy-out straight into the caller's `pages`, which hold `dst`: one pass over
    /// memory instead of a copy into staging and another out of it.
    fn copy_out_direct(
        &self,
        st: &mut DeviceState,
        pages: GpuMemory,
        dst: &mut [u8],
        buf: &AmdBuffer,
        offset: u64,
    ) -> Result<()> {
        let value = self.queue_copy(
            st,
            dst.as_mut_ptr() as u64,
            buf.gpu_address() + offset,
            dst.len() as u64,
            "copy out",
        )?;
        // Unlike copy-in, the registration goes even when the wait fails: once this returns
        // the caller may reuse the memory, so an engine still behind must lose its access to
        // the pages (and fault) rather than write into them later.
        let done = self.wait_value_locked(st, value);
        if let Err(e) = &done {
            self.engine_passed(st, value, e);
        }
        drop(pages);
        done
    }

    /// Copy-out through staging buffers, double-buffered: the engine fills one while the host
    /// drains the other.
    fn copy_out_staged(
        &self,
        st: &mut DeviceState,
        dst: &mut [u8],
        buf: &AmdBuffer,
        offset: u64,
    ) -> Result<()> {
        self.staging(st)?;
        let chunks: Vec<&mut [u8]> = dst.chunks_mut(MAX_COPY_SIZE as usize).collect();
        let n = chunks.len();
        // (slot, timeline value, timeline epoch) of each chunk in flight. A value from before a
        // timeline swap is complete: the swap waited for everything.
        let mut in_flight: Vec<(usize, u64, u64)> = Vec::with_capacity(n);
        let submit = |st: &mut DeviceState, i: usize, len: usize| -> Result<(usize, u64, u64)> {
            let staging = st.staging.as_mut().expect("created above");
            let slot = staging.next;
            staging.next = (slot + 1) % STAGING_SLOTS;
            let free_at = staging.done[slot];
            self.wait_value_locked(st, free_at)?;
            let to = st.staging.as_ref().expect("created above").slots[slot].va;
            let src = buf.gpu_address() + offset + (i as u64) * MAX_COPY_SIZE;
            let value = self.queue_copy(st, to, src, len as u64, "copy out")?;
            st.staging.as_mut().expect("created above").done[slot] = value;
            Ok((slot, value, st.timeline_swaps))
        };
        let lens: Vec<usize> = chunks.iter().map(|c| c.len()).collect();
        if n > 0 {
            in_flight.push(submit(st, 0, lens[0])?);
        }
        for (i, chunk) in chunks.into_iter().enumerate() {
            if i + 1 < n {
                in_flight.push(submit(st, i + 1, lens[i + 1])?);
            }
            let (slot, value, epoch) = in_flight[i];
            if epoch == st.timeline_swaps {
                self.wait_value_locked(st, value)?;
            }
            st.staging.as_ref().expect("created above").slots[slot].read(0, chunk)?;
        }
        Ok(())
    }

    /// Fills `size` bytes of `buf` from `offset` with `pattern` (1, 2 or 4 bytes, repeated
    /// from its first byte at `offset`), after the work already queued; returns once it is
    /// queued. The whole dwords go through the copy engine's constant fill (CP DMA without
    /// one); the up to three bytes at each end that are not a whole dword are staged.
    pub fn fill(&self, buf: &AmdBuffer, offset: u64, size: u64, pattern: &[u8]) -> Result<()> {
        if !matches!(pattern.len(), 1 | 2 | 4) {
            return Err(Error::InvalidArgument(format!(
                "a fill pattern is 1, 2 or 4 bytes, not {}",
                pattern.len()
            )));
        }
        Self::check_range(buf, offset, size as usize)?;
        let byte_at = |k: u64| pattern[(k % pattern.len() as u64) as usize];
        let start = buf.gpu_address() + offset;
        let head = (start.wrapping_neg() & 3).min(size);
        let words = (size - head) / 4 * 4;
        let tail = size - head - words;
        if head > 0 {
            let bytes: Vec<u8> = (0..head).map(byte_at).collect();
            self.copy_in(buf, offset, &bytes)?;
        }
        if words > 0 {
            let value = u32::from_le_bytes([
                byte_at(head),
                byte_at(head + 1),
                byte_at(head + 2),
                byte_at(head + 3),
            ]);
            let mut st = lock(&self.state);
            let fill = Transfer::Fill {
                dst: start + head,
                value,
                size: words,
            };
            self.queue_transfer(&mut st, fill, "fill")?;
        }
        if tail > 0 {
            let bytes: Vec<u8> = (head + words..size).map(byte_at).collect();
            self.copy_in(buf, offset + head + words, &bytes)?;
        }
        Ok(())
    }

    /// Copies `size` bytes from `src` (on this device) to `dst` (on `dst_device`, which may be
    /// this one) without passing through the host. Ordered after the work queued on both
    /// devices; work queued on `dst_device` afterwards sees the data.
    pub fn transfer(
        &self,
        dst_device: &AmdDevice,
        dst: &AmdBuffer,
        dst_offset: u64,
        src: &AmdBuffer,
        src_offset: u64,
        size: u64,
    ) -> Result<()> {
        Self::check_range(src, src_offset, size as usize)?;
        Self::check_range(dst, dst_offset, size as usize)?;
        let (to, from) = (
            dst.gpu_address() + dst_offset,
            src.gpu_address() + src_offset,
        );
        if std::ptr::eq(self, dst_device) {
            let mut st = lock(&self.state);
            self.queue_copy(&mut st, to, from, size, "copy")?;
            return Ok(());
        }
        // The source GPU's copy engine writes into the destination's memory.
        dst.memory().map_to(self.node.gpu_id)?;
        // Lock in a global order so two transfers in opposite directions cannot deadlock
        // (streams of one GPU share its id: their addresses break the tie).
        let rank = |d: &AmdDevice| (d.node.gpu_id, d as *const AmdDevice as usize);
        let (mut s, mut d) = if rank(self) < rank(dst_device) {
            let s = lock(&self.state);
            (s, lock(&dst_device.state))
        } else {
            let d = lock(&dst_device.state);
            (lock(&self.state), d)
        };
        let (s, d) = (&mut *s, &mut *d);
        self.check_usable()?;
        dst_device.check_usable()?;
        self.wrap_timeline_if_due(s)?;
        dst_device.wrap_timeline_if_due(d)?;
        // The source's engine does the copy, so the span goes on the source's copy track.
        let span = format!("copy to {}", dst_device.name);
        let stamps = self.trace_begin(s, &span)?;
        let (sv, dv) = (s.timeline_value, d.timeline_value);
        let room_wait = self.ring_wait(s);
        let waits = [
            (s.timeline.value_addr(), sv - 1),
            (d.timeline.value_addr(), dv - 1),
        ];
        let copy = Transfer::Copy {
            dst: to,
            src: from,
            size,
        };
        submit_transfer(s, &waits, stamps, copy, room_wait)?;
        Self::trace_commit_with(
            s,
            stamps,
            &span,
            || {
                vec![
                    ("bytes", size.to_string()),
                    ("direction", "device to device".into()),
                ]
            },
            "copy",
        );
        s.advance();
        // The destination's compute queue holds its later work until the copy is done, and
        // its timeline records that point.
        let copied = [(s.timeline.value_addr(), sv)];
        d.timeline
            .release_after(&mut d.builder, &copied, None, dv, |_| ());
        let words = std::mem::take(&mut d.builder.words);
        let r = d.queue.submit(&words, dst_device.ring_wait(d));
        d.builder.words = words;
        r?;
        d.advance();
        Ok(())
    }
}

/// Which way a traced copy (named by `queue_transfer`'s callers) moves its bytes.
fn direction(what: &str) -> &'static str {
    match what {
        "copy in" => "host to device",
        "copy out" => "device to host",
        "fill" => "none (a fill)",
        _ => "device to device",
    }
}

/// What an engine moves: bytes from `src`, or a 32-bit `value` repeated (whole dwords).
#[derive(Debug, Clone, Copy)]
enum Transfer {
    Copy { dst: u64, src: u64, size: u64 },
    Fill { dst: u64, value: u32, size: u64 },
}

/// The commands of one copy or fill: its waits, the transfer between its trace stamps, the
/// release of `timeline`'s next value.
fn build_transfer(
    b: &mut impl CommandBuilder,
    waits: &[(u64, u64)],
    stamps: Option<TraceSlot>,
    transfer: Transfer,
    timeline: &Signal,
    value: u64,
) {
    timeline.release_after(
        b,
        waits,
        stamps.map(TraceSlot::addresses),
        value,
        |b| match transfer {
            Transfer::Copy { dst, src, size } => b.copy(dst, src, size),
            Transfer::Fill { dst, value, size } => b.fill(dst, value, size),
        },
    );
}

/// Queues a copy or fill on the device's SDMA queue, or, on a device without one, on its
/// compute queue as CP DMA. The waits come first: CP DMA does not wait for earlier kernels by
/// itself, and the builder's last DMA packet has `CP_SYNC`, so the signal follows the data.
fn submit_transfer(
    st: &mut DeviceState,
    waits: &[(u64, u64)],
    stamps: Option<TraceSlot>,
    transfer: Transfer,
    room_wait: Duration,
) -> Result<()> {
    let (timeline, value) = (&st.timeline, st.timeline_value);
    match &mut st.sdma {
        Some(sdma) => {
            build_transfer(
                &mut st.sdma_builder,
                waits,
                stamps,
                transfer,
                timeline,
                value,
            );
            sdma.submit_sdma(&st.sdma_builder, room_wait)
        }
        None => {
            build_transfer(&mut st.builder, waits, stamps, transfer, timeline, value);
            st.queue.submit(&st.builder.words, room_wait)
        }
    }
}
