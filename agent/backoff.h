// How long the agent waits before it starts again from the challenge: the
// appliance's Retry-After on a 503 (plus jitter), or exponential backoff when
// the appliance cannot be reached. Pure functions; the caller supplies the
// clock and the random numbers, so tests can pin both.
#ifndef RACKGATE_AGENT_BACKOFF_H_
#define RACKGATE_AGENT_BACKOFF_H_

#if !defined(RACKGATE_AGENT_INTERNAL)
#error "agent/backoff.h is internal to rackgate-agent"
#endif

#include <chrono>
#include <ctime>
#include <optional>
#include <string_view>

namespace rackgate::agent {

// An appliance may not make a machine wait longer than this per round: a
// bogus or hostile Retry-After must not park a booting node for days.
inline constexpr long kMaxRetryAfterSeconds = 3600;
// The shortest wait after a 503, whatever Retry-After says.
inline constexpr long kMinWaitSeconds = 1;
// A 503 without a usable Retry-After waits this long (rackgated's default).
inline constexpr long kDefaultRetryAfterSeconds = 30;
// Backoff for connection errors and 5xx other than 503: 1 s doubling per
// attempt, capped at 60 s.
inline constexpr std::chrono::milliseconds kBackoffBase{1000};
inline constexpr std::chrono::milliseconds kBackoffCap{60000};
// Jitter: up to this fraction is added to every wait, so that a rack of
// machines told "30" at the same moment does not come back in lockstep.
inline constexpr double kJitterFraction = 0.2;

// Parses a Retry-After header value (RFC 9110 §10.2.3): delay-seconds (digits
// only) or an HTTP-date (IMF-fixdate, "Sun, 06 Nov 1994 08:49:37 GMT"),
// relative to `now`. A date in the past is 0 s. The result is capped at
// kMaxRetryAfterSeconds. nullopt for anything else (the caller then uses
// kDefaultRetryAfterSeconds).
std::optional<long> ParseRetryAfter(std::string_view value, std::time_t now);

// The wait after a 503: `retry_after_seconds` (or the default when absent)
// plus jitter, where `unit_random` is uniform in [0, 1). With s the seconds
// clamped to [kMinWaitSeconds, kMaxRetryAfterSeconds], the result lies in
// [s, s * (1 + kJitterFraction)).
std::chrono::milliseconds WaitDelay(std::optional<long> retry_after_seconds, double unit_random);

// The wait before attempt `attempt` (0 for the first retry) after a
// connection error: min(cap, base * 2^attempt) plus jitter, in
// [d, d * (1 + kJitterFraction)).
std::chrono::milliseconds BackoffDelay(int attempt, double unit_random);

}  // namespace rackgate::agent

#endif  // RACKGATE_AGENT_BACKOFF_H_
