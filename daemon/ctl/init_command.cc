// rackgatectl init: database, appliance CA and serving certificate.
#include "daemon/ctl/init_command.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <ctime>
#include <string>

#include "daemon/ctl/args.h"
#include "daemon/ctl/offline.h"
#include "core/pki.h"
#include "storage/store.h"

namespace rackgate::ctl {

namespace {

constexpr char kInitHelp[] =
    "Usage: rackgatectl init --state-dir DIR [--name DNS]... [--address IP]...\n"
    "         [--renew-serving-cert]\n"
    "\n"
    "Creates an appliance's state directory, offline (rackgated need not run):\n"
    "  DIR/rackgate.db          the enrollment database (SQLite, WAL), with a\n"
    "                           pool named \"default\"\n"
    "  DIR/ca/ca.crt, ca.key    the appliance CA (ECDSA P-256, 10 years): the\n"
    "                           trust anchor pointer configs carry\n"
    "  DIR/tls/server.crt, .key the HTTPS serving certificate (leaf + CA),\n"
    "                           for every --name and --address given\n"
    "Keys are written with mode 0600. Running init again is safe: an existing\n"
    "database is migrated, an existing CA is kept (never overwritten), and the\n"
    "serving certificate is only reissued with --renew-serving-cert (for new\n"
    "names or addresses). Without --name/--address the certificate is for\n"
    "localhost and 127.0.0.1.\n";

bool Exists(const std::string& p) { return ::access(p.c_str(), F_OK) == 0; }

}  // namespace

int RunInit(int argc, char** argv, int first) {
  auto args = Args::Parse(argc, argv, first, {{"state-dir", "name", "address"}, {"renew-serving-cert"}});
  if (!args.ok()) {
    std::fprintf(stderr, "rackgatectl: %s\n\n%s", args.status().message().c_str(), kInitHelp);
    return kExitUnusable;
  }
  if (args->Has("help")) return std::fputs(kInitHelp, stdout), kExitOk;
  if (Status s = args->Require({"state-dir"}); !s.ok()) {
    std::fprintf(stderr, "rackgatectl: %s\n\n%s", s.message().c_str(), kInitHelp);
    return kExitUnusable;
  }
  const std::string dir = *args->Get("state-dir");
  auto fail = [](const Status& s) {
    std::fprintf(stderr, "rackgatectl init: error: %s\n", s.ToString().c_str());
    return kExitUnusable;
  };
  if (::mkdir(dir.c_str(), 0750) != 0 && errno != EEXIST) {
    return fail(Status::IoError("file_unwritable", "cannot create " + dir));
  }
  auto store = storage::Store::Open(dir + "/rackgate.db");
  if (!store.ok()) return fail(store.status());
  const int64_t now = static_cast<int64_t>(std::time(nullptr));
  if (!(*store)->GetPool("default").ok()) {
    storage::Pool pool;
    pool.name = "default";
    auto p = (*store)->PutPool(pool, storage::Actor{"rackgatectl init", "initial pool"}, now);
    if (!p.ok()) return fail(p.status());
  }
  std::printf("database:   %s/rackgate.db (schema version %d)\n", dir.c_str(),
              storage::Store::CurrentSchemaVersion());

  const std::string ca_crt = dir + "/ca/ca.crt", ca_key = dir + "/ca/ca.key";
  if (!Exists(ca_crt) && !Exists(ca_key)) {
    if (Status s = core::CreateCa({}, ca_crt, ca_key); !s.ok()) return fail(s);
  } else if (!Exists(ca_crt) || !Exists(ca_key)) {
    return fail(Status::InvalidArgument("pki_invalid", "only half of the appliance CA exists in " + dir +
                                                           "/ca; restore the other half from a backup"));
  }
  auto fp = core::CertificateFingerprint(ca_crt);
  if (!fp.ok()) return fail(fp.status());
  std::printf("CA:         %s (sha256 %s)\n", ca_crt.c_str(), fp->c_str());

  const std::string crt = dir + "/tls/server.crt", key = dir + "/tls/server.key";
  if (!Exists(crt) || !Exists(key) || args->Has("renew-serving-cert")) {
    core::ServingCertOptions o;
    o.dns_names = args->GetAll("name");
    o.ip_addresses = args->GetAll("address");
    if (o.dns_names.empty() && o.ip_addresses.empty()) {
      o.dns_names = {"localhost"};
      o.ip_addresses = {"127.0.0.1"};
    }
    if (Status s = core::IssueServingCertificate(o, ca_crt, ca_key, crt, key); !s.ok()) return fail(s);
    std::printf("serving:    %s (issued now)\n", crt.c_str());
  } else {
    std::printf("serving:    %s (kept; --renew-serving-cert reissues it)\n", crt.c_str());
  }
  return kExitOk;
}

}  // namespace rackgate::ctl
