// Tests of the carried session's file: encode/decode, life, malformed input,
// removal once read.
#include "agent/session.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

namespace rackgate::agent {
namespace {

CarriedSession Sample() {
  CarriedSession s;
  s.token = {"tok.EN-123_abc", 900, "node-1", "attested"};
  s.expires_at = 1'800'000'900;
  s.machine = "0123456789abcdef";
  s.ek = EkKind::kEccP256;
  s.config_fetched = true;
  s.nonce = Bytes(32, 0x5a);
  s.ak_alg = AkAlg::kRsa;
  s.ak = {Bytes{0x00, 0x03, 1, 2, 3}, Bytes{0x00, 0x02, 9, 8}};
  return s;
}

void ExpectSame(const CarriedSession& a, const CarriedSession& b) {
  EXPECT_EQ(a.token, b.token);
  EXPECT_EQ(a.expires_at, b.expires_at);
  EXPECT_EQ(a.machine, b.machine);
  EXPECT_EQ(a.ek, b.ek);
  EXPECT_EQ(a.config_fetched, b.config_fetched);
  EXPECT_EQ(a.nonce, b.nonce);
  EXPECT_EQ(a.ak_alg, b.ak_alg);
  EXPECT_EQ(a.ak.tpm2b_public, b.ak.tpm2b_public);
  EXPECT_EQ(a.ak.tpm2b_private, b.ak.tpm2b_private);
}

TEST(Session, RoundTrip) {
  auto d = DecodeSession(EncodeSession(Sample()));
  ASSERT_TRUE(d.ok()) << d.status().ToString();
  ExpectSame(*d, Sample());
  CarriedSession other = Sample();
  other.ek = EkKind::kRsa2048High;
  other.ak_alg = AkAlg::kEcc;
  other.config_fetched = false;
  auto d2 = DecodeSession(EncodeSession(other));
  ASSERT_TRUE(d2.ok()) << d2.status().ToString();
  ExpectSame(*d2, other);
}

TEST(Session, Truncation) {
  const std::string text = EncodeSession(Sample());
  for (size_t n = 0; n < text.size(); ++n) {
    auto d = DecodeSession(std::string_view(text).substr(0, n));
    ASSERT_FALSE(d.ok()) << n;
    EXPECT_EQ(d.status().reason(), "session_malformed") << n;
  }
}

TEST(Session, MalformedFieldsRefusedWithoutTheToken) {
  const nlohmann::json good = nlohmann::json::parse(EncodeSession(Sample()));
  struct Case {
    const char* key;
    nlohmann::json value;
  };
  const Case cases[] = {
      {"version", 2},
      {"version", "1"},
      {"token", "tok.EN-123_abc"},
      {"token", {{"token", "has space"}, {"expires_in", 900}}},
      {"expires_at", "soon"},
      {"machine", 5},
      {"machine", "0123 step=x"},
      {"machine", ""},
      {"ek", "rsa4096"},
      {"config_fetched", "yes"},
      {"nonce", "zz"},
      {"nonce", ""},
      {"ak_alg", "dsa"},
      {"ak_public", "not base64!"},
      {"ak_private", ""},
  };
  for (const auto& c : cases) {
    nlohmann::json doc = good;
    doc[c.key] = c.value;
    auto d = DecodeSession(doc.dump());
    ASSERT_FALSE(d.ok()) << c.key << "=" << c.value.dump();
    EXPECT_EQ(d.status().reason(), "session_malformed") << c.key;
    EXPECT_EQ(d.status().message().find("tok.EN-123_abc"), std::string::npos) << d.status().message();
    nlohmann::json without = good;
    without.erase(c.key);
    EXPECT_FALSE(DecodeSession(without.dump()).ok()) << "without " << c.key;
  }
  EXPECT_FALSE(DecodeSession("[]").ok());
  EXPECT_FALSE(DecodeSession("").ok());
}

TEST(Session, LifeAtLeastSixtySeconds) {
  const CarriedSession s = Sample();
  EXPECT_TRUE(CheckSessionLife(s, s.expires_at - 600).ok());
  EXPECT_TRUE(CheckSessionLife(s, s.expires_at - kMinSessionLifeSeconds).ok());
  const Status short_life = CheckSessionLife(s, s.expires_at - kMinSessionLifeSeconds + 1);
  EXPECT_EQ(short_life.reason(), "session_expiring");
  EXPECT_EQ(CheckSessionLife(s, s.expires_at + 5).reason(), "session_expiring");
}

class SessionFileTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() / ("session_test." + std::to_string(::getpid()));
    std::filesystem::create_directories(dir_);
    path_ = (dir_ / "initrd-session").string();
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::filesystem::path dir_;
  std::string path_;
};

TEST_F(SessionFileTest, WrittenMode0600AndRemovedOnceRead) {
  ASSERT_TRUE(WriteSession(path_, Sample()).ok());
  struct stat st;
  ASSERT_EQ(::stat(path_.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  auto s = TakeSession(path_, Sample().expires_at - 300);
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  ExpectSame(*s, Sample());
  EXPECT_FALSE(std::filesystem::exists(path_));
  // A second read finds none: the token served one run.
  EXPECT_EQ(TakeSession(path_, Sample().expires_at - 300).status().reason(), "session_missing");
}

TEST_F(SessionFileTest, ExpiringOrMalformedIsRemovedToo) {
  ASSERT_TRUE(WriteSession(path_, Sample()).ok());
  EXPECT_EQ(TakeSession(path_, Sample().expires_at - 10).status().reason(), "session_expiring");
  EXPECT_FALSE(std::filesystem::exists(path_));
  std::ofstream(path_) << "{\"version\":1";
  EXPECT_EQ(TakeSession(path_, 0).status().reason(), "session_malformed");
  EXPECT_FALSE(std::filesystem::exists(path_));
  std::ofstream(path_) << std::string(kMaxSessionBytes + 1, ' ');
  EXPECT_EQ(TakeSession(path_, 0).status().reason(), "file_too_large");
  EXPECT_FALSE(std::filesystem::exists(path_));
}

}  // namespace
}  // namespace rackgate::agent
