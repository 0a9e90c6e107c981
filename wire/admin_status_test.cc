// Tests of the admin API's status body (wire/admin_status.h): round trip,
// every truncation, the exact text, invalid UTF-8, malformed fields.
#include "wire/admin_status.h"

#include <gtest/gtest.h>

#include <string>

#include "wire/testing/admin_test_util.h"

namespace rackgate::wire {
namespace {

using testing::ExpectEveryPrefixRefused;

StatusView SomeStatus() {
  StatusView s;
  s.machines_by_state = {{"attested", 2}, {"enrolled", 1}, {"revoked", 0}};
  s.recent_failures = {{1800000000, "node-1", "boot_policy_violation", {"secureboot:disabled", "pcrs:pcr_mismatch"}},
                       {1799999000, "node-2", "quote_invalid", {}}};
  s.machines_untrusted = 1;
  s.pools_observing_boot_policy = {"edge", "workers"};
  s.unknown_eks = {{std::string(64, 'a'), 1799990000, 1800000000, 3, "192.0.2.7", "machine_not_enrolled",
                    "CN=Some TPM CA", "CN=ek"},
                   {std::string(64, 'b'), 1799990001, 1799990002, 1, "192.0.2.8", "ek_untrusted", "", ""}};
  s.anonymous_refusals = {{"node-3", 40, 1799999000, 1800000000, "198.51.100.66", "activation_failed"}};
  s.anonymous_refusals_total = 41;
  s.cluster_ca = {"prepared", 1900000000, 2100000000};
  s.appliance_ca_rotation = "prepared";
  s.appliance_ca_rotation_since = 1799999999;
  return s;
}

TEST(StatusView, RoundTripsAndTruncation) {
  const StatusView s = SomeStatus();
  const std::string body = EncodeStatusView(s);
  auto back = DecodeStatusView(body);
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(*back, s);
  ExpectEveryPrefixRefused(body, DecodeStatusView);
  auto empty = DecodeStatusView("{}");
  ASSERT_TRUE(empty.ok());
  EXPECT_EQ(*empty, StatusView{});
}

// Issue 44: the cluster CA's stage, when the appliance has one.
TEST(StatusView, ClusterCa) {
  auto bad = DecodeStatusView(R"({"cluster_ca": []})");
  EXPECT_EQ(bad.status().reason(), "field_invalid");
  auto no_stage = DecodeStatusView(R"({"cluster_ca": {"not_after": 1}})");
  EXPECT_EQ(no_stage.status().reason(), "field_missing");
  auto wrong = DecodeStatusView(R"({"cluster_ca": {"stage": "none", "not_after": "x"}})");
  EXPECT_FALSE(wrong.ok());
  auto ok = DecodeStatusView(R"({"cluster_ca": {"stage": "switched", "not_after": 5, "other_not_after": 4}})");
  ASSERT_TRUE(ok.ok()) << ok.status().ToString();
  EXPECT_EQ(ok->cluster_ca, (ClusterCaView{"switched", 5, 4}));
}

TEST(StatusView, TheAnswersText) {
  StatusView s;
  s.machines_by_state = {{"enrolled", 1}};
  s.unknown_eks = {{"ab", 1, 2, 3, "192.0.2.7", "machine_not_enrolled", "", "CN=ek"}};
  s.anonymous_refusals = {{"node-3", 4, 5, 6, "198.51.100.66", "activation_failed"}};
  s.anonymous_refusals_total = 4;
  // An EK certificate's names are left out when empty.
  EXPECT_EQ(EncodeStatusView(s),
            R"({"anonymous_refusals":[{"address":"198.51.100.66","count":4,"first_seen":5,"hostname":"node-3",)"
            R"("last_seen":6,"reason":"activation_failed"}],"anonymous_refusals_total":4,)"
            R"("machines_by_state":{"enrolled":1},"machines_untrusted":0,"pools_observing_boot_policy":[],)"
            R"("recent_failures":[],"unknown_eks":[{"address":"192.0.2.7","count":3,"ek_certificate_subject":"CN=ek",)"
            R"("ek_hash":"ab","first_seen":1,"last_seen":2,"reason":"machine_not_enrolled"}]})");
}

// A machine's hostname and an EK certificate's names come from outside:
// invalid UTF-8 is replaced, never thrown.
TEST(StatusView, ReplacesInvalidUtf8) {
  StatusView s;
  s.unknown_eks = {{"ab", 0, 0, 0, "", "", "CN=\xff", ""}};
  s.recent_failures = {{0, "node-\xfe", "", {"r\xff"}}};
  std::string body;
  ASSERT_NO_THROW(body = EncodeStatusView(s));
  auto back = DecodeStatusView(body);
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(back->unknown_eks[0].ek_certificate_issuer, "CN=\xef\xbf\xbd");
  EXPECT_EQ(back->recent_failures[0].hostname, "node-\xef\xbf\xbd");
  EXPECT_EQ(back->recent_failures[0].reasons[0], "r\xef\xbf\xbd");
}

TEST(StatusView, RefusesMalformedFields) {
  for (const char* bad :
       {R"({"machines_by_state":[]})", R"({"machines_by_state":{"enrolled":"1"}})", R"({"recent_failures":{}})",
        R"({"recent_failures":[1]})", R"({"recent_failures":[{"at":"x"}]})", R"({"recent_failures":[{"reasons":"r"}]})",
        R"({"recent_failures":[{"reasons":[1]}]})", R"({"machines_untrusted":1.5})",
        R"({"pools_observing_boot_policy":"edge"})", R"({"pools_observing_boot_policy":[1]})", R"({"unknown_eks":[1]})",
        R"({"unknown_eks":[{"count":-1}]})", R"({"unknown_eks":[{"ek_certificate_issuer":1}]})",
        R"({"anonymous_refusals":{}})", R"({"anonymous_refusals":[{"hostname":2}]})",
        R"({"anonymous_refusals_total":-3})", R"({"anonymous_refusals_total":"3"})"}) {
    auto r = DecodeStatusView(bad);
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_EQ(r.status().reason(), "field_invalid") << bad;
  }
  EXPECT_TRUE(DecodeStatusView(R"({"machines_untrusted":0,"later":true})").ok());
}

}  // namespace
}  // namespace rackgate::wire
