//! The GPU's register space as its engines reach it: `WAIT_REG_MEM`, `COPY_DATA` and
//! `WRITE_DATA` on registers and `SET_UCONFIG_REG` on the compute queue, `POLL_REGMEM` without
//! `MEM_POLL` on the SDMA engine. Addresses are dword addresses in the GPU's register
//! aperture (the IP block's segment base plus the register's offset).
//!
//! Only the registers a client uses are modelled; any other access is refused and the engine
//! reports it, naming the register, instead of reading a made-up value or dropping a write.
//!
//! - `BIF_BX_PF0_GPU_HDP_FLUSH_REQ` / `_DONE` (NBIO 4.3: offsets 0x106 / 0x107 in segment 2,
//!   whose base is 0xD20, so dwords 0xE26 / 0xE27; tinygrad 0.14 uses these). One bit per
//!   requester (cp0..cp9, sdma0, sdma1, ...). Writing REQ asks the host data path to flush its
//!   write queue; the emulated GPU reaches host memory coherently, so a full fence is the whole
//!   flush and it completes at once: every bit ever requested reads as set in DONE. (Bits are
//!   never cleared: two queues flushing at once must both see theirs.) DONE is read-only.
//!   A request with no bit set flushes nothing.
//! - Dwords 0x106 / 0x107: the bare NBIO offsets, without the segment base, which tinygrad
//!   0.9.0 writes (reference and mask 0) for its HDP flush: on a real GPU that flushed nothing
//!   (tinygrad fixed it in 0.9.1) and its wait passed at once. What a gfx1100 has there is not
//!   known; the emulator takes writes and drops them and reads 0, which is what that client
//!   observed on hardware, and flushes nothing (no fence).
//! - `GRBM_GFX_INDEX` (GC uconfig 0x2200 in segment 1, base 0xA000: dword 0xC200): selects the
//!   shader engine / array / instance later register accesses go to. The emulator has one
//!   instance of each register it models, so the value is only held and read back.
//!
//! These are a gfx1100's. A GPU model whose registers are not modelled
//! ([`Registers::unmodelled`], the models the emulator shows but does not run) refuses every
//! access: its NBIO and GC blocks sit elsewhere, and answering there as a gfx1100 would would
//! hide a client's mistake.

use std::sync::atomic::{fence, AtomicU32, Ordering};

/// Dword address of `GRBM_GFX_INDEX`.
pub(crate) const GRBM_GFX_INDEX: u32 = 0xc200;
/// Dword addresses of the HDP flush request and done registers (NBIO 4.3 PF0, with the
/// segment base).
pub(crate) const HDP_FLUSH_REQ: u32 = 0xe26;
pub(crate) const HDP_FLUSH_DONE: u32 = 0xe27;
/// The HDP pair's bare NBIO offsets, which are not the HDP registers (see the module
/// documentation).
pub(crate) const HDP_FLUSH_REQ_UNBASED: u32 = 0x106;
pub(crate) const HDP_FLUSH_DONE_UNBASED: u32 = 0x107;

/// Why a register access was refused; the engine names the packet around it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum RegisterError {
    /// No model of this register.
    Unmodelled { address: u32 },
    /// A write to a register that can only be read.
    ReadOnly { address: u32 },
}

impl std::fmt::Display for RegisterError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match *self {
            RegisterError::Unmodelled { address } => {
                write!(f, "register {address:#x} is not modelled")
            }
            RegisterError::ReadOnly { address } => {
                write!(f, "register {address:#x} ({}) is read-only", name(address))
            }
        }
    }
}

/// The name of a modelled register.
fn name(address: u32) -> &'static str {
    match address {
        HDP_FLUSH_REQ => "GPU_HDP_FLUSH_REQ",
        HDP_FLUSH_DONE => "GPU_HDP_FLUSH_DONE",
        GRBM_GFX_INDEX => "GRBM_GFX_INDEX",
        _ => "unmodelled",
    }
}

/// One GPU's modelled registers, shared by its engines.
#[derive(Debug)]
pub(crate) struct Registers {
    /// Whether these are a gfx1100's registers; otherwise none is modelled.
    modelled: bool,
    /// Requester bits whose HDP flush has completed.
    hdp_flush_done: AtomicU32,
    grbm_gfx_index: AtomicU32,
}

impl Default for Registers {
    /// A gfx1100's registers, in their reset state.
    fn default() -> Self {
        Registers {
            modelled: true,
            hdp_flush_done: AtomicU32::new(0),
            grbm_gfx_index: AtomicU32::new(0),
        }
    }
}

impl Registers {
    /// The registers of a GPU whose register space is not modelled: every access is refused.
    pub fn unmodelled() -> Self {
        Registers {
            modelled: false,
            ..Registers::default()
        }
    }

    /// Reads the register at dword `address`.
    pub fn read(&self, address: u32) -> Result<u32, RegisterError> {
        if !self.modelled {
            return Err(RegisterError::Unmodelled { address });
        }
        match address {
            HDP_FLUSH_DONE => Ok(self.hdp_flush_done.load(Ordering::SeqCst)),
            // Reading the request register gives back the requests still pending: none, as
            // every flush completes when it is asked for.
            HDP_FLUSH_REQ => Ok(0),
            HDP_FLUSH_REQ_UNBASED | HDP_FLUSH_DONE_UNBASED => Ok(0),
            GRBM_GFX_INDEX => Ok(self.grbm_gfx_index.load(Ordering::SeqCst)),
            _ => Err(RegisterError::Unmodelled { address }),
        }
    }

    /// Writes `value` to the register at dword `address`.
    pub fn write(&self, address: u32, value: u32) -> Result<(), RegisterError> {
        if !self.modelled {
            return Err(RegisterError::Unmodelled { address });
        }
        match address {
            HDP_FLUSH_REQ => {
                // The flush: everything written before is visible to everyone after, if any
                // client asked for it.
                if value != 0 {
                    fence(Ordering::SeqCst);
                }
                self.hdp_flush_done.fetch_or(value, Ordering::SeqCst);
                Ok(())
            }
            HDP_FLUSH_DONE => Err(RegisterError::ReadOnly { address }),
            HDP_FLUSH_REQ_UNBASED | HDP_FLUSH_DONE_UNBASED => Ok(()),
            GRBM_GFX_INDEX => {
                self.grbm_gfx_index.store(value, Ordering::SeqCst);
                Ok(())
            }
            _ => Err(RegisterError::Unmodelled { address }),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_hdp_flush_request_reads_back_as_done() {
        let r = Registers::default();
        assert_eq!(r.read(HDP_FLUSH_DONE), Ok(0));
        r.write(HDP_FLUSH_REQ, 1 << 10).expect("sdma0 requests");
        r.write(HDP_FLUSH_REQ, 1).expect("cp0 requests");
        assert_eq!(r.read(HDP_FLUSH_DONE), Ok((1 << 10) | 1));
        assert_eq!(r.read(HDP_FLUSH_REQ), Ok(0));
        // The bare offsets are not the HDP registers: a request there asks for nothing.
        r.write(HDP_FLUSH_REQ_UNBASED, 1 << 3)
            .expect("accepted and dropped");
        assert_eq!(r.read(HDP_FLUSH_DONE_UNBASED), Ok(0));
        assert_eq!(r.read(HDP_FLUSH_DONE), Ok((1 << 10) | 1));
        assert_eq!(
            r.write(HDP_FLUSH_DONE, 5),
            Err(RegisterError::ReadOnly {
                address: HDP_FLUSH_DONE
            })
        );
    }

    #[test]
    fn grbm_gfx_index_holds_its_value_and_others_are_refused() {
        let r = Registers::default();
        r.write(GRBM_GFX_INDEX, 0xe000_0000).expect("broadcast");
        assert_eq!(r.read(GRBM_GFX_INDEX), Ok(0xe000_0000));
        assert_eq!(
            r.read(0x1234),
            Err(RegisterError::Unmodelled { address: 0x1234 })
        );
        assert_eq!(r.write(0, 1), Err(RegisterError::Unmodelled { address: 0 }));
    }

    #[test]
    fn a_gpu_whose_registers_are_not_modelled_refuses_even_the_hdp_pair() {
        let r = Registers::unmodelled();
        for address in [HDP_FLUSH_REQ, HDP_FLUSH_DONE, GRBM_GFX_INDEX] {
            assert_eq!(r.read(address), Err(RegisterError::Unmodelled { address }));
            assert_eq!(
                r.write(address, 1),
                Err(RegisterError::Unmodelled { address })
            );
        }
    }
}
