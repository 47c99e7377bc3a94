#include "wire/usid.h"

#include <cassert>

namespace mrc::wire {

Ipv6Addr usid_carrier(uint32_t block, std::span<const uint16_t> usids) {
  assert(usids.size() <= kUsidsPerCarrier);
  Ipv6Addr a{};
  for (int i = 0; i < kUsidBlockBytes; ++i)
    a[i] = static_cast<uint8_t>(block >> (24 - 8 * i));
  const size_t n = usids.size() < kUsidsPerCarrier ? usids.size() : kUsidsPerCarrier;
  for (size_t i = 0; i < n; ++i) {
    a[kUsidBlockBytes + kUsidBytes * i] = static_cast<uint8_t>(usids[i] >> 8);
    a[kUsidBlockBytes + kUsidBytes * i + 1] = static_cast<uint8_t>(usids[i]);
  }
  return a;
}

UsidView UsidView::of(const Ipv6Addr& carrier) {
  UsidView v;
  v.block = usid_block(carrier);
  v.count = kUsidsPerCarrier;
  for (int i = 0; i < kUsidsPerCarrier; ++i) {
    const int at = kUsidBlockBytes + kUsidBytes * i;
    v.usids[i] = static_cast<uint16_t>(carrier[at] << 8 | carrier[at + 1]);
    if (v.usids[i] == 0 && v.count == kUsidsPerCarrier) v.count = i;
  }
  return v;
}

uint32_t usid_block(const Ipv6Addr& carrier) {
  return uint32_t{carrier[0]} << 24 | uint32_t{carrier[1]} << 16 | uint32_t{carrier[2]} << 8 |
         carrier[3];
}

uint16_t usid_active(const Ipv6Addr& carrier) {
  return static_cast<uint16_t>(carrier[kUsidBlockBytes] << 8 | carrier[kUsidBlockBytes + 1]);
}

Ipv6Addr usid_shift(const Ipv6Addr& carrier) {
  Ipv6Addr a = carrier;
  for (size_t i = kUsidBlockBytes; i + kUsidBytes < a.size(); ++i)
    a[i] = a[i + kUsidBytes];
  a[14] = a[15] = 0;
  return a;
}

bool usid_is_end_of_carrier(const Ipv6Addr& carrier) {
  for (size_t i = kUsidBlockBytes + kUsidBytes; i < carrier.size(); ++i) {
    if (carrier[i] != 0) return false;
  }
  return true;
}

}  // namespace mrc::wire
