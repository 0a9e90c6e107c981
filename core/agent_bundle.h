// The agent bundle rackgated serves (docs/nodes.md): the initramfs fragment
// script/agent-bundle makes, read from one file, bounded, cached while the
// file is unchanged, with its SHA-256. No secret is in it; no machine has to
// prove anything to fetch it.
#ifndef RACKGATE_CORE_AGENT_BUNDLE_H_
#define RACKGATE_CORE_AGENT_BUNDLE_H_

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>

#include "base/status.h"
#include "wire/agent_bundle_paths.h"

namespace rackgate::core {

// The default path and the size bound (wire/agent_bundle_paths.h).
using wire::kDefaultAgentBundlePath;
using wire::kMaxAgentBundleBytes;

struct AgentBundleView {
  // SHARED and immutable: stays valid as long as the caller holds it, even
  // after the file changes and the cache moves on.
  std::shared_ptr<const std::string> bytes;
  std::string sha256_hex;  // lower-case hex of SHA-256(*bytes)
};

class AgentBundle {
 public:
  // path: the fragment's file; "" serves none. max_bytes: the bound above
  // (tests pass less).
  explicit AgentBundle(std::string path, size_t max_bytes = kMaxAgentBundleBytes);
  AgentBundle(const AgentBundle&) = delete;
  AgentBundle& operator=(const AgentBundle&) = delete;

  // The fragment and its digest. The file is looked at (stat) on every call
  // and read again only when its device, inode, size or modification time
  // changed, so a package upgrade is served at once and a boot storm reads it
  // once. kNotFound "agent_bundle_not_configured" when the path is "";
  // kIoError "agent_bundle_unavailable" when the file is missing,
  // unreadable, empty or over max_bytes (the message says which; it names
  // the path, which is the package's, no secret). Thread-safe.
  Result<AgentBundleView> Get();

 private:
  struct Identity {
    uint64_t dev = 0, ino = 0, size = 0;
    int64_t mtime_ns = 0;
    bool operator==(const Identity&) const = default;
  };

  const std::string path_;
  const size_t max_bytes_;
  std::mutex mu_;
  Identity cached_id_;             // guarded by mu_
  AgentBundleView cached_;         // guarded by mu_; bytes null: nothing cached
};

}  // namespace rackgate::core

#endif  // RACKGATE_CORE_AGENT_BUNDLE_H_
