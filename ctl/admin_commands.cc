// rackgatectl's admin API commands.
#include "ctl/admin_commands.h"

#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdio>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "wire/admin_audit.h"
#include "wire/admin_certificates.h"
#include "wire/admin_csrs.h"
#include "wire/admin_events.h"
#include "wire/admin_machines.h"
#include "wire/admin_pools.h"
#include "wire/admin_query.h"
#include "wire/admin_status.h"
#include "wire/codec.h"
#include "ctl/admin_client.h"
#include "ctl/args.h"
#include "ctl/ek_cert_urls.h"
#include "base/files.h"
#include "base/utc_time.h"
#include "ctl/offline.h"
#include "ctl/admin_util.h"

namespace rackgate::ctl {

namespace {

using nlohmann::json;

#define RACKGATE_ADMIN_EXIT \
  "\n"                        \
  "Exit status: 0 done; 1 refused (reason code on stderr); 2 unusable input or\n" \
  "rackgated unreachable.\n"
#define RACKGATE_OPT_JSON "  --json                print the daemon's answer as JSON instead of text\n"
#define RACKGATE_OPT_SOCKET "  --socket PATH         rackgated's admin socket (default /run/rackgate/admin.sock)\n"

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

constexpr char kAuditHelp[] =
    "Usage: rackgatectl audit [--hostname NAME] [--limit N] [--json]\n"
    "\n"
    "The latest entries of the audit log, printed oldest first (the newest\n"
    "last, as a log reads): when, who (user and uid over the admin socket, or\n"
    "the machine), what, which machine, the state change and why.\n"
    "\n"
    "Options:\n"
    "  --hostname NAME       only the entries of one machine\n"
    "  --limit N             the latest N entries, 1 to 10000 (default 50)\n"
    RACKGATE_OPT_JSON RACKGATE_OPT_SOCKET RACKGATE_ADMIN_EXIT;

constexpr char kStatusHelp[] =
    "Usage: rackgatectl status [--json]\n"
    "\n"
    "The appliance at a glance: machines by state, untrusted machines, and the\n"
    "recent attestation failures with their reason codes.\n"
    "\n"
    "Options:\n"
    RACKGATE_OPT_JSON RACKGATE_OPT_SOCKET RACKGATE_ADMIN_EXIT;

constexpr char kPoolHelp[] =
    "Usage: rackgatectl pool COMMAND ...\n"
    "\n"
    "A pool groups machines that share a boot policy and Ignition templates\n"
    "(docs/ignition.md). Commands:\n"
    "  put NAME               create or change a pool\n"
    "  show [NAME]            one pool, or every pool\n"
    "  diff NAME              compare a stored template with a file\n"
    "  remove-template NAME public|attested\n"
    "                         drop one of a pool's templates\n"
    "Run `rackgatectl pool COMMAND --help` for a command's options.\n"
    "\n"
    "Options:\n"
    RACKGATE_OPT_JSON RACKGATE_OPT_SOCKET RACKGATE_ADMIN_EXIT;

constexpr char kPoolPutHelp[] =
    "Usage: rackgatectl pool put NAME [--settings SETTINGS.json] [--policy POLICY.json]\n"
    "         [--public-template PUBLIC.ign] [--attested-template ATTESTED.ign]\n"
    "         [--token-required yes|no] [--json]\n"
    "\n"
    "Creates or changes pool NAME. The public template is served to anyone\n"
    "holding the pool's provisioning token at /config/NAME and must carry no\n"
    "secret; the attested template is merged on top of it for a machine that\n"
    "attested. put checks everything first (settings, policy, both templates:\n"
    "the spec, rackgate's secret rules, ignition-validate on the appliance),\n"
    "then stores all of it in one transaction or nothing; a refusal names the\n"
    "template. A pool that needs a token and has none gets one, printed once.\n"
    "Rotate it with `rackgatectl token rotate --pool NAME --grace DURATION`.\n"
    "\n"
    "Options:\n"
    "  --settings FILE           the pool's settings (JSON)\n"
    "  --policy FILE             the pool's boot policy (docs/policy.md)\n"
    "  --public-template FILE    the public Ignition template\n"
    "  --attested-template FILE  the attested Ignition template\n"
    "  --token-required yes|no   whether /config/NAME needs the token (default yes)\n"
    RACKGATE_OPT_JSON RACKGATE_OPT_SOCKET RACKGATE_ADMIN_EXIT;

constexpr char kPoolShowHelp[] =
    "Usage: rackgatectl pool show [NAME] [--template public|attested] [--json]\n"
    "\n"
    "Shows pool NAME (its tokens' ages, templates, policy and settings), or a\n"
    "table of every pool without NAME. --template prints one stored template\n"
    "as JSON.\n"
    "\n"
    "Options:\n"
    "  --template public|attested  print that stored template of NAME\n"
    RACKGATE_OPT_JSON RACKGATE_OPT_SOCKET RACKGATE_ADMIN_EXIT;

constexpr char kPoolDiffHelp[] =
    "Usage: rackgatectl pool diff NAME (--public-template FILE | --attested-template FILE) [--json]\n"
    "\n"
    "Compares the stored template of pool NAME with FILE, as `diff -u`.\n"
    "\n"
    "Options:\n"
    "  --public-template FILE    compare the public template with FILE\n"
    "  --attested-template FILE  compare the attested template with FILE\n"
    "  --json                    print {same, diff, stored, file} as JSON\n"
    RACKGATE_OPT_SOCKET
    "\n"
    "Exit status: 0 same; 1 different; 2 unusable input or rackgated unreachable.\n";

constexpr char kPoolRemoveTemplateHelp[] =
    "Usage: rackgatectl pool remove-template NAME public|attested [--json]\n"
    "\n"
    "Removes one of pool NAME's templates (audited).\n"
    "\n"
    "Options:\n"
    RACKGATE_OPT_JSON RACKGATE_OPT_SOCKET RACKGATE_ADMIN_EXIT;

constexpr char kTokenHelp[] =
    "Usage: rackgatectl token rotate --pool POOL --grace DURATION [--out FILE] [--json]\n"
    "\n"
    "Makes a new provisioning token for POOL and prints it once (or writes it to\n"
    "FILE, mode 0600). --grace is required: 0 stops the previous token at once;\n"
    "a duration (30m, 2h, 1d, 1h30m) keeps it valid that long for machines still\n"
    "booting with it. A token older than the previous one is dropped. Machines\n"
    "send the token as `Authorization: Bearer` (pointer httpHeaders, spec 3.1+)\n"
    "or as `?token=` in the URL (spec 3.0): `rackgatectl pointer`.\n"
    "\n"
    "Options:\n"
    "  --pool POOL           the pool\n"
    "  --grace DURATION      how long the previous token keeps working (required):\n"
    "                        0 (it stops at once), 90s, 30m, 2h, 1d, 1h30m\n"
    "  --out FILE            write the token to FILE (mode 0600) instead of stdout\n"
    RACKGATE_OPT_JSON RACKGATE_OPT_SOCKET RACKGATE_ADMIN_EXIT;

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
  if (args->Has("json")) return PrintJson(*r), kExitOk;
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
  auto r = Send(socket, "GET", path, nullptr, &code);
  if (!r.ok()) return code;
  if (args->Has("json")) return PrintJson(*r), kExitOk;
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
  auto r = Send(socket, "GET", "/v1/admin/machines/" + args->positional()[0], nullptr, &code);
  if (!r.ok()) return code;
  if (args->Has("json")) return PrintJson(*r), kExitOk;
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
  if (args->Has("json")) return PrintJson(*r), kExitOk;
  auto m = DecodeAnswer(*r, wire::DecodeMachineView, &code);
  if (!m.ok()) return code;
  std::printf("%s %s: state %s\n", verb.c_str(), m->hostname.c_str(), m->state.c_str());
  return kExitOk;
}

int RunAudit(const std::string& socket, int argc, char** argv, int first) {
  auto args = Args::Parse(argc, argv, first, {{"hostname", "limit"}, {"json"}, 0});
  if (!args.ok()) return UsageError(kAuditHelp, args.status().message());
  if (args->Has("help")) return PrintHelp(kAuditHelp);
  auto limit = args->GetInt("limit", 50, 1, 10000);
  if (!limit.ok()) return UsageError(kAuditHelp, limit.status().message());
  const wire::AuditQuery query{args->Get("hostname"), *limit, 0};
  int code = kExitOk;
  auto r = Send(socket, "GET", "/v1/admin/audit" + wire::EncodeAuditQuery(query), nullptr, &code);
  if (!r.ok()) return code;
  if (args->Has("json")) return PrintJson(*r), kExitOk;
  auto entries = DecodeAnswer(*r, wire::DecodeAuditList, &code);
  if (!entries.ok()) return code;
  Table table({"TIME", "ACTOR", "ACTION", "MACHINE", "STATE", "WHY"});
  for (const wire::AuditEntryView& e : *entries) {
    const std::string states = e.from_state.value_or("") + (e.to_state ? " -> " + *e.to_state : "");
    table.Add({UtcTime(e.at), e.actor, e.action, e.hostname, states.empty() ? "-" : states, e.why});
  }
  table.Print();
  return kExitOk;
}

int RunStatus(const std::string& socket, int argc, char** argv, int first) {
  auto args = Args::Parse(argc, argv, first, {{}, {"json"}, 0});
  if (!args.ok()) return UsageError(kStatusHelp, args.status().message());
  if (args->Has("help")) return PrintHelp(kStatusHelp);
  int code = kExitOk;
  auto r = Send(socket, "GET", "/v1/admin/status", nullptr, &code);
  if (!r.ok()) return code;
  if (args->Has("json")) return PrintJson(*r), kExitOk;
  auto status = DecodeAnswer(*r, wire::DecodeStatusView, &code);
  if (!status.ok()) return code;
  // First and loud: an observing pool must never be taken for an enforcing
  // one (docs/policy.md, "Observe").
  for (const std::string& p : status->pools_observing_boot_policy) {
    std::printf("WARNING: pool %s is OBSERVING: its boot policy is NOT ENFORCED (rackgatectl policy show --pool %s)\n",
                p.c_str(), p.c_str());
  }
  std::printf("machines by state:\n");
  for (const auto& [state, n] : status->machines_by_state) {
    std::printf("  %-12s %lld\n", state.c_str(), static_cast<long long>(n));
  }
  // Trust (docs/trust.md).
  std::printf("untrusted machines: %lld\n", static_cast<long long>(status->machines_untrusted));
  std::printf("recent attestation failures:\n");
  for (const wire::StatusFailureView& f : status->recent_failures) {
    std::printf("  %-21s %-20s %s\n", UtcTime(f.at).c_str(), f.hostname.c_str(), f.reason.c_str());
  }
  // Observability (docs/observability.md).
  std::printf("unknown EKs knocking (last hour): %zu\n", status->unknown_eks.size());
  for (const wire::UnknownEkView& k : status->unknown_eks) {
    std::printf("  %-16s  %-21s %-21s %5llu  %-15s %s\n", k.ek_hash.substr(0, 16).c_str(),
                UtcTime(k.first_seen).c_str(), UtcTime(k.last_seen).c_str(),
                static_cast<unsigned long long>(k.count), k.address.c_str(), k.reason.c_str());
    if (!k.ek_certificate_issuer.empty()) std::printf("    EK certificate issuer: %s\n", k.ek_certificate_issuer.c_str());
  }
  if (!status->unknown_eks.empty()) {
    std::printf("  enroll them with `rackgatectl enroll` or `rackgatectl import` (the full hash is in --json)\n");
  }
  // Trust (docs/trust.md): refusals before proof of the TPM leave the
  // machine's trust alone; this is where an operator sees them.
  std::printf("refused before proof of the TPM (last hour; trust unchanged): %zu machines\n",
              status->anonymous_refusals.size());
  for (const wire::AnonymousRefusalView& a : status->anonymous_refusals) {
    std::printf("  %-21s %-20s %6llu  %-15s %s\n", UtcTime(a.last_seen).c_str(), a.hostname.c_str(),
                static_cast<unsigned long long>(a.count), a.address.c_str(), a.reason.c_str());
  }
  return kExitOk;
}

namespace {

// A pool's stored template (its JSON text), pretty-printed, or "" when it
// has none.
std::string StoredTemplate(const wire::PoolView& pool, const std::string& which) {
  const auto& text = which == "public" ? pool.public_template_json : pool.attested_template_json;
  if (!text) return "";
  return json::parse(*text, nullptr, false).dump(2) + "\n";
}

// `diff -u` of two texts; its exit status (0 same, 1 different).
// Runs `diff -u` over a and b. Its text goes to stdout, or with `as_json`
// into one JSON document ({"same", "diff", "stored", "file"}). Exit 0 same,
// 1 different, 2 when diff could not run.
int ShowDiff(const std::string& a, const std::string& a_label, const std::string& b, const std::string& b_label,
             bool as_json) {
  char dir[] = "/tmp/rackgatectl-diff-XXXXXX";
  if (::mkdtemp(dir) == nullptr) return kExitUnusable;
  const std::string pa = std::string(dir) + "/a", pb = std::string(dir) + "/b";
  int rc = kExitUnusable;
  std::string text;
  int fds[2] = {-1, -1};
  if (WriteFileAtomic(pa, std::span(reinterpret_cast<const uint8_t*>(a.data()), a.size())).ok() &&
      WriteFileAtomic(pb, std::span(reinterpret_cast<const uint8_t*>(b.data()), b.size())).ok() &&
      ::pipe(fds) == 0) {
    std::fflush(stdout);
    const pid_t pid = ::fork();
    if (pid == 0) {
      ::dup2(fds[1], STDOUT_FILENO);
      ::close(fds[0]);
      ::close(fds[1]);
      ::execlp("diff", "diff", "-u", "--label", a_label.c_str(), "--label", b_label.c_str(), pa.c_str(), pb.c_str(),
               static_cast<char*>(nullptr));
      ::_exit(127);
    }
    ::close(fds[1]);
    char buf[4096];
    for (ssize_t n; (n = ::read(fds[0], buf, sizeof buf)) != 0;) {
      if (n < 0) {
        if (errno == EINTR) continue;
        break;
      }
      text.append(buf, static_cast<size_t>(n));
    }
    ::close(fds[0]);
    int status = 0;
    if (pid > 0 && ::waitpid(pid, &status, 0) == pid && WIFEXITED(status)) {
      rc = WEXITSTATUS(status) <= 1 ? WEXITSTATUS(status) : kExitUnusable;
    }
  }
  ::unlink(pa.c_str());
  ::unlink(pb.c_str());
  ::rmdir(dir);
  if (rc == kExitUnusable) {
    std::fprintf(stderr, "rackgatectl: could not run diff(1); is the diffutils package installed?\n");
    return rc;
  }
  if (as_json) {
    // `pool diff --json`: rackgatectl's own document, not an admin body.
    const json out = {{"same", rc == 0}, {"stored", a_label},  // admin-path: diff's output
                      {"file", b_label}, {"diff", text}};      // admin-path: diff's output
    PrintJson(out);
  } else {
    std::fputs(text.c_str(), stdout);
  }
  return rc;
}

}  // namespace

namespace {

// Template files by kind, as the operator named them.
std::vector<std::pair<std::string, std::string>> TemplateFiles(const Args& args) {
  std::vector<std::pair<std::string, std::string>> templates;
  for (const char* which : {"public", "attested"}) {
    if (auto f = args.Get(std::string(which) + "-template")) templates.emplace_back(which, *f);
  }
  return templates;
}

// The pool named in the path, decoded; *code says why not.
Result<wire::PoolView> GetPool(const std::string& socket, const std::string& name, int* code) {
  auto r = Send(socket, "GET", "/v1/admin/pools/" + name, nullptr, code);
  if (!r.ok()) return r.status();
  return DecodeAnswer(*r, wire::DecodePoolView, code);
}

int RunPoolDiff(const std::string& socket, const Args& args) {
  const auto templates = TemplateFiles(args);
  if (args.positional().size() != 1 || templates.size() != 1) {
    return UsageError(kPoolDiffHelp, "give one pool NAME and one of --public-template or --attested-template");
  }
  auto file = ReadJsonFile(templates[0].second, 4 << 20);
  if (!file.ok()) return UsageError(kPoolDiffHelp, file.status().message());
  int code = kExitOk;
  auto pool = GetPool(socket, args.positional()[0], &code);
  if (!pool.ok()) return code;
  return ShowDiff(StoredTemplate(*pool, templates[0].first),
                  "stored " + templates[0].first + " template of " + args.positional()[0], file->dump(2) + "\n",
                  templates[0].second, args.Has("json"));
}

int RunPoolRemoveTemplate(const std::string& socket, const Args& args) {
  if (args.positional().size() != 2) return UsageError(kPoolRemoveTemplateHelp, "give NAME and public or attested");
  int code = kExitOk;
  auto r = Send(socket, "DELETE", "/v1/admin/pools/" + args.positional()[0] + "/templates/" + args.positional()[1],
                nullptr, &code);
  if (!r.ok()) return code;
  if (args.Has("json")) return PrintJson(*r), kExitOk;
  std::printf("pool %s: %s template removed\n", args.positional()[0].c_str(), args.positional()[1].c_str());
  return kExitOk;
}

// The body of `pool put` from its options and files; a usage error's text.
Result<wire::PoolPutRequest> PoolPutFromArgs(const Args& args) {
  wire::PoolPutRequest put;
  // Read everything first: a bad file changes nothing on the appliance.
  for (const auto& [which, file] : TemplateFiles(args)) {
    auto doc = ReadJsonFile(file, 4 << 20);
    if (!doc.ok()) return doc.status();
    put.templates.push_back({which, doc->dump()});
  }
  if (auto t = args.Get("token-required")) {
    if (*t != "yes" && *t != "no") {
      return Status::InvalidArgument("field_invalid", "--token-required takes yes or no, got '" + *t + "'");
    }
    put.token_required = *t == "yes";
  }
  if (auto p = args.Get("settings")) {
    auto s = ReadJsonFile(*p, 1 << 20);
    if (!s.ok()) return s.status();
    put.settings_json = s->dump();
  }
  if (auto p = args.Get("policy")) {
    auto s = ReadJsonFile(*p, 1 << 20);
    if (!s.ok()) return s.status();
    put.boot_policy_given = true;
    put.boot_policy_json = s->dump();
  }
  return put;
}

int RunPoolPut(const std::string& socket, const Args& args) {
  if (args.positional().size() != 1) return UsageError(kPoolPutHelp, "give one pool NAME");
  const std::string name = args.positional()[0];
  auto put = PoolPutFromArgs(args);
  if (!put.ok()) return UsageError(kPoolPutHelp, put.status().message());
  // One request: the appliance checks everything, then stores everything
  // or nothing, so a refused template leaves no half-made pool and no
  // token that was never shown.
  int code = kExitOk;
  auto r = SendText(socket, "PUT", "/v1/admin/pools/" + name, wire::EncodePoolPutRequest(*put), &code);
  if (!r.ok()) return code;
  if (args.Has("json")) return PrintJson(*r), kExitOk;  // provisioning_token included
  auto pool = DecodeAnswer(*r, wire::DecodePoolView, &code);
  if (!pool.ok()) return code;
  std::printf("pool %s stored; provisioning token %s\n", pool->name.c_str(), pool->token_required ? "required" : "off");
  for (const auto& t : put->templates) std::printf("  %s template stored\n", t.which.c_str());
  if (pool->provisioning_token && !pool->provisioning_token->empty()) {
    std::printf("provisioning token (shown once; `rackgatectl pointer --pool %s --token-file FILE` uses it):\n%s\n",
                name.c_str(), pool->provisioning_token->c_str());
  }
  return kExitOk;
}

void PrintPoolTable(const std::vector<wire::PoolView>& pools) {
  Table table({"POOL", "TOKEN", "TOKENS", "PUBLIC", "ATTESTED", "POLICY", "UPDATED"});
  for (const auto& p : pools) {
    table.Add({p.name, p.token_required ? "required" : "off", std::to_string(p.provisioning_tokens.size()),
               p.public_template_json ? "yes" : "-", p.attested_template_json ? "yes" : "-",
               p.boot_policy_json ? "yes" : "-", UtcTime(p.updated_at)});
  }
  table.Print();
}

void PrintPool(const wire::PoolView& p) {
  std::printf("pool:             %s\n", p.name.c_str());
  std::printf("token required:   %s\n", p.token_required ? "yes" : "no");
  for (const auto& t : p.provisioning_tokens) {
    std::printf("  token:          %s since %s%s\n", t.current ? "current" : "previous",
                UtcTime(t.created_at).c_str(),
                t.valid_until ? (", valid until " + UtcTime(*t.valid_until)).c_str() : "");
  }
  std::printf("public template:  %s\n", p.public_template_json ? "yes" : "none");
  std::printf("attested template:%s\n", p.attested_template_json ? " yes" : " none");
  std::printf("boot policy:      %s\n", p.boot_policy_json ? "yes" : "none");
  std::printf("boot policy mode: %s\n",
              p.boot_policy_mode == "observe" ? "OBSERVE (evaluated and recorded, NOT ENFORCED)" : "enforce");
  std::printf("settings:         %s\n", p.settings_json.c_str());
}

int RunPoolShow(const std::string& socket, const Args& args) {
  std::string path = "/v1/admin/pools";
  if (!args.positional().empty()) path += "/" + args.positional()[0];
  int code = kExitOk;
  auto r = Send(socket, "GET", path, nullptr, &code);
  if (!r.ok()) return code;
  if (auto which = args.Get("template")) {
    if (args.positional().empty()) return UsageError(kPoolShowHelp, "--template needs a pool NAME");
    auto pool = DecodeAnswer(*r, wire::DecodePoolView, &code);
    if (!pool.ok()) return code;
    const std::string text = StoredTemplate(*pool, *which);
    if (text.empty()) {
      std::fprintf(stderr, "rackgatectl: pool %s has no %s template\n", args.positional()[0].c_str(), which->c_str());
      return kExitRefused;
    }
    std::fputs(text.c_str(), stdout);
    return kExitOk;
  }
  if (args.Has("json")) return PrintJson(*r), kExitOk;
  if (args.positional().empty()) {
    auto pools = DecodeAnswer(*r, wire::DecodePoolList, &code);
    if (!pools.ok()) return code;
    PrintPoolTable(*pools);
    return kExitOk;
  }
  auto pool = DecodeAnswer(*r, wire::DecodePoolView, &code);
  if (!pool.ok()) return code;
  PrintPool(*pool);
  return kExitOk;
}

}  // namespace

int RunPool(const std::string& socket, int argc, char** argv, int first) {
  if (first >= argc) return UsageError(kPoolHelp, "give put, show, diff or remove-template");
  const std::string sub = argv[first];
  if (sub == "--help") return PrintHelp(kPoolHelp);
  static const std::vector<std::string> kSubs = {"put", "show", "diff", "remove-template"};
  if (std::find(kSubs.begin(), kSubs.end(), sub) == kSubs.end()) {
    return UsageError(kPoolHelp, "unknown pool command '" + sub + "'" + DidYouMean(sub, kSubs));
  }
  FlagSpec spec{{}, {"json"}, 1};
  const char* help = kPoolRemoveTemplateHelp;
  if (sub == "put") {
    spec.with_value = {"settings", "policy", "public-template", "attested-template", "token-required"};
    help = kPoolPutHelp;
  } else if (sub == "show") {
    spec.with_value = {"template"};
    help = kPoolShowHelp;
  } else if (sub == "diff") {
    spec.with_value = {"public-template", "attested-template"};
    help = kPoolDiffHelp;
  } else {
    spec.max_positional = 2;
  }
  auto args = Args::Parse(argc, argv, first + 1, spec);
  if (!args.ok()) return UsageError(help, args.status().message());
  if (args->Has("help")) return PrintHelp(help);
  if (sub == "diff") return RunPoolDiff(socket, *args);
  if (sub == "remove-template") return RunPoolRemoveTemplate(socket, *args);
  if (sub == "put") return RunPoolPut(socket, *args);
  return RunPoolShow(socket, *args);
}


int RunCerts(const std::string& socket, int argc, char** argv, int first) {
  static constexpr char kHelp[] =
      "Usage: rackgatectl certs [--hostname NAME] [--limit N] [--json]\n"
      "\n"
      "Every kubelet certificate rackgate signed, newest first: serial, machine,\n"
      "kind (client or serving), whether its key is TPM-resident, and expiry.\n"
      "\n"
      "Options:\n"
      "  --hostname NAME       only the certificates of one machine\n"
      "  --limit N             at most N certificates, 1 to 100000 (default 1000)\n"
      RACKGATE_OPT_JSON RACKGATE_OPT_SOCKET RACKGATE_ADMIN_EXIT;
  auto args = Args::Parse(argc, argv, first, {{"hostname", "limit"}, {"json"}, 0});
  if (!args.ok()) return UsageError(kHelp, args.status().message());
  if (args->Has("help")) return PrintHelp(kHelp);
  auto limit = args->GetInt("limit", 1000, 1, 100000);
  if (!limit.ok()) return UsageError(kHelp, limit.status().message());
  const wire::CertificateQuery query{args->Get("hostname"), *limit};
  int code = kExitOk;
  auto r = Send(socket, "GET", "/v1/admin/certificates" + wire::EncodeCertificateQuery(query), nullptr, &code);
  if (!r.ok()) return code;
  if (args->Has("json")) return PrintJson(*r), kExitOk;
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

int RunToken(const std::string& socket, int argc, char** argv, int first) {
  if (first >= argc) return UsageError(kTokenHelp, "give rotate");
  const std::string sub = argv[first];
  if (sub == "--help") return PrintHelp(kTokenHelp);
  if (sub != "rotate") return UsageError(kTokenHelp, "unknown token command '" + sub + "'" + DidYouMean(sub, {"rotate"}));
  auto args = Args::Parse(argc, argv, first + 1, {{"pool", "grace", "out"}, {"json"}, 0});
  if (!args.ok()) return UsageError(kTokenHelp, args.status().message());
  if (args->Has("help")) return PrintHelp(kTokenHelp);
  if (Status s = args->Require({"pool"}); !s.ok()) return UsageError(kTokenHelp, s.message());
  // No default grace: stopping the current token at once strands machines
  // whose pointer still carries it, keeping it lets a leaked one live on.
  // The operator says which.
  if (!args->Get("grace")) {
    return UsageError(kTokenHelp,
                      "give --grace: --grace 0 stops the current token at once, --grace 1h (or 30m, 2h, 1d) keeps "
                      "it valid that long for machines still booting with it");
  }
  auto seconds = args->GetDuration("grace", 0);
  if (!seconds.ok()) return UsageError(kTokenHelp, seconds.status().message());
  int code = kExitOk;
  auto r = SendText(socket, "POST", "/v1/admin/pools/" + *args->Get("pool") + "/token/rotate",
                    wire::EncodeTokenRotateRequest({*seconds}), &code);
  if (!r.ok()) return code;
  auto rotation = DecodeAnswer(*r, wire::DecodeTokenRotation, &code);
  if (!rotation.ok()) return code;
  const std::string token = rotation->provisioning_token;
  if (auto out = args->Get("out")) {
    const std::string line = token + "\n";
    if (Status s = WriteFileAtomic(*out, std::span(reinterpret_cast<const uint8_t*>(line.data()), line.size()));
        !s.ok()) {
      // The new token is active already: print it rather than lose it.
      std::fprintf(stderr,
                   "rackgatectl: the new token is active but could not be written to %s: %s; it follows on "
                   "stdout (shown once)\n",
                   out->c_str(), s.message().c_str());
      std::printf("%s\n", token.c_str());
      return kExitUnusable;
    }
    rotation->provisioning_token.clear();
  }
  // With --out, the token is in the file and not in the answer printed.
  if (args->Has("json")) {
    return PrintJson(args->Get("out") ? json::parse(wire::EncodeTokenRotation(*rotation)) : *r), kExitOk;
  }
  if (auto out = args->Get("out")) {
    std::printf("pool %s: new provisioning token written to %s\n", args->Get("pool")->c_str(), out->c_str());
  } else {
    std::printf("%s\n", token.c_str());
  }
  if (rotation->previous_valid_until) {
    std::fprintf(stderr, "the previous token stays valid until %s\n",
                 UtcTime(*rotation->previous_valid_until).c_str());
  } else {
    std::fprintf(stderr, "the previous token no longer works\n");
  }
  return kExitOk;
}

// --- Webhook events (docs/events.md) -----------------------------------------

namespace {

constexpr char kEventsHelp[] =
    "Usage: rackgatectl events [--pending] [--limit N] [--json]\n"
    "\n"
    "The newest webhook events, newest first, with each webhook's delivery:\n"
    "delivered, or the attempts so far, the next one and the last error.\n"
    "\n"
    "Options:\n"
    "  --pending             only events some webhook has not received yet\n"
    "  --limit N             at most N events, 1 to 10000 (default 50)\n"
    RACKGATE_OPT_JSON RACKGATE_OPT_SOCKET RACKGATE_ADMIN_EXIT;

// One delivery's state in a few words.
std::string DeliveryState(const wire::EventDeliveryView& d) {
  std::string out = d.webhook + ": ";
  const std::string attempts = std::to_string(d.attempts);
  if (d.delivered_at) return out + "delivered " + UtcTime(*d.delivered_at) + " (attempts " + attempts + ")";
  out += "pending, attempts " + attempts + ", next " + UtcTime(d.next_attempt_at);
  if (!d.last_error.empty()) out += ", last error: " + d.last_error;
  return out;
}

}  // namespace

int RunEvents(const std::string& socket, int argc, char** argv, int first) {
  auto args = Args::Parse(argc, argv, first, {{"limit"}, {"pending", "json"}, 0});
  if (!args.ok()) return UsageError(kEventsHelp, args.status().message());
  if (args->Has("help")) return PrintHelp(kEventsHelp);
  auto limit = args->GetInt("limit", 50, 1, 10000);
  if (!limit.ok()) return UsageError(kEventsHelp, limit.status().message());
  const wire::EventQuery query{*limit, args->Has("pending")};
  int code = kExitOk;
  auto r = Send(socket, "GET", "/v1/admin/events" + wire::EncodeEventQuery(query), nullptr, &code);
  if (!r.ok()) return code;
  if (args->Has("json")) return PrintJson(*r), kExitOk;
  auto events = DecodeAnswer(*r, wire::DecodeEventList, &code);
  if (!events.ok()) return code;
  Table table({"ID", "TIME", "TYPE", "MACHINE", "DELIVERIES"});
  for (const wire::EventView& e : *events) {
    table.Add({std::to_string(e.id), UtcTime(e.at), e.type, e.hostname,
               e.deliveries.empty() ? "(no webhook)" : DeliveryState(e.deliveries.front())});
    for (size_t i = 1; i < e.deliveries.size(); ++i) table.Add({"", "", "", "", DeliveryState(e.deliveries[i])});
  }
  table.Print();
  return kExitOk;
}

// --- Manual CSR approval and discovery -----------------------------------------

int RunApprove(const std::string& socket, int argc, char** argv, int first) {
  static constexpr char kHelp[] =
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
  auto args = Args::Parse(argc, argv, first, {{"hostname", "pool", "address", "var", "reason"}, {"json"}, 1});
  if (!args.ok()) return UsageError(kHelp, args.status().message());
  if (args->Has("help")) return PrintHelp(kHelp);
  if (args->positional().size() != 1) return UsageError(kHelp, "give one HOSTNAME");
  wire::ApprovalRequest body;
  body.reason = args->Get("reason").value_or("");
  body.hostname = args->Get("hostname");
  body.pool = args->Get("pool");
  const auto addresses = args->GetAll("address");
  if (!addresses.empty()) body.addresses.emplace();
  for (const auto& a : addresses) {
    auto addr = ParseAddress(a);
    if (!addr.ok()) return UsageError(kHelp, addr.status().message());
    body.addresses->push_back(*addr);
  }
  if (args->Has("var")) {
    std::string bad;
    body.vars_json = VarsText(args->GetAll("var"), &bad);
    if (!body.vars_json) return UsageError(kHelp, "--var takes NAME=VALUE");
  }
  int code = kExitOk;
  const std::string& host = args->positional()[0];
  auto r = SendText(socket, "POST", "/v1/admin/machines/" + host + "/approve", wire::EncodeApprovalRequest(body),
                    &code);
  if (!r.ok()) return code;
  if (args->Has("json")) return PrintJson(*r), kExitOk;
  auto m = DecodeAnswer(*r, wire::DecodeMachineView, &code);
  if (!m.ok()) return code;
  std::printf("approve %s: %s in pool %s, state %s\n", host.c_str(), m->hostname.c_str(), m->pool.c_str(),
              m->state.c_str());
  return kExitOk;
}

namespace {

constexpr char kCsrHelp[] =
    "Usage: rackgatectl csr COMMAND ...\n"
    "\n"
    "Kubelet CSRs that passed every rule and wait for an operator, because\n"
    "their pool's settings say \"csr_approval\": {\"client\": \"manual\"} (or\n"
    "serving, renewal). In approver mode (docs/kubernetes.md) also the\n"
    "kubelet's CSRs in the API server that rackgate decided or holds, named by\n"
    "their metadata.name (SOURCE kubernetes). Commands:\n"
    "  list                   the waiting requests (--all: every request)\n"
    "  approve ID|NAME        sign the machine's next submission of that key, or\n"
    "                         approve the kubelet's CSR in the API server\n"
    "  deny ID|NAME --reason TEXT  refuse it for good; the machine is told why\n"
    "Run `rackgatectl csr COMMAND --help` for a command's options.\n"
    "\n"
    "Options:\n"
    RACKGATE_OPT_JSON RACKGATE_OPT_SOCKET RACKGATE_ADMIN_EXIT;

constexpr char kCsrListHelp[] =
    "Usage: rackgatectl csr list [--all] [--json]\n"
    "\n"
    "The kubelet CSRs waiting for an operator: ID (or, for a CSR in the API\n"
    "server, its NAME), SOURCE (agent or kubernetes), machine, kind (and\n"
    "purpose: join, rotation, serving), key hash, age, whether the key is\n"
    "TPM-resident, state (with rackgate's reason for a kubernetes one).\n"
    "\n"
    "Options:\n"
    "  --all                 every request and its decision, not only waiting ones\n"
    RACKGATE_OPT_JSON RACKGATE_OPT_SOCKET RACKGATE_ADMIN_EXIT;

constexpr char kCsrApproveHelp[] =
    "Usage: rackgatectl csr approve ID|NAME [--uid UID] [--reason TEXT] [--json]\n"
    "\n"
    "Lets the machine's next submission of the same key be signed (every rule\n"
    "is checked again then). A NAME (a kubelet's CSR in the API server that\n"
    "waits, approver mode): rackgated approves that object (its uid) there\n"
    "within 30 s. Audited.\n"
    "\n"
    "Options:\n"
    "  --reason TEXT         why, for the audit log\n"
    "  --uid UID             which CSR of that NAME (metadata.uid, `csr list --json`)\n"
    "                        when the name was reused in the API server\n"
    RACKGATE_OPT_JSON RACKGATE_OPT_SOCKET RACKGATE_ADMIN_EXIT;

constexpr char kCsrDenyHelp[] =
    "Usage: rackgatectl csr deny ID|NAME [--uid UID] --reason TEXT [--json]\n"
    "\n"
    "Refuses the request for good; the machine is told the reason (a NAME:\n"
    "the kubelet's CSR is denied in the API server within 30 s). Audited.\n"
    "\n"
    "Options:\n"
    "  --reason TEXT         why (required; the machine is told it)\n"
    "  --uid UID             which CSR of that NAME (metadata.uid), as for approve\n"
    RACKGATE_OPT_JSON RACKGATE_OPT_SOCKET RACKGATE_ADMIN_EXIT;

}  // namespace

int RunCsr(const std::string& socket, int argc, char** argv, int first) {
  if (first >= argc) return UsageError(kCsrHelp, "give list, approve or deny");
  const std::string sub = argv[first];
  if (sub == "--help") return PrintHelp(kCsrHelp);
  if (sub != "list" && sub != "approve" && sub != "deny") {
    return UsageError(kCsrHelp, "unknown csr command '" + sub + "'" + DidYouMean(sub, {"list", "approve", "deny"}));
  }
  const char* help = sub == "list" ? kCsrListHelp : sub == "approve" ? kCsrApproveHelp : kCsrDenyHelp;
  auto args = sub == "list" ? Args::Parse(argc, argv, first + 1, {{}, {"all", "json"}, 0})
                            : Args::Parse(argc, argv, first + 1, {{"reason", "uid"}, {"json"}, 1});
  if (!args.ok()) return UsageError(help, args.status().message());
  if (args->Has("help")) return PrintHelp(help);
  int code = kExitOk;
  if (sub == "list") {
    wire::CsrQuery query;
    query.all = args->Has("all");
    auto r = Send(socket, "GET", "/v1/admin/csrs" + wire::EncodeCsrQuery(query), nullptr, &code);
    if (!r.ok()) return code;
    if (args->Has("json")) return PrintJson(*r), kExitOk;
    auto csrs = DecodeAnswer(*r, wire::DecodeCsrList, &code);
    if (!csrs.ok()) return code;
    // A kubelet's CSR in the API server (approver mode) is named by its
    // metadata.name and decided there, not by `csr approve`.
    Table table({"ID", "SOURCE", "HOSTNAME", "KIND", "KEY SHA-256", "AGE", "TPM", "STATE"});
    for (const wire::CsrView& c : *csrs) {
      const int64_t age = c.age_seconds;
      const std::string age_text = age < 120 ? std::to_string(age) + "s"
                                   : age < 7200 ? std::to_string(age / 60) + "m"
                                                : std::to_string(age / 3600) + "h";
      const bool kube = c.source == "kubernetes";
      std::string state = c.state;
      if (kube && !c.reason.empty()) state += ": " + c.reason;
      else if (!c.deny_reason.empty()) state += ": " + c.deny_reason;
      table.Add({kube ? c.name : std::to_string(c.id), c.source, c.hostname,
                 kube ? c.kind + "/" + c.purpose : c.kind, c.public_key_sha256.substr(0, 16), age_text,
                 c.tpm_resident ? "yes" : "no", state});
    }
    table.Print();
    return kExitOk;
  }
  if (args->positional().size() != 1) return UsageError(help, "give one ID");
  const std::string& id = args->positional()[0];
  // A number: an agent's request; a name: a kubelet's CSR in the API server
  // (approver mode), as `csr list` shows it.
  const bool number = !id.empty() && id.find_first_not_of("0123456789") == std::string::npos;
  const bool name = !id.empty() && id.size() <= 253 && id.front() >= 'a' && id.front() <= 'z' &&
                    id.find_first_not_of("abcdefghijklmnopqrstuvwxyz0123456789.-") == std::string::npos;
  if (!number && !name) {
    return UsageError(help, "give the ID or NAME that `rackgatectl csr list` shows, got '" + id + "'");
  }
  if (sub == "deny" && args->Get("reason").value_or("").empty()) {
    return UsageError(help, "deny needs --reason TEXT (the machine is told it)");
  }
  const wire::CsrDecisionRequest decision{args->Get("reason").value_or(""), args->Get("uid").value_or("")};
  if (!decision.uid.empty() && number) return UsageError(help, "--uid names a kubelet CSR of the API server, not an ID");
  auto r = SendText(socket, "POST", "/v1/admin/csrs/" + id + "/" + sub, wire::EncodeCsrDecisionRequest(decision),
                    &code);
  if (!r.ok()) return code;
  if (args->Has("json")) return PrintJson(*r), kExitOk;
  auto decided = DecodeAnswer(*r, wire::DecodeCsrView, &code);
  if (!decided.ok()) return code;
  std::printf("csr %s %s (%s, %s): %s\n", id.c_str(), sub == "approve" ? "approved" : "denied",
              decided->hostname.c_str(), decided->kind.c_str(), decided->state.c_str());
  return kExitOk;
}

}  // namespace rackgate::ctl
