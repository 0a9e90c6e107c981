#include "attest/tpm.h"

#include <gtest/gtest.h>

#include "attest/testing/test_util.h"

namespace rackgate::attest {
namespace {

using testing::ReadFixture;

TEST(ParseTpm2bPublic, RsaAkFromSwtpm) {
  auto pub = ParseTpm2bPublic(ReadFixture("attest/testdata/tpm/ak_rsa.pub"));
  ASSERT_TRUE(pub.ok()) << pub.status().ToString();
  EXPECT_EQ(pub->type, kAlgRsa);
  EXPECT_EQ(pub->name_alg, kAlgSha256);
  EXPECT_EQ(pub->rsa_key_bits, 2048);
  EXPECT_EQ(pub->rsa_exponent, 65537u);  // 0 on the wire
  EXPECT_EQ(pub->rsa_modulus.size(), 256u);
  EXPECT_EQ(pub->scheme, kAlgRsaSsa);
  EXPECT_EQ(pub->scheme_hash, kAlgSha256);
  EXPECT_TRUE(pub->attributes & kAttrRestricted);
  EXPECT_TRUE(pub->attributes & kAttrSign);
}

TEST(ParseTpm2bPublic, EccAkFromSwtpm) {
  auto pub = ParseTpm2bPublic(ReadFixture("attest/testdata/tpm/ak_ecc.pub"));
  ASSERT_TRUE(pub.ok()) << pub.status().ToString();
  EXPECT_EQ(pub->type, kAlgEcc);
  EXPECT_EQ(pub->ecc_curve, kEccNistP256);
  EXPECT_EQ(pub->ecc_x.size(), 32u);
  EXPECT_EQ(pub->ecc_y.size(), 32u);
  EXPECT_EQ(pub->scheme, kAlgEcdsa);
}

TEST(ParseTpm2bPublic, RsaEk) {
  auto pub = ParseTpm2bPublic(ReadFixture("attest/testdata/tpm/ek_rsa.pub"));
  ASSERT_TRUE(pub.ok()) << pub.status().ToString();
  EXPECT_EQ(pub->symmetric_alg, kAlgAes);
  EXPECT_EQ(pub->symmetric_key_bits, 128);
  EXPECT_EQ(pub->symmetric_mode, kAlgCfb);
  EXPECT_TRUE(pub->attributes & kAttrDecrypt);
  EXPECT_EQ(pub->auth_policy.size(), 32u);
}

// The high-range templates of the TCG EK profile as swtpm fills them:
// RSA-3072 (H-6) and ECC P-521 (H-4), issue 41.
TEST(ParseTpm2bPublic, HighRangeRsa3072AndP521Eks) {
  auto rsa = ParseTpm2bPublic(ReadFixture("attest/testdata/ek/ek-rsa3072.pub"));
  ASSERT_TRUE(rsa.ok()) << rsa.status().ToString();
  EXPECT_EQ(rsa->type, kAlgRsa);
  EXPECT_EQ(rsa->name_alg, kAlgSha384);
  EXPECT_EQ(rsa->rsa_key_bits, 3072);
  EXPECT_EQ(rsa->rsa_modulus.size(), 384u);
  EXPECT_EQ(rsa->rsa_exponent, 65537u);
  EXPECT_EQ(rsa->attributes, 0x000300f2u);
  EXPECT_EQ(rsa->symmetric_alg, kAlgAes);
  EXPECT_EQ(rsa->symmetric_key_bits, 256);
  EXPECT_EQ(rsa->symmetric_mode, kAlgCfb);
  EXPECT_EQ(rsa->auth_policy.size(), 48u);

  auto ecc = ParseTpm2bPublic(ReadFixture("attest/testdata/ek/ek-ecc521.pub"));
  ASSERT_TRUE(ecc.ok()) << ecc.status().ToString();
  EXPECT_EQ(ecc->type, kAlgEcc);
  EXPECT_EQ(ecc->name_alg, kAlgSha512);
  EXPECT_EQ(ecc->ecc_curve, kEccNistP521);
  EXPECT_EQ(ecc->attributes, 0x000300f2u);
  EXPECT_EQ(ecc->symmetric_key_bits, 256);
  EXPECT_EQ(ecc->auth_policy.size(), 64u);
  EXPECT_LE(ecc->ecc_x.size(), 66u);
  EXPECT_LE(ecc->ecc_y.size(), 66u);
  EXPECT_EQ(ObjectName(*ecc).size(), 2u + 64u);
  for (size_t n = 0; n < ReadFixture("attest/testdata/ek/ek-ecc521.pub").size(); ++n) {
    Bytes cut = ReadFixture("attest/testdata/ek/ek-ecc521.pub");
    cut.resize(n);
    EXPECT_FALSE(ParseTpm2bPublic(cut).ok()) << n;
  }
}

// The name computed here equals the one `tpm2_createak -n` wrote.
TEST(ObjectName, MatchesTpm2Tools) {
  for (const char* k : {"ak_rsa", "ak_ecc"}) {
    auto pub = ParseTpm2bPublic(ReadFixture(std::string("attest/testdata/tpm/") + k + ".pub"));
    ASSERT_TRUE(pub.ok());
    EXPECT_EQ(ObjectName(*pub), ReadFixture(std::string("attest/testdata/tpm/") + k + ".name")) << k;
  }
}

TEST(ParseTpm2bPublic, EveryTruncationFails) {
  for (const char* f : {"ak_rsa.pub", "ak_ecc.pub", "ek_rsa.pub"}) {
    auto full = ReadFixture(std::string("attest/testdata/tpm/") + f);
    for (size_t n = 0; n < full.size(); ++n) {
      auto r = ParseTpm2bPublic(std::span<const uint8_t>(full).first(n));
      ASSERT_FALSE(r.ok()) << f << " prefix " << n;
      EXPECT_EQ(r.status().reason(), "tpm2b_public_malformed") << f << " prefix " << n;
    }
  }
}

TEST(ParseTpm2bPublic, TruncationWithFixedUpSizeFails) {
  // The size prefix agrees with the shorter buffer, so only the inner
  // unmarshalling can notice.
  auto full = ReadFixture("attest/testdata/tpm/ak_rsa.pub");
  for (size_t n = 2; n < full.size(); ++n) {
    std::vector<uint8_t> b(full.begin(), full.begin() + n);
    b[0] = static_cast<uint8_t>((n - 2) >> 8);
    b[1] = static_cast<uint8_t>(n - 2);
    EXPECT_FALSE(ParseTpm2bPublic(b).ok()) << n;
  }
}

TEST(ParseTpm2bPublic, MalformedSizePrefix) {
  auto full = ReadFixture("attest/testdata/tpm/ak_rsa.pub");
  for (int delta : {-1, 1, 0x100, 0x7fff}) {
    auto b = full;
    size_t sz = ((b[0] << 8) | b[1]) + delta;
    b[0] = static_cast<uint8_t>(sz >> 8);
    b[1] = static_cast<uint8_t>(sz);
    EXPECT_FALSE(ParseTpm2bPublic(b).ok()) << delta;
  }
  auto longer = full;
  longer.push_back(0);
  EXPECT_FALSE(ParseTpm2bPublic(longer).ok());
  // Trailing byte inside the TPM2B, size fixed up to include it.
  auto inner = full;
  inner.push_back(0);
  size_t sz = inner.size() - 2;
  inner[0] = static_cast<uint8_t>(sz >> 8);
  inner[1] = static_cast<uint8_t>(sz);
  EXPECT_FALSE(ParseTpm2bPublic(inner).ok());
}

TEST(ParseTpm2bPublic, UnknownTypeAndNameAlgRefused) {
  auto full = ReadFixture("attest/testdata/tpm/ak_ecc.pub");
  auto keyed = full;
  keyed[2] = 0x00;
  keyed[3] = 0x08;  // TPM_ALG_KEYEDHASH: a different union arm; must not parse as ECC
  EXPECT_FALSE(ParseTpm2bPublic(keyed).ok());
  auto name = full;
  name[4] = 0x00;
  name[5] = 0x12;  // TPM_ALG_SM3_256
  auto r = ParseTpm2bPublic(name);
  ASSERT_FALSE(r.ok());
}

TEST(PcrSelectionList, ParsesAndFormats) {
  auto s = ParsePcrSelectionList("sha256:7,0,1+sha1:3");
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  ASSERT_EQ(s->size(), 2u);
  EXPECT_EQ((*s)[0].hash_alg, kAlgSha256);
  EXPECT_EQ((*s)[0].pcrs, (std::vector<uint32_t>{0, 1, 7}));
  EXPECT_EQ(FormatPcrSelectionList(*s), "sha256:0,1,7+sha1:3");
}

TEST(PcrSelectionList, RefusesBadInput) {
  for (const char* bad : {"", "sha256", "sha256:", "md5:1", "sha256:24", "sha256:1,,2",
                          "sha256:1+sha256:2", "sha256:-1", "sha256:1x", "sha256:1+"}) {
    auto s = ParsePcrSelectionList(bad);
    EXPECT_FALSE(s.ok()) << bad;
    if (!s.ok()) {
      EXPECT_EQ(s.status().reason(), "pcr_list_malformed");
    }
  }
}

}  // namespace
}  // namespace rackgate::attest
