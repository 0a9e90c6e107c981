// Round trips per joined machine (issue 31; docs/storage.md, "Statements and
// writes per machine"): the statements and transactions the store runs for
// one machine's challenge, evidence, attested config and client CSR, counted
// by the store itself (storage::MaintenanceStore::GetWriteStats). Counts, not
// times: exact on any machine, so the guard is tight. When a change makes a
// step cheaper, lower the figures here and in docs/performance.md.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <iterator>
#include <memory>
#include <string>

#include "core/csr_service.h"
#include "core/ignition_service.h"
#include "core/testing/core_fixture.h"
#include "core/testing/csr_test_util.h"

namespace rackgate::core {
namespace {

using testing::SoftMachine;
using csr::test_util::CsrSpec;
using csr::test_util::MakeCsr;

// The figures measured when the guard was set, per backend (PostgreSQL's
// write transactions also take the fleet-wide lock: one statement more per
// write). The guard fails above figure + kSlack.
struct Figures {
  uint64_t statements;
  uint64_t transactions;
};
constexpr Figures kSqlite{29, 8};  // 2026-11-28, issue 31 (docs/performance.md, "Round trips per joined machine")
constexpr Figures kPostgres{33, 8};
constexpr uint64_t kSlack = 2;

// The steps of a join, in order.
constexpr const char* kSteps[] = {"challenge", "evidence", "attested config", "client CSR"};
constexpr size_t kStepCount = std::size(kSteps);

class RoundTripsTest : public testing::JoinTest {
 protected:
  static bool OnPostgres() {
    const char* s = std::getenv("RACKGATE_TEST_STORE");
    return s != nullptr && std::string(s) == "postgresql";
  }

  struct Join {
    Figures step[kStepCount];
    Figures total() const {
      Figures t{0, 0};
      for (const Figures& f : step) {
        t.statements += f.statements;
        t.transactions += f.transactions;
      }
      return t;
    }
  };

  // One machine from enrolled to joined; the round trips each step cost.
  Join JoinOne(const std::string& hostname) {
    SoftMachine m;
    Enroll(m, hostname);
    Join out{};
    size_t k = 0;
    storage::MaintenanceStore::WriteStats last = store_->GetWriteStats();
    const auto step_done = [&] {
      const storage::MaintenanceStore::WriteStats now = store_->GetWriteStats();
      out.step[k++] = {now.statements - last.statements, now.transactions - last.transactions};
      last = now;
    };
    auto challenge = attestation_->Challenge(m.ChallengeRequest(), caller_);
    EXPECT_TRUE(challenge.ok()) << challenge.status().ToString();
    step_done();
    if (!challenge.ok()) return out;
    auto attested = attestation_->Evidence(m.Answer(*challenge), caller_);
    EXPECT_TRUE(attested.ok()) << attested.status().ToString();
    step_done();
    if (!attested.ok()) return out;
    const std::string token = attested->token;
    auto config = ignition_->AttestedConfig(AttestedConfigRequest{token, std::nullopt, "192.0.2.9:1"});
    EXPECT_TRUE(config.ok()) << config.status().ToString();
    step_done();
    auto key = csr::test_util::NewKey("EC", "P-256");
    CsrSpec spec;
    spec.subject = {{"O", "system:nodes"}, {"CN", "system:node:" + hostname}};
    CsrSubmission s;
    s.signer = "kubernetes.io/kube-apiserver-client-kubelet";
    s.csr_pem = MakeCsr(key.get(), spec);
    auto issued = csrs_->Submit(token, s);
    EXPECT_TRUE(issued.ok()) << issued.status().ToString();
    if (issued.ok()) {
      EXPECT_EQ(issued->state, "joined");
    }
    step_done();
    return out;
  }
};

TEST_F(RoundTripsTest, JoiningOneMachineCostsNoMoreThanMeasured) {
  if (skip_) GTEST_SKIP() << *skip_;
  JoinOne("node-0");  // the first pays for the prepared statements
  const Join got = JoinOne("node-1");
  const char* backend = OnPostgres() ? "postgresql" : "sqlite";
  for (size_t k = 0; k < kStepCount; ++k) {
    std::printf("round trips of the %s (%s): %llu statements, %llu transactions\n", kSteps[k], backend,
                static_cast<unsigned long long>(got.step[k].statements),
                static_cast<unsigned long long>(got.step[k].transactions));
  }
  const Figures total = got.total();
  const Figures want = OnPostgres() ? kPostgres : kSqlite;
  std::printf("round trips per joined machine (%s): %llu statements, %llu transactions\n", backend,
              static_cast<unsigned long long>(total.statements), static_cast<unsigned long long>(total.transactions));
  EXPECT_LE(total.statements, want.statements + kSlack);
  EXPECT_LE(total.transactions, want.transactions + kSlack);
  // A second one costs the same, step by step: nothing grows with the fleet.
  const Join again = JoinOne("node-2");
  for (size_t k = 0; k < kStepCount; ++k) {
    EXPECT_EQ(again.step[k].statements, got.step[k].statements) << kSteps[k];
    EXPECT_EQ(again.step[k].transactions, got.step[k].transactions) << kSteps[k];
  }
}

}  // namespace
}  // namespace rackgate::core
