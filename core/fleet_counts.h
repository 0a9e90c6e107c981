// The fleet's numbers that rackgated reads at scrape time and for its
// readiness probe (docs/observability.md): machines by state and untrusted,
// which pools observe their boot policy, open sessions, the write
// statistics, and whether the database answers. The daemon turns them into
// gauges; this reads them, from the store's maintenance and trust roles.
//
// Thread safety: as the store's; WriteDelta keeps its last reading under a
// mutex.
#ifndef RACKGATE_CORE_FLEET_COUNTS_H_
#define RACKGATE_CORE_FLEET_COUNTS_H_

#include <cstdint>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "storage/roles.h"

namespace rackgate::core {

// One reading. A count the store did not answer is nullopt, and counted in
// failed_reads.
struct FleetCounts {
  std::optional<std::map<std::string, int64_t>> machines_by_state;  // every state
  std::optional<int64_t> machines_untrusted;
  std::optional<std::map<std::string, bool>> pools_observing;  // pool -> observes its boot policy
  std::optional<int64_t> sessions_in_flight;
  int failed_reads = 0;
};

// Write transactions committed and writes carried since the last
// WriteDelta.
struct WriteDelta {
  uint64_t commits = 0;
  uint64_t writes = 0;
  uint64_t statements = 0;    // every round trip: reads, writes, BEGIN/COMMIT
  uint64_t transactions = 0;
};

// Every machine state's name (docs/lifecycle.md), in lifecycle order: the
// label values of the machines-by-state gauge.
std::vector<std::string> MachineStateNames();

class FleetCounter {
 public:
  // BORROWED: the roles outlive the counter.
  FleetCounter(storage::MaintenanceStore* maintenance, storage::TrustStore* trust);

  // Every count, at `now` (sessions neither used nor expired then).
  FleetCounts Count(int64_t now);

  // Whether the database answers a read now; its refusal when not.
  Status DatabaseAnswers();

  // What the store committed since the previous call (since Open, the
  // first time).
  WriteDelta TakeWriteDelta();

 private:
  storage::MaintenanceStore* maintenance_;
  storage::TrustStore* trust_;
  std::mutex mu_;
  storage::MaintenanceStore::WriteStats seen_;
};

}  // namespace rackgate::core

#endif  // RACKGATE_CORE_FLEET_COUNTS_H_
