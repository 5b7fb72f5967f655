//! `hcq::Error` to Python exceptions. The classes live in `hcq/_errors.py`, where a class can
//! derive from two bases (`OutOfMemoryError` is also a `MemoryError`, ...), which PyO3's
//! `create_exception!` cannot express.

use pyo3::prelude::*;

/// The Python class that stands for `error`'s kind, by its name in `hcq._errors`.
fn class_name(error: &hcq::Error) -> &'static str {
    match error {
        hcq::Error::OutOfMemory { .. } => "OutOfMemoryError",
        hcq::Error::Timeout { .. } => "TimeoutError",
        hcq::Error::DeviceFault { .. } => "DeviceFaultError",
        hcq::Error::DeviceLost { .. } => "DeviceLostError",
        hcq::Error::Compile { .. } => "CompileError",
        hcq::Error::InvalidCodeObject(_) => "InvalidCodeObjectError",
        hcq::Error::InvalidArgument(_) => "InvalidArgumentError",
        hcq::Error::NoDevice(_) => "NoDeviceError",
        hcq::Error::Unsupported(_) => "UnsupportedError",
        hcq::Error::Driver { .. } => "DriverError",
        hcq::Error::Io { .. } => "IoError",
        // `hcq::Error` is non-exhaustive: a kind added later is still an `hcq.Error`.
        _ => "Error",
    }
}

/// The exception for `error`, carrying its Rust message word for word (and `errno` for
/// driver and file errors).
pub fn to_py_err(error: hcq::Error) -> PyErr {
    Python::attach(|py| {
        let build = || -> PyResult<PyErr> {
            let class = py.import("hcq._errors")?.getattr(class_name(&error))?;
            let exception = class.call1((error.to_string(),))?;
            if let Some(errno) = error.os_error() {
                exception.setattr("errno", errno)?;
            }
            if let hcq::Error::DeviceFault {
                kind,
                address,
                pc,
                instruction,
                ..
            } = &error
            {
                exception.setattr("kind", fault_kind_name(*kind))?;
                exception.setattr("address", *address)?;
                exception.setattr("pc", *pc)?;
                exception.setattr("instruction", instruction.clone())?;
            }
            Ok(PyErr::from_value(exception))
        };
        // Failing to build the exception (the package is broken) is reported instead.
        build().unwrap_or_else(|e| e)
    })
}

/// An `hcq.InvalidArgumentError` for a problem found on the Python side, worded like the
/// ones hcq raises.
pub fn invalid_argument(message: impl Into<String>) -> PyErr {
    to_py_err(hcq::Error::InvalidArgument(message.into()))
}

/// The Python name of a fault kind (`DeviceFaultError.kind`).
fn fault_kind_name(kind: hcq::FaultKind) -> &'static str {
    match kind {
        hcq::FaultKind::MemoryFault => "memory_fault",
        hcq::FaultKind::IllegalInstruction => "illegal_instruction",
        hcq::FaultKind::UnimplementedInstruction => "unimplemented_instruction",
        hcq::FaultKind::StepBudgetExhausted => "step_budget_exhausted",
        hcq::FaultKind::LdsOutOfRange => "lds_out_of_range",
        hcq::FaultKind::Trap => "trap",
        hcq::FaultKind::BadCommandPacket => "bad_command_packet",
        hcq::FaultKind::Unsupported => "unsupported",
        // Non-exhaustive: a kind added later reads as the catch-all until named here.
        _ => "hardware_exception",
    }
}

/// `.or_raise()?` on hcq results: the error as its Python exception.
pub trait IntoPyResult<T> {
    fn or_raise(self) -> PyResult<T>;
}

impl<T> IntoPyResult<T> for hcq::Result<T> {
    fn or_raise(self) -> PyResult<T> {
        self.map_err(to_py_err)
    }
}
