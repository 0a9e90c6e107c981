// --url parsing and DNS expansion of the appliance list.
#include "agent/endpoints.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <sys/socket.h>

#include <algorithm>
#include <cctype>
#include <memory>
#include <string_view>

namespace rackgate::agent {

namespace {

bool IsIpLiteral(const std::string& host) {
  unsigned char buf[16];
  return inet_pton(AF_INET, host.c_str(), buf) == 1 || inet_pton(AF_INET6, host.c_str(), buf) == 1;
}

bool SameTarget(const Endpoint& a, const Endpoint& b) {
  return a.host == b.host && a.port == b.port && a.address == b.address;
}

}  // namespace

std::vector<std::string> ResolveAll(const std::string& host) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* res = nullptr;
  if (::getaddrinfo(host.c_str(), nullptr, &hints, &res) != 0) return {};
  std::unique_ptr<addrinfo, decltype(&::freeaddrinfo)> owned(res, &::freeaddrinfo);
  std::vector<std::string> out;
  for (const addrinfo* a = res; a != nullptr; a = a->ai_next) {
    char buf[INET6_ADDRSTRLEN] = {0};
    const void* src = nullptr;
    if (a->ai_family == AF_INET) src = &reinterpret_cast<const sockaddr_in*>(a->ai_addr)->sin_addr;
    else if (a->ai_family == AF_INET6) src = &reinterpret_cast<const sockaddr_in6*>(a->ai_addr)->sin6_addr;
    if (src == nullptr || inet_ntop(a->ai_family, src, buf, sizeof(buf)) == nullptr) continue;
    if (std::find(out.begin(), out.end(), buf) == out.end()) out.emplace_back(buf);
  }
  return out;
}

std::vector<Endpoint> ExpandEndpoints(const std::vector<Endpoint>& urls, const Resolver& resolve, size_t* dropped) {
  std::vector<Endpoint> out;
  size_t extra = 0;
  auto add = [&](Endpoint e) {
    if (std::any_of(out.begin(), out.end(), [&](const Endpoint& o) { return SameTarget(o, e); })) return;
    if (out.size() == kMaxEndpoints) {
      ++extra;
      return;
    }
    out.push_back(std::move(e));
  };
  // Every URL's first address before any URL's second: a name with many
  // addresses must not push another appliance out of the list.
  std::vector<std::vector<std::string>> addresses(urls.size());
  for (size_t i = 0; i < urls.size(); ++i) {
    if (!IsIpLiteral(urls[i].host)) addresses[i] = resolve(urls[i].host);
    if (addresses[i].empty()) addresses[i].emplace_back();  // libcurl resolves on each attempt
  }
  for (size_t rank = 0;; ++rank) {
    bool any = false;
    for (size_t i = 0; i < urls.size(); ++i) {
      if (rank >= addresses[i].size()) continue;
      any = true;
      Endpoint e = urls[i];
      e.address = addresses[i][rank];
      add(std::move(e));
    }
    if (!any) break;
  }
  if (dropped != nullptr) *dropped = extra;
  return out;
}

}  // namespace rackgate::agent
