// EK certificates an operator imports (issue 41, "online-only certificates"):
// verified against the anchors, put on record by EK, audited, idempotent;
// a machine enrolled by its EK public then attests with it. Every reason of
// the service has its case.
#include "core/ek_cert_service.h"

#include <gtest/gtest.h>

#include <memory>
#include <string>

#include "attest/testing/ek_cert_test_pki.h"
#include "base/hex.h"
#include "base/sha256.h"
#include "core/machine_service.h"
#include "core/testing/core_fixture.h"
#include "wire/codec.h"

namespace rackgate::core::testing {
namespace {

namespace ekt = attest::ek_testing;

class EkCertServiceTest : public EveryStoreTest {
 protected:
  static void SetUpTestSuite() { pki_ = new ekt::Pki(); }
  static void TearDownTestSuite() {
    delete pki_;
    pki_ = nullptr;
  }
  void SetUp() override {
    EveryStoreTest::SetUp();
    anchors_.Set(pki_->Store());
    options_.require_ek_certificate = true;
    Restart();
  }
  EkCertService Service() { return EkCertService(store_.get(), attestation_.get()); }
  // `m`'s EK certificate, issued by the test PKI's intermediate.
  static Bytes CertFor(const SoftMachine& m) { return pki_->Ek(ekt::CertSpec(), m.ek.pkey()); }
  static wire::EkCertImportRequest Request(const Bytes& der) {
    return {wire::Base64Encode(der), "ek.json"};
  }
  std::vector<storage::AuditEntry> Audit() {
    auto audit = store_->ListAudit({});
    return audit.ok() ? *audit : std::vector<storage::AuditEntry>{};
  }

  storage::Actor actor_{"alice", ""};
  static inline ekt::Pki* pki_ = nullptr;
};
RACKGATE_ON_EVERY_STORE(EkCertServiceTest);

// The end of the online-only path: enrolled by EK public, refused
// ek_cert_missing; the operator imports the certificate; it attests.
TEST_P(EkCertServiceTest, MachineEnrolledByEkPublicAttestsWithTheImportedCertificate) {
  if (skip_) GTEST_SKIP() << *skip_;
  SoftMachine m;
  Enroll(m, "node-1");
  EXPECT_EQ(ReasonOf(attestation_->Challenge(m.ChallengeRequest(), caller_)), "ek_cert_missing");

  const size_t audit_before = Audit().size();
  auto imported = Service().Import(Request(CertFor(m)), actor_);
  ASSERT_TRUE(imported.ok()) << imported.status().ToString();
  EXPECT_EQ(imported->outcome, "stored");
  EXPECT_EQ(imported->hostname, "node-1");
  EXPECT_EQ(imported->ek_hash, hex::Encode(m.EkHash()));
  EXPECT_NE(imported->issuer.find("Test EK Intermediate"), std::string::npos) << imported->issuer;

  // On record with the TPM facts it names; everything else kept.
  auto stored = store_->GetMachine("node-1");
  ASSERT_TRUE(stored.ok());
  ASSERT_TRUE(stored->ek_certificate.has_value());
  EXPECT_EQ(stored->tpm_manufacturer.empty(), false);
  EXPECT_EQ(stored->tpm_model, "swtpm");
  EXPECT_EQ(stored->pool, "workers");
  EXPECT_EQ(stored->addresses.size(), 2u);
  EXPECT_EQ(stored->ek_public, m.ek.tpm2b_public());
  // One audit row, by the operator, saying where the certificate came from.
  const auto audit = Audit();
  ASSERT_EQ(audit.size(), audit_before + 1);
  EXPECT_EQ(audit.back().action, "enroll_update");
  EXPECT_EQ(audit.back().actor, "alice");
  EXPECT_EQ(audit.back().why, "EK certificate imported from ek.json");
  EXPECT_NE(audit.back().detail_json.find("ek_certificate"), std::string::npos);

  // The agent sends only its EK public: the certificate on record is checked.
  EXPECT_NO_THROW(Attest(m));
}

TEST_P(EkCertServiceTest, ImportingTheSameCertificateAgainChangesNothing) {
  if (skip_) GTEST_SKIP() << *skip_;
  SoftMachine m;
  Enroll(m, "node-1");
  const Bytes cert = CertFor(m);
  ASSERT_TRUE(Service().Import(Request(cert), actor_).ok());
  const size_t audit_before = Audit().size();
  auto again = Service().Import(Request(cert), actor_);
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  EXPECT_EQ(again->outcome, "unchanged");
  EXPECT_EQ(Audit().size(), audit_before);
}

// The file name goes into the audit row as one printable line.
TEST_P(EkCertServiceTest, SourceIsOnePrintableLineInTheAudit) {
  if (skip_) GTEST_SKIP() << *skip_;
  SoftMachine m;
  Enroll(m, "node-1");
  ASSERT_TRUE(Service().Import({wire::Base64Encode(CertFor(m)), "a\nb" + std::string(300, 'x')}, actor_).ok());
  const std::string why = Audit().back().why;
  EXPECT_EQ(why.rfind("EK certificate imported from a?bxxx", 0), 0u) << why;
  EXPECT_LE(why.size(), 230u);
}

// Decided: an EK not enrolled yet is refused, with the fix in the message
// (docs/operations.md); nothing is kept for a later enrollment.
TEST_P(EkCertServiceTest, CertificateOfAnEkNoMachineHasIsRefused) {
  if (skip_) GTEST_SKIP() << *skip_;
  SoftMachine m;
  auto r = Service().Import(Request(CertFor(m)), actor_);
  EXPECT_EQ(ReasonOf(r), "ek_cert_machine_unknown");
  EXPECT_EQ(r.status().code(), Status::Code::kNotFound);
  EXPECT_NE(r.status().message().find("rackgatectl enroll"), std::string::npos);
  EXPECT_FALSE(store_->FindMachineByEkHash(m.EkHash()).ok());
}

TEST_P(EkCertServiceTest, AnotherCertificateOnRecordIsNotReplaced) {
  if (skip_) GTEST_SKIP() << *skip_;
  SoftMachine m;
  Enroll(m, "node-1");
  ekt::CertSpec first;
  first.serial = 40;
  ekt::CertSpec second;
  second.serial = 41;
  const Bytes on_record = pki_->Ek(first, m.ek.pkey());
  ASSERT_TRUE(Service().Import(Request(on_record), actor_).ok());
  auto r = Service().Import(Request(pki_->Ek(second, m.ek.pkey())), actor_);
  EXPECT_EQ(ReasonOf(r), "ek_cert_on_record");
  EXPECT_NE(r.status().message().find("--ek-cert"), std::string::npos);
  EXPECT_EQ(*store_->GetMachine("node-1")->ek_certificate, on_record);
}

// Verified against the anchors as enrollment verifies: a certificate of
// another PKI is refused (403's code), and so is what is no certificate.
TEST_P(EkCertServiceTest, CertificateThatDoesNotVerifyIsRefused) {
  if (skip_) GTEST_SKIP() << *skip_;
  SoftMachine m;
  Enroll(m, "node-1");
  const Bytes foreign = ekt::Der(
      ekt::MakeCert(ekt::CertSpec(), m.ek.pkey(), pki_->foreign_int.get(), pki_->foreign_key.get()).get());
  auto r = Service().Import(Request(foreign), actor_);
  EXPECT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), Status::Code::kVerificationFailed) << r.status().ToString();
  EXPECT_FALSE(store_->GetMachine("node-1")->ek_certificate.has_value());
  EXPECT_EQ(ReasonOf(Service().Import(Request(Bytes{0x30, 0x03, 0x02, 0x01, 0x01}), actor_)), "ek_cert_malformed");
  EXPECT_EQ(ReasonOf(Service().Import({"!!", ""}, actor_)), "field_invalid");
}

// What `ek-cert urls` asks for: machines without a certificate, with their
// EK public area, and unknown EKs that knocked without one.
TEST_P(EkCertServiceTest, MissingListsMachinesAndUnknownEksWithoutACertificate) {
  if (skip_) GTEST_SKIP() << *skip_;
  SoftMachine without, with, unknown;
  Enroll(without, "node-a");
  Enroll(with, "node-b");
  ASSERT_TRUE(Service().Import(Request(CertFor(with)), actor_).ok());
  EXPECT_EQ(ReasonOf(attestation_->Challenge(unknown.ChallengeRequest(), caller_)), "machine_not_enrolled");
  auto list = Service().Missing();
  ASSERT_TRUE(list.ok()) << list.status().ToString();
  EXPECT_TRUE(list->require_ek_certificate);
  ASSERT_EQ(list->missing.size(), 2u);
  EXPECT_EQ(list->missing[0].hostname, "node-a");
  EXPECT_EQ(list->missing[0].ek_public_base64, wire::Base64Encode(without.ek.tpm2b_public()));
  EXPECT_EQ(list->missing[1].hostname, "");
  EXPECT_EQ(list->missing[1].ek_hash, hex::Encode(unknown.EkHash()));
  EXPECT_EQ(list->missing[1].ek_public_base64, wire::Base64Encode(unknown.ek.tpm2b_public()));
  EXPECT_EQ(list->missing[1].reason, "machine_not_enrolled");
}

// Issue 41, item 4: a certificate accepted only through an anchor's
// relaxation (here "sha1": an EK certificate signed with SHA-1) is refused
// by default naming the setting; once the operator grants it, the import's
// and the enrollment's audit rows and every attestation record name it.
TEST_P(EkCertServiceTest, RelaxedCertificateIsNamedInTheAuditAndTheAttestationRecord) {
  if (skip_) GTEST_SKIP() << *skip_;
  SoftMachine m, other;
  Enroll(m, "node-1");
  ekt::CertSpec sha1;
  sha1.md = EVP_sha1();
  const Bytes cert = pki_->Ek(sha1, m.ek.pkey());
  const std::string root = sha256::Hex(ekt::Der(pki_->root.get()));
  auto refused = Service().Import(Request(cert), actor_);
  EXPECT_EQ(ReasonOf(refused), "ek_cert_weak_crypto");
  EXPECT_NE(refused.status().message().find("ek_anchor_relaxations"), std::string::npos) << refused.status().ToString();

  attest::EkTrustStore relaxed = pki_->Store();
  ASSERT_TRUE(relaxed.AllowForAnchor(root, attest::kEkRelaxSha1).ok());
  anchors_.Set(std::move(relaxed));
  auto imported = Service().Import(Request(cert), actor_);
  ASSERT_TRUE(imported.ok()) << imported.status().ToString();
  EXPECT_EQ(imported->relaxations, std::vector<std::string>{"sha1"});
  EXPECT_EQ(imported->anchor, root);
  EXPECT_NE(imported->summary.find("relaxation sha1"), std::string::npos) << imported->summary;
  EXPECT_NE(Audit().back().detail_json.find("\"ek_relaxed\":[\"sha1\"]"), std::string::npos)
      << Audit().back().detail_json;

  Attest(m);
  auto record = store_->LastSuccessfulAttestation(store_->GetMachine("node-1")->id);
  ASSERT_TRUE(record.ok()) << record.status().ToString();
  EXPECT_EQ(record->verdict, "ok");
  EXPECT_EQ(record->reasons, std::vector<std::string>{"ek_relaxed:sha1"});

  // Enrolled with such a certificate: the enroll row names it too.
  MachineService machines(store_.get(), store_.get(), store_.get(), attestation_.get());
  wire::EnrollRequest r;
  r.hostname = "node-2";
  r.pool = "workers";
  r.ek_certificate_base64 = wire::Base64Encode(pki_->Ek(sha1, other.ek.pkey()));
  ASSERT_TRUE(machines.Enroll(r, actor_).ok());
  EXPECT_EQ(Audit().back().action, "enroll");
  EXPECT_NE(Audit().back().detail_json.find("\"ek_relaxed\":[\"sha1\"]"), std::string::npos)
      << Audit().back().detail_json;
}

// A certificate that needs no relaxation leaves the record's reasons empty.
TEST_P(EkCertServiceTest, PlainCertificateNamesNoRelaxation) {
  if (skip_) GTEST_SKIP() << *skip_;
  SoftMachine m;
  Enroll(m, "node-1");
  attest::EkTrustStore relaxed = pki_->Store();
  ASSERT_TRUE(relaxed.AllowForAnchor(sha256::Hex(ekt::Der(pki_->root.get())), attest::kEkRelaxSha1).ok());
  anchors_.Set(std::move(relaxed));
  auto imported = Service().Import(Request(CertFor(m)), actor_);
  ASSERT_TRUE(imported.ok()) << imported.status().ToString();
  EXPECT_TRUE(imported->relaxations.empty());
  EXPECT_EQ(Audit().back().detail_json.find("ek_relaxed"), std::string::npos);
  Attest(m);
  auto record = store_->LastSuccessfulAttestation(store_->GetMachine("node-1")->id);
  ASSERT_TRUE(record.ok());
  EXPECT_TRUE(record->reasons.empty());
}

}  // namespace
}  // namespace rackgate::core::testing
