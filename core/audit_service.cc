// The admin API's audit list.
#include "core/audit_service.h"

#include <algorithm>
#include <utility>

namespace rackgate::core {

AuditService::AuditService(storage::AuditStore* store) : store_(store) {}

Result<std::vector<wire::AuditEntryView>> AuditService::List(const std::optional<std::string>& hostname,
                                                             int64_t limit, int64_t since_id) {
  storage::AuditFilter filter;
  filter.hostname = hostname;
  filter.limit = static_cast<int>(std::clamp<int64_t>(limit, 1, kMaxAuditList));
  filter.since_id = since_id;
  auto entries = store_->ListAudit(filter);
  if (!entries.ok()) return entries.status();
  std::vector<wire::AuditEntryView> out;
  out.reserve(entries->size());
  for (const storage::AuditEntry& e : *entries) {
    out.push_back({e.id, e.at, e.actor, e.action, e.hostname, e.why, e.from_state, e.to_state, e.detail_json});
  }
  return out;
}

}  // namespace rackgate::core
