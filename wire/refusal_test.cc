// Tests of the one refusal body (wire/refusal.h): the exact bytes, round
// trips, every truncation, malformed prefixes and fields, the depth bound,
// and the lenient reading's fallback.
#include "wire/refusal.h"

#include <gtest/gtest.h>

#include <string>

namespace rackgate::wire {
namespace {

TEST(Refusal, EncodesTheBytesRackgatedHasAlwaysSent) {
  EXPECT_EQ(EncodeRefusal({"busy", "try \"later\""}), R"({"error":{"message":"try \"later\"","reason":"busy"}})");
  // Invalid UTF-8 in a message does not make the refusal fail.
  EXPECT_EQ(EncodeRefusal({"x", "a\xff"}), "{\"error\":{\"message\":\"a\xef\xbf\xbd\",\"reason\":\"x\"}}");
  auto internal = DecodeRefusal(kInternalRefusalBody);
  ASSERT_TRUE(internal.ok());
  EXPECT_EQ(*internal, (Refusal{"internal", "internal error"}));
}

TEST(Refusal, RoundTripsWholeAndEveryTruncationIsRefused) {
  // Whole: no cut, no escaping (the reader's job, for its terminal).
  const Refusal whole{"x", std::string(5000, 'm')};
  EXPECT_EQ(*DecodeRefusal(EncodeRefusal(whole)), whole);
  const Refusal r{"quote_nonce_mismatch", "not over this session's nonce\n\x1b[31m"};
  const std::string body = EncodeRefusal(r);
  auto back = DecodeRefusal(body);
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(*back, r);
  for (size_t n = 0; n < body.size(); ++n) {
    auto cut = DecodeRefusal(std::string_view(body).substr(0, n));
    ASSERT_FALSE(cut.ok()) << n;
    EXPECT_EQ(cut.status().reason(), "bad_json") << n;
    EXPECT_EQ(DecodeRefusalOr(std::string_view(body).substr(0, n), "http_500"),
              (Refusal{"http_500", body.substr(0, n)}))
        << n;
  }
}

TEST(Refusal, MalformedBodiesAndFields) {
  struct Case {
    const char* body;
    const char* reason;
  };
  for (const Case& c : {Case{"<html>", "bad_json"}, Case{"[1]", "bad_json"}, Case{"", "bad_json"},
                        Case{R"({"report":{}})", "field_missing"}, Case{R"({"error":"x"})", "field_invalid"},
                        Case{R"({"error":[]})", "field_invalid"}, Case{R"({"error":{"reason":1}})", "field_invalid"},
                        Case{R"({"error":{"reason":"x","message":5}})", "field_invalid"}}) {
    auto r = DecodeRefusal(c.body);
    ASSERT_FALSE(r.ok()) << c.body;
    EXPECT_EQ(r.status().reason(), c.reason) << c.body;
  }
  // Absent (or null) fields are empty, not a failure: a proxy's refusal may
  // carry only one of them.
  auto partial = DecodeRefusal(R"({"error":{"message":"m","reason":null}})");
  ASSERT_TRUE(partial.ok());
  EXPECT_EQ(*partial, (Refusal{"", "m"}));
}

TEST(Refusal, DepthIsBoundedBeforeParsing) {
  const std::string deep = R"({"error":)" + std::string(100, '[') + std::string(100, ']') + "}";
  EXPECT_EQ(DecodeRefusal(deep).status().reason(), "bad_json");
  EXPECT_EQ(DecodeRefusalOr(deep, "http_502"), (Refusal{"http_502", deep}));
}

TEST(Refusal, LenientReadingKeepsWhatItCannotRead) {
  const std::string long_message(500, 'm');
  const std::string full = R"({"error":{"reason":"ek_in_use","message":")" + long_message + R"("}})";
  EXPECT_EQ(DecodeRefusalOr(full, "http_409"), (Refusal{"ek_in_use", long_message}));
  const std::string reason_only = R"({"error":{"reason":"x"}})";
  EXPECT_EQ(DecodeRefusalOr(reason_only, "http_400"), (Refusal{"x", reason_only}));
  for (const std::string body : {R"({"error":{"reason":1}})", R"({"error":"x"})", "<html>bad gateway</html>"}) {
    EXPECT_EQ(DecodeRefusalOr(body, "http_502"), (Refusal{"http_502", body})) << body;
  }
}

}  // namespace
}  // namespace rackgate::wire
