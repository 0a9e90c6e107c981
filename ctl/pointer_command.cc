#include "ctl/pointer_command.h"

#include <unistd.h>

#include <cctype>
#include <cstdio>
#include <optional>
#include <string>
#include <string_view>
#include <vector>
#include <nlohmann/json.hpp>

#include "wire/agent_bundle_paths.h"
#include "wire/appliance_urls.h"
#include "wire/data_url.h"
#include "base/text.h"
#include "ctl/args.h"
#include "ctl/initramfs_cpio.h"
#include "base/files.h"
#include "base/hex.h"
#include "base/sha256.h"
#include "ctl/offline.h"

namespace rackgate::ctl {

namespace {

using nlohmann::json;

constexpr char kHelp[] =
    "Usage: rackgatectl pointer --pool POOL [--url https://HOST:PORT] [--ca CA.crt]\n"
    "         [--state-dir DIR] [--token-file FILE | --no-token] [--spec 3.0|3.1|3.2|3.3|3.4]\n"
    "         [--json]\n"
    "       rackgatectl pointer --kernel-args [--url https://HOST:PORT]... [--ca CA.crt]\n"
    "         [--state-dir DIR] [--bundle FILE] [--initramfs-ca OUT] [--json]\n"
    "\n"
    "Prints the pointer Ignition config for machines of POOL: Ignition merges the\n"
    "pool's public config from URL/config/POOL with the provisioning token (from\n"
    "FILE, as `rackgatectl token rotate --out FILE` writes it), and trusts the\n"
    "appliance CA only. Spec 3.1 and later send the token as an `Authorization:\n"
    "Bearer` header; spec 3.0 has no httpHeaders, so its URL carries ?token=TOKEN\n"
    "(which the node's Ignition log shows: prefer 3.1+ where the node allows).\n"
    "The output is JSON already; --json is accepted and prints the same.\n"
    "\n"
    "With --kernel-args: what an immutable node (no dpkg) needs to attest from its\n"
    "initramfs with the agent bundle the appliance serves (docs/nodes.md): the\n"
    "kernel arguments (rackgate.url=URL[,URL...]), the bundle's URL and the\n"
    "SHA-256 of FILE (what the appliance serves when FILE is its config's\n"
    "agent_bundle), and, with --initramfs-ca, the appliance CA written to OUT as\n"
    "an initramfs part (a gzip-compressed newc cpio holding /etc/rackgate/ca.pem)\n"
    "to append after the bundle. No pool and no token: the agent attests, and\n"
    "its pool is its enrollment's.\n"
    "\n"
    "Options:\n"
    "  --pool POOL       the pool\n"
    "  --url URL         the appliance as machines reach it (default https://$(hostname -f):22623);\n"
    "                    with --kernel-args repeatable, for several appliances\n"
    "  --ca FILE         the appliance CA (default DIR/ca/ca.crt, and DIR/ca/next.crt\n"
    "                    after it during a CA rotation: the bundle)\n"
    "  --state-dir DIR   the appliance's state directory (default /var/lib/rackgate)\n"
    "  --token-file FILE the pool's provisioning token\n"
    "  --no-token        for a pool created with --token-required no\n"
    "  --spec VERSION    the pointer's Ignition spec (default 3.3; 3.4 needs Ignition\n"
    "                    2.15 or later: Debian 12's 2.14 reads up to 3.3)\n"
    "  --kernel-args     print the kernel arguments and initramfs parts instead\n"
    "  --bundle FILE     the agent bundle (default /usr/lib/rackgate/agent-initramfs.cpio.zst)\n"
    "  --initramfs-ca OUT  write the appliance CA's initramfs part to OUT\n"
    "  --json            print JSON (the pointer: the same output; --kernel-args:\n"
    "                    {\"kernel_args\", \"agent_initramfs\", \"ca_initramfs\"})\n"
    "\n"
    "Exit status: 0 printed; 2 unusable input (no CA, a --ca file holding more than\n"
    "certificates, no token, no bundle, a URL the agent would refuse (anything but\n"
    "https://HOST[:PORT] with a port in 1-65535), bad spec, OUT not writable).\n";

// The spec versions a pointer may have, as --spec names them.
std::optional<std::string> SpecVersion(const std::string& spec) {
  for (const char* v : {"3.0", "3.1", "3.2", "3.3", "3.4"}) {
    if (spec == v || spec == std::string(v) + ".0") return std::string(v) + ".0";
  }
  return std::nullopt;
}

std::string Fqdn() {
  char name[256] = {};
  if (::gethostname(name, sizeof name - 1) != 0 || name[0] == '\0') return "localhost";
  return name;
}

// The certificates of one CA file; exit code on failure.
std::optional<int> ReadCaFile(const std::string& ca_path, std::string* out) {
  auto ca = ReadFile(ca_path, 64 * 1024);
  if (!ca.ok()) return Fail("pointer", ca.status(), kExitUnusable);
  auto certs = CaCertificatesOnly(std::string(ca->begin(), ca->end()), ca_path);
  if (!certs.ok()) return Fail("pointer", certs.status(), kExitUnusable);
  *out += std::move(certs).value();
  return std::nullopt;
}

// The appliance CA from --ca, or DIR/ca/ca.crt followed by DIR/ca/next.crt
// when there is one: during a rotation's overlap the bundle, so that a node
// installed now trusts the appliances before and after their switch
// (docs/operations.md, "Rotating the appliance CA"). Exit code on failure.
std::optional<int> ReadCa(const Args& args, std::string* out) {
  out->clear();
  if (auto given = args.Get("ca")) return ReadCaFile(*given, out);
  const std::string dir = args.Get("state-dir").value_or("/var/lib/rackgate") + "/ca/";
  if (auto rc = ReadCaFile(dir + "ca.crt", out)) return rc;
  if (::access((dir + "next.crt").c_str(), F_OK) == 0) return ReadCaFile(dir + "next.crt", out);
  return std::nullopt;
}

std::string TrimUrl(std::string url) {
  while (!url.empty() && url.back() == '/') url.pop_back();
  return url;
}

// --kernel-args: reads the bundle, writes the CA's part, prints.
int RunKernelArgs(const Args& args) {
  for (const char* flag : {"pool", "token-file", "no-token", "spec"}) {
    if (args.Has(flag)) {
      return Usage(kHelp, Status::InvalidArgument("usage", std::string("--kernel-args takes no --") + flag +
                                                               ": the initramfs agent attests, and its pool is "
                                                               "its enrollment's"));
    }
  }
  KernelArgsOptions o;
  std::vector<std::string> urls = args.GetAll("url");
  if (urls.empty()) urls.push_back("https://" + Fqdn() + ":22623");
  for (const std::string& url : urls) {
    // What the agent will read from rackgate.url=, parsed by its own parser.
    auto agent_url = KernelArgsUrl(url);
    if (!agent_url.ok()) return Fail("pointer", agent_url.status(), kExitUnusable);
    o.urls.push_back(std::move(agent_url).value());
  }
  std::string ca_pem;
  if (auto rc = ReadCa(args, &ca_pem)) return *rc;
  o.bundle_file = args.Get("bundle").value_or(wire::kDefaultAgentBundlePath);
  auto bundle = ReadFile(o.bundle_file, wire::kMaxAgentBundleBytes);
  if (!bundle.ok()) {
    return Fail("pointer", Status::InvalidArgument(bundle.status().reason(), bundle.status().message() +
                                                       " (give --bundle FILE: the appliance config's agent_bundle)"),
                kExitUnusable);
  }
  o.bundle_sha256 = sha256::Hex(*bundle);
  o.bundle_bytes = bundle->size();
  if (auto out = args.Get("initramfs-ca")) {
    const std::vector<uint8_t> part = Gzip(CaInitramfsCpio(ca_pem));
    // The CA is public; WriteFileAtomic's 0600 is the reader's to widen.
    if (Status s = WriteFileAtomic(*out, part); !s.ok()) return Fail("pointer", s, kExitUnusable);
    o.ca_initramfs_file = *out;
    o.ca_initramfs_sha256 = sha256::Hex(part);
  }
  std::fputs((args.Has("json") ? KernelArgsJson(o) : KernelArgsText(o)).c_str(), stdout);
  return kExitOk;
}

}  // namespace

Result<std::string> KernelArgsUrl(const std::string& url) {
  // The agent's own parser (wire/appliance_urls.h): one URL, nothing but
  // https://HOST[:PORT] (no user, path, query or fragment; a port in 1-65535).
  auto parsed = wire::ParseApplianceUrls({url});
  if (!parsed.ok()) {
    return Status::InvalidArgument("url_invalid", "the agent would refuse this rackgate.url at boot: " +
                                                      parsed.status().message());
  }
  if (parsed->size() != 1) {
    return Status::InvalidArgument("url_invalid", "--url '" + url +
                                                      "' is several URLs: give each appliance its own --url "
                                                      "https://HOST[:PORT]");
  }
  return parsed->front().url;
}

Result<std::string> CaCertificatesOnly(const std::string& pem, const std::string& path) {
  static constexpr std::string_view kBegin = "-----BEGIN ";
  static constexpr std::string_view kCertBegin = "-----BEGIN CERTIFICATE-----";
  static constexpr std::string_view kCertEnd = "-----END CERTIFICATE-----";
  std::string certs;
  for (size_t at = pem.find(kBegin); at != std::string::npos; at = pem.find(kBegin, at)) {
    if (pem.compare(at, kCertBegin.size(), kCertBegin) != 0) {
      const size_t eol = pem.find_first_of("\r\n", at);
      return Status::InvalidArgument(
          "ca_invalid", path + " holds " + text::PrintableAscii(pem.substr(at, eol == std::string::npos ? 64 : eol - at), 64) +
                            " beside the CA certificate; only certificates are public: give --ca a file with the "
                            "certificate alone (openssl x509 -in " + path + " -out ca.crt)");
    }
    const size_t end = pem.find(kCertEnd, at);
    if (end == std::string::npos) {
      return Status::InvalidArgument("ca_invalid", path + " has a certificate without its END line");
    }
    certs.append(pem, at, end + kCertEnd.size() - at);
    certs += "\n";
    at = end + kCertEnd.size();
  }
  if (certs.empty()) return Status::InvalidArgument("ca_invalid", path + " holds no PEM certificate");
  return certs;
}

std::string KernelArgs(const KernelArgsOptions& o) {
  std::string args = "rackgate.url=";
  for (size_t i = 0; i < o.urls.size(); ++i) args += (i ? "," : "") + o.urls[i];
  // The agent's initramfs unit runs before Ignition's first stage, which is
  // what would otherwise ask dracut for the network (Ignition's neednet):
  // the network must be up for it from the start (docs/nodes.md).
  return args + " rd.neednet=1";
}

std::string KernelArgsJson(const KernelArgsOptions& o) {
  const std::string base = o.urls.empty() ? "" : o.urls.front();
  json doc = {{"kernel_args", KernelArgs(o)},
              {"agent_initramfs",
               {{"url", base + wire::kAgentInitramfsPath},
                {"sha256_url", base + wire::kAgentInitramfsDigestPath},
                {"sha256", o.bundle_sha256},
                {"bytes", o.bundle_bytes},
                {"file", o.bundle_file}}},
              {"ca_initramfs", nullptr}};
  if (!o.ca_initramfs_file.empty()) {
    doc["ca_initramfs"] = {{"file", o.ca_initramfs_file}, {"sha256", o.ca_initramfs_sha256},
                           {"path", kInitramfsCaPath}};
  }
  return doc.dump(2) + "\n";
}

std::string KernelArgsText(const KernelArgsOptions& o) {
  const std::string base = o.urls.empty() ? "" : o.urls.front();
  std::string t = "# Kernel command line: add (rd.neednet=1: the network up in the initramfs for the agent;\n"
                  "# keep the node's own ip= arguments, or add ip=dhcp)\n" +
                  KernelArgs(o) + "\n";
  t += "# Initramfs: append to the vendor initramfs, in this order:\n";
  t += "#  1. the agent bundle, " + base + wire::kAgentInitramfsPath + "\n";
  t += "#     sha256 " + o.bundle_sha256 + " (" + std::to_string(o.bundle_bytes) + " bytes, " + o.bundle_file + ";\n";
  t += "#     the appliance serves it at " + base + wire::kAgentInitramfsDigestPath + ")\n";
  if (o.ca_initramfs_file.empty()) {
    t += "#  2. the appliance CA as " + std::string(kInitramfsCaPath) + ": write it with --initramfs-ca OUT\n";
  } else {
    t += "#  2. the appliance CA as " + std::string(kInitramfsCaPath) + ", " + o.ca_initramfs_file + "\n";
    t += "#     sha256 " + o.ca_initramfs_sha256 + "\n";
  }
  return t;
}

std::string PointerConfig(const PointerOptions& o) {
  const bool url_token = o.spec == "3.0.0";
  std::string source = o.url + "/config/" + o.pool;
  if (o.token && url_token) source += "?token=" + hex::PercentEncode(*o.token);
  json merge = {{"source", source}};
  if (o.token && !url_token) {
    merge["httpHeaders"] = json::array({{{"name", "Authorization"}, {"value", "Bearer " + *o.token}}});
  }
  const std::string ca = wire::EncodeDataUrl({.media_type = "", .base64 = true, .data = o.ca_pem});
  json pointer = {{"ignition",
                   {{"version", o.spec},
                    {"config", {{"merge", json::array({merge})}}},
                    {"security", {{"tls", {{"certificateAuthorities", json::array({{{"source", ca}}})}}}}}}}};
  return pointer.dump(2) + "\n";
}

int RunPointer(int argc, char** argv, int first) {
  auto args = Args::Parse(argc, argv, first,
                          {{"pool", "url", "ca", "state-dir", "token-file", "spec", "bundle", "initramfs-ca"},
                           {"no-token", "json", "kernel-args"},
                           0});
  if (!args.ok()) return Usage(kHelp, args.status());
  if (args->Has("help")) return std::fputs(kHelp, stdout), kExitOk;
  if (args->Has("kernel-args")) return RunKernelArgs(*args);
  for (const char* flag : {"bundle", "initramfs-ca"}) {
    if (args->Has(flag)) {
      return Usage(kHelp, Status::InvalidArgument("usage", std::string("--") + flag + " belongs to --kernel-args"));
    }
  }
  if (Status s = args->Require({"pool"}); !s.ok()) return Usage(kHelp, s);
  if (args->Has("token-file") == args->Has("no-token")) {
    return Usage(kHelp, Status::InvalidArgument("usage", "give --token-file FILE, or --no-token for an open pool"));
  }
  PointerOptions o;
  if (auto spec = args->Get("spec")) {
    auto version = SpecVersion(*spec);
    if (!version) {
      return Usage(kHelp, Status::InvalidArgument("usage", "--spec is 3.0, 3.1, 3.2, 3.3 or 3.4 (default 3.3); 3.0 "
                                                           "carries the token in the URL"));
    }
    o.spec = *version;
  }
  o.pool = *args->Get("pool");
  o.url = TrimUrl(args->Get("url").value_or("https://" + Fqdn() + ":22623"));
  if (o.url.rfind("https://", 0) != 0) {
    return Usage(kHelp, Status::InvalidArgument("usage", "--url must start with https://"));
  }
  if (auto rc = ReadCa(*args, &o.ca_pem)) return *rc;
  if (auto f = args->Get("token-file")) {
    auto t = ReadFile(*f, 4096);
    if (!t.ok()) return Fail("pointer", t.status(), kExitUnusable);
    std::string token(t->begin(), t->end());
    while (!token.empty() && (token.back() == '\n' || token.back() == '\r' || token.back() == ' ')) token.pop_back();
    if (token.empty() || token.find_first_of(" \t\r\n") != std::string::npos) {
      return Fail("pointer", Status::InvalidArgument("token_invalid", *f + " does not hold one token"),
                  kExitUnusable);
    }
    o.token = token;
  }
  std::fputs(PointerConfig(o).c_str(), stdout);
  return kExitOk;
}

}  // namespace rackgate::ctl
