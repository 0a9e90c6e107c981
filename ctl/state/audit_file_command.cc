// rackgatectl audit verify --database, on the SQLite file read-only.
#include "ctl/state/audit_file_command.h"

#include <cstdio>
#include <optional>

#include "ctl/offline.h"
#include "storage/store.h"

namespace rackgate::ctl {

namespace {

nlohmann::json ReportJson(const storage::AuditChainReport& r) {
  nlohmann::json j = {{"intact", r.intact}, {"rows", r.rows}, {"head_id", r.head_id}, {"head_hash", r.head_hash}};
  if (!r.intact) {
    j["bad_row_id"] = r.bad_row_id;
    j["problem"] = r.problem;
    j["message"] = r.message;
  }
  return j;
}

}  // namespace

int RunAuditVerifyFile(const AuditVerifyRequest& request) {
  std::optional<storage::AuditAnchor> anchor;
  if (request.anchor) {
    anchor.emplace();
    anchor->id = request.anchor->id;
    anchor->hash = request.anchor->hash;
  }
  auto r = storage::VerifyAuditChainFile(*request.database, anchor);
  if (!r.ok()) {
    std::fprintf(stderr, "rackgatectl: %s: %s\n", r.status().reason().c_str(), r.status().message().c_str());
    return kExitUnusable;
  }
  return ReportAuditChain(ReportJson(*r), r->message, request.json);
}

}  // namespace rackgate::ctl
