// Tests for signed PCR 11 values: the PolicyPCR digest, systemd's key
// fingerprint and signature against what systemd-measure produced, and the
// uki_signed rule of a boot policy with keys and signatures made here.
#include "attest/pcr_signature.h"

#include <gtest/gtest.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/rsa.h>
#include <openssl/x509.h>

#include <set>
#include <string>
#include <vector>

#include "attest/boot_policy.h"
#include "attest/digest.h"
#include "attest/testing/test_util.h"
#include "attest/testing/event_log_builder.h"
#include "base/ossl.h"

namespace rackgate::attest {
namespace {

using testing::FromHex;
using testing::Str;

// Made on Debian 12 (systemd 252.x) with
//   systemd-measure sign --linux=L --osrel=O --cmdline=C --initrd=I --bank=sha256
//     --phase=enter-initrd --private-key=priv.pem --public-key=pub.pem
//     --tpm2-device=swtpm:host=127.0.0.1,port=N
// over the files L = "KERNEL", O = "ID=test\n", C = "console=ttyS0", I = "INITRD"
// (no trailing newlines but O's). `systemd-measure calculate` printed kPcr11
// for the phase enter-initrd; the document held kPol, kPkfp and kSig.
const char kPcr11[] = "1750f8cb12a0357a7e9916704d54cf5860e3cb36d22146975e264fb44a770d67";
const char kPol[] = "2bbd497e43143f5e77adbac5be4e551511a3b6823401b342bcb0ca00cafaff77";
const char kPkfp[] = "f1819ab1736977cc1726a091435d41f5645b1c6508268c61b87814610d613de9";
const char kSig[] =
    "66804279dfb92de797ff54c6481ddbc32c9a0cb4262d253a6bd4d675d053877e88063bc211eca4d3d68025485db5270977f392d5950cab5987a0d3d97414e991f42504e6b61cae4d789daa5583b92942bc2413919a48496d20f55dcd464000a4e66181a9d192cd28b3a0fc72358f8aeac53ffe56d8261e395eb4e36a4bca022a11a5d3224aa4bb30d331aa90d80185fc9f177a45e1e74b9dec8dca5e6dd1c66dbf3ac06d6982d3ea0e046e537046199646cba106028aeda33987104118c55d5a9caa657423559441541cae3fb4fecbede1e6a63c400c5b669495c0f1916d1cde7cb460c724c66a9cd337d245b8143c634395d288802d8b2e768af0b80dabb9c6";
const char kPublicKeyPem[] = R"(-----BEGIN PUBLIC KEY-----
MIIBIjANBgkqhkiG9w0BAQEFAAOCAQ8AMIIBCgKCAQEA0/QYni3inot0rNwlmFg9
VDdP/xrsLkV/XH7GT5JcPLe4CnjhBedi4o2NB+aIdMI32twr//w0GL0iWuh08pdM
+BSvRSXid2Mxn/JEr0rE/BtLODBro1cdzUHH+NcLhJBLZo1y9XKsNMviUs4aS2T1
0MRyJmmTNcOHsGSHHeZqgwJpB4aGACJ2LDQJvUhZFIIAYxEUsdqUhmcYbB+sB6A3
1015PFRoN9G2dVmbwfDwlVHbi8DnRbigeezjr2ySK3KrODT9w8KLe21JQXecs24H
eeAa85fmz8eBsTTpDeKBCe8kAYYg6DcreHtsvTjuEqznDjSgh69iH1XcLqrGyziZ
/wIDAQAB
-----END PUBLIC KEY-----
)";

TEST(PcrSignature, PolicyPcrDigestIsWhatSystemdMeasureSigned) {
  auto pol = PolicyPcrDigest(kAlgSha256, 11, FromHex(kPcr11));
  ASSERT_TRUE(pol.ok()) << pol.status().ToString();
  EXPECT_EQ(*pol, FromHex(kPol));
  // Another PCR index, another bank's selection: another digest.
  EXPECT_NE(*PolicyPcrDigest(kAlgSha256, 12, FromHex(kPcr11)), FromHex(kPol));
  EXPECT_EQ(PolicyPcrDigest(kAlgSha256, 11, Bytes(20, 0)).status().reason(),
            "pcr_signature_malformed");
  EXPECT_EQ(PolicyPcrDigest(kAlgSha256, 24, FromHex(kPcr11)).status().reason(),
            "pcr_signature_malformed");
  EXPECT_EQ(PolicyPcrDigest(0x0012, 11, FromHex(kPcr11)).status().reason(),
            "pcr_signature_malformed");
}

TEST(PcrSignature, FingerprintAndSignatureAreSystemds) {
  auto der = PublicKeyDerFromPem(kPublicKeyPem);
  ASSERT_TRUE(der.ok()) << der.status().ToString();
  // pkfp is not the SHA-256 of the SubjectPublicKeyInfo...
  EXPECT_NE(Hash(kAlgSha256, {*der}), FromHex(kPkfp));
  // ...but of the PKCS#1 RSAPublicKey, as systemd computes it.
  auto fp = SystemdPublicKeyFingerprint(*der);
  ASSERT_TRUE(fp.ok());
  EXPECT_EQ(*fp, FromHex(kPkfp));
  EXPECT_TRUE(VerifyPcrSignature(*der, FromHex(kPol), FromHex(kSig)).ok());
  // The signature is over SHA-256(pol): pol signed as the digest fails, as
  // does any other pol or a damaged signature.
  Bytes other = FromHex(kPol);
  other[0] ^= 1;
  EXPECT_EQ(VerifyPcrSignature(*der, other, FromHex(kSig)).reason(), "uki_signature_invalid");
  Bytes damaged = FromHex(kSig);
  damaged.back() ^= 1;
  EXPECT_EQ(VerifyPcrSignature(*der, FromHex(kPol), damaged).reason(), "uki_signature_invalid");
  EXPECT_EQ(VerifyPcrSignature(Bytes{1, 2, 3}, FromHex(kPol), FromHex(kSig)).reason(),
            "public_key_malformed");
}

TEST(PcrSignature, PemKeysAreReadStrictly) {
  EXPECT_EQ(PublicKeyDerFromPem("not a key").status().reason(), "public_key_malformed");
  EXPECT_EQ(PublicKeyDerFromPem(std::string(kPublicKeyPem) + "junk").status().reason(),
            "public_key_malformed");
  std::string truncated(kPublicKeyPem);
  truncated.erase(100, 30);
  EXPECT_EQ(PublicKeyDerFromPem(truncated).status().reason(), "public_key_malformed");
  EXPECT_TRUE(PublicKeyDerFromPem(std::string(kPublicKeyPem) + "\n\n").ok());
}

// --- The uki_signed rule ----------------------------------------------------

struct Signer {
  Signer() {
    ossl::PkeyCtxPtr ctx(EVP_PKEY_CTX_new_id(EVP_PKEY_RSA, nullptr));
    EVP_PKEY* raw = nullptr;
    if (!ctx || EVP_PKEY_keygen_init(ctx.get()) != 1 ||
        EVP_PKEY_CTX_set_rsa_keygen_bits(ctx.get(), 2048) != 1 ||
        EVP_PKEY_keygen(ctx.get(), &raw) != 1) {
      throw std::runtime_error("RSA keygen failed");
    }
    key.reset(raw);
    unsigned char* der = nullptr;
    const int n = i2d_PUBKEY(key.get(), &der);
    spki.assign(der, der + n);
    OPENSSL_free(der);
  }
  // A systemd-measure entry for PCR 11 = value.
  PcrSignature Sign(const Bytes& value) const {
    PcrSignature s;
    s.bank = kAlgSha256;
    s.pcrs = {11};
    s.policy_digest = *PolicyPcrDigest(kAlgSha256, 11, value);
    s.key_fingerprint = *SystemdPublicKeyFingerprint(spki);
    ossl::MdCtxPtr ctx(EVP_MD_CTX_new());
    size_t len = 0;
    EVP_DigestSignInit_ex(ctx.get(), nullptr, "SHA256", nullptr, nullptr, key.get(), nullptr);
    EVP_DigestSign(ctx.get(), nullptr, &len, s.policy_digest.data(), s.policy_digest.size());
    s.signature.resize(len);
    EVP_DigestSign(ctx.get(), s.signature.data(), &len, s.policy_digest.data(),
                   s.policy_digest.size());
    s.signature.resize(len);
    return s;
  }
  ossl::PkeyPtr key;
  Bytes spki;
};

std::multiset<std::string> Reasons(const Verdict& v) {
  std::multiset<std::string> out;
  for (const Violation& x : v.violations) out.insert(x.rule + "/" + x.reason);
  return out;
}

TEST(UkiSigned, EveryReason) {
  static const Signer trusted, other;
  // A log with one PCR 11 event, quoted after the enter-initrd phase.
  testing::EventLogBuilder b;
  b.Measure(11, kEvIpl, Str(std::string_view(".linux\0", 7)), testing::Utf16(".linux", true));
  b.Measure(11, kEvIpl, Str("kernel"), testing::Utf16(".linux", true));
  auto log = ParseEventLog(b.bytes());
  ASSERT_TRUE(log.ok());
  const BootFacts facts = ExtractBootFacts(*log);
  Evidence e;
  e.log = &*log;
  e.quoted = *Replay(*log);
  Bytes& pcr11 = e.quoted.at(kAlgSha256).at(11);
  pcr11 = Hash(kAlgSha256, {pcr11, Hash(kAlgSha256, {Str("enter-initrd")})});
  e.quoted.at(kAlgSha1).erase(11);  // sha1 is not what systemd signs
  BootPolicy policy;
  policy.uki_signed.emplace();
  policy.uki_signed->public_keys = {other.spki, trusted.spki};

  EXPECT_EQ(Reasons(Evaluate(policy, facts, e)),
            (std::multiset<std::string>{"uki_signed/uki_signature_missing"}));
  // Signed for enter-initrd by a trusted key (beside an entry for another
  // phase): passes.
  e.pcr_signatures = {trusted.Sign(Bytes(32, 7)), trusted.Sign(pcr11)};
  Verdict v = Evaluate(policy, facts, e);
  EXPECT_TRUE(v.ok);
  for (const Violation& x : v.violations) ADD_FAILURE() << x.rule << ": " << x.message;
  // Only another phase is signed: missing.
  e.pcr_signatures = {trusted.Sign(Bytes(32, 7))};
  EXPECT_EQ(Reasons(Evaluate(policy, facts, e)),
            (std::multiset<std::string>{"uki_signed/uki_signature_missing"}));
  // Signed by a key the policy does not trust.
  policy.uki_signed->public_keys = {other.spki};
  e.pcr_signatures = {trusted.Sign(pcr11)};
  EXPECT_EQ(Reasons(Evaluate(policy, facts, e)),
            (std::multiset<std::string>{"uki_signed/uki_signature_untrusted_key"}));
  // A trusted key's fingerprint on a signature it did not make.
  PcrSignature forged = trusted.Sign(pcr11);
  forged.key_fingerprint = *SystemdPublicKeyFingerprint(other.spki);
  e.pcr_signatures = {forged};
  EXPECT_EQ(Reasons(Evaluate(policy, facts, e)),
            (std::multiset<std::string>{"uki_signed/uki_signature_invalid"}));
  // An entry for other PCRs or another bank is not one for PCR 11.
  policy.uki_signed->public_keys = {trusted.spki};
  PcrSignature wide = trusted.Sign(pcr11);
  wide.pcrs = {11, 12};
  e.pcr_signatures = {wide};
  EXPECT_EQ(Reasons(Evaluate(policy, facts, e)),
            (std::multiset<std::string>{"uki_signed/uki_signature_missing"}));
  // sha256 PCR 11 not quoted.
  e.pcr_signatures = {trusted.Sign(pcr11)};
  EXPECT_TRUE(Evaluate(policy, facts, e).ok);
  e.quoted.at(kAlgSha256).erase(11);
  EXPECT_EQ(Reasons(Evaluate(policy, facts, e)),
            (std::multiset<std::string>{"uki_signed/pcr_not_quoted"}));
}

}  // namespace
}  // namespace rackgate::attest
