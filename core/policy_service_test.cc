// Boot policy administration (core/policy_service.h) over a real store
// (the fake keeps no policy mode): what Show, SetMode, Put, Accept and
// ShowProposal answer as the admin API's views, the audit's why, and a case
// for every refusal the service returns but two it cannot be made to here:
// proposal_invalid (a proposal that does not read back: a bug) and
// StoreBusy (a store that fails). core/observe_test.cc accepts a proposal
// made from real observed boots.
#include "core/policy_service.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>

#include "core/secrets.h"
#include "core/testing/core_fixture.h"

namespace rackgate::core::testing {
namespace {

using nlohmann::json;

constexpr char kSecretCmdline[] = "root=/dev/vda1 ro rd.luks.key=s3cret-passphrase";

class PolicyServiceTest : public CoreTest {
 protected:
  PolicyServiceTest() : policies_(store_.get(), [this] { return now_; }) {}
  // The newest audit row.
  storage::AuditEntry LastAudit() {
    storage::AuditFilter f;
    f.limit = 1;
    auto rows = store_->ListAudit(f);
    EXPECT_TRUE(rows.ok() && !rows->empty());
    return rows.ok() && !rows->empty() ? rows->back() : storage::AuditEntry{};
  }
  static std::string CmdlinePolicy() {
    return json{{"version", 1}, {"kernel_cmdline", {{"exact", kSecretCmdline}}}}.dump();
  }

  PolicyService policies_;
  storage::Actor op_{"operator", ""};
};

TEST_F(PolicyServiceTest, EveryRouteRefusesAnUnknownPool) {
  EXPECT_EQ(ReasonOf(policies_.Show("nosuch")), "pool_unknown");
  EXPECT_EQ(ReasonOf(policies_.ShowProposal("nosuch")), "pool_unknown");
  EXPECT_EQ(ReasonOf(policies_.SetMode("nosuch", {"observe", ""}, op_)), "pool_unknown");
  EXPECT_EQ(ReasonOf(policies_.Accept("nosuch", {}, op_)), "pool_unknown");
  EXPECT_EQ(ReasonOf(policies_.Put("nosuch", {std::nullopt, false, ""}, op_)), "pool_unknown");
  EXPECT_EQ(policies_.Show("nosuch").status().code(), Status::Code::kNotFound);
}

TEST_F(PolicyServiceTest, SetModeIsStrictAndAuditsWhy) {
  auto odd = policies_.SetMode("workers", {"audit", "why not"}, op_);
  EXPECT_EQ(ReasonOf(odd), "field_invalid");
  EXPECT_EQ(odd.status().code(), Status::Code::kInvalidArgument);
  auto set = policies_.SetMode("workers", {"observe", ""}, op_);
  ASSERT_TRUE(set.ok()) << set.status().ToString();
  EXPECT_EQ(*set, (wire::PolicyModeView{"workers", "observe", std::nullopt}));
  EXPECT_EQ(LastAudit().why, "boot policy mode set to observe by an operator");
  // The row byte for byte (the hash chain covers it); the digests are storage's.
  const std::string mode_row = LastAudit().detail_json;
  const json m = json::parse(mode_row);
  EXPECT_EQ(mode_row, R"({"mode_from":"enforce","mode_to":"observe","policy_from_sha256":)" +
                          m.at("policy_from_sha256").dump() + R"(,"policy_to_sha256":)" +
                          m.at("policy_to_sha256").dump() + R"(,"pool":"workers","source":"mode"})");
  // The operator's reason, bounded.
  ASSERT_TRUE(policies_.SetMode("workers", {"enforce", std::string(2000, 'r')}, op_).ok());
  EXPECT_EQ(LastAudit().why, std::string(1024, 'r'));
}

TEST_F(PolicyServiceTest, PutShowsTheCommandLineByDigestOnly) {
  EXPECT_EQ(ReasonOf(policies_.Put("workers", {std::string(R"({"version": 1, "require_secureboot": true})"), false, ""},
                                   op_)),
            "policy_malformed");
  auto put = policies_.Put("workers", {CmdlinePolicy(), true, "from the runbook"}, op_);
  ASSERT_TRUE(put.ok()) << put.status().ToString();
  EXPECT_EQ(put->pool, "workers");
  EXPECT_EQ(put->mode, "observe");  // keep_observing
  const std::string digest = "sha256:" + Sha256Hex(kSecretCmdline);
  ASSERT_TRUE(put->policy_shown_json.has_value());
  EXPECT_EQ(json::parse(*put->policy_shown_json).at("kernel_cmdline").at("exact_sha256"), digest);
  EXPECT_NE(put->diff_text.find("+ kernel_cmdline.exact " + digest), std::string::npos) << put->diff_text;
  EXPECT_FALSE(put->diff.had_current);
  ASSERT_FALSE(put->diff.changes.empty());
  EXPECT_EQ(wire::EncodePolicyAppliedView(*put).find("s3cret"), std::string::npos);
  EXPECT_EQ(LastAudit().why, "from the runbook");
  // The row byte for byte (the hash chain covers it); the digests are storage's.
  const std::string put_row = LastAudit().detail_json;
  const json p = json::parse(put_row);
  EXPECT_EQ(put_row, R"({"diff":["+ kernel_cmdline.exact )" + digest + R"(","+ version 1"],"mode_from":"enforce",)"
                     R"("mode_to":"observe","policy_from_sha256":)" + p.at("policy_from_sha256").dump() +
                         R"(,"policy_to_sha256":)" + p.at("policy_to_sha256").dump() +
                         R"(,"pool":"workers","source":"put"})");

  // Show: the shown policy, and the document for --output only.
  auto shown = policies_.Show("workers");
  ASSERT_TRUE(shown.ok()) << shown.status().ToString();
  EXPECT_EQ(shown->mode, "observe");
  EXPECT_EQ(shown->policy_shown_json, put->policy_shown_json);
  EXPECT_EQ(shown->policy_text, CmdlinePolicy());
  EXPECT_EQ(shown->observed, 0);
  EXPECT_EQ(shown->verdicts, (std::map<std::string, int64_t>{{"fail", 0}, {"none", 0}, {"pass", 0}}));

  // Cleared, enforcing, with the sentence for a why.
  auto cleared = policies_.Put("workers", {std::nullopt, false, ""}, op_);
  ASSERT_TRUE(cleared.ok()) << cleared.status().ToString();
  EXPECT_EQ(cleared->mode, "enforce");
  EXPECT_FALSE(cleared->policy_shown_json.has_value());
  EXPECT_EQ(LastAudit().why, "boot policy cleared by an operator");
  EXPECT_FALSE(policies_.Show("workers")->policy_text.has_value());
}

TEST_F(PolicyServiceTest, ShowCountsTheObservedVerdicts) {
  SoftMachine a, b;
  const storage::Machine first = Enroll(a, "node-1");
  const storage::Machine second = Enroll(b, "node-2");
  storage::BootObservation o;
  o.machine_id = first.id;
  o.pool = "workers";
  o.at = now_;
  o.pcrs_json = R"({"pcrs":{}})";
  o.verdict = "fail";
  o.violations = {"pcrs:pcr_mismatch"};
  Status recorded = store_->RecordBootObservation(o);
  ASSERT_TRUE(recorded.ok()) << recorded.ToString();
  o.machine_id = second.id;
  o.verdict = "none";
  o.violations = {};
  recorded = store_->RecordBootObservation(o);
  ASSERT_TRUE(recorded.ok()) << recorded.ToString();
  auto shown = policies_.Show("workers");
  ASSERT_TRUE(shown.ok()) << shown.status().ToString();
  EXPECT_EQ(shown->observed, 2);
  EXPECT_EQ(shown->verdicts, (std::map<std::string, int64_t>{{"fail", 1}, {"none", 1}, {"pass", 0}}));
  ASSERT_EQ(shown->machines.size(), 2u);
  EXPECT_EQ(shown->machines[0], (wire::ObservedMachineView{"node-1", now_, "fail", {"pcrs:pcr_mismatch"}}));
  EXPECT_EQ(shown->machines[1].hostname, "node-2");
}

TEST_F(PolicyServiceTest, AcceptRefusesAChangedOrEmptyProposal) {
  auto proposal = policies_.ShowProposal("workers");
  ASSERT_TRUE(proposal.ok()) << proposal.status().ToString();
  EXPECT_EQ(proposal->observed, 0);
  EXPECT_TRUE(proposal->machines.empty());
  EXPECT_EQ(proposal->proposal_sha256.size(), 64u);
  EXPECT_TRUE(proposal->text.has_value());
  EXPECT_TRUE(proposal->policy_text.has_value());
  // A pinned proposal that is not the current one: refused first.
  auto changed = policies_.Accept("workers", {std::string(64, '0'), false, ""}, op_);
  EXPECT_EQ(ReasonOf(changed), "proposal_changed");
  EXPECT_EQ(changed.status().code(), Status::Code::kUnsupported);
  // The current one, made from nothing: it would enforce nothing.
  auto empty = policies_.Accept("workers", {proposal->proposal_sha256, false, ""}, op_);
  EXPECT_EQ(ReasonOf(empty), "nothing_observed");
  EXPECT_EQ(ReasonOf(policies_.Accept("workers", {}, op_)), "nothing_observed");
  EXPECT_FALSE(store_->GetPool("workers")->boot_policy_json.has_value());
}

}  // namespace
}  // namespace rackgate::core::testing
