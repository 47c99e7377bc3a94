// A calendar queue of simulation events: a ring of time buckets (each a small binary heap)
// over a horizon, plus a heap for events beyond it. Almost every event of a packet
// simulation lands within a few microseconds of `now`, so push and pop are O(1) with a
// small constant; the far-future heap (timeouts) is touched rarely.
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

  bool before(const SimEvent& o) const { return time < o.time || (time == o.time && key < o.key); }
};

class EventQueue {
 public:
  // `bucket_ps`: width of one bucket (power of two); `buckets`: ring size (power of two).
  explicit EventQueue(Time bucket_ps = 1 << 13, uint32_t buckets = 1 << 14);

  void push(const SimEvent& e);
  bool empty() const { return size_ == 0; }
  size_t size() const { return size_; }
  // Time of the earliest event (kNever when empty). Not const: may advance the cursor.
  Time peek_time();
  // Removes and returns the earliest event. Precondition: !empty().
  SimEvent pop();

 private:
  bool in_horizon(Time t) const { return t < base_ + horizon_; }
  void advance();  // moves the cursor to the next non-empty bucket (pulling far events in)
  static void heap_push(std::vector<SimEvent>& h, const SimEvent& e);
  static SimEvent heap_pop(std::vector<SimEvent>& h);

  Time width_;
  uint32_t shift_;
  uint32_t mask_;
  Time horizon_;
  Time base_ = 0;         // start time of the cursor bucket
  uint32_t cursor_ = 0;   // bucket index holding [base_, base_ + width_)
  std::vector<std::vector<SimEvent>> buckets_;
  std::vector<SimEvent> far_;  // heap of events at or beyond base_ + horizon_
  size_t size_ = 0;
  size_t near_size_ = 0;
};

}  // namespace mrc::sim
