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
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "attest/tpm.h"

namespace rackgate::agent {

using attest::Bytes;

// An EK kind: the TCG EK Credential Profile (2.5, §2.2.1.4/.5, Annex B)
// template whose certificate sits at the NV index named. The low range (L-*)
// has the TCG's first templates; the high range (H-*) one index per key type,
// each template with PolicyB in its own nameAlg. docs/agent.md says in which
// order the agent looks for them.
enum class EkKind {
  kRsa2048,      // L-1: RSA-2048, sha256, PolicyA, AES-128; certificate at 0x01c00002
  kEccP256,      // L-2: P-256, sha256, PolicyA, AES-128; 0x01c0000a
  kRsa2048High,  // H-1: RSA-2048, sha256, PolicyB, AES-128; 0x01c00012
  kEccP256High,  // H-2: P-256, sha256, PolicyB, AES-128; 0x01c00014
  kEccP384,      // H-3: P-384, sha384, PolicyB, AES-256; 0x01c00016 (swtpm's ECC EK)
  kEccP521,      // H-4: P-521, sha512, PolicyB, AES-256; 0x01c00018
  kRsa3072,      // H-6: RSA-3072, sha384, PolicyB, AES-256; 0x01c0001c (swtpm_setup --rsa-keysize 3072)
};

// Every kind, in the agent's default preference (ChooseEk, docs/agent.md):
// the kinds older agents knew keep their order (a machine enrolled by the
// EK an older agent chose keeps it), the others follow.
inline constexpr EkKind kEkKindsByPreference[] = {
    EkKind::kRsa2048,      EkKind::kEccP256, EkKind::kEccP384, EkKind::kRsa2048High,
    EkKind::kEccP256High,  EkKind::kRsa3072, EkKind::kEccP521,
};

inline constexpr uint32_t kNvEkCertRsa2048 = 0x01c00002;
inline constexpr uint32_t kNvEkCertEccP256 = 0x01c0000a;
inline constexpr uint32_t kNvEkCertRsa2048High = 0x01c00012;
inline constexpr uint32_t kNvEkCertEccP256High = 0x01c00014;
inline constexpr uint32_t kNvEkCertEccP384 = 0x01c00016;
inline constexpr uint32_t kNvEkCertEccP521 = 0x01c00018;
inline constexpr uint32_t kNvEkCertRsa3072 = 0x01c0001c;
// The lowest and highest EK certificate index above: one TPM2_GetCapability
// range covers them all.
inline constexpr uint32_t kNvEkCertFirst = kNvEkCertRsa2048;
inline constexpr uint32_t kNvEkCertLast = kNvEkCertRsa3072;
// TCG EK Credential Profile §2.2.1.5: certificates of the EK's chain, DER
// back to back from 0x01c00100 on (Intel PTT); one certificate may run on
// into the next index.
inline constexpr uint32_t kNvEkChainFirst = 0x01c00100;
inline constexpr uint32_t kNvEkChainLast = 0x01c001ff;

uint32_t EkCertNvIndex(EkKind kind);
// "rsa2048", "ecc-p256", "rsa2048-high", "ecc-p256-high", "ecc-p384",
// "ecc-p521", "rsa3072": the agent's log and --ek-alg say these.
std::string EkKindName(EkKind kind);
// The kind EkKindName names; nullopt for anything else.
std::optional<EkKind> EkKindFromName(std::string_view name);
// "L-1", "H-3", ...: the profile's name of the template.
std::string EkTemplateId(EkKind kind);
bool EkIsRsa(EkKind kind);

// The template for TPM2_CreatePrimary in the endorsement hierarchy. For
// L-1/L-2 the unique field is zero-filled (256 bytes for RSA, 32+32 for
// P-256); for the H templates it is empty, as the profile says. Identical
// templates make identical keys, so the key matches the certificate the
// manufacturer made.
TPM2B_PUBLIC EkTemplate(EkKind kind);

// The EK's admin policy, satisfied by a policy session in EkPolicyHash()
// (the EK's nameAlg): PolicySecret(TPM_RH_ENDORSEMENT), then, for the
// high-range templates, PolicyOR over EkPolicyOrBranches() (PolicyA, PolicyC
// in that hash), whose result is PolicyB.
TPMI_ALG_HASH EkPolicyHash(EkKind kind);
std::vector<Bytes> EkPolicyOrBranches(EkKind kind);

// TCG policy digests (EK Credential Profile 2.5, Annex B.6) for sha256,
// sha384 and sha512; empty for any other hash.
// PolicyA = TPM2_PolicySecret(TPM_RH_ENDORSEMENT).
Bytes EkPolicyA(TPMI_ALG_HASH hash);
// PolicyC = TPM2_PolicyAuthorizeNV(the EK policy index of that hash,
// 0x01c07f01/02/03).
Bytes EkPolicyC(TPMI_ALG_HASH hash);
// PolicyB = TPM2_PolicyOR(PolicyA, PolicyC): the high-range templates'
// authPolicy.
Bytes EkPolicyB(TPMI_ALG_HASH hash);

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
