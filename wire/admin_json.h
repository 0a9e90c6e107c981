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

// The first failure of `statuses`, Status::Ok() when all are ok.
Status FirstError(std::initializer_list<Status> statuses);

}  // namespace rackgate::wire::admin_json

#endif  // RACKGATE_WIRE_ADMIN_JSON_H_
