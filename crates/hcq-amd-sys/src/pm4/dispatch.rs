//! The packets that program compute and user-config registers and launch a grid, and the
//! predicate that limits packets to some XCCs.

use super::{
    header, need, DecodeError, OP_DISPATCH_DIRECT, OP_PRED_EXEC, OP_SET_SH_REG, OP_SET_UCONFIG_REG,
};

/// First register dword address `SET_UCONFIG_REG` reaches (its offset counts from here).
pub const UCONFIG_REG_START: u32 = 0xc000;

/// `SET_SH_REG`: write consecutive SH registers starting at `reg` (offset from 0x2c00).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SetShReg<'a> {
    /// Dword 1 bits 0..16: the first register, as an offset from
    /// [`regs::SH_REG_START`](crate::regs::SH_REG_START) (a `regs::COMPUTE_*` constant).
    pub reg: u16,
    /// Dwords 2 and on: the values of `reg`, `reg + 1`, and so on.
    pub values: &'a [u32],
}

impl SetShReg<'_> {
    /// Appends the header, the offset and the values to `out` (the count follows from `values`).
    pub fn encode(&self, out: &mut Vec<u32>) {
        out.push(header(OP_SET_SH_REG, self.values.len() as u32));
        out.push(self.reg as u32);
        out.extend_from_slice(self.values);
    }
}

impl<'a> SetShReg<'a> {
    /// Reads the packet from its payload `p`: `values` borrows every dword after the offset. Fails
    /// with [`DecodeError::Truncated`] only on an empty payload; bits 16..32 of the offset dword
    /// are ignored.
    pub fn decode(p: &'a [u32]) -> Result<Self, DecodeError> {
        need(OP_SET_SH_REG, p, 1)?;
        Ok(SetShReg {
            reg: (p[0] & 0xffff) as u16,
            values: &p[1..],
        })
    }
}

/// `DISPATCH_DIRECT`: launch a grid.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DispatchDirect {
    /// Dwords 1..4: the grid size along X, Y and Z, in workgroups (in work-items with
    /// `USE_THREAD_DIMENSIONS`).
    pub dims: [u32; 3],
    /// Dword 4: the value for `COMPUTE_DISPATCH_INITIATOR` (the
    /// [`regs::initiator`](crate::regs::initiator) bits).
    pub initiator: u32,
}

impl DispatchDirect {
    /// Payload dwords after the header.
    pub const PAYLOAD: usize = 4;
    /// Appends the header and payload to `out`.
    pub fn encode(&self, out: &mut Vec<u32>) {
        out.push(header(OP_DISPATCH_DIRECT, Self::PAYLOAD as u32 - 1));
        out.extend_from_slice(&self.dims);
        out.push(self.initiator);
    }
    /// Reads the packet from its payload `p` (the dwords after the header; extra ones are ignored).
    /// Fails with [`DecodeError::Truncated`] only when `p` is shorter than [`Self::PAYLOAD`]; field
    /// values are not checked.
    pub fn decode(p: &[u32]) -> Result<Self, DecodeError> {
        need(OP_DISPATCH_DIRECT, p, Self::PAYLOAD)?;
        Ok(DispatchDirect {
            dims: [p[0], p[1], p[2]],
            initiator: p[3],
        })
    }
}

/// `PRED_EXEC`: the next `exec_count` dwords run only on the XCCs (compute dies) whose bit
/// is set in `device_select`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PredExec {
    /// Dwords of packets that follow under the predicate (14 bits).
    pub exec_count: u16,
    /// One bit per XCC (bits 24..32 of the payload).
    pub device_select: u8,
}

impl PredExec {
    /// Appends the header and the predicate dword to `out` (`exec_count` cut to 14 bits).
    pub fn encode(&self, out: &mut Vec<u32>) {
        out.push(header(OP_PRED_EXEC, 0));
        out.push((u32::from(self.exec_count) & 0x3fff) | (u32::from(self.device_select) << 24));
    }
    /// Reads the predicate dword from the payload `p`; fails with [`DecodeError::Truncated`] only
    /// on an empty payload.
    pub fn decode(p: &[u32]) -> Result<Self, DecodeError> {
        need(OP_PRED_EXEC, p, 1)?;
        Ok(PredExec {
            exec_count: (p[0] & 0x3fff) as u16,
            device_select: (p[0] >> 24) as u8,
        })
    }
}

/// `SET_UCONFIG_REG`: write consecutive user-config registers starting at `reg` (offset from
/// [`UCONFIG_REG_START`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SetUconfigReg<'a> {
    /// Dword 1 bits 0..16: the first register, as an offset from [`UCONFIG_REG_START`].
    pub reg: u16,
    /// Dwords 2 and on: the values of `reg`, `reg + 1`, and so on.
    pub values: &'a [u32],
}

impl SetUconfigReg<'_> {
    /// Appends the header, the offset and the values to `out` (the count follows from `values`).
    pub fn encode(&self, out: &mut Vec<u32>) {
        out.push(header(OP_SET_UCONFIG_REG, self.values.len() as u32));
        out.push(u32::from(self.reg));
        out.extend_from_slice(self.values);
    }
}

impl<'a> SetUconfigReg<'a> {
    /// Reads the packet from its payload `p`: `values` borrows every dword after the offset. Fails
    /// with [`DecodeError::Truncated`] only on an empty payload.
    pub fn decode(p: &'a [u32]) -> Result<Self, DecodeError> {
        need(OP_SET_UCONFIG_REG, p, 1)?;
        Ok(SetUconfigReg {
            reg: (p[0] & 0xffff) as u16,
            values: &p[1..],
        })
    }
}
