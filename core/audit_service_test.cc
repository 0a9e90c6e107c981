// The admin API's audit log (core/audit_service.h). The list on every
// store: the rows as shown, ascending, the hostname filter, following the
// log, the limit's clamp. The chain's verification on the real backends
// (the fake keeps no chain: its refusal is passed on): intact, anchored,
// broken by an anchor, and every malformed anchor.
#include "core/audit_service.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <optional>
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

// Issue 32: only refused changes are audited (docs/audit.md).
TEST(AuditRefusals, OnlyRefusedChangesAreAudited) {
  EXPECT_FALSE(RefusalIsAudited("GET"));
  EXPECT_FALSE(RefusalIsAudited("HEAD"));
  for (const char* m : {"POST", "PUT", "PATCH", "DELETE", "other"}) EXPECT_TRUE(RefusalIsAudited(m)) << m;
}

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

// The admin_refused row byte for byte (the hash chain covers it), with and
// without a uid.
TEST_P(AuditServiceTest, AnAdminRefusalRowIsWrittenByteForByte) {
  AuditService service(store_.get());
  AdminRefusalRecord r{"POST", "/v1/admin/machines/{hostname}/revoke", "state_conflict", "uid:1000(op)", 1000u,
                       "node-2"};
  ASSERT_TRUE(service.RecordAdminRefusal(r, now_ + 1).ok());
  storage::AuditFilter f;
  f.hostname = "node-2";
  auto rows = store_->ListAudit(f);
  ASSERT_TRUE(rows.ok() && !rows->empty());
  EXPECT_EQ(rows->back().detail_json, R"({"method":"POST","reason":"state_conflict",)"
                                      R"x("route":"/v1/admin/machines/{hostname}/revoke","uid":1000,"user":"uid:1000(op)"})x");
  r.uid.reset();
  r.user = "op \"x\"";
  ASSERT_TRUE(service.RecordAdminRefusal(r, now_ + 2).ok());
  rows = store_->ListAudit(f);
  ASSERT_TRUE(rows.ok() && !rows->empty());
  EXPECT_EQ(rows->back().detail_json, R"({"method":"POST","reason":"state_conflict",)"
                                      R"("route":"/v1/admin/machines/{hostname}/revoke","user":"op \"x\""})");
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

class AuditVerifyTest : public CoreTest {
 protected:
  void SetUp() override {
    CoreTest::SetUp();
    if (skip_) return;
    Enroll(machine_, "node-1");
    auto rows = store_->ListAudit({});
    ASSERT_TRUE(rows.ok() && !rows->empty());
    first_ = rows->front();
  }
  Result<AuditVerdict> Verify(const std::optional<std::string>& anchor) {
    return AuditService(store_.get()).Verify(anchor, storage::Actor{"operator", ""});
  }
  SoftMachine machine_;
  storage::AuditEntry first_;
};

TEST_F(AuditVerifyTest, IntactWithAndWithoutAnAnchor) {
  auto plain = Verify(std::nullopt);
  ASSERT_TRUE(plain.ok()) << plain.status().ToString();
  EXPECT_TRUE(plain->report.intact);
  EXPECT_GE(plain->report.rows, 1);
  EXPECT_GE(plain->report.head_id, first_.id);
  EXPECT_EQ(plain->report.head_hash.size(), 64u);
  EXPECT_EQ(plain->report.bad_row_id, 0);
  EXPECT_EQ(plain->message, "");

  auto anchored = Verify(std::to_string(first_.id) + ":" + first_.hash);
  ASSERT_TRUE(anchored.ok()) << anchored.status().ToString();
  EXPECT_TRUE(anchored->report.intact);
}

TEST_F(AuditVerifyTest, AWrongOrMissingAnchorIsABrokenChainNotARefusal) {
  auto wrong = Verify(std::to_string(first_.id) + ":" + std::string(64, '0'));
  ASSERT_TRUE(wrong.ok()) << wrong.status().ToString();
  EXPECT_FALSE(wrong->report.intact);
  EXPECT_EQ(wrong->report.problem, "anchor_mismatch");
  EXPECT_EQ(wrong->report.bad_row_id, first_.id);
  EXPECT_FALSE(wrong->message.empty());

  auto missing = Verify("999999:" + first_.hash);
  ASSERT_TRUE(missing.ok()) << missing.status().ToString();
  EXPECT_FALSE(missing->report.intact);
  EXPECT_EQ(missing->report.problem, "anchor_missing");
}

TEST_F(AuditVerifyTest, RefusesAMalformedAnchor) {
  for (const char* anchor : {"", "5", "abc:aa", "0:aa", "-1:aa", "5x:aa", "99999999999999999999:aa", ":aa"}) {
    auto r = Verify(std::string(anchor));
    EXPECT_EQ(ReasonOf(r), "field_invalid") << anchor;
  }
}

class AuditVerifyOnFakeTest : public CoreTest {
 protected:
  AuditVerifyOnFakeTest() : CoreTest(StoreBackend::kFake) {}
};

TEST_F(AuditVerifyOnFakeTest, PassesTheStoresRefusalOn) {
  auto r = AuditService(store_.get()).Verify(std::nullopt, storage::Actor{"operator", ""});
  EXPECT_EQ(ReasonOf(r), "fake_unsupported");
}

}  // namespace
}  // namespace rackgate::core::testing
