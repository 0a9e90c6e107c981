// rackgatectl import: an inventory (CSV or JSON) enrolled in one transaction.
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <sstream>

#include "base/files.h"
#include "daemon/ctl/admin_commands.h"
#include "daemon/ctl/admin_util.h"
#include "daemon/ctl/args.h"
#include "daemon/ctl/offline.h"
#include "wire/codec.h"

namespace rackgate::ctl {

namespace {

using nlohmann::json;

constexpr size_t kMaxInventory = 256u << 20;

constexpr char kImportHelp[] =
    "Usage: rackgatectl import FILE [--json]\n"
    "\n"
    "Enrolls every machine of an inventory in one transaction: all or nothing;\n"
    "the error names the first bad row. FILE is CSV or JSON (by extension):\n"
    "  CSV:  hostname,pool,ek_certificate,addresses   (header line required)\n"
    "        ek_certificate: a file path (relative to FILE's directory) or\n"
    "        base64 DER; addresses: KIND=VALUE;KIND=VALUE\n"
    "  JSON: {\"machines\": [{\"hostname\": ..., \"pool\": ..., \"ek_certificate\":\n"
    "        PATH or base64, \"ek_public\": PATH (optional), \"addresses\":\n"
    "        [\"KIND=VALUE\", ...]}]}\n"
    "Progress is shown on a terminal.\n";


}  // namespace

namespace {

// One inventory row into an enrollment body; `base` resolves relative paths.
Result<json> InventoryRow(const std::string& hostname, const std::string& pool, const std::string& cert,
                          const std::string& ek_public, const std::vector<std::string>& addresses,
                          const std::filesystem::path& base) {
  if (hostname.empty() || pool.empty()) return Status::InvalidArgument("usage", "hostname and pool are required");
  json body = {{"hostname", hostname}, {"pool", pool}, {"addresses", json::array()}};
  auto field = [&](const std::string& value, const char* key) -> Status {
    if (value.empty()) return Status::Ok();
    std::filesystem::path p = value;
    if (p.is_relative()) p = base / p;
    // The non-throwing form: inline base64 of a real certificate is longer
    // than a file name may be (ENAMETOOLONG), which is "not a file".
    std::error_code ec;
    if (std::filesystem::is_regular_file(p, ec)) {
      auto b = FileBase64(p.string());
      if (!b.ok()) return b.status();
      body[key] = *b;
    } else if (wire::Base64Decode(value, kMaxCertFile)) {
      body[key] = value;
    } else {
      return Status::InvalidArgument("usage", std::string(key) + " is neither a file nor base64");
    }
    return Status::Ok();
  };
  if (Status s = field(cert, "ek_certificate"); !s.ok()) return s;
  if (Status s = field(ek_public, "ek_public"); !s.ok()) return s;
  if (!body.contains("ek_certificate") && !body.contains("ek_public")) {
    return Status::InvalidArgument("usage", "an EK certificate or EK public area is required");
  }
  for (const auto& a : addresses) {
    if (a.empty()) continue;
    auto addr = ParseAddress(a);
    if (!addr.ok()) return addr.status();
    body["addresses"].push_back(*addr);
  }
  return body;
}

std::vector<std::string> Split(const std::string& s, char sep) {
  std::vector<std::string> out;
  std::string cur;
  std::istringstream in(s);
  while (std::getline(in, cur, sep)) out.push_back(cur);
  if (!s.empty() && s.back() == sep) out.emplace_back();
  return out;
}

}  // namespace

int RunImport(const std::string& socket, int argc, char** argv, int first) {
  auto args = Args::Parse(argc, argv, first, {{}, {"json"}});
  if (!args.ok()) return UsageError(kImportHelp, args.status().message());
  if (args->Has("help")) return std::fputs(kImportHelp, stdout), kExitOk;
  if (args->positional().size() != 1) return UsageError(kImportHelp, "give one inventory FILE");
  const std::filesystem::path file = args->positional()[0];
  auto data = ReadFile(file.string(), kMaxInventory);
  if (!data.ok()) return UsageError(kImportHelp, data.status().message());
  const std::string text(data->begin(), data->end());
  const auto base = file.parent_path();
  const bool tty = ::isatty(STDERR_FILENO) == 1;
  json machines = json::array();
  auto progress = [&](size_t done, size_t total) {
    if (tty && (done % 50 == 0 || done == total)) std::fprintf(stderr, "\rimport: read %zu/%zu machines", done, total);
  };
  auto bad_row = [&](size_t row, const std::string& host, const Status& s) {
    if (tty) std::fputc('\n', stderr);
    std::fprintf(stderr, "rackgatectl import: row %zu (%s): %s\n", row, host.c_str(), s.message().c_str());
    return kExitUnusable;
  };
  if (file.extension() == ".json") {
    json doc = json::parse(text, nullptr, false);
    if (doc.is_discarded() || !doc.is_object() || !doc.contains("machines") || !doc.at("machines").is_array()) {
      return UsageError(kImportHelp, file.string() + ": expected {\"machines\": [...]}");
    }
    const json& list = doc.at("machines");
    for (size_t i = 0; i < list.size(); ++i) {
      const json& r = list.at(i);
      std::vector<std::string> addrs;
      if (r.is_object() && r.contains("addresses") && r.at("addresses").is_array()) {
        for (const json& a : r.at("addresses")) addrs.push_back(a.is_string() ? a.get<std::string>() : "?");
      }
      auto row = InventoryRow(Str(r, "hostname", ""), Str(r, "pool", ""), Str(r, "ek_certificate", ""),
                              Str(r, "ek_public", ""), addrs, base);
      if (!row.ok()) return bad_row(i + 1, Str(r, "hostname"), row.status());
      machines.push_back(*row);
      progress(i + 1, list.size());
    }
  } else {
    auto lines = Split(text, '\n');
    while (!lines.empty() && lines.back().empty()) lines.pop_back();
    if (lines.empty() || lines[0].rfind("hostname,pool,ek_certificate", 0) != 0) {
      return UsageError(kImportHelp, file.string() + ": the first line must be hostname,pool,ek_certificate,addresses");
    }
    for (size_t i = 1; i < lines.size(); ++i) {
      std::string line = lines[i];
      if (!line.empty() && line.back() == '\r') line.pop_back();
      if (line.empty()) continue;
      auto cols = Split(line, ',');
      if (cols.size() < 3 || cols.size() > 4) {
        return bad_row(i + 1, cols.empty() ? "-" : cols[0],
                       Status::InvalidArgument("usage", "expected 3 or 4 columns"));
      }
      auto row = InventoryRow(cols[0], cols[1], cols[2], "", cols.size() == 4 ? Split(cols[3], ';') : std::vector<std::string>{},
                              base);
      if (!row.ok()) return bad_row(i + 1, cols[0], row.status());
      machines.push_back(*row);
      progress(i, lines.size() - 1);
    }
  }
  if (tty) std::fprintf(stderr, "\nimport: sending %zu machines; the daemon validates and commits them in one transaction\n",
                        machines.size());
  int code = kExitOk;
  auto r = Send(socket, "POST", "/v1/admin/import", json{{"machines", machines}}, &code);
  if (!r.ok()) return code;
  if (args->Has("json")) {
    PrintJson(*r);
  } else {
    std::printf("imported %lld machines\n", static_cast<long long>(r->value("imported", 0)));
  }
  return kExitOk;
}

}  // namespace rackgate::ctl
