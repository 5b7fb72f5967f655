//! Body of the code-object fuzz target: the libFuzzer binary in `fuzz/` and the workspace's
//! replay of every input that ever failed call it, so both exercise the same code. It returns
//! normally for any input; a panic, a hang or a huge allocation is the defect looked for.

use hcq_amd_sys::kd::{self, KernelDescriptor};
use hcq_core::Error;

use crate::program::{check_arg_layout, validate_descriptor, AlignedCodeObject, CodeObject};

/// Kernels of one object looked at, at most: a mutated symbol table may name thousands.
const KERNELS_TRIED: usize = 8;
/// Where the image is relocated to (any page-aligned device address).
const LOAD_BASE: u64 = 0x7f00_0000_0000;

/// Loads `data` as a code object the way the driver does before it touches a device: parse,
/// target check, every kernel's descriptor (from the symbols and from the metadata), the image
/// with its relocations, descriptor and argument checks. Every error must be a typed
/// code-object error.
pub fn load_code_object(data: &[u8]) {
    let aligned = AlignedCodeObject::new(data);
    let co = match CodeObject::parse(aligned.bytes()) {
        Ok(co) => co,
        Err(e) => return expect_typed(e),
    };
    assert!(co.image_size > 0 && co.image_size <= crate::program::MAX_IMAGE_BYTES);
    if let Err(e) = co.check_target("gfx1100", "amd-emu:0") {
        expect_typed(e);
    }
    let mut names = co.kernel_names();
    names.extend(co.kernels.iter().map(|k| k.name.clone()));
    names.truncate(KERNELS_TRIED);
    names.push("no such kernel".to_string());
    let image = match co.image(LOAD_BASE) {
        Ok(image) => image,
        Err(e) => return expect_typed(e),
    };
    assert_eq!(image.len() as u64, co.image_size);
    for name in &names {
        let kd_offset = match co.descriptor_offset(name) {
            Ok(at) => at,
            Err(e) => {
                expect_typed(e);
                continue;
            }
        };
        // `descriptor_offset` promises a descriptor inside the file bytes of the image.
        let bytes = usize::try_from(kd_offset)
            .ok()
            .and_then(|at| image.get(at..)?.get(..kd::KERNEL_DESCRIPTOR_SIZE))
            .expect("descriptor inside the image");
        let descriptor = KernelDescriptor::parse(bytes).expect("64 bytes");
        match validate_descriptor(name, &descriptor, kd_offset, &co) {
            Ok(entry) => assert!(co.is_code(entry, 4) && entry % 256 == 0),
            Err(e) => expect_typed(e),
        }
        if let Some(meta) = co.kernels.iter().find(|k| &k.name == name) {
            let size = meta.kernarg_segment_size.max(descriptor.kernarg_size);
            if let Err(e) = check_arg_layout(name, &meta.args, size, "fuzz") {
                expect_typed(e);
            }
        }
    }
}

/// A bad code object is reported as invalid or unsupported, never as anything else.
fn expect_typed(e: Error) {
    assert!(
        matches!(e, Error::InvalidCodeObject(_) | Error::Unsupported(_)),
        "unexpected error kind: {e:?}"
    );
    // Messages are shown to users: formatting them must work too.
    assert!(!e.to_string().is_empty());
}
