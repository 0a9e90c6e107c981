// The one table from the core's reason codes to HTTP: status code and
// whether the client may wait it out (Retry-After). Ignition retries a 5xx
// forever and gives up on a 4xx, so what a machine can wait out (not yet
// enrolled, over capacity, a config an operator is fixing) is a 503, and a
// final refusal is a 403 that names its reason (docs/protocol.md).
#ifndef RACKGATE_DAEMON_STATUS_HTTP_H_
#define RACKGATE_DAEMON_STATUS_HTTP_H_

#include <optional>
#include <string_view>

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

// Which API answers: the machines' (HTTPS) or the operators' (the admin
// socket). Each row of the reason registry (wire/reasons.def) names the
// status of both.
enum class Api { kMachine, kAdmin };

// The machines' API's rule of `reason`; nullopt when wire/reasons.def does
// not declare it or it never crosses the wire (HTTP 0).
std::optional<HttpRule> RuleForReason(std::string_view reason);

// The rule for a refusal: its reason's row in wire/reasons.def, the
// column of `api`; Retry-After as the row's retry says (the admin API
// waits only on a 503). A reason without a row, or with HTTP 0 on that API
// (script/check-reasons keeps this dead), is logged and answered by its
// code: on the machines' API kInvalidArgument 400, kNotFound 404, kIoError
// 503 with Retry-After, any other 403; on the admin API kNotFound 404,
// kInvalidArgument 400, kIoError 503 with Retry-After, kVerificationFailed
// 403, any other 409. REQUIRES: !s.ok().
HttpRule RuleFor(const Status& s, Api api = Api::kMachine);

// The seconds a Retry-After names (config: retry_after_seconds,
// busy_retry_after_seconds).
struct RetryPolicy {
  int retry_after_seconds = 30;
  int busy_retry_after_seconds = 2;
};

// The admin API's Retry-After: an operator's command, retried by hand or by
// a script, waits 5 s.
inline constexpr RetryPolicy kAdminRetry{5, 5};

// The refusal as its HTTP answer: {"error": {"reason", "message"}} with the
// status RuleFor gives, and Retry-After when waitable. The only place a
// refusal becomes a response (script/check-admin-path checks it).
// REQUIRES: !s.ok().
Response ErrorResponse(const Status& s, const RetryPolicy& retry, Api api = Api::kMachine);

// ErrorResponse on the admin API, with kAdminRetry. REQUIRES: !s.ok().
Response AdminErrorResponse(const Status& s);

}  // namespace rackgate::daemon

#endif  // RACKGATE_DAEMON_STATUS_HTTP_H_
