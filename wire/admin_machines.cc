// Encoders and decoders of the admin API's machine bodies.
#include "wire/admin_machines.h"

#include <nlohmann/json.hpp>
#include <utility>

#include "base/json_depth.h"
#include "wire/admin_json.h"
#include "wire/admin_pools.h"

namespace rackgate::wire {

namespace {

using nlohmann::json;
using admin_json::Strings;

constexpr char kMachines[] = "machines";

// o[key] when it is a string, else "": the appliance's lenient read of
// request fields.
std::string Text(const json& o, const char* key) {
  return o.contains(key) && o.at(key).is_string() ? o.at(key).get<std::string>() : std::string();
}

bool Flag(const json& o, const char* key) {
  return o.contains(key) && o.at(key).is_boolean() && o.at(key).get<bool>();
}

// An optional unsigned field of an answer (the TPM's counters and clock).
Result<uint64_t> Unsigned(const json& o, const char* key) {
  if (!o.contains(key) || o.at(key).is_null()) return uint64_t{0};
  const json& v = o.at(key);
  if (!v.is_number_integer() || (!v.is_number_unsigned() && v.get<int64_t>() < 0)) {
    return Status::InvalidArgument("field_invalid", std::string(key) + " must be a whole number");
  }
  return v.get<uint64_t>();
}

json AddressesJson(const std::vector<AddressView>& addresses) {
  json list = json::array();
  for (const auto& a : addresses) list.push_back({{"kind", a.kind}, {"value", a.value}});
  return list;
}

// A list of {"kind", "value"} objects; `element` is the refusal of an
// element that is not an object.
Result<std::vector<AddressView>> AddressesFromJson(const json& list, const char* element) {
  if (!list.is_array()) return Status::InvalidArgument("field_invalid", "addresses must be a list");
  std::vector<AddressView> out;
  for (const json& a : list) {
    if (!a.is_object()) return Status::InvalidArgument("field_invalid", element);
    out.push_back({Text(a, "kind"), Text(a, "value")});
  }
  return out;
}

json ReportJson(const MachineReportView& r) {
  return {{"at", r.at},         {"outcome", r.outcome},         {"step", r.step}, {"reason", r.reason},
          {"message", r.message}, {"exit_status", r.exit_status}, {"done", r.done}};
}

Result<MachineReportView> ReportFromJson(const json& j) {
  if (!j.is_object()) return Status::InvalidArgument("field_invalid", "last_report is an object or null");
  auto at = admin_json::Int(j, "at");
  auto outcome = admin_json::String(j, "outcome");
  auto step = admin_json::String(j, "step");
  auto reason = admin_json::String(j, "reason");
  auto message = admin_json::String(j, "message");
  auto exit_status = admin_json::Int(j, "exit_status");
  auto done = Strings(j, "done");
  if (Status s = admin_json::FirstError({at.status(), outcome.status(), step.status(), reason.status(),
                                         message.status(), exit_status.status(), done.status()});
      !s.ok()) {
    return s;
  }
  return MachineReportView{at->value_or(0),   outcome->value_or(""),   step->value_or(""), reason->value_or(""),
                           message->value_or(""), exit_status->value_or(0), std::move(done).value()};
}

Result<MachineAttestationView> AttestationFromJson(const json& j) {
  if (!j.is_object()) return Status::InvalidArgument("field_invalid", "last_attestation is an object");
  auto at = admin_json::Int(j, "at");
  auto resets = Unsigned(j, "reset_count");
  auto restarts = Unsigned(j, "restart_count");
  auto clock = Unsigned(j, "clock");
  if (Status s = admin_json::FirstError({at.status(), resets.status(), restarts.status(), clock.status()}); !s.ok()) {
    return s;
  }
  return MachineAttestationView{at->value_or(0), *resets, *restarts, *clock};
}

json MachineJson(const MachineView& m) {
  json j = {{"hostname", m.hostname},
            {"pool", m.pool},
            {"state", m.state},
            {"ek_hash", m.ek_hash},
            {"has_ek_certificate", m.has_ek_certificate},
            {"tpm_manufacturer", m.tpm_manufacturer},
            {"tpm_model", m.tpm_model},
            {"tpm_version", m.tpm_version},
            {"addresses", AddressesJson(m.addresses)},
            {"created_at", m.created_at},
            {"updated_at", m.updated_at},
            {"has_policy", m.has_policy},
            {"vars", json::parse(m.vars_json, nullptr, false)}};
  if (m.last_attested_at) j["last_attested_at"] = *m.last_attested_at;
  if (m.client_cert_issued_at) j["client_cert_issued_at"] = *m.client_cert_issued_at;
  // Trust (docs/trust.md): null trust is "never attested, no verdict yet".
  j["trust"] = m.trust.empty() ? json(nullptr) : json(m.trust);
  j["trust_reason"] = m.trust_reason;
  j["trust_changed_at"] = m.trust_changed_at ? json(*m.trust_changed_at) : json(nullptr);
  if (m.with_last_report) j["last_report"] = m.last_report ? ReportJson(*m.last_report) : json(nullptr);
  if (m.last_attestation) {
    const MachineAttestationView& a = *m.last_attestation;
    j["last_attestation"] = {
        {"at", a.at}, {"reset_count", a.reset_count}, {"restart_count", a.restart_count}, {"clock", a.clock}};
  }
  if (m.deleted) j["deleted"] = true;
  if (m.renamed_from) j["renamed_from"] = *m.renamed_from;
  return j;
}

// The optional parts of a machine (MachineFromJson's second half).
Status MachineExtrasFromJson(const json& j, MachineView* m) {
  if (j.contains("last_report")) {
    m->with_last_report = true;
    if (!j.at("last_report").is_null()) {
      auto r = ReportFromJson(j.at("last_report"));
      if (!r.ok()) return r.status();
      m->last_report = std::move(r).value();
    }
  }
  if (j.contains("last_attestation")) {
    auto a = AttestationFromJson(j.at("last_attestation"));
    if (!a.ok()) return a.status();
    m->last_attestation = *a;
  }
  if (j.contains("addresses")) {
    auto a = AddressesFromJson(j.at("addresses"), "an address is an object");
    if (!a.ok()) return a.status();
    m->addresses = std::move(a).value();
  }
  if (j.contains("vars") && !j.at("vars").is_null()) {
    if (!j.at("vars").is_object()) return Status::InvalidArgument("field_invalid", "vars must be an object");
    m->vars_json = j.at("vars").dump();
  }
  return Status::Ok();
}

Result<MachineView> MachineFromJson(const json& j) {
  if (!j.is_object()) return Status::InvalidArgument("field_invalid", "a machine is a JSON object");
  MachineView m;
  auto hostname = admin_json::String(j, "hostname");
  auto pool = admin_json::String(j, "pool");
  auto state = admin_json::String(j, "state");
  auto ek_hash = admin_json::String(j, "ek_hash");
  auto has_cert = admin_json::Bool(j, "has_ek_certificate");
  auto manufacturer = admin_json::String(j, "tpm_manufacturer");
  auto model = admin_json::String(j, "tpm_model");
  auto version = admin_json::String(j, "tpm_version");
  auto created = admin_json::Int(j, "created_at");
  auto updated = admin_json::Int(j, "updated_at");
  auto has_policy = admin_json::Bool(j, "has_policy");
  auto attested = admin_json::Int(j, "last_attested_at");
  auto cert_issued = admin_json::Int(j, "client_cert_issued_at");
  auto trust = admin_json::String(j, "trust");
  auto trust_reason = admin_json::String(j, "trust_reason");
  auto trust_changed = admin_json::Int(j, "trust_changed_at");
  auto deleted = admin_json::Bool(j, "deleted");
  auto renamed_from = admin_json::String(j, "renamed_from");
  if (Status s = admin_json::FirstError(
          {hostname.status(), pool.status(), state.status(), ek_hash.status(), has_cert.status(),
           manufacturer.status(), model.status(), version.status(), created.status(), updated.status(),
           has_policy.status(), attested.status(), cert_issued.status(), trust.status(), trust_reason.status(),
           trust_changed.status(), deleted.status(), renamed_from.status()});
      !s.ok()) {
    return s;
  }
  m.hostname = hostname->value_or("");
  m.pool = pool->value_or("");
  m.state = state->value_or("");
  m.ek_hash = ek_hash->value_or("");
  m.has_ek_certificate = has_cert->value_or(false);
  m.tpm_manufacturer = manufacturer->value_or("");
  m.tpm_model = model->value_or("");
  m.tpm_version = version->value_or("");
  m.created_at = created->value_or(0);
  m.updated_at = updated->value_or(0);
  m.has_policy = has_policy->value_or(false);
  m.last_attested_at = *attested;
  m.client_cert_issued_at = *cert_issued;
  m.trust = trust->value_or("");
  m.trust_reason = trust_reason->value_or("");
  m.trust_changed_at = *trust_changed;
  m.deleted = deleted->value_or(false);
  m.renamed_from = *renamed_from;
  if (Status s = MachineExtrasFromJson(j, &m); !s.ok()) return s;
  return m;
}

json EnrollRequestJson(const EnrollRequest& r) {
  json j = {{"hostname", r.hostname}};
  if (r.pool) j["pool"] = *r.pool;
  if (r.ek_public_base64) j["ek_public"] = *r.ek_public_base64;
  if (r.ek_certificate_base64) j["ek_certificate"] = *r.ek_certificate_base64;
  if (r.addresses) j["addresses"] = AddressesJson(*r.addresses);
  if (r.policy_given) j["policy"] = r.policy_json ? json::parse(*r.policy_json, nullptr, false) : json(nullptr);
  if (r.vars_given) j["vars"] = r.vars_json ? json::parse(*r.vars_json, nullptr, false) : json(nullptr);
  if (!r.unset_vars.empty()) j["unset_vars"] = r.unset_vars;
  if (r.replace_addresses) j["replace_addresses"] = true;
  if (r.replace_vars) j["replace_vars"] = true;
  if (r.clear_policy) j["clear_policy"] = true;
  if (r.replace_ek) j["replace_ek"] = true;
  return j;
}

// An enrollment's fields from `j` (an object); `call` reads the enroll
// call's own fields too (unset_vars and the flags), which an import row
// does not have.
Result<EnrollRequest> EnrollRequestFromJson(const json& j, bool call) {
  EnrollRequest r;
  r.hostname = Text(j, "hostname");
  if (j.contains("pool")) r.pool = Text(j, "pool");
  if (j.contains("ek_public")) r.ek_public_base64 = Text(j, "ek_public");
  if (j.contains("ek_certificate")) r.ek_certificate_base64 = Text(j, "ek_certificate");
  if (j.contains("addresses")) {
    auto a = AddressesFromJson(j.at("addresses"), "an address is an object {\"kind\": ..., \"value\": ...}");
    if (!a.ok()) return a.status();
    r.addresses = std::move(a).value();
  }
  if (j.contains("policy")) {
    r.policy_given = true;
    if (!j.at("policy").is_null()) r.policy_json = j.at("policy").dump();
  }
  if (j.contains("vars")) {
    r.vars_given = true;
    if (!j.at("vars").is_null()) r.vars_json = j.at("vars").dump();
  }
  if (!call) return r;
  if (j.contains("unset_vars")) {
    const json& u = j.at("unset_vars");
    if (!u.is_array()) return Status::InvalidArgument("field_invalid", "unset_vars must be a list of at most 64 names");
    for (const json& n : u) {
      if (!n.is_string()) return Status::InvalidArgument("field_invalid", "unset_vars: names are 1..63 characters");
      r.unset_vars.push_back(n.get<std::string>());
    }
  }
  r.replace_addresses = Flag(j, "replace_addresses");
  r.replace_vars = Flag(j, "replace_vars");
  r.clear_policy = Flag(j, "clear_policy");
  r.replace_ek = Flag(j, "replace_ek");
  return r;
}

std::optional<int64_t> WholeNumber(const json& o, const char* key) {
  if (!o.is_object() || !o.contains(key) || !o.at(key).is_number_integer()) return std::nullopt;
  return o.at(key).get<int64_t>();
}

// One row of an import body, or its refusal naming where it came from.
Result<ImportRowRequest> ImportRowFromJson(const json& item, size_t index) {
  ImportRowRequest row;
  row.line = WholeNumber(item, "line");
  row.row = WholeNumber(item, "row");
  if (!item.is_object()) {
    return Status::InvalidArgument("field_invalid", "a machine must be a JSON object")
        .Annotate(ImportRowWhere(row, index) + " ()");
  }
  auto machine = EnrollRequestFromJson(item, /*call=*/false);
  if (!machine.ok()) return machine.status().Annotate(ImportRowWhere(row, index) + " (" + Text(item, "hostname") + ")");
  row.machine = std::move(machine).value();
  return row;
}

// The streamed parse of an import body (DecodeImportRequest): the rows'
// refusal, if any, in *refused.
json ParseImport(std::string_view body, const ImportRowSink& sink, std::optional<Status>* refused) {
  std::string top_key;
  bool in_machines = false, machines_seen = false;
  size_t index = 0;
  const json::parser_callback_t each = [&](int depth, json::parse_event_t event, json& parsed) {
    using E = json::parse_event_t;
    if (depth == 1 && event == E::key) {
      top_key = parsed.get<std::string>();
    } else if (depth == 1 && event == E::array_start && top_key == kMachines) {
      if (machines_seen && !*refused) *refused = Status::InvalidArgument("field_invalid", "machines given twice");
      in_machines = machines_seen = true;
    } else if (depth == 1 && event == E::array_end) {
      in_machines = false;
    } else if (in_machines && depth == 2 &&
               (event == E::object_end || event == E::array_end || event == E::value)) {
      const size_t i = index++;
      if (!*refused) {
        auto row = ImportRowFromJson(parsed, i);
        Status s = row.ok() ? sink(std::move(row).value(), i) : row.status();
        if (!s.ok()) *refused = std::move(s);
      }
      return false;  // the row's JSON is not kept
    }
    return true;
  };
  return json::parse(body, each, false);
}

json ImportAnswerJson(const ImportAnswer& a) {
  json rows = json::array();
  for (const auto& r : a.rows) {
    rows.push_back({{"where", r.where}, {"hostname", r.hostname}, {"outcome", r.outcome}, {"changes", r.changes}});
  }
  return {{"imported", a.imported}, {"dry_run", a.dry_run},     {"created", a.created},
          {"updated", a.updated},   {"unchanged", a.unchanged}, {"rows", std::move(rows)}};
}

}  // namespace

std::string EncodeMachineView(const MachineView& m) { return MachineJson(m).dump(); }

Result<MachineView> DecodeMachineView(std::string_view body) {
  auto doc = admin_json::ParseObject(body);
  if (!doc.ok()) return doc.status();
  return MachineFromJson(*doc);
}

std::string EncodeMachineList(const std::vector<MachineView>& machines) {
  json list = json::array();
  for (const auto& m : machines) list.push_back(MachineJson(m));
  return json{{kMachines, list}}.dump();
}

Result<std::vector<MachineView>> DecodeMachineList(std::string_view body) {
  return admin_json::ListBody<MachineView>(body, kMachines, MachineFromJson);
}

std::string EncodeEnrollRequest(const EnrollRequest& r) { return EnrollRequestJson(r).dump(); }

Result<EnrollRequest> DecodeEnrollRequest(std::string_view body) {
  auto doc = admin_json::ParseObject(body);
  if (!doc.ok()) return doc.status();
  return EnrollRequestFromJson(*doc, /*call=*/true);
}

std::string EncodeEnrollAnswer(const EnrollAnswer& a) {
  json j = MachineJson(a.machine);
  j["outcome"] = a.outcome;
  j["changes"] = a.changes;
  j["summary"] = a.summary;
  return j.dump();
}

Result<EnrollAnswer> DecodeEnrollAnswer(std::string_view body) {
  auto doc = admin_json::ParseObject(body);
  if (!doc.ok()) return doc.status();
  auto machine = MachineFromJson(*doc);
  auto outcome = admin_json::String(*doc, "outcome");
  auto changes = Strings(*doc, "changes");
  auto summary = admin_json::String(*doc, "summary");
  if (Status s = admin_json::FirstError({machine.status(), outcome.status(), changes.status(), summary.status()});
      !s.ok()) {
    return s;
  }
  return EnrollAnswer{std::move(machine).value(), outcome->value_or(""), std::move(changes).value(),
                      summary->value_or("")};
}

std::string ImportRowWhere(const ImportRowRequest& row, size_t index) {
  if (row.line && row.row) return "row " + std::to_string(*row.row) + " (line " + std::to_string(*row.line) + ")";
  if (row.line) return "line " + std::to_string(*row.line);
  return "machines[" + std::to_string(index) + "]";
}

std::string EncodeImportRequest(const ImportRequest& r) {
  json rows = json::array();
  for (const auto& row : r.rows) {
    json j = EnrollRequestJson(row.machine);
    if (row.line) j["line"] = *row.line;
    if (row.row) j["row"] = *row.row;
    rows.push_back(std::move(j));
  }
  return json{{kMachines, std::move(rows)}, {"dry_run", r.dry_run}}.dump();
}

Result<ImportRequest> DecodeImportRequest(std::string_view body, const ImportRowSink& row) {
  // SECURITY: the depth is bounded before parsing, as for every admin body.
  if (JsonDepth(body) > kMaxAdminJsonDepth) return Status::InvalidArgument("bad_json", "body is not a JSON object");
  std::optional<Status> refused;  // the first bad row, or machines twice
  json doc = ParseImport(body, row, &refused);
  if (doc.is_discarded() || !doc.is_object()) return Status::InvalidArgument("bad_json", "body is not a JSON object");
  if (!doc.contains(kMachines) || !doc.at(kMachines).is_array()) {
    return Status::InvalidArgument("field_missing", "machines must be a list");
  }
  if (refused) return std::move(*refused);
  ImportRequest r;
  if (doc.contains("dry_run")) {
    if (!doc.at("dry_run").is_boolean()) {
      return Status::InvalidArgument("field_invalid", "dry_run must be true or false");
    }
    r.dry_run = doc.at("dry_run").get<bool>();
  }
  return r;
}

std::string EncodeImportAnswer(const ImportAnswer& a) { return ImportAnswerJson(a).dump(); }

Result<ImportAnswer> DecodeImportAnswer(std::string_view body) {
  auto doc = admin_json::ParseObject(body);
  if (!doc.ok()) return doc.status();
  auto imported = admin_json::Int(*doc, "imported");
  auto dry_run = admin_json::Bool(*doc, "dry_run");
  auto created = admin_json::Int(*doc, "created");
  auto updated = admin_json::Int(*doc, "updated");
  auto unchanged = admin_json::Int(*doc, "unchanged");
  if (Status s = admin_json::FirstError(
          {imported.status(), dry_run.status(), created.status(), updated.status(), unchanged.status()});
      !s.ok()) {
    return s;
  }
  ImportAnswer a{imported->value_or(0), dry_run->value_or(false), created->value_or(0),
                 updated->value_or(0),  unchanged->value_or(0),   {}};
  if (!doc->contains("rows")) return a;
  const json& rows = doc->at("rows");
  if (!rows.is_array()) return Status::InvalidArgument("field_invalid", "rows must be a list");
  for (const json& r : rows) {
    if (!r.is_object()) return Status::InvalidArgument("field_invalid", "a row is an object");
    auto where = admin_json::String(r, "where");
    auto hostname = admin_json::String(r, "hostname");
    auto outcome = admin_json::String(r, "outcome");
    auto changes = Strings(r, "changes");
    if (Status s = admin_json::FirstError({where.status(), hostname.status(), outcome.status(), changes.status()});
        !s.ok()) {
      return s;
    }
    a.rows.push_back({where->value_or(""), hostname->value_or(""), outcome->value_or(""), std::move(changes).value()});
  }
  return a;
}

std::string EncodeApprovalRequest(const ApprovalRequest& r) {
  json j = {{"reason", r.reason}};
  if (r.hostname) j["hostname"] = *r.hostname;
  if (r.pool) j["pool"] = *r.pool;
  if (r.addresses) j["addresses"] = AddressesJson(*r.addresses);
  if (r.vars_json) j["vars"] = json::parse(*r.vars_json, nullptr, false);
  return j.dump();
}

Result<ApprovalRequest> DecodeApprovalRequest(std::string_view body) {
  ApprovalRequest r;
  if (body.empty()) return r;
  auto doc = admin_json::ParseObject(body);
  if (!doc.ok()) return doc.status();
  const json& j = *doc;
  if (j.contains("hostname")) {
    if (!j.at("hostname").is_string()) return Status::InvalidArgument("field_invalid", "hostname is a string");
    r.hostname = j.at("hostname").get<std::string>();
  }
  if (j.contains("pool")) {
    if (!j.at("pool").is_string()) return Status::InvalidArgument("field_invalid", "pool is a string");
    r.pool = j.at("pool").get<std::string>();
  }
  if (j.contains("addresses")) {
    auto a = AddressesFromJson(j.at("addresses"), "an address is {kind, value}");
    if (!a.ok()) return a.status();
    r.addresses = std::move(a).value();
  }
  if (j.contains("vars")) r.vars_json = j.at("vars").dump();
  r.reason = Text(j, "reason");
  return r;
}

std::string EncodeReasonRequest(const ReasonRequest& r) {
  json j{{"reason", r.reason}};
  if (r.unrevoke) j["unrevoke"] = true;
  return j.dump();
}

Result<ReasonRequest> DecodeReasonRequest(std::string_view body) {
  ReasonRequest r;
  if (body.empty()) return r;
  auto doc = admin_json::ParseObject(body);
  if (!doc.ok()) return doc.status();
  r.reason = Text(*doc, "reason");
  r.unrevoke = Flag(*doc, "unrevoke");
  return r;
}

std::string EncodeRenameRequest(const RenameRequest& r) {
  return json{{"hostname", r.hostname}, {"reason", r.reason}}.dump();
}

Result<RenameRequest> DecodeRenameRequest(std::string_view body) {
  auto doc = admin_json::ParseObject(body);
  if (!doc.ok()) return doc.status();
  return RenameRequest{Text(*doc, "hostname"), Text(*doc, "reason")};
}

}  // namespace rackgate::wire
