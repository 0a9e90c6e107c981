// Helpers shared by rackgatectl's admin API commands (one file per command
// group: admin_commands.cc, import_command.cc, ...).
#ifndef RACKGATE_DAEMON_CTL_ADMIN_UTIL_H_
#define RACKGATE_DAEMON_CTL_ADMIN_UTIL_H_

#include <cstddef>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "base/status.h"

namespace rackgate::ctl {

constexpr size_t kMaxCertFile = 64 * 1024;

// Prints "rackgatectl: WHY" and the command's help on stderr; exit 2.
int UsageError(const char* help, const std::string& why);

// Sends a request over the admin socket and maps the answer: prints the
// daemon's reason on a refusal and sets *exit_code (1 refused, 2 unusable or
// unreachable). Returns the parsed body on 2xx.
Result<nlohmann::json> Send(const std::string& socket, const std::string& method, const std::string& path,
                            const nlohmann::json& body, int* exit_code);

// o[key] when it is a string, else `fallback`.
std::string Str(const nlohmann::json& o, const char* key, const char* fallback = "-");
// o[key] (Unix seconds) as "YYYY-MM-DD HH:MM:SSZ", or "-".
std::string FormatTime(const nlohmann::json& o, const char* key);
// A machine's addresses as "Kind=value,Kind=value", or "-".
std::string Addresses(const nlohmann::json& machine);
// KIND=VALUE with a Kubernetes NodeAddress kind, as {"kind","value"}.
Result<nlohmann::json> ParseAddress(const std::string& text);
// A file (at most kMaxCertFile bytes) as base64.
Result<std::string> FileBase64(const std::string& path);
// A JSON file of at most `max` bytes.
Result<nlohmann::json> ReadJsonFile(const std::string& path, size_t max);
void PrintJson(const nlohmann::json& j);
// "90s", "30m", "2h", "1d", "1h30m" or "0" as seconds; nullopt otherwise.
std::optional<int64_t> ParseDuration(const std::string& text);

}  // namespace rackgate::ctl

#endif  // RACKGATE_DAEMON_CTL_ADMIN_UTIL_H_
