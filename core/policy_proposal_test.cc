// Tests for proposing a boot policy from observed boots, on the real logs of
// testdata/eventlogs (each machine quotes its own log's replay), and for the
// diff of two policy documents.
#include "core/policy_proposal.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <set>
#include <string>
#include <vector>

#include "attest/boot_facts.h"
#include "attest/eventlog.h"
#include "attest/testing/event_log_builder.h"
#include "core/policy_service.h"
#include "core/secrets.h"
#include "wire/admin_policy.h"
#include "wire/boot_policy_json.h"

namespace rackgate::core {
namespace {

namespace fs = std::filesystem;
using attest::Bytes;
using attest::kAlgSha256;

// The proposal as the admin API answers it (core::ProposalViewOf, encoded
// by wire/admin_policy.h), without the document itself (policy_text, which
// only --output FILE gets): what may reach a screen.
nlohmann::json ShownProposal(const Proposal& p) {
  ProposalReport report;
  report.proposal = p;
  report.diff = DiffBootPolicies(std::nullopt, p.policy_json);
  wire::PolicyProposalView v = ProposalViewOf(report);
  v.policy_text.reset();
  return nlohmann::json::parse(wire::EncodePolicyProposalView(v));
}

// A diff as the admin API answers it.
nlohmann::json ShownDiff(const PolicyDiff& d) {
  return nlohmann::json::parse(wire::EncodePolicyAppliedView({"p", "enforce", std::nullopt, PolicyDiffViewOf(d), ""}))
      .at("diff");
}

// Three GCE logs: two Ubuntu 21.04 machines that booted different shims on
// the same firmware, and a Fedora CoreOS one.
constexpr char kUbuntu[] = "tpm2-tools_event-gce-ubuntu-2104-log.bin";
constexpr char kUbuntuOtherShim[] = "go-attestation_ubuntu_2104_shielded_vm_no_secure_boot_eventlog.bin";
constexpr char kCoreos[] = "go-attestation_coreos_36_shielded_vm_no_secure_boot_eventlog.bin";
// Secure Boot on, another firmware.
constexpr char kSecureBoot[] = "go-attestation_sb_cert_eventlog.bin";
// systemd-boot with a measured kernel command line on PCR 12.
constexpr char kSdBoot[] = "tpm2-tools_event-sd-boot-fedora37.bin";

Bytes ReadLog(const char* name) {
  const char* dir = std::getenv("RACKGATE_TESTDATA_DIR");
  EXPECT_NE(dir, nullptr) << "set RACKGATE_TESTDATA_DIR to the project's testdata/";
  if (dir == nullptr) return {};
  std::ifstream in(fs::path(dir) / "eventlogs" / name, std::ios::binary);
  EXPECT_TRUE(in.good()) << name;
  return Bytes(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

attest::PcrValues ReplayOf(const Bytes& bytes) {
  auto log = attest::ParseEventLog(bytes);
  EXPECT_TRUE(log.ok()) << log.status().ToString();
  if (!log.ok()) return {};
  auto pcrs = attest::Replay(*log);
  EXPECT_TRUE(pcrs.ok()) << pcrs.status().ToString();
  return pcrs.ok() ? *pcrs : attest::PcrValues{};
}

// A machine that quoted exactly what its log replays to.
ObservedBoot Machine(const std::string& host, const char* log, std::string model = "vTPM") {
  ObservedBoot b;
  b.hostname = host;
  b.tpm_manufacturer = "GOOG";
  b.tpm_model = std::move(model);
  b.event_log = ReadLog(log);
  b.quoted = ReplayOf(b.event_log);
  return b;
}

const OddMachine* Odd(const Proposal& p, const std::string& host) {
  for (const OddMachine& o : p.odd) {
    if (o.hostname == host) return &o;
  }
  return nullptr;
}

const RuleOutcome& Rule(const Proposal& p, const std::string& rule) {
  for (const RuleOutcome& r : p.rules) {
    if (r.rule == rule) return r;
  }
  ADD_FAILURE() << "no rule " << rule;
  static const RuleOutcome none;
  return none;
}

bool HasDifference(const OddMachine& o, const std::string& rule, const std::string& part) {
  return std::any_of(o.differences.begin(), o.differences.end(), [&](const Difference& d) {
    return d.rule == rule && d.message.find(part) != std::string::npos;
  });
}

bool HasViolation(const OddMachine& o, const std::string& rule, const std::string& reason) {
  return std::any_of(o.violations.begin(), o.violations.end(), [&](const attest::Violation& v) {
    return v.rule == rule && v.reason == reason;
  });
}

// Evaluate of the proposed policy against one observed machine.
attest::Verdict Judge(const attest::BootPolicy& policy, const ObservedBoot& b) {
  auto log = attest::ParseEventLog(b.event_log);
  EXPECT_TRUE(log.ok());
  const attest::BootFacts facts = attest::ExtractBootFacts(*log);
  attest::Evidence ev;
  ev.log = &*log;
  ev.quoted = b.quoted;
  return attest::Evaluate(policy, facts, ev);
}

// --- Two alike, one odd --------------------------------------------------------

TEST(ProposeBootPolicy, TwoAlikeOneOddShim) {
  const std::vector<ObservedBoot> boots = {Machine("node-a", kUbuntu), Machine("node-b", kUbuntu),
                                           Machine("node-c", kUbuntuOtherShim)};
  const Proposal p = ProposeBootPolicy(boots);
  EXPECT_EQ(p.machines, (std::vector<std::string>{"node-a", "node-b", "node-c"}));
  EXPECT_TRUE(p.unusable.empty());
  ASSERT_EQ(p.odd.size(), 1u);
  const OddMachine* c = Odd(p, "node-c");
  ASSERT_NE(c, nullptr);

  // The odd one is named with what differs: its shim is not the majority's.
  EXPECT_TRUE(HasDifference(*c, "boot_applications.allowed",
                            "(\\EFI\\ubuntu\\shimx64.efi (954576 bytes)) not on the majority's list"))
      << FormatProposalText(p);
  EXPECT_TRUE(HasDifference(*c, "boot_applications.allowed", "no boot application sha256:"));
  EXPECT_TRUE(HasDifference(*c, "pcrs.sha256.4", "PCR 4 differs"));
  // Its dbx holds 183 hashes the majority's empty one does not: five named,
  // the rest counted.
  EXPECT_TRUE(HasDifference(*c, "dbx.required", "and 178 more: dbx hash not on the majority's list"))
      << FormatProposalText(p);

  // The proposal is the majority's boot: two shims' worth of PCR 4, not three.
  ASSERT_TRUE(p.policy.allowed_boot_applications.has_value());
  EXPECT_EQ(p.policy.allowed_boot_applications->size(), 2u);  // shim and grub
  const RuleOutcome& apps = Rule(p, "boot_applications.allowed");
  EXPECT_TRUE(apps.proposed);
  EXPECT_EQ(apps.agreeing, (std::vector<std::string>{"node-a", "node-b"}));
  ASSERT_EQ(apps.values.size(), 2u);
  EXPECT_EQ(apps.values[1].hostnames, (std::vector<std::string>{"node-c"}));
  EXPECT_TRUE(p.policy.require_separators);
  // Secure Boot is off on all three: decided, and nothing required.
  EXPECT_TRUE(Rule(p, "require_secure_boot").decided);
  EXPECT_FALSE(Rule(p, "require_secure_boot").proposed);
  EXPECT_FALSE(p.policy.require_secure_boot);
  ASSERT_TRUE(p.policy.secure_boot_db.has_value());
  EXPECT_EQ(p.policy.secure_boot_db->db_required_certificates.size(), 2u);
  // PCRs 0-9 and 14 pinned (the firmware's, grub's 8 and 9, shim's 14);
  // never 10-13.
  std::vector<uint32_t> pinned;
  for (const auto& [pcr, v] : p.policy.pcrs.at(kAlgSha256)) pinned.push_back(pcr);
  EXPECT_EQ(pinned, (std::vector<uint32_t>{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 14}));
  EXPECT_EQ(p.policy.pcrs.at(kAlgSha256).at(4), boots[0].quoted.at(kAlgSha256).at(4));

  // The proposal passes the two and refuses the odd one, with the rule.
  EXPECT_TRUE(Judge(p.policy, boots[0]).ok);
  EXPECT_TRUE(Judge(p.policy, boots[1]).ok);
  EXPECT_FALSE(Judge(p.policy, boots[2]).ok);
  EXPECT_TRUE(HasViolation(*c, "boot_applications", "boot_application_not_allowed"));
  EXPECT_TRUE(HasViolation(*c, "pcrs", "pcr_mismatch"));

  // One platform: same firmware and TPM.
  ASSERT_EQ(p.platforms.size(), 1u);
  EXPECT_EQ(p.platforms[0].firmware, "GCE Virtual Firmware v1");
  EXPECT_EQ(p.platforms[0].hostnames.size(), 3u);
}

TEST(ProposeBootPolicy, PolicyJsonIsTheWritersForm) {
  const std::vector<ObservedBoot> boots = {Machine("a", kUbuntu), Machine("b", kUbuntu),
                                           Machine("c", kCoreos)};
  const Proposal p = ProposeBootPolicy(boots);
  EXPECT_EQ(p.policy_json, wire::FormatBootPolicyJson(p.policy));
  EXPECT_EQ(p.policy_json.rfind("{\n  \"version\": 1,", 0), 0u) << p.policy_json;
  EXPECT_NE(p.policy_json.find("\"boot_applications\""), std::string::npos);
  EXPECT_NE(p.policy_json.find("\"db\""), std::string::npos);
  // Without the db rule (whose parser lands separately) it reads back as is.
  attest::BootPolicy without_db = p.policy;
  without_db.secure_boot_db.reset();
  auto back = wire::ParseBootPolicy(wire::FormatBootPolicyJson(without_db));
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(back->pcrs, p.policy.pcrs);
  EXPECT_EQ(back->allowed_boot_applications->size(), p.policy.allowed_boot_applications->size());
}

TEST(ProposeBootPolicy, OtherFirmwareAndTpmAreNamed) {
  const std::vector<ObservedBoot> boots = {Machine("a", kUbuntu), Machine("b", kUbuntu),
                                           Machine("sb", kSecureBoot, "other-model")};
  const Proposal p = ProposeBootPolicy(boots);
  ASSERT_EQ(p.platforms.size(), 2u);
  EXPECT_EQ(p.platforms[0].hostnames, (std::vector<std::string>{"a", "b"}));
  const OddMachine* sb = Odd(p, "sb");
  ASSERT_NE(sb, nullptr);
  EXPECT_TRUE(HasDifference(*sb, "platform", "firmware '' vs 'GCE Virtual Firmware v1'"));
  EXPECT_TRUE(HasDifference(*sb, "platform", "TPM model 'other-model' vs 'vTPM'"));
  EXPECT_TRUE(HasDifference(*sb, "require_secure_boot",
                            "Secure Boot enabled vs Secure Boot disabled on the majority"));
  EXPECT_EQ(Odd(p, "a"), nullptr);
  EXPECT_FALSE(sb->violations.empty());
}

// --- No strict majority ------------------------------------------------------

TEST(ProposeBootPolicy, OneOneSplitLeavesRulesUndecided) {
  const std::vector<ObservedBoot> boots = {Machine("ubuntu", kUbuntu), Machine("coreos", kCoreos)};
  const Proposal p = ProposeBootPolicy(boots);
  const RuleOutcome& apps = Rule(p, "boot_applications.allowed");
  EXPECT_FALSE(apps.decided);
  EXPECT_FALSE(apps.proposed);
  EXPECT_TRUE(apps.agreeing.empty());
  ASSERT_EQ(apps.values.size(), 2u);
  EXPECT_EQ(apps.values[0].hostnames.size(), 1u);
  EXPECT_EQ(apps.values[1].hostnames.size(), 1u);
  // Never widened: no allow-list at all rather than both machines' digests.
  EXPECT_FALSE(p.policy.allowed_boot_applications.has_value());
  EXPECT_FALSE(Rule(p, "pcrs.sha256.4").decided);
  EXPECT_EQ(p.policy.pcrs.at(kAlgSha256).count(4), 0u);
  EXPECT_FALSE(Rule(p, "authorities.allowed").decided);
  EXPECT_FALSE(p.policy.allowed_authorities.has_value());
  // What both agree on is proposed, and passes both.
  EXPECT_TRUE(Rule(p, "require_separators").proposed);
  EXPECT_TRUE(p.policy.require_separators);
  EXPECT_TRUE(p.odd.empty()) << FormatProposalText(p);
  EXPECT_TRUE(Judge(p.policy, boots[0]).ok);
  EXPECT_TRUE(Judge(p.policy, boots[1]).ok);
  const std::string text = FormatProposalText(p);
  EXPECT_NE(text.find("undecided"), std::string::npos);
  EXPECT_NE(text.find("  boot_applications.allowed\n"), std::string::npos) << text;
  EXPECT_NE(text.find("\\EFI\\fedora\\shimx64.efi"), std::string::npos) << text;
}

// --- Unusable ------------------------------------------------------------------

TEST(ProposeBootPolicy, UnusableLogsAreListedAndLeftOut) {
  std::vector<ObservedBoot> boots = {Machine("a", kUbuntu), Machine("b", kUbuntu)};
  ObservedBoot none;
  none.hostname = "no-log";
  boots.push_back(none);
  ObservedBoot garbage = Machine("garbage", kUbuntu);
  garbage.event_log.resize(100);  // cut inside an event
  boots.push_back(garbage);
  ObservedBoot lying = Machine("lying", kCoreos);
  lying.quoted = ReplayOf(ReadLog(kUbuntu));  // its quote is not its log's
  boots.push_back(lying);
  ObservedBoot sha1_only = Machine("sha1-only", kUbuntu);
  sha1_only.quoted.erase(kAlgSha256);
  boots.push_back(sha1_only);

  const Proposal p = ProposeBootPolicy(boots);
  EXPECT_EQ(p.machines, (std::vector<std::string>{"a", "b"}));
  ASSERT_EQ(p.unusable.size(), 4u);
  EXPECT_EQ(p.unusable[0].hostname, "no-log");
  EXPECT_EQ(p.unusable[0].reason, "eventlog_missing");
  EXPECT_EQ(p.unusable[1].hostname, "garbage");
  EXPECT_EQ(p.unusable[1].reason.rfind("eventlog_", 0), 0u) << p.unusable[1].reason;
  EXPECT_EQ(p.unusable[2].hostname, "lying");
  EXPECT_EQ(p.unusable[2].reason, "eventlog_pcr_mismatch");
  EXPECT_EQ(p.unusable[3].reason, "sha256_not_quoted");
  // Two usable machines that agree: everything decided, nothing odd.
  EXPECT_TRUE(p.odd.empty());
  EXPECT_TRUE(Rule(p, "boot_applications.allowed").proposed);
  const std::string text = FormatProposalText(p);
  EXPECT_EQ(text.rfind("2 machines, 1 platform, 0 odd, 4 unusable\n", 0), 0u) << text;
  EXPECT_NE(text.find("  lying: eventlog_pcr_mismatch: "), std::string::npos) << text;
}

TEST(ProposeBootPolicy, NoMachinesProposesTheEmptyPolicy) {
  const Proposal p = ProposeBootPolicy({});
  EXPECT_TRUE(p.machines.empty());
  EXPECT_EQ(p.policy_json, "{\n  \"version\": 1\n}\n");
  for (const RuleOutcome& r : p.rules) EXPECT_FALSE(r.decided) << r.rule;
}

// --- Command lines ---------------------------------------------------------------

TEST(ProposeBootPolicy, KernelCmdlineExactNeverShownInDifferences) {
  const std::vector<ObservedBoot> boots = {Machine("fc-1", kSdBoot), Machine("fc-2", kSdBoot),
                                           Machine("gce", kUbuntu)};
  const Proposal p = ProposeBootPolicy(boots);
  ASSERT_TRUE(p.policy.kernel_cmdline.has_value());
  EXPECT_EQ(p.policy.kernel_cmdline->exact, " console=ttyS0 console=tty0 efi=debug ");
  EXPECT_TRUE(Judge(p.policy, boots[0]).ok);
  const OddMachine* gce = Odd(p, "gce");
  ASSERT_NE(gce, nullptr);
  // Its command line is grub's, on PCR 8.
  EXPECT_TRUE(HasViolation(*gce, "kernel_cmdline", "kernel_cmdline_mismatch"));
  EXPECT_TRUE(HasDifference(*gce, "kernel_cmdline.exact", "kernel command line differs"));
  // The text is in the policy document (it is the rule), never in the
  // report, nor in the policy as the report shows it.
  const std::string text = FormatProposalText(p);
  EXPECT_EQ(text.find("console=ttyS0"), std::string::npos) << text;
  const nlohmann::json j = ShownProposal(p);
  EXPECT_EQ(j.dump().find("console=ttyS0"), std::string::npos) << j.dump(2);
  EXPECT_EQ(j.at("policy").at("kernel_cmdline").at("exact_sha256"),
            "sha256:" + Sha256Hex(" console=ttyS0 console=tty0 efi=debug "));
  EXPECT_NE(p.policy_json.find("console=ttyS0"), std::string::npos);
  // The other way round: grub's command line (with the kernel's path) is
  // the rule, and the odd machine's is not shown either.
  const std::vector<ObservedBoot> other = {Machine("fc", kSdBoot), Machine("gce-1", kUbuntu),
                                           Machine("gce-2", kUbuntu)};
  const Proposal q = ProposeBootPolicy(other);
  ASSERT_TRUE(q.policy.kernel_cmdline.has_value());
  EXPECT_NE(q.policy.kernel_cmdline->exact->find("vmlinuz"), std::string::npos);
  ASSERT_NE(Odd(q, "fc"), nullptr);
  EXPECT_TRUE(HasDifference(*Odd(q, "fc"), "kernel_cmdline.exact", "kernel command line differs"));
  EXPECT_EQ(FormatProposalText(q).find("console=ttyS0"), std::string::npos);
  // (The kernel's path is shown: grub's PCR 9 names the files it read, and
  // a path is no secret. The command line is not.)
  EXPECT_EQ(FormatProposalText(q).find(*q.policy.kernel_cmdline->exact), std::string::npos);
  EXPECT_EQ(FormatProposalText(q).find(" root="), std::string::npos);
}

// --- The firmware lab's real chain -------------------------------------------------
//
// The VM log (OVMF, Secure Boot on, shim -> Debian's grub -> Debian's kernel;
// testdata/README.md) and variants of it made as the firmware and grub would
// have measured them: events rewritten with their digests recomputed, the
// quote the replay of the variant.

constexpr char kFirmwareLab[] = "rackgate-lab_ovmf-shim-grub-debian12-secureboot.bin";
// Its events, as `rackgatectl eventlog show` lists them.
constexpr uint32_t kEvSecureBoot = 4, kEvDbAuthority = 31, kEvMokListRtAuthority = 37;
constexpr uint32_t kEvGrubCfg = 43, kEvMenuentry = 46, kEvLinuxCmd = 48, kEvKernelCmdline = 52;
constexpr uint32_t kEvInitrd = 54;
constexpr char kLabCmdline[] = "console=ttyS0 quiet panic=-1 rackgate.url=https://10.0.2.100:22623";

attest::EventLog LabLog() {
  auto log = attest::ParseEventLog(ReadLog(kFirmwareLab));
  EXPECT_TRUE(log.ok()) << log.status().ToString();
  return log.ok() ? *log : attest::EventLog{};
}

// Digests of `measured` in the log's banks (sha1, sha256).
void Remeasure(attest::Event* ev, const Bytes& measured) {
  for (auto& [alg, digest] : ev->digests) digest = testing::Digest(alg, measured);
}

// The lab machine `host`, its log passed through `edit` (EventLogBuilder::CopyOf).
template <typename Edit>
ObservedBoot LabMachine(const std::string& host, const Edit& edit) {
  ObservedBoot b;
  b.hostname = host;
  b.tpm_manufacturer = "IBM";
  b.tpm_model = "swtpm";
  b.event_log = testing::EventLogBuilder().CopyOf(LabLog(), edit).bytes();
  b.quoted = ReplayOf(b.event_log);
  return b;
}

ObservedBoot LabMachine(const std::string& host) {
  return LabMachine(host, [](attest::Event&) { return true; });
}

// Secure Boot off, as OVMF and shim then measure it: SecureBoot = 0, and no
// authority verified shim or grub (shim's SbatLevel stays).
bool SecureBootOff(attest::Event& ev) {
  if (ev.index == kEvDbAuthority || ev.index == kEvMokListRtAuthority) return false;
  if (ev.index == kEvSecureBoot) {
    ev.data = testing::UefiVariable(attest::kEfiGlobalVariableGuid, "SecureBoot", Bytes{0});
    Remeasure(&ev, ev.data);
  }
  return true;
}

// Another kernel command line, as editing grub.cfg makes it: grub's commands
// and command line on PCR 8 carry the new text, and grub.cfg's own digest on
// PCR 9 changes.
bool AnotherCmdline(attest::Event& ev) {
  if (ev.index == kEvGrubCfg) Remeasure(&ev, testing::Str("grub.cfg with another command line"));
  if (ev.index == kEvMenuentry || ev.index == kEvLinuxCmd || ev.index == kEvKernelCmdline) {
    std::string data(ev.data.begin(), ev.data.end());
    const size_t at = data.find(kLabCmdline);
    EXPECT_NE(at, std::string::npos) << ev.index;
    if (at == std::string::npos) return true;
    data.insert(at + std::string(kLabCmdline).size(), " rackgate.extra=1");
    ev.data.assign(data.begin(), data.end());
    // grub measures the text after its prefix ("grub_cmd: ", "kernel_cmdline: "), without the NUL.
    std::string text = data.substr(data.find(": ") + 2);
    if (!text.empty() && text.back() == '\0') text.pop_back();
    Remeasure(&ev, testing::Str(text));
  }
  return true;
}

// A tampered initramfs: the same path, another file.
bool TamperedInitramfs(attest::Event& ev) {
  if (ev.index == kEvInitrd) Remeasure(&ev, testing::Str("an initramfs with something added"));
  return true;
}

std::multiset<std::string> Reasons(const attest::Verdict& v) {
  std::multiset<std::string> out;
  for (const attest::Violation& x : v.violations) out.insert(x.rule + "/" + x.reason);
  return out;
}

std::string ViolationsText(const attest::Verdict& v) {
  std::string out;
  for (const attest::Violation& x : v.violations) out += x.rule + ": " + x.reason + ": " + x.message + "\n";
  return out;
}

TEST(ProposeFromFirmwareLab, ThreeAlikeMachinesGetEveryRuleOfTheirChain) {
  const std::vector<ObservedBoot> boots = {LabMachine("vm-1"), LabMachine("vm-2"), LabMachine("vm-3")};
  const Proposal p = ProposeBootPolicy(boots);
  EXPECT_TRUE(p.odd.empty()) << FormatProposalText(p);
  EXPECT_TRUE(p.unusable.empty());
  ASSERT_EQ(p.platforms.size(), 1u);
  for (const RuleOutcome& r : p.rules) EXPECT_TRUE(r.decided) << r.rule;
  const attest::BootPolicy& policy = p.policy;
  EXPECT_TRUE(policy.require_secure_boot);
  EXPECT_TRUE(policy.require_separators);
  ASSERT_TRUE(policy.allowed_boot_applications.has_value());
  EXPECT_EQ(policy.allowed_boot_applications->size(), 3u);  // shim, grub, the kernel (twice, one hash)
  ASSERT_TRUE(policy.allowed_authorities.has_value());
  EXPECT_EQ(policy.allowed_authorities->size(), 3u);  // db, SbatLevel, MokListRT
  ASSERT_TRUE(policy.secure_boot_db.has_value());
  EXPECT_EQ(policy.secure_boot_db->db_required_certificates.size(), 2u);
  EXPECT_EQ(policy.secure_boot_db->dbx_required_hashes.size(), 1u);
  ASSERT_TRUE(policy.kernel_cmdline.has_value());
  EXPECT_EQ(policy.kernel_cmdline->exact, std::string("/vmlinuz ") + kLabCmdline);
  ASSERT_TRUE(policy.allowed_boot_files.has_value());
  EXPECT_EQ(policy.allowed_boot_files->size(), 3u);  // grub.cfg, vmlinuz, initrd.img
  EXPECT_TRUE(Rule(p, "boot_files.allowed").proposed);
  std::vector<uint32_t> pinned;
  for (const auto& [pcr, v] : policy.pcrs.at(kAlgSha256)) pinned.push_back(pcr);
  EXPECT_EQ(pinned, (std::vector<uint32_t>{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 14}));
  EXPECT_FALSE(policy.uki.has_value());
  // The kernel's path is shown, its command line never.
  const std::string text = FormatProposalText(p) + ShownProposal(p).dump();
  EXPECT_EQ(text.find("rackgate.url"), std::string::npos);
  EXPECT_NE(ShownProposal(p).dump().find("/initrd.img"), std::string::npos) << ShownProposal(p).dump(2);
  for (const ObservedBoot& b : boots) EXPECT_TRUE(Judge(policy, b).ok);
}

// The firmware lab's three refusals, judged by the proposal of three alike
// machines: each names the rule of the difference (and the pin it breaks).
TEST(ProposeFromFirmwareLab, SecureBootOffAnotherCmdlineAndTamperedInitramfsAreRefusedByRule) {
  const std::vector<ObservedBoot> boots = {LabMachine("vm-1"), LabMachine("vm-2"), LabMachine("vm-3")};
  const attest::BootPolicy policy = ProposeBootPolicy(boots).policy;

  const attest::Verdict off = Judge(policy, LabMachine("vm-off", SecureBootOff));
  EXPECT_EQ(Reasons(off), (std::multiset<std::string>{"secure_boot/secure_boot_disabled", "pcrs/pcr_mismatch"}))
      << ViolationsText(off);
  EXPECT_NE(ViolationsText(off).find("sha256 PCR 7"), std::string::npos) << ViolationsText(off);

  const attest::Verdict cmdline = Judge(policy, LabMachine("vm-cmdline", AnotherCmdline));
  EXPECT_EQ(Reasons(cmdline),
            (std::multiset<std::string>{"kernel_cmdline/kernel_cmdline_mismatch", "boot_files/boot_file_not_allowed",
                                        "pcrs/pcr_mismatch", "pcrs/pcr_mismatch"}))
      << ViolationsText(cmdline);
  EXPECT_NE(ViolationsText(cmdline).find("\"(hd0)/EFI/debian/grub.cfg\""), std::string::npos);
  EXPECT_EQ(ViolationsText(cmdline).find("rackgate.extra"), std::string::npos);  // never the text

  const attest::Verdict initrd = Judge(policy, LabMachine("vm-initrd", TamperedInitramfs));
  EXPECT_EQ(Reasons(initrd), (std::multiset<std::string>{"boot_files/boot_file_not_allowed", "pcrs/pcr_mismatch"}))
      << ViolationsText(initrd);
  EXPECT_NE(ViolationsText(initrd).find("boot file event 54 (EV_IPL, logged as \"/initrd.img\")"), std::string::npos)
      << ViolationsText(initrd);
  EXPECT_NE(ViolationsText(initrd).find("sha256 PCR 9"), std::string::npos) << ViolationsText(initrd);
}

// A fourth machine with another initramfs is odd, and the difference names
// the file.
TEST(ProposeFromFirmwareLab, TamperedFourthIsOddByItsBootFile) {
  const std::vector<ObservedBoot> boots = {LabMachine("vm-1"), LabMachine("vm-2"), LabMachine("vm-3"),
                                           LabMachine("vm-4", TamperedInitramfs)};
  const Proposal p = ProposeBootPolicy(boots);
  ASSERT_EQ(p.odd.size(), 1u) << FormatProposalText(p);
  const OddMachine* odd = Odd(p, "vm-4");
  ASSERT_NE(odd, nullptr);
  EXPECT_TRUE(HasDifference(*odd, "boot_files.allowed", "(/initrd.img) not on the majority's list"))
      << FormatProposalText(p);
  EXPECT_TRUE(HasDifference(*odd, "pcrs.sha256.9", "PCR 9 differs"));
  EXPECT_TRUE(HasViolation(*odd, "boot_files", "boot_file_not_allowed"));
}

// Values that differ per machine are never pinned: OVMF's PXE and HTTP boot
// options (PCR 1) carry the NIC's MAC, which the lab's VMs share but real
// machines do not.
TEST(ProposeFromFirmwareLab, PerMachineMacLeavesPcr1Undecided) {
  auto with_mac = [](const std::string& mac) {
    return [mac](attest::Event& ev) {
      if (ev.pcr != 1 || ev.type != attest::kEvEfiVariableBoot) return true;
      const Bytes from = testing::Utf16("525400123456"), to = testing::Utf16(mac);
      auto at = std::search(ev.data.begin(), ev.data.end(), from.begin(), from.end());
      if (at == ev.data.end()) return true;
      std::copy(to.begin(), to.end(), at);
      Remeasure(&ev, ev.data);  // H(UEFI_VARIABLE_DATA); EDK2's H(VariableData) is judged alike
      return true;
    };
  };
  const std::vector<ObservedBoot> boots = {LabMachine("vm-1", with_mac("5254000000a1")),
                                           LabMachine("vm-2", with_mac("5254000000a2")),
                                           LabMachine("vm-3", with_mac("5254000000a3"))};
  const Proposal p = ProposeBootPolicy(boots);
  EXPECT_TRUE(p.odd.empty()) << FormatProposalText(p);
  EXPECT_FALSE(Rule(p, "pcrs.sha256.1").decided);
  EXPECT_EQ(p.policy.pcrs.at(kAlgSha256).count(1), 0u);
  EXPECT_EQ(p.policy.pcrs.at(kAlgSha256).size(), 10u);  // 0, 2-9, 14
  ASSERT_TRUE(p.policy.allowed_boot_files.has_value());
  for (const ObservedBoot& b : boots) EXPECT_TRUE(Judge(p.policy, b).ok);
}

// --- Renderings ------------------------------------------------------------------

TEST(ProposalViewOf, Shape) {
  const std::vector<ObservedBoot> boots = {Machine("a", kUbuntu), Machine("b", kUbuntu),
                                           Machine("c", kUbuntuOtherShim)};
  const nlohmann::json j = ShownProposal(ProposeBootPolicy(boots));
  EXPECT_EQ(j.at("summary").at("machines"), 3);
  EXPECT_EQ(j.at("summary").at("platforms"), 1);
  EXPECT_EQ(j.at("summary").at("odd"), 1);
  EXPECT_EQ(j.at("summary").at("unusable"), 0);
  EXPECT_EQ(j.at("policy").at("version"), 1);
  EXPECT_EQ(j.at("odd").at(0).at("hostname"), "c");
  EXPECT_FALSE(j.at("odd").at(0).at("differences").empty());
  EXPECT_TRUE(j.at("odd").at(0).at("violations").at(0).contains("reason"));
  EXPECT_TRUE(j.at("undecided").is_array());
  EXPECT_EQ(j.at("rules").at(0).at("rule"), "require_secure_boot");
  EXPECT_TRUE(j.at("platforms").at(0).contains("tpm_model"));
}

TEST(FormatProposalText, SummaryAndOddMachine) {
  const std::vector<ObservedBoot> boots = {Machine("a", kUbuntu), Machine("b", kUbuntu),
                                           Machine("c", kUbuntuOtherShim)};
  const std::string text = FormatProposalText(ProposeBootPolicy(boots));
  EXPECT_EQ(text.rfind("3 machines, 1 platform, 1 odd\n", 0), 0u) << text;
  EXPECT_NE(text.find("\nodd: c\n"), std::string::npos) << text;
  EXPECT_NE(text.find("would break  boot_applications: boot_application_not_allowed: "),
            std::string::npos)
      << text;
}

// --- Diff ------------------------------------------------------------------------

const std::string kA(64, 'a'), kB(64, 'b'), kC(64, 'c');

TEST(DiffBootPolicies, NoCurrentPolicyAddsEverything) {
  const std::string proposed = R"({"version": 1, "require_separators": true,
      "boot_applications": {"allowed": ["sha256:)" + kA + R"("]}})";
  const PolicyDiff d = DiffBootPolicies(std::nullopt, proposed);
  EXPECT_FALSE(d.had_current);
  EXPECT_TRUE(d.note.empty()) << d.note;
  ASSERT_EQ(d.changes.size(), 3u);  // boot_applications, require_separators, version
  for (const PolicyChange& c : d.changes) EXPECT_EQ(c.kind, "added");
  const std::string text = FormatPolicyDiffText(d);
  EXPECT_NE(text.find("+ boot_applications.allowed sha256:" + kA + "\n"), std::string::npos)
      << text;
  EXPECT_NE(text.find("+ require_separators true\n"), std::string::npos) << text;
}

TEST(DiffBootPolicies, DigestListEntriesAddedAndRemoved) {
  const std::string current = R"({"version": 1, "comment": "old",
      "boot_applications": {"allowed": [")" + kA + R"(", "sha256:)" + kB + R"("]},
      "require_secure_boot": true, "require_separators": false})";
  const std::string proposed = R"({"version": 1,
      "boot_applications": {"allowed": ["sha256:)" + kB + R"(", "sha256:)" + kC + R"("]},
      "require_separators": true})";
  const PolicyDiff d = DiffBootPolicies(current, proposed);
  EXPECT_TRUE(d.had_current);
  EXPECT_TRUE(d.note.empty()) << d.note;
  ASSERT_EQ(d.changes.size(), 3u);
  EXPECT_EQ(d.changes[0].rule, "boot_applications");
  EXPECT_EQ(d.changes[0].kind, "changed");
  EXPECT_EQ(d.changes[0].added,
            (std::vector<std::string>{"boot_applications.allowed sha256:" + kC}));
  // The bare digest is the same as "sha256:" + it: only a really removes.
  EXPECT_EQ(d.changes[0].removed,
            (std::vector<std::string>{"boot_applications.allowed sha256:" + kA}));
  EXPECT_EQ(d.changes[1].rule, "require_secure_boot");
  EXPECT_EQ(d.changes[1].kind, "removed");
  EXPECT_EQ(d.changes[2].rule, "require_separators");
  EXPECT_EQ(d.changes[2].kind, "added");  // false was no rule
  const nlohmann::json j = ShownDiff(d);
  EXPECT_EQ(j.at("changes").at(0).at("added").at(0), "boot_applications.allowed sha256:" + kC);
}

TEST(DiffBootPolicies, SamePolicyWrittenDifferentlyIsNoChange) {
  const std::string current = R"({"require_separators": true, "version": 1,
      "authorities": {"allowed": [")" + std::string(64, 'A') + R"("], "forbidden": []}})";
  const std::string proposed = R"({"version": 1, "require_separators": true,
      "authorities": {"allowed": ["sha256:)" + kA + R"("]}})";
  const PolicyDiff d = DiffBootPolicies(current, proposed);
  EXPECT_TRUE(d.changes.empty()) << FormatPolicyDiffText(d);
  EXPECT_EQ(FormatPolicyDiffText(d), "(no change)\n");
}

TEST(DiffBootPolicies, UnparsedCurrentIsComparedAsJsonWithANote) {
  const std::string proposed = R"({"version": 1, "require_separators": true})";
  // A field this rackgate does not know (a newer one's policy, a typo).
  PolicyDiff d = DiffBootPolicies(std::string(R"({"version": 1, "require_separators": true,
      "no_such_rule": {"required": ["sha256:)" + kA + R"("]}})"), proposed);
  EXPECT_NE(d.note.find("does not parse"), std::string::npos) << d.note;
  ASSERT_EQ(d.changes.size(), 1u);
  EXPECT_EQ(d.changes[0].rule, "no_such_rule");
  EXPECT_EQ(d.changes[0].kind, "removed");
  ASSERT_EQ(d.changes[0].removed.size(), 1u);
  EXPECT_NE(d.changes[0].removed[0].find(kA), std::string::npos) << d.changes[0].removed[0];
  d = DiffBootPolicies(std::string("not json"), proposed);
  EXPECT_NE(d.note.find("compared as empty"), std::string::npos) << d.note;
  EXPECT_EQ(d.changes.size(), 2u);
}

// --- Command lines are shown by digest (issue 27, item 8) -----------------------

// What a command line may carry that must never reach a screen or a log.
const std::string kSecretCmdline = "root=/dev/vda1 ro rd.luks.key=s3cret-passphrase";
const std::string kOtherCmdline = "root=/dev/vda1 ro rd.luks.key=0ther-passphrase";

std::string CmdlinePolicy(const std::string& exact) {
  return nlohmann::json{{"version", 1},
                        {"kernel_cmdline",
                         {{"exact", exact}, {"required", {"lockdown="}}, {"forbidden", {"init="}}}}}
      .dump();
}

// The diff is what `policy accept|put|propose` print and what the
// pool_policy audit row keeps.
TEST(DiffBootPolicies, Issue27KernelCmdlineExactIsItsDigest) {
  const std::string secret = "sha256:" + Sha256Hex(kSecretCmdline);
  PolicyDiff d = DiffBootPolicies(std::nullopt, CmdlinePolicy(kSecretCmdline));
  std::string text = FormatPolicyDiffText(d);
  EXPECT_NE(text.find("+ kernel_cmdline.exact " + secret + "\n"), std::string::npos) << text;
  // The required and forbidden entries are the operator's fragments,
  // named by every verdict: shown.
  EXPECT_NE(text.find("+ kernel_cmdline.required lockdown=\n"), std::string::npos) << text;
  EXPECT_NE(text.find("+ kernel_cmdline.forbidden init=\n"), std::string::npos) << text;
  EXPECT_EQ(text.find("s3cret"), std::string::npos) << text;
  EXPECT_EQ(ShownDiff(d).dump().find("s3cret"), std::string::npos);

  // A changed command line: both digests, neither text.
  d = DiffBootPolicies(CmdlinePolicy(kSecretCmdline), CmdlinePolicy(kOtherCmdline));
  text = FormatPolicyDiffText(d);
  EXPECT_EQ(text, "- kernel_cmdline.exact " + secret + "\n+ kernel_cmdline.exact sha256:" +
                      Sha256Hex(kOtherCmdline) + "\n");
  EXPECT_EQ(ShownDiff(d).dump().find("passphrase"), std::string::npos) << ShownDiff(d);

  // A current policy that does not parse is compared as plain JSON: its
  // command line, and whatever else kernel_cmdline holds, still by digest.
  d = DiffBootPolicies(
      nlohmann::json{{"version", 1},
                     {"kernel_cmdline", {{"exact", kSecretCmdline}, {"exactly", kSecretCmdline}}}}
          .dump(),
      R"({"version": 1})");
  ASSERT_FALSE(d.note.empty());
  text = FormatPolicyDiffText(d);
  EXPECT_NE(text.find("- kernel_cmdline.exact " + secret + "\n"), std::string::npos) << text;
  EXPECT_NE(text.find("- kernel_cmdline.exactly " + secret + "\n"), std::string::npos) << text;
  EXPECT_EQ(text.find("s3cret"), std::string::npos) << text;
  d = DiffBootPolicies(nlohmann::json{{"version", 1}, {"kernel_cmdline", kSecretCmdline}}.dump(),
                       R"({"version": 1})");
  text = FormatPolicyDiffText(d);
  EXPECT_NE(text.find("- kernel_cmdline " + secret + "\n"), std::string::npos) << text;
  EXPECT_EQ(text.find("s3cret"), std::string::npos) << text;
}

TEST(PolicyForDisplay, Issue27KernelCmdlineIsItsDigestUnderAnotherName) {
  const std::string policy = CmdlinePolicy(kSecretCmdline);
  const nlohmann::json shown = PolicyForDisplay(policy);
  EXPECT_EQ(shown.dump().find("s3cret"), std::string::npos) << shown.dump(2);
  EXPECT_EQ(shown.at("kernel_cmdline"),
            (nlohmann::json{{"exact_sha256", "sha256:" + Sha256Hex(kSecretCmdline)},
                            {"required", {"lockdown="}},
                            {"forbidden", {"init="}}}));
  EXPECT_EQ(shown.at("version"), 1);
  // Put back as a policy, it is refused, rather than pinning the digest's
  // text as the command line.
  EXPECT_FALSE(wire::ParseBootPolicy(shown.dump()).ok());

  // The text form keeps the document's order.
  const std::string text = FormatPolicyForDisplay(
      R"({"version": 1, "kernel_cmdline": {"exact": ")" + kSecretCmdline + R"("}, "require_separators": true})");
  EXPECT_EQ(text, "{\n  \"version\": 1,\n  \"kernel_cmdline\": {\n    \"exact_sha256\": \"sha256:" +
                      Sha256Hex(kSecretCmdline) + "\"\n  },\n  \"require_separators\": true\n}\n");
  // A policy without a command line is shown as it is.
  EXPECT_EQ(PolicyForDisplay(R"({"version": 1, "require_separators": true})"),
            (nlohmann::json{{"version", 1}, {"require_separators", true}}));
  // What is not a JSON object is shown by digest only.
  EXPECT_EQ(PolicyForDisplay(kSecretCmdline), "not a JSON object (sha256:" + Sha256Hex(kSecretCmdline) + ")");
  EXPECT_EQ(FormatPolicyForDisplay(nlohmann::json{{"version", 1}, {"kernel_cmdline", kSecretCmdline}}.dump())
                .find("s3cret"),
            std::string::npos);
}

TEST(DiffBootPolicies, ProposalAgainstItselfIsNoChange) {
  const std::vector<ObservedBoot> boots = {Machine("a", kUbuntu), Machine("b", kUbuntu),
                                           Machine("c", kUbuntuOtherShim)};
  const Proposal p = ProposeBootPolicy(boots);
  EXPECT_TRUE(DiffBootPolicies(p.policy_json, p.policy_json).changes.empty());
}

}  // namespace
}  // namespace rackgate::core
