// The EK trust anchors rackgated runs with (docs/operations.md, "EK trust
// anchors"): ek_roots and ek_intermediates loaded, ek_anchor_relaxations
// granted, and what the start-up log and /metrics say about them.
#ifndef RACKGATE_DAEMON_EK_ANCHORS_H_
#define RACKGATE_DAEMON_EK_ANCHORS_H_

#include <cstdint>
#include <string>
#include <vector>

#include "attest/ek_cert.h"
#include "base/metrics.h"
#include "base/status.h"
#include "daemon/config.h"

namespace rackgate::daemon {

// An anchor expiring within this many seconds is named at start and counted
// in rackgate_ek_anchors_expiring_within_year.
inline constexpr int64_t kEkAnchorExpiryWarningSeconds = 365 * 86400;

// The anchors of `c`: ek_roots and ek_intermediates loaded (no roots at all
// is an empty store: every certificate is then refused), then every
// ek_anchor_relaxations entry granted. Fails with the store's reasons
// (ek_trust_store_io, ek_trust_store_invalid), and for a relaxation naming
// no loaded anchor or an unknown relaxation with ek_trust_store_invalid,
// the message naming the config key, the anchor and the names that exist.
Result<attest::EkTrustStore> LoadEkAnchors(const Config& c);

// What to log about a loaded store at `now`: a summary line ("N EK trust
// anchors loaded (S self-signed, P partial-chain CA), I intermediates"),
// each load note, each relaxation granted, and each anchor expiring within
// a year (or expired), one line each.
struct EkAnchorReport {
  std::string summary;
  std::vector<std::string> notes;
  std::vector<std::string> relaxed;
  std::vector<std::string> expiring;
};
EkAnchorReport ReportEkAnchors(const attest::EkTrustStore& store, int64_t now);
// Logs ReportEkAnchors (notes, relaxations and expiries as warnings).
void LogEkAnchors(const attest::EkTrustStore& store, int64_t now);

// rackgate_ek_anchors and rackgate_ek_anchors_expiring_within_year (already
// expired ones included) for `store` at `now`.
void CollectEkAnchorMetrics(Metrics* metrics, const attest::EkTrustStore& store, int64_t now);

}  // namespace rackgate::daemon

#endif  // RACKGATE_DAEMON_EK_ANCHORS_H_
