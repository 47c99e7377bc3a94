/* OCP MRC 1.0 controller API versioning (ocp-mrc-api.md section 4, mirrors section 2).
 * Written from the interface reference; source-compatible with the published mrc_ctl_api_ver.h.
 * Macros only. The selection/validation block runs on every inclusion (sections 2.2 and 4). */
#ifndef _MRC_CTL_API_VER_H_
#define _MRC_CTL_API_VER_H_

#define MRC_CTL_API_VER_MAJOR_OFFSET 24
#define MRC_CTL_API_VER_MINOR_OFFSET 16
#define MRC_CTL_API_VER_SUBMINOR_OFFSET 0

/* Parts are not masked: major bits 31..24, minor 23..16, sub-minor 15..0. */
#define MRC_CTL_API_VER(_major, _minor, _sub_minor)                                          \
  (((_major) << MRC_CTL_API_VER_MAJOR_OFFSET) | ((_minor) << MRC_CTL_API_VER_MINOR_OFFSET) | \
   ((_sub_minor) << MRC_CTL_API_VER_SUBMINOR_OFFSET))

#define MRC_CTL_API_VER_LATEST MRC_CTL_API_VER(0xFF, 0xFF, 0xFFFF)
#define MRC_CTL_API_CURRENT_VERSION MRC_CTL_API_VER(1, 0, 1)
#define MRC_CTL_API_LAST_SUPPORTED_VERSION MRC_CTL_API_VER(0, 0, 0)

#define MRC_CTL_VENDOR_API_CURRENT_VERSION MRC_CTL_API_VER(1, 0, 0)
#define MRC_CTL_VENDOR_API_LAST_SUPPORTED_VERSION MRC_CTL_API_VER(0, 0, 0)

#endif /* _MRC_CTL_API_VER_H_ */

/* Selection and compile-time checks (sections 2.2 and 4): outside the guard, as they run on each
 * inclusion; idempotent once MRC_CTL_API_VER_USED is settled. */
#ifndef MRC_CTL_API_VER_USED
#define MRC_CTL_API_VER_USED MRC_CTL_API_CURRENT_VERSION
#elif MRC_CTL_API_VER_USED == MRC_CTL_API_VER_LATEST
#undef MRC_CTL_API_VER_USED
#define MRC_CTL_API_VER_USED MRC_CTL_API_CURRENT_VERSION
#endif

#if MRC_CTL_API_VER_USED > MRC_CTL_API_CURRENT_VERSION
#error "MRC_CTL_API_VER_USED is newer than this mrc_ctl_api_ver.h (MRC_CTL_API_CURRENT_VERSION)"
#elif MRC_CTL_API_VER_USED < MRC_CTL_API_LAST_SUPPORTED_VERSION
#error "MRC_CTL_API_VER_USED is older than MRC_CTL_API_LAST_SUPPORTED_VERSION"
#elif MRC_CTL_API_VER_USED == MRC_CTL_API_LAST_SUPPORTED_VERSION && \
    !defined(_MRC_CTL_API_VER_USED_WARNED_)
#define _MRC_CTL_API_VER_USED_WARNED_
#warning "MRC_CTL_API_VER_USED is the last supported version and may become obsolete"
#endif

#ifndef MRC_CTL_VENDOR_API_VER_USED
#define MRC_CTL_VENDOR_API_VER_USED MRC_CTL_VENDOR_API_CURRENT_VERSION
#elif MRC_CTL_VENDOR_API_VER_USED == MRC_CTL_API_VER_LATEST
#undef MRC_CTL_VENDOR_API_VER_USED
#define MRC_CTL_VENDOR_API_VER_USED MRC_CTL_VENDOR_API_CURRENT_VERSION
#endif

#if MRC_CTL_VENDOR_API_VER_USED > MRC_CTL_VENDOR_API_CURRENT_VERSION
#error "MRC_CTL_VENDOR_API_VER_USED is newer than MRC_CTL_VENDOR_API_CURRENT_VERSION"
#elif MRC_CTL_VENDOR_API_VER_USED < MRC_CTL_VENDOR_API_LAST_SUPPORTED_VERSION
#error "MRC_CTL_VENDOR_API_VER_USED is older than MRC_CTL_VENDOR_API_LAST_SUPPORTED_VERSION"
#elif MRC_CTL_VENDOR_API_VER_USED == MRC_CTL_VENDOR_API_LAST_SUPPORTED_VERSION && \
    !defined(_MRC_CTL_VENDOR_API_VER_USED_WARNED_)
#define _MRC_CTL_VENDOR_API_VER_USED_WARNED_
#warning "MRC_CTL_VENDOR_API_VER_USED is the last supported version and may become obsolete"
#endif
