//! The fuzz smoke of the code-object loader: every kept failing input, then seeded random and
//! mutated ones, through the same function the libFuzzer target calls
//! (`scripts/fuzz.sh code_object SECONDS` runs libFuzzer on it).

#[path = "../../../fuzz/smoke.rs"]
mod smoke;

use std::time::Duration;

const DEMO: &[u8] = include_bytes!("../../hcq-cli/kernels/prebuilt/demo.gfx1100.hsaco");

#[test]
fn code_object_smoke() {
    let n = smoke::smoke(
        "code_object",
        hcq_amd::fuzzing::load_code_object,
        &[DEMO.to_vec()],
        1_000,
        10_000,
        32 << 10,
        Duration::from_secs(5),
    );
    assert!(n > 1000, "only {n} inputs ran");
}
