// Tests of rackgated's configuration file: defaults and refusals.
#include "daemon/config.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace rackgate::daemon {
namespace {

TEST(Config, DefaultsAndRefusals) {
  auto c = ParseConfig("{}");
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->port, 22623);
  EXPECT_EQ(c->listen_addresses, std::vector<std::string>{"127.0.0.1"});
  EXPECT_EQ(c->tls_certificate_path(), "/var/lib/rackgate/tls/server.crt");
  auto d = ParseConfig(R"({"state_dir":"/s","port":0,"discovery":true,"ek_roots":["/r"]})");
  ASSERT_TRUE(d.ok()) << d.status().ToString();
  EXPECT_EQ(d->database_path(), "/s/rackgate.db");
  for (const char* bad : {"[]", "{", R"({"prot":1})", R"({"port":70000})", R"({"port":"1"})",
                          R"({"discovery":1})", R"({"ek_roots":"/r"})", R"({"listen_addresses":[]})",
                          R"({"default_pcr_selection":"sha256:99"})", R"({"log_level":"loud"})"}) {
    auto x = ParseConfig(bad);
    ASSERT_FALSE(x.ok()) << bad;
    EXPECT_EQ(x.status().reason(), "config_invalid") << bad;
  }
}

// --- Webhooks (docs/events.md) -------------------------------------------------

TEST(Config, Webhooks) {
  auto c = ParseConfig(R"({"webhooks":[
      {"url":"https://hooks.example/rackgate","secret_file":"/etc/rackgate/hook.secret"},
      {"url":"http://127.0.0.1:9000/x","secret_file":"/s","events":["machine_revoked","attestation_failed"],
       "ca_file":"/ca.pem"},
      {"url":"http://[::1]:9000/","secret_file":"/s"},
      {"url":"http://localhost/","secret_file":"/s"}]})");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  ASSERT_EQ(c->webhooks.size(), 4u);
  EXPECT_EQ(c->webhooks[0].url, "https://hooks.example/rackgate");
  EXPECT_EQ(c->webhooks[0].secret_file, "/etc/rackgate/hook.secret");
  EXPECT_TRUE(c->webhooks[0].events.empty());
  EXPECT_EQ(c->webhooks[1].events, (std::vector<std::string>{"machine_revoked", "attestation_failed"}));
  EXPECT_EQ(c->webhooks[1].ca_file, "/ca.pem");
  EXPECT_TRUE(ParseConfig("{}")->webhooks.empty());
  for (const char* bad : {
           R"({"webhooks":{}})",
           R"({"webhooks":["https://a/"]})",
           R"({"webhooks":[{"url":"https://a/"}]})",                                   // no secret
           R"({"webhooks":[{"url":"https://a/","secret_file":""}]})",
           R"({"webhooks":[{"url":"ftp://a/","secret_file":"/s"}]})",
           R"({"webhooks":[{"url":"https:///x","secret_file":"/s"}]})",                 // no host
           R"({"webhooks":[{"url":"http://10.0.0.1/x","secret_file":"/s"}]})",          // http, not loopback
           R"({"webhooks":[{"url":"http://127.0.0.1.evil.example/","secret_file":"/s"}]})",
           R"({"webhooks":[{"url":"http://localhost.evil.example/","secret_file":"/s"}]})",
           R"({"webhooks":[{"url":"https://u:p@a.example/","secret_file":"/s"}]})",     // credentials
           R"({"webhooks":[{"url":"https://a/","secret_file":"/s","events":["revoke"]}]})",
           R"({"webhooks":[{"url":"https://a/","secret_file":"/s","secret":"inline"}]})",  // unknown key
           R"({"webhooks":[{"url":"https://a/","secret_file":"/s"},{"url":"https://a/","secret_file":"/t"}]})",
       }) {
    auto x = ParseConfig(bad);
    ASSERT_FALSE(x.ok()) << bad;
    EXPECT_EQ(x.status().reason(), "config_invalid") << bad;
  }
}

}  // namespace
}  // namespace rackgate::daemon
