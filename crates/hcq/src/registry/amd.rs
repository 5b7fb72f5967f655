//! The AMD devices: `amd:N` through the machine's KFD and `amd-emu:N` through the emulated one
//! (the `emulator` feature), each driver opened once per process; the default device among
//! them; the emulator's hooks for benchmarks.

use super::DeviceListing;
use crate::backends::AnyDevice;
use crate::Device;
use hcq_amd::{AmdDevice, AmdDriver};
use hcq_amd_sys::seam::{HostKernel, Syscalls};
use hcq_core::{Error, Result};
use std::sync::{Arc, OnceLock};

const REAL: &str = "amd";
const EMULATED: &str = "amd-emu";

/// The device kinds this source opens.
pub(super) const KINDS: &[&str] = &[REAL, EMULATED];

type DriverSlot = OnceLock<std::result::Result<Arc<AmdDriver>, String>>;

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
const HAS_EMULATOR: bool = cfg!(feature = "emulator");

#[cfg(not(feature = "emulator"))]
fn emulated_driver() -> Result<Arc<AmdDriver>> {
    Err(Error::NoDevice(format!(
        "{EMULATED}: this build of hcq has no emulated GPU (its `emulator` feature is off)"
    )))
}

#[cfg(feature = "emulator")]
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

/// Opens device `index` of `kind` (one of [`KINDS`]).
pub(super) fn open(kind: &str, index: usize) -> Result<AnyDevice> {
    let driver = if kind == REAL {
        real_driver()?
    } else {
        emulated_driver()?
    };
    Ok(AnyDevice::Amd(Arc::new(AmdDevice::open(&driver, index)?)))
}


/// The first real AMD GPU, else `amd-emu:0`. On a machine whose KFD is there but cannot be
/// used (no permission on `/dev/kfd`, a kernel driver too old, ...), an error saying why,
/// rather than a quiet fall back to the emulator, a thousand times slower than the GPU the
/// user has.
pub(super) fn default_name() -> Result<String> {
    let real = real_driver().map(|d| d.gpus.len());
    choose_default(real, std::path::Path::new("/dev/kfd").exists())
}

/// The default device, given the real driver's GPU count (or why it would not open) and
/// whether `/dev/kfd` exists.
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

/// Every AMD device hcq can open, real ones first, without opening them.
pub(super) fn list() -> Vec<DeviceListing> {
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

/// What an emulated device's shader engines have executed so far ([`emulator_counters`]).
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

#[cfg(test)]
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
        assert!(crate::list_devices().iter().all(|d| !d.emulated));
    }
}
