// Bounded file reads and atomic writes.
#include "base/files.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace rackgate {

namespace {

struct Fd {
  int fd = -1;
  ~Fd() {
    if (fd >= 0) ::close(fd);
  }
};

Status Errno(const char* reason, const std::string& what) {  // reason-helper: IoError
  return Status::IoError(reason, what + ": " + std::strerror(errno));
}

}  // namespace

Result<std::vector<uint8_t>> ReadFile(const std::string& path, size_t max_bytes) {
  Fd f;
  f.fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (f.fd < 0) return Errno("file_unreadable", path);
  struct stat st;
  if (::fstat(f.fd, &st) != 0) return Errno("file_unreadable", path);
  if (S_ISDIR(st.st_mode)) return Status::IoError("file_unreadable", path + ": is a directory");
  // To end of file, never trusting st_size: securityfs reports 0 for
  // binary_bios_measurements, and a file may grow while we read it.
  std::vector<uint8_t> out;
  uint8_t buf[64 * 1024];
  for (;;) {
    ssize_t n = ::read(f.fd, buf, sizeof(buf));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return Errno("file_unreadable", path);
    if (n == 0) break;
    // Stop at the limit instead of growing without bound.
    if (static_cast<size_t>(n) > max_bytes - out.size()) {
      return Status::InvalidArgument("file_too_large", path + ": larger than " +
                                                           std::to_string(max_bytes) + " bytes");
    }
    out.insert(out.end(), buf, buf + n);
  }
  return out;
}

Status WriteFileAtomic(const std::string& path, std::span<const uint8_t> data) {
  std::string tmp = path + ".tmp.XXXXXX";
  Fd f;
  f.fd = ::mkstemp(tmp.data());
  if (f.fd < 0) return Errno("file_unwritable", path);
  size_t done = 0;
  while (done < data.size()) {
    ssize_t n = ::write(f.fd, data.data() + done, data.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      Status s = Errno("file_unwritable", path);
      ::unlink(tmp.c_str());
      return s;
    }
    done += static_cast<size_t>(n);
  }
  if (::fsync(f.fd) != 0 || ::rename(tmp.c_str(), path.c_str()) != 0) {
    Status s = Errno("file_unwritable", path);
    ::unlink(tmp.c_str());
    return s;
  }
  return Status::Ok();
}

}  // namespace rackgate
