// Which appliance the agent asks, and when it moves on to the next one. The
// appliances of a fleet share one database, so a token, a session's outcome
// or a CSR's answer from one is good on another: a request whose appliance
// failed (no answer, a timeout, a 5xx, a 503/429) is asked again of the next
// one at once; a 4xx is the fleet's answer and final. Only when every
// appliance has failed in a round does the agent wait. The appliance that
// answered last is asked first (sticky); the first one is picked at random so
// a rack does not pile onto the first URL. Internal to rackgate-agent.
#ifndef RACKGATE_AGENT_FAILOVER_H_
#define RACKGATE_AGENT_FAILOVER_H_

#if !defined(RACKGATE_AGENT_INTERNAL)
#error "agent/failover.h is internal to rackgate-agent"
#endif

#include <ctime>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "agent/client.h"
#include "agent/endpoints.h"
#include "agent/failure.h"

namespace rackgate::agent {

// True for a failure that says the appliance, not the machine, failed: the
// next appliance may do better. False for answers (2xx, 4xx) and for a
// 403 about the session (session_used/expired/unknown), which is no fault
// of the appliance that said it.
bool MovesOn(const Failure& f);

class Failover {
 public:
  // `transport` is BORROWED. `unit_random` in [0, 1) picks the first
  // endpoint. `log` gets one line per move ("appliance A failed (why);
  // trying B"). REQUIRES: !endpoints.empty().
  Failover(std::vector<Endpoint> endpoints, const Transport* transport, std::function<std::time_t()> now,
           double unit_random, std::function<void(const std::string&)> log);

  // The request on the current endpoint, then on each endpoint that has not
  // failed in this round, until one answers. An answer (2xx) or a final
  // failure (4xx, an unusable answer) makes its endpoint the current one.
  // When every endpoint has failed in this round, returns the round's
  // failure (RoundFailure()).
  Outcome<HttpResponse> Call(const std::string& path, const std::string* json_body,
                             const std::vector<std::string>& headers);
  // One try on the current endpoint only: the evidence, whose session may
  // be consumed by a failed attempt; the caller starts again from a fresh
  // challenge (on the next endpoint, which a failure made current) while
  // CanMoveOn(). When the round is over, returns RoundFailure().
  Outcome<HttpResponse> CallOnce(const std::string& path, const std::string* json_body,
                                 const std::vector<std::string>& headers);
  // Best effort on every endpoint once, whatever the round: the report.
  Result<HttpResponse> CallAny(const std::string& path, const std::string* json_body,
                               const std::vector<std::string>& headers);

  // Some endpoint has not failed in this round: start again at once.
  bool CanMoveOn() const;
  // What to wait for when the round is over: a wait (503/429) if any
  // endpoint asked for one, with the soonest Retry-After (none given counts
  // as the default), else the last failure.
  Failure RoundFailure() const;
  // After the wait: every endpoint may be tried again.
  void NewRound();

  const Endpoint& Current() const { return endpoints_[current_]; }
  size_t size() const { return endpoints_.size(); }

 private:
  Outcome<HttpResponse> Try(const std::string& path, const std::string* json_body,
                            const std::vector<std::string>& headers);
  // Records the current endpoint's failure; moves to the next endpoint not
  // failed in this round and logs the move. False when there is none.
  bool Fail(const Failure& f);

  std::vector<Endpoint> endpoints_;
  const Transport* transport_;
  std::function<std::time_t()> now_;
  std::function<void(const std::string&)> log_;
  size_t current_ = 0;
  std::vector<bool> failed_;  // in this round
  std::optional<Failure> last_;
  std::optional<Failure> wait_;
};

}  // namespace rackgate::agent

#endif  // RACKGATE_AGENT_FAILOVER_H_
