//! `hcq.Device`, `hcq.DeviceInfo` and `hcq.devices()`.

use crate::buffer::{host_bytes, PyBuffer};
use crate::errors::IntoPyResult;
use crate::program::PyProgram;
use crate::stream::{PyEvent, PyStream};
use hcq::CompileOptions;
use pyo3::prelude::*;
use pyo3::types::PyBytes;
use std::path::PathBuf;

/// Names of every device hcq can open (real GPUs first, then the emulated ones), without
/// opening them. A GPU the system has but hcq cannot drive is left out (`hcq devices` lists
/// it, saying why).
#[pyfunction]
pub fn devices(py: Python<'_>) -> Vec<String> {
    // Listing reads the driver's topology: no Python object is involved.
    py.detach(|| {
        hcq::list_devices()
            .into_iter()
            .filter(|d| d.unusable.is_none())
            .map(|d| d.name)
            .collect()
    })
}

/// An opened GPU: `Device()` opens the default one (`HCQ_DEVICE`, else the first real AMD
/// GPU, else `amd-emu:0`), `Device("amd-emu:1")` a named one. Opening the same name twice gives
/// the same device. Buffers and programs keep their device open.
#[pyclass(frozen, module = "hcq", name = "Device")]
pub struct PyDevice {
    pub(crate) device: hcq::Device,
}

#[pymethods]
impl PyDevice {
    #[new]
    #[pyo3(signature = (name = None))]
    fn new(py: Python<'_>, name: Option<String>) -> PyResult<Self> {
        let device = py
            .detach(|| match name {
                Some(name) => hcq::Device::open(&name),
                None => hcq::Device::default_device(),
            })
            .or_raise()?;
        Ok(PyDevice { device })
    }

    /// The name the device is opened by, e.g. `amd-emu:0`.
    #[getter]
    fn name(&self) -> String {
        self.device.name().to_string()
    }

    /// Properties of the device: name, arch, memory, emulated, description, and its compute
    /// shape (`compute`, None where the backend does not report it).
    #[getter]
    fn info(&self, py: Python<'_>) -> PyResult<PyDeviceInfo> {
        PyDeviceInfo::new(py, self.device.info())
    }

    /// Waits until all work queued on the device (its own queue and every stream) has
    /// finished; raises the fault of any that failed (`DeviceFaultError`), or `TimeoutError`.
    fn synchronize(&self, py: Python<'_>) -> PyResult<()> {
        py.detach(|| self.device.synchronize()).or_raise()
    }

    /// Opens a new stream (`hcq.Stream`): an in-order queue of its own, whose work may overlap
    /// the device's other streams. `UnsupportedError` on Metal.
    fn stream(&self, py: Python<'_>) -> PyResult<PyStream> {
        let stream = py.detach(|| self.device.stream()).or_raise()?;
        Ok(PyStream { stream })
    }

    /// The device's own queue as an `hcq.Stream`: what calls without `stream=` use.
    #[getter]
    fn default_stream(&self) -> PyStream {
        PyStream {
            stream: self.device.default_stream(),
        }
    }

    /// Records an event on the device's own queue (`Stream.record_event`).
    fn record_event(&self, py: Python<'_>) -> PyResult<PyEvent> {
        let event = py.detach(|| self.device.record_event()).or_raise()?;
        Ok(PyEvent { event })
    }

    /// Makes the device's own queue wait for `event` from now on (`Stream.wait_event`).
    fn wait_event(&self, py: Python<'_>, event: &Bound<'_, PyEvent>) -> PyResult<()> {
        let event = &event.get().event;
        py.detach(|| self.device.wait_event(event)).or_raise()
    }

    /// Compiles kernel source (HIP C++ on AMD) into a code object, through the on-disk
    /// compile cache (`HCQ_CACHE_DIR`). Quoted `#include`s resolve from the working
    /// directory. `flags` are compiler arguments: `-IDIR`, `-DNAME[=VALUE]`, `-ON` and any
    /// other clang flag (part of the cache key).
    #[pyo3(signature = (source, flags = None))]
    fn compile<'py>(
        &self,
        py: Python<'py>,
        source: String,
        flags: Option<Vec<String>>,
    ) -> PyResult<Bound<'py, PyBytes>> {
        let options = CompileOptions::from_args(&flags.unwrap_or_default()).or_raise()?;
        let code = py
            .detach(|| self.device.compile_with(&source, &options))
            .or_raise()?;
        Ok(PyBytes::new(py, &code))
    }

    /// Compiles a kernel source file, through the compile cache; its `#include "..."`s
    /// resolve relative to the file. `flags` as for `compile`.
    #[pyo3(signature = (path, flags = None))]
    fn compile_file<'py>(
        &self,
        py: Python<'py>,
        path: PathBuf,
        flags: Option<Vec<String>>,
    ) -> PyResult<Bound<'py, PyBytes>> {
        let options = CompileOptions::from_args(&flags.unwrap_or_default()).or_raise()?;
        let code = py
            .detach(|| self.device.compile_file_with(&path, &options))
            .or_raise()?;
        Ok(PyBytes::new(py, &code))
    }

    /// Loads kernel `name` from a code object (bytes, or anything with the buffer protocol).
    fn program(
        &self,
        py: Python<'_>,
        code_object: &Bound<'_, PyAny>,
        name: String,
    ) -> PyResult<PyProgram> {
        let code = host_bytes(code_object)?;
        let code = code.as_bytes();
        let program = py.detach(|| self.device.program(code, &name)).or_raise()?;
        Ok(PyProgram::new(program))
    }

    /// Allocates `nbytes` bytes of device memory (contents unspecified until written).
    fn alloc(&self, py: Python<'_>, nbytes: usize) -> PyResult<PyBuffer> {
        let buffer = py.detach(|| self.device.alloc(nbytes)).or_raise()?;
        Ok(PyBuffer { buffer })
    }

    /// `nbytes` bytes of pinned host memory the device reaches directly (`hipHostMalloc`):
    /// kernels read and write it in place; `buf.is_host` is True.
    fn alloc_host(&self, py: Python<'_>, nbytes: usize) -> PyResult<PyBuffer> {
        let buffer = py.detach(|| self.device.alloc_host(nbytes)).or_raise()?;
        Ok(PyBuffer { buffer })
    }

    /// `nbytes` bytes of device memory, all zero (filled on the device).
    fn alloc_zeros(&self, py: Python<'_>, nbytes: usize) -> PyResult<PyBuffer> {
        let buffer = py
            .detach(|| self.device.alloc_zeros::<u8>(nbytes))
            .or_raise()?;
        Ok(PyBuffer { buffer })
    }

    /// Frees the device memory that dropped buffers left in the allocator's cache (once the
    /// queued work has finished); returns the bytes released.
    fn free_cached(&self, py: Python<'_>) -> PyResult<u64> {
        py.detach(|| self.device.free_cached()).or_raise()
    }

    /// For benchmarks (`hcq.bench`): holds (True) or releases an emulated device's engines.
    /// While held, submissions queue up in the ring unexecuted, so the host's side of a launch
    /// is timed without the emulator taking the cores; waiting on a held device times out.
    /// `UnsupportedError` on a real device.
    fn _hold_engines(&self, held: bool) -> PyResult<()> {
        hcq::hold_emulated_engines(&self.device, held).or_raise()
    }

    /// For benchmarks: (dwords the last submission wrote to the command ring, the ring's
    /// capacity in dwords).
    #[getter]
    fn _ring_dwords(&self) -> (u64, u64) {
        (
            self.device.last_submission_dwords(),
            self.device.ring_capacity_dwords(),
        )
    }

    fn __repr__(&self) -> String {
        format!("hcq.Device('{}')", self.device.name())
    }

    /// Devices opened by the same name are the same device.
    fn __eq__(&self, other: &Bound<'_, PyAny>) -> bool {
        other
            .cast::<PyDevice>()
            .is_ok_and(|o| o.get().device.name() == self.device.name())
    }

    fn __hash__(&self) -> u64 {
        use std::hash::{Hash, Hasher};
        let mut hasher = std::collections::hash_map::DefaultHasher::new();
        self.device.name().hash(&mut hasher);
        hasher.finish()
    }
}

/// Properties of an opened device.
#[pyclass(frozen, get_all, module = "hcq", name = "DeviceInfo")]
pub struct PyDeviceInfo {
    /// The name the device is opened by, e.g. `amd-emu:0`.
    name: String,
    /// Compiler target, e.g. `gfx1100`.
    arch: String,
    /// Device memory in bytes.
    memory: u64,
    /// Whether this is the emulated GPU.
    emulated: bool,
    /// Human-readable product name.
    description: String,
    /// The compute shape (`hcq.ComputeInfo`), or None.
    compute: Option<Py<PyComputeInfo>>,
}

impl PyDeviceInfo {
    fn new(py: Python<'_>, info: hcq::DeviceInfo) -> PyResult<Self> {
        let compute = match info.compute {
            Some(c) => Some(Py::new(py, PyComputeInfo::from(c))?),
            None => None,
        };
        Ok(PyDeviceInfo {
            name: info.name,
            arch: info.arch,
            memory: info.memory,
            emulated: info.emulated,
            description: info.description,
            compute,
        })
    }
}

/// A GPU's compute shape and identity, as rocminfo shows them.
#[pyclass(frozen, get_all, module = "hcq", name = "ComputeInfo")]
pub struct PyComputeInfo {
    compute_units: u32,
    shader_engines: u32,
    simds_per_cu: u32,
    /// Lanes per wave the runtime runs kernels with.
    wave_size: u32,
    max_waves_per_cu: u32,
    /// Most LDS one workgroup may use, in bytes.
    lds_per_workgroup: u32,
    /// Highest shader clock, in MHz.
    max_clock_mhz: u32,
    /// Device memory not allocated yet, in bytes, or None when the driver does not say.
    free_memory: Option<u64>,
    /// Host memory the GPU can map (GTT), in bytes, and how much is not in use, or None.
    gtt_memory: Option<u64>,
    gtt_free: Option<u64>,
    /// PCI location, `domain:bus:device.function`.
    pci_location: String,
    /// Minor number of the render node (`/dev/dri/renderD<minor>`).
    render_minor: u32,
    /// The kernel driver's interface version, e.g. `KFD 1.16`.
    driver_version: String,
    /// Why the device has no copy engine of its own (copies then run on the compute queue),
    /// or None when it has one.
    copy_engine_missing: Option<String>,
    /// The caches, one `hcq.CacheInfo` per kind, smallest level first.
    caches: Vec<PyCacheInfo>,
}

/// One kind of cache of a GPU: every instance of it alike.
#[pyclass(frozen, get_all, module = "hcq", name = "CacheInfo")]
#[derive(Clone)]
pub struct PyCacheInfo {
    /// 1 closest to the SIMDs (a gfx11 GPU's vector L0 and GL1 are both 1), 2 for L2, 3 for
    /// the Infinity Cache.
    level: u32,
    /// Whether it caches data, instructions, or both.
    data: bool,
    instruction: bool,
    /// Bytes of one instance.
    nbytes: u64,
    /// Compute units sharing one instance.
    shared_by_cus: u32,
    /// Instances on the GPU.
    instances: u32,
}

#[pymethods]
impl PyCacheInfo {
    fn __repr__(&self) -> String {
        format!(
            "hcq.CacheInfo(level={}, data={}, instruction={}, nbytes={}, shared_by_cus={}, \
             instances={})",
            self.level,
            if self.data { "True" } else { "False" },
            if self.instruction { "True" } else { "False" },
            self.nbytes,
            self.shared_by_cus,
            self.instances
        )
    }
}

impl From<hcq::ComputeInfo> for PyComputeInfo {
    fn from(c: hcq::ComputeInfo) -> Self {
        PyComputeInfo {
            compute_units: c.compute_units,
            shader_engines: c.shader_engines,
            simds_per_cu: c.simds_per_cu,
            wave_size: c.wave_size,
            max_waves_per_cu: c.max_waves_per_cu,
            lds_per_workgroup: c.lds_per_workgroup,
            max_clock_mhz: c.max_clock_mhz,
            free_memory: c.free_memory,
            gtt_memory: c.gtt_memory,
            gtt_free: c.gtt_free,
            pci_location: c.pci_location,
            render_minor: c.render_minor,
            driver_version: c.driver_version,
            copy_engine_missing: c.copy_engine_missing,
            caches: c
                .caches
                .into_iter()
                .map(|k| PyCacheInfo {
                    level: k.level,
                    data: k.data,
                    instruction: k.instruction,
                    nbytes: k.bytes,
                    shared_by_cus: k.shared_by_cus,
                    instances: k.instances,
                })
                .collect(),
        }
    }
}

#[pymethods]
impl PyComputeInfo {
    fn __repr__(&self) -> String {
        format!(
            "hcq.ComputeInfo(compute_units={}, shader_engines={}, simds_per_cu={}, \
             wave_size={}, max_waves_per_cu={}, lds_per_workgroup={}, max_clock_mhz={}, \
             pci_location='{}', render_minor={}, driver_version='{}')",
            self.compute_units,
            self.shader_engines,
            self.simds_per_cu,
            self.wave_size,
            self.max_waves_per_cu,
            self.lds_per_workgroup,
            self.max_clock_mhz,
            self.pci_location,
            self.render_minor,
            self.driver_version
        )
    }
}

#[pymethods]
impl PyDeviceInfo {
    fn __repr__(&self) -> String {
        format!(
            "hcq.DeviceInfo(name='{}', arch='{}', memory={}, emulated={}, description='{}')",
            self.name,
            self.arch,
            self.memory,
            if self.emulated { "True" } else { "False" },
            self.description
        )
    }
}
