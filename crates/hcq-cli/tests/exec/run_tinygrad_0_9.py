# Runs a script with tinygrad 0.9.0's AMD backend (AMD=1), its HIP compile step (ROCm's comgr,
# which cannot be installed here) replaced by clang-19: `python run_tinygrad_0_9.py SCRIPT`.
# Everything from AMDDevice down is tinygrad's own code, unmodified.
#
# comgr compiled tinygrad's kernels against ROCm's device libraries; the few functions its
# renderer declares (__ockl_get_*_id/size, __ocml_{fmax,exp2,log2,sqrt,sin}) are defined here
# with clang's AMDGPU builtins instead. tinygrad 0.9.0 checks a kernel's argument size against
# its own arguments, so a kernel must not need hidden arguments: only __ockl_get_local_size reads
# them (the workgroup size), and none of the kernels the test suite runs calls it.
import hashlib, os, subprocess, sys, tempfile, types, runpy

DEVICE_FUNCTIONS = r'''
extern "C" {
__attribute__((device)) size_t __ockl_get_local_id(unsigned int d) {
  return d == 0 ? __builtin_amdgcn_workitem_id_x() : d == 1 ? __builtin_amdgcn_workitem_id_y() : __builtin_amdgcn_workitem_id_z(); }
__attribute__((device)) size_t __ockl_get_group_id(unsigned int d) {
  return d == 0 ? __builtin_amdgcn_workgroup_id_x() : d == 1 ? __builtin_amdgcn_workgroup_id_y() : __builtin_amdgcn_workgroup_id_z(); }
__attribute__((device)) size_t __ockl_get_local_size(unsigned int d) {
  return d == 0 ? __builtin_amdgcn_workgroup_size_x() : d == 1 ? __builtin_amdgcn_workgroup_size_y() : __builtin_amdgcn_workgroup_size_z(); }
__attribute__((device)) float __ocml_fmax_f32(float a, float b) { return __builtin_fmaxf(a, b); }
__attribute__((device)) float __ocml_exp2_f32(float a) { return __builtin_amdgcn_exp2f(a); }
__attribute__((device)) float __ocml_log2_f32(float a) { return __builtin_amdgcn_logf(a); }
__attribute__((device)) float __ocml_sqrt_f32(float a) { return __builtin_sqrtf(a); }
__attribute__((device)) float __ocml_sin_f32(float a) { return __builtin_amdgcn_sinf(a * 0.15915494309189535f); }
__attribute__((device)) _Float16 __ocml_fmax_f16(_Float16 a, _Float16 b) { return a > b ? a : b; }
__attribute__((device)) _Float16 __ocml_exp2_f16(_Float16 a) { return (_Float16)__builtin_amdgcn_exp2f((float)a); }
__attribute__((device)) _Float16 __ocml_log2_f16(_Float16 a) { return (_Float16)__builtin_amdgcn_logf((float)a); }
__attribute__((device)) _Float16 __ocml_sqrt_f16(_Float16 a) { return (_Float16)__builtin_sqrtf((float)a); }
__attribute__((device)) _Float16 __ocml_sin_f16(_Float16 a) { return (_Float16)__builtin_amdgcn_sinf((float)a * 0.15915494309189535f); }
}
'''

def compile_hip(src: str, arch="gfx1100") -> bytes:
  with tempfile.TemporaryDirectory() as d:
    with open(os.path.join(d, "k.hip"), "w") as f: f.write(src + DEVICE_FUNCTIONS)
    out = os.path.join(d, "k.hsaco")
    subprocess.run(["clang-19", "-x", "hip", f"--offload-arch={arch}", "-nogpulib", "-nogpuinc", "-O3", "-mcumode",
                    "--cuda-device-only", "--no-gpu-bundle-output", "-std=c++14", "-Wno-unused-command-line-argument",
                    "-c", os.path.join(d, "k.hip"), "-o", out], check=True, capture_output=True)
    with open(out, "rb") as f: obj = f.read()
  # Kept for the check scripts/test.sh runs after the suite: every code object the suite builds
  # must disassemble with hcq disasm as with llvm-objdump.
  kept = os.environ.get("HCQ_TEST_OBJECTS")
  if kept:
    os.makedirs(kept, exist_ok=True)
    with open(os.path.join(kept, f"tinygrad-0.9-{hashlib.sha256(obj).hexdigest()[:16]}.hsaco"), "wb") as f: f.write(obj)
  return obj

sys.modules["tinygrad.runtime.driver.hip_comgr"] = types.SimpleNamespace(compile_hip=compile_hip)
sys.argv = sys.argv[1:]
runpy.run_path(sys.argv[0], run_name="__main__")
