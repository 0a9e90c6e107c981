// Tests of the reason registry: every row found by name, names unique and
// well-formed, statuses consistent with each row's audience.
#include "wire/reasons.h"

#include <gtest/gtest.h>

#include <set>
#include <string>

namespace rackgate::wire {
namespace {

bool SnakeCase(std::string_view s) {
  if (s.empty() || s.front() < 'a' || s.front() > 'z') return false;
  for (char c : s) {
    if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_')) return false;
  }
  return true;
}

TEST(Reasons, EveryRowIsFoundByItsName) {
  ASSERT_FALSE(Reasons().empty());
  std::set<std::string_view> seen;
  for (const ReasonInfo& row : Reasons()) {
    EXPECT_TRUE(seen.insert(row.name).second) << row.name << " declared twice";
    EXPECT_TRUE(SnakeCase(row.name)) << row.name;
    EXPECT_EQ(FindReason(row.name), &row) << row.name;
    EXPECT_FALSE(row.meaning.empty()) << row.name;
    EXPECT_NE(row.code, Status::Code::kOk) << row.name;
  }
}

TEST(Reasons, UndeclaredIsNull) {
  EXPECT_EQ(FindReason("no_such_reason"), nullptr);
  EXPECT_EQ(FindReason(""), nullptr);
  EXPECT_NE(FindReason("quote_nonce_mismatch"), nullptr);
}

TEST(Reasons, StatusesFitTheAudience) {
  for (const ReasonInfo& row : Reasons()) {
    const bool local = row.audience == ReasonAudience::kLocal;
    for (int status : {row.machine_status, row.admin_status}) {
      if (local) {
        EXPECT_EQ(status, 0) << row.name << ": a local reason never crosses the wire";
      } else if (row.audience == ReasonAudience::kKube && status == 0) {
        // a Kubernetes CSR denial only: never an HTTP answer
      } else {
        EXPECT_GE(status, 400) << row.name << ": every reason a client can receive has its status";
        EXPECT_LT(status, 600) << row.name;
      }
    }
    if (row.retry == ReasonRetry::kStandard || row.retry == ReasonRetry::kJittered ||
        row.retry == ReasonRetry::kMachineOnly) {
      EXPECT_TRUE(row.machine_status == 503 || row.machine_status == 429) << row.name << ": only a wait names Retry-After";
    }
  }
}

}  // namespace
}  // namespace rackgate::wire
