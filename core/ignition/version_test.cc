// Tests of spec versions and of Accept negotiation.
#include "core/ignition.h"

#include <gtest/gtest.h>

#include "core/ignition/testing/test_util.h"

namespace rackgate::core::ignition {
namespace {

using nlohmann::json;

// ---------------------------------------------------------------------------
// Versions

TEST(SpecVersion, ParseFormatCompare) {
  auto v = ParseSpecVersion("3.2.0");
  ASSERT_TRUE(v.ok());
  EXPECT_EQ(*v, k320);
  EXPECT_EQ(FormatSpecVersion(*v), "3.2.0");
  EXPECT_LT(k310, k320);
  EXPECT_LT((SpecVersion{3, 9, 0}), (SpecVersion{4, 0, 0}));
  EXPECT_GT((SpecVersion{3, 10, 0}), (SpecVersion{3, 9, 9}));
  for (const char* bad : {"", "3", "3.1", "3.1.0.0", "03.1.0", "3.1.0-experimental", "3.a.0",
                          "-3.1.0", "3..0", "3.1.0 ", "1234567.0.0"}) {
    EXPECT_FALSE(ParseSpecVersion(bad).ok()) << bad;
  }
  EXPECT_TRUE(IsSupported(k300));
  EXPECT_TRUE(IsSupported(k330));
  EXPECT_FALSE(IsSupported(SpecVersion{3, 4, 0}));
  EXPECT_FALSE(IsSupported(SpecVersion{2, 2, 0}));
}

// ---------------------------------------------------------------------------
// Negotiation

constexpr std::string_view kIgn = "application/vnd.coreos.ignition+json";

std::string IgnVersion(std::string_view v) {
  return std::string(kIgn) + ";version=" + std::string(v);
}

struct NegotiationCase {
  std::string name;
  std::optional<std::string> accept;
  SpecVersion config = k310;
  std::optional<SpecVersion> want;  // nullopt: an error with want_reason
  std::string want_reason;
};

TEST(Negotiate, Table) {
  const std::string ignition_header = IgnVersion("3.3.0") + ", */*;q=0.1";
  const std::vector<NegotiationCase> cases = {
      {.name = "no header", .accept = std::nullopt, .want = k310},
      {.name = "empty", .accept = "", .want = k310},
      {.name = "blank", .accept = "  \t ", .want = k310},
      {.name = "only commas", .accept = " , ,", .want = k310},
      {.name = "3.0.0", .accept = IgnVersion("3.0.0"), .want = k300},
      {.name = "3.1.0", .accept = IgnVersion("3.1.0"), .want = k310},
      {.name = "3.2.0", .accept = IgnVersion("3.2.0"), .want = k320},
      {.name = "3.3.0", .accept = IgnVersion("3.3.0"), .want = k330},
      {.name = "3.4.0", .accept = IgnVersion("3.4.0"), .want = k330},
      {.name = "3.4.0-experimental", .accept = IgnVersion("3.4.0-experimental"), .want = k330},
      {.name = "3.9.0", .accept = IgnVersion("3.9.0"), .want = k330},
      {.name = "3.3.0-experimental is below 3.3.0",
       .accept = IgnVersion("3.3.0-experimental"),
       .want = k320},
      {.name = "3.0.0-experimental is below everything",
       .accept = IgnVersion("3.0.0-experimental"),
       .want_reason = "ignition_version_unsupported"},
      {.name = "2.2.0 only",
       .accept = IgnVersion("2.2.0"),
       .want_reason = "ignition_version_unsupported"},
      {.name = "4.0.0 only",
       .accept = IgnVersion("4.0.0"),
       .want_reason = "ignition_version_unsupported"},
      {.name = "unparsable version",
       .accept = IgnVersion("three"),
       .want_reason = "ignition_version_unsupported"},
      {.name = "text/html", .accept = "text/html", .want_reason = "ignition_version_unsupported"},
      {.name = "ignition without version", .accept = std::string(kIgn), .want = k310},
      {.name = "application/json", .accept = "application/json", .want = k310},
      {.name = "application/*", .accept = "application/*", .want = k310},
      {.name = "*/*", .accept = "*/*", .want = k310},
      {.name = "Ignition's own header", .accept = ignition_header, .want = k330},
      {.name = "Ignition's own header, config 3.3.0",
       .accept = ignition_header,
       .config = k330,
       .want = k330},
      {.name = "higher q wins",
       .accept = IgnVersion("3.1.0") + ";q=0.5, " + IgnVersion("3.2.0") + ";q=0.9",
       .want = k320},
      {.name = "higher q wins over a higher version",
       .accept = IgnVersion("3.1.0") + ";q=0.9, " + IgnVersion("3.3.0") + ";q=0.5",
       .want = k310},
      {.name = "q ties go to the higher version",
       .accept = IgnVersion("3.2.0") + ", " + IgnVersion("3.1.0"),
       .want = k320},
      {.name = "q=0 excludes, the wildcard gives the config's version",
       .accept = IgnVersion("3.3.0") + ";q=0, */*;q=0.1",
       .config = k320,
       .want = k320},
      {.name = "q=0 excludes the config's own version too",
       .accept = IgnVersion("3.3.0") + ";q=0, */*;q=0.1",
       .config = k330,
       .want_reason = "ignition_version_unsupported"},
      {.name = "*/*;q=0 only", .accept = "*/*;q=0", .want_reason = "ignition_version_unsupported"},
      {.name = "quoted version", .accept = std::string(kIgn) + "; version=\"3.2.0\"", .want = k320},
      {.name = "quoted pair in a quoted version",
       .accept = std::string(kIgn) + ";version=\"3.\\2.0\"",
       .want = k320},
      {.name = "case-insensitive type and parameter names",
       .accept = "Application/VND.CoreOS.Ignition+JSON;VERSION=3.2.0;Q=1",
       .want = k320},
      {.name = "other parameters and extensions after q are ignored",
       .accept = std::string(kIgn) + ";charset=utf-8;version=3.2.0;q=0.5;ext=\"x\"",
       .want = k320},
      {.name = "repeated version parameter matches nothing",
       .accept = std::string(kIgn) + ";version=3.2.0;version=3.1.0",
       .want_reason = "ignition_version_unsupported"},
      {.name = "garbage", .accept = "garbage", .want_reason = "accept_malformed"},
      {.name = "missing subtype", .accept = "application/", .want_reason = "accept_malformed"},
      {.name = "*/json", .accept = "*/json", .want_reason = "accept_malformed"},
      {.name = "two ranges without a comma",
       .accept = "text/html text/plain",
       .want_reason = "accept_malformed"},
      {.name = "q above 1", .accept = "*/*;q=1.5", .want_reason = "accept_malformed"},
      {.name = "q with 4 decimals", .accept = "*/*;q=0.1234", .want_reason = "accept_malformed"},
      {.name = "q=1.001", .accept = "*/*;q=1.001", .want_reason = "accept_malformed"},
      {.name = "q not a number", .accept = "*/*;q=high", .want_reason = "accept_malformed"},
      {.name = "quoted q", .accept = "*/*;q=\"0.5\"", .want_reason = "accept_malformed"},
      {.name = "unterminated quote",
       .accept = std::string(kIgn) + ";version=\"3.2.0",
       .want_reason = "accept_malformed"},
      {.name = "parameter without value",
       .accept = std::string(kIgn) + ";version",
       .want_reason = "accept_malformed"},
      {.name = "space around =",
       .accept = std::string(kIgn) + ";version = 3.2.0",
       .want_reason = "accept_malformed"},
      {.name = "control character",
       .accept = std::string("text/html\x01"),
       .want_reason = "accept_malformed"},
  };
  for (const NegotiationCase& c : cases) {
    std::optional<std::string_view> accept;
    if (c.accept) accept = *c.accept;
    Result<SpecVersion> got = Negotiate(accept, c.config);
    if (c.want) {
      ASSERT_TRUE(got.ok()) << c.name << ": " << got.status().ToString();
      EXPECT_EQ(V(*got), V(*c.want)) << c.name;
    } else {
      ASSERT_FALSE(got.ok()) << c.name << " gave " << V(*got);
      EXPECT_EQ(got.status().reason(), c.want_reason) << c.name;
    }
  }
}

TEST(Negotiate, StatusCodes) {
  EXPECT_EQ(Negotiate("garbage", k310).status().code(), Status::Code::kInvalidArgument);
  EXPECT_EQ(Negotiate("text/html", k310).status().code(), Status::Code::kUnsupported);
}

TEST(Negotiate, BoundsOnRangesAndLength) {
  std::string header = "*/*";
  for (size_t i = 1; i < kMaxAcceptRanges; ++i) header += ",*/*";
  EXPECT_TRUE(Negotiate(header, k310).ok());  // exactly 64
  header += ",*/*";
  Result<SpecVersion> r = Negotiate(header, k310);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().reason(), "accept_malformed");

  // Within the length bound, padding is fine; one byte over is refused.
  std::string padded = "*/*" + std::string(kMaxAcceptBytes - 3, ' ');
  EXPECT_TRUE(Negotiate(padded, k310).ok());
  padded += ' ';
  EXPECT_EQ(Negotiate(padded, k310).status().reason(), "accept_malformed");
}

// Every prefix of a real header either parses or is refused as malformed;
// none crashes or reads past the end.
TEST(Negotiate, TruncationLoop) {
  const std::string full = std::string(kIgn) + ";version=\"3.3.0\";q=0.9, */*;q=0.1";
  for (size_t n = 0; n <= full.size(); ++n) {
    Result<SpecVersion> r = Negotiate(std::string_view(full).substr(0, n), k310);
    if (!r.ok()) {
      EXPECT_TRUE(r.status().reason() == "accept_malformed" ||
                  r.status().reason() == "ignition_version_unsupported")
          << n << ": " << r.status().ToString();
    }
  }
}

}  // namespace
}  // namespace rackgate::core::ignition
