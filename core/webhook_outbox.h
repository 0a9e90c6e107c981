// The webhook outbox (docs/events.md): what rackgated's delivery thread
// (daemon/webhooks.cc) asks of the event queue, in its own words. The
// daemon sends; this decides what is due, what a delivery's body is, and
// when a failed one is tried again, on the store's events role.
//
// Thread safety: as the store's; the retry schedule is fixed at
// construction.
#ifndef RACKGATE_CORE_WEBHOOK_OUTBOX_H_
#define RACKGATE_CORE_WEBHOOK_OUTBOX_H_

#include <cstdint>
#include <string>
#include <vector>

#include "base/status.h"
#include "storage/roles.h"

namespace rackgate::core {

// A configured webhook as the queue knows it: its URL and the event types it
// takes (empty: every type). Never its secret.
struct WebhookSubscription {
  std::string url;
  std::vector<std::string> events;
};

// One delivery to send: the event's signed body (EventBody) to `webhook`.
struct OutboundDelivery {
  int64_t event_id = 0;
  std::string event_type;
  std::string webhook;
  int64_t attempts = 0;  // failed attempts before this one
  std::string body;
};

// The retry schedule of failed deliveries (RetryDelaySeconds).
struct RetrySchedule {
  int64_t base_seconds = 5;
  int64_t cap_seconds = 3600;
};

class WebhookOutbox {
 public:
  // BORROWED: store outlives the outbox.
  WebhookOutbox(storage::EventStore* store, RetrySchedule retry);

  // Makes `subscriptions` the queue's webhooks; returns how many undelivered
  // deliveries of webhooks no longer subscribed were dropped.
  Result<int64_t> Subscribe(const std::vector<WebhookSubscription>& subscriptions, int64_t now);

  // Claims at most `limit` due deliveries for `lease_seconds` (another
  // appliance on the same database does not send them meanwhile), oldest
  // first, each with its body.
  Result<std::vector<OutboundDelivery>> Claim(int64_t now, int limit, int64_t lease_seconds);

  // Records an attempt of `d`. Delivered: done. Failed (`error` says how):
  // due again after the schedule's delay for its attempt count, spread by
  // `jitter` in [0, 1). Returns that delay in seconds (0 when delivered).
  Result<int64_t> Record(const OutboundDelivery& d, bool delivered, const std::string& error, double jitter,
                         int64_t now);

  // Deliveries queued and not yet delivered.
  Result<int64_t> Pending();

  // Drops events older than `older_than` and all but the newest
  // `keep_at_most`; returns how many.
  Result<int64_t> Purge(int64_t older_than, int64_t keep_at_most);

 private:
  storage::EventStore* store_;
  RetrySchedule retry_;
};

}  // namespace rackgate::core

#endif  // RACKGATE_CORE_WEBHOOK_OUTBOX_H_
