// The agent bundle: one bounded read per change of the file, its digest.
#include "core/agent_bundle.h"

#include <sys/stat.h>

#include <cerrno>
#include <cstring>
#include <string_view>
#include <utility>
#include <vector>

#include "base/files.h"
#include "core/secrets.h"

namespace rackgate::core {

AgentBundle::AgentBundle(std::string path, size_t max_bytes) : path_(std::move(path)), max_bytes_(max_bytes) {}

Result<AgentBundleView> AgentBundle::Get() {
  if (path_.empty()) {
    return Status::NotFound("agent_bundle_not_configured", "this appliance serves no agent bundle (agent_bundle is \"\")");
  }
  struct stat st {};
  if (::stat(path_.c_str(), &st) != 0) {
    return Status::IoError("agent_bundle_unavailable",
                           "the agent bundle " + path_ + " is not installed: " + std::strerror(errno));
  }
  if (!S_ISREG(st.st_mode)) return Status::IoError("agent_bundle_unavailable", path_ + " is not a regular file");
  if (st.st_size <= 0) return Status::IoError("agent_bundle_unavailable", "the agent bundle " + path_ + " is empty");
  if (static_cast<uint64_t>(st.st_size) > max_bytes_) {
    return Status::IoError("agent_bundle_unavailable", "the agent bundle " + path_ + " is larger than " +
                                                           std::to_string(max_bytes_) + " bytes");
  }
  const Identity id{static_cast<uint64_t>(st.st_dev), static_cast<uint64_t>(st.st_ino),
                    static_cast<uint64_t>(st.st_size),
                    static_cast<int64_t>(st.st_mtim.tv_sec) * 1000000000 + st.st_mtim.tv_nsec};
  // One reader at a time: a boot storm after an upgrade reads the new file
  // once, the others wait for it and share it.
  std::lock_guard<std::mutex> lock(mu_);
  if (cached_.bytes != nullptr && cached_id_ == id) return cached_;
  // Bounded whatever stat said: the file may grow between the two.
  auto data = ReadFile(path_, max_bytes_);
  if (!data.ok()) {
    return Status::IoError("agent_bundle_unavailable",
                           "the agent bundle " + path_ + " cannot be read: " + data.status().message());
  }
  if (data->empty()) return Status::IoError("agent_bundle_unavailable", "the agent bundle " + path_ + " is empty");
  auto bytes = std::make_shared<const std::string>(data->begin(), data->end());
  cached_ = AgentBundleView{bytes, Sha256Hex(*bytes)};
  // What was read may be newer than what stat saw: the next call's stat
  // differs from this identity and reads again, never serving a stale file
  // for longer than one call.
  cached_id_ = id;
  return cached_;
}

}  // namespace rackgate::core
