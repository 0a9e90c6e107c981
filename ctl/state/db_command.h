// rackgatectl db: the appliance's database, offline (docs/ha.md, "Moving an
// appliance from SQLite to PostgreSQL").
#ifndef RACKGATE_DAEMON_CTL_DB_COMMAND_H_
#define RACKGATE_DAEMON_CTL_DB_COMMAND_H_

#include <string>

namespace rackgate::ctl {

// rackgatectl db migrate --to URL [--from PATH | --state-dir DIR] [--dry-run]
// (argv[first] is the word after `db`). `socket` is the admin socket that
// must not answer: rackgated has to be stopped.
int RunDb(const std::string& socket, int argc, char** argv, int first);

}  // namespace rackgate::ctl

#endif  // RACKGATE_DAEMON_CTL_DB_COMMAND_H_
