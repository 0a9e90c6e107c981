// Encoders and decoders of the admin API's boot policy bodies.
#include "wire/admin_policy.h"

#include <nlohmann/json.hpp>
#include <utility>

#include "wire/admin_json.h"

namespace rackgate::wire {

namespace {

using nlohmann::json;

std::string Dump(const json& j) { return j.dump(-1, ' ', false, json::error_handler_t::replace); }

// An empty body is an empty object: accept and mode need few fields.
Result<json> RequestBody(std::string_view body) {
  if (body.empty()) return json::object();
  return admin_json::ParseObject(body);
}

// The operator's reason when it is a string; "" otherwise.
std::string Reason(const json& body) {
  return body.contains("reason") && body.at("reason").is_string() ? body.at("reason").get<std::string>() : "";
}

void PutReason(const std::string& reason, json* body) {
  if (!reason.empty()) (*body)["reason"] = reason;
}

Result<bool> KeepObserving(const json& body) {
  auto keep = admin_json::Bool(body, "keep_observing");
  if (!keep.ok()) return keep.status();
  return keep->value_or(false);
}

json Shown(const std::optional<std::string>& policy_json) {
  if (!policy_json) return nullptr;
  json j = json::parse(*policy_json, nullptr, false);
  return j.is_discarded() ? json(nullptr) : j;
}

std::optional<std::string> ShownFromJson(const json& j, const char* key) {
  if (!j.contains(key) || j.at(key).is_null()) return std::nullopt;
  return Dump(j.at(key));
}

json DiffJson(const PolicyDiffView& d) {
  json changes = json::array();
  for (const auto& c : d.changes) {
    changes.push_back({{"rule", c.rule}, {"kind", c.kind}, {"added", c.added}, {"removed", c.removed}});
  }
  return {{"had_current", d.had_current}, {"note", d.note}, {"changes", std::move(changes)}};
}

Result<PolicyChangeView> ChangeFromJson(const json& j) {
  if (!j.is_object()) return Status::InvalidArgument("field_invalid", "a change is a JSON object");
  auto rule = admin_json::String(j, "rule");
  auto kind = admin_json::String(j, "kind");
  auto added = admin_json::Strings(j, "added");
  auto removed = admin_json::Strings(j, "removed");
  if (Status s = admin_json::FirstError({rule.status(), kind.status(), added.status(), removed.status()}); !s.ok()) {
    return s;
  }
  return PolicyChangeView{rule->value_or(""), kind->value_or(""), *added, *removed};
}

Result<PolicyDiffView> DiffFromJson(const json& doc) {
  if (!doc.contains("diff") || doc.at("diff").is_null()) return PolicyDiffView{};
  const json& j = doc.at("diff");
  if (!j.is_object()) return Status::InvalidArgument("field_invalid", "diff must be an object");
  auto had = admin_json::Bool(j, "had_current");
  auto note = admin_json::String(j, "note");
  auto changes = admin_json::List<PolicyChangeView>(j, "changes", ChangeFromJson);
  if (Status s = admin_json::FirstError({had.status(), note.status(), changes.status()}); !s.ok()) return s;
  return PolicyDiffView{had->value_or(false), note->value_or(""), std::move(changes).value()};
}

Result<ObservedMachineView> ObservedFromJson(const json& j) {
  if (!j.is_object()) return Status::InvalidArgument("field_invalid", "a machine is a JSON object");
  auto hostname = admin_json::String(j, "hostname");
  auto at = admin_json::Int(j, "at");
  auto verdict = admin_json::String(j, "verdict");
  auto violations = admin_json::Strings(j, "violations");
  if (Status s = admin_json::FirstError({hostname.status(), at.status(), verdict.status(), violations.status()});
      !s.ok()) {
    return s;
  }
  return ObservedMachineView{hostname->value_or(""), at->value_or(0), verdict->value_or(""), *violations};
}

Result<std::map<std::string, int64_t>> VerdictsFromJson(const json& doc) {
  std::map<std::string, int64_t> out;
  if (!doc.contains("verdicts") || doc.at("verdicts").is_null()) return out;
  const json& v = doc.at("verdicts");
  if (!v.is_object()) return Status::InvalidArgument("field_invalid", "verdicts must be an object");
  for (const auto& [name, n] : v.items()) {
    auto count = admin_json::Int(v, name.c_str());
    if (!count.ok()) return count.status();
    out[name] = count->value_or(0);
  }
  return out;
}

json ProposalJson(const PolicyProposalView& v) {
  json j = json::object();
  j["summary"] = {{"machines", v.machines.size()},
                  {"platforms", v.platforms.size()},
                  {"odd", v.odd.size()},
                  {"unusable", v.unusable.size()}};
  j["policy"] = Shown(v.policy_shown_json);
  j["machines"] = v.machines;
  j["platforms"] = json::array();
  for (const auto& g : v.platforms) {
    j["platforms"].push_back({{"firmware", g.firmware},
                              {"tpm_manufacturer", g.tpm_manufacturer},
                              {"tpm_model", g.tpm_model},
                              {"hostnames", g.hostnames}});
  }
  j["rules"] = json::array();
  j["undecided"] = json::array();
  for (const auto& r : v.rules) {
    json values = json::array();
    for (const auto& value : r.values) values.push_back({{"items", value.items}, {"hostnames", value.hostnames}});
    j["rules"].push_back({{"rule", r.rule},
                          {"decided", r.decided},
                          {"proposed", r.proposed},
                          {"agreeing", r.agreeing},
                          {"values", std::move(values)}});
    if (!r.decided) j["undecided"].push_back(r.rule);
  }
  j["odd"] = json::array();
  for (const auto& o : v.odd) {
    json differences = json::array(), violations = json::array();
    for (const auto& d : o.differences) differences.push_back({{"rule", d.rule}, {"message", d.message}});
    for (const auto& x : o.violations) {
      violations.push_back({{"rule", x.rule}, {"reason", x.reason}, {"message", x.message}});
    }
    j["odd"].push_back(
        {{"hostname", o.hostname}, {"differences", std::move(differences)}, {"violations", std::move(violations)}});
  }
  j["unusable"] = json::array();
  for (const auto& u : v.unusable) {
    j["unusable"].push_back({{"hostname", u.hostname}, {"reason", u.reason}, {"message", u.message}});
  }
  return j;
}

Result<ProposalPlatformView> PlatformFromJson(const json& j) {
  if (!j.is_object()) return Status::InvalidArgument("field_invalid", "a platform is a JSON object");
  auto firmware = admin_json::String(j, "firmware");
  auto manufacturer = admin_json::String(j, "tpm_manufacturer");
  auto model = admin_json::String(j, "tpm_model");
  auto hostnames = admin_json::Strings(j, "hostnames");
  if (Status s = admin_json::FirstError({firmware.status(), manufacturer.status(), model.status(), hostnames.status()});
      !s.ok()) {
    return s;
  }
  return ProposalPlatformView{firmware->value_or(""), manufacturer->value_or(""), model->value_or(""), *hostnames};
}

Result<ProposalValueView> ValueFromJson(const json& j) {
  if (!j.is_object()) return Status::InvalidArgument("field_invalid", "a rule's value is a JSON object");
  auto items = admin_json::Strings(j, "items");
  auto hostnames = admin_json::Strings(j, "hostnames");
  if (Status s = admin_json::FirstError({items.status(), hostnames.status()}); !s.ok()) return s;
  return ProposalValueView{*items, *hostnames};
}

Result<ProposalRuleView> RuleFromJson(const json& j) {
  if (!j.is_object()) return Status::InvalidArgument("field_invalid", "a rule is a JSON object");
  auto rule = admin_json::String(j, "rule");
  auto decided = admin_json::Bool(j, "decided");
  auto proposed = admin_json::Bool(j, "proposed");
  auto agreeing = admin_json::Strings(j, "agreeing");
  auto values = admin_json::List<ProposalValueView>(j, "values", ValueFromJson);
  if (Status s = admin_json::FirstError(
          {rule.status(), decided.status(), proposed.status(), agreeing.status(), values.status()});
      !s.ok()) {
    return s;
  }
  return ProposalRuleView{rule->value_or(""), decided->value_or(false), proposed->value_or(false), *agreeing,
                          std::move(values).value()};
}

Result<ProposalDifferenceView> DifferenceFromJson(const json& j) {
  if (!j.is_object()) return Status::InvalidArgument("field_invalid", "a difference is a JSON object");
  auto rule = admin_json::String(j, "rule");
  auto message = admin_json::String(j, "message");
  if (Status s = admin_json::FirstError({rule.status(), message.status()}); !s.ok()) return s;
  return ProposalDifferenceView{rule->value_or(""), message->value_or("")};
}

Result<ProposalViolationView> ViolationFromJson(const json& j) {
  if (!j.is_object()) return Status::InvalidArgument("field_invalid", "a violation is a JSON object");
  auto rule = admin_json::String(j, "rule");
  auto reason = admin_json::String(j, "reason");
  auto message = admin_json::String(j, "message");
  if (Status s = admin_json::FirstError({rule.status(), reason.status(), message.status()}); !s.ok()) return s;
  return ProposalViolationView{rule->value_or(""), reason->value_or(""), message->value_or("")};
}

Result<ProposalOddView> OddFromJson(const json& j) {
  if (!j.is_object()) return Status::InvalidArgument("field_invalid", "an odd machine is a JSON object");
  auto hostname = admin_json::String(j, "hostname");
  auto differences = admin_json::List<ProposalDifferenceView>(j, "differences", DifferenceFromJson);
  auto violations = admin_json::List<ProposalViolationView>(j, "violations", ViolationFromJson);
  if (Status s = admin_json::FirstError({hostname.status(), differences.status(), violations.status()}); !s.ok()) {
    return s;
  }
  return ProposalOddView{hostname->value_or(""), std::move(differences).value(), std::move(violations).value()};
}

Result<ProposalUnusableView> UnusableFromJson(const json& j) {
  if (!j.is_object()) return Status::InvalidArgument("field_invalid", "an unusable machine is a JSON object");
  auto hostname = admin_json::String(j, "hostname");
  auto reason = admin_json::String(j, "reason");
  auto message = admin_json::String(j, "message");
  if (Status s = admin_json::FirstError({hostname.status(), reason.status(), message.status()}); !s.ok()) return s;
  return ProposalUnusableView{hostname->value_or(""), reason->value_or(""), message->value_or("")};
}

}  // namespace

// --- Requests ----------------------------------------------------------------

std::string EncodePolicyModeRequest(const PolicyModeRequest& r) {
  json j = {{"mode", r.mode}};
  PutReason(r.reason, &j);
  return Dump(j);
}

Result<PolicyModeRequest> DecodePolicyModeRequest(std::string_view body) {
  auto doc = RequestBody(body);
  if (!doc.ok()) return doc.status();
  if (!doc->contains("mode") || !doc->at("mode").is_string()) {
    return Status::InvalidArgument("field_missing", "mode is required: \"observe\" or \"enforce\"");
  }
  return PolicyModeRequest{doc->at("mode").get<std::string>(), Reason(*doc)};
}

std::string EncodePolicyAcceptRequest(const PolicyAcceptRequest& r) {
  json j = {{"keep_observing", r.keep_observing}};
  if (r.proposal_sha256) j["proposal_sha256"] = *r.proposal_sha256;
  PutReason(r.reason, &j);
  return Dump(j);
}

Result<PolicyAcceptRequest> DecodePolicyAcceptRequest(std::string_view body) {
  auto doc = RequestBody(body);
  if (!doc.ok()) return doc.status();
  PolicyAcceptRequest r;
  if (doc->contains("proposal_sha256")) {
    if (!doc->at("proposal_sha256").is_string()) {
      return Status::InvalidArgument("field_invalid", "proposal_sha256 is the hex digest `policy propose` printed");
    }
    r.proposal_sha256 = doc->at("proposal_sha256").get<std::string>();
  }
  auto keep = KeepObserving(*doc);
  if (!keep.ok()) return keep.status();
  r.keep_observing = *keep;
  r.reason = Reason(*doc);
  return r;
}

std::string EncodePolicyPutRequest(const PolicyPutRequest& r) {
  json j = {{"keep_observing", r.keep_observing}, {"policy", r.policy_text ? json(*r.policy_text) : json(nullptr)}};
  PutReason(r.reason, &j);
  return Dump(j);
}

Result<PolicyPutRequest> DecodePolicyPutRequest(std::string_view body) {
  auto doc = RequestBody(body);
  if (!doc.ok()) return doc.status();
  if (!doc->contains("policy")) {
    return Status::InvalidArgument("field_missing", "policy is required: the policy document, or null to clear it");
  }
  PolicyPutRequest r;
  const json& policy = doc->at("policy");
  if (policy.is_string()) {
    r.policy_text = policy.get<std::string>();
  } else if (!policy.is_null()) {
    r.policy_text = policy.dump();
  }
  auto keep = KeepObserving(*doc);
  if (!keep.ok()) return keep.status();
  r.keep_observing = *keep;
  r.reason = Reason(*doc);
  return r;
}

// --- Show, mode, applied -----------------------------------------------------

std::string EncodePolicyShowView(const PolicyShowView& v) {
  json machines = json::array();
  for (const auto& m : v.machines) {
    machines.push_back({{"hostname", m.hostname}, {"at", m.at}, {"verdict", m.verdict}, {"violations", m.violations}});
  }
  json j = {{"pool", v.pool},         {"mode", v.mode},         {"policy", Shown(v.policy_shown_json)},
            {"observed", v.observed}, {"verdicts", v.verdicts}, {"machines", std::move(machines)}};
  if (v.policy_text) j["policy_text"] = *v.policy_text;
  return Dump(j);
}

Result<PolicyShowView> DecodePolicyShowView(std::string_view body) {
  auto doc = admin_json::ParseObject(body);
  if (!doc.ok()) return doc.status();
  auto pool = admin_json::String(*doc, "pool");
  auto mode = admin_json::String(*doc, "mode");
  auto observed = admin_json::Int(*doc, "observed");
  auto verdicts = VerdictsFromJson(*doc);
  auto machines = admin_json::List<ObservedMachineView>(*doc, "machines", ObservedFromJson);
  auto text = admin_json::String(*doc, "policy_text");
  if (Status s = admin_json::FirstError({pool.status(), mode.status(), observed.status(), verdicts.status(),
                                         machines.status(), text.status()});
      !s.ok()) {
    return s;
  }
  return PolicyShowView{pool->value_or(""),         mode->value_or(""),        ShownFromJson(*doc, "policy"),
                        observed->value_or(0),      std::move(verdicts).value(), std::move(machines).value(),
                        *text};
}

std::string EncodePolicyModeView(const PolicyModeView& v) {
  return Dump({{"pool", v.pool}, {"mode", v.mode}, {"policy", Shown(v.policy_shown_json)}});
}

Result<PolicyModeView> DecodePolicyModeView(std::string_view body) {
  auto doc = admin_json::ParseObject(body);
  if (!doc.ok()) return doc.status();
  auto pool = admin_json::String(*doc, "pool");
  auto mode = admin_json::String(*doc, "mode");
  if (Status s = admin_json::FirstError({pool.status(), mode.status()}); !s.ok()) return s;
  return PolicyModeView{pool->value_or(""), mode->value_or(""), ShownFromJson(*doc, "policy")};
}

std::string EncodePolicyAppliedView(const PolicyAppliedView& v) {
  return Dump({{"pool", v.pool},
               {"mode", v.mode},
               {"policy", Shown(v.policy_shown_json)},
               {"diff", DiffJson(v.diff)},
               {"diff_text", v.diff_text}});
}

Result<PolicyAppliedView> DecodePolicyAppliedView(std::string_view body) {
  auto doc = admin_json::ParseObject(body);
  if (!doc.ok()) return doc.status();
  auto pool = admin_json::String(*doc, "pool");
  auto mode = admin_json::String(*doc, "mode");
  auto diff = DiffFromJson(*doc);
  auto diff_text = admin_json::String(*doc, "diff_text");
  if (Status s = admin_json::FirstError({pool.status(), mode.status(), diff.status(), diff_text.status()}); !s.ok()) {
    return s;
  }
  return PolicyAppliedView{pool->value_or(""), mode->value_or(""), ShownFromJson(*doc, "policy"),
                           std::move(diff).value(), diff_text->value_or("")};
}

// --- The proposal --------------------------------------------------------------

std::string EncodePolicyProposalView(const PolicyProposalView& v) {
  json j = ProposalJson(v);
  j["pool"] = v.pool;
  j["mode"] = v.mode;
  j["observed"] = v.observed;
  j["proposal_sha256"] = v.proposal_sha256;
  j["diff"] = DiffJson(v.diff);
  if (v.text) j["text"] = *v.text;
  if (v.diff_text) j["diff_text"] = *v.diff_text;
  if (v.policy_shown) j["policy_shown"] = *v.policy_shown;
  if (v.policy_text) j["policy_text"] = *v.policy_text;
  return Dump(j);
}

Result<PolicyProposalView> DecodePolicyProposalView(std::string_view body) {
  auto doc = admin_json::ParseObject(body);
  if (!doc.ok()) return doc.status();
  const json& j = *doc;
  auto pool = admin_json::String(j, "pool");
  auto mode = admin_json::String(j, "mode");
  auto observed = admin_json::Int(j, "observed");
  auto sha = admin_json::String(j, "proposal_sha256");
  auto machines = admin_json::Strings(j, "machines");
  auto platforms = admin_json::List<ProposalPlatformView>(j, "platforms", PlatformFromJson);
  auto rules = admin_json::List<ProposalRuleView>(j, "rules", RuleFromJson);
  auto odd = admin_json::List<ProposalOddView>(j, "odd", OddFromJson);
  auto unusable = admin_json::List<ProposalUnusableView>(j, "unusable", UnusableFromJson);
  auto diff = DiffFromJson(j);
  auto text = admin_json::String(j, "text");
  auto diff_text = admin_json::String(j, "diff_text");
  auto shown = admin_json::String(j, "policy_shown");
  auto policy_text = admin_json::String(j, "policy_text");
  if (Status s = admin_json::FirstError({pool.status(), mode.status(), observed.status(), sha.status(),
                                         machines.status(), platforms.status(), rules.status(), odd.status(),
                                         unusable.status(), diff.status(), text.status(), diff_text.status(),
                                         shown.status(), policy_text.status()});
      !s.ok()) {
    return s;
  }
  PolicyProposalView v;
  v.pool = pool->value_or("");
  v.mode = mode->value_or("");
  v.observed = observed->value_or(0);
  v.proposal_sha256 = sha->value_or("");
  v.policy_shown_json = ShownFromJson(j, "policy").value_or(v.policy_shown_json);
  v.machines = std::move(machines).value();
  v.platforms = std::move(platforms).value();
  v.rules = std::move(rules).value();
  v.odd = std::move(odd).value();
  v.unusable = std::move(unusable).value();
  v.diff = std::move(diff).value();
  v.text = *text;
  v.diff_text = *diff_text;
  v.policy_shown = *shown;
  v.policy_text = *policy_text;
  return v;
}

}  // namespace rackgate::wire
