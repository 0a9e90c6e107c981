#include "ctl/pointer_command.h"

#include <unistd.h>

#include <cctype>
#include <cstdio>
#include <optional>
#include <string>
#include <nlohmann/json.hpp>

#include "wire/data_url.h"
#include "ctl/args.h"
#include "base/files.h"
#include "base/hex.h"
#include "ctl/offline.h"

namespace rackgate::ctl {

namespace {

using nlohmann::json;

constexpr char kHelp[] =
    "Usage: rackgatectl pointer --pool POOL [--url https://HOST:PORT] [--ca CA.crt]\n"
    "         [--state-dir DIR] [--token-file FILE | --no-token] [--spec 3.0|3.1|3.2|3.3|3.4]\n"
    "         [--json]\n"
    "\n"
    "Prints the pointer Ignition config for machines of POOL: Ignition merges the\n"
    "pool's public config from URL/config/POOL with the provisioning token (from\n"
    "FILE, as `rackgatectl token rotate --out FILE` writes it), and trusts the\n"
    "appliance CA only. Spec 3.1 and later send the token as an `Authorization:\n"
    "Bearer` header; spec 3.0 has no httpHeaders, so its URL carries ?token=TOKEN\n"
    "(which the node's Ignition log shows: prefer 3.1+ where the node allows).\n"
    "The output is JSON already; --json is accepted and prints the same.\n"
    "\n"
    "Options:\n"
    "  --pool POOL       the pool\n"
    "  --url URL         the appliance as machines reach it (default https://$(hostname -f):22623)\n"
    "  --ca FILE         the appliance CA (default DIR/ca/ca.crt)\n"
    "  --state-dir DIR   the appliance's state directory (default /var/lib/rackgate)\n"
    "  --token-file FILE the pool's provisioning token\n"
    "  --no-token        for a pool created with --token-required no\n"
    "  --spec VERSION    the pointer's Ignition spec (default 3.3; 3.4 needs Ignition\n"
    "                    2.15 or later: Debian 12's 2.14 reads up to 3.3)\n"
    "  --json            print JSON (the same output)\n"
    "\n"
    "Exit status: 0 printed; 2 unusable input (no CA, no token, bad URL or spec).\n";

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

}  // namespace

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
  auto args =
      Args::Parse(argc, argv, first, {{"pool", "url", "ca", "state-dir", "token-file", "spec"}, {"no-token", "json"}, 0});
  if (!args.ok()) return Usage(kHelp, args.status());
  if (args->Has("help")) return std::fputs(kHelp, stdout), kExitOk;
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
  o.url = args->Get("url").value_or("https://" + Fqdn() + ":22623");
  while (!o.url.empty() && o.url.back() == '/') o.url.pop_back();
  if (o.url.rfind("https://", 0) != 0) {
    return Usage(kHelp, Status::InvalidArgument("usage", "--url must start with https://"));
  }
  const std::string ca_path =
      args->Get("ca").value_or(args->Get("state-dir").value_or("/var/lib/rackgate") + "/ca/ca.crt");
  auto ca = ReadFile(ca_path, 64 * 1024);
  if (!ca.ok()) return Fail("pointer", ca.status(), kExitUnusable);
  o.ca_pem.assign(ca->begin(), ca->end());
  if (o.ca_pem.find("-----BEGIN CERTIFICATE-----") == std::string::npos) {
    return Fail("pointer", Status::InvalidArgument("ca_invalid", ca_path + " holds no PEM certificate"),
                kExitUnusable);
  }
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
