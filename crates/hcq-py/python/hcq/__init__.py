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
    Jit,
    JitBuffer,
    JitRecorder,
    Program,
    ProgramInfo,
    Stream,
    Event,
    devices,
    from_dlpack,
)

__version__ = "0.1.0"


def jit(function=None, *, vars=()):
    """Captures a function's launches and copies into a graph, as ``hcq::Jit`` does.

    ``function(r)`` records through ``r``, a ``JitRecorder``: ``r.launch(program, *args,
    grid=..., block=...)`` and ``r.copy(src, dst, nbytes)``, with the call's buffers as
    ``r.input(n)`` / ``r.output(n)`` and its variables as ``r.var(n)`` (an ``hcq.Dim`` in launch
    dimensions, an ``int32`` as a kernel argument). Call the result as
    ``f(inputs, outputs=(), vars=())``: the first call runs the function, the second runs it
    while capturing a graph, later calls replay that graph with the call's buffers and values::

        @hcq.jit(vars=[("n", 1, 1 << 20)])
        def scale(r):
            n = r.var(0)
            r.launch(saxpy, r.output(0), r.input(0), r.input(1), np.float32(2), n,
                     grid=n.ceil_div(64), block=64)

        scale([x, y], [out], [n])
    """
    if function is None:
        return lambda f: Jit(f, list(vars))
    return Jit(function, list(vars))

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
    "Jit",
    "JitBuffer",
    "JitRecorder",
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
    "jit",
]
