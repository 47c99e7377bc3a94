// Workload generators and dependent workloads (src/sim/workloads.h): pure logic against a
// fake flow sink with a simple completion model, then small real simulations.
#include "sim/workloads.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <map>
#include <queue>
#include <set>

#include "sim/runner.h"
#include "sim/simulation.h"

namespace mrc::sim {
namespace {

// A flow completes at start + bytes at 100 Gb/s + 1 us (plus `slow` of its sender); flows
// listed in `fail_ids` complete with an error.
class FakeNet final : public FlowSink {
 public:
  SimResult<FlowId> add_flow(const FlowSpec& s) override {
    if (s.src == s.dst || s.bytes == 0) return sim_fail("bad flow");
    FlowResult r;
    r.id = static_cast<FlowId>(flows.size());
    r.spec = s;
    r.end = s.start + s.bytes * 8 * kPicosPerSecond / 100'000'000'000ull + us(1);
    if (auto it = slow.find(s.src); it != slow.end()) r.end += it->second;
    r.fct = r.end - s.start;
    r.ok = !fail_ids.count(r.id);
    flows.push_back(r);
    pending.push({r.end, r.id});
    return r.id;
  }
  // Delivers completions in time order until none is left.
  void run(WorkloadDriver& d) {
    while (!pending.empty()) {
      auto [t, id] = pending.top();
      pending.pop();
      d.on_flow_complete(flows[id]);
    }
  }
  std::vector<FlowResult> flows;
  std::set<FlowId> fail_ids;
  std::map<HostId, Time> slow;  // extra time for every flow a host sends
  std::priority_queue<std::pair<Time, FlowId>, std::vector<std::pair<Time, FlowId>>, std::greater<>>
      pending;
};

// ---- static generators -----------------------------------------------------------------------

TEST(Workloads, derangement__is_a_permutation_without_fixed_points_and_deterministic) {
  for (uint32_t n : {2u, 3u, 5u, 16u, 64u, 1000u}) {
    for (uint64_t seed : {1ull, 2ull, 99ull}) {
      auto p = random_derangement(n, seed);
      ASSERT_TRUE(p) << p.error().message;
      std::vector<uint32_t> sorted = *p;
      std::sort(sorted.begin(), sorted.end());
      for (uint32_t i = 0; i < n; ++i) {
        EXPECT_EQ(sorted[i], i);
        EXPECT_NE((*p)[i], i) << "fixed point at " << i;
      }
      EXPECT_EQ(*p, *random_derangement(n, seed)) << "same seed, same permutation";
    }
  }
  EXPECT_NE(*random_derangement(64, 1), *random_derangement(64, 2));
  EXPECT_FALSE(random_derangement(1, 1));
  EXPECT_FALSE(random_derangement(0, 1));
}

TEST(Workloads, permutation__every_host_sends_once_and_receives_once) {
  auto f = permutation_flows(all_hosts(32), 1000, us(5), 7);
  ASSERT_TRUE(f);
  ASSERT_EQ(f->size(), 32u);
  std::set<HostId> src, dst;
  for (const FlowSpec& s : *f) {
    EXPECT_NE(s.src, s.dst);
    EXPECT_EQ(s.bytes, 1000u);
    EXPECT_EQ(s.start, us(5));
    src.insert(s.src);
    dst.insert(s.dst);
  }
  EXPECT_EQ(src.size(), 32u);
  EXPECT_EQ(dst.size(), 32u);
  EXPECT_FALSE(permutation_flows(all_hosts(8), 0, 0, 1));
}

TEST(Workloads, uniform__count_distinct_endpoints_start_window_deterministic) {
  auto f = uniform_random_flows(all_hosts(10), 500, 64, us(10), us(100), 3);
  ASSERT_TRUE(f);
  ASSERT_EQ(f->size(), 500u);
  std::set<HostId> seen;
  for (const FlowSpec& s : *f) {
    EXPECT_NE(s.src, s.dst);
    EXPECT_LT(s.src, 10u);
    EXPECT_LT(s.dst, 10u);
    EXPECT_GE(s.start, us(10));
    EXPECT_LT(s.start, us(110));
    seen.insert(s.src);
  }
  EXPECT_EQ(seen.size(), 10u);
  auto g = uniform_random_flows(all_hosts(10), 500, 64, us(10), us(100), 3);
  for (size_t i = 0; i < f->size(); ++i) {
    EXPECT_EQ((*f)[i].src, (*g)[i].src);
    EXPECT_EQ((*f)[i].dst, (*g)[i].dst);
    EXPECT_EQ((*f)[i].start, (*g)[i].start);
  }
  EXPECT_FALSE(uniform_random_flows(all_hosts(1), 5, 64, 0, 0, 1));
}

TEST(Workloads, incast__n_distinct_senders_to_one_destination) {
  auto f = incast_flows(all_hosts(16), 14, 5, 4096, 0);
  ASSERT_TRUE(f);
  ASSERT_EQ(f->size(), 5u);
  std::vector<HostId> senders;
  for (const FlowSpec& s : *f) {
    EXPECT_EQ(s.dst, 14u);
    senders.push_back(s.src);
  }
  EXPECT_EQ(senders, (std::vector<HostId>{15, 0, 1, 2, 3})) << "the hosts after dst, wrapping";
  EXPECT_FALSE(incast_flows(all_hosts(16), 3, 16, 1, 0)) << "more senders than other hosts";
  EXPECT_FALSE(incast_flows(all_hosts(16), 3, 0, 1, 0));
  EXPECT_FALSE(incast_flows(all_hosts(16), 99, 2, 1, 0)) << "dst not in the group";
}

TEST(Workloads, all_to_all__every_ordered_pair_once_with_s_over_n) {
  const std::vector<HostId> g = {3, 5, 8, 13};
  auto f = all_to_all_flows(g, 4000, us(1));
  ASSERT_TRUE(f);
  ASSERT_EQ(f->size(), 12u);
  std::set<std::pair<HostId, HostId>> pairs;
  for (const FlowSpec& s : *f) {
    EXPECT_EQ(s.bytes, 1000u);
    EXPECT_NE(s.src, s.dst);
    pairs.insert({s.src, s.dst});
  }
  EXPECT_EQ(pairs.size(), 12u);
  EXPECT_FALSE(all_to_all_flows(g, 3, 0)) << "fewer bytes than ranks";
}

// ---- bus bandwidth -------------------------------------------------------------------------

TEST(Workloads, busbw__nccl_tests_factors_and_units) {
  EXPECT_DOUBLE_EQ(busbw_factor(CollectiveKind::kAllReduce, 8), 2.0 * 7 / 8);
  EXPECT_DOUBLE_EQ(busbw_factor(CollectiveKind::kAllToAll, 8), 7.0 / 8);
  EXPECT_DOUBLE_EQ(busbw_factor(CollectiveKind::kAllReduce, 2), 1.0);
  CollectiveResult c;
  c.kind = CollectiveKind::kAllReduce;
  c.ranks = 8;
  c.bytes = 1'000'000'000;  // 1 GB in 1 s: algbw 1 GB/s (1e9 bytes per second)
  c.start = ms(1);
  c.end = ms(1) + kPicosPerSecond;
  EXPECT_DOUBLE_EQ(c.algbw_GBps(), 1.0);
  EXPECT_DOUBLE_EQ(c.busbw_GBps(), 1.75);
  c.end = c.start;
  EXPECT_EQ(c.algbw_GBps(), 0.0);
}

// ---- ring AllReduce ------------------------------------------------------------------------

TEST(Workloads, ring_allreduce__2n_minus_2_steps_of_s_over_n_chained_on_receives) {
  const uint32_t n = 5;
  const uint64_t S = 5 * 4096 + 3;  // the first 3 chunks one byte larger
  const std::vector<HostId> group = {10, 11, 12, 13, 14};
  FakeNet net;
  WorkloadDriver d(net);
  auto& ar = static_cast<RingAllReduce&>(d.add(std::make_unique<RingAllReduce>(group, S, us(7))));
  ASSERT_TRUE(d.start());
  EXPECT_EQ(net.flows.size(), n) << "step 0 of every rank starts at once";
  net.run(d);
  ASSERT_FALSE(d.error()) << d.error()->message;
  ASSERT_TRUE(d.done());
  EXPECT_EQ(ar.steps(), 2 * (n - 1));
  ASSERT_EQ(net.flows.size(), n * 2 * (n - 1));

  uint64_t total = 0;  // step 0: rank r sends chunk r, so every chunk once
  for (uint32_t r = 0; r < n; ++r)
    total += ar.step_bytes(r, 0);
  EXPECT_EQ(total, S);

  // (rank, step) -> flow.
  std::map<std::pair<uint32_t, uint32_t>, const FlowResult*> by;
  for (const FlowResult& f : net.flows) {
    const uint32_t rank = f.spec.src - 10;
    EXPECT_EQ(f.spec.dst, group[(rank + 1) % n]) << "a rank sends to its ring successor";
    const uint32_t step = f.spec.tag & 0xffff;
    EXPECT_EQ(f.spec.tag >> 16, 0u);
    EXPECT_EQ(f.spec.bytes, S / n + (ar.chunk_of(rank, step) < S % n ? 1 : 0));
    by[{rank, step}] = &f;
  }
  ASSERT_EQ(by.size(), n * 2 * (n - 1));
  auto at = [&](uint32_t rank, uint32_t step) { return by[std::make_pair(rank, step)]; };
  for (uint32_t r = 0; r < n; ++r) {
    EXPECT_EQ(at(r, 0)->spec.start, us(7));
    for (uint32_t k = 0; k + 1 < ar.steps(); ++k) {
      // Step k+1 of rank r starts when its step-k receive (rank r-1, step k) completes.
      EXPECT_EQ(at(r, k + 1)->spec.start, at((r + n - 1) % n, k)->end)
          << "rank " << r << " step " << k + 1;
    }
    // Reduce-scatter sends every chunk but one; the rank then owns chunk r+1, which the
    // all-gather forwards first.
    std::set<uint32_t> rs;
    for (uint32_t k = 0; k + 1 < n; ++k)
      rs.insert(ar.chunk_of(r, k));
    EXPECT_EQ(rs.size(), n - 1);
    EXPECT_EQ(ar.chunk_of(r, n - 1), (r + 1) % n);
    // A rank receives in step k what it forwards in step k+1 (same chunk).
    for (uint32_t k = 0; k + 1 < ar.steps(); ++k)
      EXPECT_EQ(ar.chunk_of((r + n - 1) % n, k), ar.chunk_of(r, k + 1));
  }
  ASSERT_EQ(ar.collectives().size(), 1u);
  const CollectiveResult& c = ar.collectives()[0];
  Time last = 0;
  for (const FlowResult& f : net.flows)
    last = std::max(last, f.end);
  EXPECT_EQ(c.start, us(7));
  EXPECT_EQ(c.end, last);
  EXPECT_EQ(c.ranks, n);
  EXPECT_EQ(c.bytes, S);
  EXPECT_TRUE(c.ok);
  EXPECT_DOUBLE_EQ(c.busbw_GBps(), c.algbw_GBps() * 2.0 * (n - 1) / n);
}

TEST(Workloads,
     ring_allreduce__a_step_starts_at_its_receive_and_the_completion_does_not_repeat_it) {
  // Receptions reported 2 us before each completion: the receiver's next step starts at its
  // receive, and the sender's completion (later) adds nothing more.
  const uint32_t n = 4;
  FakeNet net;
  WorkloadDriver d(net);
  auto& ar = static_cast<RingAllReduce&>(
      d.add(std::make_unique<RingAllReduce>(all_hosts(n), 4 * 65536, 0)));
  ASSERT_TRUE(d.start());
  std::priority_queue<std::pair<Time, uint64_t>, std::vector<std::pair<Time, uint64_t>>,
                      std::greater<>>
      events;  // (time, flow << 1 | completion)
  size_t queued = 0;
  const auto queue_new = [&] {
    for (; queued < net.flows.size(); ++queued) {
      EXPECT_TRUE(net.flows[queued].spec.with_imm) << "ring steps are WRITEs with immediate";
      events.push({net.flows[queued].end - us(2), uint64_t{queued} << 1});
      events.push({net.flows[queued].end, uint64_t{queued} << 1 | 1});
    }
  };
  queue_new();
  while (!events.empty()) {
    const auto [t, e] = events.top();
    events.pop();
    FlowResult& f = net.flows[e >> 1];
    if (e & 1) {
      d.on_flow_complete(f);
    } else {
      f.received = t;
      d.on_flow_received(f);
    }
    queue_new();
  }
  ASSERT_FALSE(d.error()) << d.error()->message;
  ASSERT_TRUE(d.done());
  ASSERT_EQ(net.flows.size(), n * ar.steps()) << "one flow per rank and step, none repeated";
  std::map<std::pair<uint32_t, uint32_t>, const FlowResult*> by;
  for (const FlowResult& f : net.flows)
    by[{f.spec.src, f.spec.tag & 0xffff}] = &f;
  for (uint32_t r = 0; r < n; ++r)
    for (uint32_t k = 0; k + 1 < ar.steps(); ++k) {
      const FlowResult* next = by[std::make_pair(r, k + 1)];
      const FlowResult* feed = by[std::make_pair((r + n - 1) % n, k)];
      EXPECT_EQ(next->spec.start, feed->received) << "rank " << r << " step " << k + 1;
    }
  ASSERT_EQ(ar.collectives().size(), 1u);
  Time last = 0;
  for (const FlowResult& f : net.flows)
    last = std::max(last, f.end);
  EXPECT_EQ(ar.collectives()[0].end, last) << "the collective ends at its last completion";
}

TEST(Workloads, ring_allreduce__rejects_tiny_groups_and_sizes) {
  FakeNet net;
  RingAllReduce one({1}, 1000, 0);
  EXPECT_FALSE(one.start(net));
  RingAllReduce tiny({1, 2, 3}, 2, 0);
  auto st = tiny.start(net);
  ASSERT_FALSE(st);
  EXPECT_NE(st.error().message.find("at least the number of ranks"), std::string::npos)
      << st.error().message;
}

// ---- two-level (2D) ring AllReduce ---------------------------------------------------------

TEST(Workloads, ring2d__row_rings_column_rings_row_rings_chained_on_receives) {
  const uint32_t n = 12, row = 4, rows = 3;
  const uint64_t S = 12 * 1000 + 7;  // uneven: shards and their chunks differ by a byte
  std::vector<HostId> group;
  for (uint32_t i = 0; i < n; ++i)
    group.push_back(100 + i);
  FakeNet net;
  // Rank 1 (row 0) is slow: row 0 finishes the row reduce-scatter late, so its ranks get
  // column receives before they are in the column stage.
  net.slow[101] = us(20);
  WorkloadDriver d(net);
  auto& ar =
      static_cast<RingAllReduce&>(d.add(std::make_unique<RingAllReduce>(group, S, us(7), row)));
  ASSERT_TRUE(d.start());
  EXPECT_EQ(net.flows.size(), n) << "step 0 of every rank starts at once";
  net.run(d);
  ASSERT_FALSE(d.error()) << d.error()->message;
  ASSERT_TRUE(d.done());

  // Stages: row reduce-scatter (row-1 steps), column AllReduce (2(rows-1)), row all-gather.
  const uint32_t s1 = row - 1, s2 = 2 * (rows - 1), s3 = row - 1;
  ASSERT_EQ(ar.stages(), 3u);
  ASSERT_EQ(ar.steps(), s1 + s2 + s3);
  ASSERT_EQ(net.flows.size(), n * ar.steps());
  auto stage = [&](uint32_t step) { return step < s1 ? 0u : step < s1 + s2 ? 1u : 2u; };
  auto first = [&](uint32_t st) { return st == 0 ? 0u : st == 1 ? s1 : s1 + s2; };
  auto shard = [&](uint32_t j) { return S / row + (j < S % row ? 1 : 0); };

  std::map<std::pair<uint32_t, uint32_t>, const FlowResult*> by;
  std::map<uint32_t, uint32_t> flows_per_stage;
  std::map<uint32_t, uint64_t> sent;  // per rank
  for (const FlowResult& f : net.flows) {
    const uint32_t rank = f.spec.src - 100, step = f.spec.tag & 0xffff;
    const uint32_t to = f.spec.dst - 100, st = stage(step);
    const uint32_t r0 = rank / row, c0 = rank % row;
    ++flows_per_stage[st];
    sent[rank] += f.spec.bytes;
    by[{rank, step}] = &f;
    if (st == 1) {
      // The next rank of the column (same column, next row), a chunk of the column's shard.
      EXPECT_EQ(to, ((r0 + 1) % rows) * row + c0) << "rank " << rank << " step " << step;
      const uint64_t sh = shard((c0 + 1) % row);
      EXPECT_TRUE(f.spec.bytes == sh / rows || f.spec.bytes == sh / rows + 1) << f.spec.bytes;
    } else {
      // The next rank of the row, a whole shard.
      EXPECT_EQ(to, r0 * row + (c0 + 1) % row) << "rank " << rank << " step " << step;
      EXPECT_EQ(f.spec.bytes, shard(ar.chunk_of(rank, step)));
    }
    EXPECT_EQ(f.spec.bytes, ar.step_bytes(rank, step));
    EXPECT_EQ(to, ar.peer(rank, step));
  }
  ASSERT_EQ(by.size(), n * ar.steps());
  EXPECT_EQ(flows_per_stage[0], n * s1);
  EXPECT_EQ(flows_per_stage[1], n * s2);
  EXPECT_EQ(flows_per_stage[2], n * s3);
  // Every rank sends 2(n-1)/n of S, as in the flat ring (up to a byte per step).
  for (auto [rank, b] : sent)
    EXPECT_NEAR(static_cast<double>(b), 2.0 * (n - 1) / n * S, ar.steps()) << "rank " << rank;

  auto at = [&](uint32_t rank, uint32_t step) { return by.at(std::make_pair(rank, step)); };
  auto pred = [&](uint32_t rank, uint32_t st) {
    const uint32_t r0 = rank / row, c0 = rank % row;
    return st == 1 ? ((r0 + rows - 1) % rows) * row + c0 : r0 * row + (c0 + row - 1) % row;
  };
  // When a rank has finished stage st: its last receive of that stage.
  auto finished = [&](uint32_t rank, uint32_t st) {
    const uint32_t len = st == 0 ? s1 : st == 1 ? s2 : s3;
    Time t = 0;
    for (uint32_t k = first(st); k < first(st) + len; ++k)
      t = std::max(t, at(pred(rank, st), k)->end);
    return t;
  };
  uint32_t early = 0;
  for (uint32_t r = 0; r < n; ++r) {
    EXPECT_EQ(at(r, 0)->spec.start, us(7));
    for (uint32_t k = 1; k < ar.steps(); ++k) {
      const uint32_t st = stage(k);
      const Time ready = st == 0 ? us(7) : finished(r, st - 1);
      // A stage's first step: when the previous stage is done; later steps: when the
      // previous step's receive is done, but not before the rank is in the stage.
      const Time want = k == first(st) ? ready : std::max(ready, at(pred(r, st), k - 1)->end);
      EXPECT_EQ(at(r, k)->spec.start, want) << "rank " << r << " step " << k;
      if (k != first(st) && at(pred(r, st), k - 1)->end < ready) ++early;
    }
    // Row reduce-scatter leaves column c with shard c+1; the column stage works on it.
    EXPECT_EQ(ar.chunk_of(r, s1 + s2), (r % row + 1) % row);
    // A rank forwards in step k+1 the chunk it received in step k (within a stage).
    for (uint32_t k = 0; k + 1 < ar.steps(); ++k) {
      if (stage(k) == stage(k + 1)) {
        EXPECT_EQ(ar.chunk_of(pred(r, stage(k)), k), ar.chunk_of(r, k + 1));
      }
    }
  }
  EXPECT_GT(early, 0u) << "the slow rank should make some receives arrive early";

  ASSERT_EQ(ar.collectives().size(), 1u);
  const CollectiveResult& c = ar.collectives()[0];
  EXPECT_EQ(c.start, us(7));
  EXPECT_EQ(c.ranks, n);
  EXPECT_EQ(c.flows, n * ar.steps());
  EXPECT_TRUE(c.ok);
  // nccl-tests busbw: the AllReduce factor, whatever the algorithm.
  EXPECT_DOUBLE_EQ(c.busbw_GBps(), c.algbw_GBps() * 2.0 * (n - 1) / n);
}

TEST(Workloads, ring2d__one_row_of_every_rank_is_the_flat_ring) {
  const std::vector<HostId> group = {3, 1, 4, 0, 5, 2};
  const uint64_t S = 6 * 512 + 5;
  auto run = [&](uint32_t row) {
    FakeNet net;
    WorkloadDriver d(net);
    d.add(std::make_unique<RingAllReduce>(group, S, us(1), row));
    EXPECT_TRUE(d.start());
    net.run(d);
    EXPECT_TRUE(d.done());
    return net.flows;
  };
  const auto flat = run(0), one_row = run(6);
  ASSERT_EQ(flat.size(), one_row.size());
  for (size_t i = 0; i < flat.size(); ++i) {
    EXPECT_EQ(flat[i].spec.src, one_row[i].spec.src);
    EXPECT_EQ(flat[i].spec.dst, one_row[i].spec.dst);
    EXPECT_EQ(flat[i].spec.bytes, one_row[i].spec.bytes);
    EXPECT_EQ(flat[i].spec.start, one_row[i].spec.start);
    EXPECT_EQ(flat[i].spec.tag, one_row[i].spec.tag);
  }
}

TEST(Workloads, ring2d__rejects_rows_that_do_not_fit) {
  FakeNet net;
  for (uint32_t row : {1u, 5u, 7u}) {
    RingAllReduce ar(all_hosts(12), 12000, 0, row);
    auto st = ar.start(net);
    ASSERT_FALSE(st) << "row " << row;
    EXPECT_NE(st.error().message.find("must be at least 2 and divide the number of ranks (12)"),
              std::string::npos)
        << st.error().message;
  }
  EXPECT_TRUE(net.flows.empty());
}

// ---- training loop ---------------------------------------------------------------------------

TEST(Workloads, training__iterations_chain_compute_then_allreduce) {
  FakeNet net;
  WorkloadDriver d(net);
  auto& tl = static_cast<TrainingLoop&>(
      d.add(std::make_unique<TrainingLoop>(all_hosts(4), 8192, us(50), 3, us(2))));
  ASSERT_TRUE(d.start());
  net.run(d);
  ASSERT_FALSE(d.error());
  ASSERT_TRUE(d.done());
  EXPECT_FALSE(tl.aborted());
  ASSERT_EQ(tl.iterations().size(), 3u);
  ASSERT_EQ(tl.collectives().size(), 3u);
  EXPECT_EQ(net.flows.size(), 3u * 4 * 6);
  for (uint32_t i = 0; i < 3; ++i) {
    const IterationResult& it = tl.iterations()[i];
    EXPECT_EQ(it.index, i);
    EXPECT_EQ(it.comm_start, it.start + us(50));
    EXPECT_EQ(it.end, tl.collectives()[i].end);
    EXPECT_EQ(tl.collectives()[i].start, it.comm_start);
    EXPECT_EQ(tl.collectives()[i].iteration, i);
    if (i > 0) {
      EXPECT_EQ(it.start, tl.iterations()[i - 1].end) << "back to back";
    }
    // No traffic during compute: the iteration's first flows start when compute ends.
    Time first = kNever;
    for (const FlowResult& f : net.flows)
      if ((f.spec.tag >> 16) == i) first = std::min(first, f.spec.start);
    EXPECT_EQ(first, it.comm_start);
  }
  EXPECT_EQ(tl.iterations()[0].start, us(2));
}

// The payload a run will move (mrc-sim's progress line): known once the workloads started,
// equal to the bytes of every flow they then add; 0 when a workload cannot know it ahead.
TEST(Workloads, total_bytes__equals_the_bytes_of_every_flow_added) {
  auto flow_bytes = [](const FakeNet& net) {
    uint64_t b = 0;
    for (const FlowResult& f : net.flows)
      b += f.spec.bytes;
    return b;
  };
  auto check = [&](std::unique_ptr<Workload> w, const char* what) {
    SCOPED_TRACE(what);
    FakeNet net;
    WorkloadDriver d(net);
    d.add(std::move(w));
    ASSERT_TRUE(d.start());
    const uint64_t total = d.total_bytes();
    net.run(d);
    ASSERT_TRUE(d.done());
    EXPECT_GT(total, 0u);
    EXPECT_EQ(total, flow_bytes(net));
  };
  check(
      std::make_unique<StaticFlows>("permutation", *permutation_flows(all_hosts(8), 10'000, 0, 3)),
      "permutation");
  check(std::make_unique<AllToAll>(all_hosts(5), 10'001, 0), "all-to-all");
  check(std::make_unique<RingAllReduce>(all_hosts(6), 100'003, 0), "ring");
  check(std::make_unique<RingAllReduce>(all_hosts(8), 100'003, 0, 4), "ring2d");
  check(std::make_unique<TrainingLoop>(all_hosts(4), 8192, us(50), 3, 0), "training");
  // Streams until a deadline: as many messages as fit, not known ahead.
  FakeNet net;
  WorkloadDriver d(net);
  d.add(
      std::make_unique<StaticFlows>("permutation", *permutation_flows(all_hosts(4), 10'000, 0, 3)));
  d.add(std::make_unique<SteadyStreams>("steady",
                                        *steady_permutation(all_hosts(4), 4096, 0, us(100), 2, 1)));
  ASSERT_TRUE(d.start());
  EXPECT_EQ(d.workloads()[0]->total_bytes(), 40'000u);
  EXPECT_EQ(d.workloads()[1]->total_bytes(), 0u);
  EXPECT_EQ(d.total_bytes(), 0u);
}

TEST(Workloads, training__a_failed_allreduce_aborts_the_job) {
  FakeNet net;
  net.fail_ids = {30};  // a flow of the second iteration (24 flows per iteration)
  WorkloadDriver d(net);
  auto& tl = static_cast<TrainingLoop&>(
      d.add(std::make_unique<TrainingLoop>(all_hosts(4), 8192, us(10), 5, 0)));
  ASSERT_TRUE(d.start());
  net.run(d);
  EXPECT_TRUE(d.done());
  EXPECT_TRUE(tl.aborted());
  ASSERT_EQ(tl.iterations().size(), 2u);
  EXPECT_TRUE(tl.iterations()[0].ok);
  EXPECT_FALSE(tl.iterations()[1].ok);
  EXPECT_EQ(net.flows.size(), 48u) << "no third iteration";
}

TEST(Workloads, training_ring2d__chains_iterations_and_a_failed_flow_aborts_the_job) {
  // 8 ranks in rows of 4: 2 x 3 row steps + 2 x 1 column steps = 8 steps, 64 flows per
  // iteration.
  {
    FakeNet net;
    WorkloadDriver d(net);
    auto& tl = static_cast<TrainingLoop&>(
        d.add(std::make_unique<TrainingLoop>(all_hosts(8), 8192, us(10), 3, 0, 4)));
    ASSERT_TRUE(d.start());
    net.run(d);
    ASSERT_TRUE(d.done());
    EXPECT_FALSE(tl.aborted());
    ASSERT_EQ(tl.iterations().size(), 3u);
    EXPECT_EQ(net.flows.size(), 3u * 64);
    for (uint32_t i = 1; i < 3; ++i)
      EXPECT_EQ(tl.iterations()[i].start, tl.iterations()[i - 1].end);
  }
  FakeNet net;
  net.fail_ids = {70};  // a flow of the second iteration
  WorkloadDriver d(net);
  auto& tl = static_cast<TrainingLoop&>(
      d.add(std::make_unique<TrainingLoop>(all_hosts(8), 8192, us(10), 5, 0, 4)));
  ASSERT_TRUE(d.start());
  net.run(d);
  EXPECT_TRUE(d.done());
  EXPECT_TRUE(tl.aborted());
  ASSERT_EQ(tl.iterations().size(), 2u);
  EXPECT_TRUE(tl.iterations()[0].ok);
  EXPECT_FALSE(tl.iterations()[1].ok);
  EXPECT_EQ(net.flows.size(), 128u) << "no third iteration";
}

TEST(Workloads, all_to_all_collective__reports_time_and_busbw) {
  FakeNet net;
  WorkloadDriver d(net);
  auto& a2a = d.add(std::make_unique<AllToAll>(all_hosts(4), 4000, us(3)));
  ASSERT_TRUE(d.start());
  net.run(d);
  ASSERT_TRUE(d.done());
  ASSERT_EQ(a2a.collectives().size(), 1u);
  const CollectiveResult& c = a2a.collectives()[0];
  EXPECT_EQ(c.kind, CollectiveKind::kAllToAll);
  EXPECT_EQ(c.flows, 12u);
  EXPECT_EQ(c.start, us(3));
  EXPECT_EQ(c.end, net.flows[0].end);
  EXPECT_DOUBLE_EQ(c.busbw_GBps(), c.algbw_GBps() * 3.0 / 4);
}

// ---- htsim triggers --------------------------------------------------------------------------

TEST(Workloads, htsim__triggers_chain_flows) {
  const char* cm = R"(Nodes 8
Connections 7
Triggers 3
0->1 id 1 start 0 size 1000 send_done_trigger 1
2->3 id 2 start 1.5 size 1000 send_done_trigger 2
1->2 id 3 trigger 1 size 1000
4->5 id 4 trigger 2 size 1000 recv_done_trigger 3
5->6 id 5 trigger 2 size 1000 send_done_trigger 3
6->7 id 6 trigger 3 size 1000
7->0 id 7 trigger 3 size 1000
trigger id 1 oneshot
trigger id 2 multishot
trigger id 3 barrier count 2
)";
  auto m = parse_htsim_cm(cm, "t.cm");
  ASSERT_TRUE(m) << m.error().message;
  FakeNet net;
  WorkloadDriver d(net);
  auto& w = static_cast<HtsimWorkload&>(d.add(std::make_unique<HtsimWorkload>(*m)));
  ASSERT_TRUE(d.start());
  EXPECT_EQ(net.flows.size(), 2u);
  EXPECT_EQ(net.flows[1].spec.start, ns(1500)) << "start is in microseconds";
  net.run(d);
  ASSERT_FALSE(d.error());
  EXPECT_TRUE(d.done());
  // Flow 2's completion fires multishot 2 once: only its first target (id 4) starts; one
  // activation of barrier 3 (needs 2) is not enough, so 6 and 7 never start.
  std::set<uint32_t> started;
  for (const FlowResult& f : net.flows)
    started.insert(f.spec.tag);
  EXPECT_EQ(started, (std::set<uint32_t>{1, 2, 3, 4}));
  EXPECT_EQ(w.started(), 4u);
  const FlowResult* f1 = nullptr;
  const FlowResult* f3 = nullptr;
  for (const FlowResult& f : net.flows) {
    if (f.spec.tag == 1) f1 = &f;
    if (f.spec.tag == 3) f3 = &f;
  }
  ASSERT_TRUE(f1 && f3);
  EXPECT_EQ(f3->spec.start, f1->end) << "oneshot fires at the completion time";
}

TEST(Workloads, htsim__barrier_fires_after_count_activations) {
  const char* cm = R"(Nodes 4
Connections 3
Triggers 1
0->1 start 0 size 1000 send_done_trigger 9
2->3 start 0 size 3000 send_done_trigger 9
3->0 id 5 trigger 9 size 10
trigger id 9 barrier count 2
)";
  auto m = parse_htsim_cm(cm, "b.cm");
  ASSERT_TRUE(m) << m.error().message;
  FakeNet net;
  WorkloadDriver d(net);
  d.add(std::make_unique<HtsimWorkload>(*m));
  ASSERT_TRUE(d.start());
  net.run(d);
  ASSERT_EQ(net.flows.size(), 3u);
  EXPECT_EQ(net.flows[2].spec.start, std::max(net.flows[0].end, net.flows[1].end));
}

TEST(Workloads, htsim__failures_map_to_links_and_switches) {
  HtsimFailure f;
  f.switch_type = HtsimFailure::kTor;
  f.switch_id = 3;
  f.link_id = 2;
  auto a = htsim_fault(f, 8, 4, 2, "x.cm");
  ASSERT_TRUE(a) << a.error().message;
  EXPECT_FALSE(a->whole_switch);
  EXPECT_EQ(a->link.kind, LinkRef::kLeafSpine);
  EXPECT_EQ(a->link.a, 3u);
  EXPECT_EQ(a->link.b, 2u);
  f.switch_type = HtsimFailure::kCore;
  f.switch_id = 1;
  f.link_id = 6;
  a = htsim_fault(f, 8, 4, 2, "x.cm");
  ASSERT_TRUE(a);
  EXPECT_EQ(a->link.a, 6u) << "a spine's link_id is the leaf";
  EXPECT_EQ(a->link.b, 1u);
  f.link_id.reset();
  a = htsim_fault(f, 8, 4, 2, "x.cm");
  ASSERT_TRUE(a);
  EXPECT_TRUE(a->whole_switch);
  EXPECT_EQ(a->sw.kind, SwitchRef::kSpine);
  f.switch_id = 4;
  f.line = 12;
  auto bad = htsim_fault(f, 8, 4, 2, "x.cm");
  ASSERT_FALSE(bad);
  EXPECT_NE(bad.error().message.find("x.cm:12: switch_id 4 out of range"), std::string::npos)
      << bad.error().message;
  f.switch_id = 0;
  f.plane = 2;
  EXPECT_FALSE(htsim_fault(f, 8, 4, 2, "x.cm"));
}

// ---- small real simulations ------------------------------------------------------------------

SimConfig small(TransportKind k) {
  SimConfig c;
  c.topo.hosts = 16;
  c.topo.planes = 2;
  c.topo.radix = 8;
  c.transport.kind = k;
  c.sample_interval = 0;
  c.seed = 5;
  return c;
}

TEST(WorkloadsSim, ring_allreduce_and_training__complete_on_the_fabric) {
  for (TransportKind k : {TransportKind::kMrc, TransportKind::kRoce}) {
    auto sim = Simulation::create(small(k));
    ASSERT_TRUE(sim);
    SimulationSink sink(**sim);
    WorkloadDriver d(sink);
    auto& tl = static_cast<TrainingLoop&>(
        d.add(std::make_unique<TrainingLoop>(all_hosts(8), 256 * 1024, us(20), 2, 0)));
    (*sim)->on_flow_complete([&](const FlowResult& r) { d.on_flow_complete(r); });
    (*sim)->on_flow_received([&](const FlowResult& r) { d.on_flow_received(r); });
    ASSERT_TRUE(d.start());
    (*sim)->run(ms(20));
    ASSERT_FALSE(d.error()) << d.error()->message;
    EXPECT_TRUE(d.done()) << transport_name(k);
    ASSERT_EQ(tl.iterations().size(), 2u);
    for (const CollectiveResult& c : tl.collectives()) {
      EXPECT_TRUE(c.ok);
      // 8 ranks over 2 x 100G planes: the bus bandwidth cannot exceed the NIC's 25 GB/s.
      EXPECT_GT(c.busbw_GBps(), 0.5) << transport_name(k);
      EXPECT_LT(c.busbw_GBps(), 25.0) << transport_name(k);
    }
    EXPECT_EQ(tl.iterations()[1].start, tl.iterations()[0].end);
    EXPECT_EQ((*sim)->flows().size(), 2u * 8 * 14);
  }
}

TEST(WorkloadsSim, permutation__runs_through_the_runner_on_a_scenario) {
  auto sc = parse_scenario(R"(
name = "tiny"
[topo]
hosts = 16
radix = 8
[transport]
kinds = ["mrc", "roce"]
[workload]
kind = "permutation"
size = "256KiB"
[[fault]]
kind = "link_down"
link = "p1/leaf0-spine1"
at = "5us"
[run]
until = "20ms"
sample_interval = 0
)",
                           "tiny.toml");
  ASSERT_TRUE(sc) << sc.error().message;
  for (const TransportRun& run : sc->runs) {
    auto r = run_transport(*sc, run);
    ASSERT_TRUE(r) << r.error().message;
    EXPECT_EQ(r->summary.count, 16u);
    if (run.name == "mrc") {
      EXPECT_EQ(r->summary.completed, 16u);
      EXPECT_EQ(r->stats.qp_errors, 0u);
      EXPECT_LT(r->sim_time, sc->until) << "stops when the workload is done";
      EXPECT_LE(r->sim_time, r->makespan + us(10));
    }
    EXPECT_GT(r->summary.fct_p50_us, 0);
    EXPECT_LE(r->summary.fct_p50_us, r->summary.fct_max_us);
  }
}

// Fidelity (docs/simulator.md) through the workload and scenario paths a user takes.

TEST(WorkloadsSim, ring_allreduce__busbw_near_the_nic_rate_for_large_messages) {
  auto sim = Simulation::create(small(TransportKind::kMrc));
  ASSERT_TRUE(sim);
  SimulationSink sink(**sim);
  WorkloadDriver d(sink);
  auto& ar = d.add(std::make_unique<RingAllReduce>(all_hosts(8), 16u << 20, 0));
  (*sim)->on_flow_complete([&](const FlowResult& r) { d.on_flow_complete(r); });
  ASSERT_TRUE(d.start());
  (*sim)->run(ms(50));
  ASSERT_EQ(ar.collectives().size(), 1u);
  const CollectiveResult& c = ar.collectives()[0];
  ASSERT_TRUE(c.ok);
  // busbw compares with the NIC's rate: 2 planes x 100 Gb/s = 25 GB/s, of which the payload
  // share of a 4 KiB packet (~95%) is goodput. 2(n-1) = 14 steps of 2 MiB each pay a little
  // latency; expect at least 80% of the payload rate.
  const double nic_GBps = 2 * 100e9 / 8 / 1e9 * 4096.0 / (4096 + 142);
  EXPECT_GE(c.busbw_GBps(), 0.8 * nic_GBps) << "busbw " << c.busbw_GBps() << " GB/s";
  std::printf("ring allreduce 8 x 16 MiB: busbw %.2f GB/s (payload line rate %.2f)\n",
              c.busbw_GBps(), nic_GBps);
  EXPECT_LE(c.busbw_GBps(), nic_GBps * 1.01);
}

TEST(WorkloadsSim, ring2d__training_completes_and_busbw_near_the_nic_rate) {
  // 16 ranks in rows of 4 (4 rows) on the 2-plane fabric, for both transports.
  for (TransportKind k : {TransportKind::kMrc, TransportKind::kRoce}) {
    auto sim = Simulation::create(small(k));
    ASSERT_TRUE(sim);
    SimulationSink sink(**sim);
    WorkloadDriver d(sink);
    auto& tl = static_cast<TrainingLoop&>(
        d.add(std::make_unique<TrainingLoop>(all_hosts(16), 256 * 1024, us(20), 2, 0, 4)));
    (*sim)->on_flow_complete([&](const FlowResult& r) { d.on_flow_complete(r); });
    ASSERT_TRUE(d.start());
    (*sim)->run(ms(20));
    ASSERT_FALSE(d.error()) << d.error()->message;
    EXPECT_TRUE(d.done()) << transport_name(k);
    ASSERT_EQ(tl.collectives().size(), 2u);
    for (const CollectiveResult& c : tl.collectives()) {
      EXPECT_TRUE(c.ok);
      EXPECT_GT(c.busbw_GBps(), 0.5) << transport_name(k);
    }
    EXPECT_EQ((*sim)->flows().size(), 2u * 16 * (2 * 3 + 2 * 3));
  }
  // Large messages on the non-blocking fabric: like the flat ring, near the NIC's payload
  // rate (2 planes x 100 Gb/s, ~95% payload per 4 KiB packet). Three stages each pay a
  // little latency at their boundaries; expect at least 80%.
  auto sim = Simulation::create(small(TransportKind::kMrc));
  ASSERT_TRUE(sim);
  SimulationSink sink(**sim);
  WorkloadDriver d(sink);
  auto& ar = d.add(std::make_unique<RingAllReduce>(all_hosts(16), 16u << 20, 0, 4));
  (*sim)->on_flow_complete([&](const FlowResult& r) { d.on_flow_complete(r); });
  ASSERT_TRUE(d.start());
  (*sim)->run(ms(50));
  ASSERT_EQ(ar.collectives().size(), 1u);
  const CollectiveResult& c = ar.collectives()[0];
  ASSERT_TRUE(c.ok);
  const double nic_GBps = 2 * 100e9 / 8 / 1e9 * 4096.0 / (4096 + 142);
  std::printf(
      "ring2d allreduce 16 (rows of 4) x 16 MiB: busbw %.2f GB/s (payload line rate %.2f)\n",
      c.busbw_GBps(), nic_GBps);
  EXPECT_GE(c.busbw_GBps(), 0.8 * nic_GBps);
  EXPECT_LE(c.busbw_GBps(), nic_GBps * 1.01);
}

// Paper 2.1: small messages fail over in microseconds. 128 GPUs, all-to-all of 256 KiB per
// GPU (one 2 KiB packet per flow), a leaf-spine link down mid-run: each packet lost on it is
// resent at its QP's tail-loss probe, timed from the fabric's RTT (a QP has no RTT sample of
// its own after one packet; EngineConfig::fabric_rtt, share_rtt), not at the ACK timeout.
// Measured: max FCT 29.7 us with the fault against 19.1 us without, 23 fault drops, 0
// timeouts; before, 4,204.6 us and 23 timeouts.
TEST(WorkloadsSim, all_to_all__small_messages_through_a_link_down_see_no_ack_timeouts) {
  const auto run = [](bool fault) {
    std::string toml = R"(
[topo]
hosts = 128
planes = 4
radix = 16
link_rate = "100Gbps"
link_delay = "500ns"
[transport]
kinds = ["mrc"]
[workload]
kind = "all_to_all"
size = "256KiB"
[run]
sample_interval = 0
)";
    if (fault)
      toml += "[[fault]]\nkind = \"link_down\"\nlink = \"p0/leaf0-spine0\"\nat = \"10us\"\n";
    auto sc = parse_scenario(toml, "a2a.toml");
    EXPECT_TRUE(sc) << sc.error().message;
    auto r = run_transport(*sc, sc->runs[0]);
    EXPECT_TRUE(r) << r.error().message;
    return std::move(*r);
  };
  const auto clean = run(false);
  const auto faulted = run(true);
  EXPECT_EQ(faulted.summary.completed, 128u * 127u);
  EXPECT_GT(faulted.stats.fault_drops, 0u) << "the link must fail while packets cross it";
  EXPECT_EQ(faulted.stats.timeouts, 0u);
  EXPECT_GE(faulted.stats.pto_borrowed_rtt, faulted.stats.fault_drops);
  EXPECT_LE(faulted.summary.fct_max_us, 2 * clean.summary.fct_max_us)
      << "fault-free max " << clean.summary.fct_max_us << " us";
}

// The same all-to-all with 32 KiB flows (8 packets each) on a trimming fabric, as
// scenarios/claims/a2a-small-linkdown.toml --set workload.size=4MiB, without a reverse EV
// set (transport.reverse_evs_per_plane = 0). An ACK waits for the port
// its data came by (EngineConfig::ack_waits_for_port) instead of taking another port's next
// data path, which after the failure may cross the dead link. Measured: max FCT 165.2 us
// against 133.4 us without the fault (1.24x); ACKs sent at once on any free port: 224.7 us
// (1.67x), the slowest flows to or from leaf 0 losing their ACKs on the dead link.
TEST(WorkloadsSim, all_to_all__small_message_acks_avoid_the_dead_link_without_a_reverse_set) {
  const auto run = [](bool fault, bool wait) {
    std::string toml = R"(
[topo]
hosts = 128
planes = 4
radix = 16
link_rate = "100Gbps"
link_delay = "500ns"
[switch]
trimming = true
[transport]
kinds = ["mrc"]
[workload]
kind = "all_to_all"
size = "4MiB"
[run]
sample_interval = 0
)";
    if (fault)
      toml += "[[fault]]\nkind = \"link_down\"\nlink = \"p0/leaf0-spine0\"\nat = \"10us\"\n";
    auto sc = parse_scenario(toml, "a2a.toml");
    EXPECT_TRUE(sc) << sc.error().message;
    sc->runs[0].config.transport.reverse_evs_per_plane = 0;  // ACKs on their data's paths
    sc->runs[0].config.transport.ack_waits_for_port = wait;
    auto r = run_transport(*sc, sc->runs[0]);
    EXPECT_TRUE(r) << r.error().message;
    return std::move(*r);
  };
  const auto clean = run(false, true);
  const auto faulted = run(true, true);
  EXPECT_EQ(faulted.summary.completed, 128u * 127u);
  EXPECT_GT(faulted.stats.fault_drops, 0u);
  EXPECT_EQ(faulted.stats.timeouts, 0u);
  EXPECT_LE(faulted.summary.fct_max_us, 1.4 * clean.summary.fct_max_us)
      << "fault-free max " << clean.summary.fct_max_us << " us";
  // ACKs sent at once on any free port's next data path cross the dead link more often. With
  // windows below one MTU paced (docs/congestion-control.md) the max FCT of the two is within
  // 1%, so the packets the fault drops are what tells them apart.
  const auto at_once = run(true, false);
  EXPECT_GT(at_once.stats.fault_drops, faulted.stats.fault_drops)
      << "ACKs on any free port at once should lose more to the dead link (max FCT "
      << at_once.summary.fct_max_us << " vs " << faulted.summary.fct_max_us << " us)";
}

// 15 senders to one host of a 16-host fabric: the incast the tests below share.
Scenario incast_15_to_1() {
  auto sc = parse_scenario(R"(
[topo]
hosts = 16
radix = 8
[transport]
kinds = ["mrc"]
[workload]
kind = "incast"
senders = 15
dst = 3
size = "512KiB"
[run]
sample_interval = 0
)",
                           "incast.toml");
  EXPECT_TRUE(sc) << sc.error().message;
  return std::move(*sc);
}

TEST(WorkloadsSim, incast__with_trimming_completes_without_timeouts) {
  const Scenario sc = incast_15_to_1();
  auto r = run_transport(sc, sc.runs[0]);
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_EQ(r->summary.completed, 15u);
  EXPECT_EQ(r->stats.timeouts, 0u);
  EXPECT_EQ(r->stats.qp_errors, 0u);
  EXPECT_GT(r->stats.trims, 0u) << "15:1 overload trims at the destination's leaf";
}

// The reverse EV set's probes (paper 2.4) share the NIC's probe budget. A receiver whose
// budget is empty must wait for the next token, not wake at once for a probe that cannot go:
// that loop cost minutes of simulation at one simulated instant on a 64-sender incast.
TEST(WorkloadsSim, incast__reverse_probes_without_tokens_wait_for_the_next_token) {
  const auto run = [](Time budget_interval) {
    Scenario sc = incast_15_to_1();
    sc.runs[0].config.transport.reverse_evs_per_plane = 2;
    sc.runs[0].config.transport.probe_budget_interval = budget_interval;
    auto r = run_transport(sc, sc.runs[0]);
    EXPECT_TRUE(r) << r.error().message;
    return std::move(*r);
  };
  const auto unlimited = run(0);
  const auto scarce = run(50 * kPicosPerMicro);
  EXPECT_EQ(scarce.summary.completed, 15u);
  EXPECT_EQ(scarce.stats.timeouts, 0u);
  EXPECT_LE(scarce.stats.events, 2 * unlimited.stats.events)
      << "a scarce probe budget must not multiply the events (unlimited: " << unlimited.stats.events
      << ")";
}

TEST(WorkloadsSim, permutation__mrc_near_ideal_roce_collides) {
  auto sc = parse_scenario(R"(
[topo]
hosts = 32
planes = 2
radix = 8
[transport]
kinds = ["mrc", "roce"]
[workload]
kind = "permutation"
size = "2MiB"
[run]
sample_interval = 0
)",
                           "perm.toml", {"seed=3"});
  ASSERT_TRUE(sc) << sc.error().message;
  auto mrc = run_transport(*sc, sc->runs[0]);
  auto roce = run_transport(*sc, sc->runs[1]);
  ASSERT_TRUE(mrc && roce);
  EXPECT_EQ(mrc->summary.completed, 32u);
  EXPECT_LE(mrc->summary.slowdown_max, 1.3);
  EXPECT_GT(roce->summary.slowdown_max, 1.5) << "ECMP hash collisions";
}

TEST(Workloads, percentile__nearest_rank) {
  EXPECT_EQ(percentile({}, 50), 0);
  EXPECT_EQ(percentile({3, 1, 2}, 50), 2);
  EXPECT_EQ(percentile({3, 1, 2}, 100), 3);
  EXPECT_EQ(percentile({3, 1, 2}, 0), 1);
  std::vector<double> v;
  for (int i = 1; i <= 100; ++i)
    v.push_back(i);
  EXPECT_EQ(percentile(v, 99), 99);
}

}  // namespace
}  // namespace mrc::sim

// ---- long-running streams ----------------------------------------------------------------------

namespace mrc::sim {
namespace {

TEST(Workloads, steady_streams__depth_in_flight_back_to_back_until_the_deadline) {
  FakeNet net;
  WorkloadDriver d(net);
  // 128 KiB at 100 Gb/s + 1 us: each message takes 11.49 us.
  std::vector<SteadyStreams::Stream> streams = {
      {0, 1, 128u << 10, us(10), us(100), 2, 0},
      {2, 3, 128u << 10, 0, 0, 1, 7},  // until <= start: one message
  };
  auto& w = d.add(std::make_unique<SteadyStreams>("steady", streams));
  ASSERT_TRUE(d.start());
  EXPECT_EQ(net.flows.size(), 3u);  // depth 2 + 1
  EXPECT_FALSE(w.done());
  net.run(d);
  EXPECT_TRUE(w.done());
  std::vector<Time> starts;
  for (const FlowResult& f : net.flows) {
    if (f.spec.src == 2) {
      EXPECT_EQ(f.spec.path_set, 7u);
      EXPECT_EQ(f.spec.tag, 1u);
      continue;
    }
    EXPECT_EQ(f.spec.tag, 0u);
    starts.push_back(f.spec.start);
  }
  // Two at 10 us, then each completion posts the next while before 100 us: a message starts
  // at every completion time < 100 us, none at or after it.
  std::sort(starts.begin(), starts.end());
  EXPECT_EQ(starts[0], us(10));
  EXPECT_EQ(starts[1], us(10));
  for (size_t i = 2; i < starts.size(); ++i)
    EXPECT_LT(starts[i], us(100));
  const Time msg = (128u << 10) * 8 * kPicosPerSecond / 100'000'000'000ull + us(1);
  EXPECT_EQ(starts.size(), 2 + 2 * ((us(100) - us(10) - 1) / msg));
  EXPECT_EQ(static_cast<const SteadyStreams&>(w).messages(), net.flows.size());
}

TEST(Workloads, steady_streams__a_failed_message_ends_its_stream) {
  FakeNet net;
  net.fail_ids = {1};
  WorkloadDriver d(net);
  auto& w = d.add(std::make_unique<SteadyStreams>(
      "steady", std::vector<SteadyStreams::Stream>{{0, 1, 1u << 20, 0, ms(10), 1, 0}}));
  ASSERT_TRUE(d.start());
  net.run(d);
  EXPECT_TRUE(w.done());
  EXPECT_EQ(net.flows.size(), 2u);  // the first, then the failed second: no third
  FakeNet bad;
  WorkloadDriver d2(bad);
  d2.add(std::make_unique<SteadyStreams>(
      "steady", std::vector<SteadyStreams::Stream>{{0, 1, 1u << 20, 0, ms(10), 0, 0}}));
  EXPECT_FALSE(d2.start());
}

TEST(Workloads, steady_permutation__every_host_streams_to_its_derangement_partner) {
  auto s = steady_permutation(all_hosts(16), 1u << 20, us(5), ms(1), 3, 11);
  ASSERT_TRUE(s) << s.error().message;
  auto p = permutation_flows(all_hosts(16), 1u << 20, us(5), 11);
  ASSERT_EQ(s->size(), 16u);
  for (size_t i = 0; i < s->size(); ++i) {
    EXPECT_EQ((*s)[i].src, (*p)[i].src);
    EXPECT_EQ((*s)[i].dst, (*p)[i].dst);
    EXPECT_EQ((*s)[i].until, ms(1));
    EXPECT_EQ((*s)[i].depth, 3u);
  }
}

TEST(WorkloadsSim, steady_and_flows__run_through_the_runner) {
  auto sc = parse_scenario(R"(name = "s"
[topo]
hosts = 16
radix = 8
[transport]
kinds = ["mrc"]
[workload]
kind = "steady"
size = "64KiB"
until = "100us"
)",
                           "s.toml");
  ASSERT_TRUE(sc) << sc.error().message;
  auto r = run_transport(*sc, sc->runs[0]);
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_GT(r->summary.count, 16u * 4);  // several messages per stream
  EXPECT_EQ(r->summary.completed, r->summary.count);
  for (const FlowResult& f : r->flows)
    EXPECT_LT(f.spec.start, us(100));
}

}  // namespace
}  // namespace mrc::sim
