#include "agent/ek.h"

#include <gtest/gtest.h>

#include "attest/test_util.h"

namespace rackgate::agent {
namespace {

TEST(CheckEkMatchesCertificate, SameKeyOnly) {
  const Bytes rsa_pub = testing::ReadFixture("attest/testdata/ek/ek-rsa2048.pub");
  const Bytes rsa_der = testing::ReadFixture("attest/testdata/ek/ek-rsa2048.der");
  const Bytes ecc_pub = testing::ReadFixture("attest/testdata/ek/ek-ecc384.pub");
  const Bytes ecc_der = testing::ReadFixture("attest/testdata/ek/ek-secp384r1.der");
  EXPECT_TRUE(CheckEkMatchesCertificate(rsa_pub, rsa_der).ok());
  EXPECT_TRUE(CheckEkMatchesCertificate(ecc_pub, ecc_der).ok());
  const Status s = CheckEkMatchesCertificate(rsa_pub, ecc_der);
  EXPECT_EQ(s.code(), Status::Code::kTpmError);
  EXPECT_EQ(s.reason(), "ek_template_mismatch");
  EXPECT_EQ(CheckEkMatchesCertificate(rsa_pub, Bytes{1, 2, 3}).reason(), "ek_cert_malformed");
}

}  // namespace
}  // namespace rackgate::agent
