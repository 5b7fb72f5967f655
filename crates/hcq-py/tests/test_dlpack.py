"""DLPack: `Buffer.__dlpack__` / `__dlpack_device__`, read here with ctypes the way a consumer
reads them, and `hcq.from_dlpack`, checked against numpy and against producers made here with
ctypes (which count their deleter's calls)."""

import ctypes
import gc
import threading

import numpy as np
import pytest

import hcq

KDL_CPU, KDL_CUDA, KDL_CUDA_HOST, KDL_ROCM, KDL_ROCM_HOST = 1, 2, 3, 10, 11
KDL_INT, KDL_UINT, KDL_FLOAT, KDL_BOOL = 0, 1, 2, 6

# Capsule names. Capsules keep the name's pointer, so the ones given to PyCapsule_New and
# PyCapsule_SetName must live as long as the capsule: module-level bytes do.
DLTENSOR = b"dltensor"
DLTENSOR_VERSIONED = b"dltensor_versioned"
USED_DLTENSOR = b"used_dltensor"
USED_DLTENSOR_VERSIONED = b"used_dltensor_versioned"


class DLDevice(ctypes.Structure):
    _fields_ = [("device_type", ctypes.c_int32), ("device_id", ctypes.c_int32)]


class DLDataType(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]


class DLTensor(ctypes.Structure):
    _fields_ = [
        ("data", ctypes.c_void_p),
        ("device", DLDevice),
        ("ndim", ctypes.c_int32),
        ("dtype", DLDataType),
        ("shape", ctypes.POINTER(ctypes.c_int64)),
        ("strides", ctypes.POINTER(ctypes.c_int64)),
        ("byte_offset", ctypes.c_uint64),
    ]


# A C function pointer: called through ctypes, it runs with the GIL released.
DELETER = ctypes.CFUNCTYPE(None, ctypes.c_void_p)


class DLManagedTensor(ctypes.Structure):
    _fields_ = [("dl_tensor", DLTensor), ("manager_ctx", ctypes.c_void_p), ("deleter", DELETER)]


class DLPackVersion(ctypes.Structure):
    _fields_ = [("major", ctypes.c_uint32), ("minor", ctypes.c_uint32)]


class DLManagedTensorVersioned(ctypes.Structure):
    _fields_ = [
        ("version", DLPackVersion),
        ("manager_ctx", ctypes.c_void_p),
        ("deleter", DELETER),
        ("flags", ctypes.c_uint64),
        ("dl_tensor", DLTensor),
    ]


def _capi(name, restype, *argtypes):
    """A function of Python's C API with its signature set (run with the GIL held)."""
    function = getattr(ctypes.pythonapi, name)
    function.restype = restype
    function.argtypes = list(argtypes)
    return function


capsule_is_valid = _capi("PyCapsule_IsValid", ctypes.c_int, ctypes.py_object, ctypes.c_char_p)
capsule_get_pointer = _capi(
    "PyCapsule_GetPointer", ctypes.c_void_p, ctypes.py_object, ctypes.c_char_p
)
capsule_get_name = _capi("PyCapsule_GetName", ctypes.c_char_p, ctypes.py_object)
capsule_set_name = _capi("PyCapsule_SetName", ctypes.c_int, ctypes.py_object, ctypes.c_char_p)
capsule_new = _capi(
    "PyCapsule_New", ctypes.py_object, ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p
)


def take(capsule):
    """Consumes a capsule as a DLPack consumer does (checks its name, renames it used_...):
    returns (the managed tensor, viewed in place, and its address for the deleter)."""
    name = capsule_get_name(capsule)
    assert name in (DLTENSOR, DLTENSOR_VERSIONED), name
    versioned = name == DLTENSOR_VERSIONED
    assert capsule_is_valid(capsule, name) == 1
    address = capsule_get_pointer(capsule, name)
    assert address
    assert capsule_set_name(capsule, USED_DLTENSOR_VERSIONED if versioned else USED_DLTENSOR) == 0
    kind = DLManagedTensorVersioned if versioned else DLManagedTensor
    return kind.from_address(address), address


WHERE = r"""
extern "C" __attribute__((global)) void pointers(unsigned long long* out, const char* first,
                                                 const char* second) {
  if (__builtin_amdgcn_workitem_id_x() == 0) {
    out[0] = (unsigned long long)first;
    out[1] = (unsigned long long)second;
  }
}
"""


@pytest.fixture(scope="module")
def kernel_addresses(dev):
    """kernel_addresses(a, b) -> the two pointers a kernel receives for buffers a and b."""
    pointers = dev.program(dev.compile(WHERE), "pointers")

    def addresses(first, second):
        out = dev.alloc(16)
        pointers(out, first, second, grid=1, block=32)
        return [int(x) for x in out.numpy(np.uint64)]

    return addresses


def check_tensor(t, *, data, nbytes, device):
    assert t.data == data
    assert (t.device.device_type, t.device.device_id) == device
    assert t.ndim == 1
    assert t.shape[0] == nbytes
    assert (t.dtype.code, t.dtype.bits, t.dtype.lanes) == (KDL_UINT, 8, 1)
    assert bool(t.strides) and t.strides[0] == 1
    assert t.byte_offset == 0


def test_struct_layouts_match_dlpack_h():
    assert ctypes.sizeof(DLTensor) == 48
    assert ctypes.sizeof(DLManagedTensor) == 64
    assert ctypes.sizeof(DLManagedTensorVersioned) == 80
    assert DLManagedTensorVersioned.dl_tensor.offset == 32


def test_dlpack_device(dev, dev1):
    buf = dev.alloc(64)
    assert buf.__dlpack_device__() == (KDL_ROCM, 0)
    assert buf[8:16].__dlpack_device__() == (KDL_ROCM, 0)
    assert dev1.alloc(64).__dlpack_device__() == (KDL_ROCM, 1)
    assert dev.alloc_host(64).__dlpack_device__() == (KDL_ROCM_HOST, 0)
    assert dev1.alloc_host(64).__dlpack_device__() == (KDL_ROCM_HOST, 1)


def test_legacy_capsule(dev, kernel_addresses):
    buf = dev.alloc(4096)
    view = buf[1000:1024]
    base, view_address = kernel_addresses(buf, view)
    assert view_address == base + 1000
    for max_version in (None, (0, 8)):
        capsule = buf.__dlpack__() if max_version is None else buf.__dlpack__(max_version=max_version)
        assert type(capsule).__name__ == "PyCapsule"
        managed, address = take(capsule)
        assert isinstance(managed, DLManagedTensor)
        check_tensor(managed.dl_tensor, data=base, nbytes=4096, device=(KDL_ROCM, 0))
        assert managed.manager_ctx
        managed.deleter(address)
    managed, address = take(view.__dlpack__())
    check_tensor(managed.dl_tensor, data=base + 1000, nbytes=24, device=(KDL_ROCM, 0))
    managed.deleter(address)


def test_versioned_capsule(dev, dev1, kernel_addresses):
    buf = dev.alloc(4096)
    view = buf.view(512, 100)
    base, view_address = kernel_addresses(buf, view)
    assert view_address == base + 512
    for max_version in ((1, 0), (1, 3), (2, 0)):
        managed, address = take(buf.__dlpack__(max_version=max_version))
        assert isinstance(managed, DLManagedTensorVersioned)
        assert (managed.version.major, managed.version.minor) == (1, 0)
        assert managed.flags == 0  # writable, not a copy
        assert managed.manager_ctx
        check_tensor(managed.dl_tensor, data=base, nbytes=4096, device=(KDL_ROCM, 0))
        managed.deleter(address)
    managed, address = take(view.__dlpack__(max_version=(1, 0)))
    check_tensor(managed.dl_tensor, data=base + 512, nbytes=100, device=(KDL_ROCM, 0))
    managed.deleter(address)
    # A buffer of the second device says so.
    other = dev1.alloc(256)
    managed, address = take(other.__dlpack__(max_version=(1, 0)))
    assert (managed.dl_tensor.device.device_type, managed.dl_tensor.device.device_id) == (
        KDL_ROCM,
        1,
    )
    assert managed.dl_tensor.shape[0] == 256
    managed.deleter(address)


def test_empty_buffer(dev):
    managed, address = take(dev.alloc(0).__dlpack__(max_version=(1, 0)))
    assert managed.dl_tensor.ndim == 1 and managed.dl_tensor.shape[0] == 0
    managed.deleter(address)


def test_the_data_pointer_reads_the_memory(dev):
    # The emulated GPU's memory is mapped in this process at the address kernels use.
    data = bytes(range(256)) * 4
    buf = dev.alloc(len(data))
    buf.write(data)
    managed, address = take(buf.__dlpack__())
    assert ctypes.string_at(managed.dl_tensor.data, len(data)) == data
    managed.deleter(address)


def test_export_waits_for_queued_work(dev, kernel):
    n = 1 << 16
    x = np.arange(n, dtype=np.float32)
    xb, yb, out = dev.alloc(x.nbytes), dev.alloc(x.nbytes), dev.alloc(x.nbytes)
    xb.write(x)
    yb.write(np.ones(n, np.float32))
    out.write(np.zeros(n, np.float32))
    kernel("saxpy")(out, xb, yb, 3.0, n, grid=n // 256, block=256)
    # No synchronize: __dlpack__ waits for the device before handing the memory out.
    managed, address = take(out.__dlpack__(stream=None))
    got = np.frombuffer(ctypes.string_at(managed.dl_tensor.data, x.nbytes), np.float32)
    np.testing.assert_array_equal(got, 3 * x + 1)
    managed.deleter(address)


def test_the_tensor_keeps_the_memory_alive(dev):
    data = bytes(reversed(range(256))) * 16
    buf = dev.alloc(len(data))
    buf.write(data)
    managed, address = take(buf.__dlpack__(max_version=(1, 0)))
    pointer = managed.dl_tensor.data
    gc.collect()
    dev.free_cached()
    del buf
    gc.collect()
    # Not freed (nothing went to the allocator's cache), not handed out again.
    assert dev.free_cached() == 0
    others = [dev.alloc(len(data)) for _ in range(4)]
    for other in others:
        other.write(b"\xee" * len(data))
        other_managed, other_address = take(other.__dlpack__())
        assert other_managed.dl_tensor.data != pointer
        other_managed.deleter(other_address)
    assert ctypes.string_at(pointer, len(data)) == data
    del others
    gc.collect()
    dev.free_cached()
    # The deleter (from another thread, without the GIL: ctypes releases it) lets it go.
    thread = threading.Thread(target=managed.deleter, args=(address,))
    thread.start()
    thread.join()
    assert dev.free_cached() >= len(data)


@pytest.mark.parametrize("max_version", [None, (1, 0)])
def test_an_unconsumed_capsule_frees_the_tensor(dev, max_version):
    gc.collect()
    dev.free_cached()
    buf = dev.alloc(1 << 20)
    capsule = buf.__dlpack__(max_version=max_version)
    del buf
    gc.collect()
    assert dev.free_cached() == 0
    del capsule
    gc.collect()
    assert dev.free_cached() >= 1 << 20


@pytest.mark.parametrize("max_version", [None, (1, 0)])
def test_a_consumed_capsule_leaves_the_tensor_to_the_consumer(dev, max_version):
    gc.collect()
    dev.free_cached()
    buf = dev.alloc(4096)
    buf.write(b"\x5a" * 4096)
    capsule = buf.__dlpack__(max_version=max_version)
    managed, address = take(capsule)
    pointer = managed.dl_tensor.data
    del capsule, buf
    gc.collect()
    # The capsule's destructor saw the used_ name and did not call the deleter.
    assert dev.free_cached() == 0
    assert ctypes.string_at(pointer, 4096) == b"\x5a" * 4096
    managed.deleter(address)
    assert dev.free_cached() >= 4096


def test_numpy_consumes_a_pinned_host_buffer_in_place(dev):
    # numpy reads host memory (kDLROCMHost included): a real consumer, without a copy.
    host = dev.alloc_host(64)
    host.write(bytes(range(64)))
    array = np.from_dlpack(host)
    assert array.dtype == np.uint8 and array.shape == (64,)
    assert array.tobytes() == bytes(range(64))
    assert array.view(np.uint32)[1] == int.from_bytes(bytes(range(4, 8)), "little")
    # The same memory both ways: writable (flags 0), and hcq's writes show through.
    array[0] = 200
    assert host.read(0, 1) == bytes([200])
    host.write(b"\x07" * 8, offset=8)
    dev.synchronize()
    assert array[8:16].tolist() == [7] * 8
    del host
    gc.collect()
    assert array[16:].tobytes() == bytes(range(16, 64))


def test_pinned_host_buffers(dev, kernel_addresses):
    host = dev.alloc_host(128)
    host.write(bytes(range(128)))
    (address_seen, _) = kernel_addresses(host, host)
    managed, address = take(host.__dlpack__(max_version=(1, 0)))
    check_tensor(managed.dl_tensor, data=address_seen, nbytes=128, device=(KDL_ROCM_HOST, 0))
    assert ctypes.string_at(managed.dl_tensor.data, 128) == bytes(range(128))
    managed.deleter(address)


def test_requests_it_cannot_meet(dev, dev1):
    buf = dev.alloc(64)
    with pytest.raises(BufferError, match="copy"):
        buf.__dlpack__(copy=True)
    with pytest.raises(BufferError, match="copy"):
        buf.__dlpack__(max_version=(1, 0), copy=True)
    for other in [(KDL_CPU, 0), (KDL_ROCM, 1), (KDL_ROCM_HOST, 0)]:
        with pytest.raises(BufferError, match="dl_device"):
            buf.__dlpack__(max_version=(1, 0), dl_device=other)
    with pytest.raises(BufferError):
        dev1.alloc(64).__dlpack__(dl_device=(KDL_ROCM, 0))
    # What it can: no copy, its own device, any stream (-1: no wait).
    for kwargs in [
        dict(copy=False),
        dict(copy=None, dl_device=(KDL_ROCM, 0)),
        dict(stream=-1),
        dict(stream=0),
        dict(stream=12345, max_version=(1, 0)),
    ]:
        managed, address = take(buf.__dlpack__(**kwargs))
        managed.deleter(address)
    with pytest.raises(TypeError):
        buf.__dlpack__(stream="default")
    with pytest.raises(TypeError):
        buf.__dlpack__(None)  # keyword-only


# ---- hcq.from_dlpack ----


def check_round_trip(dev, array):
    buf = hcq.from_dlpack(array, dev)
    expected = np.ascontiguousarray(array)
    assert buf.nbytes == expected.nbytes
    assert buf.device == dev
    back = buf.numpy(array.dtype, array.shape)
    assert back.shape == array.shape
    # Element by element, in C order (bitwise for floats).
    assert back.tobytes() == expected.tobytes()
    np.testing.assert_array_equal(back, array)


@pytest.mark.parametrize(
    "dtype",
    [
        np.int8, np.int16, np.int32, np.int64,
        np.uint8, np.uint16, np.uint32, np.uint64,
        np.float16, np.float32, np.float64, np.bool_, np.complex64, np.complex128,
    ],
)
def test_from_dlpack_dtypes(dev, dtype):
    rng = np.random.default_rng(7)
    if dtype == np.bool_:
        array = rng.integers(0, 2, size=(37, 5)).astype(np.bool_)
    elif np.issubdtype(dtype, np.complexfloating):
        array = (rng.standard_normal((37, 5)) + 1j * rng.standard_normal((37, 5))).astype(dtype)
    elif np.issubdtype(dtype, np.floating):
        array = (rng.standard_normal((37, 5)) * 100).astype(dtype)
    else:
        info = np.iinfo(dtype)
        array = rng.integers(info.min, info.max, size=(37, 5), dtype=dtype, endpoint=True)
    check_round_trip(dev, array)


def test_from_dlpack_0d_and_empty(dev):
    check_round_trip(dev, np.array(3.25, dtype=np.float64))
    check_round_trip(dev, np.array(-7, dtype=np.int16))
    for shape in [(0,), (0, 3), (4, 0, 2)]:
        buf = hcq.from_dlpack(np.zeros(shape, np.int32), dev)
        assert buf.nbytes == 0


def test_from_dlpack_non_contiguous(dev):
    a = np.arange(200, dtype=np.int32) * 7 - 300
    m = a.reshape(10, 20)
    cube = np.arange(4 * 5 * 6, dtype=np.float64).reshape(4, 5, 6) * 0.5
    for array in [
        a[::2],
        a[::-1],
        a[5:150:3],
        a[150:5:-7],
        m.T,
        m[::-1, ::2],
        m[2:8, 3:17],
        m[:, 5],
        cube[1:3, ::-2, 1::3],
        cube.transpose(2, 0, 1),
        cube[..., ::-1],
        cube[:, 2, :],
        cube[::2, :, ::-1].T,
    ]:
        assert not array.flags.c_contiguous
        check_round_trip(dev, array)


def test_from_dlpack_devices(dev, dev1):
    a = np.arange(100, dtype=np.uint16)
    buf = hcq.from_dlpack(a, device=dev1)
    assert buf.device == dev1
    assert buf.numpy(np.uint16).tolist() == a.tolist()
    assert hcq.from_dlpack(a).device == hcq.Device()


def test_from_dlpack_of_a_pinned_host_buffer(dev, dev1):
    host = dev.alloc_host(64)
    host.write(bytes(range(64)))
    copy = hcq.from_dlpack(host, dev1)
    assert copy.device == dev1 and not copy.is_host
    assert copy.read() == bytes(range(64))


def test_from_dlpack_refuses_device_memory(dev):
    class OnCuda:
        def __dlpack_device__(self):
            return (KDL_CUDA, 0)

        def __dlpack__(self, **kwargs):
            raise AssertionError("a device array is never asked for its tensor")

    with pytest.raises(hcq.UnsupportedError, match=r"host memory.*kDLCUDA \(2\) device 0"):
        hcq.from_dlpack(OnCuda(), dev)
    with pytest.raises(hcq.UnsupportedError, match=r"kDLROCM \(10\)"):
        hcq.from_dlpack(dev.alloc(16), dev)
    with pytest.raises(TypeError, match="__dlpack__"):
        hcq.from_dlpack(b"bytes are not DLPack", dev)
    with pytest.raises(TypeError):
        hcq.from_dlpack([1, 2, 3], dev)


class Producer:
    """A DLPack producer made with ctypes over `array`'s memory, presenting it with the given
    shape, strides (in elements, or None), byte offset and element type. It counts its
    deleter's calls. `versioned`: it answers max_version with a versioned tensor (of
    `version`); `legacy_only`: its __dlpack__ takes no max_version, as before DLPack 1.0."""

    def __init__(self, array, shape, strides, byte_offset=0, dtype=None, versioned=True,
                 version=(1, 0), legacy_only=False, device=(KDL_CPU, 0), tensor_device=None):
        self.array = array  # keeps the memory alive
        self.ndim = len(shape)
        self.shape = (ctypes.c_int64 * max(self.ndim, 1))(*shape)
        self.strides = None if strides is None else (ctypes.c_int64 * max(self.ndim, 1))(*strides)
        self.byte_offset = byte_offset
        self.dtype = dtype or (KDL_INT, array.dtype.itemsize * 8, 1)
        self.versioned = versioned
        self.version = version
        self.legacy_only = legacy_only
        self.device = device
        self.tensor_device = tensor_device or device
        self.deleted = 0
        self.capsules = []
        self.deleter = DELETER(self._delete)

    def _delete(self, address):
        self.deleted += 1

    def __dlpack_device__(self):
        return self.device

    def _tensor(self):
        return DLTensor(
            data=self.array.ctypes.data,
            device=DLDevice(*self.tensor_device),
            ndim=self.ndim,
            dtype=DLDataType(*self.dtype),
            shape=ctypes.cast(self.shape, ctypes.POINTER(ctypes.c_int64)),
            strides=None if self.strides is None
            else ctypes.cast(self.strides, ctypes.POINTER(ctypes.c_int64)),
            byte_offset=self.byte_offset,
        )

    def __dlpack__(self, *, stream=None, max_version=None, dl_device=None, copy=None):
        if self.legacy_only and max_version is not None:
            raise TypeError("__dlpack__() got an unexpected keyword argument 'max_version'")
        if self.versioned and max_version is not None and max_version[0] >= 1:
            managed = DLManagedTensorVersioned(
                version=DLPackVersion(*self.version), manager_ctx=None, deleter=self.deleter,
                flags=1, dl_tensor=self._tensor(),  # read-only
            )
            name = DLTENSOR_VERSIONED
        else:
            managed = DLManagedTensor(dl_tensor=self._tensor(), manager_ctx=None,
                                      deleter=self.deleter)
            name = DLTENSOR
        self.managed = managed  # kept alive by the producer, for the test's sake
        capsule = capsule_new(ctypes.addressof(managed), name, None)
        self.capsules.append(capsule)
        return capsule


@pytest.mark.parametrize("versioned", [True, False])
@pytest.mark.parametrize("legacy_only", [False, True])
def test_from_dlpack_takes_the_capsule_and_calls_the_deleter_once(dev, versioned, legacy_only):
    a = np.arange(24, dtype=np.int32) * 11
    producer = Producer(a, (4, 6), None, versioned=versioned, legacy_only=legacy_only)
    buf = hcq.from_dlpack(producer, dev)
    assert buf.numpy(np.int32).tolist() == a.tolist()
    assert producer.deleted == 1
    (capsule,) = producer.capsules
    used = USED_DLTENSOR_VERSIONED if versioned and not legacy_only else USED_DLTENSOR
    assert capsule_get_name(capsule) == used
    gc.collect()
    assert producer.deleted == 1


def test_from_dlpack_strides_and_byte_offset(dev):
    base = np.arange(64, dtype=np.int16)
    # A 3x4 grid from element 10 (byte_offset 20), rows 8 elements apart, columns -2 apart.
    producer = Producer(base, (3, 4), (8, -2), byte_offset=20)
    buf = hcq.from_dlpack(producer, dev)
    expected = np.array([[base[10 + 8 * i - 2 * j] for j in range(4)] for i in range(3)])
    assert buf.numpy(np.int16, (3, 4)).tolist() == expected.tolist()
    assert producer.deleted == 1
    # Contiguous with an offset: one copy from data + byte_offset.
    producer = Producer(base, (2, 5), None, byte_offset=6)
    assert hcq.from_dlpack(producer, dev).numpy(np.int16).tolist() == base[3:13].tolist()
    # Explicit C-contiguous strides, and a dimension of extent 1 with any stride.
    producer = Producer(base, (3, 1, 4), (4, 999, 1))
    assert hcq.from_dlpack(producer, dev).numpy(np.int16).tolist() == base[:12].tolist()
    # Vector lanes: 2 lanes of 16 bits per element.
    producer = Producer(base, (3,), (5,), dtype=(KDL_INT, 16, 2))
    got = hcq.from_dlpack(producer, dev).numpy(np.int16).tolist()
    assert got == [0, 1, 10, 11, 20, 21]


def test_from_dlpack_pinned_producers(dev):
    a = np.arange(16, dtype=np.uint8)
    for device in [(KDL_CUDA_HOST, 0), (KDL_ROCM_HOST, 3)]:
        producer = Producer(a, (16,), None, device=device)
        assert hcq.from_dlpack(producer, dev).read() == a.tobytes()
        assert producer.deleted == 1


def test_from_dlpack_refusals_still_call_the_deleter(dev):
    a = np.arange(16, dtype=np.uint8)
    producer = Producer(a, (16,), None, version=(2, 0))
    with pytest.raises(BufferError, match="version 2.0"):
        hcq.from_dlpack(producer, dev)
    assert producer.deleted == 1
    producer = Producer(a, (16,), None, dtype=(KDL_INT, 4, 1))
    with pytest.raises(hcq.UnsupportedError, match="4 bits"):
        hcq.from_dlpack(producer, dev)
    assert producer.deleted == 1
    producer = Producer(a, (16,), None, dtype=(KDL_BOOL, 1, 1))
    with pytest.raises(hcq.UnsupportedError, match="whole-byte"):
        hcq.from_dlpack(producer, dev)
    assert producer.deleted == 1
    # __dlpack_device__ says host memory, the tensor itself says otherwise: not read.
    producer = Producer(a, (16,), None, tensor_device=(KDL_ROCM, 0))
    with pytest.raises(hcq.UnsupportedError, match=r"kDLROCM \(10\) device 0"):
        hcq.from_dlpack(producer, dev)
    assert producer.deleted == 1
    producer = Producer(a, (4, -4), None)
    with pytest.raises(hcq.InvalidArgumentError, match="shape"):
        hcq.from_dlpack(producer, dev)
    assert producer.deleted == 1


def test_from_dlpack_refuses_a_used_capsule(dev):
    a = np.arange(16, dtype=np.uint8)

    class Replays(Producer):
        def __dlpack__(self, **kwargs):
            if not self.capsules:
                return super().__dlpack__(**kwargs)
            return self.capsules[0]

    producer = Replays(a, (16,), None)
    hcq.from_dlpack(producer, dev)
    with pytest.raises(BufferError, match="already consumed"):
        hcq.from_dlpack(producer, dev)
    assert producer.deleted == 1

    class NotACapsule:
        def __dlpack_device__(self):
            return (KDL_CPU, 0)

        def __dlpack__(self, **kwargs):
            return 42

    with pytest.raises(TypeError, match="not a DLPack capsule"):
        hcq.from_dlpack(NotACapsule(), dev)
