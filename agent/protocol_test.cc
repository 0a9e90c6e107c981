#include "agent/protocol.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>


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

  auto wait = Classify(Answer(503, R"({"error": {"reason": "machine_not_enrolled", "message": "wait"}})", "7"), 0);
  ASSERT_FALSE(wait.ok());
  EXPECT_EQ(wait.failure().kind, Failure::Kind::kWait);
  EXPECT_EQ(wait.failure().reason, "machine_not_enrolled");
  EXPECT_EQ(wait.failure().retry_after_seconds, 7);

  auto refused = Classify(Answer(403, R"({"error": {"reason": "machine_revoked", "message": "revoked"}})"), 0);
  EXPECT_EQ(refused.failure().kind, Failure::Kind::kRefused);
  EXPECT_EQ(refused.failure().ExitCode(), kExitRefused);
  EXPECT_EQ(refused.failure().reason, "machine_revoked");
  EXPECT_EQ(refused.failure().http_status, 403);

  EXPECT_EQ(Classify(Answer(500, "x"), 0).failure().kind, Failure::Kind::kRetry);
  // Too many CSRs in flight: wait, as for 503.
  EXPECT_EQ(Classify(Answer(429, R"({"error": {"reason": "csr_flood_machine", "message": "m"}})", "3"), 0)
                .failure()
                .kind,
            Failure::Kind::kWait);
  // A used session (its evidence answered once, the answer lost) is no
  // verdict on the machine: start again from the challenge.
  for (const char* r : {"session_used", "session_expired", "session_unknown"}) {
    auto again = Classify(Answer(403, std::string(R"({"error": {"reason": ")") + r + R"(", "message": "m"}})"), 0);
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
  auto f = Classify(Answer(403, R"({"error": {"reason": "x\u001b[31m", "message": "a\nb"}})"), 0).failure();
  EXPECT_EQ(f.reason.find('\x1b'), std::string::npos);
  EXPECT_EQ(f.message.find('\n'), std::string::npos);
}

TEST(Challenge, ParsesAndRefusesMalformed) {
  auto c = ParseChallenge(
      R"({"session": "s1", "nonce": "00ff", "pcr_selection": "sha256:0,1", "credential": "AAEC", "expires_in": 120})");
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->session, "s1");
  EXPECT_EQ(c->nonce, (Bytes{0x00, 0xff}));
  ASSERT_EQ(c->pcr_selection.size(), 1u);
  EXPECT_EQ(c->credential, (Bytes{0x00, 0x01, 0x02}));
  for (const char* bad : {"", "[]", R"({"session": "s1"})",
                          R"({"session": "s1", "nonce": "0g", "pcr_selection": "sha256:0", "credential": ""})",
                          R"({"session": "s1", "nonce": "00", "pcr_selection": "md5:0", "credential": ""})",
                          R"({"session": "s1", "nonce": "00", "pcr_selection": "sha256:0", "credential": "!"})"}) {
    auto p = ParseChallenge(bad);
    ASSERT_FALSE(p.ok()) << bad;
    EXPECT_EQ(p.failure().reason, "bad_response");
  }
}

TEST(Evidence, EncodesPerProtocol) {
  EvidenceRequest e;
  e.session = "s";
  e.secret = {0xab, 0xcd};
  e.quote = {1, 2, 3};
  e.signature = {4};
  e.pcrs[attest::kAlgSha256][7] = Bytes(32, 0x11);
  const auto j = nlohmann::json::parse(EncodeEvidenceRequest(e));
  EXPECT_EQ(j.at("secret"), "abcd");
  EXPECT_EQ(j.at("quote"), "AQID");
  EXPECT_EQ(j.at("signature"), "BA==");
  EXPECT_EQ(j.at("pcrs").at("sha256").at("7"), std::string(64, '1'));
  EXPECT_FALSE(j.contains("event_log"));
}

TEST(Token, RefusesWhatCannotBeAHeader) {
  EXPECT_TRUE(ParseToken(R"({"token": "abc-_", "expires_in": 900, "hostname": "n", "state": "attested"})").ok());
  EXPECT_FALSE(ParseToken(R"({"token": "a b"})").ok());
  EXPECT_FALSE(ParseToken(R"({"token": "a\r\nX-Evil: 1"})").ok());
  EXPECT_FALSE(ParseToken(R"({"expires_in": 900})").ok());
}

TEST(Machine, HostnameMustBeADnsName) {
  EXPECT_TRUE(ParseMachineRecord(R"({"hostname": "node-1.rack.example", "pool": "p", "state": "attested"})").ok());
  for (const char* bad : {R"({"hostname": "node 1"})", R"({"hostname": "-x"})", R"({"hostname": "a..b"})",
                          R"({"hostname": "x,O=system:masters"})", R"({"hostname": ""})", R"({})"}) {
    EXPECT_FALSE(ParseMachineRecord(bad).ok()) << bad;
  }
}

TEST(Csr, RequestAndAnswer) {
  CsrRequest r;
  r.signer = "kubernetes.io/kube-apiserver-client-kubelet";
  r.csr_pem = "PEM";
  r.usages = {"digital signature", "client auth"};
  auto j = nlohmann::json::parse(EncodeCsrRequest(r));
  EXPECT_FALSE(j.contains("tpm_key"));
  EXPECT_EQ(j.at("usages").size(), 2u);
  r.tpm_public = Bytes{1};
  r.certify_info = {2};
  r.certify_signature = {3};
  j = nlohmann::json::parse(EncodeCsrRequest(r));
  EXPECT_EQ(j.at("tpm_key").at("public"), "AQ==");
  EXPECT_EQ(j.at("tpm_key").at("certify_info"), "Ag==");
  EXPECT_EQ(j.at("tpm_key").at("certify_signature"), "Aw==");

  auto a = ParseIssuedCertificate(R"({"certificate": "C", "ca": "A", "serial": "0a", "not_after": 1700000000})");
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(a->not_after, 1700000000);
  EXPECT_FALSE(ParseIssuedCertificate(R"({"certificate": "C"})").ok());
}

}  // namespace
}  // namespace rackgate::agent
