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

void EventQueue::place(const SimEvent& e) {
  // An event in the cursor bucket's past (same-time work) belongs to the cursor bucket.
  const Time t = e.time < base_ ? base_ : e.time;
  const uint32_t idx = static_cast<uint32_t>((t >> shift_) & mask_);
  if (idx == cursor_ && t < base_ + width_ && (!open_.empty() || !side_.empty())) {
    side_.push_back(e);
    std::push_heap(side_.begin(), side_.end(), Later{});
  } else {
    buckets_[idx].push_back(e);
  }
  ++near_size_;
}

void EventQueue::push(const SimEvent& e) {
  ++size_;
  if (!in_horizon(e.time < base_ ? base_ : e.time)) {
    far_.push_back(e);
    std::push_heap(far_.begin(), far_.end(), Later{});
    return;
  }
  place(e);
}

void EventQueue::advance() {
  if (!open_.empty() || !side_.empty()) return;
  while (true) {
    std::vector<SimEvent>& b = buckets_[cursor_];
    if (!b.empty()) {
      // Open it: sort latest-first so the earliest is at the back.
      open_.swap(b);
      // `b` now holds the previous open bucket's (empty) buffer. Buckets would otherwise
      // keep the high-water capacity of a burst forever: thousands of buckets times a burst
      // is gigabytes. Keep small buffers, give big ones back.
      if (b.capacity() > 256) std::vector<SimEvent>().swap(b);
      std::sort(open_.begin(), open_.end(),
                [](const SimEvent& x, const SimEvent& y) { return y.before(x); });
      return;
    }
    if (near_size_ == 0) {
      if (far_.empty()) return;
      base_ = (far_.front().time >> shift_) << shift_;
      cursor_ = static_cast<uint32_t>((base_ >> shift_) & mask_);
    } else {
      cursor_ = (cursor_ + 1) & mask_;
      base_ += width_;
    }
    while (!far_.empty() && in_horizon(far_.front().time)) {
      std::pop_heap(far_.begin(), far_.end(), Later{});
      const SimEvent e = far_.back();
      far_.pop_back();
      place(e);
    }
  }
}

const SimEvent& EventQueue::front() const {
  if (side_.empty()) return open_.back();
  if (open_.empty()) return side_.front();
  return side_.front().before(open_.back()) ? side_.front() : open_.back();
}

Time EventQueue::peek_time() {
  if (size_ == 0) return kNever;
  advance();
  return front().time;
}

SimEvent EventQueue::pop() {
  advance();
  --size_;
  --near_size_;
  if (!side_.empty() && (open_.empty() || side_.front().before(open_.back()))) {
    std::pop_heap(side_.begin(), side_.end(), Later{});
    const SimEvent e = side_.back();
    side_.pop_back();
    return e;
  }
  const SimEvent e = open_.back();
  open_.pop_back();
  return e;
}

}  // namespace mrc::sim
