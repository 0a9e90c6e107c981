// Tests for the table of unknown EKs that knocked: counting, LRU bound, the
// certificate's names, the time window.
#include "core/unknown_eks.h"

#include <gtest/gtest.h>
#include <openssl/evp.h>
#include <openssl/x509.h>

#include <memory>
#include <string>
#include <vector>

namespace rackgate::core {
namespace {

// A self-signed certificate's DER with the given issuer/subject CN.
std::vector<uint8_t> CertDer(const std::string& cn) {
  std::unique_ptr<EVP_PKEY, decltype(&EVP_PKEY_free)> key(EVP_EC_gen("P-256"), &EVP_PKEY_free);
  std::unique_ptr<X509, decltype(&X509_free)> x(X509_new(), &X509_free);
  X509_set_version(x.get(), 2);
  ASN1_INTEGER_set(X509_get_serialNumber(x.get()), 7);
  X509_gmtime_adj(X509_getm_notBefore(x.get()), 0);
  X509_gmtime_adj(X509_getm_notAfter(x.get()), 3600);
  X509_NAME* name = X509_get_subject_name(x.get());
  X509_NAME_add_entry_by_txt(name, "O", MBSTRING_ASC, reinterpret_cast<const unsigned char*>("Vendor"), -1, -1, 0);
  X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_ASC, reinterpret_cast<const unsigned char*>(cn.c_str()), -1, -1, 0);
  X509_set_issuer_name(x.get(), name);
  X509_set_pubkey(x.get(), key.get());
  X509_sign(x.get(), key.get(), EVP_sha256());
  unsigned char* der = nullptr;
  const int n = i2d_X509(x.get(), &der);
  std::vector<uint8_t> out(der, der + n);
  OPENSSL_free(der);
  return out;
}

TEST(UnknownEkTable, CountsFirstAndLastSeenAndLatestAddress) {
  UnknownEkTable t;
  t.Record("aa", "192.0.2.1", "machine_not_enrolled", std::nullopt, 100);
  t.Record("aa", "192.0.2.2", "machine_not_enrolled", std::nullopt, 160);
  auto seen = t.SeenSince(0);
  ASSERT_EQ(seen.size(), 1u);
  EXPECT_EQ(seen[0].ek_hash, "aa");
  EXPECT_EQ(seen[0].first_seen, 100);
  EXPECT_EQ(seen[0].last_seen, 160);
  EXPECT_EQ(seen[0].count, 2u);
  EXPECT_EQ(seen[0].address, "192.0.2.2");
  EXPECT_EQ(seen[0].cert_issuer, "");
}

TEST(UnknownEkTable, KeepsTheCertificatesNamesAndIgnoresGarbage) {
  UnknownEkTable t;
  const std::vector<uint8_t> der = CertDer("EK Root 1");
  t.Record("bb", "192.0.2.1", "machine_not_enrolled", std::span<const uint8_t>(der), 10);
  const std::vector<uint8_t> junk = {0x30, 0x03, 0x01, 0x02};
  t.Record("bb", "192.0.2.1", "machine_not_enrolled", std::span<const uint8_t>(junk), 11);
  auto seen = t.SeenSince(0);
  ASSERT_EQ(seen.size(), 1u);
  EXPECT_EQ(seen[0].cert_issuer, "CN=EK Root 1,O=Vendor");
  EXPECT_EQ(seen[0].cert_subject, "CN=EK Root 1,O=Vendor");
  // A name longer than the bound is cut.
  const std::vector<uint8_t> big = CertDer(std::string(60, 'x') + "," + std::string(60, 'y'));
  UnknownEkTable u;
  u.Record("cc", "a", "r", std::span<const uint8_t>(big), 1);
  EXPECT_LE(u.SeenSince(0)[0].cert_subject.size(), UnknownEkTable::kMaxNameBytes);
}

TEST(UnknownEkTable, BoundedLeastRecentlySeenGoesFirst) {
  UnknownEkTable t(3);
  t.Record("e1", "a", "r", std::nullopt, 1);
  t.Record("e2", "a", "r", std::nullopt, 2);
  t.Record("e3", "a", "r", std::nullopt, 3);
  t.Record("e1", "a", "r", std::nullopt, 4);  // e1 is recent again
  t.Record("e4", "a", "r", std::nullopt, 5);  // e2 goes
  EXPECT_EQ(t.size(), 3u);
  auto seen = t.SeenSince(0);
  ASSERT_EQ(seen.size(), 3u);
  EXPECT_EQ(seen[0].ek_hash, "e4");
  EXPECT_EQ(seen[1].ek_hash, "e1");
  EXPECT_EQ(seen[2].ek_hash, "e3");
  for (int i = 0; i < 1000; ++i) t.Record("f" + std::to_string(i), "a", "r", std::nullopt, 10 + i);
  EXPECT_EQ(t.size(), 3u);
}

TEST(UnknownEkTable, SeenSinceIsAWindow) {
  UnknownEkTable t;
  t.Record("old", "a", "r", std::nullopt, 100);
  t.Record("new", "a", "r", std::nullopt, 5000);
  auto seen = t.SeenSince(5000 - 3600);
  ASSERT_EQ(seen.size(), 1u);
  EXPECT_EQ(seen[0].ek_hash, "new");
}

}  // namespace
}  // namespace rackgate::core
