// Path descriptions for the tests of the path set and the reverse EV set: n paths spread over
// `ports` ports in turn (path i on port i % ports), each GOOD with a zero EV.
#pragma once

#include <cstdint>
#include <vector>

#include "transport/path_set.h"

namespace mrc::testpaths {

inline std::vector<PathDesc> paths(int n, int ports) {
  std::vector<PathDesc> v(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i)
    v[static_cast<size_t>(i)].port = static_cast<uint8_t>(i % ports);
  return v;
}

}  // namespace mrc::testpaths
