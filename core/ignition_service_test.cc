// Config serving's refusal matrix (docs/ignition.md) as tests of the core:
// the public config behind the pool's provisioning token, the attested config
// behind a soft-TPM machine's attestation token, over a real store.
#include "core/ignition_service.h"

#include <gtest/gtest.h>

#include "core/secrets.h"
#include "core/testing/core_fixture.h"

namespace rackgate::core::testing {
namespace {

constexpr char kPublic[] =
    R"({"ignition": {"version": "3.2.0"}, "storage": {"files": [{"path": "/etc/pool", "mode": 420,)"
    R"( "contents": {"source": "data:,{{pool}}"}}]}})";
constexpr char kAttested[] =
    R"({"ignition": {"version": "3.2.0"}, "storage": {"files": [{"path": "/etc/rack", "mode": 420,)"
    R"( "contents": {"source": "data:,{{machine.rack}}"}}]}})";
constexpr char kIgnition33[] = "application/vnd.coreos.ignition+json;version=3.3.0";

class IgnitionServiceTest : public CoreTest {
 protected:
  IgnitionServiceTest() {
    IgnitionOptions o;
    o.appliance_url = "https://appliance.example:22623";
    o.appliance_ca_pem = "-----BEGIN CERTIFICATE-----\n-----END CERTIFICATE-----\n";
    ignition_ = std::make_unique<IgnitionService>(store_.get(), attestation_.get(), o, nullptr);
  }
  void SetTemplate(const char* which, const std::optional<std::string>& text) {
    ASSERT_TRUE(store_->SetPoolTemplate("workers", which, text, text ? Sha256Hex(*text) : "",
                                        storage::Actor{"test", ""}, now_)
                    .ok());
    ignition_->Invalidate("workers");
  }
  void RequireToken(const std::string& token) {
    storage::Pool pool{"workers"};
    pool.token_required = true;
    ASSERT_TRUE(store_->PutPool(pool, storage::Actor{"test", ""}, now_).ok());
    ASSERT_TRUE(store_->RotatePoolToken("workers", TokenHash(token), now_, storage::Actor{"test", ""}, now_).ok());
    ignition_->Invalidate("workers");
  }
  PublicConfigRequest Public(std::optional<std::string> token = std::nullopt,
                             std::optional<std::string> accept = std::nullopt) {
    return PublicConfigRequest{"workers", std::move(token), std::move(accept), "192.0.2.9:1"};
  }

  std::unique_ptr<IgnitionService> ignition_;
};

TEST_F(IgnitionServiceTest, PublicConfigIsServedInTheVersionAsked) {
  SetTemplate("public", kPublic);
  auto config = ignition_->PublicConfig(Public());
  ASSERT_TRUE(config.ok()) << config.status().ToString();
  EXPECT_EQ(config->spec_version, "3.2.0");
  EXPECT_NE(config->body->find("/etc/pool"), std::string::npos);
  auto again = ignition_->PublicConfig(Public());
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->body.get(), config->body.get()) << "one buffer for every machine of the pool";
  auto newer = ignition_->PublicConfig(Public(std::nullopt, std::string(kIgnition33)));
  ASSERT_TRUE(newer.ok()) << newer.status().ToString();
  EXPECT_EQ(newer->spec_version, "3.3.0");
}

// Issue 44: {{appliance.ca_pem}} is the CA bundle now: a rotation's
// prepare renders the pool's public config again, with both CAs.
TEST_F(IgnitionServiceTest, TheCaPlaceholderFollowsARotation) {
  ApplianceCaBundle bundle(store_.get(), "CURRENT-CA\n", "", std::chrono::seconds(0));
  IgnitionOptions o;
  o.appliance_url = "https://appliance.example:22623";
  o.ca_bundle = &bundle;
  ignition_ = std::make_unique<IgnitionService>(store_.get(), attestation_.get(), o, nullptr);
  SetTemplate("public", R"({"ignition": {"version": "3.2.0"}, "storage": {"files": [{"path": "/etc/ca.pem",)"
                        R"( "mode": 420, "contents": {"source": "data:,{{appliance.ca_pem}}"}}]}})");
  auto before = ignition_->PublicConfig(Public());
  ASSERT_TRUE(before.ok()) << before.status().ToString();
  EXPECT_NE(before->body->find("CURRENT-CA"), std::string::npos) << *before->body;
  EXPECT_EQ(before->body->find("NEXT-CA"), std::string::npos);
  storage::CaRotation r;
  r.current_pem = "CURRENT-CA\n";
  r.current_sha256 = std::string(64, 'a');
  r.next_pem = "NEXT-CA\n";
  r.next_sha256 = std::string(64, 'b');
  ASSERT_TRUE(store_->PrepareCaRotation(r, "{}", {"test", ""}, now_).ok());
  auto during = ignition_->PublicConfig(Public());
  ASSERT_TRUE(during.ok()) << during.status().ToString();
  EXPECT_NE(during->body->find("CURRENT-CA"), std::string::npos) << *during->body;
  EXPECT_NE(during->body->find("NEXT-CA"), std::string::npos) << *during->body;
}

TEST_F(IgnitionServiceTest, PublicConfigRefusals) {
  auto unknown = ignition_->PublicConfig(PublicConfigRequest{"no-such-pool", {}, {}, "x"});
  EXPECT_EQ(ReasonOf(unknown), "pool_unknown");
  EXPECT_EQ(ReasonOf(ignition_->PublicConfig(Public())), "config_unavailable");
  SetTemplate("public", kPublic);
  EXPECT_EQ(ReasonOf(ignition_->PublicConfig(
                Public(std::nullopt, std::string("application/vnd.coreos.ignition+json;version=2.2.0")))),
            "ignition_version_unsupported");
  // An Accept header that does not parse is the client's to fix (400), not
  // a version question.
  EXPECT_EQ(ReasonOf(ignition_->PublicConfig(Public(std::nullopt, std::string("*/*;q=1.5")))),
            "accept_malformed");
  RequireToken("provisioning-token");
  EXPECT_EQ(ReasonOf(ignition_->PublicConfig(Public())), "token_missing");
  EXPECT_EQ(ReasonOf(ignition_->PublicConfig(Public(std::string("wrong")))), "token_invalid");
  EXPECT_TRUE(ignition_->PublicConfig(Public(std::string("provisioning-token"))).ok());
}

// Another appliance's change (docs/ha.md): the cache serves the pool it read
// until the store's notification drops it; InvalidateAllPools is what the
// notification calls.
TEST_F(IgnitionServiceTest, ANotifiedChangeIsSeenAtOnce) {
  SetTemplate("public", kPublic);
  ASSERT_TRUE(ignition_->PublicConfig(Public()).ok());
  // Behind the service's back, as another appliance would: the cached pool
  // (no token required) is still what it answers by.
  storage::Pool pool{"workers"};
  pool.token_required = true;
  ASSERT_TRUE(store_->PutPool(pool, storage::Actor{"test", ""}, now_).ok());
  ASSERT_TRUE(store_->RotatePoolToken("workers", TokenHash("t"), now_, storage::Actor{"test", ""}, now_).ok());
  EXPECT_TRUE(ignition_->PublicConfig(Public()).ok());
  ignition_->InvalidateAllPools();
  EXPECT_EQ(ReasonOf(ignition_->PublicConfig(Public())), "token_missing");
}

TEST_F(IgnitionServiceTest, AttestedConfigRefusalsAndTheServedRecord) {
  SoftMachine m;
  Enroll(m, "node-1");
  const std::string token = Attest(m).token;
  AttestedConfigRequest req{token, std::nullopt, "192.0.2.9:1"};
  EXPECT_EQ(ReasonOf(ignition_->AttestedConfig(AttestedConfigRequest{std::nullopt, {}, "x"})), "token_missing");
  EXPECT_EQ(ReasonOf(ignition_->AttestedConfig(req)), "config_unavailable");
  SetTemplate("public", kPublic);
  SetTemplate("attested", kAttested);
  // The machine has no `rack` value yet: it waits for the operator.
  EXPECT_EQ(ReasonOf(ignition_->AttestedConfig(req)), "template_value_missing");
  SetTemplate("attested", std::nullopt);
  auto config = ignition_->AttestedConfig(req);
  ASSERT_TRUE(config.ok()) << config.status().ToString();
  auto machine = store_->GetMachine("node-1");
  ASSERT_TRUE(machine.ok());
  EXPECT_EQ(machine->state, storage::MachineState::kProvisioned);
  EXPECT_EQ(ReasonOf(ignition_->AttestedConfig(AttestedConfigRequest{
                token, std::string("application/vnd.coreos.ignition+json;version=2.2.0"), "x"})),
            "ignition_version_unsupported");
}

// Trust (docs/trust.md): the attested config is refused to an untrusted
// machine, after a failed attestation and once its last good one is older
// than its pool allows (judged at the request, before any sweep); the public
// config is unaffected; a good attestation makes it trusted again.
TEST_F(IgnitionServiceTest, AttestedConfigIsRefusedToAnUntrustedMachine) {
  SoftMachine m;
  Enroll(m, "node-1");
  SetTemplate("public", kPublic);
  const std::string token = Attest(m).token;
  AttestedConfigRequest req{token, std::nullopt, "192.0.2.9:1"};
  ASSERT_TRUE(ignition_->AttestedConfig(req).ok());

  // The machine's own failed attestation (its TPM answered, with an older
  // reset counter): the old token still resolves, but the machine is
  // untrusted now.
  m.clock.reset_count -= 1;
  auto c = attestation_->Challenge(m.ChallengeRequest(), caller_);
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  ASSERT_EQ(ReasonOf(attestation_->Evidence(m.Answer(*c), caller_)), "reset_count_regressed");
  m.clock.reset_count += 1;
  auto refused = ignition_->AttestedConfig(req);
  ASSERT_EQ(ReasonOf(refused), "machine_untrusted");
  EXPECT_NE(refused.status().message().find("latest attestation failed (reset_count_regressed)"), std::string::npos)
      << refused.status().message();
  // The public config names no machine: trust is no question there.
  EXPECT_NE(ReasonOf(ignition_->PublicConfig(Public())), "machine_untrusted");
  auto machine = store_->GetMachine("node-1");
  ASSERT_TRUE(machine.ok());
  EXPECT_EQ(machine->state, storage::MachineState::kProvisioned);  // the state never moves with trust

  // Attested well again: trusted, served.
  const std::string fresh = Attest(m).token;
  AttestedConfigRequest again{fresh, std::nullopt, "192.0.2.9:1"};
  ASSERT_TRUE(ignition_->AttestedConfig(again).ok());

  // The pool ages attestations: past the age the request is refused at
  // once, with no sweep run.
  auto pool = store_->GetPool("workers");
  ASSERT_TRUE(pool.ok());
  pool->settings_json = R"({"max_attestation_age_seconds": 600})";
  ASSERT_TRUE(store_->PutPool(*pool, storage::Actor{"test", ""}, now_).ok());
  now_ += 600;
  ASSERT_TRUE(ignition_->AttestedConfig(again).ok());
  now_ += 1;
  auto old = ignition_->AttestedConfig(again);
  ASSERT_EQ(ReasonOf(old), "machine_untrusted");
  EXPECT_NE(old.status().message().find("601 s old"), std::string::npos) << old.status().message();
  EXPECT_EQ(store_->GetMachine("node-1")->trust, "trusted");  // stored verdict unchanged until the sweep
}

// --- Several appliances (docs/agent.md) ---------------------------------------

TEST_F(IgnitionServiceTest, ApplianceUrlsListsEveryAppliance) {
  constexpr char kEnv[] =
      R"({"ignition": {"version": "3.2.0"}, "storage": {"files": [{"path": "/etc/rackgate/agent.env", "mode": 420,)"
      R"( "contents": {"source": "data:,RACKGATE_URL%3D{{appliance.urls}}%0A"}}]}})";
  SetTemplate("public", kEnv);
  // Without a list: the one URL. (The data: URL comes back re-encoded.)
  auto one = ignition_->PublicConfig(Public());
  ASSERT_TRUE(one.ok()) << one.status().ToString();
  EXPECT_NE(one->body->find("RACKGATE_URL%3Dhttps%3A%2F%2Fappliance.example%3A22623%0A"), std::string::npos) << *one->body;

  IgnitionOptions o;
  o.appliance_url = "https://a.example:22623";
  o.appliance_urls = "https://a.example:22623,https://b.example:22623";
  o.appliance_ca_pem = "-----BEGIN CERTIFICATE-----\n-----END CERTIFICATE-----\n";
  IgnitionService fleet(store_.get(), attestation_.get(), o, nullptr);
  auto both = fleet.PublicConfig(Public());
  ASSERT_TRUE(both.ok()) << both.status().ToString();
  EXPECT_NE(both->body->find("RACKGATE_URL%3Dhttps%3A%2F%2Fa.example%3A22623%2Chttps%3A%2F%2Fb.example%3A22623%0A"), std::string::npos)
      << *both->body;
}

}  // namespace
}  // namespace rackgate::core::testing
