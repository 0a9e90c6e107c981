// Helpers shared by rackgatectl's admin API commands.
#include "daemon/ctl/admin_util.h"

#include <strings.h>

#include <cstdio>
#include <ctime>

#include "base/files.h"
#include "daemon/ctl/admin_client.h"
#include "daemon/ctl/offline.h"
#include "wire/codec.h"

namespace rackgate::ctl {

using nlohmann::json;

int UsageError(const char* help, const std::string& why) {
  std::fprintf(stderr, "rackgatectl: %s\n\n%s", why.c_str(), help);
  return kExitUnusable;
}

// Sends a request and maps the answer: prints the daemon's reason on a
// refusal. Returns the parsed body on 2xx.
Result<json> Send(const std::string& socket, const std::string& method, const std::string& path,
                  const json& body, int* exit_code) {
  AdminClient client(socket);
  auto reply = client.Call(method, path, body.is_null() ? "" : body.dump());
  if (!reply.ok()) {
    std::fprintf(stderr, "rackgatectl: %s\n", reply.status().message().c_str());
    *exit_code = kExitUnusable;
    return reply.status();
  }
  json doc = json::parse(reply->body, nullptr, false);
  if (reply->status >= 200 && reply->status < 300 && !doc.is_discarded()) return doc;
  std::string reason = "http_" + std::to_string(reply->status), message = reply->body;
  if (!doc.is_discarded() && doc.is_object() && doc.contains("error") && doc.at("error").is_object()) {
    const json& e = doc.at("error");
    if (e.contains("reason") && e.at("reason").is_string()) reason = e.at("reason").get<std::string>();
    if (e.contains("message") && e.at("message").is_string()) message = e.at("message").get<std::string>();
  }
  std::fprintf(stderr, "rackgatectl: refused: %s: %s\n", reason.c_str(), message.c_str());
  *exit_code = reply->status >= 500 ? kExitUnusable : kExitRefused;
  return Status::VerificationFailed(reason, message);
}

std::string Str(const json& o, const char* key, const char* fallback) {
  if (o.is_object() && o.contains(key) && o.at(key).is_string()) return o.at(key).get<std::string>();
  return fallback;
}

std::string FormatTime(const json& o, const char* key) {
  if (!o.is_object() || !o.contains(key) || !o.at(key).is_number_integer()) return "-";
  std::time_t t = o.at(key).get<int64_t>();
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof(buf), "%Y-%m-%d %H:%M:%SZ", &tm);
  return buf;
}

std::string Addresses(const json& m) {
  std::string out;
  if (m.contains("addresses") && m.at("addresses").is_array()) {
    for (const json& a : m.at("addresses")) {
      if (!out.empty()) out += ",";
      out += Str(a, "kind") + "=" + Str(a, "value");
    }
  }
  return out.empty() ? "-" : out;
}

// KIND=VALUE with a Kubernetes NodeAddress kind.
Result<json> ParseAddress(const std::string& text) {
  static const char* kKinds[] = {"InternalIP", "ExternalIP", "InternalDNS", "ExternalDNS", "Hostname"};
  auto eq = text.find('=');
  if (eq == std::string::npos || eq + 1 == text.size()) {
    return Status::InvalidArgument("usage", "--address takes KIND=VALUE, e.g. InternalIP=10.0.0.5");
  }
  std::string kind = text.substr(0, eq);
  for (const char* k : kKinds) {
    if (strcasecmp(k, kind.c_str()) == 0) return json{{"kind", k}, {"value", text.substr(eq + 1)}};
  }
  return Status::InvalidArgument("usage", "address kind '" + kind +
                                              "' is not InternalIP, ExternalIP, InternalDNS, ExternalDNS or Hostname");
}

Result<std::string> FileBase64(const std::string& path) {
  auto b = ReadFile(path, kMaxCertFile);
  if (!b.ok()) return b.status();
  return wire::Base64Encode(*b);
}

Result<json> ReadJsonFile(const std::string& path, size_t max) {
  auto b = ReadFile(path, max);
  if (!b.ok()) return b.status();
  json doc = json::parse(b->begin(), b->end(), nullptr, false);
  if (doc.is_discarded()) return Status::InvalidArgument("bad_json", path + " is not valid JSON");
  return doc;
}

void PrintJson(const json& j) { std::printf("%s\n", j.dump(2).c_str()); }

// "90s", "30m", "2h", "1d", "1h30m" or "0" as seconds; nullopt otherwise.
std::optional<int64_t> ParseDuration(const std::string& text) {
  if (text == "0") return 0;
  int64_t total = 0;
  size_t i = 0;
  if (text.empty()) return std::nullopt;
  while (i < text.size()) {
    size_t j = i;
    while (j < text.size() && std::isdigit(static_cast<unsigned char>(text[j]))) ++j;
    if (j == i || j == text.size() || j - i > 7) return std::nullopt;
    const int64_t n = std::stoll(text.substr(i, j - i));
    switch (text[j]) {
      case 's': total += n; break;
      case 'm': total += n * 60; break;
      case 'h': total += n * 3600; break;
      case 'd': total += n * 86400; break;
      default: return std::nullopt;
    }
    i = j + 1;
  }
  return total;
}

}  // namespace rackgate::ctl
