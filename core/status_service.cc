// The admin API's status.
#include "core/status_service.h"

#include <utility>

#include "core/attestation.h"
#include "core/signer.h"

namespace rackgate::core {

StatusService::StatusService(StatusStores stores, const AttestationService* attestation)
    : stores_(stores), attestation_(attestation) {}

Result<wire::StatusView> StatusService::Report() const {
  wire::StatusView out;
  auto counts = stores_.counts->CountByState();
  if (!counts.ok()) return counts.status();
  out.machines_by_state = std::move(counts).value();
  auto failures = stores_.attestations->RecentFailures(kStatusRecentFailures);
  if (!failures.ok()) return failures.status();
  for (const storage::AttestationRecord& r : *failures) {
    out.recent_failures.push_back({r.at, r.hostname, r.reason, r.reasons});
  }
  auto untrusted = stores_.trust->CountUntrusted();
  if (!untrusted.ok()) return untrusted.status();
  out.machines_untrusted = *untrusted;
  // An operator must never take an observing pool for an enforcing one.
  auto pools = stores_.attestations->ListPools();
  if (!pools.ok()) return pools.status();
  for (const storage::Pool& p : *pools) {
    if (p.boot_policy_mode == storage::kPolicyModeObserve) out.pools_observing_boot_policy.push_back(p.name);
  }
  const int64_t since = attestation_->Now() - kStatusWindowSeconds;
  for (const UnknownEk& e : attestation_->unknown_eks().SeenSince(since)) {
    out.unknown_eks.push_back(
        {e.ek_hash, e.first_seen, e.last_seen, e.count, e.address, e.reason, e.cert_issuer, e.cert_subject});
  }
  // The machines' trust is unchanged by these: this is where they show.
  for (const AnonymousRefusals& a : attestation_->anonymous_refusals().SeenSince(since)) {
    out.anonymous_refusals.push_back({a.hostname, a.count, a.first_seen, a.last_seen, a.address, a.reason});
  }
  out.anonymous_refusals_total = attestation_->anonymous_refusals().total();
  // The files rackgated reads at its next reload (docs/operations.md §9).
  if (!cluster_ca_certificate_.empty()) {
    if (auto ca = csr::ReadClusterCaState(cluster_ca_certificate_); ca.ok()) {
      out.cluster_ca = {std::string(csr::ClusterCaStageName(ca->stage)), ca->not_after, ca->other_not_after};
    }
  }
  if (stores_.ca != nullptr) {
    auto rotation = stores_.ca->GetCaRotation(std::string(storage::kCaKindAppliance));
    if (!rotation.ok()) return rotation.status();
    if (*rotation) {
      out.appliance_ca_rotation = (*rotation)->stage;
      out.appliance_ca_rotation_since = (*rotation)->prepared_at;
    }
  }
  return out;
}

}  // namespace rackgate::core
