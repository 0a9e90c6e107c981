// CopyDatabase: a populated SQLite store copied through the SQL seam into a
// fresh SQLite file and, when RACKGATE_TEST_POSTGRES is set, into
// PostgreSQL; then opened as a store there.
#include "storage/copy.h"

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "storage/schema.h"
#include "storage/sqlite.h"
#include "storage/store.h"
#include "storage/testing/store_test_fixture.h"

namespace rackgate::storage {
namespace {

using testing::B;
using testing::Op;
using testing::StoreTest;

// The SQLite store at `path`, whatever backend the test environment asks the
// other storage tests to use: the copy's source is always SQLite.
std::unique_ptr<Store> OpenSqlite(const std::string& path) {
  auto s = Store::Open(path);
  if (!s.ok()) {
    ADD_FAILURE() << s.status().ToString();
    return nullptr;
  }
  return std::move(s).value();
}

// Every table the schema has, for the "every table non-empty" check.
std::vector<std::string> AllTables(const std::string& path) {
  auto c = SqliteConnection::Open(path, 1000, true);
  EXPECT_TRUE(c.ok());
  std::vector<std::string> out;
  Stmt s = (*c)->Prepare("SELECT name FROM sqlite_schema WHERE type = 'table' AND name NOT LIKE 'sqlite_%'");
  while (s.Step()) out.push_back(s.Text(0));
  return out;
}

std::optional<std::string> PostgresUrl() {
  const char* url = std::getenv("RACKGATE_TEST_POSTGRES");
  if (url == nullptr || *url == '\0') return std::nullopt;
  return std::string(url);
}

class CopyTest : public StoreTest {
 protected:
  void SetUp() override {
    store_ = OpenSqlite(path_);
    ASSERT_NE(store_, nullptr);
    ASSERT_TRUE(store_->PutPool(Pool{"workers"}, Op(), 10).ok());
    ASSERT_TRUE(store_->PutPool(Pool{"masters"}, Op(), 10).ok());
  }

  // Something in every table: pools, machines with addresses, sessions,
  // tokens, attestations (an ok and a refused one), audit, pool tokens,
  // certificates, a waiting CSR, events with deliveries to a webhook, a
  // provisioning report, an attested kubelet key and a Kubernetes CSR held
  // for an operator.
  void Populate() {
    ASSERT_TRUE(store_->SyncWebhooks({WebhookTarget{"https://hooks.example/a", {}}}, 50).ok());
    ASSERT_TRUE(store_->RotatePoolToken("workers", B("pooltoken-1"), 0, Op(), 60).ok());
    Machine a = Enroll("node-a", "a");
    Machine b = Enroll("node-b", "b");
    Enroll("node-c", "c");
    ASSERT_TRUE(store_->CreateSession(MakeSession(a, "sess-a", 1000, 100000)).ok());
    ASSERT_TRUE(store_->CreateSession(MakeSession(b, "sess-b", 1000, 100000)).ok());
    auto attested = store_->RecordAttestationSuccess(Record(a, 1100), MakeToken(a, "a", 1100, 100000), std::nullopt);
    ASSERT_TRUE(attested.ok()) << attested.status().ToString();
    AttestationRecord refused = Record(b, 1150);
    refused.verdict = "refused";
    refused.reason = "quote_pcr_mismatch";
    ASSERT_TRUE(store_->RecordAttestationFailure(refused).ok());
    IssuedCertificate cert;
    cert.serial = "0a0b0c";
    cert.machine_id = a.id;
    cert.kind = "client";
    cert.subject = "CN=system:node:node-a";
    cert.public_key_sha256 = B("keyhash-a");
    cert.not_before = 1200;
    cert.not_after = 100000;
    cert.issued_at = 1200;
    cert.certificate_pem = "-----BEGIN CERTIFICATE-----\n-----END CERTIFICATE-----\n";
    auto joined = store_->RecordCertificate(cert, Op(), 1200);
    ASSERT_TRUE(joined.ok()) << joined.status().ToString();
    CsrApprovalRequest csr;
    csr.machine_id = a.id;
    csr.kind = "serving";
    csr.public_key_sha256 = B("keyhash-serving");
    csr.csr_pem = "-----BEGIN CERTIFICATE REQUEST-----\n";
    csr.usages = {"server auth"};
    ASSERT_TRUE(store_->QueueCsrRequest(csr, CsrQueueLimits{}, Op(), 1300).ok());
    ProvisioningReportRecord report;
    report.machine_id = a.id;
    report.at = 1400;
    report.outcome = "ok";
    report.step = "kubelet";
    report.done = {"ignition", "kubelet"};
    ASSERT_TRUE(store_->RecordReport(report).ok());
    BootObservation observed;
    observed.machine_id = a.id;
    observed.pool = a.pool;
    observed.at = 1450;
    observed.event_log = B("\x00\x01log");
    observed.pcrs_json = "{\"pcrs\": {}}";
    ASSERT_TRUE(store_->RecordBootObservation(observed).ok());
    AttestedKey key;
    key.machine_id = a.id;
    key.kind = "serving";
    key.public_key_sha256 = Bytes(32, 0xab);
    ASSERT_TRUE(store_->RegisterAttestedKey(key, std::nullopt, Op(), 1460).ok());
    KubeCsrDecision kube;
    kube.uid = "5f1c0f7e-2b6a-4d0e-9c1a-2f8f0a4b7c11";
    kube.name = "csr-node-a-serving";
    kube.machine_id = a.id;
    kube.kind = "serving";
    kube.purpose = std::string(kKubePurposeServing);
    kube.public_key_sha256 = key.public_key_sha256;
    kube.requester = "system:node:node-a";
    kube.decision = std::string(kCsrWaiting);
    ASSERT_TRUE(store_->RecordKubeCsr(kube, Op(), 1470).ok());
    CaRotation rotation;  // an appliance CA rotation in progress (issue 44)
    rotation.current_pem = "current";
    rotation.current_sha256 = std::string(64, 'a');
    rotation.next_pem = "next";
    rotation.next_sha256 = std::string(64, 'b');
    ASSERT_TRUE(store_->PrepareCaRotation(rotation, "{}", Op(), 1480).ok());
    ASSERT_TRUE(store_->Revoke("node-c", Op("retired"), 1500).ok());
    // The store is closed, as rackgated would be for a migration.
    store_.reset();
    for (const auto& table : AllTables(path_)) {
      auto c = SqliteConnection::Open(path_, 1000, true);
      ASSERT_TRUE(c.ok());
      Stmt s = (*c)->Prepare("SELECT count(*) FROM \"" + table + "\"");
      ASSERT_TRUE(s.Step());
      EXPECT_GT(s.Int(0), 0) << "the fixture leaves table " << table << " empty";
    }
  }

  // What must be the same on both sides, read through the Store interface.
  struct Snapshot {
    std::vector<std::string> machines;  // hostname:id:state:pool
    std::vector<std::string> audit;     // id:action:hostname
    AuditChainReport chain;
    size_t events = 0;
    size_t certificates = 0;
    std::vector<std::string> kube_csrs;  // uid:decision:hostname
  };
  Snapshot Read(Store& s) {
    Snapshot out;
    auto machines = s.ListMachines();
    EXPECT_TRUE(machines.ok());
    for (const auto& m : *machines) {
      out.machines.push_back(m.hostname + ":" + std::to_string(m.id) + ":" + std::string(StateName(m.state)) + ":" +
                             m.pool);
    }
    AuditFilter f;
    f.limit = 10000;
    auto audit = s.ListAudit(f);
    EXPECT_TRUE(audit.ok());
    for (const auto& e : *audit) out.audit.push_back(std::to_string(e.id) + ":" + e.action + ":" + e.hostname);
    auto chain = s.VerifyAuditChain();
    EXPECT_TRUE(chain.ok());
    out.chain = *chain;
    EventFilter ef;
    ef.limit = 10000;
    auto events = s.ListEvents(ef);
    EXPECT_TRUE(events.ok());
    out.events = events->size();
    auto certs = s.ListCertificates("");
    EXPECT_TRUE(certs.ok());
    out.certificates = certs->size();
    auto kube = s.ListKubeCsrs(false);
    EXPECT_TRUE(kube.ok());
    for (const auto& d : *kube) out.kube_csrs.push_back(d.uid + ":" + d.decision + ":" + d.hostname);
    return out;
  }

  // The copy into `target`, then the target opened as a store: the same
  // data, the same audit head, and a new write gets a fresh id.
  void CopyAndCompare(const std::string& target) {
    Populate();
    Snapshot before;
    {
      auto src = OpenSqlite(path_);
      ASSERT_NE(src, nullptr);
      before = Read(*src);
    }
    std::map<std::string, int64_t> last_progress;
    CopyOptions options;
    options.progress_every = 2;
    options.progress = [&](const std::string& table, int64_t done, int64_t total) {
      EXPECT_LE(done, total) << table;
      EXPECT_GE(done, last_progress.count(table) ? last_progress[table] : 0) << table;
      last_progress[table] = done;
    };
    auto report = CopyDatabase(path_, target, options);
    ASSERT_TRUE(report.ok()) << report.status().ToString();
    EXPECT_EQ(report->schema_version, LatestSchemaVersion());
    EXPECT_EQ(report->tables.size(), AllTables(path_).size());
    for (const auto& t : report->tables) {
      EXPECT_GT(t.source_rows, 0) << t.table;
      EXPECT_EQ(t.source_rows, t.target_rows) << t.table;
      EXPECT_EQ(last_progress[t.table], t.source_rows) << t.table;
    }
    // Parents first: pools before machines, events before their deliveries.
    const auto pos = [&](const std::string& name) {
      for (size_t i = 0; i < report->tables.size(); ++i) {
        if (report->tables[i].table == name) return static_cast<int>(i);
      }
      return -1;
    };
    EXPECT_LT(pos("pools"), pos("machines"));
    EXPECT_LT(pos("machines"), pos("attestations"));
    EXPECT_LT(pos("events"), pos("event_deliveries"));
    EXPECT_LT(pos("webhooks"), pos("event_deliveries"));
    EXPECT_EQ(report->source_audit.head_hash, before.chain.head_hash);
    EXPECT_EQ(report->target_audit.head_hash, before.chain.head_hash);

    auto copied = OpenStore(target);
    ASSERT_TRUE(copied.ok()) << copied.status().ToString();
    Snapshot after = Read(**copied);
    EXPECT_EQ(after.machines, before.machines);
    EXPECT_EQ(after.audit, before.audit);
    EXPECT_TRUE(after.chain.intact) << after.chain.message;
    EXPECT_EQ(after.chain.head_id, before.chain.head_id);
    EXPECT_EQ(after.chain.head_hash, before.chain.head_hash);
    // Copied, not made again by the triggers.
    EXPECT_EQ(after.events, before.events);
    EXPECT_GT(after.events, 0u);
    EXPECT_EQ(after.certificates, before.certificates);
    EXPECT_EQ(after.kube_csrs, before.kube_csrs);

    // New rows get ids past the copied ones, and the chain goes on.
    int64_t max_id = 0;
    for (const auto& m : before.machines) max_id = std::max<int64_t>(max_id, std::stoll(m.substr(m.find(':') + 1)));
    auto fresh = (*copied)->Enroll(testing::MakeEnrollment("node-new", "new"), Op(), false, 2000);
    ASSERT_TRUE(fresh.ok()) << fresh.status().ToString();
    EXPECT_GT(fresh->id, max_id);
    auto chain = (*copied)->VerifyAuditChain();
    ASSERT_TRUE(chain.ok());
    EXPECT_TRUE(chain->intact) << chain->message;
    EXPECT_EQ(chain->rows, before.chain.rows + 1);
    EXPECT_EQ(chain->head_id, before.chain.head_id + 1);
    copied->reset();

    // A second copy into the now non-empty target is refused and writes
    // nothing.
    auto again = CopyDatabase(path_, target);
    ASSERT_FALSE(again.ok());
    EXPECT_EQ(again.status().reason(), "target_not_empty");
    EXPECT_NE(again.status().message().find("table "), std::string::npos) << again.status().message();
    EXPECT_NE(again.status().message().find("row(s)"), std::string::npos) << again.status().message();
    auto reopened = OpenStore(target);
    ASSERT_TRUE(reopened.ok());
    Snapshot unchanged = Read(**reopened);
    EXPECT_EQ(unchanged.machines.size(), before.machines.size() + 1);
    EXPECT_EQ(unchanged.audit.size(), before.audit.size() + 1);
  }
};

TEST_F(CopyTest, SqliteToSqliteKeepsIdsChainAndEvents) { CopyAndCompare(dir_.File("target.db")); }

TEST_F(CopyTest, SqliteToPostgresKeepsIdsChainAndEvents) {
  const auto url = PostgresUrl();
  if (!url) GTEST_SKIP() << "RACKGATE_TEST_POSTGRES is unset: run under script/pg-lab run --";
  CopyAndCompare(*url);
}

TEST_F(CopyTest, DryRunWritesNothing) {
  Populate();
  const std::string target = dir_.File("dry.db");
  CopyOptions options;
  options.dry_run = true;
  auto report = CopyDatabase(path_, target, options);
  ASSERT_TRUE(report.ok()) << report.status().ToString();
  EXPECT_TRUE(report->dry_run);
  EXPECT_EQ(report->target_audit.head_hash, report->source_audit.head_hash);
  auto copied = OpenSqlite(target);
  ASSERT_NE(copied, nullptr);
  auto machines = copied->ListMachines();
  ASSERT_TRUE(machines.ok());
  EXPECT_TRUE(machines->empty());
  auto pools = copied->ListPools();
  ASSERT_TRUE(pools.ok());
  EXPECT_TRUE(pools->empty());
}

TEST_F(CopyTest, NonEmptyTargetIsRefusedAndUnchanged) {
  Populate();
  const std::string target = dir_.File("busy.db");
  {
    auto other = OpenSqlite(target);
    ASSERT_NE(other, nullptr);
    ASSERT_TRUE(other->PutPool(Pool{"elsewhere"}, Op(), 5).ok());
  }
  auto r = CopyDatabase(path_, target);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), Status::Code::kUnsupported);
  EXPECT_EQ(r.status().reason(), "target_not_empty");
  // The first non-empty table in copy order names itself with its count.
  EXPECT_NE(r.status().message().find("table audit holds 1 row(s)"), std::string::npos) << r.status().message();
  auto other = OpenSqlite(target);
  ASSERT_NE(other, nullptr);
  auto pools = other->ListPools();
  ASSERT_TRUE(pools.ok());
  ASSERT_EQ(pools->size(), 1u);
  EXPECT_EQ((*pools)[0].name, "elsewhere");
  auto machines = other->ListMachines();
  ASSERT_TRUE(machines.ok());
  EXPECT_TRUE(machines->empty());
}

TEST_F(CopyTest, OldSourceIsRefusedWithTheFix) {
  store_.reset();
  const std::string old = dir_.File("old.db");
  {
    auto s = OpenSqlite(old);
    ASSERT_NE(s, nullptr);
  }
  {
    // A file one version behind, as an older rackgate left it.
    auto c = SqliteConnection::Open(old, 1000, false);
    ASSERT_TRUE(c.ok());
    (*c)->Exec("PRAGMA user_version = 7");
  }
  auto r = CopyDatabase(old, dir_.File("target.db"));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().reason(), "db_schema_old");
  EXPECT_NE(r.status().message().find("start rackgated once"), std::string::npos) << r.status().message();
}

TEST_F(CopyTest, MissingSourceNamesTheFlags) {
  auto r = CopyDatabase(dir_.File("nothing.db"), dir_.File("target.db"));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().reason(), "db_missing");
  EXPECT_NE(r.status().message().find("--state-dir"), std::string::npos);
}

TEST_F(CopyTest, SourceOpenInAnotherProcessIsRefused) {
  Populate();
  int ready[2], release[2];
  ASSERT_EQ(pipe(ready), 0);
  ASSERT_EQ(pipe(release), 0);
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    // The child holds the store open, as a running rackgated does.
    auto c = SqliteConnection::Open(path_, 1000, true);
    bool ok = c.ok();
    if (ok) {
      Stmt s = (*c)->Prepare("SELECT count(*) FROM machines");
      ok = s.Step();
    }
    char byte = ok ? '1' : '0';
    (void)!write(ready[1], &byte, 1);
    (void)!read(release[0], &byte, 1);
    _exit(0);
  }
  char byte = 0;
  ASSERT_EQ(read(ready[0], &byte, 1), 1);
  ASSERT_EQ(byte, '1');
  Status in_use = CheckSqliteNotInUse(path_);
  auto r = CopyDatabase(path_, dir_.File("target.db"));
  (void)!write(release[1], &byte, 1);
  int status = 0;
  waitpid(child, &status, 0);
  EXPECT_EQ(in_use.reason(), "db_in_use");
  EXPECT_NE(in_use.message().find(std::to_string(child)), std::string::npos) << in_use.message();
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().reason(), "db_in_use");
  // Once the other process is gone, the file is free.
  EXPECT_TRUE(CheckSqliteNotInUse(path_).ok());
  for (int fd : {ready[0], ready[1], release[0], release[1]}) close(fd);
}

}  // namespace
}  // namespace rackgate::storage
