// mrc_ctl.h (ocp-mrc-api.md section 5) over the node-local state (node_state.h). Profiles
// follow the INIT/OFFLINE/ONLINE machines of 5.5; errors are errno values as 5.6 lists them.
// Choices where the reference leaves one: no free profile slot or EV entries -> E2BIG; an
// operation not permitted in the current state -> EINVAL.
#include <arpa/inet.h>
#include <mrc_ctl.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <map>
#include <memory>
#include <optional>

#include "api/api_errors.h"
#include "api/soft_device.h"
#include "net/ping.h"

using namespace mrc;
using namespace mrc::api;

#define MRC_EXPORT extern "C" __attribute__((visibility("default")))

namespace mrc::api {
mrc_cq* create_cq(mrc_context* ctx, int cqe, void* cq_context, mrc_comp_channel* channel,
                  bool ev_cq);
}

namespace {

constexpr const char* kNsccName = "uet-1.0-nscc";
const char* g_algorithms[] = {kNsccName, nullptr};
constexpr uint32_t kEvOpMaxEntries = kMaxEvsPerProfile;
// MODIFY_ONLINE (5.2): applications pick changed ONLINE profiles up into their live QPs on
// their next progress turn (generation counters in node state; docs/c-api.md).
constexpr uint32_t kOptAttr = MRC_CTL_OPT_CAP_EV_PROFILE_MODIFY_ONLINE |
                              MRC_CTL_OPT_CAP_CC_PROFILE_MODIFY_ONLINE | MRC_CTL_OPT_CAP_EV_EVENT |
                              MRC_CTL_OPT_CAP_EV_EVENT_PRECISE_DROP_CNT |
                              MRC_CTL_OPT_CAP_EP_OP_EV_PROBE;

// Controller calls follow convention (A): 0, or -1 with errno (api_errors.h).
int fail(int e) {
  return fail_minus_one(e);
}

// The profile state machine shared by EV format, EV and CC profiles (5.5):
// INIT -> OFFLINE -> ONLINE -> OFFLINE -> INIT. Staying put is always legal here; what may
// change in each state is the caller's rule.
bool legal_profile_transition(ProfileState cur, ProfileState target) {
  if (target == cur) return true;
  return (cur == ProfileState::kInit && target == ProfileState::kOffline) ||
         cur == ProfileState::kOffline ||
         (cur == ProfileState::kOnline && target == ProfileState::kOffline);
}

// Each profile kind's slot in the node state, how to find it by id, and the state bits of its
// attribute mask.
template <typename SlotType, int CurStateBit, int StateBit, SlotType* (NodeState::*Find)(uint64_t)>
struct ProfileKindOf {
  using Slot = SlotType;
  static constexpr int kCurStateBit = CurStateBit;
  static constexpr int kStateBit = StateBit;
  static Slot* find(NodeState& node, uint64_t id) { return (node.*Find)(id); }
};
template <typename Attr>
struct ProfileKind;
template <>
struct ProfileKind<mrc_ctl_ev_fmt_profile_attr>
    : ProfileKindOf<ShmFmtProfile, MRC_CTL_EV_FMT_PROFILE_CUR_STATE, MRC_CTL_EV_FMT_PROFILE_STATE,
                    &NodeState::find_fmt> {};
template <>
struct ProfileKind<mrc_ctl_ev_profile_attr>
    : ProfileKindOf<ShmEvProfile, MRC_CTL_EV_PROFILE_CUR_STATE, MRC_CTL_EV_PROFILE_STATE,
                    &NodeState::find_ev> {};
template <>
struct ProfileKind<mrc_ctl_cc_profile_attr>
    : ProfileKindOf<ShmCcProfile, MRC_CTL_CC_PROFILE_CUR_STATE, MRC_CTL_CC_PROFILE_STATE,
                    &NodeState::find_cc> {};

// Where a profile modify starts, the same for EV format, EV and CC profiles (5.5), under the
// node lock: the profile `id` names (null: it does not exist), its state now (INIT when null),
// the caller's claim about it (CUR_STATE, checked when in `mask`), the state asked for (STATE,
// when in `mask`, else staying put) and the transition rule. nullopt: EINVAL.
template <typename Slot>
struct ProfileMove {
  Slot* profile;
  ProfileState cur;
  ProfileState target;
  bool moving;
};
template <typename Attr>
std::optional<ProfileMove<typename ProfileKind<Attr>::Slot>> profile_move(NodeState& node,
                                                                          uint64_t id,
                                                                          const Attr& attr,
                                                                          int mask) {
  using Kind = ProfileKind<Attr>;
  typename Kind::Slot* p = Kind::find(node, id);
  const ProfileState cur = p ? static_cast<ProfileState>(p->state) : ProfileState::kInit;
  if ((mask & Kind::kCurStateBit) &&
      attr.cur_profile_state != static_cast<mrc_ctl_profile_state>(cur))
    return std::nullopt;
  const auto target =
      (mask & Kind::kStateBit) ? static_cast<ProfileState>(attr.profile_state) : cur;
  if (target > ProfileState::kOnline || !legal_profile_transition(cur, target)) return std::nullopt;
  return ProfileMove<typename Kind::Slot>{p, cur, target, target != cur};
}

// Whether live QPs hold profile `p`, which then cannot leave ONLINE (5.5: EBUSY). QPs of
// crashed applications do not count (docs/c-api.md): they are reclaimed before the answer.
template <typename Profile>
bool held_by_qps(NodeState& node, const Profile& p) {
  if (p.active_qps == 0) return false;
  node.reclaim_dead_slots();
  return p.active_qps > 0;
}

// Every controller call needs CAP_NET_ADMIN (5: EPERM otherwise).
bool permitted() {
  return has_cap_net_admin();
}

bool one_of(uint32_t v, uint32_t mask) {
  return v != 0 && (v & (v - 1)) == 0 && (v & mask) == v;
}

void fill_ctl_attr(SoftDevice* dev, mrc_ctl_device_attr* a) {
  *a = mrc_ctl_device_attr{};
  a->mrc_ctl_protocol_version = MRC_CTL_PROTOCOL_VERSION_1;
  a->ev.ev_max_fmt_profiles = kMaxFmtProfiles;
  a->ev.ev_max_profiles = kMaxEvProfiles;
  a->ev.ev_max_count = kMaxEvProfiles * kMaxEvsPerProfile;
  {
    NodeLock guard(*dev->node);
    a->ev.ev_free_count = a->ev.ev_max_count - dev->node->ev_entries_used();
  }
  a->ev.ev_max_count_profile = kMaxEvsPerProfile;
  a->ev.ev_count_align = 1;
  a->ev.ev_max_width = ev::kEvBits;
  a->ev.ev_fmt_mode_mask =
      MRC_CTL_EV_FMT_MODE_STEV | MRC_CTL_EV_FMT_MODE_SRV6 | MRC_CTL_EV_FMT_MODE_UDP;
  a->ev.ev_mode_mask = MRC_CTL_EV_MODE_AUTO | MRC_CTL_EV_MODE_EXP | MRC_CTL_EV_MODE_GEN;
  a->ev.ev_op_max_entries = kEvOpMaxEntries;
  a->cc.cc_max_profiles = kMaxCcProfiles;
  a->cc.algorithms = g_algorithms;
  for (size_t p = 1; p <= dev->config.ports.size(); ++p)
    a->phy_port_mask |= 1u << p;
  a->opt_attr = kOptAttr;
}

uint32_t to_ocp_state(uint8_t s) {
  switch (static_cast<ev::EvState>(s)) {
    case ev::EvState::kGood:
      return MRC_CTL_EV_GOOD;
    case ev::EvState::kAssumedBad:
      return MRC_CTL_EV_ASSUMED_BAD;
    case ev::EvState::kDenied:
      return MRC_CTL_EV_DENIED;
  }
  return static_cast<uint32_t>(MRC_CTL_EV_UNKNOWN);
}

bool same_ev(const ShmEvEntry& e, const mrc_ctl_ev& v) {
  return e.port == v.port && std::memcmp(e.val, v.val, ev::kEvBytes) == 0;
}

}  // namespace

// ---- Device, version, ports (5.6) -------------------------------------------------------------

MRC_EXPORT int mrc_ctl_query_device_ex(ibv_context* context, mrc_context* mcontext,
                                       mrc_ctl_device_attr* ctl_attr, int* supported) {
  if (!permitted()) return fail(EPERM);
  if (!context || !ctl_attr || !supported || (mcontext && mcontext->vctx != context))
    return fail(EINVAL);
  SoftDevice* dev = device_of(context);
  *supported = dev != nullptr;
  if (!dev) {
    *ctl_attr = mrc_ctl_device_attr{};
    return 0;
  }
  fill_ctl_attr(dev, ctl_attr);
  return 0;
}

MRC_EXPORT int mrc_ctl_query_device(ibv_context* context, mrc_ctl_device_attr* ctl_attr) {
  int supported = 0;
  if (mrc_ctl_query_device_ex(context, nullptr, ctl_attr, &supported) != 0) return -1;
  return supported ? 0 : fail(EOPNOTSUPP);
}

MRC_EXPORT void mrc_ctl_query_version(uint32_t* current_version, uint32_t* last_supported_version,
                                      uint32_t* vendor_version,
                                      uint32_t* last_supported_vendor_version) {
  if (current_version) *current_version = MRC_CTL_API_CURRENT_VERSION;
  if (last_supported_version) *last_supported_version = MRC_CTL_API_LAST_SUPPORTED_VERSION;
  if (vendor_version) *vendor_version = MRC_CTL_VENDOR_API_CURRENT_VERSION;
  if (last_supported_vendor_version)
    *last_supported_vendor_version = MRC_CTL_VENDOR_API_LAST_SUPPORTED_VERSION;
}

MRC_EXPORT int mrc_ctl_query_port(mrc_context* ctx, uint8_t port_num, mrc_ctl_port_attr* attr,
                                  int attr_mask) {
  if (!permitted()) return fail(EPERM);
  if (!ctx || !attr || (attr_mask & ~MRC_CTL_PORT_ADMIN_STATE) || port_num < 1 ||
      port_num > ctx->dev->config.ports.size())
    return fail(EINVAL);
  NodeLock guard(*ctx->dev->node);
  if (attr_mask & MRC_CTL_PORT_ADMIN_STATE)
    attr->port_admin_state = ctx->dev->node->get().port_disabled[port_num]
                                 ? MRC_CTL_PORT_ADMIN_DISABLED
                                 : MRC_CTL_PORT_ADMIN_ENABLED;
  return 0;
}

// Every process with the device open applies it on its next progress turn: engine
// set_port_up (that plane's EVs stop carrying traffic) and IBV_PORT_DOWN in ibv_query_port.
MRC_EXPORT int mrc_ctl_modify_port(mrc_context* ctx, uint8_t port_num, mrc_ctl_port_attr* attr,
                                   int attr_mask) {
  if (!permitted()) return fail(EPERM);
  if (!ctx || !attr || (attr_mask & ~MRC_CTL_PORT_ADMIN_STATE) || port_num < 1 ||
      port_num > ctx->dev->config.ports.size())
    return fail(EINVAL);
  if (!(attr_mask & MRC_CTL_PORT_ADMIN_STATE)) return 0;
  if (attr->port_admin_state != MRC_CTL_PORT_ADMIN_DISABLED &&
      attr->port_admin_state != MRC_CTL_PORT_ADMIN_ENABLED)
    return fail(EINVAL);
  NodeLock guard(*ctx->dev->node);
  NodeStateLayout& s = ctx->dev->node->get();
  const uint8_t disabled = attr->port_admin_state == MRC_CTL_PORT_ADMIN_DISABLED;
  if (s.port_disabled[port_num] != disabled) {
    s.port_disabled[port_num] = disabled;
    ++s.port_admin_generation;
  }
  return 0;
}

// ---- EV format profiles (5.5) -----------------------------------------------------------------

namespace {

bool fmt_has_online_dependents(NodeStateLayout& s, uint64_t fmt_id) {
  for (auto& p : s.ev)
    if (p.in_use && p.mode != MRC_CTL_EV_MODE_AUTO && p.fmt_id == fmt_id &&
        p.state == static_cast<uint8_t>(ProfileState::kOnline))
      return true;
  return false;
}

int query_fmt_fields(const ShmFmtProfile* p, mrc_ctl_ev_fmt_profile_attr* attr) {
  const int need = p ? static_cast<int>(p->field_count) : 0;
  if (attr->ev_fmt_op.fmt_field_count < need || (need > 0 && !attr->ev_fmt_op.fmt_fields)) {
    attr->ev_fmt_op.fmt_field_count = need;
    return E2BIG;
  }
  for (int i = 0; i < need; ++i)
    attr->ev_fmt_op.fmt_fields[i].width = p->widths[i];
  attr->ev_fmt_op.fmt_field_count = need;
  return 0;
}

// The attribute bits an EV format profile call accepts (modify and query alike).
constexpr int kFmtKnown = MRC_CTL_EV_FMT_PROFILE_STATE | MRC_CTL_EV_FMT_PROFILE_CUR_STATE |
                          MRC_CTL_EV_FMT_PROFILE_MODE | MRC_CTL_EV_FMT_PROFILE_OP |
                          MRC_CTL_EV_FMT_VENDOR_CFG;

ev::FormatProfile to_format(const ShmFmtProfile& f) {
  ev::FormatProfile out{static_cast<ev::FormatMode>(f.mode), {}};
  for (uint32_t i = 0; i < f.field_count; ++i)
    out.fields.push_back({f.widths[i]});
  return out;
}

}  // namespace

MRC_EXPORT int mrc_ctl_modify_ev_fmt_profile(mrc_context* ctx, uint64_t id,
                                             mrc_ctl_ev_fmt_profile_attr* attr, int mask) {
  if (!permitted()) return fail(EPERM);
  if (!ctx || !attr || (mask & ~kFmtKnown)) return fail(EINVAL);
  NodeState& node = *ctx->dev->node;
  NodeLock guard(node);
  const auto move = profile_move(node, id, *attr, mask);
  if (!move) return fail(EINVAL);
  auto [p, cur, target, moving] = *move;
  NodeStateLayout& s = node.get();
  const bool op = mask & MRC_CTL_EV_FMT_PROFILE_OP;
  const bool modify_fields = op && attr->ev_fmt_op.op == MRC_CTL_EV_FMT_OP_MODIFY_FIELDS;
  const bool query_fields = op && attr->ev_fmt_op.op == MRC_CTL_EV_FMT_OP_QUERY_FIELDS;
  if (op && !modify_fields && !query_fields) return fail(EINVAL);
  const bool changes = (mask & MRC_CTL_EV_FMT_PROFILE_MODE) || modify_fields;

  if (cur == ProfileState::kInit && !moving && (changes || query_fields)) return fail(EINVAL);
  if (cur == ProfileState::kOnline && changes) return fail(EINVAL);
  if (cur != ProfileState::kInit && (changes || (moving && target != ProfileState::kOnline)) &&
      fmt_has_online_dependents(s, id))
    return fail(EBUSY);

  ShmFmtProfile w = p ? *p : ShmFmtProfile{};
  w.id = id;
  if (mask & MRC_CTL_EV_FMT_PROFILE_MODE) {
    if (!one_of(attr->ev_fmt_mode,
                MRC_CTL_EV_FMT_MODE_STEV | MRC_CTL_EV_FMT_MODE_SRV6 | MRC_CTL_EV_FMT_MODE_UDP))
      return fail(EINVAL);
    w.mode = static_cast<uint8_t>(attr->ev_fmt_mode);
  }
  if (modify_fields) {
    const int n = attr->ev_fmt_op.fmt_field_count;
    if (n < 0 || (n > 0 && !attr->ev_fmt_op.fmt_fields)) return fail(EINVAL);
    if (n > static_cast<int>(kMaxProfileFields)) return fail(E2BIG);
    w.field_count = static_cast<uint32_t>(n);
    for (int i = 0; i < n; ++i)
      w.widths[i] = attr->ev_fmt_op.fmt_fields[i].width;
    w.fields_set = 1;
  }
  if (w.fields_set && w.mode) {
    if (auto st = ev::validate_format(to_format(w)); !st)
      return fail(st.error() == Error::kTooBig ? E2BIG : EINVAL);
  }
  if (query_fields) {
    if (int e = query_fmt_fields(p, attr)) return fail(e);
  }
  if (cur == ProfileState::kInit && target == ProfileState::kOffline) {
    if (!(mask & MRC_CTL_EV_FMT_PROFILE_MODE)) return fail(EINVAL);  // "to OFFLINE": MODE
    p = node.free_fmt();
    if (!p) return fail(E2BIG);
  }
  if (target == ProfileState::kOnline && !w.fields_set) return fail(EINVAL);  // "to ONLINE"
  if (!p) return 0;                                                           // INIT, nothing asked
  if (target == ProfileState::kInit) {
    *p = ShmFmtProfile{};
    return 0;
  }
  w.in_use = 1;
  w.state = static_cast<uint8_t>(target);
  ++w.generation;
  *p = w;
  return 0;
}

MRC_EXPORT int mrc_ctl_query_ev_fmt_profile(mrc_context* ctx, uint64_t id,
                                            mrc_ctl_ev_fmt_profile_attr* attr, int mask) {
  if (!permitted()) return fail(EPERM);
  if (!ctx || !attr || (mask & ~kFmtKnown)) return fail(EINVAL);
  if ((mask & MRC_CTL_EV_FMT_PROFILE_OP) && attr->ev_fmt_op.op != MRC_CTL_EV_FMT_OP_QUERY_FIELDS)
    return fail(EINVAL);
  NodeLock guard(*ctx->dev->node);
  const ShmFmtProfile* p = ctx->dev->node->find_fmt(id);
  if (mask & (MRC_CTL_EV_FMT_PROFILE_STATE | MRC_CTL_EV_FMT_PROFILE_CUR_STATE)) {
    const auto st = static_cast<mrc_ctl_profile_state>(p ? p->state : 0);
    attr->profile_state = attr->cur_profile_state = st;
  }
  if (mask & MRC_CTL_EV_FMT_PROFILE_MODE)
    attr->ev_fmt_mode = static_cast<mrc_ctl_ev_fmt_mode>(p ? p->mode : 0);
  if (mask & MRC_CTL_EV_FMT_PROFILE_OP)
    if (int e = query_fmt_fields(p, attr)) return fail(e);
  if (mask & MRC_CTL_EV_FMT_VENDOR_CFG) std::memset(attr->vendor_cfg, 0, sizeof attr->vendor_cfg);
  return 0;
}

// ---- EV profiles (5.5) ------------------------------------------------------------------------

namespace {

// GEN (5.7): entry i on port i % ports + 1, value = generated combination i / ports.
int generate_entries(ShmEvProfile& w, uint32_t ports) {
  const uint32_t per_port = (w.ev_count + ports - 1) / ports;
  auto values = ev::generate(std::span<const ev::Field>(w.fields, w.field_count), per_port);
  if (!values) return values.error() == Error::kTooBig ? E2BIG : EINVAL;
  for (uint32_t i = 0; i < w.ev_count; ++i) {
    ShmEvEntry& e = w.entries[i];
    const uint8_t port = static_cast<uint8_t>(i % ports + 1);
    // An entry that stays the same EV keeps its state (a DENIED mark survives a MODIFY_FIELDS
    // of an ONLINE profile that leaves it alone); a new EV starts GOOD.
    if (e.port == port && std::memcmp(e.val, (*values)[i / ports].data(), ev::kEvBytes) == 0)
      continue;
    std::memcpy(e.val, (*values)[i / ports].data(), ev::kEvBytes);
    e.port = port;
    e.state = static_cast<uint8_t>(ev::EvState::kGood);
  }
  return 0;
}

// `online_fmt`: the format of an ONLINE profile, whose REPLACE_EV entries (MODIFY_ONLINE) must
// expand before they reach live QPs; nullptr otherwise (OFFLINE arrays are checked on the way
// to ONLINE).
int run_ev_op(ShmEvProfile& w, mrc_ctl_ev_profile_attr* attr, uint32_t ports,
              const ev::FormatProfile* online_fmt) {
  auto& op = attr->ev_op;
  if (op.entry_count < 0 || (op.entry_count > 0 && !op.entries)) return EINVAL;
  if (static_cast<uint32_t>(op.entry_count) > kEvOpMaxEntries &&
      op.op != MRC_CTL_EV_OP_QUERY_EV_ARRAY)
    return E2BIG;
  if (w.mode == MRC_CTL_EV_MODE_AUTO) return EINVAL;  // no EVs to operate on
  const uint32_t n = w.ev_count;
  switch (op.op) {
    case MRC_CTL_EV_OP_REPLACE_EV:
      // ONLINE too: MRC_CTL_OPT_CAP_EV_PROFILE_MODIFY_ONLINE is offered (5.5).
      for (int i = 0; i < op.entry_count; ++i) {
        mrc_ctl_ev_op_entry& e = op.entries[i];
        if (e.ev_new.port < 1 || e.ev_new.port > ports) return EINVAL;
        if (e.state != MRC_CTL_EV_GOOD && e.state != MRC_CTL_EV_DENIED) return EINVAL;
        if (online_fmt) {
          ev::EvValue v{};
          std::memcpy(v.data(), e.ev_new.val, ev::kEvBytes);
          if (!ev::expand(*online_fmt, std::span<const ev::Field>(w.fields, w.field_count), v))
            return EINVAL;  // stray bits beyond what the fields consume (6)
        }
        bool found = false;
        for (uint32_t j = 0; j < n; ++j) {
          if (!same_ev(w.entries[j], e.ev)) continue;
          std::memcpy(w.entries[j].val, e.ev_new.val, ev::kEvBytes);
          w.entries[j].port = e.ev_new.port;
          w.entries[j].state = static_cast<uint8_t>(
              e.state == MRC_CTL_EV_DENIED ? ev::EvState::kDenied : ev::EvState::kGood);
          found = true;
          if (!(e.flags & MRC_CTL_EV_OP_F_ALL_COPIES)) break;
        }
        if (!found) return ENOENT;
        ++w.generation;
      }
      return 0;
    case MRC_CTL_EV_OP_MODIFY_EV_STATE:
      for (int i = 0; i < op.entry_count; ++i) {
        mrc_ctl_ev_op_entry& e = op.entries[i];
        if (e.state != MRC_CTL_EV_GOOD && e.state != MRC_CTL_EV_DENIED) return EINVAL;
        bool found = false;
        for (uint32_t j = 0; j < n; ++j) {
          if (!same_ev(w.entries[j], e.ev)) continue;
          w.entries[j].state = static_cast<uint8_t>(
              e.state == MRC_CTL_EV_DENIED ? ev::EvState::kDenied : ev::EvState::kGood);
          found = true;
          if (!(e.flags & MRC_CTL_EV_OP_F_ALL_COPIES)) break;
        }
        if (!found) return ENOENT;
        ++w.generation;  // applications re-sync denied paths (set_path_denied)
      }
      return 0;
    case MRC_CTL_EV_OP_QUERY_EV_STATE:
      for (int i = 0; i < op.entry_count; ++i) {
        mrc_ctl_ev_op_entry& e = op.entries[i];
        bool found = false;
        for (uint32_t j = 0; j < n && !found; ++j)
          if (same_ev(w.entries[j], e.ev)) {
            e.state = static_cast<mrc_ctl_ev_state>(to_ocp_state(w.entries[j].state));
            found = true;
          }
        if (!found) return ENOENT;
      }
      return 0;
    case MRC_CTL_EV_OP_QUERY_EV_ARRAY:
      if (static_cast<uint32_t>(op.entry_count) < n) {
        op.entry_count = static_cast<int>(n);
        return E2BIG;
      }
      for (uint32_t j = 0; j < n; ++j) {
        mrc_ctl_ev_op_entry& e = op.entries[j];
        std::memcpy(e.ev.val, w.entries[j].val, ev::kEvBytes);
        e.ev.port = w.entries[j].port;
        e.state = static_cast<mrc_ctl_ev_state>(to_ocp_state(w.entries[j].state));
      }
      op.entry_count = static_cast<int>(n);
      return 0;
  }
  return EINVAL;
}

int query_ev_fields(const ShmEvProfile& w, mrc_ctl_ev_profile_attr* attr) {
  auto& f = attr->ev_fields_op;
  const int need = static_cast<int>(w.field_count);
  if (f.field_count < need || (need > 0 && !f.fields)) {
    f.field_count = need;
    return E2BIG;
  }
  for (int i = 0; i < need; ++i)
    f.fields[i] = mrc_ctl_ev_field{w.fields[i].width, w.fields[i].init_val, w.fields[i].min_val,
                                   w.fields[i].max_val, w.fields[i].mask};
  f.field_count = need;
  return 0;
}

void fill_ev_query(const ShmEvProfile* p, mrc_ctl_ev_profile_attr* attr, int mask) {
  if (mask & (MRC_CTL_EV_PROFILE_STATE | MRC_CTL_EV_PROFILE_CUR_STATE))
    attr->profile_state = attr->cur_profile_state =
        static_cast<mrc_ctl_profile_state>(p ? p->state : 0);
  if (mask & MRC_CTL_EV_PROFILE_MODE) attr->ev_mode = static_cast<mrc_ctl_ev_mode>(p ? p->mode : 0);
  if (mask & MRC_CTL_EV_PROFILE_FMT_ID) attr->ev_fmt_profile_id = p ? p->fmt_id : 0;
  if (mask & MRC_CTL_EV_PROFILE_COUNT) attr->ev_count = p ? p->ev_count : 0;
  if (mask & MRC_CTL_EV_PROFILE_MIN_ACTIVE) attr->ev_min_active = p ? p->ev_min_active : 0;
  if (mask & MRC_CTL_EV_PROFILE_EVENT_MASK) attr->ev_event_mask = p ? p->ev_event_mask : 0;
}

constexpr int kEvKnown = MRC_CTL_EV_PROFILE_STATE | MRC_CTL_EV_PROFILE_CUR_STATE |
                         MRC_CTL_EV_PROFILE_MODE | MRC_CTL_EV_PROFILE_FMT_ID |
                         MRC_CTL_EV_PROFILE_COUNT | MRC_CTL_EV_PROFILE_MIN_ACTIVE |
                         MRC_CTL_EV_PROFILE_EVENT_MASK | MRC_CTL_EV_PROFILE_EV_OP |
                         MRC_CTL_EV_PROFILE_EV_FIELDS_OP | MRC_CTL_EV_PROFILE_VENDOR_CFG;

}  // namespace

namespace {

// The operations an EV profile modify asks for (EV_OP, EV_FIELDS_OP and which fields
// operation), or nullopt: EINVAL (both at once, 5.5 "Operation selection", or an unknown
// fields operation).
struct EvOps {
  bool ev_op = false;
  bool modify_fields = false;
  bool query_fields = false;
};
std::optional<EvOps> ev_ops_of(const mrc_ctl_ev_profile_attr& attr, int mask) {
  EvOps o;
  o.ev_op = mask & MRC_CTL_EV_PROFILE_EV_OP;
  const bool fields_op = mask & MRC_CTL_EV_PROFILE_EV_FIELDS_OP;
  if (o.ev_op && fields_op) return std::nullopt;
  o.modify_fields = fields_op && attr.ev_fields_op.op == MRC_CTL_EV_FIELDS_OP_MODIFY_FIELDS;
  o.query_fields = fields_op && attr.ev_fields_op.op == MRC_CTL_EV_FIELDS_OP_QUERY_FIELDS;
  if (fields_op && !o.modify_fields && !o.query_fields) return std::nullopt;
  return o;
}

// What the profile's state permits of the request (5.5); an errno, or 0.
int check_ev_request(NodeState& node, const ProfileMove<ShmEvProfile>& move,
                     const mrc_ctl_ev_profile_attr& attr, int mask, const EvOps& ops) {
  const auto [p, cur, target, moving] = move;
  constexpr int kAttrBits = MRC_CTL_EV_PROFILE_MODE | MRC_CTL_EV_PROFILE_FMT_ID |
                            MRC_CTL_EV_PROFILE_COUNT | MRC_CTL_EV_PROFILE_MIN_ACTIVE |
                            MRC_CTL_EV_PROFILE_EVENT_MASK;
  const bool attr_changes = (mask & kAttrBits) || ops.modify_fields;
  if (cur == ProfileState::kInit && !moving && (attr_changes || ops.ev_op || ops.query_fields))
    return EINVAL;
  // ONLINE (5.5 with MRC_CTL_OPT_CAP_EV_PROFILE_MODIFY_ONLINE): EVENT_MASK and MODIFY_FIELDS
  // may change, as may the array through REPLACE_EV; MODE, FMT_ID, COUNT and MIN_ACTIVE not.
  // No EBUSY for QPs using it: changing a profile under live QPs is what the capability is for
  // (the EBUSY interpretation of 5.5 covers ONLINE -> OFFLINE and OFFLINE edits).
  constexpr int kFixedOnline = MRC_CTL_EV_PROFILE_MODE | MRC_CTL_EV_PROFILE_FMT_ID |
                               MRC_CTL_EV_PROFILE_COUNT | MRC_CTL_EV_PROFILE_MIN_ACTIVE;
  if (cur == ProfileState::kOnline && (mask & kFixedOnline)) return EINVAL;
  if (cur == ProfileState::kOnline && moving && held_by_qps(node, *p)) return EBUSY;
  if (cur == ProfileState::kInit && moving) {
    // "to OFFLINE": MODE, and for EXP/GEN FMT_ID, COUNT and MODIFY_FIELDS (5.5).
    if (!(mask & MRC_CTL_EV_PROFILE_MODE)) return EINVAL;
    if (attr.ev_mode != MRC_CTL_EV_MODE_AUTO &&
        ((mask & (MRC_CTL_EV_PROFILE_FMT_ID | MRC_CTL_EV_PROFILE_COUNT)) !=
             (MRC_CTL_EV_PROFILE_FMT_ID | MRC_CTL_EV_PROFILE_COUNT) ||
         !ops.modify_fields))
      return EINVAL;
  }
  return 0;
}

// Applies the attributes of the request (MODE, FMT_ID, COUNT, MIN_ACTIVE, EVENT_MASK,
// MODIFY_FIELDS) to `w`, the working copy of profile `p` (null: a new one), regenerating or
// clearing its EV array where they change it; an errno, or 0 (`w` is then consistent).
int apply_ev_attributes(NodeState& node, const ShmEvProfile* p, ShmEvProfile& w,
                        const mrc_ctl_ev_profile_attr& attr, int mask, const EvOps& ops,
                        ProfileState cur, uint32_t ports) {
  bool regenerate = false;
  if (mask & MRC_CTL_EV_PROFILE_MODE) {
    if (!one_of(attr.ev_mode, MRC_CTL_EV_MODE_AUTO | MRC_CTL_EV_MODE_EXP | MRC_CTL_EV_MODE_GEN))
      return EINVAL;
    if (w.mode != attr.ev_mode) regenerate = true;
    w.mode = static_cast<uint8_t>(attr.ev_mode);
  }
  const bool auto_mode = w.mode == MRC_CTL_EV_MODE_AUTO;
  if (mask & MRC_CTL_EV_PROFILE_FMT_ID) {
    const ShmFmtProfile* f = node.find_fmt(attr.ev_fmt_profile_id);
    if (!f || f->state != static_cast<uint8_t>(ProfileState::kOnline)) return EINVAL;
    w.fmt_id = attr.ev_fmt_profile_id;
    w.fmt_id_set = 1;
  }
  if (mask & MRC_CTL_EV_PROFILE_COUNT) {
    if (!auto_mode && attr.ev_count == 0) return EINVAL;
    if (attr.ev_count > kMaxEvsPerProfile) return E2BIG;
    const uint32_t used = node.ev_entries_used() - (p ? p->ev_count : 0);
    if (used + attr.ev_count > kMaxEvProfiles * kMaxEvsPerProfile) return E2BIG;
    if (w.ev_count != attr.ev_count) regenerate = true;
    w.ev_count = attr.ev_count;
    w.count_set = 1;
  }
  if (auto_mode) w.ev_count = 0;
  if (mask & MRC_CTL_EV_PROFILE_MIN_ACTIVE) {
    w.ev_min_active = attr.ev_min_active;
    w.min_active_set = 1;
  }
  if (mask & MRC_CTL_EV_PROFILE_EVENT_MASK) {
    if (attr.ev_event_mask & ~(MRC_CTL_EV_GOOD | MRC_CTL_EV_ASSUMED_BAD)) return EINVAL;
    w.ev_event_mask = attr.ev_event_mask;
    w.event_mask_set = 1;
  }
  if (ops.modify_fields) {
    const auto& f = attr.ev_fields_op;
    if (f.field_count < 0 || (f.field_count > 0 && !f.fields)) return EINVAL;
    if (f.field_count > static_cast<int>(kMaxProfileFields)) return E2BIG;
    const ShmFmtProfile* fmt = node.find_fmt(w.fmt_id);
    if (!fmt || !w.fmt_id_set) return EINVAL;
    std::vector<ev::Field> fields;
    for (int i = 0; i < f.field_count; ++i)
      fields.push_back(ev::Field{f.fields[i].width, f.fields[i].init_val, f.fields[i].min_val,
                                 f.fields[i].max_val, f.fields[i].mask});
    if (auto st = ev::validate_fields(to_format(*fmt), fields, ev::kEvBits); !st)
      return st.error() == Error::kTooBig ? E2BIG : EINVAL;
    w.field_count = static_cast<uint32_t>(fields.size());
    std::copy(fields.begin(), fields.end(), w.fields);
    w.fields_set = 1;
    regenerate = true;
  }
  if (regenerate && !auto_mode) {
    if (w.mode == MRC_CTL_EV_MODE_GEN && w.fields_set) {
      if (int e = generate_entries(w, ports)) return e;
    } else if (w.mode == MRC_CTL_EV_MODE_EXP && cur != ProfileState::kOnline) {
      for (uint32_t i = 0; i < w.ev_count; ++i)
        w.entries[i] = ShmEvEntry{};  // UNPOPULATED
    }  // ONLINE EXP: the controller's array stays, expanded by the new fields (checked later)
    ++w.generation;
  }
  if (!auto_mode && w.ev_min_active > w.ev_count) return EINVAL;
  return 0;
}

// The rules of an ONLINE profile (5.5 "to ONLINE", 6): MIN_ACTIVE and EVENT_MASK set, and
// outside AUTO an ONLINE format and a whole array that expands under it, since live QPs take
// it as it is. An errno, or 0.
int check_ev_online(NodeState& node, const ShmEvProfile& w) {
  if (!w.min_active_set || !w.event_mask_set) return EINVAL;
  if (w.mode == MRC_CTL_EV_MODE_AUTO) return 0;
  const ShmFmtProfile* fmt = node.find_fmt(w.fmt_id);
  if (!fmt || fmt->state != static_cast<uint8_t>(ProfileState::kOnline)) return EINVAL;
  ev::EvProfile check;
  check.mode = static_cast<ev::EvMode>(w.mode);
  check.format = to_format(*fmt);
  check.fields.assign(w.fields, w.fields + w.field_count);
  check.ev_min_active = w.ev_min_active;
  for (uint32_t i = 0; i < w.ev_count; ++i) {
    if (w.entries[i].port == 0) return EINVAL;  // EXP: every entry populated
    ev::EvEntry e;
    std::memcpy(e.value.data(), w.entries[i].val, ev::kEvBytes);
    e.port = static_cast<uint8_t>(w.entries[i].port - 1);
    check.entries.push_back(e);
  }
  return ev::validate_profile(check) ? 0 : EINVAL;
}

}  // namespace

MRC_EXPORT int mrc_ctl_modify_ev_profile(mrc_context* ctx, uint64_t id,
                                         mrc_ctl_ev_profile_attr* attr, int mask) {
  if (!permitted()) return fail(EPERM);
  if (!ctx || !attr || (mask & ~kEvKnown)) return fail(EINVAL);
  const std::optional<EvOps> ops = ev_ops_of(*attr, mask);
  if (!ops) return fail(EINVAL);
  const uint32_t ports = static_cast<uint32_t>(ctx->dev->config.ports.size());
  NodeState& node = *ctx->dev->node;
  NodeLock guard(node);
  const auto move = profile_move(node, id, *attr, mask);
  if (!move) return fail(EINVAL);
  const auto [p, cur, target, moving] = *move;
  if (int e = check_ev_request(node, *move, *attr, mask, *ops)) return fail(e);

  auto w = std::make_unique<ShmEvProfile>(p ? *p : ShmEvProfile{});
  w->id = id;
  if (int e = apply_ev_attributes(node, p, *w, *attr, mask, *ops, cur, ports)) return fail(e);
  const bool auto_mode = w->mode == MRC_CTL_EV_MODE_AUTO;

  // Allocate the slot before the batch, so a partly applied batch can be kept.
  ShmEvProfile* slot = p;
  if (!slot && moving) {
    slot = node.free_ev();
    if (!slot) return fail(E2BIG);
  }
  int op_error = 0;
  std::optional<ev::FormatProfile> online_fmt;
  if (cur == ProfileState::kOnline && !auto_mode) {
    const ShmFmtProfile* fmt = node.find_fmt(w->fmt_id);
    if (!fmt) return fail(EIO);  // an ONLINE EV profile's format cannot leave ONLINE
    online_fmt = to_format(*fmt);
  }
  if (ops->ev_op) op_error = run_ev_op(*w, attr, ports, online_fmt ? &*online_fmt : nullptr);
  if (ops->query_fields) op_error = query_ev_fields(*w, attr);
  if (!slot) return op_error ? fail(op_error) : 0;  // INIT and nothing asked
  if (op_error) {  // earlier entries stay applied (5.5), the state does not change
    *slot = *w;
    slot->in_use = 1;
    slot->owner_pid = ::getpid();
    return fail(op_error);
  }
  // Going ONLINE, or staying ONLINE with new fields: the whole array must expand (6), since
  // live QPs take it as it is (for ONLINE, nothing has changed yet if this fails).
  if (target == ProfileState::kOnline && (moving || (ops->modify_fields && !auto_mode))) {
    if (int e = check_ev_online(node, *w)) return fail(e);
  }
  if (target == ProfileState::kInit) {
    *slot = ShmEvProfile{};
    return 0;
  }
  w->in_use = 1;
  w->state = static_cast<uint8_t>(target);
  w->owner_pid = ::getpid();
  if (moving) ++w->generation;
  *slot = *w;
  return 0;
}

MRC_EXPORT int mrc_ctl_query_ev_profile(mrc_context* ctx, uint64_t id,
                                        mrc_ctl_ev_profile_attr* attr, int mask) {
  if (!permitted()) return fail(EPERM);
  if (!ctx || !attr || (mask & ~kEvKnown)) return fail(EINVAL);
  const bool ev_op = mask & MRC_CTL_EV_PROFILE_EV_OP;
  const bool fields_op = mask & MRC_CTL_EV_PROFILE_EV_FIELDS_OP;
  if (ev_op && fields_op) return fail(EINVAL);
  if (ev_op && attr->ev_op.op != MRC_CTL_EV_OP_QUERY_EV_STATE &&
      attr->ev_op.op != MRC_CTL_EV_OP_QUERY_EV_ARRAY)
    return fail(EINVAL);
  if (fields_op && attr->ev_fields_op.op != MRC_CTL_EV_FIELDS_OP_QUERY_FIELDS) return fail(EINVAL);
  NodeState& node = *ctx->dev->node;
  NodeLock guard(node);
  const ShmEvProfile* p = node.find_ev(id);
  fill_ev_query(p, attr, mask);
  if (mask & MRC_CTL_EV_PROFILE_VENDOR_CFG)
    std::memset(attr->vendor_cfg, 0, sizeof attr->vendor_cfg);
  if (ev_op || fields_op) {
    if (!p) return fail(ev_op && attr->ev_op.op == MRC_CTL_EV_OP_QUERY_EV_STATE ? ENOENT : EINVAL);
    auto w = std::make_unique<ShmEvProfile>(*p);
    const int e =
        ev_op ? run_ev_op(*w, attr, static_cast<uint32_t>(ctx->dev->config.ports.size()), nullptr)
              : query_ev_fields(*w, attr);
    if (e) return fail(e);
  }
  return 0;
}

// ---- CC profiles (5.5) ------------------------------------------------------------------------

namespace {
constexpr int kCcKnown = MRC_CTL_CC_PROFILE_STATE | MRC_CTL_CC_PROFILE_CUR_STATE |
                         MRC_CTL_CC_PROFILE_ALGORITHM | MRC_CTL_CC_PROFILE_CONFIG |
                         MRC_CTL_CC_PROFILE_VENDOR_CFG;
}  // namespace

MRC_EXPORT int mrc_ctl_modify_cc_profile(mrc_context* ctx, uint64_t id,
                                         mrc_ctl_cc_profile_attr* attr, int mask) {
  if (!permitted()) return fail(EPERM);
  if (!ctx || !attr || (mask & ~kCcKnown)) return fail(EINVAL);
  NodeState& node = *ctx->dev->node;
  NodeLock guard(node);
  const auto move = profile_move(node, id, *attr, mask);
  if (!move) return fail(EINVAL);
  auto [p, cur, target, moving] = *move;
  const bool changes = mask & (MRC_CTL_CC_PROFILE_ALGORITHM | MRC_CTL_CC_PROFILE_CONFIG);
  if (cur == ProfileState::kInit && !moving && changes) return fail(EINVAL);
  // ONLINE: CONFIG may change (MRC_CTL_OPT_CAP_CC_PROFILE_MODIFY_ONLINE, 5.5), ALGORITHM not;
  // QPs using the profile are reconfigured in place by their process (no EBUSY).
  if (cur == ProfileState::kOnline && (mask & MRC_CTL_CC_PROFILE_ALGORITHM)) return fail(EINVAL);
  if (cur == ProfileState::kOnline && moving && held_by_qps(node, *p)) return fail(EBUSY);
  if (cur == ProfileState::kInit && moving && !(mask & MRC_CTL_CC_PROFILE_ALGORITHM))
    return fail(EINVAL);  // "to OFFLINE": ALGORITHM
  ShmCcProfile w = p ? *p : ShmCcProfile{};
  w.id = id;
  if (mask & MRC_CTL_CC_PROFILE_ALGORITHM) {
    if (!attr->algorithm)
      w.algorithm = -1;  // NULL disables CC
    else if (std::strcmp(attr->algorithm, kNsccName) == 0)
      w.algorithm = 0;
    else
      return fail(EINVAL);
    w.algorithm_set = 1;
  }
  if (mask & MRC_CTL_CC_PROFILE_CONFIG) {
    if (attr->cc_config) {
      if (w.algorithm < 0) return fail(EINVAL);
      std::memcpy(w.config, attr->cc_config, sizeof(mrc_ctl_cc_nscc_cfg));  // copied (5.5)
    } else if (w.algorithm >= 0) {
      return fail(EINVAL);
    }
    w.config_set = 1;
  }
  if (target == ProfileState::kOnline && moving && !w.config_set && w.algorithm >= 0)
    return fail(EINVAL);  // "to ONLINE": CONFIG
  if (!p && !moving) return 0;
  if (!p) {
    p = node.free_cc();
    if (!p) return fail(E2BIG);
  }
  if (target == ProfileState::kInit) {
    *p = ShmCcProfile{};
    return 0;
  }
  w.in_use = 1;
  w.state = static_cast<uint8_t>(target);
  // Applications re-read a changed configuration into their QPs (SoftDevice::sync_node_state).
  if (mask & MRC_CTL_CC_PROFILE_CONFIG) ++w.generation;
  *p = w;
  return 0;
}

MRC_EXPORT int mrc_ctl_query_cc_profile(mrc_context* ctx, uint64_t id,
                                        mrc_ctl_cc_profile_attr* attr, int mask) {
  if (!permitted()) return fail(EPERM);
  if (!ctx || !attr || (mask & ~kCcKnown)) return fail(EINVAL);
  NodeLock guard(*ctx->dev->node);
  const ShmCcProfile* p = ctx->dev->node->find_cc(id);
  if (mask & (MRC_CTL_CC_PROFILE_STATE | MRC_CTL_CC_PROFILE_CUR_STATE))
    attr->profile_state = attr->cur_profile_state =
        static_cast<mrc_ctl_profile_state>(p ? p->state : 0);
  if (mask & MRC_CTL_CC_PROFILE_ALGORITHM)
    attr->algorithm = p && p->algorithm >= 0 ? g_algorithms[p->algorithm] : nullptr;
  if (mask & MRC_CTL_CC_PROFILE_CONFIG) {
    attr->cc_config = nullptr;
    if (p && p->config_set && p->algorithm >= 0) {
      // The pointer handed out stays valid until the context is closed (or the next query
      // of this profile on it): one result per context and profile id, not a global store.
      std::lock_guard lk(ctx->cc_query_mu);
      auto& slot = ctx->cc_query_results[id];
      if (!slot) slot = std::make_unique<mrc_ctl_cc_nscc_cfg>();
      std::memcpy(slot.get(), p->config, sizeof(mrc_ctl_cc_nscc_cfg));
      attr->cc_config = slot.get();
    }
  }
  if (mask & MRC_CTL_CC_PROFILE_VENDOR_CFG)
    std::memset(attr->vendor_cfg, 0, sizeof attr->vendor_cfg);
  return 0;
}

// ---- EV events (5.6) --------------------------------------------------------------------------

MRC_EXPORT mrc_cq* mrc_ctl_create_ev_event_cq(mrc_context* ctx, int cqe, void* cq_context,
                                              mrc_comp_channel* channel, int comp_vector) {
  if (!permitted()) {
    errno = EPERM;
    return nullptr;
  }
  if (comp_vector != 0) {
    errno = EINVAL;
    return nullptr;
  }
  return create_cq(ctx, cqe, cq_context, channel, true);
}

// The caller's element stride follows the API version its context declared (5.6
// recommendation): >= 1.0.1 or 0 (latest) -> 56 bytes with `state`; older -> 48 bytes.
MRC_EXPORT int mrc_ctl_poll_ev_event(mrc_cq* cq, int num_entries, mrc_ctl_ev_event* out) {
  if (!cq || !cq->is_ev_cq || num_entries < 0 || (num_entries > 0 && !out)) return -EINVAL;
  const uint32_t v = cq->ctx->api_version;
  const bool with_state = v == 0 || v >= static_cast<uint32_t>(MRC_API_VER(1, 0, 1));
  const size_t stride = with_state ? 56 : 48;
  auto* bytes = reinterpret_cast<uint8_t*>(out);
  std::lock_guard lk(cq->mu);
  int n = 0;
  while (n < num_entries && !cq->ev_events.empty()) {
    const EvEventRecord& r = cq->ev_events.front();
    uint8_t* e = bytes + static_cast<size_t>(n) * stride;
    std::memcpy(e + 0, &r.profile_id, 8);
    std::memcpy(e + 8, &r.ev, sizeof r.ev);
    std::memcpy(e + 44, &r.drop_count, 4);
    if (with_state) std::memcpy(e + 48, &r.state, 4);
    cq->ev_events.pop_front();
    ++n;
  }
  return n;
}

// ---- Endpoint operations (5.6) ----------------------------------------------------------------

namespace {
// The Linux driver's reachability ping (net/ping.h); the data socket of every open device
// answers with the pong magic. Slot 0's UDP port is the node's probe responder
// (docs/c-api.md).
using mrc::net::kPingBytes;
using mrc::net::kPingMagic;
using mrc::net::kPongMagic;

uint64_t now_ns() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1'000'000'000ull + static_cast<uint64_t>(ts.tv_nsec);
}

bool is_ipv4(const uint8_t* gid) {
  in6_addr a;
  std::memcpy(&a, gid, 16);
  return IN6_IS_ADDR_V4MAPPED(&a);
}

// Where probe `r` goes: the dgid, or in SRV6 mode the expanded EV's first 16 bytes (5.7).
const uint8_t* probe_destination(const mrc_ctl_ep_req& r) {
  return r.ev_fmt_mode == MRC_CTL_EV_FMT_MODE_SRV6 ? r.req_ev.val : r.dgid.raw;
}
}  // namespace

MRC_EXPORT int mrc_ctl_ep_batch_send_wait(mrc_context* ctx, uint8_t req_tc,
                                          mrc_ctl_ep_op_type op_type, mrc_ctl_ep_req* req,
                                          int num_req, uint32_t rsp_timeout, mrc_ctl_ep_rsp* rsp,
                                          int* num_rsp) {
  if (!permitted()) return fail(EPERM);
  if (!ctx || !req || num_req <= 0 || !rsp || !num_rsp) return fail(EINVAL);
  if (op_type == MRC_CTL_EP_OP_PORT_STATUS_UPDATE) return fail(ENOTSUP);  // undefined (5.2)
  if (op_type != MRC_CTL_EP_OP_EV_PROBE) return fail(EINVAL);
  SoftDevice& dev = *ctx->dev;
  const size_t ports = dev.config.ports.size();
  for (int i = 0; i < num_req; ++i) {
    if (req[i].req_ev.port < 1 || req[i].req_ev.port > ports) return fail(EINVAL);
    if (!one_of(req[i].ev_fmt_mode, 7)) return fail(EINVAL);
    // An IPv4 sgid (IPv4-mapped) probes over IPv4: never in SRV6 format (its EV is an IPv6
    // uSID carrier), and its destination must be IPv4 too (and an IPv6 sgid's IPv6).
    const bool v4 = is_ipv4(req[i].sgid.raw);
    if (v4 && req[i].ev_fmt_mode == MRC_CTL_EV_FMT_MODE_SRV6) return fail(EINVAL);
    if (v4 != is_ipv4(probe_destination(req[i]))) return fail(EINVAL);
    for (int j = 0; j < i; ++j)
      if (req[j].req_id == req[i].req_id) return fail(EINVAL);  // duplicate outstanding id
  }
  struct Probe {
    int fd = -1;
    uint64_t nonce = 0, sent_ns = 0;
    bool answered = false;
  };
  std::vector<Probe> probes(static_cast<size_t>(num_req));
  auto close_all = [&] {
    for (auto& p : probes)
      if (p.fd >= 0) ::close(p.fd);
  };
  *num_rsp = 0;
  for (int i = 0; i < num_req; ++i) {
    const mrc_ctl_ep_req& r = req[i];
    Probe& pr = probes[static_cast<size_t>(i)];
    pr.fd = ::socket(AF_INET6, SOCK_DGRAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (pr.fd < 0) {
      close_all();
      return fail(errno == EMFILE || errno == ENFILE ? EAGAIN : EIO);
    }
    const int tclass = req_tc << 2;  // DSCP in the traffic class (IPv4: the TOS byte)
    // An IPv4 sgid needs a dual-stack socket to bind its mapped address; IPv6 stays IPv6-only.
    const int v6only = is_ipv4(r.sgid.raw) ? 0 : 1;
    ::setsockopt(pr.fd, IPPROTO_IPV6, IPV6_V6ONLY, &v6only, sizeof v6only);
    if (v6only)
      ::setsockopt(pr.fd, IPPROTO_IPV6, IPV6_TCLASS, &tclass, sizeof tclass);
    else
      ::setsockopt(pr.fd, IPPROTO_IP, IP_TOS, &tclass, sizeof tclass);
    sockaddr_in6 src{};
    src.sin6_family = AF_INET6;
    std::memcpy(&src.sin6_addr, r.sgid.raw, 16);
    if (r.ev_fmt_mode == MRC_CTL_EV_FMT_MODE_UDP) {  // the EV is the UDP source port
      src.sin6_port = htons(static_cast<uint16_t>(r.req_ev.val[0] << 8 | r.req_ev.val[1]));
      const int one = 1;
      ::setsockopt(pr.fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    }
    if (::bind(pr.fd, reinterpret_cast<sockaddr*>(&src), sizeof src) != 0) {
      src.sin6_port = 0;
      if (::bind(pr.fd, reinterpret_cast<sockaddr*>(&src), sizeof src) != 0) {
        close_all();
        return fail(EINVAL);  // sgid is not an address of this node
      }
    }
    sockaddr_in6 dst{};
    dst.sin6_family = AF_INET6;
    dst.sin6_port = htons(dev.config.udp_base_port);
    std::memcpy(&dst.sin6_addr, probe_destination(r), 16);
    uint8_t ping[kPingBytes];
    std::memcpy(ping, kPingMagic, 8);
    ping[8] = static_cast<uint8_t>(r.req_ev.port - 1);
    pr.nonce = (static_cast<uint64_t>(::getpid()) << 32) ^ (now_ns() + static_cast<uint64_t>(i));
    std::memcpy(ping + 9, &pr.nonce, 8);
    pr.sent_ns = now_ns();
    if (::sendto(pr.fd, ping, sizeof ping, 0, reinterpret_cast<sockaddr*>(&dst), sizeof dst) < 0) {
      close_all();
      return fail(EIO);
    }
  }
  const uint64_t deadline = now_ns() + rsp_timeout;
  int answered = 0;
  while (answered < num_req) {
    const uint64_t t = now_ns();
    if (t >= deadline) break;
    std::vector<pollfd> fds;
    for (auto& p : probes)
      fds.push_back(pollfd{p.fd, POLLIN, 0});
    const int wait_ms = static_cast<int>((deadline - t + 999'999) / 1'000'000);
    if (::poll(fds.data(), fds.size(), wait_ms) <= 0) continue;
    for (int i = 0; i < num_req; ++i) {
      Probe& pr = probes[static_cast<size_t>(i)];
      uint8_t buf[64];
      ssize_t n;
      while ((n = ::recv(pr.fd, buf, sizeof buf, 0)) > 0) {
        uint64_t nonce = 0;
        if (n != static_cast<ssize_t>(kPingBytes) || std::memcmp(buf, kPongMagic, 8) != 0) continue;
        std::memcpy(&nonce, buf + 9, 8);
        if (nonce != pr.nonce || pr.answered) continue;
        pr.answered = true;
        mrc_ctl_ep_rsp& out = rsp[answered++];  // arrival order
        out = mrc_ctl_ep_rsp{};
        out.req_id = req[i].req_id;
        out.port = req[i].req_ev.port;
        out.rtt = static_cast<unsigned int>(std::min<uint64_t>(now_ns() - pr.sent_ns, UINT32_MAX));
        out.adj_svc_time = 0;
      }
    }
  }
  close_all();
  *num_rsp = answered;
  return answered == num_req ? 0 : fail(ETIMEDOUT);
}
