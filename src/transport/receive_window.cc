#include "transport/receive_window.h"

#include <algorithm>
#include <bit>

namespace mrc {

void ReceiveWindow::start(uint32_t mpr_dest_psns, uint32_t first_psn, uint32_t msg_base,
                          uint64_t received_bytes) {
  mpr_dest_psns_ = mpr_dest_psns;
  limit_ = pow2_at_least(std::max<uint32_t>(mpr_dest_psns_, 128));
  base_ = first_psn;
  msg_base_ = msg_base;
  received_bytes_ = received_bytes;
}

void ReceiveWindow::allocate(uint32_t initial) {
  const uint32_t n = static_cast<uint32_t>(
      std::min<uint64_t>(std::bit_ceil(std::max<uint64_t>(initial, 1)), limit_));
  const uint32_t bits = std::max<uint32_t>(n, 64);
  bits_.assign(bits / 64, 0);
  bits_mask_ = bits - 1;
  msgs_.assign(n, Message{});
  msgs_mask_ = n - 1;
}

bool ReceiveWindow::mark_received(uint32_t psn, uint32_t bytes) {
  set_bit(psn, true);
  received_bytes_ += bytes;
  if (psn != base_) {
    ++ahead_;
    return false;
  }
  set_bit(base_, false);
  base_ = psn_add(base_, 1);
  while (received(base_)) {
    set_bit(base_, false);
    base_ = psn_add(base_, 1);
    --ahead_;
  }
  return true;
}

// Every set bit belongs to a PSN in [base_, base_ + ring size): bits behind the base are
// cleared as it advances, and a PSN beyond the ring makes it grow first.
void ReceiveWindow::grow_bits(uint32_t offset) {
  uint32_t bits = 2 * (bits_mask_ + 1);
  while (bits <= offset)
    bits *= 2;
  Array<uint64_t> old(bits / 64, 0);
  old.swap(bits_);
  const uint32_t old_mask = bits_mask_;
  bits_mask_ = bits - 1;
  for (uint32_t i = 0; i <= old_mask; ++i) {
    if ((old[i >> 6] >> (i & 63)) & 1) set_bit(psn_add(base_, (i - base_) & old_mask), true);
  }
}

// Messages seen and not completed are exactly those in [msg_base_, msg_base_ + ring size).
void ReceiveWindow::grow_msgs(uint32_t offset) {
  uint32_t n = 2 * (msgs_mask_ + 1);
  while (n <= offset)
    n *= 2;
  Array<Message> old(n, Message{});
  old.swap(msgs_);
  msgs_mask_ = n - 1;
  for (const Message& m : old) {
    if (m.seen) msgs_[m.msg_num & msgs_mask_] = m;
  }
}

uint64_t ReceiveWindow::bits64(uint32_t psn) const {
  uint64_t v = 0;
  for (int b = 0; b < 64;) {
    const uint32_t i = psn_add(psn, b) & bits_mask_;
    const int avail = std::min(64 - static_cast<int>(i & 63), 64 - b);
    uint64_t chunk = bits_[i >> 6] >> (i & 63);
    if (avail < 64) chunk &= (1ull << avail) - 1;
    v |= chunk << b;
    b += avail;
  }
  return v;
}

void ReceiveWindow::add_echo(const wire::AckEcho& e) {
  if (echo_count_ == echoes_.size()) {
    auto victim = echoes_.begin();
    if (!(e.flags & wire::AckEcho::kDuplicate)) {
      victim = std::find_if(echoes_.begin(), echoes_.end(), [](const wire::AckEcho& x) {
        return !(x.flags & wire::AckEcho::kDuplicate);
      });
      if (victim == echoes_.end()) victim = echoes_.begin();
    }
    std::copy(victim + 1, echoes_.end(), victim);
    --echo_count_;
  }
  echoes_[echo_count_++] = e;
}

void ReceiveWindow::fill_sack(wire::SackExt& s) {
  s.cum_psn = base_;
  s.sack_base = base_;
  // Words beyond the ring (a multiple of 64 bits) are empty: a PSN there would have grown it.
  for (int w = 0; w < wire::kSackBitmapWords; ++w) {
    s.bitmap[static_cast<size_t>(w)] =
        allocated() && 64u * w <= bits_mask_ ? bits64(psn_add(base_, 64 * w)) : 0;
  }
  s.received_bytes = received_bytes_;
  s.echo_count = static_cast<uint8_t>(echo_count_);
  std::copy(echoes_.begin(), echoes_.begin() + echo_count_, s.echo.begin());
  echo_count_ = 0;
}

}  // namespace mrc
