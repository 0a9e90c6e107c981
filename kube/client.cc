// libcurl behind kube::Client.
#include "kube/client.h"

#include <curl/curl.h>

#include <algorithm>
#include <ctime>
#include <mutex>
#include <new>
#include <stdexcept>

#include "base/hex.h"
#include "base/transfer.h"
#include "kube/api_status.h"
#include "kube/csr_json.h"
#include "kube/watch_stream.h"

namespace rackgate::kube {

namespace {


// An error answer's body is read only for its message.
constexpr size_t kMaxErrorBodyBytes = 64 * 1024;
// A server that does not end a watch at timeoutSeconds is cut off this much
// later.
constexpr long kWatchGraceSeconds = 60;
constexpr int kMaxListLimit = 500;
constexpr int kMaxWatchSeconds = 3600;

struct Answer {
  long status = 0;
  std::string body;
};

int OnProgress(void* user, curl_off_t, curl_off_t, curl_off_t, curl_off_t) {
  // libcurl calls this at least once a second, also while no byte arrives;
  // non-zero aborts the transfer (CURLE_ABORTED_BY_CALLBACK).
  const auto* stop = static_cast<const std::atomic<bool>*>(user);
  return stop != nullptr && stop->load() ? 1 : 0;
}

void InitCurlOnce() {
  static std::once_flag once;
  std::call_once(once, [] {
    if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK) throw std::runtime_error("curl_global_init failed");
  });
}

transfer::HeaderList Headers(const Credentials& creds, bool json_body) {
  transfer::HeaderList list;
  // JSON, never protobuf: the only form we parse.
  list.Add("Accept: application/json");
  // The token is checked printable without spaces (kubeconfig.cc), so it
  // cannot end the header early.
  if (!creds.bearer_token.empty()) list.Add("Authorization: Bearer " + creds.bearer_token);
  if (json_body) list.Add("Content-Type: application/json");
  list.Add("Expect:");
  return list;
}

// Everything but the body handling and the timeout, for every call.
void SetCommon(CURL* c, const Credentials& creds, const ClientOptions& options, const std::string& url,
               const transfer::HeaderList& headers) {
  bool ok = true;
  auto set = [&ok](CURLcode rc) { ok = ok && rc == CURLE_OK; };
  set(curl_easy_setopt(c, CURLOPT_URL, url.c_str()));
  set(curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L));
  // SECURITY: HTTPS only and no redirects: a redirect would carry the bearer
  // token to wherever the answer points.
  ok = ok && transfer::HttpsOnlyNoRedirects(c);
  // SECURITY: the cluster is trusted through its own CA and nothing else (no
  // system store: CAINFO replaced by the blob, CAPATH cleared); peer and host
  // name always verified, with no option to turn it off. The CA, certificate
  // and key are handed over in memory (copied by libcurl), never written to
  // a file.
  curl_blob ca{const_cast<char*>(creds.ca_pem.data()), creds.ca_pem.size(), CURL_BLOB_COPY};
  set(curl_easy_setopt(c, CURLOPT_CAINFO_BLOB, &ca));
  ok = ok && transfer::VerifyPeerAgainstCallersCa(c);
  if (!creds.client_cert_pem.empty()) {
    curl_blob cert{const_cast<char*>(creds.client_cert_pem.data()), creds.client_cert_pem.size(), CURL_BLOB_COPY};
    curl_blob key{const_cast<char*>(creds.client_key_pem.data()), creds.client_key_pem.size(), CURL_BLOB_COPY};
    set(curl_easy_setopt(c, CURLOPT_SSLCERT_BLOB, &cert));
    set(curl_easy_setopt(c, CURLOPT_SSLCERTTYPE, "PEM"));
    set(curl_easy_setopt(c, CURLOPT_SSLKEY_BLOB, &key));
    set(curl_easy_setopt(c, CURLOPT_SSLKEYTYPE, "PEM"));
  }
  set(curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT, options.connect_timeout_seconds));
  set(curl_easy_setopt(c, CURLOPT_USERAGENT, options.user_agent.c_str()));
  set(curl_easy_setopt(c, CURLOPT_HTTPHEADER, headers.get()));
  if (!ok) throw std::runtime_error("curl_easy_setopt failed (libcurl without HTTPS or blob support?)");
}

constexpr transfer::FailureReasons kFailureReasons{"the API server", &Status::Corruption, "kube_response_too_large",
                                                   "kube_unavailable", "cannot reach the API server: "};

}  // namespace

struct Client::Impl {
  Credentials creds;
  ClientOptions options;

  // One call but a watch: `body` non-null is a `method` (PUT or POST) of JSON.
  Result<Answer> Call(const std::string& path_and_query, const std::string* body, const char* method = "PUT") const;
};

Result<Answer> Client::Impl::Call(const std::string& path_and_query, const std::string* body,
                                  const char* method) const {
  transfer::EasyHandle c;
  transfer::HeaderList headers = Headers(creds, body != nullptr);
  const std::string url = creds.server + path_and_query;
  SetCommon(c.get(), creds, options, url, headers);
  transfer::BodySink sink(options.max_response_bytes);
  bool ok = sink.Attach(c.get());
  auto set = [&ok](CURLcode rc) { ok = ok && rc == CURLE_OK; };
  set(curl_easy_setopt(c.get(), CURLOPT_TIMEOUT, options.request_timeout_seconds));
  if (body != nullptr) {
    set(curl_easy_setopt(c.get(), CURLOPT_CUSTOMREQUEST, method));
    set(curl_easy_setopt(c.get(), CURLOPT_POSTFIELDS, body->data()));
    set(curl_easy_setopt(c.get(), CURLOPT_POSTFIELDSIZE_LARGE, static_cast<curl_off_t>(body->size())));
  }
  if (!ok) throw std::runtime_error("curl_easy_setopt failed");
  const transfer::Outcome outcome = transfer::Perform(c, &sink);
  if (!outcome.ok()) return transfer::FailureStatus(outcome, options.max_response_bytes, kFailureReasons);
  Answer out;
  out.status = outcome.http_status;
  out.body = sink.TakeBody();
  if (out.status < 200 || out.status > 299) {
    return FromHttpAnswer(out.status, std::string_view(out.body).substr(0, kMaxErrorBodyBytes));
  }
  return out;
}

Client::Client(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Client::Client(Client&&) noexcept = default;
Client& Client::operator=(Client&&) noexcept = default;
Client::~Client() = default;

Result<Client> Client::Create(Credentials credentials, ClientOptions options) {
  auto bad = [](std::string_view why) {
    return Status::InvalidArgument("kube_credentials_invalid", std::string(why));
  };
  if (credentials.server.rfind("https://", 0) != 0) return bad("the server is not an https:// URL");
  if (credentials.ca_pem.empty()) return bad("no CA for the server");
  if (credentials.client_cert_pem.empty() != credentials.client_key_pem.empty()) {
    return bad("a client certificate needs its key and a key its certificate");
  }
  if (credentials.bearer_token.empty() && credentials.client_cert_pem.empty()) return bad("no token or certificate");
  for (char ch : credentials.bearer_token) {
    if (static_cast<unsigned char>(ch) <= 0x20 || static_cast<unsigned char>(ch) >= 0x7f) {
      return bad("the token has spaces or control characters");
    }
  }
  InitCurlOnce();
  auto impl = std::make_unique<Impl>();
  impl->creds = std::move(credentials);
  impl->options = std::move(options);
  return Client(std::move(impl));
}

Result<CsrList> Client::ListCsrs(std::string_view continue_token, int limit) {
  limit = std::clamp(limit, 1, kMaxListLimit);
  std::string path = std::string(kCsrPath) + "?limit=" + std::to_string(limit);
  if (!continue_token.empty()) path += "&continue=" + hex::PercentEncode(continue_token);
  Result<Answer> answer = impl_->Call(path, nullptr);
  if (!answer.ok()) return answer.status();
  return ParseCsrListJson(answer->body);
}

Result<Csr> Client::GetCsr(std::string_view name) {
  if (!IsValidCsrName(name)) {
    return Status::InvalidArgument("kube_name_invalid", "a CSR name must be [A-Za-z0-9._-]{1,253}");
  }
  Result<Answer> answer = impl_->Call(std::string(kCsrPath) + "/" + std::string(name), nullptr);
  if (!answer.ok()) return answer.status();
  Result<Csr> csr = ParseCsrJson(answer->body);
  if (!csr.ok()) return csr.status();
  if (csr->name != name) {
    return Status::Corruption("kube_response_invalid", "the API server answered another CSR than the one asked for");
  }
  return csr;
}

Result<Csr> Client::CreateCsr(const CsrRequest& request) {
  const std::string body = CreateCsrBody(request);
  Result<Answer> answer = impl_->Call(std::string(kCsrPath), &body, "POST");
  if (!answer.ok()) return answer.status();
  return ParseCsrJson(answer->body);
}

Status Client::UpdateApproval(const Csr& csr, bool approve, std::string_view reason, std::string_view message) {
  if (!IsValidCsrName(csr.name)) {
    return Status::InvalidArgument("kube_name_invalid", "a CSR name must be [A-Za-z0-9._-]{1,253}");
  }
  if (csr.Approved() || csr.Denied()) {
    return Status::InvalidArgument("kube_already_decided",
                                   "CSR " + csr.name + " is already " + (csr.Approved() ? "approved" : "denied"));
  }
  // SECURITY: the decision is bound to the object it was made for; without
  // its uid and resourceVersion the API server would apply it to whatever
  // carries the name.
  if (csr.uid.empty() || csr.resource_version.empty()) {
    return Status::InvalidArgument("kube_csr_invalid", "CSR " + csr.name + " has no uid or resourceVersion to bind "
                                                       "the decision to");
  }
  const std::string body = ApprovalBody(csr, approve, reason, message, static_cast<int64_t>(std::time(nullptr)));
  Result<Answer> answer = impl_->Call(std::string(kCsrPath) + "/" + csr.name + "/approval", &body);
  if (!answer.ok()) return answer.status();
  Result<Csr> updated = ParseCsrJson(answer->body);
  if (!updated.ok() || updated->uid != csr.uid) {
    return Status::Corruption("kube_response_invalid", "the API server answered the approval of CSR " + csr.name +
                                                           " with another object than the one decided");
  }
  return Status::Ok();
}

Status Client::Watch(std::string_view resource_version, int timeout_seconds, const WatchHandler& on_event,
                     std::atomic<bool>* stop) {
  timeout_seconds = std::clamp(timeout_seconds, 1, kMaxWatchSeconds);
  std::string path = std::string(kCsrPath) + "?watch=1&allowWatchBookmarks=true&timeoutSeconds=" +
                     std::to_string(timeout_seconds);
  if (!resource_version.empty()) path += "&resourceVersion=" + hex::PercentEncode(resource_version);
  transfer::EasyHandle c;
  transfer::HeaderList headers = Headers(impl_->creds, false);
  SetCommon(c.get(), impl_->creds, impl_->options, impl_->creds.server + path, headers);
  WatchStream stream(impl_->options.max_event_bytes, on_event);
  std::string error_body;
  transfer::StreamSink sink([&stream, &error_body](long status, std::string_view chunk) {
    if (status != 200) {
      // An error answer: keep its start for the message, drop the rest.
      error_body.append(chunk.substr(0, kMaxErrorBodyBytes - error_body.size()));
      return true;
    }
    return stream.Feed(chunk);
  });
  bool ok = sink.Attach(c.get());
  auto set = [&ok](CURLcode rc) { ok = ok && rc == CURLE_OK; };
  set(curl_easy_setopt(c.get(), CURLOPT_TIMEOUT, static_cast<long>(timeout_seconds) + kWatchGraceSeconds));
  // A silent watch is normal; a dead peer is found by TCP keepalive.
  set(curl_easy_setopt(c.get(), CURLOPT_TCP_KEEPALIVE, 1L));
  set(curl_easy_setopt(c.get(), CURLOPT_NOPROGRESS, 0L));
  set(curl_easy_setopt(c.get(), CURLOPT_XFERINFOFUNCTION, &OnProgress));
  set(curl_easy_setopt(c.get(), CURLOPT_XFERINFODATA, stop));
  if (!ok) throw std::runtime_error("curl_easy_setopt failed");
  const transfer::Outcome outcome = transfer::Perform(c, nullptr);
  sink.RethrowIfThrown();
  if (stop != nullptr && stop->load()) return Status::Ok();
  const long status = sink.http_status() != 0 ? sink.http_status() : outcome.http_status;
  if (status != 0 && status != 200) return FromHttpAnswer(status, error_body);
  if (!stream.status().ok()) return stream.status();
  if (stream.ended_by_handler()) return Status::Ok();
  if (!outcome.ok()) return transfer::FailureStatus(outcome, 0, kFailureReasons);
  return Status::Ok();
}

}  // namespace rackgate::kube
