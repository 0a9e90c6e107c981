// Tests of the admin API's boot policy bodies (wire/admin_policy.h): every
// request's decoding as the routes always read it, every answer's round
// trip and truncations, the proposal's derived fields, malformed fields.
#include "wire/admin_policy.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>

#include "wire/testing/admin_test_util.h"

namespace rackgate::wire {
namespace {

using nlohmann::json;
using testing::ExpectEveryPrefixRefused;

template <typename T>
void ExpectRefused(const Result<T>& r, const char* reason, const std::string& message, const char* what) {
  ASSERT_FALSE(r.ok()) << what;
  EXPECT_EQ(r.status().reason(), reason) << what;
  EXPECT_EQ(r.status().message(), message) << what;
}

TEST(PolicyModeRequest, RoundTripAndRefusals) {
  const PolicyModeRequest r{"observe", "rack 7 reinstall"};
  auto back = DecodePolicyModeRequest(EncodePolicyModeRequest(r));
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(*back, r);
  const std::string missing = "mode is required: \"observe\" or \"enforce\"";
  ExpectRefused(DecodePolicyModeRequest(""), "field_missing", missing, "empty");
  ExpectRefused(DecodePolicyModeRequest("{}"), "field_missing", missing, "{}");
  ExpectRefused(DecodePolicyModeRequest(R"({"mode": 1})"), "field_missing", missing, "a number");
  ExpectRefused(DecodePolicyModeRequest("[]"), "bad_json", "body is not a JSON object", "a list");
  // A mode it does not know is the core's to refuse; a reason that is no
  // string is no reason.
  auto odd = DecodePolicyModeRequest(R"({"mode": "audit", "reason": 5})");
  ASSERT_TRUE(odd.ok());
  EXPECT_EQ(*odd, (PolicyModeRequest{"audit", ""}));
}

TEST(PolicyAcceptRequest, RoundTripAndRefusals) {
  const PolicyAcceptRequest r{std::string(64, 'a'), true, "looked at it"};
  const std::string body = EncodePolicyAcceptRequest(r);
  auto back = DecodePolicyAcceptRequest(body);
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(*back, r);
  // Every truncation but the empty body (an empty object) is refused.
  for (size_t n = 1; n < body.size(); ++n) {
    EXPECT_EQ(DecodePolicyAcceptRequest(std::string_view(body).substr(0, n)).status().reason(), "bad_json") << n;
  }
  auto empty = DecodePolicyAcceptRequest("");
  ASSERT_TRUE(empty.ok());
  EXPECT_EQ(*empty, PolicyAcceptRequest{});
  ExpectRefused(DecodePolicyAcceptRequest(R"({"proposal_sha256": 5})"), "field_invalid",
                "proposal_sha256 is the hex digest `policy propose` printed", "sha");
  ExpectRefused(DecodePolicyAcceptRequest(R"({"keep_observing": "yes"})"), "field_invalid",
                "keep_observing must be true or false", "keep");
}

TEST(PolicyPutRequest, TheThreeFormsOfAPolicy) {
  const PolicyPutRequest r{R"({"version": 1, "authorities": {}, "authorities": {}})", false, "edited"};
  auto back = DecodePolicyPutRequest(EncodePolicyPutRequest(r));
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  // Sent as a string: the text arrives as written, duplicate key and all.
  EXPECT_EQ(*back, r);
  auto object = DecodePolicyPutRequest(R"({"policy": {"version": 1}, "keep_observing": true})");
  ASSERT_TRUE(object.ok());
  EXPECT_EQ(*object, (PolicyPutRequest{R"({"version":1})", true, ""}));
  const PolicyPutRequest clear{std::nullopt, false, ""};
  EXPECT_EQ(EncodePolicyPutRequest(clear), R"({"keep_observing":false,"policy":null})");
  auto cleared = DecodePolicyPutRequest(EncodePolicyPutRequest(clear));
  ASSERT_TRUE(cleared.ok());
  EXPECT_EQ(*cleared, clear);
  const std::string missing = "policy is required: the policy document, or null to clear it";
  ExpectRefused(DecodePolicyPutRequest(""), "field_missing", missing, "empty");
  ExpectRefused(DecodePolicyPutRequest("{}"), "field_missing", missing, "{}");
  ExpectRefused(DecodePolicyPutRequest(R"({"policy": null, "keep_observing": 1})"), "field_invalid",
                "keep_observing must be true or false", "keep");
}

PolicyDiffView SomeDiff() {
  return {true, "the current policy does not parse", {{"pcrs", "changed", {"pcrs.sha256.7 aa"}, {"pcrs.sha256.7 bb"}},
                                                      {"require_separators", "added", {"require_separators true"}, {}}}};
}

TEST(PolicyShowView, RoundTripAndTruncation) {
  const PolicyShowView v{"workers",
                         "observe",
                         R"({"kernel_cmdline":{"exact_sha256":"sha256:ab"},"version":1})",
                         2,
                         {{"fail", 1}, {"none", 0}, {"pass", 1}},
                         {{"node-1", 1800000000, "pass", {}}, {"node-2", 1800000001, "fail", {"pcrs:pcr_mismatch"}}},
                         R"({"version":1,"kernel_cmdline":{"exact":"ro"}})"};
  const std::string body = EncodePolicyShowView(v);
  auto back = DecodePolicyShowView(body);
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(*back, v);
  ExpectEveryPrefixRefused(body, DecodePolicyShowView);
  // No policy: null, and no document.
  const PolicyShowView none{"p", "enforce", std::nullopt, 0, {{"fail", 0}, {"none", 0}, {"pass", 0}}, {}, std::nullopt};
  EXPECT_EQ(EncodePolicyShowView(none),
            R"({"machines":[],"mode":"enforce","observed":0,"policy":null,"pool":"p",)"
            R"("verdicts":{"fail":0,"none":0,"pass":0}})");
  EXPECT_EQ(*DecodePolicyShowView(EncodePolicyShowView(none)), none);
  for (const char* bad : {R"({"observed":"2"})", R"({"verdicts":[]})", R"({"verdicts":{"pass":"1"}})",
                          R"({"machines":{}})", R"({"machines":[{"violations":"x"}]})", R"({"policy_text":{}})"}) {
    auto r = DecodePolicyShowView(bad);
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_EQ(r.status().reason(), "field_invalid") << bad;
  }
}

TEST(PolicyModeAndAppliedViews, RoundTripAndTruncation) {
  const PolicyModeView mode{"workers", "observe", R"({"version":1})"};
  const std::string mode_body = EncodePolicyModeView(mode);
  EXPECT_EQ(mode_body, R"({"mode":"observe","policy":{"version":1},"pool":"workers"})");
  EXPECT_EQ(*DecodePolicyModeView(mode_body), mode);
  ExpectEveryPrefixRefused(mode_body, DecodePolicyModeView);

  const PolicyAppliedView applied{"workers", "enforce", R"({"version":1})", SomeDiff(), "+ a\n- b\n"};
  const std::string body = EncodePolicyAppliedView(applied);
  auto back = DecodePolicyAppliedView(body);
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(*back, applied);
  ExpectEveryPrefixRefused(body, DecodePolicyAppliedView);
  for (const char* bad : {R"({"mode":1})", R"({"diff":[]})", R"({"diff":{"had_current":"no"}})",
                          R"({"diff":{"changes":[1]}})", R"({"diff":{"changes":[{"added":"x"}]}})",
                          R"({"diff_text":[]})"}) {
    auto r = DecodePolicyAppliedView(bad);
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_EQ(r.status().reason(), "field_invalid") << bad;
  }
}

PolicyProposalView SomeProposal() {
  PolicyProposalView v;
  v.pool = "workers";
  v.mode = "observe";
  v.observed = 3;
  v.proposal_sha256 = std::string(64, 'c');
  v.policy_shown_json = R"({"require_separators":true,"version":1})";
  v.machines = {"a", "b", "c"};
  v.platforms = {{"1.0", "IBM", "SW TPM", {"a", "b", "c"}}};
  v.rules = {{"require_secure_boot", true, false, {"a", "b", "c"}, {{{"false"}, {"a", "b", "c"}}}},
             {"boot_applications.allowed", false, false, {}, {{{"sha256:aa"}, {"a"}}, {{"sha256:bb"}, {"b", "c"}}}}};
  v.odd = {{"c", {{"platform", "firmware differs"}}, {{"pcrs", "pcr_mismatch", "PCR 7 differs"}}}};
  v.unusable = {{"d", "eventlog_missing", "no event log"}};
  v.diff = SomeDiff();
  v.text = "3 machines, 1 platform, 1 odd\n";
  v.diff_text = "+ require_separators true\n";
  v.policy_shown = "{\n  \"version\": 1\n}\n";
  v.policy_text = R"({"version": 1, "require_separators": true})";
  return v;
}

TEST(PolicyProposalView, RoundTripAndTruncation) {
  const PolicyProposalView v = SomeProposal();
  const std::string body = EncodePolicyProposalView(v);
  auto back = DecodePolicyProposalView(body);
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(*back, v);
  ExpectEveryPrefixRefused(body, DecodePolicyProposalView);
}

// The summary and the undecided rules are made from the lists; the texts
// left out are absent, not empty.
TEST(PolicyProposalView, DerivedFieldsAndLeftOutTexts) {
  PolicyProposalView v = SomeProposal();
  v.text.reset();
  v.diff_text.reset();
  v.policy_shown.reset();
  v.policy_text.reset();
  const json j = json::parse(EncodePolicyProposalView(v));
  EXPECT_EQ(j.at("summary"), (json{{"machines", 3}, {"platforms", 1}, {"odd", 1}, {"unusable", 1}}));
  EXPECT_EQ(j.at("undecided"), json::array({"boot_applications.allowed"}));
  EXPECT_EQ(j.at("policy"), (json{{"require_separators", true}, {"version", 1}}));
  for (const char* absent : {"text", "diff_text", "policy_shown", "policy_text"}) {
    EXPECT_FALSE(j.contains(absent)) << absent;
  }
  EXPECT_EQ(j.at("rules").at(1).at("values").at(1).at("hostnames"), json::array({"b", "c"}));
  EXPECT_EQ(j.at("odd").at(0).at("violations").at(0).at("reason"), "pcr_mismatch");
  auto back = DecodePolicyProposalView(j.dump());
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(*back, v);
}

TEST(PolicyProposalView, RefusesMalformedFields) {
  for (const char* bad :
       {R"({"observed":"3"})", R"({"machines":"a"})", R"({"platforms":[1]})", R"({"platforms":[{"hostnames":[1]}]})",
        R"({"rules":{}})", R"({"rules":[{"decided":"yes"}]})", R"({"rules":[{"values":[{"items":"x"}]}]})",
        R"({"odd":[{"differences":[1]}]})", R"({"odd":[{"violations":[{"reason":2}]}]})",
        R"({"unusable":[{"message":[]}]})", R"({"diff":"none"})", R"({"text":1})", R"({"policy_text":false})"}) {
    auto r = DecodePolicyProposalView(bad);
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_EQ(r.status().reason(), "field_invalid") << bad;
  }
  EXPECT_TRUE(DecodePolicyProposalView(R"({"pool":"p","later":true})").ok());
}

// A machine's hostname or a firmware version from an event log may be
// invalid UTF-8: replaced, never thrown.
TEST(PolicyProposalView, ReplacesInvalidUtf8) {
  PolicyProposalView v;
  v.platforms = {{"fw \xff", "", "", {"node-\xfe"}}};
  std::string body;
  ASSERT_NO_THROW(body = EncodePolicyProposalView(v));
  auto back = DecodePolicyProposalView(body);
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(back->platforms[0].firmware, "fw \xef\xbf\xbd");
}

}  // namespace
}  // namespace rackgate::wire
