// The sockets rackgated listens on: TCP for the public port, a Unix socket for the admin API.
#ifndef RACKGATE_DAEMON_LISTEN_SOCKETS_H_
#define RACKGATE_DAEMON_LISTEN_SOCKETS_H_

#include <sys/socket.h>
#include <sys/types.h>

#include <cstdint>
#include <optional>
#include <string>

#include "base/status.h"

namespace rackgate::daemon {

// A listening, non-blocking, close-on-exec TCP socket on the IPv4 or IPv6
// address literal `address` (IPv6 only for an IPv6 address) and `port` (0:
// any); *bound_port is the port it got. The caller owns the descriptor.
// kInvalidArgument ("listen_address_invalid") for anything but an address
// literal; kIoError ("listen_failed") when the socket cannot be made.
Result<int> BindTcp(const std::string& address, uint16_t port, uint16_t* bound_port);

// The id of group `name`; nullopt for an empty or unknown name.
std::optional<gid_t> LookupGroup(const std::string& name);

// A Unix socket and the identity of its file, so that it is only removed at
// stop when it is still ours. The caller owns fd.
struct UnixSocket {
  int fd = -1;
  dev_t dev = 0;
  ino_t ino = 0;
};

// A listening Unix socket at `path`, mode 0660, group `gid` when given. A
// stale socket file (no one answers on it) is replaced; a live one is
// kIoError ("admin_socket_in_use"), anything else at `path` kIoError
// ("admin_socket_invalid"); kInvalidArgument ("admin_socket_invalid") for a
// path too long; kIoError ("listen_failed") when the socket cannot be made.
Result<UnixSocket> BindUnix(const std::string& path, std::optional<gid_t> gid);

// "1.2.3.4:5", "[::1]:5", "unix", or "?" for a peer address.
std::string FormatPeer(const sockaddr* sa);

}  // namespace rackgate::daemon

#endif  // RACKGATE_DAEMON_LISTEN_SOCKETS_H_
