/* The kernel kfd_client.c dispatches. Built without HIP headers or device libraries
 * (-nogpuinc -nogpulib), so the ids come from the target builtins and the kernel attribute is
 * spelled out; the workgroup size is an argument because reading it from the dispatch packet
 * would need the dispatch pointer, which a bare PM4 dispatch does not provide. */
#define KERNEL extern "C" __attribute__((global))

/* The grid rounds n up to whole workgroups, so the bound check matters. */
KERNEL void scale_add(float *y, const float *x, float a, float b, unsigned n, unsigned block) {
  unsigned i = __builtin_amdgcn_workgroup_id_x() * block + __builtin_amdgcn_workitem_id_x();
  if (i < n) y[i] = a * x[i] + b;
}
