// Tests of the served agent bundle (core/agent_bundle.h): not configured,
// not installed, too large, the digest, the cache and a replaced file.
#include "core/agent_bundle.h"

#include <gtest/gtest.h>
#include <stdlib.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

namespace rackgate::core {
namespace {

class AgentBundleTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string t = (std::filesystem::temp_directory_path() / "rackgate-bundle-XXXXXX").string();
    ASSERT_NE(mkdtemp(t.data()), nullptr);
    dir_ = t;
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  // Writes `text` to a new file that replaces `name` (a new inode, as dpkg
  // installs a file).
  std::string Put(const std::string& name, const std::string& text) {
    const std::string path = dir_ + "/" + name;
    const std::string tmp = path + ".new";
    std::ofstream(tmp, std::ios::binary) << text;
    std::filesystem::rename(tmp, path);
    return path;
  }
  std::string dir_;
};

TEST_F(AgentBundleTest, NotConfiguredIsNotFound) {
  AgentBundle bundle("");
  auto got = bundle.Get();
  ASSERT_FALSE(got.ok());
  EXPECT_EQ(got.status().code(), Status::Code::kNotFound);
  EXPECT_EQ(got.status().reason(), "agent_bundle_not_configured");
}

TEST_F(AgentBundleTest, MissingEmptyOrDirectoryIsUnavailable) {
  AgentBundle missing(dir_ + "/nothing.cpio.zst");
  EXPECT_EQ(missing.Get().status().reason(), "agent_bundle_unavailable");
  EXPECT_EQ(missing.Get().status().code(), Status::Code::kIoError);
  AgentBundle empty(Put("empty", ""));
  EXPECT_EQ(empty.Get().status().reason(), "agent_bundle_unavailable");
  AgentBundle directory(dir_);
  EXPECT_EQ(directory.Get().status().reason(), "agent_bundle_unavailable");
}

TEST_F(AgentBundleTest, OverTheBoundIsNeverRead) {
  AgentBundle bundle(Put("big", std::string(101, 'x')), 100);
  auto got = bundle.Get();
  ASSERT_FALSE(got.ok());
  EXPECT_EQ(got.status().reason(), "agent_bundle_unavailable");
  EXPECT_NE(got.status().message().find("larger than 100 bytes"), std::string::npos);
  AgentBundle at_bound(Put("exact", std::string(100, 'x')), 100);
  EXPECT_TRUE(at_bound.Get().ok());
}

TEST_F(AgentBundleTest, ServesTheBytesAndTheirSha256) {
  AgentBundle bundle(Put("b", "abc"));
  auto got = bundle.Get();
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  EXPECT_EQ(*got->bytes, "abc");
  // SHA-256("abc"), FIPS 180-2 appendix B.1.
  EXPECT_EQ(got->sha256_hex, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
}

TEST_F(AgentBundleTest, CachedWhileUnchangedReadAgainWhenReplaced) {
  const std::string path = Put("b", "first");
  AgentBundle bundle(path);
  auto a = bundle.Get();
  auto b = bundle.Get();
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(a->bytes.get(), b->bytes.get()) << "an unchanged file is read once";
  Put("b", "second, longer");
  auto c = bundle.Get();
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(*c->bytes, "second, longer");
  EXPECT_EQ(*a->bytes, "first") << "a view taken before stays as it was";
  std::filesystem::remove(path);
  EXPECT_EQ(bundle.Get().status().reason(), "agent_bundle_unavailable") << "a removed bundle is not served from cache";
}

}  // namespace
}  // namespace rackgate::core
