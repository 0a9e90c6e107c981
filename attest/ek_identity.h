// A machine's identity: the hash of its EK's public key, the same whether the
// machine was enrolled from its EK certificate or from its EK public area; and
// the DER SubjectPublicKeyInfo that hash is taken over, for any TPM key.
#ifndef RACKGATE_ATTEST_EK_IDENTITY_H_
#define RACKGATE_ATTEST_EK_IDENTITY_H_

#include <span>
#include <string>

#include "base/status.h"
#include "attest/tpm.h"

namespace rackgate::attest {

// The DER SubjectPublicKeyInfo of an RSA or ECC (P-256/P-384/P-521) public area, as
// `openssl pkey -pubin -outform DER` writes it: named curve, uncompressed
// point. Lets code outside attest/ compare a TPM key with an X.509 or PKCS#10
// key byte for byte. Fails like PkeyFromTpmPublic (key_invalid,
// key_type_unsupported, key_curve_unsupported).
Result<Bytes> SubjectPublicKeyInfoFromTpmPublic(const TpmPublic& pub);

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
