#include "wire/codec.h"

#include <gtest/gtest.h>

namespace rackgate::wire {
namespace {

TEST(Base64, RoundTripsEveryLength) {
  std::vector<uint8_t> data;
  for (int n = 0; n < 70; ++n) {
    auto back = Base64Decode(Base64Encode(data), 100);
    ASSERT_TRUE(back.has_value()) << n;
    EXPECT_EQ(*back, data);
    data.push_back(static_cast<uint8_t>(n * 37));
  }
}

TEST(Base64, RefusesNonCanonicalAndOversized) {
  for (const char* bad : {"QQ", "QQ=", "Q===", "QR==", "QQ==QQ==", "Q Q=", "QQ=\n", "QQ=A", "@@@@",
                          "QUJD\n"}) {
    EXPECT_FALSE(Base64Decode(bad, 100).has_value()) << bad;
  }
  EXPECT_TRUE(Base64Decode("QUJD", 3).has_value());
  EXPECT_FALSE(Base64Decode("QUJD", 2).has_value());
  EXPECT_FALSE(Base64Decode("QUJDRA==", 3).has_value());
}

TEST(Base64Url, NoPaddingNoPlusSlash) {
  std::vector<uint8_t> d = {0xfb, 0xff, 0xfe};
  EXPECT_EQ(Base64UrlEncode(d), "-__-");
  EXPECT_EQ(Base64UrlEncode(std::vector<uint8_t>{1}), "AQ");
}

TEST(Hex, DecodeStrict) {
  EXPECT_EQ(*HexDecode("00aAfF", 3), (std::vector<uint8_t>{0, 0xaa, 0xff}));
  EXPECT_FALSE(HexDecode("0", 3).has_value());
  EXPECT_FALSE(HexDecode("0g", 3).has_value());
  EXPECT_FALSE(HexDecode("00112233", 3).has_value());
  EXPECT_EQ(HexEncode(std::vector<uint8_t>{0xab, 1}), "ab01");
}

}  // namespace
}  // namespace rackgate::wire
