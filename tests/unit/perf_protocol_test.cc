#include "net/perf_protocol.h"

#include <gtest/gtest.h>

#include <string>
#include <utility>
#include <vector>

namespace mrc::net {
namespace {

std::vector<uint8_t> frame(const std::string& text) {
  return std::vector<uint8_t>(text.begin(), text.end());
}

TEST(PerfProtocol, encode_perf_message__round_trips_in_order) {
  const std::vector<std::pair<std::string, uint64_t>> fields = {
      {"mismatches", 0}, {"imm_received", 17}, {"cpu_us", UINT64_MAX}};
  const auto f = encode_perf_message(fields);
  EXPECT_EQ(std::string(f.begin(), f.end()),
            "mismatches=0\nimm_received=17\ncpu_us=18446744073709551615\n");
  auto d = decode_perf_message(f);
  ASSERT_TRUE(d) << d.error().message;
  EXPECT_EQ(d->size(), 3u);
  EXPECT_EQ(perf_field(*d, "imm_received"), 17u);
  EXPECT_EQ(perf_field(*d, "cpu_us"), UINT64_MAX);
  EXPECT_EQ(perf_field(*d, "absent"), 0u);
  EXPECT_TRUE(decode_perf_message({})->empty());
}

TEST(PerfProtocol, decode_perf_message__refuses_what_is_not_key_value_lines) {
  for (const char* bad : {"size=1", "size\n", "=1\n", "Size=1\n", "size=\n", "size=1x\n",
                          "size=-1\n", "size=18446744073709551616\n", "the server refused: no\n"}) {
    auto d = decode_perf_message(frame(bad));
    ASSERT_FALSE(d) << bad;
    EXPECT_EQ(d.error().code, NetErrc::kBadHello) << bad;
    EXPECT_NE(d.error().message.find("line 1"), std::string::npos) << d.error().message;
  }
  for (const char* bad : {"round=1\nsize=x\n", "size=1\nsize=2\n"}) {
    auto d = decode_perf_message(frame(bad));
    ASSERT_FALSE(d) << bad;
    EXPECT_NE(d.error().message.find("line 2"), std::string::npos) << d.error().message;
  }
}

TEST(PerfProtocol, perf_round__and_the_other_messages_decode_to_their_fields) {
  auto round = decode_perf_message(perf_round(65536));
  ASSERT_TRUE(round);
  EXPECT_EQ(perf_field(*round, "round"), 1u);
  EXPECT_EQ(perf_field(*round, "size"), 65536u);
  auto end = decode_perf_message(perf_end(100, 25));
  ASSERT_TRUE(end);
  EXPECT_EQ(perf_field(*end, "end"), 1u);
  EXPECT_EQ(perf_field(*end, "iters"), 100u);
  EXPECT_EQ(perf_field(*end, "per_qp_iters"), 25u);
  auto bye = decode_perf_message(perf_bye(2));
  ASSERT_TRUE(bye);
  EXPECT_EQ(perf_field(*bye, "bye"), 1u);
  EXPECT_EQ(perf_field(*bye, "qp_errors"), 2u);
  for (const auto& m : {perf_ready(), perf_raw(), perf_raw_end(), perf_alive()})
    EXPECT_TRUE(decode_perf_message(m)) << std::string(m.begin(), m.end());
  EXPECT_TRUE(is_perf_alive(perf_alive()));
  EXPECT_FALSE(is_perf_alive(perf_ready()));
  EXPECT_FALSE(is_perf_alive(frame("alive=1\nx=1\n")));
}

}  // namespace
}  // namespace mrc::net
