// Tests for the JSON form of boot policies and PCR values: strictness,
// bounds, reasons and the PCR-values round trip.
#include "wire/boot_policy_json.h"

#include <gtest/gtest.h>

#include <string>
#include <string_view>
#include <vector>

namespace rackgate::wire {
namespace {

using attest::Bytes;
using attest::kAlgSha1;
using attest::kAlgSha256;
using attest::kAlgSha384;
using attest::PcrSelection;
using attest::PcrValues;

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

TEST(ParseBootPolicy, UkiRule) {
  auto p = ParseBootPolicy(R"({"version": 1, "uki": {"sections": {
      ".linux": ["sha256:)" + std::string(64, 'a') + R"("],
      ".cmdline": [")" + std::string(64, 'b') + R"(", ")" + std::string(40, 'c') + R"("],
      ".initrd": []}}})");
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  ASSERT_TRUE(p->uki.has_value());
  ASSERT_EQ(p->uki->sections.size(), 3u);
  EXPECT_EQ(p->uki->sections.at(".linux").at(0).value, Bytes(32, 0xaa));
  EXPECT_EQ(p->uki->sections.at(".cmdline").size(), 2u);
  EXPECT_EQ(p->uki->sections.at(".cmdline")[1].alg, kAlgSha1);
  EXPECT_TRUE(p->uki->sections.at(".initrd").empty());  // present, allows nothing
  // A policy without "uki" (every policy before it) has no UKI rule.
  EXPECT_FALSE(ParseBootPolicy(R"({"version": 1})")->uki.has_value());
}

TEST(ParseBootPolicy, UkiRuleIsStrict) {
  const std::string d = R"(["sha256:)" + kSha256Zero + R"("])";
  EXPECT_EQ(Reason(R"({"version": 1, "uki": {}})"), "policy_malformed");
  EXPECT_EQ(Reason(R"({"version": 1, "uki": {"sections": {}}})"), "policy_malformed");
  EXPECT_EQ(Reason(R"({"version": 1, "uki": {"sections": {".linux": )" + d + R"(}, "pcr": 11}})"),
            "policy_malformed");
  EXPECT_NE(Message(R"({"version": 1, "uki": {"section": {}}})").find("section"),
            std::string::npos);
  for (const char* name : {"linux", ".", ".toolongname", ". linux", ""}) {
    SCOPED_TRACE(name);
    EXPECT_EQ(Reason(R"({"version": 1, "uki": {"sections": {")" + std::string(name) +
                     R"(": )" + d + R"(}}})"),
              "policy_malformed");
  }
  EXPECT_EQ(Reason(R"({"version": 1, "uki": {"sections": {".linux": "sha256:00"}}})"),
            "policy_malformed");
  EXPECT_EQ(Reason(R"({"version": 1, "uki": {"sections": {".linux": ["sha256:00"]}}})"),
            "policy_malformed");
  EXPECT_EQ(Reason(R"({"version": 1, "uki": {"sections": {".linux": )" + d +
                   R"(, ".linux": )" + d + R"(}}})"),
            "policy_malformed");
  std::string many = R"({"version": 1, "uki": {"sections": {)";
  for (size_t i = 0; i <= kMaxPolicyUkiSections; ++i) {
    many += (i ? ", " : "") + std::string("\".s") + std::to_string(i) + "\": []";
  }
  EXPECT_EQ(Reason(many + "}}}"), "policy_malformed");
}

// --- Secure Boot db/dbx and uki_signed ------------------------------------------

// A PEM RSA and an EC public key, as JSON string contents.
const std::string kRsaPem = "-----BEGIN PUBLIC KEY-----\\nMIIBIjANBgkqhkiG9w0BAQEFAAOCAQ8AMIIBCgKCAQEA0/QYni3inot0rNwlmFg9\\nVDdP/xrsLkV/XH7GT5JcPLe4CnjhBedi4o2NB+aIdMI32twr//w0GL0iWuh08pdM\\n+BSvRSXid2Mxn/JEr0rE/BtLODBro1cdzUHH+NcLhJBLZo1y9XKsNMviUs4aS2T1\\n0MRyJmmTNcOHsGSHHeZqgwJpB4aGACJ2LDQJvUhZFIIAYxEUsdqUhmcYbB+sB6A3\\n1015PFRoN9G2dVmbwfDwlVHbi8DnRbigeezjr2ySK3KrODT9w8KLe21JQXecs24H\\neeAa85fmz8eBsTTpDeKBCe8kAYYg6DcreHtsvTjuEqznDjSgh69iH1XcLqrGyziZ\\n/wIDAQAB\\n-----END PUBLIC KEY-----\\n";
const std::string kEcPem = "-----BEGIN PUBLIC KEY-----\\nMFkwEwYHKoZIzj0CAQYIKoZIzj0DAQcDQgAEyUzfkEChGJj23Qo1yG4TG+Yft49N\\nUbi365H9ZBSo+zfiEUXbEAfR1712BpyrAsLun3Hx1YD49PWyQ6wHSaAgMQ==\\n-----END PUBLIC KEY-----\\n";

TEST(ParseBootPolicy, SecureBootDbRule) {
  const std::string a(64, 'a'), b(64, 'b');
  auto p = ParseBootPolicy(R"({"version": 1, "db": {"required": ["sha256:)" + a +
                           R"(", ")" + b + R"("], "forbidden": [")" + b +
                           R"("]}, "dbx": {"required": [")" + a + R"("]}})");
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  ASSERT_TRUE(p->secure_boot_db.has_value());
  EXPECT_EQ(p->secure_boot_db->db_required_certificates,
            (std::vector<Bytes>{Bytes(32, 0xaa), Bytes(32, 0xbb)}));
  EXPECT_EQ(p->secure_boot_db->db_forbidden_certificates, (std::vector<Bytes>{Bytes(32, 0xbb)}));
  EXPECT_EQ(p->secure_boot_db->dbx_required_hashes, (std::vector<Bytes>{Bytes(32, 0xaa)}));
  // dbx alone.
  p = ParseBootPolicy(R"({"version": 1, "dbx": {"required": [")" + a + R"("]}})");
  ASSERT_TRUE(p.ok());
  EXPECT_TRUE(p->secure_boot_db->db_required_certificates.empty());
  EXPECT_FALSE(ParseBootPolicy(R"({"version": 1})")->secure_boot_db.has_value());
  // Empty lists check nothing (the policy writer writes both of db's).
  p = ParseBootPolicy(R"({"version": 1, "db": {"required": [")" + a + R"("], "forbidden": []}})");
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  EXPECT_TRUE(p->secure_boot_db->db_forbidden_certificates.empty());

  for (const std::string& bad : std::vector<std::string>{
           R"("db": {})", R"("dbx": {})", R"("dbx": {"forbidden": [")" + a + R"("]})",
           R"("db": {"required": ["sha1:)" + std::string(40, 'a') + R"("]})",
           R"("db": {"required": [")" + std::string(40, 'a') + R"("]})",
           R"("db": {"required": ["sha256:)" + std::string(62, 'a') + R"("]})",
           R"("db": {"required": "sha256:)" + a + R"("})",
           R"("db": {"allowed": [")" + a + R"("]})", R"("db": [])"}) {
    SCOPED_TRACE(bad);
    EXPECT_EQ(Reason(R"({"version": 1, )" + bad + "}"), "policy_malformed");
  }
  EXPECT_NE(Message(R"({"version": 1, "db": {"required": [")" + a + R"(", "sha1:)" +
                    std::string(40, 'a') + R"("]}})")
                .find("db.required[1]"),
            std::string::npos);
}

TEST(ParseBootPolicy, UkiSignedRule) {
  auto p = ParseBootPolicy(R"({"version": 1, "uki_signed": {"public_keys": [")" + kRsaPem +
                           R"(", ")" + kEcPem + R"("]}})");
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  ASSERT_TRUE(p->uki_signed.has_value());
  ASSERT_EQ(p->uki_signed->public_keys.size(), 2u);
  EXPECT_EQ(p->uki_signed->public_keys[0][0], 0x30);  // DER SubjectPublicKeyInfo

  EXPECT_EQ(Reason(R"({"version": 1, "uki_signed": {}})"), "policy_malformed");
  EXPECT_EQ(Reason(R"({"version": 1, "uki_signed": {"public_keys": []}})"), "policy_malformed");
  EXPECT_EQ(Reason(R"({"version": 1, "uki_signed": {"public_keys": [")" + kRsaPem +
                   R"("], "keys": []}})"),
            "policy_malformed");
  EXPECT_EQ(Reason(R"({"version": 1, "uki_signed": {"public_keys": [1]}})"), "policy_malformed");
  std::string broken = kRsaPem;
  broken.erase(60, 20);
  EXPECT_NE(Message(R"({"version": 1, "uki_signed": {"public_keys": [")" + kRsaPem + R"(", ")" +
                    broken + R"("]}})")
                .find("uki_signed.public_keys[1]"),
            std::string::npos);
  EXPECT_EQ(Reason(R"({"version": 1, "uki_signed": {"public_keys": [")" + kRsaPem + kEcPem +
                   R"("]}})"),
            "policy_malformed");  // two keys in one string
  std::string many = R"({"version": 1, "uki_signed": {"public_keys": [)";
  for (size_t i = 0; i <= kMaxPolicyUkiKeys; ++i) many += (i ? ", \"" : "\"") + kEcPem + "\"";
  EXPECT_EQ(Reason(many + "]}}"), "policy_malformed");
}

TEST(ParseBootPolicy, UnknownFieldsAreRefusedAtEveryLevel) {
  // Typos must never silently drop a rule.
  EXPECT_EQ(Reason(R"({"version": 1, "require_secureboot": true})"), "policy_malformed");
  EXPECT_NE(Message(R"({"version": 1, "require_secureboot": true})").find("require_secureboot"),
            std::string::npos);
  EXPECT_EQ(Reason(R"({"version": 1, "boot_applications": {"allow": []}})"), "policy_malformed");
  EXPECT_EQ(Reason(R"({"version": 1, "boot_file": {"allowed": []}})"), "policy_malformed");
  EXPECT_EQ(Reason(R"({"version": 1, "boot_files": {"allowd": []}})"), "policy_malformed");
  EXPECT_EQ(Reason(R"({"version": 1, "boot_files": {"allowed": ["sha256:00"]}})"), "policy_malformed");
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

}  // namespace
}  // namespace rackgate::wire
