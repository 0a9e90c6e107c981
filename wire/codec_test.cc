#include "wire/codec.h"
#include "base/hex.h"

#include <gtest/gtest.h>

namespace rackgate::wire {
namespace {

// The codec's cases are base/base64_test.cc; wire's names forward to it.
TEST(Base64, ForwardsToTheOneCodec) {
  const std::vector<uint8_t> d = {'f', 'o'};
  EXPECT_EQ(Base64Encode(d), "Zm8=");
  EXPECT_EQ(Base64Decode("Zm8=", 2), d);
  EXPECT_FALSE(Base64Decode("Zm8=", 1).has_value());
  EXPECT_FALSE(Base64Decode("Zm9=", 2).has_value());
}

TEST(Base64Url, NoPaddingNoPlusSlash) {
  std::vector<uint8_t> d = {0xfb, 0xff, 0xfe};
  EXPECT_EQ(Base64UrlEncode(d), "-__-");
  EXPECT_EQ(Base64UrlEncode(std::vector<uint8_t>{1}), "AQ");
}

TEST(Hex, DecodeStrict) {
  EXPECT_EQ(*hex::Decode("00aAfF", 3), (std::vector<uint8_t>{0, 0xaa, 0xff}));
  EXPECT_FALSE(hex::Decode("0", 3).has_value());
  EXPECT_FALSE(hex::Decode("0g", 3).has_value());
  EXPECT_FALSE(hex::Decode("00112233", 3).has_value());
  EXPECT_EQ(hex::Encode(std::vector<uint8_t>{0xab, 1}), "ab01");
}

TEST(Hex, DecodesEitherCaseAndRefusesTheRest) {
  auto d = hex::Decode("00ffAb", 3);
  ASSERT_TRUE(d);
  EXPECT_EQ(*d, (std::vector<uint8_t>{0x00, 0xff, 0xab}));
  EXPECT_TRUE(hex::Decode("", 0).has_value());
  for (const char* bad : {"0", "0g", "00:11", " 00", "0x00"}) EXPECT_FALSE(hex::Decode(bad, 10).has_value()) << bad;
  EXPECT_FALSE(hex::Decode("0011", 1).has_value());
}

}  // namespace
}  // namespace rackgate::wire
