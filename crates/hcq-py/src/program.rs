//! `hcq.Program`: a loaded kernel, called like a function.

use crate::buffer::PyBuffer;
use crate::device::PyDevice;
use crate::errors::{invalid_argument, IntoPyResult};
use crate::stream::PyStream;
use hcq::{Arg, ArgBytes, ArgInfo, ArgKind, LaunchOptions};
use pyo3::exceptions::PyTypeError;
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::{PyBool, PyByteArray, PyBytes, PyFloat, PyInt, PyTuple, PyType};
use std::mem::ManuallyDrop;

/// A kernel loaded on a device (`dev.program(code_object, name)`). Call it to launch it:
/// `prg(out, x, np.float32(a), n, grid=(blocks, 1, 1), block=(64, 1, 1))`.
#[pyclass(frozen, module = "hcq", name = "Program")]
pub struct PyProgram {
    /// Dropped in `Drop` with the GIL released (the last drop waits for the device).
    program: ManuallyDrop<hcq::Program>,
    /// The code object's argument metadata, read once: every call checks against it.
    arguments: Option<Vec<ArgInfo>>,
}

impl PyProgram {
    pub fn new(program: hcq::Program) -> Self {
        let arguments = program.arguments();
        PyProgram {
            program: ManuallyDrop::new(program),
            arguments,
        }
    }

    /// "argument 2 (n) of saxpy", for messages.
    fn describe(&self, index: usize) -> String {
        let name = self
            .arguments
            .as_ref()
            .and_then(|infos| infos.get(index))
            .and_then(|info| info.name.as_deref());
        match name {
            Some(name) => format!("argument {index} ({name}) of {}", self.program.name()),
            None => format!("argument {index} of {}", self.program.name()),
        }
    }
}

#[pymethods]
impl PyProgram {
    /// The kernel's name.
    #[getter]
    fn name(&self) -> String {
        self.program.name().to_string()
    }

    /// The device the kernel is loaded on.
    #[getter]
    fn device(&self) -> PyDevice {
        PyDevice {
            device: self.program.device().clone(),
        }
    }

    /// What the kernel asks of the device and the occupancy that allows (`hcq.ProgramInfo`).
    #[getter]
    fn info(&self) -> PyResult<PyProgramInfo> {
        self.program.info().or_raise().map(PyProgramInfo::from)
    }

    /// The arguments a caller passes, as the code object's metadata declares them: a list of
    /// `(name, kind, nbytes)` with kind `"buffer"`, `"value"` or the metadata's own word for a
    /// kind hcq cannot pass; `name` is None when the metadata keeps no name. None when the
    /// kernel has no argument metadata (then Python ints and floats cannot be sized: pass
    /// numpy scalars).
    #[getter]
    fn arguments(&self) -> Option<Vec<(Option<String>, String, u32)>> {
        self.arguments.as_ref().map(|infos| {
            infos
                .iter()
                .map(|info| match &info.kind {
                    ArgKind::Buffer => (info.name.clone(), "buffer".to_string(), 8),
                    ArgKind::Value { bytes } => (info.name.clone(), "value".to_string(), *bytes),
                    ArgKind::Other(kind) => (info.name.clone(), kind.clone(), 0),
                })
                .collect()
        })
    }

    /// Launches the kernel over `grid` workgroups of `block` work-items each (an int or a
    /// tuple of up to three), with `lds` bytes of dynamic LDS (HIP's `extern __shared__`).
    /// Arguments, in the kernel's order: `hcq.Buffer`s, numpy scalars (their dtype gives the
    /// size), Python ints, floats and bools (sized from the kernel's metadata), and `bytes`
    /// for structs. Returns at once with None; with `timed=True` it waits for the kernel and
    /// returns its GPU time in seconds. `stream` queues it on an `hcq.Stream` of the device
    /// (default: the device's own queue).
    #[allow(clippy::too_many_arguments)]
    #[pyo3(signature = (*args, grid, block = None, lds = 0, timed = false, stream = None))]
    fn __call__(
        &self,
        py: Python<'_>,
        args: &Bound<'_, PyTuple>,
        grid: &Bound<'_, PyAny>,
        block: Option<&Bound<'_, PyAny>>,
        lds: u32,
        timed: bool,
        stream: Option<&Bound<'_, PyStream>>,
    ) -> PyResult<Option<f64>> {
        let block = match block {
            Some(block) => dims(block, "block")?,
            None => [1, 1, 1],
        };
        self.launch_tuple(py, args, dims(grid, "grid")?, block, lds, timed, stream)
    }

    /// The launch `prg(*args, grid=grid, block=block)` makes, with the grid and the block
    /// first and positional: `prg.launch(grid, block, out, x, n)`. It is the cheaper call in a
    /// hot loop, because Python then passes no keywords (which under the stable ABI of
    /// CPython 3.9 cost a string conversion each, and for a call a dictionary).
    #[allow(clippy::too_many_arguments)]
    #[pyo3(signature = (grid, block, *args, lds = 0, timed = false, stream = None))]
    fn launch(
        &self,
        py: Python<'_>,
        grid: &Bound<'_, PyAny>,
        block: &Bound<'_, PyAny>,
        args: &Bound<'_, PyTuple>,
        lds: u32,
        timed: bool,
        stream: Option<&Bound<'_, PyStream>>,
    ) -> PyResult<Option<f64>> {
        let (grid, block) = (dims(grid, "grid")?, dims(block, "block")?);
        self.launch_tuple(py, args, grid, block, lds, timed, stream)
    }

    fn __repr__(&self) -> String {
        format!(
            "hcq.Program('{}', device='{}')",
            self.program.name(),
            self.program.device().name()
        )
    }
}

impl Drop for PyProgram {
    fn drop(&mut self) {
        // SAFETY: `drop` runs once and nothing reads `self.program` after it: this is its
        // only drop.
        let program = unsafe { ManuallyDrop::take(&mut self.program) };
        // The last handle to a program waits for the launches that may still run its code;
        // other Python threads go on meanwhile.
        crate::drop_without_gil(program);
    }
}

impl PyProgram {
    /// The launch both call forms make, with `args` the kernel's arguments.
    #[allow(clippy::too_many_arguments)]
    fn launch_tuple(
        &self,
        py: Python<'_>,
        args: &Bound<'_, PyTuple>,
        grid: [u32; 3],
        block: [u32; 3],
        lds: u32,
        timed: bool,
        stream: Option<&Bound<'_, PyStream>>,
    ) -> PyResult<Option<f64>> {
        self.check_count(args.len())?;
        // Borrowed from `args`, which holds the objects (and so the buffers the arguments
        // point to) through the launch. Kernels with a few arguments, the most, convert them
        // on the stack: a heap allocation is a tenth of a launch.
        let mut few = [Arg::I32(0); 8];
        let many: Vec<Arg<'_>>;
        let launch_args: &[Arg<'_>] = if args.len() <= few.len() {
            for ((index, obj), slot) in args.iter_borrowed().enumerate().zip(&mut few) {
                *slot = self.convert(index, obj)?;
            }
            &few[..args.len()]
        } else {
            many = args
                .iter_borrowed()
                .enumerate()
                .map(|(index, obj)| self.convert(index, obj))
                .collect::<PyResult<_>>()?;
            &many
        };
        let options = LaunchOptions {
            dynamic_lds_bytes: lds,
            timed,
        };
        // Released even when not timed: a launch waits when the command ring is full.
        let time = match stream {
            Some(stream) => {
                let stream = &stream.get().stream;
                py.detach(|| stream.launch_with(&self.program, launch_args, grid, block, &options))
            }
            None => py.detach(|| self.program.launch_with(launch_args, grid, block, &options)),
        }
        .or_raise()?;
        Ok(time.map(|t| t.as_secs_f64()))
    }

    pub(crate) fn program(&self) -> &hcq::Program {
        &self.program
    }

    /// What the kernel declares for argument `index` (None without metadata).
    pub(crate) fn expected(&self, index: usize) -> Option<&ArgKind> {
        self.arguments
            .as_ref()
            .and_then(|infos| infos.get(index))
            .map(|info| &info.kind)
    }

    /// An `InvalidArgumentError` unless `given` is the number of arguments the metadata
    /// declares (anything goes without metadata).
    pub(crate) fn check_count(&self, given: usize) -> PyResult<()> {
        match &self.arguments {
            Some(infos) if infos.len() != given => {
                let names: Vec<&str> = infos
                    .iter()
                    .map(|i| i.name.as_deref().unwrap_or("?"))
                    .collect();
                Err(invalid_argument(format!(
                    "{} takes {} arguments ({}), {} given",
                    self.program.name(),
                    infos.len(),
                    names.join(", "),
                    given
                )))
            }
            _ => Ok(()),
        }
    }

    /// An `InvalidArgumentError` if argument `index` must be a value but a buffer (or graph
    /// input) is given.
    pub(crate) fn check_buffer_allowed(&self, index: usize) -> PyResult<()> {
        match self.expected(index) {
            Some(ArgKind::Value { bytes }) => Err(invalid_argument(format!(
                "{} takes a {bytes}-byte value, got an hcq.Buffer",
                self.describe(index)
            ))),
            _ => Ok(()),
        }
    }

    /// One Python argument as a kernel argument, checked against what the kernel declares.
    fn convert<'a>(&self, index: usize, obj: Borrowed<'a, '_, PyAny>) -> PyResult<Arg<'a>> {
        if let Ok(buffer) = obj.cast::<PyBuffer>() {
            self.check_buffer_allowed(index)?;
            return Ok(Arg::Buffer(&buffer.get().buffer));
        }
        self.convert_value(index, &obj)
    }

    /// A by-value argument (a numpy scalar, bool, int, float or bytes), checked against what
    /// the kernel declares.
    pub(crate) fn convert_value(
        &self,
        index: usize,
        obj: &Bound<'_, PyAny>,
    ) -> PyResult<Arg<'static>> {
        let expected = self.expected(index);
        let arg = self.convert_unchecked(index, obj, expected)?;
        match expected {
            Some(ArgKind::Buffer) => Err(invalid_argument(format!(
                "{} takes an hcq.Buffer, got {}",
                self.describe(index),
                type_name(obj)
            ))),
            Some(ArgKind::Value { bytes }) if arg.size() != *bytes as usize => {
                Err(invalid_argument(format!(
                    "{} takes {bytes} bytes, got {} ({}, {} bytes)",
                    self.describe(index),
                    type_name(obj),
                    arg.type_name(),
                    arg.size()
                )))
            }
            _ => Ok(arg),
        }
    }

    /// A by-value argument: a numpy scalar, bool, int, float or bytes.
    fn convert_unchecked(
        &self,
        index: usize,
        obj: &Bound<'_, PyAny>,
        expected: Option<&ArgKind>,
    ) -> PyResult<Arg<'static>> {
        // Sizes a Python int or float takes from the metadata; a buffer parameter is
        // reported by `convert`, so any size serves here.
        let declared = || match expected {
            Some(ArgKind::Value { bytes }) => Ok(*bytes),
            Some(ArgKind::Buffer) => Ok(8),
            Some(ArgKind::Other(kind)) => Err(invalid_argument(format!(
                "{} is of kind {kind}, which hcq cannot pass",
                self.describe(index)
            ))),
            None => Err(invalid_argument(format!(
                "{}: the kernel has no argument metadata to size a Python {} by; pass a numpy \
                 scalar (numpy.int32(...), numpy.float32(...)) or bytes",
                self.describe(index),
                type_name(obj)
            ))),
        };
        if obj.is_instance_of::<PyBool>() {
            return Ok(Arg::Bool(obj.extract::<bool>()?));
        }
        if obj.is_instance_of::<PyInt>() {
            let bytes = declared()?;
            return int_arg(obj, bytes).ok_or_else(|| {
                invalid_argument(format!(
                    "{}: the int {} does not fit the parameter's {bytes} bytes",
                    self.describe(index),
                    obj.repr().map(|r| r.to_string()).unwrap_or_default()
                ))
            });
        }
        if let Some(arg) = known_numpy_scalar(obj) {
            return Ok(arg);
        }
        // Exactly float: numpy.float64 derives from float but has its own size.
        if obj.is_exact_instance_of::<PyFloat>() {
            let value: f64 = obj.extract()?;
            return match declared()? {
                4 => Ok(Arg::F32(value as f32)),
                8 => Ok(Arg::F64(value)),
                bytes => Err(invalid_argument(format!(
                    "{}: a {bytes}-byte parameter cannot take a Python float (only 4- and \
                     8-byte ones do); pass a numpy scalar such as numpy.float16(...)",
                    self.describe(index)
                ))),
            };
        }
        if obj.is_instance_of::<PyBytes>() || obj.is_instance_of::<PyByteArray>() {
            let bytes: Vec<u8> = if let Ok(b) = obj.cast::<PyBytes>() {
                b.as_bytes().to_vec()
            } else {
                obj.cast::<PyByteArray>()?.to_vec()
            };
            return Ok(Arg::Bytes(ArgBytes::new(&bytes).or_raise()?));
        }
        if obj.hasattr("dtype")? {
            return self.numpy_scalar(index, obj);
        }
        Err(PyTypeError::new_err(format!(
            "{}: an hcq.Buffer, numpy scalar, int, float, bool or bytes is needed, not {}",
            self.describe(index),
            type_name(obj)
        )))
    }

    /// A numpy scalar (`numpy.int32(5)`): its dtype gives the type and size.
    fn numpy_scalar(&self, index: usize, obj: &Bound<'_, PyAny>) -> PyResult<Arg<'static>> {
        let py = obj.py();
        let generic = NUMPY_TYPES
            .get_or_try_init(py, || NumpyTypes::look_up(py))?
            .generic
            .bind(py);
        if !obj.is_instance(generic)? {
            return Err(PyTypeError::new_err(format!(
                "{}: a numpy array is not a kernel argument (write it into an hcq.Buffer and \
                 pass that); a numpy scalar is, e.g. numpy.int32(n)",
                self.describe(index)
            )));
        }
        let dtype = obj.getattr("dtype")?;
        let kind: String = dtype.getattr("kind")?.extract()?;
        let bytes_obj = obj.call_method0("tobytes")?;
        let bytes = bytes_obj.cast::<PyBytes>()?.as_bytes();
        Ok(scalar_from_bytes(&kind, bytes).unwrap_or(Arg::Bytes(ArgBytes::new(bytes).or_raise()?)))
    }
}

/// The numpy types a launch recognises without asking numpy, looked up once (when the first
/// numpy scalar is passed): asking each scalar for its dtype costs more than the launch.
struct NumpyTypes {
    generic: Py<PyAny>,
    scalars: Vec<(Py<PyType>, ScalarType)>,
}

#[derive(Clone, Copy)]
enum ScalarType {
    I8,
    I16,
    I32,
    I64,
    U8,
    U16,
    U32,
    U64,
    F32,
    F64,
    Bool,
}

static NUMPY_TYPES: PyOnceLock<NumpyTypes> = PyOnceLock::new();

impl NumpyTypes {
    fn look_up(py: Python<'_>) -> PyResult<NumpyTypes> {
        let numpy = py.import("numpy")?;
        let names = [
            ("int8", ScalarType::I8),
            ("int16", ScalarType::I16),
            ("int32", ScalarType::I32),
            ("int64", ScalarType::I64),
            ("uint8", ScalarType::U8),
            ("uint16", ScalarType::U16),
            ("uint32", ScalarType::U32),
            ("uint64", ScalarType::U64),
            ("float32", ScalarType::F32),
            ("float64", ScalarType::F64),
            ("bool_", ScalarType::Bool),
        ];
        let mut scalars = Vec::with_capacity(names.len());
        for (name, scalar) in names {
            let class = numpy.getattr(name)?.cast_into::<PyType>()?;
            scalars.push((class.unbind(), scalar));
        }
        Ok(NumpyTypes {
            generic: numpy.getattr("generic")?.unbind(),
            scalars,
        })
    }
}

/// `obj` as an argument when it is a numpy scalar of a type in `NUMPY_TYPES` (once numpy
/// scalars have been seen); None otherwise, for the general path.
fn known_numpy_scalar(obj: &Bound<'_, PyAny>) -> Option<Arg<'static>> {
    let py = obj.py();
    let types = NUMPY_TYPES.get(py)?;
    let class = obj.get_type();
    let (_, scalar) = types.scalars.iter().find(|(t, _)| class.is(t))?;
    // numpy ints convert through `__index__`, floats through `__float__`, exactly.
    Some(match scalar {
        ScalarType::I8 => Arg::I8(obj.extract().ok()?),
        ScalarType::I16 => Arg::I16(obj.extract().ok()?),
        ScalarType::I32 => Arg::I32(obj.extract().ok()?),
        ScalarType::I64 => Arg::I64(obj.extract().ok()?),
        ScalarType::U8 => Arg::U8(obj.extract().ok()?),
        ScalarType::U16 => Arg::U16(obj.extract().ok()?),
        ScalarType::U32 => Arg::U32(obj.extract().ok()?),
        ScalarType::U64 => Arg::U64(obj.extract().ok()?),
        ScalarType::F32 => Arg::F32(obj.extract::<f64>().ok()? as f32),
        ScalarType::F64 => Arg::F64(obj.extract().ok()?),
        ScalarType::Bool => Arg::Bool(obj.is_truthy().ok()?),
    })
}

/// A numpy scalar's typed argument from its dtype kind and little-endian bytes; None for
/// other kinds and sizes (passed as plain bytes).
fn scalar_from_bytes(kind: &str, bytes: &[u8]) -> Option<Arg<'static>> {
    Some(match (kind, bytes.len()) {
        ("i", 1) => Arg::I8(i8::from_le_bytes(bytes.try_into().ok()?)),
        ("i", 2) => Arg::I16(i16::from_le_bytes(bytes.try_into().ok()?)),
        ("i", 4) => Arg::I32(i32::from_le_bytes(bytes.try_into().ok()?)),
        ("i", 8) => Arg::I64(i64::from_le_bytes(bytes.try_into().ok()?)),
        ("u", 1) => Arg::U8(bytes[0]),
        ("u", 2) => Arg::U16(u16::from_le_bytes(bytes.try_into().ok()?)),
        ("u", 4) => Arg::U32(u32::from_le_bytes(bytes.try_into().ok()?)),
        ("u", 8) => Arg::U64(u64::from_le_bytes(bytes.try_into().ok()?)),
        ("f", 2) => Arg::F16(u16::from_le_bytes(bytes.try_into().ok()?)),
        ("f", 4) => Arg::F32(f32::from_le_bytes(bytes.try_into().ok()?)),
        ("f", 8) => Arg::F64(f64::from_le_bytes(bytes.try_into().ok()?)),
        ("b", 1) => Arg::Bool(bytes[0] != 0),
        _ => return None,
    })
}

/// A Python int as an integer of `bytes` bytes: signed when negative, else signed when it
/// fits (so the kernel reads the same number either way), else unsigned. None when it does
/// not fit, or for a size no integer has.
fn int_arg(obj: &Bound<'_, PyAny>, bytes: u32) -> Option<Arg<'static>> {
    if let Ok(v) = obj.extract::<i64>() {
        return match bytes {
            1 => i8::try_from(v)
                .map(Arg::I8)
                .or_else(|_| u8::try_from(v).map(Arg::U8))
                .ok(),
            2 => i16::try_from(v)
                .map(Arg::I16)
                .or_else(|_| u16::try_from(v).map(Arg::U16))
                .ok(),
            4 => i32::try_from(v)
                .map(Arg::I32)
                .or_else(|_| u32::try_from(v).map(Arg::U32))
                .ok(),
            8 => Some(Arg::I64(v)),
            _ => None,
        };
    }
    // Only a u64 above i64::MAX is left that fits any integer parameter.
    match (bytes, obj.extract::<u64>()) {
        (8, Ok(v)) => Some(Arg::U64(v)),
        _ => None,
    }
}

/// A grid or block size: an int, or a sequence of one to three ints (missing ones are 1).
pub(crate) fn dims(obj: &Bound<'_, PyAny>, what: &str) -> PyResult<[u32; 3]> {
    let wrong = || {
        PyTypeError::new_err(format!(
            "{what} must be an int or a tuple of one to three ints from 0 to 2**32-1, not {}",
            obj.repr().map(|r| r.to_string()).unwrap_or_default()
        ))
    };
    // Ints and tuples first, without a failed conversion (building its exception costs more
    // than the launch).
    if obj.is_instance_of::<PyInt>() {
        return Ok([obj.extract::<u32>().map_err(|_| wrong())?, 1, 1]);
    }
    let values: Vec<u32> = match obj.cast::<PyTuple>() {
        Ok(tuple) => tuple
            .iter()
            .map(|item| item.extract::<u32>().map_err(|_| wrong()))
            .collect::<PyResult<_>>()?,
        Err(_) => obj.extract().map_err(|_| wrong())?,
    };
    if values.is_empty() || values.len() > 3 {
        return Err(invalid_argument(format!(
            "{what} has {} dimensions (one to three)",
            values.len()
        )));
    }
    let mut out = [1; 3];
    out[..values.len()].copy_from_slice(&values);
    Ok(out)
}

/// The Python type name of `obj`, for messages.
fn type_name(obj: &Bound<'_, PyAny>) -> String {
    obj.get_type()
        .name()
        .map(|n| n.to_string())
        .unwrap_or_else(|_| "?".into())
}

/// A kernel's resources from its code object, and the waves per SIMD they allow.
#[pyclass(frozen, get_all, module = "hcq", name = "ProgramInfo")]
pub struct PyProgramInfo {
    /// VGPRs the kernel uses.
    vgprs: u32,
    /// VGPRs each wave allocates.
    allocated_vgprs: u32,
    /// SGPRs it uses, or None when its metadata does not say.
    sgprs: Option<u32>,
    /// Bytes of LDS per workgroup it declares.
    static_lds: u32,
    /// Most bytes of dynamic LDS a launch may add (`lds=`).
    max_dynamic_lds: u32,
    /// Bytes of scratch per work-item.
    scratch_per_lane: u32,
    /// Most work-items per workgroup.
    max_workgroup_size: u32,
    /// Lanes per wave.
    wave_size: u32,
    /// Waves one SIMD keeps at once (without dynamic LDS).
    waves_per_simd: u32,
    /// What bounds them: "wave slots", "registers" or "LDS".
    occupancy_limit: &'static str,
}

impl From<hcq::ProgramInfo> for PyProgramInfo {
    fn from(i: hcq::ProgramInfo) -> Self {
        PyProgramInfo {
            vgprs: i.vgprs,
            allocated_vgprs: i.allocated_vgprs,
            sgprs: i.sgprs,
            static_lds: i.static_lds,
            max_dynamic_lds: i.max_dynamic_lds,
            scratch_per_lane: i.scratch_per_lane,
            max_workgroup_size: i.max_workgroup_size,
            wave_size: i.wave_size,
            waves_per_simd: i.waves_per_simd,
            occupancy_limit: i.occupancy_limit,
        }
    }
}

#[pymethods]
impl PyProgramInfo {
    fn __repr__(&self) -> String {
        format!(
            "hcq.ProgramInfo(vgprs={}, sgprs={}, static_lds={}, scratch_per_lane={}, \
             max_workgroup_size={}, waves_per_simd={}, occupancy_limit='{}')",
            self.vgprs,
            self.sgprs.map_or("None".to_string(), |n| n.to_string()),
            self.static_lds,
            self.scratch_per_lane,
            self.max_workgroup_size,
            self.waves_per_simd,
            self.occupancy_limit
        )
    }
}
