#include "net/session.h"

#include <sys/mman.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "net/secure_random.h"

namespace mrc::net {

NetResult<EngineConfig> session_engine_config(const SessionConfig& config) {
  EngineConfig ec;
  ec.num_ports = static_cast<uint8_t>(config.driver.ports.size());
  ec.seed = config.seed;
  if (config.random_identifiers) {
    auto key = secure_random_u64();
    if (!key) return std::unexpected(key.error());
    ec.identifier_key = *key;
  }
  ec.fabric_rtt = config.base_rtt;  // a QP's first packets: see EngineConfig::fabric_rtt
  ec.ack_every = config.ack_every;
  return ec;
}

NetResult<std::unique_ptr<Session>> Session::create(const SessionConfig& config) {
  auto s = std::unique_ptr<Session>(new Session());
  s->config_ = config;
  const size_t P = config.driver.ports.size();
  if (P == 0 || P > kHelloMaxPlanes)
    return net_fail(NetErrc::kInvalidArgument, "1 to 32 planes required");
  if (config.qps == 0 || config.qps > kHelloMaxQps)
    return net_fail(NetErrc::kInvalidArgument, "QP count out of range");
  if (config.mtu < 256 || config.mtu > 9000)
    return net_fail(NetErrc::kInvalidArgument, "MTU must be 256..9000");
  auto ec = session_engine_config(config);
  if (!ec) return std::unexpected(ec.error());
  s->engine_ = std::make_unique<Engine>(*ec);
  auto d = UdpDriver::open(*s->engine_, config.driver);
  if (!d) return std::unexpected(d.error());
  s->driver_ = std::move(*d);
  if (config.buffer_bytes == 0) return net_fail(NetErrc::kInvalidArgument, "empty buffer");
  // Anonymous pages: zero, and committed by the kernel only as they are written. A server
  // sets a client's buffer up at the handshake; the memory is spent when the client writes.
  void* mem = ::mmap(nullptr, config.buffer_bytes, PROT_READ | PROT_WRITE,
                     MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (mem == MAP_FAILED)
    return errno_fail("mmap a buffer of " + std::to_string(config.buffer_bytes) + " bytes", errno);
  s->buffer_ = MappedBuffer(static_cast<uint8_t*>(mem), Unmap{config.buffer_bytes});
  auto keys = s->engine_->register_memory(s->buffer_.get(), config.buffer_bytes,
                                          reinterpret_cast<uint64_t>(s->buffer_.get()),
                                          kLocalWrite | kRemoteWrite);
  if (!keys) return engine_fail("register_memory", keys.error());
  s->keys_ = *keys;
  QpCreateAttr ca;
  ca.sq_depth = config.sq_depth;
  ca.rq_depth = config.rq_depth;
  for (uint32_t i = 0; i < config.qps; ++i) {
    auto q = s->engine_->create_qp(ca);
    if (!q) return engine_fail("create_qp", q.error());
    s->qpns_.push_back(*q);
    // A PSN start that differs per QP and run (like perftest's lrand48() & 0xffffff); from the
    // CSPRNG unless fixed: a host off the path must not know the window's position.
    uint64_t r = config.seed * 0x9E3779B97F4A7C15ull + i * 0xBF58476D1CE4E5B9ull;
    if (config.random_identifiers) {
      auto v = secure_random_u64();
      if (!v) return std::unexpected(v.error());
      r = *v;
    }
    s->first_psn_.push_back(static_cast<uint32_t>(r >> 40) & 0xFFFFFF);
  }
  return s;
}

Hello Session::hello(HelloRole role) const {
  Hello h;
  h.role = role;
  h.transport = static_cast<uint8_t>(TransportMode::kMrc);
  h.ev_mode = static_cast<uint8_t>(config_.driver.ev_mode);
  h.evs_per_plane = static_cast<uint16_t>(config_.evs_per_plane);
  h.cc = static_cast<uint8_t>(config_.cc);
  h.mtu = config_.mtu;
  h.mpr_dest = config_.mpr;
  h.max_wimm_dest = config_.max_wimm;
  h.flags = hello_auth_flags(config_.driver.auth);
  h.rkey = keys_.rkey;
  h.remote_addr = reinterpret_cast<uint64_t>(buffer_.get());
  h.remote_len = config_.buffer_bytes;
  for (size_t p = 0; p < config_.driver.ports.size(); ++p) {
    HelloPlane hp;
    const Endpoint& e = driver_->local(static_cast<uint8_t>(p));
    std::memcpy(hp.addr.data(), &e.addr, 16);
    hp.udp_port = e.port;
    hp.leaf_usid = p < config_.leaf_usids.size() ? config_.leaf_usids[p] : 0;
    h.planes.push_back(hp);
  }
  for (size_t i = 0; i < qpns_.size(); ++i)
    h.qps.push_back(HelloQp{qpns_[i], first_psn_[i]});
  return h;
}

namespace {

// Whether a peer's hello fits our session: the same planes, QP count, EV mode and MTU, and a
// responder that accepts outstanding PSNs.
NetStatus check_peer(const SessionConfig& config, size_t qps, const Hello& peer) {
  const size_t P = config.driver.ports.size();
  if (peer.planes.size() != P)
    return net_fail(NetErrc::kIncompatible, "peer has " + std::to_string(peer.planes.size()) +
                                                " planes, we have " + std::to_string(P));
  if (peer.qps.size() != qps)
    return net_fail(NetErrc::kIncompatible, "peer has " + std::to_string(peer.qps.size()) +
                                                " QPs, we have " + std::to_string(qps) +
                                                " (use the same -q on both ends)");
  if (peer.ev_mode != static_cast<uint8_t>(config.driver.ev_mode))
    return net_fail(NetErrc::kIncompatible,
                    std::string("EV modes differ: peer ") +
                        ev::format_mode_name(static_cast<ev::FormatMode>(peer.ev_mode)) + ", we " +
                        ev::format_mode_name(config.driver.ev_mode));
  if (peer.mtu != config.mtu)
    return net_fail(NetErrc::kIncompatible, "MTUs differ: peer " + std::to_string(peer.mtu) +
                                                ", we " + std::to_string(config.mtu));
  if (peer.mpr_dest == 0)
    return net_fail(NetErrc::kIncompatible, "peer accepts no outstanding PSNs (MPR 0)");
  if (auto mode = hello_auth_mode(peer.flags); !mode || *mode != config.driver.auth)
    return net_fail(NetErrc::kIncompatible,
                    std::string("packet authentication differs: peer ") +
                        std::string(mode ? auth_mode_name(*mode) : "unknown") + ", we " +
                        std::string(auth_mode_name(config.driver.auth)));
  return {};
}

// What each plane's paths are planned from: the peer's port address and leaf uSID, ours, and
// the spines to spray over.
std::vector<PlanePaths> plane_paths(const SessionConfig& config, const Hello& peer) {
  std::vector<PlanePaths> planes(peer.planes.size());
  for (size_t p = 0; p < planes.size(); ++p) {
    std::memcpy(&planes[p].peer_addr, peer.planes[p].addr.data(), 16);
    planes[p].peer_leaf_usid = peer.planes[p].leaf_usid;
    planes[p].local_leaf_usid = p < config.leaf_usids.size() ? config.leaf_usids[p] : 0;
    if (p < config.spine_usids.size()) planes[p].spine_usids = config.spine_usids[p];
  }
  return planes;
}

}  // namespace

QpAttr session_qp_attr(const SessionConfig& config, const PeerQp& peer, uint32_t sq_psn,
                       std::vector<PathDesc> paths) {
  QpAttr a;
  a.transport = TransportMode::kMrc;
  a.paths = std::move(paths);
  a.ev_min_active = std::max<uint32_t>(1, static_cast<uint32_t>(a.paths.size()) / 8);
  const uint64_t link = config.link_bps * config.driver.ports.size();
  a.cc.algorithm = config.cc;
  a.cc.nscc.base_rtt = config.base_rtt;
  a.cc.nscc.link_bps = link;
  a.cc.nscc.mtu = config.mtu;
  // STEV and UDP EVs are hashed by the fabric's switches; SRV6 EVs are routes.
  a.cc.nscc.hashed_paths = config.driver.ev_mode != ev::FormatMode::kSrv6;
  a.cc.dcqcn.line_rate_bps = link;
  a.cc.dcqcn.mtu = config.mtu;
  const uint64_t bdp = static_cast<uint64_t>(static_cast<__uint128_t>(link) * config.base_rtt /
                                             (8 * kPicosPerSecond));
  a.cc.fixed_window = std::max<uint64_t>(2 * bdp, 16ull * config.mtu);
  a.dest_qpn = peer.qpn;
  a.peer = peer.peer_id;
  a.rq_psn = peer.first_psn;
  a.sq_psn = sq_psn;
  a.path_mtu = config.mtu;
  a.mpr_dest = config.mpr;
  a.max_wimm_dest = config.max_wimm;
  a.mpr = std::min(config.mpr, peer.mpr_dest);
  a.max_wimm = std::min(config.max_wimm, peer.max_wimm_dest);
  a.timeout = config.timeout;
  a.reorder_window = config.reorder_window;
  a.path_policy.probe_interval = config.probe_interval;
  a.path_policy.burst =
      config.spray_burst ? config.spray_burst : spray_burst(config.driver, config.mtu);
  return a;
}

namespace {

// QP i's attributes towards the peer's QP i (session_qp_attr with the hello's numbers).
QpAttr qp_attr(const SessionConfig& config, const Hello& peer, size_t i, uint32_t sq_psn,
               std::vector<PathDesc> paths) {
  return session_qp_attr(config,
                         PeerQp{Session::kPeerId, peer.qps[i].qpn, peer.qps[i].first_psn,
                                peer.mpr_dest, peer.max_wimm_dest},
                         sq_psn, std::move(paths));
}

}  // namespace

void Unmap::operator()(uint8_t* p) const {
  ::munmap(p, bytes);
}

NetStatus Session::set_remote_write(bool allowed) {
  const uint32_t access = kLocalWrite | (allowed ? kRemoteWrite : 0u);
  if (auto st = engine_->set_memory_access(keys_.lkey, access); !st)
    return engine_fail("set_memory_access", st.error());
  return {};
}

NetStatus Session::set_packet_keys(const PacketKeys& keys) {
  if (auto st = driver_->set_peer_keys(kPeerId, keys); !st) return st;
  have_keys_ = true;
  return {};
}

NetStatus Session::connect(const Hello& peer) {
  if (auto st = check_peer(config_, qpns_.size(), peer); !st) return st;
  if (config_.driver.auth != AuthMode::kOff && !have_keys_)
    return net_fail(NetErrc::kInvalidArgument,
                    "authenticated packets need the session's keys first (set_packet_keys)");
  peer_ = peer;
  std::vector<Endpoint> eps(peer.planes.size());
  for (size_t p = 0; p < eps.size(); ++p) {
    std::memcpy(&eps[p].addr, peer.planes[p].addr.data(), 16);
    eps[p].port = peer.planes[p].udp_port;
  }
  if (auto st = driver_->set_peer(kPeerId, eps); !st) return st;
  const std::vector<PlanePaths> planes = plane_paths(config_, peer);
  const Time now = driver_->now();
  for (size_t i = 0; i < qpns_.size(); ++i) {
    auto paths =
        plan_paths(config_.driver.ev_mode, config_.evs_per_plane, planes, static_cast<uint32_t>(i));
    if (!paths) return engine_fail("EV list", paths.error());
    const QpAttr a = qp_attr(config_, peer, i, first_psn_[i], std::move(*paths));
    for (QpState target : {QpState::kInit, QpState::kRtr, QpState::kRts})
      if (auto st = engine_->modify_qp(now, qpns_[i], target, a); !st)
        return engine_fail(std::string("modify_qp to ") + qp_state_name(target), st.error());
  }
  return {};
}

std::vector<std::pair<std::string, uint64_t>> Session::counters() const {
  return driver_counters(driver_->stats(), engine_->counters());
}

}  // namespace mrc::net
