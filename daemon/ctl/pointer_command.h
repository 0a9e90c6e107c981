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
};

// The pointer config, spec 3.3.0 (the newest the Debian Ignition reads):
// merge (never replace: replace drops the pointer's CA) of URL/config/POOL
// with the token as an Authorization header, and the CA in
// ignition.security.tls.certificateAuthorities as a data URL.
std::string PointerConfig(const PointerOptions& o);

int RunPointer(int argc, char** argv, int first);

}  // namespace rackgate::ctl

#endif  // RACKGATE_DAEMON_CTL_POINTER_COMMAND_H_
