#include "agent/install.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "agent/agent.h"
#include "agent/renewal.h"

namespace rackgate::agent {
namespace {

namespace fs = std::filesystem;

class InstallTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/rackgate-install-test.XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    base_ = tmpl;
    bundle_ = base_ / "bundle";
    fs::create_directories(bundle_ / "lib");
    fs::create_directories(bundle_ / "systemd");
    Write(bundle_ / "rackgate-agent", "ELF agent", 0755);
    Write(bundle_ / "lib/ld-linux-x86-64.so.2", "ELF loader", 0755);
    Write(bundle_ / "lib/libc.so.6", "ELF libc", 0755);
    fs::create_symlink("libc.so.6", bundle_ / "lib/libc-alias.so");
    Write(bundle_ / "systemd/rackgate-agent.service", "[Service]\nExecStart=/opt/rackgate-agent/x\n", 0644);
    Write(bundle_ / "systemd/rackgate-agent-renew.timer", "[Timer]\n", 0644);
    fs::create_directories(base_ / "root");
    auto r = Root::Open((base_ / "root").string());
    ASSERT_TRUE(r.ok());
    root_.emplace(std::move(r).value());
    o_.bundle_dir = bundle_.string();
    o_.urls = {"https://10.0.2.100:22623", "https://10.0.2.101:22623"};
    o_.ca_pem = "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n";
    o_.apiserver = "https://10.0.2.100:6443";
    o_.agent_args = {"--node-ip", "10.0.2.15"};
  }
  void TearDown() override { fs::remove_all(base_); }
  static void Write(const fs::path& p, const std::string& data, mode_t mode) {
    std::ofstream(p, std::ios::binary) << data;
    ASSERT_EQ(::chmod(p.c_str(), mode), 0);
  }
  std::string Read(const std::string& path) {
    std::ifstream f(base_ / "root" / path.substr(1), std::ios::binary);
    std::ostringstream ss;
    ss << f.rdbuf();
    return ss.str();
  }
  mode_t Mode(const std::string& path) {
    struct stat st {};
    EXPECT_EQ(::lstat((base_ / "root" / path.substr(1)).c_str(), &st), 0) << path;
    return st.st_mode & 07777;
  }
  fs::path base_, bundle_;
  std::optional<Root> root_;
  InstallOptions o_;
};

TEST_F(InstallTest, CopiesTheBundleUnderOptWithModesAndLinks) {
  ASSERT_TRUE(InstallIntoRoot(o_, &*root_).ok());
  EXPECT_EQ(Read("/opt/rackgate-agent/rackgate-agent"), "ELF agent");
  EXPECT_EQ(Mode("/opt/rackgate-agent/rackgate-agent"), 0755u);
  EXPECT_EQ(Read("/opt/rackgate-agent/lib/ld-linux-x86-64.so.2"), "ELF loader");
  EXPECT_EQ(Read("/opt/rackgate-agent/lib/libc.so.6"), "ELF libc");
  EXPECT_EQ(fs::read_symlink(base_ / "root/opt/rackgate-agent/lib/libc-alias.so"), "libc.so.6");
  // The units go to /etc/systemd/system, not beside the agent.
  EXPECT_FALSE(fs::exists(base_ / "root/opt/rackgate-agent/systemd"));
}

TEST_F(InstallTest, EnablesTheServiceAndTheTimer) {
  ASSERT_TRUE(InstallIntoRoot(o_, &*root_).ok());
  EXPECT_EQ(Read("/etc/systemd/system/rackgate-agent.service"), "[Service]\nExecStart=/opt/rackgate-agent/x\n");
  EXPECT_EQ(Mode("/etc/systemd/system/rackgate-agent.service"), 0644u);
  EXPECT_EQ(Read("/etc/systemd/system/rackgate-agent-renew.timer"), "[Timer]\n");
  EXPECT_EQ(fs::read_symlink(base_ / "root/etc/systemd/system/multi-user.target.wants/rackgate-agent.service"),
            "/etc/systemd/system/rackgate-agent.service");
  EXPECT_EQ(fs::read_symlink(base_ / "root/etc/systemd/system/timers.target.wants/rackgate-agent-renew.timer"),
            "/etc/systemd/system/rackgate-agent-renew.timer");
}

TEST_F(InstallTest, WritesTheCaAndTheEnvironmentTheUnitReads) {
  ASSERT_TRUE(InstallIntoRoot(o_, &*root_).ok());
  EXPECT_EQ(Read("/etc/rackgate/ca.pem"), o_.ca_pem);
  EXPECT_EQ(Read("/etc/rackgate/agent.env"),
            "# Written by rackgate-agent --install-root on this node's first boot (docs/nodes.md).\n"
            "RACKGATE_URL=https://10.0.2.100:22623,https://10.0.2.101:22623\n"
            "RACKGATE_CA=/etc/rackgate/ca.pem\n"
            "RACKGATE_APISERVER=https://10.0.2.100:6443\n"
            "RACKGATE_AGENT_ARGS=--node-ip 10.0.2.15\n");
}

TEST_F(InstallTest, ASecondInstallReplacesTheFirst) {
  ASSERT_TRUE(InstallIntoRoot(o_, &*root_).ok());
  Write(bundle_ / "rackgate-agent", "ELF agent 2", 0755);
  o_.apiserver = "";
  ASSERT_TRUE(InstallIntoRoot(o_, &*root_).ok());
  EXPECT_EQ(Read("/opt/rackgate-agent/rackgate-agent"), "ELF agent 2");
  EXPECT_NE(Read("/etc/rackgate/agent.env").find("RACKGATE_APISERVER=\n"), std::string::npos);
}

TEST_F(InstallTest, ALinkPlantedInTheRootIsNotWrittenThrough) {
  // SECURITY: the real root's /opt may be a link (Fedora CoreOS: var/opt);
  // one pointing outside resolves inside the root, as RESOLVE_IN_ROOT does.
  fs::create_directories(base_ / "outside");
  fs::create_symlink(base_ / "outside", base_ / "root/opt");
  ASSERT_TRUE(InstallIntoRoot(o_, &*root_).ok());
  EXPECT_TRUE(fs::is_empty(base_ / "outside"));
}

TEST_F(InstallTest, NotABundleIsRefusedBeforeAnythingIsWritten) {
  for (const char* part : {"rackgate-agent", "lib/ld-linux-x86-64.so.2", "systemd/rackgate-agent.service",
                           "systemd/rackgate-agent-renew.timer"}) {
    const fs::path p = bundle_ / part;
    fs::rename(p, base_ / "aside");
    Status s = InstallIntoRoot(o_, &*root_);
    EXPECT_EQ(s.reason(), "bundle_invalid") << part;
    EXPECT_TRUE(fs::is_empty(base_ / "root")) << part;
    fs::rename(base_ / "aside", p);
  }
}

// Issue 40, item 10: the installed unit carried only --node-ip and
// --tpm-key; a machine enrolled by its ECC EK, on a swtpm TCTI, with its
// kubelet files elsewhere, failed on its later boots.
TEST(InstalledAgentArgs, Issue40CarriesEveryOptionLaterBootsNeed) {
  AgentOptions o;
  o.ek = EkPreference::kEcc;
  o.ak = AkAlg::kRsa;
  o.eventlog_path = kDefaultEventLog;
  o.pcr_signature_path = "";
  o.kubelet_dir = "/sysroot/srv/kubelet/pki";
  o.kubeconfig = "/sysroot/srv/kubelet/kubeconfig";
  o.bootstrap_kubeconfig = "/sysroot/etc/kubernetes/bootstrap-kubelet.conf";
  o.node_ips = {"10.0.2.15", "fd00::15"};
  o.tpm_key = true;
  auto args = InstalledAgentArgs(o, "swtpm:host=127.0.0.1,port=2321", "/sysroot/", true);
  ASSERT_TRUE(args.ok()) << args.status().ToString();
  EXPECT_EQ(*args, (std::vector<std::string>{
                       "--tcti=swtpm:host=127.0.0.1,port=2321", "--ek-alg=ecc", "--ak-alg=rsa", "--pcr-signature=",
                       "--kubelet-dir=/srv/kubelet/pki", "--kubeconfig=/srv/kubelet/kubeconfig",
                       "--bootstrap-kubeconfig=/etc/kubernetes/bootstrap-kubelet.conf", "--node-ip=10.0.2.15",
                       "--node-ip=fd00::15", "--tpm-key", "--config-root=/"}));
}

TEST(InstalledAgentArgs, Issue40DefaultsAndTheFirstBootsRootAreNotRepeated) {
  AgentOptions o;
  o.eventlog_path = kDefaultEventLog;
  o.pcr_signature_path = kDefaultPcrSignature;
  // The lab's first boot: the kubelet's files under /sysroot are the real
  // root's defaults.
  o.kubelet_dir = "/sysroot/var/lib/kubelet/pki";
  o.kubeconfig = "/sysroot/var/lib/kubelet/kubeconfig";
  auto args = InstalledAgentArgs(o, kDefaultTcti, "/sysroot", false);
  ASSERT_TRUE(args.ok());
  EXPECT_TRUE(args->empty()) << (*args)[0];
  // An RSA EK is carried as such; a path outside the first boot's root as it is.
  o.ek = EkPreference::kRsa;
  o.kubelet_dir = "/sysrootx/pki";
  args = InstalledAgentArgs(o, kDefaultTcti, "/sysroot", false);
  ASSERT_TRUE(args.ok());
  EXPECT_EQ(*args, (std::vector<std::string>{"--ek-alg=rsa", "--kubelet-dir=/sysrootx/pki"}));
}

TEST(InstalledAgentArgs, Issue40AValueTheUnitWouldSplitOrExpandIsRefused) {
  for (const char* dir : {"/var/lib/kube let", "/var/lib/$HOME", "/var/lib/\"k\"", "/var/lib/k\\x", "/var/%h",
                          "/var/lib/k\tx"}) {
    AgentOptions o;
    o.eventlog_path = kDefaultEventLog;
    o.pcr_signature_path = kDefaultPcrSignature;
    o.kubelet_dir = dir;
    o.kubeconfig = kDefaultKubeconfig;
    auto args = InstalledAgentArgs(o, kDefaultTcti, "/sysroot", false);
    EXPECT_EQ(args.status().reason(), "install_arg_unsafe") << dir;
  }
}

TEST_F(InstallTest, Issue40TheConfigStampNamesTheMachineWhoseConfigItIs) {
  ASSERT_TRUE(InstallIntoRoot(o_, &*root_, 1704067200).ok());
  EXPECT_FALSE(fs::exists(base_ / "root/var/lib/rackgate-agent/config-applied"));  // no config step
  o_.config_for = "vm-1";
  ASSERT_TRUE(InstallIntoRoot(o_, &*root_, 1704067200).ok());
  auto stamp = ReadConfigStamp((base_ / "root").string());
  ASSERT_TRUE(stamp.ok()) << stamp.status().ToString();
  EXPECT_EQ(stamp->hostname, "vm-1");
}

}  // namespace
}  // namespace rackgate::agent
