// Helpers shared by rackgatectl's admin API commands (one file per resource:
// machine_commands.cc, pool_commands.cc, ...): help and usage errors, the
// exchange with rackgated, tables. They call nothing of the commands.
#ifndef RACKGATE_DAEMON_CTL_ADMIN_UTIL_H_
#define RACKGATE_DAEMON_CTL_ADMIN_UTIL_H_

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "wire/admin_machines.h"

// Pieces of the admin commands' help texts.
#define RACKGATE_ADMIN_EXIT \
  "\n"                        \
  "Exit status: 0 done; 1 refused (reason code on stderr); 2 unusable input or\n" \
  "rackgated unreachable.\n"
#define RACKGATE_OPT_JSON "  --json                print the daemon's answer as JSON instead of text\n"
#define RACKGATE_OPT_SOCKET "  --socket PATH         rackgated's admin socket (default /run/rackgate/admin.sock)\n"

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

// A 2xx answer of the admin API: its JSON body as parsed, encoded again
// (compact). The wire module's decoders read it; --json prints it.
struct AdminAnswer {
  std::string json;
};

// Sends a request over the admin socket and maps the answer: prints the
// daemon's reason on a refusal and sets *exit_code (1 refused, 2 unusable or
// unreachable). Returns the answer on 2xx. Send sends no body; SendText
// sends one already encoded (the wire module's encoders), "" for none.
Result<AdminAnswer> Send(const std::string& socket, const std::string& method, const std::string& path,
                         int* exit_code);
Result<AdminAnswer> SendText(const std::string& socket, const std::string& method, const std::string& path,
                             std::string_view body, int* exit_code);

// Reports an answer the wire module refused; sets *exit_code to 2.
void ReportMalformedAnswer(const Status& s, int* exit_code);
// A 2xx answer decoded by the wire module's `decode`: a malformed answer
// is reported and unusable (sets *exit_code to 2).
template <typename T>
Result<T> DecodeAnswer(const AdminAnswer& answer, Result<T> (*decode)(std::string_view), int* exit_code) {
  Result<T> r = decode(answer.json);
  if (!r.ok()) ReportMalformedAnswer(r.status(), exit_code);
  return r;
}
// Prints the answer as --json does: indented by two.
void PrintAnswer(const AdminAnswer& answer);

// Addresses as "Kind=value,Kind=value", or "-".
std::string Addresses(const std::vector<wire::AddressView>& addresses);
// KIND=VALUE with a Kubernetes NodeAddress kind (any case; answered in the
// canonical one).
Result<wire::AddressView> ParseAddress(const std::string& text);
// A file (at most kMaxCertFile bytes) as base64.
Result<std::string> FileBase64(const std::string& path);
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
