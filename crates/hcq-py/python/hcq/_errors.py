"""The exceptions hcq raises: one class per kind of ``hcq::Error`` in the Rust crate.

Each carries exactly the message the Rust error displays. Where a builtin exception means the
same thing, the class derives from it too, so ``except MemoryError`` or ``except ValueError``
catches hcq's as well.
"""

import builtins


class Error(Exception):
    """Base class of every error hcq raises."""


class OutOfMemoryError(Error, MemoryError):
    """Device memory is exhausted (after the allocator's cache was freed and the allocation
    retried), or, on the emulated GPU, the host's memory cannot back the allocation."""


class TimeoutError(Error, builtins.TimeoutError):
    """A wait let the GPU go without progress for longer than ``HCQ_WAIT_TIMEOUT_MS``."""


class DeviceFaultError(Error):
    """The GPU reported a fault (a VM fault, an illegal instruction, a bad command packet);
    the message names the instruction and its address when the GPU reports them.

    The same facts as data: ``kind`` is one of ``"memory_fault"``, ``"illegal_instruction"``,
    ``"unimplemented_instruction"``, ``"step_budget_exhausted"``, ``"lds_out_of_range"``,
    ``"trap"``, ``"bad_command_packet"``, ``"unsupported"`` and ``"hardware_exception"``;
    ``address`` the faulting address, ``pc`` the faulting instruction's address and
    ``instruction`` its assembly text, each ``None`` when the GPU did not say."""

    kind: str = "hardware_exception"
    address: "int | None" = None
    pc: "int | None" = None
    instruction: "str | None" = None


class DeviceLostError(Error):
    """The device can run no more work in this process: an earlier fault stopped its queues
    for good. Its memory can still be freed."""


class CompileError(Error):
    """Compiling kernel source failed; the message ends with the compiler's output."""


class InvalidCodeObjectError(Error):
    """A code object is malformed or lacks what the runtime needs."""


class InvalidArgumentError(Error, ValueError):
    """A caller passed something the operation cannot accept (a range past a buffer's end,
    kernel arguments that do not match the kernel, ...)."""


class NoDeviceError(Error):
    """No device by that name, or no device at all."""


class UnsupportedError(Error):
    """The backend cannot do this."""


class DriverError(Error):
    """A call into the kernel driver failed; ``errno`` is its error number."""

    errno = None


class IoError(Error):
    """Reading or writing a file failed; ``errno`` is the error number when there is one."""

    errno = None


__all__ = [
    "Error",
    "OutOfMemoryError",
    "TimeoutError",
    "DeviceFaultError",
    "DeviceLostError",
    "CompileError",
    "InvalidCodeObjectError",
    "InvalidArgumentError",
    "NoDeviceError",
    "UnsupportedError",
    "DriverError",
    "IoError",
]

# Shown as `hcq.OutOfMemoryError` (where users import them from) in tracebacks and reprs.
for _name in __all__:
    globals()[_name].__module__ = "hcq"
del _name
