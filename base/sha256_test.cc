// Tests for base/sha256.h against the FIPS 180-2 example vectors.
#include "base/sha256.h"

#include <gtest/gtest.h>

#include <string_view>

namespace rackgate::sha256 {
namespace {

std::span<const uint8_t> Span(std::string_view s) {
  return {reinterpret_cast<const uint8_t*>(s.data()), s.size()};
}

TEST(Sha256, KnownVectors) {
  EXPECT_EQ(Hex(Span("")), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  EXPECT_EQ(Hex(Span("abc")), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  EXPECT_EQ(Hex(Span("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq")),
            "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
}

TEST(Sha256, DigestMatchesHex) {
  const auto d = Digest(Span("abc"));
  EXPECT_EQ(d[0], 0xba);
  EXPECT_EQ(d[31], 0xad);
}

}  // namespace
}  // namespace rackgate::sha256
