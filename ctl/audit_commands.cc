// rackgatectl audit verify through the admin API.
#include "ctl/audit_commands.h"

#include <cstdio>

#include "ctl/admin_client.h"
#include "ctl/admin_util.h"
#include "ctl/offline.h"
#include "wire/admin_audit.h"
#include "wire/admin_query.h"

namespace rackgate::ctl {

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
  (void)Send(socket, "GET", route, nullptr, &code);
  return code == kExitOk ? kExitUnusable : code;
}

}  // namespace rackgate::ctl
