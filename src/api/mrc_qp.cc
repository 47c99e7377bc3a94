// mrc.h QPs (ocp-mrc-api.md 3.7, state machine 3.8) and work requests.
#include <arpa/inet.h>
#include <fcntl.h>
#include <mrc.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>

#include "api/api_errors.h"
#include "api/soft_device.h"

using namespace mrc;
using namespace mrc::api;

#define MRC_EXPORT extern "C" __attribute__((visibility("default")))

namespace {

constexpr uint32_t kMaxQueueDepth = 65536;

// libibverbs attributes MRC does not support (3.7 mrc_modify_qp).
constexpr int kUnsupportedVerbsMask =
    IBV_QP_PORT | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_MIN_RNR_TIMER |
    IBV_QP_MAX_QP_RD_ATOMIC | IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_ALT_PATH | IBV_QP_PATH_MIG_STATE;
constexpr int kSupportedVerbsMask = IBV_QP_STATE | IBV_QP_CUR_STATE | IBV_QP_ACCESS_FLAGS |
                                    IBV_QP_PKEY_INDEX | IBV_QP_AV | IBV_QP_PATH_MTU |
                                    IBV_QP_DEST_QPN | IBV_QP_RQ_PSN | IBV_QP_SQ_PSN;
constexpr int kMrcMaskAll = MRC_QP_MAX_WIMM | MRC_QP_MAX_WIMM_DEST | MRC_QP_MPR | MRC_QP_MPR_DEST |
                            MRC_QP_TIMEOUT | MRC_QP_EV_PROFILE_ID | MRC_QP_CC_PROFILE_ID |
                            MRC_QP_HINT | MRC_QP_RETRY_CNT | MRC_QP_CAP | MRC_QP_VENDOR_CFG;

bool legal_transition(ibv_qp_state from, ibv_qp_state to) {
  if (to == IBV_QPS_RESET || to == IBV_QPS_ERR) return true;
  switch (from) {
    case IBV_QPS_RESET:
      return to == IBV_QPS_INIT;
    case IBV_QPS_INIT:
      return to == IBV_QPS_INIT || to == IBV_QPS_RTR;
    case IBV_QPS_RTR:
      return to == IBV_QPS_RTS;
    case IBV_QPS_RTS:
      return to == IBV_QPS_RTS;
    default:
      return false;
  }
}

QpState engine_state(ibv_qp_state s) {
  switch (s) {
    case IBV_QPS_INIT:
      return QpState::kInit;
    case IBV_QPS_RTR:
      return QpState::kRtr;
    case IBV_QPS_RTS:
      return QpState::kRts;
    case IBV_QPS_ERR:
      return QpState::kErr;
    default:
      return QpState::kReset;
  }
}

uint32_t mtu_bytes(int m) {
  return m >= IBV_MTU_256 && m <= IBV_MTU_4096 ? 128u << m : 0;
}

}  // namespace

namespace mrc::api {

int build_paths(SoftDevice& dev, const ShmEvProfile& prof, NodeStateLayout& s, QpAttr& out,
                bool& auto_paths) {
  const uint8_t ports = static_cast<uint8_t>(dev.config.ports.size());
  ev::EvProfile p;
  auto_paths = prof.mode == MRC_CTL_EV_MODE_AUTO;
  if (auto_paths) {
    // AUTO (5.7): the device chooses the paths: its wire mode's generated list.
    const uint32_t n = dev.config.auto_evs_per_plane * ports;
    auto made = dev.config.ev_mode == ev::FormatMode::kStev ? ev::make_stev_profile(n, ports, 1)
                                                            : ev::make_udp_profile(n, ports, 1);
    if (!made || dev.config.ev_mode == ev::FormatMode::kSrv6) return EINVAL;
    p = std::move(*made);
  } else {
    const ShmFmtProfile* fmt = nullptr;
    for (auto& f : s.fmt)
      if (f.in_use && f.id == prof.fmt_id) fmt = &f;
    if (!fmt || fmt->mode != static_cast<uint8_t>(dev.config.ev_mode)) return EINVAL;
    p.mode = static_cast<ev::EvMode>(prof.mode);
    p.format.mode = static_cast<ev::FormatMode>(fmt->mode);
    for (uint32_t i = 0; i < fmt->field_count; ++i)
      p.format.fields.push_back({fmt->widths[i]});
    p.fields.assign(prof.fields, prof.fields + prof.field_count);
    for (uint32_t i = 0; i < prof.ev_count; ++i) {
      const ShmEvEntry& e = prof.entries[i];
      if (e.port < 1 || e.port > ports) return EINVAL;
      ev::EvEntry entry;
      std::memcpy(entry.value.data(), e.val, ev::kEvBytes);
      entry.port = static_cast<uint8_t>(e.port - 1);
      entry.state = e.state == static_cast<uint8_t>(ev::EvState::kDenied) ? ev::EvState::kDenied
                                                                          : ev::EvState::kGood;
      p.entries.push_back(entry);
    }
    p.ev_min_active = std::min<uint32_t>(prof.ev_min_active, prof.ev_count);
  }
  auto expanded = ev::expand_all(p);
  if (!expanded) return EINVAL;
  out.paths.clear();
  for (size_t i = 0; i < p.entries.size(); ++i)
    out.paths.push_back(PathDesc{(*expanded)[i], p.entries[i].port, p.entries[i].state});
  out.ev_min_active = std::max<uint32_t>(1, auto_paths ? 1 : prof.ev_min_active);
  return 0;
}

void apply_cc(const ShmCcProfile& prof, size_t ports, ev::FormatMode mode, QpAttr& out) {
  out.cc = CcSpec{};
  const uint64_t link_bps = 10'000'000'000ull * ports;
  if (prof.algorithm < 0) {
    out.cc.algorithm = CcAlgorithm::kNone;
    return;
  }
  out.cc.algorithm = CcAlgorithm::kNscc;
  mrc_ctl_cc_nscc_cfg c{};
  std::memcpy(&c, prof.config, sizeof c);
  cc::NsccConfig& n = out.cc.nscc;
  n.disable_qa = c.disable_qa != 0;
  n.adjust_bytes_threshold = c.adjust_bytes_threshold;
  n.adjust_period_threshold = ns(c.adjust_period_threshold);
  n.base_rtt = c.base_rtt ? ns(c.base_rtt) : us(50);
  n.eta = c.eta;
  n.fi = c.fi;
  n.fi_scale = c.fi_scale;
  if (c.gamma > 0) n.gamma = c.gamma;
  if (c.max_md_jump > 0) n.max_md_jump = c.max_md_jump;
  n.max_cwnd = c.max_cwnd;
  if (c.qa_gate) n.qa_gate = c.qa_gate;
  n.qa_threshold = ns(c.qa_threshold);
  n.target_delay = ns(c.target_delay);
  n.link_bps = link_bps;
  n.hashed_paths = mode != ev::FormatMode::kSrv6;
}

}  // namespace mrc::api

namespace {

void release_profiles(SoftDevice& dev, mrc_qp* qp) {
  if (qp->ev_profile < 0 && qp->cc_profile < 0) return;
  NodeLock guard(*dev.node);
  NodeStateLayout& s = dev.node->get();
  if (qp->ev_profile >= 0) {
    ShmEvProfile& p = s.ev[qp->ev_profile];
    NodeState::drop_qp_ref(p.active_qps, p.slot_qps, dev.slot);
  }
  if (qp->cc_profile >= 0) {
    ShmCcProfile& p = s.cc[qp->cc_profile];
    NodeState::drop_qp_ref(p.active_qps, p.slot_qps, dev.slot);
  }
  qp->ev_profile = qp->cc_profile = -1;
}

}  // namespace

MRC_EXPORT mrc_qp* mrc_create_qp(mrc_context* ctx, mrc_qp_init_attr* a) {
  if (!ctx || !a || !a->pd || device_of(a->pd->context) != ctx->dev)
    return fail_null<mrc_qp>(EINVAL);
  for (mrc_cq* cq : {a->send_cq, a->recv_cq})
    if (!cq || cq->ctx != ctx || cq->is_ev_cq) return fail_null<mrc_qp>(EINVAL);
  const uint64_t allowed = IBV_QP_EX_WITH_RDMA_WRITE | IBV_QP_EX_WITH_RDMA_WRITE_WITH_IMM;
  if (a->send_ops_flags & ~allowed) return fail_null<mrc_qp>(EINVAL);
  const uint32_t pv = static_cast<uint32_t>(a->protocol_version);
  if (pv != 0 && pv != MRC_PROTOCOL_VERSION_1) return fail_null<mrc_qp>(EINVAL);
  if (a->cap.max_send_wr > kMaxQueueDepth || a->cap.max_recv_wr > kMaxQueueDepth ||
      a->cap.max_send_sge > 1 || a->cap.max_recv_sge > 1 || a->cap.max_inline_data > 0)
    return fail_null<mrc_qp>(EINVAL);
  SoftDevice& dev = *ctx->dev;
  DeviceLock dlk(dev);
  QpCreateAttr ca;
  ca.sq_depth = std::max<uint32_t>(1, a->cap.max_send_wr);
  ca.rq_depth = std::max<uint32_t>(1, a->cap.max_recv_wr);
  ca.sq_sig_all = a->sq_sig_all != 0;
  auto qpn = dev.engine->create_qp(ca);
  if (!qpn) return fail_null<mrc_qp>(qpn.error() == Error::kNoResources ? ENOMEM : EINVAL);
  auto* qp = new mrc_qp();
  qp->ctx = ctx;
  qp->engine_qpn = *qpn;
  qp->qpn = (static_cast<uint32_t>(dev.slot) << 16) | *qpn;  // docs/c-api.md "QP numbers"
  a->cap.max_send_wr = ca.sq_depth;                          // actual capacities, as ibv_create_qp
  a->cap.max_recv_wr = ca.rq_depth;
  qp->init = *a;
  qp->engine_attr.reorder_window = 0;  // adaptive (min RTT), as net/session.h since the driver
                                       // hands packets over in kernel arrival order
  dev.qps[*qpn] = qp;
  for (mrc_cq* cq : {a->send_cq, a->recv_cq}) {
    std::lock_guard lk(cq->mu);
    ++cq->qp_refs;
  }
  std::lock_guard lk(ctx->mu);
  ++ctx->children;
  return qp;
}

MRC_EXPORT int mrc_destroy_qp(mrc_qp* qp) {
  if (!qp) return fail_errno(EINVAL);
  mrc_context* ctx = qp->ctx;
  SoftDevice& dev = *ctx->dev;
  {
    DeviceLock dlk(dev);
    if (!dev.engine->destroy_qp(qp->engine_qpn)) return fail_errno(EINVAL);
    dev.qps.erase(qp->engine_qpn);  // no further async events about it
    release_profiles(dev, qp);
    if (qp->hint) --qp->hint->qp_refs;
    for (mrc_cq* cq : {qp->init.send_cq, qp->init.recv_cq}) {
      std::lock_guard lk(cq->mu);
      --cq->qp_refs;
    }
  }
  // 3.7 mrc_ack_async_event: wait for the acknowledgement of every event returned about it.
  retire_async_events(ctx, qp, qp->async_unacked);
  delete qp;
  std::lock_guard lk(ctx->mu);
  --ctx->children;
  return 0;
}

MRC_EXPORT int mrc_get_qpn(mrc_qp* qp, uint32_t* qpn) {
  if (!qp || !qpn) {
    errno = EINVAL;
    return -1;
  }
  *qpn = qp->qpn;
  return 0;
}

MRC_EXPORT int mrc_query_qp(mrc_qp* qp, ibv_qp_attr* vattr, int vattr_mask, mrc_qp_attr* mattr,
                            int mrc_attr_mask, mrc_qp_init_attr* init_attr) {
  if (!qp || (vattr_mask && !vattr) || (mrc_attr_mask && !mattr) || (mrc_attr_mask & ~kMrcMaskAll))
    return fail_errno(EINVAL);
  DeviceLock dlk(*qp->ctx->dev);
  if (vattr) {  // like ibv_query_qp: every field, whatever the mask
    *vattr = qp->vattr;
    vattr->qp_state = qp->state;
    vattr->cur_qp_state = qp->state;
    vattr->cap = qp->init.cap;
  }
  if (mattr) {
    const mrc_qp_attr& c = qp->mrc_attr;
    if (mrc_attr_mask & MRC_QP_MAX_WIMM) mattr->wimm.max_wimm = c.wimm.max_wimm;
    if (mrc_attr_mask & MRC_QP_MAX_WIMM_DEST) mattr->wimm.max_wimm_dest = c.wimm.max_wimm_dest;
    if (mrc_attr_mask & MRC_QP_MPR) mattr->mpr.mpr = c.mpr.mpr;
    if (mrc_attr_mask & MRC_QP_MPR_DEST) mattr->mpr.mpr_dest = c.mpr.mpr_dest;
    if (mrc_attr_mask & MRC_QP_TIMEOUT) mattr->timeout = c.timeout;
    if (mrc_attr_mask & MRC_QP_EV_PROFILE_ID)
      mattr->profile.ev_profile_id = c.profile.ev_profile_id;
    if (mrc_attr_mask & MRC_QP_CC_PROFILE_ID)
      mattr->profile.cc_profile_id = c.profile.cc_profile_id;
    if (mrc_attr_mask & MRC_QP_HINT) mattr->qp_hint = qp->hint;
    if (mrc_attr_mask & MRC_QP_RETRY_CNT) mattr->retry = c.retry;
    if (mrc_attr_mask & MRC_QP_CAP) mattr->cap = c.cap;
    if (mrc_attr_mask & MRC_QP_VENDOR_CFG)
      std::memcpy(mattr->vendor_cfg, c.vendor_cfg, sizeof c.vendor_cfg);
  }
  if (init_attr) *init_attr = qp->init;
  return 0;
}

namespace {

// One mrc_modify_qp call: the caller's attributes and masks (vattr_mask without the verbs bits
// MRC ignores, when lenient), and what the call moves the QP to.
struct ModifyRequest {
  const ibv_qp_attr* vattr;
  int vattr_mask;
  const mrc_qp_attr* mattr;
  int mrc_attr_mask;
  ibv_qp_state cur = IBV_QPS_RESET;
  ibv_qp_state target = IBV_QPS_RESET;
  bool moving = false;
  bool reinit = false;  // INIT -> INIT with other profiles
  bool sets_up_paths() const { return (moving && target == IBV_QPS_INIT) || reinit; }
};

// The profiles a QP takes at INIT: their slots in the node state (-1: the device's defaults).
struct ProfileRefs {
  int ev_index = -1;
  int cc_index = -1;
  bool auto_paths = false;
};

// Before the device lock: the masks and the value ranges of 3.7. An errno, or 0. The verbs
// attributes MRC does not use are refused in strict mode, dropped (said once) by default (8).
int check_attribute_values(const mrc_qp& qp, bool lenient, ModifyRequest& r) {
  if (r.vattr_mask & ~(kSupportedVerbsMask | kUnsupportedVerbsMask)) return EINVAL;
  if (r.vattr_mask & kUnsupportedVerbsMask) {
    if (!lenient) return EINVAL;  // strict mode (3.7); by default ignored (8)
    warn_once(Leniency::kVerbsBits,
              "mrc_modify_qp: ignoring verbs attributes MRC does not use (mask 0x%x: "
              "IBV_QP_PORT, IBV_QP_TIMEOUT, IBV_QP_RETRY_CNT, IBV_QP_RNR_RETRY, ... as mrc.h "
              "lists them)",
              static_cast<unsigned>(r.vattr_mask & kUnsupportedVerbsMask));
    r.vattr_mask &= ~kUnsupportedVerbsMask;
  }
  const int m = r.mrc_attr_mask;
  const mrc_qp_attr* a = r.mattr;
  if (m & ~kMrcMaskAll) return EINVAL;
  if (m & MRC_QP_TIMEOUT && a->timeout > 24) return EINVAL;
  if (m & MRC_QP_RETRY_CNT && (a->retry.linear_cnt > 7 || a->retry.exp_cnt > 25)) return EINVAL;
  if (m & MRC_QP_MPR && (a->mpr.mpr == 0 || a->mpr.mpr > kMaxMpr)) return EINVAL;
  if (m & MRC_QP_MPR_DEST && (a->mpr.mpr_dest == 0 || a->mpr.mpr_dest > kMaxMpr)) return EINVAL;
  if (m & MRC_QP_MAX_WIMM && a->wimm.max_wimm > kMaxWimm) return EINVAL;
  if (m & MRC_QP_MAX_WIMM_DEST && a->wimm.max_wimm_dest > kMaxWimm) return EINVAL;
  if (m & MRC_QP_CAP) {
    const uint32_t known = MRC_QP_CAP_TRIM_NACK_DEST_UNSUPPORTED | MRC_QP_CAP_DYNAMIC_MPR |
                           MRC_QP_CAP_SVC_TIME_DEST_UNSUPPORTED;
    // No MRC_DEVICE_CAP_DYNAMIC_MPR on this device: asking for it is EINVAL (3.7), said once
    // on stderr too, since OCP's QP example requests it without checking the device's caps.
    if (a->cap & MRC_QP_CAP_DYNAMIC_MPR)
      warn_once(Leniency::kDynamicMpr,
                "mrc_modify_qp: MRC_QP_CAP_DYNAMIC_MPR refused (EINVAL): this device does not "
                "offer MRC_DEVICE_CAP_DYNAMIC_MPR (docs/c-api.md, Limitations)");
    if ((a->cap & ~known) || (a->cap & MRC_QP_CAP_DYNAMIC_MPR)) return EINVAL;
  }
  if (m & MRC_QP_HINT && a->qp_hint && a->qp_hint->ctx != qp.ctx) return EINVAL;
  if (r.vattr_mask & IBV_QP_PATH_MTU && !mtu_bytes(r.vattr->path_mtu)) return EINVAL;
  return 0;
}

// The state move (3.8) and the attributes each target requires, supplied now or in an earlier
// call (by default the device's defaults stand in for the MRC ones, said once). Fills
// r.cur, r.target, r.moving and r.reinit. An errno, or 0.
int check_transition(const mrc_qp& qp, bool lenient, ModifyRequest& r) {
  r.cur = qp.state;
  if (r.vattr_mask & IBV_QP_CUR_STATE && r.vattr->cur_qp_state != r.cur) return EINVAL;
  r.target = r.vattr_mask & IBV_QP_STATE ? r.vattr->qp_state : r.cur;
  if (!legal_transition(r.cur, r.target) && r.target != r.cur) return EINVAL;
  if (r.vattr_mask & IBV_QP_STATE && !legal_transition(r.cur, r.target)) return EINVAL;

  const int have_mrc = qp.mrc_attr_set | r.mrc_attr_mask;
  const int have_verbs = r.vattr_mask;
  auto missing = [&](int need_mrc, int need_verbs) {
    return (have_mrc & need_mrc) != need_mrc || (have_verbs & need_verbs) != need_verbs;
  };
  const ibv_qp_state target = r.target;
  r.moving = target != r.cur;
  const bool moving = r.moving;
  if (lenient && moving &&
      ((target == IBV_QPS_INIT &&
        missing(MRC_QP_HINT | MRC_QP_EV_PROFILE_ID | MRC_QP_CC_PROFILE_ID, 0)) ||
       (target == IBV_QPS_RTR && missing(MRC_QP_MAX_WIMM_DEST | MRC_QP_MPR_DEST, 0)) ||
       (target == IBV_QPS_RTS &&
        missing(MRC_QP_MAX_WIMM | MRC_QP_MPR | MRC_QP_RETRY_CNT | MRC_QP_TIMEOUT, 0))))
    warn_once(Leniency::kDefaults,
              "mrc_modify_qp: MRC attributes 3.8 requires were not given: the device's defaults "
              "are used (AUTO paths and NSCC without profile ids; MRC_SOFT_STRICT=1 refuses)");
  if (moving && target == IBV_QPS_INIT && !lenient &&
      missing(MRC_QP_HINT | MRC_QP_EV_PROFILE_ID | MRC_QP_CC_PROFILE_ID, 0))
    return EINVAL;
  if (moving && target == IBV_QPS_RTR &&
      missing(lenient ? 0 : MRC_QP_MAX_WIMM_DEST | MRC_QP_MPR_DEST,
              IBV_QP_AV | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN | IBV_QP_PATH_MTU))
    return EINVAL;
  if (moving && target == IBV_QPS_RTS &&
      missing(lenient ? 0 : MRC_QP_MAX_WIMM | MRC_QP_MPR | MRC_QP_RETRY_CNT | MRC_QP_TIMEOUT,
              IBV_QP_SQ_PSN))
    return EINVAL;
  // Profiles change at RESET -> INIT, or INIT -> INIT (an attribute-only modify in INIT, as
  // libibverbs allows INIT -> INIT): the engine QP is then re-initialised, which nothing can
  // observe in INIT (no traffic, no receives before RTR). Not later (EBUSY rules of 5.5).
  const bool profile_change = r.mrc_attr_mask & (MRC_QP_EV_PROFILE_ID | MRC_QP_CC_PROFILE_ID);
  if (profile_change && target != IBV_QPS_INIT) return EINVAL;
  r.reinit = !moving && r.cur == IBV_QPS_INIT && profile_change;
  return 0;
}

// Attribute-only modifies in RTR / RTS (no IBV_QP_STATE, or RTS -> RTS). 3.8's table names
// the MRC attributes of each target state, and the header's prose says they "may be changed"
// there; we read a modify whose target is the current state by the same row (docs/c-api.md):
//   RTR: MAX_WIMM_DEST changes on the live QP (Engine::update_qp); the RTS row's attributes
//        are kept for RTS (3.8, "accept an attribute supplied before its listed transition");
//   RTS: MAX_WIMM, TIMEOUT, RETRY_CNT change on the live QP (Engine::update_qp).
// Everything else the engine fixed at its transition may only be restated with its current
// value, a different one is EINVAL and changes nothing: MPR / MPR_DEST (they size the PSN
// rings; dynamic MPR, MRC_DEVICE_CAP_DYNAMIC_MPR, is not offered), CAP, the RTR row's
// attributes in RTS, and the connection attributes. Fills `live`; an errno, or 0.
int check_live_update(const mrc_qp& qp, const ModifyRequest& r, QpUpdate& live) {
  if (r.moving || (r.cur != IBV_QPS_RTR && r.cur != IBV_QPS_RTS)) return 0;
  const mrc_qp_attr& c = qp.mrc_attr;
  const ibv_qp_attr& v = qp.vattr;
  const bool rts = r.cur == IBV_QPS_RTS;
  const int m = r.mrc_attr_mask;
  const mrc_qp_attr* a = r.mattr;
  auto differs = [&](int bit, bool fixed, bool same) {
    return (m & bit) && fixed && (!(qp.mrc_attr_set & bit) || !same);
  };
  if (a && (differs(MRC_QP_MAX_WIMM_DEST, rts, a->wimm.max_wimm_dest == c.wimm.max_wimm_dest) ||
            differs(MRC_QP_MPR_DEST, true, a->mpr.mpr_dest == c.mpr.mpr_dest) ||
            differs(MRC_QP_CAP, true, a->cap == c.cap) ||
            differs(MRC_QP_MPR, rts, a->mpr.mpr == c.mpr.mpr)))
    return EINVAL;
  if (rts) {
    if (m & MRC_QP_TIMEOUT) live.timeout = a->timeout;
    if (m & MRC_QP_RETRY_CNT) {
      live.retry_linear = a->retry.linear_cnt;
      live.retry_exp = a->retry.exp_cnt;
    }
    if (m & MRC_QP_MAX_WIMM) live.max_wimm = std::max<uint16_t>(1, a->wimm.max_wimm);
  } else if (m & MRC_QP_MAX_WIMM_DEST) {
    live.max_wimm_dest = std::max<uint16_t>(1, a->wimm.max_wimm_dest);
  }
  const int vm = r.vattr_mask;
  const ibv_qp_attr* n = r.vattr;
  if (((vm & IBV_QP_PATH_MTU) && n->path_mtu != v.path_mtu) ||
      ((vm & IBV_QP_DEST_QPN) && n->dest_qp_num != v.dest_qp_num) ||
      ((vm & IBV_QP_RQ_PSN) && n->rq_psn != v.rq_psn) ||
      ((vm & IBV_QP_SQ_PSN) && rts && n->sq_psn != v.sq_psn) ||
      ((vm & IBV_QP_AV) && std::memcmp(n->ah_attr.grh.dgid.raw, v.ah_attr.grh.dgid.raw, 16) != 0))
    return EINVAL;
  return 0;
}

// At INIT: the paths of the QP's EV profile and the settings of its CC profile (both ONLINE),
// or the device's defaults (AUTO paths, NSCC) without profile ids. An errno, or 0.
int resolve_profiles(SoftDevice& dev, mrc_qp& qp, const ModifyRequest& r, QpAttr& next,
                     ProfileRefs& refs) {
  NodeLock guard(*dev.node);
  NodeStateLayout& s = dev.node->get();
  const int have_mrc = qp.mrc_attr_set | r.mrc_attr_mask;
  const bool have_ev = have_mrc & MRC_QP_EV_PROFILE_ID, have_cc = have_mrc & MRC_QP_CC_PROFILE_ID;
  const uint64_t ev_id = r.mrc_attr_mask & MRC_QP_EV_PROFILE_ID ? r.mattr->profile.ev_profile_id
                                                                : qp.mrc_attr.profile.ev_profile_id;
  const uint64_t cc_id = r.mrc_attr_mask & MRC_QP_CC_PROFILE_ID ? r.mattr->profile.cc_profile_id
                                                                : qp.mrc_attr.profile.cc_profile_id;
  if (have_ev) {
    ShmEvProfile* p = dev.node->find_ev(ev_id);
    if (!p || p->state != static_cast<uint8_t>(ProfileState::kOnline)) return EINVAL;
    if (int e = build_paths(dev, *p, s, next, refs.auto_paths)) return e;
    refs.ev_index = static_cast<int>(p - s.ev);
    qp.ev_generation = p->generation;
  } else {  // lenient default: the device's own AUTO paths
    ShmEvProfile autop{};
    autop.mode = MRC_CTL_EV_MODE_AUTO;
    if (int e = build_paths(dev, autop, s, next, refs.auto_paths)) return e;
  }
  if (have_cc) {
    ShmCcProfile* p = dev.node->find_cc(cc_id);
    if (!p || p->state != static_cast<uint8_t>(ProfileState::kOnline)) return EINVAL;
    apply_cc(*p, dev.config.ports.size(), dev.config.ev_mode, next);
    refs.cc_index = static_cast<int>(p - s.cc);
    qp.cc_generation = p->generation;
  } else {
    ShmCcProfile def{};
    def.algorithm = 0;
    apply_cc(def, dev.config.ports.size(), dev.config.ev_mode, next);
  }
  return 0;
}

// The request's MRC and verbs attributes into the engine's QP attributes (not the peer).
void apply_attributes(const ModifyRequest& r, QpAttr& next) {
  const int m = r.mrc_attr_mask;
  const mrc_qp_attr* a = r.mattr;
  if (m & MRC_QP_MAX_WIMM) next.max_wimm = std::max<uint16_t>(1, a->wimm.max_wimm);
  if (m & MRC_QP_MAX_WIMM_DEST) next.max_wimm_dest = std::max<uint16_t>(1, a->wimm.max_wimm_dest);
  if (m & MRC_QP_MPR) next.mpr = a->mpr.mpr;
  if (m & MRC_QP_MPR_DEST) next.mpr_dest = a->mpr.mpr_dest;
  if (m & MRC_QP_TIMEOUT) next.timeout = a->timeout;
  if (m & MRC_QP_RETRY_CNT) {
    next.retry_linear = a->retry.linear_cnt;
    next.retry_exp = a->retry.exp_cnt;
  }
  const int vm = r.vattr_mask;
  if (vm & IBV_QP_PATH_MTU) next.path_mtu = mtu_bytes(r.vattr->path_mtu);
  if (vm & IBV_QP_RQ_PSN) next.rq_psn = r.vattr->rq_psn & 0xFFFFFF;
  if (vm & IBV_QP_SQ_PSN) next.sq_psn = r.vattr->sq_psn & 0xFFFFFF;
  if (vm & IBV_QP_DEST_QPN) next.dest_qpn = r.vattr->dest_qp_num & 0xFFFF;
}

// IBV_QP_AV (3.7): the peer is the GID's host; its UDP port comes from the slot in the
// destination QPN (docs/c-api.md "QP numbers"); its address on every plane from the prefix
// rule. A peer seen first is registered with the data path. An errno, or 0.
int resolve_peer(SoftDevice& dev, const ibv_qp_attr& vattr, int vattr_mask, QpAttr& next) {
  if (!vattr.ah_attr.is_global) return EINVAL;
  if (!(vattr_mask & IBV_QP_DEST_QPN)) return EINVAL;
  in6_addr gid;
  std::memcpy(gid.s6_addr, vattr.ah_attr.grh.dgid.raw, 16);
  const uint32_t peer_slot = (vattr.dest_qp_num >> 16) & 0xFF;
  char key[64];
  std::snprintf(
      key, sizeof key, "%016llx%016llx/%u",
      static_cast<unsigned long long>(be64toh(vattr.ah_attr.grh.dgid.global.subnet_prefix)),
      static_cast<unsigned long long>(be64toh(vattr.ah_attr.grh.dgid.global.interface_id)),
      peer_slot);
  auto [it, fresh] = dev.peers.try_emplace(key, dev.next_peer);
  if (fresh) {
    ++dev.next_peer;
    std::vector<in6_addr> addrs;
    for (size_t p = 0; p < dev.config.ports.size(); ++p)
      addrs.push_back(peer_address(dev.config, gid, p));
    if (!dev.path->set_peer(it->second, addrs,
                            static_cast<uint16_t>(dev.config.udp_base_port + peer_slot))) {
      dev.peers.erase(it);
      return EINVAL;
    }
  }
  next.peer = it->second;
  return 0;
}

// The engine's QP: the transition, the live update, or (INIT -> INIT with other profiles)
// RESET + INIT, restoring the old attributes if the new ones are refused. An errno, or 0.
int apply_to_engine(SoftDevice& dev, mrc_qp& qp, const ModifyRequest& r, const QpAttr& next,
                    const QpUpdate& live) {
  if (r.moving) {
    if (auto st =
            dev.engine->modify_qp(dev.path->now(), qp.engine_qpn, engine_state(r.target), next);
        !st)
      return EINVAL;
  } else if (auto st = dev.engine->update_qp(dev.path->now(), qp.engine_qpn, live); !st) {
    return EINVAL;  // the values were range-checked above: only a QP gone to ERR
  }
  if (r.reinit) {
    const Time now = dev.path->now();
    (void)dev.engine->modify_qp(now, qp.engine_qpn, QpState::kReset, next);
    if (!dev.engine->modify_qp(now, qp.engine_qpn, QpState::kInit, next)) {
      (void)dev.engine->modify_qp(now, qp.engine_qpn, QpState::kInit, qp.engine_attr);
      return EINVAL;
    }
    release_profiles(dev, &qp);  // the new references are taken in commit_modify
  }
  return 0;
}

// The modify is committed: profile references, the hint, and the attributes as the caller
// will query them (mrc_query_qp).
void commit_modify(SoftDevice& dev, mrc_qp& qp, const ModifyRequest& r, const ProfileRefs& refs,
                   const QpAttr& next) {
  if (r.sets_up_paths()) {
    NodeLock guard(*dev.node);
    NodeStateLayout& s = dev.node->get();
    qp.ev_profile = refs.ev_index;
    qp.cc_profile = refs.cc_index;
    qp.auto_paths = refs.auto_paths;
    // Counted per process slot, so that a crashed process's QPs are reclaimed (node_state.h).
    if (refs.ev_index >= 0)
      NodeState::add_qp_ref(s.ev[refs.ev_index].active_qps, s.ev[refs.ev_index].slot_qps, dev.slot);
    if (refs.cc_index >= 0)
      NodeState::add_qp_ref(s.cc[refs.cc_index].active_qps, s.cc[refs.cc_index].slot_qps, dev.slot);
  }
  const bool to_reset = r.moving && r.target == IBV_QPS_RESET;
  if (to_reset) {
    release_profiles(dev, &qp);
    qp.mrc_attr_set = 0;
  }
  qp.engine_attr = next;
  const int m = r.mrc_attr_mask;
  const mrc_qp_attr* a = r.mattr;
  if (m & MRC_QP_HINT) {
    if (qp.hint) --qp.hint->qp_refs;
    qp.hint = a->qp_hint;
    if (qp.hint) ++qp.hint->qp_refs;
  }
  if (a) {
    mrc_qp_attr& c = qp.mrc_attr;
    if (m & MRC_QP_MAX_WIMM) c.wimm.max_wimm = a->wimm.max_wimm;
    if (m & MRC_QP_MAX_WIMM_DEST) c.wimm.max_wimm_dest = a->wimm.max_wimm_dest;
    if (m & MRC_QP_MPR) c.mpr.mpr = a->mpr.mpr;
    if (m & MRC_QP_MPR_DEST) c.mpr.mpr_dest = a->mpr.mpr_dest;
    if (m & MRC_QP_TIMEOUT) c.timeout = a->timeout;
    if (m & MRC_QP_EV_PROFILE_ID) c.profile.ev_profile_id = a->profile.ev_profile_id;
    if (m & MRC_QP_CC_PROFILE_ID) c.profile.cc_profile_id = a->profile.cc_profile_id;
    if (m & MRC_QP_RETRY_CNT) c.retry = a->retry;
    if (m & MRC_QP_CAP) c.cap = a->cap;
    if (m & MRC_QP_VENDOR_CFG) std::memcpy(c.vendor_cfg, a->vendor_cfg, sizeof c.vendor_cfg);
    c.qp_hint = qp.hint;
  }
  if (!to_reset) qp.mrc_attr_set |= m;
  ibv_qp_attr& v = qp.vattr;
  const int vm = r.vattr_mask;
  const ibv_qp_attr* n = r.vattr;
  if (vm & IBV_QP_ACCESS_FLAGS) v.qp_access_flags = n->qp_access_flags;
  if (vm & IBV_QP_PKEY_INDEX) v.pkey_index = n->pkey_index;
  if (vm & IBV_QP_AV) v.ah_attr = n->ah_attr;
  if (vm & IBV_QP_PATH_MTU) v.path_mtu = n->path_mtu;
  if (vm & IBV_QP_DEST_QPN) v.dest_qp_num = n->dest_qp_num;
  if (vm & IBV_QP_RQ_PSN) v.rq_psn = n->rq_psn;
  if (vm & IBV_QP_SQ_PSN) v.sq_psn = n->sq_psn;
  qp.state = r.target;
}

}  // namespace

// The steps in order: the values (3.7), then under the device lock the state move (3.8), the
// live update, the profiles and the peer, the engine's QP, and the commit: a refused modify
// changes nothing mrc_query_qp reports.
MRC_EXPORT int mrc_modify_qp(mrc_qp* qp, ibv_qp_attr* vattr, int vattr_mask, mrc_qp_attr* mattr,
                             int mrc_attr_mask) {
  if (!qp || (vattr_mask && !vattr) || (mrc_attr_mask && !mattr)) return fail_errno(EINVAL);
  SoftDevice& dev = *qp->ctx->dev;
  const bool lenient = !dev.config.strict;
  ModifyRequest r{vattr, vattr_mask, mattr, mrc_attr_mask};
  if (int e = check_attribute_values(*qp, lenient, r)) return fail_errno(e);

  DeviceLock dlk(dev);
  if (int e = check_transition(*qp, lenient, r)) return fail_errno(e);
  QpUpdate live;
  if (int e = check_live_update(*qp, r, live)) return fail_errno(e);
  QpAttr next = qp->engine_attr;
  ProfileRefs refs;
  if (r.sets_up_paths()) {
    if (int e = resolve_profiles(dev, *qp, r, next, refs)) return fail_errno(e);
  }
  apply_attributes(r, next);
  if (r.vattr_mask & IBV_QP_AV) {
    if (int e = resolve_peer(dev, *r.vattr, r.vattr_mask, next)) return fail_errno(e);
  }
  if (int e = apply_to_engine(dev, *qp, r, next, live)) return fail_errno(e);
  commit_modify(dev, *qp, r, refs, next);
  return 0;
}

MRC_EXPORT int mrc_post_recv(mrc_qp* qp, ibv_recv_wr* wr, ibv_recv_wr** bad_wr) {
  if (!qp || !wr || !bad_wr) {
    errno = EINVAL;
    return -1;
  }
  DeviceLock dlk(*qp->ctx->dev);
  for (ibv_recv_wr* w = wr; w; w = w->next) {
    int err = 0;
    if (qp->state != IBV_QPS_RTR && qp->state != IBV_QPS_RTS)
      err = EINVAL;
    else if (w->num_sge < 0 || w->num_sge > 1)
      err = EINVAL;
    else if (auto st = qp->ctx->dev->engine->post_recv(qp->engine_qpn, w->wr_id); !st)
      err = st.error() == Error::kQueueFull ? ENOMEM : EINVAL;
    if (err) {
      *bad_wr = w;
      errno = err;
      return -1;  // 3.7 / section 8 item 7: -1 with errno
    }
  }
  return 0;
}

MRC_EXPORT int mrc_post_send(mrc_qp* qp, ibv_send_wr* wr, ibv_send_wr** bad_wr) {
  if (!qp || !wr || !bad_wr) return fail_errno(EINVAL);
  SoftDevice& dev = *qp->ctx->dev;
  DeviceLock dlk(dev);
  const Time now = dev.path->now();
  for (ibv_send_wr* w = wr; w; w = w->next) {
    int err = 0;
    WriteWr ew;
    ew.wr_id = w->wr_id;
    if (qp->state != IBV_QPS_RTS)
      err = EINVAL;
    else if (w->opcode != IBV_WR_RDMA_WRITE && w->opcode != IBV_WR_RDMA_WRITE_WITH_IMM)
      err = EINVAL;  // WRITE / WRITE_IMM only (3.7)
    else if (w->num_sge < 0 || w->num_sge > 1 || (w->num_sge == 1 && !w->sg_list))
      err = EINVAL;
    else if (w->send_flags & IBV_SEND_INLINE)
      err = EINVAL;  // max_inline_data is 0
    if (!err) {
      ew.opcode = w->opcode == IBV_WR_RDMA_WRITE ? WrOpcode::kWrite : WrOpcode::kWriteImm;
      if (w->num_sge == 1) {
        ew.lkey = w->sg_list[0].lkey;
        ew.local_addr = w->sg_list[0].addr;
        ew.length = w->sg_list[0].length;
      }
      ew.remote_addr = w->wr.rdma.remote_addr;
      ew.rkey = w->wr.rdma.rkey;
      ew.imm = ntohl(w->imm_data);
      ew.signaled = qp->init.sq_sig_all || (w->send_flags & IBV_SEND_SIGNALED);
      if (auto st = dev.engine->post_write(now, qp->engine_qpn, ew); !st)
        err = st.error() == Error::kQueueFull ? ENOMEM : EINVAL;
    }
    if (err) {
      *bad_wr = w;
      return fail_errno(err);
    }
  }
  return 0;
}

// ---- Async events -----------------------------------------------------------------------------

MRC_EXPORT int mrc_get_async_event(mrc_context* ctx, mrc_async_event* event) {
  if (!ctx || !event) {
    errno = EINVAL;
    return -1;
  }
  const int fd = ctx->dev->async_fd;
  std::unique_lock lk(ctx->mu);
  if (ctx->async_events.empty() && (::fcntl(fd, F_GETFL) & O_NONBLOCK)) {
    errno = EAGAIN;  // as ibv_get_async_event on a non-blocking async_fd
    return -1;
  }
  ctx->async_cv.wait(lk, [ctx] { return !ctx->async_events.empty(); });
  *event = ctx->async_events.front();
  ctx->async_events.pop_front();
  uint64_t v;
  [[maybe_unused]] auto n = ::read(fd, &v, sizeof v);  // this event's count (semaphore)
  // Every returned event is acknowledged later; destroying its object waits for that (3.7).
  if (is_qp_event(event->event_type))
    ++event->element.qp->async_unacked;
  else if (is_cq_event(event->event_type))
    ++event->element.cq->async_unacked;
  return 0;
}

// 3.7 (interpretation): destroying the object an event refers to waits for this
// acknowledgement, as in libibverbs: mrc_destroy_qp / mrc_destroy_cq wait; port and device
// events name no object and need no bookkeeping (ibv_ack_async_event ignores them too).
MRC_EXPORT void mrc_ack_async_event(mrc_async_event* event) {
  if (!event) return;
  mrc_context* ctx = nullptr;
  int* unacked = nullptr;
  if (is_qp_event(event->event_type) && event->element.qp) {
    ctx = event->element.qp->ctx;
    unacked = &event->element.qp->async_unacked;
  } else if (is_cq_event(event->event_type) && event->element.cq) {
    ctx = event->element.cq->ctx;
    unacked = &event->element.cq->async_unacked;
  } else {
    return;
  }
  {
    std::lock_guard lk(ctx->mu);
    if (*unacked > 0) --*unacked;
  }
  ctx->async_cv.notify_all();
}
