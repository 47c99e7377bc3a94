// mrc.h (ocp-mrc-api.md section 3) over the software device. Return conventions per function
// as section 3.6 says: (A) 0 / -1 + errno, (B) 0 / positive errno (also set in errno), (C) count.
#include <arpa/inet.h>
#include <mrc.h>
#include <mrc_soft.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "api/api_errors.h"
#include "api/soft_device.h"

using namespace mrc;
using namespace mrc::api;

#define MRC_EXPORT extern "C" __attribute__((visibility("default")))

namespace {

constexpr uint8_t kMprResolution = 1;
constexpr uint32_t kMaxQpHints = 1024;
constexpr int kMaxCqe = 1 << 20;

void fill_device_attr(mrc_device_attr* attr) {
  *attr = mrc_device_attr{};
  attr->mrc_protocol_version = MRC_PROTOCOL_VERSION_1;
  attr->wimm_attr.max_wimm = kMaxWimm;
  attr->wimm_attr.max_wimm_dest = kMaxWimm;
  attr->mpr_attr.max_mpr = kMaxMpr;
  attr->mpr_attr.mpr_resolution = kMprResolution;
  attr->qp_attr.max_qp_hint = kMaxQpHints;
  // The engine sends and honours trim NACKs; dynamic MPR and service time are not
  // implemented (MRC_QP_CAP_DYNAMIC_MPR is then rejected with EINVAL, section 3.7).
  attr->cap = MRC_DEVICE_CAP_TRIM_NACK;
}

}  // namespace

// ---- Device and version (3.7) -----------------------------------------------------------------

MRC_EXPORT int mrc_query_device_ex(ibv_context* context, mrc_context* mcontext,
                                   mrc_device_attr* attr, int* supported) {
  if (!context || !attr || !supported) return fail_minus_one(EINVAL);
  if (mcontext && mcontext->vctx != context) return fail_minus_one(EINVAL);
  fill_device_attr(attr);
  *supported = device_of(context) != nullptr;
  if (!*supported) *attr = mrc_device_attr{};  // not MRC: not an error (3.7)
  return 0;
}

MRC_EXPORT int mrc_query_device(ibv_context* context, mrc_device_attr* attr, int* supported) {
  return mrc_query_device_ex(context, nullptr, attr, supported);  // 1.0.0 semantics = 1.0.1's
}

MRC_EXPORT int mrc_soft_query_counters(ibv_context* context, mrc_soft_counter* out, int max) {
  if (!context || max < 0 || (!out && max > 0)) return fail_minus_one(EINVAL);
  SoftDevice* dev = device_of(context);
  if (!dev) return fail_minus_one(EOPNOTSUPP);
  std::vector<std::pair<std::string, uint64_t>> all;
  {
    DeviceLock lk(*dev);
    all = dev->path->counters(*dev->engine);
  }
  for (int i = 0; i < max && i < static_cast<int>(all.size()); ++i) {
    mrc_soft_counter& c = out[i];
    std::memset(c.name, 0, sizeof c.name);
    std::memcpy(c.name, all[static_cast<size_t>(i)].first.data(),
                std::min(all[static_cast<size_t>(i)].first.size(), sizeof c.name - 1));
    c.value = all[static_cast<size_t>(i)].second;
  }
  return static_cast<int>(all.size());
}

MRC_EXPORT void mrc_query_version(uint32_t* current_version, uint32_t* last_supported_version,
                                  uint32_t* vendor_version,
                                  uint32_t* last_supported_vendor_version) {
  if (current_version) *current_version = MRC_API_CURRENT_VERSION;
  if (last_supported_version) *last_supported_version = MRC_API_LAST_SUPPORTED_VERSION;
  if (vendor_version) *vendor_version = MRC_VENDOR_API_CURRENT_VERSION;
  if (last_supported_vendor_version)
    *last_supported_vendor_version = MRC_VENDOR_API_LAST_SUPPORTED_VERSION;
}

// ---- Context ----------------------------------------------------------------------------------

MRC_EXPORT mrc_context* mrc_create_context(ibv_context* vcontext, mrc_context_attr* context_attr) {
  if (!vcontext) return fail_null<mrc_context>(EINVAL);
  SoftDevice* dev = device_of(vcontext);
  if (!dev) return fail_null<mrc_context>(EOPNOTSUPP);
  uint32_t version = 0;
  if (context_attr) {
    version = context_attr->mrc_api_version_used;
    const uint32_t vendor = context_attr->mrc_vendor_api_version_used;
    const bool bad = version > static_cast<uint32_t>(MRC_API_CURRENT_VERSION) ||
                     vendor > static_cast<uint32_t>(MRC_VENDOR_API_CURRENT_VERSION);
    if (bad && dev->config.strict) return fail_null<mrc_context>(EINVAL);
    if (bad) {  // an implausible version is "unspecified" (section 8)
      warn_once(Leniency::kVersion,
                "mrc_create_context: API version 0x%x is newer than this library's 0x%x: read as "
                "unspecified",
                version, static_cast<unsigned>(MRC_API_CURRENT_VERSION));
      version = 0;
    }
  }
  auto* ctx = new mrc_context();
  ctx->dev = dev;
  ctx->vctx = vcontext;
  ctx->api_version = version;
  DeviceLock lk(*dev);
  dev->contexts.push_back(ctx);
  return ctx;
}

// Interpretation (3.7): EBUSY while children exist; the examples destroy QPs and CQs first.
MRC_EXPORT int mrc_destroy_context(mrc_context* ctx) {
  if (!ctx) return fail_minus_one(EINVAL);
  SoftDevice* dev = ctx->dev;
  DeviceLock lk(*dev);
  {
    std::lock_guard clk(ctx->mu);
    if (ctx->children > 0) return fail_minus_one(EBUSY);
  }
  std::erase(dev->contexts, ctx);
  delete ctx;
  return 0;
}

// ---- Completion channels ----------------------------------------------------------------------

MRC_EXPORT int mrc_create_comp_channel(mrc_context* ctx, mrc_comp_channel** channel) {
  if (!ctx || !channel) return fail_errno(EINVAL);
  const int fd = ::eventfd(0, EFD_SEMAPHORE | EFD_CLOEXEC);
  if (fd < 0) return fail_errno(errno);
  auto* ch = new mrc_comp_channel();
  ch->ctx = ctx;
  ch->fd = fd;
  std::lock_guard lk(ctx->mu);
  ++ctx->children;
  *channel = ch;
  return 0;
}

MRC_EXPORT int mrc_get_comp_channel_fd(mrc_comp_channel* channel, int* fd) {
  if (!channel || !fd) return fail_minus_one(EINVAL);
  *fd = channel->fd;
  return 0;
}

MRC_EXPORT int mrc_destroy_comp_channel(mrc_comp_channel* channel) {
  if (!channel) return fail_errno(EINVAL);
  mrc_context* ctx = channel->ctx;
  DeviceLock dlk(*ctx->dev);  // no delivery in flight
  {
    std::lock_guard lk(channel->mu);
    if (channel->cq_refs > 0) return fail_errno(EBUSY);
  }
  ::close(channel->fd);
  delete channel;
  std::lock_guard lk(ctx->mu);
  --ctx->children;
  return 0;
}

// ---- CQs --------------------------------------------------------------------------------------

namespace mrc::api {
mrc_cq* create_cq(mrc_context* ctx, int cqe, void* cq_context, mrc_comp_channel* channel,
                  bool ev_cq) {
  if (!ctx || cqe < 1 || cqe > kMaxCqe || (channel && channel->ctx != ctx))
    return fail_null<mrc_cq>(EINVAL);
  auto* cq = new mrc_cq();
  cq->ctx = ctx;
  cq->capacity = cqe;
  cq->cq_context = cq_context;
  cq->channel = channel;
  cq->is_ev_cq = ev_cq;
  DeviceLock dlk(*ctx->dev);
  if (channel) {
    std::lock_guard lk(channel->mu);
    ++channel->cq_refs;
  }
  std::lock_guard lk(ctx->mu);
  ++ctx->children;
  if (ev_cq) {
    NodeLock guard(*ctx->dev->node);
    cq->ev_next_seq = ctx->dev->node->get().event_seq;  // events from now on
    ctx->ev_cqs.push_back(cq);
  }
  return cq;
}
}  // namespace mrc::api

MRC_EXPORT mrc_cq* mrc_create_cq(mrc_context* ctx, int cqe, void* cq_context,
                                 mrc_comp_channel* channel, int comp_vector) {
  if (comp_vector != 0) return fail_null<mrc_cq>(EINVAL);  // num_comp_vectors = 1
  return create_cq(ctx, cqe, cq_context, channel, false);
}

MRC_EXPORT int mrc_poll_cq(mrc_cq* cq, int num_entries, ibv_wc* wc) {
  if (!cq || num_entries < 0 || (num_entries > 0 && !wc) || cq->is_ev_cq) {
    errno = EINVAL;
    return -1;
  }
  std::lock_guard lk(cq->mu);
  int n = 0;
  while (n < num_entries && !cq->wcs.empty()) {
    wc[n++] = cq->wcs.front();
    cq->wcs.pop_front();
  }
  return n;
}

// Waits for every delivered completion event to be acknowledged (3.7).
MRC_EXPORT int mrc_destroy_cq(mrc_cq* cq) {
  if (!cq) return fail_errno(EINVAL);
  mrc_context* ctx = cq->ctx;
  {
    DeviceLock dlk(*ctx->dev);
    std::lock_guard lk(cq->mu);
    if (cq->qp_refs > 0) return fail_errno(EBUSY);
    std::lock_guard clk(ctx->mu);
    std::erase(ctx->ev_cqs, cq);  // no further EV events
  }
  {
    std::unique_lock lk(cq->mu);
    cq->acked_cv.wait(lk, [cq] { return cq->events_acked >= cq->events_delivered; });
  }
  // Async events about the CQ (IBV_EVENT_CQ_ERR) must be acknowledged too (3.7).
  retire_async_events(ctx, cq, cq->async_unacked);
  {
    DeviceLock dlk(*ctx->dev);
    if (cq->channel) {
      std::lock_guard lk(cq->channel->mu);
      --cq->channel->cq_refs;
      std::erase(cq->channel->pending, cq);
    }
    std::lock_guard clk(ctx->mu);
    --ctx->children;
  }
  delete cq;
  return 0;
}

MRC_EXPORT int mrc_req_notify_cq(mrc_cq* cq, int solicited_only) {
  if (!cq || !cq->channel) return fail_errno(EINVAL);
  std::lock_guard lk(cq->mu);
  cq->armed = true;
  cq->solicited_only = solicited_only != 0;
  return 0;
}

MRC_EXPORT int mrc_get_cq_event(mrc_comp_channel* channel, mrc_cq** cq, void** cq_context) {
  if (!channel || !cq || !cq_context) {
    errno = EINVAL;
    return -1;
  }
  uint64_t v = 0;
  if (::read(channel->fd, &v, sizeof v) != static_cast<ssize_t>(sizeof v)) return -1;  // errno
  std::lock_guard lk(channel->mu);
  if (channel->pending.empty()) {
    errno = EAGAIN;
    return -1;
  }
  *cq = channel->pending.front();
  channel->pending.pop_front();
  *cq_context = (*cq)->cq_context;
  return 0;
}

MRC_EXPORT void mrc_ack_cq_events(mrc_cq* cq, unsigned int nevents) {
  if (!cq) return;
  {
    std::lock_guard lk(cq->mu);
    cq->events_acked += nevents;
  }
  cq->acked_cv.notify_all();
}

// ---- QP hints ---------------------------------------------------------------------------------

namespace {
bool hint_values_ok(const mrc_qp_hint_attr& a, int mask) {
  if ((mask & MRC_QP_HINT_NUM_QPS_PER_PEER) && a.num_qps_per_peer < 0) return false;
  if ((mask & MRC_QP_HINT_NUM_SEND_PEERS) && a.num_send_peers < 0) return false;
  if ((mask & MRC_QP_HINT_NUM_REMOTE_RECV_PEERS) && a.num_remote_recv_peers < 0) return false;
  return true;
}
constexpr int kHintMaskAll = MRC_QP_HINT_NUM_QPS_PER_PEER | MRC_QP_HINT_NUM_SEND_PEERS |
                             MRC_QP_HINT_NUM_REMOTE_RECV_PEERS | MRC_QP_HINT_VENDOR_CFG;
uint32_t g_hint_count = 0;  // guarded by the context mutexes' device; counted per process
}  // namespace

MRC_EXPORT mrc_qp_hint* mrc_create_qp_hint(mrc_context* ctx, mrc_qp_hint_init_attr* init_attr) {
  if (!ctx || !init_attr || !hint_values_ok(init_attr->attr, kHintMaskAll))
    return fail_null<mrc_qp_hint>(EINVAL);
  DeviceLock dlk(*ctx->dev);
  if (g_hint_count >= kMaxQpHints) return fail_null<mrc_qp_hint>(ENOMEM);
  auto* h = new mrc_qp_hint();
  h->ctx = ctx;
  h->attr = init_attr->attr;
  ++g_hint_count;
  std::lock_guard lk(ctx->mu);
  ++ctx->children;
  return h;
}

MRC_EXPORT int mrc_destroy_qp_hint(mrc_qp_hint* hint) {
  if (!hint) return fail_minus_one(EINVAL);
  mrc_context* ctx = hint->ctx;
  DeviceLock dlk(*ctx->dev);
  if (hint->qp_refs > 0) return fail_minus_one(EBUSY);
  --g_hint_count;
  delete hint;
  std::lock_guard lk(ctx->mu);
  --ctx->children;
  return 0;
}

MRC_EXPORT int mrc_query_qp_hint(mrc_qp_hint* hint, mrc_qp_hint_attr* attr, int mask) {
  if (!hint || !attr || (mask & ~kHintMaskAll)) return fail_minus_one(EINVAL);
  DeviceLock dlk(*hint->ctx->dev);
  if (mask & MRC_QP_HINT_NUM_QPS_PER_PEER) attr->num_qps_per_peer = hint->attr.num_qps_per_peer;
  if (mask & MRC_QP_HINT_NUM_SEND_PEERS) attr->num_send_peers = hint->attr.num_send_peers;
  if (mask & MRC_QP_HINT_NUM_REMOTE_RECV_PEERS)
    attr->num_remote_recv_peers = hint->attr.num_remote_recv_peers;
  if (mask & MRC_QP_HINT_VENDOR_CFG)
    std::memcpy(attr->vendor_cfg, hint->attr.vendor_cfg, sizeof attr->vendor_cfg);
  return 0;
}

MRC_EXPORT int mrc_modify_qp_hint(mrc_qp_hint* hint, mrc_qp_hint_attr* attr, int mask) {
  if (!hint || !attr || (mask & ~kHintMaskAll) || !hint_values_ok(*attr, mask))
    return fail_minus_one(EINVAL);
  DeviceLock dlk(*hint->ctx->dev);
  if (mask & MRC_QP_HINT_NUM_QPS_PER_PEER) hint->attr.num_qps_per_peer = attr->num_qps_per_peer;
  if (mask & MRC_QP_HINT_NUM_SEND_PEERS) hint->attr.num_send_peers = attr->num_send_peers;
  if (mask & MRC_QP_HINT_NUM_REMOTE_RECV_PEERS)
    hint->attr.num_remote_recv_peers = attr->num_remote_recv_peers;
  if (mask & MRC_QP_HINT_VENDOR_CFG)
    std::memcpy(hint->attr.vendor_cfg, attr->vendor_cfg, sizeof attr->vendor_cfg);
  return 0;
}
