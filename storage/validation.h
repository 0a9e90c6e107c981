// Checks on what callers store: sizes, names, states and addresses. Each
// Check* throws StoreError (storage/sql.h) with the reason store.h names.
#ifndef RACKGATE_STORAGE_VALIDATION_H_
#define RACKGATE_STORAGE_VALIDATION_H_

#ifndef RACKGATE_STORAGE_INTERNAL
#error "storage/validation.h is internal to storage/; include storage/store.h"
#endif

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/size_limits.h"
#include "base/status.h"
#include "storage/types.h"

namespace rackgate::storage {

// Size limits on what the caller stores. Generous against what a TPM, an EK
// certificate or a policy really needs; they only keep a runaway caller from
// filling the disk.
// What a machine sends is bounded by the protocol's own limits (base/size_limits.h).
using limits::kMaxAddresses;
using limits::kMaxCertificate;
using limits::kMaxHash;
using limits::kMaxSessionId;
using limits::kMaxTpm2bPublic;
inline constexpr size_t kMaxFact = 256;
inline constexpr size_t kMaxAddressValue = 253;
inline constexpr size_t kMaxJson = 1024 * 1024;
inline constexpr size_t kMaxTpmBlob = 4096;
inline constexpr size_t kMaxPcrSelection = 1024;
inline constexpr size_t kMaxActor = 256;
inline constexpr size_t kMaxWhy = 4096;
inline constexpr size_t kMaxReasons = 256;
inline constexpr size_t kMaxReason = 256;

// The checks every recorded certificate passes, whether first or renewed:
// field_invalid (thrown by CheckSize, returned for a kind).
Status CheckCertificate(const IssuedCertificate& cert);
// The checks on a new session: field_invalid.
Status CheckSession(const Session& session);

// Approver mode (KubeApprovalStore), each field_invalid:
// a kind of client or serving and a SHA-256 of 32 bytes.
void CheckAttestedKey(const AttestedKey& key);
// uid (1..128), name (1..253) and reason (0..256) printable without spaces;
// requester (0..256), message (0..512) and decided_by (0..256) printable;
// kind, purpose and decision among theirs, and the purpose of the kind (join
// and rotation: client; serving: serving); a key hash of 32 bytes (a denied
// CSR may have none: its key may be what could not be read).
void CheckKubeCsrDecision(const KubeCsrDecision& d);
// An operator's reason for a denial: 1..256 printable characters.
void CheckDenyReason(const std::string& reason);

// The refusal of a reset of revoked machine `hostname` without unrevoke
// (machine_revoked, kInvalidArgument): the message names the flag that
// lifts a revocation. One wording for every backend.
Status RevokedRefusal(const std::string& hostname);

// field_invalid unless min <= size <= max.
void CheckSize(const char* field, size_t size, size_t min, size_t max);
void CheckPoolName(const std::string& p);            // pool_invalid
void CheckHostname(const std::string& h);            // hostname_invalid (rename)
void CheckState(MachineState s);                     // state_invalid
void CheckActor(const Actor& a);                     // field_invalid
void CheckOptJson(const char* field, const std::optional<std::string>& j);
// An IPv4 or IPv6 literal, as inet_pton reads it ("10.0.0.300" is not).
bool IsIpLiteral(const std::string& v);
// An RFC 1123 DNS name: labels of 1..63 letters, digits and '-' (not at a
// label's ends), joined by '.', at most 253 characters, no trailing dot.
bool IsDnsName(std::string_view n);
// hostname_invalid, pool_invalid, state_invalid, field_invalid (also for an
// address whose value does not fit its kind: IsIpLiteral, IsDnsName).
void CheckEnrollment(const Enrollment& e);
// The enrollment a pending machine's approval makes of it: `changes` where
// given, the machine's own fields elsewhere, state enrolled; checked by
// CheckEnrollment (its refusals).
Enrollment ApprovedEnrollment(const Machine& pending, const ApprovalChanges& changes);
void CheckRecord(const AttestationRecord& r);  // field_invalid
// import_duplicate unless every hostname and every EK appears once in the
// rows; the message names both rows of each pair (at most five pairs).
void CheckNoImportDuplicates(const std::vector<ImportRow>& rows);

}  // namespace rackgate::storage

#endif  // RACKGATE_STORAGE_VALIDATION_H_
