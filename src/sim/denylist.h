// Clustermapper's denylist for lossy NIC-T0 links (paper 4, "Limitations"): a NIC-T0 link
// that stays up but loses packets is a case MRC cannot fix by itself. Every plane is kept
// evenly loaded, and a sender cannot tell whether the loss is at its end or the remote end, so
// it keeps marking the plane's EVs bad and probing them back. Clustermapper can tell: it
// probes from each NIC to its local T0 and back. A link whose probes keep failing gets a
// denylist entry, and every QP of the NIC, and every QP sending to it, stops using its EVs in
// that plane (their EV state becomes DENIED, as the OCP control API's MRC_CTL_EV_DENIED).
//
// This is the policy alone, sans-IO: it is told how many of a round's probes each watched
// link lost and answers which links are denied or allowed again. The simulator drives it
// (probe rounds, applying the entries to QPs); nothing here knows about time or packets.
#pragma once

#include <cstdint>
#include <vector>

#include "common/types.h"

namespace mrc::sim {

struct DenylistConfig {
  Time interval = 0;          // one probe round per link every interval; 0 = no denylist
  uint32_t probes = 100;      // probes per link and round (each crosses the link both ways)
  double deny_loss = 0.05;    // a round that loses at least this fraction denies the link
  uint32_t clear_rounds = 8;  // rounds in a row below deny_loss that allow it again
};

// The policy's state for links numbered 0..links-1, in groups of `planes` links per NIC
// (link = nic * planes + plane).
class LinkDenylist {
 public:
  LinkDenylist(const DenylistConfig& cfg, uint32_t nics, uint32_t planes);

  enum class Change : uint8_t { kNone, kDenied, kAllowed };
  // One probe round of `link`: `lost` of DenylistConfig::probes probes failed. A link is
  // denied by a round at or above deny_loss, unless that would deny every plane of its NIC
  // (a NIC with no plane left cannot send at all: better lossy than silent). It is allowed
  // again after clear_rounds rounds in a row below deny_loss.
  Change on_round(uint32_t link, uint32_t lost);

  bool denied(uint32_t link) const { return links_[link].denied; }
  uint32_t denied_planes(uint32_t nic) const;
  uint64_t denials() const { return denials_; }
  uint64_t allows() const { return allows_; }
  const DenylistConfig& config() const { return cfg_; }

 private:
  struct Link {
    bool denied = false;
    uint32_t clean_rounds = 0;  // rounds in a row below deny_loss while denied
  };
  DenylistConfig cfg_;
  uint32_t planes_;
  std::vector<Link> links_;
  uint64_t denials_ = 0, allows_ = 0;
};

}  // namespace mrc::sim
