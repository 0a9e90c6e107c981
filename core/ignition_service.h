// Ignition serving (docs/ignition.md): the MCS-compatible public config at
// GET/HEAD /config/{pool}, guarded by the pool's provisioning token, and the
// attested config at GET /v1/machine/config for a machine holding an
// attestation token. Also the template checks the admin API runs on upload.
// Every decision logs one line naming the pool or machine and the reason.
#ifndef RACKGATE_CORE_IGNITION_SERVICE_H_
#define RACKGATE_CORE_IGNITION_SERVICE_H_

#include <chrono>
#include <cstdint>
#include <map>
#include <optional>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "core/appliance_ca.h"
#include "core/attestation.h"
#include "core/ignition.h"
#include "core/pool_settings.h"
#include "storage/roles.h"

namespace rackgate::core {


// GET /config/{pool}: the pool, the provisioning token sent (the bearer
// credentials), the Accept header's value and who asked.
struct PublicConfigRequest {
  std::string pool;
  std::optional<std::string> provisioning_token;
  std::optional<std::string> accept;
  std::string client_address;
};

// GET /v1/machine/config: the attestation token and the Accept header.
struct AttestedConfigRequest {
  std::optional<std::string> bearer_token;
  std::optional<std::string> accept;
  std::string client_address;
};

// A config to send: the serialized Ignition JSON and its spec version
// ("3.4.0"); its media type is kIgnitionMediaType + spec_version.
struct ConfigResult {
  // SHARED and immutable, never null: a pool's public config is one buffer
  // for every machine that fetches it, held by each answer in flight, never
  // copied (docs/performance.md, "Memory per answer").
  std::shared_ptr<const std::string> body;
  std::string spec_version;
};

inline constexpr char kIgnitionMediaType[] = "application/vnd.coreos.ignition+json; version=";

struct IgnitionOptions {
  std::string appliance_url;     // {{appliance.url}}
  // {{appliance.urls}}: every appliance, comma-separated (the agent's
  // RACKGATE_URL, docs/agent.md); "" is appliance_url alone.
  std::string appliance_urls;
  std::string appliance_ca_pem;  // {{appliance.ca_pem}} when ca_bundle is null
  // {{appliance.ca_pem}}: the CA bundle now, old and next during a rotation
  // (core/appliance_ca.h). BORROWED; may be null.
  ApplianceCaBundle* ca_bundle = nullptr;
  std::string validator;         // ignition-validate's path; "" or absent: skipped
};

class IgnitionService {
 public:
  // BORROWED: store, attestation and metrics (may be null) outlive the service.
  IgnitionService(storage::IgnitionStore* store, AttestationService* attestation, IgnitionOptions options, Metrics* metrics);

  // GET (and HEAD) /config/{pool}: pool_unknown, token_missing,
  // token_invalid, config_unavailable, a rendering's reason, accept_malformed,
  // ignition_version_unsupported or ignition_config_too_new otherwise.
  Result<ConfigResult> PublicConfig(const PublicConfigRequest& request);
  // GET /v1/machine/config: the token's reasons (AttestationService::
  // Authenticate), machine_untrusted (core/trust.h), config_unavailable, a
  // rendering's reason, the version negotiation's, state_conflict or busy
  // otherwise.
  Result<ConfigResult> AttestedConfig(const AttestedConfigRequest& request);

  // The upload check: the template parses and follows the rules for its kind,
  // renders with sample values, and the rendering passes ignition-validate
  // when it is installed (reason template_invalid with its first lines).
  Result<ignition::Template> CheckTemplate(std::string_view text, ignition::TemplateKind kind) const;

  // Drops what is cached of the pool; the admin API calls it after every
  // change to a pool, its templates or its tokens.
  void Invalidate(const std::string& pool);
  // Drops every pool's cached row and tokens: another appliance changed a
  // pool (Store::SetChangeListener, topic "pools" or "*"; docs/ha.md).
  // Quick and thread-safe: callable from the store's notification thread.
  void InvalidateAllPools();

 private:
  // The public values every template may use.
  ignition::Values PublicValues(const std::string& pool) const;
  std::string CaPem() const;
  Status Refuse(Status refusal, const std::string& who) const;

  storage::IgnitionStore* store_;
  AttestationService* attestation_;
  IgnitionOptions options_;
  Metrics* metrics_;

  // The pool row and its tokens for the public config (core/pool_settings.h).
  PoolCache pools_{store_};

  // Parsed templates by kind and digest of their text: an attested config is
  // rendered per machine, but its templates are parsed once.
  Result<std::shared_ptr<const ignition::Template>> ParsedTemplate(const std::string& text,
                                                                   ignition::TemplateKind kind);
  std::mutex templates_mu_;
  std::map<std::string, std::shared_ptr<const ignition::Template>> templates_;  // guarded by templates_mu_

  // A pool's public config rendered in every version it converts to, valid
  // while the stored template text is the same. Immutable once cached.
  struct Cached {
    std::string template_text;
    std::string ca_pem;  // {{appliance.ca_pem}} as rendered: a rotation renders again
    ignition::SpecVersion version;
    std::map<std::string, std::shared_ptr<const std::string>> by_version;  // "3.3.0" -> bytes
  };
  std::mutex cache_mu_;
  std::map<std::string, std::shared_ptr<const Cached>> cache_;  // guarded by cache_mu_
};

}  // namespace rackgate::core

#endif  // RACKGATE_CORE_IGNITION_SERVICE_H_
