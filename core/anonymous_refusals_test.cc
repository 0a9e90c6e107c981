// Tests of the anonymous-refusal tally: one summary per machine per
// interval however fast refusals come, the rest reported at the next due
// sweep, bounded addresses and capacity.
#include "core/anonymous_refusals.h"

#include <gtest/gtest.h>

#include <string>

namespace rackgate::core {
namespace {

TEST(AnonymousRefusalTable, TheFirstRefusalIsSummarisedAtOnceTheRestOncePerInterval) {
  AnonymousRefusalTable t(300);
  auto first = t.Record(7, "node-7", "activation_failed", "198.51.100.1", 1000);
  ASSERT_TRUE(first.has_value());
  EXPECT_EQ(first->machine_id, 7);
  EXPECT_EQ(first->count, 1u);
  EXPECT_EQ(first->first_at, 1000);
  EXPECT_EQ(first->last_at, 1000);
  for (int i = 1; i < 1000; ++i) {
    EXPECT_FALSE(t.Record(7, "node-7", "activation_failed", "198.51.100.1", 1000 + i % 299).has_value());
  }
  EXPECT_TRUE(t.TakeDue(1299).empty()) << "within the interval";
  auto due = t.TakeDue(1300);
  ASSERT_EQ(due.size(), 1u);
  EXPECT_EQ(due[0].count, 999u);
  EXPECT_EQ(due[0].reasons.at("activation_failed"), 999u);
  EXPECT_TRUE(t.TakeDue(5000).empty()) << "nothing unreported";
  // After a quiet interval, the next refusal is summarised at once again.
  EXPECT_TRUE(t.Record(7, "node-7", "machine_revoked", "198.51.100.2", 5000).has_value());
  EXPECT_EQ(t.total(), 1001u);
  auto seen = t.SeenSince(0);
  ASSERT_EQ(seen.size(), 1u);
  EXPECT_EQ(seen[0].count, 1001u);
  EXPECT_EQ(seen[0].reason, "machine_revoked");
  EXPECT_EQ(seen[0].address, "198.51.100.2");
  EXPECT_EQ(seen[0].first_seen, 1000);
  EXPECT_EQ(seen[0].last_seen, 5000);
}

TEST(AnonymousRefusalTable, MachinesAreSummarisedApart) {
  AnonymousRefusalTable t(60);
  EXPECT_TRUE(t.Record(1, "a", "activation_failed", "x", 10).has_value());
  EXPECT_TRUE(t.Record(2, "b", "activation_failed", "x", 10).has_value());
  EXPECT_FALSE(t.Record(1, "a", "activation_failed", "x", 20).has_value());
  auto due = t.TakeDue(70);
  ASSERT_EQ(due.size(), 1u);
  EXPECT_EQ(due[0].machine_id, 1);
  EXPECT_EQ(t.SeenSince(15).size(), 1u);
}

TEST(AnonymousRefusalTable, AddressesAndEntriesAreBounded) {
  AnonymousRefusalTable t(60, 2);
  ASSERT_TRUE(t.Record(1, "a", "activation_failed", "addr-0", 10).has_value());
  for (int i = 0; i < 100; ++i) t.Record(1, "a", "activation_failed", "addr-" + std::to_string(i), 11);
  auto due = t.TakeDue(70);
  ASSERT_EQ(due.size(), 1u);
  EXPECT_EQ(due[0].addresses.size(), AnonymousRefusalTable::kMaxAddresses);
  EXPECT_EQ(due[0].addresses.front(), "addr-0");
  t.Record(2, "b", "activation_failed", "x", 80);
  t.Record(3, "c", "activation_failed", "x", 81);  // machine 1, least recently seen, goes
  auto seen = t.SeenSince(0);
  ASSERT_EQ(seen.size(), 2u);
  EXPECT_EQ(seen[0].machine_id, 3);
  EXPECT_EQ(seen[1].machine_id, 2);
  EXPECT_EQ(t.total(), 103u);
}

}  // namespace
}  // namespace rackgate::core
