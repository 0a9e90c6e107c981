#include "attest/boot_facts.h"

#include <gtest/gtest.h>

#include <stdexcept>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "attest/testing/event_log_builder.h"
#include "attest/testing/test_util.h"
#include "base/hex.h"

namespace rackgate::attest {
namespace {

namespace fs = std::filesystem;
using testing::EventLogBuilder;
using testing::PutU32;
using testing::PutU64;
using testing::Sha256Signature;
using testing::SignatureList;
using testing::Str;
using testing::UefiVariable;

// --- Helpers ---------------------------------------------------------------

fs::path EventLogDir() { return fs::path(testing::EventLogDir()); }

// Throws when the log is missing: gtest reports that as a failure, where an
// empty log would let later indexing run past the end.
Bytes ReadLog(const std::string& name) {
  std::ifstream in(EventLogDir() / name, std::ios::binary);
  if (!in) throw std::runtime_error("test data missing: " + (EventLogDir() / name).string());
  return Bytes(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

BootFacts FactsOf(const Bytes& bytes) {
  auto log = ParseEventLog(bytes);
  EXPECT_TRUE(log.ok()) << log.status().ToString();
  return log.ok() ? ExtractBootFacts(*log) : BootFacts{};
}

BootFacts FactsOfFile(const std::string& name) { return FactsOf(ReadLog(name)); }

std::multiset<std::string> AnomalyReasons(const BootFacts& f) {
  std::multiset<std::string> out;
  for (const Anomaly& a : f.anomalies) out.insert(a.reason);
  return out;
}

std::vector<uint32_t> Indices(const std::vector<Measurement>& ms) {
  std::vector<uint32_t> out;
  for (const Measurement& m : ms) out.push_back(m.event_index);
  return out;
}

const SecureBootVariable* Var(const BootFacts& f, const std::string& name) {
  for (const SecureBootVariable& v : f.secure_boot_variables) {
    if (v.name == name) return &v;
  }
  return nullptr;
}

size_t SignatureCount(const SecureBootVariable& v) {
  size_t n = 0;
  for (const EfiSignatureList& l : v.signature_lists) n += l.signatures.size();
  return n;
}

// --- Real logs ---------------------------------------------------------------

TEST(BootFactsFiles, SecureBootStateOfEveryLog) {
  const std::map<std::string, SecureBootState> expected = {
      {"go-attestation_coreos_36_shielded_vm_no_secure_boot_eventlog.bin",
       SecureBootState::kDisabled},
      {"go-attestation_crypto_agile_eventlog.bin", SecureBootState::kDisabled},
      {"go-attestation_ebs_event_missing_eventlog.bin", SecureBootState::kDisabled},
      {"go-attestation_option_rom_eventlog.bin", SecureBootState::kEnabled},
      {"go-attestation_sb_cert_eventlog.bin", SecureBootState::kEnabled},
      {"go-attestation_short_no_action_eventlog.bin", SecureBootState::kNotMeasured},
      {"go-attestation_ubuntu_2104_shielded_vm_no_secure_boot_eventlog.bin",
       SecureBootState::kDisabled},
      {"rackgate-lab_ovmf-shim-grub-debian12-secureboot.bin", SecureBootState::kEnabled},
      {"tpm2-tools_event-arch-linux.bin", SecureBootState::kDisabled},
      {"tpm2-tools_event-bootorder.bin", SecureBootState::kDisabled},
      {"tpm2-tools_event-gce-ubuntu-2104-log.bin", SecureBootState::kDisabled},
      {"tpm2-tools_event-moklisttrusted.bin", SecureBootState::kEnabled},
      {"tpm2-tools_event-postcode.bin", SecureBootState::kEnabled},
      {"tpm2-tools_event-sd-boot-fedora37.bin", SecureBootState::kDisabled},
      {"tpm2-tools_event-uefi-sha1-log.bin", SecureBootState::kDisabled},
      {"tpm2-tools_event-uefiaction.bin", SecureBootState::kNotMeasured},
      {"tpm2-tools_event-uefiservices.bin", SecureBootState::kNotMeasured},
      {"tpm2-tools_event-uefivar.bin", SecureBootState::kEnabled},
      {"tpm2-tools_event.bin", SecureBootState::kNotMeasured},
  };
  for (const auto& [name, state] : expected) {
    SCOPED_TRACE(name);
    const BootFacts f = FactsOfFile(name);
    EXPECT_EQ(SecureBootStateName(f.secure_boot), std::string(SecureBootStateName(state)));
    // No real log here is relabelled or malformed.
    EXPECT_TRUE(f.anomalies.empty()) << f.anomalies.front().message;
    EXPECT_FALSE(f.uefi_debug_mode);
  }
}

TEST(BootFactsFiles, ArchLinuxCommandLineDoesNotMatchItsDigest) {
  // testdata/README.md: this log has an event whose digest does not
  // match its data — systemd-boot's PCR 8 command line, 365 bytes of UTF-16.
  const BootFacts f = FactsOfFile("tpm2-tools_event-arch-linux.bin");
  ASSERT_EQ(f.data_mismatches.size(), 1u);
  EXPECT_EQ(f.data_mismatches[0].event_index, 24u);
  EXPECT_EQ(f.data_mismatches[0].pcr, 8u);
  EXPECT_EQ(f.data_mismatches[0].type, kEvIpl);
  ASSERT_EQ(f.kernel_cmdlines.size(), 1u);
  EXPECT_EQ(f.kernel_cmdlines[0].source, "systemd-boot");
  EXPECT_FALSE(f.kernel_cmdlines[0].verified);
}

TEST(BootFactsFiles, DataMismatchesOnlyWhereExpected) {
  // Besides arch-linux, only shim's "Shim" authority events (a bare
  // certificate in a UEFI_VARIABLE_DATA whose lengths disagree) fail.
  const std::map<std::string, std::vector<uint32_t>> expected = {
      {"go-attestation_sb_cert_eventlog.bin", {12, 14}},
      {"tpm2-tools_event-postcode.bin", {40, 54}},
      {"tpm2-tools_event-arch-linux.bin", {24}},
  };
  for (const auto& e : fs::directory_iterator(EventLogDir())) {
    const std::string name = e.path().filename().string();
    SCOPED_TRACE(name);
    const BootFacts f = FactsOfFile(name);
    std::vector<uint32_t> got;
    for (const DataMismatch& m : f.data_mismatches) got.push_back(m.event_index);
    auto it = expected.find(name);
    EXPECT_EQ(got, it == expected.end() ? std::vector<uint32_t>{} : it->second);
  }
}

TEST(BootFactsFiles, CoreosFacts) {
  const BootFacts f =
      FactsOfFile("go-attestation_coreos_36_shielded_vm_no_secure_boot_eventlog.bin");
  // Signature counts cross-checked with an independent Python reader.
  ASSERT_NE(Var(f, "dbx"), nullptr);
  EXPECT_EQ(Var(f, "dbx")->signature_lists.size(), 4u);
  EXPECT_EQ(SignatureCount(*Var(f, "dbx")), 186u);
  EXPECT_EQ(SignatureCount(*Var(f, "db")), 2u);
  EXPECT_EQ(SignatureCount(*Var(f, "PK")), 1u);
  EXPECT_EQ(Var(f, "db")->signature_lists[0].type, kEfiCertX509Guid);

  ASSERT_EQ(f.boot_applications.size(), 2u);
  EXPECT_EQ(f.boot_applications[0].description, "\\EFI\\fedora\\shimx64.efi (946712 bytes)");
  EXPECT_EQ(f.boot_applications[1].event_index, 28u);
  EXPECT_NE(f.boot_applications[1].description.find("grubx64.efi"), std::string::npos);
  EXPECT_EQ(f.boot_applications[1].digests.at(kAlgSha256).size(), 32u);

  EXPECT_EQ(Indices(f.authorities), (std::vector<uint32_t>{25, 26}));  // SbatLevel, MokListTrusted
  ASSERT_EQ(f.kernel_cmdlines.size(), 1u);
  EXPECT_TRUE(f.kernel_cmdlines[0].verified);
  EXPECT_EQ(f.kernel_cmdlines[0].source, "grub");
  EXPECT_EQ(f.kernel_cmdlines[0].text.rfind("(hd0,gpt3)/ostree/fedora-coreos-", 0), 0u);
  EXPECT_NE(f.kernel_cmdlines[0].text.find("ignition.platform.id=gcp"), std::string::npos);

  ASSERT_EQ(f.separators.size(), 8u);
  std::set<uint32_t> pcrs;
  for (const Separator& s : f.separators) {
    EXPECT_EQ(s.kind, SeparatorKind::kNormal);
    pcrs.insert(s.pcr);
  }
  EXPECT_EQ(pcrs, (std::set<uint32_t>{0, 1, 2, 3, 4, 5, 6, 7}));
}

// The firmware lab's real chain (OVMF with Microsoft's keys, Secure Boot on,
// shim 15.8, Debian's signed grub and kernel; testdata/README.md): every
// fact read on PCRs 4, 7, 8 and 9, as `tpm2_eventlog` lists the events.
TEST(BootFactsFiles, FirmwareLabChain) {
  const BootFacts f = FactsOfFile("rackgate-lab_ovmf-shim-grub-debian12-secureboot.bin");
  EXPECT_EQ(f.secure_boot, SecureBootState::kEnabled);
  std::vector<std::string> names;
  for (const SecureBootVariable& v : f.secure_boot_variables) names.push_back(v.name);
  EXPECT_EQ(names, (std::vector<std::string>{"SecureBoot", "PK", "KEK", "db", "dbx"}));
  ASSERT_NE(Var(f, "db"), nullptr);
  EXPECT_EQ(SignatureCount(*Var(f, "db")), 2u);   // Microsoft's Windows PCA and UEFI CA
  EXPECT_EQ(SignatureCount(*Var(f, "dbx")), 1u);  // one placeholder hash
  // PCR 7 after the separator: the firmware's db entry that verified shim,
  // shim's SbatLevel, and shim's vendor certificate that verified grub.
  EXPECT_EQ(Indices(f.authorities), (std::vector<uint32_t>{31, 35, 37}));
  EXPECT_EQ(f.authorities[0].description.rfind("db: certificate (1556 bytes), owner 77fa9abd", 0), 0u);
  EXPECT_EQ(f.authorities[2].description.rfind("MokListRT: certificate (930 bytes)", 0), 0u);
  // PCR 4: shim, grub, and the kernel twice (grub's shim-lock check and the
  // load), one Authenticode hash.
  EXPECT_EQ(Indices(f.boot_applications), (std::vector<uint32_t>{32, 38, 50, 51}));
  EXPECT_EQ(f.boot_applications[2].digests.at(kAlgSha256), f.boot_applications[3].digests.at(kAlgSha256));
  ASSERT_EQ(f.kernel_cmdlines.size(), 1u);
  EXPECT_EQ(f.kernel_cmdlines[0].event_index, 52u);
  EXPECT_TRUE(f.kernel_cmdlines[0].verified);
  EXPECT_EQ(f.kernel_cmdlines[0].text,
            "/vmlinuz console=ttyS0 quiet panic=-1 rackgate.url=https://10.0.2.100:22623");
  // PCR 9: the files grub read, each by the SHA-256 of the file (sha256sum
  // of the ESP's grub.cfg, vmlinuz and initrd.img when the log was made).
  ASSERT_EQ(Indices(f.boot_files), (std::vector<uint32_t>{43, 49, 54}));
  EXPECT_EQ(f.boot_files[0].description, "(hd0)/EFI/debian/grub.cfg");
  EXPECT_EQ(f.boot_files[1].description, "/vmlinuz");
  EXPECT_EQ(f.boot_files[2].description, "/initrd.img");
  EXPECT_EQ(hex::Encode(f.boot_files[0].digests.at(kAlgSha256)).substr(0, 16), "6927d560ee8a5b7a");
  EXPECT_EQ(hex::Encode(f.boot_files[2].digests.at(kAlgSha256)).substr(0, 16), "4066e6d7b09b21f3");
  ASSERT_EQ(f.separators.size(), 8u);
  for (const Separator& s : f.separators) EXPECT_EQ(s.kind, SeparatorKind::kNormal);
  EXPECT_TRUE(f.anomalies.empty());
  EXPECT_TRUE(f.data_mismatches.empty());
}

TEST(BootFactsFiles, OptionRomsAndAuthorities) {
  const BootFacts f = FactsOfFile("go-attestation_option_rom_eventlog.bin");
  EXPECT_EQ(f.secure_boot, SecureBootState::kEnabled);
  EXPECT_EQ(Indices(f.option_roms), (std::vector<uint32_t>{11}));
  EXPECT_EQ(f.option_roms[0].type, kEvEfiBootServicesDriver);
  EXPECT_EQ(Indices(f.authorities), (std::vector<uint32_t>{10, 41}));
  EXPECT_EQ(Indices(f.boot_applications), (std::vector<uint32_t>{43}));
  EXPECT_NE(f.boot_applications[0].description.find("bootmgfw.efi"), std::string::npos);
}

TEST(BootFactsFiles, SystemdCommandLineOnPcr12) {
  const BootFacts f = FactsOfFile("tpm2-tools_event-sd-boot-fedora37.bin");
  ASSERT_EQ(f.kernel_cmdlines.size(), 2u);
  for (const KernelCmdline& k : f.kernel_cmdlines) {
    EXPECT_EQ(k.pcr, 12u);
    EXPECT_EQ(k.source, "systemd");
    EXPECT_TRUE(k.verified);
    EXPECT_EQ(k.text, " console=ttyS0 console=tty0 efi=debug ");
  }
}

TEST(BootFactsFiles, Sha1LogFacts) {
  const BootFacts f = FactsOfFile("tpm2-tools_event-uefi-sha1-log.bin");
  EXPECT_EQ(f.secure_boot, SecureBootState::kDisabled);
  EXPECT_EQ(f.separators.size(), 8u);
  ASSERT_EQ(f.boot_applications.size(), 2u);
  EXPECT_EQ(f.boot_applications[0].digests.count(kAlgSha1), 1u);
  EXPECT_EQ(f.boot_applications[0].digests.count(kAlgSha256), 0u);
}

// --- Synthetic logs ----------------------------------------------------------

BootFacts Facts(const EventLogBuilder& b) { return FactsOf(b.bytes()); }

TEST(BootFacts, SecureBootEnabled) {
  EventLogBuilder b;
  b.SecureBootConfig(1).Separator(7);
  const BootFacts f = Facts(b);
  EXPECT_EQ(f.secure_boot, SecureBootState::kEnabled);
  ASSERT_EQ(f.secure_boot_variables.size(), 5u);
  EXPECT_EQ(SignatureCount(*Var(f, "db")), 2u);
  EXPECT_EQ(Var(f, "db")->signature_lists[0].signatures[1].data, Bytes(32, 0xcd));
  EXPECT_TRUE(f.authorities.empty());
  EXPECT_TRUE(f.anomalies.empty());
  EXPECT_TRUE(f.data_mismatches.empty());
}

TEST(BootFacts, SecureBootDisabledAndAbsent) {
  EventLogBuilder off;
  off.SecureBootConfig(0).Separator(7);
  EXPECT_EQ(Facts(off).secure_boot, SecureBootState::kDisabled);

  EventLogBuilder absent;  // an empty SecureBoot variable: it did not exist
  absent
      .Add(7, kEvEfiVariableDriverConfig, UefiVariable(kEfiGlobalVariableGuid, "SecureBoot", {}))
      .Separator(7);
  EXPECT_EQ(Facts(absent).secure_boot, SecureBootState::kDisabled);

  EventLogBuilder odd;
  odd.Add(7, kEvEfiVariableDriverConfig,
          UefiVariable(kEfiGlobalVariableGuid, "SecureBoot", Bytes{2}))
      .Separator(7);
  const BootFacts f = Facts(odd);
  EXPECT_EQ(f.secure_boot, SecureBootState::kUnverifiable);
  EXPECT_EQ(AnomalyReasons(f).count("event_data_malformed"), 1u);
}

TEST(BootFacts, SecureBootVariableRelabelledOntoAnotherPcrIsNoFact) {
  // A SecureBoot=1 variable, correctly hashed, but extended into PCR 1 (which
  // the OS could have done): never Secure Boot state.
  EventLogBuilder b;
  b.Add(1, kEvEfiVariableDriverConfig,
        UefiVariable(kEfiGlobalVariableGuid, "SecureBoot", Bytes{1}))
      .Separator(7);
  const BootFacts f = Facts(b);
  EXPECT_EQ(f.secure_boot, SecureBootState::kNotMeasured);
  EXPECT_TRUE(f.secure_boot_variables.empty());
  EXPECT_EQ(AnomalyReasons(f).count("secure_boot_variable_outside_pcr7"), 1u);
}

TEST(BootFacts, SecureBootConfigAfterSeparatorIsNoFact) {
  EventLogBuilder b;
  b.SecureBootConfig(0).Separator(7).Add(
      7, kEvEfiVariableDriverConfig, UefiVariable(kEfiGlobalVariableGuid, "SecureBoot", Bytes{1}));
  const BootFacts f = Facts(b);
  EXPECT_EQ(f.secure_boot, SecureBootState::kDisabled);
  EXPECT_EQ(AnomalyReasons(f).count("secure_boot_config_after_separator"), 1u);
  // Whatever reaches PCR 7 after the separator is judged as an authority.
  EXPECT_EQ(f.authorities.size(), 1u);
}

TEST(BootFacts, SecureBootVariableWhoseDigestDoesNotMatch) {
  // The data says SecureBoot=1; the digest is of SecureBoot=0.
  EventLogBuilder b;
  b.Measure(7, kEvEfiVariableDriverConfig,
            UefiVariable(kEfiGlobalVariableGuid, "SecureBoot", Bytes{0}),
            UefiVariable(kEfiGlobalVariableGuid, "SecureBoot", Bytes{1}))
      .Separator(7);
  const BootFacts f = Facts(b);
  EXPECT_EQ(f.secure_boot, SecureBootState::kUnverifiable);
  EXPECT_TRUE(f.secure_boot_variables.empty());
  ASSERT_EQ(f.data_mismatches.size(), 1u);
  EXPECT_EQ(f.data_mismatches[0].event_index, 1u);
}

TEST(BootFacts, SecureBootMeasuredTwice) {
  EventLogBuilder b;
  b.SecureBootConfig(1)
      .Add(7, kEvEfiVariableDriverConfig,
           UefiVariable(kEfiGlobalVariableGuid, "SecureBoot", Bytes{1}))
      .Separator(7);
  const BootFacts f = Facts(b);
  EXPECT_EQ(f.secure_boot, SecureBootState::kUnverifiable);
  EXPECT_EQ(AnomalyReasons(f).count("secure_boot_variable_duplicate"), 1u);
}

TEST(BootFacts, SecureBootVariableWithForeignVendor) {
  EventLogBuilder b;
  b.Add(7, kEvEfiVariableDriverConfig,
        UefiVariable(kEfiImageSecurityDatabaseGuid, "SecureBoot", Bytes{1}))
      .Separator(7);
  const BootFacts f = Facts(b);
  EXPECT_EQ(f.secure_boot, SecureBootState::kNotMeasured);
  EXPECT_EQ(AnomalyReasons(f).count("secure_boot_variable_bad_vendor"), 1u);
}

TEST(BootFacts, MalformedSignatureListInDbIsReported) {
  Bytes db = SignatureList(kEfiCertSha256Guid, {}, {Sha256Signature(2, 0xcc)});
  db.pop_back();  // no longer a whole list
  EventLogBuilder b;
  b.Add(7, kEvEfiVariableDriverConfig, UefiVariable(kEfiGlobalVariableGuid, "SecureBoot", {1}))
      .Add(7, kEvEfiVariableDriverConfig, UefiVariable(kEfiImageSecurityDatabaseGuid, "db", db))
      .Separator(7);
  const BootFacts f = Facts(b);
  EXPECT_EQ(f.secure_boot, SecureBootState::kEnabled);
  ASSERT_NE(Var(f, "db"), nullptr);
  EXPECT_FALSE(Var(f, "db")->signature_lists_valid);
  EXPECT_TRUE(Var(f, "db")->signature_lists.empty());
  EXPECT_EQ(AnomalyReasons(f).count("efi_signature_list_malformed"), 1u);
}

TEST(BootFacts, RelabelledBootApplicationStillCounts) {
  // A boot application's digest relabelled as an EV_EFI_ACTION string: the
  // string does not hash to the digest, so the digest is still judged as a
  // boot application.
  EventLogBuilder b;
  b.Measure(4, kEvEfiAction, Str("evil.efi contents"), Str("Calling EFI Application"))
      .Add(4, kEvEfiAction, Str("Calling EFI Application from Boot Option"))
      .Measure(4, kEvEfiBootServicesApplication, Str("shim"),
               testing::ImageLoadEvent("\\EFI\\BOOT\\BOOTX64.EFI"));
  const BootFacts f = Facts(b);
  EXPECT_EQ(Indices(f.boot_applications), (std::vector<uint32_t>{1, 3}));
  EXPECT_EQ(f.boot_applications[1].description, "\\EFI\\BOOT\\BOOTX64.EFI (4096 bytes)");
  ASSERT_EQ(f.data_mismatches.size(), 1u);
  EXPECT_EQ(f.data_mismatches[0].event_index, 1u);
}

TEST(BootFacts, BootApplicationOnPcr7IsAnAnomalyAndAnAuthority) {
  EventLogBuilder b;
  b.SecureBootConfig(1).Separator(7).Measure(7, kEvEfiBootServicesApplication, Str("x"),
                                             testing::ImageLoadEvent("\\x.efi"));
  const BootFacts f = Facts(b);
  EXPECT_EQ(f.secure_boot, SecureBootState::kEnabled);
  EXPECT_EQ(AnomalyReasons(f).count("event_type_unexpected_for_pcr"), 1u);
  EXPECT_EQ(f.authorities.size(), 1u);
  EXPECT_TRUE(f.boot_applications.empty());
}

TEST(BootFacts, UnknownEventType) {
  EventLogBuilder b;
  b.Add(4, 0x12345678, Str("?"));
  const BootFacts f = Facts(b);
  EXPECT_EQ(AnomalyReasons(f).count("event_type_unknown"), 1u);
  EXPECT_EQ(f.boot_applications.size(), 1u);
}

TEST(BootFacts, Separators) {
  EventLogBuilder b;
  b.Separator(0).Separator(1, 1).Measure(2, kEvSeparator, Str("other"), Bytes(4, 0));
  b.Add(3, kEvSeparator, Bytes(5, 0)).Separator(4, 0xffffffff).Separator(4);
  const BootFacts f = Facts(b);
  ASSERT_EQ(f.separators.size(), 6u);
  EXPECT_EQ(f.separators[0].kind, SeparatorKind::kNormal);
  EXPECT_EQ(f.separators[1].kind, SeparatorKind::kError);
  EXPECT_EQ(f.separators[1].value, 1u);
  EXPECT_EQ(f.separators[2].kind, SeparatorKind::kMalformed);  // digest mismatch
  EXPECT_EQ(f.separators[3].kind, SeparatorKind::kMalformed);  // 5 bytes
  EXPECT_EQ(f.separators[4].kind, SeparatorKind::kError);
  EXPECT_EQ(AnomalyReasons(f).count("separator_duplicate"), 1u);
  // An unverified separator on PCR 2 is judged as an option ROM.
  EXPECT_EQ(Indices(f.option_roms), (std::vector<uint32_t>{3}));
}

TEST(BootFacts, GrubCommandLine) {
  const std::string cmdline = "/vmlinuz root=/dev/sda1 ro";
  EventLogBuilder b;
  b.Measure(8, kEvIpl, Str(cmdline), Str("kernel_cmdline: " + cmdline + std::string(1, '\0')));
  // Tampered: the digest is of another command line.
  b.Measure(8, kEvIpl, Str(cmdline + " init=/bin/sh"),
            Str("kernel_cmdline: " + cmdline + std::string(1, '\0')));
  // On PCR 9, where grub never puts it.
  b.Measure(9, kEvIpl, Str(cmdline), Str("kernel_cmdline: " + cmdline + std::string(1, '\0')));
  // Text after a NUL: the kernel would not see it.
  b.Measure(8, kEvIpl, Str(std::string_view("a\0b", 3)),
            Str(std::string_view("kernel_cmdline: a\0b\0", 20)));
  const BootFacts f = Facts(b);
  ASSERT_EQ(f.kernel_cmdlines.size(), 3u);
  EXPECT_TRUE(f.kernel_cmdlines[0].verified);
  EXPECT_EQ(f.kernel_cmdlines[0].text, cmdline);
  EXPECT_EQ(f.kernel_cmdlines[0].source, "grub");
  EXPECT_FALSE(f.kernel_cmdlines[1].verified);
  EXPECT_FALSE(f.kernel_cmdlines[2].verified);
  const auto reasons = AnomalyReasons(f);
  EXPECT_EQ(reasons.count("kernel_cmdline_outside_pcr8"), 1u);
  EXPECT_EQ(reasons.count("event_data_malformed"), 1u);
}

TEST(BootFacts, SystemdTaggedCommandLine) {
  const Bytes cmdline = testing::Utf16("root=/dev/vda ro", true);
  Bytes tagged;
  PutU32(&tagged, kLoadOptionsEventTagId);
  PutU32(&tagged, static_cast<uint32_t>(cmdline.size()));
  testing::Put(&tagged, cmdline);
  EventLogBuilder b;
  b.Measure(12, kEvEventTag, cmdline, tagged);
  // A credentials initrd measured by systemd-stub: not a command line.
  b.Measure(12, kEvIpl, Str("cpio archive"), testing::Utf16("Credentials initrd", true));
  const BootFacts f = Facts(b);
  ASSERT_EQ(f.kernel_cmdlines.size(), 1u);
  EXPECT_TRUE(f.kernel_cmdlines[0].verified);
  EXPECT_EQ(f.kernel_cmdlines[0].text, "root=/dev/vda ro");
}

// Everything measured on PCR 9 is a boot file, whatever its type: grub's
// paths, the Linux EFI stub's initrd, a relabelled image. The stub's load
// options (the command line) are never shown, only their size.
TEST(BootFacts, EveryPcr9MeasurementIsABootFile) {
  const Bytes cmdline = testing::Utf16("root=/dev/vda luks.key=SECRET", true);
  Bytes options;
  PutU32(&options, kLoadOptionsEventTagId);
  PutU32(&options, static_cast<uint32_t>(cmdline.size()));
  testing::Put(&options, cmdline);
  Bytes initrd;
  PutU32(&initrd, kInitrdEventTagId);
  PutU32(&initrd, 12);
  testing::Put(&initrd, Str("Linux initrd"));
  EventLogBuilder b;
  b.Measure(9, kEvIpl, Str("grub.cfg contents"), Str(std::string_view("/boot/grub/grub.cfg\0", 20)));
  b.Measure(9, kEvEventTag, cmdline, options);
  b.Measure(9, kEvEventTag, Str("initrd contents"), initrd);
  b.Measure(9, kEvEfiBootServicesApplication, Str("image"), testing::ImageLoadEvent("\\evil.efi"));
  b.Separator(9);  // a verified separator says what it extended: not a file
  const BootFacts f = Facts(b);
  ASSERT_EQ(f.boot_files.size(), 4u);
  EXPECT_EQ(f.boot_files[0].description, "/boot/grub/grub.cfg");
  EXPECT_EQ(f.boot_files[1].description, "Linux EFI stub load options (" + std::to_string(cmdline.size()) + " bytes)");
  EXPECT_EQ(f.boot_files[2].description, "Linux EFI stub initrd");
  EXPECT_EQ(f.boot_files[3].type, kEvEfiBootServicesApplication);
  for (const Measurement& m : f.boot_files) EXPECT_EQ(m.description.find("SECRET"), std::string::npos);
  EXPECT_TRUE(f.kernel_cmdlines.empty());  // the stub's PCR 9 options are no command line fact
  EXPECT_TRUE(f.boot_applications.empty());
}

// --- systemd: PCR 12 command lines, PCR 11 UKI sections -------------------

// The real sd-boot log cut anywhere inside its PCR 12 events: the parser
// refuses it as truncated, never yields a shorter command line.
TEST(BootFactsFiles, SystemdLogTruncatedInsidePcr12) {
  const Bytes bytes = ReadLog("tpm2-tools_event-sd-boot-fedora37.bin");
  auto log = ParseEventLog(bytes);
  ASSERT_TRUE(log.ok());
  size_t cuts = 0;
  for (size_t i = 0; i + 1 < log->events.size(); ++i) {
    const Event& ev = log->events[i];
    if (ev.pcr != 12) continue;
    for (size_t end = ev.offset + 1; end < log->events[i + 1].offset; ++end) {
      auto cut = ParseEventLog(std::span<const uint8_t>(bytes).first(end));
      ASSERT_FALSE(cut.ok()) << "cut at " << end;
      EXPECT_EQ(cut.status().reason(), "eventlog_truncated");
      ++cuts;
    }
  }
  EXPECT_GT(cuts, 100u);
}

// The real PCR 12 event with its data cut short (its digest still of the
// whole): never a command line, since an unverified PCR 12 EV_IPL may be an
// initrd systemd-stub measured.
TEST(BootFactsFiles, SystemdPcr12EventWithShortDataIsNotACommandLine) {
  auto log = ParseEventLog(ReadLog("tpm2-tools_event-sd-boot-fedora37.bin"));
  ASSERT_TRUE(log.ok());
  const Event* pcr12 = nullptr;
  for (const Event& ev : log->events) {
    if (ev.pcr == 12 && pcr12 == nullptr) pcr12 = &ev;
  }
  ASSERT_NE(pcr12, nullptr);
  ASSERT_EQ(pcr12->type, kEvIpl);
  for (size_t n = 0; n < pcr12->data.size(); ++n) {
    SCOPED_TRACE(n);
    EventLogBuilder b;
    b.Raw(12, kEvIpl, {{kAlgSha256, pcr12->digests.at(kAlgSha256)}},
          Bytes(pcr12->data.begin(), pcr12->data.begin() + static_cast<long>(n)));
    const BootFacts f = Facts(b);
    EXPECT_TRUE(f.kernel_cmdlines.empty());
    EXPECT_EQ(f.data_mismatches.size(), 1u);
  }
}

TEST(BootFacts, SystemdCommandLineHashedWithoutItsNul) {
  // systemd's documentation: the digest covers the UTF-16 text without its
  // NUL; the data logged has it.
  EventLogBuilder b;
  b.Measure(12, kEvIpl, testing::Utf16("root=/dev/vda ro"), testing::Utf16("root=/dev/vda ro", true));
  const BootFacts f = Facts(b);
  ASSERT_EQ(f.kernel_cmdlines.size(), 1u);
  EXPECT_TRUE(f.kernel_cmdlines[0].verified);
  EXPECT_EQ(f.kernel_cmdlines[0].text, "root=/dev/vda ro");
  EXPECT_TRUE(f.data_mismatches.empty());
}

// What systemd-stub logs for one UKI section (TPM2_PCR_MEASUREMENTS.md): the
// name, data UTF-16 with NUL and digest of the ASCII name with NUL; then the
// contents, data the same UTF-16 name and digest of the contents.
void UkiSectionEvents(EventLogBuilder* b, const std::string& name, const Bytes& contents) {
  b->Measure(11, kEvIpl, Str(std::string_view(name.c_str(), name.size() + 1)),
             testing::Utf16(name, true));
  b->Measure(11, kEvIpl, contents, testing::Utf16(name, true));
}

TEST(BootFacts, UkiSectionsFromTheSpecLayout) {
  // No log in testdata/ was booted from a UKI (the sd-boot one has no PCR 11
  // event), so these are built as systemd-stub writes them.
  EventLogBuilder b;
  UkiSectionEvents(&b, ".linux", Str("kernel image"));
  UkiSectionEvents(&b, ".osrel", Str("ID=fedora\n"));
  UkiSectionEvents(&b, ".cmdline", Str("root=/dev/vda ro"));
  UkiSectionEvents(&b, ".initrd", Str("cpio"));
  const BootFacts f = Facts(b);
  EXPECT_TRUE(f.anomalies.empty());
  EXPECT_TRUE(f.uki_unrecognized.empty());
  EXPECT_TRUE(f.data_mismatches.empty());
  ASSERT_EQ(f.uki_sections.size(), 4u);
  const std::vector<std::string> names = {".linux", ".osrel", ".cmdline", ".initrd"};
  for (size_t i = 0; i < 4; ++i) {
    EXPECT_EQ(f.uki_sections[i].name, names[i]);
    EXPECT_EQ(f.uki_sections[i].name_event_index, 1 + 2 * i);
    EXPECT_EQ(f.uki_sections[i].event_index, 2 + 2 * i);
  }
  EXPECT_EQ(f.uki_sections[0].digests.at(kAlgSha256), testing::Digest(kAlgSha256, Str("kernel image")));
  // The .cmdline section is a command line known by digest only.
  ASSERT_EQ(f.kernel_cmdlines.size(), 1u);
  EXPECT_EQ(f.kernel_cmdlines[0].source, "uki");
  EXPECT_EQ(f.kernel_cmdlines[0].pcr, 11u);
  EXPECT_TRUE(f.kernel_cmdlines[0].by_digest);
  EXPECT_FALSE(f.kernel_cmdlines[0].verified);
  EXPECT_EQ(f.kernel_cmdlines[0].digests.at(kAlgSha256),
            testing::Digest(kAlgSha256, Str("root=/dev/vda ro")));
}

TEST(BootFacts, MalformedUkiEventsAreNotSections) {
  const std::string linux_nul(".linux\0", 7);
  {
    // A section name whose digest is not of the name: not a section.
    EventLogBuilder b;
    b.Measure(11, kEvIpl, Str(".linuy"), testing::Utf16(".linux", true));
    b.Measure(11, kEvIpl, Str("kernel"), testing::Utf16(".linux", true));
    const BootFacts f = Facts(b);
    EXPECT_TRUE(f.uki_sections.empty());
    EXPECT_EQ(Indices(f.uki_unrecognized), (std::vector<uint32_t>{1, 2}));
  }
  {
    // A name with no contents after it.
    EventLogBuilder b;
    UkiSectionEvents(&b, ".linux", Str("kernel"));
    b.Measure(11, kEvIpl, Str(linux_nul), testing::Utf16(".linux", true));
    const BootFacts f = Facts(b);
    EXPECT_EQ(f.uki_sections.size(), 1u);
    EXPECT_EQ(Indices(f.uki_unrecognized), (std::vector<uint32_t>{3}));
    EXPECT_EQ(AnomalyReasons(f).count("uki_section_incomplete"), 1u);
  }
  {
    // Contents logged under another name: the verified name wins, and the
    // relabelling is reported.
    EventLogBuilder b;
    b.Measure(11, kEvIpl, Str(linux_nul), testing::Utf16(".linux", true));
    b.Measure(11, kEvIpl, Str("kernel"), testing::Utf16(".osrel", true));
    const BootFacts f = Facts(b);
    ASSERT_EQ(f.uki_sections.size(), 1u);
    EXPECT_EQ(f.uki_sections[0].name, ".linux");
    EXPECT_EQ(AnomalyReasons(f).count("uki_section_mislabelled"), 1u);
  }
  {
    // Names that are not PE section names, even with a matching digest.
    for (const std::string name : {"linux", ".", ".toolongx", ".li nux"}) {
      SCOPED_TRACE(name);
      EventLogBuilder b;
      UkiSectionEvents(&b, name, Str("kernel"));
      const BootFacts f = Facts(b);
      EXPECT_TRUE(f.uki_sections.empty());
      EXPECT_EQ(f.uki_unrecognized.size(), 2u);
    }
  }
  // Every truncation of a name event's data: never a section name.
  const Bytes name16 = testing::Utf16(".cmdline", true);
  for (size_t n = 0; n < name16.size(); ++n) {
    SCOPED_TRACE(n);
    EventLogBuilder b;
    b.Measure(11, kEvIpl, Str(std::string_view(".cmdline\0", 9)),
              Bytes(name16.begin(), name16.begin() + static_cast<long>(n)));
    b.Measure(11, kEvIpl, Str("ro"), name16);
    const BootFacts f = Facts(b);
    EXPECT_TRUE(f.uki_sections.empty());
    EXPECT_TRUE(f.kernel_cmdlines.empty());
  }
  // Windows' PCR 11 events (BitLocker's EV_COMPACT_HASH) are not UKI
  // sections and not anomalies either.
  const BootFacts win = FactsOfFile("go-attestation_option_rom_eventlog.bin");
  EXPECT_TRUE(win.uki_sections.empty());
  EXPECT_EQ(win.uki_unrecognized.size(), 2u);
}

TEST(BootFacts, UefiDebugMode) {
  EventLogBuilder b;
  b.Add(7, kEvEfiAction, Str("UEFI Debug Mode")).SecureBootConfig(1).Separator(7);
  const BootFacts f = Facts(b);
  EXPECT_TRUE(f.uefi_debug_mode);
  EXPECT_EQ(AnomalyReasons(f).count("pcr7_action"), 1u);
  EXPECT_EQ(f.secure_boot, SecureBootState::kEnabled);
}

// --- EFI_SIGNATURE_LIST ------------------------------------------------------

// Regression for the bug class where a reader ignored SignatureHeaderSize and
// read the header as signatures, letting attacker-chosen bytes into the
// trusted db list.
TEST(EfiSignatureList, SignatureHeaderSizeIsNeverReadAsSignatures) {
  // A 48-byte header that looks exactly like a SHA-256 signature entry.
  const Bytes header = Sha256Signature(0x66, 0xee);
  const Bytes list =
      SignatureList(kEfiCertSha256Guid, header, {Sha256Signature(1, 0x11), Sha256Signature(1, 0x22)});
  auto lists = ParseEfiSignatureLists(list);
  ASSERT_TRUE(lists.ok()) << lists.status().ToString();
  ASSERT_EQ(lists->size(), 1u);
  EXPECT_EQ((*lists)[0].header, header);
  ASSERT_EQ((*lists)[0].signatures.size(), 2u);
  for (const EfiSignatureData& s : (*lists)[0].signatures) {
    EXPECT_NE(s.data, Bytes(32, 0xee));
  }
  EXPECT_EQ((*lists)[0].signatures[0].data, Bytes(32, 0x11));
  EXPECT_EQ((*lists)[0].signatures[1].owner.bytes[0], 1);

  // A header that claims more than the list holds is refused, not clamped.
  Bytes big = list;
  big[20] = 0xff;  // SignatureHeaderSize low byte
  EXPECT_EQ(ParseEfiSignatureLists(big).status().reason(), "efi_signature_list_malformed");
}

TEST(EfiSignatureList, TwoListsAndTruncation) {
  const Bytes a = SignatureList(kEfiCertSha256Guid, {}, {Sha256Signature(1, 1)});
  Bytes cert(16, 9);
  cert.insert(cert.end(), 100, 0x30);
  const Bytes b = SignatureList(kEfiCertX509Guid, {}, {cert});
  Bytes both = a;
  testing::Put(&both, b);
  auto ok = ParseEfiSignatureLists(both);
  ASSERT_TRUE(ok.ok());
  ASSERT_EQ(ok->size(), 2u);
  EXPECT_EQ((*ok)[1].signatures[0].data.size(), 100u);
  for (size_t n = 0; n < both.size(); ++n) {
    SCOPED_TRACE(n);
    auto r = ParseEfiSignatureLists(std::span<const uint8_t>(both).first(n));
    if (n == 0 || n == a.size()) {
      EXPECT_TRUE(r.ok());
    } else {
      EXPECT_EQ(r.status().reason(), "efi_signature_list_malformed");
    }
  }
}

TEST(EfiSignatureList, MalformedPrefixes) {
  const Bytes good = SignatureList(kEfiCertSha256Guid, {}, {Sha256Signature(1, 1)});
  auto with = [&](size_t offset, uint32_t v) {
    Bytes b = good;
    for (size_t i = 0; i < 4; ++i) b.at(offset + i) = static_cast<uint8_t>(v >> (8 * i));
    return b;
  };
  const std::vector<Bytes> bad = {
      with(16, 27),          // SignatureListSize below its own header
      with(16, 0xffffffff),  // SignatureListSize past the data
      with(20, 1),           // SignatureHeaderSize leaves 47 bytes of signatures
      with(24, 16),          // SignatureSize with no data
      with(24, 0),           // SignatureSize zero (no division by it)
      with(24, 64),          // SHA-256 entries are 48 bytes
  };
  for (size_t i = 0; i < bad.size(); ++i) {
    SCOPED_TRACE(i);
    EXPECT_EQ(ParseEfiSignatureLists(bad[i]).status().reason(), "efi_signature_list_malformed");
  }
}

TEST(EfiSignatureList, SignatureCountIsBounded) {
  // 16385 minimal entries of an unknown (variable-size) type, 17 bytes each.
  EfiGuid other;
  other.bytes.fill(0x42);
  std::vector<Bytes> sigs(kMaxEfiSignatures + 1, Bytes(17, 0));
  EXPECT_EQ(ParseEfiSignatureLists(SignatureList(other, {}, sigs)).status().reason(),
            "efi_signature_list_malformed");
  sigs.pop_back();
  EXPECT_TRUE(ParseEfiSignatureLists(SignatureList(other, {}, sigs)).ok());
}

// --- UEFI_VARIABLE_DATA, image load events, device paths ---------------------

TEST(UefiVariableData, ParsesAndRefusesEveryPrefix) {
  const Bytes v = UefiVariable(kEfiGlobalVariableGuid, "SecureBoot", Bytes{1});
  auto ok = ParseUefiVariableData(v);
  ASSERT_TRUE(ok.ok());
  EXPECT_EQ(ok->name, "SecureBoot");
  EXPECT_EQ(ok->vendor, kEfiGlobalVariableGuid);
  EXPECT_EQ(ok->vendor.ToString(), "8be4df61-93ca-11d2-aa0d-00e098032b8c");
  EXPECT_EQ(ok->data, Bytes{1});
  for (size_t n = 0; n < v.size(); ++n) {
    EXPECT_EQ(ParseUefiVariableData(std::span<const uint8_t>(v).first(n)).status().reason(),
              "uefi_variable_malformed")
        << n;
  }
  Bytes trailing = v;
  trailing.push_back(0);
  EXPECT_FALSE(ParseUefiVariableData(trailing).ok());
}

TEST(UefiVariableData, HugeLengthsDoNotWrap) {
  for (uint64_t name_len : {uint64_t{1} << 63, ~uint64_t{0}, uint64_t{0x8000000000000001}}) {
    Bytes v(kEfiGlobalVariableGuid.bytes.begin(), kEfiGlobalVariableGuid.bytes.end());
    PutU64(&v, name_len);
    PutU64(&v, 0 - name_len * 2);  // name_len*2 + data_len wraps to 0
    v.insert(v.end(), 8, 'A');
    EXPECT_FALSE(ParseUefiVariableData(v).ok());
  }
}

TEST(UefiImageLoadEvent, PathAndMalformed) {
  const Bytes ev = testing::ImageLoadEvent("\\EFI\\fedora\\shimx64.efi", 946712);
  auto img = ParseUefiImageLoadEvent(ev);
  ASSERT_TRUE(img.ok());
  EXPECT_EQ(img->image_length, 946712u);
  auto path = DevicePathFilePath(img->device_path);
  ASSERT_TRUE(path.ok());
  EXPECT_EQ(*path, "\\EFI\\fedora\\shimx64.efi");
  for (size_t n = 0; n < ev.size(); ++n) {
    EXPECT_FALSE(ParseUefiImageLoadEvent(std::span<const uint8_t>(ev).first(n)).ok()) << n;
  }
  // A device path node shorter than its own header.
  EXPECT_FALSE(DevicePathFilePath(Bytes{4, 4, 2, 0}).ok());
  EXPECT_FALSE(DevicePathFilePath(Bytes{4, 4, 9, 0, 'a'}).ok());
  // Two file-path nodes join with one backslash.
  Bytes two;
  for (std::string_view part : {"\\EFI", "BOOT.EFI"}) {
    const Bytes name = testing::Utf16(part, true);
    two.insert(two.end(), {4, 4});
    testing::PutU16(&two, static_cast<uint16_t>(4 + name.size()));
    testing::Put(&two, name);
  }
  EXPECT_EQ(*DevicePathFilePath(two), "\\EFI\\BOOT.EFI");
}

TEST(DescribeEvent, EscapesAndBounds) {
  Event ev;
  ev.type = kEvIpl;
  ev.pcr = 9;
  ev.data = Str("\x1b[31mred\x1b[0m");
  // Not text (ESC), so only its size is shown.
  EXPECT_EQ(DescribeEvent(ev), "12 bytes");
  ev.data = testing::Utf16("\x1b[2Jcleared", true);
  const std::string s = DescribeEvent(ev);
  EXPECT_EQ(s, "\\x1b[2Jcleared");
  ev.data = Str(std::string(1000, 'a'));
  EXPECT_EQ(DescribeEvent(ev).size(), kMaxDescriptionChars);
  for (char c : DescribeEvent(ev)) EXPECT_TRUE(c >= 0x20 && c < 0x7f);

  ev.type = kEvSeparator;
  ev.data = Bytes{0, 0, 0, 0};
  EXPECT_EQ(DescribeEvent(ev), "00000000 (normal)");
  ev.type = kEvEfiVariableDriverConfig;
  ev.data = UefiVariable(kEfiGlobalVariableGuid, "SecureBoot", Bytes{1});
  EXPECT_EQ(DescribeEvent(ev), "SecureBoot = 1");
}

// --- Relabelled events (issue 40): only digests decide ------------------------
//
// The event type is not measured. Each case takes a real measurement of the
// firmware lab's log (OVMF, shim, grub, Debian 12, Secure Boot) and forges
// the log as a machine would to hide it: another type, and where that type's
// data is covered by its digest, data that hashes to it. The measurement
// still counts as what its PCR holds, and the forgery is an anomaly that a
// policy reading the PCR refuses (boot_policy_test.cc, Evaluate.Relabelled*).
// EV_NO_ACTION extends nothing, so the replay catches it
// (Evaluate.RelabelledAsNoActionBreaksTheReplay).

constexpr char kFirmwareLab[] = "rackgate-lab_ovmf-shim-grub-debian12-secureboot.bin";
constexpr uint32_t kUnknownEventType = 0x0000ff42;
const std::vector<uint32_t> kRelabelTypes = {kEvAction, kEvEfiAction, kEvEventTag,
                                             kUnknownEventType};

EventLog ParsedFile(const std::string& name) {
  auto log = ParseEventLog(ReadLog(name));
  if (!log.ok()) throw std::runtime_error(log.status().ToString());
  return *std::move(log);
}

// Anomalies that mark an event on `pcr` as relabelled.
size_t RelabelAnomalies(const BootFacts& f, uint32_t pcr) {
  return std::count_if(f.anomalies.begin(), f.anomalies.end(), [&](const Anomaly& a) {
    return a.pcr == pcr && (a.reason == "event_relabelled" || a.reason == "event_type_unknown");
  });
}

bool HasMeasurement(const std::vector<Measurement>& ms, uint32_t index, const Bytes& measured) {
  return std::any_of(ms.begin(), ms.end(), [&](const Measurement& m) {
    return m.event_index == index &&
           m.digests.at(kAlgSha256) == testing::Digest(kAlgSha256, measured);
  });
}

TEST(BootFactsRelabelled, FirmwareLabLogIndicesAreWhatTheCasesSay) {
  const BootFacts f = FactsOfFile(kFirmwareLab);
  EXPECT_EQ(Indices(f.boot_files), (std::vector<uint32_t>{43, 49, 54}));
  EXPECT_EQ(Indices(f.authorities), (std::vector<uint32_t>{31, 35, 37}));
  EXPECT_EQ(Indices(f.boot_applications), (std::vector<uint32_t>{32, 38, 50, 51}));
  ASSERT_EQ(f.kernel_cmdlines.size(), 1u);
  EXPECT_EQ(f.kernel_cmdlines[0].event_index, 52u);
  EXPECT_EQ(f.secure_boot_variables.front().event_index, 4u);
  EXPECT_EQ(f.secure_boot_variables.front().name, "SecureBoot");
}

// Event `index` of the firmware lab's log logged under each relabelling,
// with `data`, its digests those of `measured` (else as logged): still one
// of `facts` by its digest, and one relabel anomaly on `pcr`.
void ExpectCountedWhateverItsType(uint32_t index, uint32_t pcr, const Bytes& data,
                                  const std::optional<Bytes>& measured,
                                  std::vector<Measurement> BootFacts::*facts) {
  const EventLog lab = ParsedFile(kFirmwareLab);
  for (uint32_t type : kRelabelTypes) {
    SCOPED_TRACE(EventTypeName(type));
    const BootFacts f = FactsOf(testing::Relabelled(lab, index, type, data, measured));
    EXPECT_TRUE(HasMeasurement(f.*facts, index, measured.value_or(data)));
    EXPECT_EQ(RelabelAnomalies(f, pcr), 1u);
  }
}

TEST(BootFactsRelabelled, BootFileCountsWhateverItsType) {
  // An initramfs nobody allowed, measured by grub as H(file) on PCR 9 and
  // logged as an action whose data is the file: its digest verifies.
  const Bytes file = Str("an initramfs nobody allowed");
  ExpectCountedWhateverItsType(54, 9, file, file, &BootFacts::boot_files);
  // As grub logs it: counted, and nothing anomalous.
  const BootFacts honest =
      FactsOf(testing::Relabelled(ParsedFile(kFirmwareLab), 54, kEvIpl, Str("/initrd.img"), file));
  EXPECT_TRUE(HasMeasurement(honest.boot_files, 54, file));
  EXPECT_TRUE(honest.anomalies.empty());
}

TEST(BootFactsRelabelled, AuthorityCountsWhateverItsType) {
  // The firmware's db authority that verified shim (UEFI_VARIABLE_DATA,
  // digest of the data) logged as an action with the same data.
  ExpectCountedWhateverItsType(31, 7, ParsedFile(kFirmwareLab).events.at(31).data, std::nullopt,
                               &BootFacts::authorities);
}

TEST(BootFactsRelabelled, BootApplicationCountsWhateverItsType) {
  const Bytes image = Str("an application nobody allowed");
  ExpectCountedWhateverItsType(50, 4, image, image, &BootFacts::boot_applications);
}

TEST(BootFactsRelabelled, AuthorityRelabelledAsSecureBootConfigurationCounts) {
  // An authority logged before PCR 7's separator as configuration: its data
  // names "db", which the firmware measured already. A second db accounts for
  // nothing and leaves the configuration unknown.
  EventLogBuilder b;
  b.SecureBootConfig(1)
      .Add(7, kEvEfiVariableDriverConfig,
           UefiVariable(kEfiImageSecurityDatabaseGuid, "db", Sha256Signature(9, 0x99)))
      .Separator(7);
  const BootFacts f = Facts(b);
  EXPECT_EQ(Indices(f.authorities), (std::vector<uint32_t>{6}));
  EXPECT_EQ(f.secure_boot, SecureBootState::kUnverifiable);
  EXPECT_EQ(AnomalyReasons(f).count("secure_boot_variable_duplicate"), 1u);
  EXPECT_EQ(Var(f, "db")->event_index, 4u);
}

TEST(BootFactsRelabelled, CommandLineRelabelledIsNoCommandLineAndAnAnomaly) {
  // grub's "kernel_cmdline: " event's digest is of the text after the
  // prefix: logged as an action with that text, it verifies.
  const EventLog lab = ParsedFile(kFirmwareLab);
  const std::string text = "/vmlinuz console=ttyS0 quiet panic=-1 rackgate.url=https://10.0.2.100:22623";
  auto forged = ParseEventLog(testing::Relabelled(lab, 52, kEvAction, Str(text)));
  ASSERT_TRUE(forged.ok());
  ASSERT_EQ(CheckEventData(forged->events.at(52)), EventDataCheck::kMatches);
  for (uint32_t type : kRelabelTypes) {
    SCOPED_TRACE(EventTypeName(type));
    const BootFacts f = FactsOf(testing::Relabelled(lab, 52, type, Str(text)));
    EXPECT_TRUE(f.kernel_cmdlines.empty());
    EXPECT_EQ(RelabelAnomalies(f, 8), 1u);
  }
}

TEST(BootFactsRelabelled, SeparatorRelabelledIsNoSeparatorAndAnAnomaly) {
  const EventLog lab = ParsedFile(kFirmwareLab);
  for (uint32_t type : kRelabelTypes) {
    SCOPED_TRACE(EventTypeName(type));
    const BootFacts f = FactsOf(testing::Relabelled(lab, 9, type, Bytes(4, 0)));
    EXPECT_TRUE(std::none_of(f.separators.begin(), f.separators.end(),
                             [](const Separator& s) { return s.pcr == 7; }));
    EXPECT_EQ(RelabelAnomalies(f, 7), 1u);
  }
  // A file logged as a separator whose data is the file: not 4 bytes, no
  // separator value.
  const Bytes file = Str("an initramfs nobody allowed");
  const BootFacts f = FactsOf(testing::Relabelled(lab, 54, kEvSeparator, file, file));
  EXPECT_TRUE(HasMeasurement(f.boot_files, 54, file));
  EXPECT_EQ(AnomalyReasons(f).count("event_relabelled"), 1u);
}

TEST(BootFactsRelabelled, SecureBootVariableRelabelledIsNotSecureBootState) {
  const EventLog lab = ParsedFile(kFirmwareLab);
  const Bytes data = lab.events.at(4).data;
  for (uint32_t type : kRelabelTypes) {
    SCOPED_TRACE(EventTypeName(type));
    const BootFacts f = FactsOf(testing::Relabelled(lab, 4, type, data));
    EXPECT_EQ(f.secure_boot, SecureBootState::kNotMeasured);
    EXPECT_EQ(RelabelAnomalies(f, 7), 1u);
  }
}

TEST(BootFactsRelabelled, UkiSectionNameRelabelledIsUnrecognized) {
  const std::string name = ".linux";
  const Bytes name_ascii = Str(std::string_view(name.c_str(), name.size() + 1));
  for (uint32_t type : kRelabelTypes) {
    SCOPED_TRACE(EventTypeName(type));
    EventLogBuilder u;
    u.Measure(11, type, name_ascii, name_ascii)
        .Measure(11, kEvIpl, Str("kernel image"), testing::Utf16(name, true));
    const BootFacts f = Facts(u);
    EXPECT_TRUE(f.uki_sections.empty());
    EXPECT_EQ(f.uki_unrecognized.size(), 2u);
    EXPECT_EQ(RelabelAnomalies(f, 11), 1u);
  }
}

TEST(BootFactsRelabelled, KnownActionStringsAccountForTheirDigests) {
  EventLogBuilder b;
  b.Add(4, kEvEfiAction, Str("Calling EFI Application from Boot Option"))
      .Add(4, kEvEfiAction, Str("Returning from EFI Application from Boot Option"))
      .Add(5, kEvEfiAction, Str("Exit Boot Services Invocation"))
      .Add(5, kEvEfiAction, Str("Exit Boot Services Returned with Success"))
      .Add(5, kEvEfiAction, Str("Exit Boot Services Returned with Failure"))
      .Add(7, kEvEfiAction, Str("DMA Protection Disabled"))
      .Add(4, kEvAction, Str("Calling EFI Application from Boot Option"))
      // Not one: a near miss, and a known string that is not what was measured.
      .Add(4, kEvEfiAction, Str("Calling EFI Application from Boot Option\n"))
      .Measure(4, kEvEfiAction, Str("code"), Str("Calling EFI Application from Boot Option"));
  const BootFacts f = Facts(b);
  EXPECT_EQ(Indices(f.boot_applications), (std::vector<uint32_t>{8, 9}));
  EXPECT_EQ(RelabelAnomalies(f, 4), 2u);
  EXPECT_EQ(AnomalyReasons(f).count("pcr7_action"), 1u);
}

TEST(CheckEventData, Coverage) {
  Event ev;
  ev.type = kEvEfiBootServicesApplication;
  ev.data = Str("x");
  ev.digests[kAlgSha256] = testing::Digest(kAlgSha256, Str("y"));
  EXPECT_EQ(CheckEventData(ev), EventDataCheck::kNotCovered);
  ev.type = kEvEfiAction;
  EXPECT_EQ(CheckEventData(ev), EventDataCheck::kMismatch);
  ev.digests[kAlgSha256] = testing::Digest(kAlgSha256, Str("x"));
  EXPECT_EQ(CheckEventData(ev), EventDataCheck::kMatches);
  // Every bank must agree.
  ev.digests[kAlgSha1] = Bytes(20, 0);
  EXPECT_EQ(CheckEventData(ev), EventDataCheck::kMismatch);
  ev.digests.clear();
  ev.digests[kAlgSha512 + 1] = Bytes(8, 0);  // a bank we cannot hash
  EXPECT_EQ(CheckEventData(ev), EventDataCheck::kNoUsableDigest);
}

}  // namespace
}  // namespace rackgate::attest
