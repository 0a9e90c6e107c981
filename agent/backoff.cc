// Retry-After parsing and the agent's wait schedule.
#include "agent/backoff.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>

namespace rackgate::agent {

namespace {

std::chrono::milliseconds WithJitter(std::chrono::milliseconds base, double unit_random) {
  // Clamp the random input: a caller's off-by-one must not shrink the wait
  // below the appliance's request or stretch it past the jitter bound.
  const double u = std::clamp(unit_random, 0.0, std::nextafter(1.0, 0.0));
  const double extra = static_cast<double>(base.count()) * kJitterFraction * u;
  return base + std::chrono::milliseconds(static_cast<long long>(extra));
}

}  // namespace

std::optional<long> ParseRetryAfter(std::string_view value, std::time_t now) {
  // Optional whitespace around the field value is not part of it.
  while (!value.empty() && (value.front() == ' ' || value.front() == '\t')) value.remove_prefix(1);
  while (!value.empty() && (value.back() == ' ' || value.back() == '\t')) value.remove_suffix(1);
  if (value.empty()) return std::nullopt;

  if (std::all_of(value.begin(), value.end(), [](char c) { return c >= '0' && c <= '9'; })) {
    // Digits only; any count of them, so cap while accumulating.
    long seconds = 0;
    for (char c : value) {
      seconds = seconds * 10 + (c - '0');
      if (seconds >= kMaxRetryAfterSeconds) return kMaxRetryAfterSeconds;
    }
    return seconds;
  }

  // IMF-fixdate is exactly 29 characters; the obsolete RFC 850 and asctime
  // forms are not accepted (rackgated never sends a date at all).
  if (value.size() != 29) return std::nullopt;
  const std::string text(value);
  struct tm tm;
  std::memset(&tm, 0, sizeof(tm));
  const char* end = ::strptime(text.c_str(), "%a, %d %b %Y %H:%M:%S GMT", &tm);
  if (end == nullptr || *end != '\0') return std::nullopt;
  const std::time_t at = ::timegm(&tm);
  if (at == static_cast<std::time_t>(-1)) return std::nullopt;
  if (at <= now) return 0;
  return std::min<long>(static_cast<long>(at - now), kMaxRetryAfterSeconds);
}

std::chrono::milliseconds WaitDelay(std::optional<long> retry_after_seconds, double unit_random) {
  long s = retry_after_seconds.value_or(kDefaultRetryAfterSeconds);
  // At least a second: "Retry-After: 0" (or a date in the past) must not
  // turn the agent into a tight loop against the appliance.
  s = std::clamp<long>(s, kMinWaitSeconds, kMaxRetryAfterSeconds);
  return WithJitter(std::chrono::seconds(s), unit_random);
}

std::chrono::milliseconds BackoffDelay(int attempt, double unit_random) {
  std::chrono::milliseconds d = kBackoffBase;
  for (int i = 0; i < attempt && d < kBackoffCap; ++i) d *= 2;
  return WithJitter(std::min(d, kBackoffCap), unit_random);
}

}  // namespace rackgate::agent
