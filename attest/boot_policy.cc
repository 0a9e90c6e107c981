// Boot policy: the JSON document, and its evaluation against boot facts and
// quoted PCRs.
#include "attest/boot_policy.h"

#include <algorithm>
#include <functional>
#include <iterator>
#include <map>
#include <set>
#include <utility>

#include <nlohmann/json.hpp>

namespace rackgate::attest {

namespace {

using json = nlohmann::json;

constexpr uint32_t kMaxPcr = 23;
constexpr uint32_t kPcrBootApplications = 4;
constexpr uint32_t kPcrSecureBoot = 7;
constexpr uint32_t kMaxSeparatorPcr = 7;

std::optional<Bytes> FromHex(std::string_view h) {
  auto nibble = [](char c) -> int {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
  };
  if (h.size() % 2 != 0) return std::nullopt;
  Bytes out;
  out.reserve(h.size() / 2);
  for (size_t i = 0; i < h.size(); i += 2) {
    const int hi = nibble(h[i]), lo = nibble(h[i + 1]);
    if (hi < 0 || lo < 0) return std::nullopt;
    out.push_back(static_cast<uint8_t>(hi << 4 | lo));
  }
  return out;
}

// Thrown inside the parsers, turned into a Status at their boundary.
struct Malformed {
  std::string message;
};

[[noreturn]] void Fail(const std::string& where, const std::string& what) {
  throw Malformed{where + ": " + what};
}

// Nesting depth of [ and { outside strings, without building anything, so a
// hostile document cannot make the parser build (or later destroy) a deep
// tree. Malformed JSON is left for the parser to refuse.
size_t JsonDepth(std::string_view text) {
  size_t depth = 0, max = 0;
  bool in_string = false, escaped = false;
  for (char c : text) {
    if (in_string) {
      if (escaped) {
        escaped = false;
      } else if (c == '\\') {
        escaped = true;
      } else if (c == '"') {
        in_string = false;
      }
    } else if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      max = std::max(max, ++depth);
    } else if ((c == ']' || c == '}') && depth > 0) {
      --depth;
    }
  }
  return max;
}

// Parses bounded JSON. SECURITY: nlohmann keeps the last of duplicate keys
// silently; {"authorities": {...}, "authorities": {}} would drop a rule, so a
// duplicate key refuses the document (found through the parser callback,
// which sees every key in order).
json ParseBounded(std::string_view text, const char* what) {
  if (text.size() > kMaxPolicySize) {
    Fail(what, "larger than " + std::to_string(kMaxPolicySize) + " bytes");
  }
  if (JsonDepth(text) > kMaxPolicyDepth) {
    Fail(what, "nested deeper than " + std::to_string(kMaxPolicyDepth));
  }
  std::vector<std::set<std::string>> keys;
  std::string duplicate;
  json::parser_callback_t cb = [&](int, json::parse_event_t event, json& parsed) {
    switch (event) {
      case json::parse_event_t::object_start:
        keys.emplace_back();
        break;
      case json::parse_event_t::object_end:
        if (!keys.empty()) keys.pop_back();
        break;
      case json::parse_event_t::key:
        if (!keys.empty() && parsed.is_string() &&
            !keys.back().insert(parsed.get<std::string>()).second && duplicate.empty()) {
          duplicate = parsed.get<std::string>();
        }
        break;
      default:
        break;
    }
    return true;
  };
  json j = json::parse(text, cb, /*allow_exceptions=*/false);
  if (j.is_discarded()) Fail(what, "not valid JSON");
  if (!duplicate.empty()) Fail(what, "duplicate key \"" + duplicate.substr(0, 64) + "\"");
  return j;
}

void OnlyKeys(const json& obj, const std::string& where, std::initializer_list<const char*> known) {
  for (const auto& item : obj.items()) {
    const std::string& k = item.key();
    if (std::none_of(known.begin(), known.end(), [&](const char* n) { return k == n; })) {
      // The key is the operator's own text; cut it so a message stays short.
      Fail(where, "unknown field \"" + k.substr(0, 64) + "\"");
    }
  }
}

const json& Object(const json& j, const std::string& where) {
  if (!j.is_object()) Fail(where, "must be an object");
  return j;
}

bool Bool(const json& j, const std::string& where) {
  if (!j.is_boolean()) Fail(where, "must be true or false");
  return j.get<bool>();
}

std::string String(const json& j, const std::string& where) {
  if (!j.is_string()) Fail(where, "must be a string");
  std::string s = j.get<std::string>();
  if (s.size() > kMaxPolicyStringSize) {
    Fail(where, "longer than " + std::to_string(kMaxPolicyStringSize) + " bytes");
  }
  return s;
}

uint16_t Bank(const std::string& name, const std::string& where) {
  const uint16_t alg = HashAlgFromName(name);
  if (alg == kAlgNull) Fail(where, "unknown bank \"" + name.substr(0, 16) + "\"");
  return alg;
}

uint32_t PcrIndex(const std::string& text, const std::string& where) {
  if (text.empty() || text.size() > 2 ||
      !std::all_of(text.begin(), text.end(), [](char c) { return c >= '0' && c <= '9'; }) ||
      (text.size() == 2 && text[0] == '0')) {
    Fail(where, "PCR index \"" + text.substr(0, 16) + "\" is not 0.." + std::to_string(kMaxPcr));
  }
  const uint32_t pcr = static_cast<uint32_t>(std::stoul(text));
  if (pcr > kMaxPcr) Fail(where, "PCR index " + text + " is above " + std::to_string(kMaxPcr));
  return pcr;
}

Bytes DigestValue(const std::string& hex, uint16_t alg, const std::string& where) {
  auto v = FromHex(hex);
  if (!v) Fail(where, "not hex");
  if (v->size() != DigestSize(alg)) {
    Fail(where, std::to_string(v->size()) + " bytes, but " + HashAlgName(alg) + " has " +
                    std::to_string(DigestSize(alg)));
  }
  return *std::move(v);
}

// {"sha256": {"0": "<hex>", ...}, ...}
PcrValues ReadPcrValues(const json& j, const std::string& where) {
  PcrValues out;
  for (const auto& bank : Object(j, where).items()) {
    const std::string bw = where + "." + bank.key().substr(0, 16);
    const uint16_t alg = Bank(bank.key(), where);
    PcrBank& values = out[alg];
    for (const auto& pcr : Object(bank.value(), bw).items()) {
      const std::string pw = bw + "." + pcr.key().substr(0, 16);
      values[PcrIndex(pcr.key(), bw)] = DigestValue(String(pcr.value(), pw), alg, pw);
    }
  }
  return out;
}

// ["sha256:<hex>", "<hex>", ...]; a bare value names its bank by its length.
std::vector<PolicyDigest> ReadDigests(const json& j, const std::string& where) {
  if (!j.is_array()) Fail(where, "must be an array of digests");
  if (j.size() > kMaxPolicyDigests) {
    Fail(where, "more than " + std::to_string(kMaxPolicyDigests) + " digests");
  }
  std::vector<PolicyDigest> out;
  for (size_t i = 0; i < j.size(); ++i) {
    const std::string w = where + "[" + std::to_string(i) + "]";
    const std::string s = String(j.at(i), w);
    PolicyDigest d;
    std::string hex;
    if (const size_t colon = s.find(':'); colon != std::string::npos) {
      d.alg = Bank(s.substr(0, colon), w);
      hex = s.substr(colon + 1);
    } else {
      for (uint16_t alg : {kAlgSha1, kAlgSha256, kAlgSha384, kAlgSha512}) {
        if (s.size() == 2 * DigestSize(alg)) d.alg = alg;
      }
      if (d.alg == kAlgNull) Fail(w, "a bare digest must be 40, 64, 96 or 128 hex digits");
      hex = s;
    }
    d.value = DigestValue(hex, d.alg, w);
    out.push_back(std::move(d));
  }
  return out;
}

std::vector<std::string> ReadStrings(const json& j, const std::string& where) {
  if (!j.is_array()) Fail(where, "must be an array of strings");
  if (j.size() > kMaxPolicyStrings) {
    Fail(where, "more than " + std::to_string(kMaxPolicyStrings) + " strings");
  }
  std::vector<std::string> out;
  for (size_t i = 0; i < j.size(); ++i) {
    std::string s = String(j.at(i), where + "[" + std::to_string(i) + "]");
    // An empty substring is in every command line: as a required string it
    // checks nothing, as a forbidden one it refuses everything.
    if (s.empty()) Fail(where + "[" + std::to_string(i) + "]", "must not be empty");
    out.push_back(std::move(s));
  }
  return out;
}

// {"allowed": [...], "forbidden": [...]}
void ReadDigestRule(const json& j, const std::string& where,
                    std::optional<std::vector<PolicyDigest>>* allowed,
                    std::vector<PolicyDigest>* forbidden) {
  OnlyKeys(Object(j, where), where, {"allowed", "forbidden"});
  if (j.contains("allowed")) *allowed = ReadDigests(j.at("allowed"), where + ".allowed");
  if (j.contains("forbidden")) *forbidden = ReadDigests(j.at("forbidden"), where + ".forbidden");
}

BootPolicy ReadPolicy(const json& j) {
  OnlyKeys(Object(j, "policy"), "policy",
           {"version", "comment", "pcrs", "require_secure_boot", "require_separators",
            "boot_applications", "authorities", "kernel_cmdline", "tofu"});
  if (!j.contains("version")) Fail("policy", "missing \"version\"");
  const json& version = j.at("version");
  if (!version.is_number_integer() || version.get<int64_t>() != kBootPolicyVersion) {
    Fail("version", "must be " + std::to_string(kBootPolicyVersion));
  }
  BootPolicy p;
  if (j.contains("comment")) (void)String(j.at("comment"), "comment");
  if (j.contains("pcrs")) p.pcrs = ReadPcrValues(j.at("pcrs"), "pcrs");
  if (j.contains("require_secure_boot")) {
    p.require_secure_boot = Bool(j.at("require_secure_boot"), "require_secure_boot");
  }
  if (j.contains("require_separators")) {
    p.require_separators = Bool(j.at("require_separators"), "require_separators");
  }
  if (j.contains("boot_applications")) {
    ReadDigestRule(j.at("boot_applications"), "boot_applications", &p.allowed_boot_applications,
                   &p.forbidden_boot_applications);
  }
  if (j.contains("authorities")) {
    ReadDigestRule(j.at("authorities"), "authorities", &p.allowed_authorities,
                   &p.forbidden_authorities);
  }
  if (j.contains("kernel_cmdline")) {
    const json& k = j.at("kernel_cmdline");
    OnlyKeys(Object(k, "kernel_cmdline"), "kernel_cmdline", {"exact", "required", "forbidden"});
    KernelCmdlinePolicy kp;
    if (k.contains("exact")) kp.exact = String(k.at("exact"), "kernel_cmdline.exact");
    if (k.contains("required")) kp.required = ReadStrings(k.at("required"), "kernel_cmdline.required");
    if (k.contains("forbidden")) {
      kp.forbidden = ReadStrings(k.at("forbidden"), "kernel_cmdline.forbidden");
    }
    if (!kp.exact && kp.required.empty() && kp.forbidden.empty()) {
      Fail("kernel_cmdline", "sets no rule (exact, required or forbidden)");
    }
    p.kernel_cmdline = std::move(kp);
  }
  if (j.contains("tofu")) {
    for (const auto& bank : Object(j.at("tofu"), "tofu").items()) {
      const std::string w = "tofu." + bank.key().substr(0, 16);
      PcrSelection sel;
      sel.hash_alg = Bank(bank.key(), "tofu");
      if (!bank.value().is_array()) Fail(w, "must be an array of PCR indices");
      std::set<uint32_t> pcrs;
      for (const json& pcr : bank.value()) {
        if (!pcr.is_number_unsigned() || pcr.get<uint64_t>() > kMaxPcr) {
          Fail(w, "PCR indices are integers 0.." + std::to_string(kMaxPcr));
        }
        pcrs.insert(pcr.get<uint32_t>());
      }
      sel.pcrs.assign(pcrs.begin(), pcrs.end());
      p.tofu.push_back(std::move(sel));
    }
  }
  return p;
}

// --- Evaluation --------------------------------------------------------------

class Evaluator {
 public:
  Evaluator(const BootPolicy& p, const BootFacts& f, const Evidence& e)
      : policy_(p), facts_(f), evidence_(e) {}

  Verdict Run();

 private:
  void Add(const char* rule, std::string reason, std::string message) {
    verdict_.violations.push_back(Violation{rule, std::move(reason), std::move(message)});
  }
  // SECURITY: a fact from the log is bound to the machine only through the
  // quoted PCR it extends. A rule that reads facts of an unquoted PCR would
  // judge whatever the log claims.
  bool Quoted(uint32_t pcr) const {
    return std::any_of(evidence_.quoted.begin(), evidence_.quoted.end(),
                       [&](const auto& bank) { return bank.second.count(pcr) != 0; });
  }
  bool RequireQuoted(const char* rule, uint32_t pcr) {
    if (Quoted(pcr)) return true;
    Add(rule, "pcr_not_quoted",
        "PCR " + std::to_string(pcr) + " is not in the quote, so its events prove nothing");
    return false;
  }

  void CheckEventLog();
  void CheckGoldenPcrs();
  void CheckSecureBoot();
  void CheckSeparators();
  void CheckDigests(const char* rule, const char* what, const std::vector<Measurement>& facts,
                    uint32_t pcr, const std::optional<std::vector<PolicyDigest>>& allowed,
                    const std::vector<PolicyDigest>& forbidden, const char* not_allowed,
                    const char* is_forbidden);
  void CheckKernelCmdline();
  void CheckTofu();

  const BootPolicy& policy_;
  const BootFacts& facts_;
  const Evidence& evidence_;
  Verdict verdict_;
  PcrValues tofu_pending_;
};

void Evaluator::CheckEventLog() {
  if (evidence_.log == nullptr) {
    Add("eventlog", "eventlog_missing", "no event log to judge");
    return;
  }
  auto replayed = Replay(*evidence_.log);
  if (!replayed.ok()) {
    Add("eventlog", replayed.status().reason(), replayed.status().message());
    return;
  }
  if (Status s = ComparePcrs(*replayed, evidence_.quoted); !s.ok()) {
    Add("eventlog", s.reason(), s.message());
  }
}

void Evaluator::CheckGoldenPcrs() {
  for (const auto& [alg, bank] : policy_.pcrs) {
    auto qb = evidence_.quoted.find(alg);
    for (const auto& [pcr, golden] : bank) {
      const std::string name = HashAlgName(alg) + " PCR " + std::to_string(pcr);
      const Bytes* quoted = nullptr;
      if (qb != evidence_.quoted.end()) {
        if (auto it = qb->second.find(pcr); it != qb->second.end()) quoted = &it->second;
      }
      if (quoted == nullptr) {
        Add("pcrs", "pcr_not_quoted", name + " is not in the quote");
      } else if (*quoted != golden) {
        // The message names the PCR, never either value.
        Add("pcrs", "pcr_mismatch", name + " does not match the policy's golden value");
      }
    }
  }
}

void Evaluator::CheckSecureBoot() {
  if (!policy_.require_secure_boot) return;
  if (!RequireQuoted("secure_boot", kPcrSecureBoot)) return;
  switch (facts_.secure_boot) {
    case SecureBootState::kEnabled:
      break;
    case SecureBootState::kDisabled:
      Add("secure_boot", "secure_boot_disabled", "the SecureBoot variable measured on PCR 7 is off");
      return;
    case SecureBootState::kNotMeasured:
      Add("secure_boot", "secure_boot_not_measured",
          "no verified SecureBoot variable on PCR 7 before its separator");
      return;
    case SecureBootState::kUnverifiable:
      Add("secure_boot", "secure_boot_unverifiable",
          "PCR 7's Secure Boot configuration does not verify (a digest mismatch, malformed or "
          "repeated variable)");
      return;
  }
  // SECURITY: without PCR 7's separator nothing marks the end of the
  // firmware's configuration; the OS could have appended it.
  auto sep = std::find_if(facts_.separators.begin(), facts_.separators.end(),
                          [](const Separator& s) { return s.pcr == kPcrSecureBoot; });
  if (sep == facts_.separators.end() || sep->kind != SeparatorKind::kNormal) {
    Add("secure_boot", "secure_boot_no_separator",
        "PCR 7 has no normal separator after its Secure Boot configuration");
  }
  if (facts_.uefi_debug_mode) {
    Add("secure_boot", "secure_boot_debug_mode",
        "the firmware logged \"UEFI Debug Mode\" on PCR 7: a debugger could run");
  }
}

void Evaluator::CheckSeparators() {
  if (!policy_.require_separators) return;
  for (uint32_t pcr = 0; pcr <= kMaxSeparatorPcr; ++pcr) {
    if (!RequireQuoted("separators", pcr)) continue;
    bool any = false;
    for (const Separator& s : facts_.separators) {
      if (s.pcr != pcr) continue;
      any = true;
      const std::string where =
          "PCR " + std::to_string(pcr) + " (event " + std::to_string(s.event_index) + ")";
      if (s.kind == SeparatorKind::kError) {
        Add("separators", "separator_error",
            where + ": an error separator: the firmware reported a failure before boot");
      } else if (s.kind == SeparatorKind::kMalformed) {
        Add("separators", "separator_malformed",
            where + ": a separator whose data is not 4 bytes or does not match its digest");
      }
    }
    if (!any) Add("separators", "separator_missing", "PCR " + std::to_string(pcr) + " has no separator");
  }
}

bool Matches(const std::map<uint16_t, Bytes>& digests, const std::vector<PolicyDigest>& list) {
  return std::any_of(list.begin(), list.end(), [&](const PolicyDigest& d) {
    auto it = digests.find(d.alg);
    return it != digests.end() && it->second == d.value;
  });
}

// "sha256:<hex>" (what policies usually list), else the strongest bank the
// event carries.
std::string Name(const std::map<uint16_t, Bytes>& digests) {
  if (digests.empty()) return "no digest";
  auto it = digests.find(kAlgSha256);
  if (it == digests.end()) it = std::prev(digests.end());
  return HashAlgName(it->first) + ":" + HexString(it->second);
}

void Evaluator::CheckDigests(const char* rule, const char* what,
                             const std::vector<Measurement>& facts, uint32_t pcr,
                             const std::optional<std::vector<PolicyDigest>>& allowed,
                             const std::vector<PolicyDigest>& forbidden, const char* not_allowed,
                             const char* is_forbidden) {
  if (!allowed && forbidden.empty()) return;
  if (!RequireQuoted(rule, pcr)) return;
  for (const Measurement& m : facts) {
    // The digest is evidence, not a secret; the description is the log's
    // own (printable, bounded) claim, shown to help an operator find it.
    const std::string where = std::string(what) + " event " + std::to_string(m.event_index) +
                              " (" + EventTypeName(m.type) + ", logged as \"" + m.description +
                              "\") " + Name(m.digests);
    if (Matches(m.digests, forbidden)) {
      Add(rule, is_forbidden, where + " is forbidden");
    } else if (allowed && !Matches(m.digests, *allowed)) {
      Add(rule, not_allowed, where + " is not allowed");
    }
  }
}

void Evaluator::CheckKernelCmdline() {
  if (!policy_.kernel_cmdline) return;
  const KernelCmdlinePolicy& k = *policy_.kernel_cmdline;
  bool any = false;
  for (const KernelCmdline& c : facts_.kernel_cmdlines) {
    if (!Quoted(c.pcr)) continue;  // unbound: the log alone says it
    any = true;
    const std::string where = "kernel command line (event " + std::to_string(c.event_index) +
                              ", PCR " + std::to_string(c.pcr) + ", " + c.source + ")";
    if (!c.verified) {
      Add("kernel_cmdline", "kernel_cmdline_unverified",
          where + " does not match its digest; what the kernel received is unknown");
      continue;
    }
    // Messages name the policy's strings, never the command line itself,
    // which may carry things an operator would not want in a log.
    if (k.exact && c.text != *k.exact) {
      Add("kernel_cmdline", "kernel_cmdline_mismatch", where + " is not the exact one required");
    }
    for (const std::string& r : k.required) {
      if (c.text.find(r) == std::string::npos) {
        Add("kernel_cmdline", "kernel_cmdline_required_missing",
            where + " lacks required \"" + r + "\"");
      }
    }
    for (const std::string& f : k.forbidden) {
      if (c.text.find(f) != std::string::npos) {
        Add("kernel_cmdline", "kernel_cmdline_forbidden_present",
            where + " contains forbidden \"" + f + "\"");
      }
    }
  }
  if (!any) {
    Add("kernel_cmdline", "kernel_cmdline_missing",
        "no kernel command line measured on a quoted PCR (8 or 12)");
  }
}

void Evaluator::CheckTofu() {
  for (const PcrSelection& sel : policy_.tofu) {
    for (uint32_t pcr : sel.pcrs) {
      const std::string name = HashAlgName(sel.hash_alg) + " PCR " + std::to_string(pcr);
      const Bytes* quoted = nullptr;
      if (auto qb = evidence_.quoted.find(sel.hash_alg); qb != evidence_.quoted.end()) {
        if (auto it = qb->second.find(pcr); it != qb->second.end()) quoted = &it->second;
      }
      if (quoted == nullptr) {
        Add("tofu", "pcr_not_quoted", name + " is not in the quote");
        continue;
      }
      const Bytes* recorded = nullptr;
      if (evidence_.tofu_recorded) {
        if (auto rb = evidence_.tofu_recorded->find(sel.hash_alg);
            rb != evidence_.tofu_recorded->end()) {
          if (auto it = rb->second.find(pcr); it != rb->second.end()) recorded = &it->second;
        }
      }
      if (recorded != nullptr && *recorded != *quoted) {
        Add("tofu", "tofu_mismatch",
            name + " differs from the value recorded at first use (an operator reset allows a "
                   "new one)");
        continue;
      }
      // First use of this PCR, or unchanged: what to keep recording.
      tofu_pending_[sel.hash_alg][pcr] = recorded != nullptr ? *recorded : *quoted;
    }
  }
}

Verdict Evaluator::Run() {
  CheckEventLog();
  CheckGoldenPcrs();
  CheckSecureBoot();
  CheckSeparators();
  CheckDigests("boot_applications", "boot application", facts_.boot_applications,
               kPcrBootApplications, policy_.allowed_boot_applications,
               policy_.forbidden_boot_applications, "boot_application_not_allowed",
               "boot_application_forbidden");
  CheckDigests("authorities", "authority", facts_.authorities, kPcrSecureBoot,
               policy_.allowed_authorities, policy_.forbidden_authorities,
               "authority_not_allowed", "authority_forbidden");
  CheckKernelCmdline();
  CheckTofu();
  verdict_.ok = verdict_.violations.empty();
  // SECURITY: a failed attestation pins nothing; the first passing one does.
  if (verdict_.ok) verdict_.tofu_to_record = std::move(tofu_pending_);
  return std::move(verdict_);
}

}  // namespace

Result<BootPolicy> ParseBootPolicy(std::string_view text) {
  try {
    return ReadPolicy(ParseBounded(text, "policy"));
  } catch (const Malformed& m) {
    return Status::InvalidArgument("policy_malformed", m.message);
  } catch (const json::exception& e) {
    // Every read is type-checked first; this is a bug guard, not a path.
    return Status::InvalidArgument("policy_malformed", std::string("policy: ") + e.what());
  }
}

std::string FormatPcrValuesJson(const PcrValues& pcrs) {
  std::string out = "{";
  bool first_bank = true;
  for (auto bank = pcrs.rbegin(); bank != pcrs.rend(); ++bank) {
    if (!first_bank) out += ", ";
    first_bank = false;
    out += "\"" + HashAlgName(bank->first) + "\": {";
    bool first = true;
    for (const auto& [pcr, value] : bank->second) {
      if (!first) out += ", ";
      first = false;
      out += "\"" + std::to_string(pcr) + "\": \"" + HexString(value) + "\"";
    }
    out += "}";
  }
  return out + "}";
}

Result<PcrValues> ParsePcrValuesJson(std::string_view text) {
  try {
    const json j = ParseBounded(text, "pcr values");
    if (!j.is_object() || !j.contains("pcrs")) Fail("pcr values", "no top-level \"pcrs\" object");
    return ReadPcrValues(j.at("pcrs"), "pcrs");
  } catch (const Malformed& m) {
    return Status::InvalidArgument("pcr_values_malformed", m.message);
  } catch (const json::exception& e) {
    return Status::InvalidArgument("pcr_values_malformed", std::string("pcr values: ") + e.what());
  }
}

Verdict Evaluate(const BootPolicy& policy, const BootFacts& facts, const Evidence& evidence) {
  return Evaluator(policy, facts, evidence).Run();
}

}  // namespace rackgate::attest
