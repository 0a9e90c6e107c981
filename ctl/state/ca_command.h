// `rackgatectl ca`: the cluster CA that signs kubelet certificates
// (docs/csr.md). Offline: it writes the appliance's state directory.
#ifndef RACKGATE_DAEMON_CTL_CA_COMMAND_H_
#define RACKGATE_DAEMON_CTL_CA_COMMAND_H_

namespace rackgate::ctl {

int RunCa(int argc, char** argv, int first);

}  // namespace rackgate::ctl

#endif  // RACKGATE_DAEMON_CTL_CA_COMMAND_H_
