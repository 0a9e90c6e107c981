// Tests of --url parsing and the DNS expansion of the appliance list.
#include "agent/endpoints.h"

#include <gtest/gtest.h>

#include <map>

namespace rackgate::agent {
namespace {

std::vector<std::string> Urls(const Result<std::vector<Endpoint>>& r) {
  std::vector<std::string> out;
  for (const auto& e : *r) out.push_back(e.url);
  return out;
}

TEST(ParseApplianceUrls, RepeatedFlagsCommasAndSpaces) {
  auto r = ParseApplianceUrls({"https://a.rack:22623", "https://B.rack:22623/, https://10.0.0.3  https://[fd00::1]:8443"});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(Urls(r), (std::vector<std::string>{"https://a.rack:22623", "https://b.rack:22623", "https://10.0.0.3",
                                               "https://[fd00::1]:8443"}));
  EXPECT_EQ((*r)[1].host, "b.rack");
  EXPECT_EQ((*r)[1].port, 22623);
  EXPECT_EQ((*r)[2].port, 443);
  EXPECT_EQ((*r)[3].host, "fd00::1");
  EXPECT_EQ((*r)[3].port, 8443);
}

TEST(ParseApplianceUrls, DuplicatesDropped) {
  auto r = ParseApplianceUrls({"https://a:22623,https://A:22623/", "https://a:22623", "https://a:22624"});
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(Urls(r), (std::vector<std::string>{"https://a:22623", "https://a:22624"}));
}

TEST(ParseApplianceUrls, BadUrlsRefused) {
  for (const char* bad : {"http://a:22623", "https://", "https://a:22623/config", "https://user@a:22623",
                          "https://a:22623?x", "https://a:0", "https://a:65536", "https://a:", "https://a:x",
                          "https://[fd00::1", "https://[nothex]:1", "https://[fd00::1]x", "a:22623",
                          "https://a_b:22623", "https://a\x1b:22623"}) {
    auto r = ParseApplianceUrls({std::string("https://ok:1,") + bad});
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_EQ(r.status().reason(), "url_invalid") << bad;
    // The message names the fix and never prints control characters.
    EXPECT_NE(r.status().message().find("https://HOST[:PORT]"), std::string::npos);
    EXPECT_EQ(r.status().message().find('\x1b'), std::string::npos);
  }
  EXPECT_EQ(ParseApplianceUrls({}).status().reason(), "url_invalid");
  EXPECT_EQ(ParseApplianceUrls({" , "}).status().reason(), "url_invalid");
}

TEST(ParseApplianceUrls, AtMostSixteen) {
  std::vector<std::string> v;
  for (int i = 0; i < 16; ++i) v.push_back("https://a" + std::to_string(i) + ":22623");
  v.push_back("https://a0:22623");  // a duplicate does not count
  ASSERT_TRUE(ParseApplianceUrls(v).ok());
  v.push_back("https://a16:22623");
  auto r = ParseApplianceUrls(v);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().reason(), "too_many_urls");
}

TEST(ExpandEndpoints, EveryAddressOfANameIsAnEndpoint) {
  std::map<std::string, std::vector<std::string>> dns = {
      {"fleet.rack", {"10.0.0.1", "10.0.0.2", "fd00::2"}},
      {"single.rack", {"10.0.0.1"}},
  };
  int lookups = 0;
  auto resolve = [&](const std::string& h) {
    ++lookups;
    auto it = dns.find(h);
    return it == dns.end() ? std::vector<std::string>{} : it->second;
  };
  auto urls = ParseApplianceUrls({"https://fleet.rack:22623,https://10.0.0.9:22623,https://gone.rack,"
                                  "https://single.rack:22623"});
  ASSERT_TRUE(urls.ok());
  auto e = ExpandEndpoints(*urls, resolve);
  // First addresses of every URL first; an IP literal is not looked up; a
  // name that does not resolve stays one endpoint for libcurl to resolve.
  EXPECT_EQ(lookups, 3);
  ASSERT_EQ(e.size(), 6u);
  EXPECT_EQ(e[0].Name(), "https://fleet.rack:22623 [10.0.0.1]");
  EXPECT_EQ(e[1].Name(), "https://10.0.0.9:22623");
  EXPECT_EQ(e[2].Name(), "https://gone.rack");
  EXPECT_EQ(e[3].Name(), "https://single.rack:22623 [10.0.0.1]");  // another name: another TLS name
  EXPECT_EQ(e[4].Name(), "https://fleet.rack:22623 [10.0.0.2]");
  EXPECT_EQ(e[5].Name(), "https://fleet.rack:22623 [fd00::2]");
  EXPECT_EQ(e[5].host, "fleet.rack");  // TLS and Host keep the name
}

TEST(ExpandEndpoints, BoundedAndEachUrlKeepsOne) {
  std::vector<std::string> many;
  for (int i = 0; i < 40; ++i) many.push_back("10.1.0." + std::to_string(i));
  auto urls = ParseApplianceUrls({"https://big.rack:22623", "https://other.rack:22623"});
  ASSERT_TRUE(urls.ok());
  size_t dropped = 0;
  auto e = ExpandEndpoints(
      *urls,
      [&](const std::string& h) { return h == "big.rack" ? many : std::vector<std::string>{"10.2.0.1"}; },
      &dropped);
  ASSERT_EQ(e.size(), kMaxEndpoints);
  EXPECT_EQ(dropped, 40u + 1u - kMaxEndpoints);
  EXPECT_EQ(e[1].host, "other.rack");
}

}  // namespace
}  // namespace rackgate::agent
