// TPM public-area templates (TCG EK Credential Profile 2.5 §2.1.5, TCG TPM
// v2.0 Provisioning Guidance §7.5 for the SRK).
#include "agent/templates.h"

#include <cstring>

#include "wire/codec.h"
#include "base/hex.h"

namespace rackgate::agent {

namespace {

Bytes FromHex(const char* hex) { return *hex::Decode(hex, 64); }

void SetDigest(TPM2B_DIGEST* d, const Bytes& v) {
  d->size = static_cast<UINT16>(v.size());
  std::memcpy(d->buffer, v.data(), v.size());
}

constexpr TPMA_OBJECT kEkAttributes = TPMA_OBJECT_FIXEDTPM | TPMA_OBJECT_FIXEDPARENT |
                                      TPMA_OBJECT_SENSITIVEDATAORIGIN | TPMA_OBJECT_ADMINWITHPOLICY |
                                      TPMA_OBJECT_RESTRICTED | TPMA_OBJECT_DECRYPT;

}  // namespace

uint32_t EkCertNvIndex(EkKind kind) {
  switch (kind) {
    case EkKind::kRsa2048: return kNvEkCertRsa2048;
    case EkKind::kEccP256: return kNvEkCertEccP256;
    case EkKind::kRsa2048High: return kNvEkCertRsa2048High;
    case EkKind::kEccP256High: return kNvEkCertEccP256High;
    case EkKind::kEccP384: return kNvEkCertEccP384;
    case EkKind::kEccP521: return kNvEkCertEccP521;
    case EkKind::kRsa3072: return kNvEkCertRsa3072;
  }
  return 0;
}

std::string EkKindName(EkKind kind) {
  switch (kind) {
    case EkKind::kRsa2048: return "rsa2048";
    case EkKind::kEccP256: return "ecc-p256";
    case EkKind::kRsa2048High: return "rsa2048-high";
    case EkKind::kEccP256High: return "ecc-p256-high";
    case EkKind::kEccP384: return "ecc-p384";
    case EkKind::kEccP521: return "ecc-p521";
    case EkKind::kRsa3072: return "rsa3072";
  }
  return "?";
}

std::optional<EkKind> EkKindFromName(std::string_view name) {
  for (EkKind kind : kEkKindsByPreference) {
    if (EkKindName(kind) == name) return kind;
  }
  return std::nullopt;
}

std::string EkTemplateId(EkKind kind) {
  switch (kind) {
    case EkKind::kRsa2048: return "L-1";
    case EkKind::kEccP256: return "L-2";
    case EkKind::kRsa2048High: return "H-1";
    case EkKind::kEccP256High: return "H-2";
    case EkKind::kEccP384: return "H-3";
    case EkKind::kEccP521: return "H-4";
    case EkKind::kRsa3072: return "H-6";
  }
  return "?";
}

bool EkIsRsa(EkKind kind) {
  return kind == EkKind::kRsa2048 || kind == EkKind::kRsa2048High || kind == EkKind::kRsa3072;
}

// The published values (EK Credential Profile 2.5, Annex B.6.2-B.6.5);
// templates_test.cc recomputes A and B from their definitions, and checks C
// through B.
Bytes EkPolicyA(TPMI_ALG_HASH hash) {
  switch (hash) {
    case TPM2_ALG_SHA256: return FromHex("837197674484b3f81a90cc8d46a5d724fd52d76e06520b64f2a1da1b331469aa");
    case TPM2_ALG_SHA384:
      return FromHex(
          "8bbf2266537c171cb56e403c4dc1d4b64f432611dc386e6f532050c3278c930e143e8bb1133824ccb431053871c6db53");
    case TPM2_ALG_SHA512:
      return FromHex(
          "1e3b76502c8a1425aa0b7b3fc646a1b0fae063b03b5368f9c4cddecaff0891dd"
          "682bac1a85d4d832b781ea451915de5fc5bf0dc4a1917cd42fa041e3f998e0ee");
    default: return {};
  }
}

Bytes EkPolicyC(TPMI_ALG_HASH hash) {
  switch (hash) {
    case TPM2_ALG_SHA256: return FromHex("3767e2edd43ff45a3a7e1eaefcef78643dca964632e7aad82c673a30d8633fde");
    case TPM2_ALG_SHA384:
      return FromHex(
          "d6032ce61f2fb3c240eb3cf6a33237ef2b6a16f4293c22b455e261cffd217ad5b4947c2d73e63005eed2dc2b3593d165");
    case TPM2_ALG_SHA512:
      return FromHex(
          "589ee1e146544716e8deafe6db247b01b81e9f9c7dd16b814aa159138749105f"
          "ba5388dd1dea702f35240c184933121e2c61b8f50d3ef91393a49a38c3f73fc8");
    default: return {};
  }
}

Bytes EkPolicyB(TPMI_ALG_HASH hash) {
  switch (hash) {
    case TPM2_ALG_SHA256: return FromHex("ca3d0a99a2b93906f7a3342414efcfb3a385d44cd1fd459089d19b5071c0b7a0");
    case TPM2_ALG_SHA384:
      return FromHex(
          "b26e7d28d11a50bc53d882bcf5fd3a1a074148bb35d3b4e4cb1c0ad9bde419cacb47ba09699646150f9fc000f3f80e12");
    case TPM2_ALG_SHA512:
      return FromHex(
          "b8221ca69e8550a4914de3faa6a18c072cc01208073a928d5d66d59ef79e49a4"
          "29c41a6b269571d57edb25fbdb1838425608b413cd616a5f6db5b6071af99bea");
    default: return {};
  }
}

TPMI_ALG_HASH EkPolicyHash(EkKind kind) {
  switch (kind) {
    case EkKind::kEccP384:
    case EkKind::kRsa3072: return TPM2_ALG_SHA384;
    case EkKind::kEccP521: return TPM2_ALG_SHA512;
    default: return TPM2_ALG_SHA256;
  }
}

namespace {

bool EkIsHighRange(EkKind kind) { return kind != EkKind::kRsa2048 && kind != EkKind::kEccP256; }

}  // namespace

std::vector<Bytes> EkPolicyOrBranches(EkKind kind) {
  if (!EkIsHighRange(kind)) return {};
  return {EkPolicyA(EkPolicyHash(kind)), EkPolicyC(EkPolicyHash(kind))};
}

TPM2B_PUBLIC EkTemplate(EkKind kind) {
  TPM2B_PUBLIC t;
  std::memset(&t, 0, sizeof(t));
  TPMT_PUBLIC& p = t.publicArea;
  const bool high = EkIsHighRange(kind);
  p.nameAlg = EkPolicyHash(kind);
  // The high-range templates add userWithAuth (empty auth) beside the
  // policy; the agent still uses the policy, as for the low range.
  p.objectAttributes = high ? (kEkAttributes | TPMA_OBJECT_USERWITHAUTH) : kEkAttributes;
  SetDigest(&p.authPolicy, high ? EkPolicyB(p.nameAlg) : EkPolicyA(p.nameAlg));
  // AES-128-CFB with a sha256 nameAlg, AES-256-CFB with sha384/sha512.
  const TPMT_SYM_DEF_OBJECT symmetric = {TPM2_ALG_AES, {.aes = static_cast<TPMI_AES_KEY_BITS>(
                                                           p.nameAlg == TPM2_ALG_SHA256 ? 128 : 256)},
                                         {.aes = TPM2_ALG_CFB}};
  if (EkIsRsa(kind)) {
    p.type = TPM2_ALG_RSA;
    p.parameters.rsaDetail.symmetric = symmetric;
    p.parameters.rsaDetail.scheme.scheme = TPM2_ALG_NULL;
    p.parameters.rsaDetail.keyBits = kind == EkKind::kRsa3072 ? 3072 : 2048;
    p.parameters.rsaDetail.exponent = 0;
    if (!high) p.unique.rsa.size = 256;  // L-1: 256 zero bytes; H: empty
  } else {
    p.type = TPM2_ALG_ECC;
    p.parameters.eccDetail.symmetric = symmetric;
    p.parameters.eccDetail.scheme.scheme = TPM2_ALG_NULL;
    p.parameters.eccDetail.curveID = kind == EkKind::kEccP384   ? TPM2_ECC_NIST_P384
                                     : kind == EkKind::kEccP521 ? TPM2_ECC_NIST_P521
                                                                : TPM2_ECC_NIST_P256;
    p.parameters.eccDetail.kdf.scheme = TPM2_ALG_NULL;
    if (!high) {  // L-2: 32 zero bytes each; H: empty
      p.unique.ecc.x.size = 32;
      p.unique.ecc.y.size = 32;
    }
  }
  return t;
}

TPM2B_PUBLIC AkTemplate(AkAlg alg) {
  TPM2B_PUBLIC t;
  std::memset(&t, 0, sizeof(t));
  TPMT_PUBLIC& p = t.publicArea;
  p.nameAlg = TPM2_ALG_SHA256;
  // What the appliance's CheckAkPolicy demands: a restricted signing key
  // (it signs only TPM-generated structures, so a quote cannot be forged
  // with it) that was born in this TPM and cannot leave it.
  p.objectAttributes = TPMA_OBJECT_FIXEDTPM | TPMA_OBJECT_FIXEDPARENT | TPMA_OBJECT_SENSITIVEDATAORIGIN |
                       TPMA_OBJECT_USERWITHAUTH | TPMA_OBJECT_RESTRICTED | TPMA_OBJECT_SIGN_ENCRYPT;
  if (alg == AkAlg::kRsa) {
    p.type = TPM2_ALG_RSA;
    p.parameters.rsaDetail.symmetric.algorithm = TPM2_ALG_NULL;
    p.parameters.rsaDetail.scheme.scheme = TPM2_ALG_RSASSA;
    p.parameters.rsaDetail.scheme.details.rsassa.hashAlg = TPM2_ALG_SHA256;
    p.parameters.rsaDetail.keyBits = 2048;
    p.parameters.rsaDetail.exponent = 0;
  } else {
    p.type = TPM2_ALG_ECC;
    p.parameters.eccDetail.symmetric.algorithm = TPM2_ALG_NULL;
    p.parameters.eccDetail.scheme.scheme = TPM2_ALG_ECDSA;
    p.parameters.eccDetail.scheme.details.ecdsa.hashAlg = TPM2_ALG_SHA256;
    p.parameters.eccDetail.curveID = TPM2_ECC_NIST_P256;
    p.parameters.eccDetail.kdf.scheme = TPM2_ALG_NULL;
  }
  return t;
}

TPM2B_PUBLIC SrkTemplate() {
  TPM2B_PUBLIC t;
  std::memset(&t, 0, sizeof(t));
  TPMT_PUBLIC& p = t.publicArea;
  p.type = TPM2_ALG_ECC;
  p.nameAlg = TPM2_ALG_SHA256;
  p.objectAttributes = TPMA_OBJECT_FIXEDTPM | TPMA_OBJECT_FIXEDPARENT | TPMA_OBJECT_SENSITIVEDATAORIGIN |
                       TPMA_OBJECT_USERWITHAUTH | TPMA_OBJECT_NODA | TPMA_OBJECT_RESTRICTED |
                       TPMA_OBJECT_DECRYPT;
  p.parameters.eccDetail.symmetric = {TPM2_ALG_AES, {.aes = 128}, {.aes = TPM2_ALG_CFB}};
  p.parameters.eccDetail.scheme.scheme = TPM2_ALG_NULL;
  p.parameters.eccDetail.curveID = TPM2_ECC_NIST_P256;
  p.parameters.eccDetail.kdf.scheme = TPM2_ALG_NULL;
  return t;
}

TPM2B_PUBLIC ClientKeyTemplate() {
  TPM2B_PUBLIC t;
  std::memset(&t, 0, sizeof(t));
  TPMT_PUBLIC& p = t.publicArea;
  p.type = TPM2_ALG_ECC;
  p.nameAlg = TPM2_ALG_SHA256;
  // Unrestricted: it signs arbitrary digests (the CSR and, later, TLS
  // handshakes). fixedTPM + sensitiveDataOrigin is what the appliance's
  // TPM2_Certify check proves: the key was born in this TPM and stays there.
  p.objectAttributes = TPMA_OBJECT_FIXEDTPM | TPMA_OBJECT_FIXEDPARENT | TPMA_OBJECT_SENSITIVEDATAORIGIN |
                       TPMA_OBJECT_USERWITHAUTH | TPMA_OBJECT_SIGN_ENCRYPT;
  p.parameters.eccDetail.symmetric.algorithm = TPM2_ALG_NULL;
  p.parameters.eccDetail.scheme.scheme = TPM2_ALG_ECDSA;
  p.parameters.eccDetail.scheme.details.ecdsa.hashAlg = TPM2_ALG_SHA256;
  p.parameters.eccDetail.curveID = TPM2_ECC_NIST_P256;
  p.parameters.eccDetail.kdf.scheme = TPM2_ALG_NULL;
  return t;
}

}  // namespace rackgate::agent
