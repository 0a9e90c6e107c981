// The agent bundle rackgated serves (docs/nodes.md): the initramfs fragment
// script/agent-bundle makes, read from one file, bounded, cached while the
// file is unchanged, with its SHA-256. No secret is in it; no machine has to
// prove anything to fetch it.
#ifndef RACKGATE_CORE_AGENT_BUNDLE_H_
#define RACKGATE_CORE_AGENT_BUNDLE_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>

#include "base/status.h"
#include "wire/agent_bundle_paths.h"

namespace rackgate::core {

// The default path and the size bound (wire/agent_bundle_paths.h).
using wire::kDefaultAgentBundlePath;
using wire::kMaxAgentBundleBytes;

// How close to the file's last change (its ctime) a read may start and still
// be trusted to have seen the file's final bytes (docs/nodes.md, "The
// bundle's cache"): a change within this window of a read may carry the
// same timestamps as the file the read saw, so such a read is verified by
// reading again (the racy-git rule). Wider than any timestamp granularity
// of a local filesystem (a kernel tick; FAT's 2 s).
inline constexpr int64_t kAgentBundleRacyWindowNs = 2'000'000'000;

struct AgentBundleView {
  // SHARED and immutable: stays valid as long as the caller holds it, even
  // after the file changes and the cache moves on. Every caller gets the
  // same buffer while the file's bytes are the same: an answer in flight
  // holds a reference, never a copy.
  std::shared_ptr<const std::string> bytes;
  std::string sha256_hex;  // lower-case hex of SHA-256(*bytes)
};

class AgentBundle {
 public:
  // path: the fragment's file; "" serves none. max_bytes: the bound above
  // (tests pass less). wall_clock_ns: CLOCK_REALTIME in ns, the clock file
  // timestamps are taken from (tests pass a fixed one); null: the real one.
  explicit AgentBundle(std::string path, size_t max_bytes = kMaxAgentBundleBytes,
                       std::function<int64_t()> wall_clock_ns = nullptr);
  AgentBundle(const AgentBundle&) = delete;
  AgentBundle& operator=(const AgentBundle&) = delete;

  // The fragment and its digest. The file is looked at (stat) on every call
  // and read again when its device, inode, size, modification time or
  // status-change time (ctime, which no one can set: any write, chmod or
  // utimes moves it) changed, or when the last read started within
  // kAgentBundleRacyWindowNs of the file's ctime, so an in-place edit is
  // served at once even when it keeps the size and puts the mtime back, or
  // lands in the same timestamp tick as the read. A read whose bytes hash to
  // the cached digest keeps the cached buffer. kNotFound
  // "agent_bundle_not_configured" when the path is ""; kIoError
  // "agent_bundle_unavailable" when the file is missing, unreadable, empty or
  // over max_bytes (the message says which; it names the path, which is the
  // package's, no secret). Thread-safe.
  Result<AgentBundleView> Get();

  // How many times the file was read whole (for tests and a metric).
  uint64_t Reads() const;

 private:
  struct Identity {
    uint64_t dev = 0, ino = 0, size = 0;
    int64_t mtime_ns = 0, ctime_ns = 0;
    bool operator==(const Identity&) const = default;
  };

  int64_t NowNs() const;

  const std::string path_;
  const size_t max_bytes_;
  const std::function<int64_t()> wall_clock_ns_;
  mutable std::mutex mu_;
  Identity cached_id_;             // guarded by mu_
  bool cached_racy_ = false;       // guarded by mu_: read within the racy window of its ctime
  AgentBundleView cached_;         // guarded by mu_; bytes null: nothing cached
  uint64_t reads_ = 0;             // guarded by mu_
};

}  // namespace rackgate::core

#endif  // RACKGATE_CORE_AGENT_BUNDLE_H_
