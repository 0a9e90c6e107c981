// HTTP over the admin Unix socket with libcurl.
#include "daemon/ctl/admin_client.h"

#include <curl/curl.h>

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

}  // namespace

Result<AdminReply> AdminClient::Call(const std::string& method, const std::string& path,
                                     const std::string& json_body) const {
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
    return Status::IoError("daemon_unreachable",
                           "cannot reach rackgated at " + socket_path_ + " (" + curl_easy_strerror(rc) +
                               "); is it running? pass --socket PATH for another socket");
  }
  curl_easy_getinfo(curl.get(), CURLINFO_RESPONSE_CODE, &reply.status);
  return reply;
}

}  // namespace rackgate::ctl
