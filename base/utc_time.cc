// Unix times written as UTC text.
#include "base/utc_time.h"

#include <ctime>

namespace rackgate {

std::string UtcTime(int64_t unix_seconds, TimeStyle style) {
  const std::time_t t = static_cast<std::time_t>(unix_seconds);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[40];
  const char* format = style == TimeStyle::kRfc3339 ? "%Y-%m-%dT%H:%M:%SZ" : "%Y-%m-%d %H:%M:%SZ";
  const size_t n = std::strftime(buf, sizeof(buf), format, &tm);
  return std::string(buf, n);
}

}  // namespace rackgate
