#include "ctl/state/ca_command.h"

#include <sys/stat.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <string>

#include "ctl/admin_util.h"
#include "ctl/json_util.h"
#include "ctl/args.h"
#include "base/files.h"
#include "ctl/offline.h"
#include "ctl/state/appliance_ca_rotation.h"
#include "core/signer.h"
#include "ctl/state/cluster_ca_rotation.h"

namespace rackgate::ctl {

namespace {

constexpr char kHelp[] =
    "Usage: rackgatectl ca COMMAND --cluster|--appliance ...\n"
    "\n"
    "The cluster CA signs the kubelet certificates rackgate vouches for\n"
    "(docs/csr.md). Commands:\n"
    "  import --cluster CERT.pem KEY.pem   copy an existing CA into the state dir\n"
    "  generate --cluster                  make a new CA there, for labs\n"
    "  rotate --appliance STAGE            rotate the appliance CA with an overlap:\n"
    "                                      prepare, switch, retire, status\n"
    "  bundle --appliance                  the appliance CA bundle to trust now\n"
    "  rotate --cluster STAGE              rotate it: prepare, switch, retire, status\n"
    "  bundle --cluster                    the CA bundle to trust now (during a rotation: both)\n"
    "Run `rackgatectl ca COMMAND --help` for a command's options.\n"
    "\n"
    "Options:\n"
    "  --help         this text\n"
    "\n"
    "Exit status: 0 done; 1 refused (not a CA, key mismatch, exists); 2 unusable input.\n";

constexpr char kImportHelp[] =
    "Usage: rackgatectl ca import --cluster CERT.pem KEY.pem [--state-dir DIR] [--json]\n"
    "\n"
    "Checks that CERT is a CA (CA:TRUE, keyCertSign), in its validity period,\n"
    "and that KEY is its key, then copies both into DIR/cluster-ca/ (the key\n"
    "with mode 0600). Never overwrites an existing CA. rackgated loads the CA\n"
    "at the first CSR, or at `systemctl reload rackgated` (SIGHUP) when it\n"
    "already has one.\n"
    "\n"
    "Options:\n"
    "  --cluster         the CA is the cluster CA (the only one rackgate imports)\n"
    "  --state-dir DIR   the appliance's state directory (default /var/lib/rackgate)\n"
    "  --json            print {\"cert\", \"key\"} (the paths written)\n"
    "\n"
    "Exit status: 0 done; 1 refused (not a CA, key mismatch, exists); 2 unusable input.\n";

constexpr char kGenerateHelp[] =
    "Usage: rackgatectl ca generate --cluster [--name CN] [--days N] [--state-dir DIR] [--json]\n"
    "\n"
    "Makes a new ECDSA P-256 cluster CA in DIR/cluster-ca/, for labs. Never\n"
    "overwrites an existing CA.\n"
    "\n"
    "Options:\n"
    "  --cluster         the CA is the cluster CA\n"
    "  --name CN         its common name (default \"rackgate cluster CA\")\n"
    "  --days N          its validity, 1 to 36500 days (default 3650)\n"
    "  --state-dir DIR   the appliance's state directory (default /var/lib/rackgate)\n"
    "  --json            print {\"cert\", \"key\"} (the paths written)\n"
    "\n"
    "Exit status: 0 done; 1 refused (exists); 2 unusable input.\n";

bool Exists(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0;
}

bool HasFlag(int argc, char** argv, int first, const char* flag) {
  for (int i = first; i < argc; ++i) {
    if (!std::strcmp(argv[i], flag)) return true;
  }
  return false;
}
// `ca rotate` and `ca bundle` name their CA; without one, this help says
// both forms (each form's own --help has the details).
constexpr char kRotateWhichHelp[] =
    "Usage: rackgatectl ca rotate --appliance STAGE [--state-dir DIR] [--database URL] [--force] [--json]\n"
    "       rackgatectl ca rotate --cluster STAGE [--generate [--name CN] [--days N] | --cert CERT --key KEY]\n"
    "                             [--state-dir DIR] [--database URL] [--json]\n"
    "\n"
    "Rotates a CA with an overlap, one STAGE per run: prepare, switch, retire,\n"
    "or status (docs/operations.md, \"Rotating the appliance CA\" and \"Rotating\n"
    "the cluster CA\"). `ca rotate --appliance --help` and `ca rotate --cluster\n"
    "--help` say more.\n"
    "\n"
    "Options:\n"
    "  --appliance      the appliance CA (pointer configs, the agents' ca.pem)\n"
    "  --cluster        the cluster CA (signer mode's kubelet certificates)\n"
    "  --state-dir DIR  the appliance's state directory (default /var/lib/rackgate)\n"
    "  --database URL   the store (default DIR/rackgate.db)\n"
    "  --force          appliance switch: even while machines lack the bundle\n"
    "  --generate, --name CN, --days N, --cert CERT, --key KEY\n"
    "                   cluster prepare: a new lab CA, or the cluster's own\n"
    "  --json           print the result as JSON\n"
    "\n"
    "Exit status: 0 done; 1 refused; 2 unusable input.\n";

constexpr char kBundleWhichHelp[] =
    "Usage: rackgatectl ca bundle --appliance|--cluster [--out FILE] [--state-dir DIR] [--database URL]\n"
    "\n"
    "Prints (or writes to FILE) the CA bundle to trust now: during a rotation,\n"
    "both CAs. `ca bundle --appliance --help` and `--cluster --help` say more.\n"
    "\n"
    "Options:\n"
    "  --appliance      the appliance CA's bundle (a node's /etc/rackgate/ca.pem)\n"
    "  --cluster        the cluster CA's bundle (the API server's --client-ca-file)\n"
    "  --out FILE       write it there instead of stdout\n"
    "  --state-dir DIR  the appliance's state directory (default /var/lib/rackgate)\n"
    "  --database URL   the store (default DIR/rackgate.db)\n"
    "\n"
    "Exit status: 0 done; 1 refused; 2 unusable input.\n";

// The cluster CA's rotation (ctl/state/cluster_ca_rotation.h) when the
// command names --cluster.
bool IsCluster(int argc, char** argv, int first) { return HasFlag(argc, argv, first, "--cluster"); }

}  // namespace

int RunCa(int argc, char** argv, int first) {
  if (first >= argc) return Usage(kHelp, Status::InvalidArgument("usage", "give import or generate"));
  const std::string sub = argv[first];
  if (sub == "--help") return std::fputs(kHelp, stdout), kExitOk;
  // rotate and bundle: the cluster CA's with --cluster, the appliance CA's
  // with --appliance; with neither, their common help or a refusal to guess.
  if (sub == "rotate" || sub == "bundle") {
    if (IsCluster(argc, argv, first + 1)) return RunClusterCaRotation(sub, argc, argv, first + 1);
    if (HasFlag(argc, argv, first + 1, "--appliance")) return RunApplianceCa(argc, argv, first);
    const char* help = sub == "rotate" ? kRotateWhichHelp : kBundleWhichHelp;
    if (HasFlag(argc, argv, first + 1, "--help")) return std::fputs(help, stdout), kExitOk;
    return Usage(help, Status::InvalidArgument("usage", "say which CA: ca " + sub + " --appliance or --cluster"));
  }
  if (sub != "import" && sub != "generate") {
    return Usage(kHelp, Status::InvalidArgument("usage", "unknown ca command '" + sub + "'" +
                                                             DidYouMean(sub, {"import", "generate"})));
  }
  const char* help = sub == "import" ? kImportHelp : kGenerateHelp;
  auto args = sub == "import" ? Args::Parse(argc, argv, first + 1, {{"state-dir"}, {"cluster"}, 2})
                              : Args::Parse(argc, argv, first + 1, {{"state-dir", "name", "days"}, {"cluster"}, 0});
  if (!args.ok()) return Usage(help, args.status());
  if (args->Has("help")) return std::fputs(help, stdout), kExitOk;
  if (!args->Has("cluster")) {
    return Usage(help, Status::InvalidArgument("usage", "say which CA: --cluster (the only one rackgate imports)"));
  }
  auto days = args->GetInt("days", 3650, 1, 36500);
  if (!days.ok()) return Usage(help, days.status());
  if (sub == "import" && args->positional().size() != 2) {
    return Usage(help, Status::InvalidArgument("usage", "give CERT.pem KEY.pem"));
  }
  const std::string dir = args->Get("state-dir").value_or("/var/lib/rackgate") + "/cluster-ca";
  const std::string cert = dir + "/ca.crt", key = dir + "/ca.key";
  if (Exists(cert) || Exists(key)) {
    return Fail("ca", Status::InvalidArgument("ca_exists", dir + " already holds a cluster CA; move it away first"),
                kExitRefused);
  }
  if (::mkdir(dir.c_str(), 0700) != 0 && errno != EEXIST) {
    return Fail("ca", Status::IoError("file_unwritable", dir + ": " + std::strerror(errno)), kExitUnusable);
  }
  if (sub == "generate") {
    if (Status s = core::csr::GenerateClusterCa(args->Get("name").value_or("rackgate cluster CA"),
                                                static_cast<int>(*days), cert, key);
        !s.ok()) {
      return Fail("ca", s, kExitUnusable);
    }
    if (args->Has("json")) return PrintJson({{"generated", true}, {"cert", cert}, {"key", key}}), kExitOk;
    std::printf("cluster CA generated in %s\n", dir.c_str());
    return kExitOk;
  }
  const std::string& in_cert = args->positional()[0];
  const std::string& in_key = args->positional()[1];
  // A file that cannot be read is unusable input (exit 2, docs/cli.md); a
  // readable one that is no usable CA is refused (exit 1).
  if (Status s = core::csr::ValidateClusterCa(in_cert, in_key); !s.ok()) {
    return Fail("ca", s, s.code() == Status::Code::kIoError ? kExitUnusable : kExitRefused);
  }
  auto c = ReadFile(in_cert, 1 << 20);
  if (!c.ok()) return Fail("ca", c.status(), kExitUnusable);
  auto k = ReadFile(in_key, 1 << 20);
  if (!k.ok()) return Fail("ca", k.status(), kExitUnusable);
  // The key first: a certificate without its key is never left behind as if
  // the import had worked.
  if (Status s = WriteFileAtomic(key, *k); !s.ok()) return Fail("ca", s, kExitUnusable);
  if (Status s = WriteFileAtomic(cert, *c); !s.ok()) return Fail("ca", s, kExitUnusable);
  ::chmod(cert.c_str(), 0644);
  if (args->Has("json")) return PrintJson({{"imported", true}, {"cert", cert}, {"key", key}}), kExitOk;
  std::printf("cluster CA imported into %s\n", dir.c_str());
  return kExitOk;
}

}  // namespace rackgate::ctl
