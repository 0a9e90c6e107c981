// The enrollment store: typed queries and transactions over the schema.
#include "storage/store.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <condition_variable>
#include <deque>
#include <exception>
#include <functional>
#include <mutex>
#include <optional>
#include <type_traits>
#include <nlohmann/json.hpp>
#include <unordered_map>
#include <utility>

#include "storage/schema.h"
#include "storage/sqlite.h"

namespace rackgate::storage {

namespace {

using nlohmann::json;

// Size limits on what the caller stores. Generous against what a TPM, an EK
// certificate or a policy really needs; they only keep a runaway caller from
// filling the disk.
constexpr size_t kMaxEkPublic = 4096;
constexpr size_t kMaxHash = 64;
constexpr size_t kMaxEkCertificate = 16 * 1024;
constexpr size_t kMaxFact = 256;
constexpr size_t kMaxAddresses = 64;
constexpr size_t kMaxAddressValue = 253;
constexpr size_t kMaxJson = 1024 * 1024;
constexpr size_t kMaxSessionId = 128;
constexpr size_t kMaxTpmBlob = 4096;
constexpr size_t kMaxPcrSelection = 1024;
constexpr size_t kMaxActor = 256;
constexpr size_t kMaxWhy = 4096;
constexpr size_t kMaxReasons = 256;
constexpr size_t kMaxReason = 256;

constexpr std::string_view kStates[] = {kStatePending,     kStateEnrolled, kStateAttested,
                                        kStateProvisioned, kStateJoined,   kStateRevoked};

// The actor of audit rows the protocol writes (the machine proved itself; the
// daemon recorded it).
constexpr char kAttestationActor[] = "attestation";

std::string Dump(const json& j) { return j.dump(-1, ' ', false, json::error_handler_t::replace); }

std::string Hex(const Bytes& b) {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string out;
  out.reserve(b.size() * 2);
  for (uint8_t c : b) {
    out.push_back(kDigits[c >> 4]);
    out.push_back(kDigits[c & 0xf]);
  }
  return out;
}

// --- Validation --------------------------------------------------------------

void CheckSize(const char* field, size_t size, size_t min, size_t max) {
  if (size < min || size > max) {
    Fail(Status::InvalidArgument("field_invalid", std::string(field) + " must be " + std::to_string(min) + ".." +
                                                      std::to_string(max) + " bytes long"));
  }
}

bool IsLowerAlnum(char c) { return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9'); }

// A Kubernetes node name: a lowercase RFC 1123 subdomain. It becomes the CN
// "system:node:<hostname>" of a kubelet certificate, so nothing else may pass.
bool IsValidHostname(std::string_view h) {
  if (h.empty() || h.size() > 253) return false;
  size_t label = 0;
  char prev = '.';
  for (char c : h) {
    if (c == '.') {
      if (label == 0 || prev == '-') return false;
      label = 0;
    } else if (IsLowerAlnum(c) || c == '-') {
      if (label == 0 && c == '-') return false;
      if (++label > 63) return false;
    } else {
      return false;
    }
    prev = c;
  }
  return label > 0 && prev != '-';
}

// Pool names appear in URLs (/config/POOL).
bool IsValidPoolName(std::string_view p) {
  if (p.empty() || p.size() > 63) return false;
  for (char c : p) {
    const bool alnum = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
    if (!alnum && c != '.' && c != '_' && c != '-') return false;
  }
  return p[0] != '.' && p[0] != '_' && p[0] != '-';
}

bool IsPrintableAscii(std::string_view s) {
  return std::all_of(s.begin(), s.end(), [](char c) { return c > 0x20 && c < 0x7f; });
}

void CheckHostname(const std::string& h) {
  if (!IsValidHostname(h)) {
    Fail(Status::InvalidArgument("hostname_invalid", "the hostname must be a lowercase RFC 1123 DNS name"));
  }
}

void CheckPoolName(const std::string& p) {
  if (!IsValidPoolName(p)) {
    Fail(Status::InvalidArgument("pool_invalid", "a pool name is 1..63 of [A-Za-z0-9._-], starting alphanumeric"));
  }
}

void CheckState(const std::string& s) {
  if (!IsValidState(s)) Fail(Status::InvalidArgument("state_invalid", "unknown machine state '" + s + "'"));
}

void CheckActor(const Actor& a) {
  CheckSize("actor name", a.name.size(), 1, kMaxActor);
  CheckSize("actor reason", a.why.size(), 0, kMaxWhy);
}

void CheckOptJson(const char* field, const std::optional<std::string>& j) {
  if (j) CheckSize(field, j->size(), 0, kMaxJson);
}

// Sorted and without duplicates, so that equal sets compare equal.
std::vector<Address> NormalizeAddresses(std::vector<Address> a) {
  std::sort(a.begin(), a.end(),
            [](const Address& x, const Address& y) { return std::tie(x.kind, x.value) < std::tie(y.kind, y.value); });
  a.erase(std::unique(a.begin(), a.end()), a.end());
  return a;
}

void CheckAddresses(const std::vector<Address>& addresses) {
  CheckSize("addresses", addresses.size(), 0, kMaxAddresses);
  for (const auto& a : addresses) {
    if (!IsValidAddressKind(a.kind)) {
      Fail(Status::InvalidArgument("field_invalid", "unknown address kind '" + a.kind + "'"));
    }
    if (a.value.empty() || a.value.size() > kMaxAddressValue || !IsPrintableAscii(a.value)) {
      Fail(Status::InvalidArgument("field_invalid", "an address value is 1..253 printable characters"));
    }
  }
}

void CheckEnrollment(const Enrollment& e) {
  CheckHostname(e.hostname);
  CheckPoolName(e.pool);
  if (e.state != kStateEnrolled && e.state != kStatePending) {
    Fail(Status::InvalidArgument("state_invalid", "a machine is enrolled as enrolled or pending"));
  }
  // An EK public area, an EK certificate, or both: the identity (ek_hash)
  // is the same key either way.
  CheckSize("ek_public", e.ek_public.size(), e.ek_certificate ? 0 : 1, kMaxEkPublic);
  CheckSize("ek_hash", e.ek_hash.size(), 1, kMaxHash);
  if (e.ek_certificate) CheckSize("ek_certificate", e.ek_certificate->size(), 1, kMaxEkCertificate);
  CheckSize("tpm_manufacturer", e.tpm_manufacturer.size(), 0, kMaxFact);
  CheckSize("tpm_model", e.tpm_model.size(), 0, kMaxFact);
  CheckSize("tpm_version", e.tpm_version.size(), 0, kMaxFact);
  CheckAddresses(e.addresses);
  CheckOptJson("policy_json", e.policy_json);
  CheckSize("vars_json", e.vars_json.size(), 2, kMaxJson);
}

void CheckRecord(const AttestationRecord& r) {
  CheckSize("session_id", r.session_id.size(), 0, kMaxSessionId);
  CheckSize("reason", r.reason.size(), 0, kMaxReason);
  CheckSize("reasons", r.reasons.size(), 0, kMaxReasons);
  for (const auto& x : r.reasons) CheckSize("reasons[]", x.size(), 0, kMaxReason);
  CheckSize("pcrs_json", r.pcrs_json.size(), 0, kMaxJson);
}

// --- Rows --------------------------------------------------------------------

constexpr char kMachineSelect[] =
    "SELECT id, hostname, pool, state, ek_public, ek_hash, ek_certificate, tpm_manufacturer, tpm_model, "
    "tpm_version, policy_json, tofu_pcrs_json, created_at, updated_at, last_attested_at, client_cert_issued_at, "
    "vars_json FROM machines ";

Machine ReadMachine(const Stmt& s) {
  Machine m;
  m.id = s.Int(0);
  m.hostname = s.Text(1);
  m.pool = s.Text(2);
  m.state = s.Text(3);
  m.ek_public = s.Blob(4);
  m.ek_hash = s.Blob(5);
  m.ek_certificate = s.OptBlob(6);
  m.tpm_manufacturer = s.Text(7);
  m.tpm_model = s.Text(8);
  m.tpm_version = s.Text(9);
  m.policy_json = s.OptText(10);
  m.tofu_pcrs_json = s.OptText(11);
  m.created_at = s.Int(12);
  m.updated_at = s.Int(13);
  m.last_attested_at = s.OptInt(14);
  m.client_cert_issued_at = s.OptInt(15);
  m.vars_json = s.Text(16);
  return m;
}

std::vector<Address> LoadAddresses(Connection& c, int64_t machine_id) {
  Stmt s = c.Prepare("SELECT kind, value FROM addresses WHERE machine_id = ?1 ORDER BY kind, value");
  s.BindInt(1, machine_id);
  std::vector<Address> out;
  while (s.Step()) out.push_back({s.Text(0), s.Text(1)});
  return out;
}

std::optional<Machine> LoadMachine(Connection& c, const char* where, const std::function<void(Stmt&)>& bind) {
  std::optional<Machine> m;
  {
    Stmt s = c.Prepare(std::string(kMachineSelect) + where);
    bind(s);
    if (!s.Step()) return std::nullopt;
    m = ReadMachine(s);
  }
  m->addresses = LoadAddresses(c, m->id);
  return m;
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

int64_t Epoch(Connection& c, int64_t machine_id) {
  Stmt s = c.Prepare("SELECT attest_epoch FROM machines WHERE id = ?1");
  s.BindInt(1, machine_id);
  if (!s.Step()) Fail(Status::NotFound("machine_unknown", "no machine with id " + std::to_string(machine_id)));
  return s.Int(0);
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

Pool ReadPool(const Stmt& s) {
  Pool p;
  p.name = s.Text(0);
  p.settings_json = s.Text(1);
  p.boot_policy_json = s.OptText(2);
  p.created_at = s.Int(3);
  p.updated_at = s.Int(4);
  p.token_required = s.Int(5) != 0;
  p.public_template = s.OptText(6);
  p.attested_template = s.OptText(7);
  return p;
}

constexpr char kPoolSelect[] =
    "SELECT name, settings_json, boot_policy_json, created_at, updated_at, token_required, public_template, "
    "attested_template FROM pools ";

std::optional<Pool> LoadPool(Connection& c, const std::string& name) {
  Stmt s = c.Prepare(std::string(kPoolSelect) + "WHERE name = ?1");
  s.BindText(1, name);
  if (!s.Step()) return std::nullopt;
  return ReadPool(s);
}

constexpr char kAttestationSelect[] =
    "SELECT a.id, a.machine_id, m.hostname, a.session_id, a.at, a.verdict, a.reason, a.reasons_json, "
    "a.pcrs_json, a.reset_count, a.restart_count, a.clock, a.firmware_version "
    "FROM attestations a JOIN machines m ON m.id = a.machine_id ";

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

AttestationRecord ReadAttestation(const Stmt& s) {
  AttestationRecord r;
  r.id = s.Int(0);
  r.machine_id = s.Int(1);
  r.hostname = s.Text(2);
  r.session_id = s.Text(3);
  r.at = s.Int(4);
  r.verdict = s.Text(5);
  r.reason = s.Text(6);
  r.reasons = StringList(s.Text(7));
  r.pcrs_json = s.Text(8);
  r.reset_count = static_cast<uint32_t>(s.Int(9));
  r.restart_count = static_cast<uint32_t>(s.Int(10));
  r.clock = static_cast<uint64_t>(s.Int(11));
  r.firmware_version = static_cast<uint64_t>(s.Int(12));
  return r;
}

int64_t InsertAttestation(Connection& c, const AttestationRecord& r, std::string_view verdict, int64_t epoch) {
  Stmt s = c.Prepare(
      "INSERT INTO attestations (machine_id, attest_epoch, session_id, at, verdict, reason, reasons_json, "
      "pcrs_json, reset_count, restart_count, clock, firmware_version) "
      "VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12)");
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
      .BindInt(12, static_cast<int64_t>(r.firmware_version))
      .Run();
  return c.LastInsertRowid();
}

// --- Audit -------------------------------------------------------------------

struct AuditRow {
  std::string action;
  const Machine* machine = nullptr;  // BORROWED; null when no machine is concerned
  std::optional<std::string> from_state;
  std::optional<std::string> to_state;
  json detail = json::object();
};

// Never put a secret in `detail`: the audit log is read by operators and kept
// forever.
void WriteAudit(Connection& c, const Actor& actor, int64_t now, const AuditRow& row) {
  Stmt s = c.Prepare(
      "INSERT INTO audit (at, actor, action, machine_id, hostname, from_state, to_state, why, detail_json) "
      "VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)");
  s.BindInt(1, now).BindText(2, actor.name).BindText(3, row.action);
  if (row.machine != nullptr) {
    s.BindInt(4, row.machine->id).BindText(5, row.machine->hostname);
  } else {
    s.BindNull(4).BindText(5, "");
  }
  s.BindOptText(6, row.from_state).BindOptText(7, row.to_state).BindText(8, actor.why).BindText(9, Dump(row.detail));
  s.Run();
}

AuditEntry ReadAudit(const Stmt& s) {
  AuditEntry e;
  e.id = s.Int(0);
  e.at = s.Int(1);
  e.actor = s.Text(2);
  e.action = s.Text(3);
  e.machine_id = s.OptInt(4);
  e.hostname = s.Text(5);
  e.from_state = s.OptText(6);
  e.to_state = s.OptText(7);
  e.why = s.Text(8);
  e.detail_json = s.Text(9);
  return e;
}

// --- Operations inside a write transaction ---------------------------------

bool PoolExists(Connection& c, const std::string& name) {
  Stmt s = c.Prepare("SELECT 1 FROM pools WHERE name = ?1");
  s.BindText(1, name);
  return s.Step();
}

// Enroll's rules (store.h). Sets *changed when a row was written.
Machine EnrollIn(Connection& c, const Enrollment& in, const Actor& actor, bool replace_ek, int64_t now,
                 bool* changed) {
  CheckEnrollment(in);
  *changed = false;
  const std::vector<Address> addresses = NormalizeAddresses(in.addresses);
  if (!PoolExists(c, in.pool)) Fail(Status::NotFound("pool_unknown", "no pool named '" + in.pool + "'"));

  std::optional<Machine> by_host = MachineByHostname(c, in.hostname);
  std::optional<int64_t> ek_owner;
  {
    Stmt s = c.Prepare("SELECT id FROM machines WHERE ek_hash = ?1");
    s.BindBlob(1, in.ek_hash);
    if (s.Step()) ek_owner = s.Int(0);
  }
  // SECURITY: the EK is the machine's identity. One EK, one hostname; the
  // message does not name the hostname it is enrolled under.
  if (ek_owner && (!by_host || *ek_owner != by_host->id)) {
    Fail(Status::InvalidArgument("ek_in_use", "this EK is already enrolled under another hostname"));
  }

  if (!by_host) {
    {
      Stmt s = c.Prepare(
          "INSERT INTO machines (hostname, pool, state, ek_public, ek_hash, ek_certificate, tpm_manufacturer, "
          "tpm_model, tpm_version, policy_json, created_at, updated_at, vars_json) "
          "VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?11, ?12)");
      s.BindText(1, in.hostname)
          .BindText(2, in.pool)
          .BindText(3, in.state)
          .BindBlob(4, in.ek_public)
          .BindBlob(5, in.ek_hash)
          .BindOptBlob(6, in.ek_certificate)
          .BindText(7, in.tpm_manufacturer)
          .BindText(8, in.tpm_model)
          .BindText(9, in.tpm_version)
          .BindOptText(10, in.policy_json)
          .BindInt(11, now)
          .BindText(12, in.vars_json)
          .Run();
    }
    const int64_t id = c.LastInsertRowid();
    ReplaceAddresses(c, id, addresses);
    Machine m = MustMachineById(c, id);
    WriteAudit(c, actor, now,
               {"enroll", &m, std::nullopt, in.state,
                json{{"pool", in.pool},
                     {"ek_hash", Hex(in.ek_hash)},
                     {"ek_certificate", in.ek_certificate.has_value()},
                     {"addresses", addresses.size()}}});
    *changed = true;
    return m;
  }

  Machine old = std::move(*by_host);
  if (old.ek_hash != in.ek_hash) {
    // SECURITY: an enrolled EK is immutable. A new TPM under an old name is a
    // new identity: only an explicit, audited replacement, and it starts over.
    if (!replace_ek) {
      Fail(Status::InvalidArgument("ek_conflict", "'" + in.hostname +
                                                      "' is enrolled with another EK; replacing it needs replace_ek"));
    }
    {
      Stmt s = c.Prepare(
          "UPDATE machines SET pool = ?2, state = ?3, ek_public = ?4, ek_hash = ?5, ek_certificate = ?6, "
          "tpm_manufacturer = ?7, tpm_model = ?8, tpm_version = ?9, policy_json = ?10, tofu_pcrs_json = NULL, "
          "client_cert_issued_at = NULL, attest_epoch = attest_epoch + 1, updated_at = ?11, vars_json = ?12 "
          "WHERE id = ?1");
      s.BindInt(1, old.id)
          .BindText(2, in.pool)
          .BindText(3, in.state)
          .BindBlob(4, in.ek_public)
          .BindBlob(5, in.ek_hash)
          .BindOptBlob(6, in.ek_certificate)
          .BindText(7, in.tpm_manufacturer)
          .BindText(8, in.tpm_model)
          .BindText(9, in.tpm_version)
          .BindOptText(10, in.policy_json)
          .BindInt(11, now)
          .BindText(12, in.vars_json)
          .Run();
    }
    ReplaceAddresses(c, old.id, addresses);
    auto [sessions, tokens] = DropCredentials(c, old.id);
    Machine m = MustMachineById(c, old.id);
    WriteAudit(c, actor, now,
               {"replace_ek", &m, old.state, in.state,
                json{{"old_ek_hash", Hex(old.ek_hash)},
                     {"new_ek_hash", Hex(in.ek_hash)},
                     {"pool", in.pool},
                     {"sessions_dropped", sessions},
                     {"tokens_dropped", tokens}}});
    *changed = true;
    return m;
  }

  // Same hostname, same EK: the enrollment is the desired record.
  std::vector<std::string> what;
  if (old.pool != in.pool) what.push_back("pool");
  if (old.addresses != addresses) what.push_back("addresses");
  if (old.policy_json != in.policy_json) what.push_back("policy");
  if (old.vars_json != in.vars_json) what.push_back("vars");
  const bool new_cert = in.ek_certificate.has_value();
  if (new_cert && (old.ek_certificate != in.ek_certificate || old.tpm_manufacturer != in.tpm_manufacturer ||
                   old.tpm_model != in.tpm_model || old.tpm_version != in.tpm_version)) {
    what.push_back("ek_certificate");
  }
  std::string state = old.state;
  if (old.state == kStatePending && in.state == kStateEnrolled) {
    state = std::string(kStateEnrolled);
    what.push_back("state");
  }
  if (what.empty()) return old;
  {
    Stmt s = c.Prepare(
        "UPDATE machines SET pool = ?2, state = ?3, policy_json = ?4, "
        "ek_certificate = CASE WHEN ?5 THEN ?6 ELSE ek_certificate END, "
        "tpm_manufacturer = CASE WHEN ?5 THEN ?7 ELSE tpm_manufacturer END, "
        "tpm_model = CASE WHEN ?5 THEN ?8 ELSE tpm_model END, "
        "tpm_version = CASE WHEN ?5 THEN ?9 ELSE tpm_version END, "
        "updated_at = ?10, vars_json = ?11 WHERE id = ?1");
    s.BindInt(1, old.id)
        .BindText(2, in.pool)
        .BindText(3, state)
        .BindOptText(4, in.policy_json)
        .BindInt(5, new_cert ? 1 : 0)
        .BindOptBlob(6, in.ek_certificate)
        .BindText(7, in.tpm_manufacturer)
        .BindText(8, in.tpm_model)
        .BindText(9, in.tpm_version)
        .BindInt(10, now)
        .BindText(11, in.vars_json)
        .Run();
  }
  if (old.addresses != addresses) ReplaceAddresses(c, old.id, addresses);
  Machine m = MustMachineById(c, old.id);
  WriteAudit(c, actor, now, {"enroll_update", &m, old.state, state, json{{"changed", what}}});
  *changed = true;
  return m;
}

bool Contains(const std::vector<std::string>& v, std::string_view s) {
  return std::find(v.begin(), v.end(), s) != v.end();
}

std::string Join(const std::vector<std::string>& v) {
  std::string out;
  for (const auto& s : v) out += (out.empty() ? "" : ", ") + s;
  return out;
}

// Moves `m` to `to` when its state is in `from`; the check and the change are
// in the caller's write transaction.
Machine TransitionIn(Connection& c, const Machine& m, const std::vector<std::string>& from, const std::string& to,
                     const Actor& actor, const std::string& action, int64_t now) {
  if (m.state == to && Contains(from, to)) return m;
  if (!Contains(from, m.state)) {
    Fail(Status::InvalidArgument("state_conflict", "'" + m.hostname + "' is " + m.state + "; " + action +
                                                       " needs one of: " + Join(from)));
  }
  {
    Stmt s = c.Prepare("UPDATE machines SET state = ?2, updated_at = ?3 WHERE id = ?1");
    s.BindInt(1, m.id).BindText(2, to).BindInt(3, now).Run();
  }
  Machine after = MustMachineById(c, m.id);
  WriteAudit(c, actor, now, {action, &after, m.state, to});
  return after;
}

template <typename F>
auto Guard(F&& f) -> decltype(f()) {
  try {
    return f();
  } catch (const StoreError& e) {
    return e.status();
  }
}

}  // namespace

bool IsValidState(std::string_view state) {
  return std::find(std::begin(kStates), std::end(kStates), state) != std::end(kStates);
}

bool IsValidAddressKind(std::string_view kind) {
  return kind == kAddressInternalIP || kind == kAddressExternalIP || kind == kAddressInternalDNS ||
         kind == kAddressExternalDNS || kind == kAddressHostname;
}

// --- Store::Impl: connections ------------------------------------------------

class Store::Impl {
 public:
  Impl(std::string path, const StoreOptions& options, std::unique_ptr<Connection> writer)
      : path_(std::move(path)), options_(options), writer_(std::move(writer)) {
    idle_readers_.reserve(static_cast<size_t>(std::max(0, options_.max_idle_readers)));
  }

  // Runs f(Connection&) on the writer connection, inside a savepoint of a
  // write transaction, and returns once that transaction is durable. Writes
  // are serialized, and committed in groups: whoever finds no commit under
  // way runs every write queued so far (at most kMaxGroup) in one
  // transaction, each in its own savepoint, and commits them with one
  // fdatasync; the others wait for their group's commit. An exception from f
  // (a StoreError, say) rolls back f's savepoint only and is rethrown to f's
  // caller; a failed commit, or an error after which SQLite has rolled back
  // the whole transaction, is rethrown to every write of the group. Nobody is
  // told a write succeeded before its commit did.
  template <typename F>
  auto Write(F&& f) -> decltype(f(std::declval<Connection&>())) {
    using R = decltype(f(std::declval<Connection&>()));
    if constexpr (std::is_void_v<R>) {
      Pending p([&](Connection& c) { f(c); });
      Submit(&p);
    } else {
      std::optional<R> result;
      Pending p([&](Connection& c) { result.emplace(f(c)); });
      Submit(&p);
      return std::move(*result);
    }
  }

  Store::WriteStats GetWriteStats() const {
    std::lock_guard<std::mutex> lock(queue_mu_);
    return {commits_, grouped_writes_};
  }

  // Runs f(Connection&) in a read transaction (one snapshot) on a pooled
  // read-only connection.
  template <typename F>
  auto Read(F&& f) -> decltype(f(std::declval<Connection&>())) {
    Lease lease(this);
    Transaction txn(lease.conn(), Transaction::Kind::kRead);
    auto result = f(*lease.conn());
    txn.Commit();
    return result;
  }

  const std::string& path() const { return path_; }
  const StoreOptions& options() const { return options_; }

 private:
  class Lease {
   public:
    explicit Lease(Impl* impl) : impl_(impl), conn_(impl->AcquireReader()) {}
    ~Lease() { impl_->ReleaseReader(std::move(conn_)); }
    Lease(const Lease&) = delete;
    Lease& operator=(const Lease&) = delete;
    Connection* conn() const { return conn_.get(); }

   private:
    Impl* impl_;
    std::unique_ptr<Connection> conn_;
  };

  std::unique_ptr<Connection> AcquireReader() {
    {
      std::lock_guard<std::mutex> lock(readers_mu_);
      if (!idle_readers_.empty()) {
        auto conn = std::move(idle_readers_.back());
        idle_readers_.pop_back();
        return conn;
      }
    }
    auto conn = Connection::Open(path_, options_.busy_timeout_ms, /*read_only=*/true);
    if (!conn.ok()) Fail(conn.status());
    return std::move(conn).value();
  }

  // Never throws: the vector's capacity was reserved, and a connection left
  // inside a transaction is closed rather than pooled.
  void ReleaseReader(std::unique_ptr<Connection> conn) noexcept {
    if (!conn || sqlite3_get_autocommit(conn->db()) == 0) return;
    std::lock_guard<std::mutex> lock(readers_mu_);
    if (idle_readers_.size() < idle_readers_.capacity()) idle_readers_.push_back(std::move(conn));
  }

  static constexpr size_t kMaxGroup = 64;

  struct Pending {
    explicit Pending(std::function<void(Connection&)> r) : run(std::move(r)) {}
    std::function<void(Connection&)> run;
    std::exception_ptr error;
    bool done = false;  // guarded by queue_mu_
  };

  // Queues p and returns once its group has committed (or failed); rethrows
  // p's error.
  void Submit(Pending* p) {
    std::unique_lock<std::mutex> lock(queue_mu_);
    queue_.push_back(p);
    while (!p->done) {
      if (committing_) {
        queue_cv_.wait(lock);
        continue;
      }
      committing_ = true;
      std::vector<Pending*> group;
      while (!queue_.empty() && group.size() < kMaxGroup) {
        group.push_back(queue_.front());
        queue_.pop_front();
      }
      lock.unlock();
      RunGroup(group);
      lock.lock();
      for (Pending* g : group) g->done = true;
      committing_ = false;
      ++commits_;
      grouped_writes_ += group.size();
      queue_cv_.notify_all();
    }
    lock.unlock();
    if (p->error) std::rethrow_exception(p->error);
  }

  // Runs a group on the writer connection: one transaction, a savepoint per
  // write. Only the thread that set committing_ gets here.
  void RunGroup(const std::vector<Pending*>& group) noexcept {
    Connection& c = *writer_;
    try {
      Transaction txn(&c, Transaction::Kind::kWrite);
      for (Pending* p : group) {
        c.Run("SAVEPOINT w");
        try {
          p->run(c);
          c.Run("RELEASE w");
        } catch (...) {
          p->error = std::current_exception();
          // Some errors (SQLITE_FULL, IOERR, ...) roll back the whole
          // transaction: then nothing of the group stands.
          if (sqlite3_get_autocommit(c.db()) != 0) throw;
          c.Run("ROLLBACK TO w");
          c.Run("RELEASE w");
        }
      }
      txn.Commit();
    } catch (...) {
      const std::exception_ptr batch_error = std::current_exception();
      for (Pending* p : group) {
        if (!p->error) p->error = batch_error;
      }
    }
  }

  const std::string path_;
  const StoreOptions options_;
  std::unique_ptr<Connection> writer_;  // used only by the thread that set committing_
  mutable std::mutex queue_mu_;
  std::condition_variable queue_cv_;
  std::deque<Pending*> queue_;  // guarded by queue_mu_
  bool committing_ = false;     // guarded by queue_mu_
  uint64_t commits_ = 0;        // guarded by queue_mu_
  uint64_t grouped_writes_ = 0; // guarded by queue_mu_
  std::mutex readers_mu_;
  std::vector<std::unique_ptr<Connection>> idle_readers_;  // guarded by readers_mu_
};

// --- Store -------------------------------------------------------------------

int Store::CurrentSchemaVersion() { return LatestSchemaVersion(); }

Store::WriteStats Store::GetWriteStats() const { return impl_->GetWriteStats(); }

Store::Store(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Store::~Store() = default;

Result<std::unique_ptr<Store>> Store::Open(const std::string& path, const StoreOptions& options) {
  if (path.empty() || path == ":memory:" || path.front() == '\0') {
    return Status::InvalidArgument("field_invalid", "the database needs a file path");
  }
  if (sqlite3_threadsafe() == 0) {
    return Status::IoError("db_error", "this SQLite library is built without thread support");
  }
  // The file holds no secret, but EK and token hashes and the audit log are
  // nobody else's business: 0600 when we create it. SQLite gives the -wal and
  // -shm files the database file's mode.
  const int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
  if (fd < 0) return Status::IoError("db_error", "open " + path + ": " + std::strerror(errno));
  ::close(fd);

  auto writer = Connection::Open(path, options.busy_timeout_ms, /*read_only=*/false);
  if (!writer.ok()) return writer.status();
  try {
    // WAL: readers never block the writer and the writer never blocks readers.
    Stmt s = (*writer)->Prepare("PRAGMA journal_mode = WAL");
    if (!s.Step() || s.Text(0) != "wal") {
      return Status::IoError("db_error", "open " + path + ": the database cannot use WAL mode");
    }
  } catch (const StoreError& e) {
    return e.status();
  }
  if (Status s = Migrate(writer->get(), LatestSchemaVersion()); !s.ok()) return s;
  return std::unique_ptr<Store>(new Store(std::make_unique<Impl>(path, options, std::move(writer).value())));
}

// --- Pools -------------------------------------------------------------------

// The pool's current provisioning token's hash, if any.
std::optional<Bytes> CurrentPoolToken(Connection& c, const std::string& pool) {
  Stmt s = c.Prepare("SELECT hash FROM pool_tokens WHERE pool = ?1 AND expires_at IS NULL");
  s.BindText(1, pool);
  if (!s.Step()) return std::nullopt;
  return s.Blob(0);
}

void InsertPoolToken(Connection& c, const std::string& pool, const Bytes& hash, int64_t now) {
  {
    Stmt s = c.Prepare("SELECT 1 FROM pool_tokens WHERE hash = ?1");
    s.BindBlob(1, hash);
    if (s.Step()) Fail(Status::InvalidArgument("field_invalid", "the token hash is taken"));
  }
  Stmt s = c.Prepare("INSERT INTO pool_tokens (hash, pool, created_at, expires_at) VALUES (?1, ?2, ?3, NULL)");
  s.BindBlob(1, hash).BindText(2, pool).BindInt(3, now).Run();
}

Result<Pool> Store::PutPool(const Pool& pool, const Actor& actor, int64_t now,
                            const std::optional<Bytes>& first_token_hash) {
  return Guard([&]() -> Result<Pool> {
    CheckPoolName(pool.name);
    CheckActor(actor);
    CheckSize("settings_json", pool.settings_json.size(), 0, kMaxJson);
    CheckOptJson("boot_policy_json", pool.boot_policy_json);
    if (first_token_hash) CheckSize("token hash", first_token_hash->size(), 1, kMaxHash);
    const std::string settings = pool.settings_json.empty() ? "{}" : pool.settings_json;
    return impl_->Write([&](Connection& c) {
      std::optional<Pool> old = LoadPool(c, pool.name);
      const bool add_token = first_token_hash && !CurrentPoolToken(c, pool.name);
      if (old && old->settings_json == settings && old->boot_policy_json == pool.boot_policy_json &&
          old->token_required == pool.token_required && !add_token) {
        return *old;
      }
      {
        Stmt s = c.Prepare(
            "INSERT INTO pools (name, settings_json, boot_policy_json, created_at, updated_at, token_required) "
            "VALUES (?1, ?2, ?3, ?4, ?4, ?5) ON CONFLICT (name) DO UPDATE SET "
            "settings_json = excluded.settings_json, boot_policy_json = excluded.boot_policy_json, "
            "token_required = excluded.token_required, updated_at = excluded.updated_at");
        s.BindText(1, pool.name)
            .BindText(2, settings)
            .BindOptText(3, pool.boot_policy_json)
            .BindInt(4, now)
            .BindInt(5, pool.token_required ? 1 : 0)
            .Run();
      }
      if (add_token) InsertPoolToken(c, pool.name, *first_token_hash, now);
      // The settings' content stays out of the audit log: they may carry
      // token settings.
      json detail = {{"pool", pool.name},
                     {"created", !old.has_value()},
                     {"token_required", pool.token_required},
                     {"token_created", add_token}};
      if (old) {
        detail["settings_changed"] = old->settings_json != settings;
        detail["boot_policy_changed"] = old->boot_policy_json != pool.boot_policy_json;
      }
      WriteAudit(c, actor, now, {"pool_put", nullptr, std::nullopt, std::nullopt, detail});
      auto stored = LoadPool(c, pool.name);
      if (!stored) Fail(Status::IoError("db_error", "pool vanished inside its transaction"));
      return *stored;
    });
  });
}

Result<Pool> Store::GetPool(const std::string& name) {
  return Guard([&]() -> Result<Pool> {
    return impl_->Read([&](Connection& c) -> Pool {
      auto p = LoadPool(c, name);
      if (!p) Fail(Status::NotFound("pool_unknown", "no pool named '" + name + "'"));
      return std::move(*p);
    });
  });
}

Result<std::vector<Pool>> Store::ListPools() {
  return Guard([&]() -> Result<std::vector<Pool>> {
    return impl_->Read([&](Connection& c) {
      Stmt s = c.Prepare(std::string(kPoolSelect) + "ORDER BY name");
      std::vector<Pool> out;
      while (s.Step()) out.push_back(ReadPool(s));
      return out;
    });
  });
}

Result<Pool> Store::SetPoolTemplate(const std::string& pool, std::string_view which,
                                    const std::optional<std::string>& template_json, const std::string& digest,
                                    const Actor& actor, int64_t now) {
  return Guard([&]() -> Result<Pool> {
    CheckActor(actor);
    CheckOptJson("template", template_json);
    CheckSize("digest", digest.size(), 0, 128);
    const char* column = which == kTemplatePublic     ? "public_template"
                         : which == kTemplateAttested ? "attested_template"
                                                      : nullptr;
    if (column == nullptr) {
      return Status::InvalidArgument("field_invalid", "a template is public or attested");
    }
    return impl_->Write([&](Connection& c) {
      std::optional<Pool> old = LoadPool(c, pool);
      if (!old) Fail(Status::NotFound("pool_unknown", "no pool named '" + pool + "'"));
      const auto& current = which == kTemplatePublic ? old->public_template : old->attested_template;
      if (current == template_json) return *old;
      {
        Stmt s = c.Prepare(std::string("UPDATE pools SET ") + column + " = ?2, updated_at = ?3 WHERE name = ?1");
        s.BindText(1, pool).BindOptText(2, template_json).BindInt(3, now).Run();
      }
      json detail = {{"pool", pool}, {"template", std::string(which)}, {"removed", !template_json.has_value()}};
      if (template_json) detail["sha256"] = digest;
      WriteAudit(c, actor, now, {"pool_template_put", nullptr, std::nullopt, std::nullopt, detail});
      return *LoadPool(c, pool);
    });
  });
}

Status Store::RotatePoolToken(const std::string& pool, const Bytes& new_hash, int64_t previous_valid_until,
                              const Actor& actor, int64_t now) {
  return Guard([&]() -> Status {
    CheckActor(actor);
    CheckSize("token hash", new_hash.size(), 1, kMaxHash);
    impl_->Write([&](Connection& c) {
      if (!PoolExists(c, pool)) Fail(Status::NotFound("pool_unknown", "no pool named '" + pool + "'"));
      // Only one previous token lives at a time: the one being replaced now.
      {
        Stmt s = c.Prepare("DELETE FROM pool_tokens WHERE pool = ?1 AND expires_at IS NOT NULL");
        s.BindText(1, pool).Run();
      }
      const bool had_current = CurrentPoolToken(c, pool).has_value();
      const bool keep_previous = had_current && previous_valid_until > now;
      {
        Stmt s = c.Prepare(keep_previous
                               ? "UPDATE pool_tokens SET expires_at = ?2 WHERE pool = ?1 AND expires_at IS NULL"
                               : "DELETE FROM pool_tokens WHERE pool = ?1 AND expires_at IS NULL");
        s.BindText(1, pool);
        if (keep_previous) s.BindInt(2, previous_valid_until);
        s.Run();
      }
      InsertPoolToken(c, pool, new_hash, now);
      json detail = {{"pool", pool}, {"previous_valid_until", keep_previous ? json(previous_valid_until) : json()}};
      WriteAudit(c, actor, now, {"token_rotate", nullptr, std::nullopt, std::nullopt, detail});
      return true;
    });
    return Status::Ok();
  });
}

std::vector<PoolToken> LoadValidPoolTokens(Connection& c, const std::string& pool, int64_t now) {
  Stmt s = c.Prepare(
      "SELECT hash, pool, created_at, expires_at FROM pool_tokens "
      "WHERE pool = ?1 AND (expires_at IS NULL OR expires_at > ?2) ORDER BY expires_at IS NOT NULL");
  s.BindText(1, pool).BindInt(2, now);
  std::vector<PoolToken> out;
  while (s.Step()) out.push_back({s.Blob(0), s.Text(1), s.Int(2), s.OptInt(3)});
  return out;
}

Result<std::vector<PoolToken>> Store::ValidPoolTokens(const std::string& pool, int64_t now) {
  return Guard([&]() -> Result<std::vector<PoolToken>> {
    return impl_->Read([&](Connection& c) { return LoadValidPoolTokens(c, pool, now); });
  });
}

Result<std::pair<Pool, std::vector<PoolToken>>> Store::GetPoolWithTokens(const std::string& name, int64_t now) {
  return Guard([&]() -> Result<std::pair<Pool, std::vector<PoolToken>>> {
    return impl_->Read([&](Connection& c) {
      auto p = LoadPool(c, name);
      if (!p) Fail(Status::NotFound("pool_unknown", "no pool named '" + name + "'"));
      return std::pair{std::move(*p), LoadValidPoolTokens(c, name, now)};
    });
  });
}

// --- Enrollment --------------------------------------------------------------

Result<Machine> Store::Enroll(const Enrollment& e, const Actor& actor, bool replace_ek, int64_t now) {
  return Guard([&]() -> Result<Machine> {
    CheckActor(actor);
    CheckEnrollment(e);
    return impl_->Write([&](Connection& c) {
      bool changed = false;
      return EnrollIn(c, e, actor, replace_ek, now, &changed);
    });
  });
}

Result<size_t> Store::Import(const std::vector<Enrollment>& rows, const Actor& actor, int64_t now,
                             const ImportProgress& progress) {
  return Guard([&]() -> Result<size_t> {
    CheckActor(actor);
    return impl_->Write([&](Connection& c) {
      size_t changed_rows = 0;
      for (size_t i = 0; i < rows.size(); ++i) {
        bool changed = false;
        try {
          EnrollIn(c, rows[i], actor, /*replace_ek=*/false, now, &changed);
        } catch (const StoreError& err) {
          Fail(err.status().Annotate("row " + std::to_string(i) + " (" + rows[i].hostname + ")"));
        }
        if (changed) ++changed_rows;
        if (progress) progress(i + 1, rows.size());
      }
      if (!rows.empty()) {
        WriteAudit(c, actor, now,
                   {"import", nullptr, std::nullopt, std::nullopt,
                    json{{"rows", rows.size()}, {"changed", changed_rows}}});
      }
      return rows.size();
    });
  });
}

// --- Machines ----------------------------------------------------------------

Result<Machine> Store::FindMachineByEkHash(const Bytes& ek_hash) {
  return Guard([&]() -> Result<Machine> {
    if (ek_hash.empty() || ek_hash.size() > kMaxHash) {
      return Status::NotFound("machine_unknown", "no machine is enrolled with this EK");
    }
    return impl_->Read([&](Connection& c) -> Machine {
      auto m = MachineByEkHash(c, ek_hash);
      if (!m) Fail(Status::NotFound("machine_unknown", "no machine is enrolled with this EK"));
      return std::move(*m);
    });
  });
}

Result<Machine> Store::GetMachine(const std::string& hostname) {
  return Guard([&]() -> Result<Machine> {
    return impl_->Read([&](Connection& c) { return MustMachineByHostname(c, hostname); });
  });
}

Result<Machine> Store::GetMachineById(int64_t id) {
  return Guard([&]() -> Result<Machine> {
    return impl_->Read([&](Connection& c) { return MustMachineById(c, id); });
  });
}

Result<std::vector<Machine>> Store::ListMachines(const MachineFilter& filter) {
  return Guard([&]() -> Result<std::vector<Machine>> {
    if (filter.state) CheckState(*filter.state);
    return impl_->Read([&](Connection& c) {
      std::vector<Machine> out;
      std::unordered_map<int64_t, size_t> index;
      {
        Stmt s = c.Prepare(std::string(kMachineSelect) +
                           "WHERE (?1 IS NULL OR pool = ?1) AND (?2 IS NULL OR state = ?2) ORDER BY hostname");
        s.BindOptText(1, filter.pool).BindOptText(2, filter.state);
        while (s.Step()) {
          index.emplace(s.Int(0), out.size());
          out.push_back(ReadMachine(s));
        }
      }
      Stmt s = c.Prepare(
          "SELECT a.machine_id, a.kind, a.value FROM addresses a JOIN machines m ON m.id = a.machine_id "
          "WHERE (?1 IS NULL OR m.pool = ?1) AND (?2 IS NULL OR m.state = ?2) ORDER BY a.machine_id, a.kind, "
          "a.value");
      s.BindOptText(1, filter.pool).BindOptText(2, filter.state);
      while (s.Step()) {
        auto it = index.find(s.Int(0));
        if (it != index.end()) out[it->second].addresses.push_back({s.Text(1), s.Text(2)});
      }
      return out;
    });
  });
}

Result<Machine> Store::Approve(const std::string& hostname, const Actor& actor, int64_t now) {
  return Guard([&]() -> Result<Machine> {
    CheckActor(actor);
    return impl_->Write([&](Connection& c) {
      Machine m = MustMachineByHostname(c, hostname);
      if (m.state != kStatePending) {
        Fail(Status::InvalidArgument("state_conflict", "'" + hostname + "' is " + m.state + ", not pending"));
      }
      return TransitionIn(c, m, {std::string(kStatePending)}, std::string(kStateEnrolled), actor, "approve", now);
    });
  });
}

Result<Machine> Store::Revoke(const std::string& hostname, const Actor& actor, int64_t now) {
  return Guard([&]() -> Result<Machine> {
    CheckActor(actor);
    return impl_->Write([&](Connection& c) {
      Machine m = MustMachineByHostname(c, hostname);
      std::vector<std::string> from(std::begin(kStates), std::end(kStates));
      return TransitionIn(c, m, from, std::string(kStateRevoked), actor, "revoke", now);
    });
  });
}

Result<Machine> Store::Reset(const std::string& hostname, const Actor& actor, int64_t now) {
  return Guard([&]() -> Result<Machine> {
    CheckActor(actor);
    return impl_->Write([&](Connection& c) {
      Machine m = MustMachineByHostname(c, hostname);
      static const std::vector<std::string> kFrom = {std::string(kStateAttested), std::string(kStateProvisioned),
                                                     std::string(kStateJoined), std::string(kStateRevoked)};
      if (!Contains(kFrom, m.state)) {
        Fail(Status::InvalidArgument("state_conflict",
                                     "'" + hostname + "' is " + m.state + "; reset needs one of: " + Join(kFrom)));
      }
      {
        Stmt s = c.Prepare(
            "UPDATE machines SET state = 'enrolled', tofu_pcrs_json = NULL, client_cert_issued_at = NULL, "
            "attest_epoch = attest_epoch + 1, updated_at = ?2 WHERE id = ?1");
        s.BindInt(1, m.id).BindInt(2, now).Run();
      }
      auto [sessions, tokens] = DropCredentials(c, m.id);
      Machine after = MustMachineById(c, m.id);
      WriteAudit(c, actor, now,
                 {"reset", &after, m.state, std::string(kStateEnrolled),
                  json{{"tofu_cleared", m.tofu_pcrs_json.has_value()},
                       {"client_cert_mark_cleared", m.client_cert_issued_at.has_value()},
                       {"sessions_dropped", sessions},
                       {"tokens_dropped", tokens}}});
      return after;
    });
  });
}

Result<Machine> Store::Transition(int64_t machine_id, const std::vector<std::string>& from, const std::string& to,
                                  const Actor& actor, const std::string& action, int64_t now) {
  return Guard([&]() -> Result<Machine> {
    CheckActor(actor);
    CheckState(to);
    for (const auto& f : from) CheckState(f);
    CheckSize("action", action.size(), 1, 64);
    return impl_->Write([&](Connection& c) {
      Machine m = MustMachineById(c, machine_id);
      return TransitionIn(c, m, from, to, actor, action, now);
    });
  });
}

// --- Sessions and tokens -----------------------------------------------------

Status Store::CreateSession(const Session& session) {
  return Guard([&]() -> Status {
    CheckSize("session id", session.id.size(), 1, kMaxSessionId);
    if (!IsPrintableAscii(session.id)) {
      return Status::InvalidArgument("field_invalid", "a session id is printable ASCII");
    }
    CheckSize("nonce", session.nonce.size(), 1, kMaxHash);
    CheckSize("secret_hash", session.secret_hash.size(), 1, kMaxHash);
    CheckSize("ak_public", session.ak_public.size(), 1, kMaxTpmBlob);
    CheckSize("ak_name", session.ak_name.size(), 1, kMaxTpmBlob);
    CheckSize("pcr_selection", session.pcr_selection.size(), 0, kMaxPcrSelection);
    if (session.expires_at < session.created_at) {
      return Status::InvalidArgument("field_invalid", "a session expires after it is created");
    }
    impl_->Write([&](Connection& c) {
      {
        Stmt s = c.Prepare("SELECT 1 FROM machines WHERE id = ?1");
        s.BindInt(1, session.machine_id);
        if (!s.Step()) {
          Fail(Status::NotFound("machine_unknown", "no machine with id " + std::to_string(session.machine_id)));
        }
      }
      {
        Stmt s = c.Prepare("SELECT 1 FROM sessions WHERE id = ?1");
        s.BindText(1, session.id);
        if (s.Step()) Fail(Status::InvalidArgument("field_invalid", "the session id is taken"));
      }
      Stmt s = c.Prepare(
          "INSERT INTO sessions (id, machine_id, nonce, secret_hash, ak_public, ak_name, pcr_selection, "
          "created_at, expires_at) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)");
      s.BindText(1, session.id)
          .BindInt(2, session.machine_id)
          .BindBlob(3, session.nonce)
          .BindBlob(4, session.secret_hash)
          .BindBlob(5, session.ak_public)
          .BindBlob(6, session.ak_name)
          .BindText(7, session.pcr_selection)
          .BindInt(8, session.created_at)
          .BindInt(9, session.expires_at)
          .Run();
      return true;
    });
    return Status::Ok();
  });
}

Result<Session> Store::ConsumeSession(const std::string& id, int64_t now) {
  return Guard([&]() -> Result<Session> {
    if (id.empty() || id.size() > kMaxSessionId) return Status::NotFound("session_unknown", "unknown session");
    // SECURITY: a nonce is used once. The check and the mark are one write
    // transaction under the writer lock, so two racing requests cannot both
    // see the session unused.
    return impl_->Write([&](Connection& c) -> Session {
      Session out;
      {
        Stmt s = c.Prepare(
            "SELECT id, machine_id, nonce, secret_hash, ak_public, ak_name, pcr_selection, created_at, "
            "expires_at, used_at FROM sessions WHERE id = ?1");
        s.BindText(1, id);
        if (!s.Step()) Fail(Status::NotFound("session_unknown", "unknown session"));
        out.id = s.Text(0);
        out.machine_id = s.Int(1);
        out.nonce = s.Blob(2);
        out.secret_hash = s.Blob(3);
        out.ak_public = s.Blob(4);
        out.ak_name = s.Blob(5);
        out.pcr_selection = s.Text(6);
        out.created_at = s.Int(7);
        out.expires_at = s.Int(8);
        out.used_at = s.OptInt(9);
      }
      if (out.used_at) Fail(Status::VerificationFailed("session_used", "the session was already used"));
      if (now >= out.expires_at) Fail(Status::VerificationFailed("session_expired", "the session expired"));
      Stmt s = c.Prepare("UPDATE sessions SET used_at = ?2 WHERE id = ?1 AND used_at IS NULL");
      s.BindText(1, id).BindInt(2, now).Run();
      if (c.Changes() != 1) Fail(Status::VerificationFailed("session_used", "the session was already used"));
      out.used_at = now;
      return out;
    });
  });
}

Result<Bearer> Store::LookupToken(const Bytes& token_hash, int64_t now) {
  return Guard([&]() -> Result<Bearer> {
    if (token_hash.empty() || token_hash.size() > kMaxHash) return Status::NotFound("token_unknown", "unknown token");
    // The lookup is by the hash of a random token: timing reveals nothing
    // about a valid token.
    return impl_->Read([&](Connection& c) -> Bearer {
      Token t;
      {
        Stmt s = c.Prepare(
            "SELECT hash, machine_id, session_id, issued_at, expires_at, nonce, ak_public FROM tokens "
            "WHERE hash = ?1");
        s.BindBlob(1, token_hash);
        if (!s.Step()) Fail(Status::NotFound("token_unknown", "unknown token"));
        t = Token{s.Blob(0), s.Int(1), s.Text(2), s.Int(3), s.Int(4), s.Blob(5), s.Blob(6)};
      }
      auto m = MachineById(c, t.machine_id);
      if (!m) Fail(Status::NotFound("token_unknown", "unknown token"));
      // SECURITY: revocation wins over everything, at once.
      if (m->state == kStateRevoked) Fail(Status::VerificationFailed("token_revoked", "the machine is revoked"));
      if (now >= t.expires_at) Fail(Status::VerificationFailed("token_expired", "the token expired"));
      return Bearer{std::move(*m), std::move(t)};
    });
  });
}

Result<PurgeCounts> Store::PurgeExpired(int64_t now, int batch) {
  return Guard([&]() -> Result<PurgeCounts> {
    const int64_t limit = std::clamp(batch, 1, 100000);
    return impl_->Write([&](Connection& c) {
      PurgeCounts counts;
      {
        Stmt s = c.Prepare(
            "DELETE FROM sessions WHERE id IN (SELECT id FROM sessions WHERE expires_at <= ?1 LIMIT ?2)");
        s.BindInt(1, now).BindInt(2, limit).Run();
        counts.sessions = c.Changes();
      }
      Stmt s = c.Prepare("DELETE FROM tokens WHERE hash IN (SELECT hash FROM tokens WHERE expires_at <= ?1 LIMIT ?2)");
      s.BindInt(1, now).BindInt(2, limit).Run();
      counts.tokens = c.Changes();
      return counts;
    });
  });
}

// --- Attestations ------------------------------------------------------------

Result<Machine> Store::RecordAttestationSuccess(const AttestationRecord& record, const Token& token,
                                                const std::optional<std::string>& tofu_pcrs_json) {
  return Guard([&]() -> Result<Machine> {
    CheckRecord(record);
    if (!record.verdict.empty() && record.verdict != kVerdictOk) {
      return Status::InvalidArgument("field_invalid", "a successful attestation has verdict ok");
    }
    CheckSize("token hash", token.hash.size(), 1, kMaxHash);
    CheckSize("token nonce", token.nonce.size(), 0, kMaxHash);
    CheckSize("token ak_public", token.ak_public.size(), 0, kMaxTpmBlob);
    CheckOptJson("tofu_pcrs_json", tofu_pcrs_json);
    if (token.machine_id != record.machine_id) {
      return Status::InvalidArgument("field_invalid", "the token is for another machine than the attestation");
    }
    return impl_->Write([&](Connection& c) {
      Machine m = MustMachineById(c, record.machine_id);
      if (m.state == kStatePending || m.state == kStateRevoked) {
        Fail(Status::InvalidArgument("state_conflict", "'" + m.hostname + "' is " + m.state + " and cannot attest"));
      }
      const int64_t attestation_id = InsertAttestation(c, record, kVerdictOk, Epoch(c, m.id));
      // A reboot re-attests: only an enrolled machine moves.
      const std::string to = m.state == kStateEnrolled ? std::string(kStateAttested) : m.state;
      {
        Stmt s = c.Prepare(
            "UPDATE machines SET state = ?2, last_attested_at = ?3, "
            "tofu_pcrs_json = COALESCE(?4, tofu_pcrs_json), updated_at = ?3 WHERE id = ?1");
        s.BindInt(1, m.id).BindText(2, to).BindInt(3, record.at).BindOptText(4, tofu_pcrs_json).Run();
      }
      {
        Stmt s = c.Prepare("SELECT 1 FROM tokens WHERE hash = ?1");
        s.BindBlob(1, token.hash);
        if (s.Step()) Fail(Status::InvalidArgument("field_invalid", "the token hash is taken"));
      }
      {
        Stmt s = c.Prepare(
            "INSERT INTO tokens (hash, machine_id, session_id, issued_at, expires_at, nonce, ak_public) "
            "VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)");
        s.BindBlob(1, token.hash)
            .BindInt(2, token.machine_id)
            .BindText(3, token.session_id)
            .BindInt(4, token.issued_at)
            .BindInt(5, token.expires_at)
            .BindBlob(6, token.nonce)
            .BindBlob(7, token.ak_public)
            .Run();
      }
      Machine after = MustMachineById(c, m.id);
      WriteAudit(c, Actor{kAttestationActor, ""}, record.at,
                 {"attest", &after, m.state, to,
                  json{{"attestation_id", attestation_id},
                       {"reset_count", record.reset_count},
                       {"restart_count", record.restart_count},
                       {"firmware_version", record.firmware_version},
                       {"tofu_recorded", tofu_pcrs_json.has_value()}}});
      return after;
    });
  });
}

Status Store::RecordAttestationFailure(const AttestationRecord& record) {
  return Guard([&]() -> Status {
    CheckRecord(record);
    if (!record.verdict.empty() && record.verdict != kVerdictRefused) {
      return Status::InvalidArgument("field_invalid", "a failed attestation has verdict refused");
    }
    impl_->Write([&](Connection& c) {
      const int64_t epoch = Epoch(c, record.machine_id);
      InsertAttestation(c, record, kVerdictRefused, epoch);
      // Bounded per machine: anyone who knows an enrolled EK's public key can
      // open sessions and fail them.
      Stmt s = c.Prepare(
          "DELETE FROM attestations WHERE machine_id = ?1 AND verdict = 'refused' AND id NOT IN "
          "(SELECT id FROM attestations WHERE machine_id = ?1 AND verdict = 'refused' ORDER BY id DESC LIMIT ?2)");
      s.BindInt(1, record.machine_id).BindInt(2, std::max(1, impl_->options().max_failures_per_machine)).Run();
      return true;
    });
    return Status::Ok();
  });
}

Result<AttestationRecord> Store::LastSuccessfulAttestation(int64_t machine_id) {
  return Guard([&]() -> Result<AttestationRecord> {
    return impl_->Read([&](Connection& c) -> AttestationRecord {
      Stmt s = c.Prepare(std::string(kAttestationSelect) +
                         "WHERE a.machine_id = ?1 AND a.verdict = 'ok' AND a.attest_epoch = m.attest_epoch "
                         "ORDER BY a.id DESC LIMIT 1");
      s.BindInt(1, machine_id);
      if (!s.Step()) Fail(Status::NotFound("attestation_unknown", "no successful attestation on record"));
      return ReadAttestation(s);
    });
  });
}

Result<std::vector<AttestationRecord>> Store::RecentFailures(int limit) {
  return Guard([&]() -> Result<std::vector<AttestationRecord>> {
    return impl_->Read([&](Connection& c) {
      Stmt s = c.Prepare(std::string(kAttestationSelect) + "WHERE a.verdict = 'refused' ORDER BY a.id DESC LIMIT ?1");
      s.BindInt(1, std::clamp(limit, 1, 10000));
      std::vector<AttestationRecord> out;
      while (s.Step()) out.push_back(ReadAttestation(s));
      return out;
    });
  });
}

// --- Config and certificates -------------------------------------------------

Result<Machine> Store::RecordConfigServed(int64_t machine_id, const std::string& digest, const std::string& version,
                                          const Actor& actor, int64_t now) {
  return Guard([&]() -> Result<Machine> {
    CheckActor(actor);
    CheckSize("digest", digest.size(), 1, 128);
    CheckSize("version", version.size(), 0, 32);
    return impl_->Write([&](Connection& c) {
      Machine m = MustMachineById(c, machine_id);
      if (m.state != kStateAttested && m.state != kStateProvisioned && m.state != kStateJoined) {
        Fail(Status::InvalidArgument("state_conflict",
                                     "'" + m.hostname + "' is " + m.state + "; a config is served after attestation"));
      }
      if (m.state == kStateAttested) {
        Stmt s = c.Prepare("UPDATE machines SET state = ?2, updated_at = ?3 WHERE id = ?1");
        s.BindInt(1, m.id).BindText(2, kStateProvisioned).BindInt(3, now).Run();
      }
      Machine after = MustMachineById(c, m.id);
      WriteAudit(c, actor, now,
                 {"config_served", &after, m.state, after.state, json{{"sha256", digest}, {"version", version}}});
      return after;
    });
  });
}

Result<Machine> Store::RecordCertificate(const IssuedCertificate& cert, const Actor& actor, int64_t now) {
  return Guard([&]() -> Result<Machine> {
    CheckActor(actor);
    CheckSize("serial", cert.serial.size(), 1, 64);
    CheckSize("subject", cert.subject.size(), 1, 1024);
    CheckSize("sans", cert.sans.size(), 0, kMaxAddresses);
    for (const auto& san : cert.sans) CheckSize("sans[]", san.size(), 1, kMaxAddressValue);
    CheckSize("public_key_sha256", cert.public_key_sha256.size(), 1, kMaxHash);
    CheckSize("certificate_pem", cert.certificate_pem.size(), 0, 64 * 1024);
    const bool client = cert.kind == kCertClient;
    if (!client && cert.kind != kCertServing) {
      return Status::InvalidArgument("field_invalid", "a certificate is client or serving");
    }
    return impl_->Write([&](Connection& c) {
      Machine m = MustMachineById(c, cert.machine_id);
      std::string to = m.state;
      if (client) {
        if (m.client_cert_issued_at) {
          Fail(Status::InvalidArgument("client_cert_already_issued",
                                       "a client certificate was already issued to '" + m.hostname +
                                           "' since its last reset"));
        }
        if (m.state != kStateAttested && m.state != kStateProvisioned) {
          Fail(Status::InvalidArgument("state_conflict", "'" + m.hostname + "' is " + m.state +
                                                             "; a client certificate needs attested or provisioned"));
        }
        to = std::string(kStateJoined);
      } else if (m.state != kStateProvisioned && m.state != kStateJoined) {
        Fail(Status::InvalidArgument("state_conflict", "'" + m.hostname + "' is " + m.state +
                                                           "; a serving certificate needs provisioned or joined"));
      }
      {
        Stmt s = c.Prepare("SELECT 1 FROM certificates WHERE serial = ?1");
        s.BindText(1, cert.serial);
        if (s.Step()) Fail(Status::InvalidArgument("field_invalid", "the serial is taken"));
      }
      {
        Stmt s = c.Prepare(
            "INSERT INTO certificates (serial, machine_id, hostname, kind, subject, sans_json, public_key_sha256, "
            "tpm_resident, not_before, not_after, issued_at, certificate_pem) "
            "VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12)");
        s.BindText(1, cert.serial)
            .BindInt(2, m.id)
            .BindText(3, m.hostname)
            .BindText(4, cert.kind)
            .BindText(5, cert.subject)
            .BindText(6, Dump(json(cert.sans)))
            .BindBlob(7, cert.public_key_sha256)
            .BindInt(8, cert.tpm_resident ? 1 : 0)
            .BindInt(9, cert.not_before)
            .BindInt(10, cert.not_after)
            .BindInt(11, now)
            .BindText(12, cert.certificate_pem)
            .Run();
      }
      if (client) {
        Stmt s = c.Prepare("UPDATE machines SET state = ?2, client_cert_issued_at = ?3, updated_at = ?3 WHERE id = ?1");
        s.BindInt(1, m.id).BindText(2, to).BindInt(3, now).Run();
      }
      Machine after = MustMachineById(c, m.id);
      WriteAudit(c, actor, now,
                 {"certificate_issued", &after, m.state, to,
                  json{{"serial", cert.serial},
                       {"kind", cert.kind},
                       {"not_after", cert.not_after},
                       {"tpm_resident", cert.tpm_resident},
                       {"public_key_sha256", Hex(cert.public_key_sha256)}}});
      return after;
    });
  });
}

Status Store::AuditMachineEvent(int64_t machine_id, const std::string& action, const std::string& detail_json,
                                const Actor& actor, int64_t now) {
  return Guard([&]() -> Status {
    CheckActor(actor);
    CheckSize("action", action.size(), 1, 64);
    CheckSize("detail_json", detail_json.size(), 2, 64 * 1024);
    json detail = json::parse(detail_json, nullptr, false);
    if (!detail.is_object()) return Status::InvalidArgument("field_invalid", "detail_json must be a JSON object");
    impl_->Write([&](Connection& c) {
      Machine m = MustMachineById(c, machine_id);
      WriteAudit(c, actor, now, {action, &m, m.state, m.state, detail});
      return true;
    });
    return Status::Ok();
  });
}

namespace {

constexpr char kCertificateSelect[] =
    "SELECT serial, machine_id, hostname, kind, subject, sans_json, public_key_sha256, tpm_resident, "
    "not_before, not_after, issued_at, certificate_pem FROM certificates ";

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
  return cert;
}

}  // namespace

Result<IssuedCertificate> Store::FindClientCertificate(int64_t machine_id, const Bytes& public_key_sha256) {
  return Guard([&]() -> Result<IssuedCertificate> {
    return impl_->Read([&](Connection& c) {
      // Only since the mark was set: a reset clears the mark, and
      // certificates from before it are history, not answers.
      Stmt s = c.Prepare(std::string(kCertificateSelect) +
                         "WHERE machine_id = ?1 AND kind = 'client' AND public_key_sha256 = ?2 AND "
                         "issued_at >= (SELECT client_cert_issued_at FROM machines WHERE id = ?1) "
                         "ORDER BY issued_at DESC, rowid DESC LIMIT 1");
      s.BindInt(1, machine_id).BindBlob(2, public_key_sha256);
      if (!s.Step()) Fail(Status::NotFound("certificate_unknown", "no such client certificate"));
      return ReadCertificate(s);
    });
  });
}

Result<std::vector<IssuedCertificate>> Store::ListCertificates(const std::string& hostname, int limit) {
  return Guard([&]() -> Result<std::vector<IssuedCertificate>> {
    return impl_->Read([&](Connection& c) {
      Stmt s = c.Prepare(std::string(kCertificateSelect) +
                         "WHERE (?1 = '' OR hostname = ?1) ORDER BY issued_at DESC, rowid DESC LIMIT ?2");
      s.BindText(1, hostname).BindInt(2, std::clamp(limit, 1, 100000));
      std::vector<IssuedCertificate> out;
      while (s.Step()) out.push_back(ReadCertificate(s));
      return out;
    });
  });
}

// --- Audit and status --------------------------------------------------------

Result<std::vector<AuditEntry>> Store::ListAudit(const AuditFilter& filter) {
  return Guard([&]() -> Result<std::vector<AuditEntry>> {
    static constexpr char kColumns[] =
        "SELECT id, at, actor, action, machine_id, hostname, from_state, to_state, why, detail_json FROM audit ";
    static constexpr char kWhere[] = "WHERE id > ?1 AND (?3 IS NULL OR hostname = ?3) ";
    // since_id 0: the newest `limit` (ids start at 1), returned oldest first.
    const std::string sql = filter.since_id > 0
                                ? std::string(kColumns) + kWhere + "ORDER BY id LIMIT ?2"
                                : "SELECT * FROM (" + std::string(kColumns) + kWhere +
                                      "ORDER BY id DESC LIMIT ?2) ORDER BY id";
    return impl_->Read([&](Connection& c) {
      Stmt s = c.Prepare(sql);
      s.BindInt(1, filter.since_id).BindInt(2, std::clamp(filter.limit, 1, 10000)).BindOptText(3, filter.hostname);
      std::vector<AuditEntry> out;
      while (s.Step()) out.push_back(ReadAudit(s));
      return out;
    });
  });
}

Result<std::map<std::string, int64_t>> Store::CountByState() {
  return Guard([&]() -> Result<std::map<std::string, int64_t>> {
    return impl_->Read([&](Connection& c) {
      std::map<std::string, int64_t> out;
      for (auto s : kStates) out[std::string(s)] = 0;
      Stmt s = c.Prepare("SELECT state, count(*) FROM machines GROUP BY state");
      while (s.Step()) out[s.Text(0)] = s.Int(1);
      return out;
    });
  });
}

Result<int64_t> Store::CountOpenSessions(int64_t now) {
  return Guard([&]() -> Result<int64_t> {
    return impl_->Read([&](Connection& c) -> int64_t {
      Stmt s = c.Prepare("SELECT count(*) FROM sessions WHERE used_at IS NULL AND expires_at > ?1");
      s.BindInt(1, now);
      return s.Step() ? s.Int(0) : 0;
    });
  });
}

Status Store::Backup(const std::string& dest_path) {
  return Guard([&]() -> Status {
    if (dest_path.empty()) return Status::InvalidArgument("field_invalid", "the backup needs a file path");
    if (::access(dest_path.c_str(), F_OK) == 0) {
      return Status::InvalidArgument("field_invalid", "the backup destination " + dest_path + " exists");
    }
    // A connection of its own: VACUUM INTO reads one snapshot and writes a
    // complete, self-contained database file while the others keep working.
    auto conn = Connection::Open(impl_->path(), impl_->options().busy_timeout_ms, /*read_only=*/false);
    if (!conn.ok()) return conn.status();
    Stmt s = (*conn)->Prepare("VACUUM INTO ?1");
    s.BindText(1, dest_path).Run();
    return Status::Ok();
  });
}

}  // namespace rackgate::storage
