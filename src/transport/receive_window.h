// The responder's receive window and ACK tracking: which PSNs have arrived (a bitmap ring from
// the cumulative PSN), which messages are open (a ring by message number, completed in
// order), and the per-packet echoes the next ACK carries (MRC SACK extension,
// docs/wire-format.md). The QP (qp.h) owns one; it checks and places packets, schedules ACKs
// and completes receives.
//
// Both rings start at EngineConfig::qp_initial_ring entries when the QP first receives and
// double when a PSN or message inside the window lands beyond them; the window checks use
// the limits (MPR_dest), never the current size, so behaviour does not depend on how far a
// ring has grown.
#pragma once

#include <array>
#include <cstdint>

#include "common/array.h"
#include "common/types.h"
#include "transport/psn.h"
#include "wire/headers.h"

namespace mrc {

class ReceiveWindow {
 public:
  // A message with at least one packet placed and not yet completed.
  struct Message {
    uint32_t msg_num = 0;
    uint32_t last_psn = 0;
    uint64_t bytes = 0;
    uint32_t imm = 0;
    bool seen = false;
    bool with_imm = false;
  };

  // RTR: MPR_dest in PSNs; the first expected PSN. A responder that released its state
  // (Qp::release_idle_responder) starts again where it stood: its next expected PSN and
  // message, and the payload bytes it had received.
  void start(uint32_t mpr_dest_psns, uint32_t first_psn, uint32_t msg_base = 0,
             uint64_t received_bytes = 0);
  // The rings (`initial` entries, rounded as each needs): when the QP first receives, and
  // again after release().
  void allocate(uint32_t initial);
  bool allocated() const { return !bits_.empty(); }
  // Nothing received beyond base() and no message open: the rings hold nothing.
  bool idle() const { return ahead_ == 0 && open_ == 0; }
  // Frees the rings of an idle window (a responder between messages keeps only its counters).
  void release() {
    bits_.clear();
    bits_mask_ = 0;
    msgs_.clear();
    msgs_mask_ = 0;
  }

  uint32_t mpr_dest_psns() const { return mpr_dest_psns_; }
  // The ring limit, in PSNs and in messages: MPR_dest rounded up to a power of two, at least
  // 128. A PSN further behind base() is stale; a message further ahead of msg_base() is out
  // of the window.
  uint32_t limit() const { return limit_; }
  uint32_t base() const { return base_; }          // every PSN before it has been received
  uint32_t msg_base() const { return msg_base_; }  // next message to complete (the AETH MSN)
  uint64_t received_bytes() const { return received_bytes_; }

  // ---- PSNs ------------------------------------------------------------------------------
  // `psn`'s offset from base() (negative: before it).
  int32_t offset(uint32_t psn) const { return psn_diff(psn, base_); }
  // An offset the window accepts: not older than the ring limit, within MPR_dest ahead.
  bool acceptable(int32_t d) const {
    return d >= -static_cast<int32_t>(limit_) && d < static_cast<int32_t>(mpr_dest_psns_);
  }
  // Grows the bitmap to hold a PSN `offset` ahead of base() (one inside the window).
  void cover(uint32_t offset) {
    if (offset > bits_mask_ && offset < mpr_dest_psns_) [[unlikely]]
      grow_bits(offset);
  }
  bool received(uint32_t psn) const {
    const uint32_t i = psn & bits_mask_;
    return (bits_[i >> 6] >> (i & 63)) & 1;
  }
  // Whether the PSN `offset` ahead of base() (an acceptable offset) arrived before: every PSN
  // behind the base did, and none beyond the ring (a PSN beyond it makes the ring grow first,
  // so its bit there would alias another PSN's). Needs no cover().
  bool arrived(int32_t offset) const {
    if (offset < 0) return true;
    if (static_cast<uint32_t>(offset) > bits_mask_) return false;
    return received(psn_add(base_, offset));
  }
  // Marks `psn` received with `bytes` of payload; true if it was base(), which then advanced.
  bool mark_received(uint32_t psn, uint32_t bytes);

  // ---- messages --------------------------------------------------------------------------
  bool message_in_window(uint32_t msg) const { return msg - msg_base_ < limit_; }
  // The open message `msg`, or nullptr (not seen, or beyond the ring: its slot holds another).
  const Message* find(uint32_t msg) const {
    const Message& m = msgs_[msg & msgs_mask_];
    return m.seen && m.msg_num == msg ? &m : nullptr;
  }
  // Opens message `msg` (inside the window, not open yet), growing the ring to reach it.
  Message& open(uint32_t msg, uint32_t last_psn, uint32_t imm, bool with_imm) {
    if (msg - msg_base_ > msgs_mask_) grow_msgs(msg - msg_base_);
    Message& m = msgs_[msg & msgs_mask_];
    m = Message{msg, last_psn, 0, imm, true, with_imm};
    ++open_;
    return m;
  }
  // The open message `msg`.
  Message& get(uint32_t msg) { return msgs_[msg & msgs_mask_]; }
  // The next message in order if all its packets have arrived, else nullptr.
  Message* completable() {
    if (msgs_.empty()) return nullptr;
    Message& m = msgs_[msg_base_ & msgs_mask_];
    return m.seen && m.msg_num == msg_base_ && psn_lt(m.last_psn, base_) ? &m : nullptr;
  }
  // Retires completable()'s message.
  void complete_next() {
    msgs_[msg_base_ & msgs_mask_].seen = false;
    ++msg_base_;
    --open_;
  }

  // ---- ACK tracking ----------------------------------------------------------------------
  // Queues an echo for the next ACK. Full: the oldest gives way (the SACK bitmap still covers
  // its PSN), but not to a plain one while it reports a duplicate, which nothing else can
  // tell the requester (its DSACK). A responder that reads 100 packets per ACK keeps only the
  // last 8 echoes.
  void add_echo(const wire::AckEcho& e);
  // Fills the ACK's cumulative PSN, SACK bitmap and echoes; the echoes are then consumed.
  // Without rings (released or never allocated) nothing lies beyond base(): an empty bitmap.
  void fill_sack(wire::SackExt& s);
  void clear_echoes() { echo_count_ = 0; }
  // The echoes queued for the next ACK, oldest first (the paths its packets came by).
  uint32_t echo_count() const { return echo_count_; }
  const wire::AckEcho& echo(uint32_t k) const { return echoes_[k]; }

  size_t ring_bytes() const {
    return bits_.capacity() * sizeof(uint64_t) + msgs_.capacity() * sizeof(Message);
  }

 private:
  // Cold and out of line: inlined, their loops would cost every packet's caller register
  // spills.
  [[gnu::cold, gnu::noinline]] void grow_bits(uint32_t offset);
  [[gnu::cold, gnu::noinline]] void grow_msgs(uint32_t offset);
  void set_bit(uint32_t psn, bool v) {
    const uint32_t i = psn & bits_mask_;
    if (v) {
      bits_[i >> 6] |= 1ull << (i & 63);
    } else {
      bits_[i >> 6] &= ~(1ull << (i & 63));
    }
  }
  // 64 bits from `psn` on.
  uint64_t bits64(uint32_t psn) const;

  Array<uint64_t> bits_;
  uint32_t bits_mask_ = 0;  // bits in the ring - 1 (at least 64 bits)
  uint32_t mpr_dest_psns_ = 1024;
  uint32_t limit_ = 0;
  uint32_t base_ = 0;
  Array<Message> msgs_;
  uint32_t msgs_mask_ = 0;  // msgs_.size() - 1
  uint32_t msg_base_ = 0;
  uint64_t received_bytes_ = 0;
  uint32_t ahead_ = 0;  // PSNs received beyond base_ (bits set)
  uint32_t open_ = 0;   // messages open
  std::array<wire::AckEcho, wire::kMaxAckEchoes> echoes_{};
  uint32_t echo_count_ = 0;
};

}  // namespace mrc
