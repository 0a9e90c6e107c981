// EK identity hashes.
#include "attest/ek_identity.h"

#include <openssl/asn1.h>
#include <openssl/crypto.h>
#include <openssl/ec.h>
#include <openssl/obj_mac.h>
#include <openssl/objects.h>
#include <openssl/x509.h>

#include <new>
#include <optional>
#include <stdexcept>

#include "attest/digest.h"
#include "attest/ek_nv.h"
#include "attest/keys.h"

namespace rackgate::attest {

namespace {

Result<Bytes> SpkiDer(EVP_PKEY* key) {
  unsigned char* der = nullptr;
  int n = i2d_PUBKEY(key, &der);
  if (n <= 0) {
    ossl::DrainErrors();
    return Status::InvalidArgument("key_invalid", "public key cannot be encoded");
  }
  Bytes out(der, der + n);
  OPENSSL_free(der);
  return out;
}

Result<Bytes> SpkiHash(EVP_PKEY* key) {
  auto der = SpkiDer(key);
  if (!der.ok()) return der.status();
  return Hash(kAlgSha256, {std::span<const uint8_t>(*der)});
}

}  // namespace

Result<Bytes> SubjectPublicKeyInfoFromTpmPublic(const TpmPublic& pub) {
  // The key is checked as every other use of it checks it; the DER is then
  // put together from the public area with OpenSSL's ASN.1 types rather than
  // OpenSSL 3's key encoders (i2d_PUBKEY), which cost as much as the rest of
  // a challenge. ek_identity_test checks the two against each other.
  auto pkey = PkeyFromTpmPublic(pub);
  if (!pkey.ok()) return pkey.status();
  ossl::X509PubkeyPtr spki(X509_PUBKEY_new());
  if (!spki) throw std::bad_alloc();
  unsigned char* key_bits = nullptr;
  int key_len = 0;
  if (pub.type == kAlgRsa) {
    // RSAPublicKey ::= SEQUENCE { modulus INTEGER, publicExponent INTEGER }
    ossl::BnPtr n(BN_bin2bn(pub.rsa_modulus.data(), static_cast<int>(pub.rsa_modulus.size()), nullptr));
    ossl::Asn1IntegerPtr n_int(n ? BN_to_ASN1_INTEGER(n.get(), nullptr) : nullptr);
    ossl::Asn1IntegerPtr e_int(ASN1_INTEGER_new());
    if (!n_int || !e_int || ASN1_INTEGER_set_uint64(e_int.get(), pub.rsa_exponent) != 1) throw std::bad_alloc();
    STACK_OF(ASN1_TYPE)* seq = sk_ASN1_TYPE_new_null();
    ASN1_TYPE* n_type = ASN1_TYPE_new();
    ASN1_TYPE* e_type = ASN1_TYPE_new();
    bool built = seq && n_type && e_type;
    if (built) {
      ASN1_TYPE_set(n_type, V_ASN1_INTEGER, n_int.release());
      ASN1_TYPE_set(e_type, V_ASN1_INTEGER, e_int.release());
      built = sk_ASN1_TYPE_push(seq, n_type) > 0;
      if (built) n_type = nullptr;
      built = built && sk_ASN1_TYPE_push(seq, e_type) > 0;
      if (built) e_type = nullptr;
    }
    if (built) key_len = i2d_ASN1_SEQUENCE_ANY(seq, &key_bits);
    ASN1_TYPE_free(n_type);
    ASN1_TYPE_free(e_type);
    sk_ASN1_TYPE_pop_free(seq, ASN1_TYPE_free);
    if (key_len <= 0 ||
        X509_PUBKEY_set0_param(spki.get(), OBJ_nid2obj(NID_rsaEncryption), V_ASN1_NULL, nullptr, key_bits,
                               key_len) != 1) {
      OPENSSL_free(key_bits);
      throw std::runtime_error("encoding an RSA public key failed: " + ossl::DrainErrors());
    }
  } else {
    // PkeyFromTpmPublic took only P-256, P-384 and P-521: an uncompressed point
    // under id-ecPublicKey with the named curve.
    const int curve = EC_curve_nist2nid(CurveGroupName(pub.ecc_curve));
    const Bytes point = EcPointFromTpmPublic(pub);
    key_bits = static_cast<unsigned char*>(OPENSSL_memdup(point.data(), point.size()));
    key_len = static_cast<int>(point.size());
    if (key_bits == nullptr || curve == NID_undef ||
        X509_PUBKEY_set0_param(spki.get(), OBJ_nid2obj(NID_X9_62_id_ecPublicKey), V_ASN1_OBJECT,
                               OBJ_nid2obj(curve), key_bits, key_len) != 1) {
      OPENSSL_free(key_bits);
      throw std::runtime_error("encoding an EC public key failed: " + ossl::DrainErrors());
    }
  }
  unsigned char* der = nullptr;
  const int n = i2d_X509_PUBKEY(spki.get(), &der);
  if (n <= 0) throw std::runtime_error("encoding a public key failed: " + ossl::DrainErrors());
  Bytes out(der, der + n);
  OPENSSL_free(der);
  return out;
}

Result<Bytes> EkKeyHash(const TpmPublic& ek) {
  auto der = SubjectPublicKeyInfoFromTpmPublic(ek);
  if (!der.ok()) return der.status();
  return Hash(kAlgSha256, {std::span<const uint8_t>(*der)});
}

Result<Bytes> EkKeyHashFromCertificate(std::span<const uint8_t> der) {
  // The key is the same in a copy whose serial lost its padding zeros
  // (ek_nv.h): Nuvoton's EK certificates hash like any other.
  std::optional<Bytes> minimal;
  const unsigned char* p = der.data();
  ossl::X509Ptr cert(d2i_X509(nullptr, &p, static_cast<long>(der.size())));
  if (!cert && (minimal = CertificateWithMinimalSerial(der))) {
    der = *minimal;
    p = der.data();
    cert.reset(d2i_X509(nullptr, &p, static_cast<long>(der.size())));
  }
  if (!cert || p != der.data() + der.size()) {
    ossl::DrainErrors();
    return Status::InvalidArgument("ek_cert_malformed", "not one DER certificate");
  }
  ossl::DrainErrors();
  EVP_PKEY* key = X509_get0_pubkey(cert.get());  // BORROWED from cert
  if (key == nullptr) {
    ossl::DrainErrors();
    return Status::InvalidArgument("ek_cert_malformed", "certificate key unreadable");
  }
  return SpkiHash(key);
}

}  // namespace rackgate::attest
