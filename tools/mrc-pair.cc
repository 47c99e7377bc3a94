// mrc-pair: two MRC engines over the in-memory fault network (tests/support/fault_net.h), one
// QP pair, a stream of WRITE or WRITE_IMM messages with random payloads, faults on the way,
// every byte verified at the end. A demo and a quick way to reproduce a fault scenario.
//
//   mrc-pair                         2 planes x 16 EVs, light loss and trimming, 2 of 16 EVs
//                                    blackholed, port 1 failing mid-run
//   mrc-pair --transport roce --cc dcqcn --port-down-at -1 --blackhole 0
//   mrc-pair --json                  one JSON object instead of the summary
//
// Exit status: 0 when every completed message verified (and nothing else failed a check),
// 1 on any verification failure or a --pcap file that could not be written whole, 2 on bad
// arguments or setup errors.
#include <fmt/core.h>
#include <fmt/ranges.h>
#include <CLI/CLI.hpp>

#include <algorithm>
#include <cmath>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "cli.h"
#include "support/pair.h"

namespace {

using namespace mrc;
using namespace mrc::testnet;

constexpr uint64_t kMaxMessageBytes = uint64_t{1} << 30;
constexpr uint64_t kMaxRegionBytes = uint64_t{4} << 30;

struct Options {
  uint64_t size = 64 * 1024;
  uint64_t count = 200;
  std::string op = "write";
  int planes = 2;
  uint32_t evs = 16;
  double rate_gbps = 100;
  double delay_us = 2;
  double jitter_us = 0;
  double loss = 0.001;
  double trim = 0.002;
  double ecn = 0;
  double dup = 0;
  double blackhole = 0.125;
  bool blackhole_forward_only = false;
  double port_down_at_us = 250;
  double port_up_at_us = -1;
  int port = 1;
  uint64_t seed = 1;
  std::string cc = "nscc";
  std::string transport = "mrc";
  uint32_t mtu = 4096;
  double time_limit_ms = 1000;
  std::string pcap;
  bool json = false;
};

Time from_us(double v) {
  return static_cast<Time>(std::llround(v * 1e6));
}

struct PlaneStats {
  uint32_t evs = 0;
  uint32_t blackholed = 0;
  uint64_t data_packets = 0;  // requester data transmissions on the plane
  uint64_t probes = 0;
  uint64_t to_bad = 0;  // requester EV transitions to ASSUMED_BAD
  uint64_t to_good = 0;
  uint64_t port_events = 0;
};

nlohmann::json counters_json(const EngineCounters& c) {
  nlohmann::json j = {{"data_sent", c.data_sent},
                      {"retransmits", c.retransmits},
                      {"acks_sent", c.acks_sent},
                      {"nacks_sent", c.nacks_sent},
                      {"probes_sent", c.probes_sent},
                      {"probe_replies_sent", c.probe_replies_sent},
                      {"cnps_sent", c.cnps_sent},
                      {"data_received", c.data_received},
                      {"duplicates", c.duplicates},
                      {"trimmed_received", c.trimmed_received},
                      {"ecn_received", c.ecn_received},
                      {"bytes_placed", c.bytes_placed},
                      {"losses_detected", c.losses_detected},
                      {"timeouts", c.timeouts},
                      {"trim_nacks_received", c.trim_nacks_received},
                      {"ev_state_changes", c.ev_state_changes},
                      {"completions", c.completions},
                      {"completion_errors", c.completion_errors},
                      {"max_outstanding_psns", c.max_outstanding_psns},
                      {"max_outstanding_wimm", c.max_outstanding_wimm}};
  nlohmann::json drops = nlohmann::json::object();
  for (int i = 0; i < static_cast<int>(DropReason::kCount); ++i)
    if (c.drops[i] != 0) drops[drop_reason_name(static_cast<DropReason>(i))] = c.drops[i];
  j["drops"] = drops;
  return j;
}

nlohmann::json net_json(const NetCounters& c) {
  return {{"sent", c.sent},
          {"delivered", c.delivered},
          {"rx_rejected", c.rx_rejected},
          {"dropped_loss", c.dropped_loss},
          {"dropped_blackhole", c.dropped_blackhole},
          {"dropped_port_down", c.dropped_port_down},
          {"dropped_queue", c.dropped_queue},
          {"trimmed", c.trimmed},
          {"ecn_marked", c.ecn_marked},
          {"duplicated", c.duplicated},
          {"max_queue_bytes", c.max_queue_bytes},
          {"events", c.events}};
}

NetConfig net_config(const Options& o) {
  NetConfig n;
  n.seed = o.seed;
  n.link_bps = static_cast<uint64_t>(o.rate_gbps * 1e9);
  n.delay = from_us(o.delay_us);
  n.jitter = from_us(o.jitter_us);
  n.loss = o.loss;
  n.trim = o.trim;
  n.ecn = o.ecn;
  n.duplicate = o.dup;
  return n;
}

PairConfig pair_config(const Options& o) {
  PairConfig c;
  c.planes = static_cast<uint8_t>(o.planes);
  c.evs = o.evs;
  c.path_mtu = o.mtu;
  c.transport = o.transport == "roce" ? TransportMode::kRoce : TransportMode::kMrc;
  c.cc = o.cc == "dcqcn"   ? CcAlgorithm::kDcqcn
         : o.cc == "fixed" ? CcAlgorithm::kFixedWindow
         : o.cc == "none"  ? CcAlgorithm::kNone
                           : CcAlgorithm::kNscc;
  c.timeout = 10;  // 1.05 ms: the fabric RTT is microseconds
  c.sq_depth = 256;
  c.rq_depth = static_cast<uint32_t>(std::clamp<uint64_t>(o.count, 1, 65536));
  return c;
}

Workload workload_of(const Options& o) {
  Workload w;
  const WrOpcode op = o.op == "write_imm" ? WrOpcode::kWriteImm : WrOpcode::kWrite;
  for (uint64_t i = 0; i < o.count; ++i)
    w.messages.push_back({op, o.size});
  w.data_seed = o.seed * 7919 + 1;
  return w;
}

// Blackholed EVs: a seeded choice of round(fraction * paths) of the `paths` EVs, sorted.
std::vector<uint32_t> choose_blackholed(const Options& o, uint32_t paths) {
  std::vector<uint32_t> order(paths);
  for (uint32_t i = 0; i < paths; ++i)
    order[i] = i;
  Rng rng(o.seed ^ 0xB1AC);
  for (uint32_t i = paths; i > 1; --i)
    std::swap(order[i - 1], order[rng.below(i)]);
  const uint32_t nbh = std::min<uint32_t>(
      paths, static_cast<uint32_t>(std::llround(o.blackhole * static_cast<double>(paths))));
  std::vector<uint32_t> blackholed(order.begin(), order.begin() + nbh);
  std::sort(blackholed.begin(), blackholed.end());
  return blackholed;
}

// Whether the port failure applies. The default port, 1, does not exist with --planes 1, and
// failing port 0 instead would cut the only path for the rest of the run: that run has no port
// failure, and the summary says so (an explicit --port beyond the planes is refused).
bool port_fails(const Options& o) {
  return o.port_down_at_us >= 0 && o.port < o.planes;
}

// The blackholed EVs, dead for the whole run, and the port failure.
void add_faults(const Options& o, const PairConfig& c, PairNet& pn,
                const std::vector<uint32_t>& blackholed) {
  FaultNet& net = *pn.net;
  for (uint32_t ev : blackholed) {
    PathFault f;
    f.match.port = static_cast<int>(ev % c.planes);
    f.match.ev_index = static_cast<int>(ev);
    if (o.blackhole_forward_only) f.match.from_host = pn.pair.a.host;
    f.blackhole = true;
    net.add_path_fault(f);
  }
  if (port_fails(o)) {
    net.add_port_fault(PortFault{-1, static_cast<uint8_t>(o.port), from_us(o.port_down_at_us),
                                 o.port_up_at_us >= 0 ? from_us(o.port_up_at_us) : kNever});
  }
}

// The requester's side per plane: EVs, blackholed EVs, packets sent, EV and port events.
std::vector<PlaneStats> plane_stats(const PairConfig& c, const PairNet& pn, uint32_t paths,
                                    const std::vector<uint32_t>& blackholed,
                                    const WorkloadResult& r) {
  std::vector<PlaneStats> planes(c.planes);
  for (uint32_t ev = 0; ev < paths; ++ev)
    ++planes[ev % c.planes].evs;
  for (uint32_t ev : blackholed)
    ++planes[ev % c.planes].blackholed;
  for (const auto& [key, pc] : pn.net->path_counters()) {
    const auto [from, port, ev] = key;
    if (from != pn.pair.a.host || port < 0 || port >= c.planes) continue;
    planes[port].data_packets += pc.sent_data;
    planes[port].probes += pc.sent_probes;
  }
  for (const auto& [h, e] : r.events) {
    if (h != pn.pair.a.host || e.port >= c.planes) continue;
    if (e.type == EventType::kEvStateChange) {
      if (e.to == ev::EvState::kAssumedBad) ++planes[e.port].to_bad;
      if (e.to == ev::EvState::kGood) ++planes[e.port].to_good;
    } else if (e.type == EventType::kPortChange) {
      ++planes[e.port].port_events;
    }
  }
  return planes;
}

// What one run measured, for the two reports.
struct RunReport {
  const WorkloadResult& r;
  const std::vector<PlaneStats>& planes;
  const std::vector<uint32_t>& blackholed;
  uint32_t paths;
  double duration_us;
};

void print_json(const Options& o, const RunReport& rep) {
  const WorkloadResult& r = rep.r;
  nlohmann::json j;
  j["completions"] = r.successes + r.errors;
  j["successes"] = r.successes;
  j["errors"] = r.errors;
  j["bytes_verified"] = r.bytes_verified;
  j["goodput_gbps"] = r.goodput_gbps;
  j["duration_us"] = rep.duration_us;
  j["retransmits"] = r.a.retransmits;
  j["trims"] = r.net.trimmed;
  j["losses_detected"] = r.a.losses_detected;
  j["timeouts"] = r.a.timeouts;
  j["ev_state_changes"] = r.a.ev_state_changes;
  j["receive_completions"] = r.recv_completions;
  j["verified"] = r.ok();
  j["failures"] = r.failures;
  j["run_status"] = run_status_name(r.run_status);
  j["qp_state"] = qp_state_name(r.final_a);
  nlohmann::json pl = nlohmann::json::array();
  for (size_t p = 0; p < rep.planes.size(); ++p) {
    const PlaneStats& s = rep.planes[p];
    pl.push_back({{"plane", static_cast<int>(p)},
                  {"evs", s.evs},
                  {"blackholed_evs", s.blackholed},
                  {"data_packets", s.data_packets},
                  {"probes", s.probes},
                  {"ev_to_assumed_bad", s.to_bad},
                  {"ev_to_good", s.to_good},
                  {"port_events", s.port_events}});
  }
  j["planes"] = pl;
  j["requester"] = counters_json(r.a);
  j["responder"] = counters_json(r.b);
  j["net"] = net_json(r.net);
  j["config"] = {{"size", o.size},
                 {"count", o.count},
                 {"op", o.op},
                 {"planes", o.planes},
                 {"evs", o.evs},
                 {"rate_gbps", o.rate_gbps},
                 {"delay_us", o.delay_us},
                 {"jitter_us", o.jitter_us},
                 {"loss", o.loss},
                 {"trim", o.trim},
                 {"ecn", o.ecn},
                 {"dup", o.dup},
                 {"blackhole", o.blackhole},
                 {"blackholed_evs", rep.blackholed},
                 {"port_down_at_us", o.port_down_at_us},
                 {"port", o.port},
                 {"port_fails", port_fails(o)},
                 {"seed", o.seed},
                 {"cc", o.cc},
                 {"transport", o.transport},
                 {"mtu", o.mtu}};
  fmt::print("{}\n", j.dump(2));
}

// The summary's head: the run's settings and faults.
void print_setup(const Options& o, const RunReport& rep) {
  fmt::print(
      "mrc-pair: {} x {} B {} over {} plane(s) x {} EV(s), {} Gb/s per port, "
      "{} us one-way, transport {}, cc {}, seed {}\n",
      o.count, o.size, o.op == "write_imm" ? "WRITE_IMM" : "WRITE", o.planes, rep.paths,
      o.rate_gbps, o.delay_us, o.transport, o.cc, o.seed);
  fmt::print(
      "faults:   loss {:g}  trim {:g}  ecn {:g}  dup {:g}  jitter {} us  blackholed EVs "
      "[{}]{}",
      o.loss, o.trim, o.ecn, o.dup, o.jitter_us, fmt::join(rep.blackholed, " "),
      o.blackhole_forward_only ? " (requester -> responder only)" : "");
  if (port_fails(o))
    fmt::print("  port {} down at {} us{}", o.port, o.port_down_at_us,
               o.port_up_at_us >= 0 ? fmt::format(", up at {} us", o.port_up_at_us) : "");
  else if (o.port_down_at_us >= 0)
    fmt::print(
        "  no port failure (the default port {} is not one of {} plane(s); --port 0 "
        "fails the only one)",
        o.port, o.planes);
  fmt::print("\n\n");
}

void print_summary(const Options& o, const RunReport& rep) {
  const WorkloadResult& r = rep.r;
  print_setup(o, rep);
  fmt::print("completions     {} ok, {} errors of {} (QP {}; run {})\n", r.successes, r.errors,
             o.count, qp_state_name(r.final_a), run_status_name(r.run_status));
  if (o.op == "write_imm") fmt::print("immediates      {}\n", r.recv_completions);
  fmt::print("verified        {} bytes, {}\n", r.bytes_verified,
             r.ok() ? "all data and guard bytes correct" : "VERIFICATION FAILED");
  fmt::print("goodput         {:.1f} Gb/s over {:.1f} us\n", r.goodput_gbps, rep.duration_us);
  fmt::print("retransmits     {}  (losses detected {}, ACK timeouts {})\n", r.a.retransmits,
             r.a.losses_detected, r.a.timeouts);
  fmt::print("trims           {}  (trim NACKs {})\n", r.net.trimmed, r.a.trim_nacks_received);
  fmt::print("network drops   loss {}  blackhole {}  port-down {}  queue {}\n", r.net.dropped_loss,
             r.net.dropped_blackhole, r.net.dropped_port_down, r.net.dropped_queue);
  std::string drops;
  for (const auto* cnt : {&r.a, &r.b})
    for (int i = 0; i < static_cast<int>(DropReason::kCount); ++i)
      if (cnt->drops[i] != 0)
        drops += fmt::format(" {}:{}={}", cnt == &r.a ? "requester" : "responder",
                             drop_reason_name(static_cast<DropReason>(i)), cnt->drops[i]);
  fmt::print("engine drops   {}\n", drops.empty() ? " none" : drops);
  fmt::print("EV changes      {}\n\n", r.a.ev_state_changes);
  fmt::print("plane  EVs  blackholed  data pkts  probes  ->bad  ->good  port events\n");
  for (size_t p = 0; p < rep.planes.size(); ++p) {
    const PlaneStats& s = rep.planes[p];
    fmt::print("{:>5}  {:>3}  {:>10}  {:>9}  {:>6}  {:>5}  {:>6}  {:>11}\n", p, s.evs, s.blackholed,
               s.data_packets, s.probes, s.to_bad, s.to_good, s.port_events);
  }
  for (const std::string& f : r.failures)
    fmt::print("FAIL: {}\n", f);
}

// Two engines over the fault network: the workload, verified; 0 when every message arrived
// intact.
int run(const Options& o) {
  const Workload w = workload_of(o);
  PairConfig c = pair_config(o);
  c.region_bytes = region_bytes_for(w);
  auto pn = make_pair_net(net_config(o), c);
  if (!pn) {
    return tools::fail_setup("mrc-pair", fmt::format("setup failed: {}", error_name(pn.error())));
  }
  if (!o.pcap.empty()) {
    if (auto st = pn->net->enable_pcap(o.pcap); !st) {
      return tools::fail_setup("mrc-pair",
                               fmt::format("cannot write {}: {}", o.pcap, error_name(st.error())));
    }
  }
  const uint32_t paths = c.transport == TransportMode::kRoce ? 1 : o.evs;
  const std::vector<uint32_t> blackholed = choose_blackholed(o, paths);
  add_faults(o, c, *pn, blackholed);

  const WorkloadResult r = run_workload(*pn->net, pn->pair, w, from_us(o.time_limit_ms * 1000.0));
  // Records that could not be written do not stop the run; the capture is whole only if every
  // one of them and the final flush were.
  const Status capture = pn->net->close_pcap();
  const std::vector<PlaneStats> planes = plane_stats(c, *pn, paths, blackholed, r);
  const double duration_us = r.end > r.start ? static_cast<double>(r.end - r.start) / 1e6 : 0;
  const RunReport rep{r, planes, blackholed, paths, duration_us};
  if (o.json)
    print_json(o, rep);
  else
    print_summary(o, rep);
  if (!capture) {
    fmt::print(stderr, "mrc-pair: cannot write {}: {} (the capture is incomplete)\n", o.pcap,
               error_name(capture.error()));
    return 1;
  }
  return r.ok() ? 0 : 1;
}

}  // namespace

namespace {

// The messages and the NICs: size, count, operation, planes, EVs.
void add_workload_options(CLI::App& app, Options& o) {
  app.add_option("-s,--size", o.size, "message size in bytes (1 to 1 GiB)")
      ->capture_default_str()
      ->check(CLI::Range(uint64_t{1}, kMaxMessageBytes));
  app.add_option("-n,--count", o.count, "number of messages")
      ->capture_default_str()
      ->check(CLI::Range(uint64_t{1}, uint64_t{1} << 20));
  app.add_option("--op", o.op, "operation")
      ->capture_default_str()
      ->check(CLI::IsMember({"write", "write_imm"}));
  app.add_option("--planes", o.planes, "NIC ports (planes)")
      ->capture_default_str()
      ->check(CLI::Range(1, 8));
  app.add_option("--evs", o.evs, "EVs (paths) per QP over all planes")
      ->capture_default_str()
      ->check(CLI::Range(1u, 4096u));
}

// The network between the two NICs and its faults.
void add_network_options(CLI::App& app, Options& o) {
  app.add_option("--rate", o.rate_gbps, "link rate per port, Gb/s")
      ->capture_default_str()
      ->check(CLI::Range(0.1, 1600.0));
  app.add_option("--delay", o.delay_us, "one-way propagation delay, us")
      ->capture_default_str()
      ->check(CLI::Range(0.0, 100000.0));
  app.add_option("--jitter", o.jitter_us, "uniform extra delay per packet, us (reorders)")
      ->capture_default_str()
      ->check(CLI::Range(0.0, 100000.0));
  app.add_option("--loss", o.loss, "packet loss probability")
      ->capture_default_str()
      ->check(CLI::Range(0.0, 1.0));
  app.add_option("--trim", o.trim, "data packet trimming probability")
      ->capture_default_str()
      ->check(CLI::Range(0.0, 1.0));
  app.add_option("--ecn", o.ecn, "ECN CE marking probability")
      ->capture_default_str()
      ->check(CLI::Range(0.0, 1.0));
  app.add_option("--dup", o.dup, "duplication probability")
      ->capture_default_str()
      ->check(CLI::Range(0.0, 1.0));
  app.add_option("--blackhole", o.blackhole, "fraction of EVs blackholed for the whole run")
      ->capture_default_str()
      ->check(CLI::Range(0.0, 1.0));
  app.add_flag("--blackhole-forward-only", o.blackhole_forward_only,
               "blackholes cut only requester -> responder (default: both directions, as a "
               "failed spine does)");
  app.add_option("--port-down-at", o.port_down_at_us, "port failure time, us (< 0: none)")
      ->capture_default_str();
  app.add_option("--port-up-at", o.port_up_at_us, "port recovery time, us (< 0: never)")
      ->capture_default_str();
  app.add_option("--port", o.port,
                 "port (plane) that fails, 0..planes-1 (with --planes 1 the default, 1, is "
                 "none: no port failure unless --port 0)")
      ->capture_default_str()
      ->check(CLI::Range(0, 7));
}

// Seed, transport, congestion control, limits and outputs.
void add_run_options(CLI::App& app, Options& o) {
  app.add_option("--seed", o.seed, "seed (network faults, engines, payload)")
      ->capture_default_str();
  app.add_option("--cc", o.cc, "congestion control")
      ->capture_default_str()
      ->check(CLI::IsMember({"nscc", "dcqcn", "fixed", "none"}));
  app.add_option("--transport", o.transport, "transport")
      ->capture_default_str()
      ->check(CLI::IsMember({"mrc", "roce"}));
  app.add_option("--mtu", o.mtu, "path MTU (payload bytes per packet)")
      ->capture_default_str()
      ->check(CLI::Range(256u, 9000u));
  app.add_option("--time-limit", o.time_limit_ms, "simulated time limit, ms")
      ->capture_default_str()
      ->check(CLI::Range(0.001, 1e7));
  app.add_option("--pcap", o.pcap, "write delivered datagrams to this pcap file");
  app.add_flag("--json", o.json, "print one JSON object instead of the summary");
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  CLI::App app{"mrc-pair: two MRC engines over an in-memory fault network, data verified",
               "mrc-pair"};
  mrc::tools::set_exit_codes(app,
                             "0 every message arrived and verified, 1 a check failed or the "
                             "--pcap file could not be written");
  add_workload_options(app, o);
  add_network_options(app, o);
  add_run_options(app, o);
  if (const int rc = mrc::tools::parse(app, argc, argv); rc >= 0) return rc;
  if (app.count("--port") > 0 && o.port >= o.planes)
    return mrc::tools::bad_argument(app, "--port {}: there are {} plane(s), ports 0..{}", o.port,
                                    o.planes, o.planes - 1);
  // Both engines hold a region of every message (plus gaps): bound the memory asked for.
  if (o.size * o.count > kMaxRegionBytes)
    return mrc::tools::bad_argument(
        app, "--size {} x --count {} = {} bytes per region, more than {} (4 GiB)", o.size, o.count,
        o.size * o.count, kMaxRegionBytes);
  // RoCEv2's own congestion control unless one was asked for.
  if (o.transport == "roce" && app.count("--cc") == 0) o.cc = "dcqcn";
  return run(o);
}
