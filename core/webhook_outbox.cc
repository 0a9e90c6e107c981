// The webhook outbox: the event queue in the delivery thread's words.
#include "core/webhook_outbox.h"

#include <utility>

#include "core/events.h"

namespace rackgate::core {

WebhookOutbox::WebhookOutbox(storage::EventStore* store, RetrySchedule retry) : store_(store), retry_(retry) {}

Result<int64_t> WebhookOutbox::Subscribe(const std::vector<WebhookSubscription>& subscriptions, int64_t now) {
  std::vector<storage::WebhookTarget> targets;
  targets.reserve(subscriptions.size());
  for (const WebhookSubscription& s : subscriptions) targets.push_back({s.url, s.events});
  return store_->SyncWebhooks(targets, now);
}

Result<std::vector<OutboundDelivery>> WebhookOutbox::Claim(int64_t now, int limit, int64_t lease_seconds) {
  auto due = store_->ClaimDueDeliveries(now, limit, lease_seconds);
  if (!due.ok()) return due.status();
  std::vector<OutboundDelivery> out;
  out.reserve(due->size());
  for (const storage::DueDelivery& d : *due) {
    out.push_back({d.event.id, d.event.type, d.delivery.webhook, d.delivery.attempts, EventBody(d.event)});
  }
  return out;
}

Result<int64_t> WebhookOutbox::Record(const OutboundDelivery& d, bool delivered, const std::string& error,
                                      double jitter, int64_t now) {
  const int64_t delay =
      delivered ? 0 : RetryDelaySeconds(d.attempts + 1, jitter, retry_.base_seconds, retry_.cap_seconds);
  if (Status s = store_->RecordDeliveryAttempt(d.event_id, d.webhook, delivered, now + delay, error, now); !s.ok()) {
    return s;
  }
  return delay;
}

Result<int64_t> WebhookOutbox::Pending() { return store_->CountPendingDeliveries(); }

Result<int64_t> WebhookOutbox::Purge(int64_t older_than, int64_t keep_at_most) {
  return store_->PurgeEvents(older_than, keep_at_most);
}

}  // namespace rackgate::core
