// rackgatectl csr over the admin API (wire/admin_csrs.h,
// core/csr_service.h). Returns the exit code (ctl/exit_codes.h).
#ifndef RACKGATE_CTL_CSR_COMMANDS_H_
#define RACKGATE_CTL_CSR_COMMANDS_H_

#include <string>

namespace rackgate::ctl {

// Manual CSR approval: `csr list|approve|deny` (argv[first] is the
// subcommand).
int RunCsr(const std::string& socket, int argc, char** argv, int first);

}  // namespace rackgate::ctl

#endif  // RACKGATE_CTL_CSR_COMMANDS_H_
