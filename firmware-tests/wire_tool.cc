// rackgate-wire-tool: the lab's test client for the attestation protocol's
// bodies (docs/protocol.md), for tests that drive rackgated with tpm2-tools.
// Bodies are built with wire/protocol.h's encoders, so that the lab sends
// exactly what the agent sends.
//
//   rackgate-wire-tool challenge --ek-public EK.pub --ak-public AK.pub [--ek-cert EK.der]
//   rackgate-wire-tool evidence --session ID --secret FILE --quote Q.msg --signature Q.sig
//                      --pcr-values Q.pcrs --selection sha256:0,1 [--event-log FILE]
//   rackgate-wire-tool get FILE KEY [--b64-out OUT]   print a field (or decode base64 to OUT)
//   rackgate-wire-tool set FILE KEY JSON_VALUE        rewrite one field (for refusal tests)
//
// Exit 0 on success, 1 when a field is absent or a file unusable, 2 on a
// usage error.
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "attest/tpm.h"
#include "wire/codec.h"
#include "wire/protocol.h"

namespace {

using rackgate::attest::Bytes;
using nlohmann::json;

constexpr char kUsage[] =
    "usage: rackgate-wire-tool challenge --ek-public EK.pub --ak-public AK.pub [--ek-cert EK.der]\n"
    "       rackgate-wire-tool evidence --session ID --secret FILE --quote Q.msg --signature Q.sig\n"
    "                          --pcr-values Q.pcrs --selection sha256:0,1 [--event-log FILE]\n"
    "       rackgate-wire-tool get FILE KEY [--b64-out OUT]\n"
    "       rackgate-wire-tool set FILE KEY JSON_VALUE\n";

// A test tool: anything unusable ends the process with a message.
[[noreturn]] void Fail(const std::string& why, int code = 1) {
  std::cerr << "rackgate-wire-tool: " << why << "\n";
  std::exit(code);
}

[[noreturn]] void Usage(const std::string& why) {
  std::cerr << "rackgate-wire-tool: " << why << "\n" << kUsage;
  std::exit(2);
}

std::string ReadText(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream text;
  if (!in || !(text << in.rdbuf())) {
    // An empty file reads as a failed copy: tell it apart from a missing one.
    if (in && in.peek() == std::ifstream::traits_type::eof()) return "";
    Fail("cannot read " + path);
  }
  return text.str();
}

Bytes ReadBytes(const std::string& path) {
  const std::string s = ReadText(path);
  return Bytes(s.begin(), s.end());
}

void WriteText(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << text;
  if (!out.flush()) Fail("cannot write " + path);
}

// --name VALUE and --name=VALUE, each of `allowed` at most once; the rest
// are positional arguments.
struct Args {
  std::map<std::string, std::string> options;
  std::vector<std::string> positional;

  std::optional<std::string> Get(const std::string& name) const {
    auto it = options.find(name);
    if (it == options.end()) return std::nullopt;
    return it->second;
  }
  std::string Need(const std::string& name) const {
    auto v = Get(name);
    if (!v) Usage("the following argument is required: " + name);
    return *v;
  }
};

Args ParseArgs(int argc, char** argv, int first, const std::set<std::string>& allowed) {
  Args a;
  for (int i = first; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg.size() > 2 && arg.compare(0, 2, "--") == 0) {
      std::string name = arg, value;
      const size_t eq = arg.find('=');
      if (eq != std::string::npos) {
        name = arg.substr(0, eq);
        value = arg.substr(eq + 1);
      } else {
        if (i + 1 >= argc) Usage("argument " + arg + ": expected one argument");
        value = argv[++i];
      }
      if (!allowed.count(name)) Usage("unrecognized argument: " + name);
      a.options[name] = value;
    } else {
      a.positional.push_back(arg);
    }
  }
  return a;
}

// A `tpm2_quote -F values` file: the digests in selection order, PCRs of a
// bank in ascending order.
rackgate::attest::PcrValues ReadPcrValues(const std::string& path, const std::string& selection_text) {
  auto selection = rackgate::attest::ParsePcrSelectionList(selection_text);
  if (!selection.ok()) Fail(selection.status().message());
  const Bytes data = ReadBytes(path);
  size_t needed = 0;
  for (const auto& bank : *selection) {
    const std::set<uint32_t> pcrs(bank.pcrs.begin(), bank.pcrs.end());
    needed += rackgate::attest::DigestSize(bank.hash_alg) * pcrs.size();
  }
  if (needed != data.size()) {
    Fail(path + " has " + std::to_string(data.size()) + " bytes, selection needs " + std::to_string(needed));
  }
  rackgate::attest::PcrValues out;
  auto next = data.begin();
  for (const auto& bank : *selection) {
    const size_t size = rackgate::attest::DigestSize(bank.hash_alg);
    for (uint32_t pcr : std::set<uint32_t>(bank.pcrs.begin(), bank.pcrs.end())) {
      out[bank.hash_alg][pcr] = Bytes(next, next + static_cast<long>(size));
      next += static_cast<long>(size);
    }
  }
  return out;
}

int Challenge(int argc, char** argv) {
  Args a = ParseArgs(argc, argv, 2, {"--ek-public", "--ak-public", "--ek-cert"});
  if (!a.positional.empty()) Usage("unrecognized arguments");
  rackgate::wire::ChallengeRequest r;
  r.ek_public = ReadBytes(a.Need("--ek-public"));
  r.ak_public = ReadBytes(a.Need("--ak-public"));
  if (auto cert = a.Get("--ek-cert")) r.ek_certificate = ReadBytes(*cert);
  std::cout << rackgate::wire::EncodeChallengeRequest(r) << "\n";
  return 0;
}

int Evidence(int argc, char** argv) {
  Args a = ParseArgs(argc, argv, 2,
                     {"--session", "--secret", "--quote", "--signature", "--pcr-values", "--selection", "--event-log"});
  if (!a.positional.empty()) Usage("unrecognized arguments");
  rackgate::wire::EvidenceRequest e;
  e.session = a.Need("--session");
  e.secret = ReadBytes(a.Need("--secret"));
  e.quote = ReadBytes(a.Need("--quote"));
  e.signature = ReadBytes(a.Need("--signature"));
  e.pcrs = ReadPcrValues(a.Need("--pcr-values"), a.Need("--selection"));
  if (auto log = a.Get("--event-log")) e.event_log = ReadBytes(*log);
  std::cout << rackgate::wire::EncodeEvidenceRequest(e) << "\n";
  return 0;
}

json ReadJson(const std::string& path) {
  json doc = json::parse(ReadText(path), nullptr, /*allow_exceptions=*/false);
  if (doc.is_discarded()) Fail(path + " is not JSON");
  return doc;
}

int Get(int argc, char** argv) {
  Args a = ParseArgs(argc, argv, 2, {"--b64-out"});
  if (a.positional.size() != 2) Usage("get needs FILE KEY");
  const json doc = ReadJson(a.positional[0]);
  const json* v = &doc;
  std::stringstream path(a.positional[1]);
  for (std::string key; std::getline(path, key, '.');) {
    if (!v->is_object() || !v->contains(key)) Fail("no field '" + a.positional[1] + "' in " + a.positional[0]);
    v = &v->at(key);
  }
  if (auto out = a.Get("--b64-out")) {
    auto bytes = v->is_string() ? rackgate::wire::Base64Decode(v->get_ref<const std::string&>(), 64 << 20)
                                : std::nullopt;
    if (!bytes) Fail("field '" + a.positional[1] + "' is not base64");
    WriteText(*out, std::string(bytes->begin(), bytes->end()));
  } else {
    std::cout << (v->is_string() ? v->get<std::string>() : v->dump()) << "\n";
  }
  return 0;
}

// Rewrites one top-level field with any JSON value, including ones the
// encoders would never produce: that is what refusal tests need.
int Set(int argc, char** argv) {
  Args a = ParseArgs(argc, argv, 2, {});
  if (a.positional.size() != 3) Usage("set needs FILE KEY JSON_VALUE");
  json doc = ReadJson(a.positional[0]);
  if (!doc.is_object()) Fail(a.positional[0] + " is not a JSON object");
  json value = json::parse(a.positional[2], nullptr, /*allow_exceptions=*/false);
  if (value.is_discarded()) Fail("not a JSON value: " + a.positional[2]);
  doc[a.positional[1]] = std::move(value);
  WriteText(a.positional[0], doc.dump());
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) Usage("a subcommand is required");
  const std::string cmd = argv[1];
  if (cmd == "challenge") return Challenge(argc, argv);
  if (cmd == "evidence") return Evidence(argc, argv);
  if (cmd == "get") return Get(argc, argv);
  if (cmd == "set") return Set(argc, argv);
  if (cmd == "-h" || cmd == "--help") {
    std::cout << kUsage;
    return 0;
  }
  Usage("unknown subcommand '" + cmd + "'");
}
