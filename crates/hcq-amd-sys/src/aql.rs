//! The AQL kernel dispatch packet (`hsa_kernel_dispatch_packet_t`): 64 bytes describing a
//! launch. A PM4 queue does not run it, but a kernel whose descriptor asks for the dispatch
//! pointer (`ENABLE_SGPR_DISPATCH_PTR`) reads its launch from one, so the driver writes it
//! beside the kernel's arguments.

use std::mem::{offset_of, size_of};

/// An AQL kernel dispatch packet, field for field as the HSA runtime defines it.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct KernelDispatchPacket {
    /// Packet type, barrier and fences (read by an AQL packet processor; 0 here, since the
    /// packet is only read by the kernel).
    pub header: u16,
    /// Bits 0..2: the number of dimensions of the launch (1 to 3).
    pub setup: u16,
    /// Work-items per workgroup along X.
    pub workgroup_size_x: u16,
    /// Work-items per workgroup along Y.
    pub workgroup_size_y: u16,
    /// Work-items per workgroup along Z.
    pub workgroup_size_z: u16,
    /// Must be 0.
    pub reserved0: u16,
    /// Work-items of the whole grid along X (not workgroups).
    pub grid_size_x: u32,
    /// Work-items of the whole grid along Y.
    pub grid_size_y: u32,
    /// Work-items of the whole grid along Z.
    pub grid_size_z: u32,
    /// Bytes of private (scratch) memory per work-item.
    pub private_segment_size: u32,
    /// Bytes of LDS per workgroup, the kernel's own and the dynamic part together.
    pub group_segment_size: u32,
    /// Address of the kernel descriptor (0 when the packet only describes the launch).
    pub kernel_object: u64,
    /// Address of the kernel-argument segment.
    pub kernarg_address: u64,
    /// Must be 0.
    pub reserved2: u64,
    /// Signal an AQL packet processor decrements at the end (0: none).
    pub completion_signal: u64,
}

/// Bytes of a packet.
pub const KERNEL_DISPATCH_PACKET_BYTES: usize = 64;

// The HSA layout, offsets as the runtime's header gives them.
const _: () = {
    assert!(size_of::<KernelDispatchPacket>() == KERNEL_DISPATCH_PACKET_BYTES);
    assert!(offset_of!(KernelDispatchPacket, setup) == 2);
    assert!(offset_of!(KernelDispatchPacket, workgroup_size_x) == 4);
    assert!(offset_of!(KernelDispatchPacket, grid_size_x) == 12);
    assert!(offset_of!(KernelDispatchPacket, private_segment_size) == 24);
    assert!(offset_of!(KernelDispatchPacket, group_segment_size) == 28);
    assert!(offset_of!(KernelDispatchPacket, kernel_object) == 32);
    assert!(offset_of!(KernelDispatchPacket, kernarg_address) == 40);
    assert!(offset_of!(KernelDispatchPacket, completion_signal) == 56);
};

impl KernelDispatchPacket {
    /// The packet for a launch of `global` workgroups of `local` work-items: dimensions
    /// counted from the highest axis with more than one workgroup or work-item, grid sizes in
    /// work-items (wrapping at 32 bits, as the launch checks forbid), workgroup sizes
    /// truncated to 16 bits (launch checks keep them at most 1024).
    pub fn for_launch(
        global: [u32; 3],
        local: [u32; 3],
        private_segment_size: u32,
        group_segment_size: u32,
        kernarg_address: u64,
    ) -> KernelDispatchPacket {
        let dims: u16 = if global[2] > 1 || local[2] > 1 {
            3
        } else if global[1] > 1 || local[1] > 1 {
            2
        } else {
            1
        };
        let items = |i: usize| global[i].wrapping_mul(local[i]);
        KernelDispatchPacket {
            setup: dims,
            workgroup_size_x: local[0] as u16,
            workgroup_size_y: local[1] as u16,
            workgroup_size_z: local[2] as u16,
            grid_size_x: items(0),
            grid_size_y: items(1),
            grid_size_z: items(2),
            private_segment_size,
            group_segment_size,
            kernarg_address,
            ..Default::default()
        }
    }

    /// The packet's bytes in memory order (little-endian), each field at its offset.
    pub fn to_bytes(&self) -> [u8; KERNEL_DISPATCH_PACKET_BYTES] {
        let mut p = [0u8; KERNEL_DISPATCH_PACKET_BYTES];
        let mut put = |at: usize, bytes: &[u8]| p[at..at + bytes.len()].copy_from_slice(bytes);
        type P = KernelDispatchPacket;
        put(offset_of!(P, header), &self.header.to_le_bytes());
        put(offset_of!(P, setup), &self.setup.to_le_bytes());
        put(
            offset_of!(P, workgroup_size_x),
            &self.workgroup_size_x.to_le_bytes(),
        );
        put(
            offset_of!(P, workgroup_size_y),
            &self.workgroup_size_y.to_le_bytes(),
        );
        put(
            offset_of!(P, workgroup_size_z),
            &self.workgroup_size_z.to_le_bytes(),
        );
        put(offset_of!(P, reserved0), &self.reserved0.to_le_bytes());
        put(offset_of!(P, grid_size_x), &self.grid_size_x.to_le_bytes());
        put(offset_of!(P, grid_size_y), &self.grid_size_y.to_le_bytes());
        put(offset_of!(P, grid_size_z), &self.grid_size_z.to_le_bytes());
        put(
            offset_of!(P, private_segment_size),
            &self.private_segment_size.to_le_bytes(),
        );
        put(
            offset_of!(P, group_segment_size),
            &self.group_segment_size.to_le_bytes(),
        );
        put(
            offset_of!(P, kernel_object),
            &self.kernel_object.to_le_bytes(),
        );
        put(
            offset_of!(P, kernarg_address),
            &self.kernarg_address.to_le_bytes(),
        );
        put(offset_of!(P, reserved2), &self.reserved2.to_le_bytes());
        put(
            offset_of!(P, completion_signal),
            &self.completion_signal.to_le_bytes(),
        );
        p
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_launch_packet_in_memory_order() {
        let p = KernelDispatchPacket::for_launch([2, 3, 1], [8, 4, 1], 16, 1024, 0x0012_3456_789a);
        let b = p.to_bytes();
        assert_eq!(u16::from_le_bytes([b[2], b[3]]), 2);
        assert_eq!(&b[4..10], &[8, 0, 4, 0, 1, 0]);
        assert_eq!(&b[12..24], &[16, 0, 0, 0, 12, 0, 0, 0, 1, 0, 0, 0]);
        assert_eq!(u32::from_le_bytes(b[24..28].try_into().unwrap()), 16);
        assert_eq!(u32::from_le_bytes(b[28..32].try_into().unwrap()), 1024);
        assert_eq!(
            u64::from_le_bytes(b[40..48].try_into().unwrap()),
            0x0012_3456_789a
        );
        assert!(b[..2]
            .iter()
            .chain(&b[32..40])
            .chain(&b[48..])
            .all(|&x| x == 0));
        assert_eq!(
            KernelDispatchPacket::for_launch([1; 3], [1; 3], 0, 0, 0).setup,
            1
        );
        assert_eq!(
            KernelDispatchPacket::for_launch([1, 1, 2], [1; 3], 0, 0, 0).setup,
            3
        );
    }
}
