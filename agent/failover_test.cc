// Tests of how the agent moves from one appliance to the next.
#include "agent/failover.h"

#include <gtest/gtest.h>

#include <deque>
#include <map>

#include "wire/refusal.h"

namespace rackgate::agent {
namespace {

// A fleet of fake appliances: each endpoint answers its queue of answers in
// order (an empty queue: connection refused), and every request is recorded.
class FakeFleet : public Transport {
 public:
  struct Request {
    std::string url;
    std::string path;
    std::vector<std::string> headers;
    bool post = false;
  };

  void Queue(const std::string& url, Result<HttpResponse> answer) { answers_[url].push_back(std::move(answer)); }

  Result<HttpResponse> Send(const Endpoint& e, std::string_view path, const std::string* json_body,
                            const std::vector<std::string>& headers) const override {
    requests.push_back({e.url, std::string(path), headers, json_body != nullptr});
    auto& q = answers_[e.url];
    if (q.empty()) return Status::IoError("appliance_unreachable", "Failed to connect: Connection refused");
    auto a = std::move(q.front());
    q.pop_front();
    return a;
  }

  mutable std::vector<Request> requests;

 private:
  mutable std::map<std::string, std::deque<Result<HttpResponse>>> answers_;
};

HttpResponse Answer(long status, std::string body = "{}", std::optional<std::string> retry_after = std::nullopt) {
  HttpResponse r;
  r.status = status;
  r.body = std::move(body);
  r.retry_after = std::move(retry_after);
  return r;
}

std::string ErrorBody(const std::string& reason) {
  return wire::EncodeRefusal({reason, "m"});
}

std::vector<Endpoint> Fleet(int n) {
  std::vector<Endpoint> out;
  for (int i = 0; i < n; ++i) {
    Endpoint e;
    e.host = std::string(1, static_cast<char>('a' + i));
    e.port = 22623;
    e.url = "https://" + e.host + ":22623";
    out.push_back(e);
  }
  return out;
}

struct Harness {
  explicit Harness(int n, double start = 0.0)
      : failover(Fleet(n), &fleet, [] { return std::time_t{1000}; }, start,
                 [this](const std::string& l) { log.push_back(l); }) {}
  FakeFleet fleet;
  std::vector<std::string> log;
  Failover failover;

  std::vector<std::string> Asked() const {
    std::vector<std::string> out;
    for (const auto& r : fleet.requests) out.push_back(r.url.substr(8, 1) + r.path);
    return out;
  }
};

TEST(Failover, StartsAtARandomEndpoint) {
  EXPECT_EQ(Harness(3, 0.0).failover.Current().host, "a");
  EXPECT_EQ(Harness(3, 0.4).failover.Current().host, "b");
  EXPECT_EQ(Harness(3, 0.99).failover.Current().host, "c");
  EXPECT_EQ(Harness(3, 1.0).failover.Current().host, "c");  // clamped
}

TEST(Failover, MovesOnAfterAConnectErrorATimeoutOrA5xx) {
  Harness h(4);
  // a: refused (empty queue); b: a timeout; c: a 500; d: answers.
  h.fleet.Queue("https://b:22623", Status::IoError("appliance_unreachable", "Operation timed out after 60000 ms"));
  h.fleet.Queue("https://c:22623", Answer(500, ErrorBody("internal")));
  h.fleet.Queue("https://d:22623", Answer(200, R"({"ok": true})"));
  auto r = h.failover.Call("/v1/machine", nullptr, {"Authorization: Bearer t"});
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->body, R"({"ok": true})");
  EXPECT_EQ(h.Asked(), (std::vector<std::string>{"a/v1/machine", "b/v1/machine", "c/v1/machine", "d/v1/machine"}));
  ASSERT_EQ(h.log.size(), 3u);
  EXPECT_EQ(h.log[0],
            "appliance https://a:22623 failed (appliance_unreachable: Failed to connect: Connection refused); "
            "trying https://b:22623");
  EXPECT_NE(h.log[1].find("timed out"), std::string::npos);
  EXPECT_EQ(h.log[2], "appliance https://c:22623 failed (500 internal: m); trying https://d:22623");
  EXPECT_EQ(h.failover.Current().host, "d");
}

TEST(Failover, A4xxIsFinalAndDoesNotMove) {
  Harness h(3);
  h.fleet.Queue("https://a:22623", Answer(403, ErrorBody("machine_revoked")));
  auto r = h.failover.Call("/v1/attest/challenge", nullptr, {});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.failure().kind, Failure::Kind::kRefused);
  EXPECT_EQ(r.failure().reason, "machine_revoked");
  EXPECT_EQ(h.Asked(), (std::vector<std::string>{"a/v1/attest/challenge"}));
  EXPECT_TRUE(h.log.empty());
  // A session the appliance does not know is no fault of the appliance.
  h.fleet.Queue("https://a:22623", Answer(403, ErrorBody("session_used")));
  auto s = h.failover.CallOnce("/v1/attest/evidence", nullptr, {});
  EXPECT_EQ(s.failure().kind, Failure::Kind::kRetry);
  EXPECT_EQ(h.failover.Current().host, "a");
  EXPECT_TRUE(h.log.empty());
}

TEST(Failover, StaysWithTheEndpointThatAnswered) {
  Harness h(3);
  h.fleet.Queue("https://b:22623", Answer(200));
  h.fleet.Queue("https://b:22623", Answer(200));
  h.fleet.Queue("https://b:22623", Answer(200));
  h.fleet.Queue("https://c:22623", Answer(200));
  ASSERT_TRUE(h.failover.Call("/1", nullptr, {}).ok());  // a refused, b answers
  ASSERT_TRUE(h.failover.Call("/2", nullptr, {}).ok());
  ASSERT_TRUE(h.failover.Call("/3", nullptr, {}).ok());
  EXPECT_EQ(h.Asked(), (std::vector<std::string>{"a/1", "b/1", "b/2", "b/3"}));
  // Sticky across rounds too: after the wait the last one that answered is asked first.
  h.failover.NewRound();
  ASSERT_TRUE(h.failover.Call("/4", nullptr, {}).ok());  // b now refuses: c answers
  EXPECT_EQ(h.failover.Current().host, "c");
  EXPECT_EQ(h.Asked().back(), "c/4");
}

TEST(Failover, MidProtocolSwitchKeepsTheToken) {
  Harness h(2);
  // The attestation on a, then a dies; the config step goes to b with a's token.
  h.fleet.Queue("https://a:22623", Answer(200, "challenge"));
  h.fleet.Queue("https://a:22623", Answer(200, "token"));
  h.fleet.Queue("https://b:22623", Answer(200, "config"));
  const std::string body = "{}";
  ASSERT_TRUE(h.failover.Call("/v1/attest/challenge", &body, {}).ok());
  ASSERT_TRUE(h.failover.CallOnce("/v1/attest/evidence", &body, {}).ok());
  const std::vector<std::string> auth = {"Authorization: Bearer tok-from-a", "Accept: x"};
  auto c = h.failover.Call("/v1/machine/config", nullptr, auth);
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->body, "config");
  ASSERT_EQ(h.fleet.requests.size(), 4u);
  EXPECT_EQ(h.fleet.requests[2].url, "https://a:22623");
  EXPECT_EQ(h.fleet.requests[3].url, "https://b:22623");
  EXPECT_EQ(h.fleet.requests[3].path, "/v1/machine/config");
  EXPECT_EQ(h.fleet.requests[3].headers, auth);  // the same token, on the other appliance
  EXPECT_FALSE(h.fleet.requests[3].post);
}

TEST(Failover, AFailedEvidenceMovesOnAndIsNotResent) {
  Harness h(2);
  h.fleet.Queue("https://a:22623", Answer(200, "challenge-a"));
  h.fleet.Queue("https://a:22623", Answer(502));
  h.fleet.Queue("https://b:22623", Answer(200, "challenge-b"));
  h.fleet.Queue("https://b:22623", Answer(200, "token"));
  const std::string body = "{}";
  ASSERT_TRUE(h.failover.Call("/v1/attest/challenge", &body, {}).ok());
  auto ev = h.failover.CallOnce("/v1/attest/evidence", &body, {});
  ASSERT_FALSE(ev.ok());
  EXPECT_EQ(ev.failure().kind, Failure::Kind::kRetry);
  // The agent starts again at once (the round is not over) from a fresh
  // challenge, on b: the evidence is not re-sent anywhere.
  EXPECT_TRUE(h.failover.CanMoveOn());
  EXPECT_EQ(h.failover.Current().host, "b");
  auto ch = h.failover.Call("/v1/attest/challenge", &body, {});
  ASSERT_TRUE(ch.ok());
  EXPECT_EQ(ch->body, "challenge-b");
  ASSERT_TRUE(h.failover.CallOnce("/v1/attest/evidence", &body, {}).ok());
  EXPECT_EQ(h.Asked(), (std::vector<std::string>{"a/v1/attest/challenge", "a/v1/attest/evidence",
                                                 "b/v1/attest/challenge", "b/v1/attest/evidence"}));
}

TEST(Failover, AnEvidenceFailureOnTheLastEndpointEndsTheRound) {
  Harness h(2);
  h.fleet.Queue("https://b:22623", Answer(200, "challenge-b"));
  h.fleet.Queue("https://b:22623", Answer(500));
  ASSERT_TRUE(h.failover.Call("/v1/attest/challenge", nullptr, {}).ok());  // a refused, b answers
  auto ev = h.failover.CallOnce("/v1/attest/evidence", nullptr, {});
  ASSERT_FALSE(ev.ok());
  EXPECT_FALSE(h.failover.CanMoveOn());  // both failed: wait now
  EXPECT_EQ(ev.failure().kind, Failure::Kind::kRetry);
  // Nothing is asked until the wait is over.
  const size_t asked = h.fleet.requests.size();
  EXPECT_FALSE(h.failover.Call("/v1/attest/challenge", nullptr, {}).ok());
  EXPECT_EQ(h.fleet.requests.size(), asked);
  h.failover.NewRound();
  EXPECT_TRUE(h.failover.CanMoveOn());
}

TEST(Failover, AllFailedRoundWaitsTheSoonestRetryAfter) {
  Harness h(3);
  h.fleet.Queue("https://a:22623", Answer(503, ErrorBody("machine_not_enrolled"), "40"));
  h.fleet.Queue("https://b:22623", Answer(503, ErrorBody("busy"), "5"));
  // c: refused.
  auto r = h.failover.Call("/v1/attest/challenge", nullptr, {});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.failure().kind, Failure::Kind::kWait);
  EXPECT_EQ(r.failure().reason, "busy");
  EXPECT_EQ(r.failure().retry_after_seconds, 5);
  EXPECT_EQ(h.fleet.requests.size(), 3u);
  EXPECT_FALSE(h.failover.CanMoveOn());
  EXPECT_EQ(h.log.size(), 2u);  // a→b, b→c; the last failure ends the round, no move

  // Only unreachable appliances: an exponential backoff (kRetry), not a wait.
  h.failover.NewRound();
  auto u = h.failover.Call("/v1/attest/challenge", nullptr, {});
  ASSERT_FALSE(u.ok());
  EXPECT_EQ(u.failure().kind, Failure::Kind::kRetry);
  EXPECT_EQ(u.failure().reason, "appliance_unreachable");
  EXPECT_EQ(h.fleet.requests.size(), 6u);

  // A 503 without Retry-After counts as the default.
  h.failover.NewRound();
  h.fleet.Queue("https://c:22623", Answer(503, ErrorBody("x"), "45"));
  h.fleet.Queue("https://a:22623", Answer(503, ErrorBody("y")));
  h.fleet.Queue("https://b:22623", Answer(503, ErrorBody("z"), "31"));
  auto w = h.failover.Call("/v1/attest/challenge", nullptr, {});
  EXPECT_EQ(w.failure().reason, "y");
  EXPECT_FALSE(w.failure().retry_after_seconds.has_value());
}

TEST(Failover, TheReportTriesEveryEndpointWhateverTheRound) {
  Harness h(2);
  EXPECT_FALSE(h.failover.Call("/x", nullptr, {}).ok());  // both refused: round over
  h.fleet.Queue("https://a:22623", Answer(500));
  h.fleet.Queue("https://b:22623", Answer(204, ""));
  auto r = h.failover.CallAny("/v1/machine/report", nullptr, {});
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->status, 204);
}

TEST(Failover, UntrustedTextInTheMoveLineIsEscaped) {
  Harness h(2);
  h.fleet.Queue("https://a:22623", Answer(500, ErrorBody("x\x1b[31m")));
  h.fleet.Queue("https://b:22623", Answer(200));
  ASSERT_TRUE(h.failover.Call("/x", nullptr, {}).ok());
  ASSERT_EQ(h.log.size(), 1u);
  EXPECT_EQ(h.log[0].find('\x1b'), std::string::npos);
  EXPECT_EQ(h.log[0].find('\n'), std::string::npos);
}

}  // namespace
}  // namespace rackgate::agent
