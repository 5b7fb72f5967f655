//! `hcq.Buffer`: device memory, or a view of part of it.

use crate::device::PyDevice;
use crate::errors::{invalid_argument, IntoPyResult};
use crate::stream::{stream_or_default, PyStream};
use pyo3::prelude::*;
use pyo3::types::{PyByteArray, PyBytes, PyMemoryView, PySlice};

/// The bytes of any object with the buffer protocol, in C order, as an immutable `bytes`
/// (the object itself when it is one). The stable ABI for Python 3.9 has no buffer protocol,
/// so other objects are copied once through `memoryview(obj).tobytes()`; an immutable copy is
/// also what makes it sound to read the bytes with the GIL released.
pub fn host_bytes<'py>(obj: &Bound<'py, PyAny>) -> PyResult<Bound<'py, PyBytes>> {
    if let Ok(bytes) = obj.cast::<PyBytes>() {
        return Ok(bytes.clone());
    }
    let bytes = PyMemoryView::from(obj)?.call_method0("tobytes")?;
    Ok(bytes.cast_into::<PyBytes>()?)
}

/// Device memory, or a view of part of it (`buf[start:stop]`, `buf.view(offset, nbytes)`)
/// sharing the memory. The memory is freed when the last buffer or view of it goes; a
/// buffer keeps its device open.
#[pyclass(frozen, module = "hcq", name = "Buffer")]
pub struct PyBuffer {
    pub(crate) buffer: hcq::Buffer,
}

#[pymethods]
impl PyBuffer {
    /// Whether the buffer is pinned host memory (`Device.alloc_host`).
    #[getter]
    fn is_host(&self) -> bool {
        self.buffer.is_host()
    }

    /// Size in bytes.
    #[getter]
    fn nbytes(&self) -> usize {
        self.buffer.size()
    }

    /// Where this buffer starts in its allocation (0 unless it is a view).
    #[getter]
    fn offset(&self) -> usize {
        self.buffer.offset()
    }

    /// The device that holds the memory.
    #[getter]
    fn device(&self) -> PyDevice {
        PyDevice {
            device: self.buffer.device().clone(),
        }
    }

    fn __len__(&self) -> usize {
        self.buffer.size()
    }

    /// Copies `data` (bytes, bytearray, memoryview, a numpy array: anything with the buffer
    /// protocol, in C order) into the buffer at `offset`. Raises `InvalidArgumentError` if it
    /// does not fit. Ordered after the work queued before it (on `stream`, default the
    /// device's own queue).
    #[pyo3(signature = (data, offset = 0, *, stream = None))]
    fn write(
        &self,
        py: Python<'_>,
        data: &Bound<'_, PyAny>,
        offset: usize,
        stream: Option<&Bound<'_, PyStream>>,
    ) -> PyResult<()> {
        let bytes = host_bytes(data)?;
        let bytes = bytes.as_bytes();
        let stream = stream_or_default(stream, self.buffer.device());
        py.detach(|| stream.copy_in(&self.buffer, offset, bytes))
            .or_raise()
    }

    /// The buffer's bytes (or `nbytes` of them from `offset`), after the work queued before
    /// (on `stream`, default the device's own queue).
    #[pyo3(signature = (offset = 0, nbytes = None, *, stream = None))]
    fn read<'py>(
        &self,
        py: Python<'py>,
        offset: usize,
        nbytes: Option<usize>,
        stream: Option<&Bound<'py, PyStream>>,
    ) -> PyResult<Bound<'py, PyBytes>> {
        let stream = stream_or_default(stream, self.buffer.device());
        let nbytes = match nbytes {
            Some(n) => n,
            None => self.buffer.size().checked_sub(offset).ok_or_else(|| {
                invalid_argument(format!(
                    "read at offset {offset} is past the end of the {}-byte buffer",
                    self.buffer.size()
                ))
            })?,
        };
        // Checked before Python allocates `nbytes`, so a huge count is an error, not a
        // MemoryError.
        self.buffer.view(offset, nbytes).or_raise()?;
        // The new bytes object is not visible to any other thread until it is returned.
        PyBytes::new_with(py, nbytes, |out| {
            py.detach(|| stream.copy_out(&self.buffer, offset, out))
                .or_raise()
        })
    }

    /// The whole buffer as a new (writable) numpy array of `dtype`, shaped `shape` when given
    /// (numpy's reshape rules; by default one dimension). The buffer's size must be a whole
    /// number of `dtype` items. Read after the work queued on `stream` (default: the device's
    /// own queue).
    #[pyo3(signature = (dtype, shape = None, *, stream = None))]
    fn numpy<'py>(
        &self,
        py: Python<'py>,
        dtype: &Bound<'py, PyAny>,
        shape: Option<&Bound<'py, PyAny>>,
        stream: Option<&Bound<'py, PyStream>>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let stream = stream_or_default(stream, self.buffer.device());
        let numpy = py.import("numpy")?;
        let dtype = numpy.getattr("dtype")?.call1((dtype,))?;
        let itemsize: usize = dtype.getattr("itemsize")?.extract()?;
        let nbytes = self.buffer.size();
        if itemsize == 0 || !nbytes.is_multiple_of(itemsize) {
            return Err(invalid_argument(format!(
                "{nbytes}-byte buffer is not a whole number of {itemsize}-byte {} items",
                dtype.str()?
            )));
        }
        // A bytearray, so that the array numpy builds on it is writable; nothing else sees it
        // while the GIL is released.
        let storage = PyByteArray::new_with(py, nbytes, |out| {
            py.detach(|| stream.copy_out(&self.buffer, 0, out))
                .or_raise()
        })?;
        let array = numpy.getattr("frombuffer")?.call1((storage, dtype))?;
        match shape {
            Some(shape) => array.call_method1("reshape", (shape,)),
            None => Ok(array),
        }
    }

    /// The `nbytes` bytes at `offset` of this buffer, as a buffer sharing the memory: kernels
    /// receive its start address, copies stay inside it.
    fn view(&self, offset: usize, nbytes: usize) -> PyResult<PyBuffer> {
        let buffer = self.buffer.view(offset, nbytes).or_raise()?;
        Ok(PyBuffer { buffer })
    }

    /// `buf[start:stop]`: a view (`step` must be 1; negative indices count from the end).
    fn __getitem__(&self, key: &Bound<'_, PyAny>) -> PyResult<PyBuffer> {
        let Ok(slice) = key.cast::<PySlice>() else {
            return Err(pyo3::exceptions::PyTypeError::new_err(format!(
                "hcq.Buffer indices must be slices (a view of bytes start:stop), not {}",
                key.get_type().name()?
            )));
        };
        let size = isize::try_from(self.buffer.size())
            .map_err(|_| invalid_argument("buffer too large to slice"))?;
        let range = slice.indices(size)?;
        if range.step != 1 {
            return Err(invalid_argument(format!(
                "a view of a buffer is contiguous: slice step {} (must be 1)",
                range.step
            )));
        }
        // `indices` clamps start into 0..=size; an empty range gives an empty view at start.
        let start = range.start as usize;
        self.view(start, range.slicelength)
    }

    /// Copies `nbytes` (default: all of this buffer) from this buffer at `src_offset` into
    /// `dst` at `dst_offset`, on the GPU (between two GPUs without passing through the host).
    /// Ordered after the work queued on both devices. With `stream` (of this buffer's
    /// device), after the work queued on it instead of the device's own queue, and on one
    /// device ordered on that stream only.
    #[pyo3(signature = (dst, nbytes = None, *, src_offset = 0, dst_offset = 0, stream = None))]
    fn copy_to(
        &self,
        py: Python<'_>,
        dst: &Bound<'_, PyBuffer>,
        nbytes: Option<usize>,
        src_offset: usize,
        dst_offset: usize,
        stream: Option<&Bound<'_, PyStream>>,
    ) -> PyResult<()> {
        let dst = &dst.get().buffer;
        let nbytes = nbytes.unwrap_or_else(|| self.buffer.size().saturating_sub(src_offset));
        let stream = stream_or_default(stream, self.buffer.device());
        py.detach(|| stream.copy(&self.buffer, src_offset, dst, dst_offset, nbytes))
            .or_raise()
    }

    /// Sets every element of the buffer to `value`, on the device, ordered with the work
    /// queued before and after it: a numpy scalar (or `bytes`) of 1, 2 or 4 bytes gives the
    /// pattern (`np.float32(1.5)`, `np.uint16(7)`); a Python int is one byte, 0 to 255, as
    /// with memset. The buffer must be a whole number of elements. `stream` queues it there
    /// instead of on the device's own queue.
    #[pyo3(signature = (value, *, stream = None))]
    fn fill(
        &self,
        py: Python<'_>,
        value: &Bound<'_, PyAny>,
        stream: Option<&Bound<'_, PyStream>>,
    ) -> PyResult<()> {
        let stream = stream_or_default(stream, self.buffer.device());
        let pattern: Vec<u8> = match host_bytes(value) {
            Ok(bytes) => bytes.as_bytes().to_vec(),
            Err(_) => match value.extract::<i64>() {
                Ok(byte @ 0..=255) => vec![byte as u8],
                Ok(other) => {
                    return Err(invalid_argument(format!(
                        "fill({other}): a Python int fills bytes, 0 to 255; pass a sized \
                         numpy scalar (e.g. np.int32({other})) for wider values"
                    )))
                }
                Err(_) => {
                    return Err(invalid_argument(format!(
                        "fill takes a numpy scalar or bytes of 1, 2 or 4 bytes, or an int \
                         byte, not {}",
                        value.get_type().name()?
                    )))
                }
            },
        };
        let buffer = &self.buffer;
        py.detach(|| match pattern.len() {
            1 => stream.fill(buffer, pattern[0]),
            2 => stream.fill(buffer, u16::from_ne_bytes([pattern[0], pattern[1]])),
            4 => stream.fill(
                buffer,
                u32::from_ne_bytes([pattern[0], pattern[1], pattern[2], pattern[3]]),
            ),
            n => Err(hcq::Error::InvalidArgument(format!(
                "fill takes values of 1, 2 or 4 bytes, not {n}"
            ))),
        })
        .or_raise()
    }

    /// DLPack: the buffer's memory as a tensor another library can use in place, e.g.
    /// `torch.from_dlpack(buf)`. Buffers are untyped: the tensor is 1-D uint8 of `nbytes`
    /// elements, to reinterpret on the consumer's side
    /// (`torch.from_dlpack(buf).view(torch.float32)`). Its data pointer is the address a kernel
    /// receives (a view's own start), and it keeps the memory and the device alive until the
    /// consumer lets it go, even after the buffer itself is gone.
    ///
    /// Waits for all the device's queued work first (every stream), so the memory is ready on
    /// whatever stream the consumer passes; `stream=-1` skips that wait. With
    /// `max_version >= (1, 0)` the capsule holds a versioned (DLPack 1.0) tensor, else an
    /// unversioned one. `copy=True`, and a `dl_device` other than the buffer's own, are a
    /// `BufferError`: hcq only lends its memory where it is. `UnsupportedError` on Metal
    /// (its buffers have no address).
    #[pyo3(signature = (*, stream = None, max_version = None, dl_device = None, copy = None))]
    fn __dlpack__<'py>(
        &self,
        py: Python<'py>,
        stream: Option<i64>,
        max_version: Option<(i64, i64)>,
        dl_device: Option<(i64, i64)>,
        copy: Option<bool>,
    ) -> PyResult<Bound<'py, PyAny>> {
        crate::dlpack::dlpack(py, &self.buffer, stream, max_version, dl_device, copy)
    }

    /// DLPack: `(device type, device index)`: `(10, N)` (`kDLROCM`) for device memory,
    /// `(11, N)` (`kDLROCMHost`) for pinned host memory (`Device.alloc_host`), where `N` is
    /// the device's number (the `N` of `amd:N` or `amd-emu:N`); `(8, N)` (`kDLMetal`) on
    /// Metal.
    fn __dlpack_device__(&self) -> PyResult<(i32, i32)> {
        crate::dlpack::dlpack_device(&self.buffer)
    }

    fn __repr__(&self) -> String {
        let mut text = format!("hcq.Buffer(nbytes={}", self.buffer.size());
        if self.buffer.offset() > 0 {
            text += &format!(", offset={}", self.buffer.offset());
        }
        text + &format!(", device='{}')", self.buffer.device().name())
    }
}
