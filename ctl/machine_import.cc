// rackgatectl import: an inventory (CSV or JSON) enrolled in one transaction
// (docs/inventory.md).
#include "ctl/commands.h"

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
#include "ctl/admin_util.h"
#include "ctl/args.h"
#include "ctl/inventory_format.h"
#include "ctl/json_util.h"
#include "ctl/command_line.h"
#include "wire/admin_machines.h"
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

// "NAME=VALUE;NAME=VALUE" as an object's JSON text; "" is none.
Result<std::string> VarsCell(const std::string& cell) {
  json vars = json::object();
  if (cell.empty()) return vars.dump();
  for (const auto& item : Split(cell, ';')) {
    if (item.empty()) continue;
    const size_t eq = item.find('=');
    if (eq == std::string::npos || eq == 0) {
      return Status::InvalidArgument("row_invalid", "vars: '" + item + "' is not NAME=VALUE (vars are "
                                                                       "NAME=VALUE;NAME=VALUE)");
    }
    vars[item.substr(0, eq)] = item.substr(eq + 1);
  }
  return vars.dump();
}

// A policy: a file path (relative to the inventory) read as JSON, an object
// as is, "" or null: none (the machine's policy is cleared). Its JSON text,
// nullopt for none.
Result<std::optional<std::string>> PolicyValue(const json& v, const std::filesystem::path& base) {
  if (v.is_null() || (v.is_string() && v.get<std::string>().empty())) return std::optional<std::string>();
  if (v.is_object()) return std::optional(v.dump());
  if (!v.is_string()) return Status::InvalidArgument("row_invalid", "policy is a file path or an object");
  auto policy = ReadJsonFile(Resolve(v.get<std::string>(), base).string(), kMaxPolicyFile);
  if (!policy.ok()) return Status::InvalidArgument("row_invalid", "policy: " + policy.status().message());
  return std::optional(policy->dump());
}

Result<std::vector<wire::AddressView>> AddressList(const std::vector<std::string>& items) {
  std::vector<wire::AddressView> list;
  for (const auto& a : items) {
    if (a.empty()) continue;
    auto addr = ParseAddress(a);
    if (!addr.ok()) return Status::InvalidArgument("row_invalid", addr.status().message());
    list.push_back(*addr);
  }
  return list;
}


using Rows = std::vector<wire::ImportRowRequest>;

// A row's EK cells (a file or base64 each); at least one is required.
Status EkCells(const std::string& certificate, const std::string& public_area, const std::filesystem::path& base,
               wire::EnrollRequest* m) {
  if (!certificate.empty()) {
    auto v = FileOrBase64(certificate, "ek_certificate", base);
    if (!v.ok()) return v.status();
    m->ek_certificate_base64 = *v;
  }
  if (!public_area.empty()) {
    auto v = FileOrBase64(public_area, "ek_public", base);
    if (!v.ok()) return v.status();
    m->ek_public_base64 = *v;
  }
  if (!m->ek_certificate_base64 && !m->ek_public_base64) {
    return Status::InvalidArgument("row_invalid", "an EK certificate (or EK public area) is required");
  }
  return Status::Ok();
}

// CSV: the rows of the admin API's import request, each with its line.
// Column order comes from the header.
Result<Rows> CsvMachines(const std::string& text, const std::filesystem::path& base,
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
  Rows machines;
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
    wire::ImportRowRequest row;
    row.line = static_cast<int64_t>(rec.line);
    row.machine.hostname = host;
    row.machine.pool = cell("pool");
    if (Status s = EkCells(cell("ek_certificate"), cell("ek_public"), base, &row.machine); !s.ok()) return bad(s);
    auto addresses = AddressList(Split(cell("addresses"), ';'));
    if (!addresses.ok()) return bad(addresses.status());
    row.machine.addresses = std::move(addresses).value();
    if (col.count("vars")) {
      auto vars = VarsCell(cell("vars"));
      if (!vars.ok()) return bad(vars.status());
      row.machine.vars_given = true;
      row.machine.vars_json = *vars;
    }
    if (col.count("policy")) {
      auto policy = PolicyValue(json(cell("policy")), base);
      if (!policy.ok()) return bad(policy.status());
      row.machine.policy_given = true;
      row.machine.policy_json = *policy;
    }
    machines.push_back(std::move(row));
    progress(r, total);
  }
  return machines;
}

// One row of a JSON inventory (its keys are the inventory file's,
// docs/inventory.md, not the admin API's).
Status JsonRow(const json& r, const std::filesystem::path& base, wire::EnrollRequest* m) {
  const std::string cert = Str(r, "ek_certificate", "");  // admin-path: the inventory file
  const std::string public_area = Str(r, "ek_public", "");  // admin-path: the inventory file
  m->pool = Str(r, "pool", "");  // admin-path: the inventory file
  if (Status s = EkCells(cert, public_area, base, m); !s.ok()) return s;
  m->addresses.emplace();
  const auto field = [&r](const char* key) { return r.contains(key) ? &r.at(key) : nullptr; };
  if (const json* addresses = field("addresses")) {
    if (!addresses->is_array()) return Status::InvalidArgument("row_invalid", "addresses is a list");
    for (const json& a : *addresses) {
      if (a.is_object()) {
        m->addresses->push_back({Str(a, "kind", ""), Str(a, "value", "")});  // admin-path: the inventory file
        continue;
      }
      auto parsed = AddressList({a.is_string() ? a.get<std::string>() : a.dump()});
      if (!parsed.ok()) return parsed.status();
      m->addresses->insert(m->addresses->end(), parsed->begin(), parsed->end());
    }
  }
  if (const json* vars = field("vars")) {
    if (!vars->is_object()) return Status::InvalidArgument("row_invalid", "vars is an object");
    m->vars_given = true;
    m->vars_json = vars->dump();
  }
  if (const json* policy = field("policy")) {
    auto text = PolicyValue(*policy, base);
    if (!text.ok()) return text.status();
    m->policy_given = true;
    m->policy_json = *text;
  }
  return Status::Ok();
}

// JSON: {"machines": [...]}; each row carries its index and line.
Result<Rows> JsonMachines(const std::string& text, const std::filesystem::path& file,
                          const std::function<void(size_t, size_t)>& progress) {
  const std::filesystem::path base = file.parent_path();
  auto parsed = ParseJsonText(text, file.string());  // FILE:LINE:COLUMN: what
  if (!parsed.ok()) return parsed.status();
  const json& doc = *parsed;
  const char* const kList = "machines";  // the inventory file's list
  if (!doc.is_object() || !doc.contains(kList) || !doc.at(kList).is_array()) {
    return Status::InvalidArgument("row_invalid", "expected {\"machines\": [...]}");
  }
  const json& list = doc.at(kList);
  std::vector<size_t> lines = JsonRowLines(text);
  if (lines.size() != list.size()) lines.clear();
  Rows machines;
  for (size_t i = 0; i < list.size(); ++i) {
    const json& r = list.at(i);
    const std::string where =
        "row " + std::to_string(i) + (lines.empty() ? "" : " (line " + std::to_string(lines[i]) + ")");
    const std::string host = r.is_object() ? Str(r, "hostname", "") : "";  // admin-path: the inventory file
    const auto bad = [&](const Status& s) {
      return Status::InvalidArgument("row_invalid", where + " (" + host + "): " + s.message());
    };
    if (!r.is_object()) return bad(Status::InvalidArgument("row_invalid", "a row is an object"));
    wire::ImportRowRequest row;
    row.row = static_cast<int64_t>(i);
    if (!lines.empty()) row.line = static_cast<int64_t>(lines[i]);
    row.machine.hostname = host;
    if (Status s = JsonRow(r, base, &row.machine); !s.ok()) return bad(s);
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
  wire::ImportRequest request;
  request.dry_run = dry_run;
  request.rows = std::move(machines).value();
  const std::string body = wire::EncodeImportRequest(request);
  request.rows.clear();
  request.rows.shrink_to_fit();
  int code = kExitOk;
  auto r = SendText(socket, "POST", "/v1/admin/import", body, &code);
  if (!r.ok()) return code;
  if (args->Has("json")) return PrintAnswer(*r), kExitOk;
  auto report = DecodeAnswer(*r, wire::DecodeImportAnswer, &code);
  if (!report.ok()) return code;
  for (const wire::ImportRowOutcomeView& row : report->rows) {
    if (row.outcome != "updated") continue;
    std::string changes;
    for (const auto& c : row.changes) changes += (changes.empty() ? "" : "; ") + c;
    std::printf("%s %s: %s\n", row.where.c_str(), row.hostname.c_str(), changes.c_str());
  }
  std::printf("%screated %lld, updated %lld, unchanged %lld\n", dry_run ? "dry run, nothing stored: " : "",
              static_cast<long long>(report->created), static_cast<long long>(report->updated),
              static_cast<long long>(report->unchanged));
  return kExitOk;
}

}  // namespace rackgate::ctl
