// The admin API's boot policy routes (docs/policy.md, "From observation to
// enforcement"): decode, call core::PolicyService, encode.
#include <string>

#include <nlohmann/json.hpp>

#include "base/log.h"
#include "core/policy_proposal.h"
#include "daemon/handlers_admin.h"
#include "daemon/status_http.h"
#include "storage/store.h"

namespace rackgate::daemon {

namespace {

using json = nlohmann::json;

// An empty body is an empty object: `policy accept` needs no field.
Result<json> PolicyBody(const Request& r) {
  if (r.body.empty()) return json::object();
  return AdminBody(r);
}

// A boolean field, false when absent.
Result<bool> Flag(const json& body, const char* name) {
  if (!body.contains(name)) return false;
  if (!body.at(name).is_boolean()) {
    return Status::InvalidArgument("field_invalid", std::string(name) + " must be true or false");
  }
  return body.at(name).get<bool>();
}

std::string Why(const json& body, const std::string& fallback) {
  if (body.contains("reason") && body.at("reason").is_string() && !body.at("reason").get<std::string>().empty()) {
    return body.at("reason").get<std::string>().substr(0, 1024);
  }
  return fallback;
}

// The stored policy as it may be shown: null when none, its kernel command
// line as a digest (core::PolicyForDisplay; docs/policy-proposal.md, "What
// is shown where").
json PolicyValue(const storage::Pool& pool) {
  if (!pool.boot_policy_json) return nullptr;
  return core::PolicyForDisplay(*pool.boot_policy_json);
}

json Applied(const core::PolicyApplied& a) {
  return {{"pool", a.pool.name},
          {"mode", a.pool.boot_policy_mode},
          {"policy", PolicyValue(a.pool)},
          {"diff", core::PolicyDiffToJson(a.diff)},
          {"diff_text", core::FormatPolicyDiffText(a.diff)}};
}

Response Dump(const json& j) { return Response::Json(200, j.dump(-1, ' ', false, json::error_handler_t::replace)); }

}  // namespace

Result<Response> AdminApi::PolicyShow(const Request& request) {
  auto actor = Authorize(request);
  if (!actor.ok()) return actor.status();
  const std::string& name = request.path_params.at("name");
  auto pool = store_->GetPool(name);
  if (!pool.ok()) return pool.status();
  auto observed = store_->ListBootObservations(name);
  if (!observed.ok()) return observed.status();
  json verdicts = {{"pass", 0}, {"fail", 0}, {"none", 0}};
  json machines = json::array();
  for (const auto& o : *observed) {
    verdicts[o.verdict] = verdicts.value(o.verdict, 0) + 1;
    machines.push_back({{"hostname", o.hostname}, {"at", o.at}, {"verdict", o.verdict}, {"violations", o.violations}});
  }
  json j = {{"pool", name},
            {"mode", pool->boot_policy_mode},
            {"policy", PolicyValue(*pool)},
            {"observed", observed->size()},
            {"verdicts", verdicts},
            {"machines", machines}};
  // The document itself, for `policy show --output FILE` only: the CLI
  // writes it to the operator's file and never prints it.
  if (pool->boot_policy_json) j["policy_text"] = *pool->boot_policy_json;
  return Dump(j);
}

Result<Response> AdminApi::PolicyMode(const Request& request) {
  auto actor = Authorize(request);
  if (!actor.ok()) return actor.status();
  auto body = PolicyBody(request);
  if (!body.ok()) return body.status();
  if (!body->contains("mode") || !body->at("mode").is_string()) {
    return Status::InvalidArgument("field_missing", "mode is required: \"observe\" or \"enforce\"");
  }
  auto a = *actor;
  const std::string mode = body->at("mode").get<std::string>();
  a.why = Why(*body, "boot policy mode set to " + (mode.size() <= 16 ? mode : std::string("?")) + " by an operator");
  auto pool = policies_.SetMode(request.path_params.at("name"), mode, a);
  if (!pool.ok()) return pool.status();
  return Dump({{"pool", pool->name}, {"mode", pool->boot_policy_mode}, {"policy", PolicyValue(*pool)}});
}

Result<Response> AdminApi::PolicyPropose(const Request& request) {
  auto actor = Authorize(request);
  if (!actor.ok()) return actor.status();
  auto report = policies_.Propose(request.path_params.at("name"));
  if (!report.ok()) return report.status();
  json j = core::ProposalToJson(report->proposal);
  j["pool"] = report->pool.name;
  j["mode"] = report->pool.boot_policy_mode;
  j["observed"] = report->observed;
  j["proposal_sha256"] = report->proposal_sha256;
  j["diff"] = core::PolicyDiffToJson(report->diff);
  // The CLI links no core: it prints these as they are.
  j["text"] = core::FormatProposalText(report->proposal);
  j["diff_text"] = core::FormatPolicyDiffText(report->diff);
  j["policy_shown"] = core::FormatPolicyForDisplay(report->proposal.policy_json);
  // The document itself, for `policy propose --output FILE` only: the CLI
  // writes it to the operator's file and never prints it.
  j["policy_text"] = report->proposal.policy_json;
  return Dump(j);
}

Result<Response> AdminApi::PolicyAccept(const Request& request) {
  auto actor = Authorize(request);
  if (!actor.ok()) return actor.status();
  auto body = PolicyBody(request);
  if (!body.ok()) return body.status();
  std::optional<std::string> expect;
  if (body->contains("proposal_sha256")) {
    if (!body->at("proposal_sha256").is_string()) {
      return Status::InvalidArgument("field_invalid", "proposal_sha256 is the hex digest `policy propose` printed");
    }
    expect = body->at("proposal_sha256").get<std::string>();
  }
  auto keep = Flag(*body, "keep_observing");
  if (!keep.ok()) return keep.status();
  auto a = *actor;
  a.why = Why(*body, "boot policy proposal accepted by an operator");
  auto applied = policies_.Accept(request.path_params.at("name"), expect, *keep, a);
  if (!applied.ok()) return applied.status();
  return Dump(Applied(*applied));
}

Result<Response> AdminApi::PolicyPut(const Request& request) {
  auto actor = Authorize(request);
  if (!actor.ok()) return actor.status();
  auto body = PolicyBody(request);
  if (!body.ok()) return body.status();
  if (!body->contains("policy")) {
    return Status::InvalidArgument("field_missing", "policy is required: the policy document, or null to clear it");
  }
  // A string is the policy's text as the operator wrote it: the parser then
  // sees duplicate keys, which a JSON object here would already have lost.
  std::optional<std::string> text;
  if (body->at("policy").is_string()) {
    text = body->at("policy").get<std::string>();
  } else if (!body->at("policy").is_null()) {
    text = body->at("policy").dump();
  }
  auto keep = Flag(*body, "keep_observing");
  if (!keep.ok()) return keep.status();
  auto a = *actor;
  a.why = Why(*body, text ? "boot policy put by an operator" : "boot policy cleared by an operator");
  auto applied = policies_.Put(request.path_params.at("name"), text, *keep, a);
  if (!applied.ok()) return applied.status();
  return Dump(Applied(*applied));
}

}  // namespace rackgate::daemon
