// Encoders and decoders of the admin API's pool bodies.
#include "wire/admin_pools.h"

#include <nlohmann/json.hpp>

#include "wire/admin_json.h"

namespace rackgate::wire {

namespace {

using nlohmann::json;

constexpr char kPublic[] = "public";
constexpr char kAttested[] = "attested";

json TokenJson(const PoolTokenView& t) {
  json j = {{"created_at", t.created_at}, {"current", t.current}};
  if (t.valid_until) j["valid_until"] = *t.valid_until;
  return j;
}

json PoolJson(const PoolView& p) {
  json j = {{"name", p.name},
            {"settings", json::parse(p.settings_json, nullptr, false)},
            {"token_required", p.token_required},
            {"boot_policy_mode", p.boot_policy_mode},
            {"created_at", p.created_at},
            {"updated_at", p.updated_at}};
  if (p.boot_policy_json) j["boot_policy"] = json::parse(*p.boot_policy_json, nullptr, false);
  json templates = json::object();
  if (p.public_template_json) templates[kPublic] = json::parse(*p.public_template_json, nullptr, false);
  if (p.attested_template_json) templates[kAttested] = json::parse(*p.attested_template_json, nullptr, false);
  j["templates"] = templates;
  json tokens = json::array();
  for (const auto& t : p.provisioning_tokens) tokens.push_back(TokenJson(t));
  j["provisioning_tokens"] = tokens;
  if (p.provisioning_token) j["provisioning_token"] = *p.provisioning_token;
  return j;
}

Result<PoolView> PoolFromJson(const json& j) {
  if (!j.is_object()) return Status::InvalidArgument("field_invalid", "a pool is a JSON object");
  PoolView p;
  auto name = admin_json::String(j, "name");
  auto mode = admin_json::String(j, "boot_policy_mode");
  auto required = admin_json::Bool(j, "token_required");
  auto created = admin_json::Int(j, "created_at");
  auto updated = admin_json::Int(j, "updated_at");
  auto token = admin_json::String(j, "provisioning_token");
  if (Status s = admin_json::FirstError({name.status(), mode.status(), required.status(), created.status(),
                                         updated.status(), token.status()});
      !s.ok()) {
    return s;
  }
  p.name = name->value_or("");
  p.boot_policy_mode = mode->value_or("");
  p.token_required = required->value_or(false);
  p.created_at = created->value_or(0);
  p.updated_at = updated->value_or(0);
  p.provisioning_token = *token;
  if (j.contains("settings")) p.settings_json = j.at("settings").dump();
  if (j.contains("boot_policy") && !j.at("boot_policy").is_null()) p.boot_policy_json = j.at("boot_policy").dump();
  if (j.contains("templates")) {
    const json& t = j.at("templates");
    if (!t.is_object()) return Status::InvalidArgument("field_invalid", "templates must be an object");
    if (t.contains(kPublic)) p.public_template_json = t.at(kPublic).dump();
    if (t.contains(kAttested)) p.attested_template_json = t.at(kAttested).dump();
  }
  if (j.contains("provisioning_tokens")) {
    const json& list = j.at("provisioning_tokens");
    if (!list.is_array()) return Status::InvalidArgument("field_invalid", "provisioning_tokens must be a list");
    for (const json& t : list) {
      if (!t.is_object()) return Status::InvalidArgument("field_invalid", "a provisioning token is an object");
      auto at = admin_json::Int(t, "created_at");
      auto current = admin_json::Bool(t, "current");
      auto until = admin_json::Int(t, "valid_until");
      if (Status s = admin_json::FirstError({at.status(), current.status(), until.status()}); !s.ok()) return s;
      p.provisioning_tokens.push_back({at->value_or(0), current->value_or(false), *until});
    }
  }
  return p;
}

}  // namespace

std::string EncodePoolPutRequest(const PoolPutRequest& r) {
  json j = json::object();
  if (r.settings_json) j["settings"] = json::parse(*r.settings_json, nullptr, false);
  if (r.token_required) j["token_required"] = *r.token_required;
  if (r.boot_policy_given) {
    j["boot_policy"] = r.boot_policy_json ? json::parse(*r.boot_policy_json, nullptr, false) : json(nullptr);
  }
  if (!r.templates.empty()) {
    json t = json::object();
    for (const auto& change : r.templates) {
      t[change.which] = change.config_json ? json::parse(*change.config_json, nullptr, false) : json(nullptr);
    }
    j["templates"] = std::move(t);
  }
  return j.dump();
}

Result<PoolPutRequest> DecodePoolPutRequest(std::string_view body) {
  auto doc = admin_json::ParseObject(body);
  if (!doc.ok()) return doc.status();
  const json& j = *doc;
  PoolPutRequest r;
  if (j.contains("settings")) {
    if (!j.at("settings").is_object()) return Status::InvalidArgument("field_invalid", "settings must be an object");
    r.settings_json = j.at("settings").dump();
  }
  if (j.contains("token_required")) {
    if (!j.at("token_required").is_boolean()) {
      return Status::InvalidArgument("field_invalid", "token_required must be true or false");
    }
    r.token_required = j.at("token_required").get<bool>();
  }
  if (j.contains("boot_policy")) {
    r.boot_policy_given = true;
    if (!j.at("boot_policy").is_null()) r.boot_policy_json = j.at("boot_policy").dump();
  }
  if (j.contains("templates")) {
    const json& t = j.at("templates");
    if (!t.is_object()) return Status::InvalidArgument("field_invalid", "templates must be an object");
    for (const auto& [which, config] : t.items()) {
      r.templates.push_back({which, config.is_null() ? std::nullopt : std::optional(config.dump())});
    }
  }
  return r;
}

std::string EncodePoolView(const PoolView& p) { return PoolJson(p).dump(); }

Result<PoolView> DecodePoolView(std::string_view body) {
  auto doc = admin_json::ParseObject(body);
  if (!doc.ok()) return doc.status();
  return PoolFromJson(*doc);
}

std::string EncodePoolList(const std::vector<PoolView>& pools) {
  json list = json::array();
  for (const auto& p : pools) list.push_back(PoolJson(p));
  return json{{"pools", list}}.dump();
}

Result<std::vector<PoolView>> DecodePoolList(std::string_view body) {
  return admin_json::ListBody<PoolView>(body, "pools", PoolFromJson);
}

std::string EncodeTokenRotateRequest(const TokenRotateRequest& r) {
  return json{{"grace_seconds", r.grace_seconds}}.dump();
}

Result<TokenRotateRequest> DecodeTokenRotateRequest(std::string_view body) {
  auto doc = admin_json::ParseObject(body);
  if (!doc.ok()) return doc.status();
  // The grace period is the operator's explicit choice (0 allowed): no
  // default either strands booting machines or keeps a leaked token alive.
  if (!doc->contains("grace_seconds")) {
    return Status::InvalidArgument("field_missing",
                                   "grace_seconds is required: 0 stops the previous token at once, more keeps it "
                                   "valid that long (`rackgatectl token rotate --pool P --grace 1h`)");
  }
  const json& g = doc->at("grace_seconds");
  if (!g.is_number_integer()) return Status::InvalidArgument("field_invalid", "grace_seconds is 0 to 30 days");
  if (g.is_number_unsigned() && g.get<uint64_t>() > static_cast<uint64_t>(INT64_MAX)) {
    return Status::InvalidArgument("field_invalid", "grace_seconds is 0 to 30 days");
  }
  return TokenRotateRequest{g.get<int64_t>()};
}

std::string EncodeTokenRotation(const TokenRotation& t) {
  json j = {{"pool", t.pool}};
  if (!t.provisioning_token.empty()) j["provisioning_token"] = t.provisioning_token;
  if (t.previous_valid_until) j["previous_valid_until"] = *t.previous_valid_until;
  return j.dump();
}

Result<TokenRotation> DecodeTokenRotation(std::string_view body) {
  auto doc = admin_json::ParseObject(body);
  if (!doc.ok()) return doc.status();
  auto pool = admin_json::String(*doc, "pool");
  auto token = admin_json::String(*doc, "provisioning_token");
  auto until = admin_json::Int(*doc, "previous_valid_until");
  if (Status s = admin_json::FirstError({pool.status(), token.status(), until.status()}); !s.ok()) return s;
  return TokenRotation{pool->value_or(""), token->value_or(""), *until};
}

}  // namespace rackgate::wire
