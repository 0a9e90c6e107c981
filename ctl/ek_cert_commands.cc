// rackgatectl ek-cert urls and ek-cert import.
#include "ctl/ek_cert_commands.h"

#include <cstdio>
#include <cstring>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "base/files.h"
#include "ctl/admin_client.h"
#include "ctl/admin_util.h"
#include "ctl/json_util.h"
#include "ctl/args.h"
#include "ctl/ek_cert_urls.h"
#include "ctl/offline.h"
#include "wire/admin_ek_certs.h"
#include "wire/refusal.h"
#include "wire/codec.h"
#include "wire/protocol.h"

namespace rackgate::ctl {

namespace {

using nlohmann::json;

// An EK public area, a public key or a certificate answer: a few KiB.
constexpr size_t kMaxEkFile = 64 * 1024;

constexpr char kEkCertHelp[] =
    "Usage: rackgatectl ek-cert COMMAND ...\n"
    "\n"
    "EK certificates a TPM does not hold in NV (Intel PTT before the\n"
    "certificate was written to NV, AMD fTPM): the vendor publishes them\n"
    "online; the appliance needs no internet (docs/operations.md). Commands:\n"
    "  urls             the vendor URL of each EK's certificate\n"
    "  import           put fetched certificates on record, verified\n"
    "Run `rackgatectl ek-cert COMMAND --help` for its options.\n"
    "\n"
    "Options:\n"
    "  --help           this text\n"
    "\n"
    "Exit status: 0 done; 1 refused (reason code on stderr); 2 unusable input.\n";

constexpr char kUrlsHelp[] =
    "Usage: rackgatectl ek-cert urls [EK-FILE...] [--vendor intel|amd] [--json]\n"
    "\n"
    "Prints the URL each EK's certificate is fetched from, as Intel's EK\n"
    "certificate service (ekop.intel.com, a JSON answer) and AMD's fTPM PKI\n"
    "(ftpm.amd.com, DER) derive it from the EK public key. EK-FILE is a\n"
    "TPM2B_PUBLIC (`tpm2_createek -f tss -u EK-FILE`) or a PEM or DER public\n"
    "key (`tpm2_createek -f pem`). With no file, asks rackgated for the EKs\n"
    "without a certificate: machines enrolled by EK public with none on\n"
    "record, and unknown EKs of the last day that sent none. Nothing is\n"
    "fetched: run curl (or a browser) where there is internet, then\n"
    "`rackgatectl ek-cert import` the answers. A TPM2B_PUBLIC does not say\n"
    "whose firmware TPM it is: both URLs are printed unless --vendor says.\n"
    "\n"
    "Options:\n"
    "  --vendor intel|amd   print only that vendor's URL\n"
    "  --json               {\"eks\": [{file|hostname, ek_hash, intel_url, amd_url}]}\n"
    "\n"
    "Exit status: 0 printed; 2 an unreadable EK file or rackgated unreachable.\n";

constexpr char kImportHelp[] =
    "Usage: rackgatectl ek-cert import FILE... [--json]\n"
    "\n"
    "Puts EK certificates on record for the machines enrolled with their EK\n"
    "(`enroll --ek-public`), so that a machine whose agent sends only its EK\n"
    "public attests with it. FILE is DER, PEM, the NV form (tpm2_nvread, with\n"
    "its header or padding) or Intel's JSON answer ({\"pubhash\": ...,\n"
    "\"certificate\": \"<base64url>\"}). rackgated verifies each against its\n"
    "EK trust anchors (ek_roots, ek_anchor_relaxations) and finds the machine\n"
    "by the certificate's key; audited. Importing again is a no-op. A\n"
    "certificate whose EK no machine has is refused\n"
    "(ek_cert_machine_unknown): enroll it with `enroll --ek-cert`. One line\n"
    "per file; refusals also on stderr.\n"
    "\n"
    "Options:\n"
    "  --json               {\"results\": [{file, ok, outcome|reason, ...}]}\n"
    "\n"
    "Exit status: 0 every file on record; 1 a file refused; 2 an unreadable\n"
    "file or rackgated unreachable.\n";

struct UrlRow {
  std::string file;
  std::string hostname;
  std::string ek_hash;
  std::string intel;
  std::string amd;
  std::string note;  // why there is no URL
};

UrlRow RowFor(const EkKey& key, bool intel, bool amd) {
  UrlRow row;
  row.ek_hash = key.ek_hash;
  if (intel) {
    auto url = IntelEkCertUrl(key);
    if (url.ok()) {
      row.intel = *url;
    } else {
      row.note = url.status().message();
    }
  }
  if (amd) row.amd = AmdEkCertUrl(key);
  return row;
}

int RunUrls(const std::string& socket, int argc, char** argv, int first) {
  auto args = Args::Parse(argc, argv, first, {{"vendor"}, {"json"}, kAnyPositional});
  if (!args.ok()) return UsageError(kUrlsHelp, args.status().message());
  if (args->Has("help")) return PrintHelp(kUrlsHelp);
  const std::string vendor = args->Get("vendor").value_or("");
  if (!vendor.empty() && vendor != "intel" && vendor != "amd") {
    return UsageError(kUrlsHelp, "--vendor takes intel or amd, got '" + vendor + "'");
  }
  const bool intel = vendor.empty() || vendor == "intel";
  const bool amd = vendor.empty() || vendor == "amd";
  std::vector<UrlRow> rows;
  int code = kExitOk;
  if (!args->positional().empty()) {
    for (const auto& path : args->positional()) {
      auto bytes = ReadFile(path, kMaxEkFile);
      if (!bytes.ok()) return Fail("ek-cert urls", bytes.status(), kExitUnusable);
      auto key = EkKeyFromFile(*bytes);
      if (!key.ok()) return Fail("ek-cert urls", key.status().Annotate(path), kExitUnusable);
      UrlRow row = RowFor(*key, intel, amd);
      row.file = path;
      rows.push_back(std::move(row));
    }
  } else {
    auto r = Send(socket, "GET", "/v1/admin/ek-certs/missing", &code);
    if (!r.ok()) return code;
    auto list = DecodeAnswer(*r, wire::DecodeEkCertMissingList, &code);
    if (!list.ok()) return code;
    for (const auto& m : list->missing) {
      UrlRow row;
      auto pub = wire::Base64Decode(m.ek_public_base64, wire::kMaxTpm2bPublic);
      std::optional<EkKey> key;
      if (pub && !pub->empty()) {
        if (auto k = EkKeyFromFile(*pub); k.ok()) key = std::move(k).value();
      }
      if (key) {
        row = RowFor(*key, intel, amd);
      } else {
        row.note = "the appliance has no EK public area of it; give its TPM2B_PUBLIC as a file";
      }
      row.hostname = m.hostname.empty() ? "(unknown EK from " + m.address + ")" : m.hostname;
      row.ek_hash = m.ek_hash;
      rows.push_back(std::move(row));
    }
    if (!args->Has("json") && rows.empty()) std::printf("every machine has an EK certificate on record\n");
  }
  if (args->Has("json")) {
    json eks = json::array();
    for (const auto& r : rows) {
      json j{{"ek_hash", r.ek_hash}};  // admin-path: rackgatectl's own --json output
      if (!r.file.empty()) j["file"] = r.file;  // admin-path: rackgatectl's own --json output
      if (!r.hostname.empty()) j["hostname"] = r.hostname;  // admin-path: rackgatectl's own --json output
      if (!r.intel.empty()) j["intel_url"] = r.intel;  // admin-path: rackgatectl's own --json output
      if (!r.amd.empty()) j["amd_url"] = r.amd;  // admin-path: rackgatectl's own --json output
      if (!r.note.empty()) j["note"] = r.note;  // admin-path: rackgatectl's own --json output
      eks.push_back(std::move(j));
    }
    PrintJson({{"eks", eks}});  // admin-path: rackgatectl's own --json output
    return kExitOk;
  }
  for (const auto& r : rows) {
    const std::string who = r.file.empty() ? r.hostname : r.file;
    std::printf("%s (ek %s)\n", who.c_str(), r.ek_hash.empty() ? "-" : r.ek_hash.substr(0, 16).c_str());
    if (!r.intel.empty()) std::printf("  intel %s\n", r.intel.c_str());
    if (!r.amd.empty()) std::printf("  amd   %s\n", r.amd.c_str());
    if (!r.note.empty()) std::printf("  note  %s\n", r.note.c_str());
  }
  return kExitOk;
}

int RunImport(const std::string& socket, int argc, char** argv, int first) {
  auto args = Args::Parse(argc, argv, first, {{}, {"json"}, kAnyPositional});
  if (!args.ok()) return UsageError(kImportHelp, args.status().message());
  if (args->Has("help")) return PrintHelp(kImportHelp);
  if (args->positional().empty()) return UsageError(kImportHelp, "give the certificate files to import");
  const bool as_json = args->Has("json");
  AdminClient client(socket);
  int code = kExitOk;
  json results = json::array();
  for (const auto& path : args->positional()) {
    json result{{"file", path}};  // admin-path: rackgatectl's own --json output
    const auto refused = [&](const std::string& reason, const std::string& message, int exit_code) {
      result["ok"] = false;  // admin-path: rackgatectl's own --json output
      result["reason"] = reason;  // admin-path: rackgatectl's own --json output
      result["message"] = message;  // admin-path: rackgatectl's own --json output
      std::fprintf(stderr, "rackgatectl: refused: %s: %s: %s\n", path.c_str(), reason.c_str(), message.c_str());
      if (!as_json) std::printf("%s: refused: %s\n", path.c_str(), reason.c_str());
      code = std::max(code, exit_code);
    };
    auto bytes = ReadFile(path, kMaxEkFile);
    Result<attest::Bytes> der = bytes.ok() ? EkCertificateFromFile(*bytes) : Result<attest::Bytes>(bytes.status());
    if (!der.ok()) {
      refused(der.status().reason(), der.status().message(), kExitUnusable);
    } else {
      const wire::EkCertImportRequest request{wire::Base64Encode(*der),
                                              std::filesystem::path(path).filename().string()};
      auto reply = client.Call("POST", "/v1/admin/ek-certs", wire::EncodeEkCertImportRequest(request));
      if (!reply.ok()) {
        // The daemon is not there: no later file would fare better.
        std::fprintf(stderr, "rackgatectl: %s\n", reply.status().message().c_str());
        return kExitUnusable;
      }
      if (reply->status >= 200 && reply->status < 300) {
        auto answer = wire::DecodeEkCertImportAnswer(reply->body);
        if (!answer.ok()) {
          ReportMalformedAnswer(answer.status(), &code);
          return kExitUnusable;
        }
        result["ok"] = true;  // admin-path: rackgatectl's own --json output
        result["outcome"] = answer->outcome;  // admin-path: rackgatectl's own --json output
        result["hostname"] = answer->hostname;  // admin-path: rackgatectl's own --json output
        result["ek_hash"] = answer->ek_hash;  // admin-path: rackgatectl's own --json output
        result["issuer"] = answer->issuer;  // admin-path: rackgatectl's own --json output
        result["anchor"] = answer->anchor;  // admin-path: rackgatectl's own --json output
        result["relaxations"] = answer->relaxations;  // admin-path: rackgatectl's own --json output
        if (!as_json) std::printf("%s: %s\n", path.c_str(), answer->summary.c_str());
      } else {
        const wire::Refusal r = wire::DecodeRefusalOr(
            reply->body, "http_" + std::to_string(reply->status));
        refused(r.reason, r.message, reply->status >= 500 ? kExitUnusable : kExitRefused);
      }
    }
    results.push_back(std::move(result));
  }
  if (as_json) PrintJson({{"results", results}});  // admin-path: rackgatectl's own --json output
  return code;
}

}  // namespace

int RunEkCert(const std::string& socket, int argc, char** argv, int first) {
  if (argc <= first) return UsageError(kEkCertHelp, "give an ek-cert command");
  const std::string sub = argv[first];
  if (sub == "--help") return PrintHelp(kEkCertHelp);
  if (sub == "urls") return RunUrls(socket, argc, argv, first + 1);
  if (sub == "import") return RunImport(socket, argc, argv, first + 1);
  return UsageError(kEkCertHelp, "unknown ek-cert command '" + sub + "'" + DidYouMean(sub, {"urls", "import"}));
}

}  // namespace rackgate::ctl
