// --url parsing and DNS expansion of the appliance list.
#include "agent/endpoints.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <sys/socket.h>

#include <algorithm>
#include <cctype>
#include <memory>
#include <string_view>

#include "attest/boot_facts.h"

namespace rackgate::agent {

namespace {

Status BadUrl(std::string_view url, const std::string& why) {
  return Status::InvalidArgument("url_invalid", "--url '" + attest::PrintableAscii(url, 100) + "': " + why +
                                                    "; expected https://HOST[:PORT], several separated by commas");
}

bool IsIpLiteral(const std::string& host) {
  unsigned char buf[16];
  return inet_pton(AF_INET, host.c_str(), buf) == 1 || inet_pton(AF_INET6, host.c_str(), buf) == 1;
}

Result<Endpoint> ParseOne(std::string_view text) {
  static constexpr std::string_view kScheme = "https://";
  std::string_view rest = text;
  while (!rest.empty() && rest.back() == '/') rest.remove_suffix(1);
  if (rest.size() < kScheme.size() || rest.substr(0, kScheme.size()) != kScheme) {
    return BadUrl(text, "not https:// (secrets and tokens never travel in clear)");
  }
  rest.remove_prefix(kScheme.size());
  Endpoint e;
  std::string_view port;
  if (!rest.empty() && rest.front() == '[') {
    const size_t close = rest.find(']');
    if (close == std::string_view::npos) return BadUrl(text, "unclosed [ in the host");
    e.host = std::string(rest.substr(1, close - 1));
    unsigned char buf[16];
    if (inet_pton(AF_INET6, e.host.c_str(), buf) != 1) return BadUrl(text, "not an IPv6 address in [ ]");
    rest.remove_prefix(close + 1);
    if (!rest.empty()) {
      if (rest.front() != ':') return BadUrl(text, "only a port may follow the host");
      port = rest.substr(1);
      if (port.empty()) return BadUrl(text, "empty port");
    }
  } else {
    const size_t colon = rest.find(':');
    e.host = std::string(rest.substr(0, colon));
    if (colon != std::string_view::npos) {
      port = rest.substr(colon + 1);
      if (port.empty()) return BadUrl(text, "empty port");
    }
    // A DNS name or an IPv4 address: no credentials, path, query or fragment,
    // which would be combined silently with the API paths.
    if (e.host.empty() || e.host.size() > 253) return BadUrl(text, "no host, or a host over 253 characters");
    for (char& c : e.host) {
      if (!std::isalnum(static_cast<unsigned char>(c)) && c != '-' && c != '.') {
        return BadUrl(text, "only a host and a port are allowed (no user, path, query or fragment)");
      }
      c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    }
  }
  if (!port.empty()) {
    if (port.size() > 5 || !std::all_of(port.begin(), port.end(), [](char c) { return c >= '0' && c <= '9'; })) {
      return BadUrl(text, "the port is not a number");
    }
    e.port = std::stoi(std::string(port));
    if (e.port < 1 || e.port > 65535) return BadUrl(text, "the port is not in 1-65535");
  }
  const bool v6 = e.host.find(':') != std::string::npos;
  e.url = "https://" + (v6 ? "[" + e.host + "]" : e.host) + (port.empty() ? "" : ":" + std::to_string(e.port));
  return e;
}

bool SameTarget(const Endpoint& a, const Endpoint& b) {
  return a.host == b.host && a.port == b.port && a.address == b.address;
}

}  // namespace

Result<std::vector<Endpoint>> ParseApplianceUrls(const std::vector<std::string>& values) {
  std::vector<Endpoint> out;
  for (const std::string& value : values) {
    size_t at = 0;
    for (;;) {
      while (at < value.size() && (value[at] == ',' || std::isspace(static_cast<unsigned char>(value[at])))) ++at;
      if (at >= value.size()) break;
      size_t end = at;
      while (end < value.size() && value[end] != ',' && !std::isspace(static_cast<unsigned char>(value[end]))) ++end;
      auto e = ParseOne(std::string_view(value).substr(at, end - at));
      if (!e.ok()) return e.status();
      at = end;
      if (std::any_of(out.begin(), out.end(), [&](const Endpoint& o) { return SameTarget(o, *e); })) continue;
      if (out.size() == kMaxEndpoints) {
        return Status::InvalidArgument("too_many_urls", "more than " + std::to_string(kMaxEndpoints) +
                                                            " appliance URLs; list at most " +
                                                            std::to_string(kMaxEndpoints));
      }
      out.push_back(std::move(e).value());
    }
  }
  if (out.empty()) return Status::InvalidArgument("url_invalid", "--url is required: https://HOST[:PORT]");
  return out;
}

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
