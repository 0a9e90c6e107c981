// The admin API's event list (GET /v1/admin/events; docs/events.md,
// docs/operations.md) as a typed value with an encoder and a decoder, for
// rackgated and `rackgatectl events`. Each event is the body its webhooks
// receive plus its deliveries. Decoding fails as wire/admin_pools.h says.
#ifndef RACKGATE_WIRE_ADMIN_EVENTS_H_
#define RACKGATE_WIRE_ADMIN_EVENTS_H_

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"

namespace rackgate::wire {

// One webhook's delivery of an event: delivered, or the attempts so far
// and the next one.
struct EventDeliveryView {
  std::string webhook;  // the webhook's URL
  int64_t attempts = 0;
  std::optional<int64_t> delivered_at;
  int64_t next_attempt_at = 0;  // on the wire only while not delivered
  std::string last_error;       // "" when none
  bool operator==(const EventDeliveryView&) const = default;
};

// An event as a webhook receives it ({"id", "type", "at", "machine":
// {"hostname", "pool"}, "detail"}), with its deliveries.
struct EventView {
  int64_t id = 0;
  std::string type;
  int64_t at = 0;
  std::string hostname;
  std::string pool;
  std::string detail_json = "{}";  // a JSON object's compact text (actor and why included)
  std::vector<EventDeliveryView> deliveries;
  bool operator==(const EventView&) const = default;
};

// {"events": [...]}. Encoding: a detail_json that is not a JSON object goes
// out as {}; invalid UTF-8 in a text is replaced, never thrown.
std::string EncodeEventList(const std::vector<EventView>& events);
Result<std::vector<EventView>> DecodeEventList(std::string_view body);

}  // namespace rackgate::wire

#endif  // RACKGATE_WIRE_ADMIN_EVENTS_H_
