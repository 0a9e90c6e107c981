// rackgatectl's exit codes, one set for every command (docs/cli.md, "Exit
// status").
#ifndef RACKGATE_CTL_EXIT_CODES_H_
#define RACKGATE_CTL_EXIT_CODES_H_

namespace rackgate::ctl {

inline constexpr int kExitOk = 0;
inline constexpr int kExitRefused = 1;
inline constexpr int kExitUnusable = 2;

}  // namespace rackgate::ctl

#endif  // RACKGATE_CTL_EXIT_CODES_H_
