// The packet data path (part of Simulation, see simulation_impl.h): a host's NIC transmits
// what its engine polls and hands it arriving packets; a switch forwards a packet into an
// egress port's queues (ECN marking, trimming, drops, PFC pause and resume), and a port
// transmits event by event or keeps a schedule of departures (Port::wire). Also the pcap tap
// of chosen hosts' packets.
#include <algorithm>

#include "sim/simulation_impl.h"

namespace mrc::sim {

void Simulation::Impl::service_host(HostId h) {
  Host& host = hosts[h];
  Engine& e = *host.engine;
  uint32_t mask = 0;
  for (uint32_t p = 0; p < P; ++p) {
    const HostPort& hp = host.ports[p];
    if (hp.busy_until <= now && !hp.paused) mask |= 1u << p;
  }
  TxPacket tx;
  while (mask && e.poll_transmit(now, mask, tx)) {
    send_from_host(h, tx);
    mask &= ~(1u << tx.port);
  }
  Completion c;
  while (e.poll_completion(c))
    on_completion(h, c);
  Event ev;
  while (e.poll_event(ev)) {
    if (ev.type == mrc::EventType::kEvStateChange) {
      ev_events.push_back(EvEvent{now, h, ev.qpn, ev.ev_index, ev.port, ev.from, ev.to});
    } else if (ev.type == mrc::EventType::kEvSwap) {
      ev_events.push_back(EvEvent{now, h, ev.qpn, ev.ev_index, ev.port, ev.from, ev.to,
                                  static_cast<int32_t>(ev.replaced)});
    } else if (ev.type == mrc::EventType::kAckEvChange) {
      ev_events.push_back(EvEvent{
          now, h, ev.qpn, ev.ev_index, ev.port, ev.from, ev.to,
          ev.replaced == mrc::Event::kNoPath ? -1 : static_cast<int32_t>(ev.replaced), true});
    }
  }
  // A deadline already in the past fires now; timer_at must hold the event's own time, or
  // the event would look stale when it runs and the host would never be woken again.
  const Time d = std::max(e.next_deadline(), now);
  if (d < host.timer_at) {
    host.timer_at = d;
    schedule(host_partition(h), d, kHostTimer, h);
  }
}

void Simulation::Impl::send_from_host(HostId h, const TxPacket& tx) {
  Host& host = hosts[h];
  HostPort& hp = host.ports[tx.port];
  const uint32_t idx = alloc_packet();
  SimPacket& p = packets[idx];
  const bool data = tx.pkt.bth.opcode == wire::Opcode::kWriteOnly ||
                    tx.pkt.bth.opcode == wire::Opcode::kWriteOnlyImm;
  p.is_data = data;
  if (data && !host.path_counts.empty()) {
    auto c = host.path_counts.find(tx.src_qpn);
    if (c != host.path_counts.end() && tx.ev_index < c->second.sent.size())
      ++c->second.sent[tx.ev_index];
  }
  if (data) {
    p.body = DataBody{tx.pkt.bth, tx.pkt.reth, tx.pkt.imm, tx.pkt.payload_len, tx.pkt.data};
  } else {
    p.control = alloc_control();
    controls[p.control] = tx.pkt;
    controls[p.control].payload = nullptr;
  }
  p.wire_bytes = tx.transport_bytes + packet_overhead();
  p.src = h;
  p.dst = tx.peer;
  p.plane = tx.port;
  p.flags = data ? kEct : kHigh;
  p.entropy =
      (static_cast<uint32_t>(tx.ev[0]) << 24) | (tx.ev[1] << 16) | (tx.ev[2] << 8) | tx.ev[3];
  p.spine = kNoSpine;
  if (cfg.transport.path_mode == PathMode::kSrv6 && cfg.transport.kind != TransportKind::kRoce) {
    if (fat_tree) [[unlikely]] {
      p.spine = ft_path(tx.ev);
    } else {
      const uint16_t first = ev::usid_at(tx.ev, 0);
      if (first >= kSpineUsidBase) p.spine = static_cast<uint16_t>((first - kSpineUsidBase) % S);
    }
  }
  p.dst_leaf = leaf_of(p.dst);
  p.qp_index = 0;
  p.path_set = 0;
  if (!host.qp_sub.empty()) [[unlikely]] {
    if (auto it = host.qp_sub.find(tx.src_qpn); it != host.qp_sub.end()) {
      p.qp_index = static_cast<uint8_t>(it->second >> 16);
      p.path_set = static_cast<uint16_t>(it->second);
    }
  }
  if (pcap && pcap_hosts[h]) tap(h, p);
  const Time ser = hp.rate.serialize(p.wire_bytes);
  hp.busy_until = now + ser;
  schedule(host_partition(h), hp.busy_until, kHostPortFree, h, tx.port);
  if (!hp.up || hp.blackhole || (hp.loss > 0 && rngs[cur_partition].chance(hp.loss))) {
    ++counters.fault_drops;
    ++counters.drops;
    free_packet(idx);
    return;
  }
  const Switch& leaf = switches[hp.leaf];
  schedule(leaf.partition, now + ser + hp.delay + cfg.topo.switch_latency, kSwitchArrive, hp.leaf,
           hp.leaf_port, idx);
}

void Simulation::Impl::host_arrive(HostId h, uint32_t idx) {
  SimPacket& p = packets[idx];

  if (pcap && pcap_hosts[h]) tap(h, p);
  RxPacket rx;
  rx.port = p.plane;
  rx.ecn_ce = p.flags & kCe;
  rx.trimmed = p.flags & kTrimmed;
  to_transport(p, rx.pkt);
  if (blocks) {
    // The sender addressed the QP pair, not a QP number (blocks_qp): deliver to this host's
    // QP for the sender.
    const uint32_t plane_key = cfg.transport.kind == TransportKind::kRoce ? p.plane : 0xFF;
    auto it = hosts[h].qps.find(qp_key(p.src, plane_key, p.qp_index, p.path_set));
    if (it != hosts[h].qps.end()) rx.pkt.bth.dest_qp = it->second.local_qpn;
  }
  const HostId src = p.src;
  free_packet(idx);
  if (cfg.throughput_interval > 0) [[unlikely]] {
    Engine& e = *hosts[h].engine;
    const uint64_t before = e.counters().bytes_placed;
    (void)e.on_packet(now, rx);
    if (const uint64_t placed = e.counters().bytes_placed - before; placed > 0) {
      rx_placed[h] += placed;
      if (blocks) {
        BlockThroughput& bt = block_tp[host_partition(h)];
        bt.tx[src] += placed;
        bt.pair[(static_cast<uint64_t>(src) << 32) | h] += placed;
      } else {
        tx_placed[src] += placed;
        pair_placed[(static_cast<uint64_t>(src) << 32) | h] += placed;
      }
    }
  } else {
    (void)hosts[h].engine->on_packet(now, rx);
  }
  service_host(h);
}

void Simulation::Impl::switch_arrive(uint32_t swi, uint32_t ingress, uint32_t idx) {
  Switch& sw = switches[swi];
  SimPacket& p = packets[idx];
  const uint32_t egress = forward(sw, p);
  if (path_losses_active > 0 && path_lost(sw, egress, p)) [[unlikely]] {
    ++counters.fault_drops;
    ++counters.drops;
    free_packet(idx);
    return;
  }
  Port& out = sw.ports[egress];
  bool high = p.flags & kHigh;
  const SwitchConfig& sc = cfg.sw;
  if (out.waiting) settle(out);
  if (!high) {
    if (sc.trimming && out.queue_bytes + p.wire_bytes > trim_threshold) {
      // Trim: forward the headers at high priority; the receiver NACKs, the sender resends.
      const uint32_t header = p.wire_bytes - p.body.payload_len;
      p.wire_bytes = header;
      p.body.payload_len = 0;
      p.flags = static_cast<uint8_t>((p.flags | kTrimmed | kHigh) & ~kCe);
      high = true;
      ++counters.trims;
    } else if (!sc.pfc && out.queue_bytes + p.wire_bytes > queue_bytes) {
      ++counters.drops;
      free_packet(idx);
      return;
    } else if ((p.flags & kEct) && (ecn_last_hop || !out.peer_is_host)) {
      // RED-style marking on the queue the packet joins (not on the last hop unless
      // switch.ecn_last_hop: paper 2.1).
      const uint64_t q = out.queue_bytes;
      if (q >= ecn_kmax) {
        p.flags |= kCe;
      } else if (q > ecn_kmin) {
        const double prob = cfg.sw.ecn_pmax * static_cast<double>(q - ecn_kmin) /
                            static_cast<double>(ecn_kmax - ecn_kmin);
        if (rngs[cur_partition].chance(prob)) p.flags |= kCe;
      }
      if (p.flags & kCe) ++counters.ecn_marks;
    }
  }
  if (high && out.queue_bytes + p.wire_bytes > 4 * queue_bytes) {
    ++counters.drops;  // even headers have a limit
    free_packet(idx);
    return;
  }
  if (out.chained || (out.chain_ok && out.low.empty() && out.high.empty() &&
                      out.busy_until <= now && out.up && !out.blackhole && out.loss == 0)) {
    schedule_departure(swi, egress, idx, p.wire_bytes, high);
    return;
  }
  const QueuedPacket queued{idx, static_cast<uint16_t>(p.wire_bytes),
                            static_cast<uint16_t>(ingress)};
  if (high) {
    out.high.push_back(queued);
  } else {
    out.low.push_back(queued);
    if (sc.pfc) {
      sw.ingress_bytes[ingress] += p.wire_bytes;
      if (!sw.pause_sent[ingress] && sw.ingress_bytes[ingress] > pfc_xoff) {
        sw.pause_sent[ingress] = 1;
        send_pause(swi, ingress, true);
      }
    }
  }
  out.queue_bytes += p.wire_bytes;
  if (out.busy_until <= now) {
    start_tx(swi, egress);
  } else if (!out.free_pending) {
    out.free_pending = true;
    schedule(sw.partition, out.busy_until, kPortFree, swi, egress);
  }
}

void Simulation::Impl::schedule_departure(uint32_t swi, uint32_t port_index, uint32_t idx,
                                          uint32_t wire_bytes, bool high) {
  Port& out = switches[swi].ports[port_index];
  out.chained = true;
  const Time ser = out.rate.serialize(wire_bytes);
  const Time hop = out.delay + (out.peer_is_host ? 0 : cfg.topo.switch_latency);
  ScheduledPacket e{idx, static_cast<uint16_t>(wire_bytes), high, 0, 0};
  size_t pos = out.wire.size();
  if (high) {
    // Strict priority: after the frame on the wire and the high entries waiting, before the
    // waiting low ones.
    pos -= out.waiting;
    while (pos < out.wire.size() && out.wire[pos].high)
      ++pos;
  }
  if (pos == out.wire.size()) {
    e.start = std::max(now, out.busy_until);
    e.arrive = e.start + ser + hop;
    out.wire.push_back(e);
    out.busy_until = e.start + ser;
  } else {
    e.start = out.wire[pos].start;
    e.arrive = e.start + ser + hop;
    out.wire.insert(pos, e);
    for (size_t i = pos + 1; i < out.wire.size(); ++i) {
      out.wire[i].start += ser;
      out.wire[i].arrive += ser;
    }
    out.busy_until += ser;
  }
  if (e.start > now) {
    ++out.waiting;
    out.queue_bytes += wire_bytes;
  } else {
    out.tx_bytes += wire_bytes;
  }
  if (out.wire.size() == 1)
    schedule(switches[swi].partition, e.arrive, kPortDeliver, swi, port_index, idx);
}

void Simulation::Impl::settle(Port& out) {
  while (out.waiting) {
    const ScheduledPacket& e = out.wire[out.wire.size() - out.waiting];
    if (e.start > now) break;
    --out.waiting;
    out.queue_bytes -= e.wire_bytes;
    out.tx_bytes += e.wire_bytes;
  }
}

void Simulation::Impl::deliver(uint32_t swi, uint32_t port_index) {
  Port& out = switches[swi].ports[port_index];
  if (out.waiting) settle(out);
  const uint32_t idx = out.wire.pop_front().idx;
  // The next entry has started (it follows the one just delivered on the wire), so no later
  // insertion can move it: its event stands.
  if (!out.wire.empty()) {
    schedule(switches[swi].partition, out.wire.front().arrive, kPortDeliver, swi, port_index,
             out.wire.front().idx);
  }
  if (out.peer_is_host) {
    host_arrive(out.peer, idx);
  } else {
    switch_arrive(out.peer, out.peer_port, idx);
  }
}

void Simulation::Impl::recall(uint32_t swi, uint32_t port_index) {
  Port& out = switches[swi].ports[port_index];
  if (!out.chained) return;
  settle(out);
  out.chained = false;
  if (out.waiting == 0) return;
  // Waiting entries start back to back after the frame on the wire: the port is busy until
  // the first of them would have started. Highs precede lows, so class order is kept.
  out.busy_until = out.wire[out.wire.size() - out.waiting].start;
  for (size_t i = out.wire.size() - out.waiting; i < out.wire.size(); ++i) {
    const ScheduledPacket& e = out.wire[i];
    const QueuedPacket q{e.idx, e.wire_bytes, 0};  // ingress: PFC only, never scheduled
    if (e.high) {
      out.high.push_back(q);
    } else {
      out.low.push_back(q);
    }
  }
  for (; out.waiting > 0; --out.waiting)
    (void)out.wire.pop_back();
  out.free_pending = true;
  schedule(switches[swi].partition, out.busy_until, kPortFree, swi, port_index);
}

void Simulation::Impl::start_tx(uint32_t swi, uint32_t port_index) {
  Switch& sw = switches[swi];
  Port& out = sw.ports[port_index];
  if (out.busy_until > now) return;  // still serializing; its kPortFree will call again
  if (out.chained) return;           // a stale kPortFree: the wire schedule sends on its own
  if (out.chain_ok && out.up && !out.blackhole && out.loss == 0) {
    // A frame boundary on a healthy link (after a recall, a rate change or a repair): the
    // queue goes back to scheduled departures, in the order this function would send it.
    for (PacketFifo* fifo : {&out.high, &out.low}) {
      while (!fifo->empty()) {
        const QueuedPacket q = fifo->pop_front();
        out.queue_bytes -= q.wire_bytes;
        schedule_departure(swi, port_index, q.idx, q.wire_bytes, fifo == &out.high);
      }
    }
    return;
  }
  QueuedPacket q;
  bool high;
  if (!out.high.empty()) {
    q = out.high.pop_front();
    high = true;
  } else if (!out.low.empty() && !out.paused) {
    q = out.low.pop_front();
    high = false;
  } else {
    return;
  }
  const uint32_t idx = q.idx;
  out.queue_bytes -= q.wire_bytes;
  if (cfg.sw.pfc && !high) {
    uint64_t& b = sw.ingress_bytes[q.ingress];
    b -= std::min<uint64_t>(b, q.wire_bytes);
    if (sw.pause_sent[q.ingress] && b < pfc_xon) {
      sw.pause_sent[q.ingress] = 0;
      send_pause(swi, q.ingress, false);
    }
  }
  const Time ser = out.rate.serialize(q.wire_bytes);
  out.busy_until = now + ser;
  out.tx_bytes += q.wire_bytes;
  if (!out.high.empty() || (!out.low.empty() && !out.paused)) {
    out.free_pending = true;
    schedule(sw.partition, out.busy_until, kPortFree, swi, port_index);
  } else {
    out.free_pending = false;
  }
  if (!out.up || out.blackhole || (out.loss > 0 && rngs[cur_partition].chance(out.loss))) {
    ++counters.fault_drops;
    ++counters.drops;
    free_packet(idx);
    return;
  }
  const Time arrive = now + ser + out.delay;
  if (out.peer_is_host) {
    schedule(host_partition(out.peer), arrive, kHostArrive, out.peer, 0, idx);
  } else {
    schedule(switches[out.peer].partition, arrive + cfg.topo.switch_latency, kSwitchArrive,
             out.peer, out.peer_port, idx);
  }
}

// PFC (IEEE 802.1Qbb): ask the upstream end of `ingress` to pause (or resume) its
// low-priority queue. The frame takes one link delay.
void Simulation::Impl::send_pause(uint32_t swi, uint32_t ingress, bool pause) {
  const Switch& sw = switches[swi];
  if (pause) ++counters.pfc_pauses;
  if (sw.kind == Switch::kLeaf && ingress < H) {
    const HostId h = sw.index * H + ingress;
    if (h < hosts.size())
      schedule(host_partition(h), now + cfg.topo.link_delay, kPause, h | kHostBit, sw.plane, pause);
    return;
  }
  const Port& back = sw.ports[ingress];
  schedule(switches[back.peer].partition, now + back.delay, kPause, back.peer, back.peer_port,
           pause);
}

void Simulation::Impl::handle_pause(uint32_t node, uint32_t port, bool pause) {
  if (node & kHostBit) {
    const HostId h = node & ~kHostBit;
    hosts[h].ports[port].paused = pause;
    if (!pause) service_host(h);
    return;
  }
  Port& out = switches[node].ports[port];
  out.paused = pause;
  if (pause) return;
  // IEEE 802.1Qbb: XON lets the paused priority transmit at the next frame boundary. The port
  // may be mid-frame (a control packet, which PFC does not pause), and start_tx scheduled no
  // kPortFree for the end of that frame because the paused queue could not use it: schedule
  // one now, or the queued data would wait for the next arrival at this port (the ACK timeout,
  // 4.2 ms, when the port's last flows are the ones waiting).
  if (out.busy_until <= now) {
    start_tx(node, port);
  } else if (!out.free_pending && !out.low.empty()) {
    out.free_pending = true;
    schedule(switches[node].partition, out.busy_until, kPortFree, node, port);
  }
}

void Simulation::Impl::tap(HostId h, const SimPacket& p) {
  (void)h;
  wire::Datagram d;
  d.ip.traffic_class =
      static_cast<uint8_t>(((p.flags & kTrimmed) ? wire::kDscpTrimmed << 2 : wire::kDscpData << 2) |
                           ((p.flags & kCe) ? wire::kEcnCe : wire::kEcnEct0));
  d.ip.flow_label = p.entropy >> 12;
  d.ip.src = wire::usid_carrier(
      kLocatorBlock, std::array<uint16_t, 2>{static_cast<uint16_t>(kLeafUsidBase + leaf_of(p.src)),
                                             static_cast<uint16_t>(kHostUsidBase + p.src % H)});
  d.ip.dst = wire::usid_carrier(
      kLocatorBlock, std::array<uint16_t, 2>{static_cast<uint16_t>(kLeafUsidBase + leaf_of(p.dst)),
                                             static_cast<uint16_t>(kHostUsidBase + p.dst % H)});
  d.udp.src_port = static_cast<uint16_t>(0xC000 | (p.entropy & 0xFFF));
  to_transport(p, d.pkt);
  static thread_local std::vector<uint8_t> zeros;
  if (zeros.size() < d.pkt.payload_len) zeros.assign(d.pkt.payload_len, 0);
  d.pkt.payload = d.pkt.payload_len ? zeros.data() : nullptr;
  std::vector<uint8_t> buf(wire::encoded_size(d));
  if (auto n = wire::encode(d, buf)) (void)pcap->write(now, std::span(buf.data(), *n));
}

}  // namespace mrc::sim
