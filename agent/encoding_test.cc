#include "agent/encoding.h"

#include <gtest/gtest.h>

#include <string>

namespace rackgate::agent {
namespace {

std::vector<uint8_t> B(const std::string& s) { return {s.begin(), s.end()}; }

TEST(Base64, RoundTripsEveryLengthModThree) {
  for (const std::string s : {"", "f", "fo", "foo", "foob", "fooba", "foobar"}) {
    const std::string enc = Base64Encode(B(s));
    auto dec = Base64Decode(enc, 100);
    ASSERT_TRUE(dec.has_value()) << enc;
    EXPECT_EQ(*dec, B(s));
  }
  EXPECT_EQ(Base64Encode(B("foobar")), "Zm9vYmFy");
  EXPECT_EQ(Base64Encode(B("fo")), "Zm8=");
  EXPECT_EQ(Base64Encode(B("f")), "Zg==");
}

TEST(Base64, DecodesPaddingWithoutTrailingZeros) {
  auto d = Base64Decode("Zg==", 10);
  ASSERT_TRUE(d);
  EXPECT_EQ(d->size(), 1u);
  d = Base64Decode("Zm8=", 10);
  ASSERT_TRUE(d);
  EXPECT_EQ(d->size(), 2u);
}

TEST(Base64, RefusesNonCanonicalAndMalformed) {
  for (const char* bad : {"Zg=", "Zg", "Z===", "=Zg=", "Zg=a", " Zg==", "Zg==\n", "Zh==", "Zm9=", "Zm9v!A==",
                          "Zm9v-_==", "Zm 9v"}) {
    EXPECT_FALSE(Base64Decode(bad, 100).has_value()) << bad;
  }
}

TEST(Base64, RefusesMoreThanTheLimitBeforeDecoding) {
  EXPECT_TRUE(Base64Decode("Zm9vYmFy", 6).has_value());
  EXPECT_FALSE(Base64Decode("Zm9vYmFy", 5).has_value());
  EXPECT_TRUE(Base64Decode("Zm8=", 2).has_value());
  EXPECT_FALSE(Base64Decode("Zm8=", 1).has_value());
}

TEST(Hex, DecodesEitherCaseAndRefusesTheRest) {
  auto d = HexDecode("00ffAb", 3);
  ASSERT_TRUE(d);
  EXPECT_EQ(*d, (std::vector<uint8_t>{0x00, 0xff, 0xab}));
  EXPECT_TRUE(HexDecode("", 0).has_value());
  for (const char* bad : {"0", "0g", "00:11", " 00", "0x00"}) EXPECT_FALSE(HexDecode(bad, 10).has_value()) << bad;
  EXPECT_FALSE(HexDecode("0011", 1).has_value());
}

}  // namespace
}  // namespace rackgate::agent
