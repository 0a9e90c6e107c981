// Pool administration: put, templates, token rotation, listing.
#include "core/pool_service.h"

#include <utility>

#include "base/log.h"
#include "core/ignition.h"
#include "core/ignition_service.h"
#include "core/policy_proposal.h"
#include "core/pool_settings.h"
#include "core/secrets.h"
#include "wire/boot_policy_json.h"

namespace rackgate::core {

namespace {

std::shared_ptr<spdlog::logger> Log() {
  static const auto log = Logger("admin");
  return log;
}

std::optional<ignition::TemplateKind> KindOf(std::string_view which) {
  if (which == storage::kTemplatePublic) return ignition::TemplateKind::kPublic;
  if (which == storage::kTemplateAttested) return ignition::TemplateKind::kAttested;
  return std::nullopt;
}

}  // namespace

PoolService::PoolService(storage::InventoryStore* store, IgnitionService* ignition, Clock clock)
    : store_(store), ignition_(ignition), clock_(std::move(clock)) {}

Result<PoolPut> PoolService::Put(const std::string& name, const wire::PoolPutRequest& request,
                                 const storage::Actor& actor) {
  storage::Pool pool;
  pool.name = name;
  if (auto existing = store_->GetPool(name); existing.ok()) pool = *existing;
  if (request.settings_json) {
    pool.settings_json = *request.settings_json;
    if (auto settings = ParsePoolSettings(pool.settings_json); !settings.ok()) {
      return settings.status().Annotate("settings");
    }
  }
  if (request.token_required) pool.token_required = *request.token_required;
  if (request.boot_policy_given) {
    pool.boot_policy_json = request.boot_policy_json;
    if (pool.boot_policy_json) {
      auto policy = wire::ParseBootPolicy(*pool.boot_policy_json);
      if (!policy.ok()) {
        return policy.status().Annotate("boot policy");
      }
    }
  }
  std::vector<storage::PoolTemplateChange> templates;
  for (const auto& t : request.templates) {
    const auto kind = KindOf(t.which);
    if (!kind) return Status::InvalidArgument("field_invalid", "a template is public or attested");
    storage::PoolTemplateChange change{t.which, std::nullopt, ""};
    if (t.config_json) {
      // The refusal names the template: an operator putting both must know
      // which one to fix.
      auto checked = ignition_->CheckTemplate(*t.config_json, *kind);
      if (!checked.ok()) return checked.status().Annotate(t.which + " template");
      change.template_json = ignition::Serialize(checked->config);
      change.digest = Sha256Hex(*change.template_json);
    }
    templates.push_back(std::move(change));
  }
  storage::Actor a = actor;
  a.why = "pool stored by an operator";
  // A pool that needs a token and has none gets one now, shown only in this
  // answer and only if this put's transaction stored it (only its hash is
  // kept).
  std::optional<std::string> first_token;
  if (pool.token_required) first_token = NewToken();
  storage::PoolPutOutcome outcome;
  auto stored = store_->PutPool(pool, a, clock_(), first_token ? std::optional(TokenHash(*first_token)) : std::nullopt,
                                templates, &outcome);
  // Whatever the store answered: a failed transaction may still have
  // changed what another appliance sees, and a stale cache is never right.
  ignition_->Invalidate(pool.name);
  if (!stored.ok()) return stored.status();
  Log()->info("{} stored pool {} (provisioning token {}{}; {} template(s))", a.name, stored->name,
              stored->token_required ? "required" : "off", outcome.token_created ? ", first token made" : "",
              templates.size());
  PoolPut out{View(*stored), outcome.created};
  if (outcome.token_created) out.pool.provisioning_token = *first_token;
  return out;
}

Result<wire::PoolView> PoolService::SetTemplate(const std::string& pool, const std::string& which,
                                                const std::optional<std::string_view>& text,
                                                const storage::Actor& actor) {
  const auto kind = KindOf(which);
  if (!kind) return Status::NotFound("template_unknown", "a template is public or attested");
  std::optional<std::string> stored_text;
  std::string digest;
  if (text) {
    auto t = ignition_->CheckTemplate(*text, *kind);
    if (!t.ok()) return t.status();
    // Stored as the operator wrote it, less insignificant whitespace.
    stored_text = ignition::Serialize(t->config);
    digest = Sha256Hex(*stored_text);
  }
  storage::Actor a = actor;
  a.why = stored_text ? "template stored by an operator" : "template removed by an operator";
  auto stored = store_->SetPoolTemplate(pool, which, stored_text, digest, a, clock_());
  ignition_->Invalidate(pool);
  if (!stored.ok()) return stored.status();
  Log()->info("{} {} the {} template of pool {}{}", a.name, stored_text ? "stored" : "removed", which, pool,
              stored_text ? " (sha256 " + digest.substr(0, 16) + ")" : "");
  return View(*stored);
}

Result<wire::TokenRotation> PoolService::RotateToken(const std::string& pool, int64_t grace_seconds,
                                                     const storage::Actor& actor) {
  if (grace_seconds < 0 || grace_seconds > kMaxTokenGraceSeconds) {
    return Status::InvalidArgument("field_invalid", "grace_seconds is 0 to 30 days");
  }
  const std::string token = NewToken();
  storage::Actor a = actor;
  a.why = "provisioning token rotated by an operator";
  const int64_t now = clock_();
  Status rotated = store_->RotatePoolToken(pool, TokenHash(token), now + grace_seconds, a, now);
  ignition_->Invalidate(pool);
  if (!rotated.ok()) return rotated;
  Log()->info("{} rotated the provisioning token of pool {}; the previous one stays valid for {} s", a.name, pool,
              grace_seconds);
  wire::TokenRotation out{pool, token, std::nullopt};
  if (grace_seconds > 0) out.previous_valid_until = now + grace_seconds;
  return out;
}

Result<std::vector<wire::PoolView>> PoolService::List(const std::optional<std::string>& only) {
  auto pools = store_->ListPools();
  if (!pools.ok()) return pools.status();
  std::vector<wire::PoolView> out;
  for (const auto& p : *pools) {
    if (only && p.name != *only) continue;
    out.push_back(View(p));
  }
  if (only && out.empty()) return Status::NotFound("pool_unknown", "no pool " + *only);
  return out;
}

wire::PoolView PoolService::View(const storage::Pool& p) {
  wire::PoolView v;
  v.name = p.name;
  v.settings_json = p.settings_json;
  v.token_required = p.token_required;
  v.boot_policy_mode = p.boot_policy_mode;
  v.created_at = p.created_at;
  v.updated_at = p.updated_at;
  // Shown with its kernel command line as a digest (docs/policy-proposal.md,
  // "What is shown where").
  if (p.boot_policy_json) v.boot_policy_json = PolicyForDisplay(*p.boot_policy_json).dump();
  v.public_template_json = p.public_template;
  v.attested_template_json = p.attested_template;
  // Tokens by age, never by value or hash; none shown when they cannot be
  // read (the pool itself was).
  if (auto valid = store_->ValidPoolTokens(p.name, clock_()); valid.ok()) {
    for (const auto& t : *valid) {
      v.provisioning_tokens.push_back({t.created_at, !t.expires_at.has_value(), t.expires_at});
    }
  }
  return v;
}

}  // namespace rackgate::core
