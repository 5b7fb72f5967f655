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
            AmdDriver::new(kernel, REAL, false).map_err(reason)
        })
        .clone()
        .map_err(Error::NoDevice)
}

/// Why a driver would not open, as one clause of the messages that quote it: a refusal's own
/// words, without the error kind's prefix.
fn reason(e: Error) -> String {
    match e {
        Error::NoDevice(why) | Error::Unsupported(why) => why,
        e => e.to_string(),
    }
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
            AmdDriver::new(kernel, EMULATED, true).map_err(reason)
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


/// The first real AMD GPU hcq can drive, else `amd-emu:0`. On a machine whose KFD is there but
/// cannot be used (no permission on `/dev/kfd`, a kernel driver too old, only GPUs of an
/// architecture hcq does not drive, ...), an error saying why, rather than a quiet fall back
/// to the emulator, a thousand times slower than the GPU the user has.
pub(super) fn default_name() -> Result<String> {
    let real = real_driver().map(|d| d.gpus.iter().map(|g| g.unsupported.clone()).collect());
    choose_default(real, std::path::Path::new("/dev/kfd").exists())
}

/// The real driver's GPUs as the default is chosen from them: `amd:N` is the N-th, `None` when
/// hcq can drive it, else why not; or why the driver would not open.
type RealGpus = Result<Vec<Option<String>>>;

/// What the real driver offers, for the default device and its messages.
enum Real {
    /// `amd:N`, the first GPU hcq can drive.
    Usable(usize),
    /// KFD is there and lists no GPU.
    NoGpu,
    /// KFD lists GPUs, none of which hcq can drive: each one's `amd:N: why`.
    Unusable(String),
    /// No `/dev/kfd`: why the driver did not open.
    Absent(String),
    /// `/dev/kfd` is there, but the driver would not open: why.
    Broken(String),
}

impl Real {
    fn of(real: RealGpus, kfd_exists: bool) -> Real {
        match real {
            Ok(gpus) => match gpus.iter().position(Option::is_none) {
                Some(i) => Real::Usable(i),
                None if gpus.is_empty() => Real::NoGpu,
                None => Real::Unusable(each_unusable(&gpus)),
            },
            Err(e) => {
                let why = reason(e);
                if kfd_exists {
                    Real::Broken(why)
                } else {
                    Real::Absent(why)
                }
            }
        }
    }
}

/// `amd:0: why; amd:1: why` for each GPU hcq cannot drive.
fn each_unusable(gpus: &[Option<String>]) -> String {
    gpus.iter()
        .enumerate()
        .filter_map(|(i, why)| Some(format!("{REAL}:{i}: {}", why.as_ref()?)))
        .collect::<Vec<_>>()
        .join("; ")
}

/// The default device, given the real driver's GPUs (or why it would not open) and whether
/// `/dev/kfd` exists.
fn choose_default(real: RealGpus, kfd_exists: bool) -> Result<String> {
    if let Ok(gpus) = &real {
        // Passed over, not silently: the log says why each GPU before the default is not it.
        for (i, why) in gpus.iter().enumerate() {
            let Some(why) = why else { break };
            tracing::info!(target: "hcq::device", "{REAL}:{i} is not the default device: {why}");
        }
    }
    const NONE: &str = "this build of hcq has no emulated GPU (its `emulator` feature is off)";
    const INSTEAD: &str = "Set HCQ_DEVICE=amd-emu:0 (or open \"amd-emu:0\") to run on the \
                           emulated GPU instead";
    match Real::of(real, kfd_exists) {
        Real::Usable(i) => Ok(format!("{REAL}:{i}")),
        // No AMD GPU, or KFD without a GPU node: the emulator is what there is.
        Real::NoGpu if HAS_EMULATOR => {
            tracing::info!(target: "hcq::device", "no AMD GPU in KFD's topology: the default device is the emulator");
            Ok(format!("{EMULATED}:0"))
        }
        Real::Absent(e) if HAS_EMULATOR => {
            tracing::info!(target: "hcq::device", "no /dev/kfd ({e}): the default device is the emulator");
            Ok(format!("{EMULATED}:0"))
        }
        Real::NoGpu => Err(Error::NoDevice(format!(
            "KFD lists no AMD GPU, and {NONE}"
        ))),
        Real::Absent(e) => Err(Error::NoDevice(format!(
            "no usable AMD GPU ({e}), and {NONE}"
        ))),
        Real::Unusable(each) if !HAS_EMULATOR => Err(Error::NoDevice(format!(
            "no AMD GPU hcq can drive ({each}), and {NONE}"
        ))),
        Real::Broken(e) if !HAS_EMULATOR => Err(Error::NoDevice(format!(
            "no usable AMD GPU ({e}), and {NONE}"
        ))),
        // The GPU the user has is not one hcq can use: said, not replaced by the emulator.
        Real::Unusable(each) => Err(Error::NoDevice(format!(
            "this machine has an AMD GPU driver (/dev/kfd), but hcq cannot drive the GPUs it \
             lists: {each}. {INSTEAD}"
        ))),
        Real::Broken(why) => Err(Error::NoDevice(format!(
            "this machine has an AMD GPU driver (/dev/kfd), but hcq cannot use it: {why}. \
             {INSTEAD}"
        ))),
    }
}

/// Every AMD device the drivers list, real ones first, without opening them; those hcq cannot
/// drive say why.
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
                unusable: g.unsupported.clone(),
            });
        }
    }
    out
}

/// Why this machine offers no real AMD GPU hcq can use (`amd:N`), or `None` when it offers
/// one: the driver would not open, KFD lists no GPU, or every GPU it lists is one hcq does not
/// drive.
pub fn real_amd_unavailable() -> Option<String> {
    match real_driver() {
        Err(e) => Some(reason(e)),
        Ok(d) if d.gpus.is_empty() => {
            Some("KFD is there, but its topology lists no GPU it can run compute on".into())
        }
        Ok(d) if d.gpus.iter().all(|g| g.unsupported.is_some()) => {
            let gpus: Vec<Option<String>> = d.gpus.iter().map(|g| g.unsupported.clone()).collect();
            Some(format!(
                "KFD lists {} GPU(s), none of which hcq can drive: {}",
                gpus.len(),
                each_unusable(&gpus)
            ))
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
    use hcq_amd::topology::unsupported_reason;

    /// Why `arch` cannot be driven, as the driver says it.
    fn unsupported(arch: &str) -> Option<String> {
        Some(unsupported_reason(arch).expect("unsupported"))
    }

    #[cfg(feature = "emulator")]
    #[test]
    fn the_default_device_falls_back_only_where_there_is_no_amd_gpu_driver() {
        assert_eq!(choose_default(Ok(vec![None, None]), true).unwrap(), "amd:0");
        assert_eq!(choose_default(Ok(vec![]), true).unwrap(), "amd-emu:0");
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
        let old = Err(Error::Unsupported(
            "KFD 1.3 is older than 1.4, which hcq needs for AMDKFD_IOC_ALLOC_MEMORY_OF_GPU's \
             UNCACHED flag"
                .into(),
        ));
        match choose_default(old, true) {
            Err(Error::NoDevice(m)) => {
                assert!(m.contains("KFD 1.3 is older than 1.4"), "{m}");
                assert!(m.contains("HCQ_DEVICE=amd-emu:0"), "{m}");
            }
            other => panic!("{other:?}"),
        }
    }

    /// A GPU of an architecture hcq does not drive is never the default: the first one it
    /// drives is, and where there is none the error names each GPU and why, not the emulator.
    #[cfg(feature = "emulator")]
    #[test]
    fn gpus_hcq_does_not_drive_are_passed_over_or_named_in_the_error() {
        let mixed = vec![unsupported("gfx1030"), None, unsupported("gfx90a")];
        assert_eq!(choose_default(Ok(mixed), true).unwrap(), "amd:1");
        match choose_default(Ok(vec![unsupported("gfx1030")]), true) {
            Err(Error::NoDevice(m)) => {
                assert_eq!(
                    m,
                    format!(
                        "this machine has an AMD GPU driver (/dev/kfd), but hcq cannot drive the \
                         GPUs it lists: amd:0: {}. Set HCQ_DEVICE=amd-emu:0 (or open \
                         \"amd-emu:0\") to run on the emulated GPU instead",
                        unsupported_reason("gfx1030").unwrap()
                    )
                );
                assert!(m.contains("unsupported architecture gfx1030"), "{m}");
            }
            other => panic!("{other:?}"),
        }
        match choose_default(Ok(vec![unsupported("gfx90a"), unsupported("gfx1103")]), true) {
            Err(Error::NoDevice(m)) => {
                assert!(
                    m.contains("cannot drive the GPUs it lists: amd:0: unsupported architecture gfx90a: ")
                        && m.contains("; amd:1: unsupported architecture gfx1103: "),
                    "{m}"
                );
            }
            other => panic!("{other:?}"),
        }
    }

    /// Built without the emulator (`cargo test -p hcq --no-default-features --lib`, which the
    /// test command runs): a real GPU is still the default, and where there is none the error
    /// says the emulator is not in this build.
    #[cfg(not(feature = "emulator"))]
    #[test]
    fn without_the_emulator_there_is_no_fall_back() {
        assert_eq!(choose_default(Ok(vec![None]), true).unwrap(), "amd:0");
        assert_eq!(
            choose_default(Ok(vec![unsupported("gfx1030"), None]), true).unwrap(),
            "amd:1"
        );
        let absent = Err(Error::NoDevice("/dev/kfd does not exist".into()));
        for e in [choose_default(Ok(vec![]), true), choose_default(absent, false)] {
            match e {
                Err(Error::NoDevice(m)) => assert!(m.contains("`emulator` feature"), "{m}"),
                other => panic!("{other:?}"),
            }
        }
        match choose_default(Ok(vec![unsupported("gfx1030")]), true) {
            Err(Error::NoDevice(m)) => {
                assert!(
                    m.starts_with("no AMD GPU hcq can drive (amd:0: unsupported architecture gfx1030: ")
                        && m.contains("`emulator` feature"),
                    "{m}"
                );
            }
            other => panic!("{other:?}"),
        }
        match crate::Device::open("amd-emu:0") {
            Err(Error::NoDevice(m)) => assert!(m.contains("no emulated GPU"), "{m}"),
            other => panic!("{other:?}"),
        }
        assert!(crate::list_devices().iter().all(|d| !d.emulated));
    }
}
