// mrc-sim: runs a scenario (TOML) on the packet-level fabric simulator once per transport
// (MRC, MRC oblivious, RoCEv2/ECMP, ...) with the same seed, workload and faults, prints a
// comparison table and writes a run directory. docs/simulator.md is the user guide.
//
//   mrc-sim                                  the embedded default scenario
//   mrc-sim scenarios/x.toml --set topo.hosts=256 --set transport.kinds=[mrc,roce]
//   mrc-sim --htsim matrix.cm                an htsim connection matrix
//   mrc-sim --print-default > my.toml        start a scenario from the default
//
// Output directory (default out/<scenario name>): summary.json, flows.csv, links.csv,
// ev_events.jsonl, optional <transport>.pcap. Exit status: 0 when every transport ran, 1 when
// a run failed (bad fault, workload error), 2 on bad arguments or scenario errors.
#include <fmt/core.h>
#include <fmt/os.h>
#include <fmt/ranges.h>
#include <sys/resource.h>
#include <unistd.h>
#include "cli.h"

#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "mrc_git_describe.h"  // generated at build time: cmake/git_describe.cmake
#include "sim/partition.h"
#include "sim/progress.h"
#include "sim/runner.h"
#include "sim/scenario.h"
#include "sim/scenario_schema.h"
#ifdef MRC_HAVE_MPI
#include "sim/mpi_exchange.h"
#endif

#ifndef MRC_VERSION
#define MRC_VERSION "0.0.0"
#endif

namespace {

using namespace mrc;
using namespace mrc::sim;
using json = nlohmann::ordered_json;
using Clock = std::chrono::steady_clock;

double to_us(Time t) {
  return static_cast<double>(t) / kPicosPerMicro;
}
double to_ns(Time t) {
  return static_cast<double>(t) / kPicosPerNano;
}

uint64_t peak_rss_bytes() {
  struct rusage ru {};
  getrusage(RUSAGE_SELF, &ru);
  return static_cast<uint64_t>(ru.ru_maxrss) * 1024;
}

// CPU time of this process so far (user + system), microseconds. Against the wall time it
// shows what the process did not get of its core (other work, or a hypervisor's steal).
uint64_t cpu_micros() {
  struct rusage ru {};
  getrusage(RUSAGE_SELF, &ru);
  auto us = [](const timeval& t) {
    return static_cast<uint64_t>(t.tv_sec) * 1'000'000 + static_cast<uint64_t>(t.tv_usec);
  };
  return us(ru.ru_utime) + us(ru.ru_stime);
}

// Bytes of this process's memory backed by transparent huge pages (AnonHugePages), 0 when
// unknown: summary.json records it so a run says whether huge pages were in use.
uint64_t huge_page_bytes() {
  std::FILE* f = std::fopen("/proc/self/smaps_rollup", "r");
  if (f == nullptr) return 0;
  char line[256];
  unsigned long long kb = 0;
  while (std::fgets(line, sizeof line, f) != nullptr) {
    if (std::sscanf(line, "AnonHugePages: %llu kB", &kb) == 1) break;
  }
  std::fclose(f);
  return static_cast<uint64_t>(kb) * 1024;
}

// The simulator touches its working set (engines, QPs, packets, queues) at random: with 4 KiB
// pages nearly every access beyond a few MB misses the TLB and walks page tables that miss
// the cache as well. glibc >= 2.35 asks the kernel for transparent huge pages on its heap when
// the tunable glibc.malloc.hugetlb=1 is set (madvise(MADV_HUGEPAGE), which the kernel's
// default THP mode "madvise" honours); tunables are read when a process starts, so mrc-sim
// re-executes itself once with the tunable added. Benchmark B: docs/performance.md.
// MRC_SIM_HUGE_PAGES=0 keeps 4 KiB pages. On any failure the run goes on with normal pages.
void reexec_with_huge_pages(char** argv) {
  const char* want = std::getenv("MRC_SIM_HUGE_PAGES");
  if (want != nullptr && std::string(want) == "0") return;
  const char* tunables = std::getenv("GLIBC_TUNABLES");
  std::string t = tunables != nullptr ? tunables : "";
  if (t.find("glibc.malloc.hugetlb") != std::string::npos) return;  // set (or re-executed)
  t = t.empty() ? "glibc.malloc.hugetlb=1" : t + ":glibc.malloc.hugetlb=1";
  if (setenv("GLIBC_TUNABLES", t.c_str(), 1) != 0) return;
  execv("/proc/self/exe", argv);
  // Still here: exec failed (no /proc?); undo the variable so children see what we saw.
  if (tunables != nullptr) {
    setenv("GLIBC_TUNABLES", tunables, 1);
  } else {
    unsetenv("GLIBC_TUNABLES");
  }
}

std::string version() {
  return std::string("mrc-sim ") + MRC_VERSION + " (" + MRC_GIT_DESCRIBE + ")";
}

// ---- scenario echo ---------------------------------------------------------------------------

bool ecn_last_hop_on(const TransportResult& r) {
  return r.config.sw.ecn_last_hop == SwitchConfig::EcnLastHop::kOn;
}

// A key's value as summary.json echoes it: durations and rates with their unit, sizes and
// counts as integers, "auto" where the key takes it.
template <class R>
json key_json(const BasicKeySpec<R>& k, const KeyValue& v) {
  if (std::holds_alternative<std::monostate>(v)) return "auto";
  if (const bool* x = std::get_if<bool>(&v)) return *x;
  if (const double* x = std::get_if<double>(&v)) return *x;
  if (const std::string* x = std::get_if<std::string>(&v)) return *x;
  if (const auto* x = std::get_if<std::vector<std::string>>(&v)) return *x;
  if (const auto* x = std::get_if<std::vector<uint64_t>>(&v)) return *x;
  if (const auto* x = std::get_if<std::map<std::string, uint64_t>>(&v)) {
    json o = json::object();
    for (const auto& [key, n] : *x)
      o[key] = n;
    return o;
  }
  const uint64_t n = std::get<uint64_t>(v);
  if (k.type == KeyType::kDuration) return format_duration(n);
  if (k.type == KeyType::kRate) return format_rate(n);
  return n;
}

// Every key of a section of the schema that applies to the record (arrays of tables are the
// caller's).
template <class R>
json record_json(const BasicSectionSpec<R>& s, const R& rec) {
  json j = json::object();
  for (const BasicKeySpec<R>& k : s.keys)
    if (k.type != KeyType::kTables && key_applies(s, k, rec))
      j[std::string(k.name)] = key_json(k, k.get(rec));
  return j;
}

json echo_config(const Scenario& sc) {
  json j;
  for (const SectionSpec& section : scenario_schema()) {
    if (section.name.empty()) continue;  // name, description, seed: summary.json's own fields
    json r = record_json(section, sc);
    // A section none of whose keys applies ([dcqcn] without a DCQCN run) is left out.
    if (!r.empty()) j[std::string(section.name)] = r;
  }
  const WorkloadConfig& w = sc.workload;
  // The file's name only: summary.json is compared across machines and checkouts.
  if (w.kind == WorkloadConfig::kHtsim)
    j["workload"]["file"] = std::filesystem::path(w.file).filename().string();
  if (w.kind == WorkloadConfig::kFlows) {
    json flows = json::array();
    for (const WorkloadConfig::Flow& f : w.flow_list)
      flows.push_back(record_json(flow_schema(), f));
    j["workload"]["flow"] = flows;
  }
  json faults = json::array();
  for (const FaultConfig& f : sc.faults) {
    json fj = record_json(fault_schema(), f);
    fj["target"] = f.target;  // what it acts on as written, whichever key named it
    faults.push_back(fj);
  }
  j["faults"] = faults;
  return j;
}

// ---- per-transport results -------------------------------------------------------------------

struct Ran {
  TransportResult r;
  uint32_t leaves = 0, spines = 0;
  double wall_seconds = 0;
};

json transport_json(const Ran& ran) {
  const TransportResult& r = ran.r;
  const FlowSummary& s = r.summary;
  json j;
  j["name"] = r.name;
  const CcAlgorithm cc =
      r.config.transport.kind == TransportKind::kRoce && r.config.transport.cc == CcAlgorithm::kNscc
          ? CcAlgorithm::kDcqcn
          : r.config.transport.cc;
  j["cc"] = cc == CcAlgorithm::kNscc    ? "nscc"
            : cc == CcAlgorithm::kDcqcn ? "dcqcn"
            : cc == CcAlgorithm::kNone  ? "none"
                                        : "fixed_window";
  j["path_mode"] = r.config.transport.kind == TransportKind::kRoce ||
                           r.config.transport.path_mode == PathMode::kEcmp
                       ? "ecmp"
                       : "srv6";
  j["switch"] = {{"trimming", r.config.sw.trimming},
                 {"pfc", r.config.sw.pfc},
                 {"ecn_last_hop", ecn_last_hop_on(r)}};
  j["qps_per_flow"] = r.config.transport.qps_per_flow;
  j["sim_time_ps"] = r.sim_time;
  j["makespan_ps"] = r.makespan;
  j["events"] = r.stats.events;
  j["hit_run_limit"] = r.hit_limit;
  j["flows"] = {{"count", s.count},
                {"completed", s.completed},
                {"failed", s.failed},
                {"unfinished", s.unfinished},
                {"bytes_delivered", s.bytes}};
  j["fct_us"] = {{"p50", s.fct_p50_us},
                 {"p99", s.fct_p99_us},
                 {"max", s.fct_max_us},
                 {"ideal_max", s.ideal_max_us}};
  j["slowdown"] = {{"p50", s.slowdown_p50}, {"p99", s.slowdown_p99}, {"max", s.slowdown_max}};
  j["goodput_gbps"] = {{"mean", s.goodput_mean_gbps}, {"min", s.goodput_min_gbps}};
  const SimStats& st = r.stats;
  j["counters"] = {{"data_packets", st.data_packets},
                   {"retransmits", st.retransmits},
                   {"drops", st.drops},
                   {"fault_drops", st.fault_drops},
                   {"trims", st.trims},
                   {"ecn_marks", st.ecn_marks},
                   {"pfc_pauses", st.pfc_pauses},
                   {"qp_errors", st.qp_errors},
                   {"ev_state_changes", st.ev_state_changes},
                   {"ev_swaps", st.ev_swaps},
                   {"ev_ecn_swaps", st.ev_ecn_swaps},
                   {"peer_port_changes", st.peer_port_changes},
                   {"timeouts", st.timeouts},
                   {"pto_losses", st.pto_losses},
                   {"pto_borrowed_rtt", st.pto_borrowed_rtt},
                   {"probes_sent", st.probes_sent},
                   {"probes_unanswered", st.probes_unanswered},
                   {"probes_deferred", st.probes_deferred},
                   {"ack_ev_changes", st.ack_ev_changes},
                   {"reverse_probes", st.reverse_probes},
                   {"reverse_probes_unanswered", st.reverse_probes_unanswered}};
  j["evs"] = {{"active_per_plane", st.evs_active_per_plane},
              {"backup_per_plane", st.evs_backup_per_plane}};
  // Engine::qp_memory at the end of the run, per QP (docs/performance.md, "Bytes per QP").
  j["qp_memory"] = {
      {"qps", st.qps},
      {"bytes_per_qp", st.qps ? static_cast<double>(st.qp_bytes) / st.qps : 0.0},
      {"path_bytes_per_qp", st.qps ? static_cast<double>(st.qp_path_bytes) / st.qps : 0.0}};
  json coll = json::array();
  for (const CollectiveResult& c : r.collectives)
    coll.push_back({{"kind", collective_name(c.kind)},
                    {"iteration", c.iteration},
                    {"ranks", c.ranks},
                    {"bytes", c.bytes},
                    {"flows", c.flows},
                    {"start_us", to_us(c.start)},
                    {"time_us", to_us(c.time())},
                    {"algbw_GBps", c.algbw_GBps()},
                    {"busbw_GBps", c.busbw_GBps()},
                    {"ok", c.ok}});
  j["collectives"] = coll;
  json its = json::array();
  for (const IterationResult& it : r.iterations) {
    json ij = {{"index", it.index},
               {"start_us", to_us(it.start)},
               {"compute_us", to_us(it.comm_start - it.start)},
               {"finished", it.finished()},
               {"ok", it.ok}};
    ij["comm_us"] = it.finished() ? json(to_us(it.end - it.comm_start)) : json(nullptr);
    ij["time_us"] = it.finished() ? json(to_us(it.time())) : json(nullptr);
    its.push_back(ij);
  }
  j["iterations"] = its;
  if (!r.iterations.empty()) j["job_aborted"] = r.job_aborted;
  if (r.config.denylist.interval > 0) {
    json entries = json::array();
    for (const DenylistRecord& d : r.denylist)
      entries.push_back({{"time_us", to_us(d.time)},
                         {"link", "p" + std::to_string(d.plane) + "/host" + std::to_string(d.host)},
                         {"denied", d.denied}});
    j["denylist"] = entries;
  }
  j["fabric"] = {{"leaves_per_plane", ran.leaves}, {"spines_per_plane", ran.spines}};
  if (r.pods > 0) {
    j["fabric"] = {{"kind", "fat_tree"}, {"pods", r.pods},   {"leaves", ran.leaves},
                   {"aggs", ran.leaves}, {"cores", r.cores}, {"description", r.fabric}};
  }
  if (!r.workload_error.empty()) j["workload_error"] = r.workload_error;
  return j;
}

// ---- files -------------------------------------------------------------------------------------

void write_flows(const std::string& path, const std::vector<Ran>& runs) {
  auto f = fmt::output_file(path);
  f.print(
      "flow_id,transport,src,dst,size_bytes,start_ns,end_ns,fct_ns,ideal_fct_ns,slowdown,"
      "retx_pkts,paths_used,ok,tag\n");
  for (const Ran& ran : runs)
    for (const FlowResult& fl : ran.r.flows) {
      const bool done = fl.end != kNever;
      f.print("{},{},{},{},{},{:.3f},", fl.id, ran.r.name, fl.spec.src, fl.spec.dst, fl.spec.bytes,
              to_ns(fl.spec.start));
      if (done)
        f.print("{:.3f},{:.3f},", to_ns(fl.end), to_ns(fl.fct));
      else
        f.print(",,");
      f.print("{:.3f},", to_ns(fl.ideal_fct));
      if (done && fl.ideal_fct > 0)
        f.print("{:.4f}", static_cast<double>(fl.fct) / static_cast<double>(fl.ideal_fct));
      f.print(",{},{},{},{}\n", fl.retransmits, fl.paths_used, fl.ok ? 1 : 0, fl.spec.tag);
    }
}

void write_links(const std::string& path, const std::vector<Ran>& runs) {
  auto f = fmt::output_file(path);
  f.print("transport,time_ns,link,utilization,queue_bytes\n");
  for (const Ran& ran : runs)
    for (const LinkSample& s : ran.r.link_samples) {
      if (s.utilization == 0 && s.queue_bytes == 0) continue;  // idle: absent row
      const std::string& name =
          s.link < ran.r.link_names.size() ? ran.r.link_names[s.link] : std::to_string(s.link);
      f.print("{},{:.3f},{},{:.4f},{}\n", ran.r.name, to_ns(s.time), name, s.utilization,
              s.queue_bytes);
    }
}

// Throughput series: per receiving host (rx), per sending host (tx) and per pair (flow), in
// Gb/s of payload placed at the receiver over each interval; idle rows are left out.
void write_flows_ts(const std::string& path, const std::vector<Ran>& runs, Time interval) {
  auto f = fmt::output_file(path);
  f.print("transport,time_ns,kind,src,dst,gbps\n");
  if (interval == 0) return;
  const double secs = static_cast<double>(interval) / kPicosPerSecond;
  for (const Ran& ran : runs)
    for (const ThroughputSample& s : ran.r.throughput) {
      const double gbps = static_cast<double>(s.bytes) * 8 / secs / 1e9;
      switch (s.kind) {
        case ThroughputSample::kHostRx:
          f.print("{},{:.3f},host_rx,,{},{:.3f}\n", ran.r.name, to_ns(s.time), s.dst, gbps);
          break;
        case ThroughputSample::kHostTx:
          f.print("{},{:.3f},host_tx,{},,{:.3f}\n", ran.r.name, to_ns(s.time), s.src, gbps);
          break;
        case ThroughputSample::kPair:
          f.print("{},{:.3f},flow,{},{},{:.3f}\n", ran.r.name, to_ns(s.time), s.src, s.dst, gbps);
          break;
      }
    }
}

void write_ev_events(const std::string& path, const std::vector<Ran>& runs) {
  auto f = fmt::output_file(path);
  for (const Ran& ran : runs)
    for (const EvEvent& e : ran.r.ev_events) {
      if (e.ack_ev) {
        // A reverse EV set slot (paper 2.4): `ack_ev` came in, `ack_ev_out` left (-1: none).
        f.print(
            "{{\"transport\":\"{}\",\"time_ns\":{:.3f},\"host\":{},\"qpn\":{},\"ack_ev\":{},"
            "\"plane\":{},\"ack_ev_out\":{}}}\n",
            ran.r.name, to_ns(e.time), e.host, e.qpn,
            e.ev_index == 0xFFFF ? -1 : static_cast<int>(e.ev_index), e.plane, e.replaced);
        continue;
      }
      if (e.replaced >= 0) {
        // A swap: backup `ev` took the active slot of `replaced` (same plane).
        f.print(
            "{{\"transport\":\"{}\",\"time_ns\":{:.3f},\"host\":{},\"qpn\":{},\"ev\":{},"
            "\"plane\":{},\"swap_out\":{},\"swap_out_state\":\"{}\"}}\n",
            ran.r.name, to_ns(e.time), e.host, e.qpn, e.ev_index, e.plane, e.replaced,
            ev::ev_state_name(e.from));
        continue;
      }
      f.print(
          "{{\"transport\":\"{}\",\"time_ns\":{:.3f},\"host\":{},\"qpn\":{},\"ev\":{},"
          "\"plane\":{},\"from\":\"{}\",\"to\":\"{}\"}}\n",
          ran.r.name, to_ns(e.time), e.host, e.qpn, e.ev_index, e.plane, ev::ev_state_name(e.from),
          ev::ev_state_name(e.to));
    }
}

// ---- the table -------------------------------------------------------------------------------

// "switch_reboot p0/spine1 at 500us for 1ms": what, where, when and for how long.
std::string describe_fault(const FaultConfig& f) {
  std::string s =
      fmt::format("{} {} at {}", fault_kind_name(f.kind), f.target, format_duration(f.at));
  switch (f.kind) {
    case FaultConfig::kSwitchReboot:
      s += " for " + format_duration(f.duration);
      break;
    case FaultConfig::kFlap:
      s += fmt::format(", {} cycle(s) of {}", f.count, format_duration(f.period));
      break;
    case FaultConfig::kGrayLoss:
      s += fmt::format(", loss {:g}", f.probability);
      break;
    case FaultConfig::kDegrade:
      s += ", rate " + format_rate(f.rate_bps);
      break;
    case FaultConfig::kPathLoss:
      s += fmt::format(" (host {} -> host {}), loss {:g}", f.src, f.dst, f.probability);
      break;
    case FaultConfig::kBlackholeReboot:
      s += fmt::format(", rebooted at {} for {}", format_duration(f.reboot_at),
                       format_duration(f.duration));
      break;
    default:
      break;
  }
  if (f.until != kNever)
    s += " until " + format_duration(f.until);
  else if (f.kind == FaultConfig::kLinkDown || f.kind == FaultConfig::kBlackhole ||
           f.kind == FaultConfig::kBlackholeSwitch || f.kind == FaultConfig::kGrayLoss ||
           f.kind == FaultConfig::kDegrade || f.kind == FaultConfig::kPathLoss)
    s += " (for the rest of the run)";
  return s;
}

// Host ports : uplinks of a leaf (two-tier fabrics; docs/simulator.md, [topo]).
std::string leaf_oversubscription(const TopologyConfig& t) {
  const uint32_t h = t.hosts_per_leaf ? t.hosts_per_leaf : t.radix / 2;
  const uint32_t u = t.radix > h ? t.radix - h : 0;
  if (h == 0 || u == 0) return "?";
  if (h == u) return "1:1 (non-blocking)";
  return fmt::format("{:.2g}:1 ({} host ports : {} uplinks per leaf)", static_cast<double>(h) / u,
                     h, u);
}

// The overrides a reader must know of to read the header: --set keys other than the seed.
std::vector<std::string> setting_overrides(const Scenario& sc) {
  std::vector<std::string> out;
  for (const std::string& o : sc.overrides)
    if (o.rfind("seed=", 0) != 0) out.push_back(o);
  return out;
}

// An incast's slowest flow against its fair share: all the senders' bytes through the
// receiver's NIC (every plane at line rate) is the least time the last flow can take. The
// per-flow ideal (a flow alone on the fabric) is `senders` times smaller.
double incast_max_vs_fair_share(const Scenario& sc, const TransportResult& r) {
  if (sc.workload.kind != WorkloadConfig::kIncast || r.flows.empty()) return 0;
  double bytes = 0;
  Time first = kNever, last = 0;
  for (const FlowResult& f : r.flows) {
    bytes += static_cast<double>(f.spec.bytes);
    first = std::min(first, f.spec.start);
    if (f.end != kNever) last = std::max(last, f.end);
  }
  const double rate = static_cast<double>(sc.base.topo.link_bps) * sc.base.topo.planes;
  const double fair_s = bytes * 8 / rate;
  if (last <= first || fair_s <= 0) return 0;
  return static_cast<double>(last - first) / kPicosPerSecond / fair_s;
}

std::string num(double v, int prec = 1) {
  if (v == 0) return "0";
  return fmt::format("{:.{}f}", v, prec);
}

void print_table(const Scenario& sc, const std::vector<Ran>& runs) {
  const SimConfig& b = sc.base;
  // With --set overrides the scenario's description may no longer hold ("128 GPUs" after
  // topo.hosts=512): name the overrides instead; the fabric and workload lines are what ran.
  const std::vector<std::string> sets = setting_overrides(sc);
  if (sets.empty())
    fmt::print("\nmrc-sim: {}{}{} (seed {})\n", sc.name, sc.description.empty() ? "" : " - ",
               sc.description, sc.seed);
  else
    fmt::print("\nmrc-sim: {} with --set {} (seed {})\n", sc.name, fmt::join(sets, " --set "),
               sc.seed);
  if (!runs.empty() && runs[0].r.pods > 0)
    fmt::print("fabric:   {} hosts, {}, {} links, {} per link\n", b.topo.hosts, runs[0].r.fabric,
               format_rate(b.topo.link_bps), format_duration(b.topo.link_delay));
  else if (!runs.empty())
    fmt::print(
        "fabric:   {} hosts, {} plane{} x ({} leaves + {} spines), {} links, {} per link, "
        "oversubscription {}\n",
        b.topo.hosts, b.topo.planes, b.topo.planes == 1 ? "" : "s", runs[0].leaves, runs[0].spines,
        format_rate(b.topo.link_bps), format_duration(b.topo.link_delay),
        leaf_oversubscription(b.topo));
  fmt::print("workload: {}", workload_kind_name(sc.workload.kind));
  if (sc.workload.kind == WorkloadConfig::kHtsim)
    fmt::print(" {}", sc.workload.file);
  else if (sc.workload.kind == WorkloadConfig::kFlows)
    fmt::print(", {} listed", sc.workload.flow_list.size());
  else
    fmt::print(", {}", format_size(sc.workload.size));
  if (sc.workload.kind == WorkloadConfig::kSteady)
    fmt::print(" messages, {} in flight per stream, until {}", sc.workload.depth,
               format_duration(sc.workload.until));
  if (sc.workload.algorithm == WorkloadConfig::kRing2d &&
      (sc.workload.kind == WorkloadConfig::kAllReduce ||
       sc.workload.kind == WorkloadConfig::kTraining))
    fmt::print(", two-level ring (rows of {})", sc.workload.row);
  if (!runs.empty()) fmt::print(", {} flows", runs[0].r.summary.count);
  fmt::print("\n");
  for (const FaultConfig& f : sc.faults)
    fmt::print("fault:    {}\n", describe_fault(f));
  // Which runs mark ECN on the last hop (leaf -> host): the paper's MRC fabric does not (2.1),
  // DCQCN needs it.
  std::string on, off;
  for (const Ran& ran : runs)
    (ecn_last_hop_on(ran.r) ? on : off) +=
        (ecn_last_hop_on(ran.r) ? on : off).empty() ? ran.r.name : ", " + ran.r.name;
  fmt::print("switch:   ECN on the last hop (leaf->host){}: {}{}{}\n",
             sc.base.sw.ecn_last_hop == SwitchConfig::EcnLastHop::kAuto ? " (auto)" : "",
             on.empty() ? "" : "on for " + on, !on.empty() && !off.empty() ? "; " : "",
             off.empty() ? "" : "off for " + off);
  std::string qps;
  for (const Ran& ran : runs)
    if (ran.r.config.transport.qps_per_flow != 1)
      qps += fmt::format("{}{} {}", qps.empty() ? "" : ", ", ran.r.name,
                         ran.r.config.transport.qps_per_flow);
  if (!qps.empty()) fmt::print("qps/flow: {} (the others 1)\n", qps);
  fmt::print("\n");

  const char* hdr =
      "{:<14} {:>6} {:>6} {:>10} {:>10} {:>10} {:>9} {:>9} {:>9} {:>7} {:>7} {:>7} {:>6} {:>7} "
      "{:>10}\n";
  fmt::print(fmt::runtime(hdr), "transport", "flows", "done", "FCT p50", "FCT p99", "FCT max",
             "max/ideal", "gput avg", "gput min", "drops", "trims", "retx", "qp_err", "ev_chg",
             "last done");
  fmt::print(fmt::runtime(hdr), "", "", "", "us", "us", "us", "", "Gb/s", "Gb/s", "", "", "", "",
             "", "us");
  for (const Ran& ran : runs) {
    const TransportResult& r = ran.r;
    const FlowSummary& s = r.summary;
    fmt::print(fmt::runtime(hdr), r.name, s.count, s.completed, num(s.fct_p50_us),
               num(s.fct_p99_us), num(s.fct_max_us), num(s.slowdown_max, 2),
               num(s.goodput_mean_gbps), num(s.goodput_min_gbps), r.stats.drops, r.stats.trims,
               r.stats.retransmits, r.stats.qp_errors, r.stats.ev_state_changes,
               num(to_us(r.makespan)));
  }
  bool any_coll = false;
  for (const Ran& ran : runs)
    any_coll = any_coll || !ran.r.collectives.empty() || !ran.r.iterations.empty();
  if (any_coll) {
    fmt::print("\n{:<14} {:>9} {:>12} {:>12} {:>12} {:>12} {:>12} {:>12}\n", "collectives", "done",
               "time p50 us", "time max us", "algbw GB/s", "busbw GB/s", "iterations",
               "iter p50 us");
    for (const Ran& ran : runs) {
      const TransportResult& r = ran.r;
      std::vector<double> t, alg, bus, it;
      for (const auto& c : r.collectives) {
        t.push_back(to_us(c.time()));
        alg.push_back(c.algbw_GBps());
        bus.push_back(c.busbw_GBps());
      }
      uint32_t finished = 0;
      for (const auto& i : r.iterations)
        if (i.finished()) {
          ++finished;
          it.push_back(to_us(i.time()));
        }
      const uint32_t planned =
          sc.workload.kind == WorkloadConfig::kTraining ? sc.workload.iterations : 0;
      auto or_dash = [](const std::vector<double>& v, double x, int prec) {
        return v.empty() ? std::string("-") : num(x, prec);
      };
      fmt::print("{:<14} {:>9} {:>12} {:>12} {:>12} {:>12} {:>12} {:>12}{}\n", r.name,
                 r.collectives.size(), or_dash(t, percentile(t, 50), 1),
                 or_dash(t, percentile(t, 100), 1), or_dash(alg, percentile(alg, 50), 2),
                 or_dash(bus, percentile(bus, 50), 2),
                 planned ? fmt::format("{}/{}", finished, planned) : std::string("-"),
                 or_dash(it, percentile(it, 50), 1),
                 r.job_aborted ? "  JOB ABORTED (AllReduce failed)" : "");
    }
  }
  if (sc.workload.kind == WorkloadConfig::kIncast && !runs.empty()) {
    fmt::print(
        "\nincast: max/ideal above compares with a flow alone on the fabric; against the "
        "fair share (all senders' bytes at the receiver's line rate), last done / fair:");
    for (const Ran& ran : runs)
      fmt::print(" {} {}", ran.r.name, num(incast_max_vs_fair_share(sc, ran.r), 2));
    fmt::print("\n");
  }
  for (const Ran& ran : runs) {
    const FlowSummary& s = ran.r.summary;
    if (s.unfinished > 0)
      fmt::print("note: {}: {} flow(s) unfinished at the run limit ({})\n", ran.r.name,
                 s.unfinished, format_duration(sc.until));
    if (s.failed > 0) fmt::print("note: {}: {} flow(s) failed (QP errors)\n", ran.r.name, s.failed);
    if (!ran.r.workload_error.empty())
      fmt::print("note: {}: workload error: {}\n", ran.r.name, ran.r.workload_error);
  }
}

// ---- progress --------------------------------------------------------------------------------

// The ETA's measure of progress (sim/progress.h): the workload's bytes (RunProgress), or for a
// workload bounded by time its deadline; neither: why there is no ETA.
Time progress_deadline(const Scenario& sc) {
  const WorkloadConfig& w = sc.workload;
  if (w.kind == WorkloadConfig::kSteady) return w.until;
  Time last = 0;
  if (w.kind == WorkloadConfig::kFlows)
    for (const WorkloadConfig::Flow& f : w.flow_list)
      last = std::max(last, f.until);
  return last;
}

std::string no_eta_reason(const Scenario& sc, bool distributed) {
  if (distributed) return "no ETA: a rank counts only its own hosts' bytes";
  switch (sc.workload.kind) {
    case WorkloadConfig::kHtsim:
      return "no ETA: flows started by triggers";
    case WorkloadConfig::kFlows:
      return "no ETA: streams without an end";
    default:
      return "no ETA: the workload's size is not known ahead";
  }
}

// ---- htsim ---------------------------------------------------------------------------------

std::string htsim_base_toml(const std::string& file, uint32_t nodes) {
  uint32_t radix = 4;
  while (static_cast<uint64_t>(radix) * radix / 2 < nodes)
    radix += 2;
  std::string stem = std::filesystem::path(file).stem().string();
  for (char& c : stem)
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_' || c == '.')) c = '_';
  return fmt::format(R"(name = "{}"
description = "htsim connection matrix {}"
[topo]
hosts = {}
planes = 1
radix = {}
link_rate = "100Gbps"
link_delay = "500ns"
[transport]
kinds = ["mrc", "mrc_oblivious", "roce_pfc", "roce"]
routing_convergence = "1ms"
[workload]
kind = "htsim"
file = "{}"
)",
                     stem.empty() ? "htsim" : stem, std::filesystem::path(file).filename().string(),
                     nodes, radix, file);
}

// ---- --ranks-plan ----------------------------------------------------------------------------

// Records the flows a workload adds at its start (the plan's QP count).
class RecordingSink final : public FlowSink {
 public:
  SimResult<FlowId> add_flow(const FlowSpec& spec) override {
    flows.push_back(spec);
    return static_cast<FlowId>(flows.size() - 1);
  }
  std::vector<FlowSpec> flows;
};

// EVs of one QP over all planes, as the simulator gives them (build_paths).
uint32_t paths_per_qp(const SimConfig& c, const FabricShape& s) {
  if (c.transport.kind == TransportKind::kRoce) return 1;
  const uint32_t evs = c.transport.evs_per_plane;
  if (s.fat_tree) {
    const uint32_t n = s.ft_spines > 0 ? s.half * s.half * s.half : s.half * s.half;
    return evs ? std::min(evs, n) : std::min(n, 64u);
  }
  return (evs ? std::min(evs, s.spines) : std::min(s.spines, 64u)) * s.planes;
}

int print_ranks_plan(const Scenario& sc, uint32_t ranks) {
  auto wl = make_workload(sc.workload, sc.base.topo.hosts, sc.seed);
  if (!wl) {
    return tools::fail_setup("mrc-sim", wl.error().message);
  }
  RecordingSink sink;
  if (auto st = (*wl)->start(sink); !st) {
    return tools::fail_setup("mrc-sim", st.error().message);
  }
  fmt::print("mrc-sim: {} - partition plan for {} ranks (blocks layout, docs/simulator.md)\n",
             sc.name, ranks);
  for (const TransportRun& tr : sc.runs) {
    auto shape = fabric_shape(tr.config.topo);
    if (!shape) {
      return tools::fail_setup("mrc-sim", "the simulator rejects this fabric");
    }
    auto plan = plan_partition(tr.config, ranks, sink.flows, paths_per_qp(tr.config, *shape));
    if (!plan) {
      return tools::fail_setup(
          "mrc-sim",
          fmt::format("--ranks-plan {}: the fabric has {} blocks: at most that many ranks", ranks,
                      BlockLayout(*shape).blocks()));
    }
    fmt::print("\n[{}] {} flows at the start, {} paths per QP\n{}", tr.name, sink.flows.size(),
               paths_per_qp(tr.config, *shape), format_plan(*plan));
  }
  return 0;
}

// The earliest start of the flows a workload adds at its start (kNever: none).
class EarliestStartSink final : public FlowSink {
 public:
  SimResult<FlowId> add_flow(const FlowSpec& spec) override {
    earliest = std::min(earliest, spec.start);
    return n++;
  }
  Time earliest = kNever;
  FlowId n = 0;
};

// --ranks-plan N --measure-rank K: builds and starts rank K of an N-rank run in this process
// alone (LoneRank: the real partitioned construction and run, without the other ranks) and
// prints its measured memory next to the plan's prediction. The run stops before the first
// packet from another rank could arrive (the first flow start plus two link delays): what
// the rank holds then (fabric share, engines, QPs, flow records, the first microsecond's
// packets) is measured; what is in flight later is the model's term.
int measure_rank(Scenario sc, uint32_t ranks, uint32_t k) {
  const auto fail = [](const std::string& m) { return tools::fail_setup("mrc-sim", m); };
  if (sc.runs.size() != 1)
    return fail(fmt::format(
        "--measure-rank measures one transport, the scenario runs {}: choose one with --set "
        "transport.kinds=[mrc]",
        sc.runs.size()));
  auto shape = fabric_shape(sc.base.topo);
  if (!shape) return fail(shape.error().message);
  const uint32_t blocks = BlockLayout(*shape).blocks();
  if (ranks > blocks)
    return fail(fmt::format("--ranks-plan {}: the fabric has {} blocks: at most that many ranks",
                            ranks, blocks));
  if (k >= ranks)
    return fail(fmt::format("--measure-rank {}: the ranks of --ranks-plan {} are 0 to {}", k, ranks,
                            ranks - 1));
  if (const std::string why = blocks_layout_limit(sc); !why.empty())
    return fail("--measure-rank: the scenario cannot run in the blocks layout: " + why);
  const Time lookahead = sc.base.topo.link_delay;
  EarliestStartSink first;
  {
    auto wl = make_workload(sc.workload, sc.base.topo.hosts, sc.seed);
    if (!wl) return fail(wl.error().message);
    if (auto st = (*wl)->start(first); !st) return fail(st.error().message);
  }
  if (first.earliest == kNever) return fail("--measure-rank: the workload starts no flow");
  const Time stop = first.earliest + 2 * lookahead - 1;
  sc.until = std::min(sc.until, stop);

  LoneRank lone(k, ranks);
  RunHooks hooks;
  hooks.block_partitions = true;
  hooks.exchange = &lone;
  uint64_t rss = 0;
  SimStats st;
  size_t flow_records = 0;
  hooks.after_run = [&](const Simulation& sim) {
    rss = peak_rss_bytes();
    st = sim.stats();
    flow_records = sim.flows().size();
  };
  const auto t0 = Clock::now();
  if (auto r = run_transport(sc, sc.runs[0], hooks); !r) return fail(r.error().message);
  const double wall = std::chrono::duration<double>(Clock::now() - t0).count();

  // The prediction (after the measurement: the plan's own tables are not measured).
  RecordingSink sink;
  {
    auto wl = make_workload(sc.workload, sc.base.topo.hosts, sc.seed);
    if (!wl) return fail(wl.error().message);
    if (auto s = (*wl)->start(sink); !s) return fail(s.error().message);
  }
  const TransportRun& tr = sc.runs[0];
  const MemoryModel model;
  const uint32_t paths = paths_per_qp(tr.config, *shape);
  auto plan = plan_partition(tr.config, ranks, sink.flows, paths, model);
  if (!plan) return fail(plan.error().message);
  const RankPlan& p = plan->per_rank[k];
  const uint64_t in_flight =
      static_cast<uint64_t>(static_cast<double>(p.sent_bytes) * model.in_flight_share);
  const auto mb = [](uint64_t b) { return static_cast<double>(b) / (1 << 20); };
  fmt::print(
      "mrc-sim: {} [{}] - rank {} of {} measured alone (blocks layout, docs/simulator.md)\n"
      "built and started: {} hosts, {} QPs (plan {}), {} flow records (plan {}), {} paths per "
      "QP, {:.0f} B per QP (qp_memory)\n"
      "simulated to {:.3f} us ({:.2f} M events, {:.1f} s wall), {:.1f} MB sent to the absent "
      "ranks and dropped\n"
      "measured peak RSS: {:.0f} MB (built and started; the whole run's peak adds the "
      "packets in flight later)\n"
      "model (--ranks-plan) for the whole run: {:.0f} MB, of which {:.0f} MB in flight and "
      "{:.0f} MB base (program, Open MPI)\n",
      sc.name, tr.name, k, ranks, p.hosts, st.qps, p.qps, flow_records, p.flows, paths,
      st.qps ? static_cast<double>(st.qp_bytes) / static_cast<double>(st.qps) : 0.0,
      static_cast<double>(stop) / kPicosPerMicro, static_cast<double>(st.events) / 1e6, wall,
      mb(lone.cost().bytes_sent), mb(rss), mb(p.predicted_bytes), mb(in_flight), mb(model.base));
  if (k == 0 && ranks > 1)
    fmt::print(
        "not measured: rank 0 gathers every flow's result at the end ({} flows x {} B = {:.0f} "
        "MB, held twice while it is unpacked)\n",
        sink.flows.size(), sizeof(FlowResult), mb(sink.flows.size() * sizeof(FlowResult)));
  return 0;
}

}  // namespace

namespace {

// The command line.
struct SimArgs {
  std::string scenario_path, out_dir, htsim_path, pcap_hosts_arg, qlog_hosts_arg;
  std::vector<std::string> sets;
  uint64_t seed = 0;
  CLI::Option* seed_opt = nullptr;
  bool quiet = false, print_default = false, print_schema_markdown = false;
  uint32_t ranks_plan = 0;
  CLI::Option* measure_rank_opt = nullptr;
  uint32_t measure_rank = 0;
  std::string partition = "auto";
};

void add_options(CLI::App& app, SimArgs& a) {
  app.add_option("scenario", a.scenario_path, "Scenario file (TOML); default: the embedded one")
      ->check(CLI::ExistingFile);
  app.add_option("--set", a.sets,
                 "Override a key by dotted path: --set topo.hosts=256 (repeatable)")
      ->allow_extra_args(false)  // one value per --set: a scenario file may follow
      ->take_all();
  a.seed_opt =
      app.add_option("--seed", a.seed, "Random seed, 0 to 2^63-1 (overrides the scenario's)")
          ->check(CLI::Range(int64_t{0}, INT64_MAX));
  app.add_option("--out", a.out_dir, "Output directory (default out/<scenario name>)");
  app.add_option("--htsim", a.htsim_path, "Run an htsim connection matrix (.cm)")
      ->check(CLI::ExistingFile);
  app.add_option("--pcap-hosts", a.pcap_hosts_arg,
                 "Comma-separated hosts whose packets go to <out>/<transport>.pcap");
  app.add_option("--qlog-hosts", a.qlog_hosts_arg,
                 "Comma-separated hosts whose engines write their event log (every packet "
                 "sent, received and lost, timeouts, window and path changes; docs/engine.md, "
                 "\"Event log\") to <out>/<transport>.qlog.jsonl");
  app.add_flag("--quiet", a.quiet, "No progress and no table (files only)");
  app.add_flag("--print-default", a.print_default,
               "Print the embedded default scenario with every key, its value and its doc as "
               "comments, and exit");
  app.add_flag("--print-schema-markdown", a.print_schema_markdown,
               "Print the key tables of docs/simulator.md (generated from the scenario schema) "
               "and exit");
  app.add_option("--ranks-plan", a.ranks_plan,
                 "Print how N ranks would share the fabric (blocks, links between ranks, "
                 "predicted memory per rank) and exit")
      ->check(CLI::Range(1u, kMaxBlocks));
  a.measure_rank_opt =
      app.add_option("--measure-rank", a.measure_rank,
                     "With --ranks-plan N: build and start rank K of the N-rank run in this "
                     "process alone and print its measured peak RSS next to the prediction")
          ->needs("--ranks-plan");
  app.add_option("--partition", a.partition,
                 "Partition layout: blocks (the layout of a run under mpirun: the same results "
                 "on any number of ranks), planes (one partition per plane), or auto (default: "
                 "blocks, unless the scenario needs planes)")
      ->check(CLI::IsMember({"auto", "blocks", "planes"}));
}

// The scenario to run: a file, the embedded default, or an htsim matrix (on the default
// fabric, or as the workload of a scenario file), with the --set overrides.
SimResult<Scenario> load_requested_scenario(const SimArgs& a) {
  if (a.htsim_path.empty())
    return a.scenario_path.empty() ? default_scenario(a.sets)
                                   : load_scenario(a.scenario_path, a.sets);
  auto m = load_htsim_cm(a.htsim_path);
  if (!m) return std::unexpected(m.error());
  const std::string abs = std::filesystem::absolute(a.htsim_path).string();
  if (a.scenario_path.empty())
    return parse_scenario(htsim_base_toml(abs, m->nodes), "<htsim>", a.sets);
  // The scenario's fabric and transports, the matrix as the workload.
  SimResult<Scenario> parsed = load_scenario(a.scenario_path, a.sets);
  if (parsed) {
    parsed->workload = WorkloadConfig{};
    parsed->workload.kind = WorkloadConfig::kHtsim;
    parsed->workload.file = abs;
    if (parsed->base.topo.hosts < m->nodes)
      return sim_fail(fmt::format("{} has Nodes {} but the scenario's fabric has {} hosts",
                                  a.htsim_path, m->nodes, parsed->base.topo.hosts));
  }
  return parsed;
}

// A run over several ranks needs a block per rank and a lookahead.
SimStatus check_ranks(const Scenario& sc, uint32_t ranks) {
  if (ranks <= 1) return {};
  auto shape = fabric_shape(sc.base.topo);
  if (shape && BlockLayout(*shape).blocks() < ranks)
    return sim_fail(
        fmt::format("{} ranks, but this fabric has {} blocks (one per leaf, or per pod "
                    "of a fat tree, up to {}): run at most {} ranks",
                    ranks, BlockLayout(*shape).blocks(), kMaxBlocks, BlockLayout(*shape).blocks()));
  if (sc.base.topo.link_delay == 0)
    return sim_fail("a run over several ranks needs topo.link_delay > 0 (the lookahead)");
  return {};
}

// --pcap-hosts, --qlog-hosts (`flag`): host numbers below `hosts`, separated by commas.
SimResult<std::vector<HostId>> parse_host_list(const char* flag, const std::string& arg,
                                               uint32_t hosts) {
  std::vector<HostId> out;
  std::string_view s = arg;
  while (!s.empty()) {
    const size_t c = s.find(',');
    const std::string item(s.substr(0, c));
    try {
      size_t used = 0;
      const unsigned long v = std::stoul(item, &used);
      if (used != item.size() || v >= hosts) throw std::out_of_range(item);
      out.push_back(static_cast<HostId>(v));
    } catch (const std::exception&) {
      return sim_fail(
          fmt::format("{}: expected host numbers 0..{} separated by "
                      "commas, got '{}'",
                      flag, hosts - 1, item));
    }
    if (c == std::string_view::npos) break;
    s.remove_prefix(c + 1);
  }
  return out;
}

// One transport's progress line on stderr: in place on a terminal, every 2 s otherwise.
class ProgressLine {
 public:
  ProgressLine(const Scenario& sc, const RankExchange* exchange, Time deadline, bool tty)
      : sc_(sc), exchange_(exchange), deadline_(deadline), tty_(tty) {}
  void operator()(const std::string& name, const RunProgress& p) {
    const auto wall = Clock::now();
    const double secs = std::chrono::duration<double>(wall - start_).count();
    // The workload's size is known once it has started (the first report).
    if (!eta_)
      eta_.emplace(exchange_ ? 0 : p.bytes_total, exchange_ ? 0 : deadline_,
                   no_eta_reason(sc_, exchange_ != nullptr));
    const EtaEstimate e = eta_->update(secs, p.now, p.bytes_placed);
    if (!tty_ && wall - last_ < std::chrono::seconds(2)) return;
    last_ = wall;
    const std::string progress =
        (e.fraction > 0 ? fmt::format("{:.0f}% | ", 100 * e.fraction) : std::string()) +
        (e.seconds ? "ETA " + format_eta(*e.seconds) : e.reason);
    fmt::print(stderr,
               "{}[{}] sim {:.3f} ms | {:.1f} M events | {:.2f} M ev/s | flows {}/{} | "
               "{}   {}",
               tty_ ? "\r" : "", name, static_cast<double>(p.now) / kPicosPerMilli, p.events / 1e6,
               secs > 0 ? p.events / secs / 1e6 : 0.0, p.flows_completed, p.flows_added, progress,
               tty_ ? "" : "\n");
  }

 private:
  const Scenario& sc_;
  const RankExchange* exchange_;
  Time deadline_;
  bool tty_;
  Clock::time_point start_ = Clock::now();
  Clock::time_point last_ = start_;
  std::optional<EtaEstimator> eta_;
};

// Every transport of the scenario in turn, into `runs`. The status: 0, or 1 when a workload
// reported an error; an error when a run failed.
SimResult<int> run_transports(const Scenario& sc, const SimArgs& a, RankExchange* exchange,
                              uint32_t rank, const std::vector<HostId>& pcap_hosts,
                              const std::vector<HostId>& qlog_hosts, std::vector<Ran>& runs) {
  const bool tty = isatty(STDERR_FILENO);
  const Time deadline = progress_deadline(sc);
  int status = 0;
  for (const TransportRun& tr : sc.runs) {
    const auto start = Clock::now();
    ProgressLine line(sc, exchange, deadline, tty);
    RunHooks hooks;
    if (!a.quiet)
      hooks.progress = [&line](const std::string& name, const RunProgress& p) { line(name, p); };
    hooks.block_partitions = a.partition == "blocks";
    hooks.exchange = exchange;
    if (!pcap_hosts.empty()) {
      hooks.pcap_path = (std::filesystem::path(a.out_dir) / (tr.name + ".pcap")).string();
      hooks.pcap_hosts = pcap_hosts;
    }
    if (!qlog_hosts.empty()) {
      hooks.qlog_path = (std::filesystem::path(a.out_dir) / (tr.name + ".qlog.jsonl")).string();
      hooks.qlog_hosts = qlog_hosts;
    }
    auto r = run_transport(sc, tr, hooks);
    if (!a.quiet && tty && rank == 0) fmt::print(stderr, "\r{:<100}\r", "");
    if (!r) return std::unexpected(r.error());
    Ran ran;
    ran.r = std::move(*r);
    ran.wall_seconds = std::chrono::duration<double>(Clock::now() - start).count();
    ran.leaves = ran.r.leaves;
    ran.spines = ran.r.spines;
    if (!ran.r.workload_error.empty()) status = 1;
    if (!a.quiet && rank == 0)
      fmt::print(stderr, "[{}] done: {:.3f} ms simulated, {:.1f} M events in {:.2f} s\n", tr.name,
                 static_cast<double>(ran.r.sim_time) / kPicosPerMilli, ran.r.stats.events / 1e6,
                 ran.wall_seconds);
    runs.push_back(std::move(ran));
  }
  return status;
}

// summary.json's "run": wall time, events, memory of every rank, the partition layout, and
// under mpirun what the end-of-window exchange cost each rank. Every rank takes part.
json run_json(const std::vector<Ran>& runs, double wall, uint64_t events,
              const std::string& partition, RankExchange* exchange, uint32_t rank, uint32_t ranks) {
  json per = json::object();
  for (const Ran& r : runs)
    per[r.r.name] = r.wall_seconds;
  std::vector<uint64_t> rss(ranks, 0);
  rss[rank] = peak_rss_bytes();
  if (exchange) exchange->all_sum(rss);
  const uint64_t rss_max = *std::max_element(rss.begin(), rss.end());
  std::vector<uint64_t> cpu(ranks, 0);
  cpu[rank] = cpu_micros();
  if (exchange) exchange->all_sum(cpu);
  json cpu_seconds = json::array();
  for (uint64_t us : cpu)
    cpu_seconds.push_back(static_cast<double>(us) / 1e6);
  json run = {{"wall_seconds", wall},
              {"events_per_second", wall > 0 ? static_cast<double>(events) / wall : 0.0},
              {"peak_rss_bytes", rss_max},
              {"huge_page_bytes", huge_page_bytes()},
              {"wall_seconds_per_transport", per},
              {"partition", partition},
              {"ranks", ranks},
              {"peak_rss_bytes_per_rank", rss},
              {"cpu_seconds_per_rank", cpu_seconds}};
  if (exchange) {
    const RankExchange::Cost c = exchange->cost();
    std::vector<uint64_t> bytes(ranks, 0), wall_ns(ranks, 0), wait_ns(ranks, 0);
    bytes[rank] = c.bytes_sent;
    wall_ns[rank] = c.wall_ns;
    wait_ns[rank] = c.wait_ns;
    exchange->all_sum(bytes);
    exchange->all_sum(wall_ns);
    exchange->all_sum(wait_ns);
    json secs = json::array(), waits = json::array();
    for (uint32_t r = 0; r < ranks; ++r) {
      secs.push_back(static_cast<double>(wall_ns[r]) / 1e9);
      waits.push_back(static_cast<double>(wait_ns[r]) / 1e9);
    }
    // seconds_per_rank: the whole exchange; wait_seconds_per_rank: the part of it spent
    // waiting for the other ranks to end the window (imbalance, not transfer).
    run["exchange"] = {{"windows", c.calls},
                       {"bytes_sent_per_rank", bytes},
                       {"seconds_per_rank", secs},
                       {"wait_seconds_per_rank", waits}};
    // How evenly the windows split the events (Simulation::WindowBalance), over the
    // transports: 1.0 = every window even; the speedup over serial is at most ranks / it.
    std::vector<uint64_t> per_rank(ranks, 0);
    uint64_t busiest = 0, total = 0;
    for (const Ran& r : runs) {
      const Simulation::WindowBalance& b = r.r.balance;
      for (size_t i = 0; i < b.events_per_rank.size() && i < per_rank.size(); ++i)
        per_rank[i] += b.events_per_rank[i];
      busiest += b.busiest_sum;
      total += b.total_sum;
    }
    run["exchange"]["events_per_rank"] = per_rank;
    run["exchange"]["window_imbalance"] =
        total > 0 ? static_cast<double>(busiest) * ranks / static_cast<double>(total) : 1.0;
  }
  return run;
}

// summary.json without its "run" part.
json summary_json(const Scenario& sc, const std::vector<Ran>& runs, uint64_t& events) {
  json j;
  j["schema"] = 1;
  j["version"] = version();
  j["scenario"] = {{"name", sc.name},
                   {"description", sc.description},
                   {"source", sc.source},
                   {"overrides", sc.overrides}};
  j["seed"] = sc.seed;
  j["config"] = echo_config(sc);
  Time sim_time = 0;
  events = 0;
  for (const Ran& r : runs) {
    sim_time = std::max(sim_time, r.r.sim_time);
    events += r.r.stats.events;
  }
  j["sim_time_ps"] = sim_time;
  j["events"] = events;
  json tj = json::array();
  for (const Ran& r : runs) {
    tj.push_back(transport_json(r));
    if (sc.workload.kind == WorkloadConfig::kIncast)
      tj.back()["slowdown"]["last_done_vs_fair_share"] = incast_max_vs_fair_share(sc, r.r);
  }
  j["transports"] = tj;
  return j;
}

// The run directory: summary.json, flows.csv, links.csv, ev_events.jsonl (and flows_ts.csv).
SimStatus write_run_directory(const std::string& out_dir, const json& summary, const Scenario& sc,
                              const std::vector<Ran>& runs) {
  const std::filesystem::path dir(out_dir);
  try {
    auto f = fmt::output_file((dir / "summary.json").string());
    f.print("{}\n", summary.dump(2));
    f.close();
    write_flows((dir / "flows.csv").string(), runs);
    write_links((dir / "links.csv").string(), runs);
    write_ev_events((dir / "ev_events.jsonl").string(), runs);
    if (sc.base.throughput_interval > 0)
      write_flows_ts((dir / "flows_ts.csv").string(), runs, sc.base.throughput_interval);
  } catch (const std::exception& e) {
    return sim_fail(Error::kIoError,
                    fmt::format("cannot write the results to {}: {}", out_dir, e.what()));
  }
  return {};
}

// A run that did not start because of its input (a fault on a link or switch the fabric does
// not have, a workload or fabric the simulator refuses: kInvalidArgument or kTooBig, the
// simulator's codes for bad input, sim_error.h) is a bad argument like a bad scenario file:
// 2. Anything else (a capture file that cannot be written) is a failed run: 1.
int run_failure_status(const SimError& e) {
  return e.code == Error::kInvalidArgument || e.code == Error::kTooBig
             ? mrc::tools::kExitBadArguments
             : 1;
}

}  // namespace

int main(int argc, char** argv) {
  reexec_with_huge_pages(argv);
  CLI::App app{
      "mrc-sim: MRC against RoCEv2/ECMP on a multi-plane fabric, packet by packet.\n"
      "Without a scenario it runs the embedded default (see --print-default); docs/simulator.md "
      "describes scenarios, outputs and the table.",
      "mrc-sim"};
  mrc::tools::set_exit_codes(app,
                             "0 every transport ran, 1 a run failed (a workload error, results not "
                             "written); a bad scenario or fault target counts as a bad argument");
  SimArgs a;
  add_options(app, a);
  if (const int rc = mrc::tools::parse(app, argc, argv); rc >= 0) return rc;

  // Under mpirun (an MPI build): one process per rank, the blocks layout. Every rank parses
  // the same arguments and runs the same calls; rank 0 prints and writes the run directory.
  std::unique_ptr<RankExchange> exchange;
#ifdef MRC_HAVE_MPI
  if (MpiExchange::launched_by_mpirun()) exchange = std::make_unique<MpiExchange>(&argc, &argv);
#endif
  const uint32_t rank = exchange ? exchange->rank() : 0;
  const uint32_t ranks = exchange ? exchange->ranks() : 1;
  // A failure under mpirun stops every rank with this rank's message (never a hang).
  const auto failed = [&](const std::string& message, int status) {
    if (exchange) exchange->abort(message, status);
    fmt::print(stderr, "mrc-sim: {}\n", message);
    return status;
  };
  if (exchange) a.partition = "blocks";

  if (a.print_default) {
    if (rank == 0) fmt::print("{}", default_scenario_toml_annotated());
    return 0;
  }
  if (a.print_schema_markdown) {
    if (rank == 0) fmt::print("{}", schema_markdown_all());
    return 0;
  }
  if (a.seed_opt->count() > 0) a.sets.push_back("seed=" + std::to_string(a.seed));
  SimResult<Scenario> parsed = load_requested_scenario(a);
  if (!parsed) return failed(parsed.error().message, 2);
  Scenario& sc = *parsed;
  if (a.measure_rank_opt->count() > 0) {
    if (exchange) return failed("--measure-rank: a rank measured alone runs without mpirun", 2);
    return measure_rank(std::move(sc), a.ranks_plan, a.measure_rank);
  }
  if (a.ranks_plan > 0) return rank == 0 ? print_ranks_plan(sc, a.ranks_plan) : 0;
  if (auto st = check_ranks(sc, ranks); !st) return failed(st.error().message, 2);
  std::vector<HostId> pcap_hosts, qlog_hosts;
  if (!a.pcap_hosts_arg.empty()) {
    auto hosts = parse_host_list("--pcap-hosts", a.pcap_hosts_arg, sc.base.topo.hosts);
    if (!hosts) return failed(hosts.error().message, 2);
    pcap_hosts = std::move(*hosts);
  }
  if (!a.qlog_hosts_arg.empty()) {
    auto hosts = parse_host_list("--qlog-hosts", a.qlog_hosts_arg, sc.base.topo.hosts);
    if (!hosts) return failed(hosts.error().message, 2);
    qlog_hosts = std::move(*hosts);
  }
  if (exchange && !pcap_hosts.empty())
    return failed(
        "--pcap-hosts: not available under mpirun (each rank sees only its own hosts' "
        "packets); the serial run gives the same results: take the capture from it",
        2);
  if (exchange && !qlog_hosts.empty())
    return failed(
        "--qlog-hosts: not available under mpirun (each rank holds only its own hosts' "
        "engines); the serial run gives the same results: take the log from it",
        2);
  // The blocks layout unless the scenario needs a feature it lacks (then the per-plane one,
  // and mpirun and --partition blocks refuse the scenario with the reason).
  if (a.partition == "auto") a.partition = blocks_layout_limit(sc).empty() ? "blocks" : "planes";
  if (a.out_dir.empty()) a.out_dir = "out/" + sc.name;
  if (rank == 0) {
    std::error_code ec;
    std::filesystem::create_directories(a.out_dir, ec);
    if (ec) return failed(fmt::format("cannot create {}: {}", a.out_dir, ec.message()), 2);
  }

  const auto t0 = Clock::now();
  std::vector<Ran> runs;
  const SimResult<int> status =
      run_transports(sc, a, exchange.get(), rank, pcap_hosts, qlog_hosts, runs);
  if (!status) return failed(status.error().message, run_failure_status(status.error()));
  const double wall = std::chrono::duration<double>(Clock::now() - t0).count();
  uint64_t events = 0;
  json j = summary_json(sc, runs, events);
  j["run"] = run_json(runs, wall, events, a.partition, exchange.get(), rank, ranks);
  if (rank != 0) return *status;  // rank 0 writes the run directory
  if (auto st = write_run_directory(a.out_dir, j, sc, runs); !st)
    return failed(st.error().message, 1);
  if (!a.quiet) {
    print_table(sc, runs);
    fmt::print("\n{:.1f} s wall, {:.1f} M events ({:.2f} M/s), peak RSS {} MB -> {}/\n", wall,
               events / 1e6, wall > 0 ? events / wall / 1e6 : 0.0, peak_rss_bytes() >> 20,
               a.out_dir);
  }
  return *status;
}
