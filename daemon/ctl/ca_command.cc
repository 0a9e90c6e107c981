#include "daemon/ctl/ca_command.h"

#include <sys/stat.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <string>

#include "daemon/ctl/args.h"
#include "base/files.h"
#include "daemon/ctl/offline.h"
#include "core/signer.h"

namespace rackgate::ctl {

namespace {

constexpr char kHelp[] =
    "Usage: rackgatectl ca import --cluster CERT.pem KEY.pem [--state-dir DIR]\n"
    "       rackgatectl ca generate --cluster [--name CN] [--days N] [--state-dir DIR]\n"
    "\n"
    "The cluster CA signs the kubelet certificates rackgate vouches for\n"
    "(docs/csr.md). import checks that CERT is a CA (CA:TRUE, keyCertSign), in\n"
    "its validity period, and that KEY is its key, then copies both into\n"
    "DIR/cluster-ca/ (the key with mode 0600). generate makes a new ECDSA P-256\n"
    "CA there, for labs. Neither overwrites an existing CA. rackgated loads the\n"
    "CA at the first CSR, or at `systemctl reload rackgated` (SIGHUP) when it\n"
    "already has one.\n"
    "  --state-dir  the appliance's state directory (default /var/lib/rackgate)\n"
    "Exit status: 0 done; 1 refused (not a CA, key mismatch, exists); 2 unusable input.\n";

bool Exists(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0;
}

}  // namespace

int RunCa(int argc, char** argv, int first) {
  if (first >= argc) return Usage(kHelp, Status::InvalidArgument("usage", "give import or generate"));
  const std::string sub = argv[first];
  auto args = Args::Parse(argc, argv, first + 1, {{"state-dir", "name", "days"}, {"cluster"}});
  if (!args.ok()) return Usage(kHelp, args.status());
  if (args->Has("help") || sub == "--help") return std::fputs(kHelp, stdout), kExitOk;
  if (!args->Has("cluster")) {
    return Usage(kHelp, Status::InvalidArgument("usage", "say which CA: --cluster (the only one rackgate imports)"));
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
    int days = 3650;
    if (auto d = args->Get("days")) {
      try {
        days = std::stoi(*d);
      } catch (...) {
        days = 0;
      }
      if (days < 1 || days > 36500) return Usage(kHelp, Status::InvalidArgument("usage", "--days is 1 to 36500"));
    }
    if (Status s = core::csr::GenerateClusterCa(args->Get("name").value_or("rackgate cluster CA"), days, cert, key);
        !s.ok()) {
      return Fail("ca", s, kExitUnusable);
    }
    std::printf("cluster CA generated in %s\n", dir.c_str());
    return kExitOk;
  }
  if (sub != "import") return Usage(kHelp, Status::InvalidArgument("usage", "unknown ca command '" + sub + "'"));
  if (args->positional().size() != 2) return Usage(kHelp, Status::InvalidArgument("usage", "give CERT.pem KEY.pem"));
  const std::string& in_cert = args->positional()[0];
  const std::string& in_key = args->positional()[1];
  if (Status s = core::csr::ValidateClusterCa(in_cert, in_key); !s.ok()) return Fail("ca", s, kExitRefused);
  auto c = ReadFile(in_cert, 1 << 20);
  if (!c.ok()) return Fail("ca", c.status(), kExitUnusable);
  auto k = ReadFile(in_key, 1 << 20);
  if (!k.ok()) return Fail("ca", k.status(), kExitUnusable);
  // The key first: a certificate without its key is never left behind as if
  // the import had worked.
  if (Status s = WriteFileAtomic(key, *k); !s.ok()) return Fail("ca", s, kExitUnusable);
  if (Status s = WriteFileAtomic(cert, *c); !s.ok()) return Fail("ca", s, kExitUnusable);
  ::chmod(cert.c_str(), 0644);
  std::printf("cluster CA imported into %s\n", dir.c_str());
  return kExitOk;
}

}  // namespace rackgate::ctl
