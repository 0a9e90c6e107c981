#include "agent/kubelet.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>

namespace rackgate::agent {
namespace {

namespace fs = std::filesystem;

TEST(Kubeconfig, QuotesEveryValue) {
  const std::string y = RenderKubeconfig("https://api:6443", "/pki/ca.crt", "/pki/c.pem", "/pki/c.pem");
  EXPECT_NE(y.find("server: \"https://api:6443\"\n"), std::string::npos);
  EXPECT_NE(y.find("certificate-authority: \"/pki/ca.crt\"\n"), std::string::npos);
  EXPECT_NE(y.find("client-certificate: \"/pki/c.pem\"\n"), std::string::npos);
  EXPECT_NE(y.find("client-key: \"/pki/c.pem\"\n"), std::string::npos);
  EXPECT_EQ(RenderKubeconfig("https://api", "/ca", "/c", "").find("client-key"), std::string::npos);
  // A path with a quote or a newline stays one scalar.
  const std::string odd = RenderKubeconfig("https://api", "/a\"b\nc", "/c", "");
  EXPECT_NE(odd.find("certificate-authority: \"/a\\\"b\\nc\"\n"), std::string::npos);
}

TEST(Kubeconfig, ApiserverUrl) {
  EXPECT_TRUE(ValidApiserverUrl("https://api.example:6443"));
  EXPECT_FALSE(ValidApiserverUrl("http://api"));
  EXPECT_FALSE(ValidApiserverUrl("https://"));
  EXPECT_FALSE(ValidApiserverUrl("https://api\n  evil: 1"));
  EXPECT_FALSE(ValidApiserverUrl("https://api\"x"));
}

// Issue 42: the flags win; without them the appliance's record names the
// API server and the serving certificate's addresses.
TEST(Kubeconfig, ApiserverAndNodeIpsFromFlagsElseTheRecord) {
  wire::MachineRecord m{"node-1", "workers", "attested"};
  m.apiserver = "https://api.pool:6443";
  m.addresses = {"10.0.0.5", "fd00::5"};
  EXPECT_EQ(ChosenApiserver("", m), "https://api.pool:6443");
  EXPECT_EQ(ChosenApiserver("https://api.flag:6443", m), "https://api.flag:6443");
  EXPECT_EQ(ChosenNodeIps({}, m), (std::vector<std::string>{"10.0.0.5", "fd00::5"}));
  EXPECT_EQ(ChosenNodeIps({"192.0.2.9"}, m), (std::vector<std::string>{"192.0.2.9"}));
  // An older appliance, or a pool without the setting, and no flag: none
  // (the csr step then refuses with apiserver_missing in signer mode).
  const wire::MachineRecord old{"node-1", "workers", "attested"};
  EXPECT_EQ(ChosenApiserver("", old), "");
  EXPECT_FALSE(ValidApiserverUrl(ChosenApiserver("", old)));
  EXPECT_TRUE(ChosenNodeIps({}, old).empty());
}

TEST(KubeletPair, TimestampedFileAndCurrentLink) {
  char tmpl[] = "/tmp/rackgate-kubelet-test.XXXXXX";
  ASSERT_NE(::mkdtemp(tmpl), nullptr);
  const fs::path dir = fs::path(tmpl) / "pki";  // created on demand
  // 2024-01-01T00:00:00Z, then a second later.
  auto first = WriteKubeletPair(dir.string(), kClientPrefix, "CERT\n", std::string_view("KEY\n"), 1704067200);
  ASSERT_TRUE(first.ok()) << first.status().ToString();
  EXPECT_EQ(*first, (dir / "kubelet-client-current.pem").string());
  EXPECT_EQ(fs::read_symlink(dir / "kubelet-client-current.pem"), "kubelet-client-2024-01-01-00-00-00.pem");
  std::ifstream f(dir / "kubelet-client-current.pem");
  std::ostringstream ss;
  ss << f.rdbuf();
  EXPECT_EQ(ss.str(), "CERT\nKEY\n");
  struct stat st;
  ASSERT_EQ(::stat((dir / "kubelet-client-2024-01-01-00-00-00.pem").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0600u);
  ASSERT_TRUE(WriteKubeletPair(dir.string(), kClientPrefix, "CERT2\n", std::nullopt, 1704067201).ok());
  EXPECT_EQ(fs::read_symlink(dir / "kubelet-client-current.pem"), "kubelet-client-2024-01-01-00-00-01.pem");
  fs::remove_all(tmpl);
}

}  // namespace
}  // namespace rackgate::agent
