// Machine administration (docs/operations.md, docs/inventory.md,
// docs/lifecycle.md): enrolling one machine or an inventory (the EK
// certificate checked against the trust anchors, the identity derived from
// the EK, the boot policy and the vars checked, then merged into what is
// enrolled in the store's transaction: core/enrollment_merge.h), listing and
// showing machines, approving a discovered one, revoking, resetting,
// deleting and renaming. Every change is audited with the operator and a
// reason (a default one when none is given) and logged. The admin API calls
// these; they decide, the handlers only decode and encode.
//
// Thread safety: as the store's and the attestation service's; no state of
// its own.
#ifndef RACKGATE_CORE_MACHINE_SERVICE_H_
#define RACKGATE_CORE_MACHINE_SERVICE_H_

#include <cstddef>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "base/status.h"
#include "storage/roles.h"
#include "wire/admin_machines.h"

namespace rackgate::core {

class AttestationService;

// The most rows one import takes.
inline constexpr size_t kMaxImportRows = 100000;

// An enroll: the answer, and whether it made the machine.
struct Enrolled {
  wire::EnrollAnswer answer;
  bool created = false;
};

// "node-1: addresses +InternalIP=10.0.0.6; vars unchanged", "node-1:
// enrolled", "node-1: unchanged": what an enroll did, in one line.
std::string EnrollSummary(const std::string& hostname, const std::string& outcome,
                          const std::vector<std::string>& changes);

class MachineService {
 public:
  // BORROWED: the store's roles and the attestation service (the EK
  // certificates' trust anchors and the clock) outlive the service.
  MachineService(storage::InventoryStore* inventory, storage::AttestationStore* attestations,
                 storage::IgnitionStore* reports, const AttestationService* attestation);

  // POST /v1/admin/machines: a field the request does not give is kept from
  // the enrolled machine (EnrollFields). Refusals: the request's
  // (kInvalidArgument: field_missing for no hostname or no EK, field_invalid
  // for base64, vars, unset_vars or policy together with clear_policy, a
  // policy parser's reason, the EK's parse); an EK certificate that does
  // not verify, or does not match the EK public area, is kVerificationFailed
  // with its reason; then the store's (field_missing for a new machine
  // without a pool, pool_unknown, ek_in_use, ek_conflict, hostname_invalid,
  // ...).
  Result<Enrolled> Enroll(const wire::EnrollRequest& request, const storage::Actor& actor);

  // POST /v1/admin/import. `decode` is called once with the sink that
  // makes each row an enrollment as it is decoded (the rows' JSON never held
  // whole); a row is refused as Enroll refuses a request, and a row without
  // a pool is field_missing, each naming the row (wire::ImportRowWhere and
  // its hostname); more than kMaxImportRows rows is field_invalid. Then the
  // store's Import, all or nothing (import_duplicate, a row's refusal).
  using ImportDecoder = std::function<Result<wire::ImportRequest>(const wire::ImportRowSink& row)>;
  Result<wire::ImportAnswer> Import(const ImportDecoder& decode, const storage::Actor& actor);

  // Every machine, or those of `pool` and/or in `state` (state_invalid,
  // kInvalidArgument, for an unknown state name; pool_unknown, kNotFound,
  // for a pool that does not exist), each with its last report.
  Result<std::vector<wire::MachineView>> List(const std::optional<std::string>& pool,
                                              const std::optional<std::string>& state);
  // One machine with its last good attestation and last report:
  // hostname_unknown (kNotFound).
  Result<wire::MachineView> Show(const std::string& hostname);

  // pending -> enrolled with the request's changes (rename, pool, addresses,
  // vars: field_invalid unless an object of at most 64 strings); the
  // store's refusals (hostname_taken, pool_unknown, state_conflict, ...).
  Result<wire::MachineView> Approve(const std::string& hostname, const wire::ApprovalRequest& request,
                                    const storage::Actor& actor);
  // Any state -> revoked. `reason` is required (field_missing when empty):
  // whoever finds a revoked machine later must learn why from the audit.
  Result<wire::MachineView> Revoke(const std::string& hostname, const std::string& reason,
                                   const storage::Actor& actor);
  // attested/provisioned/joined -> enrolled; `reason` "" is "by USER". A
  // revoked machine only with `unrevoke` (the store's machine_revoked
  // otherwise: revoked is terminal until an operator lifts it explicitly).
  Result<wire::MachineView> Reset(const std::string& hostname, const std::string& reason, bool unrevoke,
                                  const storage::Actor& actor);
  // The machine as it was (deleted set); `reason` "" is "deleted by USER".
  // machine_active, hostname_unknown.
  Result<wire::MachineView> Delete(const std::string& hostname, const std::string& reason,
                                   const storage::Actor& actor);
  // The machine under its new name (renamed_from set): field_missing when
  // the request has no new name; the store's (machine_active,
  // hostname_taken, hostname_invalid, hostname_unknown). Reason "" is
  // "renamed by USER".
  Result<wire::MachineView> Rename(const std::string& hostname, const wire::RenameRequest& request,
                                   const storage::Actor& actor);

 private:
  storage::InventoryStore* inventory_;
  storage::AttestationStore* attestations_;
  storage::IgnitionStore* reports_;
  const AttestationService* attestation_;
};

}  // namespace rackgate::core

#endif  // RACKGATE_CORE_MACHINE_SERVICE_H_
