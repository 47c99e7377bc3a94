#include "transport/requester.h"

#include <algorithm>

#include "transport/psn.h"

namespace mrc {

uint32_t Requester::outstanding_psns() const {
  return static_cast<uint32_t>(psn_diff(next_psn, snd_una));
}

bool Requester::psn_in_flight_range(uint32_t psn) const {
  return psn_diff(psn, snd_una) >= 0 && psn_diff(next_psn, psn) > 0;
}

bool Requester::record_current(uint32_t seq) const {
  const LossDetector::Record& r = loss->at(seq);
  if (!psn_in_flight_range(r.psn)) return false;
  const TxPkt& p = pkts[r.psn & pkt_mask];
  return p.state == PktState::kInflight && p.rec == seq;
}

// Doubles the PSN ring, moving the live PSNs [snd_una, next_psn) to their slots in the
// bigger ring. Only the live range is copied: slots outside it are never read before they
// are written (every reader checks the range first: psn_in_flight_range, record_current).
void Requester::grow_pkt_ring() {
  Array<TxPkt> old(2 * (static_cast<size_t>(pkt_mask) + 1), TxPkt{});
  old.swap(pkts);
  const uint32_t old_mask = pkt_mask;
  pkt_mask = 2 * pkt_mask + 1;
  for (uint32_t psn = snd_una; psn != next_psn; psn = psn_add(psn, 1))
    pkts[psn & pkt_mask] = old[psn & old_mask];
}

// Only WRs from sq_head on are ever read again: a completed WR's packets are all
// acknowledged, so nothing resends them.
void Requester::grow_sq(uint32_t sq_depth) {
  const size_t n = std::min<size_t>(2 * sq.size(), sq_depth);
  Array<SendWr> old(n);
  old.swap(sq);
  for (uint64_t s = sq_head; s != sq_tail; ++s)
    sq[s % n] = old[s % old.size()];
}

void Requester::advance_una() {
  while (snd_una != next_psn && pkt(snd_una).state == PktState::kAcked) {
    pkt(snd_una).state = PktState::kFree;
    snd_una = psn_add(snd_una, 1);
  }
  if (psn_lt(gbn_next, snd_una)) gbn_next = snd_una;
}

// The retransmission queue may hold PSNs acknowledged after they were queued (skipped when
// popped). If it fills up with such entries, keep only the ones still waiting.
void Requester::compact_retx() {
  retx.remove_if([this](uint32_t psn) {
    return !psn_in_flight_range(psn) || pkt(psn).state != PktState::kLost;
  });
}

// Stale entries of the retransmission queue (PSNs acknowledged after they were queued) go
// with the rings: popping skips them anyway.
void Requester::release_rings() {
  sq.clear();
  pkts.clear();
  pkt_mask = 0;
  retx = Ring<uint32_t>();
  if (loss) loss->release();
}

}  // namespace mrc
