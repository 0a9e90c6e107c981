// The admin API's EK certificate bodies (issue 41): each round trips, and a
// request without a certificate or with a field of the wrong type is refused.
#include "wire/admin_ek_certs.h"

#include <gtest/gtest.h>

namespace rackgate::wire {
namespace {

TEST(AdminEkCerts, RoundTrips) {
  const EkCertImportRequest req{"MAMCAQE=", "node-1.json"};
  EXPECT_EQ(*DecodeEkCertImportRequest(EncodeEkCertImportRequest(req)), req);
  const EkCertImportAnswer a{"stored", "node-1", "ab", "CN=CA", "cd", {"sha1"}, "node-1: on record"};
  EXPECT_EQ(*DecodeEkCertImportAnswer(EncodeEkCertImportAnswer(a)), a);
  const EkCertMissingList l{false, {{"node-1", "enrolled", "ab", "AAE=", "", 0, ""},
                                    {"", "", "cd", "", "machine_not_enrolled", 17, "192.0.2.1"}}};
  EXPECT_EQ(*DecodeEkCertMissingList(EncodeEkCertMissingList(l)), l);
}

TEST(AdminEkCerts, MalformedBodiesAreRefused) {
  EXPECT_EQ(DecodeEkCertImportRequest("{}").status().reason(), "field_missing");
  EXPECT_EQ(DecodeEkCertImportRequest(R"({"certificate": ""})").status().reason(), "field_missing");
  EXPECT_EQ(DecodeEkCertImportRequest(R"({"certificate": 3})").status().reason(), "field_invalid");
  EXPECT_EQ(DecodeEkCertImportRequest(R"({"certificate": "x", "source": []})").status().reason(), "field_invalid");
  EXPECT_EQ(DecodeEkCertImportRequest("[]").status().reason(), "bad_json");
  EXPECT_EQ(DecodeEkCertMissingList(R"({"missing": [3]})").status().reason(), "field_invalid");
  EXPECT_EQ(DecodeEkCertMissingList(R"({"missing": [{"last_seen": "x"}]})").status().reason(), "field_invalid");
  EXPECT_EQ(DecodeEkCertImportAnswer(R"({"relaxations": "sha1"})").status().reason(), "field_invalid");
}

}  // namespace
}  // namespace rackgate::wire
