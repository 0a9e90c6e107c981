// rackgatectl verify-quote, makecredential and ek verify.
#include "ctl/offline.h"

#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <limits>
#include <nlohmann/json.hpp>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "attest/credential.h"
#include "attest/ek_cert.h"
#include "attest/pcr_file.h"
#include "attest/quote.h"
#include "attest/tpm.h"
#include "wire/codec.h"
#include "ctl/admin_util.h"
#include "ctl/json_util.h"
#include "ctl/args.h"
#include "ctl/ek_cert_urls.h"
#include "base/files.h"
#include "base/utc_time.h"
#include "base/hex.h"

namespace rackgate::ctl {

bool SocketAnswers(const std::string& path) {
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  if (path.empty() || path.size() >= sizeof(addr.sun_path)) return false;
  std::memcpy(addr.sun_path, path.c_str(), path.size() + 1);
  const int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return false;
  const bool answers = ::connect(fd, reinterpret_cast<const sockaddr*>(&addr), sizeof(addr)) == 0;
  ::close(fd);
  return answers;
}

namespace {

using attest::Bytes;

// Inputs are TPM structures and certificates: a few KiB at most.
constexpr size_t kMaxInputFile = 64 * 1024;

// Refusals of well-formed evidence exit 1; input we cannot use exits 2.
int CodeFor(const Status& s) {
  return s.code() == Status::Code::kVerificationFailed || s.code() == Status::Code::kUnsupported
             ? kExitRefused
             : kExitUnusable;
}

Result<Bytes> ParseHex(const std::string& hex, size_t max_bytes) {
  auto b = hex::Decode(hex.rfind("0x", 0) == 0 ? std::string_view(hex).substr(2) : hex, max_bytes);
  if (!b || b->empty()) {
    return Status::InvalidArgument("hex_malformed", "expected 1.." + std::to_string(max_bytes) +
                                                        " bytes of hex");
  }
  return std::move(*b);
}


constexpr char kVerifyQuoteHelp[] =
    "Usage: rackgatectl verify-quote --ak-public AK.pub --message QUOTE.msg\n"
    "         --signature QUOTE.sig --pcrs PCRS --nonce HEX [--pcr-list sha256:0,1,2] [--json]\n"
    "\n"
    "Verifies a TPM2_Quote as `tpm2_quote -m -s -o` writes it, against the AK\n"
    "public area `tpm2_createak -f tss -u` wrote. --pcrs takes either PCR format\n"
    "tpm2_quote writes (its default serialized one, or `-F values`). --pcr-list\n"
    "names the PCRs that must be in the quote; a quote over fewer is refused.\n"
    "The AK must pass the AK policy (restricted signing key, fixedTPM,\n"
    "fixedParent, sensitiveDataOrigin, RSA >= 2048 or P-256/P-384, sha256+).\n"
    "\n"
    "Options:\n"
    "  --ak-public FILE     the AK public area (TPM2B_PUBLIC)\n"
    "  --message FILE       the quoted message (tpm2_quote -m)\n"
    "  --signature FILE     its signature (tpm2_quote -s)\n"
    "  --pcrs FILE          the PCR values (tpm2_quote -o)\n"
    "  --nonce HEX          the qualifying data the quote must carry\n"
    "  --pcr-list LIST      PCRs the quote must cover, e.g. sha256:0,1,2\n"
    "  --json               print the verified quote's facts as JSON\n"
    "\n"
    "Exit status: 0 valid; 1 invalid (reason code on stderr); 2 unusable input.\n";

constexpr char kMakeCredentialHelp[] =
    "Usage: rackgatectl makecredential --ek-public EK.pub --name AK.name\n"
    "         --secret FILE --output CRED [--json]\n"
    "\n"
    "Wraps the secret (1 to the EK name algorithm's digest size, e.g. 32 bytes)\n"
    "so that only the TPM holding EK can recover it, and only for the object\n"
    "named AK.name, with TPM2_ActivateCredential. EK.pub is a TPM2B_PUBLIC as\n"
    "`tpm2_createek -f tss -u` writes (RSA-2048 or -3072, ECC P-256, P-384 or P-521); AK.name the\n"
    "binary name `tpm2_createak -n` writes. CRED is in the format of\n"
    "`tpm2_makecredential -o`, written atomically with mode 0600.\n"
    "\n"
    "Options:\n"
    "  --ek-public FILE     the EK public area (TPM2B_PUBLIC)\n"
    "  --name FILE          the AK's binary name\n"
    "  --secret FILE        the secret to wrap\n"
    "  --output FILE        where to write the credential\n"
    "  --json               print {\"output\", \"bytes\"} when written\n"
    "\n"
    "Exit status: 0 written; 1 refused (unsupported EK); 2 unusable input.\n";

constexpr char kEkVerifyHelp[] =
    "Usage: rackgatectl ek verify (--roots FILE|DIR | --config FILE) [--intermediates FILE|DIR]\n"
    "         [--allow SHA256:RELAXATION] --cert EK.der|EK.pem [--ek-public EK.pub]\n"
    "         [--at UNIX_SECONDS] [--json]\n"
    "\n"
    "Validates a TPM endorsement key certificate: a path to one of the\n"
    "anchors through the given intermediates (signatures, validity\n"
    "dates, basic constraints; no TLS purpose), the EK certificate EKU\n"
    "(2.23.133.8.1) or TCG EK policy, and the TPM manufacturer/model/version in\n"
    "its SubjectAltName, which it prints with the anchor and any relaxation it\n"
    "needed. With --ek-public, also checks that the EK public area\n"
    "(TPM2B_PUBLIC) carries the certificate's key. The certificate may be DER,\n"
    "PEM or as read from NV (header, padding).\n"
    "Every CA certificate given with --roots is an anchor (self-signed or not).\n"
    "--roots and --intermediates may repeat; a directory contributes every\n"
    "certificate file in it (PEM or DER). --config takes ek_roots,\n"
    "ek_intermediates and ek_anchor_relaxations from rackgated's config, so\n"
    "the verdict is the appliance's; --allow grants one relaxation (sha1,\n"
    "expired-ca, no-ek-marks) to the anchor with that SHA-256, as\n"
    "ek_anchor_relaxations does (`rackgatectl ek roots` lists the anchors).\n"
    "\n"
    "Options:\n"
    "  --roots FILE|DIR          manufacturer CA certificates (anchors); may repeat\n"
    "  --intermediates FILE|DIR  intermediate certificates; may repeat\n"
    "  --config FILE             rackgated's config: its anchors and relaxations\n"
    "  --allow SHA256:RELAXATION grant a relaxation to an anchor; may repeat\n"
    "  --cert FILE               the EK certificate, DER, PEM, NV form or Intel's\n"
    "                            JSON answer\n"
    "  --ek-public FILE          the EK public area (TPM2B_PUBLIC) to match\n"
    "  --at UNIX_SECONDS         check validity at this time (default now)\n"
    "  --json                    print the certificate's facts as JSON\n"
    "\n"
    "Exit status: 0 accepted; 1 refused (reason code on stderr); 2 unusable input.\n";

constexpr char kEkRootsHelp[] =
    "Usage: rackgatectl ek roots (--roots FILE|DIR | --config FILE) [--intermediates FILE|DIR]\n"
    "         [--allow SHA256:RELAXATION] [--leaves FILE|DIR] [--at UNIX_SECONDS] [--json]\n"
    "\n"
    "Lists the EK trust anchors as rackgated loads them: every CA certificate\n"
    "of the roots (a vendor CA that is not self-signed, a cross-signed one,\n"
    "an intermediate in a mixed folder), with its subject, key, expiry,\n"
    "SHA-256 (its name in ek_anchor_relaxations), whether it is self-signed\n"
    "and the relaxations granted to it; what loading skipped, and why. With\n"
    "--leaves, verifies each EK certificate file there and counts, per anchor,\n"
    "how many it accepts; the refused ones are listed with their reason.\n"
    "Offline: no daemon needed. --config, --allow: as for `ek verify`.\n"
    "\n"
    "Options:\n"
    "  --roots FILE|DIR          manufacturer CA certificates; may repeat\n"
    "  --intermediates FILE|DIR  intermediate certificates; may repeat\n"
    "  --config FILE             rackgated's config: its anchors and relaxations\n"
    "  --allow SHA256:RELAXATION grant a relaxation to an anchor; may repeat\n"
    "  --leaves FILE|DIR         EK certificates to count; may repeat\n"
    "  --at UNIX_SECONDS         verify the leaves at this time (default now)\n"
    "  --json                    {\"anchors\": [...], \"notes\": [...], \"leaves\": {...}}\n"
    "\n"
    "Exit status: 0 listed (every leaf accepted); 1 a leaf refused; 2 unusable\n"
    "input.\n";

// The anchors of `ek verify` and `ek roots`: --roots/--intermediates, or
// rackgated's config (--config: ek_roots, ek_intermediates,
// ek_anchor_relaxations), then every --allow. The same rules as the
// daemon's (daemon/ek_anchors.cc): a relaxation naming no anchor, or no
// known relaxation, is an error.
Result<attest::EkTrustStore> StoreFromArgs(const Args& args) {
  std::vector<std::string> roots = args.GetAll("roots");
  std::vector<std::string> intermediates = args.GetAll("intermediates");
  std::vector<std::pair<std::string, std::string>> grants;
  if (auto path = args.Get("config")) {
    auto config = ReadJsonFile(*path, 1 << 20);
    if (!config.ok()) return config.status();
    const auto strings = [&](const char* key, std::vector<std::string>* out) -> Status {
      if (!config->contains(key)) return Status::Ok();
      const auto& v = config->at(key);
      if (!v.is_array()) return Status::InvalidArgument("config_invalid", *path + ": " + key + " is not a list");
      for (const auto& e : v) {
        if (!e.is_string()) return Status::InvalidArgument("config_invalid", *path + ": " + key + " is not a list");
        out->push_back(e.get<std::string>());
      }
      return Status::Ok();
    };
    if (Status s = strings("ek_roots", &roots); !s.ok()) return s;
    if (Status s = strings("ek_intermediates", &intermediates); !s.ok()) return s;
    if (config->contains("ek_anchor_relaxations")) {
      const auto& r = config->at("ek_anchor_relaxations");
      if (!r.is_object()) {
        return Status::InvalidArgument("config_invalid", *path + ": ek_anchor_relaxations is not an object");
      }
      for (const auto& [anchor, names] : r.items()) {
        if (!names.is_array()) {
          return Status::InvalidArgument("config_invalid", *path + ": ek_anchor_relaxations." + anchor +
                                                               " is not a list");
        }
        for (const auto& n : names) {
          if (!n.is_string()) {
            return Status::InvalidArgument("config_invalid", *path + ": ek_anchor_relaxations." + anchor +
                                                                 " is not a list of strings");
          }
          grants.emplace_back(anchor, n.get<std::string>());
        }
      }
    }
  }
  for (const auto& a : args.GetAll("allow")) {
    const size_t colon = a.find(':');
    if (colon == std::string::npos) {
      return Status::InvalidArgument("usage", "--allow takes SHA256:RELAXATION, got '" + a + "'");
    }
    grants.emplace_back(a.substr(0, colon), a.substr(colon + 1));
  }
  if (roots.empty()) return Status::InvalidArgument("usage", "give --roots (or --config naming ek_roots)");
  auto store = attest::EkTrustStore::Load(roots, intermediates);
  if (!store.ok()) return store.status();
  for (const auto& [anchor, name] : grants) {
    if (Status s = store->AllowForAnchor(anchor, name); !s.ok()) return s;
  }
  return store;
}

// Every regular file of each path (a directory's, names starting with '.'
// skipped), in name order.
Result<std::vector<std::string>> FilesOf(const std::vector<std::string>& paths) {
  std::vector<std::string> out;
  for (const auto& p : paths) {
    std::error_code ec;
    if (std::filesystem::is_directory(p, ec)) {
      std::vector<std::string> in_dir;
      for (const auto& e : std::filesystem::directory_iterator(p, ec)) {
        if (e.is_regular_file() && e.path().filename().string().rfind('.', 0) != 0) in_dir.push_back(e.path());
      }
      if (ec) return Status::IoError("io_error", p + ": " + ec.message());
      std::sort(in_dir.begin(), in_dir.end());
      out.insert(out.end(), in_dir.begin(), in_dir.end());
    } else {
      out.push_back(p);
    }
  }
  return out;
}

}  // namespace

int Usage(const char* help, const Status& why) { return UsageError(help, why.message()); }

std::string PermissionHint(const std::string& command, const Status& s) {
  if (s.message().find(std::strerror(EACCES)) == std::string::npos) return "";
  if (command == "init") {
    return "the state directory is the rackgate user's (0700): run init as that user, "
           "`sudo -u rackgate rackgatectl init --state-dir ...`";
  }
  if (command == "pointer") {
    return "the appliance CA and tokens in the state directory are readable by root and the rackgate "
           "user only: run `sudo rackgatectl pointer ...` (or sudo -u rackgate)";
  }
  return "the file is not yours to read or write: run the command with sudo, or as the rackgate user "
         "(sudo -u rackgate)";
}

int Fail(const char* command, const Status& s, int code) {
  // A refusal has one form for every command (docs/cli.md, "Exit status"),
  // the one the admin API's refusals print: scripts match it.
  if (code == kExitRefused) {
    std::fprintf(stderr, "rackgatectl: refused: %s\n", s.ToString().c_str());
  } else {
    std::fprintf(stderr, "rackgatectl %s: error: %s\n", command, s.ToString().c_str());
  }
  // A bare "Permission denied" does not say who may: name the user.
  if (const std::string hint = PermissionHint(command, s); !hint.empty()) {
    std::fprintf(stderr, "rackgatectl %s: %s\n", command, hint.c_str());
  }
  return code;
}

int RunVerifyQuote(int argc, char** argv, int first) {
  FlagSpec spec{{"ak-public", "message", "signature", "pcrs", "nonce", "pcr-list"}, {"json"}, 0};
  auto args = Args::Parse(argc, argv, first, spec);
  if (!args.ok()) return Usage(kVerifyQuoteHelp, args.status());
  if (args->Has("help")) {
    std::fputs(kVerifyQuoteHelp, stdout);
    return kExitOk;
  }
  if (Status s = args->Require({"ak-public", "message", "signature", "pcrs", "nonce"}); !s.ok()) {
    return Usage(kVerifyQuoteHelp, s);
  }
  const char* cmd = "verify-quote";
  auto nonce = ParseHex(*args->Get("nonce"), 64);
  if (!nonce.ok()) return Fail(cmd, nonce.status().Annotate("--nonce"), kExitUnusable);
  std::vector<attest::PcrSelection> required;
  if (auto list = args->Get("pcr-list")) {
    auto parsed = attest::ParsePcrSelectionList(*list);
    if (!parsed.ok()) return Fail(cmd, parsed.status(), kExitUnusable);
    required = std::move(parsed).value();
  }
  auto ak_bytes = ReadFile(*args->Get("ak-public"), kMaxInputFile);
  auto msg = ReadFile(*args->Get("message"), kMaxInputFile);
  auto sig = ReadFile(*args->Get("signature"), kMaxInputFile);
  auto pcr_bytes = ReadFile(*args->Get("pcrs"), attest::kMaxPcrFileSize);
  for (const Status& s : {ak_bytes.status(), msg.status(), sig.status(), pcr_bytes.status()}) {
    if (!s.ok()) return Fail(cmd, s, kExitUnusable);
  }
  auto ak = attest::ParseTpm2bPublic(*ak_bytes);
  if (!ak.ok()) return Fail(cmd, ak.status().Annotate("--ak-public"), kExitUnusable);
  if (Status s = attest::CheckAkPolicy(*ak); !s.ok()) return Fail(cmd, s, kExitRefused);
  auto key = attest::VerifyKey::FromTpmPublic(*ak);
  if (!key.ok()) return Fail(cmd, key.status().Annotate("--ak-public"), kExitUnusable);

  // The quote names its own PCR selection; the values file is read against it.
  // A quote that does not even parse is an invalid quote, not unusable input.
  auto attest_info = attest::ParseTpmsAttest(*msg);
  if (!attest_info.ok()) return Fail(cmd, attest_info.status(), kExitRefused);
  auto pcrs = attest::ParseTpm2ToolsPcrFile(*pcr_bytes, attest_info->pcr_select);
  if (!pcrs.ok()) return Fail(cmd, pcrs.status().Annotate("--pcrs"), kExitUnusable);

  auto v = attest::VerifyQuote(*key, *msg, *sig, *pcrs, *nonce, required);
  if (!v.ok()) {
    const bool unusable = v.status().reason() == "pcr_values_incomplete";
    return Fail(cmd, v.status(), unusable ? kExitUnusable : kExitRefused);
  }
  if (args->Has("json")) {
    PrintJson({{"ok", true},
               {"ak_name", hex::Encode(attest::ObjectName(*ak))},
               {"pcrs", attest::FormatPcrSelectionList(v->selection)},
               {"hash", attest::HashAlgName(v->hash_alg)},
               {"reset_count", v->clock.reset_count},
               {"restart_count", v->clock.restart_count},
               {"clock", v->clock.clock}});
    return kExitOk;
  }
  std::printf("quote ok: ak %s, pcrs %s, sig hash %s, reset %u, restart %u, clock %llu\n",
              hex::Encode(attest::ObjectName(*ak)).c_str(),
              attest::FormatPcrSelectionList(v->selection).c_str(),
              attest::HashAlgName(v->hash_alg).c_str(), v->clock.reset_count, v->clock.restart_count,
              static_cast<unsigned long long>(v->clock.clock));
  return kExitOk;
}

int RunMakeCredential(int argc, char** argv, int first) {
  FlagSpec spec{{"ek-public", "name", "secret", "output"}, {"json"}, 0};
  auto args = Args::Parse(argc, argv, first, spec);
  if (!args.ok()) return Usage(kMakeCredentialHelp, args.status());
  if (args->Has("help")) {
    std::fputs(kMakeCredentialHelp, stdout);
    return kExitOk;
  }
  if (Status s = args->Require({"ek-public", "name", "secret", "output"}); !s.ok()) {
    return Usage(kMakeCredentialHelp, s);
  }
  const char* cmd = "makecredential";
  auto ek_bytes = ReadFile(*args->Get("ek-public"), kMaxInputFile);
  auto name = ReadFile(*args->Get("name"), kMaxInputFile);
  auto secret = ReadFile(*args->Get("secret"), kMaxInputFile);
  for (const Status& s : {ek_bytes.status(), name.status(), secret.status()}) {
    if (!s.ok()) return Fail(cmd, s, kExitUnusable);
  }
  auto ek = attest::ParseTpm2bPublic(*ek_bytes);
  if (!ek.ok()) return Fail(cmd, ek.status().Annotate("--ek-public"), kExitUnusable);
  auto cred = attest::MakeCredential(*ek, *name, *secret);
  if (!cred.ok()) return Fail(cmd, cred.status(), CodeFor(cred.status()));
  Bytes file = attest::EncodeCredentialFile(*cred);
  if (Status s = WriteFileAtomic(*args->Get("output"), file); !s.ok()) {
    return Fail(cmd, s, kExitUnusable);
  }
  if (args->Has("json")) PrintJson({{"output", *args->Get("output")}, {"bytes", file.size()}});
  return kExitOk;
}

int RunEkVerify(int argc, char** argv, int first) {
  FlagSpec spec{{"roots", "intermediates", "config", "allow", "cert", "ek-public", "at"}, {"json"}, 0};
  auto args = Args::Parse(argc, argv, first, spec);
  if (!args.ok()) return Usage(kEkVerifyHelp, args.status());
  if (args->Has("help")) {
    std::fputs(kEkVerifyHelp, stdout);
    return kExitOk;
  }
  if (Status s = args->Require({"cert"}); !s.ok()) return Usage(kEkVerifyHelp, s);
  if (!args->Has("roots") && !args->Has("config")) {
    return Usage(kEkVerifyHelp, Status::InvalidArgument("usage", "give --roots or --config"));
  }
  const char* cmd = "ek verify";
  int64_t now = static_cast<int64_t>(std::time(nullptr));
  auto at = args->GetInt("at", now, 0, std::numeric_limits<int64_t>::max());
  if (!at.ok()) return Usage(kEkVerifyHelp, at.status());
  now = *at;
  auto store = StoreFromArgs(*args);
  if (!store.ok()) {
    if (store.status().reason() == "usage") return Usage(kEkVerifyHelp, store.status());
    return Fail(cmd, store.status(), kExitUnusable);
  }
  auto cert_bytes = ReadFile(*args->Get("cert"), attest::kMaxEkCertBytes);
  if (!cert_bytes.ok()) return Fail(cmd, cert_bytes.status(), kExitUnusable);
  std::optional<attest::TpmPublic> ek;
  if (auto path = args->Get("ek-public")) {
    auto b = ReadFile(*path, kMaxInputFile);
    if (!b.ok()) return Fail(cmd, b.status(), kExitUnusable);
    if (LooksLikeCertificate(std::string_view(reinterpret_cast<const char*>(b->data()), b->size()))) {
      return Usage(kEkVerifyHelp, Status::InvalidArgument("usage", *path + " looks like a certificate, not a "
                                                                           "TPM2B_PUBLIC: use --cert " + *path));
    }
    auto parsed = attest::ParseTpm2bPublic(*b);
    if (!parsed.ok()) return Fail(cmd, parsed.status().Annotate("--ek-public"), kExitUnusable);
    ek = std::move(parsed).value();
  }
  // DER, PEM, the NV form or Intel's JSON answer (ctl/ek_cert_urls.h).
  auto cert_der = EkCertificateFromFile(*cert_bytes);
  if (!cert_der.ok()) return Fail(cmd, cert_der.status(), kExitUnusable);
  auto info = attest::VerifyEkCertificate(*store, *cert_der, now);
  if (!info.ok()) return Fail(cmd, info.status(), CodeFor(info.status()));
  if (ek) {
    if (Status s = attest::CheckEkPublicMatchesCertificate(*ek, *info); !s.ok()) {
      return Fail(cmd, s, CodeFor(s));
    }
  }
  if (args->Has("json")) {
    PrintJson({{"ok", true},
               {"tpm_manufacturer", info->tpm_manufacturer},
               {"tpm_model", info->tpm_model},
               {"tpm_version", info->tpm_version},
               {"issuer", info->issuer},
               {"serial", info->serial_hex},
               {"not_before", UtcTime(info->not_before, TimeStyle::kRfc3339)},
               {"not_after", UtcTime(info->not_after, TimeStyle::kRfc3339)},
               {"key", info->key_type == attest::kAlgRsa ? "RSA" : "ECC"},
               {"key_bits", info->key_bits},
               {"anchor", info->anchor_sha256},
               {"anchor_subject", info->anchor_subject},
               {"relaxations", info->relaxations_used},
               {"matches_ek_public", ek.has_value()}});
    return kExitOk;
  }
  std::printf("ek certificate ok\n");
  std::printf("  tpm manufacturer: %s\n  tpm model: %s\n  tpm version: %s\n",
              info->tpm_manufacturer.c_str(), info->tpm_model.c_str(), info->tpm_version.c_str());
  std::printf("  issuer: %s\n  serial: %s\n  valid: %s .. %s\n", info->issuer.c_str(),
              info->serial_hex.c_str(), UtcTime(info->not_before, TimeStyle::kRfc3339).c_str(),
              UtcTime(info->not_after, TimeStyle::kRfc3339).c_str());
  std::printf("  key: %s %d bits%s\n", info->key_type == attest::kAlgRsa ? "RSA" : "ECC",
              info->key_bits, ek ? ", matches --ek-public" : "");
  std::printf("  anchor: %s (sha256 %s)\n", info->anchor_subject.c_str(), info->anchor_sha256.c_str());
  for (const auto& r : info->relaxations_used) std::printf("  accepted with relaxation: %s\n", r.c_str());
  return kExitOk;
}

int RunEkRoots(int argc, char** argv, int first) {
  FlagSpec spec{{"roots", "intermediates", "config", "allow", "leaves", "at"}, {"json"}, 0};
  auto args = Args::Parse(argc, argv, first, spec);
  if (!args.ok()) return Usage(kEkRootsHelp, args.status());
  if (args->Has("help")) {
    std::fputs(kEkRootsHelp, stdout);
    return kExitOk;
  }
  if (!args->Has("roots") && !args->Has("config")) {
    return Usage(kEkRootsHelp, Status::InvalidArgument("usage", "give --roots or --config"));
  }
  const char* cmd = "ek roots";
  int64_t now = static_cast<int64_t>(std::time(nullptr));
  auto at = args->GetInt("at", now, 0, std::numeric_limits<int64_t>::max());
  if (!at.ok()) return Usage(kEkRootsHelp, at.status());
  now = *at;
  auto store = StoreFromArgs(*args);
  if (!store.ok()) {
    if (store.status().reason() == "usage") return Usage(kEkRootsHelp, store.status());
    return Fail(cmd, store.status(), kExitUnusable);
  }
  const auto anchors = store->Anchors();
  // With --leaves: each verified, counted by the anchor it chains to.
  std::map<std::string, int64_t> accepted;
  struct Refused {
    std::string file, reason, message;
  };
  std::vector<Refused> refused;
  size_t leaves = 0;
  if (args->Has("leaves")) {
    auto files = FilesOf(args->GetAll("leaves"));
    if (!files.ok()) return Fail(cmd, files.status(), kExitUnusable);
    for (const auto& f : *files) {
      auto bytes = ReadFile(f, attest::kMaxEkCertBytes);
      if (!bytes.ok()) return Fail(cmd, bytes.status(), kExitUnusable);
      ++leaves;
      auto der = EkCertificateFromFile(*bytes);
      auto info = der.ok() ? attest::VerifyEkCertificate(*store, *der, now) : Result<attest::EkCertInfo>(der.status());
      if (info.ok()) {
        ++accepted[info->anchor_sha256];
      } else {
        refused.push_back({f, info.status().reason(), info.status().message()});
      }
    }
  }
  const int code = refused.empty() ? kExitOk : kExitRefused;
  if (args->Has("json")) {
    nlohmann::json list = nlohmann::json::array();
    for (const auto& a : anchors) {
      nlohmann::json j{{"subject", a.subject},         {"issuer", a.issuer},   {"self_signed", a.self_signed},
                       {"key", a.key},                 {"not_after", UtcTime(a.not_after, TimeStyle::kRfc3339)},
                       {"sha256", a.sha256},           {"source", a.source},   {"relaxations", a.relaxations}};
      if (args->Has("leaves")) j["leaves_accepted"] = accepted[a.sha256];
      list.push_back(std::move(j));
    }
    nlohmann::json out{{"anchors", list}, {"notes", store->LoadNotes()},
                       {"intermediates", store->intermediate_count()}};
    if (args->Has("leaves")) {
      nlohmann::json r = nlohmann::json::array();
      for (const auto& x : refused) r.push_back({{"file", x.file}, {"reason", x.reason}, {"message", x.message}});
      out["leaves"] = {{"total", leaves}, {"accepted", leaves - refused.size()}, {"refused", r}};
    }
    PrintJson(out);
    return code;
  }
  std::printf("%zu anchors, %zu intermediates\n", anchors.size(), store->intermediate_count());
  for (const auto& a : anchors) {
    const std::string signed_by = a.self_signed ? std::string("self-signed") : "issued by " + a.issuer;
    std::printf("%s\n  %s, %s, expires %s\n  sha256 %s\n", a.subject.c_str(), a.key.c_str(), signed_by.c_str(),
                UtcTime(a.not_after, TimeStyle::kRfc3339).c_str(), a.sha256.c_str());
    if (!a.relaxations.empty()) {
      std::string r;
      for (const auto& x : a.relaxations) r += (r.empty() ? "" : ", ") + x;
      std::printf("  relaxations: %s\n", r.c_str());
    }
    if (args->Has("leaves")) std::printf("  accepts %lld of %zu leaves\n", static_cast<long long>(accepted[a.sha256]), leaves);
  }
  for (const auto& n : store->LoadNotes()) std::printf("skipped: %s\n", n.c_str());
  for (const auto& x : refused) std::printf("refused: %s: %s: %s\n", x.file.c_str(), x.reason.c_str(), x.message.c_str());
  return code;
}

}  // namespace rackgate::ctl
