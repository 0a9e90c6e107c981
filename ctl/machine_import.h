// rackgatectl import: an inventory (CSV or JSON) enrolled in one transaction
// over the admin API (wire/admin_machines.h, docs/inventory.md). Returns the
// exit code (ctl/exit_codes.h).
#ifndef RACKGATE_CTL_MACHINE_IMPORT_H_
#define RACKGATE_CTL_MACHINE_IMPORT_H_

#include <string>

namespace rackgate::ctl {

// import FILE [--dry-run]: every row or none.
int RunImport(const std::string& socket, int argc, char** argv, int first);

}  // namespace rackgate::ctl

#endif  // RACKGATE_CTL_MACHINE_IMPORT_H_
