// Tests of the session gate (core/admission.h).
#include "core/admission.h"

#include <gtest/gtest.h>

#include <memory>
#include <string>

#include "attest/testing/soft_tpm.h"

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

// The AK kept for a session's evidence: handed out once, by Finish; dropped
// with the session's place when it fails or expires.
std::shared_ptr<const SessionAk> NewAk() {
  auto ak = rackgate::testing::SoftKey::GenerateAk(attest::kAlgEcc);
  auto key = attest::VerifyKey::FromTpmPublic(ak.pub());
  if (!key.ok()) throw std::runtime_error(key.status().ToString());
  return std::make_shared<const SessionAk>(SessionAk{ak.tpm2b_public(), std::move(*key)});
}

TEST(SessionGate, KeepsTheSessionsAkUntilItFinishesOrExpires) {
  SessionGate gate(2, 2);
  uint64_t a = 0, b = 0, c = 0;
  auto ak = NewAk();
  std::weak_ptr<const SessionAk> watch = ak;
  ASSERT_EQ(gate.Admit("x", 100, 220, &a), SessionGate::Verdict::kAdmitted);
  gate.Bind(a, "session-a", std::move(ak));
  EXPECT_EQ(gate.Finish("other"), nullptr);
  auto got = gate.Finish("session-a");
  ASSERT_NE(got, nullptr);
  EXPECT_EQ(got, watch.lock());
  EXPECT_EQ(gate.Finish("session-a"), nullptr) << "once only";
  got.reset();
  EXPECT_TRUE(watch.expired()) << "the gate keeps no copy";

  // An expired session's place, reclaimed when the gate is full, takes its
  // AK with it; a session bound without one finishes with none.
  ak = NewAk();
  watch = ak;
  ASSERT_EQ(gate.Admit("x", 100, 120, &b), SessionGate::Verdict::kAdmitted);
  gate.Bind(b, "session-b", std::move(ak));
  ASSERT_EQ(gate.Admit("y", 100, 220, &c), SessionGate::Verdict::kAdmitted);
  gate.Bind(c, "session-c");
  EXPECT_FALSE(watch.expired());
  uint64_t d = 0;
  ASSERT_EQ(gate.Admit("z", 130, 250, &d), SessionGate::Verdict::kAdmitted);
  EXPECT_TRUE(watch.expired()) << "dropped with the expired place";
  EXPECT_EQ(gate.Finish("session-b"), nullptr);
  EXPECT_EQ(gate.Finish("session-c"), nullptr);
  // A reservation released after a failed challenge keeps nothing.
  gate.Release(d);
  EXPECT_EQ(gate.open(), 0);
}

TEST(ClientAddress, StripsThePort) {
  EXPECT_EQ(ClientAddress("10.1.2.3:4711"), "10.1.2.3");
  EXPECT_EQ(ClientAddress("[fd00::1]:4711"), "fd00::1");
  EXPECT_EQ(ClientAddress("unix"), "unix");
}

}  // namespace
}  // namespace rackgate::core
