#include "attest/quote.h"

#include <gtest/gtest.h>

#include "attest/pcr_file.h"
#include "attest/testing/test_util.h"
#include "attest/testing/soft_tpm.h"

namespace rackgate::attest {
namespace {

using testing::FromHex;
using testing::ReadFixture;
using testing::SoftKey;
using testing::SoftKeySpec;

const std::string kDir = "attest/testdata/tpm/";
const Bytes kNonce = FromHex("00112233445566778899aabbccddeeff");

struct Fixture {
  VerifyKey ak;
  Bytes msg, sig;
  PcrValues pcrs;
};

Fixture Load(const std::string& ak, const std::string& q, const std::string& pcr_ext) {
  auto pub = ParseTpm2bPublic(ReadFixture(kDir + ak));
  EXPECT_TRUE(pub.ok());
  auto key = VerifyKey::FromTpmPublic(*pub);
  EXPECT_TRUE(key.ok());
  Bytes msg = ReadFixture(kDir + q + ".msg");
  auto attest = ParseTpmsAttest(msg);
  EXPECT_TRUE(attest.ok());
  auto pcrs = ParseTpm2ToolsPcrFile(ReadFixture(kDir + q + pcr_ext), attest->pcr_select);
  EXPECT_TRUE(pcrs.ok()) << pcrs.status().ToString();
  return Fixture{std::move(key).value(), msg, ReadFixture(kDir + q + ".sig"), *pcrs};
}

std::vector<PcrSelection> Sel(const char* s) { return *ParsePcrSelectionList(s); }

TEST(VerifyQuote, SwtpmQuotesVerify) {
  struct Case { const char* ak; const char* q; const char* ext; const char* required; };
  for (const Case& c : {Case{"ak_rsa.pub", "q_rsa", ".pcrs", "sha256:0,1,2,3,7"},
                        Case{"ak_rsa.pub", "q2_rsa", ".values", "sha256:0,7+sha1:0"},
                        Case{"ak_ecc.pub", "q_ecc", ".pcrs", "sha256:0"}}) {
    Fixture f = Load(c.ak, c.q, c.ext);
    auto v = VerifyQuote(f.ak, f.msg, f.sig, f.pcrs, kNonce, Sel(c.required));
    ASSERT_TRUE(v.ok()) << c.q << ": " << v.status().ToString();
    EXPECT_EQ(v->hash_alg, kAlgSha256);
    EXPECT_GT(v->clock.clock, 0u);
    EXPECT_FALSE(v->pcrs.at(kAlgSha256).empty());
  }
}

TEST(VerifyQuote, RequiredPcrOutsideSelectionRefused) {
  Fixture f = Load("ak_rsa.pub", "q_rsa", ".pcrs");
  for (const char* req : {"sha256:4", "sha256:0,8", "sha1:0", "sha384:0"}) {
    auto v = VerifyQuote(f.ak, f.msg, f.sig, f.pcrs, kNonce, Sel(req));
    ASSERT_FALSE(v.ok()) << req;
    EXPECT_EQ(v.status().reason(), "quote_pcr_not_selected") << req;
  }
}

TEST(VerifyQuote, WrongNonceRefused) {
  Fixture f = Load("ak_rsa.pub", "q_rsa", ".pcrs");
  for (Bytes nonce : {FromHex("00112233445566778899aabbccddeefe"), FromHex("0011"), Bytes{}}) {
    auto v = VerifyQuote(f.ak, f.msg, f.sig, f.pcrs, nonce, {});
    ASSERT_FALSE(v.ok());
    EXPECT_EQ(v.status().reason(), "quote_nonce_mismatch");
    EXPECT_EQ(v.status().code(), Status::Code::kVerificationFailed);
  }
}

TEST(VerifyQuote, FlippedBitsRefused) {
  for (const char* q : {"q_rsa", "q_ecc"}) {
    Fixture f = Load(q == std::string("q_rsa") ? "ak_rsa.pub" : "ak_ecc.pub", q, ".pcrs");
    // Every bit of the message: the signature no longer verifies (or the
    // structure no longer parses).
    for (size_t i = 0; i < f.msg.size() * 8; ++i) {
      Bytes m = f.msg;
      m[i / 8] ^= static_cast<uint8_t>(1u << (i % 8));
      auto v = VerifyQuote(f.ak, m, f.sig, f.pcrs, kNonce, {});
      ASSERT_FALSE(v.ok()) << q << " bit " << i;
      EXPECT_TRUE(v.status().reason() == "signature_invalid" || v.status().reason() == "attest_malformed")
          << v.status().reason();
    }
    for (size_t i = 0; i < f.sig.size() * 8; i += 7) {
      Bytes s = f.sig;
      s[i / 8] ^= static_cast<uint8_t>(1u << (i % 8));
      auto v = VerifyQuote(f.ak, f.msg, s, f.pcrs, kNonce, {});
      ASSERT_FALSE(v.ok()) << q << " sig bit " << i;
    }
    for (auto& [alg, bank] : f.pcrs) {
      for (auto& [pcr, value] : bank) {
        PcrValues p = f.pcrs;
        p[alg][pcr][0] ^= 0x80;
        auto v = VerifyQuote(f.ak, f.msg, f.sig, p, kNonce, {});
        ASSERT_FALSE(v.ok());
        EXPECT_EQ(v.status().reason(), "quote_pcr_digest_mismatch");
      }
    }
  }
}

TEST(VerifyQuote, AnotherAkRefused) {
  Fixture f = Load("ak_rsa.pub", "q_rsa", ".pcrs");
  SoftKey other = SoftKey::Generate(SoftKeySpec{});
  auto key = VerifyKey::FromTpmPublic(other.pub());
  ASSERT_TRUE(key.ok());
  auto v = VerifyQuote(*key, f.msg, f.sig, f.pcrs, kNonce, {});
  ASSERT_FALSE(v.ok());
  EXPECT_EQ(v.status().reason(), "signature_invalid");
  // An ECC AK cannot have made an RSA signature at all.
  auto ecc = VerifyKey::FromTpmPublic(*ParseTpm2bPublic(ReadFixture(kDir + "ak_ecc.pub")));
  v = VerifyQuote(*ecc, f.msg, f.sig, f.pcrs, kNonce, {});
  ASSERT_FALSE(v.ok());
  EXPECT_EQ(v.status().reason(), "signature_scheme_mismatch");
}

TEST(VerifyQuote, MissingPcrValueIsUnusableInput) {
  Fixture f = Load("ak_rsa.pub", "q_rsa", ".pcrs");
  f.pcrs[kAlgSha256].erase(7);
  auto v = VerifyQuote(f.ak, f.msg, f.sig, f.pcrs, kNonce, {});
  ASSERT_FALSE(v.ok());
  EXPECT_EQ(v.status().reason(), "pcr_values_incomplete");
  EXPECT_EQ(v.status().code(), Status::Code::kInvalidArgument);
}

TEST(ParseTpmsAttest, EveryTruncationFails) {
  for (const char* q : {"q_rsa.msg", "q2_rsa.msg", "q_ecc.msg"}) {
    Bytes m = ReadFixture(kDir + q);
    for (size_t n = 0; n < m.size(); ++n) {
      auto r = ParseTpmsAttest(std::span<const uint8_t>(m).first(n));
      ASSERT_FALSE(r.ok()) << q << " " << n;
      EXPECT_EQ(r.status().reason(), "attest_malformed");
    }
    Bytes longer = m;
    longer.push_back(0);
    EXPECT_FALSE(ParseTpmsAttest(longer).ok());
  }
}

TEST(ParseTpmsAttest, MalformedLengthPrefixes) {
  Bytes m = ReadFixture(kDir + "q_rsa.msg");
  // qualifiedSigner's TPM2B size at offset 6, extraData's after it.
  for (uint16_t bad : {0x0000, 0x0021, 0x0023, 0x7fff, 0xffff}) {
    Bytes b = m;
    b[6] = static_cast<uint8_t>(bad >> 8);
    b[7] = static_cast<uint8_t>(bad);
    EXPECT_FALSE(ParseTpmsAttest(b).ok()) << bad;
  }
  const size_t extra = 8 + 34;
  for (uint16_t bad : {0x0011, 0x00ff, 0xffff}) {
    Bytes b = m;
    b[extra] = static_cast<uint8_t>(bad >> 8);
    b[extra + 1] = static_cast<uint8_t>(bad);
    EXPECT_FALSE(ParseTpmsAttest(b).ok()) << bad;
  }
}

TEST(ParseTpmtSignature, EveryTruncationFails) {
  for (const char* s : {"q_rsa.sig", "q_ecc.sig"}) {
    Bytes b = ReadFixture(kDir + s);
    ASSERT_TRUE(ParseTpmtSignature(b).ok());
    for (size_t n = 0; n < b.size(); ++n) {
      EXPECT_FALSE(ParseTpmtSignature(std::span<const uint8_t>(b).first(n)).ok()) << s << " " << n;
    }
    b.push_back(0);
    EXPECT_FALSE(ParseTpmtSignature(b).ok());
  }
}

TEST(ParseTpmtSignature, UnknownSchemeRefused) {
  Bytes b = ReadFixture(kDir + "q_rsa.sig");
  b[1] = 0x1a;  // TPM_ALG_ECSCHNORR
  auto r = ParseTpmtSignature(b);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().reason(), "signature_scheme_unsupported");
}

// With a software AK we can sign structures a TPM would never produce.
class SoftQuoteTest : public ::testing::Test {
 protected:
  PcrValues Pcrs() {
    PcrValues p;
    for (uint32_t i = 0; i < 24; ++i) p[kAlgSha256][i] = Bytes(32, static_cast<uint8_t>(i));
    return p;
  }
};

TEST_F(SoftQuoteTest, SchemesAndHashes) {
  struct Case { uint16_t type; uint16_t curve; uint16_t scheme; uint16_t hash; };
  for (const Case& c : {Case{kAlgRsa, 0, kAlgRsaSsa, kAlgSha256}, Case{kAlgRsa, 0, kAlgRsaPss, kAlgSha256},
                        Case{kAlgRsa, 0, kAlgRsaPss, kAlgSha384}, Case{kAlgEcc, kEccNistP256, kAlgEcdsa, kAlgSha256},
                        Case{kAlgEcc, kEccNistP384, kAlgEcdsa, kAlgSha384}}) {
    SoftKeySpec spec;
    spec.type = c.type;
    spec.curve = c.curve ? c.curve : kEccNistP256;
    spec.scheme = c.scheme;
    spec.scheme_hash = c.hash;
    SoftKey ak = SoftKey::Generate(spec);
    ASSERT_TRUE(CheckAkPolicy(ak.pub()).ok());
    testing::SoftQuoteSpec q;
    q.selection = Sel("sha256:0,1,2,3,4,5,6,7");
    q.hash_alg = c.hash;
    Bytes msg = testing::MakeQuoteMessage(q, Pcrs(), kNonce);
    auto key = VerifyKey::FromTpmPublic(ak.pub());
    ASSERT_TRUE(key.ok());
    auto v = VerifyQuote(*key, msg, ak.Sign(msg), Pcrs(), kNonce, Sel("sha256:0,7"));
    ASSERT_TRUE(v.ok()) << c.scheme << "/" << c.hash << ": " << v.status().ToString();
    EXPECT_EQ(v->pcrs.at(kAlgSha256).size(), 8u);
  }
}

TEST_F(SoftQuoteTest, SignatureSchemeMustMatchKey) {
  SoftKeySpec spec;
  spec.scheme = kAlgRsaSsa;
  SoftKey ak = SoftKey::Generate(spec);
  testing::SoftQuoteSpec q;
  q.selection = Sel("sha256:0");
  Bytes msg = testing::MakeQuoteMessage(q, Pcrs(), kNonce);
  auto key = VerifyKey::FromTpmPublic(ak.pub());
  auto v = VerifyQuote(*key, msg, ak.Sign(msg, kAlgRsaPss, kAlgSha256), Pcrs(), kNonce, {});
  ASSERT_FALSE(v.ok());
  EXPECT_EQ(v.status().reason(), "signature_scheme_mismatch");
  v = VerifyQuote(*key, msg, ak.Sign(msg, kAlgRsaSsa, kAlgSha384), Pcrs(), kNonce, {});
  ASSERT_FALSE(v.ok());
  EXPECT_EQ(v.status().reason(), "signature_scheme_mismatch");
}

TEST_F(SoftQuoteTest, Sha1SignatureRefused) {
  SoftKeySpec spec;
  spec.scheme = kAlgNull;  // a key that lets the caller pick the scheme
  SoftKey ak = SoftKey::Generate(spec);
  testing::SoftQuoteSpec q;
  q.selection = Sel("sha256:0");
  q.hash_alg = kAlgSha1;
  Bytes msg = testing::MakeQuoteMessage(q, Pcrs(), kNonce);
  auto key = VerifyKey::FromTpmPublic(ak.pub());
  auto v = VerifyQuote(*key, msg, ak.Sign(msg, kAlgRsaSsa, kAlgSha1), Pcrs(), kNonce, {});
  ASSERT_FALSE(v.ok());
  EXPECT_EQ(v.status().reason(), "signature_scheme_unsupported");
}

TEST_F(SoftQuoteTest, SignedButNotTpmGeneratedRefused) {
  SoftKey ak = SoftKey::Generate(SoftKeySpec{});
  testing::SoftQuoteSpec q;
  q.selection = Sel("sha256:0");
  q.magic = 0x12345678;
  Bytes msg = testing::MakeQuoteMessage(q, Pcrs(), kNonce);
  auto key = VerifyKey::FromTpmPublic(ak.pub());
  auto v = VerifyQuote(*key, msg, ak.Sign(msg), Pcrs(), kNonce, {});
  ASSERT_FALSE(v.ok());
  EXPECT_EQ(v.status().reason(), "quote_magic_invalid");
}

TEST_F(SoftQuoteTest, CertifyIsNotAQuote) {
  SoftKey ak = SoftKey::Generate(SoftKeySpec{});
  Bytes msg = testing::MakeCertifyMessage(ak.name(), kNonce);
  auto key = VerifyKey::FromTpmPublic(ak.pub());
  auto v = VerifyQuote(*key, msg, ak.Sign(msg), Pcrs(), kNonce, {});
  ASSERT_FALSE(v.ok());
  EXPECT_EQ(v.status().reason(), "quote_type_invalid");
}

TEST(VerifyCertify, AcceptsAndRefuses) {
  SoftKey ak = SoftKey::Generate(SoftKeySpec{});
  SoftKeySpec kubelet_spec;
  kubelet_spec.type = kAlgEcc;
  kubelet_spec.scheme = kAlgEcdsa;
  kubelet_spec.attributes &= ~kAttrRestricted;
  SoftKey kubelet = SoftKey::Generate(kubelet_spec);
  SoftKey other = SoftKey::Generate(kubelet_spec);
  auto key = VerifyKey::FromTpmPublic(ak.pub());
  ASSERT_TRUE(key.ok());

  Bytes msg = testing::MakeCertifyMessage(kubelet.name(), kNonce);
  Bytes sig = ak.Sign(msg);
  auto v = VerifyCertify(*key, msg, sig, kubelet.pub(), kNonce);
  ASSERT_TRUE(v.ok()) << v.status().ToString();
  EXPECT_EQ(v->certified_name, kubelet.name());

  v = VerifyCertify(*key, msg, sig, other.pub(), kNonce);
  ASSERT_FALSE(v.ok());
  EXPECT_EQ(v.status().reason(), "certify_name_mismatch");

  v = VerifyCertify(*key, msg, sig, kubelet.pub(), FromHex("ff"));
  ASSERT_FALSE(v.ok());
  EXPECT_EQ(v.status().reason(), "certify_nonce_mismatch");

  Bytes bad = sig;
  bad[10] ^= 1;
  v = VerifyCertify(*key, msg, bad, kubelet.pub(), kNonce);
  ASSERT_FALSE(v.ok());
  EXPECT_EQ(v.status().reason(), "signature_invalid");

  Bytes quote_type = testing::MakeCertifyMessage(kubelet.name(), kNonce, kStAttestQuote);
  v = VerifyCertify(*key, quote_type, ak.Sign(quote_type), kubelet.pub(), kNonce);
  ASSERT_FALSE(v.ok());
  EXPECT_EQ(v.status().reason(), "certify_type_invalid");
}

TEST(CheckAkPolicy, SwtpmAksPass) {
  for (const char* f : {"ak_rsa.pub", "ak_ecc.pub"}) {
    auto pub = ParseTpm2bPublic(ReadFixture(kDir + f));
    EXPECT_TRUE(CheckAkPolicy(*pub).ok()) << f;
  }
  // An EK is a decryption key: never an AK.
  auto ek = ParseTpm2bPublic(ReadFixture(kDir + "ek_rsa.pub"));
  EXPECT_EQ(CheckAkPolicy(*ek).reason(), "ak_not_restricted_signing");
}

TEST(CheckAkPolicy, EachRefusal) {
  auto base = *ParseTpm2bPublic(ReadFixture(kDir + "ak_rsa.pub"));
  auto with = [&](auto mutate) {
    TpmPublic p = base;
    mutate(p);
    return CheckAkPolicy(p).reason();
  };
  EXPECT_EQ(with([](TpmPublic& p) { p.attributes &= ~kAttrRestricted; }), "ak_not_restricted_signing");
  EXPECT_EQ(with([](TpmPublic& p) { p.attributes &= ~kAttrSign; }), "ak_not_restricted_signing");
  EXPECT_EQ(with([](TpmPublic& p) { p.attributes |= kAttrDecrypt; }), "ak_decrypt_key");
  EXPECT_EQ(with([](TpmPublic& p) { p.attributes &= ~kAttrFixedTpm; }), "ak_not_fixed_tpm");
  EXPECT_EQ(with([](TpmPublic& p) { p.attributes &= ~kAttrFixedParent; }), "ak_not_fixed_parent");
  EXPECT_EQ(with([](TpmPublic& p) { p.attributes &= ~kAttrSensitiveDataOrigin; }),
            "ak_not_sensitive_data_origin");
  EXPECT_EQ(with([](TpmPublic& p) { p.rsa_key_bits = 1024; }), "ak_key_too_weak");
  EXPECT_EQ(with([](TpmPublic& p) { p.name_alg = kAlgSha1; }), "ak_name_alg_weak");
  EXPECT_EQ(with([](TpmPublic& p) {
              p.type = kAlgEcc;
              p.ecc_curve = 0x0005;  // P-521
            }),
            "ak_curve_unsupported");
}

}  // namespace
}  // namespace rackgate::attest
