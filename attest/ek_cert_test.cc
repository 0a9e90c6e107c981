// Tests of EK certificate validation on a test PKI made in-process:
// acceptance, path validation refusals and the TCG EK profile.
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
using ek_testing::kSdaDerHex;
using ek_testing::GenRsa;
using ek_testing::GenEc;
using ek_testing::CertSpec;
using ek_testing::CaSpec;
using ek_testing::MakeCert;
using ek_testing::Der;
using ek_testing::Pem;
using ek_testing::Concat;
using ek_testing::Str;
using ek_testing::EkCertTest;

// --- acceptance -----------------------------------------------------------

TEST_F(EkCertTest, AcceptsRsa2048EkCertificate) {
  const Bytes der = pki().Ek(CertSpec{});
  Result<EkCertInfo> info = VerifyEkCertificate(pki().Store(), der, kNow);
  ASSERT_TRUE(info.ok()) << info.status().ToString();
  EXPECT_EQ(info->tpm_manufacturer, "id:00001014");
  EXPECT_EQ(info->tpm_model, "swtpm");
  EXPECT_EQ(info->tpm_version, "id:20191023");
  EXPECT_EQ(info->subject, "CN=unknown");
  EXPECT_EQ(info->issuer, "CN=Test EK Intermediate");
  EXPECT_EQ(info->serial_hex, "02");
  EXPECT_EQ(info->not_before, kNow - 30 * kDay);
  EXPECT_EQ(info->not_after, kNow + 3650 * kDay);
  EXPECT_TRUE(info->has_ek_eku);
  EXPECT_FALSE(info->has_ek_policy);
  EXPECT_EQ(info->key_type, kAlgRsa);
  EXPECT_EQ(info->key_bits, 2048);
  EXPECT_EQ(info->rsa_exponent, 65537u);
  EXPECT_EQ(info->rsa_modulus.size(), 256u);
  EXPECT_EQ(info->der, der);
}

TEST_F(EkCertTest, AcceptsEccP384AndP256EkCertificates) {
  CertSpec spec;
  spec.key_usage = "critical,keyAgreement";
  Result<EkCertInfo> p384 =
      VerifyEkCertificate(pki().Store(), pki().Ek(spec, pki().ek_p384_key.get()), kNow);
  ASSERT_TRUE(p384.ok()) << p384.status().ToString();
  EXPECT_EQ(p384->key_type, kAlgEcc);
  EXPECT_EQ(p384->ecc_curve, kEccNistP384);
  EXPECT_EQ(p384->key_bits, 384);
  EXPECT_EQ(p384->ecc_x.size(), 48u);
  EXPECT_EQ(p384->ecc_y.size(), 48u);

  Result<EkCertInfo> p256 =
      VerifyEkCertificate(pki().Store(), pki().Ek(spec, pki().ek_p256_key.get()), kNow);
  ASSERT_TRUE(p256.ok()) << p256.status().ToString();
  EXPECT_EQ(p256->ecc_curve, kEccNistP256);
  EXPECT_EQ(p256->ecc_x.size(), 32u);
  EXPECT_EQ(p256->ecc_y.size(), 32u);
}

TEST_F(EkCertTest, AcceptsPemAndDer) {
  ossl::X509Ptr x =
      MakeCert(CertSpec{}, pki().ek_rsa_key.get(), pki().intermediate.get(), pki().int_key.get());
  const Bytes der = Der(x.get());
  Result<EkCertInfo> from_pem = VerifyEkCertificate(pki().Store(), Pem(x.get()), kNow);
  ASSERT_TRUE(from_pem.ok()) << from_pem.status().ToString();
  EXPECT_EQ(from_pem->der, der);
  Result<EkCertInfo> from_der = VerifyEkCertificate(pki().Store(), der, kNow);
  ASSERT_TRUE(from_der.ok()) << from_der.status().ToString();
  // Blank lines around a PEM block are fine.
  EXPECT_TRUE(VerifyEkCertificate(pki().Store(), Concat(Str("\n\n"), Pem(x.get())), kNow).ok());
}

TEST_F(EkCertTest, AcceptsEmptySubject) {
  CertSpec spec;
  spec.subject_cn.clear();
  Result<EkCertInfo> info = VerifyEkCertificate(pki().Store(), pki().Ek(spec), kNow);
  ASSERT_TRUE(info.ok()) << info.status().ToString();
  EXPECT_EQ(info->subject, "");
  EXPECT_EQ(info->tpm_model, "swtpm");
}

TEST_F(EkCertTest, AcceptsNonCriticalSanAndNoSan) {
  CertSpec spec;
  spec.san_critical = false;
  EXPECT_TRUE(Verify(pki().Ek(spec)).ok());
  spec.tcg_san = false;
  Result<EkCertInfo> info = VerifyEkCertificate(pki().Store(), pki().Ek(spec), kNow);
  ASSERT_TRUE(info.ok()) << info.status().ToString();
  EXPECT_EQ(info->tpm_manufacturer, "");
}

TEST_F(EkCertTest, AcceptsPresentedIntermediate) {
  EkTrustStore roots_only;
  ASSERT_TRUE(roots_only.AddRoot(Der(pki().root.get())).ok());
  const Bytes ek = pki().Ek(CertSpec{});
  EXPECT_REASON(VerifyEkCertificate(roots_only, ek, kNow).status(), kEkCertMissingIntermediate);
  const std::vector<Bytes> chain = {Pem(pki().intermediate.get())};
  Result<EkCertInfo> info = VerifyEkCertificate(roots_only, ek, kNow, chain);
  EXPECT_TRUE(info.ok()) << info.status().ToString();
}

TEST_F(EkCertTest, BoundsChainLength) {
  // root -> i1 -> ... -> i4 -> EK: one intermediate more than the limit.
  std::vector<ossl::X509Ptr> ints;
  X509* issuer = pki().root.get();
  EVP_PKEY* issuer_key = pki().root_key.get();
  for (int i = 1; i <= 4; ++i) {
    ints.push_back(MakeCert(CaSpec("Intermediate " + std::to_string(i)), pki().int_key.get(),
                            issuer, issuer_key));
    issuer = ints.back().get();
    issuer_key = pki().int_key.get();
  }
  EkTrustStore roots_only;
  ASSERT_TRUE(roots_only.AddRoot(Pem(pki().root.get())).ok());
  std::vector<Bytes> chain;
  for (const ossl::X509Ptr& x : ints) chain.push_back(Der(x.get()));
  const Bytes ek4 =
      Der(MakeCert(CertSpec{}, pki().ek_rsa_key.get(), ints[3].get(), pki().int_key.get()).get());
  EXPECT_REASON(VerifyEkCertificate(roots_only, ek4, kNow, chain).status(), kEkCertUntrusted);
  const Bytes ek3 =
      Der(MakeCert(CertSpec{}, pki().ek_rsa_key.get(), ints[2].get(), pki().int_key.get()).get());
  chain.pop_back();
  EXPECT_TRUE(VerifyEkCertificate(roots_only, ek3, kNow, chain).ok());
}

// --- path validation refusals ---------------------------------------------

TEST_F(EkCertTest, RefusesForeignRoot) {
  // The foreign PKI has a root with the same name as ours but its own key.
  const Bytes ek = Der(
      MakeCert(CertSpec{}, pki().ek_rsa_key.get(), pki().foreign_int.get(), pki().foreign_key.get())
          .get());
  const std::vector<Bytes> full_chain = {Der(pki().foreign_int.get()),
                                         Der(pki().foreign_root.get())};
  const Status with_chain = VerifyEkCertificate(pki().Store(), ek, kNow, full_chain).status();
  EXPECT_REASON(with_chain, kEkCertUntrusted);
  const std::vector<Bytes> int_only = {Der(pki().foreign_int.get())};
  EXPECT_REASON(VerifyEkCertificate(pki().Store(), ek, kNow, int_only).status(),
                kEkCertMissingIntermediate);

  // Signed directly by the foreign root, nothing presented: its issuer is unknown.
  const Bytes direct = Der(MakeCert(CertSpec{}, pki().ek_rsa_key.get(), pki().foreign_root.get(),
                                    pki().foreign_key.get())
                               .get());
  EXPECT_REASON(Verify(direct), kEkCertMissingIntermediate);

  // A self-signed "EK certificate".
  const Bytes self =
      Der(MakeCert(CertSpec{}, pki().ek_p256_key.get(), nullptr, pki().ek_p256_key.get()).get());
  EXPECT_REASON(Verify(self), kEkCertUntrusted);
}

TEST_F(EkCertTest, RefusesMissingIntermediate) {
  EkTrustStore roots_only;
  ASSERT_TRUE(roots_only.AddRoot(Pem(pki().root.get())).ok());
  const Status s = VerifyEkCertificate(roots_only, pki().Ek(CertSpec{}), kNow).status();
  EXPECT_REASON(s, kEkCertMissingIntermediate);
  EXPECT_NE(s.message().find("CN=Test EK Intermediate"), std::string::npos) << s.message();
}

TEST_F(EkCertTest, RefusesExpired) {
  CertSpec spec;
  spec.not_after = kNow - kDay;
  const Status s = Verify(pki().Ek(spec));
  EXPECT_REASON(s, kEkCertExpired);
  EXPECT_EQ(s.code(), Status::Code::kVerificationFailed);
  EXPECT_NE(s.message().find("serial 02"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("CN=Test EK Intermediate"), std::string::npos) << s.message();
  // The same certificate was fine while it was valid.
  EXPECT_TRUE(Verify(pki().Ek(spec), kNow - 2 * kDay).ok());
}

TEST_F(EkCertTest, RefusesExpiredIntermediate) {
  CertSpec int_spec = CaSpec("Old Intermediate");
  int_spec.not_after = kNow - kDay;
  ossl::X509Ptr old_int =
      MakeCert(int_spec, pki().int_key.get(), pki().root.get(), pki().root_key.get());
  const Bytes ek =
      Der(MakeCert(CertSpec{}, pki().ek_rsa_key.get(), old_int.get(), pki().int_key.get()).get());
  EkTrustStore roots_only;
  ASSERT_TRUE(roots_only.AddRoot(Pem(pki().root.get())).ok());
  const std::vector<Bytes> chain = {Der(old_int.get())};
  const Status s = VerifyEkCertificate(roots_only, ek, kNow, chain).status();
  EXPECT_REASON(s, kEkCertExpired);
  EXPECT_NE(s.message().find("depth 1"), std::string::npos) << s.message();
}

TEST_F(EkCertTest, RefusesNotYetValid) {
  CertSpec spec;
  spec.not_before = kNow + kDay;
  EXPECT_REASON(Verify(pki().Ek(spec)), kEkCertNotYetValid);
}

TEST_F(EkCertTest, RefusesBadSignature) {
  Bytes der = pki().Ek(CertSpec{});
  der.back() ^= 0x01;  // the last byte is inside the signature value
  EXPECT_REASON(Verify(der), kEkCertSignatureInvalid);
  Bytes der2 = pki().Ek(CertSpec{});
  der2[der2.size() - 100] ^= 0x80;
  EXPECT_REASON(Verify(der2), kEkCertSignatureInvalid);
}

TEST_F(EkCertTest, RefusesWeakSignatureDigest) {
  CertSpec spec;
  spec.md = EVP_sha1();
  EXPECT_REASON(Verify(pki().Ek(spec)), kEkCertWeakCrypto);
}

// --- TCG EK profile -----------------------------------------------------------

TEST_F(EkCertTest, RefusesCertificateThatIsNotAnEkCertificate) {
  CertSpec no_marks;
  no_marks.eku.clear();
  EXPECT_REASON(Verify(pki().Ek(no_marks)), kEkCertNotEk);

  CertSpec tls;
  tls.eku = "serverAuth,clientAuth";
  EXPECT_REASON(Verify(pki().Ek(tls)), kEkCertNotEk);

  // An EKU without the EK purpose is not overridden by the policy mark.
  CertSpec tls_with_policy = tls;
  tls_with_policy.policy_oid = "1.3.6.1.4.1.99999.1";
  tls_with_policy.policy_notice = true;
  EXPECT_REASON(Verify(pki().Ek(tls_with_policy)), kEkCertNotEk);

  // A policy OID alone, not accepted by the operator.
  CertSpec vendor_policy = no_marks;
  vendor_policy.policy_oid = "1.3.6.1.4.1.99999.1";
  EXPECT_REASON(Verify(pki().Ek(vendor_policy)), kEkCertNotEk);
}

TEST_F(EkCertTest, AcceptsTcgPolicyNoticeWithoutEku) {
  CertSpec spec;
  spec.eku.clear();
  spec.policy_oid = "1.3.6.1.4.1.99999.1";
  spec.policy_notice = true;
  Result<EkCertInfo> info = VerifyEkCertificate(pki().Store(), pki().Ek(spec), kNow);
  ASSERT_TRUE(info.ok()) << info.status().ToString();
  EXPECT_FALSE(info->has_ek_eku);
  EXPECT_TRUE(info->has_ek_policy);
}

TEST_F(EkCertTest, AcceptsOperatorPolicyWithoutEku) {
  CertSpec spec;
  spec.eku.clear();
  spec.policy_oid = "1.3.6.1.4.1.99999.1";
  EkTrustStore store = pki().Store();
  ASSERT_TRUE(store.AcceptEkPolicy("1.3.6.1.4.1.99999.1").ok());
  Result<EkCertInfo> info = VerifyEkCertificate(store, pki().Ek(spec), kNow);
  ASSERT_TRUE(info.ok()) << info.status().ToString();
  EXPECT_TRUE(info->has_ek_policy);
  EXPECT_REASON(store.AcceptEkPolicy("not an oid"), kEkTrustStoreInvalid);
}

TEST_F(EkCertTest, RefusesLeafThatIsCa) {
  CertSpec spec;
  spec.basic_constraints = CertSpec::Bc::kCa;
  const Status s = Verify(pki().Ek(spec));
  EXPECT_REASON(s, kEkCertBadBasicConstraints);

  // No basicConstraints but a key usage that allows certificate signing.
  CertSpec ku_ca;
  ku_ca.basic_constraints = CertSpec::Bc::kAbsent;
  ku_ca.key_usage = "critical,keyEncipherment,keyCertSign";
  EXPECT_REASON(Verify(pki().Ek(ku_ca)), kEkCertBadBasicConstraints);

  // No basicConstraints and an EK key usage: not a CA, accepted.
  CertSpec plain;
  plain.basic_constraints = CertSpec::Bc::kAbsent;
  EXPECT_TRUE(Verify(pki().Ek(plain)).ok());
}

TEST_F(EkCertTest, RefusesIntermediateWithoutCaTrue) {
  for (CertSpec::Bc bc : {CertSpec::Bc::kNotCa, CertSpec::Bc::kAbsent}) {
    CertSpec int_spec = CaSpec("Not A CA");
    int_spec.basic_constraints = bc;
    ossl::X509Ptr bad_int =
        MakeCert(int_spec, pki().int_key.get(), pki().root.get(), pki().root_key.get());
    const Bytes ek =
        Der(MakeCert(CertSpec{}, pki().ek_rsa_key.get(), bad_int.get(), pki().int_key.get()).get());
    EkTrustStore store;
    ASSERT_TRUE(store.AddRoot(Pem(pki().root.get())).ok());
    ASSERT_TRUE(store.AddIntermediate(Pem(bad_int.get())).ok());
    const Status s = VerifyEkCertificate(store, ek, kNow).status();
    EXPECT_REASON(s, kEkCertBadBasicConstraints);
    EXPECT_NE(s.message().find("Not A CA"), std::string::npos) << s.message();
  }
}

TEST_F(EkCertTest, AcceptsTcgCriticalExtensionsOnlyOnTheLeaf) {
  CertSpec sda;
  sda.extra.push_back({"2.5.29.9", true, testing::FromHex(kSdaDerHex)});
  EXPECT_TRUE(Verify(pki().Ek(sda)).ok());

  CertSpec unknown;
  unknown.extra.push_back({"1.3.6.1.4.1.99999.7", true, {0x05, 0x00}});
  const Status s = Verify(pki().Ek(unknown));
  EXPECT_REASON(s, kEkCertUnhandledCriticalExtension);
  EXPECT_NE(s.message().find("1.3.6.1.4.1.99999.7"), std::string::npos) << s.message();

  // Both: the unknown one still refuses.
  CertSpec both = sda;
  both.extra.push_back(unknown.extra[0]);
  EXPECT_REASON(Verify(pki().Ek(both)), kEkCertUnhandledCriticalExtension);

  // Non-critical, an unknown extension is ignored as X.509 says.
  CertSpec unknown_noncritical;
  unknown_noncritical.extra.push_back({"1.3.6.1.4.1.99999.7", false, {0x05, 0x00}});
  EXPECT_TRUE(Verify(pki().Ek(unknown_noncritical)).ok());

  // A CA may not carry a critical extension OpenSSL does not enforce.
  CertSpec int_spec = CaSpec("Intermediate With Critical SDA");
  int_spec.extra.push_back({"2.5.29.9", true, testing::FromHex(kSdaDerHex)});
  ossl::X509Ptr odd_int =
      MakeCert(int_spec, pki().int_key.get(), pki().root.get(), pki().root_key.get());
  const Bytes ek =
      Der(MakeCert(CertSpec{}, pki().ek_rsa_key.get(), odd_int.get(), pki().int_key.get()).get());
  EkTrustStore roots_only;
  ASSERT_TRUE(roots_only.AddRoot(Pem(pki().root.get())).ok());
  const std::vector<Bytes> chain = {Der(odd_int.get())};
  EXPECT_REASON(VerifyEkCertificate(roots_only, ek, kNow, chain).status(),
                kEkCertUnhandledCriticalExtension);
}

TEST_F(EkCertTest, AcceptsRsa3072AndP521EkCertificates) {
  ossl::PkeyPtr rsa3072 = GenRsa(3072);
  Result<EkCertInfo> rsa = VerifyEkCertificate(pki().Store(), pki().Ek(CertSpec{}, rsa3072.get()), kNow);
  ASSERT_TRUE(rsa.ok()) << rsa.status().ToString();
  EXPECT_EQ(rsa->key_type, kAlgRsa);
  EXPECT_EQ(rsa->key_bits, 3072);
  EXPECT_EQ(rsa->rsa_modulus.size(), 384u);
  EXPECT_EQ(rsa->rsa_exponent, 65537u);

  ossl::PkeyPtr p521 = GenEc("P-521");
  CertSpec spec;
  spec.key_usage = "critical,keyAgreement";
  Result<EkCertInfo> ecc = VerifyEkCertificate(pki().Store(), pki().Ek(spec, p521.get()), kNow);
  ASSERT_TRUE(ecc.ok()) << ecc.status().ToString();
  EXPECT_EQ(ecc->key_type, kAlgEcc);
  EXPECT_EQ(ecc->ecc_curve, kEccNistP521);
  EXPECT_EQ(ecc->key_bits, 521);
  EXPECT_EQ(ecc->ecc_x.size(), 66u);
  EXPECT_EQ(ecc->ecc_y.size(), 66u);
}

TEST_F(EkCertTest, RefusesUnsupportedKeys) {
  ossl::PkeyPtr p224 = GenEc("P-224");
  CertSpec spec;
  spec.key_usage = "critical,keyAgreement";
  const Bytes ek = pki().Ek(spec, p224.get());
  const Status s = Verify(ek);
  EXPECT_REASON(s, kEkKeyUnsupported);
  EXPECT_EQ(s.code(), Status::Code::kUnsupported);
  // Parsing still reports the facts.
  Result<EkCertInfo> info = ParseEkCertificate(ek);
  ASSERT_TRUE(info.ok()) << info.status().ToString();
  EXPECT_EQ(info->key_type, kAlgNull);
  EXPECT_EQ(info->key_bits, 224);

  ossl::PkeyPtr rsa1024 = GenRsa(1024);
  EXPECT_REASON(Verify(pki().Ek(CertSpec{}, rsa1024.get())), kEkKeyUnsupported);
  // Nor is a size between the TCG EK sizes (RSA-1536: cheaper to make than
  // RSA-4096, refused by the same rule).
  ossl::PkeyPtr rsa1536 = GenRsa(1536);
  EXPECT_REASON(Verify(pki().Ek(CertSpec{}, rsa1536.get())), kEkKeyUnsupported);
}

}  // namespace
}  // namespace rackgate::attest
