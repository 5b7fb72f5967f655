//! hcq's Metal backend: the device (buffers in shared storage, MSL compiled through the compile
//! cache, compute pipelines, dispatch, command buffers in flight) and [`MetalGraph`], which
//! encodes a captured sequence of launches once into an `MTLIndirectCommandBuffer` and replays
//! it with one command buffer (tinygrad 0.9.0's `runtime/graph/metal.py`).
//!
//! **This backend has never run on a Mac.** No machine of this project runs macOS. The logic
//! (what is bound where, which dimensions change, what is waited on) is plain Rust over the
//! [`MetalApi`] trait and is tested on Linux against the recording [`fake::FakeMetal`]; the
//! objc2 implementation of the trait (`objc`, macOS only) is type-checked for
//! `aarch64-apple-darwin` by `scripts/check-apple.sh`.
//!
//! - [`api`]: the [`MetalApi`] trait, one method per Metal call.
//! - [`device`]: [`MetalDevice`], [`MetalBuffer`], [`MetalProgram`], streams (more command
//!   queues of one device) and [`MetalEvent`]s that order them.
//! - [`inflight`]: the queue of committed command buffers (O(1) "still in flight?").
//! - [`graph`]: the neutral graph description ([`GraphSpec`]), its [`GraphPlan`], and
//!   [`MetalGraph`].
//! - [`fake`]: the recording fake Metal.
//! - `objc` (macOS only): `ObjcMetal`, the real Metal through `objc2-metal`, and why a device
//!   and its events over it may be shared between threads.
//! - [`backend`]: [`MetalDevice`] as an hcq backend ([`hcq_core::Backend`]), and the lowering
//!   of a recorded graph into a [`GraphSpec`] for [`MetalGraph`].

#![deny(missing_docs)]

pub mod api;
pub mod backend;
pub mod device;
pub mod fake;
pub mod graph;
pub mod inflight;
#[cfg(target_os = "macos")]
pub mod objc;

pub use api::{CommandStatus, MetalApi, Size3};
pub use device::{
    device_names, MetalBuffer, MetalDevice, MetalEvent, MetalProgram, StreamQueue,
    MAX_BUFFER_BINDINGS,
};
pub use graph::{
    dims, Bind, BufferRef, CommandPlan, DimExpr, Dims, ExecItem, GraphPlan, GraphSpec, MetalGraph,
    Var, VarId, VarSpec,
};
#[cfg(target_os = "macos")]
pub use objc::{open_system_device, system_device_names, ObjcMetal, SystemMetalDevice};
