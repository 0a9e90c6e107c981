// The store tests' fixture: a fresh SQLite store with two pools, and
// ready-made machines, sessions, records, tokens and certificates.
#ifndef RACKGATE_STORAGE_TESTING_STORE_TEST_FIXTURE_H_
#define RACKGATE_STORAGE_TESTING_STORE_TEST_FIXTURE_H_

#ifndef RACKGATE_STORAGE_INTERNAL
#error "storage/testing/store_test_fixture.h is internal to storage/ tests"
#endif

#include <gtest/gtest.h>

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "storage/store.h"
#include "storage/testing/test_util.h"

namespace rackgate::storage::testing {

class StoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    store_ = MustOpen(path_, Options());
    ASSERT_NE(store_, nullptr);
    ASSERT_TRUE(store_->PutPool(Pool{"workers"}, Op(), 10).ok());
    ASSERT_TRUE(store_->PutPool(Pool{"masters"}, Op(), 10).ok());
  }
  virtual StoreOptions Options() { return {}; }

  Machine Enroll(const std::string& hostname, const std::string& tag, MachineState state = MachineState::kEnrolled) {
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

inline void ExpectFailure(const Status& s, Status::Code code, const std::string& reason) {
  EXPECT_FALSE(s.ok());
  EXPECT_EQ(s.code(), code) << s.ToString();
  EXPECT_EQ(s.reason(), reason) << s.ToString();
}

}  // namespace rackgate::storage::testing

#endif  // RACKGATE_STORAGE_TESTING_STORE_TEST_FIXTURE_H_
