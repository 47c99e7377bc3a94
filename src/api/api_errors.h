// What every entry point of the C API shares: the software device's limits (reported by
// mrc_query_device, enforced by mrc_modify_qp) and the return conventions of the OCP API
// (ocp-mrc-api 3.6), each setting errno:
//   (A) 0 on success, -1 on failure          -> return fail_minus_one(EINVAL);
//   (B) 0 on success, the errno on failure    -> return fail_errno(EINVAL);
//   pointers: nullptr on failure              -> return fail_null<mrc_cq>(EINVAL);
#pragma once

#include <cerrno>
#include <cstdint>

namespace mrc::api {

inline constexpr uint16_t kMaxWimm = 1024;  // max_wimm and max_wimm_dest
inline constexpr uint8_t kMaxMpr = 64;      // units of 128 PSNs

inline int fail_minus_one(int e) {
  errno = e;
  return -1;
}
inline int fail_errno(int e) {
  errno = e;
  return e;
}
template <typename T>
T* fail_null(int e) {
  errno = e;
  return nullptr;
}

}  // namespace mrc::api
