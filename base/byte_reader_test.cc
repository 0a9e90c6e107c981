#include "base/byte_reader.h"

#include <gtest/gtest.h>

#include <vector>

namespace rackgate {
namespace {

TEST(ByteReader, ReadsBothByteOrders) {
  const std::vector<uint8_t> b = {0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07, 0x08};
  ByteReader r(b);
  uint32_t be = 0;
  ASSERT_TRUE(r.ReadU32BE(&be));
  EXPECT_EQ(be, 0x01020304u);
  uint32_t le = 0;
  ASSERT_TRUE(r.ReadU32LE(&le));
  EXPECT_EQ(le, 0x08070605u);
  EXPECT_TRUE(r.empty());
  uint8_t x;
  EXPECT_FALSE(r.ReadU8(&x));
}

TEST(ByteReader, U64BothOrders) {
  const std::vector<uint8_t> b = {1, 2, 3, 4, 5, 6, 7, 8, 1, 2, 3, 4, 5, 6, 7, 8};
  ByteReader r(b);
  uint64_t be = 0, le = 0;
  ASSERT_TRUE(r.ReadU64BE(&be));
  ASSERT_TRUE(r.ReadU64LE(&le));
  EXPECT_EQ(be, 0x0102030405060708ull);
  EXPECT_EQ(le, 0x0807060504030201ull);
}

TEST(ByteReader, ShortReadsFail) {
  const std::vector<uint8_t> b = {0x01, 0x02, 0x03};
  for (size_t n = 0; n <= b.size(); ++n) {
    ByteReader r(std::span<const uint8_t>(b).first(n));
    uint32_t v;
    EXPECT_FALSE(r.ReadU32BE(&v)) << n;
    ByteReader r2(std::span<const uint8_t>(b).first(n));
    EXPECT_FALSE(r2.ReadU32LE(&v)) << n;
  }
  ByteReader r(b);
  ByteReader sub;
  EXPECT_FALSE(r.ReadBytes(4, &sub));
  EXPECT_EQ(r.remaining(), 3u);  // a failed ReadBytes consumes nothing
}

TEST(ByteReader, PrefixedBe) {
  const std::vector<uint8_t> b = {0x00, 0x02, 0xaa, 0xbb, 0xcc};
  ByteReader r(b);
  ByteReader sub;
  ASSERT_TRUE(r.ReadU16BEPrefixed(&sub));
  EXPECT_EQ(sub.remaining(), 2u);
  EXPECT_EQ(r.remaining(), 1u);
}

TEST(ByteReader, MalformedPrefixFails) {
  // Length prefix claims more than remains, including the largest values.
  for (uint16_t len : {3, 4, 0x7fff, 0xffff}) {
    std::vector<uint8_t> b = {static_cast<uint8_t>(len >> 8), static_cast<uint8_t>(len), 1, 2};
    ByteReader r(b);
    ByteReader sub;
    EXPECT_FALSE(r.ReadU16BEPrefixed(&sub)) << len;
  }
  const std::vector<uint8_t> le = {0xff, 0xff, 0xff, 0xff, 0x00};
  ByteReader r(le);
  ByteReader sub;
  EXPECT_FALSE(r.ReadU32LEPrefixed(&sub));
}

TEST(ByteReader, SkipAndRest) {
  const std::vector<uint8_t> b = {1, 2, 3, 4};
  ByteReader r(b);
  ASSERT_TRUE(r.Skip(3));
  EXPECT_EQ(r.rest().size(), 1u);
  EXPECT_EQ(r.rest()[0], 4);
  EXPECT_FALSE(r.Skip(2));
}

}  // namespace
}  // namespace rackgate
