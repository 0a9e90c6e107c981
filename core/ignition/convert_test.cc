// Tests of conversion between spec 3.x minors.
#include "core/ignition.h"

#include <gtest/gtest.h>

#include "core/ignition/testing/test_util.h"

namespace rackgate::core::ignition {
namespace {

using nlohmann::json;

// ---------------------------------------------------------------------------
// Conversion

TEST(Convert, UpgradeRewritesVersionOnly) {
  json c = Config(R"({"ignition":{"version":"3.0.0"},"storage":{"files":[{"path":"/etc/x"}]}})");
  Result<json> up = ConvertToVersion(c, k330);
  ASSERT_TRUE(up.ok()) << up.status().ToString();
  EXPECT_EQ(up->at("ignition").at("version"), "3.3.0");
  json back = *up;
  back["ignition"]["version"] = "3.0.0";
  EXPECT_EQ(back, c);
}

TEST(Convert, DowngradeWhenNothingNewIsUsed) {
  json c = Config(R"({"ignition":{"version":"3.3.0"},
                      "storage":{"files":[{"path":"/etc/x","contents":{"source":"data:,x",
                        "verification":{"hash":"sha512-00"}}}]},
                      "passwd":{"users":[{"name":"core"}]}})");
  Result<json> down = ConvertToVersion(c, k300);
  ASSERT_TRUE(down.ok()) << down.status().ToString();
  EXPECT_EQ(down->at("ignition").at("version"), "3.0.0");
}

struct TooNewCase {
  std::string config;
  SpecVersion target;
  std::string pointer;
  std::string since;
};

TEST(Convert, RefusesFieldsNewerThanTarget) {
  const std::vector<TooNewCase> cases = {
      {R"({"ignition":{"version":"3.3.0"},"kernelArguments":{"shouldExist":["a"]}})", k320,
       "/kernelArguments", "3.3.0"},
      {R"({"ignition":{"version":"3.3.0"},"storage":{"filesystems":[{"device":"/dev/vdb","format":"none"}]}})",
       k320, "/storage/filesystems/0/format", "3.3.0"},
      {R"({"ignition":{"version":"3.2.0"},"storage":{"luks":[{"name":"a","device":"/dev/vdb"}]}})",
       k310, "/storage/luks", "3.2.0"},
      {R"({"ignition":{"version":"3.2.0"},"passwd":{"users":[{"name":"a"},{"name":"b","shouldExist":false}]}})",
       k310, "/passwd/users/1/shouldExist", "3.2.0"},
      {R"({"ignition":{"version":"3.2.0"},"storage":{"disks":[{"device":"/dev/sda","partitions":[{"label":"r","resize":true}]}]}})",
       k310, "/storage/disks/0/partitions/0/resize", "3.2.0"},
      {R"({"ignition":{"version":"3.2.0"},"storage":{"files":[{"path":"/x","contents":{"source":"gs://b/o"}}]}})",
       k310, "/storage/files/0/contents/source", "3.2.0"},
      {R"({"ignition":{"version":"3.1.0"},"storage":{"files":[{"path":"/x","contents":{"source":"https://a/b","httpHeaders":[{"name":"A","value":"b"}]}}]}})",
       k300, "/storage/files/0/contents/httpHeaders", "3.1.0"},
      {R"({"ignition":{"version":"3.1.0"},"storage":{"files":[{"path":"/x","contents":{"source":"https://a/b","verification":{"hash":"sha256-00"}}}]}})",
       k300, "/storage/files/0/contents/verification/hash", "3.1.0"},
      {R"({"ignition":{"version":"3.1.0","proxy":{"httpProxy":"http://p"}}})", k300,
       "/ignition/proxy", "3.1.0"},
      {R"({"ignition":{"version":"3.1.0","security":{"tls":{"certificateAuthorities":[{"source":"data:,x","compression":null}]}}}})",
       k300, "/ignition/security/tls/certificateAuthorities/0/compression", "3.1.0"},
      {R"({"ignition":{"version":"3.1.0"},"storage":{"filesystems":[{"device":"/dev/vdb","mountOptions":["a"]}]}})",
       k300, "/storage/filesystems/0/mountOptions", "3.1.0"},
  };
  for (const TooNewCase& c : cases) {
    Result<json> r = ConvertToVersion(Config(c.config), c.target);
    ASSERT_FALSE(r.ok()) << c.config;
    EXPECT_EQ(r.status().reason(), "ignition_config_too_new") << c.config;
    EXPECT_NE(r.status().message().find(c.pointer), std::string::npos) << r.status().message();
    EXPECT_NE(r.status().message().find(c.since), std::string::npos) << r.status().message();
    // The same config converts to the version that introduced the field.
    Result<SpecVersion> since = ParseSpecVersion(c.since);
    ASSERT_TRUE(since.ok());
    EXPECT_TRUE(ConvertToVersion(Config(c.config), *since).ok()) << c.config;
  }
}

TEST(Convert, RefusesUnsupportedTargetAndUnreadableConfig) {
  json c = Config(R"({"ignition":{"version":"3.1.0"}})");
  EXPECT_EQ(ConvertToVersion(c, SpecVersion{3, 4, 0}).status().reason(),
            "ignition_version_unsupported");
  EXPECT_EQ(ConvertToVersion(c, SpecVersion{2, 2, 0}).status().reason(),
            "ignition_version_unsupported");
  EXPECT_EQ(ConvertToVersion(Config(R"({"ignition":{}})"), k310).status().reason(),
            "ignition_config_invalid");
  EXPECT_EQ(ConvertToVersion(Config("[]"), k310).status().reason(), "ignition_config_invalid");
}

}  // namespace
}  // namespace rackgate::core::ignition
