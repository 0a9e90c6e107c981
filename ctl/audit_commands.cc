// rackgatectl audit verify through the admin API.
#include "ctl/audit_commands.h"

#include <cstdio>
#include <nlohmann/json.hpp>

#include "ctl/admin_client.h"
#include "ctl/admin_util.h"
#include "ctl/offline.h"

namespace rackgate::ctl {

using nlohmann::json;

int RunAuditVerify(const std::string& socket, const AuditVerifyRequest& request) {
  // Not Send: a broken chain is a 409 whose body carries the report, which
  // --json prints.
  const auto& anchor = request.anchor;
  const std::string route =
      "/v1/admin/audit/verify" + (anchor ? "?anchor=" + std::to_string(anchor->id) + ":" + anchor->hash : "");
  auto reply = AdminClient(socket).Call("GET", route);
  if (!reply.ok()) {
    std::fprintf(stderr, "rackgatectl: %s\n", reply.status().message().c_str());
    return kExitUnusable;
  }
  json doc = json::parse(reply->body, nullptr, false);
  if (reply->status == 200 && doc.is_object()) return ReportAuditChain(doc, "", request.json);
  if (reply->status == 409 && doc.is_object() && doc.contains("report") && doc.contains("error")) {
    json report = doc.at("report");
    const std::string message = Str(doc.at("error"), "message");
    report["message"] = message;
    return ReportAuditChain(report, message, request.json);
  }
  // Any other refusal, printed as Send prints it.
  int code = kExitOk;
  (void)Send(socket, "GET", route, nullptr, &code);
  return code == kExitOk ? kExitUnusable : code;
}

}  // namespace rackgate::ctl
