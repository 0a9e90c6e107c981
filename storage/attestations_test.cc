// Tests for attestation records: successes, bounded refusals, baselines.
#include <gtest/gtest.h>

#include <optional>
#include <string>
#include <vector>

#include "storage/store.h"
#include "storage/testing/store_test_fixture.h"

namespace rackgate::storage {
namespace {

using testing::B;
using testing::ExpectFailure;
using testing::MakeEnrollment;
using testing::MustOpen;
using testing::Op;
using testing::StoreTest;
using testing::TempDir;

// --- Attestations ------------------------------------------------------------

TEST_F(StoreTest, AttestationSuccessMovesEnrolledToAttested) {
  Machine m = Enroll("node-1", "a");
  const std::string tofu = "{\"sha256\":{\"4\":\"ab\"}}";
  auto r = store_->RecordAttestationSuccess(Record(m, 1000, 7, 3, 123456), MakeToken(m, "a"), tofu);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->state, MachineState::kAttested);
  EXPECT_EQ(r->last_attested_at, 1000);
  EXPECT_EQ(r->tofu_pcrs_json, tofu);
  auto audit = Audit("node-1");
  ASSERT_EQ(audit.size(), 2u);
  EXPECT_EQ(audit[1].action, "attest");
  EXPECT_EQ(audit[1].from_state, "enrolled");
  EXPECT_EQ(audit[1].to_state, "attested");
  EXPECT_TRUE(store_->LookupToken(B("tokhash-a"), 1001).ok());

  auto last = store_->LastSuccessfulAttestation(m.id);
  ASSERT_TRUE(last.ok());
  EXPECT_EQ(last->verdict, "ok");
  EXPECT_EQ(last->hostname, "node-1");
  EXPECT_EQ(last->reset_count, 7u);
  EXPECT_EQ(last->restart_count, 3u);
  EXPECT_EQ(last->clock, 123456u);
  EXPECT_EQ(last->firmware_version, 0x0001000200030004u);
  EXPECT_EQ(last->pcrs_json, "{\"sha256\":{\"0\":\"00\"}}");
}

TEST_F(StoreTest, ReattestationKeepsTheState) {
  Machine m = Attested("node-1", "a");
  ASSERT_TRUE(
      store_->Transition(m.id, {MachineState::kAttested}, MachineState::kProvisioned, Op(), "config_fetched", 1010)
          .ok());
  const std::string tofu_before = "{}";
  auto r = store_->RecordAttestationSuccess(Record(m, 2000, 2), MakeToken(m, "b", 2000), std::nullopt);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->state, MachineState::kProvisioned);
  EXPECT_EQ(r->last_attested_at, 2000);
  auto audit = Audit("node-1");
  EXPECT_EQ(audit.back().action, "attest");
  EXPECT_EQ(audit.back().from_state, "provisioned");
  EXPECT_EQ(audit.back().to_state, "provisioned");
  auto last = store_->LastSuccessfulAttestation(m.id);
  ASSERT_TRUE(last.ok());
  EXPECT_EQ(last->reset_count, 2u);
}

TEST_F(StoreTest, TofuValuesAreKeptUnlessNewOnesAreGiven) {
  Machine m = Enroll("node-1", "a");
  ASSERT_TRUE(store_->RecordAttestationSuccess(Record(m, 1000), MakeToken(m, "a"), std::string("{\"v\":1}")).ok());
  auto r = store_->RecordAttestationSuccess(Record(m, 2000), MakeToken(m, "b"), std::nullopt);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->tofu_pcrs_json, "{\"v\":1}");
}

TEST_F(StoreTest, AttestationSuccessRefusals) {
  Machine pending = Enroll("node-1", "a", MachineState::kPending);
  ExpectFailure(store_->RecordAttestationSuccess(Record(pending, 1000), MakeToken(pending, "a"), std::nullopt)
                    .status(),
                Status::Code::kInvalidArgument, "state_conflict");
  Machine m = Enroll("node-2", "b");
  Token other = MakeToken(m, "x");
  other.machine_id = pending.id;
  ExpectFailure(store_->RecordAttestationSuccess(Record(m, 1000), other, std::nullopt).status(),
                Status::Code::kInvalidArgument, "field_invalid");
  AttestationRecord refused = Record(m, 1000);
  refused.verdict = "refused";
  ExpectFailure(store_->RecordAttestationSuccess(refused, MakeToken(m, "y"), std::nullopt).status(),
                Status::Code::kInvalidArgument, "field_invalid");
  ASSERT_TRUE(store_->RecordAttestationSuccess(Record(m, 1000), MakeToken(m, "z"), std::nullopt).ok());
  // A token hash collision rolls the whole attestation back.
  const size_t before = AuditCount();
  ExpectFailure(store_->RecordAttestationSuccess(Record(m, 2000), MakeToken(m, "z"), std::nullopt).status(),
                Status::Code::kInvalidArgument, "field_invalid");
  EXPECT_EQ(AuditCount(), before);
  EXPECT_EQ(store_->GetMachineById(m.id)->last_attested_at, 1000);
  EXPECT_EQ(store_->GetMachine("node-1")->state, MachineState::kPending);
  ExpectFailure(store_->LastSuccessfulAttestation(pending.id).status(), Status::Code::kNotFound,
                "attestation_unknown");
}

// --- Evidence in one read and one write ---------------------------------------

TEST_F(StoreTest, ReadEvidenceReadsSessionMachineAndLastInOneSnapshotAndConsumesNothing) {
  Machine m = Attested("node-1", "a");
  ASSERT_TRUE(store_->CreateSession(MakeSession(m, "sess-1", 1000, 120)).ok());
  auto in = store_->ReadEvidence("sess-1", 1010);
  ASSERT_TRUE(in.ok()) << in.status().ToString();
  EXPECT_EQ(in->session.id, "sess-1");
  EXPECT_EQ(in->session.nonce, B("nonce-sess-1"));
  EXPECT_FALSE(in->session.used_at);
  EXPECT_EQ(in->machine.id, m.id);
  EXPECT_EQ(in->machine.hostname, "node-1");
  ASSERT_TRUE(in->last.has_value());
  EXPECT_EQ(in->last->at, 1000);
  // Nothing consumed: the same read again sees the session unused.
  EXPECT_TRUE(store_->ReadEvidence("sess-1", 1011).ok());
  ExpectFailure(store_->ReadEvidence("sess-1", 1120).status(), Status::Code::kVerificationFailed, "session_expired");
  ExpectFailure(store_->ReadEvidence("nope", 1010).status(), Status::Code::kNotFound, "session_unknown");
  ExpectFailure(store_->ReadEvidence("", 1010).status(), Status::Code::kNotFound, "session_unknown");

  Machine fresh = Enroll("node-2", "b");
  ASSERT_TRUE(store_->CreateSession(MakeSession(fresh, "sess-2", 1000, 120)).ok());
  auto none = store_->ReadEvidence("sess-2", 1010);
  ASSERT_TRUE(none.ok());
  EXPECT_FALSE(none->last.has_value());
}

TEST_F(StoreTest, ConsumeSessionAndRecordSuccessIsOneTransaction) {
  Machine m = Enroll("node-1", "a");
  ASSERT_TRUE(store_->CreateSession(MakeSession(m, "sess-1", 1000, 120)).ok());
  AttestationRecord rec = Record(m, 1010);
  rec.session_id = "sess-1";
  const auto writes_before = store_->GetWriteStats().writes;
  auto r = store_->ConsumeSessionAndRecordSuccess(rec, MakeToken(m, "a", 1010), std::nullopt, 1010);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(store_->GetWriteStats().writes, writes_before + 1);
  EXPECT_EQ(r->state, MachineState::kAttested);
  EXPECT_EQ(r->trust, kTrustTrusted);
  EXPECT_EQ(r->last_attested_at, 1010);
  // What it returns is what is stored (not read back inside the write).
  auto stored = store_->GetMachineById(m.id);
  ASSERT_TRUE(stored.ok());
  EXPECT_EQ(r->state, stored->state);
  EXPECT_EQ(r->updated_at, stored->updated_at);
  EXPECT_EQ(r->trust, stored->trust);
  EXPECT_EQ(r->trust_changed_at, stored->trust_changed_at);
  EXPECT_EQ(r->addresses.size(), stored->addresses.size());
  ExpectFailure(store_->ReadEvidence("sess-1", 1011).status(), Status::Code::kVerificationFailed, "session_used");
  EXPECT_EQ(Audit("node-1").back().action, "attest");

  // A used session records nothing: no second token, no second attest row.
  const size_t audit_rows = AuditCount();
  AttestationRecord again = rec;
  ExpectFailure(store_->ConsumeSessionAndRecordSuccess(again, MakeToken(m, "b", 1010), std::nullopt, 1011).status(),
                Status::Code::kVerificationFailed, "session_used");
  EXPECT_EQ(AuditCount(), audit_rows);
  ExpectFailure(store_->LookupToken(B("tokhash-b"), 1012).status(), Status::Code::kNotFound, "token_unknown");
}

TEST_F(StoreTest, ConsumeSessionAndRecordRefusalsChangeNothing) {
  Machine m = Enroll("node-1", "a");
  Machine other = Enroll("node-2", "b");
  ASSERT_TRUE(store_->CreateSession(MakeSession(m, "sess-1", 1000, 120)).ok());
  AttestationRecord rec = Record(m, 1010);
  rec.session_id = "sess-1";
  // Expired: neither consumed nor recorded.
  ExpectFailure(store_->ConsumeSessionAndRecordSuccess(rec, MakeToken(m, "a"), std::nullopt, 1120).status(),
                Status::Code::kVerificationFailed, "session_expired");
  // Another machine's session: refused, and the session stays unused.
  AttestationRecord wrong = Record(other, 1010);
  wrong.session_id = "sess-1";
  ExpectFailure(store_->ConsumeSessionAndRecordSuccess(wrong, MakeToken(other, "b"), std::nullopt, 1010).status(),
                Status::Code::kInvalidArgument, "field_invalid");
  wrong.verdict = "refused";
  wrong.reason = "quote_invalid";
  ExpectFailure(store_->ConsumeSessionAndRecordFailure(wrong, 1010), Status::Code::kInvalidArgument, "field_invalid");
  EXPECT_TRUE(store_->ReadEvidence("sess-1", 1011).ok());
  EXPECT_EQ(Audit("node-1").back().action, "enroll");

  // A refusal: the session used and the failure recorded together.
  AttestationRecord refused = Record(m, 1012);
  refused.session_id = "sess-1";
  refused.verdict = "refused";
  refused.reason = "quote_invalid";
  ASSERT_TRUE(store_->ConsumeSessionAndRecordFailure(refused, 1012).ok());
  ExpectFailure(store_->ReadEvidence("sess-1", 1013).status(), Status::Code::kVerificationFailed, "session_used");
  auto failures = store_->RecentFailures(10);
  ASSERT_TRUE(failures.ok());
  ASSERT_EQ(failures->size(), 1u);
  EXPECT_EQ((*failures)[0].reason, "quote_invalid");
  ExpectFailure(store_->ConsumeSessionAndRecordFailure(refused, 1014), Status::Code::kVerificationFailed, "session_used");
}

TEST_F(StoreTest, AttestationFailureNeverChangesState) {
  Machine m = Attested("node-1", "a");
  const size_t before = AuditCount();
  AttestationRecord r = Record(m, 1500);
  r.verdict = "refused";
  r.reason = "boot_policy_violation";
  r.reasons = {"secureboot:disabled", "kernel:unsigned"};
  ASSERT_TRUE(store_->RecordAttestationFailure(r).ok());
  EXPECT_EQ(store_->GetMachineById(m.id)->state, MachineState::kAttested);
  EXPECT_EQ(store_->GetMachineById(m.id)->last_attested_at, 1000);
  // The state stays; the trust changes, with exactly one audit row
  // (docs/trust.md), and none for the next failure.
  EXPECT_EQ(AuditCount(), before + 1);
  EXPECT_EQ(Audit("node-1").back().action, "untrusted");
  ASSERT_TRUE(store_->RecordAttestationFailure(r).ok());
  EXPECT_EQ(AuditCount(), before + 1);
  auto failures = store_->RecentFailures(1);
  ASSERT_TRUE(failures.ok());
  ASSERT_EQ(failures->size(), 1u);
  EXPECT_EQ((*failures)[0].hostname, "node-1");
  EXPECT_EQ((*failures)[0].verdict, "refused");
  EXPECT_EQ((*failures)[0].reason, "boot_policy_violation");
  EXPECT_EQ((*failures)[0].reasons, r.reasons);
  // Failures are no baseline.
  auto last = store_->LastSuccessfulAttestation(m.id);
  ASSERT_TRUE(last.ok());
  EXPECT_EQ(last->at, 1000);

  r.machine_id = 9999;
  ExpectFailure(store_->RecordAttestationFailure(r), Status::Code::kNotFound, "machine_unknown");
  r.machine_id = m.id;
  r.verdict = "ok";
  ExpectFailure(store_->RecordAttestationFailure(r), Status::Code::kInvalidArgument, "field_invalid");
}

class BoundedFailuresTest : public StoreTest {
 protected:
  StoreOptions Options() override {
    StoreOptions o;
    o.max_failures_per_machine = 3;
    return o;
  }
};

TEST_F(BoundedFailuresTest, OnlyTheNewestFailuresPerMachineAreKept) {
  Machine a = Enroll("node-1", "a");
  Machine b = Enroll("node-2", "b");
  for (int i = 0; i < 10; ++i) {
    AttestationRecord r = Record(a, 1000 + i);
    r.verdict = "";  // filled in as refused
    r.reason = "activation_failed";
    ASSERT_TRUE(store_->RecordAttestationFailure(r).ok());
  }
  AttestationRecord rb = Record(b, 5000);
  rb.verdict = "refused";
  ASSERT_TRUE(store_->RecordAttestationFailure(rb).ok());
  auto failures = store_->RecentFailures(100);
  ASSERT_TRUE(failures.ok());
  ASSERT_EQ(failures->size(), 4u);
  EXPECT_EQ((*failures)[0].hostname, "node-2");
  EXPECT_EQ((*failures)[1].at, 1009);
  EXPECT_EQ((*failures)[3].at, 1007);
  EXPECT_EQ((*failures)[1].verdict, "refused");
}

}  // namespace
}  // namespace rackgate::storage
