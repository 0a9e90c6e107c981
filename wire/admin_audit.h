// The admin API's audit bodies (docs/audit.md, docs/operations.md) as
// typed values with an encoder and a decoder: the list (GET
// /v1/admin/audit, `rackgatectl audit`) and the chain's report (GET
// /v1/admin/audit/verify). Decoding fails as wire/admin_pools.h says.
#ifndef RACKGATE_WIRE_ADMIN_AUDIT_H_
#define RACKGATE_WIRE_ADMIN_AUDIT_H_

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"

namespace rackgate::wire {

// One audit row as the admin API shows it.
struct AuditEntryView {
  int64_t id = 0;
  int64_t at = 0;
  std::string actor;
  std::string action;
  std::string hostname;  // "" when the action concerns no machine
  std::string why;
  std::optional<std::string> from_state;
  std::optional<std::string> to_state;
  // The row's detail as compact JSON text; nullopt (left out) when the
  // stored text is no JSON.
  std::optional<std::string> detail_json;
  bool operator==(const AuditEntryView&) const = default;
};

// {"entries": [...]}, in the order given.
std::string EncodeAuditList(const std::vector<AuditEntryView>& entries);
Result<std::vector<AuditEntryView>> DecodeAuditList(std::string_view body);

// The audit chain's report (GET /v1/admin/audit/verify): {"intact",
// "rows", "head_id", "head_hash"}, and for a broken chain "bad_row_id" and
// "problem" too (storage's AuditChainReport says what each means).
struct AuditChainView {
  bool intact = true;
  int64_t rows = 0;
  int64_t head_id = 0;
  std::string head_hash;
  int64_t bad_row_id = 0;  // with problem, only when not intact
  std::string problem;
  bool operator==(const AuditChainView&) const = default;
};
std::string EncodeAuditChain(const AuditChainView& report);
Result<AuditChainView> DecodeAuditChain(std::string_view body);

// A broken chain is refused (audit_chain_broken) with the report beside the
// refusal: `refusal_body` ({"error": ...}, the daemon's reason table's)
// with "report" added. A refusal body that is no JSON object is returned
// as given.
std::string AddAuditChainReport(std::string_view refusal_body, const AuditChainView& report);

// The other end of AddAuditChainReport: the report and the refusal's
// message ("error": {"message"}, "" when absent). bad_json as the
// decoders say; field_missing when the body has no "report".
struct AuditChainRefusal {
  AuditChainView report;
  std::string message;
  bool operator==(const AuditChainRefusal&) const = default;
};
Result<AuditChainRefusal> DecodeAuditChainRefusal(std::string_view body);

// The chain's verdict as `rackgatectl audit verify --json` prints it
// (docs/audit.md): the report, and for a broken chain "message" (the
// first bad row and what is wrong with it).
std::string EncodeAuditChainVerdict(const AuditChainView& report, const std::string& message);

}  // namespace rackgate::wire

#endif  // RACKGATE_WIRE_ADMIN_AUDIT_H_
