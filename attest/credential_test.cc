#include "attest/credential.h"

#include <gtest/gtest.h>

#include "attest/digest.h"
#include "attest/testing/test_util.h"
#include "attest/testing/soft_tpm.h"

namespace rackgate::attest {
namespace {

using testing::FromHex;
using testing::ReadFixture;
using testing::SoftKey;

const Bytes kSecret = FromHex("000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f");

// KDFa against a value computed independently: HMAC-SHA256(key, 00000001 ||
// "STORAGE" 00 || context || 00000080), truncated to 16 bytes.
TEST(Kdf, KdfAMatchesDefinition) {
  Bytes key(32, 0x0b), ctx = FromHex("000b1111");
  Bytes out = KdfA(kAlgSha256, key, "STORAGE", ctx, {}, 128);
  ASSERT_EQ(out.size(), 16u);
  // Reference computed with: printf '\x00\x00\x00\x01STORAGE\x00\x00\x0b\x11\x11\x00\x00\x00\x80' |
  //   openssl dgst -sha256 -mac HMAC -macopt hexkey:0b0b...0b
  EXPECT_EQ(out, FromHex("6520496a335e9ccaf3b2c1f4138c198e"));
}

TEST(Kdf, KdfEMatchesDefinition) {
  Bytes z(32, 0x22), u = FromHex("aa"), v = FromHex("bb");
  Bytes out = KdfE(kAlgSha256, z, "IDENTITY", u, v, 256);
  // Reference: printf '\x00\x00\x00\x01' Z 'IDENTITY\x00' aa bb | openssl dgst -sha256
  EXPECT_EQ(out, FromHex("2cde543bf998bcd8a9729c329ab1e3dfe9510a3a010d519f03a483c3d0b3ae0a"));
}

TEST(MakeCredential, RoundTripsThroughSoftwareActivation) {
  struct Case { uint16_t type; uint16_t curve; };
  for (const Case& c : {Case{kAlgRsa, 0}, Case{kAlgEcc, kEccNistP256}, Case{kAlgEcc, kEccNistP384}}) {
    SoftKey ek = SoftKey::GenerateEk(c.type, c.curve ? c.curve : kEccNistP256);
    SoftKey ak = SoftKey::Generate(testing::SoftKeySpec{});
    auto cred = MakeCredential(ek.pub(), ak.name(), kSecret);
    ASSERT_TRUE(cred.ok()) << cred.status().ToString();
    auto got = ek.ActivateCredential(*cred, ak.name());
    ASSERT_TRUE(got.has_value()) << c.type << "/" << c.curve;
    EXPECT_EQ(*got, kSecret);
    // Bound to the AK's name: another object cannot activate it.
    SoftKey other = SoftKey::Generate(testing::SoftKeySpec{});
    EXPECT_FALSE(ek.ActivateCredential(*cred, other.name()).has_value());
    // And to the EK: another EK cannot.
    SoftKey other_ek = SoftKey::GenerateEk(c.type, c.curve ? c.curve : kEccNistP256);
    EXPECT_FALSE(other_ek.ActivateCredential(*cred, ak.name()).has_value());
  }
}

// The high-range EKs of issue 41: RSA-3072 (H-6: OAEP with sha384, AES-256)
// and P-521 (H-4: ECDH, KDFe with sha512, AES-256), against the software TPM.
TEST(MakeCredential, RoundTripsForRsa3072AndP521Eks) {
  for (const testing::SoftKeySpec& spec : {SoftKey::EkSpecRsa3072(), SoftKey::EkSpecP521()}) {
    SoftKey ek = SoftKey::Generate(spec);
    SoftKey ak = SoftKey::Generate(testing::SoftKeySpec{});
    const Bytes secret(DigestSize(spec.name_alg), 0x5a);  // the largest the nameAlg allows
    auto cred = MakeCredential(ek.pub(), ak.name(), secret);
    ASSERT_TRUE(cred.ok()) << cred.status().ToString();
    if (spec.type == kAlgRsa) {
      EXPECT_EQ(cred->encrypted_secret.size(), 384u);  // one RSA-3072 block
    } else {
      EXPECT_EQ(cred->encrypted_secret.size(), 2u + 66u + 2u + 66u);  // TPMS_ECC_POINT on P-521
    }
    // integrityHMAC is a sha384 / sha512 HMAC.
    EXPECT_EQ((cred->id_object[0] << 8) | cred->id_object[1], DigestSize(spec.name_alg));
    auto got = ek.ActivateCredential(*cred, ak.name());
    ASSERT_TRUE(got.has_value()) << spec.type;
    EXPECT_EQ(*got, secret);
    // Bound to the AK's name (another EK is tried on P-521 only: an RSA-3072
    // key pair costs more than the case is worth).
    EXPECT_FALSE(ek.ActivateCredential(*cred, ek.name()).has_value());
    if (spec.type == kAlgEcc) {
      SoftKey other_ek = SoftKey::Generate(spec);
      EXPECT_FALSE(other_ek.ActivateCredential(*cred, ak.name()).has_value());
    }
    EXPECT_EQ(MakeCredential(ek.pub(), ak.name(), Bytes(DigestSize(spec.name_alg) + 1, 1))
                  .status()
                  .reason(),
              "credential_secret_size");
  }
}

TEST(MakeCredential, FreshSeedEachTime) {
  auto ek = ParseTpm2bPublic(ReadFixture("attest/testdata/tpm/ek_rsa.pub"));
  Bytes name = ReadFixture("attest/testdata/tpm/ak_rsa.name");
  auto a = MakeCredential(*ek, name, kSecret);
  auto b = MakeCredential(*ek, name, kSecret);
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_NE(a->encrypted_secret, b->encrypted_secret);
  EXPECT_NE(a->id_object, b->id_object);
  EXPECT_EQ(a->encrypted_secret.size(), 256u);  // RSA-2048 OAEP
}

TEST(MakeCredential, Refusals) {
  auto ek = *ParseTpm2bPublic(ReadFixture("attest/testdata/tpm/ek_rsa.pub"));
  Bytes name = ReadFixture("attest/testdata/tpm/ak_rsa.name");
  EXPECT_EQ(MakeCredential(ek, name, Bytes(33, 1)).status().reason(), "credential_secret_size");
  EXPECT_EQ(MakeCredential(ek, name, Bytes{}).status().reason(), "credential_secret_size");
  EXPECT_EQ(MakeCredential(ek, Bytes(name.begin(), name.end() - 1), kSecret).status().reason(),
            "object_name_malformed");
  EXPECT_EQ(MakeCredential(ek, FromHex("0099aabb"), kSecret).status().reason(), "object_name_malformed");
  // An AK (a signing key) is no EK.
  auto ak = *ParseTpm2bPublic(ReadFixture("attest/testdata/tpm/ak_rsa.pub"));
  EXPECT_EQ(MakeCredential(ak, name, kSecret).status().reason(), "ek_unsupported");
  TpmPublic no_aes = ek;
  no_aes.symmetric_alg = kAlgNull;
  EXPECT_EQ(MakeCredential(no_aes, name, kSecret).status().reason(), "ek_unsupported");
}

TEST(CredentialFile, RoundTripAndTruncation) {
  Credential c{FromHex("0020aabbccdd"), FromHex("0102030405")};
  Bytes file = EncodeCredentialFile(c);
  EXPECT_EQ(Bytes(file.begin(), file.begin() + 8), FromHex("badcc0de00000001"));
  auto back = DecodeCredentialFile(file);
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(back->id_object, c.id_object);
  EXPECT_EQ(back->encrypted_secret, c.encrypted_secret);
  for (size_t n = 0; n < file.size(); ++n) {
    EXPECT_FALSE(DecodeCredentialFile(std::span<const uint8_t>(file).first(n)).ok()) << n;
  }
  file.push_back(0);
  EXPECT_EQ(DecodeCredentialFile(file).status().reason(), "credential_file_malformed");
}

}  // namespace
}  // namespace rackgate::attest
