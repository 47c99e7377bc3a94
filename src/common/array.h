// mrc::Array<T>: a heap array of a size fixed until it is resized: a pointer and a 32-bit size,
// 16 bytes where a std::vector header is 24. The engine keeps one QP per connection (a
// simulated all-to-all holds millions), and each QP a dozen arrays whose size it sets itself
// (rings that double, per-path tables): their headers are a large part of a small QP
// (docs/performance.md, "Bytes per QP"). No spare capacity: capacity() == size().
#pragma once

#include <algorithm>
#include <cassert>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <utility>

namespace mrc {

template <typename T>
class Array {
 public:
  Array() = default;
  // `n` value-initialized entries (each `v`).
  explicit Array(size_t n) { assign(n, T{}); }
  Array(size_t n, const T& v) { assign(n, v); }
  Array(Array&& o) noexcept : data_(std::move(o.data_)), size_(std::exchange(o.size_, 0)) {}
  Array& operator=(Array&& o) noexcept {
    data_ = std::move(o.data_);
    size_ = std::exchange(o.size_, 0);
    return *this;
  }
  Array(const Array& o) { *this = o; }
  Array& operator=(const Array& o) {
    if (this == &o) return *this;
    auto d = o.size_ ? std::make_unique<T[]>(o.size_) : nullptr;
    std::copy(o.begin(), o.end(), d.get());
    data_ = std::move(d);
    size_ = o.size_;
    return *this;
  }

  size_t size() const { return size_; }
  size_t capacity() const { return size_; }
  bool empty() const { return size_ == 0; }
  T& operator[](size_t i) {
    assert(i < size_);
    return data_[i];
  }
  const T& operator[](size_t i) const {
    assert(i < size_);
    return data_[i];
  }
  T* data() { return data_.get(); }
  const T* data() const { return data_.get(); }
  T* begin() { return data_.get(); }
  T* end() { return data_.get() + size_; }
  const T* begin() const { return data_.get(); }
  const T* end() const { return data_.get() + size_; }

  // `n` entries, each `v` (none allocated for 0).
  void assign(size_t n, const T& v) {
    assert(n <= UINT32_MAX);
    if (n != size_) {
      data_ = n ? std::make_unique<T[]>(n) : nullptr;
      size_ = static_cast<uint32_t>(n);
    }
    std::fill(begin(), end(), v);
  }
  // `n` entries: the first min(n, size()) kept, the rest value-initialized.
  void resize(size_t n) {
    assert(n <= UINT32_MAX);
    if (n == size_) return;
    auto d = n ? std::make_unique<T[]>(n) : nullptr;
    std::move(begin(), begin() + std::min<size_t>(n, size_), d.get());
    data_ = std::move(d);
    size_ = static_cast<uint32_t>(n);
  }
  // No entries, no storage.
  void clear() {
    data_.reset();
    size_ = 0;
  }
  void swap(Array& o) noexcept {
    data_.swap(o.data_);
    std::swap(size_, o.size_);
  }

 private:
  std::unique_ptr<T[]> data_;
  uint32_t size_ = 0;
};

}  // namespace mrc
