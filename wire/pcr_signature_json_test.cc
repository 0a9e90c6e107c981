// Tests for the `systemd-measure sign` document reader: a real document,
// strictness, truncation and limits.
#include "wire/pcr_signature_json.h"

#include <gtest/gtest.h>

#include <string>
#include <string_view>
#include <vector>

namespace rackgate::wire {
namespace {

using attest::kAlgSha256;

// Written by systemd 252's `systemd-measure sign --phase=enter-initrd` on
// Debian 12 (attest/pcr_signature_test.cc checks its contents).
const std::string kDocument = R"({"sha256":[{"pcrs":[11],"pkfp":"f1819ab1736977cc1726a091435d41f5645b1c6508268c61b87814610d613de9","pol":"2bbd497e43143f5e77adbac5be4e551511a3b6823401b342bcb0ca00cafaff77","sig":"ZoBCed+5LeeX/1TGSB3bwyyaDLQmLSU6a9TWddBTh36IBjvCEeyk09aAJUhdtScJd/OS1ZUMq1mHoNPZdBTpkfQlBOa2HK5NeJ2qVYO5KUK8JBORmkhJbSD1Xc1GQACk5mGBqdGSzSizoPxyNY+K6sU//lbYJh45XrTjakvKAioRpdMiSqS7MNMxqpDYAYX8nxd6ReHnS53sjcpebdHGbb86wG1pgtPqDgRuU3BGGZZGy6EGAortozmHEEEYxV1anKpldCNVlEFUHK4/tP7L7eHmpjxADFtmlJXA8ZFtHN58tGDHJMZqnNM30kW4FDxjQ5XSiIAtiy52ivC4Dau5xg=="}]})";

std::string Reason(std::string_view doc) {
  auto p = ParsePcrSignatureJson(doc);
  return p.ok() ? "ok" : p.status().reason();
}

std::string Entry(std::string pcrs = "[11]", std::string pkfp = std::string(64, 'a'),
                  std::string pol = std::string(64, 'b'), std::string sig = "\"AAEC\"") {
  return R"({"pcrs": )" + pcrs + R"(, "pkfp": ")" + pkfp + R"(", "pol": ")" + pol +
         R"(", "sig": )" + sig + "}";
}

TEST(ParsePcrSignatureJson, SystemdMeasureDocument) {
  auto p = ParsePcrSignatureJson(kDocument);
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  ASSERT_EQ(p->size(), 1u);
  EXPECT_EQ((*p)[0].bank, kAlgSha256);
  EXPECT_EQ((*p)[0].pcrs, std::vector<uint32_t>{11});
  EXPECT_EQ((*p)[0].key_fingerprint.size(), 32u);
  EXPECT_EQ((*p)[0].policy_digest[0], 0x2b);
  EXPECT_EQ((*p)[0].signature.size(), 256u);

  auto two = ParsePcrSignatureJson(R"({"sha1": [], "sha256": [)" + Entry() + ", " +
                                   Entry("[11, 12]") + "]}");
  ASSERT_TRUE(two.ok()) << two.status().ToString();
  EXPECT_EQ(two->size(), 2u);
  EXPECT_EQ((*two)[1].pcrs, (std::vector<uint32_t>{11, 12}));
  EXPECT_EQ((*two)[0].signature, (attest::Bytes{0, 1, 2}));
  // A field a newer systemd might add is ignored.
  EXPECT_EQ(Reason(R"({"sha256": [{"pcrs": [11], "pkfp": ")" + std::string(64, 'a') +
                   R"(", "pol": ")" + std::string(64, 'b') + R"(", "sig": "AAEC", "x": 1}]})"),
            "ok");
}

TEST(ParsePcrSignatureJson, Malformed) {
  for (const std::string& bad : std::vector<std::string>{
           std::string("not json"), std::string("[]"), std::string(R"({"sha256": {}})"),
           R"({"md5": [)" + Entry() + "]}", R"({"sha256": [1]})",
           R"({"sha256": [)" + Entry("[]") + "]}", R"({"sha256": [)" + Entry("[24]") + "]}",
           R"({"sha256": [)" + Entry("[11, 11]") + "]}", R"({"sha256": [)" + Entry("11") + "]}",
           R"({"sha256": [)" + Entry("[-1]") + "]}",
           R"({"sha256": [)" + Entry("[11]", std::string(62, 'a')) + "]}",
           R"({"sha256": [)" + Entry("[11]", std::string(64, 'g')) + "]}",
           R"({"sha256": [)" + Entry("[11]", std::string(64, 'a'), std::string(66, 'b')) + "]}",
           R"({"sha256": [)" + Entry("[11]", std::string(64, 'a'), std::string(64, 'b'), "\"\"") + "]}",
           R"({"sha256": [)" + Entry("[11]", std::string(64, 'a'), std::string(64, 'b'), "\"A*==\"") + "]}",
           R"({"sha256": [)" + Entry("[11]", std::string(64, 'a'), std::string(64, 'b'), "12") + "]}",
           R"({"sha256": [{"pcrs": [11], "pkfp": ")" + std::string(64, 'a') + R"(", "sig": "AAEC"}]})",
           R"({"sha256": [[[[[1]]]]]})"}) {
    SCOPED_TRACE(bad);
    EXPECT_EQ(Reason(bad), "pcr_signature_malformed");
  }
  // A signature above the bound.
  EXPECT_EQ(Reason(R"({"sha256": [)" +
                   Entry("[11]", std::string(64, 'a'), std::string(64, 'b'),
                         "\"" + std::string(4 * (kMaxPcrSignatureBytes + 3) / 3, 'A') + "\"") +
                   "]}"),
            "pcr_signature_malformed");
}

TEST(ParsePcrSignatureJson, Truncation) {
  for (size_t n = 0; n < kDocument.size(); ++n) {
    EXPECT_EQ(Reason(kDocument.substr(0, n)), "pcr_signature_malformed") << n;
  }
}

TEST(ParsePcrSignatureJson, Limits) {
  std::string doc = R"({"sha256": [)";
  for (size_t i = 0; i <= kMaxPcrSignatureEntries; ++i) doc += (i ? ", " : "") + Entry();
  EXPECT_EQ(Reason(doc + "]}"), "pcr_signature_malformed");
  std::string ok = R"({"sha256": [)";
  for (size_t i = 0; i < kMaxPcrSignatureEntries; ++i) ok += (i ? ", " : "") + Entry();
  EXPECT_EQ(Reason(ok + "]}"), "ok");
  std::string big = R"({"sha256": [], "sha1": [)" + Entry() + "]";
  big += std::string(kMaxPcrSignatureSize, ' ') + "}";
  EXPECT_EQ(Reason(big), "pcr_signature_malformed");
}

}  // namespace
}  // namespace rackgate::wire
