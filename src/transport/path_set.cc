#include "transport/path_set.h"

#include <algorithm>

namespace mrc {

void PathSet::init(std::span<const PathDesc> paths, uint32_t min_active, uint8_t num_ports,
                   const PathPolicy& policy, uint64_t seed) {
  paths_.clear();
  order_.clear();
  slot_of_.clear();
  assumed_bad_.clear();
  policy_ = policy;
  // Qp::to_init rejects 0; a PathSet used on its own treats it as 1 rather than as a burst
  // without end (burst - 1 would wrap).
  policy_.burst = std::max<uint32_t>(1, policy.burst);
  burst_path_ = kNone;
  burst_left_ = 0;
  min_active_ = min_active;
  port_up_mask_ = num_ports >= 32 ? ~0u : ((1u << num_ports) - 1);
  num_ports_ = num_ports;
  for (const PathDesc& d : paths) {
    Path p;
    p.desc = d;
    p.state = d.state == ev::EvState::kDenied ? ev::EvState::kDenied : ev::EvState::kGood;
    paths_.push_back(p);
  }
  build_order();
  Rng rng(seed);
  cursor_ = order_.empty() ? 0 : rng.below(order_.size());
  probe_seq_ = rng.next() & 0xFFFFFFFFull;
  recount();
}

size_t PathSet::heap_bytes() const {
  return paths_.capacity() * sizeof(Path) + order_.capacity() * sizeof(Slot) +
         (slot_of_.capacity() + assumed_bad_.capacity()) * sizeof(uint16_t);
}

void PathSet::build_order() {
  // Interleave by port: take the first path of every port, then the second of every port,
  // and so on, so that consecutive picks alternate planes.
  std::vector<Time> cool(paths_.size(), 0);
  for (const Slot& slot : order_)
    if (slot.index < cool.size()) cool[slot.index] = slot.cool_until;
  order_.clear();
  std::vector<std::vector<uint16_t>> by_port(32);
  for (size_t i = 0; i < paths_.size(); ++i) {
    by_port[paths_[i].desc.port & 31].push_back(static_cast<uint16_t>(i));
  }
  slot_of_.resize(paths_.size());
  for (size_t round = 0; order_.size() < paths_.size(); ++round) {
    for (auto& bucket : by_port) {
      if (round >= bucket.size()) continue;
      const uint16_t i = bucket[round];
      slot_of_[i] = static_cast<uint16_t>(order_.size());
      order_.push_back(Slot{cool[i], i, paths_[i].desc.port, paths_[i].state});
    }
  }
  if (cursor_ >= order_.size()) cursor_ = 0;
}

void PathSet::recount() {
  usable_ = 0;
  for (const Path& p : paths_)
    usable_ += usable(p) ? 1 : 0;
}

int PathSet::pick(Time now, uint32_t port_mask, int exclude) {
  const size_t n = order_.size();
  if (n == 0) return kNone;
  const uint32_t mask = port_mask & port_up_mask_;
  // Bursts only while nothing is suspected: a retransmission (it has a path to avoid) and
  // every pick while a path is ASSUMED_BAD go per packet, so that the paths a failure took
  // are found in one flight, each losing one packet, instead of a run at a time (a blackholed
  // spine then cost ACK timeouts: docs/linux-driver.md, "Bursts per path, opt-in").
  const bool bursting = exclude == kNone && assumed_bad_.empty();
  if (burst_left_ > 0 && bursting) {
    const Slot& slot = order_[slot_of_[static_cast<size_t>(burst_path_)]];
    if (slot.state == ev::EvState::kGood && ((mask >> slot.port) & 1) &&
        !(slot.cool_until > now && policy_.ecn_steering)) {
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
    if (slot.cool_until > now && policy_.ecn_steering) {
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
  paths_[static_cast<size_t>(i)].state = s;
  order_[slot_of_[static_cast<size_t>(i)]].state = s;
}

void PathSet::on_ecn(int i, Time now) {
  Path& p = paths_[static_cast<size_t>(i)];
  ++p.ecn_echoes;
  if (policy_.ecn_steering)
    order_[slot_of_[static_cast<size_t>(i)]].cool_until = now + policy_.ecn_cooldown;
}

PathStateChange PathSet::on_loss(int i, Time now) {
  Path& p = paths_[static_cast<size_t>(i)];
  ++p.losses;
  burst_left_ = 0;  // whichever path lost it: the next picks spray (pick)
  if (!policy_.loss_marking || p.state != ev::EvState::kGood) return {};
  // Never drop below ev_min_active usable paths (OCP mrc_ctl_ev_profile_attr.ev_min_active).
  if (usable(p) && usable_ <= min_active_) return {};
  set_state(i, ev::EvState::kAssumedBad);
  p.next_probe_at = now + policy_.probe_interval;
  p.probe_id = 0;
  assumed_bad_.push_back(static_cast<uint16_t>(i));
  recount();
  return {true, ev::EvState::kGood, ev::EvState::kAssumedBad};
}

PathStateChange PathSet::on_probe_reply(int i, uint64_t probe_id) {
  if (i < 0 || static_cast<size_t>(i) >= paths_.size()) return {};
  Path& p = paths_[static_cast<size_t>(i)];
  if (p.state != ev::EvState::kAssumedBad || probe_id == 0 || p.probe_id != probe_id) return {};
  set_state(i, ev::EvState::kGood);
  p.probe_id = 0;
  order_[slot_of_[static_cast<size_t>(i)]].cool_until = 0;
  std::erase(assumed_bad_, static_cast<uint16_t>(i));
  recount();
  return {true, ev::EvState::kAssumedBad, ev::EvState::kGood};
}

PathStateChange PathSet::on_delivered(int i) {
  if (i < 0 || static_cast<size_t>(i) >= paths_.size()) return {};
  Path& p = paths_[static_cast<size_t>(i)];
  if (p.state != ev::EvState::kAssumedBad) return {};
  set_state(i, ev::EvState::kGood);
  p.probe_id = 0;
  std::erase(assumed_bad_, static_cast<uint16_t>(i));
  recount();
  return {true, ev::EvState::kAssumedBad, ev::EvState::kGood};
}

PathStateChange PathSet::set_denied(int i, bool denied) {
  Path& p = paths_[static_cast<size_t>(i)];
  const ev::EvState from = p.state;
  if (denied) {
    if (from == ev::EvState::kDenied) return {};
    set_state(i, ev::EvState::kDenied);
    std::erase(assumed_bad_, static_cast<uint16_t>(i));
  } else {
    if (from != ev::EvState::kDenied) return {};
    set_state(i, ev::EvState::kGood);
  }
  recount();
  return {true, from, p.state};
}

Status PathSet::replace(int i, const PathDesc& desc) {
  if (i < 0 || static_cast<size_t>(i) >= paths_.size() || desc.port >= num_ports_ ||
      (desc.state != ev::EvState::kGood && desc.state != ev::EvState::kDenied)) {
    return fail(Error::kInvalidArgument);
  }
  Path& p = paths_[static_cast<size_t>(i)];
  const bool port_changed = p.desc.port != desc.port;
  if (i == burst_path_) burst_left_ = 0;  // a burst is for the old EV
  p = Path{};
  p.desc = desc;
  p.state = desc.state;
  std::erase(assumed_bad_, static_cast<uint16_t>(i));  // its probe was for the old EV
  if (port_changed) {
    order_[slot_of_[static_cast<size_t>(i)]].cool_until = 0;
    build_order();  // keep consecutive picks alternating planes
  } else {
    Slot& slot = order_[slot_of_[static_cast<size_t>(i)]];
    slot.cool_until = 0;
    slot.state = p.state;
  }
  recount();
  return {};
}

void PathSet::set_port_up(uint8_t port, bool up) {
  if (up) {
    port_up_mask_ |= 1u << port;
  } else {
    port_up_mask_ &= ~(1u << port);
  }
  recount();
}

Time PathSet::next_probe_time() const {
  Time t = kNever;
  for (uint16_t i : assumed_bad_) {
    const Path& p = paths_[i];
    if (port_up(p.desc.port)) t = std::min(t, p.next_probe_at);
  }
  return t;
}

int PathSet::take_due_probe(Time now, uint32_t port_mask, uint64_t* probe_id) {
  for (uint16_t i : assumed_bad_) {
    Path& p = paths_[i];
    if (p.next_probe_at > now || !port_up(p.desc.port) || !((port_mask >> p.desc.port) & 1)) {
      continue;
    }
    // A probe id names the path and is fresh each time, so a late reply to an old probe
    // cannot revive a path that failed again since.
    p.probe_id = (static_cast<uint64_t>(i) << 48) | (++probe_seq_ & 0xFFFFFFFFFFFFull);
    p.next_probe_at = now + policy_.probe_interval;
    *probe_id = p.probe_id;
    return i;
  }
  return kNone;
}

}  // namespace mrc
