// Tests for pools: settings, templates and provisioning tokens, with their
// refusals and audit rows.
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

// --- Pools -------------------------------------------------------------------

TEST_F(StoreTest, PutPoolCreatesUpdatesAndAudits) {
  const size_t before = AuditCount();
  Pool p{"infra", "{\"vouch_client\":false}", "{\"pcrs\":{}}"};
  auto put = store_->PutPool(p, Op("new rack"), 50);
  ASSERT_TRUE(put.ok()) << put.status().ToString();
  EXPECT_EQ(put->created_at, 50);
  EXPECT_EQ(put->updated_at, 50);
  EXPECT_EQ(AuditCount(), before + 1);

  // Unchanged: no write, no audit row.
  ASSERT_TRUE(store_->PutPool(p, Op(), 60).ok());
  EXPECT_EQ(AuditCount(), before + 1);

  p.boot_policy_json.reset();
  auto updated = store_->PutPool(p, Op("drop policy"), 70);
  ASSERT_TRUE(updated.ok());
  EXPECT_EQ(updated->created_at, 50);
  EXPECT_EQ(updated->updated_at, 70);
  EXPECT_FALSE(updated->boot_policy_json.has_value());
  auto audit = Audit();
  ASSERT_EQ(audit.size(), before + 2);
  EXPECT_EQ(audit.back().action, "pool_put");
  EXPECT_EQ(audit.back().why, "drop policy");
  // The settings' content stays out of the audit log.
  EXPECT_EQ(audit.back().detail_json.find("vouch_client"), std::string::npos);

  auto got = store_->GetPool("infra");
  ASSERT_TRUE(got.ok());
  EXPECT_EQ(got->settings_json, "{\"vouch_client\":false}");
  auto all = store_->ListPools();
  ASSERT_TRUE(all.ok());
  ASSERT_EQ(all->size(), 3u);
  EXPECT_EQ((*all)[0].name, "infra");
  EXPECT_EQ((*all)[1].name, "masters");
}

TEST_F(StoreTest, PoolRefusals) {
  ExpectFailure(store_->GetPool("nope").status(), Status::Code::kNotFound, "pool_unknown");
  for (const char* bad : {"", "-x", "a/b", "a b", "x\n"}) {
    ExpectFailure(store_->PutPool(Pool{bad}, Op(), 1).status(), Status::Code::kInvalidArgument, "pool_invalid");
  }
  ExpectFailure(store_->PutPool(Pool{"ok"}, Actor{"", ""}, 1).status(), Status::Code::kInvalidArgument,
                "field_invalid");
}

TEST_F(StoreTest, PoolTemplatesAreKeptByPutPoolAndAuditedByDigest) {
  auto set = store_->SetPoolTemplate("workers", kTemplatePublic, std::string("{\"ignition\":{}}"), "feed", Op(),
                                     20);
  ASSERT_TRUE(set.ok()) << set.status().ToString();
  EXPECT_EQ(set->public_template, "{\"ignition\":{}}");
  EXPECT_FALSE(set->attested_template.has_value());
  ASSERT_TRUE(store_->SetPoolTemplate("workers", kTemplateAttested, std::string("{\"a\":1}"), "beef", Op(), 21).ok());
  // PutPool changes settings, not templates.
  Pool p{"workers"};
  p.settings_json = "{\"x\":1}";
  auto put = store_->PutPool(p, Op(), 30);
  ASSERT_TRUE(put.ok());
  EXPECT_EQ(put->public_template, "{\"ignition\":{}}");
  EXPECT_EQ(put->attested_template, "{\"a\":1}");
  auto audit = Audit();
  bool found = false;
  for (const auto& a : audit) {
    if (a.action != "pool_template_put") continue;
    found = true;
    EXPECT_EQ(a.detail_json.find("ignition"), std::string::npos) << "template text leaked into the audit log";
  }
  EXPECT_TRUE(found);
  // Removing.
  auto removed = store_->SetPoolTemplate("workers", kTemplatePublic, std::nullopt, "", Op(), 40);
  ASSERT_TRUE(removed.ok());
  EXPECT_FALSE(removed->public_template.has_value());
  ExpectFailure(store_->SetPoolTemplate("workers", "secret", std::nullopt, "", Op(), 40).status(),
                Status::Code::kInvalidArgument, "field_invalid");
  ExpectFailure(store_->SetPoolTemplate("nope", kTemplatePublic, std::nullopt, "", Op(), 40).status(),
                Status::Code::kNotFound, "pool_unknown");
}

TEST_F(StoreTest, PoolTokensRotateWithOneGracePeriod) {
  Pool p{"edge"};
  ASSERT_TRUE(p.token_required);  // on by default for new pools
  auto created = store_->PutPool(p, Op(), 100, B("t1"));
  ASSERT_TRUE(created.ok());
  EXPECT_TRUE(created->token_required);
  auto tokens = store_->ValidPoolTokens("edge", 100);
  ASSERT_TRUE(tokens.ok());
  ASSERT_EQ(tokens->size(), 1u);
  EXPECT_EQ((*tokens)[0].hash, B("t1"));
  EXPECT_FALSE((*tokens)[0].expires_at.has_value());
  // A second put does not add a token when one exists.
  ASSERT_TRUE(store_->PutPool(p, Op(), 110, B("t-ignored")).ok());
  EXPECT_EQ(store_->ValidPoolTokens("edge", 110)->size(), 1u);

  // Rotate with a grace period: the old one lives until 500.
  ASSERT_TRUE(store_->RotatePoolToken("edge", B("t2"), 500, Op(), 200).ok());
  tokens = store_->ValidPoolTokens("edge", 499);
  ASSERT_EQ(tokens->size(), 2u);
  EXPECT_EQ((*tokens)[0].hash, B("t2"));
  EXPECT_EQ((*tokens)[1].hash, B("t1"));
  EXPECT_EQ((*tokens)[1].expires_at, 500);
  tokens = store_->ValidPoolTokens("edge", 500);
  ASSERT_EQ(tokens->size(), 1u);
  EXPECT_EQ((*tokens)[0].hash, B("t2"));
  auto both = store_->GetPoolWithTokens("edge", 499);
  ASSERT_TRUE(both.ok());
  EXPECT_EQ(both->first.name, "edge");
  EXPECT_EQ(both->second.size(), 2u);
  ExpectFailure(store_->GetPoolWithTokens("nope", 499).status(), Status::Code::kNotFound, "pool_unknown");

  // Rotating again drops t1 at once, whatever its grace, and t2 gets one.
  ASSERT_TRUE(store_->RotatePoolToken("edge", B("t3"), 900, Op(), 300).ok());
  tokens = store_->ValidPoolTokens("edge", 301);
  ASSERT_EQ(tokens->size(), 2u);
  EXPECT_EQ((*tokens)[0].hash, B("t3"));
  EXPECT_EQ((*tokens)[1].hash, B("t2"));
  // No grace: only the new one.
  ASSERT_TRUE(store_->RotatePoolToken("edge", B("t4"), 400, Op(), 400).ok());
  tokens = store_->ValidPoolTokens("edge", 401);
  ASSERT_EQ(tokens->size(), 1u);
  EXPECT_EQ((*tokens)[0].hash, B("t4"));

  ExpectFailure(store_->RotatePoolToken("edge", B("t4"), 9999, Op(), 500), Status::Code::kInvalidArgument,
                "field_invalid");
  ExpectFailure(store_->RotatePoolToken("nope", B("t9"), 0, Op(), 500), Status::Code::kNotFound, "pool_unknown");
  auto audit = Audit();
  EXPECT_EQ(audit.back().action, "token_rotate");
  // Switching the token off is a pool setting.
  p.token_required = false;
  auto off = store_->PutPool(p, Op(), 600);
  ASSERT_TRUE(off.ok());
  EXPECT_FALSE(off->token_required);
}

// Issue 15: a pool put stores its settings, templates and first token in one
// transaction, or nothing at all.
TEST_F(StoreTest, PutPoolStoresTemplatesAndTokenTogetherOrNothing) {
  const size_t before = AuditCount();
  Pool p{"edge"};
  PoolPutOutcome outcome;
  auto put = store_->PutPool(p, Op(), 100, B("t1"),
                             {{std::string(kTemplatePublic), std::string("{\"p\":1}"), "aa"},
                              {std::string(kTemplateAttested), std::string("{\"a\":1}"), "bb"}},
                             &outcome);
  ASSERT_TRUE(put.ok()) << put.status().ToString();
  EXPECT_TRUE(outcome.created);
  EXPECT_TRUE(outcome.token_created);
  EXPECT_EQ(put->public_template, "{\"p\":1}");
  EXPECT_EQ(put->attested_template, "{\"a\":1}");
  auto audit = Audit();
  ASSERT_EQ(audit.size(), before + 1) << "one put, one audit row";
  EXPECT_EQ(audit.back().action, "pool_put");
  EXPECT_NE(audit.back().detail_json.find("\"sha256\":\"bb\""), std::string::npos) << audit.back().detail_json;
  EXPECT_EQ(audit.back().detail_json.find("\"a\":1"), std::string::npos) << "template text in the audit log";

  // A second put with a token hash stores none (the pool has one) and says so.
  put = store_->PutPool(p, Op(), 110, B("t2"), {{std::string(kTemplateAttested), std::nullopt, ""}}, &outcome);
  ASSERT_TRUE(put.ok());
  EXPECT_FALSE(outcome.created);
  EXPECT_FALSE(outcome.token_created);
  EXPECT_FALSE(put->attested_template.has_value());
  EXPECT_EQ(put->public_template, "{\"p\":1}") << "a template not named is kept";
  ASSERT_EQ(store_->ValidPoolTokens("edge", 110)->size(), 1u);
  EXPECT_EQ((*store_->ValidPoolTokens("edge", 110))[0].hash, B("t1"));

  // Refused inside the transaction (the token hash is another pool's): no
  // pool, no template, no token, no audit row.
  const size_t audit_before = AuditCount();
  outcome = PoolPutOutcome{true, true};
  auto refused = store_->PutPool(Pool{"other"}, Op(), 120, B("t1"),
                                 {{std::string(kTemplatePublic), std::string("{\"p\":2}"), "cc"}}, &outcome);
  ExpectFailure(refused.status(), Status::Code::kInvalidArgument, "field_invalid");
  EXPECT_FALSE(outcome.created);
  EXPECT_FALSE(outcome.token_created);
  ExpectFailure(store_->GetPool("other").status(), Status::Code::kNotFound, "pool_unknown");
  EXPECT_TRUE(store_->ValidPoolTokens("other", 120)->empty());
  EXPECT_EQ(AuditCount(), audit_before);
  // Refused before it: a template of another kind.
  ExpectFailure(store_->PutPool(Pool{"other"}, Op(), 130, std::nullopt, {{"secret", std::string("{}"), ""}}).status(),
                Status::Code::kInvalidArgument, "field_invalid");
  ExpectFailure(store_->GetPool("other").status(), Status::Code::kNotFound, "pool_unknown");
  EXPECT_EQ(AuditCount(), audit_before);
}

}  // namespace
}  // namespace rackgate::storage
