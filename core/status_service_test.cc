// The admin API's status (core/status_service.h) on every store: the
// machines by state, a recorded failure and the untrust it brings, an
// observing pool, an unknown EK that knocked and evidence refused before
// proof of the TPM, each within the hour shown and gone after it. The
// service refuses only with the store's refusals, which no store here makes.
#include "core/status_service.h"

#include <gtest/gtest.h>
#include <openssl/rand.h>

#include <string>

#include "base/hex.h"
#include "core/signer.h"
#include "core/testing/core_fixture.h"

namespace rackgate::core::testing {
namespace {

class StatusServiceTest : public EveryStoreTest {
 protected:
  Result<wire::StatusView> Report() {
    return StatusService({store_.get(), store_.get(), store_.get(), store_.get()}, attestation_.get()).Report();
  }
  // Evidence for `victim`'s EK from a caller without its TPM: refused
  // before proof (activation_failed).
  void RefuseBeforeProof(const SoftMachine& victim) {
    SoftMachine attacker;
    wire::ChallengeRequest req = attacker.ChallengeRequest();
    req.ek_public = victim.ek.tpm2b_public();
    auto c = attestation_->Challenge(req, {"198.51.100.66:4711", {}});
    ASSERT_TRUE(c.ok()) << c.status().ToString();
    wire::EvidenceRequest e;
    e.session = c->session;
    e.secret = Bytes(32);
    ASSERT_EQ(RAND_bytes(e.secret.data(), static_cast<int>(e.secret.size())), 1);
    e.quote = attacker.QuoteMessage(*c);
    e.signature = attacker.ak.Sign(e.quote);
    e.pcrs = attest::PcrValues{};
    for (const auto& sel : c->pcr_selection) {
      for (uint32_t pcr : sel.pcrs) e.pcrs[sel.hash_alg][pcr] = attacker.pcrs.at(sel.hash_alg).at(pcr);
    }
    ASSERT_EQ(ReasonOf(attestation_->Evidence(e, {"198.51.100.66:4711", {}})), "activation_failed");
  }
};

TEST_P(StatusServiceTest, AnEmptyApplianceShowsEveryStateAtZero) {
  auto status = Report();
  ASSERT_TRUE(status.ok()) << status.status().ToString();
  ASSERT_FALSE(status->machines_by_state.empty());
  for (const auto& [state, n] : status->machines_by_state) EXPECT_EQ(n, 0) << state;
  EXPECT_TRUE(status->recent_failures.empty());
  EXPECT_EQ(status->machines_untrusted, 0);
  EXPECT_TRUE(status->pools_observing_boot_policy.empty());
  EXPECT_TRUE(status->unknown_eks.empty());
  EXPECT_TRUE(status->anonymous_refusals.empty());
  EXPECT_EQ(status->anonymous_refusals_total, 0u);
}

// Issue 44: a CA rotation in progress shows, with its stage and since when.
TEST_P(StatusServiceTest, ShowsTheApplianceCaRotation) {
  EXPECT_EQ(Report()->appliance_ca_rotation, "");
  storage::CaRotation r;
  r.current_pem = "current";
  r.current_sha256 = std::string(64, 'a');
  r.next_pem = "next";
  r.next_sha256 = std::string(64, 'b');
  ASSERT_TRUE(store_->PrepareCaRotation(r, "{}", {"test", ""}, now_).ok());
  auto status = Report();
  ASSERT_TRUE(status.ok()) << status.status().ToString();
  EXPECT_EQ(status->appliance_ca_rotation, "prepared");
  EXPECT_EQ(status->appliance_ca_rotation_since, now_);
  ASSERT_TRUE(store_->SwitchCaRotation("appliance", r.next_sha256, "{}", {"test", ""}, now_ + 1).ok());
  EXPECT_EQ(Report()->appliance_ca_rotation, "switched");
}

TEST_P(StatusServiceTest, CountsMachinesFailuresAndUntrust) {
  SoftMachine a, b;
  const storage::Machine first = Enroll(a, "node-1");
  Enroll(b, "node-2");
  Attest(b);
  storage::AttestationRecord r;
  r.machine_id = first.id;
  r.session_id = "s";
  r.at = now_;
  r.verdict = std::string(storage::kVerdictRefused);
  r.reason = "boot_policy_violation";
  r.reasons = {"secureboot:disabled", "kernel:unsigned"};
  ASSERT_TRUE(store_->RecordAttestationFailure(r).ok());

  auto status = Report();
  ASSERT_TRUE(status.ok()) << status.status().ToString();
  EXPECT_EQ(status->machines_by_state.at("enrolled"), 1);
  EXPECT_EQ(status->machines_by_state.at("attested"), 1);
  ASSERT_EQ(status->recent_failures.size(), 1u);
  const wire::StatusFailureView& f = status->recent_failures[0];
  EXPECT_EQ(f.hostname, "node-1");
  EXPECT_EQ(f.at, now_);
  EXPECT_EQ(f.reason, "boot_policy_violation");
  EXPECT_EQ(f.reasons, r.reasons);
  EXPECT_EQ(status->machines_untrusted, 1);
}

TEST_P(StatusServiceTest, NamesTheObservingPools) {
  storage::PoolPolicyChange change;
  change.pool = "workers";
  change.mode = storage::kPolicyModeObserve;
  change.audit_detail_json = "{}";
  auto set = store_->SetPoolBootPolicy(change, {"operator", ""}, now_);
  if (ReasonOf(set) == "fake_unsupported") GTEST_SKIP() << "the fake keeps no policy mode";
  ASSERT_TRUE(set.ok()) << set.status().ToString();
  auto status = Report();
  ASSERT_TRUE(status.ok()) << status.status().ToString();
  EXPECT_EQ(status->pools_observing_boot_policy, std::vector<std::string>{"workers"});
}

TEST_P(StatusServiceTest, ShowsTheLastHourOfUnknownEksAndRefusalsBeforeProof) {
  SoftMachine stranger, victim;
  ASSERT_EQ(ReasonOf(attestation_->Challenge(stranger.ChallengeRequest(), caller_)), "machine_not_enrolled");
  Enroll(victim, "node-1");
  RefuseBeforeProof(victim);

  auto status = Report();
  ASSERT_TRUE(status.ok()) << status.status().ToString();
  ASSERT_EQ(status->unknown_eks.size(), 1u);
  const wire::UnknownEkView& k = status->unknown_eks[0];
  EXPECT_EQ(k.ek_hash, hex::Encode(stranger.EkHash()));
  EXPECT_EQ(k.address, "192.0.2.7");
  EXPECT_EQ(k.count, 1u);
  EXPECT_EQ(k.reason, "machine_not_enrolled");
  EXPECT_EQ(k.first_seen, now_);
  EXPECT_EQ(k.last_seen, now_);
  ASSERT_EQ(status->anonymous_refusals.size(), 1u);
  const wire::AnonymousRefusalView& a = status->anonymous_refusals[0];
  EXPECT_EQ(a.hostname, "node-1");
  EXPECT_EQ(a.count, 1u);
  EXPECT_EQ(a.address, "198.51.100.66");
  EXPECT_EQ(a.reason, "activation_failed");
  EXPECT_EQ(status->anonymous_refusals_total, 1u);

  // An hour and a second later: out of the window; the total stays.
  now_ += kStatusWindowSeconds + 1;
  auto later = Report();
  ASSERT_TRUE(later.ok());
  EXPECT_TRUE(later->unknown_eks.empty());
  EXPECT_TRUE(later->anonymous_refusals.empty());
  EXPECT_EQ(later->anonymous_refusals_total, 1u);
}

// Issue 44: the cluster CA's stage and expiry, from its files; none shown
// without a CA.
TEST_P(StatusServiceTest, ShowsTheClusterCaRotationStage) {
  StatusService status({store_.get(), store_.get(), store_.get()}, attestation_.get());
  status.set_cluster_ca_certificate(dir_.File("ca.crt"));
  auto before = status.Report();
  ASSERT_TRUE(before.ok());
  EXPECT_EQ(before->cluster_ca, wire::ClusterCaView{});  // no CA yet
  ASSERT_TRUE(csr::GenerateClusterCa("old", 30, dir_.File("ca.crt"), dir_.File("ca.key")).ok());
  auto none = status.Report();
  ASSERT_TRUE(none.ok());
  EXPECT_EQ(none->cluster_ca.stage, "none");
  EXPECT_GT(none->cluster_ca.not_after, 0);
  EXPECT_EQ(none->cluster_ca.other_not_after, 0);
  ASSERT_TRUE(csr::GenerateClusterCa("next", 60, dir_.File("next.crt"), dir_.File("next.key")).ok());
  auto prepared = status.Report();
  ASSERT_TRUE(prepared.ok());
  EXPECT_EQ(prepared->cluster_ca.stage, "prepared");
  EXPECT_GT(prepared->cluster_ca.other_not_after, prepared->cluster_ca.not_after);
}

RACKGATE_ON_EVERY_STORE(StatusServiceTest);

}  // namespace
}  // namespace rackgate::core::testing
