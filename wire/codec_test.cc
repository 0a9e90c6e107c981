#include "wire/codec.h"
#include "base/hex.h"

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
  EXPECT_EQ(*hex::Decode("00aAfF", 3), (std::vector<uint8_t>{0, 0xaa, 0xff}));
  EXPECT_FALSE(hex::Decode("0", 3).has_value());
  EXPECT_FALSE(hex::Decode("0g", 3).has_value());
  EXPECT_FALSE(hex::Decode("00112233", 3).has_value());
  EXPECT_EQ(hex::Encode(std::vector<uint8_t>{0xab, 1}), "ab01");
}

// The agent's former codec tests (agent/encoding_test.cc): the agent now
// uses this codec, so its expectations hold here.
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
  auto d = hex::Decode("00ffAb", 3);
  ASSERT_TRUE(d);
  EXPECT_EQ(*d, (std::vector<uint8_t>{0x00, 0xff, 0xab}));
  EXPECT_TRUE(hex::Decode("", 0).has_value());
  for (const char* bad : {"0", "0g", "00:11", " 00", "0x00"}) EXPECT_FALSE(hex::Decode(bad, 10).has_value()) << bad;
  EXPECT_FALSE(hex::Decode("0011", 1).has_value());
}

}  // namespace
}  // namespace rackgate::wire
