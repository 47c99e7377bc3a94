#include "transport/engine_types.h"

#include <gtest/gtest.h>

#include <set>
#include <string>

namespace mrc {
namespace {

TEST(EngineTypes, qp_state_name__names_every_state) {
  EXPECT_STREQ(qp_state_name(QpState::kReset), "RESET");
  EXPECT_STREQ(qp_state_name(QpState::kInit), "INIT");
  EXPECT_STREQ(qp_state_name(QpState::kRtr), "RTR");
  EXPECT_STREQ(qp_state_name(QpState::kRts), "RTS");
  EXPECT_STREQ(qp_state_name(QpState::kErr), "ERR");
}

TEST(EngineTypes, wc_status_name__names_every_status) {
  EXPECT_STREQ(wc_status_name(WcStatus::kSuccess), "success");
  EXPECT_STREQ(wc_status_name(WcStatus::kRetryExceeded), "retry exceeded");
  EXPECT_STREQ(wc_status_name(WcStatus::kFlushed), "flushed");
  EXPECT_STREQ(wc_status_name(WcStatus::kAckContradiction), "ACK contradicted an earlier one");
}

// Tools key their drop counts by these names (mrc-pair): each reason needs its own.
TEST(EngineTypes, drop_reason_name__gives_each_reason_a_distinct_name) {
  std::set<std::string> names;
  for (int r = 0; r < static_cast<int>(DropReason::kCount); ++r) {
    const std::string name = drop_reason_name(static_cast<DropReason>(r));
    EXPECT_NE(name, "?");
    names.insert(name);
  }
  EXPECT_EQ(names.size(), static_cast<size_t>(DropReason::kCount));
  EXPECT_STREQ(drop_reason_name(DropReason::kCount), "?");
}

}  // namespace
}  // namespace mrc
