// Tests for boot policy observation: a pool's mode and policy changed under
// one audit row, and each machine's latest observed boot.
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
using testing::Op;
using testing::StoreTest;

TEST_F(StoreTest, PoolsEnforceByDefaultAndPutPoolKeepsTheMode) {
  auto p = store_->GetPool("workers");
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(p->boot_policy_mode, kPolicyModeEnforce);

  PoolPolicyChange observe;
  observe.pool = "workers";
  observe.mode = kPolicyModeObserve;
  auto changed = store_->SetPoolBootPolicy(observe, Op(), 20);
  ASSERT_TRUE(changed.ok()) << changed.status().ToString();
  EXPECT_EQ(changed->boot_policy_mode, kPolicyModeObserve);

  // pool put (settings, templates) never changes the mode.
  Pool again = *changed;
  again.settings_json = "{\"require_tpm_key\": true}";
  ASSERT_TRUE(store_->PutPool(again, Op(), 30).ok());
  EXPECT_EQ(store_->GetPool("workers")->boot_policy_mode, kPolicyModeObserve);
}

TEST_F(StoreTest, SetPoolBootPolicyAuditsModeAndPolicyDigestsOnce) {
  const size_t before = AuditCount();
  PoolPolicyChange accept;
  accept.pool = "workers";
  accept.boot_policy_json = std::optional<std::string>("{\"version\":1}");
  accept.mode = kPolicyModeEnforce;
  accept.audit_detail_json = "{\"source\":\"proposal\",\"diff\":[\"+ version\"]}";
  auto p = store_->SetPoolBootPolicy(accept, Op(), 20);
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  ASSERT_EQ(p->boot_policy_json, "{\"version\":1}");
  auto audit = Audit();
  ASSERT_EQ(audit.size(), before + 1);
  const auto& row = audit.back();
  EXPECT_EQ(row.action, "pool_policy");
  EXPECT_NE(row.detail_json.find("\"source\":\"proposal\""), std::string::npos) << row.detail_json;
  EXPECT_NE(row.detail_json.find("\"mode_to\":\"enforce\""), std::string::npos);
  EXPECT_NE(row.detail_json.find("\"policy_from_sha256\":\"\""), std::string::npos);
  // The digest of {"version":1}, not its text.
  EXPECT_EQ(row.detail_json.find("version\\\":1"), std::string::npos) << row.detail_json;

  // The same change again writes nothing.
  ASSERT_TRUE(store_->SetPoolBootPolicy(accept, Op(), 21).ok());
  EXPECT_EQ(AuditCount(), before + 1);

  // Clearing the policy (set, to nothing) keeps the mode.
  PoolPolicyChange clear;
  clear.pool = "workers";
  clear.boot_policy_json = std::optional<std::string>();
  p = store_->SetPoolBootPolicy(clear, Op(), 22);
  ASSERT_TRUE(p.ok());
  EXPECT_FALSE(p->boot_policy_json.has_value());
  EXPECT_EQ(p->boot_policy_mode, kPolicyModeEnforce);
  EXPECT_EQ(AuditCount(), before + 2);
}

TEST_F(StoreTest, SetPoolBootPolicyRefusals) {
  PoolPolicyChange c;
  c.pool = "nosuch";
  c.mode = kPolicyModeObserve;
  ExpectFailure(store_->SetPoolBootPolicy(c, Op(), 20).status(), Status::Code::kNotFound, "pool_unknown");
  c.pool = "workers";
  c.mode = "audit";
  ExpectFailure(store_->SetPoolBootPolicy(c, Op(), 20).status(), Status::Code::kInvalidArgument, "field_invalid");
  c.mode = kPolicyModeObserve;
  c.audit_detail_json = "[1]";
  ExpectFailure(store_->SetPoolBootPolicy(c, Op(), 20).status(), Status::Code::kInvalidArgument, "field_invalid");
  c.audit_detail_json = "{}";
  c.boot_policy_json = std::optional<std::string>(std::string((1 << 20) + 1, ' '));
  ExpectFailure(store_->SetPoolBootPolicy(c, Op(), 20).status(), Status::Code::kInvalidArgument, "field_invalid");
  EXPECT_EQ(store_->GetPool("workers")->boot_policy_mode, kPolicyModeEnforce) << "a refused change changed the pool";
}

TEST_F(StoreTest, ObservationsAreOnePerMachineAndFollowThePool) {
  Machine a = Enroll("a.rack", "a");
  Machine b = Enroll("b.rack", "b");
  Machine other = Enroll("c.rack", "c");
  const size_t audit_before = AuditCount();
  BootObservation o;
  o.machine_id = a.id;
  o.pool = "workers";
  o.at = 100;
  o.event_log = B("log-a-1");
  o.pcrs_json = "{\"pcrs\": {}}";
  o.verdict = "fail";
  o.violations = {"secure_boot:secure_boot_disabled"};
  ASSERT_TRUE(store_->RecordBootObservation(o).ok());
  o.at = 200;
  o.event_log = B("log-a-2");
  ASSERT_TRUE(store_->RecordBootObservation(o).ok());
  o.machine_id = b.id;
  o.event_log = {};
  o.verdict = "none";
  o.violations = {};
  ASSERT_TRUE(store_->RecordBootObservation(o).ok());
  o.machine_id = other.id;
  o.pool = "masters";
  ASSERT_TRUE(store_->RecordBootObservation(o).ok());
  EXPECT_EQ(AuditCount(), audit_before) << "an observation is not a state change";

  auto list = store_->ListBootObservations("workers");
  ASSERT_TRUE(list.ok()) << list.status().ToString();
  ASSERT_EQ(list->size(), 2u);
  EXPECT_EQ((*list)[0].hostname, "a.rack");
  EXPECT_EQ((*list)[0].at, 200);
  EXPECT_EQ((*list)[0].event_log, B("log-a-2"));
  EXPECT_EQ((*list)[0].verdict, "fail");
  EXPECT_EQ((*list)[0].violations, std::vector<std::string>{"secure_boot:secure_boot_disabled"});
  EXPECT_EQ((*list)[0].tpm_manufacturer, a.tpm_manufacturer);
  EXPECT_EQ((*list)[1].hostname, "b.rack");
  EXPECT_TRUE((*list)[1].event_log.empty());

  // c.rack was observed in masters but lives in workers: no pool's evidence.
  EXPECT_TRUE(store_->ListBootObservations("masters")->empty());

  // Deleted with the machine.
  ASSERT_TRUE(store_->DeleteMachine("a.rack", Op(), 300).ok());
  EXPECT_EQ(store_->ListBootObservations("workers")->size(), 1u);
}

TEST_F(StoreTest, ObservationRefusals) {
  BootObservation o;
  o.machine_id = 424242;
  o.pool = "workers";
  o.pcrs_json = "{}";
  ExpectFailure(store_->RecordBootObservation(o), Status::Code::kNotFound, "machine_unknown");
  Machine a = Enroll("a.rack", "a");
  o.machine_id = a.id;
  o.verdict = "maybe";
  ExpectFailure(store_->RecordBootObservation(o), Status::Code::kInvalidArgument, "field_invalid");
  o.verdict = "none";
  o.violations.assign(300, "x:y");
  ExpectFailure(store_->RecordBootObservation(o), Status::Code::kInvalidArgument, "field_invalid");
}

}  // namespace
}  // namespace rackgate::storage
