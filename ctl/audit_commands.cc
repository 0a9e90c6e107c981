// rackgatectl audit verify, through the admin API or on the database file.
#include "ctl/audit_commands.h"

#include <cstdio>
#include <optional>
#include <nlohmann/json.hpp>

#include "ctl/admin_client.h"
#include "ctl/admin_util.h"
#include "ctl/args.h"
#include "ctl/offline.h"
#include "storage/store.h"

namespace rackgate::ctl {

namespace {

using nlohmann::json;

constexpr char kVerifyHelp[] =
    "Usage: rackgatectl audit verify [--database PATH] [--anchor ID:HASH] [--json]\n"
    "\n"
    "Walks the audit log's hash chain: every row must hash to its stored hash\n"
    "and name the row before it. Prints the number of rows and the head hash\n"
    "(keep it outside the appliance: only that shows newest rows cut off), or\n"
    "the first row that breaks the chain and what is wrong with it.\n"
    "\n"
    "Options:\n"
    "  --database PATH  read this SQLite file read-only instead of asking\n"
    "                   rackgated (for when it is down); never migrates it\n"
    "  --anchor ID:HASH row ID must exist and have this hash (a head kept\n"
    "                   outside: it shows rows cut off or re-hashed)\n"
    "  --json           print JSON instead of a table\n"
    "\n"
    "Exit status: 0 chain intact; 1 refused: audit_chain_broken (the first bad\n"
    "row on stderr); 2 unusable input, unreadable database or rackgated\n"
    "unreachable.\n";

json ReportJson(const storage::AuditChainReport& r) {
  json j = {{"intact", r.intact}, {"rows", r.rows}, {"head_id", r.head_id}, {"head_hash", r.head_hash}};
  if (!r.intact) {
    j["bad_row_id"] = r.bad_row_id;
    j["problem"] = r.problem;
    j["message"] = r.message;
  }
  return j;
}

// Prints the verdict; its exit code.
int Report(const json& report, const std::string& message, bool as_json) {
  const bool intact = report.contains("intact") && report.at("intact").is_boolean() && report.at("intact").get<bool>();
  if (as_json) PrintJson(report);
  if (intact) {
    if (!as_json) {
      std::printf("chain intact: %s rows, head %s\n", report.value("rows", json(0)).dump().c_str(),
                  Str(report, "head_hash").c_str());
    }
    return kExitOk;
  }
  std::fprintf(stderr, "rackgatectl: refused: audit_chain_broken: %s\n", message.c_str());
  return kExitRefused;
}

}  // namespace

int RunAuditVerify(const std::string& socket, int argc, char** argv, int first) {
  auto args = Args::Parse(argc, argv, first, {{"database", "anchor"}, {"json"}, 0});
  if (!args.ok()) return UsageError(kVerifyHelp, args.status().message());
  if (args->Has("help")) return PrintHelp(kVerifyHelp);
  if (!args->positional().empty()) return UsageError(kVerifyHelp, "unexpected argument '" + args->positional()[0] + "'");
  const bool as_json = args->Has("json");
  std::optional<storage::AuditAnchor> anchor;
  if (auto text = args->Get("anchor")) {
    const size_t colon = text->find(':');
    storage::AuditAnchor a;
    const bool ok = colon != std::string::npos && colon > 0 && colon < 20 &&
                    text->find_first_not_of("0123456789") == colon && text->size() - colon - 1 == 64;
    if (!ok) return UsageError(kVerifyHelp, "--anchor must be ID:HASH, as rackgated logs it (row id, 64 hex digits)");
    a.id = std::stoll(text->substr(0, colon));
    a.hash = text->substr(colon + 1);
    anchor = std::move(a);
  }
  if (auto path = args->Get("database")) {
    auto r = storage::VerifyAuditChainFile(*path, anchor);
    if (!r.ok()) {
      std::fprintf(stderr, "rackgatectl: %s: %s\n", r.status().reason().c_str(), r.status().message().c_str());
      return kExitUnusable;
    }
    return Report(ReportJson(*r), r->message, as_json);
  }
  // Not Send: a broken chain is a 409 whose body carries the report, which
  // --json prints.
  const std::string route =
      "/v1/admin/audit/verify" + (anchor ? "?anchor=" + std::to_string(anchor->id) + ":" + anchor->hash : "");
  auto reply = AdminClient(socket).Call("GET", route);
  if (!reply.ok()) {
    std::fprintf(stderr, "rackgatectl: %s\n", reply.status().message().c_str());
    return kExitUnusable;
  }
  json doc = json::parse(reply->body, nullptr, false);
  if (reply->status == 200 && doc.is_object()) return Report(doc, "", as_json);
  if (reply->status == 409 && doc.is_object() && doc.contains("report") && doc.contains("error")) {
    json report = doc.at("report");
    const std::string message = Str(doc.at("error"), "message");
    report["message"] = message;
    return Report(report, message, as_json);
  }
  // Any other refusal, printed as Send prints it.
  int code = kExitOk;
  (void)Send(socket, "GET", route, nullptr, &code);
  return code == kExitOk ? kExitUnusable : code;
}

}  // namespace rackgate::ctl
