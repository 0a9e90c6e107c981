// Test support for the EK certificate tests: an in-process test PKI (root,
// intermediate, EK certificates made to order) and the EkCertTest fixture.
// Included by attest/ek_cert_test.cc and attest/ek_cert_inputs_test.cc only.
#ifndef RACKGATE_ATTEST_TESTING_EK_CERT_TEST_PKI_H_
#define RACKGATE_ATTEST_TESTING_EK_CERT_TEST_PKI_H_

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
#include "attest/ek_cert.h"

namespace rackgate::attest::ek_testing {

using testing::ReadFixture;

inline constexpr int64_t kDay = 86400;
inline constexpr int64_t kNow = 1'800'000'000;  // 2027-01-15T08:00:00Z

inline void FreeOpensslBytes(unsigned char* p) { OPENSSL_free(p); }
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
inline constexpr char kSdaDerHex[] = "3019301706056781050210310e300c0c03322e30020100020200a4";

inline ossl::PkeyPtr GenRsa(int bits) {
  ossl::PkeyPtr k(EVP_RSA_gen(static_cast<unsigned>(bits)));
  if (!k) throw std::runtime_error("RSA keygen failed");
  return k;
}

inline ossl::PkeyPtr GenEc(const char* curve) {
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

inline CertSpec CaSpec(const std::string& cn) {
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

inline void AddExt(X509* x, X509* issuer, int nid, const std::string& value) {
  X509V3_CTX v3;
  X509V3_set_ctx(&v3, issuer, x, nullptr, nullptr, 0);
  ExtensionPtr ext(X509V3_EXT_nconf_nid(nullptr, &v3, nid, value.c_str()));
  if (!ext || X509_add_ext(x, ext.get(), -1) != 1) throw std::runtime_error("extension " + value);
}

inline void AddTcgSan(X509* x, bool critical, const std::string& model) {
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

inline void AddPolicy(X509* x, const std::string& oid, bool notice) {
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

inline void AddRawExtension(X509* x, const RawExtension& raw) {
  Asn1ObjectPtr obj(OBJ_txt2obj(raw.oid.c_str(), 1));
  OctetStringPtr value(ASN1_OCTET_STRING_new());
  ASN1_OCTET_STRING_set(value.get(), raw.der.data(), static_cast<int>(raw.der.size()));
  ExtensionPtr ext(
      X509_EXTENSION_create_by_OBJ(nullptr, obj.get(), raw.critical ? 1 : 0, value.get()));
  if (!ext || X509_add_ext(x, ext.get(), -1) != 1) throw std::runtime_error("raw extension");
}

// Issues a certificate for `key`; self-signed when `issuer` is null.
inline ossl::X509Ptr MakeCert(const CertSpec& spec, EVP_PKEY* key, X509* issuer,
                              EVP_PKEY* issuer_key) {
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

inline Bytes Der(X509* x) {
  unsigned char* buf = nullptr;
  const int n = i2d_X509(x, &buf);
  if (n <= 0) throw std::runtime_error("i2d");
  OpensslBytesPtr owner(buf);
  return Bytes(buf, buf + n);
}

inline Bytes Pem(X509* x) {
  ossl::BioPtr bio(BIO_new(BIO_s_mem()));
  PEM_write_bio_X509(bio.get(), x);
  char* data = nullptr;
  const long n = BIO_get_mem_data(bio.get(), &data);
  return Bytes(data, data + n);
}

inline Bytes Concat(Bytes a, const Bytes& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

inline Bytes Str(const std::string& s) { return Bytes(s.begin(), s.end()); }

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

  static inline Pki* pki_ = nullptr;
};

#define EXPECT_REASON(status_expr, reason_value)                        \
  do {                                                                  \
    const Status s_ = (status_expr);                                    \
    EXPECT_FALSE(s_.ok());                                              \
    EXPECT_EQ(s_.reason(), std::string(reason_value)) << s_.ToString(); \
  } while (0)

}  // namespace rackgate::attest::ek_testing

#endif  // RACKGATE_ATTEST_TESTING_EK_CERT_TEST_PKI_H_
