// The webhook outbox (core/webhook_outbox.h) over a real store (SQLite, or
// PostgreSQL under script/pg-lab): subscriptions, a claimed delivery's body,
// a failure's retry delay and when it is due again, a delivery recorded
// once, the purge, and the store's refusal passed on (the fake keeps no
// events).
#include "core/webhook_outbox.h"

#include <gtest/gtest.h>

#include <memory>
#include <string>

#include "core/events.h"
#include "core/testing/core_fixture.h"

namespace rackgate::core::testing {
namespace {

constexpr char kHook[] = "https://hooks.example/a";
constexpr char kOther[] = "https://hooks.example/b";
constexpr int64_t kLease = 60;

class WebhookOutboxTest : public CoreTest {
 protected:
  void SetUp() override {
    CoreTest::SetUp();
    if (skip_) return;
    machine_ = Enroll(tpm_, "node-1");
    outbox_ = std::make_unique<WebhookOutbox>(store_.get(), RetrySchedule{10, 40});
    auto dropped = outbox_->Subscribe({{kHook, {}}}, now_);
    ASSERT_TRUE(dropped.ok()) << dropped.status().ToString();
    EXPECT_EQ(*dropped, 0);
  }
  // One machine_untrusted event of node-1.
  void Untrusted() {
    ASSERT_TRUE(
        store_->AuditMachineEvent(machine_.id, "untrusted", R"({"reason":"r1"})", storage::Actor{"op", "why"}, now_)
            .ok());
  }

  SoftMachine tpm_;
  storage::Machine machine_;
  std::unique_ptr<WebhookOutbox> outbox_;
};

TEST_F(WebhookOutboxTest, AClaimedDeliveryCarriesTheEventsBody) {
  Untrusted();
  auto due = outbox_->Claim(now_, 10, kLease);
  ASSERT_TRUE(due.ok()) << due.status().ToString();
  ASSERT_EQ(due->size(), 1u);
  const OutboundDelivery& d = due->front();
  EXPECT_EQ(d.webhook, kHook);
  EXPECT_EQ(d.event_type, "machine_untrusted");
  EXPECT_EQ(d.attempts, 0);
  auto events = store_->ListEvents({});
  ASSERT_TRUE(events.ok());
  ASSERT_EQ(events->size(), 1u);
  EXPECT_EQ(d.event_id, events->front().id);
  EXPECT_EQ(d.body, EventBody(events->front()));
  // Claimed: not due again for the lease.
  auto again = outbox_->Claim(now_ + kLease - 1, 10, kLease);
  ASSERT_TRUE(again.ok());
  EXPECT_TRUE(again->empty());
}

TEST_F(WebhookOutboxTest, AFailureIsDueAgainAfterItsScheduledDelay) {
  Untrusted();
  auto due = outbox_->Claim(now_, 10, kLease);
  ASSERT_TRUE(due.ok() && due->size() == 1u);
  // Attempt 1 failed: the base delay (no jitter: the whole of it).
  auto delay = outbox_->Record(due->front(), false, "HTTP 500", 0.0, now_);
  ASSERT_TRUE(delay.ok()) << delay.status().ToString();
  EXPECT_EQ(*delay, 10);
  EXPECT_TRUE(outbox_->Claim(now_ + 9, 10, kLease)->empty());
  auto retry = outbox_->Claim(now_ + 10, 10, kLease);
  ASSERT_TRUE(retry.ok());
  ASSERT_EQ(retry->size(), 1u);
  EXPECT_EQ(retry->front().attempts, 1);
  // Attempt 2 failed: doubled; the jitter takes up to half of it off.
  EXPECT_EQ(*outbox_->Record(retry->front(), false, "timeout", 0.5, now_ + 10), 15);
  // However many failed, capped at the schedule's 40 s.
  OutboundDelivery later = retry->front();
  later.attempts = 5;
  EXPECT_EQ(*outbox_->Record(later, false, "timeout", 0.0, now_ + 10), 40);
  EXPECT_EQ(*outbox_->Pending(), 1);
}

TEST_F(WebhookOutboxTest, ADeliveredOneIsDoneAndPurgedWithItsEvent) {
  Untrusted();
  auto due = outbox_->Claim(now_, 10, kLease);
  ASSERT_TRUE(due.ok() && due->size() == 1u);
  auto delay = outbox_->Record(due->front(), true, "", 0.5, now_);
  ASSERT_TRUE(delay.ok());
  EXPECT_EQ(*delay, 0);
  EXPECT_EQ(*outbox_->Pending(), 0);
  EXPECT_TRUE(outbox_->Claim(now_ + 3600, 10, kLease)->empty());
  auto purged = outbox_->Purge(now_ + 1, 1000);
  ASSERT_TRUE(purged.ok()) << purged.status().ToString();
  EXPECT_EQ(*purged, 1);
  EXPECT_TRUE(store_->ListEvents({})->empty());
}

TEST_F(WebhookOutboxTest, ASubscriptionDroppedTakesItsUndeliveredDeliveries) {
  Untrusted();
  EXPECT_EQ(*outbox_->Pending(), 1);
  auto dropped = outbox_->Subscribe({{kOther, {"machine_revoked"}}}, now_);
  ASSERT_TRUE(dropped.ok()) << dropped.status().ToString();
  EXPECT_EQ(*dropped, 1);
  EXPECT_EQ(*outbox_->Pending(), 0);
  // The new subscription takes only its types.
  Untrusted();
  EXPECT_EQ(*outbox_->Pending(), 0);
  ASSERT_TRUE(store_->Revoke("node-1", storage::Actor{"op", "stolen"}, now_).ok());
  auto due = outbox_->Claim(now_, 10, kLease);
  ASSERT_TRUE(due.ok());
  ASSERT_EQ(due->size(), 1u);
  EXPECT_EQ(due->front().webhook, kOther);
  EXPECT_EQ(due->front().event_type, "machine_revoked");
}

class WebhookOutboxOnFakeTest : public CoreTest {
 protected:
  WebhookOutboxOnFakeTest() : CoreTest(StoreBackend::kFake) {}
};

TEST_F(WebhookOutboxOnFakeTest, PassesTheStoresRefusalOn) {
  WebhookOutbox outbox(store_.get(), RetrySchedule{});
  auto claimed = outbox.Claim(now_, 10, kLease);
  ASSERT_FALSE(claimed.ok());
  EXPECT_EQ(claimed.status().reason(), "fake_unsupported");
  OutboundDelivery d;
  d.event_id = 1;
  d.webhook = kHook;
  auto recorded = outbox.Record(d, false, "x", 0.0, now_);
  ASSERT_FALSE(recorded.ok());
  EXPECT_EQ(recorded.status().reason(), "fake_unsupported");
}

}  // namespace
}  // namespace rackgate::core::testing
