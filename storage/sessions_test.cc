// Tests for attestation sessions (single use) and bearer tokens.
#include <gtest/gtest.h>

#include <optional>
#include <string>
#include <vector>

#include "storage/store.h"
#include "storage/testing/store_test_fixture.h"

namespace rackgate::storage {
namespace {

using testing::B;
using testing::ExpectFailure;
using testing::MakeEnrollment;
using testing::MustOpen;
using testing::Op;
using testing::StoreTest;
using testing::TempDir;

TEST_F(StoreTest, TokensKeepTheSessionNonceAndAk) {
  Machine m = Enroll("node-1", "a");
  Token t = MakeToken(m, "a");
  t.nonce = B("the-nonce");
  t.ak_public = B("the-ak");
  ASSERT_TRUE(store_->RecordAttestationSuccess(Record(m, 1000), t, std::nullopt).ok());
  auto bearer = store_->LookupToken(B("tokhash-a"), 1001);
  ASSERT_TRUE(bearer.ok());
  EXPECT_EQ(bearer->machine.hostname, "node-1");
  EXPECT_EQ(bearer->token.nonce, B("the-nonce"));
  EXPECT_EQ(bearer->token.ak_public, B("the-ak"));
  EXPECT_EQ(bearer->token.expires_at, 1900);
}

// One nonce, one use (docs/csr.md): the token's nonce certifies one CSR's key.
TEST_F(StoreTest, TheCertifyNonceIsConsumedOnce) {
  Machine m = Enroll("node-1", "a");
  Token t = MakeToken(m, "a");
  t.nonce = B("the-nonce");
  ASSERT_TRUE(store_->RecordAttestationSuccess(Record(m, 1000), t, std::nullopt).ok());
  EXPECT_FALSE(store_->LookupToken(B("tokhash-a"), 1001)->token.certify_nonce_used_at);
  const size_t audit = AuditCount();
  ASSERT_TRUE(store_->ConsumeCertifyNonce(B("tokhash-a"), 1010).ok());
  EXPECT_EQ(store_->LookupToken(B("tokhash-a"), 1011)->token.certify_nonce_used_at, 1010);
  ExpectFailure(store_->ConsumeCertifyNonce(B("tokhash-a"), 1020), Status::Code::kVerificationFailed,
                "certify_nonce_used");
  EXPECT_EQ(store_->LookupToken(B("tokhash-a"), 1021)->token.certify_nonce_used_at, 1010);
  ExpectFailure(store_->ConsumeCertifyNonce(B("tokhash-zz"), 1020), Status::Code::kNotFound, "token_unknown");
  ExpectFailure(store_->ConsumeCertifyNonce(Bytes{}, 1020), Status::Code::kNotFound, "token_unknown");
  EXPECT_EQ(AuditCount(), audit);
  // A fresh attestation brings a fresh nonce.
  ASSERT_TRUE(store_->RecordAttestationSuccess(Record(m, 1100), MakeToken(m, "b", 1100), std::nullopt).ok());
  EXPECT_TRUE(store_->ConsumeCertifyNonce(B("tokhash-b"), 1110).ok());
}

// --- Sessions and tokens -----------------------------------------------------

TEST_F(StoreTest, SessionsAreSingleUse) {
  Machine m = Enroll("node-1", "a");
  Session s = MakeSession(m, "sess-1", 1000, 120);
  ASSERT_TRUE(store_->CreateSession(s).ok());
  auto got = store_->ConsumeSession("sess-1", 1050);
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  EXPECT_EQ(got->machine_id, m.id);
  EXPECT_EQ(got->nonce, s.nonce);
  EXPECT_EQ(got->secret_hash, s.secret_hash);
  EXPECT_EQ(got->ak_public, s.ak_public);
  EXPECT_EQ(got->ak_name, s.ak_name);
  EXPECT_EQ(got->pcr_selection, s.pcr_selection);
  EXPECT_EQ(got->expires_at, 1120);
  EXPECT_EQ(got->used_at, 1050);
  ExpectFailure(store_->ConsumeSession("sess-1", 1060).status(), Status::Code::kVerificationFailed, "session_used");
  ExpectFailure(store_->ConsumeSession("nope", 1060).status(), Status::Code::kNotFound, "session_unknown");
  ExpectFailure(store_->ConsumeSession("", 1060).status(), Status::Code::kNotFound, "session_unknown");
  ExpectFailure(store_->ConsumeSession(std::string(500, 'x'), 1060).status(), Status::Code::kNotFound,
                "session_unknown");

  ASSERT_TRUE(store_->CreateSession(MakeSession(m, "sess-2", 1000, 120)).ok());
  // Expired at exactly expires_at, and stays so.
  ExpectFailure(store_->ConsumeSession("sess-2", 1120).status(), Status::Code::kVerificationFailed,
                "session_expired");
  ExpectFailure(store_->ConsumeSession("sess-2", 1500).status(), Status::Code::kVerificationFailed,
                "session_expired");
}

// Open = issued, unused and unexpired: what rackgate_sessions_in_flight shows.
TEST_F(StoreTest, CountOpenSessions) {
  Machine m = Enroll("node-1", "a");
  ASSERT_TRUE(store_->CreateSession(MakeSession(m, "s1", 1000, 120)).ok());
  ASSERT_TRUE(store_->CreateSession(MakeSession(m, "s2", 1000, 60)).ok());
  ASSERT_TRUE(store_->CreateSession(MakeSession(m, "s3", 1000, 120)).ok());
  EXPECT_EQ(*store_->CountOpenSessions(1010), 3);
  ASSERT_TRUE(store_->ConsumeSession("s1", 1020).ok());
  EXPECT_EQ(*store_->CountOpenSessions(1020), 2);
  EXPECT_EQ(*store_->CountOpenSessions(1060), 1);  // s2 expired unused
  EXPECT_EQ(*store_->CountOpenSessions(1120), 0);
}

TEST_F(StoreTest, SessionRefusals) {
  Machine m = Enroll("node-1", "a");
  ASSERT_TRUE(store_->CreateSession(MakeSession(m, "dup")).ok());
  ExpectFailure(store_->CreateSession(MakeSession(m, "dup")), Status::Code::kInvalidArgument, "field_invalid");
  Machine ghost;
  ghost.id = 4242;
  ExpectFailure(store_->CreateSession(MakeSession(ghost, "g")), Status::Code::kNotFound, "machine_unknown");
  Session s = MakeSession(m, "bad");
  s.nonce.clear();
  ExpectFailure(store_->CreateSession(s), Status::Code::kInvalidArgument, "field_invalid");
  ExpectFailure(store_->CreateSession(MakeSession(m, "has space")), Status::Code::kInvalidArgument, "field_invalid");
  ExpectFailure(store_->CreateSession(MakeSession(m, "neg", 1000, -1)), Status::Code::kInvalidArgument,
                "field_invalid");
}

TEST_F(StoreTest, TokenLookup) {
  Machine m = Attested("node-1", "a");  // token issued 1000, expires 1900
  auto found = store_->LookupToken(B("tokhash-a"), 1899);
  ASSERT_TRUE(found.ok());
  EXPECT_EQ(found->machine.hostname, "node-1");
  EXPECT_EQ(found->machine.state, MachineState::kAttested);
  ExpectFailure(store_->LookupToken(B("tokhash-a"), 1900).status(), Status::Code::kVerificationFailed,
                "token_expired");
  ExpectFailure(store_->LookupToken(B("tokhash-zz"), 1000).status(), Status::Code::kNotFound, "token_unknown");
  ExpectFailure(store_->LookupToken(Bytes(), 1000).status(), Status::Code::kNotFound, "token_unknown");
  ExpectFailure(store_->LookupToken(Bytes(100, 1), 1000).status(), Status::Code::kNotFound, "token_unknown");
}

TEST_F(StoreTest, PurgeExpiredIsBatched) {
  Machine m = Enroll("node-1", "a");
  for (int i = 0; i < 5; ++i) ASSERT_TRUE(store_->CreateSession(MakeSession(m, "old" + std::to_string(i), 0, 10)).ok());
  ASSERT_TRUE(store_->CreateSession(MakeSession(m, "fresh", 1000, 120)).ok());
  ASSERT_TRUE(store_->RecordAttestationSuccess(Record(m, 100), MakeToken(m, "old", 100, 10), std::nullopt).ok());
  ASSERT_TRUE(store_->RecordAttestationSuccess(Record(m, 1000), MakeToken(m, "new", 1000, 900), std::nullopt).ok());

  auto p = store_->PurgeExpired(1000, 3);
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(p->sessions, 3);
  EXPECT_EQ(p->tokens, 1);
  p = store_->PurgeExpired(1000, 3);
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(p->sessions, 2);
  EXPECT_EQ(p->tokens, 0);
  p = store_->PurgeExpired(1000, 3);
  EXPECT_EQ(p->sessions, 0);
  EXPECT_TRUE(store_->ConsumeSession("fresh", 1001).ok());
  EXPECT_TRUE(store_->LookupToken(B("tokhash-new"), 1001).ok());
  ExpectFailure(store_->LookupToken(B("tokhash-old"), 1001).status(), Status::Code::kNotFound, "token_unknown");
}

}  // namespace
}  // namespace rackgate::storage
