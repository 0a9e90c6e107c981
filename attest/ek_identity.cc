// EK identity hashes.
#include "attest/ek_identity.h"

#include <openssl/x509.h>

#include "attest/digest.h"
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
  auto pkey = PkeyFromTpmPublic(pub);
  if (!pkey.ok()) return pkey.status();
  return SpkiDer(pkey->get());
}

Result<Bytes> EkKeyHash(const TpmPublic& ek) {
  auto pkey = PkeyFromTpmPublic(ek);
  if (!pkey.ok()) return pkey.status();
  return SpkiHash(pkey->get());
}

Result<Bytes> EkKeyHashFromCertificate(std::span<const uint8_t> der) {
  const unsigned char* p = der.data();
  ossl::X509Ptr cert(d2i_X509(nullptr, &p, static_cast<long>(der.size())));
  if (!cert || p != der.data() + der.size()) {
    ossl::DrainErrors();
    return Status::InvalidArgument("ek_cert_malformed", "not one DER certificate");
  }
  EVP_PKEY* key = X509_get0_pubkey(cert.get());  // BORROWED from cert
  if (key == nullptr) {
    ossl::DrainErrors();
    return Status::InvalidArgument("ek_cert_malformed", "certificate key unreadable");
  }
  return SpkiHash(key);
}

}  // namespace rackgate::attest
