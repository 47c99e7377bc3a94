// The `mrc` libfabric provider (libmrc-fi.so; docs/libfabric.md): libfabric's objects over one
// RdmEndpoint (fi/rdm_endpoint.h), one engine and the Linux UDP driver per domain.
//
//   fabric  -> nothing of its own
//   domain  -> engine + UdpDriver (one socket per plane) + the setup socket + RdmEndpoint
//   ep      -> the domain's RdmEndpoint with its CQs and AV (one endpoint per domain)
//   av      -> fi_addr_t (an index) <-> the endpoint's peer ids
//   cq      -> completions of the bound endpoint; every read is one progress turn
//   mr      -> a region of the domain's engine (keys are the engine's rkeys)
//   eq      -> events the application writes (an RDM endpoint has none of its own)
//
// Progress is manual and driven from the CQ: fi_cq_read runs one turn of the driver (receive,
// transmit, timers), feeds the engine's completions and the setup socket's datagrams to the
// endpoint, and hands out what completed. Operations post and run a turn so that their first
// packets leave at once. One mutex per domain makes every call safe from several threads.
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <rdma/fabric.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_eq.h>
#include <rdma/fi_errno.h>
#include <rdma/fi_rma.h>
#include <rdma/fi_tagged.h>
#include <rdma/providers/fi_prov.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <type_traits>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "fi/rdm_endpoint.h"
#include "net/fabric.h"
#include "net/netns_exec.h"
#include "net/qlog_file.h"
#include "net/sockets.h"
#include "net/udp_driver.h"

namespace {

using namespace mrc;
using namespace mrc::fi;

constexpr const char* kName = "mrc";
constexpr uint32_t kProviderVersion = FI_VERSION(1, 0);
constexpr uint64_t kCaps = FI_MSG | FI_TAGGED | FI_RMA | FI_WRITE | FI_REMOTE_WRITE | FI_SEND |
                           FI_RECV | FI_SOURCE | FI_DIRECTED_RECV | FI_LOCAL_COMM | FI_REMOTE_COMM;
constexpr size_t kQueueSize = 4096;
constexpr uint64_t kMaxMessage = 1ull << 32;

fi_provider g_provider = {};

// ---------------------------------------------------------------------------------------------
// Configuration: FI_MRC_* parameters (fi_info -e lists them)

struct Settings {
  std::string ports;    // empty: the fabric's addresses, else ::1
  std::string ev_mode;  // empty: srv6 on a fabric, else udp
  std::string fabric;   // mrc-fabric's fabric.json: addresses and uSIDs of host `host`
  int host = -1;
  int mtu = 4096;
  int ring_slots = 64;
  int slot_bytes = 16384;
  int evs_per_plane = 8;
  int base_rtt_us = int(net::kSoftwarePathBaseRtt / us(1));
  int mpr = net::kSoftwarePathMpr;
  std::string qlog;  // the engine's event log: <qlog>.<pid>-<domain>.jsonl (empty: none)
};

Settings read_settings() {
  Settings s;
  char* text = nullptr;
  if (fi_param_get_str(&g_provider, "ports", &text) == FI_SUCCESS && text) s.ports = text;
  text = nullptr;
  if (fi_param_get_str(&g_provider, "ev_mode", &text) == FI_SUCCESS && text) s.ev_mode = text;
  text = nullptr;
  if (fi_param_get_str(&g_provider, "fabric", &text) == FI_SUCCESS && text) s.fabric = text;
  int v = 0;
  if (fi_param_get_int(&g_provider, "host", &v) == FI_SUCCESS) s.host = v;
  if (fi_param_get_int(&g_provider, "mtu", &v) == FI_SUCCESS) s.mtu = v;
  if (fi_param_get_int(&g_provider, "ring_slots", &v) == FI_SUCCESS) s.ring_slots = v;
  if (fi_param_get_int(&g_provider, "slot_bytes", &v) == FI_SUCCESS) s.slot_bytes = v;
  if (fi_param_get_int(&g_provider, "evs_per_plane", &v) == FI_SUCCESS) s.evs_per_plane = v;
  if (fi_param_get_int(&g_provider, "base_rtt_us", &v) == FI_SUCCESS) s.base_rtt_us = v;
  if (fi_param_get_int(&g_provider, "mpr", &v) == FI_SUCCESS) s.mpr = v;
  text = nullptr;
  if (fi_param_get_str(&g_provider, "qlog", &text) == FI_SUCCESS && text) s.qlog = text;
  return s;
}

void warn(const std::string& what) {
  std::fprintf(stderr, "libfabric mrc provider: %s\n", what.c_str());
}

size_t eager_size(const Settings& s) {
  return size_t(s.slot_bytes) - kSlotHeaderBytes;
}

// ---------------------------------------------------------------------------------------------
// Objects

struct Domain;
struct Ep;
struct Av;

struct Cq {
  fid_cq cq{};
  Domain* dom = nullptr;
  fi_cq_format format = FI_CQ_FORMAT_CONTEXT;
  struct Entry {
    FiCompletion c;
    uint64_t flags = 0;
    std::string cause;  // errors of a failed connection: its first error, for err_data
  };
  std::deque<Entry> entries, errors;
  Av* av = nullptr;  // the endpoint's, for readfrom
  // The provider's err_data buffer (valid until the next fi_cq_readerr) and the text
  // fi_cq_strerror returns when the caller gives no buffer.
  std::string err_data, strerror_text;
};

struct Av {
  fid_av av{};
  Domain* dom = nullptr;
  std::vector<uint32_t> peers;                      // fi_addr -> peer id
  std::unordered_map<uint32_t, fi_addr_t> by_peer;  // peer id -> fi_addr
};

struct Mr {
  fid_mr mr{};
  Domain* dom = nullptr;
  uint32_t lkey = 0;
};

// fi_inject (no completion), FI_INJECT on a *msg call (a completion), or neither.
enum class Inject { kNo, kSilent, kReported };

// The provider's copy of an injected buffer, kept until the operation completes. fi_inject
// calls report no completion; a sendmsg/writemsg with FI_INJECT still reports one, under the
// caller's context.
struct InjectCopy {
  std::vector<uint8_t> bytes;
  bool report = false;
  void* context = nullptr;
};

struct Ep {
  fid_ep ep{};
  Domain* dom = nullptr;
  Cq* tx = nullptr;
  Cq* rx = nullptr;
  Av* av = nullptr;
  bool enabled = false;
  bool directed_recv = false;  // FI_DIRECTED_RECV: a receive's source address selects
  std::unordered_map<void*, std::unique_ptr<InjectCopy>> injects;

  // Copies an injected buffer; `context` becomes the copy's key (the operation's context),
  // and the caller's context is kept in the copy for the completion, if one is reported.
  const void* keep_copy(const void* buf, size_t len, void*& context, bool report) {
    auto copy = std::make_unique<InjectCopy>();
    copy->bytes.assign(static_cast<const uint8_t*>(buf), static_cast<const uint8_t*>(buf) + len);
    copy->report = report;
    copy->context = context;
    context = copy.get();
    const void* bytes = copy->bytes.data();
    injects[context] = std::move(copy);
    return bytes;
  }
};

// The endpoint's I/O (peer binding, setup datagrams) over the domain's driver and setup socket.
struct DomainIo : RdmEndpoint::Io {
  net::UdpDriver* driver = nullptr;
  int setup_fd = -1;
  std::map<EndpointName, uint32_t> handles;

  NetResult<uint32_t> bind_peer(const EndpointName& peer) override {
    if (auto it = handles.find(peer); it != handles.end()) return it->second;
    const uint32_t handle = uint32_t(handles.size()) + 1;
    std::vector<net::Endpoint> eps(peer.planes.size());
    for (size_t p = 0; p < eps.size(); ++p) {
      std::memcpy(&eps[p].addr, peer.planes[p].addr.data(), 16);
      eps[p].port = peer.planes[p].data_port;
    }
    if (auto ok = driver->set_peer(handle, eps); !ok) return std::unexpected(ok.error());
    handles[peer] = handle;
    return handle;
  }

  uint32_t setup_sends = 0;

  void send_setup(const EndpointName& to, std::span<const uint8_t> datagram) override {
    sockaddr_in6 a{};
    a.sin6_family = AF_INET6;
    std::memcpy(&a.sin6_addr, to.planes[0].addr.data(), 16);
    a.sin6_port = htons(to.setup_port);
    // A flow label of its own per datagram (never 0): the fabric's multipath hash includes it,
    // so a repeat takes another path than the one before, and setup survives a dead path
    // (a silently blackholed spine) that a fixed label would hit on every retry.
    const uint32_t label = 1 + (++setup_sends * 0x9E3779B1u >> 12) % 0xFFFFFu;
    a.sin6_flowinfo = htonl(label);
    // A lost setup datagram is repeated by the endpoint's timer.
    (void)::sendto(setup_fd, datagram.data(), datagram.size(), MSG_DONTWAIT,
                   reinterpret_cast<sockaddr*>(&a), sizeof a);
  }
};

// libfabric hands back the fid_domain it was given: it is the first member, and Domain has no
// base class or virtual function, so the fid's address is the domain's.
struct Domain {
  fid_domain dom{};
  std::mutex mu;
  Settings settings;
  std::unique_ptr<net::QlogFile> qlog;  // declared before the engine: outlives its use
  std::unique_ptr<Engine> engine;
  std::unique_ptr<net::UdpDriver> driver;
  net::UniqueFd setup;
  std::unique_ptr<DomainIo> io = std::make_unique<DomainIo>();
  std::unique_ptr<RdmEndpoint> rdm;
  EndpointName name;
  Ep* ep = nullptr;
  uint32_t api_version = 0;  // the fabric's (fi_fabric's attr): err_data's rules depend on it
  static constexpr Time kSetupReadInterval = us(20);
  Time next_setup_read = 0;

  void dispatch();
  // One turn: the driver's I/O and timers, the engine's completions, setup datagrams.
  void progress(Time max_wait = 0) {
    (void)driver->poll(max_wait);
    const Time now = driver->now();
    Completion c;
    while (engine->poll_completion(c))
      rdm->on_engine_completion(now, c);
    Event e;
    while (engine->poll_event(e))
      rdm->on_engine_event(now, e);
    // The setup socket is read every kSetupReadInterval, not every turn: a receive system
    // call per fi_cq_read cost a few percent of a busy-polling rank, and a connection's setup
    // can wait 20 us.
    if (now >= next_setup_read) {
      next_setup_read = now + kSetupReadInterval;
      uint8_t buf[2048];
      for (;;) {
        const ssize_t n = ::recv(setup.get(), buf, sizeof buf, MSG_DONTWAIT);
        if (n <= 0) break;
        rdm->on_setup_datagram(now, {buf, size_t(n)});
      }
    }
    if (now >= rdm->next_deadline()) rdm->on_timer(now);
    // What the endpoint posted in response leaves in this turn, not the next.
    (void)driver->poll(0);
    while (engine->poll_completion(c))
      rdm->on_engine_completion(driver->now(), c);
    dispatch();
  }
};

// Each object is found from the fid libfabric hands back by a cast: the fid comes first and
// nothing (a base class, a virtual table) may go before it.
static_assert(std::is_standard_layout_v<Cq>);
static_assert(std::is_standard_layout_v<Av>);
static_assert(std::is_standard_layout_v<Mr>);
static_assert(std::is_standard_layout_v<Ep>);
// Domain holds std::unique_ptrs, which clang 14 with libstdc++ 12 does not count as standard
// layout (the deleter is a [[no_unique_address]] member of a tuple base): there Domain is only
// checked for a virtual table.
static_assert(std::is_standard_layout_v<Domain> ||
              !std::is_standard_layout_v<std::unique_ptr<Engine>>);
static_assert(!std::is_polymorphic_v<Domain>);

// ---------------------------------------------------------------------------------------------
// Shared helpers

int no_ops_open(fid*, const char*, uint64_t, void**, void*) {
  return -FI_ENOSYS;
}
int no_bind(fid*, fid*, uint64_t) {
  return -FI_ENOSYS;
}
int no_control(fid*, int, void*) {
  return -FI_ENOSYS;
}

ssize_t engine_status(const Status& st) {
  if (st) return 0;
  switch (st.error()) {
    case Error::kQueueFull:
    case Error::kNoResources:
      return -FI_EAGAIN;
    default:
      return -FI_EINVAL;
  }
}

int op_errno(OpError e) {
  switch (e) {
    case OpError::kNone:
      return 0;
    case OpError::kTruncated:
      return FI_ETRUNC;
    case OpError::kCanceled:
      return FI_ECANCELED;
    case OpError::kPeerFailed:
      return FI_EIO;
    case OpError::kUnreachable:
      return FI_EHOSTUNREACH;
    case OpError::kRejected:
      return FI_ECONNREFUSED;
    case OpError::kNoMessage:
      return FI_ENOMSG;
  }
  return FI_EOTHER;
}

// prov_errno of an error entry: the OpError in the low byte, and for an operation failed with
// its connection the connection's first cause (FailureCause) in the next.
int prov_errno(const FiCompletion& c) {
  return int(c.error) | int(c.cause) << 8;
}

uint64_t completion_flags(const FiCompletion& c) {
  switch (c.kind) {
    case OpKind::kSend:
      return FI_SEND | (c.tagged ? FI_TAGGED : FI_MSG);
    case OpKind::kRecv:
      return FI_RECV | (c.tagged ? FI_TAGGED : FI_MSG) | (c.has_data ? FI_REMOTE_CQ_DATA : 0);
    case OpKind::kWrite:
      return FI_RMA | FI_WRITE;
    case OpKind::kRemoteData:
      return FI_RMA | FI_REMOTE_WRITE | FI_REMOTE_CQ_DATA;
  }
  return 0;
}

void Domain::dispatch() {
  // A connection that fails says why, once: its first error (what failed, the status, the
  // peer, the engine's view of the QP), not the flushed completions that follow it.
  PeerFailure f;
  while (rdm->poll_failure(f))
    warn("a connection failed: " + f.text);
  FiCompletion c;
  while (rdm->poll_completion(c)) {
    if (!ep) continue;
    if (auto it = ep->injects.find(c.context); it != ep->injects.end()) {
      const bool report = it->second->report;
      c.context = it->second->context;
      ep->injects.erase(it);  // the copy goes
      if (!report) continue;
    }
    const bool tx = c.kind == OpKind::kSend || c.kind == OpKind::kWrite;
    Cq* cq = tx ? ep->tx : ep->rx;
    if (!cq) continue;
    if (c.error == OpError::kNone) {
      cq->entries.push_back({c, completion_flags(c), {}});
      continue;
    }
    Cq::Entry e{c, completion_flags(c), {}};
    if (c.cause != FailureCause::kNone)
      if (const PeerFailure* pf = rdm->failure(c.peer)) e.cause = pf->text;
    cq->errors.push_back(std::move(e));
  }
}

Ep* ep_of(fid_ep* ep) {
  return reinterpret_cast<Ep*>(ep);
}

// fi_addr_t -> peer id; nullopt for FI_ADDR_UNSPEC (any), or -1 (as an error) when unknown.
std::optional<uint32_t> peer_of(Ep* ep, fi_addr_t a, bool& bad) {
  bad = false;
  if (a == FI_ADDR_UNSPEC) return std::nullopt;
  if (!ep->av || a >= ep->av->peers.size()) {
    bad = true;
    return std::nullopt;
  }
  return ep->av->peers[a];
}

// ---------------------------------------------------------------------------------------------
// CQ

ssize_t cq_copy(Cq* cq, void* buf, size_t count, fi_addr_t* src) {
  if (!cq->errors.empty()) return -FI_EAVAIL;
  if (cq->entries.empty()) return -FI_EAGAIN;
  size_t n = 0;
  for (; n < count && !cq->entries.empty(); ++n) {
    const Cq::Entry e = cq->entries.front();
    cq->entries.pop_front();
    const FiCompletion& c = e.c;
    switch (cq->format) {
      case FI_CQ_FORMAT_CONTEXT:
        static_cast<fi_cq_entry*>(buf)[n] = {c.context};
        break;
      case FI_CQ_FORMAT_MSG:
        static_cast<fi_cq_msg_entry*>(buf)[n] = {c.context, e.flags, size_t(c.len)};
        break;
      case FI_CQ_FORMAT_DATA:
        static_cast<fi_cq_data_entry*>(buf)[n] = {
            c.context, e.flags, size_t(c.len), c.kind == OpKind::kRecv ? c.buf : nullptr, c.data};
        break;
      default:
        static_cast<fi_cq_tagged_entry*>(buf)[n] = {
            c.context,     e.flags,
            size_t(c.len), c.kind == OpKind::kRecv ? c.buf : nullptr,
            c.data,        c.kind == OpKind::kRecv ? c.tag : 0};
        break;
    }
    if (src) {
      fi_addr_t from = FI_ADDR_NOTAVAIL;
      if ((c.kind == OpKind::kRecv || c.kind == OpKind::kRemoteData) && cq->av)
        if (auto it = cq->av->by_peer.find(c.peer); it != cq->av->by_peer.end()) from = it->second;
      src[n] = from;
    }
  }
  return ssize_t(n);
}

ssize_t cq_readfrom(fid_cq* f, void* buf, size_t count, fi_addr_t* src) {
  Cq* cq = reinterpret_cast<Cq*>(f);
  std::lock_guard lock(cq->dom->mu);
  if (cq->entries.empty() && cq->errors.empty()) cq->dom->progress();
  return cq_copy(cq, buf, count, src);
}

ssize_t cq_read(fid_cq* f, void* buf, size_t count) {
  return cq_readfrom(f, buf, count, nullptr);
}

ssize_t cq_readerr(fid_cq* f, fi_cq_err_entry* buf, uint64_t) {
  Cq* cq = reinterpret_cast<Cq*>(f);
  std::lock_guard lock(cq->dom->mu);
  if (cq->errors.empty()) return -FI_EAGAIN;
  const Cq::Entry e = std::move(cq->errors.front());
  cq->errors.pop_front();
  const FiCompletion& c = e.c;
  buf->op_context = c.context;
  buf->flags = e.flags;
  buf->len = size_t(c.len);
  buf->buf = c.kind == OpKind::kRecv ? c.buf : nullptr;
  buf->data = c.data;
  buf->tag = c.tag;
  buf->olen = size_t(c.olen);
  buf->err = op_errno(c.error);
  buf->prov_errno = prov_errno(c);
  // err_data: the failed connection's first error as text (NUL-terminated), for
  // fi_cq_strerror. From API 1.5 on a caller may pass a buffer of its own (err_data_size > 0):
  // the text goes there, cut to fit; otherwise err_data points at the CQ's buffer, valid
  // until the next fi_cq_readerr.
  const std::string text = e.cause.empty() && c.cause != FailureCause::kNone
                               ? std::string(failure_cause_name(c.cause))
                               : e.cause;
  const bool own_buffer = FI_VERSION_GE(cq->dom->api_version, FI_VERSION(1, 5)) &&
                          buf->err_data_size > 0 && buf->err_data;
  if (text.empty()) {
    if (!own_buffer) buf->err_data = nullptr;
    buf->err_data_size = 0;
  } else if (own_buffer) {
    const size_t n = std::min(text.size(), buf->err_data_size - 1);
    std::memcpy(buf->err_data, text.data(), n);
    static_cast<char*>(buf->err_data)[n] = '\0';
    buf->err_data_size = n + 1;
  } else {
    cq->err_data = text;
    buf->err_data = cq->err_data.data();
    buf->err_data_size = cq->err_data.size() + 1;
  }
  return 1;
}

ssize_t cq_sreadfrom(fid_cq* f, void* buf, size_t count, fi_addr_t* src, const void*,
                     int timeout_ms) {
  Cq* cq = reinterpret_cast<Cq*>(f);
  std::unique_lock lock(cq->dom->mu);
  const Time start = cq->dom->driver->now();
  for (;;) {
    cq->dom->progress(us(200));
    const ssize_t n = cq_copy(cq, buf, count, src);
    if (n != -FI_EAGAIN) return n;
    if (timeout_ms >= 0 && cq->dom->driver->now() - start >= ms(uint64_t(timeout_ms)))
      return -FI_EAGAIN;
  }
}

ssize_t cq_sread(fid_cq* f, void* buf, size_t count, const void* cond, int timeout) {
  return cq_sreadfrom(f, buf, count, nullptr, cond, timeout);
}

int cq_signal(fid_cq*) {
  return -FI_ENOSYS;
}

// The error, then (for a failed connection) its first error: err_data's text from
// fi_cq_readerr, or the cause's name when the caller kept no err_data.
const char* cq_strerror(fid_cq* f, int prov_errno, const void* err_data, char* buf, size_t len) {
  Cq* cq = reinterpret_cast<Cq*>(f);
  std::string text = op_error_text(OpError(prov_errno & 0xFF));
  const auto cause = FailureCause(uint32_t(prov_errno) >> 8 & 0xFF);
  if (cause != FailureCause::kNone && uint8_t(cause) < kFailureCauseCount)
    text += std::string(": ") +
            (err_data ? static_cast<const char*>(err_data) : failure_cause_name(cause));
  if (buf && len) {
    std::snprintf(buf, len, "%s", text.c_str());
    return buf;
  }
  std::lock_guard lock(cq->dom->mu);
  cq->strerror_text = std::move(text);
  return cq->strerror_text.c_str();
}

int cq_close(fid* f) {
  Cq* cq = reinterpret_cast<Cq*>(f);
  {
    std::lock_guard lock(cq->dom->mu);
    if (cq->dom->ep && (cq->dom->ep->tx == cq || cq->dom->ep->rx == cq)) return -FI_EBUSY;
  }
  delete cq;
  return 0;
}

fi_ops g_cq_fi_ops = {sizeof(fi_ops), cq_close, no_bind, no_control, no_ops_open, nullptr, nullptr};
fi_ops_cq g_cq_ops = {sizeof(fi_ops_cq), cq_read,      cq_readfrom, cq_readerr,
                      cq_sread,          cq_sreadfrom, cq_signal,   cq_strerror};

int cq_open(fid_domain* d, fi_cq_attr* attr, fid_cq** out, void* context) {
  Domain* dom = reinterpret_cast<Domain*>(d);
  auto cq = std::make_unique<Cq>();
  cq->dom = dom;
  if (attr) {
    if (attr->wait_obj != FI_WAIT_NONE && attr->wait_obj != FI_WAIT_UNSPEC) return -FI_ENOSYS;
    if (attr->format != FI_CQ_FORMAT_UNSPEC) cq->format = attr->format;
    if (cq->format > FI_CQ_FORMAT_TAGGED) return -FI_ENOSYS;
  }
  cq->cq.fid.fclass = FI_CLASS_CQ;
  cq->cq.fid.context = context;
  cq->cq.fid.ops = &g_cq_fi_ops;
  cq->cq.ops = &g_cq_ops;
  *out = &cq.release()->cq;
  return 0;
}

// ---------------------------------------------------------------------------------------------
// AV

int av_insert(fid_av* f, const void* addr, size_t count, fi_addr_t* fi_addr, uint64_t, void*) {
  Av* av = reinterpret_cast<Av*>(f);
  std::lock_guard lock(av->dom->mu);
  const size_t len = name_bytes(av->dom->name);
  int inserted = 0;
  for (size_t i = 0; i < count; ++i) {
    const auto* bytes = static_cast<const uint8_t*>(addr) + i * len;
    auto name = decode_name({bytes, len});
    Result<uint32_t> peer =
        name ? av->dom->rdm->insert_peer(*name) : Result<uint32_t>(std::unexpected(name.error()));
    if (!peer) {
      if (fi_addr) fi_addr[i] = FI_ADDR_NOTAVAIL;
      continue;
    }
    fi_addr_t a;
    if (auto it = av->by_peer.find(*peer); it != av->by_peer.end()) {
      a = it->second;
    } else {
      a = av->peers.size();
      av->peers.push_back(*peer);
      av->by_peer[*peer] = a;
    }
    if (fi_addr) fi_addr[i] = a;
    ++inserted;
  }
  return inserted;
}

int av_insertsvc(fid_av*, const char*, const char*, fi_addr_t*, uint64_t, void*) {
  return -FI_ENOSYS;
}
int av_insertsym(fid_av*, const char*, size_t, const char*, size_t, fi_addr_t*, uint64_t, void*) {
  return -FI_ENOSYS;
}
int av_remove(fid_av*, fi_addr_t*, size_t, uint64_t) {
  return 0;  // peers stay known; their fi_addr_t values are not reused
}

int av_lookup(fid_av* f, fi_addr_t a, void* addr, size_t* addrlen) {
  Av* av = reinterpret_cast<Av*>(f);
  std::lock_guard lock(av->dom->mu);
  if (a >= av->peers.size()) return -FI_EINVAL;
  const auto bytes = encode_name(*av->dom->rdm->peer_name(av->peers[a]));
  const size_t room = *addrlen;
  *addrlen = bytes.size();
  std::memcpy(addr, bytes.data(), std::min(room, bytes.size()));
  return room < bytes.size() ? -FI_ETOOSMALL : 0;
}

const char* av_straddr(fid_av*, const void* addr, char* buf, size_t* len) {
  // "mrc:[addr]:port,...;setup=port" (as much as fits; *len says what it needed).
  std::string text = "mrc:";
  const uint8_t* b = static_cast<const uint8_t*>(addr);
  auto name = decode_name({b, kNameHeaderBytes + size_t(b[5]) * kNamePlaneBytes});
  if (!name) {
    text += "?";
  } else {
    for (size_t i = 0; i < name->planes.size(); ++i) {
      char ip[INET6_ADDRSTRLEN];
      inet_ntop(AF_INET6, name->planes[i].addr.data(), ip, sizeof ip);
      text += (i ? ",[" : "[") + std::string(ip) + "]:" + std::to_string(name->planes[i].data_port);
    }
    text += ";setup=" + std::to_string(name->setup_port);
  }
  if (*len) std::snprintf(buf, *len, "%s", text.c_str());
  *len = text.size() + 1;
  return buf;
}

int av_close(fid* f) {
  Av* av = reinterpret_cast<Av*>(f);
  {
    std::lock_guard lock(av->dom->mu);
    if (av->dom->ep && av->dom->ep->av == av) return -FI_EBUSY;
  }
  delete av;
  return 0;
}

fi_ops g_av_fi_ops = {sizeof(fi_ops), av_close, no_bind, no_control, no_ops_open, nullptr, nullptr};
fi_ops_av g_av_ops = {sizeof(fi_ops_av), av_insert, av_insertsvc, av_insertsym,
                      av_remove,         av_lookup, av_straddr,   nullptr};

int av_open(fid_domain* d, fi_av_attr* attr, fid_av** out, void* context) {
  if (attr && attr->type != FI_AV_UNSPEC && attr->type != FI_AV_MAP && attr->type != FI_AV_TABLE)
    return -FI_EINVAL;
  if (attr && (attr->flags & FI_EVENT)) return -FI_ENOSYS;
  auto av = std::make_unique<Av>();
  av->dom = reinterpret_cast<Domain*>(d);
  av->av.fid.fclass = FI_CLASS_AV;
  av->av.fid.context = context;
  av->av.fid.ops = &g_av_fi_ops;
  av->av.ops = &g_av_ops;
  *out = &av.release()->av;
  return 0;
}

// ---------------------------------------------------------------------------------------------
// MR

int mr_close(fid* f) {
  Mr* mr = reinterpret_cast<Mr*>(f);
  {
    std::lock_guard lock(mr->dom->mu);
    (void)mr->dom->rdm->deregister_memory(mr->lkey);
  }
  delete mr;
  return 0;
}

fi_ops g_mr_fi_ops = {sizeof(fi_ops), mr_close, no_bind, no_control, no_ops_open, nullptr, nullptr};

int mr_reg(fid* f, const void* buf, size_t len, uint64_t access, uint64_t, uint64_t, uint64_t,
           fid_mr** out, void* context) {
  Domain* dom = reinterpret_cast<Domain*>(f);
  if (len == 0 || !buf) return -FI_EINVAL;
  std::lock_guard lock(dom->mu);
  auto keys = dom->rdm->register_memory(const_cast<void*>(buf), len,
                                        (access & FI_REMOTE_WRITE) != 0 || access == 0);
  if (!keys) return -FI_ENOMEM;
  auto mr = std::make_unique<Mr>();
  mr->dom = dom;
  mr->lkey = keys->lkey;
  mr->mr.fid.fclass = FI_CLASS_MR;
  mr->mr.fid.context = context;
  mr->mr.fid.ops = &g_mr_fi_ops;
  mr->mr.mem_desc = mr.get();
  mr->mr.key = keys->rkey;
  *out = &mr.release()->mr;
  return 0;
}

int mr_regv(fid* f, const iovec* iov, size_t count, uint64_t access, uint64_t offset, uint64_t key,
            uint64_t flags, fid_mr** out, void* context) {
  if (count != 1) return -FI_EINVAL;
  return mr_reg(f, iov[0].iov_base, iov[0].iov_len, access, offset, key, flags, out, context);
}

int mr_regattr(fid* f, const fi_mr_attr* attr, uint64_t flags, fid_mr** out) {
  if (!attr || attr->iov_count != 1) return -FI_EINVAL;
  return mr_reg(f, attr->mr_iov[0].iov_base, attr->mr_iov[0].iov_len, attr->access, attr->offset,
                attr->requested_key, flags, out, attr->context);
}

fi_ops_mr g_mr_ops = {sizeof(fi_ops_mr), mr_reg, mr_regv, mr_regattr};

// ---------------------------------------------------------------------------------------------
// Endpoint: data transfer

ssize_t do_send(fid_ep* e, const void* buf, size_t len, fi_addr_t dest, bool tagged, uint64_t tag,
                std::optional<uint64_t> data, void* context, Inject inject) {
  Ep* ep = ep_of(e);
  Domain* dom = ep->dom;
  std::lock_guard lock(dom->mu);
  if (!ep->enabled) return -FI_EOPBADSTATE;
  bool bad = false;
  const auto peer = peer_of(ep, dest, bad);
  if (bad || !peer) return -FI_EINVAL;
  if (inject != Inject::kNo) {
    if (len > eager_size(dom->settings)) return -FI_EINVAL;
    buf = ep->keep_copy(buf, len, context, inject == Inject::kReported);
  }
  const auto st = dom->rdm->send(dom->driver->now(), *peer, buf, len, tagged, tag, data, context);
  if (!st && inject != Inject::kNo) ep->injects.erase(context);
  if (!st) return engine_status(st);
  dom->progress();
  return 0;
}

ssize_t do_recv(fid_ep* e, void* buf, size_t len, fi_addr_t src, bool tagged, uint64_t tag,
                uint64_t ignore, void* context) {
  Ep* ep = ep_of(e);
  Domain* dom = ep->dom;
  std::lock_guard lock(dom->mu);
  if (!ep->enabled) return -FI_EOPBADSTATE;
  bool bad = false;
  const auto peer = peer_of(ep, ep->directed_recv ? src : FI_ADDR_UNSPEC, bad);
  if (bad) return -FI_EINVAL;
  const auto st = dom->rdm->recv(dom->driver->now(), peer, buf, len, tagged, tag, ignore, context);
  if (!st) return engine_status(st);
  dom->dispatch();
  return 0;
}

ssize_t msg_recv(fid_ep* ep, void* buf, size_t len, void*, fi_addr_t src, void* context) {
  return do_recv(ep, buf, len, src, false, 0, 0, context);
}
ssize_t msg_recvv(fid_ep* ep, const iovec* iov, void**, size_t count, fi_addr_t src,
                  void* context) {
  if (count > 1) return -FI_EINVAL;
  return do_recv(ep, count ? iov[0].iov_base : nullptr, count ? iov[0].iov_len : 0, src, false, 0,
                 0, context);
}
ssize_t msg_recvmsg(fid_ep* ep, const fi_msg* m, uint64_t flags) {
  if (m->iov_count > 1 || (flags & (FI_PEEK | FI_CLAIM | FI_MULTI_RECV))) return -FI_EINVAL;
  return do_recv(ep, m->iov_count ? m->msg_iov[0].iov_base : nullptr,
                 m->iov_count ? m->msg_iov[0].iov_len : 0, m->addr, false, 0, 0, m->context);
}
ssize_t msg_send(fid_ep* ep, const void* buf, size_t len, void*, fi_addr_t dest, void* context) {
  return do_send(ep, buf, len, dest, false, 0, std::nullopt, context, Inject::kNo);
}
ssize_t msg_sendv(fid_ep* ep, const iovec* iov, void**, size_t count, fi_addr_t dest,
                  void* context) {
  if (count > 1) return -FI_EINVAL;
  return do_send(ep, count ? iov[0].iov_base : nullptr, count ? iov[0].iov_len : 0, dest, false, 0,
                 std::nullopt, context, Inject::kNo);
}
ssize_t msg_sendmsg(fid_ep* ep, const fi_msg* m, uint64_t flags) {
  if (m->iov_count > 1) return -FI_EINVAL;
  return do_send(ep, m->iov_count ? m->msg_iov[0].iov_base : nullptr,
                 m->iov_count ? m->msg_iov[0].iov_len : 0, m->addr, false, 0,
                 (flags & FI_REMOTE_CQ_DATA) ? std::optional<uint64_t>(m->data) : std::nullopt,
                 m->context, (flags & FI_INJECT) ? Inject::kReported : Inject::kNo);
}
ssize_t msg_inject(fid_ep* ep, const void* buf, size_t len, fi_addr_t dest) {
  return do_send(ep, buf, len, dest, false, 0, std::nullopt, nullptr, Inject::kSilent);
}
ssize_t msg_senddata(fid_ep* ep, const void* buf, size_t len, void*, uint64_t data, fi_addr_t dest,
                     void* context) {
  return do_send(ep, buf, len, dest, false, 0, data, context, Inject::kNo);
}
ssize_t msg_injectdata(fid_ep* ep, const void* buf, size_t len, uint64_t data, fi_addr_t dest) {
  return do_send(ep, buf, len, dest, false, 0, data, nullptr, Inject::kSilent);
}

fi_ops_msg g_msg_ops = {sizeof(fi_ops_msg), msg_recv,    msg_recvv,  msg_recvmsg,  msg_send,
                        msg_sendv,          msg_sendmsg, msg_inject, msg_senddata, msg_injectdata};

ssize_t tag_recv(fid_ep* ep, void* buf, size_t len, void*, fi_addr_t src, uint64_t tag,
                 uint64_t ignore, void* context) {
  return do_recv(ep, buf, len, src, true, tag, ignore, context);
}
ssize_t tag_recvv(fid_ep* ep, const iovec* iov, void**, size_t count, fi_addr_t src, uint64_t tag,
                  uint64_t ignore, void* context) {
  if (count > 1) return -FI_EINVAL;
  return do_recv(ep, count ? iov[0].iov_base : nullptr, count ? iov[0].iov_len : 0, src, true, tag,
                 ignore, context);
}
// FI_PEEK (with FI_CLAIM: set the message aside for this context), FI_CLAIM (receive what
// this context claimed; with FI_DISCARD: drop it). FI_PEEK | FI_DISCARD is not offered.
ssize_t tag_claim(fid_ep* e, const fi_msg_tagged* m, uint64_t flags) {
  Ep* ep = ep_of(e);
  Domain* dom = ep->dom;
  std::lock_guard lock(dom->mu);
  if (!ep->enabled) return -FI_EOPBADSTATE;
  if ((flags & FI_PEEK) && (flags & FI_DISCARD)) return -FI_EINVAL;
  Status st;
  if (flags & FI_PEEK) {
    bool bad = false;
    const auto peer = peer_of(ep, ep->directed_recv ? m->addr : FI_ADDR_UNSPEC, bad);
    if (bad) return -FI_EINVAL;
    dom->progress();  // what has arrived by now counts
    st = dom->rdm->peek(peer, m->tag, m->ignore, m->context, (flags & FI_CLAIM) != 0);
  } else {
    st = dom->rdm->recv_claimed(
        dom->driver->now(), m->context, m->iov_count ? m->msg_iov[0].iov_base : nullptr,
        m->iov_count ? m->msg_iov[0].iov_len : 0, (flags & FI_DISCARD) != 0);
  }
  if (!st) return engine_status(st);
  dom->dispatch();
  return 0;
}

ssize_t tag_recvmsg(fid_ep* ep, const fi_msg_tagged* m, uint64_t flags) {
  if (m->iov_count > 1 || (flags & FI_MULTI_RECV)) return -FI_EINVAL;
  if (flags & (FI_PEEK | FI_CLAIM)) return tag_claim(ep, m, flags);
  return do_recv(ep, m->iov_count ? m->msg_iov[0].iov_base : nullptr,
                 m->iov_count ? m->msg_iov[0].iov_len : 0, m->addr, true, m->tag, m->ignore,
                 m->context);
}
ssize_t tag_send(fid_ep* ep, const void* buf, size_t len, void*, fi_addr_t dest, uint64_t tag,
                 void* context) {
  return do_send(ep, buf, len, dest, true, tag, std::nullopt, context, Inject::kNo);
}
ssize_t tag_sendv(fid_ep* ep, const iovec* iov, void**, size_t count, fi_addr_t dest, uint64_t tag,
                  void* context) {
  if (count > 1) return -FI_EINVAL;
  return do_send(ep, count ? iov[0].iov_base : nullptr, count ? iov[0].iov_len : 0, dest, true, tag,
                 std::nullopt, context, Inject::kNo);
}
ssize_t tag_sendmsg(fid_ep* ep, const fi_msg_tagged* m, uint64_t flags) {
  if (m->iov_count > 1) return -FI_EINVAL;
  return do_send(ep, m->iov_count ? m->msg_iov[0].iov_base : nullptr,
                 m->iov_count ? m->msg_iov[0].iov_len : 0, m->addr, true, m->tag,
                 (flags & FI_REMOTE_CQ_DATA) ? std::optional<uint64_t>(m->data) : std::nullopt,
                 m->context, (flags & FI_INJECT) ? Inject::kReported : Inject::kNo);
}
ssize_t tag_inject(fid_ep* ep, const void* buf, size_t len, fi_addr_t dest, uint64_t tag) {
  return do_send(ep, buf, len, dest, true, tag, std::nullopt, nullptr, Inject::kSilent);
}
ssize_t tag_senddata(fid_ep* ep, const void* buf, size_t len, void*, uint64_t data, fi_addr_t dest,
                     uint64_t tag, void* context) {
  return do_send(ep, buf, len, dest, true, tag, data, context, Inject::kNo);
}
ssize_t tag_injectdata(fid_ep* ep, const void* buf, size_t len, uint64_t data, fi_addr_t dest,
                       uint64_t tag) {
  return do_send(ep, buf, len, dest, true, tag, data, nullptr, Inject::kSilent);
}

fi_ops_tagged g_tagged_ops = {
    sizeof(fi_ops_tagged), tag_recv,   tag_recvv,    tag_recvmsg,   tag_send, tag_sendv,
    tag_sendmsg,           tag_inject, tag_senddata, tag_injectdata};

ssize_t do_write(fid_ep* e, const void* buf, size_t len, fi_addr_t dest, uint64_t addr,
                 uint64_t key, std::optional<uint64_t> data, void* context, Inject inject) {
  Ep* ep = ep_of(e);
  Domain* dom = ep->dom;
  std::lock_guard lock(dom->mu);
  if (!ep->enabled) return -FI_EOPBADSTATE;
  bool bad = false;
  const auto peer = peer_of(ep, dest, bad);
  if (bad || !peer || key > 0xFFFFFFFFull) return -FI_EINVAL;
  if (inject != Inject::kNo) {
    if (len > eager_size(dom->settings)) return -FI_EINVAL;
    buf = ep->keep_copy(buf, len, context, inject == Inject::kReported);
  }
  const auto st =
      dom->rdm->write(dom->driver->now(), *peer, buf, len, addr, uint32_t(key), data, context);
  if (!st && inject != Inject::kNo) ep->injects.erase(context);
  if (!st) return engine_status(st);
  dom->progress();
  return 0;
}

ssize_t rma_read(fid_ep*, void*, size_t, void*, fi_addr_t, uint64_t, uint64_t, void*) {
  return -FI_ENOSYS;  // MRC has no RDMA READ
}
ssize_t rma_readv(fid_ep*, const iovec*, void**, size_t, fi_addr_t, uint64_t, uint64_t, void*) {
  return -FI_ENOSYS;
}
ssize_t rma_readmsg(fid_ep*, const fi_msg_rma*, uint64_t) {
  return -FI_ENOSYS;
}
ssize_t rma_write(fid_ep* ep, const void* buf, size_t len, void*, fi_addr_t dest, uint64_t addr,
                  uint64_t key, void* context) {
  return do_write(ep, buf, len, dest, addr, key, std::nullopt, context, Inject::kNo);
}
ssize_t rma_writev(fid_ep* ep, const iovec* iov, void**, size_t count, fi_addr_t dest,
                   uint64_t addr, uint64_t key, void* context) {
  if (count > 1) return -FI_EINVAL;
  return do_write(ep, count ? iov[0].iov_base : nullptr, count ? iov[0].iov_len : 0, dest, addr,
                  key, std::nullopt, context, Inject::kNo);
}
ssize_t rma_writemsg(fid_ep* ep, const fi_msg_rma* m, uint64_t flags) {
  if (m->iov_count > 1 || m->rma_iov_count != 1) return -FI_EINVAL;
  return do_write(ep, m->iov_count ? m->msg_iov[0].iov_base : nullptr,
                  m->iov_count ? m->msg_iov[0].iov_len : 0, m->addr, m->rma_iov[0].addr,
                  m->rma_iov[0].key,
                  (flags & FI_REMOTE_CQ_DATA) ? std::optional<uint64_t>(m->data) : std::nullopt,
                  m->context, (flags & FI_INJECT) ? Inject::kReported : Inject::kNo);
}
ssize_t rma_inject(fid_ep* ep, const void* buf, size_t len, fi_addr_t dest, uint64_t addr,
                   uint64_t key) {
  return do_write(ep, buf, len, dest, addr, key, std::nullopt, nullptr, Inject::kSilent);
}
ssize_t rma_writedata(fid_ep* ep, const void* buf, size_t len, void*, uint64_t data, fi_addr_t dest,
                      uint64_t addr, uint64_t key, void* context) {
  return do_write(ep, buf, len, dest, addr, key, data, context, Inject::kNo);
}
ssize_t rma_injectdata(fid_ep* ep, const void* buf, size_t len, uint64_t data, fi_addr_t dest,
                       uint64_t addr, uint64_t key) {
  return do_write(ep, buf, len, dest, addr, key, data, nullptr, Inject::kSilent);
}

fi_ops_rma g_rma_ops = {sizeof(fi_ops_rma), rma_read,      rma_readv,    rma_readmsg,
                        rma_write,          rma_writev,    rma_writemsg, rma_inject,
                        rma_writedata,      rma_injectdata};

// ---------------------------------------------------------------------------------------------
// Endpoint: control

int ep_getname(fid_t f, void* addr, size_t* addrlen) {
  Ep* ep = reinterpret_cast<Ep*>(f);
  const auto bytes = encode_name(ep->dom->name);
  const size_t room = *addrlen;
  *addrlen = bytes.size();
  if (room < bytes.size()) return -FI_ETOOSMALL;
  std::memcpy(addr, bytes.data(), bytes.size());
  return 0;
}
int ep_setname(fid_t, void*, size_t) {
  return -FI_ENOSYS;
}
int ep_getpeer(fid_ep*, void*, size_t*) {
  return -FI_ENOSYS;
}
int ep_connect(fid_ep*, const void*, const void*, size_t) {
  return -FI_ENOSYS;
}
int ep_listen(fid_pep*) {
  return -FI_ENOSYS;
}
int ep_accept(fid_ep*, const void*, size_t) {
  return -FI_ENOSYS;
}
int ep_reject(fid_pep*, fid_t, const void*, size_t) {
  return -FI_ENOSYS;
}
int ep_shutdown(fid_ep*, uint64_t) {
  return -FI_ENOSYS;
}
int ep_join(fid_ep*, const void*, uint64_t, fid_mc**, void*) {
  return -FI_ENOSYS;
}

fi_ops_cm g_cm_ops = {sizeof(fi_ops_cm), ep_setname, ep_getname, ep_getpeer,  ep_connect,
                      ep_listen,         ep_accept,  ep_reject,  ep_shutdown, ep_join};

ssize_t ep_cancel(fid_t f, void* context) {
  Ep* ep = reinterpret_cast<Ep*>(f);
  std::lock_guard lock(ep->dom->mu);
  if (!ep->dom->rdm->cancel(context)) return -FI_ENOENT;
  ep->dom->dispatch();
  return 0;
}
int ep_getopt(fid_t, int, int, void*, size_t*) {
  return -FI_ENOPROTOOPT;
}
int ep_setopt(fid_t, int, int, const void*, size_t) {
  return -FI_ENOPROTOOPT;
}
int ep_tx_ctx(fid_ep*, int, fi_tx_attr*, fid_ep**, void*) {
  return -FI_ENOSYS;
}
int ep_rx_ctx(fid_ep*, int, fi_rx_attr*, fid_ep**, void*) {
  return -FI_ENOSYS;
}
ssize_t ep_size_left(fid_ep*) {
  return kQueueSize;
}

fi_ops_ep g_ep_ops = {sizeof(fi_ops_ep), ep_cancel, ep_getopt,    ep_setopt,
                      ep_tx_ctx,         ep_rx_ctx, ep_size_left, ep_size_left};

int ep_bind(fid* f, fid* b, uint64_t flags) {
  Ep* ep = reinterpret_cast<Ep*>(f);
  std::lock_guard lock(ep->dom->mu);
  switch (b->fclass) {
    case FI_CLASS_CQ: {
      Cq* cq = reinterpret_cast<Cq*>(b);
      if (flags & FI_TRANSMIT) ep->tx = cq;
      if (flags & FI_RECV) ep->rx = cq;
      if (!(flags & (FI_TRANSMIT | FI_RECV))) return -FI_EINVAL;
      return 0;
    }
    case FI_CLASS_AV:
      ep->av = reinterpret_cast<Av*>(b);
      if (ep->rx) ep->rx->av = ep->av;
      return 0;
    case FI_CLASS_EQ:
      return 0;  // no connection events on an RDM endpoint
    default:
      return -FI_ENOSYS;  // counters, SRX contexts
  }
}

int ep_control(fid* f, int command, void*) {
  Ep* ep = reinterpret_cast<Ep*>(f);
  if (command != FI_ENABLE) return -FI_ENOSYS;
  std::lock_guard lock(ep->dom->mu);
  if (!ep->av || (!ep->tx && !ep->rx)) return -FI_ENOCQ;
  if (ep->rx) ep->rx->av = ep->av;
  if (ep->tx) ep->tx->av = ep->av;
  ep->enabled = true;
  return 0;
}

int ep_close(fid* f) {
  Ep* ep = reinterpret_cast<Ep*>(f);
  {
    std::lock_guard lock(ep->dom->mu);
    ep->dom->ep = nullptr;
  }
  delete ep;
  return 0;
}

fi_ops g_ep_fi_ops = {sizeof(fi_ops), ep_close, ep_bind, ep_control, no_ops_open, nullptr, nullptr};

int endpoint_open(fid_domain* d, fi_info* info, fid_ep** out, void* context) {
  Domain* dom = reinterpret_cast<Domain*>(d);
  std::lock_guard lock(dom->mu);
  if (dom->ep) return -FI_EBUSY;  // one endpoint per domain
  if (info && info->ep_attr && info->ep_attr->type != FI_EP_RDM &&
      info->ep_attr->type != FI_EP_UNSPEC)
    return -FI_EINVAL;
  auto ep = std::make_unique<Ep>();
  ep->dom = dom;
  ep->directed_recv = !info || (info->caps & FI_DIRECTED_RECV) != 0;
  ep->ep.fid.fclass = FI_CLASS_EP;
  ep->ep.fid.context = context;
  ep->ep.fid.ops = &g_ep_fi_ops;
  ep->ep.ops = &g_ep_ops;
  ep->ep.cm = &g_cm_ops;
  ep->ep.msg = &g_msg_ops;
  ep->ep.rma = &g_rma_ops;
  ep->ep.tagged = &g_tagged_ops;
  dom->ep = ep.get();
  *out = &ep.release()->ep;
  return 0;
}

// ---------------------------------------------------------------------------------------------
// Domain and fabric

int domain_close(fid* f) {
  Domain* dom = reinterpret_cast<Domain*>(f);
  if (dom->ep) return -FI_EBUSY;
  delete dom;
  return 0;
}

fi_ops g_domain_fi_ops = {sizeof(fi_ops), domain_close, no_bind, no_control,
                          no_ops_open,    nullptr,      nullptr};

int no_scalable_ep(fid_domain*, fi_info*, fid_ep**, void*) {
  return -FI_ENOSYS;
}
int no_cntr(fid_domain*, fi_cntr_attr*, fid_cntr**, void*) {
  return -FI_ENOSYS;
}
int no_poll(fid_domain*, fi_poll_attr*, fid_poll**) {
  return -FI_ENOSYS;
}
int no_stx(fid_domain*, fi_tx_attr*, fid_stx**, void*) {
  return -FI_ENOSYS;
}
int no_srx(fid_domain*, fi_rx_attr*, fid_ep**, void*) {
  return -FI_ENOSYS;
}
int no_atomic(fid_domain*, fi_datatype, fi_op, fi_atomic_attr*, uint64_t) {
  return -FI_ENOSYS;
}

fi_ops_domain g_domain_ops = {sizeof(fi_ops_domain),
                              av_open,
                              cq_open,
                              endpoint_open,
                              no_scalable_ep,
                              no_cntr,
                              no_poll,
                              no_stx,
                              no_srx,
                              no_atomic,
                              nullptr,
                              nullptr};

// The setup socket: plane 0's address, a port of its own.
NetStatus open_setup_socket(Domain& dom) {
  const int fd = ::socket(AF_INET6, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0)
    return net::net_fail(net::NetErrc::kSystem, "setup socket: " + std::string(strerror(errno)));
  dom.setup = net::UniqueFd(fd);
  const net::Endpoint& p0 = dom.driver->local(0);
  const int v6only = IN6_IS_ADDR_V4MAPPED(&p0.addr) ? 0 : 1;
  (void)::setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &v6only, sizeof v6only);
  // Each setup datagram's flow label is the sender's (DomainIo::send_setup), 0 included.
  const int one = 1, zero = 0;
  (void)::setsockopt(fd, IPPROTO_IPV6, net::kIpv6FlowinfoSend, &one, sizeof one);
  (void)::setsockopt(fd, IPPROTO_IPV6, IPV6_AUTOFLOWLABEL, &zero, sizeof zero);
  sockaddr_in6 a{};
  a.sin6_family = AF_INET6;
  a.sin6_addr = p0.addr;
  if (::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0)
    return net::net_fail(net::NetErrc::kSystem,
                         "setup socket bind: " + std::string(strerror(errno)));
  socklen_t len = sizeof a;
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
  dom.name.setup_port = ntohs(a.sin6_port);
  return {};
}

// The engine, driver, setup socket and endpoint of a domain, from the FI_MRC_* settings.
NetResult<std::unique_ptr<Domain>> open_domain(const Settings& s) {
  auto dom = std::make_unique<Domain>();
  dom->settings = s;
  RdmConfig cfg;
  net::SessionConfig& sc = cfg.session;
  std::string ports = s.ports.empty() ? "::1" : s.ports;
  std::string netns;
  if (!s.fabric.empty()) {
    if (s.host < 0)
      return net::net_fail(net::NetErrc::kInvalidArgument, "FI_MRC_FABRIC needs FI_MRC_HOST");
    auto view = net::host_view_from_file(s.fabric, s.host);
    if (!view) return std::unexpected(view.error());
    sc.leaf_usids = view->leaf_usids;
    sc.spine_usids = view->spine_usids;
    netns = view->netns;
    if (s.ports.empty()) {
      ports.clear();
      for (const std::string& a : view->addresses)
        ports += (ports.empty() ? "" : ",") + a;
    }
  }
  const std::string ev_mode = !s.ev_mode.empty() ? s.ev_mode : s.fabric.empty() ? "udp" : "srv6";
  std::optional<ev::FormatMode> mode;
  for (ev::FormatMode m : {ev::FormatMode::kUdp, ev::FormatMode::kStev, ev::FormatMode::kSrv6})
    if (ev_mode == ev::format_mode_name(m)) mode = m;
  if (!mode)
    return net::net_fail(net::NetErrc::kInvalidArgument,
                         "FI_MRC_EV_MODE '" + ev_mode + "' is not udp, stev or srv6");
  sc.driver.ev_mode = *mode;
  std::string rest = ports;
  while (!rest.empty()) {
    const size_t comma = rest.find(',');
    const std::string one = rest.substr(0, comma);
    rest = comma == std::string::npos ? "" : rest.substr(comma + 1);
    auto ep = net::parse_endpoint(one, 0);
    if (!ep)
      return net::net_fail(net::NetErrc::kInvalidArgument,
                           "FI_MRC_PORTS: '" + one + "': " + ep.error().message);
    net::PortConfig pc;
    pc.local = *ep;
    sc.driver.ports.push_back(pc);
  }
  if (sc.driver.ports.empty() || sc.driver.ports.size() > kMaxPlanes)
    return net::net_fail(net::NetErrc::kInvalidArgument, "FI_MRC_PORTS must name 1 to 8 planes");
  sc.mtu = uint32_t(s.mtu);
  sc.evs_per_plane = uint32_t(s.evs_per_plane);
  sc.sq_depth = 1024;
  // A software path's window by default, as mrc-perf's (net::kSoftwarePathBaseRtt): with the
  // fabric's 50 us the window held ~190 KB and a 4 MiB message crossed at half the speed.
  if (s.base_rtt_us < 1 || s.mpr < 1 || s.mpr > 255)
    return net::net_fail(net::NetErrc::kInvalidArgument,
                         "FI_MRC_BASE_RTT_US must be >= 1 and FI_MRC_MPR 1 to 255");
  sc.base_rtt = us(uint64_t(s.base_rtt_us));
  sc.mpr = uint8_t(s.mpr);
  sc.driver.rx_coalesce = net::kSoftwarePathRxCoalesce;
  cfg.ring_slots = uint16_t(s.ring_slots);
  cfg.slot_bytes = uint32_t(s.slot_bytes);
  cfg.max_message = kMaxMessage;
  auto ec = net::session_engine_config(sc);
  if (!ec) return std::unexpected(ec.error());
  dom->engine = std::make_unique<Engine>(*ec);
  if (!s.qlog.empty()) {
    // One file per domain: a process may open several (each its own engine).
    static std::atomic<unsigned> domains{0};
    auto q = net::QlogFile::open(s.qlog + "." + std::to_string(::getpid()) + "-" +
                                 std::to_string(domains++) + ".jsonl");
    if (!q) return std::unexpected(q.error());
    dom->qlog = std::move(*q);
    dom->engine->set_event_log(dom->qlog.get());
  }
  // On a namespace fabric the sockets are opened in the host's namespace (and stay there), so
  // that ranks mpirun starts in the root namespace reach the fabric.
  auto open_sockets = [&]() -> NetStatus {
    auto drv = net::UdpDriver::open(*dom->engine, sc.driver);
    if (!drv) return std::unexpected(drv.error());
    dom->driver = std::move(*drv);
    return open_setup_socket(*dom);
  };
  if (auto ok = netns.empty() ? open_sockets() : net::in_netns(netns, open_sockets); !ok)
    return std::unexpected(ok.error());
  for (uint8_t p = 0; p < sc.driver.ports.size(); ++p) {
    PlaneAddress pa;
    const net::Endpoint& e = dom->driver->local(p);
    std::memcpy(pa.addr.data(), &e.addr, 16);
    pa.data_port = e.port;
    dom->name.planes.push_back(pa);
  }
  dom->io->driver = dom->driver.get();
  dom->io->setup_fd = dom->setup.get();
  auto rdm = RdmEndpoint::create(*dom->engine, *dom->io, cfg, dom->name);
  if (!rdm) return std::unexpected(rdm.error());
  dom->rdm = std::move(*rdm);
  return dom;
}

int domain_open(fid_fabric* fabric, fi_info* info, fid_domain** out, void* context) {
  if (info && info->domain_attr && info->domain_attr->name &&
      std::strcmp(info->domain_attr->name, kName) != 0)
    return -FI_EINVAL;
  auto dom = open_domain(read_settings());
  if (!dom) {
    warn(dom.error().message);
    return -FI_EINVAL;
  }
  Domain* d = dom->release();
  d->api_version = fabric ? fabric->api_version : 0;
  d->dom.fid.fclass = FI_CLASS_DOMAIN;
  d->dom.fid.context = context;
  d->dom.fid.ops = &g_domain_fi_ops;
  d->dom.ops = &g_domain_ops;
  d->dom.mr = &g_mr_ops;
  *out = &d->dom;
  return 0;
}

struct Fabric {
  fid_fabric fabric{};
};

static_assert(std::is_standard_layout_v<Fabric>);

int fabric_close(fid* f) {
  delete reinterpret_cast<Fabric*>(f);
  return 0;
}
int no_pep(fid_fabric*, fi_info*, fid_pep**, void*) {
  return -FI_ENOSYS;
}

// ---------------------------------------------------------------------------------------------
// EQ: an RDM endpoint has no connection events and address vectors insert synchronously, so
// the provider itself posts nothing here; applications open one (fi_pingpong does, for every
// endpoint type) and may post their own events with fi_eq_write, which readers then see in
// order. fi_eq_sread waits on a condition variable for a writer from another thread.

struct Eq {
  fid_eq eq{};
  std::mutex mu;
  std::condition_variable cv;
  struct Entry {
    uint32_t event = 0;
    std::vector<uint8_t> bytes;
  };
  std::deque<Entry> entries;
};

static_assert(std::is_standard_layout_v<Eq>);

Eq* eq_of(fid_eq* f) {
  return reinterpret_cast<Eq*>(f);
}

// The head entry, copied out (and removed unless FI_PEEK).
ssize_t eq_take(Eq* eq, uint32_t* event, void* buf, size_t len, uint64_t flags) {
  if (eq->entries.empty()) return -FI_EAGAIN;
  Eq::Entry& e = eq->entries.front();
  if (len < e.bytes.size()) return -FI_ETOOSMALL;
  if (event) *event = e.event;
  std::memcpy(buf, e.bytes.data(), e.bytes.size());
  const ssize_t n = ssize_t(e.bytes.size());
  if (!(flags & FI_PEEK)) eq->entries.pop_front();
  return n;
}

ssize_t eq_read(fid_eq* f, uint32_t* event, void* buf, size_t len, uint64_t flags) {
  Eq* eq = eq_of(f);
  std::lock_guard lock(eq->mu);
  return eq_take(eq, event, buf, len, flags);
}

// Nothing the provider does fails asynchronously through an EQ, and fi_eq_write has no public
// flag for an error entry: there is never one to read.
ssize_t eq_readerr(fid_eq*, fi_eq_err_entry*, uint64_t) {
  return -FI_EAGAIN;
}

ssize_t eq_write(fid_eq* f, uint32_t event, const void* buf, size_t len, uint64_t flags) {
  Eq* eq = eq_of(f);
  if ((!buf && len) || flags) return -FI_EINVAL;
  Eq::Entry e;
  e.event = event;
  e.bytes.assign(static_cast<const uint8_t*>(buf), static_cast<const uint8_t*>(buf) + len);
  {
    std::lock_guard lock(eq->mu);
    if (eq->entries.size() >= kQueueSize) return -FI_EAGAIN;
    eq->entries.push_back(std::move(e));
  }
  eq->cv.notify_all();
  return ssize_t(len);
}

ssize_t eq_sread(fid_eq* f, uint32_t* event, void* buf, size_t len, int timeout_ms,
                 uint64_t flags) {
  Eq* eq = eq_of(f);
  std::unique_lock lock(eq->mu);
  const auto ready = [eq] { return !eq->entries.empty(); };
  if (timeout_ms < 0) {
    eq->cv.wait(lock, ready);
  } else if (!eq->cv.wait_for(lock, std::chrono::milliseconds(timeout_ms), ready)) {
    return -FI_EAGAIN;
  }
  return eq_take(eq, event, buf, len, flags);
}

const char* eq_strerror(fid_eq*, int prov_errno, const void*, char* buf, size_t len) {
  const char* text = fi_strerror(prov_errno);
  if (buf && len) {
    std::snprintf(buf, len, "%s", text);
    return buf;
  }
  return text;
}

int eq_close(fid* f) {
  delete reinterpret_cast<Eq*>(f);
  return 0;
}

fi_ops g_eq_fi_ops = {sizeof(fi_ops), eq_close, no_bind, no_control, no_ops_open, nullptr, nullptr};
fi_ops_eq g_eq_ops = {sizeof(fi_ops_eq), eq_read, eq_readerr, eq_write, eq_sread, eq_strerror};

int eq_open(fid_fabric*, fi_eq_attr* attr, fid_eq** out, void* context) {
  // FI_WAIT_UNSPEC and FI_WAIT_NONE are served; a wait set or an fd to poll is not offered.
  if (attr && attr->wait_obj != FI_WAIT_NONE && attr->wait_obj != FI_WAIT_UNSPEC) return -FI_ENOSYS;
  if (attr && attr->signaling_vector != 0) return -FI_EINVAL;
  auto eq = std::make_unique<Eq>();
  eq->eq.fid.fclass = FI_CLASS_EQ;
  eq->eq.fid.context = context;
  eq->eq.fid.ops = &g_eq_fi_ops;
  eq->eq.ops = &g_eq_ops;
  *out = &eq.release()->eq;
  return 0;
}

int no_wait(fid_fabric*, fi_wait_attr*, fid_wait**) {
  return -FI_ENOSYS;
}
int no_trywait(fid_fabric*, fid**, int) {
  return -FI_ENOSYS;
}

fi_ops g_fabric_fi_ops = {sizeof(fi_ops), fabric_close, no_bind, no_control,
                          no_ops_open,    nullptr,      nullptr};
fi_ops_fabric g_fabric_ops = {
    sizeof(fi_ops_fabric), domain_open, no_pep, eq_open, no_wait, no_trywait, nullptr};

int fabric_open(fi_fabric_attr* attr, fid_fabric** out, void* context) {
  if (attr && attr->name && std::strcmp(attr->name, kName) != 0) return -FI_ENODATA;
  auto f = std::make_unique<Fabric>();
  f->fabric.fid.fclass = FI_CLASS_FABRIC;
  f->fabric.fid.context = context;
  f->fabric.fid.ops = &g_fabric_fi_ops;
  f->fabric.ops = &g_fabric_ops;
  f->fabric.api_version = attr ? attr->api_version : 0;
  *out = &f.release()->fabric;
  return 0;
}

// ---------------------------------------------------------------------------------------------
// getinfo: what we offer, checked against the hints

constexpr uint64_t kMrRequired = FI_MR_VIRT_ADDR | FI_MR_PROV_KEY;

// Why these hints cannot be served (empty: they can). FI_LOG-style words for FI_LOG_LEVEL=info.
std::string hints_mismatch(const fi_info* h, const Settings& s) {
  if (!h) return {};
  if (h->caps & ~kCaps) return "capabilities beyond MSG, TAGGED, RMA writes and SOURCE";
  // FI_RMA without FI_READ/FI_WRITE/FI_REMOTE_READ/FI_REMOTE_WRITE asks for all four, and MRC
  // has no RDMA READ: answering with writes only would fail the application's first fi_read.
  if ((h->caps & FI_RMA) && !(h->caps & (FI_WRITE | FI_REMOTE_WRITE)))
    return "RMA reads (FI_RMA without FI_WRITE/FI_REMOTE_WRITE implies them; MRC has no READ)";
  if (h->addr_format != FI_FORMAT_UNSPEC) return "address format (only its own names)";
  if (h->ep_attr) {
    if (h->ep_attr->type != FI_EP_UNSPEC && h->ep_attr->type != FI_EP_RDM) return "endpoint type";
    if (h->ep_attr->max_msg_size > kMaxMessage) return "max_msg_size";
    if (h->ep_attr->tx_ctx_cnt > 1 || h->ep_attr->rx_ctx_cnt > 1) return "several contexts";
  }
  if (h->fabric_attr && h->fabric_attr->name && std::strcmp(h->fabric_attr->name, kName) != 0)
    return "fabric name";
  if (h->domain_attr) {
    const fi_domain_attr* d = h->domain_attr;
    if (d->name && std::strcmp(d->name, kName) != 0) return "domain name";
    if (d->control_progress == FI_PROGRESS_AUTO || d->data_progress == FI_PROGRESS_AUTO)
      return "automatic progress";
    if (d->cq_data_size > 8) return "cq_data_size";
    // RMA needs virtual addresses and provider keys; a legacy FI_MR_BASIC is both.
    const bool basic = d->mr_mode == FI_MR_BASIC;
    if ((h->caps & FI_RMA) && !basic && d->mr_mode != FI_MR_UNSPEC &&
        (d->mr_mode & kMrRequired) != kMrRequired)
      return "memory registration mode (RMA needs FI_MR_VIRT_ADDR and FI_MR_PROV_KEY)";
    if (d->mr_mode == FI_MR_SCALABLE && (h->caps & FI_RMA)) return "FI_MR_SCALABLE";
  }
  if (h->tx_attr) {
    if (h->tx_attr->msg_order & ~uint64_t(FI_ORDER_SAS)) return "transmit ordering";
    if (h->tx_attr->iov_limit > 1 || h->tx_attr->rma_iov_limit > 1) return "iov limits";
    if (h->tx_attr->inject_size > eager_size(s)) return "inject_size";
  }
  if (h->rx_attr) {
    if (h->rx_attr->msg_order & ~uint64_t(FI_ORDER_SAS)) return "receive ordering";
    if (h->rx_attr->iov_limit > 1) return "iov limits";
  }
  return {};
}

fi_info* make_info(const fi_info* h, const Settings& s) {
  fi_info* info = fi_dupinfo(nullptr);
  if (!info) return nullptr;
  // Secondary capabilities that change no semantics come unasked; FI_DIRECTED_RECV does (a
  // receive's source address is honoured only with it), so only when asked for.
  const uint64_t unasked = kCaps & ~(FI_MSG | FI_TAGGED | FI_RMA | FI_DIRECTED_RECV);
  const uint64_t caps = h && h->caps ? (h->caps & kCaps) | unasked : kCaps;
  info->caps = caps;
  info->mode = 0;
  info->addr_format = FI_FORMAT_UNSPEC;
  info->tx_attr->caps = caps;
  info->tx_attr->msg_order = FI_ORDER_SAS;
  info->tx_attr->comp_order = FI_ORDER_NONE;
  info->tx_attr->inject_size = eager_size(s);
  info->tx_attr->size = kQueueSize;
  info->tx_attr->iov_limit = 1;
  info->tx_attr->rma_iov_limit = 1;
  info->rx_attr->caps = caps;
  info->rx_attr->msg_order = FI_ORDER_SAS;
  info->rx_attr->comp_order = FI_ORDER_NONE;
  info->rx_attr->size = kQueueSize;
  info->rx_attr->iov_limit = 1;
  info->ep_attr->type = FI_EP_RDM;
  info->ep_attr->protocol = FI_PROTO_UNSPEC;
  info->ep_attr->protocol_version = kProtoVersion;
  info->ep_attr->max_msg_size = kMaxMessage;
  info->ep_attr->tx_ctx_cnt = 1;
  info->ep_attr->rx_ctx_cnt = 1;
  // Tags are 64 bits, none reserved: any format asked for fits; unasked, libfabric's generic
  // value (FI_TAG_GENERIC in its sources), from which Open MPI counts 64 usable bits.
  info->ep_attr->mem_tag_format = h && h->ep_attr && h->ep_attr->mem_tag_format
                                      ? h->ep_attr->mem_tag_format
                                      : 0xAAAAAAAAAAAAAAAAull;
  fi_domain_attr* d = info->domain_attr;
  d->name = strdup(kName);
  d->threading = h && h->domain_attr && h->domain_attr->threading != FI_THREAD_UNSPEC
                     ? h->domain_attr->threading
                     : FI_THREAD_SAFE;
  d->control_progress = FI_PROGRESS_MANUAL;
  d->data_progress = FI_PROGRESS_MANUAL;
  d->resource_mgmt = FI_RM_ENABLED;
  d->av_type = h && h->domain_attr && h->domain_attr->av_type != FI_AV_UNSPEC
                   ? h->domain_attr->av_type
                   : FI_AV_MAP;
  d->mr_mode = (h && h->domain_attr && h->domain_attr->mr_mode == FI_MR_BASIC) ? FI_MR_BASIC
                                                                               : int(kMrRequired);
  if (h && h->domain_attr && !(h->caps & FI_RMA) && h->domain_attr->mr_mode != FI_MR_BASIC)
    d->mr_mode = h->domain_attr->mr_mode & kMrRequired;
  d->mr_key_size = 4;
  d->cq_data_size = 8;
  d->cq_cnt = 64;
  d->ep_cnt = 1;
  d->tx_ctx_cnt = 1;
  d->rx_ctx_cnt = 1;
  d->max_ep_tx_ctx = 1;
  d->max_ep_rx_ctx = 1;
  d->mr_iov_limit = 1;
  d->mr_cnt = 1 << 16;
  info->fabric_attr->name = strdup(kName);
  info->fabric_attr->prov_version = kProviderVersion;
  return info;
}

int getinfo(uint32_t, const char*, const char*, uint64_t, const fi_info* hints, fi_info** out) {
  const Settings s = read_settings();
  if (!hints_mismatch(hints, s).empty()) return -FI_ENODATA;
  *out = make_info(hints, s);
  return *out ? 0 : -FI_ENOMEM;
}

void cleanup() {}

}  // namespace

// The entry point libfabric looks up (dlsym): unmangled.
extern "C" FI_EXT_INI {
  g_provider.version = kProviderVersion;
  g_provider.fi_version = FI_VERSION(1, 17);
  g_provider.name = kName;
  g_provider.getinfo = getinfo;
  g_provider.fabric = fabric_open;
  g_provider.cleanup = cleanup;
  fi_param_define(&g_provider, "ports", FI_PARAM_STRING,
                  "local address of each plane, comma-separated: ADDR or [ADDR]:PORT, IPv6 or "
                  "IPv4 (default: FI_MRC_FABRIC's addresses of FI_MRC_HOST, else ::1)");
  fi_param_define(&g_provider, "ev_mode", FI_PARAM_STRING,
                  "where entropy values go: udp (UDP source port; the default without a "
                  "fabric), stev (flow label and source port), srv6 (uSID destinations; the "
                  "default with FI_MRC_FABRIC)");
  fi_param_define(&g_provider, "fabric", FI_PARAM_STRING,
                  "mrc-fabric's fabric.json: this host's plane addresses (unless FI_MRC_PORTS "
                  "names them) and the leaf and spine uSIDs SRv6 EVs are built from");
  fi_param_define(&g_provider, "host", FI_PARAM_INT, "this host's index in FI_MRC_FABRIC");
  fi_param_define(&g_provider, "mtu", FI_PARAM_INT, "payload bytes per packet (default 4096)");
  fi_param_define(&g_provider, "ring_slots", FI_PARAM_INT, "receive slots per peer (default 64)");
  fi_param_define(&g_provider, "slot_bytes", FI_PARAM_INT,
                  "bytes per slot: larger messages go by rendezvous (default 16384)");
  fi_param_define(&g_provider, "evs_per_plane", FI_PARAM_INT,
                  "paths per plane of each connection (default 8)");
  fi_param_define(&g_provider, "base_rtt_us", FI_PARAM_INT,
                  "unloaded RTT the congestion control assumes, us (default 2000: a software "
                  "path's scheduling delay)");
  fi_param_define(&g_provider, "mpr", FI_PARAM_INT,
                  "outstanding PSNs per connection, units of 128 (default 16)");
  fi_param_define(
      &g_provider, "qlog", FI_PARAM_STRING,
      "write the engine's event log (JSON lines; docs/engine.md, \"Event log\") to "
      "<qlog>.<pid>-<domain>.jsonl, the domains a process opens counted from 0 (default: none)");
  return &g_provider;
}
