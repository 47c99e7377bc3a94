/* mrc_write_bw: RDMA WRITE / WRITE-with-immediate bandwidth over the OCP MRC 1.0 API, in the
 * manner of perftest's ib_write_bw. C11, written only against mrc.h and the libibverbs calls
 * of ocp-mrc-api.md section 7.2 (device, PD, MR, GID, port), so it runs unchanged on any MRC
 * device; here it links libmrc.so (the mrc_soft0 software device, docs/c-api.md).
 *
 *   server:  mrc_write_bw [options]
 *   client:  mrc_write_bw [options] SERVER_HOST
 *
 * The client writes `--iters` messages of `--size` bytes into the server's buffer (a ring of
 * `slots` messages), with at most `--tx-depth` outstanding. Connection data (QPN, PSN, GID,
 * rkey, virtual address) is exchanged out of band over TCP (`--tcp-port`). Every message
 * carries a pattern of its index; with WRITE_IMM the server checks each message as its
 * immediate arrives (imm = message index, in order), with WRITE it checks the final ring. The
 * server reports the verdict to the client over TCP; the exit status is 0 only if every check
 * passed on both sides. Async events (port down/up, QP fatal) are printed as they arrive.
 *
 * Profiles (section 3.8: required at RESET -> INIT) come from --ev-profile / --cc-profile, or
 * $MRC_EV_PROFILE_ID / $MRC_CC_PROFILE_ID as in the reference's example. */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <mrc.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define MAX_RING_BYTES (256ull << 20) /* receive ring (and send ring) cap */
#define MAX_RECV_DEPTH 16384u

struct options {
  const char* server; /* NULL: server mode */
  const char* tcp_port;
  const char* device;
  size_t size;
  unsigned iters;
  unsigned tx_depth;
  bool imm;
  uint64_t ev_profile, cc_profile;
  int ib_port;       /* GID of this port is exchanged (1-based) */
  unsigned pause_at; /* client: stop posting after this many writes until a port event */
  bool expect_port_down;
  double timeout_s;
  bool quiet;
};

/* Out-of-band connection data, one text line each way. */
struct peer_info {
  uint32_t qpn, psn, rkey;
  uint64_t vaddr, len;
  uint8_t gid[16];
  uint64_t size;
  unsigned iters, imm;
};

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void die(const char* fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  fprintf(stderr, "mrc_write_bw: ");
  vfprintf(stderr, fmt, ap);
  fprintf(stderr, "\n");
  va_end(ap);
  exit(1);
}

/* Byte j of message i. The first 4 bytes hold i (little endian) so that ring slots reused by
 * a later message are told apart; the rest is a function of (i, j). */
static uint8_t pattern(uint64_t i, size_t j) {
  if (j < 4) return (uint8_t)(i >> (8 * j));
  return (uint8_t)(i * 131u + j * 7u + (j >> 8) + 0x5a);
}

static void fill(uint8_t* p, size_t size, uint64_t i) {
  for (size_t j = 0; j < size; ++j)
    p[j] = pattern(i, j);
}

/* 0 = matches message i; 1 = holds a later message (slot reused); -1 = corrupt. */
static int check(const uint8_t* p, size_t size, uint64_t i) {
  if (size >= 4) {
    const uint32_t got =
        (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
    if (got != (uint32_t)i && got > (uint32_t)i) return 1;
  }
  for (size_t j = 0; j < size; ++j)
    if (p[j] != pattern(i, j)) return -1;
  return 0;
}

/* ---- TCP side channel -------------------------------------------------------------------- */

static int tcp_connect(const char* host, const char* port, double timeout_s) {
  struct addrinfo hints = {0}, *res = NULL;
  hints.ai_socktype = SOCK_STREAM;
  int rc = getaddrinfo(host, port, &hints, &res);
  if (rc != 0) die("%s: %s", host, gai_strerror(rc));
  const double end = now_s() + timeout_s;
  for (;;) { /* the server may not listen yet: retry until the timeout */
    for (struct addrinfo* a = res; a; a = a->ai_next) {
      int fd = socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol);
      if (fd < 0) continue;
      if (connect(fd, a->ai_addr, a->ai_addrlen) == 0) {
        freeaddrinfo(res);
        int one = 1;
        setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        return fd;
      }
      close(fd);
    }
    if (now_s() > end) die("cannot connect to %s port %s", host, port);
    usleep(50 * 1000);
  }
}

static int tcp_accept(const char* port) {
  int fd = socket(AF_INET6, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) die("socket: %s", strerror(errno));
  int one = 1, zero = 0;
  setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &zero, sizeof zero); /* IPv4 clients too */
  struct sockaddr_in6 sa = {0};
  sa.sin6_family = AF_INET6;
  sa.sin6_addr = in6addr_any;
  sa.sin6_port = htons((uint16_t)atoi(port));
  if (bind(fd, (struct sockaddr*)&sa, sizeof sa) != 0)
    die("bind port %s: %s", port, strerror(errno));
  if (listen(fd, 1) != 0) die("listen: %s", strerror(errno));
  int c = accept(fd, NULL, NULL);
  if (c < 0) die("accept: %s", strerror(errno));
  close(fd);
  setsockopt(c, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  return c;
}

static void send_line(int fd, const char* fmt, ...) {
  char buf[512];
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(buf, sizeof buf, fmt, ap);
  va_end(ap);
  if (n < 0 || (size_t)n >= sizeof buf) die("line too long");
  for (int off = 0; off < n;) {
    ssize_t w = send(fd, buf + off, (size_t)(n - off), MSG_NOSIGNAL);
    if (w <= 0) die("side channel send: %s", w < 0 ? strerror(errno) : "closed");
    off += (int)w;
  }
}

/* Reads one line (without '\n'); false if the peer closed. */
static bool recv_line(int fd, char* buf, size_t cap) {
  size_t n = 0;
  while (n + 1 < cap) {
    char c;
    ssize_t r = recv(fd, &c, 1, 0);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) return false;
    if (c == '\n') break;
    buf[n++] = c;
  }
  buf[n] = 0;
  return true;
}

/* True if a line is ready within `ms` milliseconds (0 = just check). */
static bool line_ready(int fd, int ms) {
  struct pollfd p = {fd, POLLIN, 0};
  return poll(&p, 1, ms) > 0;
}

static void send_info(int fd, const struct peer_info* in) {
  char gid[33];
  for (int i = 0; i < 16; ++i)
    sprintf(gid + 2 * i, "%02x", in->gid[i]);
  send_line(fd,
            "MRCBW1 qpn=%" PRIu32 " psn=%" PRIu32 " rkey=%" PRIu32 " vaddr=%" PRIu64 " len=%" PRIu64
            " gid=%s size=%" PRIu64 " iters=%u imm=%u\n",
            in->qpn, in->psn, in->rkey, in->vaddr, in->len, gid, in->size, in->iters, in->imm);
}

static void recv_info(int fd, struct peer_info* out) {
  char line[512], gid[40];
  if (!recv_line(fd, line, sizeof line)) die("side channel closed before the connection data");
  if (sscanf(line,
             "MRCBW1 qpn=%" SCNu32 " psn=%" SCNu32 " rkey=%" SCNu32 " vaddr=%" SCNu64
             " len=%" SCNu64 " gid=%32s size=%" SCNu64 " iters=%u imm=%u",
             &out->qpn, &out->psn, &out->rkey, &out->vaddr, &out->len, gid, &out->size, &out->iters,
             &out->imm) != 9 ||
      strlen(gid) != 32)
    die("bad connection data from the peer: '%s'", line);
  for (int i = 0; i < 16; ++i) {
    unsigned v;
    if (sscanf(gid + 2 * i, "%2x", &v) != 1) die("bad GID from the peer");
    out->gid[i] = (uint8_t)v;
  }
}

/* ---- Async events ------------------------------------------------------------------------ */

struct event_counts {
  unsigned port_down, port_up, qp_fatal, other;
};

static const char* event_name(enum ibv_event_type t) {
  switch (t) {
    case IBV_EVENT_PORT_ERR:
      return "IBV_EVENT_PORT_ERR";
    case IBV_EVENT_PORT_ACTIVE:
      return "IBV_EVENT_PORT_ACTIVE";
    case IBV_EVENT_QP_FATAL:
      return "IBV_EVENT_QP_FATAL";
    case IBV_EVENT_CQ_ERR:
      return "IBV_EVENT_CQ_ERR";
    default:
      return "other";
  }
}

/* Drains pending async events without blocking: the device's async_fd is non-blocking, so
 * mrc_get_async_event returns -1 with EAGAIN when none is pending (as ibv_get_async_event). */
static void drain_async(struct mrc_context* mctx, struct event_counts* ec, bool quiet) {
  struct mrc_async_event ev;
  while (mrc_get_async_event(mctx, &ev) == 0) {
    switch (ev.event_type) {
      case IBV_EVENT_PORT_ERR:
        ++ec->port_down;
        break;
      case IBV_EVENT_PORT_ACTIVE:
        ++ec->port_up;
        break;
      case IBV_EVENT_QP_FATAL:
        ++ec->qp_fatal;
        break;
      default:
        ++ec->other;
    }
    if (ev.event_type == IBV_EVENT_PORT_ERR || ev.event_type == IBV_EVENT_PORT_ACTIVE)
      printf("async event: %s port %d\n", event_name(ev.event_type), ev.element.port_num);
    else if (!quiet || ev.event_type == IBV_EVENT_QP_FATAL)
      printf("async event: %s (%d)\n", event_name(ev.event_type), (int)ev.event_type);
    fflush(stdout);
    mrc_ack_async_event(&ev);
  }
  if (errno != EAGAIN) die("mrc_get_async_event: %s", strerror(errno));
}

/* --expect-port-down: the port may go down on this node after the transfer ended (another
 * node's controller went first); wait up to 5 s for the event. */
static void await_port_down(struct mrc_context* mctx, struct event_counts* ec,
                            const struct options* o) {
  const double end = now_s() + 5;
  drain_async(mctx, ec, o->quiet);
  while (o->expect_port_down && ec->port_down == 0 && now_s() < end) {
    struct timespec ts = {0, 1000 * 1000};
    nanosleep(&ts, NULL);
    drain_async(mctx, ec, o->quiet);
  }
}

/* ---- Main -------------------------------------------------------------------------------- */

static void usage(FILE* f) {
  fprintf(f,
          "Usage: mrc_write_bw [options] [SERVER_HOST]\n"
          "RDMA WRITE bandwidth over the OCP MRC C API (server without SERVER_HOST, client with);\n"
          "every message is verified. docs/c-api.md, \"Example and end-to-end test\".\n"
          "Options:\n"
          "  -p, --tcp-port PORT     side-channel TCP port (default 18515)\n"
          "  -d, --ib-dev NAME       device (default: the first, mrc_soft0)\n"
          "  -i, --ib-port N         port whose GID is exchanged, 1..255 (default 1)\n"
          "  -s, --size BYTES        message size, 1 to 256M (default 65536; K/M suffixes)\n"
          "  -n, --iters N           messages, 1 to 2^31-1 (default 1000)\n"
          "  -t, --tx-depth N        outstanding writes, 1 to 65536 (default 128)\n"
          "      --imm               RDMA WRITE with immediate (default: RDMA WRITE)\n"
          "  -e, --ev-profile ID     EV profile (default $MRC_QP_EV_PROFILE_ID)\n"
          "  -c, --cc-profile ID     CC profile (default $MRC_QP_CC_PROFILE_ID)\n"
          "      --pause-at N        client: after N writes, wait (<= 10 s) for a port event\n"
          "      --expect-port-down  exit 1 unless an IBV_EVENT_PORT_ERR arrived (waits <= 5 s)\n"
          "      --timeout SECONDS   give up after this long, 0.1 to 86400 (default 120)\n"
          "      --quiet             only the result line and port events\n"
          "  -h, --help              this text\n"
          "The client's size, iterations and opcode are used by both sides. The profile ids\n"
          "default to $MRC_QP_EV_PROFILE_ID / $MRC_QP_CC_PROFILE_ID (the names of OCP's\n"
          "examples; $MRC_EV_PROFILE_ID / $MRC_CC_PROFILE_ID are read too).\n"
          "Exit status: 0 every message verified, 1 a transfer or check failed, 2 bad arguments\n"
          "(one line on stderr).\n");
}

/* A bad argument: one line and exit status 2. */
static void bad_argument(const char* fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  fprintf(stderr, "mrc_write_bw: ");
  vfprintf(stderr, fmt, ap);
  fprintf(stderr, " (see mrc_write_bw --help)\n");
  va_end(ap);
  exit(2);
}

/* An unsigned number in [lo, hi], else a bad argument. */
static unsigned long long parse_number(const char* what, const char* s, unsigned long long lo,
                                       unsigned long long hi) {
  char* end = NULL;
  errno = 0;
  const unsigned long long v = strtoull(s, &end, 0);
  if (errno || end == s || *end || s[0] == '-' || v < lo || v > hi)
    bad_argument("%s '%s': expected a number from %llu to %llu", what, s, lo, hi);
  return v;
}

#define MAX_SIZE (256ull << 20) /* the server's ring holds at most 256 MiB */

static uint64_t parse_size(const char* s) {
  char* end = NULL;
  errno = 0;
  unsigned long long v = strtoull(s, &end, 0);
  unsigned shift = 0;
  if (end && (*end == 'K' || *end == 'k'))
    shift = 10, ++end;
  else if (end && (*end == 'M' || *end == 'm'))
    shift = 20, ++end;
  if (errno || end == s || *end || s[0] == '-' || v == 0 || v > (MAX_SIZE >> shift))
    bad_argument("--size '%s': expected 1 to 256M bytes", s);
  return v << shift;
}

/* A profile id from the environment: OCP's example name first, then the older one. */
static uint64_t env_profile(const char* name, const char* old_name) {
  const char* v = getenv(name);
  const char* which = name;
  if (!v || !*v) v = getenv(old_name), which = old_name;
  if (!v || !*v) return 0;
  char* end = NULL;
  errno = 0;
  const unsigned long long id = strtoull(v, &end, 0);
  if (errno || end == v || *end || v[0] == '-')
    bad_argument("$%s='%s': expected a profile id (a number)", which, v);
  return id;
}

int main(int argc, char** argv) {
  struct options o = {.tcp_port = "18515",
                      .size = 65536,
                      .iters = 1000,
                      .tx_depth = 128,
                      .ib_port = 1,
                      .timeout_s = 120,
                      .ev_profile = env_profile("MRC_QP_EV_PROFILE_ID", "MRC_EV_PROFILE_ID"),
                      .cc_profile = env_profile("MRC_QP_CC_PROFILE_ID", "MRC_CC_PROFILE_ID")};
  enum { OPT_IMM = 256, OPT_PAUSE, OPT_EXPECT, OPT_TIMEOUT, OPT_QUIET };
  static const struct option longopts[] = {{"tcp-port", required_argument, 0, 'p'},
                                           {"ib-dev", required_argument, 0, 'd'},
                                           {"ib-port", required_argument, 0, 'i'},
                                           {"size", required_argument, 0, 's'},
                                           {"iters", required_argument, 0, 'n'},
                                           {"tx-depth", required_argument, 0, 't'},
                                           {"imm", no_argument, 0, OPT_IMM},
                                           {"ev-profile", required_argument, 0, 'e'},
                                           {"cc-profile", required_argument, 0, 'c'},
                                           {"pause-at", required_argument, 0, OPT_PAUSE},
                                           {"expect-port-down", no_argument, 0, OPT_EXPECT},
                                           {"timeout", required_argument, 0, OPT_TIMEOUT},
                                           {"quiet", no_argument, 0, OPT_QUIET},
                                           {"help", no_argument, 0, 'h'},
                                           {0, 0, 0, 0}};
  int c;
  opterr = 0; /* one line of our own instead */
  while ((c = getopt_long(argc, argv, "p:d:i:s:n:t:e:c:h", longopts, NULL)) != -1) {
    switch (c) {
      case 'p':
        parse_number("--tcp-port", optarg, 1, 65535);
        o.tcp_port = optarg;
        break;
      case 'd':
        o.device = optarg;
        break;
      case 'i':
        o.ib_port = (int)parse_number("--ib-port", optarg, 1, 255);
        break;
      case 's':
        o.size = (size_t)parse_size(optarg);
        break;
      case 'n':
        o.iters = (unsigned)parse_number("--iters", optarg, 1, 0x7FFFFFFF);
        break;
      case 't':
        o.tx_depth = (unsigned)parse_number("--tx-depth", optarg, 1, 65536);
        break;
      case OPT_IMM:
        o.imm = true;
        break;
      case 'e':
        o.ev_profile = parse_number("--ev-profile", optarg, 0, ~0ull);
        break;
      case 'c':
        o.cc_profile = parse_number("--cc-profile", optarg, 0, ~0ull);
        break;
      case OPT_PAUSE:
        o.pause_at = (unsigned)parse_number("--pause-at", optarg, 0, 0x7FFFFFFF);
        break;
      case OPT_EXPECT:
        o.expect_port_down = true;
        break;
      case OPT_TIMEOUT:
        o.timeout_s = atof(optarg);
        if (!(o.timeout_s >= 0.1 && o.timeout_s <= 86400))
          bad_argument("--timeout '%s': expected 0.1 to 86400 seconds", optarg);
        break;
      case OPT_QUIET:
        o.quiet = true;
        break;
      case 'h':
        usage(stdout);
        return 0;
      default:
        bad_argument("unknown option or missing value: '%s'", argv[optind - 1]);
    }
  }
  if (optind + 1 == argc)
    o.server = argv[optind];
  else if (optind != argc)
    bad_argument("one SERVER_HOST at most, got '%s' and '%s'", argv[optind], argv[optind + 1]);
  const bool client = o.server != NULL;
  if (client && (o.size == 0 || o.iters == 0 || o.tx_depth == 0))
    die("--size, --iters and --tx-depth must be positive");
  setvbuf(stdout, NULL, _IOLBF, 0);

  /* Device (section 7.2). */
  int ndev = 0;
  struct ibv_device** list = ibv_get_device_list(&ndev);
  if (!list || ndev == 0) die("no RDMA device (is MRC_SOFT_PORTS set?)");
  struct ibv_device* dev = NULL;
  for (int i = 0; i < ndev; ++i)
    if (!o.device || strcmp(ibv_get_device_name(list[i]), o.device) == 0) {
      dev = list[i];
      break;
    }
  if (!dev) die("device %s not found", o.device);
  struct ibv_context* ctx = ibv_open_device(dev);
  if (!ctx) die("ibv_open_device: %s", strerror(errno));
  ibv_free_device_list(list);

  struct mrc_context_attr cattr = {MRC_API_VER_USED, MRC_VENDOR_API_VER_USED};
  struct mrc_context* mctx = mrc_create_context(ctx, &cattr);
  if (!mctx) die("mrc_create_context: %s", strerror(errno));
  struct mrc_device_attr dattr;
  int supported = 0;
  if (mrc_query_device_ex(ctx, mctx, &dattr, &supported) != 0)
    die("mrc_query_device_ex: %s", strerror(errno));
  if (!supported) die("%s does not support MRC", ibv_get_device_name(dev));
  /* Async events without a thread: a non-blocking async_fd (as with libibverbs). */
  if (fcntl(ctx->async_fd, F_SETFL, fcntl(ctx->async_fd, F_GETFL) | O_NONBLOCK) != 0)
    die("async_fd: %s", strerror(errno));
  struct ibv_port_attr pattr;
  if (ibv_query_port(ctx, (uint8_t)o.ib_port, &pattr) != 0) die("ibv_query_port %d", o.ib_port);
  struct ibv_pd* pd = ibv_alloc_pd(ctx);
  if (!pd) die("ibv_alloc_pd: %s", strerror(errno));

  /* Side channel: the server learns the client's parameters before it sizes anything (the
     device is opened first, so that a missing one is said at once, not after a client came). */
  int sock = client ? tcp_connect(o.server, o.tcp_port, o.timeout_s) : tcp_accept(o.tcp_port);

  /* Parameters: the client's; the server reads them with the client's connection data. */
  struct peer_info me = {0}, peer = {0};
  if (!client) {
    recv_info(sock, &peer);
    o.size = (size_t)peer.size;
    o.iters = peer.iters;
    o.imm = peer.imm != 0;
    if (o.size == 0 || o.iters == 0) die("bad parameters from the client");
  }
  uint64_t slots = MAX_RING_BYTES / o.size;
  if (slots > o.iters) slots = o.iters;
  if (slots == 0) die("--size above %llu", (unsigned long long)MAX_RING_BYTES);
  if (client && o.tx_depth > slots)
    o.tx_depth = (unsigned)slots; /* a slot is refilled only
                                     after its write completed */
  const size_t ring = (size_t)(slots * o.size);
  uint8_t* buf = aligned_alloc(4096, (ring + 4095) / 4096 * 4096);
  if (!buf) die("out of memory for %zu bytes", ring);
  memset(buf, 0, ring);
  const int access = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE;
  struct ibv_mr* mr = ibv_reg_mr(pd, buf, ring, access);
  if (!mr) die("ibv_reg_mr: %s", strerror(errno));

  /* CQ, hint and QP (3.7). One CQ for both directions, polled. */
  const unsigned recv_depth = o.iters < MAX_RECV_DEPTH ? o.iters : MAX_RECV_DEPTH;
  const int cqe = (int)(o.tx_depth + recv_depth + 16);
  struct mrc_cq* cq = mrc_create_cq(mctx, cqe, NULL, NULL, 0);
  if (!cq) die("mrc_create_cq: %s", strerror(errno));
  struct mrc_qp_hint_init_attr hattr = {0};
  hattr.attr.num_qps_per_peer = 1;
  hattr.attr.num_send_peers = client ? 1 : 0;
  hattr.attr.num_remote_recv_peers = 1;
  struct mrc_qp_hint* hint = mrc_create_qp_hint(mctx, &hattr);
  if (!hint) die("mrc_create_qp_hint: %s", strerror(errno));
  struct mrc_qp_init_attr qattr = {0};
  qattr.send_cq = qattr.recv_cq = cq;
  qattr.cap.max_send_wr = o.tx_depth;
  qattr.cap.max_recv_wr = recv_depth;
  qattr.cap.max_send_sge = 1;
  qattr.cap.max_recv_sge = 1;
  qattr.pd = pd;
  qattr.send_ops_flags = IBV_QP_EX_WITH_RDMA_WRITE | IBV_QP_EX_WITH_RDMA_WRITE_WITH_IMM;
  qattr.protocol_version = MRC_PROTOCOL_VERSION_1;
  struct mrc_qp* qp = mrc_create_qp(mctx, &qattr);
  if (!qp) die("mrc_create_qp: %s", strerror(errno));

  srand((unsigned)(getpid() ^ time(NULL)));
  if (mrc_get_qpn(qp, &me.qpn) != 0) die("mrc_get_qpn: %s", strerror(errno));
  me.psn = (uint32_t)rand() & 0xFFFFFF;
  me.rkey = mr->rkey;
  me.vaddr = (uint64_t)(uintptr_t)buf;
  me.len = ring;
  union ibv_gid gid;
  if (ibv_query_gid(ctx, (uint8_t)o.ib_port, 0, &gid) != 0)
    die("ibv_query_gid: %s", strerror(errno));
  memcpy(me.gid, gid.raw, 16);
  me.size = o.size;
  me.iters = o.iters;
  me.imm = o.imm;
  send_info(sock, &me);
  if (client) recv_info(sock, &peer);
  if (client && peer.len < ring) die("server ring of %" PRIu64 " bytes is too small", peer.len);

  /* RESET -> INIT -> RTR -> RTS with the attributes of section 3.8. */
  struct ibv_qp_attr va = {0};
  struct mrc_qp_attr ma = {0};
  va.qp_state = IBV_QPS_INIT;
  va.pkey_index = 0;
  va.qp_access_flags = access;
  ma.profile.ev_profile_id = o.ev_profile;
  ma.profile.cc_profile_id = o.cc_profile;
  ma.qp_hint = hint;
  int rc = mrc_modify_qp(qp, &va, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_ACCESS_FLAGS, &ma,
                         MRC_QP_HINT | MRC_QP_EV_PROFILE_ID | MRC_QP_CC_PROFILE_ID);
  if (rc)
    die("modify to INIT (ev profile %" PRIu64 ", cc profile %" PRIu64 "): %s", o.ev_profile,
        o.cc_profile, strerror(rc));
  memset(&va, 0, sizeof va);
  va.qp_state = IBV_QPS_RTR;
  va.path_mtu = IBV_MTU_4096;
  va.dest_qp_num = peer.qpn;
  va.rq_psn = peer.psn;
  va.ah_attr.is_global = 1;
  memcpy(va.ah_attr.grh.dgid.raw, peer.gid, 16);
  va.ah_attr.grh.sgid_index = 0;
  va.ah_attr.port_num = (uint8_t)o.ib_port;
  ma.wimm.max_wimm_dest = dattr.wimm_attr.max_wimm_dest;
  ma.mpr.mpr_dest = dattr.mpr_attr.max_mpr;
  rc = mrc_modify_qp(qp, &va,
                     IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN,
                     &ma, MRC_QP_MAX_WIMM_DEST | MRC_QP_MPR_DEST);
  if (rc) die("modify to RTR: %s", strerror(rc));
  memset(&va, 0, sizeof va);
  va.qp_state = IBV_QPS_RTS;
  va.sq_psn = me.psn;
  ma.wimm.max_wimm =
      o.tx_depth < dattr.wimm_attr.max_wimm ? (uint16_t)o.tx_depth : dattr.wimm_attr.max_wimm;
  ma.mpr.mpr = dattr.mpr_attr.max_mpr;
  ma.timeout = 14; /* 1.024 us * 2^14 = 16.8 ms */
  ma.retry.linear_cnt = 7;
  ma.retry.exp_cnt = 7;
  rc = mrc_modify_qp(qp, &va, IBV_QP_STATE | IBV_QP_SQ_PSN, &ma,
                     MRC_QP_MAX_WIMM | MRC_QP_MPR | MRC_QP_RETRY_CNT | MRC_QP_TIMEOUT);
  if (rc) die("modify to RTS: %s", strerror(rc));

  struct event_counts ec = {0};
  const double deadline = now_s() + o.timeout_s;
  int failures = 0;
  char line[128];
  struct ibv_wc wc[64];

  if (!client) {
    /* Receives for the immediates before the client may send (no RNR: section 3). */
    unsigned posted = 0;
    if (o.imm) {
      for (; posted < recv_depth; ++posted) {
        struct ibv_recv_wr rwr = {.wr_id = posted}, *bad = NULL;
        if (mrc_post_recv(qp, &rwr, &bad) != 0) die("mrc_post_recv: %s", strerror(errno));
      }
    }
    send_line(sock, "READY\n");
    unsigned got = 0, verified = 0, overwritten = 0;
    bool done = false;
    while (!done) {
      if (now_s() > deadline) die("timeout: %u of %u immediates", got, o.iters);
      drain_async(mctx, &ec, o.quiet);
      const int n = o.imm ? mrc_poll_cq(cq, 64, wc) : 0;
      if (n < 0) die("mrc_poll_cq failed");
      for (int k = 0; k < n; ++k) {
        if (wc[k].status != IBV_WC_SUCCESS)
          die("completion error: %s", ibv_wc_status_str(wc[k].status));
        if (wc[k].opcode != IBV_WC_RECV_RDMA_WITH_IMM) continue;
        const uint32_t idx = ntohl(wc[k].imm_data);
        if (idx != got) {
          fprintf(stderr, "immediate %u out of order (expected %u)\n", idx, got);
          ++failures;
        }
        const int v = check(buf + (size_t)(idx % slots) * o.size, o.size, idx);
        if (v < 0) {
          fprintf(stderr, "message %u: data mismatch\n", idx);
          ++failures;
        }
        v == 0 ? ++verified : ++overwritten;
        ++got;
        if (posted < o.iters) {
          struct ibv_recv_wr rwr = {.wr_id = posted}, *bad = NULL;
          if (mrc_post_recv(qp, &rwr, &bad) != 0) die("mrc_post_recv: %s", strerror(errno));
          ++posted;
        }
      }
      /* WRITE: the client says DONE when its writes completed; WRITE_IMM: all immediates. */
      if ((!o.imm || got == o.iters) && line_ready(sock, n > 0 ? 0 : 1)) {
        if (!recv_line(sock, line, sizeof line) || strcmp(line, "DONE") != 0)
          die("side channel: expected DONE, got '%s'", line);
        done = true;
      }
      if (n == 0 && !done) {
        struct timespec ts = {0, 20 * 1000};
        nanosleep(&ts, NULL);
      }
    }
    /* The final ring holds the last `slots` messages. */
    for (uint64_t i = o.iters - slots; i < o.iters; ++i)
      if (check(buf + (size_t)(i % slots) * o.size, o.size, i) != 0) {
        fprintf(stderr, "message %" PRIu64 ": data mismatch in the final ring\n", i);
        ++failures;
        break;
      }
    if (!o.imm) verified = (unsigned)slots;
    await_port_down(mctx, &ec, &o);
    if (o.expect_port_down && ec.port_down == 0) {
      fprintf(stderr, "no IBV_EVENT_PORT_ERR seen\n");
      ++failures;
    }
    send_line(sock, failures ? "FAIL\n" : "OK\n");
    printf(
        "server: %u messages of %zu bytes %s, %u verified in place, %u slots reused before "
        "the check, final ring of %" PRIu64 " verified, port events down=%u up=%u: %s\n",
        o.iters, o.size, o.imm ? "WRITE_IMM" : "WRITE", verified, overwritten, slots, ec.port_down,
        ec.port_up, failures ? "FAILED" : "ok");
  } else {
    if (!recv_line(sock, line, sizeof line) || strcmp(line, "READY") != 0)
      die("side channel: expected READY");
    uint8_t* src = buf; /* send ring: slot i % slots holds message i until its write completes */
    unsigned sent = 0, done = 0;
    bool paused = false;
    double pause_end = 0;
    const double start = now_s();
    while (done < o.iters) {
      if (now_s() > deadline) die("timeout: %u of %u writes completed", done, o.iters);
      drain_async(mctx, &ec, o.quiet);
      if (o.pause_at && sent == o.pause_at && !paused) {
        paused = true;
        pause_end = now_s() + 10;
        printf("paused at %u writes: waiting for a port event\n", sent);
      }
      const bool hold = paused && ec.port_down + ec.port_up == 0 && now_s() < pause_end;
      while (!hold && sent < o.iters && sent - done < o.tx_depth &&
             !(o.pause_at && sent == o.pause_at && !paused)) {
        uint8_t* p = src + (size_t)(sent % slots) * o.size;
        fill(p, o.size, sent);
        struct ibv_sge sge = {(uint64_t)(uintptr_t)p, (uint32_t)o.size, mr->lkey};
        struct ibv_send_wr wr = {0}, *bad = NULL;
        wr.wr_id = sent;
        wr.sg_list = &sge;
        wr.num_sge = 1;
        wr.opcode = o.imm ? IBV_WR_RDMA_WRITE_WITH_IMM : IBV_WR_RDMA_WRITE;
        wr.send_flags = IBV_SEND_SIGNALED;
        wr.imm_data = htonl(sent);
        wr.wr.rdma.remote_addr = peer.vaddr + (sent % slots) * o.size;
        wr.wr.rdma.rkey = peer.rkey;
        rc = mrc_post_send(qp, &wr, &bad);
        if (rc == ENOMEM) break; /* send queue full: poll first */
        if (rc) die("mrc_post_send: %s", strerror(rc));
        ++sent;
      }
      const int n = mrc_poll_cq(cq, 64, wc);
      if (n < 0) die("mrc_poll_cq failed");
      for (int k = 0; k < n; ++k) {
        if (wc[k].status != IBV_WC_SUCCESS)
          die("write %" PRIu64 ": %s", wc[k].wr_id, ibv_wc_status_str(wc[k].status));
        ++done;
      }
      if (n == 0) {
        struct timespec ts = {0, 20 * 1000};
        nanosleep(&ts, NULL);
      }
    }
    const double secs = now_s() - start;
    send_line(sock, "DONE\n");
    if (!recv_line(sock, line, sizeof line)) die("side channel closed before the verdict");
    if (strcmp(line, "OK") != 0) {
      fprintf(stderr, "server verdict: %s\n", line);
      ++failures;
    }
    await_port_down(mctx, &ec, &o);
    if (o.expect_port_down && ec.port_down == 0) {
      fprintf(stderr, "no IBV_EVENT_PORT_ERR seen\n");
      ++failures;
    }
    const double mb = (double)o.size * o.iters / secs / 1e6;
    if (!o.quiet)
      printf(
          "---------------------------------------------------------------------------\n"
          "                    RDMA_Write%s BW Test (OCP MRC API, %s)\n"
          " #bytes     #iterations    BW average[MB/sec]    BW average[Gb/sec]   "
          "MsgRate[Mpps]\n",
          o.imm ? "_Imm" : "", ibv_get_device_name(ctx->device));
    printf(" %-10zu %-14u %-21.2f %-20.3f %.6f\n", o.size, o.iters, mb, mb * 8 / 1e3,
           o.iters / secs / 1e6);
    printf("client: verified by the server: %s; port events down=%u up=%u\n",
           failures ? "FAILED" : "ok", ec.port_down, ec.port_up);
  }

  /* Teardown in the examples' order: QP, CQ and hint, context, MR, PD, device (7.2). */
  if ((rc = mrc_destroy_qp(qp)) != 0) die("mrc_destroy_qp: %s", strerror(rc));
  if ((rc = mrc_destroy_cq(cq)) != 0) die("mrc_destroy_cq: %s", strerror(rc));
  if (mrc_destroy_qp_hint(hint) != 0) die("mrc_destroy_qp_hint: %s", strerror(errno));
  if (mrc_destroy_context(mctx) != 0) die("mrc_destroy_context: %s", strerror(errno));
  if (ibv_dereg_mr(mr) != 0) die("ibv_dereg_mr failed");
  if (ibv_dealloc_pd(pd) != 0) die("ibv_dealloc_pd failed");
  if (ibv_close_device(ctx) != 0) die("ibv_close_device failed");
  free(buf);
  close(sock);
  return failures ? 1 : 0;
}
