// Bounded file reads and atomic file writes (rackgatectl, the agent).
#ifndef RACKGATE_BASE_FILES_H_
#define RACKGATE_BASE_FILES_H_

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "base/status.h"

namespace rackgate {

// Reads a whole file to its end (not trusting its reported size: securityfs
// files report 0), refusing one larger than `max_bytes` as soon as it is.
// kIoError ("file_unreadable") or kInvalidArgument ("file_too_large").
Result<std::vector<uint8_t>> ReadFile(const std::string& path, size_t max_bytes);

// Writes `data` to `path` through a temporary file in the same directory and
// a rename, so a reader never sees half a file. Mode 0600: outputs may be
// credentials. kIoError ("file_unwritable") on failure.
Status WriteFileAtomic(const std::string& path, std::span<const uint8_t> data);

}  // namespace rackgate

#endif  // RACKGATE_BASE_FILES_H_
