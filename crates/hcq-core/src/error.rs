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
    /// The fields say what as data; `message` is the account a person reads, which names
    /// them too.
    #[error("device fault on {device}: {message}")]
    DeviceFault {
        /// The device's name.
        device: String,
        /// What kind of fault it was (of the first fault, when several are reported at once).
        kind: FaultKind,
        /// The faulting address: the GPU virtual address of a memory fault, the LDS byte
        /// offset of an LDS access out of range; `None` when the fault has none or the
        /// kernel did not say.
        address: Option<u64>,
        /// The byte address of the faulting shader instruction, when a shader faulted and the
        /// kernel said where.
        pc: Option<u64>,
        /// The faulting instruction as assembly text, when known.
        instruction: Option<String>,
        /// What the GPU reported, in words: the kind of fault, the address, and for a shader
        /// fault the instruction and its PC.
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

/// What kind of fault a device reported ([`Error::DeviceFault`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum FaultKind {
    /// A GPU access to memory not mapped for it (a VM fault; KFD's memory exception).
    MemoryFault,
    /// An instruction the GPU cannot execute: no encoding matches its word, an operand is
    /// invalid in its position, or it names registers beyond the wave's allocation.
    IllegalInstruction,
    /// A valid instruction the emulated GPU does not implement.
    UnimplementedInstruction,
    /// A wave executed more instructions than its budget (`HCQ_EMU_MAX_STEPS`).
    StepBudgetExhausted,
    /// An LDS access outside the workgroup's allocation.
    LdsOutOfRange,
    /// The shader trapped (`s_trap`).
    Trap,
    /// A command packet the engine cannot execute: unknown, truncated or malformed.
    BadCommandPacket,
    /// Something the emulated GPU does not model (a wave64 dispatch, say).
    Unsupported,
    /// A hardware exception with no finer account (a GPU reset, an error a command buffer
    /// ended with), or any other fault.
    HardwareException,
}

impl FaultKind {
    /// A short name for the kind, as it reads in a sentence (`memory fault`).
    pub fn describe(self) -> &'static str {
        match self {
            FaultKind::MemoryFault => "memory fault",
            FaultKind::IllegalInstruction => "illegal instruction",
            FaultKind::UnimplementedInstruction => "unimplemented instruction",
            FaultKind::StepBudgetExhausted => "step budget exhausted",
            FaultKind::LdsOutOfRange => "LDS access out of range",
            FaultKind::Trap => "trap",
            FaultKind::BadCommandPacket => "bad command packet",
            FaultKind::Unsupported => "unsupported",
            FaultKind::HardwareException => "hardware exception",
        }
    }
}

impl std::fmt::Display for FaultKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.describe())
    }
}

/// One fault as the kernel (the emulated one) accounts for it: what kind, where, and the
/// account in words. [`std::fmt::Display`] shows `message`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FaultReport {
    /// What kind of fault it was.
    pub kind: FaultKind,
    /// The faulting address (see [`Error::DeviceFault`]).
    pub address: Option<u64>,
    /// The byte address of the faulting shader instruction.
    pub pc: Option<u64>,
    /// The faulting instruction as assembly text.
    pub instruction: Option<String>,
    /// The account in words, naming the fields above where they are known.
    pub message: String,
}

impl FaultReport {
    /// A report of `kind` with `message` and no address, PC or instruction.
    pub fn new(kind: FaultKind, message: impl Into<String>) -> Self {
        FaultReport {
            kind,
            address: None,
            pc: None,
            instruction: None,
            message: message.into(),
        }
    }

    /// The report with its faulting `address`.
    pub fn at_address(mut self, address: u64) -> Self {
        self.address = Some(address);
        self
    }
}

impl std::fmt::Display for FaultReport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

fn reason_suffix(reason: &Option<String>) -> String {
    reason
        .as_deref()
        .map(|r| format!(": {r}"))
        .unwrap_or_default()
}

impl Error {
    /// The fault of `device` that `report` accounts for.
    pub fn device_fault(device: impl Into<String>, report: FaultReport) -> Error {
        Error::DeviceFault {
            device: device.into(),
            kind: report.kind,
            address: report.address,
            pc: report.pc,
            instruction: report.instruction,
            message: report.message,
        }
    }

    /// The kind of a device fault; `None` for any other error.
    pub fn fault_kind(&self) -> Option<FaultKind> {
        match self {
            Error::DeviceFault { kind, .. } => Some(*kind),
            _ => None,
        }
    }

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
