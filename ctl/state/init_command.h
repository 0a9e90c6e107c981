// rackgatectl init: creates an appliance's state directory offline.
#ifndef RACKGATE_DAEMON_CTL_INIT_COMMAND_H_
#define RACKGATE_DAEMON_CTL_INIT_COMMAND_H_

namespace rackgate::ctl {

// rackgatectl init --state-dir DIR [--name DNS]... [--address IP]...
int RunInit(int argc, char** argv, int first);

}  // namespace rackgate::ctl

#endif  // RACKGATE_DAEMON_CTL_INIT_COMMAND_H_
