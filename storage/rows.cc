// Row mappers: typed values to and from the schema's columns, and the
// lookups that every concern shares.
#include "storage/rows.h"
#include "base/hex.h"
#include "storage/validation.h"

#include <string_view>
#include <utility>

namespace rackgate::storage {

std::string Dump(const json& j) { return j.dump(-1, ' ', false, json::error_handler_t::replace); }

namespace {

// A machine's addresses as one text, "kind value" lines (kinds are names and
// values printable ASCII: validation.cc admits no line break in either),
// sorted in C++ (NormalizeAddresses), not by the database's collation.
constexpr char kSqliteAddresses[] =
    "(SELECT group_concat(ad.kind || ' ' || ad.value, char(10)) FROM addresses ad WHERE ad.machine_id = m.id)";
constexpr char kPostgresAddresses[] =
    "(SELECT string_agg(ad.kind || ' ' || ad.value, chr(10)) FROM addresses ad WHERE ad.machine_id = m.id)";

constexpr char kMachineColumns[] =
    "id, hostname, pool, state, ek_public, ek_hash, ek_certificate, tpm_manufacturer, tpm_model, "
    "tpm_version, policy_json, tofu_pcrs_json, created_at, updated_at, last_attested_at, "
    "client_cert_issued_at, vars_json, "
    // Trust (docs/trust.md).
    "trust, trust_reason, trust_changed_at, attest_epoch";

std::string MachineColumnsWith(const char* addresses) {
  return Qualified("m", kMachineColumns) + ", " + addresses;
}

std::vector<Address> ParseAddresses(const std::optional<std::string>& text) {
  std::vector<Address> out;
  if (!text) return out;
  size_t start = 0;
  while (start <= text->size()) {
    size_t end = text->find('\n', start);
    if (end == std::string::npos) end = text->size();
    const std::string_view line(text->data() + start, end - start);
    const size_t space = line.find(' ');
    if (space == std::string_view::npos) Fail(Status::Corruption("db_corrupt", "an address row without a kind"));
    out.push_back({std::string(line.substr(0, space)), std::string(line.substr(space + 1))});
    start = end + 1;
  }
  return NormalizeAddresses(std::move(out));
}

}  // namespace

std::string Qualified(std::string_view alias, std::string_view columns) {
  std::string out;
  size_t start = 0;
  while (start < columns.size()) {
    size_t end = columns.find(',', start);
    if (end == std::string_view::npos) end = columns.size();
    std::string_view name = columns.substr(start, end - start);
    while (!name.empty() && name.front() == ' ') name.remove_prefix(1);
    if (!out.empty()) out += ", ";
    out.append(alias).append(".").append(name);
    start = end + 1;
  }
  return out;
}

const std::string& MachineColumns(Dialect d) {
  static const std::string sqlite = MachineColumnsWith(kSqliteAddresses);
  static const std::string postgres = MachineColumnsWith(kPostgresAddresses);
  return d == Dialect::kPostgres ? postgres : sqlite;
}

const std::string& MachineSelect(const Connection& c) {
  return PerDialect(c, [](Dialect d) { return "SELECT " + MachineColumns(d) + " FROM machines m "; });
}

Machine ReadMachine(const Stmt& s, int first) {
  Machine m;
  m.id = s.Int(first + 0);
  m.hostname = s.Text(first + 1);
  m.pool = s.Text(first + 2);
  const std::string state = s.Text(first + 3);
  const std::optional<MachineState> parsed = ParseMachineState(state);
  // The schema's CHECK admits only the state names; anything else is a file
  // changed behind rackgate's back.
  if (!parsed) {
    Fail(Status::Corruption("db_corrupt", "machine " + std::to_string(m.id) + " has state '" + state + "'"));
  }
  m.state = *parsed;
  m.ek_public = s.Blob(first + 4);
  m.ek_hash = s.Blob(first + 5);
  m.ek_certificate = s.OptBlob(first + 6);
  m.tpm_manufacturer = s.Text(first + 7);
  m.tpm_model = s.Text(first + 8);
  m.tpm_version = s.Text(first + 9);
  m.policy_json = s.OptText(first + 10);
  m.tofu_pcrs_json = s.OptText(first + 11);
  m.created_at = s.Int(first + 12);
  m.updated_at = s.Int(first + 13);
  m.last_attested_at = s.OptInt(first + 14);
  m.client_cert_issued_at = s.OptInt(first + 15);
  m.vars_json = s.Text(first + 16);
  // Trust (docs/trust.md): NULL is "never judged".
  m.trust = s.OptText(first + 17).value_or("");
  m.trust_reason = s.Text(first + 18);
  m.trust_changed_at = s.OptInt(first + 19);
  m.attest_epoch = s.Int(first + 20);
  m.addresses = ParseAddresses(s.OptText(first + 21));
  return m;
}

std::optional<Machine> LoadMachine(Connection& c, const char* where, const std::function<void(Stmt&)>& bind) {
  Stmt s = c.Prepare(MachineSelect(c) + where);
  bind(s);
  if (!s.Step()) return std::nullopt;
  return ReadMachine(s);
}

std::optional<Machine> MachineById(Connection& c, int64_t id) {
  return LoadMachine(c, "WHERE id = ?1", [&](Stmt& s) { s.BindInt(1, id); });
}
std::optional<Machine> MachineByHostname(Connection& c, const std::string& hostname) {
  return LoadMachine(c, "WHERE hostname = ?1", [&](Stmt& s) { s.BindText(1, hostname); });
}
std::optional<Machine> MachineByEkHash(Connection& c, const Bytes& ek_hash) {
  return LoadMachine(c, "WHERE ek_hash = ?1", [&](Stmt& s) { s.BindBlob(1, ek_hash); });
}

Machine MustMachineById(Connection& c, int64_t id) {
  auto m = MachineById(c, id);
  if (!m) Fail(Status::NotFound("machine_unknown", "no machine with id " + std::to_string(id)));
  return std::move(*m);
}
Machine MustMachineByHostname(Connection& c, const std::string& hostname) {
  auto m = MachineByHostname(c, hostname);
  if (!m) Fail(Status::NotFound("hostname_unknown", "no machine is enrolled as '" + hostname + "'"));
  return std::move(*m);
}

void ReplaceAddresses(Connection& c, int64_t machine_id, const std::vector<Address>& addresses) {
  {
    Stmt del = c.Prepare("DELETE FROM addresses WHERE machine_id = ?1");
    del.BindInt(1, machine_id).Run();
  }
  Stmt ins = c.Prepare("INSERT INTO addresses (machine_id, kind, value) VALUES (?1, ?2, ?3)");
  for (const auto& a : addresses) {
    ins.BindInt(1, machine_id).BindText(2, a.kind).BindText(3, a.value).Run();
  }
}

// Open sessions and tokens die with an identity change (reset, new EK).
std::pair<int64_t, int64_t> DropCredentials(Connection& c, int64_t machine_id) {
  int64_t sessions = 0;
  int64_t tokens = 0;
  {
    Stmt s = c.Prepare("DELETE FROM sessions WHERE machine_id = ?1");
    s.BindInt(1, machine_id).Run();
    sessions = c.Changes();
  }
  {
    Stmt s = c.Prepare("DELETE FROM tokens WHERE machine_id = ?1");
    s.BindInt(1, machine_id).Run();
    tokens = c.Changes();
  }
  return {sessions, tokens};
}

Pool ReadPool(const Stmt& s, int first) {
  Pool p;
  p.name = s.Text(first + 0);
  p.settings_json = s.Text(first + 1);
  p.boot_policy_json = s.OptText(first + 2);
  p.created_at = s.Int(first + 3);
  p.updated_at = s.Int(first + 4);
  p.token_required = s.Int(first + 5) != 0;
  p.public_template = s.OptText(first + 6);
  p.attested_template = s.OptText(first + 7);
  p.boot_policy_mode = s.Text(first + 8);
  return p;
}

std::optional<Pool> LoadPool(Connection& c, const std::string& name) {
  Stmt s = c.Prepare(PoolSelect() + "WHERE name = ?1");
  s.BindText(1, name);
  if (!s.Step()) return std::nullopt;
  return ReadPool(s);
}

const std::string& PoolSelect() {
  static const std::string select = "SELECT " + std::string(kPoolColumns) + " FROM pools ";
  return select;
}

Pool MustPool(Connection& c, const std::string& name) {
  auto p = LoadPool(c, name);
  if (!p) Fail(Status::NotFound("pool_unknown", "no pool named '" + name + "'"));
  return std::move(*p);
}

// A stored JSON list of strings (written by this file); anything else reads
// as empty.
std::vector<std::string> StringList(const std::string& json_text) {
  std::vector<std::string> out;
  json list = json::parse(json_text, nullptr, false);
  if (!list.is_array()) return out;
  for (const auto& x : list) {
    if (x.is_string()) out.push_back(x.get<std::string>());
  }
  return out;
}

json DetailObject(const char* what, const std::string& json_text, size_t max_bytes) {
  CheckSize(what, json_text.size(), 2, max_bytes);
  json detail = json::parse(json_text, nullptr, false);
  if (detail.is_discarded() || !detail.is_object()) {
    Fail(Status::InvalidArgument("field_invalid", std::string(what) + " must be a JSON object"));
  }
  return detail;
}

Session ReadSessionRow(const Stmt& s, int first) {
  Session out;
  out.id = s.Text(first + 0);
  out.machine_id = s.Int(first + 1);
  out.nonce = s.Blob(first + 2);
  out.secret_hash = s.Blob(first + 3);
  out.ak_public = s.Blob(first + 4);
  out.ak_name = s.Blob(first + 5);
  out.pcr_selection = s.Text(first + 6);
  out.created_at = s.Int(first + 7);
  out.expires_at = s.Int(first + 8);
  out.used_at = s.OptInt(first + 9);
  return out;
}

AttestationRecord ReadAttestation(const Stmt& s, int first) {
  AttestationRecord r;
  r.id = s.Int(first + 0);
  r.machine_id = s.Int(first + 1);
  r.hostname = s.Text(first + 2);
  r.session_id = s.Text(first + 3);
  r.at = s.Int(first + 4);
  r.verdict = s.Text(first + 5);
  r.reason = s.Text(first + 6);
  r.reasons = StringList(s.Text(first + 7));
  r.pcrs_json = s.Text(first + 8);
  r.reset_count = static_cast<uint32_t>(s.Int(first + 9));
  r.restart_count = static_cast<uint32_t>(s.Int(first + 10));
  r.clock = static_cast<uint64_t>(s.Int(first + 11));
  r.firmware_version = static_cast<uint64_t>(s.Int(first + 12));
  return r;
}

int64_t InsertAttestation(Connection& c, const AttestationRecord& r, std::string_view verdict, int64_t epoch) {
  Stmt s = c.Prepare(
      "INSERT INTO attestations (machine_id, attest_epoch, session_id, at, verdict, reason, reasons_json, "
      "pcrs_json, reset_count, restart_count, clock, firmware_version) "
      "VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12) RETURNING id");
  s.BindInt(1, r.machine_id)
      .BindInt(2, epoch)
      .BindText(3, r.session_id)
      .BindInt(4, r.at)
      .BindText(5, verdict)
      .BindText(6, r.reason)
      .BindText(7, Dump(json(r.reasons)))
      .BindText(8, r.pcrs_json)
      .BindInt(9, r.reset_count)
      .BindInt(10, r.restart_count)
      // uint64 stored bit for bit in SQLite's int64.
      .BindInt(11, static_cast<int64_t>(r.clock))
      .BindInt(12, static_cast<int64_t>(r.firmware_version));
  if (!s.Step()) Fail(Status::IoError("db_error", "INSERT INTO attestations returned no id"));
  return s.Int(0);
}

bool PoolExists(Connection& c, const std::string& name) {
  Stmt s = c.Prepare("SELECT 1 FROM pools WHERE name = ?1");
  s.BindText(1, name);
  return s.Step();
}

IssuedCertificate ReadCertificate(const Stmt& s) {
  IssuedCertificate cert;
  cert.serial = s.Text(0);
  cert.machine_id = s.Int(1);
  cert.hostname = s.Text(2);
  cert.kind = s.Text(3);
  cert.subject = s.Text(4);
  cert.sans = StringList(s.Text(5));
  cert.public_key_sha256 = s.Blob(6);
  cert.tpm_resident = s.Int(7) != 0;
  cert.not_before = s.Int(8);
  cert.not_after = s.Int(9);
  cert.issued_at = s.Int(10);
  cert.certificate_pem = s.Text(11);
  cert.replaced_by = s.OptText(12);
  return cert;
}

std::string MachineIs(const Machine& m) { return "'" + m.hostname + "' is " + std::string(StateName(m.state)); }

}  // namespace rackgate::storage
