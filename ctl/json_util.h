// rackgatectl's own JSON: the files an operator gives (policies, templates,
// settings, inventories) and what --json prints.
#ifndef RACKGATE_CTL_JSON_UTIL_H_
#define RACKGATE_CTL_JSON_UTIL_H_

#include <cstddef>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

#include "base/status.h"

namespace rackgate::ctl {

// o[key] when it is a string, else `fallback`.
std::string Str(const nlohmann::json& o, const char* key, const char* fallback = "-");
// A JSON file of at most `max` bytes. Malformed JSON is kInvalidArgument
// ("bad_json") reading "PATH:LINE:COLUMN: what is wrong".
Result<nlohmann::json> ReadJsonFile(const std::string& path, size_t max);
// `text` as JSON; malformed JSON is kInvalidArgument ("bad_json") reading
// "NAME:LINE:COLUMN: what is wrong" (lines and columns from 1).
Result<nlohmann::json> ParseJsonText(std::string_view text, const std::string& name);
// Prints `j` on stdout, indented by two.
void PrintJson(const nlohmann::json& j);
// Prints JSON text (the wire module's encoding; REQUIRES: valid JSON) as
// PrintJson does.
void PrintJsonText(std::string_view text);

}  // namespace rackgate::ctl

#endif  // RACKGATE_CTL_JSON_UTIL_H_
