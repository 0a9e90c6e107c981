// Tests of the admin API's query strings (wire/admin_query.h): each query's
// text, its round trip through the parameters the HTTP layer hands over
// (escapes undone), the defaults, and every malformed number and flag.
#include "wire/admin_query.h"

#include <gtest/gtest.h>

#include <string>

namespace rackgate::wire {
namespace {

// The parameters of an encoded query as MHD hands them over: split on & and
// =, percent-escapes undone, the first of a repeated name kept.
QueryParams Parse(const std::string& text) {
  QueryParams out;
  if (text.empty()) return out;
  EXPECT_EQ(text[0], '?');
  const auto unescape = [](const std::string& s) {
    std::string r;
    for (size_t i = 0; i < s.size(); ++i) {
      if (s[i] == '%' && i + 2 < s.size()) {
        r += static_cast<char>(std::stoi(s.substr(i + 1, 2), nullptr, 16));
        i += 2;
      } else {
        r += s[i];
      }
    }
    return r;
  };
  size_t at = 1;
  while (at <= text.size()) {
    size_t end = text.find('&', at);
    if (end == std::string::npos) end = text.size();
    const std::string pair = text.substr(at, end - at);
    const size_t eq = pair.find('=');
    out.emplace(unescape(pair.substr(0, eq)), eq == std::string::npos ? "" : unescape(pair.substr(eq + 1)));
    at = end + 1;
  }
  return out;
}

TEST(AuditQuery, TextRoundTripAndDefaults) {
  const AuditQuery q{std::string("node 1&x=y"), 50, 7};
  const std::string text = EncodeAuditQuery(q);
  EXPECT_EQ(text, "?limit=50&since=7&hostname=node%201%26x%3Dy");
  auto back = DecodeAuditQuery(Parse(text));
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(*back, q);
  EXPECT_EQ(EncodeAuditQuery({}), "?limit=100");
  auto none = DecodeAuditQuery({});
  ASSERT_TRUE(none.ok());
  EXPECT_EQ(*none, AuditQuery{});
  EXPECT_EQ(none->limit, 100);
  // Parameters it does not name are ignored.
  EXPECT_TRUE(DecodeAuditQuery({{"later", "x"}}).ok());
}

TEST(AuditVerifyQuery, TextRoundTrip) {
  const AuditVerifyQuery q{"12:" + std::string(64, 'a')};
  const std::string text = EncodeAuditVerifyQuery(q);
  EXPECT_EQ(text, "?anchor=12%3A" + std::string(64, 'a'));
  auto back = DecodeAuditVerifyQuery(Parse(text));
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(*back, q);
  EXPECT_EQ(EncodeAuditVerifyQuery({}), "");
  // The anchor's form is the core's to check: carried as given.
  auto odd = DecodeAuditVerifyQuery({{"anchor", "x"}});
  ASSERT_TRUE(odd.ok());
  EXPECT_EQ(odd->anchor, "x");
}

TEST(EventQuery, TextRoundTripAndDefaults) {
  for (const EventQuery& q : {EventQuery{50, true}, EventQuery{1, false}}) {
    auto back = DecodeEventQuery(Parse(EncodeEventQuery(q)));
    ASSERT_TRUE(back.ok()) << back.status().ToString();
    EXPECT_EQ(*back, q);
  }
  EXPECT_EQ(EncodeEventQuery({50, true}), "?limit=50&pending=1");
  EXPECT_EQ(*DecodeEventQuery({}), (EventQuery{100, false}));
}

TEST(CsrQuery, TextRoundTripAndDefaults) {
  for (const CsrQuery& q : {CsrQuery{true, 1000}, CsrQuery{false, 5}}) {
    auto back = DecodeCsrQuery(Parse(EncodeCsrQuery(q)));
    ASSERT_TRUE(back.ok()) << back.status().ToString();
    EXPECT_EQ(*back, q);
  }
  EXPECT_EQ(EncodeCsrQuery({true, 1000}), "?limit=1000&all=1");
  EXPECT_EQ(*DecodeCsrQuery({}), (CsrQuery{false, 1000}));
}

TEST(CertificateQuery, TextRoundTripAndDefaults) {
  const CertificateQuery q{std::string("node-1"), 20};
  EXPECT_EQ(EncodeCertificateQuery(q), "?limit=20&hostname=node-1");
  auto back = DecodeCertificateQuery(Parse(EncodeCertificateQuery(q)));
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(*back, q);
  EXPECT_EQ(*DecodeCertificateQuery({}), (CertificateQuery{std::nullopt, 1000}));
}

TEST(MachineListQuery, TextRoundTripAndDefaults) {
  const MachineListQuery q{std::string("gpu workers"), std::string("joined")};
  EXPECT_EQ(EncodeMachineListQuery(q), "?pool=gpu%20workers&state=joined");
  auto back = DecodeMachineListQuery(Parse(EncodeMachineListQuery(q)));
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(*back, q);
  EXPECT_EQ(EncodeMachineListQuery({}), "");
  EXPECT_EQ(*DecodeMachineListQuery({}), MachineListQuery{});
  EXPECT_EQ(*DecodeMachineListQuery({{"state", "revoked"}}), (MachineListQuery{std::nullopt, "revoked"}));
}

// The flags as the appliance always took them ("1"; "0" is off; a bare
// name is on), and the words true and false.
TEST(Flags, OnAndOff) {
  for (const char* on : {"1", "true", ""}) {
    EXPECT_TRUE(DecodeEventQuery({{"pending", on}})->pending) << on;
    EXPECT_TRUE(DecodeCsrQuery({{"all", on}})->all) << on;
  }
  for (const char* off : {"0", "false"}) {
    EXPECT_FALSE(DecodeEventQuery({{"pending", off}})->pending) << off;
    EXPECT_FALSE(DecodeCsrQuery({{"all", off}})->all) << off;
  }
}

// A malformed number or flag is refused, naming the parameter: it no
// longer falls back to the default unnoticed.
TEST(Queries, RefuseMalformedNumbersAndFlags) {
  for (const char* bad : {"", "abc", "5x", " 5", "5 ", "1.5", "+5", "0x10", "99999999999999999999"}) {
    auto audit = DecodeAuditQuery({{"limit", bad}});
    ASSERT_FALSE(audit.ok()) << bad;
    EXPECT_EQ(audit.status().reason(), "field_invalid") << bad;
    EXPECT_EQ(audit.status().code(), Status::Code::kInvalidArgument);
    EXPECT_NE(audit.status().message().find("limit"), std::string::npos) << audit.status().message();
    EXPECT_EQ(DecodeAuditQuery({{"since", bad}}).status().reason(), "field_invalid") << bad;
    EXPECT_EQ(DecodeEventQuery({{"limit", bad}}).status().reason(), "field_invalid") << bad;
    EXPECT_EQ(DecodeCsrQuery({{"limit", bad}}).status().reason(), "field_invalid") << bad;
    EXPECT_EQ(DecodeCertificateQuery({{"limit", bad}}).status().reason(), "field_invalid") << bad;
  }
  for (const char* bad : {"2", "yes", "no", "TRUE", " 1"}) {
    auto events = DecodeEventQuery({{"pending", bad}});
    ASSERT_FALSE(events.ok()) << bad;
    EXPECT_EQ(events.status().reason(), "field_invalid") << bad;
    EXPECT_NE(events.status().message().find("pending"), std::string::npos);
    EXPECT_EQ(DecodeCsrQuery({{"all", bad}}).status().reason(), "field_invalid") << bad;
  }
  // Negative numbers are numbers: the core clamps a limit.
  EXPECT_EQ(DecodeAuditQuery({{"limit", "-1"}})->limit, -1);
}

}  // namespace
}  // namespace rackgate::wire
