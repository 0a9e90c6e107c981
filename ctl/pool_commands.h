// rackgatectl pool and token over the admin API (wire/admin_pools.h,
// core/pool_service.h). Each returns the exit code (ctl/exit_codes.h).
#ifndef RACKGATE_CTL_POOL_COMMANDS_H_
#define RACKGATE_CTL_POOL_COMMANDS_H_

#include <string>

namespace rackgate::ctl {

// pool put|show|diff|remove-template (argv[first] is the subcommand).
int RunPool(const std::string& socket, int argc, char** argv, int first);
// token rotate --pool POOL --grace DURATION.
int RunToken(const std::string& socket, int argc, char** argv, int first);

}  // namespace rackgate::ctl

#endif  // RACKGATE_CTL_POOL_COMMANDS_H_
