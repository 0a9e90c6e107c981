// rackgatectl audit verify --database, on the SQLite file read-only.
#include "ctl/state/audit_file_command.h"

#include <cstdio>
#include <optional>

#include "core/audit_service.h"
#include "ctl/offline.h"
#include "storage/store.h"

namespace rackgate::ctl {

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
  return ReportAuditChain(core::AuditChainViewOf(*r), r->message, request.json);
}

}  // namespace rackgate::ctl
