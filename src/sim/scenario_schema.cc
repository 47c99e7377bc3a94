#include "sim/scenario_schema.h"

#include <array>
#include <initializer_list>
#include <sstream>

namespace mrc::sim {

namespace {

// get/set of a field of a record R, by its path from the record ("base.topo.hosts").
#define MRC_REC_UINT(R, path)                                      \
  .get = [](const R& s) -> KeyValue { return uint64_t{s.path}; },  \
  .set = [](R& s, const KeyValue& v) {                             \
    s.path = static_cast<decltype(s.path)>(std::get<uint64_t>(v)); \
  }
#define MRC_REC_REAL(R, path)                                   \
  .get = [](const R& s) -> KeyValue { return double{s.path}; }, \
  .set = [](R& s, const KeyValue& v) { s.path = std::get<double>(v); }
#define MRC_KEY_UINT(path) MRC_REC_UINT(Scenario, path)
#define MRC_KEY_BOOL(path)                                           \
  .get = [](const Scenario& s) -> KeyValue { return bool{s.path}; }, \
  .set = [](Scenario& s, const KeyValue& v) { s.path = std::get<bool>(v); }
#define MRC_KEY_REAL(path) MRC_REC_REAL(Scenario, path)
#define MRC_KEY_TEXT(path)                                                  \
  .get = [](const Scenario& s) -> KeyValue { return std::string{s.path}; }, \
  .set = [](Scenario& s, const KeyValue& v) { s.path = std::get<std::string>(v); }
// An integer field whose value `sentinel` means "auto".
#define MRC_KEY_UINT_AUTO(path, sentinel)                                \
  .get = [](const Scenario& s) -> KeyValue {                             \
    if (s.path == (sentinel)) return std::monostate{};                   \
    return uint64_t{s.path};                                             \
  },                                                                     \
  .set = [](Scenario& s, const KeyValue& v) {                            \
    s.path = std::holds_alternative<std::monostate>(v)                   \
                 ? (sentinel)                                            \
                 : static_cast<decltype(s.path)>(std::get<uint64_t>(v)); \
  }
// A field holding an index into `names` (an enum in the order of its kinds' names).
#define MRC_REC_ENUM(R, path, names)                                          \
  .get = [](const R& s) -> KeyValue { return std::string((names)[s.path]); }, \
  .set = [](R& s, const KeyValue& v) {                                        \
    const auto& n = (names);                                                  \
    const auto it = std::find(n.begin(), n.end(), std::get<std::string>(v));  \
    s.path = static_cast<decltype(s.path)>(it - n.begin());                   \
  }

bool is_fat_tree(const Scenario& s) {
  return s.base.topo.kind == TopologyKind::kFatTree;
}
bool is_clos2(const Scenario& s) {
  return s.base.topo.kind == TopologyKind::kClos2;
}
bool has_denylist(const Scenario& s) {
  return s.base.denylist.interval > 0;
}
// Whether some run of the scenario uses DCQCN: a RoCE kind, or cc = dcqcn.
bool uses_dcqcn(const Scenario& s) {
  if (s.cc == "dcqcn") return true;
  for (const std::string& k : s.kinds)
    if (k == "roce" || k == "roce_pfc") return true;
  return false;
}

// The kinds of [workload] and [[fault]], in the order of WorkloadConfig::Kind and
// FaultConfig::Kind (workload_kind_name and fault_kind_name read them here).
constexpr std::array<std::string_view, 9> kWorkloadKinds = {"permutation", "uniform",   "incast",
                                                            "all_to_all",  "allreduce", "training",
                                                            "htsim",       "steady",    "flows"};
constexpr std::array<std::string_view, 2> kAllreduceAlgorithms = {"ring", "ring2d"};
constexpr std::array<std::string_view, 10> kFaultKinds = {
    "link_down", "link_up", "switch_reboot", "blackhole", "blackhole_switch",
    "gray_loss", "degrade", "flap",          "path_loss", "blackhole_reboot"};

bool is_ring2d(const Scenario& s) {
  return s.workload.algorithm == WorkloadConfig::kRing2d;
}
std::vector<uint64_t> host_list(const std::vector<HostId>& v) {
  return {v.begin(), v.end()};
}

constexpr CcAlgorithm cc_of(std::string_view name) {
  return name == "dcqcn"          ? CcAlgorithm::kDcqcn
         : name == "fixed_window" ? CcAlgorithm::kFixedWindow
         : name == "none"         ? CcAlgorithm::kNone
                                  : CcAlgorithm::kNscc;  // "default", "nscc"
}

// Entries name only the fields they set (designated initializers); g++ 12 would warn about
// every other one.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmissing-field-initializers"
std::vector<SectionSpec> make_schema() {
  std::vector<SectionSpec> s;
  s.push_back({"",
               {
                   {.name = "name",
                    .type = KeyType::kText,
                    .default_doc = "file name without `.toml`",
                    .doc = "names the output directory; letters, digits, `-_.`",
                    MRC_KEY_TEXT(name)},
                   {.name = "description",
                    .type = KeyType::kText,
                    .doc = "one line, printed above the table and in summary.json",
                    MRC_KEY_TEXT(description)},
                   {.name = "seed",
                    .type = KeyType::kInt,
                    .max = UINT64_MAX,
                    .doc = "every random choice (permutation, spraying, ECMP hashing)",
                    MRC_KEY_UINT(seed)},
               }});

  s.push_back(
      {"topo",
       {
           {.name = "kind",
            .type = KeyType::kChoice,
            .choices = {"clos2", "fat_tree"},
            .doc = "the fabric: a multi-plane two-tier Clos, or the single-plane fat tree "
                   "(below)",
            .get = [](const Scenario& s) -> KeyValue {
              return std::string(is_fat_tree(s) ? "fat_tree" : "clos2");
            },
            .set =
                [](Scenario& s, const KeyValue& v) {
                  s.base.topo.kind = std::get<std::string>(v) == "fat_tree" ? TopologyKind::kFatTree
                                                                            : TopologyKind::kClos2;
                }},
           {.name = "hosts",
            .type = KeyType::kInt,
            .min = 2,
            .doc = "GPUs, one NIC each; a fat tree holds at most k^3/4 (four tiers: k^4/8)",
            MRC_KEY_UINT(base.topo.hosts)},
           {.name = "planes",
            .type = KeyType::kInt,
            .min = 1,
            .max = 32,
            .doc = "NIC ports = independent planes; a fat tree is single-plane (any other "
                   "value than 1 is an error)",
            MRC_KEY_UINT(base.topo.planes)},
           {.name = "radix",
            .type = KeyType::kInt,
            .min = 2,
            .doc = "switch ports, every switch; a fat tree: k, even, at least 4",
            MRC_KEY_UINT(base.topo.radix)},
           {.name = "hosts_per_leaf",
            .type = KeyType::kInt,
            .default_doc = "= radix/2",
            .doc = "`clos2`: host ports per leaf (fewer uplinks = oversubscription)",
            MRC_KEY_UINT(base.topo.hosts_per_leaf),
            .applies = is_clos2},
           {.name = "spines",
            .type = KeyType::kInt,
            .default_doc = "= uplinks per leaf",
            .doc = "`clos2`: spines per plane; must divide the uplinks per leaf",
            MRC_KEY_UINT(base.topo.spines),
            .applies = is_clos2},
           {.name = "link_rate",
            .type = KeyType::kRate,
            .doc = "every link (one plane port = one link)",
            MRC_KEY_UINT(base.topo.link_bps)},
           {.name = "link_delay",
            .type = KeyType::kDuration,
            .doc = "propagation per link",
            MRC_KEY_UINT(base.topo.link_delay)},
           {.name = "switch_latency",
            .type = KeyType::kDuration,
            .doc = "per switch traversal",
            MRC_KEY_UINT(base.topo.switch_latency)},
           {.name = "tiers",
            .type = KeyType::kInt,
            .min = 3,
            .max = 4,
            .doc = "`fat_tree`: switch tiers; four tiers add superpods of k/2 pods and (k/2)^2 "
                   "spines under (k/2)^3 cores (below)",
            MRC_KEY_UINT(base.topo.tiers),
            .applies = is_fat_tree},
       }});

  s.push_back(
      {"switch",
       {
           {.name = "queue",
            .type = KeyType::kSize,
            .default_doc = "= 1 BDP",
            .doc = "egress queue limit per port",
            MRC_KEY_UINT(base.sw.queue_bytes)},
           {.name = "ecn_kmin",
            .type = KeyType::kSize,
            .default_doc = "= queue/5",
            .doc = "RED-style ECN marking: no marks below this queue",
            MRC_KEY_UINT(base.sw.ecn_kmin_bytes)},
           {.name = "ecn_kmax",
            .type = KeyType::kSize,
            .default_doc = "= 4*queue/5",
            .doc = "RED-style ECN marking: marks with `ecn_pmax` at this queue",
            MRC_KEY_UINT(base.sw.ecn_kmax_bytes)},
           {.name = "ecn_pmax",
            .type = KeyType::kReal,
            .rmin = 0,
            .rmax = 1,
            .doc = "marking probability at kmax",
            MRC_KEY_REAL(base.sw.ecn_pmax)},
           {.name = "trimming",
            .type = KeyType::kBool,
            .doc = "trim payload above `trim_threshold` instead of dropping (MRC runs only)",
            MRC_KEY_BOOL(base.sw.trimming)},
           {.name = "trim_threshold",
            .type = KeyType::kSize,
            .default_doc = "= queue",
            .doc = "queue above which packets are trimmed",
            MRC_KEY_UINT(base.sw.trim_threshold_bytes)},
           {.name = "pfc",
            .type = KeyType::kBool,
            .doc = "lossless: pause upstream above `pfc_xoff` (also set by `roce_pfc`)",
            MRC_KEY_BOOL(base.sw.pfc)},
           {.name = "pfc_xoff",
            .type = KeyType::kSize,
            .default_doc = "= queue",
            .doc = "bytes from one ingress port queued in the switch above which it pauses",
            MRC_KEY_UINT(base.sw.pfc_xoff_bytes)},
           {.name = "pfc_xon",
            .type = KeyType::kSize,
            .default_doc = "= xoff/2",
            .doc = "and below which it resumes",
            MRC_KEY_UINT(base.sw.pfc_xon_bytes)},
           {.name = "ecn_last_hop",
            .type = KeyType::kBool,
            .auto_ok = true,
            .doc =
                R"(ECN marking on the last hop (the leaf's port to the receiving host); `"auto"`: off for `mrc` and `mrc_oblivious`, on for `roce` and `roce_pfc`)",
            .get = [](const Scenario& s) -> KeyValue {
              using Lh = SwitchConfig::EcnLastHop;
              if (s.base.sw.ecn_last_hop == Lh::kAuto) return std::monostate{};
              return s.base.sw.ecn_last_hop == Lh::kOn;
            },
            .set =
                [](Scenario& s, const KeyValue& v) {
                  using Lh = SwitchConfig::EcnLastHop;
                  s.base.sw.ecn_last_hop = std::holds_alternative<std::monostate>(v) ? Lh::kAuto
                                           : std::get<bool>(v)                       ? Lh::kOn
                                                                                     : Lh::kOff;
                }},
       }});

  s.push_back(
      {"transport",
       {
           {.name = "kinds",
            .type = KeyType::kChoices,
            .choices = {"mrc", "mrc_oblivious", "roce", "roce_pfc"},
            .type_doc = "array of transport kinds",
            .doc = "one run each, in this order, same seed and workload (kinds below)",
            .get = [](const Scenario& s) -> KeyValue { return s.kinds; },
            .set = [](Scenario& s,
                      const KeyValue& v) { s.kinds = std::get<std::vector<std::string>>(v); }},
           {.name = "path_mode",
            .type = KeyType::kChoice,
            .choices = {"srv6", "ecmp"},
            .doc = "MRC paths: SRv6 uSID source routes, or ECMP entropy (RoCE is always ECMP)",
            .get = [](const Scenario& s) -> KeyValue {
              return std::string(s.base.transport.path_mode == PathMode::kSrv6 ? "srv6" : "ecmp");
            },
            .set =
                [](Scenario& s, const KeyValue& v) {
                  s.base.transport.path_mode =
                      std::get<std::string>(v) == "srv6" ? PathMode::kSrv6 : PathMode::kEcmp;
                }},
           {.name = "mtu",
            .type = KeyType::kInt,
            .min = 256,
            .max = 9000,
            .unit = "bytes",
            .doc = "payload bytes per packet",
            MRC_KEY_UINT(base.transport.mtu)},
           {.name = "evs_per_plane",
            .type = KeyType::kInt,
            .default_doc = "= min(spines, 256 / planes)",
            .doc =
                R"(active entropy values per plane of an MRC QP (paper 2.1: 128-256 per QP, equal per plane; never two on one spine). With `path_mode = "ecmp"` an EV is a hash input, not a spine: 0 = 256 / planes, and a given count is not capped by the spines)",
            MRC_KEY_UINT(base.transport.evs_per_plane)},
           {.name = "backup_evs_per_plane",
            .type = KeyType::kInt,
            .auto_ok = true,
            .default_doc = "= ceil(active / 4), with srv6 at most the spines left",
            .doc = "backup EVs per plane (paper 2.4): srv6, spines outside the active set, "
                   "evenly spaced; ecmp, further random entropies. A mapped-out active EV, or "
                   "one congested per `ecn_swap_marks`, is swapped for one of its plane's "
                   "backups (`ev_swaps`, `ev_ecn_swaps`, `ev_events.jsonl`); 0 = none",
            MRC_KEY_UINT_AUTO(base.transport.backup_evs_per_plane, TransportConfig::kAutoBackup)},
           {.name = "ev_choice",
            .type = KeyType::kChoice,
            .choices = {"spread", "random"},
            .doc = "which spines an SRv6 QP's EVs name: `spread`, evenly spaced over the plane "
                   "(rotated per pair; backups between them), so the QPs of a fabric load "
                   "every spine alike; `random`, each QP's active and backup spines drawn at "
                   "random per plane, as the paper's QPs choose (2.1: the aggregate may be "
                   "uneven and ECN steering smooths it)",
            .get = [](const Scenario& s) -> KeyValue {
              return std::string(s.base.transport.ev_choice == TransportConfig::EvChoice::kRandom
                                     ? "random"
                                     : "spread");
            },
            .set =
                [](Scenario& s, const KeyValue& v) {
                  s.base.transport.ev_choice = std::get<std::string>(v) == "random"
                                                   ? TransportConfig::EvChoice::kRandom
                                                   : TransportConfig::EvChoice::kSpread;
                }},
           {.name = "ecn_swap_marks",
            .type = KeyType::kInt,
            .max = 255,
            .doc = "ECN-driven EV replacement (paper 2.1, 5.2.5): an active EV whose ACKs echo "
                   "ECN this many times in a row is swapped for a backup of its plane, taken in "
                   "rotation (`ev_ecn_swaps`; in `ev_events.jsonl` a swap whose "
                   "`swap_out_state` is `good`); 0 = off. Needs a backup set, so SRv6 QPs with "
                   "one EV per spine never swap",
            MRC_KEY_UINT(base.transport.ecn_swap_marks)},
           {.name = "cc",
            .type = KeyType::kChoice,
            .choices = {"default", "nscc", "dcqcn", "fixed_window", "none"},
            .doc = "congestion control; default: NSCC for MRC, DCQCN for RoCE",
            .get = [](const Scenario& s) -> KeyValue { return s.cc; },
            .set =
                [](Scenario& s, const KeyValue& v) {
                  s.cc = std::get<std::string>(v);
                  s.base.transport.cc = cc_of(s.cc);
                }},
           {.name = "mpr",
            .type = KeyType::kInt,
            .max = 255,
            .default_doc = "= from the BDP",
            .doc = "max PSN range in units of 128",
            MRC_KEY_UINT(base.transport.mpr)},
           {.name = "timeout",
            .type = KeyType::kInt,
            .max = 24,
            .auto_ok = true,
            .default_doc = "= 8 for MRC, 12 for RoCE",
            .doc =
                R"(ACK timeout exponent: 1.024 us * 2^timeout (8 = 262 us, as OCP's examples; 12 = 4.2 ms; docs/engine.md, "Decisions"))",
            MRC_KEY_UINT_AUTO(base.transport.timeout, TransportConfig::kTimeoutAuto)},
           {.name = "ack_every",
            .type = KeyType::kInt,
            .min = 1,
            .max = 8,
            .unit = "packets",
            .doc = "responder ACK coalescing",
            MRC_KEY_UINT(base.transport.ack_every)},
           {.name = "probe_interval",
            .type = KeyType::kDuration,
            .doc = "probes of ASSUMED_BAD paths",
            MRC_KEY_UINT(base.transport.probe_interval)},
           {.name = "port_remap_delay",
            .type = KeyType::kDuration,
            .doc =
                R"(how long a NIC takes to move a dead port's EVs to its other ports (paper 3: "not instantaneous"); its packets on the port until then are lost. Peers learn of the dead port from the port-state bitmap of its ACKs (`peer_port_changes`))",
            MRC_KEY_UINT(base.transport.port_remap_delay)},
           {.name = "probe_backoff_limit",
            .type = KeyType::kInt,
            .max = 20,
            .doc = "an unanswered probe doubles the interval, up to `probe_interval` x 2^limit",
            MRC_KEY_UINT(base.transport.probe_backoff_limit)},
           {.name = "resurrect_probes",
            .type = KeyType::kInt,
            .min = 1,
            .max = 1u << 16,
            .doc = "an ASSUMED_BAD path is GOOD again after this many answered probes in a row "
                   "spanning at least `resurrect_window`",
            MRC_KEY_UINT(base.transport.resurrect_probes)},
           {.name = "resurrect_window",
            .type = KeyType::kDuration,
            .doc = "the shortest span of those `resurrect_probes` answered probes",
            MRC_KEY_UINT(base.transport.resurrect_window)},
           {.name = "port_return_probes",
            .type = KeyType::kInt,
            .max = 1u << 16,
            .doc =
                R"(paths mapped out by a NIC port that went down (here or at the peer) are probed as soon as the port is back and are GOOD again after this many answered probes, without the window (docs/engine.md, "decisions"); 0 = they wait for `resurrect_probes` over `resurrect_window` like any path)",
            MRC_KEY_UINT(base.transport.port_return_probes)},
           {.name = "trim_hold",
            .type = KeyType::kDuration,
            .doc = "a loss on a path that delivered a trimmed header this recently does not "
                   "mark it (congestion, not a failure)",
            MRC_KEY_UINT(base.transport.trim_hold)},
           {.name = "probe_budget_interval",
            .type = KeyType::kDuration,
            .doc = "per host: at most one probe per interval on average (bursts of 256); 0 = "
                   "unlimited",
            MRC_KEY_UINT(base.transport.probe_budget_interval)},
           {.name = "reverse_evs_per_plane",
            .type = KeyType::kInt,
            .max = 8,
            .doc =
                R"(ACKs and trim NACKs travel on a reverse EV set of this many EVs per plane, kept fresh by probes (paper 2.4, which asks for at least 1; the engine's default; docs/engine.md, "Reverse path"); 0 = on the reverse of their data packet's path)",
            MRC_KEY_UINT(base.transport.reverse_evs_per_plane)},
           {.name = "borrow_rtt",
            .type = KeyType::kBool,
            .doc = "a QP without an RTT sample of its own takes its tail-loss probe time from "
                   "the fabric's base RTT and its engine's other QPs (`false`: the ACK timeout)",
            MRC_KEY_BOOL(base.transport.borrow_rtt)},
           {.name = "ack_waits_for_port",
            .type = KeyType::kBool,
            .doc =
                R"(without a live reverse EV set (`reverse_evs_per_plane = 0`, or all its slots mapped out), an ACK or trim NACK goes back on the reverse of a path its data came by, waiting for that port when it is busy; `false`: at once on any free port's next data path, as before (docs/engine.md, "Decisions"))",
            MRC_KEY_BOOL(base.transport.ack_waits_for_port)},
           {.name = "packet_auth",
            .type = KeyType::kBool,
            .doc =
                R"(every packet carries the 24-byte authentication trailer (docs/wire-format.md, "Authentication trailer") on the wire: its serialization time and buffer space are charged, its cryptography is not modelled (docs/linux-driver.md, "Authenticated packets"))",
            MRC_KEY_BOOL(base.transport.packet_auth)},
           {.name = "loss_keep",
            .type = KeyType::kReal,
            .rmin = 0,
            .rmax = 1,
            .default_doc = "= auto",
            .doc = "fraction of the NSCC window a non-trim loss keeps; auto: 1 (no cut) with "
                   "`switch.trimming`, 0.5 (`max_md_jump`) without",
            MRC_KEY_REAL(base.transport.loss_keep)},
           {.name = "trim_keep",
            .type = KeyType::kReal,
            .rmin = 0,
            .rmax = 1,
            .default_doc = "= auto",
            .doc =
                R"(fraction of the NSCC window a trimmed packet's resend keeps; auto: 0.8 where the switches hash MRC's EVs (`path_mode = "ecmp"`, two tiers), 0.5 (`max_md_jump`) otherwise (docs/engine.md, "decisions"))",
            MRC_KEY_REAL(base.transport.trim_keep)},
           {.name = "nscc_min_cwnd",
            .type = KeyType::kSize,
            .type_doc = "size, at most `mtu`",
            .default_doc = "= `mtu / 4`",
            .doc =
                R"(smallest NSCC window; below one MTU the window is paced, one packet every `bytes * base_rtt / cwnd` (docs/congestion-control.md, "Windows below one MTU"); `mtu` turns it off)",
            MRC_KEY_UINT(base.transport.nscc_min_cwnd)},
           {.name = "nscc_quick_adapt",
            .type = KeyType::kBool,
            .doc =
                R"(NSCC's quick adapt: after a period with a trim, a loss or a delay above its threshold, the window drops to what the period delivered (docs/congestion-control.md); `false` turns it off)",
            MRC_KEY_BOOL(base.transport.nscc_quick_adapt)},
           {.name = "ecn_cooldown",
            .type = KeyType::kDuration,
            .default_doc = "= the engine's rule: base RTT / 16; ecmp: at least one round-robin "
                           "cycle of a port's active EVs at line rate (`evs_per_plane` x MTU / "
                           "link rate)",
            .doc =
                R"(how long an EV whose ACK echoed ECN is skipped (docs/engine.md, "decisions"))",
            MRC_KEY_UINT(base.transport.ecn_cooldown)},
           {.name = "routing_convergence",
            .type = KeyType::kDuration,
            .never = true,
            .doc = "ECMP only: dead next hops leave the ECMP groups after this delay (models "
                   "BGP; real fabrics take 100 ms to seconds)",
            MRC_KEY_UINT(base.transport.routing_convergence)},
           {.name = "qps_per_flow",
            .type = KeyType::kCustom,
            .type_doc = "1..256, or a table per kind",
            .doc = "QPs per flow: the flow's bytes split evenly over this many QPs (RoCE: per "
                   "plane), each with its own EVs or ECMP hash. `{roce = 8, roce_pfc = 8}` sets "
                   "those kinds only (the others keep 1)",
            .get = [](const Scenario& s) -> KeyValue {
              if (s.qps_per_kind.empty()) return uint64_t{s.base.transport.qps_per_flow};
              std::map<std::string, uint64_t> m;
              for (const auto& [kind, n] : s.qps_per_kind)
                m[kind] = n;
              return m;
            },
            .set =
                [](Scenario& s, const KeyValue& v) {
                  if (const auto* n = std::get_if<uint64_t>(&v)) {
                    s.base.transport.qps_per_flow = static_cast<uint32_t>(*n);
                    return;
                  }
                  s.qps_per_kind.clear();
                  for (const auto& [kind, n] : std::get<std::map<std::string, uint64_t>>(v))
                    s.qps_per_kind[kind] = static_cast<uint32_t>(n);
                }},
       }});

  // DcqcnConfig (transport/cc/cc.h); the names are Zhu et al.'s (SIGCOMM 2015, section 3).
  s.push_back(
      {"dcqcn",
       {
           {.name = "g",
            .type = KeyType::kReal,
            .rmin = 0.0001,
            .rmax = 1,
            .doc = "alpha's gain: alpha = (1 - g) alpha + g on a CNP, (1 - g) alpha per "
                   "`alpha_period` without one; a larger g cuts harder after congestion",
            MRC_KEY_REAL(base.transport.dcqcn.g),
            .applies = uses_dcqcn},
           {.name = "alpha_period",
            .type = KeyType::kDuration,
            .doc = "alpha's update timer (K); 0 = 55 us",
            MRC_KEY_UINT(base.transport.dcqcn.alpha_update_period),
            .applies = uses_dcqcn},
           {.name = "timer",
            .type = KeyType::kDuration,
            .doc = "rate-increase timer (T): one increase event per period while limited; 0 = "
                   "the NICs' default, 300 us",
            MRC_KEY_UINT(base.transport.dcqcn.rate_increase_period),
            .applies = uses_dcqcn},
           {.name = "byte_counter",
            .type = KeyType::kSize,
            .doc = "bytes sent between byte-counter increase events (B); 0 = 10 MB",
            MRC_KEY_UINT(base.transport.dcqcn.byte_counter),
            .applies = uses_dcqcn},
           {.name = "fast_recovery",
            .type = KeyType::kInt,
            .max = 1000,
            .doc = "increase events of fast recovery before additive increase (F)",
            MRC_KEY_UINT(base.transport.dcqcn.fast_recovery_steps),
            .applies = uses_dcqcn},
           {.name = "ai",
            .type = KeyType::kRate,
            .doc = "additive increase of the target rate per event (R_AI)",
            MRC_KEY_UINT(base.transport.dcqcn.additive_increase_bps),
            .applies = uses_dcqcn},
           {.name = "hai",
            .type = KeyType::kRate,
            .doc = "hyper increase of the target rate per event (R_HAI)",
            MRC_KEY_UINT(base.transport.dcqcn.hyper_increase_bps),
            .applies = uses_dcqcn},
           {.name = "min_rate",
            .type = KeyType::kRate,
            .doc = "the lowest rate a QP is cut to",
            MRC_KEY_UINT(base.transport.dcqcn.min_rate_bps),
            .applies = uses_dcqcn},
           {.name = "cnp_interval",
            .type = KeyType::kDuration,
            .doc = "a receiver sends a QP at most one CNP per interval (the notification "
                   "point's N); 0 = 50 us",
            MRC_KEY_UINT(base.transport.dcqcn.cnp_interval),
            .applies = uses_dcqcn},
       }});

  s.push_back(
      {"denylist",
       {
           {.name = "interval",
            .type = KeyType::kDuration,
            .default_doc = "= no denylist",
            .doc = "Clustermapper probes every NIC-T0 link once per interval and denies the "
                   "plane of a lossy one to its NIC's QPs and to every QP sending to it "
                   "(paper 4)",
            MRC_KEY_UINT(base.denylist.interval)},
           {.name = "probes",
            .type = KeyType::kInt,
            .min = 1,
            .max = 1'000'000,
            .doc = "probes per link and round, each up to the T0 and back",
            MRC_KEY_UINT(base.denylist.probes),
            .applies = has_denylist},
           {.name = "loss",
            .type = KeyType::kReal,
            .rmin = 0,
            .rmax = 1,
            .doc = "a round losing at least this fraction of its probes denies the link",
            MRC_KEY_REAL(base.denylist.deny_loss),
            .applies = has_denylist},
           {.name = "clear_rounds",
            .type = KeyType::kInt,
            .min = 1,
            .max = 1'000'000,
            .doc = "rounds in a row below `loss` that lift the entry",
            MRC_KEY_UINT(base.denylist.clear_rounds),
            .applies = has_denylist},
       }});

  s.push_back(
      {"workload",
       {
           {.name = "kind",
            .type = KeyType::kChoice,
            .choices = {kWorkloadKinds.begin(), kWorkloadKinds.end()},
            .choice_docs =
                {"every host sends `size` to a uniformly random derangement partner (no host "
                 "sends to itself), all at `start`",
                 "`flows` flows between uniformly random distinct hosts, starting uniformly in "
                 "[start, start + spread)",
                 "the `senders` hosts after `dst` (wrapping) each send `size` to `dst`",
                 "every rank sends size/n to every other (nccl-tests AlltoAll: `size` is bytes "
                 "per rank); a collective",
                 "one ring AllReduce of `size` bytes per rank; a collective",
                 "`iterations` x (compute for `compute`, then a ring AllReduce of `size`)",
                 "an htsim connection matrix (relative paths are relative to the scenario file)",
                 "every host of the group streams messages of `size` to a random derangement "
                 "partner from `start` until `until`",
                 "the listed flows; a flow with `until` is a stream; a flow may pin its EVs "
                 "(`paths`)"},
            .default_doc = "none",
            .doc = "what the workload runs",
            .required = true,
            MRC_REC_ENUM(Scenario, workload.kind, kWorkloadKinds)},
           {.name = "size",
            .type = KeyType::kSize,
            .doc = "bytes of each flow (`permutation`, `uniform`, `incast`) or message "
                   "(`steady`); of each rank's buffer in a collective",
            .kinds = {"permutation", "uniform", "incast", "all_to_all", "allreduce", "training",
                      "steady"},
            MRC_KEY_UINT(workload.size)},
           {.name = "start",
            .type = KeyType::kDuration,
            .doc = "when the first flows start",
            .kinds = {"permutation", "uniform", "incast", "all_to_all", "allreduce", "training",
                      "steady"},
            MRC_KEY_UINT(workload.start)},
           {.name = "flows",
            .type = KeyType::kInt,
            .default_doc = "= one per host",
            .doc = "how many flows",
            .kinds = {"uniform"},
            MRC_KEY_UINT(workload.flows)},
           {.name = "spread",
            .type = KeyType::kDuration,
            .doc = "the flows start uniformly in [start, start + spread)",
            .kinds = {"uniform"},
            MRC_KEY_UINT(workload.spread)},
           {.name = "senders",
            .type = KeyType::kInt,
            .default_doc = "= every other host",
            .doc = "how many hosts send to `dst`",
            .kinds = {"incast"},
            MRC_KEY_UINT(workload.senders)},
           {.name = "dst",
            .type = KeyType::kInt,
            .doc = "the host every sender sends to",
            .kinds = {"incast"},
            MRC_KEY_UINT(workload.dst)},
           {.name = "ranks",
            .type = KeyType::kInt,
            .default_doc = "= every host",
            .doc = "the ranks are hosts 0..ranks-1",
            .kinds = {"all_to_all", "allreduce", "training", "steady"},
            MRC_KEY_UINT(workload.ranks)},
           {.name = "group",
            .type = KeyType::kCustom,
            .type_doc = "array of host numbers",
            .default_doc = "none",
            .doc = "the ranks listed, in ring order (instead of `ranks`), like `[0, 8, 16, 24]`",
            .kinds = {"all_to_all", "allreduce", "training", "steady"},
            .get = [](const Scenario& s) -> KeyValue { return host_list(s.workload.group); },
            .set =
                [](Scenario& s, const KeyValue& v) {
                  const auto& hosts = std::get<std::vector<uint64_t>>(v);
                  s.workload.group.assign(hosts.begin(), hosts.end());
                },
            .applies = [](const Scenario& s) { return !s.workload.group.empty(); }},
           {.name = "iterations",
            .type = KeyType::kInt,
            .min = 1,
            .doc = "training iterations, each its compute then its AllReduce",
            .kinds = {"training"},
            MRC_KEY_UINT(workload.iterations)},
           {.name = "compute",
            .type = KeyType::kDuration,
            .doc = "each iteration's compute time, with no traffic, before its AllReduce",
            .kinds = {"training"},
            MRC_KEY_UINT(workload.compute)},
           {.name = "algorithm",
            .type = KeyType::kChoice,
            .choices = {kAllreduceAlgorithms.begin(), kAllreduceAlgorithms.end()},
            .doc = "the flat ring, or the two-level ring of `row` ranks per row (below)",
            .kinds = {"allreduce", "training"},
            MRC_REC_ENUM(Scenario, workload.algorithm, kAllreduceAlgorithms)},
           {.name = "row",
            .type = KeyType::kInt,
            .min = 2,
            .default_doc = "none",
            .doc = "`ring2d` (required there): ranks per row, consecutive ranks of the group, "
                   "dividing the number of ranks",
            .kinds = {"allreduce", "training"},
            MRC_KEY_UINT(workload.row),
            .applies = is_ring2d},
           {.name = "file",
            .type = KeyType::kText,
            .default_doc = "none",
            .doc = "the htsim connection matrix (.cm) to run, relative to the scenario file",
            .kinds = {"htsim"},
            .required_for = {"htsim"},
            MRC_KEY_TEXT(workload.file)},
           {.name = "until",
            .type = KeyType::kDuration,
            .default_doc = "none",
            .doc = "when the streams stop starting messages, like `\"100ms\"`; later than "
                   "`start`",
            .kinds = {"steady"},
            .required_for = {"steady"},
            MRC_KEY_UINT(workload.until)},
           {.name = "depth",
            .type = KeyType::kInt,
            .min = 1,
            .max = 64,
            .doc = "messages in flight per stream",
            .kinds = {"steady", "flows"},
            MRC_KEY_UINT(workload.depth)},
           {.name = "flow",
            .type = KeyType::kTables,
            .type_doc = "array of tables",
            .default_doc = "none",
            .doc = "`[[workload.flow]]` tables, each a flow or a stream (`[[workload.flow]]` "
                   "below)",
            .kinds = {"flows"},
            .required_for = {"flows"},
            .get = [](const Scenario& s) -> KeyValue {
              return uint64_t{s.workload.flow_list.size()};
            },
            .set = [](Scenario&, const KeyValue&) {}},
       }});

  s.push_back(
      {"run",
       {
           {.name = "until",
            .type = KeyType::kDuration,
            .never = true,
            .doc = "simulated-time limit per transport; flows still running are reported as "
                   "unfinished",
            MRC_KEY_UINT(until)},
           {.name = "sample_interval",
            .type = KeyType::kDuration,
            .doc = "link utilisation/queue sampling (0 = off)",
            MRC_KEY_UINT(base.sample_interval)},
           {.name = "sample_host_links",
            .type = KeyType::kBool,
            .doc = "also sample the last hop's queues (leaf -> host ports) into `links.csv`, "
                   "when the fabric has at most 65,536 of them",
            MRC_KEY_BOOL(base.sample_host_links)},
           {.name = "throughput_interval",
            .type = KeyType::kDuration,
            .default_doc = "= off",
            .doc = "per-flow and per-host throughput time series (`flows_ts.csv`) at this "
                   "interval",
            MRC_KEY_UINT(base.throughput_interval)},
           {.name = "scheduled_departures",
            .type = KeyType::kBool,
            .doc = "switch ports schedule each packet's departure when it is enqueued (one "
                   "event per packet and hop); `false` runs them event by event (a port-free "
                   "event per packet), for validation: same model, results differ only in the "
                   "order of simultaneous events",
            MRC_KEY_BOOL(base.scheduled_departures)},
       }});
  return s;
}

#define MRC_FLOW_UINT(path) MRC_REC_UINT(WorkloadConfig::Flow, path)
FlowSectionSpec make_flow_schema() {
  using Flow = WorkloadConfig::Flow;
  return {
      "workload.flow",
      {
          {.name = "src",
           .type = KeyType::kInt,
           .default_doc = "none",
           .doc = "the sending host",
           .required = true,
           MRC_FLOW_UINT(src)},
          {.name = "dst",
           .type = KeyType::kInt,
           .default_doc = "none",
           .doc = "the receiving host (not `src`)",
           .required = true,
           MRC_FLOW_UINT(dst)},
          {.name = "size",
           .type = KeyType::kSize,
           .doc = "bytes of the flow, or of each message of a stream",
           MRC_FLOW_UINT(size)},
          {.name = "start",
           .type = KeyType::kDuration,
           .doc = "when it starts",
           MRC_FLOW_UINT(start)},
          {.name = "until",
           .type = KeyType::kDuration,
           .default_doc = "= one message",
           .doc = "later than `start`: a stream of messages until then",
           MRC_FLOW_UINT(until)},
          {.name = "paths",
           .type = KeyType::kCustom,
           .type_doc = "array of paths",
           .default_doc = "= the transport's own",
           .doc = "the EVs the flow may use, each named by the spine it crosses "
                  "(`\"p0/spine3\"`): the flow gets QPs of its own whose EV set is this "
                  "list, in this order",
           .get = [](const Flow& f) -> KeyValue { return f.path_names; },
           .set = [](Flow& f,
                     const KeyValue& v) { f.path_names = std::get<std::vector<std::string>>(v); },
           .applies = [](const Flow& f) { return !f.path_names.empty(); }},
          {.name = "backup_paths",
           .type = KeyType::kCustom,
           .type_doc = "array of paths",
           .default_doc = "= none",
           .doc = "backup EVs for the pinned `paths`, named the same way: they carry nothing "
                  "until an active EV of their plane is mapped out or, after a run of ECN marks "
                  "(`transport.ecn_swap_marks`), swapped out (paper 2.4, 5.2.5); with them, "
                  "every plane in `paths` needs the same number of active paths",
           .get = [](const Flow& f) -> KeyValue { return f.backup_path_names; },
           .set =
               [](Flow& f, const KeyValue& v) {
                 f.backup_path_names = std::get<std::vector<std::string>>(v);
               },
           .applies = [](const Flow& f) { return !f.backup_path_names.empty(); }},
      }};
}
#undef MRC_FLOW_UINT

#define MRC_FAULT_UINT(path) MRC_REC_UINT(FaultConfig, path)
const std::vector<std::string_view> kLinkFaults = {"link_down", "link_up", "blackhole",
                                                   "gray_loss", "degrade", "flap"};
const std::vector<std::string_view> kSwitchFaults = {"switch_reboot", "blackhole_switch",
                                                     "blackhole_reboot"};
const std::vector<std::string_view> kWindowedFaults = {"blackhole", "blackhole_switch", "gray_loss",
                                                       "degrade", "path_loss"};

FaultSectionSpec make_fault_schema() {
  return {
      "fault",
      {
          {.name = "kind",
           .type = KeyType::kChoice,
           .choices = {kFaultKinds.begin(), kFaultKinds.end()},
           .choice_docs =
               {"the link goes down at `at`", "the link comes back at `at`",
                "all the switch's links go down for `duration`", "silent drops: the link stays up",
                "every packet through the switch is "
                "dropped silently",
                "random loss", "the link runs at `rate`", "down/up every `period`, `count` times",
                "random loss on one path of one pair only: the packets from `src` to `dst` "
                "that cross `path`",
                "the switch stops forwarding at `at` (silent drops, links up), is rebooted "
                "at `reboot_at` (its links go down) and is back at `reboot_at + duration` "
                "(paper Fig 8)"},
           .default_doc = "none",
           .doc = "what fails",
           .required = true,
           MRC_REC_ENUM(FaultConfig, kind, kFaultKinds)},
          {.name = "link",
           .type = KeyType::kCustom,
           .type_doc = "link name",
           .default_doc = "none",
           .doc = "the link (names above); `link` or `links` is required",
           .kinds = kLinkFaults,
           .get = [](const FaultConfig& f) -> KeyValue { return f.target; },
           .set = [](FaultConfig& f, const KeyValue& v) { f.target = std::get<std::string>(v); },
           .applies = [](const FaultConfig& f) { return !f.listed; }},
          {.name = "links",
           .type = KeyType::kCustom,
           .type_doc = "array of link names",
           .default_doc = "none",
           .doc = "several links that fail together, instead of `link`",
           .kinds = kLinkFaults,
           .get = [](const FaultConfig& f) -> KeyValue {
             std::vector<std::string> names;
             for (const LinkRef& l : f.links)
               names.push_back(link_name(l));
             return names;
           },
           .set = [](FaultConfig&, const KeyValue&) {},
           .applies = [](const FaultConfig& f) { return f.listed; }},
          {.name = "switch",
           .type = KeyType::kCustom,
           .type_doc = "switch name",
           .default_doc = "none",
           .doc = "the switch (names above)",
           .kinds = kSwitchFaults,
           .required_for = kSwitchFaults,
           .get = [](const FaultConfig& f) -> KeyValue { return f.target; },
           .set = [](FaultConfig& f, const KeyValue& v) { f.target = std::get<std::string>(v); }},
          {.name = "path",
           .type = KeyType::kCustom,
           .type_doc = "path name",
           .default_doc = "none",
           .doc = "the spine the lossy EV names, like `\"p0/spine3\"`",
           .kinds = {"path_loss"},
           .required_for = {"path_loss"},
           .get = [](const FaultConfig& f) -> KeyValue { return f.target; },
           .set = [](FaultConfig& f, const KeyValue& v) { f.target = std::get<std::string>(v); }},
          {.name = "src",
           .type = KeyType::kInt,
           .default_doc = "none",
           .doc = "the sending host of the pair whose path is lossy",
           .kinds = {"path_loss"},
           .required_for = {"path_loss"},
           MRC_FAULT_UINT(src)},
          {.name = "dst",
           .type = KeyType::kInt,
           .default_doc = "none",
           .doc = "the receiving host of the pair (not `src`)",
           .kinds = {"path_loss"},
           .required_for = {"path_loss"},
           MRC_FAULT_UINT(dst)},
          {.name = "at",
           .type = KeyType::kDuration,
           .default_doc = "none",
           .doc = "when the fault happens, like `\"50us\"`",
           .required = true,
           MRC_FAULT_UINT(at)},
          {.name = "until",
           .type = KeyType::kDuration,
           .never = true,
           .doc = "when it ends; later than `at`",
           .kinds = kWindowedFaults,
           MRC_FAULT_UINT(until)},
          {.name = "duration",
           .type = KeyType::kDuration,
           .default_doc = "none",
           .doc = "how long the switch is down, like `\"1ms\"`",
           .kinds = {"switch_reboot", "blackhole_reboot"},
           .required_for = {"switch_reboot", "blackhole_reboot"},
           MRC_FAULT_UINT(duration)},
          {.name = "reboot_at",
           .type = KeyType::kDuration,
           .default_doc = "none",
           .doc = "when the silent switch is rebooted (its links go down), later than `at`",
           .kinds = {"blackhole_reboot"},
           .required_for = {"blackhole_reboot"},
           MRC_FAULT_UINT(reboot_at)},
          {.name = "period",
           .type = KeyType::kDuration,
           .default_doc = "none",
           .doc = "the flap period, like `\"100us\"`",
           .kinds = {"flap"},
           .required_for = {"flap"},
           MRC_FAULT_UINT(period)},
          {.name = "count",
           .type = KeyType::kInt,
           .min = 1,
           .default_doc = "none",
           .doc = "the number of down/up cycles",
           .kinds = {"flap"},
           .required_for = {"flap"},
           MRC_FAULT_UINT(count)},
          {.name = "probability",
           .type = KeyType::kReal,
           .rmin = 0,
           .rmax = 1,
           .default_doc = "none",
           .doc = "the loss probability",
           .kinds = {"gray_loss", "path_loss"},
           .required_for = {"gray_loss", "path_loss"},
           MRC_REC_REAL(FaultConfig, probability)},
          {.name = "rate",
           .type = KeyType::kRate,
           .default_doc = "none",
           .doc = "the degraded link rate, like `\"25Gbps\"`",
           .kinds = {"degrade"},
           .required_for = {"degrade"},
           MRC_FAULT_UINT(rate_bps)},
          {.name = "nic_detect",
           .type = KeyType::kDuration,
           .default_doc = "= at once",
           .doc = "host links only: how long after `at` the NIC sees its link change (below)",
           .kinds = {"link_down", "link_up", "flap"},
           MRC_FAULT_UINT(nic_detect),
           .applies =
               [](const FaultConfig& f) {
                 return !f.links.empty() &&
                        std::all_of(f.links.begin(), f.links.end(),
                                    [](const LinkRef& l) { return l.kind == LinkRef::kHostLeaf; });
               }},
      }};
}
#undef MRC_FAULT_UINT
#pragma GCC diagnostic pop

#undef MRC_KEY_UINT
#undef MRC_KEY_BOOL
#undef MRC_KEY_REAL
#undef MRC_KEY_TEXT
#undef MRC_KEY_UINT_AUTO
#undef MRC_REC_UINT
#undef MRC_REC_REAL
#undef MRC_REC_ENUM

std::string quoted(std::string_view s) {
  std::string o = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') o += '\\';
    o += c;
  }
  return o + "\"";
}

std::string number(double v) {
  std::ostringstream o;
  o << v;
  return o.str();
}

template <class R>
std::string choice_list(const BasicKeySpec<R>& k, std::string_view sep) {
  std::string o;
  for (std::string_view c : k.choices)
    o += (o.empty() ? "" : std::string(sep)) + "`\"" + std::string(c) + "\"`";
  return o;
}

// The record a section's defaults are read from.
template <class R>
R default_record() {
  return R{};
}
template <>
Scenario default_record<Scenario>() {
  return scenario_defaults();
}

// Wraps `text` into comment lines of at most `width` columns.
std::string comment(std::string_view text, std::string_view indent, size_t width = 96) {
  std::string out, line;
  size_t p = 0;
  while (p < text.size()) {
    size_t sp = text.find(' ', p);
    if (sp == std::string_view::npos) sp = text.size();
    const std::string_view word = text.substr(p, sp - p);
    if (!line.empty() && indent.size() + 2 + line.size() + 1 + word.size() > width) {
      out.append(indent).append("# ").append(line).append("\n");
      line.clear();
    }
    if (!line.empty()) line += ' ';
    line.append(word);
    p = sp + 1;
  }
  if (!line.empty()) out.append(indent).append("# ").append(line).append("\n");
  return out;
}

}  // namespace

const std::vector<SectionSpec>& scenario_schema() {
  static const std::vector<SectionSpec> schema = make_schema();
  return schema;
}

const SectionSpec* schema_section(std::string_view name) {
  for (const SectionSpec& s : scenario_schema())
    if (s.name == name) return &s;
  return nullptr;
}

const FlowSectionSpec& flow_schema() {
  static const FlowSectionSpec schema = make_flow_schema();
  return schema;
}

const FaultSectionSpec& fault_schema() {
  static const FaultSectionSpec schema = make_fault_schema();
  return schema;
}

Scenario scenario_defaults() {
  Scenario sc;
  sc.kinds = {"mrc", "roce"};
  sc.until = kPicosPerSecond;
  return sc;
}

template <class R>
std::string key_value_toml(const BasicKeySpec<R>& k, const KeyValue& v) {
  if (std::holds_alternative<std::monostate>(v)) return "\"auto\"";
  if (const bool* b = std::get_if<bool>(&v)) return *b ? "true" : "false";
  if (const double* d = std::get_if<double>(&v)) return number(*d);
  if (const std::string* s = std::get_if<std::string>(&v)) return quoted(*s);
  if (const auto* a = std::get_if<std::vector<std::string>>(&v)) {
    std::string o;
    for (const std::string& e : *a)
      o += (o.empty() ? "" : ", ") + quoted(e);
    return "[" + o + "]";
  }
  if (const auto* a = std::get_if<std::vector<uint64_t>>(&v)) {
    std::string o;
    for (uint64_t e : *a)
      o += (o.empty() ? "" : ", ") + std::to_string(e);
    return "[" + o + "]";
  }
  if (const auto* m = std::get_if<std::map<std::string, uint64_t>>(&v)) {
    std::string o;
    for (const auto& [key, n] : *m)
      o += (o.empty() ? "" : ", ") + key + " = " + std::to_string(n);
    return "{" + o + "}";
  }
  const uint64_t n = std::get<uint64_t>(v);
  switch (k.type) {
    case KeyType::kDuration:
      return n == 0 ? "0" : quoted(format_duration(n));
    case KeyType::kRate:
      return quoted(format_rate(n));
    case KeyType::kSize:
      return n == 0 ? "0" : quoted(format_size(n));
    default:
      return std::to_string(n);
  }
}

template <class R>
std::string key_default_doc(const BasicKeySpec<R>& k) {
  if (!k.default_doc.empty() && k.default_doc.front() != '=') return std::string(k.default_doc);
  const R d = default_record<R>();
  std::string o = "`" + key_value_toml(k, k.get(d)) + "`";
  if (!k.default_doc.empty()) o += " " + std::string(k.default_doc);
  return o;
}

template <class R>
std::string key_type_doc(const BasicKeySpec<R>& k) {
  if (!k.type_doc.empty()) return std::string(k.type_doc);
  std::string o;
  switch (k.type) {
    case KeyType::kBool:
      o = "bool";
      break;
    case KeyType::kInt:
      if (k.max >= UINT32_MAX)
        o = k.min == 0 ? "integer" : "integer >= " + std::to_string(k.min);
      else
        o = "integer " + std::to_string(k.min) + ".." + std::to_string(k.max);
      break;
    case KeyType::kReal:
      o = "number " + number(k.rmin) + ".." + number(k.rmax);
      break;
    case KeyType::kDuration:
      o = k.never ? "duration or `\"never\"`" : "duration";
      break;
    case KeyType::kRate:
      o = "rate";
      break;
    case KeyType::kSize:
      o = "size";
      break;
    case KeyType::kText:
      o = "string";
      break;
    case KeyType::kChoice:
      o = choice_list(k, " / ");
      break;
    case KeyType::kChoices:
      o = "array of " + choice_list(k, ", ");
      break;
    case KeyType::kCustom:
    case KeyType::kTables:
      break;
  }
  if (!k.unit.empty()) o += " (" + std::string(k.unit) + ")";
  if (k.auto_ok) o += " or `\"auto\"`";
  return o;
}

template <class R>
std::string schema_markdown(const BasicSectionSpec<R>& s) {
  std::string o;
  const BasicKeySpec<R>* kind = find_key(s, "kind");
  if (kind && !kind->choice_docs.empty()) {
    // Per kind: what it does, the keys it requires and the others it takes.
    o += "| kind | requires | also takes | what it does |\n|---|---|---|---|\n";
    for (size_t i = 0; i < kind->choices.size(); ++i) {
      const std::string_view name = kind->choices[i];
      std::string needs, takes;
      for (const BasicKeySpec<R>& k : s.keys) {
        if (&k == kind) continue;
        auto in = [&](const std::vector<std::string_view>& v) {
          return std::find(v.begin(), v.end(), name) != v.end();
        };
        const bool needed = k.required || in(k.required_for);
        if (!needed && !k.kinds.empty() && !in(k.kinds)) continue;
        std::string& to = needed ? needs : takes;
        to += (to.empty() ? "`" : ", `") + std::string(k.name) + "`";
      }
      o += "| `" + std::string(name) + "` | " + (needs.empty() ? "-" : needs) + " | " +
           (takes.empty() ? "-" : takes) + " | " +
           (i < kind->choice_docs.size() ? std::string(kind->choice_docs[i]) : "") + " |\n";
    }
    o += "\n";
  }
  o += "| key | type | default | meaning |\n|---|---|---|---|\n";
  for (const BasicKeySpec<R>& k : s.keys)
    o += "| `" + std::string(k.name) + "` | " + key_type_doc(k) + " | " + key_default_doc(k) +
         " | " + std::string(k.doc) + " |\n";
  return o;
}

template std::string key_value_toml(const BasicKeySpec<Scenario>&, const KeyValue&);
template std::string key_value_toml(const BasicKeySpec<WorkloadConfig::Flow>&, const KeyValue&);
template std::string key_value_toml(const BasicKeySpec<FaultConfig>&, const KeyValue&);
template std::string key_default_doc(const BasicKeySpec<Scenario>&);
template std::string key_default_doc(const BasicKeySpec<WorkloadConfig::Flow>&);
template std::string key_default_doc(const BasicKeySpec<FaultConfig>&);
template std::string key_type_doc(const BasicKeySpec<Scenario>&);
template std::string key_type_doc(const BasicKeySpec<WorkloadConfig::Flow>&);
template std::string key_type_doc(const BasicKeySpec<FaultConfig>&);
template std::string schema_markdown(const BasicSectionSpec<Scenario>&);
template std::string schema_markdown(const BasicSectionSpec<WorkloadConfig::Flow>&);
template std::string schema_markdown(const BasicSectionSpec<FaultConfig>&);

std::string schema_markdown_all() {
  std::string o;
  for (const SectionSpec& s : scenario_schema()) {
    o += s.name.empty() ? std::string("### Top level") : "### `[" + std::string(s.name) + "]`";
    o += "\n\n" + schema_markdown(s) + "\n";
  }
  o += "### `[[workload.flow]]`\n\n" + schema_markdown(flow_schema()) + "\n";
  o += "### `[[fault]]`\n\n" + schema_markdown(fault_schema()) + "\n";
  o.pop_back();
  return o;
}

std::string default_scenario_toml_annotated() {
  auto parsed = default_scenario();
  if (!parsed) return std::string(default_scenario_toml());  // cannot happen: tests parse it
  const Scenario& sc = *parsed;
  const std::string_view text = default_scenario_toml();
  // The embedded scenario's own comment line, then every key of the table.
  std::string o(text.substr(0, text.find('\n') + 1));
  o += "# Every key with its value in this scenario (the defaults where it sets none). Keys that\n"
       "# do not apply are commented out. docs/simulator.md has the tables.\n";
  auto section = [&](const SectionSpec& s) {
    o += s.name.empty() ? "\n" : "\n[" + std::string(s.name) + "]\n";
    for (const KeySpec& k : s.keys) {
      if (k.type == KeyType::kTables) continue;  // its tables follow the section
      o += comment(
          std::string(k.doc) + " (" + key_type_doc(k) + "; default " + key_default_doc(k) + ")",
          "");
      o += std::string(key_applies(s, k, sc) ? "" : "# ") + std::string(k.name) + " = " +
           key_value_toml(k, k.get(sc)) + "\n";
    }
  };
  // An entry of an array of tables: the keys that apply to it.
  auto entry = [&](const auto& schema, const auto& record) {
    o += "\n[[" + std::string(schema.name) + "]]\n";
    for (const auto& k : schema.keys)
      if (key_applies(schema, k, record))
        o += std::string(k.name) + " = " + key_value_toml(k, k.get(record)) + "\n";
  };
  for (const SectionSpec& s : scenario_schema()) {
    if (s.name == "run") continue;
    section(s);
    if (s.name == "workload") {
      for (const WorkloadConfig::Flow& f : sc.workload.flow_list)
        entry(flow_schema(), f);
      for (const FaultConfig& f : sc.faults)
        entry(fault_schema(), f);
    }
  }
  if (const SectionSpec* s = schema_section("run")) section(*s);
  return o;
}

}  // namespace mrc::sim
