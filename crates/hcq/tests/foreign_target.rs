//! A code object built for another GPU target is refused at load with both targets named,
//! instead of running another ISA's machine code.

use hcq::{Device, Error};

const SRC: &str = r#"
extern "C" __attribute__((global)) void one(int* x) { *x = 1; }
"#;

#[test]
fn code_objects_for_other_targets_are_refused() {
    let dev = Device::open("amd-emu:0").unwrap();
    for arch in ["gfx1030", "gfx90a", "gfx1200", "gfx1101"] {
        let lib = hcq::compile_hip(SRC, arch).expect("clang-19 compiles for the target");
        let e = dev.program(&lib, "one").unwrap_err();
        assert!(matches!(e, Error::InvalidCodeObject(_)), "{arch}: {e}");
        let text = e.to_string();
        assert!(text.contains(arch) && text.contains("gfx1100"), "{text}");
    }
    let own = hcq::compile_hip(SRC, "gfx1100").unwrap();
    dev.program(&own, "one").expect("its own target loads");
}
