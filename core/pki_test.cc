// The appliance PKI's files and directories (docs/systemd.md, "Files").
#include "core/pki.h"

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <string>

#include "core/testing/csr_test_util.h"

namespace rackgate::core {
namespace {

using csr::test_util::TempDir;

mode_t ModeOf(const std::string& path) {
  struct stat st;
  EXPECT_EQ(::stat(path.c_str(), &st), 0) << path;
  return st.st_mode & 07777;
}

// Issue 32: tls/ holds the serving key and is 0700 as docs/systemd.md says,
// whether init makes it now or an older init made it 0755.
TEST(Issue32, KeyDirectoriesArePrivate) {
  TempDir dir;
  ASSERT_TRUE(CreateCa({}, dir / "ca/ca.crt", dir / "ca/ca.key").ok());
  ServingCertOptions names;
  names.dns_names = {"rackgate.example.com"};
  Status s = IssueServingCertificate(names, dir / "ca/ca.crt", dir / "ca/ca.key", dir / "tls/server.crt",
                                     dir / "tls/server.key");
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(ModeOf(dir / "ca"), 0700u);
  EXPECT_EQ(ModeOf(dir / "tls"), 0700u);
  EXPECT_EQ(ModeOf(dir / "tls/server.key"), 0600u);

  ASSERT_EQ(::chmod((dir / "tls").c_str(), 0755), 0);
  s = IssueServingCertificate(names, dir / "ca/ca.crt", dir / "ca/ca.key", dir / "tls/server.crt",
                              dir / "tls/server.key");
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(ModeOf(dir / "tls"), 0700u);
}

}  // namespace
}  // namespace rackgate::core
