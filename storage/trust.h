// A machine's trust, changed inside a caller's write transaction with its
// audit row (docs/trust.md).
#ifndef RACKGATE_STORAGE_TRUST_H_
#define RACKGATE_STORAGE_TRUST_H_

#ifndef RACKGATE_STORAGE_INTERNAL
#error "storage/trust.h is internal to storage/; include storage/store.h"
#endif

#include <cstdint>
#include <string>
#include <string_view>

#include "storage/sqlite.h"
#include "storage/types.h"

namespace rackgate::storage {

// Sets `m`'s trust to `trust` (kTrustTrusted or kTrustUntrusted) for
// `reason` ("" when trusted) at `now`, in the caller's write transaction.
//  - trust changes: the columns are written and ONE audit row (action
//    "trusted" or "untrusted", detail {"reason"}, from and to state both the
//    machine's unchanged state) is written, except for a
//    machine's first verdict when it is trusted (its attest row says it).
//  - trust unchanged: only an untrusted machine's reason is brought up to
//    date (the latest cause), with no audit row.
// Returns whether the trust changed. Never touches the state.
bool ApplyTrust(Connection& c, const Machine& m, std::string_view trust, const std::string& reason,
                const Actor& actor, int64_t now);
// ApplyTrust's audit row alone, for a caller that wrote the columns in an
// UPDATE of its own (one statement, not two): `m` as it was before.
void AuditTrustChange(Connection& c, const Machine& m, std::string_view trust, const std::string& reason,
                      const Actor& actor, int64_t now);

}  // namespace rackgate::storage

#endif  // RACKGATE_STORAGE_TRUST_H_
