// The multipath state of one QP: its set of paths (EV + NIC port), which of them may carry
// traffic now, the round-robin sprayer, ECN recycling, loss marking and probing.
//
// MRC rules implemented here (mrc-background.md, "Path selection"):
// - round-robin over usable EVs, interleaved across planes (consecutive picks alternate
//   ports, so every plane carries its share);
// - an EV whose ACK echoes ECN is recycled: skipped for `ecn_cooldown`;
// - with a backup set, an active EV whose ACKs echo ECN `ecn_swap_marks` times in a row is
//   replaced by a backup of its plane (paper 2.1: the sender avoids a path more congested than
//   others; 5.2.5: ECN moves a flow to another EV). On a hashed fabric the new EV hashes to
//   another path, so EVs that collide on a hot link leave it;
// - a loss marks the EV ASSUMED_BAD at once; only probes use it until a probe succeeds;
// - never fewer than `min_active` usable EVs (a loss that would go below is not marked);
// - DENIED EVs (controller) are never used; a port that is down removes its EVs at once;
// - an active set and a backup set per plane (paper 2.1, 2.4, 4): with
//   PathPolicy::active_per_plane set, the first that many EVs of each port are active (the
//   round-robin sprays over them) and the rest wait as backups; an active EV mapped out
//   (ASSUMED_BAD, DENIED) is swapped with a GOOD backup of the same port, so every plane keeps
//   the same number of usable EVs.
//
// Memory (paper 2.1: "for each EV, MRC keeps a few bits of state about path health"; 2.3: EVs
// are compact values expanded from a per-plane template): a path holds its state (1 byte).
// Its EV value and port are computed from its index while the set is regular (port i % ports,
// window value first + (i / ports) * step: what a generated EV profile gives) and stored per
// path only once they are not; the round-robin order is stored only once it differs from the
// paths' own order (a swap with a backup, a port change), the ECN cool-down stamps only while
// some path is cooling; loss counts and probe state exist only for paths that lost packets;
// the expanded EV is rebuilt from the set's template when a packet leaves (ev()). The policy
// is shared (one immutable copy per distinct policy, Engine). docs/performance.md, "Bytes per
// QP".
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "common/array.h"
#include "common/types.h"
#include "transport/ev_profile.h"
#include "transport/rng.h"

namespace mrc {

// One path as configured: the expanded EV the drivers put on the wire and its NIC port.
struct PathDesc {
  ev::ExpandedEv ev{};
  uint8_t port = 0;                        // 0-based NIC port (plane)
  ev::EvState state = ev::EvState::kGood;  // kGood or kDenied at configuration
};

// The ECN cool-down of a QP whose PathPolicy::ecn_cooldown is 0 (paper 2.1: the sender
// "temporarily avoids" a path whose ACKs echo ECN, for no stated time): base RTT / 16, a few
// round-robin visits rather than a whole RTT (with tens of paths a long cool-down parks most
// of them and piles the traffic on the rest: 128-GPU permutation, max FCT / ideal 1.19 at base
// RTT / 16 against 1.35 at base RTT). Where the switches hash the EVs (`hashed_paths`) at least
// one round-robin cycle of a port's active EVs at line rate: a shorter cool-down ends before
// the marked EV's next turn and skips nothing. docs/engine.md, "Decisions".
// A QP whose congestion control gives no base RTT (DCQCN, a fixed window, none, with
// NsccConfig::base_rtt unset) takes kEcnCooldownWithoutRtt.
Time default_ecn_cooldown(Time base_rtt, bool hashed_paths, uint32_t active_per_port, uint32_t mtu,
                          uint64_t port_bps);
inline constexpr Time kEcnCooldownWithoutRtt = us(8);

struct PathPolicy {
  bool ecn_steering = true;  // recycle EVs whose ACKs echo ECN (false: oblivious spraying)
  bool loss_marking = true;  // mark EVs ASSUMED_BAD on loss (false: keep using them)
  // How long an ECN-marked EV is skipped. 0, the default: Qp derives it from the QP's
  // congestion control (default_ecn_cooldown), one rule in every world; PathSet itself takes
  // the value as given (0: no cool-down).
  Time ecn_cooldown = 0;
  Time probe_interval = us(50);  // between probes of an ASSUMED_BAD EV
  // Consecutive picks that stay on one path before the round-robin moves on. 1 (MRC's
  // per-packet spraying, the simulator): every pick takes the next path. A software driver
  // that hands the kernel a path's consecutive datagrams as one UDP GSO send asks for its GSO
  // run (net::spray_burst): the load then moves in bursts of that many packets, and rounds of
  // a driver's batch cover fewer paths, so each path's share of a round leaves in one send.
  // A burst ends early when its path stops being usable, cools down after ECN or is masked
  // (whatever the pick that found it so: a control packet's pick restricted to one port ends
  // a data burst on another, which only shortens a GSO run), and at any loss; the
  // round-robin's next choice starts a new one. No burst is continued or started by a pick
  // that avoids a path (a retransmission), while any path is ASSUMED_BAD (a failure is being
  // found out: each path it took must lose a packet, and per-packet spraying gets every one
  // a packet in one flight), or by a pick that falls back to a cooling path (every path saw
  // ECN: spraying stays per packet under congestion).
  uint32_t burst = 1;
  // EVs of each port that are active; the rest are its backup set (paper 2.4). 0: every EV
  // is active and nothing is swapped (a mapped-out EV is skipped and its plane carries less).
  uint32_t active_per_plane = 0;
  // Probes of a dead path back off: a probe still unanswered when the next one is due doubles
  // the interval, up to probe_interval << probe_backoff_limit (a dead spine is not probed at
  // the base rate for ever); an answered probe is followed by the next at probe_interval, so
  // that a path that has come back proves itself quickly. The backoff is kept until the path
  // is GOOD again. docs/engine.md, "Decisions".
  uint32_t probe_backoff_limit = 5;
  // Resurrection (paper 2.1, 3: an EV comes back "when enough probes succeed over time"):
  // ASSUMED_BAD -> GOOD once `resurrect_probes` probes in a row have been answered and the
  // first of them was answered at least `resurrect_window` earlier. An unanswered probe or a
  // second loss on the path restarts the count. With probes every 20 us (the simulator) that
  // is 50 answers in a row: a path that drops a fifth of its packets gets them 1.4e-5 of the
  // time, so it stays out (paper Figs 12-13); a healthy one is back about a window after it
  // recovered. 1 and 0: the first answer revives.
  uint32_t resurrect_probes = 32;
  Time resurrect_window = ms(1);
  // A loss on a path that delivered a trimmed header less than `trim_hold` ago is congestion
  // at a full queue (a trimmed header dropped in turn, as in a large incast), not a failure:
  // the path is not marked. A failed path delivers nothing, so its losses are marked as soon
  // as the hold ends. 0: every loss marks.
  Time trim_hold = us(50);
  // ECN-driven EV replacement (needs active_per_plane and ecn_steering): an active EV whose
  // ACK echoes carry ECN this many times in a row (no unmarked echo between them) is swapped
  // for a backup of its port, which comes back GOOD and without cool-down; the marked EV
  // waits as a backup. Backups are taken in rotation, so the EV that just left comes back
  // last. 0: off (ECN only recycles). 4, the default in every world: a run of marks is a
  // persistently hot path, one mark is noise (docs/engine.md, "decisions"). A set without
  // backups (active_per_plane 0) never swaps.
  uint32_t ecn_swap_marks = 4;
  // A NIC port that comes back (here, or at the peer: the port-state bitmap of its ACKs,
  // paper 3). Its paths that were ASSUMED_BAD when the port was seen down, or were marked
  // while it was down, lost their packets to the port: the port's own state says when it
  // works again (paper 5.2.2, Figs 9a/9b: traffic "quickly resumes" on a restored link), so
  // such a path is probed at once when the port is back and is GOOD again after this many
  // answered probes in a row, without the resurrection window. A probe it leaves unanswered
  // after the port's return, or a loss then, puts it back under resurrect_probes and
  // resurrect_window. 0: every path follows resurrect_probes and resurrect_window.
  // docs/engine.md, "Decisions". (After ecn_swap_marks: in its padding.)
  uint32_t port_return_probes = 1;
  friend bool operator==(const PathPolicy&, const PathPolicy&) = default;
};

// A path as PathSet::path() reports it (built on demand: the set stores it compactly).
struct Path {
  PathDesc desc;  // desc.ev expanded from the set's template
  ev::EvState state = ev::EvState::kGood;
  bool active = true;   // in the round-robin set (false: a backup)
  uint64_t losses = 0;  // saturates at 65535
};

struct PathStateChange {
  bool changed = false;
  ev::EvState from = ev::EvState::kGood;
  ev::EvState to = ev::EvState::kGood;
  // An active EV left the round-robin set and this backup of the same port took its slot
  // (kNone: no swap). `replaced` is the EV that left.
  int swapped_in = -1;
  int replaced = -1;
  bool held = false;  // on_loss: not marked, the path delivered a trim (PathPolicy::trim_hold)
};

class PathSet {
 public:
  static constexpr int kNone = -1;

  // Configures the set. `num_ports` bounds the port numbers; `seed` picks where the
  // round-robin starts (so QPs of one host do not march in lockstep).
  void init(std::span<const PathDesc> paths, uint32_t min_active, uint8_t num_ports,
            const PathPolicy& policy, uint64_t seed);
  // The same with a shared policy (the engine keeps one per distinct policy): `policy` must
  // already be clamped (clamped()).
  void init(std::span<const PathDesc> paths, uint32_t min_active, uint8_t num_ports,
            std::shared_ptr<const PathPolicy> policy, uint64_t seed);
  // `p` as a set uses it: burst at least 1, ecn_cooldown at most what a stamp holds.
  static PathPolicy clamped(const PathPolicy& p);

  // The next path in round-robin order that is usable now, whose port is in `port_mask`,
  // preferring paths that are not cooling down after ECN and avoiding `exclude` (a
  // retransmission's previous path) unless it is the only choice. kNone if no path can be
  // used (every port down or masked). With PathPolicy::burst > 1, the last path the
  // round-robin chose is picked again until the burst is used up, if it still qualifies.
  int pick(Time now, uint32_t port_mask, int exclude = kNone);

  // Path `i` saw ECN in an ACK echo : recycle it (skip it for a while); with
  // PathPolicy::ecn_swap_marks, the mark that completes the run swaps it for a backup of its
  // port. Returns the swap, if any (`changed` stays false: no path changed state).
  PathStateChange on_ecn(int i, Time now);
  // A packet sent on path `i` was trimmed (its NACK arrived): recycled as for ECN (a mark in
  // the run of ecn_swap_marks), and losses on the QP's paths are congestion for
  // PathPolicy::trim_hold. Returns the swap, if any.
  PathStateChange on_trim(int i, Time now);
  // An ACK echo for path `i` without ECN: its run of marks (ecn_swap_marks) ends.
  void on_unmarked(int i) {
    if (!ecn_run_) return;
    const uint16_t slot = slot_of(static_cast<size_t>(i));
    if (slot != kBackup) ecn_run_[slot] = 0;
  }
  // A packet sent on path `i` was lost: ASSUMED_BAD unless that would leave fewer than
  // min_active usable paths. Returns the state change, if any.
  PathStateChange on_loss(int i, Time now);
  // A probe reply for path `i` with `probe_id` arrived at `now`: if it answers the
  // outstanding probe, one more success; ASSUMED_BAD -> GOOD once there are enough over time
  // (PathPolicy::resurrect_probes, resurrect_window). Returns the state change, if any.
  PathStateChange on_probe_reply(int i, uint64_t probe_id, Time now);
  // A packet sent on path `i` was delivered after all (a loss detection was spurious): that
  // loss no longer counts against the path. ASSUMED_BAD -> GOOD once every loss declared on
  // it since it was marked has been undone so (the marking was reordering, not a failure)
  // and no probe went unanswered; otherwise only probes bring it back. Returns the state
  // change, if any.
  PathStateChange on_delivered(int i);
  // Controller: deny (never use) or allow path `i`. Returns the state change.
  PathStateChange set_denied(int i, bool denied);
  // Controller: path `i` becomes `desc` (OCP mrc_ctl.h 5.5 REPLACE_EV / MODIFY_FIELDS on an
  // ONLINE profile, MRC_CTL_OPT_CAP_EV_PROFILE_MODIFY_ONLINE). The entry keeps its index (the
  // profile's array index) and starts afresh in desc.state (kGood or kDenied): no ECN
  // cool-down, no probe, zeroed counters -- nothing learned about the old EV applies to the new
  // one. Errors (the set is unchanged): kInvalidArgument for an index out of range, a port
  // beyond the configured ports, or desc.state kAssumedBad (only the NIC marks paths bad).
  Status replace(int i, const PathDesc& desc);
  // A local port went down or came back (`now`: see PathPolicy::port_return_probes).
  void set_port_up(uint8_t port, bool up, Time now);
  // The peer's NIC ports that are down (the port-state bitmap of its ACKs, paper 3): a plane
  // is usable only while the port at both ends is up, so paths on these ports are skipped
  // (not marked) and not probed.
  void set_peer_ports_down(uint32_t mask, Time now);
  uint32_t peer_ports_down() const { return peer_down_mask_; }
  // Port `port` can carry this QP's packets: up here and at the peer. If the peer's bitmap
  // leaves no port up here, it is ignored: only an ACK can clear it, and none comes back
  // while nothing is sent (a stale bitmap must not stop the QP for good).
  bool port_up(uint8_t port) const { return (usable_ports() >> port) & 1; }
  uint32_t usable_ports() const {
    const uint32_t both = port_up_mask_ & ~peer_down_mask_;
    return both ? both : port_up_mask_;
  }

  // Earliest time a probe is due (kNever if none).
  Time next_probe_time() const { return faults_ ? faults_next_probe_time() : kNever; }
  // A path whose probe is due at `now` on an up port in `port_mask`: records a new probe id
  // for it and schedules the next one (backed off if the previous probe went unanswered:
  // then *previous_unanswered is set). kNone if none is due.
  int take_due_probe(Time now, uint32_t port_mask, uint64_t* probe_id,
                     bool* previous_unanswered = nullptr);
  // No probe before `until` (the NIC's probe budget is spent: QpEnv::take_probe_token).
  void defer_probes(Time until);

  // Active paths usable for traffic: GOOD on an up port.
  uint32_t usable_count() const { return usable_; }
  uint32_t min_active() const { return min_active_; }
  const PathPolicy& policy() const { return *policy_; }
  size_t size() const { return n_; }
  // Path `i` as configured and as it stands (expands its EV: not for per-packet use).
  Path path(int i) const;
  // Per-packet accessors.
  uint8_t port_of(int i) const {
    const auto k = static_cast<size_t>(i);
    return ports_ ? ports_[k] : static_cast<uint8_t>((tmpl_.port0 + k) % num_ports_);
  }
  ev::EvState state_of(int i) const { return state_at(static_cast<size_t>(i)); }
  bool active(int i) const { return slot_of(static_cast<size_t>(i)) != kBackup; }
  // The expanded EV of path `i`: the template with the path's compact value written in.
  ev::ExpandedEv ev(int i) const;
  // Swaps of an active EV for a backup since init (mapped out, or ECN: ecn_swaps()).
  uint64_t swaps() const { return swaps_; }
  // Of those, swaps of a GOOD EV after a run of ECN marks (PathPolicy::ecn_swap_marks).
  uint64_t ecn_swaps() const { return ecn_swaps_; }
  // Bytes of the per-path arrays (capacities).
  size_t heap_bytes() const;
  // Gives back what the set holds only while its QP works (the QP calls it when its traffic
  // has drained): the ECN cool-down stamps once every cool-down has run out (as pick() does)
  // and the runs of ECN marks once none is open (no array stands for every run at 0).
  // Nothing a later call sees changes.
  void release_idle(Time now);

 private:
  static constexpr uint16_t kBackup = 0xFFFF;  // slot_of_ of a path outside the active set

  struct LossCount {
    uint16_t index = 0;
    uint16_t losses = 0;  // saturates at 65535
  };
  // The expanded EV of every path is `base` with bytes [offset, offset + 4) replaced by the
  // path's value, big-endian (paper 2.3: a per-QP template specialised per packet). The window
  // ends at the last byte in which EVs differ, so that values that differ in two bytes (a
  // 16-bit uSID or UDP source port) fit 16 bits per path when they are stored. While `values_`
  // is empty, path i's value is first + (i / num_ports) * step (a generated profile: the same
  // value on every port, counting up); while `ports_` is empty its port is (port0 + i) %
  // num_ports.
  struct EvTemplate {
    ev::ExpandedEv base{};
    uint8_t offset = 0;
    bool table = false;  // EVs differ in more than one 4-byte window: table_ holds them
    uint8_t port0 = 0;
    uint32_t first = 0;
    uint32_t step = 0;
  };
  struct Probe {
    uint16_t index = 0;
    Time next_probe_at = 0;
    uint64_t probe_id = 0;  // outstanding probe (0: none)
    Time probe_sent_at = 0;
    Time streak_start = 0;      // when the first of the answered probes in a row was answered
    uint32_t probe_streak = 0;  // probes answered in a row
    uint8_t probe_backoff = 0;  // doublings of probe_interval (PathPolicy::probe_backoff_limit)
    bool probe_failed = false;  // a probe went unanswered since the path was marked
    bool port_fault = false;    // its port was down (PathPolicy::port_return_probes)
    // Losses declared on it since it was marked and not undone by a late delivery.
    uint16_t losses_standing = 1;
  };

  bool usable_active(int i) const {
    const auto k = static_cast<size_t>(i);
    return slot_of(k) != kBackup && state_at(k) == ev::EvState::kGood && port_up(port_of(i));
  }
  // Round-robin position of path i (kBackup: none) and path at position pos: while order_ is
  // empty, position k holds path k and the paths from n_active_ on are backups.
  uint16_t slot_of(size_t i) const {
    return slot_of_ ? slot_of_[i] : (i < n_active_ ? static_cast<uint16_t>(i) : kBackup);
  }
  int path_at(size_t pos) const { return order_ ? order_[pos] : static_cast<int>(pos); }
  void recount();
  // usable_ports() changed from `before`: PathPolicy::port_return_probes.
  void on_usable_ports(uint32_t before, Time now);
  void set_state(int i, ev::EvState s);
  Probe* probe_of(int i);
  void start_probing(int i, Time now);
  void stop_probing(int i);
  // Rebuilds the round-robin order from the paths whose `active` flag is set (interleaved by
  // port), keeping each path's ECN cool-down; the cursor stays where it is (clamped).
  void build_order(const std::vector<uint8_t>& active);
  // Stores order_ and slot_of_ (a swap is about to make the order irregular).
  void store_order();
  // Writes `ev` as path i's compact value (switching to a table if it does not fit the
  // template).
  void store_ev(int i, const ev::ExpandedEv& ev);
  uint32_t regular_value(size_t i) const {
    return tmpl_.first + static_cast<uint32_t>(i / num_ports_) * tmpl_.step;
  }
  // Stored values are kept as their difference (XOR) from the first path's, in as many
  // bytes as the widest difference needs: the window ends at the last byte in which the EVs
  // differ, so EVs that differ only in its last byte (a spine uSID of a fabric with up to 256
  // spines: the simulator's SRv6 EVs) store one byte a path, in its last two bytes (a 16-bit
  // uSID or UDP source port) two, whatever the window's constant upper bytes hold.
  uint32_t value_of(size_t i) const {
    if (!values_) return regular_value(i);
    return tmpl_.first ^
           (values_[i] | (value_mid_ ? static_cast<uint32_t>(value_mid_[i]) << 8 : 0u) |
            (value_hi_ ? static_cast<uint32_t>(value_hi_[i]) << 16 : 0u));
  }
  void set_value(size_t i, uint32_t v);
  void set_port(size_t i, uint8_t port);
  uint16_t losses_of(size_t i) const;
  // A GOOD backup on `port` (scanning from after `after`), or kNone.
  int find_backup(uint8_t port, int after) const;
  // Active path `i` saw ECN ecn_swap_marks times in a row: the next GOOD backup of its port
  // in rotation (backup_cursor_) takes its slot. Returns the backup's index or kNone.
  int swap_congested(int i);
  // Active path `i` was mapped out: a GOOD backup of its port takes its slot. Returns the
  // backup's index or kNone.
  int swap_out(int i);
  // Backup `j` became GOOD: it takes the slot of an active path of its port that is not
  // GOOD, if there is one. Returns the index it replaced or kNone.
  int swap_in(int j);
  void exchange(int out, int in);

  // The ECN cool-down of the path at a round-robin position is kept as picoseconds after
  // cool_epoch_ in 32 bits (0: not cooling), exact for cool-downs up to kMaxCooldown (4.29
  // ms; PathPolicy::ecn_cooldown is clamped to it); cool_epoch_ moves forward when a new stamp
  // would not fit (set_cool). The stamps exist only from a path's first ECN mark until every
  // cool-down has run out (cool_end_).
  static constexpr Time kMaxCooldown = UINT32_MAX;
  bool cooling(size_t pos, Time now) const {
    return cool_ && cool_[pos] != 0 && cool_epoch_ + cool_[pos] > now;
  }
  // Position `pos` cools until `until` (> now).
  void set_cool(uint16_t pos, Time now, Time until);
  void clear_cool(size_t pos) {
    if (cool_) cool_[pos] = 0;
  }

  // Per-path arrays hold n_ entries, per-position arrays n_active_ (their sizes are these).
  uint32_t n_ = 0;
  uint32_t n_active_ = 0;
  // Path states, 2 bits each (ev::EvState has three values; paper 2.1: "a few bits of state
  // about path health"), four to a byte.
  std::unique_ptr<uint8_t[]> states_;
  size_t state_bytes() const { return (size_t{n_} + 3) / 4; }
  ev::EvState state_at(size_t k) const {
    return static_cast<ev::EvState>((states_[k >> 2] >> ((k & 3) * 2)) & 3);
  }
  void put_state(size_t k, ev::EvState s) {
    const unsigned shift = (k & 3) * 2;
    states_[k >> 2] = static_cast<uint8_t>((states_[k >> 2] & ~(3u << shift)) |
                                           (static_cast<unsigned>(s) << shift));
  }
  std::unique_ptr<uint8_t[]> ports_;         // null while ports are regular (EvTemplate)
  std::unique_ptr<uint8_t[]> values_;        // bits 0-7; null while values are regular
  std::unique_ptr<uint8_t[]> value_mid_;     // bits 8-15; null while every stored value fits 8 bits
  std::unique_ptr<uint16_t[]> value_hi_;     // bits 16-31; null while every one fits 16 bits
  std::unique_ptr<ev::ExpandedEv[]> table_;  // only when the template cannot describe the EVs
  std::unique_ptr<uint16_t[]> order_;        // path per position (null: position k holds path k)
  std::unique_ptr<uint16_t[]> slot_of_;      // position per path, kBackup (null with order_)
  std::unique_ptr<uint32_t[]> cool_;         // per position (null: nothing cooling)
  // Per position: ECN echoes in a row (PathPolicy::ecn_swap_marks), saturating. Allocated
  // only when ECN swaps are on (a backup set and ecn_swap_marks > 0), at the first ECN mark;
  // null while every run is 0 (release_idle).
  std::unique_ptr<uint8_t[]> ecn_run_;
  // What a QP learns only from losses: the paths that lost packets and the ASSUMED_BAD paths
  // being probed (both sparse). Made at the first loss: most QPs never lose a packet.
  struct Faults {
    std::vector<LossCount> losses;
    std::vector<Probe> assumed_bad;
  };
  // next_probe_time of a set with paths out of use (the common case, none, is inline: the
  // engine asks for every QP's deadline a few times per packet).
  Time faults_next_probe_time() const;
  std::unique_ptr<Faults> faults_;
  Faults& faults() {
    if (!faults_) faults_ = std::make_unique<Faults>();
    return *faults_;
  }
  bool any_assumed_bad() const { return faults_ && !faults_->assumed_bad.empty(); }
  EvTemplate tmpl_;
  // (Here, in the template's padding.)
  uint16_t backup_cursor_ = 0;  // where the next ECN swap looks for a backup (rotation)
  uint8_t num_ports_ = 0;
  Time cool_epoch_ = 0;  // cool_ counts from here
  Time cool_end_ = 0;    // every cool-down ends by then
  // Swap counts: 32 bits (a swap takes a loss or a run of ECN marks; 4 G of them on one QP
  // is beyond any run), reported as 64 (swaps(), ecn_swaps()).
  uint32_t swaps_ = 0;
  uint32_t ecn_swaps_ = 0;
  uint64_t probe_seq_ = 0;
  // PathPolicy::trim_hold, per QP rather than per path (a trim at the last hop, the incast
  // case, concerns every path; 8 bytes a QP instead of a per-path stamp).
  Time trim_hold_until_ = 0;
  uint32_t cursor_ = 0;
  int burst_path_ = kNone;   // the round-robin's last choice (PathPolicy::burst)
  uint32_t burst_left_ = 0;  // picks it may still take
  uint32_t usable_ = 0;
  uint32_t min_active_ = 0;
  uint32_t port_up_mask_ = 0;
  uint32_t peer_down_mask_ = 0;
  std::shared_ptr<const PathPolicy> policy_;
};

}  // namespace mrc
