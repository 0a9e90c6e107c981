// One HTTP exchange with the appliance, mapped to the agent's next move
// (failure.h); the bodies themselves are wire/protocol.h's. Internal to
// rackgate-agent.
#ifndef RACKGATE_AGENT_EXCHANGE_H_
#define RACKGATE_AGENT_EXCHANGE_H_

#if !defined(RACKGATE_AGENT_INTERNAL)
#error "agent/exchange.h is internal to rackgate-agent"
#endif

#include <ctime>
#include <string>
#include <utility>

#include "agent/client.h"
#include "agent/failure.h"
#include "base/status.h"

namespace rackgate::agent {

inline constexpr char kIgnitionAccept[] = "application/vnd.coreos.ignition+json;version=3.3.0";

// Maps one exchange to the agent's next move: a 2xx answer is returned; a
// 503 and 429 are kWait (with the parsed Retry-After); another 5xx, no
// answer, or a 403 about the session (session_used, session_expired,
// session_unknown: start again from the challenge) is kRetry; another 4xx is
// kRefused with the appliance's reason; an answer over the
// size limit or any other status is kRefused ("bad_response").
Outcome<HttpResponse> Classify(Result<HttpResponse> exchange, std::time_t now);

// kRefused ("bad_response") for an answer the agent cannot use.
Failure BadResponse(const std::string& what);

// A decoded answer (wire::Decode*), or kRefused ("bad_response") naming what
// was wrong with it: an operator must look at the appliance.
template <typename T>
Outcome<T> UsableAnswer(Result<T> decoded) {
  if (!decoded.ok()) return BadResponse(decoded.status().message());
  return std::move(decoded).value();
}

}  // namespace rackgate::agent

#endif  // RACKGATE_AGENT_EXCHANGE_H_
