// Tests for the observability module: the series a fresh appliance shows,
// the scrape-time gauges, and the bound on audited admin refusals.
#include "daemon/observability.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "storage/store.h"
#include "storage/testing/test_store.h"

namespace rackgate::daemon {
namespace {

std::string TempDirPath() {
  char dir[] = "/tmp/rackgate-obs-XXXXXX";
  return ::mkdtemp(dir) != nullptr ? dir : "/tmp";
}

TEST(Observability, FreshApplianceSeries) {
  Metrics m;
  DeclareApplianceMetrics(&m, "1.2.3");
  const std::string text = m.Render();
  EXPECT_NE(text.find("rackgate_build_info{version=\"1.2.3\"} 1\n"), std::string::npos);
  EXPECT_NE(text.find("rackgate_machines{state=\"revoked\"} 0\n"), std::string::npos);
  EXPECT_NE(text.find("rackgate_attestations_total{reason=\"machine_revoked\",verdict=\"refused\"} 0\n"),
            std::string::npos);
  EXPECT_NE(text.find("rackgate_attestations_total{reason=\"machine_not_enrolled\",verdict=\"wait\"} 0\n"),
            std::string::npos);
  // Only what a machine can receive labels the attestation series: not an
  // operator's reason, not a local one (wire/reasons.def's audience).
  EXPECT_EQ(text.find("reason=\"ek_cert_machine_unknown\""), std::string::npos);
  EXPECT_EQ(text.find("reason=\"db_newer_than_code\""), std::string::npos);
  EXPECT_NE(text.find("rackgate_attestation_duration_seconds_bucket{le=\"+Inf\"} 0\n"), std::string::npos);
  EXPECT_NE(text.find("process_resident_memory_bytes "), std::string::npos);
  EXPECT_NE(text.find("process_max_fds "), std::string::npos);
  EXPECT_NE(text.find("process_start_time_seconds "), std::string::npos);
}

TEST(Observability, ScrapeCountsMachinesAndReadsExpiry) {
  if (auto why = storage::testing::BackendUnavailable()) GTEST_SKIP() << *why;
  const std::string dir = TempDirPath();
  auto store = storage::testing::OpenTestStore(dir + "/db");
  ASSERT_TRUE(store.ok()) << store.status().ToString();
  Metrics m;
  core::FleetCounter fleet(store->get(), store->get());
  CollectScrapeMetrics(&m, &fleet, {dir + "/missing.crt", dir + "/missing-ca.crt", ""}, 1800000000);
  const std::string text = m.Render();
  EXPECT_NE(text.find("rackgate_machines{state=\"joined\"} 0\n"), std::string::npos) << text;
  EXPECT_NE(text.find("rackgate_machines_untrusted 0\n"), std::string::npos) << text;
  EXPECT_NE(text.find("rackgate_sessions_in_flight 0\n"), std::string::npos) << text;
  EXPECT_NE(text.find("rackgate_db_up 1\n"), std::string::npos) << text;
  EXPECT_EQ(text.find("rackgate_db_errors_total"), std::string::npos) << text;
  // No certificate files: no expiry series, and no error.
  EXPECT_EQ(text.find("rackgate_certificate_expiry_timestamp_seconds{"), std::string::npos) << text;
  EXPECT_FALSE(CertificateNotAfter(dir + "/missing.crt").has_value());
}

// docs/policy.md, "Observe": an observing pool is 1, an enforcing one 0,
// so that one can never be taken for the other on a dashboard.
TEST(Observability, ObservingPoolsAreAGaugeOfTheirOwn) {
  if (auto why = storage::testing::BackendUnavailable()) GTEST_SKIP() << *why;
  const std::string dir = TempDirPath();
  auto store = storage::testing::OpenTestStore(dir + "/db");
  ASSERT_TRUE(store.ok()) << store.status().ToString();
  const storage::Actor op{"test", ""};
  ASSERT_TRUE((*store)->PutPool(storage::Pool{"observed"}, op, 1).ok());
  ASSERT_TRUE((*store)->PutPool(storage::Pool{"enforced"}, op, 1).ok());
  storage::PoolPolicyChange observe;
  observe.pool = "observed";
  observe.mode = storage::kPolicyModeObserve;
  ASSERT_TRUE((*store)->SetPoolBootPolicy(observe, op, 2).ok());
  Metrics m;
  core::FleetCounter fleet(store->get(), store->get());
  CollectScrapeMetrics(&m, &fleet, {dir + "/missing.crt", dir + "/missing-ca.crt", ""}, 3);
  const std::string text = m.Render();
  EXPECT_NE(text.find("rackgate_pool_boot_policy_observing{pool=\"observed\"} 1\n"), std::string::npos) << text;
  EXPECT_NE(text.find("rackgate_pool_boot_policy_observing{pool=\"enforced\"} 0\n"), std::string::npos) << text;
}

// A refusal log over a fresh store; the admin_refused rows it wrote.
class RefusalLogTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (auto why = storage::testing::BackendUnavailable()) GTEST_SKIP() << *why;
    auto store = storage::testing::OpenTestStore(TempDirPath() + "/db");
    ASSERT_TRUE(store.ok()) << store.status().ToString();
    store_ = std::move(store).value();
    audit_ = std::make_unique<core::AuditService>(store_.get());
  }
  // A 404 hostname_unknown refusal of `method` on `route`.
  static AdminRefusal Refusal(const std::string& method, const std::string& route) {
    AdminRefusal r;
    r.method = method;
    r.route = route;
    r.status = 404;
    r.reason = "hostname_unknown";
    r.peer = PeerCred{1, ::geteuid(), ::getegid(), {}};
    r.params["hostname"] = "node-1";
    return r;
  }
  // The detail of every admin_refused row.
  std::vector<std::string> RefusedRows() {
    storage::AuditFilter f;
    f.limit = 100;
    auto rows = store_->ListAudit(f);
    EXPECT_TRUE(rows.ok()) << rows.status().ToString();
    std::vector<std::string> out;
    if (!rows.ok()) return out;
    for (const auto& row : *rows) {
      if (row.action == "admin_refused") out.push_back(row.detail_json);
    }
    return out;
  }

  std::unique_ptr<storage::Store> store_;
  std::unique_ptr<core::AuditService> audit_;
  Metrics metrics_;
};

TEST_F(RefusalLogTest, AuditedRefusalsAreBoundedPerMinute) {
  AdminRefusalLog log(audit_.get(), &metrics_, 3);
  const AdminRefusal r = Refusal("POST", "/v1/admin/machines/{hostname}/revoke");
  for (int i = 0; i < 10; ++i) log.Record(r, 6000 + i);  // one minute
  log.Record(r, 6060);                                    // the next
  const auto refused = RefusedRows();
  for (const auto& detail : refused) {
    EXPECT_NE(detail.find("\"route\":\"/v1/admin/machines/{hostname}/revoke\""), std::string::npos);
    EXPECT_NE(detail.find("\"reason\":\"hostname_unknown\""), std::string::npos);
    EXPECT_NE(detail.find("\"uid\":"), std::string::npos);
  }
  EXPECT_EQ(refused.size(), 4u);  // 3 in the first minute, 1 in the next
  const std::string text = metrics_.Render();
  EXPECT_NE(text.find("rackgate_admin_refusals_total{reason=\"hostname_unknown\"} 11\n"), std::string::npos) << text;
  EXPECT_NE(text.find("rackgate_admin_refusals_unaudited_total 7\n"), std::string::npos) << text;
}

// Issue 32: a refused read (`rackgatectl show` with a typo) is logged and
// counted but never becomes a permanent audit row, and takes no share of
// the minute's budget; a refused change in the same minute still does.
TEST_F(RefusalLogTest, RefusedReadsAreNotAudited) {
  AdminRefusalLog log(audit_.get(), &metrics_, 1);
  for (int i = 0; i < 5; ++i) log.Record(Refusal("GET", "/v1/admin/machines/{hostname}"), 7200 + i);
  log.Record(Refusal("POST", "/v1/admin/machines/{hostname}/revoke"), 7210);
  const auto refused = RefusedRows();
  ASSERT_EQ(refused.size(), 1u);
  EXPECT_NE(refused[0].find("\"method\":\"POST\""), std::string::npos) << refused[0];
  const std::string text = metrics_.Render();
  EXPECT_NE(text.find("rackgate_admin_refusals_total{reason=\"hostname_unknown\"} 6\n"), std::string::npos) << text;
  EXPECT_EQ(text.find("rackgate_admin_refusals_unaudited_total 1"), std::string::npos) << text;
}

}  // namespace
}  // namespace rackgate::daemon
