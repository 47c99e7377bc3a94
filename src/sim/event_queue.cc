#include "sim/event_queue.h"

#include <algorithm>
#include <bit>

namespace mrc::sim {

namespace {
struct Later {
  bool operator()(const SimEvent& x, const SimEvent& y) const { return y.before(x); }
};
}  // namespace

EventQueue::EventQueue(Time bucket_ps, uint32_t buckets)
    : width_(std::bit_ceil(bucket_ps)),
      shift_(static_cast<uint32_t>(std::countr_zero(width_))),
      mask_(std::bit_ceil(buckets) - 1),
      horizon_(width_ * std::bit_ceil(buckets)),
      buckets_(std::bit_ceil(buckets)) {}

void EventQueue::heap_push(std::vector<SimEvent>& h, const SimEvent& e) {
  h.push_back(e);
  std::push_heap(h.begin(), h.end(), Later{});
}

SimEvent EventQueue::heap_pop(std::vector<SimEvent>& h) {
  std::pop_heap(h.begin(), h.end(), Later{});
  SimEvent e = h.back();
  h.pop_back();
  return e;
}

void EventQueue::push(const SimEvent& e) {
  ++size_;
  // An event in the past of the cursor (allowed: same-time events) goes to the cursor bucket.
  const Time t = e.time < base_ ? base_ : e.time;
  if (!in_horizon(t)) {
    heap_push(far_, e);
    return;
  }
  const uint32_t idx = static_cast<uint32_t>((t >> shift_) & mask_);
  heap_push(buckets_[idx], e);
  ++near_size_;
}

void EventQueue::advance() {
  // Find the next non-empty bucket; when the near ring is empty, jump to the far heap.
  while (true) {
    if (!buckets_[cursor_].empty()) return;
    if (near_size_ == 0) {
      if (far_.empty()) return;
      // Jump the cursor to the bucket of the earliest far event.
      base_ = (far_.front().time >> shift_) << shift_;
      cursor_ = static_cast<uint32_t>((base_ >> shift_) & mask_);
    } else {
      cursor_ = (cursor_ + 1) & mask_;
      base_ += width_;
    }
    // Pull far events that now fall inside the horizon into their buckets.
    while (!far_.empty() && in_horizon(far_.front().time)) {
      const SimEvent e = heap_pop(far_);
      const Time t = e.time < base_ ? base_ : e.time;
      heap_push(buckets_[static_cast<uint32_t>((t >> shift_) & mask_)], e);
      ++near_size_;
    }
  }
}

Time EventQueue::peek_time() {
  if (size_ == 0) return kNever;
  advance();
  return buckets_[cursor_].front().time;
}

SimEvent EventQueue::pop() {
  advance();
  --size_;
  --near_size_;
  return heap_pop(buckets_[cursor_]);
}

}  // namespace mrc::sim
