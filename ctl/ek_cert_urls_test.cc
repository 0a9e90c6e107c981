// ek-cert urls and import's inputs: the vendors' URL derivations against
// URLs a real Intel and a real AMD certificate were fetched from, and the
// certificate out of each form an operator brings back.
#include "ctl/ek_cert_urls.h"

#include <gtest/gtest.h>
#include <openssl/pem.h>
#include <openssl/x509.h>

#include <string>

#include "attest/ek_nv.h"
#include "base/ossl.h"
#include "wire/codec.h"

namespace rackgate::ctl {
namespace {

using attest::Bytes;

Bytes Str(const std::string& s) { return Bytes(s.begin(), s.end()); }

// The EK public keys of the certificates go-attestation's attest/tpm_test.go
// (Apache-2.0) fetched from Intel's and AMD's services, and those URLs.
constexpr char kIntelEkPem[] = R"(-----BEGIN PUBLIC KEY-----
MIIBIjANBgkqhkiG9w0BAQEFAAOCAQ8AMIIBCgKCAQEAwyDi8kSoYBqs8+AdJsZl
JJk1Vi3h2hl+nn8HbEaWE8+2U+mOwsOG/B0TPyyMbMM4tzLwsgi9g4qHej5bvD4d
QIToNcfIkGocBbTS0w/b68HbrZUPprFlvUtqhkYDFGFkwMT1nUiQEe8fko3upukA
YfPTdeVkYnMVHvYiJSCYvhpKsB3AoSInxgn9rOsRWvQI1Gk6b0mRl3RpWwwSvBih
/3EgpzN7L7XxlR2Lt/CU1bVUwRyVI7MHKf5keH0KE7nmMEiNq039hmNKUnDscvzF
pE3GeajzKTjdgZfina6Dn1tMoPXeJ8lSLCPFThws5XhZUlEYvURwsYGA7veK5CZ7
zQIDAQAB
-----END PUBLIC KEY-----
)";
constexpr char kIntelUrl[] = "https://ekop.intel.com/ekcertservice/WVEG2rRwkQ7m3RpXlUphgo6Y2HLxl18h6ZZkkOAdnBE%3D";
constexpr char kAmdEkPem[] = R"(-----BEGIN PUBLIC KEY-----
MIIBIjANBgkqhkiG9w0BAQEFAAOCAQ8AMIIBCgKCAQEAo8ID3MRLZQWgq2WIK1qT
e2HQxzZgiDWn6Tzw6uQOoXI1iyO9pxIailRxll2NeK1lRVP/dEKCV+mGwv75T+y2
MmzpFhUY/O5RtEG8TiocDw6WkHRAJ9A9h1OMP+vD3mPClNoA9/ssB36/0ScmVtYR
0gRkL+cZkAT6qro7xz4eRKLt8KfX6OG/Y9kCfJsKDCtYbc4OavHSf11VgbBLtxm7
jSVE+pnO+x/om6qwACjZbU4qrq4PUbAxD1S9dJ2cZzKaYSsCA8wMIho0umYa3jGv
eptunXDcE993BlsUGjLNbXC4aWVEtgo9yu98gKqhYGFEx7Mtk5NYOvWoNvcUBe2L
2QIDAQAB
-----END PUBLIC KEY-----
)";
constexpr char kAmdUrl[] = "https://ftpm.amd.com/pki/aia/D027B3CE6A9B6B56846D2B9935884A88";

TEST(EkCertUrls, IntelRsaMatchesTheUrlOfARealCertificate) {
  auto key = EkKeyFromFile(Str(kIntelEkPem));
  ASSERT_TRUE(key.ok()) << key.status().ToString();
  auto url = IntelEkCertUrl(*key);
  ASSERT_TRUE(url.ok()) << url.status().ToString();
  EXPECT_EQ(*url, kIntelUrl);
  EXPECT_EQ(key->ek_hash.size(), 64u);
}

TEST(EkCertUrls, AmdRsaMatchesTheUrlOfARealCertificate) {
  auto key = EkKeyFromFile(Str(kAmdEkPem));
  ASSERT_TRUE(key.ok()) << key.status().ToString();
  EXPECT_EQ(AmdEkCertUrl(*key), kAmdUrl);
}

// ECC: tpm2_getekcertificate's derivations (x || y; 00 00 44 44 || x || y),
// the expected values computed apart with Python's hashlib.
TEST(EkCertUrls, EccDerivations) {
  EkKey k;
  k.type = attest::kAlgEcc;
  for (int i = 1; i <= 32; ++i) k.ecc_x.push_back(static_cast<uint8_t>(i));
  for (int i = 33; i <= 64; ++i) k.ecc_y.push_back(static_cast<uint8_t>(i));
  EXPECT_EQ(*IntelEkCertUrl(k), std::string(kIntelEkServiceBase) + "IKfshGhPf-Ekyzcn0ElzSrC32i9S_K-875iez9kehws%3D");
  EXPECT_EQ(AmdEkCertUrl(k), std::string(kAmdEkServiceBase) + "D2EEAEC844768EED7597D201477AE2C9");
}

// tpm2-tools' test/integration/tests/getekcertificate.sh "Sample ECC ek
// public" (BSD-3-Clause), its Intel URL as that test derives it.
TEST(EkCertUrls, IntelEccSampleOfTpm2Tools) {
  EkKey k;
  k.type = attest::kAlgEcc;
  const std::string x = "6d8e7630ee5d11e566e80299bfb9e43cec8c44f70bc8ad81b50f690a3deb7498";
  const std::string y = "21a536c8fef7482313d7f4517f11c9f2b4cd424cbc8fe9094b89566851fe0853";
  for (size_t i = 0; i < 64; i += 2) {
    k.ecc_x.push_back(static_cast<uint8_t>(std::stoi(x.substr(i, 2), nullptr, 16)));
    k.ecc_y.push_back(static_cast<uint8_t>(std::stoi(y.substr(i, 2), nullptr, 16)));
  }
  EXPECT_EQ(*IntelEkCertUrl(k), "https://ekop.intel.com/ekcertservice/eXT1X6I9wqIMOXll9LoXf0adQelkeaBccmoYU8Kth8o%3D");
}

TEST(EkCertUrls, IntelRefusesANonDefaultExponent) {
  auto key = EkKeyFromFile(Str(kIntelEkPem));
  ASSERT_TRUE(key.ok());
  key->rsa_exponent = 3;
  EXPECT_EQ(IntelEkCertUrl(*key).status().reason(), "ek_url_unsupported");
}

// The same key as a TPM2B_PUBLIC (what `tpm2_createek -f tss` writes) gives
// the same URLs and the same identity as the PEM.
TEST(EkCertUrls, Tpm2bPublicAndPemAgree) {
  auto pem = EkKeyFromFile(Str(kIntelEkPem));
  ASSERT_TRUE(pem.ok());
  // TPMT_PUBLIC: RSA, sha256, EK attributes, empty policy, AES-128-CFB,
  // no scheme, 2048 bits, exponent 0 (the default), the modulus.
  Bytes t = {0x00, 0x01, 0x00, 0x0b, 0x00, 0x03, 0x00, 0xb2, 0x00, 0x00, 0x00, 0x06, 0x00, 0x80, 0x00, 0x43,
             0x00, 0x10, 0x08, 0x00, 0x00, 0x00, 0x00, 0x00, 0x01, 0x00};
  t.insert(t.end(), pem->rsa_modulus.begin(), pem->rsa_modulus.end());
  Bytes tpm2b = {static_cast<uint8_t>(t.size() >> 8), static_cast<uint8_t>(t.size())};
  tpm2b.insert(tpm2b.end(), t.begin(), t.end());
  auto key = EkKeyFromFile(tpm2b);
  ASSERT_TRUE(key.ok()) << key.status().ToString();
  EXPECT_EQ(*IntelEkCertUrl(*key), kIntelUrl);
  EXPECT_EQ(key->ek_hash, pem->ek_hash);
}

TEST(EkCertUrls, NotAKeyIsRefused) {
  EXPECT_EQ(EkKeyFromFile(Str("hello")).status().reason(), "ek_public_malformed");
  EXPECT_EQ(EkKeyFromFile(Bytes{}).status().reason(), "ek_public_malformed");
  EXPECT_EQ(EkKeyFromFile(Str("-----BEGIN PUBLIC KEY-----\nAAAA\n-----END PUBLIC KEY-----\n")).status().reason(),
            "ek_public_malformed");
}

// A small self-signed certificate, DER.
Bytes TestCertificate() {
  ossl::PkeyPtr key(EVP_EC_gen("P-256"));
  ossl::X509Ptr x(X509_new());
  X509_set_version(x.get(), X509_VERSION_3);
  ASN1_INTEGER_set(X509_get_serialNumber(x.get()), 7);
  X509_gmtime_adj(X509_getm_notBefore(x.get()), 0);
  X509_gmtime_adj(X509_getm_notAfter(x.get()), 3600);
  X509_set_pubkey(x.get(), key.get());
  X509_sign(x.get(), key.get(), EVP_sha256());
  unsigned char* p = nullptr;
  const int n = i2d_X509(x.get(), &p);
  Bytes der(p, p + n);
  OPENSSL_free(p);
  return der;
}

std::string Pem(const Bytes& der) {
  return "-----BEGIN CERTIFICATE-----\n" + wire::Base64Encode(der) + "\n-----END CERTIFICATE-----\n";
}

// Intel's answer: {"pubhash": ..., "certificate": base64url, '=' escaped}.
std::string IntelAnswer(const Bytes& der) {
  std::string b64 = wire::Base64Encode(der), out;
  for (char c : b64) out += c == '+' ? std::string("-") : c == '/' ? std::string("_") : c == '=' ? std::string("%3D") : std::string(1, c);
  return "{\"pubhash\":\"WVEG2rRwkQ7m3RpXlUphgo6Y2HLxl18h6ZZkkOAdnBE%3D\",\"certificate\":\"" + out + "\"}";
}

TEST(EkCertFile, EveryFormGivesTheSameDer) {
  const Bytes der = TestCertificate();
  EXPECT_EQ(*EkCertificateFromFile(der), der);
  EXPECT_EQ(*EkCertificateFromFile(Str(Pem(der))), der);
  auto from_json = EkCertificateFromFile(Str(IntelAnswer(der)));
  ASSERT_TRUE(from_json.ok()) << from_json.status().ToString();
  EXPECT_EQ(*from_json, der);
  // The NV form: the stored-certificate header, and padding.
  Bytes nv = {0x10, 0x01, 0x00, static_cast<uint8_t>(der.size() >> 8), static_cast<uint8_t>(der.size())};
  nv.insert(nv.end(), der.begin(), der.end());
  nv.insert(nv.end(), 64, 0xff);
  auto from_nv = EkCertificateFromFile(nv);
  ASSERT_TRUE(from_nv.ok()) << from_nv.status().ToString();
  EXPECT_EQ(*from_nv, der);
}

TEST(EkCertFile, WhatIsNoCertificateIsRefused) {
  const Bytes der = TestCertificate();
  Bytes trailing = der;
  trailing.insert(trailing.end(), {0x42, 0x43});  // not one repeated value: not NV padding
  EXPECT_EQ(EkCertificateFromFile(trailing).status().reason(), "ek_cert_malformed");
  EXPECT_EQ(EkCertificateFromFile(Str("{\"pubhash\": \"x\"}")).status().reason(), "ek_cert_malformed");
  EXPECT_EQ(EkCertificateFromFile(Str("{\"certificate\": \"%zz\"}")).status().reason(), "ek_cert_malformed");
  EXPECT_EQ(EkCertificateFromFile(Str("{\"certificate\": \"MII%4\"}")).status().reason(), "ek_cert_malformed");
  EXPECT_EQ(EkCertificateFromFile(Str("{\"certificate\": \"MII%\"}")).status().reason(), "ek_cert_malformed");
  EXPECT_EQ(EkCertificateFromFile(Str("{\"certificate\": \"!!!\"}")).status().reason(), "ek_cert_malformed");
  EXPECT_EQ(EkCertificateFromFile(Str("{not json")).status().reason(), "ek_cert_malformed");
  EXPECT_EQ(EkCertificateFromFile(Str("-----BEGIN PUBLIC KEY-----\nAAAA\n-----END PUBLIC KEY-----\n")).status().reason(),
            "ek_cert_malformed");
  // Truncation: every prefix of the DER is refused, never read past.
  for (size_t n = 0; n < der.size(); ++n) {
    EXPECT_FALSE(EkCertificateFromFile(std::span<const uint8_t>(der).first(n)).ok()) << n;
  }
}

}  // namespace
}  // namespace rackgate::ctl
