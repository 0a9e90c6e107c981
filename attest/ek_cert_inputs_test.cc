// Tests of EK certificate validation against hostile and real inputs:
// truncated and malformed bytes, the EK public area against its certificate,
// trust store loading, and real swtpm EK certificates from attest/testdata/ek.
#include "attest/ek_cert.h"

#include <gtest/gtest.h>
#include <openssl/ec.h>
#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/rsa.h>
#include <openssl/x509v3.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "base/ossl.h"
#include "attest/testing/test_util.h"
#include "attest/testing/ek_cert_test_pki.h"

namespace rackgate::attest {
namespace {

using ek_testing::kDay;
using ek_testing::kNow;
using ek_testing::GenEc;
using ek_testing::CertSpec;
using ek_testing::MakeCert;
using ek_testing::Der;
using ek_testing::Pem;
using ek_testing::Concat;
using ek_testing::Str;
using ek_testing::EkCertTest;
using ek_testing::ReadFixture;

// --- untrusted input --------------------------------------------------------

TEST_F(EkCertTest, EveryTruncationFailsCleanly) {
  const Bytes der = pki().Ek(CertSpec{});
  const EkTrustStore store = pki().Store();
  for (size_t n = 0; n < der.size(); ++n) {
    const std::span<const uint8_t> prefix(der.data(), n);
    const Status parsed = ParseEkCertificate(prefix).status();
    ASSERT_EQ(parsed.reason(), std::string(kEkCertMalformed)) << "prefix " << n;
    ASSERT_EQ(parsed.code(), Status::Code::kInvalidArgument) << "prefix " << n;
    ASSERT_EQ(VerifyEkCertificate(store, prefix, kNow).status().reason(),
              std::string(kEkCertMalformed))
        << "prefix " << n;
    ASSERT_EQ(ERR_peek_error(), 0u) << "OpenSSL error left queued, prefix " << n;
  }
  EXPECT_TRUE(ParseEkCertificate(der).ok());
}

TEST_F(EkCertTest, RefusesMalformedInput) {
  ossl::X509Ptr x =
      MakeCert(CertSpec{}, pki().ek_rsa_key.get(), pki().intermediate.get(), pki().int_key.get());
  const Bytes der = Der(x.get());
  const Bytes pem = Pem(x.get());
  const std::vector<std::pair<std::string, Bytes>> cases = {
      {"empty", {}},
      {"trailing bytes after DER (not NV padding)", Concat(der, {0x01, 0x02})},
      {"padding, then a byte", Concat(der, {0xFF, 0xFF, 0x02})},
      {"trailing DER after DER", Concat(der, der)},
      {"two PEM certificates", Concat(pem, pem)},
      {"text after PEM", Concat(pem, Str("garbage\n"))},
      {"text before PEM", Concat(Str("subject=CN = unknown\n"), pem)},
      {"PEM of another type", Str("-----BEGIN PUBLIC KEY-----\nMAA=\n-----END PUBLIC KEY-----\n")},
      {"PEM without end", Str("-----BEGIN CERTIFICATE-----\nMIIB\n")},
      {"oversized", Bytes(kMaxEkCertBytes + 1, 0x30)},
      {"not a certificate", Str("hello")},
      {"SEQUENCE of nothing", {0x30, 0x00}},
  };
  for (const auto& [name, input] : cases) {
    const Status s = ParseEkCertificate(input).status();
    EXPECT_EQ(s.reason(), std::string(kEkCertMalformed)) << name << ": " << s.ToString();
    EXPECT_EQ(VerifyEkCertificate(pki().Store(), input, kNow).status().reason(),
              std::string(kEkCertMalformed))
        << name;
    EXPECT_EQ(ERR_peek_error(), 0u) << "OpenSSL error left queued: " << name;
  }
}

TEST_F(EkCertTest, RefusesTooManyOrMalformedPresentedIntermediates) {
  const Bytes ek = pki().Ek(CertSpec{});
  const std::vector<Bytes> too_many(kMaxPresentedIntermediates + 1, Der(pki().intermediate.get()));
  EXPECT_REASON(VerifyEkCertificate(pki().Store(), ek, kNow, too_many).status(), kEkCertMalformed);
  const std::vector<Bytes> junk = {Str("junk")};
  EXPECT_REASON(VerifyEkCertificate(pki().Store(), ek, kNow, junk).status(), kEkCertMalformed);
}

TEST_F(EkCertTest, EscapesCertificateStringsForDisplay) {
  CertSpec spec;
  spec.subject_cn = "evil\nname";
  spec.tpm_model = "sw\x1b[31mtpm\n";
  Result<EkCertInfo> info = ParseEkCertificate(pki().Ek(spec));
  ASSERT_TRUE(info.ok()) << info.status().ToString();
  EXPECT_EQ(info->subject.find('\n'), std::string::npos) << info->subject;
  EXPECT_EQ(info->tpm_model, "sw\\x1b[31mtpm\\x0a");
}

TEST_F(EkCertTest, ConcurrentVerificationOnOneStore) {
  const EkTrustStore store = pki().Store();
  const Bytes good = pki().Ek(CertSpec{});
  CertSpec expired_spec;
  expired_spec.not_after = kNow - kDay;
  const Bytes expired = pki().Ek(expired_spec);
  std::vector<int> failures(4, 0);
  std::vector<std::thread> threads;
  for (size_t t = 0; t < failures.size(); ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 50; ++i) {
        if (!VerifyEkCertificate(store, good, kNow).ok()) ++failures[t];
        if (VerifyEkCertificate(store, expired, kNow).status().reason() != kEkCertExpired)
          ++failures[t];
      }
    });
  }
  for (std::thread& th : threads) th.join();
  for (int f : failures) EXPECT_EQ(f, 0);
}

// --- EK public area against the certificate ---------------------------------

TpmPublic TpmPublicFor(const EkCertInfo& cert) {
  TpmPublic pub;
  pub.type = cert.key_type;
  pub.name_alg = kAlgSha256;
  if (cert.key_type == kAlgRsa) {
    pub.rsa_key_bits = 2048;
    pub.rsa_exponent = cert.rsa_exponent;
    pub.rsa_modulus = cert.rsa_modulus;
  } else {
    pub.ecc_curve = cert.ecc_curve;
    pub.ecc_x = cert.ecc_x;
    pub.ecc_y = cert.ecc_y;
  }
  return pub;
}

TEST_F(EkCertTest, EkPublicMatchesRsaCertificate) {
  Result<EkCertInfo> cert = VerifyEkCertificate(pki().Store(), pki().Ek(CertSpec{}), kNow);
  ASSERT_TRUE(cert.ok()) << cert.status().ToString();
  const TpmPublic good = TpmPublicFor(*cert);
  EXPECT_TRUE(CheckEkPublicMatchesCertificate(good, *cert).ok());

  TpmPublic modulus = good;
  modulus.rsa_modulus[100] ^= 0x01;
  const Status s = CheckEkPublicMatchesCertificate(modulus, *cert);
  EXPECT_REASON(s, kEkPublicMismatch);
  EXPECT_EQ(s.code(), Status::Code::kVerificationFailed);

  TpmPublic exponent = good;
  exponent.rsa_exponent = 3;
  EXPECT_REASON(CheckEkPublicMatchesCertificate(exponent, *cert), kEkPublicMismatch);

  TpmPublic short_modulus = good;
  short_modulus.rsa_modulus.pop_back();
  EXPECT_REASON(CheckEkPublicMatchesCertificate(short_modulus, *cert), kEkPublicMismatch);

  TpmPublic rsa3072 = good;  // a supported size, but not this key's
  rsa3072.rsa_key_bits = 3072;
  EXPECT_REASON(CheckEkPublicMatchesCertificate(rsa3072, *cert), kEkPublicMismatch);
  TpmPublic rsa4096 = good;
  rsa4096.rsa_key_bits = 4096;
  EXPECT_REASON(CheckEkPublicMatchesCertificate(rsa4096, *cert), kEkKeyUnsupported);

  TpmPublic ecc;
  ecc.type = kAlgEcc;
  ecc.ecc_curve = kEccNistP256;
  ecc.ecc_x = Bytes(32, 1);
  ecc.ecc_y = Bytes(32, 2);
  EXPECT_REASON(CheckEkPublicMatchesCertificate(ecc, *cert), kEkPublicMismatch);

  TpmPublic keyed_hash;
  keyed_hash.type = kAlgKeyedHash;
  EXPECT_REASON(CheckEkPublicMatchesCertificate(keyed_hash, *cert), kEkKeyUnsupported);
}

TEST_F(EkCertTest, EkPublicMatchesEccCertificate) {
  CertSpec spec;
  spec.key_usage = "critical,keyAgreement";
  Result<EkCertInfo> cert =
      VerifyEkCertificate(pki().Store(), pki().Ek(spec, pki().ek_p384_key.get()), kNow);
  ASSERT_TRUE(cert.ok()) << cert.status().ToString();
  const TpmPublic good = TpmPublicFor(*cert);
  EXPECT_TRUE(CheckEkPublicMatchesCertificate(good, *cert).ok());

  TpmPublic point = good;
  point.ecc_y[47] ^= 0x01;
  EXPECT_REASON(CheckEkPublicMatchesCertificate(point, *cert), kEkPublicMismatch);

  TpmPublic curve = good;
  curve.ecc_curve = kEccNistP256;
  EXPECT_REASON(CheckEkPublicMatchesCertificate(curve, *cert), kEkPublicMismatch);

  TpmPublic p521 = good;  // a supported curve, but not this key's
  p521.ecc_curve = kEccNistP521;
  EXPECT_REASON(CheckEkPublicMatchesCertificate(p521, *cert), kEkPublicMismatch);
  TpmPublic p224 = good;
  p224.ecc_curve = 0x0002;  // TPM_ECC_NIST_P224
  EXPECT_REASON(CheckEkPublicMatchesCertificate(p224, *cert), kEkKeyUnsupported);

  TpmPublic rsa;
  rsa.type = kAlgRsa;
  rsa.rsa_key_bits = 2048;
  rsa.rsa_exponent = 65537;
  rsa.rsa_modulus = Bytes(256, 0xff);
  EXPECT_REASON(CheckEkPublicMatchesCertificate(rsa, *cert), kEkPublicMismatch);
}

TEST_F(EkCertTest, EccCoordinatesCompareAsFixedWidthNumbers) {
  // Find a P-256 key whose x coordinate has a leading zero byte, so a TPM
  // could send it as 31 bytes.
  ossl::PkeyPtr key;
  Result<EkCertInfo> cert = Status::InvalidArgument("none", "no key yet");
  CertSpec spec;
  spec.key_usage = "critical,keyAgreement";
  for (int i = 0; i < 5000; ++i) {
    key = GenEc("P-256");
    cert = ParseEkCertificate(pki().Ek(spec, key.get()));
    ASSERT_TRUE(cert.ok()) << cert.status().ToString();
    if (cert->ecc_x[0] == 0) break;
  }
  ASSERT_EQ(cert->ecc_x[0], 0) << "no key with a leading zero byte found";
  TpmPublic stripped = TpmPublicFor(*cert);
  stripped.ecc_x.erase(stripped.ecc_x.begin());
  EXPECT_TRUE(CheckEkPublicMatchesCertificate(stripped, *cert).ok());

  // Longer than the field: refused, even with a zero in front.
  TpmPublic longer = TpmPublicFor(*cert);
  longer.ecc_y.insert(longer.ecc_y.begin(), 0);
  EXPECT_REASON(CheckEkPublicMatchesCertificate(longer, *cert), kEkPublicMismatch);
}

TEST_F(EkCertTest, UnsupportedCertificateKeyInCheck) {
  EkCertInfo info;  // key_type kAlgNull
  TpmPublic pub;
  pub.type = kAlgRsa;
  pub.rsa_key_bits = 2048;
  EXPECT_REASON(CheckEkPublicMatchesCertificate(pub, info), kEkKeyUnsupported);
}

// --- trust store ----------------------------------------------------------

class TempDir {
 public:
  TempDir() {
    char tmpl[] = "/tmp/ek_cert_test.XXXXXX";
    if (mkdtemp(tmpl) == nullptr) throw std::runtime_error("mkdtemp");
    path_ = tmpl;
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  std::string Write(const std::string& name, const Bytes& data) const {
    const std::string p = path_ + "/" + name;
    std::ofstream(p, std::ios::binary)
        .write(reinterpret_cast<const char*>(data.data()),
               static_cast<std::streamsize>(data.size()));
    return p;
  }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

TEST_F(EkCertTest, LoadsTrustStoreFromFilesAndDirectories) {
  TempDir dir;
  const std::string bundle = dir.Write(
      "roots.pem",
      Concat(Concat(Str("# test roots\n"), Pem(pki().root.get())), Pem(pki().foreign_root.get())));
  std::filesystem::create_directory(dir.path() + "/int");
  const std::string int_dir = dir.path() + "/int";
  dir.Write("int/a.der", Der(pki().intermediate.get()));
  dir.Write("int/.hidden", Str("not a certificate"));

  Result<EkTrustStore> store = EkTrustStore::Load({bundle}, {int_dir});
  ASSERT_TRUE(store.ok()) << store.status().ToString();
  EXPECT_EQ(store->root_count(), 2u);
  EXPECT_EQ(store->intermediate_count(), 1u);
  EXPECT_TRUE(VerifyEkCertificate(*store, pki().Ek(CertSpec{}), kNow).ok());

  // Moving keeps the configuration; the moved-from store verifies nothing.
  EkTrustStore moved = std::move(*store);
  EXPECT_TRUE(VerifyEkCertificate(moved, pki().Ek(CertSpec{}), kNow).ok());
  EXPECT_REASON(VerifyEkCertificate(*store, pki().Ek(CertSpec{}), kNow).status(), kEkCertUntrusted);
}

TEST_F(EkCertTest, RefusesBadTrustStoreConfiguration) {
  TempDir dir;
  const std::string root = dir.Write("root.pem", Pem(pki().root.get()));
  const std::string junk_dir = dir.path() + "/junk";
  std::filesystem::create_directory(junk_dir);
  std::ofstream(junk_dir + "/README") << "not a certificate";

  Result<EkTrustStore> missing = EkTrustStore::Load({dir.path() + "/nope.pem"}, {});
  EXPECT_REASON(missing.status(), kEkTrustStoreIo);
  EXPECT_EQ(missing.status().code(), Status::Code::kIoError);
  EXPECT_REASON(EkTrustStore::Load({}, {}).status(), kEkTrustStoreInvalid);
  // Junk beside the certificates is noted, not a reason to refuse them
  // (issue 41); junk alone leaves no anchor, which is refused.
  Result<EkTrustStore> noted = EkTrustStore::Load({root}, {junk_dir});
  ASSERT_TRUE(noted.ok()) << noted.status().ToString();
  ASSERT_EQ(noted->LoadNotes().size(), 1u);
  EXPECT_NE(noted->LoadNotes()[0].find("README: skipped"), std::string::npos)
      << noted->LoadNotes()[0];
  const std::string key =
      dir.Write("key.pem", Str("-----BEGIN PRIVATE KEY-----\nMAA=\n-----END PRIVATE KEY-----\n"));
  Result<EkTrustStore> with_key = EkTrustStore::Load({root, key}, {});
  ASSERT_TRUE(with_key.ok()) << with_key.status().ToString();
  EXPECT_EQ(with_key->root_count(), 1u);
  EXPECT_EQ(with_key->LoadNotes().size(), 1u);
  EXPECT_REASON(EkTrustStore::Load({key}, {}).status(), kEkTrustStoreInvalid);
  EXPECT_REASON(EkTrustStore::Load({junk_dir}, {}).status(), kEkTrustStoreInvalid);

  // A root input must hold a CA; a bundle without one adds nothing.
  EkTrustStore store;
  EXPECT_REASON(store.AddRoot(pki().Ek(CertSpec{})), kEkTrustStoreInvalid);
  EXPECT_REASON(store.AddRoot(Str("junk")), kEkTrustStoreInvalid);
  EXPECT_EQ(store.root_count(), 0u);
  EXPECT_REASON(store.AddIntermediate(Str("junk")), kEkTrustStoreInvalid);
}

// --- real swtpm EK certificates ---------------------------------------------

// TPMT_PUBLIC ends with its `unique` field; for these EKs that is the RSA
// modulus (TPM2B, 256 bytes) or the ECC point (two TPM2B of 48 bytes).
TpmPublic SwtpmEkPublic(const std::string& path) {
  const Bytes pub = ReadFixture(path);
  TpmPublic out;
  if (path.find("rsa") != std::string::npos) {
    out.type = kAlgRsa;
    out.rsa_key_bits = 2048;
    out.rsa_exponent = 65537;  // 0 in the TCG EK template
    out.rsa_modulus.assign(pub.end() - 256, pub.end());
    EXPECT_EQ(pub[pub.size() - 258], 0x01);  // size prefix 0x0100
  } else {
    out.type = kAlgEcc;
    out.ecc_curve = kEccNistP384;
    out.ecc_y.assign(pub.end() - 48, pub.end());
    out.ecc_x.assign(pub.end() - 98, pub.end() - 50);
  }
  return out;
}

class SwtpmEkCertTest : public ::testing::Test {
 protected:
  static constexpr int64_t kSwtpmNow = kNow;  // after 2026-11-22, before 9999

  static Result<EkTrustStore> Store() {
    return EkTrustStore::Load({testing::SourcePath("attest/testdata/ek/swtpm-localca-root.pem")},
                              {testing::SourcePath("attest/testdata/ek/swtpm-localca-issuer.pem")});
  }
};

TEST_F(SwtpmEkCertTest, AcceptsRsa2048EkCertificate) {
  Result<EkTrustStore> store = Store();
  ASSERT_TRUE(store.ok()) << store.status().ToString();
  Result<EkCertInfo> info =
      VerifyEkCertificate(*store, ReadFixture("attest/testdata/ek/ek-rsa2048.der"), kSwtpmNow);
  ASSERT_TRUE(info.ok()) << info.status().ToString();
  EXPECT_EQ(info->subject, "CN=unknown");
  EXPECT_EQ(info->issuer, "CN=swtpm-localca");
  EXPECT_EQ(info->tpm_manufacturer, "id:00001014");
  EXPECT_EQ(info->tpm_model, "swtpm");
  EXPECT_EQ(info->tpm_version, "id:20191023");
  EXPECT_TRUE(info->has_ek_eku);
  EXPECT_EQ(info->key_type, kAlgRsa);
  EXPECT_EQ(info->not_after, 253402300799);  // 9999-12-31T23:59:59Z
  const TpmPublic ek = SwtpmEkPublic("attest/testdata/ek/ek-rsa2048.pub");
  EXPECT_TRUE(CheckEkPublicMatchesCertificate(ek, *info).ok());
}

TEST_F(SwtpmEkCertTest, AcceptsP384EkCertificate) {
  Result<EkTrustStore> store = Store();
  ASSERT_TRUE(store.ok()) << store.status().ToString();
  Result<EkCertInfo> info =
      VerifyEkCertificate(*store, ReadFixture("attest/testdata/ek/ek-secp384r1.der"), kSwtpmNow);
  ASSERT_TRUE(info.ok()) << info.status().ToString();
  EXPECT_EQ(info->key_type, kAlgEcc);
  EXPECT_EQ(info->ecc_curve, kEccNistP384);
  EXPECT_EQ(info->tpm_model, "swtpm");
  const TpmPublic ek = SwtpmEkPublic("attest/testdata/ek/ek-ecc384.pub");
  EXPECT_TRUE(CheckEkPublicMatchesCertificate(ek, *info).ok());
  // The RSA EK's public area does not match the ECC certificate.
  EXPECT_REASON(
      CheckEkPublicMatchesCertificate(SwtpmEkPublic("attest/testdata/ek/ek-rsa2048.pub"), *info),
      kEkPublicMismatch);
}

// The path a server takes: the TPM2B_PUBLIC as the agent sends it, parsed by
// tpm.h, against the certificate.
TEST_F(SwtpmEkCertTest, ParsedEkPublicAreasMatchTheirCertificates) {
  Result<EkTrustStore> store = Store();
  ASSERT_TRUE(store.ok()) << store.status().ToString();
  const std::pair<const char*, const char*> pairs[] = {
      {"attest/testdata/ek/ek-rsa2048.der", "attest/testdata/ek/ek-rsa2048.pub"},
      {"attest/testdata/ek/ek-secp384r1.der", "attest/testdata/ek/ek-ecc384.pub"},
  };
  for (const auto& [cert_path, pub_path] : pairs) {
    Result<EkCertInfo> cert = VerifyEkCertificate(*store, ReadFixture(cert_path), kSwtpmNow);
    ASSERT_TRUE(cert.ok()) << cert_path << ": " << cert.status().ToString();
    Result<TpmPublic> ek = ParseTpm2bPublic(ReadFixture(pub_path));
    ASSERT_TRUE(ek.ok()) << pub_path << ": " << ek.status().ToString();
    EXPECT_TRUE(CheckEkPublicMatchesCertificate(*ek, *cert).ok()) << cert_path;
  }
}

// swtpm_setup --rsa-keysize 3072: the RSA-3072 EK certificate (H-6 EK) of
// another lab CA, against the EK public area tpm2_createek read (issue 41).
TEST_F(SwtpmEkCertTest, Rsa3072EkCertificateMatchesItsPublicArea) {
  Result<EkTrustStore> store = EkTrustStore::Load(
      {testing::SourcePath("attest/testdata/ek/swtpm-localca-3072-root.pem")},
      {testing::SourcePath("attest/testdata/ek/swtpm-localca-3072-issuer.pem")});
  ASSERT_TRUE(store.ok()) << store.status().ToString();
  Result<EkCertInfo> cert =
      VerifyEkCertificate(*store, ReadFixture("attest/testdata/ek/ek-rsa3072.der"), kSwtpmNow);
  ASSERT_TRUE(cert.ok()) << cert.status().ToString();
  EXPECT_EQ(cert->key_bits, 3072);
  Result<TpmPublic> ek = ParseTpm2bPublic(ReadFixture("attest/testdata/ek/ek-rsa3072.pub"));
  ASSERT_TRUE(ek.ok()) << ek.status().ToString();
  EXPECT_TRUE(CheckEkPublicMatchesCertificate(*ek, *cert).ok());
  // The RSA-2048 EK of the other lab TPM is not this key.
  Result<TpmPublic> other = ParseTpm2bPublic(ReadFixture("attest/testdata/ek/ek-rsa2048.pub"));
  ASSERT_TRUE(other.ok());
  EXPECT_REASON(CheckEkPublicMatchesCertificate(*other, *cert), kEkPublicMismatch);
}

TEST_F(SwtpmEkCertTest, RefusedBeforeIssuanceAndWithoutTheIssuer) {
  Result<EkTrustStore> store = Store();
  ASSERT_TRUE(store.ok()) << store.status().ToString();
  const Bytes ek = ReadFixture("attest/testdata/ek/ek-rsa2048.der");
  EXPECT_REASON(VerifyEkCertificate(*store, ek, 1'700'000'000).status(), kEkCertNotYetValid);
  Result<EkTrustStore> roots_only =
      EkTrustStore::Load({testing::SourcePath("attest/testdata/ek/swtpm-localca-root.pem")}, {});
  ASSERT_TRUE(roots_only.ok()) << roots_only.status().ToString();
  EXPECT_REASON(VerifyEkCertificate(*roots_only, ek, kSwtpmNow).status(),
                kEkCertMissingIntermediate);
}

}  // namespace
}  // namespace rackgate::attest
