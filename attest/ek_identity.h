// A machine's identity: the hash of its EK's public key, the same whether the
// machine was enrolled from its EK certificate or from its EK public area.
#ifndef RACKGATE_ATTEST_EK_IDENTITY_H_
#define RACKGATE_ATTEST_EK_IDENTITY_H_

#include <span>
#include <string>

#include "attest/status.h"
#include "attest/tpm.h"

namespace rackgate::attest {

// SHA-256 over the DER SubjectPublicKeyInfo of the EK key: what
//   openssl x509 -in ek.der -inform DER -pubkey -noout | openssl pkey -pubin -outform DER | sha256sum
// prints. A hash of the key rather than of the TPMT_PUBLIC, because vendor
// inventories ship certificates, not public areas, and one EK key must map to
// one identity whichever form the operator enrolled. Fails like
// PkeyFromTpmPublic (key_invalid, key_type_unsupported, key_curve_unsupported).
Result<Bytes> EkKeyHash(const TpmPublic& ek);
// The same over a certificate's subject key. kInvalidArgument
// ("ek_cert_malformed") when `der` is not one DER certificate.
Result<Bytes> EkKeyHashFromCertificate(std::span<const uint8_t> der);

}  // namespace rackgate::attest

#endif  // RACKGATE_ATTEST_EK_IDENTITY_H_
