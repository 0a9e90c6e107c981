// Encoders and decoders of the admin API's audit bodies.
#include "wire/admin_audit.h"

#include <nlohmann/json.hpp>

#include "wire/admin_json.h"
#include "wire/refusal.h"

namespace rackgate::wire {

namespace {

using nlohmann::json;

Result<AuditEntryView> EntryFromJson(const json& j) {
  if (!j.is_object()) return Status::InvalidArgument("field_invalid", "an audit entry is a JSON object");
  auto id = admin_json::Int(j, "id");
  auto at = admin_json::Int(j, "at");
  auto actor = admin_json::String(j, "actor");
  auto action = admin_json::String(j, "action");
  auto hostname = admin_json::String(j, "hostname");
  auto why = admin_json::String(j, "why");
  auto from_state = admin_json::String(j, "from_state");
  auto to_state = admin_json::String(j, "to_state");
  if (Status s = admin_json::FirstError({id.status(), at.status(), actor.status(), action.status(),
                                         hostname.status(), why.status(), from_state.status(), to_state.status()});
      !s.ok()) {
    return s;
  }
  AuditEntryView e{id->value_or(0),          at->value_or(0),  actor->value_or(""), action->value_or(""),
                   hostname->value_or(""),   why->value_or(""), *from_state,         *to_state,
                   std::nullopt};
  if (j.contains("detail") && !j.at("detail").is_null()) e.detail_json = j.at("detail").dump();
  return e;
}

json ChainJson(const AuditChainView& r) {
  json out = {{"intact", r.intact}, {"rows", r.rows}, {"head_id", r.head_id}, {"head_hash", r.head_hash}};
  if (!r.intact) {
    out["bad_row_id"] = r.bad_row_id;
    out["problem"] = r.problem;
  }
  return out;
}

Result<AuditChainView> ChainFromJson(const json& j) {
  if (!j.is_object()) return Status::InvalidArgument("field_invalid", "report must be an object");
  auto intact = admin_json::Bool(j, "intact");
  auto rows = admin_json::Int(j, "rows");
  auto head_id = admin_json::Int(j, "head_id");
  auto head_hash = admin_json::String(j, "head_hash");
  auto bad_row_id = admin_json::Int(j, "bad_row_id");
  auto problem = admin_json::String(j, "problem");
  if (Status s = admin_json::FirstError({intact.status(), rows.status(), head_id.status(), head_hash.status(),
                                         bad_row_id.status(), problem.status()});
      !s.ok()) {
    return s;
  }
  return AuditChainView{intact->value_or(true),  rows->value_or(0),       head_id->value_or(0),
                        head_hash->value_or(""), bad_row_id->value_or(0), problem->value_or("")};
}

}  // namespace

std::string EncodeAuditChain(const AuditChainView& report) { return ChainJson(report).dump(); }

Result<AuditChainView> DecodeAuditChain(std::string_view body) {
  auto doc = admin_json::ParseObject(body);
  if (!doc.ok()) return doc.status();
  return ChainFromJson(*doc);
}

Result<AuditChainRefusal> DecodeAuditChainRefusal(std::string_view body) {
  auto doc = admin_json::ParseObject(body);
  if (!doc.ok()) return doc.status();
  if (!doc->contains("report")) return Status::InvalidArgument("field_missing", "the refusal carries no report");
  auto report = ChainFromJson(doc->at("report"));
  if (!report.ok()) return report.status();
  // The refusal beside the report: its message, "" when it has none.
  auto refusal = DecodeRefusal(body);
  if (!refusal.ok() && refusal.status().reason() != "field_missing") return refusal.status();
  return AuditChainRefusal{std::move(report).value(), refusal.ok() ? refusal->message : ""};
}

std::string EncodeAuditChainVerdict(const AuditChainView& report, const std::string& message) {
  json out = ChainJson(report);
  if (!report.intact) out["message"] = message;
  return out.dump(-1, ' ', false, json::error_handler_t::replace);
}

std::string AddAuditChainReport(std::string_view refusal_body, const AuditChainView& report) {
  json doc = json::parse(refusal_body, nullptr, false);
  if (!doc.is_object()) return std::string(refusal_body);
  doc["report"] = ChainJson(report);
  return doc.dump(-1, ' ', false, json::error_handler_t::replace);
}

std::string EncodeAuditList(const std::vector<AuditEntryView>& entries) {
  json out = json::array();
  for (const auto& e : entries) {
    json j = {{"id", e.id},         {"at", e.at},     {"actor", e.actor}, {"action", e.action},
              {"hostname", e.hostname}, {"why", e.why}};
    if (e.from_state) j["from_state"] = *e.from_state;
    if (e.to_state) j["to_state"] = *e.to_state;
    if (e.detail_json) {
      json detail = json::parse(*e.detail_json, nullptr, false);
      if (!detail.is_discarded()) j["detail"] = std::move(detail);
    }
    out.push_back(std::move(j));
  }
  return json{{"entries", out}}.dump();
}

Result<std::vector<AuditEntryView>> DecodeAuditList(std::string_view body) {
  return admin_json::ListBody<AuditEntryView>(body, "entries", EntryFromJson);
}

}  // namespace rackgate::wire
