//! DLPack, both ways: `Buffer.__dlpack__` and `Buffer.__dlpack_device__` lend a buffer's
//! memory to another library (PyTorch, CuPy, JAX, ...) without copying it, and
//! `hcq.from_dlpack` copies a host array (numpy, or any producer of host memory) into a new
//! buffer.
//!
//! The structures are `dlpack.h`'s (1.x); the Python side is the array API standard's
//! `__dlpack__` protocol. A tensor travels in a capsule named `dltensor` (holding a
//! `DLManagedTensor`) or, for consumers that ask with `max_version >= (1, 0)`,
//! `dltensor_versioned` (a `DLManagedTensorVersioned`). The consumer that takes the tensor
//! renames the capsule `used_dltensor` / `used_dltensor_versioned` and calls the tensor's
//! deleter once it is done with the memory; a capsule that nobody took calls the deleter when
//! it is collected.

use crate::buffer::PyBuffer;
use crate::device::PyDevice;
use crate::errors::{invalid_argument, to_py_err, IntoPyResult};
use pyo3::exceptions::{PyBufferError, PyTypeError};
use pyo3::prelude::*;
use pyo3::types::{PyCapsule, PyDict};
use pyo3::{ffi, intern};
use std::ffi::{c_void, CStr};
use std::mem::{offset_of, size_of};

// `DLDeviceType` values.
const KDL_CPU: i32 = 1;
const KDL_CUDA_HOST: i32 = 3;
const KDL_METAL: i32 = 8;
const KDL_ROCM: i32 = 10;
const KDL_ROCM_HOST: i32 = 11;

// `DLDataTypeCode` values.
const KDL_UINT: u8 = 1;
const KDL_BOOL: u8 = 6;

/// The DLPack version hcq's versioned tensors declare. Their layout is 1.0's; later 1.x
/// versions only add type codes and flags that hcq does not use.
const VERSION: DLPackVersion = DLPackVersion { major: 1, minor: 0 };

/// `DLDevice`: where a tensor's memory is.
#[repr(C)]
#[derive(Clone, Copy, PartialEq, Eq)]
struct DLDevice {
    /// A `DLDeviceType` (a C enum: an `int`).
    device_type: i32,
    device_id: i32,
}

/// `DLDataType`: an element's type.
#[repr(C)]
#[derive(Clone, Copy)]
struct DLDataType {
    code: u8,
    bits: u8,
    lanes: u16,
}

/// `DLTensor`: memory, shape and element type. `strides` (in elements) may be NULL for a
/// C-contiguous tensor.
#[repr(C)]
struct DLTensor {
    data: *mut c_void,
    device: DLDevice,
    ndim: i32,
    dtype: DLDataType,
    shape: *mut i64,
    strides: *mut i64,
    byte_offset: u64,
}

/// `DLManagedTensor`: the unversioned (pre-1.0) exchange structure.
#[repr(C)]
struct DLManagedTensor {
    dl_tensor: DLTensor,
    manager_ctx: *mut c_void,
    deleter: Option<unsafe extern "C" fn(*mut DLManagedTensor)>,
}

/// `DLPackVersion`.
#[repr(C)]
#[derive(Clone, Copy)]
struct DLPackVersion {
    major: u32,
    minor: u32,
}

/// `DLManagedTensorVersioned`: the 1.x exchange structure. Everything up to `flags` stays where
/// it is in every future version, so a consumer can always reach the deleter.
#[repr(C)]
struct DLManagedTensorVersioned {
    version: DLPackVersion,
    manager_ctx: *mut c_void,
    deleter: Option<unsafe extern "C" fn(*mut DLManagedTensorVersioned)>,
    flags: u64,
    dl_tensor: DLTensor,
}

// The layouts `dlpack.h` gives on every platform...
const _: () = {
    assert!(size_of::<DLDevice>() == 8);
    assert!(offset_of!(DLDevice, device_id) == 4);
    assert!(size_of::<DLDataType>() == 4);
    assert!(offset_of!(DLDataType, bits) == 1);
    assert!(offset_of!(DLDataType, lanes) == 2);
    assert!(size_of::<DLPackVersion>() == 8);
    assert!(offset_of!(DLPackVersion, minor) == 4);
};

// ... and with 8-byte pointers (x86-64, aarch64: everywhere hcq runs).
#[cfg(target_pointer_width = "64")]
const _: () = {
    assert!(size_of::<DLTensor>() == 48);
    assert!(offset_of!(DLTensor, data) == 0);
    assert!(offset_of!(DLTensor, device) == 8);
    assert!(offset_of!(DLTensor, ndim) == 16);
    assert!(offset_of!(DLTensor, dtype) == 20);
    assert!(offset_of!(DLTensor, shape) == 24);
    assert!(offset_of!(DLTensor, strides) == 32);
    assert!(offset_of!(DLTensor, byte_offset) == 40);
    assert!(size_of::<DLManagedTensor>() == 64);
    assert!(offset_of!(DLManagedTensor, dl_tensor) == 0);
    assert!(offset_of!(DLManagedTensor, manager_ctx) == 48);
    assert!(offset_of!(DLManagedTensor, deleter) == 56);
    assert!(size_of::<DLManagedTensorVersioned>() == 80);
    assert!(offset_of!(DLManagedTensorVersioned, version) == 0);
    assert!(offset_of!(DLManagedTensorVersioned, manager_ctx) == 8);
    assert!(offset_of!(DLManagedTensorVersioned, deleter) == 16);
    assert!(offset_of!(DLManagedTensorVersioned, flags) == 24);
    assert!(offset_of!(DLManagedTensorVersioned, dl_tensor) == 32);
};

/// What the two managed-tensor structures have in common, for code written once for both.
trait Managed: Sized {
    /// The capsule's name while nobody has taken the tensor.
    const NAME: &'static CStr;
    /// The name a consumer gives the capsule when it takes the tensor.
    const USED_NAME: &'static CStr;

    /// A managed tensor around `dl_tensor`, with no context yet and `delete_export` as its
    /// deleter.
    fn new(dl_tensor: DLTensor) -> Self;

    /// The fields through a pointer to a live structure, without making references to it.
    fn tensor_ptr(this: *mut Self) -> *mut DLTensor;
    fn manager_ctx_ptr(this: *mut Self) -> *mut *mut c_void;
    fn deleter_ptr(this: *mut Self) -> *mut Option<unsafe extern "C" fn(*mut Self)>;
}

impl Managed for DLManagedTensor {
    const NAME: &'static CStr = c"dltensor";
    const USED_NAME: &'static CStr = c"used_dltensor";

    fn new(dl_tensor: DLTensor) -> Self {
        DLManagedTensor {
            dl_tensor,
            manager_ctx: std::ptr::null_mut(),
            deleter: Some(delete_export::<Self>),
        }
    }

    fn tensor_ptr(this: *mut Self) -> *mut DLTensor {
        // SAFETY: only the address is computed (no read, no reference); callers pass a
        // pointer to a live structure.
        unsafe { &raw mut (*this).dl_tensor }
    }

    fn manager_ctx_ptr(this: *mut Self) -> *mut *mut c_void {
        // SAFETY: as in `tensor_ptr`.
        unsafe { &raw mut (*this).manager_ctx }
    }

    fn deleter_ptr(this: *mut Self) -> *mut Option<unsafe extern "C" fn(*mut Self)> {
        // SAFETY: as in `tensor_ptr`.
        unsafe { &raw mut (*this).deleter }
    }
}

impl Managed for DLManagedTensorVersioned {
    const NAME: &'static CStr = c"dltensor_versioned";
    const USED_NAME: &'static CStr = c"used_dltensor_versioned";

    fn new(dl_tensor: DLTensor) -> Self {
        DLManagedTensorVersioned {
            version: VERSION,
            manager_ctx: std::ptr::null_mut(),
            deleter: Some(delete_export::<Self>),
            // Not read-only (consumers may write the memory, as kernels do), not a copy.
            flags: 0,
            dl_tensor,
        }
    }

    fn tensor_ptr(this: *mut Self) -> *mut DLTensor {
        // SAFETY: only the address is computed (no read, no reference); callers pass a
        // pointer to a live structure.
        unsafe { &raw mut (*this).dl_tensor }
    }

    fn manager_ctx_ptr(this: *mut Self) -> *mut *mut c_void {
        // SAFETY: as in `tensor_ptr`.
        unsafe { &raw mut (*this).manager_ctx }
    }

    fn deleter_ptr(this: *mut Self) -> *mut Option<unsafe extern "C" fn(*mut Self)> {
        // SAFETY: as in `tensor_ptr`.
        unsafe { &raw mut (*this).deleter }
    }
}

/// One exported tensor and everything it points at, in one heap allocation that the
/// managed tensor's `manager_ctx` owns: the one-element shape and stride arrays, and a handle
/// on the buffer, which keeps the memory (and its device) alive until the deleter runs.
#[repr(C)]
struct Export<M> {
    managed: M,
    shape: [i64; 1],
    strides: [i64; 1],
    buffer: hcq::Buffer,
}

/// The deleter of every tensor hcq exports: frees its `Export`, which releases the buffer.
/// Consumers call it from any thread, with or without the GIL: it touches no Python object,
/// and `hcq::Buffer` may be dropped on any thread (it is `Send`).
unsafe extern "C" fn delete_export<M: Managed>(managed: *mut M) {
    if managed.is_null() {
        return;
    }
    // SAFETY: a non-null `managed` handed to this deleter is one `export` made (only hcq's
    // tensors carry it) and has not been deleted yet (DLPack calls the deleter exactly once),
    // so it is live and its `manager_ctx` is the pointer `Box::into_raw` returned for its
    // `Export<M>`, which is reclaimed here exactly once.
    unsafe {
        let export = *M::manager_ctx_ptr(managed);
        drop(Box::from_raw(export.cast::<Export<M>>()));
    }
}

/// The destructor of the capsules hcq makes: deletes the tensor if no consumer took it. A
/// consumer that took it renamed the capsule (`used_...`) and calls the deleter itself.
unsafe extern "C" fn capsule_destructor<M: Managed>(capsule: *mut ffi::PyObject) {
    // SAFETY: Python calls a capsule's destructor with the GIL held and the capsule still
    // valid. `PyCapsule_IsValid` only compares the name (and never raises); when it matches,
    // nobody took the tensor, so the pointer is the live `M` that `export` stored, whose
    // deleter has not run, and it runs here exactly once (the capsule is destroyed once).
    unsafe {
        if ffi::PyCapsule_IsValid(capsule, M::NAME.as_ptr()) == 1 {
            let managed = ffi::PyCapsule_GetPointer(capsule, M::NAME.as_ptr()).cast::<M>();
            if let Some(deleter) = *M::deleter_ptr(managed) {
                deleter(managed);
            }
        }
    }
}

/// `buffer` as a 1-D uint8 tensor of its `size` bytes at `address`, in a new capsule.
fn export<'py, M: Managed>(
    py: Python<'py>,
    buffer: &hcq::Buffer,
    address: u64,
    device: DLDevice,
) -> PyResult<Bound<'py, PyAny>> {
    let nbytes = i64::try_from(buffer.size())
        .map_err(|_| invalid_argument("buffer too large for a DLPack shape"))?;
    let tensor = DLTensor {
        data: address as usize as *mut c_void,
        device,
        ndim: 1,
        dtype: DLDataType {
            code: KDL_UINT,
            bits: 8,
            lanes: 1,
        },
        // Set below, once the arrays have their final address.
        shape: std::ptr::null_mut(),
        strides: std::ptr::null_mut(),
        byte_offset: 0,
    };
    let export = Box::into_raw(Box::new(Export {
        managed: M::new(tensor),
        shape: [nbytes],
        strides: [1],
        buffer: buffer.clone(),
    }));
    // SAFETY: `export` is the live allocation just made, owned here; every pointer is derived
    // from it, so the tensor's shape, strides and context point into the same allocation,
    // which stays put until the deleter frees it.
    let managed = unsafe {
        let managed = &raw mut (*export).managed;
        let tensor = M::tensor_ptr(managed);
        (*tensor).shape = (&raw mut (*export).shape).cast::<i64>();
        (*tensor).strides = (&raw mut (*export).strides).cast::<i64>();
        *M::manager_ctx_ptr(managed) = export.cast::<c_void>();
        managed
    };
    // SAFETY: the name is a `'static` C string (a capsule keeps the pointer, not a copy), the
    // pointer is non-null, and the destructor matches what the capsule holds (an `M` under
    // `M::NAME`). On failure Python has set an exception and the capsule does not exist, so
    // nothing else can reach `managed` and its deleter frees it here, once.
    unsafe {
        let capsule = ffi::PyCapsule_New(
            managed.cast::<c_void>(),
            M::NAME.as_ptr(),
            Some(capsule_destructor::<M>),
        );
        if capsule.is_null() {
            delete_export(managed);
        }
        Bound::from_owned_ptr_or_err(py, capsule)
    }
}

/// What `__dlpack_device__` says for `buffer`: (device type, device index).
pub fn dlpack_device(buffer: &hcq::Buffer) -> PyResult<(i32, i32)> {
    let device_type = if cfg!(target_os = "macos") {
        KDL_METAL
    } else if buffer.is_host() {
        KDL_ROCM_HOST
    } else {
        KDL_ROCM
    };
    let index = i32::try_from(buffer.device().index())
        .map_err(|_| invalid_argument("device index does not fit DLPack's device_id"))?;
    Ok((device_type, index))
}

/// `Buffer.__dlpack__`: the checks of the array API standard, then the buffer's device
/// synchronized (unless `stream` is -1) and the buffer exported in the capsule kind the
/// consumer asked for.
pub fn dlpack<'py>(
    py: Python<'py>,
    buffer: &hcq::Buffer,
    stream: Option<i64>,
    max_version: Option<(i64, i64)>,
    dl_device: Option<(i64, i64)>,
    copy: Option<bool>,
) -> PyResult<Bound<'py, PyAny>> {
    let (device_type, device_id) = dlpack_device(buffer)?;
    if copy == Some(true) {
        return Err(PyBufferError::new_err(
            "hcq.Buffer.__dlpack__ exports the buffer's own memory and cannot copy it \
             (copy=True); copy on the device first (buf.copy_to) or read it (buf.numpy)",
        ));
    }
    if let Some((want_type, want_id)) = dl_device {
        if (want_type, want_id) != (i64::from(device_type), i64::from(device_id)) {
            return Err(PyBufferError::new_err(format!(
                "hcq.Buffer.__dlpack__ exports to its own device only, ({device_type}, \
                 {device_id}), not dl_device=({want_type}, {want_id})"
            )));
        }
    }
    // Metal buffers have no address to give: hcq's Unsupported error.
    let address = buffer.device_address().or_raise()?;
    // The consumer's stream must see the data ready. hcq waits for every queue of the device,
    // so no work is pending on the memory whatever stream the consumer uses; -1 asks for no
    // synchronisation at all.
    if stream != Some(-1) {
        py.detach(|| buffer.device().synchronize()).or_raise()?;
    }
    let device = DLDevice {
        device_type,
        device_id,
    };
    match max_version {
        Some((major, _)) if major >= 1 => {
            export::<DLManagedTensorVersioned>(py, buffer, address, device)
        }
        _ => export::<DLManagedTensor>(py, buffer, address, device),
    }
}

/// A tensor taken from a producer's capsule: the capsule is marked used, and dropping this
/// calls the producer's deleter (exactly once).
enum Taken {
    Legacy(*mut DLManagedTensor),
    Versioned(*mut DLManagedTensorVersioned),
}

impl Taken {
    /// Takes the tensor out of `capsule` (an unused `dltensor` or `dltensor_versioned`
    /// capsule), renaming it `used_...`.
    fn from_capsule(capsule: &Bound<'_, PyAny>) -> PyResult<Taken> {
        let ptr = capsule.as_ptr();
        // SAFETY: `ptr` is a live object (borrowed from `capsule`) and the GIL is held.
        // `PyCapsule_IsValid` accepts any object and never raises; when the name matches, the
        // capsule holds the producer's managed tensor of that kind, which stays live until
        // its deleter runs (only `Taken::drop` calls it: the rename stops the capsule's
        // destructor from doing so). The new names are `'static`, as capsules keep the
        // pointer.
        unsafe {
            if ffi::PyCapsule_IsValid(ptr, DLManagedTensorVersioned::NAME.as_ptr()) == 1 {
                let managed =
                    ffi::PyCapsule_GetPointer(ptr, DLManagedTensorVersioned::NAME.as_ptr());
                if ffi::PyCapsule_SetName(ptr, DLManagedTensorVersioned::USED_NAME.as_ptr()) != 0 {
                    return Err(PyErr::fetch(capsule.py()));
                }
                return Ok(Taken::Versioned(managed.cast()));
            }
            if ffi::PyCapsule_IsValid(ptr, DLManagedTensor::NAME.as_ptr()) == 1 {
                let managed = ffi::PyCapsule_GetPointer(ptr, DLManagedTensor::NAME.as_ptr());
                if ffi::PyCapsule_SetName(ptr, DLManagedTensor::USED_NAME.as_ptr()) != 0 {
                    return Err(PyErr::fetch(capsule.py()));
                }
                return Ok(Taken::Legacy(managed.cast()));
            }
        }
        if !capsule.is_instance_of::<PyCapsule>() {
            return Err(PyTypeError::new_err(format!(
                "__dlpack__() returned {}, not a DLPack capsule",
                capsule.get_type().name()?
            )));
        }
        // SAFETY: `ptr` is a capsule (checked just above), so `PyCapsule_GetName` only reads
        // its name, a NUL-terminated string (or NULL) that lives as long as the capsule.
        let name = unsafe {
            let name = ffi::PyCapsule_GetName(ptr);
            if name.is_null() {
                String::new()
            } else {
                CStr::from_ptr(name).to_string_lossy().into_owned()
            }
        };
        Err(PyBufferError::new_err(if name.starts_with("used_") {
            format!("the DLPack capsule was already consumed (named '{name}')")
        } else {
            format!("__dlpack__() returned a capsule named '{name}', not a DLPack tensor")
        }))
    }

    /// The tensor, or a `BufferError` for a DLPack major version hcq cannot read.
    fn tensor(&self) -> PyResult<&DLTensor> {
        // SAFETY: the producer keeps the managed tensor live and unchanged until its deleter
        // runs, which happens only when `self` is dropped, after the borrow ends. Reading the
        // version is sound whatever the version: it comes first in every one, and
        // `dl_tensor` is only read once the version says 1.x (its layout).
        unsafe {
            match *self {
                Taken::Legacy(managed) => Ok(&(*managed).dl_tensor),
                Taken::Versioned(managed) => {
                    let version = (*managed).version;
                    if version.major != 1 {
                        return Err(PyBufferError::new_err(format!(
                            "the producer's DLPack tensor is version {}.{}; hcq reads 1.x",
                            version.major, version.minor
                        )));
                    }
                    Ok(&(*managed).dl_tensor)
                }
            }
        }
    }
}

impl Drop for Taken {
    fn drop(&mut self) {
        // SAFETY: the managed tensor is live (its deleter has not run: this is the only place
        // that calls it, and `drop` runs once), and the producer's deleter takes the pointer
        // to it. The GIL is held (a `Taken` never leaves the function that took it, which
        // holds the GIL throughout), for deleters that need it.
        unsafe {
            match *self {
                Taken::Legacy(managed) => {
                    if let Some(deleter) = (*managed).deleter {
                        deleter(managed);
                    }
                }
                Taken::Versioned(managed) => {
                    if let Some(deleter) = (*managed).deleter {
                        deleter(managed);
                    }
                }
            }
        }
    }
}

/// The `UnsupportedError` for a tensor hcq cannot copy.
fn unsupported(message: String) -> PyErr {
    to_py_err(hcq::Error::Unsupported(message))
}

/// The name of a DLPack device type, for messages.
fn device_type_name(device_type: i32) -> String {
    let name = match device_type {
        1 => "kDLCPU",
        2 => "kDLCUDA",
        3 => "kDLCUDAHost",
        4 => "kDLOpenCL",
        7 => "kDLVulkan",
        8 => "kDLMetal",
        9 => "kDLVPI",
        10 => "kDLROCM",
        11 => "kDLROCMHost",
        12 => "kDLExtDev",
        13 => "kDLCUDAManaged",
        14 => "kDLOneAPI",
        15 => "kDLWebGPU",
        16 => "kDLHexagon",
        _ => return format!("device type {device_type}"),
    };
    format!("{name} ({device_type})")
}

/// An `UnsupportedError` unless the host can read memory on `device`: `kDLCPU`, or pinned
/// host memory of a GPU (`kDLCUDAHost`, `kDLROCMHost`).
fn check_host_readable(device: DLDevice) -> PyResult<()> {
    if matches!(device.device_type, KDL_CPU | KDL_CUDA_HOST | KDL_ROCM_HOST) {
        return Ok(());
    }
    Err(unsupported(format!(
        "hcq.from_dlpack copies arrays in host memory (kDLCPU, kDLCUDAHost, kDLROCMHost); \
         this one is on {} device {}: copy it to the host first",
        device_type_name(device.device_type),
        device.device_id
    )))
}

/// The tensor's elements in C order, copied out of the producer's memory into a new vector.
fn gather(tensor: &DLTensor) -> PyResult<Vec<u8>> {
    let dtype = tensor.dtype;
    if dtype.bits == 0 || !dtype.bits.is_multiple_of(8) || dtype.lanes == 0 {
        return Err(unsupported(format!(
            "DLPack elements of {} bits x {} lanes (type code {}): hcq.from_dlpack copies \
             whole-byte elements only{}",
            dtype.bits,
            dtype.lanes,
            dtype.code,
            if dtype.code == KDL_BOOL {
                " (bools of 8 bits)"
            } else {
                ""
            }
        )));
    }
    let item = usize::from(dtype.bits / 8) * usize::from(dtype.lanes);
    let ndim = usize::try_from(tensor.ndim)
        .map_err(|_| invalid_argument(format!("DLPack tensor with ndim {}", tensor.ndim)))?;
    if ndim > 0 && tensor.shape.is_null() {
        return Err(invalid_argument("DLPack tensor without a shape"));
    }
    // SAFETY: a DLPack tensor's `shape` (non-null, checked above) and non-null `strides` hold
    // `ndim` int64s, live as long as the tensor (borrowed for that long here).
    let (shape, strides) = unsafe {
        let shape: &[i64] = if ndim == 0 {
            &[]
        } else {
            std::slice::from_raw_parts(tensor.shape, ndim)
        };
        let strides: Option<&[i64]> = if tensor.strides.is_null() || ndim == 0 {
            None
        } else {
            Some(std::slice::from_raw_parts(tensor.strides, ndim))
        };
        (shape, strides)
    };
    let mut count: usize = 1;
    for &extent in shape {
        let extent = usize::try_from(extent)
            .map_err(|_| invalid_argument(format!("DLPack tensor of shape {shape:?}")))?;
        count = count
            .checked_mul(extent)
            .ok_or_else(|| invalid_argument(format!("DLPack tensor of shape {shape:?}")))?;
    }
    let nbytes = count
        .checked_mul(item)
        .filter(|&n| n <= isize::MAX as usize)
        .ok_or_else(|| invalid_argument(format!("DLPack tensor of shape {shape:?} too large")))?;
    if nbytes == 0 {
        return Ok(Vec::new());
    }
    if tensor.data.is_null() {
        return Err(invalid_argument("DLPack tensor with elements but no data"));
    }
    let byte_offset = usize::try_from(tensor.byte_offset)
        .map_err(|_| invalid_argument("DLPack tensor's byte_offset is out of range"))?;
    let start = tensor
        .data
        .cast::<u8>()
        .wrapping_add(byte_offset)
        .cast_const();

    // Strides the tensor would have in C order (dimensions of extent 1 may have any).
    let contiguous = strides.is_none_or(|strides| {
        let mut expected: i64 = 1;
        for (&extent, &stride) in shape.iter().zip(strides).rev() {
            if extent != 1 && stride != expected {
                return false;
            }
            expected = expected.saturating_mul(extent);
        }
        true
    });
    let mut out: Vec<u8> = Vec::with_capacity(nbytes);
    let dst = out.as_mut_ptr();
    if contiguous {
        // SAFETY: per the DLPack contract the producer's memory holds the tensor's `nbytes`
        // bytes from `data + byte_offset`, live and not written while the tensor is lent
        // (the caller holds it until after this returns); `out` has room for `nbytes`, and
        // the two cannot overlap (`out` is freshly allocated). Raw copies: no reference to
        // the producer's memory is made.
        unsafe {
            std::ptr::copy_nonoverlapping(start, dst, nbytes);
            out.set_len(nbytes);
        }
        return Ok(out);
    }
    let strides = strides.unwrap_or_default();
    // Element by element (a row at a time where the last dimension is dense), in C order:
    // `index` counts through every dimension but the last, like an odometer.
    let last = ndim - 1;
    let (row_len, row_stride) = (shape[last] as usize, strides[last]);
    let mut index = vec![0i64; last];
    let mut written = 0usize;
    'rows: loop {
        let row_start: i64 = index.iter().zip(strides).map(|(&i, &s)| i * s).sum();
        // SAFETY: every element's address, `start + (sum of index * stride) * item` for an
        // index inside the shape, lies in the producer's memory by the DLPack contract
        // (negative strides included), which is live and unwritten as above. `written` stays
        // below `nbytes`: the loops visit exactly `count` elements of `item` bytes.
        unsafe {
            if row_stride == 1 {
                let src = start.offset((row_start * item as i64) as isize);
                std::ptr::copy_nonoverlapping(src, dst.add(written), row_len * item);
                written += row_len * item;
            } else {
                for i in 0..row_len as i64 {
                    let src = start.offset(((row_start + i * row_stride) * item as i64) as isize);
                    std::ptr::copy_nonoverlapping(src, dst.add(written), item);
                    written += item;
                }
            }
        }
        // The next index in C order.
        let mut d = last;
        loop {
            if d == 0 {
                break 'rows;
            }
            d -= 1;
            index[d] += 1;
            if index[d] < shape[d] {
                break;
            }
            index[d] = 0;
        }
    }
    debug_assert_eq!(written, nbytes);
    // SAFETY: the loop above initialised all `nbytes` bytes.
    unsafe { out.set_len(nbytes) };
    Ok(out)
}

/// Copies a host array into a new `hcq.Buffer` on `device` (default: `hcq.Device()`): anything
/// with `__dlpack__` and `__dlpack_device__` whose memory the host reads (`kDLCPU` such as
/// numpy arrays, or pinned host memory: `kDLCUDAHost`, `kDLROCMHost`). The buffer holds the
/// elements in C order, whatever the array's strides, and carries no type or shape: read it
/// back with `buf.numpy(dtype, shape)`. Any element type of whole bytes; arrays in another
/// device's memory are an `UnsupportedError`.
#[pyfunction]
#[pyo3(signature = (obj, device = None))]
pub fn from_dlpack(
    py: Python<'_>,
    obj: &Bound<'_, PyAny>,
    device: Option<&Bound<'_, PyDevice>>,
) -> PyResult<PyBuffer> {
    if !obj.hasattr(intern!(py, "__dlpack__"))? || !obj.hasattr(intern!(py, "__dlpack_device__"))? {
        return Err(PyTypeError::new_err(format!(
            "hcq.from_dlpack takes an object with __dlpack__ and __dlpack_device__ (a numpy \
             array, ...), not {}",
            obj.get_type().name()?
        )));
    }
    let (device_type, device_id): (i32, i32) = obj
        .call_method0(intern!(py, "__dlpack_device__"))?
        .extract()?;
    check_host_readable(DLDevice {
        device_type,
        device_id,
    })?;
    // The versioned capsule first; producers from before DLPack 1.0 take no `max_version`.
    let kwargs = PyDict::new(py);
    kwargs.set_item(intern!(py, "max_version"), (1, 0))?;
    let capsule = match obj.call_method(intern!(py, "__dlpack__"), (), Some(&kwargs)) {
        Ok(capsule) => capsule,
        Err(e) if e.is_instance_of::<PyTypeError>(py) => {
            obj.call_method0(intern!(py, "__dlpack__"))?
        }
        Err(e) => return Err(e),
    };
    let taken = Taken::from_capsule(&capsule)?;
    // Copied while the GIL is held and the producer still lends the memory; then the tensor
    // goes back to the producer (its deleter, once), before the slow part.
    let tensor = taken.tensor()?;
    // The tensor's own word on where its memory is, in case it disagrees.
    check_host_readable(tensor.device)?;
    let bytes = gather(tensor)?;
    drop(taken);
    let device = device.map(|d| d.get().device.clone());
    // Only `bytes` (owned) and hcq handles cross into the detached closure: no Python object
    // and no producer memory.
    let buffer = py
        .detach(|| {
            let device = match device {
                Some(device) => device,
                None => hcq::Device::default_device()?,
            };
            let buffer = device.alloc(bytes.len())?;
            buffer.copy_in(0, &bytes)?;
            Ok(buffer)
        })
        .or_raise()?;
    Ok(PyBuffer { buffer })
}
