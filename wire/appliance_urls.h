// The appliance URLs as the agent reads them (--url, RACKGATE_URL and the
// kernel's rackgate.url=): https://HOST[:PORT], several separated by commas
// and/or whitespace. One parser for the agent and for `rackgatectl pointer
// --kernel-args`, which prints only what the agent will accept (issue 40).
#ifndef RACKGATE_WIRE_APPLIANCE_URLS_H_
#define RACKGATE_WIRE_APPLIANCE_URLS_H_

#include <cstddef>
#include <string>
#include <vector>

#include "base/status.h"

namespace rackgate::wire {

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

}  // namespace rackgate::wire

#endif  // RACKGATE_WIRE_APPLIANCE_URLS_H_
