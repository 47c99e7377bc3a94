/* OCP MRC 1.0 application API versioning (ocp-mrc-api.md section 2).
 * Written from the interface reference; source-compatible with the published mrc_api_ver.h.
 * Macros only. The selection/validation block runs on every inclusion (section 2.2). */
#ifndef _MRC_API_VER_H_
#define _MRC_API_VER_H_

#define MRC_API_VER_MAJOR_OFFSET 24
#define MRC_API_VER_MINOR_OFFSET 16
#define MRC_API_VER_SUBMINOR_OFFSET 0

/* Parts are not masked: major bits 31..24, minor 23..16, sub-minor 15..0. */
#define MRC_API_VER(_major, _minor, _sub_minor)                                      \
  (((_major) << MRC_API_VER_MAJOR_OFFSET) | ((_minor) << MRC_API_VER_MINOR_OFFSET) | \
   ((_sub_minor) << MRC_API_VER_SUBMINOR_OFFSET))

#define MRC_API_VER_LATEST MRC_API_VER(0xFF, 0xFF, 0xFFFF)
#define MRC_API_CURRENT_VERSION MRC_API_VER(1, 0, 1)
#define MRC_API_LAST_SUPPORTED_VERSION MRC_API_VER(0, 0, 0)

#define MRC_VENDOR_API_CURRENT_VERSION MRC_API_VER(1, 0, 0)
#define MRC_VENDOR_API_LAST_SUPPORTED_VERSION MRC_API_VER(0, 0, 0)

#endif /* _MRC_API_VER_H_ */

/* Selection and compile-time checks (section 2.2): outside the guard, as they run on each
 * inclusion; idempotent once MRC_API_VER_USED is settled. */
#ifndef MRC_API_VER_USED
#define MRC_API_VER_USED MRC_API_CURRENT_VERSION
#elif MRC_API_VER_USED == MRC_API_VER_LATEST
#undef MRC_API_VER_USED
#define MRC_API_VER_USED MRC_API_CURRENT_VERSION
#endif

#if MRC_API_VER_USED > MRC_API_CURRENT_VERSION
#error "MRC_API_VER_USED is newer than this mrc_api_ver.h (MRC_API_CURRENT_VERSION)"
#elif MRC_API_VER_USED < MRC_API_LAST_SUPPORTED_VERSION
#error "MRC_API_VER_USED is older than MRC_API_LAST_SUPPORTED_VERSION"
#elif MRC_API_VER_USED == MRC_API_LAST_SUPPORTED_VERSION && !defined(_MRC_API_VER_USED_WARNED_)
#define _MRC_API_VER_USED_WARNED_
#warning "MRC_API_VER_USED is the last supported version and may become obsolete"
#endif

#ifndef MRC_VENDOR_API_VER_USED
#define MRC_VENDOR_API_VER_USED MRC_VENDOR_API_CURRENT_VERSION
#elif MRC_VENDOR_API_VER_USED == MRC_API_VER_LATEST
#undef MRC_VENDOR_API_VER_USED
#define MRC_VENDOR_API_VER_USED MRC_VENDOR_API_CURRENT_VERSION
#endif

#if MRC_VENDOR_API_VER_USED > MRC_VENDOR_API_CURRENT_VERSION
#error "MRC_VENDOR_API_VER_USED is newer than MRC_VENDOR_API_CURRENT_VERSION"
#elif MRC_VENDOR_API_VER_USED < MRC_VENDOR_API_LAST_SUPPORTED_VERSION
#error "MRC_VENDOR_API_VER_USED is older than MRC_VENDOR_API_LAST_SUPPORTED_VERSION"
#elif MRC_VENDOR_API_VER_USED == MRC_VENDOR_API_LAST_SUPPORTED_VERSION && \
    !defined(_MRC_VENDOR_API_VER_USED_WARNED_)
#define _MRC_VENDOR_API_VER_USED_WARNED_
#warning "MRC_VENDOR_API_VER_USED is the last supported version and may become obsolete"
#endif
