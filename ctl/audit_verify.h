// rackgatectl audit verify's arguments and verdict, shared by its two paths:
// through rackgated's admin API (ctl/audit_commands.cc) and, with --database,
// on the SQLite file in rackgatectl-state (ctl/state/audit_file_command.cc).
#ifndef RACKGATE_CTL_AUDIT_VERIFY_H_
#define RACKGATE_CTL_AUDIT_VERIFY_H_

#include <cstdint>
#include <optional>
#include <string>

#include "wire/admin_audit.h"

namespace rackgate::ctl {

struct AuditVerifyRequest {
  struct Anchor {
    int64_t id = 0;
    std::string hash;  // 64 hex digits
  };
  bool json = false;
  std::optional<Anchor> anchor;
  std::optional<std::string> database;  // --database PATH
};

// Parses `audit verify`'s arguments (argv[first] is the word after
// `verify`) into *out. Returns -1 when the command is to run, otherwise the
// exit code after printing the help or the usage error.
int ParseAuditVerify(int argc, char** argv, int first, AuditVerifyRequest* out);

// Prints the verdict on the chain's report as text or JSON
// (wire::EncodeAuditChainVerdict, docs/audit.md); `message` is the first
// bad row's problem. Returns 0 when intact, else 1 (audit_chain_broken).
int ReportAuditChain(const wire::AuditChainView& report, const std::string& message, bool as_json);

}  // namespace rackgate::ctl

#endif  // RACKGATE_CTL_AUDIT_VERIFY_H_
