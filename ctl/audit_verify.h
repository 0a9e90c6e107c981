// rackgatectl audit verify's arguments and verdict, shared by its two paths:
// through rackgated's admin API (ctl/audit_commands.cc) and, with --database,
// on the SQLite file in rackgatectl-state (ctl/state/audit_file_command.cc).
#ifndef RACKGATE_CTL_AUDIT_VERIFY_H_
#define RACKGATE_CTL_AUDIT_VERIFY_H_

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

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

// Prints the verdict of the chain report `report` ({"intact", "rows",
// "head_hash", ...}, docs/audit.md) as text or JSON; `message` is the first
// bad row's problem. Returns 0 when intact, else 1 (audit_chain_broken).
int ReportAuditChain(const nlohmann::json& report, const std::string& message, bool as_json);

}  // namespace rackgate::ctl

#endif  // RACKGATE_CTL_AUDIT_VERIFY_H_
