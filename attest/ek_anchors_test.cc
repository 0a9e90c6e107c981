// Tests of the EK trust anchors as operators configure them (issue 41): every
// CA in ek_roots anchors a path, what loading skips is noted, and the
// per-anchor relaxations (sha1, expired-ca, no-ek-marks).
#include "attest/ek_cert.h"

#include <gtest/gtest.h>

#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "attest/testing/ek_cert_test_pki.h"

namespace rackgate::attest {
namespace {

using ek_testing::CaSpec;
using ek_testing::CertSpec;
using ek_testing::Der;
using ek_testing::EkCertTest;
using ek_testing::kDay;
using ek_testing::kNow;
using ek_testing::MakeCert;
using ek_testing::Pem;
using ek_testing::Pki;

std::string Sha256Of(X509* x) {
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  if (X509_digest(x, EVP_sha256(), md, &len) != 1) throw std::runtime_error("digest");
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out;
  for (unsigned i = 0; i < len; ++i) {
    out.push_back(kHex[md[i] >> 4]);
    out.push_back(kHex[md[i] & 0xf]);
  }
  return out;
}

std::string Upper(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return std::toupper(c); });
  return s;
}

// --- anchors ----------------------------------------------------------------

TEST_F(EkCertTest, AnchorsDescribeEachConfiguredRoot) {
  EkTrustStore store = pki().Store();
  const std::vector<EkAnchor> anchors = store.Anchors();
  ASSERT_EQ(anchors.size(), 1u);
  const EkAnchor& a = anchors[0];
  EXPECT_EQ(a.subject, "CN=Test EK Root");
  EXPECT_EQ(a.issuer, "CN=Test EK Root");
  EXPECT_TRUE(a.self_signed);
  EXPECT_EQ(a.key, "ECC P-384");
  EXPECT_EQ(a.not_after, kNow + 3650 * kDay);
  EXPECT_EQ(a.sha256, Sha256Of(pki().root.get()));
  EXPECT_EQ(a.source, "");
  EXPECT_TRUE(a.relaxations.empty());
  EXPECT_TRUE(store.LoadNotes().empty());

  Result<EkCertInfo> info = VerifyEkCertificate(store, pki().Ek(CertSpec{}), kNow);
  ASSERT_TRUE(info.ok()) << info.status().ToString();
  EXPECT_EQ(info->anchor_sha256, a.sha256);
  EXPECT_EQ(info->anchor_subject, "CN=Test EK Root");
  EXPECT_TRUE(info->relaxations_used.empty());
  // A parse alone names no anchor.
  Result<EkCertInfo> parsed = ParseEkCertificate(pki().Ek(CertSpec{}));
  ASSERT_TRUE(parsed.ok());
  EXPECT_TRUE(parsed->anchor_sha256.empty());
}

TEST_F(EkCertTest, AllowForAnchorGrantsKnownRelaxationsToKnownAnchors) {
  EkTrustStore store = pki().Store();
  const std::string sha = Sha256Of(pki().root.get());
  EXPECT_TRUE(store.AllowForAnchor(Upper(sha), kEkRelaxSha1).ok());  // any case
  EXPECT_TRUE(store.AllowForAnchor(sha, kEkRelaxExpiredCa).ok());
  EXPECT_TRUE(store.AllowForAnchor(sha, kEkRelaxSha1).ok());  // twice: no error, once listed
  EXPECT_EQ(store.Anchors()[0].relaxations,
            (std::vector<std::string>{kEkRelaxSha1, kEkRelaxExpiredCa}));

  EXPECT_REASON(store.AllowForAnchor(sha, "md5"), kEkTrustStoreInvalid);
  EXPECT_REASON(store.AllowForAnchor(Sha256Of(pki().intermediate.get()), kEkRelaxSha1),
                kEkTrustStoreInvalid);
  EXPECT_REASON(store.AllowForAnchor("", kEkRelaxNoEkMarks), kEkTrustStoreInvalid);
  EXPECT_EQ(store.Anchors()[0].relaxations.size(), 2u);  // refusals changed nothing
}


// A vendor CA that is not self-signed anchors what it issued, without the
// root above it (STMicro's ECC root under GlobalSign's; issue 41).
TEST_F(EkCertTest, NonSelfSignedCaIsAnAnchor) {
  EkTrustStore store;
  ASSERT_TRUE(store.AddRoot(Pem(pki().intermediate.get())).ok());
  ASSERT_EQ(store.Anchors().size(), 1u);
  EXPECT_FALSE(store.Anchors()[0].self_signed);
  EXPECT_EQ(store.Anchors()[0].issuer, "CN=Test EK Root");
  EXPECT_EQ(store.Anchors()[0].key, "RSA-2048");
  Result<EkCertInfo> info = VerifyEkCertificate(store, pki().Ek(CertSpec{}), kNow);
  ASSERT_TRUE(info.ok()) << info.status().ToString();
  EXPECT_EQ(info->anchor_sha256, Sha256Of(pki().intermediate.get()));
  EXPECT_EQ(info->anchor_subject, "CN=Test EK Intermediate");
  // Still only what it issued: a leaf of another CA is refused.
  EkTrustStore foreign;
  ASSERT_TRUE(foreign.AddRoot(Pem(pki().foreign_int.get())).ok());
  EXPECT_REASON(VerifyEkCertificate(foreign, pki().Ek(CertSpec{}), kNow).status(),
                kEkCertMissingIntermediate);
}

TEST_F(EkCertTest, NonCaInARootBundleIsNotedAndSkipped) {
  EkTrustStore store;
  ASSERT_TRUE(store.AddRoot(ek_testing::Concat(Pem(pki().root.get()),
                                               Pem(MakeCert(CertSpec{}, pki().ek_rsa_key.get(),
                                                            pki().intermediate.get(),
                                                            pki().int_key.get())
                                                       .get())))
                  .ok());
  EXPECT_EQ(store.root_count(), 1u);
  ASSERT_EQ(store.LoadNotes().size(), 1u);
  EXPECT_EQ(store.LoadNotes()[0],
            "(memory): CN=unknown: skipped: not a CA (needs basicConstraints CA:TRUE and, if it "
            "has a key usage, keyCertSign)");
}

// A CA cross-signed by another root: the copy in ek_roots anchors the path,
// whoever signed it.
TEST_F(EkCertTest, CrossSignedCaIsAnAnchor) {
  ossl::PkeyPtr other_key = ek_testing::GenEc("P-256");
  ossl::X509Ptr other_root =
      MakeCert(CaSpec("Other Root"), other_key.get(), nullptr, other_key.get());
  ossl::X509Ptr cross = MakeCert(CaSpec("Test EK Intermediate"), pki().int_key.get(),
                                 other_root.get(), other_key.get());
  EkTrustStore store;
  ASSERT_TRUE(store.AddRoot(Der(cross.get())).ok());
  EXPECT_FALSE(store.Anchors()[0].self_signed);
  Result<EkCertInfo> info = VerifyEkCertificate(store, pki().Ek(CertSpec{}), kNow);
  ASSERT_TRUE(info.ok()) << info.status().ToString();
  EXPECT_EQ(info->anchor_sha256, Sha256Of(cross.get()));
}

// A folder as vendors and Keylime ship it: roots, intermediates, a sample EK
// certificate and a README. The CAs anchor, the rest is noted.
TEST_F(EkCertTest, MixedFolderIsSortedNotRefused) {
  const std::string dir = ::testing::TempDir() + "/ek_mixed_" + std::to_string(::getpid());
  std::filesystem::create_directories(dir);
  auto write = [&](const std::string& name, const Bytes& data) {
    std::ofstream(dir + "/" + name, std::ios::binary)
        .write(reinterpret_cast<const char*>(data.data()), static_cast<std::streamsize>(data.size()));
  };
  write("a-root.pem", Pem(pki().root.get()));
  write("b-intermediate.der", Der(pki().intermediate.get()));
  write("c-sample-ek.pem", Pem(MakeCert(CertSpec{}, pki().ek_rsa_key.get(),
                                        pki().intermediate.get(), pki().int_key.get())
                                   .get()));
  write("d-README", ek_testing::Str("vendor roots, see the web site\n"));
  Result<EkTrustStore> store = EkTrustStore::Load({dir}, {});
  std::filesystem::remove_all(dir);
  ASSERT_TRUE(store.ok()) << store.status().ToString();
  const std::vector<EkAnchor> anchors = store->Anchors();
  ASSERT_EQ(anchors.size(), 2u);
  EXPECT_TRUE(anchors[0].self_signed);
  EXPECT_FALSE(anchors[1].self_signed);
  EXPECT_EQ(anchors[1].source, dir + "/b-intermediate.der");
  const std::vector<std::string> notes = store->LoadNotes();
  ASSERT_EQ(notes.size(), 2u);
  EXPECT_NE(notes[0].find("c-sample-ek.pem: skipped: no CA certificate"), std::string::npos)
      << notes[0];
  EXPECT_NE(notes[1].find("d-README: skipped"), std::string::npos) << notes[1];
  // The path ends at the first anchor reached from the leaf: the intermediate.
  Result<EkCertInfo> info = VerifyEkCertificate(*store, pki().Ek(CertSpec{}), kNow);
  ASSERT_TRUE(info.ok()) << info.status().ToString();
  EXPECT_EQ(info->anchor_sha256, anchors[1].sha256);
}

// --- per-anchor relaxations ---------------------------------------------------

// A vendor chain as issue 41 found them: root -> intermediate -> EK
// certificates, with the intermediate made to order.
struct VendorChain {
  ossl::PkeyPtr root_key = ek_testing::GenEc("P-384");
  ossl::PkeyPtr int_key = ek_testing::GenRsa(2048);
  ossl::X509Ptr root;
  ossl::X509Ptr intermediate;

  explicit VendorChain(const CertSpec& int_spec) {
    root = MakeCert(CaSpec("Vendor Root"), root_key.get(), nullptr, root_key.get());
    intermediate = MakeCert(int_spec, int_key.get(), root.get(), root_key.get());
  }
  Bytes Ek(const CertSpec& spec, EVP_PKEY* key) const {
    return Der(MakeCert(spec, key, intermediate.get(), int_key.get()).get());
  }
  // The vendor root, beside the test PKI's root (another vendor).
  EkTrustStore Store(const Pki& other) const {
    EkTrustStore store;
    if (!store.AddRoot(Pem(root.get())).ok() || !store.AddRoot(Pem(other.root.get())).ok() ||
        !store.AddIntermediate(Der(intermediate.get())).ok()) {
      throw std::runtime_error("store");
    }
    return store;
  }
  std::string RootSha() const { return Sha256Of(root.get()); }
};

void ExpectHint(const Status& s, const std::string& relaxation, const std::string& anchor) {
  EXPECT_NE(s.message().find("grant \"" + relaxation + "\" to anchor " + anchor),
            std::string::npos)
      << s.ToString();
}

TEST_F(EkCertTest, Sha1VendorCaNeedsTheSha1Relaxation) {
  CertSpec int_spec = CaSpec("Vendor SHA-1 Intermediate");
  int_spec.md = EVP_sha1();
  const VendorChain vendor(int_spec);
  const Bytes ek = vendor.Ek(CertSpec{}, pki().ek_rsa_key.get());
  EkTrustStore store = vendor.Store(pki());

  // Refused by default, naming the setting and the anchor.
  Result<EkCertInfo> refused = VerifyEkCertificate(store, ek, kNow);
  EXPECT_REASON(refused.status(), kEkCertWeakCrypto);
  ExpectHint(refused.status(), kEkRelaxSha1, vendor.RootSha());
  // Granted to another anchor, or another relaxation granted: still refused.
  ASSERT_TRUE(store.AllowForAnchor(Sha256Of(pki().root.get()), kEkRelaxSha1).ok());
  ASSERT_TRUE(store.AllowForAnchor(vendor.RootSha(), kEkRelaxExpiredCa).ok());
  EXPECT_REASON(VerifyEkCertificate(store, ek, kNow).status(), kEkCertWeakCrypto);

  ASSERT_TRUE(store.AllowForAnchor(vendor.RootSha(), kEkRelaxSha1).ok());
  Result<EkCertInfo> info = VerifyEkCertificate(store, ek, kNow);
  ASSERT_TRUE(info.ok()) << info.status().ToString();
  EXPECT_EQ(info->anchor_sha256, vendor.RootSha());
  EXPECT_EQ(info->relaxations_used, std::vector<std::string>{kEkRelaxSha1});
  // A SHA-256 chain under the same anchor uses no relaxation.
  const VendorChain modern(CaSpec("Vendor SHA-256 Intermediate"));
  EkTrustStore modern_store = modern.Store(pki());
  ASSERT_TRUE(modern_store.AllowForAnchor(modern.RootSha(), kEkRelaxSha1).ok());
  Result<EkCertInfo> plain =
      VerifyEkCertificate(modern_store, modern.Ek(CertSpec{}, pki().ek_rsa_key.get()), kNow);
  ASSERT_TRUE(plain.ok()) << plain.status().ToString();
  EXPECT_TRUE(plain->relaxations_used.empty());
}

TEST_F(EkCertTest, Sha1RelaxationDoesNotAdmitMd5) {
  const VendorChain vendor(CaSpec("Vendor Intermediate"));
  EkTrustStore store = vendor.Store(pki());
  ASSERT_TRUE(store.AllowForAnchor(vendor.RootSha(), kEkRelaxSha1).ok());
  CertSpec md5;
  md5.md = EVP_md5();
  const Status s = VerifyEkCertificate(store, vendor.Ek(md5, pki().ek_rsa_key.get()), kNow).status();
  EXPECT_REASON(s, kEkCertWeakCrypto);
  EXPECT_EQ(s.message().find("grant"), std::string::npos) << s.ToString();
}

// Infineon's EK intermediate that expired in 2025 while its TPMs serve on.
TEST_F(EkCertTest, ExpiredVendorIntermediateNeedsTheExpiredCaRelaxation) {
  CertSpec int_spec = CaSpec("Vendor Expired Intermediate");
  int_spec.not_before = kNow - 3000 * kDay;
  int_spec.not_after = kNow - 10 * kDay;
  const VendorChain vendor(int_spec);
  CertSpec leaf;
  leaf.not_before = kNow - 2000 * kDay;
  const Bytes ek = vendor.Ek(leaf, pki().ek_rsa_key.get());
  EkTrustStore store = vendor.Store(pki());

  Result<EkCertInfo> refused = VerifyEkCertificate(store, ek, kNow);
  EXPECT_REASON(refused.status(), kEkCertExpired);
  ExpectHint(refused.status(), kEkRelaxExpiredCa, vendor.RootSha());
  ASSERT_TRUE(store.AllowForAnchor(vendor.RootSha(), kEkRelaxSha1).ok());
  EXPECT_REASON(VerifyEkCertificate(store, ek, kNow).status(), kEkCertExpired);

  ASSERT_TRUE(store.AllowForAnchor(vendor.RootSha(), kEkRelaxExpiredCa).ok());
  Result<EkCertInfo> info = VerifyEkCertificate(store, ek, kNow);
  ASSERT_TRUE(info.ok()) << info.status().ToString();
  EXPECT_EQ(info->relaxations_used, std::vector<std::string>{kEkRelaxExpiredCa});

  // The leaf's own validity stays strict.
  CertSpec expired_leaf = leaf;
  expired_leaf.not_after = kNow - kDay;
  const Status s = VerifyEkCertificate(store, vendor.Ek(expired_leaf, pki().ek_rsa_key.get()), kNow)
                       .status();
  EXPECT_REASON(s, kEkCertExpired);
  EXPECT_EQ(s.message().find("grant"), std::string::npos) << s.ToString();
  // Not yet valid is never relaxed either.
  EXPECT_REASON(VerifyEkCertificate(store, ek, int_spec.not_before - kDay).status(),
                kEkCertNotYetValid);
}

// A cloud vTPM EK certificate as Google issues it: no EKU, no certificate
// policy, no TCG SubjectAltName; keyEncipherment only.
CertSpec CloudVtpmEkSpec() {
  CertSpec spec;
  spec.subject_cn = "6524697943022743941";
  spec.eku.clear();
  spec.tcg_san = false;
  spec.key_usage = "critical,keyEncipherment";
  spec.subject_key_id = true;
  return spec;
}

TEST_F(EkCertTest, CloudVtpmEkNeedsTheNoEkMarksRelaxation) {
  const VendorChain cloud(CaSpec("EK/AK CA Intermediate"));
  const Bytes ek = cloud.Ek(CloudVtpmEkSpec(), pki().ek_rsa_key.get());
  EkTrustStore store = cloud.Store(pki());

  Result<EkCertInfo> refused = VerifyEkCertificate(store, ek, kNow);
  EXPECT_REASON(refused.status(), kEkCertNotEk);
  ExpectHint(refused.status(), kEkRelaxNoEkMarks, cloud.RootSha());
  ASSERT_TRUE(store.AllowForAnchor(Sha256Of(pki().root.get()), kEkRelaxNoEkMarks).ok());
  EXPECT_REASON(VerifyEkCertificate(store, ek, kNow).status(), kEkCertNotEk);

  ASSERT_TRUE(store.AllowForAnchor(cloud.RootSha(), kEkRelaxNoEkMarks).ok());
  Result<EkCertInfo> info = VerifyEkCertificate(store, ek, kNow);
  ASSERT_TRUE(info.ok()) << info.status().ToString();
  EXPECT_EQ(info->relaxations_used, std::vector<std::string>{kEkRelaxNoEkMarks});
  EXPECT_FALSE(info->has_ek_eku);
  EXPECT_FALSE(info->has_ek_policy);
  // A properly marked EK certificate under the same anchor uses none.
  Result<EkCertInfo> marked =
      VerifyEkCertificate(store, cloud.Ek(CertSpec{}, pki().ek_rsa_key.get()), kNow);
  ASSERT_TRUE(marked.ok()) << marked.status().ToString();
  EXPECT_TRUE(marked->relaxations_used.empty());
}

TEST_F(EkCertTest, NoEkMarksRelaxationKeepsEkuAndSigningKeysOut) {
  const VendorChain cloud(CaSpec("EK/AK CA Intermediate"));
  EkTrustStore store = cloud.Store(pki());
  ASSERT_TRUE(store.AllowForAnchor(cloud.RootSha(), kEkRelaxNoEkMarks).ok());
  // An EKU for other purposes is the issuer's word that this is not an EK.
  CertSpec tls = CloudVtpmEkSpec();
  tls.eku = "clientAuth";
  const Status eku = VerifyEkCertificate(store, cloud.Ek(tls, pki().ek_rsa_key.get()), kNow).status();
  EXPECT_REASON(eku, kEkCertNotEk);
  EXPECT_EQ(eku.message().find("grant"), std::string::npos) << eku.ToString();
  // An AK certificate from the same CA: a signing key.
  CertSpec ak = CloudVtpmEkSpec();
  ak.key_usage = "critical,digitalSignature";
  EXPECT_REASON(VerifyEkCertificate(store, cloud.Ek(ak, pki().ek_rsa_key.get()), kNow).status(),
                kEkCertNotEk);
  // ... and no setting is offered for it where none is granted.
  const VendorChain other(CaSpec("EK/AK CA Intermediate"));
  const Status ak_refused =
      VerifyEkCertificate(other.Store(pki()), other.Ek(ak, pki().ek_rsa_key.get()), kNow).status();
  EXPECT_REASON(ak_refused, kEkCertNotEk);
  EXPECT_EQ(ak_refused.message().find("grant"), std::string::npos) << ak_refused.ToString();
  // An ECC EK with keyAgreement passes.
  CertSpec ecc = CloudVtpmEkSpec();
  ecc.key_usage = "critical,keyAgreement";
  EXPECT_TRUE(VerifyEkCertificate(store, cloud.Ek(ecc, pki().ek_p256_key.get()), kNow).ok());
}

}  // namespace
}  // namespace rackgate::attest
