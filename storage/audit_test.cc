// Tests for the audit log: filters, paging, one row per change, no secrets.
#include <gtest/gtest.h>

#include <optional>
#include <string>
#include <vector>

#include "storage/store.h"
#include "storage/store_test_fixture.h"

namespace rackgate::storage {
namespace {

using testing::B;
using testing::ExpectFailure;
using testing::MakeEnrollment;
using testing::MustOpen;
using testing::Op;
using testing::StoreTest;
using testing::TempDir;

// --- Audit -------------------------------------------------------------------

TEST_F(StoreTest, ListAuditFiltersAndPages) {
  for (int i = 0; i < 5; ++i) Enroll("node-" + std::to_string(i), std::to_string(i));
  auto all = Audit();
  ASSERT_EQ(all.size(), 7u);  // two pools, five machines
  for (size_t i = 1; i < all.size(); ++i) EXPECT_LT(all[i - 1].id, all[i].id);

  AuditFilter f;
  f.limit = 2;
  auto newest = store_->ListAudit(f);
  ASSERT_TRUE(newest.ok());
  ASSERT_EQ(newest->size(), 2u);
  EXPECT_EQ((*newest)[0].hostname, "node-3");
  EXPECT_EQ((*newest)[1].hostname, "node-4");

  f.since_id = all[2].id;
  f.limit = 2;
  auto follow = store_->ListAudit(f);
  ASSERT_TRUE(follow.ok());
  ASSERT_EQ(follow->size(), 2u);
  EXPECT_EQ((*follow)[0].id, all[3].id);
  EXPECT_EQ((*follow)[1].id, all[4].id);

  f = AuditFilter{};
  f.hostname = "node-2";
  auto one = store_->ListAudit(f);
  ASSERT_TRUE(one.ok());
  ASSERT_EQ(one->size(), 1u);
  EXPECT_EQ((*one)[0].action, "enroll");
}

// Every state change is one audit row, and the rows chain: each row's
// from_state is the previous row's to_state.
TEST_F(StoreTest, EveryStateChangeHasExactlyOneAuditRow) {
  Machine m = Enroll("node-1", "a", MachineState::kPending);
  std::vector<std::string> states = {"pending"};
  auto step = [&](Result<Machine> r) {
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    states.push_back(std::string(StateName(r->state)));
  };
  step(store_->Approve("node-1", Op(), 200));
  step(store_->RecordAttestationSuccess(Record(m, 300), MakeToken(m, "1", 300), std::nullopt));
  step(store_->Transition(m.id, {MachineState::kAttested}, MachineState::kProvisioned, Op(), "config_fetched", 400));
  step(store_->Transition(m.id, {MachineState::kProvisioned}, MachineState::kJoined, Op(), "client_csr_signed", 500));
  step(store_->Reset("node-1", Op(), 600));
  step(store_->RecordAttestationSuccess(Record(m, 700), MakeToken(m, "2", 700), std::nullopt));
  step(store_->Revoke("node-1", Op(), 800));

  // Refusals in between leave no trace.
  (void)store_->Approve("node-1", Op(), 900);
  (void)store_->Transition(m.id, {MachineState::kAttested}, MachineState::kJoined, Op(), "x", 900);
  (void)store_->RecordAttestationSuccess(Record(m, 900), MakeToken(m, "3", 900), std::nullopt);
  AttestationRecord f = Record(m, 950);
  f.verdict = "refused";
  ASSERT_TRUE(store_->RecordAttestationFailure(f).ok());

  auto audit = Audit("node-1");
  ASSERT_EQ(audit.size(), states.size());
  EXPECT_FALSE(audit[0].from_state.has_value());
  EXPECT_EQ(audit[0].to_state, states[0]);
  for (size_t i = 1; i < audit.size(); ++i) {
    EXPECT_EQ(audit[i].from_state, states[i - 1]) << i;
    EXPECT_EQ(audit[i].to_state, states[i]) << i;
  }
  std::vector<std::string> actions;
  for (const auto& a : audit) actions.push_back(a.action);
  EXPECT_EQ(actions, (std::vector<std::string>{"enroll", "approve", "attest", "config_fetched", "client_csr_signed",
                                               "reset", "attest", "revoke"}));
}

// Observability: a refused admin request is one admin_refused row, naming
// the machine only when the hostname is known, and changing nothing else.
TEST_F(StoreTest, AuditAdminRefusalNamesKnownMachinesOnly) {
  Machine m = Enroll("node-1", "a");
  const size_t before = Audit().size();
  ASSERT_TRUE(store_->AuditAdminRefusal("node-1", R"({"reason":"state_conflict","uid":1000})", Op(), 1200).ok());
  ASSERT_TRUE(store_->AuditAdminRefusal("no-such-node", R"({"reason":"hostname_unknown"})", Op(), 1201).ok());
  ASSERT_TRUE(store_->AuditAdminRefusal("", R"({"reason":"admin_forbidden"})", Op(), 1202).ok());
  auto rows = Audit();
  ASSERT_EQ(rows.size(), before + 3);
  const AuditEntry& known = rows[before];
  EXPECT_EQ(known.action, "admin_refused");
  EXPECT_EQ(known.machine_id, m.id);
  EXPECT_EQ(known.hostname, "node-1");
  EXPECT_FALSE(known.from_state.has_value());
  EXPECT_NE(known.detail_json.find("state_conflict"), std::string::npos);
  EXPECT_FALSE(rows[before + 1].machine_id.has_value());
  EXPECT_EQ(rows[before + 1].hostname, "");
  EXPECT_FALSE(rows[before + 2].machine_id.has_value());
  auto again = store_->GetMachine("node-1");
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->state, m.state);
  ExpectFailure(store_->AuditAdminRefusal("node-1", "[]", Op(), 1203), Status::Code::kInvalidArgument,
                "field_invalid");
}

TEST_F(StoreTest, NoSecretReachesTheAuditLog) {
  Machine m = Enroll("node-1", "a");
  Session s = MakeSession(m, "session-xyz");
  ASSERT_TRUE(store_->CreateSession(s).ok());
  ASSERT_TRUE(store_->ConsumeSession(s.id, 1001).ok());
  Token t = MakeToken(m, "secret");
  t.session_id = s.id;
  AttestationRecord r = Record(m, 1002);
  r.session_id = s.id;
  ASSERT_TRUE(store_->RecordAttestationSuccess(r, t, std::nullopt).ok());
  ASSERT_TRUE(store_->Reset("node-1", Op(), 1003).ok());
  auto hex = [](const Bytes& b) {
    std::string out;
    char buf[3];
    for (uint8_t c : b) {
      snprintf(buf, sizeof buf, "%02x", c);
      out += buf;
    }
    return out;
  };
  for (const auto& a : Audit()) {
    const std::string row = a.actor + a.action + a.why + a.detail_json;
    for (const std::string& secret : {hex(t.hash), hex(s.nonce), hex(s.secret_hash), s.id,
                                      std::string(t.hash.begin(), t.hash.end())}) {
      EXPECT_EQ(row.find(secret), std::string::npos) << a.action << ": " << a.detail_json;
    }
  }
}

}  // namespace
}  // namespace rackgate::storage
