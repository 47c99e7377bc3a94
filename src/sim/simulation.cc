// The fabric simulator: the public API (Simulation), flows, faults, sampling and statistics.
// The elements and Simulation::Impl are declared in simulation_impl.h, which says which
// source file holds each of the simulator's other parts.
#include "sim/simulation.h"

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>

#include "sim/simulation_impl.h"

namespace mrc::sim {

const char* transport_name(TransportKind k) {
  switch (k) {
    case TransportKind::kMrc:
      return "mrc";
    case TransportKind::kMrcOblivious:
      return "mrc_oblivious";
    case TransportKind::kRoce:
      return "roce";
  }
  return "?";
}

// ---------------------------------------------------------------------------------------
// Flows, faults, sampling.

void Simulation::Impl::flow_start(FlowId f) {
  // A copy: a flow that fails here completes at once, and the workload's callback may add
  // flows (growing `flows`) before service_host(s.src) below.
  const FlowSpec s = flow_record(f)->spec;
  const bool roce = cfg.transport.kind == TransportKind::kRoce;
  // RoCE: a QP per plane; either way transport.qps_per_flow QPs (per plane), the bytes split
  // evenly over them.
  const uint32_t per_qp = roce ? P : 1;
  const uint32_t parts = per_qp * cfg.transport.qps_per_flow;
  FlowState& st = flow_state_of(f);
  st.parts_left = parts;
  for (uint32_t part = 0; part < parts; ++part) {
    const uint32_t plane = roce ? part % P : 0xFF;
    SimResult<QpPair> qp = sim_fail(Error::kNoResources, "no QP");
    if (blocks) {
      // The receiver's end is set up in its own partition, one lookahead later: before any
      // packet of this flow can get there (two links away at least).
      if (auto q = blocks_qp(s.src, s.dst, plane, part / per_qp, roce ? 0 : s.path_set))
        qp = QpPair{*q, 0};
      schedule_accept(f, s, part, now);
    } else {
      qp = qp_for(s.src, s.dst, plane, part / per_qp, roce ? 0 : s.path_set);
    }
    uint64_t bytes = s.bytes / parts + (part < s.bytes % parts ? 1 : 0);
    if (!qp) {
      st.failed = true;
      --st.parts_left;
      continue;
    }
    if (s.with_imm && !blocks) (void)hosts[s.dst].engine->post_recv(qp->remote_qpn, f);
    snapshot_qp(st, hosts[s.src], qp->local_qpn);
    WriteWr w;
    w.wr_id = (static_cast<uint64_t>(f) << 16) | part;
    w.opcode = s.with_imm ? WrOpcode::kWriteImm : WrOpcode::kWrite;
    w.lkey = hosts[s.src].keys.lkey;
    w.length = bytes;
    w.rkey = hosts[s.dst].keys.rkey;
    w.imm = f;
    Host& src = hosts[s.src];
    auto posted = src.engine->post_write(now, qp->local_qpn, w);
    if (!posted && posted.error() == Error::kQueueFull) {
      // The send queue is full: the WR waits in the host's backlog for a completion.
      src.backlog[qp->local_qpn].push_back(w);
    } else if (!posted) {
      st.failed = true;
      --st.parts_left;
    }
  }
  if (st.parts_left == 0) {
    FlowResult r = *flow_record(f);
    r.end = now;
    r.fct = now - s.start;
    r.ok = false;
    finish_flow(r);
  }
  service_host(s.src);
}

// Blocks layout: the event that sets up the receiving end of a flow's part, one lookahead
// after the flow starts at `at`. What the receiver needs of the flow travels with the event
// (its rank may not hold the flow's record).
void Simulation::Impl::schedule_accept(FlowId f, const FlowSpec& s, uint32_t part, Time at) {
  const uint32_t ai = pool_take(accepts, free_accepts);
  accepts[ai] = FlowAccept{f, s.src, s.dst, part, s.path_set, s.with_imm};
  schedule(host_partition(s.dst), at + lookahead, kFlowAccept, 0, 0, ai);
}

// Blocks layout: the receiving end of a flow's QP (part `part`) and its receive buffer.
void Simulation::Impl::flow_accept(uint32_t ai) {
  const FlowAccept a = accepts[ai];
  free_accepts.push_back(ai);
  const HostId dst = a.dst, src = a.src;
  const uint32_t part = a.part;
  const FlowId f = a.flow;
  const uint16_t path_set = a.path_set;
  const bool with_imm = a.with_imm;
  const bool roce = cfg.transport.kind == TransportKind::kRoce;
  const uint32_t per_qp = roce ? P : 1;
  auto q = blocks_qp(dst, src, roce ? part % P : 0xFF, part / per_qp, roce ? 0 : path_set);
  // Without a QP here (out of QPs) the sender's packets are dropped and its QP fails.
  if (!q) return;
  if (with_imm) (void)hosts[dst].engine->post_recv(*q, f);
  service_host(dst);
}

// A flow is done (r: its result). The default layout tells the workload at once; the blocks
// layout collects the window's completions and publishes them, on every rank, in (end, flow)
// order when the window ends (publish_completions).
void Simulation::Impl::finish_flow(const FlowResult& r) {
  if (blocks) {
    completed.push_back(r);
    return;
  }
  const Time received = flows[r.id].received;
  flows[r.id] = r;
  flows[r.id].received = received;
  ++flows_done;
  for (auto& cb : flow_cbs)
    cb(flows[r.id]);
}

// Flow f is whole at its receiver. The blocks layout publishes it with the window's
// completions (a record with end = kNever marks a reception).
void Simulation::Impl::flow_received(FlowId f) {
  if (blocks) {
    FlowResult r;
    r.id = f;
    r.end = kNever;
    r.received = now;
    completed.push_back(r);
    return;
  }
  flows[f].received = now;
  for (auto& cb : received_cbs)
    cb(flows[f]);
}

void Simulation::Impl::on_completion(HostId h, const Completion& c) {
  if (c.opcode == WcOpcode::kRecvImm) {
    // The receive a flow with immediate posted at its destination (wr_id = flow).
    const auto f = static_cast<FlowId>(c.wr_id);
    if (c.status != WcStatus::kSuccess || f >= num_flows) return;
    if (const uint32_t parts = flow_parts(); parts > 1) {
      uint32_t& n = parts_received[f];
      if (++n < parts) return;
      parts_received.erase(f);
    }
    flow_received(f);
    return;
  }
  Host& host = hosts[h];
  if (!host.backlog.empty()) {
    auto it = host.backlog.find(c.qpn);
    if (it != host.backlog.end() && !it->second.empty()) {
      if (host.engine->post_write(now, c.qpn, it->second.front())) it->second.pop_front();
      if (it->second.empty()) host.backlog.erase(it);
    }
  }
  const FlowId f = static_cast<FlowId>(c.wr_id >> 16);
  FlowResult* rec = flow_record(f);
  if (rec == nullptr) return;
  FlowState& st = flow_state_of(f);
  if (c.status != WcStatus::kSuccess) st.failed = true;
  if (st.parts_left == 0 || --st.parts_left > 0) return;
  FlowResult r = *rec;
  r.end = now;
  r.fct = now - r.spec.start;
  r.ok = !st.failed;
  count_flow_paths(st, host, r);
  finish_flow(r);
}

void Simulation::Impl::snapshot_qp(FlowState& st, Host& host, uint32_t qpn) {
  const Engine& e = *host.engine;
  st.qpns.push_back(qpn);
  if (auto stats = e.qp_stats(qpn)) st.retransmits_at_start += stats->retransmits;
  if (const PathSet* ps = e.qp_paths(qpn)) {
    Host::PathCounts& c = host.path_counts[qpn];
    if (c.flows++ == 0) c.sent.assign(ps->size(), 0);
    st.path_sent_at_start.insert(st.path_sent_at_start.end(), c.sent.begin(), c.sent.end());
  }
}

// Retransmits and paths that carried packets on the flow's QPs while it ran (flows sharing a
// QP at the same time share these counts; docs/simulator.md).
void Simulation::Impl::count_flow_paths(FlowState& st, Host& host, FlowResult& r) {
  const Engine& e = *host.engine;
  uint64_t retx = 0;
  uint32_t used = 0;
  size_t k = 0;
  for (uint32_t qpn : st.qpns) {
    if (auto stats = e.qp_stats(qpn)) retx += stats->retransmits;
    if (e.qp_paths(qpn) == nullptr) continue;
    auto it = host.path_counts.find(qpn);
    if (it == host.path_counts.end()) continue;
    const std::vector<uint32_t>& sent = it->second.sent;
    for (size_t i = 0; i < sent.size() && k < st.path_sent_at_start.size(); ++i, ++k) {
      if (sent[i] != st.path_sent_at_start[k]) ++used;
    }
    if (--it->second.flows == 0) host.path_counts.erase(it);
  }
  r.retransmits = retx - std::min(retx, st.retransmits_at_start);
  r.paths_used = used;
  std::vector<uint32_t>().swap(st.qpns);
  std::vector<uint32_t>().swap(st.path_sent_at_start);
}

void Simulation::Impl::add_fault(FaultAction a, Time at) {
  if (a.link.kind == LinkRef::kHostLeaf &&
      (a.kind == FaultAction::kLinkState || a.kind == FaultAction::kBlackhole ||
       a.kind == FaultAction::kLoss)) {
    // The denylist's probes see what the host link's faults do to it (set_up_denylist).
    host_link_changes.emplace_back(a.link.a * P + a.link.plane,
                                   HostLinkChange{at, a.kind, a.flag, a.value});
  }
  if (a.link.kind == LinkRef::kHostLeaf && a.kind == FaultAction::kLinkState && a.nic_detect > 0) {
    // The NIC's view of the change, later than the change itself (Simulation::link_down).
    FaultAction sees = a;
    sees.kind = FaultAction::kNicSees;
    sees.host_side = true;
    faults.push_back(sees);
    const auto i = static_cast<uint32_t>(faults.size() - 1);
    if (blocks) {
      schedule_global(host_partition(a.link.a), at + a.nic_detect, kFault, i);
    } else {
      schedule(0, at + a.nic_detect, kFault, i);
    }
  }
  if (blocks) {
    // Each end of a link acts in its own partition (a host and its leaf share one); the
    // routing view (ECMP convergence) changes between windows, for every switch at once.
    const auto add = [&](const FaultAction& x, uint32_t partition) {
      faults.push_back(x);
      schedule_global(partition, at, kFault, static_cast<uint32_t>(faults.size() - 1));
    };
    if (a.link.kind == LinkRef::kHostLeaf) {
      FaultAction host_side = a;
      host_side.host_side = true;
      add(host_side, host_partition(a.link.a));
      add(a, host_partition(a.link.a));
      return;
    }
    const LinkEnds ends = link_ends(a.link);
    const auto first = static_cast<uint32_t>(faults.size());
    for (uint8_t end = 1; end <= 2; ++end) {
      FaultAction one = a;
      one.end = end;
      add(one, switches[end == 1 ? ends.sw_a : ends.sw_b].partition);
    }
    if (a.kind == FaultAction::kLinkState &&
        (cfg.transport.path_mode == PathMode::kEcmp ||
         cfg.transport.kind == TransportKind::kRoce) &&
        cfg.transport.routing_convergence != kNever) {
      route_actions.emplace_back(at + cfg.transport.routing_convergence, first);
    }
    return;
  }
  // Host links have two ends in different partitions: one action for each.
  if (a.link.kind == LinkRef::kHostLeaf && a.kind == FaultAction::kLinkState) {
    FaultAction host_side = a;
    host_side.host_side = true;
    faults.push_back(host_side);
    schedule(0, at, kFault, static_cast<uint32_t>(faults.size() - 1));
  } else if (a.link.kind == LinkRef::kHostLeaf) {
    FaultAction host_side = a;
    host_side.host_side = true;
    faults.push_back(host_side);
    schedule(0, at, kFault, static_cast<uint32_t>(faults.size() - 1));
  }
  faults.push_back(a);
  schedule(plane_partition(a.link.plane), at, kFault, static_cast<uint32_t>(faults.size() - 1));
}

// ---- Clustermapper's denylist (sim/denylist.h) ---------------------------------------------

// Rounds 1..through (round k at k * interval): each watched link's probes against the link's
// state at the round, from its fault schedule. A link no fault touches never loses a probe
// and is not watched. A link that is down is the NIC's to handle (it sees the loss of signal
// and remaps, paper 3): Clustermapper's probes fail there but it adds no entry for it.
void Simulation::Impl::compute_denylist_rounds(uint64_t through) {
  if (watched.empty() && !host_link_changes.empty()) {
    std::stable_sort(host_link_changes.begin(), host_link_changes.end(),
                     [](const auto& x, const auto& y) {
                       return x.first != y.first ? x.first < y.first : x.second.at < y.second.at;
                     });
    for (const auto& [link, change] : host_link_changes) {
      if (watched.empty() || watched.back().link != link) {
        watched.emplace_back();
        watched.back().link = link;
      }
      watched.back().changes.push_back(change);
    }
  }
  const uint32_t probes = denylist->config().probes;
  while (denylist_rounds.size() < through) {
    const Time t = static_cast<Time>(denylist_rounds.size() + 1) * cfg.denylist.interval;
    std::vector<DenylistChange> changes;
    for (WatchedLink& w : watched) {
      for (; w.applied < w.changes.size() && w.changes[w.applied].at <= t; ++w.applied) {
        const HostLinkChange& c = w.changes[w.applied];
        if (c.kind == FaultAction::kLinkState) w.up = c.flag;
        if (c.kind == FaultAction::kBlackhole) w.blackhole = c.flag;
        if (c.kind == FaultAction::kLoss) w.loss = c.value;
      }
      uint32_t lost = 0;
      if (w.up) {
        // A probe crosses the link up to the T0 and back down: both directions fail together.
        const double through_once = w.blackhole ? 0.0 : 1.0 - w.loss;
        const double p = 1.0 - through_once * through_once;
        if (p >= 1.0) {
          lost = probes;
        } else if (p > 0) {
          for (uint32_t i = 0; i < probes; ++i)
            lost += denylist_rng.chance(p);
        }
      }
      const LinkDenylist::Change c = denylist->on_round(w.link, lost);
      if (c == LinkDenylist::Change::kNone) continue;
      const bool denied = c == LinkDenylist::Change::kDenied;
      changes.push_back(DenylistChange{w.link, denied});
      w.verdicts.emplace_back(t, denied);
      denylist_log.push_back(DenylistRecord{t, w.link / P, w.link % P, denied});
    }
    denylist_rounds.push_back(std::move(changes));
  }
}

// Whether `link` (host * P + plane) has a denylist entry at `at`.
bool Simulation::Impl::denylisted(uint32_t link, Time at) {
  compute_denylist_rounds(at / cfg.denylist.interval);
  auto w = std::lower_bound(watched.begin(), watched.end(), link,
                            [](const WatchedLink& x, uint32_t l) { return x.link < l; });
  if (w == watched.end() || w->link != link) return false;
  bool denied = false;
  for (const auto& [t, d] : w->verdicts) {
    if (t > at) break;
    denied = d;
  }
  return denied;
}

// The round due now, for the hosts of `partition`.
void Simulation::Impl::denylist_round(uint32_t partition) {
  const uint64_t k = now / cfg.denylist.interval;
  compute_denylist_rounds(k);
  if (!denylist_rounds[k - 1].empty()) {
    for (HostId g = 0; g < cfg.topo.hosts; ++g) {
      if (host_partition(g) != partition || !hosts[g].engine) continue;
      for (const DenylistChange& c : denylist_rounds[k - 1])
        apply_denylist_change(g, c);
    }
  }
  if (watched.empty() || flows_done >= num_flows) return;  // nothing left to decide
  schedule(partition, now + cfg.denylist.interval, kDenylistRound, partition);
}

// An entry for host h's link in plane p, at host g: h's own QPs and every QP sending to h
// stop using (or use again) their EVs in that plane.
void Simulation::Impl::apply_denylist_change(HostId g, const DenylistChange& c) {
  const HostId h = c.link / P;
  const auto plane = static_cast<uint8_t>(c.link % P);
  Engine& e = *hosts[g].engine;
  bool touched = false;
  for (const auto& [key, pair] : hosts[g].qps) {
    if (g != h && static_cast<HostId>(key >> 32) != h) continue;
    const PathSet* paths = e.qp_paths(pair.local_qpn);
    if (paths == nullptr) continue;
    for (int i = 0; i < static_cast<int>(paths->size()); ++i) {
      if (paths->port_of(i) != plane) continue;
      (void)e.set_path_denied(now, pair.local_qpn, i, c.denied);
      touched = true;
    }
  }
  if (touched) service_host(g);
}

bool Simulation::Impl::path_lost(const Switch& sw, uint32_t egress, const SimPacket& p) {
  if (fat_tree || sw.kind != Switch::kLeaf || egress < H) return false;
  const uint32_t spine = (egress - H) % S;
  for (const PathLoss& r : path_losses)
    if (r.probability > 0 && r.src == p.src && r.dst == p.dst && r.path.plane == sw.plane &&
        r.path.spine == spine)
      return rngs[cur_partition].chance(r.probability);
  return false;
}

void Simulation::Impl::apply_fault(uint32_t idx) {
  const FaultAction& a = faults[idx];
  if (a.kind == FaultAction::kPathLoss) {
    PathLoss& r = path_losses[a.bps];
    if (r.probability == 0 && a.value > 0) ++path_losses_active;
    if (r.probability > 0 && a.value == 0) --path_losses_active;
    r.probability = a.value;
    return;
  }
  const LinkRef& l = a.link;
  auto apply = [&](auto& port) {
    switch (a.kind) {
      case FaultAction::kLinkState:
        port.up = a.flag;
        break;
      case FaultAction::kBlackhole:
        port.blackhole = a.flag;
        break;
      case FaultAction::kLoss:
        port.loss = a.value;
        break;
      case FaultAction::kRate:
        port.rate.set(a.bps);
        break;
      case FaultAction::kPathLoss:
      case FaultAction::kNicSees:
        break;  // not a port's state (path_losses; the NIC's view)
    }
  };
  if (l.kind == LinkRef::kHostLeaf) {
    if (a.host_side) {
      apply(hosts[l.a].ports[l.plane]);
      // The NIC sees its own link go down (loss of signal) and tells the engine: at once, or
      // nic_detect later (a kNicSees action of its own).
      if ((a.kind == FaultAction::kLinkState && a.nic_detect == 0) ||
          a.kind == FaultAction::kNicSees) {
        hosts[l.a].engine->set_port_up(now, static_cast<uint8_t>(l.plane), a.flag);
        service_host(l.a);
      }
    } else {
      // Departures were scheduled under the link's old state: recall them first.
      recall(leaf_index(l.plane, leaf_of(l.a)), l.a % H);
      Switch& leaf = switches[leaf_index(l.plane, leaf_of(l.a))];
      apply(leaf.ports[l.a % H]);
      if (a.kind == FaultAction::kLinkState && a.flag)
        start_tx(leaf_index(l.plane, leaf_of(l.a)), l.a % H);
    }
    return;
  }
  // Switch-switch link: both directions. Switches never reroute in SRv6 mode; in ECMP mode
  // the routing view follows after the convergence delay.
  const LinkEnds ends = link_ends(l);
  const bool at_a = a.end != 2, at_b = a.end != 1;
  if (at_a) recall(ends.sw_a, ends.port_a);
  if (at_b) recall(ends.sw_b, ends.port_b);
  if (at_a) apply(switches[ends.sw_a].ports[ends.port_a]);
  if (at_b) apply(switches[ends.sw_b].ports[ends.port_b]);
  if (a.kind == FaultAction::kLinkState) {
    if (a.flag) {
      if (at_a) start_tx(ends.sw_a, ends.port_a);
      if (at_b) start_tx(ends.sw_b, ends.port_b);
    }
    if (blocks) return;  // route_actions
    if (cfg.transport.path_mode == PathMode::kEcmp || cfg.transport.kind == TransportKind::kRoce) {
      if (cfg.transport.routing_convergence != kNever) {
        schedule(cur_partition, now + cfg.transport.routing_convergence, kRouteUpdate, idx);
      }
    }
  }
}

void Simulation::Impl::route_update(uint32_t idx) {
  const FaultAction& a = faults[idx];
  const size_t i = route_index(a.link);
  const uint8_t down = a.flag ? 0 : 1;
  if (route_down[i] == down) return;
  route_down[i] = down;
  if (down) {
    ++route_down_count[a.link.plane];
  } else {
    --route_down_count[a.link.plane];
  }
}

// `plane`: the plane sampled (blocks layout: the partition).
void Simulation::Impl::sample(uint32_t plane) {
  const Time interval = cfg.sample_interval;
  const auto sample_switch = [&](uint32_t i) {
    for (Port& port : switches[i].ports) {
      if (port.link_id == UINT32_MAX) continue;
      if (port.waiting) settle(port);
      const uint64_t bytes = port.tx_bytes - port.sampled_tx_bytes;
      port.sampled_tx_bytes = port.tx_bytes;
      if (bytes == 0 && port.queue_bytes == 0) continue;  // idle: no sample (links.csv omits it)
      const double cap = static_cast<double>(port.rate.bps()) * static_cast<double>(interval) /
                         (8.0 * static_cast<double>(kPicosPerSecond));
      samples.push_back(LinkSample{now, port.link_id, static_cast<float>(bytes / cap),
                                   static_cast<uint32_t>(port.queue_bytes)});
    }
  };
  if (blocks) {
    for (uint32_t i : partition_switches[plane])
      sample_switch(i);
    // Completions are published between windows: every rank sees the same count.
    if (flows_done < num_flows) schedule(plane, now + interval, kSample, plane);
    return;
  }
  for (uint32_t i = plane * (L + S); i < (plane + 1) * (L + S); ++i)
    sample_switch(i);
  // Keep sampling while anything is still going on (a flow ends when it is counted done).
  if (flows_done < num_flows) schedule(plane_partition(plane), now + interval, kSample, plane);
}

void Simulation::Impl::flush_throughput() {
  if (cfg.throughput_interval == 0 || now == 0) return;
  const Time end =
      (now + cfg.throughput_interval - 1) / cfg.throughput_interval * cfg.throughput_interval;
  const Time saved = now;
  now = end;
  if (blocks) {
    for (uint32_t b = 0; b < num_partitions; ++b)
      if (ex == nullptr || owned[b]) emit_block_throughput(b);
  } else {
    emit_throughput();
  }
  now = saved;
  throughput_flushed = end;
}

void Simulation::Impl::sample_throughput(uint32_t block) {
  // An interval that flush_throughput() already wrote (the run stopped inside it) gets its
  // later bytes in the next one.
  if (blocks) {
    if (now > throughput_flushed) emit_block_throughput(block);
    // Completions are published between windows: every rank sees the same count.
    if (flows_done < num_flows) schedule(block, now + cfg.throughput_interval, kThroughput, block);
    return;
  }
  if (now > throughput_flushed) emit_throughput();
  if (flows_done < num_flows) schedule(0, now + cfg.throughput_interval, kThroughput);
}

// One block's rows (its receivers, and its share of every sender's and pair's bytes), in the
// order of emit_throughput once merge_results has sorted and added them up.
void Simulation::Impl::emit_block_throughput(uint32_t b) {
  for (HostId h = block_first_host[b]; h < block_first_host[b + 1]; ++h) {
    if (rx_placed[h] > 0)
      throughput_local.push_back({now, ThroughputSample::kHostRx, 0, h, rx_placed[h]});
    rx_placed[h] = 0;
  }
  BlockThroughput& bt = block_tp[b];
  for (const auto& [src, bytes] : bt.tx)
    throughput_local.push_back({now, ThroughputSample::kHostTx, src, 0, bytes});
  for (const auto& [key, bytes] : bt.pair)
    throughput_local.push_back({now, ThroughputSample::kPair, static_cast<HostId>(key >> 32),
                                static_cast<HostId>(key & 0xFFFFFFFF), bytes});
  bt.tx.clear();
  bt.pair.clear();
}

void Simulation::Impl::emit_throughput() {
  for (HostId h = 0; h < hosts.size(); ++h) {
    if (rx_placed[h] > 0)
      throughput.push_back({now, ThroughputSample::kHostRx, 0, h, rx_placed[h]});
    rx_placed[h] = 0;
  }
  for (HostId h = 0; h < hosts.size(); ++h) {
    if (tx_placed[h] > 0)
      throughput.push_back({now, ThroughputSample::kHostTx, h, 0, tx_placed[h]});
    tx_placed[h] = 0;
  }
  // In pair order, whatever the hash table's.
  std::vector<std::pair<uint64_t, uint64_t>> pairs(pair_placed.begin(), pair_placed.end());
  std::sort(pairs.begin(), pairs.end());
  for (const auto& [key, bytes] : pairs)
    throughput.push_back({now, ThroughputSample::kPair, static_cast<HostId>(key >> 32),
                          static_cast<HostId>(key & 0xFFFFFFFF), bytes});
  pair_placed.clear();
}

// ---------------------------------------------------------------------------------------
// Public API.

Simulation::Simulation(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Simulation::~Simulation() = default;

SimResult<std::unique_ptr<Simulation>> Simulation::create(const SimConfig& cfg,
                                                          RankExchange* exchange) {
  const TopologyConfig& t = cfg.topo;
  if (t.hosts < 2 || t.planes == 0 || t.planes > 32 || t.radix < 2 || t.link_bps == 0 ||
      cfg.transport.mtu < 64 || cfg.transport.mtu > 9000 || cfg.transport.ack_every == 0 ||
      cfg.transport.qps_per_flow == 0 || cfg.transport.qps_per_flow > 256) {
    return sim_fail(
        "topo.hosts >= 2, topo.planes 1 to 32, topo.radix >= 2, topo.link_rate > 0, "
        "transport.mtu 64 to 9000, transport.ack_every >= 1 and transport.qps_per_flow 1 to 256");
  }
  auto impl = std::make_unique<Impl>();
  impl->cfg = cfg;
  impl->ex = exchange;
  impl->blocks = cfg.block_partitions || exchange != nullptr;
  impl->cfg.block_partitions = impl->blocks;
  if (cfg.transport.kind == TransportKind::kRoce) {
    // RoCEv2 as deployed: ECMP paths, and switches that drop (or pause, with PFC) rather than
    // trim: a RoCE NIC cannot make use of a trimmed packet.
    impl->cfg.transport.path_mode = PathMode::kEcmp;
    impl->cfg.sw.trimming = false;
  }
  using Lh = SwitchConfig::EcnLastHop;
  if (impl->cfg.sw.ecn_last_hop == Lh::kAuto)
    impl->cfg.sw.ecn_last_hop = cfg.transport.kind == TransportKind::kRoce ? Lh::kOn : Lh::kOff;
  impl->ecn_last_hop = impl->cfg.sw.ecn_last_hop == Lh::kOn;
  if (auto s = impl->build(); !s) return std::unexpected(s.error());
  return std::unique_ptr<Simulation>(new Simulation(std::move(impl)));
}

const SimConfig& Simulation::config() const {
  return impl_->cfg;
}
uint32_t Simulation::num_hosts() const {
  return static_cast<uint32_t>(impl_->hosts.size());
}
uint32_t Simulation::num_leaves() const {
  return impl_->L;
}
uint32_t Simulation::num_spines() const {
  return impl_->fat_tree ? impl_->cores : impl_->S;
}
uint32_t Simulation::leaf_of(HostId h) const {
  return impl_->leaf_of(h);
}
uint32_t Simulation::num_pods() const {
  return impl_->pods;
}
uint32_t Simulation::pod_width() const {
  return impl_->half;
}
uint32_t Simulation::num_cores() const {
  return impl_->cores;
}
uint32_t Simulation::num_superpods() const {
  return impl_->superpods;
}
uint32_t Simulation::num_fat_tree_spines() const {
  return impl_->ft_spines;
}

// The ideal FCT: the flow alone on an idle fabric, a lower bound no transport can beat. The
// flow's bytes are split into parts as flow_start splits them (RoCE: a QP per plane). Its data
// packets (BTH, RETH, data extension, ImmDt for WRITE_IMM, ICRC; IPv6, UDP, Ethernet) leave
// the NIC at the full rate of the planes they may use (MRC sprays over all of them, a RoCE
// part stays on its plane), though no faster than one packet on one link; the last one then
// crosses the pair's own shortest path, each further link serializing it again (store and
// forward); the requester completes when a header-sized ACK is back over as many links. The
// smallest data packet stands for the last one, so that the bound holds for every flow size.
// A flow alone that its congestion window does not hold back finishes exactly at the ideal
// (Simulation.ideal_fct__is_the_fct_of_the_flow_alone_on_the_fabric).
Time Simulation::Impl::ideal_fct(const FlowSpec& spec) const {
  const TopologyConfig& t = cfg.topo;
  const uint64_t mtu = cfg.transport.mtu;
  const uint64_t per_packet = wire::kBthBytes + wire::kRethBytes + wire::kDataExtBytes +
                              (spec.with_imm ? wire::kImmDtBytes : 0) + wire::kIcrcBytes +
                              packet_overhead();
  const uint64_t ack = wire::kBthBytes + wire::kAethBytes + wire::kSackExtBytes + wire::kIcrcBytes +
                       packet_overhead();
  const uint32_t links = pair_links(spec.src, spec.dst);
  const Time ack_path = links * t.link_delay + (links - 1) * t.switch_latency +
                        links * serialization(ack, t.link_bps);
  // A lane: the NIC ports a set of parts shares (RoCE: one plane each; MRC: one over all).
  struct Lane {
    uint64_t wire = 0, largest = 0, smallest = UINT64_MAX;
  };
  const bool roce = cfg.transport.kind == TransportKind::kRoce;
  const uint32_t per_qp = roce ? P : 1;
  const uint32_t parts = per_qp * cfg.transport.qps_per_flow;
  std::vector<Lane> lanes(roce ? P : 1);
  for (uint32_t part = 0; part < parts; ++part) {
    const uint64_t bytes = spec.bytes / parts + (part < spec.bytes % parts ? 1 : 0);
    const uint64_t pkts = std::max<uint64_t>(1, (bytes + mtu - 1) / mtu);
    // Payloads are padded to 4 bytes (BTH pad count).
    const auto padded = [](uint64_t payload) { return (payload + 3) / 4 * 4; };
    const uint64_t full = padded(mtu) + per_packet;
    const uint64_t last = padded(bytes - (pkts - 1) * mtu) + per_packet;
    Lane& lane = lanes[roce ? part % P : 0];
    lane.wire += (pkts - 1) * full + last;
    lane.largest = std::max(lane.largest, pkts > 1 ? full : last);
    lane.smallest = std::min(lane.smallest, last);
  }
  const uint64_t lane_bps = roce ? t.link_bps : t.link_bps * P;
  Time ideal = 0;
  for (const Lane& lane : lanes) {
    if (lane.wire == 0) continue;
    const Time nic =
        std::max(serialization(lane.wire, lane_bps), serialization(lane.largest, t.link_bps));
    const Time data_path = links * t.link_delay + (links - 1) * t.switch_latency +
                           (links - 1) * serialization(lane.smallest, t.link_bps);
    ideal = std::max(ideal, nic + data_path + ack_path);
  }
  return ideal;
}

SimResult<FlowId> Simulation::add_flow(const FlowSpec& spec) {
  Impl& m = *impl_;
  if (spec.src >= m.hosts.size() || spec.dst >= m.hosts.size() || spec.src == spec.dst ||
      spec.bytes > kMaxFlowBytes || spec.path_set > m.path_sets.size()) {
    return sim_fail("flow " + std::to_string(spec.src) + " -> " + std::to_string(spec.dst) +
                    " of " + std::to_string(spec.bytes) + " bytes on path set " +
                    std::to_string(spec.path_set) + ": needs two distinct hosts of the " +
                    std::to_string(m.hosts.size()) + ", at most " + std::to_string(kMaxFlowBytes) +
                    " bytes and a path set that exists");
  }
  FlowResult r;
  r.id = static_cast<FlowId>(m.num_flows);
  r.spec = spec;
  r.spec.start = std::max(spec.start, m.now);
  r.end = kNever;
  r.ideal_fct = m.ideal_fct(spec);
  ++m.num_flows;
  if (m.sparse_flows()) {
    // Over several ranks: the record only where the sender is.
    if (!m.owned[m.host_partition(spec.src)]) {
      m.flow_slot.push_back(Impl::kNoSlot);
    } else {
      m.flow_slot.push_back(static_cast<uint32_t>(m.flows.size()));
      m.flows.push_back(r);
      m.flow_state.emplace_back();
    }
  } else {
    m.flows.push_back(r);
    m.flow_state.emplace_back();
  }
  if (m.blocks) {
    m.schedule_global(m.host_partition(spec.src), r.spec.start, kFlowStart, r.id);
    // One rank measured alone (LoneRank): the sender's rank is absent, so this rank schedules
    // the accepts the sender's flow start would send it, with the sender's partition as origin.
    const uint32_t from = m.host_partition(spec.src), to = m.host_partition(spec.dst);
    if (m.ex != nullptr && m.ex->others_absent() && !m.owned[from] && m.owned[to]) {
      const uint32_t saved = m.cur_partition;
      m.cur_partition = from;
      for (uint32_t part = 0; part < m.flow_parts(); ++part)
        m.schedule_accept(r.id, r.spec, part, r.spec.start);
      m.cur_partition = saved;
    }
    return r.id;
  }
  const uint32_t saved = m.cur_partition;
  m.cur_partition = 0;
  m.schedule(0, r.spec.start, kFlowStart, r.id);
  m.cur_partition = saved;
  return r.id;
}

SimResult<uint16_t> Simulation::add_path_set(std::vector<PathRef> paths,
                                             std::vector<PathRef> backups) {
  Impl& m = *impl_;
  const bool mrc_ecmp =
      m.cfg.transport.kind != TransportKind::kRoce && m.cfg.transport.path_mode == PathMode::kEcmp;
  if (mrc_ecmp)
    return sim_fail("pinned paths need path_mode = \"srv6\" (an ECMP entropy names no spine)");
  if (paths.empty() || paths.size() + backups.size() > 4096 || m.fat_tree ||
      m.path_sets.size() >= 0xFFFF)
    return sim_fail(
        "pinned paths: 1 to 4096 of them with their backups, on a two-tier Clos, and at most "
        "65535 path sets");
  for (const std::vector<PathRef>* list : {&paths, &backups})
    for (const PathRef& r : *list)
      if (r.plane >= m.P || r.spine >= m.S)
        return sim_fail("pinned path p" + std::to_string(r.plane) + "/spine" +
                        std::to_string(r.spine) + ": the fabric has " + std::to_string(m.P) +
                        " planes of " + std::to_string(m.S) + " spines");
  uint32_t per_plane = 0;
  // RoCE ignores pinned paths (one ECMP hash per QP): the backups' rules are MRC's.
  if (!backups.empty() && m.cfg.transport.kind != TransportKind::kRoce) {
    // PathPolicy::active_per_plane is one count for every port: the first that many EVs of
    // each port are active, the rest its backups.
    std::vector<uint32_t> active(m.P, 0);
    for (const PathRef& r : paths)
      ++active[r.plane];
    for (uint32_t p = 0; p < m.P; ++p) {
      if (active[p] == 0) continue;
      if (per_plane != 0 && active[p] != per_plane)
        return sim_fail(
            "pinned paths with backups: every plane needs the same number of "
            "active paths (plane " +
            std::to_string(p) + " has " + std::to_string(active[p]) + ", another " +
            std::to_string(per_plane) + ")");
      per_plane = active[p];
    }
    for (size_t i = 0; i < backups.size(); ++i) {
      const PathRef& r = backups[i];
      const std::string name =
          "pinned backup path p" + std::to_string(r.plane) + "/spine" + std::to_string(r.spine);
      if (active[r.plane] == 0)
        return sim_fail(name + ": no active path on plane " + std::to_string(r.plane) +
                        " for it to stand in for");
      // A backup that repeats a path of the set would swap an EV for itself.
      const auto same = [&](const PathRef& o) { return o.plane == r.plane && o.spine == r.spine; };
      if (std::any_of(paths.begin(), paths.end(), same) ||
          std::any_of(backups.begin(), backups.begin() + static_cast<std::ptrdiff_t>(i), same))
        return sim_fail(name + ": already in the set (a backup must name another spine)");
    }
  }
  m.path_sets.push_back(Impl::PinnedPaths{std::move(paths), std::move(backups), per_plane});
  return static_cast<uint16_t>(m.path_sets.size());
}

void Simulation::on_flow_complete(std::function<void(const FlowResult&)> cb) {
  impl_->flow_cbs.push_back(std::move(cb));
}
void Simulation::on_flow_received(std::function<void(const FlowResult&)> cb) {
  impl_->received_cbs.push_back(std::move(cb));
}

namespace {
FaultAction link_action(FaultAction::Kind k, LinkRef l, bool flag, double value = 0,
                        uint64_t bps = 0) {
  FaultAction a;
  a.kind = k;
  a.link = l;
  a.flag = flag;
  a.value = value;
  a.bps = bps;
  return a;
}
}  // namespace

void Simulation::link_down(LinkRef l, Time at, Time nic_detect) {
  FaultAction a = link_action(FaultAction::kLinkState, l, false);
  a.nic_detect = nic_detect;
  impl_->add_fault(a, at);
}
void Simulation::link_up(LinkRef l, Time at, Time nic_detect) {
  FaultAction a = link_action(FaultAction::kLinkState, l, true);
  a.nic_detect = nic_detect;
  impl_->add_fault(a, at);
}

// Every link of a switch, as LinkRefs.
static std::vector<LinkRef> switch_links(const Simulation& sim, SwitchRef s) {
  std::vector<LinkRef> v;
  if (const uint32_t half = sim.pod_width(); half > 0) {
    const bool four_tier = sim.num_superpods() > 0;
    const uint32_t sq = half * half;
    switch (s.kind) {
      case SwitchRef::kPodLeaf:
        for (uint32_t i = 0; i < half; ++i) {
          const uint32_t h = (s.pod * half + s.index) * half + i;
          if (h < sim.num_hosts()) v.push_back(LinkRef{LinkRef::kHostLeaf, 0, h, 0, 0});
        }
        for (uint32_t a = 0; a < half; ++a)
          v.push_back(LinkRef{LinkRef::kLeafAgg, 0, s.index, a, s.pod});
        break;
      case SwitchRef::kAgg:
        for (uint32_t i = 0; i < half; ++i) {
          v.push_back(LinkRef{LinkRef::kLeafAgg, 0, i, s.index, s.pod});
          if (four_tier) {
            const uint32_t spine = (s.pod / half) * sq + s.index * half + i;
            v.push_back(LinkRef{LinkRef::kAggSpine, 0, s.index, spine, s.pod});
          } else {
            v.push_back(LinkRef{LinkRef::kAggCore, 0, s.index, s.index * half + i, s.pod});
          }
        }
        break;
      case SwitchRef::kFtSpine: {
        const uint32_t superpod = s.index / sq, local = s.index % sq;
        for (uint32_t i = 0; i < half; ++i) {
          v.push_back(LinkRef{LinkRef::kAggSpine, 0, local / half, s.index, superpod * half + i});
          v.push_back(LinkRef{LinkRef::kSpineCore, 0, s.index, local * half + i, 0});
        }
        break;
      }
      case SwitchRef::kCore:
        if (four_tier) {
          for (uint32_t q = 0; q < sim.num_superpods(); ++q)
            v.push_back(LinkRef{LinkRef::kSpineCore, 0, q * sq + s.index / half, s.index, 0});
          break;
        }
        for (uint32_t q = 0; q < sim.num_pods(); ++q)
          v.push_back(LinkRef{LinkRef::kAggCore, 0, s.index / half, s.index, q});
        break;
      default:
        break;  // not a fat-tree switch (check_switch says so)
    }
    return v;
  }
  const uint32_t H = sim.config().topo.hosts_per_leaf ? sim.config().topo.hosts_per_leaf
                                                      : sim.config().topo.radix / 2;
  const uint32_t U = sim.config().topo.radix - H;
  if (s.kind == SwitchRef::kLeaf) {
    for (uint32_t i = 0; i < H; ++i) {
      const uint32_t h = s.index * H + i;
      if (h < sim.num_hosts()) v.push_back(LinkRef{LinkRef::kHostLeaf, s.plane, h, 0});
    }
    for (uint32_t u = 0; u < U; ++u)
      v.push_back(LinkRef{LinkRef::kLeafSpine, s.plane, s.index, u});
  } else {
    const uint32_t S = sim.num_spines();
    for (uint32_t l = 0; l < sim.num_leaves(); ++l) {
      for (uint32_t u = s.index; u < U; u += S)
        v.push_back(LinkRef{LinkRef::kLeafSpine, s.plane, l, u});
    }
  }
  return v;
}

void Simulation::switch_reboot(SwitchRef s, Time at, Time duration) {
  for (const LinkRef& l : switch_links(*this, s)) {
    link_down(l, at);
    link_up(l, at + duration);
  }
}
void Simulation::blackhole(LinkRef l, Time from, Time until) {
  impl_->add_fault(link_action(FaultAction::kBlackhole, l, true), from);
  if (until != kNever) impl_->add_fault(link_action(FaultAction::kBlackhole, l, false), until);
}
void Simulation::blackhole_switch(SwitchRef s, Time from, Time until) {
  for (const LinkRef& l : switch_links(*this, s))
    blackhole(l, from, until);
}
void Simulation::gray_loss(LinkRef l, double p, Time from, Time until) {
  impl_->add_fault(link_action(FaultAction::kLoss, l, true, p), from);
  if (until != kNever) impl_->add_fault(link_action(FaultAction::kLoss, l, true, 0), until);
}
void Simulation::degrade(LinkRef l, uint64_t bps, Time from, Time until) {
  impl_->add_fault(link_action(FaultAction::kRate, l, true, 0, bps), from);
  if (until != kNever) {
    impl_->add_fault(link_action(FaultAction::kRate, l, true, 0, impl_->cfg.topo.link_bps), until);
  }
}
void Simulation::flap(LinkRef l, Time start, Time period, uint32_t count, Time nic_detect) {
  for (uint32_t i = 0; i < count; ++i) {
    link_down(l, start + 2 * i * period, nic_detect);
    link_up(l, start + (2 * i + 1) * period, nic_detect);
  }
}

Time Simulation::run(Time until) {
  const Time t = impl_->run(until);
  if (!impl_->blocks) impl_->flush_throughput();  // the blocks layout's run_blocks did
  return t;
}
Time Simulation::now() const {
  return impl_->now;
}
Simulation::WindowBalance Simulation::window_balance() const {
  return impl_->balance;
}

uint64_t Simulation::bytes_placed() const {
  uint64_t total = 0;
  for (const Host& h : impl_->hosts)
    if (h.engine) total += h.engine->counters().bytes_placed;
  return total;
}
void Simulation::on_progress(std::function<void(Time, uint64_t)> cb) {
  impl_->progress_cb = std::move(cb);
}
const std::vector<FlowResult>& Simulation::flows() const {
  return impl_->flows;
}

SimStats Simulation::stats() const {
  if (impl_->merged) {
    SimStats s = impl_->merged_stats;
    if (!impl_->sparse_flows())  // else counted over every rank by merge_results
      for (const FlowResult& f : impl_->flows)
        s.qp_errors += (f.end != kNever && !f.ok) ? 1 : 0;
    impl_->add_ev_counts(s);
    return s;
  }
  SimStats s = impl_->counters;
  s.events = impl_->events;
  impl_->add_engine_stats(s);
  for (const FlowResult& f : impl_->flows)
    s.qp_errors += (f.end != kNever && !f.ok) ? 1 : 0;
  impl_->add_ev_counts(s);
  return s;
}

// The engines' counters and QP memory of this rank's hosts (another rank's have no engine).
void Simulation::Impl::add_engine_stats(SimStats& s) const {
  for (const Host& h : hosts) {
    if (!h.engine) continue;
    const EngineCounters& c = h.engine->counters();
    s.data_packets += c.data_sent;
    s.retransmits += c.retransmits;
    s.ev_state_changes += c.ev_state_changes;
    s.ev_swaps += c.ev_swaps;
    s.ev_ecn_swaps += c.ev_ecn_swaps;
    s.peer_port_changes += c.peer_port_changes;
    s.timeouts += c.timeouts;
    s.pto_losses += c.losses_pto;
    s.pto_borrowed_rtt += c.losses_pto_borrowed_rtt;
    s.probes_sent += c.probes_sent;
    s.probes_unanswered += c.probes_unanswered;
    s.probes_deferred += c.probes_deferred;
    s.ack_ev_changes += c.ack_ev_changes;
    s.reverse_probes += c.reverse_probes_sent;
    s.reverse_probes_unanswered += c.reverse_probes_unanswered;
    for (const auto& [key, pair] : h.qps) {
      if (auto m = h.engine->qp_memory(pair.local_qpn)) {
        ++s.qps;
        s.qp_bytes += m->total();
        s.qp_path_bytes += m->paths;
      }
    }
  }
}

void Simulation::Impl::add_ev_counts(SimStats& s) const {
  if (!fat_tree && cfg.transport.kind != TransportKind::kRoce) {
    s.evs_active_per_plane = active_evs_per_plane();
    s.evs_backup_per_plane = backup_evs_per_plane();
  }
}

const std::vector<LinkSample>& Simulation::link_samples() const {
  if (impl_->merged) return impl_->merged_samples;
  return impl_->samples;
}
const std::vector<ThroughputSample>& Simulation::throughput_samples() const {
  return impl_->throughput;
}

void Simulation::path_loss(HostId src, HostId dst, PathRef path, double probability, Time from,
                           Time until) {
  Impl& m = *impl_;
  FaultAction a;
  a.kind = FaultAction::kPathLoss;
  a.link = LinkRef{LinkRef::kLeafSpine, path.plane, 0, 0};  // scheduled in the plane's partition
  a.bps = m.path_losses.size();
  m.path_losses.push_back(Impl::PathLoss{src, dst, path, 0});
  a.value = probability;
  m.add_fault(a, from);
  if (until != kNever) {
    a.value = 0;
    m.add_fault(a, until);
  }
}

const std::vector<DenylistRecord>& Simulation::denylist_log() const {
  return impl_->denylist_log;
}

const std::vector<EvEvent>& Simulation::ev_events() const {
  if (impl_->merged) return impl_->merged_ev_events;
  return impl_->ev_events;
}

SimStatus Simulation::enable_event_log(const std::string& path, std::vector<HostId> which) {
  std::FILE* f = std::fopen(path.c_str(), "w");
  if (!f)
    return sim_fail(Error::kInvalidArgument,
                    path + ": cannot write the event log (" + std::strerror(errno) + ")");
  auto log = std::make_unique<EventLogFile>();
  log->f = f;
  for (HostId h : which) {
    if (h >= impl_->hosts.size() || !impl_->hosts[h].engine) continue;  // another rank's
    auto host = std::make_unique<EventLogFile::Host>();
    host->file = log.get();
    host->node = h;
    impl_->hosts[h].engine->set_event_log(host.get());
    log->hosts.push_back(std::move(host));
  }
  impl_->event_log = std::move(log);
  return {};
}

SimStatus Simulation::enable_pcap(const std::string& path, std::vector<HostId> which) {
  auto w = wire::PcapWriter::open(path);
  if (!w)
    return sim_fail(w.error(),
                    path + ": cannot write pcap (" + std::string(error_name(w.error())) + ")");
  impl_->pcap = std::make_unique<wire::PcapWriter>(std::move(*w));
  impl_->pcap_hosts.assign(impl_->hosts.size(), 0);
  for (HostId h : which) {
    if (h < impl_->hosts.size()) impl_->pcap_hosts[h] = 1;
  }
  return {};
}

}  // namespace mrc::sim
