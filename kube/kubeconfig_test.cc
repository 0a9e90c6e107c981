#include "kube/kubeconfig.h"

#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "base/base64.h"

namespace rackgate::kube {
namespace {

const std::string kCa = "-----BEGIN CERTIFICATE-----\nMIIBca\n-----END CERTIFICATE-----\n";
const std::string kCert = "-----BEGIN CERTIFICATE-----\nMIIBcert\n-----END CERTIFICATE-----\n";
const std::string kKey = "-----BEGIN EC PRIVATE KEY-----\nMHcsecret\n-----END EC PRIVATE KEY-----\n";
const std::string kToken = "abcdef.0123456789abcdef";

class KubeconfigTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/kubeconfig_test.XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  std::string Put(const std::string& name, const std::string& text) {
    const std::string path = dir_ + "/" + name;
    std::filesystem::create_directories(std::filesystem::path(path).parent_path());
    std::ofstream(path, std::ios::binary) << text;
    return path;
  }

  // A kubeconfig with one context "lab" over `cluster` and `user` (YAML
  // mapping bodies, indented by 4).
  std::string Config(const std::string& cluster, const std::string& user, const std::string& extra = "") {
    return "apiVersion: v1\nkind: Config\ncurrent-context: lab\n"
           "clusters:\n- name: c1\n  cluster:\n" + cluster +
           "contexts:\n- name: lab\n  context:\n    cluster: c1\n    user: u1\n" + extra +
           "users:\n- name: u1\n  user:\n" + user;
  }

  std::string CaData() const { return "    certificate-authority-data: " + base64::Encode(kCa) + "\n"; }

  std::string dir_;
};

TEST_F(KubeconfigTest, DataFieldsAndClientCertificate) {
  const std::string path = Put("config", Config("    server: https://10.0.0.1:6443/\n" + CaData(),
                                                "    client-certificate-data: " + base64::Encode(kCert) +
                                                    "\n    client-key-data: " + base64::Encode(kKey) + "\n"));
  Result<Credentials> c = LoadKubeconfig(path);
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->server, "https://10.0.0.1:6443");
  EXPECT_EQ(c->ca_pem, kCa);
  EXPECT_EQ(c->client_cert_pem, kCert);
  EXPECT_EQ(c->client_key_pem, kKey);
  EXPECT_TRUE(c->bearer_token.empty());
}

TEST_F(KubeconfigTest, FilesResolveAgainstTheKubeconfigsDirectory) {
  Put("pki/ca.crt", kCa);
  Put("pki/client.crt", kCert);
  Put("pki/client.key", kKey);
  const std::string path = Put("config", Config("    server: https://api.lab:6443\n"
                                                "    certificate-authority: pki/ca.crt\n",
                                                "    client-certificate: pki/client.crt\n"
                                                "    client-key: " + dir_ + "/pki/client.key\n"));
  Result<Credentials> c = LoadKubeconfig(path);
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->ca_pem, kCa);
  EXPECT_EQ(c->client_cert_pem, kCert);
  EXPECT_EQ(c->client_key_pem, kKey);
}

TEST_F(KubeconfigTest, TokenAndTokenFile) {
  Result<Credentials> c =
      LoadKubeconfig(Put("a", Config("    server: https://h\n" + CaData(), "    token: " + kToken + "\n")));
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->bearer_token, kToken);
  Put("token", kToken + "\n");
  c = LoadKubeconfig(Put("b", Config("    server: https://h\n" + CaData(), "    tokenFile: token\n")));
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->bearer_token, kToken);  // the file's newline dropped
}

TEST_F(KubeconfigTest, NamedContextOverCurrentContext) {
  const std::string two =
      "current-context: one\n"
      "clusters:\n"
      "- name: a\n  cluster:\n    server: https://a.example\n" + CaData() +
      "- name: b\n  cluster:\n    server: https://b.example:443\n" + CaData() +
      "contexts:\n"
      "- name: one\n  context: {cluster: a, user: u}\n"
      "- name: two\n  context: {cluster: b, user: u}\n"
      "users:\n- name: u\n  user: {token: " + kToken + "}\n";
  const std::string path = Put("config", two);
  Result<Credentials> c = LoadKubeconfig(path);
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->server, "https://a.example");
  c = LoadKubeconfig(path, "two");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->server, "https://b.example:443");
  c = LoadKubeconfig(path, "three");
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().reason(), "kubeconfig_invalid");
  EXPECT_NE(c.status().message().find("\"three\" not found"), std::string::npos) << c.status().message();
}

void ExpectRefused(const Result<Credentials>& c, const std::string& reason, const std::string& words) {
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().reason(), reason) << c.status().ToString();
  EXPECT_NE(c.status().message().find(words), std::string::npos) << c.status().message();
}

TEST_F(KubeconfigTest, Refusals) {
  const std::string ok_cluster = "    server: https://h\n" + CaData();
  const std::string token = "    token: " + kToken + "\n";
  ExpectRefused(LoadKubeconfig(Put("1", Config("    server: http://h\n" + CaData(), token))),
                "kubeconfig_unsupported", "https://");
  ExpectRefused(LoadKubeconfig(Put("2", Config(ok_cluster + "    insecure-skip-tls-verify: true\n", token))),
                "kubeconfig_unsupported", "insecure-skip-tls-verify");
  ExpectRefused(LoadKubeconfig(Put("3", Config(ok_cluster, "    exec:\n      command: aws\n"))),
                "kubeconfig_unsupported", "supported: token, tokenFile");
  ExpectRefused(LoadKubeconfig(Put("4", Config(ok_cluster, "    auth-provider:\n      name: gcp\n"))),
                "kubeconfig_unsupported", "auth-provider");
  ExpectRefused(LoadKubeconfig(Put("5", Config(ok_cluster, "    username: a\n    password: b\n"))),
                "kubeconfig_unsupported", "basic authentication");
  ExpectRefused(LoadKubeconfig(Put("6", Config("    server: https://h\n", token))), "kubeconfig_invalid",
                "certificate-authority");
  ExpectRefused(LoadKubeconfig(Put("7", Config(ok_cluster, "    client-certificate-data: " +
                                                               base64::Encode(kCert) + "\n"))),
                "kubeconfig_invalid", "needs its key");
  ExpectRefused(LoadKubeconfig(Put("8", Config(ok_cluster, "    client-key: nowhere.key\n    token: x\n"))),
                "kubeconfig_unreadable", "nowhere.key");
  ExpectRefused(LoadKubeconfig(Put("9", Config(ok_cluster, "    {}\n"))), "kubeconfig_invalid", "no credentials");
  ExpectRefused(LoadKubeconfig(Put("10", Config(ok_cluster, token + "    tokenFile: t\n"))), "kubeconfig_invalid",
                "not both");
  ExpectRefused(LoadKubeconfig(Put("11", Config("    server: https://h\n    certificate-authority-data: not-base64!\n",
                                                token))),
                "kubeconfig_invalid", "not base64");
  ExpectRefused(LoadKubeconfig(Put("12", "clusters: [\n")), "kubeconfig_invalid", "not YAML");
  ExpectRefused(LoadKubeconfig(Put("13", "- a\n- b\n")), "kubeconfig_invalid", "not a kubeconfig");
  ExpectRefused(LoadKubeconfig(Put("14", "clusters: []\n")), "kubeconfig_invalid", "current-context");
  ExpectRefused(LoadKubeconfig(Put("15", Config(ok_cluster + "    tls-server-name: x\n", token))),
                "kubeconfig_unsupported", "tls-server-name");
  ExpectRefused(LoadKubeconfig(Put("16", Config(ok_cluster, "    token: \"a b\"\n"))), "kubeconfig_invalid",
                "spaces");
  ExpectRefused(LoadKubeconfig(Put("18", "current-context: x\n")), "kubeconfig_invalid",
                "context \"x\" not found in contexts");
  ExpectRefused(LoadKubeconfig(Put("19", "current-context: x\ncontexts: {}\n")), "kubeconfig_invalid",
                "contexts is not a list");
  ExpectRefused(LoadKubeconfig(Put("20", "current-context: x\ncontexts:\n- name: x\n")), "kubeconfig_invalid",
                "has no context");
  ExpectRefused(LoadKubeconfig(Put("21", Config("    server: [a]\n" + CaData(), token))), "kubeconfig_invalid",
                "server is not a string");
  ExpectRefused(LoadKubeconfig(dir_ + "/absent"), "kubeconfig_unreadable", "absent");
  ExpectRefused(LoadKubeconfig(Put("17", Config(ok_cluster, token, "- name: x\n  context: 3\n")), "x"),
                "kubeconfig_invalid", "has no context");
}

TEST_F(KubeconfigTest, SecretsStayOutOfMessages) {
  const std::string secret = "s3cr3t-t0ken-value";
  // A token that is refused, and a key that is refused: neither may show.
  Result<Credentials> c = LoadKubeconfig(
      Put("a", Config("    server: https://h\n" + CaData(), "    token: \"" + secret + "\\n" + secret + "\"\n")));
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().ToString().find(secret), std::string::npos) << c.status().ToString();
  c = LoadKubeconfig(Put("b", Config("    server: https://h\n" + CaData(),
                                     "    client-certificate-data: " + base64::Encode(kCert) +
                                         "\n    client-key-data: " + base64::Encode(secret) + "\n")));
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().ToString().find(secret), std::string::npos) << c.status().ToString();
}

TEST_F(KubeconfigTest, TooLarge) {
  const std::string path = Put("big", std::string(kMaxKubeconfigBytes + 1, '#'));
  ExpectRefused(LoadKubeconfig(path), "kubeconfig_invalid", "larger than");
}

TEST_F(KubeconfigTest, InCluster) {
  InClusterPaths paths;
  paths.token_file = Put("sa/token", kToken + "\n");
  paths.ca_file = Put("sa/ca.crt", kCa);
  paths.host_env = "RACKGATE_TEST_KUBE_HOST";
  paths.port_env = "RACKGATE_TEST_KUBE_PORT";
  unsetenv(paths.host_env.c_str());
  ExpectRefused(InClusterCredentials(paths), "in_cluster_unavailable", "RACKGATE_TEST_KUBE_HOST");
  setenv(paths.host_env.c_str(), "10.96.0.1", 1);
  setenv(paths.port_env.c_str(), "443", 1);
  Result<Credentials> c = InClusterCredentials(paths);
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->server, "https://10.96.0.1:443");
  EXPECT_EQ(c->bearer_token, kToken);
  EXPECT_EQ(c->ca_pem, kCa);
  setenv(paths.host_env.c_str(), "fd00::1", 1);
  c = InClusterCredentials(paths);
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->server, "https://[fd00::1]:443");
  setenv(paths.port_env.c_str(), "443x", 1);
  ExpectRefused(InClusterCredentials(paths), "in_cluster_unavailable", "port");
  setenv(paths.port_env.c_str(), "443", 1);
  paths.token_file = dir_ + "/sa/none";
  ExpectRefused(InClusterCredentials(paths), "kubeconfig_unreadable", "token");
}

}  // namespace
}  // namespace rackgate::kube
