// The admin API's audit list.
#include "core/audit_service.h"

#include <algorithm>
#include <charconv>
#include <memory>
#include <utility>


#include "base/log.h"
#include "storage/audit_detail.h"

namespace rackgate::core {

namespace {

std::shared_ptr<spdlog::logger> Log() {
  static const auto log = Logger("admin");
  return log;
}

}  // namespace

wire::AuditChainView AuditChainViewOf(const storage::AuditChainReport& r) {
  wire::AuditChainView v{r.intact, r.rows, r.head_id, r.head_hash, 0, ""};
  if (!r.intact) {
    v.bad_row_id = r.bad_row_id;
    v.problem = r.problem;
  }
  return v;
}

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

Result<AuditVerdict> AuditService::Verify(const std::optional<std::string>& anchor_text,
                                          const storage::Actor& actor) {
  // An anchor is a row's hash kept outside the database (docs/audit.md):
  // ID:HASH. The hash is the store's to compare.
  std::optional<storage::AuditAnchor> anchor;
  if (anchor_text) {
    const std::string& text = *anchor_text;
    const size_t colon = text.find(':');
    storage::AuditAnchor a;
    const char* end = text.data() + (colon == std::string::npos ? text.size() : colon);
    auto [p, ec] = std::from_chars(text.data(), end, a.id);
    if (colon == std::string::npos || ec != std::errc() || p != end || a.id < 1) {
      return Status::InvalidArgument("field_invalid", "anchor must be ID:HASH (a row id and its 64 hex digit hash)");
    }
    a.hash = text.substr(colon + 1);
    anchor = std::move(a);
  }
  auto report = store_->VerifyAuditChain(anchor);
  if (!report.ok()) return report.status();
  AuditVerdict v{AuditChainViewOf(*report), ""};
  if (!report->intact) {
    v.message = report->message;
    Log()->error("audit verify by {}: the audit chain is broken: {}", actor.name, report->message);
  }
  return v;
}

bool RefusalIsAudited(std::string_view method) { return method != "GET" && method != "HEAD"; }

Status AuditService::RecordAdminRefusal(const AdminRefusalRecord& r, int64_t now) {
  storage::AuditDetail detail;
  detail.Text("method", r.method).Text("route", r.route).Text("reason", r.reason).Text("user", r.user);
  if (r.uid) detail.Int("uid", *r.uid);
  // A named hostname is kept bounded; the store links the row to the machine
  // when it knows it.
  const std::string named = r.hostname.size() <= 253 ? r.hostname : "";
  return store_->AuditAdminRefusal(named, detail.Json(), {r.user, "refused: " + r.reason}, now);
}

}  // namespace rackgate::core
