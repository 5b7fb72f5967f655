//! Device names, the drivers behind them, and the default device.

use crate::backends::AnyDevice;
use crate::Device;
#[cfg(target_os = "linux")]
use hcq_amd::{AmdDevice, AmdDriver};
#[cfg(target_os = "linux")]
use hcq_amd_sys::seam::{HostKernel, Syscalls};
use hcq_core::{Error, Result};
use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};

const REAL: &str = "amd";
const EMULATED: &str = "amd-emu";
const METAL: &str = "metal";

#[cfg(target_os = "linux")]
type DriverSlot = OnceLock<std::result::Result<Arc<AmdDriver>, String>>;

#[cfg(target_os = "linux")]
fn real_driver() -> Result<Arc<AmdDriver>> {
    static DRIVER: DriverSlot = OnceLock::new();
    DRIVER
        .get_or_init(|| {
            if !std::path::Path::new("/dev/kfd").exists() {
                return Err(
                    "/dev/kfd does not exist: the amdgpu kernel driver is not loaded, or \
                            was built without KFD (CONFIG_HSA_AMD), or the machine has no AMD \
                            GPU"
                    .into(),
                );
            }
            let kernel: Arc<dyn Syscalls> = Arc::new(HostKernel);
            AmdDriver::new(kernel, REAL, false).map_err(|e| e.to_string())
        })
        .clone()
        .map_err(Error::NoDevice)
}

/// Whether this build has the emulated GPU (the `emulator` feature).
#[cfg(target_os = "linux")]
const HAS_EMULATOR: bool = cfg!(feature = "emulator");

#[cfg(all(target_os = "linux", not(feature = "emulator")))]
fn emulated_driver() -> Result<Arc<AmdDriver>> {
    Err(Error::NoDevice(format!(
        "{EMULATED}: this build of hcq has no emulated GPU (its `emulator` feature is off)"
    )))
}

#[cfg(all(target_os = "linux", feature = "emulator"))]
fn emulated_driver() -> Result<Arc<AmdDriver>> {
    static DRIVER: DriverSlot = OnceLock::new();
    let emulated = hcq_emu::kernel().map_err(|e| Error::InvalidArgument(e.to_string()))?;
    DRIVER
        .get_or_init(|| {
            let kernel: Arc<dyn Syscalls> = Arc::new(emulated);
            AmdDriver::new(kernel, EMULATED, true).map_err(|e| e.to_string())
        })
        .clone()
        .map_err(Error::NoDevice)
}

/// The `N` of a device name `KIND:N` (0 when it has none, as [`crate::Device::open`] reads it).
pub(crate) fn index_of(name: &str) -> usize {
    name.split_once(':')
        .and_then(|(_, n)| n.parse().ok())
        .unwrap_or(0)
}

fn parse(name: &str) -> Result<(&str, usize)> {
    let (kind, index) = name.split_once(':').unwrap_or((name, "0"));
    let index: usize = index.parse().map_err(|_| {
        Error::NoDevice(format!(
            "{name:?}: expected NAME:INDEX, e.g. amd:0, amd-emu:0 or metal:0"
        ))
    })?;
    match kind {
        #[cfg(target_os = "linux")]
        REAL | EMULATED => Ok((kind, index)),
        #[cfg(not(target_os = "linux"))]
        REAL | EMULATED => Err(Error::NoDevice(format!(
            "{name:?}: AMD devices need Linux (KFD); this build has none"
        ))),
        #[cfg(target_os = "macos")]
        METAL => Ok((kind, index)),
        #[cfg(not(target_os = "macos"))]
        METAL => Err(Error::NoDevice(format!(
            "{name:?}: Metal devices need macOS; this build has none"
        ))),
        _ => Err(Error::NoDevice(format!(
            "{name:?}: unknown device kind {kind:?} (known: amd, amd-emu, metal)"
        ))),
    }
}

/// Opens (or returns the already open) device `name`. An opened device lives as long as the
/// process, like the driver state behind it: reopening is free and always gives the same queues.
pub(crate) fn open(name: &str) -> Result<Device> {
    let (kind, index) = parse(name)?;
    let canonical = format!("{kind}:{index}");
    let mut open = open_table();
    if let Some(backend) = open.get(&canonical) {
        return Ok(Device {
            backend: backend.clone(),
        });
    }
    let backend = open_backend(kind, index)?;
    open.insert(canonical, backend.clone());
    Ok(Device { backend })
}

fn open_table() -> std::sync::MutexGuard<'static, HashMap<String, AnyDevice>> {
    static OPEN: OnceLock<Mutex<HashMap<String, AnyDevice>>> = OnceLock::new();
    OPEN.get_or_init(Default::default)
        .lock()
        .unwrap_or_else(|e| e.into_inner())
}

/// Every device opened so far.
#[cfg(target_os = "linux")]
pub(crate) fn open_devices() -> Vec<Device> {
    open_table()
        .values()
        .map(|backend| Device {
            backend: backend.clone(),
        })
        .collect()
}

/// Opens device `index` of `kind` (a kind [`parse`] accepted on this platform).
#[cfg(target_os = "linux")]
fn open_backend(kind: &str, index: usize) -> Result<AnyDevice> {
    let driver = if kind == REAL {
        real_driver()?
    } else {
        emulated_driver()?
    };
    Ok(AnyDevice::Amd(Arc::new(AmdDevice::open(&driver, index)?)))
}

/// Opens device `index` of `kind` (a kind [`parse`] accepted on this platform).
#[cfg(target_os = "macos")]
fn open_backend(kind: &str, index: usize) -> Result<AnyDevice> {
    debug_assert_eq!(kind, METAL);
    Ok(AnyDevice::Metal(Arc::new(hcq_metal::open_system_device(
        index,
    )?)))
}

/// `HCQ_DEVICE`, else on Linux the first real AMD GPU, else `amd-emu:0`; on macOS `metal:0`.
/// On a Linux machine whose KFD is there but cannot be used (no permission on `/dev/kfd`, a
/// kernel driver too old, ...), an error saying why, rather than a quiet fall back to the
/// emulator, a thousand times slower than the GPU the user has.
pub(crate) fn default_name() -> Result<String> {
    if let Ok(name) = std::env::var("HCQ_DEVICE") {
        if !name.trim().is_empty() {
            return Ok(name.trim().to_string());
        }
    }
    platform_default_name()
}

#[cfg(target_os = "linux")]
fn platform_default_name() -> Result<String> {
    let real = real_driver().map(|d| d.gpus.len());
    choose_default(real, std::path::Path::new("/dev/kfd").exists())
}

/// The default device, given the real driver's GPU count (or why it would not open) and
/// whether `/dev/kfd` exists.
#[cfg(target_os = "linux")]
fn choose_default(real: Result<usize>, kfd_exists: bool) -> Result<String> {
    if !HAS_EMULATOR {
        return match real {
            Ok(gpus) if gpus > 0 => Ok(format!("{REAL}:0")),
            Ok(_) => Err(Error::NoDevice(
                "KFD lists no AMD GPU, and this build of hcq has no emulated GPU (its \
                 `emulator` feature is off)"
                    .into(),
            )),
            Err(e) => Err(Error::NoDevice(format!(
                "no usable AMD GPU ({e}), and this build of hcq has no emulated GPU (its \
                 `emulator` feature is off)"
            ))),
        };
    }
    match &real {
        Ok(0) => {
            tracing::info!(target: "hcq::device", "no AMD GPU in KFD's topology: the default device is the emulator")
        }
        Err(e) if !kfd_exists => {
            tracing::info!(target: "hcq::device", "no /dev/kfd ({e}): the default device is the emulator")
        }
        _ => {}
    }
    match real {
        Ok(gpus) if gpus > 0 => Ok(format!("{REAL}:0")),
        // No AMD GPU, or KFD without a GPU node: the emulator is what there is.
        Ok(_) => Ok(format!("{EMULATED}:0")),
        Err(_) if !kfd_exists => Ok(format!("{EMULATED}:0")),
        Err(e) => {
            let why = match e {
                Error::NoDevice(why) => why,
                e => e.to_string(),
            };
            Err(Error::NoDevice(format!(
                "this machine has an AMD GPU driver (/dev/kfd), but hcq cannot use it: {why}. \
                 Set HCQ_DEVICE=amd-emu:0 (or open \"amd-emu:0\") to run on the emulated GPU \
                 instead"
            )))
        }
    }
}

#[cfg(target_os = "macos")]
fn platform_default_name() -> Result<String> {
    Ok(format!("{METAL}:0"))
}

/// One line of a device listing.
#[derive(Debug, Clone)]
pub struct DeviceListing {
    /// The name [`crate::Device::open`] takes.
    pub name: String,
    /// The architecture: `gfx1100` (AMD), `metal`.
    pub arch: String,
    /// Device memory in bytes, as the topology reports it.
    pub memory: u64,
    /// Whether it is the emulated GPU.
    pub emulated: bool,
}

/// Every device hcq can open, real ones first, without opening them.
#[cfg(target_os = "linux")]
pub fn list_devices() -> Vec<DeviceListing> {
    let mut out = Vec::new();
    for (driver, emulated) in [(real_driver(), false), (emulated_driver(), true)] {
        let Ok(driver) = driver else { continue };
        for (i, g) in driver.gpus.iter().enumerate() {
            out.push(DeviceListing {
                name: format!("{}:{i}", driver.prefix),
                arch: g.arch.clone(),
                memory: g.properties.get("local_mem_size").copied().unwrap_or(0),
                emulated,
            });
        }
    }
    out
}

/// Why this machine offers no real AMD GPU (`amd:N`), or `None` when it offers one.
#[cfg(target_os = "linux")]
pub fn real_amd_unavailable() -> Option<String> {
    match real_driver() {
        Err(e) => Some(match e {
            Error::NoDevice(why) => why,
            e => e.to_string(),
        }),
        Ok(d) if d.gpus.is_empty() => {
            Some("KFD is there, but its topology lists no GPU it can run compute on".into())
        }
        Ok(_) => None,
    }
}

/// Every Metal device of this Mac, without opening them.
#[cfg(target_os = "macos")]
pub fn list_devices() -> Vec<DeviceListing> {
    use hcq_metal::MetalApi;
    let api = hcq_metal::ObjcMetal;
    api.copy_all_devices()
        .iter()
        .enumerate()
        .map(|(i, d)| DeviceListing {
            name: format!("{METAL}:{i}"),
            arch: hcq_metal::device::ARCH.to_string(),
            memory: api.recommended_max_working_set_size(d),
            emulated: false,
        })
        .collect()
}

/// What an emulated device's shader engines have executed so far ([`emulator_counters`]).
#[cfg(target_os = "linux")]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct EmulatorCounters {
    /// Kernel dispatches run.
    pub dispatches: u64,
    /// Waves run.
    pub waves: u64,
    /// Wave-instructions (one instruction of one wave, whatever its active lanes).
    pub instructions: u64,
}

/// What an emulated device's shader engines have executed so far (dispatches, waves,
/// wave-instructions), for benchmarks; `None` for real devices.
#[cfg(target_os = "linux")]
pub fn emulator_counters(device: &Device) -> Option<EmulatorCounters> {
    let AnyDevice::Amd(d) = &device.backend;
    let c = d
        .driver
        .kfd
        .kernel
        .emulator()?
        .shader_counts(d.node.gpu_id)?;
    Some(EmulatorCounters {
        dispatches: c.dispatches,
        waves: c.waves,
        instructions: c.instructions,
    })
}

/// For benchmarks: holds (`true`) or releases the engines of an emulated device. While held
/// they take no new commands and submissions queue up in the rings, so the host's side of a
/// submission can be timed without the emulator taking the cores as soon as a doorbell rings
/// (a real GPU runs on its own silicon). Waiting for work on a held device times out.
/// [`Error::Unsupported`] for real devices.
#[cfg(target_os = "linux")]
pub fn hold_emulated_engines(device: &Device, held: bool) -> Result<()> {
    let AnyDevice::Amd(d) = &device.backend;
    match d.driver.kfd.kernel.emulator() {
        Some(emulator) if emulator.hold_engines(d.node.gpu_id, held) => Ok(()),
        _ => Err(Error::Unsupported(format!(
            "{} is not an emulated device: its engines cannot be held",
            device.name()
        ))),
    }
}

#[cfg(all(test, target_os = "linux"))]
mod tests {
    use super::*;

    #[cfg(feature = "emulator")]
    #[test]
    fn the_default_device_falls_back_only_where_there_is_no_amd_gpu_driver() {
        assert_eq!(choose_default(Ok(2), true).unwrap(), "amd:0");
        assert_eq!(choose_default(Ok(0), true).unwrap(), "amd-emu:0");
        let absent = Err(Error::NoDevice("/dev/kfd does not exist".into()));
        assert_eq!(choose_default(absent, false).unwrap(), "amd-emu:0");
        let denied = Err(Error::NoDevice(
            "cannot open /dev/kfd: permission denied: the user must be in the group that owns \
             it, `render`"
                .into(),
        ));
        match choose_default(denied, true) {
            Err(Error::NoDevice(m)) => {
                assert!(
                    m.contains("permission denied") && m.contains("render"),
                    "{m}"
                );
                assert!(m.contains("HCQ_DEVICE=amd-emu:0"), "{m}");
            }
            other => panic!("{other:?}"),
        }
        let old = Err(Error::Unsupported("KFD ABI 2.0, need 1.x".into()));
        match choose_default(old, true) {
            Err(Error::NoDevice(m)) => assert!(m.contains("KFD ABI 2.0"), "{m}"),
            other => panic!("{other:?}"),
        }
    }

    /// Built without the emulator (`cargo test -p hcq --no-default-features --lib`, which the
    /// test command runs): a real GPU is still the default, and where there is none the error
    /// says the emulator is not in this build.
    #[cfg(not(feature = "emulator"))]
    #[test]
    fn without_the_emulator_there_is_no_fall_back() {
        assert_eq!(choose_default(Ok(1), true).unwrap(), "amd:0");
        let absent = Err(Error::NoDevice("/dev/kfd does not exist".into()));
        for e in [choose_default(Ok(0), true), choose_default(absent, false)] {
            match e {
                Err(Error::NoDevice(m)) => assert!(m.contains("`emulator` feature"), "{m}"),
                other => panic!("{other:?}"),
            }
        }
        match crate::Device::open("amd-emu:0") {
            Err(Error::NoDevice(m)) => assert!(m.contains("no emulated GPU"), "{m}"),
            other => panic!("{other:?}"),
        }
        assert!(list_devices().iter().all(|d| !d.emulated));
    }
}
