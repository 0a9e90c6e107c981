#include "agent/backoff.h"

#include <gtest/gtest.h>

namespace rackgate::agent {
namespace {

using std::chrono::milliseconds;

// 2024-01-01T00:00:00Z
constexpr std::time_t kNow = 1704067200;

TEST(RetryAfter, DelaySeconds) {
  EXPECT_EQ(ParseRetryAfter("30", kNow), 30);
  EXPECT_EQ(ParseRetryAfter(" 5 ", kNow), 5);
  EXPECT_EQ(ParseRetryAfter("0", kNow), 0);
  EXPECT_EQ(ParseRetryAfter("3600", kNow), kMaxRetryAfterSeconds);
  // Capped, also when the number would overflow.
  EXPECT_EQ(ParseRetryAfter("86400", kNow), kMaxRetryAfterSeconds);
  EXPECT_EQ(ParseRetryAfter("999999999999999999999999999", kNow), kMaxRetryAfterSeconds);
}

TEST(RetryAfter, HttpDate) {
  EXPECT_EQ(ParseRetryAfter("Mon, 01 Jan 2024 00:00:45 GMT", kNow), 45);
  EXPECT_EQ(ParseRetryAfter("Sun, 31 Dec 2023 23:59:00 GMT", kNow), 0);  // in the past
  EXPECT_EQ(ParseRetryAfter("Tue, 02 Jan 2024 00:00:00 GMT", kNow), kMaxRetryAfterSeconds);
}

TEST(RetryAfter, RefusesGarbage) {
  for (const char* bad : {"", "  ", "-1", "1.5", "30s", "soon", "0x10", "Mon, 01 Jan 2024 00:00:45 UTC",
                          "Monday, 01-Jan-24 00:00:45 GMT", "Mon Jan  1 00:00:45 2024"}) {
    EXPECT_FALSE(ParseRetryAfter(bad, kNow).has_value()) << bad;
  }
}

TEST(WaitDelay, RetryAfterPlusAtMostTwentyPercent) {
  EXPECT_EQ(WaitDelay(30, 0.0), milliseconds(30000));
  EXPECT_EQ(WaitDelay(30, 0.5), milliseconds(33000));
  EXPECT_LT(WaitDelay(30, 0.999999), milliseconds(36000));
  EXPECT_GE(WaitDelay(30, 0.999999), milliseconds(35999));
  // Out-of-range randomness is clamped, never shrinks or overshoots.
  EXPECT_EQ(WaitDelay(30, -3.0), milliseconds(30000));
  EXPECT_LT(WaitDelay(30, 7.0), milliseconds(36000));
}

TEST(WaitDelay, DefaultsAndBounds) {
  EXPECT_EQ(WaitDelay(std::nullopt, 0.0), std::chrono::seconds(kDefaultRetryAfterSeconds));
  // Retry-After: 0 must not become a busy loop.
  EXPECT_EQ(WaitDelay(0, 0.0), std::chrono::seconds(kMinWaitSeconds));
  EXPECT_EQ(WaitDelay(1000000, 0.0), std::chrono::seconds(kMaxRetryAfterSeconds));
}

TEST(BackoffDelay, DoublesToTheCap) {
  EXPECT_EQ(BackoffDelay(0, 0.0), milliseconds(1000));
  EXPECT_EQ(BackoffDelay(1, 0.0), milliseconds(2000));
  EXPECT_EQ(BackoffDelay(5, 0.0), milliseconds(32000));
  EXPECT_EQ(BackoffDelay(6, 0.0), kBackoffCap);
  EXPECT_EQ(BackoffDelay(1000, 0.0), kBackoffCap);
  for (int attempt = 0; attempt < 40; ++attempt) {
    const auto lo = BackoffDelay(attempt, 0.0);
    const auto hi = BackoffDelay(attempt, 0.999999);
    EXPECT_GE(hi, lo);
    EXPECT_LT(hi.count(), lo.count() * 12 / 10 + 1);
    EXPECT_LE(hi, milliseconds(72000));
  }
}

}  // namespace
}  // namespace rackgate::agent
