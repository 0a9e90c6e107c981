// Request smuggling over real TLS: ambiguous framing is refused with 400 bad_framing and the connection closed.
#include "daemon/http_server.h"

#include <gtest/gtest.h>

#include <sys/time.h>

#include <cctype>
#include <cstdlib>

#include "daemon/testing/http_server_test_util.h"

namespace rackgate::daemon {
namespace {

struct HttpAnswer {
  int status = 0;
  std::string headers;
  std::string body;
};

// What a connection brought back once the server was done with it.
struct Exchange {
  std::vector<HttpAnswer> answers;
  std::string raw;       // every byte received
  std::string unparsed;  // bytes after the last complete answer
  bool closed = false;   // the server ended the connection (EOF or reset)
  bool timed_out = false;
};

std::string Lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

// Splits `data` into HTTP/1.1 answers framed by Content-Length (the only
// framing rackgated's buffered answers use).
std::vector<HttpAnswer> ParseAnswers(const std::string& data, std::string* unparsed) {
  std::vector<HttpAnswer> out;
  size_t pos = 0;
  while (pos < data.size()) {
    const size_t end = data.find("\r\n\r\n", pos);
    if (end == std::string::npos || data.compare(pos, 9, "HTTP/1.1 ") != 0) break;
    HttpAnswer a;
    a.status = std::atoi(data.substr(pos + 9, 3).c_str());
    a.headers = data.substr(pos, end + 4 - pos);
    const std::string lower = Lower(a.headers);
    const size_t cl = lower.find("\r\ncontent-length:");
    if (cl == std::string::npos) break;
    const size_t length = std::strtoul(lower.c_str() + cl + 17, nullptr, 10);
    if (data.size() < end + 4 + length) break;
    a.body = data.substr(end + 4, length);
    out.push_back(std::move(a));
    pos = end + 4 + length;
  }
  *unparsed = data.substr(pos);
  return out;
}

class FramingTest : public HttpServerTest {
 protected:
  void SetUp() override {
    HttpServerTest::SetUp();
    // Far beyond the client's read timeout: a connection that ends within
    // it was ended by the server's decision, not by the idle timeout.
    options_.connection_timeout_seconds = 300;
    options_.router.Add("POST", "/seen", [this](const Request& r) {
      ++seen_;
      return Response::Text(200, "seen " + std::to_string(r.body.size()));
    });
  }

  // Sends `bytes` in one TLS write and reads until the server closes the
  // connection or kReadTimeout passes without a byte.
  Exchange Send(uint16_t port, const std::string& bytes) {
    Exchange ex;
    std::unique_ptr<SSL_CTX, decltype(&SSL_CTX_free)> ctx(SSL_CTX_new(TLS_client_method()), SSL_CTX_free);
    if (!ctx) {
      ADD_FAILURE() << "SSL_CTX_new";
      return ex;
    }
    SSL_CTX_load_verify_locations(ctx.get(), ca_path_.c_str(), nullptr);
    SSL_CTX_set_verify(ctx.get(), SSL_VERIFY_PEER, nullptr);
    // A server that closes without close_notify has still closed.
    SSL_CTX_set_options(ctx.get(), SSL_OP_IGNORE_UNEXPECTED_EOF);
    const int fd = ConnectTcp(port);
    if (fd < 0) {
      ADD_FAILURE() << "connect: " << std::strerror(errno);
      return ex;
    }
    timeval tv{kReadTimeoutSeconds, 0};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
    std::unique_ptr<SSL, decltype(&SSL_free)> ssl(SSL_new(ctx.get()), SSL_free);
    SSL_set_fd(ssl.get(), fd);
    if (SSL_connect(ssl.get()) != 1) {
      ADD_FAILURE() << "TLS handshake failed";
      close(fd);
      return ex;
    }
    if (SSL_write(ssl.get(), bytes.data(), static_cast<int>(bytes.size())) != static_cast<int>(bytes.size())) {
      ADD_FAILURE() << "SSL_write";
      close(fd);
      return ex;
    }
    std::string data;
    char buf[4096];
    while (true) {
      const int n = SSL_read(ssl.get(), buf, sizeof buf);
      if (n > 0) {
        data.append(buf, static_cast<size_t>(n));
        continue;
      }
      const int err = SSL_get_error(ssl.get(), n);
      if (err == SSL_ERROR_ZERO_RETURN) {
        ex.closed = true;
      } else if (err == SSL_ERROR_SYSCALL && (errno == EAGAIN || errno == EWOULDBLOCK)) {
        ex.timed_out = true;
      } else {
        ex.closed = true;  // a reset, or the TLS layer ended: the connection is gone either way
      }
      break;
    }
    close(fd);
    ex.answers = ParseAnswers(data, &ex.unparsed);
    ex.raw = std::move(data);
    return ex;
  }

  static constexpr int kReadTimeoutSeconds = 30;
  std::atomic<int> seen_{0};
};

// The request smuggled behind each bad one: served, it would answer
// {"hello":"world"}, and its Connection: close would end the connection.
constexpr char kSmuggled[] = "GET /hello HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n";

// Who answers the refusal: rackgated, with its reason, or MHD itself, which
// refuses a Content-Length that is not a number before the handler runs
// when there is no Transfer-Encoding (a 400 with an HTML body; MHD 0.9.75
// sends that answer's header block twice, so its bytes do not parse as one
// answer).
enum class RefusedBy { kRackgated, kMhd };

struct BadCase {
  const char* name;
  std::string request;
  RefusedBy refused_by = RefusedBy::kRackgated;
};

TEST_F(FramingTest, Issue27AmbiguousFramingIsRefusedAndTheConnectionClosed) {
  auto server = StartServer();
  ASSERT_TRUE(server);
  const std::string head = "POST /seen HTTP/1.1\r\nHost: 127.0.0.1\r\n";
  const std::vector<BadCase> cases = {
      {"Content-Length and chunked", head + "Content-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n"},
      {"chunked and Content-Length", head + "Transfer-Encoding: chunked\r\nContent-Length: 0\r\n\r\n0\r\n\r\n"},
      {"two different Content-Lengths", head + "Content-Length: 3\r\nContent-Length: 0\r\n\r\nabc"},
      {"two equal Content-Lengths", head + "Content-Length: 3\r\nContent-Length: 3\r\n\r\nabc"},
      {"chunked twice", head + "Transfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n"},
      {"gzip, then chunked in a second field", head + "Transfer-Encoding: gzip\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n"},
      {"chunked, gzip", head + "Transfer-Encoding: chunked, gzip\r\n\r\n0\r\n\r\n"},
      {"identity", head + "Transfer-Encoding: identity\r\n\r\n"},
      {"chunked in HTTP/1.0", "POST /seen HTTP/1.0\r\nConnection: keep-alive\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n"},
      {"Content-Length with a space before the colon", head + "Content-Length : 3\r\n\r\n"},
      {"chunked with a space before the colon", head + "Transfer-Encoding : chunked\r\nContent-Length: 0\r\n\r\n"},
      {"chunked and a Content-Length that is no number", head + "Transfer-Encoding: chunked\r\nContent-Length: x\r\n\r\n0\r\n\r\n"},
      {"Content-Length +3", head + "Content-Length: +3\r\n\r\nabc", RefusedBy::kMhd},
      {"Content-Length 3, 3", head + "Content-Length: 3, 3\r\n\r\nabc", RefusedBy::kMhd},
  };
  for (const BadCase& c : cases) {
    SCOPED_TRACE(c.name);
    const Exchange ex = Send(server->port(), c.request + kSmuggled);
    if (ex.answers.empty()) {
      ADD_FAILURE() << "no answer" << (ex.timed_out ? " in " + std::to_string(kReadTimeoutSeconds) + " s" : "")
                    << "; unparsed: " << ex.unparsed;
      continue;
    }
    const HttpAnswer& first = ex.answers.front();
    EXPECT_EQ(first.status, 400) << first.headers << first.body;
    EXPECT_EQ(ex.answers.size(), 1u) << "received:\n" << ex.raw;
    EXPECT_EQ(ex.raw.find(R"({"hello":"world"})"), std::string::npos)
        << "the request behind the refused one was served:\n" << ex.raw;
    EXPECT_TRUE(ex.closed) << (ex.timed_out ? "still open after " + std::to_string(kReadTimeoutSeconds) + " s" : "");
    if (c.refused_by == RefusedBy::kRackgated) {
      const json body = json::parse(first.body, nullptr, false);
      const bool has_error = body.is_object() && body.contains("error") && body.at("error").is_object();
      EXPECT_EQ(has_error ? body.at("error").value("reason", "") : "", "bad_framing") << first.body;
      EXPECT_NE(Lower(first.headers).find("\r\nconnection: close\r\n"), std::string::npos) << first.headers;
      EXPECT_TRUE(ex.unparsed.empty()) << "received:\n" << ex.raw;
    }
  }
  EXPECT_EQ(seen_.load(), 0) << "a handler ran for a refused request";
}

// The control: the same pipelining with unambiguous framing is answered
// twice, so the checks above can tell a refusal from a server that never
// answers a second request.
TEST_F(FramingTest, Issue27WellFramedPipelinedRequestsAreEachAnswered) {
  auto server = StartServer();
  ASSERT_TRUE(server);
  const std::string head = "POST /seen HTTP/1.1\r\nHost: 127.0.0.1\r\n";
  const std::vector<std::string> requests = {
      head + "Content-Length: 3\r\n\r\nabc",
      head + "Transfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\n",
      head + "transfer-encoding: CHUNKED\r\n\r\n3\r\nabc\r\n0\r\n\r\n",
  };
  for (const std::string& request : requests) {
    SCOPED_TRACE(request);
    const Exchange ex = Send(server->port(), request + kSmuggled);
    ASSERT_EQ(ex.answers.size(), 2u) << "unparsed: " << ex.unparsed;
    EXPECT_EQ(ex.answers[0].status, 200);
    EXPECT_EQ(ex.answers[0].body, "seen 3");
    EXPECT_EQ(ex.answers[1].status, 200);
    EXPECT_EQ(ex.answers[1].body, R"({"hello":"world"})");
    EXPECT_TRUE(ex.closed);  // after the second, which asked for it
  }
  EXPECT_EQ(seen_.load(), 3);
}

// A refusal is counted and logged like any answer.
TEST_F(FramingTest, Issue27RefusalIsCounted) {
  auto server = StartServer();
  ASSERT_TRUE(server);
  const Exchange ex = Send(server->port(),
                           "POST /seen HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 1\r\n"
                           "Transfer-Encoding: chunked\r\n\r\n0\r\n\r\n");
  ASSERT_EQ(ex.answers.size(), 1u);
  server->Stop();
  const std::string text = metrics_.Render();
  EXPECT_NE(text.find("rackgate_http_requests_total{method=\"POST\",route=\"other\",status=\"400\"} 1\n"),
            std::string::npos)
      << text;
}

}  // namespace
}  // namespace rackgate::daemon
