#include "daemon/ctl/pointer_command.h"

#include <unistd.h>

#include <cstdio>
#include <nlohmann/json.hpp>

#include "wire/codec.h"
#include "daemon/ctl/args.h"
#include "base/files.h"
#include "daemon/ctl/offline.h"

namespace rackgate::ctl {

namespace {

using nlohmann::json;

constexpr char kHelp[] =
    "Usage: rackgatectl pointer --pool POOL [--url https://HOST:PORT] [--ca CA.crt]\n"
    "         [--state-dir DIR] [--token-file FILE | --no-token]\n"
    "\n"
    "Prints the pointer Ignition config (spec 3.3.0) for machines of POOL: Ignition\n"
    "merges the pool's public config from URL/config/POOL, sends the provisioning\n"
    "token as `Authorization: Bearer` (from FILE, as `rackgatectl token rotate\n"
    "--out FILE` writes it), and trusts the appliance CA only.\n"
    "  --url        the appliance as machines reach it (default https://$(hostname -f):22623)\n"
    "  --ca         the appliance CA (default DIR/ca/ca.crt)\n"
    "  --state-dir  the appliance's state directory (default /var/lib/rackgate)\n"
    "  --no-token   for a pool created with --token-required no\n"
    "Exit status: 0 printed; 2 unusable input (no CA, no token, bad URL).\n";

std::string Fqdn() {
  char name[256] = {};
  if (::gethostname(name, sizeof name - 1) != 0 || name[0] == '\0') return "localhost";
  return name;
}

}  // namespace

std::string PointerConfig(const PointerOptions& o) {
  json merge = {{"source", o.url + "/config/" + o.pool}};
  if (o.token) merge["httpHeaders"] = json::array({{{"name", "Authorization"}, {"value", "Bearer " + *o.token}}});
  const std::string ca = "data:;base64," + wire::Base64Encode(std::span(
                                               reinterpret_cast<const uint8_t*>(o.ca_pem.data()), o.ca_pem.size()));
  json pointer = {{"ignition",
                   {{"version", "3.3.0"},
                    {"config", {{"merge", json::array({merge})}}},
                    {"security", {{"tls", {{"certificateAuthorities", json::array({{{"source", ca}}})}}}}}}}};
  return pointer.dump(2) + "\n";
}

int RunPointer(int argc, char** argv, int first) {
  auto args = Args::Parse(argc, argv, first, {{"pool", "url", "ca", "state-dir", "token-file"}, {"no-token"}});
  if (!args.ok()) return Usage(kHelp, args.status());
  if (args->Has("help")) return std::fputs(kHelp, stdout), kExitOk;
  if (Status s = args->Require({"pool"}); !s.ok()) return Usage(kHelp, s);
  if (args->Has("token-file") == args->Has("no-token")) {
    return Usage(kHelp, Status::InvalidArgument("usage", "give --token-file FILE, or --no-token for an open pool"));
  }
  PointerOptions o;
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
