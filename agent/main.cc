// rackgate-agent: flags, the TPM and HTTPS client set-up, exit codes.
#include <arpa/inet.h>
#include <curl/curl.h>
#include <getopt.h>
#include <sys/stat.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "agent/agent.h"
#include "agent/client.h"
#include "agent/cmdline.h"
#include "agent/config_out.h"
#include "agent/endpoints.h"
#include "agent/failure.h"
#include "agent/install.h"
#include "agent/kubelet.h"
#include "agent/tpm.h"
#include "attest/boot_facts.h"
#include "base/files.h"
#include "base/text.h"

#ifndef RACKGATE_VERSION
#define RACKGATE_VERSION "dev"
#endif

namespace {

using namespace rackgate::agent;  // NOLINT

constexpr char kHelp[] =
    "Usage: rackgate-agent --url https://HOST:22623[,https://HOST2:22623] --ca FILE [OPTIONS]\n"
    "       rackgate-agent --kernel-cmdline /proc/cmdline --ca FILE [OPTIONS]\n"
    "\n"
    "Attests this machine with its TPM to a rackgate appliance, then fetches its\n"
    "attested Ignition config and its kubelet certificates. Run on every boot\n"
    "and from a timer: the config is applied once (stamp under the apply root's\n"
    "/var/lib/rackgate-agent), valid certificates are kept, due ones renewed.\n"
    "\n"
    "Appliance:\n"
    "  --url URL[,URL...]   an appliance, https://HOST[:PORT] (this or --kernel-cmdline\n"
    "                       is required); repeatable,\n"
    "                       or several separated by commas; at most 16 in all,\n"
    "                       each address of a DNS name counting as one. A step\n"
    "                       whose appliance fails (no answer, 5xx) goes to the next\n"
    "                       at once (docs/agent.md, \"Several appliances\")\n"
    "  --kernel-cmdline FILE  the appliances from FILE's rackgate.url= words instead\n"
    "                       of --url (/proc/cmdline in an initramfs; each value as\n"
    "                       --url takes it; words split as the kernel splits them,\n"
    "                       double quotes group); none there: exit 2\n"
    "  --ca FILE            the appliance CA (PEM), the only CA trusted (required)\n"
    "  --max-wait DURATION  give up after waiting this long in all for an\n"
    "                       appliance that answers 503 or cannot be reached;\n"
    "                       seconds, or with s/m/h (default 1h)\n"
    "  --steps LIST         comma-separated: attest, config, csr (default attest);\n"
    "                       config and csr imply attest (the token is kept only by\n"
    "                       --session-out)\n"
    "TPM:\n"
    "  --tcti CONF          TCTI (default device:/dev/tpmrm0;\n"
    "                       lab: swtpm:host=127.0.0.1,port=N)\n"
    "  --ek-alg ALG         which EK: rsa, ecc, or one of rsa2048, ecc-p256 (low\n"
    "                       range), ecc-p384, rsa2048-high, ecc-p256-high,\n"
    "                       rsa3072, ecc-p521 (high range) (default: the first\n"
    "                       with a certificate in NV, in that order)\n"
    "  --ak-alg rsa|ecc     the attestation key: RSA-2048 RSASSA or ECC P-256\n"
    "                       ECDSA, both SHA-256 (default ecc)\n"
    "  --eventlog PATH      measured-boot log to send (default\n"
    "                       /sys/kernel/security/tpm0/binary_bios_measurements;\n"
    "                       missing: none is sent; \"\": never send one)\n"
    "  --pcr-signature PATH signed PCR 11 values of the booted UKI (systemd-measure\n"
    "                       sign; default /run/systemd/tpm2-pcr-signature.json;\n"
    "                       missing or malformed: none is sent; \"\": never)\n"
    "Config step:\n"
    "  --config-out FILE    write the attested Ignition config here (mode 0600);\n"
    "                       repeatable (at most 4): then one whose directory is\n"
    "                       missing or read-only is skipped, and the step fails\n"
    "                       (exit 6) only when none was written\n"
    "  --apply-root DIR     apply its files, directories, links and units under DIR\n"
    "  --config-root DIR    without the config step: the root an earlier run's config\n"
    "                       went to; its stamp must name the machine the appliance\n"
    "                       identifies, and the appliance must have provisioned it\n"
    "                       (--install-root passes --config-root=/ to later boots)\n"
    "Carried attestation (an initramfs's two runs, docs/agent.md):\n"
    "  --session-out FILE   once the steps succeeded, write this run's attestation\n"
    "                       (its bearer token: a credential; mode 0600; keep it on\n"
    "                       a tmpfs such as /run)\n"
    "  --session FILE       use that attestation instead of attesting when FILE has\n"
    "                       one with 60 s or more left; else attest (a log line says\n"
    "                       why). FILE is removed once read. A 401 on a step made\n"
    "                       with it: attest afresh, once\n"
    "CSR step:\n"
    "  --kubelet-dir DIR    kubelet PKI directory (default /var/lib/kubelet/pki)\n"
    "  --kubeconfig FILE    kubeconfig to write (default /var/lib/kubelet/kubeconfig)\n"
    "  --apiserver URL      the cluster's API server, https://... (for the kubeconfig\n"
    "                       of a signer-mode pool's csr step)\n"
    "  --node-ip ADDR       an address for the serving certificate (repeatable)\n"
    "  --tpm-key            keep the client key in the TPM (certified by the AK)\n"
    "  --bootstrap-kubeconfig FILE  approver mode: file the kubelet's first client\n"
    "                       CSR with this kubeconfig and write its certificate\n"
    "                       (for a kubelet with --rotate-certificates)\n"
    "Bundle (the self-contained agent, docs/nodes.md):\n"
    "  --install-root DIR   once the steps succeeded, install this bundle into the\n"
    "                       real root DIR (an initramfs's /sysroot): the agent at\n"
    "                       DIR/opt/rackgate-agent, its service and renewal timer\n"
    "                       enabled in DIR/etc/systemd/system, the CA and\n"
    "                       DIR/etc/rackgate/agent.env from --url, --ca, --apiserver\n"
    "                       and every flag later boots need (--tcti, --ek-alg of the\n"
    "                       EK that attested, --ak-alg, --kubelet-dir, --kubeconfig,\n"
    "                       --node-ip, --tpm-key, ...; paths under DIR as the real\n"
    "                       root sees them)\n"
    "\n"
    "  --help, --version\n"
    "\n"
    "Exit status: 0 ok; 2 usage; 3 refused by the appliance (reason on stderr;\n"
    "a refused renewal too, the current certificates kept);\n"
    "4 appliance unreachable or gave up waiting; 5 TPM failure; 6 local I/O failure;\n"
    "1 internal error (a bug).\n";

int Usage(const std::string& why) {
  std::fprintf(stderr, "rackgate-agent: %s\nTry 'rackgate-agent --help'.\n", why.c_str());
  return kExitUsage;
}

// "90", "90s", "15m", "1h".
bool ParseDuration(std::string_view text, std::chrono::seconds* out) {
  if (text.empty() || text.size() > 12) return false;
  long mult = 1;
  switch (text.back()) {
    case 's': mult = 1; text.remove_suffix(1); break;
    case 'm': mult = 60; text.remove_suffix(1); break;
    case 'h': mult = 3600; text.remove_suffix(1); break;
    default: break;
  }
  if (text.empty()) return false;
  long v = 0;
  for (char c : text) {
    if (c < '0' || c > '9') return false;
    v = v * 10 + (c - '0');
  }
  if (v > 30L * 24 * 3600 / mult) return false;  // a month is plenty
  *out = std::chrono::seconds(v * mult);
  return true;
}

// The command line as given, before its checks.
struct Flags {
  std::vector<std::string> urls;
  std::string kernel_cmdline;  // --kernel-cmdline FILE, or ""
  std::string ca, tcti = kDefaultTcti, steps = "attest";
  std::string install_root;
  AgentOptions options;
};

// Reads the flags into *out. Returns an exit code when the agent is to stop
// (--help, --version, a usage error), nullopt when it is to go on.
std::optional<int> ParseFlags(int argc, char** argv, Flags* out) {
  enum Flag {
    kUrl = 1000, kCa, kMaxWait, kSteps, kTcti, kEkAlg, kAkAlg, kEventlog, kPcrSignature, kConfigOut, kApplyRoot,
    kKubeletDir, kKubeconfig, kApiserver, kNodeIp, kTpmKey, kHelpFlag, kVersion, kBootstrapKubeconfig,
    kInstallRoot, kConfigRoot, kKernelCmdline, kSession, kSessionOut,
  };
  static const option kOptions[] = {
      {"url", required_argument, nullptr, kUrl},
      {"kernel-cmdline", required_argument, nullptr, kKernelCmdline},
      {"ca", required_argument, nullptr, kCa},
      {"max-wait", required_argument, nullptr, kMaxWait},
      {"steps", required_argument, nullptr, kSteps},
      {"tcti", required_argument, nullptr, kTcti},
      {"ek-alg", required_argument, nullptr, kEkAlg},
      {"ak-alg", required_argument, nullptr, kAkAlg},
      {"eventlog", required_argument, nullptr, kEventlog},
      {"pcr-signature", required_argument, nullptr, kPcrSignature},
      {"config-out", required_argument, nullptr, kConfigOut},
      {"apply-root", required_argument, nullptr, kApplyRoot},
      {"kubelet-dir", required_argument, nullptr, kKubeletDir},
      {"kubeconfig", required_argument, nullptr, kKubeconfig},
      {"bootstrap-kubeconfig", required_argument, nullptr, kBootstrapKubeconfig},
      {"apiserver", required_argument, nullptr, kApiserver},
      {"node-ip", required_argument, nullptr, kNodeIp},
      {"tpm-key", no_argument, nullptr, kTpmKey},
      {"install-root", required_argument, nullptr, kInstallRoot},
      {"config-root", required_argument, nullptr, kConfigRoot},
      {"session", required_argument, nullptr, kSession},
      {"session-out", required_argument, nullptr, kSessionOut},
      {"help", no_argument, nullptr, kHelpFlag},
      {"version", no_argument, nullptr, kVersion},
      {nullptr, 0, nullptr, 0},
  };
  Flags& f = *out;
  AgentOptions& o = f.options;
  o.eventlog_path = kDefaultEventLog;
  o.pcr_signature_path = kDefaultPcrSignature;
  o.kubelet_dir = kDefaultKubeletDir;
  o.kubeconfig = kDefaultKubeconfig;
  opterr = 0;
  for (;;) {
    const int c = getopt_long(argc, argv, ":", kOptions, nullptr);
    if (c == -1) break;
    const std::string arg = optarg ? optarg : "";
    switch (c) {
      case kUrl: f.urls.push_back(arg); break;
      case kKernelCmdline: f.kernel_cmdline = arg; break;
      case kCa: f.ca = arg; break;
      case kMaxWait:
        if (!ParseDuration(arg, &o.max_wait)) return Usage("--max-wait: expected seconds, or a number with s/m/h");
        break;
      case kSteps: f.steps = arg; break;
      case kTcti: f.tcti = arg; break;
      case kEkAlg:
        if (auto ek = ParseEkPreference(arg)) o.ek = *ek;
        else return Usage("--ek-alg: expected rsa, ecc or one EK: rsa2048, ecc-p256, ecc-p384, rsa2048-high, "
                          "ecc-p256-high, rsa3072, ecc-p521");
        break;
      case kAkAlg:
        if (arg == "rsa") o.ak = AkAlg::kRsa;
        else if (arg == "ecc") o.ak = AkAlg::kEcc;
        else return Usage("--ak-alg: expected rsa or ecc");
        break;
      case kEventlog: o.eventlog_path = arg; break;
      case kPcrSignature: o.pcr_signature_path = arg; break;
      case kConfigOut:
        if (o.config_outs.size() == kMaxConfigOuts) return Usage("--config-out: at most 4");
        o.config_outs.push_back(arg);
        break;
      case kApplyRoot: o.apply_root = arg; break;
      case kKubeletDir: o.kubelet_dir = arg; break;
      case kKubeconfig: o.kubeconfig = arg; break;
      case kBootstrapKubeconfig: o.bootstrap_kubeconfig = arg; break;
      case kApiserver: o.apiserver = arg; break;
      case kNodeIp: o.node_ips.push_back(arg); break;
      case kTpmKey: o.tpm_key = true; break;
      case kInstallRoot: f.install_root = arg; break;
      case kConfigRoot: o.config_root = arg; break;
      case kSession: o.session_in = arg; break;
      case kSessionOut: o.session_out = arg; break;
      case kHelpFlag: std::fputs(kHelp, stdout); return kExitOk;
      case kVersion: std::printf("rackgate-agent %s\n", RACKGATE_VERSION); return kExitOk;
      case ':': return Usage(std::string("option needs a value: ") + argv[optind - 1]);
      default: return Usage(std::string("unknown option: ") + (optind > 0 ? argv[optind - 1] : "?"));
    }
  }
  if (optind < argc) return Usage(std::string("unexpected argument: ") + argv[optind]);
  return std::nullopt;
}

// Takes --steps into *out and checks that each step has what it needs.
// Returns the usage error's exit code, or nullopt.
std::optional<int> CheckSteps(const std::string& steps, AgentOptions* out) {
  AgentOptions& o = *out;
  size_t at = 0;
  while (at <= steps.size()) {
    const size_t end = std::min(steps.find(',', at), steps.size());
    const std::string step = steps.substr(at, end - at);
    if (step == "config") o.step_config = true;
    else if (step == "csr") o.step_csr = true;
    else if (step != "attest") return Usage("--steps: unknown step '" + step + "' (attest, config, csr)");
    at = end + 1;
  }
  if (o.step_config && o.config_outs.empty() && o.apply_root.empty()) {
    return Usage("the config step needs --config-out FILE and/or --apply-root DIR");
  }
  // In approver mode (the pool's kubelet_certificates) the agent writes no
  // kubeconfig and needs none; the signer-mode path checks it is there.
  if (o.step_csr && !o.apiserver.empty() && !ValidApiserverUrl(o.apiserver)) {
    return Usage("--apiserver must be https://HOST:PORT");
  }
  if (o.step_csr && (o.kubelet_dir.empty() || o.kubeconfig.empty())) {
    return Usage("--kubelet-dir and --kubeconfig must not be empty");
  }
  if (!o.step_csr && (o.tpm_key || !o.node_ips.empty())) return Usage("--tpm-key and --node-ip belong to the csr step");
  for (const auto& ip : o.node_ips) {
    unsigned char buf[16];
    if (inet_pton(AF_INET, ip.c_str(), buf) != 1 && inet_pton(AF_INET6, ip.c_str(), buf) != 1) {
      return Usage("--node-ip: not an IPv4 or IPv6 address: " + ip);
    }
  }
  return std::nullopt;
}

// What the run established, for --install-root.
struct RunFacts {
  std::optional<EkKind> ek;
  std::string config_for;  // the machine whose config the run fetched, or ""
};

// Opens the HTTP client and the TPM and runs the agent's steps; its exit code.
int RunAgent(const Flags& f, const std::vector<Endpoint>& urls, RunFacts* facts) {
  // tpm2-tss logs its own errors to stderr; the agent reports each failure
  // once, in its own line. TSS2_LOG set by the caller still wins.
  setenv("TSS2_LOG", "all+none", 0);
  if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK) {
    std::fprintf(stderr, "rackgate-agent: curl_global_init failed\n");
    return kExitLocalIo;
  }
  ClientOptions co;
  co.ca_file = f.ca;
  co.user_agent = std::string("rackgate-agent/") + RACKGATE_VERSION;
  auto client = HttpClient::Create(co);
  if (!client.ok()) {
    std::fprintf(stderr, "rackgate-agent: %s\n", client.status().ToString().c_str());
    return kExitLocalIo;
  }
  auto tpm = Tpm::Open(f.tcti);
  if (!tpm.ok()) {
    std::fprintf(stderr, "rackgate-agent: step=attest machine=- tpm-failure reason=%s message=\"%s\"\n",
                 tpm.status().reason().c_str(),
                 rackgate::text::PrintableAscii(tpm.status().message(), 300).c_str());
    return kExitTpm;
  }
  // Every address of a DNS name is an appliance of its own: a fleet behind
  // one name with several A/AAAA records is tried address by address.
  size_t dropped = 0;
  std::vector<Endpoint> endpoints = ExpandEndpoints(urls, &ResolveAll, &dropped);
  if (dropped > 0) {
    std::fprintf(stderr, "rackgate-agent: step=attest machine=- note %zu appliance addresses over the limit of %zu "
                 "not used; list fewer URLs or names with fewer addresses\n", dropped, kMaxEndpoints);
  }
  AgentOptions options = f.options;
  options.ca_file = f.ca;  // follows the appliance's CA bundle (docs/agent.md)
  Agent agent(options, tpm->get(), std::move(endpoints), &*client, SystemClock());
  const int rc = agent.Run();
  facts->ek = agent.attested_ek();
  if (agent.config_fetched()) facts->config_for = agent.attested_hostname();
  return rc;
}

int InstallFailed(const rackgate::Status& s) {
  std::fprintf(stderr, "rackgate-agent: step=install failed reason=%s message=\"%s\"\n", s.reason().c_str(),
               rackgate::text::PrintableAscii(s.message(), 300).c_str());
  return kExitLocalIo;
}

// --install-root: the bundle into the real root, for later boots' service.
int InstallBundle(const Flags& f, const std::vector<Endpoint>& urls, const RunFacts& facts) {
  InstallOptions io;
  // As parsed (one URL each, canonical): a --kernel-cmdline value may hold
  // spaces or quotes the kernel kept, which agent.env need not carry.
  for (const auto& u : urls) io.urls.push_back(u.url);
  io.apiserver = f.options.apiserver;
  io.config_for = facts.config_for;
  AgentOptions later = f.options;
  // The EK that attested, whatever the preference: a machine enrolled by
  // its ECC EK must not try its RSA EK on later boots, nor one enrolled by
  // its high-range RSA EK its low-range one.
  if (facts.ek) later.ek = EkPreference::Only(*facts.ek);
  auto args = InstalledAgentArgs(later, f.tcti, f.install_root, !io.config_for.empty());
  if (!args.ok()) return InstallFailed(args.status());
  io.agent_args = std::move(args).value();
  auto ca = rackgate::ReadFile(f.ca, 64 * 1024);
  if (!ca.ok()) return InstallFailed(ca.status());
  io.ca_pem.assign(ca->begin(), ca->end());
  auto root = Root::Open(f.install_root);
  if (!root.ok()) return InstallFailed(root.status());
  if (rackgate::Status s = InstallIntoRoot(io, &*root, std::time(nullptr)); !s.ok()) return InstallFailed(s);
  std::fprintf(stderr, "rackgate-agent: step=install ok root=%s dir=%s\n",
               rackgate::text::PrintableAscii(f.install_root, 300).c_str(), kInstalledDir);
  return kExitOk;
}

int Main(int argc, char** argv) {
  Flags f;
  if (auto rc = ParseFlags(argc, argv, &f)) return *rc;
  if (!f.kernel_cmdline.empty()) {
    // The initramfs's unit knows no URL but the kernel command line's; the
    // same values then go to agent.env for later boots (InstallBundle).
    if (!f.urls.empty()) return Usage("--kernel-cmdline and --url exclude each other");
    auto urls = ReadKernelCmdlineUrls(f.kernel_cmdline);
    if (!urls.ok()) return Usage("--kernel-cmdline: " + urls.status().message());
    f.urls = std::move(urls).value();
  }
  auto parsed_urls = ParseApplianceUrls(f.urls);
  if (!parsed_urls.ok()) return Usage(parsed_urls.status().message());
  if (f.ca.empty()) return Usage("--ca is required (the appliance CA; TLS is never unverified)");
  if (auto rc = CheckSteps(f.steps, &f.options)) return *rc;
  if (!f.install_root.empty()) {
    // What the install will carry is checked before anything is done.
    auto args = InstalledAgentArgs(f.options, f.tcti, f.install_root, true);
    if (!args.ok()) return Usage("--install-root: " + args.status().message());
  }
  RunFacts facts;
  const int rc = RunAgent(f, *parsed_urls, &facts);
  if (rc != kExitOk || f.install_root.empty()) return rc;
  return InstallBundle(f, *parsed_urls, facts);
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return Main(argc, argv);
  } catch (const std::exception& e) {
    // A bug or resource exhaustion, not an outcome the protocol defines.
    std::fprintf(stderr, "rackgate-agent: internal error: %s\n", e.what());
    return kExitInternal;
  }
}
