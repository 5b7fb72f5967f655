//! Device names and the sources behind them: each backend of the build (`with_backends!`)
//! has a module here that opens and lists its devices; this one parses names, keeps every
//! opened device, and picks the default.

use crate::backends::AnyDevice;
use crate::Device;
use hcq_core::{Error, Result};
use std::collections::HashMap;
use std::sync::{Mutex, OnceLock};

/// One backend's devices: the kinds of name it opens and how.
struct Source {
    kinds: &'static [&'static str],
    open: fn(&str, usize) -> Result<AnyDevice>,
    list: fn() -> Vec<DeviceListing>,
    default_name: fn() -> Result<String>,
}

macro_rules! declare_sources {
    ([ $( #[$cfg:meta] $variant:ident : $device_type:ty => $source:ident; )* ]) => {
        $( #[$cfg] mod $source; )*

        /// Every backend's source, in the list's order: one push per backend of the build,
        /// each under its cfg.
        #[allow(unused_mut, clippy::vec_init_then_push)]
        fn sources() -> Vec<Source> {
            let mut sources = Vec::new();
            $(
                #[$cfg]
                sources.push(Source {
                    kinds: $source::KINDS,
                    open: $source::open,
                    list: $source::list,
                    default_name: $source::default_name,
                });
            )*
            sources
        }
    };
}

with_backends!(declare_sources!());

#[cfg(target_os = "linux")]
pub use amd::{emulator_counters, hold_emulated_engines, real_amd_unavailable, EmulatorCounters};

/// Kinds of device other platforms have, for a clear error where this build has none.
const ELSEWHERE: &[(&str, &str)] = &[
    ("amd", "AMD devices need Linux (KFD)"),
    ("amd-emu", "the emulated AMD GPU needs Linux"),
    ("metal", "Metal devices need macOS"),
];

/// The `N` of a device name `KIND:N` (0 when it has none, as [`crate::Device::open`] reads it).
pub(crate) fn index_of(name: &str) -> usize {
    name.split_once(':')
        .and_then(|(_, n)| n.parse().ok())
        .unwrap_or(0)
}

/// The source, kind and index `name` names.
fn parse(name: &str) -> Result<(Source, &str, usize)> {
    let (kind, index) = name.split_once(':').unwrap_or((name, "0"));
    let index: usize = index.parse().map_err(|_| {
        Error::NoDevice(format!(
            "{name:?}: expected NAME:INDEX, e.g. amd:0, amd-emu:0 or metal:0"
        ))
    })?;
    let sources = sources();
    let known: Vec<&str> = sources.iter().flat_map(|s| s.kinds).copied().collect();
    if let Some(source) = sources.into_iter().find(|s| s.kinds.contains(&kind)) {
        return Ok((source, kind, index));
    }
    if let Some((_, why)) = ELSEWHERE.iter().find(|(k, _)| *k == kind) {
        return Err(Error::NoDevice(format!(
            "{name:?}: {why}; this build has none"
        )));
    }
    Err(Error::NoDevice(format!(
        "{name:?}: unknown device kind {kind:?} (known: {})",
        known.join(", ")
    )))
}

/// Opens (or returns the already open) device `name`. An opened device lives as long as the
/// process, like the driver state behind it: reopening is free and always gives the same queues.
pub(crate) fn open(name: &str) -> Result<Device> {
    let (source, kind, index) = parse(name)?;
    let canonical = format!("{kind}:{index}");
    let mut open = open_table();
    if let Some(backend) = open.get(&canonical) {
        return Ok(Device {
            backend: backend.clone(),
        });
    }
    let backend = (source.open)(kind, index)?;
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

/// `HCQ_DEVICE`, else the first backend's default: on Linux the first real AMD GPU, else
/// `amd-emu:0` (or why the GPU the machine has cannot be used); on macOS `metal:0`.
pub(crate) fn default_name() -> Result<String> {
    if let Ok(name) = std::env::var("HCQ_DEVICE") {
        if !name.trim().is_empty() {
            return Ok(name.trim().to_string());
        }
    }
    match sources().first() {
        Some(source) => (source.default_name)(),
        None => Err(Error::NoDevice(
            "this build of hcq has no backend for this platform".into(),
        )),
    }
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
    /// Why hcq cannot use this device although the system lists it (an AMD GPU of an
    /// architecture hcq does not drive), or `None` when it can. Opening it is an error saying
    /// the same.
    pub unusable: Option<String>,
}

/// Every device the system lists, without opening them, each backend's in the list's order
/// (on Linux, real AMD GPUs before emulated ones); those hcq cannot use say why
/// ([`DeviceListing::unusable`]).
pub fn list_devices() -> Vec<DeviceListing> {
    sources().iter().flat_map(|s| (s.list)()).collect()
}
