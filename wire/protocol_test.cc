#include "wire/protocol.h"

#include <gtest/gtest.h>


namespace rackgate::wire {
namespace {

const std::string kB64 = "AAEC";  // 00 01 02

TEST(ChallengeRequest, ParsesAndRefuses) {
  auto r = ParseChallengeRequest(R"({"ek_public":"AAEC","ak_public":"AAEC","ek_certificate":"AAEC"})");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->ek_public, (Bytes{0, 1, 2}));
  EXPECT_TRUE(r->ek_certificate.has_value());

  struct Case { const char* body; const char* reason; };
  for (const Case& c : {Case{"", "bad_json"}, Case{"[]", "bad_json"}, Case{"{", "bad_json"},
                        Case{R"({"ak_public":"AAEC"})", "field_missing"},
                        Case{R"({"ek_public":"AAEC"})", "field_missing"},
                        Case{R"({"ek_public":"AAE","ak_public":"AAEC"})", "field_invalid"},
                        Case{R"({"ek_public":1,"ak_public":"AAEC"})", "field_invalid"},
                        Case{R"({"ek_public":"","ak_public":"AAEC"})", "field_invalid"},
                        Case{R"({"ek_public":"AAEC","ak_public":"AAEC","extra":1})", "field_invalid"},
                        Case{R"({"ek_public":"AAEC","ak_public":"AAEC","ek_intermediates":"AAEC"})",
                             "field_invalid"},
                        Case{R"({"ek_public":"AAEC","ak_public":"AAEC","ek_intermediates":["A","B","C","D","E"]})",
                             "field_invalid"}}) {
    auto x = ParseChallengeRequest(c.body);
    ASSERT_FALSE(x.ok()) << c.body;
    EXPECT_EQ(x.status().reason(), c.reason) << c.body;
  }
}

TEST(EvidenceRequest, ParsesPcrsStrictly) {
  const std::string h32(64, 'a');
  auto ok = ParseEvidenceRequest(R"({"session":"s1","secret":"00ff","quote":"AAEC","signature":"AAEC",)"
                                 R"("pcrs":{"sha256":{"0":")" + h32 + R"(","23":")" + h32 + R"("}}})");
  ASSERT_TRUE(ok.ok()) << ok.status().ToString();
  EXPECT_EQ(ok->pcrs.at(attest::kAlgSha256).size(), 2u);
  EXPECT_FALSE(ok->event_log.has_value());
  for (const std::string& pcrs : std::vector<std::string>{R"({"sha256":{"24":")" + h32 + R"("}})", R"({"sha256":{"00":")" + h32 + R"("}})",
                                 R"({"md5":{"0":")" + h32 + R"("}})", R"({"sha256":{"0":"abcd"}})",
                                 R"({"sha1":{"0":")" + h32 + R"("}})", R"({"sha256":{"-1":")" + h32 + R"("}})",
                                 R"({"sha256":[]})", R"([])"}) {
    auto x = ParseEvidenceRequest(R"({"session":"s1","secret":"00ff","quote":"AAEC","signature":"AAEC","pcrs":)" +
                                  pcrs + "}");
    ASSERT_FALSE(x.ok()) << pcrs;
    EXPECT_EQ(x.status().reason(), "field_invalid") << pcrs;
  }
  auto long_session = ParseEvidenceRequest(R"({"session":")" + std::string(65, 'x') +
                                           R"(","secret":"00","quote":"AAEC","signature":"AAEC","pcrs":{}})");
  EXPECT_FALSE(long_session.ok());
}

}  // namespace
}  // namespace rackgate::wire
