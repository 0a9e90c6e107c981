// Tests of a machine's trust: CheckTrust's verdicts and messages, the
// pool setting, and the sweep over a real store.
#include "core/trust.h"

#include <gtest/gtest.h>

#include "core/pool_settings.h"
#include "core/testing/core_fixture.h"

namespace rackgate::core::testing {
namespace {

storage::Machine Trusted(int64_t attested_at) {
  storage::Machine m;
  m.hostname = "node-1";
  m.trust = "trusted";
  m.last_attested_at = attested_at;
  return m;
}

PoolSettings MaxAge(int64_t seconds) {
  PoolSettings s;
  s.max_attestation_age_seconds = seconds;
  return s;
}

TEST(CheckTrust, ATrustedMachineWithoutAnAgeIsNeverTooOld) {
  EXPECT_TRUE(CheckTrust(Trusted(1000), PoolSettings{}, 1000 + 10LL * 365 * 86400).ok());
}

TEST(CheckTrust, AgeIsJudgedAtCallTime) {
  EXPECT_TRUE(CheckTrust(Trusted(1000), MaxAge(600), 1600).ok());
  Status s = CheckTrust(Trusted(1000), MaxAge(600), 1601);
  EXPECT_EQ(s.reason(), "machine_untrusted");
  EXPECT_EQ(s.code(), Status::Code::kVerificationFailed);
  EXPECT_NE(s.message().find("601 s old"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("max_attestation_age_seconds of 600"), std::string::npos) << s.message();
}

TEST(CheckTrust, AFailedAttestationRefusesWhateverTheAge) {
  storage::Machine m = Trusted(1000);
  m.trust = "untrusted";
  m.trust_reason = "attestation_failed:boot_policy_violation";
  Status s = CheckTrust(m, PoolSettings{}, 1001);
  EXPECT_EQ(s.reason(), "machine_untrusted");
  EXPECT_NE(s.message().find("latest attestation failed (boot_policy_violation)"), std::string::npos) << s.message();
}

TEST(CheckTrust, TheSweepsVerdictStandsUntilTheNextGoodAttestation) {
  storage::Machine m = Trusted(1000);
  m.trust = "untrusted";
  m.trust_reason = "attestation_too_old";
  // Even with the age raised (or removed) since: only an attestation clears it.
  Status s = CheckTrust(m, PoolSettings{}, 1001);
  EXPECT_EQ(s.reason(), "machine_untrusted");
  EXPECT_NE(s.message().find("too old"), std::string::npos) << s.message();
}

TEST(CheckTrust, NoVerdictYetIsNotRefused) {
  storage::Machine m;
  m.hostname = "node-1";
  EXPECT_TRUE(CheckTrust(m, MaxAge(60), 1000000).ok());
}

TEST(PoolSettings, MaxAttestationAge) {
  auto s = ParsePoolSettings(R"({"max_attestation_age_seconds": 86400})");
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  EXPECT_EQ(s->max_attestation_age_seconds, 86400);
  EXPECT_FALSE(ParsePoolSettings("{}")->max_attestation_age_seconds.has_value());
  for (const char* bad : {R"({"max_attestation_age_seconds": 59})", R"({"max_attestation_age_seconds": "1h"})",
                          R"({"max_attestation_age_seconds": 31708801})",
                          R"({"max_attestation_age_seconds": 600.5})"}) {
    EXPECT_EQ(ParsePoolSettings(bad).status().reason(), "settings_invalid") << bad;
  }
}

class TrustSweepTest : public CoreTest {};

TEST_F(TrustSweepTest, MarksMachinesOfAgingPoolsOnly) {
  SoftMachine a;
  SoftMachine b;
  Enroll(a, "node-1");
  Enroll(b, "node-2");
  Attest(a);
  now_ += 1000;
  Attest(b);
  // No pool ages: nothing to do.
  auto none = SweepTrust(store_.get(), now_ + 100000);
  ASSERT_TRUE(none.ok()) << none.status().ToString();
  EXPECT_EQ(*none, 0);

  auto pool = store_->GetPool("workers");
  ASSERT_TRUE(pool.ok());
  pool->settings_json = R"({"max_attestation_age_seconds": 3600})";
  ASSERT_TRUE(store_->PutPool(*pool, storage::Actor{"test", ""}, now_).ok());
  // node-1 attested 1000 s before node-2: at now_ + 2601 only node-1 is
  // more than 3600 s old.
  auto swept = SweepTrust(store_.get(), now_ + 2601);
  ASSERT_TRUE(swept.ok()) << swept.status().ToString();
  EXPECT_EQ(*swept, 1);
  EXPECT_EQ(store_->GetMachine("node-1")->trust, "untrusted");
  EXPECT_EQ(store_->GetMachine("node-1")->trust_reason, "attestation_too_old");
  EXPECT_EQ(store_->GetMachine("node-2")->trust, "trusted");
  EXPECT_EQ(*SweepTrust(store_.get(), now_ + 2601), 0);

  // A good attestation brings it back.
  now_ += 2700;
  Attest(a);
  EXPECT_EQ(store_->GetMachine("node-1")->trust, "trusted");
}

}  // namespace
}  // namespace rackgate::core::testing
