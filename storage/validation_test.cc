// Tests for what the store accepts: addresses by kind (an IP literal for the
// IP kinds, an RFC 1123 DNS name for the others).
#include "storage/validation.h"

#include <gtest/gtest.h>

#include <string>

#include "storage/sqlite.h"

namespace rackgate::storage {
namespace {

TEST(Validation, IpLiterals) {
  for (const char* ok : {"10.0.0.6", "0.0.0.0", "255.255.255.255", "fd00::6", "::1", "2001:db8::1:2:3:4",
                         "::ffff:10.0.0.1"}) {
    EXPECT_TRUE(IsIpLiteral(ok)) << ok;
  }
  for (const char* bad : {"10.0.0.300", "10.0.0", "10.0.0.6.7", "", " 10.0.0.6", "10.0.0.6/24", "fd00::g",
                          "fd00:::1", "node-1", "010.0.0.1x"}) {
    EXPECT_FALSE(IsIpLiteral(bad)) << bad;
  }
}

TEST(Validation, DnsNames) {
  for (const char* ok : {"node-1", "node-1.rack4.example", "Node-1.Example", "a", "1.2.3.4", "x--y"}) {
    EXPECT_TRUE(IsDnsName(ok)) << ok;
  }
  for (const char* bad : {"", "-node", "node-", "a..b", ".a", "a.", "under_score", "node 1", "a.-b", "a-.b",
                          "node:1"}) {
    EXPECT_FALSE(IsDnsName(bad)) << bad;
  }
  EXPECT_TRUE(IsDnsName(std::string(63, 'a') + ".b"));
  EXPECT_FALSE(IsDnsName(std::string(64, 'a') + ".b"));
  std::string long_name;
  while (long_name.size() < 260) long_name += "abcdefghi.";
  long_name.resize(253);
  if (long_name.back() == '.') long_name.back() = 'x';
  EXPECT_TRUE(IsDnsName(long_name));
  EXPECT_FALSE(IsDnsName(long_name + "x"));
}

// The message names the value and what its kind takes.
TEST(Validation, EnrollmentAddressMessages) {
  Enrollment e;
  e.hostname = "node-1";
  e.pool = "workers";
  e.ek_public = {1};
  e.ek_hash = {2};
  e.addresses = {{"InternalIP", "10.0.0.300"}};
  try {
    CheckEnrollment(e);
    FAIL() << "10.0.0.300 passed";
  } catch (const StoreError& err) {
    EXPECT_EQ(err.status().reason(), "field_invalid");
    EXPECT_NE(err.status().message().find("InternalIP=10.0.0.300 is not an IPv4 or IPv6 address"),
              std::string::npos)
        << err.status().message();
  }
  e.addresses = {{"ExternalDNS", "bad_name.example"}};
  try {
    CheckEnrollment(e);
    FAIL() << "bad_name passed";
  } catch (const StoreError& err) {
    EXPECT_NE(err.status().message().find("ExternalDNS=bad_name.example is not a DNS name"), std::string::npos)
        << err.status().message();
  }
  e.addresses = {{"InternalIP", "10.0.0.6"}, {"ExternalIP", "fd00::6"}, {"Hostname", "node-1"}};
  EXPECT_NO_THROW(CheckEnrollment(e));
}

}  // namespace
}  // namespace rackgate::storage
