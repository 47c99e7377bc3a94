// mrc::SharedConstants<Key, Value>: one immutable Value per distinct Key, shared by every
// holder. Configuration a QP only reads (its congestion control's resolved parameters, its CC
// specification) is the same for thousands of QPs of one engine; each QP keeps a pointer to the
// engine's copy instead of a copy of its own (docs/performance.md, "Bytes per QP").
//
// Keys are compared with operator==, in a short list: an engine sees a handful of distinct
// configurations. Past kMaxEntries a new key's value is made unshared (still correct, only not
// deduplicated), so the list cannot grow without bound under a controller that keeps changing
// a profile.
#pragma once

#include <cstddef>
#include <memory>
#include <utility>
#include <vector>

namespace mrc {

template <typename Key, typename Value>
class SharedConstants {
 public:
  static constexpr size_t kMaxEntries = 16;

  // The Value of `key`: the one made for an equal key before, else make(key) (kept for later
  // callers while there is room).
  template <typename Make>
  std::shared_ptr<const Value> get(const Key& key, Make make) {
    for (const auto& [k, v] : entries_)
      if (k == key) return v;
    auto v = std::make_shared<const Value>(make(key));
    if (entries_.size() < kMaxEntries) entries_.emplace_back(key, v);
    return v;
  }
  size_t size() const { return entries_.size(); }

 private:
  std::vector<std::pair<Key, std::shared_ptr<const Value>>> entries_;
};

}  // namespace mrc
