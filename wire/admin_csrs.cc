// Encoder and decoder of the admin API's CSR approval bodies.
#include "wire/admin_csrs.h"

#include <nlohmann/json.hpp>

#include "wire/admin_json.h"

namespace rackgate::wire {

namespace {

using nlohmann::json;

json CsrJson(const CsrView& c) {
  json j = {{"id", c.id},
            {"hostname", c.hostname},
            {"kind", c.kind},
            {"public_key_sha256", c.public_key_sha256},
            {"usages", c.usages},
            {"tpm_resident", c.tpm_resident},
            {"state", c.state},
            {"created_at", c.created_at},
            {"age_seconds", c.age_seconds},
            {"current", c.current},
            {"csr", c.csr_pem}};
  if (c.decided_at) {
    j["decided_at"] = *c.decided_at;
    j["decided_by"] = c.decided_by;
  }
  if (!c.deny_reason.empty()) j["deny_reason"] = c.deny_reason;
  j["source"] = c.source;
  if (!c.name.empty()) j["name"] = c.name;
  if (!c.purpose.empty()) j["purpose"] = c.purpose;
  if (!c.reason.empty()) j["reason"] = c.reason;
  if (!c.uid.empty()) j["uid"] = c.uid;
  return j;
}

Result<CsrView> CsrFromJson(const json& j) {
  if (!j.is_object()) return Status::InvalidArgument("field_invalid", "a CSR is a JSON object");
  auto id = admin_json::Int(j, "id");
  auto hostname = admin_json::String(j, "hostname");
  auto kind = admin_json::String(j, "kind");
  auto key = admin_json::String(j, "public_key_sha256");
  auto tpm = admin_json::Bool(j, "tpm_resident");
  auto state = admin_json::String(j, "state");
  auto created_at = admin_json::Int(j, "created_at");
  auto age = admin_json::Int(j, "age_seconds");
  auto current = admin_json::Bool(j, "current");
  auto pem = admin_json::String(j, "csr");
  auto decided_at = admin_json::Int(j, "decided_at");
  auto decided_by = admin_json::String(j, "decided_by");
  auto deny_reason = admin_json::String(j, "deny_reason");
  if (Status s = admin_json::FirstError({id.status(), hostname.status(), kind.status(), key.status(), tpm.status(),
                                         state.status(), created_at.status(), age.status(), current.status(),
                                         pem.status(), decided_at.status(), decided_by.status(),
                                         deny_reason.status()});
      !s.ok()) {
    return s;
  }
  CsrView c;
  c.id = id->value_or(0);
  c.hostname = hostname->value_or("");
  c.kind = kind->value_or("");
  c.public_key_sha256 = key->value_or("");
  c.tpm_resident = tpm->value_or(false);
  c.state = state->value_or("");
  c.created_at = created_at->value_or(0);
  c.age_seconds = age->value_or(0);
  c.current = current->value_or(true);
  c.csr_pem = pem->value_or("");
  c.decided_at = *decided_at;
  c.decided_by = decided_by->value_or("");
  c.deny_reason = deny_reason->value_or("");
  auto usages = admin_json::Strings(j, "usages");
  if (!usages.ok()) return usages.status();
  c.usages = std::move(usages).value();
  // An appliance before approver mode sends no source: its CSRs are the agents'.
  auto source = admin_json::String(j, "source");
  auto name = admin_json::String(j, "name");
  auto purpose = admin_json::String(j, "purpose");
  auto reason = admin_json::String(j, "reason");
  auto uid = admin_json::String(j, "uid");
  if (Status s = admin_json::FirstError({source.status(), name.status(), purpose.status(), reason.status(),
                                         uid.status()});
      !s.ok()) {
    return s;
  }
  c.source = source->value_or("agent");
  c.name = name->value_or("");
  c.purpose = purpose->value_or("");
  c.reason = reason->value_or("");
  c.uid = uid->value_or("");
  return c;
}

}  // namespace

std::string EncodeCsrView(const CsrView& c) { return CsrJson(c).dump(); }

Result<CsrView> DecodeCsrView(std::string_view body) {
  auto doc = admin_json::ParseObject(body);
  if (!doc.ok()) return doc.status();
  return CsrFromJson(*doc);
}

std::string EncodeCsrList(const std::vector<CsrView>& csrs) {
  json out = json::array();
  for (const auto& c : csrs) out.push_back(CsrJson(c));
  return json{{"csrs", out}}.dump();
}

Result<std::vector<CsrView>> DecodeCsrList(std::string_view body) {
  return admin_json::ListBody<CsrView>(body, "csrs", CsrFromJson);
}

std::string EncodeCsrDecisionRequest(const CsrDecisionRequest& r) {
  json j = {{"reason", r.reason}};
  if (!r.uid.empty()) j["uid"] = r.uid;
  return j.dump();
}

Result<CsrDecisionRequest> DecodeCsrDecisionRequest(std::string_view body) {
  CsrDecisionRequest r;
  if (body.empty()) return r;
  auto doc = admin_json::ParseObject(body);
  if (!doc.ok()) return doc.status();
  auto reason = admin_json::String(*doc, "reason");
  auto uid = admin_json::String(*doc, "uid");
  if (Status s = admin_json::FirstError({reason.status(), uid.status()}); !s.ok()) return s;
  r.reason = reason->value_or("");
  r.uid = uid->value_or("");
  return r;
}

}  // namespace rackgate::wire
