// Tests for the inventory file's formats: RFC 4180 CSV with physical lines,
// and the lines of a JSON inventory's rows.
#include "ctl/inventory_format.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <string_view>
#include <vector>

namespace rackgate::ctl {
namespace {

using Fields = std::vector<std::string>;

TEST(InventoryCsv, PlainRecordsWithTheirLines) {
  auto r = ParseCsv("hostname,pool\nnode-1,a\n\nnode-2,b\n");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ASSERT_EQ(r->size(), 3u);
  EXPECT_EQ((*r)[0].fields, (Fields{"hostname", "pool"}));
  EXPECT_EQ((*r)[0].line, 1u);
  EXPECT_EQ((*r)[1].fields, (Fields{"node-1", "a"}));
  EXPECT_EQ((*r)[1].line, 2u);
  EXPECT_EQ((*r)[2].line, 4u);  // the blank line 3 is skipped, not renumbered
}

TEST(InventoryCsv, QuotesBomAndCrlf) {
  auto r = ParseCsv("\xEF\xBB\xBFh,v\r\n\"a,b\",\"say \"\"hi\"\"\"\r\n\"two\r\nlines\",\r\nlast,\"\"\r\n");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ASSERT_EQ(r->size(), 4u);
  EXPECT_EQ((*r)[0].fields, (Fields{"h", "v"}));  // no BOM in the first name
  EXPECT_EQ((*r)[1].fields, (Fields{"a,b", "say \"hi\""}));
  EXPECT_EQ((*r)[2].fields, (Fields{"two\r\nlines", ""}));
  EXPECT_EQ((*r)[2].line, 3u);
  EXPECT_EQ((*r)[3].fields, (Fields{"last", ""}));
  EXPECT_EQ((*r)[3].line, 5u);  // after a record that spans two lines
}

TEST(InventoryCsv, NoFinalNewlineAndEmptyFields) {
  auto r = ParseCsv("a,,c\n,,");
  ASSERT_TRUE(r.ok());
  ASSERT_EQ(r->size(), 2u);
  EXPECT_EQ((*r)[0].fields, (Fields{"a", "", "c"}));
  EXPECT_EQ((*r)[1].fields, (Fields{"", "", ""}));
  EXPECT_EQ((*r)[1].line, 2u);
}

TEST(InventoryCsv, MalformedQuotingNamesTheLine) {
  struct Case {
    const char* text;
    const char* where;
  };
  for (const Case& c : {Case{"h\n\"open,x\nmore\n", "line 2"}, Case{"h\nx,\"a\"b\n", "line 2"},
                        Case{"h\n\nx,a\"b\n", "line 3"}, Case{"\"", "line 1"}}) {
    auto r = ParseCsv(c.text);
    ASSERT_FALSE(r.ok()) << c.text;
    EXPECT_EQ(r.status().reason(), "row_invalid");
    EXPECT_EQ(r.status().message().rfind(std::string(c.where) + ":", 0), 0u) << r.status().message();
  }
}

// Every prefix of a valid file: cut inside a quoted field (an odd number of
// quotes so far) it is refused with row_invalid; anywhere else it parses.
// None reads past the end.
TEST(InventoryCsv, Truncation) {
  const std::string text = "\xEF\xBB\xBFh,v\r\n\"a,b\",\"x\"\"y\"\r\n\"l1\nl2\",z\n";
  for (size_t n = 0; n <= text.size(); ++n) {
    const std::string_view prefix = std::string_view(text).substr(0, n);
    const size_t quotes = std::count(prefix.begin(), prefix.end(), '"');
    // A CR right after a closing quote is not yet a line end.
    const bool cr_after_quote = n >= 2 && prefix.substr(n - 2) == "\"\r";
    auto r = ParseCsv(prefix);
    if (quotes % 2 == 1 || cr_after_quote) {
      ASSERT_FALSE(r.ok()) << n;
      EXPECT_EQ(r.status().reason(), "row_invalid") << n;
    } else {
      EXPECT_TRUE(r.ok()) << n << ": " << r.status().ToString();
    }
  }
}

TEST(InventoryJson, RowLines) {
  const std::string text =
      "{\"note\": \"machines: [ {\\\"x\\\" ]\",\n"
      " \"machines\": [\n"
      "  {\"hostname\": \"a\", \"addresses\": [\"InternalIP=1.2.3.4\"]},\n"
      "\n"
      "  {\"hostname\": \"b,}]\"}, 7,\n"
      "  [1, 2]\n"
      " ],\n"
      " \"other\": [{}]}\n";
  EXPECT_EQ(JsonRowLines(text), (std::vector<size_t>{3, 5, 5, 6}));
  EXPECT_TRUE(JsonRowLines("{\"machines\": []}").empty());
  EXPECT_TRUE(JsonRowLines("{\"rows\": [{}]}").empty());
  EXPECT_TRUE(JsonRowLines("]]]").empty());
  // Truncated texts give at most the rows seen so far.
  for (size_t n = 0; n <= text.size(); ++n) EXPECT_LE(JsonRowLines(text.substr(0, n)).size(), 4u);
}

}  // namespace
}  // namespace rackgate::ctl
