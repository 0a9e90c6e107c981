#include "ctl/eventlog_commands.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "attest/eventlog.h"
#include "attest/testing/test_util.h"
#include "attest/testing/event_log_builder.h"
#include "ctl/offline.h"
#include "wire/boot_policy_json.h"

namespace rackgate::ctl {
namespace {

namespace fs = std::filesystem;
using attest::Bytes;

std::string LogPath(const std::string& name) {
  return testing::EventLogPath(name);
}

struct CmdResult {
  int rc = -1;
  std::string out, err;
};

// Runs a command function with argv {"rackgatectl", "cmd", "sub", args...}.
CmdResult Call(int (*fn)(int, char**, int), std::vector<std::string> args) {
  std::vector<std::string> all = {"rackgatectl", "cmd", "sub"};
  all.insert(all.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (std::string& s : all) argv.push_back(s.data());
  CmdResult r;
  ::testing::internal::CaptureStdout();
  ::testing::internal::CaptureStderr();
  r.rc = fn(static_cast<int>(argv.size()), argv.data(), 3);
  r.out = ::testing::internal::GetCapturedStdout();
  r.err = ::testing::internal::GetCapturedStderr();
  return r;
}

class TempDir {
 public:
  TempDir() {
    std::string t = (fs::temp_directory_path() / "rackgatectl-test-XXXXXX").string();
    path_ = ::mkdtemp(t.data());
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path_, ec);
  }
  std::string Write(const std::string& name, const std::string& content) const {
    const std::string p = (fs::path(path_) / name).string();
    std::ofstream(p, std::ios::binary) << content;
    return p;
  }
  std::string Write(const std::string& name, const Bytes& content) const {
    return Write(name, std::string(content.begin(), content.end()));
  }
  std::string Path(const std::string& name) const { return (fs::path(path_) / name).string(); }

 private:
  std::string path_;
};

size_t Lines(const std::string& s) { return static_cast<size_t>(std::count(s.begin(), s.end(), '\n')); }

TEST(EventlogReplay, JsonIsTheReplay) {
  for (const char* name : {"tpm2-tools_event-moklisttrusted.bin", "tpm2-tools_event-uefi-sha1-log.bin",
                           "go-attestation_option_rom_eventlog.bin"}) {
    SCOPED_TRACE(name);
    const CmdResult r = Call(RunEventlogReplay, {LogPath(name), "--json"});
    ASSERT_EQ(r.rc, kExitOk) << r.err;
    EXPECT_EQ(Lines(r.out), 1u);
    auto printed = wire::ParsePcrValuesJson(r.out);
    ASSERT_TRUE(printed.ok()) << printed.status().ToString() << "\n" << r.out;
    const Bytes bytes = testing::ReadEventLog(name);
    auto replayed = attest::Replay(*attest::ParseEventLog(bytes));
    EXPECT_EQ(*printed, *replayed);
  }
  // Banks strongest first, as DESIGN.md shows: {"pcrs": {"sha256": {...}, "sha1": {...}}}.
  const CmdResult r =
      Call(RunEventlogReplay, {"--json", LogPath("tpm2-tools_event-gce-ubuntu-2104-log.bin")});
  EXPECT_EQ(r.out.rfind(R"({"pcrs": {"sha384": {"0": ")", 0), 0u) << r.out;
  const size_t sha256 = r.out.find(R"(}, "sha256": {"0": ")");
  const size_t sha1 = r.out.find(R"(}, "sha1": {"0": ")");
  EXPECT_NE(sha256, std::string::npos);
  EXPECT_NE(sha1, std::string::npos);
  EXPECT_LT(sha256, sha1);
}

TEST(EventlogReplay, Table) {
  const CmdResult r = Call(RunEventlogReplay, {LogPath("tpm2-tools_event-uefi-sha1-log.bin")});
  ASSERT_EQ(r.rc, kExitOk);
  EXPECT_NE(r.out.find("SHA-1"), std::string::npos);
  EXPECT_NE(r.out.find("sha1    7    "), std::string::npos) << r.out;
}

TEST(EventlogReplay, UnusableInput) {
  TempDir dir;
  const Bytes log = testing::ReadEventLog("tpm2-tools_event-arch-linux.bin");
  const std::string cut = dir.Write("cut.bin", Bytes(log.begin(), log.begin() + 100));
  CmdResult r = Call(RunEventlogReplay, {cut, "--json"});
  EXPECT_EQ(r.rc, kExitUnusable);
  EXPECT_TRUE(r.out.empty());
  EXPECT_NE(r.err.find("eventlog_truncated"), std::string::npos) << r.err;
  EXPECT_EQ(Call(RunEventlogReplay, {dir.Write("empty.bin", "")}).rc, kExitUnusable);
  EXPECT_EQ(Call(RunEventlogReplay, {dir.Path("absent.bin")}).rc, kExitUnusable);
  EXPECT_EQ(Call(RunEventlogReplay, {}).rc, kExitUnusable);
  EXPECT_EQ(Call(RunEventlogReplay, {cut, cut}).rc, kExitUnusable);
  EXPECT_EQ(Call(RunEventlogReplay, {"--help"}).rc, kExitOk);
}

TEST(EventlogShow, OneLinePerEventAndFacts) {
  const std::string path = LogPath("tpm2-tools_event-arch-linux.bin");
  const CmdResult r = Call(RunEventlogShow, {path});
  ASSERT_EQ(r.rc, kExitOk) << r.err;
  const Bytes bytes = testing::ReadEventLog("tpm2-tools_event-arch-linux.bin");
  const size_t events = attest::ParseEventLog(bytes)->events.size();
  EXPECT_GT(Lines(r.out), events + 2);
  EXPECT_NE(r.out.find("EV_IPL"), std::string::npos);
  EXPECT_NE(r.out.find("[data!=digest]"), std::string::npos);
  EXPECT_NE(r.out.find("\\EFI\\SYSTEMD\\SYSTEMD-BOOTX64.EFI"), std::string::npos);
  EXPECT_NE(r.out.find("secure boot: disabled"), std::string::npos);
  for (char c : r.out) EXPECT_TRUE(c == '\n' || (c >= 0x20 && c < 0x7f));
}

// A log that matches attest/testdata/tpm/q_rsa.*: PCR 0 of the sha256 bank
// extended once with 32 bytes of 0xaa.
Bytes QuoteFixtureLog() {
  testing::EventLogBuilder b;
  b.Raw(0, attest::kEvPostCode, {{attest::kAlgSha1, Bytes(20, 0xaa)}, {attest::kAlgSha256, Bytes(32, 0xaa)}},
        testing::Str("POST CODE"));
  return b.bytes();
}

TEST(PolicyCheck, PassesAndFails) {
  TempDir dir;
  const std::string log = LogPath("tpm2-tools_event-moklisttrusted.bin");
  const std::string pass = dir.Write("pass.json", R"({"version": 1, "require_secure_boot": true,
      "require_separators": true, "kernel_cmdline": {"forbidden": ["init="]}})");
  CmdResult r = Call(RunPolicyCheck, {"--policy", pass, "--eventlog", log});
  EXPECT_EQ(r.rc, kExitOk) << r.err;
  EXPECT_NE(r.out.find("policy ok"), std::string::npos);
  EXPECT_NE(r.err.find("no quoted PCRs"), std::string::npos);

  const std::string fail = dir.Write("fail.json", R"({"version": 1,
      "boot_applications": {"allowed": []},
      "kernel_cmdline": {"required": ["lockdown=integrity"]}})");
  r = Call(RunPolicyCheck, {"--policy", fail, "--eventlog", log});
  EXPECT_EQ(r.rc, kExitRefused);
  // Four boot applications and the command line: every violation, one line each.
  EXPECT_EQ(Lines(r.err), 1u + 5u + 1u) << r.err;
  EXPECT_NE(r.err.find("boot_applications: boot_application_not_allowed"), std::string::npos);
  EXPECT_NE(r.err.find("kernel_cmdline: kernel_cmdline_required_missing"), std::string::npos);
  EXPECT_NE(r.err.find("5 violations"), std::string::npos);
}

TEST(PolicyCheck, QuotedPcrsFromReplayJson) {
  TempDir dir;
  const std::string log = LogPath("go-attestation_option_rom_eventlog.bin");
  const CmdResult replay = Call(RunEventlogReplay, {log, "--json"});
  const std::string pcrs = dir.Write("pcrs.json", replay.out);
  const std::string policy = dir.Write("p.json", R"({"version": 1, "require_secure_boot": true})");
  EXPECT_EQ(Call(RunPolicyCheck, {"--policy", policy, "--eventlog", log, "--pcrs-json", pcrs}).rc,
            kExitOk);
  // The same PCRs against another machine's log.
  CmdResult r = Call(RunPolicyCheck, {"--policy", policy, "--eventlog",
                                LogPath("go-attestation_sb_cert_eventlog.bin"), "--pcrs-json", pcrs});
  EXPECT_EQ(r.rc, kExitRefused);
  EXPECT_NE(r.err.find("eventlog: eventlog_"), std::string::npos) << r.err;
}

TEST(PolicyCheck, QuotedPcrsFromQuoteFiles) {
  TempDir dir;
  const std::string log = dir.Write("log.bin", QuoteFixtureLog());
  const std::string msg = testing::SourcePath("attest/testdata/tpm/q_rsa.msg");
  const std::string pcrs = testing::SourcePath("attest/testdata/tpm/q_rsa.pcrs");
  attest::PcrValues golden;
  golden[attest::kAlgSha256][0] =
      testing::Digest(attest::kAlgSha256, [] {
        Bytes b(32, 0);
        b.insert(b.end(), 32, 0xaa);
        return b;
      }());
  golden[attest::kAlgSha256][7] = Bytes(32, 0);
  const std::string good = dir.Write(
      "good.json", R"({"version": 1, "pcrs": )" + wire::FormatPcrValuesJson(golden) + "}");
  CmdResult r = Call(RunPolicyCheck, {"--policy", good, "--eventlog", log, "--pcrs", pcrs, "--message", msg});
  EXPECT_EQ(r.rc, kExitOk) << r.err;
  EXPECT_TRUE(r.err.empty()) << r.err;

  golden[attest::kAlgSha256][7] = Bytes(32, 1);
  golden[attest::kAlgSha256][8] = Bytes(32, 0);
  const std::string bad = dir.Write(
      "bad.json", R"({"version": 1, "pcrs": )" + wire::FormatPcrValuesJson(golden) + "}");
  r = Call(RunPolicyCheck, {"--policy", bad, "--eventlog", log, "--pcrs", pcrs, "--message", msg});
  EXPECT_EQ(r.rc, kExitRefused);
  EXPECT_NE(r.err.find("pcrs: pcr_mismatch: sha256 PCR 7"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("pcrs: pcr_not_quoted: sha256 PCR 8"), std::string::npos) << r.err;

  // PCR values that are not the quote's.
  Bytes tampered = testing::ReadFixture("attest/testdata/tpm/q_rsa.pcrs");
  tampered.at(132 + 4 + 4 + 2) ^= 1;  // the first digest of the serialized form
  r = Call(RunPolicyCheck, {"--policy", good, "--eventlog", log, "--pcrs",
                            dir.Write("t.pcrs", tampered), "--message", msg});
  EXPECT_EQ(r.rc, kExitUnusable) << r.err;
}

TEST(PolicyCheck, UnusableInput) {
  TempDir dir;
  const std::string log = LogPath("tpm2-tools_event.bin");
  const std::string ok = dir.Write("ok.json", R"({"version": 1})");
  const std::string typo = dir.Write("typo.json", R"({"version": 1, "require_secureboot": true})");
  CmdResult r = Call(RunPolicyCheck, {"--policy", typo, "--eventlog", log});
  EXPECT_EQ(r.rc, kExitUnusable);
  EXPECT_NE(r.err.find("policy_malformed"), std::string::npos);
  EXPECT_NE(r.err.find("require_secureboot"), std::string::npos);
  EXPECT_EQ(Call(RunPolicyCheck, {"--policy", ok}).rc, kExitUnusable);
  EXPECT_EQ(Call(RunPolicyCheck, {"--policy", ok, "--eventlog", log, "--pcrs", ok}).rc,
            kExitUnusable);
  EXPECT_EQ(Call(RunPolicyCheck, {"--policy", ok, "--eventlog", dir.Write("e", "")}).rc,
            kExitUnusable);
  EXPECT_EQ(Call(RunPolicyCheck, {"--policy", ok, "--eventlog", log, "--pcrs-json", ok}).rc,
            kExitUnusable);
  EXPECT_EQ(Call(RunPolicyCheck, {"--help"}).rc, kExitOk);
}

TEST(PolicyCheck, TofuRecordedAndEnforced) {
  TempDir dir;
  const std::string log = LogPath("tpm2-tools_event-moklisttrusted.bin");
  const std::string policy = dir.Write("p.json", R"({"version": 1, "tofu": {"sha256": [7]}})");
  const std::string record = dir.Path("record.json");
  CmdResult r = Call(RunPolicyCheck, {"--policy", policy, "--eventlog", log, "--tofu-record-to", record});
  ASSERT_EQ(r.rc, kExitOk) << r.err;
  ASSERT_TRUE(fs::exists(record));
  EXPECT_EQ(fs::status(record).permissions() & fs::perms::others_read, fs::perms::none);
  r = Call(RunPolicyCheck, {"--policy", policy, "--eventlog", log, "--tofu-recorded", record});
  EXPECT_EQ(r.rc, kExitOk) << r.err;
  EXPECT_NE(r.out.find("tofu record: {\"pcrs\": {\"sha256\": {\"7\": "), std::string::npos);
  // Another machine's boot against this one's record.
  r = Call(RunPolicyCheck, {"--policy", policy, "--eventlog",
                            LogPath("tpm2-tools_event-postcode.bin"), "--tofu-recorded", record});
  EXPECT_EQ(r.rc, kExitRefused);
  EXPECT_NE(r.err.find("tofu: tofu_mismatch: sha256 PCR 7"), std::string::npos) << r.err;
}

// --pcr-signature: a uki_signed rule sees the document; a malformed one is
// unusable input. (Passing signatures: firmware-tests/uki_signed.sh.)
TEST(PolicyCheck, PcrSignature) {
  TempDir dir;
  const std::string log = LogPath("tpm2-tools_event-moklisttrusted.bin");
  const std::string policy = dir.Write("uki.json", R"({"version": 1, "uki_signed": {"public_keys": [
      "-----BEGIN PUBLIC KEY-----\nMFkwEwYHKoZIzj0CAQYIKoZIzj0DAQcDQgAEyUzfkEChGJj23Qo1yG4TG+Yft49N\nUbi365H9ZBSo+zfiEUXbEAfR1712BpyrAsLun3Hx1YD49PWyQ6wHSaAgMQ==\n-----END PUBLIC KEY-----\n"]}})");
  const std::string sig = dir.Write("sig.json", R"({"sha256": [{"pcrs": [11], "pkfp": ")" +
      std::string(64, 'a') + R"(", "pol": ")" + std::string(64, 'b') + R"(", "sig": "AAEC"}]})");
  CmdResult r = Call(RunPolicyCheck, {"--policy", policy, "--eventlog", log, "--pcr-signature", sig});
  EXPECT_EQ(r.rc, kExitRefused);
  EXPECT_NE(r.err.find("uki_signed: uki_signature_missing"), std::string::npos) << r.err;
  const std::string bad = dir.Write("bad.json", R"({"sha256": [{"pcrs": [11]}]})");
  r = Call(RunPolicyCheck, {"--policy", policy, "--eventlog", log, "--pcr-signature", bad});
  EXPECT_EQ(r.rc, kExitUnusable);
  EXPECT_NE(r.err.find("pcr_signature_malformed"), std::string::npos) << r.err;
}

}  // namespace
}  // namespace rackgate::ctl
