// The kubelet's keys and certificate signing requests: a software ECDSA P-256
// key (PEM as kubelet writes it) or a TPM-resident one, and a PKCS#10 request
// whose to-be-signed bytes are hashed here and signed by either. Internal to
// rackgate-agent.
#ifndef RACKGATE_AGENT_CSR_H_
#define RACKGATE_AGENT_CSR_H_

#if !defined(RACKGATE_AGENT_INTERNAL)
#error "agent/csr.h is internal to rackgate-agent"
#endif

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "base/ossl.h"
#include "base/status.h"
#include "attest/tpm.h"

namespace rackgate::agent {

using attest::Bytes;

using PkeyPtr = ossl::PkeyPtr;

// What goes into a CSR. The kubelet client CSR has no SANs and so no
// extensions at all; the serving CSR has exactly one, subjectAltName.
struct CsrSubject {
  std::string organization;  // "system:nodes"
  std::string common_name;   // "system:node:<hostname>"
  std::vector<std::string> dns_names;
  std::vector<std::string> ip_addresses;  // textual IPv4/IPv6
};

// Signs a SHA-256 digest; returns a DER ECDSA-Sig-Value (what goes into
// the CSR's signature BIT STRING for ecdsa-with-SHA256).
using DigestSigner = std::function<Result<Bytes>(std::span<const uint8_t> sha256_digest)>;

// A fresh ECDSA P-256 key pair. Throws only on OpenSSL resource failure.
PkeyPtr GenerateP256Key();
// "-----BEGIN EC PRIVATE KEY-----" (SEC 1), as kubelet writes its keys.
std::string PrivateKeyPem(evp_pkey_st* key);
// The private key of a PEM text (PKCS#8 or the SEC1/PKCS#1 forms);
// kInvalidArgument key_unreadable otherwise.
Result<PkeyPtr> PrivateKeyFromPem(std::string_view pem);
// A signer with a software key. `key` is BORROWED and must outlive it.
DigestSigner SoftwareSigner(evp_pkey_st* key);

// The public key of a TPM2B_PUBLIC holding an ECC P-256 key.
// kInvalidArgument / kUnsupported when it is anything else.
Result<PkeyPtr> PublicKeyFromTpm2bPublic(std::span<const uint8_t> tpm2b_public);
// A marshalled TPMT_SIGNATURE (ECDSA) as a DER ECDSA-Sig-Value.
Result<Bytes> EcdsaDerFromTpmtSignature(std::span<const uint8_t> tpmt_signature);

// A PEM "CERTIFICATE REQUEST": version 1, `subject` (O then CN), `public_key`
// (BORROWED), the SAN extension when `subject` names any, signed with
// ecdsa-with-SHA256 by `sign` over the DER of the request info. The result
// is verified against `public_key` before it is returned. kInvalidArgument
// ("csr_invalid") for an unusable subject or address; the signer's failure
// as it is; kVerificationFailed ("csr_signature_invalid") when the signature
// does not verify.
Result<std::string> BuildCsrPem(const CsrSubject& subject, evp_pkey_st* public_key, const DigestSigner& sign);

// Checks a certificate the appliance issued for us: PEM of one or more
// certificates, the first carrying `public_key` and subject CN
// `common_name`. Returns the PEM normalized (certificates only, re-encoded).
// kInvalidArgument ("certificate_invalid") otherwise.
Result<std::string> CheckIssuedCertificate(std::string_view pem, evp_pkey_st* public_key,
                                           std::string_view common_name);
// Whether a CSR found in the API server under the agent's name is the one
// the agent filed: `request_pem` (spec.request) is one PEM certificate
// request whose public key is `public_key` (BORROWED) and whose
// self-signature verifies with it, so only the holder of the key made it.
// kVerificationFailed "kubelet_csr_not_ours" otherwise (the message says
// which); kInvalidArgument "kubelet_csr_not_ours" for a request that does
// not parse.
Status CheckOwnCsr(std::string_view request_pem, evp_pkey_st* public_key);

// PEM of one or more certificates, re-encoded; kInvalidArgument
// ("certificate_invalid") when there is none or any does not parse.
Result<std::string> NormalizeCertificatesPem(std::string_view pem);

}  // namespace rackgate::agent

#endif  // RACKGATE_AGENT_CSR_H_
