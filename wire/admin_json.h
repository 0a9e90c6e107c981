// The admin bodies' shared JSON reading: one bounded parse of a body and
// typed reads of optional fields. Internal to wire/.
#ifndef RACKGATE_WIRE_ADMIN_JSON_H_
#define RACKGATE_WIRE_ADMIN_JSON_H_

#if !defined(RACKGATE_WIRE_INTERNAL)
#error "wire/admin_json.h is internal to wire/"
#endif

#include <cstdint>
#include <initializer_list>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "base/status.h"

namespace rackgate::wire::admin_json {

// `body` as a JSON object: bad_json ("body is not a JSON object") for
// anything else, or for a text nested deeper than kMaxAdminJsonDepth
// (checked before parsing, so no deep tree is ever built).
Result<nlohmann::json> ParseObject(std::string_view body);

// An optional field of `o`: nullopt when absent or null; field_invalid
// ("KEY must be a string" ...) when of another type.
Result<std::optional<std::string>> String(const nlohmann::json& o, const char* key);
Result<std::optional<bool>> Bool(const nlohmann::json& o, const char* key);
Result<std::optional<int64_t>> Int(const nlohmann::json& o, const char* key);
// A non-negative integer ("KEY must be a non-negative integer").
Result<std::optional<uint64_t>> Uint(const nlohmann::json& o, const char* key);
// A list of strings, empty when absent or null ("KEY must be a list of
// strings").
Result<std::vector<std::string>> Strings(const nlohmann::json& o, const char* key);

// The list under `key`, empty when absent or null ("KEY must be a list"),
// each element read by `each` (a json -> Result<T>); the first failure.
template <typename T, typename Each>
Result<std::vector<T>> List(const nlohmann::json& o, const char* key, Each each) {
  std::vector<T> out;
  if (!o.contains(key) || o.at(key).is_null()) return out;
  const nlohmann::json& list = o.at(key);
  if (!list.is_array()) return Status::InvalidArgument("field_invalid", std::string(key) + " must be a list");
  for (const nlohmann::json& j : list) {
    Result<T> item = each(j);
    if (!item.ok()) return item.status();
    out.push_back(std::move(item).value());
  }
  return out;
}

// An answer that is a list under `key` ({"KEY": [...]}): the body parsed as
// ParseObject does, the list read as List does, except that a null list is
// refused ("KEY must be a list") as any other non-list; absent is empty.
template <typename T, typename Each>
Result<std::vector<T>> ListBody(std::string_view body, const char* key, Each each) {
  auto doc = ParseObject(body);
  if (!doc.ok()) return doc.status();
  if (doc->contains(key) && doc->at(key).is_null()) {
    return Status::InvalidArgument("field_invalid", std::string(key) + " must be a list");
  }
  return List<T>(*doc, key, each);
}

// The first failure of `statuses`, Status::Ok() when all are ok.
Status FirstError(std::initializer_list<Status> statuses);

}  // namespace rackgate::wire::admin_json

#endif  // RACKGATE_WIRE_ADMIN_JSON_H_
