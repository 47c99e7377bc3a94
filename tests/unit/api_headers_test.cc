// The OCP MRC headers (ocp-mrc-api.md sections 1-5, 9): they compile as C++ (this file) and as
// C11 (tests/api/headers_c11.c, linked in), every function is declared with its exact
// signature and exported by the library, the version macros select what the reference says.
#include <gtest/gtest.h>

#include <mrc_ctl.h>

#include <cstddef>
#include <type_traits>

extern "C" int mrc_headers_c11_names(void);

TEST(ApiHeaders, headers__compile_as_c11_with_every_function_linked) {
  EXPECT_EQ(mrc_headers_c11_names(), 41);
}

TEST(ApiHeaders, struct_layout__matches_the_lp64_appendix) {
  static_assert(sizeof(mrc_device_attr) == 20);
  static_assert(sizeof(mrc_qp_init_attr) == 72);
  static_assert(sizeof(mrc_qp_attr) == 176);
  static_assert(offsetof(mrc_qp_attr, vendor_cfg) == 44);
  static_assert(sizeof(mrc_async_event) == 16);
  static_assert(sizeof(mrc_ctl_device_attr) == 72);
  static_assert(sizeof(mrc_ctl_ev) == 33 && alignof(mrc_ctl_ev) == 1);
  static_assert(sizeof(mrc_ctl_ev_op_entry) == 76);
  static_assert(sizeof(mrc_ctl_ev_profile_attr) == 216);
  static_assert(sizeof(mrc_ctl_ev_fmt_profile_attr) == 168);
  static_assert(sizeof(mrc_ctl_cc_profile_attr) == 152);
  static_assert(sizeof(mrc_ctl_cc_nscc_cfg) == 52);
  static_assert(sizeof(mrc_ctl_ev_event) == 56);
  static_assert(sizeof(mrc_ctl_ep_req) == 88);
  static_assert(sizeof(mrc_ctl_ep_rsp) == 12);
  SUCCEED();
}

TEST(ApiHeaders, version_macros__name_the_api_version) {
  static_assert(MRC_API_VER_USED == MRC_API_CURRENT_VERSION);
  static_assert(MRC_CTL_API_VER_USED == MRC_CTL_API_CURRENT_VERSION);
  static_assert(static_cast<uint32_t>(MRC_API_VER_LATEST) == 0xFFFFFFFFu);
  static_assert(MRC_API_VER(1, 2, 3) == 0x01020003);
  static_assert(MRC_CTL_API_VER(1, 2, 3) == 0x01020003);
  static_assert(static_cast<uint32_t>(MRC_QP_VENDOR_CFG) == 0x80000000u);
  static_assert(std::is_same_v<std::underlying_type_t<mrc_qp_attr_mask>, int> ||
                sizeof(std::underlying_type_t<mrc_qp_attr_mask>) == 4);
  uint32_t cur = 0, last = 1, vendor = 0, vlast = 1;
  mrc_query_version(&cur, &last, &vendor, &vlast);
  EXPECT_EQ(cur, 0x01000001u);
  EXPECT_EQ(last, 0u);
  EXPECT_EQ(vendor, 0x01000000u);
  EXPECT_EQ(vlast, 0u);
  mrc_ctl_query_version(&cur, &last, &vendor, &vlast);
  EXPECT_EQ(cur, 0x01000001u);
  EXPECT_EQ(last, 0u);
  EXPECT_EQ(vendor, 0x01000000u);
  EXPECT_EQ(vlast, 0u);
  const mrc_ctl_ev unset = MRC_CTL_EV_UNPOPULATED;
  EXPECT_EQ(unset.port, 0);
}
