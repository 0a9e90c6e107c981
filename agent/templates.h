// The public-area templates the agent asks the TPM for: the TCG EK Credential
// Profile EK templates that match the EK certificates a TPM ships with, the
// attestation key, the storage root key and the kubelet's TPM-resident
// client key; and the policy each EK demands. Pure data. Internal to
// rackgate-agent; see docs/agent.md for the choices.
#ifndef RACKGATE_AGENT_TEMPLATES_H_
#define RACKGATE_AGENT_TEMPLATES_H_

#if !defined(RACKGATE_AGENT_INTERNAL)
#error "agent/templates.h is internal to rackgate-agent"
#endif

#include <tss2/tss2_tpm2_types.h>

#include <cstdint>
#include <string>
#include <vector>

#include "attest/tpm.h"

namespace rackgate::agent {

using attest::Bytes;

// An EK kind: the TCG EK Credential Profile (2.5, §2.2.1) template whose
// certificate sits at the NV index named.
enum class EkKind {
  kRsa2048,   // template L-1, certificate at 0x01c00002
  kEccP256,   // template L-2, certificate at 0x01c0000a
  kEccP384,   // template H-3, certificate at 0x01c00016 (swtpm's ECC EK)
};

inline constexpr uint32_t kNvEkCertRsa2048 = 0x01c00002;
inline constexpr uint32_t kNvEkCertEccP256 = 0x01c0000a;
inline constexpr uint32_t kNvEkCertEccP384 = 0x01c00016;
// TCG EK Credential Profile §2.2.1.5: certificates of the EK's chain, each
// index holding one or more DER certificates back to back.
inline constexpr uint32_t kNvEkChainFirst = 0x01c00100;
inline constexpr uint32_t kNvEkChainLast = 0x01c001ff;

uint32_t EkCertNvIndex(EkKind kind);
std::string EkKindName(EkKind kind);  // "rsa2048", "ecc-p256", "ecc-p384"
bool EkIsRsa(EkKind kind);

// The template for TPM2_CreatePrimary in the endorsement hierarchy. For
// L-1/L-2 the unique field is zero-filled (256 bytes for RSA, 32+32 for
// P-256); for H-3 it is empty, as the profile says. Identical templates make
// identical keys, so the key matches the certificate the manufacturer made.
TPM2B_PUBLIC EkTemplate(EkKind kind);

// The EK's admin policy, satisfied by a policy session in EkPolicyHash():
// PolicySecret(TPM_RH_ENDORSEMENT), then, for the high-range templates,
// PolicyOR over EkPolicyOrBranches() (PolicyA, PolicyC).
TPMI_ALG_HASH EkPolicyHash(EkKind kind);
std::vector<Bytes> EkPolicyOrBranches(EkKind kind);

// TCG policy digests (EK Credential Profile 2.5, Table 3 and Table 9).
// PolicyA = TPM2_PolicySecret(TPM_RH_ENDORSEMENT).
Bytes PolicyASha256();
Bytes PolicyASha384();
// PolicyC = TPM2_PolicyAuthorizeNV(0x01c07f01).
Bytes PolicyCSha384();

enum class AkAlg { kRsa, kEcc };

// A restricted signing key that never leaves this TPM: fixedTPM |
// fixedParent | sensitiveDataOrigin | userWithAuth | restricted | sign, empty
// auth, nameAlg sha256. RSA-2048 with RSASSA-SHA256 or ECC P-256 with
// ECDSA-SHA256, the scheme fixed in the key.
TPM2B_PUBLIC AkTemplate(AkAlg alg);

// The storage root key the kubelet's TPM key lives under: ECC P-256,
// nameAlg sha256, fixedTPM | fixedParent | sensitiveDataOrigin |
// userWithAuth | noDA | restricted | decrypt, AES-128-CFB, empty unique and
// auth. Made fresh each time (deterministic, like the EK), never persisted;
// `tpm2_createprimary -C o -g sha256 -G ecc256:aes128cfb -a
// 'fixedtpm|fixedparent|sensitivedataorigin|userwithauth|noda|restricted|decrypt'`
// makes the same key.
TPM2B_PUBLIC SrkTemplate();

// The kubelet's TPM-resident client key: an unrestricted ECC P-256 signing
// key with ECDSA-SHA256 fixed, fixedTPM | fixedParent | sensitiveDataOrigin |
// userWithAuth | sign, empty auth, nameAlg sha256.
TPM2B_PUBLIC ClientKeyTemplate();

}  // namespace rackgate::agent

#endif  // RACKGATE_AGENT_TEMPLATES_H_
