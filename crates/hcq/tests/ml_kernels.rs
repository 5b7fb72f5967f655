//! ML-framework kernels (the patterns tinygrad, PyTorch/ROCm, llama.cpp and Triton-style
//! generators emit), compiled by clang-19 and run on the emulated gfx1100 GPU. Every output
//! element is compared with an independent host computation: bit for bit where the kernel's
//! arithmetic is exact or its rounding order is fixed, else within the bound stated at the
//! check. Sources: `kernels/ml/*.hip`.

#[path = "ml_kernels/common.rs"]
mod common;
// The kernel suite's device, compile cache, inputs and checks; not all of it is used here.
#[path = "suite/common.rs"]
#[allow(dead_code)]
mod shared;

#[path = "ml_kernels/conv.rs"]
mod conv;
#[path = "ml_kernels/data.rs"]
mod data;
#[path = "ml_kernels/elementwise.rs"]
mod elementwise;
#[path = "ml_kernels/gemm.rs"]
mod gemm;
#[path = "ml_kernels/reduce.rs"]
mod reduce;

const ELEMENTWISE: &str = include_str!("../../../kernels/ml/elementwise.hip");
const REDUCE: &str = include_str!("../../../kernels/ml/reduce.hip");
const GEMM: &str = include_str!("../../../kernels/ml/gemm.hip");
const CONV: &str = include_str!("../../../kernels/ml/conv.hip");
const DATA: &str = include_str!("../../../kernels/ml/data.hip");
