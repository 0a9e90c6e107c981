// Encoder and decoder of the admin API's event list.
#include "wire/admin_events.h"

#include <nlohmann/json.hpp>

#include "wire/admin_json.h"

namespace rackgate::wire {

namespace {

using nlohmann::json;

json DeliveryJson(const EventDeliveryView& d) {
  json j = {{"webhook", d.webhook}, {"attempts", d.attempts}, {"last_error", d.last_error}};
  if (d.delivered_at) {
    j["delivered_at"] = *d.delivered_at;
  } else {
    j["next_attempt_at"] = d.next_attempt_at;
  }
  return j;
}

json EventJson(const EventView& e) {
  json detail = json::parse(e.detail_json, nullptr, false);
  if (!detail.is_object()) detail = json::object();
  json deliveries = json::array();
  for (const auto& d : e.deliveries) deliveries.push_back(DeliveryJson(d));
  return {{"id", e.id},
          {"type", e.type},
          {"at", e.at},
          {"machine", {{"hostname", e.hostname}, {"pool", e.pool}}},
          {"detail", std::move(detail)},
          {"deliveries", std::move(deliveries)}};
}

Result<EventDeliveryView> DeliveryFromJson(const json& j) {
  if (!j.is_object()) return Status::InvalidArgument("field_invalid", "a delivery is a JSON object");
  auto webhook = admin_json::String(j, "webhook");
  auto attempts = admin_json::Int(j, "attempts");
  auto delivered_at = admin_json::Int(j, "delivered_at");
  auto next = admin_json::Int(j, "next_attempt_at");
  auto error = admin_json::String(j, "last_error");
  if (Status s = admin_json::FirstError(
          {webhook.status(), attempts.status(), delivered_at.status(), next.status(), error.status()});
      !s.ok()) {
    return s;
  }
  return EventDeliveryView{webhook->value_or(""), attempts->value_or(0), *delivered_at, next->value_or(0),
                           error->value_or("")};
}

Result<EventView> EventFromJson(const json& j) {
  if (!j.is_object()) return Status::InvalidArgument("field_invalid", "an event is a JSON object");
  auto id = admin_json::Int(j, "id");
  auto type = admin_json::String(j, "type");
  auto at = admin_json::Int(j, "at");
  if (Status s = admin_json::FirstError({id.status(), type.status(), at.status()}); !s.ok()) return s;
  EventView e;
  e.id = id->value_or(0);
  e.type = type->value_or("");
  e.at = at->value_or(0);
  if (j.contains("machine") && !j.at("machine").is_null()) {
    const json& machine = j.at("machine");
    if (!machine.is_object()) return Status::InvalidArgument("field_invalid", "machine must be an object");
    auto hostname = admin_json::String(machine, "hostname");
    auto pool = admin_json::String(machine, "pool");
    if (Status s = admin_json::FirstError({hostname.status(), pool.status()}); !s.ok()) return s;
    e.hostname = hostname->value_or("");
    e.pool = pool->value_or("");
  }
  if (j.contains("detail") && !j.at("detail").is_null()) {
    if (!j.at("detail").is_object()) return Status::InvalidArgument("field_invalid", "detail must be an object");
    e.detail_json = j.at("detail").dump();
  }
  auto deliveries = admin_json::List<EventDeliveryView>(j, "deliveries", DeliveryFromJson);
  if (!deliveries.ok()) return deliveries.status();
  e.deliveries = std::move(deliveries).value();
  return e;
}

}  // namespace

std::string EncodeEventList(const std::vector<EventView>& events) {
  json out = json::array();
  for (const auto& e : events) out.push_back(EventJson(e));
  return json{{"events", out}}.dump(-1, ' ', false, json::error_handler_t::replace);
}

Result<std::vector<EventView>> DecodeEventList(std::string_view body) {
  return admin_json::ListBody<EventView>(body, "events", EventFromJson);
}

}  // namespace rackgate::wire
