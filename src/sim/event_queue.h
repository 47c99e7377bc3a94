// A calendar queue of simulation events: a ring of time buckets over a horizon, plus a heap
// for events beyond it. A bucket is an unsorted vector until the cursor reaches it; then it
// is sorted once - a two-pass radix sort on the time within the bucket, then an insertion
// pass that orders equal times by key - and consumed from the front (events that arrive for
// the open bucket meanwhile go to a small side heap). Almost every event of a packet
// simulation lands within a few microseconds of `now`, so a push is an append and a pop is
// amortized O(1), with contiguous memory; the far-future heap (timeouts) is rarely used.
//
// Events are ordered by (time, key). The key is (origin partition << 48 | origin sequence):
// an order that does not depend on which partition inserted first, so a partitioned
// (parallel) run can reproduce a sequential run exactly.
#pragma once

#include <cstdint>
#include <vector>

#include "common/types.h"

namespace mrc::sim {

struct SimEvent {
  Time time = 0;
  uint64_t key = 0;
  uint32_t type = 0;
  uint32_t a = 0;
  uint32_t b = 0;
  uint32_t c = 0;

  // One 128-bit comparison: branch-free, which matters when a bucket of ~1000 events with
  // near-random order is sorted.
  bool before(const SimEvent& o) const {
    return ((static_cast<unsigned __int128>(time) << 64) | key) <
           ((static_cast<unsigned __int128>(o.time) << 64) | o.key);
  }
};

class EventQueue {
 public:
  // `bucket_ps`: width of one bucket (rounded up to a power of two); `buckets`: ring size
  // (rounded up to a power of two). The horizon (width x buckets) should cover the events
  // of a packet's next hop; a smaller ring stays in the cache (see Simulation's choice).
  explicit EventQueue(Time bucket_ps = 1 << 13, uint32_t buckets = 1 << 8);

  void push(const SimEvent& e);
  bool empty() const { return size_ == 0; }
  size_t size() const { return size_; }
  // Time of the earliest event (kNever when empty). Not const: may advance the cursor.
  Time peek_time();
  // The earliest event when it is known without opening a bucket (else nullptr): for
  // prefetching what the next event will touch.
  const SimEvent* peek_ready() const {
    if (open_done() && side_.empty()) return nullptr;
    return &front();
  }
  // The event `i` places after peek_ready()'s in the open bucket, ignoring events pushed into
  // it since it opened (nullptr past its end): a guess at what comes soon, for prefetching.
  const SimEvent* peek_ahead(size_t i) const {
    return open_pos_ + i < open_.size() ? &open_[open_pos_ + i] : nullptr;
  }
  // Removes and returns the earliest event. Precondition: !empty().
  SimEvent pop();
  // Bytes the queue holds for events (the capacity of its buffers), for memory accounting.
  size_t buffer_bytes() const;

 private:
  bool in_horizon(Time t) const { return t < base_ + horizon_; }
  void place(const SimEvent& e);  // into its bucket (or the side heap of the open bucket)
  void advance();                 // opens the next non-empty bucket (pulling far events in)
  void sort_open();               // sorts open_ by (time, key)
  bool open_done() const { return open_pos_ == open_.size(); }
  const SimEvent& front() const;

  Time width_;
  uint32_t shift_;
  uint32_t mask_;
  Time horizon_;
  Time base_ = 0;        // start time of the cursor bucket
  uint32_t cursor_ = 0;  // bucket index holding [base_, base_ + width_)
  std::vector<std::vector<SimEvent>> buckets_;
  std::vector<SimEvent> open_;  // the cursor bucket, sorted, consumed from open_pos_
  // A bucket's buffer of up to this many events stays with it when the cursor passes
  // (advance()); larger ones are released there.
  static constexpr size_t kKeptEvents = 64;
  size_t open_pos_ = 0;
  std::vector<SimEvent> scratch_;  // radix sort buffer
  std::vector<SimEvent> side_;     // heap: events pushed into the cursor bucket after it opened
  std::vector<SimEvent> far_;      // heap of events at or beyond base_ + horizon_
  size_t size_ = 0;
  size_t near_size_ = 0;  // events in buckets_, open_ and side_
};

}  // namespace mrc::sim
