// Encoder and decoder of the admin API's status.
#include "wire/admin_status.h"

#include <nlohmann/json.hpp>

#include "wire/admin_json.h"

namespace rackgate::wire {

namespace {

using nlohmann::json;

json StatusJson(const StatusView& s) {
  json failures = json::array();
  for (const auto& f : s.recent_failures) {
    failures.push_back({{"at", f.at}, {"hostname", f.hostname}, {"reason", f.reason}, {"reasons", f.reasons}});
  }
  json knocking = json::array();
  for (const auto& e : s.unknown_eks) {
    json k = {{"ek_hash", e.ek_hash}, {"first_seen", e.first_seen}, {"last_seen", e.last_seen},
              {"count", e.count},     {"address", e.address},       {"reason", e.reason}};
    if (!e.ek_certificate_issuer.empty()) k["ek_certificate_issuer"] = e.ek_certificate_issuer;
    if (!e.ek_certificate_subject.empty()) k["ek_certificate_subject"] = e.ek_certificate_subject;
    knocking.push_back(std::move(k));
  }
  json anonymous = json::array();
  for (const auto& a : s.anonymous_refusals) {
    anonymous.push_back({{"hostname", a.hostname},   {"count", a.count},     {"first_seen", a.first_seen},
                         {"last_seen", a.last_seen}, {"address", a.address}, {"reason", a.reason}});
  }
  json out = {{"machines_by_state", s.machines_by_state},
              {"recent_failures", std::move(failures)},
              {"machines_untrusted", s.machines_untrusted},
              {"pools_observing_boot_policy", s.pools_observing_boot_policy},
              {"unknown_eks", std::move(knocking)},
              {"anonymous_refusals", std::move(anonymous)},
              {"anonymous_refusals_total", s.anonymous_refusals_total}};
  if (!s.cluster_ca.stage.empty()) {
    out["cluster_ca"] = {{"stage", s.cluster_ca.stage},
                         {"not_after", s.cluster_ca.not_after},
                         {"other_not_after", s.cluster_ca.other_not_after}};
  }
  // Only while a rotation runs: the answer of an appliance at rest is as before.
  if (!s.appliance_ca_rotation.empty()) {
    out["appliance_ca_rotation"] = s.appliance_ca_rotation;
    out["appliance_ca_rotation_since"] = s.appliance_ca_rotation_since;
  }
  return out;
}

// "cluster_ca": absent, or {stage, not_after, other_not_after}.
Result<ClusterCaView> ClusterCaFromJson(const json& doc) {
  ClusterCaView v;
  if (!doc.contains("cluster_ca")) return v;
  const json& j = doc.at("cluster_ca");
  if (!j.is_object()) return Status::InvalidArgument("field_invalid", "cluster_ca is a JSON object");
  auto stage = admin_json::String(j, "stage");
  auto not_after = admin_json::Int(j, "not_after");
  auto other = admin_json::Int(j, "other_not_after");
  if (Status s = admin_json::FirstError({stage.status(), not_after.status(), other.status()}); !s.ok()) return s;
  if (!stage->has_value() || (*stage)->empty()) {
    return Status::InvalidArgument("field_missing", "cluster_ca has no stage");
  }
  v.stage = **stage;
  v.not_after = not_after->value_or(0);
  v.other_not_after = other->value_or(0);
  return v;
}

Result<StatusFailureView> FailureFromJson(const json& j) {
  if (!j.is_object()) return Status::InvalidArgument("field_invalid", "a failure is a JSON object");
  auto at = admin_json::Int(j, "at");
  auto hostname = admin_json::String(j, "hostname");
  auto reason = admin_json::String(j, "reason");
  auto reasons = admin_json::Strings(j, "reasons");
  if (Status s = admin_json::FirstError({at.status(), hostname.status(), reason.status(), reasons.status()});
      !s.ok()) {
    return s;
  }
  return StatusFailureView{at->value_or(0), hostname->value_or(""), reason->value_or(""), *reasons};
}

Result<UnknownEkView> UnknownEkFromJson(const json& j) {
  if (!j.is_object()) return Status::InvalidArgument("field_invalid", "an unknown EK is a JSON object");
  auto hash = admin_json::String(j, "ek_hash");
  auto first = admin_json::Int(j, "first_seen");
  auto last = admin_json::Int(j, "last_seen");
  auto count = admin_json::Uint(j, "count");
  auto address = admin_json::String(j, "address");
  auto reason = admin_json::String(j, "reason");
  auto issuer = admin_json::String(j, "ek_certificate_issuer");
  auto subject = admin_json::String(j, "ek_certificate_subject");
  if (Status s = admin_json::FirstError({hash.status(), first.status(), last.status(), count.status(),
                                         address.status(), reason.status(), issuer.status(), subject.status()});
      !s.ok()) {
    return s;
  }
  return UnknownEkView{hash->value_or(""),   first->value_or(0),  last->value_or(0),    count->value_or(0),
                       address->value_or(""), reason->value_or(""), issuer->value_or(""), subject->value_or("")};
}

Result<AnonymousRefusalView> AnonymousFromJson(const json& j) {
  if (!j.is_object()) return Status::InvalidArgument("field_invalid", "an anonymous refusal is a JSON object");
  auto hostname = admin_json::String(j, "hostname");
  auto count = admin_json::Uint(j, "count");
  auto first = admin_json::Int(j, "first_seen");
  auto last = admin_json::Int(j, "last_seen");
  auto address = admin_json::String(j, "address");
  auto reason = admin_json::String(j, "reason");
  if (Status s = admin_json::FirstError({hostname.status(), count.status(), first.status(), last.status(),
                                         address.status(), reason.status()});
      !s.ok()) {
    return s;
  }
  return AnonymousRefusalView{hostname->value_or(""), count->value_or(0),    first->value_or(0),
                              last->value_or(0),      address->value_or(""), reason->value_or("")};
}

Result<std::map<std::string, int64_t>> CountsFromJson(const json& doc) {
  std::map<std::string, int64_t> out;
  if (!doc.contains("machines_by_state") || doc.at("machines_by_state").is_null()) return out;
  const json& counts = doc.at("machines_by_state");
  if (!counts.is_object()) return Status::InvalidArgument("field_invalid", "machines_by_state must be an object");
  for (const auto& [state, n] : counts.items()) {
    auto v = admin_json::Int(counts, state.c_str());
    if (!v.ok()) return v.status();
    out[state] = v->value_or(0);
  }
  return out;
}

}  // namespace

std::string EncodeStatusView(const StatusView& status) {
  return StatusJson(status).dump(-1, ' ', false, json::error_handler_t::replace);
}

Result<StatusView> DecodeStatusView(std::string_view body) {
  auto doc = admin_json::ParseObject(body);
  if (!doc.ok()) return doc.status();
  auto counts = CountsFromJson(*doc);
  auto failures = admin_json::List<StatusFailureView>(*doc, "recent_failures", FailureFromJson);
  auto untrusted = admin_json::Int(*doc, "machines_untrusted");
  auto observing = admin_json::Strings(*doc, "pools_observing_boot_policy");
  auto knocking = admin_json::List<UnknownEkView>(*doc, "unknown_eks", UnknownEkFromJson);
  auto anonymous = admin_json::List<AnonymousRefusalView>(*doc, "anonymous_refusals", AnonymousFromJson);
  auto total = admin_json::Uint(*doc, "anonymous_refusals_total");
  auto cluster_ca = ClusterCaFromJson(*doc);
  auto rotation = admin_json::String(*doc, "appliance_ca_rotation");
  auto since = admin_json::Int(*doc, "appliance_ca_rotation_since");
  if (Status s = admin_json::FirstError({counts.status(), failures.status(), untrusted.status(), observing.status(),
                                         knocking.status(), anonymous.status(), total.status(), cluster_ca.status(),
                                         rotation.status(), since.status()});
      !s.ok()) {
    return s;
  }
  StatusView out{std::move(counts).value(),   std::move(failures).value(),  untrusted->value_or(0),
                 std::move(observing).value(), std::move(knocking).value(), std::move(anonymous).value(),
                 total->value_or(0),            rotation->value_or(""),       since->value_or(0)};
  out.cluster_ca = std::move(cluster_ca).value();
  return out;
}

}  // namespace rackgate::wire
