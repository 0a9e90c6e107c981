// A machine's trust: the check, the sweep, the log line of a change.
#include "core/trust.h"

#include <map>
#include <string>

#include "base/log.h"

namespace rackgate::core {

namespace {

std::shared_ptr<spdlog::logger> Log() {
  static const auto log = Logger("trust");
  return log;
}

Status Untrusted(std::string why) { return Status::VerificationFailed("machine_untrusted", std::move(why)); }

}  // namespace

Status CheckTrust(const storage::Machine& m, const PoolSettings& settings, int64_t now) {
  // SECURITY: the stored verdict first. A failed attestation leaves it
  // untrusted until a good one, whatever the age setting says.
  if (m.trust == storage::kTrustUntrusted) {
    const std::string_view prefix = storage::kTrustReasonFailedPrefix;
    if (m.trust_reason.rfind(prefix, 0) == 0) {
      return Untrusted("the machine's latest attestation failed (" + m.trust_reason.substr(prefix.size()) +
                       "); it must attest successfully again");
    }
    if (m.trust_reason == storage::kTrustReasonTooOld) {
      return Untrusted("the machine's last good attestation is too old; it must attest again");
    }
    return Untrusted("the machine is untrusted (" + m.trust_reason + "); it must attest successfully again");
  }
  // SECURITY: age is judged at call time, so a machine past its pool's age
  // is refused at once, not at the next sweep. Written as a subtraction: a
  // stored time far in the past cannot overflow.
  if (settings.max_attestation_age_seconds && m.last_attested_at &&
      now - *m.last_attested_at > *settings.max_attestation_age_seconds) {
    return Untrusted("the machine's last good attestation is " + std::to_string(now - *m.last_attested_at) +
                     " s old, over its pool's max_attestation_age_seconds of " +
                     std::to_string(*settings.max_attestation_age_seconds) + "; it must attest again");
  }
  return Status::Ok();
}

void LogTrustChange(const storage::Machine& before, const storage::Machine& after) {
  if (before.trust == after.trust) return;
  if (after.trust == storage::kTrustUntrusted) {
    Log()->warn("machine {} is untrusted: {}", after.hostname, after.trust_reason);
  } else if (after.trust == storage::kTrustTrusted) {
    Log()->info("machine {} is trusted{}", after.hostname,
                before.trust.empty() ? " (first good attestation)" : " again (attestation_ok)");
  }
}

void LogAttestationTrust(const storage::Machine& before, bool attested, const std::string& reason) {
  storage::Machine after = before;
  after.trust = attested ? storage::kTrustTrusted : storage::kTrustUntrusted;
  after.trust_reason = attested ? "" : std::string(storage::kTrustReasonFailedPrefix) + reason;
  LogTrustChange(before, after);
}

Result<int64_t> SweepTrust(storage::TrustStore* store, int64_t now) {
  auto pools = store->ListPools();
  if (!pools.ok()) return pools.status();
  std::map<std::string, int64_t> ages;
  for (const auto& p : *pools) {
    auto settings = ParsePoolSettings(p.settings_json);
    if (!settings.ok()) {
      Log()->error("trust sweep skips pool {}: {}", p.name, settings.status().ToString());
      continue;
    }
    if (settings->max_attestation_age_seconds) ages[p.name] = *settings->max_attestation_age_seconds;
  }
  if (ages.empty()) return 0;
  constexpr int kBatch = 500;
  int64_t total = 0;
  // Bounded: each round marks machines that stop matching, so the rounds end.
  for (;;) {
    auto changed = store->MarkStaleUntrusted(now, ages, kBatch);
    if (!changed.ok()) return changed.status();
    for (const auto& m : *changed) {
      Log()->warn("machine {} is untrusted: {} (last good attestation at {})", m.hostname, m.trust_reason,
                  m.last_attested_at.value_or(0));
    }
    total += static_cast<int64_t>(changed->size());
    if (changed->size() < static_cast<size_t>(kBatch)) break;
  }
  return total;
}

}  // namespace rackgate::core
