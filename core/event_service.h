// Webhook events as the admin API lists them (docs/events.md,
// `rackgatectl events`): the newest events, each as its webhooks receive it,
// with its deliveries' state. The admin API calls this; the handler only
// decodes and encodes.
//
// Thread safety: as the store's; no state of its own.
#ifndef RACKGATE_CORE_EVENT_SERVICE_H_
#define RACKGATE_CORE_EVENT_SERVICE_H_

#include <cstdint>
#include <vector>

#include "base/status.h"
#include "storage/roles.h"
#include "wire/admin_events.h"

namespace rackgate::core {

// The most events one list answers.
inline constexpr int64_t kMaxEventList = 10000;

class EventService {
 public:
  // BORROWED: store outlives the service.
  explicit EventService(storage::EventStore* store);

  // GET /v1/admin/events: the newest `limit` events (clamped to 1 ..
  // kMaxEventList), newest first; `pending_only`: only those some webhook
  // has not received yet. Refusals: the store's only.
  Result<std::vector<wire::EventView>> List(int64_t limit, bool pending_only);

 private:
  storage::EventStore* store_;
};

}  // namespace rackgate::core

#endif  // RACKGATE_CORE_EVENT_SERVICE_H_
