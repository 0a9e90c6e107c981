// rackgatectl: the operator's command line. Dispatches to the offline
// commands (no daemon needed) and, later, to the admin API client.
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <string>

#include "daemon/ctl/admin_client.h"
#include "daemon/ctl/admin_commands.h"
#include "daemon/ctl/audit_commands.h"
#include "daemon/ctl/machine_commands.h"
#include "daemon/ctl/ca_command.h"
#include "daemon/ctl/eventlog_commands.h"
#include "daemon/ctl/init_command.h"
#include "daemon/ctl/offline.h"
#include "daemon/ctl/pointer_command.h"

namespace {

constexpr char kHelp[] =
    "Usage: rackgatectl [--socket PATH] COMMAND [OPTIONS]\n"
    "\n"
    "Appliance commands (talk to rackgated's admin socket, default\n"
    "/run/rackgate/admin.sock, or --socket PATH / $RACKGATE_ADMIN_SOCKET):\n"
    "  enroll           enroll a machine by its EK certificate or EK public area\n"
    "  import           enroll a CSV or JSON inventory, all or nothing\n"
    "  list, show       machines and their states\n"
    "  approve, revoke, reset\n"
    "                   change a machine's state (audited)\n"
    "  audit            the audit log\n"
    "  audit verify     check the audit log's hash chain\n"
    "  delete, rename   remove a machine, or fix its hostname (audited)\n"
    "  status           machines by state, recent attestation failures\n"
    "  pool put|show|diff\n"
    "                   pools: boot policies, Ignition templates\n"
    "  token rotate     a pool's provisioning token, with a grace period\n"
    "  certs            kubelet certificates signed for machines\n"
    "  events           webhook events and their deliveries\n"
    "  csr list|approve|deny\n"
    "                   kubelet CSRs waiting for an operator (manual approval)\n"
    "\n"
    "Setup (offline):\n"
    "  init             create a state directory: database, appliance CA, TLS\n"
    "  pointer          print a pool's pointer Ignition config\n"
    "  ca import|generate --cluster\n"
    "                   the cluster CA that signs kubelet certificates\n"
    "\n"
    "Offline commands (no daemon needed):\n"
    "  verify-quote     verify a TPM2_Quote made by tpm2_quote\n"
    "  makecredential   wrap a secret for a TPM's EK and an AK name\n"
    "  ek verify        validate an EK certificate against manufacturer roots\n"
    "  eventlog replay  replay a TCG event log into PCR values\n"
    "  eventlog show    list a TCG event log's events and boot facts\n"
    "  policy check     judge a measured boot against a boot policy\n"
    "\n"
    "Run `rackgatectl COMMAND --help` for a command's options and exit codes.\n"
    "Exit status: 0 ok; 1 refused (reason code on stderr); 2 unusable input.\n";

int Dispatch(int argc, char** argv) {
  using namespace rackgate::ctl;  // NOLINT
  // A global --socket before the command picks the admin socket.
  std::string socket = kDefaultAdminSocket;
  if (const char* env = std::getenv("RACKGATE_ADMIN_SOCKET")) socket = env;
  int at = 1;
  while (at + 1 < argc && (!std::strcmp(argv[at], "--socket"))) {
    socket = argv[at + 1];
    at += 2;
  }
  if (at > 1) {
    argv[at - 1] = argv[0];
    argv += at - 1;
    argc -= at - 1;
  }
  if (argc < 2 || !std::strcmp(argv[1], "--help") || !std::strcmp(argv[1], "-h") ||
      !std::strcmp(argv[1], "help")) {
    std::fputs(kHelp, argc < 2 ? stderr : stdout);
    return argc < 2 ? kExitUnusable : kExitOk;
  }
  const std::string cmd = argv[1];
  if (cmd == "--version") {
    std::puts("rackgatectl " RACKGATE_VERSION);
    return kExitOk;
  }
  if (cmd == "init") return RunInit(argc, argv, 2);
  if (cmd == "enroll") return RunEnroll(socket, argc, argv, 2);
  if (cmd == "import") return RunImport(socket, argc, argv, 2);
  if (cmd == "list") return RunList(socket, argc, argv, 2);
  if (cmd == "show") return RunShow(socket, argc, argv, 2);
  if (cmd == "approve" || cmd == "revoke" || cmd == "reset") {
    return RunMachineAction(cmd, socket, argc, argv, 2);
  }
  // ledger: delete, rename, audit verify (docs/lifecycle.md, docs/audit.md).
  if (cmd == "delete") return RunDelete(socket, argc, argv, 2);
  if (cmd == "rename") return RunRename(socket, argc, argv, 2);
  if (cmd == "audit" && argc >= 3 && !std::strcmp(argv[2], "verify")) return RunAuditVerify(socket, argc, argv, 3);
  if (cmd == "audit") return RunAudit(socket, argc, argv, 2);
  if (cmd == "status") return RunStatus(socket, argc, argv, 2);
  if (cmd == "pool") return RunPool(socket, argc, argv, 2);
  if (cmd == "token") return RunToken(socket, argc, argv, 2);
  if (cmd == "pointer") return RunPointer(argc, argv, 2);
  if (cmd == "certs") return RunCerts(socket, argc, argv, 2);
  if (cmd == "events") return RunEvents(socket, argc, argv, 2);
  if (cmd == "csr") return RunCsr(socket, argc, argv, 2);
  if (cmd == "ca") return RunCa(argc, argv, 2);
  if (cmd == "verify-quote") return RunVerifyQuote(argc, argv, 2);
  if (cmd == "makecredential") return RunMakeCredential(argc, argv, 2);
  if (cmd == "ek") {
    if (argc >= 3 && !std::strcmp(argv[2], "verify")) return RunEkVerify(argc, argv, 3);
    std::fputs("Usage: rackgatectl ek verify --help\n", argc >= 3 && !std::strcmp(argv[2], "--help") ? stdout : stderr);
    return argc >= 3 && !std::strcmp(argv[2], "--help") ? kExitOk : kExitUnusable;
  }
  if (cmd == "eventlog" && argc >= 3 && !std::strcmp(argv[2], "replay")) {
    return RunEventlogReplay(argc, argv, 3);
  }
  if (cmd == "eventlog" && argc >= 3 && !std::strcmp(argv[2], "show")) {
    return RunEventlogShow(argc, argv, 3);
  }
  if (cmd == "policy" && argc >= 3 && !std::strcmp(argv[2], "check")) {
    return RunPolicyCheck(argc, argv, 3);
  }
  if (cmd == "eventlog" || cmd == "policy") {
    const bool help = argc >= 3 && !std::strcmp(argv[2], "--help");
    std::fputs(cmd == "eventlog" ? "Usage: rackgatectl eventlog replay|show --help\n"
                                 : "Usage: rackgatectl policy check --help\n",
               help ? stdout : stderr);
    return help ? kExitOk : kExitUnusable;
  }
  std::fprintf(stderr, "rackgatectl: unknown command '%s'\n\n%s", cmd.c_str(), kHelp);
  return kExitUnusable;
}

}  // namespace

int main(int argc, char** argv) {
  // Nothing may escape main as an exception: a bug or resource exhaustion
  // becomes a clear message and exit 2, never an abort with a core dump.
  try {
    return Dispatch(argc, argv);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "rackgatectl: internal error: %s\n", e.what());
    return rackgate::ctl::kExitUnusable;
  }
}
