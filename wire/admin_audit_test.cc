// Tests of the audit chain's refusal body as rackgatectl reads it and of the
// verdict `audit verify --json` prints (wire/admin_audit.h).
#include "wire/admin_audit.h"

#include <gtest/gtest.h>

#include <string>

#include "wire/testing/admin_test_util.h"

namespace rackgate::wire {
namespace {

using testing::ExpectEveryPrefixRefused;

const AuditChainView kBroken{false, 4, 4, "h", 5, "hash_mismatch"};

TEST(AuditChainRefusal, ReadsWhatAddAuditChainReportWrote) {
  const std::string body = AddAuditChainReport(
      R"({"error":{"reason":"audit_chain_broken","message":"row 5 was edited after it was written"}})", kBroken);
  auto back = DecodeAuditChainRefusal(body);
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(*back, (AuditChainRefusal{kBroken, "row 5 was edited after it was written"}));
  ExpectEveryPrefixRefused(body, DecodeAuditChainRefusal);
}

TEST(AuditChainRefusal, RefusesABodyWithoutAReport) {
  EXPECT_EQ(DecodeAuditChainRefusal(R"({"error":{"reason":"busy"}})").status().reason(), "field_missing");
  for (const char* bad : {R"({"report":[]})", R"({"report":{"rows":"4"}})",
                          R"({"report":{},"error":{"message":5}})"}) {
    auto r = DecodeAuditChainRefusal(bad);
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_EQ(r.status().reason(), "field_invalid") << bad;
  }
  // No error object: no message.
  auto bare = DecodeAuditChainRefusal(R"({"report":{"intact":false}})");
  ASSERT_TRUE(bare.ok());
  EXPECT_EQ(bare->message, "");
}

TEST(AuditChainVerdict, TheMessageOnlyForABrokenChain) {
  EXPECT_EQ(EncodeAuditChainVerdict({true, 3, 3, "g", 0, ""}, "ignored"),
            R"({"head_hash":"g","head_id":3,"intact":true,"rows":3})");
  EXPECT_EQ(EncodeAuditChainVerdict(kBroken, "row 5 was edited"),
            R"({"bad_row_id":5,"head_hash":"h","head_id":4,"intact":false,"message":"row 5 was edited",)"
            R"("problem":"hash_mismatch","rows":4})");
  std::string text;
  ASSERT_NO_THROW(text = EncodeAuditChainVerdict(kBroken, "row \xff"));
  EXPECT_NE(text.find("row \xef\xbf\xbd"), std::string::npos);
}

}  // namespace
}  // namespace rackgate::wire
