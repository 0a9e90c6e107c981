// Manual CSR approval (docs/csr.md, "Manual approval"), the approver's
// nodeClientCert.disabled: a pool whose settings make a kind of CSR manual
// keeps such CSRs, once they passed every rule, waiting for an operator
// (`rackgatectl csr approve ID` or `csr deny ID --reason TEXT`). The machine
// is answered csr_awaiting_approval (503 + Retry-After) and asks again with
// the same key; an approved key is signed at its next submission, with every
// rule checked again at that moment by the caller.
#ifndef RACKGATE_CORE_CSR_APPROVAL_H_
#define RACKGATE_CORE_CSR_APPROVAL_H_

#include <cstdint>
#include <string>
#include <vector>

#include "base/status.h"
#include "core/pool_settings.h"
#include "storage/roles.h"

namespace rackgate::core {

// A CSR that passed every rule, as approval sees it.
struct CsrForApproval {
  const storage::Machine* machine = nullptr;  // BORROWED for the call
  std::string kind;                           // storage::kCertClient or kCertServing
  storage::Bytes public_key_sha256;           // SHA-256 of the CSR's SubjectPublicKeyInfo DER
  std::string csr_pem;
  std::vector<std::string> usages;
  bool tpm_resident = false;
  // A renewal (the CSR came with a valid renewal proof): waits only when the
  // pool's csr_approval.renewal is manual.
  bool renewal = false;
};

// Whether `settings` make this CSR wait for an operator at all.
bool NeedsApproval(const PoolSettings& settings, const CsrForApproval& csr);

// Ok: sign it now (the pool does not ask for approval of this kind, or an
// operator approved this machine's key). Otherwise the CSR is not signed:
//  - csr_awaiting_approval (kUnsupported): queued (one csr_waiting audit row
//    the first time) or still waiting; the machine waits it out.
//  - csr_denied (kVerificationFailed): an operator denied this key; final.
//    The message carries the operator's reason.
//  - csr_flood_machine, csr_flood (kUnsupported): too many CSRs wait.
//  - a store failure, as the store returned it (kIoError: db_busy...).
// REQUIRES: csr.machine is not null. `store` is BORROWED.
Status CheckCsrApproval(storage::CsrStore* store, const PoolSettings& settings, const CsrForApproval& csr,
                        int64_t now, const storage::CsrQueueLimits& limits = {});

}  // namespace rackgate::core

#endif  // RACKGATE_CORE_CSR_APPROVAL_H_
