// Tests of rackgated's configuration file: defaults and refusals.
#include "daemon/config.h"

#include <gtest/gtest.h>

#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
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

// --- Several appliances (docs/agent.md) ------------------------------------------

TEST(Config, PublicUrls) {
  auto c = ParseConfig(R"({"public_urls":["https://a.rack:22623","https://10.0.0.2:22623"]})");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->public_urls, (std::vector<std::string>{"https://a.rack:22623", "https://10.0.0.2:22623"}));
  EXPECT_TRUE(ParseConfig("{}")->public_urls.empty());
  for (const char* bad : {R"({"public_urls":"https://a"})", R"({"public_urls":["http://a:1"]})",
                          R"({"public_urls":["https://a:1/x"]})", R"({"public_urls":["https://a:1,https://b:1"]})",
                          R"({"public_urls":["https://"]})"}) {
    auto x = ParseConfig(bad);
    ASSERT_FALSE(x.ok()) << bad;
    EXPECT_EQ(x.status().reason(), "config_invalid") << bad;
  }
  std::string many = R"({"public_urls":[)";
  for (int i = 0; i < 17; ++i) many += (i ? "," : "") + std::string("\"https://a") + std::to_string(i) + ":1\"";
  EXPECT_FALSE(ParseConfig(many + "]}").ok());
}

// --- Approver mode (docs/kubernetes.md) ----------------------------------------

TEST(Config, Kubernetes) {
  EXPECT_FALSE(ParseConfig("{}")->kubernetes.enabled());
  auto c = ParseConfig(
      R"({"kubernetes":{"kubeconfig":"/etc/rackgate/k.kubeconfig","context":"lab",)"
      R"("bootstrapper_groups":["system:serviceaccounts:openshift-machine-config-operator"],)"
      R"("max_attestation_age_seconds":3600}})");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_TRUE(c->kubernetes.enabled());
  EXPECT_EQ(c->kubernetes.context, "lab");
  EXPECT_EQ(c->kubernetes.bootstrapper_groups,
            std::vector<std::string>{"system:serviceaccounts:openshift-machine-config-operator"});
  EXPECT_EQ(c->kubernetes.max_attestation_age_seconds, 3600);
  auto in = ParseConfig(R"({"kubernetes":{"in_cluster":true}})");
  ASSERT_TRUE(in.ok()) << in.status().ToString();
  EXPECT_EQ(in->kubernetes.bootstrapper_groups, std::vector<std::string>{"system:bootstrappers"});
  for (const char* bad : {R"({"kubernetes":[]})", R"({"kubernetes":{}})", R"({"kubernetes":{"kubeconfig":1}})",
                          R"({"kubernetes":{"kubeconfig":"/k","in_cluster":true}})",
                          R"({"kubernetes":{"kubeconfig":"/k","bootstrapper_groups":[]}})",
                          R"({"kubernetes":{"kubeconfig":"/k","max_attestation_age_seconds":5}})",
                          R"({"kubernetes":{"kubeconfig":"/k","kube_config":"/k"}})"}) {
    auto x = ParseConfig(bad);
    ASSERT_FALSE(x.ok()) << bad;
    EXPECT_EQ(x.status().reason(), "config_invalid") << bad;
  }
}

// --- Observability (docs/observability.md) -------------------------------------

TEST(Config, MetricsListenerAndPublicSwitch) {
  auto d = ParseConfig("{}");
  ASSERT_TRUE(d.ok());
  EXPECT_TRUE(d->metrics.public_port);
  EXPECT_EQ(d->metrics.listen_address, "");
  EXPECT_EQ(d->metrics.audited_refusals_per_minute, 30);
  auto c = ParseConfig(R"({"metrics":{"listen":"127.0.0.1:9622","public":false,"audited_refusals_per_minute":5}})");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->metrics.listen_address, "127.0.0.1");
  EXPECT_EQ(c->metrics.listen_port, 9622);
  EXPECT_FALSE(c->metrics.public_port);
  EXPECT_EQ(c->metrics.audited_refusals_per_minute, 5);
  auto v6 = ParseConfig(R"({"metrics":{"listen":"[::1]:9622"}})");
  ASSERT_TRUE(v6.ok()) << v6.status().ToString();
  EXPECT_EQ(v6->metrics.listen_address, "::1");
  for (const char* bad : {R"({"metrics":[]})", R"({"metrics":{"listen":"9622"}})",
                          R"({"metrics":{"listen":"::1:9622"}})", R"({"metrics":{"listen":"127.0.0.1:0"}})",
                          R"({"metrics":{"listen":"127.0.0.1:99999"}})", R"({"metrics":{"listen":"127.0.0.1:x"}})",
                          R"({"metrics":{"public":"no"}})", R"({"metrics":{"port":1}})",
                          R"({"metrics":{"audited_refusals_per_minute":-1}})"}) {
    auto x = ParseConfig(bad);
    ASSERT_FALSE(x.ok()) << bad;
    EXPECT_EQ(x.status().reason(), "config_invalid") << bad;
    EXPECT_NE(x.status().message().find("metrics"), std::string::npos) << x.status().message();
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

// --- The store (docs/ha.md) ---------------------------------------------------------

TEST(Config, DatabaseForms) {
  EXPECT_EQ(ParseConfig(R"({"state_dir":"/s"})")->database_path(), "/s/rackgate.db");
  EXPECT_EQ(ParseConfig(R"({"database":"/d/x.db"})")->database_path(), "/d/x.db");
  EXPECT_EQ(ParseConfig(R"({"database":"sqlite:/d/y.db"})")->database_path(), "/d/y.db");
  auto pg = ParseConfig(R"({"database":"postgresql://rackgate@10.0.0.5:5432/rackgate"})");
  ASSERT_TRUE(pg.ok()) << pg.status().ToString();
  EXPECT_TRUE(pg->database_is_server());
  EXPECT_EQ(pg->database_path(), "");
  EXPECT_TRUE(ParseConfig(R"({"database":"postgres://h/db"})")->database_is_server());
  EXPECT_EQ(ParseConfig("{}")->database_wait_seconds, 300);
  for (const char* bad : {R"({"database":"mysql://h/db"})", R"({"database":"relative.db"})",
                          R"({"database":"sqlite:"})", R"({"database":"sqlite:x.db"})",
                          R"({"database":"postgresql://"})", R"({"database":1})",
                          R"({"database":"/x.db","database_password_file":"/p"})",
                          R"({"database_password_file":"/p"})", R"({"database_wait_seconds":-1})"}) {
    auto x = ParseConfig(bad);
    ASSERT_FALSE(x.ok()) << bad;
    EXPECT_EQ(x.status().reason(), "config_invalid") << bad;
  }
  // The refusal names the accepted forms and never repeats the value.
  auto refused = ParseConfig(R"({"database":"mysql://u:hunter2@h/db"})");
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find("postgresql://"), std::string::npos);
  EXPECT_EQ(refused.status().ToString().find("hunter2"), std::string::npos);
}

TEST(Config, RedactDatabaseHidesEverySecret) {
  EXPECT_EQ(RedactDatabase("postgresql://rackgate:hunter2@10.0.0.5:5432/rackgate"),
            "postgresql://rackgate:***@10.0.0.5:5432/rackgate");
  EXPECT_EQ(RedactDatabase("postgresql://rackgate@a:5432,b:5433/rackgate?password=hunter2&"
                           "target_session_attrs=read-write"),
            "postgresql://rackgate@a:5432,b:5433/rackgate?password=***&target_session_attrs=read-write");
  // libpq decodes keys: pass%77ord is password; sslpassword is a secret too.
  EXPECT_EQ(RedactDatabase("postgresql://h/db?Pass%77ord=hunter2&sslpassword=hunter2&sslmode=require"),
            "postgresql://h/db?Pass%77ord=***&sslpassword=***&sslmode=require");
  // Userinfo ends at the first '@' before a '/', as libpq reads it: a '?'
  // or an '@' inside the password hides it whole.
  EXPECT_EQ(RedactDatabase("postgresql://u:hunt?er2@h/db"), "postgresql://u:***@h/db");
  EXPECT_EQ(RedactDatabase("postgresql://u:p%40ss@h"), "postgresql://u:***@h");
  // A fragment, and anything after it, is dropped.
  EXPECT_EQ(RedactDatabase("postgresql://h/db?password=hun#ter2"), "postgresql://h/db?password=***");
  // Another scheme (a typo for --to) is redacted the same way.
  EXPECT_EQ(RedactDatabase("mysql://u:hunter2@h/d"), "mysql://u:***@h/d");
  EXPECT_EQ(RedactDatabase("postgres://h/db"), "postgres://h/db");
  EXPECT_EQ(RedactDatabase("postgresql://h/db?"), "postgresql://h/db?");
  EXPECT_EQ(RedactDatabase("sqlite:/d/x.db"), "/d/x.db");
  EXPECT_EQ(RedactDatabase("/d/x.db"), "/d/x.db");
}

TEST(Config, DatabasePasswordFile) {
  char dir_template[] = "/tmp/rackgate-config-XXXXXX";
  ASSERT_NE(::mkdtemp(dir_template), nullptr);
  const std::string dir = dir_template;
  const std::string file = dir + "/db.pass";
  {
    std::ofstream f(file);
    f << "s3cret /&?\n";
  }
  ::chmod(file.c_str(), 0600);
  auto c = ParseConfig(R"({"database":"postgresql://rackgate@h/db?sslmode=require","database_password_file":")" +
                       file + "\"}");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  auto url = DatabaseForStore(*c);
  ASSERT_TRUE(url.ok()) << url.status().ToString();
  EXPECT_EQ(*url, "postgresql://rackgate@h/db?sslmode=require&password=s3cret%20%2F%26%3F");
  EXPECT_EQ(RedactDatabase(*url), "postgresql://rackgate@h/db?sslmode=require&password=***");
  // Readable by others: refused, naming the file and the fix, not the secret.
  ::chmod(file.c_str(), 0644);
  auto open = DatabaseForStore(*c);
  ASSERT_FALSE(open.ok());
  EXPECT_EQ(open.status().reason(), "config_invalid");
  EXPECT_NE(open.status().message().find("chmod 0600"), std::string::npos);
  EXPECT_EQ(open.status().message().find("s3cret"), std::string::npos);
  ::chmod(file.c_str(), 0640);
  EXPECT_TRUE(DatabaseForStore(*c).ok());
  // Empty, or missing.
  { std::ofstream f(file, std::ios::trunc); f << "\n"; }
  EXPECT_FALSE(DatabaseForStore(*c).ok());
  std::remove(file.c_str());
  EXPECT_FALSE(DatabaseForStore(*c).ok());
  ::rmdir(dir.c_str());
  // SQLite: the path, no file read.
  EXPECT_EQ(*DatabaseForStore(*ParseConfig(R"({"state_dir":"/s"})")), "/s/rackgate.db");
}

}  // namespace
}  // namespace rackgate::daemon
