// rackgatectl's global flags (--socket, --json, --help, --version), taken from
// anywhere on the line, the same way by rackgatectl and rackgatectl-state,
// which is handed rackgatectl's own argv, and the exit codes of both
// (docs/cli.md).
#ifndef RACKGATE_CTL_COMMAND_LINE_H_
#define RACKGATE_CTL_COMMAND_LINE_H_

#include <optional>
#include <string>
#include <vector>

namespace rackgate::ctl {

// Every command's exit status (docs/cli.md, "Exit status").
inline constexpr int kExitOk = 0;
inline constexpr int kExitRefused = 1;
inline constexpr int kExitUnusable = 2;

struct CommandLine {
  // The admin socket: --socket, else $RACKGATE_ADMIN_SOCKET, else the default.
  std::string socket;
  bool json = false;
  bool help = false;
  bool version = false;
  // argv[0], the command words and their own arguments, then --json and
  // --help when given anywhere, then `--` and what follows it, then a null
  // pointer: what the commands' parsers take. Empty when there is no command.
  // The pointers are BORROWED from the process's argv (or are static).
  std::vector<char*> args;

  int argc() const { return static_cast<int>(args.size()) - 1; }
  char** argv() { return args.data(); }
};

// The command line of `argv`, with a leading `help` word taken as --help.
// On a usage error (--socket without a value) prints it on stderr and returns
// nullopt: the caller exits kExitUnusable.
std::optional<CommandLine> ParseCommandLine(int argc, char** argv);

// Both binaries' main: runs `dispatch`, and lets nothing escape as an
// exception: a bug or resource exhaustion becomes "rackgatectl: internal
// error: ..." on stderr and exit kExitUnusable, never an abort with a core dump.
int RunMain(int (*dispatch)(int, char**), int argc, char** argv);

}  // namespace rackgate::ctl

#endif  // RACKGATE_CTL_COMMAND_LINE_H_
