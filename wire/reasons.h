// The reason registry: every reason a refusal carries, declared once in
// wire/reasons.def with its Status code, its HTTP status on the machines' and
// the admin API, whether the client may wait it out, who receives it, and
// what it means (docs/protocol.md, "Reasons"; script/check-reasons checks
// every raise site against it).
#ifndef RACKGATE_WIRE_REASONS_H_
#define RACKGATE_WIRE_REASONS_H_

#include <span>
#include <string_view>

#include "base/status.h"

namespace rackgate::wire {

// Who receives the reason.
enum class ReasonAudience {
  kMachine,    // a machine (the agent, Ignition) on the HTTPS API
  kAdmin,      // an operator on the admin socket
  kBoth,       // either
  kTransport,  // the HTTP server's own answer, before any handler
  kLocal,      // never crosses the wire (startup config, rackgatectl-state): HTTP 0
  kKube,       // a Kubernetes CSR denial (core/kube_approver.h)
};

// Whether the answer names a Retry-After.
enum class ReasonRetry {
  kNone,         // final for this request
  kStandard,     // the configured retry_after_seconds
  kJittered,     // busy_retry_after_seconds plus up to as much again
  kMachineOnly,  // kStandard on the machines' API, none on the admin API
};

struct ReasonInfo {
  std::string_view name;
  Status::Code code;   // the one code it is raised with
  int machine_status;  // HTTP on the machines' API; 0 when it never crosses it
  int admin_status;    // HTTP on the admin API; 0 when it never crosses it
  ReasonRetry retry;   // on the machines' API; the admin API waits only on 503
  ReasonAudience audience;
  std::string_view meaning;  // one line, for docs/protocol.md
};

// Every row of wire/reasons.def, in its order. The span lives forever.
std::span<const ReasonInfo> Reasons();

// The row of `name`, or null when it is undeclared.
const ReasonInfo* FindReason(std::string_view name);

}  // namespace rackgate::wire

#endif  // RACKGATE_WIRE_REASONS_H_
