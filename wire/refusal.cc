// The one refusal body, both directions.
#include "wire/refusal.h"

#include <nlohmann/json.hpp>

#include "wire/admin_json.h"

namespace rackgate::wire {

namespace {

using nlohmann::json;

constexpr char kError[] = "error";

// The "error" object of `doc`, or null when it has none or another type.
const json* ErrorObject(const json& doc) {
  auto it = doc.find(kError);
  return it != doc.end() && it->is_object() ? &*it : nullptr;
}

}  // namespace

std::string EncodeRefusal(const Refusal& r) {
  const json body = {{kError, {{"reason", r.reason}, {"message", r.message}}}};
  return body.dump(-1, ' ', false, json::error_handler_t::replace);
}

Result<Refusal> DecodeRefusal(std::string_view body) {
  auto doc = admin_json::ParseObject(body);
  if (!doc.ok()) return doc.status();
  if (!doc->contains(kError)) return Status::InvalidArgument("field_missing", "field 'error' is required");
  const json* e = ErrorObject(*doc);
  if (e == nullptr) return Status::InvalidArgument("field_invalid", "field 'error': expected an object");
  auto reason = admin_json::String(*e, "reason");
  if (!reason.ok()) return reason.status();
  auto message = admin_json::String(*e, "message");
  if (!message.ok()) return message.status();
  return Refusal{reason->value_or(""), message->value_or("")};
}

Refusal DecodeRefusalOr(std::string_view body, std::string_view fallback_reason) {
  Refusal out{std::string(fallback_reason), std::string(body)};
  auto doc = admin_json::ParseObject(body);
  const json* e = doc.ok() ? ErrorObject(*doc) : nullptr;
  if (e == nullptr) return out;
  if (auto reason = admin_json::String(*e, "reason"); reason.ok() && *reason) out.reason = **reason;
  if (auto message = admin_json::String(*e, "message"); message.ok() && *message) out.message = **message;
  return out;
}

}  // namespace rackgate::wire
