#include "sim/partition.h"

#include <gtest/gtest.h>

#include <numeric>

#include "sim/simulation.h"
#include "sim/workloads.h"

namespace mrc::sim {
namespace {

SimConfig clos(uint32_t hosts, uint32_t planes, uint32_t radix) {
  SimConfig c;
  c.topo.hosts = hosts;
  c.topo.planes = planes;
  c.topo.radix = radix;
  c.sample_interval = 0;
  return c;
}

SimConfig fat_tree(uint32_t hosts, uint32_t radix, uint32_t tiers) {
  SimConfig c;
  c.topo.kind = TopologyKind::kFatTree;
  c.topo.hosts = hosts;
  c.topo.planes = 1;
  c.topo.radix = radix;
  c.topo.tiers = tiers;
  c.sample_interval = 0;
  return c;
}

TEST(Partition, fabric_shape__agrees_with_the_simulator) {
  for (const SimConfig& c : {clos(64, 2, 16), clos(100, 4, 16), clos(1024, 1, 64),
                             fat_tree(128, 8, 3), fat_tree(100, 8, 3), fat_tree(32, 4, 4)}) {
    auto s = fabric_shape(c.topo);
    ASSERT_TRUE(s);
    auto sim = Simulation::create(c);
    ASSERT_TRUE(sim);
    EXPECT_EQ(s->leaves, (*sim)->num_leaves());
    if (s->fat_tree) {
      EXPECT_EQ(s->pods, (*sim)->num_pods());
      EXPECT_EQ(s->cores, (*sim)->num_cores());
      EXPECT_EQ(s->ft_spines, (*sim)->num_fat_tree_spines());
    } else {
      EXPECT_EQ(s->spines, (*sim)->num_spines());
    }
  }
}

TEST(Partition, fabric_shape__rejects_what_the_simulator_rejects) {
  SimConfig c = clos(64, 2, 16);
  c.topo.hosts_per_leaf = 16;  // no uplinks
  EXPECT_FALSE(fabric_shape(c.topo));
  EXPECT_FALSE(Simulation::create(c));
}

TEST(Partition, layout__blocks_depend_on_the_fabric_only_and_hosts_follow_their_leaf) {
  auto s = fabric_shape(clos(131072, 8, 512).topo);
  ASSERT_TRUE(s);
  const BlockLayout layout(*s);
  EXPECT_EQ(layout.blocks(), kMaxBlocks);  // 512 leaves: 8 per block
  for (HostId h = 0; h < s->hosts; h += 997)
    EXPECT_EQ(layout.host_block(h), layout.leaf_block(h / s->hosts_per_leaf));
  EXPECT_EQ(layout.leaf_block(0), 0u);
  EXPECT_EQ(layout.leaf_block(511), kMaxBlocks - 1);
  EXPECT_EQ(layout.spine_block(255), kMaxBlocks - 1);
  // Small fabrics: one block per leaf.
  auto small = fabric_shape(clos(64, 2, 16).topo);
  EXPECT_EQ(BlockLayout(*small).blocks(), 8u);
}

TEST(Partition, rank_of__contiguous_ranges_of_nearly_equal_size) {
  for (uint32_t ranks : {1u, 2u, 3u, 4u, 7u, 64u}) {
    std::vector<uint32_t> count(ranks, 0);
    uint32_t last = 0;
    for (uint32_t b = 0; b < 64; ++b) {
      const uint32_t r = BlockLayout::rank_of(b, 64, ranks);
      ASSERT_LT(r, ranks);
      EXPECT_GE(r, last);  // contiguous
      last = r;
      ++count[r];
    }
    for (uint32_t c : count)
      EXPECT_LE(c, 64 / ranks + 1);
  }
}

TEST(Partition, plan__splits_hosts_switches_and_qps_evenly) {
  const SimConfig c = clos(1024, 8, 64);
  auto flows = permutation_flows(all_hosts(1024), 1 << 20, 0, 1);
  ASSERT_TRUE(flows);
  auto plan = plan_partition(c, 2, *flows, 32 * 8);
  ASSERT_TRUE(plan);
  ASSERT_EQ(plan->per_rank.size(), 2u);
  EXPECT_EQ(plan->per_rank[0].hosts + plan->per_rank[1].hosts, 1024u);
  EXPECT_EQ(plan->per_rank[0].hosts, 512u);
  EXPECT_EQ(plan->per_rank[0].switches, plan->per_rank[1].switches);
  // A random permutation: each flow a QP at each end, about half on each rank.
  const uint64_t qps = plan->per_rank[0].qps + plan->per_rank[1].qps;
  EXPECT_LE(qps, 2048u);  // a pair's two flows (a 2-cycle) share one QP at each end
  EXPECT_GE(qps, 1024u);
  EXPECT_NEAR(static_cast<double>(plan->per_rank[0].qps), qps / 2.0, qps * 0.1);
  // Leaf-spine links: 8 planes x 32 leaves x 32 uplinks; half of them cross (spines split
  // like the leaves).
  EXPECT_EQ(plan->links, 8u * 32 * 32);
  EXPECT_EQ(plan->cross_rank_links, plan->links / 2);
  EXPECT_EQ(plan->lookahead, c.topo.link_delay);
  EXPECT_FALSE(format_plan(*plan).empty());
}

// Two leaves, two spines, two ranks: leaf 0 and spine 0 on rank 0, leaf 1 and spine 1 on
// rank 1. A packet from leaf 0 to leaf 1 crosses once whichever spine it takes, leaving rank
// 0 (via spine 0: at spine 0 -> leaf 1; via spine 1: at leaf 0 -> spine 1); the ACKs back
// (one per ack_every packets) cross once too, leaving rank 1.
TEST(Partition, plan__exchange_counts_the_crossings_of_each_path_and_the_acks_back) {
  SimConfig c = clos(4, 1, 4);
  auto shape = fabric_shape(c.topo);
  ASSERT_TRUE(shape);
  ASSERT_EQ(shape->leaves, 2u);
  ASSERT_EQ(shape->spines, 2u);
  c.transport.mtu = 1000;
  c.transport.ack_every = 4;
  const std::vector<FlowSpec> flows = {FlowSpec{0, 2, 10'000}, FlowSpec{0, 1, 50'000}};
  auto plan = plan_partition(c, 2, flows, 2, MemoryModel{}, ExchangeModel{100});
  ASSERT_TRUE(plan);
  // The second flow stays on leaf 0: no crossing. 10 of the 60 packets cross once.
  EXPECT_DOUBLE_EQ(plan->per_rank[0].exchange_packets, 10.0);
  EXPECT_DOUBLE_EQ(plan->per_rank[1].exchange_packets, 2.5);
  EXPECT_DOUBLE_EQ(plan->crossings_per_packet, 10.0 / 60);
  EXPECT_EQ(plan->per_rank[0].exchange_bytes, 1000u);
  EXPECT_EQ(plan->per_rank[1].exchange_bytes, 250u);
  auto one = plan_partition(c, 1, flows, 2);
  ASSERT_TRUE(one);
  EXPECT_EQ(one->per_rank[0].exchange_packets, 0.0);
  EXPECT_EQ(one->crossings_per_packet, 0.0);
}

// A path crosses each of its switch-switch hops at most once: two in a three-tier fat tree
// (agg-core and core-agg; a leaf shares its agg's block), four in a four-tier one.
TEST(Partition, plan__exchange_in_fat_trees_stays_within_the_paths_hops) {
  for (auto [cfg, most] :
       {std::pair{fat_tree(128, 8, 3), 2.0}, std::pair{fat_tree(32, 4, 4), 4.0}}) {
    auto flows = permutation_flows(all_hosts(cfg.topo.hosts), 1 << 20, 0, 1);
    ASSERT_TRUE(flows);
    auto plan = plan_partition(cfg, 2, *flows, 16);
    ASSERT_TRUE(plan);
    EXPECT_GT(plan->crossings_per_packet, 0.0);
    EXPECT_LE(plan->crossings_per_packet, most);
    const double packets = static_cast<double>(flows->size()) * ((1 << 20) / cfg.transport.mtu);
    const double total = plan->per_rank[0].exchange_packets + plan->per_rank[1].exchange_packets;
    // Data crossings plus the ACKs' (the same paths backwards, one ACK per ack_every).
    EXPECT_NEAR(total, packets * plan->crossings_per_packet * (1.0 + 1.0 / cfg.transport.ack_every),
                total * 1e-9);
  }
}

TEST(Partition, plan__one_rank_has_no_cross_links_and_too_many_ranks_is_an_error) {
  const SimConfig c = clos(64, 2, 16);  // 8 leaves: 8 blocks
  auto one = plan_partition(c, 1, {}, 16);
  ASSERT_TRUE(one);
  EXPECT_EQ(one->cross_rank_links, 0u);
  EXPECT_TRUE(plan_partition(c, 8, {}, 16));
  EXPECT_FALSE(plan_partition(c, 9, {}, 16));
  EXPECT_FALSE(plan_partition(c, 0, {}, 16));
}

// The blocks layout in one process gives the same results on every run, finishes every flow,
// and differs from the default layout only by the rules docs/simulator.md names.
TEST(Partition, blocks_layout__permutation_with_a_link_failure_completes) {
  SimConfig c = clos(64, 2, 16);
  c.block_partitions = true;
  auto run = [&] {
    auto sim = *Simulation::create(c);
    auto flows = *permutation_flows(all_hosts(64), 256 << 10, 0, 3);
    for (const FlowSpec& f : flows)
      EXPECT_TRUE(sim->add_flow(f));
    sim->link_down(LinkRef{LinkRef::kLeafSpine, 0, 1, 2, 0}, us(5));
    sim->run(ms(50));
    return sim->flows();
  };
  const auto a = run(), b = run();
  ASSERT_EQ(a.size(), 64u);
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_TRUE(a[i].ok) << i;
    EXPECT_EQ(a[i].end, b[i].end) << i;
  }
}

TEST(Partition, blocks_layout__needs_a_link_delay) {
  SimConfig c = clos(64, 2, 16);
  c.block_partitions = true;
  c.topo.link_delay = 0;
  EXPECT_FALSE(Simulation::create(c));
}

// LoneRank: rank K of an N-rank run built and started in a process of its own, stopped
// before anything from another rank could arrive (the first flow start plus two link delays).
struct LoneRun {
  SimStats stats;
  size_t flow_records = 0;
  uint64_t bytes_sent_away = 0;
};
LoneRun run_lone(const SimConfig& c, const std::vector<FlowSpec>& flows, uint32_t rank,
                 uint32_t ranks) {
  LoneRank lone(rank, ranks);
  auto sim = Simulation::create(c, &lone);
  EXPECT_TRUE(sim);
  if (!sim) return {};
  for (const FlowSpec& f : flows)
    EXPECT_TRUE((*sim)->add_flow(f));
  (*sim)->run(2 * c.topo.link_delay - 1);
  return LoneRun{(*sim)->stats(), (*sim)->flows().size(), lone.cost().bytes_sent};
}

TEST(Partition, lone_rank__holds_exactly_the_plans_qps_and_flow_records) {
  const SimConfig c = clos(64, 2, 16);  // 8 leaves: 8 blocks
  const auto flows = *all_to_all_flows(all_hosts(64), 1 << 20, 0);
  for (uint32_t ranks : {1u, 2u, 4u, 8u}) {
    auto plan = plan_partition(c, ranks, flows, 8 * 2);
    ASSERT_TRUE(plan);
    for (uint32_t k = 0; k < ranks; ++k) {
      SCOPED_TRACE("rank " + std::to_string(k) + " of " + std::to_string(ranks));
      const LoneRun r = run_lone(c, flows, k, ranks);
      // Every QP of the rank's hosts (sending ends and, through the accepts the absent
      // senders' ranks would send, receiving ends) and the records of the flows it sends.
      EXPECT_EQ(r.stats.qps, plan->per_rank[k].qps);
      EXPECT_EQ(r.flow_records, plan->per_rank[k].flows);
      EXPECT_GT(r.stats.data_packets, 0u);
      // Packets for other ranks' spines were sent away (and dropped), except on one rank.
      EXPECT_EQ(r.bytes_sent_away > 0, ranks > 1);
    }
  }
}

// Up to two link delays nothing of another rank is needed: the ranks measured alone add up
// to the whole fabric run in one process, stopped at the same time.
TEST(Partition, lone_rank__ranks_alone_add_up_to_the_whole_run_until_two_link_delays) {
  SimConfig c = clos(64, 2, 16);
  const auto flows = *all_to_all_flows(all_hosts(64), 1 << 20, 0);
  SimConfig whole_cfg = c;
  whole_cfg.block_partitions = true;
  auto whole = *Simulation::create(whole_cfg);
  for (const FlowSpec& f : flows)
    ASSERT_TRUE(whole->add_flow(f));
  whole->run(2 * c.topo.link_delay - 1);
  const SimStats w = whole->stats();
  SimStats sum;
  for (uint32_t k = 0; k < 4; ++k) {
    const SimStats s = run_lone(c, flows, k, 4).stats;
    sum.qps += s.qps;
    sum.qp_bytes += s.qp_bytes;
    sum.data_packets += s.data_packets;
  }
  EXPECT_EQ(sum.qps, w.qps);
  EXPECT_EQ(sum.qp_bytes, w.qp_bytes);
  EXPECT_EQ(sum.data_packets, w.data_packets);
  EXPECT_GT(w.data_packets, 0u);
}

}  // namespace
}  // namespace mrc::sim
