// libcurl behind HttpClient.
#include "agent/client.h"

#include <curl/curl.h>
#include <fcntl.h>
#include <unistd.h>

#include <memory>
#include <stdexcept>

#include "base/transfer.h"

namespace rackgate::agent {

namespace {

struct SlistDeleter {
  void operator()(curl_slist* l) const { curl_slist_free_all(l); }
};
using SlistPtr = std::unique_ptr<curl_slist, SlistDeleter>;

}  // namespace

Result<HttpClient> HttpClient::Create(ClientOptions options) {
  const int fd = ::open(options.ca_file.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return Status::IoError("ca_unreadable", "cannot read the appliance CA " + options.ca_file);
  ::close(fd);
  return HttpClient(std::move(options), std::make_shared<transfer::EasyHandle>());
}

Result<HttpResponse> HttpClient::Send(const Endpoint& endpoint, std::string_view path, const std::string* body,
                                      const std::vector<std::string>& headers) const {
  // Every option is set afresh; the reset keeps the handle's live
  // connection and TLS session cache.
  CURL* c = curl_->get();
  curl_easy_reset(c);
  // ... and again on the way out, so that the kept handle points at none of
  // this call's buffers (the error buffer, the sink, the header lists).
  struct Reset {
    CURL* c;
    ~Reset() { curl_easy_reset(c); }
  } reset_on_exit{c};
  const std::string url = endpoint.url + std::string(path);
  transfer::BodySink sink(options_.max_response_bytes);
  // Bounded: a Retry-After is a number or a 29-character date.
  transfer::HeaderSink retry_after("Retry-After", 64);

  transfer::HeaderList list;
  for (const auto& h : headers) list.Add(h);
  if (body != nullptr) list.Add("Content-Type: application/json");
  // Without this curl sends "Expect: 100-continue" for larger bodies and
  // waits a second for an answer that MHD may never send.
  list.Add("Expect:");

  bool ok = true;
  auto set = [&ok](CURLcode rc) { ok = ok && rc == CURLE_OK; };
  set(curl_easy_setopt(c, CURLOPT_URL, url.c_str()));
  set(curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L));
  // HTTPS only, also for any redirect — and redirects are not followed:
  // the API never redirects, and a redirect would carry the bearer token.
  ok = ok && transfer::HttpsOnlyNoRedirects(c);
  // SECURITY: the appliance is trusted through its own CA and nothing else:
  // no system store (CAPATH cleared, CAINFO replaced), peer and host name
  // always verified. There is deliberately no option to turn this off.
  set(curl_easy_setopt(c, CURLOPT_CAINFO, options_.ca_file.c_str()));
  ok = ok && transfer::VerifyPeerAgainstCallersCa(c);
  set(curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT, options_.connect_timeout_seconds));
  set(curl_easy_setopt(c, CURLOPT_TIMEOUT, options_.request_timeout_seconds));
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
  ok = ok && sink.Attach(c) && retry_after.Attach(c);
  if (body != nullptr) {
    set(curl_easy_setopt(c, CURLOPT_POST, 1L));
    set(curl_easy_setopt(c, CURLOPT_POSTFIELDS, body->data()));
    set(curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE_LARGE, static_cast<curl_off_t>(body->size())));
  }
  if (!ok) throw std::runtime_error("curl_easy_setopt failed (libcurl without HTTPS?)");

  const transfer::Outcome outcome = transfer::Perform(*curl_, &sink);
  if (outcome.curl_code == CURLE_PEER_FAILED_VERIFICATION) {
    // The likely cause once it worked: the appliance CA was rotated while
    // this machine missed the overlap (docs/operations.md, "Rotating the
    // appliance CA"), and the way back.
    return Status::IoError("appliance_untrusted",
                           "the appliance's TLS certificate does not verify against " + options_.ca_file + " (" +
                               outcome.error + "); if the appliance CA was rotated while this machine was off, "
                               "put the bundle that `rackgatectl ca bundle --appliance` prints into " +
                               options_.ca_file + " (docs/operations.md, \"Rotating the appliance CA\")");
  }
  if (!outcome.ok()) {
    return transfer::FailureStatus(outcome, options_.max_response_bytes,
                                   {"the appliance", &Status::InvalidArgument, "response_too_large",
                                    "appliance_unreachable", ""});
  }
  HttpResponse out;
  out.status = outcome.http_status;
  out.body = sink.TakeBody();
  out.retry_after = retry_after.TakeValue();
  return out;
}

}  // namespace rackgate::agent
