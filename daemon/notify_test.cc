#include "daemon/notify.h"

#include <poll.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstring>
#include <string>
#include <vector>

#include <gtest/gtest.h>

namespace rackgate::daemon {
namespace {

// A stand-in for the service manager's notification socket.
class FakeManager {
 public:
  FakeManager() {
    char dir[] = "/tmp/rackgate-notify-XXXXXX";
    EXPECT_NE(mkdtemp(dir), nullptr);
    dir_ = dir;
    path_ = dir_ + "/notify";
    fd_ = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    sockaddr_un sa{};
    sa.sun_family = AF_UNIX;
    std::strncpy(sa.sun_path, path_.c_str(), sizeof(sa.sun_path) - 1);
    EXPECT_EQ(bind(fd_, reinterpret_cast<sockaddr*>(&sa), sizeof sa), 0);
    setenv("NOTIFY_SOCKET", path_.c_str(), 1);
  }
  ~FakeManager() {
    unsetenv("NOTIFY_SOCKET");
    unsetenv("WATCHDOG_USEC");
    unsetenv("WATCHDOG_PID");
    close(fd_);
    unlink(path_.c_str());
    rmdir(dir_.c_str());
  }

  // The next datagram, or "" after timeout_ms.
  std::string Next(int timeout_ms = 2000) {
    pollfd p{fd_, POLLIN, 0};
    if (poll(&p, 1, timeout_ms) != 1) return "";
    char buf[4096];
    const ssize_t n = recv(fd_, buf, sizeof buf, 0);
    return n > 0 ? std::string(buf, static_cast<size_t>(n)) : "";
  }

 private:
  std::string dir_;
  std::string path_;
  int fd_ = -1;
};

TEST(Notifier, DisabledWithoutSocket) {
  unsetenv("NOTIFY_SOCKET");
  Notifier n;
  EXPECT_FALSE(n.enabled());
  EXPECT_FALSE(n.watchdog_interval().has_value());
  n.Ready("x");  // no-op, no crash
  n.StartWatchdog();
  n.StopWatchdog();
}

TEST(Notifier, ReadyStatusStopping) {
  FakeManager manager;
  Notifier n;
  ASSERT_TRUE(n.enabled());
  n.Ready("serving on 127.0.0.1:22623");
  EXPECT_EQ(manager.Next(), "READY=1\nSTATUS=serving on 127.0.0.1:22623");
  n.Status("two\nlines");
  EXPECT_EQ(manager.Next(), "STATUS=two lines");
  n.Reloading();
  const std::string reloading = manager.Next();
  EXPECT_EQ(reloading.rfind("RELOADING=1\nMONOTONIC_USEC=", 0), 0u) << reloading;
  n.Stopping();
  EXPECT_EQ(manager.Next(), "STOPPING=1");
}

TEST(Notifier, WatchdogAtHalfInterval) {
  FakeManager manager;
  setenv("WATCHDOG_USEC", "200000", 1);
  setenv("WATCHDOG_PID", std::to_string(getpid()).c_str(), 1);
  Notifier n;
  ASSERT_TRUE(n.watchdog_interval().has_value());
  EXPECT_EQ(n.watchdog_interval()->count(), 100000);
  n.StartWatchdog();
  EXPECT_EQ(manager.Next(), "WATCHDOG=1");
  EXPECT_EQ(manager.Next(), "WATCHDOG=1");
  n.StopWatchdog();
  manager.Next(150);  // one may have been in flight
  EXPECT_EQ(manager.Next(300), "");
}

TEST(Notifier, WatchdogWithheldWhenUnhealthy) {
  FakeManager manager;
  setenv("WATCHDOG_USEC", "100000", 1);
  unsetenv("WATCHDOG_PID");
  Notifier n;
  ASSERT_TRUE(n.watchdog_interval().has_value());
  n.StartWatchdog([] { return false; });
  EXPECT_EQ(manager.Next(300), "");
  n.StopWatchdog();
}

TEST(Notifier, WatchdogForAnotherPidIsOff) {
  FakeManager manager;
  setenv("WATCHDOG_USEC", "100000", 1);
  setenv("WATCHDOG_PID", "1", 1);
  Notifier n;
  EXPECT_FALSE(n.watchdog_interval().has_value());
}

}  // namespace
}  // namespace rackgate::daemon
