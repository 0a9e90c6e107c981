// Online-only EK certificates (docs/operations.md, "EK certificates a TPM
// does not hold"): the vendor URL an EK certificate is fetched from, derived
// from the EK public key as Intel's and AMD's services name it (the
// derivations tpm2-tools' tpm2_getekcertificate implements), and the
// certificate out of whatever an operator brings back (DER, PEM, the NV
// form, Intel's JSON answer). Pure functions: no network, no daemon.
#ifndef RACKGATE_CTL_EK_CERT_URLS_H_
#define RACKGATE_CTL_EK_CERT_URLS_H_

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "attest/tpm.h"
#include "base/status.h"

namespace rackgate::ctl {

// The services' bases, as tpm2_getekcertificate names them.
inline constexpr char kIntelEkServiceBase[] = "https://ekop.intel.com/ekcertservice/";
inline constexpr char kAmdEkServiceBase[] = "https://ftpm.amd.com/pki/aia/";

// An EK public key reduced to what the URLs are derived from.
struct EkKey {
  uint16_t type = attest::kAlgNull;  // kAlgRsa or kAlgEcc
  attest::Bytes rsa_modulus;                 // big-endian, as the TPM holds it
  uint32_t rsa_exponent = 65537;
  attest::Bytes ecc_x;  // big-endian, the curve's field size
  attest::Bytes ecc_y;
  // The machine identity rackgate gives this EK (attest/ek_identity.h: the
  // SHA-256 of its SubjectPublicKeyInfo), lower-case hex; "" when the key
  // is one rackgate does not take as an EK.
  std::string ek_hash;
};

// From a TPM2B_PUBLIC (`tpm2_createek -f tss`), or a PEM or DER
// SubjectPublicKeyInfo (`tpm2_createek -f pem`, `openssl pkey -pubout`).
// kInvalidArgument (ek_public_malformed) for anything else or a key that is
// neither RSA nor EC.
Result<EkKey> EkKeyFromFile(std::span<const uint8_t> bytes);
EkKey EkKeyFromTpmPublic(const attest::TpmPublic& pub);

// Intel: base + the URL-escaped, padded base64url of SHA-256(modulus ||
// 01 00 01) for RSA (only the default exponent: kUnsupported otherwise, as
// tpm2_getekcertificate refuses), SHA-256(x || y) for ECC.
Result<std::string> IntelEkCertUrl(const EkKey& key);
// AMD: base + the upper-case hex of the first 16 bytes of SHA-256(00 00 22 22
// || exponent (u32 big-endian) || modulus) for RSA, SHA-256(00 00 44 44 || x
// || y) for ECC. Upper case as in the URL go-attestation's test fetched a real
// AMD fTPM certificate from (tpm2-tools prints lower case).
std::string AmdEkCertUrl(const EkKey& key);

// The DER EK certificate in a file an operator fetched or read: DER (also
// behind the NV header or with NV padding; attest::EkCertificateDerFromNv),
// PEM (one CERTIFICATE block), or Intel's JSON answer
// ({"pubhash": ..., "certificate": "<base64url, maybe URL-escaped>"}).
// At most attest::kMaxEkCertBytes of DER. kInvalidArgument
// (ek_cert_malformed) naming what is wrong. The DER is not verified here.
Result<attest::Bytes> EkCertificateFromFile(std::span<const uint8_t> bytes);

}  // namespace rackgate::ctl

#endif  // RACKGATE_CTL_EK_CERT_URLS_H_
