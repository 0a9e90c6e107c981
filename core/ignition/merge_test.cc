// Tests of merging configs, serializing them and hashing what is served.
#include "core/ignition.h"

#include <gtest/gtest.h>

#include "core/secrets.h"

#include "core/ignition/testing/test_util.h"

namespace rackgate::core::ignition {
namespace {

using nlohmann::json;

// ---------------------------------------------------------------------------
// Merge

TEST(Merge, FilePathOverrideInPlace) {
  json base = Config(R"({"ignition":{"version":"3.3.0"},"storage":{"files":[
      {"path":"/etc/a","contents":{"source":"data:,public-a"}},
      {"path":"/etc/b","mode":420},
      {"path":"/etc/c"}]}})");
  json overlay = Config(R"({"ignition":{"version":"3.3.0"},"storage":{"files":[
      {"path":"/etc//b","contents":{"source":"data:,secret-b"}},
      {"path":"/etc/d"}]}})");
  json m = Merge(base, overlay);
  const json& files = m.at("storage").at("files");
  ASSERT_EQ(files.size(), 4u) << m.dump();
  EXPECT_EQ(files.at(0).at("path"), "/etc/a");
  EXPECT_EQ(files.at(1).at("contents").at("source"), "data:,secret-b");
  EXPECT_FALSE(files.at(1).contains("mode")) << "replaced whole, not merged";
  EXPECT_EQ(files.at(2).at("path"), "/etc/c");
  EXPECT_EQ(files.at(3).at("path"), "/etc/d");
}

TEST(Merge, NodeOfAnotherKindIsReplaced) {
  json base = Config(R"({"ignition":{"version":"3.3.0"},"storage":{
      "directories":[{"path":"/etc/x"},{"path":"/etc/keep"}],"links":[{"path":"/etc/y","target":"/t"}]}})");
  json overlay = Config(
      R"({"ignition":{"version":"3.3.0"},"storage":{"files":[{"path":"/etc/x"},{"path":"/etc/y"}]}})");
  json m = Merge(base, overlay);
  EXPECT_EQ(m.at("storage").at("directories"), Config(R"([{"path":"/etc/keep"}])"));
  EXPECT_TRUE(m.at("storage").at("links").empty());
  EXPECT_EQ(m.at("storage").at("files").size(), 2u);
}

TEST(Merge, UnitOverrideByName) {
  json base = Config(R"({"ignition":{"version":"3.3.0"},"systemd":{"units":[
      {"name":"agent.service","enabled":true,"contents":"public"},{"name":"other.service","mask":true}]}})");
  json overlay = Config(R"({"ignition":{"version":"3.3.0"},"systemd":{"units":[
      {"name":"agent.service","contents":"attested"},{"name":"kubelet.service","enabled":true}]}})");
  json m = Merge(base, overlay);
  EXPECT_EQ(
      m.at("systemd").at("units"),
      Config(
          R"([{"name":"agent.service","contents":"attested"},{"name":"other.service","mask":true},
                       {"name":"kubelet.service","enabled":true}])"));
}

TEST(Merge, UsersGroupsDisksByKey) {
  json base = Config(R"({"ignition":{"version":"3.3.0"},
      "passwd":{"users":[{"name":"core","sshAuthorizedKeys":["a"]}],"groups":[{"name":"g","gid":1}]},
      "storage":{"disks":[{"device":"/dev/sda","wipeTable":false}],"filesystems":[{"device":"/dev/sda1","format":"xfs"}]}})");
  json overlay = Config(R"({"ignition":{"version":"3.3.0"},
      "passwd":{"users":[{"name":"core","sshAuthorizedKeys":["b"]}],"groups":[{"name":"g","gid":2}]},
      "storage":{"disks":[{"device":"/dev/sda","wipeTable":true}],"filesystems":[{"device":"/dev/sda1","format":"ext4"}]}})");
  json m = Merge(base, overlay);
  EXPECT_EQ(m.at("passwd").at("users"), overlay.at("passwd").at("users"));
  EXPECT_EQ(m.at("passwd").at("groups"), overlay.at("passwd").at("groups"));
  EXPECT_EQ(m.at("storage").at("disks"), overlay.at("storage").at("disks"));
  EXPECT_EQ(m.at("storage").at("filesystems"), overlay.at("storage").at("filesystems"));
}

TEST(Merge, ListsConcatenateWithoutDuplicates) {
  json base = Config(R"({"ignition":{"version":"3.3.0","security":{"tls":{"certificateAuthorities":[
        {"source":"data:,ca1"},{"source":"data:,ca2"}]}}},
      "kernelArguments":{"shouldExist":["console=ttyS0","quiet"],"shouldNotExist":["debug"]}})");
  json overlay =
      Config(R"({"ignition":{"version":"3.3.0","security":{"tls":{"certificateAuthorities":[
        {"source":"data:,ca2"},{"source":"data:,ca3"}]}}},
      "kernelArguments":{"shouldExist":["quiet","debug","rd.net=1"],"shouldNotExist":["console=ttyS0","x"]}})");
  json m = Merge(base, overlay);
  EXPECT_EQ(m.at("ignition").at("security").at("tls").at("certificateAuthorities"),
            Config(R"([{"source":"data:,ca1"},{"source":"data:,ca2"},{"source":"data:,ca3"}])"));
  // The overlay's word wins where the two disagree.
  EXPECT_EQ(m.at("kernelArguments").at("shouldExist"), Config(R"(["quiet","debug","rd.net=1"])"));
  EXPECT_EQ(m.at("kernelArguments").at("shouldNotExist"), Config(R"(["console=ttyS0","x"])"));
}

TEST(Merge, ObjectsRecursiveScalarsFromOverlayNullKeepsBase) {
  json base = Config(
      R"({"ignition":{"version":"3.3.0","timeouts":{"httpTotal":10,"httpResponseHeaders":5}}})");
  json overlay = Config(
      R"({"ignition":{"version":"3.3.0","timeouts":{"httpTotal":20,"httpResponseHeaders":null}}})");
  json m = Merge(base, overlay);
  EXPECT_EQ(m.at("ignition").at("timeouts"), Config(R"({"httpTotal":20,"httpResponseHeaders":5})"));
}

TEST(Merge, VersionIsTheHigher) {
  json a = Config(R"({"ignition":{"version":"3.3.0"}})");
  json b = Config(R"({"ignition":{"version":"3.1.0"}})");
  EXPECT_EQ(Merge(a, b).at("ignition").at("version"), "3.3.0");
  EXPECT_EQ(Merge(b, a).at("ignition").at("version"), "3.3.0");
  EXPECT_EQ(Merge(b, b).at("ignition").at("version"), "3.1.0");
}

// ---------------------------------------------------------------------------
// Serialize and hash

TEST(Serialize, CompactAndSorted) {
  EXPECT_EQ(Serialize(Config(R"({ "b": 1, "a": [1, 2], "c": {"z": null, "y": "s"} })")),
            R"({"a":[1,2],"b":1,"c":{"y":"s","z":null}})");
}

// The digest rackgated audits for a served config (core/secrets.h).
TEST(Sha256Hex, KnownVectors) {
  EXPECT_EQ(rackgate::core::Sha256Hex(""), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  EXPECT_EQ(rackgate::core::Sha256Hex("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
}

}  // namespace
}  // namespace rackgate::core::ignition
