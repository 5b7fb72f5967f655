use std::io;

/// Everything that can go wrong in hcq, with the driver's own code where there is one.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// Device memory is exhausted (after the allocator's cache was freed and the allocation
    /// retried). `reason` is the kernel's account when it gives one (the emulated GPU says
    /// when it is the host's memory that cannot back the allocation, and how much it has).
    #[error("out of device memory allocating {requested} bytes on {device}{}", reason_suffix(.reason))]
    OutOfMemory {
        /// The device's name (`amd-emu:0`).
        device: String,
        /// Bytes asked for.
        requested: u64,
        /// Why, when the kernel driver says.
        reason: Option<String>,
    },

    /// A wait did not finish in time.
    #[error("timed out after {ms} ms waiting for {what}")]
    Timeout {
        /// What was awaited (a queue's timeline value, an event, a copy).
        what: String,
        /// The limit that passed without progress (`HCQ_WAIT_TIMEOUT_MS`).
        ms: u64,
    },

    /// The GPU reported a fault: a VM fault, an illegal instruction, a bad command packet.
    #[error("device fault on {device}: {message}")]
    DeviceFault {
        /// The device's name.
        device: String,
        /// What the GPU reported: the kind of fault, the address, and for a shader fault the
        /// instruction and its PC.
        message: String,
    },

    /// The device can run no more work in this process: an earlier fault stopped its queues
    /// for good (after a GPU memory fault, KFD evicts every queue the process has on that GPU
    /// and never restores them). `message` names that fault. Memory can still be freed.
    #[error("{device} can run no more work: {message}")]
    DeviceLost {
        /// The device's name.
        device: String,
        /// The fault that stopped the device.
        message: String,
    },

    /// Compiling kernel source failed; `log` is the compiler's output.
    #[error("compile error: {message}\n{log}")]
    Compile {
        /// What failed (the compiler could not be run, or it rejected the source).
        message: String,
        /// The compiler's diagnostics.
        log: String,
    },

    /// A code object is malformed or lacks what the runtime needs.
    #[error("invalid code object: {0}")]
    InvalidCodeObject(String),

    /// A caller passed something the operation cannot accept.
    #[error("invalid argument: {0}")]
    InvalidArgument(String),

    /// No device by that name, or no device at all.
    #[error("no such device: {0}")]
    NoDevice(String),

    /// The backend cannot do this.
    #[error("unsupported: {0}")]
    Unsupported(String),

    /// A call into the kernel driver failed; `source` carries the errno.
    #[error("{call} failed: {source}")]
    Driver {
        /// The driver call, e.g. `AMDKFD_IOC_ALLOC_MEMORY_OF_GPU`.
        call: &'static str,
        /// The error the kernel returned.
        #[source]
        source: io::Error,
    },

    /// Reading or writing a file failed.
    #[error("{what}: {source}")]
    Io {
        /// The file and what was being done with it.
        what: String,
        /// The operating system's error.
        #[source]
        source: io::Error,
    },
}

fn reason_suffix(reason: &Option<String>) -> String {
    reason
        .as_deref()
        .map(|r| format!(": {r}"))
        .unwrap_or_default()
}

impl Error {
    /// The errno of a failed driver call, if this is one.
    pub fn os_error(&self) -> Option<i32> {
        match self {
            Error::Driver { source, .. } | Error::Io { source, .. } => source.raw_os_error(),
            _ => None,
        }
    }
}

/// `Result` with hcq's [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;
