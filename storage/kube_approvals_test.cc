// Tests for the approver mode's store role (KubeApprovalStore): attested
// keys per epoch, one decision per API CSR, an approved join's checks. Each
// test runs on the environment's backend (SQLite, or PostgreSQL under
// script/pg-lab) and on the fake, which keep one contract.
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "storage/store.h"
#include "storage/testing/store_test_fixture.h"
#include "storage/testing/fake_store.h"

namespace rackgate::storage {
namespace {

using testing::B;
using testing::ExpectFailure;
using testing::Op;

// A SHA-256-sized key hash derived from `tag`.
Bytes KeyHash(const std::string& tag) {
  Bytes b = B(tag);
  b.resize(32, 0x5a);
  return b;
}

Actor Rackgate() { return Actor{"rackgate", "approver mode"}; }

class KubeApprovalTest : public testing::StoreTest, public ::testing::WithParamInterface<std::string> {
 protected:
  void SetUp() override {
    if (GetParam() != "fake") return StoreTest::SetUp();
    store_ = std::make_unique<testing::FakeStore>();
    ASSERT_TRUE(store_->PutPool(Pool{"workers"}, Op(), 10).ok());
    ASSERT_TRUE(store_->PutPool(Pool{"masters"}, Op(), 10).ok());
  }
  bool Fake() const { return GetParam() == "fake"; }

  AttestedKey Key(const Machine& m, const std::string& tag, const std::string& kind = "client") {
    AttestedKey k;
    k.machine_id = m.id;
    k.kind = kind;
    k.public_key_sha256 = KeyHash(tag);
    return k;
  }
  AttestedKey MustRegister(const Machine& m, const std::string& tag, int64_t now = 1500) {
    auto k = store_->RegisterAttestedKey(Key(m, tag), std::nullopt, Rackgate(), now);
    EXPECT_TRUE(k.ok()) << k.status().ToString();
    return k.ok() ? *k : AttestedKey{};
  }
  KubeCsrDecision Csr(const Machine& m, const std::string& uid, const std::string& key_tag,
                      std::string_view decision = kCsrApproved, std::string_view purpose = kKubePurposeJoin) {
    KubeCsrDecision d;
    d.uid = uid;
    d.name = "csr-" + uid;
    d.machine_id = m.id;
    d.kind = purpose == kKubePurposeServing ? "serving" : "client";
    d.purpose = std::string(purpose);
    d.public_key_sha256 = KeyHash(key_tag);
    d.requester = "system:bootstrap:abcdef";
    d.decision = std::string(decision);
    d.reason = decision == kCsrWaiting ? "" : (decision == kCsrApproved ? "attested_key" : "key_not_attested");
    d.message = decision == kCsrDenied ? "register the key through an attested session first" : "";
    d.decided_by = decision == kCsrWaiting ? "" : "rackgate";
    return d;
  }
  Machine Reload(const Machine& m) {
    auto r = store_->GetMachineById(m.id);
    EXPECT_TRUE(r.ok()) << r.status().ToString();
    return r.ok() ? *r : Machine{};
  }
  size_t Count(const std::string& action) {
    size_t n = 0;
    for (const AuditEntry& a : Audit()) n += a.action == action ? 1 : 0;
    return n;
  }
};

// --- RegisterAttestedKey, FindAttestedKey ---------------------------------------

TEST_P(KubeApprovalTest, RegisteringTheSameKeyAgainReturnsTheRowWithOneAuditRow) {
  Machine m = Attested("node-1", "a");
  auto first = store_->RegisterAttestedKey(Key(m, "k1"), std::nullopt, Rackgate(), 1500);
  ASSERT_TRUE(first.ok()) << first.status().ToString();
  EXPECT_EQ(first->machine_id, m.id);
  EXPECT_EQ(first->hostname, "node-1");
  EXPECT_EQ(first->kind, "client");
  EXPECT_EQ(first->public_key_sha256, KeyHash("k1"));
  EXPECT_FALSE(first->tpm_resident);
  EXPECT_EQ(first->registered_at, 1500);
  EXPECT_EQ(first->used_by_uid, "");
  EXPECT_TRUE(first->current);
  AttestedKey again_key = Key(m, "k1");
  again_key.tpm_resident = true;
  auto again = store_->RegisterAttestedKey(again_key, std::nullopt, Rackgate(), 1600);
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  EXPECT_EQ(again->registered_at, 1500);
  EXPECT_FALSE(again->tpm_resident);  // as stored
  ASSERT_EQ(Count("kubelet_key_registered"), 1u);
  const AuditEntry row = Audit("node-1").back();
  EXPECT_EQ(row.action, "kubelet_key_registered");
  EXPECT_EQ(row.actor, "rackgate");
  EXPECT_NE(row.detail_json.find(R"("kind":"client")"), std::string::npos) << row.detail_json;
  EXPECT_NE(row.detail_json.find("\"public_key_sha256\":\"6b31"), std::string::npos) << row.detail_json;
  EXPECT_NE(row.detail_json.find(R"("tpm_resident":false)"), std::string::npos) << row.detail_json;
  // The same key as a serving key is another registration.
  auto serving = store_->RegisterAttestedKey(Key(m, "k1", "serving"), std::nullopt, Rackgate(), 1700);
  ASSERT_TRUE(serving.ok()) << serving.status().ToString();
  EXPECT_EQ(Count("kubelet_key_registered"), 2u);
  auto found = store_->FindAttestedKey(m.id, "serving", KeyHash("k1"));
  ASSERT_TRUE(found.ok()) << found.status().ToString();
  EXPECT_EQ(found->registered_at, 1700);
}

TEST_P(KubeApprovalTest, RegisterIsRefusedOutsideAttestedProvisionedJoined) {
  Machine enrolled = Enroll("node-1", "a");
  Machine revoked = Attested("node-2", "b");
  ASSERT_TRUE(store_->Revoke("node-2", Op(), 1200).ok());
  Machine provisioned = Attested("node-3", "c");
  ASSERT_TRUE(store_->RecordConfigServed(provisioned.id, "digest", "3.4.0", Rackgate(), 1200).ok());
  const size_t before = AuditCount();
  ExpectFailure(store_->RegisterAttestedKey(Key(enrolled, "k1"), std::nullopt, Rackgate(), 1500).status(),
                Status::Code::kInvalidArgument, "state_conflict");
  ExpectFailure(store_->RegisterAttestedKey(Key(revoked, "k1"), std::nullopt, Rackgate(), 1500).status(),
                Status::Code::kInvalidArgument, "state_conflict");
  AttestedKey unknown = Key(enrolled, "k1");
  unknown.machine_id = 9999;
  ExpectFailure(store_->RegisterAttestedKey(unknown, std::nullopt, Rackgate(), 1500).status(), Status::Code::kNotFound,
                "machine_unknown");
  ExpectFailure(store_->RegisterAttestedKey(Key(provisioned, "k1", "peer"), std::nullopt, Rackgate(), 1500).status(),
                Status::Code::kInvalidArgument, "field_invalid");
  AttestedKey short_hash = Key(provisioned, "k1");
  short_hash.public_key_sha256.resize(31);
  ExpectFailure(store_->RegisterAttestedKey(short_hash, std::nullopt, Rackgate(), 1500).status(),
                Status::Code::kInvalidArgument, "field_invalid");
  EXPECT_EQ(AuditCount(), before);
  EXPECT_TRUE(store_->RegisterAttestedKey(Key(provisioned, "k1"), std::nullopt, Rackgate(), 1500).ok());
}

TEST_P(KubeApprovalTest, ACertifyNonceRegistersOneKey) {
  Machine m = Attested("node-1", "a");  // token hash tokhash-a
  Machine other = Attested("node-2", "b");
  AttestedKey tpm_key = Key(m, "k1");
  tpm_key.tpm_resident = true;
  auto first = store_->RegisterAttestedKey(tpm_key, B("tokhash-a"), Rackgate(), 1500);
  ASSERT_TRUE(first.ok()) << first.status().ToString();
  EXPECT_TRUE(first->tpm_resident);
  // The nonce is used: a second key with it is refused and not registered.
  ExpectFailure(store_->RegisterAttestedKey(Key(m, "k2"), B("tokhash-a"), Rackgate(), 1510).status(),
                Status::Code::kVerificationFailed, "certify_nonce_used");
  ExpectFailure(store_->FindAttestedKey(m.id, "client", KeyHash("k2")).status(), Status::Code::kNotFound, "key_unknown");
  ExpectFailure(store_->ConsumeCertifyNonce(B("tokhash-a"), 1520), Status::Code::kVerificationFailed,
                "certify_nonce_used");
  // The agent's retry of the first one is answered with the row.
  auto retry = store_->RegisterAttestedKey(tpm_key, B("tokhash-a"), Rackgate(), 1530);
  ASSERT_TRUE(retry.ok()) << retry.status().ToString();
  EXPECT_EQ(retry->registered_at, 1500);
  ExpectFailure(store_->RegisterAttestedKey(Key(m, "k3"), B("tokhash-nope"), Rackgate(), 1540).status(),
                Status::Code::kNotFound, "token_unknown");
  // Another machine's token proves nothing about this one, and stays unused.
  ExpectFailure(store_->RegisterAttestedKey(Key(m, "k4"), B("tokhash-b"), Rackgate(), 1550).status(),
                Status::Code::kNotFound, "token_unknown");
  EXPECT_TRUE(store_->RegisterAttestedKey(Key(other, "k4"), B("tokhash-b"), Rackgate(), 1560).ok());
  EXPECT_EQ(Count("kubelet_key_registered"), 2u);
}

TEST_P(KubeApprovalTest, AResetMakesTheKeysStale) {
  Machine m = Attested("node-1", "a");
  MustRegister(m, "k1");
  ASSERT_TRUE(store_->FindAttestedKey(m.id, "client", KeyHash("k1")).ok());
  ExpectFailure(store_->FindAttestedKey(m.id, "serving", KeyHash("k1")).status(), Status::Code::kNotFound, "key_unknown");
  ExpectFailure(store_->FindAttestedKey(9999, "client", KeyHash("k1")).status(), Status::Code::kNotFound, "key_unknown");
  ASSERT_TRUE(store_->Reset("node-1", Op(), 1600, false).ok());
  ExpectFailure(store_->FindAttestedKey(m.id, "client", KeyHash("k1")).status(), Status::Code::kNotFound, "key_unknown");
  // An approved join with the stale key is refused.
  ASSERT_TRUE(store_->RecordAttestationSuccess(Record(m, 1700), MakeToken(m, "a2", 1700), std::nullopt).ok());
  ExpectFailure(store_->RecordKubeCsr(Csr(m, "u1", "k1"), Rackgate(), 1750).status(), Status::Code::kVerificationFailed,
                "key_not_attested");
  // Registered again in the new epoch, it is a new registration.
  auto again = store_->RegisterAttestedKey(Key(m, "k1"), std::nullopt, Rackgate(), 1800);
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  EXPECT_EQ(again->registered_at, 1800);
  EXPECT_TRUE(again->current);
  EXPECT_EQ(Count("kubelet_key_registered"), 2u);
}

// --- RecordKubeCsr ---------------------------------------------------------------

TEST_P(KubeApprovalTest, AUidIsDecidedOnce) {
  Machine m = Attested("node-1", "a");
  auto denied = store_->RecordKubeCsr(Csr(m, "u1", "k1", kCsrDenied), Rackgate(), 2000);
  ASSERT_TRUE(denied.ok()) << denied.status().ToString();
  EXPECT_EQ(denied->decision, "denied");
  EXPECT_EQ(denied->hostname, "node-1");
  EXPECT_EQ(denied->created_at, 2000);
  EXPECT_EQ(denied->decided_at, 2000);
  const size_t before = AuditCount();
  MustRegister(m, "k1");
  ExpectFailure(store_->RecordKubeCsr(Csr(m, "u1", "k1", kCsrApproved), Rackgate(), 2100).status(),
                Status::Code::kInvalidArgument, "kube_csr_decided");
  EXPECT_EQ(AuditCount(), before + 1);  // the registration only
  EXPECT_EQ(Reload(m).state, MachineState::kAttested);
  auto got = store_->GetKubeCsr("u1");
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  EXPECT_EQ(got->decision, "denied");
  EXPECT_EQ(got->name, "csr-u1");
  EXPECT_EQ(got->kind, "client");
  EXPECT_EQ(got->purpose, "join");
  EXPECT_EQ(got->public_key_sha256, KeyHash("k1"));
  EXPECT_EQ(got->requester, "system:bootstrap:abcdef");
  EXPECT_EQ(got->reason, "key_not_attested");
  EXPECT_EQ(got->message, "register the key through an attested session first");
  EXPECT_EQ(got->decided_by, "rackgate");
  ExpectFailure(store_->GetKubeCsr("u-unknown").status(), Status::Code::kNotFound, "kube_csr_unknown");
  const AuditEntry row = Audit("node-1")[Audit("node-1").size() - 2];
  EXPECT_EQ(row.action, "kubernetes_csr_denied");
  for (const char* field : {R"("name":"csr-u1")", R"("uid":"u1")", R"("kind":"client")", R"("purpose":"join")",
                            R"("reason":"key_not_attested")", R"("requester":"system:bootstrap:abcdef")",
                            "\"public_key_sha256\":\"6b31"}) {
    EXPECT_NE(row.detail_json.find(field), std::string::npos) << field << " in " << row.detail_json;
  }
}

TEST_P(KubeApprovalTest, AnApprovedJoinNeedsTheMachinesUnusedAttestedKey) {
  Machine m = Attested("node-1", "a");
  Machine other = Attested("node-2", "b");
  MustRegister(other, "k-other");
  ASSERT_TRUE(store_->RegisterAttestedKey(Key(m, "k-serving", "serving"), std::nullopt, Rackgate(), 1500).ok());
  const size_t before = AuditCount();
  for (const char* tag : {"k1", "k-other", "k-serving"}) {
    ExpectFailure(store_->RecordKubeCsr(Csr(m, std::string("u-") + tag, tag), Rackgate(), 2000).status(),
                  Status::Code::kVerificationFailed, "key_not_attested");
  }
  EXPECT_EQ(AuditCount(), before);
  EXPECT_EQ(Reload(m).state, MachineState::kAttested);
  ExpectFailure(store_->GetKubeCsr("u-k1").status(), Status::Code::kNotFound, "kube_csr_unknown");

  MustRegister(m, "k1");
  auto joined = store_->RecordKubeCsr(Csr(m, "u1", "k1"), Rackgate(), 2100);
  ASSERT_TRUE(joined.ok()) << joined.status().ToString();
  EXPECT_EQ(joined->decision, "approved");
  EXPECT_EQ(joined->decided_at, 2100);
  Machine after = Reload(m);
  EXPECT_EQ(after.state, MachineState::kJoined);
  EXPECT_EQ(after.client_cert_issued_at, 2100);
  EXPECT_EQ(store_->FindAttestedKey(m.id, "client", KeyHash("k1"))->used_by_uid, "u1");
  const AuditEntry row = Audit("node-1").back();
  EXPECT_EQ(row.action, "kubernetes_csr_approved");
  EXPECT_EQ(row.from_state, "attested");
  EXPECT_EQ(row.to_state, "joined");

  // The used key, then a fresh key of a machine that joined.
  ExpectFailure(store_->RecordKubeCsr(Csr(m, "u2", "k1"), Rackgate(), 2200).status(), Status::Code::kVerificationFailed,
                "key_not_attested");
  MustRegister(m, "k2");
  ExpectFailure(store_->RecordKubeCsr(Csr(m, "u3", "k2"), Rackgate(), 2300).status(), Status::Code::kVerificationFailed,
                "client_cert_already_issued");
  EXPECT_EQ(store_->FindAttestedKey(m.id, "client", KeyHash("k2"))->used_by_uid, "");
}

TEST_P(KubeApprovalTest, AnApprovedJoinChecksTheState) {
  Machine provisioned = Attested("node-1", "a");
  ASSERT_TRUE(store_->RecordConfigServed(provisioned.id, "digest", "3.4.0", Rackgate(), 1200).ok());
  MustRegister(provisioned, "k1");
  ASSERT_TRUE(store_->RecordKubeCsr(Csr(provisioned, "u1", "k1"), Rackgate(), 2000).ok());
  EXPECT_EQ(Reload(provisioned).state, MachineState::kJoined);

  // Joined without the client-certificate mark (an operator's Transition):
  // stays joined, and the mark is set.
  Machine moved = Attested("node-2", "b");
  ASSERT_TRUE(
      store_->Transition(moved.id, {MachineState::kAttested}, MachineState::kJoined, Op(), "joined_by_hand", 1300)
          .ok());
  MustRegister(moved, "k2");
  ASSERT_TRUE(store_->RecordKubeCsr(Csr(moved, "u2", "k2"), Rackgate(), 2000).ok());
  EXPECT_EQ(Reload(moved).state, MachineState::kJoined);
  EXPECT_EQ(Reload(moved).client_cert_issued_at, 2000);

  Machine revoked = Attested("node-3", "c");
  MustRegister(revoked, "k3");
  ASSERT_TRUE(store_->Revoke("node-3", Op(), 1600).ok());
  ExpectFailure(store_->RecordKubeCsr(Csr(revoked, "u3", "k3"), Rackgate(), 2000).status(),
                Status::Code::kInvalidArgument, "state_conflict");
  EXPECT_EQ(store_->FindAttestedKey(revoked.id, "client", KeyHash("k3"))->used_by_uid, "");
  EXPECT_FALSE(Reload(revoked).client_cert_issued_at.has_value());
}

TEST_P(KubeApprovalTest, DenialsAndOtherPurposesChangeNoState) {
  Machine m = Attested("node-1", "a");
  ASSERT_TRUE(store_->RecordKubeCsr(Csr(m, "u1", "k1", kCsrDenied), Rackgate(), 2000).ok());
  KubeCsrDecision no_key = Csr(m, "u2", "k1", kCsrDenied);
  no_key.public_key_sha256.clear();  // a CSR whose key could not be read
  ASSERT_TRUE(store_->RecordKubeCsr(no_key, Rackgate(), 2000).ok());
  // Rotation and serving are recorded as denials without a key check.
  ASSERT_TRUE(store_->RecordKubeCsr(Csr(m, "u3", "k9", kCsrDenied, kKubePurposeRotation), Rackgate(), 2000).ok());
  ASSERT_TRUE(store_->RecordKubeCsr(Csr(m, "u4", "k9", kCsrDenied, kKubePurposeServing), Rackgate(), 2000).ok());
  Machine after = Reload(m);
  EXPECT_EQ(after.state, MachineState::kAttested);
  EXPECT_FALSE(after.client_cert_issued_at.has_value());
  EXPECT_EQ(after.updated_at, m.updated_at);
  EXPECT_EQ(Count("kubernetes_csr_denied"), 4u);
}

// Issue 40, item 3: a reset ends the old owner's certificates in approver
// mode too. An approved rotation or serving CSR needs a machine that joined
// in its current epoch (its key is the kubelet's own, so no key check).
TEST_P(KubeApprovalTest, RotationAndServingAreApprovedOnlyAfterAJoinInTheCurrentEpoch) {
  Machine m = Attested("node-1", "a");
  const size_t before = AuditCount();
  for (auto purpose : {kKubePurposeRotation, kKubePurposeServing}) {
    ExpectFailure(store_->RecordKubeCsr(Csr(m, "early-" + std::string(purpose), "k9", kCsrApproved, purpose),
                                        Rackgate(), 2000)
                      .status(),
                  Status::Code::kInvalidArgument, "machine_not_joined");
  }
  EXPECT_EQ(AuditCount(), before);
  MustRegister(m, "k1");
  ASSERT_TRUE(store_->RecordKubeCsr(Csr(m, "u-join", "k1"), Rackgate(), 2100).ok());
  ASSERT_TRUE(store_->RecordKubeCsr(Csr(m, "u-rot", "k9", kCsrApproved, kKubePurposeRotation), Rackgate(), 2200).ok());
  ASSERT_TRUE(store_->RecordKubeCsr(Csr(m, "u-srv", "k9", kCsrApproved, kKubePurposeServing), Rackgate(), 2200).ok());
  EXPECT_EQ(Reload(m).state, MachineState::kJoined);
  // Reset, and the new owner attested: still no rotation or serving.
  ASSERT_TRUE(store_->Reset("node-1", Op(), 2300, false).ok());
  ASSERT_TRUE(store_->RecordAttestationSuccess(Record(m, 2400), MakeToken(m, "a2", 2400), std::nullopt).ok());
  ExpectFailure(
      store_->RecordKubeCsr(Csr(m, "u-rot2", "k9", kCsrApproved, kKubePurposeRotation), Rackgate(), 2500).status(),
      Status::Code::kInvalidArgument, "machine_not_joined");
  // A waiting one (recorded before the machine joined) cannot be approved
  // by an operator either; a denial can.
  ASSERT_TRUE(store_->RecordKubeCsr(Csr(m, "w-srv", "k9", kCsrWaiting, kKubePurposeServing), Rackgate(), 2500).ok());
  ExpectFailure(store_->DecideKubeCsr("w-srv", true, "", Op(), 2600).status(), Status::Code::kInvalidArgument,
                "machine_not_joined");
  EXPECT_EQ(store_->GetKubeCsr("w-srv")->decision, "waiting");
  // After the new owner's join, rotations are approved again.
  MustRegister(m, "k2", 2700);
  ASSERT_TRUE(store_->RecordKubeCsr(Csr(m, "u-join2", "k2"), Rackgate(), 2700).ok());
  EXPECT_TRUE(store_->RecordKubeCsr(Csr(m, "u-rot3", "k9", kCsrApproved, kKubePurposeRotation), Rackgate(), 2800).ok());
}

// A kubelet CSR waiting for an operator when its machine is reset (or gets
// a new EK) is denied then: an operator's later approval cannot carry a
// decision of the old epoch into the new one.
TEST_P(KubeApprovalTest, AResetDeniesTheCsrsThatWaitForAnOperator) {
  Machine m = Attested("node-1", "a");
  MustRegister(m, "k1");
  ASSERT_TRUE(store_->RecordKubeCsr(Csr(m, "u-join", "k1"), Rackgate(), 2100).ok());
  ASSERT_TRUE(store_->RecordKubeCsr(Csr(m, "w-rot", "k8", kCsrWaiting, kKubePurposeRotation), Rackgate(), 2200).ok());
  ASSERT_TRUE(store_->RecordKubeCsr(Csr(m, "w-srv", "k9", kCsrWaiting, kKubePurposeServing), Rackgate(), 2200).ok());
  Machine other = Attested("node-2", "b");
  ASSERT_TRUE(
      store_->RecordKubeCsr(Csr(other, "w-other", "k7", kCsrWaiting, kKubePurposeServing), Rackgate(), 2200).ok());
  ASSERT_TRUE(store_->Reset("node-1", Op(), 2300, false).ok());
  for (const char* uid : {"w-rot", "w-srv"}) {
    auto d = store_->GetKubeCsr(uid);
    ASSERT_TRUE(d.ok()) << d.status().ToString();
    EXPECT_EQ(d->decision, "denied") << uid;
    EXPECT_EQ(d->reason, "machine_reset") << uid;
    EXPECT_EQ(d->decided_by, Op().name) << uid;
    EXPECT_EQ(d->decided_at, 2300) << uid;
    ExpectFailure(store_->DecideKubeCsr(uid, true, "", Op(), 2400).status(), Status::Code::kInvalidArgument,
                  "state_conflict");
  }
  EXPECT_EQ(store_->GetKubeCsr("w-other")->decision, "waiting");
  EXPECT_EQ(store_->GetKubeCsr("u-join")->decision, "approved");
  if (!Fake()) {
    const AuditEntry row = Audit("node-1").back();
    EXPECT_EQ(row.action, "reset");
    EXPECT_NE(row.detail_json.find(R"("kubernetes_csrs_denied":2)"), std::string::npos) << row.detail_json;
  }
}

TEST_P(KubeApprovalTest, RecordRefusesWhatItCannotStore) {
  Machine m = Attested("node-1", "a");
  const size_t before = AuditCount();
  KubeCsrDecision unknown = Csr(m, "u1", "k1", kCsrDenied);
  unknown.machine_id = 9999;
  ExpectFailure(store_->RecordKubeCsr(unknown, Rackgate(), 2000).status(), Status::Code::kNotFound, "machine_unknown");
  std::vector<KubeCsrDecision> bad(8, Csr(m, "u1", "k1", kCsrDenied));
  bad[0].uid.clear();
  bad[1].kind = "serving";  // a join is a client CSR
  bad[2].purpose = "renewal";
  bad[3].decision = "maybe";
  bad[4].public_key_sha256.resize(31);
  bad[5].message = "line\nbreak";
  bad[6].name = std::string(254, 'n');
  bad[7] = Csr(m, "u1", "k1", kCsrApproved);
  bad[7].public_key_sha256.clear();  // only a denial may lack a key
  for (const KubeCsrDecision& d : bad) {
    ExpectFailure(store_->RecordKubeCsr(d, Rackgate(), 2000).status(), Status::Code::kInvalidArgument, "field_invalid");
  }
  EXPECT_EQ(AuditCount(), before);
}

// --- DecideKubeCsr, ListKubeCsrs ---------------------------------------------------

TEST_P(KubeApprovalTest, AWaitingJoinIsDecidedOnceByAnOperator) {
  Machine m = Attested("node-1", "a");
  auto waiting = store_->RecordKubeCsr(Csr(m, "w1", "k1", kCsrWaiting), Rackgate(), 2000);
  ASSERT_TRUE(waiting.ok()) << waiting.status().ToString();
  EXPECT_EQ(waiting->decision, "waiting");
  EXPECT_FALSE(waiting->decided_at.has_value());
  EXPECT_EQ(Count("kubernetes_csr_waiting"), 1u);
  EXPECT_EQ(Reload(m).state, MachineState::kAttested);

  // Approving checks what an approved join checks: the key first.
  ExpectFailure(store_->DecideKubeCsr("w1", true, "", Op("looked at it"), 2100).status(), Status::Code::kVerificationFailed,
                "key_not_attested");
  EXPECT_EQ(store_->GetKubeCsr("w1")->decision, "waiting");
  MustRegister(m, "k1");
  auto approved = store_->DecideKubeCsr("w1", true, "", Op("looked at it"), 2200);
  ASSERT_TRUE(approved.ok()) << approved.status().ToString();
  EXPECT_EQ(approved->decision, "approved");
  EXPECT_EQ(approved->decided_by, "uid:0(root)");
  EXPECT_EQ(approved->decided_at, 2200);
  EXPECT_EQ(approved->created_at, 2000);
  EXPECT_EQ(Reload(m).state, MachineState::kJoined);
  EXPECT_EQ(store_->FindAttestedKey(m.id, "client", KeyHash("k1"))->used_by_uid, "w1");
  const AuditEntry row = Audit("node-1").back();
  EXPECT_EQ(row.action, "kubernetes_csr_approved");
  EXPECT_EQ(row.actor, "uid:0(root)");
  EXPECT_EQ(row.why, "looked at it");
  EXPECT_EQ(row.to_state, "joined");
  ExpectFailure(store_->DecideKubeCsr("w1", false, "too late", Op(), 2300).status(), Status::Code::kInvalidArgument,
                "state_conflict");
  ExpectFailure(store_->DecideKubeCsr("w-unknown", true, "", Op(), 2300).status(), Status::Code::kNotFound,
                "kube_csr_unknown");
}

TEST_P(KubeApprovalTest, AWaitingCsrIsDeniedWithAReason) {
  Machine m = Attested("node-1", "a");
  ASSERT_TRUE(store_->RecordKubeCsr(Csr(m, "w1", "k1", kCsrWaiting), Rackgate(), 2000).ok());
  ExpectFailure(store_->DecideKubeCsr("w1", false, "", Op(), 2100).status(), Status::Code::kInvalidArgument,
                "field_invalid");
  ExpectFailure(store_->DecideKubeCsr("w1", false, "bad\x01", Op(), 2100).status(), Status::Code::kInvalidArgument,
                "field_invalid");
  auto denied = store_->DecideKubeCsr("w1", false, "not in the rack plan", Op(), 2200);
  ASSERT_TRUE(denied.ok()) << denied.status().ToString();
  EXPECT_EQ(denied->decision, "denied");
  EXPECT_EQ(denied->reason, "not in the rack plan");
  EXPECT_EQ(denied->decided_at, 2200);
  EXPECT_EQ(Reload(m).state, MachineState::kAttested);
  const AuditEntry row = Audit("node-1").back();
  EXPECT_EQ(row.action, "kubernetes_csr_denied");
  EXPECT_NE(row.detail_json.find(R"("reason":"not in the rack plan")"), std::string::npos) << row.detail_json;
  ExpectFailure(store_->DecideKubeCsr("w1", true, "", Op(), 2300).status(), Status::Code::kInvalidArgument,
                "state_conflict");
}

TEST_P(KubeApprovalTest, ListsNewestFirstOrWaitingOldestFirst) {
  Machine m = Attested("node-1", "a");
  ASSERT_TRUE(store_->RecordKubeCsr(Csr(m, "b", "k", kCsrDenied), Rackgate(), 3000).ok());
  ASSERT_TRUE(store_->RecordKubeCsr(Csr(m, "d", "k", kCsrWaiting), Rackgate(), 2000).ok());
  ASSERT_TRUE(store_->RecordKubeCsr(Csr(m, "a", "k", kCsrWaiting), Rackgate(), 2000).ok());
  ASSERT_TRUE(store_->RecordKubeCsr(Csr(m, "c", "k", kCsrWaiting), Rackgate(), 1000).ok());
  ASSERT_TRUE(store_->RecordKubeCsr(Csr(m, "e", "k", kCsrDenied), Rackgate(), 1500).ok());
  const auto uids = [](const std::vector<KubeCsrDecision>& v) {
    std::vector<std::string> out;
    for (const auto& d : v) out.push_back(d.uid);
    return out;
  };
  auto all = store_->ListKubeCsrs(false);
  ASSERT_TRUE(all.ok()) << all.status().ToString();
  EXPECT_EQ(uids(*all), (std::vector<std::string>{"b", "d", "a", "e", "c"}));
  EXPECT_EQ((*all)[0].hostname, "node-1");
  auto waiting = store_->ListKubeCsrs(true);
  ASSERT_TRUE(waiting.ok()) << waiting.status().ToString();
  EXPECT_EQ(uids(*waiting), (std::vector<std::string>{"c", "a", "d"}));
  EXPECT_EQ(uids(*store_->ListKubeCsrs(true, 2)), (std::vector<std::string>{"c", "a"}));
  EXPECT_EQ(uids(*store_->ListKubeCsrs(false, 1)), (std::vector<std::string>{"b"}));
}

TEST_P(KubeApprovalTest, DeletingTheMachineTakesItsKeysAndDecisions) {
  Machine m = Attested("node-1", "a");
  Machine kept = Attested("node-2", "b");
  MustRegister(m, "k1");
  MustRegister(kept, "k2");
  ASSERT_TRUE(store_->RecordKubeCsr(Csr(m, "u1", "k1"), Rackgate(), 2000).ok());
  ASSERT_TRUE(store_->RecordKubeCsr(Csr(m, "u2", "k1", kCsrWaiting), Rackgate(), 2000).ok());
  ASSERT_TRUE(store_->RecordKubeCsr(Csr(kept, "u3", "k2", kCsrWaiting), Rackgate(), 2000).ok());
  ASSERT_TRUE(store_->Revoke("node-1", Op(), 2100).ok());
  ASSERT_TRUE(store_->DeleteMachine("node-1", Op(), 2200).ok());
  ExpectFailure(store_->GetKubeCsr("u1").status(), Status::Code::kNotFound, "kube_csr_unknown");
  auto all = store_->ListKubeCsrs(false);
  ASSERT_TRUE(all.ok()) << all.status().ToString();
  ASSERT_EQ(all->size(), 1u);
  EXPECT_EQ((*all)[0].uid, "u3");
  EXPECT_TRUE(store_->FindAttestedKey(kept.id, "client", KeyHash("k2")).ok());
  if (Fake()) return;
  // The rows themselves are gone (ON DELETE CASCADE), not only hidden.
  auto c = testing::MustConnect(path_);
  ASSERT_NE(c, nullptr);
  for (const char* table : {"attested_keys", "kube_csrs"}) {
    Stmt s = c->Prepare(std::string("SELECT count(*) FROM ") + table + " WHERE machine_id = ?1");
    s.BindInt(1, m.id);
    ASSERT_TRUE(s.Step());
    EXPECT_EQ(s.Int(0), 0) << table;
  }
}

INSTANTIATE_TEST_SUITE_P(Stores, KubeApprovalTest, ::testing::Values("store", "fake"),
                         [](const ::testing::TestParamInfo<std::string>& p) { return p.param; });

}  // namespace
}  // namespace rackgate::storage
