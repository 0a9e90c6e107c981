// base/transfer against a tiny HTTP server on loopback: the body bound says
// "too large" and never truncates, the header bound, a stream's chunks and
// exceptions, and a failed connect as a Status.
#include "base/transfer.h"

#include <arpa/inet.h>
#include <curl/curl.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>

namespace rackgate::transfer {
namespace {

// Answers every connection with `answer`, verbatim, and closes it.
class LoopbackServer {
 public:
  explicit LoopbackServer(std::string answer) : answer_(std::move(answer)) {
    listen_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof(a);
    if (listen_ < 0 || ::bind(listen_, reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0 || ::listen(listen_, 8) != 0 ||
        ::getsockname(listen_, reinterpret_cast<sockaddr*>(&a), &len) != 0) {
      throw std::runtime_error("listen failed");
    }
    port_ = ntohs(a.sin_port);
    thread_ = std::thread([this] { Serve(); });
  }
  ~LoopbackServer() {
    ::shutdown(listen_, SHUT_RDWR);
    thread_.join();
    ::close(listen_);
  }
  std::string url() const { return "http://127.0.0.1:" + std::to_string(port_) + "/"; }
  // What the last connection sent, up to the end of its header lines.
  std::string last_request() {
    std::lock_guard<std::mutex> lock(mu_);
    return last_request_;
  }

 private:
  void Serve() {
    for (;;) {
      const int fd = ::accept4(listen_, nullptr, nullptr, SOCK_CLOEXEC);
      if (fd < 0) return;
      std::string in;
      char buf[4096];
      while (in.find("\r\n\r\n") == std::string::npos) {
        const ssize_t n = ::read(fd, buf, sizeof(buf));
        if (n <= 0) break;
        in.append(buf, static_cast<size_t>(n));
      }
      {
        std::lock_guard<std::mutex> lock(mu_);
        last_request_ = in;
      }
      // The client may hang up early (a refused answer): no SIGPIPE.
      (void)::send(fd, answer_.data(), answer_.size(), MSG_NOSIGNAL);
      ::shutdown(fd, SHUT_WR);
      while (::read(fd, buf, sizeof(buf)) > 0) {
      }
      ::close(fd);
    }
  }
  std::string answer_;
  std::mutex mu_;
  std::string last_request_;
  int listen_ = -1;
  int port_ = 0;
  std::thread thread_;
};

std::string Answer(const std::string& body, const std::string& extra_headers = "") {
  return "HTTP/1.1 200 OK\r\nContent-Length: " + std::to_string(body.size()) + "\r\n" + extra_headers +
         "Connection: close\r\n\r\n" + body;
}

// The same body with no Content-Length: the bound is found byte by byte.
std::string ChunkedAnswer(const std::string& body) {
  char size[32];
  std::snprintf(size, sizeof(size), "%zx", body.size());
  return "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n" + std::string(size) + "\r\n" +
         body + "\r\n0\r\n\r\n";
}

const FailureReasons kReasons{"the peer", &Status::Corruption, "peer_answer_too_large", "peer_unreachable",
                              "cannot reach the peer: "};

Outcome Get(EasyHandle& h, const std::string& url, BodySink* body) {
  EXPECT_EQ(curl_easy_setopt(h.get(), CURLOPT_URL, url.c_str()), CURLE_OK);
  if (body != nullptr) {
    EXPECT_TRUE(body->Attach(h.get()));
  }
  return Perform(h, body);
}

TEST(BodySinkTest, AnAnswerWithinTheBoundIsKeptWhole) {
  LoopbackServer server(Answer("0123456789"));
  EasyHandle h;
  BodySink body(10);
  Outcome o = Get(h, server.url(), &body);
  ASSERT_TRUE(o.ok()) << o.error;
  EXPECT_EQ(o.http_status, 200);
  EXPECT_EQ(body.TakeBody(), "0123456789");
}

TEST(BodySinkTest, ADeclaredLengthOverTheBoundIsTooLarge) {
  LoopbackServer server(Answer("01234567890"));
  EasyHandle h;
  BodySink body(10);
  Outcome o = Get(h, server.url(), &body);
  EXPECT_FALSE(o.ok());
  EXPECT_TRUE(o.too_large);
  const Status s = FailureStatus(o, body.max_bytes(), kReasons);
  EXPECT_EQ(s.code(), Status::Code::kCorruption);
  EXPECT_EQ(s.reason(), "peer_answer_too_large");
  EXPECT_EQ(s.message(), "the peer's answer is larger than 10 bytes");
}

TEST(BodySinkTest, AnUndeclaredLengthOverTheBoundIsTooLargeNotTruncated) {
  LoopbackServer server(ChunkedAnswer(std::string(100, 'x')));
  EasyHandle h;
  BodySink body(64);
  Outcome o = Get(h, server.url(), &body);
  EXPECT_TRUE(o.too_large);
  EXPECT_TRUE(body.too_large());
  EXPECT_EQ(FailureStatus(o, body.max_bytes(), kReasons).reason(), "peer_answer_too_large");
  // Nothing past the bound was kept, and the caller is told to use none of it.
  EXPECT_LE(body.TakeBody().size(), 64u);
}

TEST(BodySinkTest, AnUndeclaredLengthWithinTheBoundIsKept) {
  LoopbackServer server(ChunkedAnswer(std::string(64, 'x')));
  EasyHandle h;
  BodySink body(64);
  Outcome o = Get(h, server.url(), &body);
  ASSERT_TRUE(o.ok()) << o.error;
  EXPECT_EQ(body.TakeBody(), std::string(64, 'x'));
}

// The request's header lines reach the server (it answers what it read).
TEST(HeaderListTest, TheLinesAreSent) {
  LoopbackServer server(Answer("{}"));
  EasyHandle h;
  HeaderList list;
  EXPECT_EQ(list.get(), nullptr);
  list.Add("X-One: 1");
  list.Add("X-Two: 2");
  HeaderList moved(std::move(list));
  EXPECT_NE(moved.get(), nullptr);
  ASSERT_EQ(curl_easy_setopt(h.get(), CURLOPT_HTTPHEADER, moved.get()), CURLE_OK);
  ASSERT_TRUE(Get(h, server.url(), nullptr).ok());
  EXPECT_NE(server.last_request().find("\r\nX-One: 1\r\nX-Two: 2\r\n"), std::string::npos) << server.last_request();
}

TEST(HeaderSinkTest, KeepsTheNamedHeaderVerbatimWhateverItsCase) {
  LoopbackServer server(Answer("{}", "rEtRy-AfTeR: 7\r\n"));
  EasyHandle h;
  HeaderSink header("Retry-After", 64);
  ASSERT_TRUE(header.Attach(h.get()));
  ASSERT_TRUE(Get(h, server.url(), nullptr).ok());
  ASSERT_TRUE(header.value().has_value());
  EXPECT_EQ(*header.value(), " 7");
}

TEST(HeaderSinkTest, AValueOverTheBoundIsNotKept) {
  LoopbackServer server(Answer("{}", "Retry-After: " + std::string(64, '9') + "\r\n"));
  EasyHandle h;
  HeaderSink header("Retry-After", 64);  // 65 bytes with the space
  ASSERT_TRUE(header.Attach(h.get()));
  ASSERT_TRUE(Get(h, server.url(), nullptr).ok());
  EXPECT_FALSE(header.value().has_value());
}

TEST(HeaderSinkTest, AnInterimAnswersHeaderIsForgotten) {
  LoopbackServer server("HTTP/1.1 100 Continue\r\nRetry-After: 1\r\n\r\n" + Answer("{}"));
  EasyHandle h;
  HeaderSink header("Retry-After", 64);
  ASSERT_TRUE(header.Attach(h.get()));
  Outcome o = Get(h, server.url(), nullptr);
  ASSERT_TRUE(o.ok()) << o.error;
  EXPECT_EQ(o.http_status, 200);
  EXPECT_FALSE(header.value().has_value());
}

TEST(PerformTest, AFailedConnectIsUnreachableWithCurlsText) {
  // A port nothing listens on: bound, then closed.
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof(a);
  ASSERT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)), 0);
  ASSERT_EQ(::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len), 0);
  ::close(fd);
  EasyHandle h;
  BodySink body(10);
  Outcome o = Get(h, "http://127.0.0.1:" + std::to_string(ntohs(a.sin_port)) + "/", &body);
  EXPECT_FALSE(o.ok());
  EXPECT_FALSE(o.too_large);
  EXPECT_EQ(o.curl_code, CURLE_COULDNT_CONNECT);
  EXPECT_EQ(o.os_errno, ECONNREFUSED);
  EXPECT_EQ(o.http_status, 0);
  const Status s = FailureStatus(o, body.max_bytes(), kReasons);
  EXPECT_EQ(s.code(), Status::Code::kIoError);
  EXPECT_EQ(s.reason(), "peer_unreachable");
  EXPECT_EQ(s.message(), "cannot reach the peer: " + o.error);
  EXPECT_FALSE(o.error.empty());
  EXPECT_NE(o.error.back(), '\n');
}

TEST(StreamSinkTest, HandsOverEveryByteWithTheStatus) {
  LoopbackServer server(ChunkedAnswer("line one\nline two\n"));
  EasyHandle h;
  std::string got;
  long status = 0;
  StreamSink stream([&](long s, std::string_view chunk) {
    status = s;
    got.append(chunk);
    return true;
  });
  ASSERT_TRUE(stream.Attach(h.get()));
  Outcome o = Get(h, server.url(), nullptr);
  ASSERT_TRUE(o.ok()) << o.error;
  EXPECT_EQ(status, 200);
  EXPECT_EQ(stream.http_status(), 200);
  EXPECT_EQ(got, "line one\nline two\n");
}

TEST(StreamSinkTest, FalseEndsTheTransfer) {
  LoopbackServer server(ChunkedAnswer("x"));
  EasyHandle h;
  StreamSink stream([](long, std::string_view) { return false; });
  ASSERT_TRUE(stream.Attach(h.get()));
  EXPECT_EQ(Get(h, server.url(), nullptr).curl_code, CURLE_WRITE_ERROR);
  EXPECT_NO_THROW(stream.RethrowIfThrown());
}

TEST(StreamSinkTest, AnExceptionEndsTheTransferAndIsRethrown) {
  LoopbackServer server(ChunkedAnswer("x"));
  EasyHandle h;
  StreamSink stream([](long, std::string_view) -> bool { throw std::runtime_error("handler failed"); });
  ASSERT_TRUE(stream.Attach(h.get()));
  EXPECT_EQ(Get(h, server.url(), nullptr).curl_code, CURLE_WRITE_ERROR);
  EXPECT_THROW(stream.RethrowIfThrown(), std::runtime_error);
}

TEST(DiscardBodyTest, OnlyTheStatusIsRead) {
  LoopbackServer server(ChunkedAnswer(std::string(100000, 'x')));
  EasyHandle h;
  ASSERT_TRUE(DiscardBody(h.get()));
  Outcome o = Get(h, server.url(), nullptr);
  ASSERT_TRUE(o.ok()) << o.error;
  EXPECT_EQ(o.http_status, 200);
}

TEST(HttpsOnlyTest, APlainHttpUrlIsNotFetched) {
  LoopbackServer server(Answer("{}"));
  EasyHandle h;
  ASSERT_TRUE(HttpsOnlyNoRedirects(h.get()));
  ASSERT_TRUE(VerifyPeerAgainstCallersCa(h.get()));
  BodySink body(10);
  Outcome o = Get(h, server.url(), &body);
  EXPECT_EQ(o.curl_code, CURLE_UNSUPPORTED_PROTOCOL);
  EXPECT_EQ(o.http_status, 0);
  EXPECT_EQ(FailureStatus(o, body.max_bytes(), kReasons).reason(), "peer_unreachable");
}

TEST(EasyHandleTest, AMovedHandleIsOwnedOnce) {
  EasyHandle a;
  void* curl = a.get();
  EasyHandle b(std::move(a));
  EXPECT_EQ(b.get(), curl);
  EXPECT_EQ(a.get(), nullptr);  // NOLINT(bugprone-use-after-move): the state a move leaves is the contract
  EasyHandle c;
  c = std::move(b);
  EXPECT_EQ(c.get(), curl);
}

}  // namespace
}  // namespace rackgate::transfer
