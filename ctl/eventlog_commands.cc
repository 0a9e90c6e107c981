// rackgatectl eventlog replay, eventlog show and policy check.
#include "ctl/eventlog_commands.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "attest/boot_facts.h"
#include "attest/boot_policy.h"
#include "attest/eventlog.h"
#include "attest/pcr_file.h"
#include "attest/quote.h"
#include "attest/tpm.h"
#include "base/text.h"
#include "ctl/admin_util.h"
#include "ctl/json_util.h"
#include "ctl/args.h"
#include "base/files.h"
#include "ctl/offline.h"
#include "wire/boot_policy_json.h"
#include "wire/pcr_signature_json.h"
#include "base/hex.h"

namespace rackgate::ctl {

namespace {

using attest::Bytes;

constexpr size_t kMaxQuoteFile = 64 * 1024;
constexpr size_t kShortDigestHex = 16;

constexpr char kReplayHelp[] =
    "Usage: rackgatectl eventlog replay FILE [--json]\n"
    "\n"
    "Replays a binary TCG event log (as /sys/kernel/security/tpm0/\n"
    "binary_bios_measurements holds it; SHA-1 or crypto-agile) into the PCR\n"
    "values it describes, per bank, and prints them.\n"
    "Only PCRs some event extends are listed (plus PCR 0 when the log sets a\n"
    "startup locality); any other PCR of a replayed bank still holds its reset\n"
    "value. A declared bank is left out when some event carries no digest for\n"
    "it, or we cannot hash it: its values would be a guess. The log is not\n"
    "evidence by itself; compare the values with a verified quote.\n"
    "\n"
    "Options:\n"
    "  --json   print {\"pcrs\": {\"sha256\": {\"0\": \"<hex>\", ...}, \"sha1\": {...}},\n"
    "           \"banks\": [...], \"events\": N}: banks strongest first, PCRs in\n"
    "           ascending order, lower-case hex. Without it, a table.\n"
    "\n"
    "Exit status: 0 replayed; 2 unreadable or malformed log (reason on stderr).\n";

constexpr char kShowHelp[] =
    "Usage: rackgatectl eventlog show FILE [--json]\n"
    "\n"
    "Prints one line per event: index, PCR, type, the first 16 hex digits of\n"
    "its sha256 digest (or of its only bank, named, in a SHA-1 log; '-' for\n"
    "EV_NO_ACTION, which extends nothing), and what its data says: variable\n"
    "name, application path, separator value, logged string. Marks events\n"
    "whose data does not match their digest ([data!=digest]) and anomalies\n"
    "(an event type off its PCR, malformed data, ...). Then the boot facts a\n"
    "policy judges: Secure Boot, separators, command line, counts.\n"
    "\n"
    "Everything shown comes from the log itself, which proves nothing until\n"
    "it replays to a verified quote. Non-printable bytes are escaped.\n"
    "\n"
    "Options:\n"
    "  --json   print {\"events\": [{\"index\", \"pcr\", \"type\", \"digest\",\n"
    "           \"data\", \"marks\"}...], \"facts\": {...}} instead of the table\n"
    "\n"
    "Exit status: 0 shown; 2 unreadable or malformed log.\n";

constexpr char kPolicyCheckHelp[] =
    "Usage: rackgatectl policy check --policy POLICY.json --eventlog FILE\n"
    "         [--pcrs PCRS --message QUOTE.msg | --pcrs-json FILE]\n"
    "         [--tofu-recorded FILE] [--tofu-record-to FILE] [--pcr-signature FILE]\n"
    "         [--json]\n"
    "\n"
    "Judges a measured boot against a boot policy (format: docs/policy.md):\n"
    "the log must replay to the quoted PCRs, then every rule is checked and\n"
    "EVERY violation is printed, one per line, as `rule: reason: message`.\n"
    "\n"
    "Quoted PCRs come from one of:\n"
    "  --pcrs PCRS --message QUOTE.msg   tpm2_quote's -o and -m outputs; the\n"
    "      values are read against the quote's own PCR selection and must\n"
    "      hash to its pcrDigest. The quote's signature and nonce are NOT\n"
    "      checked here: run `rackgatectl verify-quote` on it first.\n"
    "  --pcrs-json FILE   {\"pcrs\": {...}} as `eventlog replay --json` prints.\n"
    "  neither: the log is judged against its own replay (unextended PCRs at\n"
    "      their reset values). Useful to try a policy; proves nothing about a\n"
    "      machine, and a note on stderr says so.\n"
    "\n"
    "Trust on first use (the policy's \"tofu\" PCRs): --tofu-recorded reads the\n"
    "values recorded at the machine's first passing check ({\"pcrs\": ...});\n"
    "without it this check is the first use. On success the values to keep\n"
    "are written to --tofu-record-to (atomically, mode 0600) or printed.\n"
    "A failing check records nothing.\n"
    "\n"
    "Signed PCR 11 (the policy's \"uki_signed\"): --pcr-signature reads the\n"
    "`systemd-measure sign` document the machine booted with (on the machine:\n"
    "/run/systemd/tpm2-pcr-signature.json), as the agent sends it.\n"
    "\n"
    "Options:\n"
    "  --policy FILE          the boot policy (JSON)\n"
    "  --eventlog FILE        the binary TCG event log\n"
    "  --pcrs FILE            tpm2_quote's PCR values (with --message)\n"
    "  --message FILE         tpm2_quote's quoted message (with --pcrs)\n"
    "  --pcrs-json FILE       quoted PCRs as JSON\n"
    "  --tofu-recorded FILE   values recorded at the first passing check\n"
    "  --tofu-record-to FILE  where to write the values to keep\n"
    "  --pcr-signature FILE   the systemd-measure sign JSON document\n"
    "  --json                 print {\"ok\", \"violations\": [{\"rule\", \"reason\",\n"
    "                         \"message\"}], \"events\", \"secure_boot\"} on stdout\n"
    "\n"
    "Exit status: 0 the policy passes; 1 it does not (every violation on\n"
    "stderr); 2 unusable input (malformed policy, log, PCR or quote file).\n";

std::string Hex(std::span<const uint8_t> b) { return hex::Encode(b); }

Result<attest::EventLog> LoadEventLog(const std::string& path) {
  auto bytes = ReadFile(path, attest::kMaxEventLogSize);
  if (!bytes.ok()) return bytes.status();
  auto log = attest::ParseEventLog(*bytes);
  if (!log.ok()) return log.status().Annotate(path);
  return log;
}

// The one positional FILE of the eventlog commands.
Result<std::string> OnePath(const Args& args) {
  if (args.positional().size() != 1) {
    return Status::InvalidArgument("usage", "expected exactly one event log FILE");
  }
  return args.positional()[0];
}

std::string BankNames(const std::vector<uint16_t>& banks) {
  std::string s;
  for (uint16_t b : banks) s += (s.empty() ? "" : " ") + attest::HashAlgName(b);
  return s;
}

// The digest `eventlog show` prints: sha256 when the event has it.
std::string ShortDigest(const attest::Event& ev) {
  if (ev.type == attest::kEvNoAction || ev.digests.empty()) return "-";
  auto it = ev.digests.find(attest::kAlgSha256);
  std::string prefix;
  if (it == ev.digests.end()) {
    it = ev.digests.begin();
    prefix = attest::HashAlgName(it->first) + ":";
  }
  return prefix + Hex(it->second).substr(0, kShortDigestHex);
}

const char* SeparatorKindName(attest::SeparatorKind k) {
  switch (k) {
    case attest::SeparatorKind::kNormal: return "normal";
    case attest::SeparatorKind::kError: return "ERROR";
    case attest::SeparatorKind::kMalformed: return "MALFORMED";
  }
  return "?";
}


void PrintFacts(const attest::BootFacts& f) {
  std::printf("\nboot facts (from the log alone):\n");
  std::printf("  secure boot: %s%s\n", attest::SecureBootStateName(f.secure_boot),
              f.uefi_debug_mode ? " (UEFI Debug Mode logged)" : "");
  for (const attest::SecureBootVariable& v : f.secure_boot_variables) {
    if (v.name == "SecureBoot") continue;
    size_t sigs = 0;
    for (const auto& l : v.signature_lists) sigs += l.signatures.size();
    std::printf("  %-4s event %u: %zu signature lists, %zu signatures%s\n", v.name.c_str(),
                v.event_index, v.signature_lists.size(), sigs,
                v.signature_lists_valid ? "" : " (MALFORMED)");
  }
  std::string seps;
  for (const attest::Separator& s : f.separators) {
    seps += " " + std::to_string(s.pcr) + ":" + SeparatorKindName(s.kind);
  }
  std::printf("  separators (PCR:kind):%s\n", seps.empty() ? " none" : seps.c_str());
  std::printf("  boot applications: %zu, authorities: %zu, boot files: %zu, option ROMs: %zu\n",
              f.boot_applications.size(), f.authorities.size(), f.boot_files.size(), f.option_roms.size());
  for (const attest::KernelCmdline& k : f.kernel_cmdlines) {
    std::printf("  kernel command line (event %u, PCR %u, %s, %s): %s\n", k.event_index, k.pcr,
                k.source.c_str(), k.verified ? "verified" : "DOES NOT MATCH ITS DIGEST",
                text::PrintableAscii(k.text, 400).c_str());
  }
  std::printf("  events whose data does not match their digest: %zu\n", f.data_mismatches.size());
  std::printf("  anomalies: %zu\n", f.anomalies.size());
  for (const attest::Anomaly& a : f.anomalies) {
    std::printf("    %s: %s\n", a.reason.c_str(), a.message.c_str());
  }
}

// `eventlog show --json`: the events and the boot facts, as the table shows them.
nlohmann::json EventLogJson(const attest::EventLog& log, const attest::BootFacts& f,
                            const std::map<uint32_t, std::vector<std::string>>& marks) {
  using nlohmann::json;
  json banks = json::array();
  for (uint16_t b : log.banks) banks.push_back(attest::HashAlgName(b));
  json events = json::array();
  for (const attest::Event& ev : log.events) {
    json e = {{"index", ev.index}, {"type", attest::EventTypeName(ev.type)}, {"digest", ShortDigest(ev)},
              {"data", attest::DescribeEvent(ev)}, {"marks", json::array()}};
    e["pcr"] = ev.pcr <= attest::kMaxPcrIndex ? json(ev.pcr) : json(nullptr);
    if (auto it = marks.find(ev.index); it != marks.end()) e["marks"] = it->second;
    events.push_back(std::move(e));
  }
  json separators = json::array();
  for (const attest::Separator& s : f.separators) {
    separators.push_back({{"pcr", s.pcr}, {"kind", SeparatorKindName(s.kind)}});
  }
  json cmdlines = json::array();
  for (const attest::KernelCmdline& k : f.kernel_cmdlines) {
    cmdlines.push_back({{"event", k.event_index}, {"pcr", k.pcr}, {"source", k.source}, {"verified", k.verified},
                        {"text", text::PrintableAscii(k.text, 400)}});
  }
  json anomalies = json::array();
  for (const attest::Anomaly& a : f.anomalies) {
    anomalies.push_back({{"event", a.event_index}, {"reason", a.reason}, {"message", a.message}});
  }
  return {{"crypto_agile", log.crypto_agile},
          {"banks", banks},
          {"events", events},
          {"facts",
           {{"secure_boot", attest::SecureBootStateName(f.secure_boot)},
            {"uefi_debug_mode", f.uefi_debug_mode},
            {"separators", separators},
            {"boot_applications", f.boot_applications.size()},
            {"authorities", f.authorities.size()},
            {"boot_files", f.boot_files.size()},
            {"option_roms", f.option_roms.size()},
            {"kernel_cmdlines", cmdlines},
            {"data_mismatches", f.data_mismatches.size()},
            {"anomalies", anomalies}}}};
}

// Everything the log implies about the TPM: its replay, and the reset value
// of every other PCR of each replayed bank.
attest::PcrValues FullReplay(const attest::PcrValues& replayed) {
  attest::PcrValues out = replayed;
  for (auto& [alg, bank] : out) {
    for (uint32_t pcr = 0; pcr <= attest::kMaxReplayPcrIndex; ++pcr) {
      bank.try_emplace(pcr, attest::InitialPcrValue(pcr, attest::DigestSize(alg)));
    }
  }
  return out;
}

// PCR values from tpm2_quote's -o file, read against the quote's selection
// and checked against its pcrDigest.
Result<attest::PcrValues> QuotedFromFiles(const std::string& pcrs_path,
                                          const std::string& msg_path) {
  auto msg = ReadFile(msg_path, kMaxQuoteFile);
  if (!msg.ok()) return msg.status();
  auto pcr_bytes = ReadFile(pcrs_path, attest::kMaxPcrFileSize);
  if (!pcr_bytes.ok()) return pcr_bytes.status();
  auto quote = attest::ParseTpmsAttest(*msg);
  if (!quote.ok()) return quote.status().Annotate("--message");
  if (quote->magic != attest::kTpmGenerated || quote->type != attest::kStAttestQuote) {
    return Status::InvalidArgument("quote_type_invalid", "--message is not a TPM2_Quote");
  }
  auto pcrs = attest::ParseTpm2ToolsPcrFile(*pcr_bytes, quote->pcr_select);
  if (!pcrs.ok()) return pcrs.status().Annotate("--pcrs");
  // The quote's hash algorithm is in its signature, which we do not read:
  // any algorithm of the digest's size whose pcrDigest matches will do.
  for (uint16_t alg : {attest::kAlgSha256, attest::kAlgSha384, attest::kAlgSha512,
                       attest::kAlgSha1}) {
    if (attest::DigestSize(alg) != quote->pcr_digest.size()) continue;
    auto digest = attest::ComputePcrDigest(alg, quote->pcr_select, *pcrs);
    if (digest.ok() && *digest == quote->pcr_digest) return pcrs;
  }
  return Status::InvalidArgument("quote_pcr_digest_mismatch",
                                 "--pcrs does not hash to the quote's pcrDigest");
}

}  // namespace

int RunEventlogReplay(int argc, char** argv, int first) {
  auto args = Args::Parse(argc, argv, first, FlagSpec{{}, {"json"}, 1});
  if (!args.ok()) return Usage(kReplayHelp, args.status());
  if (args->Has("help")) {
    std::fputs(kReplayHelp, stdout);
    return kExitOk;
  }
  auto path = OnePath(*args);
  if (!path.ok()) return Usage(kReplayHelp, path.status());
  const char* cmd = "eventlog replay";
  auto log = LoadEventLog(*path);
  if (!log.ok()) return Fail(cmd, log.status(), kExitUnusable);
  auto pcrs = attest::Replay(*log);
  if (!pcrs.ok()) return Fail(cmd, pcrs.status().Annotate(*path), kExitUnusable);

  if (args->Has("json")) {
    std::string banks;
    for (uint16_t b : log->banks) {
      banks += std::string(banks.empty() ? "" : ", ") + "\"" + attest::HashAlgName(b) + "\"";
    }
    std::printf("{\"pcrs\": %s, \"banks\": [%s], \"events\": %zu}\n",
                wire::FormatPcrValuesJson(*pcrs).c_str(), banks.c_str(), log->events.size());
    return kExitOk;
  }
  std::printf("event log: %zu events, %s, banks declared: %s\n", log->events.size(),
              log->crypto_agile ? "crypto-agile" : "SHA-1", BankNames(log->banks).c_str());
  std::printf("%-7s %-4s %s\n", "bank", "PCR", "value");
  for (auto bank = pcrs->rbegin(); bank != pcrs->rend(); ++bank) {
    for (const auto& [pcr, value] : bank->second) {
      std::printf("%-7s %-4u %s\n", attest::HashAlgName(bank->first).c_str(), pcr,
                  Hex(value).c_str());
    }
  }
  for (uint16_t b : log->banks) {
    if (pcrs->count(b) == 0) {
      std::printf("%s: not replayed (an event lacks its digest, or it cannot be computed)\n",
                  attest::HashAlgName(b).c_str());
    }
  }
  return kExitOk;
}

int RunEventlogShow(int argc, char** argv, int first) {
  auto args = Args::Parse(argc, argv, first, FlagSpec{{}, {"json"}, 1});
  if (!args.ok()) return Usage(kShowHelp, args.status());
  if (args->Has("help")) {
    std::fputs(kShowHelp, stdout);
    return kExitOk;
  }
  auto path = OnePath(*args);
  if (!path.ok()) return Usage(kShowHelp, path.status());
  auto log = LoadEventLog(*path);
  if (!log.ok()) return Fail("eventlog show", log.status(), kExitUnusable);
  const attest::BootFacts facts = attest::ExtractBootFacts(*log);

  std::map<uint32_t, std::vector<std::string>> marks;
  for (const attest::DataMismatch& m : facts.data_mismatches) {
    marks[m.event_index].push_back("[data!=digest]");
  }
  for (const attest::Anomaly& a : facts.anomalies) {
    marks[a.event_index].push_back("[" + a.reason + "]");
  }
  if (args->Has("json")) {
    PrintJson(EventLogJson(*log, facts, marks));
    return kExitOk;
  }
  std::printf("event log: %zu events, %s, banks declared: %s\n", log->events.size(),
              log->crypto_agile ? "crypto-agile" : "SHA-1", BankNames(log->banks).c_str());
  std::printf("%5s %3s  %-33s %-16s  %s\n", "#", "PCR", "type", "sha256", "data");
  for (const attest::Event& ev : log->events) {
    std::string line = attest::DescribeEvent(ev);
    if (auto it = marks.find(ev.index); it != marks.end()) {
      for (const std::string& m : it->second) line += "  " + m;
    }
    // EV_NO_ACTION may carry any PCR index (0xffffffff on Windows).
    std::printf("%5u %3s  %-33s %-16s  %s\n", ev.index,
                ev.pcr <= attest::kMaxPcrIndex ? std::to_string(ev.pcr).c_str() : "-",
                attest::EventTypeName(ev.type).c_str(), ShortDigest(ev).c_str(), line.c_str());
  }
  PrintFacts(facts);
  return kExitOk;
}

namespace {

std::string_view AsText(const std::vector<uint8_t>& bytes) {
  return std::string_view(reinterpret_cast<const char*>(bytes.data()), bytes.size());
}

// --policy's boot policy. Malformed JSON is told by line and column before
// the policy's own checks.
Result<attest::BootPolicy> ReadPolicyFile(const std::string& path) {
  auto text = ReadFile(path, wire::kMaxPolicySize);
  if (!text.ok()) return text.status();
  if (auto j = ParseJsonText(AsText(*text), path); !j.ok()) return j.status();
  auto policy = wire::ParseBootPolicy(AsText(*text));
  if (!policy.ok()) return policy.status().Annotate("--policy");
  return policy;
}

// PCR values in a JSON file ({"pcrs": ...}), given as `flag`.
Result<attest::PcrValues> ReadPcrValuesFile(const std::string& path, const char* flag) {
  auto text = ReadFile(path, wire::kMaxPolicySize);
  if (!text.ok()) return text.status();
  if (auto j = ParseJsonText(AsText(*text), path); !j.ok()) return j.status();
  auto v = wire::ParsePcrValuesJson(AsText(*text));
  if (!v.ok()) return v.status().Annotate(flag);
  return v;
}

// The PCR values the log is judged against: a quote's (--pcrs and
// --message), a JSON file's (--pcrs-json), else the log's own replay.
Result<attest::PcrValues> QuotedPcrs(const Args& args, const attest::EventLog& log) {
  if (args.Has("pcrs") || args.Has("message")) return QuotedFromFiles(*args.Get("pcrs"), *args.Get("message"));
  if (auto path = args.Get("pcrs-json")) return ReadPcrValuesFile(*path, "--pcrs-json");
  auto replayed = attest::Replay(log);
  if (!replayed.ok()) return replayed.status();
  std::fprintf(stderr,
               "rackgatectl policy check: note: no quoted PCRs given; judging the log against "
               "its own replay, which binds it to no TPM\n");
  return FullReplay(*replayed);
}

// The evidence of `log` that the command line names.
Status GatherEvidence(const Args& args, const attest::EventLog& log, attest::Evidence* evidence) {
  evidence->log = &log;
  auto quoted = QuotedPcrs(args, log);
  if (!quoted.ok()) return quoted.status();
  evidence->quoted = *std::move(quoted);
  if (auto path = args.Get("tofu-recorded")) {
    auto recorded = ReadPcrValuesFile(*path, "--tofu-recorded");
    if (!recorded.ok()) return recorded.status();
    evidence->tofu_recorded = *std::move(recorded);
  }
  if (auto path = args.Get("pcr-signature")) {
    auto text = ReadFile(*path, wire::kMaxPcrSignatureSize);
    if (!text.ok()) return text.status();
    auto signatures = wire::ParsePcrSignatureJson(AsText(*text));
    if (!signatures.ok()) return signatures.status().Annotate("--pcr-signature");
    evidence->pcr_signatures = *std::move(signatures);
  }
  return Status::Ok();
}

void PrintVerdictJson(const attest::Verdict& verdict, const attest::EventLog& log, const attest::BootFacts& facts) {
  nlohmann::json out = {{"ok", verdict.ok}, {"violations", nlohmann::json::array()},
                        {"events", log.events.size()},
                        {"secure_boot", attest::SecureBootStateName(facts.secure_boot)}};
  for (const attest::Violation& v : verdict.violations) {
    out["violations"].push_back({{"rule", v.rule}, {"reason", v.reason}, {"message", v.message}});
  }
  if (verdict.ok && !verdict.tofu_to_record.empty()) {
    out["tofu_record"] = nlohmann::json::parse("{\"pcrs\": " + wire::FormatPcrValuesJson(verdict.tofu_to_record) + "}");
  }
  PrintJson(out);
}

// Prints the verdict (JSON printed already with --json) and writes the TOFU
// record; the exit code.
int ReportVerdict(const Args& args, const attest::Verdict& verdict, const attest::EventLog& log,
                  const attest::BootFacts& facts) {
  const char* cmd = "policy check";
  if (!verdict.ok) {
    for (const attest::Violation& v : verdict.violations) {
      std::fprintf(stderr, "rackgatectl %s: refused: %s: %s: %s\n", cmd, v.rule.c_str(),
                   v.reason.c_str(), v.message.c_str());
    }
    std::fprintf(stderr, "rackgatectl %s: %zu violation%s\n", cmd, verdict.violations.size(),
                 verdict.violations.size() == 1 ? "" : "s");
    return kExitRefused;
  }
  if (!verdict.tofu_to_record.empty()) {
    const std::string record =
        "{\"pcrs\": " + wire::FormatPcrValuesJson(verdict.tofu_to_record) + "}\n";
    if (auto path = args.Get("tofu-record-to")) {
      const auto* p = reinterpret_cast<const uint8_t*>(record.data());
      if (Status s = WriteFileAtomic(*path, std::span<const uint8_t>(p, record.size())); !s.ok()) {
        return Fail(cmd, s, kExitUnusable);
      }
    } else if (!args.Has("json")) {
      std::printf("tofu record: %s", record.c_str());
    }
  }
  if (args.Has("json")) return kExitOk;
  std::printf("policy ok: %zu events, secure boot %s\n", log.events.size(),
              attest::SecureBootStateName(facts.secure_boot));
  return kExitOk;
}

}  // namespace

int RunPolicyCheck(int argc, char** argv, int first) {
  FlagSpec spec{{"policy", "eventlog", "pcrs", "message", "pcrs-json", "tofu-recorded",
                 "tofu-record-to", "pcr-signature"},
                {"json"},
                0};
  auto args = Args::Parse(argc, argv, first, spec);
  if (!args.ok()) return Usage(kPolicyCheckHelp, args.status());
  if (args->Has("help")) {
    std::fputs(kPolicyCheckHelp, stdout);
    return kExitOk;
  }
  if (Status s = args->Require({"policy", "eventlog"}); !s.ok()) return Usage(kPolicyCheckHelp, s);
  const bool quote_files = args->Has("pcrs") || args->Has("message");
  if (quote_files && args->Has("pcrs-json")) {
    return Usage(kPolicyCheckHelp,
                 Status::InvalidArgument("usage", "--pcrs/--message and --pcrs-json exclude each other"));
  }
  if (quote_files && !(args->Has("pcrs") && args->Has("message"))) {
    return Usage(kPolicyCheckHelp,
                 Status::InvalidArgument("usage", "--pcrs and --message go together"));
  }
  const char* cmd = "policy check";
  auto policy = ReadPolicyFile(*args->Get("policy"));
  if (!policy.ok()) return Fail(cmd, policy.status(), kExitUnusable);
  auto log = LoadEventLog(*args->Get("eventlog"));
  if (!log.ok()) return Fail(cmd, log.status(), kExitUnusable);
  attest::Evidence evidence;
  if (Status s = GatherEvidence(*args, *log, &evidence); !s.ok()) return Fail(cmd, s, kExitUnusable);

  const attest::BootFacts facts = attest::ExtractBootFacts(*log);
  const attest::Verdict verdict = attest::Evaluate(*policy, facts, evidence);
  if (args->Has("json")) PrintVerdictJson(verdict, *log, facts);
  return ReportVerdict(*args, verdict, *log, facts);
}

}  // namespace rackgate::ctl
