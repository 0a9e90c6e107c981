// Tests for enrollment and import: the EK as identity, idempotent
// re-enrollment, replacement, all-or-nothing imports.
#include <gtest/gtest.h>

#include <algorithm>
#include <optional>
#include <string>
#include <vector>

#include <sqlite3.h>

#include "storage/rows.h"
#include "storage/sqlite.h"
#include "storage/store.h"
#include "storage/testing/store_test_fixture.h"
#include "base/hex.h"

namespace rackgate::storage {
namespace {

using testing::B;
using testing::ExpectFailure;
using testing::MakeEnrollment;
using testing::MustOpen;
using testing::Op;
using testing::StoreTest;
using testing::TempDir;

// --- Enrollment --------------------------------------------------------------

TEST_F(StoreTest, EnrollNewMachine) {
  Enrollment e = MakeEnrollment("node-1", "a");
  e.ek_certificate = B("certder");
  e.tpm_manufacturer = "id:49465800";
  e.tpm_model = "SLB9670";
  e.tpm_version = "7.85";
  e.policy_json = "{\"rules\":1}";
  e.addresses.push_back({"InternalIP", "10.0.0.1"});  // duplicates collapse
  auto m = store_->Enroll(e, Op("rack 4"), false, 100);
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  EXPECT_GT(m->id, 0);
  EXPECT_EQ(m->hostname, "node-1");
  EXPECT_EQ(m->pool, "workers");
  EXPECT_EQ(m->state, MachineState::kEnrolled);
  EXPECT_EQ(m->ek_public, e.ek_public);
  EXPECT_EQ(m->ek_hash, e.ek_hash);
  EXPECT_EQ(m->ek_certificate, e.ek_certificate);
  EXPECT_EQ(m->tpm_manufacturer, "id:49465800");
  EXPECT_EQ(m->policy_json, e.policy_json);
  EXPECT_EQ(m->created_at, 100);
  EXPECT_FALSE(m->last_attested_at.has_value());
  ASSERT_EQ(m->addresses.size(), 2u);
  EXPECT_EQ(m->addresses[0], (Address{"Hostname", "node-1"}));
  EXPECT_EQ(m->addresses[1], (Address{"InternalIP", "10.0.0.1"}));

  auto audit = Audit("node-1");
  ASSERT_EQ(audit.size(), 1u);
  EXPECT_EQ(audit[0].action, "enroll");
  EXPECT_EQ(audit[0].actor, "uid:0(root)");
  EXPECT_EQ(audit[0].why, "rack 4");
  EXPECT_EQ(audit[0].machine_id, m->id);
  EXPECT_FALSE(audit[0].from_state.has_value());
  EXPECT_EQ(audit[0].to_state, "enrolled");
  EXPECT_NE(audit[0].detail_json.find("656b686173683a61"), std::string::npos);  // hex("ekhash:a")

  auto by_ek = store_->FindMachineByEkHash(e.ek_hash);
  ASSERT_TRUE(by_ek.ok());
  EXPECT_EQ(by_ek->hostname, "node-1");
  auto by_id = store_->GetMachineById(m->id);
  ASSERT_TRUE(by_id.ok());
  EXPECT_EQ(by_id->hostname, "node-1");
}

TEST_F(StoreTest, EnrollRefusals) {
  const size_t before = AuditCount();
  Enrollment e = MakeEnrollment("node-1", "a", "nopool");
  ExpectFailure(store_->Enroll(e, Op(), false, 1).status(), Status::Code::kNotFound, "pool_unknown");
  for (const char* bad : {"", "Node-1", "node_1", "-node", "node-", "a..b", ".a", "a.", "node 1",
                          "system:node:x"}) {
    e = MakeEnrollment(bad, "a");
    ExpectFailure(store_->Enroll(e, Op(), false, 1).status(), Status::Code::kInvalidArgument, "hostname_invalid");
  }
  e = MakeEnrollment(std::string(64, 'a'), "a");
  ExpectFailure(store_->Enroll(e, Op(), false, 1).status(), Status::Code::kInvalidArgument, "hostname_invalid");
  e = MakeEnrollment(std::string(63, 'a') + ".b", "a");
  EXPECT_TRUE(store_->Enroll(e, Op(), false, 1).ok());

  e = MakeEnrollment("node-2", "b");
  e.state = MachineState::kJoined;
  ExpectFailure(store_->Enroll(e, Op(), false, 1).status(), Status::Code::kInvalidArgument, "state_invalid");
  e = MakeEnrollment("node-2", "b");
  e.ek_public.clear();
  e.ek_certificate.reset();
  ExpectFailure(store_->Enroll(e, Op(), false, 1).status(), Status::Code::kInvalidArgument, "field_invalid");
  e = MakeEnrollment("node-2", "b");
  e.ek_hash = Bytes(65, 1);
  ExpectFailure(store_->Enroll(e, Op(), false, 1).status(), Status::Code::kInvalidArgument, "field_invalid");
  e = MakeEnrollment("node-2", "b");
  e.addresses = {{"MACAddress", "aa:bb"}};
  ExpectFailure(store_->Enroll(e, Op(), false, 1).status(), Status::Code::kInvalidArgument, "field_invalid");
  e.addresses = {{"InternalIP", ""}};
  ExpectFailure(store_->Enroll(e, Op(), false, 1).status(), Status::Code::kInvalidArgument, "field_invalid");
  e = MakeEnrollment("node-2", "b");
  e.ek_certificate = Bytes();
  ExpectFailure(store_->Enroll(e, Op(), false, 1).status(), Status::Code::kInvalidArgument, "field_invalid");
  EXPECT_EQ(AuditCount(), before + 1);  // the one good enrollment
}

// A vendor inventory ships EK certificates, not public areas: a certificate
// alone identifies the EK, and a machine needs one or the other.
TEST_F(StoreTest, EnrollFromCertificateAlone) {
  Enrollment e = MakeEnrollment("node-cert-only", "cert-only");
  e.ek_public.clear();
  e.ek_certificate = Bytes{0x30, 0x01};
  auto m = store_->Enroll(e, Op(), false, 1);
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  EXPECT_TRUE(m->ek_public.empty());
  EXPECT_EQ(m->ek_certificate, e.ek_certificate);
}

TEST_F(StoreTest, ReenrollingTheSameMachineIsIdempotent) {
  Machine first = Enroll("node-1", "a");
  const size_t before = AuditCount();
  auto again = store_->Enroll(MakeEnrollment("node-1", "a"), Op(), false, 200);
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->id, first.id);
  EXPECT_EQ(again->updated_at, 100);  // nothing written
  EXPECT_EQ(AuditCount(), before);
}

TEST_F(StoreTest, ReenrollingUpdatesPoolAddressesPolicyAndKeepsCertificate) {
  Enrollment e = MakeEnrollment("node-1", "a");
  e.ek_certificate = B("cert-1");
  e.tpm_model = "m1";
  ASSERT_TRUE(store_->Enroll(e, Op(), false, 100).ok());

  Enrollment update = MakeEnrollment("node-1", "a", "masters");
  update.addresses = {{"InternalIP", "10.9.9.9"}};
  update.policy_json = "{}";
  auto m = store_->Enroll(update, Op("moved"), false, 200);
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  EXPECT_EQ(m->pool, "masters");
  EXPECT_EQ(m->addresses, (std::vector<Address>{{"InternalIP", "10.9.9.9"}}));
  EXPECT_EQ(m->policy_json, "{}");
  EXPECT_EQ(m->ek_certificate, B("cert-1"));  // no certificate given: kept
  EXPECT_EQ(m->tpm_model, "m1");
  EXPECT_EQ(m->updated_at, 200);
  auto audit = Audit("node-1");
  ASSERT_EQ(audit.size(), 2u);
  EXPECT_EQ(audit[1].action, "enroll_update");
  EXPECT_EQ(audit[1].from_state, "enrolled");
  EXPECT_EQ(audit[1].to_state, "enrolled");
  EXPECT_NE(audit[1].detail_json.find("addresses"), std::string::npos);

  update.ek_certificate = B("cert-2");
  update.tpm_model = "m2";
  m = store_->Enroll(update, Op(), false, 300);
  ASSERT_TRUE(m.ok());
  EXPECT_EQ(m->ek_certificate, B("cert-2"));
  EXPECT_EQ(m->tpm_model, "m2");
}

TEST_F(StoreTest, ReenrollingAPendingMachineAsEnrolledMovesIt) {
  Enroll("node-1", "a", MachineState::kPending);
  auto m = store_->Enroll(MakeEnrollment("node-1", "a"), Op(), false, 200);
  ASSERT_TRUE(m.ok());
  EXPECT_EQ(m->state, MachineState::kEnrolled);
  auto audit = Audit("node-1");
  ASSERT_EQ(audit.size(), 2u);
  EXPECT_EQ(audit[1].from_state, "pending");
  EXPECT_EQ(audit[1].to_state, "enrolled");
}

TEST_F(StoreTest, ReenrollingARevokedMachineKeepsItRevoked) {
  Enroll("node-1", "a");
  ASSERT_TRUE(store_->Revoke("node-1", Op(), 150).ok());
  Enrollment e = MakeEnrollment("node-1", "a");
  e.addresses = {{"InternalIP", "10.1.1.1"}};
  auto m = store_->Enroll(e, Op(), false, 200);
  ASSERT_TRUE(m.ok());
  EXPECT_EQ(m->state, MachineState::kRevoked);
}

TEST_F(StoreTest, EnrolledEkIsImmutable) {
  Machine m = Enroll("node-1", "a");
  const size_t before = AuditCount();
  auto conflict = store_->Enroll(MakeEnrollment("node-1", "b"), Op(), false, 200);
  ExpectFailure(conflict.status(), Status::Code::kInvalidArgument, "ek_conflict");
  auto still = store_->GetMachine("node-1");
  ASSERT_TRUE(still.ok());
  EXPECT_EQ(still->ek_hash, m.ek_hash);
  EXPECT_EQ(AuditCount(), before);
  ExpectFailure(store_->FindMachineByEkHash(B("ekhash:b")).status(), Status::Code::kNotFound, "machine_unknown");
}

TEST_F(StoreTest, SameEkUnderAnotherHostnameIsRefused) {
  Enroll("node-1", "a");
  Enroll("node-2", "b");
  const size_t before = AuditCount();
  ExpectFailure(store_->Enroll(MakeEnrollment("node-3", "a"), Op(), false, 200).status(),
                Status::Code::kInvalidArgument, "ek_in_use");
  // Not even by replacement: the EK still belongs to node-1.
  ExpectFailure(store_->Enroll(MakeEnrollment("node-2", "a"), Op(), true, 200).status(),
                Status::Code::kInvalidArgument, "ek_in_use");
  EXPECT_EQ(AuditCount(), before);
  ExpectFailure(store_->GetMachine("node-3").status(), Status::Code::kNotFound, "hostname_unknown");
}

TEST_F(StoreTest, ReplacingTheEkIsAuditedAndStartsOver) {
  Machine m = Attested("node-1", "a");
  ASSERT_TRUE(store_->CreateSession(MakeSession(m, "open")).ok());
  ASSERT_TRUE(store_->RecordCertificate(Cert(m, "01"), Op(), 1100).ok());
  ASSERT_TRUE(store_->LastSuccessfulAttestation(m.id).ok());

  Enrollment e = MakeEnrollment("node-1", "new");
  auto replaced = store_->Enroll(e, Op("motherboard swap"), true, 2000);
  ASSERT_TRUE(replaced.ok()) << replaced.status().ToString();
  EXPECT_EQ(replaced->id, m.id);
  EXPECT_EQ(replaced->state, MachineState::kEnrolled);
  EXPECT_EQ(replaced->ek_hash, e.ek_hash);
  EXPECT_FALSE(replaced->tofu_pcrs_json.has_value());
  EXPECT_FALSE(replaced->client_cert_issued_at.has_value());

  auto audit = Audit("node-1");
  ASSERT_FALSE(audit.empty());
  const AuditEntry& a = audit.back();
  EXPECT_EQ(a.action, "replace_ek");
  EXPECT_EQ(a.why, "motherboard swap");
  EXPECT_EQ(a.from_state, "joined");  // the client certificate joined it
  EXPECT_EQ(a.to_state, "enrolled");
  EXPECT_NE(a.detail_json.find("\"old_ek_hash\":\"656b686173683a61\""), std::string::npos) << a.detail_json;
  EXPECT_NE(a.detail_json.find("\"new_ek_hash\":\"656b686173683a6e6577\""), std::string::npos) << a.detail_json;

  // The old TPM's credentials and counters are gone.
  ExpectFailure(store_->LookupToken(B("tokhash-a"), 1500).status(), Status::Code::kNotFound, "token_unknown");
  ExpectFailure(store_->ConsumeSession("open", 1010).status(), Status::Code::kNotFound, "session_unknown");
  ExpectFailure(store_->LastSuccessfulAttestation(m.id).status(), Status::Code::kNotFound, "attestation_unknown");
  ExpectFailure(store_->FindMachineByEkHash(B("ekhash:a")).status(), Status::Code::kNotFound, "machine_unknown");
  // The old EK is free again.
  EXPECT_TRUE(store_->Enroll(MakeEnrollment("node-9", "a"), Op(), false, 2100).ok());
}

Enrollment Bare(const std::string& hostname, const std::string& tag) {
  Enrollment e = MakeEnrollment(hostname, tag, "");
  e.addresses.clear();
  return e;
}

// --- EnrollMerged: the caller's merge in the store's transaction -------------
// (what the merge decides is core/enrollment_merge_test.cc's)

TEST_F(StoreTest, EnrollMergedStoresWhatTheMergeResolves) {
  Enrollment e = MakeEnrollment("node-1", "a");
  e.vars_json = R"({"rack":"r1"})";
  ASSERT_TRUE(store_->Enroll(e, Op(), false, 100).ok());
  const size_t before = AuditCount();
  std::optional<Machine> seen;
  std::optional<MachineState> seen_state;
  const EnrollMerge keep_but_vars = [&](size_t row, const Machine* stored, MachineState state)
      -> Result<MergedEnrollment> {
    EXPECT_EQ(row, 0u);
    if (stored != nullptr) seen = *stored;
    seen_state = state;
    MergedEnrollment m{e, {"vars ~rack"}, {"vars"}};
    m.enrollment.vars_json = R"({"rack":"r2"})";
    m.enrollment.hostname = "elsewhere";  // the store keeps the given identity
    return m;
  };
  auto m = store_->EnrollMerged(Bare("node-1", "a"), keep_but_vars, Op(), false, 200);
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  ASSERT_TRUE(seen.has_value());
  EXPECT_EQ(seen->vars_json, R"({"rack":"r1"})");
  EXPECT_EQ(seen_state, MachineState::kEnrolled);
  EXPECT_EQ(m->outcome, "updated");
  EXPECT_EQ(m->changes, (std::vector<std::string>{"vars ~rack"}));
  EXPECT_EQ(m->machine.hostname, "node-1");
  EXPECT_EQ(m->machine.vars_json, R"({"rack":"r2"})");
  auto audit = Audit("node-1");
  EXPECT_EQ(audit.back().action, "enroll_update");
  EXPECT_NE(audit.back().detail_json.find(R"("changed":["vars"])"), std::string::npos) << audit.back().detail_json;
  EXPECT_EQ(AuditCount(), before + 1);

  // Nothing changed: no audit row. A refusal of the merge is the answer.
  const EnrollMerge same = [&](size_t, const Machine* stored, MachineState) -> Result<MergedEnrollment> {
    Enrollment d = e;
    d.vars_json = stored->vars_json;
    d.addresses = stored->addresses;
    return MergedEnrollment{d, {}, {}};
  };
  auto again = store_->EnrollMerged(Bare("node-1", "a"), same, Op(), false, 300);
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->outcome, "unchanged");
  EXPECT_EQ(AuditCount(), before + 1);
  const EnrollMerge refuse = [](size_t, const Machine*, MachineState) -> Result<MergedEnrollment> {
    return Status::Corruption("db_corrupt", "a machine's stored vars are not a JSON object");
  };
  ExpectFailure(store_->EnrollMerged(Bare("node-1", "a"), refuse, Op(), false, 400).status(),
                Status::Code::kCorruption, "db_corrupt");
  EXPECT_EQ(AuditCount(), before + 1);
}

TEST_F(StoreTest, EkInUseNamesTheHolderAndTheFix) {
  Enroll("node-1", "a");
  auto r = store_->Enroll(MakeEnrollment("node-3", "a"), Op(), false, 200);
  ExpectFailure(r.status(), Status::Code::kInvalidArgument, "ek_in_use");
  EXPECT_NE(r.status().message().find("enrolled as node-1 (state enrolled)"), std::string::npos)
      << r.status().message();
  EXPECT_NE(r.status().message().find("rackgatectl delete node-1"), std::string::npos);
  EXPECT_NE(r.status().message().find("rackgatectl rename node-1 node-3"), std::string::npos);
}

TEST_F(StoreTest, AddressesAreValidatedOnEveryPath) {
  const size_t before = AuditCount();
  for (const Address& bad : std::vector<Address>{{"InternalIP", "10.0.0.300"},
                                                 {"ExternalIP", "node-1.example"},
                                                 {"InternalIP", "fd00::g"},
                                                 {"InternalDNS", "10.0.0.1 "},
                                                 {"Hostname", "-node"},
                                                 {"ExternalDNS", "a..b"},
                                                 {"InternalDNS", "under_score.example"}}) {
    Enrollment e = MakeEnrollment("node-1", "a");
    e.addresses = {bad};
    auto r = store_->Enroll(e, Op(), false, 100);
    ExpectFailure(r.status(), Status::Code::kInvalidArgument, "field_invalid");
    EXPECT_NE(r.status().message().find(bad.kind + "=" + bad.value), std::string::npos) << r.status().message();
  }
  Enrollment ok = MakeEnrollment("node-1", "a");
  ok.addresses = {{"InternalIP", "10.0.0.6"},
                  {"ExternalIP", "2001:db8::6"},
                  {"InternalDNS", "node-1.rack4.example"},
                  {"Hostname", "Node-1"}};
  ASSERT_TRUE(store_->Enroll(ok, Op(), false, 100).ok());
  EXPECT_EQ(AuditCount(), before + 1);

  // Approve with changes goes through the same check.
  Enroll("pending-1", "p", MachineState::kPending);
  ApprovalChanges changes;
  changes.addresses = std::vector<Address>{{"InternalIP", "10.0.0.300"}};
  ExpectFailure(store_->Approve("pending-1", changes, Op(), 200).status(), Status::Code::kInvalidArgument,
                "field_invalid");
}

// --- Import ------------------------------------------------------------------

std::vector<ImportRow> Rows(const std::vector<Enrollment>& enrollments) {
  std::vector<ImportRow> rows;
  for (size_t i = 0; i < enrollments.size(); ++i) {
    rows.push_back({enrollments[i], "line " + std::to_string(i + 2)});
  }
  return rows;
}

// Import with a declarative merge: each row as given, changed when a field
// differs (the store's part; the real merge is core/enrollment_merge.h's).
Result<ImportReport> ImportRows(Store& store, const std::vector<ImportRow>& rows, const ImportOptions& options,
                                const Actor& actor, int64_t now, const ImportProgress& progress = nullptr) {
  const EnrollMerge as_given = [&rows](size_t i, const Machine* stored,
                                       MachineState state) -> Result<MergedEnrollment> {
    MergedEnrollment m{rows[i].enrollment, {}, {}};
    m.enrollment.addresses = NormalizeAddresses(m.enrollment.addresses);
    const Enrollment& d = m.enrollment;
    if (stored != nullptr && (stored->pool != d.pool || stored->addresses != d.addresses ||
                              stored->vars_json != d.vars_json || stored->policy_json != d.policy_json ||
                              stored->state != state)) {
      m.changes = {"changed"};
      m.changed = {"changed"};
    }
    return m;
  };
  return store.Import(rows, as_given, options, actor, now, progress);
}

// Every table's every row, as text: what "nothing stored" compares.
std::string DumpTables(const std::string& path) {
  if (testing::TestingPostgres()) {
    auto c = testing::MustConnect(path);
    if (c == nullptr) return "";
    std::vector<std::string> tables;
    {
      Stmt s = c->Prepare(
          "SELECT table_name FROM information_schema.tables WHERE table_schema = current_schema() "
          "ORDER BY table_name");
      while (s.Step()) tables.push_back(s.Text(0));
    }
    std::string out;
    for (const auto& t : tables) {
      out += "== " + t + "\n";
      // A row as PostgreSQL writes a row value; sorted, as below.
      Stmt s = c->Prepare("SELECT r::text FROM \"" + t + "\" r ORDER BY 1");
      while (s.Step()) out += s.Text(0) + "\n";
    }
    return out;
  }
  auto c = SqliteConnection::Open(path, 5000, true);
  EXPECT_TRUE(c.ok());
  if (!c.ok()) return "";
  std::vector<std::string> tables;
  {
    Stmt s = (*c)->Prepare("SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name");
    while (s.Step()) tables.push_back(s.Text(0));
  }
  std::string out;
  for (const auto& t : tables) {
    out += "== " + t + "\n";
    sqlite3_stmt* raw = nullptr;
    EXPECT_EQ(sqlite3_prepare_v2((*c)->db(), ("SELECT * FROM \"" + t + "\"").c_str(), -1, &raw,
                                 nullptr),
              SQLITE_OK);
    std::vector<std::string> lines;  // sorted: the order of a scan is not the point
    while (sqlite3_step(raw) == SQLITE_ROW) {
      std::string line;
      for (int i = 0; i < sqlite3_column_count(raw); ++i) {
        const unsigned char* v = sqlite3_column_text(raw, i);
        line += v ? reinterpret_cast<const char*>(v) : "NULL";
        line += '|';
      }
      lines.push_back(line);
    }
    sqlite3_finalize(raw);
    std::sort(lines.begin(), lines.end());
    for (const auto& l : lines) out += l + "\n";
  }
  return out;
}

TEST_F(StoreTest, ImportAddsEveryRowAndReportsProgress) {
  std::vector<Enrollment> rows;
  for (int i = 0; i < 20; ++i) rows.push_back(MakeEnrollment("node-" + std::to_string(i), std::to_string(i)));
  std::vector<std::pair<size_t, size_t>> calls;
  auto n = ImportRows(*store_, Rows(rows), {}, Op("vendor manifest"), 100, [&](size_t done, size_t total) {
    calls.emplace_back(done, total);
  });
  ASSERT_TRUE(n.ok()) << n.status().ToString();
  EXPECT_EQ(n->created, 20u);
  EXPECT_EQ(n->updated, 0u);
  EXPECT_EQ(n->unchanged, 0u);
  ASSERT_EQ(n->rows.size(), 20u);
  EXPECT_EQ(n->rows[3].where, "line 5");
  EXPECT_EQ(n->rows[3].hostname, "node-3");
  EXPECT_EQ(n->rows[3].outcome, "created");
  ASSERT_EQ(calls.size(), 20u);
  EXPECT_EQ(calls.front(), (std::pair<size_t, size_t>(1, 20)));
  EXPECT_EQ(calls.back(), (std::pair<size_t, size_t>(20, 20)));
  auto all = store_->ListMachines();
  ASSERT_TRUE(all.ok());
  EXPECT_EQ(all->size(), 20u);
  auto audit = Audit();
  EXPECT_EQ(audit.back().action, "import");
  EXPECT_NE(audit.back().detail_json.find("\"rows\":20"), std::string::npos);

  // Importing the same inventory again changes nothing.
  const size_t before = AuditCount();
  auto again = ImportRows(*store_, Rows(rows), {}, Op(), 200);
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->unchanged, 20u);
  EXPECT_EQ(AuditCount(), before + 1);  // the import row only
}

TEST_F(StoreTest, ImportCountsCreatedUpdatedUnchangedAndIsDeclarative) {
  Enrollment kept = MakeEnrollment("node-1", "1");
  Enrollment changed = MakeEnrollment("node-2", "2");
  changed.vars_json = R"({"rack":"r1","extra":"e"})";
  ASSERT_TRUE(store_->Enroll(kept, Op(), false, 100).ok());
  ASSERT_TRUE(store_->Enroll(changed, Op(), false, 100).ok());
  changed.vars_json = R"({"rack":"r2"})";
  changed.addresses = {{"InternalIP", "10.0.0.2"}};
  auto r = ImportRows(*store_, Rows({kept, changed, MakeEnrollment("node-3", "3")}), {}, Op(), 200);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->created, 1u);
  EXPECT_EQ(r->updated, 1u);
  EXPECT_EQ(r->unchanged, 1u);
  EXPECT_EQ(r->rows[1].outcome, "updated");
  // The row is the machine's desired state: its addresses and vars only.
  auto m = store_->GetMachine("node-2");
  ASSERT_TRUE(m.ok());
  EXPECT_EQ(m->vars_json, R"({"rack":"r2"})");
  EXPECT_EQ(m->addresses, (std::vector<Address>{{"InternalIP", "10.0.0.2"}}));
}

TEST_F(StoreTest, ImportDryRunStoresNothing) {
  Enroll("existing", "x");
  const std::string before = DumpTables(path_);
  Enrollment update = MakeEnrollment("existing", "x");
  update.addresses = {{"InternalIP", "10.0.0.9"}};
  ImportOptions dry;
  dry.dry_run = true;
  auto r = ImportRows(*store_, Rows({update, MakeEnrollment("node-1", "1"), MakeEnrollment("node-2", "2")}), dry, Op(),
                          300);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_TRUE(r->dry_run);
  EXPECT_EQ(r->created, 2u);
  EXPECT_EQ(r->updated, 1u);
  EXPECT_EQ(DumpTables(path_), before);
  // A dry run finds the same refusals as a real import.
  std::vector<Enrollment> bad = {MakeEnrollment("node-1", "1"), MakeEnrollment("node-2", "2", "nowhere")};
  ExpectFailure(ImportRows(*store_, Rows(bad), dry, Op(), 300).status(), Status::Code::kNotFound, "pool_unknown");
  EXPECT_EQ(DumpTables(path_), before);
}

TEST_F(StoreTest, ImportIsAllOrNothing) {
  Enroll("existing", "x");
  const size_t audit_before = AuditCount();
  std::vector<Enrollment> rows;
  for (int i = 0; i < 5; ++i) rows.push_back(MakeEnrollment("node-" + std::to_string(i), std::to_string(i)));
  rows[2].pool = "nowhere";
  size_t progress_calls = 0;
  auto n = ImportRows(*store_, Rows(rows), {}, Op(), 100, [&](size_t, size_t) { ++progress_calls; });
  ExpectFailure(n.status(), Status::Code::kNotFound, "pool_unknown");
  EXPECT_NE(n.status().message().find("line 4 (node-2)"), std::string::npos) << n.status().message();
  EXPECT_EQ(progress_calls, 2u);
  auto all = store_->ListMachines();
  ASSERT_TRUE(all.ok());
  ASSERT_EQ(all->size(), 1u);
  EXPECT_EQ((*all)[0].hostname, "existing");
  EXPECT_EQ(AuditCount(), audit_before);

  // A conflict with what is enrolled keeps its reason: the same hostname
  // with another EK.
  rows[2] = MakeEnrollment("existing", "other");
  ExpectFailure(ImportRows(*store_, Rows(rows), {}, Op(), 100).status(), Status::Code::kInvalidArgument, "ek_conflict");

  // A throwing progress callback also leaves nothing behind.
  rows[2] = MakeEnrollment("node-2", "2");
  EXPECT_THROW(
      (void)ImportRows(*store_, Rows(rows), {}, Op(), 100,
                           [](size_t done, size_t) {
                             if (done == 3) throw std::runtime_error("cancelled");
                           }),
      std::runtime_error);
  EXPECT_EQ(store_->ListMachines()->size(), 1u);
  ASSERT_TRUE(ImportRows(*store_, Rows(rows), {}, Op(), 100).ok());
  EXPECT_EQ(store_->ListMachines()->size(), 6u);
}

TEST_F(StoreTest, Issue15ImportDuplicatesAreFoundBeforeAnythingIsStored) {
  Enroll("node-1", "1");  // in the store with EK 1
  const std::string before = DumpTables(path_);
  // The same hostname twice (once with the enrolled EK, once with another):
  // a duplicate, never an ek_conflict.
  auto dup_host = ImportRows(
      *store_, Rows({MakeEnrollment("node-0", "0"), MakeEnrollment("node-1", "1"), MakeEnrollment("node-1", "9")}),
      {}, Op(), 100);
  ExpectFailure(dup_host.status(), Status::Code::kInvalidArgument, "import_duplicate");
  EXPECT_NE(dup_host.status().message().find("line 3 and line 4 both enroll hostname node-1"), std::string::npos)
      << dup_host.status().message();
  // The same EK under two hostnames.
  auto dup_ek =
      ImportRows(*store_, Rows({MakeEnrollment("node-5", "5"), MakeEnrollment("node-6", "5")}), {}, Op(), 100);
  ExpectFailure(dup_ek.status(), Status::Code::kInvalidArgument, "import_duplicate");
  EXPECT_NE(dup_ek.status().message().find("line 2 (node-5) and line 3 (node-6) carry the same EK"),
            std::string::npos)
      << dup_ek.status().message();
  EXPECT_EQ(DumpTables(path_), before);
}

TEST_F(StoreTest, MachineVarsAreEnrolledAndUpdated) {
  Enrollment e = MakeEnrollment("node-1", "a");
  e.vars_json = "{\"rack\":\"r12\"}";
  auto m = store_->Enroll(e, Op(), false, 100);
  ASSERT_TRUE(m.ok());
  EXPECT_EQ(m->vars_json, "{\"rack\":\"r12\"}");
  e.vars_json = "{\"rack\":\"r13\"}";
  auto updated = store_->Enroll(e, Op(), false, 200);
  ASSERT_TRUE(updated.ok());
  EXPECT_EQ(updated->vars_json, "{\"rack\":\"r13\"}");
  EXPECT_NE(Audit("node-1").back().detail_json.find("vars"), std::string::npos);
  e.vars_json = "";
  ExpectFailure(store_->Enroll(e, Op(), false, 300).status(), Status::Code::kInvalidArgument, "field_invalid");
}

// --- Approve with changes (discovery) ------------------------------------------

TEST_F(StoreTest, ApproveRenamesMovesAndAddressesInOneAuditRow) {
  Machine pending = Enroll("pending-0a1b2c", "disc", MachineState::kPending);
  const size_t before = AuditCount();
  ApprovalChanges ch;
  ch.hostname = "node-x";
  ch.pool = "masters";
  ch.addresses = std::vector<Address>{{"InternalIP", "10.0.0.9"}, {"Hostname", "node-x"}};
  ch.vars_json = R"({"rack":"r1"})";
  auto m = store_->Approve("pending-0a1b2c", ch, Op("racked in r1"), 200);
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  EXPECT_EQ(m->id, pending.id);
  EXPECT_EQ(m->hostname, "node-x");
  EXPECT_EQ(m->pool, "masters");
  EXPECT_EQ(m->state, MachineState::kEnrolled);
  EXPECT_EQ(m->vars_json, R"({"rack":"r1"})");
  ASSERT_EQ(m->addresses.size(), 2u);
  EXPECT_EQ(m->addresses[0].kind, "Hostname");  // sorted
  EXPECT_EQ(m->ek_hash, pending.ek_hash);
  EXPECT_FALSE(store_->GetMachine("pending-0a1b2c").ok());
  EXPECT_EQ(store_->GetMachine("node-x")->id, pending.id);

  auto audit = Audit();
  ASSERT_EQ(audit.size(), before + 1);
  const AuditEntry& a = audit.back();
  EXPECT_EQ(a.action, "approve");
  EXPECT_EQ(a.hostname, "node-x");
  EXPECT_EQ(a.from_state, "pending");
  EXPECT_EQ(a.to_state, "enrolled");
  EXPECT_EQ(a.why, "racked in r1");
  EXPECT_NE(a.detail_json.find(R"("old_hostname":"pending-0a1b2c")"), std::string::npos) << a.detail_json;
  EXPECT_NE(a.detail_json.find(R"("hostname":"node-x")"), std::string::npos) << a.detail_json;
}

TEST_F(StoreTest, ApproveWithoutChangesKeepsTheOldCallsBehaviour) {
  Machine pending = Enroll("pending-1", "disc", MachineState::kPending);
  auto m = store_->Approve("pending-1", ApprovalChanges{}, Op(), 200);
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  EXPECT_EQ(m->hostname, "pending-1");
  EXPECT_EQ(m->pool, pending.pool);
  EXPECT_EQ(m->addresses, pending.addresses);
  EXPECT_EQ(m->state, MachineState::kEnrolled);
  ExpectFailure(store_->Approve("pending-1", ApprovalChanges{}, Op(), 300).status(),
                Status::Code::kInvalidArgument, "state_conflict");
}

TEST_F(StoreTest, ApproveRefusesATakenHostnameAndNamesTheHolder) {
  Machine holder = Enroll("node-x", "held");
  Enroll("pending-2", "disc", MachineState::kPending);
  const size_t before = AuditCount();
  ApprovalChanges ch;
  ch.hostname = "node-x";
  auto m = store_->Approve("pending-2", ch, Op(), 200);
  ExpectFailure(m.status(), Status::Code::kInvalidArgument, "hostname_taken");
  EXPECT_NE(m.status().message().find("'node-x'"), std::string::npos) << m.status().message();
  EXPECT_NE(m.status().message().find("enrolled machine"), std::string::npos) << m.status().message();
  EXPECT_NE(m.status().message().find(hex::Encode(holder.ek_hash).substr(0, 16)), std::string::npos);
  // Nothing changed: still pending under its old name, no audit row.
  EXPECT_EQ(store_->GetMachine("pending-2")->state, MachineState::kPending);
  EXPECT_EQ(AuditCount(), before);
}

TEST_F(StoreTest, ApproveRefusesBadChangesAndChangesNothing) {
  Enroll("pending-3", "disc", MachineState::kPending);
  const size_t before = AuditCount();
  ApprovalChanges bad_name;
  bad_name.hostname = "Node_X";
  ExpectFailure(store_->Approve("pending-3", bad_name, Op(), 200).status(), Status::Code::kInvalidArgument,
                "hostname_invalid");
  ApprovalChanges bad_pool;
  bad_pool.pool = "nowhere";
  ExpectFailure(store_->Approve("pending-3", bad_pool, Op(), 200).status(), Status::Code::kNotFound,
                "pool_unknown");
  ApprovalChanges bad_address;
  bad_address.addresses = std::vector<Address>{{"Nowhere", "1.2.3.4"}};
  ExpectFailure(store_->Approve("pending-3", bad_address, Op(), 200).status(), Status::Code::kInvalidArgument,
                "field_invalid");
  ExpectFailure(store_->Approve("ghost", bad_pool, Op(), 200).status(), Status::Code::kNotFound,
                "hostname_unknown");
  // An enrolled machine is not renamed by approve.
  Enroll("node-9", "nine");
  ApprovalChanges rename;
  rename.hostname = "node-10";
  ExpectFailure(store_->Approve("node-9", rename, Op(), 200).status(), Status::Code::kInvalidArgument,
                "state_conflict");
  EXPECT_EQ(store_->GetMachine("pending-3")->state, MachineState::kPending);
  EXPECT_EQ(AuditCount(), before + 1);  // node-9's enroll
}

}  // namespace
}  // namespace rackgate::storage
