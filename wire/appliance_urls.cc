// The appliance URL parser (wire/appliance_urls.h).
#include "wire/appliance_urls.h"

#include <arpa/inet.h>

#include <algorithm>
#include <cctype>
#include <string_view>

#include "base/text.h"

namespace rackgate::wire {

namespace {

Status BadUrl(std::string_view url, const std::string& why) {
  return Status::InvalidArgument("url_invalid", "--url '" + text::PrintableAscii(url, 100) + "': " + why +
                                                    "; expected https://HOST[:PORT], several separated by commas");
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

}  // namespace rackgate::wire
