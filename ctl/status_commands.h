// rackgatectl status over the admin API (wire/admin_status.h,
// core/status_service.h). Returns the exit code (ctl/exit_codes.h).
#ifndef RACKGATE_CTL_STATUS_COMMANDS_H_
#define RACKGATE_CTL_STATUS_COMMANDS_H_

#include <string>

namespace rackgate::ctl {

// status: machines by state, untrusted machines, recent failures.
int RunStatus(const std::string& socket, int argc, char** argv, int first);

}  // namespace rackgate::ctl

#endif  // RACKGATE_CTL_STATUS_COMMANDS_H_
