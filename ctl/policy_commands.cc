// rackgatectl policy observe|enforce|propose|accept|put|show.
#include "ctl/policy_commands.h"

#include <cstdio>
#include <span>
#include <string>
#include <utility>

#include <nlohmann/json.hpp>

#include "base/files.h"
#include "base/utc_time.h"
#include "ctl/admin_util.h"
#include "ctl/json_util.h"
#include "ctl/args.h"
#include "ctl/offline.h"
#include "wire/admin_policy.h"
#include "wire/boot_policy_json.h"

namespace rackgate::ctl {

namespace {

using json = nlohmann::json;

constexpr char kObserveHelp[] =
    "Usage: rackgatectl policy observe --pool POOL [--reason TEXT] [--json]\n"
    "\n"
    "Puts POOL in observe mode for boot policy. Identity (EK chain, activation,\n"
    "quote, counters, event log replay) is checked as always; the pool's boot\n"
    "policy is evaluated and recorded but NOT ENFORCED, and each machine's\n"
    "boot (event log, quoted PCRs) is kept for `policy propose`. A machine\n"
    "gets its secrets only when a policy is in force and passes it; otherwise\n"
    "it waits (503 boot_policy_observing) until a policy is accepted\n"
    "(docs/policy.md, \"Observe\").\n"
    "\n"
    "Options:\n"
    "  --pool POOL     the pool\n"
    "  --reason TEXT   why, for the audit log\n"
    "  --json          print the daemon's answer as JSON\n"
    "\n"
    "Exit status: 0 done; 1 refused; 2 usage or daemon unreachable.\n";

constexpr char kEnforceHelp[] =
    "Usage: rackgatectl policy enforce --pool POOL [--reason TEXT] [--json]\n"
    "\n"
    "Puts POOL back to enforcing its boot policy (the default): a boot that\n"
    "breaks it is refused (403 boot_policy_violation).\n"
    "\n"
    "Options:\n"
    "  --pool POOL     the pool\n"
    "  --reason TEXT   why, for the audit log\n"
    "  --json          print the daemon's answer as JSON\n"
    "\n"
    "Exit status: 0 done; 1 refused; 2 usage or daemon unreachable.\n";

constexpr char kProposeHelp[] =
    "Usage: rackgatectl policy propose --pool POOL [--output FILE] [--json]\n"
    "\n"
    "Turns what POOL's machines were observed booting into a boot policy: the\n"
    "facts a strict majority share become rules; the machines that differ are\n"
    "named with what differs and the rules they would break; rules with no\n"
    "majority are left out and listed. Prints the proposal, the policy, its\n"
    "digest and the diff against the pool's current policy. Changes nothing.\n"
    "A kernel command line is printed as the SHA-256 of its text, never the\n"
    "text (it may carry secrets); the file --output writes holds the text.\n"
    "\n"
    "Options:\n"
    "  --pool POOL     the pool\n"
    "  --output FILE   also write the proposed policy to FILE, mode 0600 (to\n"
    "                  edit, then `rackgatectl policy put --pool POOL --policy FILE`)\n"
    "  --json          print the proposal as JSON\n"
    "\n"
    "Exit status: 0 done; 1 refused; 2 usage or daemon unreachable.\n";

constexpr char kAcceptHelp[] =
    "Usage: rackgatectl policy accept --pool POOL [--proposal SHA256]\n"
    "         [--keep-observing] [--reason TEXT] [--json]\n"
    "\n"
    "Stores the proposal `policy propose` shows as POOL's boot policy and\n"
    "enforces it, audited with its diff. Machines observed so far are judged\n"
    "by it at their next attestation. The diff printed and audited shows a\n"
    "kernel command line as the SHA-256 of its text.\n"
    "\n"
    "Options:\n"
    "  --pool POOL             the pool\n"
    "  --proposal SHA256       accept only that proposal (the digest `policy\n"
    "                          propose` printed): refused with proposal_changed\n"
    "                          when machines were observed since\n"
    "  --keep-observing        store the policy but keep observing (its verdicts\n"
    "                          are recorded; machines it passes get their secrets)\n"
    "  --reason TEXT           why, for the audit log\n"
    "  --json                  print the daemon's answer as JSON\n"
    "\n"
    "Exit status: 0 done; 1 refused; 2 usage or daemon unreachable.\n";

constexpr char kPutHelp[] =
    "Usage: rackgatectl policy put --pool POOL (--policy FILE | --clear)\n"
    "         [--keep-observing] [--reason TEXT] [--json]\n"
    "\n"
    "Puts an operator's boot policy (docs/policy.md) in force on POOL, audited\n"
    "with its diff, and enforces it; --clear removes the pool's policy. The\n"
    "file is checked here first, strictly (unknown fields, duplicate keys).\n"
    "The diff printed and audited shows a kernel command line as the SHA-256\n"
    "of its text.\n"
    "\n"
    "Options:\n"
    "  --pool POOL        the pool\n"
    "  --policy FILE      the policy (JSON, at most 1 MiB)\n"
    "  --clear            remove the pool's policy\n"
    "  --keep-observing   store it but keep observing\n"
    "  --reason TEXT      why, for the audit log\n"
    "  --json             print the daemon's answer as JSON\n"
    "\n"
    "Exit status: 0 done; 1 refused; 2 usage, a malformed policy, or daemon\n"
    "unreachable.\n";

constexpr char kShowHelp[] =
    "Usage: rackgatectl policy show --pool POOL [--output FILE] [--json]\n"
    "\n"
    "POOL's boot policy mode (enforce or observe), its policy, and the machines\n"
    "observed with the verdict of the policy that was in force then. A kernel\n"
    "command line is printed as the SHA-256 of its text (\"exact_sha256\"),\n"
    "never the text; --output writes the policy itself, text included.\n"
    "\n"
    "Options:\n"
    "  --pool POOL     the pool\n"
    "  --output FILE   also write the pool's policy to FILE, mode 0600 (to edit,\n"
    "                  then `rackgatectl policy put`); refused (policy_missing)\n"
    "                  when the pool has none\n"
    "  --json          print it as JSON\n"
    "\n"
    "Exit status: 0 done; 1 refused; 2 usage, FILE unwritable or daemon\n"
    "unreachable.\n";

std::string PoolPath(const std::string& pool, const std::string& tail) {
  return "/v1/admin/pools/" + pool + "/policy" + tail;
}

// --output FILE: the policy document itself, text and all, to the
// operator's file (mode 0600); never to the screen.
int WritePolicyFile(const std::string& path, const std::string& policy) {
  const std::string text = policy + (policy.empty() || policy.back() != '\n' ? "\n" : "");
  if (Status s = WriteFileAtomic(path, std::span(reinterpret_cast<const uint8_t*>(text.data()), text.size()));
      !s.ok()) {
    std::fprintf(stderr, "rackgatectl: cannot write %s: %s\n", path.c_str(), s.message().c_str());
    return kExitUnusable;
  }
  return kExitOk;
}

void PrintModeBanner(const std::string& pool, const std::string& mode) {
  if (mode == "observe") {
    std::printf("pool %s: OBSERVING: boot policy evaluated and recorded, NOT ENFORCED\n", pool.c_str());
  } else {
    std::printf("pool %s: enforcing its boot policy\n", pool.c_str());
  }
}

// Prints a view the wire module encoded, as PrintJson prints an answer.
void PrintEncoded(const std::string& encoded) { PrintJsonText(encoded); }

// accept and put: sends the change (the operator's --reason in it), prints
// the pool's mode and the diff (or the answer, with --json).
int SendPolicyChange(const std::string& socket, const char* method, const std::string& path, const std::string& body,
                     const Args& args) {
  int code = kExitOk;
  auto r = SendText(socket, method, path, body, &code);
  if (!r.ok()) return code;
  if (args.Has("json")) return PrintAnswer(*r), kExitOk;
  auto applied = DecodeAnswer(*r, wire::DecodePolicyAppliedView, &code);
  if (!applied.ok()) return code;
  PrintModeBanner(applied->pool, applied->mode);
  std::printf("diff against the previous policy:\n%s", applied->diff_text.c_str());
  return kExitOk;
}

int Mode(const std::string& socket, int argc, char** argv, int first, const char* help, const char* mode) {
  auto args = Args::Parse(argc, argv, first, {{"pool", "reason"}, {"json"}, 0});
  if (!args.ok()) return UsageError(help, args.status().message());
  if (args->Has("help")) return PrintHelp(help);
  if (Status s = args->Require({"pool"}); !s.ok()) return UsageError(help, s.message());
  const wire::PolicyModeRequest request{mode, args->Get("reason").value_or("")};
  int code = kExitOk;
  auto r = SendText(socket, "POST", PoolPath(*args->Get("pool"), "/mode"), wire::EncodePolicyModeRequest(request),
                    &code);
  if (!r.ok()) return code;
  if (args->Has("json")) return PrintAnswer(*r), kExitOk;
  auto set = DecodeAnswer(*r, wire::DecodePolicyModeView, &code);
  if (!set.ok()) return code;
  PrintModeBanner(set->pool, set->mode);
  if (std::string(mode) == "observe") {
    std::printf("boot its machines, then `rackgatectl policy propose --pool %s`\n", args->Get("pool")->c_str());
  }
  return kExitOk;
}

int Propose(const std::string& socket, int argc, char** argv, int first) {
  auto args = Args::Parse(argc, argv, first, {{"pool", "output"}, {"json"}, 0});
  if (!args.ok()) return UsageError(kProposeHelp, args.status().message());
  if (args->Has("help")) return PrintHelp(kProposeHelp);
  if (Status s = args->Require({"pool"}); !s.ok()) return UsageError(kProposeHelp, s.message());
  const std::string pool = *args->Get("pool");
  int code = kExitOk;
  auto r = Send(socket, "GET", PoolPath(pool, "/proposal"), &code);
  if (!r.ok()) return code;
  auto p = DecodeAnswer(*r, wire::DecodePolicyProposalView, &code);
  if (!p.ok()) return code;
  if (auto out = args->Get("output")) {
    if (int rc = WritePolicyFile(*out, p->policy_text.value_or("")); rc != kExitOk) return rc;
  }
  // SECURITY: the document (policy_text) may hold a kernel command line,
  // which must not reach a screen: only the shown form is printed.
  p->policy_text.reset();
  if (args->Has("json")) {
    p->text.reset();
    p->diff_text.reset();
    p->policy_shown.reset();
    return PrintEncoded(wire::EncodePolicyProposalView(*p)), kExitOk;
  }
  PrintModeBanner(p->pool, p->mode);
  std::printf("%s", p->text.value_or("").c_str());
  std::printf("\nproposed policy (sha256 %s):\n%s", p->proposal_sha256.c_str(), p->policy_shown.value_or("").c_str());
  std::printf("\ndiff against the pool's current policy:\n%s", p->diff_text.value_or("").c_str());
  std::printf("\naccept it with: rackgatectl policy accept --pool %s --proposal %s\n", pool.c_str(),
              p->proposal_sha256.c_str());
  if (auto out = args->Get("output")) std::fprintf(stderr, "proposed policy written to %s\n", out->c_str());
  return kExitOk;
}

int Accept(const std::string& socket, int argc, char** argv, int first) {
  auto args = Args::Parse(argc, argv, first, {{"pool", "proposal", "reason"}, {"keep-observing", "json"}, 0});
  if (!args.ok()) return UsageError(kAcceptHelp, args.status().message());
  if (args->Has("help")) return PrintHelp(kAcceptHelp);
  if (Status s = args->Require({"pool"}); !s.ok()) return UsageError(kAcceptHelp, s.message());
  const wire::PolicyAcceptRequest request{args->Get("proposal"), args->Has("keep-observing"),
                                          args->Get("reason").value_or("")};
  return SendPolicyChange(socket, "POST", PoolPath(*args->Get("pool"), "/accept"),
                          wire::EncodePolicyAcceptRequest(request), *args);
}

int Put(const std::string& socket, int argc, char** argv, int first) {
  auto args = Args::Parse(argc, argv, first, {{"pool", "policy", "reason"}, {"clear", "keep-observing", "json"}, 0});
  if (!args.ok()) return UsageError(kPutHelp, args.status().message());
  if (args->Has("help")) return PrintHelp(kPutHelp);
  if (Status s = args->Require({"pool"}); !s.ok()) return UsageError(kPutHelp, s.message());
  if (args->Has("policy") == args->Has("clear")) return UsageError(kPutHelp, "give --policy FILE or --clear");
  wire::PolicyPutRequest request{std::nullopt, args->Has("keep-observing"), args->Get("reason").value_or("")};
  if (auto path = args->Get("policy")) {
    auto bytes = ReadFile(*path, wire::kMaxPolicySize + 1);
    if (!bytes.ok()) {
      std::fprintf(stderr, "rackgatectl: %s: %s\n", path->c_str(), bytes.status().message().c_str());
      return kExitUnusable;
    }
    std::string text(bytes->begin(), bytes->end());
    // Checked here, with the file's name: the operator fixes it before the
    // daemon ever sees it. The daemon checks it again.
    if (auto parsed = wire::ParseBootPolicy(text); !parsed.ok()) {
      std::fprintf(stderr, "rackgatectl: %s: %s\n", path->c_str(), parsed.status().message().c_str());
      return kExitUnusable;
    }
    request.policy_text = std::move(text);
  }
  return SendPolicyChange(socket, "PUT", PoolPath(*args->Get("pool"), ""), wire::EncodePolicyPutRequest(request),
                          *args);
}

void PrintObserved(const wire::PolicyShowView& v) {
  const std::string policy =
      v.policy_shown_json ? json::parse(*v.policy_shown_json, nullptr, false).dump(2) : std::string("none");
  std::printf("policy: %s\n", policy.c_str());
  std::printf("observed machines: %lld\n", static_cast<long long>(v.observed));
  if (v.machines.empty()) return;
  Table t({"HOSTNAME", "OBSERVED", "VERDICT", "RULES BROKEN"});
  for (const wire::ObservedMachineView& m : v.machines) {
    std::string rules;
    for (const std::string& r : m.violations) rules += (rules.empty() ? "" : ",") + r;
    t.Add({m.hostname, UtcTime(m.at), m.verdict, rules.empty() ? "-" : rules});
  }
  t.Print();
}

int Show(const std::string& socket, int argc, char** argv, int first) {
  auto args = Args::Parse(argc, argv, first, {{"pool", "output"}, {"json"}, 0});
  if (!args.ok()) return UsageError(kShowHelp, args.status().message());
  if (args->Has("help")) return PrintHelp(kShowHelp);
  if (Status s = args->Require({"pool"}); !s.ok()) return UsageError(kShowHelp, s.message());
  int code = kExitOk;
  auto r = Send(socket, "GET", PoolPath(*args->Get("pool"), ""), &code);
  if (!r.ok()) return code;
  auto shown = DecodeAnswer(*r, wire::DecodePolicyShowView, &code);
  if (!shown.ok()) return code;
  if (auto out = args->Get("output")) {
    if (!shown->policy_text) {
      std::fprintf(stderr, "rackgatectl: refused: policy_missing: pool %s has no boot policy to write\n",
                   args->Get("pool")->c_str());
      return kExitRefused;
    }
    if (int rc = WritePolicyFile(*out, *shown->policy_text); rc != kExitOk) return rc;
  }
  // SECURITY: the document may hold a kernel command line, which must not
  // reach a screen: `policy` is its shown form.
  shown->policy_text.reset();
  if (args->Has("json")) return PrintEncoded(wire::EncodePolicyShowView(*shown)), kExitOk;
  PrintModeBanner(shown->pool, shown->mode);
  PrintObserved(*shown);
  if (auto out = args->Get("output")) std::fprintf(stderr, "policy written to %s\n", out->c_str());
  return kExitOk;
}

}  // namespace

int RunPolicyAdmin(const std::string& socket, int argc, char** argv, int first) {
  const std::string sub = argv[first];
  if (sub == "observe") return Mode(socket, argc, argv, first + 1, kObserveHelp, "observe");
  if (sub == "enforce") return Mode(socket, argc, argv, first + 1, kEnforceHelp, "enforce");
  if (sub == "propose") return Propose(socket, argc, argv, first + 1);
  if (sub == "accept") return Accept(socket, argc, argv, first + 1);
  if (sub == "put") return Put(socket, argc, argv, first + 1);
  return Show(socket, argc, argv, first + 1);
}

}  // namespace rackgate::ctl
