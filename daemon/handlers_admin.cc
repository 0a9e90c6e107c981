// The admin API: enrollment and machine management over the Unix socket.
#include "daemon/handlers_admin.h"

#include <malloc.h>
#include <grp.h>
#include <pwd.h>
#include <unistd.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "attest/boot_policy.h"
#include "attest/ek_identity.h"
#include "wire/boot_policy_json.h"
#include "wire/codec.h"
#include "base/log.h"
#include "core/policy_proposal.h"
#include "core/pool_settings.h"
#include "core/secrets.h"
#include "daemon/status_http.h"
#include "wire/admin_audit.h"
#include "wire/admin_certificates.h"
#include "wire/admin_csrs.h"
#include "wire/admin_events.h"
#include "wire/admin_pools.h"
#include "wire/admin_query.h"
#include "wire/admin_status.h"
#include "wire/protocol.h"
#include "base/hex.h"

namespace rackgate::daemon {

namespace {

using attest::Bytes;
using core::AttestationService;
using wire::kMaxCertificate;
using wire::kMaxTpm2bPublic;
using core::IgnitionService;
using nlohmann::json;
using wire::kMaxCertificate;
using wire::kMaxTpm2bPublic;

constexpr size_t kMaxImportRows = 100000;

std::shared_ptr<spdlog::logger> Log() {
  static const auto log = Logger("admin");
  return log;
}

json MachineJson(const storage::Machine& m) {
  json addrs = json::array();
  for (const auto& a : m.addresses) addrs.push_back({{"kind", a.kind}, {"value", a.value}});
  json j = {{"hostname", m.hostname},
            {"pool", m.pool},
            {"state", std::string(storage::StateName(m.state))},
            {"ek_hash", hex::Encode(m.ek_hash)},
            {"has_ek_certificate", m.ek_certificate.has_value()},
            {"tpm_manufacturer", m.tpm_manufacturer},
            {"tpm_model", m.tpm_model},
            {"tpm_version", m.tpm_version},
            {"addresses", addrs},
            {"created_at", m.created_at},
            {"updated_at", m.updated_at},
            {"has_policy", m.policy_json.has_value()},
            {"vars", json::parse(m.vars_json, nullptr, false)}};
  if (m.last_attested_at) j["last_attested_at"] = *m.last_attested_at;
  if (m.client_cert_issued_at) j["client_cert_issued_at"] = *m.client_cert_issued_at;
  // Trust (docs/trust.md): null trust is "never attested, no verdict yet".
  j["trust"] = m.trust.empty() ? json(nullptr) : json(m.trust);
  j["trust_reason"] = m.trust_reason;
  j["trust_changed_at"] = m.trust_changed_at ? json(*m.trust_changed_at) : json(nullptr);
  return j;
}

// A machine's last provisioning report (docs/trust.md); null when none.
json ReportJson(const storage::ProvisioningReportRecord* r) {
  if (r == nullptr) return nullptr;
  return {{"at", r->at},           {"outcome", r->outcome}, {"step", r->step},
          {"reason", r->reason},   {"message", r->message}, {"exit_status", r->exit_status},
          {"done", r->done}};
}

// An enrollment that does not check out: malformed input is 400, an EK
// (certificate) that does not verify is refused, 403.
Status EnrollRefusal(const Status& s) {
  if (s.code() == Status::Code::kInvalidArgument) return s;
  return Status::VerificationFailed(s.reason(), s.message());
}

std::string Str(const json& o, const char* k) {
  return o.contains(k) && o.at(k).is_string() ? o.at(k).get<std::string>() : std::string();
}

}  // namespace

Result<json> AdminBody(const Request& r) {
  json doc = json::parse(r.body, nullptr, false);
  if (doc.is_discarded() || !doc.is_object()) return Status::InvalidArgument("bad_json", "body is not a JSON object");
  return doc;
}

AdminApi::AdminApi(storage::Store* store, AttestationService* attestation, IgnitionService* ignition,
                   std::optional<gid_t> admin_gid)
    : store_(store),
      attestation_(attestation),
      ignition_(ignition),
      policies_(store, [attestation] { return attestation->Now(); }),
      pools_(store, ignition, [attestation] { return attestation->Now(); }),
      csr_approvals_(store, [attestation] { return attestation->Now(); }),
      events_(store),
      audit_(store),
      status_({store, store, store}, attestation),
      certificates_(store),
      admin_gid_(admin_gid) {}

Result<storage::Actor> AdminApi::Authorize(const Request& request) const {
  if (!request.admin || !request.peer_cred) {
    return Status::VerificationFailed("admin_forbidden", "the admin API is only served on the admin socket");
  }
  const PeerCred& p = *request.peer_cred;
  // The socket's mode (0660, admin group) is the first gate; the peer's
  // credentials are the second, so a socket file made too permissive by
  // hand still admits only root, our own user and the admin group.
  bool allowed = p.uid == 0 || p.uid == ::geteuid();
  if (!allowed && admin_gid_) {
    allowed = p.gid == *admin_gid_;
    for (gid_t g : p.groups) allowed = allowed || g == *admin_gid_;
  }
  std::string name = "uid " + std::to_string(p.uid);
  if (struct passwd* pw = ::getpwuid(p.uid)) name = pw->pw_name;
  if (!allowed) {
    // Logged and audited with the user by the server's refusal hook
    // (daemon/observability.cc), as every refused admin request is.
    std::string group = "the admin group";
    if (admin_gid_) {
      if (struct group* gr = ::getgrgid(*admin_gid_)) group = std::string("the admin group ") + gr->gr_name;
    }
    return Status::VerificationFailed("admin_forbidden", "you are not root, the daemon's user or in " + group);
  }
  return storage::Actor{name, ""};
}

void AdminApi::Register(Router* router) {
  // Every route answers a refusal through the one reason table.
  const auto add = [router](const char* method, const std::string& path,
                            std::function<Result<Response>(const Request&)> f) {
    router->Add(method, path, [f = std::move(f)](const Request& r) {
      Result<Response> answer = f(r);
      return answer.ok() ? std::move(answer).value() : AdminErrorResponse(answer.status());
    });
  };
  add("POST", "/v1/admin/machines", [this](const Request& r) { return Enroll(r); });
  add("GET", "/v1/admin/machines", [this](const Request& r) { return List(r); });
  add("POST", "/v1/admin/import", [this](const Request& r) { return Import(r); });
  add("GET", "/v1/admin/machines/{hostname}", [this](const Request& r) { return Show(r); });
  for (const char* verb : {"approve", "revoke", "reset"}) {
    add("POST", std::string("/v1/admin/machines/{hostname}/") + verb,
        [this, v = std::string(verb)](const Request& r) { return Action(r, v); });
  }
  add("GET", "/v1/admin/audit", [this](const Request& r) { return Audit(r); });
  add("GET", "/v1/admin/status", [this](const Request& r) { return StatusReport(r); });
  add("GET", "/v1/admin/pools", [this](const Request& r) { return GetPools(r); });
  add("GET", "/v1/admin/pools/{name}", [this](const Request& r) { return GetPools(r); });
  add("PUT", "/v1/admin/pools/{name}", [this](const Request& r) { return PutPool(r); });
  add("PUT", "/v1/admin/pools/{name}/templates/{which}", [this](const Request& r) { return PutTemplate(r); });
  add("DELETE", "/v1/admin/pools/{name}/templates/{which}", [this](const Request& r) { return PutTemplate(r); });
  add("POST", "/v1/admin/pools/{name}/token/rotate", [this](const Request& r) { return RotateToken(r); });
  add("GET", "/v1/admin/certificates", [this](const Request& r) { return Certificates(r); });
  add("GET", "/v1/admin/events", [this](const Request& r) { return Events(r); });
  add("GET", "/v1/admin/csrs", [this](const Request& r) { return Csrs(r); });
  add("POST", "/v1/admin/csrs/{id}/approve", [this](const Request& r) { return DecideCsr(r, true); });
  add("POST", "/v1/admin/csrs/{id}/deny", [this](const Request& r) { return DecideCsr(r, false); });
  // Delete, rename, the audit chain (docs/lifecycle.md, docs/audit.md).
  add("DELETE", "/v1/admin/machines/{hostname}", [this](const Request& r) { return DeleteMachine(r); });
  add("POST", "/v1/admin/machines/{hostname}/rename", [this](const Request& r) { return RenameMachine(r); });
  add("GET", "/v1/admin/audit/verify", [this](const Request& r) { return VerifyAudit(r); });
  // Boot policy (docs/policy.md, "From observation to enforcement").
  add("GET", "/v1/admin/pools/{name}/policy", [this](const Request& r) { return PolicyShow(r); });
  add("PUT", "/v1/admin/pools/{name}/policy", [this](const Request& r) { return PolicyPut(r); });
  add("POST", "/v1/admin/pools/{name}/policy/mode", [this](const Request& r) { return PolicyMode(r); });
  add("GET", "/v1/admin/pools/{name}/policy/proposal", [this](const Request& r) { return PolicyPropose(r); });
  add("POST", "/v1/admin/pools/{name}/policy/accept", [this](const Request& r) { return PolicyAccept(r); });
}

namespace {

// One enrollment from its JSON: the EK certificate validated against the
// trust anchors (and against the EK public area when both are given), the
// identity derived from the key, the boot policy validated.
// Operator-set values for templates ({{machine.NAME}}): an object of at most
// 64 strings, names [A-Za-z0-9_-]{1,63}, values of at most 4 KiB; its text.
Result<std::string> VarsJson(const json& vars) {
  if (!vars.is_object() || vars.size() > 64) {
    return Status::InvalidArgument("field_invalid", "vars must be an object of at most 64 strings");
  }
  for (const auto& [k, v] : vars.items()) {
    const bool name_ok = !k.empty() && k.size() <= 63 && k.find_first_not_of(
        "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-") == std::string::npos;
    if (!name_ok || !v.is_string() || v.get<std::string>().size() > 4096) {
      return Status::InvalidArgument("field_invalid",
                                     "vars: names are [A-Za-z0-9_-]{1,63} and values strings of at most 4 KiB");
    }
  }
  return vars.dump();
}

Result<storage::Enrollment> EnrollmentFromJson(const json& j, const AttestationService& service) {
  if (!j.is_object()) return Status::InvalidArgument("field_invalid", "a machine must be a JSON object");
  storage::Enrollment e;
  e.hostname = Str(j, "hostname");
  e.pool = Str(j, "pool");  // "" when not given: enroll keeps the machine's
  if (e.hostname.empty()) return Status::InvalidArgument("field_missing", "hostname is required");
  std::optional<attest::TpmPublic> ek;
  if (j.contains("ek_public")) {
    auto b = wire::Base64Decode(Str(j, "ek_public"), wire::kMaxTpm2bPublic);
    if (!b) return Status::InvalidArgument("field_invalid", "ek_public is not base64");
    auto parsed = attest::ParseTpm2bPublic(*b);
    if (!parsed.ok()) return parsed.status().Annotate("ek_public");
    ek = std::move(parsed).value();
    e.ek_public = *b;
  }
  if (j.contains("ek_certificate")) {
    auto b = wire::Base64Decode(Str(j, "ek_certificate"), wire::kMaxCertificate);
    if (!b) return Status::InvalidArgument("field_invalid", "ek_certificate is not base64");
    auto info = service.CheckEkCertificate(*b, {}, ek ? &*ek : nullptr);
    if (!info.ok()) return info.status();
    auto hash = attest::EkKeyHashFromCertificate(info->der);
    if (!hash.ok()) return hash.status();
    e.ek_hash = *hash;
    e.ek_certificate = info->der;
    e.tpm_manufacturer = info->tpm_manufacturer;
    e.tpm_model = info->tpm_model;
    e.tpm_version = info->tpm_version;
  } else if (ek) {
    auto hash = attest::EkKeyHash(*ek);
    if (!hash.ok()) return hash.status();
    e.ek_hash = *hash;
  } else {
    return Status::InvalidArgument("field_missing", "ek_certificate or ek_public is required");
  }
  if (j.contains("addresses")) {
    if (!j.at("addresses").is_array()) return Status::InvalidArgument("field_invalid", "addresses must be a list");
    for (const json& a : j.at("addresses")) {
      if (!a.is_object()) {
        return Status::InvalidArgument("field_invalid", "an address is an object {\"kind\": ..., \"value\": ...}");
      }
      e.addresses.push_back({Str(a, "kind"), Str(a, "value")});
    }
  }
  if (j.contains("policy") && !j.at("policy").is_null()) {
    std::string text = j.at("policy").dump();
    auto policy = wire::ParseBootPolicy(text);
    if (!policy.ok()) return policy.status().Annotate("policy");
    e.policy_json = text;
  }
  // Operator-set values for templates ({{machine.NAME}}): strings by name.
  if (j.contains("vars") && !j.at("vars").is_null()) {
    auto vars = VarsJson(j.at("vars"));
    if (!vars.ok()) return vars.status();
    e.vars_json = std::move(vars).value();
  }
  return e;
}

bool Flag(const json& o, const char* k) { return o.contains(k) && o.at(k).is_boolean() && o.at(k).get<bool>(); }

// Which fields an enroll body gives (docs/protocol.md, "Enroll"): a field
// absent from the body is kept from the enrolled machine.
Result<storage::EnrollFields> EnrollFieldsFromJson(const json& j) {
  storage::EnrollFields f;
  f.pool = j.contains("pool");
  f.addresses = j.contains("addresses");
  f.replace_addresses = Flag(j, "replace_addresses");
  f.vars = j.contains("vars") && !j.at("vars").is_null();
  f.replace_vars = Flag(j, "replace_vars");
  if (j.contains("unset_vars")) {
    const json& u = j.at("unset_vars");
    if (!u.is_array() || u.size() > 64) {
      return Status::InvalidArgument("field_invalid", "unset_vars must be a list of at most 64 names");
    }
    for (const json& n : u) {
      if (!n.is_string() || n.get<std::string>().empty() || n.get<std::string>().size() > 63) {
        return Status::InvalidArgument("field_invalid", "unset_vars: names are 1..63 characters");
      }
      f.unset_vars.push_back(n.get<std::string>());
    }
  }
  f.policy = j.contains("policy") || Flag(j, "clear_policy");
  if (Flag(j, "clear_policy") && j.contains("policy") && !j.at("policy").is_null()) {
    return Status::InvalidArgument("field_invalid", "give policy or clear_policy, not both");
  }
  return f;
}

// An import row's fields: its addresses are the row's (absent: none), and
// so are its vars and policy when it names them; a row that does not name
// vars or policy keeps the machine's (docs/inventory.md).
storage::EnrollFields ImportFieldsFromJson(const json& j) {
  storage::EnrollFields f;  // everything given and replaced
  f.vars = j.contains("vars");
  f.policy = j.contains("policy");
  return f;
}

// Where an import row came from, for every refusal: the CLI sends the
// inventory file's line (and, for a JSON file, the row's index).
std::string RowWhere(const json& item, size_t index) {
  const auto num = [&](const char* k) -> std::optional<int64_t> {
    if (!item.is_object() || !item.contains(k) || !item.at(k).is_number_integer()) return std::nullopt;
    return item.at(k).get<int64_t>();
  };
  const auto line = num("line");
  const auto row = num("row");
  if (line && row) return "row " + std::to_string(*row) + " (line " + std::to_string(*line) + ")";
  if (line) return "line " + std::to_string(*line);
  return "machines[" + std::to_string(index) + "]";
}

// "node-1: addresses +InternalIP=10.0.0.6; vars unchanged", "node-1:
// unchanged": what an enroll did, in one line.
std::string EnrollSummary(const std::string& hostname, const std::string& outcome,
                          const std::vector<std::string>& changes) {
  if (outcome == storage::kEnrollUnchanged) return hostname + ": unchanged";
  if (outcome == storage::kEnrollCreated) return hostname + ": enrolled";
  std::string out;
  bool addresses = false, vars = false;
  for (const auto& c : changes) {
    out += (out.empty() ? "" : "; ") + c;
    addresses = addresses || c.rfind("addresses", 0) == 0;
    vars = vars || c.rfind("vars", 0) == 0;
  }
  if (!addresses) out += "; addresses unchanged";
  if (!vars) out += "; vars unchanged";
  return hostname + ": " + out;
}

}  // namespace

Result<Response> AdminApi::Enroll(const Request& request) {
  auto actor = Authorize(request);
  if (!actor.ok()) return actor.status();
  auto body = AdminBody(request);
  if (!body.ok()) return body.status();
  auto e = EnrollmentFromJson(*body, *attestation_);
  if (!e.ok()) return EnrollRefusal(e.status());
  auto fields = EnrollFieldsFromJson(*body);
  if (!fields.ok()) return fields.status();
  const bool replace = Flag(*body, "replace_ek");
  auto a = *actor;
  a.why = replace ? "EK replaced by an operator" : "enrolled by an operator";
  auto o = store_->EnrollMerged(*e, *fields, a, replace, attestation_->Now());
  if (!o.ok()) return o.status();
  const storage::Machine& m = o->machine;
  const std::string summary = EnrollSummary(m.hostname, o->outcome, o->changes);
  Log()->info("{} enrolled {} ek={} pool {}: {}", a.name, m.hostname, hex::Encode(m.ek_hash).substr(0, 16),
              m.pool, o->outcome);
  json answer = MachineJson(m);
  answer["outcome"] = o->outcome;
  answer["changes"] = o->changes;
  answer["summary"] = summary;
  return Response::Json(o->outcome == storage::kEnrollCreated ? 201 : 200, answer.dump());
}

Result<Response> AdminApi::Import(const Request& request) {
  auto actor = Authorize(request);
  if (!actor.ok()) return actor.status();
  // Streamed: each row of "machines" becomes an enrollment as soon as it is
  // parsed and its JSON is dropped, so that an inventory's JSON tree (four
  // times its text: 276 MiB at the peak for 50,000 machines) is never held
  // whole. What is refused, and how, is as for a body parsed at once.
  std::vector<storage::ImportRow> rows;
  std::optional<Status> refused;  // the first bad row, or too many
  std::string top_key;
  bool in_machines = false, machines_seen = false;
  size_t index = 0;
  const auto row = [&](const json& item) {
    const size_t i = index++;
    if (refused) return;
    if (i >= kMaxImportRows) {
      refused = Status::InvalidArgument("field_invalid",
                                "at most " + std::to_string(kMaxImportRows) + " machines at once");
      return;
    }
    std::string where = RowWhere(item, i);
    auto e = EnrollmentFromJson(item, *attestation_);
    if (e.ok() && e->pool.empty()) e = Status::InvalidArgument("field_missing", "pool is required");
    if (!e.ok()) {
      std::string host = item.is_object() ? Str(item, "hostname") : "";
      refused = EnrollRefusal(e.status().Annotate(where + " (" + host + ")"));
      return;
    }
    rows.push_back({std::move(e).value(), ImportFieldsFromJson(item), std::move(where)});
  };
  const json::parser_callback_t each = [&](int depth, json::parse_event_t event, json& parsed) {
    using E = json::parse_event_t;
    if (depth == 1 && event == E::key) {
      top_key = parsed.get<std::string>();
    } else if (depth == 1 && event == E::array_start && top_key == "machines") {
      if (machines_seen && !refused) refused = Status::InvalidArgument("field_invalid", "machines given twice");
      in_machines = machines_seen = true;
    } else if (depth == 1 && event == E::array_end) {
      in_machines = false;
    } else if (in_machines && depth == 2 &&
               (event == E::object_end || event == E::array_end || event == E::value)) {
      row(parsed);
      return false;  // the row's JSON is not kept
    }
    return true;
  };
  json body = json::parse(request.body, each, false);
  if (body.is_discarded() || !body.is_object()) {
    return Status::InvalidArgument("bad_json", "body is not a JSON object");
  }
  if (!body.contains("machines") || !body.at("machines").is_array()) {
    return Status::InvalidArgument("field_missing", "machines must be a list");
  }
  if (refused) return std::move(*refused);
  storage::ImportOptions options;
  if (body.contains("dry_run")) {
    if (!body.at("dry_run").is_boolean()) {
      return Status::InvalidArgument("field_invalid", "dry_run must be true or false");
    }
    options.dry_run = body.at("dry_run").get<bool>();
  }
  auto a = *actor;
  a.why = "inventory import";
  const size_t count = rows.size();
  auto report = store_->Import(rows, options, a, attestation_->Now());
  // Give the heap the rows used back to the system rather than keep the
  // high-water mark for the daemon's lifetime.
  rows.clear();
  rows.shrink_to_fit();
  malloc_trim(0);
  if (!report.ok()) return report.status();
  Log()->info("{} {} {} machines: created {}, updated {}, unchanged {}", a.name,
              options.dry_run ? "checked (dry run)" : "imported", count, report->created, report->updated,
              report->unchanged);
  json per_row = json::array();
  for (const auto& r : report->rows) {
    per_row.push_back({{"where", r.where}, {"hostname", r.hostname}, {"outcome", r.outcome}, {"changes", r.changes}});
  }
  return Response::Json(200, json{{"imported", options.dry_run ? 0 : count},
                                  {"dry_run", options.dry_run},
                                  {"created", report->created},
                                  {"updated", report->updated},
                                  {"unchanged", report->unchanged},
                                  {"rows", std::move(per_row)}}
                                 .dump());
}

Result<Response> AdminApi::List(const Request& request) {
  auto actor = Authorize(request);
  if (!actor.ok()) return actor.status();
  storage::MachineFilter filter;
  if (auto it = request.query.find("pool"); it != request.query.end()) filter.pool = it->second;
  if (auto it = request.query.find("state"); it != request.query.end()) {
    filter.state = storage::ParseMachineState(it->second);
    if (!filter.state) {
      return Status::InvalidArgument("state_invalid", "unknown machine state '" + it->second + "'");
    }
  }
  auto list = store_->ListMachines(filter);
  if (!list.ok()) return list.status();
  auto reports = store_->ListLastReports();
  if (!reports.ok()) return reports.status();
  json machines = json::array();
  for (const auto& m : *list) {
    json j = MachineJson(m);
    auto r = reports->find(m.id);
    j["last_report"] = ReportJson(r == reports->end() ? nullptr : &r->second);
    machines.push_back(std::move(j));
  }
  return Response::Json(200, json{{"machines", machines}}.dump());
}

Result<Response> AdminApi::Show(const Request& request) {
  auto actor = Authorize(request);
  if (!actor.ok()) return actor.status();
  auto m = store_->GetMachine(request.path_params.at("hostname"));
  if (!m.ok()) return m.status();
  json j = MachineJson(*m);
  auto last = store_->LastSuccessfulAttestation(m->id);
  if (last.ok()) {
    j["last_attestation"] = {{"at", last->at}, {"reset_count", last->reset_count},
                             {"restart_count", last->restart_count}, {"clock", last->clock}};
  }
  auto report = store_->LastReport(m->id);
  if (!report.ok() && report.status().code() != Status::Code::kNotFound) return report.status();
  j["last_report"] = ReportJson(report.ok() ? &*report : nullptr);
  return Response::Json(200, j.dump());
}

Result<Response> AdminApi::Action(const Request& request, const std::string& verb) {
  if (verb == "approve") return ApproveMachine(request);
  auto actor = Authorize(request);
  if (!actor.ok()) return actor.status();
  auto a = *actor;
  auto body = AdminBody(request);
  a.why = body.ok() ? Str(*body, "reason") : "";
  if (a.why.empty()) a.why = "by " + a.name;
  const std::string& host = request.path_params.at("hostname");
  const int64_t now = attestation_->Now();
  auto m = verb == "approve" ? store_->Approve(host, a, now)
           : verb == "revoke" ? store_->Revoke(host, a, now)
                              : store_->Reset(host, a, now);
  if (!m.ok()) return m.status();
  Log()->info("{} {} {}: now {} ({})", a.name, verb, host, storage::StateName(m->state), a.why);
  return Response::Json(200, MachineJson(*m).dump());
}

// GET /v1/admin/audit?hostname=H&limit=N&since=ID.
Result<Response> AdminApi::Audit(const Request& request) {
  auto actor = Authorize(request);
  if (!actor.ok()) return actor.status();
  auto query = wire::DecodeAuditQuery(request.query);
  if (!query.ok()) return query.status();
  auto entries = audit_.List(query->hostname, query->limit, query->since);
  if (!entries.ok()) return entries.status();
  return Response::Json(200, wire::EncodeAuditList(*entries));
}

// GET /v1/admin/status.
Result<Response> AdminApi::StatusReport(const Request& request) {
  auto actor = Authorize(request);
  if (!actor.ok()) return actor.status();
  auto status = status_.Report();
  if (!status.ok()) return status.status();
  return Response::Json(200, wire::EncodeStatusView(*status));
}

// PUT /v1/admin/pools/{name} (docs/ignition.md): decoded, put by the core,
// answered 201 when the put made the pool.
Result<Response> AdminApi::PutPool(const Request& request) {
  auto actor = Authorize(request);
  if (!actor.ok()) return actor.status();
  auto put = wire::DecodePoolPutRequest(request.body);
  if (!put.ok()) return put.status();
  auto stored = pools_.Put(request.path_params.at("name"), *put, *actor);
  if (!stored.ok()) return stored.status();
  return Response::Json(stored->created ? 201 : 200, wire::EncodePoolView(stored->pool));
}

// PUT /v1/admin/pools/{name}/templates/{which}: the body is the template;
// DELETE removes it.
Result<Response> AdminApi::PutTemplate(const Request& request) {
  auto actor = Authorize(request);
  if (!actor.ok()) return actor.status();
  std::optional<std::string_view> text;
  if (request.method != "DELETE") text = request.body;
  auto stored = pools_.SetTemplate(request.path_params.at("name"), request.path_params.at("which"), text, *actor);
  if (!stored.ok()) return stored.status();
  return Response::Json(200, wire::EncodePoolView(*stored));
}

// GET /v1/admin/certificates?hostname=H&limit=N.
Result<Response> AdminApi::Certificates(const Request& request) {
  auto actor = Authorize(request);
  if (!actor.ok()) return actor.status();
  auto query = wire::DecodeCertificateQuery(request.query);
  if (!query.ok()) return query.status();
  auto certs = certificates_.List(query->hostname, query->limit);
  if (!certs.ok()) return certs.status();
  return Response::Json(200, wire::EncodeCertificateList(*certs));
}

Result<Response> AdminApi::RotateToken(const Request& request) {
  auto actor = Authorize(request);
  if (!actor.ok()) return actor.status();
  auto rotate = wire::DecodeTokenRotateRequest(request.body);
  if (!rotate.ok()) return rotate.status();
  auto rotated = pools_.RotateToken(request.path_params.at("name"), rotate->grace_seconds, *actor);
  if (!rotated.ok()) return rotated.status();
  return Response::Json(200, wire::EncodeTokenRotation(*rotated));
}

Result<Response> AdminApi::GetPools(const Request& request) {
  auto actor = Authorize(request);
  if (!actor.ok()) return actor.status();
  std::optional<std::string> one;
  if (auto it = request.path_params.find("name"); it != request.path_params.end()) one = it->second;
  auto pools = pools_.List(one);
  if (!pools.ok()) return pools.status();
  if (one) return Response::Json(200, wire::EncodePoolView(pools->front()));
  return Response::Json(200, wire::EncodePoolList(*pools));
}

// --- Webhook events (docs/events.md) -----------------------------------------

// GET /v1/admin/events?pending=1&limit=N.
Result<Response> AdminApi::Events(const Request& request) {
  auto actor = Authorize(request);
  if (!actor.ok()) return actor.status();
  auto query = wire::DecodeEventQuery(request.query);
  if (!query.ok()) return query.status();
  auto events = events_.List(query->limit, query->pending);
  if (!events.ok()) return events.status();
  return Response::Json(200, wire::EncodeEventList(*events));
}

// --- Manual CSR approval and discovery -----------------------------------------

namespace {

// The body of POST /v1/admin/machines/{hostname}/approve: what the operator
// sets as the pending machine is approved; absent fields keep the machine's.
Result<storage::ApprovalChanges> ApprovalChangesFromJson(const json& j) {
  storage::ApprovalChanges ch;
  if (j.contains("hostname")) {
    if (!j.at("hostname").is_string()) return Status::InvalidArgument("field_invalid", "hostname is a string");
    ch.hostname = j.at("hostname").get<std::string>();
  }
  if (j.contains("pool")) {
    if (!j.at("pool").is_string()) return Status::InvalidArgument("field_invalid", "pool is a string");
    ch.pool = j.at("pool").get<std::string>();
  }
  if (j.contains("addresses")) {
    if (!j.at("addresses").is_array()) return Status::InvalidArgument("field_invalid", "addresses must be a list");
    ch.addresses.emplace();
    for (const json& a : j.at("addresses")) {
      if (!a.is_object()) return Status::InvalidArgument("field_invalid", "an address is {kind, value}");
      ch.addresses->push_back({Str(a, "kind"), Str(a, "value")});
    }
  }
  if (j.contains("vars")) {
    auto vars = VarsJson(j.at("vars"));
    if (!vars.ok()) return vars.status();
    ch.vars_json = std::move(vars).value();
  }
  return ch;
}

}  // namespace

Result<Response> AdminApi::ApproveMachine(const Request& request) {
  auto actor = Authorize(request);
  if (!actor.ok()) return actor.status();
  auto a = *actor;
  // An empty body is the old call: approve as recorded.
  storage::ApprovalChanges changes;
  if (!request.body.empty()) {
    auto body = AdminBody(request);
    if (!body.ok()) return body.status();
    auto parsed = ApprovalChangesFromJson(*body);
    if (!parsed.ok()) return parsed.status();
    changes = std::move(parsed).value();
    a.why = Str(*body, "reason");
  }
  if (a.why.empty()) a.why = "by " + a.name;
  const std::string& host = request.path_params.at("hostname");
  auto m = store_->Approve(host, changes, a, attestation_->Now());
  if (!m.ok()) return m.status();
  Log()->info("{} approved {} as {} in pool {} ({})", a.name, host, m->hostname, m->pool, a.why);
  return Response::Json(200, MachineJson(*m).dump());
}

// GET /v1/admin/csrs[?all=1][&limit=N].
Result<Response> AdminApi::Csrs(const Request& request) {
  auto actor = Authorize(request);
  if (!actor.ok()) return actor.status();
  auto query = wire::DecodeCsrQuery(request.query);
  if (!query.ok()) return query.status();
  auto list = csr_approvals_.List(query->all, query->limit);
  if (!list.ok()) return list.status();
  return Response::Json(200, wire::EncodeCsrList(*list));
}

// POST /v1/admin/csrs/{id}/approve|deny.
Result<Response> AdminApi::DecideCsr(const Request& request, bool approve) {
  auto actor = Authorize(request);
  if (!actor.ok()) return actor.status();
  auto decision = wire::DecodeCsrDecisionRequest(request.body);
  if (!decision.ok()) return decision.status();
  auto decided = csr_approvals_.Decide(request.path_params.at("id"), approve, decision->reason, *actor);
  if (!decided.ok()) return decided.status();
  return Response::Json(200, wire::EncodeCsrView(*decided));
}

// --- Delete, rename, the audit chain (docs/lifecycle.md, docs/audit.md) -------

Result<Response> AdminApi::DeleteMachine(const Request& request) {
  auto actor = Authorize(request);
  if (!actor.ok()) return actor.status();
  auto a = *actor;
  // The body is optional: {"reason": TEXT}.
  auto body = request.body.empty() ? Result<json>(json::object()) : AdminBody(request);
  if (!body.ok()) return body.status();
  a.why = Str(*body, "reason");
  if (a.why.empty()) a.why = "deleted by " + a.name;
  const std::string& host = request.path_params.at("hostname");
  auto m = store_->DeleteMachine(host, a, attestation_->Now());
  if (!m.ok()) return m.status();
  Log()->info("{} deleted {} ek={} (was {}; {})", a.name, m->hostname, hex::Encode(m->ek_hash).substr(0, 16),
              storage::StateName(m->state), a.why);
  json out = MachineJson(*m);
  out["deleted"] = true;
  return Response::Json(200, out.dump());
}

Result<Response> AdminApi::RenameMachine(const Request& request) {
  auto actor = Authorize(request);
  if (!actor.ok()) return actor.status();
  auto a = *actor;
  auto body = AdminBody(request);
  if (!body.ok()) return body.status();
  const std::string to = Str(*body, "hostname");
  if (to.empty()) return Status::InvalidArgument("field_missing", "hostname (the new name) is required");
  a.why = Str(*body, "reason");
  const std::string& host = request.path_params.at("hostname");
  if (a.why.empty()) a.why = "renamed by " + a.name;
  auto m = store_->RenameMachine(host, to, a, attestation_->Now());
  if (!m.ok()) return m.status();
  Log()->info("{} renamed {} to {} ({})", a.name, host, m->hostname, a.why);
  json out = MachineJson(*m);
  out["renamed_from"] = host;
  return Response::Json(200, out.dump());
}

// GET /v1/admin/audit/verify[?anchor=ID:HASH]: 200 with the report, or
// 409 audit_chain_broken with the report beside the refusal.
Result<Response> AdminApi::VerifyAudit(const Request& request) {
  auto actor = Authorize(request);
  if (!actor.ok()) return actor.status();
  auto query = wire::DecodeAuditVerifyQuery(request.query);
  if (!query.ok()) return query.status();
  auto verdict = audit_.Verify(query->anchor, *actor);
  if (!verdict.ok()) return verdict.status();
  if (verdict->report.intact) return Response::Json(200, wire::EncodeAuditChain(verdict->report));
  Response r = AdminErrorResponse(Status::Corruption("audit_chain_broken", verdict->message));
  r.body = wire::AddAuditChainReport(r.body, verdict->report);
  return r;
}

}  // namespace rackgate::daemon
