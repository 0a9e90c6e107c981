// Pool administration (core/pool_service.h) over a real store: what a put
// stores and answers, and a case for every refusal the service returns.
#include "core/pool_service.h"

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <fstream>

#include "core/ignition_service.h"
#include "core/testing/core_fixture.h"

namespace rackgate::core::testing {
namespace {

constexpr char kPublic[] = R"({"ignition": {"version": "3.2.0"}})";

class PoolServiceTest : public CoreTest {
 protected:
  PoolServiceTest() { Rebuild(""); }
  // The services over the fixture's store; `validator` as the config's.
  void Rebuild(const std::string& validator) {
    IgnitionOptions o;
    o.appliance_url = "https://appliance.example:22623";
    o.appliance_ca_pem = "-----BEGIN CERTIFICATE-----\n-----END CERTIFICATE-----\n";
    o.validator = validator;
    ignition_ = std::make_unique<IgnitionService>(store_.get(), attestation_.get(), o, nullptr);
    pools_ = std::make_unique<PoolService>(store_.get(), ignition_.get(), [this] { return now_; });
  }
  Result<PoolPut> Put(const std::string& name, const std::string& body) {
    auto request = wire::DecodePoolPutRequest(body);
    if (!request.ok()) return request.status();
    return pools_->Put(name, *request, actor_);
  }
  static Status::Code CodeOf(const Status& s) { return s.code(); }

  storage::Actor actor_{"operator", ""};
  std::unique_ptr<IgnitionService> ignition_;
  std::unique_ptr<PoolService> pools_;
};

TEST_F(PoolServiceTest, PutMakesThePoolAndItsFirstTokenOnce) {
  auto made = Put("edge", R"({"token_required": true, "settings": {"require_tpm_key": true},)"
                          R"( "templates": {"public": )" + std::string(kPublic) + "}}");
  ASSERT_TRUE(made.ok()) << made.status().ToString();
  EXPECT_TRUE(made->created);
  EXPECT_TRUE(made->pool.token_required);
  ASSERT_TRUE(made->pool.provisioning_token.has_value());
  EXPECT_EQ(made->pool.provisioning_tokens.size(), 1u);
  ASSERT_TRUE(made->pool.public_template_json.has_value());
  EXPECT_EQ(*made->pool.public_template_json, R"({"ignition":{"version":"3.2.0"}})");
  // Again: not made, no token shown.
  auto again = Put("edge", R"({"token_required": true})");
  ASSERT_TRUE(again.ok());
  EXPECT_FALSE(again->created);
  EXPECT_FALSE(again->pool.provisioning_token.has_value());
  EXPECT_TRUE(again->pool.public_template_json.has_value());  // kept
  // A template removed by a put (null).
  auto removed = Put("edge", R"({"templates": {"public": null}})");
  ASSERT_TRUE(removed.ok());
  EXPECT_FALSE(removed->pool.public_template_json.has_value());
}

TEST_F(PoolServiceTest, PutInvalidatesTheConfigCache) {
  ASSERT_TRUE(Put("workers", R"({"templates": {"public": )" + std::string(kPublic) + "}}").ok());
  PublicConfigRequest get{"workers", std::nullopt, std::nullopt, "192.0.2.9:1"};
  ASSERT_TRUE(ignition_->PublicConfig(get).ok());  // cached now
  ASSERT_TRUE(Put("workers", R"({"templates": {"public": null}})").ok());
  EXPECT_EQ(ReasonOf(ignition_->PublicConfig(get)), "config_unavailable");
}

TEST_F(PoolServiceTest, PutRefusals) {
  struct Case {
    std::string body;
    const char* reason;
  };
  for (const Case& c : {
           Case{R"({"settings": {"no_such_setting": 1}})", "settings_invalid"},
           Case{R"({"boot_policy": {"pcrs": 7}})", "policy_malformed"},
           Case{R"({"templates": {"secret": {}}})", "field_invalid"},
           Case{R"({"templates": {"public": {"ignition": {"version": "1.0.0"}}}})", "template_version_unsupported"},
       }) {
    auto r = Put("edge", c.body);
    ASSERT_FALSE(r.ok()) << c.body;
    EXPECT_EQ(r.status().reason(), c.reason) << c.body << ": " << r.status().ToString();
    EXPECT_EQ(CodeOf(r.status()), Status::Code::kInvalidArgument) << c.body;
    // Refused before anything is stored.
    EXPECT_EQ(ReasonOf(store_->GetPool("edge")), "pool_unknown") << c.body;
  }
  // The message names the part to fix.
  auto t = Put("edge", R"({"templates": {"attested": {"ignition": {"version": "1.0.0"}}}})");
  ASSERT_FALSE(t.ok());
  EXPECT_EQ(t.status().message().rfind("attested template: ", 0), 0u) << t.status().message();
  auto s = Put("edge", R"({"settings": {"no_such_setting": 1}})");
  EXPECT_EQ(s.status().message().rfind("settings: ", 0), 0u) << s.status().message();
}

TEST_F(PoolServiceTest, PutRefusesWhenTheValidatorCannotRun) {
  // An executable whose interpreter does not exist: posix_spawn fails.
  const std::string validator = dir_.File("validator");
  {
    std::ofstream f(validator);
    f << "#!/nonexistent/interpreter\n";
  }
  ASSERT_EQ(::chmod(validator.c_str(), 0755), 0);
  Rebuild(validator);
  auto r = Put("edge", R"({"templates": {"public": )" + std::string(kPublic) + "}}");
  EXPECT_EQ(ReasonOf(r), "validator_failed");
  EXPECT_EQ(CodeOf(r.status()), Status::Code::kIoError);
}

TEST_F(PoolServiceTest, SetTemplateStoresRemovesAndRefuses) {
  auto stored = pools_->SetTemplate("workers", "public", std::string_view(kPublic), actor_);
  ASSERT_TRUE(stored.ok()) << stored.status().ToString();
  EXPECT_TRUE(stored->public_template_json.has_value());
  auto removed = pools_->SetTemplate("workers", "public", std::nullopt, actor_);
  ASSERT_TRUE(removed.ok());
  EXPECT_FALSE(removed->public_template_json.has_value());

  auto unknown = pools_->SetTemplate("workers", "secret", std::string_view(kPublic), actor_);
  EXPECT_EQ(ReasonOf(unknown), "template_unknown");
  EXPECT_EQ(CodeOf(unknown.status()), Status::Code::kNotFound);  // the path names no template
  EXPECT_EQ(ReasonOf(pools_->SetTemplate("workers", "attested", std::string_view("{"), actor_)),
            "template_invalid");
  EXPECT_EQ(ReasonOf(pools_->SetTemplate("no-such-pool", "public", std::string_view(kPublic), actor_)),
            "pool_unknown");
}

TEST_F(PoolServiceTest, RotateTokenKeepsThePreviousForItsGrace) {
  auto rotated = pools_->RotateToken("workers", 3600, actor_);
  ASSERT_TRUE(rotated.ok()) << rotated.status().ToString();
  EXPECT_EQ(rotated->pool, "workers");
  EXPECT_FALSE(rotated->provisioning_token.empty());
  EXPECT_EQ(rotated->previous_valid_until, now_ + 3600);
  auto at_once = pools_->RotateToken("workers", 0, actor_);
  ASSERT_TRUE(at_once.ok());
  EXPECT_FALSE(at_once->previous_valid_until.has_value());
  EXPECT_NE(at_once->provisioning_token, rotated->provisioning_token);

  EXPECT_EQ(ReasonOf(pools_->RotateToken("workers", -1, actor_)), "field_invalid");
  EXPECT_EQ(ReasonOf(pools_->RotateToken("workers", kMaxTokenGraceSeconds + 1, actor_)), "field_invalid");
  EXPECT_EQ(ReasonOf(pools_->RotateToken("no-such-pool", 0, actor_)), "pool_unknown");
}

TEST_F(PoolServiceTest, ListShowsEveryPoolOrOne) {
  ASSERT_TRUE(Put("edge", "{}").ok());
  auto all = pools_->List(std::nullopt);
  ASSERT_TRUE(all.ok());
  EXPECT_EQ(all->size(), 2u);  // the fixture's "workers" and "edge"
  auto one = pools_->List(std::string("edge"));
  ASSERT_TRUE(one.ok());
  ASSERT_EQ(one->size(), 1u);
  EXPECT_EQ(one->front().name, "edge");
  auto none = pools_->List(std::string("no-such-pool"));
  EXPECT_EQ(ReasonOf(none), "pool_unknown");
  EXPECT_EQ(CodeOf(none.status()), Status::Code::kNotFound);
}

}  // namespace
}  // namespace rackgate::core::testing
