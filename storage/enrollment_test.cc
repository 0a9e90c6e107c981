// Tests for enrollment and import: the EK as identity, idempotent
// re-enrollment, replacement, all-or-nothing imports.
#include <gtest/gtest.h>

#include <optional>
#include <string>
#include <vector>

#include "storage/rows.h"
#include "storage/store.h"
#include "storage/store_test_fixture.h"

namespace rackgate::storage {
namespace {

using testing::B;
using testing::ExpectFailure;
using testing::MakeEnrollment;
using testing::MustOpen;
using testing::Op;
using testing::StoreTest;
using testing::TempDir;

// --- Enrollment --------------------------------------------------------------

TEST_F(StoreTest, EnrollNewMachine) {
  Enrollment e = MakeEnrollment("node-1", "a");
  e.ek_certificate = B("certder");
  e.tpm_manufacturer = "id:49465800";
  e.tpm_model = "SLB9670";
  e.tpm_version = "7.85";
  e.policy_json = "{\"rules\":1}";
  e.addresses.push_back({"InternalIP", "10.0.0.1"});  // duplicates collapse
  auto m = store_->Enroll(e, Op("rack 4"), false, 100);
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  EXPECT_GT(m->id, 0);
  EXPECT_EQ(m->hostname, "node-1");
  EXPECT_EQ(m->pool, "workers");
  EXPECT_EQ(m->state, MachineState::kEnrolled);
  EXPECT_EQ(m->ek_public, e.ek_public);
  EXPECT_EQ(m->ek_hash, e.ek_hash);
  EXPECT_EQ(m->ek_certificate, e.ek_certificate);
  EXPECT_EQ(m->tpm_manufacturer, "id:49465800");
  EXPECT_EQ(m->policy_json, e.policy_json);
  EXPECT_EQ(m->created_at, 100);
  EXPECT_FALSE(m->last_attested_at.has_value());
  ASSERT_EQ(m->addresses.size(), 2u);
  EXPECT_EQ(m->addresses[0], (Address{"Hostname", "node-1"}));
  EXPECT_EQ(m->addresses[1], (Address{"InternalIP", "10.0.0.1"}));

  auto audit = Audit("node-1");
  ASSERT_EQ(audit.size(), 1u);
  EXPECT_EQ(audit[0].action, "enroll");
  EXPECT_EQ(audit[0].actor, "uid:0(root)");
  EXPECT_EQ(audit[0].why, "rack 4");
  EXPECT_EQ(audit[0].machine_id, m->id);
  EXPECT_FALSE(audit[0].from_state.has_value());
  EXPECT_EQ(audit[0].to_state, "enrolled");
  EXPECT_NE(audit[0].detail_json.find("656b686173683a61"), std::string::npos);  // hex("ekhash:a")

  auto by_ek = store_->FindMachineByEkHash(e.ek_hash);
  ASSERT_TRUE(by_ek.ok());
  EXPECT_EQ(by_ek->hostname, "node-1");
  auto by_id = store_->GetMachineById(m->id);
  ASSERT_TRUE(by_id.ok());
  EXPECT_EQ(by_id->hostname, "node-1");
}

TEST_F(StoreTest, EnrollRefusals) {
  const size_t before = AuditCount();
  Enrollment e = MakeEnrollment("node-1", "a", "nopool");
  ExpectFailure(store_->Enroll(e, Op(), false, 1).status(), Status::Code::kNotFound, "pool_unknown");
  for (const char* bad : {"", "Node-1", "node_1", "-node", "node-", "a..b", ".a", "a.", "node 1",
                          "system:node:x"}) {
    e = MakeEnrollment(bad, "a");
    ExpectFailure(store_->Enroll(e, Op(), false, 1).status(), Status::Code::kInvalidArgument, "hostname_invalid");
  }
  e = MakeEnrollment(std::string(64, 'a'), "a");
  ExpectFailure(store_->Enroll(e, Op(), false, 1).status(), Status::Code::kInvalidArgument, "hostname_invalid");
  e = MakeEnrollment(std::string(63, 'a') + ".b", "a");
  EXPECT_TRUE(store_->Enroll(e, Op(), false, 1).ok());

  e = MakeEnrollment("node-2", "b");
  e.state = MachineState::kJoined;
  ExpectFailure(store_->Enroll(e, Op(), false, 1).status(), Status::Code::kInvalidArgument, "state_invalid");
  e = MakeEnrollment("node-2", "b");
  e.ek_public.clear();
  e.ek_certificate.reset();
  ExpectFailure(store_->Enroll(e, Op(), false, 1).status(), Status::Code::kInvalidArgument, "field_invalid");
  e = MakeEnrollment("node-2", "b");
  e.ek_hash = Bytes(65, 1);
  ExpectFailure(store_->Enroll(e, Op(), false, 1).status(), Status::Code::kInvalidArgument, "field_invalid");
  e = MakeEnrollment("node-2", "b");
  e.addresses = {{"MACAddress", "aa:bb"}};
  ExpectFailure(store_->Enroll(e, Op(), false, 1).status(), Status::Code::kInvalidArgument, "field_invalid");
  e.addresses = {{"InternalIP", ""}};
  ExpectFailure(store_->Enroll(e, Op(), false, 1).status(), Status::Code::kInvalidArgument, "field_invalid");
  e = MakeEnrollment("node-2", "b");
  e.ek_certificate = Bytes();
  ExpectFailure(store_->Enroll(e, Op(), false, 1).status(), Status::Code::kInvalidArgument, "field_invalid");
  EXPECT_EQ(AuditCount(), before + 1);  // the one good enrollment
}

// A vendor inventory ships EK certificates, not public areas: a certificate
// alone identifies the EK, and a machine needs one or the other.
TEST_F(StoreTest, EnrollFromCertificateAlone) {
  Enrollment e = MakeEnrollment("node-cert-only", "cert-only");
  e.ek_public.clear();
  e.ek_certificate = Bytes{0x30, 0x01};
  auto m = store_->Enroll(e, Op(), false, 1);
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  EXPECT_TRUE(m->ek_public.empty());
  EXPECT_EQ(m->ek_certificate, e.ek_certificate);
}

TEST_F(StoreTest, ReenrollingTheSameMachineIsIdempotent) {
  Machine first = Enroll("node-1", "a");
  const size_t before = AuditCount();
  auto again = store_->Enroll(MakeEnrollment("node-1", "a"), Op(), false, 200);
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->id, first.id);
  EXPECT_EQ(again->updated_at, 100);  // nothing written
  EXPECT_EQ(AuditCount(), before);
}

TEST_F(StoreTest, ReenrollingUpdatesPoolAddressesPolicyAndKeepsCertificate) {
  Enrollment e = MakeEnrollment("node-1", "a");
  e.ek_certificate = B("cert-1");
  e.tpm_model = "m1";
  ASSERT_TRUE(store_->Enroll(e, Op(), false, 100).ok());

  Enrollment update = MakeEnrollment("node-1", "a", "masters");
  update.addresses = {{"InternalIP", "10.9.9.9"}};
  update.policy_json = "{}";
  auto m = store_->Enroll(update, Op("moved"), false, 200);
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  EXPECT_EQ(m->pool, "masters");
  EXPECT_EQ(m->addresses, (std::vector<Address>{{"InternalIP", "10.9.9.9"}}));
  EXPECT_EQ(m->policy_json, "{}");
  EXPECT_EQ(m->ek_certificate, B("cert-1"));  // no certificate given: kept
  EXPECT_EQ(m->tpm_model, "m1");
  EXPECT_EQ(m->updated_at, 200);
  auto audit = Audit("node-1");
  ASSERT_EQ(audit.size(), 2u);
  EXPECT_EQ(audit[1].action, "enroll_update");
  EXPECT_EQ(audit[1].from_state, "enrolled");
  EXPECT_EQ(audit[1].to_state, "enrolled");
  EXPECT_NE(audit[1].detail_json.find("addresses"), std::string::npos);

  update.ek_certificate = B("cert-2");
  update.tpm_model = "m2";
  m = store_->Enroll(update, Op(), false, 300);
  ASSERT_TRUE(m.ok());
  EXPECT_EQ(m->ek_certificate, B("cert-2"));
  EXPECT_EQ(m->tpm_model, "m2");
}

TEST_F(StoreTest, ReenrollingAPendingMachineAsEnrolledMovesIt) {
  Enroll("node-1", "a", MachineState::kPending);
  auto m = store_->Enroll(MakeEnrollment("node-1", "a"), Op(), false, 200);
  ASSERT_TRUE(m.ok());
  EXPECT_EQ(m->state, MachineState::kEnrolled);
  auto audit = Audit("node-1");
  ASSERT_EQ(audit.size(), 2u);
  EXPECT_EQ(audit[1].from_state, "pending");
  EXPECT_EQ(audit[1].to_state, "enrolled");
}

TEST_F(StoreTest, ReenrollingARevokedMachineKeepsItRevoked) {
  Enroll("node-1", "a");
  ASSERT_TRUE(store_->Revoke("node-1", Op(), 150).ok());
  Enrollment e = MakeEnrollment("node-1", "a");
  e.addresses = {{"InternalIP", "10.1.1.1"}};
  auto m = store_->Enroll(e, Op(), false, 200);
  ASSERT_TRUE(m.ok());
  EXPECT_EQ(m->state, MachineState::kRevoked);
}

TEST_F(StoreTest, EnrolledEkIsImmutable) {
  Machine m = Enroll("node-1", "a");
  const size_t before = AuditCount();
  auto conflict = store_->Enroll(MakeEnrollment("node-1", "b"), Op(), false, 200);
  ExpectFailure(conflict.status(), Status::Code::kInvalidArgument, "ek_conflict");
  auto still = store_->GetMachine("node-1");
  ASSERT_TRUE(still.ok());
  EXPECT_EQ(still->ek_hash, m.ek_hash);
  EXPECT_EQ(AuditCount(), before);
  ExpectFailure(store_->FindMachineByEkHash(B("ekhash:b")).status(), Status::Code::kNotFound, "machine_unknown");
}

TEST_F(StoreTest, SameEkUnderAnotherHostnameIsRefused) {
  Enroll("node-1", "a");
  Enroll("node-2", "b");
  const size_t before = AuditCount();
  ExpectFailure(store_->Enroll(MakeEnrollment("node-3", "a"), Op(), false, 200).status(),
                Status::Code::kInvalidArgument, "ek_in_use");
  // Not even by replacement: the EK still belongs to node-1.
  ExpectFailure(store_->Enroll(MakeEnrollment("node-2", "a"), Op(), true, 200).status(),
                Status::Code::kInvalidArgument, "ek_in_use");
  EXPECT_EQ(AuditCount(), before);
  ExpectFailure(store_->GetMachine("node-3").status(), Status::Code::kNotFound, "hostname_unknown");
}

TEST_F(StoreTest, ReplacingTheEkIsAuditedAndStartsOver) {
  Machine m = Attested("node-1", "a");
  ASSERT_TRUE(store_->CreateSession(MakeSession(m, "open")).ok());
  ASSERT_TRUE(store_->RecordCertificate(Cert(m, "01"), Op(), 1100).ok());
  ASSERT_TRUE(store_->LastSuccessfulAttestation(m.id).ok());

  Enrollment e = MakeEnrollment("node-1", "new");
  auto replaced = store_->Enroll(e, Op("motherboard swap"), true, 2000);
  ASSERT_TRUE(replaced.ok()) << replaced.status().ToString();
  EXPECT_EQ(replaced->id, m.id);
  EXPECT_EQ(replaced->state, MachineState::kEnrolled);
  EXPECT_EQ(replaced->ek_hash, e.ek_hash);
  EXPECT_FALSE(replaced->tofu_pcrs_json.has_value());
  EXPECT_FALSE(replaced->client_cert_issued_at.has_value());

  auto audit = Audit("node-1");
  ASSERT_FALSE(audit.empty());
  const AuditEntry& a = audit.back();
  EXPECT_EQ(a.action, "replace_ek");
  EXPECT_EQ(a.why, "motherboard swap");
  EXPECT_EQ(a.from_state, "joined");  // the client certificate joined it
  EXPECT_EQ(a.to_state, "enrolled");
  EXPECT_NE(a.detail_json.find("\"old_ek_hash\":\"656b686173683a61\""), std::string::npos) << a.detail_json;
  EXPECT_NE(a.detail_json.find("\"new_ek_hash\":\"656b686173683a6e6577\""), std::string::npos) << a.detail_json;

  // The old TPM's credentials and counters are gone.
  ExpectFailure(store_->LookupToken(B("tokhash-a"), 1500).status(), Status::Code::kNotFound, "token_unknown");
  ExpectFailure(store_->ConsumeSession("open", 1010).status(), Status::Code::kNotFound, "session_unknown");
  ExpectFailure(store_->LastSuccessfulAttestation(m.id).status(), Status::Code::kNotFound, "attestation_unknown");
  ExpectFailure(store_->FindMachineByEkHash(B("ekhash:a")).status(), Status::Code::kNotFound, "machine_unknown");
  // The old EK is free again.
  EXPECT_TRUE(store_->Enroll(MakeEnrollment("node-9", "a"), Op(), false, 2100).ok());
}

// --- Import ------------------------------------------------------------------

TEST_F(StoreTest, ImportAddsEveryRowAndReportsProgress) {
  std::vector<Enrollment> rows;
  for (int i = 0; i < 20; ++i) rows.push_back(MakeEnrollment("node-" + std::to_string(i), std::to_string(i)));
  std::vector<std::pair<size_t, size_t>> calls;
  auto n = store_->Import(rows, Op("vendor manifest"), 100, [&](size_t done, size_t total) {
    calls.emplace_back(done, total);
  });
  ASSERT_TRUE(n.ok()) << n.status().ToString();
  EXPECT_EQ(*n, 20u);
  ASSERT_EQ(calls.size(), 20u);
  EXPECT_EQ(calls.front(), (std::pair<size_t, size_t>(1, 20)));
  EXPECT_EQ(calls.back(), (std::pair<size_t, size_t>(20, 20)));
  auto all = store_->ListMachines();
  ASSERT_TRUE(all.ok());
  EXPECT_EQ(all->size(), 20u);
  auto audit = Audit();
  EXPECT_EQ(audit.back().action, "import");
  EXPECT_NE(audit.back().detail_json.find("\"rows\":20"), std::string::npos);

  // Importing the same inventory again changes nothing.
  const size_t before = AuditCount();
  ASSERT_TRUE(store_->Import(rows, Op(), 200).ok());
  EXPECT_EQ(AuditCount(), before + 1);  // the import row only
}

TEST_F(StoreTest, ImportIsAllOrNothing) {
  Enroll("existing", "x");
  const size_t audit_before = AuditCount();
  std::vector<Enrollment> rows;
  for (int i = 0; i < 5; ++i) rows.push_back(MakeEnrollment("node-" + std::to_string(i), std::to_string(i)));
  rows[2].pool = "nowhere";
  size_t progress_calls = 0;
  auto n = store_->Import(rows, Op(), 100, [&](size_t, size_t) { ++progress_calls; });
  ExpectFailure(n.status(), Status::Code::kNotFound, "pool_unknown");
  EXPECT_NE(n.status().message().find("row 2 (node-2)"), std::string::npos) << n.status().message();
  EXPECT_EQ(progress_calls, 2u);
  auto all = store_->ListMachines();
  ASSERT_TRUE(all.ok());
  ASSERT_EQ(all->size(), 1u);
  EXPECT_EQ((*all)[0].hostname, "existing");
  EXPECT_EQ(AuditCount(), audit_before);

  // A conflict with what is enrolled keeps its reason.
  rows[2] = MakeEnrollment("existing", "other");
  ExpectFailure(store_->Import(rows, Op(), 100).status(), Status::Code::kInvalidArgument, "ek_conflict");
  // So does a conflict inside the file itself.
  rows[2] = MakeEnrollment("node-9", "0");
  auto dup = store_->Import(rows, Op(), 100);
  ExpectFailure(dup.status(), Status::Code::kInvalidArgument, "ek_in_use");
  EXPECT_NE(dup.status().message().find("row 2 (node-9)"), std::string::npos);
  EXPECT_EQ(store_->ListMachines()->size(), 1u);

  // A throwing progress callback also leaves nothing behind.
  rows[2] = MakeEnrollment("node-2", "2");
  EXPECT_THROW(
      (void)store_->Import(rows, Op(), 100,
                           [](size_t done, size_t) {
                             if (done == 3) throw std::runtime_error("cancelled");
                           }),
      std::runtime_error);
  EXPECT_EQ(store_->ListMachines()->size(), 1u);
  ASSERT_TRUE(store_->Import(rows, Op(), 100).ok());
  EXPECT_EQ(store_->ListMachines()->size(), 6u);
}

TEST_F(StoreTest, MachineVarsAreEnrolledAndUpdated) {
  Enrollment e = MakeEnrollment("node-1", "a");
  e.vars_json = "{\"rack\":\"r12\"}";
  auto m = store_->Enroll(e, Op(), false, 100);
  ASSERT_TRUE(m.ok());
  EXPECT_EQ(m->vars_json, "{\"rack\":\"r12\"}");
  e.vars_json = "{\"rack\":\"r13\"}";
  auto updated = store_->Enroll(e, Op(), false, 200);
  ASSERT_TRUE(updated.ok());
  EXPECT_EQ(updated->vars_json, "{\"rack\":\"r13\"}");
  EXPECT_NE(Audit("node-1").back().detail_json.find("vars"), std::string::npos);
  e.vars_json = "";
  ExpectFailure(store_->Enroll(e, Op(), false, 300).status(), Status::Code::kInvalidArgument, "field_invalid");
}

// --- Approve with changes (discovery) ------------------------------------------

TEST_F(StoreTest, ApproveRenamesMovesAndAddressesInOneAuditRow) {
  Machine pending = Enroll("pending-0a1b2c", "disc", MachineState::kPending);
  const size_t before = AuditCount();
  ApprovalChanges ch;
  ch.hostname = "node-x";
  ch.pool = "masters";
  ch.addresses = std::vector<Address>{{"InternalIP", "10.0.0.9"}, {"Hostname", "node-x"}};
  ch.vars_json = R"({"rack":"r1"})";
  auto m = store_->Approve("pending-0a1b2c", ch, Op("racked in r1"), 200);
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  EXPECT_EQ(m->id, pending.id);
  EXPECT_EQ(m->hostname, "node-x");
  EXPECT_EQ(m->pool, "masters");
  EXPECT_EQ(m->state, MachineState::kEnrolled);
  EXPECT_EQ(m->vars_json, R"({"rack":"r1"})");
  ASSERT_EQ(m->addresses.size(), 2u);
  EXPECT_EQ(m->addresses[0].kind, "Hostname");  // sorted
  EXPECT_EQ(m->ek_hash, pending.ek_hash);
  EXPECT_FALSE(store_->GetMachine("pending-0a1b2c").ok());
  EXPECT_EQ(store_->GetMachine("node-x")->id, pending.id);

  auto audit = Audit();
  ASSERT_EQ(audit.size(), before + 1);
  const AuditEntry& a = audit.back();
  EXPECT_EQ(a.action, "approve");
  EXPECT_EQ(a.hostname, "node-x");
  EXPECT_EQ(a.from_state, "pending");
  EXPECT_EQ(a.to_state, "enrolled");
  EXPECT_EQ(a.why, "racked in r1");
  EXPECT_NE(a.detail_json.find(R"("old_hostname":"pending-0a1b2c")"), std::string::npos) << a.detail_json;
  EXPECT_NE(a.detail_json.find(R"("hostname":"node-x")"), std::string::npos) << a.detail_json;
}

TEST_F(StoreTest, ApproveWithoutChangesKeepsTheOldCallsBehaviour) {
  Machine pending = Enroll("pending-1", "disc", MachineState::kPending);
  auto m = store_->Approve("pending-1", ApprovalChanges{}, Op(), 200);
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  EXPECT_EQ(m->hostname, "pending-1");
  EXPECT_EQ(m->pool, pending.pool);
  EXPECT_EQ(m->addresses, pending.addresses);
  EXPECT_EQ(m->state, MachineState::kEnrolled);
  ExpectFailure(store_->Approve("pending-1", ApprovalChanges{}, Op(), 300).status(),
                Status::Code::kInvalidArgument, "state_conflict");
}

TEST_F(StoreTest, ApproveRefusesATakenHostnameAndNamesTheHolder) {
  Machine holder = Enroll("node-x", "held");
  Enroll("pending-2", "disc", MachineState::kPending);
  const size_t before = AuditCount();
  ApprovalChanges ch;
  ch.hostname = "node-x";
  auto m = store_->Approve("pending-2", ch, Op(), 200);
  ExpectFailure(m.status(), Status::Code::kInvalidArgument, "hostname_taken");
  EXPECT_NE(m.status().message().find("'node-x'"), std::string::npos) << m.status().message();
  EXPECT_NE(m.status().message().find("enrolled machine"), std::string::npos) << m.status().message();
  EXPECT_NE(m.status().message().find(Hex(holder.ek_hash).substr(0, 16)), std::string::npos);
  // Nothing changed: still pending under its old name, no audit row.
  EXPECT_EQ(store_->GetMachine("pending-2")->state, MachineState::kPending);
  EXPECT_EQ(AuditCount(), before);
}

TEST_F(StoreTest, ApproveRefusesBadChangesAndChangesNothing) {
  Enroll("pending-3", "disc", MachineState::kPending);
  const size_t before = AuditCount();
  ApprovalChanges bad_name;
  bad_name.hostname = "Node_X";
  ExpectFailure(store_->Approve("pending-3", bad_name, Op(), 200).status(), Status::Code::kInvalidArgument,
                "hostname_invalid");
  ApprovalChanges bad_pool;
  bad_pool.pool = "nowhere";
  ExpectFailure(store_->Approve("pending-3", bad_pool, Op(), 200).status(), Status::Code::kNotFound,
                "pool_unknown");
  ApprovalChanges bad_address;
  bad_address.addresses = std::vector<Address>{{"Nowhere", "1.2.3.4"}};
  ExpectFailure(store_->Approve("pending-3", bad_address, Op(), 200).status(), Status::Code::kInvalidArgument,
                "field_invalid");
  ExpectFailure(store_->Approve("ghost", bad_pool, Op(), 200).status(), Status::Code::kNotFound,
                "hostname_unknown");
  // An enrolled machine is not renamed by approve.
  Enroll("node-9", "nine");
  ApprovalChanges rename;
  rename.hostname = "node-10";
  ExpectFailure(store_->Approve("node-9", rename, Op(), 200).status(), Status::Code::kInvalidArgument,
                "state_conflict");
  EXPECT_EQ(store_->GetMachine("pending-3")->state, MachineState::kPending);
  EXPECT_EQ(AuditCount(), before + 1);  // node-9's enroll
}

}  // namespace
}  // namespace rackgate::storage
