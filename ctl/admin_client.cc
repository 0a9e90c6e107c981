// HTTP over the admin Unix socket with libcurl.
#include "ctl/admin_client.h"

#include <curl/curl.h>
#include <sys/stat.h>

#include <cerrno>
#include <cstring>
#include <memory>

namespace rackgate::ctl {

namespace {

struct CurlFree {
  void operator()(CURL* c) const { curl_easy_cleanup(c); }
};
struct SlistFree {
  void operator()(curl_slist* s) const { curl_slist_free_all(s); }
};

size_t Append(char* data, size_t size, size_t n, void* out) {
  auto* body = static_cast<std::string*>(out);
  // Admin answers are bounded by the daemon; still, refuse runaway bodies.
  if (body->size() + size * n > (64u << 20)) return 0;
  body->append(data, size * n);
  return size * n;
}

// Why the socket cannot be reached, and what to do about it. `err` is the
// errno of the failed connect (or of stat() on the socket's path).
std::string Unreachable(const std::string& socket, int err, const std::string& detail) {
  switch (err) {
    case ENOENT:
    case ENOTDIR:
      return "rackgated is not running or its admin socket is elsewhere (no " + socket +
             "): check `systemctl status rackgated`, or pass --socket PATH";
    case EACCES:
    case EPERM:
      return "permission denied on " + socket +
             ": add yourself to the rackgate-admin group (`sudo usermod -aG rackgate-admin $USER`, then log in "
             "again) or run as root";
    case ECONNREFUSED:
      return "rackgated is not running (nothing listens on " + socket +
             "): start it with `sudo systemctl start rackgated`, or pass --socket PATH";
    default:
      return "cannot reach rackgated at " + socket + " (" + detail +
             "): check `systemctl status rackgated`, or pass --socket PATH";
  }
}

}  // namespace

Result<AdminReply> AdminClient::Call(const std::string& method, const std::string& path,
                                     const std::string& json_body) const {
  // A missing socket or a directory we may not enter are told apart before
  // curl, whose connect error would only say "couldn't connect".
  struct stat st;
  if (::stat(socket_path_.c_str(), &st) != 0) {
    const int err = errno;
    return Status::IoError("daemon_unreachable", Unreachable(socket_path_, err, std::strerror(err)));
  }
  if (!S_ISSOCK(st.st_mode)) {
    return Status::IoError("daemon_unreachable", socket_path_ +
                                                     " is not a socket: pass --socket with the admin_socket of "
                                                     "/etc/rackgate/rackgated.json (default /run/rackgate/admin.sock)");
  }
  std::unique_ptr<CURL, CurlFree> curl(curl_easy_init());
  if (!curl) return Status::IoError("daemon_unreachable", "cannot initialise libcurl");
  AdminReply reply;
  std::unique_ptr<curl_slist, SlistFree> headers(
      curl_slist_append(nullptr, "Content-Type: application/json"));
  const std::string url = "http://localhost" + path;
  curl_easy_setopt(curl.get(), CURLOPT_UNIX_SOCKET_PATH, socket_path_.c_str());
  curl_easy_setopt(curl.get(), CURLOPT_URL, url.c_str());
  curl_easy_setopt(curl.get(), CURLOPT_CUSTOMREQUEST, method.c_str());
  curl_easy_setopt(curl.get(), CURLOPT_HTTPHEADER, headers.get());
  curl_easy_setopt(curl.get(), CURLOPT_TIMEOUT, timeout_seconds_);
  curl_easy_setopt(curl.get(), CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(curl.get(), CURLOPT_WRITEFUNCTION, Append);
  curl_easy_setopt(curl.get(), CURLOPT_WRITEDATA, &reply.body);
  if (!json_body.empty() || method == "POST" || method == "PUT") {
    curl_easy_setopt(curl.get(), CURLOPT_POSTFIELDS, json_body.c_str());
    curl_easy_setopt(curl.get(), CURLOPT_POSTFIELDSIZE_LARGE, static_cast<curl_off_t>(json_body.size()));
  }
  CURLcode rc = curl_easy_perform(curl.get());
  if (rc != CURLE_OK) {
    long os_errno = 0;
    curl_easy_getinfo(curl.get(), CURLINFO_OS_ERRNO, &os_errno);
    return Status::IoError("daemon_unreachable",
                           Unreachable(socket_path_, static_cast<int>(os_errno), curl_easy_strerror(rc)));
  }
  curl_easy_getinfo(curl.get(), CURLINFO_RESPONSE_CODE, &reply.status);
  return reply;
}

}  // namespace rackgate::ctl
