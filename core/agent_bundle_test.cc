// Tests of the served agent bundle (core/agent_bundle.h): not configured,
// not installed, too large, the digest, the cache, a replaced file and one
// edited in place.
#include "core/agent_bundle.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "core/secrets.h"

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
  EXPECT_EQ(a->bytes.get(), b->bytes.get()) << "an unchanged file is one buffer";
  Put("b", "second, longer");
  auto c = bundle.Get();
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(*c->bytes, "second, longer");
  EXPECT_EQ(*a->bytes, "first") << "a view taken before stays as it was";
  std::filesystem::remove(path);
  EXPECT_EQ(bundle.Get().status().reason(), "agent_bundle_unavailable") << "a removed bundle is not served from cache";
}

// Overwrites `path` in place with `text` (same inode, no truncation) and puts
// its access and modification times back: what `cp --preserve=timestamps`
// over an existing file, or an editor that writes in place, leaves.
void EditInPlace(const std::string& path, const std::string& text) {
  struct stat before {};
  ASSERT_EQ(::stat(path.c_str(), &before), 0);
  {
    std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
    ASSERT_TRUE(f.is_open());
    f << text;
  }
  const struct timespec times[2] = {before.st_atim, before.st_mtim};
  ASSERT_EQ(::utimensat(AT_FDCWD, path.c_str(), times, 0), 0);
  struct stat after {};
  ASSERT_EQ(::stat(path.c_str(), &after), 0);
  ASSERT_EQ(after.st_ino, before.st_ino);
  ASSERT_EQ(after.st_size, before.st_size);
  ASSERT_EQ(after.st_mtim.tv_sec, before.st_mtim.tv_sec);
  ASSERT_EQ(after.st_mtim.tv_nsec, before.st_mtim.tv_nsec);
}

int64_t CtimeNs(const std::string& path) {
  struct stat st {};
  EXPECT_EQ(::stat(path.c_str(), &st), 0);
  return static_cast<int64_t>(st.st_ctim.tv_sec) * 1000000000 + st.st_ctim.tv_nsec;
}

// issue 40, item 10: the cache keyed on device, inode, size and mtime, so a
// file edited in place to the same size with its mtime put back was served
// stale, with its old digest as ETag, until rackgated restarted.
TEST_F(AgentBundleTest, Issue40InPlaceEditIsServedAtOnce) {
  const std::string path = Put("b", "first bundle");
  AgentBundle bundle(path);
  auto a = bundle.Get();
  ASSERT_TRUE(a.ok()) << a.status().ToString();
  EditInPlace(path, "other bundle");
  auto b = bundle.Get();
  ASSERT_TRUE(b.ok()) << b.status().ToString();
  EXPECT_EQ(*b->bytes, "other bundle");
  EXPECT_EQ(b->sha256_hex, Sha256Hex("other bundle"));
  EXPECT_EQ(*a->bytes, "first bundle") << "a view taken before stays as it was";
  // And again, long after: the second edit's identity differs from the
  // first's by its ctime (or the read was still within the racy window).
  EditInPlace(path, "third bundle");
  auto c = bundle.Get();
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(*c->bytes, "third bundle");
}

// A file whose last change is older than the racy window is read once and
// served from the cache after that.
TEST_F(AgentBundleTest, ASettledFileIsReadOnce) {
  const std::string path = Put("b", "bundle");
  const int64_t settled = CtimeNs(path) + kAgentBundleRacyWindowNs + 1;
  AgentBundle bundle(path, kMaxAgentBundleBytes, [&] { return settled; });
  auto a = bundle.Get();
  auto b = bundle.Get();
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(a->bytes.get(), b->bytes.get());
  EXPECT_EQ(bundle.Reads(), 1u);
}

// A read that started within the racy window of the file's ctime may have
// missed a change that kept every timestamp: it is read again on each call
// until a read starts outside the window, and the same bytes keep the same
// buffer meanwhile.
TEST_F(AgentBundleTest, ARacyReadIsVerifiedUntilTheFileSettles) {
  const std::string path = Put("b", "bundle");
  const int64_t ctime = CtimeNs(path);
  int64_t now = ctime + kAgentBundleRacyWindowNs - 1;
  AgentBundle bundle(path, kMaxAgentBundleBytes, [&] { return now; });
  auto a = bundle.Get();
  auto b = bundle.Get();
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(bundle.Reads(), 2u) << "racy: verified by reading again";
  EXPECT_EQ(a->bytes.get(), b->bytes.get()) << "the same bytes, the same buffer";
  now = ctime + kAgentBundleRacyWindowNs;
  ASSERT_TRUE(bundle.Get().ok());
  EXPECT_EQ(bundle.Reads(), 3u) << "one more read, outside the window, settles it";
  auto c = bundle.Get();
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(bundle.Reads(), 3u);
  EXPECT_EQ(c->bytes.get(), a->bytes.get());
}

}  // namespace
}  // namespace rackgate::core
