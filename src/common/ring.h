// mrc::Ring<T>: a FIFO ring buffer over one contiguous array, the queue of the engine's
// per-packet paths (QP scheduling rings, completion and event queues, retransmission and
// receive queues) and of the simulator's port queues.
//
// Why not std::deque: a deque allocates and frees blocks as it moves through memory, and its
// indexing goes through a block map. A ring keeps its array: once it has grown to what is in
// flight it never allocates again, and element i is one compare away (ring_wrap).
//
// Two ways to use it:
//   - growing (push_back): a full ring doubles (at least kMinCapacity), keeping the order;
//   - bounded (try_push_back on a ring given its capacity): a full ring refuses the entry, for
//     queues whose depth is a promise (a completion queue reports a drop instead of growing).
// Any capacity works (not only powers of two): indices wrap with a compare.
//
// Storage: a pointer and 32-bit head, size and capacity, 24 bytes where a std::vector and two
// size_t were 40. A QP holds several rings and a simulated all-to-all millions of QPs
// (docs/performance.md, "Bytes per QP"). At most 2^32 - 1 entries.
#pragma once

#include <algorithm>
#include <cassert>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <utility>

#include "common/types.h"

namespace mrc {

template <typename T>
class Ring {
 public:
  // The capacity of a ring's first growth from empty storage: rings of millions of simulated
  // ports start with none and most stay small.
  static constexpr size_t kMinCapacity = 4;

  Ring() = default;
  // Storage for `capacity` entries (none allocated for 0).
  explicit Ring(size_t capacity) { reserve(capacity); }
  Ring(Ring&& o) noexcept
      : buf_(std::move(o.buf_)),
        head_(std::exchange(o.head_, 0)),
        size_(std::exchange(o.size_, 0)),
        capacity_(std::exchange(o.capacity_, 0)) {}
  Ring& operator=(Ring&& o) noexcept {
    buf_ = std::move(o.buf_);
    head_ = std::exchange(o.head_, 0);
    size_ = std::exchange(o.size_, 0);
    capacity_ = std::exchange(o.capacity_, 0);
    return *this;
  }
  Ring(const Ring& o) { *this = o; }
  Ring& operator=(const Ring& o) {
    if (this == &o) return *this;
    Ring copy;
    copy.reserve(o.capacity_);
    for (size_t i = 0; i < o.size_; ++i)
      copy.buf_[i] = o[i];
    copy.size_ = o.size_;
    return *this = std::move(copy);
  }

  bool empty() const { return size_ == 0; }
  bool full() const { return size_ == capacity_; }
  size_t size() const { return size_; }
  size_t capacity() const { return capacity_; }
  // Bytes of storage (memory accounting).
  size_t storage_bytes() const { return size_t{capacity_} * sizeof(T); }

  // Entry `i` counted from the front (i < size()).
  T& operator[](size_t i) {
    assert(i < size_);
    return buf_[ring_wrap(head_ + i, capacity_)];
  }
  const T& operator[](size_t i) const {
    assert(i < size_);
    return buf_[ring_wrap(head_ + i, capacity_)];
  }
  T& front() { return (*this)[0]; }
  const T& front() const { return (*this)[0]; }
  T& back() { return (*this)[size_ - 1]; }
  const T& back() const { return (*this)[size_ - 1]; }

  // Appends `v`, doubling the storage first when the ring is full. (By value: `v` may be one
  // of the ring's own entries, which growing moves.)
  void push_back(T v) {
    if (full()) grow(std::max(kMinCapacity, size_t{capacity_} * 2));
    buf_[ring_wrap(head_ + size_, capacity_)] = std::move(v);
    ++size_;
  }
  // Appends `v` if there is room; a full ring is left as it is and says false.
  bool try_push_back(T v) {
    if (full()) return false;
    buf_[ring_wrap(head_ + size_, capacity_)] = std::move(v);
    ++size_;
    return true;
  }
  // Appends `v` to a ring that may hold up to `limit` entries: a full ring below the limit
  // grows to min(limit, max(`first`, 2 x capacity)) first (`first`: the capacity of its
  // first growth from empty storage). At the limit the ring is left as it is and says false.
  bool push_back_within(T v, size_t limit, size_t first = kMinCapacity) {
    if (full()) {
      if (size_ >= limit) return false;
      grow(std::min(limit, std::max<size_t>({first, size_t{capacity_} * 2, 1})));
    }
    buf_[ring_wrap(head_ + size_, capacity_)] = std::move(v);
    ++size_;
    return true;
  }
  // Removes and returns the front entry (the ring must not be empty).
  T pop_front() {
    assert(size_ > 0);
    T v = std::move(buf_[head_]);
    head_ = static_cast<uint32_t>(ring_wrap(head_ + 1, capacity_));
    --size_;
    return v;
  }
  // Removes and returns the back entry (the ring must not be empty).
  T pop_back() {
    assert(size_ > 0);
    --size_;
    return std::move(buf_[ring_wrap(head_ + size_, capacity_)]);
  }
  // Inserts `v` before entry `i` (0: at the front, size(): at the back), moving the entries
  // behind it one place back; grows as push_back does.
  void insert(size_t i, T v) {
    assert(i <= size_);
    push_back(T{});
    for (size_t j = size_ - 1; j > i; --j)
      (*this)[j] = std::move((*this)[j - 1]);
    (*this)[i] = std::move(v);
  }
  // Removes every entry for which `pred` holds, keeping the order of the others; returns how
  // many were removed.
  template <typename Pred>
  size_t remove_if(Pred pred) {
    size_t kept = 0;
    for (size_t i = 0; i < size_; ++i) {
      if (pred(std::as_const((*this)[i]))) continue;
      if (kept != i) (*this)[kept] = std::move((*this)[i]);
      ++kept;
    }
    const size_t removed = size_ - kept;
    size_ = static_cast<uint32_t>(kept);
    return removed;
  }
  // Empties the ring; the storage stays.
  void clear() {
    head_ = 0;
    size_ = 0;
  }
  // Storage for at least `n` entries (exactly `n` when it grows), the order kept.
  void reserve(size_t n) {
    if (n > capacity_) grow(n);
  }

 private:
  void grow(size_t capacity) {
    assert(capacity <= UINT32_MAX);
    std::unique_ptr<T[]> bigger = std::make_unique<T[]>(capacity);
    for (size_t i = 0; i < size_; ++i)
      bigger[i] = std::move((*this)[i]);
    buf_ = std::move(bigger);
    capacity_ = static_cast<uint32_t>(capacity);
    head_ = 0;
  }

  std::unique_ptr<T[]> buf_;
  uint32_t head_ = 0;  // index of the front entry in buf_
  uint32_t size_ = 0;
  uint32_t capacity_ = 0;
};

}  // namespace mrc
