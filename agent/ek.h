// Which EK the agent uses, and its certificates: the EK certificate from
// its TCG NV index (trimmed to its DER length; some TPMs pad the index), and
// the best-effort chain from the TCG chain range. Internal to rackgate-agent.
#ifndef RACKGATE_AGENT_EK_H_
#define RACKGATE_AGENT_EK_H_

#if !defined(RACKGATE_AGENT_INTERNAL)
#error "agent/ek.h is internal to rackgate-agent"
#endif

#include <optional>
#include <span>
#include <string>
#include <vector>

#include "agent/templates.h"
#include "agent/tpm.h"

namespace rackgate::agent {

// The --ek-alg choice.
enum class EkPreference { kAny, kRsa, kEcc };

struct EkChoice {
  EkKind kind = EkKind::kRsa2048;
  std::optional<Bytes> certificate;  // DER
  std::vector<Bytes> intermediates;  // DER, at most kMaxIntermediates
};

inline constexpr size_t kMaxIntermediates = 4;  // what the appliance accepts

// The first EK kind, in preference order (RSA-2048, ECC P-256, ECC P-384;
// only RSA with kRsa, only ECC with kEcc), whose certificate index exists,
// with that certificate and the chain. With no certificate at all, the first
// kind of the preference without one (the appliance then needs the EK
// enrolled by its public area and require_ek_certificate off).
Result<EkChoice> ChooseEk(Tpm* tpm, EkPreference preference);

// kTpmError ("ek_template_mismatch") unless the EK public area and the
// certificate carry the same key: the template was not the manufacturer's,
// and the appliance would refuse the EK anyway.
Status CheckEkMatchesCertificate(std::span<const uint8_t> ek_tpm2b_public, std::span<const uint8_t> cert_der);

}  // namespace rackgate::agent

#endif  // RACKGATE_AGENT_EK_H_
