// Vendor EK certificate URLs from EK public keys, and the certificate out of
// an operator's file.
#include "ctl/ek_cert_urls.h"

#include <openssl/core_names.h>
#include <openssl/pem.h>

#include <cctype>

#include <nlohmann/json.hpp>

#include "attest/ek_cert.h"
#include "attest/ek_identity.h"
#include "attest/ek_nv.h"
#include "base/hex.h"
#include "base/ossl.h"
#include "base/sha256.h"
#include "wire/codec.h"

namespace rackgate::ctl {

namespace {

using attest::Bytes;

// A file larger than this is no key and no certificate answer.
constexpr size_t kMaxJsonAnswer = 64 * 1024;

Status KeyMalformed(const std::string& why) { return Status::InvalidArgument("ek_public_malformed", why); }
Status CertMalformed(const std::string& why) { return Status::InvalidArgument(attest::kEkCertMalformed, why); }

bool StartsWith(std::span<const uint8_t> b, std::string_view prefix) {
  return b.size() >= prefix.size() && std::string_view(reinterpret_cast<const char*>(b.data()), prefix.size()) == prefix;
}

// Leading whitespace skipped (PEM and JSON files are text).
std::span<const uint8_t> TrimFront(std::span<const uint8_t> b) {
  size_t i = 0;
  while (i < b.size() && (b[i] == ' ' || b[i] == '\n' || b[i] == '\r' || b[i] == '\t')) ++i;
  return b.subspan(i);
}

Bytes BnBytes(const BIGNUM* bn, size_t width) {
  Bytes out(width == 0 ? static_cast<size_t>(BN_num_bytes(bn)) : width);
  if (BN_bn2binpad(bn, out.data(), static_cast<int>(out.size())) < 0) return {};
  return out;
}

Result<EkKey> EkKeyFromPkey(EVP_PKEY* pkey) {
  EkKey k;
  if (EVP_PKEY_is_a(pkey, "RSA")) {
    BIGNUM* n = nullptr;
    BIGNUM* e = nullptr;
    const bool got = EVP_PKEY_get_bn_param(pkey, OSSL_PKEY_PARAM_RSA_N, &n) == 1 &&
                     EVP_PKEY_get_bn_param(pkey, OSSL_PKEY_PARAM_RSA_E, &e) == 1;
    ossl::BnPtr n_owned(n), e_owned(e);
    if (!got || BN_num_bits(e) > 32) return KeyMalformed("an RSA key whose modulus or exponent cannot be read");
    k.type = attest::kAlgRsa;
    k.rsa_modulus = BnBytes(n, 0);
    k.rsa_exponent = static_cast<uint32_t>(BN_get_word(e));
    return k;
  }
  if (EVP_PKEY_is_a(pkey, "EC")) {
    BIGNUM* x = nullptr;
    BIGNUM* y = nullptr;
    const bool got = EVP_PKEY_get_bn_param(pkey, OSSL_PKEY_PARAM_EC_PUB_X, &x) == 1 &&
                     EVP_PKEY_get_bn_param(pkey, OSSL_PKEY_PARAM_EC_PUB_Y, &y) == 1;
    ossl::BnPtr x_owned(x), y_owned(y);
    if (!got) return KeyMalformed("an EC key whose point cannot be read");
    const size_t width = static_cast<size_t>((EVP_PKEY_get_bits(pkey) + 7) / 8);
    k.type = attest::kAlgEcc;
    k.ecc_x = BnBytes(x, width);
    k.ecc_y = BnBytes(y, width);
    return k;
  }
  return KeyMalformed("the key is neither RSA nor EC");
}
}  // namespace

EkKey EkKeyFromTpmPublic(const attest::TpmPublic& pub) {
  EkKey k;
  k.type = pub.type;
  k.rsa_modulus = pub.rsa_modulus;
  k.rsa_exponent = pub.rsa_exponent == 0 ? 65537 : pub.rsa_exponent;
  k.ecc_x = pub.ecc_x;
  k.ecc_y = pub.ecc_y;
  return k;
}

Result<EkKey> EkKeyFromFile(std::span<const uint8_t> bytes) {
  // A TPM2B_PUBLIC first: its u16 size prefix is far below 0x3000, so it is
  // never mistaken for a DER SEQUENCE (0x30 ...) or PEM text.
  if (auto pub = attest::ParseTpm2bPublic(bytes); pub.ok()) {
    if (pub->type != attest::kAlgRsa && pub->type != attest::kAlgEcc) {
      return KeyMalformed("the EK is neither RSA nor ECC");
    }
    EkKey k = EkKeyFromTpmPublic(*pub);
    if (auto h = attest::EkKeyHash(*pub); h.ok()) k.ek_hash = hex::Encode(*h);
    return k;
  }
  ossl::PkeyPtr pkey;
  const auto text = TrimFront(bytes);
  if (StartsWith(text, "-----BEGIN")) {
    ossl::BioPtr bio(BIO_new_mem_buf(text.data(), static_cast<int>(text.size())));
    if (bio) pkey.reset(PEM_read_bio_PUBKEY(bio.get(), nullptr, nullptr, nullptr));
  } else {
    const unsigned char* p = bytes.data();
    pkey.reset(d2i_PUBKEY(nullptr, &p, static_cast<long>(bytes.size())));
    if (pkey && p != bytes.data() + bytes.size()) pkey.reset();
  }
  if (!pkey) {
    return KeyMalformed("neither a TPM2B_PUBLIC (tpm2_createek -f tss) nor a PEM or DER public key");
  }
  auto k = EkKeyFromPkey(pkey.get());
  if (!k.ok()) return k.status();
  unsigned char* spki = nullptr;
  const int n = i2d_PUBKEY(pkey.get(), &spki);
  if (n > 0) k->ek_hash = sha256::Hex(std::span<const uint8_t>(spki, static_cast<size_t>(n)));
  OPENSSL_free(spki);
  return k;
}

Result<std::string> IntelEkCertUrl(const EkKey& key) {
  Bytes in;
  if (key.type == attest::kAlgRsa) {
    // SECURITY: nothing here is trusted; a wrong URL only fetches nothing.
    if (key.rsa_exponent != 65537) {
      return Status::Unsupported("ek_url_unsupported", "Intel's service names RSA EKs with the default exponent only");
    }
    in = key.rsa_modulus;
    in.insert(in.end(), {0x01, 0x00, 0x01});
  } else {
    in = key.ecc_x;
    in.insert(in.end(), key.ecc_y.begin(), key.ecc_y.end());
  }
  const auto digest = sha256::Digest(in);
  // base64url keeping its '=' padding, URL-escaped as curl_easy_escape does
  // ('=' is the only character of the alphabet it escapes).
  std::string b64 = wire::Base64UrlEncode(digest);
  b64.append((4 - b64.size() % 4) % 4, '=');
  return kIntelEkServiceBase + hex::PercentEncode(b64);
}

std::string AmdEkCertUrl(const EkKey& key) {
  Bytes in;
  if (key.type == attest::kAlgRsa) {
    const uint32_t e = key.rsa_exponent;
    in = {0x00, 0x00, 0x22, 0x22, static_cast<uint8_t>(e >> 24), static_cast<uint8_t>(e >> 16),
          static_cast<uint8_t>(e >> 8), static_cast<uint8_t>(e)};
    in.insert(in.end(), key.rsa_modulus.begin(), key.rsa_modulus.end());
  } else {
    in = {0x00, 0x00, 0x44, 0x44};
    in.insert(in.end(), key.ecc_x.begin(), key.ecc_x.end());
    in.insert(in.end(), key.ecc_y.begin(), key.ecc_y.end());
  }
  const auto digest = sha256::Digest(in);
  std::string id = hex::Encode(std::span<const uint8_t>(digest).first(16));
  for (char& c : id) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return kAmdEkServiceBase + id;
}

Result<Bytes> EkCertificateFromFile(std::span<const uint8_t> bytes) {
  const auto text = TrimFront(bytes);
  if (StartsWith(text, "{")) {
    if (text.size() > kMaxJsonAnswer) return CertMalformed("a JSON answer larger than 64 KiB");
    const auto j = nlohmann::json::parse(text.begin(), text.end(), nullptr, false);
    if (j.is_discarded() || !j.is_object() || !j.contains("certificate") || !j.at("certificate").is_string()) {
      return CertMalformed("a JSON file without a \"certificate\" string (Intel's EK certificate service answers "
                           "{\"pubhash\": ..., \"certificate\": ...})");
    }
    const std::string escaped = j.at("certificate").get<std::string>();
    std::string b64;
    for (size_t i = 0; i < escaped.size(); ++i) {
      char c = escaped[i];
      if (c == '%') {
        const auto byte = hex::Decode(std::string_view(escaped).substr(i + 1, 2), 1);
        if (!byte || byte->size() != 1) return CertMalformed("the JSON certificate has a broken %-escape");
        c = static_cast<char>((*byte)[0]);
        i += 2;
      }
      if (c == '-') c = '+';
      if (c == '_') c = '/';
      if (c == '\n' || c == '\r') continue;
      b64 += c;
    }
    while (b64.size() % 4 != 0) b64 += '=';
    auto der = wire::Base64Decode(b64, attest::kMaxEkCertBytes);
    if (!der || der->empty()) return CertMalformed("the JSON certificate is not base64url");
    return attest::EkCertificateDerFromNv(*der);
  }
  if (StartsWith(text, "-----BEGIN")) {
    ossl::BioPtr bio(BIO_new_mem_buf(text.data(), static_cast<int>(text.size())));
    char* name = nullptr;
    char* header = nullptr;
    unsigned char* data = nullptr;
    long len = 0;
    if (!bio || PEM_read_bio(bio.get(), &name, &header, &data, &len) != 1) {
      return CertMalformed("a PEM file without a readable block");
    }
    const bool cert = std::string_view(name) == "CERTIFICATE";
    Bytes der(data, data + len);
    OPENSSL_free(name);
    OPENSSL_free(header);
    OPENSSL_free(data);
    if (!cert) return CertMalformed("the PEM block is not a CERTIFICATE");
    if (der.size() > attest::kMaxEkCertBytes) return CertMalformed("a certificate larger than 16 KiB");
    return attest::EkCertificateDerFromNv(der);
  }
  return attest::EkCertificateDerFromNv(bytes);
}

}  // namespace rackgate::ctl
