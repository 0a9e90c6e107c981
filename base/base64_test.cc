// The one base64 codec: round trips, the truncation loop, canonical form,
// bounds (wire's and kube's former cases).
#include "base/base64.h"

#include <gtest/gtest.h>

namespace rackgate::base64 {
namespace {

std::vector<uint8_t> B(const std::string& s) { return {s.begin(), s.end()}; }

TEST(Base64, RoundTripsEveryLength) {
  std::vector<uint8_t> data;
  for (int n = 0; n < 70; ++n) {
    auto back = Decode(Encode(data), 100);
    ASSERT_TRUE(back.has_value()) << n;
    EXPECT_EQ(*back, data);
    data.push_back(static_cast<uint8_t>(n * 37));
  }
}

TEST(Base64, EncodesTheRfcVectors) {
  for (const std::string s : {"", "f", "fo", "foo", "foob", "fooba", "foobar"}) {
    const std::string enc = Encode(B(s));
    EXPECT_EQ(Encode(std::string_view(s)), enc);
    EXPECT_EQ(Decode(enc, 100), B(s)) << enc;
    EXPECT_EQ(DecodeToString(enc, 100), s) << enc;
  }
  EXPECT_EQ(Encode(B("foobar")), "Zm9vYmFy");
  EXPECT_EQ(Encode(B("fo")), "Zm8=");
  EXPECT_EQ(Encode(B("f")), "Zg==");
}

// Every strict prefix of a valid text is refused unless it ends on a group
// boundary (and then it decodes to the matching prefix of the bytes).
TEST(Base64, Truncation) {
  const std::string bytes("any carnal pleasure\x00\xff", 21);
  const std::string text = Encode(std::string_view(bytes));
  for (size_t n = 0; n < text.size(); ++n) {
    const std::optional<std::string> got = DecodeToString(text.substr(0, n), 100);
    if (n % 4 != 0) {
      EXPECT_FALSE(got.has_value()) << n;
    } else {
      ASSERT_TRUE(got.has_value()) << n;
      EXPECT_EQ(*got, bytes.substr(0, n / 4 * 3)) << n;
    }
  }
}

TEST(Base64, DecodesPaddingWithoutTrailingZeros) {
  EXPECT_EQ(Decode("Zg==", 10), B("f"));
  EXPECT_EQ(Decode("Zm8=", 10), B("fo"));
  EXPECT_EQ(DecodeToString("aGVsbG8=", 5), "hello");
  EXPECT_EQ(DecodeToString("", 0), "");
  EXPECT_EQ(DecodeToString(Encode(std::string_view("\0\xff\x10", 3)), 3), std::string("\0\xff\x10", 3));
}

TEST(Base64, RefusesNonCanonicalAndMalformed) {
  for (const char* bad : {"QQ", "QQ=", "Q===", "QR==", "QQ==QQ==", "Q Q=", "QQ=\n", "QQ=A", "@@@@", "QUJD\n",
                          "Zg=", "Zg", "Z===", "=Zg=", "Zg=a", " Zg==", "Zg==\n", "Zh==", "Zm9=", "Zm9v!A==",
                          "Zm9v-_==", "Zm 9v", "aGVsbG8", "aGVsbG9=", "aGVs bG8=", "====", "aG=sbG8=",
                          "aGVsbG8=\n"}) {
    EXPECT_FALSE(Decode(bad, 100).has_value()) << bad;
    EXPECT_FALSE(DecodeToString(bad, 100).has_value()) << bad;
  }
}

TEST(Base64, RefusesMoreThanTheLimitBeforeDecoding) {
  EXPECT_TRUE(Decode("QUJD", 3).has_value());
  EXPECT_FALSE(Decode("QUJD", 2).has_value());
  EXPECT_FALSE(Decode("QUJDRA==", 3).has_value());
  EXPECT_TRUE(Decode("Zm9vYmFy", 6).has_value());
  EXPECT_FALSE(Decode("Zm9vYmFy", 5).has_value());
  EXPECT_TRUE(Decode("Zm8=", 2).has_value());
  EXPECT_FALSE(Decode("Zm8=", 1).has_value());
  EXPECT_EQ(DecodeToString("aGVsbG8=", 4), std::nullopt);
  // A text far over the bound is refused by its length alone.
  EXPECT_FALSE(Decode(std::string(4000, 'A'), 10).has_value());
}

TEST(Base64Url, NoPaddingNoPlusSlash) {
  EXPECT_EQ(UrlEncode(std::vector<uint8_t>{0xfb, 0xff, 0xfe}), "-__-");
  EXPECT_EQ(UrlEncode(std::vector<uint8_t>{1}), "AQ");
}

}  // namespace
}  // namespace rackgate::base64
