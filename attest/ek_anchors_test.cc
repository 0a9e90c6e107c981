// Tests of the EK trust anchors as operators configure them (issue 41): every
// CA in ek_roots anchors a path, what loading skips is noted, and the
// per-anchor relaxations (sha1, expired-ca, no-ek-marks).
#include "attest/ek_cert.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "attest/ek_cert_test_pki.h"

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

}  // namespace
}  // namespace rackgate::attest
