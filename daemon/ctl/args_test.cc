#include "daemon/ctl/args.h"

#include <gtest/gtest.h>

namespace rackgate::ctl {
namespace {

Result<Args> P(std::vector<const char*> v, const FlagSpec& spec) {
  std::vector<char*> argv;
  for (const char* s : v) argv.push_back(const_cast<char*>(s));
  return Args::Parse(static_cast<int>(argv.size()), argv.data(), 0, spec);
}

const FlagSpec kSpec{{"roots", "cert"}, {"json"}};

TEST(Args, ValuesBooleansAndPositionals) {
  auto a = P({"--roots", "a", "--roots=b", "--json", "file", "--cert", "c"}, kSpec);
  ASSERT_TRUE(a.ok()) << a.status().ToString();
  EXPECT_EQ(a->GetAll("roots"), (std::vector<std::string>{"a", "b"}));
  EXPECT_EQ(*a->Get("cert"), "c");
  EXPECT_TRUE(a->Has("json"));
  EXPECT_EQ(a->positional(), std::vector<std::string>{"file"});
  EXPECT_TRUE(a->Require({"roots", "cert"}).ok());
  EXPECT_EQ(a->Require({"nope"}).reason(), "usage");
}

TEST(Args, Refusals) {
  EXPECT_FALSE(P({"--unknown", "x"}, kSpec).ok());
  EXPECT_FALSE(P({"--roots"}, kSpec).ok());
  EXPECT_FALSE(P({"--json=1"}, kSpec).ok());
  auto h = P({"--help"}, kSpec);
  ASSERT_TRUE(h.ok());
  EXPECT_TRUE(h->Has("help"));
}

}  // namespace
}  // namespace rackgate::ctl
