// sd_notify(3) wrapper: readiness, reload, stopping, status and watchdog.
#include "daemon/notify.h"

#include <systemd/sd-daemon.h>
#include <time.h>

#include <cstdint>
#include <cstdlib>

#include "base/log.h"

namespace rackgate::daemon {

namespace {

std::shared_ptr<spdlog::logger> Log() {
  static const auto log = Logger("notify");
  return log;
}

}  // namespace

Notifier::Notifier() {
  const char* socket = std::getenv("NOTIFY_SOCKET");
  enabled_ = socket != nullptr && socket[0] != '\0';
  uint64_t usec = 0;
  // > 0 only when WATCHDOG_USEC is set and WATCHDOG_PID (if set) is us.
  if (enabled_ && sd_watchdog_enabled(0, &usec) > 0 && usec > 0) {
    watchdog_interval_ = std::chrono::microseconds(usec / 2);
  }
}

Notifier::~Notifier() { StopWatchdog(); }

void Notifier::Send(const std::string& state) {
  if (!enabled_) return;
  const int r = sd_notify(0, state.c_str());
  if (r > 0) return;
  std::lock_guard lock(mu_);
  if (!send_failed_logged_) {
    send_failed_logged_ = true;
    Log()->debug("sd_notify failed ({}); further failures are not logged", r);
  }
}

void Notifier::Ready(const std::string& status) {
  std::string state = "READY=1";
  if (!status.empty()) {
    std::string line = status;
    for (char& c : line) {
      if (c == '\n' || c == '\r') c = ' ';
    }
    state += "\nSTATUS=" + line;
  }
  Send(state);
}

void Notifier::Reloading() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  const uint64_t usec =
      static_cast<uint64_t>(ts.tv_sec) * 1000000u + static_cast<uint64_t>(ts.tv_nsec) / 1000u;
  Send("RELOADING=1\nMONOTONIC_USEC=" + std::to_string(usec));
}

void Notifier::Stopping() { Send("STOPPING=1"); }

void Notifier::Status(const std::string& text) {
  std::string line = text;
  for (char& c : line) {
    if (c == '\n' || c == '\r') c = ' ';
  }
  Send("STATUS=" + line);
}

void Notifier::StartWatchdog(std::function<bool()> healthy) {
  if (!watchdog_interval_.has_value()) return;
  std::lock_guard lock(mu_);
  if (watchdog_.joinable()) return;
  stop_ = false;
  const auto interval = *watchdog_interval_;
  watchdog_ = std::thread([this, interval, healthy = std::move(healthy)] {
    std::unique_lock guard(mu_);
    while (!stop_) {
      guard.unlock();
      bool ok = true;
      if (healthy) {
        try {
          ok = healthy();
        } catch (const std::exception& e) {
          Log()->error("watchdog health check threw: {}", e.what());
          ok = false;
        } catch (...) {
          ok = false;
        }
      }
      if (ok) {
        Send("WATCHDOG=1");
      } else {
        Log()->warn("unhealthy: watchdog keep-alive withheld");
      }
      guard.lock();
      cv_.wait_for(guard, interval, [this] { return stop_; });
    }
  });
}

void Notifier::StopWatchdog() {
  std::thread t;
  {
    std::lock_guard lock(mu_);
    stop_ = true;
    t = std::move(watchdog_);
  }
  cv_.notify_all();
  if (t.joinable()) t.join();
}

}  // namespace rackgate::daemon
