// Tests for common/be_codec.h: big-endian round trips, and a reader that runs off its input
// reports it and reads zeros instead of reading past the end.
#include "common/be_codec.h"

#include <gtest/gtest.h>

namespace mrc {
namespace {

TEST(BeCodec, writer__big_endian_and_the_reader_reads_it_back) {
  std::vector<uint8_t> out;
  BeWriter w(out);
  w.u8(0x01);
  w.u16(0x0203);
  w.u32(0x04050607);
  w.u64(0x08090A0B0C0D0E0Full);
  const uint8_t raw[] = {0xAA, 0xBB};
  w.bytes(raw);
  EXPECT_EQ(out,
            (std::vector<uint8_t>{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 0xAA, 0xBB}));
  BeReader r(out);
  EXPECT_EQ(r.u8(), 0x01);
  EXPECT_EQ(r.u16(), 0x0203);
  EXPECT_EQ(r.u32(), 0x04050607u);
  EXPECT_EQ(r.u64(), 0x08090A0B0C0D0E0Full);
  uint8_t back[2] = {};
  r.bytes(back);
  EXPECT_EQ(back[1], 0xBB);
  EXPECT_TRUE(r.ok());
  EXPECT_EQ(r.left(), 0u);
}

TEST(BeReader, u32__past_the_end_is_not_ok_and_its_missing_bytes_read_zero) {
  const std::vector<uint8_t> in = {1, 2, 3};
  BeReader r(in);
  EXPECT_EQ(r.u32(), 0x01020300u);  // the three bytes there, then a zero
  EXPECT_FALSE(r.ok());
  EXPECT_EQ(r.left(), 0u);
  uint8_t out[4] = {9, 9, 9, 9};
  r.bytes(out);
  EXPECT_FALSE(r.ok());
  EXPECT_EQ(out[0], 9);  // nothing written
}

TEST(LittleEndian, words__least_significant_byte_first_and_read_back) {
  uint8_t b[6] = {};
  put_le16(b, 0x0102);
  put_le32(b + 2, 0x03040506u);
  const uint8_t want[6] = {0x02, 0x01, 0x06, 0x05, 0x04, 0x03};
  EXPECT_EQ(std::vector<uint8_t>(b, b + 6), std::vector<uint8_t>(want, want + 6));
  EXPECT_EQ(get_le32(b + 2), 0x03040506u);
}

}  // namespace
}  // namespace mrc
