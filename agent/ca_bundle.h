// The appliance CA bundle an evidence answer carries (wire::Token::ca_bundle;
// docs/agent.md, "The appliance CA follows a rotation"): checked, and written
// over the agent's CA file when it differs. Internal to rackgate-agent.
#ifndef RACKGATE_AGENT_CA_BUNDLE_H_
#define RACKGATE_AGENT_CA_BUNDLE_H_

#if !defined(RACKGATE_AGENT_INTERNAL)
#error "agent/ca_bundle.h is internal to rackgate-agent"
#endif

#include <string>

#include "base/status.h"

namespace rackgate::agent {

// Ok when `pem` is 1 to wire::kMaxCaBundleCerts PEM certificates, each of
// which parses and is a CA (basicConstraints CA:TRUE), and nothing else
// (no key, no other block). ca_bundle_invalid (kInvalidArgument) otherwise.
Status ValidateCaBundle(const std::string& pem);

enum class CaFileUpdate { kUnchanged, kReplaced };

// Replaces the CA file at `path` with `bundle` when its bytes differ:
// validated first (ValidateCaBundle; a refused bundle changes nothing),
// then written atomically (a temporary file in the same directory, fsync,
// rename, fsync of the directory), mode 0644 (the CA is public).
// kUnchanged when the file holds `bundle` already (nothing written). The
// validation's reason, or file_unwritable (kIoError).
Result<CaFileUpdate> UpdateCaFile(const std::string& path, const std::string& bundle);

}  // namespace rackgate::agent

#endif  // RACKGATE_AGENT_CA_BUNDLE_H_
