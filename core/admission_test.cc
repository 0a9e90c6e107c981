// Tests of the session gate (core/admission.h).
#include "core/admission.h"

#include <gtest/gtest.h>

#include <string>

namespace rackgate::core {
namespace {

TEST(SessionGate, BoundsSessionsOverallAndPerClient) {
  SessionGate gate(3, 2);
  uint64_t a = 0, b = 0, c = 0, d = 0;
  EXPECT_EQ(gate.Admit("10.0.0.1", 100, 220, &a), SessionGate::Verdict::kAdmitted);
  EXPECT_EQ(gate.Admit("10.0.0.1", 100, 220, &b), SessionGate::Verdict::kAdmitted);
  EXPECT_EQ(gate.Admit("10.0.0.1", 100, 220, &c), SessionGate::Verdict::kClientFull);
  EXPECT_EQ(gate.Admit("10.0.0.2", 100, 220, &c), SessionGate::Verdict::kAdmitted);
  EXPECT_EQ(gate.Admit("10.0.0.3", 100, 220, &d), SessionGate::Verdict::kFull);
  EXPECT_EQ(gate.open(), 3);
}

TEST(SessionGate, EvidenceAndFailedChallengesFreePlaces) {
  SessionGate gate(2, 2);
  uint64_t a = 0, b = 0, c = 0;
  ASSERT_EQ(gate.Admit("x", 100, 220, &a), SessionGate::Verdict::kAdmitted);
  gate.Bind(a, "session-a");
  ASSERT_EQ(gate.Admit("x", 100, 220, &b), SessionGate::Verdict::kAdmitted);
  EXPECT_EQ(gate.Admit("y", 100, 220, &c), SessionGate::Verdict::kFull);
  gate.Release(b);  // the challenge failed after admission
  EXPECT_EQ(gate.open(), 1);
  gate.Finish("session-a");
  gate.Finish("session-a");     // twice: no effect
  gate.Finish("never-issued");  // unknown: no effect
  EXPECT_EQ(gate.open(), 0);
  EXPECT_EQ(gate.Admit("y", 100, 220, &c), SessionGate::Verdict::kAdmitted);
}

TEST(SessionGate, ExpiredSessionsAreReclaimedWhenFull) {
  SessionGate gate(2, 2);
  uint64_t a = 0, b = 0, c = 0;
  ASSERT_EQ(gate.Admit("x", 100, 150, &a), SessionGate::Verdict::kAdmitted);
  gate.Bind(a, "s-a");
  ASSERT_EQ(gate.Admit("x", 100, 300, &b), SessionGate::Verdict::kAdmitted);
  EXPECT_EQ(gate.Admit("x", 149, 300, &c), SessionGate::Verdict::kFull);
  EXPECT_EQ(gate.Admit("x", 150, 300, &c), SessionGate::Verdict::kAdmitted);  // s-a expired at 150
  gate.Finish("s-a");  // its evidence comes too late: nothing to free
  EXPECT_EQ(gate.open(), 2);
}

TEST(ClientAddress, StripsThePort) {
  EXPECT_EQ(ClientAddress("10.1.2.3:4711"), "10.1.2.3");
  EXPECT_EQ(ClientAddress("[fd00::1]:4711"), "fd00::1");
  EXPECT_EQ(ClientAddress("unix"), "unix");
}

}  // namespace
}  // namespace rackgate::core
