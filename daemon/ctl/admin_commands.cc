// rackgatectl's admin API commands.
#include "daemon/ctl/admin_commands.h"

#include <sys/wait.h>
#include <unistd.h>

#include <cctype>
#include <cstdio>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "wire/codec.h"
#include "daemon/ctl/admin_client.h"
#include "daemon/ctl/args.h"
#include "base/files.h"
#include "daemon/ctl/offline.h"
#include "daemon/ctl/admin_util.h"

namespace rackgate::ctl {

namespace {

using nlohmann::json;

constexpr char kEnrollHelp[] =
    "Usage: rackgatectl enroll --hostname NAME --pool POOL\n"
    "         (--ek-cert EK.der|EK.pem | --ek-public EK.pub) [--ek-cert ... --ek-public ...]\n"
    "         [--address KIND=VALUE]... [--var NAME=VALUE]... [--policy POLICY.json]\n"
    "         [--replace-ek] [--json]\n"
    "\n"
    "Enrolls a machine: its identity is its EK (the hash of the EK's public key,\n"
    "the same from the certificate or the TPM2B_PUBLIC). The daemon validates an\n"
    "EK certificate against its configured manufacturer roots before it records\n"
    "it. KIND is InternalIP, ExternalIP, InternalDNS, ExternalDNS or Hostname.\n"
    "An enrolled EK is immutable: enrolling the hostname again with another EK\n"
    "is refused (ek_conflict) unless --replace-ek is given, which is audited.\n"
    "--var sets a value for the pool's attested template ({{machine.NAME}});\n"
    "enrolling again replaces the whole set.\n";

constexpr char kListHelp[] =
    "Usage: rackgatectl list [--pool POOL] [--state STATE] [--json]\n";
constexpr char kShowHelp[] = "Usage: rackgatectl show HOSTNAME [--json]\n";
constexpr char kActionHelp[] =
    "Usage: rackgatectl approve|revoke|reset HOSTNAME [--reason TEXT] [--json]\n"
    "\n"
    "approve: pending -> enrolled (discovery mode); it can also rename, move\n"
    "         and address the machine: rackgatectl approve --help.\n"
    "revoke:  any state -> revoked; its tokens stop working at once. Terminal\n"
    "         until the machine is enrolled again with --replace-ek.\n"
    "reset:   attested/provisioned/joined/revoked -> enrolled: lets the machine\n"
    "         re-provision (clears trust-on-first-use values and the issued\n"
    "         client certificate mark).\n"
    "Every action is audited with your user and the reason.\n";
constexpr char kAuditHelp[] = "Usage: rackgatectl audit [--hostname NAME] [--limit N] [--json]\n";
constexpr char kStatusHelp[] = "Usage: rackgatectl status [--json]\n";
constexpr char kPoolHelp[] =
    "Usage: rackgatectl pool put NAME [--settings SETTINGS.json] [--policy POLICY.json]\n"
    "         [--public-template PUBLIC.ign] [--attested-template ATTESTED.ign]\n"
    "         [--token-required yes|no] [--json]\n"
    "       rackgatectl pool show [NAME] [--template public|attested] [--json]\n"
    "       rackgatectl pool diff NAME (--public-template FILE | --attested-template FILE)\n"
    "       rackgatectl pool remove-template NAME public|attested\n"
    "\n"
    "A pool groups machines that share a boot policy and Ignition templates\n"
    "(docs/ignition.md). The public template is served to anyone holding the\n"
    "pool's provisioning token at /config/NAME and must carry no secret; the\n"
    "attested template is merged on top of it for a machine that attested.\n"
    "Templates are validated when stored (the spec, rackgate's secret rules and\n"
    "ignition-validate on the appliance). A new pool needs a provisioning token\n"
    "unless --token-required no: its first token is printed once. Rotate it\n"
    "with `rackgatectl token rotate`.\n"
    "diff compares the stored template with FILE (exit 0 same, 1 different).\n";

constexpr char kTokenHelp[] =
    "Usage: rackgatectl token rotate --pool POOL [--grace DURATION] [--out FILE] [--json]\n"
    "\n"
    "Makes a new provisioning token for POOL and prints it once (or writes it to\n"
    "FILE, mode 0600). The previous token stays valid for DURATION (e.g. 30m,\n"
    "2h, 1d, 1h30m; default 0: it stops at once); a token older than that is\n"
    "dropped. Machines send the token as `Authorization: Bearer` through the\n"
    "pointer config's httpHeaders (`rackgatectl pointer`).\n";


// Trust and the last provisioning report (docs/trust.md), in a list's
// columns: "trusted", "untrusted" or "-" (never attested); "ok",
// "failed:STEP" or "-" (never reported).
std::string TrustColumn(const json& m) { return Str(m, "trust"); }
std::string ReportColumn(const json& m) {
  if (!m.contains("last_report") || !m.at("last_report").is_object()) return "-";
  const json& r = m.at("last_report");
  const std::string outcome = Str(r, "outcome");
  return outcome == "failed" ? "failed:" + Str(r, "step") : outcome;
}

void PrintMachineLine(const json& m) {
  std::printf("%-20s %-12s %-12s %-18s %-21s %-10s %-18s %s\n", Str(m, "hostname").c_str(), Str(m, "pool").c_str(),
              Str(m, "state").c_str(), Str(m, "ek_hash").substr(0, 16).c_str(),
              FormatTime(m, "last_attested_at").c_str(), TrustColumn(m).c_str(), ReportColumn(m).c_str(),
              Addresses(m).c_str());
}

}  // namespace

int RunEnroll(const std::string& socket, int argc, char** argv, int first) {
  auto args = Args::Parse(argc, argv, first,
                          {{"hostname", "pool", "ek-cert", "ek-public", "address", "policy", "var"}, {"replace-ek", "json"}});
  if (!args.ok()) return UsageError(kEnrollHelp, args.status().message());
  if (args->Has("help")) return std::fputs(kEnrollHelp, stdout), kExitOk;
  if (Status s = args->Require({"hostname", "pool"}); !s.ok()) return UsageError(kEnrollHelp, s.message());
  if (!args->Get("ek-cert") && !args->Get("ek-public")) {
    return UsageError(kEnrollHelp, "give --ek-cert or --ek-public");
  }
  json body = {{"hostname", *args->Get("hostname")}, {"pool", *args->Get("pool")},
               {"replace_ek", args->Has("replace-ek")}, {"addresses", json::array()}};
  if (auto p = args->Get("ek-cert")) {
    auto b = FileBase64(*p);
    if (!b.ok()) return UsageError(kEnrollHelp, b.status().message());
    body["ek_certificate"] = *b;
  }
  if (auto p = args->Get("ek-public")) {
    auto b = FileBase64(*p);
    if (!b.ok()) return UsageError(kEnrollHelp, b.status().message());
    body["ek_public"] = *b;
  }
  for (const auto& a : args->GetAll("address")) {
    auto addr = ParseAddress(a);
    if (!addr.ok()) return UsageError(kEnrollHelp, addr.status().message());
    body["addresses"].push_back(*addr);
  }
  if (auto p = args->Get("policy")) {
    auto policy = ReadJsonFile(*p, 1 << 20);
    if (!policy.ok()) return UsageError(kEnrollHelp, policy.status().message());
    body["policy"] = *policy;
  }
  for (const auto& v : args->GetAll("var")) {
    const size_t eq = v.find('=');
    if (eq == std::string::npos || eq == 0) return UsageError(kEnrollHelp, "--var takes NAME=VALUE");
    body["vars"][v.substr(0, eq)] = v.substr(eq + 1);
  }
  int code = kExitOk;
  auto m = Send(socket, "POST", "/v1/admin/machines", body, &code);
  if (!m.ok()) return code;
  if (args->Has("json")) {
    PrintJson(*m);
  } else {
    std::printf("enrolled %s: pool %s, state %s, EK %s\n", Str(*m, "hostname").c_str(), Str(*m, "pool").c_str(),
                Str(*m, "state").c_str(), Str(*m, "ek_hash").c_str());
  }
  return kExitOk;
}

int RunList(const std::string& socket, int argc, char** argv, int first) {
  auto args = Args::Parse(argc, argv, first, {{"pool", "state"}, {"json"}});
  if (!args.ok()) return UsageError(kListHelp, args.status().message());
  if (args->Has("help")) return std::fputs(kListHelp, stdout), kExitOk;
  std::string path = "/v1/admin/machines";
  std::string sep = "?";
  for (const char* f : {"pool", "state"}) {
    if (auto v = args->Get(f)) {
      path += sep + f + "=" + *v;
      sep = "&";
    }
  }
  int code = kExitOk;
  auto r = Send(socket, "GET", path, nullptr, &code);
  if (!r.ok()) return code;
  if (args->Has("json")) return PrintJson(*r), kExitOk;
  std::printf("%-20s %-12s %-12s %-18s %-21s %-10s %-18s %s\n", "HOSTNAME", "POOL", "STATE", "EK", "LAST ATTESTED",
              "TRUST", "REPORT", "ADDRESSES");
  if (r->contains("machines") && r->at("machines").is_array()) {
    for (const json& m : r->at("machines")) PrintMachineLine(m);
  }
  return kExitOk;
}

int RunShow(const std::string& socket, int argc, char** argv, int first) {
  auto args = Args::Parse(argc, argv, first, {{}, {"json"}});
  if (!args.ok()) return UsageError(kShowHelp, args.status().message());
  if (args->Has("help")) return std::fputs(kShowHelp, stdout), kExitOk;
  if (args->positional().size() != 1) return UsageError(kShowHelp, "give one HOSTNAME");
  int code = kExitOk;
  auto m = Send(socket, "GET", "/v1/admin/machines/" + args->positional()[0], nullptr, &code);
  if (!m.ok()) return code;
  if (args->Has("json")) return PrintJson(*m), kExitOk;
  std::printf("hostname:      %s\npool:          %s\nstate:         %s\nEK:            %s\n",
              Str(*m, "hostname").c_str(), Str(*m, "pool").c_str(), Str(*m, "state").c_str(),
              Str(*m, "ek_hash").c_str());
  std::printf("TPM:           %s %s %s\naddresses:     %s\nenrolled:      %s\nlast attested: %s\n",
              Str(*m, "tpm_manufacturer").c_str(), Str(*m, "tpm_model").c_str(), Str(*m, "tpm_version").c_str(),
              Addresses(*m).c_str(), FormatTime(*m, "created_at").c_str(),
              FormatTime(*m, "last_attested_at").c_str());
  // Trust (docs/trust.md): the verdict, since when, and why.
  const std::string trust = Str(*m, "trust", "");
  if (trust.empty()) {
    std::printf("trust:         none yet (never attested)\n");
  } else {
    const std::string why = Str(*m, "trust_reason", "");
    const std::string because = why.empty() ? "" : " (" + why + ")";
    std::printf("trust:         %s since %s%s\n", trust.c_str(), FormatTime(*m, "trust_changed_at").c_str(),
                because.c_str());
  }
  // The agent's last provisioning report: why a node is stuck, without a
  // console. Its message was made printable by the appliance.
  if (m->contains("last_report") && m->at("last_report").is_object()) {
    const json& r = m->at("last_report");
    const int exit_status = r.contains("exit_status") && r.at("exit_status").is_number_integer()
                                ? r.at("exit_status").get<int>()
                                : 0;
    std::printf("last report:   %s %s at step %s, exit status %d\n", FormatTime(r, "at").c_str(),
                Str(r, "outcome").c_str(), Str(r, "step").c_str(), exit_status);
    if (!Str(r, "reason", "").empty()) std::printf("  reason:      %s\n", Str(r, "reason").c_str());
    if (!Str(r, "message", "").empty()) std::printf("  message:     %s\n", Str(r, "message").c_str());
    std::string done;
    if (r.contains("done") && r.at("done").is_array()) {
      for (const json& d : r.at("done")) {
        if (d.is_string()) done += (done.empty() ? "" : ", ") + d.get<std::string>();
      }
    }
    std::printf("  done:        %s\n", done.empty() ? "-" : done.c_str());
  } else {
    std::printf("last report:   none\n");
  }
  return kExitOk;
}

int RunMachineAction(const std::string& verb, const std::string& socket, int argc, char** argv, int first) {
  if (verb == "approve") return RunApprove(socket, argc, argv, first);
  auto args = Args::Parse(argc, argv, first, {{"reason"}, {"json"}});
  if (!args.ok()) return UsageError(kActionHelp, args.status().message());
  if (args->Has("help")) return std::fputs(kActionHelp, stdout), kExitOk;
  if (args->positional().size() != 1) return UsageError(kActionHelp, "give one HOSTNAME");
  json body = {{"reason", args->Get("reason").value_or("")}};
  int code = kExitOk;
  auto m = Send(socket, "POST", "/v1/admin/machines/" + args->positional()[0] + "/" + verb, body, &code);
  if (!m.ok()) return code;
  if (args->Has("json")) return PrintJson(*m), kExitOk;
  std::printf("%s %s: state %s\n", verb.c_str(), Str(*m, "hostname").c_str(), Str(*m, "state").c_str());
  return kExitOk;
}

int RunAudit(const std::string& socket, int argc, char** argv, int first) {
  auto args = Args::Parse(argc, argv, first, {{"hostname", "limit"}, {"json"}});
  if (!args.ok()) return UsageError(kAuditHelp, args.status().message());
  if (args->Has("help")) return std::fputs(kAuditHelp, stdout), kExitOk;
  std::string path = "/v1/admin/audit?limit=" + args->Get("limit").value_or("50");
  if (auto h = args->Get("hostname")) path += "&hostname=" + *h;
  int code = kExitOk;
  auto r = Send(socket, "GET", path, nullptr, &code);
  if (!r.ok()) return code;
  if (args->Has("json")) return PrintJson(*r), kExitOk;
  std::printf("%-21s %-24s %-16s %-20s %-24s %s\n", "TIME", "ACTOR", "ACTION", "MACHINE", "STATE", "WHY");
  if (r->contains("entries") && r->at("entries").is_array()) {
    for (const json& e : r->at("entries")) {
      std::string states = Str(e, "from_state", "") + (e.contains("to_state") ? " -> " + Str(e, "to_state") : "");
      std::printf("%-21s %-24s %-16s %-20s %-24s %s\n", FormatTime(e, "at").c_str(), Str(e, "actor").c_str(),
                  Str(e, "action").c_str(), Str(e, "hostname").c_str(), states.empty() ? "-" : states.c_str(),
                  Str(e, "why", "").c_str());
    }
  }
  return kExitOk;
}

int RunStatus(const std::string& socket, int argc, char** argv, int first) {
  auto args = Args::Parse(argc, argv, first, {{}, {"json"}});
  if (!args.ok()) return UsageError(kStatusHelp, args.status().message());
  if (args->Has("help")) return std::fputs(kStatusHelp, stdout), kExitOk;
  int code = kExitOk;
  auto r = Send(socket, "GET", "/v1/admin/status", nullptr, &code);
  if (!r.ok()) return code;
  if (args->Has("json")) return PrintJson(*r), kExitOk;
  std::printf("machines by state:\n");
  if (r->contains("machines_by_state") && r->at("machines_by_state").is_object()) {
    for (const auto& [state, n] : r->at("machines_by_state").items()) {
      std::printf("  %-12s %s\n", state.c_str(), n.dump().c_str());
    }
  }
  // Trust (docs/trust.md).
  if (r->contains("machines_untrusted") && r->at("machines_untrusted").is_number_integer()) {
    std::printf("untrusted machines: %s\n", r->at("machines_untrusted").dump().c_str());
  }
  std::printf("recent attestation failures:\n");
  if (r->contains("recent_failures") && r->at("recent_failures").is_array()) {
    for (const json& f : r->at("recent_failures")) {
      std::printf("  %-21s %-20s %s\n", FormatTime(f, "at").c_str(), Str(f, "hostname").c_str(),
                  Str(f, "reason").c_str());
    }
  }
  // Observability (docs/observability.md).
  if (r->contains("unknown_eks") && r->at("unknown_eks").is_array()) {
    const json& knocking = r->at("unknown_eks");
    std::printf("unknown EKs knocking (last hour): %zu\n", knocking.size());
    for (const json& k : knocking) {
      const std::string hash = Str(k, "ek_hash");
      std::printf("  %-16s  %-21s %-21s %5s  %-15s %s\n", hash.substr(0, 16).c_str(),
                  FormatTime(k, "first_seen").c_str(), FormatTime(k, "last_seen").c_str(),
                  k.contains("count") ? k.at("count").dump().c_str() : "", Str(k, "address").c_str(),
                  Str(k, "reason").c_str());
      const std::string issuer = Str(k, "ek_certificate_issuer");
      if (!issuer.empty()) std::printf("    EK certificate issuer: %s\n", issuer.c_str());
    }
    if (!knocking.empty()) {
      std::printf("  enroll them with `rackgatectl enroll` or `rackgatectl import` (the full hash is in --json)\n");
    }
  }
  return kExitOk;
}

namespace {

// The pool's stored template, pretty-printed, or "" when it has none.
std::string StoredTemplate(const json& pool, const std::string& which) {
  if (!pool.contains("templates") || !pool.at("templates").contains(which)) return "";
  return pool.at("templates").at(which).dump(2) + "\n";
}

// `diff -u` of two texts; its exit status (0 same, 1 different).
int ShowDiff(const std::string& a, const std::string& a_label, const std::string& b, const std::string& b_label) {
  char dir[] = "/tmp/rackgatectl-diff-XXXXXX";
  if (::mkdtemp(dir) == nullptr) return kExitUnusable;
  const std::string pa = std::string(dir) + "/a", pb = std::string(dir) + "/b";
  int rc = kExitUnusable;
  if (WriteFileAtomic(pa, std::span(reinterpret_cast<const uint8_t*>(a.data()), a.size())).ok() &&
      WriteFileAtomic(pb, std::span(reinterpret_cast<const uint8_t*>(b.data()), b.size())).ok()) {
    std::fflush(stdout);
    const pid_t pid = ::fork();
    if (pid == 0) {
      ::execlp("diff", "diff", "-u", "--label", a_label.c_str(), "--label", b_label.c_str(), pa.c_str(), pb.c_str(),
               static_cast<char*>(nullptr));
      ::_exit(127);
    }
    int status = 0;
    if (pid > 0 && ::waitpid(pid, &status, 0) == pid && WIFEXITED(status)) {
      rc = WEXITSTATUS(status) <= 1 ? WEXITSTATUS(status) : kExitUnusable;
    }
  }
  ::unlink(pa.c_str());
  ::unlink(pb.c_str());
  ::rmdir(dir);
  return rc;
}

}  // namespace

int RunPool(const std::string& socket, int argc, char** argv, int first) {
  if (first >= argc) return UsageError(kPoolHelp, "give put, show, diff or remove-template");
  const std::string sub = argv[first];
  auto args = Args::Parse(argc, argv, first + 1,
                          {{"settings", "policy", "public-template", "attested-template", "token-required", "template"},
                           {"json"}});
  if (!args.ok()) return UsageError(kPoolHelp, args.status().message());
  if (args->Has("help") || sub == "--help") return std::fputs(kPoolHelp, stdout), kExitOk;
  int code = kExitOk;
  // Template files by kind, as the operator named them.
  std::vector<std::pair<std::string, std::string>> templates;
  for (const char* which : {"public", "attested"}) {
    if (auto f = args->Get(std::string(which) + "-template")) templates.emplace_back(which, *f);
  }
  if (sub == "diff") {
    if (args->positional().size() != 1 || templates.size() != 1) {
      return UsageError(kPoolHelp, "give one pool NAME and one of --public-template or --attested-template");
    }
    auto file = ReadJsonFile(templates[0].second, 4 << 20);
    if (!file.ok()) return UsageError(kPoolHelp, file.status().message());
    auto r = Send(socket, "GET", "/v1/admin/pools/" + args->positional()[0], nullptr, &code);
    if (!r.ok()) return code;
    return ShowDiff(StoredTemplate(*r, templates[0].first),
                    "stored " + templates[0].first + " template of " + args->positional()[0], file->dump(2) + "\n",
                    templates[0].second);
  }
  if (sub == "remove-template") {
    if (args->positional().size() != 2) return UsageError(kPoolHelp, "give NAME and public or attested");
    auto r = Send(socket, "DELETE", "/v1/admin/pools/" + args->positional()[0] + "/templates/" + args->positional()[1],
                  nullptr, &code);
    if (!r.ok()) return code;
    std::printf("pool %s: %s template removed\n", args->positional()[0].c_str(), args->positional()[1].c_str());
    return kExitOk;
  }
  if (sub == "put") {
    if (args->positional().size() != 1) return UsageError(kPoolHelp, "give one pool NAME");
    const std::string name = args->positional()[0];
    // Read everything first: a bad file changes nothing on the appliance.
    std::vector<std::pair<std::string, json>> template_docs;
    for (const auto& [which, file] : templates) {
      auto doc = ReadJsonFile(file, 4 << 20);
      if (!doc.ok()) return UsageError(kPoolHelp, doc.status().message());
      template_docs.emplace_back(which, std::move(doc).value());
    }
    json body = json::object();
    if (auto t = args->Get("token-required")) {
      if (*t != "yes" && *t != "no") return UsageError(kPoolHelp, "--token-required is yes or no");
      body["token_required"] = *t == "yes";
    }
    if (auto p = args->Get("settings")) {
      auto s = ReadJsonFile(*p, 1 << 20);
      if (!s.ok()) return UsageError(kPoolHelp, s.status().message());
      body["settings"] = *s;
    }
    if (auto p = args->Get("policy")) {
      auto s = ReadJsonFile(*p, 1 << 20);
      if (!s.ok()) return UsageError(kPoolHelp, s.status().message());
      body["boot_policy"] = *s;
    }
    auto r = Send(socket, "PUT", "/v1/admin/pools/" + name, body, &code);
    if (!r.ok()) return code;
    const std::string token = Str(*r, "provisioning_token", "");
    for (const auto& [which, doc] : template_docs) {
      r = Send(socket, "PUT", "/v1/admin/pools/" + name + "/templates/" + which, doc, &code);
      if (!r.ok()) return code;
    }
    if (args->Has("json")) {
      if (!token.empty()) (*r)["provisioning_token"] = token;
      return PrintJson(*r), kExitOk;
    }
    std::printf("pool %s stored; provisioning token %s\n", Str(*r, "name").c_str(),
                r->value("token_required", false) ? "required" : "off");
    for (const auto& [which, doc] : template_docs) std::printf("  %s template stored\n", which.c_str());
    if (!token.empty()) {
      std::printf("provisioning token (shown once; `rackgatectl pointer --pool %s --token-file FILE` uses it):\n%s\n",
                  name.c_str(), token.c_str());
    }
    return kExitOk;
  }
  if (sub == "show") {
    std::string path = "/v1/admin/pools";
    if (!args->positional().empty()) path += "/" + args->positional()[0];
    auto r = Send(socket, "GET", path, nullptr, &code);
    if (!r.ok()) return code;
    if (auto which = args->Get("template")) {
      if (args->positional().empty()) return UsageError(kPoolHelp, "--template needs a pool NAME");
      const std::string text = StoredTemplate(*r, *which);
      if (text.empty()) {
        std::fprintf(stderr, "rackgatectl: pool %s has no %s template\n", args->positional()[0].c_str(),
                     which->c_str());
        return kExitRefused;
      }
      std::fputs(text.c_str(), stdout);
      return kExitOk;
    }
    if (args->Has("json") || args->positional().empty()) return PrintJson(*r), kExitOk;
    std::printf("pool:             %s\n", Str(*r, "name").c_str());
    std::printf("token required:   %s\n", r->value("token_required", false) ? "yes" : "no");
    if (r->contains("provisioning_tokens")) {
      for (const json& t : r->at("provisioning_tokens")) {
        std::printf("  token:          %s since %s%s\n", t.value("current", false) ? "current" : "previous",
                    FormatTime(t, "created_at").c_str(),
                    t.contains("valid_until") ? (", valid until " + FormatTime(t, "valid_until")).c_str() : "");
      }
    }
    std::printf("public template:  %s\n", StoredTemplate(*r, "public").empty() ? "none" : "yes");
    std::printf("attested template:%s\n", StoredTemplate(*r, "attested").empty() ? " none" : " yes");
    std::printf("boot policy:      %s\n", r->contains("boot_policy") ? "yes" : "none");
    std::printf("settings:         %s\n", r->contains("settings") ? r->at("settings").dump().c_str() : "{}");
    return kExitOk;
  }
  return UsageError(kPoolHelp, "unknown pool command '" + sub + "'");
}


int RunCerts(const std::string& socket, int argc, char** argv, int first) {
  static constexpr char kHelp[] =
      "Usage: rackgatectl certs [--hostname NAME] [--limit N] [--json]\n"
      "\n"
      "Every kubelet certificate rackgate signed, newest first: serial, machine,\n"
      "kind (client or serving), whether its key is TPM-resident, and expiry.\n";
  auto args = Args::Parse(argc, argv, first, {{"hostname", "limit"}, {"json"}});
  if (!args.ok()) return UsageError(kHelp, args.status().message());
  if (args->Has("help")) return std::fputs(kHelp, stdout), kExitOk;
  std::string path = "/v1/admin/certificates?limit=" + args->Get("limit").value_or("1000");
  if (auto h = args->Get("hostname")) path += "&hostname=" + *h;
  int code = kExitOk;
  auto r = Send(socket, "GET", path, nullptr, &code);
  if (!r.ok()) return code;
  if (args->Has("json")) return PrintJson(*r), kExitOk;
  std::printf("%-34s %-20s %-8s %-4s %-21s %s\n", "SERIAL", "HOSTNAME", "KIND", "TPM", "ISSUED", "NOT AFTER");
  for (const json& c : r->value("certificates", json::array())) {
    std::printf("%-34s %-20s %-8s %-4s %-21s %s\n", Str(c, "serial").c_str(), Str(c, "hostname").c_str(),
                Str(c, "kind").c_str(), c.value("tpm_resident", false) ? "yes" : "no",
                FormatTime(c, "issued_at").c_str(), FormatTime(c, "not_after").c_str());
  }
  return kExitOk;
}

int RunToken(const std::string& socket, int argc, char** argv, int first) {
  if (first >= argc) return UsageError(kTokenHelp, "give rotate");
  const std::string sub = argv[first];
  auto args = Args::Parse(argc, argv, first + 1, {{"pool", "grace", "out"}, {"json"}});
  if (!args.ok()) return UsageError(kTokenHelp, args.status().message());
  if (args->Has("help") || sub == "--help") return std::fputs(kTokenHelp, stdout), kExitOk;
  if (sub != "rotate") return UsageError(kTokenHelp, "unknown token command '" + sub + "'");
  if (Status s = args->Require({"pool"}); !s.ok()) return UsageError(kTokenHelp, s.message());
  json body = json::object();
  if (auto g = args->Get("grace")) {
    auto seconds = ParseDuration(*g);
    if (!seconds) return UsageError(kTokenHelp, "--grace takes a duration such as 30m, 2h or 1d");
    body["grace_seconds"] = *seconds;
  }
  int code = kExitOk;
  auto r = Send(socket, "POST", "/v1/admin/pools/" + *args->Get("pool") + "/token/rotate", body, &code);
  if (!r.ok()) return code;
  const std::string token = Str(*r, "provisioning_token", "");
  if (auto out = args->Get("out")) {
    const std::string line = token + "\n";
    if (Status s = WriteFileAtomic(*out, std::span(reinterpret_cast<const uint8_t*>(line.data()), line.size()));
        !s.ok()) {
      std::fprintf(stderr, "rackgatectl: the new token is active but could not be written: %s\n",
                   s.message().c_str());
      return kExitUnusable;
    }
    r->erase("provisioning_token");
  }
  if (args->Has("json")) return PrintJson(*r), kExitOk;
  if (auto out = args->Get("out")) {
    std::printf("pool %s: new provisioning token written to %s\n", args->Get("pool")->c_str(), out->c_str());
  } else {
    std::printf("%s\n", token.c_str());
  }
  if (r->contains("previous_valid_until")) {
    std::fprintf(stderr, "the previous token stays valid until %s\n", FormatTime(*r, "previous_valid_until").c_str());
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
    "The newest webhook events (default 50), newest first, with each webhook's\n"
    "delivery: delivered, or the attempts so far, the next one and the last\n"
    "error. --pending lists only events some webhook has not received yet.\n";

// One delivery's state in a few words.
std::string DeliveryState(const json& d) {
  std::string out = Str(d, "webhook") + ": ";
  const std::string attempts = d.contains("attempts") ? d.at("attempts").dump() : "?";
  if (d.contains("delivered_at")) return out + "delivered " + FormatTime(d, "delivered_at") + " (attempts " + attempts + ")";
  out += "pending, attempts " + attempts + ", next " + FormatTime(d, "next_attempt_at");
  const std::string err = Str(d, "last_error", "");
  if (!err.empty()) out += ", last error: " + err;
  return out;
}

}  // namespace

int RunEvents(const std::string& socket, int argc, char** argv, int first) {
  auto args = Args::Parse(argc, argv, first, {{"limit"}, {"pending", "json"}});
  if (!args.ok()) return UsageError(kEventsHelp, args.status().message());
  if (args->Has("help")) return std::fputs(kEventsHelp, stdout), kExitOk;
  const std::string limit = args->Get("limit").value_or("50");
  if (limit.empty() || limit.find_first_not_of("0123456789") != std::string::npos) {
    return UsageError(kEventsHelp, "--limit takes a number");
  }
  std::string path = "/v1/admin/events?limit=" + limit;
  if (args->Has("pending")) path += "&pending=1";
  int code = kExitOk;
  auto r = Send(socket, "GET", path, nullptr, &code);
  if (!r.ok()) return code;
  if (args->Has("json")) return PrintJson(*r), kExitOk;
  std::printf("%-8s %-21s %-20s %-20s %s\n", "ID", "TIME", "TYPE", "MACHINE", "DELIVERIES");
  if (r->contains("events") && r->at("events").is_array()) {
    for (const json& e : r->at("events")) {
      const json machine = e.contains("machine") ? e.at("machine") : json::object();
      const json deliveries = e.contains("deliveries") ? e.at("deliveries") : json::array();
      std::printf("%-8s %-21s %-20s %-20s %s\n", e.contains("id") ? e.at("id").dump().c_str() : "?",
                  FormatTime(e, "at").c_str(), Str(e, "type").c_str(), Str(machine, "hostname").c_str(),
                  deliveries.empty() ? "(no webhook)" : DeliveryState(deliveries.at(0)).c_str());
      for (size_t i = 1; i < deliveries.size(); ++i) {
        std::printf("%-8s %-21s %-20s %-20s %s\n", "", "", "", "", DeliveryState(deliveries.at(i)).c_str());
      }
    }
  }
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
      "A hostname another machine has is refused (hostname_taken, naming it).\n";
  auto args = Args::Parse(argc, argv, first, {{"hostname", "pool", "address", "var", "reason"}, {"json"}});
  if (!args.ok()) return UsageError(kHelp, args.status().message());
  if (args->Has("help")) return std::fputs(kHelp, stdout), kExitOk;
  if (args->positional().size() != 1) return UsageError(kHelp, "give one HOSTNAME");
  json body = {{"reason", args->Get("reason").value_or("")}};
  if (auto h = args->Get("hostname")) body["hostname"] = *h;
  if (auto p = args->Get("pool")) body["pool"] = *p;
  const auto addresses = args->GetAll("address");
  if (!addresses.empty()) body["addresses"] = json::array();
  for (const auto& a : addresses) {
    auto addr = ParseAddress(a);
    if (!addr.ok()) return UsageError(kHelp, addr.status().message());
    body["addresses"].push_back(*addr);
  }
  for (const auto& v : args->GetAll("var")) {
    const size_t eq = v.find('=');
    if (eq == std::string::npos || eq == 0) return UsageError(kHelp, "--var takes NAME=VALUE");
    body["vars"][v.substr(0, eq)] = v.substr(eq + 1);
  }
  int code = kExitOk;
  const std::string& host = args->positional()[0];
  auto m = Send(socket, "POST", "/v1/admin/machines/" + host + "/approve", body, &code);
  if (!m.ok()) return code;
  if (args->Has("json")) return PrintJson(*m), kExitOk;
  std::printf("approve %s: %s in pool %s, state %s\n", host.c_str(), Str(*m, "hostname").c_str(),
              Str(*m, "pool").c_str(), Str(*m, "state").c_str());
  return kExitOk;
}

int RunCsr(const std::string& socket, int argc, char** argv, int first) {
  static constexpr char kHelp[] =
      "Usage: rackgatectl csr list [--all] [--json]\n"
      "       rackgatectl csr approve ID [--reason TEXT] [--json]\n"
      "       rackgatectl csr deny ID --reason TEXT [--json]\n"
      "\n"
      "Kubelet CSRs that passed every rule and wait for an operator, because\n"
      "their pool's settings say \"csr_approval\": {\"client\": \"manual\"} (or\n"
      "serving, renewal). list shows the waiting ones (--all: every request and\n"
      "its decision). approve lets the machine's next submission of the same key\n"
      "be signed (every rule is checked again then); deny is final for that CSR,\n"
      "and the machine is told the reason. Both are audited.\n";
  if (first >= argc) return UsageError(kHelp, "give list, approve or deny");
  const std::string sub = argv[first];
  if (sub == "--help") return std::fputs(kHelp, stdout), kExitOk;
  auto args = Args::Parse(argc, argv, first + 1, {{"reason"}, {"all", "json"}});
  if (!args.ok()) return UsageError(kHelp, args.status().message());
  if (args->Has("help")) return std::fputs(kHelp, stdout), kExitOk;
  int code = kExitOk;
  if (sub == "list") {
    if (!args->positional().empty()) return UsageError(kHelp, "list takes no arguments");
    auto r = Send(socket, "GET", std::string("/v1/admin/csrs") + (args->Has("all") ? "?all=1" : ""), nullptr, &code);
    if (!r.ok()) return code;
    if (args->Has("json")) return PrintJson(*r), kExitOk;
    std::printf("%-6s %-24s %-8s %-17s %-8s %-4s %s\n", "ID", "HOSTNAME", "KIND", "KEY SHA-256", "AGE", "TPM",
                "STATE");
    for (const json& c : r->value("csrs", json::array())) {
      const int64_t age = c.value("age_seconds", int64_t{0});
      const std::string age_text = age < 120 ? std::to_string(age) + "s"
                                   : age < 7200 ? std::to_string(age / 60) + "m"
                                                : std::to_string(age / 3600) + "h";
      std::string state = Str(c, "state");
      if (c.contains("deny_reason")) state += ": " + Str(c, "deny_reason");
      std::printf("%-6lld %-24s %-8s %-17s %-8s %-4s %s\n", static_cast<long long>(c.value("id", int64_t{0})),
                  Str(c, "hostname").c_str(), Str(c, "kind").c_str(),
                  Str(c, "public_key_sha256").substr(0, 16).c_str(), age_text.c_str(),
                  c.value("tpm_resident", false) ? "yes" : "no", state.c_str());
    }
    return kExitOk;
  }
  if (sub != "approve" && sub != "deny") return UsageError(kHelp, "unknown csr command '" + sub + "'");
  if (args->positional().size() != 1) return UsageError(kHelp, "give one ID");
  const std::string& id = args->positional()[0];
  if (id.empty() || id.find_first_not_of("0123456789") != std::string::npos) {
    return UsageError(kHelp, "an ID is a number (rackgatectl csr list)");
  }
  if (sub == "deny" && args->Get("reason").value_or("").empty()) {
    return UsageError(kHelp, "deny needs --reason TEXT (the machine is told it)");
  }
  json body = {{"reason", args->Get("reason").value_or("")}};
  auto r = Send(socket, "POST", "/v1/admin/csrs/" + id + "/" + sub, body, &code);
  if (!r.ok()) return code;
  if (args->Has("json")) return PrintJson(*r), kExitOk;
  std::printf("csr %s %s (%s, %s): %s\n", id.c_str(), sub == "approve" ? "approved" : "denied",
              Str(*r, "hostname").c_str(), Str(*r, "kind").c_str(), Str(*r, "state").c_str());
  return kExitOk;
}

}  // namespace rackgate::ctl
