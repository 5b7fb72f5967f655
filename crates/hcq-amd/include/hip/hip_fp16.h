// hcq's HIP header for half precision: `__half` and its functions are in hip_runtime.h.
#include "hip_runtime.h"
