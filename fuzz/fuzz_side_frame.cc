// libFuzzer target: the side channel's frame decoder (net::parse_frame) and SideChannel's
// buffering over a real stream socket, on arbitrary bytes from the peer.
//
// The first input byte picks the frame limit; the rest is what the peer sends. Whatever it
// is, parse_frame must report a frame only when all its bytes are there and within the limit,
// SideChannel must hand out exactly those frames in order, refuse a length above the limit
// with kBadHello, and never buffer more than one frame of the limit beyond what it handed out.
// Seeds: fuzz/corpus/fuzz_side_frame/.
#include <sys/socket.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <span>
#include <vector>

#include "net/side_channel.h"

namespace {

[[noreturn]] void die(const char* what) {
  std::fprintf(stderr, "fuzz_side_frame: %s\n", what);
  std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace mrc::net;
  if (size == 0) return 0;
  static constexpr uint32_t kLimits[] = {0, 1, 4, 64, 1024, 65536, kMaxFrameBytes};
  const uint32_t limit = kLimits[data[0] % (sizeof kLimits / sizeof kLimits[0])];
  const std::span<const uint8_t> stream(data + 1, size - 1);

  // The pure decoder: walk the stream frame by frame.
  std::vector<std::vector<uint8_t>> expected;
  bool expect_too_large = false;
  size_t at = 0;
  while (true) {
    const FrameView v = parse_frame(stream.subspan(at), limit);
    if (v.status == FrameStatus::kNeedMore) break;
    if (v.status == FrameStatus::kTooLarge) {
      if (v.length <= limit) die("kTooLarge within the limit");
      expect_too_large = true;
      break;
    }
    if (v.length > limit || stream.size() - at < 4 + size_t{v.length}) die("frame beyond the data");
    expected.emplace_back(stream.begin() + static_cast<ptrdiff_t>(at + 4),
                          stream.begin() + static_cast<ptrdiff_t>(at + 4 + v.length));
    at += 4 + v.length;
  }

  // The same bytes through a SideChannel (the peer writes them all, then closes).
  int sv[2];
  if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0) return 0;
  int sndbuf = 1 << 21;
  ::setsockopt(sv[1], SOL_SOCKET, SO_SNDBUF, &sndbuf, sizeof sndbuf);
  size_t sent = 0;
  while (sent < stream.size()) {
    const ssize_t w = ::send(sv[1], stream.data() + sent, stream.size() - sent, MSG_DONTWAIT);
    if (w <= 0) break;  // more than the socket holds: test what fit
    sent += static_cast<size_t>(w);
  }
  ::close(sv[1]);
  if (sent < stream.size()) {
    ::close(sv[0]);
    return 0;
  }
  SideChannel ch{UniqueFd(sv[0]), "fuzz", limit};
  ch.set_max_frame(limit);
  size_t got = 0;
  while (true) {
    auto f = ch.try_recv_frame();
    if (!f) {
      if (f.error().code == NetErrc::kBadHello) {
        if (!expect_too_large || got != expected.size())
          die("kBadHello for a frame within the limit");
      } else if (f.error().code != NetErrc::kPeerClosed) {
        die("unexpected error");
      } else if (got != expected.size() || expect_too_large) {
        die("closed before every frame was handed out");
      }
      break;
    }
    if (!*f) continue;  // nothing yet: the data is all in the socket, the next read gets it
    if (got >= expected.size() || **f != expected[got]) die("a frame differs from the decoder's");
    ++got;
  }
  return 0;
}
