// EK certificates a TPM does not hold (docs/operations.md, "EK certificates a
// TPM does not hold"): an operator's certificate, fetched from the vendor's
// service where the appliance has no internet, verified against the trust
// anchors and put on record for the enrolled machine with its EK; and the
// EKs that lack one (machines enrolled by EK public without a certificate,
// unknown EKs that sent none), for `rackgatectl ek-cert urls`.
//
// Thread safety: as the store's and the attestation service's; no state of
// its own.
#ifndef RACKGATE_CORE_EK_CERT_SERVICE_H_
#define RACKGATE_CORE_EK_CERT_SERVICE_H_

#include "base/status.h"
#include "storage/roles.h"
#include "wire/admin_ek_certs.h"

namespace rackgate::core {

class AttestationService;

// Reasons of this service (each declared in wire/reasons.def).
// kNotFound: no machine has the certificate's EK; the message names the fix
// (enroll it with the certificate).
inline constexpr char kEkCertMachineUnknown[] = "ek_cert_machine_unknown";
// kInvalidArgument: the machine has another certificate on record; the
// message names the fix (enroll --ek-cert replaces it, audited as such).
inline constexpr char kEkCertOnRecord[] = "ek_cert_on_record";

class EkCertService {
 public:
  // BORROWED: both outlive the service.
  EkCertService(storage::InventoryStore* inventory, const AttestationService* attestation);

  // POST /v1/admin/ek-certs. The certificate (DER, or its NV form) is
  // verified against the current anchors (its reasons: ek_cert_*, as
  // enrollment refuses it, kVerificationFailed except ek_cert_malformed);
  // its key's hash finds the machine (ek_cert_machine_unknown); a machine
  // with another certificate on record is ek_cert_on_record; else the
  // certificate is stored with the TPM facts it names, in one store
  // transaction with its audit row (enroll_update, why "EK certificate
  // imported from SOURCE"), or "unchanged" (nothing written) when it is
  // already on record. field_invalid for base64.
  Result<wire::EkCertImportAnswer> Import(const wire::EkCertImportRequest& request, const storage::Actor& actor);

  // GET /v1/admin/ek-certs/missing: every machine without a certificate on
  // record (hostname order), then the unknown EKs of the last day that
  // sent none (most recent first), each with its EK public area.
  Result<wire::EkCertMissingList> Missing();

 private:
  storage::InventoryStore* inventory_;
  const AttestationService* attestation_;
};

}  // namespace rackgate::core

#endif  // RACKGATE_CORE_EK_CERT_SERVICE_H_
