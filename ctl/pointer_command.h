// `rackgatectl pointer`: the pointer Ignition config a machine boots with
// (docs/ignition.md). Offline: it needs the appliance CA and, for a pool that
// requires one, the provisioning token.
#ifndef RACKGATE_DAEMON_CTL_POINTER_COMMAND_H_
#define RACKGATE_DAEMON_CTL_POINTER_COMMAND_H_

#include <optional>
#include <string>

namespace rackgate::ctl {

struct PointerOptions {
  std::string pool;
  std::string url;  // the appliance, https://HOST:PORT
  std::string ca_pem;
  std::optional<std::string> token;
  std::string spec = "3.3.0";  // "3.0.0" ... "3.4.0"
};

// The pointer config of spec `o.spec`: merge (never replace: replace drops
// the pointer's CA) of URL/config/POOL, and the CA in
// ignition.security.tls.certificateAuthorities as a data URL. The token
// goes in an Authorization header (httpHeaders, spec 3.1.0 and later) or,
// for spec 3.0.0, which has no httpHeaders, in the URL as ?token=
// (percent-encoded).
std::string PointerConfig(const PointerOptions& o);

int RunPointer(int argc, char** argv, int first);

}  // namespace rackgate::ctl

#endif  // RACKGATE_DAEMON_CTL_POINTER_COMMAND_H_
