// Tests of EK certificate validation: a test PKI made in-process for
// acceptance and every refusal, and real swtpm EK certificates from
// attest/testdata/ek.
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
#include "attest/test_util.h"

namespace rackgate::attest {
namespace {

using testing::ReadFixture;

constexpr int64_t kDay = 86400;
constexpr int64_t kNow = 1'800'000'000;  // 2027-01-15T08:00:00Z

void FreeOpensslBytes(unsigned char* p) { OPENSSL_free(p); }
using Asn1ObjectPtr = std::unique_ptr<ASN1_OBJECT, ossl::Deleter<ASN1_OBJECT, ASN1_OBJECT_free>>;
using X509NamePtr = std::unique_ptr<X509_NAME, ossl::Deleter<X509_NAME, X509_NAME_free>>;
using GeneralNamesPtr =
    std::unique_ptr<GENERAL_NAMES, ossl::Deleter<GENERAL_NAMES, GENERAL_NAMES_free>>;
using GeneralNamePtr =
    std::unique_ptr<GENERAL_NAME, ossl::Deleter<GENERAL_NAME, GENERAL_NAME_free>>;
using CertPoliciesPtr =
    std::unique_ptr<CERTIFICATEPOLICIES,
                    ossl::Deleter<CERTIFICATEPOLICIES, CERTIFICATEPOLICIES_free>>;
using PolicyInfoPtr = std::unique_ptr<POLICYINFO, ossl::Deleter<POLICYINFO, POLICYINFO_free>>;
using PolicyQualPtr =
    std::unique_ptr<POLICYQUALINFO, ossl::Deleter<POLICYQUALINFO, POLICYQUALINFO_free>>;
using OctetStringPtr =
    std::unique_ptr<ASN1_OCTET_STRING, ossl::Deleter<ASN1_OCTET_STRING, ASN1_OCTET_STRING_free>>;
using ExtensionPtr =
    std::unique_ptr<X509_EXTENSION, ossl::Deleter<X509_EXTENSION, X509_EXTENSION_free>>;
using OpensslBytesPtr =
    std::unique_ptr<unsigned char, ossl::Deleter<unsigned char, FreeOpensslBytes>>;

// subjectDirectoryAttributes as swtpm writes it: tpmSpecification "2.0", 0, 164.
const char kSdaDerHex[] = "3019301706056781050210310e300c0c03322e30020100020200a4";

ossl::PkeyPtr GenRsa(int bits) {
  ossl::PkeyPtr k(EVP_RSA_gen(static_cast<unsigned>(bits)));
  if (!k) throw std::runtime_error("RSA keygen failed");
  return k;
}

ossl::PkeyPtr GenEc(const char* curve) {
  ossl::PkeyPtr k(EVP_EC_gen(curve));
  if (!k) throw std::runtime_error("EC keygen failed");
  return k;
}

struct RawExtension {
  std::string oid;
  bool critical = false;
  Bytes der;
};

// What a test certificate should look like. Defaults describe a good EK
// certificate as the TCG profile (and swtpm) make it.
struct CertSpec {
  std::string subject_cn = "unknown";  // empty: empty subject
  long serial = 2;
  int64_t not_before = kNow - 30 * kDay;
  int64_t not_after = kNow + 3650 * kDay;
  enum class Bc { kAbsent, kCa, kNotCa } basic_constraints = Bc::kNotCa;
  std::string key_usage = "critical,keyEncipherment";  // empty: none
  std::string eku = kOidTcgKpEkCertificate;            // empty: none
  bool tcg_san = true;
  bool san_critical = true;
  std::string tpm_model = "swtpm";
  std::string policy_oid;  // empty: no certificatePolicies
  bool policy_notice = false;
  bool subject_key_id = false;
  std::vector<RawExtension> extra;
  const EVP_MD* md = EVP_sha256();
};

CertSpec CaSpec(const std::string& cn) {
  CertSpec s;
  s.subject_cn = cn;
  s.serial = 1;
  s.basic_constraints = CertSpec::Bc::kCa;
  s.key_usage = "critical,keyCertSign,cRLSign";
  s.eku.clear();
  s.tcg_san = false;
  s.subject_key_id = true;
  return s;
}

void AddExt(X509* x, X509* issuer, int nid, const std::string& value) {
  X509V3_CTX v3;
  X509V3_set_ctx(&v3, issuer, x, nullptr, nullptr, 0);
  ExtensionPtr ext(X509V3_EXT_nconf_nid(nullptr, &v3, nid, value.c_str()));
  if (!ext || X509_add_ext(x, ext.get(), -1) != 1) throw std::runtime_error("extension " + value);
}

void AddTcgSan(X509* x, bool critical, const std::string& model) {
  X509NamePtr dn(X509_NAME_new());
  const std::pair<const char*, const char*> attrs[] = {
      {kOidTcgAtTpmManufacturer, "id:00001014"},
      {kOidTcgAtTpmModel, model.c_str()},
      {kOidTcgAtTpmVersion, "id:20191023"},
  };
  for (const auto& [oid, value] : attrs) {
    Asn1ObjectPtr obj(OBJ_txt2obj(oid, 1));
    if (X509_NAME_add_entry_by_OBJ(dn.get(), obj.get(), MBSTRING_UTF8,
                                   reinterpret_cast<const unsigned char*>(value), -1, -1, 0) != 1) {
      throw std::runtime_error("SAN attribute");
    }
  }
  GeneralNamePtr gn(GENERAL_NAME_new());
  GENERAL_NAME_set0_value(gn.get(), GEN_DIRNAME, dn.release());
  GeneralNamesPtr names(sk_GENERAL_NAME_new_null());
  sk_GENERAL_NAME_push(names.get(), gn.release());
  if (X509_add1_ext_i2d(x, NID_subject_alt_name, names.get(), critical ? 1 : 0,
                        X509V3_ADD_DEFAULT) != 1) {
    throw std::runtime_error("SAN");
  }
}

void AddPolicy(X509* x, const std::string& oid, bool notice) {
  PolicyInfoPtr info(POLICYINFO_new());
  info->policyid = OBJ_txt2obj(oid.c_str(), 1);
  if (notice) {
    PolicyQualPtr qual(POLICYQUALINFO_new());
    qual->pqualid = OBJ_nid2obj(NID_id_qt_unotice);
    qual->d.usernotice = USERNOTICE_new();
    qual->d.usernotice->exptext = ASN1_UTF8STRING_new();
    ASN1_STRING_set(qual->d.usernotice->exptext, kTcgEkPolicyNotice, -1);
    info->qualifiers = sk_POLICYQUALINFO_new_null();
    sk_POLICYQUALINFO_push(info->qualifiers, qual.release());
  }
  CertPoliciesPtr policies(sk_POLICYINFO_new_null());
  sk_POLICYINFO_push(policies.get(), info.release());
  if (X509_add1_ext_i2d(x, NID_certificate_policies, policies.get(), 0, X509V3_ADD_DEFAULT) != 1) {
    throw std::runtime_error("policies");
  }
}

void AddRawExtension(X509* x, const RawExtension& raw) {
  Asn1ObjectPtr obj(OBJ_txt2obj(raw.oid.c_str(), 1));
  OctetStringPtr value(ASN1_OCTET_STRING_new());
  ASN1_OCTET_STRING_set(value.get(), raw.der.data(), static_cast<int>(raw.der.size()));
  ExtensionPtr ext(
      X509_EXTENSION_create_by_OBJ(nullptr, obj.get(), raw.critical ? 1 : 0, value.get()));
  if (!ext || X509_add_ext(x, ext.get(), -1) != 1) throw std::runtime_error("raw extension");
}

// Issues a certificate for `key`; self-signed when `issuer` is null.
ossl::X509Ptr MakeCert(const CertSpec& spec, EVP_PKEY* key, X509* issuer, EVP_PKEY* issuer_key) {
  ossl::X509Ptr x(X509_new());
  X509_set_version(x.get(), X509_VERSION_3);
  ASN1_INTEGER_set(X509_get_serialNumber(x.get()), spec.serial);
  X509NamePtr subject(X509_NAME_new());
  if (!spec.subject_cn.empty()) {
    X509_NAME_add_entry_by_txt(subject.get(), "CN", MBSTRING_UTF8,
                               reinterpret_cast<const unsigned char*>(spec.subject_cn.c_str()), -1,
                               -1, 0);
  }
  X509_set_subject_name(x.get(), subject.get());
  X509_set_issuer_name(x.get(), issuer != nullptr ? X509_get_subject_name(issuer) : subject.get());
  ASN1_TIME_set(X509_getm_notBefore(x.get()), static_cast<time_t>(spec.not_before));
  ASN1_TIME_set(X509_getm_notAfter(x.get()), static_cast<time_t>(spec.not_after));
  X509_set_pubkey(x.get(), key);

  X509* ext_issuer = issuer != nullptr ? issuer : x.get();
  if (!spec.eku.empty()) AddExt(x.get(), ext_issuer, NID_ext_key_usage, spec.eku);
  if (spec.tcg_san) AddTcgSan(x.get(), spec.san_critical, spec.tpm_model);
  switch (spec.basic_constraints) {
    case CertSpec::Bc::kCa:
      AddExt(x.get(), ext_issuer, NID_basic_constraints, "critical,CA:TRUE");
      break;
    case CertSpec::Bc::kNotCa:
      AddExt(x.get(), ext_issuer, NID_basic_constraints, "critical,CA:FALSE");
      break;
    case CertSpec::Bc::kAbsent:
      break;
  }
  if (!spec.policy_oid.empty()) AddPolicy(x.get(), spec.policy_oid, spec.policy_notice);
  if (spec.subject_key_id) AddExt(x.get(), ext_issuer, NID_subject_key_identifier, "hash");
  if (issuer != nullptr) AddExt(x.get(), issuer, NID_authority_key_identifier, "keyid:always");
  if (!spec.key_usage.empty()) AddExt(x.get(), ext_issuer, NID_key_usage, spec.key_usage);
  for (const RawExtension& raw : spec.extra) AddRawExtension(x.get(), raw);

  if (X509_sign(x.get(), issuer_key, spec.md) <= 0) throw std::runtime_error("sign");
  return x;
}

Bytes Der(X509* x) {
  unsigned char* buf = nullptr;
  const int n = i2d_X509(x, &buf);
  if (n <= 0) throw std::runtime_error("i2d");
  OpensslBytesPtr owner(buf);
  return Bytes(buf, buf + n);
}

Bytes Pem(X509* x) {
  ossl::BioPtr bio(BIO_new(BIO_s_mem()));
  PEM_write_bio_X509(bio.get(), x);
  char* data = nullptr;
  const long n = BIO_get_mem_data(bio.get(), &data);
  return Bytes(data, data + n);
}

Bytes Concat(Bytes a, const Bytes& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

Bytes Str(const std::string& s) { return Bytes(s.begin(), s.end()); }

// The test PKI: root (P-384) -> intermediate (RSA-2048) -> EK certificates.
struct Pki {
  ossl::PkeyPtr root_key = GenEc("P-384");
  ossl::PkeyPtr int_key = GenRsa(2048);
  ossl::PkeyPtr ek_rsa_key = GenRsa(2048);
  ossl::PkeyPtr ek_p384_key = GenEc("P-384");
  ossl::PkeyPtr ek_p256_key = GenEc("P-256");
  ossl::PkeyPtr foreign_key = GenEc("P-256");
  ossl::X509Ptr root;
  ossl::X509Ptr intermediate;
  ossl::X509Ptr foreign_root;
  ossl::X509Ptr foreign_int;

  Pki() {
    root = MakeCert(CaSpec("Test EK Root"), root_key.get(), nullptr, root_key.get());
    intermediate =
        MakeCert(CaSpec("Test EK Intermediate"), int_key.get(), root.get(), root_key.get());
    foreign_root = MakeCert(CaSpec("Test EK Root"), foreign_key.get(), nullptr, foreign_key.get());
    foreign_int = MakeCert(CaSpec("Foreign Intermediate"), foreign_key.get(), foreign_root.get(),
                           foreign_key.get());
  }

  // An EK certificate for `key` issued by the intermediate.
  Bytes Ek(const CertSpec& spec, EVP_PKEY* key) const {
    return Der(MakeCert(spec, key, intermediate.get(), int_key.get()).get());
  }
  Bytes Ek(const CertSpec& spec) const { return Ek(spec, ek_rsa_key.get()); }

  EkTrustStore Store() const {
    EkTrustStore store;
    if (!store.AddRoot(Pem(root.get())).ok()) throw std::runtime_error("AddRoot");
    if (!store.AddIntermediate(Der(intermediate.get())).ok())
      throw std::runtime_error("AddIntermediate");
    return store;
  }
};

class EkCertTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { pki_ = new Pki(); }
  static void TearDownTestSuite() {
    delete pki_;
    pki_ = nullptr;
  }
  static const Pki& pki() { return *pki_; }

  static Status Verify(const Bytes& cert, int64_t now = kNow) {
    return VerifyEkCertificate(pki().Store(), cert, now).status();
  }

  static Pki* pki_;
};

Pki* EkCertTest::pki_ = nullptr;

#define EXPECT_REASON(status_expr, reason_value)                        \
  do {                                                                  \
    const Status s_ = (status_expr);                                    \
    EXPECT_FALSE(s_.ok());                                              \
    EXPECT_EQ(s_.reason(), std::string(reason_value)) << s_.ToString(); \
  } while (0)

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

TEST_F(EkCertTest, RefusesUnsupportedKeys) {
  ossl::PkeyPtr p521 = GenEc("P-521");
  CertSpec spec;
  spec.key_usage = "critical,keyAgreement";
  const Bytes ek = pki().Ek(spec, p521.get());
  const Status s = Verify(ek);
  EXPECT_REASON(s, kEkKeyUnsupported);
  EXPECT_EQ(s.code(), Status::Code::kUnsupported);
  // Parsing still reports the facts.
  Result<EkCertInfo> info = ParseEkCertificate(ek);
  ASSERT_TRUE(info.ok()) << info.status().ToString();
  EXPECT_EQ(info->key_type, kAlgNull);
  EXPECT_EQ(info->key_bits, 521);

  ossl::PkeyPtr rsa1024 = GenRsa(1024);
  EXPECT_REASON(Verify(pki().Ek(CertSpec{}, rsa1024.get())), kEkKeyUnsupported);
}

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
      {"trailing byte after DER", Concat(der, {0x00})},
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

  TpmPublic rsa3072 = good;
  rsa3072.rsa_key_bits = 3072;
  EXPECT_REASON(CheckEkPublicMatchesCertificate(rsa3072, *cert), kEkKeyUnsupported);

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

  TpmPublic p521 = good;
  p521.ecc_curve = 0x0005;
  EXPECT_REASON(CheckEkPublicMatchesCertificate(p521, *cert), kEkKeyUnsupported);

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
  EXPECT_REASON(EkTrustStore::Load({root}, {junk_dir}).status(), kEkTrustStoreInvalid);
  const std::string key =
      dir.Write("key.pem", Str("-----BEGIN PRIVATE KEY-----\nMAA=\n-----END PRIVATE KEY-----\n"));
  EXPECT_REASON(EkTrustStore::Load({root, key}, {}).status(), kEkTrustStoreInvalid);

  // A root must be a self-signed CA.
  EkTrustStore store;
  EXPECT_REASON(store.AddRoot(Pem(pki().intermediate.get())), kEkTrustStoreInvalid);
  EXPECT_REASON(store.AddRoot(pki().Ek(CertSpec{})), kEkTrustStoreInvalid);
  EXPECT_REASON(store.AddRoot(Concat(Pem(pki().root.get()), Pem(pki().intermediate.get()))),
                kEkTrustStoreInvalid);
  EXPECT_EQ(store.root_count(), 0u);  // a refused bundle adds nothing
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
