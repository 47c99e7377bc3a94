// The MRC software device: the objects behind mrc.h / mrc_ctl.h and the libibverbs calls MRC
// applications make (ocp-mrc-api.md section 7.2), for the device "mrc_soft0" whose ports are
// host interfaces (docs/c-api.md, "Configuration").
//
// One SoftDevice per ibv_open_device(): an engine, its data path (the Linux UDP driver) and a
// progress thread that turns the engine's calling sequence (engine.h) under `mu`. API calls
// take `mu` too; the progress thread releases it between turns and lets waiting callers in.
#pragma once

#include <infiniband/verbs.h>
#include <mrc_ctl.h>

#include <atomic>
#include <condition_variable>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "api/data_path.h"
#include "api/node_state.h"
#include "transport/engine.h"
#include "transport/event_log.h"

namespace mrc::api {

inline constexpr const char* kDeviceName = "mrc_soft0";
inline constexpr uint16_t kDefaultUdpBasePort = 4791;
inline constexpr int kGidTableLength = 4;  // ibv_query_gid indices 0..3: the port's address

struct DeviceConfig {
  std::vector<SoftPortConfig> ports;  // index = 0-based port (plane)
  uint16_t udp_base_port = kDefaultUdpBasePort;
  ev::FormatMode ev_mode = ev::FormatMode::kUdp;
  // Strict (conformance testing): verbs attribute bits mrc.h lists as unsupported, missing
  // required attributes of 3.8 and implausible API versions are EINVAL. Otherwise (the
  // default) OCP's own programs run as shipped: those bits are ignored, missing profiles and
  // WIMM/MPR/timeout/retry take the device's defaults, an implausible version is "unspecified"
  // (reference section 8), and each is reported once per process on stderr.
  bool strict = false;
  uint32_t auto_evs_per_plane = 8;
  // The engine's event log (transport/event_log.h), JSON lines into `<qlog>.<pid>-<slot>.jsonl`
  // (one file per device opened); empty: off. `qlog` / MRC_SOFT_QLOG.
  std::string qlog;
};

// $MRC_SOFT_PORTS / $MRC_SOFT_CONFIG / /etc/mrc/mrc_soft.conf (docs/c-api.md). false with a
// message if none names a port or an entry is malformed.
bool load_device_config(DeviceConfig& out, std::string& error);

struct SoftDevice;

// struct ibv_context must be the first member: the ibv_context* handed out is this object.
struct SoftContext {
  ibv_context ibv;
  SoftDevice* dev;
};

struct SoftMr {
  ibv_mr ibv;
};

}  // namespace mrc::api

// The opaque types of mrc.h (section 3.3).
struct mrc_comp_channel {
  mrc_context* ctx = nullptr;
  int fd = -1;  // eventfd (semaphore): one count per pending CQ event
  std::mutex mu;
  std::deque<mrc_cq*> pending;
  int cq_refs = 0;
};

struct EvEventRecord {
  uint64_t profile_id;
  mrc_ctl_ev ev;
  uint32_t drop_count;
  mrc_ctl_ev_state state;
};

struct mrc_cq {
  mrc_context* ctx = nullptr;
  int capacity = 0;
  bool is_ev_cq = false;
  void* cq_context = nullptr;
  mrc_comp_channel* channel = nullptr;
  std::mutex mu;
  std::condition_variable acked_cv;
  std::deque<ibv_wc> wcs;
  std::deque<EvEventRecord> ev_events;
  uint64_t ev_next_seq = 0;  // next node event sequence number to read
  uint32_t ev_pending_drops = 0;
  bool armed = false;
  bool solicited_only = false;
  uint64_t events_delivered = 0, events_acked = 0;
  int qp_refs = 0;
  bool overrun = false;
  int async_unacked = 0;  // async events returned for this CQ, not yet acknowledged (ctx->mu)
};

struct mrc_qp_hint {
  mrc_context* ctx = nullptr;
  mrc_qp_hint_attr attr{};
  int qp_refs = 0;
};

struct mrc_qp {
  mrc_context* ctx = nullptr;
  uint32_t engine_qpn = 0;
  uint32_t qpn = 0;  // API QPN: slot << 16 | engine QPN (docs/c-api.md, "QP numbers")
  mrc_qp_init_attr init{};
  ibv_qp_state state = IBV_QPS_RESET;
  mrc::QpAttr engine_attr;
  mrc_qp_attr mrc_attr{};
  int mrc_attr_set = 0;  // mask bits ever supplied
  ibv_qp_attr vattr{};
  mrc_qp_hint* hint = nullptr;
  int ev_profile = -1;  // index into NodeStateLayout::ev, while past RESET
  int cc_profile = -1;
  uint32_t ev_generation = 0;  // of the EV profile, as last applied to the engine QP
  uint32_t cc_generation = 0;  // of the CC profile, as last applied
  bool auto_paths = false;
  int async_unacked = 0;  // async events returned for this QP, not yet acknowledged (ctx->mu)
};

struct AsyncEventRecord {
  mrc_async_event event;
};

struct mrc_context {
  mrc::api::SoftDevice* dev = nullptr;
  ibv_context* vctx = nullptr;
  uint32_t api_version = 0;          // as declared; 0 = latest
  std::mutex mu;                     // guards the lists, the async queue and the unacked counts
  std::condition_variable async_cv;  // an event was queued or acknowledged
  std::deque<mrc_async_event> async_events;
  int children = 0;  // CQs, channels, hints, QPs
  std::vector<mrc_cq*> ev_cqs;
  // mrc_ctl_query_cc_profile's CONFIG results: it returns a pointer the caller does not own,
  // valid while the context lives. One per profile id, freed with the context.
  std::mutex cc_query_mu;
  std::map<uint64_t, std::unique_ptr<mrc_ctl_cc_nscc_cfg>> cc_query_results;
};

namespace mrc::api {

struct SoftDevice {
  DeviceConfig config;
  std::unique_ptr<NodeState> node;
  int slot = -1;
  std::unique_ptr<EventLog> qlog;  // DeviceConfig::qlog; outlives the engine that logs into it
  std::unique_ptr<Engine> engine;
  std::unique_ptr<DataPath> path;
  std::mutex mu;  // engine, QP map, peers, contexts
  std::atomic<int> waiters{0};
  std::atomic<bool> stop{false};
  std::thread progress;
  std::unordered_map<uint32_t, mrc_qp*> qps;  // engine QPN -> QP
  std::vector<mrc_context*> contexts;
  std::unordered_map<std::string, uint32_t> peers;  // peer key -> data-path peer id
  uint32_t next_peer = 1;
  uint32_t port_generation = ~0u;
  std::vector<bool> port_up;  // as last told to the engine
  int pd_count = 0, mr_count = 0;
  // ibv_context::async_fd: an eventfd (semaphore) counting the async events queued in every
  // MRC context of this device; O_NONBLOCK on it makes mrc_get_async_event non-blocking.
  int async_fd = -1;
  std::string error;

  // Runs on the progress thread.
  void run();
  void turn();
  void sync_node_state();
  // A changed ONLINE EV profile into a live QP: entries whose EV changed are replaced
  // (Engine::replace_path), the others take their DENIED state (set_path_denied).
  void sync_qp_paths(uint32_t engine_qpn, mrc_qp* qp, const std::vector<PathDesc>* paths,
                     const ShmEvProfile& prof, Time now);
  void dispatch_completion(const Completion& c);
  void dispatch_event(const Event& e);
  void deliver_ev_events();
};

// Takes the device lock with priority over the progress thread.
class DeviceLock {
 public:
  explicit DeviceLock(SoftDevice& d) : d_(d) {
    d_.waiters.fetch_add(1);
    if (!d_.mu.try_lock()) {
      // The progress thread may be waiting in the data path's poll: end that wait.
      if (d_.path) d_.path->wake();
      d_.mu.lock();
    }
    d_.waiters.fetch_sub(1);
  }
  ~DeviceLock() { d_.mu.unlock(); }
  DeviceLock(const DeviceLock&) = delete;
  DeviceLock& operator=(const DeviceLock&) = delete;

 private:
  SoftDevice& d_;
};

SoftDevice* device_of(ibv_context* ctx);  // nullptr if not one of ours
// The paths of an ONLINE EV profile (index-aligned with its entries), or of the device's own
// AUTO list, into out.paths / out.ev_min_active. EINVAL if the profile cannot be expanded onto
// this device's wire format. The node lock must be held.
int build_paths(SoftDevice& dev, const ShmEvProfile& prof, NodeStateLayout& s, QpAttr& out,
                bool& auto_paths);
// A CC profile's configuration into out.cc (struct mrc_ctl_cc_nscc_cfg -> cc::NsccConfig) for a
// device of `ports` ports sending EVs of `mode` (STEV and UDP EVs are hashed by the switches).
void apply_cc(const ShmCcProfile& prof, size_t ports, ev::FormatMode mode, QpAttr& out);
void post_async_event(mrc_context* ctx, const mrc_async_event& e);
// Async events about a QP / a CQ (libibverbs: element.qp / element.cq is valid).
bool is_qp_event(ibv_event_type t);
bool is_cq_event(ibv_event_type t);
// Removes the queued (not yet returned) events about `object`, then waits until the returned
// ones are acknowledged (ocp-mrc-api.md 3.7 mrc_ack_async_event). No device lock held.
void retire_async_events(mrc_context* ctx, const void* object, int& unacked);
void notify_cq(mrc_cq* cq);  // CQ has a new entry: raise the channel event if armed
bool has_cap_net_admin();
// What the default (not strict) mode accepts from OCP's programs, each reported once per
// process on stderr ("mrc_soft0: ..."): DeviceConfig::strict.
enum class Leniency : uint8_t { kVerbsBits, kDefaults, kVersion, kDynamicMpr, kCount };
[[gnu::format(printf, 2, 3)]] void warn_once(Leniency what, const char* fmt, ...);
// Address of `gid`'s host on 0-based port p, by the prefix rule (docs/c-api.md).
in6_addr peer_address(const DeviceConfig& cfg, const in6_addr& gid, size_t p);

}  // namespace mrc::api
