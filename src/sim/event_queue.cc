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
  if (idx == cursor_ && t < base_ + width_ && (!open_done() || !side_.empty())) {
    side_.push_back(e);
    std::push_heap(side_.begin(), side_.end(), Later{});
  } else {
    std::vector<SimEvent>& b = buckets_[idx];
    // A bucket without a buffer (advance() released it) starts at 16 events, not at one.
    if (b.size() == b.capacity()) [[unlikely]]
      b.reserve(std::max<size_t>(2 * b.capacity(), 16));
    b.push_back(e);
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

void EventQueue::sort_open() {
  const size_t n = open_.size();
  // Two stable counting passes over the event's offset in the bucket (its low `shift_` time
  // bits; an event clamped into the bucket from its past counts as offset 0), low digit
  // first. Buckets wider than 2^14 ps fall back to a comparison sort.
  if (n > 16 && shift_ <= 14) {
    const uint32_t low_bits = shift_ / 2;
    const Time low_mask = (Time{1} << low_bits) - 1;
    uint32_t low[129] = {}, high[129] = {};
    auto offset = [&](const SimEvent& e) { return e.time < base_ ? Time{0} : e.time - base_; };
    for (const SimEvent& e : open_) {
      const Time o = offset(e);
      ++low[(o & low_mask) + 1];
      ++high[(o >> low_bits) + 1];
    }
    for (uint32_t i = 1; i < 129; ++i) {
      low[i] += low[i - 1];
      high[i] += high[i - 1];
    }
    scratch_.resize(n);
    for (const SimEvent& e : open_)
      scratch_[low[offset(e) & low_mask]++] = e;
    for (const SimEvent& e : scratch_)
      open_[high[offset(e) >> low_bits]++] = e;
    // Within one offset the order is still the order of insertion: equal times must go in
    // key order, and events clamped to offset 0 in time order. Sort only the groups that
    // need it. Insertion sort here was quadratic: a synchronized start puts thousands of
    // events from several partitions at one time (benchmark B: 33 % of the run).
    size_t begin = 0;
    while (begin < n) {
      const Time o = offset(open_[begin]);
      size_t end = begin + 1;
      bool sorted = true;
      for (; end < n && offset(open_[end]) == o; ++end) {
        if (open_[end].before(open_[end - 1])) sorted = false;
      }
      if (!sorted) {
        std::sort(open_.begin() + static_cast<std::ptrdiff_t>(begin),
                  open_.begin() + static_cast<std::ptrdiff_t>(end),
                  [](const SimEvent& x, const SimEvent& y) { return x.before(y); });
      }
      begin = end;
    }
    return;
  }
  // Small buckets (nearly always in order already), or buckets too wide for the counting
  // passes.
  if (std::is_sorted(open_.begin(), open_.end(),
                     [](const SimEvent& x, const SimEvent& y) { return x.before(y); })) {
    return;
  }
  std::sort(open_.begin(), open_.end(),
            [](const SimEvent& x, const SimEvent& y) { return x.before(y); });
}

void EventQueue::advance() {
  if (!open_done() || !side_.empty()) return;
  while (true) {
    std::vector<SimEvent>& b = buckets_[cursor_];
    if (!b.empty()) {
      // Open it: sort by (time, key) and consume from the front.
      open_.clear();
      open_pos_ = 0;
      open_.swap(b);
      // `b` now holds the previous open bucket's (empty) buffer. It is kept only when small:
      // `b` is now the bucket a whole horizon ahead, which fills only as the cursor nears
      // it, so a buffer sized for a full bucket would sit mostly empty in every bucket of
      // the ring (benchmark B at 8,192 GPUs, 32 blocks of 256 buckets: 250 MB of buffers
      // holding 24 MB of events, the blocks layout's extra memory against the planes
      // layout). A bucket grows from 16 events by doubling; its buffer goes with it to the
      // cursor and is released there.
      if (b.capacity() > kKeptEvents) std::vector<SimEvent>().swap(b);
      sort_open();
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
  if (side_.empty()) return open_[open_pos_];
  if (open_done()) return side_.front();
  return side_.front().before(open_[open_pos_]) ? side_.front() : open_[open_pos_];
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
  if (!side_.empty() && (open_done() || side_.front().before(open_[open_pos_]))) {
    std::pop_heap(side_.begin(), side_.end(), Later{});
    const SimEvent e = side_.back();
    side_.pop_back();
    return e;
  }
  return open_[open_pos_++];
}

size_t EventQueue::buffer_bytes() const {
  size_t events = open_.capacity() + scratch_.capacity() + side_.capacity() + far_.capacity();
  for (const std::vector<SimEvent>& b : buckets_)
    events += b.capacity();
  return events * sizeof(SimEvent) + buckets_.capacity() * sizeof(buckets_[0]);
}

}  // namespace mrc::sim
