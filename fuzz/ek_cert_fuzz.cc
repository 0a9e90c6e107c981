// libFuzzer target: EK certificates (DER or PEM, as a machine presents its
// own in a challenge), parsed with attest/ek_cert.h's ParseEkCertificate.
// Round trip: the DER a parse keeps parses again to the same facts.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <span>

#include "attest/ek_cert.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace rackgate::attest;  // NOLINT
  rackgate::Result<EkCertInfo> info = ParseEkCertificate(std::span<const uint8_t>(data, size));
  if (!info.ok()) return 0;
  rackgate::Result<EkCertInfo> again = ParseEkCertificate(info->der);
  if (!again.ok() || again->der != info->der || again->subject != info->subject ||
      again->issuer != info->issuer || again->serial_hex != info->serial_hex ||
      again->key_type != info->key_type || again->rsa_modulus != info->rsa_modulus ||
      again->ecc_x != info->ecc_x || again->ecc_y != info->ecc_y) {
    std::abort();
  }
  // An empty trust store refuses every certificate, after parsing it whole.
  static const EkTrustStore* const store = new EkTrustStore();
  (void)VerifyEkCertificate(*store, std::span<const uint8_t>(data, size), 1800000000);
  return 0;
}
