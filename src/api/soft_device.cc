// The software device: configuration, the libibverbs calls of ocp-mrc-api.md section 7.2, and
// the progress thread (the driver of the engine). docs/c-api.md describes the design.
#include "api/soft_device.h"

#include <arpa/inet.h>
#include <dlfcn.h>
#include <linux/capability.h>
#include <signal.h>
#include <sys/eventfd.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <optional>
#include <sstream>

#include "api/api_errors.h"
#include "net/qlog_file.h"
#include "net/secure_random.h"

// verbs.h wraps some calls in macros / inline functions that end up calling these symbols.
#undef ibv_query_port
#undef ibv_reg_mr
#undef ibv_reg_mr_iova
#undef ibv_get_device_list

namespace mrc::api {

namespace {

std::string trim(std::string s) {
  const auto b = s.find_first_not_of(" \t\r\n");
  const auto e = s.find_last_not_of(" \t\r\n");
  return b == std::string::npos ? "" : s.substr(b, e - b + 1);
}

// "ADDR[/PREFIX][%IFNAME]". An IPv4 address (dotted, or IPv4-mapped ::ffff:a.b.c.d) becomes
// its mapped address, as a RoCEv2 GID; its port runs over IPv4 (net/udp_driver.h). PREFIX is
// in the notation's terms: 0..128 for IPv6 (default 64), 0..32 for dotted IPv4 (default 24,
// stored as 96 + it, the mapped address's prefix); a mapped address without one gets 96 + 24.
bool parse_port(const std::string& text, SoftPortConfig& out, std::string& error) {
  std::string s = trim(text);
  if (auto pct = s.find('%'); pct != std::string::npos) {
    out.ifname = s.substr(pct + 1);
    s = s.substr(0, pct);
  }
  std::optional<int> prefix;
  if (auto slash = s.find('/'); slash != std::string::npos) {
    const std::string digits = s.substr(slash + 1);
    if (digits.empty() || digits.size() > 3 ||
        digits.find_first_not_of("0123456789") != std::string::npos) {
      error = "bad prefix length in '" + text + "'";
      return false;
    }
    prefix = std::atoi(digits.c_str());
    s = s.substr(0, slash);
  }
  in_addr v4{};
  if (::inet_pton(AF_INET6, s.c_str(), &out.addr) == 1) {
    if (prefix && *prefix > 128) {
      error = "bad prefix length in '" + text + "' (0..128 for an IPv6 address)";
      return false;
    }
    out.prefix_len =
        static_cast<uint8_t>(prefix.value_or(IN6_IS_ADDR_V4MAPPED(&out.addr) ? 96 + 24 : 64));
    return true;
  }
  if (::inet_pton(AF_INET, s.c_str(), &v4) == 1) {  // IPv4-mapped, as a RoCEv2 GID
    if (prefix && *prefix > 32) {
      error = "bad prefix length in '" + text + "' (0..32 for an IPv4 address)";
      return false;
    }
    std::memset(&out.addr, 0, sizeof out.addr);
    out.addr.s6_addr[10] = out.addr.s6_addr[11] = 0xff;
    std::memcpy(&out.addr.s6_addr[12], &v4, 4);
    out.prefix_len = static_cast<uint8_t>(96 + prefix.value_or(24));
    return true;
  }
  error = "bad port address '" + text + "'";
  return false;
}

bool apply_setting(DeviceConfig& cfg, const std::string& key, const std::string& value,
                   std::string& error) {
  if (key == "ports" || key == "port") {
    std::stringstream ss(value);
    std::string item;
    while (std::getline(ss, item, ',')) {
      if (trim(item).empty()) continue;
      SoftPortConfig p;
      if (!parse_port(item, p, error)) return false;
      cfg.ports.push_back(p);
    }
  } else if (key == "udp_port") {
    const int v = std::atoi(value.c_str());
    if (v <= 0 || v > 65535 - static_cast<int>(kMaxSlots)) {
      error = "bad udp_port '" + value + "'";
      return false;
    }
    cfg.udp_base_port = static_cast<uint16_t>(v);
  } else if (key == "ev_mode") {
    if (value == "udp")
      cfg.ev_mode = ev::FormatMode::kUdp;
    else if (value == "stev")
      cfg.ev_mode = ev::FormatMode::kStev;
    else if (value == "srv6")
      cfg.ev_mode = ev::FormatMode::kSrv6;
    else {
      error = "bad ev_mode '" + value + "' (udp, stev, srv6)";
      return false;
    }
  } else if (key == "strict" || key == "lenient") {
    const bool on = value == "1" || value == "true" || value == "yes";
    const bool off = value == "0" || value == "false" || value == "no";
    if (!on && !off) {
      error = "bad " + key + " '" + value + "' (1 or 0)";
      return false;
    }
    // `lenient` is the older name of the opposite setting (lenient = 1 is now the default).
    cfg.strict = key == "strict" ? on : off;
  } else if (key == "qlog") {
    cfg.qlog = value;
  } else if (key == "auto_evs_per_plane") {
    const int v = std::atoi(value.c_str());
    if (v <= 0 || v > 1024) {
      error = "bad auto_evs_per_plane '" + value + "'";
      return false;
    }
    cfg.auto_evs_per_plane = static_cast<uint32_t>(v);
  } else {
    error = "unknown setting '" + key + "'";
    return false;
  }
  return true;
}

// An application linked against rdma-core's libibverbs before libmrc (-libverbs -lmrc) gets
// libibverbs's ibv_* functions (the first library in load order wins) and never sees
// mrc_soft0, only a puzzling "no device". Said once, when the library is loaded.
[[gnu::constructor]] void check_verbs_symbols_are_ours() {
  void* theirs = ::dlsym(RTLD_DEFAULT, "ibv_get_device_list");
  Dl_info t{}, o{};
  if (!theirs || !::dladdr(theirs, &t) ||
      !::dladdr(reinterpret_cast<void*>(&check_verbs_symbols_are_ours), &o) ||
      t.dli_fbase == o.dli_fbase)
    return;
  std::fprintf(stderr,
               "%s: ibv_get_device_list resolves to %s, not to %s: link -lmrc before -libverbs "
               "(or without -libverbs), else the device is not listed (docs/c-api.md, \"Build "
               "and link\")\n",
               kDeviceName, t.dli_fname ? t.dli_fname : "another library",
               o.dli_fname ? o.dli_fname : "libmrc");
}

const char* env(const char* name) {
  const char* v = std::getenv(name);
  return v && *v ? v : nullptr;
}

}  // namespace

bool load_device_config(DeviceConfig& out, std::string& error) {
  DeviceConfig cfg;
  // 1. The file ($MRC_SOFT_CONFIG, else /etc/mrc/mrc_soft.conf if it exists).
  const char* path = env("MRC_SOFT_CONFIG");
  std::ifstream in(path ? path : "/etc/mrc/mrc_soft.conf");
  if (path && !in) {
    error = std::string("cannot read MRC_SOFT_CONFIG ") + path;
    return false;
  }
  std::string line;
  while (in && std::getline(in, line)) {
    if (auto hash = line.find('#'); hash != std::string::npos) line.resize(hash);
    if (trim(line).empty()) continue;
    const auto eq = line.find('=');
    if (eq == std::string::npos) {
      error = "config line without '=': " + line;
      return false;
    }
    if (!apply_setting(cfg, trim(line.substr(0, eq)), trim(line.substr(eq + 1)), error))
      return false;
  }
  // 2. The environment overrides the file.
  if (const char* v = env("MRC_SOFT_PORTS")) {
    cfg.ports.clear();
    if (!apply_setting(cfg, "ports", v, error)) return false;
  }
  if (const char* v = env("MRC_SOFT_UDP_PORT"); v && !apply_setting(cfg, "udp_port", v, error))
    return false;
  if (const char* v = env("MRC_SOFT_EV_MODE"); v && !apply_setting(cfg, "ev_mode", v, error))
    return false;
  if (const char* v = env("MRC_SOFT_LENIENT"); v && !apply_setting(cfg, "lenient", v, error))
    return false;
  if (const char* v = env("MRC_SOFT_STRICT"); v && !apply_setting(cfg, "strict", v, error))
    return false;
  if (const char* v = env("MRC_SOFT_QLOG"); v && !apply_setting(cfg, "qlog", v, error))
    return false;
  if (cfg.ports.empty()) {
    error = "no ports: set MRC_SOFT_PORTS=addr[/prefix][%ifname],... or MRC_SOFT_CONFIG";
    return false;
  }
  if (cfg.ports.size() > kMaxPorts) {
    error = "more than 32 ports";
    return false;
  }
  out = cfg;
  return true;
}

in6_addr peer_address(const DeviceConfig& cfg, const in6_addr& gid, size_t p) {
  const SoftPortConfig& local = cfg.ports[p];
  in6_addr out{};
  for (int bit = 0; bit < 128; ++bit) {
    const uint8_t m = static_cast<uint8_t>(0x80 >> (bit % 8));
    const uint8_t* src = bit < local.prefix_len ? local.addr.s6_addr : gid.s6_addr;
    if (src[bit / 8] & m) out.s6_addr[bit / 8] |= m;
  }
  return out;
}

void warn_once(Leniency what, const char* fmt, ...) {
  static std::atomic<bool> said[static_cast<size_t>(Leniency::kCount)];
  if (said[static_cast<size_t>(what)].exchange(true)) return;
  va_list ap;
  va_start(ap, fmt);
  std::fprintf(stderr, "%s: ", kDeviceName);
  std::vfprintf(stderr, fmt, ap);
  std::fprintf(stderr, "\n");
  va_end(ap);
}

bool has_cap_net_admin() {
  __user_cap_header_struct hdr{_LINUX_CAPABILITY_VERSION_3, 0};
  __user_cap_data_struct data[2]{};
  if (::syscall(SYS_capget, &hdr, data) != 0) return false;
  return (data[CAP_NET_ADMIN / 32].effective >> (CAP_NET_ADMIN % 32)) & 1;
}

SoftDevice* device_of(ibv_context* ctx) {
  if (!ctx || !ctx->device || std::strcmp(ctx->device->name, kDeviceName) != 0) return nullptr;
  return reinterpret_cast<SoftContext*>(ctx)->dev;
}

void post_async_event(mrc_context* ctx, const mrc_async_event& e) {
  {
    std::lock_guard lk(ctx->mu);
    ctx->async_events.push_back(e);
    // Counted under ctx->mu: a reader that pops this event finds its count in the eventfd.
    const uint64_t one = 1;
    [[maybe_unused]] auto n = ::write(ctx->dev->async_fd, &one, sizeof one);
  }
  ctx->async_cv.notify_all();
}

bool is_qp_event(ibv_event_type t) {
  switch (t) {
    case IBV_EVENT_QP_FATAL:
    case IBV_EVENT_QP_REQ_ERR:
    case IBV_EVENT_QP_ACCESS_ERR:
    case IBV_EVENT_COMM_EST:
    case IBV_EVENT_SQ_DRAINED:
    case IBV_EVENT_PATH_MIG:
    case IBV_EVENT_PATH_MIG_ERR:
    case IBV_EVENT_QP_LAST_WQE_REACHED:
      return true;
    default:
      return false;
  }
}

bool is_cq_event(ibv_event_type t) {
  return t == IBV_EVENT_CQ_ERR;
}

void retire_async_events(mrc_context* ctx, const void* object, int& unacked) {
  std::unique_lock lk(ctx->mu);
  std::erase_if(ctx->async_events, [&](const mrc_async_event& e) {
    const bool about = (is_qp_event(e.event_type) && e.element.qp == object) ||
                       (is_cq_event(e.event_type) && e.element.cq == object);
    if (about) {
      uint64_t v;
      [[maybe_unused]] auto n = ::read(ctx->dev->async_fd, &v, sizeof v);  // its count
    }
    return about;
  });
  ctx->async_cv.wait(lk, [&] { return unacked == 0; });
}

void notify_cq(mrc_cq* cq) {
  // cq->mu is held by the caller.
  if (!cq->armed || !cq->channel) return;
  cq->armed = false;
  ++cq->events_delivered;
  {
    std::lock_guard lk(cq->channel->mu);
    cq->channel->pending.push_back(cq);
  }
  const uint64_t one = 1;
  [[maybe_unused]] auto n = ::write(cq->channel->fd, &one, sizeof one);
}

// ---- Progress thread --------------------------------------------------------------------------

void SoftDevice::run() {
  while (!stop.load(std::memory_order_relaxed)) {
    // API callers waiting for the lock go first (DeviceLock).
    while (waiters.load(std::memory_order_relaxed) > 0)
      std::this_thread::yield();
    std::lock_guard lk(mu);
    turn();
  }
}

void SoftDevice::turn() {
  sync_node_state();
  // Idle wait: with DataPath::wake() an API call ends it at once, so it can be long (node
  // state changes of other processes -- port admin, EV profiles, EV events -- are then seen
  // within 1 ms); without it an API call waits for the turn to end (at most 200 us).
  Time wait = path->can_wake() ? ms(1) : us(200);
  const Time now = path->now();
  const Time deadline = engine->next_deadline();
  if (deadline != kNever) wait = deadline > now ? std::min(wait, deadline - now) : 0;
  if (waiters.load(std::memory_order_relaxed) > 0) wait = 0;
  if (!path->poll(wait)) error = path->last_error();
  Completion c;
  while (engine->poll_completion(c))
    dispatch_completion(c);
  Event e;
  while (engine->poll_event(e))
    dispatch_event(e);
  deliver_ev_events();
}

void SoftDevice::sync_node_state() {
  NodeLock guard(*node);
  NodeStateLayout& s = node->get();
  const Time now = path->now();
  if (s.port_admin_generation != port_generation) {
    port_generation = s.port_admin_generation;
    port_up.resize(config.ports.size(), true);
    for (size_t p = 0; p < config.ports.size(); ++p) {
      const bool up = !s.port_disabled[p + 1];
      if (up == port_up[p]) continue;
      port_up[p] = up;
      // Engine: that plane's EVs stop (or resume) carrying traffic; the async port event is
      // raised from dispatch_event (kPortChange).
      engine->set_port_up(now, static_cast<uint8_t>(p), up);
    }
  }
  // Profiles changed by a controller (MODIFY_EV_STATE; with the MODIFY_ONLINE capabilities
  // REPLACE_EV, MODIFY_FIELDS and CC CONFIG on ONLINE profiles): every change bumps the
  // profile's generation counter, and each QP remembers the generation it applied, so one
  // compare per QP and turn finds them (docs/c-api.md "Node-local state"). A profile's paths are
  // built (expanded) once per turn however many QPs use it.
  std::unordered_map<int, std::optional<std::vector<PathDesc>>> built;
  for (auto& [engine_qpn, qp] : qps) {
    if (qp->ev_profile >= 0 && !qp->auto_paths) {
      const ShmEvProfile& prof = s.ev[qp->ev_profile];
      if (prof.generation != qp->ev_generation) {
        qp->ev_generation = prof.generation;
        auto [it, fresh] = built.try_emplace(qp->ev_profile);
        if (fresh) {
          QpAttr tmp;
          bool auto_paths = false;
          if (build_paths(*this, prof, s, tmp, auto_paths) == 0) it->second = std::move(tmp.paths);
        }
        sync_qp_paths(engine_qpn, qp, it->second ? &*it->second : nullptr, prof, now);
      }
    }
    if (qp->cc_profile >= 0) {
      const ShmCcProfile& prof = s.cc[qp->cc_profile];
      if (prof.generation != qp->cc_generation) {
        qp->cc_generation = prof.generation;
        QpAttr tmp;
        apply_cc(prof, config.ports.size(), config.ev_mode, tmp);
        // The algorithm cannot change while the profile is ONLINE, so this only fails for a QP
        // already in RESET: nothing to reconfigure then.
        if (engine->reconfigure_cc(now, engine_qpn, tmp.cc)) qp->engine_attr.cc = tmp.cc;
      }
    }
  }
}

void SoftDevice::sync_qp_paths(uint32_t engine_qpn, mrc_qp* qp, const std::vector<PathDesc>* paths,
                               const ShmEvProfile& prof, Time now) {
  std::vector<PathDesc>& have = qp->engine_attr.paths;
  const size_t n = std::min<size_t>(prof.ev_count, have.size());
  for (size_t i = 0; i < n; ++i) {
    const int index = static_cast<int>(i);
    const bool denied = prof.entries[i].state == static_cast<uint8_t>(ev::EvState::kDenied);
    if (paths && i < paths->size() &&
        ((*paths)[i].ev != have[i].ev || (*paths)[i].port != have[i].port)) {
      // REPLACE_EV / MODIFY_FIELDS: a different EV at this index.
      if (engine->replace_path(now, engine_qpn, index, (*paths)[i])) have[i] = (*paths)[i];
      continue;
    }
    (void)engine->set_path_denied(now, engine_qpn, index, denied);
    have[i].state = denied ? ev::EvState::kDenied : ev::EvState::kGood;
  }
}

void SoftDevice::dispatch_completion(const Completion& c) {
  auto it = qps.find(c.qpn);
  if (it == qps.end()) return;
  mrc_qp* qp = it->second;
  ibv_wc wc{};
  wc.wr_id = c.wr_id;
  wc.qp_num = qp->qpn;
  wc.byte_len = static_cast<uint32_t>(c.byte_len);
  switch (c.status) {
    case WcStatus::kSuccess:
      wc.status = IBV_WC_SUCCESS;
      break;
    case WcStatus::kRetryExceeded:
      wc.status = IBV_WC_RETRY_EXC_ERR;
      break;
    case WcStatus::kFlushed:
      wc.status = IBV_WC_WR_FLUSH_ERR;
      break;
    case WcStatus::kAckContradiction:
      // The peer's acknowledgements cannot be trusted: a remote operation error, as verbs
      // reports a responder that broke the protocol.
      wc.status = IBV_WC_REM_OP_ERR;
      break;
  }
  mrc_cq* cq = qp->init.send_cq;
  switch (c.opcode) {
    case WcOpcode::kWrite:
      wc.opcode = IBV_WC_RDMA_WRITE;
      break;
    case WcOpcode::kWriteImm:
      wc.opcode = IBV_WC_RDMA_WRITE;
      break;
    case WcOpcode::kRecvImm:
      wc.opcode = IBV_WC_RECV_RDMA_WITH_IMM;
      wc.wc_flags = IBV_WC_WITH_IMM;
      wc.imm_data = htonl(c.imm);
      cq = qp->init.recv_cq;
      break;
  }
  if (!cq) return;
  bool overrun = false;
  {
    std::lock_guard lk(cq->mu);
    if (static_cast<int>(cq->wcs.size()) >= cq->capacity) {
      overrun = !cq->overrun;
      cq->overrun = true;
    } else {
      cq->wcs.push_back(wc);
      notify_cq(cq);
    }
  }
  if (overrun) {  // libibverbs semantics: a CQ overrun is an IBV_EVENT_CQ_ERR
    mrc_async_event e{};
    e.element.cq = cq;
    e.event_type = IBV_EVENT_CQ_ERR;
    post_async_event(cq->ctx, e);
  }
}

void SoftDevice::dispatch_event(const Event& e) {
  switch (e.type) {
    case EventType::kQpError: {
      auto it = qps.find(e.qpn);
      if (it == qps.end()) return;
      it->second->state = IBV_QPS_ERR;
      mrc_async_event ae{};
      ae.element.qp = it->second;
      ae.event_type = IBV_EVENT_QP_FATAL;
      post_async_event(it->second->ctx, ae);
      return;
    }
    case EventType::kPortChange: {
      for (mrc_context* ctx : contexts) {
        mrc_async_event ae{};
        ae.element.port_num = e.port + 1;
        ae.event_type = e.to == ev::EvState::kGood ? IBV_EVENT_PORT_ACTIVE : IBV_EVENT_PORT_ERR;
        post_async_event(ctx, ae);
      }
      return;
    }
    case EventType::kEvStateChange: {
      auto it = qps.find(e.qpn);
      if (it == qps.end() || it->second->ev_profile < 0 || it->second->auto_paths) return;
      if (e.to == ev::EvState::kDenied || e.from == ev::EvState::kDenied) return;  // controller's
      NodeLock guard(*node);
      ShmEvProfile& prof = node->get().ev[it->second->ev_profile];
      if (e.ev_index >= prof.ev_count) return;
      ShmEvEntry& entry = prof.entries[e.ev_index];
      if (entry.state == static_cast<uint8_t>(e.to)) return;  // another QP reported it already
      entry.state = static_cast<uint8_t>(e.to);
      const int bit = e.to == ev::EvState::kGood ? MRC_CTL_EV_GOOD : MRC_CTL_EV_ASSUMED_BAD;
      if (!(prof.ev_event_mask & bit)) return;
      ShmEvEvent ne{};
      ne.profile_id = prof.id;
      std::memcpy(ne.val, entry.val, sizeof ne.val);
      ne.port = entry.port;
      ne.state = entry.state;
      ne.owner_pid = prof.owner_pid;
      node->push_event(ne);
      return;
    }
    case EventType::kAckEvChange:  // the reverse set is the QP's own, like its backups
    case EventType::kEvSwap:
      // Active/backup membership is the QP's own: the profile's entry states (above) say
      // all the controller is told. The C API's QPs configure no backup set.
      return;
  }
}

void SoftDevice::deliver_ev_events() {
  bool any = false;
  for (mrc_context* ctx : contexts)
    any |= !ctx->ev_cqs.empty();
  if (!any) return;
  NodeLock guard(*node);
  NodeStateLayout& s = node->get();
  const pid_t self = ::getpid();
  for (mrc_context* ctx : contexts) {
    std::lock_guard clk(ctx->mu);
    for (mrc_cq* cq : ctx->ev_cqs) {
      std::lock_guard lk(cq->mu);
      if (s.event_seq > kEventRing && cq->ev_next_seq < s.event_seq - kEventRing) {
        cq->ev_pending_drops += static_cast<uint32_t>(s.event_seq - kEventRing - cq->ev_next_seq);
        cq->ev_next_seq = s.event_seq - kEventRing;
      }
      bool added = false;
      for (; cq->ev_next_seq < s.event_seq; ++cq->ev_next_seq) {
        const ShmEvEvent& ne = s.events[cq->ev_next_seq % kEventRing];
        // Events go to the controller that configured the profile, or to any controller once
        // that process is gone (docs/c-api.md).
        const bool owner_alive =
            ne.owner_pid > 0 && (::kill(ne.owner_pid, 0) == 0 || errno == EPERM);
        if (ne.owner_pid != self && owner_alive) continue;
        if (static_cast<int>(cq->ev_events.size()) >= cq->capacity) {
          ++cq->ev_pending_drops;  // OCP 5.6: a full EV-event CQ drops and counts
          continue;
        }
        EvEventRecord r{};
        r.profile_id = ne.profile_id;
        std::memcpy(r.ev.val, ne.val, sizeof r.ev.val);
        r.ev.port = ne.port;
        r.drop_count = cq->ev_pending_drops;
        cq->ev_pending_drops = 0;
        r.state = ne.state == static_cast<uint8_t>(ev::EvState::kGood) ? MRC_CTL_EV_GOOD
                  : ne.state == static_cast<uint8_t>(ev::EvState::kAssumedBad)
                      ? MRC_CTL_EV_ASSUMED_BAD
                      : MRC_CTL_EV_DENIED;
        cq->ev_events.push_back(r);
        added = true;
      }
      if (added) notify_cq(cq);
    }
  }
}

}  // namespace mrc::api

// ---- libibverbs calls (ocp-mrc-api.md section 7.2) --------------------------------------------

using namespace mrc;
using namespace mrc::api;

namespace {

ibv_device g_device = [] {
  ibv_device d{};
  d.node_type = IBV_NODE_CA;
  d.transport_type = IBV_TRANSPORT_IB;
  std::strncpy(d.name, kDeviceName, sizeof d.name - 1);
  std::strncpy(d.dev_name, "uverbs_mrc_soft0", sizeof d.dev_name - 1);
  return d;
}();

}  // namespace

#define MRC_EXPORT extern "C" __attribute__((visibility("default")))

MRC_EXPORT ibv_device** ibv_get_device_list(int* num_devices) {
  auto** list = static_cast<ibv_device**>(std::calloc(2, sizeof(ibv_device*)));
  if (!list) {
    errno = ENOMEM;
    return nullptr;
  }
  DeviceConfig cfg;
  std::string error;
  int n = 0;
  if (load_device_config(cfg, error)) list[n++] = &g_device;
  if (num_devices) *num_devices = n;
  return list;
}

MRC_EXPORT void ibv_free_device_list(ibv_device** list) {
  std::free(list);
}

MRC_EXPORT const char* ibv_get_device_name(ibv_device* device) {
  return device ? device->name : nullptr;
}

MRC_EXPORT __be64 ibv_get_device_guid(ibv_device* device) {
  return device ? htobe64(0x4d52430000000001ull) : 0;
}

MRC_EXPORT ibv_context* ibv_open_device(ibv_device* device) {
  if (device != &g_device) {
    errno = ENODEV;
    return nullptr;
  }
  auto dev = std::make_unique<SoftDevice>();
  std::string error;
  if (!load_device_config(dev->config, error)) {
    std::fprintf(stderr, "mrc_soft0: %s\n", error.c_str());
    errno = ENODEV;
    return nullptr;
  }
  dev->node = NodeState::open_shared();
  if (!dev->node) {
    std::fprintf(stderr, "mrc_soft0: node state: %s\n", std::strerror(errno));
    return nullptr;
  }
  dev->slot = dev->node->take_slot(::getpid());
  if (dev->slot < 0) {
    errno = EMFILE;
    return nullptr;
  }
  EngineConfig ec;
  ec.num_ports = static_cast<uint8_t>(dev->config.ports.size());
  ec.seed = static_cast<uint64_t>(::getpid()) * 7919 + static_cast<uint64_t>(dev->slot);
  // QPNs and memory keys a host off the path cannot guess (docs/linux-driver.md, "Security");
  // QPNs of 16 bits: the process slot is in the bits above (docs/c-api.md, "QP numbers").
  ec.qpn_bits = 16;
  auto key = net::secure_random_u64();
  if (!key) {
    std::fprintf(stderr, "mrc_soft0: %s\n", key.error().message.c_str());
    dev->node->release_slot(dev->slot);
    errno = EIO;
    return nullptr;
  }
  ec.identifier_key = *key;
  dev->engine = std::make_unique<Engine>(ec);
  if (!dev->config.qlog.empty()) {
    const std::string path = dev->config.qlog + "." + std::to_string(::getpid()) + "-" +
                             std::to_string(dev->slot) + ".jsonl";
    auto q = net::QlogFile::open(path);
    if (!q) {
      std::fprintf(stderr, "mrc_soft0: %s\n", q.error().message.c_str());
      dev->node->release_slot(dev->slot);
      errno = EINVAL;
      return nullptr;
    }
    dev->qlog = std::move(*q);
    dev->engine->set_event_log(dev->qlog.get());
  }
  dev->path = open_udp_data_path(*dev->engine, dev->config.ports,
                                 static_cast<uint16_t>(dev->config.udp_base_port + dev->slot),
                                 dev->config.ev_mode, &error);
  if (!dev->path) {
    std::fprintf(stderr, "mrc_soft0: %s\n", error.c_str());
    dev->node->release_slot(dev->slot);
    errno = EADDRNOTAVAIL;
    return nullptr;
  }
  auto* sc = new SoftContext{};
  sc->ibv.device = &g_device;
  sc->ibv.cmd_fd = -1;
  // Async events (mrc_get_async_event): pollable like libibverbs' async_fd.
  dev->async_fd = ::eventfd(0, EFD_SEMAPHORE | EFD_CLOEXEC);
  if (dev->async_fd < 0) {
    const int err = errno;
    dev->path.reset();
    dev->node->release_slot(dev->slot);
    delete sc;
    errno = err;
    return nullptr;
  }
  sc->ibv.async_fd = dev->async_fd;
  sc->ibv.num_comp_vectors = 1;
  sc->ibv.abi_compat = nullptr;  // not a verbs_context: verbs.h inlines call our symbols
  pthread_mutex_init(&sc->ibv.mutex, nullptr);
  sc->dev = dev.release();
  SoftDevice* d = sc->dev;
  d->progress = std::thread([d] { d->run(); });
  return &sc->ibv;
}

MRC_EXPORT int ibv_close_device(ibv_context* context) {
  SoftDevice* dev = device_of(context);
  if (!dev) return fail_errno(EINVAL);
  {
    DeviceLock lk(*dev);
    if (!dev->contexts.empty() || dev->pd_count > 0) return fail_errno(EBUSY);
  }
  dev->stop = true;
  dev->progress.join();
  dev->path.reset();
  dev->engine.reset();
  dev->node->release_slot(dev->slot);
  ::close(dev->async_fd);
  auto* sc = reinterpret_cast<SoftContext*>(context);
  pthread_mutex_destroy(&sc->ibv.mutex);
  dev->node.reset();
  delete dev;
  delete sc;
  return 0;
}

MRC_EXPORT int ibv_query_device(ibv_context* context, ibv_device_attr* attr) {
  SoftDevice* dev = device_of(context);
  if (!dev || !attr) return fail_errno(EINVAL);
  *attr = ibv_device_attr{};
  std::snprintf(attr->fw_ver, sizeof attr->fw_ver, "mrc_soft 1.0");
  attr->node_guid = ibv_get_device_guid(&g_device);
  attr->sys_image_guid = attr->node_guid;
  attr->max_mr_size = UINT64_MAX;
  attr->page_size_cap = 4096;
  attr->vendor_id = 0x4d5243;  // "MRC"
  attr->max_qp = static_cast<int>(dev->engine->config().max_qps);
  attr->max_qp_wr = 65536;
  attr->device_cap_flags = 0;
  attr->max_sge = 1;
  attr->max_cq = 65536;
  attr->max_cqe = 1 << 20;
  attr->max_mr = 1 << 20;
  attr->max_pd = 1 << 16;
  attr->phys_port_cnt = static_cast<uint8_t>(dev->config.ports.size());
  return 0;
}

MRC_EXPORT int ibv_query_port(ibv_context* context, uint8_t port_num,
                              struct _compat_ibv_port_attr* compat_attr) {
  SoftDevice* dev = device_of(context);
  // verbs.h's inline wrapper passes a full struct ibv_port_attr (it memsets it first).
  auto* attr = reinterpret_cast<ibv_port_attr*>(compat_attr);
  if (!dev || !attr || port_num < 1 || port_num > dev->config.ports.size())
    return fail_errno(EINVAL);
  bool disabled;
  {
    NodeLock guard(*dev->node);
    disabled = dev->node->get().port_disabled[port_num];
  }
  // OCP 5.6 mrc_ctl_modify_port: a disabled port reports IBV_PORT_DOWN.
  attr->state = disabled ? IBV_PORT_DOWN : IBV_PORT_ACTIVE;
  attr->max_mtu = IBV_MTU_4096;
  attr->active_mtu = IBV_MTU_4096;
  attr->gid_tbl_len = kGidTableLength;
  attr->max_msg_sz = 0x80000000u;
  attr->pkey_tbl_len = 1;
  attr->active_width = 1;
  attr->active_speed = 1;
  attr->phys_state = disabled ? 3 : 5;  // Disabled / LinkUp
  attr->link_layer = IBV_LINK_LAYER_ETHERNET;
  return 0;
}

MRC_EXPORT int ibv_query_gid(ibv_context* context, uint8_t port_num, int index, ibv_gid* gid) {
  SoftDevice* dev = device_of(context);
  // A port has one address; it answers at every index a RoCE NIC's GID table has for one
  // address (0-3: v1/v2 x link-local/global), as OCP's benchmark asks for index 3 (mlx5's
  // RoCEv2 entry).
  if (!dev || !gid || port_num < 1 || port_num > dev->config.ports.size() || index < 0 ||
      index >= kGidTableLength) {
    errno = EINVAL;
    return -1;
  }
  std::memcpy(gid->raw, dev->config.ports[port_num - 1].addr.s6_addr, 16);
  return 0;
}

MRC_EXPORT ibv_pd* ibv_alloc_pd(ibv_context* context) {
  SoftDevice* dev = device_of(context);
  if (!dev) {
    errno = EINVAL;
    return nullptr;
  }
  auto* pd = new ibv_pd{};
  pd->context = context;
  DeviceLock lk(*dev);
  pd->handle = static_cast<uint32_t>(++dev->pd_count);
  return pd;
}

MRC_EXPORT int ibv_dealloc_pd(ibv_pd* pd) {
  SoftDevice* dev = pd ? device_of(pd->context) : nullptr;
  if (!dev) return fail_errno(EINVAL);
  DeviceLock lk(*dev);
  if (dev->mr_count > 0) return fail_errno(EBUSY);
  --dev->pd_count;
  delete pd;
  return 0;
}

MRC_EXPORT ibv_mr* ibv_reg_mr_iova2(ibv_pd* pd, void* addr, size_t length, uint64_t iova,
                                    unsigned int access) {
  SoftDevice* dev = pd ? device_of(pd->context) : nullptr;
  if (!dev || !addr || length == 0) {
    errno = EINVAL;
    return nullptr;
  }
  // Remote write needs local write, as in libibverbs.
  if ((access & IBV_ACCESS_REMOTE_WRITE) && !(access & IBV_ACCESS_LOCAL_WRITE)) {
    errno = EINVAL;
    return nullptr;
  }
  uint32_t eng_access = 0;
  if (access & IBV_ACCESS_LOCAL_WRITE) eng_access |= kLocalWrite;
  if (access & IBV_ACCESS_REMOTE_WRITE) eng_access |= kRemoteWrite;
  DeviceLock lk(*dev);
  auto keys = dev->engine->register_memory(addr, length, iova, eng_access);
  if (!keys) {
    errno = keys.error() == Error::kNoResources ? ENOMEM : EINVAL;
    return nullptr;
  }
  auto* mr = new SoftMr{};
  mr->ibv.context = pd->context;
  mr->ibv.pd = pd;
  mr->ibv.addr = addr;
  mr->ibv.length = length;
  mr->ibv.handle = keys->lkey;
  mr->ibv.lkey = keys->lkey;
  mr->ibv.rkey = keys->rkey;
  ++dev->mr_count;
  return &mr->ibv;
}

MRC_EXPORT ibv_mr* ibv_reg_mr(ibv_pd* pd, void* addr, size_t length, int access) {
  return ibv_reg_mr_iova2(pd, addr, length, reinterpret_cast<uintptr_t>(addr),
                          static_cast<unsigned>(access));
}

MRC_EXPORT ibv_mr* ibv_reg_mr_iova(ibv_pd* pd, void* addr, size_t length, uint64_t iova,
                                   int access) {
  return ibv_reg_mr_iova2(pd, addr, length, iova, static_cast<unsigned>(access));
}

MRC_EXPORT int ibv_dereg_mr(ibv_mr* mr) {
  SoftDevice* dev = mr ? device_of(mr->context) : nullptr;
  if (!dev) return fail_errno(EINVAL);
  DeviceLock lk(*dev);
  if (!dev->engine->deregister_memory(mr->lkey)) return fail_errno(EINVAL);
  --dev->mr_count;
  delete reinterpret_cast<SoftMr*>(mr);
  return 0;
}

MRC_EXPORT const char* ibv_wc_status_str(ibv_wc_status status) {
  switch (status) {
    case IBV_WC_SUCCESS:
      return "success";
    case IBV_WC_LOC_LEN_ERR:
      return "local length error";
    case IBV_WC_LOC_QP_OP_ERR:
      return "local QP operation error";
    case IBV_WC_LOC_PROT_ERR:
      return "local protection error";
    case IBV_WC_WR_FLUSH_ERR:
      return "Work Request Flushed Error";
    case IBV_WC_REM_ACCESS_ERR:
      return "remote access error";
    case IBV_WC_RETRY_EXC_ERR:
      return "transport retry counter exceeded";
    case IBV_WC_FATAL_ERR:
      return "fatal error";
    default:
      return "unknown";
  }
}

MRC_EXPORT const char* ibv_port_state_str(ibv_port_state state) {
  switch (state) {
    case IBV_PORT_NOP:
      return "PORT_NOP";
    case IBV_PORT_DOWN:
      return "PORT_DOWN";
    case IBV_PORT_INIT:
      return "PORT_INIT";
    case IBV_PORT_ARMED:
      return "PORT_ARMED";
    case IBV_PORT_ACTIVE:
      return "PORT_ACTIVE";
    case IBV_PORT_ACTIVE_DEFER:
      return "PORT_ACTIVE_DEFER";
    default:
      return "invalid state";
  }
}
