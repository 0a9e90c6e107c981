// Tests of the repeatable --config-out: which failures are skipped, and when
// the step fails.
#include "agent/config_out.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <filesystem>
#include <fstream>
#include <sstream>

namespace rackgate::agent {
namespace {

TEST(SkipConfigOut, OnlyMissingOrReadOnlyAndOnlyWithSeveral) {
  EXPECT_TRUE(SkipConfigOut(2, ENOENT));
  EXPECT_TRUE(SkipConfigOut(4, EROFS));
  // One output: a failure is a failure, as before.
  EXPECT_FALSE(SkipConfigOut(1, ENOENT));
  EXPECT_FALSE(SkipConfigOut(1, EROFS));
  for (int e : {0, EACCES, ENOSPC, EIO, ENOTDIR, EPERM}) EXPECT_FALSE(SkipConfigOut(2, e)) << e;
}

class WriteConfigOutsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() / ("config_out_test." + std::to_string(::getpid()));
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  static std::string Slurp(const std::filesystem::path& p) {
    std::ifstream in(p, std::ios::binary);
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
  }
  Result<std::vector<std::string>> Write(const std::vector<std::string>& paths) {
    static const uint8_t kConfig[] = {'{', '}'};
    return WriteConfigOuts(paths, kConfig, [this](const std::string& l) { notes_.push_back(l); });
  }
  std::filesystem::path dir_;
  std::vector<std::string> notes_;
};

TEST_F(WriteConfigOutsTest, WritesEveryOneMode0600) {
  const std::string a = (dir_ / "a.ign").string(), b = (dir_ / "b.ign").string();
  auto r = Write({a, b});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(*r, (std::vector<std::string>{a, b}));
  EXPECT_EQ(Slurp(a), "{}");
  EXPECT_EQ(Slurp(b), "{}");
  struct stat st;
  ASSERT_EQ(::stat(b.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  EXPECT_TRUE(notes_.empty());
}

TEST_F(WriteConfigOutsTest, MissingDirectorySkippedWhenSeveral) {
  // Debian's Ignition module creates no /usr/lib/ignition: that one is
  // skipped, /run/ignition is written.
  const std::string missing = (dir_ / "usr/lib/ignition/user.ign").string();
  const std::string run = (dir_ / "user.ign").string();
  auto r = Write({missing, run});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(*r, (std::vector<std::string>{run}));
  ASSERT_EQ(notes_.size(), 1u);
  EXPECT_NE(notes_[0].find(missing), std::string::npos) << notes_[0];
  EXPECT_EQ(Slurp(run), "{}");
}

TEST_F(WriteConfigOutsTest, NoneWrittenFails) {
  const std::string m1 = (dir_ / "x/user.ign").string(), m2 = (dir_ / "y/user.ign").string();
  auto r = Write({m1, m2});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().reason(), "file_unwritable");
  EXPECT_NE(r.status().message().find(m1), std::string::npos);
  EXPECT_NE(r.status().message().find(m2), std::string::npos);
  EXPECT_EQ(notes_.size(), 2u);
}

TEST_F(WriteConfigOutsTest, OneGivenMissingIsAFailure) {
  auto r = Write({(dir_ / "x/user.ign").string()});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().reason(), "file_unwritable");
  EXPECT_TRUE(notes_.empty());
}

TEST_F(WriteConfigOutsTest, OtherFailuresAreNotSkipped) {
  // A "directory" that is a file (ENOTDIR): not a place missing on this
  // boot, so the step fails, before the next output is written.
  std::ofstream(dir_ / "file") << "x";
  const std::string ok = (dir_ / "user.ign").string();
  auto r = Write({(dir_ / "file/user.ign").string(), ok});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().reason(), "file_unwritable");
  EXPECT_FALSE(std::filesystem::exists(ok));
  EXPECT_TRUE(notes_.empty());
}

}  // namespace
}  // namespace rackgate::agent
