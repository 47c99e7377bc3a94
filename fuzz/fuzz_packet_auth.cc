// libFuzzer target: the authenticated packet path (net/packet_auth.h) as the Linux driver runs
// it on every datagram from a peer's address. The input is a script:
//   byte 0      mode (even: GMAC only, odd: encrypted)
//   then ops    'S' len(1) bytes: seal a packet of those bytes and keep it
//               'O' idx(1): open kept packet idx (in any order, any number of times)
//               'F' idx(1) pos(2) bit(1): open kept packet idx with one bit flipped
//               'R' len(1) bytes: open raw attacker bytes
//               anything else: skipped
// Checked: a kept packet opens exactly once, to the bytes that were sealed (later: replayed or
// too old); a flipped bit or raw bytes never open; a refused datagram never changes what the
// opener accepts next.
// Seeds: fuzz/corpus/fuzz_packet_auth/.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "net/packet_auth.h"

namespace {

using mrc::net::AuthMode;
using mrc::net::DirectionKey;
using mrc::net::kAuthTrailerBytes;
using mrc::net::OpenError;

[[noreturn]] void fail(const char* why) {
  std::fprintf(stderr, "fuzz_packet_auth: %s\n", why);
  std::abort();
}

struct Kept {
  std::vector<uint8_t> plain;   // what was sealed
  std::vector<uint8_t> sealed;  // the datagram on the wire
  bool opened = false;
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  DirectionKey key;
  key.key.fill(0x42);
  key.salt.fill(0x17);
  const AuthMode mode = data[0] & 1 ? AuthMode::kEncrypt : AuthMode::kAuthenticate;
  mrc::net::PacketSealer sealer(key, mode);
  mrc::net::PacketOpener opener(key, mode);
  std::vector<Kept> kept;
  size_t i = 1;
  const auto byte = [&](size_t at) { return at < size ? data[at] : uint8_t{0}; };
  while (i < size) {
    const uint8_t op = data[i++];
    if (op == 'S' || op == 'R') {
      const size_t len = std::min<size_t>(byte(i), size - std::min(size, i + 1));
      std::vector<uint8_t> bytes(data + std::min(size, i + 1), data + std::min(size, i + 1 + len));
      i += 1 + len;
      if (op == 'S') {
        Kept k;
        k.plain = bytes;
        k.sealed = bytes;
        k.sealed.resize(bytes.size() + kAuthTrailerBytes);
        if (sealer.seal(k.sealed.data(), bytes.size()) != k.sealed.size()) fail("seal failed");
        kept.push_back(std::move(k));
      } else {
        std::vector<uint8_t> raw = bytes;
        if (opener.open(raw.data(), raw.size())) fail("raw attacker bytes opened");
      }
    } else if (op == 'O' || op == 'F') {
      if (kept.empty()) {
        i += op == 'O' ? 1 : 4;
        continue;
      }
      Kept& k = kept[byte(i) % kept.size()];
      std::vector<uint8_t> d = k.sealed;
      if (op == 'F') {
        const size_t pos = (size_t{byte(i + 1)} << 8 | byte(i + 2)) % d.size();
        d[pos] ^= static_cast<uint8_t>(1u << (byte(i + 3) % 8));
        i += 4;
        if (opener.open(d.data(), d.size())) fail("a flipped bit opened");
        continue;
      }
      i += 1;
      auto r = opener.open(d.data(), d.size());
      if (k.opened) {
        if (r) fail("a datagram opened twice");
        if (r.error() != OpenError::kReplayed && r.error() != OpenError::kTooOld)
          fail("a replay was not refused as one");
        continue;
      }
      // A datagram not opened before opens unless the window has moved past it.
      if (!r) {
        if (r.error() != OpenError::kTooOld) fail("a fresh sealed datagram was refused");
        k.opened = true;  // it never will: treat as gone
        continue;
      }
      if (*r != k.plain.size() ||
          (!k.plain.empty() && std::memcmp(d.data(), k.plain.data(), k.plain.size()) != 0))
        fail("opened bytes differ from the sealed ones");
      k.opened = true;
    }
  }
  return 0;
}
