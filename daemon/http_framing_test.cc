// Tests of the request framing rules (daemon/http_framing.h).
#include "daemon/http_framing.h"

#include <gtest/gtest.h>

namespace rackgate::daemon {
namespace {

void ExpectRefused(const std::vector<HeaderField>& fields, std::string_view version = "HTTP/1.1") {
  const Status s = CheckFraming(fields, version);
  EXPECT_FALSE(s.ok());
  EXPECT_EQ(s.reason(), "bad_framing");
  EXPECT_EQ(s.code(), Status::Code::kInvalidArgument);
}

TEST(HttpFraming, OneLengthOrOneChunkedOrNeitherIsServed) {
  EXPECT_TRUE(CheckFraming({}, "HTTP/1.1").ok());
  EXPECT_TRUE(CheckFraming({{"Host", "x"}, {"Content-Length", "0"}}, "HTTP/1.1").ok());
  EXPECT_TRUE(CheckFraming({{"content-length", "1048576"}}, "HTTP/1.0").ok());
  EXPECT_TRUE(CheckFraming({{"Transfer-Encoding", "chunked"}}, "HTTP/1.1").ok());
  EXPECT_TRUE(CheckFraming({{"TRANSFER-ENCODING", "Chunked"}}, "HTTP/1.1").ok());
  // Its size is not judged here: a too long number is a 413 later.
  EXPECT_TRUE(CheckFraming({{"Content-Length", "99999999999999999999999"}}, "HTTP/1.1").ok());
  // Other fields may repeat.
  EXPECT_TRUE(CheckFraming({{"Accept", "a"}, {"Accept", "b"}}, "HTTP/1.1").ok());
}

TEST(HttpFraming, ContentLengthBesideTransferEncodingIsRefused) {
  ExpectRefused({{"Content-Length", "5"}, {"Transfer-Encoding", "chunked"}});
  ExpectRefused({{"Transfer-Encoding", "chunked"}, {"content-length", "0"}});
}

TEST(HttpFraming, RepeatedContentLengthIsRefusedEvenWhenEqual) {
  ExpectRefused({{"Content-Length", "5"}, {"Content-Length", "6"}});
  ExpectRefused({{"Content-Length", "5"}, {"Content-Length", "5"}});
}

TEST(HttpFraming, ContentLengthIsPlainDecimal) {
  for (const char* v : {"", "+5", "-1", " 5", "5 ", "5, 5", "0x10", "5a", "1e3"}) {
    SCOPED_TRACE(v);
    ExpectRefused({{"Content-Length", v}});
  }
}

TEST(HttpFraming, TransferEncodingIsOneLoneChunked) {
  for (const char* v : {"identity", "gzip", "chunked, gzip", "gzip, chunked", "chunked, chunked", "chunked ",
                        "", "chunkedx"}) {
    SCOPED_TRACE(v);
    ExpectRefused({{"Transfer-Encoding", v}});
  }
  ExpectRefused({{"Transfer-Encoding", "chunked"}, {"Transfer-Encoding", "chunked"}});
  ExpectRefused({{"Transfer-Encoding", "gzip"}, {"Transfer-Encoding", "chunked"}});
}

TEST(HttpFraming, TransferEncodingOnlyInHttp11) {
  ExpectRefused({{"Transfer-Encoding", "chunked"}}, "HTTP/1.0");
  ExpectRefused({{"Transfer-Encoding", "chunked"}}, "");
}

TEST(HttpFraming, WhitespaceInAFieldNameIsRefused) {
  ExpectRefused({{"Content-Length ", "5"}});
  ExpectRefused({{"Transfer-Encoding\t", "chunked"}});
  ExpectRefused({{"X-Other ", "1"}});
}

TEST(HttpFraming, MessageNeverEchoesAValue) {
  const Status s = CheckFraming({{"Content-Length", "SECRETVALUE"}}, "HTTP/1.1");
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.message().find("SECRETVALUE"), std::string::npos) << s.message();
}

}  // namespace
}  // namespace rackgate::daemon
