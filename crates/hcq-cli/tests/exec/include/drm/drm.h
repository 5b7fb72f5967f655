/* What <linux/kfd_ioctl.h> needs from <drm/drm.h>, which Debian ships only with libdrm-dev:
 * the kernel's fixed-width types. */
#ifndef HCQ_TEST_DRM_H
#define HCQ_TEST_DRM_H
#include <linux/types.h>
#endif
