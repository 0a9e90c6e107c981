// Tests for recorded certificates, served configs and machine events.
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

TEST_F(StoreTest, ClientCertificateMarkIsSetOnce) {
  Machine m = Attested("node-1", "a");
  auto marked = store_->RecordCertificate(Cert(m, "01"), Op(), 1100);
  ASSERT_TRUE(marked.ok());
  EXPECT_EQ(marked->client_cert_issued_at, 1100);
  EXPECT_EQ(marked->state, MachineState::kJoined);
  const size_t before = AuditCount();
  ExpectFailure(store_->RecordCertificate(Cert(m, "02"), Op(), 1200).status(), Status::Code::kVerificationFailed,
                "client_cert_already_issued");
  EXPECT_EQ(store_->GetMachineById(m.id)->client_cert_issued_at, 1100);
  EXPECT_EQ(AuditCount(), before);
  auto certs = store_->ListCertificates("node-1");
  ASSERT_TRUE(certs.ok());
  ASSERT_EQ(certs->size(), 1u);
  EXPECT_EQ((*certs)[0].serial, "01");
}

TEST_F(StoreTest, ALostClientCertificateIsFoundByItsKeyUntilReset) {
  Machine m = Attested("node-1", "a");
  IssuedCertificate c = Cert(m, "c1");
  c.certificate_pem = "-----BEGIN CERTIFICATE-----\nc1\n-----END CERTIFICATE-----\n";
  ASSERT_TRUE(store_->RecordCertificate(c, Op(), 1100).ok());
  auto found = store_->FindClientCertificate(m.id, B("spki-c1"));
  ASSERT_TRUE(found.ok()) << found.status().ToString();
  EXPECT_EQ(found->serial, "c1");
  EXPECT_EQ(found->certificate_pem, c.certificate_pem);
  ExpectFailure(store_->FindClientCertificate(m.id, B("spki-other")).status(), Status::Code::kNotFound,
                "certificate_unknown");
  ASSERT_TRUE(store_->Reset("node-1", Op(), 1200, false).ok());
  ExpectFailure(store_->FindClientCertificate(m.id, B("spki-c1")).status(), Status::Code::kNotFound,
                "certificate_unknown");
}

TEST_F(StoreTest, CertificatesAreRecordedListedAndAudited) {
  Machine m = Attested("node-1", "a");
  // A serving certificate needs a provisioned or joined machine.
  ExpectFailure(store_->RecordCertificate(Cert(m, "s0", "serving"), Op(), 1050).status(),
                Status::Code::kInvalidArgument, "state_conflict");
  ASSERT_TRUE(store_->RecordConfigServed(m.id, "abcd", "3.3.0", Op(), 1060).ok());
  ASSERT_TRUE(store_->RecordCertificate(Cert(m, "c1"), Op(), 1100).ok());
  IssuedCertificate serving = Cert(m, "s1", "serving");
  serving.tpm_resident = true;
  ASSERT_TRUE(store_->RecordCertificate(serving, Op(), 1200).ok());
  ExpectFailure(store_->RecordCertificate(Cert(m, "s1", "serving"), Op(), 1300).status(),
                Status::Code::kInvalidArgument, "field_invalid");
  IssuedCertificate odd = Cert(m, "x1", "other");
  ExpectFailure(store_->RecordCertificate(odd, Op(), 1300).status(), Status::Code::kInvalidArgument,
                "field_invalid");

  auto certs = store_->ListCertificates("");
  ASSERT_TRUE(certs.ok());
  ASSERT_EQ(certs->size(), 2u);
  EXPECT_EQ((*certs)[0].serial, "s1");  // newest first
  EXPECT_EQ((*certs)[0].kind, "serving");
  EXPECT_EQ((*certs)[0].hostname, "node-1");
  EXPECT_TRUE((*certs)[0].tpm_resident);
  EXPECT_EQ((*certs)[0].sans, (std::vector<std::string>{"node-1", "10.0.0.7"}));
  EXPECT_EQ((*certs)[0].issued_at, 1200);
  EXPECT_EQ((*certs)[1].serial, "c1");
  EXPECT_TRUE(store_->ListCertificates("node-2")->empty());

  auto audit = Audit("node-1");
  EXPECT_EQ(audit.back().action, "certificate_issued");
  EXPECT_NE(audit.back().detail_json.find("\"serial\":\"s1\""), std::string::npos) << audit.back().detail_json;
  // A revoked machine gets nothing recorded.
  ASSERT_TRUE(store_->Revoke("node-1", Op(), 1400).ok());
  ExpectFailure(store_->RecordCertificate(Cert(m, "s2", "serving"), Op(), 1500).status(),
                Status::Code::kInvalidArgument, "state_conflict");
}

TEST_F(StoreTest, MachineEventsAreAuditedWithoutChangingState) {
  Machine m = Attested("node-1", "a");
  ASSERT_TRUE(store_->AuditMachineEvent(m.id, "csr_refused", "{\"reason\":\"csr_usages\"}", Op(), 1100).ok());
  auto audit = Audit("node-1");
  EXPECT_EQ(audit.back().action, "csr_refused");
  EXPECT_EQ(audit.back().from_state, "attested");
  EXPECT_EQ(audit.back().to_state, "attested");
  EXPECT_EQ(audit.back().detail_json, "{\"reason\":\"csr_usages\"}");
  EXPECT_EQ(store_->GetMachineById(m.id)->state, MachineState::kAttested);
  ExpectFailure(store_->AuditMachineEvent(m.id, "x", "[]", Op(), 1100), Status::Code::kInvalidArgument,
                "field_invalid");
  ExpectFailure(store_->AuditMachineEvent(9999, "x", "{}", Op(), 1100), Status::Code::kNotFound, "machine_unknown");
}

TEST_F(StoreTest, ConfigServedMovesAttestedToProvisionedAndAuditsTheDigest) {
  Machine enrolled = Enroll("node-2", "b");
  ExpectFailure(store_->RecordConfigServed(enrolled.id, "abcd", "3.3.0", Op(), 1000).status(),
                Status::Code::kInvalidArgument, "state_conflict");
  Machine m = Attested("node-1", "a");
  auto first = store_->RecordConfigServed(m.id, "d1g3st", "3.3.0", Op(), 1100);
  ASSERT_TRUE(first.ok()) << first.status().ToString();
  EXPECT_EQ(first->state, MachineState::kProvisioned);
  auto again = store_->RecordConfigServed(m.id, "d1g3st", "3.1.0", Op(), 1200);
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->state, MachineState::kProvisioned);
  auto audit = Audit("node-1");
  ASSERT_GE(audit.size(), 2u);
  EXPECT_EQ(audit[audit.size() - 2].to_state, "provisioned");
  EXPECT_EQ(audit.back().action, "config_served");
  EXPECT_EQ(audit.back().from_state, "provisioned");
  EXPECT_EQ(audit.back().detail_json, "{\"sha256\":\"d1g3st\",\"version\":\"3.1.0\"}");
}

// --- Renewal (docs/csr.md, "Renewal") ------------------------------------------

TEST_F(StoreTest, ARenewalReplacesTheCurrentCertificateWithOneAuditRow) {
  Machine m = Attested("node-1", "a");
  ASSERT_TRUE(store_->RecordCertificate(Cert(m, "c1"), Op(), 1100).ok());
  const size_t before = AuditCount();
  auto renewed = store_->RecordRenewal(Cert(m, "c2"), "c1", Op(), 2000);
  ASSERT_TRUE(renewed.ok()) << renewed.status().ToString();
  EXPECT_EQ(renewed->state, MachineState::kJoined);
  // The client-certificate mark stays: the machine joined once.
  EXPECT_EQ(renewed->client_cert_issued_at, 1100);
  ASSERT_EQ(AuditCount(), before + 1);
  const AuditEntry last = Audit("node-1").back();
  EXPECT_EQ(last.action, "certificate_renewed");
  EXPECT_EQ(last.from_state, "joined");
  EXPECT_EQ(last.to_state, "joined");
  EXPECT_NE(last.detail_json.find("\"serial\":\"c2\""), std::string::npos) << last.detail_json;
  EXPECT_NE(last.detail_json.find("\"replaces\":\"c1\""), std::string::npos) << last.detail_json;
  EXPECT_NE(last.detail_json.find("\"kind\":\"client\""), std::string::npos) << last.detail_json;

  auto old = store_->GetCertificate("c1");
  ASSERT_TRUE(old.ok());
  EXPECT_EQ(old->replaced_by, "c2");
  EXPECT_TRUE(old->since_reset);
  auto now = store_->GetCertificate("c2");
  ASSERT_TRUE(now.ok());
  EXPECT_FALSE(now->replaced_by);
  EXPECT_EQ(now->issued_at, 2000);
  // The renewed key is found as the client key since the reset.
  EXPECT_EQ(store_->FindClientCertificate(m.id, B("spki-c2"))->serial, "c2");

  // A replaced certificate is renewed no more; nothing changes.
  ExpectFailure(store_->RecordRenewal(Cert(m, "c3"), "c1", Op(), 2100).status(), Status::Code::kVerificationFailed,
                "renewal_proof_invalid");
  ExpectFailure(store_->GetCertificate("c3").status(), Status::Code::kNotFound, "certificate_unknown");
  EXPECT_EQ(AuditCount(), before + 1);
  // The newest one is.
  ASSERT_TRUE(store_->RecordRenewal(Cert(m, "c3"), "c2", Op(), 2200).ok());
}

TEST_F(StoreTest, ARenewalNeedsThisMachinesCurrentCertificateOfTheKind) {
  Machine m = Attested("node-1", "a");
  Machine other = Attested("node-2", "b");
  ASSERT_TRUE(store_->RecordCertificate(Cert(m, "c1"), Op(), 1100).ok());
  ASSERT_TRUE(store_->RecordCertificate(Cert(other, "o1"), Op(), 1100).ok());
  ASSERT_TRUE(store_->RecordCertificate(Cert(m, "s1", "serving"), Op(), 1150).ok());
  const size_t before = AuditCount();
  // Another machine's certificate, an unknown serial, another kind.
  ExpectFailure(store_->RecordRenewal(Cert(m, "c2"), "o1", Op(), 2000).status(), Status::Code::kVerificationFailed,
                "renewal_proof_invalid");
  ExpectFailure(store_->RecordRenewal(Cert(m, "c2"), "nope", Op(), 2000).status(),
                Status::Code::kVerificationFailed, "renewal_proof_invalid");
  ExpectFailure(store_->RecordRenewal(Cert(m, "c2"), "s1", Op(), 2000).status(), Status::Code::kVerificationFailed,
                "renewal_proof_invalid");
  ExpectFailure(store_->RecordRenewal(Cert(m, "c1", "serving"), "s1", Op(), 2000).status(),
                Status::Code::kInvalidArgument, "field_invalid");  // the serial is taken
  EXPECT_EQ(AuditCount(), before);
  // A serving certificate renews a serving one.
  ASSERT_TRUE(store_->RecordRenewal(Cert(m, "s2", "serving"), "s1", Op(), 2000).ok());
}

TEST_F(StoreTest, OnlyAJoinedMachineRenewsAndAResetEndsItsCertificates) {
  Machine m = Attested("node-1", "a");
  ASSERT_TRUE(store_->RecordConfigServed(m.id, "abcd", "3.3.0", Op(), 1060).ok());
  ASSERT_TRUE(store_->RecordCertificate(Cert(m, "s1", "serving"), Op(), 1080).ok());
  // Provisioned, not joined yet.
  ExpectFailure(store_->RecordRenewal(Cert(m, "s2", "serving"), "s1", Op(), 1090).status(),
                Status::Code::kInvalidArgument, "state_conflict");
  ASSERT_TRUE(store_->RecordCertificate(Cert(m, "c1"), Op(), 1100).ok());
  ASSERT_TRUE(store_->Reset("node-1", Op(), 1200, false).ok());
  EXPECT_FALSE(store_->GetCertificate("c1")->since_reset);
  // Joined again after the reset: the certificates from before are history.
  auto again = store_->RecordAttestationSuccess(Record(m, 1300), MakeToken(m, "a2", 1300), std::nullopt);
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  ASSERT_TRUE(store_->RecordCertificate(Cert(m, "c2"), Op(), 1400).ok());
  EXPECT_TRUE(store_->GetCertificate("c2")->since_reset);
  ExpectFailure(store_->RecordRenewal(Cert(m, "c3"), "c1", Op(), 1500).status(), Status::Code::kVerificationFailed,
                "renewal_proof_invalid");
  ASSERT_TRUE(store_->RecordRenewal(Cert(m, "c3"), "c2", Op(), 1500).ok());
  // A revoked machine renews nothing.
  ASSERT_TRUE(store_->Revoke("node-1", Op(), 1600).ok());
  ExpectFailure(store_->RecordRenewal(Cert(m, "c4"), "c3", Op(), 1700).status(), Status::Code::kInvalidArgument,
                "state_conflict");
}

// CSR role, issue 28: an issued certificate, its renewal and its certify
// nonce are one transaction with one audit row; a refusal leaves none of it.
TEST_F(StoreTest, AnIssuedCertificateIsRecordedInOneTransaction) {
  Machine m = Attested("node-1", "a");
  // A racing request recorded the machine's one client certificate: the
  // record is refused after its nonce was marked, and nothing of it stays
  // (the nonce is unused, no certificate, no row).
  ASSERT_TRUE(store_->RecordCertificate(Cert(m, "c0"), Op(), 1050).ok());
  size_t audit = AuditCount();
  IssuedCertificateRecord first{Cert(m, "c1"), std::nullopt, B("tokhash-a")};
  ExpectFailure(store_->RecordIssuedCertificate(first, Op(), 1100).status(), Status::Code::kVerificationFailed,
                "client_cert_already_issued");
  EXPECT_EQ(AuditCount(), audit);
  EXPECT_EQ(store_->GetMachineById(m.id)->client_cert_issued_at, 1050);
  EXPECT_EQ(store_->ListCertificates("node-1")->size(), 1u);
  EXPECT_FALSE(store_->LookupToken(B("tokhash-a"), 1101)->token.certify_nonce_used_at);

  Machine n = Attested("node-2", "b");
  first = {Cert(n, "c2"), std::nullopt, B("tokhash-b")};
  audit = AuditCount();
  auto joined = store_->RecordIssuedCertificate(first, Op(), 1100);
  ASSERT_TRUE(joined.ok()) << joined.status().ToString();
  EXPECT_EQ(joined->state, MachineState::kJoined);
  EXPECT_EQ(joined->client_cert_issued_at, 1100);
  EXPECT_EQ(AuditCount(), audit + 1);
  EXPECT_EQ(store_->LookupToken(B("tokhash-b"), 1101)->token.certify_nonce_used_at, 1100);
  // The nonce proves one CSR: a second record over it is refused whole.
  IssuedCertificateRecord serving{Cert(n, "s2", "serving"), std::nullopt, B("tokhash-b")};
  ExpectFailure(store_->RecordIssuedCertificate(serving, Op(), 1200).status(), Status::Code::kVerificationFailed,
                "certify_nonce_used");
  EXPECT_EQ(AuditCount(), audit + 1);
  EXPECT_EQ(store_->ListCertificates("node-2")->size(), 1u);

  // A renewal in the same call: inserted, the old one replaced, one row.
  IssuedCertificateRecord renewal{Cert(n, "c3"), std::string("c2"), std::nullopt};
  renewal.certificate.public_key_sha256 = B("spki-c3");
  auto renewed = store_->RecordIssuedCertificate(renewal, Op(), 1300);
  ASSERT_TRUE(renewed.ok()) << renewed.status().ToString();
  EXPECT_EQ(renewed->state, MachineState::kJoined);
  EXPECT_EQ(store_->GetCertificate("c2")->replaced_by, "c3");
  EXPECT_EQ(AuditCount(), audit + 2);
  // Renewed again: refused, nothing inserted.
  renewal.certificate.serial = "c4";
  ExpectFailure(store_->RecordIssuedCertificate(renewal, Op(), 1400).status(), Status::Code::kVerificationFailed,
                "renewal_proof_invalid");
  EXPECT_EQ(AuditCount(), audit + 2);
  EXPECT_FALSE(store_->GetCertificate("c4").ok());
}

}  // namespace
}  // namespace rackgate::storage
