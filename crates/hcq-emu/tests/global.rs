//! The process-global kernel reads its configuration from the environment on first use.

use hcq_amd_sys::seam::{Syscalls, TOPOLOGY_NODES};

#[test]
fn the_global_kernel_is_configured_from_the_environment() {
    // This binary has a single test, so nothing else reads the variables concurrently.
    std::env::set_var("HCQ_EMU_GPUS", "3");
    std::env::set_var("HCQ_EMU_VRAM", "64M");
    std::env::set_var("HCQ_EMU_MAX_STEPS", "");
    let k = hcq_emu::kernel().unwrap();
    assert!(std::ptr::eq(k, hcq_emu::kernel().unwrap()));
    assert_eq!(k.config().gpus, 3);
    assert_eq!(k.config().vram_bytes, 64 << 20);
    assert_eq!(k.config().max_steps, 100_000_000);
    assert_eq!(k.read_dir(TOPOLOGY_NODES).unwrap().len(), 4);
    let props = k
        .read_to_string(&format!("{TOPOLOGY_NODES}/3/properties"))
        .unwrap();
    assert!(props.lines().any(|l| l == "local_mem_size 67108864"));
    assert!(props.lines().any(|l| l == "drm_render_minor 130"));
}
