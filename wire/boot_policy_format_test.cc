// Tests for the boot policy's writer: every field read back by the parser
// to an equal policy, the stable form (order, sorting, duplicates), and the
// rules the parser does not read yet (db, dbx, uki_signed) by their text.
#include "wire/boot_policy_json.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace rackgate::wire {
namespace {

using attest::BootPolicy;
using attest::Bytes;
using attest::kAlgSha1;
using attest::kAlgSha256;
using attest::kAlgSha384;
using attest::PcrSelection;
using attest::PolicyDigest;

PolicyDigest D(uint16_t alg, uint8_t fill) {
  return PolicyDigest{alg, Bytes(attest::DigestSize(alg), fill)};
}

void ExpectSameDigests(const std::vector<PolicyDigest>& a, const std::vector<PolicyDigest>& b) {
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_EQ(a[i].alg, b[i].alg) << i;
    EXPECT_EQ(a[i].value, b[i].value) << i;
  }
}

// Field by field, every field ParseBootPolicy reads.
void ExpectSamePolicy(const BootPolicy& a, const BootPolicy& b) {
  EXPECT_EQ(a.pcrs, b.pcrs);
  EXPECT_EQ(a.require_secure_boot, b.require_secure_boot);
  EXPECT_EQ(a.require_separators, b.require_separators);
  ASSERT_EQ(a.allowed_boot_applications.has_value(), b.allowed_boot_applications.has_value());
  if (a.allowed_boot_applications) {
    ExpectSameDigests(*a.allowed_boot_applications, *b.allowed_boot_applications);
  }
  ExpectSameDigests(a.forbidden_boot_applications, b.forbidden_boot_applications);
  ASSERT_EQ(a.allowed_authorities.has_value(), b.allowed_authorities.has_value());
  if (a.allowed_authorities) ExpectSameDigests(*a.allowed_authorities, *b.allowed_authorities);
  ExpectSameDigests(a.forbidden_authorities, b.forbidden_authorities);
  ASSERT_EQ(a.allowed_boot_files.has_value(), b.allowed_boot_files.has_value());
  if (a.allowed_boot_files) ExpectSameDigests(*a.allowed_boot_files, *b.allowed_boot_files);
  ExpectSameDigests(a.forbidden_boot_files, b.forbidden_boot_files);
  ASSERT_EQ(a.kernel_cmdline.has_value(), b.kernel_cmdline.has_value());
  if (a.kernel_cmdline) {
    EXPECT_EQ(a.kernel_cmdline->exact, b.kernel_cmdline->exact);
    EXPECT_EQ(a.kernel_cmdline->required, b.kernel_cmdline->required);
    EXPECT_EQ(a.kernel_cmdline->forbidden, b.kernel_cmdline->forbidden);
  }
  ASSERT_EQ(a.uki.has_value(), b.uki.has_value());
  if (a.uki) {
    ASSERT_EQ(a.uki->sections.size(), b.uki->sections.size());
    for (const auto& [name, digests] : a.uki->sections) {
      ASSERT_EQ(b.uki->sections.count(name), 1u) << name;
      ExpectSameDigests(digests, b.uki->sections.at(name));
    }
  }
  ASSERT_EQ(a.tofu.size(), b.tofu.size());
  for (size_t i = 0; i < a.tofu.size(); ++i) {
    EXPECT_EQ(a.tofu[i].hash_alg, b.tofu[i].hash_alg);
    EXPECT_EQ(a.tofu[i].pcrs, b.tofu[i].pcrs);
  }
}

// Every field the parser reads, each list already in the writer's order so
// that the round trip is exact.
BootPolicy EveryParsedField() {
  BootPolicy p;
  p.pcrs[kAlgSha256][0] = Bytes(32, 0x01);
  p.pcrs[kAlgSha256][7] = Bytes(32, 0x07);
  p.pcrs[kAlgSha1][4] = Bytes(20, 0x04);
  p.require_secure_boot = true;
  p.require_separators = true;
  p.allowed_boot_applications = std::vector<PolicyDigest>{D(kAlgSha1, 0xcc), D(kAlgSha256, 0xaa),
                                                          D(kAlgSha256, 0xbb)};
  p.forbidden_boot_applications = {D(kAlgSha384, 0xdd)};
  p.allowed_authorities = std::vector<PolicyDigest>{};  // allows nothing: must survive
  p.forbidden_authorities = {D(kAlgSha256, 0x11)};
  p.allowed_boot_files = std::vector<PolicyDigest>{D(kAlgSha256, 0x31), D(kAlgSha256, 0x32)};
  p.forbidden_boot_files = {D(kAlgSha256, 0x33)};
  p.kernel_cmdline = attest::KernelCmdlinePolicy{
      "root=/dev/sda1 ro \"quoted\" \\ back", {" ro ", "lockdown=integrity"}, {"init=", "rd.break"}};
  attest::UkiPolicy uki;
  uki.sections[".cmdline"] = {D(kAlgSha256, 0x21)};
  uki.sections[".linux"] = {D(kAlgSha256, 0x22), D(kAlgSha256, 0x23)};
  p.uki = uki;
  // In the parser's order of banks (by name).
  p.tofu = {PcrSelection{kAlgSha1, {0}}, PcrSelection{kAlgSha256, {1, 7, 14}}};
  return p;
}

TEST(FormatBootPolicyJson, RoundTripsEveryParsedField) {
  const BootPolicy p = EveryParsedField();
  const std::string text = FormatBootPolicyJson(p);
  auto back = ParseBootPolicy(text);
  ASSERT_TRUE(back.ok()) << back.status().ToString() << "\n" << text;
  ExpectSamePolicy(p, *back);
  // And the text is a fixed point.
  EXPECT_EQ(FormatBootPolicyJson(*back), text);
}

TEST(FormatBootPolicyJson, RoundTripsTheEmptyPolicy) {
  const std::string text = FormatBootPolicyJson(BootPolicy{});
  EXPECT_EQ(text, "{\n  \"version\": 1\n}\n");
  auto back = ParseBootPolicy(text);
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  ExpectSamePolicy(BootPolicy{}, *back);
}

TEST(FormatBootPolicyJson, RoundTripsEachFieldAlone) {
  const BootPolicy full = EveryParsedField();
  std::vector<BootPolicy> singles(9);
  singles[0].pcrs = full.pcrs;
  singles[1].require_secure_boot = true;
  singles[2].require_separators = true;
  singles[3].allowed_boot_applications = full.allowed_boot_applications;
  singles[4].forbidden_authorities = full.forbidden_authorities;
  singles[5].kernel_cmdline = attest::KernelCmdlinePolicy{std::nullopt, {}, {"init="}};
  singles[6].uki = full.uki;
  singles[7].tofu = full.tofu;
  singles[8].forbidden_boot_files = full.forbidden_boot_files;
  for (size_t i = 0; i < singles.size(); ++i) {
    SCOPED_TRACE(i);
    const std::string text = FormatBootPolicyJson(singles[i]);
    auto back = ParseBootPolicy(text);
    ASSERT_TRUE(back.ok()) << back.status().ToString() << "\n" << text;
    ExpectSamePolicy(singles[i], *back);
  }
}

TEST(FormatBootPolicyJson, StableOrderAndPrettyForm) {
  BootPolicy p;
  p.require_separators = true;
  p.pcrs[kAlgSha256][7] = Bytes(32, 0xab);
  p.pcrs[kAlgSha256][0] = Bytes(32, 0x00);
  p.allowed_boot_applications =
      std::vector<PolicyDigest>{D(kAlgSha256, 0xbb), D(kAlgSha256, 0xaa), D(kAlgSha256, 0xbb)};
  std::string ab;
  for (int i = 0; i < 32; ++i) ab += "ab";
  const std::string a(64, 'a'), b(64, 'b');
  const std::string expected = "{\n"
                               "  \"version\": 1,\n"
                               "  \"pcrs\": {\n"
                               "    \"sha256\": {\n"
                               "      \"0\": \"" + std::string(64, '0') + "\",\n"
                               "      \"7\": \"" + ab + "\"\n"
"    }\n"
                               "  },\n"
                               "  \"require_separators\": true,\n"
                               "  \"boot_applications\": {\n"
                               "    \"allowed\": [\n"
                               "      \"sha256:" + a + "\",\n"
                               "      \"sha256:" + b + "\"\n"
                               "    ]\n"
                               "  }\n"
                               "}\n";
  EXPECT_EQ(FormatBootPolicyJson(p), expected);
}

TEST(FormatBootPolicyJson, ListsAreSortedAndDeduplicated) {
  BootPolicy p;
  p.forbidden_boot_applications = {D(kAlgSha256, 0x22), D(kAlgSha1, 0x33), D(kAlgSha256, 0x11),
                                   D(kAlgSha256, 0x22)};
  p.kernel_cmdline = attest::KernelCmdlinePolicy{std::nullopt, {"b", "a", "b"}, {}};
  p.tofu = {PcrSelection{kAlgSha256, {14, 7}}, PcrSelection{kAlgSha256, {1, 7}}};
  auto back = ParseBootPolicy(FormatBootPolicyJson(p));
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  ASSERT_EQ(back->forbidden_boot_applications.size(), 3u);
  // "sha1:33.." < "sha256:11.." < "sha256:22..", by text.
  EXPECT_EQ(back->forbidden_boot_applications[0].alg, kAlgSha1);
  EXPECT_EQ(back->forbidden_boot_applications[1].value, Bytes(32, 0x11));
  EXPECT_EQ(back->forbidden_boot_applications[2].value, Bytes(32, 0x22));
  EXPECT_EQ(back->kernel_cmdline->required, (std::vector<std::string>{"a", "b"}));
  ASSERT_EQ(back->tofu.size(), 1u);
  EXPECT_EQ(back->tofu[0].pcrs, (std::vector<uint32_t>{1, 7, 14}));
}

TEST(FormatBootPolicyJson, RuleThatChecksNothingIsLeftOut) {
  BootPolicy p;
  p.pcrs[kAlgSha256];  // an empty bank
  p.forbidden_authorities = {};
  const std::string text = FormatBootPolicyJson(p);
  EXPECT_EQ(text, "{\n  \"version\": 1\n}\n");
}

TEST(FormatBootPolicyJson, SecureBootDatabases) {
  BootPolicy p;
  attest::SecureBootDbPolicy s;
  s.db_required_certificates = {Bytes(32, 0xbb), Bytes(32, 0xaa)};
  s.db_forbidden_certificates = {Bytes(32, 0xcc)};
  s.dbx_required_hashes = {Bytes(32, 0xdd), Bytes(32, 0xdd)};
  p.secure_boot_db = s;
  const std::string a(64, 'a'), b(64, 'b'), c(64, 'c'), d(64, 'd');
  EXPECT_EQ(FormatBootPolicyJson(p),
            "{\n"
            "  \"version\": 1,\n"
            "  \"db\": {\n"
            "    \"required\": [\n"
            "      \"sha256:" + a + "\",\n"
            "      \"sha256:" + b + "\"\n"
            "    ],\n"
            "    \"forbidden\": [\n"
            "      \"sha256:" + c + "\"\n"
            "    ]\n"
            "  },\n"
            "  \"dbx\": {\n"
            "    \"required\": [\n"
            "      \"sha256:" + d + "\"\n"
            "    ]\n"
            "  }\n"
            "}\n");
}

TEST(FormatBootPolicyJson, DbxAloneAndAnEmptyDbRule) {
  BootPolicy p;
  p.secure_boot_db = attest::SecureBootDbPolicy{{}, {}, {Bytes(32, 0x01)}};
  std::string text = FormatBootPolicyJson(p);
  EXPECT_EQ(text.find("\"db\""), std::string::npos) << text;
  EXPECT_NE(text.find("\"dbx\": {\n    \"required\": [\n      \"sha256:0101"), std::string::npos)
      << text;
  // A set rule whose lists are all empty is not dropped.
  p.secure_boot_db = attest::SecureBootDbPolicy{};
  text = FormatBootPolicyJson(p);
  EXPECT_NE(text.find("\"db\": {\n    \"required\": [],\n    \"forbidden\": []\n  }"),
            std::string::npos)
      << text;
}

TEST(FormatBootPolicyJson, SignedUkiKeysArePem) {
  // 70 bytes of "DER": base64 is 96 characters, two PEM lines (64 + 32).
  Bytes der(70);
  for (size_t i = 0; i < der.size(); ++i) der[i] = static_cast<uint8_t>(i);
  BootPolicy p;
  p.uki_signed = attest::SignedPcr11Policy{{der}};
  const std::string text = FormatBootPolicyJson(p);
  const std::string expected =
      "{\n"
      "  \"version\": 1,\n"
      "  \"uki_signed\": {\n"
      "    \"public_keys\": [\n"
      "      \"-----BEGIN PUBLIC KEY-----\\n"
      "AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8gISIjJCUmJygpKissLS4v\\n"
      "MDEyMzQ1Njc4OTo7PD0+P0BBQkNERQ==\\n"
      "-----END PUBLIC KEY-----\\n\"\n"
      "    ]\n"
      "  }\n"
      "}\n";
  EXPECT_EQ(text, expected);
}

TEST(FormatBootPolicyJson, FieldOrderIsTheFormatsOrder) {
  BootPolicy p = EveryParsedField();
  p.secure_boot_db = attest::SecureBootDbPolicy{{Bytes(32, 1)}, {}, {Bytes(32, 2)}};
  p.uki_signed = attest::SignedPcr11Policy{{Bytes(10, 3)}};
  const std::string text = FormatBootPolicyJson(p);
  size_t last = 0;
  for (const char* key : {"\"version\"", "\"pcrs\"", "\"require_secure_boot\"",
                          "\"require_separators\"", "\"boot_applications\"", "\"authorities\"",
                          "\"boot_files\"", "\"kernel_cmdline\"", "\"uki\"", "\"db\"", "\"dbx\"", "\"uki_signed\"",
                          "\"tofu\""}) {
    const size_t at = text.find(std::string("\n  ") + key);
    ASSERT_NE(at, std::string::npos) << key << "\n" << text;
    EXPECT_GT(at + 1, last) << key;
    last = at + 1;
  }
  // Banks strongest first.
  EXPECT_LT(text.find("\"sha256\": {"), text.find("\"sha1\": {"));
}

}  // namespace
}  // namespace rackgate::wire
