#include "daemon/admission.h"

#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <nlohmann/json.hpp>

#include "daemon/attestation.h"
#include "storage/store.h"

namespace rackgate::daemon {
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

// A challenge that waited longer than busy_queue_delay_ms for a handler
// thread is put off (503 busy, jittered Retry-After) before its body is even
// parsed; one that did not wait is handled (here: refused as malformed).
TEST(QueueDelay, AChallengeThatWaitedTooLongIsPutOff) {
  std::string dir = (std::filesystem::temp_directory_path() / "rackgate-queue-XXXXXX").string();
  ASSERT_NE(mkdtemp(dir.data()), nullptr);
  auto store = storage::Store::Open(dir + "/queue.db");
  ASSERT_TRUE(store.ok()) << store.status().ToString();
  TrustAnchors anchors{attest::EkTrustStore()};
  for (const int limit_ms : {50, 0}) {
    AttestationOptions o;
    o.busy_queue_delay_ms = limit_ms;
    o.busy_retry_after_seconds = 2;
    AttestationService service(store->get(), &anchors, o, nullptr);
    Request r;
    r.method = "POST";
    r.path = "/v1/attest/challenge";
    r.body = "not json";
    r.peer_address = "10.0.0.1:4711";
    r.queued = std::chrono::milliseconds(60);
    Response late = service.Challenge(r);
    r.queued = std::chrono::milliseconds(10);
    Response prompt = service.Challenge(r);
    EXPECT_EQ(prompt.status, 400) << limit_ms;
    if (limit_ms == 0) {
      EXPECT_EQ(late.status, 400) << "off: the delay is not looked at";
      continue;
    }
    ASSERT_EQ(late.status, 503);
    EXPECT_EQ(nlohmann::json::parse(late.body).at("error").at("reason"), "busy");
    int retry_after = 0;
    for (const auto& [name, value] : late.headers) {
      if (name == "Retry-After") retry_after = std::stoi(value);
    }
    EXPECT_GE(retry_after, 2);
    EXPECT_LE(retry_after, 4);
  }
  store->reset();
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace rackgate::daemon
