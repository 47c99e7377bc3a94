/* Compiled as C11 for an application and controller declaring API 1.0.0: the _ex functions
 * are not declared and struct mrc_ctl_ev_event has no `state` (48 bytes; sections 2.2, 4, 5.3). */
#define MRC_API_VER_USED MRC_API_VER(1, 0, 0)
#define MRC_CTL_API_VER_USED MRC_CTL_API_VER(1, 0, 0)
#include <mrc_ctl.h>
#include <stddef.h>

_Static_assert(sizeof(struct mrc_ctl_ev_event) == 48, "1.0.0 EV event layout");
_Static_assert(offsetof(struct mrc_ctl_ev_event, drop_count) == 44, "drop_count");
#if MRC_API_VER_USED != 0x01000000 || MRC_CTL_API_VER_USED != 0x01000000
#error "version selection"
#endif

/* Declaring our own mrc_query_device_ex with another signature would clash if the header had
 * declared it; it must not have. */
static int mrc_query_device_ex(void) { return 7; }
static int mrc_ctl_query_device_ex(void) { return 8; }
int mrc_headers_c11_v100(void);
int mrc_headers_c11_v100(void) { return mrc_query_device_ex() + mrc_ctl_query_device_ex(); }
