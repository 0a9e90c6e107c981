// rackgatectl ca rotate --appliance / ca bundle --appliance: the appliance
// CA's rotation in stages, each stage one change of the fleet's record
// (storage::CaRotationStore) and of this appliance's files.
#include "ctl/state/appliance_ca_rotation.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <nlohmann/json.hpp>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "base/files.h"
#include "base/utc_time.h"
#include "core/appliance_ca.h"
#include "core/pki.h"
#include "ctl/admin_util.h"
#include "ctl/args.h"
#include "ctl/json_util.h"
#include "ctl/offline.h"
#include "storage/store.h"

namespace rackgate::ctl {

namespace {

using nlohmann::json;

constexpr char kRotateHelp[] =
    "Usage: rackgatectl ca rotate --appliance STAGE [--state-dir DIR] [--database URL]\n"
    "         [--force] [--json]\n"
    "\n"
    "Rotates the appliance CA (the trust anchor of every pointer config and\n"
    "every installed agent's /etc/rackgate/ca.pem) with an overlap, in stages\n"
    "(docs/operations.md, \"Rotating the appliance CA\"). The stage is the\n"
    "fleet's, kept in the database with the CA certificates (never a key);\n"
    "every appliance serves the bundle within 2 s, and installed agents take\n"
    "it with their next attestation. STAGE:\n"
    "  prepare  make the next CA (ECDSA P-256, 10 years) as DIR/ca/next.crt and\n"
    "           next.key; appliances serve the bundle: current + next CA\n"
    "  switch   on each appliance (next.crt and next.key copied there first):\n"
    "           reissue this appliance's serving certificate under the next CA,\n"
    "           for the names the current one has; then `systemctl reload\n"
    "           rackgated`. Refused (ca_rotation_unconfirmed) while machines\n"
    "           have not attested since the bundle was published\n"
    "  retire   on each appliance, after its switch: move ca.crt and ca.key to\n"
    "           DIR/ca/retired/<UTC>/ and next.* to ca.*; the first one ends the\n"
    "           fleet's rotation; then `systemctl reload rackgated`\n"
    "  status   the stage, both CAs, and the machines that have not attested\n"
    "           since the bundle was published\n"
    "\n"
    "Options:\n"
    "  --appliance       the CA is the appliance CA\n"
    "  --state-dir DIR   the appliance's state directory (default /var/lib/rackgate)\n"
    "  --database URL    the store (rackgated's \"database\"; default DIR/rackgate.db)\n"
    "  --force           switch although machines have not attested since\n"
    "                    prepare (they need the recovery of docs/operations.md)\n"
    "  --json            print JSON instead of text\n"
    "\n"
    "Exit status: 0 done; 1 refused (ca_rotation_in_progress, ca_rotation_none,\n"
    "ca_rotation_stage, ca_next_missing, ca_next_mismatch,\n"
    "ca_rotation_unconfirmed; reason on stderr); 2 unusable input or state.\n";

constexpr char kBundleHelp[] =
    "Usage: rackgatectl ca bundle --appliance [--state-dir DIR] [--database URL]\n"
    "         [--out FILE] [--json]\n"
    "\n"
    "Prints the appliance CA bundle that relying parties (installed agents,\n"
    "pointer configs, curl) should trust now: the current and the next CA\n"
    "during a rotation, otherwise the current one; rackgated hands out the\n"
    "same (docs/operations.md, \"Rotating the appliance CA\").\n"
    "\n"
    "Options:\n"
    "  --appliance       the CA is the appliance CA\n"
    "  --state-dir DIR   the appliance's state directory (default /var/lib/rackgate)\n"
    "  --database URL    the store (default DIR/rackgate.db)\n"
    "  --out FILE        write the bundle to FILE (mode 0644) instead of stdout\n"
    "  --json            print {\"bundle\", \"certificates\", \"stage\"}\n"
    "\n"
    "Exit status: 0 done; 2 unusable input or state.\n";

bool Exists(const std::string& p) { return ::access(p.c_str(), F_OK) == 0; }

// The files of one appliance's state directory that the rotation reads
// and moves (docs/operations.md).
struct CaFiles {
  std::string dir;
  std::string current_crt, current_key, next_crt, next_key, serving_crt, serving_key;
  explicit CaFiles(const std::string& state_dir)
      : dir(state_dir),
        current_crt(state_dir + "/ca/ca.crt"),
        current_key(state_dir + "/ca/ca.key"),
        next_crt(state_dir + "/ca/next.crt"),
        next_key(state_dir + "/ca/next.key"),
        serving_crt(state_dir + "/tls/server.crt"),
        serving_key(state_dir + "/tls/server.key") {}
};

// One run: its arguments, files, store and output.
struct Run {
  const Args& args;
  CaFiles files;
  storage::Store* store;
  int64_t now;
};

storage::Actor Operator(const std::string& stage) {
  return {"uid:" + std::to_string(::getuid()) + " (rackgatectl ca rotate)", "appliance CA rotation: " + stage};
}

int Refused(const Status& s) { return Fail("ca", s, kExitRefused); }
int Unusable(const Status& s) { return Fail("ca", s, kExitUnusable); }
// The store's refusals (the rotation's reasons) are refusals; anything else
// (db_error, unreadable files) is unusable state.
int StoreFailure(const Status& s) {
  return s.code() == Status::Code::kInvalidArgument || s.code() == Status::Code::kNotFound ? Refused(s)
                                                                                            : Unusable(s);
}

json CaJson(const core::CaCertInfo& ca) {
  return {{"subject", ca.subject}, {"sha256", ca.sha256}, {"not_after", ca.not_after},
          {"not_after_utc", UtcTime(ca.not_after)}};
}

// next.crt and next.key are here, belong together and are the recorded next
// CA (the decision is bound to that certificate, not to a file name).
Result<core::CaCertInfo> CheckNextHere(const CaFiles& f, const std::optional<storage::CaRotation>& rotation) {
  if (!Exists(f.next_crt) || !Exists(f.next_key)) {
    return Status::NotFound("ca_next_missing",
                            f.dir + "/ca has no next.crt and next.key: copy them from the appliance that ran "
                                    "`ca rotate --appliance prepare` into " + f.dir +
                                "/ca (next.key mode 0600, owner rackgate), as docs/ha.md's step 2 copies ca.crt "
                                "and ca.key, then run this again");
  }
  if (Status s = core::CheckCaKeyPair(f.next_crt, f.next_key); !s.ok()) {
    return Status::InvalidArgument("ca_next_mismatch", s.message() + "; copy both files again");
  }
  auto next = core::ReadCaCertificate(f.next_crt);
  if (!next.ok()) return next.status();
  if (rotation && rotation->next_sha256 != next->sha256) {
    return Status::InvalidArgument("ca_next_mismatch", f.next_crt + " (sha256 " + next->sha256 +
                                                           ") is not the next CA the rotation prepared (sha256 " +
                                                           rotation->next_sha256 +
                                                           "); copy next.crt and next.key again from the appliance "
                                                           "that ran prepare");
  }
  return next;
}

Result<std::optional<storage::CaRotation>> LoadRotation(storage::Store* store) {
  return store->GetCaRotation(std::string(storage::kCaKindAppliance));
}

// Not init's name: two CAs of one subject in a bundle would leave chain
// building to the key identifiers alone.
std::string NextCommonName(int64_t now) { return "rackgate appliance CA " + UtcTime(now, TimeStyle::kRfc3339); }

int Prepare(const Run& r) {
  auto rotation = LoadRotation(r.store);
  if (!rotation.ok()) return Unusable(rotation.status());
  if (*rotation) {
    return Refused(Status::InvalidArgument("ca_rotation_in_progress",
                                           "the appliance CA rotation is " + (*rotation)->stage +
                                               " already: finish it (switch, retire) first"));
  }
  if (Exists(r.files.next_crt) || Exists(r.files.next_key)) {
    return Unusable(Status::InvalidArgument("pki_exists", r.files.dir + "/ca holds a next CA but no rotation runs: "
                                                          "move next.crt and next.key away, then prepare again"));
  }
  auto current = core::ReadCaCertificate(r.files.current_crt);
  if (!current.ok()) return Unusable(current.status());
  // The one CA maker, init's: ECDSA P-256, CA:TRUE pathlen 0, 10 years.
  core::CaOptions options;
  options.common_name = NextCommonName(r.now);
  if (Status s = core::CreateCa(options, r.files.next_crt, r.files.next_key); !s.ok()) return Unusable(s);
  auto next = core::ReadCaCertificate(r.files.next_crt);
  storage::CaRotation record;
  if (next.ok()) {
    record.current_pem = current->pem;
    record.current_sha256 = current->sha256;
    record.next_pem = next->pem;
    record.next_sha256 = next->sha256;
  }
  auto stored = next.ok() ? r.store->PrepareCaRotation(record, "{}", Operator("prepare"), r.now)
                          : Result<storage::CaRotation>(next.status());
  if (!stored.ok()) {
    // Nothing half-made stays: a next CA without its record is not a rotation.
    ::unlink(r.files.next_crt.c_str());
    ::unlink(r.files.next_key.c_str());
    return StoreFailure(stored.status());
  }
  if (r.args.Has("json")) {
    PrintJson({{"stage", stored->stage}, {"current", CaJson(*current)}, {"next", CaJson(*next)},
               {"next_certificate", r.files.next_crt}, {"next_key", r.files.next_key}});
    return kExitOk;
  }
  std::printf("prepared: next CA %s (sha256 %s) in %s\n", next->subject.c_str(), next->sha256.c_str(),
              r.files.next_crt.c_str());
  std::printf("every appliance now serves the bundle (current + next); installed agents take it with their next\n"
              "attestation. Other appliances: copy %s and %s into their state directory's ca/ first.\n"
              "Then, on each appliance: rackgatectl ca rotate --appliance switch\n",
              r.files.next_crt.c_str(), r.files.next_key.c_str());
  return kExitOk;
}

// Machines that would not follow a switch now; refuses unless --force.
std::optional<int> CheckConfirmed(const Run& r, const storage::CaRotation& rotation, json* report) {
  auto machines = r.store->ListMachines({});
  if (!machines.ok()) return Unusable(machines.status());
  const int64_t published = core::BundlePublishedAt(rotation);
  const auto missing = core::MachinesWithoutBundle(*machines, published);
  (*report)["machines_without_bundle"] = missing.size();
  if (missing.empty()) return std::nullopt;
  std::string names;
  for (size_t i = 0; i < missing.size() && i < 5; ++i) names += (i ? ", " : "") + missing[i].hostname;
  if (missing.size() > 5) names += ", ...";
  const std::string why = std::to_string(missing.size()) + " machine(s) have not attested since the bundle was "
                          "published at " + UtcTime(published) + " (" + names + ")";
  if (r.args.Has("force")) {
    std::fprintf(stderr, "rackgatectl ca: warning: %s; switching anyway (--force): they need the recovery of "
                 "docs/operations.md, \"Rotating the appliance CA\"\n", why.c_str());
    return std::nullopt;
  }
  return Refused(Status::Unsupported("ca_rotation_unconfirmed",
                                     why + ": they would not trust the new serving certificate. Wait until they "
                                           "attest (`rackgatectl ca rotate --appliance status` lists them), or "
                                           "give --force"));
}

int Switch(const Run& r) {
  auto rotation = LoadRotation(r.store);
  if (!rotation.ok()) return Unusable(rotation.status());
  if (!*rotation) {
    return Refused(Status::InvalidArgument("ca_rotation_none", "no appliance CA rotation is in progress: run "
                                                               "`rackgatectl ca rotate --appliance prepare` first"));
  }
  auto next = CheckNextHere(r.files, *rotation);
  if (!next.ok()) return StoreFailure(next.status());
  json report = {{"stage", std::string(storage::kCaStageSwitched)}, {"next", CaJson(*next)}};
  if (auto rc = CheckConfirmed(r, **rotation, &report)) return *rc;
  // The serving certificate's names stay; only its issuer changes (init
  // --renew-serving-cert's code, under the next CA).
  auto names = core::ReadServingCertNames(r.files.serving_crt);
  if (!names.ok()) return Unusable(names.status());
  if (Status s = core::IssueServingCertificate(*names, r.files.next_crt, r.files.next_key, r.files.serving_crt,
                                               r.files.serving_key);
      !s.ok()) {
    return Unusable(s);
  }
  json detail = {{"serving_dns_names", names->dns_names}, {"serving_ip_addresses", names->ip_addresses}};
  auto stored = r.store->SwitchCaRotation(std::string(storage::kCaKindAppliance), next->sha256, detail.dump(),
                                          Operator("switch"), r.now);
  if (!stored.ok()) return StoreFailure(stored.status());
  report["serving_certificate"] = r.files.serving_crt;
  if (r.args.Has("json")) return PrintJson(report), kExitOk;
  std::printf("switched: %s reissued under the next CA (sha256 %s)\n", r.files.serving_crt.c_str(),
              next->sha256.c_str());
  std::printf("now: systemctl reload rackgated\n"
              "then, once every appliance has switched: rackgatectl ca rotate --appliance retire (on each)\n");
  return kExitOk;
}

// Moves ca.{crt,key} to ca/retired/<UTC>/ and next.{crt,key} to ca.{crt,key}.
Status MoveFiles(const CaFiles& f, int64_t now, std::string* retired_dir) {
  const std::string stamp = UtcTime(now, TimeStyle::kRfc3339);
  const std::string retired = f.dir + "/ca/retired";
  *retired_dir = retired + "/" + stamp;
  for (const std::string& d : {retired, *retired_dir}) {
    if (::mkdir(d.c_str(), 0700) != 0 && errno != EEXIST) {
      return Status::IoError("file_unwritable", "cannot create " + d + ": " + std::strerror(errno));
    }
  }
  const std::pair<std::string, std::string> moves[] = {{f.current_key, *retired_dir + "/ca.key"},
                                                       {f.current_crt, *retired_dir + "/ca.crt"},
                                                       {f.next_key, f.current_key},
                                                       {f.next_crt, f.current_crt}};
  for (const auto& [from, to] : moves) {
    if (::rename(from.c_str(), to.c_str()) != 0) {
      return Status::IoError("file_unwritable", "cannot move " + from + " to " + to + ": " + std::strerror(errno));
    }
  }
  for (const std::string& d : {*retired_dir, f.dir + "/ca"}) {
    const int fd = ::open(d.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd >= 0) {
      ::fsync(fd);
      ::close(fd);
    }
  }
  return Status::Ok();
}

int Retire(const Run& r) {
  auto rotation = LoadRotation(r.store);
  if (!rotation.ok()) return Unusable(rotation.status());
  // Another appliance may have retired the fleet's rotation already: this
  // one still moves its own files, once its serving certificate is under
  // the next CA.
  if (!*rotation && !Exists(r.files.next_crt)) {
    return Refused(Status::InvalidArgument("ca_rotation_none", "no appliance CA rotation is in progress and " +
                                                                   r.files.dir + "/ca holds no next CA"));
  }
  if (*rotation && (*rotation)->stage != storage::kCaStageSwitched) {
    return Refused(Status::InvalidArgument("ca_rotation_stage", "the appliance CA rotation is " +
                                                                    (*rotation)->stage + ": switch comes first"));
  }
  auto next = CheckNextHere(r.files, *rotation);
  if (!next.ok()) return StoreFailure(next.status());
  auto under_next = core::SignedBy(r.files.serving_crt, r.files.next_crt);
  if (!under_next.ok()) return Unusable(under_next.status());
  if (!*under_next) {
    return Refused(Status::InvalidArgument("ca_rotation_stage", r.files.serving_crt + " is not under the next CA "
                                                                "yet: run `rackgatectl ca rotate --appliance "
                                                                "switch` on this appliance first"));
  }
  if (*rotation) {
    Status s = r.store->RetireCaRotation(std::string(storage::kCaKindAppliance), next->sha256, "{}",
                                         Operator("retire"), r.now);
    if (!s.ok()) return StoreFailure(s);
  }
  std::string retired_dir;
  if (Status s = MoveFiles(r.files, r.now, &retired_dir); !s.ok()) return Unusable(s);
  if (r.args.Has("json")) {
    return PrintJson({{"retired", retired_dir}, {"ca", CaJson(*next)}, {"fleet_record_cleared", rotation->has_value()}}),
           kExitOk;
  }
  std::printf("retired: the old CA is in %s; %s is now the next CA (sha256 %s)\n", retired_dir.c_str(),
              r.files.current_crt.c_str(), next->sha256.c_str());
  std::printf("%snow: systemctl reload rackgated\n",
              *rotation ? "" : "(the fleet's rotation was retired already by another appliance)\n");
  return kExitOk;
}

int StatusStage(const Run& r) {
  auto rotation = LoadRotation(r.store);
  if (!rotation.ok()) return Unusable(rotation.status());
  auto current = core::ReadCaCertificate(r.files.current_crt);
  if (!current.ok()) return Unusable(current.status());
  json report = {{"stage", *rotation ? (*rotation)->stage : "none"}, {"current", CaJson(*current)}};
  std::vector<storage::Machine> missing;
  if (*rotation) {
    report["prepared_at"] = (*rotation)->prepared_at;
    if ((*rotation)->switched_at) report["switched_at"] = *(*rotation)->switched_at;
    if (auto next = core::ReadCaCertificate(r.files.next_crt); next.ok()) {
      report["next"] = CaJson(*next);
      report["next_here"] = next->sha256 == (*rotation)->next_sha256;
    } else {
      report["next"] = {{"sha256", (*rotation)->next_sha256}};
      report["next_here"] = false;
    }
    auto machines = r.store->ListMachines({});
    if (!machines.ok()) return Unusable(machines.status());
    missing = core::MachinesWithoutBundle(*machines, core::BundlePublishedAt(**rotation));
    std::vector<std::string> names;
    for (const auto& m : missing) names.push_back(m.hostname);
    report["machines_without_bundle"] = names;
  }
  auto under_next = core::SignedBy(r.files.serving_crt, r.files.next_crt);
  report["serving_under"] = under_next.ok() && *under_next ? "next" : "current";
  if (r.args.Has("json")) return PrintJson(report), kExitOk;
  std::printf("stage:    %s\n", report.at("stage").get<std::string>().c_str());
  std::printf("current:  %s, until %s, sha256 %s\n", current->subject.c_str(), UtcTime(current->not_after).c_str(),
              current->sha256.c_str());
  if (report.contains("next")) {
    const json& n = report.at("next");
    std::printf("next:     %s, until %s, sha256 %s%s\n", Str(n, "subject").c_str(), Str(n, "not_after_utc").c_str(),
                Str(n, "sha256").c_str(),
                report.at("next_here").get<bool>() ? "" : " (not in this appliance's ca/: copy it before switch)");
  }
  std::printf("serving:  this appliance's certificate is under the %s CA\n",
              report.at("serving_under").get<std::string>().c_str());
  if (*rotation) {
    std::printf("machines that have not attested since the bundle was published: %zu\n", missing.size());
    for (const auto& m : missing) {
      std::printf("  %-30s last attested %s\n", m.hostname.c_str(),
                  m.last_attested_at ? UtcTime(*m.last_attested_at).c_str() : "never");
    }
  }
  return kExitOk;
}

int Bundle(const Run& r) {
  auto current = ReadFile(r.files.current_crt, 1 << 20);
  if (!current.ok()) return Unusable(current.status());
  std::string next;
  if (Exists(r.files.next_crt)) {
    auto n = ReadFile(r.files.next_crt, 1 << 20);
    if (!n.ok()) return Unusable(n.status());
    next.assign(n->begin(), n->end());
  }
  // rackgated's own rule (core/appliance_ca.h), read now without a cache.
  core::ApplianceCaBundle bundle(r.store, std::string(current->begin(), current->end()), next,
                                 std::chrono::seconds(0));
  const std::string pem = bundle.Pem();
  auto rotation = bundle.Rotation();
  if (auto out = r.args.Get("out")) {
    Status s = WriteFileAtomic(*out, std::span(reinterpret_cast<const uint8_t*>(pem.data()), pem.size()));
    if (!s.ok()) return Unusable(s);
    ::chmod(out->c_str(), 0644);
  }
  if (r.args.Has("json")) {
    size_t certs = 0;
    for (size_t at = pem.find("-----BEGIN CERTIFICATE-----"); at != std::string::npos;
         at = pem.find("-----BEGIN CERTIFICATE-----", at + 1)) {
      ++certs;
    }
    return PrintJson({{"bundle", pem}, {"certificates", certs}, {"stage", rotation ? rotation->stage : "none"}}),
           kExitOk;
  }
  if (!r.args.Get("out")) std::fputs(pem.c_str(), stdout);
  return kExitOk;
}

}  // namespace

int RunApplianceCa(int argc, char** argv, int first) {
  const std::string sub = argv[first];
  const bool rotate = sub == "rotate";
  const char* help = rotate ? kRotateHelp : kBundleHelp;
  auto args = rotate ? Args::Parse(argc, argv, first + 1, {{"state-dir", "database"}, {"appliance", "force"}, 1})
                     : Args::Parse(argc, argv, first + 1, {{"state-dir", "database", "out"}, {"appliance"}, 0});
  if (!args.ok()) return Usage(help, args.status());
  if (args->Has("help")) return std::fputs(help, stdout), kExitOk;
  if (!args->Has("appliance")) {
    return Usage(help, Status::InvalidArgument("usage", "say which CA: --appliance (or --cluster)"));
  }
  const std::vector<std::string> stages = {"prepare", "switch", "retire", "status"};
  std::string stage;
  if (rotate) {
    if (args->positional().size() != 1) {
      return Usage(help, Status::InvalidArgument("usage", "give the stage: prepare, switch, retire or status"));
    }
    stage = args->positional()[0];
    if (std::find(stages.begin(), stages.end(), stage) == stages.end()) {
      return Usage(help, Status::InvalidArgument("usage", "unknown stage '" + stage + "'" + DidYouMean(stage, stages)));
    }
  }
  const std::string dir = args->Get("state-dir").value_or("/var/lib/rackgate");
  // SECURITY: `database` may hold a password: messages show RedactDatabase.
  const std::string database = args->Get("database").value_or(dir + "/rackgate.db");
  if (!storage::IsServerDatabase(database) && !Exists(database)) {
    return Unusable(Status::NotFound("db_missing", "no database at " + database +
                                                       "; give rackgated's \"database\" with --database"));
  }
  auto store = storage::OpenStore(database);
  if (!store.ok()) return Unusable(store.status().Annotate(storage::RedactDatabase(database)));
  const Run r{*args, CaFiles(dir), store->get(), static_cast<int64_t>(std::time(nullptr))};
  if (!rotate) return Bundle(r);
  if (stage == "prepare") return Prepare(r);
  if (stage == "switch") return Switch(r);
  if (stage == "retire") return Retire(r);
  return StatusStage(r);
}

}  // namespace rackgate::ctl
