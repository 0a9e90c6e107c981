// Provisioning reports (docs/trust.md, "Provisioning reports"): POST
// /v1/machine/report with the attestation token records the machine's last
// report, which rackgatectl show and list display. A report is the agent's
// account of its run, not a state change: no audit row, nothing decided from
// it. Each report logs one line naming the machine and the outcome.
#ifndef RACKGATE_CORE_REPORT_SERVICE_H_
#define RACKGATE_CORE_REPORT_SERVICE_H_

#include <optional>
#include <string>

#include "base/status.h"
#include "core/attestation.h"
#include "storage/roles.h"
#include "wire/protocol.h"

namespace rackgate::core {

class ReportService {
 public:
  // BORROWED: store and attestation outlive the service.
  ReportService(storage::IgnitionStore* store, AttestationService* attestation) : store_(store), attestation_(attestation) {}

  // Authenticates the token (AttestationService::Authenticate's reasons),
  // then stores `report` (already decoded: its refusal is returned as is) as
  // the machine's last one, timed by the service's clock. busy on a store
  // failure.
  Status Record(const std::optional<std::string>& bearer_token, const Result<wire::ProvisioningReport>& report);

 private:
  storage::IgnitionStore* store_;
  AttestationService* attestation_;
};

}  // namespace rackgate::core

#endif  // RACKGATE_CORE_REPORT_SERVICE_H_
