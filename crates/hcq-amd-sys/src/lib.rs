//! Raw AMD ABI for hcq, the layer under the driver (`hcq-amd`) and the emulated GPU (`hcq-emu`).
//!
//! - [`ioctl`]: [`ioctl::Ioctl`], a request number bound to its argument struct.
//! - [`kfd`]: the `/dev/kfd` ioctl ABI (`linux/kfd_ioctl.h`).
//! - [`drm`]: the render node's ioctls of the amdgpu driver (`drm/amdgpu_drm.h`).
//! - [`seam`]: the [`seam::Syscalls`] trait, the driver's only way to reach the kernel, and
//!   [`seam::HostKernel`], its implementation over real system calls.
//! - [`pm4`]: compute-queue packets, encoded by the driver and decoded by the emulator.
//! - [`commands`]: [`commands::CommandBuilder`], the operations the PM4 and SDMA builders
//!   share (wait, timestamp, signal, copy, fill), for sequences written once for both engines.
//! - [`regs`]: gfx11 compute registers and their bit fields.
//! - [`kd`]: the kernel descriptor of a code object.
//! - [`aql`]: the AQL kernel dispatch packet a kernel may read its launch from.
//! - [`queue_areas`]: the sizes of a compute queue's EOP buffer, control stack and context
//!   save area, as KFD computes and checks them.
//! - [`signal`]: the `amd_signal_t` layout.
//! - [`shared`]: reading, writing, copying and filling memory the GPU shares with the host
//!   (atomic accesses, never plain loads and stores).
//!
//! Hardware structures are declared once here so that the code that builds them and the code
//! that executes them cannot disagree.

#![deny(missing_docs)]

pub mod aql;
pub mod commands;
pub mod drm;
pub mod ioctl;
pub mod kd;
pub mod kfd;
pub mod occupancy;
pub mod pm4;
pub mod queue_areas;
pub mod regs;
pub mod sdma;
pub mod seam;
pub mod shared;
pub mod signal;
