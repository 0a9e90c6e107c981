// The admin API's operations, one service per concern (docs/architecture.md,
// "The admin path"), each on the store role it uses: what rackgated's admin
// routes call. Built once by the composition root (daemon/main.cc) from the
// store, the attestation service (its clock, EK checks and in-memory tables)
// and the Ignition service (whose pool cache a pool change invalidates).
//
// Thread safety: each service's own (see its header).
#ifndef RACKGATE_CORE_ADMIN_CORE_H_
#define RACKGATE_CORE_ADMIN_CORE_H_

#include "core/attestation.h"
#include "core/audit_service.h"
#include "core/certificate_service.h"
#include "core/csr_approval_service.h"
#include "core/ek_cert_service.h"
#include "core/event_service.h"
#include "core/ignition_service.h"
#include "core/machine_service.h"
#include "core/policy_service.h"
#include "core/pool_service.h"
#include "core/status_service.h"
#include "storage/store.h"

namespace rackgate::core {

struct AdminCore {
  // BORROWED: store, attestation and ignition (nullable: no Ignition
  // service, no cache to invalidate) outlive it.
  AdminCore(storage::Store* store, AttestationService* attestation, IgnitionService* ignition);
  AdminCore(const AdminCore&) = delete;
  AdminCore& operator=(const AdminCore&) = delete;

  AttestationService* const attestation;
  MachineService machines;
  EkCertService ek_certs;
  PoolService pools;
  PolicyService policies;
  CsrApprovalService csr_approvals;
  CertificateService certificates;
  EventService events;
  AuditService audit;
  StatusService status;
};

}  // namespace rackgate::core

#endif  // RACKGATE_CORE_ADMIN_CORE_H_
