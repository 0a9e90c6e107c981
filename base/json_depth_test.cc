// Tests of the JSON structure scanner and the depth bound built on it.
#include "base/json_depth.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace rackgate {
namespace {

using Kind = JsonToken::Kind;

std::vector<JsonToken> Tokens(std::string_view text) {
  std::vector<JsonToken> out;
  ScanJson(text, [&](const JsonToken& t) {
    out.push_back(t);
    return true;
  });
  return out;
}

TEST(ScanJson, TokensDepthsAndLines) {
  const auto t = Tokens("{\"a\\\"]\": [1,\n \"x\\ny\"]}");
  ASSERT_EQ(t.size(), 9u);
  EXPECT_EQ(t[0].kind, Kind::kOpen);
  EXPECT_EQ(t[1].kind, Kind::kString);
  EXPECT_EQ(t[1].text, "a\\\"]");  // the bracket inside the string is no token
  EXPECT_EQ(t[1].depth, 1u);
  EXPECT_EQ(t[2].kind, Kind::kOther);  // the colon
  EXPECT_EQ(t[3].kind, Kind::kOpen);
  EXPECT_EQ(t[5].kind, Kind::kComma);
  EXPECT_EQ(t[6].kind, Kind::kString);
  EXPECT_EQ(t[6].line, 2u);
  EXPECT_EQ(t[7].kind, Kind::kClose);
  EXPECT_EQ(t[7].depth, 2u);
  EXPECT_EQ(t[8].depth, 1u);
}

TEST(ScanJson, StopsWhenAskedAndSurvivesMalformedText) {
  size_t seen = 0;
  ScanJson("[[[[", [&](const JsonToken&) { return ++seen < 2; });
  EXPECT_EQ(seen, 2u);
  const std::string text = "{\"k\": [\"unterminated";
  for (size_t n = 0; n <= text.size(); ++n) Tokens(std::string_view(text).substr(0, n));
  const auto closes = Tokens("]]}");
  ASSERT_EQ(closes.size(), 3u);
  EXPECT_EQ(closes[2].depth, 0u);
}

TEST(JsonDepth, CountsOnlyStructure) {
  EXPECT_EQ(JsonDepth(""), 0u);
  EXPECT_EQ(JsonDepth("{\"[[[[\": [[1]]}"), 3u);
  EXPECT_EQ(JsonDepth("]]][[}{"), 2u);
  EXPECT_EQ(JsonDepth(std::string(1000, '[')), 1000u);
}

}  // namespace
}  // namespace rackgate
