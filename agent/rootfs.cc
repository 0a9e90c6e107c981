// In-root path resolution with *at() system calls, and atomic replacement.
#include "agent/rootfs.h"

#include <fcntl.h>
#include <openssl/rand.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <deque>
#include <stdexcept>

#include "attest/tpm.h"
#include "base/hex.h"

namespace rackgate::agent {

namespace {

// Linux's own limit on symlinks in one resolution (MAXSYMLINKS).
constexpr int kMaxSymlinks = 40;
constexpr size_t kMaxPath = 4096;

Status Errno(const std::string& what) { return Status::IoError("io_failed", what + ": " + std::strerror(errno)); }

Status PathInvalid(std::string_view path, const char* why) {
  return Status::InvalidArgument("path_invalid", std::string(why) + ": " + std::string(path.substr(0, 200)));
}

Status WriteAll(int fd, std::span<const uint8_t> data, std::string_view path) {
  size_t done = 0;
  while (done < data.size()) {
    const ssize_t n = ::write(fd, data.data() + done, data.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return Errno("write " + std::string(path));
    done += static_cast<size_t>(n);
  }
  return Status::Ok();
}

// ".<name>.rackgate-<random>": hidden, in the same directory (so rename is
// atomic), unguessable (so nobody can plant it first; O_EXCL checks anyway).
std::string TempName(const std::string& name) {
  uint8_t r[8];
  if (RAND_bytes(r, sizeof(r)) != 1) throw std::runtime_error("RAND_bytes failed");
  return "." + name.substr(0, 200) + ".rackgate-" + hex::Encode(r);
}

Status ApplyOwnerAndMode(int fd, const Owner& owner, std::optional<mode_t> mode, std::string_view path) {
  // chown first: it clears setuid/setgid bits, which the mode then sets.
  if (owner.uid || owner.gid) {
    if (::fchown(fd, owner.uid ? *owner.uid : static_cast<uid_t>(-1), owner.gid ? *owner.gid : static_cast<gid_t>(-1)) != 0) {
      return Errno("chown " + std::string(path));
    }
  }
  if (mode && ::fchmod(fd, *mode) != 0) return Errno("chmod " + std::string(path));
  return Status::Ok();
}

Result<std::vector<uint8_t>> ReadFd(int fd, size_t max_bytes, std::string_view path) {
  std::vector<uint8_t> out;
  uint8_t buf[16 * 1024];
  for (;;) {
    const ssize_t n = ::read(fd, buf, sizeof(buf));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return Errno("read " + std::string(path));
    if (n == 0) return out;
    if (static_cast<size_t>(n) > max_bytes - out.size()) {
      return Status::InvalidArgument("file_too_large", std::string(path) + " is too large");
    }
    out.insert(out.end(), buf, buf + n);
  }
}

}  // namespace

UniqueFd& UniqueFd::operator=(UniqueFd&& o) noexcept {
  if (this != &o) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = o.fd_;
    o.fd_ = -1;
  }
  return *this;
}

UniqueFd::~UniqueFd() {
  if (fd_ >= 0) ::close(fd_);
}

Result<std::vector<std::string>> SplitCleanPath(std::string_view path) {
  if (path.empty() || path.front() != '/') return PathInvalid(path, "not an absolute path");
  if (path.size() > kMaxPath) return PathInvalid(path, "path too long");
  if (path.find('\0') != std::string_view::npos) return PathInvalid(path, "NUL in path");
  std::vector<std::string> parts;
  size_t at = 1;
  while (at <= path.size()) {
    const size_t end = std::min(path.find('/', at), path.size());
    const std::string_view c = path.substr(at, end - at);
    // SECURITY: ".." is how a path leaves the root; "." and empty components
    // are refused too, so that one file has one spelling.
    if (c.empty() || c == "." || c == "..") return PathInvalid(path, "path is not clean");
    parts.emplace_back(c);
    at = end + 1;
  }
  if (parts.empty()) return PathInvalid(path, "path names the root itself");
  return parts;
}

Result<Root> Root::Open(const std::string& dir) {
  UniqueFd fd(::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (!fd.valid()) return Errno("open root " + dir);
  return Root(std::move(fd));
}

Result<Root::Location> Root::ResolveParent(std::string_view path, bool create) {
  auto parts = SplitCleanPath(path);
  if (!parts.ok()) return parts.status();
  Location loc;
  loc.name = parts->back();
  parts->pop_back();

  std::vector<UniqueFd> stack;  // open directories from the root down
  stack.emplace_back(::dup(fd_.get()));
  if (!stack.back().valid()) return Errno("dup");
  std::deque<std::string> todo(parts->begin(), parts->end());
  int links = 0;
  while (!todo.empty()) {
    std::string c = std::move(todo.front());
    todo.pop_front();
    if (c.empty() || c == ".") continue;
    if (c == "..") {
      // Clamped: ".." at the root stays at the root.
      if (stack.size() > 1) stack.pop_back();
      continue;
    }
    const int parent = stack.back().get();
    UniqueFd next(::openat(parent, c.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
    if (next.valid()) {
      stack.push_back(std::move(next));
      continue;
    }
    const int open_errno = errno;
    struct stat st;
    if (::fstatat(parent, c.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) {
      if (errno == ENOENT && create) {
        if (::mkdirat(parent, c.c_str(), 0755) != 0 && errno != EEXIST) return Errno("mkdir " + c);
        todo.push_front(std::move(c));  // open it (or whatever raced in) next round
        continue;
      }
      errno = open_errno;
      return Errno("resolve " + std::string(path));
    }
    if (S_ISLNK(st.st_mode)) {
      if (++links > kMaxSymlinks) {
        return Status::InvalidArgument("path_symlink_loop", "too many symlinks in " + std::string(path));
      }
      char target[kMaxPath + 1];
      const ssize_t n = ::readlinkat(parent, c.c_str(), target, kMaxPath);
      if (n < 0) return Errno("readlink " + c);
      const std::string_view t(target, static_cast<size_t>(n));
      // The link's components go in front of what is left of the path;
      // an absolute target starts again at the root.
      if (!t.empty() && t.front() == '/') stack.resize(1);
      std::vector<std::string> link_parts;
      size_t at = 0;
      while (at <= t.size()) {
        const size_t end = std::min(t.find('/', at), t.size());
        link_parts.emplace_back(t.substr(at, end - at));
        at = end + 1;
      }
      todo.insert(todo.begin(), link_parts.begin(), link_parts.end());
      continue;
    }
    return Status::InvalidArgument("path_not_directory", c + " in " + std::string(path) + " is not a directory");
  }
  loc.dir = std::move(stack.back());
  return loc;
}

Status Root::WriteFile(std::string_view path, std::span<const uint8_t> data, mode_t mode, const Owner& owner,
                       bool overwrite) {
  auto loc = ResolveParent(path, true);
  if (!loc.ok()) return loc.status();
  const int dir = loc->dir.get();
  const char* name = loc->name.c_str();

  struct stat st;
  if (::fstatat(dir, name, &st, AT_SYMLINK_NOFOLLOW) == 0) {
    if (S_ISDIR(st.st_mode)) return Status::InvalidArgument("path_exists", std::string(path) + " is a directory");
    if (!overwrite) {
      // Idempotence: the same file again (a re-run, or a file the public
      // config already wrote) is fine; different contents are not ours to
      // replace.
      if (!S_ISREG(st.st_mode) || static_cast<size_t>(st.st_size) != data.size()) {
        return Status::InvalidArgument("path_exists", std::string(path) + " exists and overwrite is false");
      }
      UniqueFd f(::openat(dir, name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC));
      if (!f.valid()) return Errno("open " + std::string(path));
      auto existing = ReadFd(f.get(), data.size(), path);
      if (!existing.ok() || !std::equal(existing->begin(), existing->end(), data.begin(), data.end())) {
        return Status::InvalidArgument("path_exists", std::string(path) + " exists and overwrite is false");
      }
      return ApplyOwnerAndMode(f.get(), owner, mode, path);
    }
  } else if (errno != ENOENT) {
    return Errno("stat " + std::string(path));
  }

  const std::string tmp = TempName(loc->name);
  UniqueFd f(::openat(dir, tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600));
  if (!f.valid()) return Errno("create " + std::string(path));
  Status s = WriteAll(f.get(), data, path);
  if (s.ok()) s = ApplyOwnerAndMode(f.get(), owner, mode, path);
  if (s.ok() && ::fsync(f.get()) != 0) s = Errno("fsync " + std::string(path));
  if (s.ok() && ::renameat(dir, tmp.c_str(), dir, name) != 0) s = Errno("rename " + std::string(path));
  if (!s.ok()) {
    (void)::unlinkat(dir, tmp.c_str(), 0);
    return s;
  }
  // The rename is durable only once the directory is.
  if (::fsync(dir) != 0) return Errno("fsync directory of " + std::string(path));
  return Status::Ok();
}

Status Root::MakeDirectory(std::string_view path, mode_t mode, const Owner& owner) {
  auto loc = ResolveParent(path, true);
  if (!loc.ok()) return loc.status();
  if (::mkdirat(loc->dir.get(), loc->name.c_str(), 0700) != 0 && errno != EEXIST) {
    return Errno("mkdir " + std::string(path));
  }
  UniqueFd d(::openat(loc->dir.get(), loc->name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
  if (!d.valid()) {
    if (errno == ENOTDIR || errno == ELOOP) {
      return Status::InvalidArgument("path_exists", std::string(path) + " exists and is not a directory");
    }
    return Errno("open " + std::string(path));
  }
  return ApplyOwnerAndMode(d.get(), owner, mode, path);
}

Status Root::Symlink(std::string_view path, std::string_view target, const Owner& owner, bool overwrite) {
  if (target.empty() || target.size() > kMaxPath || target.find('\0') != std::string_view::npos) {
    return PathInvalid(target, "unusable link target");
  }
  auto loc = ResolveParent(path, true);
  if (!loc.ok()) return loc.status();
  const int dir = loc->dir.get();
  const char* name = loc->name.c_str();
  const std::string t(target);

  struct stat st;
  if (::fstatat(dir, name, &st, AT_SYMLINK_NOFOLLOW) == 0) {
    if (S_ISLNK(st.st_mode)) {
      char buf[kMaxPath + 1];
      const ssize_t n = ::readlinkat(dir, name, buf, kMaxPath);
      if (n >= 0 && std::string_view(buf, static_cast<size_t>(n)) == target) {
        if ((owner.uid || owner.gid) &&
            ::fchownat(dir, name, owner.uid ? *owner.uid : static_cast<uid_t>(-1),
                       owner.gid ? *owner.gid : static_cast<gid_t>(-1), AT_SYMLINK_NOFOLLOW) != 0) {
          return Errno("chown " + std::string(path));
        }
        return Status::Ok();
      }
    }
    if (!overwrite || S_ISDIR(st.st_mode)) {
      return Status::InvalidArgument("path_exists", std::string(path) + " exists and overwrite is false");
    }
  } else if (errno != ENOENT) {
    return Errno("stat " + std::string(path));
  }
  const std::string tmp = TempName(loc->name);
  if (::symlinkat(t.c_str(), dir, tmp.c_str()) != 0) return Errno("symlink " + std::string(path));
  if ((owner.uid || owner.gid) &&
      ::fchownat(dir, tmp.c_str(), owner.uid ? *owner.uid : static_cast<uid_t>(-1),
                 owner.gid ? *owner.gid : static_cast<gid_t>(-1), AT_SYMLINK_NOFOLLOW) != 0) {
    Status s = Errno("chown " + std::string(path));
    (void)::unlinkat(dir, tmp.c_str(), 0);
    return s;
  }
  if (::renameat(dir, tmp.c_str(), dir, name) != 0) {
    Status s = Errno("rename " + std::string(path));
    (void)::unlinkat(dir, tmp.c_str(), 0);
    return s;
  }
  if (::fsync(dir) != 0) return Errno("fsync directory of " + std::string(path));
  return Status::Ok();
}

Status Root::Hardlink(std::string_view path, std::string_view target, bool overwrite) {
  auto from = ResolveParent(target, false);
  if (!from.ok()) return from.status();
  auto loc = ResolveParent(path, true);
  if (!loc.ok()) return loc.status();
  struct stat st;
  if (::fstatat(from->dir.get(), from->name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) {
    return Errno("hard link target " + std::string(target));
  }
  if (!S_ISREG(st.st_mode)) {
    return Status::InvalidArgument("path_invalid", "hard link target is not a regular file");
  }
  struct stat existing;
  const bool exists = ::fstatat(loc->dir.get(), loc->name.c_str(), &existing, AT_SYMLINK_NOFOLLOW) == 0;
  if (exists && existing.st_dev == st.st_dev && existing.st_ino == st.st_ino) return Status::Ok();
  if (exists && (!overwrite || S_ISDIR(existing.st_mode))) {
    return Status::InvalidArgument("path_exists", std::string(path) + " exists and overwrite is false");
  }
  const std::string tmp = TempName(loc->name);
  // flags 0: a symlink target would be linked itself, never followed.
  if (::linkat(from->dir.get(), from->name.c_str(), loc->dir.get(), tmp.c_str(), 0) != 0) {
    return Errno("link " + std::string(path));
  }
  if (::renameat(loc->dir.get(), tmp.c_str(), loc->dir.get(), loc->name.c_str()) != 0) {
    Status s = Errno("rename " + std::string(path));
    (void)::unlinkat(loc->dir.get(), tmp.c_str(), 0);
    return s;
  }
  if (::fsync(loc->dir.get()) != 0) return Errno("fsync directory of " + std::string(path));
  return Status::Ok();
}

Status Root::RemoveSymlink(std::string_view path) {
  auto loc = ResolveParent(path, false);
  if (!loc.ok()) {
    // A missing parent directory means there is no link either.
    return loc.status().code() == Status::Code::kIoError ? Status::Ok() : loc.status();
  }
  struct stat st;
  if (::fstatat(loc->dir.get(), loc->name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) {
    return errno == ENOENT ? Status::Ok() : Errno("stat " + std::string(path));
  }
  if (!S_ISLNK(st.st_mode)) return Status::InvalidArgument("path_exists", std::string(path) + " is not a symlink");
  if (::unlinkat(loc->dir.get(), loc->name.c_str(), 0) != 0) return Errno("unlink " + std::string(path));
  return Status::Ok();
}

namespace {

// kIoError unless files can be made in directory `dir`: a read-only mount
// (ProtectSystem= in a unit, a read-only root) or no write permission.
// `path` is what the caller wanted to write, for the message.
Status CheckWritableDirectory(int dir, std::string_view path) {
  struct statvfs fs;
  if (::fstatvfs(dir, &fs) != 0) return Errno("statvfs for " + std::string(path));
  if ((fs.f_flag & ST_RDONLY) != 0) {
    errno = EROFS;
    return Errno("cannot write " + std::string(path));
  }
  if (::faccessat(dir, ".", W_OK | X_OK, AT_EACCESS) != 0) return Errno("cannot write " + std::string(path));
  return Status::Ok();
}

}  // namespace

Result<std::optional<struct stat>> Root::Probe(std::string_view path) {
  auto parts = SplitCleanPath(path);
  if (!parts.ok()) return parts.status();
  // The deepest existing directory on the way: try the path, then its
  // parent, ... A missing directory is what WriteFile would create there.
  for (size_t depth = parts->size(); depth > 0; --depth) {
    std::string prefix;
    for (size_t i = 0; i < depth; ++i) prefix += "/" + (*parts)[i];
    auto loc = ResolveParent(prefix, false);
    // ResolveParent leaves the failed openat's errno in place (its last
    // call is the Errno() that made the status; closing fds keeps errno).
    const int resolve_errno = errno;
    if (!loc.ok()) {
      if (loc.status().code() == Status::Code::kIoError && resolve_errno == ENOENT) continue;
      return loc.status();
    }
    if (Status s = CheckWritableDirectory(loc->dir.get(), path); !s.ok()) return s;
    if (depth < parts->size()) return std::optional<struct stat>();  // a directory to create
    struct stat st;
    if (::fstatat(loc->dir.get(), loc->name.c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0) return std::optional(st);
    if (errno != ENOENT) return Errno("stat " + std::string(path));
    return std::optional<struct stat>();
  }
  // Nothing below the root exists: the root itself receives it.
  if (Status s = CheckWritableDirectory(fd_.get(), path); !s.ok()) return s;
  return std::optional<struct stat>();
}

Result<std::string> Root::ReadLink(std::string_view path) {
  auto loc = ResolveParent(path, false);
  if (!loc.ok()) {
    if (loc.status().code() == Status::Code::kIoError) return Status::NotFound("path_absent", std::string(path));
    return loc.status();
  }
  char buf[kMaxPath + 1];
  const ssize_t n = ::readlinkat(loc->dir.get(), loc->name.c_str(), buf, kMaxPath);
  if (n < 0) {
    if (errno == ENOENT) return Status::NotFound("path_absent", std::string(path));
    return Errno("readlink " + std::string(path));
  }
  return std::string(buf, static_cast<size_t>(n));
}

Result<std::vector<uint8_t>> Root::ReadFile(std::string_view path, size_t max_bytes) {
  auto loc = ResolveParent(path, false);
  if (!loc.ok()) {
    if (loc.status().code() == Status::Code::kIoError) return Status::NotFound("path_absent", std::string(path));
    return loc.status();
  }
  UniqueFd f(::openat(loc->dir.get(), loc->name.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC));
  if (!f.valid()) {
    if (errno == ENOENT) return Status::NotFound("path_absent", std::string(path));
    return Errno("open " + std::string(path));
  }
  return ReadFd(f.get(), max_bytes, path);
}

}  // namespace rackgate::agent
