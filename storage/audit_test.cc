// Tests for the audit log: filters, paging, one row per change, no secrets.
#include <gtest/gtest.h>

#include <optional>
#include <string>
#include <vector>

#include "storage/audit.h"
#include "storage/audit_detail.h"
#include "storage/schema.h"
#include "storage/sqlite.h"
#include "storage/store.h"
#include "storage/testing/store_test_fixture.h"

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
  step(store_->Reset("node-1", Op(), 600, false));
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

// Issue 44: a cluster CA rotation's stage is one row naming no machine, on
// the chain like every other.
TEST_F(StoreTest, AuditApplianceEventNamesNoMachine) {
  Enroll("node-1", "a");
  const size_t before = Audit().size();
  ASSERT_TRUE(store_->AuditApplianceEvent("ca_rotation_prepared", R"({"kind":"cluster"})", Op(), 1300).ok());
  auto rows = Audit();
  ASSERT_EQ(rows.size(), before + 1);
  EXPECT_EQ(rows.back().action, "ca_rotation_prepared");
  EXPECT_FALSE(rows.back().machine_id.has_value());
  EXPECT_EQ(rows.back().hostname, "");
  EXPECT_NE(rows.back().detail_json.find("cluster"), std::string::npos);
  auto chain = store_->VerifyAuditChain();
  ASSERT_TRUE(chain.ok());
  EXPECT_TRUE(chain->intact);
  ExpectFailure(store_->AuditApplianceEvent("", "{}", Op(), 1301), Status::Code::kInvalidArgument, "field_invalid");
  ExpectFailure(store_->AuditApplianceEvent("x", "[]", Op(), 1301), Status::Code::kInvalidArgument, "field_invalid");
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
  ASSERT_TRUE(store_->Reset("node-1", Op(), 1003, false).ok());
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

// --- The hash chain (docs/audit.md) --------------------------------------------

class AuditChainTest : public StoreTest {
 protected:
  // A connection to the file as an attacker with the file has it.
  std::unique_ptr<Connection> Raw() {
    auto c = SqliteConnection::Open(path_, 5000, false);
    EXPECT_TRUE(c.ok()) << c.status().ToString();
    return std::move(c).value();
  }
  AuditChainReport Verify() {
    auto r = store_->VerifyAuditChain();
    EXPECT_TRUE(r.ok()) << r.status().ToString();
    return r.ok() ? *r : AuditChainReport{};
  }
  // Many actions of every kind: enroll, approve, attest, revoke, reset,
  // rename, delete, pool changes.
  void ManyActions() {
    for (int i = 0; i < 12; ++i) {
      Enroll("node-" + std::to_string(i), std::to_string(i), i % 3 == 0 ? MachineState::kPending : MachineState::kEnrolled);
    }
    ASSERT_TRUE(store_->Approve("node-0", Op(), 200).ok());
    Attested("node-x", "x");
    ASSERT_TRUE(store_->Revoke("node-1", Op("bad disk"), 300).ok());
    ASSERT_TRUE(store_->Reset("node-x", Op(), 310, false).ok());
    ASSERT_TRUE(store_->RenameMachine("node-2", "node-2b", Op("typo"), 320).ok());
    ASSERT_TRUE(store_->DeleteMachine("node-1", Op("gone"), 330).ok());
    ASSERT_TRUE(store_->PutPool(Pool{"infra"}, Op(), 340).ok());
  }
};

TEST_F(AuditChainTest, IntactAfterManyActionsAndEachRowChainsToThePrevious) {
  ManyActions();
  const auto rows = Audit();
  ASSERT_GT(rows.size(), 15u);
  std::string prev = kAuditGenesis;
  for (size_t i = 0; i < rows.size(); ++i) {
    EXPECT_EQ(rows[i].id, static_cast<int64_t>(i) + 1);
    EXPECT_EQ(rows[i].prev_hash, prev) << "row " << rows[i].id;
    EXPECT_EQ(rows[i].hash.size(), 64u);
    EXPECT_EQ(AuditRowHash(rows[i]), rows[i].hash);
    prev = rows[i].hash;
  }
  const auto r = Verify();
  EXPECT_TRUE(r.intact) << r.message;
  EXPECT_EQ(r.rows, static_cast<int64_t>(rows.size()));
  EXPECT_EQ(r.head_id, rows.back().id);
  EXPECT_EQ(r.head_hash, rows.back().hash);
  if (testing::TestingPostgres()) return;  // the offline check reads an SQLite file
  auto offline = VerifyAuditChainFile(path_);
  ASSERT_TRUE(offline.ok()) << offline.status().ToString();
  EXPECT_TRUE(offline->intact);
  EXPECT_EQ(offline->head_hash, r.head_hash);
}

// The encoding is docs/audit.md's; this vector was computed from the doc by
// an independent implementation (Python's hashlib), so a change to the
// format fails here.
TEST(AuditChainFormat, MatchesTheDocumentedEncoding) {
  AuditEntry e;
  e.prev_hash = kAuditGenesis;
  e.id = 1;
  e.at = 100;
  e.actor = "uid:0(root)";
  e.action = "enroll";
  e.machine_id = 7;
  e.hostname = "node-1";
  e.to_state = "enrolled";
  e.why = "test";
  e.detail_json = "{\"ek_hash\":\"aa\"}";
  EXPECT_EQ(AuditRowHash(e), "dac92b36b0155cf87ecd4a21c4ddbbb5b87188b1de92c51e38789a0a05b3db2a");
  // Unambiguous: moving a byte across a field boundary, or NULL against
  // empty, changes the hash.
  AuditEntry shifted = e;
  shifted.actor = "uid:0(root)e";
  shifted.action = "nroll";
  EXPECT_NE(AuditRowHash(shifted), AuditRowHash(e));
  AuditEntry empty_from = e;
  empty_from.from_state = "";
  EXPECT_NE(AuditRowHash(empty_from), AuditRowHash(e));
  AuditEntry no_machine = e;
  no_machine.machine_id.reset();
  EXPECT_NE(AuditRowHash(no_machine), AuditRowHash(e));
  AuditEntry rehashed = e;
  rehashed.hash = "ignored";
  EXPECT_EQ(AuditRowHash(rehashed), AuditRowHash(e));
}

TEST_F(AuditChainTest, ARowEditedWithTheTriggerDroppedIsFound) {
  RACKGATE_SQLITE_ONLY("edits the file through sqlite3, triggers dropped");
  ManyActions();
  const size_t total = AuditCount();
  {
    auto c = Raw();
    c->Exec("DROP TRIGGER audit_no_update");
    c->Exec("UPDATE audit SET why = 'nothing to see' WHERE id = 5");
  }
  const auto r = Verify();
  EXPECT_FALSE(r.intact);
  EXPECT_EQ(r.bad_row_id, 5);
  EXPECT_EQ(r.problem, "hash_mismatch");
  EXPECT_EQ(r.rows, 4);
  EXPECT_NE(r.message.find("row 5 was edited"), std::string::npos) << r.message;
  auto offline = VerifyAuditChainFile(path_);
  ASSERT_TRUE(offline.ok()) << offline.status().ToString();
  EXPECT_FALSE(offline->intact);
  EXPECT_EQ(offline->bad_row_id, 5);
  EXPECT_EQ(AuditCount(), total);
}

TEST_F(AuditChainTest, AnEditedRowWhoseHashWasRecomputedBreaksTheNextRow) {
  RACKGATE_SQLITE_ONLY("edits the file through sqlite3, triggers dropped");
  ManyActions();
  {
    auto c = Raw();
    c->Exec("DROP TRIGGER audit_no_update");
    auto rows = Audit();
    AuditEntry e = rows[6];  // id 7
    e.why = "rewritten";
    Stmt s = c->Prepare("UPDATE audit SET why = ?2, hash = ?3 WHERE id = ?1");
    s.BindInt(1, e.id).BindText(2, e.why).BindText(3, AuditRowHash(e)).Run();
  }
  const auto r = Verify();
  EXPECT_FALSE(r.intact);
  EXPECT_EQ(r.bad_row_id, 8);
  EXPECT_EQ(r.problem, "prev_mismatch");
  EXPECT_NE(r.message.find("does not chain to row 7"), std::string::npos) << r.message;
}

TEST_F(AuditChainTest, ADeletedMiddleRowIsFound) {
  RACKGATE_SQLITE_ONLY("edits the file through sqlite3, triggers dropped");
  ManyActions();
  {
    auto c = Raw();
    c->Exec("DROP TRIGGER audit_no_delete");
    c->Exec("DELETE FROM audit WHERE id = 9");
  }
  const auto r = Verify();
  EXPECT_FALSE(r.intact);
  EXPECT_EQ(r.bad_row_id, 10);
  EXPECT_EQ(r.problem, "row_missing");
  EXPECT_NE(r.message.find("rows 9..9 were deleted"), std::string::npos) << r.message;
}

TEST_F(AuditChainTest, ADeletedFirstRowAndAHandWrittenRowAreFound) {
  RACKGATE_SQLITE_ONLY("edits the file through sqlite3, triggers dropped");
  ManyActions();
  {
    auto c = Raw();
    c->Exec("DROP TRIGGER audit_no_delete");
    c->Exec("DELETE FROM audit WHERE id = 1");
  }
  auto r = Verify();
  EXPECT_FALSE(r.intact);
  EXPECT_EQ(r.bad_row_id, 2);
  EXPECT_EQ(r.problem, "row_missing");

  TempDir other;
  auto store = MustOpen(other.File("s.db"));
  ASSERT_NE(store, nullptr);
  ASSERT_TRUE(store->PutPool(Pool{"workers"}, Op(), 10).ok());
  {
    auto c = SqliteConnection::Open(other.File("s.db"), 5000, false);
    ASSERT_TRUE(c.ok());
    (*c)->Exec("INSERT INTO audit (at, actor, action) VALUES (20, 'mallory', 'approve')");
  }
  auto hand = store->VerifyAuditChain();
  ASSERT_TRUE(hand.ok());
  EXPECT_FALSE(hand->intact);
  EXPECT_EQ(hand->bad_row_id, 2);
  EXPECT_EQ(hand->problem, "unchained");
}

// Cutting the newest rows leaves a shorter chain that verifies: only a head
// kept outside the appliance shows it (docs/audit.md, "What it does not
// catch"). The log goes on from the new head.
TEST_F(AuditChainTest, TruncatedNewestRowsNeedAnOutsideAnchor) {
  RACKGATE_SQLITE_ONLY("edits the file through sqlite3, triggers dropped");
  ManyActions();
  const auto before = Verify();
  {
    auto c = Raw();
    c->Exec("DROP TRIGGER audit_no_delete");
    c->Exec(("DELETE FROM audit WHERE id > " + std::to_string(before.head_id - 3)).c_str());
  }
  const auto after = Verify();
  EXPECT_TRUE(after.intact);
  EXPECT_EQ(after.rows, before.rows - 3);
  EXPECT_NE(after.head_hash, before.head_hash);
  Enroll("node-late", "late");
  EXPECT_TRUE(Verify().intact);
  // The head kept outside shows it: first as a missing row, and once new
  // rows took its id, as a different hash.
  const AuditAnchor anchor{before.head_id, before.head_hash};
  auto cut = store_->VerifyAuditChain(anchor);
  ASSERT_TRUE(cut.ok());
  EXPECT_FALSE(cut->intact);
  EXPECT_EQ(cut->problem, "anchor_missing");
  EXPECT_EQ(cut->bad_row_id, before.head_id);
  EXPECT_NE(cut->message.find("the newest rows were cut off"), std::string::npos) << cut->message;
  Enroll("node-late-2", "late-2");
  Enroll("node-late-3", "late-3");
  auto taken = store_->VerifyAuditChain(anchor);
  ASSERT_TRUE(taken.ok());
  EXPECT_FALSE(taken->intact);
  EXPECT_EQ(taken->problem, "anchor_mismatch");
  EXPECT_EQ(taken->bad_row_id, before.head_id);
}

// A forger who edits a row and re-hashes every row after it leaves a chain
// that verifies; an anchor kept from before the edit does not.
TEST_F(AuditChainTest, AFullyRehashedChainIsCaughtByAnAnchor) {
  RACKGATE_SQLITE_ONLY("edits the file through sqlite3, triggers dropped");
  ManyActions();
  const auto anchor_row = Audit()[9];
  const AuditAnchor anchor{anchor_row.id, anchor_row.hash};
  EXPECT_TRUE(store_->VerifyAuditChain(anchor)->intact);
  {
    auto c = Raw();
    c->Exec("DROP TRIGGER audit_no_update");
    auto rows = Audit();
    rows[2].why = "forged";
    std::string prev = rows[1].hash;
    for (size_t i = 2; i < rows.size(); ++i) {
      rows[i].prev_hash = prev;
      rows[i].hash = AuditRowHash(rows[i]);
      prev = rows[i].hash;
      Stmt u = c->Prepare("UPDATE audit SET why = ?2, prev_hash = ?3, hash = ?4 WHERE id = ?1");
      u.BindInt(1, rows[i].id).BindText(2, rows[i].why).BindText(3, rows[i].prev_hash).BindText(4, rows[i].hash).Run();
    }
  }
  EXPECT_TRUE(Verify().intact);
  auto r = store_->VerifyAuditChain(anchor);
  ASSERT_TRUE(r.ok());
  EXPECT_FALSE(r->intact);
  EXPECT_EQ(r->problem, "anchor_mismatch");
  EXPECT_EQ(r->bad_row_id, anchor.id);
  auto offline = VerifyAuditChainFile(path_, anchor);
  ASSERT_TRUE(offline.ok());
  EXPECT_EQ(offline->problem, "anchor_mismatch");
}

TEST_F(AuditChainTest, AnEmptyLogVerifiesToTheGenesis) {
  TempDir other;
  auto store = MustOpen(other.File("empty.db"));
  ASSERT_NE(store, nullptr);
  auto r = store->VerifyAuditChain();
  ASSERT_TRUE(r.ok());
  EXPECT_TRUE(r->intact);
  EXPECT_EQ(r->rows, 0);
  EXPECT_EQ(r->head_hash, kAuditGenesis);
}

TEST(AuditChainFile, RefusesWhatItCannotJudge) {
  RACKGATE_SQLITE_ONLY("SQLite files and their triggers; PostgreSQL's are schema_postgres's");
  TempDir dir;
  ExpectFailure(VerifyAuditChainFile(dir.File("absent.db")).status(), Status::Code::kIoError, "db_error");
  {
    auto c = SqliteConnection::Open(dir.File("other.db"), 5000, false);
    ASSERT_FALSE(c.ok());  // Connection::Open never creates
  }
  const std::string other = dir.File("other.db");
  {
    sqlite3* raw = nullptr;
    ASSERT_EQ(sqlite3_open(other.c_str(), &raw), SQLITE_OK);
    DbPtr db(raw);
    ASSERT_EQ(sqlite3_exec(raw, "CREATE TABLE t (x)", nullptr, nullptr, nullptr), SQLITE_OK);
  }
  ExpectFailure(VerifyAuditChainFile(other).status(), Status::Code::kUnsupported, "db_not_rackgate");

  // A database from before the chain: the offline form does not migrate it.
  int chain_version = 0;
  for (const Migration& m : Migrations()) {
    if (std::string(m.description).find("audit hash chain") != std::string::npos) chain_version = m.version;
  }
  ASSERT_GT(chain_version, 1);
  const std::string old = dir.File("old.db");
  {
    sqlite3* raw = nullptr;
    ASSERT_EQ(sqlite3_open(old.c_str(), &raw), SQLITE_OK);
    sqlite3_close(raw);
    auto c = SqliteConnection::Open(old, 5000, false);
    ASSERT_TRUE(c.ok());
    ASSERT_TRUE(Migrate(c->get(), chain_version - 1).ok());
  }
  ExpectFailure(VerifyAuditChainFile(old).status(), Status::Code::kUnsupported, "db_schema_old");
}

// Rows written before the chain are chained by its migration, in id order,
// and new rows go on from them.
TEST(AuditChainMigration, ExistingRowsAreChained) {
  RACKGATE_SQLITE_ONLY("SQLite files and their triggers; PostgreSQL's are schema_postgres's");
  int chain_version = 0;
  for (const Migration& m : Migrations()) {
    if (std::string(m.description).find("audit hash chain") != std::string::npos) chain_version = m.version;
  }
  ASSERT_GT(chain_version, 1);
  TempDir dir;
  const std::string path = dir.File("old.db");
  {
    sqlite3* raw = nullptr;
    ASSERT_EQ(sqlite3_open(path.c_str(), &raw), SQLITE_OK);
    sqlite3_close(raw);
    auto c = SqliteConnection::Open(path, 5000, false);
    ASSERT_TRUE(c.ok());
    ASSERT_TRUE(Migrate(c->get(), chain_version - 1).ok());
    (*c)->Exec(R"sql(
INSERT INTO audit (at, actor, action, hostname, why, detail_json) VALUES (1, 'op', 'pool_put', '', '', '{"pool":"w"}');
INSERT INTO audit (at, actor, action, machine_id, hostname, from_state, to_state)
  VALUES (2, 'op', 'enroll', 3, 'node-1', NULL, 'enrolled');
INSERT INTO audit (at, actor, action, machine_id, hostname, from_state, to_state, why)
  VALUES (3, 'op', 'revoke', 3, 'node-1', 'enrolled', 'revoked', 'lost');
)sql");
  }
  auto store = MustOpen(path);
  ASSERT_NE(store, nullptr);
  auto r = store->VerifyAuditChain();
  ASSERT_TRUE(r.ok());
  EXPECT_TRUE(r->intact) << r->message;
  EXPECT_EQ(r->rows, 3);
  auto rows = store->ListAudit();
  ASSERT_TRUE(rows.ok());
  ASSERT_EQ(rows->size(), 3u);
  EXPECT_EQ((*rows)[0].prev_hash, kAuditGenesis);
  EXPECT_EQ((*rows)[2].why, "lost");
  ASSERT_TRUE(store->PutPool(Pool{"infra"}, Op(), 10).ok());
  r = store->VerifyAuditChain();
  ASSERT_TRUE(r.ok());
  EXPECT_TRUE(r->intact) << r->message;
  EXPECT_EQ(r->rows, 4);
  // The append-only triggers are back after the migration.
  auto c = SqliteConnection::Open(path, 5000, false);
  ASSERT_TRUE(c.ok());
  EXPECT_THROW((*c)->Exec("UPDATE audit SET why = 'x' WHERE id = 1"), StoreError);
  EXPECT_THROW((*c)->Exec("DELETE FROM audit WHERE id = 1"), StoreError);
}

// AuditDetail writes what nlohmann::json's object always wrote: keys in byte
// order, a key set again replaced, invalid UTF-8 replaced.
TEST(AuditDetailTest, KeysInByteOrderWhateverTheOrderOfTheCalls) {
  AuditDetail d;
  d.Text("b", "x").Int("a", -1).Bool("c", false).Null("d").Texts("e", {"p", "q"});
  d.Object("f", AuditDetail().Int("z", 2).Bool("y", true));
  EXPECT_EQ(d.Json(), R"({"a":-1,"b":"x","c":false,"d":null,"e":["p","q"],"f":{"y":true,"z":2}})");
  d.Text("a", "again");
  EXPECT_EQ(d.Json(), R"({"a":"again","b":"x","c":false,"d":null,"e":["p","q"],"f":{"y":true,"z":2}})");
  ASSERT_NE(d.FindText("a"), nullptr);
  EXPECT_EQ(*d.FindText("a"), "again");
  EXPECT_EQ(d.FindText("c"), nullptr);
  EXPECT_EQ(AuditDetail().Json(), "{}");
  EXPECT_EQ(AuditDetail().Text("t", "a\xff" "b\"\n").Json(), "{\"t\":\"a\xef\xbf\xbd" "b\\\"\\n\"}");
}

// The detail of every audit row storage builds, pinned byte for byte: the
// hash chain covers detail_json, so a builder that writes its keys in
// another order or another form breaks every verifier (docs/audit.md).
TEST_F(StoreTest, AuditDetailsAreWrittenByteForByte) {
  auto last = [&] { return Audit().back().detail_json; };
  Pool p{"infra", "{\"vouch_client\":false}", "{\"pcrs\":{}}"};
  ASSERT_TRUE(store_->PutPool(p, Op(), 50, B("tok-1"), {{"public", std::string("{}"), "d1"}}).ok());
  EXPECT_EQ(last(), R"({"created":true,"pool":"infra","templates":{"public":{"sha256":"d1"}},"token_created":true,)"
                    R"("token_required":true})");
  p.boot_policy_json.reset();
  p.token_required = false;
  ASSERT_TRUE(store_->PutPool(p, Op(), 60, std::nullopt, {{"public", std::nullopt, ""}}).ok());
  EXPECT_EQ(last(), R"({"boot_policy_changed":true,"created":false,"pool":"infra","settings_changed":false,)"
                    R"("templates":{"public":{"removed":true}},"token_created":false,"token_required":false})");
  ASSERT_TRUE(store_->SetPoolTemplate("infra", kTemplateAttested, std::string("{\"a\":1}"), "beef", Op(), 70).ok());
  EXPECT_EQ(last(), R"({"pool":"infra","removed":false,"sha256":"beef","template":"attested"})");
  ASSERT_TRUE(store_->SetPoolTemplate("infra", kTemplateAttested, std::nullopt, "", Op(), 71).ok());
  EXPECT_EQ(last(), R"({"pool":"infra","removed":true,"template":"attested"})");
  ASSERT_TRUE(store_->RotatePoolToken("infra", B("tok-2"), 500, Op(), 80).ok());
  EXPECT_EQ(last(), R"({"pool":"infra","previous_valid_until":500})");
  ASSERT_TRUE(store_->RotatePoolToken("infra", B("tok-3"), 0, Op(), 90).ok());
  EXPECT_EQ(last(), R"({"pool":"infra","previous_valid_until":null})");

  Enrollment e = MakeEnrollment("node-1", "a");
  e.ek_certificate = B("der");
  e.ek_relaxations = {"aia_missing", "eku_missing"};
  ASSERT_TRUE(store_->Enroll(e, Op(), false, 100).ok());
  EXPECT_EQ(last(), R"({"addresses":2,"ek_certificate":true,"ek_hash":"656b686173683a61",)"
                    R"("ek_relaxed":["aia_missing","eku_missing"],"pool":"workers"})");
  e.vars_json = "{\"v\":1}";
  ASSERT_TRUE(store_->Enroll(e, Op(), false, 110).ok());
  EXPECT_EQ(last(), R"({"changed":["vars"]})");
  Enrollment f = MakeEnrollment("node-1", "b");
  ASSERT_TRUE(store_->Enroll(f, Op(), true, 120).ok());
  EXPECT_EQ(last(), R"({"kubernetes_csrs_denied":0,"new_ek_hash":"656b686173683a62",)"
                    R"("old_ek_hash":"656b686173683a61","pool":"workers","sessions_dropped":0,"tokens_dropped":0})");

  Machine m = Attested("node-2", "c");
  CsrApprovalRequest r;
  r.machine_id = m.id;
  r.kind = "client";
  r.public_key_sha256 = B("spki");
  r.csr_pem = "-----BEGIN CERTIFICATE REQUEST-----\nx\n-----END CERTIFICATE REQUEST-----\n";
  r.usages = {"client auth"};
  auto queued = store_->QueueCsrRequest(r, CsrQueueLimits{}, Op(), 2000);
  ASSERT_TRUE(queued.ok()) << queued.status().ToString();
  const std::string id = std::to_string(queued->id);
  EXPECT_EQ(last(), R"({"id":)" + id + R"(,"kind":"client","public_key_sha256":"73706b69","tpm_resident":false})");
  ASSERT_TRUE(store_->DecideCsrRequest(queued->id, false, "not \"ours\"", Op(), 2100).ok());
  EXPECT_EQ(last(), R"({"id":)" + id +
                        R"(,"kind":"client","public_key_sha256":"73706b69","reason":"not \"ours\"","tpm_resident":false})");
}

}  // namespace
}  // namespace rackgate::storage
