// Software TPM key operations for tests and benchmarks.
#include "attest/testing/soft_tpm.h"

#include <openssl/core_names.h>
#include <openssl/crypto.h>
#include <openssl/ec.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/rsa.h>
#include <tss2/tss2_mu.h>

#include <cstring>
#include <iterator>
#include <map>
#include <string>
#include <stdexcept>

#include "base/byte_reader.h"

namespace rackgate::testing {

using namespace attest;  // NOLINT: test support

namespace {

struct PkeyFree {
  void operator()(EVP_PKEY* p) const { EVP_PKEY_free(p); }
};
struct PkeyCtxFree {
  void operator()(EVP_PKEY_CTX* p) const { EVP_PKEY_CTX_free(p); }
};
using Pkey = std::unique_ptr<EVP_PKEY, PkeyFree>;
using PkeyCtx = std::unique_ptr<EVP_PKEY_CTX, PkeyCtxFree>;

void Check(bool ok, const char* what) {
  if (!ok) throw std::runtime_error(std::string("soft_tpm: ") + what);
}

const EVP_MD* Md(uint16_t alg) {
  switch (alg) {
    case kAlgSha1: return EVP_sha1();
    case kAlgSha256: return EVP_sha256();
    case kAlgSha384: return EVP_sha384();
    case kAlgSha512: return EVP_sha512();
  }
  throw std::runtime_error("soft_tpm: hash");
}

Bytes Digest(uint16_t alg, std::span<const uint8_t> data) {
  Bytes out(EVP_MD_get_size(Md(alg)));
  unsigned int n = 0;
  Check(EVP_Digest(data.data(), data.size(), out.data(), &n, Md(alg), nullptr) == 1, "digest");
  return out;
}

Bytes BnParam(EVP_PKEY* k, const char* name, size_t width) {
  BIGNUM* bn = nullptr;
  Check(EVP_PKEY_get_bn_param(k, name, &bn) == 1, name);
  Bytes out(width ? width : BN_num_bytes(bn));
  Check(BN_bn2binpad(bn, out.data(), static_cast<int>(out.size())) >= 0, "bn2bin");
  BN_free(bn);
  return out;
}

const char* CurveName(uint16_t curve) {
  return curve == kEccNistP521 ? "P-521" : curve == kEccNistP384 ? "P-384" : "P-256";
}
size_t CurveBytes(uint16_t curve) {
  return curve == kEccNistP521 ? 66 : curve == kEccNistP384 ? 48 : 32;
}
const char* CurveGroup(uint16_t curve) {
  return curve == kEccNistP521 ? "secp521r1" : curve == kEccNistP384 ? "secp384r1" : "prime256v1";
}

template <typename T>
void CopyTo(T* dst, const Bytes& src) {
  Check(src.size() <= sizeof(dst->buffer), "buffer size");
  dst->size = static_cast<uint16_t>(src.size());
  std::memcpy(dst->buffer, src.data(), src.size());
}

Bytes AesCfb(bool encrypt, std::span<const uint8_t> key, std::span<const uint8_t> in) {
  const EVP_CIPHER* c = key.size() == 16 ? EVP_aes_128_cfb128() : EVP_aes_256_cfb128();
  EVP_CIPHER_CTX* ctx = EVP_CIPHER_CTX_new();
  const uint8_t iv[16] = {};
  Bytes out(in.size() + 16);
  int n = 0, f = 0;
  Check(EVP_CipherInit_ex(ctx, c, nullptr, key.data(), iv, encrypt ? 1 : 0) == 1 &&
            EVP_CipherUpdate(ctx, out.data(), &n, in.data(), static_cast<int>(in.size())) == 1 &&
            EVP_CipherFinal_ex(ctx, out.data() + n, &f) == 1,
        "aes");
  EVP_CIPHER_CTX_free(ctx);
  out.resize(n + f);
  return out;
}

}  // namespace

struct SoftKey::Impl {
  Pkey key;
};

SoftKey::SoftKey() : impl_(std::make_unique<Impl>()) {}
EVP_PKEY* SoftKey::pkey() const { return impl_->key.get(); }
SoftKey::SoftKey(SoftKey&&) noexcept = default;
SoftKey& SoftKey::operator=(SoftKey&&) noexcept = default;
SoftKey::~SoftKey() = default;

namespace {

// A new key pair of spec's type and size or curve. Never null.
EVP_PKEY* NewKeyPair(const SoftKeySpec& spec) {
  EVP_PKEY* key = spec.type == kAlgRsa
                      ? EVP_PKEY_Q_keygen(nullptr, nullptr, "RSA", static_cast<size_t>(spec.rsa_bits))
                      : EVP_PKEY_Q_keygen(nullptr, nullptr, "EC", CurveName(spec.curve));
  Check(key != nullptr, spec.type == kAlgRsa ? "rsa keygen" : "ec keygen");
  return key;
}

}  // namespace

SoftKey SoftKey::Generate(const SoftKeySpec& spec) { return FromKey(NewKeyPair(spec), spec); }

SoftKey SoftKey::FromKey(EVP_PKEY* key, const SoftKeySpec& spec) {
  SoftKey k;
  k.impl_->key.reset(key);
  Check(key != nullptr, "no key");
  TPM2B_PUBLIC p = {};
  TPMT_PUBLIC& t = p.publicArea;
  t.type = spec.type;
  t.nameAlg = spec.name_alg;
  t.objectAttributes = spec.attributes;
  CopyTo(&t.authPolicy, spec.auth_policy);
  if (spec.type == kAlgRsa) {
    Check(EVP_PKEY_get_base_id(key) == EVP_PKEY_RSA && EVP_PKEY_get_bits(key) == spec.rsa_bits, "rsa key");
    TPMS_RSA_PARMS& r = t.parameters.rsaDetail;
    r.symmetric.algorithm = spec.symmetric_bits ? TPM2_ALG_AES : TPM2_ALG_NULL;
    if (spec.symmetric_bits) {
      r.symmetric.keyBits.aes = spec.symmetric_bits;
      r.symmetric.mode.aes = TPM2_ALG_CFB;
    }
    r.scheme.scheme = spec.scheme;
    if (spec.scheme != kAlgNull) r.scheme.details.anySig.hashAlg = spec.scheme_hash;
    r.keyBits = static_cast<uint16_t>(spec.rsa_bits);
    r.exponent = 0;  // 65537, as TPMs send it
    CopyTo(&t.unique.rsa, BnParam(k.impl_->key.get(), OSSL_PKEY_PARAM_RSA_N, spec.rsa_bits / 8));
  } else {
    char group[64] = {};
    size_t group_len = 0;
    Check(EVP_PKEY_get_base_id(key) == EVP_PKEY_EC &&
              EVP_PKEY_get_group_name(key, group, sizeof(group), &group_len) == 1 &&
              std::string(group) == CurveGroup(spec.curve),
          "ec key");
    TPMS_ECC_PARMS& e = t.parameters.eccDetail;
    e.symmetric.algorithm = spec.symmetric_bits ? TPM2_ALG_AES : TPM2_ALG_NULL;
    if (spec.symmetric_bits) {
      e.symmetric.keyBits.aes = spec.symmetric_bits;
      e.symmetric.mode.aes = TPM2_ALG_CFB;
    }
    e.scheme.scheme = spec.scheme;
    if (spec.scheme != kAlgNull) e.scheme.details.anySig.hashAlg = spec.scheme_hash;
    e.curveID = spec.curve;
    e.kdf.scheme = TPM2_ALG_NULL;
    size_t w = CurveBytes(spec.curve);
    CopyTo(&t.unique.ecc.x, BnParam(k.impl_->key.get(), OSSL_PKEY_PARAM_EC_PUB_X, w));
    CopyTo(&t.unique.ecc.y, BnParam(k.impl_->key.get(), OSSL_PKEY_PARAM_EC_PUB_Y, w));
  }
  uint8_t buf[sizeof(TPM2B_PUBLIC)];
  size_t off = 0;
  Check(Tss2_MU_TPM2B_PUBLIC_Marshal(&p, buf, sizeof(buf), &off) == TSS2_RC_SUCCESS, "marshal public");
  k.tpm2b_.assign(buf, buf + off);
  auto parsed = ParseTpm2bPublic(k.tpm2b_);
  Check(parsed.ok(), "parse own public");
  k.pub_ = std::move(parsed).value();
  return k;
}

Bytes TcgEkPolicyASha256() {
  static const uint8_t k[] = {0x83, 0x71, 0x97, 0x67, 0x44, 0x84, 0xb3, 0xf8, 0x1a, 0x90, 0xcc,
                              0x8d, 0x46, 0xa5, 0xd7, 0x24, 0xfd, 0x52, 0xd7, 0x6e, 0x06, 0x52,
                              0x0b, 0x64, 0xf2, 0xa1, 0xda, 0x1b, 0x33, 0x14, 0x69, 0xaa};
  return Bytes(std::begin(k), std::end(k));
}

Bytes TcgEkPolicyOrSha384() {
  static const uint8_t k[] = {0xb2, 0x6e, 0x7d, 0x28, 0xd1, 0x1a, 0x50, 0xbc, 0x53, 0xd8, 0x82, 0xbc,
                              0xf5, 0xfd, 0x3a, 0x1a, 0x07, 0x41, 0x48, 0xbb, 0x35, 0xd3, 0xb4, 0xe4,
                              0xcb, 0x1c, 0x0a, 0xd9, 0xbd, 0xe4, 0x19, 0xca, 0xcb, 0x47, 0xba, 0x09,
                              0x69, 0x96, 0x46, 0x15, 0x0f, 0x9f, 0xc0, 0x00, 0xf3, 0xf8, 0x0e, 0x12};
  return Bytes(std::begin(k), std::end(k));
}

SoftKeySpec SoftKey::EkSpec(uint16_t type, uint16_t curve) {
  SoftKeySpec s;
  s.type = type;
  s.curve = curve;
  const bool high = curve == kEccNistP384 && type == kAlgEcc;
  s.name_alg = high ? kAlgSha384 : kAlgSha256;
  s.scheme = kAlgNull;
  s.attributes = kAttrFixedTpm | kAttrFixedParent | kAttrSensitiveDataOrigin |
                 kAttrAdminWithPolicy | kAttrRestricted | kAttrDecrypt;
  if (high) s.attributes |= kAttrUserWithAuth;
  s.symmetric_bits = high ? 256 : 128;
  s.auth_policy = high ? TcgEkPolicyOrSha384() : TcgEkPolicyASha256();
  return s;
}

Bytes TcgEkPolicyOrSha512() {
  static const uint8_t k[] = {
      0xb8, 0x22, 0x1c, 0xa6, 0x9e, 0x85, 0x50, 0xa4, 0x91, 0x4d, 0xe3, 0xfa, 0xa6,
      0xa1, 0x8c, 0x07, 0x2c, 0xc0, 0x12, 0x08, 0x07, 0x3a, 0x92, 0x8d, 0x5d, 0x66,
      0xd5, 0x9e, 0xf7, 0x9e, 0x49, 0xa4, 0x29, 0xc4, 0x1a, 0x6b, 0x26, 0x95, 0x71,
      0xd5, 0x7e, 0xdb, 0x25, 0xfb, 0xdb, 0x18, 0x38, 0x42, 0x56, 0x08, 0xb4, 0x13,
      0xcd, 0x61, 0x6a, 0x5f, 0x6d, 0xb5, 0xb6, 0x07, 0x1a, 0xf9, 0x9b, 0xea};
  return Bytes(std::begin(k), std::end(k));
}

SoftKeySpec SoftKey::EkSpecRsa3072() {
  SoftKeySpec s = EkSpec(kAlgEcc, kEccNistP384);  // H-3's attributes and policy
  s.type = kAlgRsa;
  s.rsa_bits = 3072;
  return s;
}

SoftKeySpec SoftKey::EkSpecP521() {
  SoftKeySpec s = EkSpec(kAlgEcc, kEccNistP384);
  s.curve = kEccNistP521;
  s.name_alg = kAlgSha512;
  s.auth_policy = TcgEkPolicyOrSha512();
  return s;
}

SoftKey SoftKey::GenerateEk(uint16_t type, uint16_t curve) { return Generate(EkSpec(type, curve)); }

struct SoftKeyPool::Keys {
  std::vector<Pkey> made;
  size_t used = 0;  // in this round
};

SoftKeyPool::SoftKeyPool() = default;
SoftKeyPool::~SoftKeyPool() = default;

SoftKey SoftKeyPool::Next(const SoftKeySpec& spec) {
  const bool rsa = spec.type == kAlgRsa;
  auto& keys = keys_[Kind{spec.type, rsa ? spec.rsa_bits : 0, rsa ? 0 : spec.curve}];
  if (!keys) keys = std::make_unique<Keys>();
  // The first round to get this far makes the key pair, kept for the next.
  if (keys->used == keys->made.size()) keys->made.emplace_back(NewKeyPair(spec));
  EVP_PKEY* key = keys->made[keys->used++].get();
  Check(EVP_PKEY_up_ref(key) == 1, "key up_ref");
  return SoftKey::FromKey(key, spec);  // takes the reference just made
}

void SoftKeyPool::Rewind() {
  for (auto& [kind, keys] : keys_) keys->used = 0;
}

SoftKeyPool& TestKeyPool() {
  static SoftKeyPool pool;
  return pool;
}

SoftKeySpec SoftKey::AkSpec(uint16_t type) {
  SoftKeySpec s;  // the defaults are tpm2_createak's attributes
  s.type = type;
  s.rsa_bits = 2048;
  s.curve = kEccNistP256;
  s.name_alg = kAlgSha256;
  s.scheme = type == kAlgRsa ? kAlgRsaSsa : kAlgEcdsa;
  s.scheme_hash = kAlgSha256;
  return s;
}

SoftKey SoftKey::GenerateAk(uint16_t type) { return Generate(AkSpec(type)); }

Bytes QualifiedName(uint16_t name_alg, std::span<const uint8_t> parent_qn, std::span<const uint8_t> name) {
  Bytes data(parent_qn.begin(), parent_qn.end());
  data.insert(data.end(), name.begin(), name.end());
  Bytes out = {static_cast<uint8_t>(name_alg >> 8), static_cast<uint8_t>(name_alg)};
  Bytes d = Digest(name_alg, data);
  out.insert(out.end(), d.begin(), d.end());
  return out;
}

Bytes HierarchyQualifiedName(uint32_t handle) {
  return {static_cast<uint8_t>(handle >> 24), static_cast<uint8_t>(handle >> 16),
          static_cast<uint8_t>(handle >> 8), static_cast<uint8_t>(handle)};
}

Bytes AkQualifiedName(const SoftKey& ek, const SoftKey& ak) {
  const Bytes ek_qn = QualifiedName(ek.pub().name_alg, HierarchyQualifiedName(kRhEndorsement), ek.name());
  return QualifiedName(ak.pub().name_alg, ek_qn, ak.name());
}

Bytes SoftKey::Sign(std::span<const uint8_t> message, uint16_t scheme, uint16_t hash) const {
  if (scheme == kAlgNull) scheme = pub_.scheme;
  if (hash == kAlgNull) hash = pub_.scheme_hash;
  Bytes digest = Digest(hash, message);
  PkeyCtx ctx(EVP_PKEY_CTX_new_from_pkey(nullptr, impl_->key.get(), nullptr));
  Check(ctx && EVP_PKEY_sign_init(ctx.get()) == 1 &&
            EVP_PKEY_CTX_set_signature_md(ctx.get(), Md(hash)) == 1,
        "sign init");
  if (scheme == kAlgRsaSsa) Check(EVP_PKEY_CTX_set_rsa_padding(ctx.get(), RSA_PKCS1_PADDING) == 1, "pad");
  if (scheme == kAlgRsaPss) {
    Check(EVP_PKEY_CTX_set_rsa_padding(ctx.get(), RSA_PKCS1_PSS_PADDING) == 1 &&
              EVP_PKEY_CTX_set_rsa_pss_saltlen(ctx.get(), RSA_PSS_SALTLEN_DIGEST) == 1,
          "pss");
  }
  size_t n = 0;
  Check(EVP_PKEY_sign(ctx.get(), nullptr, &n, digest.data(), digest.size()) == 1, "sign size");
  Bytes sig(n);
  Check(EVP_PKEY_sign(ctx.get(), sig.data(), &n, digest.data(), digest.size()) == 1, "sign");
  sig.resize(n);
  TPMT_SIGNATURE t = {};
  t.sigAlg = scheme;
  if (scheme == kAlgEcdsa) {
    const unsigned char* p = sig.data();
    ECDSA_SIG* es = d2i_ECDSA_SIG(nullptr, &p, static_cast<long>(sig.size()));
    Check(es != nullptr, "d2i ecdsa");
    size_t w = CurveBytes(pub_.ecc_curve);
    Bytes r(w), s(w);
    BN_bn2binpad(ECDSA_SIG_get0_r(es), r.data(), static_cast<int>(w));
    BN_bn2binpad(ECDSA_SIG_get0_s(es), s.data(), static_cast<int>(w));
    ECDSA_SIG_free(es);
    t.signature.ecdsa.hash = hash;
    CopyTo(&t.signature.ecdsa.signatureR, r);
    CopyTo(&t.signature.ecdsa.signatureS, s);
  } else {
    t.signature.rsassa.hash = hash;
    CopyTo(&t.signature.rsassa.sig, sig);
  }
  uint8_t buf[sizeof(TPMT_SIGNATURE)];
  size_t off = 0;
  Check(Tss2_MU_TPMT_SIGNATURE_Marshal(&t, buf, sizeof(buf), &off) == TSS2_RC_SUCCESS, "marshal sig");
  return Bytes(buf, buf + off);
}

std::optional<Bytes> SoftKey::ActivateCredential(const Credential& cred,
                                                 std::span<const uint8_t> name) const {
  const uint16_t alg = pub_.name_alg;
  const size_t dsize = EVP_MD_get_size(Md(alg));
  Bytes seed;
  if (pub_.type == kAlgRsa) {
    PkeyCtx ctx(EVP_PKEY_CTX_new_from_pkey(nullptr, impl_->key.get(), nullptr));
    static const char kLabel[] = "IDENTITY";
    unsigned char* label = static_cast<unsigned char*>(OPENSSL_memdup(kLabel, sizeof(kLabel)));
    Check(ctx && EVP_PKEY_decrypt_init(ctx.get()) == 1 &&
              EVP_PKEY_CTX_set_rsa_padding(ctx.get(), RSA_PKCS1_OAEP_PADDING) == 1 &&
              EVP_PKEY_CTX_set_rsa_oaep_md(ctx.get(), Md(alg)) == 1 &&
              EVP_PKEY_CTX_set0_rsa_oaep_label(ctx.get(), label, sizeof(kLabel)) == 1,
          "oaep");
    size_t n = 512;
    seed.resize(n);
    if (EVP_PKEY_decrypt(ctx.get(), seed.data(), &n, cred.encrypted_secret.data(),
                         cred.encrypted_secret.size()) != 1) {
      return std::nullopt;
    }
    seed.resize(n);
  } else {
    ByteReader r(cred.encrypted_secret);
    ByteReader x, y;
    if (!r.ReadU16BEPrefixed(&x) || !r.ReadU16BEPrefixed(&y) || !r.empty()) return std::nullopt;
    // A TPM2B_ECC_PARAMETER may come without its leading zero bytes (as
    // tpm2_makecredential sends a coordinate below 2^(8(n-1))); the TPM reads
    // it as a number, so pad it back to the field size for the point. KDFe
    // below takes the ephemeral x exactly as it was sent.
    const size_t w = CurveBytes(pub_.ecc_curve);
    if (x.remaining() > w || y.remaining() > w) return std::nullopt;
    Bytes point = {0x04};
    point.insert(point.end(), w - x.remaining(), 0);
    point.insert(point.end(), x.rest().begin(), x.rest().end());
    point.insert(point.end(), w - y.remaining(), 0);
    point.insert(point.end(), y.rest().begin(), y.rest().end());
    OSSL_PARAM params[] = {
        OSSL_PARAM_construct_utf8_string(OSSL_PKEY_PARAM_GROUP_NAME,
                                         const_cast<char*>(CurveName(pub_.ecc_curve)), 0),
        OSSL_PARAM_construct_octet_string(OSSL_PKEY_PARAM_PUB_KEY, point.data(), point.size()),
        OSSL_PARAM_construct_end()};
    PkeyCtx fctx(EVP_PKEY_CTX_new_from_name(nullptr, "EC", nullptr));
    EVP_PKEY* peer_raw = nullptr;
    Check(EVP_PKEY_fromdata_init(fctx.get()) == 1 &&
              EVP_PKEY_fromdata(fctx.get(), &peer_raw, EVP_PKEY_PUBLIC_KEY, params) == 1,
          "peer");
    Pkey peer(peer_raw);
    PkeyCtx dctx(EVP_PKEY_CTX_new_from_pkey(nullptr, impl_->key.get(), nullptr));
    size_t zlen = 0;
    Check(EVP_PKEY_derive_init(dctx.get()) == 1 && EVP_PKEY_derive_set_peer(dctx.get(), peer.get()) == 1 &&
              EVP_PKEY_derive(dctx.get(), nullptr, &zlen) == 1,
          "derive");
    Bytes z(zlen);
    Check(EVP_PKEY_derive(dctx.get(), z.data(), &zlen) == 1, "derive");
    seed = KdfE(alg, z, "IDENTITY", x.rest(), pub_.ecc_x, dsize * 8);
  }
  ByteReader id(cred.id_object);
  ByteReader hmac;
  if (!id.ReadU16BEPrefixed(&hmac)) return std::nullopt;
  Bytes enc(id.rest().begin(), id.rest().end());
  Bytes hmac_key = KdfA(alg, seed, "INTEGRITY", {}, {}, dsize * 8);
  Bytes data = enc;
  data.insert(data.end(), name.begin(), name.end());
  Bytes expect(dsize);
  unsigned int hl = 0;
  HMAC(Md(alg), hmac_key.data(), static_cast<int>(hmac_key.size()), data.data(), data.size(),
       expect.data(), &hl);
  if (hmac.remaining() != expect.size() ||
      CRYPTO_memcmp(hmac.rest().data(), expect.data(), expect.size()) != 0) {
    return std::nullopt;
  }
  Bytes sym = KdfA(alg, seed, "STORAGE", name, {}, pub_.symmetric_key_bits);
  Bytes plain = AesCfb(false, sym, enc);
  ByteReader pr(plain);
  ByteReader secret;
  if (!pr.ReadU16BEPrefixed(&secret) || !pr.empty()) return std::nullopt;
  return Bytes(secret.rest().begin(), secret.rest().end());
}

namespace {

void FillSelection(TPML_PCR_SELECTION* out, const std::vector<PcrSelection>& sel) {
  out->count = static_cast<uint32_t>(sel.size());
  for (size_t i = 0; i < sel.size(); ++i) {
    out->pcrSelections[i].hash = sel[i].hash_alg;
    out->pcrSelections[i].sizeofSelect = 3;
    for (uint32_t pcr : sel[i].pcrs) out->pcrSelections[i].pcrSelect[pcr / 8] |= 1u << (pcr % 8);
  }
}

Bytes MarshalAttest(const TPMS_ATTEST& a) {
  uint8_t buf[sizeof(TPMS_ATTEST)];
  size_t off = 0;
  Check(Tss2_MU_TPMS_ATTEST_Marshal(&a, buf, sizeof(buf), &off) == TSS2_RC_SUCCESS, "marshal attest");
  return Bytes(buf, buf + off);
}

void FillHeader(TPMS_ATTEST* a, uint32_t magic, uint16_t type, std::span<const uint8_t> nonce,
                const ClockInfo& clock, std::span<const uint8_t> qualified_signer = {},
                uint64_t firmware_version = 0x2023000100000000ull) {
  a->magic = magic;
  a->type = type;
  Bytes signer(qualified_signer.begin(), qualified_signer.end());
  if (signer.empty()) {
    signer = {0x00, 0x0b};
    signer.resize(34, 0x5a);
  }
  Check(signer.size() <= sizeof(a->qualifiedSigner.name), "qualified signer size");
  a->qualifiedSigner.size = static_cast<uint16_t>(signer.size());
  std::memcpy(a->qualifiedSigner.name, signer.data(), signer.size());
  CopyTo(&a->extraData, Bytes(nonce.begin(), nonce.end()));
  a->clockInfo.clock = clock.clock;
  a->clockInfo.resetCount = clock.reset_count;
  a->clockInfo.restartCount = clock.restart_count;
  a->clockInfo.safe = clock.safe ? TPM2_YES : TPM2_NO;
  a->firmwareVersion = firmware_version;
}

}  // namespace

Bytes MakeQuoteMessage(const SoftQuoteSpec& spec, const PcrValues& pcrs, std::span<const uint8_t> nonce) {
  TPMS_ATTEST a = {};
  FillHeader(&a, spec.magic, spec.type, nonce, spec.clock, spec.qualified_signer, spec.firmware_version);
  FillSelection(&a.attested.quote.pcrSelect, spec.selection);
  auto digest = ComputePcrDigest(spec.hash_alg, spec.selection, pcrs);
  Check(digest.ok(), "pcr digest");
  CopyTo(&a.attested.quote.pcrDigest, *digest);
  if (spec.type == kStAttestCertify) {
    // A certify-typed structure carrying quote-like fields is not meaningful;
    // the caller asked for a type confusion test.
    a.attested.certify.name.size = 0;
  }
  return MarshalAttest(a);
}

Bytes MakeCertifyMessage(std::span<const uint8_t> name, std::span<const uint8_t> nonce, uint16_t type) {
  TPMS_ATTEST a = {};
  FillHeader(&a, kTpmGenerated, type, nonce, ClockInfo{2000, 1, 0, true});
  if (type == kStAttestCertify) {
    a.attested.certify.name.size = static_cast<uint16_t>(name.size());
    std::memcpy(a.attested.certify.name.name, name.data(), name.size());
    a.attested.certify.qualifiedName = a.attested.certify.name;
  } else {
    a.attested.quote.pcrSelect.count = 0;
    a.attested.quote.pcrDigest.size = 32;
  }
  return MarshalAttest(a);
}

}  // namespace rackgate::testing
