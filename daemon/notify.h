// The service manager's side channel (sd_notify(3)): readiness, reloads,
// stopping, a status line, and the watchdog keep-alive.
#ifndef RACKGATE_DAEMON_NOTIFY_H_
#define RACKGATE_DAEMON_NOTIFY_H_

#include <chrono>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <optional>
#include <string>
#include <thread>

namespace rackgate::daemon {

// Every method is a no-op when the process was not started by systemd with
// NOTIFY_SOCKET set (a send error is logged once at debug, never fatal: a
// notification is a courtesy to the manager, not a condition for serving).
// Thread-safe.
class Notifier {
 public:
  // Reads NOTIFY_SOCKET, WATCHDOG_USEC and WATCHDOG_PID from the environment
  // (without unsetting them).
  Notifier();
  // Stops the watchdog thread.
  ~Notifier();
  Notifier(const Notifier&) = delete;
  Notifier& operator=(const Notifier&) = delete;

  bool enabled() const { return enabled_; }

  // READY=1, with an optional STATUS= line. Also what ends a reload.
  void Ready(const std::string& status = "");
  // RELOADING=1 with MONOTONIC_USEC (Type=notify-reload needs both); follow
  // with Ready() when done.
  void Reloading();
  // STOPPING=1.
  void Stopping();
  // STATUS=text (one line: line breaks become spaces).
  void Status(const std::string& text);

  // Half of WatchdogSec= when the manager enabled the watchdog for this
  // process (sd_watchdog_enabled), else nullopt.
  std::optional<std::chrono::microseconds> watchdog_interval() const { return watchdog_interval_; }

  // Starts a thread that sends WATCHDOG=1 every watchdog_interval(), as long
  // as `healthy` (called on that thread; null means always healthy) returns
  // true. A false answer or an exception skips that keep-alive, so a wedged
  // daemon is restarted by the manager. No-op without a watchdog; calling it
  // twice is a bug (ignored).
  void StartWatchdog(std::function<bool()> healthy = nullptr);
  // Stops and joins the watchdog thread; idempotent.
  void StopWatchdog();

 private:
  void Send(const std::string& state);

  bool enabled_ = false;
  std::optional<std::chrono::microseconds> watchdog_interval_;

  std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;
  bool send_failed_logged_ = false;
  std::thread watchdog_;
};

}  // namespace rackgate::daemon

#endif  // RACKGATE_DAEMON_NOTIFY_H_
