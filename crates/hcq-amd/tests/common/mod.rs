//! What several driver tests share.

use hcq_amd::AmdDevice;
use hcq_core::Arg;

/// The prebuilt demo code object (gfx1100), whose `add_i32` kernel the tests run.
pub const DEMO: &[u8] = include_bytes!("../../../hcq-cli/kernels/prebuilt/demo.gfx1100.hsaco");

/// Runs the demo's `add_i32` on `dev` over `x` and `y` (same length) and checks every element
/// of the result against the host's wrapping sum.
pub fn check_add_i32(dev: &AmdDevice, x: &[i32], y: &[i32]) {
    assert_eq!(x.len(), y.len());
    let n = x.len();
    let prg = dev.load_program(DEMO, "add_i32").unwrap();
    let (a, b, c) = (
        dev.alloc(4 * n as u64).unwrap(),
        dev.alloc(4 * n as u64).unwrap(),
        dev.alloc(4 * n as u64).unwrap(),
    );
    let bytes = |v: &[i32]| v.iter().flat_map(|e| e.to_le_bytes()).collect::<Vec<u8>>();
    dev.copy_in(&a, 0, &bytes(x)).unwrap();
    dev.copy_in(&b, 0, &bytes(y)).unwrap();
    let args = [
        Arg::Buffer(&c),
        Arg::Buffer(&a),
        Arg::Buffer(&b),
        Arg::I32(n as i32),
    ];
    dev.launch(
        &prg,
        &args,
        |b| Ok(b.gpu_address()),
        [(n as u32).div_ceil(64), 1, 1],
        [64, 1, 1],
        false,
    )
    .unwrap();
    let mut out = vec![0u8; 4 * n];
    dev.copy_out(&mut out, &c, 0).unwrap();
    for i in 0..n {
        let got = i32::from_le_bytes(out[4 * i..4 * i + 4].try_into().unwrap());
        assert_eq!(got, x[i].wrapping_add(y[i]), "element {i}");
    }
}
