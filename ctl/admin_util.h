// Helpers shared by rackgatectl's admin API commands (one file per command
// group: admin_commands.cc, import_command.cc, ...).
#ifndef RACKGATE_DAEMON_CTL_ADMIN_UTIL_H_
#define RACKGATE_DAEMON_CTL_ADMIN_UTIL_H_

#include <cstddef>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include <string_view>
#include <vector>

#include "base/status.h"
#include "ctl/args.h"  // ParseDuration, for the commands that include only this header
#include "wire/admin_machines.h"

namespace rackgate::ctl {

constexpr size_t kMaxCertFile = 64 * 1024;

// Prints "rackgatectl: WHY" and "Run 'rackgatectl CMD --help' for usage." on
// stderr (CMD read from the help's "Usage: rackgatectl CMD" line); exit 2.
int UsageError(const char* help, const std::string& why);
// The command words of a help text's first line: "pool put" for
// "Usage: rackgatectl pool put NAME ...".
std::string HelpCommand(const char* help);
// Prints the help on stdout; exit 0.
int PrintHelp(const char* help);

// Sends a request over the admin socket and maps the answer: prints the
// daemon's reason on a refusal and sets *exit_code (1 refused, 2 unusable or
// unreachable). Returns the parsed body on 2xx.
Result<nlohmann::json> Send(const std::string& socket, const std::string& method, const std::string& path,
                            const nlohmann::json& body, int* exit_code);

// Send with a body already encoded (the wire module's encoders); "" sends
// none.
Result<nlohmann::json> SendText(const std::string& socket, const std::string& method, const std::string& path,
                                std::string_view body, int* exit_code);

// Reports an answer the wire module refused; sets *exit_code to 2.
void ReportMalformedAnswer(const Status& s, int* exit_code);
// A 2xx answer decoded by the wire module's `decode`: a malformed answer
// is reported and unusable (sets *exit_code to 2).
template <typename T>
Result<T> DecodeAnswer(const nlohmann::json& answer, Result<T> (*decode)(std::string_view), int* exit_code) {
  Result<T> r = decode(answer.dump());
  if (!r.ok()) ReportMalformedAnswer(r.status(), exit_code);
  return r;
}

// o[key] when it is a string, else `fallback`.
std::string Str(const nlohmann::json& o, const char* key, const char* fallback = "-");
// o[key] (Unix seconds) as "YYYY-MM-DD HH:MM:SSZ", or "-".
std::string FormatTime(const nlohmann::json& o, const char* key);
// Addresses as "Kind=value,Kind=value", or "-".
std::string Addresses(const std::vector<wire::AddressView>& addresses);
// KIND=VALUE with a Kubernetes NodeAddress kind (any case; answered in the
// canonical one).
Result<wire::AddressView> ParseAddress(const std::string& text);
// A file (at most kMaxCertFile bytes) as base64.
Result<std::string> FileBase64(const std::string& path);
// A JSON file of at most `max` bytes. Malformed JSON is kInvalidArgument
// ("bad_json") reading "PATH:LINE:COLUMN: what is wrong".
Result<nlohmann::json> ReadJsonFile(const std::string& path, size_t max);
// `text` as JSON; malformed JSON is kInvalidArgument ("bad_json") reading
// "NAME:LINE:COLUMN: what is wrong" (lines and columns from 1).
Result<nlohmann::json> ParseJsonText(std::string_view text, const std::string& name);
void PrintJson(const nlohmann::json& j);
// True when `bytes` look like an X.509 certificate: PEM ("-----BEGIN
// CERTIFICATE") or DER (a SEQUENCE, 0x30; a TPM2B_PUBLIC starts with its
// two-byte size, never 0x30xx for a public area of a few hundred bytes).
bool LooksLikeCertificate(std::string_view bytes);

// A table whose columns are as wide as their widest cell (the last column is
// not padded): long hostnames and pool names never shift the other columns.
class Table {
 public:
  explicit Table(std::vector<std::string> header) { rows_.push_back(std::move(header)); }
  void Add(std::vector<std::string> row) { rows_.push_back(std::move(row)); }
  // Prints the header and the rows on stdout, columns two spaces apart.
  void Print() const;

 private:
  std::vector<std::vector<std::string>> rows_;
};

}  // namespace rackgate::ctl

#endif  // RACKGATE_DAEMON_CTL_ADMIN_UTIL_H_
