// The one hex codec: round trip, case, bounds, malformed input.
#include "base/hex.h"

#include <gtest/gtest.h>

namespace rackgate::hex {
namespace {

std::vector<uint8_t> B(std::initializer_list<uint8_t> v) { return v; }

TEST(Hex, EncodesLowerCase) {
  EXPECT_EQ(Encode(B({})), "");
  EXPECT_EQ(Encode(B({0x00, 0x0f, 0xa5, 0xff})), "000fa5ff");
}

TEST(Hex, DecodesEitherCase) {
  EXPECT_EQ(Decode("000fA5Ff", 4), B({0x00, 0x0f, 0xa5, 0xff}));
  EXPECT_EQ(Decode("", 0), B({}));
}

TEST(Hex, RoundTripsEveryByte) {
  std::vector<uint8_t> all(256);
  for (int i = 0; i < 256; ++i) all[i] = static_cast<uint8_t>(i);
  EXPECT_EQ(Decode(Encode(all), all.size()), all);
}

TEST(Hex, RefusesOddLengthBadDigitsAndTooMuch) {
  EXPECT_EQ(Decode("abc", 8), std::nullopt);
  EXPECT_EQ(Decode("zz", 8), std::nullopt);
  EXPECT_EQ(Decode("0g", 8), std::nullopt);
  EXPECT_EQ(Decode(" 00", 8), std::nullopt);
  EXPECT_EQ(Decode("0011", 1), std::nullopt);
  EXPECT_TRUE(Decode("0011", 2).has_value());
}

TEST(Hex, TruncationNeverDecodesAPrefixAsWhole) {
  const std::string full = "00112233445566778899aabbccddeeff";
  for (size_t n = 0; n < full.size(); ++n) {
    auto d = Decode(full.substr(0, n), 16);
    if (n % 2 == 1) {
      EXPECT_EQ(d, std::nullopt) << n;
    } else {
      ASSERT_TRUE(d.has_value()) << n;
      EXPECT_EQ(d->size(), n / 2);
    }
  }
}

TEST(PercentEncode, KeepsOnlyTheUnreservedCharacters) {
  EXPECT_EQ(hex::PercentEncode("node-1.example_~"), "node-1.example_~");
  EXPECT_EQ(hex::PercentEncode("a b&c=d?e/f:g%h+i#"), "a%20b%26c%3Dd%3Fe%2Ff%3Ag%25h%2Bi%23");
  EXPECT_EQ(hex::PercentEncode("\xff\x01"), "%FF%01");
  EXPECT_EQ(hex::PercentEncode(""), "");
}

TEST(Hex, DigitIsLowerCase) {
  EXPECT_EQ(Digit(0), '0');
  EXPECT_EQ(Digit(0xa), 'a');
  EXPECT_EQ(Digit(0x1f), 'f');  // the low four bits only
}

TEST(Hex, IsSha256HexWantsExactly64LowerCaseDigits) {
  const std::string digest = Encode(std::vector<uint8_t>(32, 0xab));
  EXPECT_TRUE(IsSha256Hex(digest));
  EXPECT_FALSE(IsSha256Hex(digest.substr(1)));
  EXPECT_FALSE(IsSha256Hex(digest + "a"));
  EXPECT_FALSE(IsSha256Hex(std::string(63, 'a') + "A"));
  EXPECT_FALSE(IsSha256Hex(std::string(63, 'a') + "g"));
  EXPECT_FALSE(IsSha256Hex(""));
  EXPECT_TRUE(IsLowerHex(""));
  EXPECT_TRUE(IsLowerHex("0a9f"));
  EXPECT_FALSE(IsLowerHex("0A"));
  EXPECT_FALSE(IsLowerHex("0x"));
}

}  // namespace
}  // namespace rackgate::hex
