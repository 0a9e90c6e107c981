// HTTP over the admin Unix socket with libcurl.
#include "ctl/admin_client.h"

#include <curl/curl.h>
#include <sys/stat.h>

#include <cerrno>
#include <cstring>
#include <memory>

#include "base/transfer.h"

namespace rackgate::ctl {

namespace {

struct SlistFree {
  void operator()(curl_slist* s) const { curl_slist_free_all(s); }
};

// Admin answers are bounded by the daemon; still, refuse runaway bodies.
constexpr size_t kMaxAnswerBytes = 64u << 20;

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
  transfer::EasyHandle curl;
  transfer::BodySink body(kMaxAnswerBytes);
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
  (void)body.Attach(curl.get());
  if (!json_body.empty() || method == "POST" || method == "PUT") {
    curl_easy_setopt(curl.get(), CURLOPT_POSTFIELDS, json_body.c_str());
    curl_easy_setopt(curl.get(), CURLOPT_POSTFIELDSIZE_LARGE, static_cast<curl_off_t>(json_body.size()));
  }
  const transfer::Outcome outcome = transfer::Perform(curl, &body);
  if (outcome.too_large) {
    return Status::IoError("daemon_unreachable",
                           "rackgated's answer is larger than " + std::to_string(kMaxAnswerBytes) + " bytes");
  }
  if (!outcome.ok()) {
    const auto rc = static_cast<CURLcode>(outcome.curl_code);
    return Status::IoError("daemon_unreachable",
                           Unreachable(socket_path_, static_cast<int>(outcome.os_errno), curl_easy_strerror(rc)));
  }
  reply.status = outcome.http_status;
  reply.body = body.TakeBody();
  return reply;
}

}  // namespace rackgate::ctl
