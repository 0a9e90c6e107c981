// Pools: settings, boot policies, Ignition templates and provisioning tokens.
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "storage/audit.h"
#include "storage/rows.h"
#include "storage/sql_store.h"
#include "storage/validation.h"

namespace rackgate::storage {

namespace {

// The pool's current provisioning token's hash, if any.
std::optional<Bytes> CurrentPoolToken(Connection& c, const std::string& pool) {
  Stmt s = c.Prepare("SELECT hash FROM pool_tokens WHERE pool = ?1 AND expires_at IS NULL");
  s.BindText(1, pool);
  if (!s.Step()) return std::nullopt;
  return s.Blob(0);
}

void InsertPoolToken(Connection& c, const std::string& pool, const Bytes& hash, int64_t now) {
  {
    Stmt s = c.Prepare("SELECT 1 FROM pool_tokens WHERE hash = ?1");
    s.BindBlob(1, hash);
    if (s.Step()) Fail(Status::InvalidArgument("field_invalid", "the token hash is taken"));
  }
  Stmt s = c.Prepare("INSERT INTO pool_tokens (hash, pool, created_at, expires_at) VALUES (?1, ?2, ?3, NULL)");
  s.BindBlob(1, hash).BindText(2, pool).BindInt(3, now).Run();
}

std::vector<PoolToken> LoadValidPoolTokens(Connection& c, const std::string& pool, int64_t now) {
  Stmt s = c.Prepare(
      "SELECT hash, pool, created_at, expires_at FROM pool_tokens "
      "WHERE pool = ?1 AND (expires_at IS NULL OR expires_at > ?2) ORDER BY expires_at IS NOT NULL");
  s.BindText(1, pool).BindInt(2, now);
  std::vector<PoolToken> out;
  while (s.Step()) out.push_back({s.Blob(0), s.Text(1), s.Int(2), s.OptInt(3)});
  return out;
}

// The pools column of a template kind, or nullptr for another kind.
const char* TemplateColumn(std::string_view which) {
  return which == kTemplatePublic ? "public_template" : which == kTemplateAttested ? "attested_template" : nullptr;
}

}  // namespace

Result<Pool> SqlStore::PutPool(const Pool& pool, const Actor& actor, int64_t now,
                                  const std::optional<Bytes>& first_token_hash,
                                  const std::vector<PoolTemplateChange>& templates, PoolPutOutcome* outcome) {
  if (outcome != nullptr) *outcome = PoolPutOutcome{};
  return Guard([&]() -> Result<Pool> {
    CheckPoolName(pool.name);
    CheckActor(actor);
    CheckSize("settings_json", pool.settings_json.size(), 0, kMaxJson);
    CheckOptJson("boot_policy_json", pool.boot_policy_json);
    if (first_token_hash) CheckSize("token hash", first_token_hash->size(), 1, kMaxHash);
    for (const auto& t : templates) {
      if (TemplateColumn(t.which) == nullptr) {
        Fail(Status::InvalidArgument("field_invalid", "a template is public or attested"));
      }
      CheckOptJson("template", t.template_json);
      CheckSize("digest", t.digest.size(), 0, 128);
    }
    const std::string settings = pool.settings_json.empty() ? "{}" : pool.settings_json;
    PoolPutOutcome done;
    Pool stored = db_->Write([&](Connection& c) {
      std::optional<Pool> old = LoadPool(c, pool.name);
      const bool add_token = first_token_hash && !CurrentPoolToken(c, pool.name);
      // The templates that change, in the order given (a later entry for the
      // same kind wins).
      std::map<std::string, const PoolTemplateChange*> changed;
      for (const auto& t : templates) {
        const std::optional<std::string>* current =
            !old ? nullptr : t.which == kTemplatePublic ? &old->public_template : &old->attested_template;
        if (current != nullptr && *current == t.template_json) {
          changed.erase(t.which);
        } else if (current != nullptr || t.template_json) {
          changed[t.which] = &t;
        }
      }
      if (old && old->settings_json == settings && old->boot_policy_json == pool.boot_policy_json &&
          old->token_required == pool.token_required && !add_token && changed.empty()) {
        return *old;
      }
      {
        Stmt s = c.Prepare(
            "INSERT INTO pools (name, settings_json, boot_policy_json, created_at, updated_at, token_required) "
            "VALUES (?1, ?2, ?3, ?4, ?4, ?5) ON CONFLICT (name) DO UPDATE SET "
            "settings_json = excluded.settings_json, boot_policy_json = excluded.boot_policy_json, "
            "token_required = excluded.token_required, updated_at = excluded.updated_at");
        s.BindText(1, pool.name)
            .BindText(2, settings)
            .BindOptText(3, pool.boot_policy_json)
            .BindInt(4, now)
            .BindInt(5, pool.token_required ? 1 : 0)
            .Run();
      }
      AuditDetail template_detail;
      for (const auto& [which, t] : changed) {
        Stmt s = c.Prepare(std::string("UPDATE pools SET ") + TemplateColumn(which) + " = ?2 WHERE name = ?1");
        s.BindText(1, pool.name).BindOptText(2, t->template_json).Run();
        template_detail.Object(which, t->template_json ? AuditDetail().Text("sha256", t->digest)
                                                       : AuditDetail().Bool("removed", true));
      }
      if (add_token) InsertPoolToken(c, pool.name, *first_token_hash, now);
      // The settings' content stays out of the audit log: they may carry
      // token settings.
      AuditDetail detail;
      detail.Text("pool", pool.name)
          .Bool("created", !old.has_value())
          .Bool("token_required", pool.token_required)
          .Bool("token_created", add_token);
      if (old) {
        detail.Bool("settings_changed", old->settings_json != settings)
            .Bool("boot_policy_changed", old->boot_policy_json != pool.boot_policy_json);
      }
      if (!changed.empty()) detail.Object("templates", std::move(template_detail));
      WriteAudit(c, actor, now, {"pool_put", nullptr, std::nullopt, std::nullopt, DetailJson(detail)});
      auto loaded = LoadPool(c, pool.name);
      if (!loaded) Fail(Status::IoError("db_error", "pool vanished inside its transaction"));
      // Handed to the caller only after Write returned, that is after the
      // commit: a failed commit throws and leaves *outcome empty.
      done = PoolPutOutcome{!old.has_value(), add_token};
      return *loaded;
    });
    if (outcome != nullptr) *outcome = done;
    return stored;
  });
}

Result<Pool> SqlStore::GetPool(const std::string& name) {
  return Guard([&]() -> Result<Pool> { return db_->Read([&](Connection& c) { return MustPool(c, name); }); });
}

Result<std::vector<Pool>> SqlStore::ListPools() {
  return Guard([&]() -> Result<std::vector<Pool>> {
    return db_->Read([&](Connection& c) {
      Stmt s = c.Prepare(PoolSelect() + "ORDER BY name");
      std::vector<Pool> out;
      while (s.Step()) out.push_back(ReadPool(s));
      return out;
    });
  });
}

Result<Pool> SqlStore::SetPoolTemplate(const std::string& pool, std::string_view which,
                                          const std::optional<std::string>& template_json, const std::string& digest,
                                          const Actor& actor, int64_t now) {
  return Guard([&]() -> Result<Pool> {
    CheckActor(actor);
    CheckOptJson("template", template_json);
    CheckSize("digest", digest.size(), 0, 128);
    const char* column = which == kTemplatePublic     ? "public_template"
                         : which == kTemplateAttested ? "attested_template"
                                                      : nullptr;
    if (column == nullptr) {
      return Status::InvalidArgument("field_invalid", "a template is public or attested");
    }
    return db_->Write([&](Connection& c) {
      std::optional<Pool> old = LoadPool(c, pool);
      if (!old) Fail(Status::NotFound("pool_unknown", "no pool named '" + pool + "'"));
      const auto& current = which == kTemplatePublic ? old->public_template : old->attested_template;
      if (current == template_json) return *old;
      {
        Stmt s = c.Prepare(std::string("UPDATE pools SET ") + column + " = ?2, updated_at = ?3 WHERE name = ?1");
        s.BindText(1, pool).BindOptText(2, template_json).BindInt(3, now).Run();
      }
      AuditDetail detail;
      detail.Text("pool", pool).Text("template", std::string(which)).Bool("removed", !template_json.has_value());
      if (template_json) detail.Text("sha256", digest);
      WriteAudit(c, actor, now, {"pool_template_put", nullptr, std::nullopt, std::nullopt, DetailJson(detail)});
      return *LoadPool(c, pool);
    });
  });
}

Status SqlStore::RotatePoolToken(const std::string& pool, const Bytes& new_hash, int64_t previous_valid_until,
                                    const Actor& actor, int64_t now) {
  return Guard([&]() -> Status {
    CheckActor(actor);
    CheckSize("token hash", new_hash.size(), 1, kMaxHash);
    db_->Write([&](Connection& c) {
      if (!PoolExists(c, pool)) Fail(Status::NotFound("pool_unknown", "no pool named '" + pool + "'"));
      // Only one previous token lives at a time: the one being replaced now.
      {
        Stmt s = c.Prepare("DELETE FROM pool_tokens WHERE pool = ?1 AND expires_at IS NOT NULL");
        s.BindText(1, pool).Run();
      }
      const bool had_current = CurrentPoolToken(c, pool).has_value();
      const bool keep_previous = had_current && previous_valid_until > now;
      {
        Stmt s = c.Prepare(keep_previous
                               ? "UPDATE pool_tokens SET expires_at = ?2 WHERE pool = ?1 AND expires_at IS NULL"
                               : "DELETE FROM pool_tokens WHERE pool = ?1 AND expires_at IS NULL");
        s.BindText(1, pool);
        if (keep_previous) s.BindInt(2, previous_valid_until);
        s.Run();
      }
      InsertPoolToken(c, pool, new_hash, now);
      AuditDetail detail;
      detail.Text("pool", pool);
      if (keep_previous) {
        detail.Int("previous_valid_until", previous_valid_until);
      } else {
        detail.Null("previous_valid_until");
      }
      WriteAudit(c, actor, now, {"token_rotate", nullptr, std::nullopt, std::nullopt, DetailJson(detail)});
      return true;
    });
    return Status::Ok();
  });
}

Result<std::vector<PoolToken>> SqlStore::ValidPoolTokens(const std::string& pool, int64_t now) {
  return Guard([&]() -> Result<std::vector<PoolToken>> {
    return db_->Read([&](Connection& c) { return LoadValidPoolTokens(c, pool, now); });
  });
}

Result<std::pair<Pool, std::vector<PoolToken>>> SqlStore::GetPoolWithTokens(const std::string& name, int64_t now) {
  return Guard([&]() -> Result<std::pair<Pool, std::vector<PoolToken>>> {
    return db_->Read([&](Connection& c) {
      auto p = LoadPool(c, name);
      if (!p) Fail(Status::NotFound("pool_unknown", "no pool named '" + name + "'"));
      return std::pair{std::move(*p), LoadValidPoolTokens(c, name, now)};
    });
  });
}

}  // namespace rackgate::storage
