// rackgatectl's machine commands over the admin API (wire/admin_machines.h,
// core/machine_service.h): enroll, list, show, approve, revoke, reset,
// delete, rename.
#include "ctl/commands.h"

#include <cstdio>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "base/files.h"
#include "base/utc_time.h"
#include "ctl/admin_util.h"
#include "ctl/args.h"
#include "ctl/ek_cert_urls.h"
#include "ctl/command_line.h"
#include "ctl/json_util.h"
#include "wire/admin_machines.h"
#include "wire/admin_query.h"
#include "wire/codec.h"

namespace rackgate::ctl {

namespace {

using nlohmann::json;

constexpr char kEnrollHelp[] =
    "Usage: rackgatectl enroll --hostname NAME [--pool POOL]\n"
    "         (--ek-cert EK.der|EK.pem | --ek-public EK.pub) [--ek-cert ... --ek-public ...]\n"
    "         [--address KIND=VALUE]... [--replace-addresses]\n"
    "         [--var NAME=VALUE]... [--replace-vars] [--unset-var NAME]...\n"
    "         [--policy POLICY.json | --clear-policy] [--replace-ek] [--json]\n"
    "\n"
    "Enrolls a machine, or changes an enrolled one: its identity is its EK (the\n"
    "hash of the EK's public key, from the certificate or the TPM2B_PUBLIC); the\n"
    "daemon validates an EK certificate against its manufacturer roots.\n"
    "Enrolling an enrolled machine again keeps what it is not told to change:\n"
    "--address adds (--replace-addresses: the list becomes the ones given), --var\n"
    "sets one value of the attested template's {{machine.NAME}} (--replace-vars\n"
    "drops the others, --unset-var removes one), --policy replaces the machine's\n"
    "boot policy (--clear-policy drops it), --pool moves it. It prints what\n"
    "changed, or \"unchanged\". KIND is InternalIP or ExternalIP (an IP address),\n"
    "InternalDNS, ExternalDNS or Hostname (a DNS name). Another EK under an\n"
    "enrolled hostname is refused (ek_conflict) unless --replace-ek (audited).\n"
    "\n"
    "Options:\n"
    "  --hostname NAME        the machine's node name (lowercase RFC 1123)\n"
    "  --pool POOL            its pool (required for a new machine; default: kept)\n"
    "  --ek-cert FILE         its EK certificate (DER, PEM, as read from NV, or\n"
    "                         Intel's EK certificate service JSON answer)\n"
    "  --ek-public FILE       its EK public area (TPM2B_PUBLIC, tpm2_createek -f tss)\n"
    "  --address KIND=VALUE   a node address (repeatable; added to the machine's)\n"
    "  --replace-addresses    the given addresses replace the machine's\n"
    "  --var NAME=VALUE       a template value (repeatable; merged by name)\n"
    "  --replace-vars         the given values replace the machine's\n"
    "  --unset-var NAME       remove one template value (repeatable)\n"
    "  --policy FILE          the machine's boot policy (JSON; replaces)\n"
    "  --clear-policy         drop the machine's boot policy\n"
    "  --replace-ek           the machine's TPM was replaced: enroll the new EK\n"
    RACKGATE_OPT_JSON RACKGATE_OPT_SOCKET RACKGATE_ADMIN_EXIT;

constexpr char kListHelp[] =
    "Usage: rackgatectl list [--pool POOL] [--state STATE] [--json]\n"
    "\n"
    "Lists the enrolled machines: hostname, pool, state, EK hash (first 16 hex\n"
    "digits), last attestation, trust, last provisioning report, addresses.\n"
    "\n"
    "Options:\n"
    "  --pool POOL           only the machines of POOL (a pool that does not\n"
    "                        exist is refused: pool_unknown)\n"
    "  --state STATE         only machines in STATE (pending, enrolled, attested,\n"
    "                        provisioned, joined, revoked)\n"
    RACKGATE_OPT_JSON RACKGATE_OPT_SOCKET RACKGATE_ADMIN_EXIT;

constexpr char kShowHelp[] =
    "Usage: rackgatectl show HOSTNAME [--json]\n"
    "\n"
    "Shows one machine: pool, state, EK, TPM, addresses, trust and why, and\n"
    "the agent's last provisioning report (why a node is stuck, without a\n"
    "console).\n"
    "\n"
    "Options:\n"
    RACKGATE_OPT_JSON RACKGATE_OPT_SOCKET RACKGATE_ADMIN_EXIT;

constexpr char kRevokeHelp[] =
    "Usage: rackgatectl revoke HOSTNAME --reason TEXT [--json]\n"
    "\n"
    "Any state -> revoked: the machine's tokens stop working at once, it is\n"
    "refused attestation, config and certificates. Revoked is terminal: only\n"
    "`rackgatectl reset HOSTNAME --unrevoke --reason TEXT` (the same TPM, a\n"
    "false alarm) or `rackgatectl enroll --replace-ek` (a new TPM) undoes it.\n"
    "Audited with your user and the reason.\n"
    "\n"
    "Options:\n"
    "  --reason TEXT         why, for the audit log (required: there is no\n"
    "                        prompt, so scripts and terminals give it alike)\n"
    RACKGATE_OPT_JSON RACKGATE_OPT_SOCKET RACKGATE_ADMIN_EXIT;

constexpr char kResetHelp[] =
    "Usage: rackgatectl reset HOSTNAME [--reason TEXT] [--unrevoke] [--json]\n"
    "\n"
    "attested/provisioned/joined -> enrolled: lets the machine re-provision\n"
    "(clears trust-on-first-use values and the issued client certificate mark).\n"
    "A revoked machine is refused (machine_revoked) unless --unrevoke is given.\n"
    "Audited with your user and the reason.\n"
    "\n"
    "Options:\n"
    "  --reason TEXT         why, for the audit log (default \"by USER\")\n"
    "  --unrevoke            also lift a revocation (revoked -> enrolled)\n"
    RACKGATE_OPT_JSON RACKGATE_OPT_SOCKET RACKGATE_ADMIN_EXIT;

constexpr char kApproveHelp[] =
    "Usage: rackgatectl approve HOSTNAME [--hostname NEW] [--pool POOL]\n"
    "         [--address KIND=VALUE]... [--var NAME=VALUE]... [--reason TEXT] [--json]\n"
    "\n"
    "pending -> enrolled (discovery mode). A discovered machine is recorded as\n"
    "pending-<EK hash>; approve names it (--hostname: the kubelet certificate's\n"
    "CN is system:node:NEW), puts it in POOL and gives it its addresses (KIND is\n"
    "InternalIP, ExternalIP, InternalDNS, ExternalDNS or Hostname; any --address\n"
    "replaces the whole set, as --var does the vars), in one audited change.\n"
    "A hostname another machine has is refused (hostname_taken, naming it).\n"
    "\n"
    "Options:\n"
    "  --hostname NEW        the machine's name from now on\n"
    "  --pool POOL           the pool it boots from\n"
    "  --address KIND=VALUE  an address; may repeat (replaces the whole set)\n"
    "  --var NAME=VALUE      a template value; may repeat (replaces the whole set)\n"
    "  --reason TEXT         why, for the audit log\n"
    RACKGATE_OPT_JSON RACKGATE_OPT_SOCKET RACKGATE_ADMIN_EXIT;

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

// Trust and the last provisioning report (docs/trust.md), in a list's
// columns: "trusted", "untrusted" or "-" (never attested); "ok",
// "failed:STEP" or "-" (never reported).
std::string TrustColumn(const wire::MachineView& m) { return m.trust.empty() ? "-" : m.trust; }
std::string ReportColumn(const wire::MachineView& m) {
  if (!m.last_report) return "-";
  const std::string& outcome = m.last_report->outcome;
  return outcome == "failed" ? "failed:" + m.last_report->step : outcome;
}

std::string TimeOrDash(const std::optional<int64_t>& t) { return t ? UtcTime(*t) : "-"; }

std::vector<std::string> MachineRow(const wire::MachineView& m) {
  return {m.hostname, m.pool, m.state, m.ek_hash.substr(0, 16), TimeOrDash(m.last_attested_at), TrustColumn(m),
          ReportColumn(m), Addresses(m.addresses)};
}

// NAME=VALUE options (--var) as a vars object's JSON text; nullopt and
// *bad set to the first malformed one.
std::optional<std::string> VarsText(const std::vector<std::string>& given, std::string* bad) {
  json vars = json::object();
  for (const auto& v : given) {
    const size_t eq = v.find('=');
    if (eq == std::string::npos || eq == 0) {
      *bad = v;
      return std::nullopt;
    }
    vars[v.substr(0, eq)] = v.substr(eq + 1);
  }
  return vars.dump();
}

// The enroll request of the command line (RunEnroll); a usage error's text.
Result<wire::EnrollRequest> EnrollRequestFromArgs(const Args& args) {
  const auto usage = [](const std::string& why) { return Status::InvalidArgument("usage", why); };
  // Only what is given goes in the request: the daemon keeps every field it
  // does not name (docs/protocol.md, "Enroll").
  wire::EnrollRequest r;
  r.hostname = *args.Get("hostname");
  r.replace_ek = args.Has("replace-ek");
  r.pool = args.Get("pool");
  if (auto p = args.Get("ek-cert")) {
    // DER, PEM, the NV form or Intel's JSON answer: the DER goes on the wire.
    auto b = ReadFile(*p, kMaxCertFile);
    if (!b.ok()) return usage(b.status().message());
    auto der = EkCertificateFromFile(*b);
    if (!der.ok()) return usage(*p + ": " + der.status().message());
    r.ek_certificate_base64 = wire::Base64Encode(*der);
  }
  if (auto p = args.Get("ek-public")) {
    auto b = FileBase64(*p);
    if (!b.ok()) return usage(b.status().message());
    r.ek_public_base64 = *b;
  }
  if (args.Has("address")) {
    r.addresses.emplace();
    for (const auto& a : args.GetAll("address")) {
      auto addr = ParseAddress(a);
      if (!addr.ok()) return usage(addr.status().message());
      r.addresses->push_back(*addr);
    }
    r.replace_addresses = args.Has("replace-addresses");
  }
  if (auto p = args.Get("policy")) {
    auto policy = ReadJsonFile(*p, 1 << 20);
    if (!policy.ok()) return usage(policy.status().message());
    r.policy_given = true;
    r.policy_json = policy->dump();
  }
  r.clear_policy = args.Has("clear-policy");
  if (args.Has("var")) {
    std::string bad;
    r.vars_json = VarsText(args.GetAll("var"), &bad);
    if (!r.vars_json) return usage("--var takes NAME=VALUE, e.g. rack=r12");
    r.vars_given = true;
  }
  if (args.Has("replace-vars")) {
    if (!args.Has("var")) r.vars_json = "{}";  // --replace-vars alone: drop them all
    r.vars_given = true;
    r.replace_vars = true;
  }
  r.unset_vars = args.GetAll("unset-var");
  return r;
}

}  // namespace

int RunEnroll(const std::string& socket, int argc, char** argv, int first) {
  auto args = Args::Parse(argc, argv, first,
                          {{"hostname", "pool", "ek-cert", "ek-public", "address", "policy", "var", "unset-var"},
                           {"replace-ek", "replace-addresses", "replace-vars", "clear-policy", "json"},
                           0});
  if (!args.ok()) return UsageError(kEnrollHelp, args.status().message());
  if (args->Has("help")) return PrintHelp(kEnrollHelp);
  // A certificate given as the public area: the usual mix-up of the two flags.
  if (auto p = args->Get("ek-public")) {
    auto b = ReadFile(*p, kMaxCertFile);
    if (b.ok() && LooksLikeCertificate(std::string_view(reinterpret_cast<const char*>(b->data()), b->size()))) {
      return UsageError(kEnrollHelp, *p + " looks like a certificate, not a TPM2B_PUBLIC: use --ek-cert " + *p);
    }
  }
  if (Status s = args->Require({"hostname"}); !s.ok()) return UsageError(kEnrollHelp, s.message());
  if (!args->Get("ek-cert") && !args->Get("ek-public")) {
    return UsageError(kEnrollHelp, "give --ek-cert or --ek-public (the EK is the machine's identity)");
  }
  if (args->Has("replace-addresses") && !args->Has("address")) {
    return UsageError(kEnrollHelp, "--replace-addresses needs the new list: give it with --address KIND=VALUE");
  }
  if (args->Has("policy") && args->Has("clear-policy")) {
    return UsageError(kEnrollHelp, "give --policy or --clear-policy, not both");
  }
  auto request = EnrollRequestFromArgs(*args);
  if (!request.ok()) return UsageError(kEnrollHelp, request.status().message());
  int code = kExitOk;
  auto r = SendText(socket, "POST", "/v1/admin/machines", wire::EncodeEnrollRequest(*request), &code);
  if (!r.ok()) return code;
  if (args->Has("json")) return PrintAnswer(*r), kExitOk;
  auto m = DecodeAnswer(*r, wire::DecodeEnrollAnswer, &code);
  if (!m.ok()) return code;
  if (m->outcome.empty() || m->outcome == "created") {
    std::printf("enrolled %s: pool %s, state %s, EK %s\n", m->machine.hostname.c_str(), m->machine.pool.c_str(),
                m->machine.state.c_str(), m->machine.ek_hash.c_str());
  } else {
    std::printf("%s\n", m->summary.c_str());
  }
  return kExitOk;
}

int RunList(const std::string& socket, int argc, char** argv, int first) {
  auto args = Args::Parse(argc, argv, first, {{"pool", "state"}, {"json"}, 0});
  if (!args.ok()) return UsageError(kListHelp, args.status().message());
  if (args->Has("help")) return PrintHelp(kListHelp);
  const std::string path =
      "/v1/admin/machines" + wire::EncodeMachineListQuery({args->Get("pool"), args->Get("state")});
  int code = kExitOk;
  auto r = Send(socket, "GET", path, &code);
  if (!r.ok()) return code;
  if (args->Has("json")) return PrintAnswer(*r), kExitOk;
  auto machines = DecodeAnswer(*r, wire::DecodeMachineList, &code);
  if (!machines.ok()) return code;
  Table table({"HOSTNAME", "POOL", "STATE", "EK", "LAST ATTESTED", "TRUST", "REPORT", "ADDRESSES"});
  for (const wire::MachineView& m : *machines) table.Add(MachineRow(m));
  table.Print();
  return kExitOk;
}

namespace {

// The agent's last provisioning report: why a node is stuck, without a
// console. Its message was made printable by the appliance.
void PrintLastReport(const std::optional<wire::MachineReportView>& report) {
  if (!report) {
    std::printf("last report:   none\n");
    return;
  }
  const wire::MachineReportView& r = *report;
  std::printf("last report:   %s %s at step %s, exit status %d\n", UtcTime(r.at).c_str(), r.outcome.c_str(),
              r.step.c_str(), static_cast<int>(r.exit_status));
  if (!r.reason.empty()) std::printf("  reason:      %s\n", r.reason.c_str());
  if (!r.message.empty()) std::printf("  message:     %s\n", r.message.c_str());
  std::string done;
  for (const auto& d : r.done) done += (done.empty() ? "" : ", ") + d;
  std::printf("  done:        %s\n", done.empty() ? "-" : done.c_str());
}

}  // namespace

int RunShow(const std::string& socket, int argc, char** argv, int first) {
  auto args = Args::Parse(argc, argv, first, {{}, {"json"}, 1});
  if (!args.ok()) return UsageError(kShowHelp, args.status().message());
  if (args->Has("help")) return PrintHelp(kShowHelp);
  if (args->positional().size() != 1) return UsageError(kShowHelp, "give one HOSTNAME");
  int code = kExitOk;
  auto r = Send(socket, "GET", "/v1/admin/machines/" + args->positional()[0], &code);
  if (!r.ok()) return code;
  if (args->Has("json")) return PrintAnswer(*r), kExitOk;
  auto m = DecodeAnswer(*r, wire::DecodeMachineView, &code);
  if (!m.ok()) return code;
  std::printf("hostname:      %s\npool:          %s\nstate:         %s\nEK:            %s\n", m->hostname.c_str(),
              m->pool.c_str(), m->state.c_str(), m->ek_hash.c_str());
  std::printf("TPM:           %s %s %s\naddresses:     %s\nenrolled:      %s\nlast attested: %s\n",
              m->tpm_manufacturer.c_str(), m->tpm_model.c_str(), m->tpm_version.c_str(),
              Addresses(m->addresses).c_str(), UtcTime(m->created_at).c_str(),
              TimeOrDash(m->last_attested_at).c_str());
  // Trust (docs/trust.md): the verdict, since when, and why.
  if (m->trust.empty()) {
    std::printf("trust:         none yet (never attested)\n");
  } else {
    const std::string because = m->trust_reason.empty() ? "" : " (" + m->trust_reason + ")";
    std::printf("trust:         %s since %s%s\n", m->trust.c_str(), TimeOrDash(m->trust_changed_at).c_str(),
                because.c_str());
  }
  PrintLastReport(m->last_report);
  return kExitOk;
}

Result<wire::ReasonRequest> MachineActionRequest(const std::string& verb, const Args& args) {
  const auto usage = [](const std::string& why) { return Status::InvalidArgument("usage", why); };
  if (args.positional().size() != 1) return usage("give one HOSTNAME");
  wire::ReasonRequest body{args.Get("reason").value_or(""), args.Has("unrevoke")};
  // A revocation is read later by someone who must learn why: no default
  // reason, and no prompt (a prompt would hang a script or be answered
  // with Enter).
  if (verb == "revoke" && body.reason.find_first_not_of(" \t") == std::string::npos) {
    return usage("give --reason TEXT: why the machine is revoked (kept in the audit log)");
  }
  return body;
}

int RunMachineAction(const std::string& verb, const std::string& socket, int argc, char** argv, int first) {
  if (verb == "approve") return RunApprove(socket, argc, argv, first);
  const bool revoke = verb == "revoke";
  const char* help = revoke ? kRevokeHelp : kResetHelp;
  auto args = revoke ? Args::Parse(argc, argv, first, {{"reason"}, {"json"}, 1})
                     : Args::Parse(argc, argv, first, {{"reason"}, {"json", "unrevoke"}, 1});
  if (!args.ok()) return UsageError(help, args.status().message());
  if (args->Has("help")) return PrintHelp(help);
  auto body = MachineActionRequest(verb, *args);
  if (!body.ok()) return UsageError(help, body.status().message());
  int code = kExitOk;
  auto r = SendText(socket, "POST", "/v1/admin/machines/" + args->positional()[0] + "/" + verb,
                    wire::EncodeReasonRequest(*body), &code);
  if (!r.ok()) return code;
  if (args->Has("json")) return PrintAnswer(*r), kExitOk;
  auto m = DecodeAnswer(*r, wire::DecodeMachineView, &code);
  if (!m.ok()) return code;
  std::printf("%s %s: state %s\n", verb.c_str(), m->hostname.c_str(), m->state.c_str());
  return kExitOk;
}

int RunApprove(const std::string& socket, int argc, char** argv, int first) {
  auto args = Args::Parse(argc, argv, first, {{"hostname", "pool", "address", "var", "reason"}, {"json"}, 1});
  if (!args.ok()) return UsageError(kApproveHelp, args.status().message());
  if (args->Has("help")) return PrintHelp(kApproveHelp);
  if (args->positional().size() != 1) return UsageError(kApproveHelp, "give one HOSTNAME");
  wire::ApprovalRequest body;
  body.reason = args->Get("reason").value_or("");
  body.hostname = args->Get("hostname");
  body.pool = args->Get("pool");
  const auto addresses = args->GetAll("address");
  if (!addresses.empty()) body.addresses.emplace();
  for (const auto& a : addresses) {
    auto addr = ParseAddress(a);
    if (!addr.ok()) return UsageError(kApproveHelp, addr.status().message());
    body.addresses->push_back(*addr);
  }
  if (args->Has("var")) {
    std::string bad;
    body.vars_json = VarsText(args->GetAll("var"), &bad);
    if (!body.vars_json) return UsageError(kApproveHelp, "--var takes NAME=VALUE");
  }
  int code = kExitOk;
  const std::string& host = args->positional()[0];
  auto r = SendText(socket, "POST", "/v1/admin/machines/" + host + "/approve", wire::EncodeApprovalRequest(body),
                    &code);
  if (!r.ok()) return code;
  if (args->Has("json")) return PrintAnswer(*r), kExitOk;
  auto m = DecodeAnswer(*r, wire::DecodeMachineView, &code);
  if (!m.ok()) return code;
  std::printf("approve %s: %s in pool %s, state %s\n", host.c_str(), m->hostname.c_str(), m->pool.c_str(),
              m->state.c_str());
  return kExitOk;
}

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
  if (args->Has("json")) return PrintAnswer(*r), kExitOk;
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
  if (args->Has("json")) return PrintAnswer(*r), kExitOk;
  auto m = DecodeAnswer(*r, wire::DecodeMachineView, &code);
  if (!m.ok()) return code;
  std::printf("renamed %s to %s: state %s\n", from.c_str(), m->hostname.c_str(), m->state.c_str());
  return kExitOk;
}

}  // namespace rackgate::ctl
