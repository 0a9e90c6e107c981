#include "attest/ek_identity.h"

#include <gtest/gtest.h>
#include <openssl/crypto.h>
#include <openssl/x509.h>

#include <cstdio>

#include "attest/digest.h"
#include "attest/keys.h"
#include "attest/testing/test_util.h"
#include "base/hex.h"

namespace rackgate::attest {
namespace {

using testing::ReadFixture;
using testing::SourcePath;

// One EK, two forms (public area from tpm2_createek, certificate from
// swtpm_setup): one identity.
TEST(EkKeyHash, PublicAreaAndCertificateAgree) {
  for (auto [pub, cert] : {std::pair{"ek-rsa2048.pub", "ek-rsa2048.der"},
                           std::pair{"ek-ecc384.pub", "ek-secp384r1.der"}}) {
    auto tpm = ParseTpm2bPublic(ReadFixture(std::string("attest/testdata/ek/") + pub));
    ASSERT_TRUE(tpm.ok()) << tpm.status().ToString();
    auto a = EkKeyHash(*tpm);
    auto b = EkKeyHashFromCertificate(ReadFixture(std::string("attest/testdata/ek/") + cert));
    ASSERT_TRUE(a.ok() && b.ok());
    EXPECT_EQ(*a, *b) << pub;
    EXPECT_EQ(a->size(), 32u);
  }
}

// The documented openssl pipeline prints the same hash.
TEST(EkKeyHash, MatchesOpensslPipeline) {
  const std::string cert = SourcePath("attest/testdata/ek/ek-rsa2048.der");
  const std::string cmd = "openssl x509 -in '" + cert +
                          "' -inform DER -pubkey -noout | openssl pkey -pubin -outform DER | "
                          "openssl dgst -sha256 -r 2>/dev/null";
  FILE* p = popen(cmd.c_str(), "r");
  ASSERT_NE(p, nullptr);
  char buf[128] = {};
  size_t n = fread(buf, 1, sizeof(buf) - 1, p);
  int rc = pclose(p);
  if (rc != 0 || n < 64) GTEST_SKIP() << "openssl not available";
  auto h = EkKeyHashFromCertificate(ReadFixture("attest/testdata/ek/ek-rsa2048.der"));
  ASSERT_TRUE(h.ok());
  EXPECT_EQ(hex::Encode(*h), std::string(buf, 64));
}

// RSA-3072 (H-6) and P-521 (H-4) EK public areas from swtpm: the hash is the
// one `tpm2_readpublic -f pem | openssl pkey -pubin -outform DER | sha256sum`
// printed (attest/testdata/ek/README.md), and for RSA-3072 the swtpm
// certificate of the same EK hashes the same (issue 41).
TEST(EkKeyHash, HighRangeRsa3072AndP521MatchOpenssl) {
  auto rsa = ParseTpm2bPublic(ReadFixture("attest/testdata/ek/ek-rsa3072.pub"));
  ASSERT_TRUE(rsa.ok()) << rsa.status().ToString();
  auto rsa_hash = EkKeyHash(*rsa);
  ASSERT_TRUE(rsa_hash.ok()) << rsa_hash.status().ToString();
  EXPECT_EQ(hex::Encode(*rsa_hash), "41b2cca4780b04234492d425ea10b753ba313b2ffa1e9fe7f80b67b451020c67");
  auto cert_hash = EkKeyHashFromCertificate(ReadFixture("attest/testdata/ek/ek-rsa3072.der"));
  ASSERT_TRUE(cert_hash.ok());
  EXPECT_EQ(*cert_hash, *rsa_hash);

  auto ecc = ParseTpm2bPublic(ReadFixture("attest/testdata/ek/ek-ecc521.pub"));
  ASSERT_TRUE(ecc.ok()) << ecc.status().ToString();
  EXPECT_EQ(ecc->ecc_curve, kEccNistP521);
  auto ecc_hash = EkKeyHash(*ecc);
  ASSERT_TRUE(ecc_hash.ok()) << ecc_hash.status().ToString();
  EXPECT_EQ(hex::Encode(*ecc_hash), "58219991c9d1fe8435b6cb3f8f213259a31b6c1cde3597c4d65d430092397fb2");
}

TEST(EkKeyHash, RefusesGarbage) {
  auto der = ReadFixture("attest/testdata/ek/ek-rsa2048.der");
  der.push_back(0);
  EXPECT_EQ(EkKeyHashFromCertificate(der).status().reason(), "ek_cert_malformed");
  EXPECT_FALSE(EkKeyHashFromCertificate({}).ok());
}

// The identity is the hash of exactly the SPKI that other modules compare
// keys with, so the two can never drift apart.
TEST(SubjectPublicKeyInfo, IsWhatTheIdentityHashes) {
  for (const char* pub : {"ek-rsa2048.pub", "ek-ecc384.pub"}) {
    auto tpm = ParseTpm2bPublic(ReadFixture(std::string("attest/testdata/ek/") + pub));
    ASSERT_TRUE(tpm.ok()) << tpm.status().ToString();
    auto spki = SubjectPublicKeyInfoFromTpmPublic(*tpm);
    auto id = EkKeyHash(*tpm);
    ASSERT_TRUE(spki.ok() && id.ok());
    ASSERT_FALSE(spki->empty());
    EXPECT_EQ(spki->front(), 0x30) << "a DER SEQUENCE";
    EXPECT_EQ(Hash(kAlgSha256, {std::span<const uint8_t>(*spki)}), *id) << pub;
  }
}

// The SPKI is put together from the public area without OpenSSL's key
// encoders; it must be byte for byte what i2d_PUBKEY makes of the same key:
// RSA-2048 (EK), P-256 (AK), P-384 (EK), RSA (AK).
TEST(SubjectPublicKeyInfo, IsWhatOpensslEncodes) {
  for (const char* pub : {"ek/ek-rsa2048.pub", "tpm/ak_ecc.pub", "ek/ek-ecc384.pub", "tpm/ak_rsa.pub"}) {
    auto tpm = ParseTpm2bPublic(ReadFixture(std::string("attest/testdata/") + pub));
    ASSERT_TRUE(tpm.ok()) << pub << ": " << tpm.status().ToString();
    auto spki = SubjectPublicKeyInfoFromTpmPublic(*tpm);
    auto pkey = PkeyFromTpmPublic(*tpm);
    ASSERT_TRUE(spki.ok() && pkey.ok()) << pub;
    unsigned char* der = nullptr;
    const int n = i2d_PUBKEY(pkey->get(), &der);
    ASSERT_GT(n, 0);
    EXPECT_EQ(*spki, Bytes(der, der + n)) << pub;
    OPENSSL_free(der);
  }
}

// A point off the curve has no identity.
TEST(SubjectPublicKeyInfo, RefusesAPointOffTheCurve) {
  auto tpm = ParseTpm2bPublic(ReadFixture("attest/testdata/tpm/ak_ecc.pub"));
  ASSERT_TRUE(tpm.ok());
  tpm->ecc_y.back() ^= 1;
  EXPECT_EQ(SubjectPublicKeyInfoFromTpmPublic(*tpm).status().reason(), "key_invalid");
  EXPECT_FALSE(EkKeyHash(*tpm).ok());
}

}  // namespace
}  // namespace rackgate::attest
