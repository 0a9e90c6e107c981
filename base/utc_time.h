// Unix times written as UTC text, the one formatter of timestamps that
// operators read (tables, logs) and tools parse (--json).
#ifndef RACKGATE_BASE_UTC_TIME_H_
#define RACKGATE_BASE_UTC_TIME_H_

#include <cstdint>
#include <string>

namespace rackgate {

enum class TimeStyle {
  kPeople,   // "2026-11-29 11:06:20Z"
  kRfc3339,  // "2026-11-29T11:06:20Z"
};

// `unix_seconds` as UTC in `style`. Thread-safe (gmtime_r).
std::string UtcTime(int64_t unix_seconds, TimeStyle style = TimeStyle::kPeople);

}  // namespace rackgate

#endif  // RACKGATE_BASE_UTC_TIME_H_
