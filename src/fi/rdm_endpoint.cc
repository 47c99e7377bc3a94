// The reliable-datagram endpoint (fi/rdm_endpoint.h).
#include "fi/rdm_endpoint.h"

#include <arpa/inet.h>
#include <netinet/in.h>

#include <algorithm>
#include <cstdio>
#include <cstring>

#include "net/path_plan.h"
#include "net/secure_random.h"

namespace mrc::fi {

const char* op_error_text(OpError e) {
  switch (e) {
    case OpError::kNone:
      return "success";
    case OpError::kTruncated:
      return "message longer than the receive buffer (truncated)";
    case OpError::kCanceled:
      return "canceled";
    case OpError::kPeerFailed:
      return "the connection to the peer failed (retries exhausted or the peer is gone)";
    case OpError::kUnreachable:
      return "the peer did not answer the connection setup";
    case OpError::kRejected:
      return "the peer refused the connection (incompatible settings or no room)";
    case OpError::kNoMessage:
      return "no matching message has arrived (FI_PEEK)";
  }
  return "?";
}

const char* failure_cause_name(FailureCause c) {
  switch (c) {
    case FailureCause::kNone:
      return "none";
    case FailureCause::kRetryExceeded:
      return "retry exceeded";
    case FailureCause::kAckContradiction:
      return "ACK contradiction";
    case FailureCause::kFlushed:
      return "flushed";
    case FailureCause::kQpError:
      return "QP error";
    case FailureCause::kProtocol:
      return "protocol violation by the peer";
    case FailureCause::kLocalResource:
      return "local resource";
    case FailureCause::kSetupTimeout:
      return "connection setup timed out";
    case FailureCause::kSetupRejected:
      return "connection refused";
    case FailureCause::kSetupFailed:
      return "connection setup failed";
  }
  return "?";
}

namespace {

FailureCause cause_of(WcStatus s) {
  switch (s) {
    case WcStatus::kSuccess:
      break;
    case WcStatus::kRetryExceeded:
      return FailureCause::kRetryExceeded;
    case WcStatus::kAckContradiction:
      return FailureCause::kAckContradiction;
    case WcStatus::kFlushed:
      return FailureCause::kFlushed;
  }
  return FailureCause::kQpError;
}

// What an error status means here, for the person reading the failure.
const char* status_meaning(WcStatus s) {
  switch (s) {
    case WcStatus::kSuccess:
      break;
    case WcStatus::kRetryExceeded:
      return "no ACK within the retry budget: the peer is gone, every path to it loses the "
             "packets, or it drops them for a bad rkey or address or a QP not ready";
    case WcStatus::kAckContradiction:
      return "an ACK reported missing a PSN an earlier ACK had acknowledged";
    case WcStatus::kFlushed:
      return "the QP was in ERR already, and no error completion came before this one";
  }
  return "";
}

std::string hex(uint32_t v) {
  char b[16];
  std::snprintf(b, sizeof b, "0x%x", v);
  return b;
}

const char* slot_kind_name(SlotKind k) {
  switch (k) {
    case SlotKind::kEager:
      return "eager message";
    case SlotKind::kRts:
      return "RTS";
    case SlotKind::kCts:
      return "CTS";
    case SlotKind::kFin:
      return "FIN";
    case SlotKind::kRemoteData:
      return "remote CQ data";
  }
  return "?";
}

constexpr uint64_t kChunk = 1ull << 30;  // bytes per data WRITE of a rendezvous (2^31 max)
constexpr uint32_t kExtraRecvs = 16;     // engine receives beyond the ring: credit messages

std::unexpected<net::NetError> setup_fail(std::string msg) {
  return net::net_fail(net::NetErrc::kSystem, std::move(msg));
}

std::string err(Error e) {
  return std::string(error_name(e));
}

}  // namespace

// An operation waiting for its peer's connection or for a slot of its ring.
struct RdmEndpoint::PendingSend {
  enum class Kind : uint8_t { kMessage, kWrite, kControl } kind = Kind::kMessage;
  const uint8_t* buf = nullptr;
  uint64_t len = 0;
  bool tagged = false;
  uint64_t tag = 0;
  std::optional<uint64_t> data;
  void* context = nullptr;
  uint64_t addr = 0;  // kWrite
  uint32_t key = 0;
  SlotHeader header;    // kControl (CTS, FIN)
  uint64_t fin_of = 0;  // kControl FIN: the send cookie of the rendezvous send it ends
};

struct RdmEndpoint::PostedRecv {
  std::optional<uint32_t> peer;
  uint8_t* buf = nullptr;
  uint64_t len = 0;
  bool tagged = false;
  uint64_t tag = 0, ignore = 0;
  void* context = nullptr;
  bool discard = false;  // FI_DISCARD: the message is dropped, not truncated
};

struct RdmEndpoint::Unexpected {
  uint32_t peer = 0;
  bool tagged = false;
  uint64_t tag = 0;
  std::optional<uint64_t> data;
  uint64_t length = 0;
  bool rts = false;
  uint64_t send_cookie = 0;      // rts
  std::vector<uint8_t> payload;  // eager
  void* claimed_by = nullptr;    // FI_CLAIM: set aside for this context's recv_claimed
};

struct RdmEndpoint::WrRecord {
  enum class Kind : uint8_t { kSlot, kCredit, kRndvData, kUserWrite } kind = Kind::kSlot;
  uint32_t peer = 0;
  uint32_t staging_slot = 0;
  SlotKind slot_kind = SlotKind::kEager;  // kSlot: what the slot carries
  // A user operation that completes with this WR (eager send, RMA write).
  bool user = false;
  OpKind op = OpKind::kSend;
  bool tagged = false;
  uint64_t tag = 0, len = 0;
  void* context = nullptr;
  uint64_t cookie = 0;        // kRndvData, and a FIN's kSlot: the rendezvous send
  uint32_t release_lkey = 0;  // kUserWrite: the source registered for this write
};

struct RdmEndpoint::Peer {
  // kConnecting: our request is out; kAccepted: our QP is ready (we accepted its request)
  // but the peer's may not be, so nothing is sent until its confirm; kReady: both are.
  enum class State : uint8_t { kNew, kConnecting, kAccepted, kReady, kFailed };
  uint32_t id = 0;
  EndpointName name;
  uint32_t handle = 0;  // QpAttr::peer
  State state = State::kNew;
  PeerFailure failure;  // kFailed: the connection's first error
  uint32_t qpn = 0, first_psn = 0;
  std::unique_ptr<uint8_t[]> ring;  // its messages to us
  MemoryKeys ring_keys;
  std::unique_ptr<uint8_t[]> staging;  // our messages to it, one buffer per slot of its ring
  MemoryKeys staging_keys;
  std::vector<bool> staging_busy;
  uint32_t remote_qpn = 0;
  uint64_t remote_ring = 0;
  uint32_t remote_rkey = 0;
  uint16_t remote_slots = 0;
  uint32_t remote_slot_bytes = 0;
  uint64_t nonce = 0;       // of our request
  uint64_t peer_nonce = 0;  // of the request we accepted
  Time next_retry = kNever, deadline = kNever;
  uint32_t send_seq = 0, send_credits = 0;
  uint32_t recv_seq = 0, credits_owed = 0;
  std::deque<PendingSend> waiting;
  struct RndvSend {
    const uint8_t* buf = nullptr;
    uint64_t len = 0;
    bool tagged = false;
    uint64_t tag = 0;
    void* context = nullptr;
    uint32_t lkey = 0;
    uint32_t writes_left = 0;
    uint64_t recv_cookie = 0;  // the CTS's: what the FIN names
    bool fin_posted = false;   // the FIN's WR is the engine's: its completion ends the send
  };
  std::unordered_map<uint64_t, RndvSend> rndv_sends;  // by send cookie
  struct RndvRecv {
    PostedRecv recv;
    uint64_t msg_len = 0;
    uint64_t placed = 0;
    std::optional<uint64_t> data;
    uint64_t tag = 0;
    bool tagged = false;
    uint32_t lkey = 0;  // 0: nothing registered (no bytes to place)
  };
  std::unordered_map<uint64_t, RndvRecv> rndv_recvs;  // by receive cookie

  uint64_t eager_max() const { return remote_slot_bytes - kSlotHeaderBytes; }
};

RdmEndpoint::RdmEndpoint(Engine& engine, Io& io, const RdmConfig& config, const EndpointName& self)
    : engine_(engine), io_(io), config_(config), self_(self) {}

RdmEndpoint::~RdmEndpoint() = default;

NetResult<std::unique_ptr<RdmEndpoint>> RdmEndpoint::create(Engine& engine, Io& io,
                                                            const RdmConfig& config,
                                                            const EndpointName& self) {
  if (config.ring_slots == 0 || config.slot_bytes < kSlotHeaderBytes + 64 ||
      config.slot_bytes > (1u << 24))
    return net::net_fail(net::NetErrc::kInvalidArgument,
                         "ring slots must be 1..65535 and slot bytes 128..16 MiB");
  if (self.planes.empty() || self.planes.size() != engine.config().num_ports)
    return net::net_fail(net::NetErrc::kInvalidArgument,
                         "the endpoint's name must list one address per engine port");
  return std::unique_ptr<RdmEndpoint>(new RdmEndpoint(engine, io, config, self));
}

// ---------------------------------------------------------------------------------------------
// Peers and connections

Result<uint32_t> RdmEndpoint::insert_peer(const EndpointName& name) {
  if (auto it = by_name_.find(name); it != by_name_.end()) return it->second;
  if (name.planes.size() != self_.planes.size()) return std::unexpected(Error::kInvalidArgument);
  if (peers_.size() >= config_.max_peers) return std::unexpected(Error::kNoResources);
  auto p = std::make_unique<Peer>();
  p->id = uint32_t(peers_.size());
  p->name = name;
  by_name_[name] = p->id;
  peers_.push_back(std::move(p));
  return peers_.back()->id;
}

const EndpointName* RdmEndpoint::peer_name(uint32_t id) const {
  return id < peers_.size() ? &peers_[id]->name : nullptr;
}

std::optional<uint32_t> RdmEndpoint::find_peer(const EndpointName& name) const {
  if (auto it = by_name_.find(name); it != by_name_.end()) return it->second;
  return std::nullopt;
}

RdmEndpoint::Peer* RdmEndpoint::peer(uint32_t id) {
  return id < peers_.size() ? peers_[id].get() : nullptr;
}

NetStatus RdmEndpoint::make_qp(Peer& p) {
  auto handle = io_.bind_peer(p.name);
  if (!handle) return std::unexpected(handle.error());
  p.handle = *handle;
  QpCreateAttr ca;
  ca.sq_depth = config_.session.sq_depth;
  ca.rq_depth = config_.ring_slots + kExtraRecvs;
  auto q = engine_.create_qp(ca);
  if (!q) return setup_fail(std::string("create_qp: ") + err(q.error()));
  p.qpn = *q;
  uint64_t r = config_.session.seed * 0x9E3779B97F4A7C15ull + p.id * 0xBF58476D1CE4E5B9ull;
  if (config_.session.random_identifiers) {
    auto v = net::secure_random_u64();
    if (!v) return std::unexpected(v.error());
    r = *v;
  }
  p.first_psn = uint32_t(r >> 40) & 0xFFFFFF;
  p.nonce = r * 0x94D049BB133111EBull | 1;
  const uint64_t ring_bytes = uint64_t(config_.ring_slots) * config_.slot_bytes;
  p.ring = std::make_unique<uint8_t[]>(ring_bytes);
  auto keys =
      engine_.register_memory(p.ring.get(), ring_bytes, reinterpret_cast<uint64_t>(p.ring.get()),
                              kLocalWrite | kRemoteWrite);
  if (!keys) return setup_fail(std::string("register ring: ") + err(keys.error()));
  p.ring_keys = *keys;
  by_qpn_[p.qpn] = p.id;
  return {};
}

Result<RdmEndpoint::Peer*> RdmEndpoint::start_connect(Time now, Peer& p) {
  if (p.state != Peer::State::kNew) return &p;
  if (auto ok = make_qp(p); !ok) {
    fail_peer(now, p, OpError::kUnreachable, FailureCause::kSetupFailed,
              "creating its QP: " + ok.error().message);
    return &p;
  }
  p.state = Peer::State::kConnecting;
  p.next_retry = now + config_.connect_retry;
  p.deadline = now + config_.connect_timeout;
  send_connect(p, ConnectKind::kRequest, p.nonce);
  return &p;
}

void RdmEndpoint::send_connect(Peer& p, ConnectKind kind, uint64_t nonce) {
  ConnectMsg m;
  m.kind = kind;
  m.ev_mode = uint8_t(config_.session.driver.ev_mode);
  m.mpr_dest = config_.session.mpr;
  m.max_wimm_dest = config_.session.max_wimm;
  m.mtu = config_.session.mtu;
  m.nonce = nonce;
  m.from = self_;
  m.leaf_usids = config_.session.leaf_usids;
  m.leaf_usids.resize(self_.planes.size());
  m.qpn = p.qpn;
  m.first_psn = p.first_psn;
  m.ring_addr = reinterpret_cast<uint64_t>(p.ring.get());
  m.ring_rkey = p.ring_keys.rkey;
  m.ring_slots = config_.ring_slots;
  m.slot_bytes = config_.slot_bytes;
  const auto bytes = encode_connect(m);
  ++counters_.setup_sent;
  io_.send_setup(p.name, bytes);
}

NetStatus RdmEndpoint::make_ready(Time now, Peer& p, const ConnectMsg& m) {
  p.remote_qpn = m.qpn;
  p.remote_ring = m.ring_addr;
  p.remote_rkey = m.ring_rkey;
  p.remote_slots = m.ring_slots;
  p.remote_slot_bytes = std::min<uint32_t>(m.slot_bytes, config_.slot_bytes);
  const uint64_t staging_bytes = uint64_t(p.remote_slots) * p.remote_slot_bytes;
  p.staging = std::make_unique<uint8_t[]>(staging_bytes);
  auto keys = engine_.register_memory(p.staging.get(), staging_bytes,
                                      reinterpret_cast<uint64_t>(p.staging.get()), kLocalWrite);
  if (!keys) return setup_fail(std::string("register staging: ") + err(keys.error()));
  p.staging_keys = *keys;
  p.staging_busy.assign(p.remote_slots, false);
  p.send_credits = p.remote_slots;
  std::vector<net::PlanePaths> planes(m.from.planes.size());
  for (size_t i = 0; i < planes.size(); ++i) {
    std::memcpy(&planes[i].peer_addr, m.from.planes[i].addr.data(), 16);
    planes[i].peer_leaf_usid = i < m.leaf_usids.size() ? m.leaf_usids[i] : 0;
    const auto& s = config_.session;
    planes[i].local_leaf_usid = i < s.leaf_usids.size() ? s.leaf_usids[i] : 0;
    if (i < s.spine_usids.size()) planes[i].spine_usids = s.spine_usids[i];
  }
  auto paths =
      net::plan_paths(config_.session.driver.ev_mode, config_.session.evs_per_plane, planes, p.id);
  if (!paths) return setup_fail(std::string("EV list: ") + err(paths.error()));
  const QpAttr a = net::session_qp_attr(
      config_.session, net::PeerQp{p.handle, m.qpn, m.first_psn, m.mpr_dest, m.max_wimm_dest},
      p.first_psn, std::move(*paths));
  for (QpState target : {QpState::kInit, QpState::kRtr, QpState::kRts})
    if (auto st = engine_.modify_qp(now, p.qpn, target, a); !st)
      return setup_fail(std::string("modify_qp: ") + err(st.error()));
  // Receives for its slots and credit returns (a QP takes them from INIT on).
  for (uint32_t i = 0; i < uint32_t(config_.ring_slots) + kExtraRecvs; ++i)
    if (!engine_.post_recv(p.qpn, 0)) return setup_fail("post_recv on a new QP");
  return {};
}

void RdmEndpoint::on_setup_datagram(Time now, std::span<const uint8_t> bytes) {
  auto m = decode_connect(bytes);
  if (!m) {
    ++counters_.setup_bad;
    return;
  }
  ++counters_.setup_received;
  auto found = find_peer(m->from);
  const bool compatible =
      m->kind == ConnectKind::kReject ||
      (m->from.planes.size() == self_.planes.size() &&
       m->ev_mode == uint8_t(config_.session.driver.ev_mode) && m->mtu == config_.session.mtu);
  if (!found) {
    if (m->kind != ConnectKind::kRequest) {
      ++counters_.setup_bad;  // an answer to a request we never made
      return;
    }
    auto id = compatible ? insert_peer(m->from)
                         : Result<uint32_t>(std::unexpected(Error::kInvalidArgument));
    if (!id) {
      // Answer without keeping anything: no peer entry for a stranger we cannot take.
      ConnectMsg r;
      r.kind = ConnectKind::kReject;
      r.reject_reason = compatible ? RejectReason::kTooManyPeers : RejectReason::kIncompatible;
      r.nonce = m->nonce;
      r.from = self_;
      r.leaf_usids.resize(self_.planes.size());
      ++counters_.setup_rejected;
      io_.send_setup(m->from, encode_connect(r));
      return;
    }
    found = *id;
  }
  Peer& p = *peers_[*found];
  if (m->kind == ConnectKind::kReject) {
    if (p.state == Peer::State::kConnecting && m->nonce == p.nonce)
      fail_peer(now, p, OpError::kRejected, FailureCause::kSetupRejected,
                m->reject_reason == RejectReason::kTooManyPeers
                    ? "the peer refused the connection: its peer table is full"
                    : "the peer refused the connection: our planes, EV mode or MTU differ "
                      "from its");
    return;
  }
  if (!compatible) {
    ++counters_.setup_rejected;
    if (p.state == Peer::State::kConnecting)
      fail_peer(now, p, OpError::kRejected, FailureCause::kSetupRejected,
                "the peer's planes, EV mode or MTU differ from ours");
    return;
  }
  if (p.state == Peer::State::kFailed) return;
  const bool known_qp = p.state == Peer::State::kAccepted || p.state == Peer::State::kReady;
  if (known_qp && m->qpn != p.remote_qpn) {
    ++counters_.setup_bad;  // another incarnation of the peer: not supported
    return;
  }
  switch (m->kind) {
    case ConnectKind::kRequest:
      if (!known_qp) {
        if (p.state == Peer::State::kNew) {
          if (auto ok = make_qp(p); !ok) {
            fail_peer(now, p, OpError::kPeerFailed, FailureCause::kSetupFailed,
                      "creating its QP: " + ok.error().message);
            return;
          }
        }
        if (auto ok = make_ready(now, p, *m); !ok) {
          fail_peer(now, p, OpError::kPeerFailed, FailureCause::kSetupFailed,
                    "readying its QP: " + ok.error().message);
          return;
        }
        p.state = Peer::State::kAccepted;
        p.peer_nonce = m->nonce;
        p.next_retry = now + config_.connect_retry;
        p.deadline = now + config_.connect_timeout;
      }
      // Accepted already (our accept was lost) or just now: answer.
      send_connect(p, ConnectKind::kAccept, m->nonce);
      return;
    case ConnectKind::kAccept:
      if (m->nonce != p.nonce ||
          (p.state != Peer::State::kConnecting && p.state != Peer::State::kAccepted &&
           p.state != Peer::State::kReady)) {
        ++counters_.setup_bad;  // not an answer to our request
        return;
      }
      if (p.state == Peer::State::kConnecting) {
        if (auto ok = make_ready(now, p, *m); !ok) {
          fail_peer(now, p, OpError::kPeerFailed, FailureCause::kSetupFailed,
                    "readying its QP: " + ok.error().message);
          return;
        }
      }
      // The peer answers, so its QP is ready: it waits for our confirm (again, if lost).
      send_connect(p, ConnectKind::kConfirm, m->nonce);
      set_ready(now, p);
      return;
    case ConnectKind::kConfirm:
      if (p.state == Peer::State::kAccepted && m->nonce == p.peer_nonce) set_ready(now, p);
      return;
    case ConnectKind::kReject:
      return;
  }
}

void RdmEndpoint::set_ready(Time now, Peer& p) {
  if (p.state == Peer::State::kReady) return;
  p.state = Peer::State::kReady;
  p.next_retry = p.deadline = kNever;
  pump(now, p);
}

void RdmEndpoint::on_timer(Time now) {
  for (auto& pp : peers_) {
    Peer& p = *pp;
    if (p.state != Peer::State::kConnecting && p.state != Peer::State::kAccepted) continue;
    if (now >= p.deadline) {
      fail_peer(now, p, OpError::kUnreachable, FailureCause::kSetupTimeout,
                "no answer to the connection setup in time");
      continue;
    }
    if (now >= p.next_retry) {
      if (p.state == Peer::State::kConnecting)
        send_connect(p, ConnectKind::kRequest, p.nonce);
      else
        send_connect(p, ConnectKind::kAccept, p.peer_nonce);
      p.next_retry = now + config_.connect_retry;
    }
  }
}

Time RdmEndpoint::next_deadline() const {
  Time t = kNever;
  for (const auto& p : peers_)
    if (p->state == Peer::State::kConnecting || p->state == Peer::State::kAccepted)
      t = std::min({t, p->next_retry, p->deadline});
  return t;
}

const PeerFailure* RdmEndpoint::failure(uint32_t id) const {
  if (id >= peers_.size() || peers_[id]->state != Peer::State::kFailed) return nullptr;
  return &peers_[id]->failure;
}

bool RdmEndpoint::poll_failure(PeerFailure& out) {
  if (failures_.empty()) return false;
  out = std::move(failures_.front());
  failures_.pop_front();
  return true;
}

std::string RdmEndpoint::describe(const Peer& p) const {
  std::string s = "peer " + std::to_string(p.id) + " (mrc:";
  for (size_t i = 0; i < p.name.planes.size(); ++i) {
    char ip[INET6_ADDRSTRLEN] = "?";
    inet_ntop(AF_INET6, p.name.planes[i].addr.data(), ip, sizeof ip);
    s += (i ? ",[" : "[") + std::string(ip) + "]:" + std::to_string(p.name.planes[i].data_port);
  }
  return s + ";setup=" + std::to_string(p.name.setup_port) + ")";
}

std::string RdmEndpoint::qp_detail(uint32_t qpn) const {
  std::string s = "QP " + std::to_string(qpn);
  if (auto st = engine_.qp_state(qpn)) s += std::string(" in ") + qp_state_name(*st);
  if (auto q = engine_.qp_stats(qpn))
    s += ", " + std::to_string(q->data_sent) + " data packets sent, " +
         std::to_string(q->retransmits) + " resent";
  if (const PathSet* ps = engine_.qp_paths(qpn)) {
    uint32_t by_state[3] = {};
    for (size_t i = 0; i < ps->size(); ++i)
      ++by_state[std::min<size_t>(size_t(ps->state_of(int(i))), 2)];
    s += ", paths " + std::to_string(by_state[0]) + " good, " + std::to_string(by_state[1]) +
         " assumed bad, " + std::to_string(by_state[2]) + " denied (" +
         std::to_string(ps->usable_count()) + " usable), peer ports down " +
         hex(ps->peer_ports_down());
  }
  if (auto l = engine_.qp_limits(qpn))
    s += ", ACK timeout 2^" + std::to_string(l->timeout) + " x 1.024 us with " +
         std::to_string(l->retry_linear) + "+" + std::to_string(l->retry_exp) + " retries";
  // Engine-wide, not this QP's alone: what the engine saw go wrong, including as a responder.
  const EngineCounters& ec = engine_.counters();
  s += "; engine: " + std::to_string(ec.timeouts) + " ACK timeouts, " +
       std::to_string(ec.ack_contradictions) + " ACK contradictions";
  for (int r = 0; r < int(DropReason::kCount); ++r)
    if (ec.drops[r])
      s +=
          ", " + std::to_string(ec.drops[r]) + " dropped (" + drop_reason_name(DropReason(r)) + ")";
  return s;
}

void RdmEndpoint::fail_peer(Time now, Peer& p, OpError why, FailureCause cause,
                            const std::string& what) {
  if (p.state == Peer::State::kFailed) return;
  p.state = Peer::State::kFailed;
  p.failure = PeerFailure{p.id, why, cause, describe(p) + ": " + what, now};
  failures_.push_back(p.failure);
  ++counters_.peers_failed;
  for (auto& w : p.waiting)
    if (w.kind != PendingSend::Kind::kControl) complete(failed(w, p));
  p.waiting.clear();
  // A send with WRs in the engine (data WRITEs, its FIN) completes with their completions.
  const auto in_engine = [](const Peer::RndvSend& s) { return s.writes_left > 0 || s.fin_posted; };
  for (auto& [cookie, s] : p.rndv_sends) {
    if (in_engine(s)) continue;
    FiCompletion c;
    c.context = s.context;
    c.kind = OpKind::kSend;
    c.tagged = s.tagged;
    c.tag = s.tag;
    c.len = s.len;
    c.peer = p.id;
    c.error = why;
    c.cause = cause;
    complete(c);
  }
  std::erase_if(p.rndv_sends, [&](const auto& kv) { return !in_engine(kv.second); });
  for (auto& [cookie, r] : p.rndv_recvs) {
    if (r.lkey) (void)engine_.deregister_memory(r.lkey);
    FiCompletion c;
    c.context = r.recv.context;
    c.kind = OpKind::kRecv;
    c.buf = r.recv.buf;
    c.tagged = r.tagged;
    c.tag = r.tag;
    c.peer = p.id;
    c.error = why;
    c.cause = cause;
    complete(c);
  }
  p.rndv_recvs.clear();
  // Receives that name this peer alone can never match now.
  for (auto it = posted_.begin(); it != posted_.end();) {
    if (it->peer == p.id) {
      FiCompletion c;
      c.context = it->context;
      c.kind = OpKind::kRecv;
      c.buf = it->buf;
      c.tagged = it->tagged;
      c.peer = p.id;
      c.error = why;
      c.cause = cause;
      complete(c);
      it = posted_.erase(it);
    } else {
      ++it;
    }
  }
}

// ---------------------------------------------------------------------------------------------
// Sending

uint64_t RdmEndpoint::new_wr(WrRecord r) {
  const uint64_t id = next_wr_++;
  wrs_.emplace(id, std::move(r));
  return id;
}

bool RdmEndpoint::send_slot(Time now, Peer& p, SlotHeader h, std::span<const uint8_t> payload,
                            uint64_t wr_tag) {
  (void)wr_tag;
  if (p.send_credits == 0) return false;
  const uint32_t slot = p.send_seq % p.remote_slots;
  if (p.staging_busy[slot]) return false;
  if (kSlotHeaderBytes + payload.size() > p.remote_slot_bytes) return false;
  h.sequence = p.send_seq;
  h.credits = uint16_t(std::min<uint32_t>(p.credits_owed, 0xFFFF));
  uint8_t* buf = p.staging.get() + uint64_t(slot) * p.remote_slot_bytes;
  encode_slot_header(h, std::span<uint8_t, kSlotHeaderBytes>(buf, kSlotHeaderBytes));
  if (!payload.empty()) std::memcpy(buf + kSlotHeaderBytes, payload.data(), payload.size());
  WriteWr wr;
  wr.opcode = WrOpcode::kWriteImm;
  wr.lkey = p.staging_keys.lkey;
  wr.local_addr = reinterpret_cast<uint64_t>(buf);
  wr.length = kSlotHeaderBytes + payload.size();
  wr.remote_addr = p.remote_ring + uint64_t(slot) * p.remote_slot_bytes;
  wr.rkey = p.remote_rkey;
  wr.imm = imm_for_slot(slot);
  WrRecord rec;
  rec.kind = WrRecord::Kind::kSlot;
  rec.peer = p.id;
  rec.staging_slot = slot;
  rec.slot_kind = h.kind;
  wr.wr_id = next_wr_;
  if (!engine_.post_write(now, p.qpn, wr)) return false;
  wrs_.emplace(next_wr_++, rec);
  p.staging_busy[slot] = true;
  --p.send_credits;
  ++p.send_seq;
  p.credits_owed -= h.credits;
  return true;
}

void RdmEndpoint::return_credits(Time now, Peer& p, bool force) {
  if (p.state != Peer::State::kReady || p.credits_owed == 0) return;
  if (!force && p.credits_owed < std::max<uint32_t>(1, config_.ring_slots / 2)) return;
  WriteWr wr;
  wr.opcode = WrOpcode::kWriteImm;
  wr.length = 0;
  wr.remote_addr = p.remote_ring;
  wr.rkey = p.remote_rkey;
  wr.imm = imm_for_credits(p.credits_owed);
  wr.wr_id = next_wr_;
  if (!engine_.post_write(now, p.qpn, wr)) return;  // SQ full: the next completion retries
  WrRecord rec;
  rec.kind = WrRecord::Kind::kCredit;
  rec.peer = p.id;
  wrs_.emplace(next_wr_++, rec);
  ++counters_.credit_messages;
  p.credits_owed = 0;
}

void RdmEndpoint::pump(Time now, Peer& p) {
  if (p.state != Peer::State::kReady) return;
  while (!p.waiting.empty()) {
    PendingSend& w = p.waiting.front();
    if (w.kind == PendingSend::Kind::kControl) {
      const uint64_t wr_id = next_wr_;
      if (!send_slot(now, p, w.header, {}, 0)) break;
      if (w.fin_of) {
        wrs_.at(wr_id).cookie = w.fin_of;
        if (auto s = p.rndv_sends.find(w.fin_of); s != p.rndv_sends.end())
          s->second.fin_posted = true;
      }
    } else if (w.kind == PendingSend::Kind::kWrite) {
      // The data, then (with remote CQ data) a slot saying so: RC order places the data
      // first. Both or neither, so check the slot's room before the write.
      const uint32_t slot = p.send_seq % p.remote_slots;
      if (w.data && (p.send_credits == 0 || p.staging_busy[slot])) break;
      uint32_t lkey = 0;
      if (w.len > 0) {
        auto keys = engine_.register_memory(const_cast<uint8_t*>(w.buf), w.len,
                                            reinterpret_cast<uint64_t>(w.buf), kLocalWrite);
        if (!keys) break;
        lkey = keys->lkey;
      }
      WriteWr wr;
      wr.opcode = WrOpcode::kWrite;
      wr.lkey = lkey;
      wr.local_addr = reinterpret_cast<uint64_t>(w.buf);
      wr.length = w.len;
      wr.remote_addr = w.addr;
      wr.rkey = w.key;
      wr.wr_id = next_wr_;
      if (!engine_.post_write(now, p.qpn, wr)) {
        if (lkey) (void)engine_.deregister_memory(lkey);
        break;
      }
      WrRecord rec;
      rec.kind = WrRecord::Kind::kUserWrite;
      rec.peer = p.id;
      rec.user = true;
      rec.op = OpKind::kWrite;
      rec.len = w.len;
      rec.context = w.context;
      rec.release_lkey = lkey;
      wrs_.emplace(next_wr_++, rec);
      if (w.data) {
        SlotHeader h;
        h.kind = SlotKind::kRemoteData;
        h.flags = kSlotHasData;
        h.data = *w.data;
        h.length = w.len;
        if (!send_slot(now, p, h, {}, 0)) {
          // Room was checked above; the send queue was full. Keep the announcement.
          PendingSend ctl;
          ctl.kind = PendingSend::Kind::kControl;
          ctl.header = h;
          p.waiting.pop_front();
          p.waiting.push_front(ctl);
          break;
        }
      }
    } else if (w.len <= p.eager_max()) {
      SlotHeader h;
      h.kind = SlotKind::kEager;
      h.flags = uint8_t((w.tagged ? kSlotTagged : 0) | (w.data ? kSlotHasData : 0));
      h.tag = w.tag;
      h.data = w.data.value_or(0);
      h.length = w.len;
      const uint32_t slot = p.send_seq % p.remote_slots;
      const uint64_t wr_id = next_wr_;
      if (!send_slot(now, p, h, {w.buf, size_t(w.len)}, 0)) break;
      WrRecord& rec = wrs_.at(wr_id);
      rec.user = true;
      rec.op = OpKind::kSend;
      rec.tagged = w.tagged;
      rec.tag = w.tag;
      rec.len = w.len;
      rec.context = w.context;
      (void)slot;
      ++counters_.eager_sent;
    } else {
      SlotHeader h;
      h.kind = SlotKind::kRts;
      h.flags = uint8_t((w.tagged ? kSlotTagged : 0) | (w.data ? kSlotHasData : 0));
      h.tag = w.tag;
      h.data = w.data.value_or(0);
      h.length = w.len;
      h.send_cookie = next_cookie_;
      if (!send_slot(now, p, h, {}, 0)) break;
      p.rndv_sends[next_cookie_++] = Peer::RndvSend{w.buf, w.len, w.tagged, w.tag, w.context, 0, 0};
      ++counters_.rndv_sent;
    }
    p.waiting.pop_front();
  }
  return_credits(now, p, false);
}

Status RdmEndpoint::send(Time now, uint32_t id, const void* buf, uint64_t len, bool tagged,
                         uint64_t tag, std::optional<uint64_t> data, void* context) {
  Peer* p = peer(id);
  if (!p || len > config_.max_message || (len > 0 && !buf))
    return std::unexpected(Error::kInvalidArgument);
  PendingSend w;
  w.kind = PendingSend::Kind::kMessage;
  w.buf = static_cast<const uint8_t*>(buf);
  w.len = len;
  w.tagged = tagged;
  w.tag = tag;
  w.data = data;
  w.context = context;
  enqueue(now, *p, w);
  return {};
}

Status RdmEndpoint::write(Time now, uint32_t id, const void* buf, uint64_t len, uint64_t addr,
                          uint32_t key, std::optional<uint64_t> data, void* context) {
  Peer* p = peer(id);
  if (!p || len > (1ull << 31) || (len > 0 && !buf))
    return std::unexpected(Error::kInvalidArgument);
  PendingSend w;
  w.kind = PendingSend::Kind::kWrite;
  w.buf = static_cast<const uint8_t*>(buf);
  w.len = len;
  w.addr = addr;
  w.key = key;
  w.data = data;
  w.context = context;
  enqueue(now, *p, w);
  return {};
}

// A user operation that waits for its peer: queued (connecting on first use), or completed at
// once with the error of a peer that failed.
void RdmEndpoint::enqueue(Time now, Peer& p, const PendingSend& w) {
  if (p.state == Peer::State::kFailed) {
    complete(failed(w, p));
    return;
  }
  p.waiting.push_back(w);
  if (p.state == Peer::State::kNew) (void)start_connect(now, p);
  pump(now, p);
}

FiCompletion RdmEndpoint::failed(const PendingSend& w, const Peer& p) {
  FiCompletion c;
  c.context = w.context;
  c.kind = w.kind == PendingSend::Kind::kWrite ? OpKind::kWrite : OpKind::kSend;
  c.tagged = w.tagged;
  c.tag = w.tag;
  c.len = w.len;
  c.peer = p.id;
  c.error = p.failure.error;
  c.cause = p.failure.cause;
  return c;
}

// ---------------------------------------------------------------------------------------------
// Receiving

bool RdmEndpoint::matches(const PostedRecv& r, uint32_t from, bool tagged, uint64_t tag) const {
  if (r.tagged != tagged) return false;
  if (r.peer && *r.peer != from) return false;
  return !tagged || ((r.tag ^ tag) & ~r.ignore) == 0;
}

Status RdmEndpoint::recv(Time now, std::optional<uint32_t> from, void* buf, uint64_t len,
                         bool tagged, uint64_t tag, uint64_t ignore, void* context) {
  if ((from && !peer(*from)) || (len > 0 && !buf)) return std::unexpected(Error::kInvalidArgument);
  PostedRecv r{from, static_cast<uint8_t*>(buf), len, tagged, tag, ignore, context};
  for (auto it = unexpected_.begin(); it != unexpected_.end(); ++it) {
    if (it->claimed_by || !matches(r, it->peer, it->tagged, it->tag)) continue;
    Unexpected u = std::move(*it);
    unexpected_.erase(it);
    take_unexpected(now, std::move(r), std::move(u));
    return {};
  }
  if (from && peer(*from)->state == Peer::State::kFailed) {
    FiCompletion c;
    c.context = context;
    c.kind = OpKind::kRecv;
    c.buf = buf;
    c.tagged = tagged;
    c.peer = *from;
    c.error = peer(*from)->failure.error;
    c.cause = peer(*from)->failure.cause;
    complete(c);
    return {};
  }
  posted_.push_back(r);
  return {};
}

// A receive meets a message (one that arrived before it, or one arriving now): an eager
// payload is copied now, a rendezvous one is asked for (CTS) and lands in the receive's buffer.
void RdmEndpoint::take_unexpected(Time now, PostedRecv&& r, Unexpected&& u) {
  if (u.rts) {
    start_cts(now, std::move(r), u);
    return;
  }
  FiCompletion c;
  c.context = r.context;
  c.kind = OpKind::kRecv;
  c.tagged = u.tagged;
  c.tag = u.tag;
  c.peer = u.peer;
  c.buf = r.buf;
  c.has_data = u.data.has_value();
  c.data = u.data.value_or(0);
  c.len = std::min<uint64_t>(r.len, u.payload.size());
  if (c.len) std::memcpy(r.buf, u.payload.data(), c.len);
  if (u.payload.size() > r.len && !r.discard) {
    c.error = OpError::kTruncated;
    c.olen = u.payload.size() - r.len;
  }
  complete(c);
}

Status RdmEndpoint::peek(std::optional<uint32_t> from, uint64_t tag, uint64_t ignore, void* context,
                         bool claim) {
  if (from && !peer(*from)) return std::unexpected(Error::kInvalidArgument);
  const PostedRecv r{from, nullptr, 0, true, tag, ignore, context};
  FiCompletion c;
  c.context = context;
  c.kind = OpKind::kRecv;
  c.tagged = true;
  for (Unexpected& u : unexpected_) {
    if (u.claimed_by || !matches(r, u.peer, u.tagged, u.tag)) continue;
    if (claim) u.claimed_by = context;
    c.tag = u.tag;
    c.peer = u.peer;
    c.len = u.length;
    c.has_data = u.data.has_value();
    c.data = u.data.value_or(0);
    complete(c);
    return {};
  }
  c.error = OpError::kNoMessage;
  c.tag = tag;
  complete(c);
  return {};
}

Status RdmEndpoint::recv_claimed(Time now, void* context, void* buf, uint64_t len, bool discard) {
  if (!context || (!discard && len > 0 && !buf)) return std::unexpected(Error::kInvalidArgument);
  for (auto it = unexpected_.begin(); it != unexpected_.end(); ++it) {
    if (it->claimed_by != context) continue;
    Unexpected u = std::move(*it);
    unexpected_.erase(it);
    // A discarded rendezvous message still gets its CTS (for no bytes): the sender's
    // operation completes instead of waiting for ever.
    PostedRecv r{u.peer,
                 static_cast<uint8_t*>(discard ? nullptr : buf),
                 discard ? 0 : len,
                 true,
                 u.tag,
                 0,
                 context,
                 discard};
    take_unexpected(now, std::move(r), std::move(u));
    return {};
  }
  return std::unexpected(Error::kInvalidArgument);
}

bool RdmEndpoint::cancel(void* context) {
  for (auto it = posted_.begin(); it != posted_.end(); ++it) {
    if (it->context != context) continue;
    FiCompletion c;
    c.context = context;
    c.kind = OpKind::kRecv;
    c.buf = it->buf;
    c.tagged = it->tagged;
    c.tag = it->tag;
    c.error = OpError::kCanceled;
    posted_.erase(it);
    complete(c);
    return true;
  }
  return false;
}

void RdmEndpoint::start_cts(Time now, PostedRecv&& r, const Unexpected& u) {
  Peer& p = *peers_[u.peer];
  const uint64_t n = std::min(r.len, u.length);
  Peer::RndvRecv rr;
  rr.recv = r;
  rr.msg_len = u.length;
  rr.placed = n;
  rr.data = u.data;
  rr.tag = u.tag;
  rr.tagged = u.tagged;
  SlotHeader h;
  h.kind = SlotKind::kCts;
  h.send_cookie = u.send_cookie;
  h.recv_cookie = next_cookie_;
  h.length = n;
  if (n > 0) {
    auto keys = engine_.register_memory(r.buf, n, reinterpret_cast<uint64_t>(r.buf),
                                        kLocalWrite | kRemoteWrite);
    if (!keys) {
      FiCompletion c;
      c.context = r.context;
      c.kind = OpKind::kRecv;
      c.buf = r.buf;
      c.tagged = u.tagged;
      c.tag = u.tag;
      c.peer = u.peer;
      c.error = OpError::kPeerFailed;
      c.cause = FailureCause::kLocalResource;
      complete(c);
      return;
    }
    rr.lkey = keys->lkey;
    h.addr = reinterpret_cast<uint64_t>(r.buf);
    h.rkey = keys->rkey;
  }
  p.rndv_recvs[next_cookie_++] = rr;
  PendingSend ctl;
  ctl.kind = PendingSend::Kind::kControl;
  ctl.header = h;
  p.waiting.push_back(ctl);
  pump(now, p);
}

void RdmEndpoint::match_arrival(Time now, Unexpected&& u) {
  for (auto it = posted_.begin(); it != posted_.end(); ++it) {
    if (!matches(*it, u.peer, u.tagged, u.tag)) continue;
    PostedRecv r = *it;
    posted_.erase(it);
    take_unexpected(now, std::move(r), std::move(u));
    return;
  }
  ++counters_.unexpected;
  unexpected_.push_back(std::move(u));
}

void RdmEndpoint::on_slot(Time now, Peer& p, uint32_t slot, uint64_t byte_len) {
  const uint8_t* base = p.ring.get() + uint64_t(slot) * config_.slot_bytes;
  auto h = decode_slot_header({base, std::min<uint64_t>(byte_len, config_.slot_bytes)});
  const bool in_order = slot == p.recv_seq % config_.ring_slots;
  if (!h || !in_order || h->sequence != p.recv_seq ||
      (h->kind == SlotKind::kEager && kSlotHeaderBytes + h->length > byte_len)) {
    // The peer broke the protocol (its QP is bound to its addresses): the connection is over.
    ++counters_.bad_slot;
    fail_peer(now, p, OpError::kPeerFailed, FailureCause::kProtocol,
              "slot " + std::to_string(slot) + " broke the ring's order or length (expected " +
                  "sequence " + std::to_string(p.recv_seq) + ")");
    return;
  }
  ++p.recv_seq;
  ++p.credits_owed;
  p.send_credits += h->credits;
  ++counters_.received;
  const std::optional<uint64_t> data =
      (h->flags & kSlotHasData) ? std::optional<uint64_t>(h->data) : std::nullopt;
  switch (h->kind) {
    case SlotKind::kEager: {
      Unexpected u;
      u.peer = p.id;
      u.tagged = (h->flags & kSlotTagged) != 0;
      u.tag = h->tag;
      u.data = data;
      u.length = h->length;
      u.payload.assign(base + kSlotHeaderBytes, base + kSlotHeaderBytes + h->length);
      match_arrival(now, std::move(u));
      break;
    }
    case SlotKind::kRts: {
      Unexpected u;
      u.peer = p.id;
      u.tagged = (h->flags & kSlotTagged) != 0;
      u.tag = h->tag;
      u.data = data;
      u.length = h->length;
      u.rts = true;
      u.send_cookie = h->send_cookie;
      match_arrival(now, std::move(u));
      break;
    }
    case SlotKind::kCts: {
      auto it = p.rndv_sends.find(h->send_cookie);
      if (it == p.rndv_sends.end() || h->length > it->second.len) {
        ++counters_.bad_slot;
        fail_peer(now, p, OpError::kPeerFailed, FailureCause::kProtocol,
                  "a CTS for an unknown rendezvous send, or longer than its message");
        return;
      }
      Peer::RndvSend& s = it->second;
      const uint64_t n = h->length;
      if (n > 0) {
        auto keys = engine_.register_memory(const_cast<uint8_t*>(s.buf), n,
                                            reinterpret_cast<uint64_t>(s.buf), kLocalWrite);
        if (!keys) {
          fail_peer(now, p, OpError::kPeerFailed, FailureCause::kLocalResource,
                    "registering a rendezvous send's buffer: " + err(keys.error()));
          return;
        }
        s.lkey = keys->lkey;
      }
      for (uint64_t off = 0; off < n; off += kChunk) {
        WriteWr wr;
        wr.opcode = WrOpcode::kWrite;
        wr.lkey = s.lkey;
        wr.local_addr = reinterpret_cast<uint64_t>(s.buf) + off;
        wr.length = std::min(kChunk, n - off);
        wr.remote_addr = h->addr + off;
        wr.rkey = h->rkey;
        wr.wr_id = next_wr_;
        if (auto st = engine_.post_write(now, p.qpn, wr); !st) {
          fail_peer(now, p, OpError::kPeerFailed, FailureCause::kLocalResource,
                    "posting a rendezvous data WRITE: " + err(st.error()));
          return;
        }
        WrRecord rec;
        rec.kind = WrRecord::Kind::kRndvData;
        rec.peer = p.id;
        rec.cookie = h->send_cookie;
        wrs_.emplace(next_wr_++, rec);
        ++s.writes_left;
      }
      s.recv_cookie = h->recv_cookie;
      // With data, the FIN waits for its WRITEs' completions (on_engine_completion).
      if (s.writes_left == 0) queue_fin(p, it->first, s.recv_cookie);
      break;
    }
    case SlotKind::kFin: {
      auto it = p.rndv_recvs.find(h->recv_cookie);
      if (it == p.rndv_recvs.end()) {
        ++counters_.bad_slot;
        fail_peer(now, p, OpError::kPeerFailed, FailureCause::kProtocol,
                  "a FIN for an unknown rendezvous receive");
        return;
      }
      Peer::RndvRecv& r = it->second;
      if (r.lkey) (void)engine_.deregister_memory(r.lkey);
      FiCompletion c;
      c.context = r.recv.context;
      c.kind = OpKind::kRecv;
      c.buf = r.recv.buf;
      c.tagged = r.tagged;
      c.tag = r.tag;
      c.peer = p.id;
      c.has_data = r.data.has_value();
      c.data = r.data.value_or(0);
      c.len = r.placed;
      if (r.msg_len > r.placed && !r.recv.discard) {
        c.error = OpError::kTruncated;
        c.olen = r.msg_len - r.placed;
      }
      complete(c);
      p.rndv_recvs.erase(it);
      break;
    }
    case SlotKind::kRemoteData: {
      FiCompletion c;
      c.kind = OpKind::kRemoteData;
      c.peer = p.id;
      c.has_data = true;
      c.data = h->data;
      c.len = h->length;
      complete(c);
      break;
    }
  }
  pump(now, p);
}

// What a WR was for, in a failure's text.
std::string RdmEndpoint::describe_wr(const WrRecord& r) {
  switch (r.kind) {
    case WrRecord::Kind::kSlot:
      return std::string("WRITE_IMM (") + slot_kind_name(r.slot_kind) + ", slot " +
             std::to_string(r.staging_slot) + ")";
    case WrRecord::Kind::kCredit:
      return "WRITE_IMM (credit return)";
    case WrRecord::Kind::kRndvData:
      return "WRITE (rendezvous data)";
    case WrRecord::Kind::kUserWrite:
      return "WRITE (fi_write, " + std::to_string(r.len) + " bytes)";
  }
  return "?";
}

// An error completion: the first on a connection is its cause, with what the engine knows of
// the QP; the ones after it (flushed, for everything outstanding) fail nothing new.
void RdmEndpoint::fail_on_completion(Time now, Peer& p, const std::string& op,
                                     const Completion& c) {
  if (p.state == Peer::State::kFailed) return;
  std::string what = op + " failed: " + wc_status_name(c.status);
  if (const char* m = status_meaning(c.status); *m) what += std::string(" (") + m + ")";
  fail_peer(now, p, OpError::kPeerFailed, cause_of(c.status), what + "; " + qp_detail(c.qpn));
}

void RdmEndpoint::on_engine_completion(Time now, const Completion& c) {
  if (c.opcode == WcOpcode::kRecvImm) {
    auto q = by_qpn_.find(c.qpn);
    if (q == by_qpn_.end()) return;
    Peer& p = *peers_[q->second];
    if (c.status != WcStatus::kSuccess) {
      fail_on_completion(now, p, "a receive (WRITE_IMM from the peer)", c);
      return;
    }
    (void)engine_.post_recv(p.qpn, 0);
    // Anything from the peer's QP says it is ready (its confirm may still be on the way).
    if (p.state == Peer::State::kAccepted) set_ready(now, p);
    if (c.imm & kImmCredit) {
      p.send_credits += c.imm & ~kImmCredit;
      pump(now, p);
      return;
    }
    if (p.state != Peer::State::kReady || c.imm >= config_.ring_slots) {
      ++counters_.bad_slot;
      fail_peer(now, p, OpError::kPeerFailed, FailureCause::kProtocol,
                "a slot write before the connection was ready, or past the ring (immediate " +
                    std::to_string(c.imm) + ")");
      return;
    }
    on_slot(now, p, c.imm, c.byte_len);
    return;
  }
  auto it = wrs_.find(c.wr_id);
  if (it == wrs_.end()) return;
  const WrRecord rec = it->second;
  wrs_.erase(it);
  Peer& p = *peers_[rec.peer];
  const bool ok = c.status == WcStatus::kSuccess;
  if (rec.kind == WrRecord::Kind::kSlot && rec.staging_slot < p.staging_busy.size())
    p.staging_busy[rec.staging_slot] = false;
  if (rec.release_lkey) (void)engine_.deregister_memory(rec.release_lkey);
  // The connection fails before this WR's own operation completes, so that the operation
  // carries the connection's first cause (this one, unless an earlier one came first).
  if (!ok) fail_on_completion(now, p, describe_wr(rec), c);
  if (rec.user) {
    FiCompletion f;
    f.context = rec.context;
    f.kind = rec.op;
    f.tagged = rec.tagged;
    f.tag = rec.tag;
    f.len = rec.len;
    f.peer = p.id;
    if (!ok) {
      f.error = p.failure.error;
      f.cause = p.failure.cause;
    }
    complete(f);
  }
  if (rec.kind == WrRecord::Kind::kRndvData) {
    auto s = p.rndv_sends.find(rec.cookie);
    if (s != p.rndv_sends.end() && --s->second.writes_left == 0) {
      if (s->second.lkey) (void)engine_.deregister_memory(s->second.lkey);
      if (p.state == Peer::State::kFailed)
        complete_rndv_send(p, s->first);
      else
        queue_fin(p, s->first, s->second.recv_cookie);
    }
  }
  // A rendezvous send completes with its FIN: the receiver has it, so the sender's application
  // need not drive progress any further for the receive to complete.
  if (rec.kind == WrRecord::Kind::kSlot && rec.slot_kind == SlotKind::kFin && rec.cookie)
    complete_rndv_send(p, rec.cookie);
  if (ok) pump(now, p);
}

void RdmEndpoint::complete_rndv_send(Peer& p, uint64_t send_cookie) {
  auto s = p.rndv_sends.find(send_cookie);
  if (s == p.rndv_sends.end()) return;
  FiCompletion f;
  f.context = s->second.context;
  f.kind = OpKind::kSend;
  f.tagged = s->second.tagged;
  f.tag = s->second.tag;
  f.len = s->second.len;
  f.peer = p.id;
  if (p.state == Peer::State::kFailed) {
    f.error = p.failure.error;
    f.cause = p.failure.cause;
  }
  complete(f);
  p.rndv_sends.erase(s);
}

// The FIN of a rendezvous goes only once its data WRITEs have completed, that is once the
// receiver's engine has acknowledged every packet of them; the receiver deregisters its buffer
// when the FIN arrives. A FIN right behind the data would work with this engine too (it
// acknowledges a duplicate whose key is gone, docs/engine.md), saving a round trip per
// rendezvous; waiting keeps the connection from depending on that rule, which not every RDMA
// responder follows.
void RdmEndpoint::queue_fin(Peer& p, uint64_t send_cookie, uint64_t recv_cookie) {
  PendingSend ctl;
  ctl.kind = PendingSend::Kind::kControl;
  ctl.header.kind = SlotKind::kFin;
  ctl.header.recv_cookie = recv_cookie;
  ctl.fin_of = send_cookie;
  p.waiting.push_back(ctl);
}

void RdmEndpoint::on_engine_event(Time now, const Event& e) {
  if (e.type != EventType::kQpError) return;
  auto q = by_qpn_.find(e.qpn);
  if (q == by_qpn_.end()) return;
  Peer& p = *peers_[q->second];
  // The engine completes a QP's WRs before it reports the QP's error, so a cause from a
  // completion is already recorded; this one covers a QP that had no WR to complete.
  fail_peer(now, p, OpError::kPeerFailed, FailureCause::kQpError,
            "the engine moved its QP to ERR with no error completion; " + qp_detail(e.qpn));
}

Result<MemoryKeys> RdmEndpoint::register_memory(void* buf, uint64_t len, bool remote_write) {
  return engine_.register_memory(buf, len, reinterpret_cast<uint64_t>(buf),
                                 kLocalWrite | (remote_write ? uint32_t(kRemoteWrite) : 0u));
}

Status RdmEndpoint::deregister_memory(uint32_t lkey) {
  return engine_.deregister_memory(lkey);
}

bool RdmEndpoint::poll_completion(FiCompletion& out) {
  if (completions_.empty()) return false;
  out = completions_.front();
  completions_.pop_front();
  return true;
}

}  // namespace mrc::fi
