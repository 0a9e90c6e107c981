// The one table from the core's reason codes to HTTP: status code and
// whether the client may wait it out (Retry-After). Ignition retries a 5xx
// forever and gives up on a 4xx, so what a machine can wait out (not yet
// enrolled, over capacity, a config an operator is fixing) is a 503, and a
// final refusal is a 403 that names its reason (docs/protocol.md).
#ifndef RACKGATE_DAEMON_STATUS_HTTP_H_
#define RACKGATE_DAEMON_STATUS_HTTP_H_

#include <optional>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "daemon/http.h"

namespace rackgate::daemon {

struct HttpRule {
  enum class Retry {
    kNone,      // final for this request: no Retry-After
    kStandard,  // Retry-After: retry_after_seconds
    kJittered,  // Retry-After: busy_retry_after_seconds plus up to as much
                // again, so that a rack told to come back does not come back
                // at once
  };
  int status = 500;
  Retry retry = Retry::kNone;
};

struct ReasonRule {
  std::string_view reason;
  HttpRule rule;
};

// Every reason the core returns, with its rule.
const std::vector<ReasonRule>& ReasonTable();

// The rule of `reason`; nullopt when the table does not name it.
std::optional<HttpRule> RuleForReason(std::string_view reason);

// The rule for a refusal: the table's row for its reason, else by its code
// (kInvalidArgument 400, kNotFound 404, kIoError 503 with Retry-After, any
// other 403). REQUIRES: !s.ok().
HttpRule RuleFor(const Status& s);

// The seconds a Retry-After names (config: retry_after_seconds,
// busy_retry_after_seconds).
struct RetryPolicy {
  int retry_after_seconds = 30;
  int busy_retry_after_seconds = 2;
};

// The refusal as its HTTP answer: {"error": {"reason", "message"}} with the
// status RuleFor gives, and Retry-After when waitable. REQUIRES: !s.ok().
Response ErrorResponse(const Status& s, const RetryPolicy& retry);

// The admin API's mapping, by code only (its reasons are the store's and
// the operator's): unknown things 404, bad input 400, database trouble 503
// with Retry-After 5, anything else a conflict, 409. REQUIRES: !s.ok().
Response AdminErrorResponse(const Status& s);

}  // namespace rackgate::daemon

#endif  // RACKGATE_DAEMON_STATUS_HTTP_H_
