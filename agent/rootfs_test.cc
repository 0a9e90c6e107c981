#include "agent/rootfs.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>

namespace rackgate::agent {
namespace {

namespace fs = std::filesystem;

std::span<const uint8_t> B(const std::string& s) {
  return std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(s.data()), s.size());
}

class RootTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/rackgate-rootfs-test.XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    base_ = tmpl;
    dir_ = base_ / "root";
    fs::create_directories(dir_);
    fs::create_directories(base_ / "outside");
    auto r = Root::Open(dir_.string());
    ASSERT_TRUE(r.ok());
    root_.emplace(std::move(r).value());
  }
  void TearDown() override { fs::remove_all(base_); }
  std::string Read(const fs::path& p) {
    std::ifstream f(p, std::ios::binary);
    std::ostringstream ss;
    ss << f.rdbuf();
    return ss.str();
  }

  fs::path base_, dir_;
  std::optional<Root> root_;
};

TEST(SplitCleanPath, Cases) {
  EXPECT_EQ(SplitCleanPath("/etc/x")->size(), 2u);
  for (const char* bad : {"", "/", "x", "/a//b", "/a/./b", "/a/../b", "/a/", "/..", "/a/.."}) {
    EXPECT_FALSE(SplitCleanPath(bad).ok()) << bad;
  }
  EXPECT_FALSE(SplitCleanPath(std::string("/a\0b", 4)).ok());
  EXPECT_FALSE(SplitCleanPath("/" + std::string(5000, 'a')).ok());
}

TEST_F(RootTest, OpenNeedsADirectory) {
  EXPECT_FALSE(Root::Open((base_ / "missing").string()).ok());
}

TEST_F(RootTest, WriteFileReplacesAtomicallyAndSetsTheMode) {
  ASSERT_TRUE(root_->WriteFile("/a/b/c", B("one"), 0640, {}, false).ok());
  EXPECT_EQ(Read(dir_ / "a/b/c"), "one");
  struct stat st;
  ASSERT_EQ(::stat((dir_ / "a/b/c").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0640u);
  EXPECT_EQ(root_->WriteFile("/a/b/c", B("two"), 0640, {}, false).reason(), "path_exists");
  EXPECT_TRUE(root_->WriteFile("/a/b/c", B("two"), 0600, {}, true).ok());
  EXPECT_EQ(Read(dir_ / "a/b/c"), "two");
  EXPECT_EQ(root_->WriteFile("/a/b", B("x"), 0600, {}, true).reason(), "path_exists");  // a directory
  EXPECT_EQ(root_->WriteFile("/a/b/c/d", B("x"), 0600, {}, true).reason(), "path_not_directory");
}

TEST_F(RootTest, DotDotInALinkStopsAtTheRoot) {
  fs::create_symlink("../../../..", dir_ / "up");
  ASSERT_TRUE(root_->WriteFile("/up/f", B("x"), 0600, {}, false).ok());
  EXPECT_EQ(Read(dir_ / "f"), "x");
  EXPECT_TRUE(fs::is_empty(base_ / "outside"));
}

TEST_F(RootTest, ReadFileDoesNotFollowAFinalLink) {
  std::ofstream(base_ / "outside/secret") << "s";
  fs::create_symlink(base_ / "outside/secret", dir_ / "link");
  EXPECT_FALSE(root_->ReadFile("/link", 100).ok());
  EXPECT_EQ(root_->ReadFile("/nothing", 100).status().reason(), "path_absent");
}

TEST_F(RootTest, SymlinksAndHardlinks) {
  ASSERT_TRUE(root_->Symlink("/l", "/target", {}, false).ok());
  EXPECT_TRUE(root_->Symlink("/l", "/target", {}, false).ok()) << "same link again";
  EXPECT_EQ(root_->Symlink("/l", "/other", {}, false).reason(), "path_exists");
  ASSERT_TRUE(root_->Symlink("/l", "/other", {}, true).ok());
  EXPECT_EQ(fs::read_symlink(dir_ / "l"), "/other");
  ASSERT_TRUE(root_->RemoveSymlink("/l").ok());
  EXPECT_TRUE(root_->RemoveSymlink("/l").ok()) << "already gone";
  EXPECT_TRUE(root_->RemoveSymlink("/no/such/dir/l").ok());

  ASSERT_TRUE(root_->WriteFile("/f", B("x"), 0644, {}, false).ok());
  EXPECT_EQ(root_->RemoveSymlink("/f").reason(), "path_exists");
  ASSERT_TRUE(root_->Hardlink("/h", "/f", false).ok());
  EXPECT_TRUE(root_->Hardlink("/h", "/f", false).ok()) << "the same link again";
  EXPECT_EQ(fs::hard_link_count(dir_ / "f"), 2u);
  // A hard link's target is looked up in the root, like any path.
  std::ofstream(base_ / "outside/victim") << "v";
  fs::create_symlink(base_ / "outside", dir_ / "out");
  EXPECT_FALSE(root_->Hardlink("/h2", "/out/victim", false).ok());
}

TEST_F(RootTest, MakeDirectory) {
  ASSERT_TRUE(root_->MakeDirectory("/d/e", 0700, {}).ok());
  EXPECT_TRUE(root_->MakeDirectory("/d/e", 0750, {}).ok());
  struct stat st;
  ASSERT_EQ(::stat((dir_ / "d/e").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0750u);
  ASSERT_TRUE(root_->WriteFile("/file", B("x"), 0644, {}, false).ok());
  EXPECT_EQ(root_->MakeDirectory("/file", 0755, {}).reason(), "path_exists");
  fs::create_symlink(base_ / "outside", dir_ / "dirlink");
  EXPECT_EQ(root_->MakeDirectory("/dirlink", 0755, {}).reason(), "path_exists");
}

}  // namespace
}  // namespace rackgate::agent
