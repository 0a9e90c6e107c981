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

}  // namespace
}  // namespace rackgate::daemon
