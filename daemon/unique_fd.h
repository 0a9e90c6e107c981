// An owned file descriptor, closed when its owner goes out of scope.
#ifndef RACKGATE_DAEMON_UNIQUE_FD_H_
#define RACKGATE_DAEMON_UNIQUE_FD_H_

#include <unistd.h>

#include <utility>

namespace rackgate::daemon {

// Owns `fd` (or nothing, when it is negative) until release().
struct FdCloser {
  explicit FdCloser(int fd) : fd_(fd) {}
  ~FdCloser() {
    if (fd_ >= 0) close(fd_);
  }
  FdCloser(const FdCloser&) = delete;
  FdCloser& operator=(const FdCloser&) = delete;
  int release() { return std::exchange(fd_, -1); }
  int get() const { return fd_; }

 private:
  int fd_;
};

}  // namespace rackgate::daemon

#endif  // RACKGATE_DAEMON_UNIQUE_FD_H_
