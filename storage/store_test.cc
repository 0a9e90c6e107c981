// Tests for the store's operations: each success, each refusal reason, and
// the audit row (or its absence) that goes with it.
#include "storage/store.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "storage/sqlite.h"
#include "storage/test_util.h"

namespace rackgate::storage {
namespace {

using testing::B;
using testing::MakeEnrollment;
using testing::MustOpen;
using testing::Op;
using testing::TempDir;

class StoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    store_ = MustOpen(path_, Options());
    ASSERT_NE(store_, nullptr);
    ASSERT_TRUE(store_->PutPool(Pool{"workers"}, Op(), 10).ok());
    ASSERT_TRUE(store_->PutPool(Pool{"masters"}, Op(), 10).ok());
  }
  virtual StoreOptions Options() { return {}; }

  Machine Enroll(const std::string& hostname, const std::string& tag, const std::string& state = "enrolled") {
    Enrollment e = MakeEnrollment(hostname, tag);
    e.state = state;
    auto m = store_->Enroll(e, Op(), false, 100);
    EXPECT_TRUE(m.ok()) << m.status().ToString();
    return m.ok() ? *m : Machine{};
  }

  std::vector<AuditEntry> Audit(const std::optional<std::string>& hostname = std::nullopt) {
    AuditFilter f;
    f.hostname = hostname;
    f.limit = 10000;
    auto a = store_->ListAudit(f);
    EXPECT_TRUE(a.ok()) << a.status().ToString();
    return a.ok() ? *a : std::vector<AuditEntry>{};
  }
  size_t AuditCount() { return Audit().size(); }

  Session MakeSession(const Machine& m, const std::string& id, int64_t created = 1000, int64_t ttl = 120) {
    Session s;
    s.id = id;
    s.machine_id = m.id;
    s.nonce = B("nonce-" + id);
    s.secret_hash = B("secret-hash-" + id);
    s.ak_public = B("akpub");
    s.ak_name = B("akname");
    s.pcr_selection = "sha256:0,1,7";
    s.created_at = created;
    s.expires_at = created + ttl;
    return s;
  }

  AttestationRecord Record(const Machine& m, int64_t at, uint32_t reset = 1, uint32_t restart = 0,
                           uint64_t clock = 1000) {
    AttestationRecord r;
    r.machine_id = m.id;
    r.session_id = "s";
    r.at = at;
    r.verdict = "ok";
    r.pcrs_json = "{\"sha256\":{\"0\":\"00\"}}";
    r.reset_count = reset;
    r.restart_count = restart;
    r.clock = clock;
    r.firmware_version = 0x0001000200030004;
    return r;
  }

  Token MakeToken(const Machine& m, const std::string& tag, int64_t issued = 1000, int64_t ttl = 900) {
    return Token{B("tokhash-" + tag), m.id, "s", issued, issued + ttl};
  }

  IssuedCertificate Cert(const Machine& m, const std::string& serial, const std::string& kind = "client") {
    IssuedCertificate c;
    c.serial = serial;
    c.machine_id = m.id;
    c.kind = kind;
    c.subject = "O=system:nodes, CN=system:node:" + m.hostname;
    if (kind == "serving") c.sans = {m.hostname, "10.0.0.7"};
    c.public_key_sha256 = B("spki-" + serial);
    c.not_before = 1000;
    c.not_after = 1000 + 86400;
    return c;
  }

  // An enrolled machine that attested once.
  Machine Attested(const std::string& hostname, const std::string& tag) {
    Machine m = Enroll(hostname, tag);
    auto r = store_->RecordAttestationSuccess(Record(m, 1000), MakeToken(m, tag), std::nullopt);
    EXPECT_TRUE(r.ok()) << r.status().ToString();
    return r.ok() ? *r : m;
  }

  TempDir dir_;
  std::string path_ = dir_.File("store.db");
  std::unique_ptr<Store> store_;
};

void ExpectFailure(const Status& s, Status::Code code, const std::string& reason) {
  EXPECT_FALSE(s.ok());
  EXPECT_EQ(s.code(), code) << s.ToString();
  EXPECT_EQ(s.reason(), reason) << s.ToString();
}

// --- Pools -------------------------------------------------------------------

TEST_F(StoreTest, PutPoolCreatesUpdatesAndAudits) {
  const size_t before = AuditCount();
  Pool p{"infra", "{\"vouch_client\":false}", "{\"pcrs\":{}}"};
  auto put = store_->PutPool(p, Op("new rack"), 50);
  ASSERT_TRUE(put.ok()) << put.status().ToString();
  EXPECT_EQ(put->created_at, 50);
  EXPECT_EQ(put->updated_at, 50);
  EXPECT_EQ(AuditCount(), before + 1);

  // Unchanged: no write, no audit row.
  ASSERT_TRUE(store_->PutPool(p, Op(), 60).ok());
  EXPECT_EQ(AuditCount(), before + 1);

  p.boot_policy_json.reset();
  auto updated = store_->PutPool(p, Op("drop policy"), 70);
  ASSERT_TRUE(updated.ok());
  EXPECT_EQ(updated->created_at, 50);
  EXPECT_EQ(updated->updated_at, 70);
  EXPECT_FALSE(updated->boot_policy_json.has_value());
  auto audit = Audit();
  ASSERT_EQ(audit.size(), before + 2);
  EXPECT_EQ(audit.back().action, "pool_put");
  EXPECT_EQ(audit.back().why, "drop policy");
  // The settings' content stays out of the audit log.
  EXPECT_EQ(audit.back().detail_json.find("vouch_client"), std::string::npos);

  auto got = store_->GetPool("infra");
  ASSERT_TRUE(got.ok());
  EXPECT_EQ(got->settings_json, "{\"vouch_client\":false}");
  auto all = store_->ListPools();
  ASSERT_TRUE(all.ok());
  ASSERT_EQ(all->size(), 3u);
  EXPECT_EQ((*all)[0].name, "infra");
  EXPECT_EQ((*all)[1].name, "masters");
}

TEST_F(StoreTest, PoolRefusals) {
  ExpectFailure(store_->GetPool("nope").status(), Status::Code::kNotFound, "pool_unknown");
  for (const char* bad : {"", "-x", "a/b", "a b", "x\n"}) {
    ExpectFailure(store_->PutPool(Pool{bad}, Op(), 1).status(), Status::Code::kInvalidArgument, "pool_invalid");
  }
  ExpectFailure(store_->PutPool(Pool{"ok"}, Actor{"", ""}, 1).status(), Status::Code::kInvalidArgument,
                "field_invalid");
}

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
  EXPECT_EQ(m->state, "enrolled");
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
  e.state = "joined";
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
  Enroll("node-1", "a", "pending");
  auto m = store_->Enroll(MakeEnrollment("node-1", "a"), Op(), false, 200);
  ASSERT_TRUE(m.ok());
  EXPECT_EQ(m->state, "enrolled");
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
  EXPECT_EQ(m->state, "revoked");
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
  EXPECT_EQ(replaced->state, "enrolled");
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

// --- Import ------------------------------------------------------------------

TEST_F(StoreTest, ImportAddsEveryRowAndReportsProgress) {
  std::vector<Enrollment> rows;
  for (int i = 0; i < 20; ++i) rows.push_back(MakeEnrollment("node-" + std::to_string(i), std::to_string(i)));
  std::vector<std::pair<size_t, size_t>> calls;
  auto n = store_->Import(rows, Op("vendor manifest"), 100, [&](size_t done, size_t total) {
    calls.emplace_back(done, total);
  });
  ASSERT_TRUE(n.ok()) << n.status().ToString();
  EXPECT_EQ(*n, 20u);
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
  ASSERT_TRUE(store_->Import(rows, Op(), 200).ok());
  EXPECT_EQ(AuditCount(), before + 1);  // the import row only
}

TEST_F(StoreTest, ImportIsAllOrNothing) {
  Enroll("existing", "x");
  const size_t audit_before = AuditCount();
  std::vector<Enrollment> rows;
  for (int i = 0; i < 5; ++i) rows.push_back(MakeEnrollment("node-" + std::to_string(i), std::to_string(i)));
  rows[2].pool = "nowhere";
  size_t progress_calls = 0;
  auto n = store_->Import(rows, Op(), 100, [&](size_t, size_t) { ++progress_calls; });
  ExpectFailure(n.status(), Status::Code::kNotFound, "pool_unknown");
  EXPECT_NE(n.status().message().find("row 2 (node-2)"), std::string::npos) << n.status().message();
  EXPECT_EQ(progress_calls, 2u);
  auto all = store_->ListMachines();
  ASSERT_TRUE(all.ok());
  ASSERT_EQ(all->size(), 1u);
  EXPECT_EQ((*all)[0].hostname, "existing");
  EXPECT_EQ(AuditCount(), audit_before);

  // A conflict with what is enrolled keeps its reason.
  rows[2] = MakeEnrollment("existing", "other");
  ExpectFailure(store_->Import(rows, Op(), 100).status(), Status::Code::kInvalidArgument, "ek_conflict");
  // So does a conflict inside the file itself.
  rows[2] = MakeEnrollment("node-9", "0");
  auto dup = store_->Import(rows, Op(), 100);
  ExpectFailure(dup.status(), Status::Code::kInvalidArgument, "ek_in_use");
  EXPECT_NE(dup.status().message().find("row 2 (node-9)"), std::string::npos);
  EXPECT_EQ(store_->ListMachines()->size(), 1u);

  // A throwing progress callback also leaves nothing behind.
  rows[2] = MakeEnrollment("node-2", "2");
  EXPECT_THROW(
      (void)store_->Import(rows, Op(), 100,
                           [](size_t done, size_t) {
                             if (done == 3) throw std::runtime_error("cancelled");
                           }),
      std::runtime_error);
  EXPECT_EQ(store_->ListMachines()->size(), 1u);
  ASSERT_TRUE(store_->Import(rows, Op(), 100).ok());
  EXPECT_EQ(store_->ListMachines()->size(), 6u);
}

// --- Machines ----------------------------------------------------------------

TEST_F(StoreTest, LookupsAndListing) {
  Enroll("node-b", "b");
  Enroll("node-a", "a", "pending");
  Enrollment e = MakeEnrollment("master-0", "m", "masters");
  ASSERT_TRUE(store_->Enroll(e, Op(), false, 1).ok());

  ExpectFailure(store_->GetMachine("ghost").status(), Status::Code::kNotFound, "hostname_unknown");
  ExpectFailure(store_->GetMachineById(9999).status(), Status::Code::kNotFound, "machine_unknown");
  ExpectFailure(store_->FindMachineByEkHash(B("nope")).status(), Status::Code::kNotFound, "machine_unknown");
  ExpectFailure(store_->FindMachineByEkHash(Bytes()).status(), Status::Code::kNotFound, "machine_unknown");

  auto all = store_->ListMachines();
  ASSERT_TRUE(all.ok());
  ASSERT_EQ(all->size(), 3u);
  EXPECT_EQ((*all)[0].hostname, "master-0");
  EXPECT_EQ((*all)[1].hostname, "node-a");
  EXPECT_EQ((*all)[1].addresses.size(), 2u);
  auto workers = store_->ListMachines({"workers", std::nullopt});
  ASSERT_TRUE(workers.ok());
  EXPECT_EQ(workers->size(), 2u);
  auto pending = store_->ListMachines({std::nullopt, "pending"});
  ASSERT_TRUE(pending.ok());
  ASSERT_EQ(pending->size(), 1u);
  EXPECT_EQ((*pending)[0].hostname, "node-a");
  EXPECT_EQ((*pending)[0].addresses.size(), 2u);
  auto none = store_->ListMachines({"masters", "pending"});
  ASSERT_TRUE(none.ok());
  EXPECT_TRUE(none->empty());
  ExpectFailure(store_->ListMachines({std::nullopt, "sleeping"}).status(), Status::Code::kInvalidArgument,
                "state_invalid");

  auto counts = store_->CountByState();
  ASSERT_TRUE(counts.ok());
  EXPECT_EQ(counts->size(), 6u);
  EXPECT_EQ(counts->at("enrolled"), 2);
  EXPECT_EQ(counts->at("pending"), 1);
  EXPECT_EQ(counts->at("joined"), 0);
}

// --- State changes -----------------------------------------------------------

TEST_F(StoreTest, ApproveMovesPendingToEnrolled) {
  Enroll("node-1", "a", "pending");
  auto m = store_->Approve("node-1", Op("checked serial"), 200);
  ASSERT_TRUE(m.ok());
  EXPECT_EQ(m->state, "enrolled");
  auto audit = Audit("node-1");
  ASSERT_EQ(audit.size(), 2u);
  EXPECT_EQ(audit[1].action, "approve");
  EXPECT_EQ(audit[1].from_state, "pending");
  EXPECT_EQ(audit[1].to_state, "enrolled");
  EXPECT_EQ(audit[1].why, "checked serial");

  ExpectFailure(store_->Approve("node-1", Op(), 300).status(), Status::Code::kInvalidArgument, "state_conflict");
  ExpectFailure(store_->Approve("ghost", Op(), 300).status(), Status::Code::kNotFound, "hostname_unknown");
  EXPECT_EQ(Audit("node-1").size(), 2u);
}

TEST_F(StoreTest, RevokeIsTerminalAndStopsTokens) {
  Machine m = Attested("node-1", "a");
  ASSERT_TRUE(store_->LookupToken(B("tokhash-a"), 1001).ok());
  auto r = store_->Revoke("node-1", Op("stolen"), 1100);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->state, "revoked");
  ExpectFailure(store_->LookupToken(B("tokhash-a"), 1101).status(), Status::Code::kVerificationFailed,
                "token_revoked");
  // Revocation wins over expiry too.
  ExpectFailure(store_->LookupToken(B("tokhash-a"), 99999).status(), Status::Code::kVerificationFailed,
                "token_revoked");
  const size_t before = AuditCount();
  auto again = store_->Revoke("node-1", Op(), 1200);  // a no-op
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->updated_at, 1100);
  EXPECT_EQ(AuditCount(), before);
  // Nothing but a reset leaves it.
  ExpectFailure(store_->Approve("node-1", Op(), 1300).status(), Status::Code::kInvalidArgument, "state_conflict");
  ExpectFailure(store_->Transition(m.id, {"attested"}, "provisioned", Op(), "config_fetched", 1300).status(),
                Status::Code::kInvalidArgument, "state_conflict");
  ExpectFailure(store_->RecordAttestationSuccess(Record(m, 1400), MakeToken(m, "b"), std::nullopt).status(),
                Status::Code::kInvalidArgument, "state_conflict");
  ExpectFailure(store_->LookupToken(B("tokhash-b"), 1401).status(), Status::Code::kNotFound, "token_unknown");
}

TEST_F(StoreTest, ResetClearsMarksCredentialsAndBaseline) {
  Machine m = Enroll("node-1", "a");
  auto attested = store_->RecordAttestationSuccess(Record(m, 1000, 5, 2, 9000), MakeToken(m, "a"),
                                                   std::string("{\"tofu\":1}"));
  ASSERT_TRUE(attested.ok());
  ASSERT_TRUE(store_->Transition(m.id, {"attested"}, "provisioned", Op(), "config_fetched", 1010).ok());
  auto joined = store_->RecordCertificate(Cert(m, "01"), Op(), 1020);
  ASSERT_TRUE(joined.ok()) << joined.status().ToString();
  EXPECT_EQ(joined->state, "joined");
  ASSERT_TRUE(store_->CreateSession(MakeSession(m, "s1", 1030)).ok());

  auto reset = store_->Reset("node-1", Op("reinstall"), 1100);
  ASSERT_TRUE(reset.ok()) << reset.status().ToString();
  EXPECT_EQ(reset->state, "enrolled");
  EXPECT_FALSE(reset->tofu_pcrs_json.has_value());
  EXPECT_FALSE(reset->client_cert_issued_at.has_value());
  EXPECT_EQ(reset->last_attested_at, 1000);  // history stays
  auto audit = Audit("node-1");
  EXPECT_EQ(audit.back().action, "reset");
  EXPECT_EQ(audit.back().from_state, "joined");
  EXPECT_EQ(audit.back().to_state, "enrolled");
  EXPECT_EQ(audit.back().why, "reinstall");
  EXPECT_NE(audit.back().detail_json.find("\"tokens_dropped\":1"), std::string::npos) << audit.back().detail_json;

  ExpectFailure(store_->LookupToken(B("tokhash-a"), 1101).status(), Status::Code::kNotFound, "token_unknown");
  ExpectFailure(store_->ConsumeSession("s1", 1101).status(), Status::Code::kNotFound, "session_unknown");
  // A new counter baseline (e.g. after a TPM clear).
  ExpectFailure(store_->LastSuccessfulAttestation(m.id).status(), Status::Code::kNotFound, "attestation_unknown");
  ExpectFailure(store_->Reset("node-1", Op(), 1300).status(), Status::Code::kInvalidArgument, "state_conflict");
  // A client certificate may be issued once more, after a new attestation.
  ASSERT_TRUE(store_->RecordAttestationSuccess(Record(m, 1350), MakeToken(m, "b", 1350), std::nullopt).ok());
  EXPECT_TRUE(store_->RecordCertificate(Cert(m, "02"), Op(), 1360).ok());
  Enroll("node-2", "b", "pending");
  ExpectFailure(store_->Reset("node-2", Op(), 1300).status(), Status::Code::kInvalidArgument, "state_conflict");
  ExpectFailure(store_->Reset("ghost", Op(), 1300).status(), Status::Code::kNotFound, "hostname_unknown");

  ASSERT_TRUE(store_->Revoke("node-2", Op(), 1400).ok());
  auto back = store_->Reset("node-2", Op("false alarm"), 1500);
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(back->state, "enrolled");
}

TEST_F(StoreTest, TransitionChecksTheStateInTheSameTransaction) {
  Machine m = Attested("node-1", "a");
  const size_t before = AuditCount();
  auto bad = store_->Transition(m.id, {"provisioned"}, "joined", Op(), "client_csr_signed", 1100);
  ExpectFailure(bad.status(), Status::Code::kInvalidArgument, "state_conflict");
  EXPECT_EQ(store_->GetMachineById(m.id)->state, "attested");
  EXPECT_EQ(AuditCount(), before);

  auto ok = store_->Transition(m.id, {"attested"}, "provisioned", Actor{"rackgated", "ignition fetch"},
                               "config_fetched", 1100);
  ASSERT_TRUE(ok.ok());
  EXPECT_EQ(ok->state, "provisioned");
  auto audit = Audit("node-1");
  EXPECT_EQ(audit.back().action, "config_fetched");
  EXPECT_EQ(audit.back().actor, "rackgated");
  EXPECT_EQ(AuditCount(), before + 1);

  // Already there and allowed: a no-op without an audit row.
  auto again = store_->Transition(m.id, {"attested", "provisioned"}, "provisioned", Op(), "config_fetched", 1200);
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(AuditCount(), before + 1);

  ExpectFailure(store_->Transition(m.id, {"attested"}, "flying", Op(), "x", 1).status(),
                Status::Code::kInvalidArgument, "state_invalid");
  ExpectFailure(store_->Transition(9999, {"attested"}, "joined", Op(), "x", 1).status(), Status::Code::kNotFound,
                "machine_unknown");
}

TEST_F(StoreTest, ClientCertificateMarkIsSetOnce) {
  Machine m = Attested("node-1", "a");
  auto marked = store_->RecordCertificate(Cert(m, "01"), Op(), 1100);
  ASSERT_TRUE(marked.ok());
  EXPECT_EQ(marked->client_cert_issued_at, 1100);
  EXPECT_EQ(marked->state, "joined");
  const size_t before = AuditCount();
  ExpectFailure(store_->RecordCertificate(Cert(m, "02"), Op(), 1200).status(), Status::Code::kInvalidArgument,
                "client_cert_already_issued");
  EXPECT_EQ(store_->GetMachineById(m.id)->client_cert_issued_at, 1100);
  EXPECT_EQ(AuditCount(), before);
  auto certs = store_->ListCertificates("node-1");
  ASSERT_TRUE(certs.ok());
  ASSERT_EQ(certs->size(), 1u);
  EXPECT_EQ((*certs)[0].serial, "01");
}

TEST_F(StoreTest, ALostClientCertificateIsFoundByItsKeyUntilReset) {
  Machine m = Attested("node-1", "a");
  IssuedCertificate c = Cert(m, "c1");
  c.certificate_pem = "-----BEGIN CERTIFICATE-----\nc1\n-----END CERTIFICATE-----\n";
  ASSERT_TRUE(store_->RecordCertificate(c, Op(), 1100).ok());
  auto found = store_->FindClientCertificate(m.id, B("spki-c1"));
  ASSERT_TRUE(found.ok()) << found.status().ToString();
  EXPECT_EQ(found->serial, "c1");
  EXPECT_EQ(found->certificate_pem, c.certificate_pem);
  ExpectFailure(store_->FindClientCertificate(m.id, B("spki-other")).status(), Status::Code::kNotFound,
                "certificate_unknown");
  ASSERT_TRUE(store_->Reset("node-1", Op(), 1200).ok());
  ExpectFailure(store_->FindClientCertificate(m.id, B("spki-c1")).status(), Status::Code::kNotFound,
                "certificate_unknown");
}

TEST_F(StoreTest, CertificatesAreRecordedListedAndAudited) {
  Machine m = Attested("node-1", "a");
  // A serving certificate needs a provisioned or joined machine.
  ExpectFailure(store_->RecordCertificate(Cert(m, "s0", "serving"), Op(), 1050).status(),
                Status::Code::kInvalidArgument, "state_conflict");
  ASSERT_TRUE(store_->RecordConfigServed(m.id, "abcd", "3.3.0", Op(), 1060).ok());
  ASSERT_TRUE(store_->RecordCertificate(Cert(m, "c1"), Op(), 1100).ok());
  IssuedCertificate serving = Cert(m, "s1", "serving");
  serving.tpm_resident = true;
  ASSERT_TRUE(store_->RecordCertificate(serving, Op(), 1200).ok());
  ExpectFailure(store_->RecordCertificate(Cert(m, "s1", "serving"), Op(), 1300).status(),
                Status::Code::kInvalidArgument, "field_invalid");
  IssuedCertificate odd = Cert(m, "x1", "other");
  ExpectFailure(store_->RecordCertificate(odd, Op(), 1300).status(), Status::Code::kInvalidArgument,
                "field_invalid");

  auto certs = store_->ListCertificates("");
  ASSERT_TRUE(certs.ok());
  ASSERT_EQ(certs->size(), 2u);
  EXPECT_EQ((*certs)[0].serial, "s1");  // newest first
  EXPECT_EQ((*certs)[0].kind, "serving");
  EXPECT_EQ((*certs)[0].hostname, "node-1");
  EXPECT_TRUE((*certs)[0].tpm_resident);
  EXPECT_EQ((*certs)[0].sans, (std::vector<std::string>{"node-1", "10.0.0.7"}));
  EXPECT_EQ((*certs)[0].issued_at, 1200);
  EXPECT_EQ((*certs)[1].serial, "c1");
  EXPECT_TRUE(store_->ListCertificates("node-2")->empty());

  auto audit = Audit("node-1");
  EXPECT_EQ(audit.back().action, "certificate_issued");
  EXPECT_NE(audit.back().detail_json.find("\"serial\":\"s1\""), std::string::npos) << audit.back().detail_json;
  // A revoked machine gets nothing recorded.
  ASSERT_TRUE(store_->Revoke("node-1", Op(), 1400).ok());
  ExpectFailure(store_->RecordCertificate(Cert(m, "s2", "serving"), Op(), 1500).status(),
                Status::Code::kInvalidArgument, "state_conflict");
}

TEST_F(StoreTest, MachineEventsAreAuditedWithoutChangingState) {
  Machine m = Attested("node-1", "a");
  ASSERT_TRUE(store_->AuditMachineEvent(m.id, "csr_refused", "{\"reason\":\"csr_usages\"}", Op(), 1100).ok());
  auto audit = Audit("node-1");
  EXPECT_EQ(audit.back().action, "csr_refused");
  EXPECT_EQ(audit.back().from_state, "attested");
  EXPECT_EQ(audit.back().to_state, "attested");
  EXPECT_EQ(audit.back().detail_json, "{\"reason\":\"csr_usages\"}");
  EXPECT_EQ(store_->GetMachineById(m.id)->state, "attested");
  ExpectFailure(store_->AuditMachineEvent(m.id, "x", "[]", Op(), 1100), Status::Code::kInvalidArgument,
                "field_invalid");
  ExpectFailure(store_->AuditMachineEvent(9999, "x", "{}", Op(), 1100), Status::Code::kNotFound, "machine_unknown");
}

TEST_F(StoreTest, ConfigServedMovesAttestedToProvisionedAndAuditsTheDigest) {
  Machine enrolled = Enroll("node-2", "b");
  ExpectFailure(store_->RecordConfigServed(enrolled.id, "abcd", "3.3.0", Op(), 1000).status(),
                Status::Code::kInvalidArgument, "state_conflict");
  Machine m = Attested("node-1", "a");
  auto first = store_->RecordConfigServed(m.id, "d1g3st", "3.3.0", Op(), 1100);
  ASSERT_TRUE(first.ok()) << first.status().ToString();
  EXPECT_EQ(first->state, "provisioned");
  auto again = store_->RecordConfigServed(m.id, "d1g3st", "3.1.0", Op(), 1200);
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->state, "provisioned");
  auto audit = Audit("node-1");
  ASSERT_GE(audit.size(), 2u);
  EXPECT_EQ(audit[audit.size() - 2].to_state, "provisioned");
  EXPECT_EQ(audit.back().action, "config_served");
  EXPECT_EQ(audit.back().from_state, "provisioned");
  EXPECT_EQ(audit.back().detail_json, "{\"sha256\":\"d1g3st\",\"version\":\"3.1.0\"}");
}

TEST_F(StoreTest, PoolTemplatesAreKeptByPutPoolAndAuditedByDigest) {
  auto set = store_->SetPoolTemplate("workers", kTemplatePublic, std::string("{\"ignition\":{}}"), "feed", Op(),
                                     20);
  ASSERT_TRUE(set.ok()) << set.status().ToString();
  EXPECT_EQ(set->public_template, "{\"ignition\":{}}");
  EXPECT_FALSE(set->attested_template.has_value());
  ASSERT_TRUE(store_->SetPoolTemplate("workers", kTemplateAttested, std::string("{\"a\":1}"), "beef", Op(), 21).ok());
  // PutPool changes settings, not templates.
  Pool p{"workers"};
  p.settings_json = "{\"x\":1}";
  auto put = store_->PutPool(p, Op(), 30);
  ASSERT_TRUE(put.ok());
  EXPECT_EQ(put->public_template, "{\"ignition\":{}}");
  EXPECT_EQ(put->attested_template, "{\"a\":1}");
  auto audit = Audit();
  bool found = false;
  for (const auto& a : audit) {
    if (a.action != "pool_template_put") continue;
    found = true;
    EXPECT_EQ(a.detail_json.find("ignition"), std::string::npos) << "template text leaked into the audit log";
  }
  EXPECT_TRUE(found);
  // Removing.
  auto removed = store_->SetPoolTemplate("workers", kTemplatePublic, std::nullopt, "", Op(), 40);
  ASSERT_TRUE(removed.ok());
  EXPECT_FALSE(removed->public_template.has_value());
  ExpectFailure(store_->SetPoolTemplate("workers", "secret", std::nullopt, "", Op(), 40).status(),
                Status::Code::kInvalidArgument, "field_invalid");
  ExpectFailure(store_->SetPoolTemplate("nope", kTemplatePublic, std::nullopt, "", Op(), 40).status(),
                Status::Code::kNotFound, "pool_unknown");
}

TEST_F(StoreTest, PoolTokensRotateWithOneGracePeriod) {
  Pool p{"edge"};
  ASSERT_TRUE(p.token_required);  // on by default for new pools
  auto created = store_->PutPool(p, Op(), 100, B("t1"));
  ASSERT_TRUE(created.ok());
  EXPECT_TRUE(created->token_required);
  auto tokens = store_->ValidPoolTokens("edge", 100);
  ASSERT_TRUE(tokens.ok());
  ASSERT_EQ(tokens->size(), 1u);
  EXPECT_EQ((*tokens)[0].hash, B("t1"));
  EXPECT_FALSE((*tokens)[0].expires_at.has_value());
  // A second put does not add a token when one exists.
  ASSERT_TRUE(store_->PutPool(p, Op(), 110, B("t-ignored")).ok());
  EXPECT_EQ(store_->ValidPoolTokens("edge", 110)->size(), 1u);

  // Rotate with a grace period: the old one lives until 500.
  ASSERT_TRUE(store_->RotatePoolToken("edge", B("t2"), 500, Op(), 200).ok());
  tokens = store_->ValidPoolTokens("edge", 499);
  ASSERT_EQ(tokens->size(), 2u);
  EXPECT_EQ((*tokens)[0].hash, B("t2"));
  EXPECT_EQ((*tokens)[1].hash, B("t1"));
  EXPECT_EQ((*tokens)[1].expires_at, 500);
  tokens = store_->ValidPoolTokens("edge", 500);
  ASSERT_EQ(tokens->size(), 1u);
  EXPECT_EQ((*tokens)[0].hash, B("t2"));
  auto both = store_->GetPoolWithTokens("edge", 499);
  ASSERT_TRUE(both.ok());
  EXPECT_EQ(both->first.name, "edge");
  EXPECT_EQ(both->second.size(), 2u);
  ExpectFailure(store_->GetPoolWithTokens("nope", 499).status(), Status::Code::kNotFound, "pool_unknown");

  // Rotating again drops t1 at once, whatever its grace, and t2 gets one.
  ASSERT_TRUE(store_->RotatePoolToken("edge", B("t3"), 900, Op(), 300).ok());
  tokens = store_->ValidPoolTokens("edge", 301);
  ASSERT_EQ(tokens->size(), 2u);
  EXPECT_EQ((*tokens)[0].hash, B("t3"));
  EXPECT_EQ((*tokens)[1].hash, B("t2"));
  // No grace: only the new one.
  ASSERT_TRUE(store_->RotatePoolToken("edge", B("t4"), 400, Op(), 400).ok());
  tokens = store_->ValidPoolTokens("edge", 401);
  ASSERT_EQ(tokens->size(), 1u);
  EXPECT_EQ((*tokens)[0].hash, B("t4"));

  ExpectFailure(store_->RotatePoolToken("edge", B("t4"), 9999, Op(), 500), Status::Code::kInvalidArgument,
                "field_invalid");
  ExpectFailure(store_->RotatePoolToken("nope", B("t9"), 0, Op(), 500), Status::Code::kNotFound, "pool_unknown");
  auto audit = Audit();
  EXPECT_EQ(audit.back().action, "token_rotate");
  // Switching the token off is a pool setting.
  p.token_required = false;
  auto off = store_->PutPool(p, Op(), 600);
  ASSERT_TRUE(off.ok());
  EXPECT_FALSE(off->token_required);
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

TEST_F(StoreTest, TokensKeepTheSessionNonceAndAk) {
  Machine m = Enroll("node-1", "a");
  Token t = MakeToken(m, "a");
  t.nonce = B("the-nonce");
  t.ak_public = B("the-ak");
  ASSERT_TRUE(store_->RecordAttestationSuccess(Record(m, 1000), t, std::nullopt).ok());
  auto bearer = store_->LookupToken(B("tokhash-a"), 1001);
  ASSERT_TRUE(bearer.ok());
  EXPECT_EQ(bearer->machine.hostname, "node-1");
  EXPECT_EQ(bearer->token.nonce, B("the-nonce"));
  EXPECT_EQ(bearer->token.ak_public, B("the-ak"));
  EXPECT_EQ(bearer->token.expires_at, 1900);
}

// --- Sessions and tokens -----------------------------------------------------

TEST_F(StoreTest, SessionsAreSingleUse) {
  Machine m = Enroll("node-1", "a");
  Session s = MakeSession(m, "sess-1", 1000, 120);
  ASSERT_TRUE(store_->CreateSession(s).ok());
  auto got = store_->ConsumeSession("sess-1", 1050);
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  EXPECT_EQ(got->machine_id, m.id);
  EXPECT_EQ(got->nonce, s.nonce);
  EXPECT_EQ(got->secret_hash, s.secret_hash);
  EXPECT_EQ(got->ak_public, s.ak_public);
  EXPECT_EQ(got->ak_name, s.ak_name);
  EXPECT_EQ(got->pcr_selection, s.pcr_selection);
  EXPECT_EQ(got->expires_at, 1120);
  EXPECT_EQ(got->used_at, 1050);
  ExpectFailure(store_->ConsumeSession("sess-1", 1060).status(), Status::Code::kVerificationFailed, "session_used");
  ExpectFailure(store_->ConsumeSession("nope", 1060).status(), Status::Code::kNotFound, "session_unknown");
  ExpectFailure(store_->ConsumeSession("", 1060).status(), Status::Code::kNotFound, "session_unknown");
  ExpectFailure(store_->ConsumeSession(std::string(500, 'x'), 1060).status(), Status::Code::kNotFound,
                "session_unknown");

  ASSERT_TRUE(store_->CreateSession(MakeSession(m, "sess-2", 1000, 120)).ok());
  // Expired at exactly expires_at, and stays so.
  ExpectFailure(store_->ConsumeSession("sess-2", 1120).status(), Status::Code::kVerificationFailed,
                "session_expired");
  ExpectFailure(store_->ConsumeSession("sess-2", 1500).status(), Status::Code::kVerificationFailed,
                "session_expired");
}

// Open = issued, unused and unexpired: what rackgate_sessions_in_flight shows.
TEST_F(StoreTest, CountOpenSessions) {
  Machine m = Enroll("node-1", "a");
  ASSERT_TRUE(store_->CreateSession(MakeSession(m, "s1", 1000, 120)).ok());
  ASSERT_TRUE(store_->CreateSession(MakeSession(m, "s2", 1000, 60)).ok());
  ASSERT_TRUE(store_->CreateSession(MakeSession(m, "s3", 1000, 120)).ok());
  EXPECT_EQ(*store_->CountOpenSessions(1010), 3);
  ASSERT_TRUE(store_->ConsumeSession("s1", 1020).ok());
  EXPECT_EQ(*store_->CountOpenSessions(1020), 2);
  EXPECT_EQ(*store_->CountOpenSessions(1060), 1);  // s2 expired unused
  EXPECT_EQ(*store_->CountOpenSessions(1120), 0);
}

TEST_F(StoreTest, SessionRefusals) {
  Machine m = Enroll("node-1", "a");
  ASSERT_TRUE(store_->CreateSession(MakeSession(m, "dup")).ok());
  ExpectFailure(store_->CreateSession(MakeSession(m, "dup")), Status::Code::kInvalidArgument, "field_invalid");
  Machine ghost;
  ghost.id = 4242;
  ExpectFailure(store_->CreateSession(MakeSession(ghost, "g")), Status::Code::kNotFound, "machine_unknown");
  Session s = MakeSession(m, "bad");
  s.nonce.clear();
  ExpectFailure(store_->CreateSession(s), Status::Code::kInvalidArgument, "field_invalid");
  ExpectFailure(store_->CreateSession(MakeSession(m, "has space")), Status::Code::kInvalidArgument, "field_invalid");
  ExpectFailure(store_->CreateSession(MakeSession(m, "neg", 1000, -1)), Status::Code::kInvalidArgument,
                "field_invalid");
}

TEST_F(StoreTest, TokenLookup) {
  Machine m = Attested("node-1", "a");  // token issued 1000, expires 1900
  auto found = store_->LookupToken(B("tokhash-a"), 1899);
  ASSERT_TRUE(found.ok());
  EXPECT_EQ(found->machine.hostname, "node-1");
  EXPECT_EQ(found->machine.state, "attested");
  ExpectFailure(store_->LookupToken(B("tokhash-a"), 1900).status(), Status::Code::kVerificationFailed,
                "token_expired");
  ExpectFailure(store_->LookupToken(B("tokhash-zz"), 1000).status(), Status::Code::kNotFound, "token_unknown");
  ExpectFailure(store_->LookupToken(Bytes(), 1000).status(), Status::Code::kNotFound, "token_unknown");
  ExpectFailure(store_->LookupToken(Bytes(100, 1), 1000).status(), Status::Code::kNotFound, "token_unknown");
}

TEST_F(StoreTest, PurgeExpiredIsBatched) {
  Machine m = Enroll("node-1", "a");
  for (int i = 0; i < 5; ++i) ASSERT_TRUE(store_->CreateSession(MakeSession(m, "old" + std::to_string(i), 0, 10)).ok());
  ASSERT_TRUE(store_->CreateSession(MakeSession(m, "fresh", 1000, 120)).ok());
  ASSERT_TRUE(store_->RecordAttestationSuccess(Record(m, 100), MakeToken(m, "old", 100, 10), std::nullopt).ok());
  ASSERT_TRUE(store_->RecordAttestationSuccess(Record(m, 1000), MakeToken(m, "new", 1000, 900), std::nullopt).ok());

  auto p = store_->PurgeExpired(1000, 3);
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(p->sessions, 3);
  EXPECT_EQ(p->tokens, 1);
  p = store_->PurgeExpired(1000, 3);
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(p->sessions, 2);
  EXPECT_EQ(p->tokens, 0);
  p = store_->PurgeExpired(1000, 3);
  EXPECT_EQ(p->sessions, 0);
  EXPECT_TRUE(store_->ConsumeSession("fresh", 1001).ok());
  EXPECT_TRUE(store_->LookupToken(B("tokhash-new"), 1001).ok());
  ExpectFailure(store_->LookupToken(B("tokhash-old"), 1001).status(), Status::Code::kNotFound, "token_unknown");
}

// --- Attestations ------------------------------------------------------------

TEST_F(StoreTest, AttestationSuccessMovesEnrolledToAttested) {
  Machine m = Enroll("node-1", "a");
  const std::string tofu = "{\"sha256\":{\"4\":\"ab\"}}";
  auto r = store_->RecordAttestationSuccess(Record(m, 1000, 7, 3, 123456), MakeToken(m, "a"), tofu);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->state, "attested");
  EXPECT_EQ(r->last_attested_at, 1000);
  EXPECT_EQ(r->tofu_pcrs_json, tofu);
  auto audit = Audit("node-1");
  ASSERT_EQ(audit.size(), 2u);
  EXPECT_EQ(audit[1].action, "attest");
  EXPECT_EQ(audit[1].from_state, "enrolled");
  EXPECT_EQ(audit[1].to_state, "attested");
  EXPECT_TRUE(store_->LookupToken(B("tokhash-a"), 1001).ok());

  auto last = store_->LastSuccessfulAttestation(m.id);
  ASSERT_TRUE(last.ok());
  EXPECT_EQ(last->verdict, "ok");
  EXPECT_EQ(last->hostname, "node-1");
  EXPECT_EQ(last->reset_count, 7u);
  EXPECT_EQ(last->restart_count, 3u);
  EXPECT_EQ(last->clock, 123456u);
  EXPECT_EQ(last->firmware_version, 0x0001000200030004u);
  EXPECT_EQ(last->pcrs_json, "{\"sha256\":{\"0\":\"00\"}}");
}

TEST_F(StoreTest, ReattestationKeepsTheState) {
  Machine m = Attested("node-1", "a");
  ASSERT_TRUE(store_->Transition(m.id, {"attested"}, "provisioned", Op(), "config_fetched", 1010).ok());
  const std::string tofu_before = "{}";
  auto r = store_->RecordAttestationSuccess(Record(m, 2000, 2), MakeToken(m, "b", 2000), std::nullopt);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->state, "provisioned");
  EXPECT_EQ(r->last_attested_at, 2000);
  auto audit = Audit("node-1");
  EXPECT_EQ(audit.back().action, "attest");
  EXPECT_EQ(audit.back().from_state, "provisioned");
  EXPECT_EQ(audit.back().to_state, "provisioned");
  auto last = store_->LastSuccessfulAttestation(m.id);
  ASSERT_TRUE(last.ok());
  EXPECT_EQ(last->reset_count, 2u);
}

TEST_F(StoreTest, TofuValuesAreKeptUnlessNewOnesAreGiven) {
  Machine m = Enroll("node-1", "a");
  ASSERT_TRUE(store_->RecordAttestationSuccess(Record(m, 1000), MakeToken(m, "a"), std::string("{\"v\":1}")).ok());
  auto r = store_->RecordAttestationSuccess(Record(m, 2000), MakeToken(m, "b"), std::nullopt);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->tofu_pcrs_json, "{\"v\":1}");
}

TEST_F(StoreTest, AttestationSuccessRefusals) {
  Machine pending = Enroll("node-1", "a", "pending");
  ExpectFailure(store_->RecordAttestationSuccess(Record(pending, 1000), MakeToken(pending, "a"), std::nullopt)
                    .status(),
                Status::Code::kInvalidArgument, "state_conflict");
  Machine m = Enroll("node-2", "b");
  Token other = MakeToken(m, "x");
  other.machine_id = pending.id;
  ExpectFailure(store_->RecordAttestationSuccess(Record(m, 1000), other, std::nullopt).status(),
                Status::Code::kInvalidArgument, "field_invalid");
  AttestationRecord refused = Record(m, 1000);
  refused.verdict = "refused";
  ExpectFailure(store_->RecordAttestationSuccess(refused, MakeToken(m, "y"), std::nullopt).status(),
                Status::Code::kInvalidArgument, "field_invalid");
  ASSERT_TRUE(store_->RecordAttestationSuccess(Record(m, 1000), MakeToken(m, "z"), std::nullopt).ok());
  // A token hash collision rolls the whole attestation back.
  const size_t before = AuditCount();
  ExpectFailure(store_->RecordAttestationSuccess(Record(m, 2000), MakeToken(m, "z"), std::nullopt).status(),
                Status::Code::kInvalidArgument, "field_invalid");
  EXPECT_EQ(AuditCount(), before);
  EXPECT_EQ(store_->GetMachineById(m.id)->last_attested_at, 1000);
  EXPECT_EQ(store_->GetMachine("node-1")->state, "pending");
  ExpectFailure(store_->LastSuccessfulAttestation(pending.id).status(), Status::Code::kNotFound,
                "attestation_unknown");
}

TEST_F(StoreTest, AttestationFailureNeverChangesState) {
  Machine m = Attested("node-1", "a");
  const size_t before = AuditCount();
  AttestationRecord r = Record(m, 1500);
  r.verdict = "refused";
  r.reason = "boot_policy_violation";
  r.reasons = {"secureboot:disabled", "kernel:unsigned"};
  ASSERT_TRUE(store_->RecordAttestationFailure(r).ok());
  EXPECT_EQ(store_->GetMachineById(m.id)->state, "attested");
  EXPECT_EQ(store_->GetMachineById(m.id)->last_attested_at, 1000);
  EXPECT_EQ(AuditCount(), before);
  auto failures = store_->RecentFailures(10);
  ASSERT_TRUE(failures.ok());
  ASSERT_EQ(failures->size(), 1u);
  EXPECT_EQ((*failures)[0].hostname, "node-1");
  EXPECT_EQ((*failures)[0].verdict, "refused");
  EXPECT_EQ((*failures)[0].reason, "boot_policy_violation");
  EXPECT_EQ((*failures)[0].reasons, r.reasons);
  // Failures are no baseline.
  auto last = store_->LastSuccessfulAttestation(m.id);
  ASSERT_TRUE(last.ok());
  EXPECT_EQ(last->at, 1000);

  r.machine_id = 9999;
  ExpectFailure(store_->RecordAttestationFailure(r), Status::Code::kNotFound, "machine_unknown");
  r.machine_id = m.id;
  r.verdict = "ok";
  ExpectFailure(store_->RecordAttestationFailure(r), Status::Code::kInvalidArgument, "field_invalid");
}

class BoundedFailuresTest : public StoreTest {
 protected:
  StoreOptions Options() override {
    StoreOptions o;
    o.max_failures_per_machine = 3;
    return o;
  }
};

TEST_F(BoundedFailuresTest, OnlyTheNewestFailuresPerMachineAreKept) {
  Machine a = Enroll("node-1", "a");
  Machine b = Enroll("node-2", "b");
  for (int i = 0; i < 10; ++i) {
    AttestationRecord r = Record(a, 1000 + i);
    r.verdict = "";  // filled in as refused
    r.reason = "activation_failed";
    ASSERT_TRUE(store_->RecordAttestationFailure(r).ok());
  }
  AttestationRecord rb = Record(b, 5000);
  rb.verdict = "refused";
  ASSERT_TRUE(store_->RecordAttestationFailure(rb).ok());
  auto failures = store_->RecentFailures(100);
  ASSERT_TRUE(failures.ok());
  ASSERT_EQ(failures->size(), 4u);
  EXPECT_EQ((*failures)[0].hostname, "node-2");
  EXPECT_EQ((*failures)[1].at, 1009);
  EXPECT_EQ((*failures)[3].at, 1007);
  EXPECT_EQ((*failures)[1].verdict, "refused");
}

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
  Machine m = Enroll("node-1", "a", "pending");
  std::vector<std::string> states = {"pending"};
  auto step = [&](Result<Machine> r) {
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    states.push_back(r->state);
  };
  step(store_->Approve("node-1", Op(), 200));
  step(store_->RecordAttestationSuccess(Record(m, 300), MakeToken(m, "1", 300), std::nullopt));
  step(store_->Transition(m.id, {"attested"}, "provisioned", Op(), "config_fetched", 400));
  step(store_->Transition(m.id, {"provisioned"}, "joined", Op(), "client_csr_signed", 500));
  step(store_->Reset("node-1", Op(), 600));
  step(store_->RecordAttestationSuccess(Record(m, 700), MakeToken(m, "2", 700), std::nullopt));
  step(store_->Revoke("node-1", Op(), 800));

  // Refusals in between leave no trace.
  (void)store_->Approve("node-1", Op(), 900);
  (void)store_->Transition(m.id, {"attested"}, "joined", Op(), "x", 900);
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

// --- Operations --------------------------------------------------------------

TEST_F(StoreTest, BackupIsAConsistentCopy) {
  Attested("node-1", "a");
  const std::string copy = dir_.File("backup.db");
  ASSERT_TRUE(store_->Backup(copy).ok());
  ExpectFailure(store_->Backup(copy), Status::Code::kInvalidArgument, "field_invalid");
  auto restored = MustOpen(copy);
  ASSERT_NE(restored, nullptr);
  auto m = restored->GetMachine("node-1");
  ASSERT_TRUE(m.ok());
  EXPECT_EQ(m->state, "attested");
  EXPECT_EQ(restored->ListAudit()->size(), Audit().size());
}

TEST_F(StoreTest, ALockHeldByAnotherProcessIsDbBusy) {
  Enroll("node-1", "a");
  store_.reset();
  StoreOptions o;
  o.busy_timeout_ms = 50;
  store_ = MustOpen(path_, o);
  ASSERT_NE(store_, nullptr);
  auto other = Connection::Open(path_, 0, false);
  ASSERT_TRUE(other.ok());
  (*other)->Exec("BEGIN IMMEDIATE");
  auto r = store_->Enroll(MakeEnrollment("node-2", "b"), Op(), false, 1);
  ExpectFailure(r.status(), Status::Code::kIoError, "db_busy");
  EXPECT_NE(r.status().message().find("locked"), std::string::npos) << r.status().message();
  ExpectFailure(store_->ConsumeSession("x", 1).status(), Status::Code::kIoError, "db_busy");
  // Readers are not blocked by a writer in WAL mode.
  EXPECT_TRUE(store_->GetMachine("node-1").ok());
  (*other)->Exec("ROLLBACK");
  EXPECT_TRUE(store_->Enroll(MakeEnrollment("node-2", "b"), Op(), false, 1).ok());
}

TEST(StoreHelpers, StatesAndAddressKinds) {
  for (const char* s : {"pending", "enrolled", "attested", "provisioned", "joined", "revoked"}) {
    EXPECT_TRUE(IsValidState(s)) << s;
  }
  EXPECT_FALSE(IsValidState("Enrolled"));
  EXPECT_FALSE(IsValidState(""));
  for (const char* k : {"InternalIP", "ExternalIP", "InternalDNS", "ExternalDNS", "Hostname"}) {
    EXPECT_TRUE(IsValidAddressKind(k)) << k;
  }
  EXPECT_FALSE(IsValidAddressKind("internalip"));
}

}  // namespace
}  // namespace rackgate::storage
