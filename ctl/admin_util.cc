// Helpers shared by rackgatectl's admin API commands.
#include "ctl/admin_util.h"

#include <strings.h>

#include <algorithm>
#include <cstdio>
#include <ctime>

#include "base/files.h"
#include "base/utc_time.h"
#include "ctl/admin_client.h"
#include "ctl/offline.h"
#include "wire/admin_errors.h"
#include "wire/codec.h"

namespace rackgate::ctl {

using nlohmann::json;

std::string HelpCommand(const char* help) {
  std::string_view h(help);
  constexpr std::string_view kPrefix = "Usage: rackgatectl ";
  if (h.substr(0, kPrefix.size()) != kPrefix) return "";
  h.remove_prefix(kPrefix.size());
  h = h.substr(0, h.find('\n'));
  std::string words;
  while (!h.empty()) {
    const size_t end = std::min(h.find(' '), h.size());
    const std::string_view w = h.substr(0, end);
    const bool word = !w.empty() && std::all_of(w.begin(), w.end(), [](char c) {
      return (c >= 'a' && c <= 'z') || c == '-';
    }) && w[0] != '-';
    if (!word) break;
    words += (words.empty() ? "" : " ") + std::string(w);
    h.remove_prefix(std::min(end + 1, h.size()));
  }
  return words;
}

int UsageError(const char* help, const std::string& why) {
  const std::string cmd = HelpCommand(help);
  std::fprintf(stderr, "rackgatectl: %s\nRun 'rackgatectl %s--help' for usage.\n", why.c_str(),
               cmd.empty() ? "" : (cmd + " ").c_str());
  return kExitUnusable;
}

int PrintHelp(const char* help) {
  std::fputs(help, stdout);
  return kExitOk;
}

// Sends a request and maps the answer: prints the daemon's reason on a
// refusal. Returns the parsed body on 2xx.
Result<json> Send(const std::string& socket, const std::string& method, const std::string& path,
                  const json& body, int* exit_code) {
  return SendText(socket, method, path, body.is_null() ? "" : body.dump(), exit_code);
}

void ReportMalformedAnswer(const Status& s, int* exit_code) {
  std::fprintf(stderr, "rackgatectl: rackgated's answer is malformed: %s\n", s.message().c_str());
  *exit_code = kExitUnusable;
}

Result<json> SendText(const std::string& socket, const std::string& method, const std::string& path,
                      std::string_view body, int* exit_code) {
  AdminClient client(socket);
  auto reply = client.Call(method, path, std::string(body));
  if (!reply.ok()) {
    std::fprintf(stderr, "rackgatectl: %s\n", reply.status().message().c_str());
    *exit_code = kExitUnusable;
    return reply.status();
  }
  json doc = json::parse(reply->body, nullptr, false);
  if (reply->status >= 200 && reply->status < 300 && !doc.is_discarded()) return doc;
  const wire::AdminRefusal refusal =
      wire::DecodeAdminRefusal(reply->body, {"http_" + std::to_string(reply->status), reply->body});
  const std::string& reason = refusal.reason;
  const std::string& message = refusal.message;
  std::fprintf(stderr, "rackgatectl: refused: %s: %s\n", reason.c_str(), message.c_str());
  if (reason == "admin_forbidden") {
    std::fprintf(stderr,
                 "rackgatectl: the admin API answers root and members of the rackgate-admin group: "
                 "`sudo usermod -aG rackgate-admin $USER`, then log in again\n");
  }
  *exit_code = reply->status >= 500 ? kExitUnusable : kExitRefused;
  return Status::VerificationFailed(reason, message);
}

std::string Str(const json& o, const char* key, const char* fallback) {
  if (o.is_object() && o.contains(key) && o.at(key).is_string()) return o.at(key).get<std::string>();
  return fallback;
}

std::string FormatTime(const json& o, const char* key) {
  if (!o.is_object() || !o.contains(key) || !o.at(key).is_number_integer()) return "-";
  return UtcTime(o.at(key).get<int64_t>());
}


std::string Addresses(const std::vector<wire::AddressView>& addresses) {
  std::string out;
  for (const auto& a : addresses) {
    if (!out.empty()) out += ",";
    out += a.kind + "=" + a.value;
  }
  return out.empty() ? "-" : out;
}

// KIND=VALUE with a Kubernetes NodeAddress kind.
Result<wire::AddressView> ParseAddress(const std::string& text) {
  static const char* kKinds[] = {"InternalIP", "ExternalIP", "InternalDNS", "ExternalDNS", "Hostname"};
  auto eq = text.find('=');
  if (eq == std::string::npos || eq + 1 == text.size()) {
    return Status::InvalidArgument("usage", "--address takes KIND=VALUE, e.g. InternalIP=10.0.0.5");
  }
  std::string kind = text.substr(0, eq);
  for (const char* k : kKinds) {
    if (strcasecmp(k, kind.c_str()) == 0) return wire::AddressView{k, text.substr(eq + 1)};
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
  return ParseJsonText(std::string_view(reinterpret_cast<const char*>(b->data()), b->size()), path);
}

Result<json> ParseJsonText(std::string_view text, const std::string& name) {
  try {
    return json::parse(text.begin(), text.end());
  } catch (const json::parse_error& e) {
    // e.byte is the 1-based offset of the byte where parsing stopped.
    const size_t at = std::min<size_t>(e.byte == 0 ? 0 : e.byte - 1, text.size());
    size_t line = 1, column = 1;
    for (size_t i = 0; i < at; ++i) {
      if (text[i] == '\n') {
        ++line;
        column = 1;
      } else {
        ++column;
      }
    }
    // what(): "[json.exception.parse_error.101] parse error at line 1, column 5: WHAT".
    std::string what = e.what();
    if (const size_t col = what.find("column "); col != std::string::npos) {
      if (const size_t colon = what.find(": ", col); colon != std::string::npos) what = what.substr(colon + 2);
    }
    return Status::InvalidArgument("bad_json", name + ":" + std::to_string(line) + ":" + std::to_string(column) +
                                                   ": " + what);
  }
}

bool LooksLikeCertificate(std::string_view b) {
  return b.find("-----BEGIN CERTIFICATE") != std::string_view::npos ||
         (!b.empty() && static_cast<unsigned char>(b[0]) == 0x30);
}

void Table::Print() const {
  std::vector<size_t> width;
  for (const auto& row : rows_) {
    if (width.size() < row.size()) width.resize(row.size(), 0);
    for (size_t i = 0; i < row.size(); ++i) width[i] = std::max(width[i], row[i].size());
  }
  for (const auto& row : rows_) {
    std::string line;
    for (size_t i = 0; i < row.size(); ++i) {
      line += row[i];
      if (i + 1 < row.size()) line += std::string(width[i] - row[i].size() + 2, ' ');
    }
    while (!line.empty() && line.back() == ' ') line.pop_back();
    std::printf("%s\n", line.c_str());
  }
}

void PrintJson(const json& j) { std::printf("%s\n", j.dump(2).c_str()); }

}  // namespace rackgate::ctl
