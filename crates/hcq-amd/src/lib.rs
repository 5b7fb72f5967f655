//! hcq's AMD driver: talks to the Linux kernel driver (KFD) directly, with no ROCm user space.
//!
//! The driver reaches the kernel only through [`hcq_amd_sys::seam::Syscalls`], so the same code
//! drives a real GPU ([`hcq_amd_sys::seam::HostKernel`]) and the emulated one (`hcq-emu`).
//!
//! - [`allocator`]: the cache of freed buffers, and eviction on out-of-memory.
//! - [`kfd`]: thin checked calls over the seam (errors carry the errno); calls the kernel
//!   reports interrupted (`EINTR`, `EAGAIN` from an ioctl) are reissued, and releases it
//!   refuses are kept and retried, so an error path leaks nothing.
//! - [`topology`]: GPU nodes from the KFD sysfs topology.
//! - [`memory`]: buffer objects: VRAM, GTT, userptr; CPU and GPU mappings.
//! - [`signal`]: `amd_signal_t` signals, the process's event page, exception events, waits.
//! - [`queue`]: the PM4 compute queue: ring, read/write pointers, doorbell.
//! - [`program`]: ELF code objects, kernel descriptors, metadata, kernel arguments.
//! - [`compiler`]: HIP source to code object with clang, through the compile cache.
//! - [`transfer`]: copies through the SDMA engine: host copies (staged, or in place in the
//!   caller's pages when large), device to device.
//! - [`trace`]: Chrome-trace output of kernels and copies with their GPU times.
//! - [`driver`]: [`AmdDriver`], the process's state for one kernel, shared by its devices.
//! - [`device`]: [`AmdDevice`], which puts them together; its launches (`dispatch`) and the
//!   GPU timestamps of traced commands (`trace_stamps`) are modules of their own.
//! - [`stream`]: more compute queues on one GPU ([`AmdDevice::open_stream`]), and events
//!   ([`AmdEvent`]) that order and time them.
//! - [`graph`]: captured launches built once into a PM4 stream, replayed with one
//!   `INDIRECT_BUFFER`.

#![deny(missing_docs)]

pub mod allocator;
mod backend;
pub mod compiler;
pub mod device;
mod dispatch;
pub mod driver;
#[doc(hidden)]
pub mod fuzzing;
pub mod graph;
pub mod kfd;
pub mod memory;
pub mod program;
pub mod queue;
pub mod signal;
pub mod stream;
pub mod topology;
pub mod trace;
mod trace_stamps;
pub mod transfer;

pub use device::{AmdBuffer, AmdDevice, DeviceOptions};
pub use driver::AmdDriver;
pub use program::AmdProgram;
pub use stream::AmdEvent;

/// Frequency of the clock that `RELEASE_MEM` timestamps count (gfx11: 100 MHz).
pub const GPU_TIMESTAMP_HZ: u64 = hcq_amd_sys::regs::TIMESTAMP_CLOCK_HZ;
