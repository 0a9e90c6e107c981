#include "ctl/args.h"

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

TEST(Args, UnknownOptionSuggestsTheClosestFlag) {
  const FlagSpec spec{{"hostname", "pool"}, {}};
  auto a = P({"--hostnme", "x"}, spec);
  ASSERT_FALSE(a.ok());
  EXPECT_EQ(a.status().message(), "unknown option --hostnme; did you mean --hostname?");
  // Nothing close: no guess.
  a = P({"--zzzzzz"}, spec);
  ASSERT_FALSE(a.ok());
  EXPECT_EQ(a.status().message(), "unknown option --zzzzzz");
}

TEST(Args, SingleDashOptionsAreRefused) {
  const FlagSpec spec{{"hostname"}, {}};
  for (const char* bad : {"-x", "-o", "-hostname"}) {
    auto a = P({bad}, spec);
    ASSERT_FALSE(a.ok()) << bad;
    EXPECT_NE(a.status().message().find(std::string("unknown option ") + bad), std::string::npos);
  }
  EXPECT_NE(P({"-o", "json"}, spec).status().message().find("did you mean --json?"), std::string::npos);
  EXPECT_NE(P({"-hostname", "x"}, spec).status().message().find("did you mean --hostname?"), std::string::npos);
  // "-" alone is a positional (stdin), and -h is help.
  auto a = P({"-"}, spec);
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(a->positional(), std::vector<std::string>{"-"});
  EXPECT_TRUE(P({"-h"}, spec)->Has("help"));
}

TEST(Args, ExtraPositionalsAreRefused) {
  auto a = P({"one"}, {{}, {}, 0});
  ASSERT_FALSE(a.ok());
  EXPECT_EQ(a.status().message(), "unexpected argument 'one' (this command takes none)");
  a = P({"one", "two"}, {{}, {}, 1});
  ASSERT_FALSE(a.ok());
  EXPECT_EQ(a.status().message(), "unexpected argument 'two' (at most 1)");
  EXPECT_TRUE(P({"one"}, {{}, {}, 1}).ok());
  // Existing two-member specs still take any number.
  EXPECT_TRUE(P({"a", "b", "c"}, kSpec).ok());
  // After --, dashes are positional.
  a = P({"--", "-x"}, {{}, {}, 1});
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(a->positional(), std::vector<std::string>{"-x"});
}

TEST(Args, GlobalFlagsParseEverywhere) {
  auto a = P({"--json", "--socket", "/s"}, {{}, {}, 0});
  ASSERT_TRUE(a.ok()) << a.status().ToString();
  EXPECT_TRUE(a->Has("json"));
  EXPECT_EQ(*a->Get("socket"), "/s");
}

TEST(Args, TypedValuesNameTheFlag) {
  const FlagSpec spec{{"limit", "grace"}, {}};
  auto a = P({"--limit", "abc", "--grace", "5x"}, spec);
  ASSERT_TRUE(a.ok());
  auto n = a->GetInt("limit", 50, 1, 100);
  ASSERT_FALSE(n.ok());
  EXPECT_EQ(n.status().message(), "--limit takes a whole number, got 'abc'");
  auto d = a->GetDuration("grace", 0);
  ASSERT_FALSE(d.ok());
  EXPECT_NE(d.status().message().find("--grace takes a duration"), std::string::npos);
  EXPECT_NE(d.status().message().find("'5x'"), std::string::npos);

  a = P({"--limit", "0"}, spec);
  EXPECT_EQ(a->GetInt("limit", 50, 1, 100).status().message(), "--limit is 1 to 100, got 0");
  a = P({"--limit", "12", "--grace", "1h30m"}, spec);
  EXPECT_EQ(*a->GetInt("limit", 50, 1, 100), 12);
  EXPECT_EQ(*a->GetDuration("grace", 0), 5400);
  a = P({}, spec);
  EXPECT_EQ(*a->GetInt("limit", 50, 1, 100), 50);
  EXPECT_EQ(*a->GetDuration("grace", 7), 7);
  for (const char* bad : {"", "-", "1.5", "99999999999999999999", "1e3", " 1"}) {
    a = P({"--limit", bad}, spec);
    EXPECT_FALSE(a->GetInt("limit", 0, -100, 100).ok()) << bad;
  }
}

TEST(Args, DurationsAndSuggestions) {
  EXPECT_EQ(ParseDuration("0"), 0);
  EXPECT_EQ(ParseDuration("90s"), 90);
  EXPECT_EQ(ParseDuration("1d"), 86400);
  EXPECT_FALSE(ParseDuration("h"));
  EXPECT_FALSE(ParseDuration("10"));
  EXPECT_EQ(DidYouMean("lsit", {"list", "show"}), "; did you mean 'list'?");
  EXPECT_EQ(DidYouMean("pooll", {"pool", "list"}), "; did you mean 'pool'?");
  EXPECT_EQ(DidYouMean("xyz", {"list", "show"}), "");
  EXPECT_EQ(DidYouMean("list", {"list"}), "");
}

}  // namespace
}  // namespace rackgate::ctl
