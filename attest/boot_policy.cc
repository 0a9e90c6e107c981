// Boot policy evaluation: a typed policy judged against boot facts and quoted
// PCRs (the JSON form is read in wire/boot_policy_json.cc).
#include "attest/boot_policy.h"

#include <algorithm>
#include <functional>
#include <iterator>
#include <map>
#include <set>
#include <span>
#include <string_view>
#include <utility>

#include "attest/digest.h"
#include "attest/pcr_signature.h"
#include "base/hex.h"

namespace rackgate::attest {

namespace {

constexpr uint32_t kPcrBootApplications = 4;
constexpr uint32_t kPcrSecureBoot = 7;
constexpr uint32_t kMaxSeparatorPcr = 7;
constexpr uint32_t kPcrGrubCmdline = 8;
// The Linux EFI stub logs its load options here (kLoadOptionsEventTagId);
// no fact reads them as a command line, boot_files judges them by digest.
constexpr uint32_t kPcrLinuxStubLoadOptions = kPcrBootFiles;
constexpr uint32_t kPcrSystemdKernelConfig = 12;

std::span<const uint8_t> AsBytes(std::string_view s) {
  return {reinterpret_cast<const uint8_t*>(s.data()), s.size()};
}

// Whether digests of a UKI's .cmdline section are of `text`: of the text
// itself or of the text with one NUL after it (ukify and other UKI builders
// differ), in every bank we can hash, with at least one such bank.
bool DigestsAreOfText(const std::map<uint16_t, Bytes>& digests, const std::string& text) {
  const std::string with_nul = text + '\0';
  for (std::string_view candidate : {std::string_view(text), std::string_view(with_nul)}) {
    bool any = false, all = true;
    for (const auto& [alg, digest] : digests) {
      if (EvpMd(alg) == nullptr) continue;
      any = true;
      if (Hash(alg, {AsBytes(candidate)}) != digest) all = false;
    }
    if (any && all) return true;
  }
  return false;
}

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
  void CheckRelabelled();
  void CheckGoldenPcrs();
  void CheckSecureBoot();
  void CheckSeparators();
  void CheckDigests(const char* rule, const char* what, const std::vector<Measurement>& facts,
                    uint32_t pcr, const std::optional<std::vector<PolicyDigest>>& allowed,
                    const std::vector<PolicyDigest>& forbidden, const char* not_allowed,
                    const char* is_forbidden);
  void CheckKernelCmdline();
  void CheckUki();
  void CheckSecureBootDb();
  void CheckUkiSigned();
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
  if (Status s = CompareLogWithQuote(*replayed, evidence_.quoted); !s.ok()) {
    Add("eventlog", s.reason(), s.message());
  }
}

// Anomalies that say an event's type does not tell what it measured.
bool IsRelabelling(const Anomaly& a) {
  return a.reason == "event_relabelled" || a.reason == "event_type_unknown" ||
         a.reason == "event_type_unexpected_for_pcr";
}

void Evaluator::CheckRelabelled() {
  // SECURITY: the type of an event is not measured. Facts are taken by
  // digest whatever the type says (boot_facts.h), but a rule that reads a
  // PCR's events from the log (a command line, separators, Secure Boot
  // state) cannot judge an event whose type lies about what it measured:
  // such an event refuses under every rule that reads its PCR.
  const std::set<uint32_t> read = PcrsReadFromLog(policy_);
  for (const Anomaly& a : facts_.anomalies) {
    if (!IsRelabelling(a) || read.count(a.pcr) == 0) continue;
    Add("eventlog", "event_relabelled",
        a.message + " (" + a.reason + "): a policy that reads PCR " + std::to_string(a.pcr) +
            " from the log cannot judge it");
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
  return HashAlgName(it->first) + ":" + hex::Encode(it->second);
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
    if (c.by_digest) {
      // A UKI's .cmdline section: its text is not in the log, only its
      // digest. Substrings cannot be judged against a digest; fail closed.
      if (!k.required.empty() || !k.forbidden.empty()) {
        Add("kernel_cmdline", "kernel_cmdline_unverified",
            where + " is measured by digest only: only \"exact\" can judge it");
      }
      if (k.exact && !DigestsAreOfText(c.digests, *k.exact)) {
        Add("kernel_cmdline", "kernel_cmdline_mismatch", where + " is not the exact one required");
      }
      continue;
    }
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
        "no kernel command line measured on a quoted PCR (8, 11 or 12)");
  }
}

void Evaluator::CheckUki() {
  if (!policy_.uki) return;
  if (!RequireQuoted("uki", kPcrUkiSections)) return;
  if (facts_.uki_sections.empty()) {
    Add("uki", "uki_missing", "no UKI section measured on PCR 11: this boot did not use systemd-stub");
  }
  for (const auto& [name, allowed] : policy_.uki->sections) {
    bool any = false;
    for (const UkiSection& u : facts_.uki_sections) {
      if (u.name != name) continue;
      any = true;
      if (!Matches(u.digests, allowed)) {
        Add("uki", "uki_section_not_allowed",
            "UKI section " + name + " (event " + std::to_string(u.event_index) + ") " +
                Name(u.digests) + " is not allowed");
      }
    }
    if (!any && !facts_.uki_sections.empty()) {
      Add("uki", "uki_section_missing", "UKI section " + name + " was not measured on PCR 11");
    }
  }
  // SECURITY: every PCR 11 measurement counts; one that is not a section
  // systemd-stub measured could be anything (a relabelled event, an extend
  // from the OS written into a forged log).
  for (const Measurement& m : facts_.uki_unrecognized) {
    Add("uki", "uki_measurement_unrecognized",
        "PCR 11 event " + std::to_string(m.event_index) + " (" + EventTypeName(m.type) +
            ", logged as \"" + m.description + "\") " + Name(m.digests) +
            " is not a UKI section measured by systemd-stub");
  }
}

// The entries of `lists` of one EFI_SIGNATURE_LIST type: for EFI_CERT_X509
// the SHA-256 of each certificate's DER, for EFI_CERT_SHA256 the hash itself.
std::set<Bytes> SignatureEntries(const std::vector<EfiSignatureList>& lists, const EfiGuid& type) {
  std::set<Bytes> out;
  for (const EfiSignatureList& list : lists) {
    if (list.type != type) continue;
    for (const EfiSignatureData& s : list.signatures) {
      out.insert(type == kEfiCertX509Guid ? Hash(kAlgSha256, {s.data}) : s.data);
    }
  }
  return out;
}

void Evaluator::CheckSecureBootDb() {
  if (!policy_.secure_boot_db) return;
  const SecureBootDbPolicy& p = *policy_.secure_boot_db;
  bool judge_db =
      !p.db_required_certificates.empty() || !p.db_forbidden_certificates.empty();
  bool judge_dbx = !p.dbx_required_hashes.empty();
  if (judge_db && !RequireQuoted("db", kPcrSecureBoot)) judge_db = false;
  if (judge_dbx && !RequireQuoted("dbx", kPcrSecureBoot)) judge_dbx = false;
  // SECURITY: facts_.secure_boot_variables hold only variables whose data
  // verified against their digests. When some PCR 7 configuration event did
  // not verify, or nothing closes PCR 7 with a separator, the database the
  // firmware enforced is not known from the log: fail closed rather than
  // judge the part that happens to verify.
  std::string unknown;
  if (facts_.secure_boot == SecureBootState::kUnverifiable) {
    unknown = "PCR 7's Secure Boot configuration does not verify";
  } else if (std::none_of(facts_.separators.begin(), facts_.separators.end(),
                          [](const Separator& s) {
                            return s.pcr == kPcrSecureBoot && s.kind == SeparatorKind::kNormal;
                          })) {
    unknown = "PCR 7 has no normal separator after its Secure Boot configuration";
  }
  auto check = [&](const char* name, auto&& judge) {
    bool any = false;
    for (const SecureBootVariable& v : facts_.secure_boot_variables) {
      if (v.name != name) continue;
      any = true;
      if (!unknown.empty()) break;
      if (!v.signature_lists_valid) {
        Add(name, std::string(name) + "_not_measured",
            std::string(name) + " (event " + std::to_string(v.event_index) +
                ") is not a valid list of EFI_SIGNATURE_LISTs");
        continue;
      }
      // Every measurement of the variable is judged: were it measured
      // twice, both are what the firmware was shown.
      judge(v);
    }
    if (!unknown.empty()) {
      Add(name, std::string(name) + "_not_measured", unknown);
    } else if (!any) {
      Add(name, std::string(name) + "_not_measured",
          std::string("no verified ") + name + " variable on PCR 7 before its separator");
    }
  };
  if (judge_db) {
    check("db", [&](const SecureBootVariable& v) {
      const std::set<Bytes> certs = SignatureEntries(v.signature_lists, kEfiCertX509Guid);
      const std::string where = " (event " + std::to_string(v.event_index) + ")";
      for (size_t i = 0; i < p.db_required_certificates.size(); ++i) {
        if (certs.count(p.db_required_certificates[i]) == 0) {
          Add("db", "db_certificate_missing",
              "db.required[" + std::to_string(i) + "] is not in db" + where);
        }
      }
      for (size_t i = 0; i < p.db_forbidden_certificates.size(); ++i) {
        if (certs.count(p.db_forbidden_certificates[i]) != 0) {
          Add("db", "db_certificate_forbidden",
              "db.forbidden[" + std::to_string(i) + "] is in db" + where);
        }
      }
    });
  }
  if (judge_dbx) {
    check("dbx", [&](const SecureBootVariable& v) {
      const std::set<Bytes> hashes = SignatureEntries(v.signature_lists, kEfiCertSha256Guid);
      for (size_t i = 0; i < p.dbx_required_hashes.size(); ++i) {
        if (hashes.count(p.dbx_required_hashes[i]) == 0) {
          Add("dbx", "dbx_hash_missing",
              "dbx.required[" + std::to_string(i) + "] is not in dbx (event " +
                  std::to_string(v.event_index) + "): a revoked binary would be allowed");
        }
      }
    });
  }
}

void Evaluator::CheckUkiSigned() {
  if (!policy_.uki_signed) return;
  const Bytes* quoted = nullptr;
  if (auto qb = evidence_.quoted.find(kAlgSha256); qb != evidence_.quoted.end()) {
    if (auto it = qb->second.find(kPcrUkiSections); it != qb->second.end()) quoted = &it->second;
  }
  if (quoted == nullptr) {
    Add("uki_signed", "pcr_not_quoted", "sha256 PCR 11 is not in the quote");
    return;
  }
  auto pol = PolicyPcrDigest(kAlgSha256, kPcrUkiSections, *quoted);
  if (!pol.ok()) {
    Add("uki_signed", "pcr_not_quoted", "sha256 PCR 11's quoted value is malformed");
    return;
  }
  // The keys' fingerprints as systemd writes them, computed once.
  std::vector<std::pair<const Bytes*, Bytes>> trusted;
  for (const Bytes& key : policy_.uki_signed->public_keys) {
    if (auto fp = SystemdPublicKeyFingerprint(key); fp.ok()) trusted.emplace_back(&key, *fp);
  }
  bool any = false, invalid = false;
  for (const PcrSignature& s : evidence_.pcr_signatures) {
    // SECURITY: the machine's "pol" is only a lookup key; the digest judged
    // is the one computed from the quoted value, so a signature over any
    // other PCR 11 (another UKI, another phase) matches nothing.
    if (s.bank != kAlgSha256 || s.pcrs != std::vector<uint32_t>{kPcrUkiSections} ||
        s.policy_digest != *pol) {
      continue;
    }
    any = true;
    for (const auto& [key, fp] : trusted) {
      if (fp != s.key_fingerprint) continue;
      if (VerifyPcrSignature(*key, *pol, s.signature).ok()) return;  // passes
      invalid = true;
    }
  }
  if (!any) {
    Add("uki_signed", "uki_signature_missing",
        "no PCR signature for the quoted sha256 PCR 11: an unsigned UKI, or a quote at a boot "
        "phase the OS builder did not sign");
  } else if (invalid) {
    // A signature naming a trusted key that does not verify: forged, or
    // damaged on the way; never a key change.
    Add("uki_signed", "uki_signature_invalid",
        "a signature of the quoted sha256 PCR 11 names a trusted key but does not verify");
  } else {
    Add("uki_signed", "uki_signature_untrusted_key",
        "the quoted sha256 PCR 11 is signed, but not by a key in uki_signed.public_keys "
        "(add the OS builder's key to the policy if it is trusted)");
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
  CheckRelabelled();
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
  CheckDigests("boot_files", "boot file", facts_.boot_files, kPcrBootFiles,
               policy_.allowed_boot_files, policy_.forbidden_boot_files, "boot_file_not_allowed",
               "boot_file_forbidden");
  CheckKernelCmdline();
  CheckUki();
  CheckSecureBootDb();
  CheckUkiSigned();
  CheckTofu();
  verdict_.ok = verdict_.violations.empty();
  // SECURITY: a failed attestation pins nothing; the first passing one does.
  if (verdict_.ok) verdict_.tofu_to_record = std::move(tofu_pending_);
  return std::move(verdict_);
}

}  // namespace

std::set<uint32_t> PcrsReadFromLog(const BootPolicy& policy) {
  std::set<uint32_t> out;
  if (policy.require_separators) {
    for (uint32_t pcr = 0; pcr <= kMaxSeparatorPcr; ++pcr) out.insert(pcr);
  }
  if (policy.allowed_boot_applications || !policy.forbidden_boot_applications.empty()) {
    out.insert(kPcrBootApplications);
  }
  if (policy.require_secure_boot || policy.allowed_authorities ||
      !policy.forbidden_authorities.empty()) {
    out.insert(kPcrSecureBoot);
  }
  if (policy.allowed_boot_files || !policy.forbidden_boot_files.empty()) out.insert(kPcrBootFiles);
  if (policy.kernel_cmdline) {
    out.insert({kPcrGrubCmdline, kPcrLinuxStubLoadOptions, kPcrUkiSections,
                kPcrSystemdKernelConfig});
  }
  if (policy.uki || policy.uki_signed) out.insert(kPcrUkiSections);
  if (policy.secure_boot_db) out.insert(kPcrSecureBoot);
  return out;
}

Status CompareLogWithQuote(const PcrValues& replayed, const PcrValues& quoted,
                           std::string* phase) {
  PcrValues adjusted = replayed;
  std::string reached;
  for (const auto& [alg, bank] : quoted) {
    auto q = bank.find(kPcrUkiSections);
    auto rb = adjusted.find(alg);
    if (q == bank.end() || rb == adjusted.end() || EvpMd(alg) == nullptr) continue;
    Bytes value = rb->second.count(kPcrUkiSections) != 0
                      ? rb->second.at(kPcrUkiSections)
                      : InitialPcrValue(kPcrUkiSections, DigestSize(alg));
    std::string words;
    for (std::string_view word : kSystemdBootPhases) {
      if (value == q->second) break;
      value = Hash(alg, {value, Hash(alg, {AsBytes(word)})});
      words += (words.empty() ? "" : ":") + std::string(word);
    }
    // No match leaves the log's own value, for ComparePcrs to refuse.
    if (value == q->second && !words.empty()) {
      rb->second[kPcrUkiSections] = value;
      reached = words;
    }
  }
  Status s = ComparePcrs(adjusted, quoted);
  if (s.ok() && phase != nullptr) *phase = reached;
  return s;
}

Verdict Evaluate(const BootPolicy& policy, const BootFacts& facts, const Evidence& evidence) {
  return Evaluator(policy, facts, evidence).Run();
}

}  // namespace rackgate::attest
