#include "transport/reverse_path.h"

namespace mrc {

namespace {
uint64_t mix64(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}
}  // namespace

void ReversePathSet::configure(uint8_t evs_per_plane, uint8_t num_ports) {
  slots_.reset();
  per_plane_ = evs_per_plane;
  ports_ = num_ports == 0 ? 1 : num_ports;
  draws_ = 0;
  next_probe_at_ = kNever;
  probe_seq_ = 0;
  probe_path_ = kEmpty;
  probe_slot_ = 0;
  cursor_ = 0;
  probe_cursor_ = 0;
  refill_cursor_ = 0;
  probe_outstanding_ = false;
  inbound_ = false;
  verify_next_ = false;
}

uint64_t ReversePathSet::next_random(uint64_t seed) {
  const uint64_t n = (static_cast<uint64_t>(probe_seq_) << 8 | draws_++) + 1;
  return mix64(seed + 0x9e3779b97f4a7c15ull * n);
}

int ReversePathSet::slot_path(uint32_t s) const {
  if (!slots_ || s >= slots() || slots_[s] == kEmpty) return kNone;
  return slots_[s];
}

bool ReversePathSet::in_set(int i) const {
  if (!slots_) return false;
  for (uint32_t s = 0; s < slots(); ++s)
    if (slots_[s] == i) return true;
  return false;
}

bool ReversePathSet::usable(int i, const PathSet& paths) const {
  if (i < 0 || static_cast<size_t>(i) >= paths.size()) return false;
  const ev::EvState st = paths.state_of(i);
  return st != ev::EvState::kDenied && st != ev::EvState::kAssumedBad &&
         paths.port_up(paths.port_of(i));
}

int ReversePathSet::random_path(uint8_t port, const PathSet& paths, bool active_only,
                                uint64_t seed) {
  const size_t n = paths.size();
  if (n == 0) return kNone;
  // A random start and a scan: uniform enough over a plane's paths, and O(paths) only when a
  // slot is (re)filled, never per packet.
  const size_t start = static_cast<size_t>(next_random(seed) % n);
  for (size_t k = 0; k < n; ++k) {
    const int i = static_cast<int>((start + k) % n);
    if (paths.port_of(i) != port || paths.state_of(i) != ev::EvState::kGood) continue;
    if (active_only && !paths.active(i)) continue;
    if (!in_set(i)) return i;
  }
  return kNone;
}

void ReversePathSet::allocate() {
  slots_ = std::make_unique<uint16_t[]>(slots());
  for (uint32_t s = 0; s < slots(); ++s)
    slots_[s] = kEmpty;
}

void ReversePathSet::on_data_path(int i, const PathSet& paths) {
  if (!enabled() || probe_seq_ != 0 || i < 0 || static_cast<size_t>(i) >= paths.size()) return;
  if (!slots_) allocate();
  if (in_set(i) || paths.state_of(i) != ev::EvState::kGood) return;
  const uint8_t port = paths.port_of(i);
  for (uint32_t s = port; s < slots(); s += ports_) {
    if (slots_[s] == kEmpty) {
      slots_[s] = static_cast<uint16_t>(i);
      return;
    }
  }
}

int ReversePathSet::pick(uint32_t mask, const PathSet& paths, int avoid) {
  if (!enabled()) return kNone;
  if (!slots_) allocate();
  const uint32_t n = slots();
  int fallback = kNone;
  uint32_t fallback_slot = 0;
  for (uint32_t k = 0; k < n; ++k) {
    const uint32_t s = (cursor_ + k) % n;
    const int i = slots_[s] == kEmpty ? kNone : slots_[s];
    if (i == kNone || !((mask >> slot_port(s)) & 1) || !usable(i, paths)) continue;
    if (i == avoid) {
      if (fallback == kNone) fallback = i, fallback_slot = s;
      continue;
    }
    cursor_ = static_cast<uint8_t>((s + 1) % n);
    return i;
  }
  if (fallback != kNone) cursor_ = static_cast<uint8_t>((fallback_slot + 1) % n);
  return fallback;
}

bool ReversePathSet::any_live(const PathSet& paths) const {
  if (!slots_) return false;
  for (uint32_t s = 0; s < slots(); ++s)
    if (slots_[s] != kEmpty && usable(slots_[s], paths)) return true;
  return false;
}

ReverseChange ReversePathSet::on_path_unusable(int i, const PathSet& paths, uint64_t seed) {
  ReverseChange c;
  if (!slots_) return c;
  for (uint32_t s = 0; s < slots(); ++s) {
    if (slots_[s] != i) continue;
    // The QP's own data found the path dead (paper 2.4: with outbound traffic "the reverse EV
    // is updated from data SACKs"): an active GOOD path of the plane has its SACKs' backing.
    const int to = random_path(slot_port(s), paths, true, seed);
    slots_[s] = to == kNone ? kEmpty : static_cast<uint16_t>(to);
    if (probe_outstanding_ && probe_slot_ == s) probe_outstanding_ = false;
    return ReverseChange{true, static_cast<int>(s), i, to};
  }
  return c;
}

void ReversePathSet::start_spell(Time now, Time interval) {
  // The first arrival of an active spell starts the clock; only arrivals after it count,
  // so a message that fits in one RTT (one or two packets) draws no probe.
  next_probe_at_ = now + interval;
  inbound_ = false;
}

void ReversePathSet::on_ack_loss(Time now) {
  if (!enabled() || probe_outstanding_ || next_probe_at_ == kNever) return;
  inbound_ = true;
  if (next_probe_at_ > now) next_probe_at_ = now;
}

ReversePathSet::Probe ReversePathSet::take_probe(Time now, uint32_t mask, const PathSet& paths,
                                                 Time interval, bool outbound, uint64_t seed) {
  Probe p;
  if (!enabled() || next_probe_at_ > now) return p;
  if (!slots_) allocate();
  const uint32_t n = slots();
  if (probe_outstanding_) {
    // No answer within an interval: a live slot that was being verified is mapped out.
    probe_outstanding_ = false;
    p.previous_unanswered = true;
    if (slots_[probe_slot_] == probe_path_ && probe_path_ != kEmpty) {
      slots_[probe_slot_] = kEmpty;
      p.mapped_out = ReverseChange{true, probe_slot_, probe_path_, kNone};
    }
  }
  if (!inbound_ || outbound) {
    // Inbound silence: stop until data arrives again. Outbound data: its SACKs keep the
    // paths' states (on_path_unusable), no probe is needed.
    next_probe_at_ = inbound_ ? now + interval : kNever;
    inbound_ = false;
    return p;
  }
  // Refills of empty slots and verifications of live ones take turns, so that a plane whose
  // every EV is dead (its empty slot's probes all go unanswered) does not keep the live
  // slots of the others from being verified. Each scans on from where it last probed, so no
  // plane's empty slot (say a low-numbered dead one) takes every refill.
  int target_slot = -1, target_path = kNone;
  const auto port_free = [&](uint32_t s) { return ((mask >> slot_port(s)) & 1) != 0; };
  auto refill = [&](bool free_ports_only) {
    for (uint32_t k = 0; k < n && target_slot < 0; ++k) {
      const uint32_t s = (refill_cursor_ + k) % n;
      if (slots_[s] != kEmpty || !paths.port_up(slot_port(s))) continue;
      if (free_ports_only && !port_free(s)) continue;
      const int i = random_path(slot_port(s), paths, false, seed);
      if (i != kNone) target_slot = static_cast<int>(s), target_path = i;
    }
  };
  auto verify = [&](bool free_ports_only) {
    for (uint32_t k = 0; k < n && target_slot < 0; ++k) {
      const uint32_t s = (probe_cursor_ + k) % n;
      if (slots_[s] == kEmpty || !usable(slots_[s], paths)) continue;
      if (free_ports_only && !port_free(s)) continue;
      target_slot = static_cast<int>(s);
      target_path = slots_[s];
    }
  };
  auto choose = [&](bool free_ports_only) {
    if (verify_next_) {
      verify(free_ports_only);
      refill(free_ports_only);
    } else {
      refill(free_ports_only);
      verify(free_ports_only);
    }
  };
  choose(false);
  if (target_slot < 0) {
    // Nothing to probe: no live slot is usable and no empty slot's plane has a GOOD path
    // outside the set (a plane down, or all its paths marked). Look again an interval later
    // rather than stay due and be asked at every port's turn.
    next_probe_at_ = now + interval;
    return p;
  }
  if (!port_free(static_cast<uint32_t>(target_slot))) {
    // The target's port is busy (typically with the ACK of the very packet that made this
    // probe due): wait for it rather than probe another slot. Taking whatever port was free
    // meant the slot that carries the ACKs was never the one verified, so a slot whose path
    // is dead in the ACK direction only kept every ACK of a lone message for ever. A port
    // busy for longer than an interval past the due time (paused) must not stop the set's
    // upkeep: then a slot on a free port goes instead.
    if (now < next_probe_at_ + interval) return p;
    target_slot = -1;
    choose(true);
    if (target_slot < 0) return p;
  }
  verify_next_ = slots_[target_slot] == kEmpty;
  (verify_next_ ? refill_cursor_ : probe_cursor_) = static_cast<uint8_t>((target_slot + 1) % n);
  p.path = target_path;
  p.id = kProbeTag | ++probe_seq_;
  probe_outstanding_ = true;
  probe_slot_ = static_cast<uint8_t>(target_slot);
  probe_path_ = static_cast<uint16_t>(target_path);
  next_probe_at_ = now + interval;
  inbound_ = false;
  return p;
}

ReverseChange ReversePathSet::on_probe_reply(uint64_t probe_id, int i) {
  ReverseChange c;
  if (!probe_outstanding_ || probe_id != (kProbeTag | probe_seq_) || i != probe_path_) return c;
  probe_outstanding_ = false;
  if (slots_[probe_slot_] == kEmpty && !in_set(i)) {
    slots_[probe_slot_] = static_cast<uint16_t>(i);
    c = ReverseChange{true, probe_slot_, kNone, i};
  }
  return c;
}

}  // namespace mrc
