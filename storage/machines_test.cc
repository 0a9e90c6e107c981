// Tests for machine lookups, listing, counts and state changes (approve,
// revoke, reset, Transition).
#include <gtest/gtest.h>

#include <optional>
#include <string>
#include <vector>

#include "storage/rows.h"
#include "storage/store.h"
#include "storage/testing/store_test_fixture.h"
#include "base/hex.h"

namespace rackgate::storage {
namespace {

using testing::B;
using testing::ExpectFailure;
using testing::MakeEnrollment;
using testing::MustOpen;
using testing::Op;
using testing::StoreTest;
using testing::TempDir;

// --- Machines ----------------------------------------------------------------

TEST_F(StoreTest, LookupsAndListing) {
  Enroll("node-b", "b");
  Enroll("node-a", "a", MachineState::kPending);
  Enrollment e = MakeEnrollment("master-0", "m", "masters");
  ASSERT_TRUE(store_->Enroll(e, Op(), false, 1).ok());

  ExpectFailure(store_->GetMachine("ghost").status(), Status::Code::kNotFound, "hostname_unknown");
  ExpectFailure(store_->GetMachineById(9999).status(), Status::Code::kNotFound, "machine_unknown");
  ExpectFailure(store_->FindMachineByEkHash(B("nope")).status(), Status::Code::kNotFound, "machine_unknown");
  ExpectFailure(store_->FindMachineByEkHash(Bytes()).status(), Status::Code::kNotFound, "machine_unknown");

  auto all = store_->ListMachines();
  ASSERT_TRUE(all.ok());
  ASSERT_EQ(all->size(), 3u);
  EXPECT_EQ((*all)[0].hostname, "master-0");
  EXPECT_EQ((*all)[1].hostname, "node-a");
  EXPECT_EQ((*all)[1].addresses.size(), 2u);
  auto workers = store_->ListMachines({"workers", std::nullopt});
  ASSERT_TRUE(workers.ok());
  EXPECT_EQ(workers->size(), 2u);
  auto pending = store_->ListMachines({std::nullopt, MachineState::kPending});
  ASSERT_TRUE(pending.ok());
  ASSERT_EQ(pending->size(), 1u);
  EXPECT_EQ((*pending)[0].hostname, "node-a");
  EXPECT_EQ((*pending)[0].addresses.size(), 2u);
  auto none = store_->ListMachines({"masters", MachineState::kPending});
  ASSERT_TRUE(none.ok());
  EXPECT_TRUE(none->empty());
  ExpectFailure(store_->ListMachines({std::nullopt, static_cast<MachineState>(42)}).status(),
                Status::Code::kInvalidArgument, "state_invalid");

  auto counts = store_->CountByState();
  ASSERT_TRUE(counts.ok());
  EXPECT_EQ(counts->size(), 6u);
  EXPECT_EQ(counts->at("enrolled"), 2);
  EXPECT_EQ(counts->at("pending"), 1);
  EXPECT_EQ(counts->at("joined"), 0);
}

// --- State changes -----------------------------------------------------------

TEST_F(StoreTest, ApproveMovesPendingToEnrolled) {
  Enroll("node-1", "a", MachineState::kPending);
  auto m = store_->Approve("node-1", Op("checked serial"), 200);
  ASSERT_TRUE(m.ok());
  EXPECT_EQ(m->state, MachineState::kEnrolled);
  auto audit = Audit("node-1");
  ASSERT_EQ(audit.size(), 2u);
  EXPECT_EQ(audit[1].action, "approve");
  EXPECT_EQ(audit[1].from_state, "pending");
  EXPECT_EQ(audit[1].to_state, "enrolled");
  EXPECT_EQ(audit[1].why, "checked serial");

  ExpectFailure(store_->Approve("node-1", Op(), 300).status(), Status::Code::kInvalidArgument, "state_conflict");
  ExpectFailure(store_->Approve("ghost", Op(), 300).status(), Status::Code::kNotFound, "hostname_unknown");
  EXPECT_EQ(Audit("node-1").size(), 2u);
}

TEST_F(StoreTest, RevokeIsTerminalAndStopsTokens) {
  Machine m = Attested("node-1", "a");
  ASSERT_TRUE(store_->LookupToken(B("tokhash-a"), 1001).ok());
  auto r = store_->Revoke("node-1", Op("stolen"), 1100);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->state, MachineState::kRevoked);
  ExpectFailure(store_->LookupToken(B("tokhash-a"), 1101).status(), Status::Code::kVerificationFailed,
                "token_revoked");
  // Revocation wins over expiry too.
  ExpectFailure(store_->LookupToken(B("tokhash-a"), 99999).status(), Status::Code::kVerificationFailed,
                "token_revoked");
  const size_t before = AuditCount();
  auto again = store_->Revoke("node-1", Op(), 1200);  // a no-op
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->updated_at, 1100);
  EXPECT_EQ(AuditCount(), before);
  // Nothing but a reset leaves it.
  ExpectFailure(store_->Approve("node-1", Op(), 1300).status(), Status::Code::kInvalidArgument, "state_conflict");
  ExpectFailure(
      store_->Transition(m.id, {MachineState::kAttested}, MachineState::kProvisioned, Op(), "config_fetched", 1300)
          .status(),
      Status::Code::kInvalidArgument, "state_conflict");
  ExpectFailure(store_->RecordAttestationSuccess(Record(m, 1400), MakeToken(m, "b"), std::nullopt).status(),
                Status::Code::kInvalidArgument, "state_conflict");
  ExpectFailure(store_->LookupToken(B("tokhash-b"), 1401).status(), Status::Code::kNotFound, "token_unknown");
}

TEST_F(StoreTest, ResetClearsMarksCredentialsAndBaseline) {
  Machine m = Enroll("node-1", "a");
  auto attested = store_->RecordAttestationSuccess(Record(m, 1000, 5, 2, 9000), MakeToken(m, "a"),
                                                   std::string("{\"tofu\":1}"));
  ASSERT_TRUE(attested.ok());
  ASSERT_TRUE(
      store_->Transition(m.id, {MachineState::kAttested}, MachineState::kProvisioned, Op(), "config_fetched", 1010)
          .ok());
  auto joined = store_->RecordCertificate(Cert(m, "01"), Op(), 1020);
  ASSERT_TRUE(joined.ok()) << joined.status().ToString();
  EXPECT_EQ(joined->state, MachineState::kJoined);
  ASSERT_TRUE(store_->CreateSession(MakeSession(m, "s1", 1030)).ok());

  auto reset = store_->Reset("node-1", Op("reinstall"), 1100, false);
  ASSERT_TRUE(reset.ok()) << reset.status().ToString();
  EXPECT_EQ(reset->state, MachineState::kEnrolled);
  EXPECT_FALSE(reset->tofu_pcrs_json.has_value());
  EXPECT_FALSE(reset->client_cert_issued_at.has_value());
  EXPECT_EQ(reset->last_attested_at, 1000);  // history stays
  auto audit = Audit("node-1");
  EXPECT_EQ(audit.back().action, "reset");
  EXPECT_EQ(audit.back().from_state, "joined");
  EXPECT_EQ(audit.back().to_state, "enrolled");
  EXPECT_EQ(audit.back().why, "reinstall");
  EXPECT_NE(audit.back().detail_json.find("\"tokens_dropped\":1"), std::string::npos) << audit.back().detail_json;

  ExpectFailure(store_->LookupToken(B("tokhash-a"), 1101).status(), Status::Code::kNotFound, "token_unknown");
  ExpectFailure(store_->ConsumeSession("s1", 1101).status(), Status::Code::kNotFound, "session_unknown");
  // A new counter baseline (e.g. after a TPM clear).
  ExpectFailure(store_->LastSuccessfulAttestation(m.id).status(), Status::Code::kNotFound, "attestation_unknown");
  ExpectFailure(store_->Reset("node-1", Op(), 1300, false).status(), Status::Code::kInvalidArgument, "state_conflict");
  // A client certificate may be issued once more, after a new attestation.
  ASSERT_TRUE(store_->RecordAttestationSuccess(Record(m, 1350), MakeToken(m, "b", 1350), std::nullopt).ok());
  EXPECT_TRUE(store_->RecordCertificate(Cert(m, "02"), Op(), 1360).ok());
  Enroll("node-2", "b", MachineState::kPending);
  ExpectFailure(store_->Reset("node-2", Op(), 1300, false).status(), Status::Code::kInvalidArgument, "state_conflict");
  ExpectFailure(store_->Reset("ghost", Op(), 1300, false).status(), Status::Code::kNotFound, "hostname_unknown");

  ASSERT_TRUE(store_->Revoke("node-2", Op(), 1400).ok());
  // Issue 32: revoked is terminal; a plain reset does not lift it, and
  // changes nothing (no audit row either).
  const size_t audited = AuditCount();
  auto refused = store_->Reset("node-2", Op("oops"), 1450, false);
  ExpectFailure(refused.status(), Status::Code::kVerificationFailed, "machine_revoked");
  EXPECT_NE(refused.status().message().find("--unrevoke"), std::string::npos) << refused.status().message();
  EXPECT_EQ(store_->GetMachine("node-2")->state, MachineState::kRevoked);
  EXPECT_EQ(AuditCount(), audited);
  auto back = store_->Reset("node-2", Op("false alarm"), 1500, true);
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(back->state, MachineState::kEnrolled);
  EXPECT_EQ(AuditCount(), audited + 1);
}

TEST_F(StoreTest, TransitionChecksTheStateInTheSameTransaction) {
  Machine m = Attested("node-1", "a");
  const size_t before = AuditCount();
  auto bad =
      store_->Transition(m.id, {MachineState::kProvisioned}, MachineState::kJoined, Op(), "client_csr_signed", 1100);
  ExpectFailure(bad.status(), Status::Code::kInvalidArgument, "state_conflict");
  EXPECT_EQ(store_->GetMachineById(m.id)->state, MachineState::kAttested);
  EXPECT_EQ(AuditCount(), before);

  auto ok = store_->Transition(m.id, {MachineState::kAttested}, MachineState::kProvisioned,
                               Actor{"rackgated", "ignition fetch"}, "config_fetched", 1100);
  ASSERT_TRUE(ok.ok());
  EXPECT_EQ(ok->state, MachineState::kProvisioned);
  auto audit = Audit("node-1");
  EXPECT_EQ(audit.back().action, "config_fetched");
  EXPECT_EQ(audit.back().actor, "rackgated");
  EXPECT_EQ(AuditCount(), before + 1);

  // Already there and allowed: a no-op without an audit row.
  auto again = store_->Transition(m.id, {MachineState::kAttested, MachineState::kProvisioned},
                                  MachineState::kProvisioned, Op(), "config_fetched", 1200);
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(AuditCount(), before + 1);

  ExpectFailure(
      store_->Transition(m.id, {MachineState::kAttested}, static_cast<MachineState>(42), Op(), "x", 1).status(),
      Status::Code::kInvalidArgument, "state_invalid");
  ExpectFailure(store_->Transition(9999, {MachineState::kAttested}, MachineState::kJoined, Op(), "x", 1).status(),
                Status::Code::kNotFound, "machine_unknown");
}

// --- Delete and rename (docs/lifecycle.md) --------------------------------------

TEST_F(StoreTest, DeleteFreesTheEkAndTheHostnameAndKeepsHistory) {
  Machine typo = Enroll("nod-1", "tpm-1");
  ASSERT_TRUE(store_->CreateSession(MakeSession(typo, "sess-1")).ok());
  const size_t before = AuditCount();
  auto gone = store_->DeleteMachine("nod-1", Op("hostname typo"), 500);
  ASSERT_TRUE(gone.ok()) << gone.status().ToString();
  EXPECT_EQ(gone->hostname, "nod-1");
  ExpectFailure(store_->GetMachine("nod-1").status(), Status::Code::kNotFound, "hostname_unknown");
  ExpectFailure(store_->ConsumeSession("sess-1", 1001).status(), Status::Code::kNotFound, "session_unknown");
  auto rows = Audit();
  ASSERT_EQ(rows.size(), before + 1);
  EXPECT_EQ(rows.back().action, "machine_deleted");
  EXPECT_EQ(rows.back().hostname, "nod-1");
  EXPECT_EQ(rows.back().from_state, "enrolled");
  EXPECT_FALSE(rows.back().to_state.has_value());
  EXPECT_EQ(rows.back().why, "hostname typo");
  EXPECT_EQ(rows.back().detail_json, "{\"ek_hash\":\"" + hex::Encode(typo.ek_hash) + "\",\"state\":\"enrolled\"}");
  // The same EK under the corrected hostname, and the old hostname, are free.
  Machine fixed = Enroll("node-1", "tpm-1");
  EXPECT_EQ(fixed.ek_hash, typo.ek_hash);
  Enroll("nod-1", "tpm-other");
  EXPECT_EQ(Audit("nod-1").front().action, "enroll");  // history by name stays
}

TEST_F(StoreTest, DeleteTakesPendingEnrolledAndRevokedOnly) {
  Enroll("pending-1", "p", MachineState::kPending);
  EXPECT_TRUE(store_->DeleteMachine("pending-1", Op(), 500).ok());

  Machine joined = Attested("node-j", "j");
  ASSERT_TRUE(store_->RecordCertificate(Cert(joined, "01"), Op(), 1100).ok());
  Attested("node-a", "a");
  const size_t before = AuditCount();
  for (const char* host : {"node-j", "node-a"}) {
    auto r = store_->DeleteMachine(host, Op(), 500);
    ExpectFailure(r.status(), Status::Code::kInvalidArgument, "machine_active");
    EXPECT_NE(r.status().message().find(std::string("rackgatectl revoke ") + host), std::string::npos)
        << r.status().message();
  }
  EXPECT_EQ(AuditCount(), before);
  ExpectFailure(store_->DeleteMachine("ghost", Op(), 500).status(), Status::Code::kNotFound, "hostname_unknown");

  // Revoked: deleted; its certificate stays as history and is never current
  // again, even for a machine that gets the same id.
  ASSERT_TRUE(store_->Revoke("node-j", Op(), 600).ok());
  ASSERT_TRUE(store_->DeleteMachine("node-a", Op(), 600).status().code() == Status::Code::kInvalidArgument);
  ASSERT_TRUE(store_->DeleteMachine("node-j", Op(), 610).ok());
  auto cert = store_->GetCertificate("01");
  ASSERT_TRUE(cert.ok()) << cert.status().ToString();
  EXPECT_EQ(cert->hostname, "node-j");
  EXPECT_FALSE(cert->since_reset);
}

TEST_F(StoreTest, ADeletedMachinesIdTakenAgainFindsNoOldCertificate) {
  Machine m = Attested("node-last", "last");
  ASSERT_TRUE(store_->RecordCertificate(Cert(m, "0f"), Op(), 1100).ok());
  ASSERT_TRUE(store_->Revoke("node-last", Op(), 1200).ok());
  ASSERT_TRUE(store_->DeleteMachine("node-last", Op(), 1300).ok());
  Machine next = Enroll("node-next", "next");
  if (next.id != m.id) GTEST_SKIP() << "SQLite did not reuse the id";
  auto cert = store_->GetCertificate("0f");
  ASSERT_TRUE(cert.ok());
  EXPECT_FALSE(cert->since_reset);
  ExpectFailure(store_->FindClientCertificate(next.id, B("spki-0f")).status(), Status::Code::kNotFound,
                "certificate_unknown");
}

TEST_F(StoreTest, RenameKeepsStateEkAndMovesTheHostnameAddress) {
  Machine m = Enroll("nod-2", "t2");
  auto r = store_->RenameMachine("nod-2", "node-2", Op("typo"), 500);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->id, m.id);
  EXPECT_EQ(r->hostname, "node-2");
  EXPECT_EQ(r->state, MachineState::kEnrolled);
  EXPECT_EQ(r->ek_hash, m.ek_hash);
  EXPECT_EQ(r->addresses, (std::vector<Address>{{"Hostname", "node-2"}, {"InternalIP", "10.0.0.1"}}));
  ExpectFailure(store_->GetMachine("nod-2").status(), Status::Code::kNotFound, "hostname_unknown");
  auto rows = Audit("node-2");
  ASSERT_EQ(rows.size(), 1u);
  EXPECT_EQ(rows[0].action, "machine_renamed");
  EXPECT_EQ(rows[0].from_state, "enrolled");
  EXPECT_EQ(rows[0].to_state, "enrolled");
  EXPECT_EQ(rows[0].detail_json, "{\"from\":\"nod-2\",\"to\":\"node-2\"}");
  // The same name again: nothing to do, no row.
  const size_t before = AuditCount();
  ASSERT_TRUE(store_->RenameMachine("node-2", "node-2", Op(), 510).ok());
  EXPECT_EQ(AuditCount(), before);
  // Pending and revoked machines keep their state.
  Enroll("pending-2", "p2", MachineState::kPending);
  auto p = store_->RenameMachine("pending-2", "pending-3", Op(), 520);
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(p->state, MachineState::kPending);
  ASSERT_TRUE(store_->Revoke("node-2", Op(), 530).ok());
  auto v = store_->RenameMachine("node-2", "node-2r", Op(), 540);
  ASSERT_TRUE(v.ok());
  EXPECT_EQ(v->state, MachineState::kRevoked);
}

TEST_F(StoreTest, RenameRefusalsChangeNothing) {
  Machine holder = Enroll("node-x", "x");
  Enroll("node-y", "y");
  Attested("node-z", "z");
  const size_t before = AuditCount();
  auto taken = store_->RenameMachine("node-y", "node-x", Op(), 500);
  ExpectFailure(taken.status(), Status::Code::kInvalidArgument, "hostname_taken");
  EXPECT_NE(taken.status().message().find(hex::Encode(holder.ek_hash).substr(0, 16)), std::string::npos);
  EXPECT_NE(taken.status().message().find("rackgatectl delete node-x"), std::string::npos) << taken.status().message();
  ExpectFailure(store_->RenameMachine("node-y", "Node_Y", Op(), 500).status(), Status::Code::kInvalidArgument,
                "hostname_invalid");
  ExpectFailure(store_->RenameMachine("node-y", "", Op(), 500).status(), Status::Code::kInvalidArgument,
                "hostname_invalid");
  auto active = store_->RenameMachine("node-z", "node-zz", Op(), 500);
  ExpectFailure(active.status(), Status::Code::kInvalidArgument, "machine_active");
  EXPECT_NE(active.status().message().find("rackgatectl reset node-z"), std::string::npos)
      << active.status().message();
  ExpectFailure(store_->RenameMachine("ghost", "node-g", Op(), 500).status(), Status::Code::kNotFound,
                "hostname_unknown");
  EXPECT_EQ(AuditCount(), before);
  EXPECT_EQ(store_->GetMachine("node-y")->hostname, "node-y");
  // After a reset the machine may be renamed.
  ASSERT_TRUE(store_->Reset("node-z", Op(), 600, false).ok());
  EXPECT_TRUE(store_->RenameMachine("node-z", "node-zz", Op(), 610).ok());
}

}  // namespace
}  // namespace rackgate::storage
