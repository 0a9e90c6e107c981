// Which EK the agent uses, and its certificates: the EK certificate from
// its TCG NV index, low or high range (reduced to its DER: some TPMs put a
// header before it or pad the index), and the best-effort chain from the TCG
// chain range. Internal to rackgate-agent; docs/agent.md says the order.
#ifndef RACKGATE_AGENT_EK_H_
#define RACKGATE_AGENT_EK_H_

#if !defined(RACKGATE_AGENT_INTERNAL)
#error "agent/ek.h is internal to rackgate-agent"
#endif

#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "agent/templates.h"
#include "agent/tpm.h"

namespace rackgate::agent {

// The --ek-alg choice: any EK, a family (rsa, ecc), or exactly one kind
// (its EkKindName). Converts from a family, so `o.ek = EkPreference::kRsa`
// reads as before.
struct EkPreference {
  enum Family { kAny, kRsa, kEcc };
  Family family = kAny;
  std::optional<EkKind> kind;  // set: this kind only

  EkPreference(Family f = kAny) : family(f) {}  // NOLINT: implicit on purpose
  static EkPreference Only(EkKind k) {
    EkPreference p;
    p.kind = k;
    return p;
  }
  bool operator==(const EkPreference&) const = default;
};

// "rsa", "ecc" or a kind's name; nullopt for anything else.
std::optional<EkPreference> ParseEkPreference(std::string_view arg);
// What ParseEkPreference reads back to `p`: "" for kAny.
std::string EkPreferenceArg(const EkPreference& p);
// The kinds `p` allows, in the order ChooseEk tries them.
std::vector<EkKind> EkKindsFor(const EkPreference& p);

struct EkChoice {
  EkKind kind = EkKind::kRsa2048;
  std::optional<Bytes> certificate;  // DER
  std::vector<Bytes> intermediates;  // DER, at most kMaxIntermediates
};

inline constexpr size_t kMaxIntermediates = 4;  // what the appliance accepts
// Chain indices read at most (each at most kMaxNvBytes), and the largest
// certificate taken from them.
inline constexpr size_t kMaxChainIndices = 8;
inline constexpr size_t kMaxChainCertBytes = 8 * 1024;

// The first EK kind of EkKindsFor(preference) whose certificate index holds
// a certificate, with that certificate (EkCertificateDerFromNv: header and
// padding stripped) and the chain (EkChainFromNv over the chain indices, in
// index order; any failure there leaves the chain out). An index that holds
// no certificate is passed over. With no certificate at all, the first kind
// of the preference without one (the appliance then needs the EK enrolled by
// its public area and require_ek_certificate off). Fails only when the TPM
// fails to list or read the EK certificate indices.
Result<EkChoice> ChooseEk(NvIndexReader* nv, EkPreference preference);

// The certificates in the chain indices' contents, `indices` in index order:
// DER certificates back to back, where one may begin in one index and go on
// in the next (the profile allows it; a TPM's index size limits what fits).
// Each index's padding after its last certificate is skipped. At most `max`
// certificates, none over kMaxChainCertBytes; what does not parse ends the
// chain there.
std::vector<Bytes> EkChainFromNv(const std::vector<Bytes>& indices, size_t max);

// kTpmError ("ek_template_mismatch") unless the EK public area and the
// certificate carry the same key: the template was not the manufacturer's,
// and the appliance would refuse the EK anyway.
Status CheckEkMatchesCertificate(std::span<const uint8_t> ek_tpm2b_public, std::span<const uint8_t> cert_der);

}  // namespace rackgate::agent

#endif  // RACKGATE_AGENT_EK_H_
