// rackgatectl pool put|show|diff|remove-template and token rotate over the
// admin API (wire/admin_pools.h, core/pool_service.h).
#include "ctl/commands.h"

#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "base/files.h"
#include "base/utc_time.h"
#include "ctl/admin_util.h"
#include "ctl/args.h"
#include "ctl/command_line.h"
#include "ctl/json_util.h"
#include "wire/admin_pools.h"

namespace rackgate::ctl {

namespace {

using nlohmann::json;

constexpr char kPoolHelp[] =
    "Usage: rackgatectl pool COMMAND ...\n"
    "\n"
    "A pool groups machines that share a boot policy and Ignition templates\n"
    "(docs/ignition.md). Commands:\n"
    "  put NAME               create or change a pool\n"
    "  show [NAME]            one pool, or every pool\n"
    "  diff NAME              compare a stored template with a file\n"
    "  remove-template NAME public|attested\n"
    "                         drop one of a pool's templates\n"
    "Run `rackgatectl pool COMMAND --help` for a command's options.\n"
    "\n"
    "Options:\n"
    RACKGATE_OPT_JSON RACKGATE_OPT_SOCKET RACKGATE_ADMIN_EXIT;

constexpr char kPoolPutHelp[] =
    "Usage: rackgatectl pool put NAME [--settings SETTINGS.json] [--policy POLICY.json]\n"
    "         [--public-template PUBLIC.ign] [--attested-template ATTESTED.ign]\n"
    "         [--token-required yes|no] [--json]\n"
    "\n"
    "Creates or changes pool NAME. The public template is served to anyone\n"
    "holding the pool's provisioning token at /config/NAME and must carry no\n"
    "secret; the attested template is merged on top of it for a machine that\n"
    "attested. put checks everything first (settings, policy, both templates:\n"
    "the spec, rackgate's secret rules, ignition-validate on the appliance),\n"
    "then stores all of it in one transaction or nothing; a refusal names the\n"
    "template. A pool that needs a token and has none gets one, printed once.\n"
    "Rotate it with `rackgatectl token rotate --pool NAME --grace DURATION`.\n"
    "\n"
    "Options:\n"
    "  --settings FILE           the pool's settings (JSON)\n"
    "  --policy FILE             the pool's boot policy (docs/policy.md)\n"
    "  --public-template FILE    the public Ignition template\n"
    "  --attested-template FILE  the attested Ignition template\n"
    "  --token-required yes|no   whether /config/NAME needs the token (default yes)\n"
    RACKGATE_OPT_JSON RACKGATE_OPT_SOCKET RACKGATE_ADMIN_EXIT;

constexpr char kPoolShowHelp[] =
    "Usage: rackgatectl pool show [NAME] [--template public|attested] [--json]\n"
    "\n"
    "Shows pool NAME (its tokens' ages, templates, policy and settings), or a\n"
    "table of every pool without NAME. --template prints one stored template\n"
    "as JSON.\n"
    "\n"
    "Options:\n"
    "  --template public|attested  print that stored template of NAME\n"
    RACKGATE_OPT_JSON RACKGATE_OPT_SOCKET RACKGATE_ADMIN_EXIT;

constexpr char kPoolDiffHelp[] =
    "Usage: rackgatectl pool diff NAME (--public-template FILE | --attested-template FILE) [--json]\n"
    "\n"
    "Compares the stored template of pool NAME with FILE, as `diff -u`.\n"
    "\n"
    "Options:\n"
    "  --public-template FILE    compare the public template with FILE\n"
    "  --attested-template FILE  compare the attested template with FILE\n"
    "  --json                    print {same, diff, stored, file} as JSON\n"
    RACKGATE_OPT_SOCKET
    "\n"
    "Exit status: 0 same; 1 different; 2 unusable input or rackgated unreachable.\n";

constexpr char kPoolRemoveTemplateHelp[] =
    "Usage: rackgatectl pool remove-template NAME public|attested [--json]\n"
    "\n"
    "Removes one of pool NAME's templates (audited).\n"
    "\n"
    "Options:\n"
    RACKGATE_OPT_JSON RACKGATE_OPT_SOCKET RACKGATE_ADMIN_EXIT;

constexpr char kTokenHelp[] =
    "Usage: rackgatectl token rotate --pool POOL --grace DURATION [--out FILE] [--json]\n"
    "\n"
    "Makes a new provisioning token for POOL and prints it once (or writes it to\n"
    "FILE, mode 0600). --grace is required: 0 stops the previous token at once;\n"
    "a duration (30m, 2h, 1d, 1h30m) keeps it valid that long for machines still\n"
    "booting with it. A token older than the previous one is dropped. Machines\n"
    "send the token as `Authorization: Bearer` (pointer httpHeaders, spec 3.1+)\n"
    "or as `?token=` in the URL (spec 3.0): `rackgatectl pointer`.\n"
    "\n"
    "Options:\n"
    "  --pool POOL           the pool\n"
    "  --grace DURATION      how long the previous token keeps working (required):\n"
    "                        0 (it stops at once), 90s, 30m, 2h, 1d, 1h30m\n"
    "  --out FILE            write the token to FILE (mode 0600) instead of stdout\n"
    RACKGATE_OPT_JSON RACKGATE_OPT_SOCKET RACKGATE_ADMIN_EXIT;

// A pool's stored template (its JSON text), pretty-printed, or "" when it
// has none.
std::string StoredTemplate(const wire::PoolView& pool, const std::string& which) {
  const auto& text = which == "public" ? pool.public_template_json : pool.attested_template_json;
  if (!text) return "";
  return json::parse(*text, nullptr, false).dump(2) + "\n";
}

// `diff -u` of two texts; its exit status (0 same, 1 different).
// Runs `diff -u` over a and b. Its text goes to stdout, or with `as_json`
// into one JSON document ({"same", "diff", "stored", "file"}). Exit 0 same,
// 1 different, 2 when diff could not run.
int ShowDiff(const std::string& a, const std::string& a_label, const std::string& b, const std::string& b_label,
             bool as_json) {
  char dir[] = "/tmp/rackgatectl-diff-XXXXXX";
  if (::mkdtemp(dir) == nullptr) return kExitUnusable;
  const std::string pa = std::string(dir) + "/a", pb = std::string(dir) + "/b";
  int rc = kExitUnusable;
  std::string text;
  int fds[2] = {-1, -1};
  if (WriteFileAtomic(pa, std::span(reinterpret_cast<const uint8_t*>(a.data()), a.size())).ok() &&
      WriteFileAtomic(pb, std::span(reinterpret_cast<const uint8_t*>(b.data()), b.size())).ok() &&
      ::pipe(fds) == 0) {
    std::fflush(stdout);
    const pid_t pid = ::fork();
    if (pid == 0) {
      ::dup2(fds[1], STDOUT_FILENO);
      ::close(fds[0]);
      ::close(fds[1]);
      ::execlp("diff", "diff", "-u", "--label", a_label.c_str(), "--label", b_label.c_str(), pa.c_str(), pb.c_str(),
               static_cast<char*>(nullptr));
      ::_exit(127);
    }
    ::close(fds[1]);
    char buf[4096];
    for (ssize_t n; (n = ::read(fds[0], buf, sizeof buf)) != 0;) {
      if (n < 0) {
        if (errno == EINTR) continue;
        break;
      }
      text.append(buf, static_cast<size_t>(n));
    }
    ::close(fds[0]);
    int status = 0;
    if (pid > 0 && ::waitpid(pid, &status, 0) == pid && WIFEXITED(status)) {
      rc = WEXITSTATUS(status) <= 1 ? WEXITSTATUS(status) : kExitUnusable;
    }
  }
  ::unlink(pa.c_str());
  ::unlink(pb.c_str());
  ::rmdir(dir);
  if (rc == kExitUnusable) {
    std::fprintf(stderr, "rackgatectl: could not run diff(1); is the diffutils package installed?\n");
    return rc;
  }
  if (as_json) {
    // `pool diff --json`: rackgatectl's own document, not an admin body.
    const json out = {{"same", rc == 0}, {"stored", a_label},  // admin-path: diff's output
                      {"file", b_label}, {"diff", text}};      // admin-path: diff's output
    PrintJson(out);
  } else {
    std::fputs(text.c_str(), stdout);
  }
  return rc;
}

// Template files by kind, as the operator named them.
std::vector<std::pair<std::string, std::string>> TemplateFiles(const Args& args) {
  std::vector<std::pair<std::string, std::string>> templates;
  for (const char* which : {"public", "attested"}) {
    if (auto f = args.Get(std::string(which) + "-template")) templates.emplace_back(which, *f);
  }
  return templates;
}

// The pool named in the path, decoded; *code says why not.
Result<wire::PoolView> GetPool(const std::string& socket, const std::string& name, int* code) {
  auto r = Send(socket, "GET", "/v1/admin/pools/" + name, code);
  if (!r.ok()) return r.status();
  return DecodeAnswer(*r, wire::DecodePoolView, code);
}

int RunPoolDiff(const std::string& socket, const Args& args) {
  const auto templates = TemplateFiles(args);
  if (args.positional().size() != 1 || templates.size() != 1) {
    return UsageError(kPoolDiffHelp, "give one pool NAME and one of --public-template or --attested-template");
  }
  auto file = ReadJsonFile(templates[0].second, 4 << 20);
  if (!file.ok()) return UsageError(kPoolDiffHelp, file.status().message());
  int code = kExitOk;
  auto pool = GetPool(socket, args.positional()[0], &code);
  if (!pool.ok()) return code;
  return ShowDiff(StoredTemplate(*pool, templates[0].first),
                  "stored " + templates[0].first + " template of " + args.positional()[0], file->dump(2) + "\n",
                  templates[0].second, args.Has("json"));
}

int RunPoolRemoveTemplate(const std::string& socket, const Args& args) {
  if (args.positional().size() != 2) return UsageError(kPoolRemoveTemplateHelp, "give NAME and public or attested");
  int code = kExitOk;
  auto r = Send(socket, "DELETE", "/v1/admin/pools/" + args.positional()[0] + "/templates/" + args.positional()[1],
                &code);
  if (!r.ok()) return code;
  if (args.Has("json")) return PrintAnswer(*r), kExitOk;
  std::printf("pool %s: %s template removed\n", args.positional()[0].c_str(), args.positional()[1].c_str());
  return kExitOk;
}

// The body of `pool put` from its options and files; a usage error's text.
Result<wire::PoolPutRequest> PoolPutFromArgs(const Args& args) {
  wire::PoolPutRequest put;
  // Read everything first: a bad file changes nothing on the appliance.
  for (const auto& [which, file] : TemplateFiles(args)) {
    auto doc = ReadJsonFile(file, 4 << 20);
    if (!doc.ok()) return doc.status();
    put.templates.push_back({which, doc->dump()});
  }
  if (auto t = args.Get("token-required")) {
    if (*t != "yes" && *t != "no") {
      return Status::InvalidArgument("field_invalid", "--token-required takes yes or no, got '" + *t + "'");
    }
    put.token_required = *t == "yes";
  }
  if (auto p = args.Get("settings")) {
    auto s = ReadJsonFile(*p, 1 << 20);
    if (!s.ok()) return s.status();
    put.settings_json = s->dump();
  }
  if (auto p = args.Get("policy")) {
    auto s = ReadJsonFile(*p, 1 << 20);
    if (!s.ok()) return s.status();
    put.boot_policy_given = true;
    put.boot_policy_json = s->dump();
  }
  return put;
}

int RunPoolPut(const std::string& socket, const Args& args) {
  if (args.positional().size() != 1) return UsageError(kPoolPutHelp, "give one pool NAME");
  const std::string name = args.positional()[0];
  auto put = PoolPutFromArgs(args);
  if (!put.ok()) return UsageError(kPoolPutHelp, put.status().message());
  // One request: the appliance checks everything, then stores everything
  // or nothing, so a refused template leaves no half-made pool and no
  // token that was never shown.
  int code = kExitOk;
  auto r = SendText(socket, "PUT", "/v1/admin/pools/" + name, wire::EncodePoolPutRequest(*put), &code);
  if (!r.ok()) return code;
  if (args.Has("json")) return PrintAnswer(*r), kExitOk;  // provisioning_token included
  auto pool = DecodeAnswer(*r, wire::DecodePoolView, &code);
  if (!pool.ok()) return code;
  std::printf("pool %s stored; provisioning token %s\n", pool->name.c_str(), pool->token_required ? "required" : "off");
  for (const auto& t : put->templates) std::printf("  %s template stored\n", t.which.c_str());
  if (pool->provisioning_token && !pool->provisioning_token->empty()) {
    std::printf("provisioning token (shown once; `rackgatectl pointer --pool %s --token-file FILE` uses it):\n%s\n",
                name.c_str(), pool->provisioning_token->c_str());
  }
  return kExitOk;
}

void PrintPoolTable(const std::vector<wire::PoolView>& pools) {
  Table table({"POOL", "TOKEN", "TOKENS", "PUBLIC", "ATTESTED", "POLICY", "UPDATED"});
  for (const auto& p : pools) {
    table.Add({p.name, p.token_required ? "required" : "off", std::to_string(p.provisioning_tokens.size()),
               p.public_template_json ? "yes" : "-", p.attested_template_json ? "yes" : "-",
               p.boot_policy_json ? "yes" : "-", UtcTime(p.updated_at)});
  }
  table.Print();
}

void PrintPool(const wire::PoolView& p) {
  std::printf("pool:             %s\n", p.name.c_str());
  std::printf("token required:   %s\n", p.token_required ? "yes" : "no");
  for (const auto& t : p.provisioning_tokens) {
    std::printf("  token:          %s since %s%s\n", t.current ? "current" : "previous",
                UtcTime(t.created_at).c_str(),
                t.valid_until ? (", valid until " + UtcTime(*t.valid_until)).c_str() : "");
  }
  std::printf("public template:  %s\n", p.public_template_json ? "yes" : "none");
  std::printf("attested template:%s\n", p.attested_template_json ? " yes" : " none");
  std::printf("boot policy:      %s\n", p.boot_policy_json ? "yes" : "none");
  std::printf("boot policy mode: %s\n",
              p.boot_policy_mode == "observe" ? "OBSERVE (evaluated and recorded, NOT ENFORCED)" : "enforce");
  std::printf("settings:         %s\n", p.settings_json.c_str());
}

int RunPoolShow(const std::string& socket, const Args& args) {
  std::string path = "/v1/admin/pools";
  if (!args.positional().empty()) path += "/" + args.positional()[0];
  int code = kExitOk;
  auto r = Send(socket, "GET", path, &code);
  if (!r.ok()) return code;
  if (auto which = args.Get("template")) {
    if (args.positional().empty()) return UsageError(kPoolShowHelp, "--template needs a pool NAME");
    auto pool = DecodeAnswer(*r, wire::DecodePoolView, &code);
    if (!pool.ok()) return code;
    const std::string text = StoredTemplate(*pool, *which);
    if (text.empty()) {
      std::fprintf(stderr, "rackgatectl: pool %s has no %s template\n", args.positional()[0].c_str(), which->c_str());
      return kExitRefused;
    }
    std::fputs(text.c_str(), stdout);
    return kExitOk;
  }
  if (args.Has("json")) return PrintAnswer(*r), kExitOk;
  if (args.positional().empty()) {
    auto pools = DecodeAnswer(*r, wire::DecodePoolList, &code);
    if (!pools.ok()) return code;
    PrintPoolTable(*pools);
    return kExitOk;
  }
  auto pool = DecodeAnswer(*r, wire::DecodePoolView, &code);
  if (!pool.ok()) return code;
  PrintPool(*pool);
  return kExitOk;
}

}  // namespace

int RunPool(const std::string& socket, int argc, char** argv, int first) {
  if (first >= argc) return UsageError(kPoolHelp, "give put, show, diff or remove-template");
  const std::string sub = argv[first];
  if (sub == "--help") return PrintHelp(kPoolHelp);
  static const std::vector<std::string> kSubs = {"put", "show", "diff", "remove-template"};
  if (std::find(kSubs.begin(), kSubs.end(), sub) == kSubs.end()) {
    return UsageError(kPoolHelp, "unknown pool command '" + sub + "'" + DidYouMean(sub, kSubs));
  }
  FlagSpec spec{{}, {"json"}, 1};
  const char* help = kPoolRemoveTemplateHelp;
  if (sub == "put") {
    spec.with_value = {"settings", "policy", "public-template", "attested-template", "token-required"};
    help = kPoolPutHelp;
  } else if (sub == "show") {
    spec.with_value = {"template"};
    help = kPoolShowHelp;
  } else if (sub == "diff") {
    spec.with_value = {"public-template", "attested-template"};
    help = kPoolDiffHelp;
  } else {
    spec.max_positional = 2;
  }
  auto args = Args::Parse(argc, argv, first + 1, spec);
  if (!args.ok()) return UsageError(help, args.status().message());
  if (args->Has("help")) return PrintHelp(help);
  if (sub == "diff") return RunPoolDiff(socket, *args);
  if (sub == "remove-template") return RunPoolRemoveTemplate(socket, *args);
  if (sub == "put") return RunPoolPut(socket, *args);
  return RunPoolShow(socket, *args);
}

int RunToken(const std::string& socket, int argc, char** argv, int first) {
  if (first >= argc) return UsageError(kTokenHelp, "give rotate");
  const std::string sub = argv[first];
  if (sub == "--help") return PrintHelp(kTokenHelp);
  if (sub != "rotate") return UsageError(kTokenHelp, "unknown token command '" + sub + "'" + DidYouMean(sub, {"rotate"}));
  auto args = Args::Parse(argc, argv, first + 1, {{"pool", "grace", "out"}, {"json"}, 0});
  if (!args.ok()) return UsageError(kTokenHelp, args.status().message());
  if (args->Has("help")) return PrintHelp(kTokenHelp);
  if (Status s = args->Require({"pool"}); !s.ok()) return UsageError(kTokenHelp, s.message());
  // No default grace: stopping the current token at once strands machines
  // whose pointer still carries it, keeping it lets a leaked one live on.
  // The operator says which.
  if (!args->Get("grace")) {
    return UsageError(kTokenHelp,
                      "give --grace: --grace 0 stops the current token at once, --grace 1h (or 30m, 2h, 1d) keeps "
                      "it valid that long for machines still booting with it");
  }
  auto seconds = args->GetDuration("grace", 0);
  if (!seconds.ok()) return UsageError(kTokenHelp, seconds.status().message());
  int code = kExitOk;
  auto r = SendText(socket, "POST", "/v1/admin/pools/" + *args->Get("pool") + "/token/rotate",
                    wire::EncodeTokenRotateRequest({*seconds}), &code);
  if (!r.ok()) return code;
  auto rotation = DecodeAnswer(*r, wire::DecodeTokenRotation, &code);
  if (!rotation.ok()) return code;
  const std::string token = rotation->provisioning_token;
  if (auto out = args->Get("out")) {
    const std::string line = token + "\n";
    if (Status s = WriteFileAtomic(*out, std::span(reinterpret_cast<const uint8_t*>(line.data()), line.size()));
        !s.ok()) {
      // The new token is active already: print it rather than lose it.
      std::fprintf(stderr,
                   "rackgatectl: the new token is active but could not be written to %s: %s; it follows on "
                   "stdout (shown once)\n",
                   out->c_str(), s.message().c_str());
      std::printf("%s\n", token.c_str());
      return kExitUnusable;
    }
    rotation->provisioning_token.clear();
  }
  // With --out, the token is in the file and not in the answer printed.
  if (args->Has("json")) {
    return PrintJsonText(args->Get("out") ? wire::EncodeTokenRotation(*rotation) : r->json), kExitOk;
  }
  if (auto out = args->Get("out")) {
    std::printf("pool %s: new provisioning token written to %s\n", args->Get("pool")->c_str(), out->c_str());
  } else {
    std::printf("%s\n", token.c_str());
  }
  if (rotation->previous_valid_until) {
    std::fprintf(stderr, "the previous token stays valid until %s\n",
                 UtcTime(*rotation->previous_valid_until).c_str());
  } else {
    std::fprintf(stderr, "the previous token no longer works\n");
  }
  return kExitOk;
}

}  // namespace rackgate::ctl
