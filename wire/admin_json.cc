// The admin bodies' bounded parse and typed field reads.
#include "wire/admin_json.h"

#include "base/json_depth.h"
#include "wire/admin_pools.h"

namespace rackgate::wire::admin_json {

using nlohmann::json;

Result<json> ParseObject(std::string_view body) {
  // SECURITY: the depth is bounded before parsing, so that a hostile body
  // cannot make the parser build (and later destroy) a deep tree.
  if (JsonDepth(body) > kMaxAdminJsonDepth) return Status::InvalidArgument("bad_json", "body is not a JSON object");
  json doc = json::parse(body, nullptr, false);
  if (doc.is_discarded() || !doc.is_object()) return Status::InvalidArgument("bad_json", "body is not a JSON object");
  return doc;
}

Result<std::optional<std::string>> String(const json& o, const char* key) {
  if (!o.contains(key) || o.at(key).is_null()) return std::optional<std::string>();
  if (!o.at(key).is_string()) return Status::InvalidArgument("field_invalid", std::string(key) + " must be a string");
  return std::optional(o.at(key).get<std::string>());
}

Result<std::optional<bool>> Bool(const json& o, const char* key) {
  if (!o.contains(key) || o.at(key).is_null()) return std::optional<bool>();
  if (!o.at(key).is_boolean()) {
    return Status::InvalidArgument("field_invalid", std::string(key) + " must be true or false");
  }
  return std::optional(o.at(key).get<bool>());
}

Result<std::optional<int64_t>> Int(const json& o, const char* key) {
  if (!o.contains(key) || o.at(key).is_null()) return std::optional<int64_t>();
  const json& v = o.at(key);
  if (!v.is_number_integer() || (v.is_number_unsigned() && v.get<uint64_t>() > static_cast<uint64_t>(INT64_MAX))) {
    return Status::InvalidArgument("field_invalid", std::string(key) + " must be an integer");
  }
  return std::optional(v.get<int64_t>());
}

Result<std::optional<uint64_t>> Uint(const json& o, const char* key) {
  if (!o.contains(key) || o.at(key).is_null()) return std::optional<uint64_t>();
  const json& v = o.at(key);
  if (!v.is_number_unsigned() && !(v.is_number_integer() && v.get<int64_t>() >= 0)) {
    return Status::InvalidArgument("field_invalid", std::string(key) + " must be a non-negative integer");
  }
  return std::optional(v.get<uint64_t>());
}

Result<std::vector<std::string>> Strings(const json& o, const char* key) {
  std::vector<std::string> out;
  if (!o.contains(key) || o.at(key).is_null()) return out;
  const json& list = o.at(key);
  const Status invalid = Status::InvalidArgument("field_invalid", std::string(key) + " must be a list of strings");
  if (!list.is_array()) return invalid;
  for (const json& s : list) {
    if (!s.is_string()) return invalid;
    out.push_back(s.get<std::string>());
  }
  return out;
}

Status FirstError(std::initializer_list<Status> statuses) {
  for (const Status& s : statuses) {
    if (!s.ok()) return s;
  }
  return Status::Ok();
}

}  // namespace rackgate::wire::admin_json
