// hcq's HIP headers cover device code only; kernels that include the host API's header for
// its types compile against hip_runtime.h.
#include "hip_runtime.h"
