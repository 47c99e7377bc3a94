#include "transport/control.h"

namespace mrc {

const char* control_kind_name(ControlKind k) {
  switch (k) {
    case ControlKind::kTrimNack:
      return "trim_nack";
    case ControlKind::kAck:
      return "ack";
    case ControlKind::kAckRepeat:
      return "ack_repeat";
    case ControlKind::kCnp:
      return "cnp";
    case ControlKind::kProbeReply:
      return "probe_reply";
    case ControlKind::kProbe:
      return "probe";
    case ControlKind::kReverseProbe:
      return "reverse_probe";
  }
  return "?";
}

int control_path(PathSet& paths, Time now, uint8_t preferred_port, int preferred_path,
                 uint32_t mask, bool allow_assumed_bad) {
  if (preferred_path >= 0 && static_cast<size_t>(preferred_path) < paths.size()) {
    const ev::EvState st = paths.state_of(preferred_path);
    const uint8_t port = paths.port_of(preferred_path);
    const bool state_ok =
        st == ev::EvState::kGood || (allow_assumed_bad && st == ev::EvState::kAssumedBad);
    if (state_ok && paths.port_up(port) && ((mask >> port) & 1)) {
      return preferred_path;
    }
  }
  int path = PathSet::kNone;
  if ((mask >> preferred_port) & 1) path = paths.pick(now, 1u << preferred_port);
  if (path == PathSet::kNone) path = paths.pick(now, mask);
  return path;
}

int probe_reply_path(PathSet& paths, Time now, uint8_t port, int probed_path, uint32_t mask) {
  if (!paths.port_up(port)) return control_path(paths, now, port, probed_path, mask, true);
  if (!((mask >> port) & 1)) return PathSet::kNone;
  if (probed_path >= 0 && static_cast<size_t>(probed_path) < paths.size() &&
      paths.port_of(probed_path) == port) {
    const ev::EvState st = paths.state_of(probed_path);
    if (st == ev::EvState::kGood || st == ev::EvState::kAssumedBad) return probed_path;
  }
  const int path = paths.pick(now, 1u << port);
  return path != PathSet::kNone ? path : control_path(paths, now, port, probed_path, mask, true);
}

// Paper 2.4: ACKs, SACKs and NACKs go on the reverse EV set, which probes keep to paths
// known to work both ways, sprayed over its slots (ReversePathSet::pick). With the set off,
// or when none of its EVs can go now on any port (every slot mapped out), the reverse of
// the data packet's path, as control_path chooses.
int ack_path(PathSet& paths, ReversePathSet& reverse, const ReceiveWindow* window,
             bool waits_for_port, Time now, uint8_t preferred_port, int preferred_path,
             const LastAck& last, uint32_t mask, bool repeat) {
  if (reverse.enabled() && reverse.any_live(paths)) {
    const int path = reverse.pick(mask, paths, repeat ? last.path : PathSet::kNone);
    // A repeat never takes the lost ACK's way while another exists: with one live slot, the
    // choice of ack_repeat_path (another port, else another path).
    if (!repeat || (path != last.path && path != PathSet::kNone)) return path;
  }
  if (repeat) return ack_repeat_path(paths, last, mask);
  if (waits_for_port) {
    // The reverse of a path data just came by (this packet's, else the newest echo's on a
    // free port): each crossed a working spine moments ago. None free: wait for one's port.
    bool waiting = false;
    const auto usable = [&](int i) {
      return i >= 0 && static_cast<size_t>(i) < paths.size() &&
             paths.state_of(i) == ev::EvState::kGood && paths.port_up(paths.port_of(i));
    };
    if (usable(preferred_path)) {
      if ((mask >> paths.port_of(preferred_path)) & 1) return preferred_path;
      waiting = true;
    }
    for (uint32_t k = window ? window->echo_count() : 0; k-- > 0;) {
      const int i = window->echo(k).ev_index;
      if (!usable(i)) continue;
      if ((mask >> paths.port_of(i)) & 1) return i;
      waiting = true;
    }
    if (waiting) return PathSet::kNone;  // EngineConfig::ack_waits_for_port
  }
  return control_path(paths, now, preferred_port, preferred_path, mask, false);
}

// The scan starts after the last ACK's path and leaves the round-robin and burst state of
// PathSet::pick alone: that state is the data sender's.
int ack_repeat_path(const PathSet& paths, const LastAck& last, uint32_t mask) {
  const size_t n = paths.size();
  if (n == 0) return PathSet::kNone;
  const size_t start = last.path >= 0 ? static_cast<size_t>(last.path) : n - 1;
  bool other_port_exists = false, same_port_exists = false;
  int same_port = PathSet::kNone;
  for (size_t k = 1; k <= n; ++k) {
    const int i = static_cast<int>((start + k) % n);
    const uint8_t port = paths.port_of(i);
    if (paths.state_of(i) != ev::EvState::kGood || !paths.active(i) || !paths.port_up(port))
      continue;
    const bool allowed = (mask >> port) & 1;
    if (port != last.port) {
      if (allowed) return i;
      other_port_exists = true;
    } else if (i != last.path) {
      if (allowed && same_port == PathSet::kNone) same_port = i;
      same_port_exists = true;
    }
  }
  if (other_port_exists) return PathSet::kNone;
  if (same_port_exists) return same_port;  // kNone while its port is outside the mask
  const bool last_ok = last.path >= 0 && static_cast<size_t>(last.path) < n &&
                       paths.state_of(last.path) == ev::EvState::kGood &&
                       paths.port_up(last.port) && ((mask >> last.port) & 1);
  return last_ok ? last.path : PathSet::kNone;
}

}  // namespace mrc
