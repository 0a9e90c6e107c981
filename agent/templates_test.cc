#include "agent/templates.h"

#include <gtest/gtest.h>
#include <openssl/evp.h>
#include <tss2/tss2_mu.h>

#include "attest/test_util.h"

namespace rackgate::agent {
namespace {

Bytes Sha(const EVP_MD* md, const Bytes& data) {
  Bytes out(EVP_MD_get_size(md));
  unsigned int n = 0;
  EVP_Digest(data.data(), data.size(), out.data(), &n, md, nullptr);
  return out;
}

Bytes Marshal(const TPM2B_PUBLIC& p) {
  Bytes out(sizeof(TPM2B_PUBLIC));
  size_t off = 0;
  EXPECT_EQ(Tss2_MU_TPM2B_PUBLIC_Marshal(&p, out.data(), out.size(), &off), TSS2_RC_SUCCESS);
  out.resize(off);
  return out;
}

// TPM2_PolicyOR: H(0...0 || TPM_CC_PolicyOR || digests...), Part 3 §23.6.
TEST(Templates, P384PolicyIsPolicyOrOfAAndC) {
  Bytes in(48, 0);
  for (uint8_t b : {0x00, 0x00, 0x01, 0x71}) in.push_back(b);
  for (const Bytes& d : EkPolicyOrBranches(EkKind::kEccP384)) in.insert(in.end(), d.begin(), d.end());
  const TPM2B_PUBLIC t = EkTemplate(EkKind::kEccP384);
  EXPECT_EQ(Bytes(t.publicArea.authPolicy.buffer, t.publicArea.authPolicy.buffer + t.publicArea.authPolicy.size),
            Sha(EVP_sha384(), in));
}

// PolicyA: PolicySecret(TPM_RH_ENDORSEMENT) from a zero digest:
// H(H(0 || TPM_CC_PolicySecret || name(RH_ENDORSEMENT)) || policyRef("")).
TEST(Templates, PolicyAIsPolicySecretEndorsement) {
  for (const EVP_MD* md : {EVP_sha256(), EVP_sha384()}) {
    Bytes in(EVP_MD_get_size(md), 0);
    for (uint8_t b : {0x00, 0x00, 0x01, 0x51, 0x40, 0x00, 0x00, 0x0b}) in.push_back(b);
    const Bytes a = Sha(md, Sha(md, in));
    EXPECT_EQ(a, EVP_MD_get_size(md) == 32 ? PolicyASha256() : PolicyASha384());
  }
}

// The EK templates reproduce the EKs swtpm_setup certified (the fixture
// public areas), apart from the key itself.
TEST(Templates, EkTemplatesMatchSwtpmEks) {
  struct Case {
    EkKind kind;
    const char* fixture;
  };
  for (const Case& c : {Case{EkKind::kRsa2048, "attest/testdata/ek/ek-rsa2048.pub"},
                        Case{EkKind::kEccP384, "attest/testdata/ek/ek-ecc384.pub"}}) {
    const Bytes fixture = testing::ReadFixture(c.fixture);
    TPM2B_PUBLIC want = {};  // tss2-mu refuses a TPM2B whose size is not 0
    size_t off = 0;
    ASSERT_EQ(Tss2_MU_TPM2B_PUBLIC_Unmarshal(fixture.data(), fixture.size(), &off, &want), TSS2_RC_SUCCESS);
    TPM2B_PUBLIC got = EkTemplate(c.kind);
    // The TPM fills in the key; everything else must be the template.
    got.publicArea.unique = want.publicArea.unique;
    EXPECT_EQ(Marshal(got), Marshal(want)) << c.fixture;
  }
}

TEST(Templates, AkIsARestrictedSigningKey) {
  for (AkAlg alg : {AkAlg::kRsa, AkAlg::kEcc}) {
    const TPM2B_PUBLIC t = AkTemplate(alg);
    EXPECT_EQ(t.publicArea.objectAttributes, 0x00050072u);
    EXPECT_EQ(t.publicArea.nameAlg, TPM2_ALG_SHA256);
  }
  EXPECT_EQ(ClientKeyTemplate().publicArea.objectAttributes & TPMA_OBJECT_RESTRICTED, 0u);
  EXPECT_EQ(SrkTemplate().publicArea.objectAttributes, 0x00030472u);
}

TEST(Templates, NvIndices) {
  EXPECT_EQ(EkCertNvIndex(EkKind::kRsa2048), 0x01c00002u);
  EXPECT_EQ(EkCertNvIndex(EkKind::kEccP256), 0x01c0000au);
  EXPECT_EQ(EkCertNvIndex(EkKind::kEccP384), 0x01c00016u);
}

}  // namespace
}  // namespace rackgate::agent
