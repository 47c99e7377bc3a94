// The reverse EV set of a QP: the paths its control packets (ACKs, SACKs, trim NACKs) take
// back to the peer that sends it data (paper 2.4, "Reverse Paths").
//
// Paper 2.4: "keep a small reverse EV set for control packets, with at least one EV per
// plane. Each RTT that the QP is active inbound but generates no outbound traffic, the
// receiver sends an EV probe packet using a randomly chosen EV. If the probe is acknowledged,
// the reverse EV for that plane is set to the probe's EV. If data traffic is sent, the reverse
// EV is updated from data SACKs instead of needing EV probes." The reverse of each data
// packet's own path is not used: it "won't always work" (a link may fail in one direction
// only), and nothing would tell the responder that it does not.
//
// The set holds `evs_per_plane` slots per NIC port, slot s on port s % ports (so consecutive
// slots alternate planes). A slot names one of the QP's own paths (its EVs towards the peer:
// PathSet) or is empty. Control packets take the live slots in round-robin order.
// - Filled first from the data that arrives: until the first probe, an empty slot takes the
//   path index a data packet came by on its port (the reverse of a path that works one way,
//   in a symmetric configuration the same spine: the best guess while nothing else is known;
//   a random choice would send ACKs onto a dead spine the data already avoids). Later only
//   answered probes fill a slot, so the set holds EVs known to work (paper 2.4). With no live
//   slot, the caller falls back to the reverse of the data packet's path.
// - Kept fresh by probes while the QP receives data and has none outstanding: every probe
//   interval one probe, answered by the peer as any probe (on the same path index, so the
//   round trip crosses the same spine both ways). An empty slot is probed on a random GOOD
//   path of its port that is not in the set, and filled with it when the answer comes; a live
//   slot is probed on its own path and emptied (mapped out) when the answer has not come by
//   the next probe. Refills and verifications take turns, each going round the slots.
// - A duplicate data packet (the peer resent what was acknowledged: its ACK was lost) makes
//   the next probe due at once, as does a resend that ends an inbound silence (Qp).
// - A path the QP's own data found dead (PathSet marks it ASSUMED_BAD or DENIED: the SACK
//   route) is replaced at once by a random GOOD active path of the same port.
// docs/engine.md, "Reverse path" and "Decisions".
//
// Memory: 2 bytes a slot, allocated at first use (a QP that never acknowledges holds none),
// and 32 bytes of fixed state.
#pragma once

#include <algorithm>
#include <concepts>
#include <cstdint>
#include <memory>

#include "common/types.h"
#include "transport/path_set.h"

namespace mrc {

// A slot's path changed. `from` / `to`: the path that left / came in (kNone: none).
struct ReverseChange {
  bool changed = false;
  int slot = -1;
  int from = -1;
  int to = -1;
};

class ReversePathSet {
 public:
  static constexpr int kNone = -1;
  // Probe ids of reverse probes carry this bit (PathSet's ids count up from 1 and never
  // reach it): the answer tells which set asked.
  static constexpr uint64_t kProbeTag = 1ull << 63;

  // `evs_per_plane` slots per port (0: no set; control packets then take the reverse of the
  // path their data packet came by). The calls that choose EVs at random take the QP's seed.
  void configure(uint8_t evs_per_plane, uint8_t num_ports);
  bool enabled() const { return per_plane_ != 0; }
  uint32_t slots() const { return static_cast<uint32_t>(per_plane_) * ports_; }

  // The path for the next control packet: the next live slot in round-robin order whose port
  // is in `mask` and whose path `paths` lets carry traffic (not DENIED or ASSUMED_BAD, its
  // port up at both ends), preferring one other than `avoid` (the tail-ACK repeat: not the
  // way the last ACK went). kNone when no live slot qualifies.
  int pick(uint32_t mask, const PathSet& paths, int avoid = kNone);
  // Whether some live slot could carry a control packet on some port (pick() with every
  // port); false: the caller falls back to another choice.
  bool any_live(const PathSet& paths) const;

  // A data packet arrived on path `i` (its index in the peer's set, the same in ours): before
  // the first probe, an empty slot of its port takes it.
  void on_data_path(int i, const PathSet& paths);

  // Path `i` of the QP's set was marked ASSUMED_BAD or DENIED (or replaced by the
  // controller): a slot holding it takes a random GOOD active path of its port instead.
  ReverseChange on_path_unusable(int i, const PathSet& paths, uint64_t seed);

  // A data packet arrived: the QP is active inbound, so probes go on (one per interval).
  // Returns true if this scheduled the next probe: the arrival started an active spell (the
  // caller re-arms its timer).
  // `interval()` (the probe interval) is asked only when a spell starts; inline: every data
  // packet arrives through here.
  template <std::invocable Interval>
  bool on_inbound(Time now, Interval interval) {
    if (!enabled()) return false;
    if (next_probe_at_ != kNever) {
      inbound_ = true;
      return false;
    }
    start_spell(now, interval());
    return true;
  }
  // The peer resent data this QP had acknowledged (an ACK was lost), or resent anything after
  // an inbound silence (its ACK timeout fired). The next probe goes at once, unless one is
  // still outstanding.
  void on_ack_loss(Time now);
  // When the next probe is due (kNever: none scheduled).
  Time next_probe_time() const { return next_probe_at_; }
  // The NIC's probe budget had no token: the due probe waits until `at` (the next token), so
  // the QP's timer does not fire again at once for a probe that cannot go.
  void defer_probe(Time at) { next_probe_at_ = std::max(next_probe_at_, at); }

  struct Probe {
    int path = kNone;  // kNone: nothing to probe, or its port is not in the mask (yet)
    uint64_t id = 0;
    bool previous_unanswered = false;
    ReverseChange mapped_out;  // a live slot whose probe went unanswered was emptied
  };
  // The probe due at `now`. Its slot comes first (verifications of live slots and refills of
  // empty ones take turns, each round the slots in order); when that slot's port is not in
  // `mask` (busy) nothing goes and the probe stays due, so a busy port does not hand its turn
  // to another slot, unless the port has been busy for an interval past the due time (then a
  // slot on a port in `mask` goes). With nothing to probe at all the next try is an interval
  // later. `outbound` (the QP has data outstanding: its SACKs keep the paths' states) skips
  // the probe and only schedules the next. Inbound silence for a whole interval stops probing
  // until data arrives again.
  Probe take_probe(Time now, uint32_t mask, const PathSet& paths, Time interval, bool outbound,
                   uint64_t seed);
  // A probe reply with `probe_id` (kProbeTag set) for path `i`. Fills the probed empty slot
  // with `i`, or confirms the probed live slot.
  ReverseChange on_probe_reply(uint64_t probe_id, int i);

  // Path of slot `s` (kNone: empty or not yet filled).
  int slot_path(uint32_t s) const;
  uint8_t slot_port(uint32_t s) const { return static_cast<uint8_t>(s % ports_); }
  size_t heap_bytes() const { return slots_ ? slots() * sizeof(uint16_t) : 0; }

 private:
  // An arrival with no spell running: the next probe is due `interval` from `now`.
  void start_spell(Time now, Time interval);
  static constexpr uint16_t kEmpty = 0xFFFF;

  void allocate();
  bool in_set(int i) const;
  // A random path of `port` that `paths` rates GOOD (active only if `active_only`), not in the
  // set; kNone if none.
  int random_path(uint8_t port, const PathSet& paths, bool active_only, uint64_t seed);
  uint64_t next_random(uint64_t seed);
  bool usable(int i, const PathSet& paths) const;

  std::unique_ptr<uint16_t[]> slots_;  // path index per slot, kEmpty; null until first use
  Time next_probe_at_ = kNever;
  uint32_t probe_seq_ = 0;
  uint16_t probe_path_ = kEmpty;  // path of the outstanding probe
  uint8_t draws_ = 0;             // random draws since configure (with the seed and probe_seq_)
  uint8_t probe_slot_ = 0;
  uint8_t per_plane_ = 0;
  uint8_t ports_ = 1;
  uint8_t cursor_ = 0;         // round-robin position of pick()
  uint8_t probe_cursor_ = 0;   // next live slot to verify
  uint8_t refill_cursor_ = 0;  // where the next refill looks for an empty slot
  bool probe_outstanding_ = false;
  bool inbound_ = false;      // data arrived since the last probe was taken
  bool verify_next_ = false;  // the next probe
                              // verifies a live slot (else refills an empty one)
};

}  // namespace mrc
