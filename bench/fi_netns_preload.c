// libmrc-fi-netns.so: puts an MPI rank's libfabric traffic on one host of a namespace fabric,
// for scripts/bench-fi.sh, which compares libfabric providers through faults on mrc-fabric.
//
// mpirun starts every rank in the root namespace, and a rank cannot start inside a host's
// namespace: Open MPI's PMIx client reaches its local server over loopback TCP, which the
// fabric's namespaces do not share. So a rank starts in the root namespace (LD_PRELOAD of this
// library), PMIx connects, and at the rank's first fi_getinfo (Open MPI's mtl ofi calls it in
// MPI_Init, after PMIx is up) this library moves the calling thread into MRC_FI_NETNS. Every
// socket a provider opens from then on (and every thread it starts) belongs to that namespace;
// PMIx keeps its connection in the root namespace.
//
// MRC_FI_SRC_ADDR (an IPv6 address) keeps only the fi_info entries whose source address is it:
// the tcp and udp providers list every address of every interface and Open MPI takes the first,
// a link-local one the fabric does not route.
//
// The mrc provider needs none of this (FI_MRC_FABRIC opens its sockets in the host's namespace
// by itself); the library treats every provider alike so that the comparison is even.
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <dlfcn.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <rdma/fabric.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

typedef int (*getinfo_fn)(uint32_t, const char*, const char*, uint64_t, const struct fi_info*,
                          struct fi_info**);

static void enter_netns(void) {
  static int entered;
  if (entered) return;
  entered = 1;
  const char* ns = getenv("MRC_FI_NETNS");
  if (!ns || !*ns) return;
  char path[256];
  snprintf(path, sizeof path, "/run/netns/%s", ns);
  const int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0 || setns(fd, CLONE_NEWNET) != 0) {
    fprintf(stderr, "libmrc-fi-netns: cannot enter %s: ", path);
    perror("");
    abort();
  }
  close(fd);
}

// True when `info` has no source address or has exactly `want`.
static int source_matches(const struct fi_info* info, const struct in6_addr* want) {
  if (!info->src_addr || info->addr_format != FI_SOCKADDR_IN6) return 1;
  const struct sockaddr_in6* a = (const struct sockaddr_in6*)info->src_addr;
  return memcmp(&a->sin6_addr, want, sizeof *want) == 0;
}

// Open MPI's mtl ofi registers its parameters (fi_getparams) before its first fi_getinfo, and
// that first call initialises libfabric, whose tcp provider lists the interfaces then: the
// namespace is entered there already.
int fi_getparams(struct fi_param** params, int* count) {
  enter_netns();
  int (*real)(struct fi_param**, int*) =
      (int (*)(struct fi_param**, int*))dlsym(RTLD_NEXT, "fi_getparams");
  return real ? real(params, count) : -FI_ENOSYS;
}

int fi_getinfo(uint32_t version, const char* node, const char* service, uint64_t flags,
               const struct fi_info* hints, struct fi_info** info) {
  enter_netns();
  getinfo_fn real = (getinfo_fn)dlsym(RTLD_NEXT, "fi_getinfo");
  if (!real) return -FI_ENOSYS;
  const int rc = real(version, node, service, flags, hints, info);
  const char* src = getenv("MRC_FI_SRC_ADDR");
  struct in6_addr want;
  if (rc != 0 || !src || !*src || inet_pton(AF_INET6, src, &want) != 1) return rc;
  struct fi_info *kept = NULL, **tail = &kept;
  for (struct fi_info* cur = *info; cur;) {
    struct fi_info* next = cur->next;
    cur->next = NULL;
    if (source_matches(cur, &want)) {
      *tail = cur;
      tail = &cur->next;
    } else {
      fi_freeinfo(cur);
    }
    cur = next;
  }
  *info = kept;
  return kept ? 0 : -FI_ENODATA;
}
