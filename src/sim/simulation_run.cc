// The event loop (part of Simulation, see simulation_impl.h): dispatching events, prefetching
// the state the next ones touch, the serial run in windows of one lookahead, and the blocks
// layout's run, which exchanges events and flow completions between ranks at the end of each
// window and merges the ranks' results.
#include <algorithm>
#include <cstddef>
#include <cstring>
#include <tuple>
#include <type_traits>

#include "sim/simulation_impl.h"

namespace mrc::sim {

void Simulation::Impl::dispatch(const SimEvent& e) {
  switch (e.type) {
    case kFlowStart:
      flow_start(e.a);
      break;
    case kHostArrive:
      host_arrive(e.a, e.c);
      break;
    case kHostPortFree:
      service_host(e.a);
      break;
    case kHostTimer:
      if (hosts[e.a].timer_at == e.time) {
        hosts[e.a].timer_at = kNever;
        hosts[e.a].engine->on_timer(now);
        service_host(e.a);
      }
      break;
    case kSwitchArrive:
      switch_arrive(e.a, e.b, e.c);
      break;
    case kPortFree: {
      // A transmission may have started at this very time before this event ran (a packet
      // arriving at an idle port); then a newer kPortFree is pending and this one is stale.
      Port& out = switches[e.a].ports[e.b];
      if (out.busy_until > now) break;
      out.free_pending = false;
      start_tx(e.a, e.b);
      break;
    }
    case kPortDeliver:
      deliver(e.a, e.b);
      break;
    case kPause:
      handle_pause(e.a, e.b, e.c != 0);
      break;
    case kFault:
      apply_fault(e.a);
      break;
    case kSample:
      sample(e.a);
      break;
    case kRouteUpdate:
      route_update(e.a);
      break;
    case kFlowAccept:
      flow_accept(e.c);
      break;
    case kThroughput:
      sample_throughput(e.a);
      break;
    case kDenylistRound:
      denylist_round(e.a);
      break;
  }
}

// The state the next events touch is cold: the packet pool, the engines of thousands of hosts
// and the switch ports are far larger than the caches. Start loading it while this event
// runs, in two stages because an engine's QPs are reached through the engine: the engine
// object of the event after next, then the next event's packet, engine state (QPs) and port.
// Benchmark A: together ~15 % of wall time.
void Simulation::Impl::prefetch_ahead(const EventQueue& q) {
  const auto host_event = [](const SimEvent& n) {
    return n.type == kHostArrive || n.type == kHostPortFree || n.type == kHostTimer;
  };
  // Three stages, one event apart (Engine::prefetch_tables): the engine object two events
  // ahead, its tables one event ahead, its QPs for the next event. A packet's record is
  // fetched two events ahead as well: one event ahead its miss was still outstanding when the
  // event ran (the prefetch itself waited, a tenth of benchmark A's time).
  const auto packet_event = [](const SimEvent& n) {
    return n.type == kSwitchArrive || n.type == kHostArrive || n.type == kPortDeliver;
  };
  if (const SimEvent* n3 = q.peek_ahead(2); n3) {
    if (host_event(*n3)) {
      const char* engine = reinterpret_cast<const char*>(engines[n3->a]);
      for (int line = 0; line < 4; ++line)
        __builtin_prefetch(engine + 64 * line);
      __builtin_prefetch(&hosts[n3->a]);
    }
    if (packet_event(*n3)) __builtin_prefetch(&packets[n3->c]);
  }
  if (const SimEvent* n2 = q.peek_ahead(1); n2 && host_event(*n2)) {
    engines[n2->a]->prefetch_tables();
  }
  const SimEvent* n = q.peek_ready();
  if (!n) return;
  if (packet_event(*n)) __builtin_prefetch(&packets[n->c]);
  if (host_event(*n)) engines[n->a]->prefetch();
  if (n->type == kPortDeliver) __builtin_prefetch(&switches[n->a].ports[n->b]);
}

Time Simulation::Impl::run(Time until) {
  if (blocks) return run_blocks(until);
  uint64_t next_progress = events + (1u << 22);
  while (true) {
    // Done when every flow has finished: probes of paths that stay dead would otherwise keep
    // the event queues busy for ever.
    if (num_flows > 0 && flows_done == num_flows) break;
    Time t = kNever;
    for (auto& q : queues)
      t = std::min(t, q.peek_time());
    if (t == kNever || t > until) break;
    // Conservative window: nothing sent across partitions arrives sooner than the lookahead.
    const Time end = num_partitions > 1 ? t + lookahead : t + 1;
    for (uint32_t pi = 0; pi < num_partitions; ++pi) {
      EventQueue& q = queues[pi];
      cur_partition = pi;
      while (true) {
        const Time next = q.peek_time();  // kNever when empty
        if (next >= end || next > until) break;
        const SimEvent e = q.pop();
        prefetch_ahead(q);
        now = e.time;
        ++events;
        dispatch(e);
      }
    }
    now = std::max(now, t);
    if (progress_cb && events >= next_progress) {
      progress_cb(now, events);
      next_progress = events + (1u << 22);
    }
  }
  return now;
}

// ---------------------------------------------------------------------------------------
// The blocks layout's run: windows of one lookahead over the partitions this rank holds,
// then the events for other ranks' partitions are exchanged and the window's flow
// completions published (on every rank, in (end, flow) order). The window sequence is the
// same on any number of ranks (each starts at the earliest event of the whole fabric), and
// so is every partition's order of events (time, origin partition, origin sequence): results
// do not depend on the number of ranks. docs/simulator.md, "Running on several machines".

namespace {
// An event for another rank: where it goes, and the packet it carries (kSwitchArrive).
struct RemoteHeader {
  uint32_t partition = 0;
  uint32_t carries = 0;  // 0 nothing, 1 a data packet, 2 a control packet, 3 a FlowAccept
  SimEvent event;
};
static_assert(std::is_trivially_copyable_v<SimPacket>);
static_assert(std::is_trivially_copyable_v<wire::TransportPacket>);
static_assert(std::is_trivially_copyable_v<FlowResult>);
static_assert(std::is_trivially_copyable_v<LinkSample>);
static_assert(std::is_trivially_copyable_v<EvEvent>);
static_assert(std::is_trivially_copyable_v<ThroughputSample>);

template <typename T>
void append(OutBuffer& out, const T& x) {
  std::memcpy(out.grow(sizeof(T)), &x, sizeof(T));
}
template <typename T>
T take(const std::vector<uint8_t>& in, size_t& pos) {
  T x;
  std::memcpy(&x, in.data() + pos, sizeof(T));
  pos += sizeof(T);
  return x;
}
// An event for another rank goes as its header (RemoteHeader, 40 bytes) and the packet record
// it carries without the record's padding (112 bytes), both copied whole. A control packet's
// transport header (256 bytes, most of them a SACK's zero words) and a FlowAccept go with
// their zero 32-bit words left out: a mask of the nonzero words (a bit each), then those
// words. Everything sent that way made a data packet about 100 bytes instead of 152, but the
// word-by-word packing and unpacking cost the ranks about 9 % of their CPU, far more than the
// transfer of the extra bytes (docs/perf-log.md).
void append_sparse(OutBuffer& out, const void* src, size_t bytes) {
  const size_t words = bytes / 4, mask_bytes = (words + 7) / 8;
  uint8_t* mask = out.grow(mask_bytes + bytes);  // at most; trimmed below
  uint8_t* w = mask + mask_bytes;
  const auto* s = static_cast<const uint8_t*>(src);
  // Branch-free: every word is stored, and the cursor moves past it only if it is nonzero
  // (which words are zero varies from packet to packet, so a branch mispredicts often).
  for (size_t i = 0; i < words; i += 8) {
    uint32_t m = 0;
    const size_t end = std::min(words, i + 8);
    for (size_t k = i; k < end; ++k) {
      uint32_t v;
      std::memcpy(&v, s + 4 * k, 4);
      std::memcpy(w, &v, 4);
      const uint32_t nonzero = v != 0;
      m |= nonzero << (k - i);
      w += 4 * nonzero;
    }
    mask[i / 8] = static_cast<uint8_t>(m);
  }
  out.used = static_cast<size_t>(w - out.bytes.data());
}
void take_sparse(const std::vector<uint8_t>& in, size_t& pos, void* dst, size_t bytes) {
  const size_t words = bytes / 4, mask_bytes = (words + 7) / 8;
  const uint8_t* mask = in.data() + pos;
  const uint8_t* w = mask + mask_bytes;
  auto* d = static_cast<uint8_t*>(dst);
  for (size_t i = 0; i < words; ++i) {
    const uint32_t present = (mask[i / 8] >> (i % 8)) & 1;
    uint32_t v = 0;
    if (present) std::memcpy(&v, w, 4);  // a conditional load: compiled without a branch
    std::memcpy(d + 4 * i, &v, 4);
    w += 4 * present;
  }
  pos = static_cast<size_t>(w - in.data());
}
// A packet record's bytes without the padding after its body.
constexpr size_t kPacketBytes = offsetof(SimPacket, body) + sizeof(DataBody);
static_assert(kPacketBytes % 4 == 0 && sizeof(RemoteHeader) % 4 == 0 &&
              sizeof(wire::TransportPacket) % 4 == 0);
template <typename T>
void append_sparse(OutBuffer& out, const T& x) {
  append_sparse(out, &x, sizeof(T));
}
template <typename T>
T take_sparse(const std::vector<uint8_t>& in, size_t& pos) {
  T x;
  take_sparse(in, pos, &x, sizeof(T));
  return x;
}
template <typename T>
std::vector<uint8_t> to_bytes(const std::vector<T>& v) {
  std::vector<uint8_t> out(v.size() * sizeof(T));
  if (!v.empty()) std::memcpy(out.data(), v.data(), out.size());
  return out;
}
template <typename T>
std::vector<T> from_bytes(const std::vector<uint8_t>& in) {
  std::vector<T> v(in.size() / sizeof(T));
  if (!v.empty()) std::memcpy(v.data(), in.data(), v.size() * sizeof(T));
  return v;
}
// What a rank sends every other rank at the end of a window, ahead of the events for it.
struct WindowHeader {
  Time next = kNever;        // the sender's earliest event after the window (held or sent)
  uint64_t events = 0;       // events the sender has run so far (progress)
  uint64_t completions = 0;  // flow results that follow (the window's, to every rank)
  uint64_t event_bytes = 0;  // then the events for the receiver
};
}  // namespace

void Simulation::Impl::encode_remote() {
  // Far enough ahead that a record's lines arrive while the events before it are encoded.
  constexpr size_t kAhead = 8;
  const size_t n = remote_pending.size();
  for (size_t i = 0; i < n; ++i) {
    if (i + kAhead < n) {
      const SimEvent& ahead = remote_pending[i + kAhead].event;
      if (ahead.type == kSwitchArrive) {
        const char* rec = reinterpret_cast<const char*>(&packets[ahead.c]);
        __builtin_prefetch(rec);
        __builtin_prefetch(rec + 64);  // the body runs into the record's second line
      } else if (ahead.type == kFlowAccept) {
        __builtin_prefetch(&accepts[ahead.c]);
      }
    }
    const auto [partition, e] = remote_pending[i];
    OutBuffer& out = outbound[BlockLayout::rank_of(partition, num_partitions, ex->ranks())];
    if (out.used < sizeof(WindowHeader)) out.grow(sizeof(WindowHeader));  // communicate()
    RemoteHeader h;
    h.partition = partition;
    h.event = e;
    if (e.type == kSwitchArrive) {
      const SimPacket& p = packets[e.c];
      h.carries = p.is_data ? 1 : 2;
      h.event.c = 0;  // local indices: the receiver allocates its own
      append(out, h);
      std::memcpy(out.grow(kPacketBytes), &p, kPacketBytes);
      if (!p.is_data) append_sparse(out, controls[p.control]);
      free_packet(e.c);
      continue;
    }
    if (e.type == kFlowAccept) {
      static_assert(sizeof(FlowAccept) % 4 == 0);
      h.carries = 3;
      h.event.c = 0;
      append(out, h);
      append_sparse(out, accepts[e.c]);
      free_accepts.push_back(e.c);
      continue;
    }
    append(out, h);
  }
  remote_pending.clear();
}

// One exchange per window: events for other ranks' partitions, this window's flow
// completions (to every rank), the earliest time each rank will need next and its event count.
// Returns the start of the next window (before the workload adds flows); completions go to
// `completed` in rank order.
Time Simulation::Impl::communicate(uint64_t& total_events) {
  encode_remote();
  const uint32_t ranks = ex->ranks();
  WindowHeader mine;
  for (uint32_t pi = 0; pi < num_partitions; ++pi)
    if (owned[pi]) mine.next = std::min(mine.next, queues[pi].peek_time());
  mine.next = std::min(mine.next, outbound_min);  // the earliest event sent
  mine.events = events;
  mine.completions = completed.size();
  // Each rank's buffer starts with room for its header (send_remote appends after it).
  std::vector<std::span<const uint8_t>> sends(ranks);
  for (uint32_t r = 0; r < ranks; ++r) {
    OutBuffer& out = outbound[r];
    if (out.used < sizeof(WindowHeader)) out.grow(sizeof(WindowHeader));
    WindowHeader h = mine;
    h.event_bytes = out.used - sizeof(WindowHeader);
    std::memcpy(out.bytes.data(), &h, sizeof h);
    for (const FlowResult& f : completed)
      append(out, f);
    sends[r] = {out.bytes.data(), out.used};
  }
  completed.clear();
  const size_t in_size = ex->exchange(sends, inbound);
  const std::vector<uint8_t>& in = inbound;
  for (auto& out : outbound)
    out.used = sizeof(WindowHeader);
  outbound_min = kNever;
  Time next = kNever;
  total_events = 0;
  size_t pos = 0;
  std::vector<uint64_t>& per_rank = balance.events_per_rank;
  per_rank.resize(ranks, 0);
  uint64_t busiest = 0;
  for (uint32_t r = 0; pos < in_size; ++r) {  // one header per rank, in rank order
    const auto h = take<WindowHeader>(in, pos);
    next = std::min(next, h.next);
    total_events += h.events;
    if (!ex->others_absent()) {  // measured alone (LoneRank), the one header is not rank r's
      busiest = std::max(busiest, h.events - per_rank[r]);
      balance.total_sum += h.events - per_rank[r];
      per_rank[r] = h.events;
    }
    const size_t end = pos + h.event_bytes;
    while (pos < end) {
      const auto rh = take<RemoteHeader>(in, pos);
      SimEvent e = rh.event;
      if (rh.carries == 3) {
        const uint32_t ai = pool_take(accepts, free_accepts);
        accepts[ai] = take_sparse<FlowAccept>(in, pos);
        e.c = ai;
      } else if (rh.carries != 0) {
        // Straight into the pools' slots, without a local copy.
        const uint32_t idx = alloc_packet();
        std::memcpy(static_cast<void*>(&packets[idx]), in.data() + pos, kPacketBytes);
        pos += kPacketBytes;
        if (rh.carries == 2) {
          const uint32_t c = alloc_control();
          take_sparse(in, pos, &controls[c], sizeof(wire::TransportPacket));
          packets[idx].control = c;
        }
        e.c = idx;
      }
      queues[rh.partition].push(e);
    }
    for (uint64_t i = 0; i < h.completions; ++i)
      completed.push_back(take<FlowResult>(in, pos));
  }
  balance.busiest_sum += busiest;
  return next;
}

void Simulation::Impl::publish_completions(std::vector<FlowResult> done) {
  // Receptions (end == kNever) and completions by time; at one time receptions first, then
  // by flow. A flow's reception always comes before its completion.
  const auto at = [](const FlowResult& r) { return r.end == kNever ? r.received : r.end; };
  std::sort(done.begin(), done.end(), [&](const FlowResult& x, const FlowResult& y) {
    if (at(x) != at(y)) return at(x) < at(y);
    if ((x.end == kNever) != (y.end == kNever)) return x.end == kNever;
    return x.id < y.id;
  });
  const Time saved = now;
  for (const FlowResult& r : done) {
    // The workload hears of it one lookahead later (at the earliest, in the next window): a
    // flow it adds now starts no earlier than that (add_flow).
    now = at(r) + lookahead;
    // Every rank hands the workload the same record: a reception carries the flow id and
    // the time only (the receiver's rank may not hold the flow's record), a completion the
    // sender's result with the reception time.
    if (r.end == kNever) {
      received_at[r.id] = r.received;
      if (FlowResult* rec = flow_record(r.id)) rec->received = r.received;
      for (auto& cb : received_cbs)
        cb(r);
      continue;
    }
    FlowResult done_r = r;
    if (auto it = received_at.find(r.id); it != received_at.end()) {
      done_r.received = it->second;
      received_at.erase(it);
    }
    if (FlowResult* rec = flow_record(r.id)) *rec = done_r;
    ++flows_done;
    for (auto& cb : flow_cbs)
      cb(done_r);
  }
  now = saved;
}

Time Simulation::Impl::run_blocks(Time until) {
  std::sort(route_actions.begin() + static_cast<std::ptrdiff_t>(next_route_action),
            route_actions.end());
  uint64_t next_progress = events + (1u << 22);
  const auto earliest_here = [&] {
    Time e = kNever;
    for (uint32_t pi = 0; pi < num_partitions; ++pi)
      if (owned[pi]) e = std::min(e, queues[pi].peek_time());
    return e;
  };
  // Each window starts at the earliest event of the whole fabric.
  Time t = earliest_here();
  if (ex != nullptr) {
    std::vector<uint64_t> m{t};
    ex->all_min(m);
    t = m[0];
  }
  Time stopped = t;
  while (true) {
    if (num_flows > 0 && flows_done == num_flows) break;
    if (t == kNever || t > until) break;
    stopped = t;
    // Routing view changes due by then, in order; a window ends at the next one.
    while (next_route_action < route_actions.size() &&
           route_actions[next_route_action].first <= t) {
      route_update(route_actions[next_route_action].second);
      ++next_route_action;
    }
    Time end = t + lookahead;
    if (next_route_action < route_actions.size())
      end = std::min(end, route_actions[next_route_action].first);
    for (uint32_t pi = 0; pi < num_partitions; ++pi) {
      if (!owned[pi]) continue;
      EventQueue& q = queues[pi];
      cur_partition = pi;
      while (true) {
        const Time next = q.peek_time();
        if (next >= end || next > until) break;
        const SimEvent e = q.pop();
        prefetch_ahead(q);
        now = e.time;
        last_event = std::max(last_event, now);
        ++events;
        dispatch(e);
      }
    }
    now = t;
    uint64_t total_events = events;
    Time next = kNever;
    std::vector<FlowResult> done;
    if (ex != nullptr) next = communicate(total_events);
    done.swap(completed);
    global_scheduled = kNever;
    publish_completions(std::move(done));
    next = ex != nullptr ? std::min(next, global_scheduled) : earliest_here();
    if (progress_cb && total_events >= next_progress) {
      // t: where the slowest rank is (every rank has finished the window before t).
      if (ex == nullptr || ex->rank() == 0) progress_cb(t, total_events);
      next_progress = total_events + (1u << 22);
    }
    t = next;
  }
  // Where the run stopped: the latest event anywhere (at least the last window's start).
  Time latest = std::max(last_event, stopped == kNever ? 0 : stopped);
  if (ex != nullptr) {
    std::vector<uint64_t> m{~latest};
    ex->all_min(m);
    latest = ~m[0];
  }
  now = std::max(now, latest);
  flush_throughput();
  merge_results();
  return now;
}

// Results of the whole fabric, in an order independent of the ranks: link samples by (time,
// link), EV events by (time, host) (a host's own events keep their order).
void Simulation::Impl::merge_results() {
  if (ex != nullptr) {
    merged_samples = from_bytes<LinkSample>(ex->all_gather(to_bytes(samples)));
    merged_ev_events = from_bytes<EvEvent>(ex->all_gather(to_bytes(ev_events)));
  } else {
    merged_samples = samples;
    merged_ev_events = ev_events;
  }
  std::stable_sort(merged_samples.begin(), merged_samples.end(),
                   [](const LinkSample& x, const LinkSample& y) {
                     return x.time != y.time ? x.time < y.time : x.link < y.link;
                   });
  if (cfg.throughput_interval > 0) {
    // Every block's rows: sorted as emit_throughput writes them, a sender's rows of one
    // interval (one per receiving block) added up.
    std::vector<ThroughputSample> all =
        ex != nullptr ? from_bytes<ThroughputSample>(ex->all_gather(to_bytes(throughput_local)))
                      : throughput_local;
    const auto key = [](const ThroughputSample& x) {
      return std::make_tuple(x.time, x.kind, x.src, x.dst);
    };
    std::sort(all.begin(), all.end(), [&](const ThroughputSample& x, const ThroughputSample& y) {
      return key(x) < key(y);
    });
    throughput.clear();
    for (const ThroughputSample& x : all) {
      if (!throughput.empty() && key(throughput.back()) == key(x)) {
        throughput.back().bytes += x.bytes;
      } else {
        throughput.push_back(x);
      }
    }
  }
  std::stable_sort(merged_ev_events.begin(), merged_ev_events.end(),
                   [](const EvEvent& x, const EvEvent& y) {
                     return x.time != y.time ? x.time < y.time : x.host < y.host;
                   });
  SimStats s = counters;
  s.events = events;
  add_engine_stats(s);
  if (sparse_flows()) {
    // This rank's flows (the ones it sent) to rank 0, which then holds every flow's result;
    // the others keep their own. Failed flows are counted here, over every rank.
    for (const FlowResult& f : flows)
      s.qp_errors += (f.end != kNever && !f.ok) ? 1 : 0;
    // Measured alone (LoneRank), rank 0 does not gather: the others' flows never come.
    const std::vector<FlowResult> all = ex->others_absent()
                                            ? std::vector<FlowResult>{}
                                            : from_bytes<FlowResult>(ex->gather(to_bytes(flows)));
    if (rank == 0 && !ex->others_absent()) {
      std::vector<FlowResult> whole(num_flows);
      for (const FlowResult& f : all)
        whole[f.id] = f;
      flows = std::move(whole);
    }
  }
  if (ex != nullptr) {
    std::vector<uint64_t> v{s.events,
                            s.data_packets,
                            s.retransmits,
                            s.drops,
                            s.fault_drops,
                            s.trims,
                            s.ecn_marks,
                            s.pfc_pauses,
                            s.ev_state_changes,
                            s.timeouts,
                            s.ev_swaps,
                            s.qps,
                            s.qp_bytes,
                            s.qp_path_bytes,
                            s.peer_port_changes,
                            s.pto_losses,
                            s.pto_borrowed_rtt,
                            s.probes_sent,
                            s.probes_unanswered,
                            s.probes_deferred,
                            s.ev_ecn_swaps,
                            s.qp_errors,
                            s.ack_ev_changes,
                            s.reverse_probes,
                            s.reverse_probes_unanswered};
    ex->all_sum(v);
    s.qp_errors = v[21];
    s.ack_ev_changes = v[22];
    s.reverse_probes = v[23];
    s.reverse_probes_unanswered = v[24];
    s.peer_port_changes = v[14];
    s.pto_losses = v[15];
    s.pto_borrowed_rtt = v[16];
    s.probes_sent = v[17];
    s.probes_unanswered = v[18];
    s.probes_deferred = v[19];
    s.ev_ecn_swaps = v[20];
    s.ev_swaps = v[10];
    s.qps = v[11];
    s.qp_bytes = v[12];
    s.qp_path_bytes = v[13];
    s.events = v[0];
    s.data_packets = v[1];
    s.retransmits = v[2];
    s.drops = v[3];
    s.fault_drops = v[4];
    s.trims = v[5];
    s.ecn_marks = v[6];
    s.pfc_pauses = v[7];
    s.ev_state_changes = v[8];
    s.timeouts = v[9];
  }
  merged_stats = s;
  merged = true;
}

}  // namespace mrc::sim
