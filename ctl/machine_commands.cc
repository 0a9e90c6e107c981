// rackgatectl delete and rename, over the admin API.
#include "ctl/machine_commands.h"

#include <cstdio>

#include "ctl/admin_util.h"
#include "ctl/args.h"
#include "ctl/offline.h"
#include "wire/admin_machines.h"

namespace rackgate::ctl {

namespace {

constexpr char kDeleteHelp[] =
    "Usage: rackgatectl delete HOSTNAME [--reason TEXT] [--json]\n"
    "\n"
    "Deletes a machine's enrollment: its addresses, sessions, tokens,\n"
    "attestations, waiting CSRs and last report. Its certificates, audit rows\n"
    "and events stay as history. Its EK and hostname are free afterwards, so the\n"
    "same TPM can be enrolled again under a corrected name. Only a pending,\n"
    "enrolled or revoked machine: `rackgatectl revoke HOSTNAME` first.\n"
    "\n"
    "Options:\n"
    "  --reason TEXT  why, for the audit log (default \"deleted by USER\")\n"
    "  --json         print JSON instead of a table\n"
    "\n"
    "Exit status: 0 deleted; 1 refused (reason code on stderr: machine_active,\n"
    "hostname_unknown); 2 unusable input or rackgated unreachable.\n";

constexpr char kRenameHelp[] =
    "Usage: rackgatectl rename OLD NEW [--reason TEXT] [--json]\n"
    "\n"
    "Gives a machine another hostname, keeping its EK, state and history (an\n"
    "address of kind Hostname equal to OLD becomes NEW). NEW must be a\n"
    "lowercase DNS name no other machine has. Only a pending, enrolled or\n"
    "revoked machine: one that attested holds certificates for\n"
    "system:node:OLD, so `rackgatectl reset OLD` first.\n"
    "\n"
    "Options:\n"
    "  --reason TEXT  why, for the audit log (default \"renamed by USER\")\n"
    "  --json         print JSON instead of a table\n"
    "\n"
    "Exit status: 0 renamed; 1 refused (reason code on stderr: machine_active,\n"
    "hostname_taken, hostname_invalid, hostname_unknown); 2 unusable input or\n"
    "rackgated unreachable.\n";

}  // namespace

int RunDelete(const std::string& socket, int argc, char** argv, int first) {
  auto args = Args::Parse(argc, argv, first, {{"reason"}, {"json"}, 1});
  if (!args.ok()) return UsageError(kDeleteHelp, args.status().message());
  if (args->Has("help")) return PrintHelp(kDeleteHelp);
  if (args->positional().size() != 1) return UsageError(kDeleteHelp, "give one HOSTNAME");
  const std::string& host = args->positional()[0];
  const wire::ReasonRequest body{args->Get("reason").value_or("")};
  int code = kExitOk;
  auto r = SendText(socket, "DELETE", "/v1/admin/machines/" + host, wire::EncodeReasonRequest(body), &code);
  if (!r.ok()) return code;
  if (args->Has("json")) return PrintJson(*r), kExitOk;
  auto m = DecodeAnswer(*r, wire::DecodeMachineView, &code);
  if (!m.ok()) return code;
  std::printf("deleted %s (was %s, ek %s); its EK and hostname are free\n", m->hostname.c_str(), m->state.c_str(),
              m->ek_hash.substr(0, 16).c_str());
  return kExitOk;
}

int RunRename(const std::string& socket, int argc, char** argv, int first) {
  auto args = Args::Parse(argc, argv, first, {{"reason"}, {"json"}, 2});
  if (!args.ok()) return UsageError(kRenameHelp, args.status().message());
  if (args->Has("help")) return PrintHelp(kRenameHelp);
  if (args->positional().size() != 2) return UsageError(kRenameHelp, "give OLD and NEW");
  const std::string& from = args->positional()[0];
  const wire::RenameRequest body{args->positional()[1], args->Get("reason").value_or("")};
  int code = kExitOk;
  auto r = SendText(socket, "POST", "/v1/admin/machines/" + from + "/rename", wire::EncodeRenameRequest(body), &code);
  if (!r.ok()) return code;
  if (args->Has("json")) return PrintJson(*r), kExitOk;
  auto m = DecodeAnswer(*r, wire::DecodeMachineView, &code);
  if (!m.ok()) return code;
  std::printf("renamed %s to %s: state %s\n", from.c_str(), m->hostname.c_str(), m->state.c_str());
  return kExitOk;
}

}  // namespace rackgate::ctl
