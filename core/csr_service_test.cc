// The CSR vouching refusal matrix (docs/csr.md, "In order") as tests of the
// core: a soft-TPM machine attests for a real token, then submits CSRs made
// with OpenSSL to CsrService over every store (the fake, SQLite, PostgreSQL)
// and a real cluster CA.
#include "core/csr_service.h"

#include <gtest/gtest.h>

#include <openssl/evp.h>
#include <openssl/rand.h>
#include <openssl/x509.h>

#include <algorithm>
#include <functional>

#include "core/issuer.h"
#include "core/pool_settings.h"
#include "core/secrets.h"
#include "core/signer.h"
#include "core/testing/core_fixture.h"
#include "core/testing/csr_test_util.h"

namespace rackgate::core::testing {
namespace {

using csr::test_util::CsrSpec;
using csr::test_util::Der;
using csr::test_util::MakeCsr;
using csr::test_util::NewKey;
using csr::test_util::Pem;
using csr::test_util::CertFromPem;
using csr::test_util::SignWith;

constexpr char kClientSigner[] = "kubernetes.io/kube-apiserver-client-kubelet";

// Each test runs on the fake store and on the environment's real backend.
class CsrServiceTest : public EveryStoreTest {
 protected:
  CsrServiceTest() {
    options_csr_.cluster_ca_certificate = dir_.File("ca.crt");
    options_csr_.cluster_ca_key = dir_.File("ca.key");
    csrs_ = std::make_unique<CsrService>(store_.get(), attestation_.get(), options_csr_, nullptr);
  }
  void WithClusterCa() {
    ASSERT_TRUE(csr::GenerateClusterCa("test cluster CA", 3650, options_csr_.cluster_ca_certificate,
                                       options_csr_.cluster_ca_key)
                    .ok());
  }
  // A client CSR for node-1 (CN system:node:node-1, O system:nodes).
  static std::string ClientCsr(EVP_PKEY* key) {
    CsrSpec spec;
    spec.subject = {{"O", "system:nodes"}, {"CN", "system:node:node-1"}};
    return MakeCsr(key, spec);
  }
  static CsrSubmission Client(const std::string& pem) {
    CsrSubmission s;
    s.signer = kClientSigner;
    s.csr_pem = pem;
    return s;
  }
  std::string Token() {
    if (token_.empty()) {
      Enroll(machine_, "node-1");
      token_ = Attest(machine_).token;
    }
    return token_;
  }

  CsrOptions options_csr_;
  std::unique_ptr<CsrService> csrs_;
  SoftMachine machine_;
  std::string token_;
};
RACKGATE_ON_EVERY_STORE(CsrServiceTest);

TEST_P(CsrServiceTest, SignsAClientCsrOnceAndSendsTheSameCertificateAgainForTheSameKey) {
  WithClusterCa();
  auto key = NewKey("EC", "P-256");
  const std::string pem = ClientCsr(key.get());
  auto issued = csrs_->Submit(Token(), Client(pem));
  ASSERT_TRUE(issued.ok()) << issued.status().ToString();
  EXPECT_EQ(issued->state, "joined");
  EXPECT_FALSE(issued->tpm_resident);
  auto again = csrs_->Submit(Token(), Client(pem));
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->serial, issued->serial);
  // Another key: the one client certificate is issued.
  auto other = NewKey("EC", "P-256");
  EXPECT_EQ(ReasonOf(csrs_->Submit(Token(), Client(ClientCsr(other.get())))), "client_cert_already_issued");
}

TEST_P(CsrServiceTest, TokenRefusalsComeFirst) {
  EXPECT_EQ(ReasonOf(csrs_->Submit(std::nullopt, Client("x"))), "token_missing");
  EXPECT_EQ(ReasonOf(csrs_->Submit(std::string("nope"), Client("x"))), "token_unknown");
  // The body is judged only after the token: a bad body with no token is 401.
  EXPECT_EQ(ReasonOf(csrs_->Submit(std::nullopt, Status::InvalidArgument("bad_json", "x"))), "token_missing");
}

TEST_P(CsrServiceTest, FloodLimits) {
  options_csr_.max_in_flight_per_machine = 0;
  csrs_ = std::make_unique<CsrService>(store_.get(), attestation_.get(), options_csr_, nullptr);
  EXPECT_EQ(ReasonOf(csrs_->Submit(Token(), Client("x"))), "csr_flood_machine");
  options_csr_.max_in_flight_per_machine = 2;
  options_csr_.max_in_flight = 0;
  csrs_ = std::make_unique<CsrService>(store_.get(), attestation_.get(), options_csr_, nullptr);
  EXPECT_EQ(ReasonOf(csrs_->Submit(Token(), Client("x"))), "csr_flood");
}

TEST_P(CsrServiceTest, RequestRefusals) {
  EXPECT_EQ(ReasonOf(csrs_->Submit(Token(), Status::InvalidArgument("bad_json", "body"))), "bad_json");
  CsrSubmission unknown = Client("x");
  unknown.signer = "kubernetes.io/legacy-unknown";
  EXPECT_EQ(ReasonOf(csrs_->Submit(Token(), unknown)), "signer_unknown");
  EXPECT_EQ(ReasonOf(csrs_->Submit(Token(), Client("not a CSR"))), "csr_malformed");
  EXPECT_EQ(ReasonOf(csrs_->Submit(Token(), Client(std::string(64 * 1024 + 1, 'a')))), "csr_malformed");
  auto key = NewKey("EC", "P-256");
  CsrSubmission partial = Client(ClientCsr(key.get()));
  partial.tpm_key = TpmKeyProof{};
  EXPECT_EQ(ReasonOf(csrs_->Submit(Token(), partial)), "field_invalid");
}

// Issue 13: a broken self-signature is a refusal (403 in the table), not a
// malformed request.
TEST_P(CsrServiceTest, Issue13BrokenSelfSignatureIsARefusal) {
  auto key = NewKey("EC", "P-256");
  auto der = Der(ClientCsr(key.get()));
  const std::string needle = "node-1";
  auto it = std::search(der.begin(), der.end(), needle.begin(), needle.end());
  ASSERT_NE(it, der.end());
  it[5] = '2';
  auto r = csrs_->Submit(Token(), Client(Pem("CERTIFICATE REQUEST", der)));
  EXPECT_EQ(ReasonOf(r), "csr_signature_invalid");
  EXPECT_EQ(r.status().code(), Status::Code::kVerificationFailed);
  // The audit row byte for byte (the hash chain covers it).
  storage::AuditFilter f;
  f.hostname = "node-1";
  auto rows = store_->ListAudit(f);
  ASSERT_TRUE(rows.ok() && !rows->empty());
  EXPECT_EQ(rows->back().action, "csr_refused");
  EXPECT_EQ(rows->back().detail_json, R"({"kind":"client","message":")" + r.status().message() +
                                          R"(","reason":"csr_signature_invalid"})");
}

TEST_P(CsrServiceTest, TpmKeyProofOverAnotherNonceIsRefused) {
  auto key = NewKey("EC", "P-256");
  CsrSubmission s = Client(ClientCsr(key.get()));
  TpmKeyProof proof;
  proof.public_area = machine_.ak.tpm2b_public();
  proof.certify_info = rackgate::testing::MakeCertifyMessage(machine_.ak.name(), Bytes(32, 7));
  proof.certify_signature = machine_.ak.Sign(*proof.certify_info);
  s.tpm_key = proof;
  auto r = csrs_->Submit(Token(), s);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), Status::Code::kVerificationFailed) << r.status().ToString();
}

TEST_P(CsrServiceTest, RulesRefuseWithTheFirstReason) {
  WithClusterCa();
  auto key = NewKey("EC", "P-256");
  CsrSpec spec;
  spec.subject = {{"O", "system:nodes"}, {"CN", "system:node:someone-else"}};
  auto r = csrs_->Submit(Token(), Client(MakeCsr(key.get(), spec)));
  EXPECT_EQ(ReasonOf(r), "csr_subject_common_name");
  EXPECT_EQ(r.status().code(), Status::Code::kVerificationFailed);
}

TEST_P(CsrServiceTest, UnusableSettingsAndNoSignerWait) {
  auto key = NewKey("EC", "P-256");
  const std::string pem = ClientCsr(key.get());
  // No cluster CA yet: the machine waits for the operator.
  EXPECT_EQ(ReasonOf(csrs_->Submit(Token(), Client(pem))), "signer_unavailable");
  storage::Pool pool{"workers"};
  pool.token_required = false;
  pool.settings_json = "{\"no_such_setting\": 1}";
  ASSERT_TRUE(store_->PutPool(pool, storage::Actor{"test", ""}, now_).ok());
  EXPECT_EQ(ReasonOf(csrs_->Submit(Token(), Client(pem))), "settings_invalid");
}

// --- Renewal (docs/csr.md, "Renewal") ------------------------------------------

std::string CertPem(X509* cert) {
  ossl::BioPtr bio(BIO_new(BIO_s_mem()));
  PEM_write_bio_X509(bio.get(), cert);
  char* data = nullptr;
  long n = BIO_get_mem_data(bio.get(), &data);
  return std::string(data, static_cast<size_t>(n));
}

class RenewalTest : public CsrServiceTest {
 protected:
  static constexpr int64_t kValidity = 3000;
  RenewalTest() {
    options_csr_.client_validity_seconds = kValidity;
    options_csr_.serving_validity_seconds = kValidity;
    csrs_ = std::make_unique<CsrService>(store_.get(), attestation_.get(), options_csr_, &metrics_);
    WithClusterCa();
  }

  // A machine that joined with `key_`: its client certificate.
  CsrIssued Join() {
    auto issued = csrs_->Submit(Token(), Client(ClientCsr(key_.get())));
    if (!issued.ok()) throw std::runtime_error("join: " + issued.status().ToString());
    return std::move(issued).value();
  }
  // Moves the clock to `at` and attests again (a fresh token and nonce).
  std::string Reattest(int64_t at) {
    now_ = at;
    machine_.clock.clock += 1000;
    token_ = Attest(machine_).token;
    return token_;
  }
  Bytes Nonce(const std::string& token) {
    auto bearer = attestation_->Authenticate(token);
    if (!bearer.ok()) throw std::runtime_error("authenticate: " + bearer.status().ToString());
    return bearer->token.nonce;
  }
  static Bytes SpkiHash(const std::string& csr_pem) { return Sha256(csr::test_util::MustParse(csr_pem).spki_der); }
  // A client CSR for `new_key` renewing `current` (held with `current_key`),
  // signed over this token's nonce.
  CsrSubmission Renewal(const std::string& token, EVP_PKEY* current_key, const std::string& current_pem,
                        EVP_PKEY* new_key) {
    CsrSubmission s = Client(ClientCsr(new_key));
    s.renewal = wire::RenewalProof{
        current_pem, SignWith(current_key, wire::RenewalSignedMessage(Nonce(token), SpkiHash(s.csr_pem)))};
    return s;
  }
  size_t AuditRows(const std::string& action) {
    storage::AuditFilter f;
    f.hostname = "node-1";
    f.limit = 10000;
    auto rows = store_->ListAudit(f);
    EXPECT_TRUE(rows.ok());
    return static_cast<size_t>(std::count_if(rows->begin(), rows->end(),
                                             [&](const storage::AuditEntry& e) { return e.action == action; }));
  }
  void SetPoolSettings(const std::string& json) {
    storage::Pool pool{"workers"};
    pool.token_required = false;
    pool.settings_json = json;
    ASSERT_TRUE(store_->PutPool(pool, storage::Actor{"test", ""}, now_).ok());
  }

  Metrics metrics_;
  ossl::PkeyPtr key_ = NewKey("EC", "P-256");
  ossl::PkeyPtr next_ = NewKey("EC", "P-256");
};
RACKGATE_ON_EVERY_STORE(RenewalTest);

TEST_P(RenewalTest, RenewsWhenDueWithOneAuditRowAndKeepsTheClientMark) {
  const CsrIssued first = Join();
  const auto mark = store_->GetMachine("node-1")->client_cert_issued_at;
  ASSERT_TRUE(mark);
  // Two thirds of the validity passed: renewal is open (default 1/3 left).
  const std::string token = Reattest(first.not_after - kValidity / 3 + 10);
  const CsrSubmission renewal = Renewal(token, key_.get(), first.certificate_pem, next_.get());
  auto renewed = csrs_->Submit(token, renewal);
  ASSERT_TRUE(renewed.ok()) << renewed.status().ToString();
  EXPECT_NE(renewed->serial, first.serial);
  EXPECT_EQ(renewed->state, "joined");
  EXPECT_EQ(renewed->not_after, now_ + kValidity);
  // The new certificate carries the new key.
  auto cert = CertFromPem(renewed->certificate_pem);
  ASSERT_TRUE(cert);
  EXPECT_EQ(EVP_PKEY_eq(X509_get0_pubkey(cert.get()), next_.get()), 1);

  EXPECT_EQ(AuditRows("certificate_renewed"), 1u);
  EXPECT_EQ(AuditRows("certificate_issued"), 1u);  // the join only
  EXPECT_EQ(store_->GetMachine("node-1")->client_cert_issued_at, mark);
  EXPECT_EQ(store_->GetCertificate(first.serial)->replaced_by, renewed->serial);
  const std::string metrics = metrics_.Render();
  EXPECT_NE(metrics.find("verdict=\"renewed\""), std::string::npos) << metrics;
  EXPECT_NE(metrics.find("verdict=\"signed\""), std::string::npos) << metrics;

  // The answer was lost: the same renewal again gets the same certificate.
  auto again = csrs_->Submit(token, renewal);
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  EXPECT_EQ(again->serial, renewed->serial);
  EXPECT_EQ(AuditRows("certificate_renewed"), 1u);
  // The replaced certificate renews no more, for any other key.
  auto third = NewKey("EC", "P-256");
  EXPECT_EQ(ReasonOf(csrs_->Submit(token, Renewal(token, key_.get(), first.certificate_pem, third.get()))),
            "renewal_proof_invalid");
  // A reboot that kept the new key asks without a proof: the same certificate.
  auto reboot = csrs_->Submit(token, Client(ClientCsr(next_.get())));
  ASSERT_TRUE(reboot.ok()) << reboot.status().ToString();
  EXPECT_EQ(reboot->serial, renewed->serial);
  // A wiped disk (a new key, no proof) still needs the operator's reset.
  EXPECT_EQ(ReasonOf(csrs_->Submit(token, Client(ClientCsr(third.get())))), "client_cert_already_issued");
  EXPECT_EQ(AuditRows("certificate_renewed"), 1u);
}

TEST_P(RenewalTest, RefusedBeforeItIsDueAndThePoolSetsTheWindow) {
  const CsrIssued first = Join();
  // Half the validity left: not yet (one third by default).
  std::string token = Reattest(first.not_after - kValidity / 2);
  auto early = csrs_->Submit(token, Renewal(token, key_.get(), first.certificate_pem, next_.get()));
  EXPECT_EQ(ReasonOf(early), "renewal_not_due");
  EXPECT_EQ(early.status().code(), Status::Code::kVerificationFailed);
  EXPECT_EQ(AuditRows("certificate_renewed"), 0u);
  // The pool opens renewal at once; GET /v1/machine tells the agent.
  SetPoolSettings("{\"renew_fraction\": 1}");
  EXPECT_EQ(attestation_->WhoAmI(token)->renew_fraction, 1.0);
  auto renewed = csrs_->Submit(token, Renewal(token, key_.get(), first.certificate_pem, next_.get()));
  ASSERT_TRUE(renewed.ok()) << renewed.status().ToString();
  // The setting is checked: (0, 1] only.
  EXPECT_EQ(ReasonOf(ParsePoolSettings("{\"renew_fraction\": 0}")), "settings_invalid");
  EXPECT_EQ(ReasonOf(ParsePoolSettings("{\"renew_fraction\": 1.5}")), "settings_invalid");
  EXPECT_EQ(ReasonOf(ParsePoolSettings("{\"renew_fraction\": \"1\"}")), "settings_invalid");
  EXPECT_DOUBLE_EQ(ParsePoolSettings("{}")->renew_fraction, 1.0 / 3.0);
  EXPECT_DOUBLE_EQ(ParsePoolSettings("{\"renew_fraction\": 0.25}")->renew_fraction, 0.25);
}

// Trust (docs/trust.md): a machine whose latest attestation failed renews
// nothing, even with a token from its earlier good attestation, until it
// attests well again; nor does one whose last good attestation is too old.
TEST_P(RenewalTest, AnUntrustedMachineRenewsNothingUntilItAttestsWell) {
  const CsrIssued first = Join();
  const std::string token = Reattest(first.not_after - kValidity / 3 + 10);
  // The machine's own failed attestation (its TPM answered, with an older
  // reset counter): it is untrusted now, its earlier token still resolves.
  machine_.clock.reset_count -= 1;
  auto c = attestation_->Challenge(machine_.ChallengeRequest(), caller_);
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  ASSERT_EQ(ReasonOf(attestation_->Evidence(machine_.Answer(*c), caller_)), "reset_count_regressed");
  machine_.clock.reset_count += 1;
  auto refused = csrs_->Submit(token, Renewal(token, key_.get(), first.certificate_pem, next_.get()));
  EXPECT_EQ(ReasonOf(refused), "machine_untrusted");
  EXPECT_EQ(AuditRows("certificate_renewed"), 0u);

  const std::string fresh = Reattest(now_ + 1);
  auto renewed = csrs_->Submit(fresh, Renewal(fresh, key_.get(), first.certificate_pem, next_.get()));
  ASSERT_TRUE(renewed.ok()) << renewed.status().ToString();
  EXPECT_EQ(AuditRows("certificate_renewed"), 1u);

  // The pool ages attestations: past the age, no renewal of the new one.
  SetPoolSettings("{\"max_attestation_age_seconds\": 600, \"renew_fraction\": 1}");
  now_ += 601;
  auto key3 = NewKey("EC", "P-256");
  EXPECT_EQ(ReasonOf(csrs_->Submit(fresh, Renewal(fresh, next_.get(), renewed->certificate_pem, key3.get()))),
            "machine_untrusted");
}

TEST_P(RenewalTest, AnExpiredCertificateRenewsAnRsaKeyProvesWithPkcs1) {
  key_ = NewKey("RSA", "2048");
  const CsrIssued first = Join();
  const std::string token = Reattest(first.not_after + 86400);
  auto renewed = csrs_->Submit(token, Renewal(token, key_.get(), first.certificate_pem, next_.get()));
  ASSERT_TRUE(renewed.ok()) << renewed.status().ToString();
  EXPECT_EQ(AuditRows("certificate_renewed"), 1u);
}

TEST_P(RenewalTest, TheProofMustBeTheCurrentKeysOverThisNonceAndThisNewKey) {
  const CsrIssued first = Join();
  const Bytes old_nonce = Nonce(token_);
  const std::string token = Reattest(first.not_after - 100);
  auto other = NewKey("EC", "P-256");
  // Signed by another key.
  EXPECT_EQ(ReasonOf(csrs_->Submit(token, Renewal(token, other.get(), first.certificate_pem, next_.get()))),
            "renewal_proof_invalid");
  // Over another session's nonce (a replayed proof).
  CsrSubmission stale = Renewal(token, key_.get(), first.certificate_pem, next_.get());
  stale.renewal->signature = SignWith(key_.get(), wire::RenewalSignedMessage(old_nonce, SpkiHash(stale.csr_pem)));
  EXPECT_EQ(ReasonOf(csrs_->Submit(token, stale)), "renewal_proof_invalid");
  // Over another new key than the CSR's.
  CsrSubmission swapped = Renewal(token, key_.get(), first.certificate_pem, other.get());
  swapped.csr_pem = ClientCsr(next_.get());
  EXPECT_EQ(ReasonOf(csrs_->Submit(token, swapped)), "renewal_proof_invalid");
  // Not a signature at all.
  CsrSubmission garbage = Renewal(token, key_.get(), first.certificate_pem, next_.get());
  garbage.renewal->signature = Bytes(64, 1);
  EXPECT_EQ(ReasonOf(csrs_->Submit(token, garbage)), "renewal_proof_invalid");
  EXPECT_EQ(AuditRows("certificate_renewed"), 0u);
  // The honest one passes.
  EXPECT_TRUE(csrs_->Submit(token, Renewal(token, key_.get(), first.certificate_pem, next_.get())).ok());
}

TEST_P(RenewalTest, OnlyACertificateIssuedToThisMachineOfThisKindRenews) {
  const CsrIssued first = Join();
  // Another machine joins; its certificate, with its own key's signature.
  SoftMachine other;
  other.clock.clock = machine_.clock.clock;
  Enroll(other, "node-2");
  const std::string other_token = Attest(other).token;
  auto other_key = NewKey("EC", "P-256");
  CsrSpec spec;
  spec.subject = {{"O", "system:nodes"}, {"CN", "system:node:node-2"}};
  auto other_cert = csrs_->Submit(other_token, Client(MakeCsr(other_key.get(), spec)));
  ASSERT_TRUE(other_cert.ok()) << other_cert.status().ToString();

  const std::string token = Reattest(first.not_after - 100);
  auto r = csrs_->Submit(token, Renewal(token, other_key.get(), other_cert->certificate_pem, next_.get()));
  EXPECT_EQ(ReasonOf(r), "renewal_proof_invalid");
  EXPECT_NE(r.status().message().find("another machine"), std::string::npos) << r.status().message();

  // A forgery: this machine's certificate re-signed by its own key, so the
  // serial is ours but the bytes are not; and one with a serial we never
  // issued.
  auto real = CertFromPem(first.certificate_pem);
  ASSERT_TRUE(real);
  ossl::X509Ptr forged(X509_dup(real.get()));
  ASSERT_TRUE(X509_gmtime_adj(X509_getm_notAfter(forged.get()), 10L * 365 * 86400));
  ASSERT_GT(X509_sign(forged.get(), key_.get(), EVP_sha256()), 0);
  r = csrs_->Submit(token, Renewal(token, key_.get(), CertPem(forged.get()), next_.get()));
  EXPECT_EQ(ReasonOf(r), "renewal_proof_invalid");
  EXPECT_NE(r.status().message().find("not the one issued"), std::string::npos) << r.status().message();
  ossl::X509Ptr unknown(X509_dup(real.get()));
  ASSERT_TRUE(ASN1_INTEGER_set(X509_get_serialNumber(unknown.get()), 424242));
  ASSERT_GT(X509_sign(unknown.get(), key_.get(), EVP_sha256()), 0);
  r = csrs_->Submit(token, Renewal(token, key_.get(), CertPem(unknown.get()), next_.get()));
  EXPECT_EQ(ReasonOf(r), "renewal_proof_invalid");
  EXPECT_NE(r.status().message().find("not issued by this appliance"), std::string::npos) << r.status().message();
  // Not a certificate.
  EXPECT_EQ(ReasonOf(csrs_->Submit(token, Renewal(token, key_.get(), "garbage", next_.get()))),
            "renewal_proof_invalid");

  // A client certificate does not renew a serving one.
  CsrSubmission serving = Renewal(token, key_.get(), first.certificate_pem, next_.get());
  CsrSpec serving_spec;
  serving_spec.subject = {{"O", "system:nodes"}, {"CN", "system:node:node-1"}};
  serving_spec.san = "DNS:node-1.example,IP:10.0.0.5";
  serving.signer = "kubernetes.io/kubelet-serving";
  serving.csr_pem = MakeCsr(next_.get(), serving_spec);
  serving.renewal->signature =
      SignWith(key_.get(), wire::RenewalSignedMessage(Nonce(token), SpkiHash(serving.csr_pem)));
  r = csrs_->Submit(token, serving);
  EXPECT_EQ(ReasonOf(r), "renewal_proof_invalid");
  EXPECT_NE(r.status().message().find("not a serving"), std::string::npos) << r.status().message();
  EXPECT_EQ(AuditRows("certificate_renewed"), 0u);
}

TEST_P(RenewalTest, AServingCertificateRenewsWithItsOwnProof) {
  Join();
  CsrSpec spec;
  spec.subject = {{"O", "system:nodes"}, {"CN", "system:node:node-1"}};
  spec.san = "DNS:node-1.example,IP:10.0.0.5";
  CsrSubmission serving;
  serving.signer = "kubernetes.io/kubelet-serving";
  serving.csr_pem = MakeCsr(key_.get(), spec);
  auto first = csrs_->Submit(token_, serving);
  ASSERT_TRUE(first.ok()) << first.status().ToString();
  const std::string token = Reattest(first->not_after - 100);
  CsrSubmission renewal = serving;
  renewal.csr_pem = MakeCsr(next_.get(), spec);
  renewal.renewal = wire::RenewalProof{
      first->certificate_pem,
      SignWith(key_.get(), wire::RenewalSignedMessage(Nonce(token), SpkiHash(renewal.csr_pem)))};
  auto renewed = csrs_->Submit(token, renewal);
  ASSERT_TRUE(renewed.ok()) << renewed.status().ToString();
  EXPECT_EQ(store_->GetCertificate(first->serial)->replaced_by, renewed->serial);
  EXPECT_EQ(AuditRows("certificate_renewed"), 1u);
  // The renewed CSR obeys the first one's rules: a SAN not enrolled.
  spec.san = "DNS:node-2.example";
  renewal.csr_pem = MakeCsr(next_.get(), spec);
  renewal.renewal = wire::RenewalProof{
      renewed->certificate_pem,
      SignWith(next_.get(), wire::RenewalSignedMessage(Nonce(token), SpkiHash(renewal.csr_pem)))};
  SetPoolSettings("{\"renew_fraction\": 1}");
  EXPECT_EQ(ReasonOf(csrs_->Submit(token, renewal)), "csr_san_not_enrolled");
}

TEST_P(RenewalTest, OnlyAJoinedMachineRenews) {
  const CsrIssued first = Join();
  // The operator resets the machine; it attests again but has not joined.
  ASSERT_TRUE(store_->Reset("node-1", storage::Actor{"test", "reset"}, now_, false).ok());
  const std::string token = Reattest(first.not_after - 100);
  ASSERT_EQ(store_->GetMachine("node-1")->state, storage::MachineState::kAttested);
  auto r = csrs_->Submit(token, Renewal(token, key_.get(), first.certificate_pem, next_.get()));
  EXPECT_EQ(ReasonOf(r), "state_conflict");
  EXPECT_EQ(r.status().code(), Status::Code::kInvalidArgument);  // one code (issue 43); 403 by its row
  // Joined again with a new key: the certificate from before the reset is
  // history and renews nothing.
  auto rejoined = csrs_->Submit(token, Client(ClientCsr(next_.get())));
  ASSERT_TRUE(rejoined.ok()) << rejoined.status().ToString();
  auto third = NewKey("EC", "P-256");
  SetPoolSettings("{\"renew_fraction\": 1}");
  r = csrs_->Submit(token, Renewal(token, key_.get(), first.certificate_pem, third.get()));
  EXPECT_EQ(ReasonOf(r), "renewal_proof_invalid");
  EXPECT_NE(r.status().message().find("reset"), std::string::npos) << r.status().message();
  EXPECT_EQ(AuditRows("certificate_renewed"), 0u);
  // A revoked machine has no token at all.
  const CsrSubmission late = Renewal(token, next_.get(), rejoined->certificate_pem, third.get());
  ASSERT_TRUE(store_->Revoke("node-1", storage::Actor{"test", "revoke"}, now_).ok());
  EXPECT_EQ(ReasonOf(csrs_->Submit(token, late)), "token_revoked");
}

// --- One nonce, one use (docs/csr.md) ------------------------------------------

TEST_P(RenewalTest, ACertifyNonceProvesOneCsrOnly) {
  const std::string token = Token();
  const Bytes nonce = Nonce(token);
  auto tpm_key = [] {
    rackgate::testing::SoftKeySpec spec;
    spec.type = attest::kAlgEcc;
    spec.scheme = attest::kAlgNull;
    spec.attributes &= ~attest::kAttrRestricted;
    return rackgate::testing::SoftKey::Generate(spec);
  };
  auto proof = [&](const rackgate::testing::SoftKey& key) {
    TpmKeyProof p;
    p.public_area = key.tpm2b_public();
    p.certify_info = rackgate::testing::MakeCertifyMessage(key.name(), nonce);
    p.certify_signature = machine_.ak.Sign(*p.certify_info);
    return p;
  };
  const auto client_key = tpm_key();
  CsrSubmission client = Client(ClientCsr(client_key.pkey()));
  client.tpm_key = proof(client_key);
  auto issued = csrs_->Submit(token, client);
  ASSERT_TRUE(issued.ok()) << issued.status().ToString();
  EXPECT_TRUE(issued->tpm_resident);
  // The answer was lost: the same CSR and proof get the same certificate.
  auto again = csrs_->Submit(token, client);
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  EXPECT_EQ(again->serial, issued->serial);
  // A second key certified over the same nonce: refused, nothing signed.
  const auto serving_key = tpm_key();
  CsrSpec spec;
  spec.subject = {{"O", "system:nodes"}, {"CN", "system:node:node-1"}};
  spec.san = "DNS:node-1.example";
  CsrSubmission serving;
  serving.signer = "kubernetes.io/kubelet-serving";
  serving.csr_pem = MakeCsr(serving_key.pkey(), spec);
  serving.tpm_key = proof(serving_key);
  auto reused = csrs_->Submit(token, serving);
  EXPECT_EQ(ReasonOf(reused), "certify_nonce_used");
  EXPECT_EQ(reused.status().code(), Status::Code::kVerificationFailed);
  EXPECT_EQ(store_->ListCertificates("node-1")->size(), 1u);
  // Without the proof the serving key is an ordinary file key: signed.
  serving.tpm_key.reset();
  EXPECT_TRUE(csrs_->Submit(token, serving).ok());
  // A fresh attestation brings a fresh nonce.
  const std::string fresh = Reattest(now_ + 60);
  const Bytes fresh_nonce = Nonce(fresh);
  ASSERT_NE(fresh_nonce, nonce);
  TpmKeyProof p;
  p.public_area = serving_key.tpm2b_public();
  p.certify_info = rackgate::testing::MakeCertifyMessage(serving_key.name(), fresh_nonce);
  p.certify_signature = machine_.ak.Sign(*p.certify_info);
  serving.tpm_key = p;
  auto proven = csrs_->Submit(fresh, serving);
  ASSERT_TRUE(proven.ok()) << proven.status().ToString();
  EXPECT_TRUE(proven->tpm_resident);
}

// --- Decision and issuer (docs/csr.md, "Decision and issuer") ---------------------

// An issuer that answers pending until told to issue, then issues with the
// test's cluster CA; it counts its calls and can act just before it answers.
class FakeIssuer : public Issuer {
 public:
  FakeIssuer(const std::string& cert, const std::string& key) : local_(cert, key) {}
  IssueResult Issue(const IssueRequest& request, int64_t now) override {
    ++calls;
    last = request;
    if (before_answer) before_answer();
    if (pending) return IssuePending{30, "fake-" + std::to_string(calls)};
    return local_.Issue(request, now);
  }
  std::string ca_pem() override { return local_.ca_pem(); }
  Status Reload() override { return local_.Reload(); }

  bool pending = true;
  int calls = 0;
  IssueRequest last;
  std::function<void()> before_answer;

 private:
  LocalCaIssuer local_;
};

class IssuerTest : public RenewalTest {
 protected:
  IssuerTest() {
    csrs_ = std::make_unique<CsrService>(store_.get(), attestation_.get(), options_csr_, &metrics_, &issuer_);
  }
  storage::Bearer Bearer() {
    auto bearer = attestation_->Authenticate(Token());
    if (!bearer.ok()) throw std::runtime_error("authenticate: " + bearer.status().ToString());
    return std::move(bearer).value();
  }
  // A TPM-resident key and its TPM2_Certify by the machine's AK over this
  // token's nonce.
  TpmKeyProof CertifiedBy(const rackgate::testing::SoftKey& key) {
    TpmKeyProof p;
    p.public_area = key.tpm2b_public();
    p.certify_info = rackgate::testing::MakeCertifyMessage(key.name(), Nonce(Token()));
    p.certify_signature = machine_.ak.Sign(*p.certify_info);
    return p;
  }
  static rackgate::testing::SoftKey TpmKey() {
    rackgate::testing::SoftKeySpec spec;
    spec.type = attest::kAlgEcc;
    spec.scheme = attest::kAlgNull;
    spec.attributes &= ~attest::kAttrRestricted;
    return rackgate::testing::SoftKey::Generate(spec);
  }

  FakeIssuer issuer_{options_csr_.cluster_ca_certificate, options_csr_.cluster_ca_key};
};
RACKGATE_ON_EVERY_STORE(IssuerTest);

// The decision is a value: it names the machine, kind, profile and record,
// and neither issues, records nor audits anything.
TEST_P(IssuerTest, TheDecisionIsAValueAndRecordsNothing) {
  const storage::Bearer bearer = Bearer();
  const std::string pem = ClientCsr(key_.get());
  CsrVerdict v = csrs_->Decide(bearer, Client(pem));
  ASSERT_EQ(v.outcome, CsrVerdict::Outcome::kApproved) << v.refusal.ToString();
  EXPECT_EQ(v.kind, "client");
  EXPECT_EQ(v.request.machine_id, bearer.machine.id);
  EXPECT_EQ(v.request.hostname, "node-1");
  EXPECT_EQ(v.request.kind, csr::Kind::kClient);
  EXPECT_EQ(v.request.profile.kind, csr::Kind::kClient);
  EXPECT_EQ(v.request.profile.validity_seconds, kValidity);
  EXPECT_EQ(v.request.csr_pem, pem);
  EXPECT_EQ(v.request.usages, (std::vector<std::string>{"digital signature", "client auth"}));
  EXPECT_EQ(v.request.public_key_sha256, SpkiHash(pem));
  EXPECT_EQ(v.record.certificate.machine_id, bearer.machine.id);
  EXPECT_EQ(v.record.certificate.subject, "O=system:nodes, CN=system:node:node-1");
  EXPECT_EQ(v.record.certificate.public_key_sha256, SpkiHash(pem));
  EXPECT_FALSE(v.record.certificate.tpm_resident);
  EXPECT_FALSE(v.record.replaces);
  EXPECT_FALSE(v.record.certify_token_hash);
  EXPECT_EQ(v.decided_at, now_);

  // Refusals are values too, with what they leave behind: a final one is
  // audited by Submit, never by the decision.
  CsrSpec spec;
  spec.subject = {{"O", "system:nodes"}, {"CN", "system:node:someone-else"}};
  v = csrs_->Decide(bearer, Client(MakeCsr(key_.get(), spec)));
  ASSERT_EQ(v.outcome, CsrVerdict::Outcome::kRefused);
  EXPECT_EQ(v.refusal.reason(), "csr_subject_common_name");
  EXPECT_EQ(v.trace, CsrVerdict::Trace::kAudited);
  v = csrs_->Decide(bearer, Status::InvalidArgument("bad_json", "body"));
  EXPECT_EQ(v.refusal.reason(), "bad_json");
  EXPECT_EQ(v.trace, CsrVerdict::Trace::kNone);
  CsrSubmission unknown = Client(pem);
  unknown.signer = "kubernetes.io/legacy-unknown";
  v = csrs_->Decide(bearer, unknown);
  EXPECT_EQ(v.refusal.reason(), "signer_unknown");
  EXPECT_EQ(v.trace, CsrVerdict::Trace::kNone);

  // A proven TPM key: its nonce is consumed by the record, not by the decision.
  const auto tpm_key = TpmKey();
  CsrSubmission proven = Client(ClientCsr(tpm_key.pkey()));
  proven.tpm_key = CertifiedBy(tpm_key);
  v = csrs_->Decide(bearer, proven);
  ASSERT_EQ(v.outcome, CsrVerdict::Outcome::kApproved) << v.refusal.ToString();
  EXPECT_TRUE(v.record.certificate.tpm_resident);
  EXPECT_EQ(v.record.certify_token_hash, bearer.token.hash);

  EXPECT_EQ(issuer_.calls, 0);
  EXPECT_EQ(store_->ListCertificates("node-1")->size(), 0u);
  EXPECT_EQ(AuditRows("csr_refused"), 0u);
  EXPECT_EQ(AuditRows("certificate_issued"), 0u);
  EXPECT_EQ(store_->GetMachine("node-1")->state, storage::MachineState::kAttested);
}

// An issuer that issues later: pending answers csr_issuing and records
// nothing; asked again once it issued, the certificate is recorded once.
TEST_P(IssuerTest, PendingRecordsNothingAndTheCertificateIsRecordedOnceIssued) {
  const auto tpm_key = TpmKey();
  CsrSubmission s = Client(ClientCsr(tpm_key.pkey()));
  s.tpm_key = CertifiedBy(tpm_key);
  for (int i = 0; i < 2; ++i) {
    auto r = csrs_->Submit(Token(), s);
    EXPECT_EQ(ReasonOf(r), "csr_issuing");
    EXPECT_EQ(r.status().code(), Status::Code::kUnsupported);
  }
  EXPECT_EQ(issuer_.calls, 2);
  EXPECT_EQ(issuer_.last.public_key_sha256, SpkiHash(s.csr_pem));
  EXPECT_EQ(store_->ListCertificates("node-1")->size(), 0u);
  EXPECT_EQ(AuditRows("certificate_issued"), 0u);
  EXPECT_EQ(AuditRows("csr_refused"), 0u);  // waited out, not a decision about the machine
  EXPECT_EQ(store_->GetMachine("node-1")->state, storage::MachineState::kAttested);
  EXPECT_FALSE(store_->GetMachine("node-1")->client_cert_issued_at);

  issuer_.pending = false;
  auto issued = csrs_->Submit(Token(), s);
  ASSERT_TRUE(issued.ok()) << issued.status().ToString();
  EXPECT_TRUE(issued->tpm_resident);
  EXPECT_EQ(issued->state, "joined");
  EXPECT_FALSE(issued->ca_pem.empty());
  // Asked again (a lost answer): the recorded certificate, the issuer not asked.
  auto again = csrs_->Submit(Token(), s);
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  EXPECT_EQ(again->serial, issued->serial);
  EXPECT_EQ(issuer_.calls, 3);
  EXPECT_EQ(store_->ListCertificates("node-1")->size(), 1u);
  EXPECT_EQ(AuditRows("certificate_issued"), 1u);
  // The nonce was consumed with the record.
  EXPECT_EQ(store_->ConsumeCertifyNonce(Bearer().token.hash, now_).reason(), "certify_nonce_used");
}

// The record is one transaction: when it is refused (here a racing request
// recorded the machine's one client certificate while the issuer signed),
// the certify nonce is not consumed and no transition or audit row of it
// stays.
TEST_P(IssuerTest, ARefusedRecordLeavesNothingHalfWritten) {
  issuer_.pending = false;
  const storage::Bearer bearer = Bearer();
  bool raced = false;
  issuer_.before_answer = [&] {
    if (raced) return;
    raced = true;
    auto racer = Join();
    EXPECT_EQ(racer.state, "joined");
  };
  const auto tpm_key = TpmKey();
  CsrSubmission s = Client(ClientCsr(tpm_key.pkey()));
  s.tpm_key = CertifiedBy(tpm_key);
  auto r = csrs_->Submit(Token(), s);
  EXPECT_EQ(ReasonOf(r), "client_cert_already_issued");
  EXPECT_EQ(issuer_.calls, 2);
  // The racer's certificate, transition and audit row only.
  EXPECT_EQ(store_->ListCertificates("node-1")->size(), 1u);
  EXPECT_EQ(AuditRows("certificate_issued"), 1u);
  EXPECT_EQ(AuditRows("csr_refused"), 1u);
  storage::AuditFilter f;
  f.hostname = "node-1";
  f.limit = 10000;
  auto rows = store_->ListAudit(f);
  ASSERT_TRUE(rows.ok());
  size_t to_joined = 0;
  for (const auto& e : *rows) to_joined += e.to_state == "joined" && e.from_state != e.to_state ? 1 : 0;
  EXPECT_EQ(to_joined, 1u);
  // The nonce is still unused.
  EXPECT_TRUE(store_->ConsumeCertifyNonce(bearer.token.hash, now_).ok());
}

}  // namespace
}  // namespace rackgate::core::testing
