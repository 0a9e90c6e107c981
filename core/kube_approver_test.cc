// Approver mode (docs/kubernetes.md) as tests of the core: a soft-TPM machine
// attests for a real token and registers its kubelet key (CsrService::
// RegisterKey), then the API server's CSRs are handed to KubeApprover as the
// watcher hands them, over every store. Every reason of a decision has a
// case here; the real API server's cases are in k8s-tests/.
#include "core/kube_approver.h"

#include <gtest/gtest.h>

#include "core/csr_approval_service.h"
#include "core/csr_service.h"
#include "core/secrets.h"
#include "core/testing/core_fixture.h"
#include "core/testing/csr_test_util.h"

namespace rackgate::core::testing {
namespace {

using csr::test_util::CsrSpec;
using csr::test_util::MakeCsr;
using csr::test_util::NewKey;
using Kind = KubeAction::Kind;

constexpr char kClientSigner[] = "kubernetes.io/kube-apiserver-client-kubelet";
constexpr char kServingSigner[] = "kubernetes.io/kubelet-serving";
constexpr char kBootstrapper[] = "system:bootstrap:abcdef";

class KubeApproverTest : public EveryStoreTest {
 protected:
  KubeApproverTest() {
    csrs_ = std::make_unique<CsrService>(store_.get(), attestation_.get(), CsrOptions{}, nullptr);
    csrs_->SetKubeletKeys(store_.get());
    approver_ = NewApprover();
  }
  std::unique_ptr<KubeApprover> NewApprover() {
    return std::make_unique<KubeApprover>(store_.get(), options_, &metrics_, [this] { return now_; });
  }
  void SetPoolSettings(const std::string& json) {
    storage::Pool pool{"workers"};
    pool.token_required = false;
    pool.settings_json = json;
    ASSERT_TRUE(store_->PutPool(pool, storage::Actor{"test", ""}, now_).ok());
  }
  void ApproverPool() { SetPoolSettings(R"({"kubelet_certificates": "approver"})"); }
  std::string Token() {
    if (token_.empty()) {
      Enroll(machine_, "node-1");
      token_ = Attest(machine_).token;
    }
    return token_;
  }
  static std::string ClientPem(EVP_PKEY* key, const std::string& node = "node-1") {
    CsrSpec spec;
    spec.subject = {{"O", "system:nodes"}, {"CN", "system:node:" + node}};
    return MakeCsr(key, spec);
  }
  static std::string ServingPem(EVP_PKEY* key, const std::string& san) {
    CsrSpec spec;
    spec.subject = {{"O", "system:nodes"}, {"CN", "system:node:node-1"}};
    spec.san = san;
    return MakeCsr(key, spec);
  }
  Result<storage::AttestedKey> Register(EVP_PKEY* key) {
    CsrSubmission s;
    s.signer = kClientSigner;
    s.csr_pem = ClientPem(key);
    return csrs_->RegisterKey(Token(), s);
  }
  // The kubelet's bootstrap CSR, filed with a bootstrap token.
  static KubeCsr Join(const std::string& uid, EVP_PKEY* key, const std::string& node = "node-1") {
    KubeCsr c;
    c.uid = uid;
    c.name = "csr-" + uid;
    c.signer_name = kClientSigner;
    c.username = kBootstrapper;
    c.groups = {"system:bootstrappers", "system:bootstrappers:rackgate", "system:authenticated"};
    c.usages = {"digital signature", "key encipherment", "client auth"};
    c.request_pem = ClientPem(key, node);
    return c;
  }
  // A CSR the node files itself, authenticated by its client certificate.
  static KubeCsr AsNode(KubeCsr c) {
    c.username = "system:node:node-1";
    c.groups = {"system:nodes", "system:authenticated"};
    return c;
  }
  static KubeCsr Serving(const std::string& uid, EVP_PKEY* key, const std::string& san) {
    KubeCsr c = AsNode(Join(uid, key));
    c.signer_name = kServingSigner;
    c.usages = {"digital signature", "key encipherment", "server auth"};
    c.request_pem = ServingPem(key, san);
    return c;
  }
  storage::Machine Machine() { return *store_->GetMachine("node-1"); }
  // Joins node-1 through the API: key registered, bootstrap CSR approved.
  void Joined() {
    ApproverPool();
    ASSERT_TRUE(Register(key_.get()).ok());
    ASSERT_EQ(approver_->Handle(Join("u-join", key_.get())).kind, Kind::kApprove);
  }
  static std::string Verdict(const KubeAction& a) {
    return (a.kind == Kind::kApprove ? "approve:" : a.kind == Kind::kDeny ? "deny:" : "none:") + a.reason;
  }

  KubeApproverOptions options_;
  Metrics metrics_;
  std::unique_ptr<CsrService> csrs_;
  std::unique_ptr<KubeApprover> approver_;
  SoftMachine machine_;
  std::string token_;
  ossl::PkeyPtr key_ = NewKey("EC", "P-256");
};
RACKGATE_ON_EVERY_STORE(KubeApproverTest);

// --- The key registration (POST /v1/machine/kubelet-key) -------------------

TEST_P(KubeApproverTest, RegistersTheKubeletKeyOfAnAttestedMachineOnce) {
  if (skip_) GTEST_SKIP() << *skip_;
  ApproverPool();
  auto key = Register(key_.get());
  ASSERT_TRUE(key.ok()) << key.status().ToString();
  EXPECT_EQ(key->kind, "client");
  EXPECT_FALSE(key->tpm_resident);
  auto found = store_->FindAttestedKey(Machine().id, "client", key->public_key_sha256);
  ASSERT_TRUE(found.ok()) << found.status().ToString();
  EXPECT_TRUE(found->used_by_uid.empty());
  // The same key again: the same registration.
  auto again = Register(key_.get());
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  EXPECT_EQ(again->registered_at, key->registered_at);
}

TEST_P(KubeApproverTest, Issue40RegistrationIsUnderTheCsrFloodLimits) {
  if (skip_) GTEST_SKIP() << *skip_;
  ApproverPool();
  Token();
  CsrOptions o;
  o.max_in_flight_per_machine = 0;
  csrs_ = std::make_unique<CsrService>(store_.get(), attestation_.get(), o, nullptr);
  csrs_->SetKubeletKeys(store_.get());
  EXPECT_EQ(ReasonOf(Register(key_.get())), "csr_flood_machine");
  o.max_in_flight_per_machine = 2;
  o.max_in_flight = 0;
  csrs_ = std::make_unique<CsrService>(store_.get(), attestation_.get(), o, nullptr);
  csrs_->SetKubeletKeys(store_.get());
  EXPECT_EQ(ReasonOf(Register(key_.get())), "csr_flood");
}

TEST_P(KubeApproverTest, Issue40OneAttestationRegistersAtMostTwoKeysOfAKind) {
  if (skip_) GTEST_SKIP() << *skip_;
  ApproverPool();
  ossl::PkeyPtr second = NewKey("EC", "P-256"), third = NewKey("EC", "P-256");
  ASSERT_TRUE(Register(key_.get()).ok());
  ASSERT_TRUE(Register(second.get()).ok());
  EXPECT_EQ(ReasonOf(Register(third.get())), "kubelet_key_limit");
  // A lost answer asked again is no new key.
  EXPECT_TRUE(Register(key_.get()).ok());
  // The next attestation may register again; the refused key was never stored.
  now_ += 60;
  token_ = Attest(machine_).token;
  auto later = Register(third.get());
  ASSERT_TRUE(later.ok()) << later.status().ToString();
  EXPECT_EQ(later->registered_at, now_);
}

TEST_P(KubeApproverTest, EachPoolModeRefusesTheOtherModesEndpoint) {
  if (skip_) GTEST_SKIP() << *skip_;
  EXPECT_EQ(ReasonOf(Register(key_.get())), "kubelet_key_signer_mode");
  ApproverPool();
  CsrSubmission s;
  s.signer = kClientSigner;
  s.csr_pem = ClientPem(key_.get());
  EXPECT_EQ(ReasonOf(csrs_->Submit(Token(), s)), "csr_approver_mode");
}

TEST_P(KubeApproverTest, RegistrationNeedsAValidTokenAndTheRules) {
  if (skip_) GTEST_SKIP() << *skip_;
  ApproverPool();
  Token();
  CsrSubmission s;
  s.signer = kClientSigner;
  s.csr_pem = ClientPem(key_.get(), "node-2");  // another node's name
  EXPECT_EQ(ReasonOf(csrs_->RegisterKey(Token(), s)), "csr_subject_common_name");
  EXPECT_EQ(ReasonOf(csrs_->RegisterKey(std::string("not-a-token"), s)), "token_unknown");
  SetPoolSettings(R"({"kubelet_certificates": "approver", "require_tpm_key": true})");
  EXPECT_EQ(ReasonOf(Register(key_.get())), "csr_tpm_key_required");
}

// --- The decisions ------------------------------------------------------------

TEST_P(KubeApproverTest, ApprovesTheJoinOfAnAttestedMachineWithItsRegisteredKey) {
  if (skip_) GTEST_SKIP() << *skip_;
  ApproverPool();
  ASSERT_TRUE(Register(key_.get()).ok());
  const KubeAction a = approver_->Handle(Join("u1", key_.get()));
  EXPECT_EQ(Verdict(a), "approve:RackgateAttestedJoin") << a.message;
  EXPECT_EQ(a.hostname, "node-1");
  EXPECT_EQ(a.purpose, "join");
  EXPECT_EQ(Machine().state, storage::MachineState::kJoined);
  EXPECT_TRUE(Machine().client_cert_issued_at.has_value());
  auto recorded = store_->GetKubeCsr("u1");
  ASSERT_TRUE(recorded.ok()) << recorded.status().ToString();
  EXPECT_EQ(recorded->decision, "approved");
  // A relist, a restart or another appliance: the recorded decision again,
  // never a second one.
  EXPECT_EQ(Verdict(NewApprover()->Handle(Join("u1", key_.get()))), "approve:RackgateAttestedJoin");
  EXPECT_EQ(store_->ListKubeCsrs(false)->size(), 1u);
}

TEST_P(KubeApproverTest, LeavesAloneWhatIsNotItsToDecide) {
  if (skip_) GTEST_SKIP() << *skip_;
  Token();
  KubeCsr other = Join("u1", key_.get());
  other.signer_name = "kubernetes.io/legacy-unknown";
  EXPECT_EQ(Verdict(approver_->Handle(other)), "none:not_kubelet_signer");
  KubeCsr decided = Join("u2", key_.get());
  decided.decided = true;
  EXPECT_EQ(Verdict(approver_->Handle(decided)), "none:decided_in_api");
  EXPECT_EQ(Verdict(approver_->Handle(Join("u3", key_.get(), "stranger"))), "none:node_unknown");
  KubeCsr no_node = Join("u4", key_.get());
  CsrSpec spec;
  spec.subject = {{"O", "system:nodes"}, {"CN", "someone"}};
  no_node.request_pem = MakeCsr(key_.get(), spec);
  EXPECT_EQ(Verdict(approver_->Handle(no_node)), "none:not_node_name");
  // node-1's pool is in signer mode: rackgate signs its certificates itself.
  EXPECT_EQ(Verdict(approver_->Handle(Join("u5", key_.get()))), "none:pool_signer_mode");
  EXPECT_TRUE(store_->ListKubeCsrs(false)->empty());
}

TEST_P(KubeApproverTest, DeniesAKeyTheMachineNeverRegistered) {
  if (skip_) GTEST_SKIP() << *skip_;
  ApproverPool();
  ASSERT_TRUE(Register(key_.get()).ok());
  auto other = NewKey("EC", "P-256");
  const KubeAction a = approver_->Handle(Join("u1", other.get()));
  EXPECT_EQ(Verdict(a), "deny:key_not_attested");
  EXPECT_EQ(Machine().state, storage::MachineState::kAttested);
  EXPECT_EQ(store_->GetKubeCsr("u1")->decision, "denied");
}

TEST_P(KubeApproverTest, ARegisteredKeyJoinsOnceAndAMachineJoinsOnce) {
  if (skip_) GTEST_SKIP() << *skip_;
  ApproverPool();
  auto second = NewKey("EC", "P-256");
  ASSERT_TRUE(Register(key_.get()).ok());
  ASSERT_TRUE(Register(second.get()).ok());
  ASSERT_EQ(approver_->Handle(Join("u1", key_.get())).kind, Kind::kApprove);
  EXPECT_EQ(Verdict(approver_->Handle(Join("u2", key_.get()))), "deny:key_already_used");
  EXPECT_EQ(Verdict(approver_->Handle(Join("u3", second.get()))), "deny:client_cert_already_issued");
}

TEST_P(KubeApproverTest, DeniesASoftwareKeyWhenThePoolNowRequiresATpmKey) {
  if (skip_) GTEST_SKIP() << *skip_;
  ApproverPool();
  ASSERT_TRUE(Register(key_.get()).ok());
  // The pool asks for TPM-resident keys after the (software) key was
  // registered: the kubelet's CSR of it is not approved.
  SetPoolSettings(R"({"kubelet_certificates": "approver", "require_tpm_key": true})");
  EXPECT_EQ(Verdict(approver_->Handle(Join("u1", key_.get()))), "deny:csr_tpm_key_required");
  EXPECT_EQ(Machine().state, storage::MachineState::kAttested);
}

TEST_P(KubeApproverTest, DeniesARequesterThatIsNeitherTheNodeNorABootstrapper) {
  if (skip_) GTEST_SKIP() << *skip_;
  ApproverPool();
  ASSERT_TRUE(Register(key_.get()).ok());
  KubeCsr c = Join("u1", key_.get());
  c.username = "system:serviceaccount:default:intruder";
  c.groups = {"system:serviceaccounts", "system:authenticated"};
  EXPECT_EQ(Verdict(approver_->Handle(c)), "deny:csr_requester_not_allowed");
  // Another node cannot ask for node-1's serving certificate.
  KubeCsr s = Serving("u2", key_.get(), "DNS:node-1.example");
  s.username = "system:node:node-2";
  EXPECT_EQ(Verdict(approver_->Handle(s)), "deny:csr_requester_not_allowed");
}

TEST_P(KubeApproverTest, DeniesAnUnreadableRequestThatClaimsANode) {
  if (skip_) GTEST_SKIP() << *skip_;
  Joined();
  KubeCsr c = AsNode(Join("u1", key_.get()));
  c.request_pem = "-----BEGIN CERTIFICATE REQUEST-----\nAAAA\n-----END CERTIFICATE REQUEST-----\n";
  EXPECT_EQ(Verdict(approver_->Handle(c)), "deny:csr_malformed");
}

TEST_P(KubeApproverTest, ApprovesRotationAndServingWhileTheMachineAttests) {
  if (skip_) GTEST_SKIP() << *skip_;
  Joined();
  auto rotated = NewKey("EC", "P-256");
  EXPECT_EQ(Verdict(approver_->Handle(AsNode(Join("u-rot", rotated.get())))), "approve:RackgateAttestedRotation");
  EXPECT_EQ(Verdict(approver_->Handle(Serving("u-srv", rotated.get(), "DNS:node-1.example,IP:10.0.0.5"))),
            "approve:RackgateAttestedServing");
  // Names the enrollment does not have.
  EXPECT_EQ(Verdict(approver_->Handle(Serving("u-bad", rotated.get(), "DNS:node-1.example,IP:10.9.9.9"))),
            "deny:csr_san_not_enrolled");
  // Past the approver's maximum attestation age (the pool sets none): the
  // kubelet's rotation waits for a fresh attestation.
  now_ += options_.max_attestation_age_seconds + 1;
  EXPECT_EQ(Verdict(approver_->Handle(AsNode(Join("u-old", rotated.get())))), "deny:csr_window_expired");
}

TEST_P(KubeApproverTest, RefusesRotationOfAnUntrustedMachine) {
  if (skip_) GTEST_SKIP() << *skip_;
  Joined();
  SetPoolSettings(R"({"kubelet_certificates": "approver", "max_attestation_age_seconds": 600})");
  now_ += 601;
  auto rotated = NewKey("EC", "P-256");
  const KubeAction a = approver_->Handle(AsNode(Join("u-rot", rotated.get())));
  EXPECT_EQ(Verdict(a), "deny:machine_untrusted");
  EXPECT_NE(a.message.find("max_attestation_age_seconds"), std::string::npos) << a.message;
}

TEST_P(KubeApproverTest, ANewNodesCsrComesWithinTheWindowAfterItsAttestation) {
  if (skip_) GTEST_SKIP() << *skip_;
  ApproverPool();
  ASSERT_TRUE(Register(key_.get()).ok());
  now_ += options_.client_window_seconds + 1;
  EXPECT_EQ(Verdict(approver_->Handle(Join("u1", key_.get()))), "deny:csr_window_expired");
}

TEST_P(KubeApproverTest, DeniesARequestWhoseSelfSignatureUsesSha1) {
  if (skip_) GTEST_SKIP() << *skip_;
  Joined();
  KubeCsr c = AsNode(Join("u1", key_.get()));
  CsrSpec spec;
  spec.subject = {{"O", "system:nodes"}, {"CN", "system:node:node-1"}};
  spec.md = EVP_sha1();
  c.request_pem = MakeCsr(key_.get(), spec);
  EXPECT_EQ(Verdict(approver_->Handle(c)), "deny:csr_signature_invalid");
}

TEST_P(KubeApproverTest, AManualPoolsServingCsrWaitsForTheOperatorWhoseDecisionIsCarriedOut) {
  if (skip_) GTEST_SKIP() << *skip_;
  Joined();
  SetPoolSettings(R"({"kubelet_certificates": "approver", "csr_approval": {"serving": "manual"}})");
  auto key = NewKey("EC", "P-256");
  const KubeCsr c = Serving("u-srv", key.get(), "DNS:node-1.example");
  const KubeAction waiting = approver_->Handle(c);
  EXPECT_EQ(Verdict(waiting), "none:RackgateAttestedServing");
  EXPECT_TRUE(waiting.waiting);
  EXPECT_EQ(store_->GetKubeCsr("u-srv")->decision, "waiting");
  // Seen again (a resync): still waiting, nothing decided twice.
  EXPECT_EQ(Verdict(approver_->Handle(c)), "none:waiting_for_operator");
  // `rackgatectl csr list` shows it; `csr approve NAME` decides it.
  CsrApprovalService service(store_.get(), store_.get(), [this] { return now_; });
  auto listed = service.List(false, 100);
  ASSERT_TRUE(listed.ok()) << listed.status().ToString();
  ASSERT_EQ(listed->size(), 1u);
  EXPECT_EQ((*listed)[0].source, "kubernetes");
  EXPECT_EQ((*listed)[0].name, "csr-u-srv");
  EXPECT_EQ((*listed)[0].purpose, "serving");
  EXPECT_EQ(ReasonOf(service.Decide("csr-nope", true, "", storage::Actor{"alice", ""})), "csr_request_unknown");
  auto approved = service.Decide("csr-u-srv", true, "", storage::Actor{"alice", ""});
  ASSERT_TRUE(approved.ok()) << approved.status().ToString();
  EXPECT_EQ(approved->state, "approved");
  EXPECT_EQ(Verdict(approver_->Handle(c)), "approve:RackgateAttestedServing");
  // A rotation in a pool whose renewals are manual waits too.
  SetPoolSettings(R"({"kubelet_certificates": "approver", "csr_approval": {"renewal": "manual"}})");
  EXPECT_TRUE(approver_->Handle(AsNode(Join("u-rot", key.get()))).waiting);
}

// Issue 40, item 2: every action names the object it was decided for, so
// the watcher writes it to that uid only.
TEST_P(KubeApproverTest, Issue40EveryActionNamesTheUidItWasDecidedFor) {
  if (skip_) GTEST_SKIP() << *skip_;
  ApproverPool();
  ASSERT_TRUE(Register(key_.get()).ok());
  const KubeAction a = approver_->Handle(Join("u-first", key_.get()));
  EXPECT_EQ(Verdict(a), "approve:RackgateAttestedJoin");
  EXPECT_EQ(a.uid, "u-first");
  // The same name, re-created (a new uid) with a key nobody attested: a new
  // object, decided from scratch, never the old decision.
  auto other = NewKey("EC", "P-256");
  KubeCsr swapped = Join("u-second", other.get());
  swapped.name = "csr-u-first";
  const KubeAction b = approver_->Handle(swapped);
  EXPECT_EQ(Verdict(b), "deny:key_not_attested");
  EXPECT_EQ(b.uid, "u-second");
  EXPECT_EQ(store_->GetKubeCsr("u-second")->decision, "denied");
  EXPECT_EQ(store_->GetKubeCsr("u-first")->decision, "approved");
}

// Issue 40, item 3: after `rackgatectl reset`, a rotation or serving CSR as
// system:node:<name> (which the old owner's certificate still
// authenticates) is denied until the new owner has joined.
TEST_P(KubeApproverTest, Issue40AResetEndsRotationAndServingUntilTheNewOwnerJoined) {
  if (skip_) GTEST_SKIP() << *skip_;
  Joined();
  auto old_owner = NewKey("EC", "P-256");
  EXPECT_EQ(Verdict(approver_->Handle(AsNode(Join("u-rot1", old_owner.get())))), "approve:RackgateAttestedRotation");
  ASSERT_TRUE(store_->Reset("node-1", storage::Actor{"alice", "re-provision"}, now_, false).ok());
  // Not attested since: the rule, before trust.
  const KubeAction before = approver_->Handle(AsNode(Join("u-rot2", old_owner.get())));
  EXPECT_EQ(Verdict(before), "deny:machine_not_joined");
  EXPECT_NE(before.message.find("joined in its current epoch"), std::string::npos) << before.message;
  // The new owner attested (state attested, trusted): still denied, rotation
  // and serving alike.
  token_.clear();
  token_ = Attest(machine_).token;
  ASSERT_EQ(Machine().state, storage::MachineState::kAttested);
  EXPECT_EQ(Verdict(approver_->Handle(AsNode(Join("u-rot3", old_owner.get())))), "deny:machine_not_joined");
  EXPECT_EQ(Verdict(approver_->Handle(Serving("u-srv1", old_owner.get(), "DNS:node-1.example"))),
            "deny:machine_not_joined");
  // The new owner joins with its registered key; rotations are approved
  // again (the API server cannot say whose certificate asks: docs/kubernetes.md).
  auto fresh = NewKey("EC", "P-256");
  ASSERT_TRUE(Register(fresh.get()).ok());
  EXPECT_EQ(Verdict(approver_->Handle(Join("u-join2", fresh.get()))), "approve:RackgateAttestedJoin");
  EXPECT_EQ(Verdict(approver_->Handle(AsNode(Join("u-rot4", fresh.get())))), "approve:RackgateAttestedRotation");
}

// An approval recorded before a reset and never written to the API server
// (it was away) is not carried out in the machine's new epoch.
TEST_P(KubeApproverTest, Issue40AnApprovalOfAnEarlierEpochIsNotWrittenAfterAReset) {
  if (skip_) GTEST_SKIP() << *skip_;
  Joined();
  auto rotated = NewKey("EC", "P-256");
  const KubeCsr rot = AsNode(Join("u-rot", rotated.get()));
  ASSERT_EQ(Verdict(approver_->Handle(rot)), "approve:RackgateAttestedRotation");
  // The join's own approval, seen again (a resync before it was written).
  EXPECT_EQ(Verdict(approver_->Handle(Join("u-join", key_.get()))), "approve:RackgateAttestedJoin");
  now_ += 10;
  ASSERT_TRUE(store_->Reset("node-1", storage::Actor{"alice", "re-provision"}, now_, false).ok());
  EXPECT_EQ(Verdict(approver_->Handle(rot)), "none:epoch_ended");
  EXPECT_EQ(Verdict(approver_->Handle(Join("u-join", key_.get()))), "none:epoch_ended");
  // ... nor after the new owner joined.
  token_.clear();
  token_ = Attest(machine_).token;
  auto fresh = NewKey("EC", "P-256");
  ASSERT_TRUE(Register(fresh.get()).ok());
  now_ += 10;
  ASSERT_EQ(Verdict(approver_->Handle(Join("u-join2", fresh.get()))), "approve:RackgateAttestedJoin");
  EXPECT_EQ(Verdict(approver_->Handle(rot)), "none:epoch_ended");
  EXPECT_EQ(Verdict(approver_->Handle(Join("u-join2", fresh.get()))), "approve:RackgateAttestedJoin");
}

// A serving CSR that waits for an operator when its machine is reset is
// denied (machine_reset), and the denial is what the watcher writes.
TEST_P(KubeApproverTest, Issue40AResetDeniesAWaitingCsr) {
  if (skip_) GTEST_SKIP() << *skip_;
  Joined();
  SetPoolSettings(R"({"kubelet_certificates": "approver", "csr_approval": {"serving": "manual"}})");
  auto key = NewKey("EC", "P-256");
  const KubeCsr c = Serving("u-srv", key.get(), "DNS:node-1.example");
  ASSERT_TRUE(approver_->Handle(c).waiting);
  ASSERT_TRUE(store_->Reset("node-1", storage::Actor{"alice", "re-provision"}, now_, false).ok());
  EXPECT_EQ(Verdict(approver_->Handle(c)), "deny:machine_reset");
  CsrApprovalService service(store_.get(), store_.get(), [this] { return now_; });
  EXPECT_EQ(ReasonOf(service.Decide("csr-u-srv", true, "", storage::Actor{"alice", ""})), "csr_request_unknown");
}

// Issue 40, item 10: `csr approve NAME` when the name was reused in the API
// server (two waiting objects of one name) picks neither silently.
TEST_P(KubeApproverTest, Issue40ApprovingAReusedNameNeedsTheUid) {
  if (skip_) GTEST_SKIP() << *skip_;
  Joined();
  SetPoolSettings(R"({"kubelet_certificates": "approver", "csr_approval": {"serving": "manual"}})");
  auto key = NewKey("EC", "P-256");
  KubeCsr first = Serving("u-old", key.get(), "DNS:node-1.example");
  first.name = "csr-reused";
  ASSERT_TRUE(approver_->Handle(first).waiting);
  now_ += 5;
  KubeCsr second = Serving("u-new", key.get(), "DNS:node-1.example");
  second.name = "csr-reused";
  ASSERT_TRUE(approver_->Handle(second).waiting);
  CsrApprovalService service(store_.get(), store_.get(), [this] { return now_; });
  auto listed = service.List(false, 100);
  ASSERT_TRUE(listed.ok());
  ASSERT_EQ(listed->size(), 2u);
  EXPECT_EQ((*listed)[0].uid, "u-old");
  const storage::Actor alice{"alice", ""};
  auto ambiguous = service.Decide("csr-reused", true, "", alice);
  EXPECT_EQ(ReasonOf(ambiguous), "csr_name_ambiguous");
  EXPECT_NE(ambiguous.status().message().find("u-old, u-new"), std::string::npos) << ambiguous.status().message();
  EXPECT_NE(ambiguous.status().message().find("--uid"), std::string::npos) << ambiguous.status().message();
  EXPECT_EQ(store_->GetKubeCsr("u-old")->decision, "waiting");
  EXPECT_EQ(store_->GetKubeCsr("u-new")->decision, "waiting");
  EXPECT_EQ(ReasonOf(service.Decide("csr-reused", true, "", alice, "u-gone")), "csr_request_unknown");
  auto approved = service.Decide("csr-reused", true, "", alice, "u-new");
  ASSERT_TRUE(approved.ok()) << approved.status().ToString();
  EXPECT_EQ(approved->uid, "u-new");
  EXPECT_EQ(store_->GetKubeCsr("u-new")->decision, "approved");
  EXPECT_EQ(store_->GetKubeCsr("u-old")->decision, "waiting");
  EXPECT_EQ(Verdict(approver_->Handle(first)), "none:waiting_for_operator");
  EXPECT_EQ(Verdict(approver_->Handle(second)), "approve:RackgateAttestedServing");
  // One left of that name: the name alone is enough again.
  auto denied = service.Decide("csr-reused", false, "stale object", alice);
  ASSERT_TRUE(denied.ok()) << denied.status().ToString();
  EXPECT_EQ(denied->uid, "u-old");
}

TEST_P(KubeApproverTest, CountsEveryVerdict) {
  if (skip_) GTEST_SKIP() << *skip_;
  Joined();
  const std::string text = metrics_.Render();
  EXPECT_NE(text.find("rackgate_kubernetes_csr_total{"), std::string::npos) << text;
  EXPECT_NE(text.find("verdict=\"approved\""), std::string::npos) << text;
}

}  // namespace
}  // namespace rackgate::core::testing
