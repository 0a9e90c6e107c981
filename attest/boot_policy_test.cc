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
#include "attest/testing/test_util.h"

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

// --- Modern boots: systemd-boot, systemd-stub, UKIs ---------------------------

// What a machine quotes when asked for sha256 PCRs 0-7 (the default
// selection) plus what the policy reads from the log: the log's values, and
// the initial value of any PCR the log never extended.
PcrValues QuoteOf(const Case& c, std::set<uint32_t> pcrs) {
  for (uint32_t p = 0; p <= 7; ++p) pcrs.insert(p);
  PcrValues out;
  const PcrBank& replayed = c.evidence.quoted.at(kAlgSha256);
  for (uint32_t p : pcrs) {
    auto it = replayed.find(p);
    out[kAlgSha256][p] = it != replayed.end() ? it->second : InitialPcrValue(p, 32);
  }
  return out;
}

TEST(Evaluate, SystemdBootCommandLineIsFoundOnPcr12) {
  Case c(ReadLog("tpm2-tools_event-sd-boot-fedora37.bin"));
  BootPolicy policy;
  policy.kernel_cmdline = Cmdline(std::nullopt, {"console=ttyS0", "efi=debug"}, {"init="});
  const std::set<uint32_t> read = PcrsReadFromLog(policy);
  EXPECT_EQ(read, (std::set<uint32_t>{8, 9, 11, 12}));
  c.evidence.quoted = QuoteOf(c, read);
  Verdict v = c.Judge(policy);
  EXPECT_TRUE(v.ok);
  for (const Violation& x : v.violations) ADD_FAILURE() << x.rule << ": " << x.message;

  policy.kernel_cmdline = Cmdline(std::nullopt, {"console=ttyS1"}, {"efi=debug"});
  // Both PCR 12 events (systemd-boot's, then the one the kernel received)
  // break both rules.
  EXPECT_EQ(Reasons(c.Judge(policy)),
            (std::multiset<std::string>{"kernel_cmdline/kernel_cmdline_required_missing",
                                        "kernel_cmdline/kernel_cmdline_required_missing",
                                        "kernel_cmdline/kernel_cmdline_forbidden_present",
                                        "kernel_cmdline/kernel_cmdline_forbidden_present"}));

  // The selection before PCR 12 was added (0-9) leaves it unquoted: the
  // command line proves nothing, and the rule fails as it did then.
  c.evidence.quoted = QuoteOf(c, {8, 9});
  EXPECT_EQ(Reasons(c.Judge(policy)),
            (std::multiset<std::string>{"kernel_cmdline/kernel_cmdline_missing"}));
}

TEST(Evaluate, GrubCommandLineWithTheWiderSelection) {
  // Quoting PCRs 11 and 12 on a grub boot changes nothing: they are unused.
  Case c(ReadLog("go-attestation_coreos_36_shielded_vm_no_secure_boot_eventlog.bin"));
  BootPolicy policy;
  policy.kernel_cmdline = Cmdline(std::nullopt, {"ignition.platform.id=gcp"}, {"init="});
  c.evidence.quoted = QuoteOf(c, PcrsReadFromLog(policy));
  EXPECT_EQ(c.evidence.quoted.at(kAlgSha256).count(12), 1u);
  EXPECT_TRUE(c.Judge(policy).ok);
  policy.kernel_cmdline = Cmdline(std::nullopt, {"ignition.platform.id=metal"}, {});
  EXPECT_EQ(Reasons(c.Judge(policy)),
            (std::multiset<std::string>{"kernel_cmdline/kernel_cmdline_required_missing"}));
}

TEST(Evaluate, PcrsReadFromLog) {
  EXPECT_TRUE(PcrsReadFromLog(BootPolicy{}).empty());
  BootPolicy p;
  p.uki.emplace();
  EXPECT_EQ(PcrsReadFromLog(p), (std::set<uint32_t>{11}));
  p = SecureBootPolicy();
  p.allowed_boot_applications.emplace();
  EXPECT_EQ(PcrsReadFromLog(p), (std::set<uint32_t>{4, 7}));
  p.require_separators = true;
  EXPECT_EQ(PcrsReadFromLog(p), (std::set<uint32_t>{0, 1, 2, 3, 4, 5, 6, 7}));
  p = BootPolicy{};
  p.secure_boot_db.emplace();
  EXPECT_EQ(PcrsReadFromLog(p), (std::set<uint32_t>{7}));
  p = BootPolicy{};
  p.uki_signed.emplace();
  EXPECT_EQ(PcrsReadFromLog(p), (std::set<uint32_t>{11}));
  p = BootPolicy{};
  p.forbidden_boot_files.push_back(Sha256Digest(Bytes(32, 1)));
  EXPECT_EQ(PcrsReadFromLog(p), (std::set<uint32_t>{9}));
  p = BootPolicy{};
  p.allowed_boot_files.emplace();
  EXPECT_EQ(PcrsReadFromLog(p), (std::set<uint32_t>{9}));
}

// boot_files judges every PCR 9 measurement by digest, names the file as the
// log calls it, and needs PCR 9 quoted.
TEST(Evaluate, BootFiles) {
  Case c(ReadLog("rackgate-lab_ovmf-shim-grub-debian12-secureboot.bin"));
  ASSERT_EQ(c.facts.boot_files.size(), 3u);
  BootPolicy p;
  p.allowed_boot_files.emplace();
  for (const Measurement& m : c.facts.boot_files) p.allowed_boot_files->push_back(Sha256Digest(m.digests.at(kAlgSha256)));
  EXPECT_TRUE(c.Judge(p).ok);
  // Without the initramfs's digest on the list.
  p.allowed_boot_files->pop_back();
  Verdict v = c.Judge(p);
  ASSERT_EQ(Reasons(v), (std::multiset<std::string>{"boot_files/boot_file_not_allowed"}));
  EXPECT_NE(v.violations[0].message.find("boot file event 54 (EV_IPL, logged as \"/initrd.img\") sha256:4066e6d7"),
            std::string::npos)
      << v.violations[0].message;
  // Forbidden wins over allowed.
  p.allowed_boot_files->push_back(Sha256Digest(c.facts.boot_files[2].digests.at(kAlgSha256)));
  p.forbidden_boot_files.push_back(Sha256Digest(c.facts.boot_files[0].digests.at(kAlgSha256)));
  EXPECT_EQ(Reasons(c.Judge(p)), (std::multiset<std::string>{"boot_files/boot_file_forbidden"}));
  // PCR 9 unquoted: nothing on it is bound.
  c.evidence.quoted.at(kAlgSha256).erase(9);
  c.evidence.quoted.at(kAlgSha1).erase(9);
  EXPECT_EQ(Reasons(c.Judge(p)), (std::multiset<std::string>{"boot_files/pcr_not_quoted"}));
}

// --- Secure Boot db and dbx ----------------------------------------------------

// Fingerprints checked with `openssl x509 -fingerprint -sha256` on the
// certificates in the moklisttrusted log's db.
const char kWindowsPca2011[] = "e8e95f0733a55e8bad7be0a1413ee23c51fcea64b3c8fa6a786935fddcc71961";
const char kUefiCa2011[] = "48e99b991f57fc52f76149599bff0a58c47154229b9f8d603ac40d3500248507";
// The KEK's Microsoft certificate: in KEK, not in db.
const char kKekCa2011[] = "a1117f516a32cefcba3f2d1ace10a87972fd6bbe8fe0d0b996e09e65d802a503";
// Its dbx's one EFI_CERT_SHA256 entry (the SHA-256 of nothing).
const char kDbxEmpty[] = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855";

SecureBootDbPolicy DbRule(std::vector<std::string> required, std::vector<std::string> forbidden,
                          std::vector<std::string> dbx) {
  SecureBootDbPolicy p;
  for (const auto& h : required) p.db_required_certificates.push_back(testing::FromHex(h));
  for (const auto& h : forbidden) p.db_forbidden_certificates.push_back(testing::FromHex(h));
  for (const auto& h : dbx) p.dbx_required_hashes.push_back(testing::FromHex(h));
  return p;
}

TEST(Evaluate, SecureBootDbOnARealLog) {
  Case c(ReadLog("tpm2-tools_event-moklisttrusted.bin"));
  BootPolicy policy;
  policy.secure_boot_db = DbRule({kWindowsPca2011, kUefiCa2011}, {kKekCa2011}, {kDbxEmpty});
  Verdict v = c.Judge(policy);
  EXPECT_TRUE(v.ok);
  for (const Violation& x : v.violations) ADD_FAILURE() << x.rule << ": " << x.message;

  policy.secure_boot_db = DbRule({kUefiCa2011, kKekCa2011}, {kWindowsPca2011}, {kSha256Zero});
  v = c.Judge(policy);
  EXPECT_EQ(Reasons(v), (std::multiset<std::string>{"db/db_certificate_missing",
                                                    "db/db_certificate_forbidden",
                                                    "dbx/dbx_hash_missing"}));
  ASSERT_EQ(v.violations.size(), 3u);
  EXPECT_NE(v.violations[0].message.find("db.required[1] is not in db"), std::string::npos)
      << v.violations[0].message;
  EXPECT_NE(v.violations[1].message.find("db.forbidden[0] is in db"), std::string::npos);
  EXPECT_NE(v.violations[2].message.find("dbx.required[0] is not in dbx"), std::string::npos);

  // PCR 7 not quoted: the databases prove nothing.
  for (auto& [alg, bank] : c.evidence.quoted) bank.erase(7);
  EXPECT_EQ(Reasons(c.Judge(policy)),
            (std::multiset<std::string>{"db/pcr_not_quoted", "dbx/pcr_not_quoted"}));
}

// An EFI_SIGNATURE_DATA holding a (fake) DER certificate.
Bytes X509Signature(const std::string& der) {
  Bytes b(16, 0x42);
  testing::Put(&b, Str(der));
  return b;
}

TEST(Evaluate, SecureBootDbOnCraftedLogs) {
  const std::string cert = "0\x82 a certificate's DER";
  const std::string fp = HexOf(testing::Digest(kAlgSha256, Str(cert)));
  auto db_log = [&](bool separator, bool malformed_db) {
    EventLogBuilder b;
    b.Add(7, kEvEfiVariableDriverConfig,
          testing::UefiVariable(kEfiGlobalVariableGuid, "SecureBoot", Bytes{1}));
    Bytes lists = testing::SignatureList(kEfiCertX509Guid, {}, {X509Signature(cert)});
    if (malformed_db) lists.pop_back();
    b.Add(7, kEvEfiVariableDriverConfig,
          testing::UefiVariable(kEfiImageSecurityDatabaseGuid, "db", lists));
    if (separator) b.Separator(7);
    return b.bytes();
  };
  BootPolicy policy;
  policy.secure_boot_db = DbRule({fp}, {}, {});
  Case good(db_log(true, false));
  EXPECT_TRUE(good.Judge(policy).ok);
  // No dbx in this log.
  policy.secure_boot_db = DbRule({}, {}, {fp});
  EXPECT_EQ(Reasons(good.Judge(policy)), (std::multiset<std::string>{"dbx/dbx_not_measured"}));

  policy.secure_boot_db = DbRule({fp}, {}, {});
  Case no_sep(db_log(false, false));
  EXPECT_EQ(Reasons(no_sep.Judge(policy)), (std::multiset<std::string>{"db/db_not_measured"}));
  Case bad(db_log(true, true));
  EXPECT_EQ(Reasons(bad.Judge(policy)), (std::multiset<std::string>{"db/db_not_measured"}));

  // The usual configuration's db holds hashes only; dbx one hash of 0xdd.
  EventLogBuilder usual;
  usual.SecureBootConfig(1).Separator(7);
  Case u(usual.bytes());
  policy.secure_boot_db = DbRule({fp}, {}, {std::string(64, 'd')});
  EXPECT_EQ(Reasons(u.Judge(policy)), (std::multiset<std::string>{"db/db_certificate_missing"}));

  // A db whose data does not match its digest: the Secure Boot
  // configuration is unverifiable, and so is db.
  EventLogBuilder forged;
  forged.Measure(7, kEvEfiVariableDriverConfig, Str("the real db"),
                 testing::UefiVariable(kEfiImageSecurityDatabaseGuid, "db",
                                       testing::SignatureList(kEfiCertX509Guid, {},
                                                              {X509Signature(cert)})))
      .Separator(7);
  Case f(forged.bytes());
  policy.secure_boot_db = DbRule({fp}, {}, {});
  EXPECT_EQ(Reasons(f.Judge(policy)), (std::multiset<std::string>{"db/db_not_measured"}));
}

// A UKI boot as systemd-stub logs it (no log in testdata/ has one).
Bytes UkiLog(const std::string& cmdline, bool stray_pcr11_event = false) {
  EventLogBuilder b;
  for (const auto& [name, contents] : std::vector<std::pair<std::string, std::string>>{
           {".linux", "kernel image"}, {".osrel", "ID=fedora\n"}, {".cmdline", cmdline},
           {".initrd", "cpio"}}) {
    b.Measure(11, kEvIpl, Str(std::string_view(name.c_str(), name.size() + 1)),
              testing::Utf16(name, true));
    b.Measure(11, kEvIpl, Str(contents), testing::Utf16(name, true));
  }
  if (stray_pcr11_event) b.Measure(11, kEvIpl, Str("enter-initrd"), Str("enter-initrd"));
  return b.bytes();
}

UkiPolicy UkiRule(std::vector<std::pair<std::string, std::string>> allowed) {
  UkiPolicy u;
  for (const auto& [name, contents] : allowed) {
    u.sections[name].push_back(Sha256Digest(testing::Digest(kAlgSha256, Str(contents))));
  }
  return u;
}

TEST(Evaluate, UkiSections) {
  Case c(UkiLog("root=/dev/vda ro"));
  BootPolicy policy;
  policy.uki = UkiRule({{".linux", "kernel image"}, {".initrd", "cpio"}});
  EXPECT_TRUE(c.Judge(policy).ok);
  policy.uki = UkiRule({{".linux", "another kernel"}, {".initrd", "cpio"}, {".ucode", "x"}});
  EXPECT_EQ(Reasons(c.Judge(policy)),
            (std::multiset<std::string>{"uki/uki_section_not_allowed", "uki/uki_section_missing"}));

  // PCR 11 not quoted: the sections prove nothing.
  c.evidence.quoted.at(kAlgSha256).erase(11);
  c.evidence.quoted.at(kAlgSha1).erase(11);
  EXPECT_EQ(Reasons(c.Judge(policy)), (std::multiset<std::string>{"uki/pcr_not_quoted"}));

  // Not a UKI boot at all.
  Case sd(ReadLog("tpm2-tools_event-sd-boot-fedora37.bin"));
  sd.evidence.quoted = QuoteOf(sd, {11});
  policy.uki = UkiRule({{".linux", "kernel image"}});
  EXPECT_EQ(Reasons(sd.Judge(policy)), (std::multiset<std::string>{"uki/uki_missing"}));

  // Anything else on PCR 11 fails the rule.
  Case stray(UkiLog("root=/dev/vda ro", true));
  EXPECT_EQ(Reasons(stray.Judge(policy)),
            (std::multiset<std::string>{"uki/uki_measurement_unrecognized"}));
}

TEST(Evaluate, UkiCommandLineIsJudgedByDigest) {
  Case c(UkiLog("root=/dev/vda ro"));
  BootPolicy policy;
  policy.kernel_cmdline = Cmdline("root=/dev/vda ro", {}, {});
  EXPECT_TRUE(c.Judge(policy).ok);
  policy.kernel_cmdline = Cmdline("root=/dev/vda rw", {}, {});
  EXPECT_EQ(Reasons(c.Judge(policy)),
            (std::multiset<std::string>{"kernel_cmdline/kernel_cmdline_mismatch"}));
  // Substrings cannot be judged against a digest: fail closed.
  policy.kernel_cmdline = Cmdline(std::nullopt, {"ro"}, {});
  EXPECT_EQ(Reasons(c.Judge(policy)),
            (std::multiset<std::string>{"kernel_cmdline/kernel_cmdline_unverified"}));
  // A builder that keeps a NUL after the text.
  Case nul(UkiLog(std::string("root=/dev/vda ro\0", 17)));
  policy.kernel_cmdline = Cmdline("root=/dev/vda ro", {}, {});
  EXPECT_TRUE(nul.Judge(policy).ok);
}

TEST(Evaluate, SystemdBootPhasesOnPcr11) {
  Case c(UkiLog("root=/dev/vda ro"));
  BootPolicy policy;
  policy.uki = UkiRule({{".linux", "kernel image"}});
  const PcrValues logged = c.evidence.quoted;
  // systemd-pcrphase extended PCR 11 after the firmware log ended.
  for (auto& [alg, bank] : c.evidence.quoted) {
    for (std::string_view word : {"enter-initrd", "leave-initrd"}) {
      Bytes v = bank.at(11);
      testing::Put(&v, testing::Digest(alg, Str(word)));
      bank[11] = testing::Digest(alg, v);
    }
  }
  std::string phase = "unset";
  auto replayed = Replay(c.log);
  ASSERT_TRUE(replayed.ok());
  EXPECT_TRUE(CompareLogWithQuote(*replayed, c.evidence.quoted, &phase).ok());
  EXPECT_EQ(phase, "enter-initrd:leave-initrd");
  EXPECT_FALSE(ComparePcrs(*replayed, c.evidence.quoted).ok());
  EXPECT_TRUE(c.Judge(policy).ok);
  EXPECT_TRUE(CompareLogWithQuote(*replayed, logged, &phase).ok());
  EXPECT_EQ(phase, "");

  // Anything but those words is unexplained.
  for (auto& [alg, bank] : c.evidence.quoted) {
    Bytes v = bank.at(11);
    testing::Put(&v, testing::Digest(alg, Str("evil")));
    bank[11] = testing::Digest(alg, v);
  }
  EXPECT_EQ(Reasons(c.Judge(policy)),
            (std::multiset<std::string>{"eventlog/eventlog_pcr_mismatch"}));
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
  EXPECT_EQ(Reasons(v), (std::multiset<std::string>{"eventlog/event_relabelled",
                                                    "boot_applications/boot_application_not_allowed"}));
  for (const Violation& x : v.violations) {
    EXPECT_NE(x.message.find("event 2"), std::string::npos) << x.message;
  }
}

// --- Relabelled events (issue 40) ---------------------------------------------
//
// The firmware lab's real log, forged as a machine would to pass a
// measurement off as another kind of event (boot_facts_test.cc,
// BootFactsRelabelled.*). Each relabelling refuses under a policy that reads
// the PCR; the measurement is still judged by its digest.

constexpr char kFirmwareLab[] = "rackgate-lab_ovmf-shim-grub-debian12-secureboot.bin";
const std::vector<uint32_t> kRelabelTypes = {kEvAction, kEvEfiAction, kEvEventTag, 0x0000ff42};

EventLog ParsedLab() {
  auto log = ParseEventLog(ReadLog(kFirmwareLab));
  EXPECT_TRUE(log.ok()) << log.status().ToString();
  return log.ok() ? *std::move(log) : EventLog{};
}

TEST(Evaluate, RelabelledBootFileIsRefused) {
  // docs/policy-proposal.md's boot_files without pins: the firmware lab's
  // three files allowed, a fourth initramfs booted instead of the third.
  const EventLog lab = ParsedLab();
  Case real(ReadLog(kFirmwareLab));
  BootPolicy p;
  p.allowed_boot_files.emplace();
  for (const Measurement& m : real.facts.boot_files) {
    p.allowed_boot_files->push_back(Sha256Digest(m.digests.at(kAlgSha256)));
  }
  ASSERT_TRUE(real.Judge(p).ok);
  const Bytes file = Str("an initramfs nobody allowed");
  Case honest(testing::Relabelled(lab, 54, kEvIpl, Str("/initrd.img"), file));
  EXPECT_EQ(Reasons(honest.Judge(p)), (std::multiset<std::string>{"boot_files/boot_file_not_allowed"}));
  for (uint32_t type : kRelabelTypes) {
    SCOPED_TRACE(EventTypeName(type));
    Case c(testing::Relabelled(lab, 54, type, file, file));
    const Verdict v = c.Judge(p);
    EXPECT_EQ(Reasons(v), (std::multiset<std::string>{"eventlog/event_relabelled",
                                                      "boot_files/boot_file_not_allowed"}));
    EXPECT_FALSE(v.ok);
  }
}

TEST(Evaluate, RelabelledAuthorityIsRefused) {
  const EventLog lab = ParsedLab();
  Case real(ReadLog(kFirmwareLab));
  BootPolicy p;
  // shim's MokListRT certificate is forbidden: the machine hides it.
  p.forbidden_authorities.push_back(Sha256Digest(lab.events.at(37).digests.at(kAlgSha256)));
  ASSERT_EQ(Reasons(real.Judge(p)), (std::multiset<std::string>{"authorities/authority_forbidden"}));
  for (uint32_t type : kRelabelTypes) {
    SCOPED_TRACE(EventTypeName(type));
    Case c(testing::Relabelled(lab, 37, type, lab.events.at(37).data));
    EXPECT_EQ(Reasons(c.Judge(p)), (std::multiset<std::string>{"eventlog/event_relabelled",
                                                               "authorities/authority_forbidden"}));
  }
}

TEST(Evaluate, RelabelledCommandLineIsRefused) {
  const EventLog lab = ParsedLab();
  BootPolicy p;
  p.kernel_cmdline = Cmdline(std::nullopt, {"console=ttyS0"}, {"init="});
  Case real(ReadLog(kFirmwareLab));
  ASSERT_TRUE(real.Judge(p).ok);
  const std::string evil = "/vmlinuz console=ttyS0 init=/bin/sh";
  for (uint32_t type : kRelabelTypes) {
    SCOPED_TRACE(EventTypeName(type));
    Case c(testing::Relabelled(lab, 52, type, Str(evil), Str(evil)));
    EXPECT_EQ(Reasons(c.Judge(p)), (std::multiset<std::string>{"eventlog/event_relabelled",
                                                               "kernel_cmdline/kernel_cmdline_missing"}));
  }
}

TEST(Evaluate, RelabelledSeparatorOrSecureBootIsRefused) {
  const EventLog lab = ParsedLab();
  for (uint32_t type : kRelabelTypes) {
    SCOPED_TRACE(EventTypeName(type));
    Case sep(testing::Relabelled(lab, 27, type, lab.events.at(27).data));
    BootPolicy separators;
    separators.require_separators = true;
    EXPECT_EQ(Reasons(sep.Judge(separators)),
              (std::multiset<std::string>{"eventlog/event_relabelled", "separators/separator_missing"}));
    Case sb(testing::Relabelled(lab, 4, type, lab.events.at(4).data));
    EXPECT_EQ(Reasons(sb.Judge(SecureBootPolicy())),
              (std::multiset<std::string>{"eventlog/event_relabelled",
                                          "secure_boot/secure_boot_not_measured"}));
  }
}

TEST(Evaluate, RelabellingOnAPcrThePolicyDoesNotReadIsJudgedByItsPin) {
  // Only PCR 7 is read from the log; a relabelled PCR 9 event is left to a
  // pin or a boot_files rule, and a pin catches it.
  const EventLog lab = ParsedLab();
  const Bytes file = Str("an initramfs nobody allowed");
  Case c(testing::Relabelled(lab, 54, kEvAction, file, file));
  EXPECT_TRUE(c.Judge(SecureBootPolicy()).ok);
  Case real(ReadLog(kFirmwareLab));
  BootPolicy pinned = SecureBootPolicy();
  pinned.pcrs[kAlgSha256][9] = real.evidence.quoted.at(kAlgSha256).at(9);
  EXPECT_EQ(Reasons(c.Judge(pinned)), (std::multiset<std::string>{"pcrs/pcr_mismatch"}));
}

TEST(Evaluate, RelabelledAsNoActionBreaksTheReplay) {
  // EV_NO_ACTION extends nothing: the quote holds what grub extended, the
  // forged log replays without it.
  const EventLog lab = ParsedLab();
  const Bytes file = Str("an initramfs nobody allowed");
  Case measured(testing::Relabelled(lab, 54, kEvIpl, Str("/initrd.img"), file));
  Case c(testing::Relabelled(lab, 54, kEvNoAction, file, file));
  c.evidence.quoted = measured.evidence.quoted;
  BootPolicy p;
  p.allowed_boot_files.emplace();
  const Verdict v = c.Judge(p);
  ASSERT_FALSE(v.ok);
  EXPECT_EQ(v.violations.front().rule, "eventlog");
  EXPECT_EQ(v.violations.front().reason, "eventlog_pcr_mismatch");
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
