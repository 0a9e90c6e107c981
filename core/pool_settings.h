// A pool's settings (`rackgatectl pool put P --settings FILE`): the JSON the
// store keeps opaque, read in one place. Unknown keys are refused, so that a
// typo cannot silently weaken a setting.
#ifndef RACKGATE_CORE_POOL_SETTINGS_H_
#define RACKGATE_CORE_POOL_SETTINGS_H_

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "base/status.h"
#include "storage/roles.h"

namespace rackgate::core {

struct PoolSettings {
  // Client CSRs must come with a TPM-resident key and its TPM2_Certify
  // (docs/csr.md). The agent reads it from GET /v1/machine.
  bool require_tpm_key = false;
  // Overrides the config's client_csr_window_seconds for this pool.
  std::optional<int64_t> client_window_seconds;

  // --- Manual CSR approval (docs/csr.md, "Manual approval") ---
  // "csr_approval": {"client": "manual"|"auto", "serving": ..., "renewal": ...}.
  // A manual kind's CSRs that pass every rule wait for an operator
  // (`rackgatectl csr approve`); renewals follow "renewal" (auto by default:
  // the machine proves its current certificate's key and attests afresh).
  bool client_csr_manual = false;
  bool serving_csr_manual = false;
  bool renewal_csr_manual = false;
  // renew: renewal opens once at most this fraction of the current
  // certificate's validity is left (docs/csr.md, "Renewal"); in (0, 1].
  // The agent reads it from GET /v1/machine.
  double renew_fraction = 1.0 / 3.0;
  // --- Trust (docs/trust.md) ---
  // A machine whose last good attestation is older than this is untrusted
  // (attestation_too_old) until it attests again; nullopt: never ages.
  std::optional<int64_t> max_attestation_age_seconds;
  // --- Kubelet certificates (docs/kubernetes.md) ---
  // "kubelet_certificates": "signer" (rackgate signs with the imported
  // cluster CA: POST /v1/machine/csr) or "approver" (the kubelet files
  // certificates.k8s.io CSRs and the cluster's signer issues; rackgate
  // approves them, and the agent registers the key it generated: POST
  // /v1/machine/kubelet-key). The agent reads it from GET /v1/machine.
  bool approver_mode = false;
  // "apiserver": "https://HOST[:PORT]", the cluster's API server for the
  // kubeconfig the agent writes in signer mode; "" unset. The agent reads it
  // from GET /v1/machine unless its --apiserver names one (docs/agent.md,
  // "Where the API server and node addresses come from").
  std::string apiserver;
};

// kInvalidArgument (settings_invalid) for an unknown key or a wrong type.
Result<PoolSettings> ParsePoolSettings(const std::string& settings_json);

// The pool rows a boot storm asks for again and again (the public config's
// template and tokens): each pool's row and its valid provisioning tokens,
// read once per kTtl at most. Every admin change to a pool drops its entry at
// once (Invalidate: pool put, templates, tokens), and another appliance's
// change drops every entry (InvalidateAll, on the store's change
// notification); the TTL bounds what a change waits when a notification is
// lost (docs/ha.md). Thread-safe.
class PoolCache {
 public:
  struct Entry {
    storage::Pool pool;
    std::vector<storage::PoolToken> tokens;  // valid when loaded; check expires_at
    std::chrono::steady_clock::time_point loaded_at;
  };
  static constexpr std::chrono::seconds kTtl{2};

  // BORROWED: the store outlives the cache.
  explicit PoolCache(storage::PoolReader* store) : store_(store) {}

  // The pool's entry, read from the store when absent or older than kTtl:
  // pool_unknown (kNotFound) or the store's failure otherwise (not cached).
  Result<std::shared_ptr<const Entry>> Get(const std::string& pool, int64_t now);
  void Invalidate(const std::string& pool);
  void InvalidateAll();

 private:
  storage::PoolReader* store_;
  std::mutex mu_;
  std::map<std::string, std::shared_ptr<const Entry>> entries_;  // guarded by mu_; one per pool that exists
  // Bumped by every invalidation: a read that started before one is not
  // cached, so an entry never outlives the change that dropped it.
  uint64_t generation_ = 0;  // guarded by mu_
};

}  // namespace rackgate::core

#endif  // RACKGATE_CORE_POOL_SETTINGS_H_
