// rackgatectl csr list|approve|deny over the admin API (wire/admin_csrs.h,
// core/csr_service.h): kubelet CSRs waiting for an operator.
#include "ctl/commands.h"

#include <cstdio>
#include <string>

#include "ctl/admin_util.h"
#include "ctl/args.h"
#include "ctl/command_line.h"
#include "wire/admin_csrs.h"
#include "wire/admin_query.h"

namespace rackgate::ctl {

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
    auto r = Send(socket, "GET", "/v1/admin/csrs" + wire::EncodeCsrQuery(query), &code);
    if (!r.ok()) return code;
    if (args->Has("json")) return PrintAnswer(*r), kExitOk;
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
  if (args->Has("json")) return PrintAnswer(*r), kExitOk;
  auto decided = DecodeAnswer(*r, wire::DecodeCsrView, &code);
  if (!decided.ok()) return code;
  std::printf("csr %s %s (%s, %s): %s\n", id.c_str(), sub == "approve" ? "approved" : "denied",
              decided->hostname.c_str(), decided->kind.c_str(), decided->state.c_str());
  return kExitOk;
}

}  // namespace rackgate::ctl
