// rackgatectl's client for rackgated's admin API: HTTP over the admin Unix
// socket (no TLS; the socket's mode and the daemon's peer-credential check
// are the access control).
#ifndef RACKGATE_DAEMON_CTL_ADMIN_CLIENT_H_
#define RACKGATE_DAEMON_CTL_ADMIN_CLIENT_H_

#include <string>

#include "base/status.h"

namespace rackgate::ctl {

inline constexpr char kDefaultAdminSocket[] = "/run/rackgate/admin.sock";

struct AdminReply {
  long status = 0;
  std::string body;  // JSON
};

class AdminClient {
 public:
  explicit AdminClient(std::string socket_path, long timeout_seconds = 300)
      : socket_path_(std::move(socket_path)), timeout_seconds_(timeout_seconds) {}

  // Sends one request. kIoError ("daemon_unreachable") when the socket cannot
  // be reached (the message says how to start the daemon or pick --socket);
  // any HTTP status is a successful call (the caller maps it).
  Result<AdminReply> Call(const std::string& method, const std::string& path,
                          const std::string& json_body = "") const;

 private:
  std::string socket_path_;
  long timeout_seconds_;
};

}  // namespace rackgate::ctl

#endif  // RACKGATE_DAEMON_CTL_ADMIN_CLIENT_H_
