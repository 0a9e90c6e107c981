// rackgatectl events over the admin API (wire/admin_events.h,
// core/event_service.h). Returns the exit code (ctl/exit_codes.h).
#ifndef RACKGATE_CTL_EVENT_COMMANDS_H_
#define RACKGATE_CTL_EVENT_COMMANDS_H_

#include <string>

namespace rackgate::ctl {

// events: webhook events and their deliveries (docs/events.md).
int RunEvents(const std::string& socket, int argc, char** argv, int first);

}  // namespace rackgate::ctl

#endif  // RACKGATE_CTL_EVENT_COMMANDS_H_
