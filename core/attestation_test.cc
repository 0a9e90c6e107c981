// The refusal matrix of challenge and evidence (docs/protocol.md) as tests of
// the core: soft-TPM machines, every store (the fake, SQLite, PostgreSQL),
// every reason the attestation service returns, and the verdict as a value.
#include "core/attestation.h"

#include <gtest/gtest.h>

#include "core/appliance_ca.h"

#include "attest/quote.h"
#include "core/pool_settings.h"
#include "core/testing/core_fixture.h"
#include "base/hex.h"
#include "wire/reasons.h"

namespace rackgate::core::testing {
namespace {

using rackgate::testing::SoftKey;
using rackgate::testing::SoftKeySpec;

std::string Hex32(uint8_t b) { return hex::Encode(Bytes(32, b)); }

// Each test runs on the fake store and on the environment's real backend.
class ChallengeTest : public EveryStoreTest {};
class EvidenceTest : public EveryStoreTest {};
class TokenTest : public EveryStoreTest {};
RACKGATE_ON_EVERY_STORE(ChallengeTest);
RACKGATE_ON_EVERY_STORE(EvidenceTest);
RACKGATE_ON_EVERY_STORE(TokenTest);

// --- challenge ---

// Issue 44: a successful evidence answer carries the appliance CA bundle
// when the service has one; none otherwise (as before 0.2.0).
TEST_P(EvidenceTest, TheAnswerCarriesTheCaBundle) {
  SoftMachine m, n;
  Enroll(m, "node-1");
  Enroll(n, "node-2");
  EXPECT_EQ(Attest(m).ca_bundle, "");
  ApplianceCaBundle bundle(store_.get(), "THE-CA\n", "", std::chrono::hours(1));
  attestation_->SetCaBundle(&bundle);
  EXPECT_EQ(Attest(n).ca_bundle, "THE-CA\n");
  attestation_->SetCaBundle(nullptr);
}

TEST_P(ChallengeTest, EnrolledMachineGetsSessionNonceAndCredential) {
  SoftMachine m;
  Enroll(m, "node-1");
  auto c = attestation_->Challenge(m.ChallengeRequest(), caller_);
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_FALSE(c->session.empty());
  EXPECT_EQ(c->nonce.size(), 32u);
  EXPECT_EQ(attest::FormatPcrSelectionList(c->pcr_selection), "sha256:0,1,2,3,4,5,6,7");
  EXPECT_EQ(c->expires_in, options_.session_ttl_seconds);
  // The credential is bound to this EK and AK: the soft TPM recovers it.
  auto cred = attest::DecodeCredentialFile(c->credential);
  ASSERT_TRUE(cred.ok());
  EXPECT_TRUE(m.ek.ActivateCredential(*cred, m.ak.name()).has_value());
}

TEST_P(ChallengeTest, QueuedTooLongIsBusy) {
  options_.busy_queue_delay_ms = 50;
  Restart();
  // Before the body is read: a late request is busy whatever it sent.
  const auto not_json = [] { return wire::ParseChallengeRequest("not json"); };
  EXPECT_EQ(attestation_->Challenge(not_json, Caller{"192.0.2.7:1", std::chrono::milliseconds(80)}).status().reason(),
            "busy");
  EXPECT_EQ(attestation_->Challenge(not_json, Caller{"192.0.2.7:1", std::chrono::milliseconds(10)}).status().reason(),
            "bad_json");
}

// fleet: a store failure is "busy", except a lost database, which keeps its
// reason (db_unavailable) and never the server's words.
TEST(StoreBusy, ALostDatabaseIsToldApartFromLoad) {
  const Status lost = StoreBusy(Status::IoError("db_unavailable", "connect to 10.0.0.5:5432: refused"));
  EXPECT_EQ(lost.reason(), "db_unavailable");
  EXPECT_EQ(lost.code(), Status::Code::kIoError);
  EXPECT_EQ(lost.message().find("10.0.0.5"), std::string::npos);
  EXPECT_EQ(StoreBusy(Status::IoError("db_error", "disk I/O error")).reason(), "busy");
  EXPECT_EQ(StoreBusy(Status::IoError("db_busy", "database is locked")).reason(), "busy");
}

TEST_P(ChallengeTest, AdmissionBoundsAreBusyAndBusyClient) {
  options_.max_open_sessions = 2;
  options_.max_open_sessions_per_client = 1;
  Restart();
  SoftMachine a, b, c;
  Enroll(a, "node-a");
  Enroll(b, "node-b");
  Enroll(c, "node-c");
  ASSERT_TRUE(attestation_->Challenge(a.ChallengeRequest(), Caller{"192.0.2.1:1", {}}).ok());
  EXPECT_EQ(ReasonOf(attestation_->Challenge(b.ChallengeRequest(), Caller{"192.0.2.1:2", {}})), "busy_client");
  ASSERT_TRUE(attestation_->Challenge(b.ChallengeRequest(), Caller{"192.0.2.2:1", {}}).ok());
  EXPECT_EQ(ReasonOf(attestation_->Challenge(c.ChallengeRequest(), Caller{"192.0.2.3:1", {}})), "busy");
}

TEST_P(ChallengeTest, UnparsableKeysAreFieldInvalid) {
  SoftMachine m;
  Enroll(m, "node-1");
  auto req = m.ChallengeRequest();
  req.ek_public = Bytes{0x00, 0x01, 0x02};
  auto r = attestation_->Challenge(req, caller_);
  EXPECT_EQ(ReasonOf(r), "field_invalid");
  EXPECT_EQ(r.status().code(), Status::Code::kInvalidArgument);
  req = m.ChallengeRequest();
  req.ak_public = Bytes{0x00, 0x05, 1, 2, 3, 4, 5};
  EXPECT_EQ(ReasonOf(attestation_->Challenge(req, caller_)), "field_invalid");
}

TEST_P(ChallengeTest, UnknownMachineIsNotEnrolled) {
  SoftMachine m;
  EXPECT_EQ(ReasonOf(attestation_->Challenge(m.ChallengeRequest(), caller_)), "machine_not_enrolled");
}

// Observability: the unknown EK is remembered (hash, address without port,
// count), an enrolled one is not.
TEST_P(ChallengeTest, UnknownEkIsRememberedForStatus) {
  SoftMachine m;
  EXPECT_EQ(ReasonOf(attestation_->Challenge(m.ChallengeRequest(), caller_)), "machine_not_enrolled");
  EXPECT_EQ(ReasonOf(attestation_->Challenge(m.ChallengeRequest(), caller_)), "machine_not_enrolled");
  auto seen = attestation_->unknown_eks().SeenSince(0);
  ASSERT_EQ(seen.size(), 1u);
  EXPECT_EQ(seen[0].ek_hash, hex::Encode(m.EkHash()));
  EXPECT_EQ(seen[0].address, "192.0.2.7");
  EXPECT_EQ(seen[0].count, 2u);
  EXPECT_EQ(seen[0].reason, "machine_not_enrolled");
  SoftMachine known;
  Enroll(known, "node-1");
  ASSERT_TRUE(attestation_->Challenge(known.ChallengeRequest(), caller_).ok());
  EXPECT_EQ(attestation_->unknown_eks().size(), 1u);
}

TEST_P(ChallengeTest, PendingMachineWaits) {
  SoftMachine m;
  storage::Enrollment e;
  e.hostname = "pending-1";
  e.pool = "workers";
  e.ek_public = m.ek.tpm2b_public();
  e.ek_hash = m.EkHash();
  e.state = storage::MachineState::kPending;
  ASSERT_TRUE(store_->Enroll(e, storage::Actor{"test", ""}, false, now_).ok());
  EXPECT_EQ(ReasonOf(attestation_->Challenge(m.ChallengeRequest(), caller_)), "machine_pending");
}

TEST_P(ChallengeTest, RevokedMachineIsRefused) {
  SoftMachine m;
  Enroll(m, "node-1");
  ASSERT_TRUE(store_->Revoke("node-1", storage::Actor{"test", ""}, now_).ok());
  EXPECT_EQ(ReasonOf(attestation_->Challenge(m.ChallengeRequest(), caller_)), "machine_revoked");
}

TEST_P(ChallengeTest, MissingEkCertificateIsRefusedWhenRequired) {
  options_.require_ek_certificate = true;
  Restart();
  SoftMachine m;
  Enroll(m, "node-1");
  EXPECT_EQ(ReasonOf(attestation_->Challenge(m.ChallengeRequest(), caller_)), "ek_cert_missing");
}

TEST_P(ChallengeTest, UnusableEkCertificateIsRefused) {
  SoftMachine m;
  Enroll(m, "node-1");
  auto req = m.ChallengeRequest();
  req.ek_certificate = Bytes{0x30, 0x03, 0x02, 0x01, 0x01};
  auto r = attestation_->Challenge(req, caller_);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().reason().rfind("ek_cert_", 0), 0u) << r.status().reason();
  // A refusal, whatever code the certificate parser used: its row in the
  // reason registry answers the machine 403 (issue 43).
  const wire::ReasonInfo* row = wire::FindReason(r.status().reason());
  ASSERT_NE(row, nullptr) << r.status().reason();
  EXPECT_EQ(row->machine_status, 403);
}

TEST_P(ChallengeTest, AkWithoutTheRequiredAttributesIsRefused) {
  SoftMachine m;
  Enroll(m, "node-1");
  SoftKeySpec spec = SoftKey::AkSpec(attest::kAlgRsa);
  spec.attributes &= ~attest::kAttrRestricted;
  SoftKey weak = rackgate::testing::TestKeyPool().Next(spec);
  auto req = m.ChallengeRequest();
  req.ak_public = weak.tpm2b_public();
  auto r = attestation_->Challenge(req, caller_);
  EXPECT_EQ(ReasonOf(r), "ak_not_restricted_signing");
  EXPECT_EQ(r.status().code(), Status::Code::kVerificationFailed);
}

TEST_P(ChallengeTest, UnusablePolicyWaits) {
  SoftMachine m;
  Enroll(m, "node-1");
  storage::Pool pool{"workers"};
  pool.token_required = false;
  pool.boot_policy_json = "{\"version\": 1, \"no_such_rule\": true}";
  ASSERT_TRUE(store_->PutPool(pool, storage::Actor{"test", ""}, now_).ok());
  EXPECT_EQ(ReasonOf(attestation_->Challenge(m.ChallengeRequest(), caller_)), "policy_invalid");
}

TEST_P(ChallengeTest, PolicyPcrsJoinTheSelection) {
  SoftMachine m;
  Enroll(m, "node-1");
  storage::Pool pool{"workers"};
  pool.token_required = false;
  pool.boot_policy_json = "{\"version\": 1, \"tofu\": {\"sha256\": [9]}}";
  ASSERT_TRUE(store_->PutPool(pool, storage::Actor{"test", ""}, now_).ok());
  auto c = attestation_->Challenge(m.ChallengeRequest(), caller_);
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(attest::FormatPcrSelectionList(c->pcr_selection), "sha256:0,1,2,3,4,5,6,7,9");
}

// Issue 14: a command-line rule reads PCR 8/9 (grub), 12 (systemd-boot,
// systemd-stub) and 11 (a UKI's .cmdline section); a UKI rule reads 11. The
// challenge asks for all of them, so the quote covers what the log claims.
TEST_P(ChallengeTest, CommandLineAndUkiRulesAskForTheModernBootsPcrs) {
  SoftMachine m;
  Enroll(m, "node-1");
  storage::Pool pool{"workers"};
  pool.token_required = false;
  pool.boot_policy_json = "{\"version\": 1, \"kernel_cmdline\": {\"required\": [\"ro\"]}}";
  ASSERT_TRUE(store_->PutPool(pool, storage::Actor{"test", ""}, now_).ok());
  auto c = attestation_->Challenge(m.ChallengeRequest(), caller_);
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(attest::FormatPcrSelectionList(c->pcr_selection), "sha256:0,1,2,3,4,5,6,7,8,9,11,12");
}

// --- evidence ---

TEST_P(EvidenceTest, HonestEvidenceAttestsAndIssuesAToken) {
  SoftMachine m;
  Enroll(m, "node-1");
  EvidenceResult r = Attest(m);
  EXPECT_EQ(r.token.size(), 43u);
  EXPECT_EQ(r.hostname, "node-1");
  EXPECT_EQ(r.state, "attested");
  EXPECT_TRUE(r.verdict.attested());
  EXPECT_TRUE(r.verdict.quote_verified);
  EXPECT_EQ(r.verdict.counters.reset_count, m.clock.reset_count);
  EXPECT_EQ(r.verdict.counters.clock, m.clock.clock);
  EXPECT_EQ(r.verdict.pcrs.at(attest::kAlgSha256).size(), 8u);
  auto last = store_->LastSuccessfulAttestation(r.verdict.machine_id);
  ASSERT_TRUE(last.ok());
  EXPECT_EQ(last->verdict, "ok");
}

TEST_P(EvidenceTest, UnknownSessionIsRefused) {
  SoftMachine m;
  Enroll(m, "node-1");
  auto c = attestation_->Challenge(m.ChallengeRequest(), caller_);
  ASSERT_TRUE(c.ok());
  auto e = m.Answer(*c);
  e.session = "no-such-session";
  auto r = attestation_->Evidence(e, caller_);
  EXPECT_EQ(ReasonOf(r), "session_unknown");
  // The store's NotFound, passed on; its row answers the machine 403.
  EXPECT_EQ(r.status().code(), Status::Code::kNotFound);
  EXPECT_EQ(wire::FindReason("session_unknown")->machine_status, 403);
}

TEST_P(EvidenceTest, ASessionAnswersOnce) {
  SoftMachine m;
  Enroll(m, "node-1");
  auto c = attestation_->Challenge(m.ChallengeRequest(), caller_);
  ASSERT_TRUE(c.ok());
  const auto e = m.Answer(*c);
  ASSERT_TRUE(attestation_->Evidence(e, caller_).ok());
  EXPECT_EQ(ReasonOf(attestation_->Evidence(e, caller_)), "session_used");
}

TEST_P(EvidenceTest, ExpiredSessionIsRefused) {
  SoftMachine m;
  Enroll(m, "node-1");
  auto c = attestation_->Challenge(m.ChallengeRequest(), caller_);
  ASSERT_TRUE(c.ok());
  now_ += options_.session_ttl_seconds + 1;
  EXPECT_EQ(ReasonOf(attestation_->Evidence(m.Answer(*c), caller_)), "session_expired");
}

TEST_P(EvidenceTest, RevokedBetweenChallengeAndEvidenceIsRefusedAndRecorded) {
  SoftMachine m;
  const storage::Machine enrolled = Enroll(m, "node-1");
  auto c = attestation_->Challenge(m.ChallengeRequest(), caller_);
  ASSERT_TRUE(c.ok());
  ASSERT_TRUE(store_->Revoke("node-1", storage::Actor{"test", ""}, now_).ok());
  EXPECT_EQ(ReasonOf(attestation_->Evidence(m.Answer(*c), caller_)), "machine_revoked");
  auto failures = store_->RecentFailures(10);
  ASSERT_TRUE(failures.ok());
  ASSERT_EQ(failures->size(), 1u);
  EXPECT_EQ(failures->front().reason, "machine_revoked");
  EXPECT_EQ(failures->front().machine_id, enrolled.id);
}

TEST_P(EvidenceTest, WrongSecretIsActivationFailed) {
  SoftMachine m;
  Enroll(m, "node-1");
  auto c = attestation_->Challenge(m.ChallengeRequest(), caller_);
  ASSERT_TRUE(c.ok());
  auto e = m.Answer(*c);
  e.secret[0] ^= 1;
  EXPECT_EQ(ReasonOf(attestation_->Evidence(e, caller_)), "activation_failed");
}

TEST_P(EvidenceTest, QuoteRefusals) {
  SoftMachine m;
  Enroll(m, "node-1");
  struct Case {
    const char* reason;
    std::function<void(const ChallengeResult&, wire::EvidenceRequest*)> mutate;
  };
  const std::vector<Case> cases = {
      {"quote_nonce_mismatch",
       [&](const ChallengeResult& c, wire::EvidenceRequest* e) {
         ChallengeResult other = c;
         other.nonce[0] ^= 1;
         e->quote = m.QuoteMessage(other);
         e->signature = m.ak.Sign(e->quote);
       }},
      {"signature_invalid",
       [&](const ChallengeResult&, wire::EvidenceRequest* e) {
         e->signature = rackgate::testing::TestKeyPool().Next(SoftKey::AkSpec(attest::kAlgRsa)).Sign(e->quote);
       }},
      {"quote_pcr_digest_mismatch",
       [&](const ChallengeResult&, wire::EvidenceRequest* e) { e->pcrs[attest::kAlgSha256][3][0] ^= 1; }},
      {"pcr_values_incomplete",
       [&](const ChallengeResult&, wire::EvidenceRequest* e) { e->pcrs[attest::kAlgSha256].erase(3); }},
  };
  for (const auto& c : cases) {
    auto challenge = attestation_->Challenge(m.ChallengeRequest(), caller_);
    ASSERT_TRUE(challenge.ok());
    auto e = m.Answer(*challenge);
    c.mutate(*challenge, &e);
    auto r = attestation_->Evidence(e, caller_);
    EXPECT_EQ(ReasonOf(r), c.reason);
    // Incomplete PCR values are a malformed request; the rest are refusals.
    const bool malformed = std::string(c.reason) == "pcr_values_incomplete";
    EXPECT_EQ(r.status().code(),
              malformed ? Status::Code::kInvalidArgument : Status::Code::kVerificationFailed)
        << c.reason;
  }
}

// The TPM's counters only go forward, compared with the last good
// attestation: reset count, then restart count, then clock.
TEST_P(EvidenceTest, CountersThatGoBackwardsAreRefused) {
  SoftMachine m;
  Enroll(m, "node-1");
  m.clock = attest::ClockInfo{9000, 5, 5, true};
  Attest(m);
  struct Case {
    attest::ClockInfo clock;
    const char* reason;
  };
  for (const Case& c : {Case{{99999, 4, 9, true}, "reset_count_regressed"},
                        Case{{99999, 5, 4, true}, "restart_count_regressed"},
                        Case{{8999, 5, 5, true}, "clock_regressed"}}) {
    m.clock = c.clock;
    auto challenge = attestation_->Challenge(m.ChallengeRequest(), caller_);
    ASSERT_TRUE(challenge.ok());
    auto r = attestation_->Evidence(m.Answer(*challenge), caller_);
    EXPECT_EQ(ReasonOf(r), c.reason);
    EXPECT_EQ(r.status().code(), Status::Code::kVerificationFailed);
  }
  // Forward again (a reboot: a new reset count) passes.
  m.clock = attest::ClockInfo{100, 6, 0, true};
  Attest(m);
}

TEST_P(EvidenceTest, EventLogRefusals) {
  SoftMachine m;
  Enroll(m, "node-1");
  for (const auto& [log, reason] : std::vector<std::pair<Bytes, std::string>>{
           {Bytes{}, "eventlog_empty"}, {Bytes{0x00, 0x00, 0x00}, "eventlog_truncated"}}) {
    auto challenge = attestation_->Challenge(m.ChallengeRequest(), caller_);
    ASSERT_TRUE(challenge.ok());
    auto e = m.Answer(*challenge);
    e.event_log = log;
    auto r = attestation_->Evidence(e, caller_);
    EXPECT_EQ(ReasonOf(r), reason);
    // A malformed log is as final as a forged quote: a refusal, 403 by its
    // row in the reason registry whatever the parser's code.
    ASSERT_NE(wire::FindReason(reason), nullptr) << reason;
    EXPECT_EQ(wire::FindReason(reason)->machine_status, 403) << reason;
  }
}

TEST_P(EvidenceTest, BootPolicyViolationListsEveryRule) {
  SoftMachine m;
  Enroll(m, "node-1");
  storage::Pool pool{"workers"};
  pool.token_required = false;
  pool.boot_policy_json = "{\"version\": 1, \"pcrs\": {\"sha256\": {\"0\": \"" + Hex32(0xaa) + "\", \"1\": \"" +
                          Hex32(0xbb) + "\"}}}";
  ASSERT_TRUE(store_->PutPool(pool, storage::Actor{"test", ""}, now_).ok());
  auto challenge = attestation_->Challenge(m.ChallengeRequest(), caller_);
  ASSERT_TRUE(challenge.ok());
  auto r = attestation_->Evidence(m.Answer(*challenge), caller_);
  EXPECT_EQ(ReasonOf(r), "boot_policy_violation");
  auto failures = store_->RecentFailures(10);
  ASSERT_TRUE(failures.ok());
  ASSERT_EQ(failures->size(), 1u);
  EXPECT_EQ(failures->front().reason, "boot_policy_violation");
  EXPECT_GE(failures->front().reasons.size(), 2u);
}

TEST_P(EvidenceTest, PolicyMadeUnusableAfterTheChallengeWaitsAndIsNotHeldAgainstTheMachine) {
  SoftMachine m;
  Enroll(m, "node-1");
  auto challenge = attestation_->Challenge(m.ChallengeRequest(), caller_);
  ASSERT_TRUE(challenge.ok());
  storage::Pool pool{"workers"};
  pool.token_required = false;
  pool.boot_policy_json = "[not a policy";
  ASSERT_TRUE(store_->PutPool(pool, storage::Actor{"test", ""}, now_).ok());
  EXPECT_EQ(ReasonOf(attestation_->Evidence(m.Answer(*challenge), caller_)), "policy_invalid");
  auto failures = store_->RecentFailures(10);
  ASSERT_TRUE(failures.ok());
  EXPECT_TRUE(failures->empty());
}

// A policy judges the event log: without one, eventlog_missing, and a failed
// attestation pins no TOFU value.
TEST_P(EvidenceTest, TofuPolicyWithoutAnEventLogPinsNothing) {
  SoftMachine m;
  const storage::Machine enrolled = Enroll(m, "node-1");
  storage::Pool pool{"workers"};
  pool.token_required = false;
  pool.boot_policy_json = "{\"version\": 1, \"tofu\": {\"sha256\": [9]}}";
  ASSERT_TRUE(store_->PutPool(pool, storage::Actor{"test", ""}, now_).ok());
  auto challenge = attestation_->Challenge(m.ChallengeRequest(), caller_);
  ASSERT_TRUE(challenge.ok());
  EXPECT_EQ(ReasonOf(attestation_->Evidence(m.Answer(*challenge), caller_)), "boot_policy_violation");
  auto failures = store_->RecentFailures(10);
  ASSERT_TRUE(failures.ok());
  ASSERT_EQ(failures->size(), 1u);
  EXPECT_EQ(failures->front().reasons, std::vector<std::string>{"eventlog:eventlog_missing"});
  auto machine = store_->GetMachineById(enrolled.id);
  ASSERT_TRUE(machine.ok());
  EXPECT_FALSE(machine->tofu_pcrs_json.has_value() && !machine->tofu_pcrs_json->empty());
}

// Verify is the verdict as a value: no store, no clock.
TEST_P(EvidenceTest, VerifyIsAPureVerdict) {
  SoftMachine m;
  const storage::Machine machine = Enroll(m, "node-1");
  auto challenge = attestation_->Challenge(m.ChallengeRequest(), caller_);
  ASSERT_TRUE(challenge.ok());
  auto session = store_->ConsumeSession(challenge->session, now_);
  ASSERT_TRUE(session.ok());
  const auto evidence = m.Answer(*challenge);
  EvidenceContext context;
  context.session = &*session;
  context.machine = &machine;
  Verdict ok = AttestationService::Verify(evidence, context);
  EXPECT_TRUE(ok.attested());
  EXPECT_EQ(ok.hostname, "node-1");
  EXPECT_EQ(ok.counters.restart_count, m.clock.restart_count);

  storage::AttestationRecord last;
  last.reset_count = m.clock.reset_count + 1;
  context.last = &last;
  Verdict regressed = AttestationService::Verify(evidence, context);
  EXPECT_FALSE(regressed.attested());
  EXPECT_EQ(regressed.refusal.reason(), "reset_count_regressed");
  EXPECT_TRUE(regressed.quote_verified);

  context.last = nullptr;
  context.policy_unusable = true;
  EXPECT_EQ(AttestationService::Verify(evidence, context).refusal.reason(), "policy_invalid");
}

// The AK's key the challenge built (kept by SessionGate) is used only for the
// session whose AK bytes it was built from; any other is built again.
TEST_P(EvidenceTest, VerifyUsesTheChallengesAkKeyOnlyForTheSameAkBytes) {
  SoftMachine m;
  const storage::Machine machine = Enroll(m, "node-1");
  auto challenge = attestation_->Challenge(m.ChallengeRequest(), caller_);
  ASSERT_TRUE(challenge.ok());
  auto session = store_->ConsumeSession(challenge->session, now_);
  ASSERT_TRUE(session.ok());
  const auto evidence = m.Answer(*challenge);
  EvidenceContext context;
  context.session = &*session;
  context.machine = &machine;
  SoftMachine other;
  auto other_key = attest::VerifyKey::FromTpmPublic(other.ak.pub());
  ASSERT_TRUE(other_key.ok());
  // Another AK's key under this session's bytes (never made so): it is the
  // key that verifies, and the quote does not verify with it.
  SessionAk mislabelled{session->ak_public, std::move(*other_key)};
  context.challenged_ak = &mislabelled;
  Verdict wrong = AttestationService::Verify(evidence, context);
  EXPECT_FALSE(wrong.attested());
  EXPECT_FALSE(wrong.quote_verified);
  // A kept key for other bytes is not used: the session's stored AK is.
  SessionAk stale{other.ak.tpm2b_public(), std::move(mislabelled.key)};
  context.challenged_ak = &stale;
  EXPECT_TRUE(AttestationService::Verify(evidence, context).attested());
  // Through the service: the challenge's key verifies the evidence.
  SoftMachine n;
  Enroll(n, "node-2");
  auto second = attestation_->Challenge(n.ChallengeRequest(), caller_);
  ASSERT_TRUE(second.ok());
  EXPECT_TRUE(attestation_->Evidence(n.Answer(*second), caller_).ok());
}

// --- tokens ---

TEST_P(TokenTest, TokenRefusals) {
  SoftMachine m;
  Enroll(m, "node-1");
  EvidenceResult r = Attest(m);
  ASSERT_TRUE(attestation_->Authenticate(r.token).ok());
  EXPECT_EQ(ReasonOf(attestation_->Authenticate(std::nullopt)), "token_missing");
  EXPECT_EQ(ReasonOf(attestation_->Authenticate(std::string("not-a-token"))), "token_unknown");
  EXPECT_EQ(ReasonOf(attestation_->Authenticate(std::string(200, 'a'))), "token_unknown");
  now_ += options_.token_ttl_seconds + 1;
  EXPECT_EQ(ReasonOf(attestation_->Authenticate(r.token)), "token_expired");
}

TEST_P(TokenTest, RevokedMachinesTokenIsRevoked) {
  SoftMachine m;
  Enroll(m, "node-1");
  EvidenceResult r = Attest(m);
  ASSERT_TRUE(store_->Revoke("node-1", storage::Actor{"test", ""}, now_).ok());
  EXPECT_EQ(ReasonOf(attestation_->Authenticate(r.token)), "token_revoked");
}

TEST_P(TokenTest, WhoAmIShowsTheMachineAndItsPoolsDemand) {
  SoftMachine m;
  Enroll(m, "node-1");
  storage::Pool pool{"workers"};
  pool.token_required = false;
  pool.settings_json = "{\"require_tpm_key\": true}";
  ASSERT_TRUE(store_->PutPool(pool, storage::Actor{"test", ""}, now_).ok());
  EvidenceResult r = Attest(m);
  auto view = attestation_->WhoAmI(r.token);
  ASSERT_TRUE(view.ok()) << view.status().ToString();
  EXPECT_EQ(view->hostname, "node-1");
  EXPECT_EQ(view->pool, "workers");
  EXPECT_EQ(view->state, "attested");
  EXPECT_TRUE(view->require_tpm_key);
  // No `apiserver` setting: none is sent, and the agent needs its flag.
  EXPECT_EQ(view->apiserver, "");
  EXPECT_EQ(ReasonOf(attestation_->WhoAmI(std::nullopt)), "token_missing");
}

// Issue 42: an initramfs unit has no --apiserver or --node-ip to pass; the
// appliance sends the pool's API server and the machine's enrolled IP
// addresses (the fixture enrolls InternalIP 10.0.0.5 and InternalDNS
// node-1.example: only the IP is a node address).
TEST_P(TokenTest, WhoAmISendsThePoolsApiserverAndTheEnrolledAddresses) {
  SoftMachine m;
  Enroll(m, "node-1");
  storage::Pool pool{"workers"};
  pool.token_required = false;
  pool.settings_json = R"({"apiserver": "https://api.cluster.example:6443"})";
  ASSERT_TRUE(store_->PutPool(pool, storage::Actor{"test", ""}, now_).ok());
  EvidenceResult r = Attest(m);
  auto view = attestation_->WhoAmI(r.token);
  ASSERT_TRUE(view.ok()) << view.status().ToString();
  EXPECT_EQ(view->apiserver, "https://api.cluster.example:6443");
  EXPECT_EQ(view->addresses, (std::vector<std::string>{"10.0.0.5"}));
}

TEST(PoolSettingsApiserver, CheckedAsTheAgentChecksApiserver) {
  auto s = ParsePoolSettings(R"({"apiserver": "https://10.0.0.1:6443"})");
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  EXPECT_EQ(s->apiserver, "https://10.0.0.1:6443");
  EXPECT_EQ(ParsePoolSettings("{}")->apiserver, "");
  for (const char* bad : {R"({"apiserver": "http://api:6443"})", R"({"apiserver": "https://"})",
                          R"({"apiserver": ""})", R"({"apiserver": "https://api\n  x: 1"})",
                          R"({"apiserver": "https://api\"x"})", R"({"apiserver": 6443})"}) {
    auto p = ParsePoolSettings(bad);
    ASSERT_FALSE(p.ok()) << bad;
    EXPECT_EQ(p.status().reason(), "settings_invalid") << bad;
    EXPECT_NE(p.status().message().find("https://HOST[:PORT]"), std::string::npos) << p.status().message();
  }
}

// --- the policy cache ---

TEST(PolicyCache, ParsesATextOnceAndANewTextAgain) {
  PolicyCache cache;
  const std::string a = "{\"version\": 1, \"tofu\": {\"sha256\": [9]}}";
  auto first = cache.Policy(a);
  auto again = cache.Policy(a);
  ASSERT_TRUE(first.ok());
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(first->get(), again->get());
  auto changed = cache.Policy("{\"version\": 1, \"tofu\": {\"sha256\": [8]}}");
  ASSERT_TRUE(changed.ok());
  EXPECT_NE(changed->get(), first->get());
  EXPECT_EQ(cache.Policy("").value(), nullptr);
  EXPECT_EQ(cache.Policy("{}").value(), nullptr);
  EXPECT_FALSE(cache.Policy("[").ok());
  EXPECT_EQ(cache.TofuValues("not json"), nullptr);
}

}  // namespace
}  // namespace rackgate::core::testing
