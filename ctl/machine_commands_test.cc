// The decisions rackgatectl's machine commands make before anything is sent.
#include "ctl/commands.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "ctl/args.h"

namespace rackgate::ctl {
namespace {

// The parsed command line of `words` as revoke and reset parse theirs.
Args Parse(std::vector<std::string> words) {
  std::vector<char*> argv;
  static std::string prog = "rackgatectl";
  argv.push_back(prog.data());
  for (auto& w : words) argv.push_back(w.data());
  auto args = Args::Parse(static_cast<int>(argv.size()), argv.data(), 1, {{"reason"}, {"json", "unrevoke"}, 1});
  EXPECT_TRUE(args.ok()) << args.status().ToString();
  return *args;
}

// Issue 32: revoke takes no default reason and asks nothing: a revoke
// without --reason (or with a blank one) is a usage error, sent nowhere.
TEST(Issue32, RevokeNeedsAReason) {
  auto none = MachineActionRequest("revoke", Parse({"node-1"}));
  ASSERT_FALSE(none.ok());
  EXPECT_EQ(none.status().reason(), "usage");
  EXPECT_NE(none.status().message().find("--reason"), std::string::npos);
  EXPECT_FALSE(MachineActionRequest("revoke", Parse({"node-1", "--reason", "  "})).ok());
  auto given = MachineActionRequest("revoke", Parse({"node-1", "--reason", "disk stolen"}));
  ASSERT_TRUE(given.ok()) << given.status().ToString();
  EXPECT_EQ(given->reason, "disk stolen");
  EXPECT_FALSE(given->unrevoke);
  EXPECT_FALSE(MachineActionRequest("revoke", Parse({"--reason", "x"})).ok());  // no HOSTNAME
}

// A reset keeps its optional reason, and lifts a revocation only with
// --unrevoke.
TEST(Issue32, ResetUnrevokesOnlyWhenAsked) {
  auto plain = MachineActionRequest("reset", Parse({"node-1"}));
  ASSERT_TRUE(plain.ok());
  EXPECT_EQ(plain->reason, "");
  EXPECT_FALSE(plain->unrevoke);
  auto lift = MachineActionRequest("reset", Parse({"node-1", "--unrevoke", "--reason", "false alarm"}));
  ASSERT_TRUE(lift.ok());
  EXPECT_TRUE(lift->unrevoke);
  EXPECT_EQ(lift->reason, "false alarm");
}

}  // namespace
}  // namespace rackgate::ctl
