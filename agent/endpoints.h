// The appliances the agent may talk to: the --url values (each a list), every
// address of a DNS name counted as an appliance of its own, at most
// kMaxEndpoints in all. Internal to rackgate-agent.
#ifndef RACKGATE_AGENT_ENDPOINTS_H_
#define RACKGATE_AGENT_ENDPOINTS_H_

#if !defined(RACKGATE_AGENT_INTERNAL)
#error "agent/endpoints.h is internal to rackgate-agent"
#endif

#include <cstddef>
#include <functional>
#include <string>
#include <vector>

#include "base/status.h"

namespace rackgate::agent {

// A rack has two or three appliances; 16 leaves room for a DNS name with
// several addresses per appliance, and bounds one round of attempts.
inline constexpr size_t kMaxEndpoints = 16;

struct Endpoint {
  std::string url;      // "https://host[:port]", no trailing '/'
  std::string host;     // the URL's host (no brackets): TLS name and Host
  int port = 443;
  std::string address;  // an address of `host` to connect to; "" lets libcurl resolve

  // For log lines: the URL, and the address when one is pinned.
  std::string Name() const { return address.empty() ? url : url + " [" + address + "]"; }
};

// Parses --url values, each one URL or several separated by commas and/or
// whitespace (RACKGATE_URL="https://a:22623,https://b:22623"). Each must be
// https://HOST[:PORT] with nothing after it; a repeated URL is dropped.
// kInvalidArgument "url_invalid" for a bad one or none at all, "too_many_urls"
// for more than kMaxEndpoints. The messages name the fix.
Result<std::vector<Endpoint>> ParseApplianceUrls(const std::vector<std::string>& values);

// All addresses of a host name (A and AAAA, in the resolver's order); empty
// when it cannot be resolved now.
using Resolver = std::function<std::vector<std::string>(const std::string& host)>;
std::vector<std::string> ResolveAll(const std::string& host);

// One endpoint per address of each URL whose host is a DNS name (an IP
// literal, or a name that does not resolve now, stays one endpoint that
// libcurl resolves on each attempt). Every URL's first address comes before
// any URL's second. Duplicates dropped; at most kMaxEndpoints, the first ones
// kept (`dropped` counts the rest).
std::vector<Endpoint> ExpandEndpoints(const std::vector<Endpoint>& urls, const Resolver& resolve,
                                      size_t* dropped = nullptr);

}  // namespace rackgate::agent

#endif  // RACKGATE_AGENT_ENDPOINTS_H_
