// Tests for the migrations: fresh databases, every older version upgraded
// with its data intact, newer and foreign files refused, the append-only audit.
#include "storage/schema.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <string>

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

std::unique_ptr<Connection> RawOpen(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
  EXPECT_GE(fd, 0);
  ::close(fd);
  auto c = SqliteConnection::Open(path, 1000, false);
  EXPECT_TRUE(c.ok()) << c.status().ToString();
  return std::move(c).value();
}

int64_t QueryInt(Connection* c, const std::string& sql) {
  Stmt s = c->Prepare(sql);
  EXPECT_TRUE(s.Step()) << sql;
  return s.Int(0);
}

std::string QueryText(Connection* c, const std::string& sql) {
  Stmt s = c->Prepare(sql);
  EXPECT_TRUE(s.Step()) << sql;
  return s.Text(0);
}

// Rows written with the columns each version introduced; a database at
// version v gets every seed up to v. A new migration that adds columns adds
// a seed here that fills them.
struct Seed {
  int version;
  const char* sql;
};
constexpr Seed kSeeds[] = {
    {1, R"sql(
INSERT INTO pools (name, settings_json, boot_policy_json, created_at, updated_at)
  VALUES ('workers', '{"vouch":true}', '{"rules":[]}', 100, 100);
INSERT INTO machines (id, hostname, pool, state, ek_public, ek_hash, ek_certificate, tpm_manufacturer, tpm_model,
                      tpm_version, policy_json, tofu_pcrs_json, created_at, updated_at, last_attested_at)
  VALUES (7, 'node-1', 'workers', 'attested', X'0102', X'aabb', X'3082', 'id:49465800', 'SLB9670', '7.85',
          NULL, '{"sha256":{}}', 100, 110, 110);
INSERT INTO addresses (machine_id, kind, value) VALUES (7, 'InternalIP', '10.0.0.7'), (7, 'Hostname', 'node-1');
INSERT INTO sessions (id, machine_id, nonce, secret_hash, ak_public, ak_name, pcr_selection, created_at, expires_at)
  VALUES ('sess-1', 7, X'01', X'02', X'03', X'04', 'sha256:0,7', 100, 1000);
INSERT INTO tokens (hash, machine_id, session_id, issued_at, expires_at) VALUES (X'cafe', 7, 'sess-0', 100, 1000);
INSERT INTO attestations (machine_id, attest_epoch, session_id, at, verdict, reasons_json, pcrs_json, reset_count,
                          restart_count, clock, firmware_version)
  VALUES (7, 0, 'sess-0', 110, 'ok', '[]', '{}', 3, 4, 5000, -1);
INSERT INTO audit (at, actor, action, machine_id, hostname, from_state, to_state, why)
  VALUES (110, 'attestation', 'attest', 7, 'node-1', 'enrolled', 'attested', '');
)sql"},
    // Trust: what the trust migration computes for the machine above.
    {7, R"sql(
UPDATE machines SET trust = 'trusted', trust_reason = '', trust_changed_at = 110 WHERE id = 7;
)sql"},
};

TEST(Migrations, VersionsAreContiguousFromOne) {
  RACKGATE_SQLITE_ONLY("the SQLite schema and file; schema_postgres is PostgreSQL's");
  auto ms = Migrations();
  ASSERT_FALSE(ms.empty());
  for (size_t i = 0; i < ms.size(); ++i) {
    EXPECT_EQ(ms[i].version, static_cast<int>(i) + 1);
    EXPECT_NE(ms[i].sql, nullptr);
  }
  EXPECT_EQ(LatestSchemaVersion(), static_cast<int>(ms.size()));
  EXPECT_EQ(Store::CurrentSchemaVersion(), LatestSchemaVersion());
}

TEST(Migrations, FreshDatabaseIsAtCurrentVersionInWalMode) {
  RACKGATE_SQLITE_ONLY("the SQLite schema and file; schema_postgres is PostgreSQL's");
  TempDir dir;
  const std::string path = dir.File("rackgate.db");
  {
    auto store = MustOpen(path);
    ASSERT_NE(store, nullptr);
  }
  struct stat st {};
  ASSERT_EQ(::stat(path.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  auto c = RawOpen(path);
  EXPECT_EQ(QueryInt(c.get(), "PRAGMA user_version"), LatestSchemaVersion());
  EXPECT_EQ(QueryInt(c.get(), "PRAGMA application_id"), kApplicationId);
  EXPECT_EQ(QueryText(c.get(), "PRAGMA journal_mode"), "wal");
  EXPECT_EQ(QueryText(c.get(), "PRAGMA integrity_check"), "ok");
  EXPECT_EQ(QueryInt(c.get(), "PRAGMA foreign_keys"), 1);
  EXPECT_EQ(QueryInt(c.get(), "PRAGMA synchronous"), 2);  // FULL
}

TEST(Migrations, ReopeningChangesNothing) {
  RACKGATE_SQLITE_ONLY("the SQLite schema and file; schema_postgres is PostgreSQL's");
  TempDir dir;
  const std::string path = dir.File("rackgate.db");
  for (int i = 0; i < 3; ++i) {
    auto store = MustOpen(path);
    ASSERT_NE(store, nullptr);
  }
  auto c = RawOpen(path);
  EXPECT_EQ(QueryInt(c.get(), "PRAGMA user_version"), LatestSchemaVersion());
}

TEST(Migrations, EachStepIsConsistent) {
  RACKGATE_SQLITE_ONLY("the SQLite schema and file; schema_postgres is PostgreSQL's");
  TempDir dir;
  auto c = RawOpen(dir.File("steps.db"));
  for (const Migration& m : Migrations()) {
    ASSERT_TRUE(Migrate(c.get(), m.version).ok()) << m.version;
    EXPECT_EQ(QueryInt(c.get(), "PRAGMA user_version"), m.version);
    EXPECT_EQ(QueryText(c.get(), "PRAGMA integrity_check"), "ok");
  }
}

// renew: certificates signed before the renewal migration get the machine's
// epoch when they came after its last reset or EK replacement (renewable),
// else -1 (never renewed); the certify nonce starts unused.
TEST(Migrations, RenewalMigrationDatesOldCertificatesByTheLastReset) {
  RACKGATE_SQLITE_ONLY("the SQLite schema and file; schema_postgres is PostgreSQL's");
  int renew = 0;
  for (const Migration& m : Migrations()) {
    if (std::string(m.description).rfind("renewal:", 0) == 0) renew = m.version;
  }
  ASSERT_GT(renew, 1);
  TempDir dir;
  auto c = RawOpen(dir.File("renew.db"));
  ASSERT_TRUE(Migrate(c.get(), renew - 1).ok());
  c->Exec(R"sql(
INSERT INTO pools (name, created_at, updated_at) VALUES ('workers', 100, 100);
INSERT INTO machines (id, hostname, pool, state, ek_public, ek_hash, attest_epoch, created_at, updated_at)
  VALUES (7, 'node-1', 'workers', 'joined', X'0102', X'aabb', 2, 100, 100),
         (8, 'node-2', 'workers', 'joined', X'0103', X'aacc', 0, 100, 100);
INSERT INTO audit (at, actor, action, machine_id, hostname) VALUES (500, 'op', 'reset', 7, 'node-1');
INSERT INTO tokens (hash, machine_id, session_id, issued_at, expires_at) VALUES (X'cafe', 7, 's', 100, 1000);
INSERT INTO certificates (serial, machine_id, hostname, kind, subject, public_key_sha256, not_before, not_after,
                          issued_at)
  VALUES ('before-reset', 7, 'node-1', 'client', 'CN=a', X'01', 0, 9, 400),
         ('after-reset', 7, 'node-1', 'client', 'CN=a', X'02', 0, 9, 600),
         ('never-reset', 8, 'node-2', 'client', 'CN=b', X'03', 0, 9, 300),
         ('machine-gone', 99, 'node-9', 'client', 'CN=c', X'04', 0, 9, 300);
)sql");
  ASSERT_TRUE(Migrate(c.get(), renew).ok());
  auto epoch = [&](const std::string& serial) {
    return QueryInt(c.get(), "SELECT attest_epoch FROM certificates WHERE serial = '" + serial + "'");
  };
  EXPECT_EQ(epoch("before-reset"), -1);
  EXPECT_EQ(epoch("after-reset"), 2);
  EXPECT_EQ(epoch("never-reset"), 0);
  EXPECT_EQ(epoch("machine-gone"), -1);
  EXPECT_EQ(QueryInt(c.get(), "SELECT count(*) FROM certificates WHERE replaced_by IS NOT NULL"), 0);
  EXPECT_EQ(QueryInt(c.get(), "SELECT count(*) FROM tokens WHERE certify_nonce_used_at IS NULL"), 1);
}

TEST(Migrations, EveryOlderVersionUpgradesWithDataIntact) {
  RACKGATE_SQLITE_ONLY("the SQLite schema and file; schema_postgres is PostgreSQL's");
  for (int v = 1; v < LatestSchemaVersion(); ++v) {
    SCOPED_TRACE("from version " + std::to_string(v));
    TempDir dir;
    const std::string path = dir.File("old.db");
    {
      auto c = RawOpen(path);
      ASSERT_TRUE(Migrate(c.get(), v).ok());
      ASSERT_EQ(QueryInt(c.get(), "PRAGMA user_version"), v);
      for (const Seed& seed : kSeeds) {
        if (seed.version <= v) c->Exec(seed.sql);
      }
    }
    auto store = MustOpen(path);
    ASSERT_NE(store, nullptr);

    auto m = store->GetMachine("node-1");
    ASSERT_TRUE(m.ok()) << m.status().ToString();
    EXPECT_EQ(m->id, 7);
    EXPECT_EQ(m->pool, "workers");
    EXPECT_EQ(m->state, MachineState::kAttested);
    EXPECT_EQ(m->ek_public, (Bytes{1, 2}));
    EXPECT_EQ(m->ek_hash, (Bytes{0xaa, 0xbb}));
    EXPECT_EQ(m->ek_certificate, (Bytes{0x30, 0x82}));
    EXPECT_EQ(m->tpm_manufacturer, "id:49465800");
    EXPECT_EQ(m->tpm_model, "SLB9670");
    EXPECT_EQ(m->tpm_version, "7.85");
    EXPECT_EQ(m->tofu_pcrs_json, "{\"sha256\":{}}");
    EXPECT_EQ(m->last_attested_at, 110);
    EXPECT_FALSE(m->client_cert_issued_at.has_value());
    ASSERT_EQ(m->addresses.size(), 2u);
    EXPECT_EQ(m->addresses[0], (Address{"Hostname", "node-1"}));
    EXPECT_EQ(m->addresses[1], (Address{"InternalIP", "10.0.0.7"}));

    auto pool = store->GetPool("workers");
    ASSERT_TRUE(pool.ok());
    EXPECT_EQ(pool->settings_json, "{\"vouch\":true}");
    EXPECT_EQ(pool->boot_policy_json, "{\"rules\":[]}");

    auto token = store->LookupToken(Bytes{0xca, 0xfe}, 500);
    ASSERT_TRUE(token.ok()) << token.status().ToString();
    EXPECT_EQ(token->machine.hostname, "node-1");

    auto last = store->LastSuccessfulAttestation(7);
    ASSERT_TRUE(last.ok());
    EXPECT_EQ(last->reset_count, 3u);
    EXPECT_EQ(last->restart_count, 4u);
    EXPECT_EQ(last->clock, 5000u);
    EXPECT_EQ(last->firmware_version, UINT64_MAX);

    auto audit = store->ListAudit();
    ASSERT_TRUE(audit.ok());
    ASSERT_EQ(audit->size(), 1u);
    EXPECT_EQ((*audit)[0].action, "attest");

    auto session = store->ConsumeSession("sess-1", 500);
    ASSERT_TRUE(session.ok()) << session.status().ToString();
    EXPECT_EQ(session->pcr_selection, "sha256:0,7");

    // The upgraded database takes new writes, including the newer columns.
    IssuedCertificate cert;
    cert.serial = "0a";
    cert.machine_id = 7;
    cert.kind = "client";
    cert.subject = "O=system:nodes, CN=system:node:node-1";
    cert.public_key_sha256 = Bytes{1, 2, 3};
    auto marked = store->RecordCertificate(cert, Op(), 600);
    ASSERT_TRUE(marked.ok()) << marked.status().ToString();
    EXPECT_EQ(marked->client_cert_issued_at, 600);
    EXPECT_EQ(marked->state, MachineState::kJoined);
    EXPECT_EQ(marked->vars_json, "{}");
    auto pool_after = store->GetPool("workers");
    EXPECT_FALSE(pool_after->token_required);  // pools from before v3 keep serving without a token
    // Trust (docs/trust.md): judged from the newest attestation, which passed.
    EXPECT_EQ(marked->trust, "trusted");
    EXPECT_EQ(marked->trust_reason, "");
    EXPECT_EQ(marked->trust_changed_at, 110);
  }
}

// kV4Trust judges a machine that attested before it from its newest
// attestation row, and leaves a machine that never attested without a verdict.
TEST(Migrations, TrustIsJudgedFromTheNewestAttestation) {
  RACKGATE_SQLITE_ONLY("the SQLite schema and file; schema_postgres is PostgreSQL's");
  int trust_version = 0;
  for (const Migration& m : Migrations()) {
    if (std::string(m.description).find("machine trust") != std::string::npos) trust_version = m.version;
  }
  ASSERT_GT(trust_version, 1);
  TempDir dir;
  const std::string path = dir.File("old.db");
  {
    auto c = RawOpen(path);
    ASSERT_TRUE(Migrate(c.get(), trust_version - 1).ok());
    for (const Seed& seed : kSeeds) {
      if (seed.version < trust_version) c->Exec(seed.sql);
    }
    c->Exec(R"sql(
INSERT INTO machines (id, hostname, pool, state, ek_public, ek_hash, created_at, updated_at, last_attested_at)
  VALUES (8, 'node-2', 'workers', 'attested', X'0103', X'aacc', 100, 110, 110),
         (9, 'node-3', 'workers', 'enrolled', X'0104', X'aadd', 100, 100, NULL);
INSERT INTO attestations (machine_id, attest_epoch, session_id, at, verdict, reason, reasons_json, pcrs_json,
                          reset_count, restart_count, clock, firmware_version)
  VALUES (8, 0, 's1', 110, 'ok', '', '[]', '{}', 1, 0, 1, 0),
         (8, 0, 's2', 120, 'refused', 'boot_policy_violation', '[]', '', 0, 0, 0, 0);
)sql");
  }
  auto store = MustOpen(path);
  ASSERT_NE(store, nullptr);
  auto failed = store->GetMachine("node-2");
  ASSERT_TRUE(failed.ok()) << failed.status().ToString();
  EXPECT_EQ(failed->trust, "untrusted");
  EXPECT_EQ(failed->trust_reason, "attestation_failed:boot_policy_violation");
  EXPECT_EQ(failed->trust_changed_at, 120);
  auto never = store->GetMachine("node-3");
  ASSERT_TRUE(never.ok());
  EXPECT_EQ(never->trust, "");
  EXPECT_FALSE(never->trust_changed_at.has_value());
  EXPECT_EQ(store->CountUntrusted().value(), 1);
}

// kV10AnonymousRefusals and kV12KubeCsrEvents rebuild events and
// event_deliveries to admit new types: every event and delivery survives,
// the foreign keys and the fan-out still work, and an event id is never
// given out twice (the AUTOINCREMENT counter is carried over past a purged
// newest event). `action` is an audit action of the new types: no event
// before the migration, an event of type `action` after it.
void ExpectEventsRebuildKeepsEventsDeliveriesAndIds(const std::string& description, const std::string& action) {
  int version = 0;
  for (const Migration& m : Migrations()) {
    if (std::string(m.description).find(description) != std::string::npos) version = m.version;
  }
  ASSERT_GT(version, 1);
  TempDir dir;
  const std::string path = dir.File("old.db");
  {
    auto c = RawOpen(path);
    ASSERT_TRUE(Migrate(c.get(), version - 1).ok());
    for (const Seed& seed : kSeeds) {
      if (seed.version < version) c->Exec(seed.sql);
    }
    c->Exec(R"sql(
INSERT INTO webhooks (url, types, added_at) VALUES ('https://ops.example/hook', '', 100);
INSERT INTO audit (at, actor, action, machine_id, hostname, from_state, to_state, why)
  VALUES (120, 'rackgated', 'untrusted', 7, 'node-1', 'attested', 'attested', ''),
         (130, 'rackgated', 'trusted', 7, 'node-1', 'attested', 'attested', ''),
         (140, 'rackgated', 'untrusted', 7, 'node-1', 'attested', 'attested', '');
UPDATE event_deliveries SET delivered_at = 125, attempts = 1 WHERE event_id = 1;
DELETE FROM events WHERE id = 3;
)sql");
    c->Exec(("INSERT INTO audit (at, actor, action, machine_id, hostname, from_state, to_state, why) VALUES "
             "(150, 'rackgated', '" + action + "', 7, 'node-1', 'attested', 'attested', '')")
                .c_str());
    ASSERT_EQ(QueryInt(c.get(), "SELECT count(*) FROM events"), 2) << action << " is no event before";
  }
  auto store = MustOpen(path);
  ASSERT_NE(store, nullptr);
  auto events = store->ListEvents();
  ASSERT_TRUE(events.ok()) << events.status().ToString();
  ASSERT_EQ(events->size(), 2u);
  EXPECT_EQ((*events)[1].id, 1);
  EXPECT_EQ((*events)[1].type, "machine_untrusted");
  ASSERT_EQ((*events)[1].deliveries.size(), 1u);
  EXPECT_EQ((*events)[1].deliveries[0].delivered_at, 125);
  EXPECT_EQ((*events)[0].id, 2);
  ASSERT_EQ((*events)[0].deliveries.size(), 1u);
  EXPECT_FALSE((*events)[0].deliveries[0].delivered_at.has_value());

  // The new type, fanned out to the webhook, numbered after the purged 3.
  ASSERT_TRUE(store->AuditMachineEvent(7, action, R"({"count":3})", Op(), 200).ok());
  events = store->ListEvents();
  ASSERT_TRUE(events.ok());
  ASSERT_EQ(events->size(), 3u);
  EXPECT_EQ((*events)[0].type, action);
  EXPECT_EQ((*events)[0].id, 4);
  EXPECT_EQ((*events)[0].deliveries.size(), 1u);

  // Deleting an event still takes its deliveries (the rebuilt foreign key).
  auto c = RawOpen(path);
  c->Exec("PRAGMA foreign_keys = ON; DELETE FROM events WHERE id = 1");
  EXPECT_EQ(QueryInt(c.get(), "SELECT count(*) FROM event_deliveries WHERE event_id = 1"), 0);
  EXPECT_EQ(QueryInt(c.get(), "SELECT count(*) FROM event_deliveries"), 2);
  Stmt fk = c->Prepare("PRAGMA foreign_key_check");
  EXPECT_FALSE(fk.Step());
  // One of each trigger and index, on the rebuilt tables; no table left over.
  EXPECT_EQ(QueryInt(c.get(), "SELECT count(*) FROM sqlite_schema WHERE type = 'trigger' AND name LIKE 'events_%'"),
            3);
  EXPECT_EQ(QueryInt(c.get(), "SELECT count(*) FROM sqlite_schema WHERE type = 'index' AND name IN ('events_at', "
                              "'event_deliveries_due', 'event_deliveries_webhook')"),
            3);
  EXPECT_EQ(QueryInt(c.get(), "SELECT count(*) FROM sqlite_schema WHERE name GLOB '*_v1[0-9]'"), 0);
}

TEST(Migrations, AnonymousRefusalsKeepEventsDeliveriesAndIds) {
  RACKGATE_SQLITE_ONLY("the SQLite schema and file; schema_postgres is PostgreSQL's");
  ExpectEventsRebuildKeepsEventsDeliveriesAndIds("anonymous refusals", "anonymous_refusals");
}

TEST(Migrations, KubeCsrEventsKeepEventsDeliveriesAndIds) {
  RACKGATE_SQLITE_ONLY("the SQLite schema and file; schema_postgres is PostgreSQL's");
  for (const char* action : {"kubernetes_csr_approved", "kubernetes_csr_denied", "kubernetes_csr_waiting"}) {
    SCOPED_TRACE(action);
    ExpectEventsRebuildKeepsEventsDeliveriesAndIds("decisions as events", action);
  }
}

TEST(Migrations, NewerDatabaseIsRefusedAndLeftAlone) {
  RACKGATE_SQLITE_ONLY("the SQLite schema and file; schema_postgres is PostgreSQL's");
  TempDir dir;
  const std::string path = dir.File("newer.db");
  { ASSERT_NE(MustOpen(path), nullptr); }
  const int newer = LatestSchemaVersion() + 1;
  {
    auto c = RawOpen(path);
    c->Exec(("PRAGMA user_version = " + std::to_string(newer)).c_str());
  }
  auto store = Store::Open(path);
  ASSERT_FALSE(store.ok());
  EXPECT_EQ(store.status().code(), Status::Code::kUnsupported);
  EXPECT_EQ(store.status().reason(), "db_newer_than_code");
  EXPECT_NE(store.status().message().find(std::to_string(newer)), std::string::npos);
  auto c = RawOpen(path);
  EXPECT_EQ(QueryInt(c.get(), "PRAGMA user_version"), newer);
}

TEST(Migrations, ForeignDatabaseIsRefused) {
  RACKGATE_SQLITE_ONLY("the SQLite schema and file; schema_postgres is PostgreSQL's");
  TempDir dir;
  const std::string path = dir.File("other.db");
  {
    auto c = RawOpen(path);
    c->Exec("CREATE TABLE songs (title TEXT)");
  }
  auto store = Store::Open(path);
  ASSERT_FALSE(store.ok());
  EXPECT_EQ(store.status().reason(), "db_not_rackgate");

  const std::string path2 = dir.File("other2.db");
  {
    auto c = RawOpen(path2);
    c->Exec("PRAGMA user_version = 1");
  }
  auto store2 = Store::Open(path2);
  ASSERT_FALSE(store2.ok());
  EXPECT_EQ(store2.status().reason(), "db_not_rackgate");
}

TEST(Migrations, NotADatabaseIsAnIoError) {
  RACKGATE_SQLITE_ONLY("the SQLite schema and file; schema_postgres is PostgreSQL's");
  TempDir dir;
  const std::string path = dir.File("garbage.db");
  {
    const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT, 0600);
    ASSERT_GE(fd, 0);
    const std::string junk(4096, 'x');
    ASSERT_EQ(::write(fd, junk.data(), junk.size()), static_cast<ssize_t>(junk.size()));
    ::close(fd);
  }
  auto store = Store::Open(path);
  ASSERT_FALSE(store.ok());
  EXPECT_EQ(store.status().code(), Status::Code::kIoError);
  EXPECT_EQ(store.status().reason(), "db_error");
}

TEST(Migrations, OpenFailsCleanlyOnMissingDirectory) {
  RACKGATE_SQLITE_ONLY("the SQLite schema and file; schema_postgres is PostgreSQL's");
  auto store = Store::Open("/nonexistent-dir-for-rackgate/x.db");
  ASSERT_FALSE(store.ok());
  EXPECT_EQ(store.status().reason(), "db_error");
  EXPECT_FALSE(Store::Open("").ok());
  EXPECT_FALSE(Store::Open(":memory:").ok());
}

TEST(AuditLog, UpdateAndDeleteAreRefusedByTriggers) {
  RACKGATE_SQLITE_ONLY("the SQLite schema and file; schema_postgres is PostgreSQL's");
  TempDir dir;
  const std::string path = dir.File("audit.db");
  {
    auto store = MustOpen(path);
    ASSERT_NE(store, nullptr);
    ASSERT_TRUE(store->PutPool(Pool{"workers"}, Op(), 1).ok());
    ASSERT_TRUE(store->Enroll(MakeEnrollment("node-1", "a"), Op(), false, 2).ok());
  }
  auto c = RawOpen(path);
  const int64_t before = QueryInt(c.get(), "SELECT count(*) FROM audit");
  ASSERT_EQ(before, 2);
  for (const char* sql : {"UPDATE audit SET why = 'rewritten'", "DELETE FROM audit",
                          "DELETE FROM audit WHERE id = 1", "UPDATE audit SET actor = 'x' WHERE id = 2"}) {
    try {
      c->Exec(sql);
      ADD_FAILURE() << sql << " succeeded";
    } catch (const StoreError& e) {
      EXPECT_NE(e.status().message().find("audit is append-only"), std::string::npos) << e.status().message();
    }
  }
  EXPECT_EQ(QueryInt(c.get(), "SELECT count(*) FROM audit"), before);
  EXPECT_EQ(QueryInt(c.get(), "SELECT count(*) FROM audit WHERE why = 'rewritten' OR actor = 'x'"), 0);
}

}  // namespace
}  // namespace rackgate::storage
