// `rackgatectl pointer`: the pointer Ignition config a machine boots with
// (docs/ignition.md), or with --kernel-args what an immutable node boots the
// agent bundle with (docs/nodes.md). Offline: it needs the appliance CA and,
// for a pool that requires one, the provisioning token; --kernel-args needs
// the bundle file instead of a token.
#ifndef RACKGATE_DAEMON_CTL_POINTER_COMMAND_H_
#define RACKGATE_DAEMON_CTL_POINTER_COMMAND_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "base/status.h"

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

// What `pointer --kernel-args` tells an operator.
struct KernelArgsOptions {
  std::vector<std::string> urls;  // the appliances, each https://HOST:PORT (KernelArgsUrl)
  std::string bundle_file;        // the agent bundle read, its SHA-256 and size
  std::string bundle_sha256;
  uint64_t bundle_bytes = 0;
  std::string ca_initramfs_file;  // the CA's initramfs part written, or ""
  std::string ca_initramfs_sha256;
};

// `url` as the agent will read it from rackgate.url= (the agent's parser,
// wire/appliance_urls.h): one https://HOST[:PORT], nothing else, returned in
// the agent's form; url_invalid (the message names the fix) otherwise.
Result<std::string> KernelArgsUrl(const std::string& url);
// The certificates of a --ca file, and nothing else of it (never a key):
// ca_invalid, naming the fix, for a file that holds any other PEM block
// (a private key beside the certificate) or no certificate.
Result<std::string> CaCertificatesOnly(const std::string& pem, const std::string& path);
// "rackgate.url=URL[,URL...] rd.neednet=1": the appliances the initramfs
// agent reads (--kernel-cmdline), and dracut's switch that brings the network
// up before Ignition's first stage, where the agent's unit runs.
std::string KernelArgs(const KernelArgsOptions& o);
// The JSON document of --kernel-args --json: {"kernel_args",
// "agent_initramfs": {"url", "sha256_url", "sha256", "bytes", "file"},
// "ca_initramfs": {"file", "sha256", "path"} or null}. Fetch URLs name the
// first appliance.
std::string KernelArgsJson(const KernelArgsOptions& o);
// The text form: the kernel arguments alone on the one line that is not a
// comment ("# ..."), then the initramfs parts in the order to append them.
std::string KernelArgsText(const KernelArgsOptions& o);

int RunPointer(int argc, char** argv, int first);

}  // namespace rackgate::ctl

#endif  // RACKGATE_DAEMON_CTL_POINTER_COMMAND_H_
