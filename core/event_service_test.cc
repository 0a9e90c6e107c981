// The admin API's event list (core/event_service.h) over a real store
// (SQLite, or PostgreSQL under script/pg-lab): the events as webhooks receive
// them with their deliveries, the limit's clamp, the pending filter, and the
// store's refusal passed on (the fake keeps no events).
#include "core/event_service.h"

#include <gtest/gtest.h>

#include <memory>
#include <nlohmann/json.hpp>
#include <string>

#include "core/events.h"
#include "core/testing/core_fixture.h"

namespace rackgate::core::testing {
namespace {

using nlohmann::json;

constexpr char kHook[] = "https://hooks.example/a";

class EventServiceTest : public CoreTest {
 protected:
  void SetUp() override {
    CoreTest::SetUp();
    if (skip_) return;
    machine_ = Enroll(tpm_, "node-1");
    ASSERT_TRUE(store_->SyncWebhooks({storage::WebhookTarget{kHook, {}}}, now_).ok());
    service_ = std::make_unique<EventService>(store_.get());
  }
  // One machine_untrusted event of node-1; its id.
  int64_t Untrusted(const std::string& why) {
    EXPECT_TRUE(
        store_->AuditMachineEvent(machine_.id, "untrusted", R"({"reason":"r1"})", storage::Actor{"op", why}, now_)
            .ok());
    auto events = store_->ListEvents({});
    EXPECT_TRUE(events.ok() && !events->empty());
    return events.ok() && !events->empty() ? events->front().id : 0;
  }

  SoftMachine tpm_;
  storage::Machine machine_;
  std::unique_ptr<EventService> service_;
};

TEST_F(EventServiceTest, ListsEventsAsWebhooksReceiveThemWithTheirDeliveries) {
  const int64_t first = Untrusted("disk stolen");
  now_ += 10;
  const int64_t second = Untrusted("");
  ASSERT_TRUE(store_->RecordDeliveryAttempt(first, kHook, false, now_ + 60, "HTTP 500", now_).ok());
  ASSERT_TRUE(store_->RecordDeliveryAttempt(second, kHook, true, 0, "", now_).ok());

  auto all = service_->List(100, false);
  ASSERT_TRUE(all.ok()) << all.status().ToString();
  ASSERT_EQ(all->size(), 2u);
  const wire::EventView& newest = all->front();
  EXPECT_EQ(newest.id, second);
  EXPECT_EQ(newest.type, "machine_untrusted");
  EXPECT_EQ(newest.hostname, "node-1");
  EXPECT_EQ(newest.pool, "workers");
  ASSERT_EQ(newest.deliveries.size(), 1u);
  EXPECT_EQ(newest.deliveries[0].webhook, kHook);
  EXPECT_EQ(newest.deliveries[0].attempts, 1);
  EXPECT_EQ(newest.deliveries[0].delivered_at, now_);

  // The body's detail as the webhook received it: the actor and the why.
  const wire::EventView& oldest = all->back();
  EXPECT_EQ(oldest.id, first);
  auto stored = store_->ListEvents({});
  ASSERT_TRUE(stored.ok());
  const json body = json::parse(EventBody(stored->back()));
  EXPECT_EQ(json::parse(oldest.detail_json), body.at("detail"));
  EXPECT_EQ(json::parse(oldest.detail_json).at("why"), "disk stolen");
  ASSERT_EQ(oldest.deliveries.size(), 1u);
  EXPECT_FALSE(oldest.deliveries[0].delivered_at.has_value());
  EXPECT_EQ(oldest.deliveries[0].next_attempt_at, now_ + 60);
  EXPECT_EQ(oldest.deliveries[0].last_error, "HTTP 500");

  auto pending = service_->List(100, true);
  ASSERT_TRUE(pending.ok());
  ASSERT_EQ(pending->size(), 1u);
  EXPECT_EQ(pending->front().id, first);
}

TEST_F(EventServiceTest, ClampsTheLimit) {
  for (int i = 0; i < 3; ++i) Untrusted("");
  for (int64_t limit : {int64_t{0}, int64_t{-5}, int64_t{1}}) {
    auto one = service_->List(limit, false);
    ASSERT_TRUE(one.ok());
    EXPECT_EQ(one->size(), 1u) << limit;
  }
  auto many = service_->List(int64_t{1} << 40, false);
  ASSERT_TRUE(many.ok());
  EXPECT_EQ(many->size(), 3u);
}

class EventServiceOnFakeTest : public CoreTest {
 protected:
  EventServiceOnFakeTest() : CoreTest(StoreBackend::kFake) {}
};

TEST_F(EventServiceOnFakeTest, PassesTheStoresRefusalOn) {
  EventService service(store_.get());
  auto r = service.List(100, false);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().reason(), "fake_unsupported");
}

}  // namespace
}  // namespace rackgate::core::testing
