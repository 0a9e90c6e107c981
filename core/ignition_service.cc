// Ignition serving's decisions: public and attested configs, template checks.
#include "core/ignition_service.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <nlohmann/json.hpp>
#include <thread>

#include "base/log.h"
#include "base/metrics.h"
#include "core/pool_settings.h"
#include "core/secrets.h"
#include "core/trust.h"
#include "base/hex.h"

extern char** environ;

namespace rackgate::core {

namespace {

using nlohmann::json;

std::shared_ptr<spdlog::logger> Log() {
  static const auto log = Logger("ignition");
  return log;
}

// Sample values for the upload check: a template must render, and its
// rendering must pass ignition-validate, before any machine asks for it.
ignition::Values SampleValues(const ignition::Values& base, const ignition::Template& t) {
  ignition::Values v = base;
  for (const auto& name : t.placeholders) {
    if (v.values.count(name) == 0) v.values[name] = name.rfind("address.", 0) == 0 ? "192.0.2.1" : "example-0";
  }
  return v;
}

// Runs `validator FILE` on `text`; the first lines of its output on failure.
Status RunValidator(const std::string& validator, const std::string& text) {
  char path[] = "/tmp/rackgate-template-XXXXXX";
  const int fd = ::mkstemp(path);
  if (fd < 0) return Status::IoError("validator_failed", std::string("mkstemp: ") + std::strerror(errno));
  struct Unlink {
    const char* p;
    ~Unlink() { ::unlink(p); }
  } unlink_at_exit{path};
  size_t off = 0;
  while (off < text.size()) {
    const ssize_t n = ::write(fd, text.data() + off, text.size() - off);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      ::close(fd);
      return Status::IoError("validator_failed", "cannot write the template for the validator");
    }
    off += static_cast<size_t>(n);
  }
  ::close(fd);

  int out[2];
  if (::pipe2(out, O_CLOEXEC) != 0) return Status::IoError("validator_failed", "pipe failed");
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, out[1], 1);
  posix_spawn_file_actions_adddup2(&actions, out[1], 2);
  posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
  std::string arg0 = validator;
  std::string arg1 = path;
  char* argv[] = {arg0.data(), arg1.data(), nullptr};
  pid_t pid = 0;
  const int rc = ::posix_spawn(&pid, validator.c_str(), &actions, nullptr, argv, environ);
  posix_spawn_file_actions_destroy(&actions);
  ::close(out[1]);
  if (rc != 0) {
    ::close(out[0]);
    return Status::IoError("validator_failed", "cannot run " + validator + ": " + std::strerror(rc));
  }
  // Bounded: 4 KiB of output and 10 seconds.
  std::string output;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  for (;;) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) break;
    pollfd p{out[0], POLLIN, 0};
    if (::poll(&p, 1, static_cast<int>(left.count())) <= 0) break;
    char buf[1024];
    const ssize_t n = ::read(out[0], buf, sizeof buf);
    if (n <= 0) break;
    if (output.size() < 4096) output.append(buf, static_cast<size_t>(n));
  }
  ::close(out[0]);
  // Its output ended; it may still be exiting. Wait for it within the same
  // deadline.
  int status = 0;
  pid_t done = 0;
  while ((done = ::waitpid(pid, &status, WNOHANG)) == 0 && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  if (done != pid) {
    ::kill(pid, SIGKILL);
    ::waitpid(pid, &status, 0);
    return Status::IoError("validator_failed", validator + " did not finish within 10 s");
  }
  if (WIFEXITED(status) && WEXITSTATUS(status) == 0) return Status::Ok();
  while (!output.empty() && (output.back() == '\n' || output.back() == ' ')) output.pop_back();
  // The temp file's random name means nothing to the operator.
  for (size_t at; (at = output.find(path)) != std::string::npos;) output.replace(at, std::strlen(path), "template");
  return Status::InvalidArgument("template_invalid", "ignition-validate: " + output.substr(0, 1024));
}

}  // namespace

IgnitionService::IgnitionService(storage::IgnitionStore* store, AttestationService* attestation, IgnitionOptions options,
                                 Metrics* metrics)
    : store_(store), attestation_(attestation), options_(std::move(options)), metrics_(metrics) {}

Status IgnitionService::Refuse(Status refusal, const std::string& who) const {
  if (metrics_ != nullptr) {
    metrics_->CounterInc("rackgate_config_requests_total", "Ignition config requests by verdict and reason.",
                         {{"verdict", "refused"}, {"reason", refusal.reason()}});
  }
  Log()->warn("config for {} refused: {} ({})", who, refusal.reason(), refusal.message());
  return refusal;
}

ignition::Values IgnitionService::PublicValues(const std::string& pool) const {
  ignition::Values v;
  v.values["pool"] = pool;
  v.values["appliance.url"] = options_.appliance_url;
  v.values["appliance.urls"] = options_.appliance_urls.empty() ? options_.appliance_url : options_.appliance_urls;
  v.values["appliance.ca_pem"] = CaPem();
  return v;
}

std::string IgnitionService::CaPem() const {
  return options_.ca_bundle != nullptr ? options_.ca_bundle->Pem() : options_.appliance_ca_pem;
}

Result<ignition::Template> IgnitionService::CheckTemplate(std::string_view text, ignition::TemplateKind kind) const {
  auto t = ignition::ParseTemplate(text, kind);
  if (!t.ok()) return t.status();
  auto rendered = ignition::Render(*t, SampleValues(PublicValues("example"), *t));
  if (!rendered.ok()) return rendered.status();
  if (!options_.validator.empty() && ::access(options_.validator.c_str(), X_OK) == 0) {
    if (Status s = RunValidator(options_.validator, ignition::Serialize(*rendered)); !s.ok()) return s;
  }
  return t;
}

Result<std::shared_ptr<const ignition::Template>> IgnitionService::ParsedTemplate(const std::string& text,
                                                                                 ignition::TemplateKind kind) {
  const std::string key = (kind == ignition::TemplateKind::kPublic ? "p:" : "a:") + Sha256Hex(text);
  {
    std::lock_guard<std::mutex> l(templates_mu_);
    if (auto it = templates_.find(key); it != templates_.end()) return it->second;
  }
  auto t = ignition::ParseTemplate(text, kind);
  if (!t.ok()) return t.status();
  auto parsed = std::make_shared<const ignition::Template>(std::move(t).value());
  std::lock_guard<std::mutex> l(templates_mu_);
  // Bounded: a few templates per pool are live at a time; old ones are
  // dropped wholesale rather than tracked.
  if (templates_.size() >= 256) templates_.clear();
  templates_[key] = parsed;
  return parsed;
}

void IgnitionService::Invalidate(const std::string& pool) { pools_.Invalidate(pool); }

void IgnitionService::InvalidateAllPools() { pools_.InvalidateAll(); }

namespace {

Status Unavailable(std::string message) { return Status::IoError("config_unavailable", std::move(message)); }

}  // namespace

Result<ConfigResult> IgnitionService::PublicConfig(const PublicConfigRequest& request) {
  const std::string& pool_name = request.pool;
  const std::string who = "pool " + pool_name + " from " + request.client_address;
  const int64_t now = attestation_->Now();
  auto found = pools_.Get(pool_name, now);
  if (!found.ok()) {
    if (found.status().code() == Status::Code::kNotFound) {
      return Refuse(Status::NotFound("pool_unknown", "no such pool"), who);
    }
    return Refuse(StoreBusy(found.status()), who);
  }
  const storage::Pool* pool = &(*found)->pool;
  if (pool->token_required) {
    // SECURITY: every valid token is compared, in constant time, so timing
    // tells neither which one matched nor how much of one did.
    const auto& token = request.provisioning_token;
    if (!token) return Refuse(Status::InvalidArgument("token_missing", "this pool needs its provisioning token"), who);
    const auto hash = TokenHash(*token);
    bool match = false;
    for (const auto& t : (*found)->tokens) {
      // A previous token's grace period ends here, not when the cache does.
      const bool valid = !t.expires_at || *t.expires_at > now;
      match |= valid & ConstantTimeEquals(hash, t.hash);
    }
    if (!match) {
      return Refuse(Status::VerificationFailed("token_invalid", "the provisioning token is not valid for this pool"),
                    who);
    }
  }
  if (!pool->public_template) return Refuse(Unavailable("the pool has no config yet"), who);
  // The template is parsed and rendered once per (text, version); a request
  // for a rendering already made costs a map lookup.
  std::shared_ptr<const Cached> cached;
  const std::string ca_pem = CaPem();
  {
    std::lock_guard<std::mutex> l(cache_mu_);
    auto it = cache_.find(pool_name);
    if (it != cache_.end() && it->second->template_text == *pool->public_template && it->second->ca_pem == ca_pem) {
      cached = it->second;
    }
  }
  if (!cached) {
    auto t = ParsedTemplate(*pool->public_template, ignition::TemplateKind::kPublic);
    if (!t.ok()) {
      Log()->error("stored public template of pool {} no longer parses: {}", pool_name, t.status().ToString());
      return Refuse(Unavailable("the pool's config cannot be served"), who);
    }
    ignition::Values values = PublicValues(pool_name);
    values.values["appliance.ca_pem"] = ca_pem;
    auto rendered = ignition::Render(**t, values);
    if (!rendered.ok()) return Refuse(rendered.status(), who);
    auto fresh = std::make_shared<Cached>();
    fresh->template_text = *pool->public_template;
    fresh->ca_pem = ca_pem;
    fresh->version = (*t)->version;
    for (ignition::SpecVersion v = ignition::kOldestSpec; v <= ignition::kNewestSpec; ++v.minor) {
      auto converted = ignition::ConvertToVersion(*rendered, v);
      if (converted.ok()) {
        fresh->by_version[ignition::FormatSpecVersion(v)] =
            std::make_shared<const std::string>(ignition::Serialize(*converted));
      }
    }
    cached = fresh;
    std::lock_guard<std::mutex> l(cache_mu_);
    cache_[pool_name] = std::move(fresh);
  }
  auto version = ignition::Negotiate(request.accept, cached->version);
  if (!version.ok()) return Refuse(version.status(), who);
  const std::string v = ignition::FormatSpecVersion(*version);
  auto body = cached->by_version.find(v);
  if (body == cached->by_version.end()) {
    return Refuse(Status::Unsupported("ignition_config_too_new", "the config uses fields newer than spec " + v), who);
  }
  if (metrics_ != nullptr) {
    metrics_->CounterInc("rackgate_config_requests_total", "Ignition config requests by verdict and reason.",
                         {{"verdict", "public"}, {"reason", ""}});
  }
  // debug: anonymous and frequent (a rack booting); refusals and attested
  // configs are the decisions an operator reads.
  Log()->debug("public config of pool {} (spec {}) served to {}", pool_name, v, request.client_address);
  return ConfigResult{body->second, v};
}

Result<ConfigResult> IgnitionService::AttestedConfig(const AttestedConfigRequest& request) {
  auto auth = attestation_->Authenticate(request.bearer_token);
  if (!auth.ok()) {
    Log()->warn("attested config refused to {}: no valid attestation token", request.client_address);
    return auth.status();
  }
  const std::string who = auth->machine.hostname + " ek=" + hex::Encode(auth->machine.ek_hash).substr(0, 16);
  // SECURITY: the secrets of the attested config only to a machine trusted
  // now, through the one gate of every release (docs/trust.md): not after a
  // failed attestation, not once its last good one is older than its pool
  // allows. The public config is unaffected.
  auto release = attestation_->AuthorizeRelease(std::move(auth).value());
  if (!release.ok()) return Refuse(release.status(), who);
  const storage::Machine& m = release->bearer.machine;
  const storage::Pool* pool = &release->pool;
  if (!pool->public_template && !pool->attested_template) {
    return Refuse(Unavailable("the pool has no config yet"), who);
  }

  ignition::Values values = PublicValues(m.pool);
  values.values["hostname"] = m.hostname;
  values.values["ek_hash"] = hex::Encode(m.ek_hash);
  for (const auto& a : m.addresses) values.values.emplace("address." + a.kind, a.value);
  const json vars = json::parse(m.vars_json, nullptr, false);
  if (vars.is_object()) {
    for (const auto& [k, val] : vars.items()) {
      if (val.is_string()) values.values["machine." + k] = val.get<std::string>();
    }
  }

  json merged;
  ignition::SpecVersion own{};
  for (const auto& [text, kind] :
       {std::pair{pool->public_template, ignition::TemplateKind::kPublic},
        std::pair{pool->attested_template, ignition::TemplateKind::kAttested}}) {
    if (!text) continue;
    auto t = ParsedTemplate(*text, kind);
    if (!t.ok()) {
      Log()->error("stored template of pool {} no longer parses: {}", m.pool, t.status().ToString());
      return Refuse(Unavailable("the pool's config cannot be served"), who);
    }
    auto rendered = ignition::Render(**t, values);
    if (!rendered.ok()) return Refuse(rendered.status(), who);
    merged = merged.is_null() ? std::move(*rendered) : ignition::Merge(merged, *rendered);
    if (own < (*t)->version) own = (*t)->version;
  }
  auto version = ignition::Negotiate(request.accept, own);
  if (!version.ok()) return Refuse(version.status(), who);
  auto converted = ignition::ConvertToVersion(merged, *version);
  if (!converted.ok()) return Refuse(converted.status(), who);
  std::string body = ignition::Serialize(*converted);
  const std::string digest = Sha256Hex(body);
  const std::string v = ignition::FormatSpecVersion(*version);
  // Recorded before it is sent: the audit trail never misses a config that
  // left the appliance.
  auto served = store_->RecordConfigServed(m.id, digest, v, storage::Actor{"rackgated", "attested config"},
                                           attestation_->Now());
  if (!served.ok()) {
    if (served.status().reason() == "state_conflict") {
      return Refuse(Status::InvalidArgument("state_conflict", "this machine cannot be provisioned now"), who);
    }
    Log()->error("config for {} not recorded: {}", who, served.status().ToString());
    return Refuse(StoreBusy(served.status()), who);
  }
  if (metrics_ != nullptr) {
    metrics_->CounterInc("rackgate_config_requests_total", "Ignition config requests by verdict and reason.",
                         {{"verdict", "attested"}, {"reason", ""}});
  }
  Log()->info("attested config (spec {}, sha256 {}) served to {}; state {}", v, digest.substr(0, 16), who,
              storage::StateName(served->state));
  return ConfigResult{std::make_shared<const std::string>(std::move(body)), v};
}

}  // namespace rackgate::core
