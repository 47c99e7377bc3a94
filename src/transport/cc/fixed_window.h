// A fixed window: congestion control disabled (the OCP "algorithm NULL"). The window never
// changes and packets are not paced.
#pragma once

#include <cstdint>

#include "common/types.h"
#include "transport/cc/cc.h"

namespace mrc::cc {

class FixedWindow final : public CongestionControl {
 public:
  // `window` bytes in flight; 0 means unlimited (UINT64_MAX).
  explicit FixedWindow(uint64_t window) : window_(window != 0 ? window : UINT64_MAX) {}

  // A new size (OCP 5.5 CONFIG change of an ONLINE CC profile); 0 means unlimited.
  void set_window(uint64_t window) { window_ = window != 0 ? window : UINT64_MAX; }

  uint64_t cwnd() const override { return window_; }
  Time next_send_time() const override { return 0; }
  void on_send(Time, uint32_t, uint64_t) override {}
  void on_ack(const AckSample&, uint64_t) override {}
  void on_loss(Time, uint32_t) override {}
  const char* name() const override { return "fixed"; }
  size_t object_bytes() const override { return sizeof(*this); }

 private:
  uint64_t window_;
};

}  // namespace mrc::cc
