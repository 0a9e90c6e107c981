// rackgatectl audit verify --database: the audit chain of a SQLite file, read
// offline by rackgatectl-state (docs/audit.md).
#ifndef RACKGATE_CTL_AUDIT_FILE_COMMAND_H_
#define RACKGATE_CTL_AUDIT_FILE_COMMAND_H_

#include "ctl/audit_verify.h"

namespace rackgate::ctl {

// Verifies the chain of the SQLite file *request.database read-only, never
// migrating it. REQUIRES: request.database. Exit 0 chain intact; 1
// audit_chain_broken (the first bad row on stderr); 2 unreadable database.
int RunAuditVerifyFile(const AuditVerifyRequest& request);

}  // namespace rackgate::ctl

#endif  // RACKGATE_CTL_AUDIT_FILE_COMMAND_H_
