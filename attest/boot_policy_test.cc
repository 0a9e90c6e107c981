// Tests for boot policy evaluation: typed policies judged against real and
// synthetic event logs (the JSON form is tested in wire/boot_policy_json_test.cc).
#include "attest/boot_policy.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "attest/testing/event_log_builder.h"
#include "attest/test_util.h"

namespace rackgate::attest {
namespace {

namespace fs = std::filesystem;
using testing::EventLogBuilder;
using testing::Str;

// --- Helpers ---------------------------------------------------------------

std::string HexOf(const Bytes& b) {
  static const char* d = "0123456789abcdef";
  std::string s;
  for (uint8_t c : b) {
    s += d[c >> 4];
    s += d[c & 15];
  }
  return s;
}

Bytes ReadLog(const std::string& name) {
  const fs::path dir(testing::EventLogDir());
  std::ifstream in(dir / name, std::ios::binary);
  return Bytes(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

// A log, its facts, and evidence that quotes exactly what it replays to.
struct Case {
  explicit Case(const Bytes& bytes) {
    auto parsed = ParseEventLog(bytes);
    EXPECT_TRUE(parsed.ok()) << parsed.status().ToString();
    log = *parsed;
    facts = ExtractBootFacts(log);
    auto replayed = Replay(log);
    EXPECT_TRUE(replayed.ok());
    evidence.log = &log;
    evidence.quoted = *replayed;
  }
  Case(const Case&) = delete;

  Verdict Judge(const BootPolicy& policy) { return Evaluate(policy, facts, evidence); }

  EventLog log;
  BootFacts facts;
  Evidence evidence;
};

std::multiset<std::string> Reasons(const Verdict& v) {
  std::multiset<std::string> out;
  for (const Violation& x : v.violations) out.insert(x.rule + "/" + x.reason);
  return out;
}

const std::string kSha256Zero(64, '0');

PolicyDigest Sha256Digest(const Bytes& value) { return PolicyDigest{kAlgSha256, value}; }

KernelCmdlinePolicy Cmdline(std::optional<std::string> exact, std::vector<std::string> required,
                            std::vector<std::string> forbidden) {
  KernelCmdlinePolicy k;
  k.exact = std::move(exact);
  k.required = std::move(required);
  k.forbidden = std::move(forbidden);
  return k;
}

BootPolicy SecureBootPolicy() {
  BootPolicy p;
  p.require_secure_boot = true;
  return p;
}

// --- Evaluation: real logs ----------------------------------------------------

TEST(Evaluate, EmptyPolicyPassesAReplayingLog) {
  Case c(ReadLog("tpm2-tools_event-moklisttrusted.bin"));
  const Verdict v = c.Judge(BootPolicy{});
  EXPECT_TRUE(v.ok);
  EXPECT_TRUE(v.violations.empty());
  EXPECT_TRUE(v.tofu_to_record.empty());
}

TEST(Evaluate, MoklisttrustedPassesAStrictPolicy) {
  Case c(ReadLog("tpm2-tools_event-moklisttrusted.bin"));
  BootPolicy policy;
  policy.pcrs[kAlgSha256][7] = c.evidence.quoted.at(kAlgSha256).at(7);
  policy.require_secure_boot = true;
  policy.require_separators = true;
  policy.allowed_boot_applications.emplace();
  for (const Measurement& m : c.facts.boot_applications) {
    policy.allowed_boot_applications->push_back(Sha256Digest(m.digests.at(kAlgSha256)));
  }
  policy.allowed_authorities.emplace();
  for (const Measurement& m : c.facts.authorities) {
    policy.allowed_authorities->push_back(Sha256Digest(m.digests.at(kAlgSha256)));
  }
  policy.kernel_cmdline = Cmdline(std::nullopt, {" ro ", "resume=UUID="}, {"init=", "single"});
  const Verdict v = c.Judge(policy);
  EXPECT_TRUE(v.ok);
  for (const Violation& x : v.violations) ADD_FAILURE() << x.rule << ": " << x.message;
}

TEST(Evaluate, EveryViolatedRuleIsListed) {
  Case c(ReadLog("go-attestation_coreos_36_shielded_vm_no_secure_boot_eventlog.bin"));
  BootPolicy policy;
  policy.pcrs[kAlgSha256][0] = Bytes(32, 0);
  policy.require_secure_boot = true;
  policy.require_separators = true;
  policy.allowed_boot_applications = {Sha256Digest(Bytes(32, 0))};
  policy.allowed_authorities.emplace();
  policy.kernel_cmdline = Cmdline("ro", {"lockdown=integrity"}, {"ignition.firstboot"});
  const Verdict v = c.Judge(policy);
  EXPECT_FALSE(v.ok);
  const auto r = Reasons(v);
  EXPECT_EQ(r.count("pcrs/pcr_mismatch"), 1u);
  EXPECT_EQ(r.count("secure_boot/secure_boot_disabled"), 1u);
  EXPECT_EQ(r.count("boot_applications/boot_application_not_allowed"), 2u);  // shim, grub
  EXPECT_EQ(r.count("authorities/authority_not_allowed"), 2u);  // SbatLevel, MokListTrusted
  EXPECT_EQ(r.count("kernel_cmdline/kernel_cmdline_mismatch"), 1u);
  EXPECT_EQ(r.count("kernel_cmdline/kernel_cmdline_required_missing"), 1u);
  EXPECT_EQ(r.count("kernel_cmdline/kernel_cmdline_forbidden_present"), 1u);
  EXPECT_EQ(r.count("separators/separator_missing"), 0u);
  EXPECT_EQ(v.violations.size(), 9u);
  for (const Violation& x : v.violations) {
    // A message never carries the value something was compared against.
    EXPECT_EQ(x.message.find(HexOf(c.evidence.quoted.at(kAlgSha256).at(0))), std::string::npos);
    EXPECT_EQ(x.message.find(kSha256Zero), std::string::npos);
    if (x.rule == "boot_applications") {
      EXPECT_TRUE(x.message.find("shimx64.efi") != std::string::npos ||
                  x.message.find("grubx64.efi") != std::string::npos)
          << x.message;
      EXPECT_NE(x.message.find("sha256:"), std::string::npos);
    }
    if (x.rule == "kernel_cmdline") {
      // Names the policy's string, not the command line.
      EXPECT_EQ(x.message.find("ostree"), std::string::npos) << x.message;
    }
  }
}

TEST(Evaluate, ForbiddenDigests) {
  Case c(ReadLog("go-attestation_ubuntu_2104_shielded_vm_no_secure_boot_eventlog.bin"));
  BootPolicy policy;
  policy.forbidden_boot_applications = {
      Sha256Digest(c.facts.boot_applications.at(1).digests.at(kAlgSha256))};
  policy.forbidden_authorities = {
      PolicyDigest{kAlgSha1, c.facts.authorities.at(0).digests.at(kAlgSha1)}};
  const Verdict v = c.Judge(policy);
  EXPECT_EQ(Reasons(v), (std::multiset<std::string>{"boot_applications/boot_application_forbidden",
                                                    "authorities/authority_forbidden"}));
}

TEST(Evaluate, UnverifiedCommandLine) {
  Case c(ReadLog("tpm2-tools_event-arch-linux.bin"));
  BootPolicy policy;
  policy.kernel_cmdline = Cmdline(std::nullopt, {}, {"init="});
  const Verdict v = c.Judge(policy);
  EXPECT_EQ(Reasons(v), (std::multiset<std::string>{"kernel_cmdline/kernel_cmdline_unverified"}));
}

TEST(Evaluate, SystemdExactCommandLine) {
  Case c(ReadLog("tpm2-tools_event-sd-boot-fedora37.bin"));
  BootPolicy policy;
  policy.kernel_cmdline = Cmdline(" console=ttyS0 console=tty0 efi=debug ", {}, {});
  EXPECT_TRUE(c.Judge(policy).ok);
  policy.kernel_cmdline = Cmdline("console=ttyS0", {}, {});
  EXPECT_FALSE(c.Judge(policy).ok);
}

TEST(Evaluate, NoCommandLineMeasured) {
  Case c(ReadLog("go-attestation_crypto_agile_eventlog.bin"));
  BootPolicy policy;
  policy.kernel_cmdline = Cmdline(std::nullopt, {"ro"}, {});
  EXPECT_EQ(Reasons(c.Judge(policy)),
            (std::multiset<std::string>{"kernel_cmdline/kernel_cmdline_missing"}));
}

TEST(Evaluate, LogThatDoesNotMatchTheQuote) {
  Case c(ReadLog("tpm2-tools_event-moklisttrusted.bin"));
  c.evidence.quoted[kAlgSha256][4][0] ^= 1;
  const Verdict v = c.Judge(BootPolicy{});
  EXPECT_EQ(Reasons(v), (std::multiset<std::string>{"eventlog/eventlog_pcr_mismatch"}));
  c.evidence.log = nullptr;
  EXPECT_EQ(Reasons(c.Judge(BootPolicy{})),
            (std::multiset<std::string>{"eventlog/eventlog_missing"}));
}

TEST(Evaluate, FactsOfUnquotedPcrsProveNothing) {
  Case c(ReadLog("tpm2-tools_event-moklisttrusted.bin"));
  // The quote covers PCR 0 only: PCR 4, 7 and 8's events are the log's word.
  PcrValues only0;
  only0[kAlgSha256][0] = c.evidence.quoted.at(kAlgSha256).at(0);
  c.evidence.quoted = only0;
  BootPolicy policy;
  policy.require_secure_boot = true;
  policy.forbidden_boot_applications = {};
  policy.allowed_authorities.emplace();
  policy.kernel_cmdline = Cmdline(std::nullopt, {"ro"}, {});
  policy.pcrs[kAlgSha256][1] = Bytes(32, 0);
  const Verdict v = c.Judge(policy);
  EXPECT_EQ(Reasons(v), (std::multiset<std::string>{
                            "pcrs/pcr_not_quoted", "secure_boot/pcr_not_quoted",
                            "authorities/pcr_not_quoted", "kernel_cmdline/kernel_cmdline_missing"}));
}

// --- Evaluation: synthetic attacks -------------------------------------------

TEST(Evaluate, RelabelledBootApplicationIsStillJudged) {
  // The allow-list holds shim; an unlisted application was relabelled as an
  // EV_EFI_ACTION string to slip past it.
  EventLogBuilder b;
  b.Measure(4, kEvEfiBootServicesApplication, Str("shim"), testing::ImageLoadEvent("\\shim.efi"))
      .Measure(4, kEvEfiAction, Str("evil"), Str("Calling EFI Application from Boot Option"));
  Case c(b.bytes());
  BootPolicy policy;
  policy.allowed_boot_applications = {Sha256Digest(testing::Digest(kAlgSha256, Str("shim")))};
  const Verdict v = c.Judge(policy);
  ASSERT_EQ(v.violations.size(), 1u);
  EXPECT_EQ(v.violations[0].reason, "boot_application_not_allowed");
  EXPECT_NE(v.violations[0].message.find("event 2"), std::string::npos);
}

TEST(Evaluate, SecureBootNeedsItsSeparatorAndNoDebugMode) {
  EventLogBuilder no_sep;
  no_sep.SecureBootConfig(1);
  Case a(no_sep.bytes());
  EXPECT_EQ(Reasons(a.Judge(SecureBootPolicy())),
            (std::multiset<std::string>{"secure_boot/secure_boot_no_separator"}));

  EventLogBuilder debug;
  debug.SecureBootConfig(1).Add(7, kEvEfiAction, Str("UEFI Debug Mode")).Separator(7);
  Case d(debug.bytes());
  EXPECT_EQ(Reasons(d.Judge(SecureBootPolicy())),
            (std::multiset<std::string>{"secure_boot/secure_boot_debug_mode"}));

  EventLogBuilder good;
  good.SecureBootConfig(1).Separator(7);
  Case g(good.bytes());
  EXPECT_TRUE(g.Judge(SecureBootPolicy()).ok);
}

TEST(Evaluate, Separators) {
  EventLogBuilder b;
  for (uint32_t pcr = 0; pcr <= 7; ++pcr) {
    if (pcr == 3) continue;
    b.Separator(pcr, pcr == 5 ? 1 : 0);
  }
  Case c(b.bytes());
  // PCR 3 was never extended: its quoted (initial) value is all zeros.
  c.evidence.quoted[kAlgSha256][3] = Bytes(32, 0);
  BootPolicy policy;
  policy.require_separators = true;
  EXPECT_EQ(Reasons(c.Judge(policy)),
            (std::multiset<std::string>{"separators/separator_missing",
                                        "separators/separator_error"}));
}

// --- TOFU ---------------------------------------------------------------------

TEST(Evaluate, TrustOnFirstUse) {
  Case c(ReadLog("tpm2-tools_event-moklisttrusted.bin"));
  BootPolicy policy;
  policy.tofu = {PcrSelection{kAlgSha256, {7, 14}}};
  const Bytes pcr7 = c.evidence.quoted.at(kAlgSha256).at(7);
  // PCR 14 is not quoted yet: nothing is pinned while anything fails.
  c.evidence.quoted[kAlgSha256].erase(14);
  Verdict v = c.Judge(policy);
  EXPECT_EQ(Reasons(v), (std::multiset<std::string>{"tofu/pcr_not_quoted"}));
  EXPECT_TRUE(v.tofu_to_record.empty());

  // First use: the caller passes no recorded values; both PCRs are pinned.
  c.evidence.quoted = *Replay(c.log);
  v = c.Judge(policy);
  ASSERT_TRUE(v.ok);
  ASSERT_EQ(v.tofu_to_record.at(kAlgSha256).size(), 2u);
  EXPECT_EQ(v.tofu_to_record.at(kAlgSha256).at(7), pcr7);
  const PcrValues recorded = v.tofu_to_record;

  // Later: same values pass and are recorded unchanged.
  c.evidence.tofu_recorded = recorded;
  v = c.Judge(policy);
  EXPECT_TRUE(v.ok);
  EXPECT_EQ(v.tofu_to_record, recorded);

  // A changed PCR fails and pins nothing (the log is made to agree, so only
  // TOFU objects).
  PcrValues changed = recorded;
  changed[kAlgSha256][7][0] ^= 1;
  c.evidence.tofu_recorded = changed;
  v = c.Judge(policy);
  EXPECT_EQ(Reasons(v), (std::multiset<std::string>{"tofu/tofu_mismatch"}));
  EXPECT_TRUE(v.tofu_to_record.empty());
  EXPECT_EQ(v.violations[0].message.find(HexOf(pcr7)), std::string::npos);

  // A PCR added to the policy after the first use is pinned when next seen.
  PcrValues partial;
  partial[kAlgSha256][7] = pcr7;
  c.evidence.tofu_recorded = partial;
  v = c.Judge(policy);
  EXPECT_TRUE(v.ok);
  EXPECT_EQ(v.tofu_to_record, recorded);

  // A failure elsewhere pins nothing, even on first use.
  c.evidence.tofu_recorded.reset();
  BootPolicy failing = SecureBootPolicy();
  failing.tofu = {PcrSelection{kAlgSha256, {7}}};
  failing.kernel_cmdline = Cmdline(std::nullopt, {}, {"ro"});
  v = c.Judge(failing);
  EXPECT_FALSE(v.ok);
  EXPECT_TRUE(v.tofu_to_record.empty());
}

}  // namespace
}  // namespace rackgate::attest
