// rackgatectl audit verify: its help, arguments and verdict.
#include "ctl/audit_verify.h"

#include <cstdio>
#include <nlohmann/json.hpp>

#include "ctl/admin_util.h"
#include "ctl/json_util.h"
#include "ctl/args.h"
#include "ctl/offline.h"

namespace rackgate::ctl {

namespace {

constexpr char kVerifyHelp[] =
    "Usage: rackgatectl audit verify [--database PATH] [--anchor ID:HASH] [--json]\n"
    "\n"
    "Walks the audit log's hash chain: every row must hash to its stored hash\n"
    "and name the row before it. Prints the number of rows and the head hash\n"
    "(keep it outside the appliance: only that shows newest rows cut off), or\n"
    "the first row that breaks the chain and what is wrong with it.\n"
    "\n"
    "Options:\n"
    "  --database PATH  read this SQLite file read-only instead of asking\n"
    "                   rackgated (for when it is down); never migrates it\n"
    "  --anchor ID:HASH row ID must exist and have this hash (a head kept\n"
    "                   outside: it shows rows cut off or re-hashed)\n"
    "  --json           print JSON instead of a table\n"
    "\n"
    "Exit status: 0 chain intact; 1 refused: audit_chain_broken (the first bad\n"
    "row on stderr); 2 unusable input, unreadable database or rackgated\n"
    "unreachable.\n";

}  // namespace

int ParseAuditVerify(int argc, char** argv, int first, AuditVerifyRequest* out) {
  auto args = Args::Parse(argc, argv, first, {{"database", "anchor"}, {"json"}, 0});
  if (!args.ok()) return UsageError(kVerifyHelp, args.status().message());
  if (args->Has("help")) return PrintHelp(kVerifyHelp);
  if (!args->positional().empty()) return UsageError(kVerifyHelp, "unexpected argument '" + args->positional()[0] + "'");
  out->json = args->Has("json");
  if (auto text = args->Get("anchor")) {
    const size_t colon = text->find(':');
    const bool ok = colon != std::string::npos && colon > 0 && colon < 20 &&
                    text->find_first_not_of("0123456789") == colon && text->size() - colon - 1 == 64;
    if (!ok) return UsageError(kVerifyHelp, "--anchor must be ID:HASH, as rackgated logs it (row id, 64 hex digits)");
    out->anchor = AuditVerifyRequest::Anchor{std::stoll(text->substr(0, colon)), text->substr(colon + 1)};
  }
  out->database = args->Get("database");
  return -1;
}

int ReportAuditChain(const wire::AuditChainView& report, const std::string& message, bool as_json) {
  if (as_json) PrintJson(nlohmann::json::parse(wire::EncodeAuditChainVerdict(report, message)));
  if (report.intact) {
    if (!as_json) {
      std::printf("chain intact: %lld rows, head %s\n", static_cast<long long>(report.rows), report.head_hash.c_str());
    }
    return kExitOk;
  }
  std::fprintf(stderr, "rackgatectl: refused: audit_chain_broken: %s\n", message.c_str());
  return kExitRefused;
}

}  // namespace rackgate::ctl
