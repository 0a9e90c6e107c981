// A machine's trust over time (docs/trust.md): the check that refuses an
// untrusted machine what only a trusted one may have (the attested config,
// a renewal), the periodic sweep that ages machines out, and the log line of
// every trust change. Orthogonal to the machine's state.
#ifndef RACKGATE_CORE_TRUST_H_
#define RACKGATE_CORE_TRUST_H_

#include <cstdint>
#include <vector>

#include "base/status.h"
#include "core/pool_settings.h"
#include "storage/roles.h"

namespace rackgate::core {

// Ok when `m` may be trusted at `now`; otherwise VerificationFailed with
// reason machine_untrusted (403) whose message says why:
//  - its latest attestation failed (stored trust untrusted, or any other
//    stored untrusted reason such as the sweep's attestation_too_old);
//  - its last good attestation is older than the pool's
//    max_attestation_age_seconds, judged here from last_attested_at so the
//    refusal is immediate, not at the next sweep.
// A machine with no verdict yet (never attested) is not refused here: the
// endpoints that call this take an attestation token, which only a good
// attestation issues. Pure: no store, no clock.
Status CheckTrust(const storage::Machine& m, const PoolSettings& settings, int64_t now);

// One log line naming the machine and the reason when `before` and `after`
// differ in trust (after a store call that may change it).
void LogTrustChange(const storage::Machine& before, const storage::Machine& after);
// The same after an attestation of `before` was recorded: a failure (with its
// refusal's reason) makes it untrusted, a success trusted (the store's rule,
// Store::RecordAttestationFailure / Success).
void LogAttestationTrust(const storage::Machine& before, bool attested, const std::string& reason);

// The sweep: reads every pool's max_attestation_age_seconds (pools whose
// settings do not parse are skipped and logged) and marks the machines older
// than that untrusted (Store::MarkStaleUntrusted, in batches), logging each
// one. Returns how many changed; a store failure as its Status.
Result<int64_t> SweepTrust(storage::TrustStore* store, int64_t now);

}  // namespace rackgate::core

#endif  // RACKGATE_CORE_TRUST_H_
