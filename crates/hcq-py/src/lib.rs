//! The `hcq._hcq` Python extension module: hcq's Rust API as Python classes. The package
//! `hcq` (under `python/`) re-exports it next to its exception classes.
//!
//! Every class is `frozen` (immutable after construction) around an hcq handle that is
//! `Send + Sync`, so Python threads share them without locks of ours; calls that wait
//! (compiles, copies, timed launches, synchronisation) release the GIL.

mod buffer;
mod device;
mod dlpack;
mod errors;
mod graph;
mod jit;
mod program;
mod stream;

use pyo3::prelude::*;

/// Drops `value` with the GIL released, for hcq handles whose drop waits for the device.
fn drop_without_gil<T: Send>(value: T) {
    // Deallocation always runs with the GIL held; attaching again only reads the thread's
    // state.
    Python::attach(|py| py.detach(move || drop(value)));
}

#[pymodule]
fn _hcq(module: &Bound<'_, PyModule>) -> PyResult<()> {
    // hcq's log (devices, compiles, allocations, each kernel's GPU time) on stderr, as the
    // CLI writes it, when RUST_LOG asks for it (e.g. RUST_LOG=hcq=debug).
    if let Ok(spec) = std::env::var("RUST_LOG") {
        let _ = tracing_subscriber::fmt()
            .with_env_filter(tracing_subscriber::EnvFilter::new(spec))
            .with_writer(std::io::stderr)
            .without_time()
            .with_ansi(false)
            .try_init();
    }
    module.add_function(wrap_pyfunction!(device::devices, module)?)?;
    module.add_function(wrap_pyfunction!(dlpack::from_dlpack, module)?)?;
    module.add_class::<device::PyDevice>()?;
    module.add_class::<device::PyDeviceInfo>()?;
    module.add_class::<device::PyComputeInfo>()?;
    module.add_class::<device::PyCacheInfo>()?;
    module.add_class::<buffer::PyBuffer>()?;
    module.add_class::<program::PyProgram>()?;
    module.add_class::<program::PyProgramInfo>()?;
    module.add_class::<graph::PyGraphBuilder>()?;
    module.add_class::<graph::PyGraph>()?;
    module.add_class::<graph::PyDim>()?;
    module.add_class::<graph::PyInput>()?;
    module.add_class::<stream::PyStream>()?;
    module.add_class::<stream::PyEvent>()?;
    module.add_class::<jit::PyJit>()?;
    module.add_class::<jit::PyJitRecorder>()?;
    module.add_class::<jit::PyJitBuffer>()?;
    Ok(())
}
