// A boot policy proposed from observed boots by strict majority, per rule,
// with the odd machines named; and the rule-by-rule diff of two policies.
#include "core/policy_proposal.h"

#include <algorithm>
#include <map>
#include <optional>
#include <set>
#include <tuple>
#include <stdexcept>
#include <utility>

#include <openssl/evp.h>

#include "attest/boot_facts.h"
#include "attest/efi_structures.h"
#include "attest/eventlog.h"
#include "base/text.h"
#include "wire/boot_policy_json.h"
#include "wire/codec.h"
#include "base/hex.h"

namespace rackgate::core {

namespace {

using attest::Bytes;
using attest::kAlgSha256;
using json = nlohmann::json;

constexpr uint32_t kPcrBootApplications = 4;
constexpr uint32_t kPcrSecureBoot = 7;
// The PCRs that carry a separator: the firmware's, before it hands over.
constexpr uint32_t kMaxSeparatorPcr = 7;
// The PCRs a proposal pins by majority: the firmware's (0-7), grub's
// commands and command line (8), the files it read (9: grub.cfg, kernel,
// initramfs) and shim's MOK state (14). Never 10 (IMA), 11 (a UKI's sections
// and systemd's boot phases, which change as the machine boots: the uki
// rules judge them) or 12 (systemd's command lines and credentials).
constexpr uint32_t kProposedPcrs[] = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 14};
// Entries of one set named per difference before the rest are counted.
constexpr size_t kMaxListed = 5;

Bytes Sha256(std::span<const uint8_t> data) {
  Bytes out(32);
  unsigned int len = 0;
  if (EVP_Digest(data.data(), data.size(), out.data(), &len, EVP_sha256(), nullptr) != 1 ||
      len != out.size()) {
    throw std::runtime_error("EVP_Digest(sha256) failed");
  }
  return out;
}

std::string DigestText(const Bytes& d) { return "sha256:" + hex::Encode(d); }

std::string TextDigest(const std::string& text) {
  return DigestText(Sha256(std::span(reinterpret_cast<const uint8_t*>(text.data()), text.size())));
}

// SECURITY: a kernel command line may carry what must never reach a
// screen or a log (a disk key, a token for an installer). Whatever a
// policy's kernel_cmdline holds beyond the required and forbidden lists
// (the operator's own short fragments, which every verdict names) is shown
// as the SHA-256 of its text: for a string, of the string; for anything
// else (a policy that does not parse), of its JSON.
template <typename J>
std::string CmdlineDigest(const J& v) {
  return TextDigest(v.is_string() ? v.template get<std::string>()
                                  : v.dump(-1, ' ', false, J::error_handler_t::replace));
}

bool ShownCmdlineField(const std::string& key) { return key == "required" || key == "forbidden"; }

// A policy document with its command lines hidden (PolicyForDisplay).
template <typename J>
J ShownPolicy(const J& policy) {
  J out = J::object();
  for (auto it = policy.begin(); it != policy.end(); ++it) {
    if (it.key() != "kernel_cmdline") {
      out[it.key()] = it.value();
    } else if (!it.value().is_object()) {
      out["kernel_cmdline_sha256"] = CmdlineDigest(it.value());
    } else {
      J k = J::object();
      for (auto f = it.value().begin(); f != it.value().end(); ++f) {
        if (ShownCmdlineField(f.key())) {
          k[f.key()] = f.value();
        } else {
          k[f.key() + "_sha256"] = CmdlineDigest(f.value());
        }
      }
      out["kernel_cmdline"] = std::move(k);
    }
  }
  return out;
}

// One usable machine, its log parsed and bound to its quote.
struct Machine {
  const ObservedBoot* boot = nullptr;
  attest::EventLog log;
  attest::BootFacts facts;
  std::string firmware;
  const attest::PcrBank* quoted = nullptr;  // its quote's sha256 bank
  bool Quoted(uint32_t pcr) const { return quoted->count(pcr) != 0; }
  const std::string& name() const { return boot->hostname; }
};

// The EV_S_CRTM_VERSION event's data on PCR 0, printable: UTF-16LE (as
// EDK2 writes it) when it reads as such, else the bytes themselves. Only
// believed when its data matches its digest.
std::string FirmwareVersion(const attest::EventLog& log) {
  for (const attest::Event& ev : log.events) {
    if (ev.pcr != 0 || ev.type != attest::kEvSCrtmVersion) continue;
    if (attest::CheckEventData(ev) != attest::EventDataCheck::kMatches) return "";
    std::span<const uint8_t> d = ev.data;
    bool utf16 = d.size() % 2 == 0 && !d.empty();
    for (size_t i = 1; utf16 && i < d.size(); i += 2) utf16 = d[i] == 0;
    std::string text = utf16 ? attest::Utf16ToUtf8(d) : std::string(d.begin(), d.end());
    while (!text.empty() && text.back() == '\0') text.pop_back();
    return text::PrintableAscii(text, attest::kMaxDescriptionChars);
  }
  return "";
}

// A candidate rule's value on one machine. `key` is what is compared;
// `set` holds a digest set's entries (text -> what it is) for the set rules.
struct Value {
  std::string key;
  std::vector<std::string> items;
  std::map<std::string, std::string> set;
  bool sets_nothing = false;  // as the majority's value, proposes no rule
  bool is_set = false;        // a digest set (`set`), not a word
};

Value Word(std::string word, bool sets_nothing) {
  Value v;
  v.key = word;
  v.items = {std::move(word)};
  v.sets_nothing = sets_nothing;
  return v;
}

Value DigestSet(std::map<std::string, std::string> set) {
  Value v;
  for (const auto& [digest, what] : set) {
    v.key += digest + ";";
    v.items.push_back(what.empty() ? digest : digest + " (" + what + ")");
  }
  if (set.empty()) v.items = {"(none)"};
  v.set = std::move(set);
  v.is_set = true;
  return v;
}

std::string NotQuoted(uint32_t pcr) { return "PCR " + std::to_string(pcr) + " not quoted"; }

// --- Candidate rules ---------------------------------------------------------

Value SecureBootValue(const Machine& m) {
  if (!m.Quoted(kPcrSecureBoot)) return Word(NotQuoted(kPcrSecureBoot), true);
  const bool on = m.facts.secure_boot == attest::SecureBootState::kEnabled;
  return Word(std::string("Secure Boot ") + attest::SecureBootStateName(m.facts.secure_boot), !on);
}

Value SeparatorsValue(const Machine& m) {
  std::string problems;
  for (uint32_t pcr = 0; pcr <= kMaxSeparatorPcr; ++pcr) {
    if (!m.Quoted(pcr)) {
      problems += (problems.empty() ? "" : ", ") + NotQuoted(pcr);
      continue;
    }
    bool normal = false, other = false;
    for (const attest::Separator& s : m.facts.separators) {
      if (s.pcr != pcr) continue;
      (s.kind == attest::SeparatorKind::kNormal ? normal : other) = true;
    }
    if (!normal || other) {
      problems += (problems.empty() ? "" : ", ") +
                  std::string(other ? "an error or malformed separator" : "no separator") +
                  " on PCR " + std::to_string(pcr);
    }
  }
  if (problems.empty()) return Word("normal separators on PCRs 0-7", false);
  return Word(problems, true);
}

Value MeasurementsValue(const Machine& m, uint32_t pcr,
                        const std::vector<attest::Measurement>& list) {
  if (!m.Quoted(pcr)) return Word(NotQuoted(pcr), true);
  std::map<std::string, std::string> set;
  for (const attest::Measurement& me : list) {
    auto d = me.digests.find(kAlgSha256);
    if (d == me.digests.end()) {
      // Cannot be on a sha256 list: this machine could never pass one.
      set["event " + std::to_string(me.event_index) + " has no sha256 digest"] = "";
      continue;
    }
    set.emplace(DigestText(d->second), me.description);
  }
  return DigestSet(std::move(set));
}

// The db's X.509 fingerprints (`want_x509`) or the dbx's SHA-256 hashes.
Value SecureBootDbValue(const Machine& m, const char* variable, bool want_x509) {
  if (!m.Quoted(kPcrSecureBoot)) return Word(NotQuoted(kPcrSecureBoot), true);
  bool measured = false;
  std::map<std::string, std::string> set;
  for (const attest::SecureBootVariable& v : m.facts.secure_boot_variables) {
    if (v.name != variable) continue;
    measured = true;
    if (!v.signature_lists_valid) {
      return Word(std::string(variable) + " does not parse", true);
    }
    for (const attest::EfiSignatureList& l : v.signature_lists) {
      const bool x509 = l.type == attest::kEfiCertX509Guid;
      const bool sha256 = l.type == attest::kEfiCertSha256Guid;
      if (want_x509 ? !x509 : !sha256) continue;
      for (const attest::EfiSignatureData& s : l.signatures) {
        if (want_x509) {
          set.emplace(DigestText(Sha256(s.data)), "certificate");
        } else if (s.data.size() == 32) {
          set.emplace(DigestText(s.data), "");
        }
      }
    }
  }
  if (!measured) return Word(std::string(variable) + " not measured", true);
  Value v = DigestSet(std::move(set));
  v.sets_nothing = v.set.empty();  // an empty "required" list checks nothing
  return v;
}

// The one text of the verified command lines on quoted PCRs, when they are
// all one; the text is kept in `items` only internally (never displayed:
// see KernelCmdlineDisplay).
struct CmdlineFact {
  std::string problem;  // set when there is no single verified text
  std::string text;
};

CmdlineFact CmdlineOf(const Machine& m) {
  std::set<std::string> texts;
  std::vector<const attest::KernelCmdline*> by_digest;
  for (const attest::KernelCmdline& c : m.facts.kernel_cmdlines) {
    // Evaluate counts only command lines on quoted PCRs, in any bank.
    if (!m.Quoted(c.pcr)) continue;
    if (c.by_digest) {
      by_digest.push_back(&c);
    } else if (!c.verified) {
      return {"an unverified kernel command line", ""};
    } else {
      texts.insert(c.text);
    }
  }
  if (texts.empty() && by_digest.empty()) return {"no kernel command line", ""};
  if (texts.size() != 1) return {"kernel command lines by digest only, or several", ""};
  const std::string& text = *texts.begin();
  for (const attest::KernelCmdline* c : by_digest) {
    auto d = c->digests.find(kAlgSha256);
    const std::span<const uint8_t> bytes(reinterpret_cast<const uint8_t*>(text.data()),
                                         text.size());
    if (d == c->digests.end() || d->second != Sha256(bytes)) {
      return {"kernel command lines that differ", ""};
    }
  }
  return {"", text};
}

Value CmdlineValue(const CmdlineFact& f) {
  if (!f.problem.empty()) return Word(f.problem, true);
  // SECURITY: a command line may carry what must not reach a log or a
  // screen; it is shown as the SHA-256 of its text.
  Value v = Word("kernel command line " + TextDigest(f.text), false);
  v.key = "text:" + f.text;
  return v;
}

Value UkiValue(const Machine& m) {
  if (!m.Quoted(attest::kPcrUkiSections)) return Word(NotQuoted(attest::kPcrUkiSections), true);
  if (m.facts.uki_sections.empty()) return Word("no UKI", true);
  std::map<std::string, std::string> set;
  for (const attest::UkiSection& s : m.facts.uki_sections) {
    auto d = s.digests.find(kAlgSha256);
    set[s.name + " " + (d == s.digests.end() ? std::string("(no sha256 digest)")
                                             : DigestText(d->second))] = "";
  }
  return DigestSet(std::move(set));
}

Value PcrValue(const Machine& m, uint32_t pcr) {
  auto it = m.quoted->find(pcr);
  if (it == m.quoted->end()) return Word("not quoted", true);
  return Word(hex::Encode(it->second), false);
}

// --- Majority ----------------------------------------------------------------

struct Decision {
  RuleOutcome outcome;
  int majority = -1;  // index into the values of a machine holding it
};

Decision Decide(const std::string& rule, const std::vector<Machine>& machines,
                const std::vector<Value>& values) {
  std::map<std::string, std::vector<size_t>> groups;
  for (size_t i = 0; i < values.size(); ++i) groups[values[i].key].push_back(i);
  std::vector<const std::vector<size_t>*> order;
  for (const auto& [key, members] : groups) order.push_back(&members);
  std::stable_sort(order.begin(), order.end(),
                   [](auto* a, auto* b) { return a->size() > b->size(); });
  Decision d;
  d.outcome.rule = rule;
  for (const std::vector<size_t>* members : order) {
    RuleValue rv;
    rv.items = values[members->front()].items;
    for (size_t i : *members) rv.hostnames.push_back(machines[i].name());
    std::sort(rv.hostnames.begin(), rv.hostnames.end());
    d.outcome.values.push_back(std::move(rv));
  }
  // A strict majority, never a plurality: with no value held by more than
  // half the machines, the rule is left to the operator.
  if (!order.empty() && 2 * order.front()->size() > machines.size()) {
    d.majority = static_cast<int>(order.front()->front());
    d.outcome.decided = true;
    d.outcome.proposed = !values[d.majority].sets_nothing;
    d.outcome.agreeing = d.outcome.values.front().hostnames;
  }
  return d;
}

std::vector<attest::PolicyDigest> PolicyDigests(const Value& v) {
  std::vector<attest::PolicyDigest> out;
  for (const auto& [text, what] : v.set) {
    if (text.rfind("sha256:", 0) != 0) continue;  // "event N has no sha256 digest"
    auto bytes = hex::Decode(text.substr(7), 32);
    if (bytes && bytes->size() == 32) out.push_back({kAlgSha256, *bytes});
  }
  return out;
}

std::vector<Bytes> Sha256s(const Value& v) {
  std::vector<Bytes> out;
  for (const attest::PolicyDigest& d : PolicyDigests(v)) out.push_back(d.value);
  return out;
}

// What differs between a machine's set and the majority's.
void SetDifferences(const Value& mine, const Value& majority, const std::string& noun,
                    std::vector<std::string>* out) {
  if (!mine.is_set || !majority.is_set) {
    // e.g. "PCR 4 not quoted" against the majority's list.
    out->push_back(mine.items.front() + " vs " + majority.items.front() + " on the majority");
    return;
  }
  // Each side's entries, up to kMaxListed of them named; a dbx of
  // hundreds of hashes is summed up rather than listed.
  auto list = [&](const Value& from, const Value& other, const std::string& before,
                  const std::string& after) {
    size_t n = 0;
    for (const auto& [digest, what] : from.set) {
      if (other.set.count(digest) != 0) continue;
      if (++n <= kMaxListed) {
        out->push_back(before + noun + " " + digest + (what.empty() ? "" : " (" + what + ")") +
                       after);
      }
    }
    if (n > kMaxListed) {
      out->push_back("and " + std::to_string(n - kMaxListed) + " more: " + before + noun + after);
    }
  };
  list(mine, majority, "", " not on the majority's list");
  list(majority, mine, "no ", ", which the majority has");
}

// The proposal, built in steps: admit the boots whose logs the quotes
// vouched for, group platforms, then one candidate per rule, then what the
// proposed policy would do to each machine.
class Proposer {
 public:
  Proposal Run(std::span<const ObservedBoot> boots) {
    Admit(boots);
    GroupPlatforms();
    ProposeSecureBoot();
    ProposeCmdline();
    ProposeBootFiles();
    ProposeUki();
    ProposePcrs();
    JudgeEach();
    for (auto& [name, o] : odd_) p_.odd.push_back(std::move(o));
    p_.policy_json = wire::FormatBootPolicyJson(p_.policy);
    return std::move(p_);
  }

 private:
  // The machine's boot as a Machine, or why it cannot be judged.
  std::optional<UnusableMachine> AdmitOne(const ObservedBoot& b) {
    if (b.event_log.empty()) {
      return UnusableMachine{b.hostname, "eventlog_missing",
                      "no event log was observed; the machine's firmware or agent "
                      "sent none, so its boot cannot be judged"};
    }
    Result<attest::EventLog> log = attest::ParseEventLog(b.event_log);
    if (!log.ok()) return UnusableMachine{b.hostname, log.status().reason(), log.status().message()};
    Result<attest::PcrValues> replayed = attest::Replay(*log);
    if (!replayed.ok()) {
      return UnusableMachine{b.hostname, replayed.status().reason(), replayed.status().message()};
    }
    // SECURITY: facts of a log that is not the one the quote vouched for are
    // the machine's word only; they must not shape the fleet's policy.
    if (Status s = attest::CompareLogWithQuote(*replayed, b.quoted); !s.ok()) {
      return UnusableMachine{b.hostname, s.reason(), s.message()};
    }
    auto bank = b.quoted.find(kAlgSha256);
    if (bank == b.quoted.end() || bank->second.empty()) {
      return UnusableMachine{b.hostname, "sha256_not_quoted",
                      "the quote has no sha256 PCR; proposals are made from the sha256 bank"};
    }
    Machine m;
    m.boot = &b;
    m.log = *std::move(log);
    m.facts = attest::ExtractBootFacts(m.log);
    m.firmware = FirmwareVersion(m.log);
    m.quoted = &bank->second;
    ms_.push_back(std::move(m));
    return std::nullopt;
  }

  void Admit(std::span<const ObservedBoot> boots) {
    for (const ObservedBoot& b : boots) {
      if (std::optional<UnusableMachine> u = AdmitOne(b)) p_.unusable.push_back(*std::move(u));
    }
    std::stable_sort(ms_.begin(), ms_.end(),
                     [](const Machine& a, const Machine& b) { return a.name() < b.name(); });
    for (const Machine& m : ms_) p_.machines.push_back(m.name());
  }

  void Differs(const Machine& m, const std::string& rule, std::string message) {
    OddMachine& o = odd_[m.name()];
    o.hostname = m.name();
    o.differences.push_back({rule, std::move(message)});
  }

  void GroupPlatforms() {
    using Key = std::tuple<std::string, std::string, std::string>;
    std::map<Key, std::vector<const Machine*>> groups;
    for (const Machine& m : ms_) {
      groups[{m.firmware, text::PrintableAscii(m.boot->tpm_manufacturer, attest::kMaxDescriptionChars),
              text::PrintableAscii(m.boot->tpm_model, attest::kMaxDescriptionChars)}]
          .push_back(&m);
    }
    const Key* major = nullptr;
    for (const auto& [key, members] : groups) {
      PlatformGroup g{std::get<0>(key), std::get<1>(key), std::get<2>(key), {}};
      for (const Machine* m : members) g.hostnames.push_back(m->name());
      p_.platforms.push_back(std::move(g));
      if (2 * members.size() > ms_.size()) major = &key;
    }
    std::stable_sort(p_.platforms.begin(), p_.platforms.end(),
                     [](const PlatformGroup& a, const PlatformGroup& b) {
                       return a.hostnames.size() > b.hostnames.size();
                     });
    if (major == nullptr) return;
    const char* what[] = {"firmware", "TPM manufacturer", "TPM model"};
    const std::string theirs[] = {std::get<0>(*major), std::get<1>(*major), std::get<2>(*major)};
    for (const auto& [key, members] : groups) {
      if (&key == major) continue;
      const std::string mine[] = {std::get<0>(key), std::get<1>(key), std::get<2>(key)};
      for (const Machine* m : members) {
        for (int i = 0; i < 3; ++i) {
          if (mine[i] != theirs[i]) {
            Differs(*m, "platform", std::string(what[i]) + " '" + mine[i] + "' vs '" + theirs[i] + "'");
          }
        }
      }
    }
  }

  // One candidate: the machines' values, the majority, the differences, and
  // the rule when the majority's value sets one. The pointer returned points
  // into `values`.
  template <typename Difference>
  const Value* Candidate(const std::string& rule, const std::vector<Value>& values,
                         const Difference& difference) {
    Decision d = Decide(rule, ms_, values);
    const Value* majority = d.majority >= 0 ? &values[d.majority] : nullptr;
    if (majority != nullptr) {
      for (size_t i = 0; i < ms_.size(); ++i) {
        if (values[i].key == majority->key) continue;
        for (std::string& msg : difference(values[i], *majority)) Differs(ms_[i], rule, msg);
      }
    }
    const bool proposed = d.outcome.proposed;
    p_.rules.push_back(std::move(d.outcome));
    return proposed ? majority : nullptr;
  }

  template <typename F>
  std::vector<Value> Collect(const F& f) const {
    std::vector<Value> values;
    for (const Machine& m : ms_) values.push_back(f(m));
    return values;
  }

  static std::vector<std::string> WordDifference(const Value& mine, const Value& majority) {
    return {mine.items.front() + " vs " + majority.items.front() + " on the majority"};
  }

  static auto SetDifference(const std::string& noun) {
    return [noun](const Value& mine, const Value& majority) {
      std::vector<std::string> out;
      SetDifferences(mine, majority, noun, &out);
      return out;
    };
  }

  // Secure Boot: the switch, separators, boot applications, authorities, db, dbx.
  void ProposeSecureBoot() {
    attest::BootPolicy& policy = p_.policy;
    const std::vector<Value> secure_boot = Collect(SecureBootValue);
    if (Candidate("require_secure_boot", secure_boot, WordDifference)) policy.require_secure_boot = true;
    const std::vector<Value> separators = Collect(SeparatorsValue);
    if (Candidate("require_separators", separators, WordDifference)) policy.require_separators = true;
    const std::vector<Value> apps = Collect([](const Machine& m) {
      return MeasurementsValue(m, kPcrBootApplications, m.facts.boot_applications);
    });
    if (const Value* v = Candidate("boot_applications.allowed", apps, SetDifference("boot application"))) {
      policy.allowed_boot_applications = PolicyDigests(*v);
    }
    const std::vector<Value> authorities = Collect([](const Machine& m) {
      return MeasurementsValue(m, kPcrSecureBoot, m.facts.authorities);
    });
    if (const Value* v = Candidate("authorities.allowed", authorities, SetDifference("authority"))) {
      policy.allowed_authorities = PolicyDigests(*v);
    }
    const std::vector<Value> db = Collect([](const Machine& m) { return SecureBootDbValue(m, "db", true); });
    if (const Value* v = Candidate("db.required", db, SetDifference("db certificate"))) {
      if (!policy.secure_boot_db) policy.secure_boot_db.emplace();
      policy.secure_boot_db->db_required_certificates = Sha256s(*v);
    }
    const std::vector<Value> dbx = Collect([](const Machine& m) { return SecureBootDbValue(m, "dbx", false); });
    if (const Value* v = Candidate("dbx.required", dbx, SetDifference("dbx hash"))) {
      if (!policy.secure_boot_db) policy.secure_boot_db.emplace();
      policy.secure_boot_db->dbx_required_hashes = Sha256s(*v);
    }
  }

  void ProposeCmdline() {
    std::vector<CmdlineFact> facts;
    std::vector<Value> values;
    for (const Machine& m : ms_) {
      facts.push_back(CmdlineOf(m));
      values.push_back(CmdlineValue(facts.back()));
    }
    // Never the text itself: it may carry what must not be shown.
    auto cmdline_difference = [](const Value& mine, const Value&) {
      if (mine.sets_nothing) return std::vector<std::string>{mine.items.front()};
      return std::vector<std::string>{"kernel command line differs"};
    };
    if (const Value* v = Candidate("kernel_cmdline.exact", values, cmdline_difference)) {
      const size_t i = static_cast<size_t>(v - values.data());
      p_.policy.kernel_cmdline = attest::KernelCmdlinePolicy{facts[i].text, {}, {}};
    }
  }

  // grub's grub.cfg, kernel and initramfs (PCR 9), by digest.
  void ProposeBootFiles() {
    const std::vector<Value> files = Collect([](const Machine& m) {
      Value v = MeasurementsValue(m, attest::kPcrBootFiles, m.facts.boot_files);
      // A fleet whose PCR 9 holds nothing (no grub in the chain) gets no
      // list: the PCR 9 pin already says "nothing".
      if (v.is_set && v.set.empty()) v.sets_nothing = true;
      return v;
    });
    if (const Value* v = Candidate("boot_files.allowed", files, SetDifference("boot file"))) {
      p_.policy.allowed_boot_files = PolicyDigests(*v);
    }
  }

  void ProposeUki() {
    std::vector<Value> values = Collect(UkiValue);
    const Value* v = Candidate("uki.sections", values, SetDifference("UKI section"));
    if (v == nullptr) return;
    const Machine& m = ms_[static_cast<size_t>(v - values.data())];
    attest::UkiPolicy uki;
    for (const attest::UkiSection& s : m.facts.uki_sections) {
      auto d = s.digests.find(kAlgSha256);
      if (d == s.digests.end()) continue;
      std::vector<attest::PolicyDigest>& list = uki.sections[s.name];
      if (std::none_of(list.begin(), list.end(),
                       [&](const attest::PolicyDigest& x) { return x.value == d->second; })) {
        list.push_back({kAlgSha256, d->second});
      }
    }
    if (!uki.sections.empty()) p_.policy.uki = std::move(uki);
  }

  void ProposePcrs() {
    for (uint32_t pcr : kProposedPcrs) {
      std::vector<Value> values = Collect([pcr](const Machine& m) { return PcrValue(m, pcr); });
      auto pcr_difference = [pcr](const Value& mine, const Value&) {
        return std::vector<std::string>{"PCR " + std::to_string(pcr) +
                                        (mine.sets_nothing ? " not quoted" : " differs")};
      };
      if (const Value* v = Candidate("pcrs.sha256." + std::to_string(pcr), values, pcr_difference)) {
        p_.policy.pcrs[kAlgSha256][pcr] = *hex::Decode(v->key, 32);
      }
    }
  }

  // What the proposal would do to each machine.
  void JudgeEach() {
    for (const Machine& m : ms_) {
      attest::Evidence ev;
      ev.log = &m.log;
      ev.quoted = m.boot->quoted;
      attest::Verdict verdict = attest::Evaluate(p_.policy, m.facts, ev);
      if (verdict.ok) continue;
      OddMachine& o = odd_[m.name()];
      o.hostname = m.name();
      o.violations = std::move(verdict.violations);
    }
  }

  Proposal p_;
  std::vector<Machine> ms_;
  std::map<std::string, OddMachine> odd_;
};

}  // namespace

Proposal ProposeBootPolicy(std::span<const ObservedBoot> boots) { return Proposer().Run(boots); }

// --- Renderings --------------------------------------------------------------

std::string FormatProposalText(const Proposal& p) {
  auto count = [](size_t n, const char* one, const char* many) {
    return std::to_string(n) + " " + (n == 1 ? one : many);
  };
  std::string out = count(p.machines.size(), "machine", "machines") + ", " +
                    count(p.platforms.size(), "platform", "platforms") + ", " +
                    std::to_string(p.odd.size()) + " odd";
  if (!p.unusable.empty()) out += ", " + std::to_string(p.unusable.size()) + " unusable";
  out += "\n";
  for (const OddMachine& o : p.odd) {
    out += "\nodd: " + o.hostname + "\n";
    for (const Difference& d : o.differences) out += "  differs  " + d.rule + ": " + d.message + "\n";
    for (const attest::Violation& v : o.violations) {
      out += "  would break  " + v.rule + ": " + v.reason + ": " + v.message + "\n";
    }
  }
  bool header = false;
  for (const RuleOutcome& r : p.rules) {
    if (r.decided) continue;
    if (!header) out += "\nundecided (no value held by more than half the machines; not proposed):\n";
    header = true;
    out += "  " + r.rule + "\n";
    for (const RuleValue& v : r.values) {
      std::string hosts;
      for (const std::string& h : v.hostnames) hosts += (hosts.empty() ? "" : ", ") + h;
      out += "    on " + hosts + ":\n";
      for (const std::string& item : v.items) out += "      " + item + "\n";
    }
  }
  if (!p.unusable.empty()) out += "\nunusable (left out):\n";
  for (const UnusableMachine& u : p.unusable) {
    out += "  " + u.hostname + ": " + u.reason + ": " + u.message + "\n";
  }
  return out;
}

// --- Diff --------------------------------------------------------------------

namespace {

// A policy document in its normal form: through the parser and the writer
// when it parses, else as plain JSON (with a note).
json Normalized(const std::string& text, const char* which, std::string* note) {
  Result<attest::BootPolicy> parsed = wire::ParseBootPolicy(text);
  if (parsed.ok()) return json::parse(wire::FormatBootPolicyJson(*parsed));
  json j = json::parse(text, nullptr, false);
  *note += std::string(note->empty() ? "" : "; ") + "the " + which + " policy does not parse (" +
           parsed.status().ToString() + ")";
  if (j.is_discarded() || !j.is_object()) {
    *note += ", and is not a JSON object: compared as empty";
    return json::object();
  }
  *note += ": compared as plain JSON";
  return j;
}

std::string Leaf(const json& v) {
  // Strings inside lists (digests, PEM keys) are shown as they are unless
  // they hold control characters; other scalars as JSON.
  if (v.is_string()) {
    const std::string& s = v.get_ref<const std::string&>();
    if (std::none_of(s.begin(), s.end(), [](char c) { return static_cast<unsigned char>(c) < 0x20; })) {
      return s;
    }
  }
  return v.dump(-1, ' ', false, json::error_handler_t::replace);
}

// Every entry under `path`: "path value", a list's entries one by one.
void Flatten(const json& v, const std::string& path, std::set<std::string>* out) {
  if (path == "kernel_cmdline") {
    // SECURITY: never a command line's text (CmdlineDigest): the diff is
    // printed, returned by the admin API and kept in the audit row.
    if (!v.is_object()) {
      out->insert(path + " " + CmdlineDigest(v));
      return;
    }
    for (const auto& item : v.items()) {
      if (ShownCmdlineField(item.key())) {
        Flatten(item.value(), path + "." + item.key(), out);
      } else {
        out->insert(path + "." + item.key() + " " + CmdlineDigest(item.value()));
      }
    }
    return;
  }
  if (v.is_object()) {
    if (v.empty()) out->insert(path + " {}");
    for (const auto& item : v.items()) Flatten(item.value(), path + "." + item.key(), out);
  } else if (v.is_array()) {
    if (v.empty()) out->insert(path + " []");
    for (const json& e : v) {
      if (e.is_structured()) {
        out->insert(path + " " + e.dump(-1, ' ', false, json::error_handler_t::replace));
      } else {
        out->insert(path + " " + Leaf(e));
      }
    }
  } else {
    out->insert(path + " " + (v.is_string() ? v.dump(-1, ' ', false, json::error_handler_t::replace)
                                            : Leaf(v)));
  }
}

}  // namespace

PolicyDiff DiffBootPolicies(const std::optional<std::string>& current_json,
                            const std::string& proposed_json) {
  PolicyDiff diff;
  diff.had_current = current_json.has_value();
  const json current = current_json ? Normalized(*current_json, "current", &diff.note) : json::object();
  const json proposed = Normalized(proposed_json, "proposed", &diff.note);
  std::set<std::string> rules;
  for (const auto& item : current.items()) rules.insert(item.key());
  for (const auto& item : proposed.items()) rules.insert(item.key());
  for (const std::string& rule : rules) {
    // "comment" is for people and the parser drops it.
    if (rule == "comment") continue;
    std::set<std::string> before, after;
    if (current.contains(rule)) Flatten(current.at(rule), rule, &before);
    if (proposed.contains(rule)) Flatten(proposed.at(rule), rule, &after);
    PolicyChange c;
    c.rule = rule;
    c.kind = !current.contains(rule) ? "added" : !proposed.contains(rule) ? "removed" : "changed";
    std::set_difference(after.begin(), after.end(), before.begin(), before.end(),
                        std::back_inserter(c.added));
    std::set_difference(before.begin(), before.end(), after.begin(), after.end(),
                        std::back_inserter(c.removed));
    if (!c.added.empty() || !c.removed.empty()) diff.changes.push_back(std::move(c));
  }
  return diff;
}

std::string FormatPolicyDiffText(const PolicyDiff& diff) {
  std::string out;
  if (!diff.note.empty()) out += "note: " + diff.note + "\n";
  if (!diff.had_current) out += "no current policy: every rule is new\n";
  for (const PolicyChange& c : diff.changes) {
    for (const std::string& r : c.removed) out += "- " + r + "\n";
    for (const std::string& a : c.added) out += "+ " + a + "\n";
  }
  if (diff.changes.empty()) out += "(no change)\n";
  return out;
}

json PolicyForDisplay(const std::string& policy_text) {
  const json j = json::parse(policy_text, nullptr, false);
  if (j.is_discarded() || !j.is_object()) return "not a JSON object (" + TextDigest(policy_text) + ")";
  return ShownPolicy(j);
}

std::string FormatPolicyForDisplay(const std::string& policy_text) {
  using ordered = nlohmann::ordered_json;
  const ordered j = ordered::parse(policy_text, nullptr, false);
  if (j.is_discarded() || !j.is_object()) return "not a JSON object (" + TextDigest(policy_text) + ")\n";
  return ShownPolicy(j).dump(2, ' ', false, ordered::error_handler_t::replace) + "\n";
}

}  // namespace rackgate::core
