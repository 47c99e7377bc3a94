#include "transport/path_set.h"

#include <algorithm>

namespace mrc {

Time default_ecn_cooldown(Time base_rtt, bool hashed_paths, uint32_t active_per_port, uint32_t mtu,
                          uint64_t port_bps) {
  Time cooldown = base_rtt / 16;
  if (hashed_paths && port_bps > 0) {
    const auto packet =
        static_cast<Time>(static_cast<__uint128_t>(mtu) * 8 * kPicosPerSecond / port_bps);
    cooldown = std::max(cooldown, active_per_port * packet);
  }
  return cooldown;
}

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

PathPolicy PathSet::clamped(const PathPolicy& p) {
  PathPolicy c = p;
  // Qp::to_init rejects 0; a PathSet used on its own treats it as 1 rather than as a burst
  // without end (burst - 1 would wrap).
  c.burst = std::max<uint32_t>(1, p.burst);
  c.ecn_cooldown = std::min(p.ecn_cooldown, kMaxCooldown);  // cool_ stamps
  return c;
}

void PathSet::init(std::span<const PathDesc> paths, uint32_t min_active, uint8_t num_ports,
                   const PathPolicy& policy, uint64_t seed) {
  init(paths, min_active, num_ports, std::make_shared<const PathPolicy>(clamped(policy)), seed);
}

void PathSet::init(std::span<const PathDesc> paths, uint32_t min_active, uint8_t num_ports,
                   std::shared_ptr<const PathPolicy> policy, uint64_t seed) {
  n_ = static_cast<uint32_t>(paths.size());
  n_active_ = 0;
  states_ = n_ ? std::make_unique<uint8_t[]>(state_bytes()) : nullptr;
  ports_.reset();
  values_.reset();
  value_mid_.reset();
  value_hi_.reset();
  table_.reset();
  order_.reset();
  slot_of_.reset();
  cool_.reset();
  ecn_run_.reset();
  faults_.reset();
  swaps_ = 0;
  ecn_swaps_ = 0;
  backup_cursor_ = 0;
  policy_ = std::move(policy);
  cool_epoch_ = 0;
  cool_end_ = 0;
  burst_path_ = kNone;
  burst_left_ = 0;
  trim_hold_until_ = 0;
  min_active_ = min_active;
  port_up_mask_ = num_ports >= 32 ? ~0u : ((1u << num_ports) - 1);
  peer_down_mask_ = 0;
  num_ports_ = std::max<uint8_t>(num_ports, 1);
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
    // Regular ports and values (EvTemplate) when every path follows the first ones.
    tmpl_.port0 = static_cast<uint8_t>(paths[0].port % num_ports_);
    if (!tmpl_.table) {
      tmpl_.first = read_window(paths[0].ev, tmpl_.offset);
      if (paths.size() > num_ports_) {
        tmpl_.step = read_window(paths[num_ports_].ev, tmpl_.offset) - tmpl_.first;
      }
    }
  }
  if (tmpl_.table) table_ = std::make_unique<ev::ExpandedEv[]>(n_);
  bool regular = true;
  for (size_t i = 0; i < paths.size(); ++i) {
    put_state(i,
              paths[i].state == ev::EvState::kDenied ? ev::EvState::kDenied : ev::EvState::kGood);
    set_port(i, paths[i].port);
    if (tmpl_.table) {
      table_[i] = paths[i].ev;
    } else {
      const uint32_t v = read_window(paths[i].ev, tmpl_.offset);
      regular = regular && v == regular_value(i);
    }
  }
  if (!tmpl_.table && !regular) {
    values_ = std::make_unique<uint8_t[]>(n_);  // set_value adds wider bytes as they are needed
    for (size_t i = 0; i < paths.size(); ++i)
      set_value(i, read_window(paths[i].ev, tmpl_.offset));
  }
  // The active set: the first active_per_plane paths of each port (all with 0).
  std::vector<uint8_t> active(n_, 0);
  std::vector<uint32_t> per_port(32, 0);
  for (size_t i = 0; i < n_; ++i) {
    uint32_t& n = per_port[port_of(static_cast<int>(i)) & 31];
    if (policy_->active_per_plane == 0 || n < policy_->active_per_plane) {
      active[i] = 1;
      ++n;
    }
  }
  build_order(active);
  // A path denied at configuration leaves the active set if a GOOD backup can take its slot.
  for (size_t i = 0; i < n_; ++i) {
    if (slot_of(i) != kBackup && state_at(i) != ev::EvState::kGood) {
      if (swap_out(static_cast<int>(i)) != kNone) --swaps_;  // configuration, not a swap
    }
  }
  Rng rng(seed);
  cursor_ = n_active_ == 0 ? 0 : static_cast<uint32_t>(rng.below(n_active_));
  probe_seq_ = rng.next() & 0xFFFFFFFFull;
  recount();
}

size_t PathSet::heap_bytes() const {
  size_t b = state_bytes();
  if (ports_) b += n_;
  if (values_) b += n_;
  if (value_mid_) b += n_;
  if (value_hi_) b += n_ * sizeof(uint16_t);
  if (table_) b += n_ * sizeof(ev::ExpandedEv);
  if (order_) b += n_active_ * sizeof(uint16_t) + n_ * sizeof(uint16_t);
  if (cool_) b += n_active_ * sizeof(uint32_t);
  if (ecn_run_) b += n_active_;
  if (faults_) {
    b += sizeof(Faults) + faults_->losses.capacity() * sizeof(LossCount) +
         faults_->assumed_bad.capacity() * sizeof(Probe);
  }
  return b;
}

Path PathSet::path(int i) const {
  const auto k = static_cast<size_t>(i);
  Path p;
  p.desc.ev = ev(i);
  p.desc.port = port_of(i);
  p.desc.state = state_at(k) == ev::EvState::kDenied ? ev::EvState::kDenied : ev::EvState::kGood;
  p.state = state_at(k);
  p.active = active(i);
  p.losses = losses_of(k);
  return p;
}

void PathSet::set_value(size_t i, uint32_t v) {
  if (!values_) {
    if (v == regular_value(i)) return;
    // Irregular from here on: store every path's value, in as many bytes as the widest
    // difference from the first path's needs.
    uint32_t any = 0;
    for (size_t k = 0; k < n_; ++k)
      any |= value_of(k) ^ tmpl_.first;
    auto lo = std::make_unique<uint8_t[]>(n_);
    std::unique_ptr<uint8_t[]> mid = (any >> 8) ? std::make_unique<uint8_t[]>(n_) : nullptr;
    std::unique_ptr<uint16_t[]> hi = (any >> 16) ? std::make_unique<uint16_t[]>(n_) : nullptr;
    for (size_t k = 0; k < n_; ++k) {
      const uint32_t x = value_of(k) ^ tmpl_.first;
      lo[k] = static_cast<uint8_t>(x);
      if (mid) mid[k] = static_cast<uint8_t>(x >> 8);
      if (hi) hi[k] = static_cast<uint16_t>(x >> 16);
    }
    values_ = std::move(lo);
    value_mid_ = std::move(mid);
    value_hi_ = std::move(hi);
  }
  const uint32_t x = v ^ tmpl_.first;  // stored as the difference from the first path's
  if ((x >> 8) != 0 && !value_mid_) value_mid_ = std::make_unique<uint8_t[]>(n_);
  if ((x >> 16) != 0 && !value_hi_) value_hi_ = std::make_unique<uint16_t[]>(n_);
  values_[i] = static_cast<uint8_t>(x);
  if (value_mid_) value_mid_[i] = static_cast<uint8_t>(x >> 8);
  if (value_hi_) value_hi_[i] = static_cast<uint16_t>(x >> 16);
}

void PathSet::set_port(size_t i, uint8_t port) {
  if (!ports_) {
    if (port == (tmpl_.port0 + i) % num_ports_) return;
    auto p = std::make_unique<uint8_t[]>(n_);
    for (size_t k = 0; k < n_; ++k)
      p[k] = port_of(static_cast<int>(k));
    ports_ = std::move(p);
  }
  ports_[i] = port;
}

uint16_t PathSet::losses_of(size_t i) const {
  if (!faults_) return 0;
  for (const LossCount& l : faults_->losses)
    if (l.index == i) return l.losses;
  return 0;
}

ev::ExpandedEv PathSet::ev(int i) const {
  if (tmpl_.table) return table_[static_cast<size_t>(i)];
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
    auto t = std::make_unique<ev::ExpandedEv[]>(n_);
    for (size_t k = 0; k < n_; ++k)
      t[k] = ev(static_cast<int>(k));
    table_ = std::move(t);
    values_.reset();
    value_mid_.reset();
    value_hi_.reset();
    tmpl_.table = true;
  }
  table_[static_cast<size_t>(i)] = e;
}

void PathSet::build_order(const std::vector<uint8_t>& active) {
  // Interleave by port: take the first active path of every port, then the second of every
  // port, and so on, so that consecutive picks alternate planes.
  std::vector<uint32_t> cool(n_, 0);
  if (cool_) {
    for (size_t pos = 0; pos < n_active_; ++pos)
      cool[static_cast<size_t>(path_at(pos))] = cool_[pos];
  }
  std::vector<uint16_t> order;
  std::vector<std::vector<uint16_t>> by_port(32);
  for (size_t i = 0; i < n_; ++i) {
    if (active[i]) by_port[port_of(static_cast<int>(i)) & 31].push_back(static_cast<uint16_t>(i));
  }
  size_t n_active = 0;
  for (const auto& bucket : by_port)
    n_active += bucket.size();
  order.reserve(n_active);
  for (size_t round = 0; order.size() < n_active; ++round) {
    for (auto& bucket : by_port) {
      if (round < bucket.size()) order.push_back(bucket[round]);
    }
  }
  n_active_ = static_cast<uint32_t>(order.size());
  // Stored only if position k does not hold path k (the active set is then the first paths).
  bool identity = true;
  for (size_t pos = 0; pos < order.size(); ++pos)
    identity = identity && order[pos] == pos;
  if (identity) {
    order_.reset();
    slot_of_.reset();
  } else {
    order_ = std::make_unique<uint16_t[]>(n_active_);
    slot_of_ = std::make_unique<uint16_t[]>(n_);
    std::fill(slot_of_.get(), slot_of_.get() + n_, kBackup);
    for (size_t pos = 0; pos < order.size(); ++pos) {
      order_[pos] = order[pos];
      slot_of_[order[pos]] = static_cast<uint16_t>(pos);
    }
  }
  if (cool_) {
    cool_ = std::make_unique<uint32_t[]>(n_active_);
    for (size_t pos = 0; pos < n_active_; ++pos)
      cool_[pos] = cool[static_cast<size_t>(path_at(pos))];
  }
  // Runs of ECN marks start over (a rebuilt order is a new set of slots): no array is every
  // run at 0 (on_ecn makes it).
  ecn_run_.reset();
  if (cursor_ >= n_active_) cursor_ = 0;
}

void PathSet::release_idle(Time now) {
  if (cool_ && now >= cool_end_) cool_.reset();
  if (ecn_run_ &&
      std::all_of(ecn_run_.get(), ecn_run_.get() + n_active_, [](uint8_t r) { return r == 0; })) {
    ecn_run_.reset();
  }
}

void PathSet::store_order() {
  if (order_) return;
  order_ = std::make_unique<uint16_t[]>(n_active_);
  slot_of_ = std::make_unique<uint16_t[]>(n_);
  for (size_t i = 0; i < n_; ++i)
    slot_of_[i] = i < n_active_ ? static_cast<uint16_t>(i) : kBackup;
  for (size_t pos = 0; pos < n_active_; ++pos)
    order_[pos] = static_cast<uint16_t>(pos);
}

void PathSet::recount() {
  usable_ = 0;
  for (size_t i = 0; i < n_; ++i)
    usable_ += usable_active(static_cast<int>(i)) ? 1 : 0;
}

int PathSet::pick(Time now, uint32_t port_mask, int exclude) {
  const size_t n = n_active_;
  if (n == 0) return kNone;
  // Every cool-down has run out: the stamps go (the next ECN mark allocates them again).
  if (cool_ && now >= cool_end_) cool_.reset();
  const uint32_t mask = port_mask & usable_ports();
  const bool steering = policy_->ecn_steering;
  // Bursts only while nothing is suspected: a retransmission (it has a path to avoid) and
  // every pick while a path is ASSUMED_BAD go per packet, so that the paths a failure took
  // are found in one flight, each losing one packet, instead of a run at a time (a blackholed
  // spine then cost ACK timeouts: docs/linux-driver.md, "Bursts per path, opt-in").
  const bool bursting = exclude == kNone && !any_assumed_bad();
  if (burst_left_ > 0 && bursting) {
    const size_t pos = slot_of(static_cast<size_t>(burst_path_));
    if (state_at(static_cast<size_t>(burst_path_)) == ev::EvState::kGood &&
        ((mask >> port_of(burst_path_)) & 1) && !(cooling(pos, now) && steering)) {
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
    const int i = path_at(pos);
    if (state_at(static_cast<size_t>(i)) != ev::EvState::kGood || !((mask >> port_of(i)) & 1))
      continue;
    if (i == exclude) {
      excluded_ok = i;
      continue;
    }
    if (steering && cooling(pos, now)) {
      if (fallback == kNone) {
        fallback = i;
        fallback_pos = pos;
      }
      continue;
    }
    cursor_ = pos + 1 == n ? 0 : static_cast<uint32_t>(pos + 1);
    burst_path_ = i;
    burst_left_ = bursting ? policy_->burst - 1 : 0;
    return i;
  }
  if (fallback != kNone) {
    // Advance past the fallback too, so congested paths still rotate.
    cursor_ = fallback_pos + 1 == n ? 0 : static_cast<uint32_t>(fallback_pos + 1);
    return fallback;
  }
  return excluded_ok;
}

void PathSet::set_state(int i, ev::EvState s) {
  put_state(static_cast<size_t>(i), s);
}

PathSet::Probe* PathSet::probe_of(int i) {
  if (!faults_) return nullptr;
  for (Probe& p : faults_->assumed_bad)
    if (p.index == i) return &p;
  return nullptr;
}

void PathSet::start_probing(int i, Time now) {
  Probe p;
  p.index = static_cast<uint16_t>(i);
  p.next_probe_at = now + policy_->probe_interval;
  faults().assumed_bad.push_back(p);
}

void PathSet::stop_probing(int i) {
  if (faults_) std::erase_if(faults_->assumed_bad, [i](const Probe& p) { return p.index == i; });
}

int PathSet::find_backup(uint8_t port, int after) const {
  const size_t n = n_;
  for (size_t k = 1; k <= n; ++k) {
    const size_t j = (static_cast<size_t>(after) + k) % n;
    if (slot_of(j) == kBackup && port_of(static_cast<int>(j)) == port &&
        state_at(j) == ev::EvState::kGood)
      return static_cast<int>(j);
  }
  return kNone;
}

void PathSet::exchange(int out, int in) {
  store_order();
  const uint16_t pos = slot_of_[static_cast<size_t>(out)];
  order_[pos] = static_cast<uint16_t>(in);
  clear_cool(pos);  // nothing learned about the old EV applies to the new one
  if (ecn_run_) ecn_run_[pos] = 0;
  slot_of_[static_cast<size_t>(in)] = pos;
  slot_of_[static_cast<size_t>(out)] = kBackup;
  if (burst_path_ == out) burst_left_ = 0;
  ++swaps_;
}

int PathSet::swap_out(int i) {
  if (policy_->active_per_plane == 0 || slot_of(static_cast<size_t>(i)) == kBackup) return kNone;
  const int j = find_backup(port_of(i), i);
  if (j == kNone) return kNone;
  exchange(i, j);
  return j;
}

int PathSet::swap_in(int j) {
  if (policy_->active_per_plane == 0 || slot_of(static_cast<size_t>(j)) != kBackup) return kNone;
  const uint8_t port = port_of(j);
  for (size_t pos = 0; pos < n_active_; ++pos) {
    const int out = path_at(pos);
    if (port_of(out) == port && state_at(static_cast<size_t>(out)) != ev::EvState::kGood) {
      exchange(out, j);
      return out;
    }
  }
  return kNone;
}

int PathSet::swap_congested(int i) {
  const int j = find_backup(port_of(i), backup_cursor_);
  if (j == kNone) return kNone;
  backup_cursor_ = static_cast<uint16_t>(j);
  exchange(i, j);
  ++ecn_swaps_;
  return j;
}

void PathSet::set_cool(uint16_t pos, Time now, Time until) {
  if (until <= now) {
    clear_cool(pos);
    return;
  }
  if (!cool_) {
    cool_ = std::make_unique<uint32_t[]>(n_active_);
    cool_epoch_ = now;
  } else if (now < cool_epoch_ || until - cool_epoch_ > UINT32_MAX) {
    // Move the epoch to `now`: stamps that have run out become 0, the others count from now
    // (each ends at most kMaxCooldown after the `now` it was set at, so they fit).
    for (size_t k = 0; k < n_active_; ++k) {
      uint32_t& c = cool_[k];
      if (c == 0) continue;
      const Time end = cool_epoch_ + c;
      c = end > now ? static_cast<uint32_t>(std::min<Time>(end - now, UINT32_MAX)) : 0;
    }
    cool_epoch_ = now;
  }
  cool_[pos] = static_cast<uint32_t>(until - cool_epoch_);
  cool_end_ = std::max(cool_end_, until);
}

PathStateChange PathSet::on_ecn(int i, Time now) {
  const uint16_t pos = slot_of(static_cast<size_t>(i));
  if (!policy_->ecn_steering || pos == kBackup) return {};
  set_cool(pos, now, now + policy_->ecn_cooldown);
  if (policy_->ecn_swap_marks == 0 || policy_->active_per_plane == 0 ||
      state_at(static_cast<size_t>(i)) != ev::EvState::kGood) {
    return {};
  }
  if (!ecn_run_) ecn_run_ = std::make_unique<uint8_t[]>(n_active_);
  uint8_t& run = ecn_run_[pos];
  if (run < UINT8_MAX) ++run;
  if (run < policy_->ecn_swap_marks) return {};
  PathStateChange c;
  c.swapped_in = swap_congested(i);
  if (c.swapped_in != kNone) c.replaced = i;
  return c;
}

PathStateChange PathSet::on_trim(int i, Time now) {
  trim_hold_until_ = now + policy_->trim_hold;
  return on_ecn(i, now);
}

PathStateChange PathSet::on_loss(int i, Time now) {
  const ev::EvState state = state_at(static_cast<size_t>(i));
  const uint8_t port = port_of(i);
  std::vector<LossCount>& losses = faults().losses;
  auto l =
      std::find_if(losses.begin(), losses.end(), [i](const LossCount& c) { return c.index == i; });
  if (l == losses.end()) {
    losses.push_back(LossCount{static_cast<uint16_t>(i), 1});
  } else if (l->losses != UINT16_MAX) {
    ++l->losses;
  }
  burst_left_ = 0;  // whichever path lost it: the next picks spray (pick)
  if (state == ev::EvState::kAssumedBad) {
    // A packet sent before the path was marked: more evidence, and the probes start over
    // (and, once its port is back, not only the port's fault).
    if (Probe* pr = probe_of(i)) {
      if (pr->losses_standing < UINT16_MAX) ++pr->losses_standing;
      pr->probe_streak = 0;
      if (port_up(port)) pr->port_fault = false;
    }
    return {};
  }
  if (!policy_->loss_marking || state != ev::EvState::kGood) return {};
  if (now < trim_hold_until_) {
    PathStateChange held;
    held.held = true;
    return held;
  }
  // Never drop below ev_min_active usable paths (OCP mrc_ctl_ev_profile_attr.ev_min_active),
  // unless a backup takes the path's place.
  const bool counted = usable_active(i);
  if (counted && usable_ <= min_active_ &&
      (policy_->active_per_plane == 0 || find_backup(port, i) == kNone)) {
    return {};
  }
  set_state(i, ev::EvState::kAssumedBad);
  start_probing(i, now);
  if (!port_up(port)) faults_->assumed_bad.back().port_fault = true;  // lost to the port
  PathStateChange c{true, ev::EvState::kGood, ev::EvState::kAssumedBad};
  c.swapped_in = swap_out(i);
  if (c.swapped_in != kNone) c.replaced = i;
  recount();
  return c;
}

PathStateChange PathSet::on_probe_reply(int i, uint64_t probe_id, Time now) {
  if (i < 0 || static_cast<size_t>(i) >= n_) return {};
  Probe* pr = probe_of(i);
  if (state_at(static_cast<size_t>(i)) != ev::EvState::kAssumedBad || probe_id == 0 ||
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
  const bool port_returned = pr->port_fault && pr->probe_streak >= policy_->port_return_probes;
  if (!at_floor && !port_returned &&
      (pr->probe_streak < policy_->resurrect_probes ||
       now - pr->streak_start < policy_->resurrect_window)) {
    // Not enough yet: the next probe at the base interval from this one's departure (the
    // backoff stays: a path that keeps failing probes is waited for again after a failure).
    pr->next_probe_at = std::max(now, pr->probe_sent_at + policy_->probe_interval);
    return {};
  }
  set_state(i, ev::EvState::kGood);
  const uint16_t slot = slot_of(static_cast<size_t>(i));
  if (slot != kBackup) clear_cool(slot);
  stop_probing(i);
  PathStateChange c{true, ev::EvState::kAssumedBad, ev::EvState::kGood};
  c.replaced = swap_in(i);
  if (c.replaced != kNone) c.swapped_in = i;
  recount();
  return c;
}

PathStateChange PathSet::on_delivered(int i) {
  if (i < 0 || static_cast<size_t>(i) >= n_) return {};
  if (state_at(static_cast<size_t>(i)) != ev::EvState::kAssumedBad) return {};
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
  const ev::EvState from = state_at(static_cast<size_t>(i));
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
  c.to = state_at(static_cast<size_t>(i));
  return c;
}

Status PathSet::replace(int i, const PathDesc& desc) {
  if (i < 0 || static_cast<size_t>(i) >= n_ || desc.port >= num_ports_ ||
      (desc.state != ev::EvState::kGood && desc.state != ev::EvState::kDenied)) {
    return fail(Error::kInvalidArgument);
  }
  const auto k = static_cast<size_t>(i);
  const bool port_changed = port_of(i) != desc.port;
  if (i == burst_path_) burst_left_ = 0;  // a burst is for the old EV
  if (faults_) std::erase_if(faults_->losses, [i](const LossCount& c) { return c.index == i; });
  set_port(k, desc.port);
  put_state(k, desc.state);
  store_ev(i, desc.ev);
  stop_probing(i);  // its probe was for the old EV
  const uint16_t slot = slot_of(k);
  if (slot != kBackup) {
    clear_cool(slot);
    if (port_changed) {  // keep consecutive picks alternating planes
      std::vector<uint8_t> active(n_);
      for (size_t j = 0; j < n_; ++j)
        active[j] = slot_of(j) != kBackup;
      build_order(active);
    }
  }
  // The path keeps its membership; with a backup set, a denied active path still gives its
  // slot to a GOOD backup and a GOOD backup still fills a slot left bad (swaps counted).
  if (desc.state == ev::EvState::kGood) {
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
  if (policy_->port_return_probes == 0) return;
  const uint32_t after = usable_ports();
  const uint32_t gone = before & ~after, back = after & ~before;
  if ((gone | back) == 0 || !faults_) return;
  for (Probe& p : faults_->assumed_bad) {
    const uint8_t port = port_of(p.index);
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

Time PathSet::faults_next_probe_time() const {
  Time t = kNever;
  for (const Probe& p : faults_->assumed_bad) {
    if (port_up(port_of(p.index))) t = std::min(t, p.next_probe_at);
  }
  return t;
}

int PathSet::take_due_probe(Time now, uint32_t port_mask, uint64_t* probe_id,
                            bool* previous_unanswered) {
  if (!faults_) return kNone;
  for (Probe& p : faults_->assumed_bad) {
    const uint8_t port = port_of(p.index);
    if (p.next_probe_at > now || !port_up(port) || !((port_mask >> port) & 1)) continue;
    const bool unanswered = p.probe_id != 0;
    if (unanswered) {
      // The previous probe was not answered in a whole interval: evidence against the path;
      // probe it less often (up to the limit) and start the count over.
      p.probe_failed = true;
      p.probe_streak = 0;
      p.port_fault = false;  // the port is up, the path did not answer
      p.probe_backoff = static_cast<uint8_t>(std::min<uint32_t>(
          p.probe_backoff + 1u, std::min<uint32_t>(policy_->probe_backoff_limit, 20)));
    }
    if (previous_unanswered) *previous_unanswered = unanswered;
    // A probe id names the path and is fresh each time, so a late reply to an old probe
    // cannot revive a path that failed again since.
    p.probe_id = (static_cast<uint64_t>(p.index) << 48) | (++probe_seq_ & 0xFFFFFFFFFFFFull);
    p.probe_sent_at = now;
    p.next_probe_at = now + (policy_->probe_interval << p.probe_backoff);
    *probe_id = p.probe_id;
    return p.index;
  }
  return kNone;
}

void PathSet::defer_probes(Time until) {
  if (!faults_) return;
  for (Probe& p : faults_->assumed_bad)
    p.next_probe_at = std::max(p.next_probe_at, until);
}

}  // namespace mrc
