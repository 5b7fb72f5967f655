//! What the topics share: running the binary, and the `axpb` kernel with its float output.

use std::process::{Command, Output};

pub fn hcq(args: &[&str], env: &[(&str, &str)]) -> Output {
    let mut c = Command::new(env!("CARGO_BIN_EXE_hcq"));
    c.args(args).env_remove("HCQ_DEVICE");
    for (k, v) in env {
        c.env(k, v);
    }
    c.output().expect("hcq runs")
}

pub fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

pub const RUN_SRC: &str = r#"
extern "C" __attribute__((global)) void axpb(float* y, const float* x, float a, float b, int n) {
  int i = __builtin_amdgcn_workgroup_id_x() * __builtin_amdgcn_workgroup_size_x() + __builtin_amdgcn_workitem_id_x();
  if (i < n) y[i] = a * x[i] + b;
}
"#;

pub fn floats(bytes: &[u8]) -> Vec<f32> {
    bytes
        .chunks_exact(4)
        .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
        .collect()
}
