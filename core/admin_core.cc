// The admin API's services, wired to the store's roles.
#include "core/admin_core.h"

namespace rackgate::core {

AdminCore::AdminCore(storage::Store* store, AttestationService* attestation_service, IgnitionService* ignition)
    : attestation(attestation_service),
      machines(store, store, store, attestation_service),
      ek_certs(store, attestation_service),
      pools(store, ignition, [attestation_service] { return attestation_service->Now(); }),
      policies(store, [attestation_service] { return attestation_service->Now(); }),
      csr_approvals(store, store, [attestation_service] { return attestation_service->Now(); }),
      certificates(store),
      events(store),
      audit(store),
      status({store, store, store, store}, attestation_service) {}

}  // namespace rackgate::core
