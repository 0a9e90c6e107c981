// rackgatectl import: an inventory (CSV or JSON) enrolled in one transaction
// (docs/inventory.md).
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "base/files.h"
#include "ctl/admin_commands.h"
#include "ctl/admin_util.h"
#include "ctl/args.h"
#include "ctl/inventory_format.h"
#include "ctl/offline.h"
#include "wire/codec.h"

namespace rackgate::ctl {

namespace {

using nlohmann::json;

constexpr size_t kMaxInventory = 256u << 20;
constexpr size_t kMaxPolicyFile = 1 << 20;

constexpr char kImportHelp[] =
    "Usage: rackgatectl import FILE [--dry-run] [--json]\n"
    "\n"
    "Enrolls every machine of an inventory in one transaction: all or nothing.\n"
    "Each row is the machine's desired state: its addresses (and its vars and\n"
    "policy, when the file has those columns) become the row's. Rows are checked\n"
    "first: a hostname or EK twice in the file is refused (import_duplicate) and\n"
    "every error names the file's line. FILE is CSV or JSON (by extension):\n"
    "  CSV:  a header naming the columns, in any order:\n"
    "          hostname,pool,ek_certificate,addresses[,vars][,policy]\n"
    "        RFC 4180 quoting (\"a,b\", \"\" for a quote); a UTF-8 BOM and CRLF\n"
    "        are accepted. ek_certificate: a file (relative to FILE's folder)\n"
    "        or base64 DER; addresses: KIND=VALUE;KIND=VALUE; vars:\n"
    "        NAME=VALUE;NAME=VALUE; policy: a boot policy file.\n"
    "  JSON: {\"machines\": [{\"hostname\", \"pool\", \"ek_certificate\" (PATH or\n"
    "        base64), \"ek_public\" (PATH, optional), \"addresses\":\n"
    "        [\"KIND=VALUE\", ...], \"vars\": {...}, \"policy\": PATH or {...}}]}\n"
    "Progress is shown on a terminal.\n"
    "\n"
    "Options:\n"
    "  --dry-run   check every row against the appliance and print what would\n"
    "              be done; store nothing\n"
    "  --json      print JSON (the counts and each row's outcome)\n"
    "  --socket PATH  rackgated's admin socket (default /run/rackgate/admin.sock)\n"
    "\n"
    "Exit status: 0 imported (or checked, with --dry-run); 1 refused (reason\n"
    "code on stderr; nothing stored); 2 unusable input or rackgated unreachable.\n";

std::vector<std::string> Split(const std::string& s, char sep) {
  std::vector<std::string> out;
  size_t start = 0;
  for (;;) {
    const size_t at = s.find(sep, start);
    out.push_back(s.substr(start, at == std::string::npos ? std::string::npos : at - start));
    if (at == std::string::npos) return out;
    start = at + 1;
  }
}

std::filesystem::path Resolve(const std::string& value, const std::filesystem::path& base) {
  std::filesystem::path p = value;
  return p.is_relative() ? base / p : p;
}

// A certificate or public-area cell: a file (relative to the inventory) or
// inline base64.
Result<std::string> FileOrBase64(const std::string& value, const char* what, const std::filesystem::path& base) {
  // The non-throwing form: inline base64 of a real certificate is longer
  // than a file name may be (ENAMETOOLONG), which is "not a file".
  std::error_code ec;
  const auto p = Resolve(value, base);
  if (std::filesystem::is_regular_file(p, ec)) return FileBase64(p.string());
  if (wire::Base64Decode(value, kMaxCertFile)) return value;
  return Status::InvalidArgument("row_invalid", std::string(what) + " '" + value.substr(0, 80) +
                                                    "' is neither a file (relative to the inventory's folder) "
                                                    "nor base64");
}

// "NAME=VALUE;NAME=VALUE" as an object; "" is none.
Result<json> VarsCell(const std::string& cell) {
  json vars = json::object();
  if (cell.empty()) return vars;
  for (const auto& item : Split(cell, ';')) {
    if (item.empty()) continue;
    const size_t eq = item.find('=');
    if (eq == std::string::npos || eq == 0) {
      return Status::InvalidArgument("row_invalid", "vars: '" + item + "' is not NAME=VALUE (vars are "
                                                                       "NAME=VALUE;NAME=VALUE)");
    }
    vars[item.substr(0, eq)] = item.substr(eq + 1);
  }
  return vars;
}

// A policy: a file path (relative to the inventory) read as JSON, an object
// as is, "" or null: none (the machine's policy is cleared).
Result<json> PolicyValue(const json& v, const std::filesystem::path& base) {
  if (v.is_null() || (v.is_string() && v.get<std::string>().empty())) return json(nullptr);
  if (v.is_object()) return v;
  if (!v.is_string()) return Status::InvalidArgument("row_invalid", "policy is a file path or an object");
  auto policy = ReadJsonFile(Resolve(v.get<std::string>(), base).string(), kMaxPolicyFile);
  if (!policy.ok()) return Status::InvalidArgument("row_invalid", "policy: " + policy.status().message());
  return *policy;
}

Result<json> AddressList(const std::vector<std::string>& items) {
  json list = json::array();
  for (const auto& a : items) {
    if (a.empty()) continue;
    auto addr = ParseAddress(a);
    if (!addr.ok()) return Status::InvalidArgument("row_invalid", addr.status().message());
    list.push_back(*addr);
  }
  return list;
}


// CSV: the rows as the admin API's import body's machines, each with its
// line. Column order comes from the header.
Result<json> CsvMachines(const std::string& text, const std::filesystem::path& base,
                         const std::function<void(size_t, size_t)>& progress) {
  auto records = ParseCsv(text);
  if (!records.ok()) return records.status();
  if (records->empty()) return Status::InvalidArgument("row_invalid", "the file is empty: it needs a header line");
  static const std::vector<std::string> kKnown = {"hostname", "pool",      "ek_certificate", "ek_public",
                                                  "addresses", "vars",     "policy"};
  const CsvRecord& header = records->front();
  std::map<std::string, size_t> col;
  for (size_t i = 0; i < header.fields.size(); ++i) {
    std::string name = header.fields[i];
    while (!name.empty() && name.back() == ' ') name.pop_back();
    while (!name.empty() && name.front() == ' ') name.erase(0, 1);
    if (std::find(kKnown.begin(), kKnown.end(), name) == kKnown.end()) {
      return Status::InvalidArgument("row_invalid", "line " + std::to_string(header.line) + ": unknown column '" +
                                                        name + "'; the columns are hostname, pool, ek_certificate "
                                                        "(or ek_public), addresses, and optionally vars and policy");
    }
    if (!col.emplace(name, i).second) {
      return Status::InvalidArgument("row_invalid",
                                     "line " + std::to_string(header.line) + ": column '" + name + "' given twice");
    }
  }
  for (const char* required : {"hostname", "pool", "addresses"}) {
    if (!col.count(required)) {
      return Status::InvalidArgument("row_invalid", "line " + std::to_string(header.line) +
                                                        ": the header has no '" + required +
                                                        "' column (it names hostname,pool,ek_certificate,addresses"
                                                        "[,vars][,policy])");
    }
  }
  if (!col.count("ek_certificate") && !col.count("ek_public")) {
    return Status::InvalidArgument("row_invalid", "line " + std::to_string(header.line) +
                                                      ": the header has no 'ek_certificate' column");
  }
  json machines = json::array();
  const size_t total = records->size() - 1;
  for (size_t r = 1; r < records->size(); ++r) {
    const CsvRecord& rec = (*records)[r];
    const auto cell = [&](const char* name) -> std::string {
      auto it = col.find(name);
      return it == col.end() || it->second >= rec.fields.size() ? std::string() : rec.fields[it->second];
    };
    const std::string where = "line " + std::to_string(rec.line);
    const std::string host = cell("hostname");
    const auto bad = [&](const Status& s) {
      return Status::InvalidArgument("row_invalid", where + " (" + host + "): " + s.message());
    };
    if (rec.fields.size() != header.fields.size()) {
      return bad(Status::InvalidArgument("row_invalid",
                                         std::to_string(rec.fields.size()) + " fields, but the header names " +
                                             std::to_string(header.fields.size()) +
                                             " (a value with a comma needs quotes: \"a,b\")"));
    }
    json row = {{"line", rec.line}, {"hostname", host}, {"pool", cell("pool")}};
    for (const char* k : {"ek_certificate", "ek_public"}) {
      if (cell(k).empty()) continue;
      auto v = FileOrBase64(cell(k), k, base);
      if (!v.ok()) return bad(v.status());
      row[k] = *v;
    }
    if (!row.contains("ek_certificate") && !row.contains("ek_public")) {
      return bad(Status::InvalidArgument("row_invalid", "an EK certificate (or EK public area) is required"));
    }
    auto addresses = AddressList(Split(cell("addresses"), ';'));
    if (!addresses.ok()) return bad(addresses.status());
    row["addresses"] = *addresses;
    if (col.count("vars")) {
      auto vars = VarsCell(cell("vars"));
      if (!vars.ok()) return bad(vars.status());
      row["vars"] = *vars;
    }
    if (col.count("policy")) {
      auto policy = PolicyValue(json(cell("policy")), base);
      if (!policy.ok()) return bad(policy.status());
      row["policy"] = *policy;
    }
    machines.push_back(std::move(row));
    progress(r, total);
  }
  return machines;
}

// JSON: {"machines": [...]}; each row carries its index and line.
Result<json> JsonMachines(const std::string& text, const std::filesystem::path& file,
                          const std::function<void(size_t, size_t)>& progress) {
  const std::filesystem::path base = file.parent_path();
  auto parsed = ParseJsonText(text, file.string());  // FILE:LINE:COLUMN: what
  if (!parsed.ok()) return parsed.status();
  const json& doc = *parsed;
  if (!doc.is_object() || !doc.contains("machines") || !doc.at("machines").is_array()) {
    return Status::InvalidArgument("row_invalid", "expected {\"machines\": [...]}");
  }
  const json& list = doc.at("machines");
  std::vector<size_t> lines = JsonRowLines(text);
  if (lines.size() != list.size()) lines.clear();
  json machines = json::array();
  for (size_t i = 0; i < list.size(); ++i) {
    const json& r = list.at(i);
    const std::string where =
        "row " + std::to_string(i) + (lines.empty() ? "" : " (line " + std::to_string(lines[i]) + ")");
    const std::string host = r.is_object() ? Str(r, "hostname", "") : "";
    const auto bad = [&](const Status& s) {
      return Status::InvalidArgument("row_invalid", where + " (" + host + "): " + s.message());
    };
    if (!r.is_object()) return bad(Status::InvalidArgument("row_invalid", "a row is an object"));
    json row = {{"row", i}, {"hostname", host}, {"pool", Str(r, "pool", "")}};
    if (!lines.empty()) row["line"] = lines[i];
    for (const char* k : {"ek_certificate", "ek_public"}) {
      const std::string v = Str(r, k, "");
      if (v.empty()) continue;
      auto b = FileOrBase64(v, k, base);
      if (!b.ok()) return bad(b.status());
      row[k] = *b;
    }
    if (!row.contains("ek_certificate") && !row.contains("ek_public")) {
      return bad(Status::InvalidArgument("row_invalid", "an EK certificate (or EK public area) is required"));
    }
    json addresses = json::array();
    if (r.contains("addresses")) {
      if (!r.at("addresses").is_array()) return bad(Status::InvalidArgument("row_invalid", "addresses is a list"));
      for (const json& a : r.at("addresses")) {
        if (a.is_object()) {
          addresses.push_back(a);
          continue;
        }
        auto parsed = AddressList({a.is_string() ? a.get<std::string>() : a.dump()});
        if (!parsed.ok()) return bad(parsed.status());
        for (const json& p : *parsed) addresses.push_back(p);
      }
    }
    row["addresses"] = addresses;
    if (r.contains("vars")) {
      if (!r.at("vars").is_object()) return bad(Status::InvalidArgument("row_invalid", "vars is an object"));
      row["vars"] = r.at("vars");
    }
    if (r.contains("policy")) {
      auto policy = PolicyValue(r.at("policy"), base);
      if (!policy.ok()) return bad(policy.status());
      row["policy"] = *policy;
    }
    machines.push_back(std::move(row));
    progress(i + 1, list.size());
  }
  return machines;
}

}  // namespace

int RunImport(const std::string& socket, int argc, char** argv, int first) {
  auto args = Args::Parse(argc, argv, first, {{}, {"json", "dry-run"}, 1});
  if (!args.ok()) return UsageError(kImportHelp, args.status().message());
  if (args->Has("help")) return PrintHelp(kImportHelp);
  if (args->positional().size() != 1) return UsageError(kImportHelp, "give one inventory FILE");
  const std::filesystem::path file = args->positional()[0];
  auto data = ReadFile(file.string(), kMaxInventory);
  if (!data.ok()) return UsageError(kImportHelp, data.status().message());
  const std::string text(data->begin(), data->end());
  const bool tty = ::isatty(STDERR_FILENO) == 1;
  const auto progress = [&](size_t done, size_t total) {
    if (tty && (done % 100 == 0 || done == total)) {
      std::fprintf(stderr, "\rimport: read %zu/%zu rows", done, total);
      if (done == total) std::fputc('\n', stderr);
    }
  };
  auto machines = file.extension() == ".json" ? JsonMachines(text, file, progress)
                                              : CsvMachines(text, file.parent_path(), progress);
  if (!machines.ok()) {
    if (tty) std::fputc('\n', stderr);
    // A JSON syntax error names FILE:LINE:COLUMN itself.
    const std::string where = machines.status().reason() == "bad_json" ? "" : file.string() + ": ";
    std::fprintf(stderr, "rackgatectl import: %s%s\n", where.c_str(), machines.status().message().c_str());
    return kExitUnusable;
  }
  const bool dry_run = args->Has("dry-run");
  if (tty) {
    std::fprintf(stderr, "import: sending %zu machines; rackgated checks %s\n", machines->size(),
                 dry_run ? "them and stores nothing (dry run)" : "them and stores them in one transaction");
  }
  int code = kExitOk;
  auto r = Send(socket, "POST", "/v1/admin/import", json{{"machines", *machines}, {"dry_run", dry_run}}, &code);
  if (!r.ok()) return code;
  if (args->Has("json")) return PrintJson(*r), kExitOk;
  if (r->contains("rows") && r->at("rows").is_array()) {
    for (const json& row : r->at("rows")) {
      if (Str(row, "outcome", "") != "updated") continue;
      std::string changes;
      if (row.contains("changes") && row.at("changes").is_array()) {
        for (const json& c : row.at("changes")) changes += (changes.empty() ? "" : "; ") + c.get<std::string>();
      }
      std::printf("%s %s: %s\n", Str(row, "where").c_str(), Str(row, "hostname").c_str(), changes.c_str());
    }
  }
  std::printf("%screated %lld, updated %lld, unchanged %lld\n", dry_run ? "dry run, nothing stored: " : "",
              static_cast<long long>(r->value("created", 0)), static_cast<long long>(r->value("updated", 0)),
              static_cast<long long>(r->value("unchanged", 0)));
  return kExitOk;
}

}  // namespace rackgate::ctl
