// libcurl behind HttpClient.
#include "agent/client.h"

#include <curl/curl.h>
#include <fcntl.h>
#include <unistd.h>

#include <cctype>
#include <memory>
#include <stdexcept>

namespace rackgate::agent {

namespace {

struct SlistDeleter {
  void operator()(curl_slist* l) const { curl_slist_free_all(l); }
};
using SlistPtr = std::unique_ptr<curl_slist, SlistDeleter>;

struct Sink {
  std::string body;
  size_t max = 0;
  bool too_large = false;
  std::optional<std::string> retry_after;
};

size_t OnBody(char* data, size_t size, size_t nmemb, void* user) {
  auto* sink = static_cast<Sink*>(user);
  const size_t n = size * nmemb;
  // Stop reading as soon as the answer is over the limit: returning less
  // than n makes curl fail the transfer with CURLE_WRITE_ERROR.
  if (n > sink->max - sink->body.size()) {
    sink->too_large = true;
    return 0;
  }
  sink->body.append(data, n);
  return n;
}

size_t OnHeader(char* data, size_t size, size_t nmemb, void* user) {
  auto* sink = static_cast<Sink*>(user);
  const size_t n = size * nmemb;
  std::string_view line(data, n);
  static constexpr std::string_view kName = "retry-after:";
  if (line.size() > kName.size()) {
    bool match = true;
    for (size_t i = 0; i < kName.size() && match; ++i) {
      match = std::tolower(static_cast<unsigned char>(line[i])) == kName[i];
    }
    if (match) {
      std::string_view v = line.substr(kName.size());
      while (!v.empty() && (v.back() == '\r' || v.back() == '\n')) v.remove_suffix(1);
      // Bounded: a Retry-After is a number or a 29-character date.
      if (v.size() <= 64) sink->retry_after = std::string(v);
    }
  }
  // A new status line (a 100 Continue before the answer) starts over.
  if (line.rfind("HTTP/", 0) == 0) sink->retry_after.reset();
  return n;
}

}  // namespace

Result<HttpClient> HttpClient::Create(ClientOptions options) {
  const int fd = ::open(options.ca_file.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return Status::IoError("ca_unreadable", "cannot read the appliance CA " + options.ca_file);
  ::close(fd);
  std::shared_ptr<void> curl(curl_easy_init(), [](void* c) { curl_easy_cleanup(static_cast<CURL*>(c)); });
  if (!curl) throw std::bad_alloc();
  return HttpClient(std::move(options), std::move(curl));
}

Result<HttpResponse> HttpClient::Send(const Endpoint& endpoint, std::string_view path, const std::string* body,
                                      const std::vector<std::string>& headers) const {
  // Every option is set afresh; the reset keeps the handle's live
  // connection and TLS session cache.
  CURL* c = static_cast<CURL*>(curl_.get());
  curl_easy_reset(c);
  // ... and again on the way out, so that the kept handle points at none of
  // this call's buffers (the error buffer, the sink, the header lists).
  struct Reset {
    CURL* c;
    ~Reset() { curl_easy_reset(c); }
  } reset_on_exit{c};
  const std::string url = endpoint.url + std::string(path);
  Sink sink;
  sink.max = options_.max_response_bytes;
  char error[CURL_ERROR_SIZE] = {0};

  SlistPtr list;
  auto add = [&list](const std::string& h) {
    curl_slist* l = curl_slist_append(list.get(), h.c_str());
    if (l == nullptr) throw std::bad_alloc();
    (void)list.release();
    list.reset(l);
  };
  for (const auto& h : headers) add(h);
  if (body != nullptr) add("Content-Type: application/json");
  // Without this curl sends "Expect: 100-continue" for larger bodies and
  // waits a second for an answer that MHD may never send.
  add("Expect:");

  bool ok = true;
  auto set = [&ok](CURLcode rc) { ok = ok && rc == CURLE_OK; };
  set(curl_easy_setopt(c, CURLOPT_URL, url.c_str()));
  set(curl_easy_setopt(c, CURLOPT_ERRORBUFFER, error));
  set(curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L));
  // HTTPS only, also for any redirect — and redirects are not followed:
  // the API never redirects, and a redirect would carry the bearer token.
  set(curl_easy_setopt(c, CURLOPT_PROTOCOLS_STR, "https"));
  set(curl_easy_setopt(c, CURLOPT_REDIR_PROTOCOLS_STR, "https"));
  set(curl_easy_setopt(c, CURLOPT_FOLLOWLOCATION, 0L));
  // SECURITY: the appliance is trusted through its own CA and nothing else:
  // no system store (CAPATH cleared, CAINFO replaced), peer and host name
  // always verified. There is deliberately no option to turn this off.
  set(curl_easy_setopt(c, CURLOPT_CAINFO, options_.ca_file.c_str()));
  set(curl_easy_setopt(c, CURLOPT_CAPATH, nullptr));
  set(curl_easy_setopt(c, CURLOPT_SSL_VERIFYPEER, 1L));
  set(curl_easy_setopt(c, CURLOPT_SSL_VERIFYHOST, 2L));
  set(curl_easy_setopt(c, CURLOPT_SSLVERSION, static_cast<long>(CURL_SSLVERSION_TLSv1_2)));
  set(curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT, options_.connect_timeout_seconds));
  set(curl_easy_setopt(c, CURLOPT_TIMEOUT, options_.request_timeout_seconds));
  set(curl_easy_setopt(c, CURLOPT_MAXFILESIZE_LARGE, static_cast<curl_off_t>(options_.max_response_bytes)));
  set(curl_easy_setopt(c, CURLOPT_USERAGENT, options_.user_agent.c_str()));
  set(curl_easy_setopt(c, CURLOPT_HTTPHEADER, list.get()));
  // One address of a name with several: connect there, verify and say Host
  // as the name (the certificate names the name, not the address).
  SlistPtr connect_to;
  if (!endpoint.address.empty()) {
    const bool v6 = endpoint.address.find(':') != std::string::npos;
    const std::string entry = endpoint.host + ":" + std::to_string(endpoint.port) + ":" +
                              (v6 ? "[" + endpoint.address + "]" : endpoint.address) + ":" +
                              std::to_string(endpoint.port);
    connect_to.reset(curl_slist_append(nullptr, entry.c_str()));
    if (!connect_to) throw std::bad_alloc();
    set(curl_easy_setopt(c, CURLOPT_CONNECT_TO, connect_to.get()));
  }
  set(curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, &OnBody));
  set(curl_easy_setopt(c, CURLOPT_WRITEDATA, &sink));
  set(curl_easy_setopt(c, CURLOPT_HEADERFUNCTION, &OnHeader));
  set(curl_easy_setopt(c, CURLOPT_HEADERDATA, &sink));
  if (body != nullptr) {
    set(curl_easy_setopt(c, CURLOPT_POST, 1L));
    set(curl_easy_setopt(c, CURLOPT_POSTFIELDS, body->data()));
    set(curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE_LARGE, static_cast<curl_off_t>(body->size())));
  }
  if (!ok) throw std::runtime_error("curl_easy_setopt failed (libcurl without HTTPS?)");

  const CURLcode rc = curl_easy_perform(c);
  if (sink.too_large || rc == CURLE_FILESIZE_EXCEEDED) {
    return Status::InvalidArgument("response_too_large",
                                   "the appliance's answer is larger than " +
                                       std::to_string(options_.max_response_bytes) + " bytes");
  }
  if (rc != CURLE_OK) {
    std::string why = error[0] != '\0' ? error : curl_easy_strerror(rc);
    while (!why.empty() && why.back() == '\n') why.pop_back();
    return Status::IoError("appliance_unreachable", why);
  }
  HttpResponse out;
  if (curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &out.status) != CURLE_OK) out.status = 0;
  out.body = std::move(sink.body);
  out.retry_after = std::move(sink.retry_after);
  return out;
}

}  // namespace rackgate::agent
