// A directory tree used as the root of absolute paths (the node's root file
// system, or a test's temp dir): every path is resolved inside it and can
// never leave it, and files are replaced atomically. Internal to
// rackgate-agent.
//
// SECURITY: paths come from an Ignition config, i.e. from the network. They
// must be absolute and clean ("/etc/x", never "/etc/../x", "//" or "/./").
// Symlinks met in a path's directories are followed the way the kernel's
// RESOLVE_IN_ROOT does: an absolute target starts again at the root and ".."
// stops at it, so a link like /etc -> /../../outside resolves to <root>/outside.
// The last component is never followed: a file is written with O_NOFOLLOW
// into a temporary name and renamed over whatever was there, so a planted
// symlink is replaced, not written through.
#ifndef RACKGATE_AGENT_ROOTFS_H_
#define RACKGATE_AGENT_ROOTFS_H_

#if !defined(RACKGATE_AGENT_INTERNAL)
#error "agent/rootfs.h is internal to rackgate-agent"
#endif

#include <sys/stat.h>
#include <sys/types.h>

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"

namespace rackgate::agent {

// Owns a file descriptor; closes it when destroyed.
class UniqueFd {
 public:
  UniqueFd() = default;
  explicit UniqueFd(int fd) : fd_(fd) {}
  UniqueFd(UniqueFd&& o) noexcept : fd_(o.fd_) { o.fd_ = -1; }
  UniqueFd& operator=(UniqueFd&& o) noexcept;
  UniqueFd(const UniqueFd&) = delete;
  UniqueFd& operator=(const UniqueFd&) = delete;
  ~UniqueFd();
  int get() const { return fd_; }
  bool valid() const { return fd_ >= 0; }

 private:
  int fd_ = -1;
};

// File ownership to set; nullopt leaves it as created (the agent's own).
struct Owner {
  std::optional<uid_t> uid;
  std::optional<gid_t> gid;
};

// Reasons (kInvalidArgument unless noted): path_invalid (not absolute and
// clean), path_not_directory (a directory component is a file),
// path_symlink_loop (more than 40 links), path_exists (overwrite refused),
// and kIoError io_failed for system call failures.
class Root {
 public:
  // kIoError when `dir` is not an existing directory.
  static Result<Root> Open(const std::string& dir);

  // Writes `data` to `path` with `mode`: through a temporary file in the
  // same directory, fsync, rename, fsync of the directory. Parents are
  // created (0755) as needed. When the path exists and !overwrite: a regular
  // file with exactly `data` is left as it is (mode and owner are applied),
  // anything else is path_exists.
  Status WriteFile(std::string_view path, std::span<const uint8_t> data, mode_t mode, const Owner& owner,
                   bool overwrite);
  // Creates directory `path` (and parents, 0755) or accepts an existing
  // directory; then applies `mode` and `owner`. A non-directory there is
  // path_exists.
  Status MakeDirectory(std::string_view path, mode_t mode, const Owner& owner);
  // A symbolic link at `path` pointing to `target` (stored verbatim). An
  // existing link with the same target is kept; anything else there is
  // replaced when `overwrite` (atomically, never a directory), else
  // path_exists.
  Status Symlink(std::string_view path, std::string_view target, const Owner& owner, bool overwrite);
  // A hard link at `path` to the file at `target` (a path in this root).
  Status Hardlink(std::string_view path, std::string_view target, bool overwrite);
  // Removes `path` if it is a symbolic link; nothing if it does not exist.
  Status RemoveSymlink(std::string_view path);
  // What is at `path`, resolved as WriteFile resolves it but creating and
  // changing nothing: its lstat, or nullopt when it (or a directory on the
  // way) does not exist yet. The directory a write would go into (the
  // nearest existing one) must be writable: kIoError io_failed ("... Read-only
  // file system", "... Permission denied") otherwise. Resolution's own
  // refusals as WriteFile's (path_invalid, path_not_directory, ...). For
  // checking a whole config before writing any of it (apply.h).
  Result<std::optional<struct stat>> Probe(std::string_view path);
  // The target of the symbolic link at `path`, as stored. kNotFound
  // ("path_absent") when there is none; kIoError when it is no link.
  Result<std::string> ReadLink(std::string_view path);
  // Reads the regular file at `path` (not following a final symlink), at
  // most `max_bytes`. kNotFound ("path_absent") when it does not exist.
  Result<std::vector<uint8_t>> ReadFile(std::string_view path, size_t max_bytes);

 private:
  explicit Root(UniqueFd fd) : fd_(std::move(fd)) {}
  struct Location {
    UniqueFd dir;
    std::string name;
  };
  // The directory holding `path`'s last component, resolved in the root.
  Result<Location> ResolveParent(std::string_view path, bool create);

  UniqueFd fd_;
};

// Splits a clean absolute path into its components; path_invalid otherwise.
// Exposed for tests.
Result<std::vector<std::string>> SplitCleanPath(std::string_view path);

}  // namespace rackgate::agent

#endif  // RACKGATE_AGENT_ROOTFS_H_
