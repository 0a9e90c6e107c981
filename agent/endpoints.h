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
#include "wire/appliance_urls.h"

namespace rackgate::agent {

// The URL list and its parser live in wire/ (rackgatectl checks what it
// prints with the same parser).
using wire::Endpoint;
using wire::kMaxEndpoints;
using wire::ParseApplianceUrls;

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
