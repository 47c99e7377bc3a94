#include "sim/denylist.h"

namespace mrc::sim {

LinkDenylist::LinkDenylist(const DenylistConfig& cfg, uint32_t nics, uint32_t planes)
    : cfg_(cfg), planes_(planes), links_(static_cast<size_t>(nics) * planes) {
  if (cfg_.probes == 0) cfg_.probes = 1;
  if (cfg_.clear_rounds == 0) cfg_.clear_rounds = 1;
}

uint32_t LinkDenylist::denied_planes(uint32_t nic) const {
  uint32_t n = 0;
  for (uint32_t p = 0; p < planes_; ++p)
    n += links_[static_cast<size_t>(nic) * planes_ + p].denied;
  return n;
}

LinkDenylist::Change LinkDenylist::on_round(uint32_t link, uint32_t lost) {
  Link& l = links_[link];
  const bool lossy =
      static_cast<double>(lost) >= cfg_.deny_loss * static_cast<double>(cfg_.probes) && lost > 0;
  if (l.denied) {
    l.clean_rounds = lossy ? 0 : l.clean_rounds + 1;
    if (l.clean_rounds < cfg_.clear_rounds) return Change::kNone;
    l.denied = false;
    l.clean_rounds = 0;
    ++allows_;
    return Change::kAllowed;
  }
  if (!lossy || denied_planes(link / planes_) + 1 >= planes_) return Change::kNone;
  l.denied = true;
  l.clean_rounds = 0;
  ++denials_;
  return Change::kDenied;
}

}  // namespace mrc::sim
