// TPM public areas as OpenSSL keys.
#include "attest/keys.h"

#include <openssl/core_names.h>

#include <algorithm>
#include <stdexcept>

namespace rackgate::attest {

const char* CurveGroupName(uint16_t tpm_curve) {
  switch (tpm_curve) {
    case kEccNistP256: return "P-256";
    case kEccNistP384: return "P-384";
    case kEccNistP521: return "P-521";
    default: return nullptr;
  }
}

size_t CurveFieldBytes(uint16_t tpm_curve) {
  switch (tpm_curve) {
    case kEccNistP256: return 32;
    case kEccNistP384: return 48;
    case kEccNistP521: return 66;
    default: return 0;
  }
}

Bytes LeftPad(std::span<const uint8_t> v, size_t width) {
  size_t skip = 0;
  while (skip < v.size() && v[skip] == 0) ++skip;
  v = v.subspan(skip);
  if (v.size() > width) throw std::logic_error("LeftPad: value wider than field");
  Bytes out(width - v.size(), 0);
  out.insert(out.end(), v.begin(), v.end());
  return out;
}

Bytes EcPointFromTpmPublic(const TpmPublic& pub) {
  const size_t width = CurveFieldBytes(pub.ecc_curve);
  Bytes point{0x04};
  const Bytes x = LeftPad(pub.ecc_x, width), y = LeftPad(pub.ecc_y, width);
  point.insert(point.end(), x.begin(), x.end());
  point.insert(point.end(), y.begin(), y.end());
  return point;
}

namespace {

Result<ossl::PkeyPtr> CheckedEcKey(ossl::PkeyPtr pkey) {
  // Setting the point does not promise that it lies on the curve; an
  // off-curve point would let an attacker run invalid-curve attacks on ECDH.
  // The partial check (SP 800-56A 5.6.2.3.4: in range, on the curve, not the
  // point at infinity) is the whole check for P-256, P-384 and P-521,
  // whose cofactor is 1; the full one adds a scalar multiplication by the order
  // that cannot fail for them and costs as much as a signature check.
  ossl::PkeyCtxPtr check(EVP_PKEY_CTX_new_from_pkey(nullptr, pkey.get(), nullptr));
  if (!check || EVP_PKEY_public_check_quick(check.get()) != 1) {
    ossl::DrainErrors();
    return Status::InvalidArgument("key_invalid", "ECC point is not on the curve");
  }
  return pkey;
}

}  // namespace

Result<ossl::PkeyPtr> PkeyFromTpmPublic(const TpmPublic& pub) {
  if (pub.type == kAlgRsa) {
    if (pub.rsa_modulus.empty() || pub.rsa_exponent < 3 || pub.rsa_exponent % 2 == 0) {
      return Status::InvalidArgument("key_invalid", "RSA public key is unusable");
    }
    ossl::BnPtr n(BN_bin2bn(pub.rsa_modulus.data(), static_cast<int>(pub.rsa_modulus.size()), nullptr));
    ossl::BnPtr e(BN_new());
    if (!n || !e || BN_set_word(e.get(), pub.rsa_exponent) != 1) throw std::bad_alloc();
    ossl::PkeyPtr pkey = ossl::RsaPublicKey(n.get(), e.get());
    if (!pkey) return Status::InvalidArgument("key_invalid", "public key is not a valid key");
    return pkey;
  }
  if (pub.type == kAlgEcc) {
    const char* group = CurveGroupName(pub.ecc_curve);
    size_t width = CurveFieldBytes(pub.ecc_curve);
    if (group == nullptr) {
      return Status::Unsupported("key_curve_unsupported",
                                 "ECC curve " + std::to_string(pub.ecc_curve) + " is not P-256, P-384 or P-521");
    }
    auto fits = [width](const Bytes& c) {
      size_t lead = std::find_if(c.begin(), c.end(), [](uint8_t b) { return b != 0; }) - c.begin();
      return !c.empty() && c.size() - lead <= width;
    };
    if (!fits(pub.ecc_x) || !fits(pub.ecc_y)) {
      return Status::InvalidArgument("key_invalid", "ECC point coordinates do not fit the curve");
    }
    const Bytes point = EcPointFromTpmPublic(pub);
    ossl::PkeyPtr pkey(EVP_PKEY_dup(ossl::EcCurveTemplate(group)));
    if (!pkey) throw std::runtime_error("EVP_PKEY_dup failed: " + ossl::DrainErrors());
    if (EVP_PKEY_set_octet_string_param(pkey.get(), OSSL_PKEY_PARAM_ENCODED_PUBLIC_KEY, point.data(),
                                        point.size()) != 1) {
      ossl::DrainErrors();
      return Status::InvalidArgument("key_invalid", "public key is not a valid key");
    }
    return CheckedEcKey(std::move(pkey));
  }
  return Status::Unsupported("key_type_unsupported", "key is neither RSA nor ECC");
}

}  // namespace rackgate::attest
