// Tests for the local cluster-CA signer (core/signer.h) and the cluster CA.
#include "core/signer.h"

#include <gtest/gtest.h>

#include "core/testing/csr_test_util.h"

namespace rackgate::core::csr {
namespace {

using namespace test_util;  // NOLINT: the helpers of every CSR test

// ---------------------------------------------------------------- signing

class SignerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    Status s = GenerateClusterCa("rackgate lab cluster CA", 30, dir_ / "ca.pem", dir_ / "ca.key");
    ASSERT_TRUE(s.ok()) << s.ToString();
    auto signer = LocalCaSigner::Load(dir_ / "ca.pem", dir_ / "ca.key");
    ASSERT_TRUE(signer.ok()) << signer.status().ToString();
    signer_ = std::move(*signer);
  }

  Issued MustSign(const Csr& csr, Kind kind, int64_t now = std::time(nullptr)) {
    auto issued = signer_->Sign(csr, DefaultProfile(kind), now);
    if (!issued.ok()) throw std::runtime_error(issued.status().ToString());
    return std::move(issued).value();
  }

  // `openssl verify` against the CA, for `purpose` (sslclient/sslserver).
  void ExpectOpensslVerifies(const Issued& issued, const char* purpose) {
    if (!HaveOpenssl()) return;
    WriteText(dir_ / "leaf.pem", issued.certificate_pem);
    std::string out;
    EXPECT_EQ(Shell(std::string(kOpenssl) + " verify -x509_strict -purpose " + purpose + " -CAfile " +
                      (dir_ / "ca.pem") + " " + (dir_ / "leaf.pem"),
                  &out),
              0)
        << out;
  }

  TempDir dir_;
  std::unique_ptr<LocalCaSigner> signer_;
};

std::set<std::string> Eku(X509* cert) {
  std::set<std::string> out;
  ossl::EkuPtr eku(static_cast<EXTENDED_KEY_USAGE*>(X509_get_ext_d2i(cert, NID_ext_key_usage, nullptr, nullptr)));
  for (int i = 0; eku && i < sk_ASN1_OBJECT_num(eku.get()); ++i) {
    out.insert(OBJ_nid2sn(OBJ_obj2nid(sk_ASN1_OBJECT_value(eku.get(), i))));
  }
  return out;
}

std::vector<std::string> SubjectEntries(X509* cert) {
  std::vector<std::string> out;
  X509_NAME* name = X509_get_subject_name(cert);
  for (int i = 0; i < X509_NAME_entry_count(name); ++i) {
    X509_NAME_ENTRY* e = X509_NAME_get_entry(name, i);
    const ASN1_STRING* v = X509_NAME_ENTRY_get_data(e);
    out.push_back(std::string(OBJ_nid2sn(OBJ_obj2nid(X509_NAME_ENTRY_get_object(e)))) + "=" +
                  std::string(reinterpret_cast<const char*>(ASN1_STRING_get0_data(v)),
                              static_cast<size_t>(ASN1_STRING_length(v))));
  }
  return out;
}

int64_t UnixTime(const ASN1_TIME* t) {
  struct tm tm = {};
  ASN1_TIME_to_tm(t, &tm);
  return timegm(&tm);
}

TEST_F(SignerTest, IssuesClientCertificate) {
  auto key = NewKey("EC", "P-256");
  Csr csr = MustParse(MakeCsr(key.get()));
  const int64_t now = std::time(nullptr);
  Issued issued = MustSign(csr, Kind::kClient, now);
  ExpectOpensslVerifies(issued, "sslclient");
  EXPECT_EQ(issued.ca_pem, ReadText(dir_ / "ca.pem"));
  EXPECT_EQ(issued.ca_pem, signer_->ca_pem());

  auto cert = CertFromPem(issued.certificate_pem);
  ASSERT_TRUE(cert);
  EXPECT_EQ(SubjectEntries(cert.get()), (Rs{"O=system:nodes", "CN=system:node:node-a"}));
  EXPECT_EQ(X509_get_ext_by_NID(cert.get(), NID_subject_alt_name, -1), -1) << "no SAN on a client cert";
  EXPECT_EQ(Eku(cert.get()), std::set<std::string>{"clientAuth"});
  EXPECT_EQ(X509_get_key_usage(cert.get()), static_cast<uint32_t>(KU_DIGITAL_SIGNATURE));
  const uint32_t flags = X509_get_extension_flags(cert.get());
  EXPECT_FALSE(flags & EXFLAG_CA);
  EXPECT_TRUE(flags & EXFLAG_BCONS);
  int crit = 0;
  BASIC_CONSTRAINTS* bc = static_cast<BASIC_CONSTRAINTS*>(X509_get_ext_d2i(cert.get(), NID_basic_constraints, &crit, nullptr));
  ASSERT_NE(bc, nullptr);
  EXPECT_EQ(crit, 1);
  BASIC_CONSTRAINTS_free(bc);
  ASSERT_NE(X509_get0_subject_key_id(cert.get()), nullptr);
  auto ca = CertFromPem(issued.ca_pem);
  const ASN1_OCTET_STRING* akid = X509_get0_authority_key_id(cert.get());
  ASSERT_NE(akid, nullptr);
  EXPECT_EQ(ASN1_OCTET_STRING_cmp(akid, X509_get0_subject_key_id(ca.get())), 0);

  EXPECT_EQ(issued.not_before, now - 300);
  EXPECT_EQ(issued.not_after, now + 365 * 86400 < UnixTime(X509_get0_notAfter(ca.get()))
                                  ? now + 365 * 86400
                                  : UnixTime(X509_get0_notAfter(ca.get())));
  EXPECT_EQ(UnixTime(X509_get0_notBefore(cert.get())), issued.not_before);
  EXPECT_EQ(UnixTime(X509_get0_notAfter(cert.get())), issued.not_after);

  EXPECT_EQ(issued.serial_hex.size(), 32u);
  ossl::BnPtr serial(ASN1_INTEGER_to_BN(X509_get0_serialNumber(cert.get()), nullptr));
  char* hex = BN_bn2hex(serial.get());
  std::string want = issued.serial_hex;
  want.erase(0, want.find_first_not_of('0'));
  std::string got(hex);
  for (auto& c : got) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  got.erase(0, got.find_first_not_of('0'));
  OPENSSL_free(hex);
  EXPECT_EQ(got, want);
  EXPECT_FALSE(BN_is_negative(serial.get()));
  EXPECT_EQ(X509_get_signature_nid(cert.get()), NID_ecdsa_with_SHA256);
  EXPECT_EQ(EVP_PKEY_eq(X509_get0_pubkey(cert.get()), key.get()), 1);
}

TEST_F(SignerTest, IssuesServingCertificateWithCanonicalSans) {
  auto key = NewKey("EC", "P-256");
  CsrSpec spec;
  spec.san = "DNS:NODE-A.Rack1.Example.COM.,DNS:node-a,IP:10.0.0.5,IP:fd00:0:0:0:0:0:0:5";
  Csr csr = MustParse(MakeCsr(key.get(), spec));
  ASSERT_TRUE(CheckServing(csr).empty());
  Issued issued = MustSign(csr, Kind::kServing);
  ExpectOpensslVerifies(issued, "sslserver");
  auto cert = CertFromPem(issued.certificate_pem);
  ASSERT_TRUE(cert);
  EXPECT_EQ(Eku(cert.get()), std::set<std::string>{"serverAuth"});
  EXPECT_EQ(X509_check_host(cert.get(), "node-a.rack1.example.com", 0, 0, nullptr), 1);
  EXPECT_EQ(X509_check_ip_asc(cert.get(), "fd00::5", 0), 1);
  EXPECT_EQ(X509_check_ip_asc(cert.get(), "10.0.0.5", 0), 1);
  // The issued certificate is itself a parseable, canonical set of SANs.
  ossl::GeneralNamesPtr names(static_cast<GENERAL_NAMES*>(
      X509_get_ext_d2i(cert.get(), NID_subject_alt_name, nullptr, nullptr)));
  ASSERT_TRUE(names);
  std::vector<std::string> dns;
  for (int i = 0; i < sk_GENERAL_NAME_num(names.get()); ++i) {
    const GENERAL_NAME* gn = sk_GENERAL_NAME_value(names.get(), i);
    if (gn->type == GEN_DNS) {
      dns.emplace_back(reinterpret_cast<const char*>(ASN1_STRING_get0_data(gn->d.dNSName)),
                       static_cast<size_t>(ASN1_STRING_length(gn->d.dNSName)));
    }
  }
  EXPECT_EQ(dns, (Rs{"node-a.rack1.example.com", "node-a"}));
  EXPECT_EQ(sk_GENERAL_NAME_num(names.get()), 4);
}

TEST_F(SignerTest, RsaKeysAlsoGetKeyEncipherment) {
  auto key = NewKey("RSA", "2048");
  Issued issued = MustSign(MustParse(MakeCsr(key.get())), Kind::kClient);
  ExpectOpensslVerifies(issued, "sslclient");
  auto cert = CertFromPem(issued.certificate_pem);
  EXPECT_EQ(X509_get_key_usage(cert.get()),
            static_cast<uint32_t>(KU_DIGITAL_SIGNATURE | KU_KEY_ENCIPHERMENT));
}

// The signer copies the request's SubjectPublicKeyInfo into the certificate
// without re-encoding the key: the certificate's SPKI is byte for byte what
// OpenSSL encodes for the key, for each accepted kind, and for a request that
// sent a compressed point (re-encoded once, at parsing).
TEST_F(SignerTest, CertificateCarriesTheCanonicalKey) {
  auto der_of = [](auto&& encode) {
    unsigned char* der = nullptr;
    const int n = encode(&der);
    Bytes out(der, der + std::max(n, 0));
    OPENSSL_free(der);
    return out;
  };
  std::vector<std::pair<std::string, ossl::PkeyPtr>> keys;
  keys.emplace_back("P-256", NewKey("EC", "P-256"));
  keys.emplace_back("P-384", NewKey("EC", "P-384"));
  keys.emplace_back("RSA-2048", NewKey("RSA", "2048"));
  keys.emplace_back("P-256 compressed", NewKey("EC", "P-256"));
  ASSERT_EQ(EVP_PKEY_set_utf8_string_param(keys.back().second.get(), OSSL_PKEY_PARAM_EC_POINT_CONVERSION_FORMAT,
                                           OSSL_PKEY_EC_POINT_CONVERSION_FORMAT_COMPRESSED),
            1);
  for (const auto& [name, key] : keys) {
    Csr csr = MustParse(MakeCsr(key.get()));
    auto cert = CertFromPem(MustSign(csr, Kind::kClient).certificate_pem);
    ASSERT_TRUE(cert) << name;
    const Bytes in_cert = der_of([&](unsigned char** out) { return i2d_X509_PUBKEY(X509_get_X509_PUBKEY(cert.get()), out); });
    ossl::PkeyPtr uncompressed(EVP_PKEY_dup(key.get()));
    if (name == "P-256 compressed") {
      ASSERT_EQ(EVP_PKEY_set_utf8_string_param(uncompressed.get(), OSSL_PKEY_PARAM_EC_POINT_CONVERSION_FORMAT,
                                               OSSL_PKEY_EC_POINT_CONVERSION_FORMAT_UNCOMPRESSED),
                1);
    }
    const Bytes canonical = der_of([&](unsigned char** out) { return i2d_PUBKEY(uncompressed.get(), out); });
    EXPECT_FALSE(canonical.empty()) << name;
    EXPECT_EQ(csr.spki_der, canonical) << name;
    EXPECT_EQ(in_cert, canonical) << name;
    EXPECT_EQ(EVP_PKEY_eq(X509_get0_pubkey(cert.get()), key.get()), 1) << name;
  }
}

TEST_F(SignerTest, NeverOutlivesTheCa) {
  auto key = NewKey("EC", "P-256");
  Csr csr = MustParse(MakeCsr(key.get()));
  auto ca = CertFromPem(signer_->ca_pem());
  const int64_t ca_end = UnixTime(X509_get0_notAfter(ca.get()));
  Issued issued = MustSign(csr, Kind::kClient);
  EXPECT_EQ(issued.not_after, ca_end) << "30-day CA, one-year profile";
  auto late = signer_->Sign(csr, DefaultProfile(Kind::kClient), ca_end);
  EXPECT_EQ(late.status().reason(), "ca_expired");
}

TEST_F(SignerTest, RefusesBadProfilesAndSubjects) {
  auto key = NewKey("EC", "P-256");
  Csr csr = MustParse(MakeCsr(key.get()));
  Profile p = DefaultProfile(Kind::kClient);
  p.validity_seconds = 0;
  EXPECT_EQ(signer_->Sign(csr, p, std::time(nullptr)).status().reason(), "csr_profile_invalid");
  csr.common_names.push_back("system:node:node-b");
  EXPECT_EQ(signer_->Sign(csr, DefaultProfile(Kind::kClient), std::time(nullptr)).status().reason(),
            "csr_subject_common_name");
  Csr no_sans = MustParse(MakeCsr(key.get()));
  EXPECT_EQ(signer_->Sign(no_sans, DefaultProfile(Kind::kServing), std::time(nullptr)).status().reason(),
            "csr_serving_no_sans");
}

// Sign is thread-safe: concurrent issuance yields distinct, valid serials.
TEST_F(SignerTest, ConcurrentSigning) {
  auto key = NewKey("EC", "P-256");
  Csr csr = MustParse(MakeCsr(key.get()));
  constexpr int kThreads = 4, kEach = 25;
  std::vector<std::vector<std::string>> serials(kThreads);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < kEach; ++i) {
        auto issued = signer_->Sign(csr, DefaultProfile(Kind::kClient), std::time(nullptr));
        if (issued.ok() && CertFromPem(issued->certificate_pem)) serials[t].push_back(issued->serial_hex);
      }
    });
  }
  for (auto& th : threads) th.join();
  std::set<std::string> all;
  for (const auto& v : serials) all.insert(v.begin(), v.end());
  EXPECT_EQ(all.size(), static_cast<size_t>(kThreads * kEach));
}

TEST_F(SignerTest, GenerateRefusesToOverwrite) {
  EXPECT_EQ(GenerateClusterCa("x", 30, dir_ / "ca.pem", dir_ / "other.key").reason(), "pki_exists");
  EXPECT_EQ(GenerateClusterCa("x", 30, dir_ / "other.pem", dir_ / "ca.key").reason(), "pki_exists");
  struct stat st = {};
  ASSERT_EQ(::stat((dir_ / "ca.key").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  EXPECT_TRUE(ValidateClusterCa(dir_ / "ca.pem", dir_ / "ca.key").ok());
}

// A P-384 CA made the way an operator might make one; signs with SHA-384.
TEST(ClusterCa, P384CaSignsWithSha384) {
  if (!HaveOpenssl()) GTEST_SKIP() << "no " << kOpenssl;
  TempDir dir;
  std::string out;
  ASSERT_EQ(Shell(std::string(kOpenssl) +
                    " req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-384 -nodes -days 30"
                    " -subj '/CN=cluster CA' -keyout " + (dir / "ca.key") + " -out " + (dir / "ca.pem") +
                    " -addext basicConstraints=critical,CA:TRUE -addext keyUsage=critical,keyCertSign,cRLSign",
                &out),
            0)
      << out;
  ASSERT_TRUE(ValidateClusterCa(dir / "ca.pem", dir / "ca.key").ok());
  auto signer = LocalCaSigner::Load(dir / "ca.pem", dir / "ca.key");
  ASSERT_TRUE(signer.ok()) << signer.status().ToString();
  auto key = NewKey("EC", "P-256");
  auto issued = (*signer)->Sign(MustParse(MakeCsr(key.get())), DefaultProfile(Kind::kClient), std::time(nullptr));
  ASSERT_TRUE(issued.ok()) << issued.status().ToString();
  auto cert = CertFromPem(issued->certificate_pem);
  EXPECT_EQ(X509_get_signature_nid(cert.get()), NID_ecdsa_with_SHA384);
  WriteText(dir / "leaf.pem", issued->certificate_pem);
  EXPECT_EQ(Shell(std::string(kOpenssl) + " verify -CAfile " + (dir / "ca.pem") + " " + (dir / "leaf.pem"), &out), 0)
      << out;
}

// Writes a self-signed certificate for `key` with the given CA bits and
// validity (days relative to now) to `path`.
void WriteSelfSigned(EVP_PKEY* key, bool ca, bool cert_sign, int from_days, int to_days,
                     const std::string& path) {
  ossl::X509Ptr cert(X509_new());
  X509_set_version(cert.get(), X509_VERSION_3);
  ASN1_INTEGER_set(X509_get_serialNumber(cert.get()), 1);
  X509_gmtime_adj(X509_getm_notBefore(cert.get()), static_cast<long>(from_days) * 86400);
  X509_gmtime_adj(X509_getm_notAfter(cert.get()), static_cast<long>(to_days) * 86400);
  X509_NAME_add_entry_by_txt(X509_get_subject_name(cert.get()), "CN", MBSTRING_UTF8,
                             reinterpret_cast<const unsigned char*>("ca"), -1, -1, 0);
  X509_set_issuer_name(cert.get(), X509_get_subject_name(cert.get()));
  X509_set_pubkey(cert.get(), key);
  auto add = [&](int nid, const char* value) {
    X509V3_CTX ctx;
    X509V3_set_ctx_nodb(&ctx);
    X509V3_set_ctx(&ctx, cert.get(), cert.get(), nullptr, nullptr, 0);
    ossl::ExtPtr ext(X509V3_EXT_conf_nid(nullptr, &ctx, nid, value));
    X509_add_ext(cert.get(), ext.get(), -1);
  };
  add(NID_basic_constraints, ca ? "critical,CA:TRUE" : "critical,CA:FALSE");
  add(NID_key_usage, cert_sign ? "critical,keyCertSign" : "critical,digitalSignature");
  X509_sign(cert.get(), key, EVP_sha256());
  ossl::BioPtr bio(BIO_new_file(path.c_str(), "w"));
  PEM_write_bio_X509(bio.get(), cert.get());
}

void WriteKey(EVP_PKEY* key, const std::string& path, const char* passphrase = nullptr) {
  ossl::BioPtr bio(BIO_new_file(path.c_str(), "w"));
  if (passphrase) {
    PEM_write_bio_PrivateKey(bio.get(), key, EVP_aes_256_cbc(), nullptr, 0, nullptr,
                             const_cast<char*>(passphrase));
  } else {
    PEM_write_bio_PrivateKey(bio.get(), key, nullptr, nullptr, 0, nullptr, nullptr);
  }
}

TEST(ClusterCa, ValidateRefusesUnusableCas) {
  TempDir dir;
  auto key = NewKey("EC", "P-256");
  auto other = NewKey("EC", "P-256");
  WriteKey(key.get(), dir / "key.pem");
  auto validate = [&](bool ca, bool cert_sign, int from, int to) {
    WriteSelfSigned(key.get(), ca, cert_sign, from, to, dir / "ca.pem");
    return ValidateClusterCa(dir / "ca.pem", dir / "key.pem").reason();
  };
  EXPECT_EQ(validate(true, true, -1, 30), "");
  EXPECT_EQ(validate(false, true, -1, 30), "ca_invalid") << "CA:FALSE";
  EXPECT_EQ(validate(true, false, -1, 30), "ca_invalid") << "no keyCertSign";
  EXPECT_EQ(validate(true, true, -30, -1), "ca_expired");
  EXPECT_EQ(validate(true, true, 1, 30), "ca_invalid") << "not yet valid";

  WriteSelfSigned(key.get(), true, true, -1, 30, dir / "ca.pem");
  WriteKey(other.get(), dir / "other.pem");
  EXPECT_EQ(ValidateClusterCa(dir / "ca.pem", dir / "other.pem").reason(), "ca_key_mismatch");
  // An encrypted key fails instead of prompting for a passphrase.
  WriteKey(key.get(), dir / "enc.pem", "secret");
  EXPECT_EQ(ValidateClusterCa(dir / "ca.pem", dir / "enc.pem").reason(), "ca_invalid");
  Status missing = ValidateClusterCa(dir / "nope.pem", dir / "key.pem");
  EXPECT_EQ(missing.code(), Status::Code::kIoError);
  EXPECT_FALSE(LocalCaSigner::Load(dir / "ca.pem", dir / "other.pem").ok());

  auto rsa = NewKey("RSA", "1024");
  WriteKey(rsa.get(), dir / "rsa.pem");
  WriteSelfSigned(rsa.get(), true, true, -1, 30, dir / "rsa-ca.pem");
  EXPECT_EQ(ValidateClusterCa(dir / "rsa-ca.pem", dir / "rsa.pem").reason(), "ca_key_unsupported");
}

}  // namespace
}  // namespace rackgate::core::csr
