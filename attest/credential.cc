// Software TPM2_MakeCredential and the TPM key derivation functions.
#include "attest/credential.h"

#include <openssl/core_names.h>
#include <openssl/rand.h>
#include <openssl/rsa.h>

#include <stdexcept>

#include "base/byte_reader.h"
#include "attest/digest.h"
#include "attest/keys.h"

namespace rackgate::attest {

namespace {

constexpr uint32_t kCredentialFileMagic = 0xBADCC0DE;
constexpr uint32_t kCredentialFileVersion = 1;

void PutU16(Bytes* out, size_t v) {
  out->push_back(static_cast<uint8_t>(v >> 8));
  out->push_back(static_cast<uint8_t>(v));
}
void PutU32(Bytes* out, uint32_t v) {
  for (int shift = 24; shift >= 0; shift -= 8) out->push_back(static_cast<uint8_t>(v >> shift));
}
void PutTpm2b(Bytes* out, std::span<const uint8_t> v) {
  PutU16(out, v.size());
  out->insert(out->end(), v.begin(), v.end());
}
Bytes Concat(std::span<const uint8_t> a, std::span<const uint8_t> b) {
  Bytes out(a.begin(), a.end());
  out.insert(out.end(), b.begin(), b.end());
  return out;
}

const char* DigestName(uint16_t hash_alg) { return EVP_MD_get0_name(EvpMd(hash_alg)); }

Bytes RunKdf(const char* kdf_name, OSSL_PARAM* params, size_t bytes) {
  ossl::KdfPtr kdf(EVP_KDF_fetch(nullptr, kdf_name, nullptr));
  ossl::KdfCtxPtr ctx(kdf ? EVP_KDF_CTX_new(kdf.get()) : nullptr);
  Bytes out(bytes);
  if (!ctx || EVP_KDF_derive(ctx.get(), out.data(), out.size(), params) != 1) {
    throw std::runtime_error(std::string(kdf_name) + " failed: " + ossl::DrainErrors());
  }
  return out;
}

Bytes LabelZ(std::string_view label) {
  Bytes l(label.begin(), label.end());
  l.push_back(0);
  return l;
}

// The EK's RSA-OAEP encryption of `seed` with label "IDENTITY\0".
Result<Bytes> RsaEncryptSeed(EVP_PKEY* ek, uint16_t name_alg, std::span<const uint8_t> seed) {
  ossl::PkeyCtxPtr ctx(EVP_PKEY_CTX_new_from_pkey(nullptr, ek, nullptr));
  Bytes label = LabelZ("IDENTITY");
  // set0_rsa_oaep_label takes ownership of the buffer it is given.
  unsigned char* owned = static_cast<unsigned char*>(OPENSSL_memdup(label.data(), label.size()));
  if (!ctx || !owned || EVP_PKEY_encrypt_init(ctx.get()) != 1 ||
      EVP_PKEY_CTX_set_rsa_padding(ctx.get(), RSA_PKCS1_OAEP_PADDING) != 1 ||
      EVP_PKEY_CTX_set_rsa_oaep_md(ctx.get(), EvpMd(name_alg)) != 1 ||
      EVP_PKEY_CTX_set_rsa_mgf1_md(ctx.get(), EvpMd(name_alg)) != 1) {
    OPENSSL_free(owned);
    throw std::runtime_error("RSA-OAEP setup failed: " + ossl::DrainErrors());
  }
  if (EVP_PKEY_CTX_set0_rsa_oaep_label(ctx.get(), owned, static_cast<int>(label.size())) != 1) {
    OPENSSL_free(owned);
    throw std::runtime_error("RSA-OAEP label failed");
  }
  size_t n = 0;
  if (EVP_PKEY_encrypt(ctx.get(), nullptr, &n, seed.data(), seed.size()) != 1) {
    ossl::DrainErrors();
    return Status::Unsupported("ek_unsupported", "EK cannot encrypt a seed with RSA-OAEP");
  }
  Bytes out(n);
  if (EVP_PKEY_encrypt(ctx.get(), out.data(), &n, seed.data(), seed.size()) != 1) {
    ossl::DrainErrors();
    return Status::Unsupported("ek_unsupported", "EK cannot encrypt a seed with RSA-OAEP");
  }
  out.resize(n);
  return out;
}

// An ephemeral ECDH exchange with the EK: the seed from KDFe and the
// marshalled TPMS_ECC_POINT of the ephemeral public key.
void EccSeed(EVP_PKEY* ek, const TpmPublic& ek_pub, size_t seed_bytes, Bytes* seed, Bytes* point) {
  const size_t width = CurveFieldBytes(ek_pub.ecc_curve);
  ossl::PkeyPtr eph(EVP_PKEY_Q_keygen(nullptr, nullptr, "EC", CurveGroupName(ek_pub.ecc_curve)));
  if (!eph) throw std::runtime_error("ephemeral EC keygen failed: " + ossl::DrainErrors());
  ossl::PkeyCtxPtr ctx(EVP_PKEY_CTX_new_from_pkey(nullptr, eph.get(), nullptr));
  size_t zlen = 0;
  if (!ctx || EVP_PKEY_derive_init(ctx.get()) != 1 || EVP_PKEY_derive_set_peer(ctx.get(), ek) != 1 ||
      EVP_PKEY_derive(ctx.get(), nullptr, &zlen) != 1) {
    throw std::runtime_error("ECDH setup failed: " + ossl::DrainErrors());
  }
  Bytes z(zlen);
  if (EVP_PKEY_derive(ctx.get(), z.data(), &zlen) != 1) throw std::runtime_error("ECDH failed");
  z.resize(zlen);
  z = LeftPad(z, width);
  ossl::BnPtr bx, by;
  BIGNUM* x = nullptr;
  BIGNUM* y = nullptr;
  if (EVP_PKEY_get_bn_param(eph.get(), OSSL_PKEY_PARAM_EC_PUB_X, &x) != 1) throw std::runtime_error("x");
  bx.reset(x);
  if (EVP_PKEY_get_bn_param(eph.get(), OSSL_PKEY_PARAM_EC_PUB_Y, &y) != 1) throw std::runtime_error("y");
  by.reset(y);
  Bytes ex(width), ey(width);
  if (BN_bn2binpad(bx.get(), ex.data(), static_cast<int>(width)) < 0 ||
      BN_bn2binpad(by.get(), ey.data(), static_cast<int>(width)) < 0) {
    throw std::runtime_error("BN_bn2binpad failed");
  }
  // The TPM derives with the coordinates exactly as they are marshalled:
  // ours padded to the field size, the EK's as its public area carries them.
  *seed = KdfE(ek_pub.name_alg, z, "IDENTITY", ex, ek_pub.ecc_x, seed_bytes * 8);
  OPENSSL_cleanse(z.data(), z.size());
  point->clear();
  PutTpm2b(point, ex);
  PutTpm2b(point, ey);
}

Bytes Hmac(uint16_t hash_alg, std::span<const uint8_t> key, std::span<const uint8_t> data) {
  ossl::MacPtr mac(EVP_MAC_fetch(nullptr, "HMAC", nullptr));
  ossl::MacCtxPtr ctx(mac ? EVP_MAC_CTX_new(mac.get()) : nullptr);
  OSSL_PARAM params[] = {
      OSSL_PARAM_construct_utf8_string(OSSL_MAC_PARAM_DIGEST, const_cast<char*>(DigestName(hash_alg)), 0),
      OSSL_PARAM_construct_end()};
  Bytes out(DigestSize(hash_alg));
  size_t n = 0;
  if (!ctx || EVP_MAC_init(ctx.get(), key.data(), key.size(), params) != 1 ||
      EVP_MAC_update(ctx.get(), data.data(), data.size()) != 1 ||
      EVP_MAC_final(ctx.get(), out.data(), &n, out.size()) != 1 || n != out.size()) {
    throw std::runtime_error("HMAC failed: " + ossl::DrainErrors());
  }
  return out;
}

Bytes AesCfbEncrypt(std::span<const uint8_t> key, std::span<const uint8_t> plain) {
  const EVP_CIPHER* cipher = key.size() == 16 ? EVP_aes_128_cfb128() : EVP_aes_256_cfb128();
  ossl::CipherCtxPtr ctx(EVP_CIPHER_CTX_new());
  const uint8_t iv[16] = {};
  Bytes out(plain.size());
  int n = 0, fin = 0;
  if (!ctx || EVP_EncryptInit_ex(ctx.get(), cipher, nullptr, key.data(), iv) != 1 ||
      EVP_EncryptUpdate(ctx.get(), out.data(), &n, plain.data(), static_cast<int>(plain.size())) != 1 ||
      EVP_EncryptFinal_ex(ctx.get(), out.data() + n, &fin) != 1 ||
      static_cast<size_t>(n + fin) != plain.size()) {
    throw std::runtime_error("AES-CFB failed: " + ossl::DrainErrors());
  }
  return out;
}

}  // namespace

Bytes KdfA(uint16_t hash_alg, std::span<const uint8_t> key, std::string_view label,
           std::span<const uint8_t> context_u, std::span<const uint8_t> context_v, size_t bits) {
  if (bits == 0 || bits % 8 != 0) throw std::logic_error("KdfA: bits must be a positive multiple of 8");
  // OpenSSL's KBKDF in counter mode computes HMAC(key, [i]32 || Label || 0x00
  // || Context || [L]32), which is KDFa with Context = contextU || contextV.
  Bytes context = Concat(context_u, context_v);
  Bytes label_bytes(label.begin(), label.end());
  int use_l = 1, use_sep = 1;
  OSSL_PARAM params[] = {
      OSSL_PARAM_construct_utf8_string(OSSL_KDF_PARAM_MODE, const_cast<char*>("COUNTER"), 0),
      OSSL_PARAM_construct_utf8_string(OSSL_KDF_PARAM_MAC, const_cast<char*>("HMAC"), 0),
      OSSL_PARAM_construct_utf8_string(OSSL_KDF_PARAM_DIGEST, const_cast<char*>(DigestName(hash_alg)), 0),
      OSSL_PARAM_construct_octet_string(OSSL_KDF_PARAM_KEY, const_cast<uint8_t*>(key.data()), key.size()),
      OSSL_PARAM_construct_octet_string(OSSL_KDF_PARAM_SALT, label_bytes.data(), label_bytes.size()),
      OSSL_PARAM_construct_octet_string(OSSL_KDF_PARAM_INFO, context.data(), context.size()),
      OSSL_PARAM_construct_int(OSSL_KDF_PARAM_KBKDF_USE_L, &use_l),
      OSSL_PARAM_construct_int(OSSL_KDF_PARAM_KBKDF_USE_SEPARATOR, &use_sep),
      OSSL_PARAM_construct_end()};
  return RunKdf("KBKDF", params, bits / 8);
}

Bytes KdfE(uint16_t hash_alg, std::span<const uint8_t> z, std::string_view label,
           std::span<const uint8_t> party_u, std::span<const uint8_t> party_v, size_t bits) {
  if (bits == 0 || bits % 8 != 0) throw std::logic_error("KdfE: bits must be a positive multiple of 8");
  // OpenSSL's SSKDF (hash variant) computes H([i]32 || Z || FixedInfo): KDFe
  // with FixedInfo = Label || 0x00 || PartyUInfo || PartyVInfo.
  Bytes info = LabelZ(label);
  info.insert(info.end(), party_u.begin(), party_u.end());
  info.insert(info.end(), party_v.begin(), party_v.end());
  OSSL_PARAM params[] = {
      OSSL_PARAM_construct_utf8_string(OSSL_KDF_PARAM_DIGEST, const_cast<char*>(DigestName(hash_alg)), 0),
      OSSL_PARAM_construct_octet_string(OSSL_KDF_PARAM_KEY, const_cast<uint8_t*>(z.data()), z.size()),
      OSSL_PARAM_construct_octet_string(OSSL_KDF_PARAM_INFO, info.data(), info.size()),
      OSSL_PARAM_construct_end()};
  return RunKdf("SSKDF", params, bits / 8);
}

Result<Credential> MakeCredential(const TpmPublic& ek, std::span<const uint8_t> object_name,
                                  std::span<const uint8_t> secret) {
  const size_t digest_size = DigestSize(ek.name_alg);
  if (digest_size == 0) return Status::Unsupported("ek_unsupported", "EK name algorithm unknown");
  // ActivateCredential returns the secret as a TPM2B_DIGEST of the EK's
  // nameAlg; the TPM refuses larger credentials (TPM_RC_SIZE).
  if (secret.empty() || secret.size() > digest_size) {
    return Status::InvalidArgument("credential_secret_size",
                                   "secret must be 1.." + std::to_string(digest_size) + " bytes");
  }
  if (object_name.size() < 2 ||
      object_name.size() != 2 + DigestSize(static_cast<uint16_t>((object_name[0] << 8) | object_name[1]))) {
    return Status::InvalidArgument("object_name_malformed", "name is not nameAlg || digest");
  }
  // The EK must be a storage key with an AES-CFB inner wrapper: that is what
  // ActivateCredential decrypts the identity with.
  const uint32_t need = kAttrRestricted | kAttrDecrypt;
  if ((ek.attributes & need) != need || (ek.attributes & kAttrSign) || ek.symmetric_alg != kAlgAes ||
      ek.symmetric_mode != kAlgCfb || (ek.symmetric_key_bits != 128 && ek.symmetric_key_bits != 256)) {
    return Status::Unsupported("ek_unsupported", "EK is not a restricted decryption key with AES-CFB");
  }
  auto pkey = PkeyFromTpmPublic(ek);
  if (!pkey.ok()) return pkey.status();

  Bytes seed(digest_size);
  Credential cred;
  if (ek.type == kAlgRsa) {
    if (RAND_bytes(seed.data(), static_cast<int>(seed.size())) != 1) {
      throw std::runtime_error("RAND_bytes failed");
    }
    auto enc = RsaEncryptSeed(pkey->get(), ek.name_alg, seed);
    if (!enc.ok()) return enc.status();
    cred.encrypted_secret = std::move(enc).value();
  } else {
    EccSeed(pkey->get(), ek, digest_size, &seed, &cred.encrypted_secret);
  }

  Bytes sym_key = KdfA(ek.name_alg, seed, "STORAGE", object_name, {}, ek.symmetric_key_bits);
  Bytes plain;
  PutTpm2b(&plain, secret);
  Bytes enc_identity = AesCfbEncrypt(sym_key, plain);
  Bytes hmac_key = KdfA(ek.name_alg, seed, "INTEGRITY", {}, {}, digest_size * 8);
  Bytes integrity = Hmac(ek.name_alg, hmac_key, Concat(enc_identity, object_name));
  OPENSSL_cleanse(seed.data(), seed.size());
  OPENSSL_cleanse(sym_key.data(), sym_key.size());
  OPENSSL_cleanse(hmac_key.data(), hmac_key.size());
  OPENSSL_cleanse(plain.data(), plain.size());

  PutTpm2b(&cred.id_object, integrity);
  cred.id_object.insert(cred.id_object.end(), enc_identity.begin(), enc_identity.end());
  return cred;
}

Bytes EncodeCredentialFile(const Credential& cred) {
  Bytes out;
  PutU32(&out, kCredentialFileMagic);
  PutU32(&out, kCredentialFileVersion);
  PutTpm2b(&out, cred.id_object);
  PutTpm2b(&out, cred.encrypted_secret);
  return out;
}

Result<Credential> DecodeCredentialFile(std::span<const uint8_t> data) {
  auto bad = [](const char* why) {
    return Status::InvalidArgument("credential_file_malformed", std::string("credential file: ") + why);
  };
  ByteReader r(data);
  uint32_t magic = 0, version = 0;
  if (!r.ReadU32BE(&magic) || magic != kCredentialFileMagic) return bad("bad magic");
  if (!r.ReadU32BE(&version) || version != kCredentialFileVersion) return bad("bad version");
  ByteReader id, secret;
  if (!r.ReadU16BEPrefixed(&id) || !r.ReadU16BEPrefixed(&secret)) return bad("truncated");
  if (!r.empty()) return bad("trailing bytes");
  if (id.empty() || secret.empty()) return bad("empty field");
  Credential c;
  c.id_object.assign(id.rest().begin(), id.rest().end());
  c.encrypted_secret.assign(secret.rest().begin(), secret.rest().end());
  return c;
}

}  // namespace rackgate::attest
