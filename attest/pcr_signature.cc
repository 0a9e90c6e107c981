// Signed PCR 11 values: PolicyPCR digests, systemd's key fingerprint and the
// signature check (attest/pcr_signature.h).
#include "attest/pcr_signature.h"

#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>

#include <stdexcept>
#include <string>

#include "attest/digest.h"
#include "base/ossl.h"

namespace rackgate::attest {

namespace {

constexpr uint32_t kMaxPcrIndex = 23;
constexpr size_t kPcrSelectBytes = 3;  // PCRs 0..23, as systemd and the TPM use
constexpr size_t kMaxPemSize = 16 * 1024;

void PutU16BE(Bytes* out, uint16_t v) {
  out->push_back(static_cast<uint8_t>(v >> 8));
  out->push_back(static_cast<uint8_t>(v));
}

void PutU32BE(Bytes* out, uint32_t v) {
  for (int shift = 24; shift >= 0; shift -= 8) out->push_back(static_cast<uint8_t>(v >> shift));
}

Result<ossl::PkeyPtr> PkeyFromDer(std::span<const uint8_t> der) {
  const unsigned char* p = der.data();
  ossl::PkeyPtr key(d2i_PUBKEY(nullptr, &p, static_cast<long>(der.size())));
  if (!key || p != der.data() + der.size()) {
    ossl::DrainErrors();
    return Status::InvalidArgument("public_key_malformed",
                                   "not a DER SubjectPublicKeyInfo (or bytes after it)");
  }
  return key;
}

}  // namespace

Result<Bytes> PolicyPcrDigest(uint16_t bank, uint32_t pcr, std::span<const uint8_t> value) {
  if (EvpMd(bank) == nullptr) {
    return Status::InvalidArgument("pcr_signature_malformed", "a bank we cannot hash");
  }
  if (value.size() != DigestSize(bank)) {
    return Status::InvalidArgument("pcr_signature_malformed",
                                   "a PCR value that is not its bank's size");
  }
  if (pcr > kMaxPcrIndex) {
    return Status::InvalidArgument("pcr_signature_malformed", "a PCR index above 23");
  }
  // TPML_PCR_SELECTION { count 1; TPMS_PCR_SELECTION { hash, sizeofSelect,
  // pcrSelect[3] } }, big-endian as the TPM marshals it.
  Bytes selection;
  PutU32BE(&selection, 1);
  PutU16BE(&selection, bank);
  selection.push_back(static_cast<uint8_t>(kPcrSelectBytes));
  uint8_t select[kPcrSelectBytes] = {0, 0, 0};
  select[pcr / 8] = static_cast<uint8_t>(1u << (pcr % 8));
  selection.insert(selection.end(), select, select + kPcrSelectBytes);
  Bytes command_code;
  PutU32BE(&command_code, kTpmCcPolicyPcr);
  // The session's policy digest starts as zeros; systemd's sessions are
  // sha256 whatever the bank.
  const Bytes zero(DigestSize(kAlgSha256), 0);
  const Bytes pcr_digest = Hash(kAlgSha256, {value});
  return Hash(kAlgSha256, {zero, command_code, selection, pcr_digest});
}

Result<Bytes> PublicKeyDerFromPem(std::string_view pem) {
  if (pem.size() > kMaxPemSize) {
    return Status::InvalidArgument("public_key_malformed",
                                   "longer than " + std::to_string(kMaxPemSize) + " bytes");
  }
  ossl::BioPtr bio(BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size())));
  if (!bio) throw std::runtime_error("BIO_new_mem_buf failed");
  ossl::PkeyPtr key(PEM_read_bio_PUBKEY(bio.get(), nullptr, nullptr, nullptr));
  if (!key) {
    ossl::DrainErrors();
    return Status::InvalidArgument("public_key_malformed",
                                   "not a PEM public key (\"-----BEGIN PUBLIC KEY-----\")");
  }
  // SECURITY: one key per entry; text after it would be silently ignored,
  // and a second key in it never trusted, which an operator would not see.
  char rest[64];
  while (int n = BIO_read(bio.get(), rest, sizeof(rest))) {
    if (n < 0) break;
    for (int i = 0; i < n; ++i) {
      if (rest[i] != '\n' && rest[i] != '\r' && rest[i] != ' ' && rest[i] != '\t') {
        return Status::InvalidArgument("public_key_malformed", "text after the public key");
      }
    }
  }
  const int id = EVP_PKEY_get_base_id(key.get());
  if (id != EVP_PKEY_RSA && id != EVP_PKEY_EC) {
    return Status::InvalidArgument("public_key_malformed", "neither an RSA nor an EC key");
  }
  unsigned char* der = nullptr;
  const int len = i2d_PUBKEY(key.get(), &der);
  if (len <= 0) throw std::runtime_error("i2d_PUBKEY failed: " + ossl::DrainErrors());
  ossl::BufferPtr owned(der);
  return Bytes(der, der + len);
}

Result<Bytes> SystemdPublicKeyFingerprint(std::span<const uint8_t> spki_der) {
  auto key = PkeyFromDer(spki_der);
  if (!key.ok()) return key.status();
  unsigned char* der = nullptr;
  const int len = i2d_PublicKey(key->get(), &der);
  if (len <= 0) {
    ossl::DrainErrors();
    return Status::InvalidArgument("public_key_malformed", "the key has no public encoding");
  }
  ossl::BufferPtr owned(der);
  return Hash(kAlgSha256, {std::span<const uint8_t>(der, static_cast<size_t>(len))});
}

Status VerifyPcrSignature(std::span<const uint8_t> spki_der, std::span<const uint8_t> policy_digest,
                          std::span<const uint8_t> signature) {
  auto key = PkeyFromDer(spki_der);
  if (!key.ok()) return key.status();
  ossl::MdCtxPtr ctx(EVP_MD_CTX_new());
  if (!ctx) throw std::runtime_error("EVP_MD_CTX_new failed");
  if (EVP_DigestVerifyInit_ex(ctx.get(), nullptr, "SHA256", nullptr, nullptr, key->get(),
                              nullptr) != 1) {
    ossl::DrainErrors();
    return Status::VerificationFailed("uki_signature_invalid",
                                      "the key cannot verify SHA-256 signatures");
  }
  const int rc = EVP_DigestVerify(ctx.get(), signature.data(), signature.size(),
                                  policy_digest.data(), policy_digest.size());
  ossl::DrainErrors();
  if (rc != 1) {
    return Status::VerificationFailed("uki_signature_invalid",
                                      "the signature does not verify under the key");
  }
  return Status::Ok();
}

}  // namespace rackgate::attest
