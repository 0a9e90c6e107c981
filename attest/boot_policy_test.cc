#include "attest/boot_policy.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <set>
#include <string>
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

  Verdict Judge(const std::string& policy_json) {
    auto policy = ParseBootPolicy(policy_json);
    EXPECT_TRUE(policy.ok()) << policy.status().ToString();
    return Evaluate(*policy, facts, evidence);
  }

  EventLog log;
  BootFacts facts;
  Evidence evidence;
};

std::multiset<std::string> Reasons(const Verdict& v) {
  std::multiset<std::string> out;
  for (const Violation& x : v.violations) out.insert(x.rule + "/" + x.reason);
  return out;
}

std::string Reason(std::string_view policy) {
  auto p = ParseBootPolicy(policy);
  return p.ok() ? "ok" : p.status().reason();
}

std::string Message(std::string_view policy) {
  auto p = ParseBootPolicy(policy);
  return p.ok() ? "ok" : p.status().message();
}

const std::string kSha256Zero(64, '0');

// --- Parsing ----------------------------------------------------------------

TEST(ParseBootPolicy, FullPolicy) {
  const std::string text = R"({
    "version": 1,
    "comment": "rack 12 workers",
    "pcrs": {"sha256": {"0": ")" + kSha256Zero + R"(", "7": ")" + std::string(64, 'a') + R"("}},
    "require_secure_boot": true,
    "require_separators": true,
    "boot_applications": {
      "allowed": ["sha256:)" + std::string(64, 'b') + R"(", ")" + std::string(40, 'c') + R"("],
      "forbidden": ["sha384:)" + std::string(96, 'd') + R"("]
    },
    "authorities": {"forbidden": []},
    "kernel_cmdline": {"exact": "ro quiet", "required": ["ro"], "forbidden": ["init="]},
    "tofu": {"sha256": [14, 7, 7], "sha1": [0]}
  })";
  auto p = ParseBootPolicy(text);
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  EXPECT_EQ(p->pcrs.at(kAlgSha256).size(), 2u);
  EXPECT_EQ(p->pcrs.at(kAlgSha256).at(7), Bytes(32, 0xaa));
  EXPECT_TRUE(p->require_secure_boot);
  EXPECT_TRUE(p->require_separators);
  ASSERT_TRUE(p->allowed_boot_applications.has_value());
  ASSERT_EQ(p->allowed_boot_applications->size(), 2u);
  EXPECT_EQ((*p->allowed_boot_applications)[0].alg, kAlgSha256);
  EXPECT_EQ((*p->allowed_boot_applications)[1].alg, kAlgSha1);  // bare, by length
  EXPECT_EQ(p->forbidden_boot_applications.at(0).alg, kAlgSha384);
  EXPECT_FALSE(p->allowed_authorities.has_value());
  EXPECT_TRUE(p->forbidden_authorities.empty());
  ASSERT_TRUE(p->kernel_cmdline.has_value());
  EXPECT_EQ(*p->kernel_cmdline->exact, "ro quiet");
  ASSERT_EQ(p->tofu.size(), 2u);
  for (const PcrSelection& s : p->tofu) {
    if (s.hash_alg == kAlgSha256) {
      EXPECT_EQ(s.pcrs, (std::vector<uint32_t>{7, 14}));
    }
  }
}

TEST(ParseBootPolicy, MinimalPolicy) {
  auto p = ParseBootPolicy(R"({"version": 1})");
  ASSERT_TRUE(p.ok());
  EXPECT_TRUE(p->pcrs.empty());
  EXPECT_FALSE(p->require_secure_boot);
  EXPECT_FALSE(p->kernel_cmdline.has_value());
}

TEST(ParseBootPolicy, UnknownFieldsAreRefusedAtEveryLevel) {
  // Typos must never silently drop a rule.
  EXPECT_EQ(Reason(R"({"version": 1, "require_secureboot": true})"), "policy_malformed");
  EXPECT_NE(Message(R"({"version": 1, "require_secureboot": true})").find("require_secureboot"),
            std::string::npos);
  EXPECT_EQ(Reason(R"({"version": 1, "boot_applications": {"allow": []}})"), "policy_malformed");
  EXPECT_EQ(Reason(R"({"version": 1, "kernel_cmdline": {"required": ["ro"], "forbiden": ["x"]}})"),
            "policy_malformed");
}

TEST(ParseBootPolicy, DuplicateKeysAreRefused) {
  // nlohmann would keep the second, emptying the allow-list.
  EXPECT_EQ(Reason(R"({"version": 1,
      "authorities": {"allowed": [")" + kSha256Zero + R"("]},
      "authorities": {}})"),
            "policy_malformed");
  EXPECT_EQ(Reason(R"({"version": 1, "version": 1})"), "policy_malformed");
}

TEST(ParseBootPolicy, VersionAndTypes) {
  for (const char* bad : {
           R"({})",
           R"({"version": 2})",
           R"({"version": "1"})",
           R"({"version": 1.0})",
           R"([{"version": 1}])",
           R"({"version": 1, "require_secure_boot": "yes"})",
           R"({"version": 1, "require_separators": 1})",
           R"({"version": 1, "pcrs": []})",
           R"({"version": 1, "pcrs": {"sha3_256": {}}})",
           R"({"version": 1, "pcrs": {"sha256": {"24": "00"}}})",
           R"({"version": 1, "pcrs": {"sha256": {"07": "00"}}})",
           R"({"version": 1, "pcrs": {"sha256": {"-1": "00"}}})",
           R"({"version": 1, "pcrs": {"sha256": {"0": "00"}}})",
           R"({"version": 1, "pcrs": {"sha256": {"0": 0}}})",
           R"({"version": 1, "boot_applications": {"allowed": "x"}})",
           R"({"version": 1, "boot_applications": {"allowed": ["sha256:00"]}})",
           R"({"version": 1, "boot_applications": {"allowed": ["md5:00"]}})",
           R"({"version": 1, "boot_applications": {"allowed": ["abc"]}})",
           R"({"version": 1, "kernel_cmdline": {}})",
           R"({"version": 1, "kernel_cmdline": {"required": [""]}})",
           R"({"version": 1, "kernel_cmdline": {"exact": 1}})",
           R"({"version": 1, "tofu": {"sha256": [24]}})",
           R"({"version": 1, "tofu": {"sha256": ["7"]}})",
           R"({"version": 1, "tofu": {"sha256": [-1]}})",
           R"({"version": 1, "tofu": [7]})",
           R"({"version": 1,)",
           "",
       }) {
    EXPECT_EQ(Reason(bad), "policy_malformed") << bad;
  }
}

TEST(ParseBootPolicy, SizeAndDepthAreBounded) {
  std::string deep = R"({"version": 1, "comment": )";
  for (size_t i = 0; i < kMaxPolicyDepth; ++i) deep += "[";
  for (size_t i = 0; i < kMaxPolicyDepth; ++i) deep += "]";
  deep += "}";
  EXPECT_EQ(Reason(deep), "policy_malformed");
  EXPECT_NE(Message(deep).find("nested"), std::string::npos);
  // Brackets inside strings do not count.
  EXPECT_EQ(Reason(R"({"version": 1, "comment": "[[[[[[[[[[[[[[[[[[[[[[\"[[[[["})"), "ok");

  std::string big = R"({"version": 1, "comment": ")" + std::string(kMaxPolicySize, 'x') + R"("})";
  EXPECT_EQ(Reason(big), "policy_malformed");
  std::string long_string =
      R"({"version": 1, "kernel_cmdline": {"required": [")" +
      std::string(kMaxPolicyStringSize + 1, 'x') + R"("]}})";
  EXPECT_EQ(Reason(long_string), "policy_malformed");
}

TEST(PcrValuesJson, RoundTrip) {
  PcrValues v;
  v[kAlgSha1][0] = Bytes(20, 1);
  v[kAlgSha256][10] = Bytes(32, 0xab);
  v[kAlgSha256][2] = Bytes(32, 2);
  const std::string text = FormatPcrValuesJson(v);
  EXPECT_EQ(text.rfind(R"({"sha256": {"2": "0202)", 0), 0u) << text;
  EXPECT_LT(text.find("\"2\""), text.find("\"10\""));
  auto back = ParsePcrValuesJson(R"({"pcrs": )" + text + R"(, "events": 12})");
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(*back, v);
  EXPECT_EQ(ParsePcrValuesJson(text).status().reason(), "pcr_values_malformed");
  EXPECT_EQ(ParsePcrValuesJson(R"({"pcrs": {"sha256": {"0": "00"}}})").status().reason(),
            "pcr_values_malformed");
}

// --- Evaluation: real logs ----------------------------------------------------

TEST(Evaluate, EmptyPolicyPassesAReplayingLog) {
  Case c(ReadLog("tpm2-tools_event-moklisttrusted.bin"));
  const Verdict v = c.Judge(R"({"version": 1})");
  EXPECT_TRUE(v.ok);
  EXPECT_TRUE(v.violations.empty());
  EXPECT_TRUE(v.tofu_to_record.empty());
}

TEST(Evaluate, MoklisttrustedPassesAStrictPolicy) {
  Case c(ReadLog("tpm2-tools_event-moklisttrusted.bin"));
  std::string apps, auths;
  for (const Measurement& m : c.facts.boot_applications) {
    apps += std::string(apps.empty() ? "" : ", ") + "\"sha256:" + HexOf(m.digests.at(kAlgSha256)) + "\"";
  }
  for (const Measurement& m : c.facts.authorities) {
    auths += std::string(auths.empty() ? "" : ", ") + "\"" + HexOf(m.digests.at(kAlgSha256)) + "\"";
  }
  const std::string policy = R"({"version": 1,
      "pcrs": {"sha256": {"7": ")" + HexOf(c.evidence.quoted.at(kAlgSha256).at(7)) + R"("}},
      "require_secure_boot": true, "require_separators": true,
      "boot_applications": {"allowed": [)" + apps + R"(]},
      "authorities": {"allowed": [)" + auths + R"(]},
      "kernel_cmdline": {"required": [" ro ", "resume=UUID="], "forbidden": ["init=", "single"]}})";
  const Verdict v = c.Judge(policy);
  EXPECT_TRUE(v.ok);
  for (const Violation& x : v.violations) ADD_FAILURE() << x.rule << ": " << x.message;
}

TEST(Evaluate, EveryViolatedRuleIsListed) {
  Case c(ReadLog("go-attestation_coreos_36_shielded_vm_no_secure_boot_eventlog.bin"));
  const std::string policy = R"({"version": 1,
      "pcrs": {"sha256": {"0": ")" + kSha256Zero + R"("}},
      "require_secure_boot": true, "require_separators": true,
      "boot_applications": {"allowed": [")" + kSha256Zero + R"("]},
      "authorities": {"allowed": []},
      "kernel_cmdline": {"exact": "ro", "required": ["lockdown=integrity"],
                         "forbidden": ["ignition.firstboot"]}})";
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
  const std::string grub = HexOf(c.facts.boot_applications.at(1).digests.at(kAlgSha256));
  const std::string sbat = HexOf(c.facts.authorities.at(0).digests.at(kAlgSha1));
  const Verdict v = c.Judge(R"({"version": 1,
      "boot_applications": {"forbidden": ["sha256:)" + grub + R"("]},
      "authorities": {"forbidden": ["sha1:)" + sbat + R"("]}})");
  EXPECT_EQ(Reasons(v), (std::multiset<std::string>{"boot_applications/boot_application_forbidden",
                                                    "authorities/authority_forbidden"}));
}

TEST(Evaluate, UnverifiedCommandLine) {
  Case c(ReadLog("tpm2-tools_event-arch-linux.bin"));
  const Verdict v = c.Judge(R"({"version": 1, "kernel_cmdline": {"forbidden": ["init="]}})");
  EXPECT_EQ(Reasons(v), (std::multiset<std::string>{"kernel_cmdline/kernel_cmdline_unverified"}));
}

TEST(Evaluate, SystemdExactCommandLine) {
  Case c(ReadLog("tpm2-tools_event-sd-boot-fedora37.bin"));
  EXPECT_TRUE(
      c.Judge(R"({"version": 1, "kernel_cmdline": {"exact": " console=ttyS0 console=tty0 efi=debug "}})")
          .ok);
  EXPECT_FALSE(c.Judge(R"({"version": 1, "kernel_cmdline": {"exact": "console=ttyS0"}})").ok);
}

TEST(Evaluate, NoCommandLineMeasured) {
  Case c(ReadLog("go-attestation_crypto_agile_eventlog.bin"));
  EXPECT_EQ(Reasons(c.Judge(R"({"version": 1, "kernel_cmdline": {"required": ["ro"]}})")),
            (std::multiset<std::string>{"kernel_cmdline/kernel_cmdline_missing"}));
}

TEST(Evaluate, LogThatDoesNotMatchTheQuote) {
  Case c(ReadLog("tpm2-tools_event-moklisttrusted.bin"));
  c.evidence.quoted[kAlgSha256][4][0] ^= 1;
  const Verdict v = c.Judge(R"({"version": 1})");
  EXPECT_EQ(Reasons(v), (std::multiset<std::string>{"eventlog/eventlog_pcr_mismatch"}));
  c.evidence.log = nullptr;
  EXPECT_EQ(Reasons(c.Judge(R"({"version": 1})")),
            (std::multiset<std::string>{"eventlog/eventlog_missing"}));
}

TEST(Evaluate, FactsOfUnquotedPcrsProveNothing) {
  Case c(ReadLog("tpm2-tools_event-moklisttrusted.bin"));
  // The quote covers PCR 0 only: PCR 4, 7 and 8's events are the log's word.
  PcrValues only0;
  only0[kAlgSha256][0] = c.evidence.quoted.at(kAlgSha256).at(0);
  c.evidence.quoted = only0;
  const Verdict v = c.Judge(R"({"version": 1, "require_secure_boot": true,
      "boot_applications": {"forbidden": []}, "authorities": {"allowed": []},
      "kernel_cmdline": {"required": ["ro"]},
      "pcrs": {"sha256": {"1": ")" + kSha256Zero + R"("}}})");
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
  const Verdict v = c.Judge(R"({"version": 1, "boot_applications": {"allowed": [")" +
                            HexOf(testing::Digest(kAlgSha256, Str("shim"))) + R"("]}})");
  ASSERT_EQ(v.violations.size(), 1u);
  EXPECT_EQ(v.violations[0].reason, "boot_application_not_allowed");
  EXPECT_NE(v.violations[0].message.find("event 2"), std::string::npos);
}

TEST(Evaluate, SecureBootNeedsItsSeparatorAndNoDebugMode) {
  EventLogBuilder no_sep;
  no_sep.SecureBootConfig(1);
  Case a(no_sep.bytes());
  EXPECT_EQ(Reasons(a.Judge(R"({"version": 1, "require_secure_boot": true})")),
            (std::multiset<std::string>{"secure_boot/secure_boot_no_separator"}));

  EventLogBuilder debug;
  debug.SecureBootConfig(1).Add(7, kEvEfiAction, Str("UEFI Debug Mode")).Separator(7);
  Case d(debug.bytes());
  EXPECT_EQ(Reasons(d.Judge(R"({"version": 1, "require_secure_boot": true})")),
            (std::multiset<std::string>{"secure_boot/secure_boot_debug_mode"}));

  EventLogBuilder good;
  good.SecureBootConfig(1).Separator(7);
  Case g(good.bytes());
  EXPECT_TRUE(g.Judge(R"({"version": 1, "require_secure_boot": true})").ok);
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
  EXPECT_EQ(Reasons(c.Judge(R"({"version": 1, "require_separators": true})")),
            (std::multiset<std::string>{"separators/separator_missing",
                                        "separators/separator_error"}));
}

// --- TOFU ---------------------------------------------------------------------

TEST(Evaluate, TrustOnFirstUse) {
  Case c(ReadLog("tpm2-tools_event-moklisttrusted.bin"));
  const std::string policy = R"({"version": 1, "tofu": {"sha256": [7, 14]}})";
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
  v = c.Judge(R"({"version": 1, "require_secure_boot": true, "tofu": {"sha256": [7]},
                  "kernel_cmdline": {"forbidden": ["ro"]}})");
  EXPECT_FALSE(v.ok);
  EXPECT_TRUE(v.tofu_to_record.empty());
}

}  // namespace
}  // namespace rackgate::attest
