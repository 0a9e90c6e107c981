// rackgatectl certs over the admin API (wire/admin_certificates.h,
// core/certificate_service.h): the kubelet certificates rackgate signed.
#include "ctl/commands.h"

#include <string>

#include "base/utc_time.h"
#include "ctl/admin_util.h"
#include "ctl/args.h"
#include "ctl/command_line.h"
#include "wire/admin_certificates.h"
#include "wire/admin_query.h"

namespace rackgate::ctl {

namespace {

constexpr char kCertsHelp[] =
    "Usage: rackgatectl certs [--hostname NAME] [--limit N] [--json]\n"
    "\n"
    "Every kubelet certificate rackgate signed, newest first: serial, machine,\n"
    "kind (client or serving), whether its key is TPM-resident, and expiry.\n"
    "\n"
    "Options:\n"
    "  --hostname NAME       only the certificates of one machine\n"
    "  --limit N             at most N certificates, 1 to 100000 (default 1000)\n"
    RACKGATE_OPT_JSON RACKGATE_OPT_SOCKET RACKGATE_ADMIN_EXIT;

}  // namespace

int RunCerts(const std::string& socket, int argc, char** argv, int first) {
  auto args = Args::Parse(argc, argv, first, {{"hostname", "limit"}, {"json"}, 0});
  if (!args.ok()) return UsageError(kCertsHelp, args.status().message());
  if (args->Has("help")) return PrintHelp(kCertsHelp);
  auto limit = args->GetInt("limit", 1000, 1, 100000);
  if (!limit.ok()) return UsageError(kCertsHelp, limit.status().message());
  const wire::CertificateQuery query{args->Get("hostname"), *limit};
  int code = kExitOk;
  auto r = Send(socket, "GET", "/v1/admin/certificates" + wire::EncodeCertificateQuery(query), &code);
  if (!r.ok()) return code;
  if (args->Has("json")) return PrintAnswer(*r), kExitOk;
  auto certs = DecodeAnswer(*r, wire::DecodeCertificateList, &code);
  if (!certs.ok()) return code;
  Table table({"SERIAL", "HOSTNAME", "KIND", "TPM", "ISSUED", "NOT AFTER"});
  for (const auto& c : *certs) {
    table.Add({c.serial, c.hostname, c.kind, c.tpm_resident ? "yes" : "no", UtcTime(c.issued_at),
               UtcTime(c.not_after)});
  }
  table.Print();
  return kExitOk;
}

}  // namespace rackgate::ctl
