#include "sim/partition.h"

#include <algorithm>
#include <unordered_map>
#include <unordered_set>

#include <cstdarg>
#include <cstdio>
#include <cstdlib>

namespace mrc::sim {

// The same arithmetic as Simulation's build (simulation_test checks that both agree).
SimResult<FabricShape> fabric_shape(const TopologyConfig& t) {
  FabricShape s;
  s.hosts = t.hosts;
  s.planes = t.planes;
  if (t.hosts < 2 || t.planes == 0 || t.planes > 32 || t.radix < 2) {
    return sim_fail("topo: hosts " + std::to_string(t.hosts) + ", planes " +
                    std::to_string(t.planes) + ", radix " + std::to_string(t.radix) +
                    ": need at least 2 hosts, 1 to 32 planes and a radix of at least 2");
  }
  if (t.kind == TopologyKind::kFatTree) {
    if (t.planes != 1 || (t.tiers != 3 && t.tiers != 4) || t.radix < 4 || t.radix % 2 != 0)
      return sim_fail(
          "topo: a fat tree has one plane, 3 or 4 tiers and an even radix of at "
          "least 4 (planes " +
          std::to_string(t.planes) + ", tiers " + std::to_string(t.tiers) + ", radix " +
          std::to_string(t.radix) + ")");
    s.fat_tree = true;
    s.half = t.radix / 2;
    s.hosts_per_leaf = s.uplinks = s.half;
    const uint64_t pod_hosts = static_cast<uint64_t>(s.half) * s.half;
    if (t.tiers == 3) {
      s.pods = static_cast<uint32_t>((t.hosts + pod_hosts - 1) / pod_hosts);
      s.cores = s.half * s.half;
    } else {
      const uint32_t superpods =
          static_cast<uint32_t>((t.hosts + pod_hosts * s.half - 1) / (pod_hosts * s.half));
      s.pods = superpods * s.half;
      s.ft_spines = superpods * s.half * s.half;
      s.cores = s.half * s.half * s.half;
    }
    s.leaves = s.aggs = s.pods * s.half;
    return s;
  }
  s.hosts_per_leaf = t.hosts_per_leaf ? t.hosts_per_leaf : t.radix / 2;
  if (s.hosts_per_leaf == 0 || s.hosts_per_leaf >= t.radix)
    return sim_fail("topo: hosts_per_leaf " + std::to_string(s.hosts_per_leaf) +
                    " must be at least 1 and below the radix " + std::to_string(t.radix));
  s.uplinks = t.radix - s.hosts_per_leaf;
  s.leaves = (t.hosts + s.hosts_per_leaf - 1) / s.hosts_per_leaf;
  s.spines = t.spines ? t.spines : s.uplinks;
  if (s.spines == 0 || s.uplinks % s.spines != 0)
    return sim_fail("topo: spines " + std::to_string(s.spines) + " must divide the " +
                    std::to_string(s.uplinks) + " uplinks of a leaf");
  return s;
}

BlockLayout::BlockLayout(const FabricShape& s) : shape_(s) {
  const uint32_t groups = s.fat_tree ? s.pods : s.leaves;
  blocks_ = std::max<uint32_t>(1, std::min(groups, kMaxBlocks));
}

uint32_t BlockLayout::leaf_block(uint32_t leaf) const {
  if (shape_.fat_tree) return spread(leaf / shape_.half, shape_.pods, blocks_);
  return spread(leaf, shape_.leaves, blocks_);
}
uint32_t BlockLayout::spine_block(uint32_t spine) const {
  return spread(spine, shape_.spines, blocks_);
}
uint32_t BlockLayout::agg_block(uint32_t agg) const {
  return spread(agg / shape_.half, shape_.pods, blocks_);
}
uint32_t BlockLayout::ft_spine_block(uint32_t spine) const {
  return spread(spine, shape_.ft_spines, blocks_);
}
uint32_t BlockLayout::core_block(uint32_t core) const {
  return spread(core, shape_.cores, blocks_);
}

namespace {

// The rank boundaries a packet crosses from leaf `from` to leaf `to`, in expectation over the
// paths between them (every spine, or agg, core and fat-tree spine, equally likely: what
// spraying over many EVs and hashing over many flows both give), counted at the rank each
// crossing leaves from: out[r] += the expected crossings that leave rank r. Hosts share their
// leaf's block, so only switch-switch hops can cross.
class CrossingCounter {
 public:
  CrossingCounter(const FabricShape& s, const BlockLayout& layout, uint32_t ranks)
      : s_(s), layout_(layout), ranks_(ranks), out_(ranks, 0.0) {}

  // Adds one packet's expected crossings from leaf `from` to leaf `to`, `weight` times.
  void add(uint32_t from, uint32_t to, double weight) {
    if (from == to) return;
    if (!s_.fat_tree) {
      const double w = weight / s_.spines;
      for (uint32_t sp = 0; sp < s_.spines; ++sp) {
        hop(layout_.leaf_block(from), layout_.spine_block(sp), w);
        hop(layout_.spine_block(sp), layout_.leaf_block(to), w);
      }
      return;
    }
    const uint32_t half = s_.half, sq = half * half;
    const uint32_t pod_a = from / half, pod_b = to / half;
    const double w = weight / half;
    for (uint32_t a = 0; a < half; ++a) {
      const uint32_t up = pod_a * half + a, down = pod_b * half + a;
      hop(layout_.leaf_block(from), layout_.agg_block(up), w);
      hop(layout_.agg_block(down), layout_.leaf_block(to), w);
      if (pod_a == pod_b) continue;
      const double wi = w / half;
      for (uint32_t i = 0; i < half; ++i) {
        if (s_.ft_spines == 0) {
          const uint32_t core = a * half + i;
          hop(layout_.agg_block(up), layout_.core_block(core), wi);
          hop(layout_.core_block(core), layout_.agg_block(down), wi);
          continue;
        }
        // Four tiers: superpods of `half` pods share a set of fat-tree spines.
        const uint32_t g_up = (pod_a / half) * sq + a * half + i;
        const uint32_t g_down = (pod_b / half) * sq + a * half + i;
        hop(layout_.agg_block(up), layout_.ft_spine_block(g_up), wi);
        hop(layout_.ft_spine_block(g_down), layout_.agg_block(down), wi);
        if (g_up == g_down) continue;
        const double wj = wi / half;
        for (uint32_t j = 0; j < half; ++j) {
          const uint32_t core = (a * half + i) * half + j;
          hop(layout_.ft_spine_block(g_up), layout_.core_block(core), wj);
          hop(layout_.core_block(core), layout_.ft_spine_block(g_down), wj);
        }
      }
    }
  }
  const std::vector<double>& out() const { return out_; }

 private:
  void hop(uint32_t block_a, uint32_t block_b, double w) {
    const uint32_t ra = BlockLayout::rank_of(block_a, layout_.blocks(), ranks_);
    if (ra != BlockLayout::rank_of(block_b, layout_.blocks(), ranks_)) out_[ra] += w;
  }
  const FabricShape& s_;
  const BlockLayout& layout_;
  uint32_t ranks_;
  std::vector<double> out_;
};

// The exchange a run's flows cause: each flow's data packets from its sender's leaf to its
// receiver's, and the ACKs back (one per `ack_every` packets), into p.per_rank's
// exchange_packets and p.crossings_per_packet.
void add_exchange_volume(PartitionPlan& p, const FabricShape& s, const BlockLayout& layout,
                         const TransportConfig& t, const std::vector<FlowSpec>& flows) {
  if (p.ranks < 2) return;
  // A packet's expected crossings per rank depend only on the ranks of its two leaves and,
  // in a fat tree, on whether they share a pod and which superpods they are in (the other
  // switches' blocks do not depend on the leaves): one computation per such class of leaf
  // pairs, not per flow (an all-to-all has millions of flows).
  const auto rank_of_leaf = [&](uint32_t leaf) {
    return BlockLayout::rank_of(layout.leaf_block(leaf), p.blocks, p.ranks);
  };
  std::unordered_map<uint64_t, std::vector<double>> per_class;
  const auto crossings_of = [&](uint32_t from, uint32_t to) -> const std::vector<double>& {
    uint64_t key = static_cast<uint64_t>(rank_of_leaf(from)) << 56 |
                   static_cast<uint64_t>(rank_of_leaf(to)) << 48 | (from == to ? 1u : 0u);
    if (s.fat_tree) {
      const uint32_t pod_a = from / s.half, pod_b = to / s.half;
      const uint64_t superpods =
          s.ft_spines > 0 ? (uint64_t{pod_a / s.half} << 24 | pod_b / s.half) : 0;
      key |= (pod_a == pod_b ? 2u : 0u) | superpods << 2;
    }
    auto [it, fresh] = per_class.try_emplace(key);
    if (fresh) {
      CrossingCounter c(s, layout, p.ranks);
      c.add(from, to, 1.0);
      it->second = c.out();
    }
    return it->second;
  };
  const double acks_per_packet = 1.0 / std::max<uint32_t>(1, t.ack_every);
  double packets = 0, crossings = 0;
  for (const FlowSpec& f : flows) {
    if (f.src >= s.hosts || f.dst >= s.hosts || f.src == f.dst) continue;
    const uint32_t from = f.src / s.hosts_per_leaf, to = f.dst / s.hosts_per_leaf;
    const double n = static_cast<double>((f.bytes + t.mtu - 1) / std::max<uint32_t>(1, t.mtu));
    packets += n;
    const std::vector<double>& there = crossings_of(from, to);
    const std::vector<double>& back = crossings_of(to, from);
    for (uint32_t r = 0; r < p.ranks; ++r) {
      p.per_rank[r].exchange_packets += n * there[r] + n * acks_per_packet * back[r];
      crossings += n * there[r];
    }
  }
  p.crossings_per_packet = packets > 0 ? crossings / packets : 0;
}

}  // namespace

SimResult<PartitionPlan> plan_partition(const SimConfig& cfg, uint32_t ranks,
                                        const std::vector<FlowSpec>& flows, uint32_t paths_per_qp,
                                        const MemoryModel& model, const ExchangeModel& exchange) {
  auto shape = fabric_shape(cfg.topo);
  if (!shape) return std::unexpected(shape.error());
  const FabricShape& s = *shape;
  const BlockLayout layout(s);
  if (ranks == 0 || ranks > layout.blocks())
    return sim_fail(std::to_string(ranks) + " ranks: the fabric has " +
                    std::to_string(layout.blocks()) + " blocks to share (1 rank at least)");
  PartitionPlan p;
  p.ranks = ranks;
  p.blocks = layout.blocks();
  p.lookahead = cfg.topo.link_delay;
  p.per_rank.resize(ranks);
  const auto rank = [&](uint32_t block) { return BlockLayout::rank_of(block, p.blocks, ranks); };
  for (uint32_t b = 0; b < p.blocks; ++b)
    ++p.per_rank[rank(b)].blocks;
  for (HostId h = 0; h < s.hosts; ++h)
    ++p.per_rank[rank(layout.host_block(h))].hosts;
  // A link between blocks: count it, and whether its ends are on different ranks.
  const auto link = [&](uint32_t block_a, uint32_t block_b) {
    ++p.links;
    if (rank(block_a) != rank(block_b)) ++p.cross_rank_links;
  };
  const auto add_switch = [&](uint32_t block, uint64_t ports) {
    RankPlan& r = p.per_rank[rank(block)];
    ++r.switches;
    r.ports += ports;
  };
  if (!s.fat_tree) {
    const uint32_t parallel = s.uplinks / s.spines;
    for (uint32_t plane = 0; plane < s.planes; ++plane) {
      for (uint32_t l = 0; l < s.leaves; ++l) {
        add_switch(layout.leaf_block(l), s.hosts_per_leaf + s.uplinks);
        for (uint32_t u = 0; u < s.uplinks; ++u)
          link(layout.leaf_block(l), layout.spine_block(u % s.spines));
      }
      for (uint32_t sp = 0; sp < s.spines; ++sp)
        add_switch(layout.spine_block(sp), static_cast<uint64_t>(s.leaves) * parallel);
    }
  } else {
    const uint32_t half = s.half, sq = half * half;
    for (uint32_t e = 0; e < s.leaves; ++e) {
      add_switch(layout.leaf_block(e), 2 * half);
      for (uint32_t a = 0; a < half; ++a)
        link(layout.leaf_block(e), layout.agg_block((e / half) * half + a));
    }
    for (uint32_t g = 0; g < s.aggs; ++g) {
      add_switch(layout.agg_block(g), 2 * half);
      const uint32_t pod = g / half, a = g % half;
      for (uint32_t i = 0; i < half; ++i) {
        if (s.ft_spines > 0) {
          link(layout.agg_block(g), layout.ft_spine_block((pod / half) * sq + a * half + i));
        } else {
          link(layout.agg_block(g), layout.core_block(a * half + i));
        }
      }
    }
    for (uint32_t g = 0; g < s.ft_spines; ++g) {
      add_switch(layout.ft_spine_block(g), 2 * half);
      for (uint32_t i = 0; i < half; ++i)
        link(layout.ft_spine_block(g), layout.core_block((g % sq) * half + i));
    }
    const uint32_t core_ports = s.ft_spines > 0 ? s.ft_spines / sq : s.pods;
    for (uint32_t c = 0; c < s.cores; ++c)
      add_switch(layout.core_block(c), core_ports);
  }
  // QPs: one at each end per host pair (both directions share it), one per plane for RoCE.
  const uint32_t qps_per_pair = cfg.transport.kind == TransportKind::kRoce ? s.planes : 1;
  std::unordered_set<uint64_t> pairs;
  std::vector<uint64_t> host_sent(s.hosts, 0);
  for (const FlowSpec& f : flows) {
    if (f.src >= s.hosts || f.dst >= s.hosts || f.src == f.dst) continue;
    host_sent[f.src] = std::min<uint64_t>(host_sent[f.src] + f.bytes, 1 << 20);
    ++p.per_rank[rank(layout.host_block(f.src))].flows;
    const uint64_t lo = std::min(f.src, f.dst), hi = std::max(f.src, f.dst);
    if (!pairs.insert(lo << 32 | hi).second) continue;
    p.per_rank[rank(layout.host_block(f.src))].qps += qps_per_pair;
    p.per_rank[rank(layout.host_block(f.dst))].qps += qps_per_pair;
  }
  for (HostId h = 0; h < s.hosts; ++h)
    p.per_rank[rank(layout.host_block(h))].sent_bytes += host_sent[h];
  add_exchange_volume(p, s, layout, cfg.transport, flows);
  for (RankPlan& r : p.per_rank)
    r.exchange_bytes = static_cast<uint64_t>(r.exchange_packets * exchange.bytes_per_packet);
  for (RankPlan& r : p.per_rank) {
    // A rank keeps the records of the flows it sends, and an index entry for every flow.
    const uint64_t own_flows = ranks == 1 ? flows.size() : r.flows;
    r.flows = own_flows;
    r.predicted_bytes =
        model.base + r.hosts * model.per_host +
        r.qps * (model.per_qp_base + paths_per_qp * model.per_qp_path) + r.ports * model.per_port +
        own_flows * model.per_flow + (ranks == 1 ? 0 : flows.size() * model.per_flow_index) +
        static_cast<uint64_t>(static_cast<double>(r.sent_bytes) * model.in_flight_share);
  }
  return p;
}

namespace {
std::string printf_string(const char* format, ...) {
  char buf[256];
  va_list args;
  va_start(args, format);
  std::vsnprintf(buf, sizeof buf, format, args);
  va_end(args);
  return buf;
}
}  // namespace

std::string format_plan(const PartitionPlan& p) {
  std::string out = printf_string(
      "%u ranks, %u blocks; lookahead %.3f us; switch-switch links %llu, across ranks %llu "
      "(%.1f %%)\n",
      p.ranks, p.blocks, static_cast<double>(p.lookahead) / kPicosPerMicro,
      static_cast<unsigned long long>(p.links), static_cast<unsigned long long>(p.cross_rank_links),
      p.links ? 100.0 * static_cast<double>(p.cross_rank_links) / static_cast<double>(p.links)
              : 0.0);
  if (p.ranks > 1)
    out += printf_string(
        "exchange: a data packet crosses %.2f rank boundaries on average (the flows at the "
        "start, their ACKs too in the columns below)\n",
        p.crossings_per_packet);
  out +=
      printf_string("%5s %7s %9s %9s %10s %11s %14s %16s %12s\n", "rank", "blocks", "hosts",
                    "switches", "ports", "QPs", "predicted MB", "exchange packets", "exchange MB");
  for (size_t r = 0; r < p.per_rank.size(); ++r) {
    const RankPlan& x = p.per_rank[r];
    out += printf_string(
        "%5zu %7u %9llu %9llu %10llu %11llu %14.0f %16.0f %12.1f\n", r, x.blocks,
        static_cast<unsigned long long>(x.hosts), static_cast<unsigned long long>(x.switches),
        static_cast<unsigned long long>(x.ports), static_cast<unsigned long long>(x.qps),
        static_cast<double>(x.predicted_bytes) / (1 << 20), x.exchange_packets,
        static_cast<double>(x.exchange_bytes) / (1 << 20));
  }
  return out;
}

size_t LoneRank::exchange(const std::vector<std::span<const uint8_t>>& out,
                          std::vector<uint8_t>& in) {
  ++cost_.calls;
  for (uint32_t r = 0; r < out.size(); ++r)
    if (r != rank_) cost_.bytes_sent += out[r].size();
  // What this rank sends itself (a window's header and completions), as MpiExchange gives it.
  if (rank_ >= out.size()) return 0;
  if (in.size() < out[rank_].size()) in.resize(out[rank_].size());
  std::copy(out[rank_].begin(), out[rank_].end(), in.begin());
  return out[rank_].size();
}

void LoneRank::abort(const std::string& message, int status) {
  std::fprintf(stderr, "mrc-sim: rank %u: %s\n", rank_, message.c_str());
  std::fflush(stderr);
  std::_Exit(status);
}

}  // namespace mrc::sim
