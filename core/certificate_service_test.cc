// The admin API's certificate list (core/certificate_service.h) on every
// store: the certificates as shown, newest first, the hostname filter and
// the limit's clamp. The service refuses only with the store's refusals,
// which no store here makes.
#include "core/certificate_service.h"

#include <gtest/gtest.h>

#include <string>

#include "base/hex.h"
#include "core/testing/core_fixture.h"

namespace rackgate::core::testing {
namespace {

class CertificateServiceTest : public EveryStoreTest {
 protected:
  void SetUp() override {
    EveryStoreTest::SetUp();
    if (skip_) return;
    Enroll(first_, "node-1");
    Enroll(second_, "node-2");
    Attest(first_);
    Attest(second_);
    Record("node-1", "0a", 1);
    Record("node-2", "0b", 2);
  }
  void Record(const std::string& hostname, const std::string& serial, int64_t later) {
    storage::IssuedCertificate c;
    c.serial = serial;
    c.machine_id = store_->GetMachine(hostname)->id;
    c.kind = std::string(storage::kCertClient);
    c.subject = "O=system:nodes,CN=system:node:" + hostname;
    c.sans = {"DNS:" + hostname + ".example"};
    c.public_key_sha256 = Bytes(32, static_cast<uint8_t>(later));
    c.tpm_resident = later == 1;
    c.not_before = now_ + later;
    c.not_after = now_ + later + 86400;
    c.issued_at = now_ + later;
    c.certificate_pem = "-----BEGIN CERTIFICATE-----\n-----END CERTIFICATE-----\n";
    auto recorded = store_->RecordCertificate(c, {"rackgated", "test"}, now_ + later);
    ASSERT_TRUE(recorded.ok()) << recorded.status().ToString();
  }
  SoftMachine first_, second_;
};

TEST_P(CertificateServiceTest, ListsTheNewestFirstAsShown) {
  CertificateService service(store_.get());
  auto all = service.List(std::nullopt, 100);
  ASSERT_TRUE(all.ok()) << all.status().ToString();
  ASSERT_EQ(all->size(), 2u);
  EXPECT_EQ((*all)[0].serial, "0b");
  const wire::CertificateView& c = (*all)[1];
  EXPECT_EQ(c.serial, "0a");
  EXPECT_EQ(c.hostname, "node-1");
  EXPECT_EQ(c.kind, "client");
  EXPECT_EQ(c.subject, "O=system:nodes,CN=system:node:node-1");
  EXPECT_EQ(c.sans, std::vector<std::string>{"DNS:node-1.example"});
  EXPECT_EQ(c.public_key_sha256, hex::Encode(Bytes(32, 1)));
  EXPECT_TRUE(c.tpm_resident);
  EXPECT_EQ(c.not_before, now_ + 1);
  EXPECT_EQ(c.not_after, now_ + 1 + 86400);
  EXPECT_EQ(c.issued_at, now_ + 1);
}

TEST_P(CertificateServiceTest, FiltersByHostname) {
  CertificateService service(store_.get());
  auto one = service.List(std::string("node-2"), 100);
  ASSERT_TRUE(one.ok());
  ASSERT_EQ(one->size(), 1u);
  EXPECT_EQ(one->front().serial, "0b");
  auto none = service.List(std::string("node-9"), 100);
  ASSERT_TRUE(none.ok());
  EXPECT_TRUE(none->empty());
}

// Below 1 is 1 (SQLite would take LIMIT -1 as none), above the most is the
// most (an int64 never wraps into an int).
TEST_P(CertificateServiceTest, ClampsTheLimit) {
  CertificateService service(store_.get());
  for (int64_t limit : {int64_t{0}, int64_t{-1}}) {
    auto one = service.List(std::nullopt, limit);
    ASSERT_TRUE(one.ok());
    EXPECT_EQ(one->size(), 1u) << limit;
  }
  auto all = service.List(std::nullopt, (int64_t{1} << 32) + 1);
  ASSERT_TRUE(all.ok());
  EXPECT_EQ(all->size(), 2u);
}

RACKGATE_ON_EVERY_STORE(CertificateServiceTest);

}  // namespace
}  // namespace rackgate::core::testing
