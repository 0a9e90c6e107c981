// The appliance at a glance, as the admin API shows it (GET
// /v1/admin/status, `rackgatectl status`): machines by state, untrusted
// machines and recent attestation failures from the store; pools that
// observe rather than enforce their boot policy (docs/policy.md); and, from
// the attestation service's bounded in-memory tables, the unknown EKs that
// knocked (docs/observability.md) and the evidence refused before proof of
// the TPM (docs/trust.md) in the last hour. The admin API calls this; the
// handler only encodes.
//
// Thread safety: as the store's and the attestation service's tables'; no
// state of its own.
#ifndef RACKGATE_CORE_STATUS_SERVICE_H_
#define RACKGATE_CORE_STATUS_SERVICE_H_

#include <cstdint>
#include <string>
#include <utility>

#include "base/status.h"
#include "storage/roles.h"
#include "wire/admin_status.h"

namespace rackgate::core {

class AttestationService;

// How many recent failures the status lists.
inline constexpr int kStatusRecentFailures = 20;
// How far back the in-memory tables are shown.
inline constexpr int64_t kStatusWindowSeconds = 3600;

// The store's roles the status reads, each BORROWED.
struct StatusStores {
  storage::MaintenanceStore* counts;        // machines by state
  storage::AttestationStore* attestations;  // recent failures, pools
  storage::TrustStore* trust;               // untrusted machines
  storage::CaRotationStore* ca = nullptr;   // the appliance CA rotation's stage
};

class StatusService {
 public:
  // BORROWED: the stores and `attestation` (its clock and tables) outlive
  // the service.
  StatusService(StatusStores stores, const AttestationService* attestation);

  // The status now. Refusals: the store's only.
  Result<wire::StatusView> Report() const;

  // The cluster CA certificate whose rotation the status shows (read at
  // each Report: csr::ReadClusterCaState); "" (the default) or a CA that
  // cannot be read leaves cluster_ca empty. REQUIRES: before the first
  // Report (not thread-safe against it).
  void set_cluster_ca_certificate(std::string path) { cluster_ca_certificate_ = std::move(path); }

 private:
  StatusStores stores_;
  const AttestationService* attestation_;
  std::string cluster_ca_certificate_;
};

}  // namespace rackgate::core

#endif  // RACKGATE_CORE_STATUS_SERVICE_H_
