// The fleet's numbers for the scrape and /readyz (core/fleet_counts.h), on
// the fake and on the environment's real backend: machines by state, open
// sessions as they are issued and used, the observing pools, and the write
// statistics taken as deltas.
#include "core/fleet_counts.h"

#include <gtest/gtest.h>

#include <string>

#include "core/testing/core_fixture.h"

namespace rackgate::core::testing {
namespace {

class FleetCountsTest : public EveryStoreTest {};

TEST_P(FleetCountsTest, CountsMachinesSessionsAndPools) {
  FleetCounter fleet(store_.get(), store_.get());
  EXPECT_TRUE(fleet.DatabaseAnswers().ok());
  const FleetCounts empty = fleet.Count(now_);
  EXPECT_EQ(empty.failed_reads, 0);
  ASSERT_TRUE(empty.machines_by_state.has_value());
  EXPECT_EQ(empty.machines_by_state->size(), MachineStateNames().size());
  for (const std::string& state : MachineStateNames()) EXPECT_EQ(empty.machines_by_state->at(state), 0) << state;
  EXPECT_EQ(empty.sessions_in_flight, 0);
  EXPECT_EQ(empty.machines_untrusted, 0);
  ASSERT_TRUE(empty.pools_observing.has_value());
  EXPECT_EQ(empty.pools_observing->count("workers"), 1u);
  EXPECT_FALSE(empty.pools_observing->at("workers"));

  SoftMachine tpm;
  Enroll(tpm, "node-1");
  auto challenge = attestation_->Challenge(tpm.ChallengeRequest(), caller_);
  ASSERT_TRUE(challenge.ok()) << challenge.status().ToString();
  const FleetCounts open = fleet.Count(now_);
  EXPECT_EQ(open.machines_by_state->at("enrolled"), 1);
  EXPECT_EQ(open.sessions_in_flight, 1);
  // A session past its expiry is not in flight.
  EXPECT_EQ(fleet.Count(now_ + 3600 * 24).sessions_in_flight, 0);
}

// The fake counts no writes: the SQL backends' group commit does.
class FleetWritesTest : public CoreTest {};

TEST_F(FleetWritesTest, WritesAreTakenAsDeltas) {
  FleetCounter fleet(store_.get(), store_.get());
  fleet.TakeWriteDelta();
  EXPECT_EQ(fleet.TakeWriteDelta().writes, 0u);
  SoftMachine tpm;
  Enroll(tpm, "node-1");
  const WriteDelta d = fleet.TakeWriteDelta();
  EXPECT_GE(d.writes, 1u);
  EXPECT_GE(d.commits, 1u);
  EXPECT_EQ(fleet.TakeWriteDelta().writes, 0u) << "taken once";
}

RACKGATE_ON_EVERY_STORE(FleetCountsTest);

}  // namespace
}  // namespace rackgate::core::testing
