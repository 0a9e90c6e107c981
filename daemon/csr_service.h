// CSR vouching (docs/csr.md): POST /v1/machine/csr. A machine holding an
// attestation token submits its kubelet client or serving CSR; the
// approver's rules are applied against its attested identity (daemon/csr.h),
// a TPM-resident key is proven with a TPM2_Certify by the attested AK over
// the session's nonce, and the cluster CA signs. Every decision is audited
// and logged with the machine and the reason. Flood limits answer 429/503
// with Retry-After before any crypto runs.
#ifndef RACKGATE_DAEMON_CSR_SERVICE_H_
#define RACKGATE_DAEMON_CSR_SERVICE_H_

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>

#include "base/status.h"
#include "daemon/attestation.h"
#include "daemon/http.h"
#include "daemon/pool_settings.h"
#include "daemon/signer.h"
#include "storage/store.h"

namespace rackgate::daemon {

class Metrics;

struct CsrOptions {
  // Where LocalCaSigner finds the cluster CA; read at the first CSR and at
  // every Reload, so `rackgatectl ca import` needs no restart.
  std::string cluster_ca_certificate;
  std::string cluster_ca_key;
  int64_t client_window_seconds = 7200;
  int64_t client_validity_seconds = 365 * 86400;
  int64_t serving_validity_seconds = 365 * 86400;
  int max_in_flight = 64;
  int max_in_flight_per_machine = 2;
  int retry_after_seconds = 30;
};

class CsrService {
 public:
  // BORROWED: store, attestation and metrics (may be null) outlive the service.
  CsrService(storage::Store* store, AttestationService* attestation, CsrOptions options, Metrics* metrics);

  // POST /v1/machine/csr.
  Response Submit(const Request& request);
  // Loads the cluster CA again (SIGHUP). An error keeps the running signer.
  Status Reload();

 private:
  std::shared_ptr<csr::Signer> CurrentSigner();
  Response Refuse(const storage::Machine& m, int status, const std::string& reason, const std::string& message,
                  const std::string& kind, bool waitable = false);

  storage::Store* store_;
  AttestationService* attestation_;
  CsrOptions options_;
  Metrics* metrics_;

  std::mutex mu_;
  std::shared_ptr<csr::Signer> signer_;       // guarded by mu_
  int in_flight_ = 0;                          // guarded by mu_
  std::map<int64_t, int> in_flight_by_machine_;  // guarded by mu_
};

}  // namespace rackgate::daemon

#endif  // RACKGATE_DAEMON_CSR_SERVICE_H_
