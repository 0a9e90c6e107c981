// Tests of provisioning reports: the token first, the body's refusal passed
// through, the last report stored and replaced, no audit row.
#include "core/report_service.h"

#include <gtest/gtest.h>

#include "core/testing/core_fixture.h"

namespace rackgate::core::testing {
namespace {

class ReportServiceTest : public CoreTest {
 protected:
  ReportServiceTest() : reports_(store_.get(), attestation_.get()) {}
  size_t AuditRows() {
    storage::AuditFilter f;
    f.limit = 10000;
    return store_->ListAudit(f)->size();
  }
  ReportService reports_;
};

wire::ProvisioningReport Failed() {
  wire::ProvisioningReport r;
  r.outcome = "failed";
  r.step = "config";
  r.reason = "config_unavailable";
  r.message = "GET /v1/machine/config: 503";
  r.exit_status = 4;
  r.done = {"attested"};
  return r;
}

TEST_F(ReportServiceTest, TheTokenComesFirst) {
  EXPECT_EQ(reports_.Record(std::nullopt, Failed()).reason(), "token_missing");
  EXPECT_EQ(reports_.Record(std::string("no-such-token"), Failed()).reason(), "token_unknown");
  // An unauthenticated caller's malformed body is still a token question.
  EXPECT_EQ(reports_.Record(std::nullopt, Status::InvalidArgument("bad_json", "x")).reason(), "token_missing");
  EXPECT_TRUE(store_->ListLastReports()->empty());
}

TEST_F(ReportServiceTest, RecordsTheLastReportWithoutAnAuditRow) {
  SoftMachine m;
  auto machine = Enroll(m, "node-1");
  const std::string token = Attest(m).token;
  EXPECT_EQ(reports_.Record(token, Status::InvalidArgument("field_invalid", "outcome")).reason(), "field_invalid");
  const size_t rows = AuditRows();
  ASSERT_TRUE(reports_.Record(token, Failed()).ok());
  auto last = store_->LastReport(machine.id);
  ASSERT_TRUE(last.ok()) << last.status().ToString();
  EXPECT_EQ(last->at, now_);
  EXPECT_EQ(last->outcome, "failed");
  EXPECT_EQ(last->step, "config");
  EXPECT_EQ(last->reason, "config_unavailable");
  EXPECT_EQ(last->message, "GET /v1/machine/config: 503");
  EXPECT_EQ(last->exit_status, 4);

  now_ += 30;
  wire::ProvisioningReport ok;
  ok.outcome = "ok";
  ok.step = "csr";
  ok.done = {"config_applied", "client_certificate_written"};
  ASSERT_TRUE(reports_.Record(token, ok).ok());
  last = store_->LastReport(machine.id);
  ASSERT_TRUE(last.ok());
  EXPECT_EQ(last->outcome, "ok");
  EXPECT_EQ(last->at, now_);
  EXPECT_EQ(last->done, (std::vector<std::string>{"config_applied", "client_certificate_written"}));
  EXPECT_EQ(store_->ListLastReports()->size(), 1u);
  EXPECT_EQ(AuditRows(), rows);
}

}  // namespace
}  // namespace rackgate::core::testing
