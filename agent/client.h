// An HTTPS client for the appliance's JSON API, on libcurl: TLS verified
// against the appliance CA only (never the system store, never switched off),
// HTTPS only, no redirects, timeouts, and a bound on the answer's size.
// Internal to rackgate-agent.
#ifndef RACKGATE_AGENT_CLIENT_H_
#define RACKGATE_AGENT_CLIENT_H_

#if !defined(RACKGATE_AGENT_INTERNAL)
#error "agent/client.h is internal to rackgate-agent"
#endif

#include <cstddef>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "agent/endpoints.h"
#include "base/status.h"

namespace rackgate::transfer {
class EasyHandle;
}

namespace rackgate::agent {

// No answer from the appliance may be larger: an Ignition config with its
// files inlined is the largest, and 8 MiB is far above a sensible one.
inline constexpr size_t kMaxResponseBytes = 8u << 20;

struct HttpResponse {
  long status = 0;
  std::string body;
  std::optional<std::string> retry_after;  // the Retry-After header, verbatim
};

struct ClientOptions {
  std::string ca_file;   // PEM: the only CA trusted for the appliance
  long connect_timeout_seconds = 10;
  long request_timeout_seconds = 60;
  size_t max_response_bytes = kMaxResponseBytes;
  std::string user_agent = "rackgate-agent";
};

// One HTTP exchange with one appliance; the agent's failover (failover.h)
// picks the endpoint. Tests replace it with a fake.
class Transport {
 public:
  virtual ~Transport() = default;
  // One request to endpoint.url + path. `headers` are "Name: value" lines.
  // A `json_body` is POSTed as application/json; nullptr is a GET.
  // Success means an HTTP answer of any status arrived in full.
  // kIoError "appliance_unreachable" when there was no complete answer
  // (DNS, connect, TLS verification, timeout); kInvalidArgument
  // "response_too_large" for an answer over the size limit.
  virtual Result<HttpResponse> Send(const Endpoint& endpoint, std::string_view path, const std::string* json_body,
                                    const std::vector<std::string>& headers) const = 0;
};

class HttpClient : public Transport {
 public:
  // Refuses (kIoError "ca_unreadable") a CA file that cannot be read.
  // REQUIRES: curl_global_init ran.
  static Result<HttpClient> Create(ClientOptions options);

  // An endpoint with an address connects there (CURLOPT_CONNECT_TO) while
  // TLS verification and Host still use the URL's host name.
  // The connection is kept between requests (HTTP/1.1 keep-alive): a boot's
  // challenge, evidence, config and CSR to one appliance cost it one TLS
  // handshake, not four. libcurl checks a kept connection before reuse and
  // opens a new one when the appliance closed it.
  // Thread-compatible: one request at a time per client (copies share the
  // connection, and count as one client).
  Result<HttpResponse> Send(const Endpoint& endpoint, std::string_view path, const std::string* json_body,
                            const std::vector<std::string>& headers) const override;

 private:
  HttpClient(ClientOptions options, std::shared_ptr<transfer::EasyHandle> curl)
      : options_(std::move(options)), curl_(std::move(curl)) {}

  ClientOptions options_;
  std::shared_ptr<transfer::EasyHandle> curl_;  // reset before each request
};

}  // namespace rackgate::agent

#endif  // RACKGATE_AGENT_CLIENT_H_
