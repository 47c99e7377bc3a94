// Verification payloads: the bytes of message `iteration` of QP `qp` in a run with `seed`
// are a pure function of (seed, qp, iteration, offset), so the receiver checks what arrived
// byte for byte without the data crossing the side channel. 8-byte words, one multiply-add
// each (cheap enough to fill and check at line rate on loopback).
#pragma once

#include <cstddef>
#include <cstdint>

namespace mrc::net {

void fill_pattern(uint8_t* dst, size_t bytes, uint64_t seed, uint32_t qp, uint64_t iteration);
// Bytes of `data` that differ from the pattern (0 = intact).
uint64_t count_pattern_mismatches(const uint8_t* data, size_t bytes, uint64_t seed, uint32_t qp,
                                  uint64_t iteration);

}  // namespace mrc::net
