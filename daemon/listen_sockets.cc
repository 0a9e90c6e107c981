// Binding rackgated's TCP and Unix listening sockets, and naming peers.
#include "daemon/listen_sockets.h"

#include <arpa/inet.h>
#include <grp.h>
#include <netinet/in.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <vector>

#include "base/log.h"
#include "daemon/unique_fd.h"

namespace rackgate::daemon {

namespace {

constexpr int kListenBacklog = 511;

std::shared_ptr<spdlog::logger> Log() {
  static const auto log = Logger("http");
  return log;
}

std::string Errno(int e) { return std::strerror(e); }

}  // namespace

Result<int> BindTcp(const std::string& address, uint16_t port, uint16_t* bound_port) {
  sockaddr_storage ss{};
  socklen_t len = 0;
  auto* v4 = reinterpret_cast<sockaddr_in*>(&ss);
  auto* v6 = reinterpret_cast<sockaddr_in6*>(&ss);
  if (inet_pton(AF_INET, address.c_str(), &v4->sin_addr) == 1) {
    v4->sin_family = AF_INET;
    v4->sin_port = htons(port);
    len = sizeof(sockaddr_in);
  } else if (inet_pton(AF_INET6, address.c_str(), &v6->sin6_addr) == 1) {
    v6->sin6_family = AF_INET6;
    v6->sin6_port = htons(port);
    len = sizeof(sockaddr_in6);
  } else {
    return Status::InvalidArgument("listen_address_invalid",
                                   "not an IPv4 or IPv6 address literal: " + address);
  }
  FdCloser fd(socket(ss.ss_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));
  if (fd.get() < 0) return Status::IoError("listen_failed", "socket: " + Errno(errno));
  const int one = 1;
  setsockopt(fd.get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  if (ss.ss_family == AF_INET6) {
    // An explicit IPv6 address never silently takes IPv4 traffic too.
    setsockopt(fd.get(), IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof one);
  }
  if (bind(fd.get(), reinterpret_cast<sockaddr*>(&ss), len) != 0) {
    return Status::IoError("listen_failed", "bind " + address + " port " + std::to_string(port) +
                                                ": " + Errno(errno));
  }
  if (listen(fd.get(), kListenBacklog) != 0) {
    return Status::IoError("listen_failed", "listen " + address + ": " + Errno(errno));
  }
  sockaddr_storage got{};
  socklen_t got_len = sizeof got;
  if (getsockname(fd.get(), reinterpret_cast<sockaddr*>(&got), &got_len) != 0) {
    return Status::IoError("listen_failed", "getsockname: " + Errno(errno));
  }
  *bound_port = ntohs(got.ss_family == AF_INET ? reinterpret_cast<sockaddr_in*>(&got)->sin_port
                                               : reinterpret_cast<sockaddr_in6*>(&got)->sin6_port);
  return fd.release();
}

std::optional<gid_t> LookupGroup(const std::string& name) {
  if (name.empty()) return std::nullopt;
  std::vector<char> buf(16384);
  group gr{};
  group* found = nullptr;
  while (true) {
    const int rc = getgrnam_r(name.c_str(), &gr, buf.data(), buf.size(), &found);
    if (rc == ERANGE && buf.size() < (1u << 20)) {
      buf.resize(buf.size() * 2);
      continue;
    }
    if (rc != 0 || found == nullptr) return std::nullopt;
    return found->gr_gid;
  }
}

Result<UnixSocket> BindUnix(const std::string& path, std::optional<gid_t> gid) {
  sockaddr_un sa{};
  if (path.empty() || path.size() >= sizeof(sa.sun_path)) {
    return Status::IoError("admin_socket_invalid", "admin socket path too long: " + path);
  }
  sa.sun_family = AF_UNIX;
  std::memcpy(sa.sun_path, path.c_str(), path.size() + 1);

  struct stat st {};
  if (lstat(path.c_str(), &st) == 0) {
    if (!S_ISSOCK(st.st_mode)) {
      return Status::IoError("admin_socket_invalid", path + " exists and is not a socket");
    }
    // A socket file someone still answers on belongs to a running daemon;
    // only a dead one's is removed.
    FdCloser probe(socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
    if (probe.get() >= 0 &&
        connect(probe.get(), reinterpret_cast<sockaddr*>(&sa), sizeof sa) == 0) {
      return Status::IoError("admin_socket_in_use", path + " is in use by another process");
    }
    if (unlink(path.c_str()) != 0 && errno != ENOENT) {
      return Status::IoError("admin_socket_invalid", "remove stale " + path + ": " + Errno(errno));
    }
    Log()->info("removed stale admin socket {}", path);
  }

  FdCloser fd(socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));
  if (fd.get() < 0) return Status::IoError("listen_failed", "socket: " + Errno(errno));
  if (bind(fd.get(), reinterpret_cast<sockaddr*>(&sa), sizeof sa) != 0) {
    return Status::IoError("listen_failed", "bind " + path + ": " + Errno(errno));
  }
  // SECURITY: ownership and mode are set between bind() and listen(): until
  // listen() every connect() is refused, so the socket is never reachable
  // with the umask's mode.
  auto fail = [&](const std::string& what) {
    const int e = errno;
    unlink(path.c_str());
    return Status::IoError("listen_failed", what + " " + path + ": " + Errno(e));
  };
  if (gid.has_value() && chown(path.c_str(), static_cast<uid_t>(-1), *gid) != 0) {
    return fail("chown");
  }
  if (chmod(path.c_str(), 0660) != 0) return fail("chmod");
  if (listen(fd.get(), kListenBacklog) != 0) return fail("listen");
  if (lstat(path.c_str(), &st) != 0) return fail("stat");
  UnixSocket out;
  out.dev = st.st_dev;
  out.ino = st.st_ino;
  out.fd = fd.release();
  return out;
}

std::string FormatPeer(const sockaddr* sa) {
  if (sa == nullptr) return "?";
  char host[INET6_ADDRSTRLEN] = "?";
  if (sa->sa_family == AF_INET) {
    const auto* in = reinterpret_cast<const sockaddr_in*>(sa);
    inet_ntop(AF_INET, &in->sin_addr, host, sizeof host);
    return std::string(host) + ":" + std::to_string(ntohs(in->sin_port));
  }
  if (sa->sa_family == AF_INET6) {
    const auto* in6 = reinterpret_cast<const sockaddr_in6*>(sa);
    inet_ntop(AF_INET6, &in6->sin6_addr, host, sizeof host);
    return "[" + std::string(host) + "]:" + std::to_string(ntohs(in6->sin6_port));
  }
  if (sa->sa_family == AF_UNIX) return "unix";
  return "?";
}

}  // namespace rackgate::daemon
