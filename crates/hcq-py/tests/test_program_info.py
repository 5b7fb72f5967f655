"""Program.info against what clang-19 itself reports for the same kernels."""

import re
import subprocess

import hcq

SRC = r"""
#define KERNEL extern "C" __attribute__((global))
KERNEL void small(int* x) { x[__builtin_amdgcn_workitem_id_x()] += 1; }
KERNEL __attribute__((amdgpu_flat_work_group_size(1, 256))) void big_lds(float* out) {
  __attribute__((shared)) float tile[10240];
  int t = __builtin_amdgcn_workitem_id_x();
  for (int i = t; i < 10240; i += 256) tile[i] = i;
  __builtin_amdgcn_s_barrier();
  out[t] = tile[(t * 37) % 10240];
}
KERNEL void private_array(const int* in, int* out, int n) {
  int g = __builtin_amdgcn_workitem_id_x();
  volatile int buf[300];
  for (int i = 0; i < 300; i++) buf[i] = in[(g + i) % n];
  out[g] = buf[(g * 7) % 300];
}
"""

# The flags hcq compiles with (hcq_amd::compiler::base_flags).
FLAGS = ["-x", "hip", "--cuda-device-only", "--no-gpu-bundle-output", "-nogpulib",
         "-nogpuinc", "-O3", "-fno-exceptions", "--offload-arch=gfx1100"]


def llvm_report(tmp_path):
    src = tmp_path / "k.hip"
    src.write_text(SRC)
    asm = subprocess.run(["clang-19", *FLAGS, "-S", "-o", "-", str(src)], check=True,
                         capture_output=True, text=True).stdout
    report, function = {}, None
    for line in asm.splitlines():
        m = re.match(r"^([A-Za-z_]\w*):\s*(;.*)?$", line)
        if m:
            function = m.group(1)
        m = re.match(r"^; (\w+): (\d+)", line)
        if m and function:
            report.setdefault(function, {})[m.group(1)] = int(m.group(2))
    return report


def test_program_info_matches_llvm(dev, tmp_path):
    llvm = llvm_report(tmp_path)
    code = dev.compile(SRC)
    for name, max_group in [("small", 1024), ("big_lds", 256), ("private_array", 1024)]:
        info = dev.program(code, name).info
        want = llvm[name]
        assert isinstance(info, hcq.ProgramInfo)
        assert info.vgprs == want["NumVgprs"], (name, info)
        assert info.sgprs == want["NumSgprs"], (name, info)
        assert info.static_lds == want["LDSByteSize"], (name, info)
        assert info.scratch_per_lane == want["ScratchSize"], (name, info)
        assert info.waves_per_simd == want["Occupancy"], (name, info)
        assert info.max_workgroup_size == max_group
        assert info.wave_size == 32
        assert info.max_dynamic_lds == 65536 - info.static_lds
    assert dev.program(code, "big_lds").info.occupancy_limit == "LDS"
    assert dev.program(code, "small").info.occupancy_limit == "wave slots"
