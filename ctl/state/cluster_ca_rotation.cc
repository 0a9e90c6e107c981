// The cluster CA's rotation: the file steps of each stage, the store's
// audit row, and the command lines of `ca rotate --cluster` and `ca bundle
// --cluster`.
#include "ctl/state/cluster_ca_rotation.h"

#include <fcntl.h>
#include <pwd.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "base/files.h"
#include "base/utc_time.h"
#include "core/signer.h"
#include "ctl/args.h"
#include "ctl/json_util.h"
#include "ctl/offline.h"
#include "storage/store.h"

namespace rackgate::ctl {

namespace {

using json = nlohmann::json;
using core::csr::ClusterCaFiles;
using core::csr::ClusterCaStage;

constexpr char kRotateHelp[] =
    "Usage: rackgatectl ca rotate --cluster STAGE [--state-dir DIR] [--database URL] [--json]\n"
    "       rackgatectl ca rotate --cluster prepare (--generate [--name CN] [--days N] | --cert CERT --key KEY)\n"
    "\n"
    "Rotates this appliance's cluster CA (signer mode) in DIR/cluster-ca/, one\n"
    "stage at a time, each audited in the store (docs/operations.md, \"Rotating\n"
    "the cluster CA\"). After each stage, `systemctl reload rackgated`.\n"
    "STAGE:\n"
    "  prepare   a next CA beside the current one: --generate (labs) or the\n"
    "            cluster's own new CA from --cert/--key, checked as `ca import`\n"
    "            checks. `ca bundle --cluster` is then current + next: give it\n"
    "            to the API server's and the kubelets' --client-ca-file\n"
    "  switch    certificates issue under the next CA from now on; the old one\n"
    "            stays in the bundle (previous.crt)\n"
    "  retire    the old CA leaves the bundle, moved to retired/<UTC time>/\n"
    "  status    the stage and the CAs' expiry\n"
    "\n"
    "Options:\n"
    "  --cluster         the CA is the cluster CA\n"
    "  --generate        prepare: make a new ECDSA P-256 CA (labs)\n"
    "  --name CN         its common name (default \"rackgate cluster CA <UTC time>\")\n"
    "  --days N          its validity, 1 to 36500 days (default 3650)\n"
    "  --cert CERT       prepare: the next CA's certificate (PEM)\n"
    "  --key KEY         prepare: its unencrypted private key (PEM)\n"
    "  --state-dir DIR   the appliance's state directory (default /var/lib/rackgate)\n"
    "  --database URL    the store the stage is audited in (default DIR/rackgate.db)\n"
    "  --json            print the stage and the CAs as JSON\n"
    "\n"
    "Exit status: 0 done; 1 refused (ca_rotation_in_progress, ca_rotation_none,\n"
    "ca_rotation_stage, ca_next_missing, ca_next_mismatch, a CA refused as by\n"
    "`ca import`); 2 unusable input.\n";

constexpr char kBundleHelp[] =
    "Usage: rackgatectl ca bundle --cluster [--out FILE] [--state-dir DIR]\n"
    "\n"
    "Prints the cluster CA bundle relying parties trust now: the current CA,\n"
    "plus the next one (prepared) or the previous one (switched) during a\n"
    "rotation. The API server's --client-ca-file and the kubelets' take it.\n"
    "\n"
    "Options:\n"
    "  --cluster         the CA is the cluster CA\n"
    "  --out FILE        write it to FILE (atomically, mode 0644) instead of stdout\n"
    "  --state-dir DIR   the appliance's state directory (default /var/lib/rackgate)\n"
    "\n"
    "Exit status: 0 done; 2 unusable input (no cluster CA).\n";

bool Exists(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0;
}

Status Rename(const std::string& from, const std::string& to) {
  if (::rename(from.c_str(), to.c_str()) != 0) {
    return Status::IoError("file_unwritable", "cannot move " + from + " to " + to + ": " + std::strerror(errno));
  }
  return Status::Ok();
}

Status Link(const std::string& from, const std::string& to) {
  if (::link(from.c_str(), to.c_str()) != 0) {
    return Status::IoError("file_unwritable", "cannot link " + from + " to " + to + ": " + std::strerror(errno));
  }
  return Status::Ok();
}

Status SyncDir(const std::string& dir) {
  const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0 || ::fsync(fd) != 0) {
    const int e = errno;
    if (fd >= 0) ::close(fd);
    return Status::IoError("file_unwritable", "cannot sync " + dir + ": " + std::strerror(e));
  }
  ::close(fd);
  return Status::Ok();
}

Status CopyFile(const std::string& from, const std::string& to, mode_t mode) {
  auto bytes = ReadFile(from, 1 << 20);
  if (!bytes.ok()) return bytes.status();
  if (Status s = WriteFileAtomic(to, *bytes); !s.ok()) return s;
  ::chmod(to.c_str(), mode);
  return Status::Ok();
}

Result<core::csr::ClusterCaState> StateIn(const std::string& dir) {
  const ClusterCaFiles f = core::csr::ClusterCaFilesIn(dir);
  if (!Exists(f.cert)) {
    return Status::IoError("file_unreadable", "no cluster CA in " + dir + ": `rackgatectl ca import --cluster` or "
                                              "`ca generate --cluster` first");
  }
  return core::csr::ReadClusterCaState(f.cert);
}

std::string UtcStamp(int64_t now) {
  const time_t t = static_cast<time_t>(now);
  struct tm tm = {};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof(buf), "%Y%m%dT%H%M%SZ", &tm);
  return buf;
}

Status GenerateNext(const ClusterCaFiles& f, const NextClusterCa& next) {
  // Made under temporary names and renamed, the key first: a half-made CA
  // never looks prepared.
  const std::string tmp_cert = f.dir + "/.next.crt.tmp", tmp_key = f.dir + "/.next.key.tmp";
  ::unlink(tmp_cert.c_str());
  ::unlink(tmp_key.c_str());
  if (Status s = core::csr::GenerateClusterCa(next.name, next.days, tmp_cert, tmp_key); !s.ok()) return s;
  if (Status s = Rename(tmp_key, f.next_key); !s.ok()) return s;
  return Rename(tmp_cert, f.next_cert);
}

}  // namespace

Status PrepareClusterCaFiles(const std::string& dir, const NextClusterCa& next) {
  auto state = StateIn(dir);
  if (!state.ok()) return state.status();
  if (state->stage != ClusterCaStage::kNone) {
    return Status::InvalidArgument("ca_rotation_in_progress",
                                   "a cluster CA rotation is in progress (stage " +
                                       std::string(core::csr::ClusterCaStageName(state->stage)) +
                                       "); finish it (switch, retire) first");
  }
  const ClusterCaFiles f = core::csr::ClusterCaFilesIn(dir);
  if (next.generate) {
    if (Status s = GenerateNext(f, next); !s.ok()) return s;
  } else {
    if (Status s = core::csr::ValidateClusterCa(next.cert, next.key); !s.ok()) return s;
    // The current CA's key again would rotate nothing: every certificate of
    // the old CA would verify under the "new" one.
    if (core::csr::ValidateClusterCa(f.cert, next.key).ok()) {
      return Status::InvalidArgument("ca_invalid", "the next CA has the current CA's key; a rotation needs a new key");
    }
    if (Status s = CopyFile(next.key, f.next_key, 0600); !s.ok()) return s;
    if (Status s = CopyFile(next.cert, f.next_cert, 0644); !s.ok()) return s;
  }
  return SyncDir(dir);
}

Status SwitchClusterCaFiles(const std::string& dir) {
  const ClusterCaFiles f = core::csr::ClusterCaFilesIn(dir);
  const bool next = Exists(f.next_cert), previous = Exists(f.previous_cert) || Exists(f.previous_key);
  if (!next && previous) {
    return Status::InvalidArgument("ca_rotation_stage", "the cluster CA is switched already; retire is next");
  }
  if (!next) return Status::InvalidArgument("ca_rotation_none", "no next cluster CA is prepared (prepare first)");
  // The next CA's key: next.key, or ca.key once an interrupted switch had
  // moved it there (the old key then waits as previous.key).
  const std::string next_key = Exists(f.next_key) ? f.next_key : Exists(f.previous_key) ? f.key : "";
  if (next_key.empty()) {
    return Status::NotFound("ca_next_missing", f.next_key + " is missing: prepare the next CA again");
  }
  // Decided on the files the switch moves: the key must be next.crt's, and
  // the CA usable now.
  if (Status s = core::csr::ValidateClusterCa(f.next_cert, next_key); !s.ok()) {
    return Status::InvalidArgument("ca_next_mismatch", "the next cluster CA is not usable: " + s.ToString());
  }
  // The old CA keeps its name until the new one replaces it (hard links
  // first, then renames over ca.*), so ca.crt is there at every step; each
  // step only when it is still to do, so a switch interrupted between two
  // is finished by running it again.
  if (!Exists(f.previous_cert)) {
    if (Status s = Link(f.cert, f.previous_cert); !s.ok()) return s;
  }
  if (!Exists(f.previous_key)) {
    if (Status s = Link(f.key, f.previous_key); !s.ok()) return s;
  }
  if (Exists(f.next_key)) {
    if (Status s = Rename(f.next_key, f.key); !s.ok()) return s;
  }
  if (Status s = Rename(f.next_cert, f.cert); !s.ok()) return s;
  return SyncDir(dir);
}

Result<std::string> RetireClusterCaFiles(const std::string& dir, int64_t now) {
  const ClusterCaFiles f = core::csr::ClusterCaFilesIn(dir);
  if (Exists(f.next_cert)) {
    return Status::InvalidArgument("ca_rotation_stage", "the next cluster CA is not switched to yet; switch first");
  }
  if (!Exists(f.previous_cert)) {
    return Status::InvalidArgument("ca_rotation_none", "no cluster CA rotation is in progress");
  }
  const std::string target = f.retired + "/" + UtcStamp(now);
  if (::mkdir(f.retired.c_str(), 0700) != 0 && errno != EEXIST) {
    return Status::IoError("file_unwritable", f.retired + ": " + std::strerror(errno));
  }
  if (::mkdir(target.c_str(), 0700) != 0) {
    return Status::IoError("file_unwritable", target + ": " + std::strerror(errno));
  }
  // The key first: an interrupted retire leaves previous.crt, and the
  // rotation still at switched, to be retired again.
  if (Exists(f.previous_key)) {
    if (Status s = Rename(f.previous_key, target + "/ca.key"); !s.ok()) return s;
  }
  if (Status s = Rename(f.previous_cert, target + "/ca.crt"); !s.ok()) return s;
  if (Status s = SyncDir(dir); !s.ok()) return s;
  return target;
}

namespace {

json StateJson(const core::csr::ClusterCaState& s) {
  json j = {{"kind", "cluster"},
            {"stage", std::string(core::csr::ClusterCaStageName(s.stage))},
            {"current", {{"subject", s.subject}, {"not_after", s.not_after}, {"sha256", s.sha256}}}};
  if (!s.other_sha256.empty()) {
    const char* role = s.stage == ClusterCaStage::kPrepared ? "next" : "previous";
    j[role] = {{"subject", s.other_subject}, {"not_after", s.other_not_after}, {"sha256", s.other_sha256}};
  }
  return j;
}

std::string UserName() {
  const struct passwd* pw = ::getpwuid(::getuid());  // BORROWED, static storage
  return pw != nullptr ? pw->pw_name : "uid " + std::to_string(::getuid());
}

// The store the stage is audited in; a SQLite file must exist (a rotation
// on an appliance that was never initialised is a mistake, not a new store).
Result<std::unique_ptr<storage::Store>> OpenAuditStore(const std::string& database) {
  if (auto file = storage::DatabaseFile(database); file && !Exists(*file)) {
    return Status::NotFound("db_missing", "no database at " + *file + " (--database names the store)");
  }
  return storage::OpenStore(database);
}

void PrintState(const core::csr::ClusterCaState& s) {
  std::printf("cluster CA rotation: %s\n", std::string(core::csr::ClusterCaStageName(s.stage)).c_str());
  std::printf("  current:  %s, expires %s, sha256 %s\n", s.subject.c_str(), UtcTime(s.not_after).c_str(),
              s.sha256.c_str());
  if (!s.other_sha256.empty()) {
    std::printf("  %-9s %s, expires %s, sha256 %s\n", s.stage == ClusterCaStage::kPrepared ? "next:" : "previous:",
                s.other_subject.c_str(), UtcTime(s.other_not_after).c_str(), s.other_sha256.c_str());
  }
}

Result<NextClusterCa> NextFromArgs(const Args& args) {
  NextClusterCa next;
  next.generate = args.Has("generate");
  const bool import = args.Has("cert") || args.Has("key");
  if (next.generate == import) {
    return Status::InvalidArgument("usage", "prepare takes --generate, or --cert CERT --key KEY");
  }
  if (import) {
    if (Status s = args.Require({"cert", "key"}); !s.ok()) return s;
    next.cert = *args.Get("cert");
    next.key = *args.Get("key");
    return next;
  }
  auto days = args.GetInt("days", 3650, 1, 36500);
  if (!days.ok()) return days.status();
  next.days = static_cast<int>(*days);
  next.name = args.Get("name").value_or("rackgate cluster CA " + UtcStamp(std::time(nullptr)));
  return next;
}

// One stage's files, then its audit row. Returns the exit code.
int RunStage(const std::string& stage, const Args& args, const std::string& dir) {
  const std::string database = args.Get("database").value_or(args.Get("state-dir").value_or("/var/lib/rackgate") +
                                                              "/rackgate.db");
  auto store = OpenAuditStore(database);
  if (!store.ok()) return Fail("ca", store.status(), kExitUnusable);
  const int64_t now = std::time(nullptr);
  auto before = StateIn(dir);
  if (!before.ok()) return Fail("ca", before.status(), kExitUnusable);
  Status done;
  std::string retired;
  if (stage == "prepare") {
    auto next = NextFromArgs(args);
    if (!next.ok()) return Usage(kRotateHelp, next.status());
    done = PrepareClusterCaFiles(dir, *next);
  } else if (stage == "switch") {
    done = SwitchClusterCaFiles(dir);
  } else {
    auto r = RetireClusterCaFiles(dir, now);
    done = r.status();
    if (r.ok()) retired = *r;
  }
  if (!done.ok()) return Fail("ca", done, done.code() == Status::Code::kIoError ? kExitUnusable : kExitRefused);
  auto after = StateIn(dir);
  if (!after.ok()) return Fail("ca", after.status(), kExitUnusable);
  json detail = StateJson(*after);
  char host[256] = {};
  ::gethostname(host, sizeof(host) - 1);
  detail["appliance"] = host;
  if (!retired.empty()) detail["retired"] = {{"sha256", before->other_sha256}, {"dir", retired}};
  const std::string action = stage == "prepare" ? "ca_rotation_prepared"
                             : stage == "switch" ? "ca_rotation_switched"
                                                 : "ca_rotation_retired";
  if (Status s = (*store)->AuditApplianceEvent(action, detail.dump(), {UserName(), "ca rotate --cluster " + stage}, now);
      !s.ok()) {
    return Fail("ca", s.Annotate("the files are changed, the audit row is missing"), kExitUnusable);
  }
  if (args.Has("json")) return PrintJson(detail), kExitOk;
  PrintState(*after);
  std::printf("now: systemctl reload rackgated%s\n",
              stage == "retire" ? "" : "; and give `rackgatectl ca bundle --cluster` to the API server and kubelets");
  return kExitOk;
}

int RunBundle(int argc, char** argv, int first) {
  auto args = Args::Parse(argc, argv, first, {{"state-dir", "out"}, {"cluster"}, 0});
  if (!args.ok()) return Usage(kBundleHelp, args.status());
  if (args->Has("help")) return std::fputs(kBundleHelp, stdout), kExitOk;
  if (!args->Has("cluster")) return Usage(kBundleHelp, Status::InvalidArgument("usage", "say which CA: --cluster"));
  auto state = StateIn(args->Get("state-dir").value_or("/var/lib/rackgate") + "/cluster-ca");
  if (!state.ok()) return Fail("ca", state.status(), kExitUnusable);
  if (auto out = args->Get("out")) {
    const std::string& pem = state->bundle_pem;
    if (Status s = WriteFileAtomic(*out, std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(pem.data()),
                                                                   pem.size()));
        !s.ok()) {
      return Fail("ca", s, kExitUnusable);
    }
    ::chmod(out->c_str(), 0644);
    return kExitOk;
  }
  std::fputs(state->bundle_pem.c_str(), stdout);
  return kExitOk;
}

}  // namespace

int RunClusterCaRotation(const std::string& sub, int argc, char** argv, int first) {
  if (sub == "bundle") return RunBundle(argc, argv, first);
  auto args = Args::Parse(argc, argv, first,
                          {{"state-dir", "database", "name", "days", "cert", "key"}, {"cluster", "generate"}, 1});
  if (!args.ok()) return Usage(kRotateHelp, args.status());
  if (args->Has("help")) return std::fputs(kRotateHelp, stdout), kExitOk;
  if (args->positional().size() != 1) {
    return Usage(kRotateHelp, Status::InvalidArgument("usage", "give a stage: prepare, switch, retire or status"));
  }
  const std::string stage = args->positional()[0];
  if (stage != "prepare" && stage != "switch" && stage != "retire" && stage != "status") {
    return Usage(kRotateHelp, Status::InvalidArgument("usage", "unknown stage '" + stage + "'" +
                                                                   DidYouMean(stage, {"prepare", "switch", "retire",
                                                                                      "status"})));
  }
  if (stage != "prepare" && (args->Has("generate") || args->Has("cert") || args->Has("key") ||
                             args->Has("name") || args->Has("days"))) {
    return Usage(kRotateHelp, Status::InvalidArgument("usage", "--generate, --cert, --key, --name and --days are "
                                                               "prepare's"));
  }
  const std::string dir = args->Get("state-dir").value_or("/var/lib/rackgate") + "/cluster-ca";
  if (stage != "status") return RunStage(stage, *args, dir);
  auto state = StateIn(dir);
  if (!state.ok()) return Fail("ca", state.status(), kExitUnusable);
  if (args->Has("json")) return PrintJson(StateJson(*state)), kExitOk;
  PrintState(*state);
  return kExitOk;
}

}  // namespace rackgate::ctl
