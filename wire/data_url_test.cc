// Tests of the data: URL codec: both forms, bounds, truncation and malformed prefixes.
#include "wire/data_url.h"

#include <gtest/gtest.h>

namespace rackgate::wire {
namespace {

constexpr size_t kMax = 1 << 20;

std::string Decoded(std::string_view url, size_t max_bytes = kMax) {
  Result<DataUrl> r = DecodeDataUrl(url, max_bytes);
  EXPECT_TRUE(r.ok()) << url << ": " << r.status().ToString();
  return r.ok() ? r->data : std::string("<error>");
}

TEST(DataUrl, PlainForm) {
  EXPECT_EQ(Decoded("data:,hello%20world%0A"), "hello world\n");
  EXPECT_EQ(Decoded("data:text/plain;charset=utf-8,a%2Cb"), "a,b");
  EXPECT_EQ(Decoded("data:,a,b"), "a,b");  // only the first comma ends the header
  EXPECT_EQ(Decoded("DATA:,x"), "x");
  EXPECT_EQ(Decoded("data:,"), "");
  EXPECT_EQ(Decoded("data:,%ff%FE"), "\xff\xfe");
  Result<DataUrl> r = DecodeDataUrl("data:text/plain;charset=utf-8,x", kMax);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->media_type, "text/plain;charset=utf-8");
  EXPECT_FALSE(r->base64);
}

TEST(DataUrl, Base64Form) {
  EXPECT_EQ(Decoded("data:;base64,aGVsbG8="), "hello");
  EXPECT_EQ(Decoded("data:application/octet-stream;base64,aGVsbG8="), "hello");
  Result<DataUrl> r = DecodeDataUrl("data:application/x-pem-file;BASE64,aGVsbG8=", kMax);
  ASSERT_TRUE(r.ok());
  EXPECT_TRUE(r->base64);
  EXPECT_EQ(r->media_type, "application/x-pem-file");
  EXPECT_EQ(r->data, "hello");
}

TEST(DataUrl, RefusesMalformed) {
  for (const char* bad :
       {"", "data", "dat:,x", "data:hello", "http://x/,y", " data:,x", "data:,%", "data:,%4", "data:,%zz",
        "data:,%%41", "data:;base64,aGVsbG8", "data:;base64,aGVs bG8=", "data:;base64,@@@",
        "data:;base64,aGVs%62G8=", "data:;base64,aGVsbG8=\n"}) {
    Result<DataUrl> r = DecodeDataUrl(bad, kMax);
    EXPECT_FALSE(r.ok()) << bad;
    EXPECT_EQ(r.status().code(), Status::Code::kInvalidArgument) << bad;
    EXPECT_EQ(r.status().reason(), "data_url_invalid") << bad;
  }
  EXPECT_NE(DecodeDataUrl("data:text/plain", kMax).status().message().find("without a comma"),
            std::string::npos);
  EXPECT_NE(DecodeDataUrl("data:,ab%zz", kMax).status().message().find("bad percent escape at offset 8"),
            std::string::npos);
}

TEST(DataUrl, Bounded) {
  EXPECT_EQ(Decoded("data:,abcde", 5), "abcde");
  EXPECT_FALSE(DecodeDataUrl("data:,abcdef", 5).ok());
  EXPECT_EQ(Decoded("data:,%41%42", 2), "AB");
  EXPECT_FALSE(DecodeDataUrl("data:,%41%42%43", 2).ok());
  EXPECT_EQ(Decoded("data:;base64,aGVsbG8=", 5), "hello");
  EXPECT_FALSE(DecodeDataUrl("data:;base64,aGVsbG8=", 4).ok());
  EXPECT_EQ(Decoded("data:,", 0), "");
  EXPECT_FALSE(DecodeDataUrl("data:,x", 0).ok());
}

// Every prefix of a valid URL either fails cleanly or decodes to a prefix of
// the full data; none reads past its end (ASan) or decodes to something else.
TEST(DataUrl, TruncationLoop) {
  for (const std::string& full : {std::string("data:text/plain;charset=utf-8,a%20b%0Ac"),
                                 std::string("data:application/octet-stream;base64,aGVsbG8gd29ybGQ=")}) {
    const std::string want = Decoded(full);
    for (size_t n = 0; n < full.size(); ++n) {
      const std::string cut = full.substr(0, n);
      Result<DataUrl> r = DecodeDataUrl(cut, kMax);
      if (!r.ok()) {
        EXPECT_EQ(r.status().reason(), "data_url_invalid") << cut;
        continue;
      }
      EXPECT_EQ(want.compare(0, r->data.size(), r->data), 0) << cut;
    }
  }
}

TEST(DataUrl, MalformedPrefixes) {
  // A bad byte anywhere in the scheme, or a header with no comma after it,
  // is refused whatever follows.
  const std::string good = "data:,x";
  for (size_t i = 0; i < 5; ++i) {
    std::string bad = good;
    bad[i] = '#';
    EXPECT_FALSE(DecodeDataUrl(bad, kMax).ok()) << bad;
  }
  EXPECT_FALSE(DecodeDataUrl("data:;base64", kMax).ok());
  EXPECT_FALSE(DecodeDataUrl("data:text/plain;base64", kMax).ok());
}

TEST(DataUrl, RoundTrip) {
  std::string every_byte;
  for (int c = 0; c < 256; ++c) every_byte.push_back(static_cast<char>(c));
  for (bool base64 : {false, true}) {
    for (const std::string& data : {std::string(), std::string("{{x}}"), every_byte}) {
      DataUrl u{"text/plain;charset=utf-8", base64, data};
      Result<DataUrl> back = DecodeDataUrl(EncodeDataUrl(u), kMax);
      ASSERT_TRUE(back.ok()) << EncodeDataUrl(u);
      EXPECT_EQ(back->media_type, u.media_type);
      EXPECT_EQ(back->base64, base64);
      EXPECT_EQ(back->data, data);
    }
  }
  EXPECT_EQ(EncodeDataUrl({"", false, "a/b:c=d e~"}), "data:,a%2Fb%3Ac%3Dd%20e~");
  EXPECT_EQ(EncodeDataUrl({"", true, "hello"}), "data:;base64,aGVsbG8=");
}

}  // namespace
}  // namespace rackgate::wire
