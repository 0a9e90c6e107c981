// Helpers shared by rackgatectl's admin API commands.
#include "ctl/admin_util.h"

#include <strings.h>

#include <algorithm>
#include <cstdio>
#include <nlohmann/json.hpp>

#include "base/files.h"
#include "ctl/admin_client.h"
#include "ctl/command_line.h"
#include "ctl/json_util.h"
#include "wire/refusal.h"
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

Result<AdminAnswer> Send(const std::string& socket, const std::string& method, const std::string& path,
                         int* exit_code) {
  return SendText(socket, method, path, "", exit_code);
}

void ReportMalformedAnswer(const Status& s, int* exit_code) {
  std::fprintf(stderr, "rackgatectl: rackgated's answer is malformed: %s\n", s.message().c_str());
  *exit_code = kExitUnusable;
}

namespace {

// SendText's exchange: the parsed body on 2xx.
Result<json> Exchange(const std::string& socket, const std::string& method, const std::string& path,
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
  const wire::Refusal refusal =
      wire::DecodeRefusalOr(reply->body, "http_" + std::to_string(reply->status));
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

}  // namespace

Result<AdminAnswer> SendText(const std::string& socket, const std::string& method, const std::string& path,
                             std::string_view body, int* exit_code) {
  auto doc = Exchange(socket, method, path, body, exit_code);
  if (!doc.ok()) return doc.status();
  return AdminAnswer{doc->dump()};
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

void PrintAnswer(const AdminAnswer& answer) { PrintJsonText(answer.json); }

}  // namespace rackgate::ctl
