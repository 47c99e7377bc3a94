#include "transport/path_set.h"

#include <algorithm>

namespace mrc {

namespace {

uint32_t read_window(const ev::ExpandedEv& e, uint8_t offset) {
  return (static_cast<uint32_t>(e[offset]) << 24) | (static_cast<uint32_t>(e[offset + 1]) << 16) |
         (static_cast<uint32_t>(e[offset + 2]) << 8) | e[offset + 3];
}

// True if `e` equals `base` outside bytes [offset, offset + 4).
bool fits(const ev::ExpandedEv& base, uint8_t offset, const ev::ExpandedEv& e) {
  for (size_t b = 0; b < e.size(); ++b) {
    if ((b < offset || b >= offset + 4u) && e[b] != base[b]) return false;
  }
  return true;
}

}  // namespace

void PathSet::init(std::span<const PathDesc> paths, uint32_t min_active, uint8_t num_ports,
                   const PathPolicy& policy, uint64_t seed) {
  evs_.clear();
  value_hi_.clear();
  losses_.clear();
  table_.clear();
  order_.clear();
  slot_of_.clear();
  assumed_bad_.clear();
  swaps_ = 0;
  ecn_swaps_ = 0;
  backup_cursor_ = 0;
  policy_ = policy;
  // Qp::to_init rejects 0; a PathSet used on its own treats it as 1 rather than as a burst
  // without end (burst - 1 would wrap).
  policy_.burst = std::max<uint32_t>(1, policy.burst);
  policy_.ecn_cooldown = std::min(policy.ecn_cooldown, kMaxCooldown);  // Slot::cool_off
  cool_epoch_ = 0;
  burst_path_ = kNone;
  burst_left_ = 0;
  trim_hold_until_ = 0;
  min_active_ = min_active;
  port_up_mask_ = num_ports >= 32 ? ~0u : ((1u << num_ports) - 1);
  peer_down_mask_ = 0;
  num_ports_ = num_ports;
  // The template: the first EV, with a 4-byte window over every byte in which the EVs differ
  // (an SRv6 carrier's spine uSID, an STEV's 32 bits). EVs that differ more widely are kept
  // whole in table_ (an explicit profile through the C API, fat-tree carriers).
  tmpl_ = EvTemplate{};
  if (!paths.empty()) {
    tmpl_.base = paths[0].ev;
    size_t lo = tmpl_.base.size(), hi = 0;
    for (const PathDesc& d : paths) {
      for (size_t b = 0; b < d.ev.size(); ++b) {
        if (d.ev[b] != tmpl_.base[b]) {
          lo = std::min(lo, b);
          hi = std::max(hi, b);
        }
      }
    }
    if (lo > hi) {
      tmpl_.offset = 0;
    } else if (hi - lo < 4) {
      tmpl_.offset = static_cast<uint8_t>(hi < 3 ? 0 : hi - 3);
    } else {
      tmpl_.table = true;
    }
  }
  evs_.resize(paths.size());
  if (tmpl_.table) table_.resize(paths.size());
  for (size_t i = 0; i < paths.size(); ++i) {
    EvRec& e = evs_[i];
    e.port = paths[i].port;
    e.state = paths[i].state == ev::EvState::kDenied ? ev::EvState::kDenied : ev::EvState::kGood;
    if (tmpl_.table) {
      table_[i] = paths[i].ev;
      e.value = static_cast<uint16_t>(i);
    } else {
      set_value(i, read_window(paths[i].ev, tmpl_.offset));
    }
  }
  // The active set: the first active_per_plane paths of each port (all with 0).
  slot_of_.assign(paths.size(), kBackup);
  std::vector<uint32_t> per_port(32, 0);
  for (size_t i = 0; i < paths.size(); ++i) {
    uint32_t& n = per_port[evs_[i].port & 31];
    if (policy_.active_per_plane == 0 || n < policy_.active_per_plane) {
      slot_of_[i] = 0;  // active; build_order assigns the slot
      ++n;
    }
  }
  build_order();
  // A path denied at configuration leaves the active set if a GOOD backup can take its slot.
  for (size_t i = 0; i < paths.size(); ++i) {
    if (slot_of_[i] != kBackup && evs_[i].state != ev::EvState::kGood) {
      if (swap_out(static_cast<int>(i)) != kNone) --swaps_;  // configuration, not a swap
    }
  }
  Rng rng(seed);
  cursor_ = order_.empty() ? 0 : rng.below(order_.size());
  probe_seq_ = rng.next() & 0xFFFFFFFFull;
  recount();
}

size_t PathSet::heap_bytes() const {
  return evs_.capacity() * sizeof(EvRec) + value_hi_.capacity() * sizeof(uint16_t) +
         losses_.capacity() * sizeof(LossCount) + table_.capacity() * sizeof(ev::ExpandedEv) +
         order_.capacity() * sizeof(Slot) + ecn_run_.capacity() +
         slot_of_.capacity() * sizeof(uint16_t) + assumed_bad_.capacity() * sizeof(Probe);
}

Path PathSet::path(int i) const {
  const EvRec& e = evs_[static_cast<size_t>(i)];
  Path p;
  p.desc.ev = ev(i);
  p.desc.port = e.port;
  p.desc.state = e.state == ev::EvState::kDenied ? ev::EvState::kDenied : ev::EvState::kGood;
  p.state = e.state;
  p.active = active(i);
  p.packets_sent = e.packets_sent;
  p.losses = losses_of(static_cast<size_t>(i));
  return p;
}

void PathSet::set_value(size_t i, uint32_t v) {
  if ((v >> 16) != 0 && value_hi_.empty()) value_hi_.assign(evs_.size(), 0);
  evs_[i].value = static_cast<uint16_t>(v);
  if (!value_hi_.empty()) value_hi_[i] = static_cast<uint16_t>(v >> 16);
}

uint16_t PathSet::losses_of(size_t i) const {
  for (const LossCount& l : losses_)
    if (l.index == i) return l.losses;
  return 0;
}

ev::ExpandedEv PathSet::ev(int i) const {
  const EvRec& e = evs_[static_cast<size_t>(i)];
  if (tmpl_.table) return table_[e.value];
  const uint32_t v = value_of(static_cast<size_t>(i));
  ev::ExpandedEv out = tmpl_.base;
  out[tmpl_.offset] = static_cast<uint8_t>(v >> 24);
  out[tmpl_.offset + 1] = static_cast<uint8_t>(v >> 16);
  out[tmpl_.offset + 2] = static_cast<uint8_t>(v >> 8);
  out[tmpl_.offset + 3] = static_cast<uint8_t>(v);
  return out;
}

void PathSet::store_ev(int i, const ev::ExpandedEv& e) {
  if (!tmpl_.table && fits(tmpl_.base, tmpl_.offset, e)) {
    set_value(static_cast<size_t>(i), read_window(e, tmpl_.offset));
    return;
  }
  if (!tmpl_.table) {
    table_.resize(evs_.size());
    for (size_t k = 0; k < evs_.size(); ++k)
      table_[k] = ev(static_cast<int>(k));
    for (size_t k = 0; k < evs_.size(); ++k)
      evs_[k].value = static_cast<uint16_t>(k);
    value_hi_.clear();
    tmpl_.table = true;
  }
  table_[static_cast<size_t>(i)] = e;
  evs_[static_cast<size_t>(i)].value = static_cast<uint16_t>(i);
}

void PathSet::build_order() {
  // Interleave by port: take the first active path of every port, then the second of every
  // port, and so on, so that consecutive picks alternate planes.
  std::vector<uint32_t> cool(evs_.size(), 0);
  for (const Slot& slot : order_)
    if (slot.index < cool.size()) cool[slot.index] = slot.cool_off;
  std::vector<Slot> order;
  std::vector<std::vector<uint16_t>> by_port(32);
  for (size_t i = 0; i < evs_.size(); ++i) {
    if (slot_of_[i] != kBackup) by_port[evs_[i].port & 31].push_back(static_cast<uint16_t>(i));
  }
  size_t n_active = 0;
  for (const auto& bucket : by_port)
    n_active += bucket.size();
  order.reserve(n_active);
  for (size_t round = 0; order.size() < n_active; ++round) {
    for (auto& bucket : by_port) {
      if (round >= bucket.size()) continue;
      const uint16_t i = bucket[round];
      slot_of_[i] = static_cast<uint16_t>(order.size());
      order.push_back(Slot{cool[i], i, evs_[i].port, evs_[i].state});
    }
  }
  order_.assign(order.size(), Slot{});
  std::copy(order.begin(), order.end(), order_.begin());
  // Runs of ECN marks start over (a rebuilt order is a new set of slots).
  if (policy_.ecn_swap_marks > 0 && policy_.active_per_plane > 0) {
    ecn_run_.assign(order_.size(), 0);
  } else {
    ecn_run_.clear();
  }
  if (cursor_ >= order_.size()) cursor_ = 0;
}

void PathSet::recount() {
  usable_ = 0;
  for (size_t i = 0; i < evs_.size(); ++i)
    usable_ += usable_active(static_cast<int>(i)) ? 1 : 0;
}

int PathSet::pick(Time now, uint32_t port_mask, int exclude) {
  const size_t n = order_.size();
  if (n == 0) return kNone;
  const uint32_t mask = port_mask & usable_ports();
  // Bursts only while nothing is suspected: a retransmission (it has a path to avoid) and
  // every pick while a path is ASSUMED_BAD go per packet, so that the paths a failure took
  // are found in one flight, each losing one packet, instead of a run at a time (a blackholed
  // spine then cost ACK timeouts: docs/linux-driver.md, "Bursts per path, opt-in").
  const bool bursting = exclude == kNone && assumed_bad_.empty();
  if (burst_left_ > 0 && bursting) {
    const Slot& slot = order_[slot_of_[static_cast<size_t>(burst_path_)]];
    if (slot.state == ev::EvState::kGood && ((mask >> slot.port) & 1) &&
        !(cooling(slot, now) && policy_.ecn_steering)) {
      --burst_left_;
      return burst_path_;
    }
    burst_left_ = 0;
  }
  // First pass: usable, port allowed, not cooling, not excluded. Second pass: allow cooling
  // paths (every path is congested: spraying evenly is the best we can do). Last resort:
  // the excluded path.
  int fallback = kNone;
  size_t fallback_pos = 0;
  int excluded_ok = kNone;
  for (size_t k = 0; k < n; ++k) {
    const size_t pos = cursor_ + k < n ? cursor_ + k : cursor_ + k - n;
    const Slot& slot = order_[pos];
    if (slot.state != ev::EvState::kGood || !((mask >> slot.port) & 1)) continue;
    const int i = slot.index;
    if (i == exclude) {
      excluded_ok = i;
      continue;
    }
    if (cooling(slot, now) && policy_.ecn_steering) {
      if (fallback == kNone) {
        fallback = i;
        fallback_pos = pos;
      }
      continue;
    }
    cursor_ = pos + 1 == n ? 0 : pos + 1;
    burst_path_ = i;
    burst_left_ = bursting ? policy_.burst - 1 : 0;
    return i;
  }
  if (fallback != kNone) {
    // Advance past the fallback too, so congested paths still rotate.
    cursor_ = fallback_pos + 1 == n ? 0 : fallback_pos + 1;
    return fallback;
  }
  return excluded_ok;
}

void PathSet::set_state(int i, ev::EvState s) {
  evs_[static_cast<size_t>(i)].state = s;
  const uint16_t slot = slot_of_[static_cast<size_t>(i)];
  if (slot != kBackup) order_[slot].state = s;
}

PathSet::Probe* PathSet::probe_of(int i) {
  for (Probe& p : assumed_bad_)
    if (p.index == i) return &p;
  return nullptr;
}

void PathSet::start_probing(int i, Time now) {
  Probe p;
  p.index = static_cast<uint16_t>(i);
  p.next_probe_at = now + policy_.probe_interval;
  assumed_bad_.push_back(p);
}

void PathSet::stop_probing(int i) {
  std::erase_if(assumed_bad_, [i](const Probe& p) { return p.index == i; });
}

int PathSet::find_backup(uint8_t port, int after) const {
  const size_t n = evs_.size();
  for (size_t k = 1; k <= n; ++k) {
    const size_t j = (static_cast<size_t>(after) + k) % n;
    if (slot_of_[j] == kBackup && evs_[j].port == port && evs_[j].state == ev::EvState::kGood)
      return static_cast<int>(j);
  }
  return kNone;
}

void PathSet::exchange(int out, int in) {
  const uint16_t pos = slot_of_[static_cast<size_t>(out)];
  Slot& slot = order_[pos];
  slot.index = static_cast<uint16_t>(in);
  slot.state = evs_[static_cast<size_t>(in)].state;
  slot.cool_off = 0;  // nothing learned about the old EV applies to the new one
  if (!ecn_run_.empty()) ecn_run_[pos] = 0;
  slot_of_[static_cast<size_t>(in)] = pos;
  slot_of_[static_cast<size_t>(out)] = kBackup;
  if (burst_path_ == out) burst_left_ = 0;
  ++swaps_;
}

int PathSet::swap_out(int i) {
  if (policy_.active_per_plane == 0 || slot_of_[static_cast<size_t>(i)] == kBackup) return kNone;
  const int j = find_backup(evs_[static_cast<size_t>(i)].port, i);
  if (j == kNone) return kNone;
  exchange(i, j);
  return j;
}

int PathSet::swap_in(int j) {
  if (policy_.active_per_plane == 0 || slot_of_[static_cast<size_t>(j)] != kBackup) return kNone;
  const uint8_t port = evs_[static_cast<size_t>(j)].port;
  for (const Slot& slot : order_) {
    if (slot.port == port && slot.state != ev::EvState::kGood) {
      const int out = slot.index;
      exchange(out, j);
      return out;
    }
  }
  return kNone;
}

int PathSet::swap_congested(int i) {
  const int j = find_backup(evs_[static_cast<size_t>(i)].port, backup_cursor_);
  if (j == kNone) return kNone;
  backup_cursor_ = static_cast<uint16_t>(j);
  exchange(i, j);
  ++ecn_swaps_;
  return j;
}

void PathSet::set_cool(uint16_t pos, Time now, Time until) {
  if (until <= now) {
    order_[pos].cool_off = 0;
    return;
  }
  if (now < cool_epoch_ || until - cool_epoch_ > UINT32_MAX) {
    // Move the epoch to `now`: stamps that have run out become 0, the others count from now
    // (each ends at most kMaxCooldown after the `now` it was set at, so they fit).
    for (Slot& s : order_) {
      if (s.cool_off == 0) continue;
      const Time end = cool_epoch_ + s.cool_off;
      s.cool_off = end > now ? static_cast<uint32_t>(std::min<Time>(end - now, UINT32_MAX)) : 0;
    }
    cool_epoch_ = now;
  }
  order_[pos].cool_off = static_cast<uint32_t>(until - cool_epoch_);
}

PathStateChange PathSet::on_ecn(int i, Time now) {
  const uint16_t pos = slot_of_[static_cast<size_t>(i)];
  if (!policy_.ecn_steering || pos == kBackup) return {};
  set_cool(pos, now, now + policy_.ecn_cooldown);
  if (ecn_run_.empty() || order_[pos].state != ev::EvState::kGood) return {};
  uint8_t& run = ecn_run_[pos];
  if (run < UINT8_MAX) ++run;
  if (run < policy_.ecn_swap_marks) return {};
  PathStateChange c;
  c.swapped_in = swap_congested(i);
  if (c.swapped_in != kNone) c.replaced = i;
  return c;
}

PathStateChange PathSet::on_trim(int i, Time now) {
  trim_hold_until_ = now + policy_.trim_hold;
  return on_ecn(i, now);
}

PathStateChange PathSet::on_loss(int i, Time now) {
  EvRec& e = evs_[static_cast<size_t>(i)];
  auto l = std::find_if(losses_.begin(), losses_.end(),
                        [i](const LossCount& c) { return c.index == i; });
  if (l == losses_.end()) {
    losses_.push_back(LossCount{static_cast<uint16_t>(i), 1});
  } else if (l->losses != UINT16_MAX) {
    ++l->losses;
  }
  burst_left_ = 0;  // whichever path lost it: the next picks spray (pick)
  if (e.state == ev::EvState::kAssumedBad) {
    // A packet sent before the path was marked: more evidence, and the probes start over
    // (and, once its port is back, not only the port's fault).
    if (Probe* pr = probe_of(i)) {
      if (pr->losses_standing < UINT16_MAX) ++pr->losses_standing;
      pr->probe_streak = 0;
      if (port_up(e.port)) pr->port_fault = false;
    }
    return {};
  }
  if (!policy_.loss_marking || e.state != ev::EvState::kGood) return {};
  if (now < trim_hold_until_) {
    PathStateChange held;
    held.held = true;
    return held;
  }
  // Never drop below ev_min_active usable paths (OCP mrc_ctl_ev_profile_attr.ev_min_active),
  // unless a backup takes the path's place.
  const bool counted = usable_active(i);
  if (counted && usable_ <= min_active_ &&
      (policy_.active_per_plane == 0 || find_backup(e.port, i) == kNone)) {
    return {};
  }
  set_state(i, ev::EvState::kAssumedBad);
  start_probing(i, now);
  if (!port_up(e.port)) assumed_bad_.back().port_fault = true;  // lost to the port
  PathStateChange c{true, ev::EvState::kGood, ev::EvState::kAssumedBad};
  c.swapped_in = swap_out(i);
  if (c.swapped_in != kNone) c.replaced = i;
  recount();
  return c;
}

PathStateChange PathSet::on_probe_reply(int i, uint64_t probe_id, Time now) {
  if (i < 0 || static_cast<size_t>(i) >= evs_.size()) return {};
  Probe* pr = probe_of(i);
  if (evs_[static_cast<size_t>(i)].state != ev::EvState::kAssumedBad || probe_id == 0 ||
      pr == nullptr || pr->probe_id != probe_id) {
    return {};
  }
  pr->probe_id = 0;
  if (pr->probe_streak++ == 0) pr->streak_start = now;
  // At the ev_min_active floor the QP is held on paths that were kept only because the floor
  // forbade marking them, and they may be worse than this one (a blackholed EV kept while a
  // lossy one answers probes): an answer then brings the path back at once, and the next loss
  // on a kept path can map that one out instead.
  const bool at_floor = usable_ <= min_active_;
  const bool port_returned = pr->port_fault && pr->probe_streak >= policy_.port_return_probes;
  if (!at_floor && !port_returned &&
      (pr->probe_streak < policy_.resurrect_probes ||
       now - pr->streak_start < policy_.resurrect_window)) {
    // Not enough yet: the next probe at the base interval from this one's departure (the
    // backoff stays: a path that keeps failing probes is waited for again after a failure).
    pr->next_probe_at = std::max(now, pr->probe_sent_at + policy_.probe_interval);
    return {};
  }
  set_state(i, ev::EvState::kGood);
  const uint16_t slot = slot_of_[static_cast<size_t>(i)];
  if (slot != kBackup) order_[slot].cool_off = 0;
  stop_probing(i);
  PathStateChange c{true, ev::EvState::kAssumedBad, ev::EvState::kGood};
  c.replaced = swap_in(i);
  if (c.replaced != kNone) c.swapped_in = i;
  recount();
  return c;
}

PathStateChange PathSet::on_delivered(int i) {
  if (i < 0 || static_cast<size_t>(i) >= evs_.size()) return {};
  if (evs_[static_cast<size_t>(i)].state != ev::EvState::kAssumedBad) return {};
  if (Probe* pr = probe_of(i)) {
    if (pr->losses_standing > 0) --pr->losses_standing;
    if (pr->losses_standing > 0 || pr->probe_failed) return {};
  }
  set_state(i, ev::EvState::kGood);
  stop_probing(i);
  PathStateChange c{true, ev::EvState::kAssumedBad, ev::EvState::kGood};
  c.replaced = swap_in(i);
  if (c.replaced != kNone) c.swapped_in = i;
  recount();
  return c;
}

PathStateChange PathSet::set_denied(int i, bool denied) {
  const ev::EvState from = evs_[static_cast<size_t>(i)].state;
  PathStateChange c;
  if (denied) {
    if (from == ev::EvState::kDenied) return {};
    set_state(i, ev::EvState::kDenied);
    stop_probing(i);
    c.swapped_in = swap_out(i);
    if (c.swapped_in != kNone) c.replaced = i;
  } else {
    if (from != ev::EvState::kDenied) return {};
    set_state(i, ev::EvState::kGood);
    c.replaced = swap_in(i);
    if (c.replaced != kNone) c.swapped_in = i;
  }
  recount();
  c.changed = true;
  c.from = from;
  c.to = evs_[static_cast<size_t>(i)].state;
  return c;
}

Status PathSet::replace(int i, const PathDesc& desc) {
  if (i < 0 || static_cast<size_t>(i) >= evs_.size() || desc.port >= num_ports_ ||
      (desc.state != ev::EvState::kGood && desc.state != ev::EvState::kDenied)) {
    return fail(Error::kInvalidArgument);
  }
  EvRec& e = evs_[static_cast<size_t>(i)];
  const bool port_changed = e.port != desc.port;
  if (i == burst_path_) burst_left_ = 0;  // a burst is for the old EV
  e = EvRec{};
  std::erase_if(losses_, [i](const LossCount& c) { return c.index == i; });
  e.port = desc.port;
  e.state = desc.state;
  store_ev(i, desc.ev);
  stop_probing(i);  // its probe was for the old EV
  const uint16_t slot = slot_of_[static_cast<size_t>(i)];
  if (slot != kBackup) {
    order_[slot].cool_off = 0;
    order_[slot].state = e.state;
    order_[slot].port = e.port;
    if (port_changed) build_order();  // keep consecutive picks alternating planes
  }
  // The path keeps its membership; with a backup set, a denied active path still gives its
  // slot to a GOOD backup and a GOOD backup still fills a slot left bad (swaps counted).
  if (e.state == ev::EvState::kGood) {
    swap_in(i);
  } else {
    swap_out(i);
  }
  recount();
  return {};
}

void PathSet::set_port_up(uint8_t port, bool up, Time now) {
  const uint32_t before = usable_ports();
  if (up) {
    port_up_mask_ |= 1u << port;
  } else {
    port_up_mask_ &= ~(1u << port);
  }
  on_usable_ports(before, now);
  recount();
}

void PathSet::set_peer_ports_down(uint32_t mask, Time now) {
  const uint32_t before = usable_ports();
  peer_down_mask_ = mask;
  on_usable_ports(before, now);
  recount();
}

void PathSet::on_usable_ports(uint32_t before, Time now) {
  if (policy_.port_return_probes == 0) return;
  const uint32_t after = usable_ports();
  const uint32_t gone = before & ~after, back = after & ~before;
  if ((gone | back) == 0) return;
  for (Probe& p : assumed_bad_) {
    const uint8_t port = evs_[p.index].port;
    if ((gone >> port) & 1) {
      // Which of its losses were the port's cannot be told apart; those that were not are
      // found out by the probe at the port's return.
      p.port_fault = true;
    } else if (((back >> port) & 1) && p.port_fault) {
      // Probed at once, from a clean slate: a probe outstanding since before the port went
      // down was lost with it and says nothing about the path.
      p.next_probe_at = now;
      p.probe_id = 0;
      p.probe_streak = 0;
      p.probe_backoff = 0;
    }
  }
}

Time PathSet::next_probe_time() const {
  Time t = kNever;
  for (const Probe& p : assumed_bad_) {
    if (port_up(evs_[p.index].port)) t = std::min(t, p.next_probe_at);
  }
  return t;
}

int PathSet::take_due_probe(Time now, uint32_t port_mask, uint64_t* probe_id,
                            bool* previous_unanswered) {
  for (Probe& p : assumed_bad_) {
    const uint8_t port = evs_[p.index].port;
    if (p.next_probe_at > now || !port_up(port) || !((port_mask >> port) & 1)) continue;
    const bool unanswered = p.probe_id != 0;
    if (unanswered) {
      // The previous probe was not answered in a whole interval: evidence against the path;
      // probe it less often (up to the limit) and start the count over.
      p.probe_failed = true;
      p.probe_streak = 0;
      p.port_fault = false;  // the port is up, the path did not answer
      p.probe_backoff = static_cast<uint8_t>(std::min<uint32_t>(
          p.probe_backoff + 1u, std::min<uint32_t>(policy_.probe_backoff_limit, 20)));
    }
    if (previous_unanswered) *previous_unanswered = unanswered;
    // A probe id names the path and is fresh each time, so a late reply to an old probe
    // cannot revive a path that failed again since.
    p.probe_id = (static_cast<uint64_t>(p.index) << 48) | (++probe_seq_ & 0xFFFFFFFFFFFFull);
    p.probe_sent_at = now;
    p.next_probe_at = now + (policy_.probe_interval << p.probe_backoff);
    *probe_id = p.probe_id;
    return p.index;
  }
  return kNone;
}

void PathSet::defer_probes(Time until) {
  for (Probe& p : assumed_bad_)
    p.next_probe_at = std::max(p.next_probe_at, until);
}

}  // namespace mrc
