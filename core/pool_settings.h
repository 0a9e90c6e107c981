// A pool's settings (`rackgatectl pool put P --settings FILE`): the JSON the
// store keeps opaque, read in one place. Unknown keys are refused, so that a
// typo cannot silently weaken a setting.
#ifndef RACKGATE_CORE_POOL_SETTINGS_H_
#define RACKGATE_CORE_POOL_SETTINGS_H_

#include <cstdint>
#include <optional>
#include <string>

#include "base/status.h"

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
};

// kInvalidArgument (settings_invalid) for an unknown key or a wrong type.
Result<PoolSettings> ParsePoolSettings(const std::string& settings_json);

}  // namespace rackgate::core

#endif  // RACKGATE_CORE_POOL_SETTINGS_H_
