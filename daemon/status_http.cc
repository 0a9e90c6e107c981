// The one table from the core's reason codes to HTTP status and Retry-After,
// read from the reason registry (wire/reasons.def).
#include "daemon/status_http.h"

#include "base/log.h"
#include "core/secrets.h"
#include "wire/reasons.h"

namespace rackgate::daemon {

namespace {

using Retry = HttpRule::Retry;

std::shared_ptr<spdlog::logger> Log() {
  static const auto log = Logger("rackgated");
  return log;
}

constexpr HttpRule kMalformed{400, Retry::kNone};
constexpr HttpRule kRefused{403, Retry::kNone};
constexpr HttpRule kUnknown{404, Retry::kNone};
constexpr HttpRule kWait{503, Retry::kStandard};
constexpr HttpRule kConflict{409, Retry::kNone};

// The rule of a row on each API (wire/reasons.h says what the columns mean).
HttpRule MachineRule(const wire::ReasonInfo& r) {
  switch (r.retry) {
    case wire::ReasonRetry::kNone: return {r.machine_status, Retry::kNone};
    case wire::ReasonRetry::kJittered: return {r.machine_status, Retry::kJittered};
    case wire::ReasonRetry::kStandard:
    case wire::ReasonRetry::kMachineOnly: return {r.machine_status, Retry::kStandard};
  }
  return {r.machine_status, Retry::kNone};
}

// An operator's command waits only on a 503 (kAdminRetry), never jittered.
HttpRule AdminRule(const wire::ReasonInfo& r) {
  const bool waits = r.retry == wire::ReasonRetry::kStandard || r.retry == wire::ReasonRetry::kJittered;
  return {r.admin_status, r.admin_status == 503 && waits ? Retry::kStandard : Retry::kNone};
}

}  // namespace

std::optional<HttpRule> RuleForReason(std::string_view reason) {
  const wire::ReasonInfo* row = wire::FindReason(reason);
  if (row == nullptr || row->machine_status == 0) return std::nullopt;
  return MachineRule(*row);
}

namespace {

// A reason the registry does not declare (script/check-reasons and
// status_http_test make this dead), or a local one (HTTP 0) that reached
// the wire, is answered by its code, and logged.
HttpRule ByCode(const Status& s, Api api) {
  Log()->error("reason '{}' has no HTTP status in wire/reasons.def; answered by its code", s.reason());
  if (api == Api::kMachine) {
    switch (s.code()) {
      case Status::Code::kInvalidArgument: return kMalformed;
      case Status::Code::kNotFound: return kUnknown;
      case Status::Code::kIoError: return kWait;
      default: return kRefused;
    }
  }
  switch (s.code()) {
    case Status::Code::kNotFound: return kUnknown;
    case Status::Code::kInvalidArgument: return kMalformed;
    case Status::Code::kIoError: return kWait;
    case Status::Code::kVerificationFailed: return kRefused;
    default: return kConflict;
  }
}

}  // namespace

HttpRule RuleFor(const Status& s, Api api) {
  const wire::ReasonInfo* row = wire::FindReason(s.reason());
  // A local reason (HTTP 0) never crosses the wire; should one reach it,
  // it is answered by its code too.
  if (row == nullptr || (api == Api::kMachine ? row->machine_status : row->admin_status) == 0) {
    return ByCode(s, api);
  }
  return api == Api::kMachine ? MachineRule(*row) : AdminRule(*row);
}

Response ErrorResponse(const Status& s, const RetryPolicy& retry, Api api) {
  const HttpRule rule = RuleFor(s, api);
  // fleet: SECURITY: a lost database's message names the server (hosts,
  // libpq's words); a machine learns only that it may retry. An operator
  // on the admin socket is shown the cause.
  const std::string message = api == Api::kMachine && s.reason() == "db_unavailable"
                                  ? "the appliance's database is unavailable; retry"
                                  : s.message();
  switch (rule.retry) {
    case Retry::kNone: return Response::Error(rule.status, s.reason(), message);
    case Retry::kStandard: return Response::Error(rule.status, s.reason(), message, retry.retry_after_seconds);
    case Retry::kJittered: {
      const int base = retry.busy_retry_after_seconds;
      const int wait = base + static_cast<int>(core::RandomBytes(1)[0] % static_cast<unsigned>(base + 1));
      return Response::Error(rule.status, s.reason(), message, wait);
    }
  }
  return Response::Error(500, "internal", "internal error");
}

Response AdminErrorResponse(const Status& s) { return ErrorResponse(s, kAdminRetry, Api::kAdmin); }

}  // namespace rackgate::daemon
