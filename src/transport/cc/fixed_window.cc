#include "transport/cc/fixed_window.h"

#include <memory>

namespace mrc::cc {

std::unique_ptr<CongestionControl> make_fixed_window(uint64_t window) {
  return std::make_unique<FixedWindow>(window);
}

}  // namespace mrc::cc
