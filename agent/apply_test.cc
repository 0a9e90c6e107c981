#include "agent/apply.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>


namespace rackgate::agent {
namespace {

namespace fs = std::filesystem;

std::string Str(const std::vector<uint8_t>& v) { return std::string(v.begin(), v.end()); }

class ApplyTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/rackgate-apply-test.XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    base_ = tmpl;
    root_ = base_ / "root";
    fs::create_directories(root_);
  }
  void TearDown() override { fs::remove_all(base_); }

  Status Apply(const std::string& json) {
    auto plan = ParseIgnitionConfig(json);
    if (!plan.ok()) return plan.status();
    return ApplyIgnition(*plan, root_.string());
  }
  std::string Read(const fs::path& p) {
    std::ifstream f(p, std::ios::binary);
    std::ostringstream ss;
    ss << f.rdbuf();
    return ss.str();
  }
  mode_t Mode(const fs::path& p) {
    struct stat st;
    EXPECT_EQ(::lstat(p.c_str(), &st), 0) << p;
    return st.st_mode & 07777;
  }

  fs::path base_;
  fs::path root_;
};

std::string Config(const std::string& storage, const std::string& systemd = "{}") {
  return R"({"ignition": {"version": "3.3.0"}, "storage": )" + storage + R"(, "systemd": )" + systemd + "}";
}

TEST(DataUrl, PlainAndBase64) {
  EXPECT_EQ(Str(*DecodeDataUrl("data:,hello%20world%0A")), "hello world\n");
  EXPECT_EQ(Str(*DecodeDataUrl("data:text/plain;charset=utf-8,a%2Cb")), "a,b");
  EXPECT_EQ(Str(*DecodeDataUrl("data:;base64,aGVsbG8=")), "hello");
  EXPECT_EQ(Str(*DecodeDataUrl("data:application/octet-stream;base64,aGVsbG8=")), "hello");
  EXPECT_EQ(Str(*DecodeDataUrl("DATA:,x")), "x");
  EXPECT_EQ(Str(*DecodeDataUrl("data:,")), "");
}

TEST(DataUrl, RefusesMalformed) {
  for (const char* bad : {"", "data", "data:hello", "http://x/,y", "data:,%", "data:,%4", "data:,%zz",
                          "data:;base64,aGVsbG8", "data:;base64,aGVs bG8="}) {
    EXPECT_FALSE(DecodeDataUrl(bad).ok()) << bad;
  }
  EXPECT_FALSE(DecodeDataUrl("data:,abcdef", 5).ok());
  EXPECT_FALSE(DecodeDataUrl("data:;base64,aGVsbG8=", 4).ok());
}

TEST_F(ApplyTest, WritesFilesWithModesAndContents) {
  ASSERT_TRUE(Apply(Config(R"({"files": [
      {"path": "/etc/kubernetes/kubeconfig", "mode": 384, "contents": {"source": "data:,secret%0A"}},
      {"path": "/usr/local/bin/tool", "mode": 493, "contents": {"source": "data:;base64,IyEvYmluL3NoCg=="}},
      {"path": "/etc/empty"}],
    "directories": [{"path": "/var/lib/rackgate", "mode": 448}]})"))
                  .ok());
  EXPECT_EQ(Read(root_ / "etc/kubernetes/kubeconfig"), "secret\n");
  EXPECT_EQ(Mode(root_ / "etc/kubernetes/kubeconfig"), 0600u);
  EXPECT_EQ(Read(root_ / "usr/local/bin/tool"), "#!/bin/sh\n");
  EXPECT_EQ(Mode(root_ / "usr/local/bin/tool"), 0755u);
  EXPECT_EQ(Read(root_ / "etc/empty"), "");
  EXPECT_EQ(Mode(root_ / "etc/empty"), 0644u);  // Ignition's default
  EXPECT_EQ(Mode(root_ / "var/lib/rackgate"), 0700u);
  EXPECT_EQ(Mode(root_ / "etc/kubernetes"), 0755u);  // implicit parent
  // No temporary file is left behind.
  for (const auto& e : fs::directory_iterator(root_ / "etc/kubernetes")) {
    EXPECT_EQ(e.path().filename(), "kubeconfig");
  }
}

TEST_F(ApplyTest, OverwriteFalseKeepsOthersFilesButAcceptsTheSameOne) {
  const std::string cfg = Config(R"({"files": [{"path": "/etc/a", "contents": {"source": "data:,one"}}]})");
  ASSERT_TRUE(Apply(cfg).ok());
  EXPECT_TRUE(Apply(cfg).ok()) << "the same file again is idempotent";
  const Status s = Apply(Config(R"({"files": [{"path": "/etc/a", "contents": {"source": "data:,two"}}]})"));
  EXPECT_EQ(s.reason(), "path_exists");
  EXPECT_EQ(Read(root_ / "etc/a"), "one");
  ASSERT_TRUE(
      Apply(Config(R"({"files": [{"path": "/etc/a", "overwrite": true, "contents": {"source": "data:,two"}}]})"))
          .ok());
  EXPECT_EQ(Read(root_ / "etc/a"), "two");
}

TEST_F(ApplyTest, RefusesPathsThatLeaveTheRoot) {
  for (const char* path : {"../outside", "/../outside", "/etc/../../outside", "/etc/./x", "//etc/x", "/etc/",
                           "etc/x", "/", ""}) {
    const std::string cfg =
        Config(std::string(R"({"files": [{"path": ")") + path + R"(", "contents": {"source": "data:,x"}}]})");
    const Status s = Apply(cfg);
    EXPECT_FALSE(s.ok()) << path;
    EXPECT_EQ(s.reason(), "config_invalid") << path;
  }
  EXPECT_FALSE(fs::exists(base_ / "outside"));
}

TEST_F(ApplyTest, SymlinksInTheRootCannotLeadOutOfIt) {
  fs::create_directories(base_ / "outside");
  // A directory symlink pointing out (absolute and relative): resolved
  // inside the root instead.
  fs::create_symlink(base_ / "outside", root_ / "abs");
  fs::create_symlink("../rel-out", root_ / "rel");
  fs::create_symlink("/../../../../outside", root_ / "up");
  ASSERT_TRUE(Apply(Config(R"({"files": [
      {"path": "/abs/f", "contents": {"source": "data:,1"}},
      {"path": "/rel/f", "contents": {"source": "data:,2"}},
      {"path": "/up/f", "contents": {"source": "data:,3"}}]})"))
                  .ok());
  EXPECT_TRUE(fs::is_empty(base_ / "outside"));
  // Absolute targets start again at the root; ".." stops at it.
  EXPECT_EQ(Read(root_ / base_.relative_path() / "outside/f"), "1");
  EXPECT_EQ(Read(root_ / "rel-out/f"), "2");
  EXPECT_EQ(Read(root_ / "outside/f"), "3");
}

TEST_F(ApplyTest, AFinalSymlinkIsReplacedNotWrittenThrough) {
  fs::create_directories(base_ / "outside");
  std::ofstream(base_ / "outside/victim") << "keep";
  fs::create_directories(root_ / "etc");
  fs::create_symlink(base_ / "outside/victim", root_ / "etc/x");
  ASSERT_TRUE(
      Apply(Config(R"({"files": [{"path": "/etc/x", "overwrite": true, "contents": {"source": "data:,new"}}]})"))
          .ok());
  EXPECT_EQ(Read(base_ / "outside/victim"), "keep");
  EXPECT_FALSE(fs::is_symlink(root_ / "etc/x"));
  EXPECT_EQ(Read(root_ / "etc/x"), "new");
  // Without overwrite a planted link is refused.
  fs::create_symlink(base_ / "outside/victim", root_ / "etc/y");
  EXPECT_EQ(Apply(Config(R"({"files": [{"path": "/etc/y", "contents": {"source": "data:,new"}}]})")).reason(),
            "path_exists");
  EXPECT_EQ(Read(base_ / "outside/victim"), "keep");
}

TEST_F(ApplyTest, SymlinkLoopsEnd) {
  fs::create_symlink("/a", root_ / "b");
  fs::create_symlink("/b", root_ / "a");
  EXPECT_EQ(Apply(Config(R"({"files": [{"path": "/a/f", "contents": {"source": "data:,1"}}]})")).reason(),
            "path_symlink_loop");
}

TEST_F(ApplyTest, LinksAndUnits) {
  ASSERT_TRUE(Apply(Config(R"({"files": [{"path": "/etc/target", "contents": {"source": "data:,t"}}],
      "links": [{"path": "/etc/soft", "target": "/etc/target"},
                {"path": "/etc/hard", "target": "/etc/target", "hard": true}]})",
                           R"({"units": [
      {"name": "kubelet.service", "enabled": true, "contents": "[Unit]\nDescription=k\n",
       "dropins": [{"name": "10-env.conf", "contents": "[Service]\nEnvironment=A=1\n"}]},
      {"name": "masked.service", "mask": true},
      {"name": "off.service", "enabled": false}]})"))
                  .ok());
  EXPECT_EQ(fs::read_symlink(root_ / "etc/soft"), "/etc/target");
  EXPECT_EQ(fs::hard_link_count(root_ / "etc/target"), 2u);
  EXPECT_EQ(Read(root_ / "etc/systemd/system/kubelet.service"), "[Unit]\nDescription=k\n");
  EXPECT_EQ(Read(root_ / "etc/systemd/system/kubelet.service.d/10-env.conf"), "[Service]\nEnvironment=A=1\n");
  EXPECT_EQ(fs::read_symlink(root_ / "etc/systemd/system/multi-user.target.wants/kubelet.service"),
            "/etc/systemd/system/kubelet.service");
  EXPECT_EQ(fs::read_symlink(root_ / "etc/systemd/system/masked.service"), "/dev/null");
  EXPECT_FALSE(fs::exists(fs::symlink_status(root_ / "etc/systemd/system/multi-user.target.wants/off.service")));
  // Disabling removes the wants link.
  ASSERT_TRUE(Apply(Config("{}", R"({"units": [{"name": "kubelet.service", "enabled": false}]})")).ok());
  EXPECT_FALSE(
      fs::exists(fs::symlink_status(root_ / "etc/systemd/system/multi-user.target.wants/kubelet.service")));
}

// Issue 32: a run that failed had already written /etc/hostname. Now the
// whole config is checked against the root first: whatever entry would
// fail, the files before it are not written either.
TEST_F(ApplyTest, Issue32NothingIsWrittenUnlessEverythingCanBe) {
  fs::create_directories(root_ / "etc");
  std::ofstream(root_ / "etc/passwd") << "root:x:0:0::/root:/bin/sh\n";
  std::ofstream(root_ / "etc/group") << "root:x:0:\n";
  std::ofstream(root_ / "etc/kept") << "theirs";
  std::ofstream(root_ / "blocker") << "a file where a directory is needed";
  const std::string first = R"({"path": "/etc/hostname", "contents": {"source": "data:,node-1"}},
      {"path": "/etc/kubernetes/pull-secret", "contents": {"source": "data:,s3cret"}})";
  const struct {
    const char* what;
    std::string storage;
    const char* reason;
  } cases[] = {
      {"a later file that exists with other contents",
       R"({"files": [)" + first + R"(, {"path": "/etc/kept", "contents": {"source": "data:,ours"}}]})",
       "path_exists"},
      {"a later file under a file", R"({"files": [)" + first + R"(, {"path": "/blocker/x"}]})",
       "path_not_directory"},
      {"a later file whose owner the root does not know",
       R"({"files": [)" + first + R"(, {"path": "/etc/x", "user": {"name": "nobody-here"}}]})", "owner_unknown"},
      {"a directory where a file is",
       R"({"files": [)" + first + R"(], "directories": [{"path": "/blocker"}]})", "path_exists"},
      {"a hard link to nothing",
       R"({"files": [)" + first + R"(], "links": [{"path": "/etc/l", "target": "/etc/none", "hard": true}]})",
       "path_invalid"},
      {"a symlink over a file without overwrite",
       R"({"files": [)" + first + R"(], "links": [{"path": "/etc/kept", "target": "/x"}]})", "path_exists"},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.what);
    EXPECT_EQ(Apply(Config(c.storage)).reason(), c.reason);
    EXPECT_FALSE(fs::exists(root_ / "etc/hostname"));
    EXPECT_FALSE(fs::exists(root_ / "etc/kubernetes"));
    EXPECT_EQ(Read(root_ / "etc/kept"), "theirs");
  }
  // A unit whose drop-in directory is a file: the files go neither.
  fs::create_directories(root_ / "etc/systemd/system");
  std::ofstream(root_ / "etc/systemd/system/k.service.d") << "in the way";
  EXPECT_EQ(Apply(Config(R"({"files": [)" + first + R"(]})",
                         R"({"units": [{"name": "k.service", "dropins": [{"name": "a.conf", "contents": "x"}]}]})"))
                .reason(),
            "path_not_directory");
  EXPECT_FALSE(fs::exists(root_ / "etc/hostname"));
  // The same config without its bad entry goes through whole; a hard link
  // to a file the same config writes is fine.
  ASSERT_TRUE(Apply(Config(R"({"files": [)" + first +
                           R"(], "links": [{"path": "/etc/l", "target": "/etc/hostname", "hard": true}]})"))
                  .ok());
  EXPECT_EQ(Read(root_ / "etc/hostname"), "node-1");
  EXPECT_EQ(Read(root_ / "etc/l"), "node-1");
  // And again (a re-run): everything there is what would be written.
  EXPECT_TRUE(Apply(Config(R"({"files": [)" + first +
                           R"(], "links": [{"path": "/etc/l", "target": "/etc/hostname", "hard": true},
                           {"path": "/etc/s", "target": "/etc/hostname"}]})"))
                  .ok());
  EXPECT_TRUE(Apply(Config(R"({"files": [)" + first +
                           R"(], "links": [{"path": "/etc/l", "target": "/etc/hostname", "hard": true},
                           {"path": "/etc/s", "target": "/etc/hostname"}]})"))
                  .ok());
}

// A directory the agent may not write (a read-only mount under a unit's
// ProtectSystem=, or permissions) fails the check: nothing is written.
TEST_F(ApplyTest, Issue32AnUnwritableTargetIsFoundBeforeAnythingIsWritten) {
  if (::geteuid() == 0) GTEST_SKIP() << "root writes any directory; the check's permission case needs a user";
  fs::create_directories(root_ / "var/lib");
  fs::permissions(root_ / "var/lib", fs::perms::owner_read | fs::perms::owner_exec);
  const Status s = Apply(Config(R"({"files": [{"path": "/etc/hostname", "contents": {"source": "data:,n"}},
      {"path": "/var/lib/kubelet/config.yaml", "contents": {"source": "data:,x"}}]})"));
  fs::permissions(root_ / "var/lib", fs::perms::owner_all);
  EXPECT_EQ(s.reason(), "io_failed");
  EXPECT_NE(s.message().find("/var/lib/kubelet/config.yaml"), std::string::npos) << s.message();
  EXPECT_FALSE(fs::exists(root_ / "etc/hostname"));
}

TEST_F(ApplyTest, OwnersByIdAndName) {
  if (::geteuid() != 0) GTEST_SKIP() << "chown needs root";
  fs::create_directories(root_ / "etc");
  std::ofstream(root_ / "etc/passwd") << "root:x:0:0::/root:/bin/sh\ncore:x:1000:1000::/home/core:/bin/sh\n";
  std::ofstream(root_ / "etc/group") << "root:x:0:\ncore:x:1000:\n";
  ASSERT_TRUE(Apply(Config(R"({"files": [{"path": "/home/core/f", "user": {"name": "core"},
      "group": {"id": 1000}, "contents": {"source": "data:,x"}}]})"))
                  .ok());
  struct stat st;
  ASSERT_EQ(::stat((root_ / "home/core/f").c_str(), &st), 0);
  EXPECT_EQ(st.st_uid, 1000u);
  EXPECT_EQ(st.st_gid, 1000u);
  EXPECT_EQ(Apply(Config(R"({"files": [{"path": "/f", "user": {"name": "nobody-here"}}]})")).reason(),
            "owner_unknown");
}

TEST(ParseIgnition, ValidatesBeforeAnythingIsWritten) {
  EXPECT_EQ(ParseIgnitionConfig("not json").status().reason(), "config_invalid");
  EXPECT_EQ(ParseIgnitionConfig(R"({"ignition": {"version": "2.2.0"}})").status().reason(), "config_invalid");
  EXPECT_EQ(ParseIgnitionConfig(Config(R"({"files": [{"path": "/a", "mode": 65536}]})")).status().reason(),
            "config_invalid");
  EXPECT_EQ(ParseIgnitionConfig(Config(R"({"files": [{"path": "/a", "mode": "0644"}]})")).status().reason(),
            "config_invalid");
  EXPECT_EQ(ParseIgnitionConfig(Config(R"({"files": [{"path": "/a", "contents": {"source": "https://x/y"}}]})"))
                .status()
                .reason(),
            "config_unsupported");
  EXPECT_EQ(ParseIgnitionConfig(Config(R"({"files": [{"path": "/a", "contents":
      {"source": "data:,x", "compression": "gzip"}}]})"))
                .status()
                .reason(),
            "config_unsupported");
  EXPECT_EQ(ParseIgnitionConfig(Config(R"({"files": [{"path": "/a", "append": [{"source": "data:,x"}]}]})"))
                .status()
                .reason(),
            "config_unsupported");
  EXPECT_EQ(ParseIgnitionConfig(Config("{}", R"({"units": [{"name": "../evil.service"}]})")).status().reason(),
            "config_invalid");
  EXPECT_EQ(ParseIgnitionConfig(Config("{}", R"({"units": [{"name": "a.service", "dropins": [{"name": "x"}]}]})"))
                .status()
                .reason(),
            "config_invalid");
}

TEST(ParseIgnition, VerificationHash) {
  // sha512("hello")
  const std::string h =
      "9b71d224bd62f3785d96d46ad3ea3d73319bfbc2890caadae2dff72519673ca72323c3d99ba5c11d7c7acc6e14b8c5da0c4663475c2e"
      "5c3adef46f73bcdec043";
  EXPECT_TRUE(ParseIgnitionConfig(Config(R"({"files": [{"path": "/a", "contents": {"source": "data:,hello",
      "verification": {"hash": "sha512-)" + h + R"("}}}]})"))
                  .ok());
  EXPECT_EQ(ParseIgnitionConfig(Config(R"({"files": [{"path": "/a", "contents": {"source": "data:,hellO",
      "verification": {"hash": "sha512-)" + h + R"("}}}]})"))
                .status()
                .reason(),
            "config_invalid");
}

TEST(ParseIgnition, ReportsWhatItDoesNotApply) {
  auto plan = ParseIgnitionConfig(R"({"ignition": {"version": "3.3.0"},
      "passwd": {"users": [{"name": "core"}]},
      "storage": {"filesystems": [{"device": "/dev/sda"}]}})");
  ASSERT_TRUE(plan.ok());
  ASSERT_EQ(plan->not_applied.size(), 2u);
  EXPECT_EQ(plan->not_applied[0], "storage.filesystems (1)");
  EXPECT_EQ(plan->not_applied[1], "passwd.users (1)");
}

}  // namespace
}  // namespace rackgate::agent
