// Where an API server is and how to prove who we are to it: a kubeconfig file
// (the subset an appliance needs) or a pod's service account.
#ifndef RACKGATE_KUBE_KUBECONFIG_H_
#define RACKGATE_KUBE_KUBECONFIG_H_

#include <cstddef>
#include <string>

#include "base/status.h"

namespace rackgate::kube {

// No kubeconfig, and no file it names (CA, certificate, key, token file), may
// be larger.
inline constexpr size_t kMaxKubeconfigBytes = 1 << 20;

struct Credentials {
  std::string server;           // "https://host:port" (maybe with a path), no trailing "/"
  std::string ca_pem;           // the only CA trusted for the server (PEM); never empty
  // Secrets: never logged, never put into a Status message.
  std::string bearer_token;     // may be empty when a client certificate is set
  std::string client_cert_pem;  // with client_key_pem, or both empty
  std::string client_key_pem;
};

// The credentials of `context` (the file's current-context when empty) in the
// kubeconfig at `path`:
//   clusters[].cluster: server (https only), certificate-authority (a file)
//     or certificate-authority-data (base64 PEM);
//   users[].user: token or tokenFile, and/or client-certificate(-data) with
//     client-key(-data).
// Relative file names resolve against the kubeconfig's directory.
// Failures:
//   kIoError "kubeconfig_unreadable": the file or a file it names cannot be read;
//   kInvalidArgument "kubeconfig_invalid": not YAML, larger than
//     kMaxKubeconfigBytes, the context/cluster/user is missing, no CA, no
//     credentials, a certificate without its key, both token and tokenFile;
//   kUnsupported "kubeconfig_unsupported": an http:// server,
//     insecure-skip-tls-verify, exec or auth-provider plugins,
//     username/password, tls-server-name, proxy-url.
// Messages name the field and the fix; never a secret's value.
Result<Credentials> LoadKubeconfig(const std::string& path, const std::string& context = "");

// Where a pod finds its service account (overridable for tests).
struct InClusterPaths {
  std::string token_file = "/var/run/secrets/kubernetes.io/serviceaccount/token";
  std::string ca_file = "/var/run/secrets/kubernetes.io/serviceaccount/ca.crt";
  std::string host_env = "KUBERNETES_SERVICE_HOST";
  std::string port_env = "KUBERNETES_SERVICE_PORT";
};

// The pod's own credentials: https://$KUBERNETES_SERVICE_HOST:$KUBERNETES_SERVICE_PORT
// (an IPv6 address bracketed) with the service account's token and CA.
// kInvalidArgument "in_cluster_unavailable" when the variables are unset or
// malformed; "kubeconfig_unreadable" / "kubeconfig_invalid" for the files.
Result<Credentials> InClusterCredentials(const InClusterPaths& paths = {});

}  // namespace rackgate::kube

#endif  // RACKGATE_KUBE_KUBECONFIG_H_
