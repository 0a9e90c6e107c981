// Applies the attested Ignition config (spec 3.x) to a root directory: the
// parts a running node can apply — storage.files (data: URLs, plain or
// base64), storage.directories, storage.links and systemd.units — with
// every path kept inside the root (rootfs.h). The config is parsed and
// validated completely before anything is written. Sections a running node
// cannot apply (disks, partitions, filesystems, users, kernel arguments,
// remote sources) are reported, not applied: the first-boot Ignition run
// applied the public config's share of them. Internal to rackgate-agent;
// see docs/agent.md.
#ifndef RACKGATE_AGENT_APPLY_H_
#define RACKGATE_AGENT_APPLY_H_

#if !defined(RACKGATE_AGENT_INTERNAL)
#error "agent/apply.h is internal to rackgate-agent"
#endif

#include <sys/types.h>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"

namespace rackgate::agent {

// An owner as a config names it: by id or by name (looked up in the root's
// /etc/passwd and /etc/group when applied).
struct ConfigOwner {
  std::optional<int64_t> id;
  std::optional<std::string> name;
};

struct ConfigFile {
  std::string path;
  std::optional<std::vector<uint8_t>> contents;  // nullopt: no source (an empty file if absent)
  bool overwrite = false;
  mode_t mode = 0644;
  ConfigOwner user, group;
};

struct ConfigDirectory {
  std::string path;
  mode_t mode = 0755;
  ConfigOwner user, group;
};

struct ConfigLink {
  std::string path;
  std::string target;
  bool hard = false;
  bool overwrite = false;
  ConfigOwner user, group;
};

struct ConfigDropin {
  std::string name;
  std::string contents;
};

struct ConfigUnit {
  std::string name;
  std::optional<std::string> contents;
  std::optional<bool> enabled;
  bool mask = false;
  std::vector<ConfigDropin> dropins;
};

struct IgnitionPlan {
  std::string version;
  std::vector<ConfigDirectory> directories;
  std::vector<ConfigFile> files;
  std::vector<ConfigLink> links;
  std::vector<ConfigUnit> units;
  // Non-empty sections this agent does not apply, e.g. "passwd.users (2)".
  std::vector<std::string> not_applied;
};

// Limits on a config.
inline constexpr size_t kMaxConfigEntries = 10000;  // per list
inline constexpr size_t kMaxFileBytes = 8u << 20;   // one decoded file

// Parses and validates an Ignition config. kInvalidArgument
// ("config_invalid") for JSON that is not an Ignition 3.x config, a field
// of the wrong type, a path that is not absolute and clean, a bad data: URL,
// a verification hash that does not match, a mode outside 07777, an
// invalid unit name; kUnsupported ("config_unsupported") for a file we
// cannot produce faithfully (a remote source, compression, append).
Result<IgnitionPlan> ParseIgnitionConfig(std::string_view json);

// The bytes of a data: URL (RFC 2397), decoded by the one codec
// (wire/data_url.h: percent-decoding of the plain form, canonical base64).
// kInvalidArgument ("data_url_invalid").
Result<std::vector<uint8_t>> DecodeDataUrl(std::string_view url, size_t max_bytes = kMaxFileBytes);

// Writes `plan` into `root_dir`: directories, then files, then links, then
// units (contents under /etc/systemd/system/NAME, drop-ins under NAME.d/,
// `enabled` as a symlink in /etc/systemd/system/multi-user.target.wants/,
// `mask` as a symlink to /dev/null).
//
// Checked whole before anything is written: every owner resolved
// ("owner_unknown" for a user or group name the root does not know), every
// target's directory writable (io_failed: a read-only file system, as under
// a unit's ProtectSystem=, or no permission), nothing in the way that a
// write would refuse (path_exists, path_not_directory, a hard link's
// missing target). `also_writes` are more paths the caller will write after
// (the agent's stamp), checked the same way. A refusal of the check writes
// nothing. Only a failure of the writing itself (a full disk, a race with
// another writer) can stop it part-way; it stops at the first, with the
// path in the message, and each file written so far is whole (rootfs.h).
Status ApplyIgnition(const IgnitionPlan& plan, const std::string& root_dir,
                     const std::vector<std::string>& also_writes = {});

}  // namespace rackgate::agent

#endif  // RACKGATE_AGENT_APPLY_H_
