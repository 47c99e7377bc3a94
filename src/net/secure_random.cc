#include "net/secure_random.h"

#include <sys/random.h>

#include <cerrno>
#include <cstring>

namespace mrc::net {

NetStatus secure_random_bytes(std::span<uint8_t> out) {
  size_t done = 0;
  while (done < out.size()) {
    const ssize_t n = ::getrandom(out.data() + done, out.size() - done, 0);
    if (n < 0) {
      if (errno == EINTR) continue;
      return errno_fail("getrandom", errno);
    }
    done += static_cast<size_t>(n);
  }
  return {};
}

NetResult<uint64_t> secure_random_u64() {
  uint64_t v = 0;
  while (v == 0) {
    uint8_t b[8];
    if (auto st = secure_random_bytes(b); !st) return std::unexpected(st.error());
    std::memcpy(&v, b, sizeof v);
  }
  return v;
}

}  // namespace mrc::net
