// The audit log as the admin API lists it (docs/audit.md, `rackgatectl
// audit`): the newest rows, or the rows after one (following the log), of
// every machine or of one; and its hash chain verified, optionally against
// an anchor kept outside. The admin API calls these; the handler only
// decodes and encodes.
//
// Thread safety: as the store's; no state of its own.
#ifndef RACKGATE_CORE_AUDIT_SERVICE_H_
#define RACKGATE_CORE_AUDIT_SERVICE_H_

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "storage/roles.h"
#include "wire/admin_audit.h"

namespace rackgate::core {

// The most rows one list answers.
inline constexpr int64_t kMaxAuditList = 10000;

// The chain's verdict: the report, and for a broken chain the operator's
// message (which row, what is wrong).
struct AuditVerdict {
  wire::AuditChainView report;
  std::string message;
};

// A refused admin request, as the audit keeps it (docs/audit.md,
// admin_refused): the server's own words (method, route pattern, reason
// code), who asked, and the hostname the request named.
struct AdminRefusalRecord {
  std::string method;
  std::string route;
  std::string reason;
  std::string user;
  std::optional<uint32_t> uid;
  std::string hostname;  // "" when none; one over 253 bytes is not kept
};

// Whether a refused admin request with `method` gets an admin_refused row
// (docs/audit.md, "Refused requests"): only a request that asked to change
// something (POST, PUT, PATCH, DELETE, or a method the server does not
// know) is kept in the permanent chain. A refused read (GET, HEAD) changed
// nothing and asked for nothing to change: a typo in `rackgatectl show`
// must not become a row nobody may ever delete. Refused reads are still
// logged and counted (rackgate_admin_refusals_total).
bool RefusalIsAudited(std::string_view method);

// A walk of the chain as the admin API (and rackgatectl-state's offline
// `audit verify --database`) reports it.
wire::AuditChainView AuditChainViewOf(const storage::AuditChainReport& report);

class AuditService {
 public:
  // BORROWED: store outlives the service.
  explicit AuditService(storage::AuditStore* store);

  // GET /v1/admin/audit: at most `limit` rows (clamped to 1 ..
  // kMaxAuditList) in ascending id order: the newest ones when `since_id`
  // is 0, else the first ones after it; only `hostname`'s when given.
  // Refusals: the store's only.
  Result<std::vector<wire::AuditEntryView>> List(const std::optional<std::string>& hostname, int64_t limit,
                                                 int64_t since_id);

  // GET /v1/admin/audit/verify[?anchor=ID:HASH]: the whole chain walked in
  // one snapshot; a broken chain is a verdict (report.intact false, logged
  // as an error with `actor`'s name), not a refusal. Refusals: field_invalid
  // (kInvalidArgument) when `anchor` is not ID:HASH with ID a positive
  // number; then the store's.
  Result<AuditVerdict> Verify(const std::optional<std::string>& anchor, const storage::Actor& actor);

  // One admin_refused row for `r`, linked to the machine its hostname names
  // when there is one; the actor is the user, the why "refused: <reason>".
  // Refusals: the store's only.
  Status RecordAdminRefusal(const AdminRefusalRecord& r, int64_t now);

 private:
  storage::AuditStore* store_;
};

}  // namespace rackgate::core

#endif  // RACKGATE_CORE_AUDIT_SERVICE_H_
