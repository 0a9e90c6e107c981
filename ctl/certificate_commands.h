// rackgatectl certs over the admin API (wire/admin_certificates.h,
// core/certificate_service.h). Returns the exit code (ctl/exit_codes.h).
#ifndef RACKGATE_CTL_CERTIFICATE_COMMANDS_H_
#define RACKGATE_CTL_CERTIFICATE_COMMANDS_H_

#include <string>

namespace rackgate::ctl {

// certs [--hostname NAME] [--limit N]: the kubelet certificates signed.
int RunCerts(const std::string& socket, int argc, char** argv, int first);

}  // namespace rackgate::ctl

#endif  // RACKGATE_CTL_CERTIFICATE_COMMANDS_H_
