// Machine administration: enrollments and imports checked and merged, the
// machines shown, and the operator's lifecycle changes.
#include "core/machine_service.h"

#include <malloc.h>

#include <nlohmann/json.hpp>
#include <utility>

#include "attest/ek_identity.h"
#include "attest/tpm.h"
#include "base/hex.h"
#include "base/log.h"
#include "core/attestation.h"
#include "core/enrollment_merge.h"
#include "wire/boot_policy_json.h"
#include "wire/codec.h"
#include "wire/protocol.h"

namespace rackgate::core {

namespace {

using nlohmann::json;

std::shared_ptr<spdlog::logger> Log() {
  static const auto log = Logger("admin");
  return log;
}

// Operator-set values for templates ({{machine.NAME}}): an object of at most
// 64 strings, names [A-Za-z0-9_-]{1,63}, values of at most 4 KiB; its
// compact text.
Result<std::string> VarsJson(const std::string& text) {
  const json vars = json::parse(text, nullptr, false);
  if (vars.is_discarded() || !vars.is_object() || vars.size() > 64) {
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

std::vector<storage::Address> Addresses(const std::vector<wire::AddressView>& given) {
  std::vector<storage::Address> out;
  out.reserve(given.size());
  for (const auto& a : given) out.push_back({a.kind, a.value});
  return out;
}

// The identity of an enrollment: the EK certificate validated against the
// trust anchors (and against the EK public area when both are given), the
// EK hash derived from the key.
Status EkIdentity(const wire::EnrollRequest& r, const AttestationService& service, storage::Enrollment* e) {
  std::optional<attest::TpmPublic> ek;
  if (r.ek_public_base64) {
    auto b = wire::Base64Decode(*r.ek_public_base64, wire::kMaxTpm2bPublic);
    if (!b) return Status::InvalidArgument("field_invalid", "ek_public is not base64");
    auto parsed = attest::ParseTpm2bPublic(*b);
    if (!parsed.ok()) return parsed.status().Annotate("ek_public");
    ek = std::move(parsed).value();
    e->ek_public = *b;
  }
  if (r.ek_certificate_base64) {
    auto b = wire::Base64Decode(*r.ek_certificate_base64, wire::kMaxCertificate);
    if (!b) return Status::InvalidArgument("field_invalid", "ek_certificate is not base64");
    auto info = service.CheckEkCertificate(*b, {}, ek ? &*ek : nullptr);
    if (!info.ok()) return info.status();
    auto hash = attest::EkKeyHashFromCertificate(info->der);
    if (!hash.ok()) return hash.status();
    e->ek_hash = *hash;
    e->ek_certificate = info->der;
    e->tpm_manufacturer = info->tpm_manufacturer;
    e->tpm_model = info->tpm_model;
    e->tpm_version = info->tpm_version;
    e->ek_relaxations = info->relaxations_used;  // named in the audit row
  } else if (ek) {
    auto hash = attest::EkKeyHash(*ek);
    if (!hash.ok()) return hash.status();
    e->ek_hash = *hash;
  } else {
    return Status::InvalidArgument("field_missing", "ek_certificate or ek_public is required");
  }
  return Status::Ok();
}

// One enrollment from its request: the identity, the boot policy and the
// vars checked. Refusals unmapped (EnrollRefusal is the caller's).
Result<storage::Enrollment> EnrollmentFrom(const wire::EnrollRequest& r, const AttestationService& service) {
  storage::Enrollment e;
  e.hostname = r.hostname;
  e.pool = r.pool.value_or("");  // "" when not given: enroll keeps the machine's
  if (e.hostname.empty()) return Status::InvalidArgument("field_missing", "hostname is required");
  if (Status s = EkIdentity(r, service, &e); !s.ok()) return s;
  if (r.addresses) e.addresses = Addresses(*r.addresses);
  if (r.policy_json) {
    auto policy = wire::ParseBootPolicy(*r.policy_json);
    if (!policy.ok()) return policy.status().Annotate("policy");
    e.policy_json = *r.policy_json;
  }
  if (r.vars_json) {
    auto vars = VarsJson(*r.vars_json);
    if (!vars.ok()) return vars.status();
    e.vars_json = std::move(vars).value();
  }
  return e;
}

// Which fields an enroll request gives (docs/protocol.md, "Enroll"): a field
// absent from the request is kept from the enrolled machine.
Result<EnrollFields> EnrollFieldsFrom(const wire::EnrollRequest& r) {
  EnrollFields f;
  f.pool = r.pool.has_value();
  f.addresses = r.addresses.has_value();
  f.replace_addresses = r.replace_addresses;
  f.vars = r.vars_json.has_value();
  f.replace_vars = r.replace_vars;
  if (r.unset_vars.size() > 64) {
    return Status::InvalidArgument("field_invalid", "unset_vars must be a list of at most 64 names");
  }
  for (const auto& n : r.unset_vars) {
    if (n.empty() || n.size() > 63) {
      return Status::InvalidArgument("field_invalid", "unset_vars: names are 1..63 characters");
    }
  }
  f.unset_vars = r.unset_vars;
  f.policy = r.policy_given || r.clear_policy;
  if (r.clear_policy && r.policy_json) {
    return Status::InvalidArgument("field_invalid", "give policy or clear_policy, not both");
  }
  return f;
}

// An import row's fields: its addresses are the row's (absent: none), and
// so are its vars and policy when it names them; a row that does not name
// vars or policy keeps the machine's (docs/inventory.md).
EnrollFields ImportFieldsFrom(const wire::EnrollRequest& r) {
  EnrollFields f;  // everything given and replaced
  f.vars = r.vars_given;
  f.policy = r.policy_given;
  return f;
}

wire::MachineView View(const storage::Machine& m) {
  wire::MachineView v;
  v.hostname = m.hostname;
  v.pool = m.pool;
  v.state = std::string(storage::StateName(m.state));
  v.ek_hash = hex::Encode(m.ek_hash);
  v.has_ek_certificate = m.ek_certificate.has_value();
  v.tpm_manufacturer = m.tpm_manufacturer;
  v.tpm_model = m.tpm_model;
  v.tpm_version = m.tpm_version;
  for (const auto& a : m.addresses) v.addresses.push_back({a.kind, a.value});
  v.created_at = m.created_at;
  v.updated_at = m.updated_at;
  v.has_policy = m.policy_json.has_value();
  v.vars_json = m.vars_json;
  v.last_attested_at = m.last_attested_at;
  v.client_cert_issued_at = m.client_cert_issued_at;
  v.trust = m.trust;
  v.trust_reason = m.trust_reason;
  v.trust_changed_at = m.trust_changed_at;
  return v;
}

wire::MachineReportView ReportView(const storage::ProvisioningReportRecord& r) {
  return {r.at, r.outcome, r.step, r.reason, r.message, r.exit_status, r.done};
}

// The merge of an enrollment's fields into the machine as stored.
storage::EnrollMerge MergeOf(const std::vector<storage::ImportRow>& rows, const std::vector<EnrollFields>& fields) {
  return [&rows, &fields](size_t i, const storage::Machine* stored, storage::MachineState state) {
    return MergeEnrollment(rows[i].enrollment, fields[i], stored, state);
  };
}

}  // namespace

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

MachineService::MachineService(storage::InventoryStore* inventory, storage::AttestationStore* attestations,
                               storage::IgnitionStore* reports, const AttestationService* attestation)
    : inventory_(inventory), attestations_(attestations), reports_(reports), attestation_(attestation) {}

Result<Enrolled> MachineService::Enroll(const wire::EnrollRequest& request, const storage::Actor& actor) {
  auto e = EnrollmentFrom(request, *attestation_);
  if (!e.ok()) return e.status();
  auto fields = EnrollFieldsFrom(request);
  if (!fields.ok()) return fields.status();
  storage::Actor a = actor;
  a.why = request.replace_ek ? "EK replaced by an operator" : "enrolled by an operator";
  const std::vector<storage::ImportRow> one = {{std::move(e).value(), ""}};
  const std::vector<EnrollFields> given = {std::move(fields).value()};
  auto o = inventory_->EnrollMerged(one[0].enrollment, MergeOf(one, given), a, request.replace_ek,
                                    attestation_->Now());
  if (!o.ok()) return o.status();
  const storage::Machine& m = o->machine;
  Log()->info("{} enrolled {} ek={} pool {}: {}", a.name, m.hostname, hex::Encode(m.ek_hash).substr(0, 16), m.pool,
              o->outcome);
  Enrolled out;
  out.created = o->outcome == storage::kEnrollCreated;
  out.answer.summary = EnrollSummary(m.hostname, o->outcome, o->changes);
  // An enroll never lifts a revocation (only a new EK, --replace-ek, or a
  // reset with unrevoke does): say so, or "unchanged" reads as all is well.
  if (m.state == storage::MachineState::kRevoked) {
    out.answer.summary += "; the machine is REVOKED and stays refused (`rackgatectl reset " + m.hostname +
                          " --unrevoke --reason TEXT` lifts it)";
  }
  out.answer.machine = View(m);
  out.answer.outcome = std::move(o->outcome);
  out.answer.changes = std::move(o->changes);
  return out;
}

Result<wire::ImportAnswer> MachineService::Import(const ImportDecoder& decode, const storage::Actor& actor) {
  // Each row becomes an enrollment as soon as it is decoded, so that an
  // inventory's JSON tree (four times its text: 276 MiB at the peak for
  // 50,000 machines) is never held whole.
  std::vector<storage::ImportRow> rows;
  std::vector<EnrollFields> fields;
  const auto add = [&](wire::ImportRowRequest row, size_t index) -> Status {
    if (index >= kMaxImportRows) {
      return Status::InvalidArgument("field_invalid",
                                     "at most " + std::to_string(kMaxImportRows) + " machines at once");
    }
    std::string where = wire::ImportRowWhere(row, index);
    auto e = EnrollmentFrom(row.machine, *attestation_);
    if (e.ok() && e->pool.empty()) e = Status::InvalidArgument("field_missing", "pool is required");
    if (!e.ok()) return e.status().Annotate(where + " (" + row.machine.hostname + ")");
    fields.push_back(ImportFieldsFrom(row.machine));
    rows.push_back({std::move(e).value(), std::move(where)});
    return Status::Ok();
  };
  auto request = decode(add);
  if (!request.ok()) return request.status();
  storage::ImportOptions options;
  options.dry_run = request->dry_run;
  storage::Actor a = actor;
  a.why = "inventory import";
  const size_t count = rows.size();
  auto report = inventory_->Import(rows, MergeOf(rows, fields), options, a, attestation_->Now());
  // Give the heap the rows used back to the system rather than keep the
  // high-water mark for the daemon's lifetime.
  rows.clear();
  rows.shrink_to_fit();
  fields.clear();
  fields.shrink_to_fit();
  malloc_trim(0);
  if (!report.ok()) return report.status();
  Log()->info("{} {} {} machines: created {}, updated {}, unchanged {}", a.name,
              options.dry_run ? "checked (dry run)" : "imported", count, report->created, report->updated,
              report->unchanged);
  wire::ImportAnswer out;
  out.imported = options.dry_run ? 0 : static_cast<int64_t>(count);
  out.dry_run = options.dry_run;
  out.created = static_cast<int64_t>(report->created);
  out.updated = static_cast<int64_t>(report->updated);
  out.unchanged = static_cast<int64_t>(report->unchanged);
  for (auto& r : report->rows) {
    out.rows.push_back({std::move(r.where), std::move(r.hostname), std::move(r.outcome), std::move(r.changes)});
  }
  return out;
}

Result<std::vector<wire::MachineView>> MachineService::List(const std::optional<std::string>& pool,
                                                            const std::optional<std::string>& state) {
  storage::MachineFilter filter;
  filter.pool = pool;
  // A pool that does not exist is an operator's typo, not an empty pool:
  // refused (pool_unknown), where an empty table would read as "no machines".
  if (pool) {
    if (auto p = inventory_->GetPool(*pool); !p.ok()) return p.status();
  }
  if (state) {
    filter.state = storage::ParseMachineState(*state);
    if (!filter.state) return Status::InvalidArgument("state_invalid", "unknown machine state '" + *state + "'");
  }
  auto list = inventory_->ListMachines(filter);
  if (!list.ok()) return list.status();
  auto reports = reports_->ListLastReports();
  if (!reports.ok()) return reports.status();
  std::vector<wire::MachineView> out;
  out.reserve(list->size());
  for (const auto& m : *list) {
    wire::MachineView v = View(m);
    v.with_last_report = true;
    if (auto r = reports->find(m.id); r != reports->end()) v.last_report = ReportView(r->second);
    out.push_back(std::move(v));
  }
  return out;
}

Result<wire::MachineView> MachineService::Show(const std::string& hostname) {
  auto m = inventory_->GetMachine(hostname);
  if (!m.ok()) return m.status();
  wire::MachineView v = View(*m);
  auto last = attestations_->LastSuccessfulAttestation(m->id);
  if (last.ok()) v.last_attestation = wire::MachineAttestationView{last->at, last->reset_count, last->restart_count,
                                                                   last->clock};
  auto report = reports_->LastReport(m->id);
  if (!report.ok() && report.status().code() != Status::Code::kNotFound) return report.status();
  v.with_last_report = true;
  if (report.ok()) v.last_report = ReportView(*report);
  return v;
}

Result<wire::MachineView> MachineService::Approve(const std::string& hostname, const wire::ApprovalRequest& request,
                                                  const storage::Actor& actor) {
  storage::ApprovalChanges changes;
  changes.hostname = request.hostname;
  changes.pool = request.pool;
  if (request.addresses) changes.addresses = Addresses(*request.addresses);
  if (request.vars_json) {
    auto vars = VarsJson(*request.vars_json);
    if (!vars.ok()) return vars.status();
    changes.vars_json = std::move(vars).value();
  }
  storage::Actor a = actor;
  a.why = request.reason.empty() ? "by " + a.name : request.reason;
  auto m = inventory_->Approve(hostname, changes, a, attestation_->Now());
  if (!m.ok()) return m.status();
  Log()->info("{} approved {} as {} in pool {} ({})", a.name, hostname, m->hostname, m->pool, a.why);
  return View(*m);
}

Result<wire::MachineView> MachineService::Revoke(const std::string& hostname, const std::string& reason,
                                                 const storage::Actor& actor) {
  if (reason.empty()) {
    return Status::InvalidArgument("field_missing", "a reason is required to revoke a machine");
  }
  storage::Actor a = actor;
  a.why = reason;
  auto m = inventory_->Revoke(hostname, a, attestation_->Now());
  if (!m.ok()) return m.status();
  Log()->info("{} revoke {}: now {} ({})", a.name, hostname, storage::StateName(m->state), a.why);
  return View(*m);
}

Result<wire::MachineView> MachineService::Reset(const std::string& hostname, const std::string& reason,
                                                bool unrevoke, const storage::Actor& actor) {
  storage::Actor a = actor;
  a.why = reason.empty() ? "by " + a.name : reason;
  auto m = inventory_->Reset(hostname, a, attestation_->Now(), unrevoke);
  if (!m.ok()) return m.status();
  Log()->info("{} reset {}{}: now {} ({})", a.name, hostname, unrevoke ? " (unrevoke)" : "",
              storage::StateName(m->state), a.why);
  return View(*m);
}

Result<wire::MachineView> MachineService::Delete(const std::string& hostname, const std::string& reason,
                                                 const storage::Actor& actor) {
  storage::Actor a = actor;
  a.why = reason.empty() ? "deleted by " + a.name : reason;
  auto m = inventory_->DeleteMachine(hostname, a, attestation_->Now());
  if (!m.ok()) return m.status();
  Log()->info("{} deleted {} ek={} (was {}; {})", a.name, m->hostname, hex::Encode(m->ek_hash).substr(0, 16),
              storage::StateName(m->state), a.why);
  wire::MachineView v = View(*m);
  v.deleted = true;
  return v;
}

Result<wire::MachineView> MachineService::Rename(const std::string& hostname, const wire::RenameRequest& request,
                                                 const storage::Actor& actor) {
  if (request.hostname.empty()) {
    return Status::InvalidArgument("field_missing", "hostname (the new name) is required");
  }
  storage::Actor a = actor;
  a.why = request.reason.empty() ? "renamed by " + a.name : request.reason;
  auto m = inventory_->RenameMachine(hostname, request.hostname, a, attestation_->Now());
  if (!m.ok()) return m.status();
  Log()->info("{} renamed {} to {} ({})", a.name, hostname, m->hostname, a.why);
  wire::MachineView v = View(*m);
  v.renamed_from = hostname;
  return v;
}

}  // namespace rackgate::core
