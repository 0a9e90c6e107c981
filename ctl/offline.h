// rackgatectl's offline commands: verification that needs no daemon, built on
// libattest. Each returns the process exit code: 0 accepted, 1 refused (the
// reason on stderr), 2 unusable input or usage.
#ifndef RACKGATE_DAEMON_CTL_OFFLINE_H_
#define RACKGATE_DAEMON_CTL_OFFLINE_H_

#include <string>

#include "base/status.h"
#include "ctl/command_line.h"

namespace rackgate::ctl {

// True when something accepts connections on the Unix socket at `path`
// (rackgated's admin socket: it runs).
bool SocketAnswers(const std::string& path);

// Prints `why` and the command's help on stderr; returns kExitUnusable.
int Usage(const char* help, const Status& why);
// Prints on stderr, and returns `code`: for kExitRefused
// "rackgatectl: refused: reason: message" (docs/cli.md), otherwise
// "rackgatectl COMMAND: error: reason: message".
// A permission failure (`s` carries strerror(EACCES)) also gets a line
// naming who may run `command` (PermissionHint).
int Fail(const char* command, const Status& s, int code);
// For a failure whose message says "Permission denied", what to run
// instead (init: `sudo -u rackgate`; pointer: `sudo`); "" otherwise.
std::string PermissionHint(const std::string& command, const Status& s);

// rackgatectl verify-quote ... (argv[first] is the first flag)
int RunVerifyQuote(int argc, char** argv, int first);
// rackgatectl makecredential ...
int RunMakeCredential(int argc, char** argv, int first);
// rackgatectl ek verify ...
int RunEkVerify(int argc, char** argv, int first);
// rackgatectl ek roots ...
int RunEkRoots(int argc, char** argv, int first);

}  // namespace rackgate::ctl

#endif  // RACKGATE_DAEMON_CTL_OFFLINE_H_
