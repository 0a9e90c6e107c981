// Manual CSR approval (docs/csr.md, "Manual approval") through CsrService: a
// soft-TPM machine attests for a real token and submits real CSRs; the pool's
// csr_approval makes them wait, and the store's decisions release or end them.
#include "core/csr_approval.h"

#include <gtest/gtest.h>

#include <string>

#include "core/csr_service.h"
#include "core/signer.h"
#include "core/testing/core_fixture.h"
#include "core/testing/csr_test_util.h"

namespace rackgate::core::testing {
namespace {

using csr::test_util::CsrSpec;
using csr::test_util::MakeCsr;
using csr::test_util::NewKey;

constexpr char kClientSigner[] = "kubernetes.io/kube-apiserver-client-kubelet";
constexpr char kServingSigner[] = "kubernetes.io/kubelet-serving";

// Each test runs on the fake store and on the environment's real backend.
class CsrApprovalTest : public EveryStoreTest {
 protected:
  CsrApprovalTest() {
    options_csr_.cluster_ca_certificate = dir_.File("ca.crt");
    options_csr_.cluster_ca_key = dir_.File("ca.key");
    EXPECT_TRUE(csr::GenerateClusterCa("test cluster CA", 3650, options_csr_.cluster_ca_certificate,
                                       options_csr_.cluster_ca_key)
                    .ok());
    csrs_ = std::make_unique<CsrService>(store_.get(), attestation_.get(), options_csr_, nullptr);
  }
  void Settings(const std::string& settings_json) {
    auto pool = store_->GetPool("workers");
    ASSERT_TRUE(pool.ok());
    pool->settings_json = settings_json;
    ASSERT_TRUE(store_->PutPool(*pool, storage::Actor{"test", ""}, now_).ok());
  }
  static CsrSubmission Submission(const char* signer, const std::string& pem) {
    CsrSubmission s;
    s.signer = signer;
    s.csr_pem = pem;
    return s;
  }
  static std::string ClientCsr(EVP_PKEY* key) {
    CsrSpec spec;
    spec.subject = {{"O", "system:nodes"}, {"CN", "system:node:node-1"}};
    return MakeCsr(key, spec);
  }
  static std::string ServingCsr(EVP_PKEY* key) {
    CsrSpec spec;
    spec.subject = {{"O", "system:nodes"}, {"CN", "system:node:node-1"}};
    spec.san = "DNS:node-1.example,IP:10.0.0.5";
    return MakeCsr(key, spec);
  }
  std::string Token() {
    if (token_.empty()) {
      machine_id_ = Enroll(machine_, "node-1").id;
      token_ = Attest(machine_).token;
    }
    return token_;
  }
  Result<CsrIssued> Client(EVP_PKEY* key) { return csrs_->Submit(Token(), Submission(kClientSigner, ClientCsr(key))); }
  size_t Count(const std::string& action) {
    storage::AuditFilter f;
    f.limit = 10000;
    auto entries = store_->ListAudit(f);
    EXPECT_TRUE(entries.ok());
    size_t n = 0;
    for (const auto& e : *entries) n += e.action == action ? 1 : 0;
    return n;
  }
  std::vector<storage::CsrApprovalRequest> Waiting() { return *store_->ListCsrRequests(false); }
  storage::Actor Op() { return storage::Actor{"alice", "checked the rack plan"}; }

  CsrOptions options_csr_;
  std::unique_ptr<CsrService> csrs_;
  SoftMachine machine_;
  std::string token_;
  int64_t machine_id_ = 0;
};
RACKGATE_ON_EVERY_STORE(CsrApprovalTest);

TEST_P(CsrApprovalTest, AManualPoolsClientCsrWaitsAndTheSameKeyFindsTheSameRequest) {
  Settings(R"({"csr_approval": {"client": "manual"}})");
  auto key = NewKey("EC", "P-256");
  auto r = Client(key.get());
  EXPECT_EQ(ReasonOf(r), "csr_awaiting_approval");
  ASSERT_EQ(Waiting().size(), 1u);
  const auto waiting = Waiting()[0];
  EXPECT_EQ(waiting.hostname, "node-1");
  EXPECT_EQ(waiting.kind, "client");
  EXPECT_FALSE(waiting.tpm_resident);
  EXPECT_NE(r.status().message().find("csr approve " + std::to_string(waiting.id)), std::string::npos);
  EXPECT_EQ(Count("csr_waiting"), 1u);
  // The agent asks again, after attesting again, with the same key.
  now_ += 30;
  token_.clear();
  token_ = Attest(machine_).token;
  EXPECT_EQ(ReasonOf(Client(key.get())), "csr_awaiting_approval");
  ASSERT_EQ(Waiting().size(), 1u);
  EXPECT_EQ(Waiting()[0].id, waiting.id);
  EXPECT_EQ(Count("csr_waiting"), 1u);
  EXPECT_EQ(Count("csr_refused"), 0u);  // waiting is not a refusal
  EXPECT_EQ(store_->GetMachineById(machine_id_)->state, storage::MachineState::kAttested);
}

TEST_P(CsrApprovalTest, ApprovedIsSignedAtTheNextSubmission) {
  Settings(R"({"csr_approval": {"client": "manual"}})");
  auto key = NewKey("EC", "P-256");
  ASSERT_EQ(ReasonOf(Client(key.get())), "csr_awaiting_approval");
  ASSERT_TRUE(store_->DecideCsrRequest(Waiting()[0].id, true, "", Op(), now_).ok());
  EXPECT_EQ(Count("csr_approved"), 1u);
  auto issued = Client(key.get());
  ASSERT_TRUE(issued.ok()) << issued.status().ToString();
  EXPECT_EQ(issued->state, "joined");
  EXPECT_EQ(Count("certificate_issued"), 1u);
  // Another key is not approved by the first one's approval.
  auto other = NewKey("EC", "P-256");
  EXPECT_EQ(ReasonOf(Client(other.get())), "client_cert_already_issued");
}

TEST_P(CsrApprovalTest, TheRulesAreCheckedAgainWhenTheApprovedCsrComesBack) {
  Settings(R"({"csr_approval": {"client": "manual"}})");
  auto key = NewKey("EC", "P-256");
  ASSERT_EQ(ReasonOf(Client(key.get())), "csr_awaiting_approval");
  ASSERT_TRUE(store_->DecideCsrRequest(Waiting()[0].id, true, "", Op(), now_).ok());
  // Between approval and signing the pool came to require TPM-resident keys:
  // the approval does not bypass the rule.
  Settings(R"({"csr_approval": {"client": "manual"}, "require_tpm_key": true})");
  EXPECT_EQ(ReasonOf(Client(key.get())), "csr_tpm_key_required");
  EXPECT_EQ(Count("certificate_issued"), 0u);
  Settings(R"({"csr_approval": {"client": "manual"}})");
  EXPECT_TRUE(Client(key.get()).ok());
}

TEST_P(CsrApprovalTest, DeniedIsFinalWithTheOperatorsReason) {
  Settings(R"({"csr_approval": {"client": "manual"}})");
  auto key = NewKey("EC", "P-256");
  ASSERT_EQ(ReasonOf(Client(key.get())), "csr_awaiting_approval");
  const int64_t id = Waiting()[0].id;
  ASSERT_TRUE(store_->DecideCsrRequest(id, false, "unknown chassis", Op(), now_).ok());
  EXPECT_EQ(Count("csr_denied"), 1u);
  for (int i = 0; i < 2; ++i) {
    auto r = Client(key.get());
    EXPECT_EQ(ReasonOf(r), "csr_denied");
    EXPECT_EQ(r.status().code(), Status::Code::kVerificationFailed);
    EXPECT_NE(r.status().message().find("unknown chassis"), std::string::npos) << r.status().message();
  }
  EXPECT_EQ(ReasonOf(store_->DecideCsrRequest(id, true, "", Op(), now_)), "state_conflict");
  EXPECT_TRUE(Waiting().empty());
  EXPECT_EQ(Count("certificate_issued"), 0u);
}

TEST_P(CsrApprovalTest, NewKeysAreBoundedPerMachine) {
  Settings(R"({"csr_approval": {"client": "manual"}})");
  const int bound = storage::CsrQueueLimits{}.max_waiting_per_machine;
  for (int i = 0; i < bound; ++i) {
    auto key = NewKey("EC", "P-256");
    EXPECT_EQ(ReasonOf(Client(key.get())), "csr_awaiting_approval") << i;
  }
  auto flood = NewKey("EC", "P-256");
  EXPECT_EQ(ReasonOf(Client(flood.get())), "csr_flood_machine");
  EXPECT_EQ(Waiting().size(), static_cast<size_t>(bound));
  EXPECT_EQ(Count("csr_waiting"), static_cast<size_t>(bound));
}

TEST_P(CsrApprovalTest, TheServingSettingMakesServingCsrsWaitAndLeavesClientsAutomatic) {
  Settings(R"({"csr_approval": {"client": "auto", "serving": "manual"}})");
  auto client = NewKey("EC", "P-256");
  ASSERT_TRUE(Client(client.get()).ok());
  auto serving = NewKey("EC", "P-256");
  auto submit = [&] { return csrs_->Submit(Token(), Submission(kServingSigner, ServingCsr(serving.get()))); };
  EXPECT_EQ(ReasonOf(submit()), "csr_awaiting_approval");
  ASSERT_EQ(Waiting().size(), 1u);
  EXPECT_EQ(Waiting()[0].kind, "serving");
  ASSERT_TRUE(store_->DecideCsrRequest(Waiting()[0].id, true, "", Op(), now_).ok());
  auto issued = submit();
  ASSERT_TRUE(issued.ok()) << issued.status().ToString();
}

TEST_P(CsrApprovalTest, AutomaticByDefault) {
  auto key = NewKey("EC", "P-256");
  EXPECT_TRUE(Client(key.get()).ok());
  EXPECT_TRUE(Waiting().empty());
  EXPECT_EQ(Count("csr_waiting"), 0u);
}

TEST(CsrApprovalDecision, RenewalsFollowTheirOwnSetting) {
  PoolSettings s;
  s.client_csr_manual = true;
  CsrForApproval c;
  c.kind = "client";
  EXPECT_TRUE(NeedsApproval(s, c));
  c.renewal = true;
  EXPECT_FALSE(NeedsApproval(s, c));
  s.renewal_csr_manual = true;
  EXPECT_TRUE(NeedsApproval(s, c));
  c = CsrForApproval{};
  c.kind = "serving";
  EXPECT_FALSE(NeedsApproval(s, c));
  s.serving_csr_manual = true;
  EXPECT_TRUE(NeedsApproval(s, c));
}

TEST(CsrApprovalSettings, ParsedAndRefused) {
  auto s = ParsePoolSettings(R"({"csr_approval": {"client": "manual", "serving": "auto", "renewal": "manual"}})");
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  EXPECT_TRUE(s->client_csr_manual);
  EXPECT_FALSE(s->serving_csr_manual);
  EXPECT_TRUE(s->renewal_csr_manual);
  auto d = ParsePoolSettings("{}");
  ASSERT_TRUE(d.ok());
  EXPECT_FALSE(d->client_csr_manual || d->serving_csr_manual || d->renewal_csr_manual);
  for (const char* bad : {R"({"csr_approval": "manual"})", R"({"csr_approval": {"client": "yes"}})",
                          R"({"csr_approval": {"client": true}})", R"({"csr_approval": {"peer": "manual"}})"}) {
    auto r = ParsePoolSettings(bad);
    EXPECT_FALSE(r.ok()) << bad;
    if (!r.ok()) {
      EXPECT_EQ(r.status().reason(), "settings_invalid") << bad;
    }
  }
}

}  // namespace
}  // namespace rackgate::core::testing
