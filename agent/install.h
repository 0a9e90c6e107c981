// --install-root: puts the bundled agent into a node's real root on its first
// boot, so that later boots run it as a service there (docs/nodes.md,
// "Later boots: the agent in the real root"). Internal to rackgate-agent.
#ifndef RACKGATE_AGENT_INSTALL_H_
#define RACKGATE_AGENT_INSTALL_H_

#if !defined(RACKGATE_AGENT_INTERNAL)
#error "agent/install.h is internal to rackgate-agent"
#endif

#include <ctime>
#include <string>
#include <vector>

#include "agent/rootfs.h"
#include "base/status.h"

namespace rackgate::agent {

struct AgentOptions;

// Where the bundle unpacks (script/agent-bundle's prefix), and where it is
// installed in the real root: /opt is writable on Fedora CoreOS and RHCOS (a
// link to /var/opt) and on Flatcar, whose /usr is read-only. The bundle's
// unit names the installed path in its ExecStart (agent/meson.build).
inline constexpr char kBundleDir[] = "/usr/lib/rackgate-agent";
inline constexpr char kInstalledDir[] = "/opt/rackgate-agent";
inline constexpr char kInstalledCa[] = "/etc/rackgate/ca.pem";
inline constexpr char kInstalledEnv[] = "/etc/rackgate/agent.env";
inline constexpr char kUnitDir[] = "/etc/systemd/system";

struct InstallOptions {
  std::string bundle_dir = kBundleDir;  // a directory of this machine, read
  std::vector<std::string> urls;        // the appliances, as --url gave them
  std::string ca_pem;                   // the appliance CA (the file --ca named)
  std::string apiserver;                // --apiserver, or ""
  std::vector<std::string> agent_args;  // more arguments for the service (InstalledAgentArgs)
  // The machine whose attested config this run fetched (the token's
  // hostname), or "" when the run had no config step: given, the install
  // writes the config stamp (renewal.h, kConfigStampInRoot) naming it into
  // the root, so that later boots check the disk's config is theirs.
  std::string config_for;
};

// The flags the installed unit passes through RACKGATE_AGENT_ARGS, from the
// first boot's own (`o`, `tcti`): every option the later boots need to
// attest and to find the kubelet's files as this boot did: --tcti,
// --ek-alg (the EK that attested, when the run knows it: o.ek),
// --ak-alg, --kubelet-dir, --kubeconfig, --bootstrap-kubeconfig,
// --eventlog, --pcr-signature, --node-ip, --tpm-key; and --config-root=/
// when `config_stamped`. Each is one `--flag=value` word. A path under
// `install_root` (the first boot's /sysroot) is carried as the real root
// sees it (/sysroot/var/lib/kubelet/pki: /var/lib/kubelet/pki).
// kInvalidArgument install_arg_unsafe when a value holds whitespace or a
// character the unit's EnvironmentFile= and $VAR splitting would
// interpret (quotes, backslash, $, %).
Result<std::vector<std::string>> InstalledAgentArgs(const AgentOptions& o, const std::string& tcti,
                                                    const std::string& install_root, bool config_stamped);

// Installs into `root`: the bundle's tree (its files, links and modes, minus
// its systemd/ directory) at kInstalledDir; its units from systemd/ into
// kUnitDir, enabled as `systemctl enable` would (links from
// multi-user.target.wants and timers.target.wants); the CA at kInstalledCa;
// and kInstalledEnv with RACKGATE_URL, RACKGATE_CA, RACKGATE_APISERVER and
// RACKGATE_AGENT_ARGS, the unit's EnvironmentFile; with o.config_for, the
// config stamp naming that machine (`now` its time). Files there are
// replaced. Writes go through `root` (never outside it, never through a
// planted link). kInvalidArgument bundle_invalid when bundle_dir holds no
// rackgate-agent, loader or units; kIoError io_failed on a failed write.
Status InstallIntoRoot(const InstallOptions& o, Root* root, std::time_t now = 0);

// The text of kInstalledEnv (EnvironmentFile= syntax, one VAR=value a line).
// REQUIRES: no value holds a newline (URLs, addresses and flags as the
// agent checked them).
std::string AgentEnvFile(const InstallOptions& o);

}  // namespace rackgate::agent

#endif  // RACKGATE_AGENT_INSTALL_H_
