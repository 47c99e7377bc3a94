// IdCipher (src/transport/id_cipher.h): a keyed permutation; key 0 is the identity.
#include "transport/id_cipher.h"

#include <gtest/gtest.h>
#include <rapidcheck.h>
#include <rapidcheck/gtest.h>

#include <vector>

namespace mrc {
namespace {

TEST(IdCipher, key_zero__is_the_identity) {
  const IdCipher c(0, 24);
  for (uint32_t x : {0u, 1u, 2u, 4097u, 0xFFFFFFu}) {
    EXPECT_EQ(c.encrypt(x), x);
    EXPECT_EQ(c.decrypt(x), x);
  }
}

TEST(IdCipher, encrypt__is_a_permutation_of_the_whole_domain) {
  const IdCipher c(0x5EED, 16);
  std::vector<bool> seen(1 << 16);
  uint32_t fixed_points = 0;
  for (uint32_t x = 0; x < (1u << 16); ++x) {
    const uint32_t y = c.encrypt(x);
    ASSERT_LT(y, 1u << 16);
    ASSERT_FALSE(seen[y]) << "two inputs map to " << y;
    seen[y] = true;
    fixed_points += y == x;
  }
  EXPECT_LT(fixed_points, 16u);
}

TEST(IdCipher, encrypt__consecutive_inputs_do_not_give_consecutive_outputs) {
  const IdCipher c(0xC0FFEE, 24);
  int neighbours = 0;
  for (uint32_t x = 2; x < 1000; ++x)
    neighbours += c.encrypt(x + 1) == c.encrypt(x) + 1;
  EXPECT_LT(neighbours, 5);
  EXPECT_NE(IdCipher(1, 24).encrypt(2), IdCipher(2, 24).encrypt(2)) << "the key matters";
}

RC_GTEST_PROP(IdCipher, decrypt__inverts_encrypt_for_any_key_and_width, ()) {
  const uint64_t key = *rc::gen::arbitrary<uint64_t>();
  const int bits = 2 * *rc::gen::inRange(1, 17);
  const IdCipher c(key, bits);
  const uint32_t x = *rc::gen::arbitrary<uint32_t>() & c.mask();
  RC_ASSERT(c.encrypt(x) <= c.mask());
  RC_ASSERT(c.decrypt(c.encrypt(x)) == x);
  RC_ASSERT(c.encrypt(c.decrypt(x)) == x);
}

}  // namespace
}  // namespace mrc
