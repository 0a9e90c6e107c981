// The fleet's numbers for the scrape and the readiness probe.
#include "core/fleet_counts.h"

namespace rackgate::core {

std::vector<std::string> MachineStateNames() {
  std::vector<std::string> names;
  for (storage::MachineState s : storage::kAllMachineStates) names.emplace_back(storage::StateName(s));
  return names;
}

FleetCounter::FleetCounter(storage::MaintenanceStore* maintenance, storage::TrustStore* trust)
    : maintenance_(maintenance), trust_(trust) {}

FleetCounts FleetCounter::Count(int64_t now) {
  FleetCounts c;
  if (auto by_state = maintenance_->CountByState(); by_state.ok()) {
    c.machines_by_state = std::move(by_state).value();
  } else {
    ++c.failed_reads;
  }
  if (auto untrusted = trust_->CountUntrusted(); untrusted.ok()) {
    c.machines_untrusted = *untrusted;
  } else {
    ++c.failed_reads;
  }
  if (auto pools = trust_->ListPools(); pools.ok()) {
    c.pools_observing.emplace();
    for (const storage::Pool& p : *pools) (*c.pools_observing)[p.name] = p.boot_policy_mode == storage::kPolicyModeObserve;
  } else {
    ++c.failed_reads;
  }
  if (auto open = maintenance_->CountOpenSessions(now); open.ok()) {
    c.sessions_in_flight = *open;
  } else {
    ++c.failed_reads;
  }
  return c;
}

Status FleetCounter::DatabaseAnswers() {
  auto counts = maintenance_->CountByState();
  return counts.ok() ? Status::Ok() : counts.status();
}

WriteDelta FleetCounter::TakeWriteDelta() {
  std::lock_guard lock(mu_);
  const storage::MaintenanceStore::WriteStats now = maintenance_->GetWriteStats();
  const WriteDelta d{now.commits - seen_.commits, now.writes - seen_.writes, now.statements - seen_.statements,
                     now.transactions - seen_.transactions};
  seen_ = now;
  return d;
}

}  // namespace rackgate::core
