// The admin API's refusal body, read whole.
#include "wire/admin_errors.h"

#include <nlohmann/json.hpp>

#include "wire/admin_json.h"

namespace rackgate::wire {

AdminRefusal DecodeAdminRefusal(std::string_view body, AdminRefusal fallback) {
  auto doc = admin_json::ParseObject(body);
  if (!doc.ok() || !doc->contains("error") || !doc->at("error").is_object()) return fallback;
  const nlohmann::json& e = doc->at("error");
  if (auto reason = admin_json::String(e, "reason"); reason.ok() && *reason) fallback.reason = **reason;
  if (auto message = admin_json::String(e, "message"); message.ok() && *message) fallback.message = **message;
  return fallback;
}

}  // namespace rackgate::wire
