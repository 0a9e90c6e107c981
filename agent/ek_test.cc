#include "agent/ek.h"

#include <gtest/gtest.h>

#include "attest/test_util.h"

namespace rackgate::agent {
namespace {

TEST(SplitDerCertificates, StopsAtPaddingAndAtTheLimit) {
  const Bytes rsa = testing::ReadFixture("attest/testdata/ek/ek-rsa2048.der");
  const Bytes ecc = testing::ReadFixture("attest/testdata/ek/ek-secp384r1.der");
  Bytes padded = rsa;
  padded.resize(rsa.size() + 200, 0xff);  // an NV index larger than its certificate
  auto one = SplitDerCertificates(padded, 4);
  ASSERT_EQ(one.size(), 1u);
  EXPECT_EQ(one[0], rsa);

  Bytes both = rsa;
  both.insert(both.end(), ecc.begin(), ecc.end());
  EXPECT_EQ(SplitDerCertificates(both, 4).size(), 2u);
  EXPECT_EQ(SplitDerCertificates(both, 1).size(), 1u);
  EXPECT_TRUE(SplitDerCertificates(Bytes(rsa.begin(), rsa.end() - 1), 4).empty());  // truncated
  EXPECT_TRUE(SplitDerCertificates({}, 4).empty());
}

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
