// The admin API's audit list (core/audit_service.h) on every store: the
// rows as shown, ascending, the hostname filter, following the log, the
// limit's clamp.
#include "core/audit_service.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>

#include "core/testing/core_fixture.h"

namespace rackgate::core::testing {
namespace {

using nlohmann::json;

class AuditServiceTest : public EveryStoreTest {
 protected:
  void SetUp() override {
    EveryStoreTest::SetUp();
    if (skip_) return;
    Enroll(first_, "node-1");
    Enroll(second_, "node-2");
    now_ += 10;
    ASSERT_TRUE(store_->Revoke("node-1", storage::Actor{"operator", "disk stolen"}, now_).ok());
  }
  SoftMachine first_;
  SoftMachine second_;
};

TEST_P(AuditServiceTest, ListsTheNewestRowsAscending) {
  AuditService service(store_.get());
  auto all = service.List(std::nullopt, 100, 0);
  ASSERT_TRUE(all.ok()) << all.status().ToString();
  ASSERT_GE(all->size(), 3u);
  for (size_t i = 1; i < all->size(); ++i) EXPECT_LT((*all)[i - 1].id, (*all)[i].id);
  const wire::AuditEntryView& revoked = all->back();
  EXPECT_EQ(revoked.action, "revoke");
  EXPECT_EQ(revoked.hostname, "node-1");
  EXPECT_EQ(revoked.actor, "operator");
  EXPECT_EQ(revoked.why, "disk stolen");
  EXPECT_EQ(revoked.at, now_);
  ASSERT_TRUE(revoked.to_state.has_value());
  EXPECT_EQ(*revoked.to_state, "revoked");
  ASSERT_TRUE(revoked.detail_json.has_value());
  EXPECT_TRUE(json::parse(*revoked.detail_json, nullptr, false).is_object());

  // The newest one only; then following the log from the first row.
  auto newest = service.List(std::nullopt, 1, 0);
  ASSERT_TRUE(newest.ok());
  ASSERT_EQ(newest->size(), 1u);
  EXPECT_EQ(newest->front().id, revoked.id);
  auto after = service.List(std::nullopt, 100, all->front().id);
  ASSERT_TRUE(after.ok());
  EXPECT_EQ(after->size(), all->size() - 1);
  EXPECT_EQ(after->front().id, (*all)[1].id);
}

TEST_P(AuditServiceTest, FiltersByHostname) {
  AuditService service(store_.get());
  auto two = service.List(std::string("node-2"), 100, 0);
  ASSERT_TRUE(two.ok());
  ASSERT_FALSE(two->empty());
  for (const auto& e : *two) EXPECT_EQ(e.hostname, "node-2");
  auto none = service.List(std::string("node-9"), 100, 0);
  ASSERT_TRUE(none.ok());
  EXPECT_TRUE(none->empty());
}

TEST_P(AuditServiceTest, ClampsTheLimit) {
  AuditService service(store_.get());
  for (int64_t limit : {int64_t{0}, int64_t{-1}}) {
    auto one = service.List(std::nullopt, limit, 0);
    ASSERT_TRUE(one.ok());
    EXPECT_EQ(one->size(), 1u) << limit;
  }
  auto all = service.List(std::nullopt, int64_t{1} << 40, 0);
  ASSERT_TRUE(all.ok());
  EXPECT_GE(all->size(), 3u);
}

RACKGATE_ON_EVERY_STORE(AuditServiceTest);

}  // namespace
}  // namespace rackgate::core::testing
