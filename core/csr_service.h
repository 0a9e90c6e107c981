// CSR vouching's decisions (docs/csr.md): POST /v1/machine/csr. A machine holding an
// attestation token submits its kubelet client or serving CSR; the
// approver's rules are applied against its attested identity (core/csr.h),
// a TPM-resident key is proven with a TPM2_Certify by the attested AK over
// the session's nonce, and the cluster CA signs. Every decision is audited
// and logged with the machine and the reason. Flood limits refuse
// (csr_flood_machine, csr_flood) before any crypto runs.
#ifndef RACKGATE_CORE_CSR_SERVICE_H_
#define RACKGATE_CORE_CSR_SERVICE_H_

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "base/status.h"
#include "core/attestation.h"
#include "core/csr.h"
#include "core/pool_settings.h"
#include "core/signer.h"
#include "storage/store.h"
#include "wire/protocol.h"

namespace rackgate::core {


// A TPM-resident key's proof as sent (base64 decoded); a field that was
// absent or not base64 is nullopt, and the request is refused field_invalid.
struct TpmKeyProof {
  std::optional<attest::Bytes> public_area;        // TPM2B_PUBLIC
  std::optional<attest::Bytes> certify_info;       // TPMS_ATTEST
  std::optional<attest::Bytes> certify_signature;  // TPMT_SIGNATURE
};

// The body of POST /v1/machine/csr, decoded.
struct CsrSubmission {
  std::string signer;  // kubernetes.io/kube-apiserver-client-kubelet or kubernetes.io/kubelet-serving
  std::string csr_pem;
  std::optional<std::vector<std::string>> usages;  // nullopt: kubelet's defaults for the signer
  std::optional<TpmKeyProof> tpm_key;
  // A renewal of the machine's current certificate of this kind (docs/csr.md,
  // "Renewal"): that certificate and a signature by its key.
  std::optional<wire::RenewalProof> renewal;
};

// A signed certificate (or the one already issued for the same key).
// The issued certificate, as the wire module defines the answer.
using CsrIssued = wire::IssuedCertificate;

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
};

class CsrService {
 public:
  // BORROWED: store, attestation and metrics (may be null) outlive the service.
  CsrService(storage::CsrStore* store, AttestationService* attestation, CsrOptions options, Metrics* metrics);

  // POST /v1/machine/csr, in docs/csr.md's order: the token, the flood
  // limits, then the body (`submission` is its decoding, or why it did not
  // decode: that answer waits until the token and the flood limits passed),
  // the CSR, the TPM key proof, the renewal proof when there is one, the
  // rules, the certify nonce's one use, the signer, the record.
  Result<CsrIssued> Submit(const std::optional<std::string>& bearer_token,
                           const Result<CsrSubmission>& submission);
  // Loads the cluster CA again (SIGHUP). An error keeps the running signer.
  Status Reload();

 private:
  std::shared_ptr<csr::Signer> CurrentSigner();
  Status Refuse(const storage::Machine& m, Status refusal, const std::string& kind, bool waitable = false);
  // The certificate a renewal replaces, after every renewal check but the
  // rules (docs/csr.md, "Renewal"); or, for a renewal already recorded for
  // this very key (an answer that was lost), that renewal in *done.
  Result<storage::IssuedCertificate> CheckRenewal(const storage::Machine& m, const storage::Token& token,
                                                  const std::string& kind, const wire::RenewalProof& proof,
                                                  const csr::Csr& csr, const PoolSettings& settings, int64_t now,
                                                  std::optional<storage::IssuedCertificate>* done);
  CsrIssued Answer(const storage::IssuedCertificate& cert, const storage::Machine& m);

  storage::CsrStore* store_;
  AttestationService* attestation_;
  CsrOptions options_;
  Metrics* metrics_;

  std::mutex mu_;
  std::shared_ptr<csr::Signer> signer_;       // guarded by mu_
  int in_flight_ = 0;                          // guarded by mu_
  std::map<int64_t, int> in_flight_by_machine_;  // guarded by mu_
};

}  // namespace rackgate::core

#endif  // RACKGATE_CORE_CSR_SERVICE_H_
