// Tests for webhook events' body, signature and retry schedule.
#include "core/events.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <nlohmann/json.hpp>
#include <string>

namespace rackgate::core {
namespace {

using nlohmann::json;

storage::Event Revoked() {
  storage::Event e;
  e.id = 42;
  e.at = 1700000000;
  e.type = "machine_revoked";
  e.machine_id = 7;
  e.hostname = "node-7";
  e.pool = "workers";
  e.actor = "uid:1000(alice)";
  e.why = "disk stolen";
  e.detail_json = R"({"serial":"0a"})";
  return e;
}

TEST(EventBodyTest, HasTheDocumentedShape) {
  json body = json::parse(EventBody(Revoked()));
  EXPECT_EQ(body.at("id"), 42);
  EXPECT_EQ(body.at("type"), "machine_revoked");
  EXPECT_EQ(body.at("at"), 1700000000);
  EXPECT_EQ(body.at("machine"), json({{"hostname", "node-7"}, {"pool", "workers"}}));
  EXPECT_EQ(body.at("detail"), json({{"serial", "0a"}, {"actor", "uid:1000(alice)"}, {"why", "disk stolen"}}));
  EXPECT_EQ(body.size(), 5u) << "nothing else goes on the wire";
}

TEST(EventBodyTest, BadStoredDetailBecomesEmptyObject) {
  storage::Event e = Revoked();
  e.actor.clear();
  e.why.clear();
  for (const char* bad : {"", "[1,2]", "{not json", "\"text\""}) {
    e.detail_json = bad;
    EXPECT_EQ(json::parse(EventBody(e)).at("detail"), json::object()) << bad;
  }
  e.hostname = std::string("node-\xff");  // never stored, but must not throw
  EXPECT_NO_THROW(EventBody(e));
}

TEST(EventTypesTest, KnowsTheElevenTypes) {
  for (auto t : kEventTypes) EXPECT_TRUE(IsEventType(t));
  EXPECT_EQ(std::size(kEventTypes), 11u);
  for (auto t : {"kubernetes_csr_approved", "kubernetes_csr_denied", "kubernetes_csr_waiting"}) {
    EXPECT_TRUE(IsEventType(t)) << t;
  }
  EXPECT_FALSE(IsEventType("revoke"));
  EXPECT_FALSE(IsEventType("kubelet_key_registered"));
  EXPECT_FALSE(IsEventType(""));
}

// RFC 4231, test cases 1 and 2.
TEST(HmacTest, Rfc4231Vectors) {
  EXPECT_EQ(HmacSha256Hex(std::string(20, '\x0b'), "Hi There"),
            "b0344c61d8db38535ca8afceaf0bf12b881dc200c9833da726e9376c2e32cff7");
  EXPECT_EQ(HmacSha256Hex("Jefe", "what do ya want for nothing?"),
            "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843");
}

// The documented recipe, run with OpenSSL's command line, agrees with ours.
TEST(HmacTest, SignatureMatchesOpensslCommandLine) {
  const std::string secret = "0123456789abcdef0123456789abcdef";
  const std::string body = EventBody(Revoked());
  const int64_t ts = 1700000123;
  const std::string dir = ::testing::TempDir();
  const std::string msg_path = dir + "/events_test_msg";
  FILE* f = std::fopen(msg_path.c_str(), "wb");
  ASSERT_NE(f, nullptr);
  const std::string message = std::to_string(ts) + "." + body;
  std::fwrite(message.data(), 1, message.size(), f);
  std::fclose(f);
  const std::string cmd = "openssl dgst -sha256 -hmac '" + secret + "' -r < '" + msg_path + "' 2>/dev/null";
  FILE* p = ::popen(cmd.c_str(), "r");
  ASSERT_NE(p, nullptr);
  char buf[256] = {};
  const size_t n = std::fread(buf, 1, sizeof(buf) - 1, p);
  const int rc = ::pclose(p);
  if (rc != 0 || n < 64) GTEST_SKIP() << "openssl command line not available";
  const std::string hex(buf, 64);
  EXPECT_EQ(SignatureHeader(secret, ts, body), "sha256=" + hex);
  EXPECT_TRUE(VerifySignature(secret, ts, body, "sha256=" + hex));
}

TEST(HmacTest, VerifyRefusesAnyChange) {
  const std::string secret(32, 's');
  const std::string body = EventBody(Revoked());
  const std::string sig = SignatureHeader(secret, 100, body);
  EXPECT_TRUE(VerifySignature(secret, 100, body, sig));
  EXPECT_FALSE(VerifySignature(secret, 101, body, sig)) << "the timestamp is signed";
  EXPECT_FALSE(VerifySignature(secret, 100, body + " ", sig));
  EXPECT_FALSE(VerifySignature(std::string(32, 't'), 100, body, sig));
  EXPECT_FALSE(VerifySignature(secret, 100, body, sig.substr(0, sig.size() - 1)));
  EXPECT_FALSE(VerifySignature(secret, 100, body, ""));
  std::string flipped = sig;
  flipped.back() = flipped.back() == '0' ? '1' : '0';
  EXPECT_FALSE(VerifySignature(secret, 100, body, flipped));
}

TEST(RetryTest, ExponentialCappedWithJitter) {
  EXPECT_EQ(RetryDelaySeconds(1, 0.0), 5);
  EXPECT_EQ(RetryDelaySeconds(2, 0.0), 10);
  EXPECT_EQ(RetryDelaySeconds(3, 0.0), 20);
  EXPECT_EQ(RetryDelaySeconds(10, 0.0), 2560);
  EXPECT_EQ(RetryDelaySeconds(11, 0.0), 3600) << "capped";
  EXPECT_EQ(RetryDelaySeconds(1000000, 0.0), 3600) << "no overflow";
  // Jitter takes off up to half.
  EXPECT_EQ(RetryDelaySeconds(3, 0.5), 15);
  for (double j : {0.0, 0.25, 0.5, 0.999}) {
    const int64_t d = RetryDelaySeconds(20, j);
    EXPECT_GE(d, 1800);
    EXPECT_LE(d, 3600);
  }
  EXPECT_EQ(RetryDelaySeconds(1, 0.0, 1, 1), 1);
  EXPECT_GE(RetryDelaySeconds(1, 0.999, 1, 1), 1) << "never zero";
}

}  // namespace
}  // namespace rackgate::core
