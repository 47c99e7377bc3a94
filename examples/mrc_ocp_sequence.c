/* mrc_ocp_sequence: the calling sequence of OCP MRC's own benchmark (examples/benchmark of the
 * OCP MRC release), written here from its description, run against mrc_soft0 with nothing but
 * the device configuration (docs/c-api.md, "OCP's own programs"). A server and a client side
 * live in one process, each with its own device context, as two processes would:
 *
 *   device by name ("mrc_soft0"), mrc_query_device, mrc_create_context declaring
 *   MRC_PROTOCOL_VERSION_1 as the API version, PD, two CQs, a QP (128 send / 1 receive WRs),
 *   a page-aligned buffer registered with IBV_ACCESS_RELAXED_ORDERING;
 *   INIT with IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS and no MRC attributes;
 *   ibv_query_gid(port 1, GID index 3); RTR with the AV (sgid_index 3), DEST_QPN, RQ_PSN,
 *   PATH_MTU; RTS with SQ_PSN | RETRY_CNT | RNR_RETRY | TIMEOUT; no MRC attributes anywhere.
 *
 * Then a sweep of message sizes from 1 B to --max-size (x2 per step): the server posts a
 * receive without a scatter list and writes an 8-byte step counter into the client (a sync
 * point the client spins on), the client sends --warmup signaled WRITEs, then --iters WRITEs
 * of the size with one completion per 64, then a WRITE_WITH_IMM signal; the server waits for
 * it and checks every byte of the last message (byte i = i & 0xff).
 *
 *   mrc_ocp_sequence [--max-size BYTES] [--iters N] [--warmup N]
 *   mrc_ocp_sequence --expect-strict-refusal     (with MRC_SOFT_STRICT=1: INIT must be EINVAL)
 *
 * Exit status: 0 every size verified (or the refusal seen), 1 a call or a check failed,
 * 2 bad arguments. */
#define _GNU_SOURCE
#include <errno.h>
#include <infiniband/verbs.h>
#include <malloc.h>
#include <mrc.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define GID_INDEX 3
#define TX_DEPTH 128
#define CQ_MOD 64

struct side {
  const char* name;
  struct ibv_device** list;
  struct ibv_context* ctx;
  struct mrc_context* mctx;
  struct ibv_pd* pd;
  struct mrc_cq* send_cq;
  struct mrc_cq* recv_cq;
  struct mrc_qp* qp;
  char* buf;
  struct ibv_mr* mr;
  uint32_t qpn, psn;
  union ibv_gid gid;
};

static size_t g_max = 4u << 20;
static int g_iters = 100, g_warmup = 4;

static int fail(const struct side* s, const char* what) {
  fprintf(stderr, "mrc_ocp_sequence: %s: %s failed: %s\n", s ? s->name : "-", what,
          strerror(errno));
  return 1;
}

static double now_s(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

/* One completion from cq, at most 10 s of polling. */
static int poll_one(struct mrc_cq* cq, struct ibv_wc* wc) {
  const double end = now_s() + 10;
  while (now_s() < end) {
    int n = mrc_poll_cq(cq, 1, wc);
    if (n < 0) return -1;
    if (n == 1) return wc->status == IBV_WC_SUCCESS ? 0 : -1;
  }
  errno = ETIMEDOUT;
  return -1;
}

static int open_side(struct side* s) {
  int n = 0;
  s->list = ibv_get_device_list(&n);
  if (!s->list || n <= 0) return fail(s, "ibv_get_device_list (is MRC_SOFT_PORTS set?)");
  struct ibv_device* dev = NULL;
  for (int i = 0; i < n; ++i)
    if (strcmp(ibv_get_device_name(s->list[i]), "mrc_soft0") == 0) dev = s->list[i];
  if (!dev) return fail(s, "finding mrc_soft0");
  if (!(s->ctx = ibv_open_device(dev))) return fail(s, "ibv_open_device");
  struct mrc_device_attr da;
  memset(&da, 0, sizeof da);
  int supported = 0;
  if (mrc_query_device(s->ctx, &da, &supported) || !supported) return fail(s, "mrc_query_device");
  /* The benchmark declares the protocol version as its API version. */
  struct mrc_context_attr ca = {.mrc_api_version_used = MRC_PROTOCOL_VERSION_1};
  if (!(s->mctx = mrc_create_context(s->ctx, &ca))) return fail(s, "mrc_create_context");
  if (!(s->pd = ibv_alloc_pd(s->ctx))) return fail(s, "ibv_alloc_pd");
  if (!(s->send_cq = mrc_create_cq(s->mctx, 256, NULL, NULL, 0))) return fail(s, "send CQ");
  if (!(s->recv_cq = mrc_create_cq(s->mctx, 256, NULL, NULL, 0))) return fail(s, "recv CQ");
  struct mrc_qp_init_attr qa;
  memset(&qa, 0, sizeof qa);
  qa.send_cq = s->send_cq;
  qa.recv_cq = s->recv_cq;
  qa.pd = s->pd;
  qa.cap.max_send_wr = TX_DEPTH;
  qa.cap.max_send_sge = 1;
  qa.cap.max_recv_wr = 1;
  qa.cap.max_recv_sge = 1;
  if (!(s->qp = mrc_create_qp(s->mctx, &qa))) return fail(s, "mrc_create_qp");
  const size_t len = 2 * g_max + 2 * sizeof(uint64_t);
  if (!(s->buf = memalign((size_t)sysconf(_SC_PAGESIZE), len))) return fail(s, "memalign");
  memset(s->buf, 0, len);
  s->mr =
      ibv_reg_mr(s->pd, s->buf, len,
                 IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_RELAXED_ORDERING);
  if (!s->mr) return fail(s, "ibv_reg_mr");
  return 0;
}

static int to_init(struct side* s) {
  struct ibv_qp_attr v;
  struct mrc_qp_attr m;
  memset(&v, 0, sizeof v);
  memset(&m, 0, sizeof m);
  v.qp_state = IBV_QPS_INIT;
  v.port_num = 1;
  v.qp_access_flags = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE;
  return mrc_modify_qp(s->qp, &v,
                       IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS, &m, 0);
}

static int connect_side(struct side* s, const struct side* peer) {
  struct ibv_qp_attr v;
  struct mrc_qp_attr m;
  memset(&v, 0, sizeof v);
  memset(&m, 0, sizeof m);
  v.qp_state = IBV_QPS_RTR;
  v.path_mtu = IBV_MTU_4096;
  v.ah_attr.is_global = 1;
  v.ah_attr.grh.dgid = peer->gid;
  v.ah_attr.grh.sgid_index = GID_INDEX;
  v.ah_attr.port_num = 1;
  v.dest_qp_num = peer->qpn;
  v.rq_psn = peer->psn;
  if (mrc_modify_qp(s->qp, &v,
                    IBV_QP_STATE | IBV_QP_AV | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN | IBV_QP_PATH_MTU,
                    &m, 0))
    return fail(s, "RTR");
  memset(&v, 0, sizeof v);
  v.qp_state = IBV_QPS_RTS;
  v.sq_psn = s->psn;
  v.timeout = 7;
  v.retry_cnt = 14;
  v.rnr_retry = 14;
  if (mrc_modify_qp(
          s->qp, &v,
          IBV_QP_STATE | IBV_QP_SQ_PSN | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_TIMEOUT, &m,
          0))
    return fail(s, "RTS");
  return 0;
}

static int post_write(struct side* s, const void* src, uint32_t len, uint64_t raddr, uint32_t rkey,
                      bool signaled, bool imm, uint32_t imm_data) {
  struct ibv_sge sge = {(uint64_t)(uintptr_t)src, len, s->mr->lkey};
  struct ibv_send_wr wr, *bad = NULL;
  memset(&wr, 0, sizeof wr);
  wr.sg_list = &sge;
  wr.num_sge = 1;
  wr.opcode = imm ? IBV_WR_RDMA_WRITE_WITH_IMM : IBV_WR_RDMA_WRITE;
  wr.send_flags = signaled ? IBV_SEND_SIGNALED : 0;
  wr.imm_data = imm_data;
  wr.wr.rdma.remote_addr = raddr;
  wr.wr.rdma.rkey = rkey;
  return mrc_post_send(s->qp, &wr, &bad);
}

/* One size of the sweep; step is the sync counter. */
static int run_size(struct side* srv, struct side* cli, size_t size, uint64_t step) {
  char* recv_buf = srv->buf + g_max;
  memset(recv_buf, 0, size);
  for (size_t i = 0; i < size; ++i)
    cli->buf[i] = (char)(i & 0xff);
  struct ibv_recv_wr rwr, *rbad = NULL;
  memset(&rwr, 0, sizeof rwr); /* no scatter list: the immediate only */
  rwr.wr_id = 0x1000;
  if (mrc_post_recv(srv->qp, &rwr, &rbad)) return fail(srv, "mrc_post_recv");
  /* Sync point: the server writes the step into the client's signal word, unsignaled. */
  volatile uint64_t* srv_signal = (volatile uint64_t*)(srv->buf + 2 * g_max);
  volatile uint64_t* cli_signal = (volatile uint64_t*)(cli->buf + 2 * g_max);
  *srv_signal = step;
  if (post_write(srv, (const void*)srv_signal, sizeof(uint64_t), (uint64_t)(uintptr_t)cli_signal,
                 cli->mr->rkey, false, false, 0))
    return fail(srv, "sync WRITE");
  const double end = now_s() + 10;
  while (*cli_signal != step)
    if (now_s() > end) return errno = ETIMEDOUT, fail(cli, "waiting for the sync point");
  const uint64_t raddr = (uint64_t)(uintptr_t)recv_buf;
  struct ibv_wc wc;
  for (int i = 0; i < g_warmup; ++i)
    if (post_write(cli, cli->buf, (uint32_t)size, raddr, srv->mr->rkey, true, false, 0) ||
        poll_one(cli->send_cq, &wc))
      return fail(cli, "warmup WRITE");
  uint64_t posted = 0, completed = 0;
  const uint64_t total = (uint64_t)g_iters;
  while (completed < total) {
    while (posted < total && posted < completed + TX_DEPTH) {
      const bool sig = posted % CQ_MOD == CQ_MOD - 1 || posted == total - 1;
      if (post_write(cli, cli->buf, (uint32_t)size, raddr, srv->mr->rkey, sig, false, 0))
        return fail(cli, "WRITE");
      ++posted;
    }
    if (poll_one(cli->send_cq, &wc)) return fail(cli, "WRITE completion");
    completed += completed + CQ_MOD <= total ? CQ_MOD : total - completed;
  }
  /* The end: WRITE_WITH_IMM of 8 bytes into the server's second signal word. */
  volatile uint64_t* cli_word = cli_signal + 1;
  *cli_word = step;
  if (post_write(cli, (const void*)cli_word, sizeof(uint64_t),
                 (uint64_t)(uintptr_t)(srv_signal + 1), srv->mr->rkey, true, true,
                 (uint32_t)size) ||
      poll_one(cli->send_cq, &wc))
    return fail(cli, "signal WRITE_WITH_IMM");
  if (poll_one(srv->recv_cq, &wc) || wc.opcode != IBV_WC_RECV_RDMA_WITH_IMM)
    return fail(srv, "signal receive");
  for (size_t i = 0; i < size; ++i)
    if ((unsigned char)recv_buf[i] != (unsigned char)(i & 0xff)) {
      fprintf(stderr, "mrc_ocp_sequence: size %zu: byte %zu is 0x%02x, expected 0x%02x\n", size, i,
              (unsigned char)recv_buf[i], (unsigned)(i & 0xff));
      return 1;
    }
  printf("size %zu: %d writes verified\n", size, g_iters);
  return 0;
}

static void close_side(struct side* s) {
  if (s->qp) mrc_destroy_qp(s->qp);
  if (s->send_cq) mrc_destroy_cq(s->send_cq);
  if (s->recv_cq) mrc_destroy_cq(s->recv_cq);
  if (s->mr) ibv_dereg_mr(s->mr);
  if (s->pd) ibv_dealloc_pd(s->pd);
  if (s->mctx) mrc_destroy_context(s->mctx);
  if (s->ctx) ibv_close_device(s->ctx);
  if (s->list) ibv_free_device_list(s->list);
  free(s->buf);
}

static long arg_number(const char* opt, const char* v, long lo, long hi) {
  char* end = NULL;
  errno = 0;
  const long n = v ? strtol(v, &end, 0) : 0;
  if (!v || errno || end == v || *end || n < lo || n > hi) {
    fprintf(stderr, "mrc_ocp_sequence: %s expects a number from %ld to %ld\n", opt, lo, hi);
    exit(2);
  }
  return n;
}

int main(int argc, char** argv) {
  bool expect_refusal = false;
  for (int i = 1; i < argc; ++i) {
    if (strcmp(argv[i], "--max-size") == 0)
      g_max = (size_t)arg_number(argv[i], argv[i + 1], 1, 64l << 20), ++i;
    else if (strcmp(argv[i], "--iters") == 0)
      g_iters = (int)arg_number(argv[i], argv[i + 1], 1, 1000000), ++i;
    else if (strcmp(argv[i], "--warmup") == 0)
      g_warmup = (int)arg_number(argv[i], argv[i + 1], 0, 1000), ++i;
    else if (strcmp(argv[i], "--expect-strict-refusal") == 0)
      expect_refusal = true;
    else if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
      printf(
          "Usage: mrc_ocp_sequence [--max-size BYTES] [--iters N] [--warmup N] "
          "[--expect-strict-refusal]\n"
          "OCP MRC's benchmark calling sequence over mrc_soft0 (examples/mrc_ocp_sequence.c)\n"
          "  --max-size BYTES          largest message of the sweep, 1 to 64M (default 4M)\n"
          "  --iters N                 WRITEs per size (default 100)\n"
          "  --warmup N                signaled WRITEs before them (default 4)\n"
          "  --expect-strict-refusal   succeed only if INIT is refused (MRC_SOFT_STRICT=1)\n"
          "Exit status: 0 every size verified (or the refusal seen), 1 a call or a check "
          "failed, 2 bad arguments.\n");
      return 0;
    } else {
      fprintf(stderr, "mrc_ocp_sequence: unknown argument '%s' (see --help)\n", argv[i]);
      return 2;
    }
  }
  struct side srv = {.name = "server"}, cli = {.name = "client"};
  int rc = 1;
  if (open_side(&srv) || open_side(&cli)) goto out;
  if (expect_refusal) {
    const int e = to_init(&srv);
    rc = e == EINVAL ? 0 : 1;
    if (rc) fprintf(stderr, "mrc_ocp_sequence: INIT returned %d, expected EINVAL\n", e);
    goto out;
  }
  if (to_init(&srv)) {
    fail(&srv, "INIT");
    goto out;
  }
  if (to_init(&cli)) {
    fail(&cli, "INIT");
    goto out;
  }
  for (struct side* s = &srv; s; s = s == &srv ? &cli : NULL) {
    if (mrc_get_qpn(s->qp, &s->qpn)) {
      fail(s, "mrc_get_qpn");
      goto out;
    }
    if (ibv_query_gid(s->ctx, 1, GID_INDEX, &s->gid)) {
      fail(s, "ibv_query_gid (port 1, index 3)");
      goto out;
    }
    s->psn = (uint32_t)(lrand48() & 0xffffff);
  }
  if (connect_side(&srv, &cli) || connect_side(&cli, &srv)) goto out;
  uint64_t step = 1;
  for (size_t size = 1;; size *= 2, ++step) {
    if (size > g_max) size = g_max;
    if (run_size(&srv, &cli, size, step)) goto out;
    if (size == g_max) break;
  }
  rc = 0;
out:
  close_side(&cli);
  close_side(&srv);
  return rc;
}
