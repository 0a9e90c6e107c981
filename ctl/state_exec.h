// Runs rackgatectl-state, the binary that holds the commands working on an
// appliance's state directory (its database and CA keys: init, db, ca,
// audit verify --database), so that rackgatectl itself links neither the
// store nor SQLite nor libpq (docs/cli.md, "Two binaries").
#ifndef RACKGATE_CTL_STATE_EXEC_H_
#define RACKGATE_CTL_STATE_EXEC_H_

#include <string>

namespace rackgate::ctl {

inline constexpr char kStateBinary[] = "rackgatectl-state";

// Where rackgatectl-state is: next to the running executable (the resolved
// /proc/self/exe, so a build tree's ctl/ or a prefix's bin/), else in
// RACKGATE_LIBEXEC_DIR (the configured libexecdir/rackgate). The first one
// that is an executable file; empty when neither is.
std::string FindStateBinary();

// Replaces the process with rackgatectl-state, handing it `argv` unchanged
// (rackgatectl's own, git-style: it takes the global flags the same way).
// Returns only on failure, after printing why on stderr: kExitUnusable.
int ExecStateBinary(char** argv);

}  // namespace rackgate::ctl

#endif  // RACKGATE_CTL_STATE_EXEC_H_
