"""hcq from Python: a GPU compute runtime on hardware command queues.

>>> import hcq, numpy as np
>>> dev = hcq.Device()                      # HCQ_DEVICE, else a real AMD GPU, else amd-emu:0
>>> code = dev.compile(source)              # HIP C++ to a code object, through the compile cache
>>> saxpy = dev.program(code, "saxpy")
>>> x = dev.alloc(n * 4); x.write(np.arange(n, dtype=np.float32))
>>> saxpy(out, x, y, np.float32(2.0), n, grid=(n // 64, 1, 1), block=(64, 1, 1))
>>> out.numpy(np.float32)
>>> torch.from_dlpack(out).view(torch.float32)   # DLPack: the same memory, no copy
>>> buf = hcq.from_dlpack(host_array)            # a host array copied into a new buffer

See the package README for the whole API.
"""

from ._errors import (
    CompileError,
    DeviceFaultError,
    DeviceLostError,
    DriverError,
    Error,
    InvalidArgumentError,
    InvalidCodeObjectError,
    IoError,
    NoDeviceError,
    OutOfMemoryError,
    TimeoutError,
    UnsupportedError,
)
from ._hcq import (
    Buffer,
    CacheInfo,
    ComputeInfo,
    Device,
    DeviceInfo,
    Dim,
    Graph,
    GraphBuilder,
    Input,
    Program,
    ProgramInfo,
    Stream,
    Event,
    devices,
    from_dlpack,
)

__version__ = "0.1.0"

__all__ = [
    "Buffer",
    "CompileError",
    "CacheInfo",
    "ComputeInfo",
    "Device",
    "DeviceFaultError",
    "DeviceInfo",
    "DeviceLostError",
    "Dim",
    "DriverError",
    "Error",
    "Event",
    "Graph",
    "GraphBuilder",
    "Input",
    "InvalidArgumentError",
    "InvalidCodeObjectError",
    "IoError",
    "NoDeviceError",
    "OutOfMemoryError",
    "Program",
    "ProgramInfo",
    "Stream",
    "TimeoutError",
    "UnsupportedError",
    "devices",
    "from_dlpack",
]
