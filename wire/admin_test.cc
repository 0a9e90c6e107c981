// Tests of the admin API's bodies (pools, certificates, CSRs, events, audit): round trips, every truncation, and
// malformed fields.
#include "wire/admin_pools.h"

#include "wire/admin_audit.h"
#include "wire/admin_certificates.h"
#include "wire/admin_csrs.h"
#include "wire/admin_events.h"
#include "wire/admin_machines.h"

#include <gtest/gtest.h>

#include <string>

namespace rackgate::wire {
namespace {

template <typename Decode>
void ExpectEveryPrefixRefused(const std::string& body, Decode decode) {
  for (size_t n = 0; n < body.size(); ++n) {
    auto r = decode(std::string_view(body).substr(0, n));
    EXPECT_FALSE(r.ok()) << "prefix of " << n << " bytes accepted";
    if (!r.ok()) EXPECT_EQ(r.status().reason(), "bad_json") << n;
  }
}

PoolPutRequest SomePut() {
  PoolPutRequest r;
  r.settings_json = R"({"max_attestation_age":3600})";
  r.token_required = true;
  r.boot_policy_given = true;
  r.boot_policy_json = R"({"pcrs":{"7":["aa"]}})";
  r.templates = {{"attested", std::nullopt}, {"public", R"({"ignition":{"version":"3.4.0"}})"}};
  return r;
}

PoolView SomePool() {
  PoolView p;
  p.name = "workers";
  p.settings_json = R"({"max_attestation_age":3600})";
  p.token_required = true;
  p.boot_policy_mode = "observe";
  p.created_at = 1800000000;
  p.updated_at = 1800000100;
  p.boot_policy_json = R"({"pcrs":{"7":["aa"]}})";
  p.public_template_json = R"({"ignition":{"version":"3.4.0"}})";
  p.provisioning_tokens = {{1800000000, true, std::nullopt}, {1700000000, false, 1800003600}};
  p.provisioning_token = "tok";
  return p;
}

TEST(PoolPutRequest, RoundTripsAndTruncation) {
  const PoolPutRequest r = SomePut();
  const std::string body = EncodePoolPutRequest(r);
  auto back = DecodePoolPutRequest(body);
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(*back, r);
  ExpectEveryPrefixRefused(body, DecodePoolPutRequest);
  // Clearing the policy travels as null, not as an absent field.
  PoolPutRequest clear;
  clear.boot_policy_given = true;
  auto cleared = DecodePoolPutRequest(EncodePoolPutRequest(clear));
  ASSERT_TRUE(cleared.ok());
  EXPECT_EQ(*cleared, clear);
  auto empty = DecodePoolPutRequest("{}");
  ASSERT_TRUE(empty.ok());
  EXPECT_EQ(*empty, PoolPutRequest{});
}

TEST(PoolPutRequest, RefusesMalformedFields) {
  struct Case {
    const char* body;
    const char* reason;
    const char* message;
  };
  for (const Case& c : {Case{"", "bad_json", "body is not a JSON object"},
                        Case{"[]", "bad_json", "body is not a JSON object"},
                        Case{R"({"settings":[]})", "field_invalid", "settings must be an object"},
                        Case{R"({"token_required":"yes"})", "field_invalid", "token_required must be true or false"},
                        Case{R"({"templates":[]})", "field_invalid", "templates must be an object"}}) {
    auto r = DecodePoolPutRequest(c.body);
    ASSERT_FALSE(r.ok()) << c.body;
    EXPECT_EQ(r.status().reason(), c.reason) << c.body;
    EXPECT_EQ(r.status().message(), c.message) << c.body;
  }
  // An unknown template name is carried: the core refuses it by name.
  auto odd = DecodePoolPutRequest(R"({"templates":{"secret":{}}})");
  ASSERT_TRUE(odd.ok());
  ASSERT_EQ(odd->templates.size(), 1u);
  EXPECT_EQ(odd->templates[0].which, "secret");
}

TEST(PoolPutRequest, RefusesDeepNestingBeforeParsing) {
  const std::string deep = R"({"settings":)" + std::string(kMaxAdminJsonDepth, '[') +
                           std::string(kMaxAdminJsonDepth, ']') + "}";
  auto r = DecodePoolPutRequest(deep);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().reason(), "bad_json");
}

TEST(PoolView, RoundTripsAndTruncation) {
  const PoolView p = SomePool();
  const std::string body = EncodePoolView(p);
  auto back = DecodePoolView(body);
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(*back, p);
  ExpectEveryPrefixRefused(body, DecodePoolView);
  // The answer's exact text: keys sorted, as rackgated always answered.
  PoolView bare;
  bare.name = "p";
  bare.boot_policy_mode = "enforce";
  EXPECT_EQ(EncodePoolView(bare),
            R"({"boot_policy_mode":"enforce","created_at":0,"name":"p","provisioning_tokens":[],)"
            R"("settings":{},"templates":{},"token_required":false,"updated_at":0})");
}

TEST(PoolView, RefusesMalformedFields) {
  for (const char* body : {R"({"name":1})", R"({"token_required":"no"})", R"({"created_at":"x"})",
                           R"({"templates":[]})", R"({"provisioning_tokens":{}})", R"({"provisioning_tokens":[1]})",
                           R"({"provisioning_tokens":[{"valid_until":"x"}]})",
                           R"({"created_at":18446744073709551615})"}) {
    auto r = DecodePoolView(body);
    ASSERT_FALSE(r.ok()) << body;
    EXPECT_EQ(r.status().reason(), "field_invalid") << body;
  }
  // Unknown fields of an answer are ignored.
  EXPECT_TRUE(DecodePoolView(R"({"name":"p","later":1})").ok());
}

// Every list answer ({"KEY": [...]}, admin_json::ListBody): absent is an
// empty list; null or anything but a list is refused, naming the key.
TEST(ListAnswers, AbsentIsEmptyNullIsRefused) {
  const auto check = [](const char* key, auto decode) {
    auto absent = decode("{}");
    ASSERT_TRUE(absent.ok()) << key;
    EXPECT_TRUE(absent->empty()) << key;
    for (const char* value : {"null", "{}", "1"}) {
      auto r = decode(std::string("{\"") + key + "\":" + value + "}");
      ASSERT_FALSE(r.ok()) << key << " " << value;
      EXPECT_EQ(r.status().reason(), "field_invalid") << key;
      EXPECT_EQ(r.status().message(), std::string(key) + " must be a list") << key;
    }
  };
  check("pools", DecodePoolList);
  check("certificates", DecodeCertificateList);
  check("csrs", DecodeCsrList);
  check("events", DecodeEventList);
  check("entries", DecodeAuditList);
  check("machines", DecodeMachineList);
}

TEST(PoolList, RoundTripsAndTruncation) {
  const std::vector<PoolView> pools = {SomePool(), PoolView{}};
  const std::string body = EncodePoolList(pools);
  auto back = DecodePoolList(body);
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(*back, pools);
  ExpectEveryPrefixRefused(body, DecodePoolList);
  EXPECT_FALSE(DecodePoolList(R"({"pools":{}})").ok());
  EXPECT_FALSE(DecodePoolList(R"({"pools":[1]})").ok());
}

TEST(TokenRotate, RoundTripsAndRefuses) {
  const TokenRotateRequest r{3600};
  auto back = DecodeTokenRotateRequest(EncodeTokenRotateRequest(r));
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(*back, r);
  ExpectEveryPrefixRefused(EncodeTokenRotateRequest(r), DecodeTokenRotateRequest);
  auto missing = DecodeTokenRotateRequest("{}");
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().reason(), "field_missing");
  for (const char* body : {R"({"grace_seconds":"1h"})", R"({"grace_seconds":1.5})",
                           R"({"grace_seconds":18446744073709551615})"}) {
    auto bad = DecodeTokenRotateRequest(body);
    ASSERT_FALSE(bad.ok()) << body;
    EXPECT_EQ(bad.status().reason(), "field_invalid") << body;
    EXPECT_EQ(bad.status().message(), "grace_seconds is 0 to 30 days") << body;
  }

  const TokenRotation t{"workers", "tok", 1800003600};
  auto t_back = DecodeTokenRotation(EncodeTokenRotation(t));
  ASSERT_TRUE(t_back.ok());
  EXPECT_EQ(*t_back, t);
  ExpectEveryPrefixRefused(EncodeTokenRotation(t), DecodeTokenRotation);
  EXPECT_EQ(EncodeTokenRotation({"p", "tok", std::nullopt}), R"({"pool":"p","provisioning_token":"tok"})");
  EXPECT_FALSE(DecodeTokenRotation(R"({"provisioning_token":5})").ok());
}

TEST(CertificateList, RoundTripsAndTruncation) {
  const std::vector<CertificateView> certs = {
      {"0a1b", "node-1", "serving", "CN=system:node:node-1", {"node-1.example", "10.0.0.5"}, std::string(64, 'a'),
       true, 1800000000, 1800086400, 1800000001},
      {}};
  const std::string body = EncodeCertificateList(certs);
  auto back = DecodeCertificateList(body);
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(*back, certs);
  ExpectEveryPrefixRefused(body, DecodeCertificateList);
  EXPECT_EQ(EncodeCertificateList({}), R"({"certificates":[]})");
  for (const char* bad : {R"({"certificates":{}})", R"({"certificates":[1]})",
                          R"({"certificates":[{"sans":"a"}]})", R"({"certificates":[{"sans":[1]}]})",
                          R"({"certificates":[{"tpm_resident":1}]})", R"({"certificates":[{"not_after":"x"}]})"}) {
    auto r = DecodeCertificateList(bad);
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_EQ(r.status().reason(), "field_invalid") << bad;
  }
}

CsrView SomeCsr() {
  CsrView c;
  c.id = 7;
  c.hostname = "node-1";
  c.kind = "client";
  c.public_key_sha256 = std::string(64, 'b');
  c.usages = {"client auth", "digital signature"};
  c.tpm_resident = true;
  c.state = "denied";
  c.created_at = 1800000000;
  c.age_seconds = 90;
  c.current = false;
  c.csr_pem = "-----BEGIN CERTIFICATE REQUEST-----\n-----END CERTIFICATE REQUEST-----\n";
  c.decided_at = 1800000050;
  c.decided_by = "operator";
  c.deny_reason = "unknown rack";
  return c;
}

TEST(CsrView, RoundTripsAndTruncation) {
  // A kubelet's CSR in the API server that approver mode decided.
  CsrView kube = SomeCsr();
  kube.id = 0;
  kube.source = "kubernetes";
  kube.name = "node-csr-abc";
  kube.purpose = "join";
  kube.reason = "RackgateAttestedJoin";
  kube.uid = "0f6c2a1e-5b1d-4c8e-9a3b-7d2e1f0a9b8c";
  for (const CsrView& c : {SomeCsr(), CsrView{}, kube}) {
    const std::string body = EncodeCsrView(c);
    auto back = DecodeCsrView(body);
    ASSERT_TRUE(back.ok()) << back.status().ToString();
    EXPECT_EQ(*back, c);
    ExpectEveryPrefixRefused(body, DecodeCsrView);
  }
  // Undecided: no decided_at, decided_by or deny_reason on the wire.
  EXPECT_EQ(EncodeCsrView(CsrView{}),
            R"({"age_seconds":0,"created_at":0,"csr":"","current":true,"hostname":"","id":0,"kind":"",)"
            R"("public_key_sha256":"","source":"agent","state":"","tpm_resident":false,"usages":[]})");
  // An appliance before approver mode sends no source: the agent's.
  auto old = DecodeCsrView(R"({"id":3,"hostname":"h","kind":"client","state":"waiting"})");
  ASSERT_TRUE(old.ok()) << old.status().ToString();
  EXPECT_EQ(old->source, "agent");
}

TEST(CsrView, RefusesMalformedFields) {
  for (const char* body : {R"({"id":"7"})", R"({"hostname":1})", R"({"usages":"client auth"})",
                           R"({"usages":[1]})", R"({"tpm_resident":"yes"})", R"({"current":1})",
                           R"({"decided_at":"x"})", R"({"deny_reason":false})", R"({"id":18446744073709551615})"}) {
    auto r = DecodeCsrView(body);
    ASSERT_FALSE(r.ok()) << body;
    EXPECT_EQ(r.status().reason(), "field_invalid") << body;
  }
  EXPECT_TRUE(DecodeCsrView(R"({"id":7,"later":1})").ok());
}

TEST(CsrList, RoundTripsAndTruncation) {
  const std::vector<CsrView> csrs = {SomeCsr(), CsrView{}};
  const std::string body = EncodeCsrList(csrs);
  auto back = DecodeCsrList(body);
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(*back, csrs);
  ExpectEveryPrefixRefused(body, DecodeCsrList);
  EXPECT_EQ(EncodeCsrList({}), R"({"csrs":[]})");
  for (const char* bad : {R"({"csrs":{}})", R"({"csrs":[1]})", R"({"csrs":[{"state":2}]})"}) {
    auto r = DecodeCsrList(bad);
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_EQ(r.status().reason(), "field_invalid") << bad;
  }
}

TEST(CsrDecisionRequest, RoundTripsAndRefuses) {
  const CsrDecisionRequest r{"unknown rack"};
  const std::string body = EncodeCsrDecisionRequest(r);
  auto back = DecodeCsrDecisionRequest(body);
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(*back, r);
  // An empty body is a decision without a reason; any other prefix is refused.
  auto empty = DecodeCsrDecisionRequest("");
  ASSERT_TRUE(empty.ok());
  EXPECT_EQ(empty->reason, "");
  for (size_t n = 1; n < body.size(); ++n) {
    auto t = DecodeCsrDecisionRequest(std::string_view(body).substr(0, n));
    ASSERT_FALSE(t.ok()) << n;
    EXPECT_EQ(t.status().reason(), "bad_json") << n;
  }
  auto bad = DecodeCsrDecisionRequest(R"({"reason":5})");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().reason(), "field_invalid");
  EXPECT_EQ(DecodeCsrDecisionRequest("[]").status().reason(), "bad_json");
  // Issue 40: the uid of a kubelet CSR whose name was reused; left out when "".
  const CsrDecisionRequest with_uid{"checked", "0f6c2a1e-5b1d-4c8e-9a3b-7d2e1f0a9b8c"};
  auto uid_back = DecodeCsrDecisionRequest(EncodeCsrDecisionRequest(with_uid));
  ASSERT_TRUE(uid_back.ok());
  EXPECT_EQ(*uid_back, with_uid);
  EXPECT_EQ(EncodeCsrDecisionRequest(r), R"({"reason":"unknown rack"})");
  EXPECT_EQ(DecodeCsrDecisionRequest(R"({"uid":7})").status().reason(), "field_invalid");
  EXPECT_EQ(DecodeCsrDecisionRequest(std::string(100, '[') + std::string(100, ']')).status().reason(), "bad_json");
}

TEST(EventList, RoundTripsAndTruncation) {
  EventView e;
  e.id = 42;
  e.type = "machine_revoked";
  e.at = 1700000000;
  e.hostname = "node-7";
  e.pool = "workers";
  e.detail_json = R"({"actor":"alice","serial":"0a","why":"disk stolen"})";
  e.deliveries = {{"https://a.example/hook", 2, 1700000100, 0, ""},
                  {"https://b.example/hook", 3, std::nullopt, 1700000200, "HTTP 500"}};
  const std::vector<EventView> events = {e, EventView{}};
  const std::string body = EncodeEventList(events);
  auto back = DecodeEventList(body);
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(*back, events);
  ExpectEveryPrefixRefused(body, DecodeEventList);
  // The webhook body plus the deliveries: a delivered one has no next attempt.
  EXPECT_EQ(EncodeEventList({e}),
            R"({"events":[{"at":1700000000,"deliveries":[{"attempts":2,"delivered_at":1700000100,"last_error":"",)"
            R"("webhook":"https://a.example/hook"},{"attempts":3,"last_error":"HTTP 500","next_attempt_at":1700000200,)"
            R"("webhook":"https://b.example/hook"}],"detail":{"actor":"alice","serial":"0a","why":"disk stolen"},)"
            R"("id":42,"machine":{"hostname":"node-7","pool":"workers"},"type":"machine_revoked"}]})");
  EXPECT_EQ(EncodeEventList({}), R"({"events":[]})");
}

TEST(EventList, EncodesWhatCannotGoOutAsIs) {
  EventView e;
  e.detail_json = "[1,2]";  // not an object: {}
  e.hostname = "node-\xff";   // invalid UTF-8: replaced, not thrown
  std::string body;
  ASSERT_NO_THROW(body = EncodeEventList({e}));
  auto back = DecodeEventList(body);
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(back->front().detail_json, "{}");
  EXPECT_EQ(back->front().hostname, "node-\xef\xbf\xbd");
}

TEST(EventList, RefusesMalformedFields) {
  for (const char* bad : {R"({"events":{}})", R"({"events":[1]})", R"({"events":[{"id":"42"}]})",
                          R"({"events":[{"machine":"node-1"}]})", R"({"events":[{"machine":{"hostname":1}}]})",
                          R"({"events":[{"detail":[]}]})", R"({"events":[{"deliveries":{}}]})",
                          R"({"events":[{"deliveries":[1]}]})", R"({"events":[{"deliveries":[{"attempts":"2"}]}]})",
                          R"({"events":[{"deliveries":[{"delivered_at":true}]}]})",
                          R"({"events":[{"deliveries":[{"webhook":null,"last_error":5}]}]})"}) {
    auto r = DecodeEventList(bad);
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_EQ(r.status().reason(), "field_invalid") << bad;
  }
  EXPECT_TRUE(DecodeEventList(R"({"events":[{"id":1,"later":true}]})").ok());
}

TEST(AuditList, RoundTripsAndTruncation) {
  const AuditEntryView revoked{7, 1800000000, "alice", "revoke", "node-1", "disk stolen",
                               "enrolled", "revoked", R"({"ek_hash":"ab"})"};
  const std::vector<AuditEntryView> entries = {revoked, AuditEntryView{}};
  const std::string body = EncodeAuditList(entries);
  auto back = DecodeAuditList(body);
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(*back, entries);
  ExpectEveryPrefixRefused(body, DecodeAuditList);
  EXPECT_EQ(EncodeAuditList({revoked}),
            R"({"entries":[{"action":"revoke","actor":"alice","at":1800000000,"detail":{"ek_hash":"ab"},)"
            R"("from_state":"enrolled","hostname":"node-1","id":7,"to_state":"revoked","why":"disk stolen"}]})");
  // A stored detail that is no JSON is left out.
  AuditEntryView bad = revoked;
  bad.detail_json = "{not json";
  auto without = DecodeAuditList(EncodeAuditList({bad}));
  ASSERT_TRUE(without.ok());
  EXPECT_FALSE(without->front().detail_json.has_value());
}

TEST(AuditList, RefusesMalformedFields) {
  for (const char* bad : {R"({"entries":{}})", R"({"entries":[1]})", R"({"entries":[{"id":"7"}]})",
                          R"({"entries":[{"at":1.5}]})", R"({"entries":[{"actor":1}]})",
                          R"({"entries":[{"to_state":false}]})", R"({"entries":[{"why":[]}]})"}) {
    auto r = DecodeAuditList(bad);
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_EQ(r.status().reason(), "field_invalid") << bad;
  }
  EXPECT_TRUE(DecodeAuditList(R"({"entries":[{"id":1,"later":true}]})").ok());
}

TEST(AuditChain, RoundTripsAndTruncation) {
  const AuditChainView intact{true, 12, 12, std::string(64, 'a'), 0, ""};
  const AuditChainView broken{false, 4, 4, std::string(64, 'b'), 5, "hash_mismatch"};
  for (const AuditChainView& r : {intact, broken}) {
    const std::string body = EncodeAuditChain(r);
    auto back = DecodeAuditChain(body);
    ASSERT_TRUE(back.ok()) << back.status().ToString();
    EXPECT_EQ(*back, r);
    ExpectEveryPrefixRefused(body, DecodeAuditChain);
  }
  // An intact chain's report names no bad row.
  EXPECT_EQ(EncodeAuditChain({true, 0, 0, "g", 0, ""}), R"({"head_hash":"g","head_id":0,"intact":true,"rows":0})");
  for (const char* bad : {R"({"intact":"yes"})", R"({"rows":"4"})", R"({"head_hash":1})", R"({"bad_row_id":1.5})",
                          R"({"problem":[]})"}) {
    auto r = DecodeAuditChain(bad);
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_EQ(r.status().reason(), "field_invalid") << bad;
  }
}

TEST(AuditChain, AddsTheReportBesideARefusal) {
  const AuditChainView broken{false, 4, 4, "h", 5, "hash_mismatch"};
  EXPECT_EQ(AddAuditChainReport(R"({"error":{"reason":"audit_chain_broken"}})", broken),
            R"({"error":{"reason":"audit_chain_broken"},"report":{"bad_row_id":5,"head_hash":"h","head_id":4,)"
            R"("intact":false,"problem":"hash_mismatch","rows":4}})");
  EXPECT_EQ(AddAuditChainReport("not json", broken), "not json");
}

}  // namespace
}  // namespace rackgate::wire
