// Tests for a machine's trust over time (one audit row per change, none when
// unchanged; the state never moves), the sweep, and provisioning reports.
#include <gtest/gtest.h>

#include <map>
#include <string>
#include <vector>

#include "storage/store.h"
#include "storage/testing/store_test_fixture.h"

namespace rackgate::storage {
namespace {

using testing::ExpectFailure;
using testing::StoreTest;

size_t CountAction(const std::vector<AuditEntry>& audit, const std::string& action) {
  size_t n = 0;
  for (const auto& e : audit) n += e.action == action ? 1 : 0;
  return n;
}

class TrustTest : public StoreTest {
 protected:
  AttestationRecord Refused(const Machine& m, int64_t at, const std::string& reason = "quote_pcr_mismatch") {
    AttestationRecord r = Record(m, at);
    r.verdict = "refused";
    r.reason = reason;
    r.reasons = {reason};
    return r;
  }
  Machine Get(const std::string& hostname) {
    auto m = store_->GetMachine(hostname);
    EXPECT_TRUE(m.ok()) << m.status().ToString();
    return m.ok() ? *m : Machine{};
  }
};

TEST_F(TrustTest, NeverAttestedHasNoVerdict) {
  Machine m = Enroll("node-1", "a");
  EXPECT_EQ(m.trust, "");
  EXPECT_EQ(m.trust_reason, "");
  EXPECT_FALSE(m.trust_changed_at.has_value());
}

TEST_F(TrustTest, FirstGoodAttestationIsTrustedWithoutATrustedRow) {
  Machine m = Attested("node-1", "a");
  EXPECT_EQ(m.trust, "trusted");
  EXPECT_EQ(m.trust_reason, "");
  EXPECT_EQ(m.trust_changed_at, 1000);
  auto audit = Audit("node-1");
  EXPECT_EQ(CountAction(audit, "trusted"), 0u);
  EXPECT_EQ(CountAction(audit, "attest"), 1u);
}

TEST_F(TrustTest, FailureMakesUntrustedOnceAndKeepsTheState) {
  Machine m = Attested("node-1", "a");
  ASSERT_TRUE(store_->RecordAttestationFailure(Refused(m, 2000)).ok());
  Machine after = Get("node-1");
  EXPECT_EQ(after.state, MachineState::kAttested);
  EXPECT_EQ(after.trust, "untrusted");
  EXPECT_EQ(after.trust_reason, "attestation_failed:quote_pcr_mismatch");
  EXPECT_EQ(after.trust_changed_at, 2000);
  auto audit = Audit("node-1");
  ASSERT_EQ(CountAction(audit, "untrusted"), 1u);
  EXPECT_EQ(audit.back().action, "untrusted");
  EXPECT_EQ(audit.back().detail_json, "{\"reason\":\"attestation_failed:quote_pcr_mismatch\"}");
  EXPECT_EQ(audit.back().from_state, "attested");  // the unchanged state
  EXPECT_EQ(audit.back().to_state, "attested");

  // A second failure changes no trust: no audit row, the latest cause kept,
  // the time of the change kept.
  ASSERT_TRUE(store_->RecordAttestationFailure(Refused(m, 2100, "eventlog_replay_mismatch")).ok());
  Machine again = Get("node-1");
  EXPECT_EQ(again.trust, "untrusted");
  EXPECT_EQ(again.trust_reason, "attestation_failed:eventlog_replay_mismatch");
  EXPECT_EQ(again.trust_changed_at, 2000);
  EXPECT_EQ(Audit("node-1").size(), audit.size());
}

TEST_F(TrustTest, FailureOfANeverAttestedMachineMakesItUntrusted) {
  Machine m = Enroll("node-1", "a");
  ASSERT_TRUE(store_->RecordAttestationFailure(Refused(m, 2000)).ok());
  Machine after = Get("node-1");
  EXPECT_EQ(after.state, MachineState::kEnrolled);
  EXPECT_EQ(after.trust, "untrusted");
  EXPECT_EQ(CountAction(Audit("node-1"), "untrusted"), 1u);
}

TEST_F(TrustTest, ARevokedMachineHasNoTrustToLose) {
  Machine m = Attested("node-1", "a");
  ASSERT_TRUE(store_->Revoke("node-1", testing::Op(), 1500).ok());
  const size_t rows = AuditCount();
  ASSERT_TRUE(store_->RecordAttestationFailure(Refused(m, 2000)).ok());
  EXPECT_EQ(Get("node-1").trust, "trusted");
  EXPECT_EQ(AuditCount(), rows);
}

TEST_F(TrustTest, GoodAttestationAfterAFailureIsTrustedAgainOnce) {
  Machine m = Attested("node-1", "a");
  ASSERT_TRUE(store_->RecordAttestationFailure(Refused(m, 2000)).ok());
  auto r = store_->RecordAttestationSuccess(Record(m, 3000, 2), MakeToken(m, "b", 3000), std::nullopt);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->trust, "trusted");
  EXPECT_EQ(r->trust_reason, "");
  EXPECT_EQ(r->trust_changed_at, 3000);
  EXPECT_EQ(r->state, MachineState::kAttested);
  auto audit = Audit("node-1");
  EXPECT_EQ(CountAction(audit, "trusted"), 1u);
  EXPECT_EQ(audit.back().action, "trusted");
  // Trusted already: another good attestation writes attest only.
  ASSERT_TRUE(store_->RecordAttestationSuccess(Record(m, 4000, 3), MakeToken(m, "c", 4000), std::nullopt).ok());
  auto later = Audit("node-1");
  EXPECT_EQ(CountAction(later, "trusted"), 1u);
  EXPECT_EQ(later.back().action, "attest");
  EXPECT_EQ(Get("node-1").trust_changed_at, 3000);
}

TEST_F(TrustTest, SweepMarksOnlyMachinesOlderThanTheirPoolsAge) {
  Machine old_one = Attested("node-1", "a");  // attested at 1000, pool workers
  Machine fresh = Enroll("node-2", "b");
  ASSERT_TRUE(store_->RecordAttestationSuccess(Record(fresh, 5000), MakeToken(fresh, "b"), std::nullopt).ok());
  Machine never = Enroll("node-3", "c");
  const std::map<std::string, int64_t> ages = {{"workers", 3600}};

  // now - 1000 == 3600: not older yet.
  auto none = store_->MarkStaleUntrusted(4600, ages);
  ASSERT_TRUE(none.ok()) << none.status().ToString();
  EXPECT_TRUE(none->empty());

  auto marked = store_->MarkStaleUntrusted(4601, ages);
  ASSERT_TRUE(marked.ok());
  ASSERT_EQ(marked->size(), 1u);
  EXPECT_EQ((*marked)[0].hostname, "node-1");
  EXPECT_EQ((*marked)[0].trust, "untrusted");
  EXPECT_EQ((*marked)[0].trust_reason, "attestation_too_old");
  EXPECT_EQ((*marked)[0].state, MachineState::kAttested);
  EXPECT_EQ(Get("node-2").trust, "trusted");
  EXPECT_EQ(Get("node-3").trust, "");
  auto audit = Audit("node-1");
  EXPECT_EQ(audit.back().action, "untrusted");
  EXPECT_EQ(audit.back().actor, "rackgated");
  EXPECT_EQ(audit.back().detail_json, "{\"reason\":\"attestation_too_old\"}");

  // Untrusted already: the next sweep writes nothing.
  const size_t rows = AuditCount();
  auto again = store_->MarkStaleUntrusted(9000, ages);
  ASSERT_TRUE(again.ok());
  ASSERT_EQ(again->size(), 1u);  // node-2 is old by now
  EXPECT_EQ((*again)[0].hostname, "node-2");
  EXPECT_EQ(AuditCount(), rows + 1);
  EXPECT_EQ(store_->CountUntrusted().value(), 2);
  (void)never;
  (void)old_one;
}

TEST_F(TrustTest, SweepIgnoresPoolsWithoutAnAgeAndRevokedMachines) {
  Machine a = Attested("node-1", "a");
  Machine b = Attested("node-2", "b");
  ASSERT_TRUE(store_->Revoke("node-2", testing::Op(), 1100).ok());
  auto marked = store_->MarkStaleUntrusted(1000000, {{"masters", 60}});
  ASSERT_TRUE(marked.ok());
  EXPECT_TRUE(marked->empty());
  marked = store_->MarkStaleUntrusted(1000000, {{"workers", 60}});
  ASSERT_TRUE(marked.ok());
  ASSERT_EQ(marked->size(), 1u);
  EXPECT_EQ((*marked)[0].hostname, "node-1");
  ExpectFailure(store_->MarkStaleUntrusted(1000000, {{"workers", 0}}).status(), Status::Code::kInvalidArgument,
                "field_invalid");
  (void)a;
  (void)b;
}

TEST_F(TrustTest, SweepIsBatched) {
  for (int i = 0; i < 5; ++i) Attested("node-" + std::to_string(i), "t" + std::to_string(i));
  auto first = store_->MarkStaleUntrusted(100000, {{"workers", 60}}, 2);
  ASSERT_TRUE(first.ok());
  EXPECT_EQ(first->size(), 2u);
  auto rest = store_->MarkStaleUntrusted(100000, {{"workers", 60}}, 10);
  ASSERT_TRUE(rest.ok());
  EXPECT_EQ(rest->size(), 3u);
  EXPECT_EQ(store_->CountUntrusted().value(), 5);
}

TEST_F(TrustTest, ReportIsReplacedAndWritesNoAuditRow) {
  Machine m = Attested("node-1", "a");
  ExpectFailure(store_->LastReport(m.id).status(), Status::Code::kNotFound, "report_unknown");
  const size_t rows = AuditCount();
  ProvisioningReportRecord r;
  r.machine_id = m.id;
  r.at = 2000;
  r.outcome = "failed";
  r.step = "config";
  r.reason = "config_unavailable";
  r.message = "the pool has no config yet";
  r.exit_status = 4;
  r.done = {"attested"};
  ASSERT_TRUE(store_->RecordReport(r).ok());
  auto got = store_->LastReport(m.id);
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  EXPECT_EQ(got->hostname, "node-1");
  EXPECT_EQ(got->outcome, "failed");
  EXPECT_EQ(got->step, "config");
  EXPECT_EQ(got->reason, "config_unavailable");
  EXPECT_EQ(got->message, "the pool has no config yet");
  EXPECT_EQ(got->exit_status, 4);
  EXPECT_EQ(got->done, std::vector<std::string>{"attested"});

  ProvisioningReportRecord ok;
  ok.machine_id = m.id;
  ok.at = 3000;
  ok.outcome = "ok";
  ok.step = "csr";
  ok.done = {"config_applied", "client_certificate_written"};
  ASSERT_TRUE(store_->RecordReport(ok).ok());
  auto all = store_->ListLastReports();
  ASSERT_TRUE(all.ok());
  ASSERT_EQ(all->size(), 1u);
  EXPECT_EQ(all->at(m.id).outcome, "ok");
  EXPECT_EQ(all->at(m.id).at, 3000);
  EXPECT_EQ(all->at(m.id).reason, "");
  EXPECT_EQ(AuditCount(), rows);
}

TEST_F(TrustTest, ReportRefusals) {
  Machine m = Attested("node-1", "a");
  ProvisioningReportRecord r;
  r.machine_id = m.id;
  r.at = 2000;
  r.outcome = "maybe";
  r.step = "config";
  ExpectFailure(store_->RecordReport(r), Status::Code::kInvalidArgument, "field_invalid");
  r.outcome = "ok";
  r.message = std::string(513, 'x');
  ExpectFailure(store_->RecordReport(r), Status::Code::kInvalidArgument, "field_invalid");
  r.message = "";
  r.done = std::vector<std::string>(17, "x");
  ExpectFailure(store_->RecordReport(r), Status::Code::kInvalidArgument, "field_invalid");
  r.done = {};
  r.exit_status = 256;
  ExpectFailure(store_->RecordReport(r), Status::Code::kInvalidArgument, "field_invalid");
  r.exit_status = 0;
  r.machine_id = 9999;
  ExpectFailure(store_->RecordReport(r), Status::Code::kNotFound, "machine_unknown");
  EXPECT_TRUE(store_->ListLastReports().value().empty());
}

}  // namespace
}  // namespace rackgate::storage
