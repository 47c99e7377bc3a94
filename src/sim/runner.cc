#include "sim/runner.h"

#include <algorithm>
#include <cmath>
#include <set>

namespace mrc::sim {

namespace {

SimResult<std::vector<HostId>> collective_group(const WorkloadConfig& w, uint32_t hosts) {
  const std::string kind = workload_kind_name(w.kind);
  if (!w.group.empty()) {
    std::set<HostId> seen;
    for (HostId h : w.group) {
      if (h >= hosts)
        return sim_fail("workload." + std::string("group") + ": host " + std::to_string(h) +
                        " out of range (the fabric has " + std::to_string(hosts) + " hosts)");
      if (!seen.insert(h).second)
        return sim_fail("workload.group: host " + std::to_string(h) + " listed twice");
    }
    return w.group;
  }
  if (w.ranks > hosts)
    return sim_fail("workload.ranks: " + std::to_string(w.ranks) + " ranks but the fabric has " +
                    std::to_string(hosts) + " hosts");
  return all_hosts(w.ranks == 0 ? hosts : w.ranks);
}

}  // namespace

SimResult<std::unique_ptr<Workload>> make_workload(const WorkloadConfig& w, uint32_t hosts,
                                                   uint64_t seed) {
  using K = WorkloadConfig;
  const std::vector<HostId> everyone = all_hosts(hosts);
  auto flows_of = [](std::string name,
                     SimResult<std::vector<FlowSpec>> f) -> SimResult<std::unique_ptr<Workload>> {
    if (!f) return sim_fail("workload: ", f.error());
    return std::make_unique<StaticFlows>(std::move(name), std::move(*f));
  };
  switch (w.kind) {
    case K::kPermutation:
      return flows_of("permutation", permutation_flows(everyone, w.size, w.start, seed));
    case K::kUniform:
      return flows_of("uniform", uniform_random_flows(everyone, w.flows ? w.flows : hosts, w.size,
                                                      w.start, w.spread, seed));
    case K::kIncast:
      if (w.dst >= hosts)
        return sim_fail("workload.dst: host " + std::to_string(w.dst) +
                        " out of range (the fabric has " + std::to_string(hosts) + " hosts)");
      return flows_of("incast", incast_flows(everyone, w.dst, w.senders ? w.senders : hosts - 1,
                                             w.size, w.start));
    case K::kAllToAll:
    case K::kAllReduce:
    case K::kTraining: {
      auto g = collective_group(w, hosts);
      if (!g) return std::unexpected(g.error());
      if (g->size() < 2) return sim_fail("workload: a collective needs at least 2 ranks");
      if (w.kind == K::kAllToAll) return std::make_unique<AllToAll>(*g, w.size, w.start);
      const uint32_t row = w.algorithm == K::kRing2d ? w.row : 0;
      if (row != 0 && g->size() % row != 0)
        return sim_fail("workload.row: " + std::to_string(row) +
                        " ranks per row do not divide the " + std::to_string(g->size()) +
                        " ranks of the group");
      if (w.kind == K::kAllReduce) return std::make_unique<RingAllReduce>(*g, w.size, w.start, row);
      return std::make_unique<TrainingLoop>(*g, w.size, w.compute, w.iterations, w.start, row);
    }
    case K::kSteady: {
      auto g = collective_group(w, hosts);
      if (!g) return std::unexpected(g.error());
      if (g->size() < 2) return sim_fail("workload: steady streams need at least 2 hosts");
      auto streams = steady_permutation(*g, w.size, w.start, w.until, w.depth, seed);
      if (!streams) return sim_fail("workload: ", streams.error());
      return std::make_unique<SteadyStreams>("steady", std::move(*streams));
    }
    case K::kFlows: {
      // Pinned path sets are numbered 1, 2, ... in file order (run_transport registers them
      // in the same order).
      std::vector<SteadyStreams::Stream> streams;
      uint16_t path_set = 0;
      for (size_t i = 0; i < w.flow_list.size(); ++i) {
        const WorkloadConfig::Flow& f = w.flow_list[i];
        for (HostId h : {f.src, f.dst})
          if (h >= hosts)
            return sim_fail("workload.flow[" + std::to_string(i) + "]: host " + std::to_string(h) +
                            " out of range (the fabric has " + std::to_string(hosts) + " hosts)");
        const uint16_t set = f.paths.empty() ? 0 : ++path_set;
        streams.push_back(
            {f.src, f.dst, f.size, f.start, f.until, f.until > f.start ? w.depth : 1, set});
      }
      return std::make_unique<SteadyStreams>("flows", std::move(streams));
    }
    case K::kHtsim: {
      auto m = load_htsim_cm(w.file);
      if (!m) return std::unexpected(m.error());
      if (m->nodes > hosts)
        return sim_fail(w.file + ": 'Nodes " + std::to_string(m->nodes) + "' but the fabric has " +
                        std::to_string(hosts) + " hosts (set topo.hosts)");
      return std::make_unique<HtsimWorkload>(std::move(*m));
    }
  }
  return sim_fail("workload: unknown kind");
}

SimStatus apply_faults(Simulation& sim, const Scenario& sc) {
  for (const FaultConfig& f : sc.faults) {
    const std::string where = sc.source + ":" + std::to_string(f.line) + ": fault '" +
                              fault_kind_name(f.kind) + "' on " + f.target + ": ";
    const bool on_switch = f.kind == FaultConfig::kSwitchReboot ||
                           f.kind == FaultConfig::kBlackholeSwitch ||
                           f.kind == FaultConfig::kBlackholeReboot;
    if (f.kind == FaultConfig::kPathLoss) {
      if (sim.num_pods() > 0)
        return sim_fail(where +
                        "path_loss names a two-tier Clos path (a plane's spine); the "
                        "fabric is a fat tree");
      if (auto spine =
              sim.check_switch(SwitchRef{SwitchRef::kSpine, f.path.plane, f.path.spine, 0});
          !spine)
        return sim_fail(where, spine.error());
      for (HostId h : {f.src, f.dst})
        if (h >= sim.num_hosts())
          return sim_fail(where + "host " + std::to_string(h) + " does not exist (" +
                          std::to_string(sim.num_hosts()) + " hosts)");
      sim.path_loss(f.src, f.dst, f.path, f.probability, f.at, f.until);
      continue;
    }
    if (on_switch) {
      if (auto sw = sim.check_switch(f.sw); !sw) return sim_fail(where, sw.error());
    } else {
      for (const LinkRef& l : f.links)
        if (auto link = sim.check_link(l); !link)
          return sim_fail(where + (f.links.size() > 1 ? link_name(l) + ": " : ""), link.error());
    }
    if (!on_switch && f.links.size() != 1) {
      // Several links, the same fault on each at the same times (a transceiver or line card
      // taking its links down together).
      Scenario one;
      FaultConfig g = f;
      for (const LinkRef& l : f.links) {
        g.link = l;
        g.links = {l};
        one.faults = {g};
        one.source = sc.source;
        if (auto st = apply_faults(sim, one); !st) return st;
      }
      continue;
    }
    switch (f.kind) {
      case FaultConfig::kLinkDown:
        sim.link_down(f.link, f.at, f.nic_detect);
        break;
      case FaultConfig::kLinkUp:
        sim.link_up(f.link, f.at, f.nic_detect);
        break;
      case FaultConfig::kSwitchReboot:
        sim.switch_reboot(f.sw, f.at, f.duration);
        break;
      case FaultConfig::kBlackhole:
        sim.blackhole(f.link, f.at, f.until);
        break;
      case FaultConfig::kBlackholeSwitch:
        sim.blackhole_switch(f.sw, f.at, f.until);
        break;
      case FaultConfig::kGrayLoss:
        sim.gray_loss(f.link, f.probability, f.at, f.until);
        break;
      case FaultConfig::kDegrade:
        sim.degrade(f.link, f.rate_bps, f.at, f.until);
        break;
      case FaultConfig::kFlap:
        sim.flap(f.link, f.at, f.period, f.count, f.nic_detect);
        break;
      case FaultConfig::kBlackholeReboot:
        // The reboot's link-down events are scheduled first, so at reboot_at the links are
        // down before the blackhole lifts (same time, earlier sequence).
        sim.switch_reboot(f.sw, f.reboot_at, f.duration);
        sim.blackhole_switch(f.sw, f.at, f.reboot_at);
        break;
      case FaultConfig::kPathLoss:
        break;  // above
    }
  }
  return {};
}

SimStatus apply_htsim_failures(Simulation& sim, const HtsimMatrix& m, const std::string& file) {
  if (!m.failures.empty() && sim.num_pods() > 0)
    return sim_fail(file +
                    ": failure lines are mapped onto two-tier fabrics only; on a fat "
                    "tree use [[fault]] tables (pod1/leaf0-agg2, pod1/agg2-core9, core9)");
  for (const HtsimFailure& f : m.failures) {
    auto fault = htsim_fault(f, sim.num_leaves(), sim.num_spines(), sim.config().topo.planes, file);
    if (!fault) return std::unexpected(fault.error());
    if (fault->whole_switch) {
      // Down for good: every link of the switch.
      sim.switch_reboot(fault->sw, fault->at, kNever - fault->at);
    } else {
      sim.link_down(fault->link, fault->at);
    }
  }
  return {};
}

double percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const double rank = std::ceil(p / 100.0 * static_cast<double>(v.size()));
  const size_t i = rank < 1 ? 0 : std::min(v.size() - 1, static_cast<size_t>(rank) - 1);
  return v[i];
}

FlowSummary summarize_flows(const std::vector<FlowResult>& flows) {
  FlowSummary s;
  s.count = flows.size();
  std::vector<double> fct, slow, good;
  for (const FlowResult& f : flows) {
    if (f.end == kNever) {
      ++s.unfinished;
      continue;
    }
    if (!f.ok) {
      ++s.failed;
      continue;
    }
    ++s.completed;
    s.bytes += f.spec.bytes;
    const double us = static_cast<double>(f.fct) / kPicosPerMicro;
    fct.push_back(us);
    s.ideal_max_us = std::max(s.ideal_max_us, static_cast<double>(f.ideal_fct) / kPicosPerMicro);
    if (f.ideal_fct > 0)
      slow.push_back(static_cast<double>(f.fct) / static_cast<double>(f.ideal_fct));
    if (f.fct > 0)
      good.push_back(8.0 * static_cast<double>(f.spec.bytes) /
                     (static_cast<double>(f.fct) / kPicosPerSecond) / 1e9);
  }
  s.fct_p50_us = percentile(fct, 50);
  s.fct_p99_us = percentile(fct, 99);
  s.fct_max_us = percentile(fct, 100);
  s.slowdown_p50 = percentile(slow, 50);
  s.slowdown_p99 = percentile(slow, 99);
  s.slowdown_max = percentile(slow, 100);
  if (!good.empty()) {
    double sum = 0;
    for (double g : good)
      sum += g;
    s.goodput_mean_gbps = sum / static_cast<double>(good.size());
    s.goodput_min_gbps = *std::min_element(good.begin(), good.end());
  }
  return s;
}

std::string blocks_layout_limit(const Scenario& sc) {
  if (sc.base.topo.link_delay == 0)
    return "topo.link_delay is 0: the blocks layout needs a link delay (its lookahead)";
  return {};
}

SimResult<TransportResult> run_transport(const Scenario& sc, const TransportRun& run,
                                         const RunHooks& hooks) {
  SimConfig config = run.config;
  config.block_partitions = config.block_partitions || hooks.block_partitions;
  if (config.block_partitions || hooks.exchange != nullptr) {
    if (const std::string why = blocks_layout_limit(sc); !why.empty())
      return sim_fail(sc.source +
                      ": the blocks partition layout (mpirun runs, --partition "
                      "blocks) cannot run this scenario: " +
                      why + " (run it serially with --partition planes)");
  }
  auto created = Simulation::create(config, hooks.exchange);
  if (!created)
    return sim_fail(
        created.error().code,
        sc.source + ": transport " + run.name + ": the simulator rejected the configuration (" +
            std::string(error_name(created.error().code)) + ": " + created.error().message +
            "): check topo.kind, topo.hosts, topo.radix, topo.hosts_per_leaf and "
            "topo.spines");
  Simulation& sim = **created;

  auto wl = make_workload(sc.workload, sim.num_hosts(), sc.seed);
  if (!wl) return std::unexpected(wl.error());
  if (sc.workload.kind == WorkloadConfig::kHtsim) {
    // The failure lines of the matrix (parsed again: cheap, and keeps Workload opaque).
    auto m = load_htsim_cm(sc.workload.file);
    if (!m) return std::unexpected(m.error());
    auto st = apply_htsim_failures(sim, *m, sc.workload.file);
    if (!st) return std::unexpected(st.error());
  }
  auto st = apply_faults(sim, sc);
  if (!st) return std::unexpected(st.error());
  for (size_t i = 0; i < sc.workload.flow_list.size(); ++i) {
    const WorkloadConfig::Flow& f = sc.workload.flow_list[i];
    if (f.paths.empty()) continue;
    const std::string flow =
        sc.source + ":" + std::to_string(f.line) + ": workload.flow[" + std::to_string(i) + "].";
    const std::string where = flow + "paths: ";
    if (sim.num_pods() > 0)
      return sim_fail(where +
                      "pinned paths name a two-tier Clos's spines; the fabric is a fat "
                      "tree");
    const auto check_spines = [&](const std::vector<PathRef>& refs,
                                  const std::vector<std::string>& names,
                                  const std::string& key) -> SimStatus {
      for (size_t k = 0; k < refs.size(); ++k) {
        const SwitchRef spine{SwitchRef::kSpine, refs[k].plane, refs[k].spine, 0};
        if (auto st = sim.check_switch(spine); !st)
          return sim_fail(flow + key + ": " + names[k] + ": ", st.error());
      }
      return {};
    };
    if (auto st = check_spines(f.paths, f.path_names, "paths"); !st)
      return std::unexpected(st.error());
    if (auto st = check_spines(f.backup_paths, f.backup_path_names, "backup_paths"); !st)
      return std::unexpected(st.error());
    if (auto set = sim.add_path_set(f.paths, f.backup_paths); !set)
      return sim_fail(where + "transport " + run.name + ": ", set.error());
  }

  if (!hooks.pcap_path.empty()) {
    auto p = sim.enable_pcap(hooks.pcap_path, hooks.pcap_hosts);
    if (!p) return std::unexpected(p.error());  // "<path>: cannot write pcap (<why>)"
  }
  if (!hooks.qlog_path.empty()) {
    auto q = sim.enable_event_log(hooks.qlog_path, hooks.qlog_hosts);
    if (!q) return std::unexpected(q.error());
  }

  SimulationSink sink(sim);
  WorkloadDriver driver(sink);
  driver.add(std::move(*wl));
  sim.on_flow_complete([&driver](const FlowResult& r) { driver.on_flow_complete(r); });
  sim.on_flow_received([&driver](const FlowResult& r) { driver.on_flow_received(r); });
  if (hooks.progress)
    sim.on_progress([&](Time now, uint64_t events) {
      hooks.progress(run.name,
                     RunProgress{now, events, driver.flows_completed(), driver.flows_added(),
                                 sim.bytes_placed(), driver.total_bytes()});
    });
  auto started = driver.start();
  if (!started) return std::unexpected(started.error());

  TransportResult r;
  r.name = run.name;
  r.config = sim.config();  // resolved: switch.ecn_last_hop "auto" is on or off here
  r.leaves = sim.num_leaves();
  r.spines = sim.num_spines();
  r.fabric = sim.fabric_description();
  r.pods = sim.num_pods();
  r.cores = sim.num_cores();
  // Simulation::run() returns once every flow has finished (dependent workloads add theirs
  // from the completion callbacks before that check), or at run.until.
  sim.run(sc.until);
  if (hooks.after_run) hooks.after_run(sim);
  r.sim_time = sim.now();
  r.stats = sim.stats();
  r.balance = sim.window_balance();
  r.flows = sim.flows();
  r.summary = summarize_flows(r.flows);
  r.hit_limit = r.summary.unfinished > 0;
  for (const FlowResult& f : r.flows)
    if (f.end != kNever) r.makespan = std::max(r.makespan, f.end);
  // Names only when there are samples: a 131k-GPU fabric has millions of ports.
  if (!sim.link_samples().empty()) r.link_names = sim.link_names();
  r.link_samples = sim.link_samples();
  r.throughput = sim.throughput_samples();
  r.ev_events = sim.ev_events();
  for (const DenylistRecord& d : sim.denylist_log())
    if (d.time <= r.sim_time) r.denylist.push_back(d);
  for (const auto& w : driver.workloads()) {
    r.collectives.insert(r.collectives.end(), w->collectives().begin(), w->collectives().end());
    r.iterations.insert(r.iterations.end(), w->iterations().begin(), w->iterations().end());
    if (auto* t = dynamic_cast<const TrainingLoop*>(w.get())) r.job_aborted = t->aborted();
  }
  if (driver.error()) r.workload_error = driver.error()->message;
  return r;
}

}  // namespace mrc::sim
