// The software device behind mrc.h / mrc_ctl.h (src/api): ibverbs calls, objects and their
// error paths, profile state machines (ocp-mrc-api.md 5.5) and the data path: two devices in
// one process (two UDP port slots) exchange WRITE_IMM over 2 planes on the Linux UDP driver,
// with plane 2 disabled mid-run. Needs root (a private network namespace with fd00:1::1 and
// fd00:2::1 on lo); skipped with a message otherwise.
#include <arpa/inet.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <filesystem>
#include <nlohmann/json.hpp>

#include <mrc_ctl.h>
#include <mrc_soft.h>
#include <poll.h>
#include <sched.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>
#include <fstream>
#include <iterator>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <map>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "api/soft_device.h"
#include "transport/cc/nscc.h"

namespace {

bool g_ready = false;
std::string g_skip_reason;

class NetnsEnvironment : public ::testing::Environment {
 public:
  void SetUp() override {
    if (::geteuid() != 0) {
      g_skip_reason = "needs root for a private network namespace";
      return;
    }
    if (::unshare(CLONE_NEWNET) != 0) {
      g_skip_reason = std::string("unshare(CLONE_NEWNET): ") + std::strerror(errno);
      return;
    }
    if (std::system("ip link set lo up && ip -6 addr add fd00:1::1/64 dev lo nodad && "
                    "ip -6 addr add fd00:2::1/64 dev lo nodad") != 0) {
      g_skip_reason = "cannot configure addresses with ip(8)";
      return;
    }
    shm_ = "/mrc_soft_test_" + std::to_string(::getpid());
    ::setenv("MRC_SOFT_SHM", shm_.c_str(), 1);
    ::setenv("MRC_SOFT_PORTS", "fd00:1::1/64,fd00:2::1/64", 1);
    ::setenv("MRC_SOFT_EV_MODE", "udp", 1);
    ::setenv("MRC_SOFT_UDP_PORT", "24791", 1);
    ::unsetenv("MRC_SOFT_CONFIG");
    // Conformance: the tests hold the device to the reference's rules (strict mode); the
    // default mode's leniency has a test of its own.
    ::setenv("MRC_SOFT_STRICT", "1", 1);
    g_ready = true;
  }
  void TearDown() override {
    if (!shm_.empty()) ::shm_unlink(shm_.c_str());
  }

 private:
  std::string shm_;
};

const auto* const g_env = ::testing::AddGlobalTestEnvironment(new NetnsEnvironment);

#define REQUIRE_NETNS() \
  if (!g_ready) GTEST_SKIP() << g_skip_reason

struct Device {
  ibv_context* ctx = nullptr;
  ibv_pd* pd = nullptr;
  mrc_context* mctx = nullptr;
  Device() {
    int n = 0;
    ibv_device** list = ibv_get_device_list(&n);
    if (n >= 1) ctx = ibv_open_device(list[0]);
    ibv_free_device_list(list);
    if (!ctx) return;
    pd = ibv_alloc_pd(ctx);
    mrc_context_attr a{MRC_API_CURRENT_VERSION, MRC_VENDOR_API_CURRENT_VERSION};
    mctx = mrc_create_context(ctx, &a);
  }
  ~Device() {
    if (mctx) {
      EXPECT_EQ(mrc_destroy_context(mctx), 0);
    }
    if (pd) {
      EXPECT_EQ(ibv_dealloc_pd(pd), 0);
    }
    if (ctx) {
      EXPECT_EQ(ibv_close_device(ctx), 0);
    }
  }
};

// Format 1 (UDP, one 16-bit slot); EV profile `ev_id` GEN over it (source ports 0xC000 + v,
// 8 per plane); CC profile `cc_id` NSCC. All ONLINE.
void configure_profiles(mrc_context* c, uint64_t fmt_id, uint64_t ev_id, uint64_t cc_id) {
  mrc_ctl_ev_fmt_field slot{16};
  mrc_ctl_ev_fmt_profile_attr f{};
  f.profile_state = MRC_CTL_PROFILE_OFFLINE;
  f.ev_fmt_mode = MRC_CTL_EV_FMT_MODE_UDP;
  f.ev_fmt_op = {MRC_CTL_EV_FMT_OP_MODIFY_FIELDS, &slot, 1};
  ASSERT_EQ(
      mrc_ctl_modify_ev_fmt_profile(
          c, fmt_id, &f,
          MRC_CTL_EV_FMT_PROFILE_STATE | MRC_CTL_EV_FMT_PROFILE_MODE | MRC_CTL_EV_FMT_PROFILE_OP),
      0)
      << std::strerror(errno);
  f.profile_state = MRC_CTL_PROFILE_ONLINE;
  ASSERT_EQ(mrc_ctl_modify_ev_fmt_profile(c, fmt_id, &f, MRC_CTL_EV_FMT_PROFILE_STATE), 0);
  mrc_ctl_ev_field field{16, 0xC000, 0, 7, 0x3FFF};
  mrc_ctl_ev_profile_attr e{};
  e.profile_state = MRC_CTL_PROFILE_OFFLINE;
  e.ev_mode = MRC_CTL_EV_MODE_GEN;
  e.ev_fmt_profile_id = fmt_id;
  e.ev_count = 16;
  e.ev_min_active = 2;
  e.ev_event_mask = MRC_CTL_EV_GOOD | MRC_CTL_EV_ASSUMED_BAD;
  e.ev_fields_op = {MRC_CTL_EV_FIELDS_OP_MODIFY_FIELDS, &field, 1};
  ASSERT_EQ(mrc_ctl_modify_ev_profile(
                c, ev_id, &e,
                MRC_CTL_EV_PROFILE_STATE | MRC_CTL_EV_PROFILE_MODE | MRC_CTL_EV_PROFILE_FMT_ID |
                    MRC_CTL_EV_PROFILE_COUNT | MRC_CTL_EV_PROFILE_MIN_ACTIVE |
                    MRC_CTL_EV_PROFILE_EVENT_MASK | MRC_CTL_EV_PROFILE_EV_FIELDS_OP),
            0)
      << std::strerror(errno);
  e.profile_state = MRC_CTL_PROFILE_ONLINE;
  ASSERT_EQ(mrc_ctl_modify_ev_profile(c, ev_id, &e, MRC_CTL_EV_PROFILE_STATE), 0)
      << std::strerror(errno);
  mrc_ctl_cc_nscc_cfg cfg{};
  cfg.base_rtt = 50'000;
  mrc_ctl_cc_profile_attr cc{};
  cc.profile_state = MRC_CTL_PROFILE_OFFLINE;
  cc.algorithm = "uet-1.0-nscc";
  cc.cc_config = &cfg;
  ASSERT_EQ(mrc_ctl_modify_cc_profile(c, cc_id, &cc,
                                      MRC_CTL_CC_PROFILE_STATE | MRC_CTL_CC_PROFILE_ALGORITHM |
                                          MRC_CTL_CC_PROFILE_CONFIG),
            0);
  cc.profile_state = MRC_CTL_PROFILE_ONLINE;
  ASSERT_EQ(mrc_ctl_modify_cc_profile(c, cc_id, &cc, MRC_CTL_CC_PROFILE_STATE), 0);
}

void teardown_profiles(mrc_context* c, uint64_t fmt_id, uint64_t ev_id, uint64_t cc_id) {
  mrc_ctl_ev_profile_attr e{};
  for (auto st : {MRC_CTL_PROFILE_OFFLINE, MRC_CTL_PROFILE_INIT}) {
    e.profile_state = st;
    EXPECT_EQ(mrc_ctl_modify_ev_profile(c, ev_id, &e, MRC_CTL_EV_PROFILE_STATE), 0);
  }
  mrc_ctl_ev_fmt_profile_attr f{};
  for (auto st : {MRC_CTL_PROFILE_OFFLINE, MRC_CTL_PROFILE_INIT}) {
    f.profile_state = st;
    EXPECT_EQ(mrc_ctl_modify_ev_fmt_profile(c, fmt_id, &f, MRC_CTL_EV_FMT_PROFILE_STATE), 0);
  }
  mrc_ctl_cc_profile_attr cc{};
  for (auto st : {MRC_CTL_PROFILE_OFFLINE, MRC_CTL_PROFILE_INIT}) {
    cc.profile_state = st;
    EXPECT_EQ(mrc_ctl_modify_cc_profile(c, cc_id, &cc, MRC_CTL_CC_PROFILE_STATE), 0);
  }
}

// The engine's view of a QP (what the progress thread applied), read under the device lock.
mrc::QpLimits engine_limits(mrc_qp* qp) {
  mrc::api::SoftDevice& dev = *qp->ctx->dev;
  mrc::api::DeviceLock lk(dev);
  return *dev.engine->qp_limits(qp->engine_qpn);
}

// Waits (up to 3 s) until `pred` holds for the QP's engine state, read under the device lock:
// changes of node state reach the engine on the progress thread's next turn.
template <typename Pred>
bool engine_eventually(mrc_qp* qp, Pred pred) {
  mrc::api::SoftDevice& dev = *qp->ctx->dev;
  const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(3);
  while (std::chrono::steady_clock::now() < end) {
    {
      mrc::api::DeviceLock lk(dev);
      if (pred(*dev.engine, qp->engine_qpn)) return true;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return false;
}

}  // namespace

TEST(SoftDevice, verbs_calls__work_on_the_soft_device) {
  REQUIRE_NETNS();
  int n = 0;
  ibv_device** list = ibv_get_device_list(&n);
  ASSERT_EQ(n, 1);
  EXPECT_STREQ(ibv_get_device_name(list[0]), "mrc_soft0");
  ibv_context* ctx = ibv_open_device(list[0]);
  ibv_free_device_list(list);
  ASSERT_NE(ctx, nullptr);
  ibv_device_attr da{};
  ASSERT_EQ(ibv_query_device(ctx, &da), 0);
  EXPECT_EQ(da.phys_port_cnt, 2);
  ibv_port_attr pa{};
  ASSERT_EQ(ibv_query_port(ctx, 1, &pa), 0);
  EXPECT_EQ(pa.state, IBV_PORT_ACTIVE);
  EXPECT_NE(ibv_query_port(ctx, 3, &pa), 0);
  ibv_gid gid{};
  ASSERT_EQ(ibv_query_gid(ctx, 2, 0, &gid), 0);
  char text[64];
  inet_ntop(AF_INET6, gid.raw, text, sizeof text);
  EXPECT_STREQ(text, "fd00:2::1");
  // Indices 0..3 (OCP's benchmark asks for 3, mlx5's RoCEv2 entry) all name the port's address.
  ibv_port_attr pa1{};
  ASSERT_EQ(ibv_query_port(ctx, 1, &pa1), 0);
  EXPECT_EQ(pa1.gid_tbl_len, 4);
  ibv_gid at3{};
  ASSERT_EQ(ibv_query_gid(ctx, 2, 3, &at3), 0);
  EXPECT_EQ(std::memcmp(at3.raw, gid.raw, 16), 0);
  EXPECT_EQ(ibv_query_gid(ctx, 1, 4, &gid), -1);
  EXPECT_EQ(ibv_query_gid(ctx, 1, -1, &gid), -1);
  ibv_pd* pd = ibv_alloc_pd(ctx);
  ASSERT_NE(pd, nullptr);
  std::vector<uint8_t> buf(4096);
  ibv_mr* mr =
      ibv_reg_mr(pd, buf.data(), buf.size(),
                 IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_RELAXED_ORDERING);
  ASSERT_NE(mr, nullptr);
  // int flags: verbs.h's ibv_reg_mr macro ANDs them with an enumerator of another enum type
  // (clang: -Wdeprecated-enum-enum-conversion).
  EXPECT_EQ(ibv_reg_mr(pd, buf.data(), 0, static_cast<int>(IBV_ACCESS_LOCAL_WRITE)), nullptr);
  EXPECT_EQ(ibv_reg_mr(pd, buf.data(), 64, static_cast<int>(IBV_ACCESS_REMOTE_WRITE)),
            nullptr);  // needs local
  EXPECT_EQ(ibv_dealloc_pd(pd), EBUSY);
  EXPECT_EQ(ibv_dereg_mr(mr), 0);
  EXPECT_EQ(ibv_dealloc_pd(pd), 0);
  EXPECT_STREQ(ibv_wc_status_str(IBV_WC_SUCCESS), "success");
  EXPECT_EQ(ibv_close_device(ctx), 0);
}

TEST(SoftDevice, context_cq_channel_hint__errors) {
  REQUIRE_NETNS();
  Device d;
  ASSERT_NE(d.mctx, nullptr);
  mrc_device_attr attr{};
  int supported = 0;
  ASSERT_EQ(mrc_query_device(d.ctx, &attr, &supported), 0);
  EXPECT_EQ(supported, 1);
  EXPECT_EQ(attr.mrc_protocol_version, static_cast<uint32_t>(MRC_PROTOCOL_VERSION_1));
  EXPECT_EQ(mrc_query_device_ex(d.ctx, d.mctx, &attr, &supported), 0);
  EXPECT_EQ(mrc_query_device(d.ctx, nullptr, &supported), -1);
  EXPECT_EQ(errno, EINVAL);
  mrc_context_attr too_new{MRC_API_VER(2, 0, 0), 0};
  EXPECT_EQ(mrc_create_context(d.ctx, &too_new), nullptr);
  EXPECT_EQ(errno, EINVAL);
  mrc_context* defaults = mrc_create_context(d.ctx, nullptr);
  ASSERT_NE(defaults, nullptr);
  EXPECT_EQ(mrc_destroy_context(defaults), 0);

  EXPECT_EQ(mrc_create_cq(d.mctx, 0, nullptr, nullptr, 0), nullptr);
  EXPECT_EQ(errno, EINVAL);
  mrc_comp_channel* ch = nullptr;
  ASSERT_EQ(mrc_create_comp_channel(d.mctx, &ch), 0);
  int fd = -1;
  ASSERT_EQ(mrc_get_comp_channel_fd(ch, &fd), 0);
  EXPECT_GE(fd, 0);
  mrc_cq* cq = mrc_create_cq(d.mctx, 16, this, ch, 0);
  ASSERT_NE(cq, nullptr);
  EXPECT_EQ(mrc_destroy_comp_channel(ch), EBUSY);
  EXPECT_EQ(mrc_destroy_context(d.mctx), -1);
  EXPECT_EQ(errno, EBUSY);
  ibv_wc wc[4];
  EXPECT_EQ(mrc_poll_cq(cq, 4, wc), 0);
  EXPECT_EQ(mrc_poll_cq(cq, -1, wc), -1);
  EXPECT_EQ(mrc_req_notify_cq(cq, 0), 0);
  EXPECT_EQ(mrc_destroy_cq(cq), 0);
  EXPECT_EQ(mrc_destroy_comp_channel(ch), 0);

  mrc_qp_hint_init_attr hi{};
  hi.attr.num_qps_per_peer = -1;
  EXPECT_EQ(mrc_create_qp_hint(d.mctx, &hi), nullptr);
  EXPECT_EQ(errno, EINVAL);
  hi.attr = {2, 4, 8, {}};
  mrc_qp_hint* h = mrc_create_qp_hint(d.mctx, &hi);
  ASSERT_NE(h, nullptr);
  mrc_qp_hint_attr q{};
  ASSERT_EQ(mrc_query_qp_hint(h, &q, MRC_QP_HINT_NUM_SEND_PEERS), 0);
  EXPECT_EQ(q.num_send_peers, 4);
  EXPECT_EQ(q.num_qps_per_peer, 0);  // not selected
  q.num_send_peers = -3;
  EXPECT_EQ(mrc_modify_qp_hint(h, &q, MRC_QP_HINT_NUM_SEND_PEERS), -1);
  EXPECT_EQ(errno, EINVAL);
  q.num_send_peers = 9;
  EXPECT_EQ(mrc_modify_qp_hint(h, &q, MRC_QP_HINT_NUM_SEND_PEERS), 0);
  EXPECT_EQ(mrc_destroy_qp_hint(h), 0);
}

TEST(SoftDevice, mrc_ctl_modify_profiles__state_machines_and_errors) {
  REQUIRE_NETNS();
  Device d;
  ASSERT_NE(d.mctx, nullptr);
  mrc_ctl_device_attr ca{};
  ASSERT_EQ(mrc_ctl_query_device(d.ctx, &ca), 0);
  EXPECT_EQ(ca.phy_port_mask, 0x6u);
  EXPECT_STREQ(ca.cc.algorithms[0], "uet-1.0-nscc");
  EXPECT_EQ(ca.cc.algorithms[1], nullptr);
  const uint32_t free_before = ca.ev.ev_free_count;

  // Format profile: INIT -> ONLINE is illegal; OFFLINE needs MODE; too wide is E2BIG.
  mrc_ctl_ev_fmt_field wide[2] = {{32}, {16}};
  mrc_ctl_ev_fmt_profile_attr f{};
  f.profile_state = MRC_CTL_PROFILE_ONLINE;
  EXPECT_EQ(mrc_ctl_modify_ev_fmt_profile(d.mctx, 100, &f, MRC_CTL_EV_FMT_PROFILE_STATE), -1);
  EXPECT_EQ(errno, EINVAL);
  f.profile_state = MRC_CTL_PROFILE_OFFLINE;
  EXPECT_EQ(mrc_ctl_modify_ev_fmt_profile(d.mctx, 100, &f, MRC_CTL_EV_FMT_PROFILE_STATE), -1);
  EXPECT_EQ(errno, EINVAL);
  f.ev_fmt_mode = MRC_CTL_EV_FMT_MODE_STEV;
  f.ev_fmt_op = {MRC_CTL_EV_FMT_OP_MODIFY_FIELDS, wide, 2};
  const int fmask =
      MRC_CTL_EV_FMT_PROFILE_STATE | MRC_CTL_EV_FMT_PROFILE_MODE | MRC_CTL_EV_FMT_PROFILE_OP;
  EXPECT_EQ(mrc_ctl_modify_ev_fmt_profile(d.mctx, 100, &f, fmask), -1);
  EXPECT_EQ(errno, E2BIG);  // 48 bits > STEV's 32
  // Worked example 1's format: two 16-bit STEV fields.
  mrc_ctl_ev_fmt_field two16[2] = {{16}, {16}};
  f.ev_fmt_op = {MRC_CTL_EV_FMT_OP_MODIFY_FIELDS, two16, 2};
  ASSERT_EQ(mrc_ctl_modify_ev_fmt_profile(d.mctx, 100, &f, fmask), 0);
  mrc_ctl_ev_fmt_field out[1];
  mrc_ctl_ev_fmt_profile_attr qf{};
  qf.ev_fmt_op = {MRC_CTL_EV_FMT_OP_QUERY_FIELDS, out, 1};
  EXPECT_EQ(mrc_ctl_query_ev_fmt_profile(d.mctx, 100, &qf, MRC_CTL_EV_FMT_PROFILE_OP), -1);
  EXPECT_EQ(errno, E2BIG);
  EXPECT_EQ(qf.ev_fmt_op.fmt_field_count, 2);  // the needed size is returned
  f.profile_state = MRC_CTL_PROFILE_ONLINE;
  ASSERT_EQ(mrc_ctl_modify_ev_fmt_profile(d.mctx, 100, &f, MRC_CTL_EV_FMT_PROFILE_STATE), 0);

  // EV profile, explicit, on worked example 1's fields.
  mrc_ctl_ev_field fields[2] = {{16, 0x1000, 0, 255, 0x0F0F}, {16, 0x2000, 0, 255, 0x0F0F}};
  mrc_ctl_ev_profile_attr e{};
  e.profile_state = MRC_CTL_PROFILE_OFFLINE;
  e.ev_mode = MRC_CTL_EV_MODE_EXP;
  e.ev_fmt_profile_id = 100;
  e.ev_count = 2;
  e.ev_fields_op = {MRC_CTL_EV_FIELDS_OP_MODIFY_FIELDS, fields, 2};
  const int off_mask = MRC_CTL_EV_PROFILE_STATE | MRC_CTL_EV_PROFILE_MODE |
                       MRC_CTL_EV_PROFILE_FMT_ID | MRC_CTL_EV_PROFILE_COUNT |
                       MRC_CTL_EV_PROFILE_EV_FIELDS_OP;
  EXPECT_EQ(mrc_ctl_modify_ev_profile(d.mctx, 200, &e, off_mask | MRC_CTL_EV_PROFILE_EV_OP), -1);
  EXPECT_EQ(errno, EINVAL);  // both operation bits
  ASSERT_EQ(mrc_ctl_modify_ev_profile(d.mctx, 200, &e, off_mask), 0) << std::strerror(errno);
  ASSERT_EQ(mrc_ctl_query_device(d.ctx, &ca), 0);
  EXPECT_EQ(ca.ev.ev_free_count, free_before - 2);
  // Not populated yet: ONLINE refused.
  e.profile_state = MRC_CTL_PROFILE_ONLINE;
  e.ev_min_active = 1;
  e.ev_event_mask = MRC_CTL_EV_GOOD;
  const int on_mask =
      MRC_CTL_EV_PROFILE_STATE | MRC_CTL_EV_PROFILE_MIN_ACTIVE | MRC_CTL_EV_PROFILE_EVENT_MASK;
  EXPECT_EQ(mrc_ctl_modify_ev_profile(d.mctx, 200, &e, on_mask), -1);
  EXPECT_EQ(errno, EINVAL);
  // REPLACE_EV populates UNPOPULATED entries; a missing EV is ENOENT.
  mrc_ctl_ev_op_entry ops[2]{};
  for (int i = 0; i < 2; ++i) {
    ops[i].ev = MRC_CTL_EV_UNPOPULATED;
    ops[i].ev_new.val[0] = 0x33;
    ops[i].ev_new.val[1] = static_cast<uint8_t>(0x12 + i);
    ops[i].ev_new.port = static_cast<uint8_t>(1 + i);
    ops[i].state = MRC_CTL_EV_GOOD;
  }
  e.ev_op = {MRC_CTL_EV_OP_REPLACE_EV, ops, 2};
  ASSERT_EQ(mrc_ctl_modify_ev_profile(d.mctx, 200, &e, MRC_CTL_EV_PROFILE_EV_OP), 0);
  EXPECT_EQ(mrc_ctl_modify_ev_profile(d.mctx, 200, &e, MRC_CTL_EV_PROFILE_EV_OP), -1);
  EXPECT_EQ(errno, ENOENT);  // no UNPOPULATED entry left
  e.ev_event_mask = MRC_CTL_EV_DENIED;
  EXPECT_EQ(mrc_ctl_modify_ev_profile(d.mctx, 200, &e, on_mask), -1);
  EXPECT_EQ(errno, EINVAL);  // only GOOD / ASSUMED_BAD may be reported
  e.ev_event_mask = MRC_CTL_EV_GOOD;
  ASSERT_EQ(mrc_ctl_modify_ev_profile(d.mctx, 200, &e, on_mask), 0) << std::strerror(errno);
  // The format cannot go OFFLINE under an ONLINE EV profile.
  f.profile_state = MRC_CTL_PROFILE_OFFLINE;
  EXPECT_EQ(mrc_ctl_modify_ev_fmt_profile(d.mctx, 100, &f, MRC_CTL_EV_FMT_PROFILE_STATE), -1);
  EXPECT_EQ(errno, EBUSY);
  // QUERY_EV_ARRAY with a short buffer: E2BIG and the needed count.
  mrc_ctl_ev_op_entry arr[2]{};
  mrc_ctl_ev_profile_attr q{};
  q.ev_op = {MRC_CTL_EV_OP_QUERY_EV_ARRAY, arr, 1};
  EXPECT_EQ(mrc_ctl_query_ev_profile(d.mctx, 200, &q, MRC_CTL_EV_PROFILE_EV_OP), -1);
  EXPECT_EQ(errno, E2BIG);
  EXPECT_EQ(q.ev_op.entry_count, 2);
  ASSERT_EQ(mrc_ctl_query_ev_profile(d.mctx, 200, &q, MRC_CTL_EV_PROFILE_EV_OP), 0);
  EXPECT_EQ(arr[1].ev.val[1], 0x13);
  EXPECT_EQ(arr[1].ev.port, 2);
  EXPECT_EQ(arr[1].state, MRC_CTL_EV_GOOD);
  // Deny one EV, read its state back.
  mrc_ctl_ev_op_entry deny{};
  deny.ev = arr[0].ev;
  deny.state = MRC_CTL_EV_DENIED;
  e.ev_op = {MRC_CTL_EV_OP_MODIFY_EV_STATE, &deny, 1};
  ASSERT_EQ(mrc_ctl_modify_ev_profile(d.mctx, 200, &e, MRC_CTL_EV_PROFILE_EV_OP), 0);
  deny.state = MRC_CTL_EV_ASSUMED_BAD;
  EXPECT_EQ(mrc_ctl_modify_ev_profile(d.mctx, 200, &e, MRC_CTL_EV_PROFILE_EV_OP), -1);
  EXPECT_EQ(errno, EINVAL);
  q.ev_op = {MRC_CTL_EV_OP_QUERY_EV_STATE, &deny, 1};
  ASSERT_EQ(mrc_ctl_query_ev_profile(d.mctx, 200, &q, MRC_CTL_EV_PROFILE_EV_OP), 0);
  EXPECT_EQ(deny.state, MRC_CTL_EV_DENIED);
  // ONLINE with MODIFY_ONLINE (5.5): EVENT_MASK, REPLACE_EV and MODIFY_FIELDS; MODE, FMT_ID,
  // COUNT and MIN_ACTIVE stay EINVAL.
  EXPECT_TRUE(ca.opt_attr & MRC_CTL_OPT_CAP_EV_PROFILE_MODIFY_ONLINE);
  EXPECT_TRUE(ca.opt_attr & MRC_CTL_OPT_CAP_CC_PROFILE_MODIFY_ONLINE);
  e.ev_event_mask = MRC_CTL_EV_GOOD | MRC_CTL_EV_ASSUMED_BAD;
  ASSERT_EQ(mrc_ctl_modify_ev_profile(d.mctx, 200, &e, MRC_CTL_EV_PROFILE_EVENT_MASK), 0);
  for (int bit : {MRC_CTL_EV_PROFILE_MODE, MRC_CTL_EV_PROFILE_FMT_ID, MRC_CTL_EV_PROFILE_COUNT,
                  MRC_CTL_EV_PROFILE_MIN_ACTIVE}) {
    EXPECT_EQ(mrc_ctl_modify_ev_profile(d.mctx, 200, &e, bit), -1) << bit;
    EXPECT_EQ(errno, EINVAL) << bit;
  }
  mrc_ctl_ev_op_entry repl{};
  repl.ev = arr[1].ev;
  repl.ev_new.val[0] = 0x44;
  repl.ev_new.val[1] = 0x55;
  repl.ev_new.val[2] = 0x01;  // beyond the 16 bits the fields consume: does not expand (6)
  repl.ev_new.port = 2;
  repl.state = MRC_CTL_EV_GOOD;
  e.ev_op = {MRC_CTL_EV_OP_REPLACE_EV, &repl, 1};
  EXPECT_EQ(mrc_ctl_modify_ev_profile(d.mctx, 200, &e, MRC_CTL_EV_PROFILE_EV_OP), -1);
  EXPECT_EQ(errno, EINVAL);
  repl.ev_new.val[2] = 0;
  ASSERT_EQ(mrc_ctl_modify_ev_profile(d.mctx, 200, &e, MRC_CTL_EV_PROFILE_EV_OP), 0)
      << std::strerror(errno);
  q.ev_op = {MRC_CTL_EV_OP_QUERY_EV_ARRAY, arr, 2};
  ASSERT_EQ(mrc_ctl_query_ev_profile(d.mctx, 200, &q, MRC_CTL_EV_PROFILE_EV_OP), 0);
  EXPECT_EQ(arr[1].ev.val[0], 0x44);
  EXPECT_EQ(arr[1].ev.val[1], 0x55);
  EXPECT_EQ(arr[0].state, MRC_CTL_EV_DENIED);  // the other entry is untouched
  // MODIFY_FIELDS: fields consuming only 8 bits would leave the array's values with stray
  // bits: EINVAL, nothing changes; fields consuming the same 16 bits are taken.
  mrc_ctl_ev_field narrow[2] = {{16, 0x1000, 0, 15, 0x000F}, {16, 0x2000, 0, 15, 0x000F}};
  e.ev_fields_op = {MRC_CTL_EV_FIELDS_OP_MODIFY_FIELDS, narrow, 2};
  EXPECT_EQ(mrc_ctl_modify_ev_profile(d.mctx, 200, &e, MRC_CTL_EV_PROFILE_EV_FIELDS_OP), -1);
  EXPECT_EQ(errno, EINVAL);
  mrc_ctl_ev_field moved[2] = {{16, 0x3000, 0, 255, 0x00FF}, {16, 0x4000, 0, 255, 0x00FF}};
  e.ev_fields_op = {MRC_CTL_EV_FIELDS_OP_MODIFY_FIELDS, moved, 2};
  ASSERT_EQ(mrc_ctl_modify_ev_profile(d.mctx, 200, &e, MRC_CTL_EV_PROFILE_EV_FIELDS_OP), 0)
      << std::strerror(errno);
  ASSERT_EQ(mrc_ctl_query_ev_profile(d.mctx, 200, &q, MRC_CTL_EV_PROFILE_EV_OP), 0);
  EXPECT_EQ(arr[1].ev.val[0], 0x44);  // EXP: the controller's array stays
  EXPECT_EQ(arr[0].state, MRC_CTL_EV_DENIED);
  // Query fields: E2BIG with the needed count, then the fields.
  mrc_ctl_ev_field got[2]{};
  q.ev_fields_op = {MRC_CTL_EV_FIELDS_OP_QUERY_FIELDS, got, 0};
  EXPECT_EQ(mrc_ctl_query_ev_profile(d.mctx, 200, &q, MRC_CTL_EV_PROFILE_EV_FIELDS_OP), -1);
  EXPECT_EQ(errno, E2BIG);
  EXPECT_EQ(q.ev_fields_op.field_count, 2);
  ASSERT_EQ(mrc_ctl_query_ev_profile(d.mctx, 200, &q, MRC_CTL_EV_PROFILE_EV_FIELDS_OP), 0);
  EXPECT_EQ(got[1].init_val, 0x4000u);  // the fields set ONLINE above
  // ONLINE -> INIT is illegal; ONLINE -> OFFLINE -> INIT frees the entries.
  e.profile_state = MRC_CTL_PROFILE_INIT;
  EXPECT_EQ(mrc_ctl_modify_ev_profile(d.mctx, 200, &e, MRC_CTL_EV_PROFILE_STATE), -1);
  EXPECT_EQ(errno, EINVAL);
  for (auto st : {MRC_CTL_PROFILE_OFFLINE, MRC_CTL_PROFILE_INIT}) {
    e.profile_state = st;
    ASSERT_EQ(mrc_ctl_modify_ev_profile(d.mctx, 200, &e, MRC_CTL_EV_PROFILE_STATE), 0);
  }
  ASSERT_EQ(mrc_ctl_query_device(d.ctx, &ca), 0);
  EXPECT_EQ(ca.ev.ev_free_count, free_before);
  for (auto st : {MRC_CTL_PROFILE_OFFLINE, MRC_CTL_PROFILE_INIT}) {
    f.profile_state = st;
    ASSERT_EQ(mrc_ctl_modify_ev_fmt_profile(d.mctx, 100, &f, MRC_CTL_EV_FMT_PROFILE_STATE), 0);
  }

  // CC: unknown algorithm EINVAL; NULL disables CC; query returns library-owned storage.
  mrc_ctl_cc_profile_attr cc{};
  cc.profile_state = MRC_CTL_PROFILE_OFFLINE;
  cc.algorithm = "cubic";
  EXPECT_EQ(mrc_ctl_modify_cc_profile(d.mctx, 300, &cc,
                                      MRC_CTL_CC_PROFILE_STATE | MRC_CTL_CC_PROFILE_ALGORITHM),
            -1);
  EXPECT_EQ(errno, EINVAL);
  mrc_ctl_cc_nscc_cfg cfg{};
  cfg.base_rtt = 12345;
  cc.algorithm = "uet-1.0-nscc";
  cc.cc_config = &cfg;
  ASSERT_EQ(mrc_ctl_modify_cc_profile(d.mctx, 300, &cc,
                                      MRC_CTL_CC_PROFILE_STATE | MRC_CTL_CC_PROFILE_ALGORITHM |
                                          MRC_CTL_CC_PROFILE_CONFIG),
            0);
  cfg.base_rtt = 1;  // copied: the profile keeps 12345
  mrc_ctl_cc_profile_attr qc{};
  ASSERT_EQ(mrc_ctl_query_cc_profile(d.mctx, 300, &qc,
                                     MRC_CTL_CC_PROFILE_STATE | MRC_CTL_CC_PROFILE_ALGORITHM |
                                         MRC_CTL_CC_PROFILE_CONFIG),
            0);
  EXPECT_EQ(qc.profile_state, MRC_CTL_PROFILE_OFFLINE);
  EXPECT_STREQ(qc.algorithm, "uet-1.0-nscc");
  EXPECT_EQ(static_cast<const mrc_ctl_cc_nscc_cfg*>(qc.cc_config)->base_rtt, 12345u);
  // ONLINE: CONFIG may change (MODIFY_ONLINE), ALGORITHM not.
  cc.profile_state = MRC_CTL_PROFILE_ONLINE;
  ASSERT_EQ(mrc_ctl_modify_cc_profile(d.mctx, 300, &cc, MRC_CTL_CC_PROFILE_STATE), 0);
  cfg.base_rtt = 23456;
  ASSERT_EQ(mrc_ctl_modify_cc_profile(d.mctx, 300, &cc, MRC_CTL_CC_PROFILE_CONFIG), 0);
  ASSERT_EQ(mrc_ctl_query_cc_profile(d.mctx, 300, &qc, MRC_CTL_CC_PROFILE_CONFIG), 0);
  EXPECT_EQ(static_cast<const mrc_ctl_cc_nscc_cfg*>(qc.cc_config)->base_rtt, 23456u);
  EXPECT_EQ(mrc_ctl_modify_cc_profile(d.mctx, 300, &cc, MRC_CTL_CC_PROFILE_ALGORITHM), -1);
  EXPECT_EQ(errno, EINVAL);
  cc.cc_config = nullptr;  // NSCC needs a configuration
  EXPECT_EQ(mrc_ctl_modify_cc_profile(d.mctx, 300, &cc, MRC_CTL_CC_PROFILE_CONFIG), -1);
  EXPECT_EQ(errno, EINVAL);
  cc.profile_state = MRC_CTL_PROFILE_OFFLINE;
  ASSERT_EQ(mrc_ctl_modify_cc_profile(d.mctx, 300, &cc, MRC_CTL_CC_PROFILE_STATE), 0);
  cc.profile_state = MRC_CTL_PROFILE_INIT;
  ASSERT_EQ(mrc_ctl_modify_cc_profile(d.mctx, 300, &cc, MRC_CTL_CC_PROFILE_STATE), 0);

  // Ports.
  mrc_ctl_port_attr pa{};
  EXPECT_EQ(mrc_ctl_query_port(d.mctx, 3, &pa, MRC_CTL_PORT_ADMIN_STATE), -1);
  EXPECT_EQ(errno, EINVAL);
  ASSERT_EQ(mrc_ctl_query_port(d.mctx, 1, &pa, MRC_CTL_PORT_ADMIN_STATE), 0);
  EXPECT_EQ(pa.port_admin_state, MRC_CTL_PORT_ADMIN_ENABLED);
}

// MRC_SOFT_QLOG: the device's engine writes its event log (transport/event_log.h) into
// <prefix>.<pid>-<slot>.jsonl, one JSON object per line; without it, no file.
TEST(SoftDevice, open__mrc_soft_qlog_writes_the_engine_event_log) {
  REQUIRE_NETNS();
  const std::string prefix = "/tmp/mrc_api_qlog_" + std::to_string(::getpid());
  ::setenv("MRC_SOFT_QLOG", prefix.c_str(), 1);
  std::vector<std::string> files;
  {
    Device a;
    ::unsetenv("MRC_SOFT_QLOG");
    ASSERT_NE(a.mctx, nullptr);
    for (const auto& e : std::filesystem::directory_iterator("/tmp"))
      if (e.path().string().rfind(prefix + ".", 0) == 0) files.push_back(e.path().string());
    ASSERT_EQ(files.size(), 1u);
    EXPECT_NE(files[0].find("." + std::to_string(::getpid()) + "-"), std::string::npos) << files[0];
    Device b;  // opened without the variable: no file of its own
  }
  size_t files_after = 0;
  for (const auto& e : std::filesystem::directory_iterator("/tmp"))
    files_after += e.path().string().rfind(prefix + ".", 0) == 0;
  EXPECT_EQ(files_after, 1u);
  std::ifstream in(files[0]);
  std::string line;
  while (std::getline(in, line))
    EXPECT_TRUE(nlohmann::json::parse(line, nullptr, false).is_object()) << line;
  std::filesystem::remove(files[0]);
}

TEST(SoftDevice, write_imm__over_two_planes_with_a_plane_disabled_mid_run) {
  REQUIRE_NETNS();
  Device a, b;
  ASSERT_NE(a.mctx, nullptr);
  ASSERT_NE(b.mctx, nullptr);
  configure_profiles(a.mctx, 11, 12, 13);

  constexpr size_t kMsg = 64 * 1024;
  constexpr int kMessages = 200;
  std::vector<uint8_t> src(kMsg), dst(kMsg * kMessages, 0);
  for (size_t i = 0; i < src.size(); ++i)
    src[i] = static_cast<uint8_t>(i * 7 + 1);
  const int access = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE;
  ibv_mr* smr = ibv_reg_mr(a.pd, src.data(), src.size(), access);
  ibv_mr* dmr = ibv_reg_mr(b.pd, dst.data(), dst.size(), access);
  ASSERT_TRUE(smr && dmr);

  struct End {
    mrc_cq* cq;
    mrc_qp* qp;
    uint32_t qpn;
  } ends[2];
  Device* devs[2] = {&a, &b};
  for (int i = 0; i < 2; ++i) {
    ends[i].cq = mrc_create_cq(devs[i]->mctx, 4096, nullptr, nullptr, 0);
    ASSERT_NE(ends[i].cq, nullptr);
    mrc_qp_init_attr ia{};
    ia.send_cq = ia.recv_cq = ends[i].cq;
    ia.cap = {256, 1024, 1, 1, 0};
    ia.pd = devs[i]->pd;
    ia.send_ops_flags = IBV_QP_EX_WITH_RDMA_WRITE | IBV_QP_EX_WITH_RDMA_WRITE_WITH_IMM;
    ends[i].qp = mrc_create_qp(devs[i]->mctx, &ia);
    ASSERT_NE(ends[i].qp, nullptr) << std::strerror(errno);
    ASSERT_EQ(mrc_get_qpn(ends[i].qp, &ends[i].qpn), 0);
  }
  // Send before RTS is rejected; an unknown opcode is rejected.
  ibv_sge sge{reinterpret_cast<uintptr_t>(src.data()), static_cast<uint32_t>(kMsg), smr->lkey};
  ibv_send_wr wr{};
  ibv_send_wr* bad = nullptr;
  wr.sg_list = &sge;
  wr.num_sge = 1;
  wr.opcode = IBV_WR_RDMA_WRITE_WITH_IMM;
  EXPECT_EQ(mrc_post_send(ends[0].qp, &wr, &bad), EINVAL);

  for (int i = 0; i < 2; ++i) {
    mrc_qp* qp = ends[i].qp;
    const End& peer = ends[1 - i];
    mrc_qp_attr m{};
    ibv_qp_attr v{};
    v.qp_state = IBV_QPS_INIT;
    // Missing profile ids: EINVAL (strict).
    EXPECT_EQ(mrc_modify_qp(qp, &v, IBV_QP_STATE, &m, MRC_QP_HINT), EINVAL);
    m.profile.ev_profile_id = 12;
    m.profile.cc_profile_id = 13;
    m.qp_hint = nullptr;
    v.qp_access_flags = access;
    ASSERT_EQ(mrc_modify_qp(qp, &v, IBV_QP_STATE | IBV_QP_ACCESS_FLAGS | IBV_QP_PKEY_INDEX, &m,
                            MRC_QP_HINT | MRC_QP_EV_PROFILE_ID | MRC_QP_CC_PROFILE_ID),
              0)
        << std::strerror(errno);
    v = {};
    v.qp_state = IBV_QPS_RTR;
    v.path_mtu = IBV_MTU_4096;
    v.dest_qp_num = peer.qpn;
    v.rq_psn = 0;
    v.ah_attr.is_global = 1;
    ASSERT_EQ(ibv_query_gid(devs[1 - i]->ctx, 1, 0, &v.ah_attr.grh.dgid), 0);
    v.ah_attr.port_num = 1;
    m.wimm.max_wimm_dest = 256;
    m.mpr.mpr_dest = 16;
    const int rtr = IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN;
    EXPECT_EQ(mrc_modify_qp(qp, &v, rtr | IBV_QP_PORT, &m, MRC_QP_MAX_WIMM_DEST | MRC_QP_MPR_DEST),
              EINVAL);  // IBV_QP_PORT is not supported
    ASSERT_EQ(mrc_modify_qp(qp, &v, rtr, &m, MRC_QP_MAX_WIMM_DEST | MRC_QP_MPR_DEST), 0);
    v = {};
    v.qp_state = IBV_QPS_RTS;
    v.sq_psn = 0;
    m.wimm.max_wimm = 256;
    m.mpr.mpr = 16;
    m.timeout = 25;
    m.retry = {7, 25};
    const int rts_mrc = MRC_QP_MAX_WIMM | MRC_QP_MPR | MRC_QP_TIMEOUT | MRC_QP_RETRY_CNT;
    EXPECT_EQ(mrc_modify_qp(qp, &v, IBV_QP_STATE | IBV_QP_SQ_PSN, &m, rts_mrc), EINVAL);
    m.timeout = 14;
    ASSERT_EQ(mrc_modify_qp(qp, &v, IBV_QP_STATE | IBV_QP_SQ_PSN, &m, rts_mrc), 0);
    ibv_qp_attr qv{};
    mrc_qp_attr qm{};
    ASSERT_EQ(mrc_query_qp(qp, &qv, IBV_QP_STATE, &qm, MRC_QP_EV_PROFILE_ID, nullptr), 0);
    EXPECT_EQ(qv.qp_state, IBV_QPS_RTS);
    EXPECT_EQ(qm.profile.ev_profile_id, 12u);
  }
  // The EV profile is in use: it cannot go OFFLINE.
  mrc_ctl_ev_profile_attr e{};
  e.profile_state = MRC_CTL_PROFILE_OFFLINE;
  EXPECT_EQ(mrc_ctl_modify_ev_profile(a.mctx, 12, &e, MRC_CTL_EV_PROFILE_STATE), -1);
  EXPECT_EQ(errno, EBUSY);

  // Receives for every immediate, then the writes.
  for (int i = 0; i < kMessages; ++i) {
    ibv_recv_wr rwr{};
    ibv_recv_wr* rbad = nullptr;
    rwr.wr_id = static_cast<uint64_t>(i);
    ASSERT_EQ(mrc_post_recv(ends[1].qp, &rwr, &rbad), 0);
  }
  wr.opcode = IBV_WR_SEND;
  EXPECT_EQ(mrc_post_send(ends[0].qp, &wr, &bad), EINVAL);
  EXPECT_EQ(bad, &wr);
  int sent = 0, send_done = 0, recv_done = 0;
  const auto start = std::chrono::steady_clock::now();
  bool disabled = false, changed_live = false;
  ibv_port_attr pattr{};
  while (recv_done < kMessages || send_done < kMessages) {
    ASSERT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(60));
    while (sent < kMessages && sent - send_done < 64) {
      wr = {};
      wr.wr_id = static_cast<uint64_t>(sent);
      wr.sg_list = &sge;
      wr.num_sge = 1;
      wr.opcode = IBV_WR_RDMA_WRITE_WITH_IMM;
      wr.send_flags = IBV_SEND_SIGNALED;
      wr.imm_data = htonl(static_cast<uint32_t>(sent));
      wr.wr.rdma.remote_addr = reinterpret_cast<uintptr_t>(dst.data()) + sent * kMsg;
      wr.wr.rdma.rkey = dmr->rkey;
      const int rc = mrc_post_send(ends[0].qp, &wr, &bad);
      if (rc == ENOMEM) break;
      ASSERT_EQ(rc, 0);
      ++sent;
    }
    if (!disabled && recv_done >= kMessages / 3) {  // plane 2 out of service mid-run
      mrc_ctl_port_attr pa{MRC_CTL_PORT_ADMIN_DISABLED};
      ASSERT_EQ(mrc_ctl_modify_port(a.mctx, 2, &pa, MRC_CTL_PORT_ADMIN_STATE), 0);
      disabled = true;
      ASSERT_EQ(ibv_query_port(b.ctx, 2, &pattr), 0);
      EXPECT_EQ(pattr.state, IBV_PORT_DOWN);
    }
    if (!changed_live && recv_done >= 2 * kMessages / 3) {
      // Live changes mid-run (MODIFY_ONLINE; RTS -> RTS): every EV of the shared GEN profile
      // (both QPs use it) moves to source ports 0xD000 + v, the CC profile's NSCC gets a
      // smaller window, the sender a shorter ACK timeout; the transfer carries on.
      mrc_ctl_ev_field moved{16, 0xD000, 0, 7, 0x0FFF};
      mrc_ctl_ev_profile_attr ep{};
      ep.ev_fields_op = {MRC_CTL_EV_FIELDS_OP_MODIFY_FIELDS, &moved, 1};
      ASSERT_EQ(mrc_ctl_modify_ev_profile(a.mctx, 12, &ep, MRC_CTL_EV_PROFILE_EV_FIELDS_OP), 0)
          << std::strerror(errno);
      mrc_ctl_cc_nscc_cfg small{};
      small.base_rtt = 50'000;
      small.max_cwnd = 256 * 1024;
      mrc_ctl_cc_profile_attr cp{};
      cp.cc_config = &small;
      ASSERT_EQ(mrc_ctl_modify_cc_profile(a.mctx, 13, &cp, MRC_CTL_CC_PROFILE_CONFIG), 0);
      mrc_qp_attr lm{};
      lm.timeout = 12;
      ASSERT_EQ(mrc_modify_qp(ends[0].qp, nullptr, 0, &lm, MRC_QP_TIMEOUT), 0);
      changed_live = true;
    }
    ibv_wc wc[32];
    for (int i = 0; i < 2; ++i) {
      const int n = mrc_poll_cq(ends[i].cq, 32, wc);
      ASSERT_GE(n, 0);
      for (int k = 0; k < n; ++k) {
        ASSERT_EQ(wc[k].status, IBV_WC_SUCCESS) << ibv_wc_status_str(wc[k].status);
        if (wc[k].opcode == IBV_WC_RECV_RDMA_WITH_IMM) {
          EXPECT_EQ(ntohl(wc[k].imm_data), static_cast<uint32_t>(recv_done));
          EXPECT_EQ(wc[k].qp_num, ends[1].qpn);
          ++recv_done;
        } else {
          EXPECT_EQ(wc[k].opcode, IBV_WC_RDMA_WRITE);
          ++send_done;
        }
      }
    }
    std::this_thread::sleep_for(std::chrono::microseconds(50));
  }
  for (int m = 0; m < kMessages; ++m)
    ASSERT_EQ(std::memcmp(dst.data() + m * kMsg, src.data(), kMsg), 0) << "message " << m;
  // The device's counters (mrc_soft_query_counters): every drop reason and the kernel's
  // receive-buffer drops, under the names mrc-perf --json uses.
  {
    EXPECT_EQ(mrc_soft_query_counters(nullptr, nullptr, 0), -1);
    const int total = mrc_soft_query_counters(b.ctx, nullptr, 0);
    ASSERT_GT(total, 0);
    std::vector<mrc_soft_counter> counters(static_cast<size_t>(total));
    ASSERT_EQ(mrc_soft_query_counters(b.ctx, counters.data(), total), total);
    std::map<std::string, uint64_t> byname;
    for (const mrc_soft_counter& c : counters)
      byname[c.name] = c.value;
    for (int r = 0; r < static_cast<int>(mrc::DropReason::kCount); ++r)
      EXPECT_TRUE(byname.count(std::string("drop_") +
                               mrc::drop_reason_name(static_cast<mrc::DropReason>(r))));
    EXPECT_TRUE(byname.count("drop_kernel_rcvbuf"));
    EXPECT_TRUE(byname.count("drop_ping_from_stranger"));
    EXPECT_GE(byname["bytes_placed"], static_cast<uint64_t>(kMessages) * kMsg);
    EXPECT_EQ(byname["drop_wrong_peer"], 0u);
  }

  ASSERT_TRUE(changed_live);
  EXPECT_TRUE(engine_eventually(ends[0].qp, [](mrc::Engine& eng, uint32_t qpn) {
    const mrc::PathSet* ps = eng.qp_paths(qpn);
    const auto* n = dynamic_cast<const mrc::cc::Nscc*>(eng.qp_cc(qpn));
    return ps->path(15).desc.ev[0] == 0xD0 && ps->path(15).desc.ev[1] == 7 && n &&
           n->params().max_cwnd == 256 * 1024 && eng.qp_limits(qpn)->timeout == 12;
  }));

  // EV probe over the wire: slot 0's data socket answers (this process holds it).
  mrc_ctl_ep_req req{};
  req.req_id = 7;
  ASSERT_EQ(ibv_query_gid(a.ctx, 1, 0, &req.sgid), 0);
  req.dgid = req.sgid;
  req.ev_fmt_mode = MRC_CTL_EV_FMT_MODE_STEV;
  req.req_ev.port = 1;
  mrc_ctl_ep_rsp rsp{};
  int nrsp = 0;
  ASSERT_EQ(mrc_ctl_ep_batch_send_wait(a.mctx, 0, MRC_CTL_EP_OP_EV_PROBE, &req, 1, 1'000'000'000,
                                       &rsp, &nrsp),
            0)
      << std::strerror(errno);
  EXPECT_EQ(nrsp, 1);
  EXPECT_EQ(rsp.req_id, 7);
  EXPECT_GT(rsp.rtt, 0u);
  EXPECT_EQ(mrc_ctl_ep_batch_send_wait(a.mctx, 0, MRC_CTL_EP_OP_PORT_STATUS_UPDATE, &req, 1, 1000,
                                       &rsp, &nrsp),
            -1);
  EXPECT_EQ(errno, ENOTSUP);

  mrc_ctl_port_attr up{MRC_CTL_PORT_ADMIN_ENABLED};
  ASSERT_EQ(mrc_ctl_modify_port(a.mctx, 2, &up, MRC_CTL_PORT_ADMIN_STATE), 0);
  for (auto& end : ends) {
    EXPECT_EQ(mrc_destroy_cq(end.cq), EBUSY);
    EXPECT_EQ(mrc_destroy_qp(end.qp), 0);
    EXPECT_EQ(mrc_destroy_cq(end.cq), 0);
  }
  EXPECT_EQ(ibv_dereg_mr(smr), 0);
  EXPECT_EQ(ibv_dereg_mr(dmr), 0);
  teardown_profiles(a.mctx, 11, 12, 13);
}

TEST(SoftDevice, mrc_ctl_poll_ev_event__stride_follows_the_declared_version) {
  REQUIRE_NETNS();
  Device d;
  ASSERT_NE(d.mctx, nullptr);
  mrc_cq* ecq = mrc_ctl_create_ev_event_cq(d.mctx, 4, nullptr, nullptr, 0);
  ASSERT_NE(ecq, nullptr);
  mrc_ctl_ev_event ev[2];
  EXPECT_EQ(mrc_ctl_poll_ev_event(ecq, 2, ev), 0);
  EXPECT_EQ(mrc_ctl_poll_ev_event(ecq, -1, ev), -EINVAL);
  ibv_wc wc;
  EXPECT_EQ(mrc_poll_cq(ecq, 1, &wc), -1);  // not a completion CQ
  EXPECT_EQ(mrc_destroy_cq(ecq), 0);
}

// Next async event of `type` within `timeout` (others are acknowledged and skipped); false
// if none. The device's async_fd is non-blocking here.
bool next_async_event(Device& d, ibv_event_type type, mrc_async_event& out,
                      std::chrono::milliseconds timeout) {
  const auto end = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < end) {
    pollfd p{d.ctx->async_fd, POLLIN, 0};
    if (::poll(&p, 1, 50) <= 0) continue;
    if (mrc_get_async_event(d.mctx, &out) != 0) continue;
    if (out.event_type == type) return true;
    mrc_ack_async_event(&out);
  }
  return false;
}

// ocp-mrc-api.md 3.7: async events are pollable (ibv_context::async_fd, non-blocking ->
// EAGAIN), and destroying the object an event names waits for mrc_ack_async_event.
TEST(SoftDevice, async_events__pollable_and_acknowledged_before_destroy) {
  REQUIRE_NETNS();
  Device a;
  ASSERT_NE(a.mctx, nullptr);
  configure_profiles(a.mctx, 31, 32, 33);
  ASSERT_GE(a.ctx->async_fd, 0);
  ASSERT_EQ(::fcntl(a.ctx->async_fd, F_SETFL, O_NONBLOCK), 0);
  mrc_async_event ev{};
  EXPECT_EQ(mrc_get_async_event(a.mctx, &ev), -1);
  EXPECT_EQ(errno, EAGAIN);

  // Port events: the fd becomes readable; port events need no bookkeeping.
  mrc_ctl_port_attr down{MRC_CTL_PORT_ADMIN_DISABLED}, up{MRC_CTL_PORT_ADMIN_ENABLED};
  ASSERT_EQ(mrc_ctl_modify_port(a.mctx, 2, &down, MRC_CTL_PORT_ADMIN_STATE), 0);
  ASSERT_TRUE(next_async_event(a, IBV_EVENT_PORT_ERR, ev, std::chrono::seconds(5)));
  EXPECT_EQ(ev.element.port_num, 2);
  mrc_ack_async_event(&ev);
  ASSERT_EQ(mrc_ctl_modify_port(a.mctx, 2, &up, MRC_CTL_PORT_ADMIN_STATE), 0);
  ASSERT_TRUE(next_async_event(a, IBV_EVENT_PORT_ACTIVE, ev, std::chrono::seconds(5)));
  mrc_ack_async_event(&ev);

  // A QP whose peer never answers (slot 200 has no process), no retries: IBV_EVENT_QP_FATAL.
  mrc_cq* cq = mrc_create_cq(a.mctx, 64, nullptr, nullptr, 0);
  ASSERT_NE(cq, nullptr);
  mrc_qp_init_attr ia{};
  ia.send_cq = ia.recv_cq = cq;
  ia.cap = {16, 16, 1, 1, 0};
  ia.pd = a.pd;
  mrc_qp* qp = mrc_create_qp(a.mctx, &ia);
  ASSERT_NE(qp, nullptr);
  mrc_qp_attr m{};
  ibv_qp_attr v{};
  v.qp_state = IBV_QPS_INIT;
  m.profile = {32, 33};
  ASSERT_EQ(mrc_modify_qp(qp, &v, IBV_QP_STATE, &m,
                          MRC_QP_HINT | MRC_QP_EV_PROFILE_ID | MRC_QP_CC_PROFILE_ID),
            0);
  v = {};
  v.qp_state = IBV_QPS_RTR;
  v.path_mtu = IBV_MTU_1024;
  v.dest_qp_num = (200u << 16) | 1;
  v.ah_attr.is_global = 1;
  ASSERT_EQ(ibv_query_gid(a.ctx, 1, 0, &v.ah_attr.grh.dgid), 0);
  m.wimm.max_wimm_dest = 16;
  m.mpr.mpr_dest = 1;
  ASSERT_EQ(
      mrc_modify_qp(qp, &v,
                    IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN,
                    &m, MRC_QP_MAX_WIMM_DEST | MRC_QP_MPR_DEST),
      0);
  v = {};
  v.qp_state = IBV_QPS_RTS;
  m.wimm.max_wimm = 16;
  m.mpr.mpr = 1;
  m.timeout = 0;
  m.retry = {0, 0};
  ASSERT_EQ(mrc_modify_qp(qp, &v, IBV_QP_STATE | IBV_QP_SQ_PSN, &m,
                          MRC_QP_MAX_WIMM | MRC_QP_MPR | MRC_QP_TIMEOUT | MRC_QP_RETRY_CNT),
            0);
  std::vector<uint8_t> buf(4096, 1);
  ibv_mr* mr = ibv_reg_mr(a.pd, buf.data(), buf.size(), static_cast<int>(IBV_ACCESS_LOCAL_WRITE));
  ASSERT_NE(mr, nullptr);
  ibv_sge sge{reinterpret_cast<uintptr_t>(buf.data()), 4096, mr->lkey};
  ibv_send_wr wr{};
  ibv_send_wr* bad = nullptr;
  wr.sg_list = &sge;
  wr.num_sge = 1;
  wr.opcode = IBV_WR_RDMA_WRITE;
  wr.send_flags = IBV_SEND_SIGNALED;
  wr.wr.rdma.remote_addr = 0x1000;
  wr.wr.rdma.rkey = 1;
  ASSERT_EQ(mrc_post_send(qp, &wr, &bad), 0);
  ASSERT_TRUE(next_async_event(a, IBV_EVENT_QP_FATAL, ev, std::chrono::seconds(20)));
  EXPECT_EQ(ev.element.qp, qp);

  // mrc_destroy_qp waits for the acknowledgement.
  std::atomic<bool> destroyed{false};
  std::thread t([&] {
    EXPECT_EQ(mrc_destroy_qp(qp), 0);
    destroyed = true;
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  EXPECT_FALSE(destroyed.load());
  mrc_ack_async_event(&ev);
  t.join();
  EXPECT_TRUE(destroyed.load());
  ibv_wc wc[8];
  EXPECT_GE(mrc_poll_cq(cq, 8, wc), 1);  // the write's error completion
  EXPECT_NE(wc[0].status, IBV_WC_SUCCESS);
  EXPECT_EQ(mrc_destroy_cq(cq), 0);
  EXPECT_EQ(ibv_dereg_mr(mr), 0);
  teardown_profiles(a.mctx, 31, 32, 33);
}

// Attribute-only modifies (docs/c-api.md): INIT -> INIT takes other profiles (the engine QP is
// re-initialised; the old profiles are released, the new ones are in use); in RTR / RTS the
// attributes the engine fixed may be restated with their value but not changed (EINVAL).
TEST(SoftDevice, modify__attribute_only_modifies) {
  REQUIRE_NETNS();
  Device a;
  ASSERT_NE(a.mctx, nullptr);
  configure_profiles(a.mctx, 41, 42, 43);
  configure_profiles(a.mctx, 51, 52, 53);
  mrc_cq* cq = mrc_create_cq(a.mctx, 16, nullptr, nullptr, 0);
  ASSERT_NE(cq, nullptr);
  mrc_qp_init_attr ia{};
  ia.send_cq = ia.recv_cq = cq;
  ia.cap = {16, 16, 1, 1, 0};
  ia.pd = a.pd;
  mrc_qp* qp = mrc_create_qp(a.mctx, &ia);
  ASSERT_NE(qp, nullptr);
  mrc_qp_attr m{};
  ibv_qp_attr v{};
  v.qp_state = IBV_QPS_INIT;
  m.profile = {42, 43};
  ASSERT_EQ(mrc_modify_qp(qp, &v, IBV_QP_STATE, &m,
                          MRC_QP_HINT | MRC_QP_EV_PROFILE_ID | MRC_QP_CC_PROFILE_ID),
            0);
  // INIT -> INIT, without and with IBV_QP_STATE.
  m.profile = {52, 43};
  ASSERT_EQ(mrc_modify_qp(qp, nullptr, 0, &m, MRC_QP_EV_PROFILE_ID), 0) << std::strerror(errno);
  m.profile = {52, 53};
  ASSERT_EQ(mrc_modify_qp(qp, &v, IBV_QP_STATE, &m, MRC_QP_CC_PROFILE_ID), 0);
  m.profile = {999, 53};  // not ONLINE: EINVAL, the QP keeps 52
  EXPECT_EQ(mrc_modify_qp(qp, nullptr, 0, &m, MRC_QP_EV_PROFILE_ID), EINVAL);
  mrc_qp_attr qm{};
  ASSERT_EQ(mrc_query_qp(qp, nullptr, 0, &qm, MRC_QP_EV_PROFILE_ID | MRC_QP_CC_PROFILE_ID, nullptr),
            0);
  EXPECT_EQ(qm.profile.ev_profile_id, 52u);
  EXPECT_EQ(qm.profile.cc_profile_id, 53u);
  // 42 and 43 are free again; 52 and 53 are in use.
  mrc_ctl_ev_profile_attr e{};
  e.profile_state = MRC_CTL_PROFILE_OFFLINE;
  EXPECT_EQ(mrc_ctl_modify_ev_profile(a.mctx, 42, &e, MRC_CTL_EV_PROFILE_STATE), 0);
  EXPECT_EQ(mrc_ctl_modify_ev_profile(a.mctx, 52, &e, MRC_CTL_EV_PROFILE_STATE), -1);
  EXPECT_EQ(errno, EBUSY);
  mrc_ctl_cc_profile_attr c{};
  c.profile_state = MRC_CTL_PROFILE_OFFLINE;
  EXPECT_EQ(mrc_ctl_modify_cc_profile(a.mctx, 43, &c, MRC_CTL_CC_PROFILE_STATE), 0);
  EXPECT_EQ(mrc_ctl_modify_cc_profile(a.mctx, 53, &c, MRC_CTL_CC_PROFILE_STATE), -1);
  EXPECT_EQ(errno, EBUSY);

  // RTR and RTS (the peer is never contacted: no traffic).
  v = {};
  v.qp_state = IBV_QPS_RTR;
  v.path_mtu = IBV_MTU_1024;
  v.dest_qp_num = (200u << 16) | 1;
  v.ah_attr.is_global = 1;
  ASSERT_EQ(ibv_query_gid(a.ctx, 1, 0, &v.ah_attr.grh.dgid), 0);
  m.wimm.max_wimm_dest = 16;
  m.mpr.mpr_dest = 1;
  const int rtr = IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN;
  ASSERT_EQ(mrc_modify_qp(qp, &v, rtr, &m, MRC_QP_MAX_WIMM_DEST | MRC_QP_MPR_DEST), 0);
  m.profile = {42, 43};  // profiles only up to INIT
  EXPECT_EQ(mrc_modify_qp(qp, nullptr, 0, &m, MRC_QP_EV_PROFILE_ID), EINVAL);
  // RTR -> RTR (attribute-only): MAX_WIMM_DEST, an RTR attribute (3.8), changes on the live
  // QP; MPR_DEST (sizes the responder's window) only restated; bad values change nothing.
  m.wimm.max_wimm_dest = 8;
  EXPECT_EQ(mrc_modify_qp(qp, nullptr, 0, &m, MRC_QP_MAX_WIMM_DEST), 0) << std::strerror(errno);
  EXPECT_EQ(engine_limits(qp).max_wimm_dest, 8);
  m.wimm.max_wimm_dest = 2000;  // > wimm_attr.max_wimm_dest
  EXPECT_EQ(mrc_modify_qp(qp, nullptr, 0, &m, MRC_QP_MAX_WIMM_DEST), EINVAL);
  m.mpr.mpr_dest = 2;
  EXPECT_EQ(mrc_modify_qp(qp, nullptr, 0, &m, MRC_QP_MAX_WIMM_DEST | MRC_QP_MPR_DEST), EINVAL);
  EXPECT_EQ(engine_limits(qp).max_wimm_dest, 8);
  m.mpr.mpr_dest = 1;
  m.wimm.max_wimm_dest = 16;
  EXPECT_EQ(mrc_modify_qp(qp, nullptr, 0, &m, MRC_QP_MAX_WIMM_DEST | MRC_QP_MPR_DEST), 0);
  EXPECT_EQ(engine_limits(qp).max_wimm_dest, 16);
  m.cap = MRC_QP_CAP_TRIM_NACK_DEST_UNSUPPORTED;  // CAP was never given: fixed at RTR
  EXPECT_EQ(mrc_modify_qp(qp, nullptr, 0, &m, MRC_QP_CAP), EINVAL);
  m.cap = 0;
  m.wimm.max_wimm = 16;  // an RTS attribute supplied early is kept for RTS (3.8)
  EXPECT_EQ(mrc_modify_qp(qp, nullptr, 0, &m, MRC_QP_MAX_WIMM), 0);
  ibv_qp_attr v2 = v;
  v2.dest_qp_num = (201u << 16) | 1;
  EXPECT_EQ(mrc_modify_qp(qp, &v2, IBV_QP_DEST_QPN, nullptr, 0), EINVAL);
  v = {};
  v.qp_state = IBV_QPS_RTS;
  m.mpr.mpr = 1;
  m.timeout = 10;
  m.retry = {3, 3};
  const int rts_mrc = MRC_QP_MPR | MRC_QP_TIMEOUT | MRC_QP_RETRY_CNT;
  ASSERT_EQ(mrc_modify_qp(qp, &v, IBV_QP_STATE | IBV_QP_SQ_PSN, &m, rts_mrc), 0);
  mrc::QpLimits lim = engine_limits(qp);
  EXPECT_EQ(lim.timeout, 10);
  EXPECT_EQ(lim.max_wimm, 16);  // supplied at RTR, applied at RTS
  // RTS -> RTS: the RTS attributes of 3.8 -- MAX_WIMM, TIMEOUT, RETRY_CNT -- change on the live
  // QP (with or without IBV_QP_STATE); MPR cannot (it sizes the PSN rings), the RTR attributes
  // are not RTS attributes: both may only be restated. Errors change nothing.
  EXPECT_EQ(mrc_modify_qp(qp, &v, IBV_QP_STATE, &m, rts_mrc | MRC_QP_MAX_WIMM), 0);
  m.timeout = 11;
  EXPECT_EQ(mrc_modify_qp(qp, &v, IBV_QP_STATE, &m, MRC_QP_TIMEOUT), 0) << std::strerror(errno);
  m.retry = {3, 4};
  m.wimm.max_wimm = 32;
  EXPECT_EQ(mrc_modify_qp(qp, nullptr, 0, &m, MRC_QP_RETRY_CNT | MRC_QP_MAX_WIMM), 0);
  lim = engine_limits(qp);
  EXPECT_EQ(lim.timeout, 11);
  EXPECT_EQ(lim.retry_linear, 3);
  EXPECT_EQ(lim.retry_exp, 4);
  EXPECT_EQ(lim.max_wimm, 32);
  m.timeout = 25;  // > 24
  EXPECT_EQ(mrc_modify_qp(qp, nullptr, 0, &m, MRC_QP_TIMEOUT | MRC_QP_RETRY_CNT), EINVAL);
  m.timeout = 12;
  m.retry = {8, 4};  // linear_cnt > 7
  EXPECT_EQ(mrc_modify_qp(qp, nullptr, 0, &m, MRC_QP_TIMEOUT | MRC_QP_RETRY_CNT), EINVAL);
  m.retry = {3, 4};
  m.mpr.mpr = 2;
  EXPECT_EQ(mrc_modify_qp(qp, nullptr, 0, &m, MRC_QP_TIMEOUT | MRC_QP_MPR), EINVAL);
  m.mpr.mpr = 1;
  m.wimm.max_wimm_dest = 4;
  EXPECT_EQ(mrc_modify_qp(qp, &v, IBV_QP_STATE, &m, MRC_QP_TIMEOUT | MRC_QP_MAX_WIMM_DEST), EINVAL);
  m.wimm.max_wimm_dest = 16;
  EXPECT_EQ(mrc_modify_qp(qp, nullptr, 0, &m, MRC_QP_MAX_WIMM_DEST | MRC_QP_MPR), 0);  // restated
  lim = engine_limits(qp);
  EXPECT_EQ(lim.timeout, 11);
  EXPECT_EQ(lim.max_wimm_dest, 16);
  ASSERT_EQ(mrc_query_qp(qp, nullptr, 0, &qm, MRC_QP_TIMEOUT | MRC_QP_RETRY_CNT | MRC_QP_MAX_WIMM,
                         nullptr),
            0);
  EXPECT_EQ(qm.timeout, 11);
  EXPECT_EQ(qm.retry.exp_cnt, 4);
  EXPECT_EQ(qm.wimm.max_wimm, 32);
  EXPECT_EQ(mrc_destroy_qp(qp), 0);
  EXPECT_EQ(mrc_destroy_cq(cq), 0);
  teardown_profiles(a.mctx, 41, 42, 43);
  teardown_profiles(a.mctx, 51, 52, 53);
}

// MODIFY_ONLINE (5.2, 5.5): the controller changes ONLINE profiles that a live QP uses, and
// the QP's process applies them on its next progress turn -- EV array changes into the
// engine's path set (replace_path), CC CONFIG into the running NSCC (reconfigure_cc).
TEST(SoftDevice, modify_online__profiles_reach_live_qps) {
  REQUIRE_NETNS();
  Device a;
  ASSERT_NE(a.mctx, nullptr);
  configure_profiles(a.mctx, 61, 62, 63);  // GEN: entry i = source port 0xC000 + i / 2
  mrc_cq* cq = mrc_create_cq(a.mctx, 16, nullptr, nullptr, 0);
  ASSERT_NE(cq, nullptr);
  mrc_qp_init_attr ia{};
  ia.send_cq = ia.recv_cq = cq;
  ia.cap = {16, 16, 1, 1, 0};
  ia.pd = a.pd;
  mrc_qp* qp = mrc_create_qp(a.mctx, &ia);
  ASSERT_NE(qp, nullptr);
  mrc_qp_attr m{};
  ibv_qp_attr v{};
  v.qp_state = IBV_QPS_INIT;
  m.profile = {62, 63};
  ASSERT_EQ(mrc_modify_qp(qp, &v, IBV_QP_STATE, &m,
                          MRC_QP_HINT | MRC_QP_EV_PROFILE_ID | MRC_QP_CC_PROFILE_ID),
            0);
  v = {};
  v.qp_state = IBV_QPS_RTR;
  v.path_mtu = IBV_MTU_1024;
  v.dest_qp_num = (200u << 16) | 1;  // never contacted: no traffic
  v.ah_attr.is_global = 1;
  ASSERT_EQ(ibv_query_gid(a.ctx, 1, 0, &v.ah_attr.grh.dgid), 0);
  m.wimm = {16, 16};
  m.mpr = {1, 1};
  m.timeout = 14;
  m.retry = {7, 7};
  ASSERT_EQ(
      mrc_modify_qp(qp, &v,
                    IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN,
                    &m, MRC_QP_MAX_WIMM_DEST | MRC_QP_MPR_DEST),
      0);
  v = {};
  v.qp_state = IBV_QPS_RTS;
  ASSERT_EQ(mrc_modify_qp(qp, &v, IBV_QP_STATE | IBV_QP_SQ_PSN, &m,
                          MRC_QP_MAX_WIMM | MRC_QP_MPR | MRC_QP_TIMEOUT | MRC_QP_RETRY_CNT),
            0);
  auto port_of = [](const mrc::PathDesc& d) { return (d.ev[0] << 8) | d.ev[1]; };
  {
    mrc::api::DeviceLock lk(*qp->ctx->dev);
    const mrc::PathSet* ps = qp->ctx->dev->engine->qp_paths(qp->engine_qpn);
    ASSERT_EQ(ps->size(), 16u);
    EXPECT_EQ(port_of(ps->path(0).desc), 0xC000);
    EXPECT_EQ(port_of(ps->path(15).desc), 0xC007);
  }

  // EVENT_MASK may change ONLINE; the QP keeps its profile (still EBUSY for OFFLINE).
  mrc_ctl_ev_profile_attr e{};
  e.ev_event_mask = MRC_CTL_EV_ASSUMED_BAD;
  ASSERT_EQ(mrc_ctl_modify_ev_profile(a.mctx, 62, &e, MRC_CTL_EV_PROFILE_EVENT_MASK), 0);
  mrc_ctl_ev_profile_attr q{};
  ASSERT_EQ(mrc_ctl_query_ev_profile(a.mctx, 62, &q, MRC_CTL_EV_PROFILE_EVENT_MASK), 0);
  EXPECT_EQ(q.ev_event_mask, MRC_CTL_EV_ASSUMED_BAD);
  e.profile_state = MRC_CTL_PROFILE_OFFLINE;
  EXPECT_EQ(mrc_ctl_modify_ev_profile(a.mctx, 62, &e, MRC_CTL_EV_PROFILE_STATE), -1);
  EXPECT_EQ(errno, EBUSY);

  // REPLACE_EV: entry 0 (port 1, value 0) becomes value 100 on port 2; the live QP's path 0
  // follows (source port 0xC000 + 100, plane 2).
  mrc_ctl_ev_op_entry arr[16]{};
  q.ev_op = {MRC_CTL_EV_OP_QUERY_EV_ARRAY, arr, 16};
  ASSERT_EQ(mrc_ctl_query_ev_profile(a.mctx, 62, &q, MRC_CTL_EV_PROFILE_EV_OP), 0);
  mrc_ctl_ev_op_entry repl{};
  repl.ev = arr[0].ev;
  repl.ev_new.val[0] = (100 << 2) >> 8;  // the 14 EV bits, MSB first
  repl.ev_new.val[1] = (100 << 2) & 0xFF;
  repl.ev_new.port = 2;
  repl.state = MRC_CTL_EV_GOOD;
  e.ev_op = {MRC_CTL_EV_OP_REPLACE_EV, &repl, 1};
  ASSERT_EQ(mrc_ctl_modify_ev_profile(a.mctx, 62, &e, MRC_CTL_EV_PROFILE_EV_OP), 0)
      << std::strerror(errno);
  EXPECT_TRUE(engine_eventually(qp, [&](mrc::Engine& eng, uint32_t qpn) {
    const mrc::Path& p = eng.qp_paths(qpn)->path(0);
    return port_of(p.desc) == 0xC000 + 100 && p.desc.port == 1;
  }));
  // MODIFY_EV_STATE still reaches it: deny entry 1.
  mrc_ctl_ev_op_entry deny{};
  deny.ev = arr[1].ev;
  deny.state = MRC_CTL_EV_DENIED;
  e.ev_op = {MRC_CTL_EV_OP_MODIFY_EV_STATE, &deny, 1};
  ASSERT_EQ(mrc_ctl_modify_ev_profile(a.mctx, 62, &e, MRC_CTL_EV_PROFILE_EV_OP), 0);
  EXPECT_TRUE(engine_eventually(qp, [&](mrc::Engine& eng, uint32_t qpn) {
    return eng.qp_paths(qpn)->path(1).state == mrc::ev::EvState::kDenied;
  }));

  // MODIFY_FIELDS: a GEN array is generated again (source ports 0xD000 + i / 2); entries that
  // stay the same EV keep their state (entry 1 stays DENIED), the others are new.
  mrc_ctl_ev_field bad{32, 0, 0, 7, 0x7};  // wider than the 16-bit slot: EINVAL, no change
  e.ev_fields_op = {MRC_CTL_EV_FIELDS_OP_MODIFY_FIELDS, &bad, 1};
  EXPECT_EQ(mrc_ctl_modify_ev_profile(a.mctx, 62, &e, MRC_CTL_EV_PROFILE_EV_FIELDS_OP), -1);
  EXPECT_EQ(errno, EINVAL);
  mrc_ctl_ev_field same_as_entry1{16, 0xC000, 0, 7, 0x3FFF};
  mrc_ctl_ev_field moved{16, 0xD000, 0, 7, 0x0FFF};
  e.ev_fields_op = {MRC_CTL_EV_FIELDS_OP_MODIFY_FIELDS, &same_as_entry1, 1};
  ASSERT_EQ(mrc_ctl_modify_ev_profile(a.mctx, 62, &e, MRC_CTL_EV_PROFILE_EV_FIELDS_OP), 0)
      << std::strerror(errno);
  EXPECT_TRUE(engine_eventually(qp, [&](mrc::Engine& eng, uint32_t qpn) {
    const mrc::PathSet* ps = eng.qp_paths(qpn);
    return port_of(ps->path(0).desc) == 0xC000 && ps->path(0).desc.port == 0 &&
           ps->path(1).state == mrc::ev::EvState::kDenied;
  }));
  e.ev_fields_op = {MRC_CTL_EV_FIELDS_OP_MODIFY_FIELDS, &moved, 1};
  ASSERT_EQ(mrc_ctl_modify_ev_profile(a.mctx, 62, &e, MRC_CTL_EV_PROFILE_EV_FIELDS_OP), 0)
      << std::strerror(errno);
  // Every expansion changes; the EV values (the array's identity of an entry) of entries 0 and
  // 1 do not (combination 0 is all-zero bits with either mask), so entry 1 stays DENIED.
  EXPECT_TRUE(engine_eventually(qp, [&](mrc::Engine& eng, uint32_t qpn) {
    const mrc::PathSet* ps = eng.qp_paths(qpn);
    for (int i = 0; i < 16; ++i)
      if (port_of(ps->path(i).desc) != 0xD000 + i / 2 || ps->path(i).desc.port != i % 2 ||
          ps->path(i).state != (i == 1 ? mrc::ev::EvState::kDenied : mrc::ev::EvState::kGood))
        return false;
    return ps->usable_count() == 15;
  }));

  // CC CONFIG: the running NSCC takes the new parameters in place.
  mrc_ctl_cc_nscc_cfg cfg{};
  cfg.base_rtt = 40'000;
  cfg.max_cwnd = 65536;
  mrc_ctl_cc_profile_attr cc{};
  cc.cc_config = &cfg;
  const mrc::cc::CongestionControl* before = nullptr;
  {
    mrc::api::DeviceLock lk(*qp->ctx->dev);
    before = qp->ctx->dev->engine->qp_cc(qp->engine_qpn);
  }
  ASSERT_EQ(mrc_ctl_modify_cc_profile(a.mctx, 63, &cc, MRC_CTL_CC_PROFILE_CONFIG), 0)
      << std::strerror(errno);
  EXPECT_TRUE(engine_eventually(qp, [&](mrc::Engine& eng, uint32_t qpn) {
    const auto* n = dynamic_cast<const mrc::cc::Nscc*>(eng.qp_cc(qpn));
    return n && n == before && n->params().max_cwnd == 65536 && n->params().base_rtt == mrc::us(40);
  }));
  cc.algorithm = nullptr;
  EXPECT_EQ(mrc_ctl_modify_cc_profile(a.mctx, 63, &cc, MRC_CTL_CC_PROFILE_ALGORITHM), -1);
  EXPECT_EQ(errno, EINVAL);
  cc.profile_state = MRC_CTL_PROFILE_OFFLINE;
  EXPECT_EQ(mrc_ctl_modify_cc_profile(a.mctx, 63, &cc, MRC_CTL_CC_PROFILE_STATE), -1);
  EXPECT_EQ(errno, EBUSY);

  EXPECT_EQ(mrc_destroy_qp(qp), 0);
  EXPECT_EQ(mrc_destroy_cq(cq), 0);
  teardown_profiles(a.mctx, 61, 62, 63);
}

// The same across processes, as on a real node: a child process (the application) holds a
// QP in RTS while this process (the controller) replaces an EV and changes the CC
// configuration of the ONLINE profiles; the child's progress thread finds the new generations
// in node state and applies them to its engine. The child reports by exit status.
TEST(SoftDevice, modify_online__reaches_qps_of_another_process) {
  REQUIRE_NETNS();
  int go[2], ready[2];
  ASSERT_EQ(::pipe(go), 0);
  ASSERT_EQ(::pipe(ready), 0);
  const pid_t child = ::fork();  // before this process opens a device (no threads to copy)
  ASSERT_GE(child, 0);
  if (child == 0) {
    char c;
    if (::read(go[0], &c, 1) != 1) ::_exit(10);
    int rc = 0;
    {
      Device a;
      if (!a.mctx) ::_exit(11);
      mrc_cq* cq = mrc_create_cq(a.mctx, 16, nullptr, nullptr, 0);
      mrc_qp_init_attr ia{};
      ia.send_cq = ia.recv_cq = cq;
      ia.cap = {16, 16, 1, 1, 0};
      ia.pd = a.pd;
      mrc_qp* qp = mrc_create_qp(a.mctx, &ia);
      if (!qp) ::_exit(12);
      mrc_qp_attr m{};
      ibv_qp_attr v{};
      v.qp_state = IBV_QPS_INIT;
      m.profile = {72, 73};
      if (mrc_modify_qp(qp, &v, IBV_QP_STATE, &m,
                        MRC_QP_HINT | MRC_QP_EV_PROFILE_ID | MRC_QP_CC_PROFILE_ID) != 0)
        ::_exit(13);
      v = {};
      v.qp_state = IBV_QPS_RTR;
      v.path_mtu = IBV_MTU_1024;
      v.dest_qp_num = (200u << 16) | 1;  // never contacted
      v.ah_attr.is_global = 1;
      ibv_query_gid(a.ctx, 1, 0, &v.ah_attr.grh.dgid);
      m.wimm = {16, 16};
      m.mpr = {1, 1};
      m.timeout = 14;
      m.retry = {7, 7};
      if (mrc_modify_qp(
              qp, &v, IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN,
              &m, MRC_QP_MAX_WIMM_DEST | MRC_QP_MPR_DEST) != 0)
        ::_exit(14);
      v = {};
      v.qp_state = IBV_QPS_RTS;
      if (mrc_modify_qp(qp, &v, IBV_QP_STATE | IBV_QP_SQ_PSN, &m,
                        MRC_QP_MAX_WIMM | MRC_QP_MPR | MRC_QP_TIMEOUT | MRC_QP_RETRY_CNT) != 0)
        ::_exit(15);
      if (::write(ready[1], "r", 1) != 1) ::_exit(16);
      const bool applied = engine_eventually(qp, [](mrc::Engine& eng, uint32_t qpn) {
        const mrc::Path& p = eng.qp_paths(qpn)->path(0);
        const auto* n = dynamic_cast<const mrc::cc::Nscc*>(eng.qp_cc(qpn));
        return ((p.desc.ev[0] << 8) | p.desc.ev[1]) == 0xC000 + 100 && n &&
               n->params().max_cwnd == 65536;
      });
      rc = applied ? 0 : 20;
      if (mrc_destroy_qp(qp) != 0 || mrc_destroy_cq(cq) != 0) rc = 21;
    }
    ::_exit(rc);
  }
  Device c;
  ASSERT_NE(c.mctx, nullptr);
  configure_profiles(c.mctx, 71, 72, 73);
  ASSERT_EQ(::write(go[1], "g", 1), 1);
  char r = 0;
  ASSERT_EQ(::read(ready[0], &r, 1), 1) << "the child did not reach RTS";
  mrc_ctl_ev_op_entry arr[16]{};
  mrc_ctl_ev_profile_attr e{};
  e.ev_op = {MRC_CTL_EV_OP_QUERY_EV_ARRAY, arr, 16};
  ASSERT_EQ(mrc_ctl_query_ev_profile(c.mctx, 72, &e, MRC_CTL_EV_PROFILE_EV_OP), 0);
  mrc_ctl_ev_op_entry repl{};
  repl.ev = arr[0].ev;
  repl.ev_new.val[0] = (100 << 2) >> 8;
  repl.ev_new.val[1] = (100 << 2) & 0xFF;
  repl.ev_new.port = 1;
  repl.state = MRC_CTL_EV_GOOD;
  e.ev_op = {MRC_CTL_EV_OP_REPLACE_EV, &repl, 1};
  ASSERT_EQ(mrc_ctl_modify_ev_profile(c.mctx, 72, &e, MRC_CTL_EV_PROFILE_EV_OP), 0)
      << std::strerror(errno);
  mrc_ctl_cc_nscc_cfg cfg{};
  cfg.base_rtt = 50'000;
  cfg.max_cwnd = 65536;
  mrc_ctl_cc_profile_attr cc{};
  cc.cc_config = &cfg;
  ASSERT_EQ(mrc_ctl_modify_cc_profile(c.mctx, 73, &cc, MRC_CTL_CC_PROFILE_CONFIG), 0);
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0) << "10-16: setup failed; 20: change not applied";
  for (int fd : {go[0], go[1], ready[0], ready[1]})
    ::close(fd);
  teardown_profiles(c.mctx, 71, 72, 73);  // the child's QP is gone: nothing is EBUSY
}

// OCP's own benchmark, as a user runs it: examples/mrc_ocp_sequence.c makes its calls (IBV_QP_PORT,
// TIMEOUT, RETRY_CNT, RNR_RETRY, GID index 3, no MRC attributes, the protocol version as API
// version) in a separate process with only the device configuration, sizes 1 B .. 4 MiB
// verified; MRC_SOFT_STRICT=1 refuses its INIT.
TEST(SoftDevice, ocp_benchmark__calling_sequence_runs_with_only_the_device_configuration) {
  REQUIRE_NETNS();
  const std::string bin = std::string(MRC_BINARY_DIR) + "/bin/mrc_ocp_sequence";
  const std::string out = ::testing::TempDir() + "mrc_ocp_sequence.err";
  const int rc = std::system(
      ("MRC_SOFT_STRICT=0 timeout 120 " + bin + " --iters 10 >/dev/null 2>" + out).c_str());
  std::ifstream in(out);
  const std::string err((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_EQ(rc, 0) << err;
  // What the default mode accepted is said once each, not per call.
  EXPECT_NE(err.find("ignoring verbs attributes"), std::string::npos) << err;
  EXPECT_EQ(err.find("ignoring verbs attributes"), err.rfind("ignoring verbs attributes")) << err;
  EXPECT_EQ(std::system(
                ("MRC_SOFT_STRICT=1 timeout 60 " + bin + " --expect-strict-refusal >/dev/null 2>&1")
                    .c_str()),
            0);
}

namespace {

// Devices `a` and `b` (default mode: no MRC attributes) connect a QP pair the way the published
// benchmark does -- verbs attributes only, IBV_QP_PORT, TIMEOUT, RETRY_CNT, RNR_RETRY, the
// peer's GID from ibv_query_gid -- and carry 20 verified WRITE_IMMs of 4 KiB from a to b.
void write_imm_with_verbs_calls_only(Device& a, Device& b) {
  constexpr size_t kMsg = 4096;
  constexpr int kMessages = 20;
  std::vector<uint8_t> src(kMsg), dst(kMsg * kMessages, 0);
  for (size_t i = 0; i < kMsg; ++i)
    src[i] = static_cast<uint8_t>(i * 13 + 5);
  const int access = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE;
  ibv_mr* smr = ibv_reg_mr(a.pd, src.data(), src.size(), access);
  ibv_mr* dmr = ibv_reg_mr(b.pd, dst.data(), dst.size(), access);
  ASSERT_TRUE(smr && dmr);
  Device* devs[2] = {&a, &b};
  mrc_cq* cqs[2];
  mrc_qp* qps[2];
  uint32_t qpns[2];
  for (int i = 0; i < 2; ++i) {
    cqs[i] = mrc_create_cq(devs[i]->mctx, 256, nullptr, nullptr, 0);
    ASSERT_NE(cqs[i], nullptr);
    mrc_qp_init_attr ia{};
    ia.send_cq = ia.recv_cq = cqs[i];
    ia.cap = {64, 64, 1, 1, 0};
    ia.pd = devs[i]->pd;  // send_ops_flags 0, as the benchmark
    qps[i] = mrc_create_qp(devs[i]->mctx, &ia);
    ASSERT_NE(qps[i], nullptr);
    ASSERT_EQ(mrc_get_qpn(qps[i], &qpns[i]), 0);
  }
  for (int i = 0; i < 2; ++i) {
    ibv_qp_attr v{};
    v.qp_state = IBV_QPS_INIT;
    v.port_num = 1;
    v.qp_access_flags = access;
    ASSERT_EQ(mrc_modify_qp(qps[i], &v,
                            IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS,
                            nullptr, 0),
              0)
        << std::strerror(errno);
    v = {};
    v.qp_state = IBV_QPS_RTR;
    v.path_mtu = IBV_MTU_4096;
    v.dest_qp_num = qpns[1 - i];
    v.ah_attr.is_global = 1;
    v.ah_attr.port_num = 1;
    ASSERT_EQ(ibv_query_gid(devs[1 - i]->ctx, 1, 0, &v.ah_attr.grh.dgid), 0);
    v.max_dest_rd_atomic = 1;
    v.min_rnr_timer = 12;
    ASSERT_EQ(mrc_modify_qp(qps[i], &v,
                            IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN |
                                IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER,
                            nullptr, 0),
              0)
        << std::strerror(errno);
    v = {};
    v.qp_state = IBV_QPS_RTS;
    v.timeout = 14;
    v.retry_cnt = 7;
    v.rnr_retry = 7;
    v.max_rd_atomic = 1;
    ASSERT_EQ(mrc_modify_qp(qps[i], &v,
                            IBV_QP_STATE | IBV_QP_SQ_PSN | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT |
                                IBV_QP_RNR_RETRY | IBV_QP_MAX_QP_RD_ATOMIC,
                            nullptr, 0),
              0)
        << std::strerror(errno);
  }
  for (int i = 0; i < kMessages; ++i) {
    ibv_recv_wr rwr{};
    ibv_recv_wr* rbad = nullptr;
    ASSERT_EQ(mrc_post_recv(qps[1], &rwr, &rbad), 0);
  }
  for (int i = 0; i < kMessages; ++i) {
    ibv_sge sge{reinterpret_cast<uintptr_t>(src.data()), kMsg, smr->lkey};
    ibv_send_wr wr{};
    ibv_send_wr* bad = nullptr;
    wr.sg_list = &sge;
    wr.num_sge = 1;
    wr.opcode = IBV_WR_RDMA_WRITE_WITH_IMM;
    wr.send_flags = IBV_SEND_SIGNALED;
    wr.imm_data = htonl(static_cast<uint32_t>(i));
    wr.wr.rdma.remote_addr = reinterpret_cast<uintptr_t>(dst.data()) + i * kMsg;
    wr.wr.rdma.rkey = dmr->rkey;
    ASSERT_EQ(mrc_post_send(qps[0], &wr, &bad), 0);
  }
  int send_done = 0, recv_done = 0;
  const auto start = std::chrono::steady_clock::now();
  while (send_done < kMessages || recv_done < kMessages) {
    ASSERT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(30));
    ibv_wc wc[16];
    for (int i = 0; i < 2; ++i) {
      const int n = mrc_poll_cq(cqs[i], 16, wc);
      for (int k = 0; k < n; ++k) {
        ASSERT_EQ(wc[k].status, IBV_WC_SUCCESS);
        (wc[k].opcode == IBV_WC_RECV_RDMA_WITH_IMM ? recv_done : send_done)++;
      }
    }
    std::this_thread::sleep_for(std::chrono::microseconds(100));
  }
  for (int m = 0; m < kMessages; ++m)
    ASSERT_EQ(std::memcmp(dst.data() + m * kMsg, src.data(), kMsg), 0) << "message " << m;
  for (int i = 0; i < 2; ++i) {
    EXPECT_EQ(mrc_destroy_qp(qps[i]), 0);
    EXPECT_EQ(mrc_destroy_cq(cqs[i]), 0);
  }
  EXPECT_EQ(ibv_dereg_mr(smr), 0);
  EXPECT_EQ(ibv_dereg_mr(dmr), 0);
}

}  // namespace

// The default mode (not MRC_SOFT_STRICT=1; reference section 8): the published benchmark's
// calls -- an implausible declared version, IBV_QP_PORT / IBV_QP_TIMEOUT / IBV_QP_RETRY_CNT /
// IBV_QP_RNR_RETRY, no MRC attributes at any transition -- connect with the device's default
// profiles and carry verified WRITE_IMM; strict mode rejects the same calls.
TEST(SoftDevice, lenient_mode__accepts_the_published_benchmark_calls) {
  REQUIRE_NETNS();
  {  // strict
    Device s;
    ASSERT_NE(s.mctx, nullptr);
    mrc_context_attr bad{0x05000000u, 0};
    EXPECT_EQ(mrc_create_context(s.ctx, &bad), nullptr);
    EXPECT_EQ(errno, EINVAL);
  }
  ::setenv("MRC_SOFT_STRICT", "0", 1);
  Device a, b;
  ::setenv("MRC_SOFT_STRICT", "1", 1);
  ASSERT_TRUE(a.mctx && b.mctx);
  mrc_context_attr bad{0x05000000u, 0};
  mrc_context* extra = mrc_create_context(a.ctx, &bad);  // "unspecified"
  ASSERT_NE(extra, nullptr);
  EXPECT_EQ(mrc_destroy_context(extra), 0);

  write_imm_with_verbs_calls_only(a, b);
}

namespace {

// Sets environment variables for its lifetime, then restores what they were.
class ScopedEnv {
 public:
  ScopedEnv(std::initializer_list<std::pair<const char*, const char*>> vars) {
    for (const auto& [name, value] : vars) {
      const char* old = std::getenv(name);
      saved_.push_back({name, old ? std::optional<std::string>(old) : std::nullopt});
      ::setenv(name, value, 1);
    }
  }
  ~ScopedEnv() {
    for (const auto& [name, old] : saved_) {
      if (old)
        ::setenv(name.c_str(), old->c_str(), 1);
      else
        ::unsetenv(name.c_str());
    }
  }
  ScopedEnv(const ScopedEnv&) = delete;
  ScopedEnv& operator=(const ScopedEnv&) = delete;

 private:
  std::vector<std::pair<std::string, std::optional<std::string>>> saved_;
};

std::string gid_text(ibv_context* ctx) {
  ibv_gid gid{};
  EXPECT_EQ(ibv_query_gid(ctx, 1, 3, &gid), 0);
  char buf[INET6_ADDRSTRLEN] = {};
  ::inet_ntop(AF_INET6, gid.raw, buf, sizeof buf);
  return buf;
}

}  // namespace

// An IPv4 port (MRC_SOFT_PORTS=127.0.0.1, or its mapped spelling ::ffff:127.0.0.1) is the
// IPv4-mapped GID and runs over IPv4 (UDP EV mode): both devices open, a QP pair carries
// verified WRITE_IMMs, and an EV probe from the IPv4 GID is answered (an SRV6 one, whose
// destination would be an IPv6 uSID carrier, is EINVAL).
TEST(SoftDevice, ipv4_port__opens_and_carries_verified_data) {
  REQUIRE_NETNS();
  ScopedEnv lenient({{"MRC_SOFT_STRICT", "0"}, {"MRC_SOFT_EV_MODE", "udp"}});
  std::optional<Device> a, b;
  {
    ScopedEnv v4({{"MRC_SOFT_PORTS", "127.0.0.1"}});
    a.emplace();
  }
  {
    ScopedEnv mapped({{"MRC_SOFT_PORTS", "::ffff:127.0.0.1"}});
    b.emplace();
  }
  ASSERT_TRUE(a->mctx && b->mctx);
  EXPECT_EQ(gid_text(a->ctx), "::ffff:127.0.0.1");
  EXPECT_EQ(gid_text(b->ctx), "::ffff:127.0.0.1");
  write_imm_with_verbs_calls_only(*a, *b);

  mrc_ctl_ep_req req{};
  req.req_id = 9;
  ASSERT_EQ(ibv_query_gid(a->ctx, 1, 0, &req.sgid), 0);
  req.dgid = req.sgid;
  req.ev_fmt_mode = MRC_CTL_EV_FMT_MODE_UDP;
  req.req_ev.val[0] = 0xC0;  // source port 0xC005
  req.req_ev.val[1] = 0x05;
  req.req_ev.port = 1;
  mrc_ctl_ep_rsp rsp{};
  int nrsp = 0;
  ASSERT_EQ(mrc_ctl_ep_batch_send_wait(a->mctx, 0, MRC_CTL_EP_OP_EV_PROBE, &req, 1, 1'000'000'000,
                                       &rsp, &nrsp),
            0)
      << std::strerror(errno);
  EXPECT_EQ(nrsp, 1);
  EXPECT_EQ(rsp.req_id, 9);
  req.ev_fmt_mode = MRC_CTL_EV_FMT_MODE_SRV6;
  ASSERT_EQ(::inet_pton(AF_INET6, "fcbb:bb00:8000:1:4001::", req.req_ev.val), 1);
  EXPECT_EQ(mrc_ctl_ep_batch_send_wait(a->mctx, 0, MRC_CTL_EP_OP_EV_PROBE, &req, 1, 1'000'000, &rsp,
                                       &nrsp),
            -1);
  EXPECT_EQ(errno, EINVAL);
}

// SRV6 mode cannot run over IPv4 (its EV is an IPv6 destination address): a device with an
// IPv4 port in that mode does not open.
TEST(SoftDevice, ipv4_port__srv6_mode_does_not_open) {
  REQUIRE_NETNS();
  ScopedEnv srv6({{"MRC_SOFT_PORTS", "127.0.0.1"}, {"MRC_SOFT_EV_MODE", "srv6"}});
  Device d;
  EXPECT_EQ(d.ctx, nullptr);
}

// Port addresses (MRC_SOFT_PORTS): IPv4 ones become IPv4-mapped GIDs whose prefix is counted
// in IPv4 bits (/24 by default), so a peer's plane-p address keeps the plane's IPv4 prefix;
// a prefix the notation cannot have is refused.
TEST(SoftDevice, load_device_config__ipv4_ports_are_mapped_with_ipv4_prefixes) {
  ScopedEnv none({{"MRC_SOFT_CONFIG", "/dev/null"}});
  mrc::api::DeviceConfig cfg;
  std::string error;
  {
    ScopedEnv ports({{"MRC_SOFT_PORTS", "10.0.1.1,10.0.2.1/16,::ffff:10.0.3.1,fd00:1::1"}});
    ASSERT_TRUE(mrc::api::load_device_config(cfg, error)) << error;
  }
  ASSERT_EQ(cfg.ports.size(), 4u);
  EXPECT_EQ(cfg.ports[0].prefix_len, 96 + 24);
  EXPECT_EQ(cfg.ports[1].prefix_len, 96 + 16);
  EXPECT_EQ(cfg.ports[2].prefix_len, 96 + 24);
  EXPECT_EQ(cfg.ports[3].prefix_len, 64);
  in6_addr gid{};
  ASSERT_EQ(::inet_pton(AF_INET6, "::ffff:10.0.1.7", &gid), 1);
  const char* want[] = {"::ffff:10.0.1.7", "::ffff:10.0.1.7", "::ffff:10.0.3.7"};
  for (size_t p = 0; p < 3; ++p) {
    const in6_addr peer = mrc::api::peer_address(cfg, gid, p);
    char buf[INET6_ADDRSTRLEN] = {};
    ::inet_ntop(AF_INET6, &peer, buf, sizeof buf);
    EXPECT_STREQ(buf, want[p]) << "plane " << p;
  }
  for (const char* bad : {"10.0.1.1/33", "fd00::1/129", "10.0.1.1/x", "10.0.1.1/"}) {
    ScopedEnv ports({{"MRC_SOFT_PORTS", bad}});
    mrc::api::DeviceConfig untouched;
    EXPECT_FALSE(mrc::api::load_device_config(untouched, error)) << bad;
    EXPECT_NE(error.find("bad prefix length"), std::string::npos) << error;
    EXPECT_TRUE(untouched.ports.empty());
  }
}

// An API call does not wait for the progress thread's poll (docs/c-api.md, "Device and
// threads"): the caller wakes it (UdpDriver::wake()). The idle poll wait is 1 ms, so without
// the wake-up the median call would take about 0.5 ms.
TEST(SoftDevice, api_calls__wake_the_progress_thread) {
  REQUIRE_NETNS();
  Device a;
  ASSERT_NE(a.mctx, nullptr);
  mrc_cq* cq = mrc_create_cq(a.mctx, 4, nullptr, nullptr, 0);
  ASSERT_NE(cq, nullptr);
  mrc_qp_init_attr ia{};
  ia.send_cq = ia.recv_cq = cq;
  ia.pd = a.pd;
  mrc_qp* qp = mrc_create_qp(a.mctx, &ia);
  ASSERT_NE(qp, nullptr);
  std::vector<double> us;
  for (int i = 0; i < 101; ++i) {
    std::this_thread::sleep_for(std::chrono::microseconds(300));  // the thread is polling again
    ibv_qp_attr v{};
    const auto t0 = std::chrono::steady_clock::now();
    ASSERT_EQ(mrc_query_qp(qp, &v, IBV_QP_STATE, nullptr, 0, nullptr), 0);  // takes the lock
    us.push_back(
        std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count());
  }
  std::nth_element(us.begin(), us.begin() + 50, us.end());
  EXPECT_LT(us[50], 250.0) << "median mrc_query_qp latency in us";
  EXPECT_EQ(mrc_destroy_qp(qp), 0);
  EXPECT_EQ(mrc_destroy_cq(cq), 0);
}
