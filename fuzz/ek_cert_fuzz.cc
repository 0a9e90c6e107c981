// libFuzzer target: EK certificates (DER or PEM, as a machine presents its
// own in a challenge), parsed with attest/ek_cert.h's ParseEkCertificate,
// including the padded-serial path (attest/ek_nv.h CertificateWithMinimalSerial)
// and, with the input as its own trust-store file, anchor loading and path
// validation. Round trip: the DER a parse keeps parses again to the same facts.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <optional>
#include <span>

#include "attest/ek_cert.h"
#include "attest/ek_nv.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace rackgate::attest;  // NOLINT
  const std::span<const uint8_t> in(data, size);
  // A minimal-serial copy is shorter, and exists only for one Certificate.
  const std::optional<Bytes> minimal = CertificateWithMinimalSerial(in);
  if (minimal && (minimal->size() >= size || !TbsCertificateOf(in))) std::abort();

  // The input as an ek_roots file: its CAs anchor, then it is verified
  // against them (with every relaxation granted, to reach every callback).
  EkTrustStore self;
  if (self.AddRoot(in).ok()) {
    if (self.Anchors().empty()) std::abort();
    for (const EkAnchor& a : self.Anchors()) {
      for (const char* r : {kEkRelaxSha1, kEkRelaxExpiredCa, kEkRelaxNoEkMarks}) {
        if (!self.AllowForAnchor(a.sha256, r).ok()) std::abort();
      }
    }
    (void)VerifyEkCertificate(self, in, 1800000000);
  }

  rackgate::Result<EkCertInfo> info = ParseEkCertificate(in);
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
  (void)VerifyEkCertificate(*store, in, 1800000000);
  return 0;
}
