// rackgatectl's global flags, taken from anywhere on the command line.
#include "ctl/command_line.h"

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>

#include "ctl/admin_client.h"
#include "ctl/offline.h"

namespace rackgate::ctl {

std::optional<CommandLine> ParseCommandLine(int argc, char** argv) {
  static char kJsonFlag[] = "--json";
  static char kHelpFlag[] = "--help";
  CommandLine line;
  line.socket = kDefaultAdminSocket;
  if (const char* env = std::getenv("RACKGATE_ADMIN_SOCKET")) line.socket = env;
  // The global flags, wherever they are (kubectl and systemctl take them
  // before or after the command): --socket is taken here, --json and --help
  // are handed to the command after its own arguments.
  std::vector<char*> rest, after_dashes;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--") {
      after_dashes.assign(argv + i, argv + argc);
      break;
    }
    if (a == "--socket") {
      if (i + 1 >= argc) {
        std::fputs("rackgatectl: --socket needs a value\nRun 'rackgatectl --help' for usage.\n", stderr);
        return std::nullopt;
      }
      line.socket = argv[++i];
    } else if (a.rfind("--socket=", 0) == 0) {
      line.socket = a.substr(9);
    } else if (a == "--json") {
      line.json = true;
    } else if (a == "--help" || a == "-h") {
      line.help = true;
    } else if (a == "--version") {
      line.version = true;
    } else {
      rest.push_back(argv[i]);
    }
  }
  if (!rest.empty() && !std::strcmp(rest[0], "help")) {
    rest.erase(rest.begin());
    line.help = true;
  }
  if (rest.empty()) return line;
  line.args = {argv[0]};
  line.args.insert(line.args.end(), rest.begin(), rest.end());
  if (line.json) line.args.push_back(kJsonFlag);
  if (line.help) line.args.push_back(kHelpFlag);
  line.args.insert(line.args.end(), after_dashes.begin(), after_dashes.end());
  line.args.push_back(nullptr);
  return line;
}

int RunMain(int (*dispatch)(int, char**), int argc, char** argv) {
  try {
    return dispatch(argc, argv);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "rackgatectl: internal error: %s\n", e.what());
    return kExitUnusable;
  }
}

}  // namespace rackgate::ctl
