// rackgatectl's audit commands over the admin API (wire/admin_audit.h,
// core/audit_service.h): audit (the latest entries) and audit verify (the
// hash chain; its arguments and verdict are in ctl/audit_verify.cc, shared
// with rackgatectl-state's --database).
#include "ctl/commands.h"

#include <cstdio>
#include <string>

#include "base/utc_time.h"
#include "ctl/admin_client.h"
#include "ctl/admin_util.h"
#include "ctl/args.h"
#include "ctl/command_line.h"
#include "wire/admin_audit.h"
#include "wire/admin_query.h"

namespace rackgate::ctl {

namespace {

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

}  // namespace

int RunAudit(const std::string& socket, int argc, char** argv, int first) {
  auto args = Args::Parse(argc, argv, first, {{"hostname", "limit"}, {"json"}, 0});
  if (!args.ok()) return UsageError(kAuditHelp, args.status().message());
  if (args->Has("help")) return PrintHelp(kAuditHelp);
  auto limit = args->GetInt("limit", 50, 1, 10000);
  if (!limit.ok()) return UsageError(kAuditHelp, limit.status().message());
  const wire::AuditQuery query{args->Get("hostname"), *limit, 0};
  int code = kExitOk;
  auto r = Send(socket, "GET", "/v1/admin/audit" + wire::EncodeAuditQuery(query), &code);
  if (!r.ok()) return code;
  if (args->Has("json")) return PrintAnswer(*r), kExitOk;
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

int RunAuditVerify(const std::string& socket, const AuditVerifyRequest& request) {
  // Not Send: a broken chain is a 409 whose body carries the report, which
  // --json prints.
  wire::AuditVerifyQuery query;
  if (request.anchor) query.anchor = std::to_string(request.anchor->id) + ":" + request.anchor->hash;
  const std::string route = "/v1/admin/audit/verify" + wire::EncodeAuditVerifyQuery(query);
  auto reply = AdminClient(socket).Call("GET", route);
  if (!reply.ok()) {
    std::fprintf(stderr, "rackgatectl: %s\n", reply.status().message().c_str());
    return kExitUnusable;
  }
  int code = kExitOk;
  if (reply->status == 200) {
    auto report = wire::DecodeAuditChain(reply->body);
    if (!report.ok()) return ReportMalformedAnswer(report.status(), &code), code;
    return ReportAuditChain(*report, "", request.json);
  }
  if (reply->status == 409) {
    if (auto refusal = wire::DecodeAuditChainRefusal(reply->body); refusal.ok()) {
      return ReportAuditChain(refusal->report, refusal->message, request.json);
    }
  }
  // Any other refusal, printed as Send prints it.
  (void)Send(socket, "GET", route, &code);
  return code == kExitOk ? kExitUnusable : code;
}

}  // namespace rackgate::ctl
