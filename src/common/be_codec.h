// Big-endian byte codecs for the control-plane formats (the side channel's hello,
// net/hello.h; the libfabric provider's setup and slot headers, fi/fi_proto.h): a writer that
// appends to a vector, and a bounds-checked reader whose every byte past the end reads as
// 0 and sets ok() to false (so a decoder reads all fields, then checks once). Also the
// few little-endian words the formats have (the ICRC, wire/codec.cc; pcap files, wire/pcap.cc).
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

namespace mrc {

class BeWriter {
 public:
  explicit BeWriter(std::vector<uint8_t>& out) : out_(out) {}
  void u8(uint8_t v) { out_.push_back(v); }
  void u16(uint16_t v) {
    u8(static_cast<uint8_t>(v >> 8));
    u8(static_cast<uint8_t>(v));
  }
  void u32(uint32_t v) {
    u16(static_cast<uint16_t>(v >> 16));
    u16(static_cast<uint16_t>(v));
  }
  void u64(uint64_t v) {
    u32(static_cast<uint32_t>(v >> 32));
    u32(static_cast<uint32_t>(v));
  }
  void bytes(std::span<const uint8_t> b) { out_.insert(out_.end(), b.begin(), b.end()); }

 private:
  std::vector<uint8_t>& out_;
};

class BeReader {
 public:
  explicit BeReader(std::span<const uint8_t> in) : in_(in) {}
  bool ok() const { return ok_; }
  size_t left() const { return in_.size() - pos_; }
  uint8_t u8() {
    if (pos_ + 1 > in_.size()) return bad();
    return in_[pos_++];
  }
  uint16_t u16() { return static_cast<uint16_t>(u8() << 8 | u8()); }
  uint32_t u32() {
    const uint32_t hi = u16();
    return hi << 16 | u16();
  }
  uint64_t u64() {
    const uint64_t hi = u32();
    return hi << 32 | u32();
  }
  void bytes(std::span<uint8_t> out) {
    if (pos_ + out.size() > in_.size()) {
      bad();
      return;
    }
    std::copy_n(in_.begin() + static_cast<ptrdiff_t>(pos_), out.size(), out.begin());
    pos_ += out.size();
  }

 private:
  uint8_t bad() {
    ok_ = false;
    pos_ = in_.size();
    return 0;
  }
  std::span<const uint8_t> in_;
  size_t pos_ = 0;
  bool ok_ = true;
};

// Little-endian words, byte by byte (the same bytes on every host).
inline void put_le16(uint8_t* p, uint16_t v) {
  p[0] = static_cast<uint8_t>(v);
  p[1] = static_cast<uint8_t>(v >> 8);
}
inline void put_le32(uint8_t* p, uint32_t v) {
  for (int i = 0; i < 4; ++i)
    p[i] = static_cast<uint8_t>(v >> (8 * i));
}
inline uint32_t get_le32(const uint8_t* p) {
  return uint32_t{p[0]} | uint32_t{p[1]} << 8 | uint32_t{p[2]} << 16 | uint32_t{p[3]} << 24;
}

}  // namespace mrc
