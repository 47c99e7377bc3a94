/*
 * nccl_hints.c - ask the "mrc" libfabric provider for the fi_getinfo hints
 * that the aws-ofi-nccl NCCL net plugin (github.com/aws/aws-ofi-nccl) uses.
 *
 * Hint sets were transcribed by hand from the plugin's sources:
 *   sendrecv protocol: src/nccl_ofi_sendrecv.cpp, sendrecv_get_hints() and
 *                      nccl_net_ofi_sendrecv_init() (API 1.20 if DMA-BUF is
 *                      viable, then 1.18, then 1.6 with HMEM; last 1.6 host-only)
 *   rdma protocol:     src/nccl_ofi_rdma.cpp, get_hints() and
 *                      nccl_net_ofi_rdma_init() (API 1.20 or 1.18, always HMEM)
 *   fi_getinfo call:   src/nccl_ofi_ofiutils.cpp, nccl_ofi_ofiutils_get_providers()
 * Plugin parameter defaults assumed: OFI_NCCL_MR_KEY_SIZE=2,
 * OFI_NCCL_PROGRESS_MODEL=UNSPEC, OFI_NCCL_CUDA_FLUSH_ENABLE=0 (so the
 * sendrecv HMEM variant also asks for FI_RMA | FI_READ).
 *
 * For every variant: build the hints, restrict them to prov_name "mrc", call
 * fi_getinfo and print "<protocol> <variant>: match" or
 * "<protocol> <variant>: no match (<reason>)". The reason comes from retrying
 * with one field relaxed at a time; if no single relaxation suffices, a minimal
 * combination of relaxations is reported.
 *
 * Exit status: 0 if "sendrecv host@1.6" (the plugin's host-memory fallback)
 * matches, 1 otherwise.  -v dumps the hints and the returned fi_info to stderr.
 *
 * Built as build/bin/test_fi_nccl_hints (ctest fi_nccl_hints).
 * Run:   FI_PROVIDER_PATH=build/lib build/bin/test_fi_nccl_hints [-v]
 */
#define _POSIX_C_SOURCE 200809L

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <rdma/fabric.h>
#include <rdma/fi_errno.h>

#define PROV_NAME "mrc"

static bool verbose;

/* Everything aws-ofi-nccl sets in its hints; all else stays as fi_allocinfo() left it. */
struct spec {
  uint32_t version;
  uint64_t caps;
  uint64_t mode;
  enum fi_ep_type ep_type;
  uint64_t mr_mode;
  size_t mr_key_size;
  size_t cq_data_size;
  enum fi_threading threading;
  enum fi_progress control_progress;
  enum fi_progress data_progress;
  uint64_t tx_msg_order;
  uint64_t rx_msg_order;
};

struct variant {
  const char* protocol;
  const char* name;
  bool decides_exit; /* the one whose match decides the exit status */
  struct spec spec;
};

/* ---- hint sets -------------------------------------------------------------- */

static struct spec sendrecv_spec(uint32_t version, bool hmem) {
  struct spec s = {0};

  s.version = version;
  s.caps = FI_LOCAL_COMM | FI_REMOTE_COMM | FI_TAGGED | FI_MSG;
  s.mr_mode = FI_MR_LOCAL | FI_MR_ENDPOINT;
  if (hmem) {
    /* cuda_flush is off by default, so RMA reads are requested too */
    s.caps |= FI_HMEM | FI_RMA | FI_READ;
    s.mr_mode |= FI_MR_HMEM;
  }
  s.mr_mode |= FI_MR_VIRT_ADDR | FI_MR_ALLOCATED | FI_MR_PROV_KEY;
  s.mr_key_size = 2;
  s.mode = FI_CONTEXT | FI_CONTEXT2;
  s.ep_type = FI_EP_RDM;
  s.threading = FI_THREAD_SAFE;
  s.control_progress = FI_PROGRESS_UNSPEC;
  s.data_progress = FI_PROGRESS_UNSPEC;
  s.tx_msg_order = FI_ORDER_SAS;
  s.rx_msg_order = FI_ORDER_SAS;
  return s;
}

static struct spec rdma_spec(uint32_t version, bool hmem) {
  struct spec s = {0};

  s.version = version;
  s.caps = FI_MSG | FI_RMA | FI_LOCAL_COMM | FI_REMOTE_COMM;
  s.mr_mode = FI_MR_LOCAL | FI_MR_VIRT_ADDR | FI_MR_ALLOCATED | FI_MR_PROV_KEY;
  if (hmem) {
    s.caps |= FI_HMEM;
    s.mr_mode |= FI_MR_HMEM;
  }
  s.mode = FI_CONTEXT | FI_CONTEXT2;
  s.ep_type = FI_EP_RDM;
  s.mr_key_size = 2;
  s.threading = FI_THREAD_COMPLETION;
  s.control_progress = FI_PROGRESS_UNSPEC;
  s.data_progress = FI_PROGRESS_UNSPEC;
  s.cq_data_size = 4; /* fi_writedata with 32 bits of immediate data */
  return s;
}

/* ---- asking the provider ------------------------------------------------------ */

static struct fi_info* build_hints(const struct spec* s) {
  struct fi_info* h = fi_allocinfo();

  if (!h) return NULL;
  h->caps = s->caps;
  h->mode = s->mode;
  h->ep_attr->type = s->ep_type;
  h->domain_attr->mr_mode = (int)s->mr_mode;
  h->domain_attr->mr_key_size = s->mr_key_size;
  h->domain_attr->cq_data_size = s->cq_data_size;
  h->domain_attr->threading = s->threading;
  h->domain_attr->control_progress = s->control_progress;
  h->domain_attr->data_progress = s->data_progress;
  h->tx_attr->msg_order = s->tx_msg_order;
  h->rx_attr->msg_order = s->rx_msg_order;
  h->fabric_attr->prov_name = strdup(PROV_NAME);
  if (!h->fabric_attr->prov_name) {
    fi_freeinfo(h);
    return NULL;
  }
  return h;
}

/* fi_getinfo result for this spec: 0 when at least one "mrc" fi_info came back. */
static int query(const struct spec* s, bool dump) {
  struct fi_info* hints = build_hints(s);
  struct fi_info* info = NULL;
  int rc;

  if (!hints) return -FI_ENOMEM;
  if (dump)
    fprintf(stderr, "--- hints (api %u.%u):\n%s", FI_MAJOR(s->version), FI_MINOR(s->version),
            fi_tostr(hints, FI_TYPE_INFO));
  rc = fi_getinfo(s->version, NULL, NULL, 0, hints, &info);
  if (rc == 0 && info == NULL) rc = -FI_ENODATA;
  if (rc == 0 && dump) fprintf(stderr, "--- first match:\n%s", fi_tostr(info, FI_TYPE_INFO));
  fi_freeinfo(info);
  fi_freeinfo(hints);
  return rc;
}

/* ---- relaxations ------------------------------------------------------------- */

struct named_bit {
  uint64_t bit;
  const char* name;
};

static const struct named_bit cap_names[] = {
    {FI_MSG, "FI_MSG"},
    {FI_RMA, "FI_RMA"},
    {FI_TAGGED, "FI_TAGGED"},
    {FI_ATOMIC, "FI_ATOMIC"},
    {FI_READ, "FI_READ"},
    {FI_WRITE, "FI_WRITE"},
    {FI_RECV, "FI_RECV"},
    {FI_SEND, "FI_SEND"},
    {FI_REMOTE_READ, "FI_REMOTE_READ"},
    {FI_REMOTE_WRITE, "FI_REMOTE_WRITE"},
    {FI_DIRECTED_RECV, "FI_DIRECTED_RECV"},
    {FI_HMEM, "FI_HMEM"},
    {FI_LOCAL_COMM, "FI_LOCAL_COMM"},
    {FI_REMOTE_COMM, "FI_REMOTE_COMM"},
    {FI_SOURCE, "FI_SOURCE"},
};

/* Every mode bit / MR mode bit an application can declare it copes with. */
static const uint64_t all_modes = FI_CONTEXT | FI_MSG_PREFIX | FI_ASYNC_IOV | FI_RX_CQ_DATA |
                                  FI_LOCAL_MR | FI_NOTIFY_FLAGS_ONLY | FI_RESTRICTED_COMP |
                                  FI_CONTEXT2 | FI_BUFFERED_RECV;
static const uint64_t all_mr_modes = FI_MR_LOCAL | FI_MR_RAW | FI_MR_VIRT_ADDR | FI_MR_ALLOCATED |
                                     FI_MR_PROV_KEY | FI_MR_MMU_NOTIFY | FI_MR_RMA_EVENT |
                                     FI_MR_ENDPOINT | FI_MR_HMEM | FI_MR_COLLECTIVE;

#define MAX_RELAX 32

struct relax {
  char what[64];
  int kind;
  uint64_t arg;
};

enum {
  R_VERSION,
  R_CAP,
  R_MODE,
  R_MR_MODE,
  R_MR_KEY_SIZE,
  R_CQ_DATA_SIZE,
  R_THREADING,
  R_PROGRESS,
  R_MSG_ORDER,
  R_EP_TYPE,
};

static void apply(struct spec* s, const struct relax* r) {
  switch (r->kind) {
    case R_VERSION:
      s->version = (uint32_t)r->arg;
      break;
    case R_CAP:
      s->caps &= ~r->arg;
      break;
    case R_MODE:
      s->mode = all_modes;
      break;
    case R_MR_MODE:
      s->mr_mode = all_mr_modes;
      break;
    case R_MR_KEY_SIZE:
      s->mr_key_size = 0;
      break;
    case R_CQ_DATA_SIZE:
      s->cq_data_size = 0;
      break;
    case R_THREADING:
      s->threading = FI_THREAD_UNSPEC;
      break;
    case R_PROGRESS:
      s->control_progress = FI_PROGRESS_UNSPEC;
      s->data_progress = FI_PROGRESS_UNSPEC;
      break;
    case R_MSG_ORDER:
      s->tx_msg_order = s->rx_msg_order = 0;
      break;
    case R_EP_TYPE:
      s->ep_type = FI_EP_UNSPEC;
      break;
  }
}

/* Highest API version <= wanted at which the provider answers at all. */
static uint32_t highest_answering_version(uint32_t wanted) {
  struct spec bare = {0};

  for (uint32_t minor = FI_MINOR(wanted) + 1; minor-- > 0;) {
    bare.version = FI_VERSION(FI_MAJOR(wanted), minor);
    if (query(&bare, false) == 0) return bare.version;
  }
  return 0;
}

#define ADD(k, a, ...)                                     \
  do {                                                     \
    if (n < MAX_RELAX) {                                   \
      r[n].kind = (k);                                     \
      r[n].arg = (a);                                      \
      snprintf(r[n].what, sizeof(r[n].what), __VA_ARGS__); \
      n++;                                                 \
    }                                                      \
  } while (0)

/* The relaxations that change something for this spec. */
static int list_relaxations(const struct spec* s, struct relax* r) {
  int n = 0;
  uint32_t v = highest_answering_version(s->version);

  if (v != 0 && v != s->version)
    ADD(R_VERSION, v, "api %u.%u->%u.%u", FI_MAJOR(s->version), FI_MINOR(s->version), FI_MAJOR(v),
        FI_MINOR(v));
  for (size_t i = 0; i < sizeof(cap_names) / sizeof(cap_names[0]); i++)
    if (s->caps & cap_names[i].bit) ADD(R_CAP, cap_names[i].bit, "caps -%s", cap_names[i].name);
  if (s->mode != all_modes) ADD(R_MODE, 0, "mode=all bits");
  if (s->mr_mode != all_mr_modes) ADD(R_MR_MODE, 0, "mr_mode=all bits");
  if (s->mr_key_size) ADD(R_MR_KEY_SIZE, 0, "mr_key_size=0");
  if (s->cq_data_size) ADD(R_CQ_DATA_SIZE, 0, "cq_data_size=0");
  if (s->threading != FI_THREAD_UNSPEC) ADD(R_THREADING, 0, "threading=UNSPEC");
  if (s->control_progress != FI_PROGRESS_UNSPEC || s->data_progress != FI_PROGRESS_UNSPEC)
    ADD(R_PROGRESS, 0, "progress=UNSPEC");
  if (s->tx_msg_order || s->rx_msg_order) ADD(R_MSG_ORDER, 0, "msg_order=0");
  if (s->ep_type != FI_EP_UNSPEC) ADD(R_EP_TYPE, 0, "ep_type=UNSPEC");
  return n;
}

static struct spec relaxed(const struct spec* s, const struct relax* r, const bool* on, int n) {
  struct spec t = *s;

  for (int i = 0; i < n; i++)
    if (on[i]) apply(&t, &r[i]);
  return t;
}

static void explain(const struct spec* s, int rc, char* out, size_t len) {
  struct relax r[MAX_RELAX];
  bool on[MAX_RELAX] = {false};
  int n = list_relaxations(s, r);
  size_t used;
  int singles = 0;

  used = (size_t)snprintf(out, len, "fi_getinfo: %s; ", fi_strerror(-rc));

  /* One field at a time. */
  for (int i = 0; i < n && used < len; i++) {
    struct spec t = *s;

    apply(&t, &r[i]);
    if (query(&t, false) == 0)
      used += (size_t)snprintf(out + used, len - used, "%s%s", singles++ ? " or " : "matches with ",
                               r[i].what);
  }
  if (singles || used >= len) return;

  /* No single field: relax all, then put back whatever is not needed. */
  for (int i = 0; i < n; i++)
    on[i] = true;
  struct spec all = relaxed(s, r, on, n);
  if (n == 0 || query(&all, false) != 0) {
    snprintf(out + used, len - used, "no relaxation helps: provider not found?");
    return;
  }
  for (int i = 0; i < n; i++) {
    on[i] = false;
    struct spec t = relaxed(s, r, on, n);
    if (query(&t, false) != 0) on[i] = true;
  }
  used += (size_t)snprintf(out + used, len - used, "matches only with all of ");
  for (int i = 0, k = 0; i < n && used < len; i++)
    if (on[i])
      used += (size_t)snprintf(out + used, len - used, "%s%s", k++ ? " + " : "", r[i].what);
}

int main(int argc, char** argv) {
  const struct variant variants[] = {
      {"sendrecv", "host@1.6", true, sendrecv_spec(FI_VERSION(1, 6), false)},
      {"sendrecv", "hmem@1.20", false, sendrecv_spec(FI_VERSION(1, 20), true)},
      {"sendrecv", "hmem@1.18", false, sendrecv_spec(FI_VERSION(1, 18), true)},
      {"sendrecv", "hmem@1.6", false, sendrecv_spec(FI_VERSION(1, 6), true)},
      {"rdma", "hmem@1.20", false, rdma_spec(FI_VERSION(1, 20), true)},
      {"rdma", "hmem@1.18", false, rdma_spec(FI_VERSION(1, 18), true)},
      /* not asked by the plugin (rdma always wants FI_HMEM); for comparison */
      {"rdma", "host@1.18", false, rdma_spec(FI_VERSION(1, 18), false)},
  };
  int status = 1;

  for (int i = 1; i < argc; i++) {
    if (strcmp(argv[i], "-v") == 0) {
      verbose = true;
    } else {
      fprintf(stderr, "usage: %s [-v]\n", argv[0]);
      return 2;
    }
  }
  if (verbose)
    fprintf(stderr, "libfabric runtime %u.%u\n", FI_MAJOR(fi_version()), FI_MINOR(fi_version()));

  for (size_t i = 0; i < sizeof(variants) / sizeof(variants[0]); i++) {
    const struct variant* v = &variants[i];
    int rc;

    if (verbose) fprintf(stderr, "=== %s %s\n", v->protocol, v->name);
    rc = query(&v->spec, verbose);
    if (rc == 0) {
      printf("%s %s: match\n", v->protocol, v->name);
      if (v->decides_exit) status = 0;
    } else {
      char reason[512];

      explain(&v->spec, rc, reason, sizeof(reason));
      printf("%s %s: no match (%s)\n", v->protocol, v->name, reason);
    }
    fflush(stdout);
  }
  return status;
}
