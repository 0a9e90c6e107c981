// The admin API's event list.
#include "core/event_service.h"

#include <algorithm>
#include <utility>

#include "core/events.h"

namespace rackgate::core {

EventService::EventService(storage::EventStore* store) : store_(store) {}

Result<std::vector<wire::EventView>> EventService::List(int64_t limit, bool pending_only) {
  storage::EventFilter filter;
  filter.limit = static_cast<int>(std::clamp<int64_t>(limit, 1, kMaxEventList));
  filter.pending_only = pending_only;
  auto events = store_->ListEvents(filter);
  if (!events.ok()) return events.status();
  std::vector<wire::EventView> out;
  out.reserve(events->size());
  for (const storage::Event& e : *events) {
    wire::EventView v;
    v.id = e.id;
    v.type = e.type;
    v.at = e.at;
    v.hostname = e.hostname;
    v.pool = e.pool;
    v.detail_json = EventDetailJson(e);
    for (const storage::EventDelivery& d : e.deliveries) {
      v.deliveries.push_back({d.webhook, d.attempts, d.delivered_at, d.next_attempt_at, d.last_error});
    }
    out.push_back(std::move(v));
  }
  return out;
}

}  // namespace rackgate::core
