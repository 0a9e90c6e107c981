// The appliance CA bundle rackgated hands out (docs/operations.md, "Rotating
// the appliance CA"): in the evidence answer's ca_bundle, in
// {{appliance.ca_pem}} and in the status. During a rotation (the fleet's
// record, storage::CaRotationStore) it is the current and the next CA;
// otherwise this appliance's CA file, with its next.crt after it while this
// appliance has not retired yet (another appliance may have).
//
// The record is read at most once per kTtl (and again at once after
// Invalidate, which the PostgreSQL change listener calls for topic "ca"), so
// an attestation adds no database read and every appliance of a fleet
// serves a new stage within kTtl at worst (docs/ha.md, "Caches across
// appliances").
//
// Thread-safe.
#ifndef RACKGATE_CORE_APPLIANCE_CA_H_
#define RACKGATE_CORE_APPLIANCE_CA_H_

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "storage/roles.h"

namespace rackgate::core {

// How long a published bundle may take to reach every appliance: what
// `ca rotate --appliance switch` waits for machines to have attested after.
inline constexpr int64_t kCaBundleCacheSeconds = 2;

// The bundle for a rotation record: its current then its next CA.
std::string RotationBundle(const storage::CaRotation& rotation);

// When every appliance serves the rotation's bundle at the latest: its
// prepare plus the cache's bound.
int64_t BundlePublishedAt(const storage::CaRotation& rotation);

// The machines that would miss the next CA if the serving certificates
// switched now: those with an installed agent (attested, provisioned,
// joined) whose last good attestation (the answer that carries the bundle)
// is older than `published_at`. Pending, enrolled (never attested: their
// pointer config carries the CA) and revoked machines are not counted.
std::vector<storage::Machine> MachinesWithoutBundle(const std::vector<storage::Machine>& machines,
                                                    int64_t published_at);

class ApplianceCaBundle {
 public:
  static constexpr std::chrono::seconds kTtl{kCaBundleCacheSeconds};

  // BORROWED: the store (may be null: the local files only) outlives this.
  // local_current: STATE/ca/ca.crt's text; local_next: STATE/ca/next.crt's,
  // or "" when there is none.
  ApplianceCaBundle(storage::CaRotationStore* store, std::string local_current, std::string local_next,
                    std::chrono::steady_clock::duration ttl = kTtl);

  // The bundle now (PEM). A store that fails keeps the last record read
  // (logged once per failure): a database hiccup never takes the new CA
  // away from an answer.
  std::string Pem();
  // The rotation as last read (nullopt when none runs), for the status.
  std::optional<storage::CaRotation> Rotation();
  // Reads the record at the next call (another appliance changed it).
  // Quick: callable from the store's notification thread.
  void Invalidate();
  // The local files again (`systemctl reload rackgated`, after retire).
  void SetLocal(std::string local_current, std::string local_next);

 private:
  struct Snapshot {
    std::optional<storage::CaRotation> rotation;
    std::string pem;
  };
  std::shared_ptr<const Snapshot> Current();

  storage::CaRotationStore* store_;
  const std::chrono::steady_clock::duration ttl_;
  std::mutex mu_;
  std::string local_current_;                     // guarded by mu_
  std::string local_next_;                        // guarded by mu_
  std::shared_ptr<const Snapshot> snapshot_;      // guarded by mu_
  std::chrono::steady_clock::time_point loaded_;  // guarded by mu_
  // Set by Invalidate without mu_: the notification thread never waits
  // for a read in progress.
  std::atomic<bool> stale_{true};
};

}  // namespace rackgate::core

#endif  // RACKGATE_CORE_APPLIANCE_CA_H_
