#include "attest/pcr_file.h"

#include <gtest/gtest.h>

#include "attest/quote.h"
#include "attest/testing/test_util.h"

namespace rackgate::attest {
namespace {

using testing::ReadFixture;

const std::string kDir = "attest/testdata/tpm/";

std::vector<PcrSelection> QuoteSelection(const char* msg) {
  return ParseTpmsAttest(ReadFixture(kDir + msg))->pcr_select;
}

TEST(PcrFile, SerializedFromTpm2Quote) {
  auto sel = QuoteSelection("q_rsa.msg");
  auto pcrs = ParseTpm2ToolsPcrFile(ReadFixture(kDir + "q_rsa.pcrs"), sel);
  ASSERT_TRUE(pcrs.ok()) << pcrs.status().ToString();
  ASSERT_EQ(pcrs->size(), 1u);
  const PcrBank& bank = pcrs->at(kAlgSha256);
  EXPECT_EQ(bank.size(), 5u);
  for (uint32_t pcr : {0u, 1u, 2u, 3u, 7u}) EXPECT_EQ(bank.at(pcr).size(), 32u);
  // PCR 1 was never extended; PCR 0 was.
  EXPECT_EQ(bank.at(1), Bytes(32, 0));
  EXPECT_NE(bank.at(0), Bytes(32, 0));
}

TEST(PcrFile, ValuesFromTpm2Quote) {
  auto sel = QuoteSelection("q2_rsa.msg");
  auto pcrs = ParseTpm2ToolsPcrFile(ReadFixture(kDir + "q2_rsa.values"), sel);
  ASSERT_TRUE(pcrs.ok()) << pcrs.status().ToString();
  EXPECT_EQ(pcrs->at(kAlgSha256).size(), 5u);
  EXPECT_EQ(pcrs->at(kAlgSha1).size(), 1u);
  EXPECT_EQ(pcrs->at(kAlgSha1).at(0).size(), 20u);
}

TEST(PcrFile, BothFormatsAgree) {
  auto sel = QuoteSelection("q_rsa.msg");
  auto serialized = ParseTpm2ToolsPcrFile(ReadFixture(kDir + "q_rsa.pcrs"), sel);
  Bytes values;
  for (uint32_t pcr : sel[0].pcrs) {
    const Bytes& v = serialized->at(kAlgSha256).at(pcr);
    values.insert(values.end(), v.begin(), v.end());
  }
  auto parsed = ParseTpm2ToolsPcrFile(values, sel);
  ASSERT_TRUE(parsed.ok());
  EXPECT_EQ(*parsed, *serialized);
}

TEST(PcrFile, EveryTruncationFails) {
  for (auto [file, msg] : {std::pair{"q_rsa.pcrs", "q_rsa.msg"}, std::pair{"q2_rsa.values", "q2_rsa.msg"}}) {
    auto sel = QuoteSelection(msg);
    Bytes b = ReadFixture(kDir + file);
    size_t values_size = 0;
    for (const auto& s : sel) values_size += DigestSize(s.hash_alg) * s.pcrs.size();
    for (size_t n = 0; n < b.size(); ++n) {
      // A prefix exactly as long as the selection's values IS a values file
      // (of other bytes): the quote's pcrDigest, not the parser, refuses it.
      if (n == values_size && std::string(file) != "q2_rsa.values") continue;
      auto r = ParseTpm2ToolsPcrFile(std::span<const uint8_t>(b).first(n), sel);
      ASSERT_FALSE(r.ok()) << file << " " << n;
      EXPECT_EQ(r.status().reason(), "pcr_file_malformed");
    }
  }
}

TEST(PcrFile, MalformedCountsRefused) {
  auto sel = QuoteSelection("q_rsa.msg");
  const Bytes good = ReadFixture(kDir + "q_rsa.pcrs");
  auto mutate = [&](size_t off, uint8_t v) {
    Bytes b = good;
    b[off] = v;
    return ParseTpm2ToolsPcrFile(b, sel);
  };
  EXPECT_FALSE(mutate(0, 17).ok());         // bank count above 16
  EXPECT_FALSE(mutate(4, 0x99).ok());       // unknown bank
  EXPECT_FALSE(mutate(6, 5).ok());          // sizeofSelect above 4
  EXPECT_FALSE(mutate(132, 2).ok());        // two digest lists, one present
  EXPECT_FALSE(mutate(136, 9).ok());        // more than 8 digests in a list
  EXPECT_FALSE(mutate(136, 4).ok());        // fewer values than selected PCRs
  EXPECT_FALSE(mutate(140, 0x41).ok());     // digest size above 64
  EXPECT_FALSE(mutate(140, 20).ok());       // digest size wrong for the bank
  Bytes big(kMaxPcrFileSize + 1, 0);
  EXPECT_FALSE(ParseTpm2ToolsPcrFile(big, sel).ok());
}

}  // namespace
}  // namespace rackgate::attest
