//! The kernel suite: real HIP kernels compiled by clang-19 and run on the emulated gfx1100 GPU,
//! every output element checked against an independent host computation.
//!
//! Kernels live in `kernels/suite/*.hip` (see its README); each `#[test]` runs one kernel.
//! Tests marked `#[ignore = "interpreter: ..."]` hit a gap of the RDNA3 interpreter; the
//! reason names the missing instruction.

#[path = "suite/common.rs"]
mod common;

#[path = "suite/arith.rs"]
mod arith;
#[path = "suite/atomics.rs"]
mod atomics;
#[path = "suite/bits.rs"]
mod bits;
#[path = "suite/buffer.rs"]
mod buffer;
#[path = "suite/control.rs"]
mod control;
#[path = "suite/convert.rs"]
mod convert;
#[path = "suite/lds.rs"]
mod lds;
#[path = "suite/memory.rs"]
mod memory;
#[path = "suite/packed.rs"]
mod packed;
#[path = "suite/transcendental.rs"]
mod transcendental;
#[path = "suite/wave.rs"]
mod wave;

const ARITH: &str = include_str!("../../../kernels/suite/arith.hip");
const ATOMICS: &str = include_str!("../../../kernels/suite/atomics.hip");
const BITS: &str = include_str!("../../../kernels/suite/bits.hip");
const BUFFER: &str = include_str!("../../../kernels/suite/buffer.hip");
const CONTROL: &str = include_str!("../../../kernels/suite/control.hip");
const CONVERT: &str = include_str!("../../../kernels/suite/convert.hip");
const LDS: &str = include_str!("../../../kernels/suite/lds.hip");
const MEMORY: &str = include_str!("../../../kernels/suite/memory.hip");
const PACKED: &str = include_str!("../../../kernels/suite/packed.hip");
const TRANSCENDENTAL: &str = include_str!("../../../kernels/suite/transcendental.hip");
const WAVE: &str = include_str!("../../../kernels/suite/wave.hip");
