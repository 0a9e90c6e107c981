// rackgatectl ek-cert urls|import: EK certificates a TPM does not hold
// (docs/operations.md, "EK certificates a TPM does not hold"). Each returns
// the process exit code (ctl/offline.h).
#ifndef RACKGATE_CTL_EK_CERT_COMMANDS_H_
#define RACKGATE_CTL_EK_CERT_COMMANDS_H_

#include <string>

namespace rackgate::ctl {

// rackgatectl ek-cert COMMAND ... (argv[first] is the subcommand).
int RunEkCert(const std::string& socket, int argc, char** argv, int first);

}  // namespace rackgate::ctl

#endif  // RACKGATE_CTL_EK_CERT_COMMANDS_H_
