// The operator's side of manual CSR approval (core/csr_approval_service.h)
// on every store: what a list and a decision answer, and a case for every
// refusal the service returns.
#include "core/csr_approval_service.h"

#include <gtest/gtest.h>

#include <memory>
#include <string>

#include "base/hex.h"
#include "core/testing/core_fixture.h"

namespace rackgate::core::testing {
namespace {

class CsrApprovalServiceTest : public EveryStoreTest {
 protected:
  void SetUp() override {
    EveryStoreTest::SetUp();
    if (skip_) return;
    machine_ = Enroll(tpm_, "node-1");
    service_ = std::make_unique<CsrApprovalService>(store_.get(), store_.get(), [this] { return now_; });
  }
  // A waiting client CSR of node-1 for a key whose SHA-256 is `key_byte`
  // repeated; its id.
  int64_t Queue(uint8_t key_byte) {
    storage::CsrApprovalRequest r;
    r.machine_id = machine_.id;
    r.kind = storage::kCertClient;
    r.public_key_sha256 = Bytes(32, key_byte);
    r.csr_pem = "-----BEGIN CERTIFICATE REQUEST-----\nAA==\n-----END CERTIFICATE REQUEST-----\n";
    r.usages = {"client auth"};
    auto q = store_->QueueCsrRequest(r, {}, storage::Actor{"rackgated", "csr"}, now_);
    EXPECT_TRUE(q.ok()) << q.status().ToString();
    return q.ok() ? q->id : 0;
  }

  SoftMachine tpm_;
  storage::Machine machine_;
  storage::Actor operator_{"operator", ""};
  std::unique_ptr<CsrApprovalService> service_;
};

TEST_P(CsrApprovalServiceTest, ListsWaitingThenEveryRequest) {
  const int64_t first = Queue(0x01);
  now_ += 30;
  const int64_t second = Queue(0x02);
  now_ += 90;
  auto waiting = service_->List(false, 1000);
  ASSERT_TRUE(waiting.ok()) << waiting.status().ToString();
  ASSERT_EQ(waiting->size(), 2u);
  const wire::CsrView& c = waiting->front();  // oldest first
  EXPECT_EQ(c.id, first);
  EXPECT_EQ(c.hostname, "node-1");
  EXPECT_EQ(c.kind, storage::kCertClient);
  EXPECT_EQ(c.public_key_sha256, hex::Encode(Bytes(32, 0x01)));
  EXPECT_EQ(c.state, storage::kCsrWaiting);
  EXPECT_EQ(c.age_seconds, 120);
  EXPECT_TRUE(c.current);
  EXPECT_FALSE(c.decided_at.has_value());

  ASSERT_TRUE(service_->Decide(std::to_string(first), true, "", operator_).ok());
  auto still = service_->List(false, 1000);
  ASSERT_TRUE(still.ok());
  ASSERT_EQ(still->size(), 1u);
  EXPECT_EQ(still->front().id, second);
  auto all = service_->List(true, 1000);
  ASSERT_TRUE(all.ok());
  EXPECT_EQ(all->size(), 2u);
  auto one = service_->List(true, 1);
  ASSERT_TRUE(one.ok());
  EXPECT_EQ(one->size(), 1u);
  // The limit is clamped: below 1 is 1, an int64 never wraps into an int.
  for (int64_t limit : {int64_t{0}, int64_t{-1}}) {
    auto clamped = service_->List(true, limit);
    ASSERT_TRUE(clamped.ok());
    EXPECT_EQ(clamped->size(), 1u) << limit;
  }
  auto most = service_->List(true, (int64_t{1} << 32) + 1);
  ASSERT_TRUE(most.ok());
  EXPECT_EQ(most->size(), 2u);
}

TEST_P(CsrApprovalServiceTest, ApprovesAndDenies) {
  const int64_t approved = Queue(0x01);
  const int64_t denied = Queue(0x02);
  now_ += 5;
  auto a = service_->Decide(std::to_string(approved), true, "", operator_);
  ASSERT_TRUE(a.ok()) << a.status().ToString();
  EXPECT_EQ(a->state, storage::kCsrApproved);
  EXPECT_EQ(a->decided_by, "operator");
  ASSERT_TRUE(a->decided_at.has_value());
  EXPECT_EQ(*a->decided_at, now_);
  EXPECT_EQ(a->deny_reason, "");

  auto d = service_->Decide(std::to_string(denied), false, "unknown rack", operator_);
  ASSERT_TRUE(d.ok()) << d.status().ToString();
  EXPECT_EQ(d->state, storage::kCsrDenied);
  EXPECT_EQ(d->deny_reason, "unknown rack");
  EXPECT_EQ(d->age_seconds, 5);
}

TEST_P(CsrApprovalServiceTest, DecideRefusals) {
  const int64_t id = Queue(0x01);
  const std::string text = std::to_string(id);
  struct Case {
    std::string id;
    bool approve;
    std::string reason;
    const char* expected;
  };
  for (const Case& c : {
           Case{"", true, "", "field_invalid"},
           Case{"0", true, "", "field_invalid"},
           Case{"-3", true, "", "field_invalid"},
           Case{"12x", true, "", "field_invalid"},
           Case{"99999999999999999999", true, "", "field_invalid"},
           Case{text, false, "", "field_missing"},
           Case{text, false, std::string(257, 'r'), "field_invalid"},
           Case{text, false, "tab\there", "field_invalid"},
           Case{std::to_string(id + 100), true, "", "csr_request_unknown"},
       }) {
    auto r = service_->Decide(c.id, c.approve, c.reason, operator_);
    EXPECT_EQ(ReasonOf(r), c.expected) << "id '" << c.id << "' reason '" << c.reason << "'";
  }
  // Nothing above decided it; once decided, it stays so.
  ASSERT_TRUE(service_->Decide(text, false, "unknown rack", operator_).ok());
  EXPECT_EQ(ReasonOf(service_->Decide(text, true, "", operator_)), "state_conflict");
  EXPECT_EQ(service_->Decide(std::to_string(id + 100), true, "", operator_).status().code(),
            Status::Code::kNotFound);
}

RACKGATE_ON_EVERY_STORE(CsrApprovalServiceTest);

}  // namespace
}  // namespace rackgate::core::testing
