/* An MRC application's first steps, for the link-order test (check.sh, docs/c-api.md "Link
 * order"): list the RDMA devices, look for mrc_soft0, and say which library the
 * ibv_get_device_list it calls comes from. tests/CMakeLists.txt builds it twice, linked with
 * -lmrc before -libverbs and after it.
 * Prints "resolved <library path>", one "device <name>" line per device and "found mrc_soft0" or
 * "no mrc_soft0" (after "listing failed: <error>" when the list is NULL); exit status 0 either
 * way: the checks are check.sh's. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <mrc.h>
#include <stdio.h>
#include <string.h>

int main(void) {
  /* Makes libmrc a library the program needs whatever the link order, as any MRC
   * application's mrc_* calls do. */
  uint32_t version = 0, last = 0, vendor = 0, last_vendor = 0;
  mrc_query_version(&version, &last, &vendor, &last_vendor);

  /* The address the program calls (a position-independent executable takes it from its GOT,
   * where the dynamic linker bound it), not a fresh lookup. */
  struct ibv_device** (*const list_devices)(int*) = &ibv_get_device_list;
  Dl_info info;
  memset(&info, 0, sizeof info);
  if (!dladdr((void*)list_devices, &info) || !info.dli_fname) {
    printf("resolved ?\n");
  } else {
    printf("resolved %s\n", info.dli_fname);
  }

  int n = 0;
  struct ibv_device** devices = list_devices(&n);
  if (!devices) {  /* libibverbs without RDMA devices or kernel support: ENOSYS */
    printf("listing failed: %s\nno mrc_soft0\n", strerror(errno));
    return 0;
  }
  int found = 0;
  for (int i = 0; i < n; ++i) {
    const char* name = ibv_get_device_name(devices[i]);
    printf("device %s\n", name ? name : "?");
    if (name && strcmp(name, "mrc_soft0") == 0) found = 1;
  }
  ibv_free_device_list(devices);
  printf(found ? "found mrc_soft0\n" : "no mrc_soft0\n");
  return 0;
}
