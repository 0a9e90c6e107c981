// The admin API's audit list (GET /v1/admin/audit; docs/audit.md,
// docs/operations.md) as a typed value with an encoder and a decoder, for
// rackgated and `rackgatectl audit`. Decoding fails as wire/admin_pools.h
// says.
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

}  // namespace rackgate::wire

#endif  // RACKGATE_WIRE_ADMIN_AUDIT_H_
