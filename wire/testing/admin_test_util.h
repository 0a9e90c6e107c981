// What the admin bodies' tests share: every truncation of a body refused.
#ifndef RACKGATE_WIRE_TESTING_ADMIN_TEST_UTIL_H_
#define RACKGATE_WIRE_TESTING_ADMIN_TEST_UTIL_H_

#include <gtest/gtest.h>

#include <string>
#include <string_view>

namespace rackgate::wire::testing {

// Every proper prefix of `body` is refused by `decode` as bad_json.
template <typename Decode>
void ExpectEveryPrefixRefused(const std::string& body, Decode decode) {
  for (size_t n = 0; n < body.size(); ++n) {
    auto r = decode(std::string_view(body).substr(0, n));
    EXPECT_FALSE(r.ok()) << "prefix of " << n << " bytes accepted";
    if (!r.ok()) {
      EXPECT_EQ(r.status().reason(), "bad_json") << n;
    }
  }
}

}  // namespace rackgate::wire::testing

#endif  // RACKGATE_WIRE_TESTING_ADMIN_TEST_UTIL_H_
