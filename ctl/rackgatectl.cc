// rackgatectl: the operator's command line. Takes the global flags from
// anywhere on the line, then dispatches to the admin API commands, the setup
// commands and the offline commands (docs/cli.md); the commands on the state
// directory's database and CA keys it hands to rackgatectl-state.
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <string>
#include <vector>

#include "ctl/admin_client.h"
#include "ctl/admin_util.h"
#include "ctl/args.h"
#include "ctl/audit_verify.h"
#include "ctl/command_line.h"
#include "ctl/commands.h"
#include "ctl/ek_cert_commands.h"
#include "ctl/policy_commands.h"
#include "ctl/eventlog_commands.h"
#include "ctl/offline.h"
#include "ctl/pointer_command.h"
#include "ctl/state_exec.h"

namespace {

constexpr char kHelp[] =
    "Usage: rackgatectl COMMAND [OPTIONS]\n"
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
    "  ek-cert urls|import\n"
    "                   EK certificates only online (Intel PTT, AMD fTPM):\n"
    "                   their vendor URLs; import them, verified\n"
    "  policy observe|propose|accept|put|enforce|show\n"
    "                   a pool's boot policy: observe boots, then enforce\n"
    "\n"
    "Setup (offline):\n"
    "  init             create a state directory: database, appliance CA, TLS\n"
    "  pointer          print a pool's pointer Ignition config, or --kernel-args\n"
    "  ca import|generate|rotate|bundle --cluster\n"
    "                   the cluster CA that signs kubelet certificates\n"
    "  ca rotate|bundle --appliance\n"
    "                   rotate the appliance CA with an overlap; its bundle\n"
    "  db migrate       copy a stopped appliance's SQLite store into PostgreSQL\n"
    "  backup, restore  the appliance's store, keys, config and EK anchors in\n"
    "                   one archive, and back onto a fresh appliance\n"
    "\n"
    "Offline commands (no daemon needed):\n"
    "  verify-quote     verify a TPM2_Quote made by tpm2_quote\n"
    "  makecredential   wrap a secret for a TPM's EK and an AK name\n"
    "  ek verify        validate an EK certificate against manufacturer roots\n"
    "  ek roots         list the EK trust anchors (and the leaves each accepts)\n"
    "  eventlog replay  replay a TCG event log into PCR values\n"
    "  eventlog show    list a TCG event log's events and boot facts\n"
    "  policy check     judge a measured boot against a boot policy\n"
    "\n"
    "Global options (before or after the command):\n"
    "  --socket PATH    rackgated's admin socket\n"
    "  --json           print one JSON document on stdout instead of text\n"
    "  --help, -h       a command's help: synopsis, options, exit status\n"
    "  --version        rackgatectl's version\n"
    "\n"
    "Run `rackgatectl COMMAND --help` (or `rackgatectl help COMMAND`) for a\n"
    "command's options and exit codes.\n"
    "\n"
    "Exit status: 0 ok; 1 refused (reason code on stderr); 2 unusable input or\n"
    "rackgated unreachable.\n";

constexpr char kEkHelp[] =
    "Usage: rackgatectl ek COMMAND ...\n"
    "\n"
    "Endorsement key tools, offline (no daemon needed). Commands:\n"
    "  verify           validate an EK certificate against manufacturer roots\n"
    "  roots            list the trust anchors, and how many leaves each accepts\n"
    "Run `rackgatectl ek COMMAND --help` for its options.\n"
    "\n"
    "Options:\n"
    "  --help           this text\n"
    "\n"
    "Exit status: 0 done; 1 refused (reason code on stderr); 2 unusable input.\n";

constexpr char kEventlogHelp[] =
    "Usage: rackgatectl eventlog COMMAND FILE ...\n"
    "\n"
    "TCG event log tools, offline (no daemon needed). Commands:\n"
    "  replay FILE      replay a binary event log into PCR values\n"
    "  show FILE        list its events and the boot facts a policy judges\n"
    "Run `rackgatectl eventlog COMMAND --help` for a command's options.\n"
    "\n"
    "Options:\n"
    "  --help           this text\n"
    "\n"
    "Exit status: 0 done; 2 unreadable or malformed log.\n";

constexpr char kPolicyHelp[] =
    "Usage: rackgatectl policy COMMAND ...\n"
    "\n"
    "Boot policy: from observing what a pool's machines boot to enforcing a\n"
    "policy (docs/policy.md). Commands:\n"
    "  observe          observe a pool's boots; its policy is not enforced\n"
    "  propose          a policy from what was observed, with the odd machines\n"
    "  accept           store the proposal and enforce it\n"
    "  put              put an edited policy in force (or --clear it)\n"
    "  enforce          enforce a pool's policy again (the default)\n"
    "  show             a pool's mode, policy and observed machines\n"
    "  check            judge a measured boot against a policy, offline\n"
    "Run `rackgatectl policy COMMAND --help` for its options.\n"
    "\n"
    "Options:\n"
    "  --help           this text\n"
    "\n"
    "Exit status: 0 done (check: the policy passes); 1 refused (check: it does\n"
    "not); 2 unusable input or usage.\n";

// Every command and subcommand with its own flags (the global ones come on
// top): the bash completion is generated from this table, and the CLI test
// (daemon/tests/cli.sh) checks it against each command's parser and help,
// so neither can drift from the other.
struct CommandFlags {
  const char* words;
  const char* flags;
};
constexpr CommandFlags kCommands[] = {
    {"init", "--state-dir --database --name --address --renew-serving-cert --token-out"},
    {"enroll", "--hostname --pool --ek-cert --ek-public --address --replace-addresses --var --replace-vars --unset-var --policy --clear-policy --replace-ek"},
    {"import", "--dry-run"},
    {"list", "--pool --state"},
    {"show", ""},
    {"approve", "--hostname --pool --address --var --reason"},
    {"revoke", "--reason"},
    {"reset", "--reason --unrevoke"},
    {"audit", "--hostname --limit"},
    {"audit verify", "--database --anchor"},
    {"delete", "--reason"},
    {"rename", "--reason"},
    {"status", ""},
    {"pool put", "--settings --policy --public-template --attested-template --token-required"},
    {"pool show", "--template"},
    {"pool diff", "--public-template --attested-template"},
    {"pool remove-template", ""},
    {"token rotate", "--pool --grace --out"},
    {"certs", "--hostname --limit"},
    {"events", "--pending --limit"},
    {"csr list", "--all"},
    {"csr approve", "--reason --uid"},
    {"csr deny", "--reason --uid"},
    {"ek-cert urls", "--vendor"},
    {"ek-cert import", ""},
    {"pointer", "--pool --url --ca --state-dir --token-file --no-token --spec --kernel-args --bundle --initramfs-ca"},
    {"ca import", "--cluster --state-dir"},
    {"ca generate", "--cluster --name --days --state-dir"},
    {"ca rotate", "--appliance --cluster --state-dir --database --force --generate --name --days --cert --key"},
    {"ca bundle", "--appliance --cluster --state-dir --database --out"},
    {"db migrate", "--to --from --state-dir --dry-run"},
    {"backup", "--out --config --state-dir"},
    {"restore", "--from --state-dir --config-out --rebase --force"},
    {"verify-quote", "--ak-public --message --signature --pcrs --nonce --pcr-list"},
    {"makecredential", "--ek-public --name --secret --output"},
    {"ek verify", "--roots --intermediates --config --allow --cert --ek-public --at"},
    {"ek roots", "--roots --intermediates --config --allow --leaves --at"},
    {"eventlog replay", ""},
    {"eventlog show", ""},
    {"policy observe", "--pool --reason"},
    {"policy enforce", "--pool --reason"},
    {"policy propose", "--pool --output"},
    {"policy accept", "--pool --proposal --keep-observing --reason"},
    {"policy put", "--pool --policy --clear --keep-observing --reason"},
    {"policy show", "--pool --output"},
    {"policy check", "--policy --eventlog --pcrs --message --pcrs-json --tofu-recorded --tofu-record-to --pcr-signature"},
};
constexpr char kGlobalFlags[] = "--json --socket --help";

std::vector<std::string> Split(const std::string& s) {
  std::vector<std::string> out;
  size_t i = 0;
  while (i < s.size()) {
    const size_t j = std::min(s.find(' ', i), s.size());
    if (j > i) out.push_back(s.substr(i, j - i));
    i = j + 1;
  }
  return out;
}

// The first command words, in table order, without repeats.
std::vector<std::string> TopCommands() {
  std::vector<std::string> out;
  for (const auto& c : kCommands) {
    const std::string top = Split(c.words)[0];
    if (std::find(out.begin(), out.end(), top) == out.end()) out.push_back(top);
  }
  return out;
}

std::vector<std::string> Subcommands(const std::string& top) {
  std::vector<std::string> out;
  for (const auto& c : kCommands) {
    const auto w = Split(c.words);
    if (w.size() == 2 && w[0] == top) out.push_back(w[1]);
  }
  return out;
}

// `rackgatectl completion table`: one line per command, "WORDS<TAB>FLAGS".
int PrintCompletionTable() {
  for (const auto& c : kCommands) std::printf("%s\t%s\n", c.words, c.flags);
  return 0;
}

// `rackgatectl completion bash`: the bash completion script.
int PrintBashCompletion() {
  std::string tops, groups, cases;
  for (const auto& top : TopCommands()) {
    tops += top + " ";
    const auto subs = Subcommands(top);
    if (!subs.empty()) {
      std::string list;
      for (const auto& s : subs) list += (list.empty() ? "" : " ") + s;
      groups += "    " + top + ") subs=\"" + list + "\" ;;\n";
    }
  }
  for (const auto& c : kCommands) {
    cases += "    \"" + std::string(c.words) + "\") flags=\"" + c.flags + "\" ;;\n";
  }
  std::printf(
      "# bash completion for rackgatectl, generated by `rackgatectl completion bash`.\n"
      "_rackgatectl() {\n"
      "  local cur=\"${COMP_WORDS[COMP_CWORD]}\" prev=\"${COMP_WORDS[COMP_CWORD-1]}\"\n"
      "  local cmd=\"\" sub=\"\" subs=\"\" flags=\"\" i w\n"
      "  for ((i = 1; i < COMP_CWORD; i++)); do\n"
      "    w=\"${COMP_WORDS[i]}\"\n"
      "    case \"$w\" in\n"
      "      --socket) i=$((i + 1)); continue ;;\n"
      "      -*) continue ;;\n"
      "    esac\n"
      "    if [[ -z \"$cmd\" ]]; then cmd=\"$w\"; elif [[ -z \"$sub\" ]]; then sub=\"$w\"; fi\n"
      "  done\n"
      "  [[ \"$prev\" == --socket ]] && return 0\n"
      "  if [[ -z \"$cmd\" ]]; then\n"
      "    COMPREPLY=($(compgen -W \"%s--socket --json --help --version\" -- \"$cur\"))\n"
      "    return 0\n"
      "  fi\n"
      "  case \"$cmd\" in\n"
      "%s"
      "  esac\n"
      "  if [[ -n \"$subs\" && -z \"$sub\" ]]; then\n"
      "    COMPREPLY=($(compgen -W \"$subs --help\" -- \"$cur\"))\n"
      "    return 0\n"
      "  fi\n"
      "  local key=\"$cmd\"\n"
      "  [[ -n \"$subs\" ]] && key=\"$cmd $sub\"\n"
      "  case \"$key\" in\n"
      "%s"
      "    *) return 0 ;;\n"
      "  esac\n"
      "  if [[ \"$cur\" == -* ]]; then\n"
      "    COMPREPLY=($(compgen -W \"$flags %s\" -- \"$cur\"))\n"
      "  fi\n"
      "  return 0\n"
      "}\n"
      "complete -o default -F _rackgatectl rackgatectl\n",
      tops.c_str(), groups.c_str(), cases.c_str(), kGlobalFlags);
  return 0;
}

// A group command's subcommand, or its help: `ek verify`, `ek --help`.
// Returns -1 when `sub` is a known subcommand (the caller runs it).
int GroupHelpOrError(const char* help, const std::string& group, int argc, char** argv) {
  if (argc < 3) return rackgate::ctl::UsageError(help, "give a " + group + " command");
  const std::string sub = argv[2];
  if (sub == "--help") return rackgate::ctl::PrintHelp(help);
  const auto subs = Subcommands(group);
  if (std::find(subs.begin(), subs.end(), sub) != subs.end()) return -1;
  return rackgate::ctl::UsageError(help, "unknown " + group + " command '" + sub + "'" +
                                             rackgate::ctl::DidYouMean(sub, subs));
}



int Dispatch(int argc, char** argv) {
  using namespace rackgate::ctl;  // NOLINT
  char** const own_argv = argv;
  auto line = ParseCommandLine(argc, argv);
  if (!line) return kExitUnusable;
  if (line->version) {
    if (line->json) {
      std::puts("{\"version\": \"" RACKGATE_VERSION "\"}");
    } else {
      std::puts("rackgatectl " RACKGATE_VERSION);
    }
    return kExitOk;
  }
  if (line->args.empty()) {
    std::fputs(kHelp, line->help ? stdout : stderr);
    return line->help ? kExitOk : kExitUnusable;
  }
  const std::string& socket = line->socket;
  argc = line->argc();
  argv = line->argv();

  const std::string cmd = argv[1];
  if (cmd == "completion") {  // hidden: for the build and the CLI test
    if (argc == 3 && !std::strcmp(argv[2], "bash")) return PrintBashCompletion();
    if (argc == 3 && !std::strcmp(argv[2], "table")) return PrintCompletionTable();
    std::fputs("rackgatectl: give `completion bash`\n", stderr);
    return kExitUnusable;
  }
  // The commands on the state directory's database and CA keys run in
  // rackgatectl-state, handed this process's argv as it came.
  if (cmd == "init" || cmd == "db" || cmd == "ca" || cmd == "backup" || cmd == "restore") {
    return ExecStateBinary(own_argv);
  }
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
  if (cmd == "audit" && argc >= 3 && !std::strcmp(argv[2], "verify")) {
    AuditVerifyRequest request;
    if (int rc = ParseAuditVerify(argc, argv, 3, &request); rc >= 0) return rc;
    return request.database ? ExecStateBinary(own_argv) : RunAuditVerify(socket, request);
  }
  if (cmd == "audit") return RunAudit(socket, argc, argv, 2);
  if (cmd == "status") return RunStatus(socket, argc, argv, 2);
  if (cmd == "pool") return RunPool(socket, argc, argv, 2);
  if (cmd == "token") return RunToken(socket, argc, argv, 2);
  if (cmd == "pointer") return RunPointer(argc, argv, 2);
  if (cmd == "certs") return RunCerts(socket, argc, argv, 2);
  if (cmd == "events") return RunEvents(socket, argc, argv, 2);
  if (cmd == "csr") return RunCsr(socket, argc, argv, 2);
  if (cmd == "ek-cert") return RunEkCert(socket, argc, argv, 2);
  if (cmd == "verify-quote") return RunVerifyQuote(argc, argv, 2);
  if (cmd == "makecredential") return RunMakeCredential(argc, argv, 2);
  if (cmd == "ek") {
    if (int rc = GroupHelpOrError(kEkHelp, cmd, argc, argv); rc >= 0) return rc;
    if (!std::strcmp(argv[2], "roots")) return RunEkRoots(argc, argv, 3);
    return RunEkVerify(argc, argv, 3);
  }
  if (cmd == "eventlog") {
    if (int rc = GroupHelpOrError(kEventlogHelp, cmd, argc, argv); rc >= 0) return rc;
    return !std::strcmp(argv[2], "replay") ? RunEventlogReplay(argc, argv, 3) : RunEventlogShow(argc, argv, 3);
  }
  if (cmd == "policy") {
    if (int rc = GroupHelpOrError(kPolicyHelp, cmd, argc, argv); rc >= 0) return rc;
    if (!std::strcmp(argv[2], "check")) return RunPolicyCheck(argc, argv, 3);
    return RunPolicyAdmin(socket, argc, argv, 2);
  }
  // A typo gets a suggestion and a pointer to the help, not the whole help.
  if (cmd[0] == '-') {
    std::fprintf(stderr, "rackgatectl: unknown option %s; give a command first\nRun 'rackgatectl --help' for the commands.\n",
                 cmd.c_str());
    return kExitUnusable;
  }
  std::fprintf(stderr, "rackgatectl: unknown command '%s'%s\nRun 'rackgatectl --help' for the commands.\n",
               cmd.c_str(), DidYouMean(cmd, TopCommands()).c_str());
  return kExitUnusable;
}

}  // namespace

int main(int argc, char** argv) { return rackgate::ctl::RunMain(Dispatch, argc, argv); }
