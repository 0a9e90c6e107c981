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
    case EkKind::kEccP384: return kNvEkCertEccP384;
  }
  return 0;
}

std::string EkKindName(EkKind kind) {
  switch (kind) {
    case EkKind::kRsa2048: return "rsa2048";
    case EkKind::kEccP256: return "ecc-p256";
    case EkKind::kEccP384: return "ecc-p384";
  }
  return "?";
}

bool EkIsRsa(EkKind kind) { return kind == EkKind::kRsa2048; }

Bytes PolicyASha256() { return FromHex("837197674484b3f81a90cc8d46a5d724fd52d76e06520b64f2a1da1b331469aa"); }
Bytes PolicyASha384() {
  return FromHex(
      "8bbf2266537c171cb56e403c4dc1d4b64f432611dc386e6f532050c3278c930e143e8bb1133824ccb431053871c6db53");
}
Bytes PolicyCSha384() {
  return FromHex(
      "d6032ce61f2fb3c240eb3cf6a33237ef2b6a16f4293c22b455e261cffd217ad5b4947c2d73e63005eed2dc2b3593d165");
}

TPMI_ALG_HASH EkPolicyHash(EkKind kind) {
  return kind == EkKind::kEccP384 ? TPM2_ALG_SHA384 : TPM2_ALG_SHA256;
}

std::vector<Bytes> EkPolicyOrBranches(EkKind kind) {
  if (kind == EkKind::kEccP384) return {PolicyASha384(), PolicyCSha384()};
  return {};
}

TPM2B_PUBLIC EkTemplate(EkKind kind) {
  TPM2B_PUBLIC t;
  std::memset(&t, 0, sizeof(t));
  TPMT_PUBLIC& p = t.publicArea;
  switch (kind) {
    case EkKind::kRsa2048:
      p.type = TPM2_ALG_RSA;
      p.nameAlg = TPM2_ALG_SHA256;
      p.objectAttributes = kEkAttributes;
      SetDigest(&p.authPolicy, PolicyASha256());
      p.parameters.rsaDetail.symmetric = {TPM2_ALG_AES, {.aes = 128}, {.aes = TPM2_ALG_CFB}};
      p.parameters.rsaDetail.scheme.scheme = TPM2_ALG_NULL;
      p.parameters.rsaDetail.keyBits = 2048;
      p.parameters.rsaDetail.exponent = 0;
      p.unique.rsa.size = 256;  // zeros
      break;
    case EkKind::kEccP256:
      p.type = TPM2_ALG_ECC;
      p.nameAlg = TPM2_ALG_SHA256;
      p.objectAttributes = kEkAttributes;
      SetDigest(&p.authPolicy, PolicyASha256());
      p.parameters.eccDetail.symmetric = {TPM2_ALG_AES, {.aes = 128}, {.aes = TPM2_ALG_CFB}};
      p.parameters.eccDetail.scheme.scheme = TPM2_ALG_NULL;
      p.parameters.eccDetail.curveID = TPM2_ECC_NIST_P256;
      p.parameters.eccDetail.kdf.scheme = TPM2_ALG_NULL;
      p.unique.ecc.x.size = 32;  // zeros
      p.unique.ecc.y.size = 32;
      break;
    case EkKind::kEccP384: {
      p.type = TPM2_ALG_ECC;
      p.nameAlg = TPM2_ALG_SHA384;
      // The high-range templates add userWithAuth (empty auth) beside the
      // policy; the agent still uses the policy, as for the low range.
      p.objectAttributes = kEkAttributes | TPMA_OBJECT_USERWITHAUTH;
      // PolicyOR(PolicyA, PolicyC) in sha384 (EkPolicyOrBranches), checked
      // against a recomputation in templates_test.cc.
      SetDigest(&p.authPolicy,
                FromHex("b26e7d28d11a50bc53d882bcf5fd3a1a074148bb35d3b4e4cb1c0ad9bde419ca"
                        "cb47ba09699646150f9fc000f3f80e12"));
      p.parameters.eccDetail.symmetric = {TPM2_ALG_AES, {.aes = 256}, {.aes = TPM2_ALG_CFB}};
      p.parameters.eccDetail.scheme.scheme = TPM2_ALG_NULL;
      p.parameters.eccDetail.curveID = TPM2_ECC_NIST_P384;
      p.parameters.eccDetail.kdf.scheme = TPM2_ALG_NULL;
      break;  // unique x and y empty
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
