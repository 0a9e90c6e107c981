// The kubelet's credentials on disk, laid out as kubelet itself lays them
// out after a TLS bootstrap: kubelet-client-<time>.pem (certificate, then
// key) with kubelet-client-current.pem a symlink to it, the same for
// kubelet-server-*, the cluster CA as ca.crt, and a kubeconfig naming the
// client certificate. Internal to rackgate-agent; see docs/agent.md.
#ifndef RACKGATE_AGENT_KUBELET_H_
#define RACKGATE_AGENT_KUBELET_H_

#if !defined(RACKGATE_AGENT_INTERNAL)
#error "agent/kubelet.h is internal to rackgate-agent"
#endif

#include <ctime>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "wire/protocol.h"

namespace rackgate::agent {

inline constexpr char kClientPrefix[] = "kubelet-client";
inline constexpr char kServerPrefix[] = "kubelet-server";
// The TPM-resident client key's blobs (tpm2_create -u / -r format), with
// --tpm-key.
inline constexpr char kClientTpmPublic[] = "kubelet-client-tpm.pub";
inline constexpr char kClientTpmPrivate[] = "kubelet-client-tpm.priv";
inline constexpr char kCaFile[] = "ca.crt";
// Approver mode: the key of the kubelet's first client CSR, where kubelet's
// TLS bootstrap takes it from when it exists (kubelet 1.20,
// pkg/kubelet/certificate/bootstrap: <cert-dir>/kubelet-client.key.tmp).
inline constexpr char kBootstrapKeyFile[] = "kubelet-client.key.tmp";

// Writes <dir>/<prefix>-YYYY-MM-DD-HH-MM-SS.pem (UTC of `now`, mode 0600):
// `cert_pem` followed by `key_pem` when given; then points
// <dir>/<prefix>-current.pem at it (replaced atomically). Creates `dir`
// (0755) when missing. Returns the -current.pem path.
Result<std::string> WriteKubeletPair(const std::string& dir, const char* prefix, std::string_view cert_pem,
                                     std::optional<std::string_view> key_pem, std::time_t now);

// Writes `data` as <dir>/<name> with `mode`, atomically.
Status WriteInDir(const std::string& dir, const std::string& name, std::string_view data, unsigned mode);

// A kubeconfig for kubelet: one cluster (`server`, CA file), one user
// (client certificate, and key file unless empty), one context.
std::string RenderKubeconfig(std::string_view server, std::string_view ca_file, std::string_view client_cert,
                             std::string_view client_key);

// True for an https:// URL safe to put in a kubeconfig (one check with the
// appliance's pool setting: wire/protocol.h).
using wire::ValidApiserverUrl;

// Where the kubelet finds its cluster (docs/agent.md, "Where the API server
// and node addresses come from"): the flag when given (--apiserver; a
// Debian node's agent.env), else the appliance's record of the machine (its
// pool's `apiserver` setting). "" when neither: the csr step refuses with
// apiserver_missing in a signer-mode pool.
std::string ChosenApiserver(const std::string& flag, const wire::MachineRecord& machine);
// The serving certificate's IP SANs: --node-ip's when given, else the
// machine's enrolled IP addresses from the record (none when neither).
std::vector<std::string> ChosenNodeIps(const std::vector<std::string>& flags, const wire::MachineRecord& machine);

}  // namespace rackgate::agent

#endif  // RACKGATE_AGENT_KUBELET_H_
