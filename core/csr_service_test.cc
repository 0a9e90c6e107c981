// The CSR vouching refusal matrix (docs/csr.md, "In order") as tests of the
// core: a soft-TPM machine attests for a real token, then submits CSRs made
// with OpenSSL to CsrService over a real store and a real cluster CA.
#include "core/csr_service.h"

#include <gtest/gtest.h>

#include <algorithm>

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

constexpr char kClientSigner[] = "kubernetes.io/kube-apiserver-client-kubelet";

class CsrServiceTest : public CoreTest {
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

TEST_F(CsrServiceTest, SignsAClientCsrOnceAndSendsTheSameCertificateAgainForTheSameKey) {
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

TEST_F(CsrServiceTest, TokenRefusalsComeFirst) {
  EXPECT_EQ(ReasonOf(csrs_->Submit(std::nullopt, Client("x"))), "token_missing");
  EXPECT_EQ(ReasonOf(csrs_->Submit(std::string("nope"), Client("x"))), "token_unknown");
  // The body is judged only after the token: a bad body with no token is 401.
  EXPECT_EQ(ReasonOf(csrs_->Submit(std::nullopt, Status::InvalidArgument("bad_json", "x"))), "token_missing");
}

TEST_F(CsrServiceTest, FloodLimits) {
  options_csr_.max_in_flight_per_machine = 0;
  csrs_ = std::make_unique<CsrService>(store_.get(), attestation_.get(), options_csr_, nullptr);
  EXPECT_EQ(ReasonOf(csrs_->Submit(Token(), Client("x"))), "csr_flood_machine");
  options_csr_.max_in_flight_per_machine = 2;
  options_csr_.max_in_flight = 0;
  csrs_ = std::make_unique<CsrService>(store_.get(), attestation_.get(), options_csr_, nullptr);
  EXPECT_EQ(ReasonOf(csrs_->Submit(Token(), Client("x"))), "csr_flood");
}

TEST_F(CsrServiceTest, RequestRefusals) {
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
TEST_F(CsrServiceTest, Issue13BrokenSelfSignatureIsARefusal) {
  auto key = NewKey("EC", "P-256");
  auto der = Der(ClientCsr(key.get()));
  const std::string needle = "node-1";
  auto it = std::search(der.begin(), der.end(), needle.begin(), needle.end());
  ASSERT_NE(it, der.end());
  it[5] = '2';
  auto r = csrs_->Submit(Token(), Client(Pem("CERTIFICATE REQUEST", der)));
  EXPECT_EQ(ReasonOf(r), "csr_signature_invalid");
  EXPECT_EQ(r.status().code(), Status::Code::kVerificationFailed);
}

TEST_F(CsrServiceTest, TpmKeyProofOverAnotherNonceIsRefused) {
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

TEST_F(CsrServiceTest, RulesRefuseWithTheFirstReason) {
  WithClusterCa();
  auto key = NewKey("EC", "P-256");
  CsrSpec spec;
  spec.subject = {{"O", "system:nodes"}, {"CN", "system:node:someone-else"}};
  auto r = csrs_->Submit(Token(), Client(MakeCsr(key.get(), spec)));
  EXPECT_EQ(ReasonOf(r), "csr_subject_common_name");
  EXPECT_EQ(r.status().code(), Status::Code::kVerificationFailed);
}

TEST_F(CsrServiceTest, UnusableSettingsAndNoSignerWait) {
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

}  // namespace
}  // namespace rackgate::core::testing
