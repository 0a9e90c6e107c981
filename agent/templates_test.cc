#include "agent/templates.h"

#include <gtest/gtest.h>
#include <openssl/evp.h>
#include <tss2/tss2_mu.h>

#include <iterator>

#include "attest/testing/test_util.h"

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

const EVP_MD* Md(TPMI_ALG_HASH hash) {
  return hash == TPM2_ALG_SHA256 ? EVP_sha256() : hash == TPM2_ALG_SHA384 ? EVP_sha384() : EVP_sha512();
}

// TPM2_PolicyOR from a zero digest: H(0...0 || TPM_CC_PolicyOR || digests...),
// Part 3 §23.6.
Bytes PolicyOr(TPMI_ALG_HASH hash, const std::vector<Bytes>& branches) {
  Bytes in(EVP_MD_get_size(Md(hash)), 0);
  for (uint8_t b : {0x00, 0x00, 0x01, 0x71}) in.push_back(b);
  for (const Bytes& d : branches) in.insert(in.end(), d.begin(), d.end());
  return Sha(Md(hash), in);
}

Bytes AuthPolicy(const TPM2B_PUBLIC& t) {
  return Bytes(t.publicArea.authPolicy.buffer, t.publicArea.authPolicy.buffer + t.publicArea.authPolicy.size);
}

constexpr TPMI_ALG_HASH kHashes[] = {TPM2_ALG_SHA256, TPM2_ALG_SHA384, TPM2_ALG_SHA512};

// PolicyA: PolicySecret(TPM_RH_ENDORSEMENT) from a zero digest:
// H(H(0 || TPM_CC_PolicySecret || name(RH_ENDORSEMENT)) || policyRef("")).
TEST(Templates, PolicyAIsPolicySecretEndorsement) {
  for (TPMI_ALG_HASH hash : kHashes) {
    const EVP_MD* md = Md(hash);
    Bytes in(EVP_MD_get_size(md), 0);
    for (uint8_t b : {0x00, 0x00, 0x01, 0x51, 0x40, 0x00, 0x00, 0x0b}) in.push_back(b);
    EXPECT_EQ(EkPolicyA(hash), Sha(md, Sha(md, in))) << hash;
  }
  EXPECT_TRUE(EkPolicyA(TPM2_ALG_SHA1).empty());
}

// PolicyB, as the profile publishes it (and tpm2-tools' createek uses it for
// sha384/sha512), is PolicyOR(PolicyA, PolicyC) in each hash.
TEST(Templates, PolicyBIsPolicyOrOfAAndC) {
  for (TPMI_ALG_HASH hash : kHashes) {
    EXPECT_EQ(EkPolicyB(hash).size(), static_cast<size_t>(EVP_MD_get_size(Md(hash))));
    EXPECT_EQ(EkPolicyB(hash), PolicyOr(hash, {EkPolicyA(hash), EkPolicyC(hash)})) << hash;
  }
}

// The policy session the agent builds for each kind (PolicySecret, then
// PolicyOR over the branches, in EkPolicyHash) ends at the template's
// authPolicy: otherwise the TPM refuses every command under the EK.
TEST(Templates, EkPolicySessionReachesEachTemplatesPolicy) {
  for (EkKind kind : kEkKindsByPreference) {
    const TPM2B_PUBLIC t = EkTemplate(kind);
    EXPECT_EQ(EkPolicyHash(kind), t.publicArea.nameAlg) << EkKindName(kind);
    const std::vector<Bytes> branches = EkPolicyOrBranches(kind);
    const Bytes reached =
        branches.empty() ? EkPolicyA(EkPolicyHash(kind)) : PolicyOr(EkPolicyHash(kind), branches);
    EXPECT_EQ(AuthPolicy(t), reached) << EkKindName(kind);
  }
}

// Every template field the profile fixes (EK Credential Profile 2.5, B.3.3
// L-1/L-2, B.4 H-1..H-6), written out here a second time.
TEST(Templates, EachEkTemplateIsTheProfiles) {
  struct Case {
    EkKind kind;
    const char* id;
    uint32_t nv;
    TPMI_ALG_HASH name_alg;
    TPMA_OBJECT attributes;
    uint16_t aes_bits;
    uint16_t rsa_bits;   // 0: ECC
    TPMI_ECC_CURVE curve;
    uint16_t unique;     // RSA: modulus bytes; ECC: x and y bytes each
  };
  const Case cases[] = {
      {EkKind::kRsa2048, "L-1", 0x01c00002, TPM2_ALG_SHA256, 0x000300b2, 128, 2048, 0, 256},
      {EkKind::kEccP256, "L-2", 0x01c0000a, TPM2_ALG_SHA256, 0x000300b2, 128, 0, TPM2_ECC_NIST_P256, 32},
      {EkKind::kRsa2048High, "H-1", 0x01c00012, TPM2_ALG_SHA256, 0x000300f2, 128, 2048, 0, 0},
      {EkKind::kEccP256High, "H-2", 0x01c00014, TPM2_ALG_SHA256, 0x000300f2, 128, 0, TPM2_ECC_NIST_P256, 0},
      {EkKind::kEccP384, "H-3", 0x01c00016, TPM2_ALG_SHA384, 0x000300f2, 256, 0, TPM2_ECC_NIST_P384, 0},
      {EkKind::kEccP521, "H-4", 0x01c00018, TPM2_ALG_SHA512, 0x000300f2, 256, 0, TPM2_ECC_NIST_P521, 0},
      {EkKind::kRsa3072, "H-6", 0x01c0001c, TPM2_ALG_SHA384, 0x000300f2, 256, 3072, 0, 0},
  };
  EXPECT_EQ(std::size(cases), std::size(kEkKindsByPreference));
  for (const Case& c : cases) {
    SCOPED_TRACE(c.id);
    EXPECT_EQ(EkTemplateId(c.kind), c.id);
    EXPECT_EQ(EkCertNvIndex(c.kind), c.nv);
    EXPECT_GE(c.nv, kNvEkCertFirst);
    EXPECT_LE(c.nv, kNvEkCertLast);
    const TPMT_PUBLIC p = EkTemplate(c.kind).publicArea;
    EXPECT_EQ(p.nameAlg, c.name_alg);
    EXPECT_EQ(p.objectAttributes, c.attributes);
    EXPECT_EQ(AuthPolicy(EkTemplate(c.kind)),
              c.attributes & TPMA_OBJECT_USERWITHAUTH ? EkPolicyB(c.name_alg) : EkPolicyA(c.name_alg));
    EXPECT_EQ(EkIsRsa(c.kind), c.rsa_bits != 0);
    if (c.rsa_bits) {
      EXPECT_EQ(p.type, TPM2_ALG_RSA);
      EXPECT_EQ(p.parameters.rsaDetail.keyBits, c.rsa_bits);
      EXPECT_EQ(p.parameters.rsaDetail.exponent, 0u);
      EXPECT_EQ(p.parameters.rsaDetail.scheme.scheme, TPM2_ALG_NULL);
      EXPECT_EQ(p.parameters.rsaDetail.symmetric.algorithm, TPM2_ALG_AES);
      EXPECT_EQ(p.parameters.rsaDetail.symmetric.keyBits.aes, c.aes_bits);
      EXPECT_EQ(p.parameters.rsaDetail.symmetric.mode.aes, TPM2_ALG_CFB);
      EXPECT_EQ(p.unique.rsa.size, c.unique);
    } else {
      EXPECT_EQ(p.type, TPM2_ALG_ECC);
      EXPECT_EQ(p.parameters.eccDetail.curveID, c.curve);
      EXPECT_EQ(p.parameters.eccDetail.scheme.scheme, TPM2_ALG_NULL);
      EXPECT_EQ(p.parameters.eccDetail.kdf.scheme, TPM2_ALG_NULL);
      EXPECT_EQ(p.parameters.eccDetail.symmetric.algorithm, TPM2_ALG_AES);
      EXPECT_EQ(p.parameters.eccDetail.symmetric.keyBits.aes, c.aes_bits);
      EXPECT_EQ(p.parameters.eccDetail.symmetric.mode.aes, TPM2_ALG_CFB);
      EXPECT_EQ(p.unique.ecc.x.size, c.unique);
      EXPECT_EQ(p.unique.ecc.y.size, c.unique);
    }
    // The name round-trips: --ek-alg takes what the log prints.
    EXPECT_EQ(EkKindFromName(EkKindName(c.kind)), c.kind);
  }
  EXPECT_FALSE(EkKindFromName("rsa").has_value());
  EXPECT_FALSE(EkKindFromName("ecc-p384 ").has_value());
}

// The EK templates reproduce EKs other tools made from the profile, apart
// from the key itself: swtpm_setup's RSA-2048 (L-1) and P-384 (H-3) EKs, and
// tpm2-tools 5.4's `tpm2_createek -G rsa3072` (H-6; swtpm_setup
// --rsa-keysize 3072 certifies the same key) and `-G ecc521` (H-4).
TEST(Templates, EkTemplatesMatchSwtpmEks) {
  struct Case {
    EkKind kind;
    const char* fixture;
  };
  for (const Case& c : {Case{EkKind::kRsa2048, "attest/testdata/ek/ek-rsa2048.pub"},
                        Case{EkKind::kEccP384, "attest/testdata/ek/ek-ecc384.pub"},
                        Case{EkKind::kRsa3072, "agent/testdata/ek-rsa3072-h6.pub"},
                        Case{EkKind::kEccP521, "agent/testdata/ek-eccp521-h4.pub"}}) {
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

}  // namespace
}  // namespace rackgate::agent
