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
#pragma once

#include <algorithm>
#include <cassert>
#include <cstddef>
#include <utility>
#include <vector>

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
  explicit Ring(size_t capacity) : buf_(capacity) {}

  bool empty() const { return size_ == 0; }
  bool full() const { return size_ == buf_.size(); }
  size_t size() const { return size_; }
  size_t capacity() const { return buf_.size(); }
  // Bytes of storage (memory accounting).
  size_t storage_bytes() const { return buf_.size() * sizeof(T); }

  // Entry `i` counted from the front (i < size()).
  T& operator[](size_t i) {
    assert(i < size_);
    return buf_[ring_wrap(head_ + i, buf_.size())];
  }
  const T& operator[](size_t i) const {
    assert(i < size_);
    return buf_[ring_wrap(head_ + i, buf_.size())];
  }
  T& front() { return (*this)[0]; }
  const T& front() const { return (*this)[0]; }
  T& back() { return (*this)[size_ - 1]; }
  const T& back() const { return (*this)[size_ - 1]; }

  // Appends `v`, doubling the storage first when the ring is full. (By value: `v` may be one
  // of the ring's own entries, which growing moves.)
  void push_back(T v) {
    if (full()) grow(std::max(kMinCapacity, buf_.size() * 2));
    buf_[ring_wrap(head_ + size_, buf_.size())] = std::move(v);
    ++size_;
  }
  // Appends `v` if there is room; a full ring is left as it is and says false.
  bool try_push_back(T v) {
    if (full()) return false;
    buf_[ring_wrap(head_ + size_, buf_.size())] = std::move(v);
    ++size_;
    return true;
  }
  // Removes and returns the front entry (the ring must not be empty).
  T pop_front() {
    assert(size_ > 0);
    T v = std::move(buf_[head_]);
    head_ = ring_wrap(head_ + 1, buf_.size());
    --size_;
    return v;
  }
  // Removes and returns the back entry (the ring must not be empty).
  T pop_back() {
    assert(size_ > 0);
    --size_;
    return std::move(buf_[ring_wrap(head_ + size_, buf_.size())]);
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
    size_ = kept;
    return removed;
  }
  // Empties the ring; the storage stays.
  void clear() {
    head_ = 0;
    size_ = 0;
  }
  // Storage for at least `n` entries (exactly `n` when it grows), the order kept.
  void reserve(size_t n) {
    if (n > buf_.size()) grow(n);
  }

 private:
  void grow(size_t capacity) {
    std::vector<T> bigger(capacity);
    for (size_t i = 0; i < size_; ++i)
      bigger[i] = std::move((*this)[i]);
    buf_.swap(bigger);
    head_ = 0;
  }

  std::vector<T> buf_;
  size_t head_ = 0;  // index of the front entry in buf_
  size_t size_ = 0;
};

}  // namespace mrc
