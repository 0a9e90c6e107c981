// Tests of how the agent classifies the appliance's answers.
#include "agent/exchange.h"

#include <gtest/gtest.h>

#include "wire/protocol.h"
#include "wire/refusal.h"

namespace rackgate::agent {
namespace {

HttpResponse Answer(long status, std::string body, std::optional<std::string> retry_after = std::nullopt) {
  HttpResponse r;
  r.status = status;
  r.body = std::move(body);
  r.retry_after = std::move(retry_after);
  return r;
}

TEST(Classify, MapsStatusesToTheNextMove) {
  auto ok = Classify(Answer(200, "{}"), 0);
  ASSERT_TRUE(ok.ok());

  auto wait = Classify(Answer(503, wire::EncodeRefusal({"machine_not_enrolled", "wait"}), "7"), 0);
  ASSERT_FALSE(wait.ok());
  EXPECT_EQ(wait.failure().kind, Failure::Kind::kWait);
  EXPECT_EQ(wait.failure().reason, "machine_not_enrolled");
  EXPECT_EQ(wait.failure().retry_after_seconds, 7);

  auto refused = Classify(Answer(403, wire::EncodeRefusal({"machine_revoked", "revoked"})), 0);
  EXPECT_EQ(refused.failure().kind, Failure::Kind::kRefused);
  EXPECT_EQ(refused.failure().ExitCode(), kExitRefused);
  EXPECT_EQ(refused.failure().reason, "machine_revoked");
  EXPECT_EQ(refused.failure().http_status, 403);

  EXPECT_EQ(Classify(Answer(500, "x"), 0).failure().kind, Failure::Kind::kRetry);
  // Too many CSRs in flight: wait, as for 503.
  EXPECT_EQ(Classify(Answer(429, wire::EncodeRefusal({"csr_flood_machine", "m"}), "3"), 0)
                .failure()
                .kind,
            Failure::Kind::kWait);
  // A used session (its evidence answered once, the answer lost) is no
  // verdict on the machine: start again from the challenge.
  for (const char* r : {"session_used", "session_expired", "session_unknown"}) {
    auto again = Classify(Answer(403, wire::EncodeRefusal({r, "m"})), 0);
    EXPECT_EQ(again.failure().kind, Failure::Kind::kRetry) << r;
  }
  EXPECT_EQ(Classify(Answer(401, ""), 0).failure().reason, "http_401");
  EXPECT_EQ(Classify(Answer(302, ""), 0).failure().reason, "bad_response");
  EXPECT_EQ(Classify(Status::IoError("appliance_unreachable", "refused"), 0).failure().kind,
            Failure::Kind::kRetry);
  EXPECT_EQ(Classify(Status::InvalidArgument("response_too_large", "big"), 0).failure().kind,
            Failure::Kind::kRefused);
}

TEST(Classify, ErrorTextIsMadePrintable) {
  auto f = Classify(Answer(403, wire::EncodeRefusal({"x\x1b[31m", "a\nb"})), 0).failure();
  EXPECT_EQ(f.reason.find('\x1b'), std::string::npos);
  EXPECT_EQ(f.message.find('\n'), std::string::npos);
  // Cut short, whatever the appliance sent.
  auto g = Classify(Answer(403, wire::EncodeRefusal({std::string(300, 'r'), std::string(5000, 'm')})), 0).failure();
  EXPECT_LE(g.reason.size(), 64u);
  EXPECT_LE(g.message.size(), 200u);
  // A body that is no refusal (a proxy's, or fields of another type) says
  // nothing: the status decides.
  EXPECT_EQ(Classify(Answer(502, R"({"error": {"reason": "busy", "message": 5}})"), 0).failure().reason, "http_502");
}

// Issue 44: a TLS verification failure keeps its reason and the whole way
// back (the appliance CA rotated while the machine missed the overlap), and
// is retried like an unreachable appliance.
TEST(Classify, AnUntrustedApplianceKeepsItsReasonAndRecovery) {
  const std::string why = "the appliance's TLS certificate does not verify against /etc/rackgate/ca.pem " +
                          std::string(200, '.') + " put the bundle that `rackgatectl ca bundle --appliance` prints";
  auto f = Classify(Result<HttpResponse>(Status::IoError("appliance_untrusted", why)), 0).failure();
  EXPECT_EQ(f.reason, "appliance_untrusted");
  EXPECT_EQ(f.kind, Failure::Kind::kRetry);
  EXPECT_NE(f.message.find("ca bundle --appliance"), std::string::npos);
  EXPECT_EQ(Classify(Result<HttpResponse>(Status::IoError("appliance_unreachable", "x")), 0).failure().reason,
            "appliance_unreachable");
}

TEST(UsableAnswer, AnUnusableAnswerIsRefusedAsBadResponse) {
  auto bad = UsableAnswer(wire::DecodeChallenge(R"({"session": "s1"})"));
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.failure().kind, Failure::Kind::kRefused);
  EXPECT_EQ(bad.failure().reason, "bad_response");
  EXPECT_EQ(bad.failure().ExitCode(), kExitRefused);
  auto good = UsableAnswer(wire::DecodeToken(R"({"token": "abc"})"));
  ASSERT_TRUE(good.ok());
  EXPECT_EQ(good->token, "abc");
}

}  // namespace
}  // namespace rackgate::agent
