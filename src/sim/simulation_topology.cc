// The fabric's shape (part of Simulation, see simulation_impl.h): building switches, ports,
// hosts and partitions (Impl::build), the two directed ports and the routing-view entry of a
// link, the names and checks of links and switches, and each QP's paths (EVs: SRv6 carriers
// or ECMP entropy) with the QP's setup.
#include <algorithm>
#include <bit>

#include "sim/simulation_impl.h"
#include "transport/cc/dcqcn.h"

namespace mrc::sim {

namespace {

// Wires the switches' ports to their peers; switch-to-switch links get ids in wiring order when
// links are sampled.
class PortWiring {
 public:
  explicit PortWiring(bool sample_links) : sample_links_(sample_links) {}
  void to_switch(Port& port, uint32_t peer, uint32_t peer_port) {
    port.peer = peer;
    port.peer_port = peer_port;
    if (sample_links_) port.link_id = next_link_id_++;
  }
  static void to_host(Port& port, HostId host, uint32_t host_port) {
    port.peer = host;
    port.peer_port = host_port;
    port.peer_is_host = true;
  }

 private:
  bool sample_links_;
  uint32_t next_link_id_ = 0;
};

}  // namespace

// The fabric from cfg: its shape, the switches' queue thresholds, the partitions with their
// event queues, switches and ports, hosts with their engines, then what runs on them (link
// sampling, throughput series, scheduled departures). The order of the steps is the order of
// the events they schedule, which the results depend on.
SimStatus Simulation::Impl::build() {
  const TopologyConfig& t = cfg.topo;
  P = t.planes;
  const uint32_t mtu_wire = cfg.transport.mtu + 120 + packet_overhead();
  const Time hop = t.link_delay + serialization(mtu_wire, t.link_bps);
  if (auto s = t.kind == TopologyKind::kFatTree ? shape_fat_tree(hop) : shape_two_tier(hop); !s)
    return s;
  set_queue_thresholds(mtu_wire);
  if (auto s = set_up_partitions(); !s) return s;

  switches.resize(static_cast<size_t>(P) * (L + S));
  // Sampled: every switch-switch link direction, when there are not too many.
  const uint64_t sampled_links = fat_tree ? 2ull * (L + aggs + ft_spines) * half : 2ull * P * L * U;
  const bool sample_links = cfg.sample_interval > 0 && sampled_links <= 65536;
  if (fat_tree) {
    build_fat_tree_switches(sample_links);
  } else {
    build_two_tier_switches(sample_links);
  }
  set_up_ports_and_routing_view();
  build_hosts();
  // The last hop's queues, numbered after the switch-switch links.
  const uint64_t host_links = static_cast<uint64_t>(t.hosts) * P;
  const bool sample_host_links =
      cfg.sample_interval > 0 && cfg.sample_host_links && host_links <= 65536;
  if (sample_host_links) number_host_links(sample_links ? static_cast<uint32_t>(sampled_links) : 0);
  if (blocks) assign_block_partitions();
  if (ex != nullptr) share_memory_keys();
  if (cfg.sample_interval > 0 && (sample_links || sample_host_links)) schedule_link_samples();
  if (cfg.throughput_interval > 0) set_up_throughput();
  if (cfg.denylist.interval > 0) set_up_denylist();
  set_departure_chains();
  if (ex != nullptr && !sample_links) release_remote_switch_ports();
  return {};
}

// A fat tree: one plane; k/2 hosts and k/2 uplinks per leaf; pods as many as the hosts need
// (a core has one port per pod, so at most k pods).
SimStatus Simulation::Impl::shape_fat_tree(Time hop) {
  const TopologyConfig& t = cfg.topo;
  fat_tree = true;
  if (P != 1 || (t.tiers != 3 && t.tiers != 4) || t.radix < 4 || t.radix % 2 != 0 ||
      t.hosts_per_leaf != 0 || t.spines != 0 || t.radix >= 0x4000)
    return sim_fail(
        "topo: a fat tree has one plane, 3 or 4 tiers, an even radix from 4 to "
        "16382 and neither hosts_per_leaf nor spines (planes " +
        std::to_string(P) + ", tiers " + std::to_string(t.tiers) + ", radix " +
        std::to_string(t.radix) + ")");
  ft_tiers = t.tiers;
  half = t.radix / 2;
  H = U = half;
  const uint64_t pod_hosts = static_cast<uint64_t>(half) * half;
  if (ft_tiers == 3) {
    pods = static_cast<uint32_t>((t.hosts + pod_hosts - 1) / pod_hosts);
    if (pods > t.radix)
      return sim_fail(Error::kTooBig, "topo: " + std::to_string(t.hosts) + " hosts need " +
                                          std::to_string(pods) + " pods; radix " +
                                          std::to_string(t.radix) + " cores have room for " +
                                          std::to_string(t.radix));
    cores = half * half;
  } else {
    // Whole superpods (a core has one port per superpod, so at most k of them).
    superpods = static_cast<uint32_t>((t.hosts + pod_hosts * half - 1) / (pod_hosts * half));
    if (superpods > t.radix)
      return sim_fail(Error::kTooBig, "topo: " + std::to_string(t.hosts) + " hosts need " +
                                          std::to_string(superpods) + " superpods; radix " +
                                          std::to_string(t.radix) + " cores have room for " +
                                          std::to_string(t.radix));
    pods = superpods * half;
    ft_spines = superpods * half * half;
    cores = half * half * half;
    if (pods * half > kMaxFourTierAggsOrSpines || ft_spines > kMaxFourTierAggsOrSpines)
      return sim_fail(Error::kTooBig, "topo: a four-tier fat tree of " +
                                          std::to_string(pods * half) + " aggs and " +
                                          std::to_string(ft_spines) + " spines: at most " +
                                          std::to_string(kMaxFourTierAggsOrSpines) + " of each");
  }
  L = pods * half;
  aggs = pods * half;
  if (L > kMaxFatTreeSwitchesPerTier || cores > kMaxFatTreeSwitchesPerTier)
    return sim_fail(Error::kTooBig, "topo: a fat tree of " + std::to_string(L) + " leaves and " +
                                        std::to_string(cores) + " cores: at most " +
                                        std::to_string(kMaxFatTreeSwitchesPerTier) +
                                        " switches per tier");
  S = aggs + ft_spines + cores;
  // Longest path: 2 x tiers links and 2 x tiers - 1 switches each way; within a pod 4 and
  // 3; within a superpod (four tiers) 6 and 5.
  base_rtt = 2 * ((2 * ft_tiers) * hop + (2 * ft_tiers - 1) * t.switch_latency);
  return {};
}

// A two-tier Clos: per plane, L leaves of H hosts and U uplinks, S spines (U / S parallel
// links between a leaf and a spine).
SimStatus Simulation::Impl::shape_two_tier(Time hop) {
  const TopologyConfig& t = cfg.topo;
  H = t.hosts_per_leaf ? t.hosts_per_leaf : t.radix / 2;
  if (H == 0 || H >= t.radix)
    return sim_fail("topo: hosts_per_leaf " + std::to_string(H) +
                    " must be at least 1 and below the radix " + std::to_string(t.radix));
  U = t.radix - H;
  L = (t.hosts + H - 1) / H;
  S = t.spines ? t.spines : U;
  if (S == 0 || U % S != 0)
    return sim_fail("topo: spines " + std::to_string(S) + " must divide the " + std::to_string(U) +
                    " uplinks of a leaf");
  k_parallel = U / S;
  if (L * k_parallel > t.radix)  // spine ports
    return sim_fail(Error::kTooBig, "topo: " + std::to_string(L) + " leaves x " +
                                        std::to_string(k_parallel) +
                                        " parallel links need more ports than a spine's radix " +
                                        std::to_string(t.radix));
  // Base RTT of the longest path: 4 links each way, a full MTU serialized per hop.
  base_rtt = 2 * (4 * hop + 3 * t.switch_latency);
  return {};
}

// Queue size, ECN, trimming and PFC thresholds: configured, or derived from the fabric's BDP.
void Simulation::Impl::set_queue_thresholds(uint32_t mtu_wire) {
  const TopologyConfig& t = cfg.topo;
  const uint64_t bdp = static_cast<uint64_t>(static_cast<__uint128_t>(t.link_bps) * base_rtt /
                                             (8 * kPicosPerSecond));
  const SwitchConfig& sw = cfg.sw;
  queue_bytes = sw.queue_bytes ? sw.queue_bytes : std::max<uint64_t>(bdp, 4 * mtu_wire);
  ecn_kmin = sw.ecn_kmin_bytes ? sw.ecn_kmin_bytes : queue_bytes / 5;
  ecn_kmax = sw.ecn_kmax_bytes ? sw.ecn_kmax_bytes : queue_bytes * 4 / 5;
  trim_threshold = sw.trim_threshold_bytes ? sw.trim_threshold_bytes : queue_bytes;
  pfc_xoff = sw.pfc_xoff_bytes ? sw.pfc_xoff_bytes : queue_bytes;
  pfc_xon = sw.pfc_xon_bytes ? sw.pfc_xon_bytes : pfc_xoff / 2;
  if (sw.pfc) queue_bytes = std::max(queue_bytes, 4 * pfc_xoff);  // lossless headroom
}

// Partitions: hosts in 0, plane p in 1 + p, when links give a lookahead; or blocks (and, over
// several ranks, the blocks this rank holds). Each partition gets its event queue and random
// generator.
SimStatus Simulation::Impl::set_up_partitions() {
  const TopologyConfig& t = cfg.topo;
  lookahead = t.link_delay;
  num_partitions = lookahead > 0 ? 1 + P : 1;
  if (blocks) {
    if (lookahead == 0)
      return sim_fail("the blocks partition layout needs topo.link_delay above 0 (its lookahead)");
    auto shape = fabric_shape(t);
    if (!shape) return std::unexpected(shape.error());
    layout = BlockLayout(*shape);
    num_partitions = layout.blocks();
    const uint32_t ranks = ex ? ex->ranks() : 1;
    if (ranks > num_partitions)
      return sim_fail(std::to_string(ranks) + " ranks: the fabric has " +
                      std::to_string(num_partitions) + " blocks to share");
    rank = ex ? ex->rank() : 0;
    owned.assign(num_partitions, 0);
    for (uint32_t b = 0; b < num_partitions; ++b)
      owned[b] = BlockLayout::rank_of(b, num_partitions, ranks) == rank;
    outbound.assign(ranks, {});
  }
  global_origin = num_partitions;
  queues.clear();
  // Calendar: 8 ns buckets over a horizon that holds a hop's events (link delay, switch
  // latency, serialization) with room to spare, at least 2 us; timers beyond it wait in the
  // far heap. A short ring is what keeps the queue's memory in the cache.
  const Time width = 1 << 13;
  Time horizon = std::max<Time>(us(2), (t.link_delay + t.switch_latency) * 3 / 2 + ns(500));
  // At tens of thousands of hosts the engines' state dwarfs any cache, so a short ring buys
  // nothing, while every QP's timers (a few RTTs ahead) would go through the far heap (log n
  // with n ~ the QP count): cover them (benchmark B).
  // Blocks: per partition's share of the QPs (64 rings of 4096 buckets kept 0.8 GB more than
  // the default layout at 16,384 GPUs).
  if (static_cast<uint64_t>(t.hosts) * P / (blocks ? num_partitions : 1) >= 65536)
    horizon = std::max<Time>(horizon, us(32));
  const auto buckets = static_cast<uint32_t>(std::bit_ceil((horizon + width - 1) / width));
  for (uint32_t i = 0; i < num_partitions; ++i) {
    queues.emplace_back(width, buckets);
    rngs.emplace_back(cfg.seed * 0x9E3779B97F4A7C15ull + i);
  }
  seq.assign(num_partitions + 1, 0);  // + the global origin
  return {};
}

// A two-tier Clos's switches, plane by plane: leaves (host ports, then uplinks: uplink u to
// spine u mod S, lane u / S), then spines (one port per leaf and lane).
void Simulation::Impl::build_two_tier_switches(bool sample_links) {
  PortWiring wiring(sample_links);
  for (uint32_t p = 0; p < P; ++p) {
    for (uint32_t l = 0; l < L; ++l) {
      Switch& s = place_switch(leaf_index(p, l), Switch::kLeaf, p, l, H + U);
      for (uint32_t i = 0; i < H; ++i)
        PortWiring::to_host(s.ports[i], l * H + i, p);
      for (uint32_t u = 0; u < U; ++u) {
        const uint32_t spine = u % S, lane = u / S;
        wiring.to_switch(s.ports[H + u], spine_index(p, spine), l * k_parallel + lane);
      }
    }
    for (uint32_t sp = 0; sp < S; ++sp) {
      Switch& s = place_switch(spine_index(p, sp), Switch::kSpine, p, sp,
                               static_cast<size_t>(L) * k_parallel);
      for (uint32_t l = 0; l < L; ++l)
        for (uint32_t lane = 0; lane < k_parallel; ++lane)
          wiring.to_switch(s.ports[l * k_parallel + lane], leaf_index(p, l), H + lane * S + sp);
    }
  }
}

Switch& Simulation::Impl::place_switch(uint32_t id, Switch::Kind kind, uint32_t plane,
                                       uint32_t index, size_t ports) {
  Switch& s = switches[id];
  s.kind = kind;
  s.plane = plane;
  s.index = index;
  s.partition = plane_partition(plane);
  s.ports.resize(ports);
  return s;
}

// Every port's link rate and delay, the switches' PFC accounting, and a routing view with
// every link up.
void Simulation::Impl::set_up_ports_and_routing_view() {
  const TopologyConfig& t = cfg.topo;
  for (Switch& s : switches) {
    for (Port& port : s.ports) {
      port.rate.set(t.link_bps);
      port.delay = t.link_delay;
    }
    s.ingress_bytes.assign(s.ports.size(), 0);
    s.pause_sent.assign(s.ports.size(), 0);
  }
  route_down.assign(
      fat_tree ? static_cast<size_t>(L + aggs + ft_spines) * half : static_cast<size_t>(P) * L * U,
      0);
  route_down_count.assign(P, 0);
}

// The hosts: an engine each (over several ranks, for this rank's hosts only), its memory
// registered, and a NIC port per plane wired to the host's leaf.
void Simulation::Impl::build_hosts() {
  const TopologyConfig& t = cfg.topo;
  hosts.resize(t.hosts);
  engines.reserve(t.hosts);
  for (HostId h = 0; h < t.hosts; ++h) {
    Host& host = hosts[h];
    if (ex != nullptr && !owned[host_partition(h)]) {
      engines.push_back(nullptr);  // another rank's
      continue;
    }
    EngineConfig ec;
    ec.num_ports = static_cast<uint8_t>(P);
    ec.seed = cfg.seed * 1000003 + h;
    ec.max_qps = 1u << 20;
    // Drained after every engine call: small buffers suffice (131,072 engines at scale).
    ec.completion_capacity = 64;
    ec.event_capacity = 64;
    ec.ack_every = cfg.transport.ack_every;
    ec.port_remap_delay = cfg.transport.port_remap_delay;
    // A NIC knows its fabric's unloaded RTT: a QP's first packets do not wait for the ACK
    // timeout when they are lost (EngineConfig::fabric_rtt).
    ec.fabric_rtt = cfg.transport.borrow_rtt ? base_rtt : 0;
    ec.share_rtt = cfg.transport.borrow_rtt;
    ec.ack_waits_for_port = cfg.transport.ack_waits_for_port;
    ec.probe_budget_interval = cfg.transport.probe_budget_interval;
    ec.reverse_evs_per_plane = static_cast<uint8_t>(cfg.transport.reverse_evs_per_plane);
    ec.cnp_interval = cc::cnp_interval(cfg.transport.dcqcn);  // DCQCN's notification point
    host.engine = std::make_unique<Engine>(ec);
    engines.push_back(host.engine.get());
    // One phantom region covers all of this GPU's memory: placement is counted, not copied.
    host.keys = *host.engine->register_memory(nullptr, 1ull << 60, 0, kLocalWrite | kRemoteWrite);
    host.ports.resize(P);
    for (uint32_t p = 0; p < P; ++p) {
      HostPort& hp = host.ports[p];
      hp.leaf = leaf_index(p, leaf_of(h));
      hp.leaf_port = h % H;
      hp.rate.set(t.link_bps);
      hp.delay = t.link_delay;
    }
  }
}

// Sampled last hops (leaf to host), numbered from `first_id`.
void Simulation::Impl::number_host_links(uint32_t first_id) {
  uint32_t next_id = first_id;
  for (Switch& s : switches) {
    if (s.kind != Switch::kLeaf) continue;
    for (Port& port : s.ports)
      if (port.peer_is_host && port.peer < cfg.topo.hosts) port.link_id = next_id++;
  }
}

// Blocks layout: every switch's block, the switches each block samples, and the per-host QP
// counts.
void Simulation::Impl::assign_block_partitions() {
  for (Switch& s : switches)
    s.partition = switch_partition(s);
  partition_switches.assign(num_partitions, {});
  for (uint32_t i = 0; i < switches.size(); ++i)
    partition_switches[switches[i].partition].push_back(i);
  qps_created.assign(cfg.topo.hosts, 0);
}

// Another rank's hosts: only their memory keys are read here (a WRITE names the destination's
// rkey), and every engine's first registration gets the same keys.
void Simulation::Impl::share_memory_keys() {
  MemoryKeys keys{};
  for (const Host& host : hosts)
    if (host.engine) keys = host.keys;
  for (Host& host : hosts)
    if (!host.engine) host.keys = keys;
}

// The first link sample of each plane (blocks layout: of each block).
void Simulation::Impl::schedule_link_samples() {
  if (blocks) {
    for (uint32_t b = 0; b < num_partitions; ++b)
      schedule_global(b, cfg.sample_interval, kSample, b);
  } else {
    for (uint32_t p = 0; p < P; ++p)
      schedule(plane_partition(p), cfg.sample_interval, kSample, p);
  }
}

// The denylist's first probe round in every partition that holds hosts.
void Simulation::Impl::set_up_denylist() {
  denylist = std::make_unique<LinkDenylist>(cfg.denylist, cfg.topo.hosts, P);
  denylist_rng = Rng(cfg.seed ^ 0x64656e796c697374ull);  // its own stream: runs without a
                                                         // denylist draw the same numbers
  if (blocks) {
    for (uint32_t b = 0; b < num_partitions; ++b)
      schedule_global(b, cfg.denylist.interval, kDenylistRound, b);
  } else {
    schedule(0, cfg.denylist.interval, kDenylistRound, 0);
  }
}

// Throughput series: the per-host counters and the first sample (blocks layout: per block,
// with each block's range of hosts).
void Simulation::Impl::set_up_throughput() {
  const TopologyConfig& t = cfg.topo;
  rx_placed.assign(t.hosts, 0);
  if (blocks) {
    // A block's hosts are contiguous (leaves, or pods, in order).
    block_tp.assign(num_partitions, {});
    block_first_host.assign(num_partitions + 1, t.hosts);
    for (HostId h = t.hosts; h-- > 0;)
      block_first_host[host_partition(h)] = h;
    for (uint32_t b = num_partitions; b-- > 0;)
      block_first_host[b] = std::min(block_first_host[b], block_first_host[b + 1]);
    for (uint32_t b = 0; b < num_partitions; ++b)
      schedule_global(b, cfg.throughput_interval, kThroughput, b);
  } else {
    tx_placed.assign(t.hosts, 0);
    schedule(0, cfg.throughput_interval, kThroughput);
  }
}

// Which ports may keep a schedule of departures (Port::wire): without PFC, towards a peer in
// the port's own partition.
void Simulation::Impl::set_departure_chains() {
  for (Switch& s : switches) {
    for (Port& port : s.ports) {
      const uint32_t peer_partition =
          port.peer_is_host ? host_partition(port.peer) : switches[port.peer].partition;
      port.chain_ok = cfg.scheduled_departures && !cfg.sw.pfc && peer_partition == s.partition;
    }
  }
}

// Another rank's switches are never touched here: keep their names, not their ports.
void Simulation::Impl::release_remote_switch_ports() {
  for (Switch& s : switches) {
    if (owned[s.partition]) continue;
    std::vector<Port>().swap(s.ports);
    std::vector<uint64_t>().swap(s.ingress_bytes);
    std::vector<uint8_t>().swap(s.pause_sent);
  }
}

uint32_t Simulation::Impl::switch_partition(const Switch& s) const {
  if (!blocks) return s.partition;
  if (!fat_tree)
    return s.kind == Switch::kLeaf ? layout.leaf_block(s.index) : layout.spine_block(s.index);
  switch (s.kind) {
    case Switch::kLeaf:
      return layout.leaf_block(s.index);
    case Switch::kAgg:
      return layout.agg_block(s.index);
    case Switch::kSpine:
      return layout.ft_spine_block(s.index);
    case Switch::kCore:
      return layout.core_block(s.index);
  }
  return 0;
}

// A fat tree's switches: leaves (host ports, then one uplink per agg of the pod), aggs (one
// down port per leaf of the pod, then one up port per core of its group), cores (one port per
// pod, to the agg of its group). Four tiers: aggs go up to the spines of their group in the
// superpod (agg a to local spines a*half .. a*half + half - 1), spines have one down port per
// pod of the superpod and one up port per core of their group (local spine s to cores
// s*half .. s*half + half - 1), cores one port per superpod.
void Simulation::Impl::build_fat_tree_switches(bool sample_links) {
  PortWiring wiring(sample_links);
  for (uint32_t e = 0; e < L; ++e) {
    const uint32_t pod = e / half;
    Switch& s = place_switch(e, Switch::kLeaf, 0, e, 2 * half);
    for (uint32_t i = 0; i < half; ++i)
      PortWiring::to_host(s.ports[i], e * H + i, 0);
    for (uint32_t a = 0; a < half; ++a)
      wiring.to_switch(s.ports[half + a], agg_switch(pod, a), e % half);
  }
  for (uint32_t g = 0; g < aggs; ++g) {
    const uint32_t pod = g / half, a = g % half;
    Switch& s = place_switch(agg_switch(pod, a), Switch::kAgg, 0, g, 2 * half);
    for (uint32_t i = 0; i < half; ++i) {
      wiring.to_switch(s.ports[i], pod * half + i, half + a);
      if (ft_tiers == 4) {
        wiring.to_switch(s.ports[half + i],
                         ft_spine_switch((pod / half) * half * half + a * half + i), pod % half);
      } else {
        wiring.to_switch(s.ports[half + i], core_switch(a * half + i), pod);
      }
    }
  }
  for (uint32_t g = 0; g < ft_spines; ++g) {
    const uint32_t superpod = g / (half * half), local = g % (half * half);
    Switch& s = place_switch(ft_spine_switch(g), Switch::kSpine, 0, g, 2 * half);
    for (uint32_t i = 0; i < half; ++i) {
      wiring.to_switch(s.ports[i], agg_switch(superpod * half + i, local / half),
                       half + local % half);
      wiring.to_switch(s.ports[half + i], core_switch(local * half + i), superpod);
    }
  }
  // A core has one port per pod (three tiers) or per superpod (four).
  const uint32_t core_ports = ft_tiers == 4 ? superpods : pods;
  for (uint32_t c = 0; c < cores; ++c) {
    Switch& s = place_switch(core_switch(c), Switch::kCore, 0, c, core_ports);
    for (uint32_t q = 0; q < core_ports; ++q) {
      const uint32_t peer =
          ft_tiers == 4 ? ft_spine_switch(q * half * half + c / half) : agg_switch(q, c / half);
      wiring.to_switch(s.ports[q], peer, half + c % half);
    }
  }
}

std::vector<uint16_t> Simulation::Impl::ft_usids(HostId src, HostId dst, uint32_t path) const {
  const uint32_t src_leaf = leaf_of(src), dst_leaf = leaf_of(dst);
  const uint32_t src_pod = src_leaf / half, dst_pod = dst_leaf / half;
  std::vector<uint16_t> usids;
  if (ft_tiers == 4) {
    const uint32_t a = path / (half * half), local_spine = path / half;
    const uint32_t src_superpod = src_pod / half, dst_superpod = dst_pod / half;
    if (src_leaf != dst_leaf) {
      usids.push_back(static_cast<uint16_t>(kAggUsidBase + src_pod * half + a));
      if (src_pod != dst_pod) {
        usids.push_back(
            static_cast<uint16_t>(kFtSpineUsidBase + src_superpod * half * half + local_spine));
        if (src_superpod != dst_superpod) {
          usids.push_back(static_cast<uint16_t>(kCoreUsidBase + path));
          usids.push_back(
              static_cast<uint16_t>(kFtSpineUsidBase + dst_superpod * half * half + local_spine));
        }
        usids.push_back(static_cast<uint16_t>(kAggUsidBase + dst_pod * half + a));
      }
    }
    usids.push_back(static_cast<uint16_t>(kLeafUsidBase + dst_leaf));
    usids.push_back(static_cast<uint16_t>(kHostUsidBase + dst % H));
    return usids;
  }
  const uint32_t a = path / half;
  if (src_leaf != dst_leaf) {
    usids.push_back(static_cast<uint16_t>(kAggUsidBase + src_pod * half + a));
    if (src_pod != dst_pod) {
      usids.push_back(static_cast<uint16_t>(kCoreUsidBase + path));
      usids.push_back(static_cast<uint16_t>(kAggUsidBase + dst_pod * half + a));
    }
  }
  usids.push_back(static_cast<uint16_t>(kLeafUsidBase + dst_leaf));
  usids.push_back(static_cast<uint16_t>(kHostUsidBase + dst % H));
  return usids;
}

uint16_t Simulation::Impl::ft_path(const ev::ExpandedEv& carrier) const {
  const uint16_t first = ev::usid_at(carrier, 0);
  if (ft_tiers == 4) {
    if (first < kAggUsidBase || first >= kFtSpineUsidBase) return kNoSpine;  // within the leaf
    const uint32_t a = (first - kAggUsidBase) % half;
    const uint16_t second = ev::usid_at(carrier, 1);
    if (second < kFtSpineUsidBase) return static_cast<uint16_t>(a * half * half);  // in the pod
    const uint16_t third = ev::usid_at(carrier, 2);
    if (third >= kCoreUsidBase) return static_cast<uint16_t>(third - kCoreUsidBase);
    return static_cast<uint16_t>(((second - kFtSpineUsidBase) % (half * half)) * half);
  }
  if (first < kAggUsidBase || first >= kCoreUsidBase) return kNoSpine;  // within the leaf
  const uint16_t second = ev::usid_at(carrier, 1);
  if (second >= kCoreUsidBase) return static_cast<uint16_t>(second - kCoreUsidBase);
  return static_cast<uint16_t>(((first - kAggUsidBase) % half) * half);
}

// The paths of a QP from src to dst on `plane` (RoCE: one QP per plane) or on every plane
// (MRC: plane = UINT32_MAX).
void Simulation::Impl::build_paths(HostId src, HostId dst, uint32_t plane, uint32_t qp_index,
                                   uint16_t path_set, QpAttr& a) {
  const TransportConfig& tc = cfg.transport;
  // Seeded by the unordered pair: both ends of a QP pair draw the same choices, so path i
  // names the same plane and spine in both directions (control packets rely on that). The
  // further QPs of a flow (qps_per_flow) draw their own.
  const uint64_t lo = std::min(src, dst), hi = std::max(src, dst);
  Rng rng(cfg.seed ^ (lo << 32 | hi) ^ 0xA5A5A5A5ull ^
          (qp_index ? mix32(qp_index) * 0x9E3779B97F4A7C15ull : 0));
  auto entropy_ev = [&](uint32_t v) {
    ev::ExpandedEv e{};
    e[0] = static_cast<uint8_t>(v >> 24);
    e[1] = static_cast<uint8_t>(v >> 16);
    e[2] = static_cast<uint8_t>(v >> 8);
    e[3] = static_cast<uint8_t>(v);
    return e;
  };
  if (tc.kind == TransportKind::kRoce) {
    PathDesc d;
    d.port = static_cast<uint8_t>(plane);
    d.ev = entropy_ev(static_cast<uint32_t>(rng.next()));
    a.paths.push_back(d);
    a.ev_min_active = 1;
    return;
  }
  if (path_set != 0) {
    // Pinned EVs (add_path_set checked them: two-tier, SRv6): exactly the listed paths, the
    // active ones first (the first active_per_plane EVs of each port are active).
    const PinnedPaths& pinned = path_sets[path_set - 1];
    for (const std::vector<PathRef>* list : {&pinned.active, &pinned.backup})
      for (const PathRef& r : *list) {
        PathDesc d;
        d.port = static_cast<uint8_t>(r.plane);
        std::vector<uint16_t> usids;
        if (leaf_of(src) != leaf_of(dst))
          usids.push_back(static_cast<uint16_t>(kSpineUsidBase + r.spine));
        usids.push_back(static_cast<uint16_t>(kLeafUsidBase + leaf_of(dst)));
        usids.push_back(static_cast<uint16_t>(kHostUsidBase + dst % H));
        d.ev = *ev::srv6_carrier(kLocatorBlock, usids);
        a.paths.push_back(d);
      }
    a.path_policy.active_per_plane = pinned.active_per_plane;
    a.ev_min_active = std::max<uint32_t>(1, static_cast<uint32_t>(pinned.active.size()) / 8);
    return;
  }
  if (fat_tree) {
    // Every QP gets the same number of EVs, evenly spaced over the half^2 paths between pods
    // (four tiers: half^3 between superpods) (rotated per pair). Nearer pairs have fewer distinct
    // paths: half within a pod (the path names an agg), one within a leaf; their EVs repeat those
    // paths.
    const uint32_t n_paths = ft_num_paths();
    const uint32_t per =
        tc.evs_per_plane ? std::min(tc.evs_per_plane, n_paths) : std::min(n_paths, 64u);
    const uint32_t offset = static_cast<uint32_t>(rng.below(n_paths));
    for (uint32_t e = 0; e < per; ++e) {
      PathDesc d;
      d.port = 0;
      if (tc.path_mode == PathMode::kSrv6) {
        const uint32_t path =
            static_cast<uint32_t>((static_cast<uint64_t>(e) * n_paths / per + offset) % n_paths);
        d.ev = *ev::srv6_carrier(kLocatorBlock, ft_usids(src, dst, path));
      } else {
        d.ev = entropy_ev(static_cast<uint32_t>(rng.next()));
      }
      a.paths.push_back(d);
    }
    a.ev_min_active = std::max<uint32_t>(1, per / 8);
    return;
  }
  const uint32_t per_plane = active_evs_per_plane();
  const uint32_t backups = backup_evs_per_plane();
  const bool same_leaf = leaf_of(src) == leaf_of(dst);
  // With fewer EVs than spines, each QP gets its own evenly spaced subset (rotated by a
  // per-pair offset), so that together the QPs of a fabric use every spine.
  std::vector<uint32_t> offset(P);
  for (uint32_t p = 0; p < P; ++p)
    offset[p] = static_cast<uint32_t>(rng.below(S));
  // Backup b of plane p: the spines the active set leaves out, evenly spaced (paper 2.4).
  std::vector<uint8_t> taken;
  auto backup_spine = [&](uint32_t p, uint32_t b) {
    taken.assign(S, 0);
    for (uint32_t e = 0; e < per_plane; ++e)
      taken[(e * S / per_plane + offset[p]) % S] = 1;
    const uint32_t free = S - per_plane;
    const uint32_t k = static_cast<uint32_t>(static_cast<uint64_t>(b) * free / backups);
    for (uint32_t s = 0, seen = 0; s < S; ++s) {
      const uint32_t spine = (offset[p] + s) % S;
      if (taken[spine]) continue;
      if (seen++ == k) return spine;
    }
    return offset[p];  // not reached: backups <= free
  };
  // Random choice: per plane, the first per_plane + backups spines of a random permutation
  // (a partial Fisher-Yates shuffle), active ones first.
  std::vector<std::vector<uint32_t>> drawn;
  if (tc.ev_choice == TransportConfig::EvChoice::kRandom && tc.path_mode == PathMode::kSrv6) {
    drawn.assign(P, {});
    for (uint32_t p = 0; p < P; ++p) {
      std::vector<uint32_t>& v = drawn[p];
      v.resize(S);
      for (uint32_t i = 0; i < S; ++i)
        v[i] = i;
      for (uint32_t i = 0; i < per_plane + backups; ++i)
        std::swap(v[i], v[i + rng.below(S - i)]);
    }
  }
  for (uint32_t e = 0; e < per_plane + backups; ++e) {
    for (uint32_t p = 0; p < P; ++p) {
      PathDesc d;
      d.port = static_cast<uint8_t>(p);
      if (tc.path_mode == PathMode::kSrv6) {
        // EV e names a spine (the destination's leaf and host uSIDs follow). Same-leaf
        // destinations need no spine.
        const uint32_t spine_index = !drawn.empty()  ? drawn[p][e]
                                     : e < per_plane ? (e * S / per_plane + offset[p]) % S
                                                     : backup_spine(p, e - per_plane);
        const uint16_t spine = static_cast<uint16_t>(kSpineUsidBase + spine_index);
        const uint16_t leaf = static_cast<uint16_t>(kLeafUsidBase + leaf_of(dst));
        const uint16_t host = static_cast<uint16_t>(kHostUsidBase + dst % H);
        std::vector<uint16_t> usids;
        if (!same_leaf) usids.push_back(spine);
        usids.push_back(leaf);
        usids.push_back(host);
        d.ev = *ev::srv6_carrier(kLocatorBlock, usids);
      } else {
        d.ev = entropy_ev(static_cast<uint32_t>(rng.next()));
      }
      a.paths.push_back(d);
    }
  }
  a.path_policy.active_per_plane = backups ? per_plane : 0;
  a.ev_min_active = std::max<uint32_t>(1, per_plane * P / 8);
}

uint32_t Simulation::Impl::active_evs_per_plane() const {
  const uint32_t by_paper = std::max<uint32_t>(1, 256 / P);
  // ECMP: an EV is hashed, not a spine; more EVs than spines weight the uplinks more evenly.
  if (ecmp_evs()) return cfg.transport.evs_per_plane ? cfg.transport.evs_per_plane : by_paper;
  return cfg.transport.evs_per_plane ? std::min(cfg.transport.evs_per_plane, S)
                                     : std::min(S, by_paper);
}

uint32_t Simulation::Impl::backup_evs_per_plane() const {
  const uint32_t active = active_evs_per_plane();
  const uint32_t want = cfg.transport.backup_evs_per_plane == TransportConfig::kAutoBackup
                            ? (active + 3) / 4
                            : cfg.transport.backup_evs_per_plane;
  return ecmp_evs() ? want : std::min(want, S - active);
}

SimResult<QpPair> Simulation::Impl::qp_for(HostId src, HostId dst, uint32_t plane,
                                           uint32_t qp_index, uint16_t path_set) {
  const uint64_t key = qp_key(dst, plane, qp_index, path_set);
  auto it = hosts[src].qps.find(key);
  if (it != hosts[src].qps.end()) return it->second;
  Engine& es = *hosts[src].engine;
  Engine& ed = *hosts[dst].engine;
  QpCreateAttr ca;
  ca.sq_depth = 64;  // flows beyond this queue in the engine's post_write error path
  ca.rq_depth = 64;
  auto qs = es.create_qp(ca);
  auto qd = ed.create_qp(ca);
  if (!qs || !qd)
    return sim_fail(Error::kNoResources, "hosts " + std::to_string(src) + " and " +
                                             std::to_string(dst) + ": no QP left");
  if (auto s = configure_qp(es, *qs, src, dst, plane, *qd, qp_index, path_set); !s)
    return std::unexpected(s.error());
  if (auto s = configure_qp(ed, *qd, dst, src, plane, *qs, qp_index, path_set); !s)
    return std::unexpected(s.error());
  const QpPair fwd{*qs, *qd};
  hosts[src].qps[key] = fwd;
  hosts[dst].qps[qp_key(src, plane, qp_index, path_set)] = QpPair{*qd, *qs};
  return fwd;
}

// The blocks layout: host `me`'s QP for `peer`, created on first use by either end on its
// own (the sender when a flow starts, the receiver one lookahead later: kFlowAccept), so no
// partition touches another's engine. Neither end knows the other's QP number: packets are
// delivered to the receiver's QP for the sender (host_arrive), and dest_qpn stays 0.
SimResult<uint32_t> Simulation::Impl::blocks_qp(HostId me, HostId peer, uint32_t plane,
                                                uint32_t qp_index, uint16_t path_set) {
  const uint64_t key = qp_key(peer, plane, qp_index, path_set);
  auto it = hosts[me].qps.find(key);
  if (it != hosts[me].qps.end()) return it->second.local_qpn;
  Engine& e = *hosts[me].engine;
  QpCreateAttr ca;
  ca.sq_depth = 64;  // as qp_for
  ca.rq_depth = 64;
  auto q = e.create_qp(ca);
  if (!q) return sim_fail(Error::kNoResources, "host " + std::to_string(me) + ": no QP left");
  if (auto s = configure_qp(e, *q, me, peer, plane, 0, qp_index, path_set); !s)
    return std::unexpected(s.error());
  hosts[me].qps[key] = QpPair{*q, 0};
  if (qp_index != 0 || path_set != 0) hosts[me].qp_sub[*q] = (qp_index << 16) | path_set;
  ++qps_created[me];
  return *q;
}

// One end of a QP pair, from RESET to RTS.
SimStatus Simulation::Impl::configure_qp(Engine& e, uint32_t qpn, HostId me, HostId peer,
                                         uint32_t plane, uint32_t dest_qpn, uint32_t qp_index,
                                         uint16_t path_set) {
  const TransportConfig& tc = cfg.transport;
  const uint64_t link =
      static_cast<uint64_t>(tc.kind == TransportKind::kRoce ? 1 : P) * cfg.topo.link_bps;
  const uint64_t bdp =
      static_cast<uint64_t>(static_cast<__uint128_t>(link) * base_rtt / (8 * kPicosPerSecond));
  {
    QpAttr a;
    a.transport = tc.kind == TransportKind::kRoce ? TransportMode::kRoce : TransportMode::kMrc;
    build_paths(me, peer, plane, qp_index, path_set, a);
    if (denylist) {
      // Clustermapper's entries in force now (paper 4): a lossy link at either end.
      for (PathDesc& d : a.paths)
        if (denylisted(me * P + d.port, now) || denylisted(peer * P + d.port, now))
          d.state = ev::EvState::kDenied;
    }
    a.path_policy.ecn_steering = tc.kind == TransportKind::kMrc;
    // 0: the engine's rule (default_ecn_cooldown: base RTT / 16, at least a round-robin cycle
    // of a port's active EVs where the switches hash them), from the CC attributes below.
    a.path_policy.ecn_cooldown = tc.ecn_cooldown;
    a.path_policy.probe_interval = tc.probe_interval;
    a.path_policy.probe_backoff_limit = tc.probe_backoff_limit;
    a.path_policy.resurrect_probes = tc.resurrect_probes;
    a.path_policy.resurrect_window = tc.resurrect_window;
    a.path_policy.port_return_probes = tc.port_return_probes;
    a.path_policy.trim_hold = tc.trim_hold;
    a.path_policy.ecn_swap_marks = tc.ecn_swap_marks;
    CcAlgorithm alg = tc.cc;
    if (tc.kind == TransportKind::kRoce && alg == CcAlgorithm::kNscc) alg = CcAlgorithm::kDcqcn;
    a.cc.algorithm = alg;
    a.cc.nscc.base_rtt = base_rtt;
    a.cc.nscc.link_bps = link;
    a.cc.nscc.mtu = tc.mtu;
    // Paper 2.1: with trimming a loss is a path signal, not congestion; a fabric that drops
    // instead of trimming signals congestion by loss, as before (NsccConfig::loss_keep).
    a.cc.nscc.loss_keep =
        tc.loss_keep > 0 ? tc.loss_keep : (cfg.sw.trimming ? 1.0 : a.cc.nscc.max_md_jump);
    // A trim on a hashed fabric is mostly an inner queue that colliding EVs overfilled: one
    // path of the QP's many, which steering moves away from (paper 2.1). Halving the window
    // for it made the QPs it hit the slowest of a permutation (bench A's fabric, 64 hashed EVs:
    // max FCT 1.32 x ideal at 0.5 against 1.20 at 0.8; docs/engine.md, "decisions").
    a.cc.nscc.trim_keep = tc.trim_keep;  // 0: the engine's default for the QP's paths
    a.cc.nscc.hashed_paths = ecmp_evs();
    a.cc.nscc.min_cwnd = static_cast<uint32_t>(tc.nscc_min_cwnd);
    a.cc.nscc.disable_qa = !tc.nscc_quick_adapt;
    a.cc.dcqcn = tc.dcqcn;  // TransportConfig::dcqcn says why its timers are 55 us
    a.cc.dcqcn.line_rate_bps = link;
    a.cc.dcqcn.mtu = tc.mtu;
    a.cc.fixed_window = 2 * bdp;
    a.dest_qpn = dest_qpn;
    a.peer = peer;
    a.path_mtu = tc.mtu;
    uint32_t mpr = tc.mpr;
    if (mpr == 0) {
      // Room for 2 BDPs of PSNs (NSCC's window is at most 1.5 BDP) plus one MPR unit of
      // slack for reordering and retransmissions.
      const uint64_t psns = 2 * bdp / tc.mtu + 128;
      mpr = static_cast<uint32_t>(std::clamp<uint64_t>((psns + 127) / 128, 1, 255));
    }
    a.mpr = a.mpr_dest = static_cast<uint8_t>(mpr);
    a.max_wimm = a.max_wimm_dest = 256;
    a.timeout = tc.timeout != TransportConfig::kTimeoutAuto ? tc.timeout
                : tc.kind == TransportKind::kRoce           ? 12
                                                            : 8;
    a.retry_linear = 7;
    a.retry_exp = 7;
    for (const QpState state : {QpState::kInit, QpState::kRtr, QpState::kRts})
      if (auto s = e.modify_qp(now, qpn, state, a); !s)
        return sim_fail(s.error(), "host " + std::to_string(me) + " QP " + std::to_string(qpn) +
                                       ": the engine refused its attributes (" +
                                       std::string(error_name(s.error())) + ")");
  }
  return {};
}

Simulation::Impl::LinkEnds Simulation::Impl::link_ends(const LinkRef& l) const {
  switch (l.kind) {
    case LinkRef::kLeafAgg:
      return {l.pod * half + l.a, half + l.b, agg_switch(l.pod, l.b), l.a};
    case LinkRef::kAggCore:
      return {agg_switch(l.pod, l.a), half + l.b % half, core_switch(l.b), l.pod};
    case LinkRef::kAggSpine:
      return {agg_switch(l.pod, l.a), half + l.b % half, ft_spine_switch(l.b), l.pod % half};
    case LinkRef::kSpineCore:
      return {ft_spine_switch(l.a), half + l.b % half, core_switch(l.b), l.a / (half * half)};
    default: {
      const uint32_t spine = l.b % S, lane = l.b / S;
      return {leaf_index(l.plane, l.a), H + lane * S + spine, spine_index(l.plane, spine),
              l.a * k_parallel + lane};
    }
  }
}

size_t Simulation::Impl::route_index(const LinkRef& l) const {
  switch (l.kind) {
    case LinkRef::kLeafAgg:
      return ft_route_leaf_agg(l.pod * half + l.a, l.b);
    case LinkRef::kAggCore:
    case LinkRef::kAggSpine:  // agg up port b mod half (spine b of the agg's group)
      return ft_route_agg_core(l.pod, l.a, l.b % half);
    case LinkRef::kSpineCore:
      return ft_route_spine_core(l.a, l.b % half);
    default:
      return (static_cast<size_t>(l.plane) * L + l.a) * U + l.b;
  }
}

uint32_t Simulation::switch_hops(HostId a, HostId b) const {
  const Impl& m = *impl_;
  const uint32_t la = m.leaf_of(a), lb = m.leaf_of(b);
  if (la == lb) return 1;
  if (!m.fat_tree) return 3;
  if (la / m.half == lb / m.half) return 3;
  if (m.ft_tiers == 3 || la / (m.half * m.half) == lb / (m.half * m.half)) return 5;
  return 7;
}

std::string Simulation::fabric_description() const {
  const Impl& m = *impl_;
  auto plural = [](uint32_t n, const char* word) {
    return std::to_string(n) + " " + word + (n == 1 ? "" : "s");
  };
  if (m.fat_tree && m.ft_tiers == 4)
    return "4-tier fat tree k=" + std::to_string(m.cfg.topo.radix) + ": " +
           plural(m.superpods, "superpod") + " x (" + plural(m.half, "pod") + " x (" +
           std::to_string(m.half) + " leaves + " + std::to_string(m.half) + " aggs) + " +
           std::to_string(m.half * m.half) + " spines) + " + std::to_string(m.cores) + " cores";
  if (m.fat_tree)
    return "3-tier fat tree k=" + std::to_string(m.cfg.topo.radix) + ": " + plural(m.pods, "pod") +
           " x (" + std::to_string(m.half) + " leaves + " + std::to_string(m.half) + " aggs) + " +
           std::to_string(m.cores) + " cores";
  return plural(m.P, "plane") + " x (" + std::to_string(m.L) + " leaves + " + std::to_string(m.S) +
         " spines)";
}

SimStatus Simulation::check_link(const LinkRef& l) const {
  if (std::string why = why_no_link(l); !why.empty()) return sim_fail(std::move(why));
  return {};
}

SimStatus Simulation::check_switch(const SwitchRef& s) const {
  if (std::string why = why_no_switch(s); !why.empty()) return sim_fail(std::move(why));
  return {};
}

std::string Simulation::why_no_link(const LinkRef& l) const {
  const Impl& m = *impl_;
  const std::string hosts = std::to_string(m.hosts.size());
  if (m.fat_tree) {
    const std::string pods = std::to_string(m.pods), half = std::to_string(m.half);
    switch (l.kind) {
      case LinkRef::kHostLeaf:
        if (l.plane != 0) return "a fat tree has one plane: name host links \"host5\"";
        if (l.a >= m.hosts.size())
          return "host " + std::to_string(l.a) + " does not exist (" + hosts + " hosts)";
        return {};
      case LinkRef::kLeafSpine:
        return m.ft_tiers == 4 ? "the fabric is a four-tier fat tree: name links like "
                                 "\"pod1/leaf0-agg2\", \"pod1/agg2-spine9\", "
                                 "\"spine9-core37\" or \"host5\""
                               : "the fabric is a fat tree: name links like \"pod1/leaf0-agg2\", "
                                 "\"pod1/agg2-core9\" or \"host5\"";
      case LinkRef::kAggSpine:
      case LinkRef::kSpineCore: {
        if (m.ft_tiers != 4)
          return "the fabric is a three-tier fat tree (no spines): name links like "
                 "\"pod1/agg2-core9\"";
        const uint32_t sq = m.half * m.half;
        const std::string spines = std::to_string(m.ft_spines);
        if (l.kind == LinkRef::kAggSpine) {
          if (l.pod >= m.pods)
            return "pod " + std::to_string(l.pod) + " does not exist (the fabric has " + pods +
                   " pods: pod0..pod" + std::to_string(m.pods - 1) + ")";
          if (l.a >= m.half) return "agg indices within a pod are 0.." + std::to_string(m.half - 1);
          const uint32_t first = (l.pod / m.half) * sq + l.a * m.half;
          if (l.b < first || l.b >= first + m.half)
            return "agg " + std::to_string(l.a) + " of pod " + std::to_string(l.pod) +
                   " is wired to spines " + std::to_string(first) + ".." +
                   std::to_string(first + m.half - 1) + " (superpod " +
                   std::to_string(l.pod / m.half) + ", local spine s to agg s / " + half + ")";
          return {};
        }
        if (l.a >= m.ft_spines)
          return "spine " + std::to_string(l.a) + " does not exist (" + spines + " spines)";
        const uint32_t first = (l.a % sq) * m.half;
        if (l.b < first || l.b >= first + m.half)
          return "spine " + std::to_string(l.a) + " is wired to cores " + std::to_string(first) +
                 ".." + std::to_string(first + m.half - 1) + " (core c to local spine c / " + half +
                 " of every superpod)";
        return {};
      }
      case LinkRef::kLeafAgg:
      case LinkRef::kAggCore:
        if (l.kind == LinkRef::kAggCore && m.ft_tiers == 4)
          return "the fabric is a four-tier fat tree: aggs connect to spines "
                 "(\"pod1/agg2-spine9\"), spines to cores (\"spine9-core37\")";
        if (l.pod >= m.pods)
          return "pod " + std::to_string(l.pod) + " does not exist (the fabric has " + pods +
                 " pods: pod0..pod" + std::to_string(m.pods - 1) + ")";
        if (l.a >= m.half || (l.kind == LinkRef::kLeafAgg && l.b >= m.half))
          return std::string(l.kind == LinkRef::kLeafAgg ? "leaf and agg" : "agg") +
                 " indices within a pod are 0.." + std::to_string(m.half - 1);
        if (l.kind == LinkRef::kAggCore && (l.b >= m.cores || l.b / m.half != l.a))
          return "agg " + std::to_string(l.a) + " of a pod is wired to cores " +
                 std::to_string(l.a * m.half) + ".." + std::to_string((l.a + 1) * m.half - 1) +
                 " (core c to agg c / " + half + " of every pod)";
        return {};
    }
    return "unknown link";
  }
  if (l.plane >= m.P)
    return "plane " + std::to_string(l.plane) + " does not exist (the fabric has " +
           std::to_string(m.P) + " planes: p0..p" + std::to_string(m.P - 1) + ")";
  switch (l.kind) {
    case LinkRef::kHostLeaf:
      if (l.a >= m.hosts.size())
        return "host " + std::to_string(l.a) + " does not exist (" + hosts + " hosts)";
      return {};
    case LinkRef::kLeafSpine:
      if (l.a >= m.L || l.b >= m.S)
        return "no such link: the fabric has leaves 0.." + std::to_string(m.L - 1) +
               " and spines 0.." + std::to_string(m.S - 1) + " per plane";
      return {};
    default:
      return "the fabric is a two-tier Clos: name links like \"p0/leaf3-spine7\" or "
             "\"p1/host5\"";
  }
}

std::string Simulation::why_no_switch(const SwitchRef& s) const {
  const Impl& m = *impl_;
  if (m.fat_tree) {
    switch (s.kind) {
      case SwitchRef::kPodLeaf:
      case SwitchRef::kAgg:
        if (s.pod >= m.pods)
          return "pod " + std::to_string(s.pod) + " does not exist (the fabric has " +
                 std::to_string(m.pods) + " pods: pod0..pod" + std::to_string(m.pods - 1) + ")";
        if (s.index >= m.half)
          return std::string(s.kind == SwitchRef::kAgg ? "agg " : "leaf ") +
                 std::to_string(s.index) + " does not exist (" + std::to_string(m.half) +
                 " per pod)";
        return {};
      case SwitchRef::kCore:
        if (s.index >= m.cores)
          return "core " + std::to_string(s.index) + " does not exist (" + std::to_string(m.cores) +
                 " cores)";
        return {};
      case SwitchRef::kFtSpine:
        if (m.ft_tiers != 4) return "the fabric is a three-tier fat tree: it has no spines";
        if (s.index >= m.ft_spines)
          return "spine " + std::to_string(s.index) + " does not exist (" +
                 std::to_string(m.ft_spines) + " spines)";
        return {};
      default:
        return "the fabric is a fat tree: name switches like \"pod1/leaf0\", \"pod1/agg2\" or "
               "\"core9\"";
    }
  }
  if (s.kind != SwitchRef::kLeaf && s.kind != SwitchRef::kSpine)
    return "the fabric is a two-tier Clos: name switches like \"p0/spine2\" or \"p1/leaf5\"";
  if (s.plane >= m.P)
    return "plane " + std::to_string(s.plane) + " does not exist (the fabric has " +
           std::to_string(m.P) + " planes: p0..p" + std::to_string(m.P - 1) + ")";
  const uint32_t n = s.kind == SwitchRef::kLeaf ? m.L : m.S;
  if (s.index >= n)
    return (s.kind == SwitchRef::kLeaf ? "leaf " : "spine ") + std::to_string(s.index) +
           " does not exist (" + std::to_string(n) + " per plane)";
  return {};
}

std::vector<std::string> Simulation::link_names() const {
  const Impl& m = *impl_;
  std::vector<std::string> names;
  for (const Switch& s : m.switches) {
    for (const Port& port : s.ports) {
      if (port.link_id == UINT32_MAX) continue;
      if (names.size() <= port.link_id) names.resize(port.link_id + 1);
      if (port.peer_is_host) {
        // The last hop: "p0/leaf3->host5", fat trees "pod1/leaf0->host5".
        std::string n = m.fat_tree ? "pod" : "p";
        n += std::to_string(m.fat_tree ? s.index / m.half : s.plane);
        n += "/leaf";
        n += std::to_string(m.fat_tree ? s.index % m.half : s.index);
        n += "->host";
        n += std::to_string(port.peer);
        names[port.link_id] = std::move(n);
        continue;
      }
      const Switch& peer = m.switches[port.peer];
      if (m.fat_tree) {
        // Leaves and aggs by pod and index within it, cores by number.
        auto name = [&](const Switch& x) {
          if (x.kind == Switch::kCore) return "core" + std::to_string(x.index);
          if (x.kind == Switch::kSpine) return "spine" + std::to_string(x.index);
          return "pod" + std::to_string(x.index / m.half) +
                 (x.kind == Switch::kLeaf ? "/leaf" : "/agg") + std::to_string(x.index % m.half);
        };
        std::string n = name(s) + "->";
        const std::string p = name(peer);
        // Within a pod the peer's pod is implied: "pod1/leaf0->agg2".
        const bool in_pod = (s.kind == Switch::kLeaf || s.kind == Switch::kAgg) &&
                            (peer.kind == Switch::kLeaf || peer.kind == Switch::kAgg);
        n += in_pod ? p.substr(p.find('/') + 1) : p;
        names[port.link_id] = std::move(n);
        continue;
      }
      std::string n = "p";
      n += std::to_string(s.plane);
      n += s.kind == Switch::kLeaf ? "/leaf" : "/spine";
      n += std::to_string(s.index);
      n += peer.kind == Switch::kLeaf ? "->leaf" : "->spine";
      n += std::to_string(peer.index);
      names[port.link_id] = std::move(n);
    }
  }
  return names;
}

}  // namespace mrc::sim
