//! `Program::info` against LLVM: for kernels bound by each occupancy limit, with and without
//! scratch, the registers, LDS, scratch and occupancy equal what clang-19 reports for the same
//! source (`; NumVgprs:`, `; NumSgprs:`, `; ScratchSize:`, `; LDSByteSize:`, `; Occupancy:` in
//! its assembly).

#![cfg(target_os = "linux")]

use std::collections::HashMap;
use std::process::Command;

const SRC: &str = r#"
#define KERNEL extern "C" __attribute__((global))
KERNEL void small(int* x) { x[__builtin_amdgcn_workitem_id_x()] += 1; }
// Many live values: a fully unrolled 96-element accumulator per work-item.
KERNEL void many_vgprs(const float* in, float* out, int n) {
  int g = __builtin_amdgcn_workgroup_id_x() * 64 + __builtin_amdgcn_workitem_id_x();
  float acc[96];
#pragma unroll
  for (int i = 0; i < 96; i++) acc[i] = in[(g + i * 7) % n];
#pragma unroll
  for (int r = 0; r < 4; r++)
#pragma unroll
    for (int i = 0; i < 96; i++) acc[i] = acc[i] * acc[(i + r + 1) % 96] + 1.0f;
  float s = 0;
#pragma unroll
  for (int i = 0; i < 96; i++) s += acc[i];
  out[g] = s;
}
KERNEL __attribute__((amdgpu_flat_work_group_size(1, 256))) void big_lds(float* out) {
  __attribute__((shared)) float tile[10240];
  int t = __builtin_amdgcn_workitem_id_x();
  for (int i = t; i < 10240; i += 256) tile[i] = i;
  __builtin_amdgcn_s_barrier();
  out[t] = tile[(t * 37) % 10240];
}
KERNEL __attribute__((amdgpu_flat_work_group_size(1, 64))) void mid_lds(float* out) {
  __attribute__((shared)) float tile[5120];
  int t = __builtin_amdgcn_workitem_id_x();
  for (int i = t; i < 5120; i += 64) tile[i] = i;
  __builtin_amdgcn_s_barrier();
  out[t] = tile[(t * 37) % 5120];
}
KERNEL void private_array(const int* in, int* out, int n) {
  int g = __builtin_amdgcn_workitem_id_x();
  volatile int buf[300];
  for (int i = 0; i < 300; i++) buf[i] = in[(g + i) % n];
  out[g] = buf[(g * 7) % 300];
}
"#;

/// clang's `; Key: value` comments per function of SRC.
fn llvm_report() -> HashMap<String, HashMap<String, String>> {
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join("k.hip");
    std::fs::write(&src, SRC).unwrap();
    let mut args = hcq_amd::compiler::base_flags("gfx1100");
    args.extend(["-S", "-o", "-"].map(String::from));
    args.push(src.to_str().unwrap().to_string());
    let out = Command::new("clang-19").args(&args).output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let asm = String::from_utf8(out.stdout).unwrap();
    let mut report: HashMap<String, HashMap<String, String>> = HashMap::new();
    let mut function: Option<String> = None;
    for line in asm.lines() {
        if let Some((label, rest)) = line.split_once(':') {
            let rest = rest.trim_start();
            if !label.is_empty()
                && !label.starts_with(['.', ' ', '\t', ';'])
                && (rest.is_empty() || rest.starts_with(';'))
            {
                function = Some(label.to_string());
            }
        }
        if let (Some(body), Some(f)) = (line.strip_prefix("; "), &function) {
            if let Some((key, value)) = body.split_once(": ") {
                report
                    .entry(f.clone())
                    .or_default()
                    .insert(key.to_string(), value.to_string());
            }
        }
    }
    report
}

#[test]
fn program_info_matches_what_llvm_reports() {
    let dev = hcq::Device::open("amd-emu:0").unwrap();
    let lib = dev.compile(SRC).unwrap();
    let llvm = llvm_report();
    let number = |s: &str| -> u32 { s.split_whitespace().next().unwrap().parse().unwrap() };
    let mut limits = std::collections::BTreeSet::new();
    for (name, max_group) in [
        ("small", 1024),
        ("many_vgprs", 1024),
        ("big_lds", 256),
        ("mid_lds", 64),
        ("private_array", 1024),
    ] {
        let info = dev.program(&lib, name).unwrap().info().unwrap();
        let l = &llvm[name];
        assert_eq!(info.vgprs, number(&l["NumVgprs"]), "{name}: {info:?}");
        assert_eq!(info.sgprs, Some(number(&l["NumSgprs"])), "{name}");
        assert_eq!(info.static_lds, number(&l["LDSByteSize"]), "{name}");
        assert_eq!(info.scratch_per_lane, number(&l["ScratchSize"]), "{name}");
        assert_eq!(
            info.waves_per_simd,
            number(&l["Occupancy"]),
            "{name}: {info:?}"
        );
        assert_eq!(info.max_workgroup_size, max_group, "{name}");
        assert_eq!(info.wave_size, 32);
        assert!(
            info.allocated_vgprs >= info.vgprs && info.allocated_vgprs.is_multiple_of(8),
            "{name}: {info:?}"
        );
        assert_eq!(info.max_dynamic_lds, 65536 - info.static_lds, "{name}");
        limits.insert(info.occupancy_limit);
    }
    assert_eq!(
        limits.into_iter().collect::<Vec<_>>(),
        vec!["LDS", "registers", "wave slots"]
    );
    let scratch = dev.program(&lib, "private_array").unwrap().info().unwrap();
    assert!(scratch.scratch_per_lane >= 1200, "{scratch:?}");
}
