// Tests for the store under concurrent use from many threads: no errors,
// counts add up, single-use sessions stay single-use, state checks hold.
#include <gtest/gtest.h>

#include <atomic>
#include <cstdio>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "storage/sqlite.h"
#include "storage/store.h"
#include "storage/testing/test_util.h"

namespace rackgate::storage {
namespace {

using testing::B;
using testing::MakeEnrollment;
using testing::MustOpen;
using testing::Op;
using testing::TempDir;

constexpr int kThreads = 8;

int64_t Count(const std::string& path, const char* sql) {
  auto c = testing::MustConnect(path);
  if (c == nullptr) return -1;
  Stmt s = c->Prepare(sql);
  EXPECT_TRUE(s.Step());
  return s.Int(0);
}

template <typename F>
void RunThreads(int n, F f) {
  std::vector<std::thread> threads;
  std::atomic<bool> go{false};
  for (int t = 0; t < n; ++t) {
    threads.emplace_back([&, t] {
      while (!go.load()) std::this_thread::yield();
      f(t);
    });
  }
  go.store(true);
  for (auto& th : threads) th.join();
}

class ConcurrencyTest : public ::testing::Test {
 protected:
  void SetUp() override {
    store_ = MustOpen(path_);
    ASSERT_NE(store_, nullptr);
    ASSERT_TRUE(store_->PutPool(Pool{"workers"}, Op(), 1).ok());
  }
  TempDir dir_;
  std::string path_ = dir_.File("concurrent.db");
  std::unique_ptr<Store> store_;
};

// Every thread runs the whole protocol for its own machine, over and over,
// while reading other machines.
TEST_F(ConcurrencyTest, ProtocolRoundsFromManyThreads) {
  constexpr int kRounds = 40;
  std::vector<int64_t> ids(kThreads);
  for (int t = 0; t < kThreads; ++t) {
    auto m = store_->Enroll(MakeEnrollment("node-" + std::to_string(t), std::to_string(t)), Op(), false, 1);
    ASSERT_TRUE(m.ok());
    ids[t] = m->id;
  }
  std::atomic<int> errors{0};
  RunThreads(kThreads, [&](int t) {
    auto check = [&](const Status& s, const char* what) {
      if (!s.ok()) {
        ++errors;
        ADD_FAILURE() << what << ": " << s.ToString();
      }
    };
    for (int i = 0; i < kRounds; ++i) {
      const std::string id = "t" + std::to_string(t) + "-" + std::to_string(i);
      const int64_t now = 1000 + i;
      Session s{id, ids[t], B("n" + id), B("h" + id), B("ak"), B("akn"), "sha256:0", now, now + 60, std::nullopt};
      check(store_->CreateSession(s), "create");
      auto got = store_->ConsumeSession(id, now);
      check(got.status(), "consume");
      AttestationRecord r;
      r.machine_id = ids[t];
      r.session_id = id;
      r.at = now;
      r.verdict = "ok";
      r.reset_count = 1;
      r.clock = static_cast<uint64_t>(i);
      Token tok{B("tok" + id), ids[t], id, now, now + 900};
      auto after = store_->RecordAttestationSuccess(r, tok, std::nullopt);
      check(after.status(), "attest");
      if (after.ok() && after->state != MachineState::kAttested) ADD_FAILURE() << after->state;
      auto who = store_->LookupToken(B("tok" + id), now);
      check(who.status(), "lookup");
      if (who.ok() && who->machine.id != ids[t]) ADD_FAILURE() << "token resolved to another machine";
      check(store_->GetMachine("node-" + std::to_string((t + 1) % kThreads)).status(), "get");
      check(store_->ListMachines().status(), "list");
      check(store_->LastSuccessfulAttestation(ids[t]).status(), "last");
      if (i % 10 == 0) {
        AttestationRecord f = r;
        f.verdict = "refused";
        f.reason = "quote_nonce_mismatch";
        check(store_->RecordAttestationFailure(f), "failure");
      }
    }
  });
  EXPECT_EQ(errors.load(), 0);
  const int64_t n = int64_t{kThreads} * kRounds;
  EXPECT_EQ(Count(path_, "SELECT count(*) FROM sessions WHERE used_at IS NOT NULL"), n);
  EXPECT_EQ(Count(path_, "SELECT count(*) FROM tokens"), n);
  EXPECT_EQ(Count(path_, "SELECT count(*) FROM attestations WHERE verdict = 'ok'"), n);
  EXPECT_EQ(Count(path_, "SELECT count(*) FROM attestations WHERE verdict = 'refused'"), kThreads * 4);
  EXPECT_EQ(Count(path_, "SELECT count(*) FROM audit WHERE action = 'attest'"), n);
  EXPECT_EQ(Count(path_, "SELECT count(*) FROM audit WHERE action = 'attest' AND from_state = 'enrolled'"),
            kThreads);
  // Trust (docs/trust.md): each failure is a change (one untrusted row), each
  // next good attestation one trusted row; none in between.
  EXPECT_EQ(Count(path_, "SELECT count(*) FROM audit WHERE action = 'untrusted'"), kThreads * 4);
  EXPECT_EQ(Count(path_, "SELECT count(*) FROM audit WHERE action = 'trusted'"), kThreads * 4);
  EXPECT_EQ(Count(path_, "SELECT count(*) FROM machines WHERE trust = 'trusted'"), kThreads);
  auto counts = store_->CountByState();
  ASSERT_TRUE(counts.ok());
  EXPECT_EQ(counts->at("attested"), kThreads);
}

// Every thread tries to consume every session: each is consumed exactly once.
// Writes from many threads are committed in groups, each write in its own
// savepoint: a write refused halfway (here after it has moved the machine,
// on a token hash that is taken) leaves nothing behind, and the writes that
// shared its transaction stand.
TEST_F(ConcurrencyTest, AWriteRefusedInAGroupLeavesTheOthersStanding) {
  constexpr int kRounds = 30;
  std::vector<int64_t> ids(kThreads);
  for (int t = 0; t < kThreads; ++t) {
    auto m = store_->Enroll(MakeEnrollment("node-" + std::to_string(t), std::to_string(t)), Op(), false, 1);
    ASSERT_TRUE(m.ok());
    ids[t] = m->id;
  }
  auto attest = [&](int64_t machine, const std::string& id, int64_t now, const std::string& token) {
    Session s{id, machine, B("n" + id), B("h" + id), B("ak"), B("akn"), "sha256:0", now, now + 60, std::nullopt};
    EXPECT_TRUE(store_->CreateSession(s).ok());
    EXPECT_TRUE(store_->ConsumeSession(id, now).ok());
    AttestationRecord r;
    r.machine_id = machine;
    r.session_id = id;
    r.at = now;
    r.verdict = "ok";
    r.reset_count = 1;
    return store_->RecordAttestationSuccess(r, Token{B(token), machine, id, now, now + 900}, std::nullopt);
  };
  ASSERT_TRUE(attest(ids[0], "first", 500, "taken").ok());
  const Store::WriteStats before = store_->GetWriteStats();
  std::atomic<int> refused{0}, wrong{0};
  RunThreads(kThreads, [&](int t) {
    for (int i = 0; i < kRounds; ++i) {
      const std::string id = "t" + std::to_string(t) + "-" + std::to_string(i);
      // Odd rounds (and so the last) reuse the taken token hash.
      const bool clash = i % 2 == 1;
      auto got = attest(ids[t], id, 1000 + i, clash ? "taken" : "tok" + id);
      if (clash && !got.ok() && got.status().reason() == "field_invalid") ++refused;
      if (clash == got.ok()) ++wrong;
    }
  });
  EXPECT_EQ(wrong.load(), 0);
  EXPECT_EQ(refused.load(), kThreads * kRounds / 2);
  const int64_t ok = int64_t{kThreads} * kRounds / 2 + 1;
  EXPECT_EQ(Count(path_, "SELECT count(*) FROM tokens"), ok);
  EXPECT_EQ(Count(path_, "SELECT count(*) FROM attestations WHERE verdict = 'ok'"), ok);
  EXPECT_EQ(Count(path_, "SELECT count(*) FROM audit WHERE action = 'attest'"), ok);
  for (int t = 0; t < kThreads; ++t) {
    auto m = store_->GetMachine("node-" + std::to_string(t));
    ASSERT_TRUE(m.ok());
    // The last round (1029) was refused: its move did not stay.
    EXPECT_EQ(m->last_attested_at, std::optional<int64_t>(1000 + kRounds - 2)) << m->hostname;
  }
  // Three writes a round (create, consume, attest), in fewer or as many
  // transactions.
  const Store::WriteStats after = store_->GetWriteStats();
  const uint64_t writes = after.writes - before.writes;
  const uint64_t commits = after.commits - before.commits;
  EXPECT_EQ(writes, uint64_t{kThreads} * kRounds * 3);
  EXPECT_LE(commits, writes);
  EXPECT_GT(commits, 0u);
  std::printf("group commit: %llu writes in %llu transactions\n", static_cast<unsigned long long>(writes),
              static_cast<unsigned long long>(commits));
}

TEST_F(ConcurrencyTest, EachSessionIsConsumedExactlyOnce) {
  constexpr int kSessions = 150;
  auto m = store_->Enroll(MakeEnrollment("node-1", "a"), Op(), false, 1);
  ASSERT_TRUE(m.ok());
  for (int i = 0; i < kSessions; ++i) {
    const std::string id = "s" + std::to_string(i);
    ASSERT_TRUE(store_->CreateSession({id, m->id, B("n"), B("h"), B("ak"), B("akn"), "", 0, 100, std::nullopt}).ok());
  }
  std::vector<std::atomic<int>> wins(kSessions);
  std::atomic<int> used{0};
  std::atomic<int> other{0};
  RunThreads(kThreads, [&](int t) {
    for (int k = 0; k < kSessions; ++k) {
      // Different threads walk the ids in different orders, so every pair
      // meets on some id.
      const int i = (t % 2 == 0) ? k : kSessions - 1 - k;
      auto r = store_->ConsumeSession("s" + std::to_string(i), 50);
      if (r.ok()) {
        ++wins[i];
      } else if (r.status().reason() == "session_used") {
        ++used;
      } else {
        ++other;
        ADD_FAILURE() << r.status().ToString();
      }
    }
  });
  for (int i = 0; i < kSessions; ++i) EXPECT_EQ(wins[i].load(), 1) << "session " << i;
  EXPECT_EQ(used.load(), kSessions * (kThreads - 1));
  EXPECT_EQ(other.load(), 0);
}

// Racing transitions from the same state: exactly one wins, one audit row.
TEST_F(ConcurrencyTest, RacingTransitionsHaveOneWinner) {
  constexpr int kMachines = 30;
  std::vector<int64_t> ids;
  for (int i = 0; i < kMachines; ++i) {
    auto m = store_->Enroll(MakeEnrollment("node-" + std::to_string(i), std::to_string(i)), Op(), false, 1);
    ASSERT_TRUE(m.ok());
    ASSERT_TRUE(
        store_->RecordAttestationSuccess({0, m->id, "", "s", 2, "ok", "", {}, "", 0, 0, 0, 0},
                                         Token{B("t" + std::to_string(i)), m->id, "s", 2, 100}, std::nullopt)
            .ok());
    ids.push_back(m->id);
  }
  std::atomic<int> won{0};
  std::atomic<int> conflicts{0};
  RunThreads(kThreads, [&](int) {
    for (int64_t id : ids) {
      auto r = store_->Transition(id, {MachineState::kAttested}, MachineState::kProvisioned, Op(), "config_fetched", 3);
      if (r.ok()) {
        ++won;
      } else if (r.status().reason() == "state_conflict") {
        ++conflicts;
      } else {
        ADD_FAILURE() << r.status().ToString();
      }
    }
  });
  EXPECT_EQ(won.load(), kMachines);
  EXPECT_EQ(conflicts.load(), kMachines * (kThreads - 1));
  EXPECT_EQ(Count(path_, "SELECT count(*) FROM audit WHERE action = 'config_fetched'"), kMachines);
}

// The same enrollment from many threads at once: one machine, one audit row.
TEST_F(ConcurrencyTest, RacingEnrollmentsOfOneMachine) {
  std::atomic<int> ok{0};
  RunThreads(kThreads, [&](int) {
    for (int i = 0; i < 20; ++i) {
      auto r = store_->Enroll(MakeEnrollment("node-" + std::to_string(i), std::to_string(i)), Op(), false, 5);
      if (r.ok()) ++ok;
      else ADD_FAILURE() << r.status().ToString();
    }
  });
  EXPECT_EQ(ok.load(), kThreads * 20);
  EXPECT_EQ(Count(path_, "SELECT count(*) FROM machines"), 20);
  EXPECT_EQ(Count(path_, "SELECT count(*) FROM audit WHERE action = 'enroll'"), 20);
}

// Two Store objects on one file (two processes, in effect): writes wait for
// each other through SQLite's lock instead of failing.
TEST_F(ConcurrencyTest, TwoStoresOnOneFile) {
  auto second = MustOpen(path_);
  ASSERT_NE(second, nullptr);
  Store* stores[2] = {store_.get(), second.get()};
  std::atomic<int> errors{0};
  RunThreads(4, [&](int t) {
    Store* s = stores[t % 2];
    for (int i = 0; i < 25; ++i) {
      const std::string host = "n" + std::to_string(t) + "-" + std::to_string(i);
      auto r = s->Enroll(MakeEnrollment(host, host), Op(), false, 5);
      if (!r.ok()) {
        ++errors;
        ADD_FAILURE() << r.status().ToString();
      }
    }
  });
  EXPECT_EQ(errors.load(), 0);
  EXPECT_EQ(Count(path_, "SELECT count(*) FROM machines"), 100);
}

}  // namespace
}  // namespace rackgate::storage
