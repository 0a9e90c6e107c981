// Classifies the appliance's HTTP answers into the agent's next move.
#include "agent/exchange.h"

#include "agent/backoff.h"
#include "attest/boot_facts.h"
#include "base/text.h"
#include "wire/refusal.h"

namespace rackgate::agent {

Failure BadResponse(const std::string& what) {
  return Failure::Refused("bad_response", "the appliance's answer is unusable: " + what);
}

Outcome<HttpResponse> Classify(Result<HttpResponse> exchange, std::time_t now) {
  if (!exchange.ok()) {
    if (exchange.status().reason() == "response_too_large") return BadResponse(exchange.status().message());
    // Retried like any unreachable appliance (a fixed CA file makes the
    // next try work), under its own reason and with the whole way back.
    if (exchange.status().reason() == "appliance_untrusted") {
      return Failure::Retry("appliance_untrusted", text::PrintableAscii(exchange.status().message(), 600));
    }
    return Failure::Retry("appliance_unreachable", text::PrintableAscii(exchange.status().message(), 200));
  }
  HttpResponse r = std::move(exchange).value();
  if (r.status >= 200 && r.status < 300) return r;
  // Any body that is not a refusal (a proxy's page) leaves both empty.
  // Printable only, and short: they go to a terminal or the journal.
  auto decoded = wire::DecodeRefusal(r.body);
  wire::Refusal e;
  if (decoded.ok()) e = {text::PrintableAscii(decoded->reason, 64), text::PrintableAscii(decoded->message, 200)};
  const int status = static_cast<int>(r.status);
  // 429 (too many CSRs in flight from this machine) is waited out like 503.
  if (r.status == 503 || r.status == 429) {
    std::optional<long> after;
    if (r.retry_after) after = ParseRetryAfter(*r.retry_after, now);
    return Failure::Wait(e.reason.empty() ? "unavailable" : e.reason, e.message, after);
  }
  if (r.status >= 500 && r.status < 600) {
    return Failure::Retry(e.reason.empty() ? "http_" + std::to_string(r.status) : e.reason, e.message, status);
  }
  // A session that is used, expired or unknown says nothing about the
  // machine: an evidence whose answer was lost (the appliance restarted, the
  // connection was cut and retried) finds its session used. Start again.
  if (r.status == 403 && (e.reason == "session_used" || e.reason == "session_expired" ||
                          e.reason == "session_unknown")) {
    return Failure::Retry(e.reason, e.message, status);
  }
  if (r.status >= 400 && r.status < 500) {
    return Failure::Refused(e.reason.empty() ? "http_" + std::to_string(r.status) : e.reason, e.message, status);
  }
  return Failure::Refused("bad_response", "unexpected HTTP status " + std::to_string(r.status), status);
}

}  // namespace rackgate::agent
