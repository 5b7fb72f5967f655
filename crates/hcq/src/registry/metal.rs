//! The Metal devices of this Mac: `metal:N`, the N-th of `MTLCopyAllDevices()`.

use super::DeviceListing;
use crate::backends::AnyDevice;
use hcq_core::Result;
use hcq_metal::MetalApi;
use std::sync::Arc;

const METAL: &str = "metal";

/// The device kinds this source opens.
pub(super) const KINDS: &[&str] = &[METAL];

/// Opens device `index` of `kind` (one of [`KINDS`]).
pub(super) fn open(kind: &str, index: usize) -> Result<AnyDevice> {
    debug_assert_eq!(kind, METAL);
    Ok(AnyDevice::Metal(Arc::new(hcq_metal::open_system_device(
        index,
    )?)))
}

/// `metal:0`.
pub(super) fn default_name() -> Result<String> {
    Ok(format!("{METAL}:0"))
}

/// Every Metal device of this Mac, without opening them.
pub(super) fn list() -> Vec<DeviceListing> {
    let api = hcq_metal::ObjcMetal;
    api.copy_all_devices()
        .iter()
        .enumerate()
        .map(|(i, d)| DeviceListing {
            name: format!("{METAL}:{i}"),
            arch: hcq_metal::device::ARCH.to_string(),
            memory: api.recommended_max_working_set_size(d),
            emulated: false,
            unusable: None,
        })
        .collect()
}
