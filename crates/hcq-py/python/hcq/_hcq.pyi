"""Type stubs for the compiled part of hcq (the ``hcq._hcq`` extension module)."""

import os
from typing import Any, Callable, List, Literal, Optional, Sequence, Tuple, Union, overload

import numpy
from numpy.typing import DTypeLike

# Anything with the buffer protocol: bytes, bytearray, memoryview, numpy arrays, ...
_BytesLike = Union[bytes, bytearray, memoryview, "numpy.ndarray"]
_Dims = Union[int, Tuple[int], Tuple[int, int], Tuple[int, int, int], Sequence[int]]
_KernelArg = Union["Buffer", "numpy.generic", int, float, bool, bytes, bytearray]

def devices() -> List[str]:
    """Names of every device hcq can open (real GPUs first, then the emulated ones)."""

def from_dlpack(obj: Any, device: Optional["Device"] = None) -> "Buffer":
    """Copies a host array (anything with ``__dlpack__`` and ``__dlpack_device__`` in host
    memory: ``kDLCPU`` such as numpy arrays, or pinned ``kDLCUDAHost`` / ``kDLROCMHost``) into
    a new buffer on ``device`` (default ``Device()``): its elements in C order, whatever its
    strides. Any element type of whole bytes. Another device's memory: ``UnsupportedError``."""

class ComputeInfo:
    """A GPU's compute shape and identity, as rocminfo shows them."""

    compute_units: int
    shader_engines: int
    simds_per_cu: int
    wave_size: int
    max_waves_per_cu: int
    lds_per_workgroup: int
    max_clock_mhz: int
    free_memory: Optional[int]
    gtt_memory: Optional[int]
    gtt_free: Optional[int]
    pci_location: str
    render_minor: int
    driver_version: str
    copy_engine_missing: Optional[str]
    caches: List["CacheInfo"]

class CacheInfo:
    """One kind of cache of a GPU: every instance of it alike."""

    level: int
    data: bool
    instruction: bool
    nbytes: int
    shared_by_cus: int
    instances: int

class DeviceInfo:
    """Properties of an opened device."""

    @property
    def compute(self) -> Optional[ComputeInfo]:
        """The compute shape, or None where the backend does not report it."""

    @property
    def name(self) -> str: ...
    @property
    def arch(self) -> str:
        """Compiler target, e.g. ``gfx1100``."""
    @property
    def memory(self) -> int:
        """Device memory in bytes."""
    @property
    def emulated(self) -> bool: ...
    @property
    def description(self) -> str: ...

class Device:
    """An opened GPU. ``Device()`` is the default one (``HCQ_DEVICE``, else the first real AMD
    GPU, else ``amd-emu:0``); opening the same name twice gives the same device."""

    def __init__(self, name: Optional[str] = None) -> None: ...
    @property
    def name(self) -> str: ...
    @property
    def info(self) -> DeviceInfo: ...
    def synchronize(self) -> None:
        """Waits for all queued work (the device's own queue and every stream); raises the
        fault of any that failed."""
    def stream(self) -> Stream:
        """Opens a new in-order queue whose work may overlap the device's other streams."""
    @property
    def default_stream(self) -> Stream:
        """The device's own queue, which calls without ``stream=`` use."""
    def record_event(self) -> Event:
        """An event on the device's own queue."""
    def wait_event(self, event: Event) -> None:
        """Makes the device's own queue wait for ``event`` from now on, on the GPU."""
    def compile(self, source: str, flags: Optional[Sequence[str]] = None) -> bytes:
        """HIP C++ source to a code object, through the compile cache; ``flags``: ``-IDIR``,
        ``-DNAME[=VALUE]``, ``-ON`` and other clang flags."""
    def compile_file(
        self, path: Union[str, "os.PathLike[str]"], flags: Optional[Sequence[str]] = None
    ) -> bytes:
        """A source file to a code object; its ``#include "..."`` resolve next to it."""
    def program(self, code_object: _BytesLike, name: str) -> Program:
        """Loads kernel ``name`` from a code object."""
    def alloc(self, nbytes: int) -> Buffer:
        """``nbytes`` bytes of device memory (contents unspecified until written)."""
    def alloc_host(self, nbytes: int) -> Buffer:
        """``nbytes`` bytes of pinned host memory that kernels read and write in place."""
    def alloc_zeros(self, nbytes: int) -> Buffer:
        """``nbytes`` bytes of device memory, all zero."""
    def free_cached(self) -> int:
        """Frees memory dropped buffers left in the allocator's cache; returns the bytes."""
    def __eq__(self, other: object) -> bool: ...
    def __hash__(self) -> int: ...
    def _hold_engines(self, held: bool) -> None:
        """For benchmarks: holds or releases an emulated device's engines."""
    @property
    def _ring_dwords(self) -> Tuple[int, int]:
        """For benchmarks: (dwords of the last submission, ring capacity in dwords)."""

class Buffer:
    """Device memory, or a view of part of it sharing the memory. Keeps its device open."""

    @property
    def is_host(self) -> bool:
        """Whether the buffer is pinned host memory (``Device.alloc_host``)."""
    @property
    def nbytes(self) -> int: ...
    @property
    def offset(self) -> int:
        """Where this buffer starts in its allocation (0 unless it is a view)."""
    @property
    def device(self) -> Device: ...
    def __len__(self) -> int: ...
    def write(self, data: _BytesLike, offset: int = 0, *, stream: Optional[Stream] = None) -> None:
        """Copies ``data`` (C order) into the buffer at ``offset``; it must fit."""
    def read(
        self, offset: int = 0, nbytes: Optional[int] = None, *, stream: Optional[Stream] = None
    ) -> bytes:
        """The buffer's bytes, or ``nbytes`` of them from ``offset``."""
    def numpy(
        self,
        dtype: DTypeLike,
        shape: Union[int, Sequence[int], None] = None,
        *,
        stream: Optional[Stream] = None,
    ) -> numpy.ndarray:
        """The whole buffer as a new writable numpy array of ``dtype`` (and ``shape``)."""
    def fill(
        self, value: Union[int, bytes, "numpy.generic"], *, stream: Optional[Stream] = None
    ) -> None:
        """Sets every element to ``value``: a numpy scalar or bytes of 1, 2 or 4 bytes, or an
        int byte (0 to 255), on the device."""
    def view(self, offset: int, nbytes: int) -> Buffer:
        """The ``nbytes`` bytes at ``offset``, as a buffer sharing the memory."""
    def __getitem__(self, key: slice) -> Buffer:
        """``buf[start:stop]``: a view (step 1)."""
    def copy_to(
        self,
        dst: Buffer,
        nbytes: Optional[int] = None,
        *,
        src_offset: int = 0,
        dst_offset: int = 0,
        stream: Optional[Stream] = None,
    ) -> None:
        """Copies on the GPU (or between two GPUs) into ``dst``; ``nbytes`` defaults to all
        of this buffer from ``src_offset``."""
    def __dlpack__(
        self,
        *,
        stream: Optional[int] = None,
        max_version: Optional[Tuple[int, int]] = None,
        dl_device: Optional[Tuple[int, int]] = None,
        copy: Optional[bool] = None,
    ) -> Any:
        """DLPack: the buffer's memory, in place, as a 1-D uint8 tensor of ``nbytes`` elements
        (reinterpret it: ``torch.from_dlpack(buf).view(torch.float32)``), in a capsule. Waits
        for the device's queued work first (``stream=-1``: not). ``max_version >= (1, 0)``: a
        versioned capsule. ``copy=True`` or another ``dl_device``: ``BufferError``."""
    def __dlpack_device__(self) -> Tuple[int, int]:
        """DLPack: ``(10, N)`` (kDLROCM) for device memory, ``(11, N)`` (kDLROCMHost) for
        pinned host memory, N the device's number (``amd-emu:N``)."""

class Stream:
    """An in-order queue of work on a device, independent of its other streams; pass it as
    ``stream=`` to a program call or a buffer's ``write``, ``read``, ``numpy``, ``copy_to``
    and ``fill``."""

    @property
    def device(self) -> Device: ...
    @property
    def is_default(self) -> bool:
        """Whether this is the device's own queue."""
    def record_event(self) -> Event:
        """The point after everything queued on this stream so far, with the GPU clock."""
    def wait_event(self, event: Event) -> None:
        """Makes this stream's later work wait for ``event`` (any stream, any device)."""
    def synchronize(self) -> None:
        """Waits for the work queued on this stream only."""

class Event:
    """A point in a stream's work, with the GPU clock there."""

    @property
    def done(self) -> bool:
        """Whether the work its stream queued before it has finished."""
    @property
    def stream(self) -> Stream: ...
    def synchronize(self) -> None:
        """Waits for the work its stream queued before it."""
    def elapsed_since(self, earlier: Event) -> float:
        """GPU seconds from ``earlier`` (complete, same GPU) to this event."""

class ProgramInfo:
    """A kernel's resources from its code object, and the waves per SIMD they allow."""

    vgprs: int
    allocated_vgprs: int
    sgprs: Optional[int]
    static_lds: int
    max_dynamic_lds: int
    scratch_per_lane: int
    max_workgroup_size: int
    wave_size: int
    waves_per_simd: int
    occupancy_limit: str
    """``"wave slots"``, ``"registers"`` or ``"LDS"``."""

class Program:
    """A loaded kernel; call it to launch it."""

    @property
    def name(self) -> str: ...
    @property
    def info(self) -> ProgramInfo:
        """What the kernel asks of the device and the occupancy that allows."""
    @property
    def device(self) -> Device: ...
    @property
    def arguments(self) -> Optional[List[Tuple[Optional[str], str, int]]]:
        """``(name, kind, nbytes)`` per argument from the code object's metadata (kind
        ``"buffer"`` or ``"value"``), or None without metadata."""
    @overload
    def __call__(
        self,
        *args: _KernelArg,
        grid: _Dims,
        block: Optional[_Dims] = None,
        lds: int = 0,
        timed: Literal[False] = False,
        stream: Optional[Stream] = None,
    ) -> None: ...
    @overload
    def __call__(
        self,
        *args: _KernelArg,
        grid: _Dims,
        block: Optional[_Dims] = None,
        lds: int = 0,
        timed: Literal[True],
        stream: Optional[Stream] = None,
    ) -> float:
        """Launches over ``grid`` workgroups of ``block`` work-items with ``lds`` bytes of
        dynamic LDS. Returns None at once, or with ``timed=True`` waits and returns the GPU
        time in seconds."""
    @overload
    def launch(
        self,
        grid: _Dims,
        block: _Dims,
        *args: _KernelArg,
        lds: int = 0,
        timed: Literal[False] = False,
        stream: Optional[Stream] = None,
    ) -> None: ...
    @overload
    def launch(
        self,
        grid: _Dims,
        block: _Dims,
        *args: _KernelArg,
        lds: int = 0,
        timed: Literal[True],
        stream: Optional[Stream] = None,
    ) -> float:
        """The launch ``prg(*args, grid=grid, block=block)`` makes, with the grid and block
        first: the cheaper call in a hot loop (Python passes no keywords)."""

_DimLike = Union[int, "Dim"]
_GraphDims = Union[_DimLike, Sequence[_DimLike]]

class Dim:
    """A graph launch dimension: a variable (``GraphBuilder.var``) or integer arithmetic of
    variables and ints. A variable itself can be a kernel argument (an ``int32``)."""

    def __add__(self, other: _DimLike) -> Dim: ...
    def __radd__(self, other: int) -> Dim: ...
    def __mul__(self, other: _DimLike) -> Dim: ...
    def __rmul__(self, other: int) -> Dim: ...
    def __floordiv__(self, other: _DimLike) -> Dim: ...
    def __rfloordiv__(self, other: int) -> Dim: ...
    def ceil_div(self, other: _DimLike) -> Dim:
        """Rounded-up division."""
    def eval(self, vars: Sequence[int]) -> int:
        """The value with one int per variable of the builder."""

class Input:
    """A graph input: a buffer bound at each replay."""

    @property
    def index(self) -> int: ...
    @property
    def nbytes(self) -> int: ...

class GraphBuilder:
    """Records launches and copies into a ``Graph`` replayed with one submission."""

    def __init__(self) -> None: ...
    def var(self, name: str, min: int, max: int) -> Dim:
        """An integer variable with inclusive bounds, given at each replay."""
    def input(self, example: Buffer) -> Input:
        """An input shaped like ``example`` (size and device); built with it bound."""
    def launch(
        self,
        program: Program,
        *args: Union[_KernelArg, Input, Dim],
        grid: _GraphDims,
        block: Optional[_GraphDims] = None,
        lds: int = 0,
    ) -> None:
        """Records a launch; arguments as for calling the program, plus inputs and variables."""
    def copy(self, src: Union[Buffer, Input], dst: Union[Buffer, Input], nbytes: int) -> None:
        """Records a GPU copy of the first ``nbytes`` of ``src`` into ``dst``."""
    def __len__(self) -> int: ...
    def build(self) -> Graph: ...

class JitBuffer:
    """A placeholder for one of a JIT call's buffers (``JitRecorder.input`` / ``output``)."""

class JitRecorder:
    """What a JIT's function records through, valid only during that call."""

    def input(self, n: int) -> JitBuffer:
        """Input buffer ``n`` of each call."""
    def output(self, n: int) -> JitBuffer:
        """Output buffer ``n`` of each call."""
    def var(self, n: int) -> Dim:
        """Variable ``n``: a ``Dim`` for dimensions, an ``int32`` as a kernel argument."""
    def launch(
        self,
        program: Program,
        *args: Union[_KernelArg, JitBuffer, Dim],
        grid: _GraphDims,
        block: Optional[_GraphDims] = None,
        lds: int = 0,
    ) -> None:
        """Launches now and, while capturing, records the launch."""
    def copy(
        self, src: Union[Buffer, JitBuffer], dst: Union[Buffer, JitBuffer], nbytes: int
    ) -> None:
        """Copies now and, while capturing, records the copy."""

class Jit:
    """A function captured into a graph on its second call (``hcq.jit``)."""

    def __init__(
        self, function: Callable[[JitRecorder], None], vars: Sequence[Tuple[str, int, int]] = ...
    ) -> None: ...
    def __call__(
        self, inputs: Sequence[Buffer], outputs: Sequence[Buffer] = ..., vars: Sequence[int] = ...
    ) -> None:
        """Runs (or replays) the work on these buffers with these variable values."""
    @property
    def is_captured(self) -> bool: ...
    @property
    def fallback_reason(self) -> Optional[str]: ...

class Graph:
    """A built graph."""

    def replay(
        self,
        inputs: Sequence[Buffer] = ...,
        vars: Sequence[int] = ...,
        *,
        stream: Optional[Stream] = None,
    ) -> None:
        """Replays with one buffer per input and one int per variable (on ``stream`` when
        given); returns once queued."""
    @property
    def device(self) -> Device: ...
    @property
    def vars(self) -> List[Tuple[str, int, int]]: ...
    @property
    def launch_count(self) -> int: ...
