/* Vendor extension of the MRC software device (libmrc.so): what its data path counted.
 *
 * Not part of OCP MRC 1.0. The names are the Linux driver's (docs/linux-driver.md, "Security"),
 * the same as mrc-perf --json reports: plane<p>_tx_bytes, ..., retransmits, and drop_<reason>
 * for every reason a received datagram was not used (drop_wrong_peer, drop_bad_rkey, ...) or
 * never read (drop_kernel_rcvbuf: the kernel's receive-buffer drops for the device's sockets).
 */
#ifndef MRC_SOFT_H
#define MRC_SOFT_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

struct ibv_context;

#define MRC_SOFT_COUNTER_NAME_MAX 48

struct mrc_soft_counter {
  char name[MRC_SOFT_COUNTER_NAME_MAX]; /* NUL-terminated */
  uint64_t value;
};

/* Fills up to `max` counters of the device behind `context` into `out` (which may be NULL
 * when `max` is 0). Returns how many the device has (more than `max`: call again with room
 * for all), or -1 with errno: EINVAL (`context` NULL, `max` negative, `out` NULL with `max`
 * above 0), EOPNOTSUPP (not an MRC software device). */
int mrc_soft_query_counters(struct ibv_context* context, struct mrc_soft_counter* out, int max);

#ifdef __cplusplus
}
#endif

#endif /* MRC_SOFT_H */
