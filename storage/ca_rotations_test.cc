// Tests for the fleet's CA rotation record: each stage change one audit row,
// every refusal with its reason, and the fake keeping the same contract.
#include <gtest/gtest.h>

#include <optional>
#include <string>

#include "storage/store.h"
#include "storage/testing/fake_store.h"
#include "storage/testing/store_test_fixture.h"

namespace rackgate::storage {
namespace {

using testing::Op;
using testing::StoreTest;

const std::string kCur(64, 'a');
const std::string kNext(64, 'b');

CaRotation Rotation() {
  CaRotation r;
  r.current_pem = "-----BEGIN CERTIFICATE-----\ncurrent\n-----END CERTIFICATE-----\n";
  r.current_sha256 = kCur;
  r.next_pem = "-----BEGIN CERTIFICATE-----\nnext\n-----END CERTIFICATE-----\n";
  r.next_sha256 = kNext;
  return r;
}

// The contract, on any store: prepare → switch (twice: two appliances) →
// retire, with the reasons of each refusal and one audit row per change.
void ExpectRotationContract(Store* store) {
  auto none = store->GetCaRotation("appliance");
  ASSERT_TRUE(none.ok()) << none.status().ToString();
  EXPECT_FALSE(none->has_value());
  EXPECT_EQ(store->SwitchCaRotation("appliance", kNext, "{}", Op(), 5).status().reason(), "ca_rotation_none");
  EXPECT_EQ(store->RetireCaRotation("appliance", kNext, "{}", Op(), 5).reason(), "ca_rotation_none");

  auto prepared = store->PrepareCaRotation(Rotation(), R"({"appliance": "a1"})", Op(), 10);
  ASSERT_TRUE(prepared.ok()) << prepared.status().ToString();
  EXPECT_EQ(prepared->stage, kCaStagePrepared);
  EXPECT_EQ(prepared->prepared_at, 10);
  EXPECT_EQ(store->PrepareCaRotation(Rotation(), "{}", Op(), 11).status().reason(), "ca_rotation_in_progress");
  EXPECT_EQ(store->RetireCaRotation("appliance", kNext, "{}", Op(), 12).reason(), "ca_rotation_stage");
  EXPECT_EQ(store->SwitchCaRotation("appliance", kCur, "{}", Op(), 12).status().reason(), "ca_next_mismatch");
  auto got = store->GetCaRotation("appliance");
  ASSERT_TRUE(got.ok() && got->has_value());
  EXPECT_EQ(**got, *prepared);

  auto switched = store->SwitchCaRotation("appliance", kNext, R"({"appliance": "a1"})", Op(), 20);
  ASSERT_TRUE(switched.ok()) << switched.status().ToString();
  EXPECT_EQ(switched->stage, kCaStageSwitched);
  EXPECT_EQ(switched->switched_at, 20);
  auto second = store->SwitchCaRotation("appliance", kNext, R"({"appliance": "a2"})", Op(), 25);
  ASSERT_TRUE(second.ok());
  EXPECT_EQ(second->switched_at, 20);  // the first appliance's switch
  EXPECT_EQ(store->RetireCaRotation("appliance", kCur, "{}", Op(), 30).reason(), "ca_next_mismatch");
  ASSERT_TRUE(store->RetireCaRotation("appliance", kNext, "{}", Op(), 30).ok());
  EXPECT_FALSE(store->GetCaRotation("appliance")->has_value());

  AuditFilter f;
  f.limit = 1000;
  auto audit = store->ListAudit(f);
  ASSERT_TRUE(audit.ok());
  std::vector<std::string> actions;
  for (const auto& a : *audit) {
    if (a.action.rfind("ca_rotation_", 0) != 0) continue;
    actions.push_back(a.action);
    EXPECT_NE(a.detail_json.find("\"kind\":\"appliance\""), std::string::npos) << a.detail_json;
    EXPECT_NE(a.detail_json.find(kNext), std::string::npos) << a.detail_json;
    // Certificates are in the record, never in the audit log.
    EXPECT_EQ(a.detail_json.find("BEGIN CERTIFICATE"), std::string::npos);
  }
  EXPECT_EQ(actions, (std::vector<std::string>{"ca_rotation_prepared", "ca_rotation_switched",
                                               "ca_rotation_switched", "ca_rotation_retired"}));
  // A new rotation may start once the last one is retired.
  EXPECT_TRUE(store->PrepareCaRotation(Rotation(), "{}", Op(), 40).ok());
}

TEST_F(StoreTest, CaRotationStagesEachAuditedOnce) { ExpectRotationContract(store_.get()); }

TEST(FakeStoreCaRotation, KeepsTheSameContract) {
  testing::FakeStore fake;
  ExpectRotationContract(&fake);
}

TEST_F(StoreTest, CaRotationRefusesWhatIsNoRotation) {
  CaRotation same = Rotation();
  same.next_sha256 = same.current_sha256;
  EXPECT_EQ(store_->PrepareCaRotation(same, "{}", Op(), 10).status().reason(), "field_invalid");
  CaRotation cluster = Rotation();
  cluster.kind = "cluster";
  EXPECT_EQ(store_->PrepareCaRotation(cluster, "{}", Op(), 10).status().reason(), "field_invalid");
  CaRotation huge = Rotation();
  huge.next_pem = std::string(64 * 1024, 'x');
  EXPECT_EQ(store_->PrepareCaRotation(huge, "{}", Op(), 10).status().reason(), "field_invalid");
  EXPECT_FALSE(store_->GetCaRotation("appliance")->has_value());
  EXPECT_EQ(store_->GetCaRotation("cluster").status().reason(), "field_invalid");
}

}  // namespace
}  // namespace rackgate::storage
